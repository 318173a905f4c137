// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The scatterlists `dma_map` hands to the RDMA core. All `unsafe` for them
//! lives here.
//!
//! A table is built in one pass over the driver's page addresses, the
//! planner (`sgplan`) and the writer fused, each entry written once and
//! whole. All of it comes from the module's own slab caches (`src/shim.c`):
//! a table of up to 16 entries is one object of 1 or 16 slots
//! (`nvidia_peermem_sg_1`, `_16`); longer ones are chunks (`nvidia_peermem_sg`,
//! 4 KiB, and `nvidia_peermem_sg_large`, 16 KiB), chained as `sg_next` walks
//! them. Those caches have a constructor, so the slab allocator zeroes an
//! object when it creates it and not again on every allocation
//! (`init_on_alloc`); entries past the end mark are never read.
//!
//! Clean slots: an object in a cache has `page_link` and `offset` 0 in
//! every slot (the constructor's state), so an entry is written as its
//! length and DMA fields only (three stores). Freeing restores that state:
//! it clears the chain links and the end mark, the only `page_link` bits
//! this module sets. The RDMA core writes only an entry's length and DMA
//! fields (trimming, MOFED's `fix_peer_sgls`), never these two.

use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use kernel::bindings;
use kernel::ffi::c_ulong;
use kernel::prelude::*;

use crate::abi;
use crate::peermem_core::sgplan::{for_each_segment, Segment};

/// Tables of at most this many entries are one object of a short class
/// (`SgClass::exact`); the plan is first collected on the stack to find out.
const SG_EXACT_MAX: usize = 16;

/// `page_link` bits, from `include/linux/scatterlist.h`.
const SG_CHAIN: c_ulong = 0x01;
const SG_END: c_ulong = 0x02;

type Sg = bindings::scatterlist;

/// The module's scatterlist chunk caches, destroyed on drop.
pub(crate) struct SgCache(());

impl SgCache {
    /// Creates the caches; at most one `SgCache` exists.
    pub(crate) fn create() -> Result<Self> {
        // SAFETY: called once, at module init, before any table is built.
        kernel::error::to_result(unsafe { abi::nvpm_sg_cache_create() })?;
        Ok(Self(()))
    }
}

impl Drop for SgCache {
    fn drop(&mut self) {
        // SAFETY: dropped at module exit, after the clients were unregistered:
        // the core released every registration, and with it every table.
        unsafe { abi::nvpm_sg_cache_destroy() };
    }
}

/// Why a table was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SgError {
    /// An allocation without reclaim failed and the reserve had nothing left.
    NeedMemory,
    /// The table is unusable (too many entries).
    Failed(Error),
}

/// Objects set aside for a table, allocated without the pin's lock (their
/// allocation may reclaim), taken while building under it.
///
/// # Invariants
///
/// `exact[c]` is a clean object of exact class `c`; `chunks[taken..]` are
/// clean chunks of `size`; all of them owned by this value (`chunks[..taken]`
/// were handed out).
pub(crate) struct SgReserve {
    // CAST: a small constant from shim.h.
    exact: [Option<NonNull<Sg>>; abi::NVPM_SG_EXACT_CLASSES as usize],
    chunks: KVec<NonNull<Sg>>,
    taken: usize,
    size: ChunkSize,
}

impl SgReserve {
    /// An empty reserve (allocates nothing).
    pub(crate) fn new() -> Self {
        // INVARIANT: empty.
        Self {
            // CAST: a small constant from shim.h.
            exact: [None; abi::NVPM_SG_EXACT_CLASSES as usize],
            chunks: KVec::new(),
            taken: 0,
            size: ChunkSize::Small,
        }
    }

