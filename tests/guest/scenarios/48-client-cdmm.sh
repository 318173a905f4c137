# CDMM (CoherentGPUMemoryMode=driver, R580+): a coherent GPU whose memory
# the driver keeps to itself, without struct page. Pins are the coherent
# GPU's (C2C addresses, CPU-cacheable, localized memory refused); the map
# depends on the driver's release (tests/sim/README.md, "CDMM", cites the
# source):
# - 580.142 and 595.44.02+ (the GPU simulator's cdmm_map_path=coherent_flag)
#   map as on any coherent GPU, without the PCIe topology rule, but only
#   with a reference on nvidia-uvm's device-coherent pagemap of the GPU's
#   memory: without it (uvm_pagemap=0) dma_map_pages fails with -ENOTSUPP;
# - 580.65.06-580.126.20 and 590.x (cdmm_map_path=struct_page) take the
#   PCIe topology rule (on a Grace chipset GPU and NIC must share a PCIe
#   switch, or GrdmaPciTopoCheckOverride=1) and map each GPU page as MMIO,
#   nvidia-uvm or not.
# What the RDMA stack sees (the registration works and its SG list maps the
# GPU's addresses, or it fails with which errno and nothing stays pinned)
# is checked for any module; this module's log line for the refused map
# (CDMM named from the pin's CPU-cacheable flag, with the advice for both
# branches, as the module cannot tell the release) is its own feature.
# Page-size agnostic: the guest's page size is read from the core's MR.
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

# expect_cdmm_logged NAME: this module's own log line for a map of
# CPU-cacheable pages refused with -ENOTSUPP since the latest mark: CDMM,
# nvidia-uvm for 580.142/595.44.02+, the topology rule for 580.65-580.126
# and 590; not the PCIe GPU's line (the chipset text alone).
expect_cdmm_logged() {
	expect_dmesg "$1/uvm" "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver refused \\(-ENOTSUPP\\) CPU-cacheable pages: driver-managed coherent memory \\(CDMM, CoherentGPUMemoryMode=driver\\); drivers 580\\.142 and 595\\.44\\.02\\+ .*load nvidia-uvm .*CONFIG_ZONE_DEVICE"
	expect_dmesg "$1/topology-rule" "nvidia_peermem: cannot map .* for the NIC: drivers 580\\.65-580\\.126 and 590 apply the PCIe topology rule to CDMM memory instead: .*share a PCIe switch, or set NVreg_GrdmaPciTopoCheckOverride=1 .*580\\.142 and 595\\.44\\.02\\+ lift this rule"
	if dmesg_since_mark | grep -qE "nvidia_peermem: cannot map .* for the NIC: the NVIDIA driver refused \\(-ENOTSUPP\\): on a Grace"; then
		fail "$1/not-pcie-text" "the PCIe GPU's line logged for CPU-cacheable pages"
	else
		pass "$1/not-pcie-text"
	fi
}

# c2c_addr VA: the first page address the GPU hands out for the buffer at VA.
c2c_addr() { nvpm-tool gpu pages | awk -v va="$(printf '%#x' "$1")" '$1 == va {print $2}'; }

# CDMM is a mode of a coherent GPU: the simulator refuses it on a PCIe one.
for m in nvidia_peermem mofed_peer_sim nvidia; do ! loaded $m || rmmod $m; done
mark_dmesg load-refused
expect_fail "cdmm-needs-coherent" modprobe nvidia cdmm=1
expect_dmesg "cdmm-needs-coherent/logged" "cdmm=1 needs coherent=1"
! loaded nvidia || rmmod nvidia

