// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The two stacks the module sits between: the NVIDIA driver (its
//! `nvidia_p2p_*` exports) and the RDMA core (the peer-memory API, devices).

use super::check::Check;
use crate::host::kmod::{NV_P2P_PREFIX, PEER_REGISTER, PEER_UNREGISTER};
use crate::host::Host;
use crate::text::{colon_list, list};

/// P2P functions the module cannot work without.
const P2P_REQUIRED: [&str; 6] = [
    "nvidia_p2p_get_pages",
    "nvidia_p2p_put_pages",
    "nvidia_p2p_dma_map_pages",
    "nvidia_p2p_dma_unmap_pages",
    "nvidia_p2p_free_page_table",
    "nvidia_p2p_free_dma_mapping",
];

/// The persistent API (the default `persistent_api_support=1` client needs it).
const P2P_PERSISTENT: [&str; 2] = [
    "nvidia_p2p_get_pages_persistent",
    "nvidia_p2p_put_pages_persistent",
];

/// Fix when `/proc/kallsyms` cannot be read.
const KALLSYMS_FIX: &str = "run as root (/proc/kallsyms is readable)";

/// `nvidia.driver`: is `nvidia.ko` loaded, which version and flavour.
pub(crate) fn nvidia_driver(host: &Host) -> Check {
    const ID: &str = "nvidia.driver";
    let Some(nv) = &host.nvidia else {
        return Check::fail(
            ID,
            "the NVIDIA driver (nvidia.ko) is not loaded",
            "install the NVIDIA driver and `modprobe nvidia`; nvidia_peermem needs its nvidia_p2p_* exports",
        );
    };
    let version = match nv.version.as_deref() {
        Some(v) => format!(" {v}"),
        None => String::new(),
    };
    let banner = &host.driver_banner;
    let flavour = match banner {
        Some(b) if b.contains("Open Kernel Module") => " (open kernel modules)",
        Some(_) => " (proprietary kernel module)",
        None => "",
    };
    let detail = banner
        .as_ref()
        .map(|b| vec![b.lines().next().unwrap_or("").to_string()])
        .unwrap_or_default();
    let mut detail = detail;
    if nv.version.is_none() {
        detail.push("/sys/module/nvidia/version: absent (the driver's MODULE_VERSION)".to_string());
    }
    Check::ok(ID, format!("NVIDIA driver{version} is loaded{flavour}")).detail(detail)
}

/// `nvidia.p2p`: does the driver export the P2P API?
pub(crate) fn nvidia_p2p(host: &Host) -> Check {
    const ID: &str = "nvidia.p2p";
    if !host.kallsyms.readable {
        return Check::info(
            ID,
            "/proc/kallsyms unreadable: nvidia_p2p_* exports not checked",
        )
        .fix(KALLSYMS_FIX);
    }
    let found: Vec<String> = host
        .kallsyms
        .with_prefix(NV_P2P_PREFIX)
        .map(|(n, m)| format!("{n} [{}]", m.unwrap_or("vmlinux")))
        .collect();
    let missing = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .filter(|n| host.kallsyms.owner(n).is_none())
            .map(|n| n.to_string())
            .collect()
    };
    let (required, persistent) = (missing(&P2P_REQUIRED), missing(&P2P_PERSISTENT));
    if found.is_empty() {
        let why = if host.nvidia.is_none() {
            " (the driver is not loaded)"
        } else {
            ""
        };
        return Check::fail(
            ID,
            format!("no nvidia_p2p_* function in /proc/kallsyms{why}"),
            "load an NVIDIA driver with GPUDirect RDMA support (`modprobe nvidia`)",
        );
    }
    if !required.is_empty() {
        return Check::fail(
            ID,
            format!("the driver lacks {}", list(&required)),
            "use an NVIDIA driver that exports the full nvidia_p2p_* API (R470 or newer)",
        )
        .detail(found);
    }
    if !persistent.is_empty() {
        // The module imports them whatever its parameters: it cannot load.
        return Check::fail(
            ID,
            format!(
                "no persistent P2P API ({}), which nvidia_peermem needs to load",
                list(&persistent)
            ),
            "upgrade the NVIDIA driver to R535 or newer",
        )
        .detail(found);
    }
    let owners: Vec<String> = {
        let mut o: Vec<String> = host
            .kallsyms
            .with_prefix(NV_P2P_PREFIX)
            .map(|(_, m)| m.unwrap_or("vmlinux").to_string())
            .collect();
        o.sort();
        o.dedup();
        o
    };
    Check::ok(
        ID,
        format!(
            "{} nvidia_p2p_* functions exported by [{}]",
            found.len(),
            owners.join(", ")
        ),
    )
    .detail(found)
}

