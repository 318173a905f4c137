// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Every interleaving of a registration, a deregistration and a `cudaFree`,
//! explored with loom over the module's own protocol code
//! (`peermem_core::protocol` and `state`), against models of the two foreign
//! parties written from ../shared/research/driver-locking.md and
//! mofed-core-observed.md:
//! - the driver: one API lock taken by pin, map (in its middle: the table is
//!   read before it and written after) and unpin, and held across the free
//!   callback; the table and its mappings freed when the callback returns;
//!   unmap under the table's own lock only;
//! - the RDMA core in each generation: modern (`mapping_lock` held from
//!   before `get_pages` until the HCA activates the registration;
//!   INVALIDATE_UNMAPS), mid (5.1-5.4-2: unmap and unpin under
//!   `mapping_lock`, in the invalidation and in the deregistration) and
//!   legacy (<= 5.0: the invalidation unmaps, unpins and releases inside the
//!   callback, under the client's mutex).
//!
//! The client glue (`Reg`, `dma_map` ... `release` below) mirrors
//! `src/client.rs` step by step; what it decides with is the shared code.
//! Each execution asserts: no deadlock (loom fails on one), no use of a
//! freed table or mapping, no invalidation dropped while the NIC may use the
//! pages, every pin put exactly once (a late put after the callback at most
//! once), and the driver's reference to the pin dropped exactly once.
//!
//! Bound: loom's preemption bound is 4 (`MODEL_PREEMPTIONS`): every
//! schedule of the registering and the freeing thread with at most four
//! forced switches between them (blocking on a lock is free). Each known
//! window (a callback between a check and a driver call; during a map, an
//! unmap or an unpin; a forward waiting for activation; a legacy core's
//! teardown inside the callback) is reached with one switch into the free
//! and at most one back; four leave room for the free to land at any step
//! of the registration and of the deregistration. Unbounded runs were cut
//! off after 2 minutes (173,109 executions of one model); bound 4 explores
//! 370 to 10,177 executions per model, about 3 s for all in release. The
//! mutation checks in tests/README.md ("Host suite: the protocol under
//! loom") are found within that bound.

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use loom::thread;

use peermem_core::protocol::{
    self, Driver, Forwarding, MapFailure, PinKind, PinLock, PinOwner, PinState, Threads,
};
use peermem_core::state::{step, Action, Event, Phase};

const MODEL_PREEMPTIONS: usize = 4;
const VA: u64 = 0x7f40_0000_0000;

// ---- The driver -----------------------------------------------------------

/// What the driver knows of the one table of a model.
#[derive(Default)]
struct TableState {
    /// Freed by the free path (after the callback) or by the put.
    freed: bool,
    /// Puts of it (a late put after the callback counts too).
    puts: usize,
    /// Live mappings, by id.
    mappings: Vec<usize>,
}

struct Gpu {
    /// RM's API lock.
    api: Mutex<()>,
    /// The table's own lock (the driver's `dma_mapping_list.lock`).
    table: Mutex<TableState>,
    /// The free callback is registered (revocable pin, not put yet).
    callback_armed: AtomicBool,
    /// The reference to the pin the driver got with the callback: the
    /// callback's data. Dropped by the callback or the unpin, never twice.
    driver_ref: Mutex<Option<Arc<Pin>>>,
    next_mapping: AtomicUsize,
    /// A map read a table freed before it (the driver's own race).
    raced: AtomicBool,
    /// The map fails (a failure path).
    map_fails: bool,
}

#[derive(Clone, Copy)]
struct Table;

struct Mapping {
    id: usize,
}

impl Gpu {
    fn new(map_fails: bool) -> Self {
        Self {
            api: Mutex::new(()),
            table: Mutex::new(TableState::default()),
            callback_armed: AtomicBool::new(false),
            driver_ref: Mutex::new(None),
            next_mapping: AtomicUsize::new(1),
            raced: AtomicBool::new(false),
            map_fails,
        }
    }

    /// get_pages (with `pin` as the callback's data) / get_pages_persistent.
    fn pin(&self, pin: &Arc<Pin>) -> Table {
        let _api = self.api.lock().unwrap();
        if pin.kind == PinKind::Revocable {
            *self.driver_ref.lock().unwrap() = Some(pin.clone());
            self.callback_armed.store(true, SeqCst);
        }
        Table
    }

