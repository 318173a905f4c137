// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! What the log says when the NVIDIA driver refuses a map, from what this
//! module knows about the pin (its page table's flags).
//!
//! `nvidia_p2p_dma_map_pages` fails with -ENOTSUPP (osapi.c
//! `rm_p2p_dma_map_pages`) for:
//! - the PCIe topology rule (580+, `nv_grdma_pci_topology_supported`): on a
//!   Grace (TH500), Ampere Altra or AmpereOne chipset GPU and NIC must share
//!   a PCIe switch unless `NVreg_GrdmaPciTopoCheckOverride` says otherwise.
//!   A PCIe GPU's pages are not CPU-cacheable;
//! - driver-managed coherent memory (CDMM, `CoherentGPUMemoryMode=driver`),
//!   whose pages are CPU-cacheable: 580.65-580.126 and 590 branch on
//!   `mem_has_struct_page`, false under CDMM, and apply the topology rule to
//!   it; 580.142 and 595.44.02+ branch on the coherent flag and need
//!   nvidia-uvm's device-coherent pagemap of the GPU's memory
//!   (`nv_dma_get_dev_pagemap`, made by `uvm_pmm_cdmm_init` on a kernel with
//!   `CONFIG_ZONE_DEVICE`). Outside CDMM a coherent GPU's map takes neither.
//!
//! The driver's release is not known here, so the coherent advice names both.

/// The likely cause of a map refused with -ENOTSUPP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapNotSupported {
    /// Pages not CPU-cacheable (a PCIe GPU): the PCIe topology rule.
    PcieTopology,
    /// CPU-cacheable pages (a coherent GPU): its memory in CDMM.
    CoherentCdmm,
}

impl MapNotSupported {
    /// The cause for a pin whose page table had (or lacked)
    /// `NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE`.
    pub fn of_pin(cpu_cacheable: bool) -> Self {
        if cpu_cacheable {
            MapNotSupported::CoherentCdmm
        } else {
            MapNotSupported::PcieTopology
        }
    }

    /// What to log after "cannot map ADDR for the NIC: ", one text per log
    /// line (no newline).
    pub fn advice(self) -> &'static [&'static str] {
        match self {
            MapNotSupported::PcieTopology => &[PCIE_TOPOLOGY],
            MapNotSupported::CoherentCdmm => &[CDMM_UVM, CDMM_TOPOLOGY],
        }
    }
}

/// A map of pages that are not CPU-cacheable, refused with -ENOTSUPP.
pub const PCIE_TOPOLOGY: &str = "the NVIDIA driver refused (-ENOTSUPP): on a Grace (TH500), Ampere Altra or AmpereOne chipset it allows GPUDirect RDMA only when GPU and NIC share a PCIe switch; put them under one switch, or set NVreg_GrdmaPciTopoCheckOverride=1 (nvidia module option) if this platform's PCIe P2P is known good (2 refuses every PCIe GPU)";

/// A map of CPU-cacheable pages refused with -ENOTSUPP, first line: CDMM on
/// 580.142 and 595.44.02+.
pub const CDMM_UVM: &str = "the NVIDIA driver refused (-ENOTSUPP) CPU-cacheable pages: driver-managed coherent memory (CDMM, CoherentGPUMemoryMode=driver); drivers 580.142 and 595.44.02+ map it only with nvidia-uvm's device-coherent pagemap: load nvidia-uvm (needs a kernel with CONFIG_ZONE_DEVICE)";

/// Second line: CDMM on 580.65-580.126 and 590.
pub const CDMM_TOPOLOGY: &str = "drivers 580.65-580.126 and 590 apply the PCIe topology rule to CDMM memory instead: on a Grace (TH500) chipset GPU and NIC must share a PCIe switch, or set NVreg_GrdmaPciTopoCheckOverride=1 (nvidia module option); 580.142 and 595.44.02+ lift this rule";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_cacheable_is_the_topology_rule() {
        assert_eq!(
            MapNotSupported::of_pin(false),
            MapNotSupported::PcieTopology
        );
        assert_eq!(MapNotSupported::PcieTopology.advice(), &[PCIE_TOPOLOGY]);
    }

    #[test]
    fn topology_text_is_unchanged() {
        // The line as the module logged it before CDMM was told apart
        // (tests/guest/scenarios/47-client-coherent.sh, README.md).
        assert_eq!(
            PCIE_TOPOLOGY,
            "the NVIDIA driver refused (-ENOTSUPP): on a Grace (TH500), Ampere Altra or \
             AmpereOne chipset it allows GPUDirect RDMA only when GPU and NIC share a PCIe \
             switch; put them under one switch, or set NVreg_GrdmaPciTopoCheckOverride=1 \
             (nvidia module option) if this platform's PCIe P2P is known good (2 refuses \
             every PCIe GPU)"
        );
    }

    #[test]
    fn cacheable_is_cdmm() {
        assert_eq!(MapNotSupported::of_pin(true), MapNotSupported::CoherentCdmm);
        assert_eq!(
            MapNotSupported::CoherentCdmm.advice(),
            &[CDMM_UVM, CDMM_TOPOLOGY]
        );
    }

    #[test]
    fn cdmm_names_uvm_on_the_newer_releases() {
        for needle in [
            "(-ENOTSUPP)",
            "CPU-cacheable",
            "driver-managed coherent memory (CDMM",
            "580.142 and 595.44.02+",
            "nvidia-uvm's device-coherent pagemap",
            "load nvidia-uvm",
            "CONFIG_ZONE_DEVICE",
        ] {
            assert!(CDMM_UVM.contains(needle), "{needle}");
        }
        // Not the switch advice: that is for the older releases only.
        assert!(!CDMM_UVM.contains("switch"));
    }

    #[test]
    fn cdmm_gives_the_older_releases_the_switch_advice() {
        for needle in [
            "580.65-580.126 and 590",
            "PCIe topology rule",
            "share a PCIe switch",
            "NVreg_GrdmaPciTopoCheckOverride=1",
            "580.142 and 595.44.02+ lift this rule",
        ] {
            assert!(CDMM_TOPOLOGY.contains(needle), "{needle}");
        }
    }

    #[test]
    fn cdmm_lines_do_not_read_as_the_topology_line() {
        // A check for the non-coherent line (the Grace chipset text right
        // after "refused (-ENOTSUPP):") matches neither CDMM line.
        let prefix = "the NVIDIA driver refused (-ENOTSUPP): on a Grace";
        assert!(PCIE_TOPOLOGY.starts_with(prefix));
        for line in MapNotSupported::CoherentCdmm.advice() {
            assert!(!line.contains(prefix), "{line}");
        }
    }

    #[test]
    fn one_or_two_lines() {
        for cause in [MapNotSupported::PcieTopology, MapNotSupported::CoherentCdmm] {
            let lines = cause.advice();
            assert!((1..=2).contains(&lines.len()));
            for line in lines {
                assert!(!line.contains('\n'));
                // Room for the prefix and address within a printk record.
                assert!(line.len() < 400, "{line}");
            }
        }
    }
}
