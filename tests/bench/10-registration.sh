# The registration benchmark (`make bench`, tests/bench/README.md),
# run in the guest as a scenario of tests/bench.
#
# Up to four stacks one after the other in this guest, each the simulators
# and one module: this module ("ours", persistent_api_support=0, NVIDIA's legacy
# layout, so that both clients are registered), the same module built in
# carried mode ("carried", /tests/carried.ko: the kernel's Rust crates built
# into it; skipped when absent), NVIDIA's nvidia-peermem
# ("anchor", /tests/anchor.ko, tests/anchor/build.sh; skipped when absent)
# and peer_test_client as the best any client could do through this core
# ("ideal": one pin per registration, coalesced SGEs, no module reference per
# context). For each stack, buffer size and layout, its two clients and the
# bare provider register and deregister the same GPU buffer through the
# MOFED core simulator's timed loop (`core reg|direct ... --count N --nocheck`):
#   bare_p     direct mode, nvidia_p2p_get_pages_persistent (no client)
#   P          the stack's persistent client: nv_mem_nc, anchor_nc, ideal_nc
#   bare_r     direct mode, nvidia_p2p_get_pages with a free callback
#   R          its revocable client (MRs with --inval): nv_mem, anchor, ideal
# Each client is compared with the bare provider of the same API, in
# adjacent loops whose order alternates; the report compares this module's
# rows with the anchor's and the ideal's of the same cell.
#
# Output: "NVPM-BENCH KIND key=value ..." lines for tests/bench/report.py;
# NVPM-RESULT lines only for what must hold whatever the timings (every SG
# list is checked once per cell, loops leave nothing behind, no violation).
#
# Parameters (/tests/bench.env, written by `make bench`): BENCH_COSTS (cost_us
# values, µs per nvidia_p2p_* call), BENCH_SIZES, BENCH_LAYOUTS, BENCH_REPS,
# BENCH_LOOP_MS (target length of one timed loop), BENCH_MAX_COUNT, BENCH_MODE,
# BENCH_CHECKS (1: timed loops with the core simulator's own O(SGEs) checks
# and snapshot, i.e. without --nocheck; the default 0 is the fair comparison).
# shellcheck shell=sh disable=SC2086 # $nocheck: empty or one word
. /tests/lib.sh
. /tests/client-lib.sh
# shellcheck source=/dev/null
[ ! -r /tests/bench.env ] || . /tests/bench.env
: "${BENCH_COSTS:=0 20}" "${BENCH_SIZES:=64K 2M 64M 1G}"
: "${BENCH_LAYOUTS:=contiguous fragmented}" "${BENCH_REPS:=5}"
: "${BENCH_LOOP_MS:=100}" "${BENCH_MAX_COUNT:=20000}" "${BENCH_MODE:=modern}"
: "${BENCH_CHECKS:=0}"
nocheck=--nocheck
[ "$BENCH_CHECKS" = 0 ] || nocheck=

bench() { report "NVPM-BENCH $*"; }

bytes() {
	case $1 in
	*K) echo $((${1%K} << 10)) ;;
	*M) echo $((${1%M} << 20)) ;;
	*G) echo $((${1%G} << 30)) ;;
	*) echo "$1" ;;
	esac
}

# counters: the GPU simulator's counters and the module's stats (this
# module's only), one "NAME VALUE" per line (stats prefixed "stats.").
counters() {
	nvpm-tool gpu counters
	sed 's/^/stats./' "$STATS" 2>/dev/null
}

# delta BEFORE AFTER: "NAME=DELTA ..." of the counters that matter here.
delta() {
	{
		printf '%s\n' "$1" | sed 's/^/b /'
		printf '%s\n' "$2" | sed 's/^/a /'
	} | awk '$1 == "b" { b[$2] = $3 } $1 == "a" { a[$2] = $3 }
		END {
			n = split("calls.get_pages calls.get_pages_persistent calls.dma_map_pages calls.dma_unmap_pages calls.put_pages calls.put_pages_persistent calls.free_page_table calls.free_dma_mapping violations stats.sges stats.registrations stats.deregistrations", k, " ")
			for (i = 1; i <= n; i++) {
				name = k[i]; sub(/^(calls|stats)\./, "", name)
				printf "%s=%d ", name, a[k[i]] - b[k[i]]
			}
		}'
}