    /// The reference the pin handed the driver is dropped.
    fn drop_driver_ref(&self) {
        let reference = self.driver_ref.lock().unwrap().take();
        assert!(reference.is_some(), "the driver's reference to the pin dropped twice");
    }

    /// A read of the table or a mapping's addresses by the client.
    fn read(&self) {
        assert!(!self.table.lock().unwrap().freed, "the client read a freed table");
    }

    /// cudaFree: under the API lock, the callback with its data, then the
    /// table is freed.
    fn free(&self, nic_may_use: &AtomicBool) {
        let _api = self.api.lock().unwrap();
        if !self.callback_armed.swap(false, SeqCst) {
            return;
        }
        let data = self.driver_ref.lock().unwrap().clone();
        free_callback(&data.expect("a callback without its data"));
        assert!(
            !nic_may_use.load(SeqCst),
            "the callback returned while the NIC may still use the pages: invalidation dropped"
        );
        let mut table = self.table.lock().unwrap();
        table.freed = true;
        table.mappings.clear();
    }
}

impl Driver for Gpu {
    type Table = Table;
    type Mapping = Mapping;
    type Peer = ();
    type Error = i32;

    fn dma_map(&self, _peer: &(), _table: Table) -> Result<Mapping, i32> {
        // Read before the API lock: a table freed by now is the driver's race.
        if self.table.lock().unwrap().freed {
            self.raced.store(true, SeqCst);
        }
        drop(self.api.lock().unwrap());
        if self.map_fails {
            return Err(-12);
        }
        let id = self.next_mapping.fetch_add(1, SeqCst);
        let mut table = self.table.lock().unwrap();
        // Inserted after the lock; into a freed table it is a stray mapping.
        if !table.freed {
            table.mappings.push(id);
        }
        Ok(Mapping { id })
    }

    fn dma_unmap(&self, _table: Table, mapping: Mapping) {
        let mut table = self.table.lock().unwrap();
        assert!(!table.freed, "dma_unmap_pages of a table the driver freed");
        let at = table.mappings.iter().position(|&m| m == mapping.id);
        let at = at.expect("dma_unmap_pages of a mapping the table does not have");
        table.mappings.remove(at);
    }

    fn put(&self, _kind: PinKind, va: u64, _table: Table) -> i32 {
        assert_eq!(va, VA);
        let _api = self.api.lock().unwrap();
        let mut table = self.table.lock().unwrap();
        table.puts += 1;
        assert_eq!(table.puts, 1, "a pin put twice");
        // After a callback: RM no longer knows the table and returns 0.
        self.callback_armed.store(false, SeqCst);
        table.freed = true;
        table.mappings.clear();
        0
    }
}

// ---- The RDMA core ------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Generation {
    Modern,
    Mid,
    Legacy,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Umem {
    New,
    Mapped,
    Invalidated,
    Unmapped,
    Released,
}

/// What the core knows of the umem.
struct UmemState {
    state: Umem,
    /// The HCA activated the invalidation notifier.
    active: bool,
    /// Legacy: an invalidation came before activation.
    latched: bool,
}

impl UmemState {
    fn new() -> Self {
        Self {
            state: Umem::New,
            active: false,
            latched: false,
        }
    }
}

struct Core {
    generation: Generation,
    /// The umem's `mapping_lock`, and its state (modern, mid).
    mapping_lock: Mutex<UmemState>,
    /// Legacy: the per-client mutex, and the umem's state.
    client_lock: Mutex<UmemState>,
    /// From activation until the HCA stops using the pages.
    nic_may_use: AtomicBool,
    /// The client context, until release.
    ctx: Mutex<Option<Arc<Pin>>>,
    releases: AtomicUsize,
    /// The client declined the range (its pin was revoked in acquire).
    declined: AtomicBool,
}

impl Core {
    fn new(generation: Generation) -> Self {
        Self {
            generation,
            mapping_lock: Mutex::new(UmemState::new()),
            client_lock: Mutex::new(UmemState::new()),
            nic_may_use: AtomicBool::new(false),
            ctx: Mutex::new(None),
            releases: AtomicUsize::new(0),
            declined: AtomicBool::new(false),
        }
    }

