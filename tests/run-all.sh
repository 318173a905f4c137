#!/usr/bin/env bash
# `make check`: every suite, each ending with "<SUITE>-SUMMARY N passed, N failed",
# then the total on the last line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/lib/summary.sh
. tests/lib/summary.sh
mkdir -p build/logs
pass=0 fail=0
# Busy and total CPU time since boot, from /proc/stat (idle and iowait are not busy).
cpu_times() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat; }
# How many of the host's CPUs were busy on average since "busy total" ($1 $2):
# everything on the host, the background debug kernel build included.
cpus_busy() { # "busy total"
	local busy total busy0 total0
	read -r busy total < <(cpu_times)
	read -r busy0 total0 <<<"$1"
	awk -v b=$((busy - busy0)) -v t=$((total - total0)) -v n="$(nproc)" 'BEGIN { printf "%.1f of %d CPUs busy", t ? n * b / t : 0, n }'
}
# NVPM_CHECK_SINCE and NVPM_CHECK_TIMES (the suites done, seconds each): the
# suites' progress lines (step) add them, so that the last lines of a run
# cut short say where its time went.
export NVPM_CHECK_SINCE=$EPOCHSECONDS NVPM_CHECK_TIMES=
run_suite() { # name command...
	local name=$1 log=build/logs/$1.log t1=$SECONDS c1
	c1=$(cpu_times)
	shift
	echo "=== $name"
	"$@" 2>&1 | tee "$log"
	summary_add "$log" || echo "=== $name: no summary (the suite broke before reporting), counted as 1 failure"
	echo "=== $name in $((SECONDS - t1)) s ($(cpus_busy "$c1"))"
	NVPM_CHECK_TIMES+="${NVPM_CHECK_TIMES:+, }$name $((SECONDS - t1))"
}
t0=$SECONDS
c0=$(cpu_times)
echo "=== provisioning the trixie root and Debian's 7.3 tree"
scripts/provision.sh || echo "=== provisioning failed: the suites will say what it broke"
echo "=== provisioned in $((SECONDS - t0)) s ($(cpus_busy "$c0"))"
NVPM_CHECK_TIMES="provisioning $((SECONDS - t0))"
# The project's guest kernels, when not cached, build in the background
# from here, one after the other (two cores: never two kernel builds at
# once), at nice 19 as always: the debug kernel, then the 64 KiB-page arm64
# kernel (each about 20 minutes of two cores on a fast host). The suites before
# debug mostly keep one core busy with a guest, and the builds take the
# other. The debug suite waits for the first (wait_build), arm64-64k, last,
# for the second.
debug_kernel_pid= k64_kernel_pid=
if ! scripts/debug-kernel.sh cached >/dev/null 2>&1; then
	echo "=== the debug kernel builds in the background (log: build/logs/debug-kernel.log)"
	scripts/debug-kernel.sh build >build/logs/debug-kernel.log 2>&1 &
	debug_kernel_pid=$!
fi
# (cached fails too while Debian's arm64 tree, which it is built over, is not provisioned.)
if ! scripts/arm64-64k-kernel.sh cached >/dev/null 2>&1; then
	echo "=== the 64K arm64 kernel builds in the background after it (log: build/logs/arm64-64k-kernel.log)"
	{
		while [ -n "$debug_kernel_pid" ] && kill -0 "$debug_kernel_pid" 2>/dev/null; do sleep 20; done
		KARCH=arm64 scripts/provision.sh && scripts/arm64-64k-kernel.sh build
	} >build/logs/arm64-64k-kernel.log 2>&1 &
	k64_kernel_pid=$!
fi
# The packaging suite's root (3-5 minutes cold, mostly downloads and dpkg)
# too; the suite waits for it on its lock, and builds it itself if this failed.
nice -n 19 tests/packaging/root.sh >build/logs/packaging-root.log 2>&1 &
packaging_root_pid=$!
trap 'kill -- $debug_kernel_pid $k64_kernel_pid $packaging_root_pid 2>/dev/null' EXIT
# wait_build NAME PID LOG: waits for a background build, showing its
# progress every minute; its failure shows in the suite that needs it,
# which then builds it itself.
wait_build() {
	[ -n "$2" ] || return 0
	local t1=$SECONDS
	while kill -0 "$2" 2>/dev/null; do
		echo "=== waiting for the $1's build ($((SECONDS - t1)) s): $(tail -n1 "$3" | cut -c1-100)"
		sleep 60 &
		wait $! 2>/dev/null
	done
	wait "$2" || echo "=== the $1's background build failed: see $3"
	echo "=== the $1's build ended ($((SECONDS - t1)) s waited)"
}
run_suite host tests/host/run.sh
# Two guests side by side: 473 s of guests in one, 323 s in two
# (tests/guest/README.md, "Guests side by side").
run_suite guest env GUEST_SHARDS=2 make --no-print-directory check-guest
# NVIDIA's own module through the same scenarios (tests/anchor/run.sh).
run_suite anchor make --no-print-directory check-anchor
run_suite kernels tests/kernels/run.sh
# Debian's arm64 7.3, 4 KiB and 16 KiB pages, cross-built, under TCG.
run_suite arm64 tests/arm64/run.sh
# It rebuilds the module and simulators against the debug kernel (built
# first when not cached).
wait_build "debug kernel" "$debug_kernel_pid" build/logs/debug-kernel.log
debug_kernel_pid= # ended: the EXIT trap must not kill another process of that number
run_suite debug tests/debug/run.sh
# NVIDIA's module on the debug kernel: 43, where KASAN reports its stale reads.
run_suite anchor-debug make --no-print-directory check-anchor-debug
# After debug: DKMS against the debug kernel (clang, Rust crates in its headers) is
# part of it, and here its absence is a failure, not a skip.
run_suite packaging env NVPM_PKGTEST_DEBUG_KERNEL=1 NVPM_PKGTEST_CARRIED=1 tests/packaging/run.sh
# Grace's page size: the project's 64 KiB-page arm64 kernel, its two
# runs (kernel and carried mode) each on two guests side by side.
wait_build "64K arm64 kernel" "$k64_kernel_pid" build/logs/arm64-64k-kernel.log
k64_kernel_pid=
run_suite arm64-64k env NVPM_ARM64_FLAVOURS=arm64-64k GUEST_SHARDS=2 tests/arm64/run.sh
echo "=== all suites in $((SECONDS - t0)) s ($(cpus_busy "$c0"))"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
