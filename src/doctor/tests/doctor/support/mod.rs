// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Runs the doctor against one fixture and compares with its `expect` file:
//! every verdict, the topology matrix, the JSON structure and the exit
//! status. The library reads the fixture's model in memory; the binary
//! reads a few fixtures written out, and must print what the library
//! renders from the model.

pub mod expect;
pub mod fixture;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use peermem_doctor::{output, prometheus, Report, Root};
use serde_json::Value as Json;

use expect::Expect;

/// The keys of a JSON object, in order (none for other values).
fn keys_of(v: &Json) -> Vec<&str> {
    v.as_object()
        .map_or_else(Vec::new, |o| o.keys().map(String::as_str).collect())
}

/// A fresh directory for one fixture tree.
fn scratch(name: &str) -> PathBuf {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("peermem-doctor-{}-{n}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Builds fixture `name` in a scratch directory.
pub fn build(name: &str) -> PathBuf {
    let dir = scratch(name);
    fixture::Tree::load(name)
        .and_then(|t| t.write(&dir))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    dir
}

/// Runs the binary with `args`; returns stdout and the exit status.
pub fn doctor(args: &[&str]) -> (String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvidia-peermem-doctor"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the doctor: {e}"));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Compares the library's report with the expectations.
fn compare_report(report: &Report, exp: &Expect, problems: &mut Vec<String>) {
    let mut ids: Vec<&str> = exp.checks.iter().map(|(_, id, _)| id.as_str()).collect();
    ids.dedup();
    let got: Vec<&str> = report.checks.iter().map(|c| c.id).collect();
    if ids != got {
        problems.push(format!(
            "check ids (in order) differ:\n  expected {ids:?}\n  got      {got:?}"
        ));
    }
    for (status, id, text) in &exp.checks {
        let Some(check) = report.check(id) else {
            continue;
        };
        if check.status.as_str() != status {
            problems.push(format!(
                "{id}: expected {status}, got {} ({})",
                check.status.as_str(),
                check.summary
            ));
        }
        if let Some(t) = text {
            let all = format!(
                "{}\n{}\n{}",
                check.summary,
                check.detail.join("\n"),
                check.fix.clone().unwrap_or_default()
            );
            if !all.contains(t.as_str()) {
                problems.push(format!("{id}: '{t}' not in summary, detail or fix"));
            }
        }
    }
    for check in &report.checks {
        let needs_fix = matches!(check.status.as_str(), "WARN" | "FAIL");
        if needs_fix && check.fix.as_deref().is_none_or(str::is_empty) {
            problems.push(format!(
                "{}: {} without a fix",
                check.id,
                check.status.as_str()
            ));
        }
    }
    if report.exit_code() != exp.exit {
        problems.push(format!(
            "exit code: expected {}, got {}",
            exp.exit,
            report.exit_code()
        ));
    }
    // The matrix: NIC columns, then one row per GPU.
    let topo = &report.topology;
    let nics: Vec<&str> = topo
        .nics
        .iter()
        .filter(|n| n.pci.is_some())
        .map(|n| n.name.as_str())
        .collect();
    if exp.topo.is_empty() {
        if !topo.pairs.is_empty() {
            problems.push(format!(
                "expected no GPU–NIC pair, got {}",
                topo.pairs.len()
            ));
        }
        return;
    }
    if nics != exp.nics {
        problems.push(format!(
            "NIC columns: expected {:?}, got {nics:?}",
            exp.nics
        ));
        return;
    }
    let gpus: Vec<&str> = topo.gpus.iter().map(|g| g.pci.bdf.as_str()).collect();
    let want_gpus: Vec<&str> = exp.topo.iter().map(|(g, _)| g.as_str()).collect();
    if gpus != want_gpus {
        problems.push(format!("GPU rows: expected {want_gpus:?}, got {gpus:?}"));
        return;
    }
    for (g, (gpu, links)) in exp.topo.iter().enumerate() {
        let got: Vec<&str> = (0..topo.nics.len())
            .filter(|&n| topo.nics[n].pci.is_some())
            .map(|n| {
                topo.pairs
                    .iter()
                    .find(|p| p.gpu == g && p.nic == n)
                    .map_or("-", |p| p.link.as_str())
            })
            .collect();
        if &got != links {
            problems.push(format!(
                "topology of {gpu}: expected {links:?}, got {got:?}"
            ));
        }
    }
}

/// Checks the structure and content of the `--json` output.
fn compare_json(text: &str, report: &Report, exp: &Expect, problems: &mut Vec<String>) {
    let doc = match serde_json::from_str::<Json>(text) {
        Ok(doc) => doc,
        Err(e) => {
            problems.push(format!("--json output does not parse: {e}"));
            return;
        }
    };
    let keys = [
        "tool",
        "version",
        "root",
        "verdict",
        "exit_status",
        "checks",
        "facts",
        "cuda",
        "stats",
        "topology",
    ];
    if keys_of(&doc) != keys {
        problems.push(format!("JSON keys: {:?}", keys_of(&doc)));
        return;
    }
    if doc.get("exit_status").and_then(Json::as_i64) != Some(i64::from(exp.exit)) {
        problems.push(format!("JSON exit_status: {:?}", doc.get("exit_status")));
    }
    let checks = doc
        .get("checks")
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice);
    if checks.len() != report.checks.len() {
        problems.push(format!(
            "JSON has {} checks, the report {}",
            checks.len(),
            report.checks.len()
        ));
    }
    for (c, want) in checks.iter().zip(&report.checks) {
        if keys_of(c) != ["id", "status", "summary", "detail", "fix"] {
            problems.push(format!("JSON check keys: {:?}", keys_of(c)));
            continue;
        }
        let s = |k: &str| c.get(k).and_then(Json::as_str);
        if s("id") != Some(want.id)
            || s("status") != Some(want.status.as_str())
            || s("summary").is_none()
        {
            problems.push(format!(
                "JSON check {:?} differs from {}",
                c.get("id"),
                want.id
            ));
        }
        if s("detail").is_none() {
            problems.push(format!("JSON {}: detail is not a string", want.id));
        }
        let fix_ok = match want.status.as_str() {
            "OK" => c.get("fix") == Some(&Json::Null),
            "WARN" | "FAIL" => s("fix").is_some_and(|f| !f.is_empty()),
            _ => true,
        };
        if !fix_ok {
            problems.push(format!(
                "JSON {}: fix {:?} for {}",
                want.id,
                c.get("fix"),
                want.status.as_str()
            ));
        }
    }
    for (name, value) in &exp.stats {
        let got = doc.get("stats").and_then(|s| s.get(name));
        let ok = match got {
            Some(Json::Number(n)) => value.parse::<u64>().ok() == n.as_u64(),
            Some(Json::String(s)) => s == value,
            _ => false,
        };
        if !ok {
            problems.push(format!("JSON stats.{name}: expected {value}, got {got:?}"));
        }
    }
    for (path, value) in &exp.facts {
        let got = path
            .split('.')
            .try_fold(doc.get("facts"), |v, key| Some(v?.get(key)))
            .flatten();
        let shown = got.map(show);
        if shown.as_deref() != Some(value.as_str()) {
            problems.push(format!(
                "JSON facts.{path}: expected {value}, got {}",
                shown.unwrap_or_else(|| "nothing".to_string())
            ));
        }
    }
    let topo = doc.get("topology");
    let pairs = topo
        .and_then(|t| t.get("pairs"))
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice);
    if topo.map(keys_of) != Some(vec!["gpus", "nics", "pairs"])
        || pairs.len() != report.topology.pairs.len()
    {
        problems.push("JSON topology: wrong keys or pair count".to_string());
    }
    for (p, want) in pairs.iter().zip(&report.topology.pairs) {
        let link = p.get("link").and_then(Json::as_str);
        if keys_of(p)
            != [
                "gpu",
                "nic",
                "nic_pci",
                "link",
                "bridges",
                "nccl_path",
                "nccl_gdr",
            ]
            || link != Some(want.link.as_str())
        {
            problems.push(format!("JSON pair {p:?}"));
        }
    }
}

