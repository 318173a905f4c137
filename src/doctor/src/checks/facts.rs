// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The live state behind the checks, gathered once for the JSON `facts`
//! object: scripts and tests read these fields instead of parsing the
//! checks' sentences.

use crate::host::kmod::{Origin, NV_P2P_PREFIX, PEER_REGISTER};
use crate::host::rust_mode::Mode;
use crate::host::{Host, MODULE};

/// The live state the checks judged, for machines (the JSON `facts`
/// object): what is loaded, with which version and parameters, who exports
/// the two APIs the module sits between, and which other peer-memory
/// modules are loaded or installed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `uname -r`, if known.
    pub kernel_release: Option<String>,
    /// What the kernel can host.
    pub kernel: KernelFacts,
    /// `nvidia_peermem`, loaded or not.
    pub module: ModuleFacts,
    /// `nvidia.ko`: `None` when not loaded, else its version (if it has one).
    pub nvidia_driver: Option<Option<String>>,
    /// Whether `/proc/kallsyms` could be read (the two fields below need it).
    pub kallsyms_readable: bool,
    /// The modules exporting `nvidia_p2p_*` (`vmlinux` for the kernel image), sorted.
    pub p2p_exporters: Vec<String>,
    /// The module exporting `ib_register_peer_memory_client`, if any.
    pub peer_memory_provider: Option<String>,
    /// Other peer-memory modules that are loaded (`nv_peer_mem`, or NVIDIA's
    /// `nvidia_peermem` in this one's place).
    pub conflicts_loaded: Vec<String>,
    /// Installed module files (below `/lib/modules/<release>/`) of other peer-memory modules.
    pub conflicts_installed: Vec<String>,
}

/// The running kernel as the `kernel.*` checks read it; `None` where it cannot be told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// The configuration file read.
    pub config: Option<String>,
    /// `CONFIG_RUST`.
    pub rust: Option<bool>,
    /// How a build gets the kernel's Rust support: `kernel` or `carried`.
    pub rust_mode: Option<String>,
    /// `CONFIG_MODVERSIONS`.
    pub modversions: Option<bool>,
    /// `/proc/sys/kernel/modules_disabled`.
    pub modules_disabled: Option<bool>,
    /// Whether unsigned modules are refused.
    pub signatures_enforced: Option<bool>,
    /// The lockdown level (`none`, `integrity`, `confidentiality`).
    pub lockdown: Option<String>,
}

/// `nvidia_peermem` as `/sys/module` and `/lib/modules` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleFacts {
    /// Whether `/sys/module/nvidia_peermem` exists.
    pub loaded: bool,
    /// `version`, when loaded.
    pub version: Option<String>,
    /// `initstate`, when loaded.
    pub initstate: Option<String>,
    /// Whether the loaded module is NVIDIA's bundled one (its version is the driver's).
    pub nvidia_bundled: bool,
    /// Every parameter in `/sys/module/nvidia_peermem/parameters`, by name.
    pub parameters: Vec<(String, String)>,
    /// This project's module files for the running kernel (below `/lib/modules/<release>/`).
    pub installed: Vec<String>,
}

/// The facts of one run.
pub(crate) fn gather(host: &Host) -> Facts {
    let module = match &host.ours {
        None => ModuleFacts::default(),
        Some(m) => ModuleFacts {
            loaded: true,
            version: m.version.clone(),
            initstate: m.initstate.clone(),
            nvidia_bundled: host.loaded_is_nvidias(),
            parameters: host.params.clone(),
            installed: Vec::new(),
        },
    };
    let module = ModuleFacts {
        installed: host
            .files
            .iter()
            .filter(|f| f.origin == Origin::Ours)
            .map(|f| f.rel.clone())
            .collect(),
        ..module
    };
    let mut p2p_exporters: Vec<String> = host
        .kallsyms
        .with_prefix(NV_P2P_PREFIX)
        .map(|(_, m)| m.unwrap_or("vmlinux").to_string())
        .collect();
    p2p_exporters.sort();
    p2p_exporters.dedup();
    let mut conflicts_loaded = Vec::new();
    if host.loaded("nv_peer_mem").is_some() {
        conflicts_loaded.push("nv_peer_mem".to_string());
    }
    if host.loaded_is_nvidias() {
        conflicts_loaded.push(MODULE.to_string());
    }
    Facts {
        kernel_release: host.release.clone(),
        kernel: kernel(host),
        module,
        nvidia_driver: host.nvidia.as_ref().map(|n| n.version.clone()),
        kallsyms_readable: host.kallsyms.readable,
        p2p_exporters,
        peer_memory_provider: host
            .kallsyms
            .owner(PEER_REGISTER)
            .map(|m| m.unwrap_or("vmlinux").to_string()),
        conflicts_loaded,
        conflicts_installed: host
            .files
            .iter()
            .filter(|f| f.origin != Origin::Ours)
            .map(|f| f.rel.clone())
            .collect(),
    }
}

