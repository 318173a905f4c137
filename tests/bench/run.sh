#!/usr/bin/env bash
# `make bench` inside the trixie root (repo at /src, after `make module sims`):
# runs tests/bench/[0-9]*.sh in a QEMU guest (tests/guest/run.sh), then the
# report (tests/bench/report.py): a table with the targets and the JSON rows.
#
# Env (all optional; tests/README.md "Benchmark"):
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
#   BENCH_TIMEOUT   seconds before the guest is killed (default 1500)
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
icount=${BENCH_ICOUNT:-shift=0,sleep=off}
qemu_args=
[ "$icount" = off ] || qemu_args="-icount $icount"
echo "bench: QEMU ${qemu_args:-without -icount: guest time is real time, other work on the host skews it}"
echo "bench: host load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
GUEST_QEMU_ARGS=$qemu_args GUEST_OUT=$OUT GUEST_SCENARIO_DIR=tests/bench GUEST_SCENARIOS='[0-9]*' GUEST_FILES=$OUT/bench.env \
	GUEST_TIMEOUT=${BENCH_TIMEOUT:-1500} GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
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