    /// Allocates, with reclaim (no lock held), what a table of at most
    /// `max_entries` entries can need: an object of each exact class it may
    /// end in, and as many chunks as it can fill.
    pub(crate) fn fill(&mut self, max_entries: usize) -> Result {
        for (class, slot) in self.exact.iter_mut().enumerate() {
            // A table of one page is one entry (class 0).
            if slot.is_none() && (class == 0 || max_entries > 1) {
                // CAST: 0 or 1.
                *slot = Some(SgClass(class as u32).alloc()?);
            }
        }
        if max_entries > SG_EXACT_MAX {
            self.free_chunks();
            // INVARIANT: no chunk left, any size.
            self.size = ChunkSize::for_entries(max_entries);
            let want = max_entries.div_ceil(self.size.entries());
            self.chunks = KVec::with_capacity(want, GFP_KERNEL)?;
            self.taken = 0;
            while self.chunks.len() < want {
                let chunk = self.size.class().alloc()?;
                if let Err(e) = self.chunks.push(chunk, GFP_KERNEL) {
                    // SAFETY: just allocated, clean, not kept.
                    unsafe { self.size.class().free(chunk.as_ptr()) };
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// A reserved object of `class`, if any.
    fn take(&mut self, class: SgClass) -> Option<NonNull<Sg>> {
        // CAST: a class number of shim.h.
        if let Some(slot) = self.exact.get_mut(class.0 as usize) {
            return slot.take();
        }
        if class.0 != self.size.class().0 {
            return None;
        }
        let chunk = self.chunks.get(self.taken).copied()?;
        // INVARIANT: handed out.
        self.taken += 1;
        Some(chunk)
    }

    /// Frees the chunks not handed out.
    fn free_chunks(&mut self) {
        for chunk in self.chunks.get(self.taken..).unwrap_or(&[]) {
            // SAFETY: a clean chunk of `size` owned by the reserve (invariant).
            unsafe { self.size.class().free(chunk.as_ptr()) };
        }
        // INVARIANT: none left.
        self.taken = self.chunks.len();
    }
}

impl Drop for SgReserve {
    fn drop(&mut self) {
        for (class, slot) in self.exact.iter_mut().enumerate() {
            if let Some(sg) = slot.take() {
                // SAFETY: a clean object of this class (invariant); CAST: 0 or 1.
                unsafe { SgClass(class as u32).free(sg.as_ptr()) };
            }
        }
        self.free_chunks();
    }
}

/// A slab class of scatterlist objects (`src/ffi/shim.h`).
///
/// # Invariants
///
/// One of shim.h's `NVPM_SG_CLASSES` classes.
#[derive(Clone, Copy)]
struct SgClass(u32);

impl SgClass {
    /// The class of a short table of `nents` (1 to [`SG_EXACT_MAX`])
    /// entries: one slot for one entry, else 16. (Two classes only: each
    /// cache costs the module's load dozens of allocations.)
    fn exact(nents: usize) -> Self {
        const _: () = assert!(abi::NVPM_SG_EXACT_CLASSES == 2 && SG_EXACT_MAX == 16);
        const _: () = assert!(abi::NVPM_SG_EXACT_CLASSES <= abi::NVPM_SG_CLASSES);
        // INVARIANT: below NVPM_SG_EXACT_CLASSES.
        Self(u32::from(nents > 1))
    }

    /// A clean object of this class; the allocation may reclaim (no lock
    /// a free callback waits for may be held).
    fn alloc(self) -> Result<NonNull<Sg>> {
        // SAFETY: the caches exist while clients are registered (`SgCache`);
        // the class is one of them (invariant).
        NonNull::new(unsafe { abi::nvpm_sg_alloc(self.0) }).ok_or(ENOMEM)
    }

    /// A clean object of this class from `reserve`, or allocated without
    /// reclaim; [`SgError::NeedMemory`] if neither has one.
    fn take(self, reserve: &mut SgReserve) -> Result<NonNull<Sg>, SgError> {
        if let Some(sg) = reserve.take(self) {
            return Ok(sg);
        }
        // SAFETY: as in `alloc`.
        NonNull::new(unsafe { abi::nvpm_sg_alloc_nowait(self.0) }).ok_or(SgError::NeedMemory)
    }

    /// Frees an object, clean again (no `page_link` or `offset` set).
    ///
    /// # Safety
    ///
    /// `sg` came from [`SgClass::alloc`] or [`SgClass::take`] of this
    /// class, is clean, and is not
    /// used afterwards.
    unsafe fn free(self, sg: *mut Sg) {
        // SAFETY: see above (caller).
        unsafe { abi::nvpm_sg_free(sg, self.0) };
    }
}

/// The chunk size of a chained table: one small chunk for a table that
/// cannot outgrow it, large ones otherwise (a quarter of the allocations for
/// a large fragmented table).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ChunkSize {
    Small,
    Large,
}

impl ChunkSize {
    /// The size for a table of at most `max_entries` entries.
    fn for_entries(max_entries: usize) -> Self {
        if max_entries <= Self::Small.entries() {
            Self::Small
        } else {
            Self::Large
        }
    }

    /// The slab class of chunks of this size.
    const fn class(self) -> SgClass {
        const _: () = assert!(abi::NVPM_SG_LARGE_CHUNK_CLASS < abi::NVPM_SG_CLASSES);
        const _: () = assert!(abi::NVPM_SG_CHUNK_CLASS < abi::NVPM_SG_CLASSES);
        // INVARIANT: classes of shim.h (checked above).
        match self {
            Self::Small => SgClass(abi::NVPM_SG_CHUNK_CLASS),
            Self::Large => SgClass(abi::NVPM_SG_LARGE_CHUNK_CLASS),
        }
    }

    /// Slots per chunk; the last one links to the next chunk.
    const fn slots(self) -> usize {
        // CAST: small constants from shim.h.
        match self {
            Self::Small => abi::NVPM_SG_CHUNK_SLOTS as usize,
            Self::Large => abi::NVPM_SG_LARGE_CHUNK_SLOTS as usize,
        }
    }

    /// Data entries per chunk.
    const fn entries(self) -> usize {
        self.slots() - 1
    }

    /// A clean chunk of this size, without reclaim ([`SgClass::take`]).
    fn take(self, reserve: &mut SgReserve) -> Result<NonNull<Sg>, SgError> {
        self.class().take(reserve)
    }

    /// Frees the chunks of a chain: `count` chunks starting at `first`, each
    /// but the last linked to the next in its last slot; `end_mark` is the
    /// slot of the last chunk marked as the end, if any. Each chunk goes back
    /// clean.
    ///
    /// # Safety
    ///
    /// The chunks came from [`ChunkSize::take`] of this size, are linked as
    /// described, have no other `page_link` or `offset` set, and are not used
    /// afterwards.
    unsafe fn free_chain(self, first: NonNull<Sg>, count: usize, end_mark: Option<usize>) {
        let mut chunk = first.as_ptr();
        for i in 0..count {
            let next = if i + 1 < count {
                // SAFETY: a linked chunk's last slot holds the link (caller).
                let link = unsafe { &mut (*chunk.add(self.slots() - 1)).page_link };
                core::mem::take(link) & !(SG_CHAIN | SG_END)
            } else {
                if let Some(slot) = end_mark {
                    // SAFETY: the marked slot of the last chunk (caller).
                    unsafe { (*chunk.add(slot)).page_link = 0 };
                }
                0
            };
            // SAFETY: of this size, clean now, not used again (caller).
            unsafe { self.class().free(chunk) };
            // CAST: a link holds the next chunk's address.
            chunk = next as *mut Sg;
        }
    }
}

// An entry is four words: `page_link`; `offset` and `length`;
// `dma_address`; `dma_length` and `dma_flags` (or padding).
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Sg>() == 32 && cfg!(target_endian = "little"));
    assert!(offset_of!(Sg, page_link) == 0 && offset_of!(Sg, offset) == 8);
    assert!(offset_of!(Sg, length) == 12 && offset_of!(Sg, dma_address) == 16);
    assert!(offset_of!(Sg, dma_length) == 24);
};

/// Writes the length, DMA address and DMA length of `seg` into `slot`: a
/// whole entry if the slot is clean (no page and offset 0 are there
/// already); on the stack, the fields [`copy_staged`] reads.
///
/// # Safety
///
/// `slot` is valid for writing an entry.
#[inline(always)]
unsafe fn write_entry(slot: *mut Sg, seg: Segment) {
    // A segment's length fits u32 (`segment_limit`): the high half is 0.
    let len = seg.len;
    let words = slot.cast::<u64>();
    // SAFETY: an entry is four aligned words (checked above), `length` the
    // high half of the second; valid (caller).
    unsafe {
        // CAST: fits u32, see above.
        words.add(1).cast::<u32>().add(1).write(len as u32);
        words.add(2).write(seg.addr);
        words.add(3).write(len);
    }
}

/// Writes the `count` entries staged at `from` (by [`write_entry`]: only
/// their length and DMA fields are set) into the clean slots at `to`: field
/// by field, fewer instructions than a `memcpy` of up to 512 bytes.
///
/// # Safety
///
/// `count` slots at `from` written by [`write_entry`]; `count` clean slots
/// at `to`, valid for writes and not overlapping them.
unsafe fn copy_staged(from: *const Sg, to: *mut Sg, count: usize) {
    for i in 0..count {
        let staged = from.wrapping_add(i);
        // SAFETY: fields `write_entry` wrote (caller), read by value.
        let seg = unsafe {
            Segment {
                addr: ptr::addr_of!((*staged).dma_address).read(),
                len: u64::from(ptr::addr_of!((*staged).length).read()),
            }
        };
        // SAFETY: a clean slot (caller).
        unsafe { write_entry(to.add(i), seg) };
    }
}

/// Where the entries go: first a buffer on the caller's stack, then, once
/// it is full, chained chunks (the stack's entries copied into the first).
/// The write position is kept by the caller ([`Slots`]), in registers.
///
/// # Invariants
///
/// `stack` is the caller's buffer of [`SG_EXACT_MAX`] slots (every access
/// to it goes through this one pointer), of which the first `staged` are
/// used; those before the write position hold what [`write_entry`] wrote
/// (never whole entries: [`copy_staged`] moves them). `chunks` chunks of `size` from
/// `first` on are linked, except the last; `last_link` is the last one's
/// link slot. With `chunks == 0` nothing is allocated.
struct SgChain<'a> {
    stack: *mut Sg,
    _stack: PhantomData<&'a mut [MaybeUninit<Sg>; SG_EXACT_MAX]>,
    staged: usize,
    size: ChunkSize,
    first: NonNull<Sg>,
    chunks: usize,
    last_link: *mut Sg,
}

