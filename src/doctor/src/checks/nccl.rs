// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The GPU–NIC path as NCCL computes it, and whether NCCL then uses
//! GPUDirect RDMA at its default `NCCL_NET_GDR_LEVEL`; and the NVIDIA
//! driver's PCIe topology rule for GPUDirect RDMA on some arm64 chipsets.
//!
//! Modelled on NCCL's published source (NVIDIA/nccl, 2026):
//! `src/graph/xml.cc` `ncclTopoGetXmlFromSys` builds the tree from sysfs
//! paths, climbing two path components at a time (a switch's downstream
//! and upstream port become one PCI node) and stopping at a CPU, one per
//! NUMA node, when the component above is not a PCI address;
//! `src/graph/paths.cc` `ncclTopoSetPaths` types a path by its worst link
//! (a PCI–PCI hop is PXB, a hop through a CPU is PHB, CPU to CPU is SYS),
//! turns a C2C GPU's PHB path to a NIC of its own CPU into P2C, and
//! `ncclTopoCheckGdr` uses GPUDirect RDMA when the type is at most
//! `NCCL_NET_GDR_LEVEL`, by default P2C (`NCCL_NET_GDR_C2C=1`; PXB with
//! `NCCL_NET_GDR_C2C=0`), forcing PCIe mappings (dma-buf only) when a C2C
//! GPU reaches its NIC another way. Not modelled: NVLink and PXN (paths
//! through another GPU), NCCL_TOPO_FILE, Broadcom Gen4 switch flattening.

use std::fmt;

use crate::host::pci::{is_bdf, PciDev};

/// A path type of NCCL (`src/include/graph.h`), nearest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NcclPath {
    /// At most one PCIe switch.
    Pix,
    /// Several PCIe switches, no host bridge.
    Pxb,
    /// A C2C GPU to a NIC of its own CPU: C2C, then PCIe.
    P2c,
    /// Through a CPU (host bridge), on one NUMA node.
    Phb,
    /// Across NUMA nodes.
    Sys,
}

impl NcclPath {
    /// NCCL's name.
    pub fn as_str(self) -> &'static str {
        match self {
            NcclPath::Pix => "PIX",
            NcclPath::Pxb => "PXB",
            NcclPath::P2c => "P2C",
            NcclPath::Phb => "PHB",
            NcclPath::Sys => "SYS",
        }
    }
}

impl fmt::Display for NcclPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `NCCL_NET_GDR_LEVEL`'s default (paths.cc `ncclTopoCheckGdr`).
pub const DEFAULT_GDR_LEVEL: NcclPath = NcclPath::P2c;

/// Whether a GPU is self-hosted, reaching its CPU over C2C (Grace Hopper,
/// Grace Blackwell): the device ID ranges of the open driver's
/// `kernel-open/nvidia/detect-self-hosted.h`.
pub fn is_c2c_gpu(device: u16) -> bool {
    (0x2340..=0x237f).contains(&device)
        || (0x2940..=0x297f).contains(&device)
        || (0x31c0..=0x31ff).contains(&device)
        || device == 0x31a1
}

/// The PCI nodes NCCL puts above a function, nearest first, and its CPU
/// (the NUMA node; `None` is NCCL's "-1").
pub fn ancestors(dev: &PciDev) -> (Vec<String>, Option<u32>) {
    let comps: Vec<&str> = dev.path.split('/').filter(|c| !c.is_empty()).collect();
    let Some(mut at) = comps.iter().rposition(|c| *c == dev.bdf) else {
        return (Vec::new(), dev.numa_node);
    };
    let mut nodes = Vec::new();
    // Climb two components while both are PCI functions.
    while at >= 2 && is_bdf(comps[at - 1]) && is_bdf(comps[at - 2]) {
        at -= 2;
        nodes.push(comps[at].to_string());
    }
    (nodes, dev.numa_node)
}

/// The path type NCCL gives a GPU and a NIC.
pub fn path(gpu: &PciDev, nic: &PciDev) -> NcclPath {
    let (ga, gnuma) = ancestors(gpu);
    let (na, nnuma) = ancestors(nic);
    // Same host bridge is required for a shared PCI node: bus numbers repeat across domains.
    if gpu.host_bridge() == nic.host_bridge() {
        if let Some((gi, ni)) = ga
            .iter()
            .enumerate()
            .find_map(|(gi, g)| na.iter().position(|n| n == g).map(|ni| (gi, ni)))
        {
            // Hops below the shared node: a second one is a PCI–PCI link.
            return if gi.max(ni) >= 1 {
                NcclPath::Pxb
            } else {
                NcclPath::Pix
            };
        }
    }
    let base = if gnuma == nnuma {
        NcclPath::Phb
    } else {
        NcclPath::Sys
    };
    if base == NcclPath::Phb && is_c2c_gpu(gpu.device) {
        NcclPath::P2c
    } else {
        base
    }
}

/// How NCCL's GPUDirect RDMA comes out for one pair at the default level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GdrMode {
    /// Not used: the path is beyond `NCCL_NET_GDR_LEVEL`.
    Disabled,
    /// Used, with the default mapping.
    Default,
    /// Used, but NCCL asks for a PCIe mapping (C2C GPU, NIC not on its C2C path): dma-buf only.
    Pci,
}

/// `ncclTopoCheckGdr`'s answer for a path, at the default level.
pub fn gdr_mode(gpu: &PciDev, path: NcclPath) -> GdrMode {
    if path > DEFAULT_GDR_LEVEL {
        GdrMode::Disabled
    } else if is_c2c_gpu(gpu.device) && path != NcclPath::P2c {
        GdrMode::Pci
    } else {
        GdrMode::Default
    }
}

