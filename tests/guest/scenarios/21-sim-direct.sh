# The bare provider: the core simulator's direct mode registers MRs with the
# GPU simulator's nvidia_p2p_* API and no client. SG lists against the GPU's
# DMA addresses, free callbacks, persistent pins, failure injection, bad data,
# the other knobs, the timed loop, and counters back to zero.
. /tests/lib.sh
sim_unload
G=/sys/kernel/debug/nvidia_sim

# The core does not depend on the GPU driver: direct mode finds it at run time.
expect_ok load-core modprobe mofed_peer_sim
expect_dmesg core-banner "mofed_peer_sim: simulated MOFED peer-memory core ready: mode modern, dma_device 0000:00:00.0"
if loaded nvidia; then fail no-gpu-dependency "nvidia loaded with the core"; else pass no-gpu-dependency; fi
expect_match direct-needs-gpu "failed \(ENODEV\): the GPU simulator \(nvidia\) is not loaded" \
	"$(nvpm-tool core direct 0x7f4000000000 64K 2>&1)"
expect_ok load-gpu modprobe nvidia

# SG lists map each range to the GPU's DMA addresses, in every layout.
for layout in contiguous fragmented shuffled; do
	va=$(nvpm-tool gpu alloc 4M --layout $layout)
	id=$(nvpm-tool core direct "$va" 4M)
	expect_ok "$layout-sg" nvpm-tool expect-sg "$id"
	expect_eq "$layout-nmap" 64 "$(nvpm-tool core show "$id" nmap 2>&1)"
	# An unaligned range is pinned and mapped as the 64 KiB pages around it.
	sub=$(nvpm-tool core direct $((va + 0x11234)) 0x20000)
	expect_ok "$layout-sub-sg" nvpm-tool expect-sg "$sub"
	expect_eq "$layout-sub-nmap" 3 "$(nvpm-tool core show "$sub" nmap 2>&1)"
	expect_eq "$layout-sub-start" "$(printf '0x%x' $((va + 0x10000)))" "$(nvpm-tool core show "$sub" sg_va 2>&1)"
	expect_ok "$layout-dereg" nvpm-tool core dereg "$id"
	expect_ok "$layout-dereg-sub" nvpm-tool core dereg "$sub"
	nvpm-tool gpu free "$va" >/dev/null
done
# DMA addresses are per device, not the bus addresses.
va=$(nvpm-tool gpu alloc 64K)
id=$(nvpm-tool core direct "$va" 64K)
bus=$(awk -v va="$va" '$1 == va {print $2}' $G/pages)
dma=$(nvpm-tool core sg "$id" | awk '{print $1}')
expect_eq dma-window "$(printf '0x%x' $((bus + 0x100000000000)))" "$dma"
expect_eq device-listed "0000:00:00.0 0x100000000000" "$(cat $G/devices)"
expect_eq pt-version 0x20000 "$(nvpm-tool core show "$id" pt_version 2>&1)"
expect_eq pt-flags 0x0 "$(nvpm-tool core show "$id" pt_flags 2>&1)"
nvpm-tool core dereg "$id"

# cudaFree fires the callback of the revocable pin; the persistent one stays.
id=$(nvpm-tool core direct "$va" 64K)
pid=$(nvpm-tool core direct "$va" 64K --persistent)
expect_counter pins-live gpu pins.live 1
expect_counter pins-persistent gpu pins.persistent 1
expect_counter mappings-live gpu mappings.live 2
expect_eq free-fires-callback 1 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_eq invalidated invalidated "$(nvpm-tool core state "$id" 2>&1)"
expect_eq one-event 1 "$(nvpm-tool core events "$id" 2>&1)"
expect_eq persistent-survives mapped "$(nvpm-tool core state "$pid" 2>&1)"
expect_eq memory-kept "$va 65536 contiguous freed 1" "$(grep "^$va " $G/buffers)"
expect_counter revoked-pin-gone gpu pins.live 0
expect_counter revoked-mapping-gone gpu mappings.live 1
expect_match freed-range-refused "get_pages failed: -22" "$(nvpm-tool core direct "$va" 64K 2>&1)"
# Unmap and put after the callback return 0, as in the real driver.
expect_ok dereg-invalidated nvpm-tool core dereg "$id"
expect_ok dereg-persistent nvpm-tool core dereg "$pid"
expect_eq memory-released "" "$(grep "^$va " $G/buffers)"
expect_counter callbacks gpu callbacks 1
expect_counter core-invalidations core invalidations 1
expect_counter no-gpu-violations gpu violations 0
expect_counter no-gpu-own-checks gpu own_checks 0

