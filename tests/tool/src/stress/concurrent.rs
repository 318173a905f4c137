// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `stress concurrent`: N threads, each with its own open ctl files, share a
//! few slots of GPU buffers. Each operation picks a slot at random and
//! registers a random range of its buffer (allocating one if the slot is
//! empty), deregisters one of the thread's MRs, or frees the slot's buffer,
//! which may be registered by any thread at that moment. Registrations race
//! frees (invalidations), deregistrations race invalidations.
//!
//! Checks: a registration fails only when its buffer was freed meanwhile (a
//! failure while the slot still holds the buffer is a bug), and only with
//! EFAULT (declined or revoked), EAGAIN (invalidated before activation, on
//! a legacy core) or EINVAL (the driver's answer to a pin or map of a freed
//! range, which MOFED passes on from a client that pins in get_pages);
//! deregistrations and frees never fail. At the end every live MR has the
//! state its buffer calls for (mapped with the GPU's DMA addresses, or
//! invalidated), everything is deregistered and freed, nothing is pinned,
//! mapped or registered anywhere, no simulator counted a contract violation,
//! and the counters of the GPU and the core agree, and with the module's
//! statistics when it has them (not the anchor).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{
    clock_seed, expect_held, leftovers, opt, raced_maps, tally, Fail, Pages, Problems, Stack,
};
use crate::cli::Args;
use crate::ctl::{self, delta, Ctl};
use crate::parse::MrInfo;
use crate::rng::Rng;
use crate::sim::{CORE, GPU};

const K64: u64 = 64 << 10;
const LAYOUTS: [&str; 3] = ["contiguous", "fragmented", "shuffled"];
/// MRs a thread keeps at most.
const MAX_MRS: usize = 24;

#[derive(Clone, Copy, Debug)]
struct Buf {
    va: u64,
    size: u64,
}

struct Shared {
    slots: Vec<Mutex<Option<Buf>>>,
}

impl Shared {
    /// Whether slot @s still holds the buffer at @va.
    fn holds(&self, s: usize, va: u64) -> bool {
        self.slots[s].lock().unwrap().is_some_and(|b| b.va == va)
    }
}

/// A live MR and the buffer it was registered on.
struct Mr {
    id: u64,
    buf_va: u64,
}

#[derive(Default)]
struct Tally {
    ops: u64,
    allocs: u64,
    frees: u64,
    callbacks: u64,
    reg_ok: u64,
    reg_failed: BTreeMap<String, u64>,
    deregs: u64,
    problems: Problems,
}

struct Params {
    /// Whether some client claims MRs without / with invalidation support.
    claimable: [bool; 2],
    ops: u64,
    seed: u64,
    inval_pct: u64,
    max_pages: u64,
}

