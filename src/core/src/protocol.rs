// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The invalidation protocol of one pin: who waits for whom, and who owns
//! which reference, when the driver's free callback meets a map, an unmap,
//! an unpin or a release.
//!
//! Generic over the platform's lock and condition variable ([`PinLock`]),
//! its threads ([`Threads`]) and the driver's calls ([`Driver`]): the module
//! instantiates it with the kernel's primitives and NVIDIA's API, the host
//! tests (`tests/loom/tests/protocol.rs`) with loom's and models of the
//! driver and of each generation of the RDMA core.
//!
//! The driver's rules it relies on (NVIDIA's open kernel modules 595.45.04,
//! github NVIDIA/open-gpu-kernel-modules: `kernel-open/nvidia/nv-p2p.c`,
//! RM's `rm_p2p_*` in `src/nvidia/arch/nvalloc/unix/src/osapi.c`, the
//! callback's caller `CliDelThirdPartyP2PVidmemInfo` in
//! `src/nvidia/src/kernel/gpu/bus/third_party_p2p.c`):
//! - pins, `dma_map`'s middle and unpins take one driver-wide API lock;
//! - a revocable pin's free callback runs with that lock held, and the
//!   driver frees the page table and its mappings when the callback returns;
//! - `dma_unmap` takes only the table's own lock (allowed in a callback);
//! - `dma_map` reads the table before the API lock and writes it after;
//! - an unpin after the callback returns 0 (older drivers: an error).
//!
//! So [`free_callback`] marks the pin revoked and waits for nothing that
//! needs the API lock, only for an unmap of its own table in flight
//! (`unmapping`). Every unmap and every read of driver memory starts under
//! the pin's lock while the pin is not revoked. The pin's lock is never held
//! across a call into the driver or the RDMA core.

use core::ops::DerefMut;

/// How the pages are pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinKind {
    /// No callback, survives `cudaFree`.
    Persistent,
    /// The driver may revoke it through the free callback.
    Revocable,
}

/// The driver's calls this protocol makes, on handles it hands out.
pub trait Driver {
    /// A pinned page table (a plain handle).
    type Table: Copy;
    /// A DMA mapping of a table for one device.
    type Mapping;
    /// The device a table is mapped for.
    type Peer: ?Sized;
    /// Why a map failed.
    type Error;

    /// `dma_map_pages`: may race the free callback inside the driver.
    fn dma_map(&self, peer: &Self::Peer, table: Self::Table) -> Result<Self::Mapping, Self::Error>;
    /// `dma_unmap_pages` of a mapping of a table not freed yet.
    fn dma_unmap(&self, table: Self::Table, mapping: Self::Mapping);
    /// `put_pages` or `put_pages_persistent` of `table`, pinned at `va`.
    fn put(&self, kind: PinKind, va: u64, table: Self::Table) -> i32;
}

/// The client side of a pin: its state, and what it does on revocation.
pub trait PinOwner {
    /// What [`PinOwner::revoking`] hands to [`PinOwner::revoked`].
    type Followup;

    /// `len` bytes were pinned and their page table checked; called with
    /// the pin's lock held, before the pin can be revoked.
    fn pinned(&mut self, len: u64);

    /// The driver is revoking the pages; called with the pin's lock held.
    fn revoking(&mut self) -> Self::Followup;

    /// Called without the lock right after [`PinOwner::revoking`], still
    /// inside the driver's callback: tell whoever uses the pages (forward
    /// the invalidation to the RDMA core).
    fn revoked(followup: Self::Followup);

    /// The callback is about to return; called with the lock held.
    fn revoke_end(&mut self);

    /// A teardown finished; called with the lock held.
    fn teardown_end(&mut self);
}

