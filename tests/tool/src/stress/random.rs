// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `stress random`: a seeded sequence of operations (alloc, free, free of a
//! registered buffer, reg with random ranges and flags, bad ranges, dereg,
//! and with `--faults` provider failures injected before some of them), run
//! from one thread and checked against a model of the whole stack: which
//! client claims a range, which errno a registration gets, how many free
//! callbacks a cudaFree fires, the state of every MR, what the GPU, the core
//! and the module count (the module's statistics only when it has them; the
//! model's pins and injected failures are those of a client that pins in
//! `acquire`, so the anchor suite runs it without `--faults`). Every `--check-every` operations and at the end, the
//! SG list of every live MR is compared with the GPU's DMA addresses and all
//! counters with the model's; at the end everything is deregistered and
//! freed and nothing may be left. The same seed gives the same sequence (the
//! choices never depend on addresses or ids), so a failure is replayed with
//! the command it prints.
//!
//! Provider failures of put_pages are not injected: the driver then keeps the
//! pin (as the real one does), which no client can undo (`stress faults`
//! covers them).

use std::collections::BTreeMap;
use std::time::Instant;

use super::{clock_seed, expect_held, leftovers, opt, raced_maps, tally, Fail, Pages, Stack};
use crate::cli::Args;
use crate::ctl::{self, delta, get, CmdError, Ctl};
use crate::parse::{errno_name, MrInfo};
use crate::rng::Rng;
use crate::sim::{CORE, GPU};

const K64: u64 = 64 << 10;
const LAYOUTS: [&str; 3] = ["contiguous", "fragmented", "shuffled"];
const MAX_BUFFERS: usize = 24;
const MAX_MRS: usize = 48;
/// Fake VRAM the model allocates at most (allocated and kept by pins).
const VRAM_CAP: u64 = 512 << 20;
/// Errnos injected into provider calls.
const ERRNOS: [i32; 5] = [12, 5, 22, 16, 19];
const EFAULT: i32 = 14;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Func {
    GetPages,
    GetPagesPersistent,
    DmaMap,
    DmaUnmap,
}

impl Func {
    fn name(self) -> &'static str {
        match self {
            Func::GetPages => "get_pages",
            Func::GetPagesPersistent => "get_pages_persistent",
            Func::DmaMap => "dma_map_pages",
            Func::DmaUnmap => "dma_unmap_pages",
        }
    }
}

struct Buffer {
    size: u64,
    freed: bool,
}

struct Mr {
    id: u64,
    /// The allocated buffer the MR is on.
    buf: u64,
    client: usize,
    revocable: bool,
    invalidated: bool,
    /// Bytes pinned (the 64 KiB-aligned cover).
    pinned: u64,
}

/// Counter deltas the model expects since the start.
#[derive(Default, Debug)]
struct Expect {
    core_regs: i64,
    core_failures: i64,
    callbacks: i64,
    acquires: i64,
    releases: i64,
    declines: i64,
    map_errors: i64,
}

#[derive(Default)]
struct Figures {
    allocs: u64,
    frees: u64,
    reg_ok: u64,
    reg_failed: BTreeMap<String, u64>,
    deregs: u64,
    injected: u64,
    checkpoints: u64,
    sg_checks: u64,
}

struct Runner {
    gpu: Ctl,
    core: Ctl,
    rng: Rng,
    stack: Stack,
    bufs: BTreeMap<u64, Buffer>,
    mrs: Vec<Mr>,
    freed_ranges: Vec<(u64, u64)>,
    vram: u64,
    faults: bool,
    verbose: bool,
    op: u64,
    exp: Expect,
    fig: Figures,
    base: [BTreeMap<String, i64>; 3],
}

/// The 64 KiB-aligned cover of a range, if it has one.
fn covering(va: u64, size: u64) -> Option<(u64, u64)> {
    if size == 0 {
        return None;
    }
    let end = va.checked_add(size)?.checked_next_multiple_of(K64)?;
    Some((va & !(K64 - 1), end))
}

impl Runner {
    fn log(&self, what: &str) {
        if self.verbose {
            eprintln!("#{} {what}", self.op);
        }
    }

    fn allocated(&self) -> Vec<u64> {
        self.bufs
            .iter()
            .filter(|(_, b)| !b.freed)
            .map(|(&va, _)| va)
            .collect()
    }

