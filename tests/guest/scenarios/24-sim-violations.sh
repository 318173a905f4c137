# Every contract violation the simulators detect, at every place that
# detects one, provoked on purpose: each is counted under its own name and by
# no other counter of either simulator, logged once more as "contract
# violation" (never as a WARNING), and the counters reset to 0. The GPU
# simulator's checks of this project's own (own.NAME: client bugs that the
# driver tolerates) likewise, apart from its violations, each with the
# return value the driver gives (the client logs it). Provoked
# through peer_test_client's "bug" knob, except: the core's call_count is a
# self-check of the core itself, provoked by its "dereg ... counted" hook;
# held_at_unload by unloading the GPU simulator under a leaked pin;
# unloaded_in_callback by unloading the client while the GPU holds the free
# path after its callback (callback_return_ms); and the
# GPU's bad_peer for a dma_map_pages with a non-PCI device is provoked in
# 21-sim-direct (this client refuses a non-PCI device before calling the GPU).
# Also the registration checks that refuse or downgrade a client without
# counting anything: the client's name, an _ex struct too short for its flags.
. /tests/lib.sh
sim_unload
BUG=/sys/module/peer_test_client/parameters/bug

expect_ok load modprobe peer_test_client
va=$(nvpm-tool gpu alloc 1M --layout fragmented)

# violation NAME SIM COUNTER LOG-REGEX ACTIONS...: runs ACTIONS, then expects
# SIM's COUNTER and its total at 1, the other simulator's total at 0 and one
# more kernel log line "contract violation: LOG-REGEX"; then resets both.
violation() {
	name=$1 sim=$2 counter=$3 log="contract violation: $4"
	shift 4
	other=gpu
	[ "$sim" = core ] || other=core
	logged=$(dmesg | grep -cE "$log")
	"$@"
	expect_counter "$name" "$sim" "violation.$counter" 1
	expect_counter "$name-total" "$sim" violations 1
	expect_counter "$name-$other-total" "$other" violations 0
	expect_counter "$name-no-own-check" gpu own_checks 0
	expect_eq "$name-logged" $((logged + 1)) "$(dmesg | grep -cE "$log")"
	nvpm-tool gpu reset
	nvpm-tool core reset
}

# own_check NAME COUNTER LOG-REGEX ACTIONS...: as violation, for the GPU
# simulator's own check COUNTER (own.COUNTER, total own_checks): no
# violation of either simulator, and the log line says whose check it is.
own_check() {
	name=$1 counter=$2 log="contract violation: $3.* \[a check of this project's own: "
	shift 3
	logged=$(dmesg | grep -cE "$log")
	"$@"
	expect_counter "$name" gpu "own.$counter" 1
	expect_counter "$name-total" gpu own_checks 1
	expect_counter "$name-gpu-no-violation" gpu violations 0
	expect_counter "$name-core-no-violation" core violations 0
	expect_eq "$name-logged" $((logged + 1)) "$(dmesg | grep -cE "$log")"
	nvpm-tool gpu reset
	nvpm-tool core reset
}

# logs TEXT: how many kernel log lines hold TEXT.
logs() { dmesg | grep -cF -- "$1"; }
# expect_logged NAME BEFORE TEXT: one more line holds TEXT than BEFORE.
expect_logged() { expect_eq "$1" $(($2 + 1)) "$(logs "$3")"; }

# with_bug BUG ACTIONS...: runs ACTIONS with the client's bug set.
with_bug() {
	echo "$1" >$BUG
	shift
	"$@"
	echo none >$BUG
}

# provoke BUG SIM COUNTER LOG-REGEX ACTIONS...: a violation named after BUG.
provoke() {
	b=$1 s=$2 c=$3 l=$4
	shift 4
	violation "$b" "$s" "$c" "$l" with_bug "$b" "$@"
}

# A registration deregistered at once, one cudaFree'd first, one that fails.
reg_dereg() { id=$(nvpm-tool core reg "$va" 1M --inval) && nvpm-tool core dereg "$id"; }
reg_free_dereg() {
	fva=$(nvpm-tool gpu alloc 1M)
	id=$(nvpm-tool core reg "$fva" 1M --inval)
	nvpm-tool gpu free "$fva" >/dev/null
	nvpm-tool core dereg "$id"
}
# reg_fails [VA SIZE]: the whole buffer by default.
reg_fails() {
	if nvpm-tool core reg "${1:-$va}" "${2:-1M}" --inval >/dev/null 2>&1; then
		fail "$name-refused" "registered anyway"
		nvpm-tool core dereg all
	else
		pass "$name-refused"
	fi
}
hex() { printf '0x%x' "$1"; }

