// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! PCI functions as sysfs shows them: identity, place in the bridge
//! hierarchy, BAR1 (`resource`, decoded in [`crate::host::bars`]) and the ACS
//! capability (`config`).

use crate::host::bars::Bar1;
use crate::host::root::{basename, Root};

/// NVIDIA's PCI vendor ID.
pub const VENDOR_NVIDIA: u16 = 0x10de;

/// Where sysfs lists every PCI function.
pub const BUS_DEVICES: &str = "/sys/bus/pci/devices";

/// One PCI function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDev {
    /// Domain, bus, device and function (`0000:03:00.0`).
    pub bdf: String,
    /// The resolved sysfs directory (`/sys/devices/pci0000:00/.../0000:03:00.0`).
    pub path: String,
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Class code, 24 bits (`0x030200`).
    pub class: u32,
    /// NUMA node, `None` when the platform reports none (-1).
    pub numa_node: Option<u32>,
}

impl PciDev {
    /// Reads the function at a sysfs directory (any path leading to it).
    pub fn load(root: &Root, dir: &str) -> Option<PciDev> {
        let path = root.resolve(dir)?;
        let bdf = basename(&path).to_string();
        if !is_bdf(&bdf) {
            return None;
        }
        let hex = |attr: &str| {
            root.read_attr(&format!("{path}/{attr}"))
                .and_then(|s| parse_hex(&s))
        };
        let numa_node = root
            .read_attr(&format!("{path}/numa_node"))
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        Some(PciDev {
            vendor: hex("vendor")
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(0xffff),
            device: hex("device")
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(0xffff),
            class: hex("class")
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0),
            numa_node,
            bdf,
            path,
        })
    }

    /// Whether this is an NVIDIA display or 3D controller.
    pub fn is_nvidia_gpu(&self) -> bool {
        self.vendor == VENDOR_NVIDIA && matches!(self.class >> 8, 0x0300 | 0x0302)
    }

    /// The sysfs path of the host bridge (root complex) above this function.
    ///
    /// It is the first `pciDDDD:BB` component under `/sys/devices`; platforms
    /// without one (paravirtual buses) use the directory above the first function.
    pub fn host_bridge(&self) -> String {
        let comps: Vec<&str> = self.path.split('/').filter(|c| !c.is_empty()).collect();
        let end = comps
            .iter()
            .position(|c| is_host_bridge(c))
            .or_else(|| {
                comps
                    .iter()
                    .position(|c| is_bdf(c))
                    .and_then(|i| i.checked_sub(1))
            })
            .unwrap_or(0);
        let mut s = String::new();
        for c in comps.iter().take(end + 1) {
            s.push('/');
            s.push_str(c);
        }
        s
    }

    /// The bridges above this function, from the root port down to the parent.
    pub fn upstream(&self) -> Vec<String> {
        let host = self.host_bridge();
        let below = self.path.strip_prefix(&host).unwrap_or(&self.path);
        let mut chain: Vec<String> = below
            .split('/')
            .filter(|c| is_bdf(c))
            .map(str::to_string)
            .collect();
        chain.pop();
        chain
    }

    /// BAR1 as the NVIDIA driver counts it, from the `resource` file.
    pub fn bar1(&self, root: &Root) -> Bar1 {
        match root.read_text(&format!("{}/resource", self.path)) {
            Some(text) => Bar1::from_resource(&text),
            None => Bar1::Unknown(format!("{}/resource is unreadable", self.path)),
        }
    }

    /// The ACS capability of this function.
    pub fn acs(&self, root: &Root) -> Acs {
        match root.read_bytes(&format!("{}/config", self.path)) {
            Some(config) => find_acs(&config),
            None => Acs::Unreadable,
        }
    }
}

/// Every PCI function sysfs lists, sorted by address.
pub fn all(root: &Root) -> Vec<PciDev> {
    root.list(BUS_DEVICES)
        .iter()
        .filter_map(|name| PciDev::load(root, &format!("{BUS_DEVICES}/{name}")))
        .collect()
}

/// Whether `s` is a PCI address `DDDD:BB:DD.F` (the domain may be longer, as behind VMD).
pub fn is_bdf(s: &str) -> bool {
    let mut parts = s.split(':');
    let (Some(dom), Some(bus), Some(devfn), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return false;
    };
    let hex = |p: &str, min: usize, max: usize| {
        (min..=max).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_hexdigit())
    };
    hex(dom, 4, 8) && hex(bus, 2, 2) && hex(dev, 2, 2) && hex(func, 1, 1)
}

/// Whether a sysfs component names a host bridge (`pci0000:00`).
fn is_host_bridge(c: &str) -> bool {
    c.strip_prefix("pci").is_some_and(|rest| {
        rest.split_once(':').is_some_and(|(d, b)| {
            !d.is_empty()
                && !b.is_empty()
                && (d.bytes().chain(b.bytes())).all(|x| x.is_ascii_hexdigit())
        })
    })
}

/// Parses `0x10de` or `10de`.
pub fn parse_hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(digits, 16).ok()
}

/// PCIe extended capability ID of Access Control Services.
pub const ACS_CAP_ID: u16 = 0x000d;

