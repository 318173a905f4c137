// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `stress faults`: every provider call of a fixed workload fails in turn.
//!
//! The workload registers three MRs (aligned with invalidation, unaligned
//! without, and one whose buffer is then freed), deregisters them and frees
//! the buffers. A clean run counts the calls of each `nvidia_p2p_*` function;
//! then for each function F and each n up to its count, the workload runs
//! again with the GPU simulator's n-th next call of F failing (`inject F n
//! ERRNO`, the errno rotating through ENOMEM, EIO, EINVAL, EBUSY, ENODEV).
//! Each (F, n) is one fault site. After each run:
//!
//! - the failure was consumed (the site was reached);
//! - a failed `dma_map_pages` reaches the core: that registration fails with
//!   exactly the injected errno; a failed pin makes the client decline (the
//!   core then fails the registration with EFAULT, or another client takes
//!   it) or, in a client that pins in `get_pages`, fails the registration
//!   with the injected errno (MOFED passes it on); every other registration
//!   ends as in the clean run;
//! - no simulator counted a contract violation; nothing is left pinned,
//!   mapped, registered or accounted by the module, except:
//! - a failed `put_pages`/`put_pages_persistent` leaves the pin held by the
//!   driver (the real driver does the same). The module cannot undo that, but
//!   while the driver holds a revocable pin it can still call its free
//!   callback with the module's context: that context (and the module) must
//!   stay alive (the module's `contexts_live`, when it has statistics; its
//!   reference count in any case). Buffers whose pins the driver kept are not
//!   freed (that would fire the callback); they go when the simulator
//!   unloads.

use std::collections::BTreeMap;

use super::{tally, Fail, Problems, Stack};
use crate::cli::Args;
use crate::ctl::{self, delta, get, Ctl};
use crate::parse::{errno_name, parse_u64};
use crate::sim::{CORE, GPU};

const FUNCS: [&str; 6] = [
    "get_pages",
    "get_pages_persistent",
    "dma_map_pages",
    "dma_unmap_pages",
    "put_pages",
    "put_pages_persistent",
];
const ERRNOS: [i32; 5] = [12, 5, 22, 16, 19];
const EFAULT: i32 = 14;

/// What one run of the workload did.
struct Run {
    /// Each registration: its MR id or errno.
    regs: [Result<u64, i32>; 3],
    /// Calls of each function made by each registration.
    reg_calls: [BTreeMap<String, i64>; 3],
    /// Buffers left allocated because the driver still pins them.
    kept: Vec<u64>,
}

fn calls(c: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    FUNCS
        .iter()
        .map(|f| (f.to_string(), get(c, &format!("calls.{f}"))))
        .collect()
}

fn calls_delta(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    FUNCS
        .iter()
        .map(|f| (f.to_string(), b[*f] - a[*f]))
        .collect()
}

fn workload(gpu: &mut Ctl, core: &mut Ctl) -> Result<Run, String> {
    let a = gpu.number("alloc 1M fragmented")?;
    let b = gpu.number("alloc 2M shuffled")?;
    let c = gpu.number("alloc 512K contiguous")?;
    let cmds = [
        format!("reg {a:#x} 1M inval"),
        format!("reg {:#x} 1000000", b + 4097),
        format!("reg {c:#x} 512K inval"),
    ];
    let mut regs = [Err(0), Err(0), Err(0)];
    let mut reg_calls: [BTreeMap<String, i64>; 3] = Default::default();
    for (i, cmd) in cmds.iter().enumerate() {
        let before = calls(&GPU.counters()?);
        regs[i] = match core.cmd(cmd) {
            Ok(reply) => Ok(parse_u64(reply.trim())?),
            Err(e) => Err(e.errno),
        };
        reg_calls[i] = calls_delta(&before, &calls(&GPU.counters()?));
    }
    gpu.must(&format!("free {c:#x}"))?;
    // The module unpins before a dereg returns, so the checks below see
    // what is left at once (nothing is awaited).
    for id in regs.iter().filter_map(|r| r.as_ref().ok()) {
        core.must(&format!("dereg {id}"))?;
    }
    // What is still pinned in buffers a and b: kept by a put that failed.
    let pins = || -> Result<Vec<u64>, String> {
        GPU.read("pins")?
            .lines()
            .filter_map(|l| l.split(' ').nth(1).map(parse_u64))
            .collect()
    };
    let live = pins()?;
    let mut kept = Vec::new();
    for (va, size) in [(a, 1u64 << 20), (b, 2 << 20)] {
        if live.iter().any(|&p| (va..va + size).contains(&p)) {
            kept.push(va);
        } else {
            gpu.must(&format!("free {va:#x}"))?;
        }
    }
    Ok(Run {
        regs,
        reg_calls,
        kept,
    })
}