# GPU side: the nvidia_p2p_* contract.
# A put inside the callback: the driver refuses its API lock to the thread
# that holds it (rmapiLockAcquire): -EIO, and nv_p2p_put_pages WARNs (the
# simulator logs that as an error line). It does not hang.
ret_log="peer_test_client: put_in_callback: nvidia_p2p_put_pages returned -5"
warn_log="gpu_sim: the driver WARNs here: WARN_ON(status != NV_OK) in nv_p2p_put_pages (nv-p2p.c) for the refused nvidia_p2p_put_pages"
rets=$(logs "$ret_log") warns=$(logs "$warn_log")
provoke put_in_callback gpu in_callback \
	"nvidia_p2p_put_pages called from inside a free callback: .* refuses to its owner .*: -EIO" \
	reg_free_dereg
expect_logged put_in_callback/eio "$rets" "$ret_log"
expect_logged put_in_callback/driver-warns "$warns" "$warn_log"
expect_counter put_in_callback/unpinned gpu pins.live 0
# dma_unmap_pages needs only the table's own lock: allowed in the callback.
with_bug unmap_in_callback reg_free_dereg
expect_counter unmap_in_callback/allowed gpu violations 0
expect_counter unmap_in_callback/no-own-check gpu own_checks 0
expect_counter unmap_in_callback/unmapped gpu mappings.live 0
# A callback that waits for a map in flight, which waits for the API lock
# the callback runs under: caught within deadlock_ms, the map fails.
reg_free_during_map() {
	nvpm-tool gpu set free_during_map 1
	nvpm-tool gpu set deadlock_ms 1000
	fva=$(nvpm-tool gpu alloc 1M)
	reg_fails "$fva" 1M
	nvpm-tool gpu set free_during_map 0
	nvpm-tool gpu set deadlock_ms 5000
}
provoke callback_waits_map gpu deadlock \
	"deadlock: nvidia_p2p_dma_map_pages waited 1000 ms for the driver's API lock while the free callback of page table #[0-9]+ did not return" \
	reg_free_during_map
provoke double_put gpu double_put "nvidia_p2p_put_pages of page table #[0-9]+, already put" reg_dereg
# A table the GPU never handed out, in each call that takes one.
provoke put_unknown_table gpu unknown_table "nvidia_p2p_put_pages of an unknown page table" reg_dereg
provoke map_unknown_table gpu unknown_table "nvidia_p2p_dma_map_pages of an unknown page table" reg_dereg
provoke unmap_unknown_table gpu unknown_table \
	"nvidia_p2p_dma_unmap_pages of an unknown page table" reg_dereg
# A mapping the table does not have, or no longer has: the driver finds
# nothing in the table's list and returns 0 (own checks, not violations).
rets=$(logs "unmap_unknown: nvidia_p2p_dma_unmap_pages returned 0")
own_check unmap_unknown unknown_mapping "nvidia_p2p_dma_unmap_pages of a mapping unknown" \
	with_bug unmap_unknown reg_dereg
expect_logged unmap_unknown/returns-0 "$rets" "unmap_unknown: nvidia_p2p_dma_unmap_pages returned 0"
rets=$(logs "unmap_twice: the second nvidia_p2p_dma_unmap_pages returned 0")
own_check unmap_twice unknown_mapping "nvidia_p2p_dma_unmap_pages of a mapping unknown" \
	with_bug unmap_twice reg_dereg
expect_logged unmap_twice/returns-0 "$rets" "unmap_twice: the second nvidia_p2p_dma_unmap_pages returned 0"
expect_counter unmap_twice/unmapped gpu mappings.live 0
# A map of a table revoked race_window_ms ago or more (here: at once) is the
# client's; sooner it is the driver's own race (51-stress-windows, map-waits-lock).
reg_free_dereg_late() {
	window_ms=$(nvpm-tool gpu get race_window_ms)
	nvpm-tool gpu set race_window_ms 0
	reg_free_dereg
	nvpm-tool gpu set race_window_ms "$window_ms"
}
provoke map_after_revoke gpu use_after_free \
	"nvidia_p2p_dma_map_pages of page table #[0-9]+ after its free callback" reg_free_dereg_late
