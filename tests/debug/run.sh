#!/usr/bin/env bash
# make check's "debug" suite: the load test, symbol versions and the stress
# scenarios (01, 02, 51-55) on the project's KASAN/lockdep/kmemleak kernel
# (scripts/debug-kernel.sh, built first when not cached), the module in
# carried mode. tests/debug/README.md says what the kernel has and costs.
# Ends with the guest runner's GUEST-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
exec make --no-print-directory check-debug-stress NVPM_RUST=carried
