# The older MOFED generations of the core simulator, with the test client:
# mid (5.1-5.4-2: no _ex, unmap and put inside the invalidation, no trimming)
# and legacy (<=5.0: tickets, the 152-byte struct, release inside the
# invalidation, clients with context private data skipped).
. /tests/lib.sh
sim_unload
C=/sys/kernel/debug/mofed_peer_sim

# --- mid ---
expect_ok load-mid modprobe mofed_peer_sim mode=mid
expect_ok load-client modprobe peer_test_client
expect_eq mid-mode mid "$(nvpm-tool core mode 2>&1)"
expect_match mid-ignores-ex "^test_client .*unmaps_on_invalidate=0" "$(cat $C/clients)"
va=$(nvpm-tool gpu alloc 1M --layout shuffled)
id=$(nvpm-tool core reg $((va + 0x11234)) 0x20000 --inval)
expect_eq mid-untrimmed "$(printf '0x%x' $((va + 0x10000)))" "$(nvpm-tool core show "$id" sg_va 2>&1)"
expect_eq mid-nmap 3 "$(nvpm-tool core show "$id" nmap 2>&1)"
expect_ok mid-sg nvpm-tool expect-sg "$id"
# The client is called back from inside its own free callback and must not
# call the GPU then (the simulator would count a violation).
expect_eq mid-free 1 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_eq mid-unmapped unmapped "$(nvpm-tool core state "$id" 2>&1)"
expect_eq mid-unmap-inside 1 "$(nvpm-tool core show "$id" unmap_calls 2>&1)"
expect_eq mid-put-inside 1 "$(nvpm-tool core show "$id" put_calls 2>&1)"
expect_ok mid-dereg nvpm-tool core dereg "$id"
expect_counter mid-gpu-clean gpu violations 0
expect_counter mid-gpu-no-own-check gpu own_checks 0
expect_counter mid-core-clean core violations 0
expect_ok mid-unload rmmod peer_test_client mofed_peer_sim

# --- legacy ---
expect_ok load-legacy modprobe mofed_peer_sim mode=legacy
expect_ok load-legacy-client modprobe peer_test_client abi=legacy nc=1
va=$(nvpm-tool gpu alloc 1M --layout fragmented)
id1=$(nvpm-tool core reg "$va" 1M --inval)
id2=$(nvpm-tool core reg "$va" 64K --inval)
nid=$(nvpm-tool core reg "$va" 1M)
expect_eq ticket-1 1 "$(nvpm-tool core show "$id1" core_context 2>&1)"
expect_eq ticket-2 2 "$(nvpm-tool core show "$id2" core_context 2>&1)"
expect_eq no-inval-ticket 0 "$(nvpm-tool core show "$nid" core_context 2>&1)"
expect_ok legacy-sg nvpm-tool expect-sg "$id1"
expect_ok legacy-sg-nc nvpm-tool expect-sg "$nid"
# The whole deregistration, release included, happens in the invalidation.
expect_eq legacy-free 2 "$(nvpm-tool gpu free "$va" 2>&1)"
for id in "$id1" "$id2"; do
	expect_eq "legacy-released-$id" released "$(nvpm-tool core state "$id" 2>&1)"
	expect_eq "legacy-unmap-$id" "1 1" "$(nvpm-tool core show "$id" unmap_calls) $(nvpm-tool core show "$id" put_calls)"
done
expect_match legacy-users "^test_client users=0 " "$(cat $C/clients)"
expect_eq legacy-nc-mapped mapped "$(nvpm-tool core state "$nid" 2>&1)"
expect_ok legacy-dereg-all nvpm-tool core dereg all
expect_counter legacy-gpu-clean gpu violations 0
expect_counter legacy-gpu-no-own-check gpu own_checks 0
expect_counter legacy-core-clean core violations 0
rmmod peer_test_client

# An _ex client on a 4.x core: ex_size lands on get_context_private_data, so
# the core takes it for a peer_id client and never offers it ordinary MRs.
va=$(nvpm-tool gpu alloc 1M)
for abi in ex legacy_ctx; do
	expect_ok "load-$abi" modprobe peer_test_client abi=$abi
	expect_match "$abi-has-ctx-private" "context_private_data=1" "$(cat $C/clients)"
	expect_match "$abi-skipped" "no peer memory client claims" "$(nvpm-tool core reg "$va" 1M --inval 2>&1)"
	rmmod peer_test_client
done
expect_dmesg ctx-private-logged "registered peer memory client test_client \(version 1.0, invalidation, core unmaps, context private data\)"
# 4.x also required get_page_size.
expect_fail legacy-needs-page-size modprobe peer_test_client abi=legacy missing=get_page_size
expect_dmesg legacy-needs-page-size-logged "Peer memory test_client is missing mandatory function get_page_size"
nvpm-tool gpu free "$va" >/dev/null

nvpm-tool gpu reset
nvpm-tool core reset
expect_ok clean nvpm-tool expect-clean
expect_ok unload rmmod mofed_peer_sim nvidia
