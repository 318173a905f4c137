#!/usr/bin/env bash
# `make bench` inside the trixie root (repo at /src, after `make module sims`):
# runs tests/bench/[0-9]*.sh in a QEMU guest (tests/guest/run.sh), then the
# report (tests/bench/report.py): a table with the targets and the JSON rows.
#
# Env (all optional; tests/bench/README.md):
#   BENCH_COSTS     cost_us settings to run, µs per nvidia_p2p_* call (default "0 20")
#   BENCH_SIZES     buffer sizes (default "64K 2M 64M 1G")
#   BENCH_LAYOUTS   GPU layouts (default "contiguous fragmented")
#   BENCH_REPS      repetitions of each timed loop (default 5)
#   BENCH_LOOP_MS   target length of one timed loop in guest ms (default 100)
#   BENCH_MAX_COUNT most cycles in one loop (default 20000)
#   BENCH_MODE      MOFED generation of the core simulator (default modern)
#   BENCH_CHECKS    1: timed loops keep the core simulator's O(SGEs) checks (default 0)
#   BENCH_ICOUNT    QEMU -icount setting (default shift=0,sleep=off: guest time is
#                   1 ns per guest instruction, idle time is skipped; "off": real time)
#   BENCH_TIMEOUT   seconds before the guest is killed (default 3600)
#   BENCH_ANCHOR    0: no anchor rows (default 1: NVIDIA's nvidia-peermem,
#                   tests/anchor/build.sh, fetched and built if not cached)
#   BENCH_CARRIED   0: no carried rows (default 1: this module built again in
#                   carried mode with the same rustc, compared with its own mode)
#   BENCH_OUT       output directory (default build/bench); the JSON goes to
#                   build/bench.json (the Makefile copies it to $BENCH_JSON)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${BENCH_OUT:-build/bench}
mkdir -p "$OUT"
{
	for v in BENCH_COSTS BENCH_SIZES BENCH_LAYOUTS BENCH_REPS BENCH_LOOP_MS BENCH_MAX_COUNT BENCH_MODE BENCH_CHECKS; do
		[ -z "${!v:-}" ] || printf "%s='%s'\n" "$v" "${!v}"
	done
} >"$OUT/bench.env"
# The anchor (NVIDIA's module) as /tests/anchor.ko; without it the bench
# runs this module and the ideal client only.
files=$OUT/bench.env
rm -f "$OUT/anchor.ko"
if [ "${BENCH_ANCHOR:-1}" != 0 ]; then
	if tests/anchor/build.sh >"$OUT/anchor-build.log" 2>&1; then
		cp build/anchor/nvidia_peermem.ko "$OUT/anchor.ko"
		files="$files $OUT/anchor.ko"
		echo "bench: anchor $(sed -n 's/^ANCHOR_VERSION=//p' build/anchor/anchor.env) (NVIDIA's nvidia-peermem)"
	else
		echo "bench: no anchor rows: tests/anchor/build.sh failed (see $OUT/anchor-build.log)"
	fi
fi
# This module in carried mode as /tests/carried.ko (the kernel's crates built
# into it), then the tree rebuilt in its own mode for the guest's
# nvidia_peermem.ko. Each build's size, for the report.
rm -f "$OUT/carried.ko"
if [ "${BENCH_CARRIED:-1}" != 0 ]; then
	kmake() { make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" "$@" module; }
	own=$(kbuild/rust-mode.sh "$KDIR" 2>/dev/null)
	own_size=$(stat -c %s nvidia_peermem.ko)
	if [ "$own" = carried ]; then
		echo "bench: no carried rows: this kernel builds the module in carried mode already"
	elif kmake NVPM_RUST=carried >"$OUT/carried-build.log" 2>&1; then
		cp nvidia_peermem.ko "$OUT/carried.ko"
		files="$files $OUT/carried.ko"
		echo "bench: carried mode's nvidia_peermem.ko $(stat -c %s "$OUT/carried.ko") bytes, $own mode's $own_size"
	else
		echo "bench: no carried rows: the carried build failed (see $OUT/carried-build.log)"
	fi
	kmake >>"$OUT/carried-build.log" 2>&1 || {
		echo "bench: the module did not build again in $own mode (see $OUT/carried-build.log)"
		exit 1
	}
fi
icount=${BENCH_ICOUNT:-shift=0,sleep=off}
qemu_args=
[ "$icount" = off ] || qemu_args="-icount $icount"
echo "bench: QEMU ${qemu_args:-without -icount: guest time is real time, other work on the host skews it}"
echo "bench: host load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
GUEST_SHARDS=1 GUEST_QEMU_ARGS=$qemu_args GUEST_OUT=$OUT GUEST_SCENARIO_DIR=tests/bench GUEST_SCENARIOS='[0-9]*' GUEST_FILES=$files \
	GUEST_TIMEOUT=${BENCH_TIMEOUT:-3600} GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
	tests/guest/run.sh >"$OUT/guest.log" 2>&1 || rc=$?
grep -E '^guest:|FAIL|SUMMARY' "$OUT/guest.log" || true
echo "bench: host load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# The bench lines from the results port (tests/guest/run.sh), the console's
# if that port stayed empty.
log=$OUT/results.log.txt
grep -q '^NVPM-BENCH ' "$log" 2>/dev/null || log=$OUT/serial.log.txt
python3 tests/bench/report.py "$log" --json build/bench.json --module nvidia_peermem.ko \
	--icount "$icount" || rc=1
if [ "$rc" != 0 ]; then
	echo "bench: the guest run failed (see $OUT/guest.log and $OUT/serial.log.txt)"
fi
exit "$rc"