/// The state of one pin, behind its lock.
pub struct PinState<D: Driver, O> {
    /// The client's state.
    pub owner: O,
    pages: Option<D::Table>,
    mapping: Option<D::Mapping>,
    /// The driver revoked the pages (only revocable pins).
    revoked: bool,
    /// A teardown unpins: a callback that starts now leaves its reference to
    /// the teardown, whose unpin waits for the callback (API lock).
    putting: bool,
    /// `map` is inside `dma_map` (a second map is refused).
    mapping_in_flight: bool,
    /// An unmap of this table is in flight; a callback waits for it.
    unmapping: bool,
    /// A callback waits for `unmapping` to drop.
    unmap_waited: bool,
    /// The unpin waits for the core's `release` ([`PinState::park_teardown`]).
    parked: bool,
}

impl<D: Driver, O> PinState<D, O> {
    /// A pin not pinned yet.
    pub fn new(owner: O) -> Self {
        Self {
            owner,
            pages: None,
            mapping: None,
            revoked: false,
            putting: false,
            mapping_in_flight: false,
            unmapping: false,
            unmap_waited: false,
            parked: false,
        }
    }

    /// The pinned table, unless revoked: readable while the lock is held.
    pub fn pages(&self) -> Option<D::Table> {
        self.pages.filter(|_| !self.revoked)
    }

    /// The mapping, unless revoked: readable while the lock is held.
    pub fn mapping(&self) -> Option<&D::Mapping> {
        self.mapping.as_ref().filter(|_| !self.revoked)
    }

    /// Takes the handles out for a teardown; a callback from now on owns nothing.
    pub fn take_teardown(&mut self) -> Teardown<D> {
        Teardown {
            pages: self.pages.take(),
            mapping: self.mapping.take(),
        }
    }

    /// Leaves the teardown to [`PinState::take_parked_teardown`]. The pages
    /// stay pinned until then; a free callback meanwhile takes them back.
    pub fn park_teardown(&mut self) {
        self.parked = true;
    }

    /// The teardown parked by [`PinState::park_teardown`], if any.
    pub fn take_parked_teardown(&mut self) -> Option<Teardown<D>> {
        if !core::mem::take(&mut self.parked) {
            return None;
        }
        Some(self.take_teardown())
    }

    /// Takes only the mapping out, to undo a map the client cannot use; a
    /// callback from now on waits until [`Unmap::run`] has unmapped.
    pub fn take_mapping(&mut self) -> Option<Unmap<D>> {
        let table = self.pages()?;
        let mapping = self.mapping.take()?;
        self.unmapping = true;
        Some(Unmap { table, mapping })
    }
}

/// One pin's lock and condition variable, as the platform has them.
pub trait PinLock {
    /// The driver the pin's handles come from.
    type Driver: Driver;
    /// The client's state.
    type Owner: PinOwner;
    /// The lock, held.
    type Guard<'a>: DerefMut<Target = PinState<Self::Driver, Self::Owner>>
    where
        Self: 'a;

    /// Takes the pin's lock.
    fn lock(&self) -> Self::Guard<'_>;
    /// Waits for [`PinLock::notify_unmap`], the lock dropped meanwhile.
    fn wait_unmap<'a>(&'a self, guard: Self::Guard<'a>) -> Self::Guard<'a>;
    /// Wakes the waiters of [`PinLock::wait_unmap`].
    fn notify_unmap(&self);
    /// The driver.
    fn driver(&self) -> &Self::Driver;
    /// How the pin is pinned.
    fn kind(&self) -> PinKind;
    /// The pinned range's start.
    fn va(&self) -> u64;
    /// Drops the reference to the pin that a revocable pin handed the
    /// driver as its free callback's data, when the protocol knows that
    /// the driver no longer holds it: a pin the driver refused ([`pin`]), or
    /// an unpin that took it back ([`finish_unpin`]). Never the pin's last
    /// reference: the caller holds another. (The free callback's own
    /// reference, which may be the last, is dropped by the platform's
    /// callback after [`free_callback`] returns.)
    fn drop_driver_reference(&self);
    /// Reports a failed unpin: the driver's answer `ret` to the put.
    fn put_failed(&self, ret: i32);
    /// A free callback is about to drop the driver's reference to the pin,
    /// perhaps the pin's last, and with it what keeps the module loaded:
    /// the module's exit must then wait for the callbacks in flight
    /// ([`wait_for_callbacks`]).
    fn callback_dropped_reference(&self);
}

