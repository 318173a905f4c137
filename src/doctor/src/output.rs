// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The two renderings of a [`Report`]: a table for people and JSON.
//! JSON is serde_json's, its objects in the order built here
//! (`preserve_order`), pretty-printed with two-space indents.

use std::fmt::Write;

use serde_json::{json, Map, Value};

use crate::checks::nccl::GdrMode;
use crate::checks::{Facts, Status};
use crate::host::cuda::CudaAnswer;
use crate::host::topology::Topology;
use crate::report::Report;

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
        .map_or_else(|_| Value::from(text), Value::from)
}

/// An object of `name value` lines as read, in their order.
fn object(pairs: impl Iterator<Item = (String, Value)>) -> Value {
    Value::Object(pairs.collect::<Map<String, Value>>())
}

/// A value as pretty JSON text, ending with a newline.
pub fn pretty(value: &Value) -> String {
    // A Value has only string keys: serializing it cannot fail.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// The `facts` object: the live state behind the checks.
pub fn facts(f: &Facts) -> Value {
    let m = &f.module;
    let parameters = object(
        m.parameters
            .iter()
            .map(|(name, value)| (name.clone(), number_or_string(value))),
    );
    let k = &f.kernel;
    json!({
        "kernel_release": f.kernel_release,
        "kernel": {
            "config": k.config,
            "rust": k.rust,
            "rust_mode": k.rust_mode,
            "modversions": k.modversions,
            "modules_disabled": k.modules_disabled,
            "signatures_enforced": k.signatures_enforced,
            "lockdown": k.lockdown,
        },
        "module": {
            "name": crate::host::MODULE,
            "loaded": m.loaded,
            "version": m.version,
            "initstate": m.initstate,
            "nvidia_bundled": m.nvidia_bundled,
            "parameters": parameters,
            "installed": m.installed,
        },
        "nvidia_driver": {
            "loaded": f.nvidia_driver.is_some(),
            "version": f.nvidia_driver.clone().flatten(),
        },
        "kallsyms_readable": f.kallsyms_readable,
        "p2p_exporters": f.p2p_exporters,
        "peer_memory_provider": f.peer_memory_provider,
        "conflicts": {
            "loaded": f.conflicts_loaded,
            "installed": f.conflicts_installed,
        },
    })
}

/// libcuda's answer: `{library, init, driver_api, gpus}`.
pub fn cuda(answer: &CudaAnswer) -> Value {
    let int = |v: Option<i32>| v.and_then(|v| u64::try_from(v).ok());
    let (library, init, api, gpus) = match answer {
        CudaAnswer::NotAsked => ("not-asked", None, None, Vec::new()),
        CudaAnswer::NoLibrary => ("none", None, None, Vec::new()),
        CudaAnswer::StaticBuild => ("static", None, None, Vec::new()),
        CudaAnswer::InitFailed(rc) => ("libcuda.so.1", Some(rc.to_string()), None, Vec::new()),
        CudaAnswer::Gpus { driver_api, gpus } => {
            ("libcuda.so.1", None, Some(*driver_api), gpus.clone())
        }
    };
    let gpus: Vec<Value> = gpus
        .iter()
        .map(|g| {
            json!({
                "pci": g.pci,
                "name": g.name,
                "gpu_direct_rdma_supported": int(g.gdr),
                "dma_buf_supported": int(g.dmabuf),
                "dma_buf_export": g.export,
            })
        })
        .collect();
    json!({
        "library": library,
        "init_error": init,
        "driver_api": int(api),
        "gpus": gpus,
    })
}

/// The report as JSON: tool, verdict, checks, facts, statistics and topology.
pub fn json(report: &Report) -> String {
    let checks: Vec<Value> = report
        .checks
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "status": c.status.as_str(),
                "summary": c.summary,
                "detail": c.detail.join("\n"),
                "fix": c.fix,
            })
        })
        .collect();
    let stats = report.stats.as_ref().map_or(Value::Null, |stats| {
        object(
            stats
                .iter()
                .map(|s| (s.name.clone(), number_or_string(&s.value))),
        )
    });
    let topo = &report.topology;
    let gpus: Vec<Value> = topo
        .gpus
        .iter()
        .map(|g| {
            json!({
                "pci": g.pci.bdf,
                "numa_node": g.pci.numa_node,
                "bar1_bytes": g.bar1.size(),
                "bar1_index": g.bar1.index().and_then(|i| u64::try_from(i).ok()),
            })
        })
        .collect();
    let nics: Vec<Value> = topo
        .nics
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "pci": n.pci.as_ref().map(|p| &p.bdf),
                "numa_node": n.pci.as_ref().and_then(|p| p.numa_node),
            })
        })
        .collect();
    let pairs: Vec<Value> = topo
        .pairs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let nic = &topo.nics[p.nic];
            let nccl = report.nccl.get(i);
            json!({
                "gpu": topo.gpus[p.gpu].pci.bdf,
                "nic": nic.name,
                "nic_pci": nic.pci.as_ref().map(|d| &d.bdf),
                "link": p.link.as_str(),
                "bridges": p.bridges,
                "nccl_path": nccl.map(|(path, _)| path.as_str()),
                "nccl_gdr": nccl.map(|(_, mode)| match mode {
                    GdrMode::Disabled => "disabled",
                    GdrMode::Default => "enabled",
                    GdrMode::Pci => "enabled-pcie-mapping",
                }),
            })
        })
        .collect();
    pretty(&json!({
        "tool": "nvidia-peermem-doctor",
        "version": VERSION,
        "root": report.root,
        "verdict": report.verdict(),
        "exit_status": report.exit_code().unsigned_abs(),
        "checks": checks,
        "facts": facts(&report.facts),
        "cuda": cuda(&report.cuda),
        "stats": stats,
        "topology": {
            "gpus": gpus,
            "nics": nics,
            "pairs": pairs,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout that `tests/guest/scenarios/60-doctor.sh` flattens line by
    /// line (one member or item per line, `{}` and `[]` for empty ones, two
    /// spaces per level) and JSON's escapes in strings.
    #[test]
    fn escapes_and_layout() {
        let v = json!({
            "s": "a\"b\\c\nd\u{1}\u{7f}é\t",
            "n": 7u64,
            "none": null,
            "empty": [],
            "list": [true, {}],
        });
        assert_eq!(
            pretty(&v),
            "{\n  \"s\": \"a\\\"b\\\\c\\nd\\u0001\u{7f}é\\t\",\n  \"n\": 7,\n  \"none\": null,\n  \
             \"empty\": [],\n  \"list\": [\n    true,\n    {}\n  ]\n}\n"
        );
    }

    /// Objects read from files keep the order of the file.
    #[test]
    fn objects_keep_their_order() {
        let v = object(
            ["zeta 1", "alpha two", "mid 3"]
                .iter()
                .filter_map(|line| line.split_once(' '))
                .map(|(k, v)| (k.to_string(), number_or_string(v))),
        );
        assert_eq!(
            pretty(&v),
            "{\n  \"zeta\": 1,\n  \"alpha\": \"two\",\n  \"mid\": 3\n}\n"
        );
    }

    /// One source of truth: what `--version` and the JSON print is VERSION.
    #[test]
    fn version_is_the_version_file() {
        assert_eq!(VERSION, include_str!("../../../VERSION").trim());
    }

    #[test]
    fn facts_as_json() {
        let f = Facts {
            module: crate::checks::ModuleFacts {
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
        let text = pretty(&facts(&f));
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
