// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The check behind `expect-sg`: the SG list of an MR, as the core simulator
//! reports it, must map exactly the expected GPU VA range to the DMA
//! addresses that the GPU simulator gives that range for the MR's device.

use std::collections::BTreeMap;

use crate::parse::MrInfo;

/// The GPU simulator's page size.
pub const GPU_PAGE_SIZE: u64 = 64 << 10;

/// What the check needs to know of an MR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MrView {
    pub va: u64,
    pub size: u64,
    /// The client's page size (get_page_size), 64 KiB in direct mode.
    pub page_size: u64,
    pub os_page_size: u64,
    /// Whether the core trimmed the first and last SGE to OS pages.
    pub trimmed: bool,
    /// Where the core says the SG list starts.
    pub sg_va: u64,
    pub sges: Vec<(u64, u64)>,
}

impl MrView {
    /// Builds the view from `show`; trimming follows the core's rule (modern
    /// cores trim when the client's pages are larger than the OS's).
    pub fn from_info(mr: &MrInfo) -> Result<Self, String> {
        let page_size = mr.num("page_size")?;
        let os_page_size = mr.num("os_page_size")?;
        Ok(MrView {
            va: mr.num("va")?,
            size: mr.num("size")?,
            page_size,
            os_page_size,
            trimmed: mr.get("mode")? == "modern"
                && mr.get("direct")? == "0"
                && page_size > os_page_size,
            sg_va: mr.num("sg_va")?,
            sges: mr.sges.clone(),
        })
    }

    /// The GPU VA range the SG list must map.
    pub fn expected_range(&self) -> Result<(u64, u64), String> {
        let unit = if self.trimmed {
            self.os_page_size
        } else {
            self.page_size
        };
        if !unit.is_power_of_two() {
            return Err(format!("page size {unit} is not a power of two"));
        }
        let end = self
            .va
            .checked_add(self.size)
            .and_then(|e| e.checked_next_multiple_of(unit))
            .ok_or("the MR's range overflows")?;
        Ok((self.va & !(unit - 1), end))
    }
}

/// Checks the SG list of @mr against the GPU's pages (`VA -> bus address`,
/// one entry per 64 KiB page) and the device's DMA offset. Returns a summary.
pub fn check(mr: &MrView, pages: &BTreeMap<u64, u64>, dma_offset: u64) -> Result<String, String> {
    let (start, end) = mr.expected_range()?;
    if mr.sg_va != start {
        return Err(format!(
            "the core says the SG list starts at VA {:#x}, expected {start:#x}",
            mr.sg_va
        ));
    }
    let mut va = start;
    for (i, &(addr, len)) in mr.sges.iter().enumerate() {
        let mut off = 0;
        while off < len {
            if va >= end {
                return Err(format!(
                    "SGE {i} goes beyond the end of the range ({end:#x})"
                ));
            }
            let page = va & !(GPU_PAGE_SIZE - 1);
            let bus = pages
                .get(&page)
                .ok_or_else(|| format!("SGE {i}: VA {va:#x} is not GPU memory"))?;
            let expected = bus + dma_offset + (va - page);
            if addr + off != expected {
                return Err(format!(
                    "SGE {i} (+{off:#x}): DMA {:#x} for VA {va:#x}, expected {expected:#x}",
                    addr + off
                ));
            }
            let chunk = (len - off).min(page + GPU_PAGE_SIZE - va);
            off += chunk;
            va += chunk;
        }
    }
    if va != end {
        return Err(format!(
            "the SG list maps VA {start:#x}..{va:#x}, expected {start:#x}..{end:#x}"
        ));
    }
    Ok(format!(
        "{} SGE(s) map VA {start:#x}..{end:#x} to the GPU's DMA addresses",
        mr.sges.len()
    ))
}

