// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! How a build of the module gets the running kernel's Rust support, by
//! the rules of `kbuild/rust-mode.sh` (auto), and what carried mode needs
//! of the toolchain (as `kbuild/rust-toolchain.sh` checks it). Read once
//! per run; the `kernel.*` checks judge it.

use crate::host::carried::{self, Distro, Part, RustSrcFrom, Version, BINDGEN_MIN, RUSTC_MIN};
use crate::host::kconfig::KConfig;
use crate::host::kmod::modules_dir;
use crate::host::root::Root;
use crate::host::toolchain::{self, Found};

/// The compiled kernel crate, whose presence lets `rust-mode.sh` take the
/// kernel's own crates.
pub(crate) const KERNEL_CRATE: &str = "rust/libkernel.rmeta";

/// The target spec the kernel's rustc reads where the architecture has one.
pub(crate) const TARGET_SPEC: &str = "scripts/target.json";

/// Whether the kernel in `tree` hands rustc `scripts/target.json`: its arch
/// Makefile names it (x86; arm64 uses rustc's own aarch64-unknown-none
/// targets). Without the arch Makefile, assume it does (as `rust-mode.sh`).
pub(crate) fn needs_target_spec(root: &Root, tree: &str, config: &KConfig) -> bool {
    let arch = if config.enabled("CONFIG_X86") {
        "x86"
    } else if config.enabled("CONFIG_ARM64") {
        "arm64"
    } else {
        return true;
    };
    arch_makefile(root, tree, arch).is_none_or(|makefile| makefile.contains(TARGET_SPEC))
}

/// The arch Makefile kbuild reads for `tree`: in it, or in the source tree
/// that a headers or output directory's Makefile includes (Debian's flavour
/// headers include `linux-headers-<ver>-common/Makefile`; `O=` builds: also
/// `source/`), as `rust-mode.sh` finds it.
fn arch_makefile(root: &Root, tree: &str, arch: &str) -> Option<String> {
    let included = root.read_text(&format!("{tree}/Makefile")).and_then(|m| {
        m.lines().find_map(|l| {
            l.strip_prefix("include /")?
                .strip_suffix("/Makefile")
                .map(|d| format!("/{d}"))
        })
    });
    [
        Some(tree.to_string()),
        Some(format!("{tree}/source")),
        included,
    ]
    .into_iter()
    .flatten()
    .find_map(|dir| root.read_text(&format!("{dir}/arch/{arch}/Makefile")))
}

/// The files whose presence lets `rust-mode.sh` take the kernel's own crates
/// from `tree`.
pub(crate) fn kernel_crates(root: &Root, tree: &str, config: &KConfig) -> Vec<&'static str> {
    let mut files = vec![KERNEL_CRATE];
    if needs_target_spec(root, tree, config) {
        files.push(TARGET_SPEC);
    }
    files
}

/// The crate this module needs that kernels before 6.13 lack (6.8's have Rust).
pub(crate) const KERNEL_FFI_CRATE: &str = "rust/libffi.rmeta";

/// `core`'s source below a rustc's sysroot (what `rust-toolchain.sh` tests).
const RUST_SRC: &str = "lib/rustlib/src/rust/library/core/src/lib.rs";

/// Why a build carries the Rust support instead of using the kernel's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    /// `CONFIG_RUST` is not set; `no_rustc`: no rustc was found when it was configured.
    NoRust { no_rustc: bool },
    /// The kernel tree (`None`: the release is unknown) lacks its compiled
    /// crates, `files` (the crate, and the target spec where one is read).
    NoCrates {
        tree: Option<String>,
        files: Vec<&'static str>,
    },
    /// The crates in the tree are older than this module needs (no ffi crate).
    OldCrates(String),
    /// The crates were built by another rustc than the one on PATH.
    OtherRustc { built_by: String, on_path: String },
}