for layout in default legacy; do
	if [ $layout = default ]; then params=""; flags=""; else params="persistent_api_support=0"; flags="--inval"; fi

	# ---- 580.142, 595.44.02+: the coherent branch, uvm's pagemap -------
	t=$layout/coherent-flag
	load_stack "$t" "mode=modern" "coherent=1 cdmm=1 cdmm_map_path=coherent_flag" "$params" || continue
	va=$(nvpm-tool gpu alloc 4M --layout fragmented)
	nvpm-tool gpu reset >/dev/null
	if id=$(nvpm-tool core reg "$va" 4M $flags 2>&1); then
		pass "$t/reg"
		expect_ok "$t/sg" nvpm-tool expect-sg "$id"
		os_page=$(nvpm-tool core show "$id" os_page_size 2>&1)
		expect_match "$t/c2c-addresses" "^0x4[0-9a-f]{11}$" "$(c2c_addr "$va")"
		# RmP2PDmaMapPages: the OS pages of each GPU page, as without CDMM.
		expect_counter "$t/driver-mapped-os-pages" gpu maps.os_pages $((4194304 / os_page))
		expect_ok "$t/dereg" nvpm-tool core dereg "$id"
	else
		fail "$t/reg" "$id"
		os_page=4096
	fi
	expect_nothing_held "$t/clean"

	# No topology rule on this branch, even on a Grace chipset without a
	# shared switch.
	nvpm-tool gpu set p2p_unsupported_chipset 1
	reg_ok "$t/no-topology-rule" "$va" 1M $flags
	nvpm-tool gpu set p2p_unsupported_chipset 0
	expect_counter "$t/no-topology-rule/not-refused" gpu maps.topology_refused 0

	# nvidia-uvm has no device-coherent pagemap of the GPU's memory (not
	# loaded, GPU not registered with it, or a kernel without ZONE_DEVICE
	# device-coherent pages): the pin works, the map fails (-ENOTSUPP),
	# even on a chipset the topology rule would allow; nothing stays held.
	nvpm-tool gpu set uvm_pagemap 0
	nvpm-tool gpu reset >/dev/null
	reg_fails "$t/no-uvm-pagemap" ENOTSUPP "$va" 1M $flags
	expect_counter "$t/no-uvm-pagemap/by-driver" gpu maps.pagemap_refused 1
	if own_feature "$t/no-uvm-pagemap/logged"; then
		expect_cdmm_logged "$t/no-uvm-pagemap/logged"
	fi
	# Refused at the map, after pins that worked.
	expect_match "$t/no-uvm-pagemap/at-map" "^[1-9]" "$(nvpm-tool gpu counter errors.dma_map_pages)"
	expect_eq "$t/no-uvm-pagemap/pins-worked" 0 \
		"$(($(nvpm-tool gpu counter errors.get_pages) + $(nvpm-tool gpu counter errors.get_pages_persistent)))"
	nvpm-tool gpu set common_switch 1
	nvpm-tool gpu set NVreg_GrdmaPciTopoCheckOverride 1
	reg_fails "$t/no-uvm-pagemap/override-irrelevant" ENOTSUPP "$va" 1M $flags
	nvpm-tool gpu set NVreg_GrdmaPciTopoCheckOverride 0
	nvpm-tool gpu set common_switch 0
	nvpm-tool gpu set uvm_pagemap 1
	reg_ok "$t/uvm-pagemap-back" "$va" 1M $flags

	# The IOMMU's split still fails the map (-EIO), as without CDMM.
	if [ "$os_page" -lt 65536 ]; then
		nvpm-tool gpu set iova_split 1
		reg_fails "$t/iova-not-contiguous" EIO "$va" 1M $flags
		nvpm-tool gpu set iova_split 0
	else
		skip "$t/iova-not-contiguous" "64 KiB OS pages: the driver maps GPU pages directly"
	fi

	# Pins as without CDMM: localized memory is refused by the pin calls.
	vl=$(nvpm-tool gpu alloc 1M --localized)
	reg_fails "$t/localized-refused" "EFAULT|ENOTSUPP" "$vl" 1M $flags
	for b in "$va" "$vl"; do nvpm-tool gpu free "$b" >/dev/null; done
	unload_stack "$t"

	# ---- 580.65.06-580.126.20, 590.x: struct page branch, MMIO ---------
	t=$layout/struct-page
	load_stack "$t" "mode=modern" "coherent=1 cdmm=1 cdmm_map_path=struct_page" "$params" || continue
	va=$(nvpm-tool gpu alloc 4M --layout fragmented)
	nvpm-tool gpu reset >/dev/null
	if id=$(nvpm-tool core reg "$va" 4M $flags 2>&1); then
		pass "$t/reg"
		expect_ok "$t/sg" nvpm-tool expect-sg "$id"
		expect_match "$t/c2c-addresses" "^0x4[0-9a-f]{11}$" "$(c2c_addr "$va")"
		# One MMIO map per 64 KiB page, no OS-page mapping.
		expect_counter "$t/driver-mapped-mmio" gpu maps.mmio_pages 64
		expect_counter "$t/no-os-pages" gpu maps.os_pages 0
		expect_ok "$t/dereg" nvpm-tool core dereg "$id"
	else
		fail "$t/reg" "$id"
	fi
	expect_nothing_held "$t/clean"

	# nvidia-uvm plays no part on this branch.
	nvpm-tool gpu set uvm_pagemap 0
	reg_ok "$t/no-uvm-needed" "$va" 1M $flags
	nvpm-tool gpu set uvm_pagemap 1
	expect_counter "$t/no-uvm-needed/not-refused" gpu maps.pagemap_refused 0

	# No contiguity check on MMIO maps: the IOMMU's split does not fail it.
	nvpm-tool gpu set iova_split 1
	reg_ok "$t/iova-split-irrelevant" "$va" 1M $flags
	nvpm-tool gpu set iova_split 0

	# The PCIe topology rule applies: on a Grace (TH500) chipset with no
	# shared switch, -ENOTSUPP from dma_map_pages.
	nvpm-tool gpu set p2p_unsupported_chipset 1
	reg_fails "$t/no-common-switch" ENOTSUPP "$va" 2M $flags
	expect_counter "$t/no-common-switch/by-driver" gpu maps.topology_refused 1
	if own_feature "$t/no-common-switch/logged"; then
		expect_cdmm_logged "$t/no-common-switch/logged"
	fi
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

	# A revocable registration is still invalidated by a free.
	if [ $layout = legacy ]; then
		id=$(nvpm-tool core reg "$va" 1M --inval)
		expect_eq "$t/free-invalidates" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
		expect_ok "$t/dereg-after-free" nvpm-tool core dereg "$id"
	else
		nvpm-tool gpu free "$va" >/dev/null
	fi
	unload_stack "$t"
done
