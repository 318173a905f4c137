// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Safe owning types over NVIDIA's `nvidia_p2p_*` API. All `unsafe` for that
//! API lives here.
//!
//! A [`GpuPin`] is one pinned GPU range: its page table, its DMA mapping and
//! the client's state `T`, all behind one lock.
//!
//! The driver's rules (NVIDIA's open kernel modules, `kernel-open/nvidia/
//! nv-p2p.c` and RM's `rm_p2p_*`; ../shared/research/driver-locking.md):
//! - `get_pages`, `get_pages_persistent`, `put_pages`, `put_pages_persistent`
//!   and the middle of `dma_map_pages` take one driver-wide API lock.
//! - A revocable pin's free callback runs with that lock held. When it
//!   returns, the driver frees the page table and every DMA mapping of it.
//! - `dma_unmap_pages` takes only the table's own lock, so it may run while
//!   a callback does; after the callback returned it reads freed memory.
//! - `dma_map_pages` reads the table before taking the API lock and writes
//!   into it after: a map racing a callback is unsafe inside the driver
//!   itself, a window no client can close.
//! - `put_pages` after the callback returns 0 (older drivers: an error).
//!
//! So the callback marks the pin revoked under the pin's lock and waits for
//! nothing that needs the API lock: not for a map, pin or unpin in flight,
//! nor for a lock that a thread inside one holds (the RDMA core's
//! `mapping_lock`: the client forwards an invalidation only for a mapped
//! registration, whose map has returned). It does wait for an unmap of its
//! own table in flight (`unmapping`), as the driver frees the table when the
//! callback returns. Every read of driver memory and every unmap starts
//! under the pin's lock while the pin is not revoked, so none comes after
//! the callback. A map that was in flight when the callback ran finds the
//! pin revoked: its mapping is the driver's, never used or unmapped.
//!
//! Lock order: `GpuPin::inner` is a leaf. It is never held across a call
//! into the driver or the RDMA core.

use core::ptr::{self, NonNull};
use kernel::ffi::c_void;

use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::CondVar;
use kernel::sync::{Arc, ArcBorrow, Mutex};
use kernel::{new_condvar, new_mutex, try_pin_init};

use crate::abi;
use crate::peermem_core::range::GpuRange;
use crate::peermem_core::version::{self, AbiError, PageTableAbi};

/// The page-table layout this build reads (from the `nv-p2p.h` it was built with).
#[cfg(nvpm_page_table_v2)]
pub(crate) const HEADER_PAGE_TABLE_ABI: PageTableAbi = PageTableAbi::V2;
/// The page-table layout this build reads (from the `nv-p2p.h` it was built with).
#[cfg(not(nvpm_page_table_v2))]
pub(crate) const HEADER_PAGE_TABLE_ABI: PageTableAbi = PageTableAbi::V1;

/// How the pages are pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PinKind {
    /// `nvidia_p2p_get_pages_persistent`: no callback, survives `cudaFree`.
    Persistent,
    /// `nvidia_p2p_get_pages`: the driver may revoke it through the free callback.
    Revocable,
}

/// Why pinning or mapping failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum P2pError {
    /// The driver refused with this errno.
    Driver(Error),
    /// The driver returned something this module cannot use.
    Abi(AbiError),
    /// A free callback revoked the pages meanwhile.
    Revoked,
    /// The pin has no pages (never pinned, or being torn down) or is already mapped.
    State,
}

impl kernel::fmt::Display for P2pError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            P2pError::Driver(e) => write!(f, "the NVIDIA driver returned {e:?}"),
            P2pError::Abi(e) => write!(f, "the NVIDIA driver returned unusable data: {e}"),
            P2pError::Revoked => f.write_str("the GPU memory was freed meanwhile"),
            P2pError::State => f.write_str("not pinned, or already mapped"),
        }
    }
}

// The pure crate's types format through `core::fmt`; the kernel's printing
// macros take `kernel::fmt::Display`.
impl kernel::fmt::Display for PageTableAbi {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

/// What a successful pin reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PinInfo {
    /// The page-table layout the driver used.
    pub(crate) abi: PageTableAbi,
    /// `NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE` (coherent platforms).
    pub(crate) cpu_cacheable: bool,
}

