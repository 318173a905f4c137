// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Safe abstraction over MOFED's peer-memory client API. All `unsafe` for
//! that API lives here.
//!
//! A client implements [`PeerClient`]; generic `extern "C"` trampolines turn
//! the core's calls into calls of that trait, with the per-registration
//! context carried across as an `Arc` (one reference owned by the core from
//! `acquire` to `release`). A [`Registration`] unregisters on drop.

use core::cell::UnsafeCell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::bindings;
use kernel::ffi::{c_char, c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use crate::abi;
use crate::nvidia_p2p::PciDevice;
use crate::peermem_core::client::Invalidator;
use crate::scatterlist::SgTable;

/// `IB_PEER_MEMORY_VER_MAX - 2`: byte 14 is the NUL, byte 15 the new-style flag.
pub(crate) const VERSION_MAX_LEN: usize = 14;

/// The callbacks of one peer-memory client.
///
/// The core may call them concurrently for different contexts, and for one
/// context `dma_unmap`, `put_pages` and `release` may race with (or run
/// inside) an invalidation.
pub(crate) trait PeerClient: 'static {
    /// Per-registration state.
    type Context: Send + Sync + 'static;

    /// Claims `size` bytes at `addr` (`Some`) or declines them (`None`).
    fn acquire(addr: u64, size: u64) -> Option<Arc<Self::Context>>;
    /// Pins the pages; `core_context` identifies the registration to the core.
    fn get_pages(ctx: ArcBorrow<'_, Self::Context>, core_context: u64) -> Result;
    /// Maps the pages for `dev` and publishes the scatterlist through `out`.
    fn dma_map(ctx: ArcBorrow<'_, Self::Context>, dev: &DmaDevice, out: &mut SgOut<'_>) -> Result;
    /// The NIC stopped using the mapping.
    fn dma_unmap(ctx: ArcBorrow<'_, Self::Context>) -> Result;
    /// The core no longer needs the pages.
    fn put_pages(ctx: ArcBorrow<'_, Self::Context>);
    /// The page size of the scatterlist.
    fn page_size(ctx: ArcBorrow<'_, Self::Context>) -> u64;
    /// The core drops its reference; it makes no further call for `ctx`.
    fn release(ctx: Arc<Self::Context>);
}

/// Where the core wants `dma_map`'s result.
pub(crate) struct SgOut<'a> {
    sg_head: &'a mut bindings::sg_table,
    nmap: &'a mut c_int,
}

impl SgOut<'_> {
    /// Hands `table`'s entries to the core. `table` must outlive the core's use,
    /// i.e. be kept until `release`.
    pub(crate) fn publish(&mut self, table: &SgTable) {
        *self.sg_head = table.header();
        // CAST: a table has at most `i32::MAX` entries.
        *self.nmap = table.len() as c_int;
    }
}

/// The DMA device the core maps for.
///
/// # Invariants
///
/// `raw` is a live `struct device` for the duration of the `dma_map` call.
pub(crate) struct DmaDevice {
    raw: NonNull<bindings::device>,
}

impl DmaDevice {
    /// The PCI function behind the device, if it is one.
    pub(crate) fn pci(&self) -> Option<PciDevice> {
        // SAFETY: live for the call (type invariant); the core keeps the IB
        // device, and so its DMA device, until every registration is gone.
        unsafe { PciDevice::from_device(self.raw.as_ptr()) }
    }

    /// The device's maximum DMA segment size.
    pub(crate) fn max_segment_size(&self) -> u64 {
        // SAFETY: live device (type invariant).
        u64::from(unsafe { abi::nvpm_dma_max_seg_size(self.raw.as_ptr()) })
    }
}

/// The core's invalidation entry point for one registered client.
///
/// The core writes its function during registration, before it lists the
/// client (`peer_mem.c` `ib_register_peer_memory_client`: the
/// `*invalidate_callback` store precedes `list_add_tail` under
/// `peer_memory_mutex`); the handle is stored when registration returns,
/// after the core may already have called `acquire` (under that mutex):
/// until then the slot is not [`Invalidator::ready`] and the revocable
/// client declines every range.
pub(crate) struct InvalidatorSlot {
    func: UnsafeCell<abi::invalidate_peer_memory>,
    handle: AtomicPtr<c_void>,
}

// SAFETY: `func` is written once, by the core inside `register`, before the
// handle is stored with release ordering; it is read only by `call`, with
// a handle from an acquire load of a non-null handle ([`Published`]).
unsafe impl Sync for InvalidatorSlot {}

impl InvalidatorSlot {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            func: UnsafeCell::new(None),
            handle: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

/// A handle loaded from an [`InvalidatorSlot`], published.
///
/// # Invariants
///
/// Loaded non-null with acquire ordering (only `InvalidatorSlot::handle`
/// makes one): the core's write of the slot's function happened before.
#[derive(Clone, Copy)]
pub(crate) struct Published(NonNull<c_void>);

impl Invalidator for InvalidatorSlot {
    type Handle = Published;

    fn handle(&self) -> Option<Published> {
        // INVARIANT: loaded with acquire ordering, non-null.
        NonNull::new(self.handle.load(Ordering::Acquire)).map(Published)
    }

    fn call(&self, handle: Published, core_context: u64) -> bool {
        // SAFETY: see the `Sync` impl: `handle` is published (type
        // invariant), so the core's write of `func` happened before.
        let func = unsafe { *self.func.get() };
        match func {
            Some(f) => {
                // SAFETY: the core's function with its own handle; the core
                // ignores contexts it no longer knows.
                unsafe { f(handle.0.as_ptr(), core_context) };
                true
            }
            None => false,
        }
    }
}

/// How a client takes part in invalidation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Invalidation {
    /// No invalidation: usable for every kind of registration.
    None,
    /// Revocable pages, invalidated through `slot`. `unmaps`: register the
    /// `_ex` struct with `PEER_MEM_INVALIDATE_UNMAPS` (MOFED 5.4-3+/DOCA);
    /// otherwise leave `ex_size` and flags zero (MOFED 4.1 to 5.0 layouts).
    Revocable {
        /// Ask for `PEER_MEM_INVALIDATE_UNMAPS`.
        unmaps: bool,
    },
}

/// Checks that the running RDMA core has the peer-memory API (MLNX_OFED and
/// DOCA-OFED do, the kernel's own RDMA stack does not): `ENOPKG` ("Package
/// not installed") when it has not.
pub(crate) fn check_api() -> Result {
    // SAFETY: reads two weak symbol addresses.
    if unsafe { abi::nvpm_peer_api_present() } {
        Ok(())
    } else {
        Err(enopkg())
    }
}

/// `ENOPKG`, which the kernel crate does not name.
fn enopkg() -> Error {
    // CAST: a small errno constant.
    Error::from_errno(-(bindings::ENOPKG as i32))
}

/// The name of the module providing the peer-memory API (`ib_core`).
pub(crate) struct CoreName([u8; 64]);

impl CoreName {
    /// Looks the provider up.
    pub(crate) fn get() -> Self {
        let mut buf = [0u8; 64];
        // SAFETY: `buf` is writable for its length; the shim NUL-terminates.
        unsafe { abi::nvpm_peer_core_name(buf.as_mut_ptr().cast(), buf.len()) };
        Self(buf)
    }

    /// The name.
    pub(crate) fn as_c_str(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.0).unwrap_or(c"?")
    }
}

/// A client registered with the RDMA core; unregistered on drop.
///
/// # Invariants
///
/// `handle` was returned by `ib_register_peer_memory_client` for `*client`,
/// which stays allocated and unmoved until unregistration.
pub(crate) struct Registration {
    handle: NonNull<c_void>,
    client: KBox<abi::peer_memory_client_ex>,
    slot: Option<&'static InvalidatorSlot>,
}

// SAFETY: the handle is an opaque token usable from any thread.
unsafe impl Send for Registration {}
// SAFETY: as above; `&Registration` exposes nothing mutable.
unsafe impl Sync for Registration {}

impl Registration {
    /// Registers client `T` under `name` with `version` (at most 14 bytes).
    pub(crate) fn register<T: PeerClient>(
        name: &str,
        version: &str,
        invalidation: Invalidation,
        slot: &'static InvalidatorSlot,
    ) -> Result<Self> {
        let mut client = KBox::new(abi::peer_memory_client_ex::default(), GFP_KERNEL)?;
        let c = &mut client.client;
        copy_c_string(&mut c.name, name)?;
        if version.len() > VERSION_MAX_LEN {
            return Err(EINVAL);
        }
        copy_c_string(&mut c.version, version)?;
        c.acquire = Some(acquire::<T>);
        c.get_pages = Some(get_pages::<T>);
        c.dma_map = Some(dma_map::<T>);
        c.dma_unmap = Some(dma_unmap::<T>);
        c.put_pages = Some(put_pages::<T>);
        c.get_page_size = Some(get_page_size::<T>);
        c.release = Some(release::<T>);
        let out = match invalidation {
            Invalidation::None => ptr::null_mut(),
            Invalidation::Revocable { unmaps } => {
                // Byte 15 marks the new-style client; ex_size and flags are
                // only read when they are set (and must stay zero for 4.x).
                // CAST: a small array length from peer_mem.h.
                c.version[abi::IB_PEER_MEMORY_VER_MAX as usize - 1] = 1;
                if unmaps {
                    client.ex_size = core::mem::size_of::<abi::peer_memory_client_ex>();
                    client.flags = abi::PEER_MEM_INVALIDATE_UNMAPS;
                }
                slot.func.get()
            }
        };
        // SAFETY: `client` is fully initialised and outlives the registration
        // (type invariant); `out` is null or the slot's function cell.
        let handle = unsafe { abi::nvpm_peer_register(&client.client, out) };
        let handle = NonNull::new(handle).ok_or(EINVAL)?;
        let slot = (!out.is_null()).then_some(slot);
        if let Some(slot) = slot {
            slot.handle.store(handle.as_ptr(), Ordering::Release);
        }
        // INVARIANT: registered above.
        Ok(Self {
            handle,
            client,
            slot,
        })
    }

    /// The registered name.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `copy_c_string` NUL-terminated the array.
        unsafe { CStr::from_char_ptr(self.client.client.name.as_ptr()) }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant); blocks until the core released
        // every context of the client, after which none of our callbacks run.
        unsafe { abi::nvpm_peer_unregister(self.handle.as_ptr()) };
        if let Some(slot) = self.slot {
            slot.handle.store(ptr::null_mut(), Ordering::Release);
        }
    }
}

