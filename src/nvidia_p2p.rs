//! Safe owning types over NVIDIA's `nvidia_p2p_*` API. All `unsafe` for that
//! API lives here.
//!
//! A [`GpuPin`] is one pinned GPU range: its page table, its DMA mapping and
//! the client's state `T`, all behind one lock. Who waits for whom and who
//! owns which reference when the driver's free callback meets a map, an
//! unmap or an unpin is decided in the pure crate
//! (`peermem_core::protocol`, model-checked on the host); this file gives it
//! the kernel's lock and condition variable and NVIDIA's calls.
//!
//! The driver's rules (NVIDIA's open kernel modules 595.45.04, github
//! NVIDIA/open-gpu-kernel-modules: `kernel-open/nvidia/nv-p2p.c`, RM's
//! `rm_p2p_*` in `src/nvidia/arch/nvalloc/unix/src/osapi.c`, the callback's
//! caller in `src/nvidia/src/kernel/gpu/bus/third_party_p2p.c`):
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
//! own table in flight, as the driver frees the table when the callback
//! returns. Every read of driver memory and every unmap starts under the
//! pin's lock while the pin is not revoked, so none comes after the
//! callback. A map that was in flight when the callback ran finds the pin
//! revoked: its mapping is the driver's, never used or unmapped.
//!
//! Lock order: `GpuPin::inner` is a leaf. It is never held across a call
//! into the driver or the RDMA core.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::ffi::c_void;

use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::{Arc, ArcBorrow, CondVar, Mutex};
use kernel::{new_condvar, new_mutex, try_pin_init};

use crate::abi;
use crate::peermem_core::client::{self, Registration};
use crate::peermem_core::protocol::{self, Driver, NoMemory, PinFailure, PinLock, PinState};
use crate::peermem_core::range::{GpuRange, GPU_PAGE_SIZE};
use crate::peermem_core::version::{self, AbiError, PageTableAbi};

pub(crate) use crate::peermem_core::protocol::{PinKind, PinOwner};

/// The page-table layout this build reads (from the `nv-p2p.h` it was built with).
#[cfg(nvpm_page_table_v2)]
pub(crate) const HEADER_PAGE_TABLE_ABI: PageTableAbi = PageTableAbi::V2;
/// The page-table layout this build reads (from the `nv-p2p.h` it was built with).
#[cfg(not(nvpm_page_table_v2))]
pub(crate) const HEADER_PAGE_TABLE_ABI: PageTableAbi = PageTableAbi::V1;

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

impl P2pError {
    /// The driver does not support this: `ENOTSUPP` (its refusal of
    /// persistent pinning) or `EOPNOTSUPP`.
    pub(crate) fn is_not_supported(&self) -> bool {
        matches!(self, P2pError::Driver(e) if *e == ENOTSUPP || *e == eopnotsupp())
    }

    /// The driver returned `EIO` (`NV_ERR_INVALID_STATE`).
    pub(crate) fn is_io(&self) -> bool {
        matches!(self, P2pError::Driver(e) if *e == EIO)
    }
}