/// The client side of a pin: its state, and what it does on revocation.
pub(crate) trait PinOwner: Send + Sized + Unpin + 'static {
    /// What [`PinOwner::revoking`] hands to [`PinOwner::revoked`].
    type Followup;

    /// `len` bytes were pinned and their page table checked; called with
    /// the pin's lock held, before the pin can be revoked.
    fn pinned(&mut self, len: u64);

    /// The driver is revoking the pages; called with the pin's lock held.
    fn revoking(&mut self) -> Self::Followup;

    /// Called without the lock right after [`PinOwner::revoking`], still
    /// inside the driver's callback: tell whoever uses the pages.
    fn revoked(pin: ArcBorrow<'_, GpuPin<Self>>, followup: Self::Followup);

    /// The callback is about to return; called with the lock held.
    fn revoke_end(&mut self);

    /// A teardown finished; called with the lock held.
    fn teardown_end(&mut self);
}

/// A pinned page table.
///
/// # Invariants
///
/// `ptr` came from a successful `nvidia_p2p_get_pages*` call that has been
/// neither put nor revoked while this value sits in a live [`GpuPin`].
struct PageTable(NonNull<abi::nvidia_p2p_page_table>);

/// A DMA mapping of a [`PageTable`] for one PCI device.
///
/// # Invariants
///
/// `ptr` came from a successful `nvidia_p2p_dma_map_pages` for `peer` and has
/// been neither unmapped nor revoked while this value sits in a live [`GpuPin`].
struct DmaMapping {
    ptr: NonNull<abi::nvidia_p2p_dma_mapping>,
    peer: NonNull<bindings::pci_dev>,
}

// SAFETY: the handles are plain driver pointers, usable from any thread.
unsafe impl Send for PageTable {}
// SAFETY: as above; the `pci_dev` outlives the mapping (the core keeps its device).
unsafe impl Send for DmaMapping {}

struct Inner<T> {
    owner: T,
    pages: Option<PageTable>,
    mapping: Option<DmaMapping>,
    /// The driver revoked the pages (only revocable pins).
    revoked: bool,
    /// A teardown is calling the driver to unpin; a callback that starts now
    /// leaves its reference to the teardown (put_pages waits for it).
    putting: bool,
    /// `map` is inside `dma_map_pages` (a second map is refused).
    mapping_in_flight: bool,
    /// A `dma_unmap_pages` of this table is in flight; a callback waits for
    /// it (`unmap_done`): the driver frees the table when the callback returns.
    unmapping: bool,
    /// A callback waits on `unmap_done`: the unmap signals it.
    unmap_waited: bool,
    /// The teardown waits for the core's `release` (`park_teardown`); the
    /// handles stay here until then.
    parked: bool,
}

/// One pinned range of GPU memory; see the module documentation.
#[pin_data]
pub(crate) struct GpuPin<T: PinOwner> {
    range: GpuRange,
    kind: PinKind,
    #[pin]
    inner: Mutex<Inner<T>>,
    /// Signalled when `unmapping` drops.
    #[pin]
    unmap_done: CondVar,
}

/// The pin's lock, held.
pub(crate) struct PinGuard<'a, T: PinOwner> {
    guard: kernel::sync::lock::Guard<'a, Inner<T>, kernel::sync::lock::mutex::MutexBackend>,
}

