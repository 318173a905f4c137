// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The result of a run: one [`Check`] per line, the topology and the
//! module's statistics.

use crate::cuda::CudaAnswer;
use crate::nccl::{GdrMode, NcclPath};
use crate::topology::Topology;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Worth knowing; nothing is wrong or it cannot be told.
    Info,
    /// GPUDirect RDMA works, but slower or fragile.
    Warn,
    /// GPUDirect RDMA cannot work until this is fixed.
    Fail,
}

impl Status {
    /// The name printed in both outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Info => "INFO",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Stable identifier (`module.loaded`).
    pub id: &'static str,
    /// The verdict.
    pub status: Status,
    /// The finding, one line.
    pub summary: String,
    /// Supporting facts, one per line.
    pub detail: Vec<String>,
    /// What the administrator should do (every WARN and FAIL has one).
    pub fix: Option<String>,
}

impl Check {
    /// A check with no fix.
    pub fn new(id: &'static str, status: Status, summary: impl Into<String>) -> Check {
        Check {
            id,
            status,
            summary: summary.into(),
            detail: Vec::new(),
            fix: None,
        }
    }

    /// An OK line.
    pub fn ok(id: &'static str, summary: impl Into<String>) -> Check {
        Check::new(id, Status::Ok, summary)
    }

    /// An INFO line.
    pub fn info(id: &'static str, summary: impl Into<String>) -> Check {
        Check::new(id, Status::Info, summary)
    }

    /// A WARN line with its fix.
    pub fn warn(id: &'static str, summary: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Warn, summary).fix(fix)
    }

    /// A FAIL line with its fix.
    pub fn fail(id: &'static str, summary: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Fail, summary).fix(fix)
    }

    /// Sets the fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }

    /// Sets the detail lines.
    pub fn detail(mut self, detail: Vec<String>) -> Check {
        self.detail = detail;
        self
    }
}

/// One counter of the module's statistics file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Counter name.
    pub name: String,
    /// Its value as printed.
    pub value: String,
}

/// The live state the checks judged, for machines (the JSON `facts`
/// object): what is loaded, with which version and parameters, who exports
/// the two APIs the module sits between, and which other peer-memory
/// modules are loaded or installed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `uname -r`, if known.
    pub kernel_release: Option<String>,
    /// What the kernel can host.
    pub kernel: KernelFacts,
    /// `nvidia_peermem`, loaded or not.
    pub module: ModuleFacts,
    /// `nvidia.ko`: `None` when not loaded, else its version (if it has one).
    pub nvidia_driver: Option<Option<String>>,
    /// Whether `/proc/kallsyms` could be read (the two fields below need it).
    pub kallsyms_readable: bool,
    /// The modules exporting `nvidia_p2p_*` (`vmlinux` for the kernel image), sorted.
    pub p2p_exporters: Vec<String>,
    /// The module exporting `ib_register_peer_memory_client`, if any.
    pub peer_memory_provider: Option<String>,
    /// Other peer-memory modules that are loaded (`nv_peer_mem`, or NVIDIA's
    /// `nvidia_peermem` in this one's place).
    pub conflicts_loaded: Vec<String>,
    /// Installed module files (below `/lib/modules/<release>/`) of other peer-memory modules.
    pub conflicts_installed: Vec<String>,
}

/// The running kernel as the `kernel.*` checks read it; `None` where it cannot be told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// The configuration file read.
    pub config: Option<String>,
    /// `CONFIG_RUST`.
    pub rust: Option<bool>,
    /// How a build gets the kernel's Rust support: `kernel` or `carried`.
    pub rust_mode: Option<String>,
    /// `CONFIG_MODVERSIONS`.
    pub modversions: Option<bool>,
    /// `/proc/sys/kernel/modules_disabled`.
    pub modules_disabled: Option<bool>,
    /// Whether unsigned modules are refused.
    pub signatures_enforced: Option<bool>,
    /// The lockdown level (`none`, `integrity`, `confidentiality`).
    pub lockdown: Option<String>,
}

/// `nvidia_peermem` as `/sys/module` and `/lib/modules` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleFacts {
    /// Whether `/sys/module/nvidia_peermem` exists.
    pub loaded: bool,
    /// `version`, when loaded.
    pub version: Option<String>,
    /// `initstate`, when loaded.
    pub initstate: Option<String>,
    /// Whether the loaded module is NVIDIA's bundled one (its version is the driver's).
    pub nvidia_bundled: bool,
    /// Every parameter in `/sys/module/nvidia_peermem/parameters`, by name.
    pub parameters: Vec<(String, String)>,
    /// This project's module files for the running kernel (below `/lib/modules/<release>/`).
    pub installed: Vec<String>,
}

/// Everything a run found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The root directory the files were read below.
    pub root: String,
    /// The checks, in a fixed order.
    pub checks: Vec<Check>,
    /// The live state behind them.
    pub facts: Facts,
    /// GPUs, NICs and pairs.
    pub topology: Topology,
    /// The module's counters, when readable.
    pub stats: Option<Vec<Stat>>,
    /// NCCL's path and GDR mode of each pair of `topology.pairs`.
    pub nccl: Vec<(NcclPath, GdrMode)>,
    /// What libcuda said.
    pub cuda: CudaAnswer,
}

impl Report {
    /// The check with this id.
    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// How many checks have this status.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// 1 when a blocking problem (any FAIL) exists, else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.count(Status::Fail) > 0)
    }

    /// One word for the whole run: `blocked`, `degraded` or `ok`.
    pub fn verdict(&self) -> &'static str {
        if self.count(Status::Fail) > 0 {
            "blocked"
        } else if self.count(Status::Warn) > 0 {
            "degraded"
        } else {
            "ok"
        }
    }
}
