// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Access to a simulator's control interface: its debugfs directory (a `ctl`
//! file and read-only views) and its module parameters.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

use crate::parse::{errno_name, parse_counters};

/// One of the two simulators.
pub struct Sim {
    /// What the messages call it.
    pub what: &'static str,
    /// Its directory under debugfs.
    pub debugfs: &'static str,
    /// Its module name (parameters under /sys/module/NAME/parameters).
    pub module: &'static str,
}

pub const GPU: Sim = Sim {
    what: "GPU simulator",
    debugfs: "nvidia_sim",
    module: "nvidia",
};

pub const CORE: Sim = Sim {
    what: "MOFED core simulator",
    debugfs: "mofed_peer_sim",
    module: "mofed_peer_sim",
};

/// Where debugfs and sysfs are (NVPM_DEBUGFS / NVPM_SYSFS override them).
fn root(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

impl Sim {
    fn dir(&self) -> PathBuf {
        root("NVPM_DEBUGFS", "/sys/kernel/debug").join(self.debugfs)
    }

    fn param_path(&self, name: &str) -> PathBuf {
        root("NVPM_SYSFS", "/sys")
            .join("module")
            .join(self.module)
            .join("parameters")
            .join(name)
    }

    /// Whether the simulator is loaded.
    pub fn loaded(&self) -> bool {
        self.dir().is_dir()
    }

    fn check_loaded(&self) -> Result<(), String> {
        if self.loaded() {
            Ok(())
        } else {
            Err(format!(
                "the {} is not loaded (no {}; modprobe {})",
                self.what,
                self.dir().display(),
                self.module
            ))
        }
    }

    /// Runs one ctl command and returns its reply.
    pub fn ctl(&self, cmd: &str) -> Result<String, String> {
        self.check_loaded()?;
        let path = self.dir().join("ctl");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let written = file.write(cmd.as_bytes());
        let mut reply = String::new();
        // The reply of a failed command carries its explanation.
        let _ = file.read_to_string(&mut reply);
        match written {
            Ok(n) if n == cmd.len() => Ok(reply),
            Ok(n) => Err(format!("'{cmd}': short write ({n} bytes)")),
            Err(e) => {
                let errno = e.raw_os_error().map_or_else(|| e.to_string(), errno_name);
                let why = reply.trim().trim_start_matches("error: ");
                Err(format!("{}: '{cmd}' failed ({errno}): {why}", self.what))
            }
        }
    }

    /// Reads one of the read-only views.
    pub fn read(&self, file: &str) -> Result<String, String> {
        self.check_loaded()?;
        let path = self.dir().join(file);
        fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn counters(&self) -> Result<BTreeMap<String, i64>, String> {
        Ok(parse_counters(&self.read("counters")?))
    }

    /// One counter.
    pub fn counter(&self, name: &str) -> Result<i64, String> {
        self.counters()?
            .get(name)
            .copied()
            .ok_or_else(|| format!("the {} has no counter '{name}'", self.what))
    }

    pub fn get_param(&self, name: &str) -> Result<String, String> {
        self.check_loaded()?;
        let path = self.param_path(name);
        fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn set_param(&self, name: &str, value: &str) -> Result<(), String> {
        self.check_loaded()?;
        let path = self.param_path(name);
        fs::write(&path, value).map_err(|e| format!("{} = '{value}': {e}", path.display()))
    }
}
