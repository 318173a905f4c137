// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The peer-memory clients `nv_mem`, `nv_mem_nc` and `nv_mem_fallback`:
//! what this module does for the RDMA core, on top of the safe wrappers.
//!
//! One registration is one [`Context`]: a [`GpuPin`] holding a
//! [`Registration`]. The pin taken by `acquire` to claim the range is the
//! pin the registration uses (one pin per registration). What each of the
//! core's calls and the driver's free callback decides is the pure crate's
//! (`peermem_core::client`, run by the loom models too); this file gives it
//! the kernel's statistics, log lines and types ([`KernelEnv`]) and turns
//! its answers into errnos.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use crate::nvidia_p2p::{GpuPin, P2pError, PinKind};
use crate::peer_mem::{
    DmaDevice, Invalidation, InvalidatorSlot, ModuleRef, PeerClient, Registration as Client, SgOut,
};
use crate::peermem_core::client::{self, BuildError, Decline, Env, MapError, Note, Registration};
use crate::peermem_core::diag::{self, CoherentMapIo, MapNotSupported};
use crate::peermem_core::protocol::Threads;
use crate::peermem_core::range::{GpuRange, GPU_PAGE_SIZE};
use crate::peermem_core::sgplan::segment_limit;
use crate::peermem_core::state::Refusal;
use crate::scatterlist::{SgError, SgReserve, SgTable};
use crate::stats::{Counter, STATS};

/// The invalidation entry point of the revocable client.
static REVOCABLE_SLOT: InvalidatorSlot = InvalidatorSlot::new();
/// The persistent API was refused once (logged once).
static PERSISTENT_REFUSED: AtomicBool = AtomicBool::new(false);
/// The driver's page-table ABI was logged (at the first pin).
static ABI_LOGGED: AtomicBool = AtomicBool::new(false);
/// CPU-cacheable pages were logged (at the first such pin; the statistics
/// count the rest).
static CACHEABLE_LOGGED: AtomicBool = AtomicBool::new(false);

/// True for the first caller only: a line logged once per load. The load
/// keeps the hot path off the cache line's exclusive state once set.
fn first_time(flag: &AtomicBool) -> bool {
    !flag.load(Ordering::Relaxed) && !flag.swap(true, Ordering::Relaxed)
}

/// One registration.
pub(crate) type Context = GpuPin<Registration<KernelEnv>>;

/// The kernel as the platform of `peermem_core::client`.
pub(crate) struct KernelEnv;

impl Env for KernelEnv {
    type Threads = KernelThreads;
    type Invalidator = &'static InvalidatorSlot;
    type Sg = SgTable;
    type Keep = ModuleRef;

    /// Inlined: each caller's note is a constant.
    #[inline]
    fn note(note: Note) {
        match note {
            Note::ContextLive => STATS.add(Counter::ContextsLive, 1),
            Note::ContextGone => STATS.sub(Counter::ContextsLive, 1),
            Note::Pinned(len) => STATS.add(Counter::PinnedBytes, len),
            Note::Unpinned(len) => STATS.sub(Counter::PinnedBytes, len),
            Note::Revoking => STATS.add(Counter::Invalidations, 1),
            Note::Forwarded => STATS.add(Counter::InvalidationsForwarded, 1),
            Note::NotDelivered(core_context) => pr_err!(
                "invalidation of core context {} not delivered: client not registered\n",
                core_context
            ),
            Note::OutOfOrder(event, phase) => {
                STATS.add(Counter::OutOfOrderCalls, 1);
                if crate::shim::ratelimit() {
                    pr_warn!("{:?} refused in phase {:?}\n", event, phase);
                }
            }
            Note::UnpinParked => STATS.add(Counter::UnpinsInRelease, 1),
            Note::Released => STATS.add(Counter::Deregistrations, 1),
        }
    }
}

/// The errno the core gets for a refused call.
fn refusal_errno(refusal: Refusal) -> Error {
    match refusal {
        Refusal::Revoked => EFAULT,
        Refusal::OutOfOrder => EINVAL,
    }
}

