# Coherent platforms and the PCIe topology rule, as NVIDIA's 580-595 driver
# behaves there (read in 595.45.04; tests/sim/README.md cites each rule):
# - a coherent GPU (GH200, GB200: the GPU simulator's coherent=1) pins C2C
#   addresses, CPU-cacheable (page table 2.0 flags); dma_map_pages maps the
#   OS pages of each 64 KiB page inside the driver and still hands back one
#   address per 64 KiB page, failing (-EIO) when the IOMMU did not make
#   them contiguous; memory allocated as localized is refused (-ENOTSUPP);
# - a non-coherent GPU on a Grace, Ampere Altra or AmpereOne chipset is
#   mapped for a NIC only when both share a PCIe switch, unless the
#   driver's GrdmaPciTopoCheckOverride says otherwise: -ENOTSUPP from
#   dma_map_pages.
# What the RDMA stack sees (the registration works and its SG list maps the
# GPU's addresses, or it fails and nothing stays pinned) is checked for any
# module; this module's statistics and log lines are its own features.
# On every page size (4, 16 and 64 KiB) each case tests what its name says;
# where the driver behaves differently by page size (its IOVA check, its DMA
# submaps), the expected outcome is the driver's for the guest's page size.
. /tests/lib.sh
. /tests/client-lib.sh

# reg_ok NAME VA SIZE [FLAGS...]: registers, checks the SG list against the
# GPU's DMA addresses, deregisters.
reg_ok() {
	ro_name=$1
	shift
	if ro_id=$(nvpm-tool core reg "$@" 2>&1); then
		expect_ok "$ro_name" nvpm-tool expect-sg "$ro_id"
		nvpm-tool core dereg "$ro_id" >/dev/null
	else
		fail "$ro_name" "$ro_id"
	fi
}

pstat() { awk -v n="$1" '$1 == n {print $2}' "$STATS" 2>/dev/null; }