impl Why {
    /// The reason, as `rust-mode.sh` gives it.
    pub fn text(&self) -> String {
        match self {
            Why::NoRust { no_rustc: false } => {
                "the kernel is built without Rust (CONFIG_RUST is not set)".to_string()
            }
            Why::NoRust { no_rustc: true } => {
                "the kernel is built without Rust (CONFIG_RUST is not \
                 set; no rustc was found when it was configured)"
                    .to_string()
            }
            Why::NoCrates {
                tree: Some(tree),
                files,
            } => format!(
                "the kernel's compiled Rust crates are not in {tree} ({})",
                files.join(", ")
            ),
            Why::OldCrates(tree) => format!(
                "the kernel's Rust crates in {tree} are older than this module needs (no ffi crate, \
                 {KERNEL_FFI_CRATE}: Linux 6.13 and later have it)"
            ),
            Why::NoCrates { tree: None, .. } => {
                "the kernel release is unknown, so are its compiled Rust crates".to_string()
            }
            Why::OtherRustc { built_by, on_path } if built_by.is_empty() => format!(
                "the kernel names no rustc for its crates (no CONFIG_RUSTC_VERSION_TEXT) to match the \
                 rustc on PATH, '{on_path}'"
            ),
            Why::OtherRustc { built_by, on_path } => {
                format!("its crates were built by '{built_by}', the rustc on PATH is '{on_path}'")
            }
        }
    }
}

/// The way a build gets the kernel's Rust support.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The kernel's own compiled crates.
    Kernel,
    /// The pinned release's crates, built into the module, and why.
    Carried(Why),
}

/// What a build for the running kernel would use.
#[derive(Debug)]
pub(crate) struct RustMode {
    /// Kernel or carried mode.
    pub mode: Mode,
    /// The `rustc` on PATH, if any.
    pub rustc: Option<Found>,
    /// The `bindgen` on PATH, if any.
    pub bindgen: Option<Found>,
    /// Carried mode's toolchain; `None` in kernel mode.
    pub carried: Option<CarriedToolchain>,
}

/// Carried mode's toolchain on PATH, against the pinned minima.
#[derive(Debug)]
pub(crate) struct CarriedToolchain {
    /// Each part that is missing, with what is wrong (`rustc 1.85.0 or newer (PATH has 1.75.0)`).
    pub missing: Vec<(Part, String)>,
    /// What was found, line by line.
    pub detail: Vec<String>,
    /// The rustc on PATH, where its version reads.
    pub rustc: Option<Version>,
    /// The bindgen on PATH, where its version reads.
    pub bindgen: Option<Version>,
    /// bindgen's `Clang: ...` line.
    pub clang: Option<String>,
    /// Where the rust-src of that rustc comes from.
    pub rust_src_from: RustSrcFrom,
    /// The distribution, or why it is unknown.
    pub distro: Result<Distro, String>,
}

impl CarriedToolchain {
    /// The parts to install: the missing ones, a new rustc with its
    /// rust-src, a new bindgen with libclang.
    pub fn parts(&self) -> Vec<Part> {
        let has = |p: Part| self.missing.iter().any(|(m, _)| *m == p);
        [
            (Part::Rustc, has(Part::Rustc)),
            (Part::RustSrc, has(Part::RustSrc) || has(Part::Rustc)),
            (Part::Bindgen, has(Part::Bindgen)),
            (Part::Libclang, has(Part::Libclang) || has(Part::Bindgen)),
        ]
        .into_iter()
        .filter_map(|(p, needed)| needed.then_some(p))
        .collect()
    }

    /// How to get what is missing.
    pub fn fix(&self) -> String {
        carried::install(&self.distro, &self.parts(), self.rustc, &self.rust_src_from)
    }
}

/// What a build for the kernel of `release` with configuration `config`
/// would use; `None` without a configuration (nothing to decide from).
pub(crate) fn read(
    root: &Root,
    release: Option<&str>,
    config: Option<&KConfig>,
    path: &[String],
) -> Option<RustMode> {
    let c = config?;
    let rustc = toolchain::find(root, path, "rustc");
    let bindgen = toolchain::find(root, path, "bindgen");
    let tree = release.map(|r| format!("{}/build", modules_dir(r)));
    let files = tree
        .as_deref()
        .map_or_else(|| vec![KERNEL_CRATE], |t| kernel_crates(root, t, c));
    let crates = tree
        .as_deref()
        .is_some_and(|t| files.iter().all(|f| root.exists(&format!("{t}/{f}"))));
    // As rust-mode.sh compares them: a missing text and a missing rustc are both empty.
    let built_by = c.get("CONFIG_RUSTC_VERSION_TEXT").unwrap_or("");
    let on_path = rustc.as_ref().and_then(|f| f.version.as_deref().ok());
    let mode = if !c.enabled("CONFIG_RUST") {
        Mode::Carried(Why::NoRust {
            no_rustc: c.get("CONFIG_RUSTC_VERSION") == Some("0"),
        })
    } else if !crates {
        Mode::Carried(Why::NoCrates { tree, files })
    } else if let Some(t) = tree
        .as_deref()
        .filter(|t| !root.exists(&format!("{t}/{KERNEL_FFI_CRATE}")))
    {
        Mode::Carried(Why::OldCrates(t.to_string()))
    } else if on_path.unwrap_or("") != built_by {
        Mode::Carried(Why::OtherRustc {
            built_by: built_by.to_string(),
            on_path: on_path.unwrap_or("none").to_string(),
        })
    } else {
        Mode::Kernel
    };
    let carried = matches!(mode, Mode::Carried(_))
        .then(|| carried_toolchain(root, rustc.as_ref(), bindgen.as_ref(), path));
    Some(RustMode {
        mode,
        rustc,
        bindgen,
        carried,
    })
}