    fn ctx(&self) -> Arc<Pin> {
        self.ctx.lock().unwrap().clone().expect("a call after release")
    }

    /// The core's invalidation, called by the client's free callback.
    fn invalidate(&self) {
        match self.generation {
            Generation::Modern => {
                let mut umem = self.mapping_lock.lock().unwrap();
                if umem.state == Umem::Mapped && umem.active {
                    // The HCA revokes the mkey; the client unmaps itself.
                    self.nic_may_use.store(false, SeqCst);
                    umem.state = Umem::Invalidated;
                }
            }
            Generation::Mid => {
                let mut umem = self.mapping_lock.lock().unwrap();
                if umem.state == Umem::Mapped && umem.active {
                    self.nic_may_use.store(false, SeqCst);
                    let ctx = self.ctx();
                    dma_unmap(&ctx);
                    put_pages(&ctx);
                    umem.state = Umem::Unmapped;
                }
            }
            Generation::Legacy => {
                // The whole deregistration, under the client's mutex.
                let mut umem = self.client_lock.lock().unwrap();
                if !umem.active {
                    umem.latched = true;
                    return;
                }
                umem.active = false;
                umem.state = Umem::Released;
                self.nic_may_use.store(false, SeqCst);
                let ctx = self.ctx();
                dma_unmap(&ctx);
                put_pages(&ctx);
                self.release();
            }
        }
    }

    fn release(&self) {
        let ctx = self.ctx.lock().unwrap().take().expect("released twice");
        release(ctx);
        self.releases.fetch_add(1, SeqCst);
    }

    /// ib_umem_get: ownership (acquire pins), then get_pages ... activation.
    fn register(core: &Arc<Self>, gpu: &Arc<Gpu>, kind: PinKind) -> bool {
        let Some(pin) = acquire(gpu, kind) else {
            core.declined.store(true, SeqCst);
            return false;
        };
        *core.ctx.lock().unwrap() = Some(pin.clone());
        let mut umem = core.mapping_lock.lock().unwrap();
        let ok = get_pages(&pin, core).is_ok() && {
            if dma_map(&pin) {
                true
            } else {
                // MOFED's unwinding: put_pages without dma_unmap.
                put_pages(&pin);
                false
            }
        };
        // The HCA's work (mkey, UMR), then activation.
        let activated = ok && core.activate(&mut umem);
        if ok && !activated {
            // A legacy core refuses a registration invalidated before activation.
            dma_unmap(&pin);
            put_pages(&pin);
        }
        drop(umem);
        drop(pin);
        if !activated {
            core.release();
        }
        activated
    }

    /// Arms the invalidation notifier; legacy: fails if one came in already.
    fn activate(&self, umem: &mut UmemState) -> bool {
        let mut legacy = (self.generation == Generation::Legacy)
            .then(|| self.client_lock.lock().unwrap());
        let umem = legacy.as_deref_mut().unwrap_or(umem);
        if umem.latched {
            return false;
        }
        umem.state = Umem::Mapped;
        umem.active = true;
        self.nic_may_use.store(true, SeqCst);
        true
    }

    /// ib_dereg_mr: the HCA stops using the MR (UMR revoke, or the mkey
    /// destroyed), then ib_umem_release as each generation does it.
    fn deregister(&self) {
        self.nic_may_use.store(false, SeqCst);
        match self.generation {
            Generation::Modern => {
                let mut umem = self.mapping_lock.lock().unwrap();
                let unmap = umem.state == Umem::Mapped;
                umem.active = false;
                if unmap {
                    self.nic_may_use.store(false, SeqCst);
                    umem.state = Umem::Unmapped;
                }
                drop(umem);
                if unmap {
                    let ctx = self.ctx();
                    dma_unmap(&ctx);
                    put_pages(&ctx);
                }
                self.release();
            }
            Generation::Mid => {
                let mut umem = self.mapping_lock.lock().unwrap();
                umem.active = false;
                if umem.state == Umem::Mapped {
                    self.nic_may_use.store(false, SeqCst);
                    let ctx = self.ctx();
                    // Under mapping_lock: bug 2696789's ordering.
                    dma_unmap(&ctx);
                    put_pages(&ctx);
                    umem.state = Umem::Unmapped;
                }
                drop(umem);
                self.release();
            }
            Generation::Legacy => {
                let mut umem = self.client_lock.lock().unwrap();
                let mapped = umem.active;
                umem.active = false;
                drop(umem);
                // Otherwise the invalidation did everything, release included.
                if mapped {
                    self.nic_may_use.store(false, SeqCst);
                    let ctx = self.ctx();
                    dma_unmap(&ctx);
                    put_pages(&ctx);
                    self.release();
                }
            }
        }
    }
}

