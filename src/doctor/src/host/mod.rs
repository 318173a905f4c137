// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The bottom floor: what the doctor knows of the host, read once into a
//! [`Host`] that the checks judge.

pub mod bars;
pub mod build;
pub mod carried;
pub mod cuda;
pub mod elf;
pub mod inflate;
pub mod kconfig;
pub mod klog;
pub mod kmod;
pub mod nvparams;
pub mod paths;
pub mod pci;
pub mod root;
pub mod rust_mode;
pub mod signing;
pub mod toolchain;
pub mod topology;

use std::collections::BTreeMap;

use build::{KernelTree, KoFile, EXPORTERS};
use cuda::CudaAnswer;
use kconfig::{ConfigRead, KConfig};
use kmod::{Kallsyms, Loaded, ModFile, Origin, Rule};
use paths::*;
use pci::{Acs, PciDev};
use root::Root;
use signing::{Enforcement, ModSig, MokKey};
use topology::Topology;

/// The module this doctor is about, as `/sys/module` names it.
pub const MODULE: &str = "nvidia_peermem";

/// Other modules the checks ask about, besides `nvidia_peermem` and `nvidia`.
const OTHERS: [&str; 6] = [
    "nv_peer_mem",
    "nvidia_uvm",
    "ib_core",
    "ib_uverbs",
    "mlx_compat",
    "mlx5_core",
];

/// The per-client counters of ib_core in [`MEMORY_PEERS`], in the order
/// they are reported.
pub const PEER_COUNTERS: [&str; 7] = [
    "num_alloc_mrs",
    "num_dealloc_mrs",
    "num_reg_pages",
    "num_dereg_pages",
    "num_reg_bytes",
    "num_dereg_bytes",
    "num_free_callbacks",
];

/// The line the module's Makefile writes into DKMS's make.log on a
/// `CONFIG_MODVERSIONS` kernel, before the files it took the CRCs from.
const CRCS_FROM: &str = "nvidia_peermem: CONFIG_MODVERSIONS=y: CRCs from ";

/// One peer-memory client of ib_core ([`MEMORY_PEERS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerClient {
    /// `nv_mem`, `nv_mem_nc`, `nv_mem_fallback`, ...
    pub name: String,
    /// Whether it is a directory.
    pub dir: bool,
    /// Each of [`PEER_COUNTERS`], where it reads as a number.
    pub counters: [Option<u64>; PEER_COUNTERS.len()],
}

/// A module nvidia_peermem imports from, as its build finds it.
#[derive(Debug)]
pub struct Exporter {
    /// `the NVIDIA driver`, `the RDMA core`.
    pub whose: &'static str,
    /// The symbol it is found by.
    pub symbol: &'static str,
    /// Its file, if one is installed.
    pub file: Option<String>,
    /// What the file says, read where the installed module has CRCs to
    /// compare with it or the kernel has MODVERSIONS; `None` otherwise and
    /// when it cannot be read.
    pub ko: Option<KoFile>,
}

/// The IOMMU as sysfs shows it.
#[derive(Debug, Clone, Default)]
pub struct Iommu {
    /// Its units ([`IOMMU_UNITS`]).
    pub units: Vec<String>,
    /// Its groups ([`IOMMU_GROUPS`]).
    pub groups: Vec<String>,
    /// The domain type of the group of each GPU and NIC: `(address, type)`.
    pub devices: Vec<(String, String)>,
    /// The domain type of each group: `(group, type)`.
    pub group_types: Vec<(String, String)>,
}

