// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The doctor's module graph, read from its sources: one node per file
//! below `src/` (the binary's `main.rs` aside), one edge per path that
//! names another file's module (`use crate::…`, `super::…`, `crate::x::y`
//! in code, a child module by name). It must have no circle, and no
//! floor may name one above it: `host` and `text` at the bottom, `checks`
//! in the middle, the report and its renderings on top. Checks read
//! nothing themselves: they judge the `Host` value.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// A module's path below the crate root: `[]`, `["checks"]`, `["checks", "kernel"]`.
type Module = Vec<String>;

/// Rust source without comments, string and character literals: what is
/// left can only hold paths that the compiler follows.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A character literal ('a', '\n', '\u{..}'); a lifetime stays.
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            }
            b'\'' if src[i + 1..].chars().nth(1) == Some('\'') => {
                i += 1 + src[i + 1..].chars().next().map_or(1, char::len_utf8) + 1;
            }
            _ => {
                let c = src[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Identifiers and the punctuation that paths and modules are made of.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(code[i..end].to_string());
        } else if c == ':' && chars.peek().map(|&(_, d)| d) == Some(':') {
            chars.next();
            out.push("::".into());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// Reads the path (or use tree) starting at `tokens[at]`: every full path
/// it names, and where it ends.
fn path_at(tokens: &[String], mut at: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    while at < tokens.len() {
        let t = &tokens[at];
        if t == "{" {
            let mut paths = Vec::new();
            at += 1;
            while at < tokens.len() && tokens[at] != "}" {
                if tokens[at] == "," {
                    at += 1;
                    continue;
                }
                let (inner, end) = path_at(tokens, at);
                paths.extend(inner.into_iter().map(|p| [prefix.clone(), p].concat()));
                at = end;
                // `x as y`: the name given does not matter.
                if tokens.get(at).map(String::as_str) == Some("as") {
                    at += 2;
                }
            }
            return (paths, at + 1);
        }
        if t == "*" || t.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            if t != "self" || prefix.is_empty() {
                prefix.push(t.clone());
            }
            at += 1;
            if tokens.get(at).map(String::as_str) == Some("::") {
                at += 1;
                continue;
            }
        }
        break;
    }
    (vec![prefix], at)
}

/// A source file's module: `lib.rs` is the root, `x/mod.rs` is `x`.
fn module_of(rel: &Path) -> Module {
    let mut parts: Module = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
        parts.pop();
    }
    parts
}

/// Every `.rs` file below `dir`, relative to `base`.
fn sources(base: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/") {
        let path = entry.expect("src/ entry").path();
        if path.is_dir() {
            sources(base, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(base).expect("below src/").to_path_buf());
        }
    }
}

/// The modules `module` (whose source is `src`) names, among `known`.
fn edges_of(module: &Module, src: &str, known: &BTreeSet<Module>) -> BTreeSet<Module> {
    let tokens = tokens(&code_only(src));
    // The module each `}` closes back to: inline `mod x { … }` nest.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0;
    let mut children = BTreeSet::new();
    let mut out = BTreeSet::new();
    let mut at = 0;
    while at < tokens.len() {
        let t = tokens[at].as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|&(d, _)| d == depth) {
                    inline.pop();
                }
            }
            "mod" => match (tokens.get(at + 1), tokens.get(at + 2).map(String::as_str)) {
                (Some(name), Some("{")) => inline.push((depth, name.clone())),
                (Some(name), Some(";")) if inline.is_empty() => {
                    children.insert(name.clone());
                }
                _ => {}
            },
            _ => {}
        }
        let after_colons = at > 0 && tokens[at - 1] == "::";
        let starts =
            matches!(t, "crate" | "super" | "self") || (inline.is_empty() && children.contains(t));
        if after_colons || !starts || tokens.get(at + 1).map(String::as_str) != Some("::") {
            at += 1;
            continue;
        }
        let (paths, end) = path_at(&tokens, at);
        let here: Module = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, n)| n.clone()))
            .collect();
        for path in paths {
            let mut full = here.clone();
            let mut rest = path.as_slice();
            match rest.first().map(String::as_str) {
                Some("crate") => {
                    full.clear();
                    rest = &rest[1..];
                }
                Some("self") => rest = &rest[1..],
                _ => {}
            }
            while rest.first().map(String::as_str) == Some("super") {
                full.pop();
                rest = &rest[1..];
            }
            full.extend(rest.iter().cloned());
            // The longest prefix that is a file's module.
            while !known.contains(&full) {
                full.pop();
            }
            if &full != module {
                out.insert(full);
            }
        }
        at = end.max(at + 1);
    }
    out
}