/// The kernel's facts.
fn kernel(host: &Host) -> KernelFacts {
    let config = host.config();
    KernelFacts {
        config: config.map(|c| c.source.clone()),
        rust: config.map(|c| c.enabled("CONFIG_RUST")),
        rust_mode: host.rust.as_ref().map(|r| {
            match r.mode {
                Mode::Kernel => "kernel",
                Mode::Carried(_) => "carried",
            }
            .to_string()
        }),
        modversions: config.map(|c| c.enabled("CONFIG_MODVERSIONS")),
        modules_disabled: match host.modules_disabled.as_deref() {
            Some("0") => Some(false),
            Some("1") => Some(true),
            _ => None,
        },
        signatures_enforced: host.enforcement.enforced,
        lockdown: host
            .enforcement
            .lockdown
            .as_ref()
            .map(|l| l.mode.as_str().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::{Path, PathBuf};

    use super::Facts;
    use crate::host::cuda::CudaAnswer;
    use crate::host::root::Root;
    use crate::host::Host;

    /// A scratch root with `files` (path, content).
    fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
        crate::host::root::scratch_tree(&format!("facts-{name}"), files)
    }

    fn facts(dir: &Path) -> Facts {
        let root = Root::new(dir).expect("root");
        super::gather(&Host::read(&root, CudaAnswer::NotAsked))
    }

    /// The stack of the guest tests: the module, a GPU simulator named
    /// `nvidia` without a version banner, a MOFED core simulator
    /// providing the peer-memory API, an NVIDIA-built module installed.
    #[test]
    fn live_stack() {
        let dir = tree(
            "live",
            &[
                ("proc/sys/kernel/osrelease", "7.3.4+deb13-amd64\n"),
                ("sys/module/nvidia_peermem/version", "1.0.0\n"),
                ("sys/module/nvidia_peermem/initstate", "live\n"),
                (
                    "sys/module/nvidia_peermem/parameters/persistent_api_support",
                    "0\n",
                ),
                (
                    "sys/module/nvidia_peermem/parameters/peerdirect_support",
                    "0\n",
                ),
                ("sys/module/nvidia/initstate", "live\n"),
                ("sys/module/nvidia/version", "580.95.05\n"),
                (
                    "lib/modules/7.3.4+deb13-amd64/extra/nvidia_peermem.ko",
                    "author=nvidia-peermem-rs developers",
                ),
                (
                    "lib/modules/7.3.4+deb13-amd64/kernel/nvidia-peermem.ko.xz",
                    "",
                ),
                (
                    "proc/kallsyms",
                    "0000000000000000 T nvidia_p2p_get_pages\t[nvidia]\n\
                     0000000000000000 T nvidia_p2p_put_pages\t[nvidia]\n\
                     0000000000000000 T ib_register_peer_memory_client\t[mofed_peer_sim]\n",
                ),
            ],
        );
        let f = facts(&dir);
        assert_eq!(f.kernel_release.as_deref(), Some("7.3.4+deb13-amd64"));
        assert!(f.module.loaded);
        assert_eq!(f.module.version.as_deref(), Some("1.0.0"));
        assert_eq!(f.module.initstate.as_deref(), Some("live"));
        assert!(!f.module.nvidia_bundled);
        assert_eq!(
            f.module.parameters,
            [
                ("peerdirect_support".to_string(), "0".to_string()),
                ("persistent_api_support".to_string(), "0".to_string())
            ]
        );
        assert_eq!(f.module.installed, ["extra/nvidia_peermem.ko"]);
        assert_eq!(f.nvidia_driver, Some(Some("580.95.05".to_string())));
        assert!(f.kallsyms_readable);
        assert_eq!(f.p2p_exporters, ["nvidia"]);
        assert_eq!(f.peer_memory_provider.as_deref(), Some("mofed_peer_sim"));
        assert!(f.conflicts_loaded.is_empty());
        assert_eq!(f.conflicts_installed, ["kernel/nvidia-peermem.ko.xz"]);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Nothing loaded, kallsyms unreadable: everything absent, nothing invented.
    #[test]
    fn nothing_loaded() {
        let dir = tree("empty", &[]);
        let f = facts(&dir);
        assert_eq!(f, Facts::default());
        let _ = fs::remove_dir_all(&dir);
    }

    /// NVIDIA's module in this one's place, and Mellanox's loaded too.
    #[test]
    fn conflicts_loaded() {
        let dir = tree(
            "conflicts",
            &[
                ("sys/module/nvidia_peermem/version", "580.95.05\n"),
                ("sys/module/nvidia/version", "580.95.05\n"),
                ("sys/module/nv_peer_mem/version", "1.3\n"),
            ],
        );
        let f = facts(&dir);
        assert!(f.module.nvidia_bundled);
        assert_eq!(f.conflicts_loaded, ["nv_peer_mem", "nvidia_peermem"]);
        assert_eq!(f.nvidia_driver, Some(Some("580.95.05".to_string())));
        assert!(f.module.parameters.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
