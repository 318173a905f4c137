// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The checks, in report order. Each reads what it needs through [`Ctx`]
//! and returns one [`Check`]; none of them fails on a missing file.
//!
//! | id                    | looks at                                             |
//! |-----------------------|------------------------------------------------------|
//! | `kernel.modules`      | `CONFIG_MODULES`, `/proc/sys/kernel/modules_disabled`|
//! | `kernel.rust`         | kernel or carried mode (`rust_mode`), modversions    |
//! | `kernel.toolchain`    | `rustc`/`bindgen` on PATH against what the mode needs|
//! | `kernel.headers`      | `/lib/modules/R/build`, its crates or configuration  |
//! | `kernel.signing`      | enforced signatures, the installed module's signature|
//! | `module.loaded`       | `/sys/module/nvidia_peermem`, installed `.ko` files  |
//! | `module.params`       | its two parameters                                   |
//! | `module.stats`        | `/sys/kernel/debug/nvidia_peermem/stats`             |
//! | `module.build`        | stale builds: srcversion, CRCs, driver on disk       |
//! | `conflict.nv_peer_mem`| Mellanox's `nv_peer_mem`, loaded or installed        |
//! | `conflict.bundled`    | NVIDIA's own peermem `.ko` under `/lib/modules`      |
//! | `conflict.modprobe`   | modprobe.d rules for `nvidia-peermem`                |
//! | `nvidia.driver`       | `/sys/module/nvidia`                                 |
//! | `nvidia.p2p`          | `nvidia_p2p_*` in `/proc/kallsyms`                   |
//! | `rdma.peer_symbols`   | `ib_register_peer_memory_client` and its owner       |
//! | `rdma.devices`        | `/sys/class/infiniband`                              |
//! | `gpu.devices`         | NVIDIA GPUs on the PCI bus                           |
//! | `gpu.bar1`            | BAR1 size of each GPU                                |
//! | `pci.topology`        | nearest NIC of each GPU (PIX/PXB/PHB/NODE/SYS)       |
//! | `pci.acs`             | ACS on the bridges between GPUs and NICs             |
//! | `iommu.mode`          | passthrough or translated                            |
//! | `gdr.detection`       | the files NCCL and UCX test for peer memory          |
//! | `nvidia.settings`     | `/proc/driver/nvidia/params`, chipset topology rule  |
//! | `dmabuf.kernel`       | kernel, RDMA core and driver flavour for dma-buf     |
//! | `dmabuf.gpu`          | the GPUs' own answer through libcuda                 |
//! | `nccl.paths`          | NCCL's path per GPU–NIC pair, GDR at its default     |
//! | `cluster.view`        | what the GPU Operator, NCCL and UCX test             |
//! | `gdr.path`            | dma-buf or peer memory, and whether this is needed   |

pub(crate) mod advisor;
mod build;
mod conflicts;
mod facts;
mod kernel;
mod module;
mod platform;
mod rust_mode;
mod stack;

use crate::cuda::CudaAnswer;
use crate::kconfig::{self, ConfigRead, KConfig};
use crate::kmod::{self, Kallsyms, Loaded, ModFile};
use crate::report::{Check, Report};
use crate::root::Root;
use crate::signing::{self, Enforcement};
use crate::toolchain;
use crate::topology::Topology;

pub use module::{parse_stats, STATS_PATH};

/// The module this doctor is about, as `/sys/module` names it.
pub const MODULE: &str = "nvidia_peermem";

/// Facts several checks share, read once.
pub(crate) struct Ctx<'a> {
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
    pub rust: Option<rust_mode::RustMode>,
    /// What libcuda said about the GPUs.
    pub cuda: CudaAnswer,
}

impl Ctx<'_> {
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

/// Runs every check against the files below `root`: on `/`, libcuda is
/// asked (when present); below another root, its `cuda-probe.txt` record is read.
pub fn run(root: &Root) -> Report {
    let cuda = if root.base() == std::path::Path::new("/") {
        crate::cuda::probe(false)
    } else {
        cuda_record(root).unwrap_or(CudaAnswer::NotAsked)
    };
    run_with(root, cuda)
}

