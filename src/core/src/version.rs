// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Checks of what the NVIDIA driver hands back, before anything is used.

use super::range::{GPU_PAGE_SHIFT, GPU_PAGE_SIZE};

/// Page-table ABI 1.x (drivers up to 575).
pub const PAGE_TABLE_V1: u32 = 0x0001_0002;
/// Page-table ABI 2.0 (580.65 and later): adds a flags word.
pub const PAGE_TABLE_V2: u32 = 0x0002_0000;
/// The DMA-mapping ABI every supported driver reports.
pub const DMA_MAPPING_VERSION: u32 = 0x0002_0003;
/// `NVIDIA_P2P_PAGE_SIZE_64KB`.
pub const PAGE_SIZE_TYPE_64KB: u32 = 1;
/// `NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE`.
pub const FLAG_CPU_CACHEABLE: u32 = 0x1;

/// The major half of an NVIDIA P2P version word.
pub fn major(version: u32) -> u32 {
    version >> 16
}

/// The minor half of an NVIDIA P2P version word.
pub fn minor(version: u32) -> u32 {
    version & 0xffff
}

/// `NVIDIA_P2P_VERSION_COMPATIBLE`: same major, minor at least the expected one.
pub fn compatible(found: u32, expected: u32) -> bool {
    major(found) == major(expected) && minor(found) >= minor(expected)
}

/// What is wrong with a page table or DMA mapping the driver returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbiError {
    /// Page-table version neither 1.x (≥ 1.2) nor 2.x.
    PageTableVersion(u32),
    /// DMA-mapping version not compatible with 2.3.
    DmaMappingVersion(u32),
    /// A page size other than 64 KiB (NVIDIA's own code BUG()s on 4 KiB).
    PageSize(u32),
    /// The entry count does not match the pinned length.
    Entries {
        /// Entries the driver reported.
        found: u64,
        /// Entries the pinned length implies.
        expected: u64,
    },
}

impl core::fmt::Display for AbiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            AbiError::PageTableVersion(v) => write!(
                f,
                "page-table version {}.{} not supported (expected 1.2+ or 2.x)",
                major(v),
                minor(v)
            ),
            AbiError::DmaMappingVersion(v) => write!(
                f,
                "DMA-mapping version {}.{} not supported (expected 2.3+)",
                major(v),
                minor(v)
            ),
            AbiError::PageSize(t) => write!(f, "page size type {t} is not 64 KiB"),
            AbiError::Entries { found, expected } => write!(
                f,
                "{found} entries for a range of {expected} 64 KiB GPU pages (one per GPU page expected)"
            ),
        }
    }
}

/// The layout a page table was returned in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageTableAbi {
    /// 1.x: no flags word.
    V1,
    /// 2.x: the flags word is valid.
    V2,
}

impl core::fmt::Display for PageTableAbi {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            PageTableAbi::V1 => "1.x",
            PageTableAbi::V2 => "2.x",
        })
    }
}

/// Checks a page table's version word and returns its layout.
pub fn page_table_abi(version: u32) -> Result<PageTableAbi, AbiError> {
    if compatible(version, PAGE_TABLE_V2) {
        Ok(PageTableAbi::V2)
    } else if compatible(version, PAGE_TABLE_V1) {
        Ok(PageTableAbi::V1)
    } else {
        Err(AbiError::PageTableVersion(version))
    }
}

/// Checks a page table's page size and entry count against the pinned length.
pub fn check_page_table(
    page_size_type: u32,
    entries: u32,
    pinned_len: u64,
) -> Result<(), AbiError> {
    if page_size_type != PAGE_SIZE_TYPE_64KB {
        return Err(AbiError::PageSize(page_size_type));
    }
    check_entries(entries, pinned_len)
}

/// Checks a DMA mapping's version, page size and entry count.
pub fn check_dma_mapping(
    version: u32,
    page_size_type: u32,
    entries: u32,
    pinned_len: u64,
) -> Result<(), AbiError> {
    if !compatible(version, DMA_MAPPING_VERSION) {
        return Err(AbiError::DmaMappingVersion(version));
    }
    if page_size_type != PAGE_SIZE_TYPE_64KB {
        return Err(AbiError::PageSize(page_size_type));
    }
    check_entries(entries, pinned_len)
}

