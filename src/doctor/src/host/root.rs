// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! File access below a root directory (`/` on a live host, a fixture tree in tests).
//!
//! Every path the doctor reads is absolute (`/sys/...`) and is resolved here
//! component by component, so symbolic links stay inside the root even when
//! they are absolute (`/etc/modprobe.d/nvidia.conf -> /etc/alternatives/...`).
//! A missing file is `None`, never an error: the checks turn absences into
//! findings.

use std::fs;
use std::path::{Path, PathBuf};

/// Symbolic links followed while resolving one path, as in the kernel.
const MAX_LINKS: usize = 40;

/// Entries deeper than this are not visited by [`Root::walk_files`].
const MAX_WALK_DEPTH: usize = 12;

/// A directory that stands for `/`.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
}

impl Root {
    /// Uses `base` as the root; it must be a directory.
    pub fn new(base: &Path) -> Result<Root, String> {
        match fs::metadata(base) {
            Ok(m) if m.is_dir() => Ok(Root {
                base: base.to_path_buf(),
            }),
            Ok(_) => Err(format!("{}: not a directory", base.display())),
            Err(e) => Err(format!("{}: {e}", base.display())),
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
            let meta = fs::symlink_metadata(self.host(&abs)).ok()?;
            if meta.file_type().is_symlink() {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                let target = fs::read_link(self.host(&abs)).ok()?;
                let target = target.to_string_lossy().into_owned();
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
            .and_then(|p| fs::metadata(self.host(&p)).ok())
            .is_some_and(|m| m.is_dir())
    }

    /// The bytes of a file.
    pub fn read_bytes(&self, path: &str) -> Option<Vec<u8>> {
        let abs = self.resolve(path)?;
        fs::read(self.host(&abs)).ok()
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
}