impl<T: PinOwner> GpuPin<T> {
    /// A pin for `range`, not pinned yet.
    pub(crate) fn new(range: GpuRange, kind: PinKind, owner: T) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                range,
                kind,
                inner <- new_mutex!(Inner {
                    owner,
                    pages: None,
                    mapping: None,
                    revoked: false,
                    putting: false,
                    mapping_in_flight: false,
                    unmapping: false,
                    unmap_waited: false,
                    parked: false,
                }),
                unmap_done <- new_condvar!("GpuPin::unmap_done"),
            }),
            GFP_KERNEL,
        )
    }

    /// The pinned range.
    pub(crate) fn range(&self) -> GpuRange {
        self.range
    }

    /// How the range is pinned.
    pub(crate) fn kind(&self) -> PinKind {
        self.kind
    }

    /// Takes the pin's lock.
    pub(crate) fn lock(&self) -> PinGuard<'_, T> {
        PinGuard {
            guard: self.inner.lock(),
        }
    }

    /// Pins the range in the driver and validates the page table.
    ///
    /// Must not be called from atomic context. Called once, before the pin is
    /// shared; a revocable pin may be revoked from here on.
    pub(crate) fn pin(self: &Arc<Self>) -> Result<PinInfo, P2pError> {
        let mut table: *mut abi::nvidia_p2p_page_table = ptr::null_mut();
        let (ret, held) = match self.kind {
            PinKind::Persistent => {
                // SAFETY: `table` is a valid out-pointer; the range is 64 KiB-aligned.
                let ret = unsafe {
                    abi::nvidia_p2p_get_pages_persistent(
                        self.range.start(),
                        self.range.len(),
                        &mut table,
                        0,
                    )
                };
                (ret, None)
            }
            PinKind::Revocable => {
                // The driver holds this reference until put_pages returns or
                // the callback ends; see `free_callback` and `Teardown::run`.
                let data = Arc::into_raw(self.clone()).cast_mut().cast::<c_void>();
                // SAFETY: as above; `free_callback::<T>` matches `data`'s type.
                let ret = unsafe {
                    abi::nvidia_p2p_get_pages(
                        0,
                        0,
                        self.range.start(),
                        self.range.len(),
                        &mut table,
                        Some(free_callback::<T>),
                        data,
                    )
                };
                let inner = self.inner.lock();
                if ret != 0 {
                    drop(inner);
                    // SAFETY: the driver refused, so it kept no reference and
                    // will never call back: `data` is ours again.
                    drop(unsafe { Arc::from_raw(data.cast::<Self>()) });
                    (ret, None)
                } else {
                    (ret, Some(inner))
                }
            }
        };
        if ret != 0 {
            return Err(P2pError::Driver(Error::from_errno(ret)));
        }
        let Some(table) = NonNull::new(table) else {
            return Err(P2pError::Driver(EIO));
        };
        let mut inner = held.unwrap_or_else(|| self.inner.lock());
        if inner.revoked {
            // Revoked before we got here: the callback owns the driver's
            // reference and the driver frees the table.
            return Err(P2pError::Revoked);
        }
        // SAFETY: the driver just returned `table`; it is not revoked and the
        // callback cannot complete while we hold the lock.
        let checked = unsafe { check_page_table(table, self.range.len()) };
        // INVARIANT: `table` came from a successful get_pages for this range.
        inner.pages = Some(PageTable(table));
        match checked {
            Ok(info) => {
                inner.owner.pinned(self.range.len());
                Ok(info)
            }
            Err(e) => {
                let teardown = take_teardown(&mut inner, self.kind);
                drop(inner);
                teardown.run(self);
                Err(P2pError::Abi(e))
            }
        }
    }

    /// Maps the pinned pages for `peer` and validates the mapping. `begin`
    /// runs first, under the lock: its error is returned, nothing mapped.
    /// The driver is called without the lock; returns the lock, taken again,
    /// with the outcome.
    ///
    /// Must not be called from atomic context.
    pub(crate) fn map(
        &self,
        peer: &PciDevice,
        begin: impl FnOnce(&mut T) -> Result,
    ) -> Result<(PinGuard<'_, T>, Result<(), P2pError>)> {
        let table = {
            let mut inner = self.inner.lock();
            begin(&mut inner.owner)?;
            let ready = match (&inner.pages, &inner.mapping) {
                _ if inner.revoked => Err(P2pError::Revoked),
                (Some(pages), None) if !inner.mapping_in_flight => Ok(pages.0),
                _ => Err(P2pError::State),
            };
            match ready {
                Ok(table) => {
                    inner.mapping_in_flight = true;
                    table
                }
                Err(e) => return Ok((PinGuard { guard: inner }, Err(e))),
            }
        };
        let mut mapping: *mut abi::nvidia_p2p_dma_mapping = ptr::null_mut();
        // SAFETY: `table` was live (not revoked, lock held) when taken out
        // above. A free callback may run and return before the driver takes
        // its API lock; that race is inside the driver and no client can
        // close it (the callback must not wait for this call, which waits
        // for the lock the callback runs under). `peer` is a live PCI device,
        // `mapping` an out-pointer.
        let ret =
            unsafe { abi::nvidia_p2p_dma_map_pages(peer.0.as_ptr(), table.as_ptr(), &mut mapping) };
        let mut inner = self.inner.lock();
        inner.mapping_in_flight = false;
        let outcome = match (ret, NonNull::new(mapping)) {
            (0, None) => Err(P2pError::Driver(EIO)),
            // Revoked meanwhile: the mapping came from a freed table. It is
            // the driver's: never read, used or unmapped.
            (0, Some(_)) if inner.revoked => Err(P2pError::Revoked),
            (0, Some(mapping)) => {
                // SAFETY: just returned by the driver, not revoked, lock held.
                let checked = unsafe { check_mapping(mapping, self.range.len()) };
                // INVARIANT: a successful dma_map_pages for `peer`.
                let mapping = DmaMapping {
                    ptr: mapping,
                    peer: peer.0,
                };
                match checked {
                    Ok(()) => {
                        inner.mapping = Some(mapping);
                        Ok(())
                    }
                    Err(e) => {
                        inner.unmapping = true;
                        drop(inner);
                        unmap(table, mapping);
                        inner = self.inner.lock();
                        self.unmap_ended(&mut inner);
                        Err(P2pError::Abi(e))
                    }
                }
            }
            (ret, _) => Err(P2pError::Driver(Error::from_errno(ret))),
        };
        Ok((PinGuard { guard: inner }, outcome))
    }

    /// An unmap started under the lock (`unmapping`) is over: a callback
    /// waiting for it may return.
    fn unmap_ended(&self, inner: &mut Inner<T>) {
        inner.unmapping = false;
        if core::mem::take(&mut inner.unmap_waited) {
            self.unmap_done.notify_all();
        }
    }

    /// Unmaps and unpins now.
    pub(crate) fn run_teardown(self: &Arc<Self>, teardown: Teardown) {
        teardown.run(self);
        self.inner.lock().owner.teardown_end();
    }
}