/// `EOPNOTSUPP`, which the kernel crate names from 7.3 on only.
fn eopnotsupp() -> Error {
    // CAST: a small errno constant.
    Error::from_errno(-(bindings::EOPNOTSUPP as i32))
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

/// A pinned page table.
///
/// # Invariants
///
/// Came from a successful `nvidia_p2p_get_pages*` call; the protocol hands
/// it to the driver only while it is neither put nor revoked.
#[derive(Clone, Copy)]
pub(crate) struct PageTable(NonNull<abi::nvidia_p2p_page_table>);

/// A DMA mapping of a [`PageTable`] for one PCI device.
///
/// # Invariants
///
/// Came from a successful `nvidia_p2p_dma_map_pages` for `peer`; the
/// protocol unmaps it only while its table is not revoked.
pub(crate) struct DmaMapping {
    ptr: NonNull<abi::nvidia_p2p_dma_mapping>,
    peer: NonNull<bindings::pci_dev>,
}

// SAFETY: the handles are plain driver pointers, usable from any thread.
unsafe impl Send for PageTable {}
// SAFETY: as above; the `pci_dev` outlives the mapping (the core keeps its device).
unsafe impl Send for DmaMapping {}

/// NVIDIA's P2P API, as the protocol's driver.
pub(crate) struct NvidiaP2p;

impl Driver for NvidiaP2p {
    type Table = PageTable;
    type Mapping = DmaMapping;
    type Peer = PciDevice;
    type Error = P2pError;

    fn dma_map(&self, peer: &PciDevice, table: PageTable) -> Result<DmaMapping, P2pError> {
        let mut mapping: *mut abi::nvidia_p2p_dma_mapping = ptr::null_mut();
        // SAFETY: the protocol passes a table it took under the pin's lock
        // while not revoked; a callback may free it before the driver takes
        // its API lock, a race inside the driver that no client can close.
        // `peer` is a live PCI device, `mapping` an out-pointer.
        let ret = unsafe {
            abi::nvidia_p2p_dma_map_pages(peer.0.as_ptr(), table.0.as_ptr(), &mut mapping)
        };
        match (ret, NonNull::new(mapping)) {
            (0, Some(ptr)) => Ok(DmaMapping { ptr, peer: peer.0 }),
            (0, None) => Err(P2pError::Driver(EIO)),
            (ret, _) => Err(P2pError::Driver(Error::from_errno(ret))),
        }
    }

    fn dma_unmap(&self, table: PageTable, mapping: DmaMapping) {
        // SAFETY: the protocol unmaps a mapping made from `table` for `peer`
        // only after marking the unmap under the pin's lock while not
        // revoked: a callback waits for it, so the driver frees the table
        // only after this returns; dma_unmap_pages needs no lock the
        // callback holds.
        let ret = unsafe {
            abi::nvidia_p2p_dma_unmap_pages(
                mapping.peer.as_ptr(),
                table.0.as_ptr(),
                mapping.ptr.as_ptr(),
            )
        };
        if ret != 0 {
            pr_err!("nvidia_p2p_dma_unmap_pages failed: {}\n", ret);
        }
    }

    fn put(&self, kind: PinKind, va: u64, table: PageTable) -> i32 {
        match kind {
            // SAFETY: `table` is a persistent pin of `va`, put once.
            PinKind::Persistent => unsafe {
                abi::nvidia_p2p_put_pages_persistent(va, table.0.as_ptr(), 0)
            },
            // SAFETY: `table` is a revocable pin of `va`, put once; after a
            // callback the driver only looks it up and returns.
            PinKind::Revocable => unsafe { abi::nvidia_p2p_put_pages(0, 0, va, table.0.as_ptr()) },
        }
    }
}

type PinStateOf<T> = PinState<NvidiaP2p, T>;

/// The client side of a pin, as the kernel's lock and `Arc` hold it.
pub(crate) trait Owner: PinOwner + Send + Unpin + 'static {}

impl<T: PinOwner + Send + Unpin + 'static> Owner for T {}

/// One pinned range of GPU memory; see the module documentation.
#[pin_data]
pub(crate) struct GpuPin<T: Owner> {
    range: GpuRange,
    kind: PinKind,
    /// The pin's page table was CPU-cacheable ([`PinInfo::cpu_cacheable`]),
    /// for the log line of a failed map.
    cpu_cacheable: AtomicBool,
    #[pin]
    inner: Mutex<PinStateOf<T>>,
    /// Signalled when an unmap a callback waits for ends.
    #[pin]
    unmap_done: CondVar,
}

impl<T: Owner> PinLock for GpuPin<T> {
    type Driver = NvidiaP2p;
    type Owner = T;
    type Guard<'a>
        = Guard<'a, PinStateOf<T>, MutexBackend>
    where
        Self: 'a;

    fn lock(&self) -> Self::Guard<'_> {
        self.inner.lock()
    }

    fn wait_unmap<'a>(&'a self, mut guard: Self::Guard<'a>) -> Self::Guard<'a> {
        self.unmap_done.wait(&mut guard);
        guard
    }

    fn notify_unmap(&self) {
        self.unmap_done.notify_all();
    }

    fn driver(&self) -> &NvidiaP2p {
        &NvidiaP2p
    }

    fn kind(&self) -> PinKind {
        self.kind
    }

    fn va(&self) -> u64 {
        self.range.start()
    }

    fn drop_driver_reference(&self) {
        // SAFETY: every `GpuPin` lives in an `Arc` (`GpuPin::new`), so
        // `self` is the pointer `get_pages` handed the driver with its
        // reference; the protocol drops it once, when the driver no longer
        // holds it (it refused the pin, or an unpin took the reference
        // back: the callback will not run again and did not keep it), and
        // the caller holds another reference.
        drop(unsafe { Arc::from_raw(core::ptr::from_ref(self)) });
    }

    fn put_failed(&self, ret: i32) {
        pr_err!(
            "nvidia_p2p_put_pages of {:#x} failed: {}\n",
            self.range.start(),
            ret
        );
    }

    fn callback_dropped_reference(&self) {
        // Before the drop, which may be the module's last reference: the
        // exit that the drop allows reads it after `try_stop_module` saw
        // the count at zero (`module_put` and that read are ordered by the
        // refcount's fully ordered atomics).
        CALLBACK_DROPPED_REFERENCE.store(true, Ordering::SeqCst);
    }
}

