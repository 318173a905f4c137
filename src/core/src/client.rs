// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! What the client does for the RDMA core with one registration, on top of
//! the pin's protocol ([`super::protocol`]) and state machine
//! ([`super::state`]): the decisions of the free callback (forward or take
//! the reference), where the invalidation goes, the unpin parked from
//! `put_pages` until `release`, and the map's undo paths.
//!
//! The module (`src/clients.rs`) and the loom models (`tests/loom`) run this
//! same code; each gives it its platform ([`Env`]: threads, the core's
//! invalidation entry, the scatterlist, what keeps the module loaded, the
//! statistics) and its pin ([`PinLock`]).

use super::protocol::{
    self, ErrorOf, Forwarding, MapFailure, MappingOf, PinKind, PinLock, PinOwner, Threads,
};
use super::state::{step, Action, Event, Phase, Refusal};

/// Where a revocable client's invalidations go: the RDMA core's entry point
/// and the handle `ib_register_peer_memory_client` returned, as the
/// platform keeps them (the module's slot, written by the core during the
/// registration). [`Invalidator::ready`] and [`Invalidator::invalidate`]
/// are this crate's; the platform gives the handle and the call.
pub trait Invalidator {
    /// The handle `ib_register_peer_memory_client` returned.
    type Handle: Copy;

    /// The handle, once the registration returned it; `None` before, and
    /// again after the client is unregistered.
    fn handle(&self) -> Option<Self::Handle>;

    /// Calls the core's invalidation entry with `handle` for its
    /// registration `core_context`; `false` if the core gave none.
    fn call(&self, handle: Self::Handle, core_context: u64) -> bool;

    /// Whether the handle is stored. MOFED's core lists the client before
    /// the registration returns the handle (`peer_mem.c`
    /// `ib_register_peer_memory_client`: `list_add_tail` under
    /// `peer_memory_mutex`, then `return`), so a registration may reach
    /// `acquire` before: declined until then, since its invalidation would
    /// have nowhere to go.
    fn ready(&self) -> bool {
        self.handle().is_some()
    }

    /// Tells the core that its registration `core_context` was invalidated;
    /// `false` if the client is not registered.
    fn invalidate(&self, core_context: u64) -> bool {
        match self.handle() {
            Some(handle) => self.call(handle, core_context),
            None => false,
        }
    }
}

impl<I: Invalidator + ?Sized> Invalidator for &I {
    type Handle = I::Handle;

    fn handle(&self) -> Option<I::Handle> {
        (**self).handle()
    }
    fn call(&self, handle: I::Handle, core_context: u64) -> bool {
        (**self).call(handle, core_context)
    }
}

/// What a registration tells its platform: statistics and log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// A registration's state exists (until its drop: [`Note::ContextGone`]).
    ContextLive,
    /// A registration's state is dropped.
    ContextGone,
    /// Bytes pinned for a registration.
    Pinned(u64),
    /// Bytes given back (unpinned, or revoked by the driver).
    Unpinned(u64),
    /// A free callback began.
    Revoking,
    /// An invalidation reached the core.
    Forwarded,
    /// An invalidation could not be delivered: the client is not registered.
    NotDelivered(u64),
    /// The core called out of order.
    OutOfOrder(Event, Phase),
    /// `put_pages` of a revocable pin left its unpin to `release`.
    UnpinParked,
    /// The core released a registration.
    Released,
}

/// The platform a registration lives on, beside its pin's lock.
pub trait Env: Sized {
    /// The platform's threads (for the wait of `release` for a forwarder).
    type Threads: Threads;
    /// Where invalidations go.
    type Invalidator: Invalidator + Clone;
    /// The scatterlist handed to the core; kept until `release`.
    type Sg;
    /// Keeps the module loaded while the registration lives.
    type Keep;
    /// Counts or logs `note`.
    fn note(note: Note);
}

/// The client's state of one registration, behind its pin's lock.
pub struct Registration<E: Env> {
    phase: Phase,
    core_context: Option<u64>,
    /// Where invalidations go (revocable pins only).
    invalidator: Option<E::Invalidator>,
    /// The thread forwarding an invalidation for this registration, if any.
    forwarder: Option<<E::Threads as Threads>::Id>,
    /// Bytes noted as pinned (0 once given back).
    pinned_len: u64,
    /// The scatterlist handed to the core; dropped at release.
    sg: Option<E::Sg>,
    _keep: E::Keep,
}