    /// The allocated buffer holding [start, end).
    fn holder(&self, start: u64, end: u64) -> Option<u64> {
        self.bufs
            .range(..=start)
            .next_back()
            .filter(|(&va, b)| !b.freed && end <= va + b.size)
            .map(|(&va, _)| va)
    }

    fn revocable_pins(&self) -> i64 {
        self.mrs
            .iter()
            .filter(|m| m.revocable && !m.invalidated)
            .count() as i64
    }

    fn contexts(&self) -> i64 {
        let keep = self.stack.keeps_invalidated_context();
        self.mrs.iter().filter(|m| keep || !m.invalidated).count() as i64
    }

    fn expect_held(&self) -> Result<(), String> {
        expect_held(self.revocable_pins(), self.contexts())
    }

    /// Forgets a freed buffer once no pin keeps it.
    fn drop_if_unused(&mut self, va: u64) {
        let kept = self.mrs.iter().any(|m| m.buf == va && !m.revocable);
        if let Some(b) = self.bufs.get(&va) {
            if b.freed && !kept {
                self.vram -= b.size;
                self.bufs.remove(&va);
            }
        }
    }

    fn op_alloc(&mut self) -> Result<(), String> {
        if self.allocated().len() >= MAX_BUFFERS || self.vram >= VRAM_CAP {
            return self.op_free(false);
        }
        let r = self.rng.below(100);
        let pages = match r {
            0..30 => 1,
            30..70 => self.rng.range(2, 16),
            70..95 => self.rng.range(17, 128),
            _ => self.rng.range(129, 512),
        };
        let layout = *self.rng.pick(&LAYOUTS);
        let cmd = format!("alloc {} {layout}", pages * K64);
        let va = self.gpu.number(&cmd)?;
        self.log(&format!("{cmd} -> {va:#x}"));
        self.bufs.insert(
            va,
            Buffer {
                size: pages * K64,
                freed: false,
            },
        );
        self.vram += pages * K64;
        self.fig.allocs += 1;
        Ok(())
    }

    /// Frees a buffer; @registered: preferably one with revocable MRs (an
    /// invalidation).
    fn op_free(&mut self, registered: bool) -> Result<(), String> {
        let all = self.allocated();
        let with_mrs: Vec<u64> = all
            .iter()
            .copied()
            .filter(|va| {
                self.mrs
                    .iter()
                    .any(|m| m.buf == *va && m.revocable && !m.invalidated)
            })
            .collect();
        let pool = if registered && !with_mrs.is_empty() {
            with_mrs
        } else {
            all
        };
        if pool.is_empty() {
            return self.op_alloc();
        }
        let va = *self.rng.pick(&pool);
        self.expect_held()?;
        let cmd = format!("free {va:#x}");
        let n = self.gpu.number(&cmd)? as i64;
        self.log(&format!("{cmd} -> {n} callback(s)"));
        let mut want = 0;
        let legacy = !self.stack.keeps_invalidated_context();
        for m in self.mrs.iter_mut().filter(|m| m.buf == va) {
            if m.revocable && !m.invalidated {
                m.invalidated = true;
                want += 1;
            }
        }
        if n != want {
            return Err(format!(
                "'{cmd}' fired {n} free callback(s), expected {want}"
            ));
        }
        self.exp.callbacks += want;
        if legacy {
            self.exp.releases += want;
        }
        if let Some(b) = self.bufs.get_mut(&va) {
            b.freed = true;
            let size = b.size;
            self.freed_ranges.push((va, size));
            if self.freed_ranges.len() > 16 {
                self.freed_ranges.remove(0);
            }
        }
        self.drop_if_unused(va);
        self.fig.frees += 1;
        Ok(())
    }

