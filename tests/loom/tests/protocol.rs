// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Every interleaving of a registration, a deregistration and a `cudaFree`,
//! explored with loom over the module's own client code
//! (`peermem_core::client`, `protocol` and `state`: what `src/clients.rs`
//! and `src/nvidia_p2p.rs` run), against models of the two foreign parties
//! written from NVIDIA's open kernel modules 595.45.04 (`nv-p2p.c`, RM's
//! `rm_p2p_*`) and MOFED's `drivers/infiniband/core/peer_mem.c` (OFED
//! 25.10; 5.1-5.4-2 and <= 5.0 for the older cores), each rule with its
//! source in tests/sim/README.md:
//! - the driver: one API lock taken by pin, map (in its middle: the table is
//!   read before it and written after) and unpin, and held across the free
//!   callback; the table and its mappings freed when the callback returns;
//!   unmap under the table's own lock only; a freed buffer refuses new pins
//!   and keeps persistent pins until they are put;
//! - the RDMA core in each generation: modern (`mapping_lock` held from
//!   before `get_pages` until the HCA activates the registration;
//!   INVALIDATE_UNMAPS), mid (5.1-5.4-2: unmap and unpin under
//!   `mapping_lock`, in the invalidation and in the deregistration) and
//!   legacy (<= 5.0: the invalidation unmaps, unpins and releases inside the
//!   callback, under the client's mutex); `release` followed by the clearing
//!   of the umem's client pointer (`peer_mem.c` `ib_peer_umem_release`),
//!   which an invalidation still waiting for `mapping_lock` dereferences.
//!
//! The module's FFI edges run the shared code too: `acquire`
//! (`client::acquire`: the module reference, the registration, the pin
//! with `protocol::pin`, which drops the driver's reference again if the
//! driver refuses and unpins a table that fails the check), the free
//! callback (`protocol::free_callback`), the finished unpin
//! (`protocol::finish_unpin`) and the module's exit
//! (`protocol::wait_for_callbacks`). What stays here is what the FFI calls
//! themselves do: the driver's pin with its callback's data, the drop of
//! the callback's reference after `free_callback` returns, the taking of
//! the API lock at exit.
//!
//! Each execution asserts: no deadlock (loom fails on one), no use of a
//! freed table or mapping, no invalidation dropped while the NIC may use
//! the pages, every pin put exactly once (a late put after the callback at
//! most once), the driver's reference to the pin dropped exactly once,
//! `release` called once, no module text freed while a callback runs in it,
//! and no call refused as out of order (no modelled core calls out of
//! order; the driver calls back after the unpin only when that unpin
//! failed).
//!
//! Bound: loom's preemption bound is 4 (`MODEL_PREEMPTIONS`): every
//! schedule of the two threads with at most four forced switches between
//! them (blocking on a lock is free). Each known window (a callback between
//! a check and a driver call; during a map, an unmap or an unpin; a forward
//! waiting for activation; a legacy core's teardown inside the callback)
//! is reached with one switch into the free and at most one back; four
//! leave room for the free to land at any step of the registration and of
//! the deregistration. Each model prints its own execution count. The
//! placed bugs of tests/loom/README.md
//! are found within that bound.

use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use loom::thread;

use peermem_core::client::{self, BuildError, Env, Invalidator, MapError, Note, Registration};
use peermem_core::protocol::{self, Driver, PinKind, PinLock, PinState, Threads};
use peermem_core::state::{Event, Phase};

const MODEL_PREEMPTIONS: usize = 4;
const VA: u64 = 0x7f40_0000_0000;

/// How the driver answers a put.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Put {
    /// Unpins; after a callback, finds nothing and returns 0 (535+).
    Ok,
    /// Older drivers: after a callback, returns an error.
    ErrorAfterCallback,
    /// The put of a live pin fails and leaves it pinned (callback armed).
    Fails,
}