for layout in default legacy; do
	if [ $layout = default ]; then params=""; flags=""; else params="persistent_api_support=0"; flags="--inval"; fi

	# ---- A coherent GPU ------------------------------------------------
	t=$layout/coherent
	# 8 GiB of GPU memory: room for the 4 GiB maps below.
	load_stack "$t" "mode=modern" "coherent=1 vram_mb=8192" "$params" || continue
	os_page=$(os_page_size)
	va=$(nvpm-tool gpu alloc 4M --layout fragmented)
	nvpm-tool gpu reset >/dev/null
	if id=$(nvpm-tool core reg "$va" 4M $flags 2>&1); then
		pass "$t/reg"
		expect_ok "$t/sg" nvpm-tool expect-sg "$id"
		expect_eq "$t/core-page-size" "$os_page" "$(nvpm-tool core show "$id" os_page_size 2>&1)"
		# The pages are C2C addresses (coherentCpuFbBase + pa), and the
		# driver mapped each 64 KiB page as its OS pages (with 64 KiB
		# pages: one per entry, 64).
		expect_match "$t/c2c-addresses" "^0x4[0-9a-f]{11}$" \
			"$(nvpm-tool gpu pages | awk -v va="$(printf '%#x' "$va")" '$1 == va {print $2}')"
		expect_counter "$t/driver-mapped-os-pages" gpu maps.os_pages $((4194304 / os_page))
		if own_feature "$t/cacheable-counted"; then
			expect_eq "$t/cacheable-counted" 1 "$(pstat cpu_cacheable_pins)"
			expect_dmesg "$t/cacheable-logged" "nvidia_peermem: pages at .* are CPU-cacheable \\(coherent platform; further such pins are counted in cpu_cacheable_pins\\)"
		fi
		expect_ok "$t/dereg" nvpm-tool core dereg "$id"
	else
		fail "$t/reg" "$id"
	fi
	expect_nothing_held "$t/clean"

	# Contiguous and shuffled buffers too; a registration at 4 KiB into a
	# GPU page (the core trims to OS pages where they are smaller).
	vc=$(nvpm-tool gpu alloc 2M --layout contiguous)
	reg_ok "$t/contiguous" "$vc" 2M $flags
	vs=$(nvpm-tool gpu alloc 1M --layout shuffled)
	reg_ok "$t/shuffled" "$vs" 1M $flags
	reg_ok "$t/offset" "$((vc + 4096))" $((1048576 - 4096)) $flags

	# The topology rule does not apply to a coherent GPU: the NIC maps
	# over C2C.
	nvpm-tool gpu set p2p_unsupported_chipset 1
	reg_ok "$t/no-topology-rule" "$va" 1M $flags
	nvpm-tool gpu set p2p_unsupported_chipset 0
	expect_counter "$t/no-topology-rule/not-refused" gpu maps.topology_refused 0

	# The IOMMU gave a GPU page's OS pages non-contiguous IOVAs: the
	# driver fails the map (NV_ERR_INVALID_STATE, -EIO). With 64 KiB OS
	# pages a GPU page is one OS page: no check, the map works.
	nvpm-tool gpu set iova_split 1
	if [ "$os_page" -lt 65536 ]; then
		reg_fails "$t/iova-not-contiguous" EIO "$va" 1M $flags
		if own_feature "$t/iova-not-contiguous/logged"; then
			expect_dmesg "$t/iova-not-contiguous/logged" "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver returned EIO"
			expect_dmesg "$t/iova-not-contiguous/explained" "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver needs the OS pages of each 64 KiB GPU page of coherent memory at contiguous DMA addresses"
		fi
	else
		reg_ok "$t/iova-not-contiguous" "$va" 1M $flags
	fi
	nvpm-tool gpu set iova_split 0

	# A map of 4 GiB and one GPU page: the driver maps OS pages in DMA
	# submaps of U32_MAX >> PAGE_SHIFT pages (4 GiB - 2 MiB on 4 KiB
	# arm64), each placed by a translated IOMMU on its own (the GPU
	# simulator's default, submaps_apart=1). Where a submap ends inside a
	# GPU page (16 KiB pages, x86's 4 KiB) that page's OS pages are not
	# contiguous: -EIO. 4 KiB arm64 submaps end between GPU pages; with
	# 64 KiB pages there is no check. In passthrough the map works.
	submap=$(nvpm-tool gpu counter dma.submap_pages)
	per=$((65536 / os_page))
	vb=$(nvpm-tool gpu alloc $((4294967296 + 65536)) --layout contiguous)
	nvpm-tool gpu reset >/dev/null
	if [ "$per" -gt 1 ] && [ $((submap % per)) != 0 ]; then
		reg_fails "$t/4g-submap-cut" EIO "$vb" $((4294967296 + 65536)) $flags
		expect_counter "$t/4g-submap-cut/by-driver" gpu maps.submap_cuts 1
		if own_feature "$t/4g-submap-cut/explained"; then
			expect_dmesg "$t/4g-submap-cut/explained" "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver maps coherent GPU memory in DMA submaps of $submap OS pages, .* GPU page $((submap / per)) of this mapping, .* register at most $((submap / per * 65536)) bytes per memory region, or run the IOMMU in passthrough \\(iommu.passthrough=1\\)"
		fi
	else
		reg_ok "$t/4g-no-submap-cut" "$vb" $((4294967296 + 65536)) $flags
		expect_counter "$t/4g-no-submap-cut/by-driver" gpu maps.submap_cuts 0
	fi
	nvpm-tool gpu set submaps_apart 0
	reg_ok "$t/4g-passthrough" "$vb" $((4294967296 + 65536)) $flags
	nvpm-tool gpu set submaps_apart 1
	nvpm-tool gpu free "$vb" >/dev/null

	# A mapping with one entry per 4 KiB (what no 595 driver returns: its
	# dma_mapping->entries is the table's) is refused before use. The
	# anchor does not check the entry count: this module's own check.
	if own_feature "$t/dma-entries-refused"; then
		nvpm-tool gpu set bad_data dma_entries
		reg_fails "$t/dma-entries-refused" EINVAL "$va" 1M $flags
		nvpm-tool gpu set bad_data none
		expect_dmesg "$t/dma-entries-logged" "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver returned unusable data: 256 entries for a range of 16 64 KiB GPU pages"
	fi

	# Localized memory: the driver refuses RDMA on it over coherent
	# mappings (-ENOTSUPP from both pin calls), so no client takes it.
	vl=$(nvpm-tool gpu alloc 1M --localized)
	reg_fails "$t/localized-refused" "EFAULT|ENOTSUPP" "$vl" 1M $flags
	expect_match "$t/localized-refused/by-driver" "^[1-9]" \
		"$(($(nvpm-tool gpu counter errors.get_pages) + $(nvpm-tool gpu counter errors.get_pages_persistent)))"
	# Logged: by the revocable client at each refusal; by the persistent
	# nv_mem once, as its refusals fall back to the revocable client
	# (which takes only MRs with invalidation).
	if own_feature "$t/localized-logged"; then
		if [ $layout = legacy ]; then
			expect_dmesg "$t/localized-logged" "nvidia_peermem: cannot pin 1048576 bytes at .*: the NVIDIA driver does not allow RDMA on this memory \\(-ENOTSUPP\\).*localized"
		else
			expect_dmesg "$t/localized-logged" "nvidia_peermem: persistent pinning refused \\(MIG, vGPU, or memory the driver keeps from RDMA such as localized memory"
		fi
	fi

	# A revocable registration is still invalidated by a free.
	if [ $layout = legacy ]; then
		id=$(nvpm-tool core reg "$vc" 1M --inval)
		expect_eq "$t/free-invalidates" 1 "$(nvpm-tool gpu free "$vc" 2>&1)"
		expect_ok "$t/dereg-after-free" nvpm-tool core dereg "$id"
	else
		nvpm-tool gpu free "$vc" >/dev/null
	fi
	for b in "$va" "$vs" "$vl"; do nvpm-tool gpu free "$b" >/dev/null; done
	unload_stack "$t"

	# ---- A PCIe GPU on a Grace / Ampere chipset ------------------------
	t=$layout/chipset
	load_stack "$t" "mode=modern" "p2p_unsupported_chipset=1" "$params" || continue
	va=$(nvpm-tool gpu alloc 2M --layout fragmented)
	# GPU and NIC share no PCIe switch: dma_map_pages fails (-ENOTSUPP).
	reg_fails "$t/no-common-switch" ENOTSUPP "$va" 2M $flags
	expect_counter "$t/no-common-switch/by-driver" gpu maps.topology_refused 1
	if own_feature "$t/no-common-switch/logged"; then
		expect_dmesg "$t/no-common-switch/logged" "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver refused \\(-ENOTSUPP\\): on a Grace \\(TH500\\), Ampere Altra or AmpereOne chipset it allows GPUDirect RDMA only when GPU and NIC share a PCIe switch.*NVreg_GrdmaPciTopoCheckOverride=1"
	fi
	# What lets the map through: a shared switch, the override (1), a
	# passthrough VM; override 2 refuses even a shared switch.
	nvpm-tool gpu set common_switch 1
	reg_ok "$t/common-switch" "$va" 2M $flags
	nvpm-tool gpu set NVreg_GrdmaPciTopoCheckOverride 2
	reg_fails "$t/override-deny" ENOTSUPP "$va" 2M $flags
	nvpm-tool gpu set common_switch 0
	nvpm-tool gpu set NVreg_GrdmaPciTopoCheckOverride 1
	reg_ok "$t/override-allow" "$va" 2M $flags
	nvpm-tool gpu set NVreg_GrdmaPciTopoCheckOverride 0
	nvpm-tool gpu set passthrough 1
	reg_ok "$t/passthrough" "$va" 2M $flags
	nvpm-tool gpu set passthrough 0
	nvpm-tool gpu set p2p_unsupported_chipset 0
	reg_ok "$t/other-chipset" "$va" 2M $flags
	# Non-coherent: BAR1 addresses, not CPU-cacheable, localized memory
	# allowed (the BAR1 path does not check it).
	vl=$(nvpm-tool gpu alloc 1M --localized)
	reg_ok "$t/localized-over-bar1" "$vl" 1M $flags
	if own_feature "$t/not-cacheable"; then
		expect_eq "$t/not-cacheable" 0 "$(pstat cpu_cacheable_pins)"
	fi
	for b in "$va" "$vl"; do nvpm-tool gpu free "$b" >/dev/null; done
	unload_stack "$t"
done
