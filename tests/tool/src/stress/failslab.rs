// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `stress failslab`: every memory allocation made with nvidia_peermem's code
//! on the stack fails in turn (needs a kernel with CONFIG_FAILSLAB,
//! CONFIG_FAIL_PAGE_ALLOC, CONFIG_FAULT_INJECTION_DEBUG_FS and
//! CONFIG_FAULT_INJECTION_STACKTRACE_FILTER: the debug kernel).
//!
//! How: failslab and fail_page_alloc get a stack filter, `require-start/end`
//! = the module's text (from /proc/kallsyms) and `reject-start/end` = the GPU
//! simulator's text, so that only allocations made by the module itself (or
//! by the core on its behalf) count, never those of the simulated driver
//! (but in the cudaFree step, where the simulator calls the module's free
//! callback, so that its frames are below the module's: no reject range);
//! probability 0, so that nothing fails but what `/proc/thread-self/fail-nth`
//! asks for: writing N there makes the N-th allocation of this thread that
//! passes the filter fail. For each step of a workload (two registrations, a
//! cudaFree of a registered buffer, two deregistrations) and N = 1, 2, ...
//! until the step makes fewer than N such allocations, the workload runs with
//! that one allocation failing. `verbose=2` makes the kernel log each forced
//! failure with a stack trace, from which the allocation site (the first
//! frame in nvidia_peermem) is read back through /dev/kmsg.
//!
//! With `--init PARAMS` the module's own loading is swept instead:
//! `modprobe nvidia_peermem PARAMS` runs with fail-nth = N (the filter then
//! requires the module area, since the module's address is not known before
//! it loads), until a load passes without a forced failure.
//!
//! After each run: a registration failed or succeeded (either is fine), no
//! simulator counted a contract violation, nothing is left pinned, mapped,
//! registered or accounted; a failed load left no client registered.
//! Leaks of the module's own memory are kmemleak's job (GUEST_KMEMLEAK=1).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

use super::{expect_held, leftovers, tally, Fail, Problems, Stack};
use crate::cli::Args;
use crate::ctl::{get, Ctl};
use crate::parse::parse_u64;
use crate::sim::{CORE, GPU};

const O_NONBLOCK: i32 = 0o4000;
const DEBUGFS: &str = "/sys/kernel/debug";
/// x86-64's module mapping area (MODULES_VADDR .. MODULES_END with KASLR).
const MODULES_AREA: (u64, u64) = (0xffff_ffff_c000_0000, 0xffff_ffff_ff00_0000);

/// The text range of a loaded module, from /proc/kallsyms.
fn text_range(module: &str) -> Result<(u64, u64), String> {
    let tag = format!("[{module}]");
    let syms = fs::read_to_string("/proc/kallsyms").map_err(|e| format!("/proc/kallsyms: {e}"))?;
    let addrs: Vec<u64> = syms
        .lines()
        .filter(|l| l.ends_with(&tag))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let addr = u64::from_str_radix(w.next()?, 16).ok()?;
            matches!(w.next()?, "t" | "T").then_some(addr)
        })
        .collect();
    match (addrs.iter().min(), addrs.iter().max()) {
        (Some(&lo), Some(&hi)) if lo != 0 => Ok((lo, (hi | 0xfff) + 1)),
        _ => Err(format!(
            "no text symbols of {module} in /proc/kallsyms (not loaded, or addresses hidden by kptr_restrict)"
        )),
    }
}

fn write(path: &str, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("{path} = {value}: {e}"))
}