/// The free slots `cur..end` of the buffer being filled (clean, but for
/// the stack buffer); the slots of the chain before `cur` are written.
#[derive(Clone, Copy)]
struct Slots {
    cur: *mut Sg,
    end: *mut Sg,
}

impl<'a> SgChain<'a> {
    /// A chain for at most `max_entries` entries.
    fn new(stack: &'a mut [MaybeUninit<Sg>; SG_EXACT_MAX], max_entries: usize) -> (Self, Slots) {
        let cur = stack.as_mut_ptr().cast::<Sg>();
        let staged = max_entries.min(SG_EXACT_MAX);
        // SAFETY: at most one past the end of the buffer.
        let end = unsafe { cur.add(staged) };
        // INVARIANT: `stack` is the buffer, nothing written yet.
        let chain = Self {
            stack: cur,
            _stack: PhantomData,
            staged,
            size: ChunkSize::for_entries(max_entries),
            first: NonNull::dangling(),
            chunks: 0,
            last_link: ptr::null_mut(),
        };
        // INVARIANT: nothing allocated.
        (chain, Slots { cur, end })
    }

    /// Moves to a new chunk once `slots` is full: the stack's entries go to
    /// the first one; a full chunk links to the next in its last slot.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, reserve: &mut SgReserve) -> Result<Slots, SgError> {
        let chunk = self.size.take(reserve)?;
        let next = chunk.as_ptr();
        let cur = if self.chunks == 0 {
            // SAFETY: the used part of the stack buffer is full (written);
            // the chunk is clean and has more slots.
            unsafe { copy_staged(self.stack, next, self.staged) };
            self.first = chunk;
            // SAFETY: within the chunk (`staged` <= `SG_EXACT_MAX`).
            unsafe { next.add(self.staged) }
        } else {
            let mut link: Sg = pin_init::zeroed();
            // CAST: a chain link holds the next chunk's address.
            link.page_link = next as c_ulong | SG_CHAIN;
            // SAFETY: the full last chunk's link slot (invariant).
            unsafe { self.last_link.write(link) };
            next
        };
        // INVARIANT: linked above, or the first chunk.
        self.chunks += 1;
        // SAFETY: within the chunk.
        self.last_link = unsafe { next.add(self.size.slots() - 1) };
        Ok(Slots {
            cur,
            end: self.last_link,
        })
    }

    /// Marks the end of the entries written before `cur`; the table takes
    /// them from here on.
    fn finish(self, cur: *mut Sg, reserve: &mut SgReserve) -> Result<SgTable, SgError> {
        if self.chunks == 0 {
            // SAFETY: `cur` is in the stack buffer.
            let count = unsafe { cur.offset_from(self.stack) };
            // CAST: 0..=SG_EXACT_MAX.
            let count = count as usize;
            // SAFETY: the stack buffer's entries before `cur` are written.
            return unsafe { SgTable::exact(self.stack, count, reserve) };
        }
        // SAFETY: both point into the last chunk.
        let in_last = unsafe { cur.offset_from(self.last_link.sub(self.size.slots() - 1)) };
        let count = usize::try_from(in_last)
            .ok()
            .and_then(|n| n.checked_add((self.chunks - 1) * self.size.entries()));
        let nents = count
            .and_then(|n| u32::try_from(n).ok())
            // CAST: both constants fit u32.
            .filter(|n| *n > SG_EXACT_MAX as u32 && *n <= i32::MAX as u32)
            .ok_or(SgError::Failed(EINVAL))?;
        // SAFETY: more than `SG_EXACT_MAX` entries are written, the last
        // one before `cur`.
        unsafe { (*cur.sub(1)).page_link |= SG_END };
        let table = SgTable {
            sgl: self.first,
            nents,
            size: self.size,
        };
        core::mem::forget(self);
        // INVARIANT: `nents` entries in chained chunks, the last one marked.
        Ok(table)
    }
}