fn check_entries(entries: u32, pinned_len: u64) -> Result<(), AbiError> {
    let expected = pinned_len >> GPU_PAGE_SHIFT;
    let found = u64::from(entries);
    if found == expected && pinned_len % GPU_PAGE_SIZE == 0 {
        Ok(())
    } else {
        Err(AbiError::Entries { found, expected })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_well() {
        extern crate std;
        use std::string::ToString;
        assert_eq!(
            AbiError::PageTableVersion(0x0003_0000).to_string(),
            "page-table version 3.0 not supported (expected 1.2+ or 2.x)"
        );
        assert_eq!(
            AbiError::PageSize(0).to_string(),
            "page size type 0 is not 64 KiB"
        );
        assert_eq!(
            AbiError::Entries {
                found: 63,
                expected: 64
            }
            .to_string(),
            "63 entries for a range of 64 64 KiB GPU pages (one per GPU page expected)"
        );
        assert_eq!(PageTableAbi::V2.to_string(), "2.x");
    }

    #[test]
    fn version_halves() {
        assert_eq!((major(0x0002_0003), minor(0x0002_0003)), (2, 3));
    }

    #[test]
    fn compatible_follows_nvidia_macro() {
        assert!(compatible(0x0002_0003, DMA_MAPPING_VERSION));
        assert!(compatible(0x0002_0007, DMA_MAPPING_VERSION));
        assert!(!compatible(0x0002_0002, DMA_MAPPING_VERSION));
        assert!(!compatible(0x0003_0003, DMA_MAPPING_VERSION));
        assert!(!compatible(0x0001_0003, DMA_MAPPING_VERSION));
    }

    #[test]
    fn page_table_versions_1_and_2_are_accepted() {
        assert_eq!(page_table_abi(0x0001_0002), Ok(PageTableAbi::V1));
        assert_eq!(page_table_abi(0x0001_0005), Ok(PageTableAbi::V1));
        assert_eq!(page_table_abi(0x0002_0000), Ok(PageTableAbi::V2));
        assert_eq!(page_table_abi(0x0002_0001), Ok(PageTableAbi::V2));
    }

    #[test]
    fn other_page_table_versions_are_refused() {
        for v in [0, 0x0001_0001, 0x0003_0000, 0xffff_ffff] {
            assert_eq!(page_table_abi(v), Err(AbiError::PageTableVersion(v)));
        }
    }

    #[test]
    fn page_size_must_be_64k() {
        assert_eq!(
            check_page_table(0, 1, GPU_PAGE_SIZE),
            Err(AbiError::PageSize(0))
        );
        assert_eq!(
            check_page_table(2, 1, GPU_PAGE_SIZE),
            Err(AbiError::PageSize(2))
        );
        assert_eq!(
            check_page_table(99, 1, GPU_PAGE_SIZE),
            Err(AbiError::PageSize(99))
        );
        assert_eq!(check_page_table(1, 1, GPU_PAGE_SIZE), Ok(()));
    }

    #[test]
    fn entries_must_match_length() {
        assert_eq!(check_page_table(1, 16, 16 * GPU_PAGE_SIZE), Ok(()));
        assert_eq!(
            check_page_table(1, 15, 16 * GPU_PAGE_SIZE),
            Err(AbiError::Entries {
                found: 15,
                expected: 16
            })
        );
        assert_eq!(
            check_dma_mapping(DMA_MAPPING_VERSION, 1, 17, 16 * GPU_PAGE_SIZE),
            Err(AbiError::Entries {
                found: 17,
                expected: 16
            })
        );
    }

    #[test]
    fn dma_mapping_checks_version_first() {
        assert_eq!(
            check_dma_mapping(0x0001_0000, 1, 1, GPU_PAGE_SIZE),
            Err(AbiError::DmaMappingVersion(0x0001_0000))
        );
        assert_eq!(
            check_dma_mapping(DMA_MAPPING_VERSION, 0, 1, GPU_PAGE_SIZE),
            Err(AbiError::PageSize(0))
        );
        assert_eq!(
            check_dma_mapping(DMA_MAPPING_VERSION, 1, 1, GPU_PAGE_SIZE),
            Ok(())
        );
    }
}
