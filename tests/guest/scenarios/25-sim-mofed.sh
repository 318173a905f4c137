# The core simulator does what MOFED's peer-memory core does where a client
# can see it (drivers/infiniband/core/peer_mem.c of DOCA-OFED 3.2.1, OFED
# 25.10, github knneth/mlnx-ofa_kernel; tests/sim/README.md, "The MOFED
# core simulator", names the functions): its sg_table is zeroed whenever the
# umem is unmapped, trimmed SGEs (DMA address, DMA length and sg->length)
# come back inside the invalidation, the deregistration's second step
# leaves a window in which a forwarded invalidation still finds the umem,
# and OFED 24.04+ (names=unchecked) registers any client name, the first of
# two with one name winning every acquire. peer_test_client checks at
# release that its SGEs are as its dma_map made them (trimmed_at_release).
. /tests/lib.sh
. /tests/client-lib.sh
sim_unload
TC=/sys/module/peer_test_client/parameters

# A modern core (5.5+) and an _ex client that unmaps itself: an MR starting
# 3 OS pages into a 64 KiB page is trimmed, DMA and sg->length alike.
t=modern
modprobe mofed_peer_sim mode=modern && modprobe nvidia && modprobe peer_test_client || fail "$t/load" "the stack"
va=$(nvpm-tool gpu alloc 2M --layout fragmented)
start=$(printf '0x%x' $((va + 0x3000)))
id=$(nvpm-tool core reg "$start" $((0x200000 - 0x6000)) --inval)
expect_match "$t/table-while-mapped" "^[0-9]+/[0-9]+$" "$(nvpm-tool core show "$id" table 2>&1)"
expect_eq "$t/sg-length-trimmed" $((0x10000 - 0x3000)) "$(nvpm-tool core show "$id" first_sg_length 2>&1)"
expect_ok "$t/sg" nvpm-tool expect-sg "$id"
expect_eq "$t/free" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_eq "$t/invalidated" invalidated "$(nvpm-tool core state "$id" 2>&1)"
# Inside the invalidation: the SGEs restored, then the core's table zeroed.
expect_eq "$t/table-zeroed-by-invalidation" zeroed "$(nvpm-tool core show "$id" table 2>&1)"
expect_ok "$t/dereg-after-invalidation" nvpm-tool core dereg "$id"
expect_eq "$t/restored-before-release" 0 "$(cat $TC/trimmed_at_release)"
# A mapped MR: restored before dma_unmap, as before.
va=$(nvpm-tool gpu alloc 1M --layout shuffled)
id=$(nvpm-tool core reg "$(printf '0x%x' $((va + 0x1000)))" $((0x100000 - 0x2000)) --inval)
expect_ok "$t/dereg" nvpm-tool core dereg "$id"
expect_eq "$t/restored-at-dereg" 0 "$(cat $TC/trimmed_at_release)"
# The deregistration's two steps: a cudaFree between them (after the
# client's dma_unmap and put_pages, before release) fires no callback for a
# client that unpinned in put_pages, and leaves nothing behind.
id=$(nvpm-tool core reg "$va" 1M --inval --free-at destroy_mkey)
cb=$(nvpm-tool gpu counter callbacks)
expect_ok "$t/destroy_mkey/dereg" nvpm-tool core dereg "$id"
expect_eq "$t/destroy_mkey/freed" "" "$(nvpm-tool gpu buffers | awk -v va="$va" '$1 == va')"
expect_eq "$t/destroy_mkey/no-callback" "$cb" "$(nvpm-tool gpu counter callbacks)"
expect_ok "$t/clean" nvpm-tool expect-clean
rmmod peer_test_client mofed_peer_sim nvidia

# A mid core (5.1-5.4-2) unmaps inside the invalidation itself: then too
# its table is zeroed.
t=mid
modprobe mofed_peer_sim mode=mid && modprobe nvidia && modprobe peer_test_client || fail "$t/load" "the stack"
va=$(nvpm-tool gpu alloc 1M)
id=$(nvpm-tool core reg "$va" 1M --inval)
expect_eq "$t/free" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_eq "$t/unmapped" unmapped "$(nvpm-tool core state "$id" 2>&1)"
expect_eq "$t/table-zeroed-by-invalidation" zeroed "$(nvpm-tool core show "$id" table 2>&1)"
expect_ok "$t/dereg" nvpm-tool core dereg "$id"
expect_ok "$t/clean" nvpm-tool expect-clean
rmmod peer_test_client mofed_peer_sim nvidia

# OFED 24.04+: no name is refused. An empty one, one of 64 bytes without a
# NUL, and a second client of one name register (peer_test_client's dup
# registers a second test_client and unregisters it at once).
t=names-unchecked
long=$(printf 'n%.0s' $(seq 64))
for args in "name=" "name=$long" "dup=1"; do
	n="$t/${args%%=*}"
	[ "$args" != "name=$long" ] || n="$t/name-64"
	modprobe mofed_peer_sim names=unchecked && modprobe nvidia || fail "$n/load" "the simulators"
	mark_dmesg "$n"
	expect_ok "$n/registers" modprobe peer_test_client "$args"
	expect_eq "$n/not-refused" 0 "$(dmesg_since_mark | grep -c 'refused\|already registered')"
	sim_unload
done
expect_dmesg "$t/dup-accepted" "peer_test_client: duplicate registration of test_client accepted"

# Two clients named nv_mem: OFED <= 23.10 refuses the second (this module's
# load fails, saying why); 24.04+ registers both and the first registered
# takes every registration.
for names in checked unchecked; do
	t=nv_mem-twice-$names
	modprobe mofed_peer_sim names=$names && modprobe nvidia && modprobe peer_test_client name=nv_mem persistent=1 ||
		fail "$t/load" "the simulators and peer_test_client"
	mark_dmesg "$t"
	if [ $names = checked ]; then
		expect_fail "$t/refused" modprobe nvidia_peermem
		expect_dmesg "$t/core-says" "mofed_peer_sim: peer memory client nv_mem is already registered"
		if own_feature "$t/module-says"; then
			expect_dmesg "$t/module-says" "nvidia_peermem: the RDMA core refused peer-memory client nv_mem"
		fi
		expect_eq "$t/one-client" 1 "$(nvpm-tool core counter clients.live)"
	else
		expect_ok "$t/registers" modprobe nvidia_peermem
		expect_eq "$t/both-listed" 2 "$(nvpm-tool core clients | grep -c '^nv_mem ')"
		va=$(nvpm-tool gpu alloc 1M)
		id=$(nvpm-tool core reg "$va" 1M)
		expect_match "$t/first-wins" "^nv_mem .*regs=1 " "$(nvpm-tool core clients | head -n1)"
		expect_eq "$t/second-unused" 0 "$(nvpm-tool core clients | awk 'NR > 1 && $1 == "nv_mem"' | sed 's/.*regs=\([0-9]*\).*/\1/')"
		nvpm-tool core dereg "$id"
		nvpm-tool gpu free "$va" >/dev/null
		expect_ok "$t/rmmod" rmmod nvidia_peermem
	fi
	expect_ok "$t/clean" nvpm-tool expect-clean
	sim_unload
done