/// `rdma.peer_symbols`: the peer-memory API and which RDMA core provides it.
pub(crate) fn peer_symbols(host: &Host) -> Check {
    const ID: &str = "rdma.peer_symbols";
    if !host.kallsyms.readable {
        return Check::info(ID, "/proc/kallsyms unreadable: peer-memory API not checked")
            .fix(KALLSYMS_FIX);
    }
    let mut detail = Vec::new();
    if let Some(m) = host.loaded("mlx_compat") {
        detail.push(format!(
            "MLNX_OFED/DOCA-OFED is loaded (mlx_compat {})",
            m.version.clone().unwrap_or_default()
        ));
    }
    if let Some(v) = host.loaded("mlx5_core").and_then(|m| m.version.as_ref()) {
        detail.push(format!("mlx5_core {v}"));
    }
    match host.kallsyms.owner(PEER_REGISTER) {
        Some(owner) => {
            let flavour = match owner {
                Some("ib_core") => " (MLNX_OFED/DOCA-OFED 24.04 or older)",
                Some("ib_uverbs") => " (DOCA-OFED 24.07 or newer)",
                _ => "",
            };
            if host.kallsyms.owner(PEER_UNREGISTER).is_none() {
                detail.push(format!("{PEER_UNREGISTER} is missing"));
            }
            Check::ok(
                ID,
                format!("{PEER_REGISTER} is exported by {}{flavour}", owner.unwrap_or("the kernel image")),
            )
            .detail(detail)
        }
        None if host.loaded("ib_core").is_some_and(|m| m.initstate.is_none()) => Check::fail(
            ID,
            format!("{PEER_REGISTER} is absent: the RDMA core is the kernel's own, built in, without PeerDirect"),
            "MLNX_OFED/DOCA-OFED cannot replace an RDMA core built into the kernel (CONFIG_INFINIBAND=y): \
             install them on a kernel that has it as a module; or do without peer memory: register GPU memory \
             with ibv_reg_dmabuf_mr (dma-buf, needs the open GPU kernel modules)",
        )
        .detail(detail),
        None if host.loaded("ib_core").is_some() => Check::fail(
            ID,
            format!("{PEER_REGISTER} is absent: the loaded RDMA stack is the inbox one, without PeerDirect"),
            "install MLNX_OFED/DOCA-OFED (its ib_core/ib_uverbs provide the peer-memory API) and rebuild \
             nvidia_peermem against it; or do without peer memory: register GPU memory with \
             ibv_reg_dmabuf_mr (dma-buf, needs the open GPU kernel modules)",
        )
        .detail(detail),
        None => Check::fail(
            ID,
            format!("{PEER_REGISTER} is absent: the RDMA core (ib_core) is not loaded"),
            "load the RDMA stack (`modprobe ib_uverbs`, or `/etc/init.d/openibd start` with MLNX_OFED)",
        )
        .detail(detail),
    }
}

/// Mellanox/NVIDIA networking's PCI vendor ID (ConnectX, BlueField).
const VENDOR_MELLANOX: u16 = 0x15b3;

/// Whether a ConnectX or an InfiniBand-class adapter is on the PCI bus.
fn rdma_adapter_on_bus(host: &Host) -> bool {
    host.pci
        .iter()
        .any(|d| d.vendor == VENDOR_MELLANOX || d.class >> 8 == 0x0207)
}

/// `rdma.devices`: RDMA devices and their PCI functions.
pub(crate) fn rdma_devices(host: &Host) -> Check {
    const ID: &str = "rdma.devices";
    let nics = &host.topo.nics;
    let detail: Vec<String> = nics
        .iter()
        .map(|n| {
            let pci = n
                .pci
                .as_ref()
                .map_or("no PCI function".to_string(), |p| p.bdf.clone());
            let ports: Vec<String> = n
                .ports
                .iter()
                .map(|(p, s)| {
                    format!(
                        "port {p}: {}",
                        s.split_once(": ").map_or(s.as_str(), |(_, name)| name)
                    )
                })
                .collect();
            format!("{}: {pci}; {}", n.name, ports.join(", "))
        })
        .collect();
    let hw: Vec<String> = (0..nics.len())
        .filter(|&i| nics[i].pci.is_some())
        .map(|i| host.topo.nic_label(i))
        .collect();
    if nics.is_empty() && !rdma_adapter_on_bus(host) {
        return Check::warn(
            ID,
            "no RDMA device in /sys/class/infiniband, and no ConnectX or InfiniBand adapter on the PCI bus",
            "GPUDirect RDMA needs an RDMA adapter: install one (a ConnectX, or another with an RDMA driver) \
             and load its RDMA driver",
        );
    }
    if nics.is_empty() {
        return Check::warn(
            ID,
            "no RDMA device in /sys/class/infiniband",
            "load the adapter's RDMA driver (`modprobe mlx5_ib`) and check the adapter is on the bus",
        );
    }
    if hw.is_empty() {
        let soft: Vec<String> = nics.iter().map(|n| n.name.clone()).collect();
        return Check::warn(
            ID,
            format!(
                "only software RDMA devices ({}): no GPUDirect RDMA",
                list(&soft)
            ),
            "load the RDMA driver of a hardware adapter (`modprobe mlx5_ib`)",
        )
        .detail(detail);
    }
    Check::ok(
        ID,
        format!("{} RDMA device(s){}", hw.len(), colon_list(&hw)),
    )
    .detail(detail)
}