# verify T CLIENT VA SIZE: one registration, its owner and SG list checked;
# sets nmap to its SGE count (0 if it failed).
verify() {
	v_t=$1 v_c=$2
	nmap=0
	if ! v_id=$(reg_as "$v_c" "$3" "$4" 2>&1); then
		fail "$v_t/reg" "$v_id"
		return
	fi
	case $v_c in
	bare_*) ;;
	anchor*) expect_eq "$v_t/owner" "nv_mem${v_c#anchor}" "$(nvpm-tool core show "$v_id" client 2>&1)" ;;
	*) expect_eq "$v_t/owner" "$v_c" "$(nvpm-tool core show "$v_id" client 2>&1)" ;;
	esac
	expect_ok "$v_t/sg" nvpm-tool expect-sg "$v_id"
	nmap=$(nvpm-tool core show "$v_id" nmap)
	nvpm-tool core dereg "$v_id" || fail "$v_t/dereg" "dereg failed"
}

# loop T CLIENT VA SIZE COUNT: one timed loop; sets res to
# "elapsed_ns=T drain_ns=D" and the counter deltas. A loop lasts until the
# GPU holds no pin (drain: from the loop's end until then, 0 if none was
# left; a client that unpinned after deregistration returned would pay it
# here, as this module's revocable client did until 2026-11-22).
loop() {
	l_t=$1 l_c=$2 l_va=$3 l_size=$4 l_n=$5
	l_before=$(counters)
	if ! l_out=$(reg_as "$l_c" "$l_va" "$l_size" --count "$l_n" $nocheck --drain 2>&1); then
		fail "$l_t/loop" "$l_out"
		return 1
	fi
	l_after=$(counters)
	res="$(echo "$l_out" | awk '{print "elapsed_ns=" $4 " drain_ns=" $8}') $(delta "$l_before" "$l_after")"
}

# stack_load STACK: the simulators and STACK's module; sets P and R, its
# persistent and revocable client rows.
stack_load() {
	case $1 in
	ours)
		load_stack "bench-$1" "mode=$BENCH_MODE" "" "persistent_api_support=0" || return 1
		P=nv_mem_nc R=nv_mem
		;;
	carried)
		load_stack_sims "bench-$1" "mode=$BENCH_MODE" && insmod /tests/carried.ko persistent_api_support=0 || {
			fail "bench-$1/load" "this module built in carried mode"
			return 1
		}
		P=nv_mem_nc R=nv_mem
		;;
	anchor)
		load_stack_sims "bench-$1" "mode=$BENCH_MODE" && insmod /tests/anchor.ko || {
			fail "bench-$1/load" "NVIDIA's nvidia-peermem"
			return 1
		}
		P=anchor_nc R=anchor
		;;
	ideal)
		load_stack_sims "bench-$1" "mode=$BENCH_MODE" &&
			modprobe peer_test_client name=ideal nc=1 coalesce=1 pin_in_acquire=1 hold_module=0 || {
			fail "bench-$1/load" "peer_test_client"
			return 1
		}
		P=ideal_nc R=ideal
		;;
	esac
}

# load_stack_sims NAME CORE_PARAMS: the simulators alone, fresh.
load_stack_sims() {
	for m in peer_test_client nvidia_peermem mofed_peer_sim nvidia; do ! loaded $m || rmmod $m; done
	# shellcheck disable=SC2086 # parameters are words
	modprobe mofed_peer_sim $2 && modprobe nvidia
}

stack_unload() {
	case $1 in
	ours | carried) unload_stack "bench-$1" ;;
	*)
		expect_ok "bench-$1/clean" nvpm-tool expect-clean
		for m in peer_test_client nvidia_peermem mofed_peer_sim nvidia; do ! loaded $m || rmmod $m; done
		;;
	esac
}