/// Sets up failslab and fail_page_alloc to fail only what fail-nth asks for,
/// only with @require on the stack and @reject not.
fn configure(require: (u64, u64), reject: (u64, u64)) -> Result<(), String> {
    for attr in ["failslab", "fail_page_alloc"] {
        let dir = format!("{DEBUGFS}/{attr}");
        if fs::metadata(&dir).is_err() {
            if attr == "failslab" {
                return Err(format!(
                    "{dir} missing: this kernel has no CONFIG_FAILSLAB/CONFIG_FAULT_INJECTION_DEBUG_FS (use the debug kernel)"
                ));
            }
            continue;
        }
        for (k, v) in [
            ("probability", "0".to_string()),
            ("interval", "1".into()),
            ("times", "-1".into()),
            ("space", "0".into()),
            ("verbose", "2".into()),
            ("verbose_ratelimit_burst", "100000".into()),
            ("task-filter", "N".into()),
            ("ignore-gfp-wait", "N".into()),
            ("stacktrace-depth", "32".into()),
            ("require-start", require.0.to_string()),
            ("require-end", require.1.to_string()),
            ("reject-start", reject.0.to_string()),
            ("reject-end", reject.1.to_string()),
        ] {
            let path = format!("{dir}/{k}");
            if k == "stacktrace-depth" || k.starts_with("re") {
                // Without CONFIG_FAULT_INJECTION_STACKTRACE_FILTER nothing would
                // confine the failures to the module.
                if fs::metadata(&path).is_err() {
                    return Err(format!(
                        "{path} missing: the kernel lacks CONFIG_FAULT_INJECTION_STACKTRACE_FILTER"
                    ));
                }
            } else if fs::metadata(&path).is_err() {
                continue;
            }
            write(&path, &v)?;
        }
        if attr == "fail_page_alloc" {
            let _ = write(&format!("{dir}/ignore-gfp-highmem"), "N");
            let _ = write(&format!("{dir}/min-order"), "0");
        }
    }
    Ok(())
}

/// Sets the rejected stack range of both fault attributes.
fn set_reject(reject: (u64, u64)) -> Result<(), String> {
    for attr in ["failslab", "fail_page_alloc"] {
        let dir = format!("{DEBUGFS}/{attr}");
        if fs::metadata(&dir).is_ok() {
            write(&format!("{dir}/reject-start"), &reject.0.to_string())?;
            write(&format!("{dir}/reject-end"), &reject.1.to_string())?;
        }
    }
    Ok(())
}

/// The kernel log from now on, read without blocking.
struct Kmsg(File);

impl Kmsg {
    fn open() -> Result<Self, String> {
        let mut f = OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open("/dev/kmsg")
            .map_err(|e| format!("/dev/kmsg: {e}"))?;
        f.seek(SeekFrom::End(0))
            .map_err(|e| format!("/dev/kmsg: {e}"))?;
        Ok(Kmsg(f))
    }

    /// The records logged since the last call.
    fn lines(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let rec = String::from_utf8_lossy(&buf[..n]);
                    let text = rec.split_once(';').map_or(&*rec, |(_, t)| t);
                    out.push(text.lines().next().unwrap_or("").to_string());
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(32) => continue, // EPIPE: records lost
                Err(_) => break,
            }
        }
        out
    }

    /// The allocation sites of the forced failures logged since the last
    /// call: the first three nvidia_peermem frames (the allocator's generic
    /// wrappers are monomorphised into the module, so the first frame alone
    /// would often name only those) after each "forcing a failure".
    fn sites(&mut self) -> Vec<String> {
        sites_of(self.lines())
    }
}

/// A readable form of a Rust v0 symbol (`_R...`): its identifiers joined
/// with `::` (generic arguments included, without the brackets); other
/// symbols as they are.
fn demangle(sym: &str) -> String {
    let Some(body) = sym.strip_prefix("_R") else {
        return sym.to_string();
    };
    let b = body.as_bytes();
    let (mut i, mut after_ident) = (0, false);
    let mut idents: Vec<&str> = Vec::new();
    while i < b.len() {
        // An identifier is <decimal length><name>, after another one or a '_'.
        if b[i].is_ascii_digit() && (after_ident || (i > 0 && b[i - 1] == b'_')) {
            let j = i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let n: usize = body[i..j].parse().unwrap_or(0);
            if n > 0 && j + n <= b.len() {
                idents.push(&body[j..j + n]);
                i = j + n;
                after_ident = true;
                continue;
            }
        }
        after_ident = false;
        i += 1;
    }
    if idents.is_empty() {
        sym.to_string()
    } else {
        idents.join("::")
    }
}

