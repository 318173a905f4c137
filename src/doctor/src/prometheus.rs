// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `--prometheus`: the module's statistics and the RDMA core's per-client
//! counters in the Prometheus text exposition format (version 0.0.4), for
//! node_exporter's textfile collector, so that an operator can see whether
//! anything still registers GPU memory through peer memory.

use std::fmt::Write;

use crate::host::{MODULE, PEER_COUNTERS};
use crate::report::Report;

/// The metric each of ib_core's per-client counters becomes, in the
/// order of [`PEER_COUNTERS`].
const CLIENT_METRICS: [(&str, &str); PEER_COUNTERS.len()] = [
    (
        "client_mrs_allocated_total",
        "Memory regions the RDMA core registered through this client.",
    ),
    (
        "client_mrs_deallocated_total",
        "Memory regions the RDMA core deregistered through this client.",
    ),
    (
        "client_pages_registered_total",
        "Pages registered through this client.",
    ),
    (
        "client_pages_deregistered_total",
        "Pages deregistered through this client.",
    ),
    (
        "client_bytes_registered_total",
        "Bytes registered through this client.",
    ),
    (
        "client_bytes_deregistered_total",
        "Bytes deregistered through this client.",
    ),
    (
        "client_invalidations_total",
        "Invalidations (free callbacks) of this client.",
    ),
];

/// A label value, escaped as the format requires.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric family with its samples: `(labels, value)`.
struct Family {
    name: String,
    kind: &'static str,
    help: String,
    samples: Vec<(String, String)>,
}

impl Family {
    fn new(name: &str, kind: &'static str, help: &str) -> Family {
        Family {
            name: format!("{MODULE}_{name}"),
            kind,
            help: help.to_string(),
            samples: Vec::new(),
        }
    }

    fn add(mut self, labels: &[(&str, &str)], value: impl ToString) -> Family {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
            .collect();
        let l = if l.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", l.join(","))
        };
        self.samples.push((l, value.to_string()));
        self
    }

    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (l, v) in &self.samples {
            let _ = writeln!(out, "{}{l} {v}", self.name);
        }
    }
}

/// Whether a client of ib_core pins persistently or revocably, by this
/// module's layout (`persistent_api_support`), or `unknown`.
fn client_kind(name: &str, persistent_api: Option<&str>) -> &'static str {
    match (name, persistent_api) {
        ("nv_mem", Some("1")) | ("nv_mem_nc", Some("0")) => "persistent",
        ("nv_mem", Some("0")) | ("nv_mem_fallback", Some("1")) => "revocable",
        _ => "unknown",
    }
}

/// The metrics of a run: module, statistics, ib_core's clients, the checks.
pub fn render(report: &Report) -> String {
    let m = &report.facts.module;
    let mut families = vec![Family::new(
        "loaded",
        "gauge",
        "Whether nvidia_peermem is loaded (1) or not (0).",
    )
    .add(
        &[
            ("version", m.version.as_deref().unwrap_or("")),
            (
                "nvidia_bundled",
                if m.nvidia_bundled { "true" } else { "false" },
            ),
        ],
        u8::from(m.loaded),
    )];
    let mut errors = Family::new(
        "errors_total",
        "counter",
        "Failed registrations by stage (the module's errors_* counters).",
    );
    for s in report.stats.iter().flatten() {
        let Ok(v) = s.value.parse::<u64>() else {
            continue;
        };
        let name: String = s
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if let Some(stage) = name.strip_prefix("errors_") {
            errors = errors.add(&[("stage", stage)], v);
            continue;
        }
        let family = match name.as_str() {
            "contexts_live" => Family::new(&name, "gauge", "Live registrations (client contexts)."),
            "pinned_bytes" => {
                Family::new(&name, "gauge", "GPU memory pinned for RDMA now, in bytes.")
            }
            _ => Family::new(
                &format!("{name}_total"),
                "counter",
                &format!("The module's {name} counter."),
            ),
        };
        families.push(family.add(&[], v));
    }
    families.push(errors);
    let persistent_api = m
        .parameters
        .iter()
        .find(|(k, _)| k == "persistent_api_support")
        .map(|(_, v)| v.as_str());
    for (i, (metric, help)) in CLIENT_METRICS.iter().enumerate() {
        let mut f = Family::new(metric, "counter", help);
        for client in report.peers.iter().flatten() {
            if let Some(v) = client.counters[i] {
                f = f.add(
                    &[
                        ("client", &client.name),
                        ("kind", client_kind(&client.name, persistent_api)),
                    ],
                    v,
                );
            }
        }
        families.push(f);
    }
    let mut checks = Family::new(
        "doctor_check_status",
        "gauge",
        "Each doctor check: 0 OK, 1 INFO, 2 WARN, 3 FAIL.",
    );
    for c in &report.checks {
        // CAST: the enum's four values.
        checks = checks.add(&[("check", c.id)], c.status as u8);
    }
    families.push(checks);
    let mut out = String::new();
    for f in &families {
        f.write(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn client_kinds() {
        assert_eq!(client_kind("nv_mem", Some("1")), "persistent");
        assert_eq!(client_kind("nv_mem_fallback", Some("1")), "revocable");
        assert_eq!(client_kind("nv_mem", Some("0")), "revocable");
        assert_eq!(client_kind("nv_mem_nc", Some("0")), "persistent");
        assert_eq!(client_kind("nv_mem", None), "unknown");
    }
}
