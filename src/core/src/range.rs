// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! GPU virtual-address ranges in units of the 64 KiB pages NVIDIA pins.

/// Log2 of the GPU page size the P2P API works in.
pub const GPU_PAGE_SHIFT: u32 = 16;
/// The GPU page size the P2P API works in (64 KiB).
pub const GPU_PAGE_SIZE: u64 = 1 << GPU_PAGE_SHIFT;
const GPU_PAGE_MASK: u64 = GPU_PAGE_SIZE - 1;

/// Why a user range cannot be turned into a GPU range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeError {
    /// The range has no bytes.
    Empty,
    /// The range, or its 64 KiB-aligned cover, runs past the end of the address space.
    Overflow,
}

/// A non-empty, 64 KiB-aligned range of GPU virtual addresses.
///
/// # Invariants
///
/// `start` and `len` are multiples of [`GPU_PAGE_SIZE`], `len > 0`, and
/// `start + len` does not overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuRange {
    start: u64,
    len: u64,
}

impl GpuRange {
    /// The smallest aligned range covering `size` bytes at `addr`.
    pub fn covering(addr: u64, size: u64) -> Result<Self, RangeError> {
        if size == 0 {
            return Err(RangeError::Empty);
        }
        let end = addr.checked_add(size).ok_or(RangeError::Overflow)?;
        let aligned_end = align_up(end).ok_or(RangeError::Overflow)?;
        let start = align_down(addr);
        // INVARIANT: both ends are aligned, `aligned_end >= end > start`.
        Ok(Self {
            start,
            len: aligned_end - start,
        })
    }

    /// First byte of the range.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Length in bytes, a non-zero multiple of 64 KiB.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// One past the last byte.
    // Used by the host tests only.
    #[cfg_attr(MODULE, allow(dead_code))]
    pub fn end(&self) -> u64 {
        self.start + self.len
    }

    /// Number of 64 KiB pages.
    // Used by the host tests only.
    #[cfg_attr(MODULE, allow(dead_code))]
    pub fn pages(&self) -> u64 {
        self.len >> GPU_PAGE_SHIFT
    }

    /// Whether `addr` lies inside the range.
    // Used by the host tests only.
    #[cfg_attr(MODULE, allow(dead_code))]
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.len
    }
}

/// Rounds `addr` down to a 64 KiB boundary.
pub fn align_down(addr: u64) -> u64 {
    addr & !GPU_PAGE_MASK
}

/// Rounds `addr` up to a 64 KiB boundary, or `None` past the address space.
pub fn align_up(addr: u64) -> Option<u64> {
    Some(addr.checked_add(GPU_PAGE_MASK)? & !GPU_PAGE_MASK)
}

/// Whether `addr` is on a 64 KiB boundary.
// Used by the host tests only.
#[cfg_attr(MODULE, allow(dead_code))]
pub fn is_aligned(addr: u64) -> bool {
    addr & GPU_PAGE_MASK == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const K64: u64 = GPU_PAGE_SIZE;

    #[test]
    fn aligned_range_is_unchanged() {
        let r = GpuRange::covering(0x7f00_0000_0000, 4 * K64).unwrap();
        assert_eq!(
            (r.start(), r.len(), r.pages()),
            (0x7f00_0000_0000, 4 * K64, 4)
        );
        assert_eq!(r.end(), 0x7f00_0000_0000 + 4 * K64);
    }

    #[test]
    fn unaligned_start_and_end_widen_to_pages() {
        let r = GpuRange::covering(K64 + 1, K64).unwrap();
        assert_eq!((r.start(), r.len()), (K64, 2 * K64));
        let r = GpuRange::covering(3 * K64 - 1, 2).unwrap();
        assert_eq!((r.start(), r.len()), (2 * K64, 2 * K64));
    }

    #[test]
    fn one_byte_is_one_page() {
        let r = GpuRange::covering(5, 1).unwrap();
        assert_eq!((r.start(), r.len(), r.pages()), (0, K64, 1));
    }

    #[test]
    fn zero_length_is_refused() {
        assert_eq!(GpuRange::covering(K64, 0), Err(RangeError::Empty));
        assert_eq!(GpuRange::covering(0, 0), Err(RangeError::Empty));
    }

    #[test]
    fn wrap_around_is_refused() {
        assert_eq!(GpuRange::covering(u64::MAX, 1), Err(RangeError::Overflow));
        assert_eq!(GpuRange::covering(1, u64::MAX), Err(RangeError::Overflow));
        assert_eq!(
            GpuRange::covering(u64::MAX - K64, 2 * K64),
            Err(RangeError::Overflow)
        );
    }

    #[test]
    fn cover_past_the_top_is_refused() {
        // The bytes fit, but the aligned end would be 2^64.
        assert_eq!(
            GpuRange::covering(u64::MAX - K64 - 5, K64),
            Err(RangeError::Overflow)
        );
    }

    #[test]
    fn highest_coverable_range_is_accepted() {
        let top = u64::MAX - K64 + 1; // last aligned page
        let r = GpuRange::covering(top - K64, K64).unwrap();
        assert_eq!(r.end(), top);
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(K64 + 123), K64);
        assert_eq!(align_up(K64 + 123), Some(2 * K64));
        assert_eq!(align_up(2 * K64), Some(2 * K64));
        assert_eq!(align_up(u64::MAX), None);
        assert!(is_aligned(0) && is_aligned(3 * K64) && !is_aligned(3 * K64 + 4096));
    }

    #[test]
    fn contains_is_half_open() {
        let r = GpuRange::covering(K64, K64).unwrap();
        assert!(!r.contains(K64 - 1));
        assert!(r.contains(K64) && r.contains(2 * K64 - 1));
        assert!(!r.contains(2 * K64));
    }

    #[test]
    fn exhaustive_small_ranges_cover_exactly() {
        // Every (addr, size) on a 4 KiB grid over four pages: the cover is
        // the minimal aligned superset.
        for addr in (0..4 * K64).step_by(4096) {
            for size in (1..4 * K64).step_by(4096) {
                let r = GpuRange::covering(addr, size).unwrap();
                assert!(is_aligned(r.start()) && is_aligned(r.len()));
                assert!(r.start() <= addr && r.end() >= addr + size);
                assert!(addr - r.start() < K64 && r.end() - (addr + size) < K64);
            }
        }
    }
}