fn worker(t: usize, p: &Params, shared: &Shared) -> Result<(Tally, Vec<Mr>), String> {
    let mut gpu = Ctl::open(&GPU)?;
    let mut core = Ctl::open(&CORE)?;
    let mut rng = Rng::new(p.seed.wrapping_add(t as u64 * 0x1000_0001));
    let mut tally = Tally::default();
    let mut mrs: Vec<Mr> = Vec::new();
    let nslots = shared.slots.len() as u64;
    for _ in 0..p.ops {
        tally.ops += 1;
        let roll = rng.below(100);
        let s = rng.below(nslots) as usize;
        if ((45..88).contains(&roll) && !mrs.is_empty()) || mrs.len() >= MAX_MRS {
            // Deregister one of ours (its buffer may be gone).
            let mr = mrs.swap_remove(rng.below(mrs.len() as u64) as usize);
            match core.cmd(&format!("dereg {}", mr.id)) {
                Ok(_) => tally.deregs += 1,
                Err(e) => tally.problems.add(format!(
                    "thread {t}: dereg of MR {} failed ({}): {}",
                    mr.id,
                    e.name(),
                    e.why
                )),
            }
            continue;
        }
        let free = roll >= 88;
        let taken = {
            let mut slot = shared.slots[s].lock().unwrap();
            match *slot {
                None => {
                    // An empty slot: allocate (under its lock, once).
                    let size = rng.range(1, p.max_pages) * K64;
                    let layout = rng.pick(&LAYOUTS);
                    match gpu.number(&format!("alloc {size} {layout}")) {
                        Ok(va) => {
                            *slot = Some(Buf { va, size });
                            tally.allocs += 1;
                        }
                        Err(e) => tally.problems.add(format!("thread {t}: {e}")),
                    }
                    continue;
                }
                Some(b) if free => {
                    *slot = None;
                    b
                }
                Some(b) => b,
            }
        };
        if free {
            match gpu.cmd(&format!("free {:#x}", taken.va)) {
                Ok(reply) => {
                    tally.frees += 1;
                    let n = reply.trim().trim_start_matches("callbacks ");
                    tally.callbacks += n.parse::<u64>().unwrap_or(0);
                }
                Err(e) => tally.problems.add(format!(
                    "thread {t}: free of {:#x} failed ({}): {}",
                    taken.va,
                    e.name(),
                    e.why
                )),
            }
            continue;
        }
        // Register a random range of the buffer: aligned or not, any length.
        let b = taken;
        let (off, len) = if rng.chance(50) {
            let first = rng.below(b.size / K64);
            let pages = rng.range(1, b.size / K64 - first);
            (first * K64, pages * K64)
        } else {
            let off = rng.below(b.size);
            (off, rng.range(1, b.size - off))
        };
        let mut cmd = format!("reg {:#x} {len}", b.va + off);
        let inval = rng.chance(p.inval_pct);
        if inval {
            cmd += " inval";
        }
        let claimable = p.claimable[usize::from(inval)];
        if rng.chance(10) {
            cmd += " ro";
        }
        match core.cmd(&cmd) {
            Ok(reply) if !claimable => tally.problems.add(format!(
                "thread {t}: '{cmd}' registered (MR {}) though no client takes such MRs",
                reply.trim()
            )),
            Ok(reply) => match reply.trim().parse::<u64>() {
                Ok(id) => {
                    tally.reg_ok += 1;
                    mrs.push(Mr { id, buf_va: b.va });
                }
                Err(_) => tally
                    .problems
                    .add(format!("thread {t}: '{cmd}': reply '{}'", reply.trim())),
            },
            Err(e) => {
                *tally.reg_failed.entry(e.name()).or_default() += 1;
                if !claimable && e.errno == 14 {
                    // Declined by every client, as it must be.
                } else if !matches!(e.errno, 14 | 11 | 22) {
                    tally.problems.add(format!(
                        "thread {t}: '{cmd}' failed with {} ({})",
                        e.name(),
                        e.why
                    ));
                } else if shared.holds(s, b.va) {
                    tally.problems.add(format!(
                        "thread {t}: '{cmd}' failed ({}: {}) while its buffer was allocated",
                        e.name(),
                        e.why
                    ));
                }
            }
        }
    }
    Ok((tally, mrs))
}

/// The end state of the MRs still registered, then their deregistration.
fn check_survivors(
    stack: &Stack,
    shared: &Shared,
    mrs: &[Mr],
    problems: &mut Problems,
) -> Result<(), String> {
    let mut core = Ctl::open(&CORE)?;
    let pages = Pages::read()?;
    let live: Vec<u64> = shared
        .slots
        .iter()
        .filter_map(|s| s.lock().unwrap().map(|b| b.va))
        .collect();
    for mr in mrs {
        let info = MrInfo::parse(&core.must(&format!("show {}", mr.id))?)?;
        let client = info.get("client")?.to_string();
        let Some(c) = stack.client(&client) else {
            problems.add(format!("MR {}: unknown client {client}", mr.id));
            continue;
        };
        let (state, events) = (info.get("state")?, info.num("events")?);
        let freed = !live.contains(&mr.buf_va);
        if freed && c.revocable {
            let want = stack.invalidated_state(c);
            if state != want || events != 1 {
                problems.add(format!(
                    "MR {} ({client}) on a freed buffer: state {state}, {events} event(s); expected {want}, 1",
                    mr.id
                ));
            }
        } else if state != "mapped" || events != 0 {
            problems.add(format!(
                "MR {} ({client}, buffer {}): state {state}, {events} event(s); expected mapped, 0",
                mr.id,
                if freed { "freed" } else { "allocated" }
            ));
        } else if let Err(e) = pages.check(&info) {
            problems.add(format!("MR {}: {e}", mr.id));
        }
        core.must(&format!("dereg {}", mr.id))?;
    }
    Ok(())
}