/// Why a map failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapFailure<E> {
    /// The driver failed, or its mapping failed the check.
    Driver(E),
    /// A free callback revoked the pages meanwhile.
    Revoked,
    /// Not pinned, or already mapped or mapping.
    State,
}

/// The table handle of `L`'s driver.
pub type TableOf<L> = <<L as PinLock>::Driver as Driver>::Table;
/// The mapping handle of `L`'s driver.
pub type MappingOf<L> = <<L as PinLock>::Driver as Driver>::Mapping;
/// The error of `L`'s driver.
pub type ErrorOf<L> = <<L as PinLock>::Driver as Driver>::Error;
/// What [`map`] did.
pub type MapOutcome<L> = Result<(), MapFailure<ErrorOf<L>>>;

/// Why [`pin`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinFailure<E, C> {
    /// The driver refused to pin.
    Driver(E),
    /// The driver pinned but returned no table.
    NoTable,
    /// A free callback revoked the pages before they were accepted.
    Revoked,
    /// The page table failed `check`: unpinned again.
    Check(C),
}

/// Pins the range: `get` is the driver's pin call (`get_pages` with a new
/// reference to the pin as the free callback's data for a revocable pin,
/// `get_pages_persistent` otherwise); then the table is accepted and
/// checked by `check` under the pin's lock, before a callback can complete
/// (it waits for the lock). A table that fails the check is unpinned again.
/// `len` bytes are noted as pinned ([`PinOwner::pinned`]) on success.
///
/// Called once, before the pin is shared; a revocable pin may be revoked
/// from the moment `get` took the driver's API lock.
pub fn pin<L: PinLock, I, C>(
    pin: &L,
    len: u64,
    get: impl FnOnce() -> Result<Option<TableOf<L>>, ErrorOf<L>>,
    check: impl FnOnce(TableOf<L>) -> Result<I, C>,
) -> Result<I, PinFailure<ErrorOf<L>, C>> {
    let table = match get() {
        Ok(Some(table)) => table,
        // Pinned all the same: the driver keeps its reference.
        Ok(None) => return Err(PinFailure::NoTable),
        Err(e) => {
            if pin.kind() == PinKind::Revocable {
                // The driver refused, so it kept no reference and will
                // never call back.
                pin.drop_driver_reference();
            }
            return Err(PinFailure::Driver(e));
        }
    };
    let Some(mut st) = accept_pages(pin, table) else {
        // Revoked before we got here: the callback owns the driver's
        // reference and the driver frees the table.
        return Err(PinFailure::Revoked);
    };
    match check(table) {
        Ok(info) => {
            st.owner.pinned(len);
            Ok(info)
        }
        Err(e) => {
            let teardown = st.take_teardown();
            drop(st);
            finish_unpin(pin, teardown.unpin(pin));
            Err(PinFailure::Check(e))
        }
    }
}

/// Records a pin's table just returned by the driver and returns the lock,
/// held; `None` if a callback revoked the pin already (then the callback
/// owns the driver's reference and the driver frees the table).
pub fn accept_pages<L: PinLock>(pin: &L, table: TableOf<L>) -> Option<L::Guard<'_>> {
    let mut st = pin.lock();
    if st.revoked {
        return None;
    }
    st.pages = Some(table);
    Some(st)
}

/// The driver's free callback. Returns whether the callback owns the
/// reference the pin handed the driver: always, unless a teardown is
/// unpinning, which takes it back. If it does, the platform's callback
/// drops it once this returns, after every use of the pin (it may be the
/// pin's last reference); the drop is recorded for the module's exit
/// first ([`PinLock::callback_dropped_reference`]).
pub fn free_callback<L: PinLock>(pin: &L) -> bool {
    let (followup, owns_reference) = {
        let mut st = pin.lock();
        st.revoked = true;
        let owns = !st.putting;
        // The driver frees both after we return.
        st.mapping = None;
        st.pages = None;
        (st.owner.revoking(), owns)
    };
    L::Owner::revoked(followup);
    let mut st = pin.lock();
    // The driver frees the table when we return: let an unmap of it end. It
    // needs no API lock, so this wait ends; a map or unpin in flight waits
    // for that lock, held around this callback, so it is never waited for.
    while st.unmapping {
        st.unmap_waited = true;
        st = pin.wait_unmap(st);
    }
    st.owner.revoke_end();
    drop(st);
    if owns_reference {
        pin.callback_dropped_reference();
    }
    owns_reference
}