/// The allocation sites in kernel log lines (see [`Kmsg::sites`]).
fn sites_of(lines: Vec<String>) -> Vec<String> {
    let mut sites = Vec::new();
    let mut frames: Option<Vec<String>> = None;
    let finish = |f: Vec<String>, sites: &mut Vec<String>| {
        sites.push(if f.is_empty() {
            "(no nvidia_peermem frame)".to_string()
        } else {
            f.join(" < ")
        });
    };
    for l in lines {
        if l.contains("FAULT_INJECTION: forcing a failure") {
            if let Some(f) = frames.take() {
                finish(f, &mut sites);
            }
            frames = Some(Vec::new());
        } else if let Some(f) = frames.as_mut() {
            if l.contains("[nvidia_peermem]") && f.len() < 3 {
                let frame = l.trim().trim_start_matches("? ");
                f.push(demangle(frame.split('+').next().unwrap_or(frame)));
            }
        }
    }
    if let Some(f) = frames {
        finish(f, &mut sites);
    }
    sites
}

/// The name of a forced failure that was not logged.
const SILENT: &str = "(not logged: __GFP_NOWARN)";

const FAIL_NTH: &str = "/proc/thread-self/fail-nth";

fn set_fail_nth(n: u64) -> Result<(), String> {
    write(FAIL_NTH, &n.to_string())
}

/// Reads and clears fail-nth; true if the failure was injected.
fn injected() -> Result<bool, String> {
    let left = fs::read_to_string(FAIL_NTH).map_err(|e| format!("{FAIL_NTH}: {e}"))?;
    set_fail_nth(0)?;
    Ok(left.trim() == "0")
}

/// The workload's steps where the module runs in this thread.
const STEPS: [&str; 5] = ["reg-inval", "reg", "free", "dereg-1", "dereg-2"];

/// Runs the workload with the @n-th allocation of step @at failing; returns
/// whether it was injected, and the registrations' outcomes.
fn workload(
    gpu: &mut Ctl,
    core: &mut Ctl,
    at: usize,
    n: u64,
    reject: (u64, u64),
    outcomes: &mut BTreeMap<String, u64>,
) -> Result<bool, String> {
    let mut hit = false;
    let mut step = |i: usize, ctl: &mut Ctl, cmd: &str| -> Result<Option<u64>, String> {
        // In the cudaFree the GPU simulator calls the module (its free
        // callback): its frames are then below the module's, not above.
        let free = STEPS[i] == "free";
        if i == at {
            if free {
                set_reject((0, 0))?;
            }
            set_fail_nth(n)?;
        }
        let r = ctl.cmd(cmd).map(|s| s.trim().to_string());
        if i == at {
            hit = injected()?;
            if free {
                set_reject(reject)?;
            }
        }
        let key = match &r {
            Ok(_) => format!("{} ok", STEPS[i]),
            Err(e) => format!("{} {}", STEPS[i], e.name()),
        };
        if i == at && hit {
            *outcomes.entry(key).or_default() += 1;
        }
        match r {
            Ok(s) => Ok(parse_u64(s.split_whitespace().last().unwrap_or("")).ok()),
            Err(_) if STEPS[i].starts_with("reg") => Ok(None),
            Err(e) => Err(format!("'{cmd}' failed ({}): {}", e.name(), e.why)),
        }
    };
    // 34 MiB shuffled: about 544 SGEs (one per page), so the scatterlist
    // spills from the stack into a first chunk (510 entries) and links a
    // second (each allocation can fail).
    let a = gpu.number("alloc 34M shuffled")?;
    let b = gpu.number("alloc 1M shuffled")?;
    let r1 = step(0, core, &format!("reg {a:#x} 34M inval"))?;
    let r2 = step(1, core, &format!("reg {:#x} 500000", b + 4097))?;
    step(2, gpu, &format!("free {a:#x}"))?;
    if let Some(id) = r1 {
        step(3, core, &format!("dereg {id}"))?;
    }
    if let Some(id) = r2 {
        step(4, core, &format!("dereg {id}"))?;
    }
    gpu.must(&format!("free {b:#x}"))?;
    Ok(hit)
}