impl<T: Owner> GpuPin<T> {
    /// A pin for `range`, not pinned yet.
    pub(crate) fn new(range: GpuRange, kind: PinKind, owner: T) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                range,
                kind,
                cpu_cacheable: AtomicBool::new(false),
                inner <- new_mutex!(PinState::new(owner)),
                unmap_done <- new_condvar!("GpuPin::unmap_done"),
            }),
            GFP_KERNEL,
        )
    }

    /// The pinned range.
    pub(crate) fn range(&self) -> GpuRange {
        self.range
    }

    /// Whether the driver's page table was CPU-cacheable (a coherent GPU);
    /// false before a successful [`GpuPin::pin`].
    pub(crate) fn cpu_cacheable(&self) -> bool {
        self.cpu_cacheable.load(Ordering::Relaxed)
    }

    /// Pins the range in the driver and validates the page table
    /// ([`protocol::pin`]).
    ///
    /// Must not be called from atomic context. Called once, before the pin is
    /// shared; a revocable pin may be revoked from here on.
    pub(crate) fn pin(self: &Arc<Self>) -> Result<PinInfo, P2pError> {
        let len = self.range.len();
        protocol::pin(
            &**self,
            len,
            || self.get_pages(),
            // SAFETY: `protocol::pin` checks the table the driver just
            // returned, under the pin's lock before accepting a callback:
            // live, and not revoked.
            |table| unsafe { check_page_table(table.0, len) },
        )
        .map_err(|e| match e {
            PinFailure::Driver(e) => e,
            PinFailure::NoTable => P2pError::Driver(EIO),
            PinFailure::Revoked => P2pError::Revoked,
            PinFailure::Check(e) => P2pError::Abi(e),
        })
        .inspect(|info| {
            self.cpu_cacheable
                .store(info.cpu_cacheable, Ordering::Relaxed)
        })
    }

    /// The driver's pin call. A revocable pin hands the driver a new
    /// reference to itself, the free callback's data, which the protocol
    /// drops again if the driver refuses ([`PinLock::drop_driver_reference`]).
    fn get_pages(self: &Arc<Self>) -> Result<Option<PageTable>, P2pError> {
        let mut table: *mut abi::nvidia_p2p_page_table = ptr::null_mut();
        let ret = match self.kind {
            // SAFETY: `table` is a valid out-pointer; the range is 64 KiB-aligned.
            PinKind::Persistent => unsafe {
                abi::nvidia_p2p_get_pages_persistent(
                    self.range.start(),
                    self.range.len(),
                    &mut table,
                    0,
                )
            },
            PinKind::Revocable => {
                // The driver holds this reference until put_pages returns or
                // the callback ends; see `free_callback` and
                // `drop_driver_reference`.
                let data = Arc::into_raw(self.clone()).cast_mut().cast::<c_void>();
                // SAFETY: as above; `free_callback::<T>` matches `data`'s type.
                unsafe {
                    abi::nvidia_p2p_get_pages(
                        0,
                        0,
                        self.range.start(),
                        self.range.len(),
                        &mut table,
                        Some(free_callback::<T>),
                        data,
                    )
                }
            }
        };
        if ret != 0 {
            return Err(P2pError::Driver(Error::from_errno(ret)));
        }
        // INVARIANT: `table` came from a successful get_pages for this range.
        Ok(NonNull::new(table).map(PageTable))
    }
}