/// A JSON value as a `fact` line writes it: strings bare, arrays as
/// `[a,b]`, numbers, `true`, `false` and `null` as in JSON.
fn show(v: &Json) -> String {
    match v {
        Json::Null => "null".to_string(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => n.to_string(),
        Json::String(s) => s.clone(),
        Json::Array(items) => format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(",")),
        Json::Object(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{k}={}", show(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// Fixture `name` as a root in memory that names itself `base`.
pub fn model(name: &str, base: &Path) -> Root {
    let tree = fixture::Tree::load(name).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    Root::memory(base, tree.entries())
}

/// Runs the doctor on fixture `name` in memory and compares everything
/// with `expect`; with [`expect::BLESS`] set, writes `expect` anew first.
pub fn check_fixture(name: &str) {
    let root = model(name, &Path::new("/fixtures").join(name));
    let report = peermem_doctor::run(&root);
    let json_text = output::json(&report);
    let path = expect::path(name);
    let committed = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut problems = Vec::new();
    let json = serde_json::from_str::<Json>(&json_text).unwrap_or(Json::Null);
    let regenerated = expect::regenerate(&committed, name, &report, &json);
    let bless = std::env::var_os(expect::BLESS).is_some_and(|v| v == "1");
    if bless && regenerated != committed {
        fs::write(&path, &regenerated).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let exp = Expect::parse(if bless { &regenerated } else { &committed }, name);
    compare_report(&report, &exp, &mut problems);

    let text = output::human(&report, false);
    for check in &report.checks {
        let start = format!("{:<7}{}", check.status.as_str(), check.id);
        if !text.lines().any(|l| l.starts_with(&start)) {
            problems.push(format!("human output lacks a line starting '{start}'"));
        }
    }
    if let Some(header) = exp.nics.first() {
        if !text.contains(&output::matrix(&report.topology)) || !text.contains(header.as_str()) {
            problems.push("human output lacks the topology matrix".to_string());
        }
    }
    compare_json(&json_text, &report, &exp, &mut problems);
    if !bless && regenerated != committed {
        problems.push(format!(
            "{}=1 would rewrite {}:\n{}",
            expect::BLESS,
            path.display(),
            changed_lines(&committed, &regenerated)
        ));
    }
    assert!(
        problems.is_empty(),
        "fixture {name}:\n  {}\n\n{}",
        problems.join("\n  "),
        output::human(&report, true)
    );
}

/// The lines of `new` that `old` lacks (`+`) and the other way (`-`).
fn changed_lines(old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let gone = old_lines
        .iter()
        .filter(|l| !new_lines.contains(l))
        .map(|l| format!("  - {l}"));
    let added = new_lines
        .iter()
        .filter(|l| !old_lines.contains(l))
        .map(|l| format!("  + {l}"));
    gone.chain(added).collect::<Vec<_>>().join("\n")
}

/// Writes fixture `name` out, runs the binary on it (table, verbose,
/// JSON, Prometheus) and compares each output, byte for byte, and the exit
/// status with what the library renders from the fixture's model.
pub fn binary_prints_the_model(name: &str) {
    let dir = build(name);
    let report = peermem_doctor::run(&model(name, &dir));
    let dir_arg = dir.to_string_lossy().into_owned();
    for (args, want) in [
        (vec![], output::human(&report, false)),
        (vec!["--verbose"], output::human(&report, true)),
        (vec!["--json", "--verbose"], output::json(&report)),
        (vec!["--prometheus"], prometheus::render(&report)),
    ] {
        let args: Vec<&str> = args.into_iter().chain(["--root", &dir_arg]).collect();
        let (got, code) = doctor(&args);
        assert_eq!(code, report.exit_code(), "{name} {args:?}");
        assert!(
            got == want,
            "{name} {args:?}: the binary printed\n{got}\nthe model renders\n{want}"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}