/// Everything the checks judge, read from the host once.
pub struct Host {
    /// `uname -r`, if known.
    pub release: Option<String>,
    /// The kernel's command line, empty when unreadable.
    pub cmdline: String,
    /// [`MODULES_DISABLED`], if readable.
    pub modules_disabled: Option<String>,
    /// [`PROC_MODULES`], if readable.
    pub proc_modules: Option<String>,
    /// Peer-memory and P2P symbols.
    pub kallsyms: Kallsyms,
    /// `nvidia_peermem`, if loaded.
    pub ours: Option<Loaded>,
    /// Its parameters, `(name, value)`, when loaded.
    pub params: Vec<(String, String)>,
    /// Its `srcversion` and `refcnt`, when loaded and readable.
    pub srcversion: Option<String>,
    /// See [`Host::srcversion`].
    pub refcnt: Option<String>,
    /// `nvidia`, if loaded.
    pub nvidia: Option<Loaded>,
    /// The loaded ones of the other modules asked about.
    others: BTreeMap<&'static str, Loaded>,
    /// [`DRIVER_VERSION`] and [`DRIVER_PARAMS`], if readable.
    pub driver_banner: Option<String>,
    /// See [`Host::driver_banner`].
    pub driver_params: Option<String>,
    /// How coherent GPU memory is managed, from [`Host::driver_params`]
    /// (`CoherentGPUMemoryMode`, `EnableUserNUMAManagement`), if it names it.
    pub coherent_mode: Option<nvparams::CoherentMemoryMode>,
    /// modprobe.d rules naming `nvidia_peermem`.
    pub rules: Vec<Rule>,
    /// Installed peermem module files.
    pub files: Vec<ModFile>,
    /// What the first of this project's installed module files says.
    pub installed_ko: Option<KoFile>,
    /// The signature of each of this project's installed module files.
    pub signatures: Vec<(String, ModSig)>,
    /// The files `modprobe nvidia_peermem` and `modprobe nvidia-peermem`
    /// load (below the release's directory): the second follows an
    /// install rule to the peermem module it loads.
    pub module_target: Option<String>,
    /// See [`Host::module_target`].
    pub peermem_target: Option<String>,
    /// The modules nvidia_peermem imports from ([`EXPORTERS`]).
    pub exporters: Vec<Exporter>,
    /// The version of the driver's `nvidia.ko` on disk, and its path.
    pub driver_on_disk: Option<(String, String)>,
    /// The kernel's build tree, when the release is known.
    pub tree: Option<KernelTree>,
    /// Whether the host booted through UEFI.
    pub efi: bool,
    /// The key and certificate DKMS signs with.
    pub mok: MokKey,
    /// Whether that certificate is enrolled (`None`: unknown).
    pub mok_enrolled: Option<bool>,
    /// Every PCI function.
    pub pci: Vec<PciDev>,
    /// GPUs, NICs and pairs.
    pub topo: Topology,
    /// The ACS of each bridge between a GPU and a NIC, by address.
    pub acs: BTreeMap<String, Acs>,
    /// The IOMMU.
    pub iommu: Iommu,
    /// ib_core's peer-memory clients; `None` without [`MEMORY_PEERS`].
    pub peers: Option<Vec<PeerClient>>,
    /// Which of [`GDR_PATHS`] exist.
    pub gdr: [bool; 4],
    /// The module's statistics file, if readable.
    pub stats: Option<String>,
    /// Whether [`DEBUGFS`] lists anything.
    pub debugfs: bool,
    /// The kernel log's records.
    pub klog: Vec<String>,
    /// Whether [`OPERATOR_DRIVER_ROOT`] and [`OPERATOR_MOFED_ROOT`] exist.
    pub operator_driver: bool,
    /// See [`Host::operator_driver`].
    pub operator_mofed: bool,
    /// The NVIDIA driver's package in DKMS, `name/version`, if any.
    pub dkms_driver: Option<String>,
    /// The NVIDIA driver's DKMS module, `name/version`, when it is there
    /// but DKMS has no build of it for the release yet (a driver package
    /// between its unpack and its postinst; [`dkms_driver_pending`]).
    pub dkms_driver_pending: Option<String>,
    /// The files DKMS's latest build of the module took its CRCs from.
    pub dkms_crcs: Option<String>,
    /// [`NV_PEER_MEM_CONF`] and [`EXPORTERS_CONF`], if readable.
    pub nv_peer_mem_conf: Option<String>,
    /// See [`Host::nv_peer_mem_conf`].
    pub exporters_conf: Option<String>,
    /// The kernel configuration, if readable.
    pub config: ConfigRead,
    /// Whether and why the kernel enforces module signatures.
    pub enforcement: Enforcement,
    /// Where `rustc` and `bindgen` are looked for.
    pub path: Vec<String>,
    /// How a build gets the kernel's Rust support; `None` without a configuration.
    pub(crate) rust: Option<rust_mode::RustMode>,
    /// What libcuda said about the GPUs.
    pub cuda: CudaAnswer,
}

