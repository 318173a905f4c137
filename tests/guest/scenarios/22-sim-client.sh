# The core simulator in its default mode (MOFED 5.4-3+ / DOCA) driving a
# client: peer_test_client, a small C client that is correct unless told
# otherwise. Registration rules, ownership order, the umem lifecycle, first
# and last SGE trimming, invalidation with and without INVALIDATE_UNMAPS.
. /tests/lib.sh
sim_unload
C=/sys/kernel/debug/mofed_peer_sim
P=/sys/module/peer_test_client/parameters

# Loading the client pulls in both simulators through its symbols.
expect_ok load modprobe peer_test_client nc=1
expect_ok gpu-pulled-in loaded nvidia
expect_ok core-pulled-in loaded mofed_peer_sim
expect_eq modern "modern" "$(nvpm-tool core mode 2>&1)"
expect_eq clients "test_client users=0 invalidation=1 unmaps_on_invalidate=1 context_private_data=0 regs=0 deregs=0 invalidations=0
test_client_nc users=0 invalidation=0 unmaps_on_invalidate=1 context_private_data=0 regs=0 deregs=0 invalidations=0" "$(cat $C/clients)"
expect_dmesg registered "mofed_peer_sim: registered peer memory client test_client \(version 1.0, invalidation, unmaps on invalidate\)"

# Ownership: the first client that claims wins, and an invalidating client
# only gets MRs that support invalidation.
va=$(nvpm-tool gpu alloc 4M --layout fragmented)
id=$(nvpm-tool core reg "$va" 4M --inval)
nid=$(nvpm-tool core reg "$va" 4M)
expect_eq owner-inval test_client "$(nvpm-tool core show "$id" client 2>&1)"
expect_eq owner-no-inval test_client_nc "$(nvpm-tool core show "$nid" client 2>&1)"
expect_eq core-context-id 0 "$(nvpm-tool core show "$id" core_context 2>&1)"
expect_eq no-invalidation-id 4294967295 "$(nvpm-tool core show "$nid" core_context 2>&1)"
expect_match users "^test_client users=1 .* regs=1 " "$(head -n1 $C/clients)"
expect_ok sg-inval nvpm-tool expect-sg "$id"
expect_ok sg-nc nvpm-tool expect-sg "$nid"
expect_eq page-size 65536 "$(nvpm-tool core show "$id" page_size 2>&1)"
expect_eq nmap 64 "$(nvpm-tool core show "$id" nmap 2>&1)"
expect_counter pinned gpu pins.live 1
expect_counter pinned-persistent gpu pins.persistent 1
expect_ok dereg nvpm-tool core dereg "$id"
expect_ok dereg-nc nvpm-tool core dereg "$nid"
expect_fail dereg-twice nvpm-tool core dereg "$id"
expect_counter unpinned gpu pins.live 0
expect_counter unmapped gpu mappings.live 0

# An unaligned range: the first and last SGE are trimmed to OS pages.
id=$(nvpm-tool core reg $((va + 0x11234)) 0x20000 --inval)
expect_eq trimmed-start "$(printf '0x%x' $((va + 0x11000)))" "$(nvpm-tool core show "$id" sg_va 2>&1)"
expect_eq trimmed-first-len 61440 "$(nvpm-tool core sg "$id" | awk 'NR == 1 {print $2}')"
expect_eq trimmed-last-len 8192 "$(nvpm-tool core sg "$id" | awk 'END {print $2}')"
expect_ok trimmed-sg nvpm-tool expect-sg "$id"
nvpm-tool core dereg "$id"

# A client that coalesces contiguous pages: one SGE per run, still correct.
echo 1 >$P/coalesce
for layout in contiguous fragmented shuffled; do
	cva=$(nvpm-tool gpu alloc 4M --layout $layout)
	id=$(nvpm-tool core reg "$cva" 4M --inval)
	expect_eq "coalesced-$layout" "$(nvpm-tool gpu runs "$cva" | wc -w)" "$(nvpm-tool core show "$id" nmap 2>&1)"
	expect_ok "coalesced-$layout-sg" nvpm-tool expect-sg "$id"
	nvpm-tool core dereg "$id"
	nvpm-tool gpu free "$cva" >/dev/null
done
echo 0 >$P/coalesce

# cudaFree: the client forwards the free callback; with INVALIDATE_UNMAPS the
# core only marks the umem and skips dma_unmap and put_pages at dereg.
id=$(nvpm-tool core reg "$va" 1M --inval)
nid=$(nvpm-tool core reg "$va" 1M)
expect_eq free-fires 1 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_eq invalidated invalidated "$(nvpm-tool core state "$id" 2>&1)"
expect_eq one-event 1 "$(nvpm-tool core events "$id" 2>&1)"
expect_eq no-unmap-by-core 0 "$(nvpm-tool core show "$id" unmap_calls 2>&1)"
expect_eq persistent-mapped mapped "$(nvpm-tool core state "$nid" 2>&1)"
expect_counter client-invalidations core invalidations 1
expect_ok dereg-invalidated nvpm-tool core dereg "$id"
expect_ok dereg-persistent nvpm-tool core dereg "$nid"
expect_counter no-violations-gpu gpu violations 0
expect_counter no-own-checks-gpu gpu own_checks 0
expect_counter no-violations-core core violations 0

