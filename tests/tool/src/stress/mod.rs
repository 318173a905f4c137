// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvpm-tool stress ...`: the stress suite's load generators and checkers
//! (tests/stress/README.md). They drive the simulators' ctl files
//! directly, from one or many threads, and check what the simulators (the
//! RDMA core and the driver) and, when the module has them, nvidia_peermem's
//! statistics say against what must hold. NVIDIA's own module (the anchor
//! suite) has no statistics: the checks of them are left out there.
//!
//! - `concurrent`: many threads registering, deregistering and freeing
//!   overlapping GPU buffers;
//! - `random`: a seeded, replayable single-threaded sequence checked against
//!   a model of the whole stack;
//! - `faults`: every provider call of a workload fails in turn;
//! - `failslab`: every allocation of the module fails in turn (debug kernel).

mod concurrent;
mod failslab;
mod faults;
mod random;

use std::collections::BTreeMap;

use crate::cli::Args;
use crate::ctl::{self, get};
use crate::parse::{parse_devices, parse_pairs, parse_u64, MrInfo};
use crate::sgcheck;
use crate::sim::{CORE, GPU};

pub const USAGE: &str = "\
Stress suite (tests/stress/README.md):
  stress concurrent [--threads N] [--ops N] [--seed S] [--slots N] [--inval PCT]
                    N threads register, deregister and free overlapping buffers
  stress random --seed S [--ops N] [--check-every N] [--faults] [--verbose]
                    a replayable random sequence checked against a model
  stress faults     every provider call of a workload fails in turn
  stress failslab [--init PARAMS [--then PARAMS]]
                    every module allocation fails in turn (debug kernel); --then:
                    a second load sweep, from shortly before the end of the
                    slab caches' setup
";

/// Why a stress command failed.
#[derive(Debug)]
pub enum Fail {
    /// A bad command line (the usage is printed).
    Usage(String),
    /// A failed check or operation.
    Check(String),
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Check(s)
    }
}

impl From<crate::cli::Usage> for Fail {
    fn from(u: crate::cli::Usage) -> Self {
        Fail::Usage(u.0)
    }
}

/// Runs `stress SUBCOMMAND ...`; Ok is what it prints (the figures).
pub fn run(args: &[String]) -> Result<String, Fail> {
    let usage = |m: &str| Err(Fail::Usage(m.to_string()));
    match args {
        [cmd, rest @ ..] => match cmd.as_str() {
            "concurrent" => concurrent::run(rest),
            "random" => random::run(rest),
            "faults" => faults::run(rest),
            "failslab" => failslab::run(rest),
            _ => usage(&format!("unknown stress command '{cmd}'")),
        },
        [] => usage("expected a stress command"),
    }
}

/// Parses a numeric option with a default.
fn opt(a: &Args, name: &str, default: u64) -> Result<u64, Fail> {
    match a.options.get(name) {
        Some(v) => parse_u64(v).map_err(Fail::Usage),
        None => Ok(default),
    }
}

/// A seed from the clock, when none is given (it is printed either way).
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// A peer-memory client as the core simulator lists it.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    pub name: String,
    /// Takes invalidations: nvidia_peermem pins its pages revocably.
    pub revocable: bool,
    /// Unmaps itself on invalidation (modern core, _ex client).
    pub unmaps: bool,
    /// Never offered ordinary MRs (a 4.x core, context private data set).
    pub skipped: bool,
}

/// The loaded stack: the core's generation and its clients, in order.
#[derive(Debug, Clone)]
pub struct Stack {
    pub mode: String,
    pub clients: Vec<ClientInfo>,
    /// The GPU simulator's persistent API knob.
    pub persistent_api: bool,
}

impl Stack {
    pub fn read() -> Result<Self, String> {
        let flag = |line: &str, key: &str| line.split(' ').any(|w| w == format!("{key}=1"));
        let clients = CORE
            .read("clients")?
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| ClientInfo {
                name: l.split(' ').next().unwrap_or("").to_string(),
                revocable: flag(l, "invalidation"),
                unmaps: flag(l, "unmaps_on_invalidate"),
                skipped: flag(l, "context_private_data"),
            })
            .collect();
        Ok(Stack {
            mode: CORE.get_param("mode")?,
            clients,
            persistent_api: matches!(GPU.get_param("persistent_api")?.as_str(), "Y" | "1"),
        })
    }

    /// "modern core, clients nv_mem+nv_mem_nc": the head of every figures line.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.clients.iter().map(|c| c.name.as_str()).collect();
        format!("{} core, clients {}", self.mode, names.join("+"))
    }

    pub fn client(&self, name: &str) -> Option<&ClientInfo> {
        self.clients.iter().find(|c| c.name == name)
    }

    /// The core's state of an MR of @client after an invalidation.
    pub fn invalidated_state(&self, client: &ClientInfo) -> &'static str {
        if self.mode == "legacy" {
            "released"
        } else if client.unmaps {
            "invalidated"
        } else {
            "unmapped"
        }
    }

    /// Whether the module keeps a context for an invalidated MR until its
    /// deregistration (a legacy core releases it inside the invalidation).
    pub fn keeps_invalidated_context(&self) -> bool {
        self.mode != "legacy"
    }
}