impl Host {
    /// Reads the host below `root`, with libcuda's answer given and
    /// `rustc` and `bindgen` looked for on this process's `PATH`.
    pub fn read(root: &Root, cuda: CudaAnswer) -> Host {
        let release = kmod::kernel_release(root);
        let files = release
            .as_deref()
            .map(|r| kmod::peermem_files(root, r))
            .unwrap_or_default();
        let config = kconfig::read(root, release.as_deref());
        let cmdline = root.read_attr(CMDLINE).unwrap_or_default();
        let path = toolchain::search_path(std::env::var("PATH").ok().as_deref());
        let rust = rust_mode::read(root, release.as_deref(), config.config.as_ref(), &path);
        let ours = kmod::loaded(root, MODULE);
        let ours_attr = |name: &str| {
            ours.as_ref()
                .and_then(|_| root.read_attr(&format!("{SYS_MODULE}/{MODULE}/{name}")))
        };
        let pci = pci::all(root);
        let rules = kmod::modprobe_rules(root, MODULE);
        let exporters_conf = root.read_text(EXPORTERS_CONF);
        let installed_ko = release.as_deref().and_then(|r| {
            let first = files.iter().find(|f| f.origin == Origin::Ours)?;
            build::read_ko(root, &format!("{}/{}", kmod::modules_dir(r), first.rel))
        });
        // The exporters' files are read (and inflated: the driver's is tens
        // of MB) only where their CRCs or vermagic matter: the installed
        // module has CRCs to compare, or the kernel has MODVERSIONS.
        let read_exporters = installed_ko.as_ref().is_some_and(|k| !k.crcs.is_empty())
            || config
                .config
                .as_ref()
                .is_some_and(|c| c.enabled("CONFIG_MODVERSIONS"));
        let exporters = EXPORTERS
            .iter()
            .map(|&(whose, symbol)| {
                let file = release
                    .as_deref()
                    .and_then(|r| build::exporter_file(root, exporters_conf.as_deref(), r, symbol));
                Exporter {
                    ko: file
                        .as_deref()
                        .filter(|_| read_exporters)
                        .and_then(|f| build::read_ko(root, f)),
                    whose,
                    symbol,
                    file,
                }
            })
            .collect();
        let dkms_driver_pending = release
            .as_deref()
            .and_then(|r| dkms_driver_pending(root, r));
        let mok = signing::dkms_mok(root);
        let topo = Topology::scan(root, &pci);
        let driver_params = root.read_text(DRIVER_PARAMS);
        Host {
            kallsyms: Kallsyms::read(root),
            params: ours.as_ref().map_or_else(Vec::new, |_| params(root)),
            srcversion: ours_attr("srcversion"),
            refcnt: ours_attr("refcnt"),
            ours,
            nvidia: kmod::loaded(root, "nvidia"),
            others: OTHERS
                .iter()
                .filter_map(|&name| Some((name, kmod::loaded(root, name)?)))
                .collect(),
            modules_disabled: root.read_attr(MODULES_DISABLED),
            proc_modules: root.read_text(PROC_MODULES),
            driver_banner: root.read_attr(DRIVER_VERSION),
            coherent_mode: driver_params
                .as_deref()
                .and_then(nvparams::CoherentMemoryMode::read),
            driver_params,
            module_target: release
                .as_deref()
                .and_then(|r| kmod::modprobe_target(root, r, MODULE)),
            peermem_target: release
                .as_deref()
                .and_then(|r| peermem_target(root, &rules, r)),
            rules,
            signatures: release
                .as_deref()
                .map_or_else(Vec::new, |r| signatures(root, &files, r)),
            installed_ko,
            exporters,
            driver_on_disk: release
                .as_deref()
                .and_then(|r| build::driver_on_disk(root, r)),
            tree: release
                .as_deref()
                .map(|r| KernelTree::read(root, r, config.config.as_ref(), &path)),
            efi: root.is_dir(signing::EFI_DIR),
            mok_enrolled: signing::mok_enrolled(root, &mok.cert),
            mok,
            dkms_crcs: release.as_deref().and_then(|r| dkms_crcs(root, r)),
            files,
            release,
            acs: bridge_acs(root, &topo),
            iommu: iommu(root, &topo),
            pci,
            topo,
            peers: peers(root),
            gdr: GDR_PATHS.map(|p| root.exists(p)),
            stats: root.read_text(STATS_PATH),
            debugfs: !root.list(DEBUGFS).is_empty(),
            klog: klog::read(root),
            operator_driver: root.exists(OPERATOR_DRIVER_ROOT),
            operator_mofed: root.exists(OPERATOR_MOFED_ROOT),
            dkms_driver: dkms_driver(root),
            dkms_driver_pending,
            nv_peer_mem_conf: root.read_text(NV_PEER_MEM_CONF),
            exporters_conf,
            enforcement: signing::enforcement(root, config.config.as_ref(), &cmdline),
            cmdline,
            config,
            path,
            rust,
            cuda,
        }
    }

    /// The file of the exporter found by `symbol` (one of [`EXPORTERS`]).
    pub fn exporter(&self, symbol: &str) -> Option<&str> {
        self.exporters
            .iter()
            .find(|e| e.symbol == symbol)
            .and_then(|e| e.file.as_deref())
    }

