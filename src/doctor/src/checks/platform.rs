// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The platform under the stacks: GPUs and their BAR1, the PCIe path to
//! the NICs, ACS, the IOMMU, and what NCCL and UCX will conclude.

use std::collections::BTreeSet;

use super::advisor;
use super::check::Check;
use crate::host::bars::Bar1;
use crate::host::paths::{GDR_PATHS, MEMORY_PEERS, NCCL_PATHS, UCX_PATHS};
use crate::host::pci::Acs;
use crate::host::topology::{Gpu, Link};
use crate::host::{Host, Iommu, MODULE};
use crate::text::{bytes, colon_list, few, list};

/// BAR1 below this makes large registrations fail.
pub const MIN_BAR1: u64 = 1 << 30;

/// `gpu.devices`: NVIDIA GPUs on the PCI bus.
pub(crate) fn gpu_devices(host: &Host) -> Check {
    const ID: &str = "gpu.devices";
    let gpus: Vec<String> = host.topo.gpus.iter().map(|g| g.pci.bdf.clone()).collect();
    if gpus.is_empty() {
        return Check::warn(
            ID,
            "no NVIDIA GPU on the PCI bus",
            "check that the GPU is seated and enumerated (`lspci -d 10de:`), and its power",
        );
    }
    let detail = host
        .topo
        .gpus
        .iter()
        .map(|g| {
            let node = g.pci.numa_node.map_or("-".to_string(), |n| n.to_string());
            format!(
                "{} device 0x{:04x} class 0x{:06x} NUMA node {node}",
                g.pci.bdf, g.pci.device, g.pci.class
            )
        })
        .collect();
    Check::ok(
        ID,
        format!("{} NVIDIA GPU(s){}", gpus.len(), colon_list(&gpus)),
    )
    .detail(detail)
}

/// `gpu.bar1`: the BAR1 aperture bounds how much GPU memory can be registered at once.
pub(crate) fn bar1(host: &Host) -> Check {
    const ID: &str = "gpu.bar1";
    let gpus = &host.topo.gpus;
    if gpus.is_empty() {
        return Check::info(ID, "no GPU to check");
    }
    let detail: Vec<String> = gpus
        .iter()
        .map(|g| format!("{}: BAR1 {}", g.pci.bdf, g.bar1))
        .collect();
    let unassigned = gpus_with(gpus, |b| {
        matches!(b, Bar1::Unassigned { .. }).then(String::new)
    });
    if !unassigned.is_empty() {
        return Check::warn(
            ID,
            format!("BAR1 is not assigned on {}", few(&unassigned, "GPUs")),
            "enable Above 4G Decoding in the BIOS; `dmesg | grep BAR` shows the failed assignment",
        )
        .detail(detail);
    }
    let small = gpus_with(gpus, |b| {
        b.size()
            .filter(|&s| s < MIN_BAR1)
            .map(|s| format!(" ({})", bytes(s)))
    });
    if !small.is_empty() {
        return Check::warn(
            ID,
            format!(
                "BAR1 below {} on {}: registrations beyond it fail with ENOMEM/EFAULT",
                bytes(MIN_BAR1),
                few(&small, "GPUs")
            ),
            "keep the GPU memory registered at once below the BAR1 size, or enlarge BAR1 \
             (Resizable BAR / Above 4G Decoding in the BIOS, a large-BAR board mode where the GPU offers one)",
        )
        .detail(detail);
    }
    let unknown = gpus_with(gpus, |b| matches!(b, Bar1::Unknown(_)).then(String::new));
    if !unknown.is_empty() {
        return Check::info(
            ID,
            format!("BAR1 cannot be read on {}", few(&unknown, "GPUs")),
        )
        .detail(detail);
    }
    let min = gpus.iter().filter_map(|g| g.bar1.size()).min().unwrap_or(0);
    Check::ok(ID, format!("BAR1 is at least {} on every GPU", bytes(min))).detail(detail)
}

/// The GPUs whose BAR1 `note` says something about: the address, then the note.
fn gpus_with(gpus: &[Gpu], note: impl Fn(&Bar1) -> Option<String>) -> Vec<String> {
    gpus.iter()
        .filter_map(|g| note(&g.bar1).map(|n| format!("{}{n}", g.pci.bdf)))
        .collect()
}