/// Claims `size` bytes at `addr` by pinning them, or declines.
fn acquire(addr: u64, size: u64, kind: PinKind) -> Option<Arc<Context>> {
    let Ok(range) = GpuRange::covering(addr, size) else {
        STATS.add(Counter::Declines, 1);
        return None;
    };
    let invalidator = (kind == PinKind::Revocable).then_some(&REVOCABLE_SLOT);
    let acquired = client::acquire(
        invalidator,
        ModuleRef::get,
        |state| GpuPin::new(range, kind, state),
        GpuPin::pin,
    );
    match acquired {
        Err(Decline::Unloading) => None,
        Err(Decline::NotReady(_)) => {
            // The core asks before our registration returned its handle.
            STATS.add(Counter::Declines, 1);
            if crate::shim::ratelimit() {
                pr_info!(
                    "range at {:#x} declined: the revocable client is still registering\n",
                    range.start()
                );
            }
            None
        }
        Err(Decline::NoPin(_)) => {
            STATS.add(Counter::ErrorsAcquire, 1);
            None
        }
        Ok((pin, info)) => {
            STATS.add(Counter::Registrations, 1);
            if first_time(&ABI_LOGGED) {
                pr_info!("NVIDIA driver page-table ABI {}\n", info.abi);
            }
            if info.cpu_cacheable {
                STATS.add(Counter::CpuCacheablePins, 1);
                if first_time(&CACHEABLE_LOGGED) {
                    pr_info!(
                        "pages at {:#x} are CPU-cacheable (coherent platform; further such pins are counted in cpu_cacheable_pins)\n",
                        range.start()
                    );
                }
            }
            Some(pin)
        }
        Err(Decline::Pin(e)) => {
            decline(range, kind, e);
            None
        }
    }
}

/// Accounts and explains a range this client does not take.
fn decline(range: GpuRange, kind: PinKind, e: P2pError) {
    STATS.add(Counter::Declines, 1);
    match e {
        // Not GPU memory: the common, silent case.
        P2pError::Driver(e) if e == EINVAL => {}
        // Freed while being pinned: the application's race, answered as it
        // should be (the core gets no context); not an error of ours.
        P2pError::Revoked => {
            if crate::shim::ratelimit() {
                pr_info!(
                    "{} bytes at {:#x} declined: the GPU memory was freed while being pinned\n",
                    range.len(),
                    range.start()
                );
            }
        }
        e if e.is_not_supported() && kind == PinKind::Persistent => {
            if first_time(&PERSISTENT_REFUSED) {
                pr_info!(
                    "persistent pinning refused (MIG, vGPU, or memory the driver keeps from RDMA such as localized memory on a coherent platform): registrations fall back to revocable pages\n"
                );
            }
        }
        // p2p.c RmThirdPartyP2PNVLinkGetPages: NV_ERR_NOT_SUPPORTED for
        // localized memory over coherent (C2C) mappings.
        e if e.is_not_supported() => {
            STATS.add(Counter::ErrorsAcquire, 1);
            if crate::shim::ratelimit() {
                pr_err!(
                    "cannot pin {} bytes at {:#x}: the NVIDIA driver does not allow RDMA on this memory (-ENOTSUPP); on a coherent platform (Grace Hopper, Grace Blackwell) it refuses memory allocated as localized: allocate the buffer without localization\n",
                    range.len(),
                    range.start()
                );
            }
        }
        P2pError::Driver(e) if e == ENOMEM => {
            STATS.add(Counter::ErrorsAcquire, 1);
            if crate::shim::ratelimit() {
                pr_err!(
                    "cannot pin {} bytes at {:#x}: GPU BAR1 space exhausted; deregister memory or use a GPU with a larger BAR1\n",
                    range.len(),
                    range.start()
                );
            }
        }
        other => {
            STATS.add(Counter::ErrorsAcquire, 1);
            if crate::shim::ratelimit() {
                pr_err!(
                    "cannot pin {} bytes at {:#x}: {:?}\n",
                    range.len(),
                    range.start(),
                    other
                );
            }
        }
    }
}

fn get_pages(ctx: ArcBorrow<'_, Context>, core_context: u64) -> Result {
    client::get_pages(&*ctx, core_context).map_err(refusal_errno)
}

fn dma_map(ctx: ArcBorrow<'_, Context>, dev: &DmaDevice, out: &mut SgOut<'_>) -> Result {
    let Some(pci) = dev.pci() else {
        STATS.add(Counter::ErrorsDmaMap, 1);
        if crate::shim::ratelimit() {
            pr_err!("dma_map: the DMA device is not a PCI device\n");
        }
        return Err(EINVAL);
    };
    let limit = segment_limit(dev.max_segment_size());
    // CAST: at most the pinned length in 64 KiB pages, far below usize::MAX.
    let pages = (ctx.range().len() / GPU_PAGE_SIZE) as usize;
    ctx.dma_map(
        &pci,
        &mut SgReserve::new(),
        |addresses, reserve| {
            SgTable::new(addresses, limit, reserve).map_err(|e| match e {
                SgError::NeedMemory => BuildError::NeedMemory(ENOMEM),
                SgError::Failed(e) => BuildError::Failed(e),
            })
        },
        |reserve| reserve.fill(pages),
        |table| {
            out.publish(table);
            STATS.add(Counter::Sges, u64::from(table.len()));
        },
    )
    .map_err(|e| map_failed(ctx.range(), ctx.cpu_cacheable(), e))
}

