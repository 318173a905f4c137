// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The two renderings of a [`Report`]: a table for people and JSON.

use std::fmt::Write;

use crate::cuda::CudaAnswer;
use crate::json::{obj, Value};
use crate::nccl::GdrMode;
use crate::report::{Facts, Report, Status};
use crate::topology::Topology;

/// The doctor's version: the repository's VERSION file, which
/// `scripts/stamp-version.sh` writes into `src/doctor/Cargo.toml`.
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

/// A value as it was read: a JSON number when it is an unsigned integer, else a string.
fn number_or_string(text: &str) -> Value {
    text.parse::<u64>()
        .map_or_else(|_| Value::from(text), Value::Int)
}

/// A list of strings.
fn strings(items: &[String]) -> Value {
    Value::Arr(items.iter().map(|s| s.clone().into()).collect())
}

/// The `facts` object: the live state behind the checks.
pub fn facts(f: &Facts) -> Value {
    let m = &f.module;
    let parameters = Value::Obj(
        m.parameters
            .iter()
            .map(|(name, value)| (name.clone(), number_or_string(value)))
            .collect(),
    );
    let k = &f.kernel;
    obj([
        ("kernel_release", f.kernel_release.clone().into()),
        (
            "kernel",
            obj([
                ("config", k.config.clone().into()),
                ("rust", k.rust.into()),
                ("modversions", k.modversions.into()),
                ("modules_disabled", k.modules_disabled.into()),
                ("signatures_enforced", k.signatures_enforced.into()),
                ("lockdown", k.lockdown.clone().into()),
            ]),
        ),
        (
            "module",
            obj([
                ("name", crate::checks::MODULE.into()),
                ("loaded", m.loaded.into()),
                ("version", m.version.clone().into()),
                ("initstate", m.initstate.clone().into()),
                ("nvidia_bundled", m.nvidia_bundled.into()),
                ("parameters", parameters),
                ("installed", strings(&m.installed)),
            ]),
        ),
        (
            "nvidia_driver",
            obj([
                ("loaded", f.nvidia_driver.is_some().into()),
                ("version", f.nvidia_driver.clone().flatten().into()),
            ]),
        ),
        ("kallsyms_readable", f.kallsyms_readable.into()),
        ("p2p_exporters", strings(&f.p2p_exporters)),
        (
            "peer_memory_provider",
            f.peer_memory_provider.clone().into(),
        ),
        (
            "conflicts",
            obj([
                ("loaded", strings(&f.conflicts_loaded)),
                ("installed", strings(&f.conflicts_installed)),
            ]),
        ),
    ])
}

/// libcuda's answer: `{library, init, driver_api, gpus}`.
pub fn cuda(answer: &CudaAnswer) -> Value {
    let int = |v: Option<i32>| v.and_then(|v| u64::try_from(v).ok()).into();
    let (library, init, api, gpus) = match answer {
        CudaAnswer::NotAsked => ("not-asked", None, None, Vec::new()),
        CudaAnswer::NoLibrary => ("none", None, None, Vec::new()),
        CudaAnswer::StaticBuild => ("static", None, None, Vec::new()),
        CudaAnswer::InitFailed(rc) => ("libcuda.so.1", Some(rc.to_string()), None, Vec::new()),
        CudaAnswer::Gpus { driver_api, gpus } => {
            ("libcuda.so.1", None, Some(*driver_api), gpus.clone())
        }
    };
    let gpus = gpus
        .iter()
        .map(|g| {
            obj([
                ("pci", g.pci.clone().into()),
                ("name", g.name.clone().into()),
                ("gpu_direct_rdma_supported", int(g.gdr)),
                ("dma_buf_supported", int(g.dmabuf)),
                ("dma_buf_export", g.export.clone().into()),
            ])
        })
        .collect();
    obj([
        ("library", library.into()),
        ("init_error", init.into()),
        ("driver_api", int(api)),
        ("gpus", Value::Arr(gpus)),
    ])
}

/// The report as JSON: tool, verdict, checks, facts, statistics and topology.
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
                .map(|s| (s.name.clone(), number_or_string(&s.value)))
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
                ("bar1_bytes", g.bar1.size().into()),
                (
                    "bar1_index",
                    g.bar1.index().and_then(|i| u64::try_from(i).ok()).into(),
                ),
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
        .enumerate()
        .map(|(i, p)| {
            let nic = &topo.nics[p.nic];
            let nccl = report.nccl.get(i);
            obj([
                ("gpu", topo.gpus[p.gpu].pci.bdf.clone().into()),
                ("nic", nic.name.clone().into()),
                ("nic_pci", nic.pci.as_ref().map(|d| d.bdf.clone()).into()),
                ("link", p.link.as_str().into()),
                (
                    "bridges",
                    Value::Arr(p.bridges.iter().map(|b| b.clone().into()).collect()),
                ),
                ("nccl_path", nccl.map(|(path, _)| path.as_str()).into()),
                (
                    "nccl_gdr",
                    nccl.map(|(_, mode)| match mode {
                        GdrMode::Disabled => "disabled",
                        GdrMode::Default => "enabled",
                        GdrMode::Pci => "enabled-pcie-mapping",
                    })
                    .into(),
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
        ("facts", facts(&report.facts)),
        ("cuda", cuda(&report.cuda)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One source of truth: what `--version` and the JSON print is VERSION.
    #[test]
    fn version_is_the_version_file() {
        assert_eq!(VERSION, include_str!("../../../VERSION").trim());
    }

    #[test]
    fn facts_as_json() {
        let f = Facts {
            module: crate::report::ModuleFacts {
                loaded: true,
                version: Some("1.0.0".into()),
                parameters: vec![
                    ("persistent_api_support".into(), "1".into()),
                    ("odd".into(), "Y".into()),
                ],
                ..Default::default()
            },
            nvidia_driver: Some(None),
            peer_memory_provider: Some("mofed_peer_sim".into()),
            p2p_exporters: vec!["nvidia".into()],
            ..Default::default()
        };
        let text = facts(&f).pretty();
        for line in [
            "\"loaded\": true,\n    \"version\": \"1.0.0\"",
            "\"persistent_api_support\": 1,",
            "\"odd\": \"Y\"",
            "\"nvidia_driver\": {\n    \"loaded\": true,\n    \"version\": null\n  }",
            "\"p2p_exporters\": [\n    \"nvidia\"\n  ]",
            "\"peer_memory_provider\": \"mofed_peer_sim\"",
            "\"kernel_release\": null",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }
}
