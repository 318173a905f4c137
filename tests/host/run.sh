#!/usr/bin/env bash
# Host tests: the workspace's cargo tests (pure logic shared with the module),
# the loom models of the invalidation protocol (tests/loom), the guest
# runner's spreading of scenarios over guests (tests/guest/shards-test.sh)
# and where a build finds the CRCs of the driver and the RDMA core
# (tests/neighbours/lookup.sh, in the trixie root for its depmod).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$(cargo test --workspace --color never 2>&1)
rc=$?
# The invalidation protocol under loom: a crate outside the workspace
# (tests/loom/Cargo.toml says why), in release (the models run ~10x faster).
loom=$(cargo test --release --color never --manifest-path tests/loom/Cargo.toml --target-dir target 2>&1)
lrc=$?
out=$(printf '%s\n%s\n' "$out" "$loom")
[ $lrc = 0 ] || rc=$lrc
printf '%s\n' "$out" | grep -E '^test .* FAILED$|^error|panicked' || true
read -r pass fail < <(printf '%s\n' "$out" | awk '/^test result:/ {
	for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
} END { print p + 0, f + 0 }')
if [ $rc != 0 ] && [ "$fail" = 0 ]; then
	printf '%s\n' "$out" | tail -n 30
	fail=1
fi
# shellcheck source=tests/lib/summary.sh
. tests/lib/summary.sh
mkdir -p build/logs
tests/guest/shards-test.sh >build/logs/shards.log 2>&1
grep -v '^  PASS ' build/logs/shards.log || true
summary_add build/logs/shards.log SHARDS || echo "  FAIL shards: no summary, see build/logs/shards.log"
# make check provisions the root first; make check-host alone may not have.
if [ -r "${NVPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvidia-peermem-rs}/kernel.env" ]; then
	# The doctor's lookup, which lookup.sh holds to find-symvers.sh's.
	cargo build --quiet --example exporters -p nvidia-peermem-doctor 2>build/logs/exporters-build.log ||
		echo "  FAIL neighbours/doctor-lookup-builds: see build/logs/exporters-build.log"
	scripts/in-chroot.sh env NVPM_EXPORTERS=/src/target/debug/examples/exporters tests/neighbours/lookup.sh >build/logs/lookup.log 2>&1
	grep -v '^  PASS ' build/logs/lookup.log || true
	summary_add build/logs/lookup.log NEIGHBOURS || echo "  FAIL neighbours: no summary, see build/logs/lookup.log"
else
	echo "SKIP neighbours/*: not provisioned (make, or make check, provisions the trixie root)"
fi
echo "HOST-SUMMARY $pass passed, $fail failed"
[ "$fail" = 0 ]
