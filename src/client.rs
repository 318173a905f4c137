// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The peer-memory clients `nv_mem`, `nv_mem_nc` and `nv_mem_fallback`:
//! what this module does for the RDMA core, on top of the safe wrappers.
//!
//! One registration is one [`Context`]: a [`GpuPin`] holding a [`RegState`].
//! The pin taken by `acquire` to claim the range is the pin the registration
//! uses (one pin per registration). Every callback steps the registration's
//! state machine (`peermem_core::state`) under the pin's lock and then does
//! what it returns, without the lock.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use crate::nvidia_p2p::{GpuPin, P2pError, PinGuard, PinKind, PinOwner};
use crate::peer_mem::{
    DmaDevice, Invalidation, InvalidatorSlot, ModuleRef, PeerClient, Registration, SgOut,
};
use crate::peermem_core::protocol::{Forwarding, Threads};
use crate::peermem_core::range::{GpuRange, GPU_PAGE_SIZE};
use crate::peermem_core::sgplan::segment_limit;
use crate::peermem_core::state::{step, Action, Event, Phase, Refusal};
use crate::scatterlist::SgTable;
use crate::stats::{Counter, STATS};

/// The invalidation entry point of the revocable client.
static REVOCABLE_SLOT: InvalidatorSlot = InvalidatorSlot::new();
/// The persistent API was refused once (logged once).
static PERSISTENT_REFUSED: AtomicBool = AtomicBool::new(false);
/// The driver's page-table ABI was logged (at the first pin).
static ABI_LOGGED: AtomicBool = AtomicBool::new(false);

/// One registration.
pub(crate) type Context = GpuPin<RegState>;

/// The client's state of one registration, behind the pin's lock.
pub(crate) struct RegState {
    phase: Phase,
    core_context: Option<u64>,
    /// Where invalidations go (revocable pins only).
    invalidator: Option<&'static InvalidatorSlot>,
    /// The thread forwarding an invalidation for this registration, if any.
    forwarder: Option<kernel::task::Pid>,
    /// Bytes counted in `pinned_bytes` (0 once given back).
    pinned_len: u64,
    /// The scatterlist handed to the core; freed at release.
    sg: Option<SgTable>,
    _module: ModuleRef,
}

impl RegState {
    /// Applies `event`; returns the action, or the errno the core gets.
    /// Inlined: each caller's event is a constant, which leaves a test of
    /// the phase or two.
    #[inline]
    fn apply(&mut self, event: Event) -> Result<Action> {
        match step(self.phase, event) {
            Ok((next, action)) => {
                self.phase = next;
                Ok(action)
            }
            Err(refusal) => Err(self.refuse(event, refusal)),
        }
    }

    /// The errno for a refused `event`, counted and logged if out of order.
    #[cold]
    #[inline(never)]
    fn refuse(&self, event: Event, refusal: Refusal) -> Error {
        match refusal {
            Refusal::Revoked => EFAULT,
            Refusal::OutOfOrder => {
                STATS.add(Counter::OutOfOrderCalls, 1);
                if crate::shim::ratelimit() {
                    pr_warn!("{:?} refused in phase {:?}\n", event, self.phase);
                }
                EINVAL
            }
        }
    }
}

impl RegState {
    /// Takes the pages out of the statistics.
    fn unaccount(&mut self) {
        STATS.sub(Counter::PinnedBytes, core::mem::take(&mut self.pinned_len));
    }
}

