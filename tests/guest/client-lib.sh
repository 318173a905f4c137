# Helpers for the client scenarios (tests/guest/scenarios/4*.sh).
# shellcheck shell=sh

STATS=/sys/kernel/debug/nvidia_peermem/stats

# load_stack NAME CORE_PARAMS GPU_PARAMS [PEERMEM_PARAMS]: the two simulators
# and the module under test, each loaded fresh with its parameters (a module
# still loaded would keep its old ones: modprobe of a loaded module does
# nothing). Marks the kernel log (expect_dmesg looks after the mark).
load_stack() {
	for m in nvidia_peermem mofed_peer_sim nvidia; do ! loaded $m || rmmod $m; done
	for m in nvidia_peermem mofed_peer_sim nvidia; do
		if loaded $m; then
			fail "$1/load" "$m could not be unloaded, so it would keep its old parameters"
			return 1
		fi
	done
	mark_dmesg "$1"
	# The anchor's persistent_api_support: passed through when it has the
	# parameter (560+), with the suite's choice where none is named
	# (peermem_params).
	lp=$(peermem_params "$4")
	# GPU_DEADLOCK_MS (GUEST_ENV): the GPU simulator's deadlock_ms, how long a
	# wait for its API lock may last (the anchor suite shortens it).
	# GPU_PT_ABI: the page-table ABI of the anchor's nv-p2p.h, where the
	# scenario names none.
	gp=$3
	[ -z "${GPU_DEADLOCK_MS:-}" ] || gp="$gp deadlock_ms=$GPU_DEADLOCK_MS"
	case " $gp " in *" page_table_version="*) ;; *) gp="$gp${GPU_PT_ABI:+ page_table_version=$GPU_PT_ABI}" ;; esac
	# shellcheck disable=SC2086 # parameters are words
	if modprobe mofed_peer_sim $2 && modprobe nvidia $gp && modprobe nvidia_peermem $lp; then
		pass "$1/load"
	else
		fail "$1/load" "could not load the stack"
		return 1
	fi
}

# unload_stack NAME: nothing may be left pinned, mapped or registered, no
# simulator may have seen a contract violation, and everything unloads.
unload_stack() {
	expect_ok "$1/clean" nvpm-tool expect-clean
	if own_feature "$1/stats-clean"; then
		expect_match "$1/no-live-contexts" "^contexts_live 0$" "$(cat $STATS)"
		expect_match "$1/no-pinned-bytes" "^pinned_bytes 0$" "$(cat $STATS)"
	fi
	expect_ok "$1/rmmod" rmmod nvidia_peermem
	expect_ok "$1/rmmod-sims" rmmod mofed_peer_sim nvidia
}

# reg_as CLIENT VA SIZE [ARGS...]: one registration (or a timed loop) of
# CLIENT through the core simulator: bare_p, bare_r (its direct mode:
# persistent or revocable pages, no client), nv_mem_nc, nv_mem (MRs with
# inval), and the benchmark's anchor_nc, anchor (NVIDIA's module loaded
# instead) and ideal_nc, ideal (peer_test_client): the benchmarks' "clients".
reg_as() {
	r_c=$1 r_va=$2 r_size=$3
	shift 3
	case $r_c in
	bare_p) nvpm-tool core direct "$r_va" "$r_size" --persistent "$@" ;;
	bare_r) nvpm-tool core direct "$r_va" "$r_size" "$@" ;;
	nv_mem_nc | anchor_nc | ideal_nc) nvpm-tool core reg "$r_va" "$r_size" "$@" ;;
	nv_mem | anchor | ideal) nvpm-tool core reg "$r_va" "$r_size" --inval "$@" ;;
	*) echo "reg_as: unknown client $r_c" >&2; return 2 ;;
	esac
}

# reg_and_check NAME SIZE LAYOUT OFFSET [REG_FLAGS...]: registers SIZE bytes
# at OFFSET into a new buffer, checks the SG list against the GPU's DMA
# addresses, deregisters and frees.
reg_and_check() {
	rc_name=$1 rc_size=$2 rc_layout=$3 rc_off=$4
	shift 4
	rc_va=$(nvpm-tool gpu alloc "$rc_size" --layout "$rc_layout") || { fail "$rc_name" "alloc failed"; return; }
	rc_start=$(printf '0x%x' $((rc_va + rc_off)))
	rc_len=$(nvpm-tool gpu buffers | awk -v va="$rc_va" '$1 == va { print $2 }')
	rc_len=$((rc_len - rc_off - rc_off))
	if rc_id=$(nvpm-tool core reg "$rc_start" "$rc_len" "$@" 2>&1); then
		expect_ok "$rc_name/sg" nvpm-tool expect-sg "$rc_id"
		expect_ok "$rc_name/dereg" nvpm-tool core dereg "$rc_id"
	else
		fail "$rc_name/reg" "$rc_id"
	fi
	nvpm-tool gpu free "$rc_va" >/dev/null
}

# reg_fails NAME ERRNO_RE VA SIZE [FLAGS...]: the registration fails with an
# errno matching ERRNO_RE, and nothing stays pinned or mapped.
reg_fails() {
	rf_name=$1 rf_errno=$2
	shift 2
	if rf_out=$(nvpm-tool core reg "$@" 2>&1); then
		fail "$rf_name" "registered as MR $rf_out"
		nvpm-tool core dereg "$rf_out"
	else
		expect_match "$rf_name" "\\(($rf_errno)\\)" "$rf_out"
	fi
	expect_nothing_held "$rf_name/nothing-held"
}

# reg_range NAME ALLOC LAYOUT OFFSET LENGTH: registers LENGTH bytes at
# OFFSET into a new buffer of ALLOC bytes, checks the SG list against the
# GPU's DMA addresses, deregisters and frees.
reg_range() {
	rr_va=$(nvpm-tool gpu alloc "$2" --layout "$3") || { fail "$1" "alloc failed"; return; }
	if rr_id=$(nvpm-tool core reg "$(printf '0x%x' $((rr_va + $4)))" "$5" 2>&1); then
		expect_ok "$1/sg" nvpm-tool expect-sg "$rr_id"
		expect_ok "$1/dereg" nvpm-tool core dereg "$rr_id"
	else
		fail "$1/reg" "$rr_id"
	fi
	nvpm-tool gpu free "$rr_va" >/dev/null
}

# The guest kernel's page size (4 KiB, 16 KiB on arm64-16k, 64 KiB).
os_page_size() { awk '/^KernelPageSize:/ { print $2 * 1024; exit }' /proc/self/smaps; }

# expect_nothing_held NAME: no pin, mapping or MR is alive and no simulator
# saw a contract violation, nor the GPU simulator a client bug of its own
# checks (GPU buffers may still be allocated).
expect_nothing_held() {
	eh=""
	for c in pins.live pins.persistent mappings.live violations own_checks; do
		v=$(nvpm-tool gpu counter $c 2>&1)
		[ "$v" = 0 ] || eh="$eh gpu:$c=$v"
	done
	for c in mrs.live violations; do
		v=$(nvpm-tool core counter $c 2>&1)
		[ "$v" = 0 ] || eh="$eh core:$c=$v"
	done
	# Which violations: their names.
	case $eh in *violations=* | *own_checks=*)
		eh="$eh ($(for sim in gpu core; do nvpm-tool $sim counters 2>/dev/null |
			awk -v s=$sim '$1 ~ /^(violation|own)\./ && $2 != 0 {printf "%s:%s=%s ", s, $1, $2}'; done | sed 's/ $//'))"
		;;
	esac
	if [ -z "$eh" ]; then pass "$1"; else fail "$1" "held:$eh"; fi
}
