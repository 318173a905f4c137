// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! A fixture's `expect` file: what it claims, and the file rewritten so
//! that every claim it makes holds for a report (`NVPM_DOCTOR_BLESS=1`
//! writes that back).
//!
//! A rewrite keeps which claims the file makes and how it words them: a
//! check's status follows the report, a `~ text` the check no longer
//! contains is dropped, a check gone is dropped and a new one added bare,
//! `exit`, `stat` and `fact` values and the topology matrix follow the
//! report. A line whose claim still holds stays as written.

use std::path::PathBuf;

use peermem_doctor::Report;
use serde_json::Value as Json;

use super::{fixture, show};

/// The variable that makes the fixture tests write their `expect` files.
pub const BLESS: &str = "NVPM_DOCTOR_BLESS";

/// What a fixture's `expect` file says.
#[derive(Debug, Default)]
pub struct Expect {
    /// Exit status of the binary.
    pub exit: i32,
    /// `(status, id, text the line must contain)`.
    pub checks: Vec<(String, String, Option<String>)>,
    /// Column order of the matrix (NIC names).
    pub nics: Vec<String>,
    /// Matrix rows: GPU address and one link per NIC.
    pub topo: Vec<(String, Vec<String>)>,
    /// Counters the JSON `stats` object must hold.
    pub stats: Vec<(String, String)>,
    /// Fields of the JSON `facts` object: dotted path and value.
    pub facts: Vec<(String, String)>,
}

/// One line of an `expect` file.
#[derive(Debug, Clone, PartialEq)]
enum Line {
    /// A comment or a blank line.
    Note,
    Exit(i32),
    Check {
        status: String,
        id: String,
        text: Option<String>,
    },
    Nics(Vec<String>),
    Topo(String, Vec<String>),
    Stat(String, String),
    Fact(String, String),
}

/// `tests/fixtures/<name>/expect`.
pub fn path(name: &str) -> PathBuf {
    fixture::fixtures_dir().join(name).join("expect")
}

/// Parses one line; `None` when it is not of the format.
fn parse_line(raw: &str) -> Option<Line> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') {
        return Some(Line::Note);
    }
    let (head, text) = match line.split_once(" ~ ") {
        Some((h, t)) => (h, Some(t.trim().to_string())),
        None => (line, None),
    };
    let words: Vec<&str> = head.split_whitespace().collect();
    let strings = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Some(match words.as_slice() {
        ["exit", n] => Line::Exit(n.parse().ok()?),
        ["nics", names @ ..] => Line::Nics(strings(names)),
        ["topo", gpu, links @ ..] => Line::Topo(gpu.to_string(), strings(links)),
        ["stat", name, value] => Line::Stat(name.to_string(), value.to_string()),
        ["fact", path, value @ ..] => Line::Fact(path.to_string(), value.join(" ")),
        [status @ ("OK" | "INFO" | "WARN" | "FAIL"), id] => Line::Check {
            status: status.to_string(),
            id: id.to_string(),
            text,
        },
        _ => return None,
    })
}

/// Each line of `text` as written and as parsed.
fn lines(text: &str, name: &str) -> Vec<(String, Line)> {
    text.lines()
        .enumerate()
        .map(|(i, raw)| {
            let line = parse_line(raw).unwrap_or_else(|| {
                panic!("{}:{}: cannot parse '{raw}'", path(name).display(), i + 1)
            });
            (raw.to_string(), line)
        })
        .collect()
}

impl Expect {
    /// What `text`, the `expect` file of fixture `name`, says.
    pub fn parse(text: &str, name: &str) -> Expect {
        let mut exp = Expect::default();
        for (_, line) in lines(text, name) {
            match line {
                Line::Note => {}
                Line::Exit(n) => exp.exit = n,
                Line::Check { status, id, text } => exp.checks.push((status, id, text)),
                Line::Nics(names) => exp.nics = names,
                Line::Topo(gpu, links) => exp.topo.push((gpu, links)),
                Line::Stat(name, value) => exp.stats.push((name, value)),
                Line::Fact(path, value) => exp.facts.push((path, value)),
            }
        }
        exp
    }
}

/// A check line as the files align it.
fn check_line(status: &str, id: &str, text: Option<&str>) -> String {
    match text {
        Some(t) => format!("{status:<4} {id:<20} ~ {t}"),
        None => format!("{status:<4} {id}"),
    }
}

/// The NIC columns (those with a PCI function) and a row of links per
/// GPU; nothing without a GPU–NIC pair.
fn matrix(report: &Report) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let topo = &report.topology;
    if topo.pairs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let nics: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| topo.nics[n].pci.is_some())
        .collect();
    let rows = topo
        .gpus
        .iter()
        .enumerate()
        .map(|(g, gpu)| {
            let links = nics
                .iter()
                .map(|&n| {
                    topo.pairs
                        .iter()
                        .find(|p| p.gpu == g && p.nic == n)
                        .map_or("-", |p| p.link.as_str())
                        .to_string()
                })
                .collect();
            (gpu.pci.bdf.clone(), links)
        })
        .collect();
    let names = nics.iter().map(|&n| topo.nics[n].name.clone()).collect();
    (names, rows)
}