pub fn run(args: &[String]) -> Result<String, Fail> {
    let a = Args::split(
        args,
        &[],
        &["threads", "ops", "seed", "slots", "inval", "max-size"],
    )?;
    a.expect(0, 0, "stress concurrent [options]")?;
    let threads = opt(&a, "threads", 8)?.max(1) as usize;
    let total = opt(&a, "ops", 100_000)?;
    let nslots = opt(&a, "slots", 16)?.max(1) as usize;
    let stack = Stack::read()?;
    let claims = |inval: bool| {
        stack
            .clients
            .iter()
            .any(|c| !c.skipped && (inval || !c.revocable) && (c.revocable || stack.persistent_api))
    };
    let params = Params {
        claimable: [claims(false), claims(true)],
        ops: total.div_ceil(threads as u64),
        seed: opt(&a, "seed", clock_seed())?,
        inval_pct: opt(&a, "inval", 75)?.min(100),
        max_pages: (opt(&a, "max-size", 4 << 20)? / K64).max(1),
    };
    let (g0, c0, s0) = (GPU.counters()?, CORE.counters()?, ctl::stats_opt());
    let shared = Arc::new(Shared {
        slots: (0..nslots).map(|_| Mutex::new(None)).collect(),
    });
    let params = Arc::new(params);

    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (shared, params) = (shared.clone(), params.clone());
            std::thread::spawn(move || worker(t, &params, &shared))
        })
        .collect();
    let mut all = Tally::default();
    let mut mrs = Vec::new();
    for h in handles {
        let (t, m) = h
            .join()
            .map_err(|_| "a stress thread panicked".to_string())??;
        all.ops += t.ops;
        all.allocs += t.allocs;
        all.frees += t.frees;
        all.callbacks += t.callbacks;
        all.reg_ok += t.reg_ok;
        all.deregs += t.deregs;
        for (k, v) in t.reg_failed {
            *all.reg_failed.entry(k).or_default() += v;
        }
        all.problems.merge(t.problems);
        mrs.extend(m);
    }
    let elapsed = t0.elapsed().as_secs_f64();

    // The survivors, then everything deregistered and freed.
    let mut problems = std::mem::take(&mut all.problems);
    check_survivors(&stack, &shared, &mrs, &mut problems)?;
    let mut gpu = Ctl::open(&GPU)?;
    for slot in &shared.slots {
        if let Some(b) = slot.lock().unwrap().take() {
            all.callbacks += gpu.number(&format!("free {:#x}", b.va))?;
        }
    }
    if let Err(e) = expect_held(0, 0) {
        problems.add(e);
    }
    for d in leftovers()? {
        problems.add(format!("left over: {d}"));
    }

    // The three parties' counters agree.
    let (g1, c1, s1) = (GPU.counters()?, CORE.counters()?, ctl::stats_opt());
    let reg_failed: u64 = all.reg_failed.values().sum();
    let mut agree = |what: &str, a: i64, b: i64| {
        if a != b {
            problems.add(format!("{what}: {a} != {b}"));
        }
    };
    agree(
        "core registrations vs successful regs",
        delta(&c0, &c1, "registrations"),
        all.reg_ok as i64,
    );
    agree(
        "core reg_failures vs failed regs",
        delta(&c0, &c1, "reg_failures"),
        reg_failed as i64,
    );
    agree(
        "GPU free callbacks vs the free commands' count",
        delta(&g0, &g1, "callbacks"),
        all.callbacks as i64,
    );
    // The module's own accounting, when it has some.
    let stats = s0.zip(s1);
    if let Some((s0, s1)) = &stats {
        agree(
            "module invalidations vs GPU free callbacks",
            delta(s0, s1, "invalidations"),
            delta(&g0, &g1, "callbacks"),
        );
        agree(
            "module invalidations_forwarded vs core invalidations",
            delta(s0, s1, "invalidations_forwarded"),
            delta(&c0, &c1, "invalidations"),
        );
        agree(
            "module registrations vs deregistrations",
            delta(s0, s1, "registrations"),
            delta(s0, s1, "deregistrations"),
        );
        agree(
            "module errors_out_of_order",
            delta(s0, s1, "errors_out_of_order"),
            0,
        );
    }
    let module_figures = match &stats {
        Some((s0, s1)) => format!(
            " (forwarded {}, unpins moved to release {})",
            delta(s0, s1, "invalidations_forwarded"),
            delta(s0, s1, "deferred_releases"),
        ),
        None => format!(" (core invalidations {})", delta(&c0, &c1, "invalidations")),
    };

    let figures = format!(
        "{}: {} threads, {} ops in {:.1} s ({:.0} ops/s), seed {}: \
         reg {} ok, {} failed ({}); dereg {}; alloc {}; free {}; \
         invalidations {}{}; {}",
        stack.describe(),
        threads,
        all.ops,
        elapsed,
        all.ops as f64 / elapsed,
        params.seed,
        all.reg_ok,
        reg_failed,
        tally(&all.reg_failed),
        all.deregs + mrs.len() as u64,
        all.allocs,
        all.frees,
        delta(&g0, &g1, "callbacks"),
        module_figures,
        raced_maps(&g0, &g1),
    );
    if problems.is_empty() {
        Ok(format!("{figures}\n"))
    } else {
        Err(Fail::Check(format!("{figures}\n{}", problems.report())))
    }
}
