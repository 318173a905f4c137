// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `peermem_core::client` on one thread, with the driver's free callback
//! run at chosen points from inside the driver's calls: what the core is
//! told and what the platform is told (`Note`s), path by path. The races
//! themselves are the loom models' (tests/loom).

use std::cell::{Cell, RefCell};
use std::sync::{Condvar, Mutex, MutexGuard};

use peermem_core::client::{
    self, BuildError, Env, Invalidator, MapError, NotReady, Note, Registration,
};
use peermem_core::protocol::{self, Driver, PinKind, PinLock, PinState, Threads};
use peermem_core::state::{Phase, Refusal};

thread_local! {
    static NOTES: RefCell<Vec<Note>> = const { RefCell::new(Vec::new()) };
    /// The test pin, for a callback run from inside a driver call.
    static PIN: Cell<Option<&'static Pin>> = const { Cell::new(None) };
}

fn notes() -> Vec<Note> {
    NOTES.with(|n| n.borrow_mut().drain(..).collect())
}

struct TestEnv;

#[derive(Clone)]
struct Slot(bool);

impl Invalidator for Slot {
    type Handle = ();
    fn handle(&self) -> Option<()> {
        self.0.then_some(())
    }
    fn call(&self, _handle: (), _core_context: u64) -> bool {
        true
    }
}

struct OneThread;

impl Threads for OneThread {
    type Id = u32;
    fn current() -> u32 {
        1
    }
    fn pause() {}
}

impl Env for TestEnv {
    type Threads = OneThread;
    type Invalidator = Slot;
    type Sg = usize;
    type Keep = ();
    fn note(note: Note) {
        NOTES.with(|n| n.borrow_mut().push(note));
    }
}

/// When the driver's free callback runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FreeAt {
    Never,
    /// Inside `dma_map`, after the driver read the table (the driver's race).
    DuringMap,
}

struct Gpu {
    free_at: FreeAt,
    unmaps: Cell<usize>,
    puts: Cell<usize>,
}

impl Driver for Gpu {
    type Table = ();
    type Mapping = ();
    type Peer = ();
    type Error = i32;

    fn dma_map(&self, _peer: &(), _table: ()) -> Result<(), i32> {
        if self.free_at == FreeAt::DuringMap {
            let pin = PIN.with(Cell::get).unwrap();
            protocol::free_callback(pin);
        }
        Ok(())
    }
    fn dma_unmap(&self, _table: (), _mapping: ()) {
        self.unmaps.set(self.unmaps.get() + 1);
    }
    fn put(&self, _kind: PinKind, _va: u64, _table: ()) -> i32 {
        self.puts.set(self.puts.get() + 1);
        0
    }
}

struct Pin {
    gpu: Gpu,
    state: Mutex<PinState<Gpu, Registration<TestEnv>>>,
    unmap_done: Condvar,
}

impl PinLock for Pin {
    type Driver = Gpu;
    type Owner = Registration<TestEnv>;
    type Guard<'a> = MutexGuard<'a, PinState<Gpu, Registration<TestEnv>>>;

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
        PinKind::Revocable
    }
    fn va(&self) -> u64 {
        0
    }
    fn drop_driver_reference(&self) {}
    fn put_failed(&self, _ret: i32) {}
    fn callback_dropped_reference(&self) {}
}

/// A revocable pin, pinned and bound, leaked for the callback's access.
fn bound_pin(free_at: FreeAt) -> &'static Pin {
    let reg = Registration::new(Some(Slot(true)), ()).unwrap();
    let pin: &'static Pin = Box::leak(Box::new(Pin {
        gpu: Gpu {
            free_at,
            unmaps: Cell::new(0),
            puts: Cell::new(0),
        },
        state: Mutex::new(PinState::new(reg)),
        unmap_done: Condvar::new(),
    }));
    PIN.with(|p| p.set(Some(pin)));
    drop(protocol::accept_pages(pin, ()).unwrap());
    client::get_pages(pin, 7).unwrap();
    notes();
    pin
}

fn map(pin: &Pin) -> Result<(), MapError<i32, i32>> {
    client::dma_map(
        pin,
        &(),
        |_| Ok(()),
        &mut (),
        |_, _| Ok(3),
        |_| Ok(()),
        |_| {},
    )
}

