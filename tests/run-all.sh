#!/usr/bin/env bash
# `make check`: every suite, each ending with "<SUITE>-SUMMARY N passed, N failed",
# then the total on the last line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/summary.sh
. tests/summary.sh
mkdir -p build/logs
pass=0 fail=0
run_suite() { # name command...
	local name=$1 log=build/logs/$1.log t1=$SECONDS
	shift
	echo "=== $name"
	"$@" 2>&1 | tee "$log"
	summary_add "$log" || echo "=== $name: no summary (the suite broke before reporting), counted as 1 failure"
	echo "=== $name in $((SECONDS - t1)) s"
}
t0=$SECONDS
run_suite host tests/host/run.sh
run_suite guest make --no-print-directory check-guest
# NVIDIA's own module through the same scenarios (tests/anchor/run.sh).
run_suite anchor make --no-print-directory check-anchor
run_suite kernels tests/kernels.sh
# Debian's arm64 7.3, 4 KiB and 16 KiB pages, cross-built, under TCG.
run_suite arm64 tests/arm64.sh
# It rebuilds the module and simulators against the debug kernel (built
# first when not cached).
run_suite debug make --no-print-directory check-debug-stress NVPM_RUST=carried
# NVIDIA's module on the debug kernel: 43, where KASAN reports its stale reads.
run_suite anchor-debug make --no-print-directory check-anchor-debug
# After debug: DKMS against the debug kernel, a CONFIG_MODVERSIONS kernel, is
# part of it, and here its absence is a failure, not a skip.
run_suite packaging env NVPM_PKGTEST_MODVERSIONS=1 NVPM_PKGTEST_CARRIED=1 tests/packaging/run.sh
echo "=== all suites in $((SECONDS - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
