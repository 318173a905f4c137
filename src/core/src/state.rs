// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The life of one registration (a client context) as a state machine.
//!
//! Two parties drive it: the RDMA core (get_pages, dma_map, dma_unmap,
//! put_pages, release) and, for revocable pins, the NVIDIA driver's free
//! callback, which may fire at any time between pin and unpin. The module's
//! glue takes the context lock, calls [`step`], releases the lock and then
//! performs the returned [`Action`]; it never calls the driver or the core
//! with the lock held.

/// Where a registration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Pinned by `acquire`; the core has not called `get_pages` yet.
    Pinned,
    /// `get_pages` done: the core's context is known.
    Bound,
    /// `dma_map` is calling the driver.
    Mapping,
    /// DMA-mapped for the NIC.
    Mapped,
    /// The core called `dma_unmap`: the NIC no longer uses the pages.
    Unmapped,
    /// Unmap and unpin are running in the driver, or wait for `release`.
    /// `revoked`: a free callback arrived meanwhile (the driver serialises it).
    TearingDown {
        /// A free callback fired while the teardown was running.
        revoked: bool,
    },
    /// The pages were given back. Final.
    Done,
    /// The driver's free callback is running; the driver owns the pages.
    Revoking,
    /// The free callback finished; the driver freed pages and mappings. Final.
    Revoked,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The core called `get_pages`.
    GetPages,
    /// The core called `dma_map`; the driver is about to be asked.
    MapBegin,
    /// The driver answered `dma_map`.
    MapEnd {
        /// The driver mapped the pages.
        ok: bool,
    },
    /// The core called `dma_unmap`.
    Unmap,
    /// The core called `put_pages`.
    PutPages,
    /// The core called `release`; it will not call again.
    Release,
    /// The glue finished unmapping and unpinning.
    TeardownEnd,
    /// The driver's free callback started.
    CallbackBegin,
    /// The driver's free callback is about to return.
    CallbackEnd,
}

/// What the glue must do after the transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing that involves the driver or the core.
    None,
    /// Make the driver call this event stands for (`dma_map`).
    CallDriver,
    /// Unmap (if a mapping is held) and unpin, then report `TeardownEnd`.
    Teardown,
    /// Tell the core that its registration was invalidated.
    ForwardInvalidation,
    /// Take over the free callback's reference to the context: the callback
    /// owns it from here on and drops it when it ends.
    TakeCallbackReference,
}

/// Why an event is refused. The phase does not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A free callback revoked the pages (`-EFAULT` to the core).
    Revoked,
    /// The event does not fit the phase: out of order or repeated (`-EINVAL`).
    OutOfOrder,
}