    /// A range for a registration: mostly inside an allocated buffer, some
    /// bad ones. Returns (va, size, unchecked).
    fn pick_range(&mut self) -> Option<(u64, u64, bool)> {
        let all = self.allocated();
        if !self.rng.chance(12) {
            if all.is_empty() {
                return None;
            }
            let b = *self.rng.pick(&all);
            let size = self.bufs[&b].size;
            return Some(if self.rng.chance(40) {
                let first = self.rng.below(size / K64);
                let pages = self.rng.range(1, size / K64 - first);
                (b + first * K64, pages * K64, false)
            } else {
                let off = self.rng.below(size);
                (b + off, self.rng.range(1, size - off), false)
            });
        }
        let kind = self.rng.below(7);
        let any = if all.is_empty() {
            None
        } else {
            Some(*self.rng.pick(&all))
        };
        Some(match (kind, any) {
            (0, _) if !self.freed_ranges.is_empty() => {
                let &(va, size) = self.rng.pick(&self.freed_ranges);
                (va, size, false)
            }
            // Runs into the hole after the buffer.
            (1, Some(b)) => {
                let size = self.bufs[&b].size;
                let start = b + size - self.rng.range(1, K64);
                (start, self.rng.range(K64 + 1, 3 * K64), false)
            }
            // Starts in the hole (or below the first buffer), ends inside.
            (2, Some(b)) => (
                b - self.rng.range(1, K64),
                self.rng.range(K64 + 1, 2 * K64),
                false,
            ),
            (4, _) => (any.unwrap_or(0x7f40_0000_0000), 0, true),
            (5, _) => (u64::MAX - self.rng.below(1 << 20), 1 << 20, true),
            (6, Some(b)) => (b, 1 << 50, false),
            // Not GPU memory.
            _ => (
                0x10000 + self.rng.below(256) * K64,
                self.rng.range(1, 1 << 20),
                false,
            ),
        })
    }

    /// What the core's ownership search and registration do, per the model.
    /// Returns the owner (or the errno) and whether @inj gets consumed.
    fn predict(
        &mut self,
        va: u64,
        size: u64,
        inval: bool,
        inj: Option<(Func, i32)>,
    ) -> (Result<usize, i32>, bool) {
        let cover = covering(va, size);
        let holder = cover.and_then(|(s, e)| self.holder(s, e));
        let mut consumed = false;
        let mut owner = None;
        for (i, c) in self.stack.clients.iter().enumerate() {
            if c.skipped || (c.revocable && !inval) {
                continue;
            }
            if cover.is_none() {
                self.exp.declines += 1;
                continue;
            }
            let f = if c.revocable {
                Func::GetPages
            } else {
                Func::GetPagesPersistent
            };
            if !consumed && inj.is_some_and(|(g, _)| g == f) {
                consumed = true;
                self.exp.declines += 1;
                continue;
            }
            if holder.is_none() || (!c.revocable && !self.stack.persistent_api) {
                self.exp.declines += 1;
                continue;
            }
            owner = Some(i);
            break;
        }
        let Some(i) = owner else {
            self.exp.core_failures += 1;
            return (Err(EFAULT), consumed);
        };
        self.exp.acquires += 1;
        if let Some((Func::DmaMap, errno)) = inj {
            self.exp.releases += 1;
            self.exp.map_errors += 1;
            self.exp.core_failures += 1;
            return (Err(errno), true);
        }
        self.exp.core_regs += 1;
        (Ok(i), consumed)
    }

    /// Arms a failure of the next call of @f.
    fn arm(&mut self, f: Func, errno: i32) -> Result<(), String> {
        self.fig.injected += 1;
        self.gpu
            .must(&format!("inject {} 1 -{errno} 1", f.name()))?;
        Ok(())
    }

    /// Disarms; returns whether the armed failure was consumed.
    fn disarm(&mut self, f: Func) -> Result<bool, String> {
        let armed = GPU
            .read("injections")?
            .lines()
            .any(|l| l.split(' ').next() == Some(f.name()));
        self.gpu.must("inject off")?;
        Ok(!armed)
    }