impl<T: PinOwner> PinGuard<'_, T> {
    /// The client's state.
    pub(crate) fn owner(&mut self) -> &mut T {
        &mut self.guard.owner
    }

    /// The DMA address of each 64 KiB page, if mapped and not revoked.
    pub(crate) fn dma_addresses(&self) -> Option<&[u64]> {
        if self.guard.revoked {
            return None;
        }
        let mapping = self.guard.mapping.as_ref()?;
        // SAFETY: the mapping is live (not revoked, lock held); `check_mapping`
        // verified `entries` against the pinned length.
        unsafe {
            let m = mapping.ptr.as_ptr();
            Some(core::slice::from_raw_parts(
                (*m).dma_addresses,
                (*m).entries as usize,
            ))
        }
    }

    /// Takes the handles out for a teardown; a callback from now on owns nothing.
    pub(crate) fn take_teardown(&mut self, kind: PinKind) -> Teardown {
        take_teardown(&mut self.guard, kind)
    }

    /// Leaves the teardown to [`PinGuard::take_parked_teardown`]. The pages
    /// stay pinned until then; a free callback meanwhile takes them back, as
    /// during any teardown.
    pub(crate) fn park_teardown(&mut self) {
        self.guard.parked = true;
    }

    /// The teardown parked by [`PinGuard::park_teardown`], if any, to be
    /// run with [`GpuPin::run_teardown`] once the lock is dropped.
    pub(crate) fn take_parked_teardown(&mut self, kind: PinKind) -> Option<Teardown> {
        if !core::mem::take(&mut self.guard.parked) {
            return None;
        }
        Some(take_teardown(&mut self.guard, kind))
    }

    /// Takes only the mapping out, to undo a `map` the client cannot use;
    /// a callback from now on waits until [`Unmap::run`] has unmapped.
    pub(crate) fn take_mapping(&mut self) -> Option<Unmap> {
        if self.guard.revoked {
            return None;
        }
        let table = self.guard.pages.as_ref()?.0;
        let mapping = self.guard.mapping.take()?;
        self.guard.unmapping = true;
        Some(Unmap { table, mapping })
    }
}