/// The transition for `event` in `phase`.
#[inline]
pub fn step(phase: Phase, event: Event) -> Result<(Phase, Action), Refusal> {
    use Action as A;
    use Event as E;
    use Phase as P;

    let revoked = matches!(phase, P::Revoking | P::Revoked);
    Ok(match (phase, event) {
        (P::Pinned, E::GetPages) => (P::Bound, A::None),
        (P::Bound, E::MapBegin) => (P::Mapping, A::CallDriver),
        (P::Mapping, E::MapEnd { ok: true }) => (P::Mapped, A::None),
        (P::Mapping, E::MapEnd { ok: false }) => (P::Bound, A::None),
        (P::Mapped, E::Unmap) => (P::Unmapped, A::None),
        // put_pages without dma_unmap (dma_map failed or was never called) is
        // the core's error unwinding; teardown unmaps whatever is held.
        (P::Bound | P::Mapped | P::Unmapped, E::PutPages) => {
            (P::TearingDown { revoked: false }, A::Teardown)
        }
        // release with the pages still pinned: the core gave up before put_pages.
        (P::Pinned | P::Bound | P::Mapped | P::Unmapped, E::Release) => {
            (P::TearingDown { revoked: false }, A::Teardown)
        }
        (P::TearingDown { .. } | P::Done | P::Revoking | P::Revoked, E::Release) => {
            (phase, A::None)
        }
        (P::TearingDown { .. }, E::TeardownEnd) => (P::Done, A::None),

        // The driver tears the pages down itself after its callback; the core
        // may still unmap and put (legacy cores even from inside the callback).
        (P::Revoking | P::Revoked, E::Unmap | E::PutPages) => (phase, A::None),
        (_, E::GetPages | E::MapBegin | E::MapEnd { .. }) if revoked => {
            return Err(Refusal::Revoked)
        }

        // Only a mapped registration is worth invalidating. Before (Bound,
        // Mapping) the revocation fails the core's dma_map, so the core learns
        // it from that and unwinds, forgetting the context before release: a
        // forward would reach it late. Once the core started deregistering
        // (Unmapped) its context may be reused.
        (P::Mapped, E::CallbackBegin) => (P::Revoking, A::ForwardInvalidation),
        (P::Pinned | P::Bound | P::Mapping | P::Unmapped, E::CallbackBegin) => {
            (P::Revoking, A::TakeCallbackReference)
        }
        (P::TearingDown { revoked: false }, E::CallbackBegin) => {
            (P::TearingDown { revoked: true }, A::None)
        }
        (P::Revoking, E::CallbackEnd) => (P::Revoked, A::None),
        // A callback that began during a teardown ends then, or after the
        // teardown, which left the pages to the driver, finished.
        (P::TearingDown { revoked: true } | P::Done, E::CallbackEnd) => (phase, A::None),

        _ => return Err(Refusal::OutOfOrder),
    })
}

/// Whether the free callback owns the context reference it was given, after
/// `CallbackBegin` moved the registration to `next`: always, unless the
/// teardown is already inside the driver's unpin (which waits for the
/// callback and then takes the reference back). With the unpin modelled as
/// atomic, a callback during `TearingDown` came first: the teardown then
/// leaves the pages to the driver. (The glue tracks the unpin itself, with
/// `putting` in `nvidia_p2p.rs`: a callback during it leaves the reference
/// to the teardown, which takes it back whatever the unpin returned.)
// Used by the host tests only.
#[cfg_attr(MODULE, allow(dead_code))]
pub fn callback_owns_reference(next: Phase) -> bool {
    matches!(next, Phase::Revoking | Phase::TearingDown { revoked: true })
}

