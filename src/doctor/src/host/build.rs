// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! What a build of the module meets on this host: the kernel's build tree
//! and the module files whose symbol CRCs it takes.

use std::collections::BTreeMap;

use crate::host::elf::{self, Sections};
use crate::host::inflate;
use crate::host::kconfig::KConfig;
use crate::host::kmod::{self, PEER_REGISTER};
use crate::host::root::Root;
use crate::host::rust_mode;

/// What a module file says about itself.
#[derive(Debug, Default)]
pub struct KoFile {
    /// `.modinfo`, by key.
    pub modinfo: BTreeMap<String, String>,
    /// `__versions`: empty without MODVERSIONS.
    pub crcs: BTreeMap<String, u32>,
    /// The CRCs it exports (`__crc_*`): empty without MODVERSIONS.
    pub exports: BTreeMap<String, u32>,
    /// Why the file could not be read as ELF, if so.
    pub problem: Option<String>,
}

/// Reads a module file (`.ko`, `.ko.gz`, `.ko.xz`, `.ko.zst`).
pub fn read_ko(root: &Root, path: &str) -> Option<KoFile> {
    let bytes = root.read_bytes(path)?;
    let mut ko = KoFile::default();
    let bytes = match inflate::module(path, bytes) {
        Ok(b) => b,
        Err(e) => {
            ko.problem = Some(e);
            return Some(ko);
        }
    };
    match Sections::parse(&bytes) {
        Ok(s) => {
            ko.modinfo = elf::modinfo(s.get(".modinfo").unwrap_or(&[]))
                .into_iter()
                .collect();
            match elf::versions(&s).and_then(|v| Ok((v, elf::exports(&s)?))) {
                Ok((v, e)) => (ko.crcs, ko.exports) = (v, e),
                Err(e) => ko.problem = Some(e.0),
            }
        }
        Err(e) => {
            // Not ELF (a stand-in or a damaged file): modinfo strings, if any.
            ko.modinfo = elf::modinfo(&bytes).into_iter().collect();
            ko.problem = Some(e.0);
        }
    }
    Some(ko)
}

/// What nvidia_peermem imports from, each found by one symbol it exports.
pub const EXPORTERS: [(&str, &str); 2] = [
    ("the NVIDIA driver", "nvidia_p2p_get_pages"),
    ("the RDMA core", PEER_REGISTER),
];

/// The module file that exports `symbol` for `release` as the module's
/// build finds it: a line of `conf` ([`EXPORTERS_CONF`]), else as modprobe
/// finds it (modules.symbols, then modules.dep).
///
/// [`EXPORTERS_CONF`]: crate::host::paths::EXPORTERS_CONF
pub fn exporter_file(
    root: &Root,
    conf: Option<&str>,
    release: &str,
    symbol: &str,
) -> Option<String> {
    let key = if symbol == PEER_REGISTER {
        "rdma"
    } else {
        "driver"
    };
    let named = conf.and_then(|conf| {
        conf.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(key))
                .then(|| w.next().map(|p| p.replace("{kernel}", release)))
                .flatten()
        })
    });
    if named.is_some() {
        return named;
    }
    let dir = kmod::modules_dir(release);
    let name = kmod::symbol_provider(root, release, symbol)?;
    kmod::modprobe_target(root, release, &name).map(|rel| format!("{dir}/{rel}"))
}

/// The version in the modinfo of the driver's `nvidia.ko` on disk, and its path.
pub fn driver_on_disk(root: &Root, release: &str) -> Option<(String, String)> {
    let dir = kmod::modules_dir(release);
    let file = kmod::modprobe_target(root, release, "nvidia")
        .map(|rel| format!("{dir}/{rel}"))
        .or_else(|| {
            root.walk_files(&dir)
                .into_iter()
                .find(|f| kmod::module_stem(f) == Some("nvidia"))
        })?;
    let ko = read_ko(root, &file)?;
    Some((ko.modinfo.get("version")?.clone(), file))
}

/// The kernel's build tree, `/lib/modules/<release>/build`, as a build of
/// the module finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelTree {
    /// Its path.
    pub build: String,
    /// Whether it is a directory.
    pub present: bool,
    /// Whether `/lib/modules/<release>` is.
    pub packaged: bool,
    /// The configuration `rust-mode.sh` takes it as configured by
    /// (`include/config/auto.conf`, else `.config`), if either exists.
    pub config: Option<String>,
    /// The files an out-of-tree Rust module links against in it (as
    /// `scripts/rust-headers.sh` checks; the target spec only where the
    /// architecture has one), each with whether it is there.
    pub rust_files: Vec<(&'static str, bool)>,
    /// Debian's kernel source, from which `rust-headers` builds the crates.
    pub linux_source: Option<String>,
    /// The compiler prefix of arm64's 32-bit compat vDSO that the headers
    /// name (`CROSS_COMPILE_COMPAT` in `.kernelvariables`), if any.
    pub compat_prefix: Option<String>,
    /// Whether `<prefix>gcc` is on the search path.
    pub compat_gcc: bool,
}

impl KernelTree {
    /// The build tree of `release`; `path` is where programs are looked for.
    pub fn read(
        root: &Root,
        release: &str,
        config: Option<&KConfig>,
        path: &[String],
    ) -> KernelTree {
        let build = format!("{}/build", kmod::modules_dir(release));
        let mut rust_files = vec![rust_mode::KERNEL_CRATE, "rust/libmacros.so"];
        if config.is_none_or(|c| rust_mode::needs_target_spec(root, &build, c)) {
            rust_files.push(rust_mode::TARGET_SPEC);
        }
        let base = format!("/usr/src/linux-source-{}", source_series(release));
        let vars = root
            .read_text(&format!("{build}/.kernelvariables"))
            .unwrap_or_default();
        let compat_prefix = vars
            .lines()
            .find_map(|l| l.strip_prefix("override CROSS_COMPILE_COMPAT = "))
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        let compat_gcc = compat_prefix.as_ref().is_some_and(|prefix| {
            path.iter()
                .any(|dir| root.is_file(&format!("{}/{prefix}gcc", dir.trim_end_matches('/'))))
        });
        KernelTree {
            present: root.is_dir(&build),
            packaged: root.is_dir(&kmod::modules_dir(release)),
            config: ["include/config/auto.conf", ".config"]
                .iter()
                .map(|f| format!("{build}/{f}"))
                .find(|f| root.exists(f)),
            rust_files: rust_files
                .into_iter()
                .map(|f| (f, root.exists(&format!("{build}/{f}"))))
                .collect(),
            linux_source: [".tar.xz", ".tar.bz2", ""]
                .iter()
                .map(|ext| format!("{base}{ext}"))
                .find(|p| root.exists(p)),
            compat_prefix,
            compat_gcc,
            build,
        }
    }
}

/// `7.3` from `7.3.4+deb13-amd64`.
pub fn source_series(release: &str) -> String {
    let digits = |p: &str| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    };
    release
        .split('.')
        .take(2)
        .map(digits)
        .collect::<Vec<_>>()
        .join(".")
}
