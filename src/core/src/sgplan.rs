// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Scatterlist planning: physically contiguous 64 KiB DMA pages become one
//! segment, bounded by the DMA device's maximum segment size.
//!
//! The first segment starts at the first page's address (the 64 KiB-aligned
//! start), so the RDMA core's first/last SGE trimming stays correct.

use super::range::GPU_PAGE_SIZE;

/// One planned scatterlist entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// DMA address of the first byte.
    pub addr: u64,
    /// Length in bytes: a multiple of 64 KiB, at most the segment limit
    /// (which fits an SGE's 32-bit length).
    pub len: u64,
}

/// The largest segment length usable for a device limit: a multiple of 64 KiB
/// that fits an SGE's 32-bit length, never less than one page.
pub fn segment_limit(max_seg_size: u64) -> u32 {
    let cap = max_seg_size.min(u64::from(u32::MAX));
    let pages = (cap / GPU_PAGE_SIZE).max(1);
    // CAST: at most u32::MAX / 64 KiB pages of 64 KiB fit in u32.
    (pages * GPU_PAGE_SIZE) as u32
}

/// How many pages a segment starting at `start` may hold near the top of
/// the address space: at most `limit_pages`, fewer where the addresses would
/// pass the top (nothing wraps to 0).
#[cold]
#[inline(never)]
fn pages_below_top(start: u64, limit_pages: u64) -> u64 {
    let pages_to_top = (u64::MAX - start) / GPU_PAGE_SIZE + 1;
    pages_to_top.min(limit_pages)
}