/// Where the extended capability list starts in configuration space.
const EXT_CAP_START: usize = 0x100;

/// The ACS state of a function, from its configuration space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acs {
    /// Extended configuration space not readable (sysfs shows 64 bytes to non-root users).
    Unreadable,
    /// No ACS capability (or no extended configuration space at all).
    Absent,
    /// The capability at `offset`, with its control register.
    Present {
        /// Offset of the capability header.
        offset: usize,
        /// ACS Control register (capability + 6).
        control: u16,
    },
}

/// ACS control bits that make peer-to-peer traffic go up to the root complex.
pub const ACS_P2P_BITS: [(u16, &str); 5] = [
    (0x0001, "SrcValid"),
    (0x0004, "ReqRedir"),
    (0x0008, "CmpltRedir"),
    (0x0010, "UpstreamFwd"),
    (0x0020, "EgressCtrl"),
];

impl Acs {
    /// The names of the enabled bits that redirect peer-to-peer traffic.
    pub fn p2p_bits(&self) -> Vec<&'static str> {
        match *self {
            Acs::Present { control, .. } => ACS_P2P_BITS
                .iter()
                .filter(|(bit, _)| control & bit != 0)
                .map(|&(_, name)| name)
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Reads a little-endian `u16` at `off`.
fn le16(b: &[u8], off: usize) -> Option<u16> {
    let bytes = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// Reads a little-endian `u32` at `off`.
fn le32(b: &[u8], off: usize) -> Option<u32> {
    let bytes = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Finds an extended capability by walking the list from offset 0x100.
///
/// Each header is `id:16 version:4 next:12`; the walk stops on a zero or
/// all-ones header, an offset outside 0x100..4096 or after as many steps
/// as could possibly fit (a malformed loop).
pub fn find_ext_cap(config: &[u8], id: u16) -> Option<usize> {
    let mut off = EXT_CAP_START;
    for _ in 0..(4096 - EXT_CAP_START) / 4 {
        let header = le32(config, off)?;
        if header == 0 || header == u32::MAX {
            return None;
        }
        // CAST: the low 16 bits are the capability ID.
        if (header & 0xffff) as u16 == id {
            return Some(off);
        }
        // CAST: a 12-bit field, always fits.
        let next = ((header >> 20) & 0xffc) as usize;
        if next < EXT_CAP_START {
            return None;
        }
        off = next;
    }
    None
}

/// The ACS state from a `config` file's bytes.
pub fn find_acs(config: &[u8]) -> Acs {
    if config.len() < EXT_CAP_START {
        return Acs::Unreadable;
    }
    match find_ext_cap(config, ACS_CAP_ID) {
        Some(offset) => match le16(config, offset + 6) {
            Some(control) => Acs::Present { offset, control },
            None => Acs::Absent,
        },
        None => Acs::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_syntax() {
        assert!(is_bdf("0000:03:00.0"));
        assert!(is_bdf("10000:e1:00.7"));
        assert!(!is_bdf("pci0000:00"));
        assert!(!is_bdf("0000:03:00"));
        assert!(!is_bdf("0000:3:00.0"));
        assert!(is_host_bridge("pci0000:00"));
        assert!(is_host_bridge("pci10000:e0"));
        assert!(!is_host_bridge("pci_bus"));
    }

    /// A 4 KiB config space with AER at 0x100, then ACS at 0x148.
    fn config_with_acs(control: u16) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | 2 << 16 | 0x148 << 20).to_le_bytes());
        c[0x148..0x14c].copy_from_slice(&(0x000du32 | 1 << 16).to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&control.to_le_bytes());
        c
    }

    #[test]
    fn acs_walk() {
        let acs = find_acs(&config_with_acs(0x001d));
        assert_eq!(
            acs,
            Acs::Present {
                offset: 0x148,
                control: 0x1d
            }
        );
        assert_eq!(
            acs.p2p_bits(),
            ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
        );
        assert!(find_acs(&config_with_acs(0)).p2p_bits().is_empty());
        // Translation Blocking and Direct Translated P2P alone do not redirect.
        assert!(find_acs(&config_with_acs(0x42)).p2p_bits().is_empty());
    }

    #[test]
    fn acs_absent_short_or_looping() {
        assert_eq!(find_acs(&[0u8; 64]), Acs::Unreadable);
        assert_eq!(find_acs(&[0u8; 256]), Acs::Absent);
        assert_eq!(find_acs(&[0u8; 4096]), Acs::Absent);
        let mut c = vec![0u8; 4096];
        // AER pointing at itself.
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | 0x100 << 20).to_le_bytes());
        assert_eq!(find_acs(&c), Acs::Absent);
        // A next pointer below 0x100 ends the list.
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | 0x040 << 20).to_le_bytes());
        assert_eq!(find_acs(&c), Acs::Absent);
        // ACS at the very end, truncated control register.
        let mut t = config_with_acs(0x1d);
        t.truncate(0x14d);
        assert_eq!(find_acs(&t), Acs::Absent);
    }

    #[test]
    fn hex() {
        assert_eq!(parse_hex("0x10de\n"), Some(0x10de));
        assert_eq!(parse_hex("030200"), Some(0x030200));
        assert_eq!(parse_hex("zz"), None);
    }
}