pub fn run(args: &[String]) -> Result<String, Fail> {
    let a = Args::split(args, &[], &["funcs"])?;
    a.expect(0, 0, "stress faults [--funcs F,F,...]")?;
    let funcs: Vec<String> = match a.options.get("funcs") {
        Some(list) => list.split(',').map(str::to_string).collect(),
        None => FUNCS.iter().map(|f| f.to_string()).collect(),
    };
    if let Some(f) = funcs.iter().find(|f| !FUNCS.contains(&f.as_str())) {
        return Err(Fail::Usage(format!("no provider function '{f}'")));
    }
    let stack = Stack::read()?;
    let mut gpu = Ctl::open(&GPU)?;
    let mut core = Ctl::open(&CORE)?;
    let mut problems = Problems::default();

    // The clean run: what each registration does, how often each function is called.
    let g0 = GPU.counters()?;
    let clean = workload(&mut gpu, &mut core)?;
    let total = calls_delta(&calls(&g0), &calls(&GPU.counters()?));
    if !clean.kept.is_empty() {
        return Err(Fail::Check("the clean run left buffers pinned".into()));
    }
    // Each registration's outcome with a fault is compared with the clean
    // run's, so that must be right (a function a failed registration does
    // not call would not be faulted at all): the two with invalidation
    // register; the one without only if the GPU pins persistently, else no
    // client claims it (EFAULT).
    let persistent_ok = if stack.persistent_api {
        Ok(())
    } else {
        Err(EFAULT)
    };
    for (i, want) in [Ok(()), persistent_ok, Ok(())].iter().enumerate() {
        if clean.regs[i].map(|_| ()) != *want {
            return Err(Fail::Check(format!(
                "registration {} in the clean run: {:?}, expected {:?}",
                i + 1,
                clean.regs[i],
                want
            )));
        }
    }

    let (mut sites, mut kept_pins) = (0u64, 0u64);
    let mut per_func: BTreeMap<String, u64> = BTreeMap::new();
    let mut reg_errnos: BTreeMap<String, u64> = BTreeMap::new();
    let (mut kept_bufs, mut kept_rev, mut kept_pers) = (0i64, 0i64, 0i64);
    for f in &funcs {
        for n in 1..=total[f.as_str()] {
            let errno = ERRNOS[(sites as usize) % ERRNOS.len()];
            let site = format!("{f} #{n} ({})", errno_name(errno));
            let (g0, c0, s0) = (GPU.counters()?, CORE.counters()?, ctl::stats_opt());
            gpu.must(&format!("inject {f} {n} -{errno} 1"))?;
            let run = workload(&mut gpu, &mut core)?;
            let armed = GPU.read("injections")?;
            gpu.must("inject off")?;
            sites += 1;
            *per_func.entry(f.clone()).or_default() += 1;
            if !armed.trim().is_empty() {
                problems.add(format!("{site}: not reached"));
                continue;
            }
            // Which registration made the failing call, per the clean run.
            let mut seen = 0;
            let culprit = (0..3).find(|&i| {
                seen += clean.reg_calls[i][f.as_str()];
                seen >= n
            });
            for i in 0..3 {
                let (want, got) = (&clean.regs[i], &run.regs[i]);
                if let Err(e) = got {
                    *reg_errnos.entry(errno_name(*e)).or_default() += 1;
                }
                let ok = match (culprit == Some(i), f.as_str()) {
                    (true, "dma_map_pages") => *got == Err(errno),
                    (true, "get_pages" | "get_pages_persistent") => {
                        *got == Err(EFAULT) || *got == Err(errno) || got.is_ok()
                    }
                    _ => want.is_ok() == got.is_ok() && (got.is_ok() || want == got),
                };
                if !ok {
                    problems.add(format!(
                        "{site}: registration {} ended {}, expected {}",
                        i + 1,
                        match got {
                            Ok(_) => "registered".to_string(),
                            Err(e) => format!("with {}", errno_name(*e)),
                        },
                        if culprit == Some(i) && f == "dma_map_pages" {
                            format!("{} (the injected errno)", errno_name(errno))
                        } else {
                            match want {
                                Ok(_) => "registered".to_string(),
                                Err(e) => format!("with {}", errno_name(*e)),
                            }
                        }
                    ));
                }
            }
            let kept_now = run.kept.len() as i64;
            let (g1, c1, s1) = (GPU.counters()?, CORE.counters()?, ctl::stats_opt());
            let new_rev = get(&g1, "pins.live") - get(&g0, "pins.live");
            let new_pers = get(&g1, "pins.persistent") - get(&g0, "pins.persistent");
            let put_failed = f.starts_with("put_pages");
            if new_rev + new_pers != 0 && !(put_failed && new_rev + new_pers == 1) {
                problems.add(format!(
                    "{site}: {new_rev} revocable and {new_pers} persistent pin(s) left"
                ));
            }
            if new_rev + new_pers > 0 {
                kept_pins += 1;
            }
            if let (Some(s0), Some(s1)) = (&s0, &s1) {
                let contexts = get(s1, "contexts_live") - get(s0, "contexts_live");
                if contexts < new_rev {
                    problems.add(format!(
                        "{site}: the driver kept a revocable pin after the failed put, whose free \
                         callback still gets the module's context, but the module dropped that \
                         context ({contexts} left): a cudaFree of the buffer would call back into \
                         freed memory (or an unloaded module)"
                    ));
                }
            }
            // Whatever the module: while the driver may still call one of its
            // free callbacks, it must not be unloadable.
            if kept_rev + new_rev > 0 && ctl::module_refcnt() == Some(0) {
                problems.add(format!(
                    "{site}: the driver keeps {} revocable pin(s) whose free callback is the \
                     module's, but the module holds no reference to itself (refcnt 0): it can be \
                     unloaded, and a cudaFree of the buffer would call into freed memory",
                    kept_rev + new_rev
                ));
            }
            kept_bufs += kept_now;
            kept_rev += new_rev;
            kept_pers += new_pers;
            let mut want = |name: &str, got: i64, exp: i64| {
                if got != exp {
                    problems.add(format!("{site}: {name} is {got}, expected {exp}"));
                }
            };
            want("gpu buffers.live", get(&g1, "buffers.live"), kept_bufs);
            want("gpu mappings.live", get(&g1, "mappings.live"), 0);
            want("gpu violations", delta(&g0, &g1, "violations"), 0);
            want("gpu own_checks", delta(&g0, &g1, "own_checks"), 0);
            want("core mrs.live", get(&c1, "mrs.live"), 0);
            want("core violations", delta(&c0, &c1, "violations"), 0);
            if let (Some(s0), Some(s1)) = (&s0, &s1) {
                want("module pinned_bytes", get(s1, "pinned_bytes"), 0);
                want(
                    "module errors_out_of_order",
                    delta(s0, s1, "errors_out_of_order"),
                    0,
                );
            }
        }
    }
    let figures = format!(
        "{}: {sites} fault sites ({}), registrations failed: {}; \
         pins the driver kept after a failed put: {kept_pins} ({kept_rev} revocable, {kept_pers} persistent)",
        stack.describe(),
        tally(&per_func),
        tally(&reg_errnos),
    );
    if problems.is_empty() {
        Ok(format!("{figures}\n"))
    } else {
        Err(Fail::Check(format!("{figures}\n{}", problems.report())))
    }
}