/// The doctor's graph: each file's module and the modules it names.
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &src, &mut files);
    files.retain(|f| f != Path::new("main.rs"));
    let known: BTreeSet<Module> = files.iter().map(|f| module_of(f)).collect();
    files
        .iter()
        .map(|f| {
            let text = fs::read_to_string(src.join(f)).expect("source");
            let module = module_of(f);
            let edges = edges_of(&module, &text, &known);
            (module, edges)
        })
        .collect()
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, (usize, usize)>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a Module) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        let graph = w.graph;
        for u in graph.get(v).into_iter().flatten() {
            match w.index.get(u).copied() {
                None => {
                    visit(w, u);
                    let low = w.index[u].1.min(w.index[v].1);
                    w.index.entry(v).and_modify(|e| e.1 = low);
                }
                Some((i, _)) if w.stack.contains(&u) => {
                    let low = i.min(w.index[v].1);
                    w.index.entry(v).and_modify(|e| e.1 = low);
                }
                Some(_) => {}
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let mut scc = Vec::new();
            while let Some(u) = w.stack.pop() {
                scc.push(u.clone());
                if u == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                w.found.push(scc);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found
}

/// `checks::kernel`, or `crate` for the root.
fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// A module's floor: 0 for `host` and `text`, 1 for `checks`, 2 for the rest.
fn floor(m: &Module) -> u8 {
    match m.first().map(String::as_str) {
        Some("host" | "text") => 0,
        Some("checks") => 1,
        _ => 2,
    }
}

#[test]
fn floors_look_down() {
    let up: Vec<String> = graph()
        .iter()
        .flat_map(|(m, into)| {
            into.iter()
                .filter(|u| floor(u) > floor(m))
                .map(|u| format!("{} -> {}", name(m), name(u)))
        })
        .collect();
    assert!(
        up.is_empty(),
        "imports from a lower floor:\n{}",
        up.join("\n")
    );
}

/// Outside their tests, the checks name no way to read the host: no
/// root, file, environment or process.
#[test]
fn checks_read_nothing() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/checks");
    let mut found = Vec::new();
    for entry in fs::read_dir(&dir).expect("src/checks") {
        let path = entry.expect("src/checks entry").path();
        let code = code_only(&fs::read_to_string(&path).expect("source"));
        let code = code.split("#[cfg(test)]").next().unwrap_or("");
        for t in tokens(code) {
            if matches!(
                t.as_str(),
                "Root" | "root" | "fs" | "env" | "Command" | "File"
            ) {
                found.push(format!("{}: {t}", path.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "checks reading the host:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_import_circle() {
    let graph = graph();
    let found = circles(&graph);
    let text: Vec<String> = found
        .iter()
        .map(|c| {
            let mut lines = vec![format!("{} modules:", c.len())];
            for m in c {
                let into: Vec<String> = graph[m]
                    .iter()
                    .filter(|u| c.contains(u))
                    .map(name)
                    .collect();
                lines.push(format!("  {} -> {}", name(m), into.join(", ")));
            }
            lines.join("\n")
        })
        .collect();
    assert!(found.is_empty(), "import circles:\n{}", text.join("\n"));
}

/// The reader sees what the compiler follows, and the walk finds a circle.
#[test]
fn reader_and_walk() {
    let known: BTreeSet<Module> = [
        vec![],
        vec!["a".to_string()],
        vec!["a".into(), "b".into()],
        vec!["c".into()],
    ]
    .into_iter()
    .collect();
    let src = r#"
        // use crate::c::X;
        mod b;
        use super::{c::{self, Y}, x as z};
        fn f() { let s = "crate::c::Z"; b::g('"'); }
        #[cfg(test)]
        mod tests { use super::*; }
    "#;
    let a = vec!["a".to_string()];
    assert_eq!(
        edges_of(&a, src, &known),
        [vec![], vec!["a".into(), "b".into()], vec!["c".into()]]
            .into_iter()
            .collect()
    );
    let mut graph = BTreeMap::new();
    graph.insert(a.clone(), [vec!["c".to_string()]].into_iter().collect());
    graph.insert(vec!["c".to_string()], [a.clone()].into_iter().collect());
    graph.insert(vec![], [a.clone()].into_iter().collect());
    assert_eq!(circles(&graph), vec![vec![a, vec!["c".to_string()]]]);
}