/// One model: who races whom, and how the foreign parties behave.
#[derive(Clone, Copy, Debug)]
struct Model {
    generation: Generation,
    kind: PinKind,
    /// The driver's map fails.
    map_fails: bool,
    /// The driver's mapping fails the client's check (undone by an unmap).
    check_fails: bool,
    /// The scatterlist cannot be built (the mapping undone by an unmap).
    sg_fails: bool,
    /// The scatterlist needs memory set aside without the pin's lock, whose
    /// allocation may reclaim, and reclaim may enter the driver (its API
    /// lock).
    sg_needs_memory: bool,
    put: Put,
    /// The HCA fails before activation: the core stops the notifier
    /// without activating and deregisters at once.
    activation_fails: bool,
    /// A second registration, of another buffer, on the registering thread
    /// too: two pins share the one API lock.
    second_pin: bool,
    /// The registering thread then unloads the module once no reference
    /// holds it (rmmod after the last deregistration).
    unload: bool,
    /// The module loads during the registration: MOFED's core lists the
    /// client before `ib_register_peer_memory_client` returns its handle.
    load_window: bool,
    /// The page table fails the client's check: `acquire` unpins it again.
    table_check_fails: bool,
    /// The driver refuses persistent pins (MIG, vGPU): the core asks the
    /// next client, the revocable `nv_mem_fallback`.
    no_persistent_api: bool,
    /// The core releases the registration still mapped, without `dma_unmap`
    /// or `put_pages` (the state machine's Release from Mapped, which no
    /// MOFED generation takes).
    release_mapped: bool,
}

impl Model {
    fn new(generation: Generation, kind: PinKind) -> Self {
        Self {
            generation,
            kind,
            map_fails: false,
            check_fails: false,
            sg_fails: false,
            sg_needs_memory: false,
            put: Put::Ok,
            activation_fails: false,
            second_pin: false,
            unload: false,
            load_window: false,
            table_check_fails: false,
            no_persistent_api: false,
            release_mapped: false,
        }
    }
}

// ---- The module's text and its reference count ------------------------------

/// What keeps the module loaded, and who runs in its text.
#[derive(Default)]
struct Module {
    /// `try_module_get` references (one per live registration).
    refs: AtomicUsize,
    /// Threads inside a callback of the module, from the driver's view:
    /// from the call until the driver's free path goes on (it holds the API
    /// lock until then).
    in_text: AtomicUsize,
    /// A callback dropped the driver's reference to its pin (`nvidia_p2p.rs`
    /// `CALLBACK_DROPPED_REFERENCE`): the exit must wait for the callbacks.
    callback_dropped: AtomicBool,
    unloaded: AtomicBool,
}

/// A reference on the module (`peer_mem.rs` `ModuleRef`).
struct ModuleRef(Arc<Module>);

impl ModuleRef {
    fn get(module: &Arc<Module>) -> Option<Self> {
        if module.unloaded.load(SeqCst) {
            return None;
        }
        module.refs.fetch_add(1, SeqCst);
        Some(Self(module.clone()))
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        self.0.refs.fetch_sub(1, SeqCst);
    }
}

// ---- The driver -----------------------------------------------------------

/// What the driver knows of one table.
#[derive(Default)]
struct TableState {
    /// Pinned once (a table of a buffer never pinned is nothing).
    pinned: bool,
    /// Freed by the free path (after the callback) or by the put.
    freed: bool,
    /// Successful puts of it (a late put after the callback counts too).
    puts: usize,
    /// Live mappings, by id.
    mappings: Vec<usize>,
    /// The free callback is registered (revocable pin, not put yet).
    callback_armed: bool,
    persistent: bool,
    /// A put of the live pin already failed once (`Put::Fails`).
    put_failed: bool,
    /// The pin was revoked by a callback (later puts find nothing).
    revoked: bool,
    /// The reference to the pin the driver got with the callback: the
    /// callback's data. Dropped by the callback or the unpin, never twice.
    driver_ref: Option<Arc<Pin>>,
    /// The reference handed with a revocable pin the driver refused: the
    /// client's again, to drop.
    refused_ref: Option<Arc<Pin>>,
    /// Whether the NIC of the registration holding the pin may use the
    /// pages (the core's view): never while the driver unmaps or unpins.
    nic_may_use: Option<Arc<AtomicBool>>,
}

impl TableState {
    /// The driver unmaps or unpins: the NIC must have stopped using the pages.
    fn nic_stopped(&self, what: &str) {
        let busy = self.nic_may_use.as_ref().is_some_and(|n| n.load(SeqCst));
        assert!(!busy, "{what} while the NIC may still use the pages");
    }
}

struct Gpu {
    /// RM's API lock.
    api: Mutex<()>,
    /// A client-wide lock. The module has none; placed bugs take it
    /// (tests/loom/placed-bugs.py).
    #[allow(dead_code)]
    client_lock: Mutex<()>,
    /// The tables (each under its own lock in the driver, the table's
    /// `dma_mapping_list.lock`); index = table id. Table `i` is of buffer `i`.
    tables: Mutex<Vec<TableState>>,
    /// Buffers freed by cudaFree (by id).
    buffers_freed: Mutex<Vec<usize>>,
    next_mapping: AtomicUsize,
    model: Model,
    module: Arc<Module>,
}