fn take_teardown<T>(inner: &mut Inner<T>, kind: PinKind) -> Teardown {
    Teardown {
        pages: inner.pages.take(),
        mapping: inner.mapping.take(),
        kind,
    }
}

/// Handles taken out of a pin to be unmapped and unpinned without its lock.
pub(crate) struct Teardown {
    pages: Option<PageTable>,
    mapping: Option<DmaMapping>,
    kind: PinKind,
}

impl Teardown {
    /// Unmaps, unpins and, for revocable pins, takes back the callback's reference.
    fn run<T: PinOwner>(self, pin: &Arc<GpuPin<T>>) {
        let Some(pages) = self.pages else { return };
        {
            let mut inner = pin.inner.lock();
            if inner.revoked {
                // A free callback came after the pages were taken out: the
                // driver frees them itself, and the callback owns its reference.
                return;
            }
            inner.putting = true;
            // A callback from now on waits for the unmap to end.
            inner.unmapping = self.mapping.is_some();
        }
        if let Some(mapping) = self.mapping {
            unmap(pages.0, mapping);
            pin.unmap_ended(&mut pin.inner.lock());
        }
        let va = pin.range.start();
        let ret = match self.kind {
            // SAFETY: `pages` is a live persistent pin of `va`.
            PinKind::Persistent => unsafe {
                abi::nvidia_p2p_put_pages_persistent(va, pages.0.as_ptr(), 0)
            },
            PinKind::Revocable => {
                // SAFETY: `pages` is a live revocable pin of `va`; a racing
                // callback completes before this returns.
                let ret = unsafe { abi::nvidia_p2p_put_pages(0, 0, va, pages.0.as_ptr()) };
                // The reference `pin()` handed the driver is ours again if
                // the driver gave it back, or if its callback ran during the
                // unpin (`putting`: it left the reference to us, and older
                // drivers then fail the put). Otherwise the driver kept the
                // pin and may still call back: the reference stays its.
                let ours = ret == 0 || {
                    let mut inner = pin.inner.lock();
                    inner.putting = false;
                    inner.revoked
                };
                if ours {
                    // SAFETY: see above: the callback will not run again, and
                    // put_pages returned after one that ran had ended.
                    drop(unsafe { Arc::from_raw(Arc::as_ptr(pin)) });
                }
                ret
            }
        };
        if ret != 0 {
            pr_err!("nvidia_p2p_put_pages of {:#x} failed: {}\n", va, ret);
        }
    }
}

/// A mapping taken out of a pin, to be undone without its lock.
pub(crate) struct Unmap {
    table: NonNull<abi::nvidia_p2p_page_table>,
    mapping: DmaMapping,
}

// SAFETY: plain driver handles.
unsafe impl Send for Unmap {}

impl Unmap {
    /// Unmaps in the driver, then lets a waiting callback return.
    pub(crate) fn run<T: PinOwner>(self, pin: &GpuPin<T>) {
        unmap(self.table, self.mapping);
        pin.unmap_ended(&mut pin.inner.lock());
    }
}

/// Unmaps; the caller set `unmapping` while the pin was not revoked, so a
/// free callback waits and the table is live until this returns.
fn unmap(table: NonNull<abi::nvidia_p2p_page_table>, mapping: DmaMapping) {
    // SAFETY: `mapping` was made from `table` for `peer` and is still listed
    // in it: the table is freed only after a callback, which waits for
    // `unmapping` to drop; dma_unmap_pages needs no lock the callback holds.
    let ret = unsafe {
        abi::nvidia_p2p_dma_unmap_pages(mapping.peer.as_ptr(), table.as_ptr(), mapping.ptr.as_ptr())
    };
    if ret != 0 {
        pr_err!("nvidia_p2p_dma_unmap_pages failed: {}\n", ret);
    }
}

