// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The middle floor: the checks, in report order. Each judges the
//! [`Host`] and returns one [`Check`]; none of them fails on a missing file.
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

mod advisor;
mod build;
mod check;
mod conflicts;
mod facts;
mod kernel;
mod module;
pub mod nccl;
mod platform;
mod stack;

use crate::host::Host;
use nccl::{GdrMode, NcclPath};

pub use crate::host::paths::STATS_PATH;
pub use check::{Check, Stat, Status};
pub use facts::{Facts, KernelFacts, ModuleFacts};
pub use module::parse_stats;

/// What the checks found: one [`Check`] per line, the module's counters
/// (when readable), the facts behind them and NCCL's path of each pair.
pub struct Verdicts {
    /// The checks, in report order.
    pub checks: Vec<Check>,
    /// The module's counters, when readable.
    pub stats: Option<Vec<Stat>>,
    /// The live state the checks judged.
    pub facts: Facts,
    /// NCCL's path and GDR mode of each pair of the host's topology.
    pub nccl: Vec<(NcclPath, GdrMode)>,
}

/// Judges the host: every check, in report order.
pub fn judge(host: &Host) -> Verdicts {
    let (stats_check, stats) = module::stats(host);
    let checks: Vec<Check> = vec![
        kernel::modules(host),
        kernel::rust(host),
        kernel::toolchain(host),
        kernel::headers(host),
        kernel::signing(host),
        module::loaded(host),
        module::params(host),
        stats_check,
        build::module_build(host),
        conflicts::nv_peer_mem(host),
        conflicts::bundled(host),
        conflicts::modprobe(host),
        stack::nvidia_driver(host),
        stack::nvidia_p2p(host),
        stack::peer_symbols(host),
        stack::rdma_devices(host),
        platform::gpu_devices(host),
        platform::bar1(host),
        platform::topology(host),
        platform::acs(host),
        platform::iommu(host),
        platform::gdr_detection(host),
        advisor::driver_settings(host),
        advisor::dmabuf_kernel(host),
        advisor::dmabuf_gpu(host),
        advisor::nccl_paths(host),
        advisor::cluster_view(host),
        advisor::gdr_path(host),
    ];
    Verdicts {
        checks,
        stats,
        facts: facts::gather(host),
        nccl: advisor::nccl_pairs(host),
    }
}