/// Whether a phase still holds pages pinned in the driver.
// Used by the host tests only.
#[cfg_attr(MODULE, allow(dead_code))]
pub fn holds_pin(phase: Phase) -> bool {
    matches!(
        phase,
        Phase::Pinned | Phase::Bound | Phase::Mapping | Phase::Mapped | Phase::Unmapped
    )
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const PHASES: [Phase; 10] = [
        Phase::Pinned,
        Phase::Bound,
        Phase::Mapping,
        Phase::Mapped,
        Phase::Unmapped,
        Phase::TearingDown { revoked: false },
        Phase::TearingDown { revoked: true },
        Phase::Done,
        Phase::Revoking,
        Phase::Revoked,
    ];
    const EVENTS: [Event; 10] = [
        Event::GetPages,
        Event::MapBegin,
        Event::MapEnd { ok: true },
        Event::MapEnd { ok: false },
        Event::Unmap,
        Event::PutPages,
        Event::Release,
        Event::TeardownEnd,
        Event::CallbackBegin,
        Event::CallbackEnd,
    ];

    #[test]
    fn normal_registration_tears_down_once() {
        let mut p = Phase::Pinned;
        let mut actions = Vec::new();
        for e in [
            Event::GetPages,
            Event::MapBegin,
            Event::MapEnd { ok: true },
            Event::Unmap,
            Event::PutPages,
            Event::TeardownEnd,
            Event::Release,
        ] {
            let (next, a) = step(p, e).unwrap();
            p = next;
            actions.push(a);
        }
        assert_eq!(p, Phase::Done);
        assert_eq!(
            actions.iter().filter(|a| **a == Action::Teardown).count(),
            1
        );
        assert_eq!(actions[1], Action::CallDriver);
    }

    #[test]
    fn invalidation_between_get_pages_and_dma_map_fails_the_registration() {
        let (p, a) = step(Phase::Bound, Event::CallbackBegin).unwrap();
        assert_eq!((p, a), (Phase::Revoking, Action::TakeCallbackReference));
        // Not dropped: the core's dma_map fails, and the core unwinds.
        assert_eq!(step(p, Event::MapBegin), Err(Refusal::Revoked));
        // The core unwinds: put_pages and release touch nothing.
        assert_eq!(
            step(p, Event::PutPages),
            Ok((Phase::Revoking, Action::None))
        );
        assert_eq!(step(p, Event::Release), Ok((Phase::Revoking, Action::None)));
        assert_eq!(
            step(p, Event::CallbackEnd),
            Ok((Phase::Revoked, Action::None))
        );
    }

    #[test]
    fn legacy_core_reentry_inside_callback_touches_nothing() {
        let (p, _) = step(Phase::Mapped, Event::CallbackBegin).unwrap();
        for e in [Event::Unmap, Event::PutPages, Event::Release] {
            assert_eq!(step(p, e), Ok((Phase::Revoking, Action::None)));
        }
    }

    #[test]
    fn callback_racing_dma_map_discards_the_mapping() {
        let (p, a) = step(Phase::Mapping, Event::CallbackBegin).unwrap();
        assert_eq!(a, Action::TakeCallbackReference);
        assert_eq!(step(p, Event::MapEnd { ok: true }), Err(Refusal::Revoked));
    }

    #[test]
    fn callback_during_teardown_keeps_the_reference() {
        let p = Phase::TearingDown { revoked: false };
        let (next, a) = step(p, Event::CallbackBegin).unwrap();
        assert_eq!(a, Action::None);
        assert!(callback_owns_reference(next));
        assert_eq!(step(next, Event::CallbackEnd), Ok((next, Action::None)));
        assert_eq!(
            step(next, Event::TeardownEnd),
            Ok((Phase::Done, Action::None))
        );
    }

    #[test]
    fn callback_may_end_after_the_teardown_it_overtook() {
        let (p, _) = step(Phase::TearingDown { revoked: false }, Event::CallbackBegin).unwrap();
        let (p, _) = step(p, Event::TeardownEnd).unwrap();
        assert_eq!(step(p, Event::CallbackEnd), Ok((Phase::Done, Action::None)));
    }

    #[test]
    fn second_deregistration_is_refused() {
        for p in [Phase::TearingDown { revoked: false }, Phase::Done] {
            assert_eq!(step(p, Event::Unmap), Err(Refusal::OutOfOrder));
            assert_eq!(step(p, Event::PutPages), Err(Refusal::OutOfOrder));
        }
        assert_eq!(
            step(Phase::Unmapped, Event::Unmap),
            Err(Refusal::OutOfOrder)
        );
    }

    #[test]
    fn callback_after_unpin_or_twice_is_a_driver_bug() {
        for p in [
            Phase::Done,
            Phase::Revoking,
            Phase::Revoked,
            Phase::TearingDown { revoked: true },
        ] {
            assert_eq!(step(p, Event::CallbackBegin), Err(Refusal::OutOfOrder));
        }
    }

    #[test]
    fn refusals_never_change_the_phase_and_finals_stay_final() {
        for p in PHASES {
            for e in EVENTS {
                if let Ok((next, _)) = step(p, e) {
                    if matches!(p, Phase::Done | Phase::Revoked) {
                        assert_eq!(next, p, "{p:?} is final but {e:?} moved it");
                    }
                }
            }
        }
    }

    #[test]
    fn only_a_mapped_registration_forwards() {
        // Before Mapped the core learns of the revocation from its failed
        // dma_map; from Unmapped on it is deregistering (with the unpin
        // under mapping_lock on 5.1 to 5.4-2: MOFED bug 2696789's deadlock
        // if the forward waited for that lock).
        for p in PHASES {
            if let Ok((_, Action::ForwardInvalidation)) = step(p, Event::CallbackBegin) {
                assert_eq!(p, Phase::Mapped);
            }
        }
        assert_eq!(
            step(Phase::Mapped, Event::CallbackBegin),
            Ok((Phase::Revoking, Action::ForwardInvalidation))
        );
    }

    #[test]
    fn only_pinned_phases_can_start_a_teardown() {
        for p in PHASES {
            for e in EVENTS {
                if let Ok((_, Action::Teardown)) = step(p, e) {
                    assert!(holds_pin(p) && p != Phase::Mapping, "{p:?} {e:?}");
                }
            }
        }
    }

    /// The core's side of one registration, as every MOFED generation calls it.
    fn core_script(mapped: bool, dereg: bool) -> Vec<Event> {
        let mut s = Vec::from([
            Event::GetPages,
            Event::MapBegin,
            Event::MapEnd { ok: mapped },
        ]);
        if dereg {
            if mapped {
                s.push(Event::Unmap);
            }
            s.push(Event::PutPages);
        }
        s.push(Event::Release);
        s
    }

    /// Runs a core script with a free callback inserted at `at` (or none) and
    /// the glue's teardown completed at once; checks the global invariants.
    fn run(script: &[Event], callback_at: Option<usize>) {
        let mut p = Phase::Pinned;
        let (mut teardowns, mut forwards, mut callback_refs_dropped, mut teardown_refs) =
            (0, 0, 0, 0);
        let mut pending_teardown = false;
        let mut callback_running = false;
        let mut callback_owns = false;
        let mut events: Vec<Event> = script.to_vec();
        if let Some(at) = callback_at {
            events.insert(at.min(events.len()), Event::CallbackBegin);
        }
        let mut i = 0;
        while i < events.len() {
            let e = events[i];
            i += 1;
            match step(p, e) {
                Ok((next, a)) => {
                    if e == Event::CallbackBegin {
                        callback_running = true;
                        callback_owns = callback_owns_reference(next);
                        // The callback ends right after (it forwards synchronously).
                        events.insert(i, Event::CallbackEnd);
                    }
                    if e == Event::CallbackEnd {
                        callback_running = false;
                        if callback_owns {
                            callback_refs_dropped += 1;
                        }
                    }
                    match a {
                        Action::Teardown => {
                            teardowns += 1;
                            pending_teardown = true;
                        }
                        Action::ForwardInvalidation => forwards += 1,
                        _ => {}
                    }
                    p = next;
                    if pending_teardown && !callback_running {
                        // A revoked teardown leaves the pages and the
                        // reference to the driver and its callback.
                        pending_teardown = false;
                        let revoked = p == Phase::TearingDown { revoked: true };
                        let (next, _) = step(p, Event::TeardownEnd).unwrap();
                        p = next;
                        if !revoked {
                            teardown_refs += 1;
                        }
                    }
                }
                // The core gets an error; a failed dma_map is unwound as MOFED does.
                Err(_) => {
                    if e == Event::MapBegin {
                        events.truncate(i);
                        events.extend([Event::PutPages, Event::Release]);
                    }
                }
            }
        }
        assert!(!callback_running);
        assert!(matches!(p, Phase::Done | Phase::Revoked), "ended in {p:?}");
        assert!(teardowns <= 1 && forwards <= 1);
        // The pin is given back exactly once: by the driver or by a teardown.
        assert_eq!(
            teardowns + usize::from(p == Phase::Revoked),
            1,
            "{events:?}"
        );
        // The callback's reference is dropped exactly once when a callback ran.
        if callback_at.is_some() {
            assert_eq!(callback_refs_dropped + teardown_refs, 1, "{events:?}");
        }
    }

    #[test]
    fn every_callback_position_in_every_core_script_is_safe() {
        for mapped in [true, false] {
            for dereg in [true, false] {
                let script = core_script(mapped, dereg);
                run(&script, None);
                for at in 0..=script.len() {
                    run(&script, Some(at));
                }
            }
        }
    }
}