/// A chipset on which the NVIDIA driver (580 and newer) allows GPUDirect
/// RDMA only between a GPU and a NIC that share a PCIe bridge
/// (`src/nvidia/arch/nvalloc/unix/src/osinit.c` `_checkP2pChipsetSupport`,
/// IDs from `src/nvidia/arch/nvalloc/common/inc/nvcst.h`).
pub fn p2p_unsupported_chipset(dev: &PciDev) -> Option<&'static str> {
    match (dev.vendor, dev.device) {
        (0x10de, 0x22b1..=0x22b4 | 0x22b8 | 0x22b9) => Some("NVIDIA Grace (TH500)"),
        (0x1def, 0xe000 | 0xe00d | 0xe00e | 0xe010 | 0xe100 | 0xe110) => Some("Ampere Altra"),
        (0x1def, 0xe200..=0xe207) => Some("AmpereOne"),
        _ => None,
    }
}

/// Whether a GPU and a NIC have an upstream bridge in common, as
/// `kernel-open/nvidia/nv-pci.c` `nv_pci_has_common_pci_switch` asks.
pub fn share_a_bridge(gpu: &PciDev, nic: &PciDev) -> bool {
    gpu.host_bridge() == nic.host_bridge()
        && gpu.upstream().iter().any(|b| nic.upstream().contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(path: &str, numa: Option<u32>, device: u16) -> PciDev {
        PciDev {
            bdf: crate::host::root::basename(path).to_string(),
            path: path.to_string(),
            vendor: 0x10de,
            device,
            class: 0x030200,
            numa_node: numa,
        }
    }

    const SW: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";

    #[test]
    fn one_switch_is_pix() {
        let gpu = dev(&format!("{SW}/0000:02:08.0/0000:03:00.0"), Some(0), 0x2330);
        let nic = dev(&format!("{SW}/0000:02:10.0/0000:04:00.0"), Some(0), 0x101b);
        assert_eq!(ancestors(&gpu).0, ["0000:01:00.0"]);
        assert_eq!(path(&gpu, &nic), NcclPath::Pix);
        assert_eq!(gdr_mode(&gpu, NcclPath::Pix), GdrMode::Default);
        assert!(share_a_bridge(&gpu, &nic));
    }

    #[test]
    fn cascaded_switches_are_pxb() {
        let gpu = dev(
            &format!("{SW}/0000:02:08.0/0000:03:00.0/0000:04:00.0/0000:05:00.0"),
            None,
            0x2330,
        );
        let nic = dev(&format!("{SW}/0000:02:10.0/0000:06:00.0"), None, 0x101b);
        assert_eq!(ancestors(&gpu).0, ["0000:03:00.0", "0000:01:00.0"]);
        assert_eq!(path(&gpu, &nic), NcclPath::Pxb);
        assert_eq!(path(&nic, &gpu), NcclPath::Pxb);
    }

    /// nvidia-smi says NODE for two host bridges of one NUMA node; NCCL has
    /// one CPU node per NUMA node, so it says PHB, and disables GDR there.
    #[test]
    fn root_ports_and_numa_nodes() {
        let a = dev(
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            Some(0),
            0x2330,
        );
        let b = dev(
            "/sys/devices/pci0000:20/0000:20:01.0/0000:21:00.0",
            Some(0),
            0x101b,
        );
        let c = dev(
            "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0",
            Some(1),
            0x101b,
        );
        assert_eq!(path(&a, &b), NcclPath::Phb);
        assert_eq!(path(&a, &c), NcclPath::Sys);
        assert_eq!(gdr_mode(&a, NcclPath::Phb), GdrMode::Disabled);
        assert!(!share_a_bridge(&a, &b));
        // A virtual machine: everything on the root bus.
        let g = dev("/sys/devices/pci0000:00/0000:00:06.0", None, 0x2330);
        let n = dev("/sys/devices/pci0000:00/0000:00:07.0", None, 0x101b);
        assert!(ancestors(&g).0.is_empty());
        assert_eq!(path(&g, &n), NcclPath::Phb);
    }

    /// Grace Hopper: PHB becomes P2C and GDR is on; a NIC under the GPU's
    /// own switch is PIX but needs a PCIe mapping.
    #[test]
    fn c2c_gpu() {
        assert!(is_c2c_gpu(0x2342) && is_c2c_gpu(0x2941) && is_c2c_gpu(0x31a1));
        assert!(!is_c2c_gpu(0x2330));
        let gh = dev(
            "/sys/devices/pci0009:00/0009:00:00.0/0009:01:00.0",
            Some(0),
            0x2342,
        );
        let nic = dev(
            "/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0",
            Some(0),
            0x1021,
        );
        assert_eq!(path(&gh, &nic), NcclPath::P2c);
        assert_eq!(gdr_mode(&gh, NcclPath::P2c), GdrMode::Default);
        assert_eq!(gdr_mode(&gh, NcclPath::Pix), GdrMode::Pci);
        let far = dev(
            "/sys/devices/pci0010:00/0010:00:00.0/0010:01:00.0",
            Some(1),
            0x1021,
        );
        assert_eq!(path(&gh, &far), NcclPath::Sys);
    }

    #[test]
    fn chipsets() {
        let mut rp = dev("/sys/devices/pci0000:00/0000:00:00.0", None, 0x22b2);
        assert_eq!(p2p_unsupported_chipset(&rp), Some("NVIDIA Grace (TH500)"));
        rp.vendor = 0x1def;
        rp.device = 0xe100;
        assert_eq!(p2p_unsupported_chipset(&rp), Some("Ampere Altra"));
        rp.device = 0xe208;
        assert_eq!(p2p_unsupported_chipset(&rp), None);
    }
}