/// A program's version against `min`: the version where it reads, and
/// what is wrong where it is missing, unreadable or too old.
fn at_least(
    found: Option<&Found>,
    name: &str,
    min: Version,
    path: &[String],
) -> (Option<Version>, Option<String>, String) {
    let want = format!("{name} {min} or newer");
    let Some(f) = found else {
        return (
            None,
            Some(format!("{want} (none on PATH)")),
            format!("{name}: not on PATH ({})", path.join(":")),
        );
    };
    let line = match &f.version {
        Ok(line) => line,
        Err(e) => {
            return (
                None,
                Some(format!("{want} ({}: {e})", f.path)),
                format!("{name}: {}: {e}", f.path),
            )
        }
    };
    let detail = format!("{name}: {}: {line}", f.path);
    match carried::version_in(line) {
        Err(e) => (
            None,
            Some(format!("{want} ({} --version: {e})", f.path)),
            detail,
        ),
        Ok(v) if v < min => (Some(v), Some(format!("{want} (PATH has {v})")), detail),
        Ok(v) => (Some(v), None, detail),
    }
}

/// Carried mode's toolchain as `rust-toolchain.sh` checks it: rustc, then
/// its rust-src (only for a rustc new enough), bindgen, then libclang
/// (only for a bindgen new enough).
fn carried_toolchain(
    root: &Root,
    rustc: Option<&Found>,
    bindgen: Option<&Found>,
    path: &[String],
) -> CarriedToolchain {
    let mut detail = vec![format!(
        "carried mode (Linux {}, kbuild/carried.pin) needs rustc {RUSTC_MIN} or newer with its rust-src, \
         bindgen {BINDGEN_MIN} or newer and libclang",
        carried::LINUX
    )];
    let mut missing = Vec::new();
    let mut rust_src_from = RustSrcFrom::Distribution;

    let (rustc_version, wrong, line) = at_least(rustc, "rustc", RUSTC_MIN, path);
    detail.push(line);
    match (wrong, rustc, rustc_version) {
        (Some(wrong), _, _) => missing.push((Part::Rustc, wrong)),
        (None, Some(f), Some(v)) => match toolchain::sysroot(root, f) {
            Ok(sysroot) => {
                rust_src_from = RustSrcFrom::of_sysroot(&sysroot);
                let src = format!("{}/{RUST_SRC}", sysroot.trim_end_matches('/'));
                let present = root.exists(&src);
                detail.push(format!(
                    "rust-src: {src}: {}",
                    if present { "present" } else { "absent" }
                ));
                if !present {
                    missing.push((
                        Part::RustSrc,
                        format!("the rust-src of rustc {v} (no {src})"),
                    ));
                }
            }
            Err(e) => {
                detail.push(format!("rustc: {}: {e}", f.path));
                missing.push((
                    Part::RustSrc,
                    format!("the rust-src of rustc {v} (where it belongs is unknown: rustc {e})"),
                ));
            }
        },
        _ => {}
    }

    let (bindgen_version, wrong, line) = at_least(bindgen, "bindgen", BINDGEN_MIN, path);
    detail.push(line);
    let mut clang = None;
    match (wrong, bindgen) {
        (Some(wrong), _) => missing.push((Part::Bindgen, wrong)),
        (None, Some(f)) => match toolchain::clang(root, f) {
            Ok(line) => {
                detail.push(format!("bindgen --version --verbose: {line}"));
                clang = Some(line);
            }
            Err(e) => {
                detail.push(format!("bindgen: {}: {e}", f.path));
                missing.push((Part::Libclang, format!("libclang ({} {e})", f.path)));
            }
        },
        (None, None) => {}
    }

    let distro = Distro::read(root);
    detail.push(match &distro {
        Ok(d) => format!("{}: {}", carried::OS_RELEASE, d.name),
        Err(why) => format!("distribution unknown: {why}"),
    });
    CarriedToolchain {
        missing,
        detail,
        rustc: rustc_version,
        bindgen: bindgen_version,
        clang,
        rust_src_from,
        distro,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(version: Result<&str, &str>) -> Found {
        Found {
            path: "/usr/bin/rustc".to_string(),
            version: version.map(str::to_string).map_err(str::to_string),
        }
    }

    /// The minimum itself is enough; anything below it, unreadable or
    /// absent is named with what PATH has.
    #[test]
    fn minimum_versions() {
        let check = |f: Option<Found>| {
            let (v, wrong, _) = at_least(f.as_ref(), "rustc", RUSTC_MIN, &[]);
            (v.map(|v| v.to_string()), wrong)
        };
        assert_eq!(
            check(Some(found(Ok("rustc 1.85.0 (4d91de4e4 2025-02-17)")))),
            (Some("1.85.0".to_string()), None)
        );
        assert_eq!(
            check(Some(found(Ok("rustc 1.96.0")))),
            (Some("1.96.0".to_string()), None)
        );
        assert_eq!(
            check(Some(found(Ok("rustc 1.84.1")))),
            (
                Some("1.84.1".to_string()),
                Some("rustc 1.85.0 or newer (PATH has 1.84.1)".to_string())
            )
        );
        assert_eq!(
            check(Some(found(Ok("rustc")))),
            (
                None,
                Some("rustc 1.85.0 or newer (/usr/bin/rustc --version: no version number in 'rustc')".to_string())
            )
        );
        assert_eq!(
            check(Some(found(Err("--version failed (exit status: 1)")))),
            (
                None,
                Some(
                    "rustc 1.85.0 or newer (/usr/bin/rustc: --version failed (exit status: 1))"
                        .to_string()
                )
            )
        );
        assert_eq!(
            check(None),
            (
                None,
                Some("rustc 1.85.0 or newer (none on PATH)".to_string())
            )
        );
    }

    /// A new rustc comes with its rust-src, a new bindgen with libclang.
    #[test]
    fn parts_to_install() {
        let toolchain = |missing: Vec<Part>| CarriedToolchain {
            missing: missing.into_iter().map(|p| (p, String::new())).collect(),
            detail: Vec::new(),
            rustc: None,
            bindgen: None,
            clang: None,
            rust_src_from: RustSrcFrom::Distribution,
            distro: Err(String::new()),
        };
        assert_eq!(
            toolchain(vec![Part::Rustc, Part::Bindgen]).parts(),
            [Part::Rustc, Part::RustSrc, Part::Bindgen, Part::Libclang]
        );
        assert_eq!(toolchain(vec![Part::Libclang]).parts(), [Part::Libclang]);
        assert_eq!(toolchain(vec![Part::RustSrc]).parts(), [Part::RustSrc]);
        assert!(toolchain(Vec::new()).parts().is_empty());
    }

    #[test]
    fn reasons() {
        assert_eq!(
            Why::NoCrates {
                tree: Some("/lib/modules/7.3.4+deb13-amd64/build".to_string()),
                files: vec![KERNEL_CRATE, TARGET_SPEC],
            }
            .text(),
            "the kernel's compiled Rust crates are not in /lib/modules/7.3.4+deb13-amd64/build \
             (rust/libkernel.rmeta, scripts/target.json)"
        );
        assert_eq!(
            Why::NoRust { no_rustc: false }.text(),
            "the kernel is built without Rust (CONFIG_RUST is not set)"
        );
        // An older kernel names no rustc (rust-mode.sh: never kernel mode).
        assert_eq!(
            Why::OtherRustc {
                built_by: String::new(),
                on_path: "rustc 1.85.1".to_string()
            }
            .text(),
            "the kernel names no rustc for its crates (no CONFIG_RUSTC_VERSION_TEXT) to match the \
             rustc on PATH, 'rustc 1.85.1'"
        );
    }
}