/// The `nics` and `topo` lines, each column as wide as its widest cell.
fn matrix_lines(nics: &[String], rows: &[(String, Vec<String>)]) -> Vec<String> {
    let mut table = vec![[vec!["nics".to_string()], nics.to_vec()].concat()];
    for (gpu, links) in rows {
        table.push([vec!["topo".to_string(), gpu.clone()], links.clone()].concat());
    }
    let columns = table.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    table
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, &w)| format!("{cell:<w$}"))
                .collect();
            cells.join(" ").trim_end().to_string()
        })
        .collect()
}

/// The text of check `id` that a `~ text` claim is looked for in.
fn check_text(report: &Report, id: &str) -> Option<String> {
    report.check(id).map(|c| {
        format!(
            "{}\n{}\n{}",
            c.summary,
            c.detail.join("\n"),
            c.fix.clone().unwrap_or_default()
        )
    })
}

/// `text`, the `expect` file of fixture `name`, rewritten so that its
/// claims hold for `report`, whose `--json` output is `json`.
pub fn regenerate(text: &str, name: &str, report: &Report, json: &Json) -> String {
    let parsed = lines(text, name);
    let is_check = |l: &Line| matches!(l, Line::Check { .. });
    let first = parsed
        .iter()
        .position(|(_, l)| is_check(l))
        .unwrap_or(parsed.len());
    let last = parsed
        .iter()
        .rposition(|(_, l)| is_check(l))
        .map_or(first, |l| l + 1);
    let (nics, rows) = matrix(report);
    let same_matrix = {
        let written_nics = parsed.iter().find_map(|(_, l)| match l {
            Line::Nics(n) => Some(n.clone()),
            _ => None,
        });
        let written_rows: Vec<(String, Vec<String>)> = parsed
            .iter()
            .filter_map(|(_, l)| match l {
                Line::Topo(g, links) => Some((g.clone(), links.clone())),
                _ => None,
            })
            .collect();
        written_nics.unwrap_or_default() == nics && written_rows == rows
    };
    let mut matrix_written = same_matrix;
    let mut out: Vec<String> = Vec::new();
    // A line other than a check's: as written where its claim holds.
    let mut other = |out: &mut Vec<String>, raw: &str, line: &Line| {
        let now = match line {
            Line::Exit(_) => Line::Exit(report.exit_code()),
            Line::Stat(stat, _) => match json.get("stats").and_then(|s| s.get(stat)) {
                Some(v) => Line::Stat(stat.clone(), show(v)),
                None => return,
            },
            Line::Fact(path, _) => {
                let value = path
                    .split('.')
                    .try_fold(json.get("facts"), |v, key| Some(v?.get(key)))
                    .flatten();
                match value {
                    Some(v) => Line::Fact(path.clone(), show(v)),
                    None => return,
                }
            }
            Line::Nics(_) | Line::Topo(..) if !same_matrix => {
                if !matrix_written {
                    out.extend(matrix_lines(&nics, &rows));
                    matrix_written = true;
                }
                return;
            }
            _ => line.clone(),
        };
        out.push(if now == *line {
            raw.to_string()
        } else {
            match now {
                Line::Exit(code) => format!("exit {code}"),
                Line::Stat(stat, value) => format!("stat {stat} {value}"),
                Line::Fact(path, value) => format!("fact {path} {value}"),
                _ => raw.to_string(),
            }
        });
    };
    for (raw, line) in &parsed[..first] {
        other(&mut out, raw, line);
    }

    // The checks in report order; a comment goes with the line after it.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    let mut notes = Vec::new();
    for (raw, line) in &parsed[first..last] {
        let Line::Check {
            status,
            id,
            text: claim,
        } = line
        else {
            notes.push(raw.clone());
            continue;
        };
        let Some(said) = check_text(report, id) else {
            notes.clear();
            continue;
        };
        let now = report.check(id).map_or("", |c| c.status.as_str());
        let text = claim.clone().filter(|t| said.contains(t.as_str()));
        let mut group = std::mem::take(&mut notes);
        group.push(if now == status && text == *claim {
            raw.clone()
        } else {
            check_line(now, id, text.as_deref())
        });
        match groups.iter_mut().find(|(g, _)| g == id) {
            Some((_, lines)) => lines.extend(group),
            None => groups.push((id.clone(), group)),
        }
    }
    for check in &report.checks {
        match groups.iter().position(|(g, _)| g == check.id) {
            Some(at) => out.extend(groups.remove(at).1),
            None => out.push(check_line(check.status.as_str(), check.id, None)),
        }
    }
    out.extend(notes);

    for (raw, line) in &parsed[last..] {
        other(&mut out, raw, line);
    }
    if !matrix_written && !rows.is_empty() {
        out.extend(matrix_lines(&nics, &rows));
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}
