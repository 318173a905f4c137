# Every contract violation the simulators detect, provoked on purpose through
# peer_test_client's "bug" knob: each is counted under its own name and logged
# as "contract violation" (never as a WARNING), and the counters reset to 0.
. /tests/lib.sh
sim_unload
BUG=/sys/module/peer_test_client/parameters/bug

expect_ok load modprobe peer_test_client
va=$(nvpm-tool gpu alloc 1M --layout fragmented)

# provoke BUG SIM COUNTER LOG-REGEX ACTIONS...: runs ACTIONS with the bug set,
# expects SIM's COUNTER (and the total) at 1 and a log line, then resets.
provoke() {
	bug=$1 sim=$2 counter=$3 log=$4
	shift 4
	echo "$bug" >$BUG
	"$@"
	echo none >$BUG
	expect_counter "$bug" "$sim" "violation.$counter" 1
	expect_counter "$bug-total" "$sim" violations 1
	expect_dmesg "$bug-logged" "contract violation: $log"
	nvpm-tool "$sim" reset
}

# A registration deregistered at once, one cudaFree'd first, one that fails.
reg_dereg() { id=$(nvpm-tool core reg "$va" 1M --inval) && nvpm-tool core dereg "$id"; }
reg_free_dereg() {
	fva=$(nvpm-tool gpu alloc 1M)
	id=$(nvpm-tool core reg "$fva" 1M --inval)
	nvpm-tool gpu free "$fva" >/dev/null
	nvpm-tool core dereg "$id"
}
reg_fails() {
	if nvpm-tool core reg "$va" 1M --inval >/dev/null 2>&1; then
		fail "$bug-refused" "registered anyway"
		nvpm-tool core dereg all
	else
		pass "$bug-refused"
	fi
}

# GPU side: the nvidia_p2p_* contract.
provoke put_in_callback gpu in_callback \
	"nvidia_p2p_put_pages called from inside a free callback" reg_free_dereg
provoke unmap_in_callback gpu in_callback \
	"nvidia_p2p_dma_unmap_pages called from inside a free callback" reg_free_dereg
provoke double_put gpu double_put "nvidia_p2p_put_pages of page table #[0-9]+, already put" reg_dereg
provoke unmap_unknown gpu unknown_mapping "nvidia_p2p_dma_unmap_pages of a mapping unknown" reg_dereg
provoke map_after_revoke gpu use_after_free \
	"nvidia_p2p_dma_map_pages of page table #[0-9]+ after its free callback" reg_free_dereg

# Core side: what a client hands back to MOFED.
provoke sg_misaligned core sg_align "test_client: SGE 0 .* is not PAGE_SIZE aligned" reg_fails
provoke sg_short core sg_coverage "test_client: the SG list covers 983040 bytes" reg_fails
provoke sg_first_offset core sg_coverage "test_client: the first SGE .* does not start" reg_fails
provoke nmap core nmap "test_client: dma_map returned nmap 17 for a table of 16/16" reg_fails
provoke map_fail_dirty core map_failure "test_client: dma_map failed \(-12\) and left an invalid" reg_fails
provoke unmap_error core unmap_return "test_client: dma_unmap returned -5" reg_dereg
# The client sends the stale invalidation at its next acquire.
reg_dereg_twice() { reg_dereg && echo none >$BUG && reg_dereg; }
provoke inval_after_release core after_release \
	"test_client: invalidation of core_context [0-9]+ after its release" reg_dereg_twice
echo 0 >/sys/module/peer_test_client/parameters/page_size
reg_fails
echo 65536 >/sys/module/peer_test_client/parameters/page_size
expect_counter page-size core violation.page_size 1
expect_dmesg page-size-logged "contract violation: test_client: get_page_size returned 0"
nvpm-tool core reset
expect_counter failed-regs-unwound gpu pins.live 0

# Pins leaked by a client are reported when the GPU driver unloads. (The
# persistent API: a leaked revocable pin would call back a freed context.)
rmmod peer_test_client
expect_ok load-persistent modprobe peer_test_client persistent=1
echo leak_pins >$BUG
id=$(nvpm-tool core reg "$va" 1M)
nvpm-tool core dereg "$id"
expect_counter leaked gpu pins.persistent 1
expect_ok unload-client rmmod peer_test_client mofed_peer_sim
expect_ok unload-gpu rmmod nvidia
expect_dmesg held-at-unload "gpu_sim: contract violation: persistent page table #[0-9]+ \(va $va, 1048576 bytes\) still held at unload"
if dmesg | grep -qE 'WARNING:|BUG:'; then fail no-warn "a WARNING or BUG line"; else pass no-warn; fi