/// `pci.topology`: the nearest NIC of every GPU.
pub(crate) fn topology(host: &Host) -> Check {
    const ID: &str = "pci.topology";
    let topo = &host.topo;
    if topo.pairs.is_empty() {
        return Check::info(ID, "no GPU–NIC pair to classify");
    }
    let mut detail = Vec::new();
    let mut far = Vec::new();
    let mut counts: Vec<(Link, usize)> = Vec::new();
    for (g, gpu) in topo.gpus.iter().enumerate() {
        let Some(best) = topo.nearest(g) else {
            continue;
        };
        detail.push(format!(
            "{}: nearest {} at {}",
            gpu.pci.bdf,
            topo.nic_label(best.nic),
            best.link
        ));
        match counts.iter_mut().find(|(l, _)| *l == best.link) {
            Some((_, n)) => *n += 1,
            None => counts.push((best.link, 1)),
        }
        if best.link > Link::Pxb {
            far.push(format!(
                "{} ({} to {})",
                gpu.pci.bdf, best.link, topo.nics[best.nic].name
            ));
        }
    }
    counts.sort();
    let spread: Vec<String> = counts.iter().map(|(l, n)| format!("{n} at {l}")).collect();
    if !far.is_empty() {
        return Check::warn(
            ID,
            format!("no NIC within a PCIe switch of {}", few(&far, "GPUs")),
            "NCCL uses GPUDirect RDMA only up to PXB by default: put GPU and NIC under one PCIe switch, \
             or accept the slower path with NCCL_NET_GDR_LEVEL=PHB (or SYS)",
        )
        .detail(detail);
    }
    Check::ok(ID, format!("nearest NIC per GPU: {}", spread.join(", "))).detail(detail)
}

/// `pci.acs`: ACS on the bridges between GPUs and NICs that share a switch.
///
/// Paths through the root complex (PHB, NODE, SYS) go up whatever ACS says,
/// so only the bridges of PIX and PXB pairs matter.
pub(crate) fn acs(host: &Host) -> Check {
    const ID: &str = "pci.acs";
    if host.topo.pairs.is_empty() {
        return Check::info(ID, "no GPU–NIC pair: ACS not checked");
    }
    let bridges: BTreeSet<&String> = host
        .topo
        .pairs
        .iter()
        .filter(|p| p.link.below_root_complex())
        .flat_map(|p| p.bridges.iter())
        .collect();
    if bridges.is_empty() {
        return Check::info(
            ID,
            "no GPU–NIC pair shares a PCIe switch: ACS does not change their path",
        );
    }
    let mut detail = Vec::new();
    let mut enabled = Vec::new();
    let mut unreadable = Vec::new();
    for bdf in &bridges {
        let acs = host.acs.get(*bdf).copied().unwrap_or(Acs::Unreadable);
        match acs {
            Acs::Unreadable => {
                unreadable.push(bdf.to_string());
                detail.push(format!("{bdf}: extended configuration space unreadable"));
            }
            Acs::Absent => detail.push(format!("{bdf}: no ACS capability")),
            Acs::Present { offset, control } => {
                let bits = acs.p2p_bits();
                detail.push(format!(
                    "{bdf}: ACS at 0x{offset:03x}, control 0x{control:04x} {}",
                    bits.join(" ")
                ));
                if !bits.is_empty() {
                    enabled.push((bdf.to_string(), bits.join(" ")));
                }
            }
        }
    }
    if !enabled.is_empty() {
        let names: Vec<String> = enabled
            .iter()
            .map(|(b, bits)| format!("{b} ({bits})"))
            .collect();
        let setpci: Vec<String> = enabled
            .iter()
            .map(|(b, _)| format!("`setpci -s {b} ECAP_ACS+0x6.w=0000`"))
            .collect();
        let cmdline: Vec<&str> = enabled.iter().map(|(b, _)| b.as_str()).collect();
        return Check::warn(
            ID,
            format!(
                "ACS redirects GPU–NIC traffic to the root complex on {}",
                few(&names, "bridges")
            ),
            format!(
                "disable ACS redirection on these bridges: {} (until reboot), or boot with \
                 pci=disable_acs_redir={}, or turn ACS off in the BIOS; keep it on where the IOMMU \
                 must isolate devices (VMs)",
                list(&setpci),
                cmdline.join(";")
            ),
        )
        .detail(detail);
    }
    if !unreadable.is_empty() {
        return Check::info(
            ID,
            format!(
                "ACS unknown: cannot read the extended configuration space of {}",
                few(&unreadable, "bridges")
            ),
        )
        .fix("run as root (sysfs shows only 64 bytes of config to other users)")
        .detail(detail);
    }
    Check::ok(
        ID,
        format!(
            "ACS redirection is off on the {} bridge(s) between GPUs and NICs",
            bridges.len()
        ),
    )
    .detail(detail)
}