fn check_clean(what: &str, problems: &mut Problems, v0: (i64, i64)) -> Result<(), String> {
    if let Err(e) = expect_held(0, 0) {
        problems.add(format!("{what}: {e}"));
    }
    for d in leftovers()? {
        problems.add(format!("{what}: left over: {d}"));
    }
    let (g, c) = (GPU.counters()?, CORE.counters()?);
    if get(&g, "violations") != v0.0 || get(&c, "violations") != v0.1 {
        problems.add(format!("{what}: contract violations"));
    }
    Ok(())
}

fn sweep_registrations(problems: &mut Problems) -> Result<String, String> {
    let stack = Stack::read()?;
    let reject = text_range("nvidia")?;
    configure(text_range("nvidia_peermem")?, reject)?;
    let mut kmsg = Kmsg::open()?;
    let mut gpu = Ctl::open(&GPU)?;
    let mut core = Ctl::open(&CORE)?;
    let v0 = (
        get(&GPU.counters()?, "violations"),
        get(&CORE.counters()?, "violations"),
    );
    let mut outcomes = BTreeMap::new();
    let mut sites: BTreeSet<String> = BTreeSet::new();
    let mut per_step = BTreeMap::new();
    let mut runs = 0u64;
    for (at, name) in STEPS.iter().enumerate() {
        for n in 1.. {
            runs += 1;
            let hit = workload(&mut gpu, &mut core, at, n, reject, &mut outcomes)?;
            check_clean(&format!("{name} allocation #{n}"), problems, v0)?;
            let found = kmsg.sites();
            if !hit {
                break;
            }
            *per_step.entry(name.to_string()).or_insert(0u64) += 1;
            match found.as_slice() {
                [site] => {
                    sites.insert(site.clone());
                }
                // __GFP_NOWARN allocations fail without a log line (e.g. the
                // kmalloc a kvmalloc tries before falling back to vmalloc).
                [] => {
                    sites.insert(SILENT.to_string());
                }
                other => problems.add(format!(
                    "{name} allocation #{n}: {} forced failure(s) logged",
                    other.len()
                )),
            }
        }
    }
    // Each registration allocates (its context, its scatterlist): a step
    // that saw no fault site means the injection never worked.
    for step in ["reg-inval", "reg"] {
        if !per_step.contains_key(step) {
            problems.add(format!("{step}: no allocation could be failed"));
        }
    }
    Ok(format!(
        "{}: {} allocation fault sites by step ({}), {} distinct allocation call sites [{}], outcomes: {}; {runs} runs",
        stack.describe(),
        per_step.values().sum::<u64>(),
        tally(&per_step),
        sites.len(),
        sites.iter().cloned().collect::<Vec<_>>().join(", "),
        tally(&outcomes),
    ))
}

/// finit_module(2) of @path with @params, from this thread (so that its
/// fail-nth applies); the raw return value (0 or -errno).
fn finit_module(path: &str, params: &str) -> Result<i64, String> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    let file = File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let params = CString::new(params).map_err(|_| "parameters with a NUL".to_string())?;
    // SAFETY: finit_module(fd, const char *params, int flags) reads the open
    // file and the NUL-terminated string, both alive for the call.
    Ok(unsafe { sys_finit_module(i64::from(file.as_raw_fd()), params.as_ptr()) })
}