    /// The module `name` (one of [`OTHERS`]), if loaded.
    pub fn loaded(&self, name: &str) -> Option<&Loaded> {
        self.others.get(name)
    }

    /// The value of one of `nvidia_peermem`'s parameters.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the loaded `nvidia_peermem` is NVIDIA's: its version is the driver's.
    pub fn loaded_is_nvidias(&self) -> bool {
        match (&self.ours, &self.nvidia) {
            (Some(ours), Some(nv)) => ours.version.is_some() && ours.version == nv.version,
            _ => false,
        }
    }

    /// The kernel configuration, if readable.
    pub fn config(&self) -> Option<&KConfig> {
        self.config.config.as_ref()
    }

    /// Whether a build for this kernel carries the kernel's Rust support in the module.
    pub fn carried(&self) -> bool {
        self.rust
            .as_ref()
            .is_some_and(|r| matches!(r.mode, rust_mode::Mode::Carried(_)))
    }
}

/// Every readable parameter of the loaded `nvidia_peermem`.
fn params(root: &Root) -> Vec<(String, String)> {
    let dir = format!("{SYS_MODULE}/{MODULE}/parameters");
    root.list(&dir)
        .into_iter()
        .filter_map(|p| {
            let value = root.read_attr(&format!("{dir}/{p}"))?;
            Some((p, value))
        })
        .collect()
}

/// The peermem file `modprobe nvidia-peermem` loads for `release`: the
/// peermem module the install rule modprobe follows loads, else the
/// modules.dep entry of the name.
fn peermem_target(root: &Root, rules: &[Rule], release: &str) -> Option<String> {
    let name = match kmod::effective_install(rules).map(|r| &r.kind) {
        Some(kmod::RuleKind::Install { loads, .. }) => {
            loads.iter().find(|m| kmod::is_peermem_name(m)).cloned()
        }
        _ => None,
    }
    .unwrap_or_else(|| MODULE.to_string());
    kmod::modprobe_target(root, release, &name)
}

/// The signature of each of this project's module files.
fn signatures(root: &Root, files: &[ModFile], release: &str) -> Vec<(String, ModSig)> {
    files
        .iter()
        .filter(|f| f.origin == Origin::Ours)
        .map(|f| {
            let path = format!("{}/{}", kmod::modules_dir(release), f.rel);
            (f.rel.clone(), signing::module_signature(root, &path))
        })
        .collect()
}

/// The ACS of each bridge that a GPU–NIC pair below the root complex crosses.
fn bridge_acs(root: &Root, topo: &Topology) -> BTreeMap<String, Acs> {
    topo.pairs
        .iter()
        .filter(|p| p.link.below_root_complex())
        .flat_map(|p| p.bridges.iter())
        .map(|bdf| {
            let acs = PciDev::load(root, &format!("{}/{bdf}", pci::BUS_DEVICES))
                .map_or(Acs::Unreadable, |d| d.acs(root));
            (bdf.clone(), acs)
        })
        .collect()
}

/// The IOMMU's units and groups, and the group type of each GPU and NIC.
fn iommu(root: &Root, topo: &Topology) -> Iommu {
    let devices = topo
        .gpus
        .iter()
        .map(|g| &g.pci)
        .chain(topo.nics.iter().filter_map(|n| n.pci.as_ref()))
        .filter_map(|d| {
            let group = root.resolve(&format!("{}/iommu_group", d.path))?;
            Some((d.bdf.clone(), root.read_attr(&format!("{group}/type"))?))
        })
        .collect();
    let groups = root.list(IOMMU_GROUPS);
    let group_types = groups
        .iter()
        .filter_map(|g| {
            Some((
                format!("group {g}"),
                root.read_attr(&format!("{IOMMU_GROUPS}/{g}/type"))?,
            ))
        })
        .collect();
    Iommu {
        units: root.list(IOMMU_UNITS),
        groups,
        devices,
        group_types,
    }
}

/// ib_core's peer-memory clients and their counters.
fn peers(root: &Root) -> Option<Vec<PeerClient>> {
    root.is_dir(MEMORY_PEERS).then(|| {
        root.list(MEMORY_PEERS)
            .into_iter()
            .map(|name| {
                let dir = format!("{MEMORY_PEERS}/{name}");
                PeerClient {
                    dir: root.is_dir(&dir),
                    counters: PEER_COUNTERS.map(|file| {
                        root.read_attr(&format!("{dir}/{file}"))
                            .and_then(|v| v.parse().ok())
                    }),
                    name,
                }
            })
            .collect()
    })
}