fn copy_c_string(dst: &mut [c_char], src: &str) -> Result {
    if src.len() >= dst.len() || src.bytes().any(|b| b == 0) {
        return Err(EINVAL);
    }
    for (d, s) in dst.iter_mut().zip(src.bytes()) {
        // CAST: a byte reinterpreted as a C char.
        *d = s as c_char;
    }
    dst[src.len()] = 0;
    Ok(())
}

/// A reference on this module, held by every live context so that `rmmod`
/// is refused while the core or the driver may still call us.
pub(crate) struct ModuleRef(());

/// This module's `struct module`: `module!` makes it a constant of
/// `ModuleMetadata` from 7.3 on (Kbuild's `nvpm_this_module_in_metadata`,
/// derived from the kernel tree), a static at the crate root before.
#[cfg(nvpm_this_module_in_metadata)]
fn this_module() -> *mut bindings::module {
    <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr()
}

/// This module's `struct module` (see the other `this_module`).
#[cfg(not(nvpm_this_module_in_metadata))]
fn this_module() -> *mut bindings::module {
    crate::THIS_MODULE.as_ptr()
}

impl ModuleRef {
    /// Takes a reference; `None` while the module is going away.
    pub(crate) fn get() -> Option<Self> {
        // SAFETY: `this_module()` is this module's pointer.
        unsafe { bindings::try_module_get(this_module()) }.then_some(Self(()))
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: taken in `get`.
        unsafe { bindings::module_put(this_module()) };
    }
}