/// The lengths, in pages, of the runs of consecutive 64 KiB bus pages.
pub fn runs(bus: &[u64]) -> Vec<u64> {
    let mut runs: Vec<u64> = Vec::new();
    for (i, &b) in bus.iter().enumerate() {
        match runs.last_mut() {
            Some(n) if bus[i - 1].checked_add(GPU_PAGE_SIZE) == Some(b) => *n += 1,
            _ => runs.push(1),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    const K64: u64 = GPU_PAGE_SIZE;
    const VA: u64 = 0x7f40_0000_0000;
    const OFF: u64 = 1 << 44;

    /// Four GPU pages at VA.. with the given bus page numbers.
    fn pages(frames: &[u64]) -> BTreeMap<u64, u64> {
        frames
            .iter()
            .enumerate()
            .map(|(i, f)| (VA + i as u64 * K64, 0x38_0000_0000 + f * K64))
            .collect()
    }

    fn dma(frame: u64) -> u64 {
        0x38_0000_0000 + frame * K64 + OFF
    }

    fn view(va: u64, size: u64, trimmed: bool, sges: Vec<(u64, u64)>) -> MrView {
        let mut mr = MrView {
            va,
            size,
            page_size: K64,
            os_page_size: 4096,
            trimmed,
            sg_va: 0,
            sges,
        };
        mr.sg_va = mr.expected_range().unwrap().0;
        mr
    }

    #[test]
    fn one_sge_per_page() {
        let p = pages(&[7, 3, 9, 1]);
        let sges = vec![(dma(7), K64), (dma(3), K64), (dma(9), K64), (dma(1), K64)];
        assert!(check(&view(VA, 4 * K64, false, sges), &p, OFF).is_ok());
    }

    #[test]
    fn coalesced_contiguous_pages() {
        let p = pages(&[4, 5, 6, 10]);
        let sges = vec![(dma(4), 3 * K64), (dma(10), K64)];
        assert!(check(&view(VA, 4 * K64, false, sges), &p, OFF).is_ok());
        // Coalescing pages that are not contiguous is wrong.
        let p = pages(&[4, 5, 7, 10]);
        let sges = vec![(dma(4), 3 * K64), (dma(10), K64)];
        let err = check(&view(VA, 4 * K64, false, sges), &p, OFF).unwrap_err();
        assert!(err.contains("SGE 0 (+0x20000)"), "{err}");
    }

    #[test]
    fn trimmed_to_os_pages() {
        let p = pages(&[2, 8, 5, 6]);
        // VA + 0x11234, 0x20000 bytes: OS pages 0x11000..0x32000.
        let va = VA + 0x1_1234;
        let sges = vec![
            (dma(8) + 0x1000, K64 - 0x1000),
            (dma(5), K64),
            (dma(6), 0x2000),
        ];
        let mr = view(va, 0x2_0000, true, sges);
        assert_eq!(mr.sg_va, VA + 0x1_1000);
        assert!(check(&mr, &p, OFF).is_ok());
        // The same range untrimmed covers whole 64 KiB pages.
        let sges = vec![(dma(8), K64), (dma(5), K64), (dma(6), K64)];
        assert!(check(&view(va, 0x2_0000, false, sges), &p, OFF).is_ok());
    }

    #[test]
    fn wrong_offset_or_device() {
        let p = pages(&[1, 2, 3, 4]);
        let sges = vec![(dma(1) - OFF, 4 * K64)];
        let err = check(&view(VA, 4 * K64, false, sges), &p, OFF).unwrap_err();
        assert!(err.contains("SGE 0 (+0x0)"), "{err}");
    }

    #[test]
    fn short_and_long_lists() {
        let p = pages(&[1, 2, 3, 4]);
        let short = vec![(dma(1), 3 * K64)];
        let err = check(&view(VA, 4 * K64, false, short), &p, OFF).unwrap_err();
        assert!(err.contains("maps VA"), "{err}");
        let long = vec![(dma(1), 4 * K64), (dma(4) + K64, K64)];
        let err = check(&view(VA, 4 * K64, false, long), &p, OFF).unwrap_err();
        assert!(err.contains("beyond the end"), "{err}");
    }

    #[test]
    fn start_reported_by_the_core() {
        let p = pages(&[1, 2, 3, 4]);
        let mut mr = view(VA, 4 * K64, false, vec![(dma(1), 4 * K64)]);
        mr.sg_va += 4096;
        assert!(check(&mr, &p, OFF).unwrap_err().contains("starts at VA"));
    }

    #[test]
    fn not_gpu_memory() {
        let p = pages(&[1]);
        let sges = vec![(dma(1), K64), (dma(2), K64)];
        let err = check(&view(VA, 2 * K64, false, sges), &p, OFF).unwrap_err();
        assert!(err.contains("is not GPU memory"), "{err}");
    }

    #[test]
    fn page_runs() {
        let b = |f: &[u64]| f.iter().map(|f| f * K64).collect::<Vec<_>>();
        assert_eq!(runs(&b(&[1, 2, 3, 4])), vec![4]);
        assert_eq!(runs(&b(&[1, 2, 4, 6, 7, 8])), vec![2, 1, 3]);
        assert_eq!(runs(&b(&[4, 3, 2, 1])), vec![1, 1, 1, 1]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn view_from_show() {
        let info = MrInfo::parse(
            "va 0x10\nsize 100\npage_size 65536\nos_page_size 4096\nmode modern\ndirect 0\nsg_va 0x0\nsge 0x1000 4096\n",
        )
        .unwrap();
        let mr = MrView::from_info(&info).unwrap();
        assert!(mr.trimmed);
        assert_eq!(mr.expected_range(), Ok((0, 4096)));
        let info = MrInfo::parse(
            "va 0x10\nsize 100\npage_size 65536\nos_page_size 4096\nmode mid\ndirect 0\nsg_va 0x0\n",
        )
        .unwrap();
        assert!(!MrView::from_info(&info).unwrap().trimmed);
    }
}
