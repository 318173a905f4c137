// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! A simulator's ctl file kept open for many commands (the stress commands:
//! one open file per thread, no process per operation), and the module's
//! statistics file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};

use crate::parse::{errno_name, parse_counters, parse_u64};
use crate::sim::Sim;

/// nvidia_peermem's statistics file, under debugfs.
pub const STATS: &str = "nvidia_peermem/stats";

fn debugfs() -> String {
    std::env::var("NVPM_DEBUGFS").unwrap_or_else(|_| "/sys/kernel/debug".into())
}

/// A failed command: its errno (positive) and the simulator's explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError {
    pub errno: i32,
    pub why: String,
}

impl CmdError {
    pub fn name(&self) -> String {
        errno_name(self.errno)
    }
}

/// One open ctl file.
pub struct Ctl {
    file: File,
    what: &'static str,
    reply: String,
}

impl Ctl {
    pub fn open(sim: &Sim) -> Result<Self, String> {
        if !sim.loaded() {
            return Err(format!("the {} is not loaded", sim.what));
        }
        let path = format!("{}/{}/ctl", debugfs(), sim.debugfs);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(Ctl {
            file,
            what: sim.what,
            reply: String::with_capacity(4096),
        })
    }

    /// Runs @cmd; returns its reply, or its errno and explanation.
    pub fn cmd(&mut self, cmd: &str) -> Result<&str, CmdError> {
        let written = self.file.write(cmd.as_bytes());
        self.reply.clear();
        let _ = self.file.read_to_string(&mut self.reply);
        match written {
            Ok(n) if n == cmd.len() => Ok(&self.reply),
            Ok(n) => Err(CmdError {
                errno: 5,
                why: format!("'{cmd}': short write ({n} bytes)"),
            }),
            Err(e) => Err(CmdError {
                errno: e.raw_os_error().unwrap_or(5),
                why: self.reply.trim().trim_start_matches("error: ").to_string(),
            }),
        }
    }

    /// Runs @cmd, which must succeed.
    pub fn must(&mut self, cmd: &str) -> Result<String, String> {
        let what = self.what;
        self.cmd(cmd)
            .map(str::to_string)
            .map_err(|e| format!("{what}: '{cmd}' failed ({}): {}", e.name(), e.why))
    }

    /// Runs @cmd, which must succeed and reply with a number.
    pub fn number(&mut self, cmd: &str) -> Result<u64, String> {
        let reply = self.must(cmd)?;
        let word = reply.split_whitespace().last().unwrap_or("");
        parse_u64(word).map_err(|e| format!("'{cmd}': reply '{}': {e}", reply.trim()))
    }
}

/// nvidia_peermem's statistics (empty if the module is not loaded, or is
/// one without them: NVIDIA's, in the anchor suite).
pub fn stats() -> BTreeMap<String, i64> {
    stats_opt().unwrap_or_default()
}

/// nvidia_peermem's statistics, if the loaded module has them. The stress
/// commands check what the RDMA core and the driver see either way, and the
/// module's own accounting only when it has some.
pub fn stats_opt() -> Option<BTreeMap<String, i64>> {
    std::fs::read_to_string(format!("{}/{STATS}", debugfs()))
        .ok()
        .map(|s| parse_counters(&s))
}

/// nvidia_peermem's module reference count (None when it is not loaded). A
/// client whose free callback the driver may still call must hold one, or
/// the module could be unloaded under that callback.
pub fn module_refcnt() -> Option<i64> {
    let root = std::env::var("NVPM_SYSFS").unwrap_or_else(|_| "/sys".into());
    std::fs::read_to_string(format!("{root}/module/nvidia_peermem/refcnt"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// A counter of a map read with [`Sim::counters`] or [`stats`] (0 if absent).
pub fn get(map: &BTreeMap<String, i64>, name: &str) -> i64 {
    map.get(name).copied().unwrap_or(0)
}

/// @after - @before for counter @name.
pub fn delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>, name: &str) -> i64 {
    get(after, name) - get(before, name)
}