/// Counts and logs a failed map; the errno for the core.
#[cold]
#[inline(never)]
fn map_failed(range: GpuRange, cpu_cacheable: bool, e: MapError<P2pError, Error>) -> Error {
    let errno = match e {
        MapError::Refused(refusal) => refusal_errno(refusal),
        MapError::Driver(P2pError::Driver(e)) | MapError::Sg(e) => e,
        MapError::Driver(P2pError::Revoked) | MapError::Revoked => EFAULT,
        MapError::Driver(P2pError::Abi(_) | P2pError::State) | MapError::State => EINVAL,
    };
    if e.is_failed_map() {
        STATS.add(Counter::ErrorsDmaMap, 1);
        if crate::shim::ratelimit() {
            let start = range.start();
            match e {
                MapError::Sg(e) => {
                    pr_err!(
                        "cannot map {:#x} for the NIC: its scatterlist: {:?}\n",
                        start,
                        e
                    )
                }
                // The PCIe topology rule, or for CPU-cacheable pages CDMM
                // (peermem_core::diag).
                MapError::Driver(e) if e.is_not_supported() => {
                    for line in MapNotSupported::of_pin(cpu_cacheable).advice() {
                        pr_err!("cannot map {:#x} for the NIC: {}\n", start, line);
                    }
                }
                // A coherent map's IOVA contiguity (peermem_core::diag).
                MapError::Driver(why) if cpu_cacheable && why.is_io() => {
                    pr_err!("cannot map {:#x} for the NIC: {}\n", start, why);
                    coherent_map_io_advice(start, range.pages());
                }
                MapError::Driver(why) => {
                    pr_err!("cannot map {:#x} for the NIC: {}\n", start, why)
                }
                MapError::Revoked => pr_err!(
                    "cannot map {:#x} for the NIC: {}\n",
                    start,
                    P2pError::Revoked
                ),
                MapError::State | MapError::Refused(_) => {
                    pr_err!("cannot map {:#x} for the NIC: {}\n", start, P2pError::State)
                }
            }
        }
    }
    errno
}

/// The second line after a coherent map's -EIO: the driver's DMA submaps
/// or the IOMMU.
fn coherent_map_io_advice(start: u64, gpu_pages: u64) {
    let arm64 = cfg!(target_arch = "aarch64");
    match CoherentMapIo::of_map(gpu_pages, crate::shim::PAGE_SHIFT, arm64) {
        CoherentMapIo::SubmapCut {
            submap_pages,
            first_cut,
            limit,
        } => pr_err!(
            "cannot map {:#x} for the NIC: {}{}{}{}{}{}{}\n",
            start,
            diag::SUBMAP_CUT,
            submap_pages,
            diag::SUBMAP_CUT_PAGE,
            first_cut,
            diag::SUBMAP_CUT_LIMIT,
            limit,
            diag::SUBMAP_CUT_FIX
        ),
        CoherentMapIo::NotContiguous => {
            pr_err!(
                "cannot map {:#x} for the NIC: {}\n",
                start,
                diag::NOT_CONTIGUOUS
            )
        }
        CoherentMapIo::NoCheck => {}
    }
}

fn dma_unmap(ctx: ArcBorrow<'_, Context>) -> Result {
    client::dma_unmap(&*ctx).map_err(refusal_errno)
}

fn put_pages(ctx: ArcBorrow<'_, Context>) {
    client::put_pages(&*ctx);
}

fn release(ctx: Arc<Context>) {
    client::release(&*ctx);
}

/// The kernel's threads, for `protocol::lock_after_forward`: release waits
/// there until no other thread forwards an invalidation for its registration.
pub(crate) struct KernelThreads;

impl Threads for KernelThreads {
    type Id = kernel::task::Pid;

    fn current() -> Self::Id {
        crate::shim::current_pid()
    }

    fn pause() {
        crate::shim::sleep_briefly();
    }
}

