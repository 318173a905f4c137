// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The host's files that more than one reader or check names, each named
//! once. Paths under one reader's care stay with it (`kmod`, `signing`,
//! `pci`, ...).

/// The kernel's command line.
pub const CMDLINE: &str = "/proc/cmdline";

/// The switch that turns module loading off until the next boot (`1`).
pub const MODULES_DISABLED: &str = "/proc/sys/kernel/modules_disabled";

/// The loaded modules as `lsmod` lists them.
pub const PROC_MODULES: &str = "/proc/modules";

/// Loaded modules, one directory each.
pub const SYS_MODULE: &str = "/sys/module";

/// The NVIDIA driver's banner (`Open Kernel Module` for the open modules).
pub const DRIVER_VERSION: &str = "/proc/driver/nvidia/version";

/// The NVIDIA driver's registry parameters as it prints them, `key: value` per line.
pub const DRIVER_PARAMS: &str = "/proc/driver/nvidia/params";

/// Where debugfs is mounted.
pub const DEBUGFS: &str = "/sys/kernel/debug";

/// The module's statistics in debugfs: one `name value` pair per line.
pub const STATS_PATH: &str = "/sys/kernel/debug/nvidia_peermem/stats";

/// Where ib_core lists its peer-memory clients (MOFED ≤ 23.10, or later
/// where `mm_kobj` is exported).
pub const MEMORY_PEERS: &str = "/sys/kernel/mm/memory_peers";

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

/// IOMMU units.
pub const IOMMU_UNITS: &str = "/sys/class/iommu";

/// IOMMU groups, each with the `type` of its domain.
pub const IOMMU_GROUPS: &str = "/sys/kernel/iommu_groups";

/// The boot-time switch of `nv_peer_mem`'s init script (`ONBOOT=yes`).
pub const NV_PEER_MEM_CONF: &str = "/etc/infiniband/nv_peer_mem.conf";

/// Where an admin names an exporter built outside any package (one line
/// each: `driver PATH`, `rdma PATH`; `{kernel}` is the release), as the
/// build reads it (scripts/find-symvers.sh).
pub const EXPORTERS_CONF: &str = "/etc/nvidia-peer-memory/exporters.conf";

/// The GPU Operator's driver container mounts the driver's root here, and
/// the network operator MOFED's (NVIDIA/gpu-operator, gpu-driver-container).
pub const OPERATOR_DRIVER_ROOT: &str = "/run/nvidia/driver";
/// See [`OPERATOR_DRIVER_ROOT`].
pub const OPERATOR_MOFED_ROOT: &str = "/run/mellanox/drivers";

/// DKMS's tree: `<module>/<version>/<release>/<arch>/log/make.log`.
pub const DKMS: &str = "/var/lib/dkms";

/// Where packages unpack DKMS sources (`NAME-VERSION/dkms.conf`).
pub const USR_SRC: &str = "/usr/src";

/// This project's package name in DKMS.
pub const DKMS_PACKAGE: &str = "nvidia-peer-memory";