// ---- The client (mirrors src/client.rs over the shared protocol) ---------------

struct Reg {
    phase: Phase,
    /// The core, from get_pages on (its release breaks the cycle).
    core: Option<Arc<Core>>,
    forwarder: Option<thread::ThreadId>,
}

impl Reg {
    fn apply(&mut self, event: Event) -> Result<Action, ()> {
        let (next, action) = step(self.phase, event).map_err(|_| ())?;
        self.phase = next;
        Ok(action)
    }
}

impl PinOwner for Reg {
    type Followup = Option<Arc<Core>>;

    fn pinned(&mut self, _len: u64) {}

    fn revoking(&mut self) -> Self::Followup {
        match self.apply(Event::CallbackBegin) {
            Ok(Action::ForwardInvalidation) => {
                self.forwarder = Some(thread::current().id());
                self.core.clone()
            }
            _ => None,
        }
    }

    fn revoked(followup: Self::Followup) {
        if let Some(core) = followup {
            core.invalidate();
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

struct LoomThreads;

impl Threads for LoomThreads {
    type Id = thread::ThreadId;

    fn current() -> Self::Id {
        thread::current().id()
    }

    fn pause() {
        thread::yield_now();
    }
}

impl Forwarding<LoomThreads> for Reg {
    fn forwarder(&self) -> Option<thread::ThreadId> {
        self.forwarder
    }
}

struct Pin {
    gpu: Arc<Gpu>,
    kind: PinKind,
    state: Mutex<PinState<Gpu, Reg>>,
    unmap_done: Condvar,
}

impl PinLock for Pin {
    type Driver = Gpu;
    type Owner = Reg;
    type Guard<'a> = MutexGuard<'a, PinState<Gpu, Reg>>;

    fn lock(&self) -> Self::Guard<'_> {
        self.state.lock().unwrap()
    }

    fn wait_unmap<'a>(&'a self, guard: Self::Guard<'a>) -> Self::Guard<'a> {
        self.unmap_done.wait(guard).unwrap()
    }

    fn notify_unmap(&self) {
        self.unmap_done.notify_all();
    }

    fn driver(&self) -> &Gpu {
        &self.gpu
    }

    fn kind(&self) -> PinKind {
        self.kind
    }

    fn va(&self) -> u64 {
        VA
    }
}

/// Claims the range by pinning it; `None` if a free revoked it at once.
fn acquire(gpu: &Arc<Gpu>, kind: PinKind) -> Option<Arc<Pin>> {
    let pin = Arc::new(Pin {
        gpu: gpu.clone(),
        kind,
        state: Mutex::new(PinState::new(Reg {
            phase: Phase::Pinned,
            core: None,
            forwarder: None,
        })),
        unmap_done: Condvar::new(),
    });
    let table = gpu.pin(&pin);
    let accepted = protocol::accept_pages(&*pin, table).is_some();
    accepted.then_some(pin)
}

fn get_pages(pin: &Pin, core: &Arc<Core>) -> Result<(), ()> {
    let mut st = pin.lock();
    st.owner.apply(Event::GetPages)?;
    st.owner.core = Some(core.clone());
    Ok(())
}

/// The client's dma_map; true if the core got a mapping.
fn dma_map(pin: &Pin) -> bool {
    let begin = |owner: &mut Reg| owner.apply(Event::MapBegin).map(|_| ());
    let Ok((mut st, outcome)) = protocol::map(pin, &(), begin, |_| Ok(())) else {
        return false;
    };
    match outcome {
        Err(MapFailure::Revoked | MapFailure::Driver(_) | MapFailure::State) => {
            let _ = st.owner.apply(Event::MapEnd { ok: false });
            false
        }
        Ok(()) => {
            // The SG list is built from the driver's addresses, lock held.
            assert!(st.mapping().is_some());
            pin.gpu.read();
            st.owner.apply(Event::MapEnd { ok: true }).is_ok()
        }
    }
}

fn dma_unmap(pin: &Pin) {
    let _ = pin.lock().owner.apply(Event::Unmap);
}

fn put_pages(pin: &Pin) {
    let st = pin.lock();
    end_of_use(pin, st, Event::PutPages);
}

fn release(ctx: Arc<Pin>) {
    let mut st = protocol::lock_after_forward::<LoomThreads, Pin>(&*ctx);
    let parked = st.take_parked_teardown();
    end_of_use(&ctx, st, Event::Release);
    if let Some(teardown) = parked {
        finish(&ctx, teardown.run(&*ctx));
    }
}

fn end_of_use(pin: &Pin, mut st: MutexGuard<'_, PinState<Gpu, Reg>>, event: Event) {
    let Ok(Action::Teardown) = st.owner.apply(event) else {
        return;
    };
    if pin.kind == PinKind::Revocable && event == Event::PutPages {
        st.park_teardown();
        return;
    }
    let teardown = st.take_teardown();
    drop(st);
    finish(pin, teardown.run(pin));
}

fn finish(pin: &Pin, unpinned: protocol::Unpinned) {
    assert_ne!(unpinned.put, Some(-1));
    if unpinned.drop_reference {
        pin.gpu.drop_driver_ref();
    }
}

/// The driver's free callback, as the module's `free_callback` runs it.
fn free_callback(pin: &Pin) {
    if protocol::free_callback(pin) {
        pin.gpu.drop_driver_ref();
    }
}

// ---- The models -------------------------------------------------------------

/// Executions explored by the models of this process (printed per test).
static EXECUTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A registration, its deregistration, and a cudaFree from another thread.
fn race(generation: Generation, kind: PinKind, map_fails: bool) {
    let before = EXECUTIONS.load(std::sync::atomic::Ordering::Relaxed);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(MODEL_PREEMPTIONS);
    builder.check(move || {
        let gpu = Arc::new(Gpu::new(map_fails));
        let core = Arc::new(Core::new(generation));
        // The pin exists before the free thread starts: acquire runs first.
        let registering = {
            let (gpu, core) = (gpu.clone(), core.clone());
            thread::spawn(move || {
                if Core::register(&core, &gpu, kind) {
                    core.deregister();
                }
            })
        };
        let freeing = {
            let (gpu, core) = (gpu.clone(), core.clone());
            thread::spawn(move || gpu.free(&core.nic_may_use))
        };
        registering.join().unwrap();
        freeing.join().unwrap();
        let table = gpu.table.lock().unwrap();
        assert!(table.puts <= 1);
        assert!(table.freed, "the pin is still held");
        assert!(table.mappings.is_empty(), "a mapping is still held");
        assert!(gpu.driver_ref.lock().unwrap().is_none(), "the driver's reference leaked");
        let contexts = usize::from(!core.declined.load(SeqCst));
        assert_eq!(core.releases.load(SeqCst), contexts, "release not called once");
        EXECUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(!core.nic_may_use.load(SeqCst));
        assert!(core.ctx.lock().unwrap().is_none());
    });
    let explored = EXECUTIONS.load(std::sync::atomic::Ordering::Relaxed) - before;
    println!("{generation:?} {kind:?} map_fails={map_fails}: {explored} executions");
}

#[test]
fn modern_revocable_registration_races_a_free() {
    race(Generation::Modern, PinKind::Revocable, false);
}

#[test]
fn mid_revocable_registration_races_a_free() {
    race(Generation::Mid, PinKind::Revocable, false);
}

#[test]
fn legacy_revocable_registration_races_a_free() {
    race(Generation::Legacy, PinKind::Revocable, false);
}

#[test]
fn modern_revocable_failed_map_races_a_free() {
    race(Generation::Modern, PinKind::Revocable, true);
}

#[test]
fn legacy_revocable_failed_map_races_a_free() {
    race(Generation::Legacy, PinKind::Revocable, true);
}

#[test]
fn modern_persistent_registration_ignores_a_free() {
    race(Generation::Modern, PinKind::Persistent, false);
}

#[test]
fn mid_persistent_registration_ignores_a_free() {
    race(Generation::Mid, PinKind::Persistent, false);
}