/// The GPU's pages and DMA windows, for SG checks.
pub struct Pages {
    pages: BTreeMap<u64, u64>,
    devices: BTreeMap<String, u64>,
}

impl Pages {
    pub fn read() -> Result<Self, String> {
        Ok(Pages {
            pages: parse_pairs(&GPU.read("pages")?)?,
            devices: parse_devices(&GPU.read("devices")?)?,
        })
    }

    /// The `expect-sg` check of one MR's `show` reply.
    pub fn check(&self, mr: &MrInfo) -> Result<(), String> {
        let view = sgcheck::MrView::from_info(mr)?;
        let device = mr.get("device")?;
        let offset = self
            .devices
            .get(device)
            .ok_or_else(|| format!("no DMA window for device {device}"))?;
        sgcheck::check(&view, &self.pages, *offset).map(|_| ())
    }
}

/// Checks that the GPU holds @pins revocable pins and the module @contexts
/// contexts now, without waiting: the module unpins before a deregistration
/// (or a failed registration) returns, so nothing may be left to settle. A
/// module without statistics (the anchor) is checked on the pins only.
pub fn expect_held(pins: i64, contexts: i64) -> Result<(), String> {
    let g = GPU.counters()?;
    let p = get(&g, "pins.live");
    let c = ctl::stats_opt().map(|s| get(&s, "contexts_live"));
    if p == pins && c.is_none_or(|c| c == contexts) {
        return Ok(());
    }
    Err(format!(
        "{p} revocable pins (expected {pins}), {} contexts (expected {contexts}) right after the calls returned",
        c.map_or("?".to_string(), |c| c.to_string())
    ))
}

/// What is left over once everything was deregistered and freed.
pub fn leftovers() -> Result<Vec<String>, String> {
    let mut dirty = Vec::new();
    let g = GPU.counters()?;
    // frames.used: the fake VRAM in use (absent from older simulators: 0).
    for name in [
        "buffers.live",
        "pins.live",
        "pins.persistent",
        "mappings.live",
        "frames.used",
    ] {
        if get(&g, name) != 0 {
            dirty.push(format!("gpu {name} = {}", get(&g, name)));
        }
    }
    let c = CORE.counters()?;
    if get(&c, "mrs.live") != 0 {
        dirty.push(format!("core mrs.live = {}", get(&c, "mrs.live")));
    }
    // Each kind of contract violation (and each of the GPU simulator's own
    // checks) by name: what went wrong, not how often.
    for (who, map) in [("gpu", &g), ("core", &c)] {
        for (name, v) in map.iter() {
            if (name.starts_with("violation.") || name.starts_with("own.")) && *v != 0 {
                dirty.push(format!("{who} {name} = {v}"));
            }
        }
    }
    let s = ctl::stats_opt().unwrap_or_default();
    for name in ["contexts_live", "pinned_bytes"] {
        if get(&s, name) != 0 {
            dirty.push(format!("nvidia_peermem {name} = {}", get(&s, name)));
        }
    }
    Ok(dirty)
}

/// The maps that read a table the driver had freed, between the counters
/// `before` and `after` of the GPU simulator: "raced maps N (the latest T us
/// after its table's free)". Each is the driver's race (a free between the
/// client's last look at its pin and the driver's read, within
/// `race_window_ms`); a later one is a `use_after_free` violation.
pub fn raced_maps(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> String {
    format!(
        "raced maps {} (the latest {} us after its table's free)",
        ctl::delta(before, after, "maps.raced"),
        get(after, "maps.raced_late_max_us"),
    )
}

/// "EFAULT 12, EAGAIN 3" (or "none").
pub fn tally(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Collects failed checks, keeping the first few messages.
#[derive(Default)]
pub struct Problems {
    pub count: u64,
    pub first: Vec<String>,
}

impl Problems {
    pub fn add(&mut self, msg: String) {
        self.count += 1;
        if self.first.len() < 20 {
            self.first.push(msg);
        }
    }

    pub fn merge(&mut self, other: Problems) {
        self.count += other.count;
        for m in other.first {
            if self.first.len() < 20 {
                self.first.push(m);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn report(&self) -> String {
        let mut s = format!("{} failed check(s):", self.count);
        for m in &self.first {
            s += "\n  ";
            s += m;
        }
        if self.count > self.first.len() as u64 {
            s += &format!("\n  ... and {} more", self.count - self.first.len() as u64);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_and_problems() {
        let mut m = BTreeMap::new();
        assert_eq!(tally(&m), "none");
        m.insert("EFAULT".to_string(), 3);
        m.insert("EAGAIN".to_string(), 1);
        assert_eq!(tally(&m), "EAGAIN 1, EFAULT 3");
        let mut p = Problems::default();
        assert!(p.is_empty());
        for i in 0..25 {
            p.add(format!("p{i}"));
        }
        assert_eq!(p.count, 25);
        assert_eq!(p.first.len(), 20);
        assert!(p.report().ends_with("... and 5 more"));
    }
}
