// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The bottom floor: what the doctor knows of the host, read once into a
//! [`Host`] that the checks judge.

pub mod bars;
pub mod carried;
pub mod cuda;
pub mod elf;
pub mod inflate;
pub mod kconfig;
pub mod klog;
pub mod kmod;
pub mod pci;
pub mod root;
pub mod rust_mode;
pub mod signing;
pub mod toolchain;
pub mod topology;

use cuda::CudaAnswer;
use kconfig::{ConfigRead, KConfig};
use kmod::{Kallsyms, Loaded, ModFile};
use root::Root;
use signing::Enforcement;
use topology::Topology;

/// The module this doctor is about, as `/sys/module` names it.
pub const MODULE: &str = "nvidia_peermem";

/// Files NCCL and UCX test to decide whether GPUDirect RDMA is available.
pub const GDR_PATHS: [&str; 4] = [
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
    "/sys/module/nv_peer_mem/version",
];

/// Which of [`GDR_PATHS`] each consumer accepts (indexes).
pub const NCCL_PATHS: [usize; 3] = [0, 1, 2];
/// See [`NCCL_PATHS`].
pub const UCX_PATHS: [usize; 3] = [0, 2, 3];

/// Facts several checks share, read once.
pub struct Host<'a> {
    /// Where files are read.
    pub root: &'a Root,
    /// `uname -r`, if known.
    pub release: Option<String>,
    /// Peer-memory and P2P symbols.
    pub kallsyms: Kallsyms,
    /// `nvidia_peermem`, if loaded.
    pub ours: Option<Loaded>,
    /// `nvidia`, if loaded.
    pub nvidia: Option<Loaded>,
    /// Installed peermem module files.
    pub files: Vec<ModFile>,
    /// GPUs, NICs and pairs.
    pub topo: Topology,
    /// The kernel configuration, if readable.
    pub config: ConfigRead,
    /// Whether and why the kernel enforces module signatures.
    pub enforcement: Enforcement,
    /// Where `rustc` and `bindgen` are looked for.
    pub path: Vec<String>,
    /// How a build gets the kernel's Rust support; `None` without a configuration.
    pub(crate) rust: Option<rust_mode::RustMode>,
    /// Which of [`GDR_PATHS`] exist.
    pub gdr: [bool; 4],
    /// What libcuda said about the GPUs.
    pub cuda: CudaAnswer,
}

impl<'a> Host<'a> {
    /// Reads the host below `root`, with libcuda's answer given and
    /// `rustc` and `bindgen` looked for on this process's `PATH`.
    pub fn read(root: &'a Root, cuda: CudaAnswer) -> Host<'a> {
        let release = kmod::kernel_release(root);
        let files = release
            .as_deref()
            .map(|r| kmod::peermem_files(root, r))
            .unwrap_or_default();
        let config = kconfig::read(root, release.as_deref());
        let cmdline = root.read_attr("/proc/cmdline").unwrap_or_default();
        let path = toolchain::search_path(std::env::var("PATH").ok().as_deref());
        let rust = rust_mode::read(root, release.as_deref(), config.config.as_ref(), &path);
        Host {
            root,
            kallsyms: Kallsyms::read(root),
            ours: kmod::loaded(root, MODULE),
            nvidia: kmod::loaded(root, "nvidia"),
            files,
            release,
            topo: Topology::scan(root),
            enforcement: signing::enforcement(root, config.config.as_ref(), &cmdline),
            config,
            path,
            rust,
            gdr: GDR_PATHS.map(|p| root.exists(p)),
            cuda,
        }
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
