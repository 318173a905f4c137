// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The top floor's result of a run: one [`Check`] per line, the topology
//! and the module's statistics, as the host and the checks gave them.

use crate::checks::nccl::{GdrMode, NcclPath};
use crate::checks::{self, Check, Facts, Stat, Status};
use crate::host::cuda::{self, CudaAnswer};
use crate::host::root::Root;
use crate::host::topology::Topology;
use crate::host::{Host, PeerClient};

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
    /// ib_core's peer-memory clients and their counters.
    pub peers: Option<Vec<PeerClient>>,
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

/// Runs every check against the files below `root`: on `/`, libcuda is
/// asked (when present); below another root, its `cuda-probe.txt` record is read.
pub fn run(root: &Root) -> Report {
    let cuda = if root.base() == std::path::Path::new("/") {
        cuda::probe(false)
    } else {
        cuda::read_record(root).unwrap_or(CudaAnswer::NotAsked)
    };
    run_with(root, cuda)
}

/// Runs every check with libcuda's answer given.
pub fn run_with(root: &Root, cuda: CudaAnswer) -> Report {
    let host = Host::read(root, cuda);
    let verdicts = checks::judge(&host);
    Report {
        root: root.base().display().to_string(),
        checks: verdicts.checks,
        facts: verdicts.facts,
        topology: host.topo,
        stats: verdicts.stats,
        nccl: verdicts.nccl,
        cuda: host.cuda,
        peers: host.peers,
    }
}