    fn op_reg(&mut self) -> Result<(), String> {
        if self.mrs.len() >= MAX_MRS {
            return self.op_dereg();
        }
        let Some((va, size, unchecked)) = self.pick_range() else {
            return self.op_alloc();
        };
        let inval = self.rng.chance(60);
        let ro = self.rng.chance(10);
        let inj = (self.faults && self.rng.chance(5)).then(|| {
            let f = *self
                .rng
                .pick(&[Func::GetPages, Func::GetPagesPersistent, Func::DmaMap]);
            (f, *self.rng.pick(&ERRNOS))
        });
        let mut cmd = format!("reg {va:#x} {size}");
        for (on, word) in [(inval, " inval"), (ro, " ro"), (unchecked, " unchecked")] {
            if on {
                cmd += word;
            }
        }
        let (want, want_consumed) = self.predict(va, size, inval, inj);
        if let Some((f, errno)) = inj {
            self.arm(f, errno)?;
        }
        let got = self.core.cmd(&cmd).map(|r| r.trim().to_string());
        let consumed = match inj {
            Some((f, _)) => Some(self.disarm(f)?),
            None => None,
        };
        let inj_text = inj.map_or(String::new(), |(f, e)| {
            format!(" [{} fails with {}]", f.name(), errno_name(e))
        });
        self.log(&format!("{cmd}{inj_text} -> {got:?}"));
        if let (Some(c), Some((f, _))) = (consumed, inj) {
            if c != want_consumed {
                return Err(format!(
                    "'{cmd}': the injected {} failure was {}consumed, expected {}",
                    f.name(),
                    if c { "" } else { "not " },
                    if want_consumed {
                        "consumed"
                    } else {
                        "untouched"
                    }
                ));
            }
        }
        match (want, got) {
            (Ok(i), Ok(reply)) => {
                let id = crate::parse::parse_u64(&reply)?;
                let (s, e) = covering(va, size).expect("registered a range without cover");
                let c = &self.stack.clients[i];
                self.mrs.push(Mr {
                    id,
                    buf: self.holder(s, e).expect("registered outside a buffer"),
                    client: i,
                    revocable: c.revocable,
                    invalidated: false,
                    pinned: e - s,
                });
                self.fig.reg_ok += 1;
                Ok(())
            }
            (Err(w), Err(CmdError { errno, why })) if w == errno => {
                *self.fig.reg_failed.entry(errno_name(errno)).or_default() += 1;
                let _ = why;
                Ok(())
            }
            (want, got) => Err(format!(
                "'{cmd}'{inj_text}: expected {}, got {}",
                match want {
                    Ok(i) => format!("an MR of {}", self.stack.clients[i].name),
                    Err(e) => format!("failure {}", errno_name(e)),
                },
                match got {
                    Ok(id) => format!("MR {id}"),
                    Err(e) => format!("failure {} ({})", e.name(), e.why),
                }
            )),
        }
    }

    fn op_dereg(&mut self) -> Result<(), String> {
        if self.mrs.is_empty() {
            return self.op_reg();
        }
        let i = self.rng.below(self.mrs.len() as u64) as usize;
        let inject = self.faults && self.rng.chance(5) && !self.mrs[i].invalidated;
        let errno = *self.rng.pick(&ERRNOS);
        if inject {
            self.expect_held()?;
            self.arm(Func::DmaUnmap, errno)?;
        }
        let mr = self.mrs.remove(i);
        let cmd = format!("dereg {}", mr.id);
        self.core.must(&cmd)?;
        self.log(&format!(
            "{cmd}{}",
            if inject {
                format!(" [dma_unmap_pages fails with {}]", errno_name(errno))
            } else {
                String::new()
            }
        ));
        if self.stack.keeps_invalidated_context() || !mr.invalidated {
            self.exp.releases += 1;
        }
        if inject {
            self.expect_held()?;
            if !self.disarm(Func::DmaUnmap)? {
                return Err(format!(
                    "'{cmd}': the injected dma_unmap_pages failure was not consumed"
                ));
            }
        }
        self.drop_if_unused(mr.buf);
        self.fig.deregs += 1;
        Ok(())
    }