impl Drop for SgChain<'_> {
    fn drop(&mut self) {
        if self.chunks > 0 {
            // SAFETY: an unfinished chain (invariant, no end mark), abandoned here.
            unsafe { self.size.free_chain(self.first, self.chunks, None) };
        }
    }
}

/// A scatterlist of DMA addresses with no backing `struct page` (BAR memory).
///
/// # Invariants
///
/// `sgl` heads `nents` (> 0, at most `i32::MAX`) written entries, the last
/// marked `SG_END`, owned by this value: with at most [`SG_EXACT_MAX`]
/// entries one object of `SgClass::exact(nents)`, otherwise
/// chunks of `size`, each holding its entries and a link to the next,
/// except the last, which holds the rest. No other `page_link` bits and no
/// `offset` are set.
pub(crate) struct SgTable {
    sgl: NonNull<Sg>,
    nents: u32,
    size: ChunkSize,
}

// SAFETY: the entries are plain memory owned by this value.
unsafe impl Send for SgTable {}
// SAFETY: no interior mutability through `&SgTable`.
unsafe impl Sync for SgTable {}

impl SgTable {
    /// The table for `pages` (the DMA address of each 64 KiB page, at least
    /// one) with segments of at most `limit` bytes (`segment_limit`).
    ///
    /// Built under a pin's lock, which a free callback holding NVIDIA's API
    /// lock may wait for: allocates from `reserve`, else without reclaim
    /// (reclaim may enter the driver, `peermem_core::client::BuildError`),
    /// and answers [`SgError::NeedMemory`] when that is not enough; the
    /// caller then fills `reserve` without the lock ([`SgReserve::fill`])
    /// and builds again.
    pub(crate) fn new(pages: &[u64], limit: u32, reserve: &mut SgReserve) -> Result<Self, SgError> {
        let mut stack = [const { MaybeUninit::uninit() }; SG_EXACT_MAX];
        // A segment takes at least one page.
        let (mut chain, mut slots) = SgChain::new(&mut stack, pages.len());
        for_each_segment(pages, limit, |seg| -> Result<(), SgError> {
            if slots.cur == slots.end {
                slots = chain.grow(reserve)?;
            }
            // SAFETY: a free slot (`Slots`, and the check above).
            unsafe {
                write_entry(slots.cur, seg);
                slots.cur = slots.cur.add(1);
            }
            Ok(())
        })?;
        chain.finish(slots.cur, reserve)
    }