/// Why `acquire` declines before pinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    /// The revocable client's registration has not returned its handle yet.
    Unregistered,
}

/// Why [`acquire`] declined a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decline<A, F> {
    /// The module is going away: no reference on it could be taken.
    Unloading,
    /// [`Registration::new`] declined.
    NotReady(NotReady),
    /// The pin could not be made (`A`: why).
    NoPin(A),
    /// Pinning failed (`F`: why; see [`protocol::pin`]).
    Pin(F),
}

/// `acquire`: claims a range by pinning it. Takes a reference on the
/// module with `keep` (none while it is going away: declined), makes the
/// registration's state ([`Registration::new`], invalidated through
/// `invalidator` if revocable), puts it in a new pin with `new_pin`, and
/// pins with `pin_pages` (the platform's [`protocol::pin`]). On success the
/// pin is the registration's context, with what `pin_pages` returned; on a
/// decline everything taken is dropped again, the module reference last.
pub fn acquire<E: Env, P, A, I, F>(
    invalidator: Option<E::Invalidator>,
    keep: impl FnOnce() -> Option<E::Keep>,
    new_pin: impl FnOnce(Registration<E>) -> Result<P, A>,
    pin_pages: impl FnOnce(&P) -> Result<I, F>,
) -> Result<(P, I), Decline<A, F>> {
    let keep = keep().ok_or(Decline::Unloading)?;
    let state = Registration::new(invalidator, keep).map_err(Decline::NotReady)?;
    let pin = new_pin(state).map_err(Decline::NoPin)?;
    let info = pin_pages(&pin).map_err(Decline::Pin)?;
    Ok((pin, info))
}

impl<E: Env> Registration<E> {
    /// The state of a registration about to be pinned, invalidated through
    /// `invalidator` if it is revocable. Declined while the invalidator has
    /// no handle ([`Invalidator::ready`]): the core then asks the next
    /// client, or fails the registration.
    pub fn new(invalidator: Option<E::Invalidator>, keep: E::Keep) -> Result<Self, NotReady> {
        if invalidator.as_ref().is_some_and(|i| !i.ready()) {
            return Err(NotReady::Unregistered);
        }
        E::note(Note::ContextLive);
        Ok(Self {
            phase: Phase::Pinned,
            core_context: None,
            invalidator,
            forwarder: None,
            pinned_len: 0,
            sg: None,
            _keep: keep,
        })
    }

    /// Where the registration is.
    // Used by the host tests only.
    #[cfg_attr(MODULE, allow(dead_code))]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Applies `event`; returns the action, or the refusal (an out-of-order
    /// call noted).
    #[inline]
    pub fn apply(&mut self, event: Event) -> Result<Action, Refusal> {
        match step(self.phase, event) {
            Ok((next, action)) => {
                self.phase = next;
                Ok(action)
            }
            Err(refusal) => Err(self.refuse(event, refusal)),
        }
    }

    #[cold]
    #[inline(never)]
    fn refuse(&self, event: Event, refusal: Refusal) -> Refusal {
        if refusal == Refusal::OutOfOrder {
            E::note(Note::OutOfOrder(event, self.phase));
        }
        refusal
    }

    /// Takes the pages out of the statistics.
    fn unaccount(&mut self) {
        let len = core::mem::take(&mut self.pinned_len);
        if len != 0 {
            E::note(Note::Unpinned(len));
        }
    }
}

impl<E: Env> Drop for Registration<E> {
    fn drop(&mut self) {
        E::note(Note::ContextGone);
    }
}

impl<E: Env> PinOwner for Registration<E> {
    type Followup = Option<(u64, E::Invalidator)>;

    fn pinned(&mut self, len: u64) {
        if self.phase == Phase::Pinned {
            self.pinned_len = len;
            E::note(Note::Pinned(len));
        }
    }

    fn revoking(&mut self) -> Self::Followup {
        E::note(Note::Revoking);
        let action = self.apply(Event::CallbackBegin);
        if self.phase == Phase::Revoking {
            // The driver takes the pages back.
            self.unaccount();
        }
        match action {
            Ok(Action::ForwardInvalidation) => {
                self.forwarder = Some(<E::Threads as Threads>::current());
                self.core_context.zip(self.invalidator.clone())
            }
            _ => None,
        }
    }

