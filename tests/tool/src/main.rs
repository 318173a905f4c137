// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvpm-tool`: drives the GPU simulator (nvidia.ko) and the MOFED core
//! simulator (mofed_peer_sim.ko) of tests/sim, so that guest test scenarios
//! read as scenarios. Values go to stdout; failures to stderr with exit
//! status 1 (2 for a bad command line). See tests/tool/README.md.

mod cli;
mod ctl;
mod parse;
mod rng;
mod sgcheck;
mod sim;
mod stress;

use std::process::ExitCode;

use cli::{Usage, USAGE};
use parse::{parse_devices, parse_pairs, MrInfo};
use sim::{Sim, CORE, GPU};

/// Why a command failed.
enum Error {
    Usage(Usage),
    Failed(String),
}

impl From<Usage> for Error {
    fn from(u: Usage) -> Self {
        Error::Usage(u)
    }
}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Error::Failed(s)
    }
}

type Result<T> = std::result::Result<T, Error>;

fn usage<T>(msg: &str) -> Result<T> {
    Err(Error::Usage(Usage(msg.to_string())))
}

/// The one argument of a command that takes exactly one.
fn one<'a>(args: &'a [String], what: &str) -> Result<&'a str> {
    match args {
        [a] => Ok(a),
        _ => usage(&format!("expected {what}")),
    }
}

fn none(args: &[String]) -> Result<()> {
    if args.is_empty() {
        Ok(())
    } else {
        usage("this command takes no arguments")
    }
}

/// Shared by both simulators: counters, counter NAME, reset, and the views.
fn common(sim: &Sim, cmd: &str, args: &[String], views: &[&str]) -> Result<String> {
    match cmd {
        "counters" => {
            none(args)?;
            Ok(sim.read("counters")?)
        }
        "counter" => Ok(format!("{}\n", sim.counter(one(args, "a counter name")?)?)),
        "reset" => match args {
            [] => Ok(sim.ctl("reset")?),
            [v] if v == "--violations" => Ok(sim.ctl("reset violations")?),
            _ => usage("reset takes nothing or --violations"),
        },
        v if views.contains(&v) => {
            none(args)?;
            Ok(sim.read(v)?)
        }
        _ => usage(&format!("unknown command '{cmd}'")),
    }
}