    /// A table of the first `count` (1 to [`SG_EXACT_MAX`]) entries at
    /// `staged`, copied into one object of their class.
    ///
    /// # Safety
    ///
    /// The first `count` slots at `staged` were written by [`write_entry`].
    unsafe fn exact(
        staged: *const Sg,
        count: usize,
        reserve: &mut SgReserve,
    ) -> Result<Self, SgError> {
        if count == 0 || count > SG_EXACT_MAX {
            return Err(SgError::Failed(EINVAL));
        }
        let sgl = SgClass::exact(count).take(reserve)?;
        // SAFETY: `count` staged entries (caller) into a clean object of at
        // least `count` slots; its last entry is within it.
        unsafe {
            copy_staged(staged, sgl.as_ptr(), count);
            (*sgl.as_ptr().add(count - 1)).page_link = SG_END;
        }
        // INVARIANT: one object of the exact class, all written, the last marked.
        Ok(Self {
            sgl,
            // CAST: at most `SG_EXACT_MAX`.
            nents: count as u32,
            // Not used: a short table has no chunks.
            size: ChunkSize::Small,
        })
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> u32 {
        self.nents
    }

    /// The `sg_table` header the core reads.
    pub(crate) fn header(&self) -> bindings::sg_table {
        bindings::sg_table {
            sgl: self.sgl.as_ptr(),
            nents: self.nents,
            orig_nents: self.nents,
        }
    }
}

impl Drop for SgTable {
    fn drop(&mut self) {
        // CAST: u32 fits usize.
        let nents = self.nents as usize;
        if nents <= SG_EXACT_MAX {
            let sgl = self.sgl.as_ptr();
            // SAFETY: one object of `SgClass::exact(nents)` whose last entry
            // holds the end mark, the only `page_link` bit set (invariant);
            // freed once, clean again.
            unsafe {
                (*sgl.add(nents - 1)).page_link = 0;
                SgClass::exact(nents).free(sgl);
            }
        } else {
            let entries = self.size.entries();
            let chunks = nents.div_ceil(entries);
            let end_mark = nents - 1 - (chunks - 1) * entries;
            // SAFETY: chained chunks of `size`, the last entry marked
            // (invariant), freed once.
            unsafe { self.size.free_chain(self.sgl, chunks, Some(end_mark)) };
        }
    }
}