/// `iommu.mode`: passthrough, translated or off.
pub(crate) fn iommu(host: &Host) -> Check {
    const ID: &str = "iommu.mode";
    const FIX: &str = "boot with iommu=pt (it keeps intel_iommu=on/amd_iommu=on working for VFIO) or disable \
                       the IOMMU in the BIOS: under translation every P2P mapping goes through the IOMMU and \
                       ACS sends the traffic through the root complex";
    let opts: Vec<&str> = host
        .cmdline
        .split_whitespace()
        .filter(|w| w.contains("iommu"))
        .collect();
    let Iommu { units, groups, .. } = &host.iommu;
    let mut detail = vec![
        format!(
            "kernel command line: {}",
            if opts.is_empty() {
                "no iommu option".to_string()
            } else {
                opts.join(" ")
            }
        ),
        format!(
            "IOMMU units: {}",
            if units.is_empty() {
                "none".to_string()
            } else {
                units.join(", ")
            }
        ),
    ];
    if units.is_empty() && groups.is_empty() {
        return Check::ok(ID, "IOMMU off: devices use physical addresses").detail(detail);
    }
    // Domain type of the group of each GPU and NIC (`identity` is passthrough).
    let types = if host.iommu.devices.is_empty() {
        &host.iommu.group_types
    } else {
        &host.iommu.devices
    };
    detail.extend(types.iter().map(|(d, t)| format!("{d}: {t}")));
    let pt_opt = opts
        .iter()
        .any(|o| *o == "iommu=pt" || *o == "iommu.passthrough=1");
    if types.is_empty() {
        return if pt_opt {
            Check::ok(ID, "IOMMU on, in passthrough (iommu=pt)").detail(detail)
        } else {
            Check::warn(
                ID,
                "IOMMU on and probably translating (no iommu=pt; domain types unknown)",
                FIX,
            )
            .detail(detail)
        };
    }
    let translated: Vec<String> = types
        .iter()
        .filter(|(_, t)| t.starts_with("DMA"))
        .map(|(d, _)| d.clone())
        .collect();
    if !translated.is_empty() {
        let kinds: BTreeSet<&str> = types
            .iter()
            .filter(|(_, t)| t.starts_with("DMA"))
            .map(|(_, t)| t.as_str())
            .collect();
        return Check::warn(
            ID,
            format!(
                "IOMMU translates DMA ({}) for {}",
                kinds.into_iter().collect::<Vec<_>>().join(", "),
                few(&translated, "devices")
            ),
            FIX,
        )
        .detail(detail);
    }
    if types.iter().all(|(_, t)| t == "identity") {
        return Check::ok(ID, "IOMMU on, in passthrough (identity domains)").detail(detail);
    }
    let other: BTreeSet<&str> = types
        .iter()
        .map(|(_, t)| t.as_str())
        .filter(|t| *t != "identity")
        .collect();
    Check::info(
        ID,
        format!(
            "IOMMU domains of type {}",
            other.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
    .detail(detail)
}

/// `gdr.detection`: would NCCL and UCX find peer memory? Where dma-buf
/// works they do not need it (`gdr.path`), so its absence is not a failure.
pub(crate) fn gdr_detection(host: &Host) -> Check {
    const ID: &str = "gdr.detection";
    let present = host.gdr;
    let mut detail: Vec<String> = GDR_PATHS
        .iter()
        .zip(&present)
        .map(|(p, &e)| format!("{p}: {}", if e { "present" } else { "absent" }))
        .collect();
    let sees = |idx: &[usize]| idx.iter().any(|&i| present[i]);
    let (nccl, ucx) = (sees(&NCCL_PATHS), sees(&UCX_PATHS));
    let peers = MEMORY_PEERS;
    let peers_dir = host.peers.is_some();
    detail.push(if let Some(clients) = &host.peers {
        let names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
        format!("{peers}: {}", names.join(", "))
    } else {
        format!("{peers}: absent (MOFED 24.04+ on kernels that do not export mm_kobj)")
    });
    let yes = |b: bool| if b { "yes" } else { "no" };
    let summary = format!(
        "peer memory detected by NCCL: {}, by UCX: {}",
        yes(nccl),
        yes(ucx)
    );
    const FIX: &str =
        "load nvidia_peermem: /sys/module/nvidia_peermem/version satisfies both NCCL and UCX";
    if !nccl && !ucx && advisor::dmabuf(host).usable() {
        return Check::info(
            ID,
            format!("{summary}: they register GPU memory through dma-buf here (gdr.path)"),
        )
        .detail(detail);
    }
    if !nccl && !ucx {
        return Check::fail(ID, summary, FIX).detail(detail);
    }
    if !nccl || !ucx {
        return Check::warn(ID, summary, FIX).detail(detail);
    }
    let nv_mem = host
        .peers
        .iter()
        .flatten()
        .any(|c| c.name == "nv_mem" && c.dir);
    if host.ours.is_some() && peers_dir && !nv_mem {
        return Check::warn(
            ID,
            format!("{summary}, but {MODULE} has no nv_mem client in {peers}"),
            "`dmesg | grep nvidia_peermem` shows why the client did not register; reload the module",
        )
        .detail(detail);
    }
    Check::ok(ID, summary).detail(detail)
}
