#!/usr/bin/env bash
# `make check`: every suite, each ending with "<SUITE>-SUMMARY N passed, N failed",
# then the total on the last line.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/logs
total_pass=0 total_fail=0
run_suite() { # name command...
	local name=$1 log=build/logs/$1.log line p f
	shift
	echo "=== $name"
	"$@" 2>&1 | tee "$log"
	line=$(grep -E '^[A-Z-]+-SUMMARY [0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
	if [ -z "$line" ]; then
		echo "=== $name: no summary (the suite broke before reporting), counted as 1 failure"
		total_fail=$((total_fail + 1))
		return
	fi
	p=$(echo "$line" | sed 's/.*SUMMARY \([0-9]*\) passed.*/\1/')
	f=$(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
}
t0=$SECONDS
run_suite host tests/host/run.sh
run_suite guest make --no-print-directory check-guest
# NVIDIA's own module through the same scenarios (tests/anchor/run.sh).
run_suite anchor make --no-print-directory check-anchor
run_suite packaging tests/packaging/run.sh
run_suite kernels tests/kernels.sh
# Last: it rebuilds the module and simulators against the debug kernel.
run_suite debug make --no-print-directory check-debug-stress
echo "=== all suites in $((SECONDS - t0)) s"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