/// The raw system call (x86_64: number 313; the syscall instruction
/// clobbers rcx and r11 only).
///
/// # Safety
/// `params` points to a NUL-terminated string.
#[cfg(target_arch = "x86_64")]
unsafe fn sys_finit_module(fd: i64, params: *const std::ffi::c_char) -> i64 {
    let ret: i64;
    // SAFETY: the caller's; the registers are those of the x86_64 ABI.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") 313i64 => ret,
            in("rdi") fd,
            in("rsi") params,
            in("rdx") 0i64,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The raw system call (arm64: number 273, asm-generic's; `svc #0` returns
/// in x0 and clobbers nothing else).
///
/// # Safety
/// `params` points to a NUL-terminated string.
#[cfg(target_arch = "aarch64")]
unsafe fn sys_finit_module(fd: i64, params: *const std::ffi::c_char) -> i64 {
    let ret: i64;
    // SAFETY: the caller's; the registers are those of the arm64 ABI.
    unsafe {
        std::arch::asm!(
            "svc #0",
            in("x8") 273i64,
            inlateout("x0") fd => ret,
            in("x1") params,
            in("x2") 0i64,
            options(nostack),
        );
    }
    ret
}

/// The module's init function that creates the scatterlist slab caches
/// (`src/shim.c`), before anything in the init depends on the parameters.
const CACHE_SETUP: &str = "nvpm_sg_cache_create";

/// What one load sweep found.
struct InitSweep {
    figures: String,
    /// The last allocation of the slab caches' setup it failed (0: none
    /// before the first failure logged elsewhere).
    cache_setup: u64,
}

/// Where a load's forced failure was, as the kernel logged it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Place {
    /// Every logged site in the slab caches' setup.
    Setup,
    /// A logged site outside it.
    Elsewhere,
    /// Not logged (__GFP_NOWARN): anywhere.
    Silent,
    /// No forced failure: the load made fewer allocations.
    None,
}

/// The order of a load sweep. The slab caches' setup is one call, made
/// first: every allocation between two that failed in it is in it too, so
/// with a stride above 1 the sweep steps through the setup by that stride
/// (its allocations are kmem_cache_create's own, ~80 per cache on the debug
/// kernel), and as soon as a step lands anywhere else it goes back to the
/// allocation after the last one seen in the setup and sweeps every one from
/// there. A stride of 1 sweeps every allocation.
struct SweepOrder {
    stride: u64,
    striding: bool,
    /// The last allocation whose failure was logged in the setup.
    last_in_setup: Option<u64>,
    swept: BTreeSet<u64>,
}

impl SweepOrder {
    fn new(stride: u64) -> Self {
        SweepOrder {
            stride: stride.max(1),
            striding: stride > 1,
            last_in_setup: None,
            swept: BTreeSet::new(),
        }
    }

    /// The allocation to fail next after #@n failed at @place; None when the
    /// sweep is over.
    fn next(&mut self, n: u64, place: Place) -> Option<u64> {
        self.swept.insert(n);
        let in_setup = self.striding && self.last_in_setup.is_some();
        let next = match place {
            Place::Setup => {
                self.last_in_setup = Some(n);
                n + if self.striding { self.stride } else { 1 }
            }
            Place::Silent => n + if in_setup { self.stride } else { 1 },
            Place::Elsewhere | Place::None => {
                self.striding = false;
                match self.last_in_setup {
                    // Stepped out of the setup: sweep the allocations skipped.
                    Some(last) if in_setup && last + 1 < n => last + 1,
                    _ if place == Place::None => return None,
                    _ => n + 1,
                }
            }
        };
        Some((next..).find(|k| !self.swept.contains(k)).unwrap_or(next))
    }
}

/// Loads the module with @params and allocation #N failing, for N = @first,
/// @first + 1, ... until a load passes without a forced failure, stepping
/// through the slab caches' setup by @stride (see [`SweepOrder`]).
fn sweep_init(
    params: &str,
    first: u64,
    stride: u64,
    problems: &mut Problems,
) -> Result<InitSweep, String> {
    if fs::metadata("/sys/module/nvidia_peermem").is_ok() {
        return Err("nvidia_peermem is loaded: --init loads it itself".into());
    }
    let release =
        fs::read_to_string("/proc/sys/kernel/osrelease").map_err(|e| format!("osrelease: {e}"))?;
    let ko = format!("/lib/modules/{}/extra/nvidia_peermem.ko", release.trim());
    // The module's text is not known before it loads: require the module area.
    configure(MODULES_AREA, text_range("nvidia")?)?;
    let mut kmsg = Kmsg::open()?;
    let clients0 = get(&CORE.counters()?, "clients.live");
    let mut sites: BTreeSet<String> = BTreeSet::new();
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    let mut places: BTreeMap<u64, Place> = BTreeMap::new();
    let mut order = SweepOrder::new(stride);
    let mut next = Some(first);
    while let Some(n) = next {
        set_fail_nth(n)?;
        let ret = finit_module(&ko, params);
        let hit = injected()?;
        let ret = ret?;
        let found = kmsg.sites();
        let loaded = fs::metadata("/sys/module/nvidia_peermem").is_ok();
        if (ret == 0) != loaded {
            problems.add(format!(
                "load with allocation #{n} failing: finit_module returned {ret}, module {}",
                if loaded { "loaded" } else { "not loaded" }
            ));
        }
        let clients = get(&CORE.counters()?, "clients.live") - clients0;
        if loaded {
            if clients != 2 {
                problems.add(format!(
                    "loaded with allocation #{n} failing: {clients} client(s) registered"
                ));
            }
            let rm = Command::new("rmmod").arg("nvidia_peermem").status();
            if !rm.is_ok_and(|s| s.success()) {
                return Err(format!("rmmod nvidia_peermem failed after load #{n}"));
            }
        } else if clients != 0 {
            problems.add(format!(
                "failed load with allocation #{n} failing left {clients} client(s) registered"
            ));
        }
        let place = if !hit {
            Place::None
        } else if found.is_empty() {
            Place::Silent
        } else if found.iter().all(|s| s.starts_with(CACHE_SETUP)) {
            Place::Setup
        } else {
            Place::Elsewhere
        };
        next = order.next(n, place);
        if !hit {
            if next.is_none() && !loaded {
                problems.add(format!("load #{n} failed ({ret}) without a forced failure"));
            }
            continue;
        }
        places.insert(n, place);
        let outcome = if loaded {
            "loaded".to_string()
        } else {
            format!("refused {}", crate::parse::errno_name(-ret as i32))
        };
        *outcomes.entry(outcome).or_default() += 1;
        if found.is_empty() {
            sites.insert(SILENT.to_string());
        }
        sites.extend(found);
    }
    // The setup's allocations come first, in one call: up to the last logged
    // one in it, before any logged elsewhere, every allocation is in it (also
    // those not logged, __GFP_NOWARN).
    let cache_setup = places
        .iter()
        .take_while(|(_, p)| **p != Place::Elsewhere)
        .filter(|(_, p)| **p == Place::Setup)
        .map(|(n, _)| *n)
        .last()
        .unwrap_or(0);
    let last = places.keys().last().copied().unwrap_or(first);
    let skipped = (last + 1 - first) - places.len() as u64;
    let figures = format!(
        "module load ({params}): {} allocation fault sites from #{first}{}, {} distinct call sites [{}], outcomes: {}",
        places.len(),
        if skipped > 0 {
            format!(" (every {stride}th in {CACHE_SETUP}: {skipped} not failed)")
        } else {
            String::new()
        },
        sites.len(),
        sites.iter().cloned().collect::<Vec<_>>().join(", "),
        tally(&outcomes)
    );
    Ok(InitSweep {
        figures,
        cache_setup,
    })
}

/// How far before the end of the first load's cache setup the second sweep
/// starts: the setup's allocation count varies by a few from load to load.
const SETUP_MARGIN: u64 = 40;

/// `--init PARAMS [--then PARAMS2]`: sweeps the load with PARAMS, then with
/// PARAMS2 from shortly before the end of the slab caches' setup: the caches
/// are created before the parameters are used, so those allocations (most of
/// a load's) were swept with PARAMS. The second sweep must start inside the
/// setup, so that nothing after it is skipped.
fn sweep_loads(
    params: &str,
    then: Option<&str>,
    stride: u64,
    problems: &mut Problems,
) -> Result<String, String> {
    let first = sweep_init(params, 1, stride, problems)?;
    let Some(then) = then else {
        return Ok(first.figures);
    };
    let start = first.cache_setup.saturating_sub(SETUP_MARGIN).max(1);
    let second = sweep_init(then, start, stride, problems)?;
    if second.cache_setup == 0 {
        problems.add(format!(
            "load ({then}) from allocation #{start}: no forced failure in {CACHE_SETUP} before the \
             first elsewhere, so allocations after it may have been skipped (it ended at #{} in the load before)",
            first.cache_setup
        ));
    }
    Ok(format!(
        "{}; {} (before #{start}: {CACHE_SETUP}, swept above; it ended at #{} and #{})",
        first.figures, second.figures, first.cache_setup, second.cache_setup
    ))
}

pub fn run(args: &[String]) -> Result<String, Fail> {
    let a = Args::split(args, &[], &["init", "then", "setup-stride"])?;
    a.expect(
        0,
        0,
        "stress failslab [--init PARAMS [--then PARAMS] [--setup-stride N]]",
    )?;
    let mut problems = Problems::default();
    let then = a.options.get("then").map(String::as_str);
    let stride = match a.options.get("setup-stride") {
        None => 1,
        Some(v) => match parse_u64(v) {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(Fail::Usage(format!(
                    "--setup-stride: {v:?} is not a whole number of at least 1"
                )))
            }
        },
    };
    let figures = match a.options.get("init") {
        Some(params) => sweep_loads(params, then, stride, &mut problems),
        None if then.is_some() => return Err(Fail::Usage("--then needs --init".into())),
        None if a.options.contains_key("setup-stride") => {
            return Err(Fail::Usage("--setup-stride needs --init".into()))
        }
        None => sweep_registrations(&mut problems),
    };
    // Leave fault injection off whatever happened.
    let _ = write(FAIL_NTH, "0");
    let figures = figures?;
    if problems.is_empty() {
        Ok(format!("{figures}\n"))
    } else {
        Err(Fail::Check(format!("{figures}\n{}", problems.report())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocations a sweep fails, for a load whose allocations are at
    /// @places (#1 first; past the end: no forced failure).
    fn sweep(places: &[Place], stride: u64) -> Vec<u64> {
        let mut order = SweepOrder::new(stride);
        let (mut failed, mut next) = (Vec::new(), Some(1));
        while let Some(n) = next {
            failed.push(n);
            let place = places.get(n as usize - 1).copied().unwrap_or(Place::None);
            next = order.next(n, place);
        }
        failed
    }

    #[test]
    fn bad_stride_is_refused_before_anything_runs() {
        let usage =
            |args: &[&str]| match run(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()) {
                Err(Fail::Usage(m)) => m,
                _ => panic!("{args:?}: not a usage error"),
            };
        assert!(usage(&["--init", "", "--setup-stride", "0"]).contains("at least 1"));
        assert!(usage(&["--init", "", "--setup-stride", "x"]).contains("\"x\""));
        assert!(usage(&["--setup-stride", "8"]).contains("needs --init"));
    }

    #[test]
    fn stride_one_sweeps_every_allocation() {
        use Place::*;
        let load = [Setup, Silent, Setup, Elsewhere, Silent];
        assert_eq!(sweep(&load, 1), vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn stride_skips_only_inside_the_setup() {
        use Place::*;
        // 20 allocations in the setup (one not logged), then 3 elsewhere.
        let mut load = vec![Setup; 20];
        load[16] = Silent;
        load.extend([Elsewhere, Silent, Elsewhere]);
        let failed = sweep(&load, 8);
        // 1 and 9 logged in the setup, 17 silent (still stepping), 25 past
        // the end: back to the one after 9, then every one to the end.
        let mut expected = vec![1, 9, 17, 25];
        expected.extend((10..=24).filter(|n| *n != 17));
        assert_eq!(failed, expected);
    }

    #[test]
    fn a_silent_step_does_not_count_as_the_setup() {
        use Place::*;
        let mut load = vec![Setup; 8];
        load.push(Silent);
        load.extend([Elsewhere; 5]);
        // 9 is not known to be in the setup: from 17 (past the end) back to
        // 2, the one after the last logged in the setup.
        let failed = sweep(&load, 8);
        let mut expected = vec![1, 9, 17];
        expected.extend((2..=8).chain(10..=15));
        assert_eq!(failed, expected);
    }

    #[test]
    fn stride_goes_back_when_it_lands_elsewhere() {
        use Place::*;
        let mut load = vec![Setup; 10];
        load.extend(vec![Elsewhere; 10]);
        let failed = sweep(&load, 4);
        // 1, 5, 9 in the setup; 13 elsewhere: back to 10, then on from 14.
        assert_eq!(
            failed,
            vec![1, 5, 9, 13, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21]
        );
    }

    #[test]
    fn no_stride_before_the_setup_is_seen() {
        use Place::*;
        // Silent allocations first: not known to be in the setup.
        let load = [Silent, Silent, Setup, Setup, Setup, Setup, Elsewhere];
        assert_eq!(sweep(&load, 3), vec![1, 2, 3, 6, 9, 7, 8]);
    }

    #[test]
    fn sites_from_the_log() {
        let log = [
            "FAULT_INJECTION: forcing a failure.",
            "name failslab, interval 1, probability 0, space 0, times -1",
            "CPU: 0 UID: 0 PID: 99 Comm: nvpm-tool",
            "Call Trace:",
            " dump_stack_lvl+0x5d/0x80",
            " should_fail_ex+0x1a0/0x1f0",
            " __kmalloc_noprof+0x80/0x3c0",
            " _RNvXs_alloc_realloc+0x10/0x20 [nvidia_peermem]",
            " ? _RNvCs_acquire+0x42/0x300 [nvidia_peermem]",
            " _RNvCs_get_pages+0x12/0x30 [nvidia_peermem]",
            " _RNvCs_fourth+0x12/0x30 [nvidia_peermem]",
            "FAULT_INJECTION: forcing a failure.",
            " __kmalloc_noprof+0x80/0x3c0",
        ];
        let sites = sites_of(log.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            demangle("_RINvNtCsjDDFpHiMnx1_14nvidia_peermem8peer_mem7acquireNtNtB4_6client15RevocableClientEB4_"),
            "nvidia_peermem::peer_mem::acquire::client::RevocableClient"
        );
        assert_eq!(
            demangle("_RNvNtCsjDDFpHiMnx1_14nvidia_peermem6client7dma_map"),
            "nvidia_peermem::client::dma_map"
        );
        assert_eq!(demangle("nvpm_wq_create"), "nvpm_wq_create");
        assert_eq!(
            sites,
            vec![
                "_RNvXs_alloc_realloc < _RNvCs_acquire < _RNvCs_get_pages".to_string(),
                "(no nvidia_peermem frame)".to_string(),
            ]
        );
    }
}
