// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! GPUs, RDMA devices and the PCIe relationship of every GPU–NIC pair, in
//! the vocabulary of `nvidia-smi topo -m`.

use std::fmt;

use crate::host::bars::Bar1;
use crate::host::pci::PciDev;
use crate::host::root::Root;

/// Where sysfs lists RDMA devices.
pub const IB_CLASS: &str = "/sys/class/infiniband";

/// How a GPU and a NIC are connected, nearest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Link {
    /// Through at most one PCIe switch (one downstream port on each side).
    Pix,
    /// Through several bridges or switches, without the host bridge.
    Pxb,
    /// Through the host bridge (root complex) they share.
    Phb,
    /// Across host bridges of one NUMA node.
    Node,
    /// Across NUMA nodes (the SMP interconnect).
    Sys,
}

impl Link {
    /// The `nvidia-smi topo -m` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Link::Pix => "PIX",
            Link::Pxb => "PXB",
            Link::Phb => "PHB",
            Link::Node => "NODE",
            Link::Sys => "SYS",
        }
    }

    /// Whether peer-to-peer traffic stays below the root complex.
    pub fn below_root_complex(self) -> bool {
        self <= Link::Pxb
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The relationship of two functions and, when it stays below the root
/// complex, the bridges the traffic crosses (their lowest common bridge included).
pub fn classify(a: &PciDev, b: &PciDev) -> (Link, Vec<String>) {
    if a.host_bridge() != b.host_bridge() {
        // Unknown NUMA nodes (-1) mean a single-node platform.
        let link = match (a.numa_node, b.numa_node) {
            (Some(x), Some(y)) if x != y => Link::Sys,
            _ => Link::Node,
        };
        return (link, Vec::new());
    }
    let (ua, ub) = (a.upstream(), b.upstream());
    let common = ua.iter().zip(&ub).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return (Link::Phb, Vec::new());
    }
    // Bridges strictly below the lowest common one, on each side.
    let (da, db) = (ua.len() - common, ub.len() - common);
    let link = if da.max(db) <= 1 {
        Link::Pix
    } else {
        Link::Pxb
    };
    let mut bridges: Vec<String> = ua[common - 1..].to_vec();
    bridges.extend(ub[common..].iter().cloned());
    (link, bridges)
}

/// A GPU.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// Its PCI function.
    pub pci: PciDev,
    /// BAR1, as the driver counts BARs.
    pub bar1: Bar1,
}

/// An RDMA device (`/sys/class/infiniband/<name>`).
#[derive(Debug, Clone)]
pub struct Nic {
    /// Device name (`mlx5_0`).
    pub name: String,
    /// Its PCI function; `None` for software devices (rxe, siw).
    pub pci: Option<PciDev>,
    /// Port number and state (`1`, `4: ACTIVE`).
    pub ports: Vec<(String, String)>,
}

/// One GPU–NIC pair.
#[derive(Debug, Clone)]
pub struct Pair {
    /// Index into [`Topology::gpus`].
    pub gpu: usize,
    /// Index into [`Topology::nics`].
    pub nic: usize,
    /// How they are connected.
    pub link: Link,
    /// The bridges crossed when the path stays below the root complex.
    pub bridges: Vec<String>,
}

/// Everything the topology checks look at.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// NVIDIA GPUs, by PCI address.
    pub gpus: Vec<Gpu>,
    /// RDMA devices, by name.
    pub nics: Vec<Nic>,
    /// Every GPU with every NIC that has a PCI function, GPU-major.
    pub pairs: Vec<Pair>,
}