/// The driver's answer to the unpin of [`wait_for_callbacks`]: it could
/// not allocate before taking its API lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoMemory;

/// The module's exit, once no pin is armed (each holds a module
/// reference, and the exit runs when none is left), so that no free
/// callback starts afterwards: returns once every callback the driver
/// began before has returned to the driver, if one dropped a pin's
/// reference (`dropped`, from [`PinLock::callback_dropped_reference`]):
/// its last instructions may still run in the module's text, and the
/// driver holds no reference to the module for its callback.
///
/// `barrier` takes and drops the driver's API lock, which the driver
/// holds across each callback and until the table is freed; it may fail
/// to allocate before taking the lock ([`NoMemory`]): then it is tried
/// again, up to 1000 times, with `pause` in between.
pub fn wait_for_callbacks(
    dropped: bool,
    mut barrier: impl FnMut() -> Result<(), NoMemory>,
    mut pause: impl FnMut(),
) {
    if !dropped {
        return;
    }
    for _ in 0..1000 {
        if barrier().is_ok() {
            return;
        }
        pause();
    }
}

/// An unmap started under the lock (`unmapping`) is over.
fn unmap_ended<L: PinLock>(pin: &L, st: &mut PinState<L::Driver, L::Owner>) {
    st.unmapping = false;
    if core::mem::take(&mut st.unmap_waited) {
        pin.notify_unmap();
    }
}

/// Maps the pinned pages for `peer` and checks the mapping with `check`.
/// `begin` runs first, under the lock: its error is returned, nothing
/// mapped. The driver is called without the lock; returns the lock, taken
/// again, with the outcome. A mapping made while a callback revoked the pin
/// is the driver's: never used or unmapped.
pub fn map<'a, L: PinLock, B>(
    pin: &'a L,
    peer: &<L::Driver as Driver>::Peer,
    begin: impl FnOnce(&mut L::Owner) -> Result<(), B>,
    check: impl FnOnce(&MappingOf<L>) -> Result<(), ErrorOf<L>>,
) -> Result<(L::Guard<'a>, MapOutcome<L>), B> {
    let table = {
        let mut st = pin.lock();
        begin(&mut st.owner)?;
        let ready = match (st.pages, &st.mapping) {
            _ if st.revoked => Err(MapFailure::Revoked),
            (Some(table), None) if !st.mapping_in_flight => Ok(table),
            _ => Err(MapFailure::State),
        };
        match ready {
            Ok(table) => {
                st.mapping_in_flight = true;
                table
            }
            Err(e) => return Ok((st, Err(e))),
        }
    };
    // A callback may run and return before the driver takes its API lock:
    // that race is inside the driver, and no client can close it (the
    // callback must not wait for this call, which waits for that lock).
    let mapped = pin.driver().dma_map(peer, table);
    let mut st = pin.lock();
    st.mapping_in_flight = false;
    let outcome = match mapped {
        Err(e) => Err(MapFailure::Driver(e)),
        Ok(_) if st.revoked => Err(MapFailure::Revoked),
        Ok(mapping) => match check(&mapping) {
            Ok(()) => {
                st.mapping = Some(mapping);
                Ok(())
            }
            Err(e) => {
                st.unmapping = true;
                drop(st);
                pin.driver().dma_unmap(table, mapping);
                st = pin.lock();
                unmap_ended(pin, &mut st);
                Err(MapFailure::Driver(e))
            }
        },
    };
    Ok((st, outcome))
}

/// A mapping taken out of a pin ([`PinState::take_mapping`]).
pub struct Unmap<D: Driver> {
    table: D::Table,
    mapping: D::Mapping,
}