stacks="ours"
[ ! -r /tests/carried.ko ] || stacks="$stacks carried"
[ ! -r /tests/anchor.ko ] || stacks="$stacks anchor"
stacks="$stacks ideal"
for stack in $stacks; do
stack_load $stack || continue
[ -n "${env_done:-}" ] || bench "env checks=$BENCH_CHECKS mode=$BENCH_MODE max_seg_size=$(cat /sys/module/mofed_peer_sim/parameters/max_seg_size) cpus=$(nproc) reps=$BENCH_REPS loop_ms=$BENCH_LOOP_MS kernel=$(uname -r) stacks=$(echo $stacks | tr ' ' ,)"
env_done=1
# Warm-up: the first loops after boot and load ran tens of times slower for a few
# hundred guest ms (one-time work elsewhere in the guest); spend that first.
va=$(nvpm-tool gpu alloc 64K)
for c in bare_p bare_r $P $R; do
	reg_as "$c" "$va" 64K --count 20000 $nocheck --drain >/dev/null || fail "$stack/warm-up/$c" "loop failed"
done
nvpm-tool gpu free "$va" >/dev/null
for size in $BENCH_SIZES; do
	b=$(bytes "$size")
	for layout in $BENCH_LAYOUTS; do
		cell="$stack/$size-$layout"
		va=$(nvpm-tool gpu alloc "$size" --layout "$layout") || {
			fail "$cell/alloc" "$va"
			continue
		}
		nvpm-tool gpu set cost_us 0
		for c in bare_p bare_r $P $R; do
			verify "$cell/$c" "$c" "$va" "$size"
			bench "sg stack=$stack client=$c layout=$layout size=$b nmap=$nmap runs=$(nvpm-tool gpu runs "$va" | wc -w)"
		done
		for cost in $BENCH_COSTS; do
			nvpm-tool gpu set cost_us "$cost"
			# Calibration: N cycles take about BENCH_LOOP_MS (the drain, a
			# fraction of one cycle's unpins, is not part of it).
			for c in bare_p bare_r $P $R; do
				# (twice: the first loop after a change of setting can be slow)
				reg_as "$c" "$va" "$size" --count 20 $nocheck --drain >/dev/null
				per=$(reg_as "$c" "$va" "$size" --count 20 $nocheck --drain | awk '{printf "%d\n", $4 / 20 + 1}')
				n=$((BENCH_LOOP_MS * 1000000 / ${per:-1000000}))
				[ "$n" -ge 3 ] || n=3
				[ "$n" -le "$BENCH_MAX_COUNT" ] || n=$BENCH_MAX_COUNT
				eval "n_$c=$n"
			done
			# Repetition 0 warms up (the first loops at a new setting ran slow
			# at times) and is not reported.
			rep=0
			while [ "$rep" -le "$BENCH_REPS" ]; do
				# Pairs in adjacent loops; who goes first alternates.
				if [ $((rep % 2)) = 1 ]; then
					order="bare_p $P bare_r $R"
				else
					order="$P bare_p $R bare_r"
				fi
				for c in $order; do
					eval "n=\$n_$c"
					if loop "$cell/$c" "$c" "$va" "$size" "$n" && [ "$rep" -gt 0 ]; then
						bench "loop stack=$stack cost=$cost client=$c layout=$layout size=$b rep=$rep count=$n $res"
					fi
				done
				rep=$((rep + 1))
			done
			# Where the time goes: one more loop per client, timed per phase
			# (the time stamps cost time too: not used for the ratios).
			for c in bare_p $P bare_r $R; do
				eval "n=\$n_$c"
				out=$(reg_as "$c" "$va" "$size" --count "$n" $nocheck --profile --drain 2>&1) || {
					fail "$cell/$c/profile" "$out"
					continue
				}
				bench "profile stack=$stack cost=$cost client=$c layout=$layout size=$b $(echo "$out" | awk '
					NR == 1 { printf "count=%d elapsed_ns=%d drain_ns=%d", $2, $4, $8 }
					$1 == "phase" { printf " %s=%d", $2, $3 }')"
			done
		done
		nvpm-tool gpu set cost_us 0
		expect_eq "$cell/nothing-held" 0 "$(nvpm-tool gpu free "$va" 2>&1)"
		expect_nothing_held "$cell/clean"
	done
done
stack_unload $stack
done
bench "done"
