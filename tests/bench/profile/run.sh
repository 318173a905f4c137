#!/usr/bin/env bash
# `make bench-profile` inside the trixie root (repo at /src, after `make
# module sims`): where a registration's guest instructions go, per function,
# for a client and the bare provider of the same API (tests/bench/README.md,
# "Where the instructions go").
#
# One guest boot per step, each counted from boot to power-off by the QEMU
# plugin tests/bench/profile/tbcount.so: "base" (boot, stack, warm-up),
# then the same plus PROFILE_COUNT registrations of each client. A step
# minus base, over PROFILE_COUNT, is per registration. Kernel symbols come
# from one more boot (nokaslr: fixed addresses), cached per kernel.
#
# Env: PROFILE_CLIENTS (default "nv_mem_nc nv_mem"), PROFILE_SIZE (2M),
# PROFILE_LAYOUT (fragmented), PROFILE_COUNT (10000), PROFILE_COST (0),
# PROFILE_OUT (build/bench-profile).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${PROFILE_OUT:-build/bench-profile}
clients=${PROFILE_CLIENTS:-nv_mem_nc nv_mem}
size=${PROFILE_SIZE:-2M}
layout=${PROFILE_LAYOUT:-fragmented}
count=${PROFILE_COUNT:-10000}
cost=${PROFILE_COST:-0}
mkdir -p "$OUT"
gcc-14 -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$OUT/tbcount.so" tests/bench/profile/tbcount.c

# step NAME: one boot; its blocks in $OUT/NAME/blocks.txt, symbols in its results.
step() {
	printf 'PROFILE_STEP=%s\nPROFILE_SIZE=%s\nPROFILE_LAYOUT=%s\nPROFILE_COUNT=%s\nPROFILE_COST=%s\n' \
		"$1" "$size" "$layout" "$count" "$cost" >"$OUT/profile.env"
	rm -rf "${OUT:?}/$1"
	mkdir -p "$OUT/$1"
	echo "bench-profile: step $1 ($(date +%T))"
	GUEST_SHARDS=1 GUEST_OUT=$OUT/$1 GUEST_SCENARIO_DIR=tests/bench/profile GUEST_SCENARIOS='[0-9]*' \
		GUEST_FILES=$OUT/profile.env GUEST_APPEND=nokaslr GUEST_TIMEOUT=${PROFILE_TIMEOUT:-1500} \
		GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
		GUEST_QEMU_ARGS="-icount shift=0,sleep=off -plugin $PWD/$OUT/tbcount.so,arg=out=$PWD/$OUT/$1/blocks.txt" \
		tests/guest/run.sh >"$OUT/$1.log" 2>&1 || {
		echo "bench-profile: step $1 failed, see $OUT/$1.log"
		grep -E 'FAIL' "$OUT/$1.log" || true
		exit 1
	}
	[ -s "$OUT/$1/blocks.txt" ] || { echo "bench-profile: the plugin wrote nothing for $1"; exit 1; }
}

ksyms=$OUT/ksyms-$KREL.txt
if [ ! -s "$ksyms" ]; then
	step ksyms
	grep '^KSYM ' "$OUT/ksyms/results.log.txt" >"$ksyms.tmp"
	mv "$ksyms.tmp" "$ksyms"
fi
done_steps=" "
# once NAME: the step unless it ran already.
once() {
	case $done_steps in *" $1 "*) return ;; esac
	step "$1"
	done_steps="$done_steps$1 "
}
once base
pairs=()
for c in $clients; do
	case $c in
	nv_mem_nc) bare=bare_p ;;
	nv_mem) bare=bare_r ;;
	*) echo "bench-profile: unknown client $c (nv_mem_nc, nv_mem)"; exit 2 ;;
	esac
	once "$bare"
	once "$c"
	pairs+=("$c:$bare")
done
python3 tests/bench/profile/report.py --out "$OUT" --ksyms "$ksyms" --count "$count" \
	--what "$size $layout, cost_us=$cost" "${pairs[@]}"