impl<E> GpuPin<Registration<E>>
where
    E: client::Env,
    Registration<E>: Owner,
{
    /// `dma_map` of [`client::dma_map`]: maps the pinned pages for `peer`,
    /// checks the mapping, hands `build` the DMA address of each 64 KiB page
    /// and `publish` what it built, under the pin's lock; `reserve` runs
    /// without it when `build` asks for memory.
    ///
    /// Must not be called from atomic context.
    pub(crate) fn dma_map<S, R>(
        &self,
        peer: &PciDevice,
        scratch: &mut R,
        mut build: impl FnMut(&[u64], &mut R) -> Result<E::Sg, client::BuildError<S>>,
        reserve: impl FnOnce(&mut R) -> Result<(), S>,
        publish: impl FnOnce(&E::Sg),
    ) -> Result<(), client::MapError<P2pError, S>> {
        let len = self.range.len();
        client::dma_map(
            self,
            peer,
            // SAFETY: just returned by the driver, not revoked, lock held.
            |mapping| unsafe { check_mapping(mapping.ptr, len) }.map_err(P2pError::Abi),
            scratch,
            |mapping, scratch| {
                // SAFETY: `client::dma_map` hands `build` the stored mapping,
                // i.e. one that passed `check_mapping` (`protocol::map` stores
                // only those), under the pin's lock while not revoked: live,
                // and `entries` was checked against the pinned length.
                let pages = unsafe {
                    let m = mapping.ptr.as_ptr();
                    // CAST: a 32-bit count of entries fits usize.
                    core::slice::from_raw_parts((*m).dma_addresses, (*m).entries as usize)
                };
                build(pages, scratch)
            },
            reserve,
            publish,
        )
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

/// A free callback dropped the driver's reference to its pin: the module's
/// exit must wait for the callbacks in flight ([`wait_for_callbacks`]).
static CALLBACK_DROPPED_REFERENCE: AtomicBool = AtomicBool::new(false);

/// The driver's free callback for revocable pins of `GpuPin<T>`.
///
/// When the reference it drops is the pin's last (the core released the
/// registration meanwhile), the module reference the pin's owner holds
/// goes with it, and the callback still returns through this module's
/// text: the driver holds no reference to the module for its callback.
/// The module's exit therefore waits for the callbacks in flight
/// ([`wait_for_callbacks`]).
///
/// # Safety
///
/// `data` is the reference `GpuPin::get_pages` handed to `nvidia_p2p_get_pages`.
unsafe extern "C" fn free_callback<T: Owner>(data: *mut c_void) {
    let raw = data.cast::<GpuPin<T>>().cast_const();
    // SAFETY: `data` is the driver's reference to the pin, and only this
    // callback or a teardown's unpin drops it. The teardown drops it only
    // after its `put_pages` returned, and `put_pages` takes the driver's API
    // lock (`osapi.c` `rm_p2p_put_pages`), which the driver holds across
    // this callback (`third_party_p2p.c` `CliDelThirdPartyP2PVidmemInfo`):
    // so the pin lives until this callback drops the reference below or
    // returns.
    let pin = unsafe { ArcBorrow::from_raw(raw) };
    if protocol::free_callback(&*pin) {
        // SAFETY: the driver's reference, handed over to this callback; the
        // protocol recorded the drop for the module's exit, and `pin` is
        // not used again.
        drop(unsafe { Arc::from_raw(raw) });
    }
}

/// No-op: the callback [`wait_for_callbacks`] must pass; never called (that
/// pin always fails).
extern "C" fn never_called(_data: *mut c_void) {}

/// Returns once every free callback the driver began before has returned
/// to the driver, if a callback ever dropped a pin's reference (then its
/// last instructions may still be running in this module's text). Called
/// by the module's exit, when no reference holds the module: no pin is
/// armed (each holds one), so no callback starts afterwards.
///
/// The driver runs every free callback holding its API lock and drops it
/// only after the callback returned and the table was freed
/// (`third_party_p2p.c` `CliDelThirdPartyP2PVidmemInfo`, `nv-p2p.c`
/// `nv_p2p_mem_info_free_callback`). A revocable pin takes that lock before
/// looking the address up (`osapi.c` `rm_p2p_get_pages`:
/// `rmapiLockAcquire`, then `RmP2PGetPagesWithoutCallbackRegistration`),
/// so a pin of address 0, which no process has as GPU memory, waits for
/// the callbacks in flight and fails, silently (`p2p.c`
/// `RmP2PGetInfoWithoutToken` finds no P2P info for the caller).
pub(crate) fn wait_for_callbacks() {
    protocol::wait_for_callbacks(
        CALLBACK_DROPPED_REFERENCE.load(Ordering::SeqCst),
        || {
            let mut table: *mut abi::nvidia_p2p_page_table = ptr::null_mut();
            // SAFETY: a valid out-pointer and a callback that does nothing;
            // the range is 64 KiB-aligned.
            let ret = unsafe {
                abi::nvidia_p2p_get_pages(
                    0,
                    0,
                    0,
                    GPU_PAGE_SIZE,
                    &mut table,
                    Some(never_called),
                    ptr::null_mut(),
                )
            };
            if ret == 0 {
                // Address 0 pinned after all: give it back.
                // SAFETY: the table just returned for address 0; its
                // callback does nothing.
                unsafe { abi::nvidia_p2p_put_pages(0, 0, 0, table) };
            }
            // The allocations before the lock may fail: then try again.
            if ret == ENOMEM.to_errno() {
                Err(NoMemory)
            } else {
                Ok(())
            }
        },
        crate::shim::sleep_briefly,
    );
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