/// # Safety
///
/// `table` must be a live page table the driver returned for `len` bytes.
unsafe fn check_page_table(
    table: NonNull<abi::nvidia_p2p_page_table>,
    len: u64,
) -> Result<PinInfo, AbiError> {
    let t = table.as_ptr();
    // SAFETY: live per the contract; version 1.x and 2.x share these fields.
    let (ver, page_size, entries) = unsafe { ((*t).version, (*t).page_size, (*t).entries) };
    let abi = version::page_table_abi(ver)?;
    version::check_page_table(page_size, entries, len)?;
    let flags = match abi {
        PageTableAbi::V1 => 0,
        // SAFETY: a 2.x table has the flags word (the driver allocated it).
        PageTableAbi::V2 => unsafe { read_flags(t) },
    };
    Ok(PinInfo {
        abi,
        cpu_cacheable: flags & version::FLAG_CPU_CACHEABLE != 0,
    })
}

/// # Safety
///
/// `t` must be a live 2.x page table.
#[cfg(nvpm_page_table_v2)]
unsafe fn read_flags(t: *mut abi::nvidia_p2p_page_table) -> u32 {
    // SAFETY: per the contract.
    unsafe { (*t).flags }
}

/// # Safety
///
/// Nothing to uphold: built against a 1.x header, flags are unknown.
#[cfg(not(nvpm_page_table_v2))]
unsafe fn read_flags(_t: *mut abi::nvidia_p2p_page_table) -> u32 {
    0
}

/// # Safety
///
/// `m` must be a live DMA mapping the driver returned.
unsafe fn check_mapping(m: NonNull<abi::nvidia_p2p_dma_mapping>, len: u64) -> Result<(), AbiError> {
    let m = m.as_ptr();
    // SAFETY: live per the contract.
    let (ver, page_size, entries) = unsafe { ((*m).version, (*m).page_size_type, (*m).entries) };
    version::check_dma_mapping(ver, page_size, entries, len)
}

/// The driver's free callback for revocable pins of `GpuPin<T>`.
///
/// # Safety
///
/// `data` is the reference `GpuPin::pin` handed to `nvidia_p2p_get_pages`.
unsafe extern "C" fn free_callback<T: PinOwner>(data: *mut c_void) {
    let raw = data.cast::<GpuPin<T>>().cast_const();
    // SAFETY: the driver's reference keeps the pin alive for the whole callback:
    // either we own it (dropped below) or a teardown waits in put_pages.
    let pin = unsafe { ArcBorrow::from_raw(raw) };
    let (followup, owns_reference) = {
        let mut inner = pin.inner.lock();
        inner.revoked = true;
        // Unless a teardown is inside put_pages (which waits for us and then
        // takes the reference back), this callback owns the reference.
        let owns = !inner.putting;
        // The driver frees both after we return.
        inner.mapping = None;
        inner.pages = None;
        (inner.owner.revoking(), owns)
    };
    T::revoked(pin, followup);
    let mut inner = pin.inner.lock();
    // The driver frees the table when we return: let an unmap of it end. It
    // needs no API lock, so this wait ends; a map or unpin in flight waits
    // for that lock, held around this callback, so it is never waited for.
    while inner.unmapping {
        inner.unmap_waited = true;
        pin.unmap_done.wait(&mut inner);
    }
    inner.owner.revoke_end();
    drop(inner);
    if owns_reference {
        // SAFETY: the driver's reference, handed over to this callback.
        drop(unsafe { Arc::from_raw(raw) });
    }
}

/// A PCI device the RDMA core maps for.
///
/// # Invariants
///
/// Points at a live `pci_dev` (the core's DMA device) for the borrow's duration.
pub(crate) struct PciDevice(NonNull<bindings::pci_dev>);

impl PciDevice {
    /// The PCI device behind `dev`, or `None` if it is not a PCI device.
    ///
    /// # Safety
    ///
    /// `dev` must be a live `struct device` for as long as the result is used.
    pub(crate) unsafe fn from_device(dev: *mut bindings::device) -> Option<Self> {
        // SAFETY: per the contract (the shim checks `dev_is_pci` first).
        let pci = unsafe { abi::nvpm_to_pci_dev(dev) };
        NonNull::new(pci).map(Self)
    }
}
