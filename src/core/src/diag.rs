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

use super::range::{GPU_PAGE_SHIFT, GPU_PAGE_SIZE};

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

/// The NVIDIA driver's DMA submap, in OS pages (`nv-linux.h`
/// `NV_DMA_SUBMAP_MAX_PAGES`): `nv-dma.c` maps a mapping's OS pages in
/// submaps of at most this many, each with its own `dma_map_sg`, so each
/// gets its own IOVA range from a translated IOMMU. `U32_MAX >> PAGE_SHIFT`,
/// or 4 GiB - 2 MiB on 4 KiB arm64 kernels (a submap ends on 2 MiB).
pub const fn dma_submap_pages(os_page_shift: u32, arm64: bool) -> u64 {
    let max = (u32::MAX >> os_page_shift) as u64;
    if arm64 && os_page_shift == 12 {
        max + 1 - 512
    } else {
        max
    }
}

/// Why a map of CPU-cacheable (coherent) pages failed with -EIO.
///
/// `osapi.c` `RmP2PDmaMapPages` maps each 64 KiB GPU page as its OS pages
/// and returns `NV_ERR_INVALID_STATE` (-EIO) when a GPU page's OS pages did
/// not come out at contiguous IOVAs. A GPU page cut by the end of a submap
/// spans two `dma_map_sg` calls: with a translated IOMMU that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoherentMapIo {
    /// GPU page `first_cut` (from the mapping's first) is cut by the end of
    /// a submap of `submap_pages` OS pages; mappings of up to `limit` bytes
    /// are not.
    SubmapCut {
        submap_pages: u64,
        first_cut: u64,
        limit: u64,
    },
    /// No submap cuts a page: the IOMMU gave a page's OS pages
    /// non-contiguous addresses by itself.
    NotContiguous,
    /// OS pages of 64 KiB or more: the driver maps GPU pages as they are
    /// and has no such check; the -EIO came from elsewhere.
    NoCheck,
}

impl CoherentMapIo {
    /// The cause for a mapping of `gpu_pages` 64 KiB pages on a kernel with
    /// `os_page_shift`.
    pub fn of_map(gpu_pages: u64, os_page_shift: u32, arm64: bool) -> Self {
        if os_page_shift >= GPU_PAGE_SHIFT {
            return CoherentMapIo::NoCheck;
        }
        let per = 1u64 << (GPU_PAGE_SHIFT - os_page_shift);
        let submap_pages = dma_submap_pages(os_page_shift, arm64);
        if submap_pages % per == 0 || gpu_pages.saturating_mul(per) <= submap_pages {
            return CoherentMapIo::NotContiguous;
        }
        CoherentMapIo::SubmapCut {
            submap_pages,
            first_cut: submap_pages / per,
            limit: submap_pages / per * GPU_PAGE_SIZE,
        }
    }
}

/// The advice after a [`CoherentMapIo::SubmapCut`], completed by its numbers
/// (`SUBMAP_CUT` then submap pages, `SUBMAP_CUT_PAGE`, the GPU page,
/// `SUBMAP_CUT_LIMIT`, the limit in bytes, `SUBMAP_CUT_FIX`).
pub const SUBMAP_CUT: &str = "the NVIDIA driver maps coherent GPU memory in DMA submaps of ";
/// See [`SUBMAP_CUT`].
pub const SUBMAP_CUT_PAGE: &str =
    " OS pages, each placed by the IOMMU on its own, and one ends inside 64 KiB GPU page ";
/// See [`SUBMAP_CUT`].
pub const SUBMAP_CUT_LIMIT: &str =
    " of this mapping, whose OS pages then have non-contiguous addresses: register at most ";
/// See [`SUBMAP_CUT`].
pub const SUBMAP_CUT_FIX: &str = " bytes per memory region, or run the IOMMU in passthrough (iommu.passthrough=1); 64 KiB-page kernels are not affected";

/// The advice after a [`CoherentMapIo::NotContiguous`].
pub const NOT_CONTIGUOUS: &str = "the NVIDIA driver needs the OS pages of each 64 KiB GPU page of coherent memory at contiguous DMA addresses, and the IOMMU did not map them so";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submap_sizes_as_the_driver_computes_them() {
        // nv-linux.h: U32_MAX >> PAGE_SHIFT, 4 GiB - 2 MiB on 4 KiB arm64.
        assert_eq!(dma_submap_pages(12, false), 1_048_575);
        assert_eq!(dma_submap_pages(12, true), 1_048_064);
        assert_eq!(dma_submap_pages(14, true), 262_143);
        assert_eq!(dma_submap_pages(16, true), 65_535);
        // The 4 KiB arm64 submap ends on a 2 MiB boundary.
        assert_eq!(dma_submap_pages(12, true) % 512, 0);
    }

    #[test]
    fn sixteen_k_cuts_the_page_after_4_gib_less_64_kib() {
        // 262143 OS pages = 65535 GPU pages and 3 of the next one.
        let four_gib = 65_536;
        assert_eq!(
            CoherentMapIo::of_map(four_gib, 14, true),
            CoherentMapIo::SubmapCut {
                submap_pages: 262_143,
                first_cut: 65_535,
                limit: 65_535 * 65_536,
            }
        );
        // One GPU page less fits in one submap.
        assert_eq!(
            CoherentMapIo::of_map(four_gib - 1, 14, true),
            CoherentMapIo::NotContiguous
        );
    }

    #[test]
    fn four_k_arm64_submaps_end_between_gpu_pages() {
        for pages in [1, 65_504, 65_505, 1 << 20] {
            assert_eq!(
                CoherentMapIo::of_map(pages, 12, true),
                CoherentMapIo::NotContiguous,
                "{pages}"
            );
        }
        // x86's 4 KiB submaps (4 GiB - 4 KiB) cut the 65536th page.
        assert!(matches!(
            CoherentMapIo::of_map(65_536, 12, false),
            CoherentMapIo::SubmapCut {
                first_cut: 65_535,
                ..
            }
        ));
    }

    #[test]
    fn sixty_four_k_pages_have_no_check() {
        assert_eq!(
            CoherentMapIo::of_map(1 << 20, 16, true),
            CoherentMapIo::NoCheck
        );
    }

    #[test]
    fn submap_advice_reads_as_one_sentence() {
        let line = [
            SUBMAP_CUT,
            "262143",
            SUBMAP_CUT_PAGE,
            "65535",
            SUBMAP_CUT_LIMIT,
            "4294901760",
            SUBMAP_CUT_FIX,
        ]
        .concat();
        for needle in [
            "DMA submaps of 262143 OS pages",
            "GPU page 65535 of this mapping",
            "register at most 4294901760 bytes per memory region",
            "iommu.passthrough=1",
        ] {
            assert!(line.contains(needle), "{needle}: {line}");
        }
        assert!(line.len() < 400 && !line.contains('\n'));
        assert!(NOT_CONTIGUOUS.len() < 400);
    }

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