impl PinOwner for RegState {
    type Followup = Option<(u64, &'static InvalidatorSlot)>;

    fn pinned(&mut self, len: u64) {
        if self.phase == Phase::Pinned {
            self.pinned_len = len;
            STATS.add(Counter::PinnedBytes, len);
        }
    }

    fn revoking(&mut self) -> Self::Followup {
        STATS.add(Counter::Invalidations, 1);
        let action = self.apply(Event::CallbackBegin);
        if self.phase == Phase::Revoking {
            // The driver takes the pages back.
            self.unaccount();
        }
        match action {
            Ok(Action::ForwardInvalidation) => {
                self.forwarder = Some(crate::shim::current_pid());
                self.core_context.zip(self.invalidator)
            }
            _ => None,
        }
    }

    fn revoked(followup: Self::Followup) {
        if let Some((core_context, slot)) = followup {
            if slot.invalidate(core_context) {
                STATS.add(Counter::InvalidationsForwarded, 1);
            } else {
                pr_err!(
                    "invalidation of core context {} not delivered: client not registered\n",
                    core_context
                );
            }
        }
    }

    fn revoke_end(&mut self) {
        self.forwarder = None;
        let _ = self.apply(Event::CallbackEnd);
    }

    fn teardown_end(&mut self) {
        let _ = self.apply(Event::TeardownEnd);
    }
}

/// Claims `size` bytes at `addr` by pinning them, or declines.
fn acquire(addr: u64, size: u64, kind: PinKind) -> Option<Arc<Context>> {
    let Ok(range) = GpuRange::covering(addr, size) else {
        STATS.add(Counter::Declines, 1);
        return None;
    };
    let state = RegState {
        phase: Phase::Pinned,
        core_context: None,
        invalidator: (kind == PinKind::Revocable).then_some(&REVOCABLE_SLOT),
        forwarder: None,
        pinned_len: 0,
        sg: None,
        _module: ModuleRef::get()?,
    };
    STATS.add(Counter::ContextsLive, 1);
    let Ok(pin) = GpuPin::new(range, kind, state) else {
        STATS.add(Counter::ErrorsAcquire, 1);
        return None;
    };
    match pin.pin() {
        Ok(info) => {
            STATS.add(Counter::Registrations, 1);
            if !ABI_LOGGED.load(Ordering::Relaxed) && !ABI_LOGGED.swap(true, Ordering::Relaxed) {
                pr_info!("NVIDIA driver page-table ABI {}\n", info.abi);
            }
            if info.cpu_cacheable && crate::shim::ratelimit() {
                pr_info!(
                    "pages at {:#x} are CPU-cacheable (coherent platform)\n",
                    range.start()
                );
            }
            Some(pin)
        }
        Err(e) => {
            decline(range, kind, e);
            None
        }
    }
}

/// `ENOTSUPP` (the driver's refusal of persistent pinning) or `EOPNOTSUPP`,
/// compared by number: the kernel crate names `EOPNOTSUPP` from 7.3 on only.
fn is_not_supported(e: Error) -> bool {
    e == ENOTSUPP || e.to_errno() == -(kernel::bindings::EOPNOTSUPP as i32)
}

/// Accounts and explains a range this client does not take.
fn decline(range: GpuRange, kind: PinKind, e: P2pError) {
    STATS.add(Counter::Declines, 1);
    match e {
        // Not GPU memory: the common, silent case.
        P2pError::Driver(e) if e == EINVAL => {}
        P2pError::Driver(e) if is_not_supported(e) && kind == PinKind::Persistent => {
            if !PERSISTENT_REFUSED.swap(true, Ordering::Relaxed) {
                pr_info!(
                    "persistent pinning refused (MIG or vGPU?): registrations fall back to revocable pages\n"
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
    let mut pin = ctx.lock();
    let state = pin.owner();
    state.apply(Event::GetPages)?;
    state.core_context = Some(core_context);
    Ok(())
}

fn dma_map(ctx: ArcBorrow<'_, Context>, dev: &DmaDevice, out: &mut SgOut<'_>) -> Result {
    let Some(pci) = dev.pci() else {
        STATS.add(Counter::ErrorsDmaMap, 1);
        if crate::shim::ratelimit() {
            pr_err!("dma_map: the DMA device is not a PCI device\n");
        }
        return Err(EINVAL);
    };
    let (mut pin, mapped) = ctx.map(&pci, |state| state.apply(Event::MapBegin).map(|_| ()))?;
    if let Err(e) = mapped {
        pin.owner().apply(Event::MapEnd { ok: false })?;
        STATS.add(Counter::ErrorsDmaMap, 1);
        if crate::shim::ratelimit() {
            pr_err!("cannot map {:#x} for the NIC: {}\n", ctx.range().start(), e);
        }
        return Err(match e {
            P2pError::Driver(e) => e,
            P2pError::Revoked => EFAULT,
            P2pError::Abi(_) | P2pError::State => EINVAL,
        });
    }
    // Read the driver's addresses under the lock: a free callback waits for us.
    let limit = segment_limit(dev.max_segment_size());
    let table = pin.dma_addresses().map(|pages| SgTable::new(pages, limit));
    match table {
        Some(Ok(table)) => {
            pin.owner().apply(Event::MapEnd { ok: true })?;
            out.publish(&table);
            STATS.add(Counter::Sges, u64::from(table.len()));
            pin.owner().sg = Some(table);
            Ok(())
        }
        Some(Err(e)) => {
            let undo = pin.take_mapping();
            let _ = pin.owner().apply(Event::MapEnd { ok: false });
            drop(pin);
            if let Some(undo) = undo {
                undo.run(&*ctx);
            }
            STATS.add(Counter::ErrorsDmaMap, 1);
            Err(e)
        }
        // Revoked after the driver mapped: its callback is running.
        None => pin
            .owner()
            .apply(Event::MapEnd { ok: true })
            .and(Err(EFAULT)),
    }
}

fn dma_unmap(ctx: ArcBorrow<'_, Context>) -> Result {
    ctx.lock().owner().apply(Event::Unmap).map(|_| ())
}

fn put_pages(ctx: ArcBorrow<'_, Context>) {
    let pin = ctx.lock();
    end_of_use(ctx, pin, Event::PutPages);
}

fn release(ctx: Arc<Context>) {
    let mut pin = ctx.lock_after_forward::<KernelThreads>();
    // Freed here, not in put_pages: a core may skip put_pages after an
    // invalidation, never release.
    let sg = pin.owner().sg.take();
    // A revocable pin's unpin, parked by put_pages (then Release is no
    // teardown of its own).
    let parked = pin.take_parked_teardown();
    end_of_use(ctx.as_arc_borrow(), pin, Event::Release);
    if let Some(teardown) = parked {
        ctx.run_teardown(teardown);
    }
    drop(sg);
    STATS.add(Counter::Deregistrations, 1);
}

/// The kernel's threads, for `protocol::lock_after_forward`: release waits
/// there until no other thread forwards an invalidation for its registration.
struct KernelThreads;

impl Threads for KernelThreads {
    type Id = kernel::task::Pid;

    fn current() -> Self::Id {
        crate::shim::current_pid()
    }

    fn pause() {
        crate::shim::sleep_briefly();
    }
}

impl Forwarding<KernelThreads> for RegState {
    fn forwarder(&self) -> Option<kernel::task::Pid> {
        self.forwarder
    }
}

/// put_pages or release, with `pin` (the lock of `ctx`) held: unpins if the
/// registration still holds pages.
///
/// put_pages of revocable pages leaves the unpin to `release`: MOFED 5.1 to
/// 5.4-2 call put_pages holding the umem's `mapping_lock`, which their
/// invalidation takes, while the driver's unpin waits for a running free
/// callback, which forwards that invalidation (bug 2696789). Every core
/// calls `release` right after put_pages and without that lock; MOFED 5.0
/// and earlier call it inside an invalidation only, when the pages are
/// already revoked. So the pages are unpinned before deregistration returns.
/// Inlined: each caller's event is a constant.
#[inline(always)]
fn end_of_use(ctx: ArcBorrow<'_, Context>, mut pin: PinGuard<'_, RegState>, event: Event) {
    let Ok(Action::Teardown) = pin.owner().apply(event) else {
        return;
    };
    let kind = ctx.kind();
    pin.owner().unaccount();
    if kind == PinKind::Revocable && event == Event::PutPages {
        STATS.add(Counter::UnpinsInRelease, 1);
        pin.park_teardown();
        return;
    }
    let teardown = pin.take_teardown();
    drop(pin);
    let ctx: Arc<Context> = ctx.into();
    ctx.run_teardown(teardown);
}

impl Drop for RegState {
    fn drop(&mut self) {
        STATS.sub(Counter::ContextsLive, 1);
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
    registrations: KVec<Registration>,
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
                Registration::register::<PersistentClient>(
                    name,
                    version,
                    invalidation,
                    &REVOCABLE_SLOT,
                )
            } else {
                Registration::register::<RevocableClient>(
                    name,
                    version,
                    invalidation,
                    &REVOCABLE_SLOT,
                )
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