impl Topology {
    /// Reads GPUs (among `devices`) and RDMA devices from sysfs and classifies every pair.
    pub fn scan(root: &Root, devices: &[PciDev]) -> Topology {
        let gpus: Vec<Gpu> = devices
            .iter()
            .filter(|d| d.is_nvidia_gpu())
            .cloned()
            .map(|dev| Gpu {
                bar1: dev.bar1(root),
                pci: dev,
            })
            .collect();
        let nics: Vec<Nic> = root
            .list(IB_CLASS)
            .into_iter()
            .map(|name| {
                let dir = format!("{IB_CLASS}/{name}");
                let ports = root
                    .list(&format!("{dir}/ports"))
                    .into_iter()
                    .map(|p| {
                        let state = root
                            .read_attr(&format!("{dir}/ports/{p}/state"))
                            .unwrap_or_else(|| "unknown".to_string());
                        (p, state)
                    })
                    .collect();
                Nic {
                    pci: PciDev::load(root, &format!("{dir}/device")),
                    name,
                    ports,
                }
            })
            .collect();
        let mut pairs = Vec::new();
        for (g, gpu) in gpus.iter().enumerate() {
            for (n, nic) in nics.iter().enumerate() {
                if let Some(dev) = &nic.pci {
                    let (link, bridges) = classify(&gpu.pci, dev);
                    pairs.push(Pair {
                        gpu: g,
                        nic: n,
                        link,
                        bridges,
                    });
                }
            }
        }
        Topology { gpus, nics, pairs }
    }

    /// The pairs of one GPU.
    pub fn pairs_of(&self, gpu: usize) -> impl Iterator<Item = &Pair> {
        self.pairs.iter().filter(move |p| p.gpu == gpu)
    }

    /// The nearest NIC of a GPU (the first one on ties).
    pub fn nearest(&self, gpu: usize) -> Option<&Pair> {
        self.pairs_of(gpu).min_by_key(|p| p.link)
    }

    /// The PCI address of a NIC, or its name for software devices.
    pub fn nic_label(&self, nic: usize) -> String {
        self.nics
            .get(nic)
            .map(|n| match &n.pci {
                Some(p) => format!("{} ({})", n.name, p.bdf),
                None => n.name.clone(),
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::root::basename;

    fn dev(path: &str, numa: Option<u32>) -> PciDev {
        PciDev {
            bdf: basename(path).to_string(),
            path: path.to_string(),
            vendor: 0,
            device: 0,
            class: 0,
            numa_node: numa,
        }
    }

    const SW: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";

    #[test]
    fn same_switch_is_pix() {
        let gpu = dev(&format!("{SW}/0000:02:08.0/0000:03:00.0"), Some(0));
        let nic = dev(&format!("{SW}/0000:02:10.0/0000:04:00.0"), Some(0));
        let (link, bridges) = classify(&gpu, &nic);
        assert_eq!(link, Link::Pix);
        assert_eq!(bridges, ["0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]);
    }

    #[test]
    fn two_levels_is_pxb() {
        let gpu = dev(
            &format!("{SW}/0000:02:08.0/0000:03:00.0/0000:04:00.0/0000:05:00.0"),
            None,
        );
        let nic = dev(&format!("{SW}/0000:02:10.0/0000:06:00.0"), None);
        assert_eq!(classify(&gpu, &nic).0, Link::Pxb);
        assert_eq!(classify(&nic, &gpu).0, Link::Pxb);
    }

    #[test]
    fn root_ports_and_host_bridges() {
        let a = dev("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", Some(0));
        let b = dev("/sys/devices/pci0000:00/0000:00:03.0/0000:02:00.0", Some(0));
        let c = dev("/sys/devices/pci0000:20/0000:20:01.0/0000:21:00.0", Some(0));
        let d = dev("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", Some(1));
        let e = dev("/sys/devices/pci0000:80/0000:80:02.0", None);
        assert_eq!(classify(&a, &b), (Link::Phb, vec![]));
        assert_eq!(classify(&a, &c).0, Link::Node);
        assert_eq!(classify(&a, &d).0, Link::Sys);
        // Two functions on the root bus (a virtual machine) share only the host bridge.
        let f = dev("/sys/devices/pci0000:80/0000:80:03.0", None);
        assert_eq!(classify(&e, &f).0, Link::Phb);
        // A node of -1 is a single-node platform.
        assert_eq!(classify(&a, &e).0, Link::Node);
    }

    #[test]
    fn host_bridge_without_pci_component() {
        let a = dev("/sys/devices/LNXSYSTM:00/VMBUS:00/abcd/0001:00:00.0", None);
        assert_eq!(a.host_bridge(), "/sys/devices/LNXSYSTM:00/VMBUS:00/abcd");
        assert!(a.upstream().is_empty());
    }
}