/// The `cuda-probe.txt` record of a captured tree; `NotAsked` without one.
pub fn cuda_record(root: &Root) -> Result<CudaAnswer, String> {
    match std::fs::read_to_string(
        root.base()
            .join(crate::cuda::RECORD_FILE.trim_start_matches('/')),
    ) {
        Ok(text) => {
            CudaAnswer::parse(&text).map_err(|e| format!("{}: {e}", crate::cuda::RECORD_FILE))
        }
        Err(_) => Ok(CudaAnswer::NotAsked),
    }
}

/// Runs every check with libcuda's answer given.
pub fn run_with(root: &Root, cuda: CudaAnswer) -> Report {
    let release = kmod::kernel_release(root);
    let files = release
        .as_deref()
        .map(|r| kmod::peermem_files(root, r))
        .unwrap_or_default();
    let config = kconfig::read(root, release.as_deref());
    let cmdline = root.read_attr("/proc/cmdline").unwrap_or_default();
    let path = toolchain::search_path(std::env::var("PATH").ok().as_deref());
    let rust = rust_mode::read(root, release.as_deref(), config.config.as_ref(), &path);
    let ctx = Ctx {
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
        cuda,
    };
    let (stats_check, stats) = module::stats(&ctx);
    let checks: Vec<Check> = vec![
        kernel::modules(&ctx),
        kernel::rust(&ctx),
        kernel::toolchain(&ctx),
        kernel::headers(&ctx),
        kernel::signing(&ctx),
        module::loaded(&ctx),
        module::params(&ctx),
        stats_check,
        build::module_build(&ctx),
        conflicts::nv_peer_mem(&ctx),
        conflicts::bundled(&ctx),
        conflicts::modprobe(&ctx),
        stack::nvidia_driver(&ctx),
        stack::nvidia_p2p(&ctx),
        stack::peer_symbols(&ctx),
        stack::rdma_devices(&ctx),
        platform::gpu_devices(&ctx),
        platform::bar1(&ctx),
        platform::topology(&ctx),
        platform::acs(&ctx),
        platform::iommu(&ctx),
        platform::gdr_detection(&ctx),
        advisor::driver_settings(&ctx),
        advisor::dmabuf_kernel(&ctx),
        advisor::dmabuf_gpu(&ctx),
        advisor::nccl_paths(&ctx),
        advisor::cluster_view(&ctx),
        advisor::gdr_path(&ctx),
    ];
    let nccl = advisor::nccl_pairs(&ctx);
    Report {
        root: root.base().display().to_string(),
        checks,
        facts: facts::gather(&ctx),
        topology: ctx.topo,
        stats,
        nccl,
        cuda: ctx.cuda,
    }
}

/// A byte count for people: `256 MiB`, `64 GiB`, `1.5 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return if n % size == 0 {
                format!("{} {unit}", n / size)
            } else {
                // CAST: display only; precision loss above 2^53 does not matter.
                format!("{:.1} {unit}", n as f64 / size as f64)
            };
        }
    }
    format!("{n} B")
}

/// `a, b and c`.
pub fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Lists up to four names, or counts them (`8 GPUs`).
pub fn few(items: &[String], noun: &str) -> String {
    if items.len() <= 4 {
        list(items)
    } else {
        format!("{} {noun}", items.len())
    }
}

/// `: a, b and c` for up to four names, nothing for more (the detail has them).
pub fn colon_list(items: &[String]) -> String {
    if items.is_empty() || items.len() > 4 {
        String::new()
    } else {
        format!(": {}", list(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(bytes(256 << 20), "256 MiB");
        assert_eq!(bytes(64 << 30), "64 GiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(100), "100 B");
    }

    #[test]
    fn lists() {
        assert_eq!(list(&[]), "");
        assert_eq!(list(&["a".into()]), "a");
        assert_eq!(list(&["a".into(), "b".into(), "c".into()]), "a, b and c");
    }
}
