// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! File access below a root directory (`/` on a live host, a fixture tree in tests).
//!
//! Every path the doctor reads is absolute (`/sys/...`) and is resolved here
//! component by component, so symbolic links stay inside the root even when
//! they are absolute (`/etc/modprobe.d/nvidia.conf -> /etc/alternatives/...`).
//! A missing file is `None`, never an error: the checks turn absences into
//! findings.
//!
//! A root is a directory of this machine, or a model in memory ([`Entry`]
//! by path, as tests build their fixtures): the same reads, and programs
//! that answer from a table instead of running.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Cursor, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Symbolic links followed while resolving one path, as in the kernel.
const MAX_LINKS: usize = 40;

/// Entries deeper than this are not visited by [`Root::walk_files`].
const MAX_WALK_DEPTH: usize = 12;

/// `O_NONBLOCK` on Linux (x86, arm64, riscv, ppc, s390).
const O_NONBLOCK: i32 = 0o4000;

/// A file system entry of a root kept in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and its target as written.
    Link(String),
    /// A directory (one with entries below it needs none).
    Dir,
    /// A program: what it prints on stdout for any arguments but those of
    /// `answers` (joined by spaces), exiting 0.
    Program {
        /// Printed by default.
        text: Vec<u8>,
        /// Printed for exactly these arguments instead.
        answers: Vec<(String, Vec<u8>)>,
    },
}

/// A program below the root: a file of this machine to run, or a model's
/// table of answers.
#[derive(Debug)]
pub enum Program<'a> {
    /// Where it is on this machine.
    At(PathBuf),
    /// What it prints, by default and for given arguments.
    Answers(&'a [u8], &'a [(String, Vec<u8>)]),
}

/// What a path is, without following a last link.
enum Kind<'a> {
    File,
    Dir,
    Link(String),
    Program(&'a [u8], &'a [(String, Vec<u8>)]),
}

/// A directory that stands for `/`, or a model of one.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
    /// The model's entries by absolute path, for a root in memory.
    memory: Option<Arc<BTreeMap<String, Entry>>>,
}

impl Root {
    /// Uses `base` as the root; it must be a directory.
    pub fn new(base: &Path) -> Result<Root, String> {
        match fs::metadata(base) {
            Ok(m) if m.is_dir() => Ok(Root {
                base: base.to_path_buf(),
                memory: None,
            }),
            Ok(_) => Err(format!("{}: not a directory", base.display())),
            Err(e) => Err(format!("{}: {e}", base.display())),
        }
    }

    /// A root in memory that names itself `base`: `entries` by path
    /// below it (`sys/module/nvidia`); the directories above them exist.
    pub fn memory(base: &Path, entries: BTreeMap<String, Entry>) -> Root {
        let entries = entries
            .into_iter()
            .map(|(path, entry)| (format!("/{}", path.trim_matches('/')), entry))
            .collect();
        Root {
            base: base.to_path_buf(),
            memory: Some(Arc::new(entries)),
        }
    }

    /// The root directory as given.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The host path of an already resolved absolute path.
    fn host(&self, abs: &str) -> PathBuf {
        self.base.join(abs.trim_start_matches('/'))
    }