    fn revoked(followup: Self::Followup) {
        if let Some((core_context, invalidator)) = followup {
            if invalidator.invalidate(core_context) {
                E::note(Note::Forwarded);
            } else {
                E::note(Note::NotDelivered(core_context));
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

impl<E: Env> Forwarding<E::Threads> for Registration<E> {
    fn forwarder(&self) -> Option<<E::Threads as Threads>::Id> {
        self.forwarder
    }
}

/// `get_pages`: the core's context is known from here on.
pub fn get_pages<E: Env, L: PinLock<Owner = Registration<E>>>(
    pin: &L,
    core_context: u64,
) -> Result<(), Refusal> {
    let mut st = pin.lock();
    st.owner.apply(Event::GetPages)?;
    st.owner.core_context = Some(core_context);
    Ok(())
}

/// Why `dma_map` failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError<E, S> {
    /// The state machine refused the map before the driver was asked (an
    /// out-of-order call, noted; or a pin revoked before).
    Refused(Refusal),
    /// The driver failed, or its mapping failed the check.
    Driver(E),
    /// A free callback revoked the pages while the driver mapped them.
    Revoked,
    /// Not pinned, or already mapped.
    State,
    /// The scatterlist could not be built.
    Sg(S),
}

impl<E, S> MapError<E, S> {
    /// Whether the map failed once asked (counted and logged as a failed
    /// map), rather than being refused before.
    pub fn is_failed_map(&self) -> bool {
        !matches!(self, MapError::Refused(_))
    }
}

/// Why the scatterlist was not built under the pin's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError<S> {
    /// It failed: the mapping is undone.
    Failed(S),
    /// It needs memory it may only allocate without the pin's lock:
    /// [`dma_map`] drops the lock, calls `reserve`, takes the lock again and
    /// builds once more (`S`: the error if that build still lacks memory).
    ///
    /// A free callback waits for the pin's lock holding the driver's API
    /// lock, and an allocation that reclaims may enter the driver
    /// (`nv-vm.c` registers a shrinker for its page pools; `nvidia-uvm`
    /// has mmu notifiers): so under the pin's lock the build allocates
    /// without reclaim only, from what `reserve` set aside, or not at all.
    NeedMemory(S),
}

/// `dma_map`: maps the pinned pages for `peer`, checks the mapping with
/// `check`, builds the scatterlist from it with `build` and hands it to the
/// core with `publish`, under the pin's lock (a free callback waits). If
/// `build` needs memory ([`BuildError::NeedMemory`]), `reserve` sets it
/// aside without the lock, in `scratch`, and `build` runs again, unless a
/// callback revoked the pin meanwhile. A mapping that fails the check or
/// the build is unmapped again.
pub fn dma_map<E, L, S, R>(
    pin: &L,
    peer: &<L::Driver as protocol::Driver>::Peer,
    check: impl FnOnce(&MappingOf<L>) -> Result<(), ErrorOf<L>>,
    scratch: &mut R,
    mut build: impl FnMut(&MappingOf<L>, &mut R) -> Result<E::Sg, BuildError<S>>,
    reserve: impl FnOnce(&mut R) -> Result<(), S>,
    publish: impl FnOnce(&E::Sg),
) -> Result<(), MapError<ErrorOf<L>, S>>
where
    E: Env,
    L: PinLock<Owner = Registration<E>>,
{
    let begin = |reg: &mut Registration<E>| reg.apply(Event::MapBegin).map(|_| ());
    let (mut st, mapped) = protocol::map(pin, peer, begin, check).map_err(MapError::Refused)?;
    if let Err(failure) = mapped {
        // Revoked meanwhile, this step is refused (the phase is Revoking
        // or Revoked) and changes nothing; the map failed all the same.
        let _ = st.owner.apply(Event::MapEnd { ok: false });
        return Err(match failure {
            MapFailure::Driver(e) => MapError::Driver(e),
            MapFailure::Revoked => MapError::Revoked,
            MapFailure::State => MapError::State,
        });
    }
    let mut reserve = Some(reserve);
    let built = loop {
        // The mapping is live while the lock is held and the pin not
        // revoked: a callback waits for the lock.
        let Some(mapping) = st.mapping() else {
            break Err(MapError::Revoked);
        };
        match build(mapping, scratch) {
            Ok(sg) => break Ok(sg),
            Err(BuildError::Failed(e)) => break Err(MapError::Sg(e)),
            Err(BuildError::NeedMemory(e)) => {
                let Some(reserve) = reserve.take() else {
                    break Err(MapError::Sg(e));
                };
                // A callback may revoke the pin meanwhile: then the mapping
                // is the driver's (`st.mapping()` is `None` above).
                drop(st);
                let reserved = reserve(scratch);
                st = pin.lock();
                if let Err(e) = reserved {
                    break Err(MapError::Sg(e));
                }
            }
        }
    };
    match built {
        Ok(sg) => {
            st.owner
                .apply(Event::MapEnd { ok: true })
                .map_err(MapError::Refused)?;
            publish(&sg);
            st.owner.sg = Some(sg);
            Ok(())
        }
        Err(e) => {
            // Nothing to undo if a callback revoked the pin: the driver
            // frees the mapping.
            let undo = st.take_mapping();
            let _ = st.owner.apply(Event::MapEnd { ok: false });
            drop(st);
            if let Some(undo) = undo {
                undo.run(pin);
            }
            Err(e)
        }
    }
}

/// `dma_unmap`: the NIC no longer uses the pages.
pub fn dma_unmap<E: Env, L: PinLock<Owner = Registration<E>>>(pin: &L) -> Result<(), Refusal> {
    pin.lock().owner.apply(Event::Unmap).map(|_| ())
}

/// `put_pages`: unpins, or for a revocable pin parks the unpin until
/// `release`.
///
/// MOFED 5.1 to 5.4-2 call `put_pages` holding the umem's `mapping_lock`
/// (`peer_mem.c` `ib_umem_stop_invalidation_notifier` of those releases),
/// which their invalidation takes. The driver's unpin waits for a running
/// free callback (its API lock, `osapi.c` `rm_p2p_put_pages`), and that
/// callback may be forwarding this registration's invalidation: MOFED bug
/// 2696789's deadlock. What prevents it is the state machine: a pin's
/// callback forwards only while the registration is `Mapped`, and
/// `put_pages` comes only after `dma_unmap` (`Unmapped`) or without a
/// mapping, so a pin's forward and its unpin never overlap. Parking the
/// unpin is defence in depth: `release` comes right after, without that
/// lock, on every core (MOFED 5.0 and earlier call it inside an
/// invalidation only, when the pages are already revoked), so the pages
/// are still unpinned before the deregistration returns.
pub fn put_pages<E: Env, L: PinLock<Owner = Registration<E>>>(pin: &L) {
    end_of_use(pin, pin.lock(), Event::PutPages);
}

/// `release`: the core's last call. Waits until no other thread forwards an
/// invalidation for this registration ([`protocol::lock_after_forward`]),
/// then unpins if the pages are still pinned and drops the scatterlist.
pub fn release<E: Env, L: PinLock<Owner = Registration<E>>>(pin: &L) {
    let mut st = protocol::lock_after_forward::<E::Threads, L>(pin);
    // Freed here, not in put_pages: a core may skip put_pages after an
    // invalidation, never release.
    let sg = st.owner.sg.take();
    // A revocable pin's unpin, parked by put_pages (then Release is no
    // teardown of its own).
    let parked = st.take_parked_teardown();
    end_of_use(pin, st, Event::Release);
    if let Some(teardown) = parked {
        teardown.run(pin);
    }
    drop(sg);
    E::note(Note::Released);
}

/// `put_pages` or `release` with the lock `st` of `pin` held: unpins if the
/// registration still holds pages. Inlined: each caller's event is a
/// constant.
#[inline(always)]
fn end_of_use<E: Env, L: PinLock<Owner = Registration<E>>>(
    pin: &L,
    mut st: L::Guard<'_>,
    event: Event,
) {
    let Ok(Action::Teardown) = st.owner.apply(event) else {
        return;
    };
    st.owner.unaccount();
    if pin.kind() == PinKind::Revocable && event == Event::PutPages {
        E::note(Note::UnpinParked);
        st.park_teardown();
        return;
    }
    let teardown = st.take_teardown();
    drop(st);
    teardown.run(pin);
}