    /// Everything the model knows, compared with the stack.
    fn checkpoint(&mut self) -> Result<(), String> {
        self.fig.checkpoints += 1;
        self.expect_held()?;
        let (g, c, stats) = (GPU.counters()?, CORE.counters()?, ctl::stats_opt());
        let s = stats.clone().unwrap_or_default();
        let [g0, c0, s0] = &self.base;
        let pinned: i64 = self
            .mrs
            .iter()
            .filter(|m| !m.invalidated)
            .map(|m| m.pinned as i64)
            .sum();
        let persistent = self.mrs.iter().filter(|m| !m.revocable).count() as i64;
        let mut checks: Vec<(&str, i64, i64)> = vec![
            (
                "gpu buffers.live",
                get(&g, "buffers.live"),
                self.allocated().len() as i64,
            ),
            ("gpu pins.live", get(&g, "pins.live"), self.revocable_pins()),
            (
                "gpu pins.persistent",
                get(&g, "pins.persistent"),
                persistent,
            ),
            (
                "gpu mappings.live",
                get(&g, "mappings.live"),
                self.revocable_pins() + persistent,
            ),
            ("gpu violations", get(&g, "violations"), 0),
            ("gpu own_checks", get(&g, "own_checks"), 0),
            (
                "gpu callbacks",
                delta(g0, &g, "callbacks"),
                self.exp.callbacks,
            ),
            ("core mrs.live", get(&c, "mrs.live"), self.mrs.len() as i64),
            ("core violations", get(&c, "violations"), 0),
            (
                "core registrations",
                delta(c0, &c, "registrations"),
                self.exp.core_regs,
            ),
            (
                "core reg_failures",
                delta(c0, &c, "reg_failures"),
                self.exp.core_failures,
            ),
            (
                "core invalidations",
                delta(c0, &c, "invalidations"),
                self.exp.callbacks,
            ),
        ];
        // The module's own accounting, when it has some (not the anchor).
        let module_checks = [
            (
                "module contexts_live",
                get(&s, "contexts_live"),
                self.contexts(),
            ),
            ("module pinned_bytes", get(&s, "pinned_bytes"), pinned),
            (
                "module registrations",
                delta(s0, &s, "registrations"),
                self.exp.acquires,
            ),
            (
                "module deregistrations",
                delta(s0, &s, "deregistrations"),
                self.exp.releases,
            ),
            (
                "module declines",
                delta(s0, &s, "declines"),
                self.exp.declines,
            ),
            (
                "module invalidations",
                delta(s0, &s, "invalidations"),
                self.exp.callbacks,
            ),
            (
                "module errors_dma_map",
                delta(s0, &s, "errors_dma_map"),
                self.exp.map_errors,
            ),
            (
                "module errors_out_of_order",
                delta(s0, &s, "errors_out_of_order"),
                0,
            ),
            (
                "module invalidations_forwarded",
                delta(s0, &s, "invalidations_forwarded"),
                self.exp.callbacks,
            ),
        ];
        if stats.is_some() {
            checks.extend(module_checks);
        }
        // The fake VRAM in use: the buffers allocated and kept by pins.
        let frames = g
            .get("frames.used")
            .map(|&f| ("gpu frames.used", f, (self.vram / K64) as i64));
        let wrong: Vec<String> = checks
            .iter()
            .chain(frames.iter())
            .filter(|(_, got, want)| got != want)
            .map(|(n, got, want)| format!("{n} is {got}, expected {want}"))
            .collect();
        if !wrong.is_empty() {
            return Err(format!("counters: {}", wrong.join("; ")));
        }
        // Every MR as the model has it, SG lists against the GPU's addresses.
        let listed: Vec<u64> = CORE
            .read("mrs")?
            .lines()
            .filter_map(|l| crate::parse::parse_u64(l.split(' ').next()?).ok())
            .collect();
        let mut ids: Vec<u64> = self.mrs.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        let mut listed_sorted = listed.clone();
        listed_sorted.sort_unstable();
        if ids != listed_sorted {
            return Err(format!("the core lists MRs {listed:?}, the model {ids:?}"));
        }
        let pages = Pages::read()?;
        for m in &self.mrs {
            let info = MrInfo::parse(&self.core.must(&format!("show {}", m.id))?)?;
            let c = &self.stack.clients[m.client];
            let (want_state, want_events) = if m.invalidated {
                (self.stack.invalidated_state(c), 1)
            } else {
                ("mapped", 0)
            };
            let (client, state, events) =
                (info.get("client")?, info.get("state")?, info.num("events")?);
            if client != c.name || state != want_state || events != want_events {
                return Err(format!(
                    "MR {}: {client}, {state}, {events} event(s); expected {}, {want_state}, {want_events}",
                    m.id, c.name
                ));
            }
            if !m.invalidated {
                pages
                    .check(&info)
                    .map_err(|e| format!("MR {}: {e}", m.id))?;
                self.fig.sg_checks += 1;
            }
        }
        Ok(())
    }

    /// Deregisters and frees everything, then nothing may be left.
    fn finish(&mut self) -> Result<(), String> {
        while !self.mrs.is_empty() {
            let mr = self.mrs.remove(0);
            self.core.must(&format!("dereg {}", mr.id))?;
            if self.stack.keeps_invalidated_context() || !mr.invalidated {
                self.exp.releases += 1;
            }
            self.drop_if_unused(mr.buf);
        }
        // Every deregistration above unpinned before it returned.
        self.expect_held()?;
        for va in self.allocated() {
            self.gpu.must(&format!("free {va:#x}"))?;
            self.bufs.get_mut(&va).expect("listed").freed = true;
            self.drop_if_unused(va);
        }
        self.checkpoint()?;
        let left = leftovers()?;
        if !left.is_empty() {
            return Err(format!("left over at the end: {}", left.join(", ")));
        }
        Ok(())
    }
}