#[derive(Clone, Copy)]
struct Table(usize);

struct Mapping {
    id: usize,
}

impl Gpu {
    fn new(model: Model, module: Arc<Module>) -> Self {
        Self {
            api: Mutex::new(()),
            client_lock: Mutex::new(()),
            tables: Mutex::new(Vec::new()),
            buffers_freed: Mutex::new(Vec::new()),
            next_mapping: AtomicUsize::new(1),
            model,
            module,
        }
    }

    /// get_pages (with `data`, a reference to the pin, as the callback's
    /// data) / get_pages_persistent (`data` is `None`) of buffer `buffer`;
    /// refused once the buffer is freed, and persistent pins refused by a
    /// driver without the persistent API (`-ENOTSUPP`).
    fn pin(
        &self,
        data: Option<Arc<Pin>>,
        buffer: usize,
        nic: &Arc<AtomicBool>,
    ) -> Result<Option<Table>, i32> {
        let _api = self.api.lock().unwrap();
        let mut tables = self.tables.lock().unwrap();
        while tables.len() <= buffer {
            tables.push(TableState::default());
        }
        let t = &mut tables[buffer];
        if data.is_none() && self.model.no_persistent_api {
            return Err(-524);
        }
        if self.buffers_freed.lock().unwrap().contains(&buffer) {
            // The driver forgets `data`: the reference is the client's.
            t.refused_ref = data;
            return Err(-22);
        }
        t.pinned = true;
        t.nic_may_use = Some(nic.clone());
        t.persistent = data.is_none();
        if data.is_some() {
            t.driver_ref = data;
            t.callback_armed = true;
        }
        Ok(Some(Table(buffer)))
    }

    /// The reference the pin handed the driver is dropped: the one the
    /// driver holds, or the one it refused.
    fn drop_driver_ref(&self, table: usize) {
        let mut tables = self.tables.lock().unwrap();
        let t = &mut tables[table];
        let reference = t.driver_ref.take().or_else(|| t.refused_ref.take());
        assert!(
            reference.is_some(),
            "the driver's reference to the pin dropped twice"
        );
    }

    /// Whether a put of a live pin failed (the driver may call back after it).
    fn put_failed(&self) -> bool {
        self.tables.lock().unwrap().iter().any(|t| t.put_failed)
    }

    /// A read of the table or a mapping's addresses by the client.
    fn read(&self, table: usize) {
        let freed = self.tables.lock().unwrap()[table].freed;
        assert!(!freed, "the client read a freed table");
    }

    /// cudaFree of `buffer`: under the API lock, each revocable pin's
    /// callback with its data, then its table is freed; persistent pins keep
    /// the memory until they are put.
    fn free(&self, buffer: usize, nic_may_use: &AtomicBool) {
        let _api = self.api.lock().unwrap();
        self.buffers_freed.lock().unwrap().push(buffer);
        let data = {
            let mut tables = self.tables.lock().unwrap();
            let Some(t) = tables.get_mut(buffer) else {
                return;
            };
            if !std::mem::take(&mut t.callback_armed) {
                return;
            }
            t.driver_ref.clone()
        };
        let pin = data.expect("a callback without its data");
        self.module.in_text.fetch_add(1, SeqCst);
        free_callback(&pin);
        drop(pin);
        assert!(
            !nic_may_use.load(SeqCst),
            "the callback returned while the NIC may still use the pages: invalidation dropped"
        );
        let mut tables = self.tables.lock().unwrap();
        let t = &mut tables[buffer];
        t.freed = true;
        t.revoked = true;
        t.mappings.clear();
        drop(tables);
        // The driver goes on past the callback's return (the callback's
        // last instructions ran in the module's text until here), then
        // drops the API lock.
        self.module.in_text.fetch_sub(1, SeqCst);
    }

    /// Whether the driver took back every table and mapping.
    fn all_given_back(&self) -> bool {
        let tables = self.tables.lock().unwrap();
        tables.iter().all(|t| {
            t.refused_ref.is_none()
                && (!t.pinned || (t.freed && t.mappings.is_empty() && t.driver_ref.is_none()))
        })
    }
}

impl Driver for Gpu {
    type Table = Table;
    type Mapping = Mapping;
    type Peer = ();
    type Error = i32;