    /// What the absolute path `abs` is, its last link not followed.
    fn kind(&self, abs: &str) -> Option<Kind<'_>> {
        let Some(memory) = &self.memory else {
            let host = self.host(abs);
            let meta = fs::symlink_metadata(&host).ok()?;
            let ft = meta.file_type();
            return Some(if ft.is_symlink() {
                Kind::Link(fs::read_link(&host).ok()?.to_string_lossy().into_owned())
            } else if ft.is_dir() {
                Kind::Dir
            } else {
                Kind::File
            });
        };
        match memory.get(abs) {
            Some(Entry::File(_)) => Some(Kind::File),
            Some(Entry::Link(to)) => Some(Kind::Link(to.clone())),
            Some(Entry::Dir) => Some(Kind::Dir),
            Some(Entry::Program { text, answers }) => Some(Kind::Program(text, answers)),
            None => (abs == "/" || !self.children(abs).is_empty()).then_some(Kind::Dir),
        }
    }

    /// The names directly below the absolute path `abs` of a root in memory.
    fn children(&self, abs: &str) -> Vec<String> {
        let Some(memory) = &self.memory else {
            return Vec::new();
        };
        let prefix = format!("{}/", abs.trim_end_matches('/'));
        let mut names: Vec<String> = memory
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, _)| p[prefix.len()..].split('/').next().map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Resolves `path` to an absolute path without symbolic links, inside the root.
    ///
    /// Returns `None` when a component is missing or the links loop.
    pub fn resolve(&self, path: &str) -> Option<String> {
        let mut done: Vec<String> = Vec::new();
        // Components still to visit, the next one last.
        let mut todo: Vec<String> = components(path).rev().collect();
        let mut links = 0;
        while let Some(comp) = todo.pop() {
            match comp.as_str() {
                "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => {}
            }
            let mut abs = if done.is_empty() {
                String::new()
            } else {
                join(&done)
            };
            abs.push('/');
            abs.push_str(&comp);
            if let Kind::Link(target) = self.kind(&abs)? {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                if target.starts_with('/') {
                    done.clear();
                }
                todo.extend(components(&target).rev());
            } else {
                done.push(comp);
            }
        }
        Some(join(&done))
    }

    /// Where `path` is on this machine (links followed inside the root), if it exists.
    pub fn host_path(&self, path: &str) -> Option<PathBuf> {
        self.resolve(path).map(|abs| self.host(&abs))
    }

    /// Whether `path` exists (after following links).
    pub fn exists(&self, path: &str) -> bool {
        self.resolve(path).is_some()
    }

    /// Whether `path` is a directory (after following links).
    pub fn is_dir(&self, path: &str) -> bool {
        self.resolve(path)
            .and_then(|p| self.kind(&p))
            .is_some_and(|k| matches!(k, Kind::Dir))
    }

    /// Whether `path` is a file, a program included (after following links).
    pub fn is_file(&self, path: &str) -> bool {
        match self.resolve(path) {
            Some(abs) if self.memory.is_some() => {
                matches!(self.kind(&abs), Some(Kind::File | Kind::Program(..)))
            }
            Some(abs) => self.host(&abs).is_file(),
            None => false,
        }
    }

    /// The program at `path` (after following links), if it exists.
    pub fn program(&self, path: &str) -> Option<Program<'_>> {
        let abs = self.resolve(path)?;
        if self.memory.is_none() {
            return Some(Program::At(self.host(&abs)));
        }
        match self.kind(&abs)? {
            Kind::Program(text, answers) => Some(Program::Answers(text, answers)),
            // A plain file of a model prints nothing.
            Kind::File => Some(Program::Answers(&[], &[])),
            _ => None,
        }
    }

    /// The bytes of a file.
    pub fn read_bytes(&self, path: &str) -> Option<Vec<u8>> {
        let abs = self.resolve(path)?;
        let Some(memory) = &self.memory else {
            return fs::read(self.host(&abs)).ok();
        };
        match memory.get(&abs)? {
            Entry::File(bytes) => Some(bytes.clone()),
            _ => None,
        }
    }

    /// A reader of a file that does not block where the file would (a
    /// device such as `/dev/kmsg` at its end).
    pub fn reader(&self, path: &str) -> Option<Box<dyn Read>> {
        if self.memory.is_some() {
            return Some(Box::new(Cursor::new(self.read_bytes(path)?)));
        }
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(self.host_path(path)?)
            .ok()?;
        Some(Box::new(file))
    }

    /// The text of a file (invalid UTF-8 replaced).
    pub fn read_text(&self, path: &str) -> Option<String> {
        self.read_bytes(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The text of a file without surrounding white space (a sysfs attribute).
    pub fn read_attr(&self, path: &str) -> Option<String> {
        self.read_text(path).map(|s| s.trim().to_string())
    }

    /// The sorted names in a directory; empty when it is missing.
    pub fn list(&self, path: &str) -> Vec<String> {
        let Some(abs) = self.resolve(path) else {
            return Vec::new();
        };
        if self.memory.is_some() {
            return self.children(&abs);
        }
        let Ok(rd) = fs::read_dir(self.host(&abs)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Regular files below `path`, without following links below it.
    ///
    /// The paths start with `path` as given, even when a link leads there
    /// (`/lib/modules` is `/usr/lib/modules` on merged-/usr systems).
    pub fn walk_files(&self, path: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(abs) = self.resolve(path) {
            self.walk(&abs, 0, &mut out);
            let given = path.trim_end_matches('/');
            if !given.is_empty() && abs != given {
                for p in &mut out {
                    if let Some(rest) = p.strip_prefix(abs.as_str()) {
                        *p = format!("{given}{rest}");
                    }
                }
            }
        }
        out.sort();
        out
    }

    fn walk(&self, abs: &str, depth: usize, out: &mut Vec<String>) {
        if depth > MAX_WALK_DEPTH {
            return;
        }
        if self.memory.is_some() {
            for name in self.children(abs) {
                let child = format!("{}/{name}", abs.trim_end_matches('/'));
                match self.kind(&child) {
                    Some(Kind::Dir) => self.walk(&child, depth + 1, out),
                    Some(Kind::File | Kind::Program(..)) => out.push(child),
                    _ => {}
                }
            }
            return;
        }
        let Ok(rd) = fs::read_dir(self.host(abs)) else {
            return;
        };
        for entry in rd.filter_map(|e| e.ok()) {
            let Ok(ft) = entry.file_type() else { continue };
            let child = format!("{}/{}", abs, entry.file_name().to_string_lossy());
            if ft.is_dir() {
                self.walk(&child, depth + 1, out);
            } else if ft.is_file() {
                out.push(child);
            }
        }
    }
}

/// The non-empty components of a path.
fn components(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    path.split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// Joins resolved components into an absolute path (`/` for none).
fn join(comps: &[String]) -> String {
    if comps.is_empty() {
        return "/".to_string();
    }
    let mut s = String::new();
    for c in comps {
        s.push('/');
        s.push_str(c);
    }
    s
}

/// The last component of a path.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A scratch directory holding `files` (path below it, content), for unit tests.
#[cfg(test)]
pub(crate) fn scratch_tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("peermem-doctor-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }
    fs::create_dir_all(&dir).expect("mkdir");
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merged /usr: `/lib` is a link to `usr/lib`; files below `/lib/modules`
    /// are named as asked, and read through the link.
    #[test]
    fn walk_through_a_link() {
        let dir = std::env::temp_dir().join(format!("peermem-doctor-root-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let m = dir.join("usr/lib/modules/7.3/extra");
        fs::create_dir_all(&m).expect("mkdir");
        fs::write(m.join("nvidia_peermem.ko"), "x").expect("write");
        std::os::unix::fs::symlink("usr/lib", dir.join("lib")).expect("link");
        let root = Root::new(&dir).expect("root");
        assert_eq!(
            root.resolve("/lib/modules/7.3").as_deref(),
            Some("/usr/lib/modules/7.3")
        );
        let files = root.walk_files("/lib/modules/7.3/");
        assert_eq!(files, ["/lib/modules/7.3/extra/nvidia_peermem.ko"]);
        assert_eq!(root.read_text(&files[0]).as_deref(), Some("x"));
        assert_eq!(
            root.walk_files("/usr/lib/modules"),
            ["/usr/lib/modules/7.3/extra/nvidia_peermem.ko"]
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// A root in memory reads as the same tree on disk does: links,
    /// directories implied by their entries, programs and their answers.
    #[test]
    fn memory_reads_like_disk() {
        let entries = [
            (
                "usr/lib/modules/7.3/extra/nvidia_peermem.ko",
                Entry::File(b"x".to_vec()),
            ),
            ("lib", Entry::Link("usr/lib".into())),
            ("loop", Entry::Link("loop".into())),
            ("empty", Entry::Dir),
            (
                "usr/bin/rustc",
                Entry::Program {
                    text: b"rustc 1.85.1\n".to_vec(),
                    answers: vec![("--print sysroot".into(), b"/usr\n".to_vec())],
                },
            ),
        ];
        let root = Root::memory(
            Path::new("/model"),
            entries
                .into_iter()
                .map(|(p, e)| (p.to_string(), e))
                .collect(),
        );
        assert_eq!(
            root.resolve("/lib/modules/7.3").as_deref(),
            Some("/usr/lib/modules/7.3")
        );
        assert_eq!(
            root.walk_files("/lib/modules/7.3/"),
            ["/lib/modules/7.3/extra/nvidia_peermem.ko"]
        );
        assert_eq!(
            root.read_text("/lib/modules/7.3/extra/nvidia_peermem.ko")
                .as_deref(),
            Some("x")
        );
        assert_eq!(root.list("/"), ["empty", "lib", "loop", "usr"]);
        assert!(root.is_dir("/empty") && root.is_dir("/usr/lib") && !root.is_dir("/lib/x"));
        assert!(!root.exists("/loop") && root.list("/empty").is_empty());
        assert!(root.is_file("/usr/bin/rustc") && !root.is_file("/usr/bin"));
        let Some(Program::Answers(text, answers)) = root.program("/usr/bin/rustc") else {
            panic!("no program");
        };
        assert_eq!((text, answers.len()), (&b"rustc 1.85.1\n"[..], 1));
        assert!(root.program("/usr/bin/bindgen").is_none());
    }
}