fn gpu(cmd: &str, args: &[String]) -> Result<String> {
    match cmd {
        "alloc" => Ok(GPU.ctl(&cli::gpu_alloc(args)?)?),
        "free" => {
            let va = parse::parse_u64(one(args, "gpu free VA")?)?;
            let reply = GPU.ctl(&format!("free {va:#x}"))?;
            Ok(format!(
                "{}\n",
                reply.trim().trim_start_matches("callbacks ")
            ))
        }
        "inject" => Ok(GPU.ctl(&cli::gpu_inject(args)?)?),
        "wait-idle" => wait_idle(args),
        "set" => match args {
            [knob, value] => {
                GPU.set_param(knob, value)?;
                Ok(String::new())
            }
            _ => usage("expected gpu set KNOB VALUE"),
        },
        "get" => Ok(format!("{}\n", GPU.get_param(one(args, "gpu get KNOB")?)?)),
        "runs" => {
            let va = parse::parse_u64(one(args, "gpu runs VA")?)?;
            let pages = parse_pairs(&GPU.read("pages")?)?;
            let size = parse::buffer_size(&GPU.read("buffers")?, va)?;
            let bus: Vec<u64> = pages.range(va..va + size).map(|(_, &b)| b).collect();
            let runs = sgcheck::runs(&bus);
            Ok(format!(
                "{}\n",
                runs.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        }
        _ => common(
            &GPU,
            cmd,
            args,
            &["buffers", "pins", "pages", "devices", "injections"],
        ),
    }
}

/// Counters that are 0 when the GPU holds no pin and no mapping.
const GPU_IDLE: &[&str] = &["pins.live", "pins.persistent", "mappings.live"];

/// Waits until the GPU simulator holds no pin and no mapping (a client's
/// deferred unpins have run). Returns the nanoseconds from @since until it was
/// first seen idle, or 0 if it was idle at the first look.
fn wait_idle_since(since: std::time::Instant, timeout_ms: u64) -> Result<u128> {
    let mut first = true;
    loop {
        let counters = GPU.counters()?;
        let busy: Vec<String> = GPU_IDLE
            .iter()
            .filter_map(|n| match counters.get(*n) {
                Some(0) => None,
                v => Some(format!("{n} = {}", v.map_or("?".into(), i64::to_string))),
            })
            .collect();
        let waited = since.elapsed();
        if busy.is_empty() {
            return Ok(if first { 0 } else { waited.as_nanos() });
        }
        if waited.as_millis() >= u128::from(timeout_ms) {
            return Err(Error::Failed(format!(
                "the GPU simulator is still busy after {timeout_ms} ms: {}",
                busy.join(", ")
            )));
        }
        first = false;
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

/// `gpu wait-idle [--timeout-ms MS]`: waits until the GPU simulator holds no
/// pin and no mapping; prints the nanoseconds waited (0: idle at once). Fails
/// after the timeout (default 60 s).
fn wait_idle(args: &[String]) -> Result<String> {
    let a = cli::Args::split(args, &[], &["timeout-ms"])?;
    a.expect(0, 0, "gpu wait-idle [--timeout-ms MS]")?;
    let timeout_ms = match a.options.get("timeout-ms") {
        Some(t) => parse::parse_u64(t)?,
        None => 60_000,
    };
    let ns = wait_idle_since(std::time::Instant::now(), timeout_ms)?;
    Ok(format!("{ns}\n"))
}

/// `core reg|direct ... --count N [--drain]`: with --drain, after the timed
/// loop waits until the GPU simulator holds no pin or mapping and adds
/// `drain_ns D` at the end of the timing line: the time from the loop's end (the ctl
/// write returning) until a client's deferred unpins had all run, 0 if none
/// was left.
fn core_reg(direct: bool, args: &[String]) -> Result<String> {
    let drain = args.iter().any(|a| a == "--drain");
    let rest: Vec<String> = args.iter().filter(|a| *a != "--drain").cloned().collect();
    let cmd = cli::core_reg(direct, &rest)?;
    if !drain {
        return Ok(CORE.ctl(&cmd)?);
    }
    if !cmd.contains(" count=") {
        return usage("--drain goes with --count");
    }
    let reply = CORE.ctl(&cmd)?;
    let end = std::time::Instant::now();
    let ns = wait_idle_since(end, 60_000)?;
    // On the timing line, the first; "phase" lines (--profile) follow it.
    let (first, rest) = reply.split_once('\n').unwrap_or((reply.as_str(), ""));
    Ok(format!("{first} drain_ns {ns}\n{rest}"))
}

/// The MR @id as `show` describes it.
fn show(id: &str) -> Result<MrInfo> {
    let id = parse::parse_u64(id)?;
    Ok(MrInfo::parse(&CORE.ctl(&format!("show {id}"))?)?)
}

fn core(cmd: &str, args: &[String]) -> Result<String> {
    match cmd {
        "reg" | "direct" => core_reg(cmd == "direct", args),
        "dereg" => Ok(CORE.ctl(&cli::core_dereg(args)?)?),
        "show" => match args {
            [id] => Ok(CORE.ctl(&format!("show {}", parse::parse_u64(id)?))?),
            [id, field] => Ok(format!("{}\n", show(id)?.get(field)?)),
            _ => usage("expected core show ID [FIELD]"),
        },
        "state" | "events" => Ok(format!("{}\n", show(one(args, "an MR id")?)?.get(cmd)?)),
        "sg" => {
            let mr = show(one(args, "core sg ID")?)?;
            Ok(mr
                .sges
                .iter()
                .map(|(a, l)| format!("{a:#x} {l}\n"))
                .collect())
        }
        "mode" => {
            none(args)?;
            Ok(format!("{}\n", CORE.get_param("mode")?))
        }
        _ => common(&CORE, cmd, args, &["clients", "mrs"]),
    }
}

/// `expect-sg ID`: the SG list against the GPU simulator's addresses.
fn expect_sg(args: &[String]) -> Result<String> {
    let mr = show(one(args, "expect-sg ID")?)?;
    let view = sgcheck::MrView::from_info(&mr)?;
    let device = mr.get("device")?;
    let pages = parse_pairs(&GPU.read("pages")?)?;
    let offset = *parse_devices(&GPU.read("devices")?)?
        .get(device)
        .ok_or_else(|| format!("the GPU simulator has no DMA window for device {device}"))?;
    let summary =
        sgcheck::check(&view, &pages, offset).map_err(|e| format!("MR {}: {e}", args[0]))?;
    Ok(format!("MR {}: {summary}\n", args[0]))
}

/// Counters that must be 0 when a test has cleaned up.
const GPU_CLEAN: &[&str] = &[
    "buffers.live",
    "pins.live",
    "pins.persistent",
    "mappings.live",
    "violations",
    "own_checks",
];
const CORE_CLEAN: &[&str] = &["mrs.live", "violations"];

/// `expect-clean`: nothing left over in the loaded simulators.
fn expect_clean(args: &[String]) -> Result<String> {
    none(args)?;
    let mut dirty = Vec::new();
    for (sim, names) in [(&GPU, GPU_CLEAN), (&CORE, CORE_CLEAN)] {
        if !sim.loaded() {
            continue;
        }
        let counters = sim.counters()?;
        for name in names {
            match counters.get(*name) {
                Some(0) => {}
                Some(v) => dirty.push(format!("{} {name} = {v}", sim.module)),
                None => dirty.push(format!("{} has no counter {name}", sim.module)),
            }
        }
    }
    if dirty.is_empty() {
        Ok(String::new())
    } else {
        Err(Error::Failed(format!("not clean: {}", dirty.join(", "))))
    }
}

fn run(args: &[String]) -> Result<String> {
    match args {
        [group, cmd, rest @ ..] if group == "gpu" => gpu(cmd, rest),
        [group, cmd, rest @ ..] if group == "core" => core(cmd, rest),
        [cmd, rest @ ..] if cmd == "expect-sg" => expect_sg(rest),
        [cmd, rest @ ..] if cmd == "expect-clean" => expect_clean(rest),
        [cmd, rest @ ..] if cmd == "stress" => stress::run(rest).map_err(|e| match e {
            stress::Fail::Usage(m) => Error::Usage(Usage(m)),
            stress::Fail::Check(m) => Error::Failed(m),
        }),
        [cmd] if cmd == "help" || cmd == "--help" || cmd == "-h" => {
            Ok(format!("{USAGE}\n{}", stress::USAGE))
        }
        _ => usage("unknown command"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Error::Usage(Usage(msg))) => {
            eprintln!("nvpm-tool: {msg}\n\n{USAGE}\n{}", stress::USAGE);
            ExitCode::from(2)
        }
        Err(Error::Failed(msg)) => {
            eprintln!("nvpm-tool: {msg}");
            ExitCode::FAILURE
        }
    }
}