# A deregistration racing a free callback: unmap and put wait for the
# callback to return (the GPU simulator blocks them), then all ends clean.
echo 1000 >$P/callback_delay_ms
rva=$(nvpm-tool gpu alloc 1M)
id=$(nvpm-tool core reg "$rva" 1M --inval)
nvpm-tool gpu free "$rva" >/dev/null &
usleep 300000
expect_ok race-dereg nvpm-tool core dereg "$id"
expect_counter race-dereg-waited gpu callbacks 2
wait
echo 0 >$P/callback_delay_ms
expect_counter race-gpu-clean gpu violations 0
expect_counter race-gpu-no-own-check gpu own_checks 0
expect_counter race-core-clean core violations 0

# When the first client's acquire says "not mine" (its probe failed), the
# next client gets the MR.
va=$(nvpm-tool gpu alloc 1M)
nvpm-tool gpu inject get_pages 1 ENOMEM
id=$(nvpm-tool core reg "$va" 1M --inval)
expect_eq next-client-owns test_client_nc "$(nvpm-tool core show "$id" client 2>&1)"
nvpm-tool core dereg "$id"

# Failures unwind: get_pages, dma_map; nobody claims.
nvpm-tool gpu inject get_pages 2 ENOMEM
expect_match get-pages-fails "get_pages failed: -12" "$(nvpm-tool core reg "$va" 1M --inval 2>&1)"
nvpm-tool gpu inject dma_map_pages 1 EIO
expect_match dma-map-fails "dma_map failed: -5" "$(nvpm-tool core reg "$va" 1M --inval 2>&1)"
expect_counter unwound gpu pins.live 0
expect_counter reg-failures core reg_failures 2
expect_match nonpci-device "dma_map failed: -22" "$(nvpm-tool core reg "$va" 1M --inval --nonpci 2>&1)"
expect_dmesg nonpci-refused-by-client "peer_test_client: dma_map: mofed_sim_nonpci is not a PCI device"
expect_counter reg-failures-nonpci core reg_failures 3
echo 0 >$P/claim
expect_match not-claimed "failed \(EFAULT\): no peer memory client claims" "$(nvpm-tool core reg "$va" 1M --inval 2>&1)"
echo 1 >$P/claim

# Unregistration waits for the client's umems; rmmod is refused meanwhile.
id=$(nvpm-tool core reg "$va" 1M --inval)
expect_fail rmmod-busy rmmod peer_test_client
nvpm-tool core dereg "$id"
expect_ok rmmod rmmod peer_test_client
expect_dmesg unregistered "mofed_peer_sim: unregistered peer memory client test_client_nc"

# Without those module references, rmmod waits in the unregistration until
# the last umem is gone. Its umems are live meanwhile: a cudaFree still
# reaches the core as an invalidation, through the client's handle.
expect_ok load-no-refs modprobe peer_test_client hold_module=0
uva=$(nvpm-tool gpu alloc 1M)
id=$(nvpm-tool core reg "$uva" 1M --inval)
rmmod peer_test_client &
usleep 500000
expect_dmesg unregister-waits "mofed_peer_sim: unregistering test_client: waiting for 1 umem\(s\)"
if loaded peer_test_client; then pass still-loaded; else fail still-loaded "unloaded with a umem"; fi
expect_eq free-while-unloading 1 "$(nvpm-tool gpu free "$uva" 2>&1)"
expect_eq invalidated-while-unloading 1 "$(nvpm-tool core events "$id" 2>&1)"
expect_counter no-bad-handle-while-unloading core violations 0
expect_ok dereg-while-unloading nvpm-tool core dereg "$id"
if wait $!; then pass rmmod-done; else fail rmmod-done "rmmod failed"; fi
if loaded peer_test_client; then fail unloaded-after "still loaded"; else pass unloaded-after; fi

# Registration rules: duplicate names, mandatory callbacks.
expect_ok load-dup modprobe peer_test_client dup=1
expect_dmesg duplicate-refused "mofed_peer_sim: peer memory client test_client is already registered"
expect_eq one-client 1 "$(wc -l <$C/clients)"
rmmod peer_test_client
for cb in acquire get_pages put_pages dma_map dma_unmap; do
	expect_fail "missing-$cb" modprobe peer_test_client missing=$cb
	expect_dmesg "missing-$cb-logged" "Peer memory test_client is missing mandatory function $cb"
done
expect_ok release-optional modprobe peer_test_client missing=release
rmmod peer_test_client

# A client without INVALIDATE_UNMAPS: the core unmaps inside the invalidation.
expect_ok load-plain modprobe peer_test_client abi=plain
expect_match plain-client "unmaps_on_invalidate=0" "$(cat $C/clients)"
id=$(nvpm-tool core reg "$va" 1M --inval)
nvpm-tool gpu free "$va" >/dev/null
expect_eq plain-unmapped unmapped "$(nvpm-tool core state "$id" 2>&1)"
expect_eq plain-unmap-once 1 "$(nvpm-tool core show "$id" unmap_calls 2>&1)"
expect_eq plain-put-once 1 "$(nvpm-tool core show "$id" put_calls 2>&1)"
nvpm-tool core dereg "$id"
expect_eq plain-dereg 0 "$(nvpm-tool core mrs | wc -l)"
rmmod peer_test_client

# A persistent client takes no invalidation and serves any MR.
expect_ok load-persistent modprobe peer_test_client persistent=1
va=$(nvpm-tool gpu alloc 1M)
id=$(nvpm-tool core reg "$va" 1M)
expect_eq persistent-owner test_client "$(nvpm-tool core show "$id" client 2>&1)"
expect_ok persistent-sg nvpm-tool expect-sg "$id"
nvpm-tool core dereg "$id"
nvpm-tool gpu free "$va" >/dev/null

nvpm-tool gpu reset
nvpm-tool core reset
expect_ok clean nvpm-tool expect-clean
expect_ok unload rmmod peer_test_client mofed_peer_sim nvidia