    fn dma_map(&self, _peer: &(), table: Table) -> Result<Mapping, i32> {
        // Read before the API lock: a table freed by now is the driver's race.
        let _ = self.tables.lock().unwrap()[table.0].freed;
        drop(self.api.lock().unwrap());
        if self.model.map_fails {
            return Err(-12);
        }
        let id = self.next_mapping.fetch_add(1, SeqCst);
        let mut tables = self.tables.lock().unwrap();
        // Inserted after the lock; into a freed table it is a stray mapping.
        let t = &mut tables[table.0];
        if !t.freed {
            t.mappings.push(id);
        }
        Ok(Mapping { id })
    }

    fn dma_unmap(&self, table: Table, mapping: Mapping) {
        let mut tables = self.tables.lock().unwrap();
        let t = &mut tables[table.0];
        assert!(!t.freed, "dma_unmap_pages of a table the driver freed");
        t.nic_stopped("dma_unmap_pages");
        let at = t.mappings.iter().position(|&m| m == mapping.id);
        let at = at.expect("dma_unmap_pages of a mapping the table does not have");
        t.mappings.remove(at);
    }

    fn put(&self, kind: PinKind, va: u64, table: Table) -> i32 {
        assert_eq!(va, VA);
        let _api = self.api.lock().unwrap();
        let mut tables = self.tables.lock().unwrap();
        let t = &mut tables[table.0];
        assert_eq!(t.persistent, kind == PinKind::Persistent);
        if t.revoked {
            // RM no longer knows the table.
            return match self.model.put {
                Put::ErrorAfterCallback => -22,
                Put::Ok | Put::Fails => 0,
            };
        }
        if self.model.put == Put::Fails && !t.put_failed {
            t.put_failed = true;
            return -5;
        }
        t.nic_stopped("put_pages");
        t.puts += 1;
        assert_eq!(t.puts, 1, "a pin put twice");
        t.callback_armed = false;
        t.freed = true;
        t.mappings.clear();
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

/// The client as the core lists it (`ib_register_peer_memory_client`).
#[derive(Default)]
struct ClientEntry {
    /// On the core's list: `acquire` may be called.
    listed: AtomicBool,
    /// The handle is stored in the module's slot (`peer_mem.rs`
    /// `InvalidatorSlot`): registration returned.
    handle_stored: AtomicBool,
}

/// One umem of the core (one registration).
struct Core {
    generation: Generation,
    /// The umem's `mapping_lock`, and its state (modern, mid).
    mapping_lock: Mutex<UmemState>,
    /// Legacy: the per-client mutex, and the umem's state.
    client_lock: Mutex<UmemState>,
    /// From activation until the HCA stops using the pages.
    nic_may_use: Arc<AtomicBool>,
    /// The client context, until release.
    ctx: Mutex<Option<Arc<Pin>>>,
    releases: AtomicUsize,
    /// The umem's id left the core's xarray: invalidations miss it.
    erased: AtomicBool,
    /// `ib_peer_umem_release` cleared the umem's client pointer after
    /// `release` returned.
    client_cleared: AtomicBool,
    /// The client declined the range.
    declined: AtomicBool,
    client: Arc<ClientEntry>,
}

impl Core {
    fn new(generation: Generation, client: Arc<ClientEntry>) -> Self {
        Self {
            generation,
            mapping_lock: Mutex::new(UmemState::new()),
            client_lock: Mutex::new(UmemState::new()),
            nic_may_use: Arc::new(AtomicBool::new(false)),
            ctx: Mutex::new(None),
            releases: AtomicUsize::new(0),
            erased: AtomicBool::new(false),
            client_cleared: AtomicBool::new(false),
            declined: AtomicBool::new(false),
            client,
        }
    }

    fn ctx(&self) -> Arc<Pin> {
        self.ctx
            .lock()
            .unwrap()
            .clone()
            .expect("a call after release")
    }

    /// The core's invalidation, called by the client's free callback.
    fn invalidate(&self) {
        match self.generation {
            Generation::Modern | Generation::Mid => {
                // xa_load: a released registration is not found.
                if self.erased.load(SeqCst) {
                    return;
                }
                let mut umem = self.mapping_lock.lock().unwrap();
                assert!(
                    !self.client_cleared.load(SeqCst),
                    "the core's invalidation read the umem's client after release cleared it (MOFED's NULL dereference): release did not wait for the forwarding thread"
                );
                if umem.state == Umem::Mapped && umem.active {
                    self.nic_may_use.store(false, SeqCst);
                    if self.generation == Generation::Mid {
                        let ctx = self.ctx();
                        pin_dma_unmap(&ctx);
                        pin_put_pages(&ctx);
                    }
                    // Modern (INVALIDATE_UNMAPS): the client unmaps itself.
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
                pin_dma_unmap(&ctx);
                pin_put_pages(&ctx);
                self.release();
            }
        }
    }

    /// `release`, then (modern, mid) the umem's client pointer cleared.
    fn release(&self) {
        self.erased.store(true, SeqCst);
        let ctx = self.ctx.lock().unwrap().take().expect("released twice");
        pin_release(ctx);
        self.releases.fetch_add(1, SeqCst);
        self.client_cleared.store(true, SeqCst);
    }

    /// ib_umem_get: ownership (acquire pins), then get_pages ... activation.
    /// Returns whether the registration is active (to be deregistered).
    fn register(core: &Arc<Self>, gpu: &Arc<Gpu>, kind: PinKind, buffer: usize) -> bool {
        if !core.client.listed.load(SeqCst) {
            // No client: the registration fails before any client call.
            core.declined.store(true, SeqCst);
            return false;
        }
        let acquired = acquire(gpu, kind, buffer, core).or_else(|| {
            // The core asks the next client: behind the persistent nv_mem,
            // the revocable nv_mem_fallback.
            let fallback = gpu.model.no_persistent_api && kind == PinKind::Persistent;
            fallback.then(|| acquire(gpu, PinKind::Revocable, buffer, core))?
        });
        let Some(pin) = acquired else {
            core.declined.store(true, SeqCst);
            return false;
        };
        *core.ctx.lock().unwrap() = Some(pin.clone());
        let mut umem = core.mapping_lock.lock().unwrap();
        let ok = pin_get_pages(&pin, core).is_ok() && {
            if pin_dma_map(&pin) {
                true
            } else {
                // MOFED's unwinding: put_pages without dma_unmap.
                pin_put_pages(&pin);
                false
            }
        };
        if ok && gpu.model.activation_fails && core.generation != Generation::Legacy {
            // mkey creation failed: ib_umem_stop_invalidation_notifier
            // without activation (still holding mapping_lock), then
            // ib_umem_release.
            umem.state = Umem::Mapped;
            drop(pin);
            core.stop(umem);
            core.release();
            return false;
        }
        // The HCA's work (mkey, UMR), then activation.
        let activated = ok && core.activate(&mut umem);
        if ok && !activated {
            // A legacy core refuses a registration invalidated before activation.
            pin_dma_unmap(&pin);
            pin_put_pages(&pin);
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
        let mut legacy =
            (self.generation == Generation::Legacy).then(|| self.client_lock.lock().unwrap());
        let umem = legacy.as_deref_mut().unwrap_or(umem);
        if umem.latched {
            return false;
        }
        umem.state = Umem::Mapped;
        umem.active = true;
        self.nic_may_use.store(true, SeqCst);
        true
    }

    /// ib_umem_stop_invalidation_notifier with `mapping_lock` held: the
    /// client unmapped and unpinned, after the lock (modern,
    /// INVALIDATE_UNMAPS) or under it (mid).
    fn stop(&self, mut umem: MutexGuard<'_, UmemState>) {
        umem.active = false;
        let mapped = umem.state == Umem::Mapped;
        umem.state = Umem::Unmapped;
        if self.generation == Generation::Mid && mapped {
            let ctx = self.ctx();
            // Under mapping_lock: bug 2696789's ordering.
            pin_dma_unmap(&ctx);
            pin_put_pages(&ctx);
        }
        drop(umem);
        if self.generation == Generation::Modern && mapped {
            let ctx = self.ctx();
            pin_dma_unmap(&ctx);
            pin_put_pages(&ctx);
        }
    }

    /// ib_dereg_mr: the HCA stops using the MR (UMR revoke, or the mkey
    /// destroyed), then ib_umem_release as each generation does it.
    fn deregister(&self, model: &Model) {
        self.nic_may_use.store(false, SeqCst);
        if model.release_mapped {
            self.release();
            return;
        }
        match self.generation {
            Generation::Modern | Generation::Mid => {
                self.stop(self.mapping_lock.lock().unwrap());
                self.release();
            }
            Generation::Legacy => {
                let mut umem = self.client_lock.lock().unwrap();
                let mapped = umem.active;
                umem.active = false;
                drop(umem);
                // Otherwise the invalidation did everything, release included.
                if mapped {
                    let ctx = self.ctx();
                    pin_dma_unmap(&ctx);
                    pin_put_pages(&ctx);
                    self.release();
                }
            }
        }
    }

    /// The end state of one umem.
    fn check_end(&self) {
        assert!(!self.nic_may_use.load(SeqCst));
        assert!(self.ctx.lock().unwrap().is_none(), "release not called");
        let contexts = usize::from(!self.declined.load(SeqCst));
        assert_eq!(
            self.releases.load(SeqCst),
            contexts,
            "release not called once"
        );
    }
}

/// The core's invalidation entry, as the module's slot reaches it.
#[derive(Clone)]
struct CoreRef(Arc<Core>);

impl Invalidator for CoreRef {
    type Handle = ();

    fn handle(&self) -> Option<()> {
        self.0.client.handle_stored.load(SeqCst).then_some(())
    }

    fn call(&self, _handle: (), _core_context: u64) -> bool {
        self.0.invalidate();
        true
    }
}

// ---- The module's glue: the platform of peermem_core::client ------------------

struct LoomEnv;

/// The scatterlist: built from the live mapping's addresses.
struct Sg;

impl Env for LoomEnv {
    type Threads = LoomThreads;
    type Invalidator = CoreRef;
    type Sg = Sg;
    type Keep = ModuleRef;

    fn note(note: Note) {
        if let Note::OutOfOrder(event, phase) = note {
            OUT_OF_ORDER.with(|o| o.borrow_mut().push((event, phase)));
        }
    }
}

thread_local! {
    /// The calls the client refused as out of order in this execution
    /// (loom runs a model's threads on the test's thread).
    static OUT_OF_ORDER: std::cell::RefCell<Vec<(Event, Phase)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Checks the calls refused as out of order in this execution: none, but
/// the driver's callback after an unpin that failed (the driver kept the
/// pin and its callback; the registration's teardown had ended).
fn check_out_of_order(gpu: &Gpu) {
    for (event, phase) in OUT_OF_ORDER.with(|o| std::mem::take(&mut *o.borrow_mut())) {
        let late_callback = event == Event::CallbackBegin && phase == Phase::Done;
        assert!(
            late_callback && gpu.put_failed(),
            "{event:?} refused as out of order in {phase:?}"
        );
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

struct Pin {
    gpu: Arc<Gpu>,
    kind: PinKind,
    table: usize,
    state: Mutex<PinState<Gpu, Registration<LoomEnv>>>,
    unmap_done: Condvar,
}

impl PinLock for Pin {
    type Driver = Gpu;
    type Owner = Registration<LoomEnv>;
    type Guard<'a> = MutexGuard<'a, PinState<Gpu, Registration<LoomEnv>>>;

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

    fn drop_driver_reference(&self) {
        self.gpu.drop_driver_ref(self.table);
    }

    fn put_failed(&self, _ret: i32) {}

    fn callback_dropped_reference(&self) {
        self.gpu.module.callback_dropped.store(true, SeqCst);
    }
}

/// `clients.rs` `acquire` with `nvidia_p2p.rs` `GpuPin::pin`: claims the
/// range by pinning it; `None` if declined or revoked at once.
fn acquire(gpu: &Arc<Gpu>, kind: PinKind, buffer: usize, core: &Arc<Core>) -> Option<Arc<Pin>> {
    let invalidator = (kind == PinKind::Revocable).then(|| CoreRef(core.clone()));
    let new_pin = |state| {
        Ok::<_, ()>(Arc::new(Pin {
            gpu: gpu.clone(),
            kind,
            table: buffer,
            state: Mutex::new(PinState::new(state)),
            unmap_done: Condvar::new(),
        }))
    };
    let pin_pages = |pin: &Arc<Pin>| {
        // `GpuPin::get_pages`: a revocable pin hands the driver a new
        // reference to itself, the callback's data.
        let get = || {
            let data = (kind == PinKind::Revocable).then(|| pin.clone());
            gpu.pin(data, buffer, &core.nic_may_use)
        };
        // `check_page_table`: reads the table (under the pin's lock).
        let check = |_: Table| {
            gpu.read(buffer);
            if gpu.model.table_check_fails {
                Err(())
            } else {
                Ok(())
            }
        };
        protocol::pin(&**pin, 1, get, check)
    };
    let keep = || ModuleRef::get(&gpu.module);
    let acquired = client::acquire::<LoomEnv, _, _, _, _>(invalidator, keep, new_pin, pin_pages);
    acquired.ok().map(|(pin, ())| pin)
}

fn pin_get_pages(pin: &Pin, core: &Arc<Core>) -> Result<(), ()> {
    client::get_pages(pin, core_context(core)).map_err(|_| ())
}

fn core_context(core: &Arc<Core>) -> u64 {
    Arc::as_ptr(core) as u64
}

/// The client's dma_map; true if the core got a mapping.
fn pin_dma_map(pin: &Pin) -> bool {
    let model = pin.gpu.model;
    let check = |_: &Mapping| if model.check_fails { Err(-22) } else { Ok(()) };
    let build = |_: &Mapping, reserved: &mut bool| {
        // The SG list is built from the driver's addresses, lock held.
        pin.gpu.read(pin.table);
        if model.sg_fails {
            Err(BuildError::Failed(-12))
        } else if model.sg_needs_memory && !*reserved {
            Err(BuildError::NeedMemory(-12))
        } else {
            Ok(Sg)
        }
    };
    // An allocation that reclaims: reclaim may enter the driver.
    let reserve = |reserved: &mut bool| {
        drop(pin.gpu.api.lock().unwrap());
        *reserved = true;
        Ok(())
    };
    let mapped: Result<(), MapError<i32, i32>> =
        client::dma_map(pin, &(), check, &mut false, build, reserve, |_| {});
    mapped.is_ok()
}

fn pin_dma_unmap(pin: &Pin) {
    let _ = client::dma_unmap(pin);
}

fn pin_put_pages(pin: &Pin) {
    client::put_pages(pin);
}

fn pin_release(ctx: Arc<Pin>) {
    client::release(&*ctx);
}

/// `nvidia_p2p.rs` `free_callback`: `protocol::free_callback`, then the
/// callback's reference (its `Arc::from_raw`) dropped if it owns it.
fn free_callback(pin: &Pin) {
    if protocol::free_callback(pin) {
        pin.gpu.drop_driver_ref(pin.table);
    }
}

/// `nvidia_peermem.rs`'s exit once no reference holds the module (rmmod's
/// `try_stop_module`): the clients are unregistered (every release
/// returned), then `protocol::wait_for_callbacks` (`nvidia_p2p.rs`
/// `wait_for_callbacks`: the driver's API lock taken once if a callback
/// dropped a pin's reference), then the text is freed.
fn unload(gpu: &Gpu) {
    if gpu.module.refs.load(SeqCst) != 0 {
        return;
    }
    gpu.module.unloaded.store(true, SeqCst);
    let barrier = || {
        drop(gpu.api.lock().unwrap());
        Ok(())
    };
    let dropped = gpu.module.callback_dropped.load(SeqCst);
    protocol::wait_for_callbacks(dropped, barrier, thread::yield_now);
    assert_eq!(
        gpu.module.in_text.load(SeqCst),
        0,
        "the module was unloaded while a free callback ran in its text"
    );
}

// ---- The models -------------------------------------------------------------

/// A registration, its deregistration, and a cudaFree from another thread,
/// as `model` says.
fn race(name: &str, model: Model) {
    let executions = std::sync::Arc::new(StdAtomicUsize::new(0));
    let counted = executions.clone();
    let start = Instant::now();
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(MODEL_PREEMPTIONS);
    let explored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder.check(move || {
            OUT_OF_ORDER.with(|o| o.borrow_mut().clear());
            let module = Arc::new(Module::default());
            let gpu = Arc::new(Gpu::new(model, module.clone()));
            let client = Arc::new(ClientEntry::default());
            if !model.load_window {
                client.listed.store(true, SeqCst);
                client.handle_stored.store(true, SeqCst);
            }
            let core = Arc::new(Core::new(model.generation, client.clone()));
            let second = Arc::new(Core::new(model.generation, client.clone()));
            let registering = {
                let (gpu, core, second) = (gpu.clone(), core.clone(), second.clone());
                thread::spawn(move || {
                    let active = Core::register(&core, &gpu, model.kind, 0);
                    // The second registration while the first one's pin is
                    // armed: its driver calls meet the first one's callback.
                    if model.second_pin && Core::register(&second, &gpu, model.kind, 1) {
                        second.deregister(&model);
                    }
                    if active {
                        if model.load_window {
                            // The free lands while the registration is active.
                            gpu.free(0, &core.nic_may_use);
                        }
                        core.deregister(&model);
                    }
                    if model.unload {
                        unload(&gpu);
                    }
                })
            };
            let freeing = {
                let (gpu, core, client) = (gpu.clone(), core.clone(), client.clone());
                thread::spawn(move || {
                    if model.load_window {
                        // The module's init: the core lists the client, then
                        // ib_register_peer_memory_client returns its handle.
                        client.listed.store(true, SeqCst);
                        client.handle_stored.store(true, SeqCst);
                    } else {
                        gpu.free(0, &core.nic_may_use);
                    }
                })
            };
            registering.join().unwrap();
            freeing.join().unwrap();
            if model.load_window {
                gpu.free(0, &core.nic_may_use);
            }
            if model.second_pin {
                gpu.free(1, &second.nic_may_use);
                second.check_end();
            }
            // Pins not revoked were put; persistent pins of freed buffers too.
            assert!(
                gpu.all_given_back(),
                "a pin, a mapping or the driver's reference is still held"
            );
            core.check_end();
            assert_eq!(module.refs.load(SeqCst), 0, "a module reference leaked");
            check_out_of_order(&gpu);
            counted.fetch_add(1, Relaxed);
        });
    }));
    let verdict = if explored.is_ok() { "" } else { " (failed)" };
    println!(
        "{name}: {} executions, {:.2} s{verdict}",
        executions.load(Relaxed),
        start.elapsed().as_secs_f64()
    );
    if let Err(panic) = explored {
        std::panic::resume_unwind(panic);
    }
}

use Generation::{Legacy, Mid, Modern};
use PinKind::{Persistent, Revocable};

#[test]
fn modern_revocable_registration_races_a_free() {
    race("modern revocable", Model::new(Modern, Revocable));
}

#[test]
fn mid_revocable_registration_races_a_free() {
    race("mid revocable", Model::new(Mid, Revocable));
}

#[test]
fn legacy_revocable_registration_races_a_free() {
    race("legacy revocable", Model::new(Legacy, Revocable));
}

#[test]
fn modern_revocable_failed_map_races_a_free() {
    let model = Model {
        map_fails: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, map fails", model);
}

#[test]
fn legacy_revocable_failed_map_races_a_free() {
    let model = Model {
        map_fails: true,
        ..Model::new(Legacy, Revocable)
    };
    race("legacy revocable, map fails", model);
}

#[test]
fn modern_revocable_failed_check_unmaps_while_a_free_races() {
    let model = Model {
        check_fails: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, mapping fails the check", model);
}

#[test]
fn modern_revocable_failed_scatterlist_unmaps_while_a_free_races() {
    let model = Model {
        sg_fails: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, scatterlist fails", model);
}

#[test]
fn modern_revocable_scatterlist_reserves_memory_while_a_free_races() {
    let model = Model {
        sg_needs_memory: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, scatterlist reserves memory", model);
}

#[test]
fn mid_revocable_failed_put_races_a_free() {
    let model = Model {
        put: Put::Fails,
        ..Model::new(Mid, Revocable)
    };
    race("mid revocable, a put fails", model);
}

#[test]
fn modern_revocable_old_driver_put_error_after_callback() {
    let model = Model {
        put: Put::ErrorAfterCallback,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, older driver's put", model);
}

#[test]
fn modern_revocable_activation_fails_while_a_free_races() {
    let model = Model {
        activation_fails: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, activation fails", model);
}

#[test]
fn mid_revocable_activation_fails_while_a_free_races() {
    let model = Model {
        activation_fails: true,
        ..Model::new(Mid, Revocable)
    };
    race("mid revocable, activation fails", model);
}

#[test]
fn modern_revocable_two_pins_share_the_api_lock() {
    let model = Model {
        second_pin: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, two pins", model);
}

#[test]
fn modern_revocable_unload_races_the_callback() {
    let model = Model {
        unload: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, rmmod after the free", model);
}

#[test]
fn modern_revocable_registration_in_the_load_window() {
    let model = Model {
        load_window: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, load window", model);
}

#[test]
fn modern_persistent_registration_survives_a_free() {
    race("modern persistent", Model::new(Modern, Persistent));
}

#[test]
fn mid_persistent_registration_survives_a_free() {
    race("mid persistent", Model::new(Mid, Persistent));
}

#[test]
fn modern_revocable_bad_page_table_is_unpinned_while_a_free_races() {
    let model = Model {
        table_check_fails: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, page table fails the check", model);
}

#[test]
fn modern_persistent_bad_page_table_is_unpinned_while_a_free_races() {
    let model = Model {
        table_check_fails: true,
        ..Model::new(Modern, Persistent)
    };
    race("modern persistent, page table fails the check", model);
}

#[test]
fn modern_persistent_without_the_api_falls_back_while_a_free_races() {
    let model = Model {
        no_persistent_api: true,
        ..Model::new(Modern, Persistent)
    };
    race("modern persistent, no persistent API", model);
}

#[test]
fn mid_persistent_without_the_api_falls_back_while_a_free_races() {
    let model = Model {
        no_persistent_api: true,
        ..Model::new(Mid, Persistent)
    };
    race("mid persistent, no persistent API", model);
}

#[test]
fn modern_revocable_release_while_mapped_races_a_free() {
    let model = Model {
        release_mapped: true,
        ..Model::new(Modern, Revocable)
    };
    race("modern revocable, released while mapped", model);
}