provoke unmap_after_put gpu use_after_free \
	"nvidia_p2p_dma_unmap_pages of page table #[0-9]+ after its put" reg_dereg
provoke unmap_after_revoke gpu use_after_free \
	"nvidia_p2p_dma_unmap_pages of page table #[0-9]+ after its free callback returned" reg_free_dereg
# The persistent put of a revocable table (the reverse is below).
provoke wrong_put gpu wrong_put \
	"nvidia_p2p_put_pages_persistent of non-persistent page table #[0-9]+ \(va $va\) with va $va" reg_dereg
# A put with another VA: the driver finds the pin by its table and ignores
# the address, so that put unpins (the client puts no more).
rets=$(logs "put_wrong_va: the put with va + 64 KiB returned 0")
own_check put_wrong_va put_wrong_va \
	"nvidia_p2p_put_pages of page table #[0-9]+ \(va $va\) with va $(hex $((va + 0x10000)))" \
	with_bug put_wrong_va reg_dereg
expect_logged put_wrong_va/returns-0 "$rets" "put_wrong_va: the put with va + 64 KiB returned 0"
expect_counter put_wrong_va/unpinned gpu pins.live 0
# A persistent put of NULL: 0 from the driver, before it takes any lock.
rets=$(logs "put_null: nvidia_p2p_put_pages_persistent(NULL) returned 0")
own_check put_null put_null "nvidia_p2p_put_pages_persistent of a NULL page table" \
	with_bug put_null reg_dereg
expect_logged put_null/returns-0 "$rets" "put_null: nvidia_p2p_put_pages_persistent(NULL) returned 0"
expect_counter put_null/unpinned gpu pins.live 0
provoke unmap_wrong_peer gpu bad_peer \
	"nvidia_p2p_dma_unmap_pages with another peer than the mapping's" reg_dereg
# A client that maps a 4 KiB table without checking it (the driver BUG()s).
reg_fails_4k() {
	nvpm-tool gpu set bad_data page_size
	reg_fails
	nvpm-tool gpu set bad_data none
}
provoke map_unchecked gpu bad_page_size \
	"nvidia_p2p_dma_map_pages of a table with page size type 0 " reg_fails_4k

# Core side: what a client hands back to MOFED.
provoke sg_misaligned core sg_align "test_client: SGE 0 .* is not PAGE_SIZE aligned" reg_fails
provoke sg_short core sg_coverage "test_client: the SG list covers 983040 bytes" reg_fails
provoke sg_first_offset core sg_coverage "test_client: the first SGE .* does not start" reg_fails
# The start 3 OS pages into a 64 KiB page: the first SGE (one OS page) cannot be trimmed.
provoke sg_first_short core sg_coverage "test_client: SGEs too short to trim to PAGE_SIZE" \
	reg_fails "$(hex $((va + 0x3000)))" $((0x100000 - 0x3000))
provoke nmap core nmap "test_client: dma_map returned nmap 17 for a table of 16/16" reg_fails
provoke map_fail_dirty core map_failure "test_client: dma_map failed \(-12\) and left an invalid" reg_fails
provoke unmap_error core unmap_return "test_client: dma_unmap returned -5" reg_dereg
# The client sends the stale invalidation at its next acquire.
reg_dereg_twice() { reg_dereg && echo none >$BUG && reg_dereg; }
provoke inval_after_release core after_release \
	"test_client: invalidation of core_context [0-9]+ after its release" reg_dereg_twice
# An invalidation with the client's own struct as the handle.
provoke inval_bad_handle core bad_handle "invalidate with an unknown handle " reg_dereg
reg_fails_page_size_0() {
	echo 0 >/sys/module/peer_test_client/parameters/page_size
	reg_fails
	echo 65536 >/sys/module/peer_test_client/parameters/page_size
}
violation page_size core page_size "test_client: get_page_size returned 0" reg_fails_page_size_0
expect_counter failed-regs-unwound gpu pins.live 0

# The core's self-check: dma_unmap or put_pages twice for one umem. Only a
# buggy core does that; "dereg ... again=F counted" plays one. Uncounted, the
# same calls (a bad-input test of the client) are no violation.
dereg_again() {
	reply=""
	id=$(nvpm-tool core reg "$va" 1M --inval) &&
		reply=$(nvpm-tool core dereg "$id" --again "$@" 2>&1)
}
dereg_again both
expect_eq again-uncounted-called "again dma_unmap 0" "$reply"
expect_counter again-uncounted core violations 0
violation call_count/dma_unmap core call_count \
	"MR [0-9]+: dma_unmap called 2 times, put_pages 1 times" dereg_again dma_unmap --counted