/// The NVIDIA driver's package in DKMS (Debian: nvidia-current), `name/version`.
fn dkms_driver(root: &Root) -> Option<String> {
    root.list(DKMS)
        .into_iter()
        .filter(|m| m.starts_with("nvidia") && m != DKMS_PACKAGE)
        .find_map(|m| {
            root.list(&format!("{DKMS}/{m}"))
                .pop()
                .map(|v| format!("{m}/{v}"))
        })
}

/// The NVIDIA driver's DKMS module, `name/version`, when DKMS has no build
/// of it for `release`: registered (its `source` under [`DKMS`]), or its
/// source unpacked in [`USR_SRC`] (a `dkms.conf` beside the driver's
/// `nvidia/nv-p2p.h` or `nvidia-peermem/nv-p2p.h`) and not registered yet,
/// as in a driver upgrade between the package's unpack and its postinst
/// (the last such source by name). The same as
/// `scripts/find-symvers.sh --driver-pending` finds it.
fn dkms_driver_pending(root: &Root, release: &str) -> Option<String> {
    let is_driver = |m: &str| m.starts_with("nvidia") && m != DKMS_PACKAGE;
    let registered = root
        .list(DKMS)
        .into_iter()
        .filter(|m| is_driver(m))
        .find_map(|m| {
            root.list(&format!("{DKMS}/{m}"))
                .into_iter()
                .find(|v| root.exists(&format!("{DKMS}/{m}/{v}/source")))
                .map(|v| format!("{m}/{v}"))
        });
    let module = registered.or_else(|| {
        root.list(USR_SRC)
            .into_iter()
            .rev()
            .filter(|d| is_driver(d) && !d.starts_with(&format!("{DKMS_PACKAGE}-")))
            .filter(|d| {
                ["nvidia", "nvidia-peermem"]
                    .iter()
                    .any(|sub| root.is_file(&format!("{USR_SRC}/{d}/{sub}/nv-p2p.h")))
            })
            .find_map(|d| {
                let conf = root.read_text(&format!("{USR_SRC}/{d}/dkms.conf"))?;
                Some(dkms_source_module(&d, &conf))
            })
    })?;
    (!root.exists(&format!("{DKMS}/{module}/{release}"))).then_some(module)
}

/// `name/version` of the DKMS source directory `dir` (`NAME-VERSION`),
/// the name as its `dkms.conf` says (`PACKAGE_NAME`).
fn dkms_source_module(dir: &str, conf: &str) -> String {
    let named = conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("PACKAGE_NAME="))
        .map(|v| v.trim().trim_matches(['"', '\'']).to_string());
    let (name, version) = match named.and_then(|n| {
        let v = dir.strip_prefix(&format!("{n}-"))?.to_string();
        (!v.is_empty()).then_some((n, v))
    }) {
        Some(nv) => nv,
        None => dir
            .rsplit_once('-')
            .map_or((dir.to_string(), String::new()), |(n, v)| {
                (n.to_string(), v.to_string())
            }),
    };
    format!("{name}/{version}")
}

/// The files DKMS's latest build of the module for `release` took its CRCs
/// from (the Makefile's [`CRCS_FROM`] line in make.log).
fn dkms_crcs(root: &Root, release: &str) -> Option<String> {
    let package = format!("{DKMS}/{DKMS_PACKAGE}");
    root.list(&package).iter().rev().find_map(|version| {
        let dir = format!("{package}/{version}/{release}");
        root.list(&dir).iter().find_map(|arch| {
            let log = root.read_text(&format!("{dir}/{arch}/log/make.log"))?;
            log.lines()
                .rev()
                .find_map(|l| l.strip_prefix(CRCS_FROM).map(|f| f.trim().to_string()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dkms_source_names() {
        let conf = "PACKAGE_NAME=\"nvidia-current\"\nPACKAGE_VERSION=\"550.163.01\"\n";
        assert_eq!(
            dkms_source_module("nvidia-current-550.163.01", conf),
            "nvidia-current/550.163.01"
        );
        // NVIDIA's repositories: PACKAGE_NAME=nvidia, unquoted or not.
        assert_eq!(
            dkms_source_module("nvidia-580.95.05", "PACKAGE_NAME=nvidia\n"),
            "nvidia/580.95.05"
        );
        // A dkms.conf that names no package: the last dash splits.
        assert_eq!(
            dkms_source_module("nvidia-open-595.44.02", "MAKE[0]=make\n"),
            "nvidia-open/595.44.02"
        );
    }
}
