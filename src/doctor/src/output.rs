// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The two renderings of a [`Report`]: a table for people and JSON.

use std::fmt::Write;

use crate::json::{obj, Value};
use crate::report::{Report, Status};
use crate::topology::Topology;

/// The doctor's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The legend printed under the topology matrix.
pub const LEGEND: &str = "PIX = at most one PCIe switch, PXB = several bridges without the host bridge, \
                          PHB = through the host bridge, NODE = across host bridges of a NUMA node, \
                          SYS = across NUMA nodes";

/// The table: one line per check, its fix under each non-OK line, then the topology matrix.
pub fn human(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "nvidia-peermem-doctor {VERSION}: GPUDirect RDMA checks (root {})",
        report.root
    );
    let _ = writeln!(out);
    let width = report
        .checks
        .iter()
        .map(|c| c.id.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(out, "{:<7}{:<width$}  FINDING", "STATUS", "CHECK");
    let pad = " ".repeat(7 + width + 2);
    for check in &report.checks {
        let _ = writeln!(
            out,
            "{:<7}{:<width$}  {}",
            check.status.as_str(),
            check.id,
            check.summary
        );
        if check.status != Status::Ok {
            if let Some(fix) = &check.fix {
                let _ = writeln!(out, "{pad}fix: {fix}");
            }
        }
        if verbose {
            for line in &check.detail {
                let _ = writeln!(out, "{pad}- {line}");
            }
        }
    }
    let matrix = matrix(&report.topology);
    if !matrix.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "GPU-NIC topology (as nvidia-smi topo -m names it)");
        out.push_str(&matrix);
        let _ = writeln!(out, "Legend: {LEGEND}");
    }
    let _ = writeln!(out);
    let (fail, warn) = (report.count(Status::Fail), report.count(Status::Warn));
    let _ = writeln!(
        out,
        "Result: {} ({fail} blocking, {warn} warning{}), exit status {}",
        report.verdict(),
        if warn == 1 { "" } else { "s" },
        report.exit_code()
    );
    out
}

/// The GPU × NIC matrix; empty without pairs.
pub fn matrix(topo: &Topology) -> String {
    if topo.pairs.is_empty() {
        return String::new();
    }
    let nics: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| topo.nics[n].pci.is_some())
        .collect();
    let labels: Vec<String> = topo
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| format!("GPU{i} {}", g.pci.bdf))
        .collect();
    let first = labels.iter().map(String::len).max().unwrap_or(0);
    let cols: Vec<usize> = nics
        .iter()
        .map(|&n| topo.nics[n].name.len().max(4))
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:first$}", "");
    for (&n, w) in nics.iter().zip(&cols) {
        let _ = write!(out, "  {:<w$}", topo.nics[n].name);
    }
    out.push('\n');
    for (g, label) in labels.iter().enumerate() {
        let _ = write!(out, "{label:first$}");
        for (&n, w) in nics.iter().zip(&cols) {
            let link = topo
                .pairs
                .iter()
                .find(|p| p.gpu == g && p.nic == n)
                .map_or("-", |p| p.link.as_str());
            let _ = write!(out, "  {link:<w$}");
        }
        out.push('\n');
    }
    // No trailing blanks on the last column.
    out.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

/// The report as JSON: tool, verdict, checks, statistics and topology.
pub fn json(report: &Report) -> String {
    let checks = report
        .checks
        .iter()
        .map(|c| {
            obj([
                ("id", c.id.into()),
                ("status", c.status.as_str().into()),
                ("summary", c.summary.clone().into()),
                ("detail", c.detail.join("\n").into()),
                ("fix", c.fix.clone().into()),
            ])
        })
        .collect();
    let stats = report.stats.as_ref().map_or(Value::Null, |stats| {
        Value::Obj(
            stats
                .iter()
                .map(|s| {
                    let v = s
                        .value
                        .parse::<u64>()
                        .map_or_else(|_| Value::from(s.value.clone()), Value::Int);
                    (s.name.clone(), v)
                })
                .collect(),
        )
    });
    let topo = &report.topology;
    let node = |n: Option<u32>| n.map_or(Value::Null, |n| Value::Int(u64::from(n)));
    let gpus = topo
        .gpus
        .iter()
        .map(|g| {
            obj([
                ("pci", g.pci.bdf.clone().into()),
                ("numa_node", node(g.pci.numa_node)),
                ("bar1_bytes", g.bar1.into()),
            ])
        })
        .collect();
    let nics = topo
        .nics
        .iter()
        .map(|n| {
            obj([
                ("name", n.name.clone().into()),
                ("pci", n.pci.as_ref().map(|p| p.bdf.clone()).into()),
                ("numa_node", node(n.pci.as_ref().and_then(|p| p.numa_node))),
            ])
        })
        .collect();
    let pairs = topo
        .pairs
        .iter()
        .map(|p| {
            let nic = &topo.nics[p.nic];
            obj([
                ("gpu", topo.gpus[p.gpu].pci.bdf.clone().into()),
                ("nic", nic.name.clone().into()),
                ("nic_pci", nic.pci.as_ref().map(|d| d.bdf.clone()).into()),
                ("link", p.link.as_str().into()),
                (
                    "bridges",
                    Value::Arr(p.bridges.iter().map(|b| b.clone().into()).collect()),
                ),
            ])
        })
        .collect();
    obj([
        ("tool", "nvidia-peermem-doctor".into()),
        ("version", VERSION.into()),
        ("root", report.root.clone().into()),
        ("verdict", report.verdict().into()),
        (
            "exit_status",
            u64::from(report.exit_code().unsigned_abs()).into(),
        ),
        ("checks", Value::Arr(checks)),
        ("stats", stats),
        (
            "topology",
            obj([
                ("gpus", Value::Arr(gpus)),
                ("nics", Value::Arr(nics)),
                ("pairs", Value::Arr(pairs)),
            ]),
        ),
    ])
    .pretty()
}