expect_eq call_count/dma_unmap/called "again dma_unmap 0" "$reply"
violation call_count/put_pages core call_count \
	"MR [0-9]+: dma_unmap called 1 times, put_pages 2 times" dereg_again put_pages --counted
expect_eq call_count/put_pages/called "again put_pages" "$reply"

# The persistent companion (core_context "no invalidation") invalidates its
# umem through the main client's invalidate function.
expect_ok unload rmmod peer_test_client
expect_ok load-nc modprobe peer_test_client nc=1
reg_nc_dereg() { id=$(nvpm-tool core reg "$va" 1M) && nvpm-tool core dereg "$id"; }
provoke inval_nc core no_invalidation \
	"test_client_nc: invalidation of a umem registered without invalidation" reg_nc_dereg
# Unregistering twice: the second time with a handle no longer registered.
unload_twice() { echo unregister_twice >$BUG && rmmod peer_test_client; }
violation unregister_twice core bad_handle "unregister with an unregistered handle " unload_twice
if loaded peer_test_client; then fail unloaded-twice "still loaded"; else pass unloaded-twice; fi

# Registration: the name must be non-empty and NUL-terminated within
# IB_PEER_MEMORY_NAME_MAX (64) bytes; a longer client name fills all 64.
# (When init fails with EINVAL, kmod's modprobe makes a second attempt: the
# refusal is logged once per attempt, so the check is that it was logged.)
refused() { dmesg | grep -c "mofed_peer_sim: peer memory client without a valid name refused"; }
# expect_refused NAME MODPROBE-ARGS...: the load fails, with a refusal logged.
expect_refused() {
	names=$(refused)
	expect_fail "$@"
	if [ "$(refused)" -gt "$names" ]; then pass "$1-logged"; else fail "$1-logged" "no refusal logged"; fi
}
name64=peer-memory-client-name-of-sixty-four-characters-for-the-check-x
expect_refused name-empty modprobe peer_test_client name=
expect_refused name-64 modprobe peer_test_client name=$name64
expect_counter name-refused-no-client core clients.live 0
expect_ok name-63 modprobe peer_test_client name=${name64%x}
expect_match name-63-registered "^${name64%x} " "$(nvpm-tool core clients)"
expect_ok unload-name-63 rmmod peer_test_client

# after_release in a legacy core too: there an invalidation for a ticket
# is harmless while the deregistration runs, a client bug once release
# returned (the client's context is gone).
expect_ok unload-for-legacy rmmod mofed_peer_sim
expect_ok load-legacy modprobe mofed_peer_sim mode=legacy
expect_ok load-legacy-client modprobe peer_test_client abi=legacy
violation legacy/inval_after_release core after_release \
	"test_client: invalidation of core_context [0-9]+ after its release" \
	with_bug inval_after_release reg_dereg_twice
# unloaded_in_callback: the test client's callback drops its context and
# its module reference last (a legacy core released the context inside the
# invalidation); with the free path held after the callback returned
# (callback_return_ms), an rmmod of the client finishes its exit
# meanwhile: nothing in the client waits for the driver to go past it.
unload_in_callback() {
	fva=$(nvpm-tool gpu alloc 1M)
	mr=$(nvpm-tool core reg "$fva" 1M --inval)
	nvpm-tool gpu set callback_return_ms 2000
	held=$(nvpm-tool gpu counter callbacks.return_held)
	nvpm-tool gpu free "$fva" >/dev/null &
	i=0
	while [ "$(nvpm-tool gpu counter callbacks.return_held)" = "$held" ] && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	rmmod peer_test_client
	wait
	# The MR, invalidated (a legacy core calls no client at its
	# deregistration then), so that the core simulator's unload finds none.
	nvpm-tool core dereg "$mr"
	nvpm-tool gpu set callback_return_ms 0
}
violation unloaded_in_callback gpu unloaded_in_callback \
	"module peer_test_client finished its exit before the driver went past its free callback" \
	unload_in_callback
expect_ok reload-legacy-client modprobe peer_test_client abi=legacy
expect_ok unload-legacy rmmod peer_test_client mofed_peer_sim
expect_ok reload-core modprobe mofed_peer_sim

