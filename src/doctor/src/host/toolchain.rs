// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The Rust toolchain on `PATH`: which `rustc` and `bindgen` a build of
//! the module would run, and what they say about themselves. They are the
//! only programs the doctor starts, and only with arguments that read and
//! change nothing: `--version` of both, and for carried mode
//! `rustc --print sysroot` (where its `rust-src` belongs) and
//! `bindgen --version --verbose` (whether bindgen loads libclang). The
//! programs are looked for below the root, so a fixture's stand-ins
//! answer in tests.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::host::root::{Program, Root};

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
        root.is_file(&path).then(|| Found {
            version: version(root, &path),
            path,
        })
    })
}

/// The first line `program --version` prints, run from `/` (so no
/// directory override of rustup applies) with stdin closed.
fn version(root: &Root, path: &str) -> Result<String, String> {
    let (status, out) = run(root, path, &["--version"])?;
    let first = out.lines().next().unwrap_or("").trim().to_string();
    match (status.success(), first.is_empty()) {
        (true, false) => Ok(first),
        (true, true) => Err("--version printed nothing".to_string()),
        (false, _) => Err(format!("--version failed ({status})")),
    }
}

/// Where `rustc --print sysroot` says its sysroot is (the rustc at
/// `found`, below the root); its `rust-src` is below it.
pub fn sysroot(root: &Root, found: &Found) -> Result<String, String> {
    let (status, out) = run(root, &found.path, &["--print", "sysroot"])?;
    let first = out.lines().next().unwrap_or("").trim();
    match (status.success(), first.starts_with('/')) {
        (true, true) => Ok(first.to_string()),
        (true, false) => Err(format!(
            "--print sysroot printed '{first}', not a directory"
        )),
        (false, _) => Err(format!("--print sysroot failed ({status})")),
    }
}

/// The `Clang: ...` line of `bindgen --version --verbose`: bindgen-cli
/// prints it only with `--verbose`, after loading libclang, and panics
/// where it cannot load one (bindgen 0.71.1, bindgen/options/cli.rs:
/// `if verbose { println!("Clang: {}", crate::clang_version().full); }`;
/// bindgen/lib.rs: `clang_sys::load().expect("Unable to find libclang")`;
/// the same from 0.60 to today's).
pub fn clang(root: &Root, found: &Found) -> Result<String, String> {
    let (status, out) = run(root, &found.path, &["--version", "--verbose"])?;
    let line = out
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("Clang:"))
        .map(str::to_string);
    match (status.success(), line) {
        (true, Some(line)) => Ok(line),
        (true, None) => Err("--version --verbose printed no Clang: line".to_string()),
        (false, _) => Err(format!(
            "--version --verbose failed ({status}), as bindgen does where it cannot load libclang"
        )),
    }
}

/// Runs the program at `path` below the root with `args`: its exit status
/// and what it printed on stdout. A model's program answers from its table.
fn run(root: &Root, path: &str, args: &[&str]) -> Result<(ExitStatus, String), String> {
    match root.program(path) {
        None => Err(format!("{path} is gone")),
        Some(Program::At(program)) => spawn_and_wait(&program, args),
        Some(Program::Answers(text, answers)) => {
            let joined = args.join(" ");
            let out = answers
                .iter()
                .find(|(a, _)| *a == joined)
                .map_or(text, |(_, out)| out.as_slice());
            Ok((
                ExitStatus::from_raw(0),
                String::from_utf8_lossy(out).into_owned(),
            ))
        }
    }
}

/// Runs `program args` from `/` with stdin closed, for at most [`TIMEOUT`]:
/// its exit status and what it printed on stdout.
fn spawn_and_wait(program: &Path, args: &[&str]) -> Result<(ExitStatus, String), String> {
    let mut child = spawn(program, args).map_err(|e| format!("cannot run it: {e}"))?;
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
                    "no answer to {} within {} s",
                    args.join(" "),
                    TIMEOUT.as_secs()
                ));
            }
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    Ok((status, out))
}

/// Starts `program args`; a file just written may be busy for a moment
/// (another thread's fork holding it open), so that is tried again.
fn spawn(program: &Path, args: &[&str]) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        let started = Command::new(program)
            .args(args)
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

    /// A shell script at @path below @dir that runs @body.
    fn stand_in(dir: &std::path::Path, path: &str, body: &str) {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// Stand-ins below a root: found in PATH order, their answers read,
    /// a failing or silent one said so.
    #[test]
    fn stand_ins() {
        let dir = std::env::temp_dir().join(format!("peermem-doctor-tc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let script = |path: &str, body: &str| stand_in(&dir, path, body);
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

    /// Carried mode's two questions: the sysroot rustc prints, and the
    /// Clang line bindgen prints where it loads libclang; each other
    /// answer said for what it is.
    #[test]
    fn sysroot_and_clang() {
        let dir = std::env::temp_dir().join(format!("peermem-doctor-tc2-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let script = |path: &str, body: &str| stand_in(&dir, path, body);
        // Real rustc and bindgen answer each argument; these too.
        script(
            "a/rustc",
            "case \"$*\" in '--print sysroot') echo /usr ;; *) echo 'rustc 1.85.1' ;; esac",
        );
        script(
            "a/bindgen",
            "echo 'bindgen 0.71.1'; [ \"$*\" = '--version --verbose' ] && echo 'Clang: Debian clang version 19.1.7'",
        );
        // bindgen without libclang: its version line, then a panic (exit 101).
        script(
            "b/bindgen",
            "echo 'bindgen 0.71.1'; [ \"$*\" = '--version' ] || exit 101",
        );
        script("b/rustc", "echo 'rustc 1.85.1'");
        script("c/bindgen", "echo 'bindgen 0.71.1'");
        script(
            "c/rustc",
            "[ \"$*\" = '--version' ] && echo 'rustc 1.85.1' || exit 1",
        );
        let root = Root::new(&dir).expect("root");
        let found =
            |d: &str, name: &str| find(&root, &[format!("/{d}")], name).expect("a stand-in");
        assert_eq!(sysroot(&root, &found("a", "rustc")), Ok("/usr".to_string()));
        assert_eq!(
            clang(&root, &found("a", "bindgen")),
            Ok("Clang: Debian clang version 19.1.7".to_string())
        );
        assert_eq!(
            sysroot(&root, &found("b", "rustc")),
            Err("--print sysroot printed 'rustc 1.85.1', not a directory".to_string())
        );
        assert_eq!(
            clang(&root, &found("b", "bindgen")),
            Err("--version --verbose failed (exit status: 101), as bindgen does where it cannot load libclang"
                .to_string())
        );
        assert_eq!(
            clang(&root, &found("c", "bindgen")),
            Err("--version --verbose printed no Clang: line".to_string())
        );
        assert_eq!(
            sysroot(&root, &found("c", "rustc")),
            Err("--print sysroot failed (exit status: 1)".to_string())
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