pub fn run(args: &[String]) -> Result<String, Fail> {
    let a = Args::split(
        args,
        &["faults", "verbose"],
        &["seed", "ops", "check-every"],
    )?;
    a.expect(0, 0, "stress random [options]")?;
    let seed = opt(&a, "seed", clock_seed())?;
    let ops = opt(&a, "ops", 20_000)?;
    let every = opt(&a, "check-every", 1000)?.max(1);
    let faults = a.flags.iter().any(|f| f == "faults");
    let replay = format!(
        "nvpm-tool stress random --seed {seed} --ops {ops} --check-every {every}{}",
        if faults { " --faults" } else { "" }
    );
    let mut r = Runner {
        gpu: Ctl::open(&GPU)?,
        core: Ctl::open(&CORE)?,
        rng: Rng::new(seed),
        stack: Stack::read()?,
        bufs: BTreeMap::new(),
        mrs: Vec::new(),
        freed_ranges: Vec::new(),
        vram: 0,
        faults,
        verbose: a.flags.iter().any(|f| f == "verbose"),
        op: 0,
        exp: Expect::default(),
        fig: Figures::default(),
        base: [GPU.counters()?, CORE.counters()?, ctl::stats()],
    };
    if get(&r.base[0], "buffers.live") != 0 || get(&r.base[1], "mrs.live") != 0 {
        return Err(Fail::Check(
            "stress random needs a clean stack (no buffers, no MRs)".into(),
        ));
    }
    let t0 = Instant::now();
    let fail = |r: &Runner, e: String| {
        Fail::Check(format!(
            "stress random: seed {seed}, operation #{}: {e}\nreplay (same stack, freshly loaded): {replay} --verbose",
            r.op
        ))
    };
    while r.op < ops {
        r.op += 1;
        let res = match r.rng.weighted(&[12, 8, 5, 42, 33]) {
            0 => r.op_alloc(),
            1 => r.op_free(false),
            2 => r.op_free(true),
            3 => r.op_reg(),
            _ => r.op_dereg(),
        };
        let res = res.and_then(|()| {
            if r.op % every == 0 {
                r.checkpoint()
            } else {
                Ok(())
            }
        });
        res.map_err(|e| fail(&r, e))?;
    }
    r.op += 1;
    r.finish()
        .map_err(|e| fail(&r, format!("at the end: {e}")))?;
    let secs = t0.elapsed().as_secs_f64();
    let reg_failed: u64 = r.fig.reg_failed.values().sum();
    Ok(format!(
        "{}: seed {seed}: {ops} ops in {secs:.1} s ({:.0} ops/s): \
         reg {} ok, {reg_failed} failed as predicted ({}); dereg {}; alloc {}; free {}; \
         invalidations {}; provider failures injected {}; {} checkpoints, {} SG lists checked; {}\n",
        r.stack.describe(),
        ops as f64 / secs,
        r.fig.reg_ok,
        tally(&r.fig.reg_failed),
        r.fig.deregs,
        r.fig.allocs,
        r.fig.frees,
        r.exp.callbacks,
        r.fig.injected,
        r.fig.checkpoints,
        r.fig.sg_checks,
        raced_maps(&r.base[0], &GPU.counters().map_err(|e| fail(&r, e))?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cover() {
        assert_eq!(covering(0x10000, 1), Some((0x10000, 0x20000)));
        assert_eq!(covering(0x1ffff, 2), Some((0x10000, 0x30000)));
        assert_eq!(covering(0x10000, 0), None);
        assert_eq!(covering(u64::MAX - 10, 100), None);
        // Ends at the last byte: the 64 KiB cover wraps.
        assert_eq!(covering(0xffff_ffff_fffe_0001, 0x1fffe), None);
        assert_eq!(
            covering(0xffff_ffff_fffe_0000, 0x10000),
            Some((0xffff_ffff_fffe_0000, 0xffff_ffff_ffff_0000))
        );
    }
}