# An _ex struct (version byte 15 set) whose ex_size ends before flags: the
# core must not read flags, so INVALIDATE_UNMAPS does not count and the core
# unmaps inside the invalidation, as for a plain client.
core_unmaps() { dmesg | grep -c "registered peer memory client test_client (version 1.0, invalidation, core unmaps)"; }
plain=$(core_unmaps)
expect_ok load-ex-short modprobe peer_test_client abi=ex_short
expect_match ex-short-flags-ignored "^test_client users=0 invalidation=1 unmaps_on_invalidate=0 " \
	"$(nvpm-tool core clients)"
expect_eq ex-short-logged $((plain + 1)) "$(core_unmaps)"
fva=$(nvpm-tool gpu alloc 1M)
id=$(nvpm-tool core reg "$fva" 1M --inval)
nvpm-tool gpu free "$fva" >/dev/null
expect_eq ex-short-core-unmapped unmapped "$(nvpm-tool core state "$id" 2>&1)"
expect_eq ex-short-unmap-once 1 "$(nvpm-tool core show "$id" unmap_calls 2>&1)"
nvpm-tool core dereg "$id"
expect_counter ex-short-unpinned gpu pins.live 0
expect_counter ex-short-gpu-clean gpu violations 0
expect_counter ex-short-gpu-no-own-check gpu own_checks 0
expect_counter ex-short-core-clean core violations 0
expect_ok unload-ex-short rmmod peer_test_client

# A revocable put from another process (a work item: a kernel thread): the
# driver looks the pin up among the calling process's (current->tgid),
# finds none and returns 0; the pin stays, its callback armed. Counted at
# the put, reported as leaked at every reset and at unload. Its buffer is
# never freed: the callback would call back the client's freed context.
expect_ok load-unpin-in-work modprobe peer_test_client
lva=$(nvpm-tool gpu alloc 1M)
ret_log="unpin_in_work: nvidia_p2p_put_pages from a work item returned 0"
leak_log="gpu_sim: leaked at reset: page table #[0-9]+ \\(va $lva, 1048576 bytes\\) pinned by process [0-9]+: its put from process [0-9]+ returned 0 without unpinning"
rets=$(logs "$ret_log") leaks=$(dmesg | grep -cE "$leak_log")
unpin_in_work() {
	id=$(nvpm-tool core reg "$lva" 1M --inval) && nvpm-tool core dereg "$id"
	expect_counter unpin_in_work/still-pinned gpu pins.live 1
	expect_counter unpin_in_work/leaked gpu pins.leaked 1
}
own_check unpin_in_work put_other_process \
	"nvidia_p2p_put_pages of page table #[0-9]+ \\(va $lva\\) from process [0-9]+ \\(kworker[^,]*, a kernel thread\\), pinned by process [0-9]+" \
	with_bug unpin_in_work unpin_in_work
expect_logged unpin_in_work/returns-0 "$rets" "$ret_log"
expect_eq unpin_in_work/reported-at-reset $((leaks + 1)) "$(dmesg | grep -cE "$leak_log")"
expect_ok unload-unpin-in-work rmmod peer_test_client

# A persistent client: the revocable put of a persistent table.
expect_ok load-persistent modprobe peer_test_client persistent=1
violation wrong_put/persistent gpu wrong_put \
	"nvidia_p2p_put_pages of persistent page table #[0-9]+ \(va $va\) with va $va" \
	with_bug wrong_put reg_dereg

# Pins leaked by a client are reported when the GPU driver unloads. (The
# persistent API: a leaked revocable pin would call back a freed context.)
echo leak_pins >$BUG
id=$(nvpm-tool core reg "$va" 1M)
nvpm-tool core dereg "$id"
expect_counter leaked gpu pins.persistent 1
expect_ok unload-client rmmod peer_test_client mofed_peer_sim
expect_ok unload-gpu rmmod nvidia
expect_dmesg held-at-unload "gpu_sim: contract violation: persistent page table #[0-9]+ \(va $va, 1048576 bytes\) still held at unload"
expect_dmesg held-at-unload/leaked "gpu_sim: contract violation: non-persistent page table #[0-9]+ \(va $lva, 1048576 bytes\) still held at unload: leaked, its put from process [0-9]+ returned 0 without unpinning"
if dmesg | grep -qE 'WARNING:|BUG:'; then fail no-warn "a WARNING or BUG line"; else pass no-warn; fi