# Failure injection: the nth call fails with the errno, then calls work again.
va=$(nvpm-tool gpu alloc 1M)
nvpm-tool gpu reset
expect_ok inject-get nvpm-tool gpu inject get_pages 1 ENOMEM
expect_match injected-get "get_pages failed: -12" "$(nvpm-tool core direct "$va" 1M 2>&1)"
expect_counter injected-get-counted gpu errors.get_pages 1
expect_ok inject-map nvpm-tool gpu inject dma_map_pages 2 EIO
id=$(nvpm-tool core direct "$va" 1M)
expect_match injected-map "dma_map_pages failed: -5" "$(nvpm-tool core direct "$va" 1M 2>&1)"
expect_counter injected-map-unwound gpu pins.live 1
nvpm-tool core dereg "$id"
expect_eq injections-spent "" "$(nvpm-tool gpu injections 2>&1)"

# Bad data, which a careful consumer refuses.
for bad in "pt_version:page table version 0x30000 is not supported" \
	"page_size:page table page size type 0, not 64 KiB" \
	"dma_version:dma mapping version 0x10000 is not compatible" \
	"entries:page table has 15 entries for 1048576 bytes"; do
	nvpm-tool gpu set bad_data "${bad%%:*}"
	expect_match "bad-${bad%%:*}" "${bad#*:}" "$(nvpm-tool core direct "$va" 1M 2>&1)"
done
nvpm-tool gpu set bad_data none
expect_counter bad-data-unwound gpu pins.live 0

# Page table ABI 1.2 and 2.0 with CPU_CACHEABLE.
nvpm-tool gpu set page_table_version 1.2
id=$(nvpm-tool core direct "$va" 1M)
expect_eq pt-1.2 0x10002 "$(nvpm-tool core show "$id" pt_version 2>&1)"
expect_ok pt-1.2-sg nvpm-tool expect-sg "$id"
nvpm-tool core dereg "$id"
nvpm-tool gpu set page_table_version 2.0
nvpm-tool gpu set cpu_cacheable 1
id=$(nvpm-tool core direct "$va" 1M)
expect_eq cpu-cacheable 0x1 "$(nvpm-tool core show "$id" pt_flags 2>&1)"
nvpm-tool core dereg "$id"
nvpm-tool gpu set cpu_cacheable 0

# No persistent API (MIG, vGPU).
nvpm-tool gpu set persistent_api 0
expect_match persistent-refused "get_pages failed: -524" "$(nvpm-tool core direct "$va" 1M --persistent 2>&1)"
nvpm-tool gpu set persistent_api 1

# A non-PCI device handed to dma_map_pages is caught.
expect_fail nonpci-refused nvpm-tool core direct "$va" 1M --nonpci
expect_counter nonpci-violation gpu violation.bad_peer 1
expect_dmesg nonpci-logged "gpu_sim: contract violation: nvidia_p2p_dma_map_pages with a peer that is no PCI device"

# The timed loop (benchmarks), with and without an artificial cost per call.
expect_match loop "^count 50 elapsed_ns [0-9]+ per_op_ns [0-9]+$" "$(nvpm-tool core direct "$va" 1M --count 50 2>&1)"
nvpm-tool gpu set cost_us 1000
per_op=$(nvpm-tool core direct "$va" 1M --count 5 | awk '{print $6}')
if [ "${per_op:-0}" -ge 4000000 ]; then pass cost-per-call; else fail cost-per-call "per_op_ns '$per_op'"; fi
nvpm-tool gpu set cost_us 0
expect_counter loop-leaves-nothing core mrs.live 0

# dereg all, counters reset, and everything unloads in any order.
nvpm-tool core direct "$va" 1M >/dev/null
nvpm-tool core direct "$va" 64K --persistent >/dev/null
expect_counter two-mrs core mrs.live 2
expect_ok dereg-all nvpm-tool core dereg all
nvpm-tool gpu free "$va" >/dev/null
expect_ok gpu-reset nvpm-tool gpu reset
expect_ok core-reset nvpm-tool core reset
expect_counter calls-reset gpu calls.get_pages 0
expect_counter regs-reset core registrations 0
expect_ok clean nvpm-tool expect-clean
expect_ok unload-gpu-first rmmod nvidia
expect_ok unload-core rmmod mofed_peer_sim