/// Calls `emit` with the segments of `pages` (the DMA address of each 64 KiB
/// page, in order) for `limit` from [`segment_limit`], in order, and stops at
/// its first error. One pass; in the common case, one compare per page.
#[inline(always)]
pub fn for_each_segment<E>(
    pages: &[u64],
    limit: u32,
    mut emit: impl FnMut(Segment) -> Result<(), E>,
) -> Result<(), E> {
    let limit_pages = (u64::from(limit) / GPU_PAGE_SIZE).max(1);
    let Some((&first, rest)) = pages.split_first() else {
        return Ok(());
    };
    let mut rest = rest.iter();
    let segment = |start: u64, end: u64| Segment {
        addr: start,
        // At most `limit_pages` pages, which fit u32.
        len: end.wrapping_sub(start),
    };
    // A segment starting at or below this ends below the top.
    let full_below = u64::MAX - limit_pages * GPU_PAGE_SIZE;
    let mut start = first;
    // CAST: at most u32::MAX / 64 KiB.
    if pages.len() <= limit_pages as usize && start <= full_below {
        // The common case: no segment can reach the limit or the top, so a
        // segment ends only where the addresses do.
        let mut next = start.wrapping_add(GPU_PAGE_SIZE);
        loop {
            let Some(&page) = rest.next() else {
                return emit(segment(start, next));
            };
            if page != next {
                emit(segment(start, next))?;
                start = page;
                if page > full_below {
                    break;
                }
                next = page;
            }
            next = next.wrapping_add(GPU_PAGE_SIZE);
        }
    }
    // The general case, from `start` on: each segment ends at the address
    // where it would reach the limit or pass the top (`cap`) at the latest.
    let cap_of = |start: u64| {
        let pages = if start > full_below {
            pages_below_top(start, limit_pages)
        } else {
            limit_pages
        };
        start.wrapping_add(pages * GPU_PAGE_SIZE)
    };
    let mut cap = cap_of(start);
    let mut next = start.wrapping_add(GPU_PAGE_SIZE);
    for &page in rest {
        if page != next || page == cap {
            emit(segment(start, next))?;
            start = page;
            cap = cap_of(page);
        }
        next = page.wrapping_add(GPU_PAGE_SIZE);
    }
    emit(segment(start, next))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const P: u64 = GPU_PAGE_SIZE;

    fn plan(pages: &[u64], limit: u32) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        for_each_segment(pages, limit, |s| {
            out.push((s.addr, u32::try_from(s.len).unwrap()));
            Ok::<(), ()>(())
        })
        .unwrap();
        out
    }

    #[test]
    fn contiguous_pages_make_one_segment() {
        let pages: Vec<u64> = (0..16384).map(|i| 0x1_0000_0000 + i * P).collect();
        let segs = plan(&pages, segment_limit(u64::MAX));
        assert_eq!(segs, [(0x1_0000_0000, 1 << 30)]);
    }

    #[test]
    fn an_error_from_emit_stops_the_plan() {
        let pages = [0, 3 * P, 6 * P, 9 * P];
        let mut seen = 0;
        let r = for_each_segment(&pages, segment_limit(1 << 31), |s| {
            seen += 1;
            if s.addr == 3 * P {
                Err(s.addr)
            } else {
                Ok(())
            }
        });
        assert_eq!((r, seen), (Err(3 * P), 2));
    }

    #[test]
    fn no_pages_no_segments() {
        assert!(plan(&[], segment_limit(1 << 31)).is_empty());
    }

    #[test]
    fn gaps_split_segments() {
        let pages = [0, P, 3 * P, 4 * P, 10 * P];
        assert_eq!(
            plan(&pages, segment_limit(1 << 31)),
            [(0, 2 * P as u32), (3 * P, 2 * P as u32), (10 * P, P as u32)]
        );
    }

    #[test]
    fn descending_pages_are_not_merged() {
        let pages = [5 * P, 4 * P, 3 * P];
        assert_eq!(plan(&pages, segment_limit(1 << 31)).len(), 3);
    }

    #[test]
    fn device_limit_bounds_segments() {
        let pages: Vec<u64> = (0..10).map(|i| i * P).collect();
        let segs = plan(&pages, segment_limit(4 * P));
        assert_eq!(
            segs,
            [
                (0, 4 * P as u32),
                (4 * P, 4 * P as u32),
                (8 * P, 2 * P as u32)
            ]
        );
    }

    #[test]
    fn limit_below_a_page_still_makes_pages() {
        assert_eq!(segment_limit(4096), P as u32);
        assert_eq!(segment_limit(0), P as u32);
        let pages = [0, P];
        assert_eq!(
            plan(&pages, segment_limit(4096)),
            [(0, P as u32), (P, P as u32)]
        );
    }

    #[test]
    fn limit_fits_u32() {
        assert_eq!(segment_limit(u64::MAX), (u32::MAX as u64 / P * P) as u32);
        assert_eq!(segment_limit(1 << 31), 1 << 31);
        assert_eq!(segment_limit((1 << 31) + 5), 1 << 31);
    }

    #[test]
    fn address_wrap_is_not_contiguous() {
        let pages = [u64::MAX - P + 1, 0];
        assert_eq!(plan(&pages, segment_limit(1 << 31)).len(), 2);
    }

    /// The planner as first written: page by page, checked arithmetic.
    fn reference_plan(pages: &[u64], limit: u32) -> Vec<(u64, u32)> {
        let limit = u64::from(limit).max(P);
        let mut out: Vec<(u64, u32)> = Vec::new();
        for &page in pages {
            match out.last_mut() {
                Some((addr, len))
                    if addr.checked_add(u64::from(*len)) == Some(page)
                        && u64::from(*len) + P <= limit =>
                {
                    *len += P as u32
                }
                _ => out.push((page, P as u32)),
            }
        }
        out
    }

    #[test]
    fn planner_agrees_with_the_reference() {
        let mut seed = 99u64;
        for case in 0..400 {
            let mut pages = Vec::new();
            let mut addr = if case % 7 == 0 {
                u64::MAX - 8 * P + 1
            } else {
                0x1_0000_0000
            };
            let len = (case * 13) % 300;
            for i in 0..len {
                // Some layouts jump close to the top halfway, where the
                // planner must start capping its segments.
                if case % 7 == 3 && i == len / 2 {
                    addr = u64::MAX - 8 * P + 1;
                }
                pages.push(addr);
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                addr = match seed >> 61 {
                    0 => addr.wrapping_sub(3 * P),
                    1 | 2 => addr.wrapping_add(2 * P),
                    _ => addr.wrapping_add(P),
                };
            }
            for limit in [0, 4096, P, 3 * P, 4 * P, 1 << 31, u64::MAX] {
                let limit = segment_limit(limit);
                let planned = plan(&pages, limit);
                assert_eq!(
                    planned,
                    reference_plan(&pages, limit),
                    "case {case}, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn unaligned_addresses_near_the_top_do_not_wrap() {
        let limit = segment_limit(1 << 31);
        let pages = [u64::MAX - P - 5, u64::MAX - 5, 0xfffa];
        assert_eq!(plan(&pages, limit).len(), 2);
        assert_eq!(plan(&pages, limit), reference_plan(&pages, limit));
    }

    #[test]
    fn segments_cover_every_page_in_order() {
        // A pseudo-random layout: runs of 1..=5 pages with gaps.
        let mut pages = Vec::new();
        let mut addr = 0x4000_0000u64;
        let mut seed = 12345u64;
        while pages.len() < 1000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let run = 1 + (seed >> 60) % 5;
            for _ in 0..run {
                pages.push(addr);
                addr += P;
            }
            addr += P * (1 + (seed >> 40) % 3);
        }
        for limit in [P, 2 * P, 3 * P, 1 << 31] {
            let segs = plan(&pages, segment_limit(limit));
            let mut expanded = Vec::new();
            for (a, l) in &segs {
                assert!(u64::from(*l) <= limit.max(P) && *l as u64 % P == 0);
                expanded.extend((0..u64::from(*l) / P).map(|i| a + i * P));
            }
            assert_eq!(expanded, pages);
        }
    }
}