/// The persistent client (`nv_mem` by default, `nv_mem_nc`): pages stay
/// pinned until deregistration, no invalidation, usable for queues too.
pub(crate) struct PersistentClient;

/// The revocable client (`nv_mem` with persistent_api_support=0, or
/// `nv_mem_fallback`): pages the driver may revoke; MRs only.
pub(crate) struct RevocableClient;

macro_rules! peer_client {
    ($client:ty, $kind:expr) => {
        impl PeerClient for $client {
            type Context = Context;

            fn acquire(addr: u64, size: u64) -> Option<Arc<Context>> {
                acquire(addr, size, $kind)
            }
            fn get_pages(ctx: ArcBorrow<'_, Context>, core_context: u64) -> Result {
                get_pages(ctx, core_context)
            }
            fn dma_map(
                ctx: ArcBorrow<'_, Context>,
                dev: &DmaDevice,
                out: &mut SgOut<'_>,
            ) -> Result {
                dma_map(ctx, dev, out)
            }
            fn dma_unmap(ctx: ArcBorrow<'_, Context>) -> Result {
                dma_unmap(ctx)
            }
            fn put_pages(ctx: ArcBorrow<'_, Context>) {
                put_pages(ctx)
            }
            fn page_size(_ctx: ArcBorrow<'_, Context>) -> u64 {
                GPU_PAGE_SIZE
            }
            fn release(ctx: Arc<Context>) {
                release(ctx)
            }
        }
    };
}

peer_client!(PersistentClient, PinKind::Persistent);
peer_client!(RevocableClient, PinKind::Revocable);

/// Which clients to register, from the module parameters.
pub(crate) struct Config {
    /// `persistent_api_support`.
    pub(crate) persistent_api: bool,
    /// `peerdirect_support`.
    pub(crate) peerdirect: bool,
}

impl Config {
    /// How the revocable client presents itself to the core, for the banner.
    pub(crate) fn client_layout(&self) -> &'static str {
        if self.peerdirect {
            "legacy client layout (MOFED 4.1 to 5.0)"
        } else {
            "_ex client layout with INVALIDATE_UNMAPS (MOFED 5.4-3+, DOCA-OFED)"
        }
    }
}

/// The registered clients, unregistered in order on drop.
pub(crate) struct Clients {
    registrations: KVec<Client>,
}

impl Clients {
    /// Registers the clients NVIDIA's module registers for `config` (plus the
    /// revocable fallback behind the default persistent `nv_mem`).
    pub(crate) fn register(config: &Config, version: &str) -> Result<Self> {
        let revocable = Invalidation::Revocable {
            unmaps: !config.peerdirect,
        };
        let plan: [(&str, bool, Invalidation); 2] = if config.persistent_api {
            [
                ("nv_mem", true, Invalidation::None),
                ("nv_mem_fallback", false, revocable),
            ]
        } else {
            [
                ("nv_mem", false, revocable),
                ("nv_mem_nc", true, Invalidation::None),
            ]
        };
        crate::peer_mem::check_api().inspect_err(|_| {
            pr_err!("the running RDMA stack has no peer-memory API (ib_register_peer_memory_client): GPUDirect RDMA through this module needs the ib_core of MLNX_OFED or DOCA-OFED; with the kernel's own RDMA stack use dma-buf (ibv_reg_dmabuf_mr) instead\n");
        })?;
        let mut registrations = KVec::with_capacity(plan.len(), GFP_KERNEL)?;
        for (name, persistent, invalidation) in plan {
            let registered = if persistent {
                Client::register::<PersistentClient>(name, version, invalidation, &REVOCABLE_SLOT)
            } else {
                Client::register::<RevocableClient>(name, version, invalidation, &REVOCABLE_SLOT)
            };
            match registered {
                Ok(r) => registrations.push(r, GFP_KERNEL)?,
                Err(e) => {
                    pr_err!(
                        "the RDMA core refused peer-memory client {}: a client of that name is already registered (nv_peer_mem or NVIDIA's nvidia-peermem loaded? MLNX_OFED/DOCA-OFED up to 23.10 list them in /sys/kernel/mm/memory_peers; 24.04 and later refuse no name and register a second one behind the first), or the core is out of memory\n",
                        name
                    );
                    return Err(e);
                }
            }
        }
        Ok(Self { registrations })
    }

    /// Names of the registered clients, for the banner.
    pub(crate) fn names(&self) -> impl Iterator<Item = &CStr> {
        self.registrations.iter().map(|r| r.name())
    }
}