impl<D: Driver> Unmap<D> {
    /// Unmaps in the driver, then lets a waiting callback return.
    pub fn run<L: PinLock<Driver = D>>(self, pin: &L) {
        pin.driver().dma_unmap(self.table, self.mapping);
        unmap_ended(pin, &mut pin.lock());
    }
}

/// Handles taken out of a pin to be unmapped and unpinned without its lock.
pub struct Teardown<D: Driver> {
    pages: Option<D::Table>,
    mapping: Option<D::Mapping>,
}

/// What a teardown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unpinned {
    /// The driver's answer to the unpin, if it was asked.
    pub put: Option<i32>,
    /// The reference the pin handed the driver is the caller's to drop.
    pub drop_reference: bool,
}

/// What a teardown's unpin did, carried out: reports a failed unpin and
/// drops the reference the pin handed the driver if `unpinned` says it is
/// the caller's.
pub fn finish_unpin<L: PinLock>(pin: &L, unpinned: Unpinned) {
    match unpinned.put {
        Some(ret) if ret != 0 => pin.put_failed(ret),
        _ => {}
    }
    if unpinned.drop_reference {
        pin.drop_driver_reference();
    }
}

impl<D: Driver> Teardown<D> {
    /// [`Teardown::unpin`], then tells the owner the teardown ended, then
    /// [`finish_unpin`].
    pub fn run<L: PinLock<Driver = D>>(self, pin: &L) {
        let unpinned = self.unpin(pin);
        pin.lock().owner.teardown_end();
        finish_unpin(pin, unpinned);
    }

    /// Unmaps and unpins, unless a free callback revoked the pages since
    /// they were taken out (then the driver frees them and the callback owns
    /// its reference).
    pub fn unpin<L: PinLock<Driver = D>>(self, pin: &L) -> Unpinned {
        let nothing = Unpinned {
            put: None,
            drop_reference: false,
        };
        let Some(pages) = self.pages else {
            return nothing;
        };
        {
            let mut st = pin.lock();
            if st.revoked {
                return nothing;
            }
            st.putting = true;
            // A callback from now on waits for the unmap to end.
            st.unmapping = self.mapping.is_some();
        }
        if let Some(mapping) = self.mapping {
            pin.driver().dma_unmap(pages, mapping);
            unmap_ended(pin, &mut pin.lock());
        }
        let kind = pin.kind();
        let ret = pin.driver().put(kind, pin.va(), pages);
        // The driver's reference is ours again if the driver gave it back,
        // or if its callback ran during the unpin (`putting`: it left the
        // reference to us, and older drivers then fail the put). Otherwise
        // the driver kept the pin and may still call back.
        let drop_reference = kind == PinKind::Revocable
            && (ret == 0 || {
                let mut st = pin.lock();
                st.putting = false;
                st.revoked
            });
        Unpinned {
            put: Some(ret),
            drop_reference,
        }
    }
}

/// The threads of the platform, for [`lock_after_forward`].
pub trait Threads {
    /// A thread's identity.
    type Id: PartialEq + Copy;
    /// The calling thread.
    fn current() -> Self::Id;
    /// Lets another thread's short call finish (no lock held).
    fn pause();
}

/// An owner that records which thread forwards an invalidation for it.
pub trait Forwarding<T: Threads> {
    /// The thread forwarding an invalidation for this pin, if any.
    fn forwarder(&self) -> Option<T::Id>;
}

/// Locks `pin` once no other thread is forwarding an invalidation for it:
/// once released, the core may give the registration's id to a new one,
/// which the late invalidation would then hit. The caller keeps the lock
/// until the registration has left the phases a callback forwards from. A
/// core that releases from inside the invalidation (MOFED 5.0 and earlier)
/// does so on the forwarding thread, which does not wait for itself.
pub fn lock_after_forward<T: Threads, L: PinLock>(pin: &L) -> L::Guard<'_>
where
    L::Owner: Forwarding<T>,
{
    let me = T::current();
    loop {
        let st = pin.lock();
        match st.owner.forwarder() {
            Some(id) if id != me => {
                drop(st);
                T::pause();
            }
            _ => return st,
        }
    }
}