fn errno(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the core; `client_context` is a valid out-pointer.
unsafe extern "C" fn acquire<T: PeerClient>(
    addr: c_ulong,
    size: usize,
    _peer_mem_private_data: *mut c_void,
    _peer_mem_name: *mut c_char,
    client_context: *mut *mut c_void,
) -> c_int {
    // CAST: `c_ulong` and `usize` are 64-bit here.
    match T::acquire(addr as u64, size as u64) {
        Some(ctx) => {
            // SAFETY: valid out-pointer; the core owns this reference until `release`.
            unsafe { *client_context = Arc::into_raw(ctx).cast_mut().cast() };
            1
        }
        None => 0,
    }
}

/// # Safety
///
/// `ctx` is a context from `acquire::<T>` that has not been released.
unsafe fn context<'a, T: PeerClient>(ctx: *mut c_void) -> ArcBorrow<'a, T::Context> {
    // SAFETY: the core's reference keeps it alive until `release`.
    unsafe { ArcBorrow::from_raw(ctx.cast::<T::Context>().cast_const()) }
}

/// # Safety
///
/// Called by the core with a context from `acquire::<T>`.
unsafe extern "C" fn get_pages<T: PeerClient>(
    _addr: c_ulong,
    _size: usize,
    _write: c_int,
    _force: c_int,
    _sg_head: *mut bindings::sg_table,
    ctx: *mut c_void,
    core_context: u64,
) -> c_int {
    // SAFETY: per the function's contract.
    errno(T::get_pages(unsafe { context::<T>(ctx) }, core_context))
}

/// # Safety
///
/// Called by the core with a context from `acquire::<T>`, its table, its live
/// DMA device and a valid `nmap`.
unsafe extern "C" fn dma_map<T: PeerClient>(
    sg_head: *mut bindings::sg_table,
    ctx: *mut c_void,
    dma_device: *mut bindings::device,
    _dmasync: c_int,
    nmap: *mut c_int,
) -> c_int {
    let (Some(dev), false, false) = (NonNull::new(dma_device), sg_head.is_null(), nmap.is_null())
    else {
        return EINVAL.to_errno();
    };
    // INVARIANT: the core's live DMA device for this call.
    let dev = DmaDevice { raw: dev };
    // SAFETY: non-null and owned by the core for this call.
    let mut out = unsafe {
        SgOut {
            sg_head: &mut *sg_head,
            nmap: &mut *nmap,
        }
    };
    // SAFETY: per the function's contract.
    errno(T::dma_map(unsafe { context::<T>(ctx) }, &dev, &mut out))
}

/// # Safety
///
/// Called by the core with a context from `acquire::<T>`.
unsafe extern "C" fn dma_unmap<T: PeerClient>(
    _sg_head: *mut bindings::sg_table,
    ctx: *mut c_void,
    _dma_device: *mut bindings::device,
) -> c_int {
    // SAFETY: per the function's contract.
    errno(T::dma_unmap(unsafe { context::<T>(ctx) }))
}

/// # Safety
///
/// Called by the core with a context from `acquire::<T>`.
unsafe extern "C" fn put_pages<T: PeerClient>(_sg_head: *mut bindings::sg_table, ctx: *mut c_void) {
    // SAFETY: per the function's contract.
    T::put_pages(unsafe { context::<T>(ctx) })
}

/// # Safety
///
/// Called by the core with a context from `acquire::<T>`.
unsafe extern "C" fn get_page_size<T: PeerClient>(ctx: *mut c_void) -> c_ulong {
    // SAFETY: per the function's contract.
    let size = T::page_size(unsafe { context::<T>(ctx) });
    // CAST: 64-bit `c_ulong`.
    size as c_ulong
}

/// # Safety
///
/// Called by the core once per context from `acquire::<T>`, as its last call.
unsafe extern "C" fn release<T: PeerClient>(ctx: *mut c_void) {
    // SAFETY: the core hands back the reference `acquire` gave it.
    T::release(unsafe { Arc::from_raw(ctx.cast::<T::Context>().cast_const()) })
}
