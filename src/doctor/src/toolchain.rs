// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The Rust toolchain on `PATH`: which `rustc` and `bindgen` a build of
//! the module would run, and what `--version` they print. These two
//! `--version` runs are the only programs the doctor starts; the
//! programs are looked for below the root, so a fixture's stand-ins
//! answer in tests.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::root::Root;

/// Searched after the directories of `PATH` (DKMS and `sudo` use these).
pub const DEFAULT_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// How long `--version` may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A program as found on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its path (below the root).
    pub path: String,
    /// The first line of its `--version`, or why there is none.
    pub version: Result<String, String>,
}

/// The directories searched: `PATH`'s absolute ones, then [`DEFAULT_PATH`].
pub fn search_path(env_path: Option<&str>) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    let given = env_path.unwrap_or("").split(':');
    for dir in given.chain(DEFAULT_PATH) {
        if dir.starts_with('/') && !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_string());
        }
    }
    dirs
}

/// The first `name` in `dirs` below the root, and its `--version`.
pub fn find(root: &Root, dirs: &[String], name: &str) -> Option<Found> {
    dirs.iter().find_map(|dir| {
        let path = format!("{}/{name}", dir.trim_end_matches('/'));
        let host = root.host_path(&path)?;
        host.is_file().then(|| Found {
            version: version(&host),
            path,
        })
    })
}

/// The first line `program --version` prints, run from `/` (so no
/// directory override of rustup applies) with stdin closed.
fn version(program: &std::path::Path) -> Result<String, String> {
    let mut child = spawn(program).map_err(|e| format!("cannot run it: {e}"))?;
    let start = Instant::now();
    // Polls from 1 ms up to 64 ms apart: a stand-in answers in a few ms, rustc in tens.
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < TIMEOUT => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(64));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no answer to --version within {} s",
                    TIMEOUT.as_secs()
                ));
            }
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let first = out.lines().next().unwrap_or("").trim().to_string();
    match (status.success(), first.is_empty()) {
        (true, false) => Ok(first),
        (true, true) => Err("--version printed nothing".to_string()),
        (false, _) => Err(format!("--version failed ({status})")),
    }
}

/// Starts `program --version`; a file just written may be busy for a moment
/// (another thread's fork holding it open), so that is tried again.
fn spawn(program: &std::path::Path) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        let started = Command::new(program)
            .arg("--version")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        match started {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn search_order() {
        assert_eq!(
            search_path(Some("/opt/rust/bin:relative:/usr/bin:")),
            [
                "/opt/rust/bin",
                "/usr/bin",
                "/usr/local/sbin",
                "/usr/local/bin",
                "/usr/sbin",
                "/sbin",
                "/bin"
            ]
        );
        assert_eq!(search_path(None).len(), DEFAULT_PATH.len());
    }

    /// Stand-ins below a root: found in PATH order, their answers read,
    /// a failing or silent one said so.
    #[test]
    fn stand_ins() {
        let dir = std::env::temp_dir().join(format!("peermem-doctor-tc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let script = |path: &str, body: &str| {
            let p = dir.join(path);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        script(
            "opt/bin/rustc",
            "echo 'rustc 1.85.1 (4eb161250 2025-03-15)'; echo more",
        );
        script("usr/bin/rustc", "echo 'rustc 1.95.0'");
        script("usr/bin/bindgen", "exit 3");
        script("usr/bin/silent", "true");
        let root = Root::new(&dir).expect("root");
        let dirs = search_path(Some("/opt/bin"));
        let rustc = find(&root, &dirs, "rustc").expect("rustc");
        assert_eq!(rustc.path, "/opt/bin/rustc");
        assert_eq!(
            rustc.version.as_deref(),
            Ok("rustc 1.85.1 (4eb161250 2025-03-15)")
        );
        let bindgen = find(&root, &dirs, "bindgen").expect("bindgen");
        assert_eq!(
            bindgen.version,
            Err("--version failed (exit status: 3)".to_string())
        );
        let silent = find(&root, &dirs, "silent").expect("silent");
        assert_eq!(silent.version, Err("--version printed nothing".to_string()));
        assert_eq!(find(&root, &dirs, "cargo"), None);
        let _ = fs::remove_dir_all(&dir);
    }
}