/// A map whose first build needs memory set aside without the lock;
/// `free` runs the callback while it is set aside.
fn map_reserving(pin: &Pin, free: bool) -> (Result<(), MapError<i32, i32>>, usize) {
    let mut reserved = 0;
    let mapped = client::dma_map(
        pin,
        &(),
        |_| Ok(()),
        &mut reserved,
        |_, reserved: &mut usize| {
            if *reserved == 0 {
                Err(BuildError::NeedMemory(-12))
            } else {
                Ok(3)
            }
        },
        |reserved: &mut usize| {
            *reserved += 1;
            if free {
                assert!(protocol::free_callback(PIN.with(Cell::get).unwrap()));
            }
            Ok(())
        },
        |_| {},
    );
    (mapped, reserved)
}

#[test]
fn a_map_revoked_meanwhile_is_a_failed_map() {
    let pin = bound_pin(FreeAt::DuringMap);
    let e = map(pin).unwrap_err();
    // Counted in errors_dma_map and logged by the module (`is_failed_map`),
    // -EFAULT to the core; the driver's mapping is never unmapped.
    assert_eq!(e, MapError::Revoked);
    assert!(e.is_failed_map());
    assert_eq!(pin.gpu.unmaps.get(), 0);
    assert_eq!(pin.lock().owner.phase(), Phase::Revoked);
    // The callback took its reference (not mapped yet: nothing forwarded).
    assert_eq!(notes(), [Note::Revoking]);
}

#[test]
fn a_map_after_the_revocation_is_refused_not_failed() {
    let pin = bound_pin(FreeAt::Never);
    assert!(protocol::free_callback(pin));
    let e = map(pin).unwrap_err();
    assert_eq!(e, MapError::Refused(Refusal::Revoked));
    assert!(!e.is_failed_map());
}

#[test]
fn a_mapped_registration_forwards_and_its_release_unpins_nothing() {
    let pin = bound_pin(FreeAt::Never);
    map(pin).unwrap();
    assert!(protocol::free_callback(pin));
    assert_eq!(notes(), [Note::Revoking, Note::Forwarded]);
    client::dma_unmap(pin).unwrap();
    client::put_pages(pin);
    client::release(pin);
    assert_eq!((pin.gpu.unmaps.get(), pin.gpu.puts.get()), (0, 0));
    assert_eq!(notes(), [Note::Released]);
}

#[test]
fn put_pages_parks_the_unpin_until_release() {
    let pin = bound_pin(FreeAt::Never);
    map(pin).unwrap();
    client::dma_unmap(pin).unwrap();
    client::put_pages(pin);
    assert_eq!(pin.gpu.puts.get(), 0);
    assert_eq!(notes(), [Note::UnpinParked]);
    client::release(pin);
    assert_eq!((pin.gpu.unmaps.get(), pin.gpu.puts.get()), (1, 1));
    assert_eq!(notes(), [Note::Released]);
}

#[test]
fn a_revocable_registration_waits_for_the_handle() {
    let declined = Registration::<TestEnv>::new(Some(Slot(false)), ());
    assert!(matches!(declined, Err(NotReady::Unregistered)));
    assert_eq!(notes(), []);
    // A persistent one needs no handle.
    assert!(Registration::<TestEnv>::new(None, ()).is_ok());
    assert_eq!(notes(), [Note::ContextLive, Note::ContextGone]);
}

#[test]
fn a_build_short_of_memory_reserves_without_the_lock_and_builds_again() {
    let pin = bound_pin(FreeAt::Never);
    let (mapped, reserved) = map_reserving(pin, false);
    assert_eq!((mapped, reserved), (Ok(()), 1));
    assert_eq!(pin.lock().owner.phase(), Phase::Mapped);
    assert_eq!(pin.gpu.unmaps.get(), 0);
}

#[test]
fn a_callback_while_reserving_fails_the_map_and_leaves_the_mapping_to_the_driver() {
    let pin = bound_pin(FreeAt::Never);
    let (mapped, reserved) = map_reserving(pin, true);
    assert_eq!((mapped, reserved), (Err(MapError::Revoked), 1));
    assert_eq!(pin.gpu.unmaps.get(), 0);
    assert_eq!(pin.lock().owner.phase(), Phase::Revoked);
}
