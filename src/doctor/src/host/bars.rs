// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! A GPU's BARs from its sysfs `resource` file, counted as the NVIDIA
//! driver counts them.
//!
//! `resource` has one `start end flags` line per PCI resource: the six BAR
//! registers first, then the expansion ROM and bridge windows. The driver
//! numbers the *memory* BARs: BAR0 (registers), BAR1 (the framebuffer
//! aperture that peer-to-peer mappings use), BAR3. A 64-bit BAR takes two
//! registers, so its second line is empty, and I/O BARs do not count. So
//! BAR1 is PCI BAR 1 on the usual bare-metal layout (BAR0 32-bit) and PCI
//! BAR 2 where BAR0 is 64-bit, as hypervisors often present it.

use std::fmt;

/// `IORESOURCE_IO`: an I/O port BAR.
pub const IORESOURCE_IO: u64 = 0x100;
/// `IORESOURCE_MEM`: a memory BAR.
pub const IORESOURCE_MEM: u64 = 0x200;
/// `IORESOURCE_PREFETCH`: prefetchable memory.
pub const IORESOURCE_PREFETCH: u64 = 0x2000;
/// `IORESOURCE_MEM_64`: a 64-bit BAR (two registers, two lines).
pub const IORESOURCE_MEM_64: u64 = 0x10_0000;
/// `IORESOURCE_UNSET`: the kernel could not assign an address.
pub const IORESOURCE_UNSET: u64 = 0x2000_0000;

/// The BAR registers of a PCI function: the first six lines.
pub const BAR_REGISTERS: usize = 6;

/// One line of `resource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// First address.
    pub start: u64,
    /// Last address.
    pub end: u64,
    /// `IORESOURCE_*` flags.
    pub flags: u64,
}

impl Resource {
    /// Parses `0x... 0x... 0x...`; the error says what is wrong.
    pub fn parse(line: &str) -> Result<Resource, String> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [start, end, flags] = fields.as_slice() else {
            return Err(format!("{} fields instead of 3", fields.len()));
        };
        let hex = |f: &str| {
            f.strip_prefix("0x")
                .and_then(|d| u64::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("'{f}' is not a hexadecimal number"))
        };
        let r = Resource {
            start: hex(start)?,
            end: hex(end)?,
            flags: hex(flags)?,
        };
        if r.end < r.start {
            return Err("it ends before it starts".to_string());
        }
        Ok(r)
    }

    /// An unused register: all zeros.
    pub fn is_empty(&self) -> bool {
        self.start == 0 && self.end == 0 && self.flags == 0
    }

    /// Its size in bytes; an unassigned BAR keeps its size (0 to size - 1).
    pub fn size(&self) -> Option<u64> {
        (self.end != 0)
            .then(|| (self.end - self.start).checked_add(1))
            .flatten()
    }

    /// Whether it has an address.
    pub fn assigned(&self) -> bool {
        self.start != 0 && self.flags & IORESOURCE_UNSET == 0
    }

    /// `64-bit prefetchable`, `32-bit non-prefetchable`.
    pub fn kind(&self) -> String {
        let width = if self.flags & IORESOURCE_MEM_64 != 0 {
            "64-bit"
        } else {
            "32-bit"
        };
        let prefetch = if self.flags & IORESOURCE_PREFETCH != 0 {
            "prefetchable"
        } else {
            "non-prefetchable"
        };
        format!("{width} {prefetch}")
    }
}

/// BAR1 of a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bar1 {
    /// Assigned: the PCI BAR index it is at, and its resource line.
    Assigned {
        /// PCI BAR index (line of `resource`).
        index: usize,
        /// The line.
        res: Resource,
    },
    /// Present but without an address (the line is empty, or marked unset).
    Unassigned {
        /// PCI BAR index.
        index: usize,
        /// Its size, when the kernel kept it.
        size: Option<u64>,
    },
    /// Cannot be told (why).
    Unknown(String),
}

impl Bar1 {
    /// Reads BAR1 from the text of a `resource` file.
    pub fn from_resource(text: &str) -> Bar1 {
        let lines: Vec<&str> = text.lines().collect();
        let mut memory_bars = 0;
        let mut index = 0;
        while index < BAR_REGISTERS {
            let Some(line) = lines.get(index) else {
                return Bar1::Unknown(format!(
                    "resource has {} lines, BAR1 is not among them",
                    lines.len()
                ));
            };
            let res = match Resource::parse(line) {
                Ok(res) => res,
                Err(why) => {
                    return Bar1::Unknown(format!(
                        "resource line {index} is malformed ({why}): '{}'",
                        line.trim()
                    ))
                }
            };
            if res.flags & IORESOURCE_MEM != 0 {
                if memory_bars == 1 {
                    return Bar1::of(index, res);
                }
                memory_bars += 1;
                index += if res.flags & IORESOURCE_MEM_64 != 0 {
                    2
                } else {
                    1
                };
            } else if res.is_empty() && memory_bars == 1 {
                // The register after BAR0 is empty: the kernel released BAR1.
                return Bar1::Unassigned { index, size: None };
            } else if res.is_empty() || res.flags & IORESOURCE_IO != 0 {
                index += 1;
            } else {
                return Bar1::Unknown(format!(
                    "resource line {index} is neither memory nor I/O (flags 0x{:x})",
                    res.flags
                ));
            }
        }
        Bar1::Unknown(format!(
            "{memory_bars} memory BAR(s) in the {BAR_REGISTERS} BAR registers, no BAR1"
        ))
    }

    /// BAR1 from its resource line.
    fn of(index: usize, res: Resource) -> Bar1 {
        if res.assigned() && res.size().is_some() {
            Bar1::Assigned { index, res }
        } else {
            Bar1::Unassigned {
                index,
                size: res.size(),
            }
        }
    }

    /// Its size when assigned.
    pub fn size(&self) -> Option<u64> {
        match self {
            Bar1::Assigned { res, .. } => res.size(),
            _ => None,
        }
    }

    /// Its PCI BAR index, when known.
    pub fn index(&self) -> Option<usize> {
        match *self {
            Bar1::Assigned { index, .. } | Bar1::Unassigned { index, .. } => Some(index),
            Bar1::Unknown(_) => None,
        }
    }
}

impl fmt::Display for Bar1 {
    /// `128 GiB at PCI BAR 2 (64-bit prefetchable)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bar1::Assigned { index, res } => write!(
                f,
                "{} at PCI BAR {index} ({})",
                crate::text::bytes(res.size().unwrap_or(0)),
                res.kind()
            ),
            Bar1::Unassigned {
                index,
                size: Some(size),
            } => write!(
                f,
                "not assigned (PCI BAR {index}, {})",
                crate::text::bytes(*size)
            ),
            Bar1::Unassigned { index, size: None } => {
                write!(f, "not assigned (PCI BAR {index} is empty)")
            }
            Bar1::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZERO: &str = "0x0000000000000000 0x0000000000000000 0x0000000000000000";

    /// The usual bare-metal layout: BAR0 32-bit, BAR1 64-bit at 1, BAR3 at 3, I/O at 5.
    const BARE_METAL: &str = "\
0x00000000fa000000 0x00000000faffffff 0x0000000000040200
0x0000380000000000 0x0000381fffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000382000000000 0x0000382001ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x000000000000f000 0x000000000000f07f 0x0000000000040101
0x00000000fb000000 0x00000000fb07ffff 0x0000000000046200
";

    /// An H100 in a VM (issue 24): BAR0 64-bit at 0-1, BAR1 at 2, BAR3 at 4.
    const VM: &str = "\
0x0000102002000000 0x0000102002ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000100000000000 0x0000101fffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000102000000000 0x0000102001ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000000000000000 0x0000000000000000 0x0000000000000000
";

    #[test]
    fn bare_metal_bar1_is_pci_bar_1() {
        let bar1 = Bar1::from_resource(BARE_METAL);
        assert_eq!(bar1.index(), Some(1));
        assert_eq!(bar1.size(), Some(128 << 30));
        assert_eq!(
            bar1.to_string(),
            "128 GiB at PCI BAR 1 (64-bit prefetchable)"
        );
    }

    #[test]
    fn vm_bar1_is_pci_bar_2() {
        let bar1 = Bar1::from_resource(VM);
        assert_eq!(bar1.index(), Some(2));
        assert_eq!(bar1.size(), Some(128 << 30));
        assert_eq!(
            bar1.to_string(),
            "128 GiB at PCI BAR 2 (64-bit prefetchable)"
        );
    }

    /// A released BAR1 leaves empty lines; BAR3 behind them is not BAR1.
    #[test]
    fn released_bar1_is_not_bar3() {
        let bare = BARE_METAL.replacen(
            "0x0000380000000000 0x0000381fffffffff 0x000000000014220c",
            ZERO,
            1,
        );
        assert_eq!(
            Bar1::from_resource(&bare),
            Bar1::Unassigned {
                index: 1,
                size: None
            }
        );
        let vm = VM.replacen(
            "0x0000100000000000 0x0000101fffffffff 0x000000000014220c",
            ZERO,
            1,
        );
        assert_eq!(
            Bar1::from_resource(&vm),
            Bar1::Unassigned {
                index: 2,
                size: None
            }
        );
    }

    /// The kernel keeps the size of a BAR it could not place (IORESOURCE_UNSET).
    #[test]
    fn unset_bar1_keeps_its_size() {
        let text = BARE_METAL.replacen(
            "0x0000380000000000 0x0000381fffffffff 0x000000000014220c",
            "0x0000000000000000 0x0000001fffffffff 0x000000002014220c",
            1,
        );
        let bar1 = Bar1::from_resource(&text);
        assert_eq!(
            bar1,
            Bar1::Unassigned {
                index: 1,
                size: Some(128 << 30)
            }
        );
        assert_eq!(bar1.to_string(), "not assigned (PCI BAR 1, 128 GiB)");
        assert_eq!(bar1.size(), None);
    }

    /// An I/O BAR before BAR1 does not count.
    #[test]
    fn io_bars_do_not_count() {
        let text = format!(
            "0x000000000000e000 0x000000000000e07f 0x0000000000040101\n{}",
            VM
        );
        assert_eq!(Bar1::from_resource(&text).index(), Some(3));
    }

    /// Malformed lines before BAR1 make it unknown, and say which line and why.
    #[test]
    fn malformed_lines() {
        for (text, why) in [
            (
                "0xfa000000 0xfaffffff\n",
                "resource line 0 is malformed (2 fields instead of 3): '0xfa000000 0xfaffffff'",
            ),
            (
                "0x1 0x2 0x200\nzz 0x2 0x200\n",
                "resource line 1 is malformed ('zz' is not a hexadecimal number): 'zz 0x2 0x200'",
            ),
            (
                "0x10 0x2 0x200\n",
                "resource line 0 is malformed (it ends before it starts): '0x10 0x2 0x200'",
            ),
            (
                "0x1 0x2 0x200\n0x3 0x4 0x800\n",
                "resource line 1 is neither memory nor I/O (flags 0x800)",
            ),
            (
                "0x1 0x2 0x200\n",
                "resource has 1 lines, BAR1 is not among them",
            ),
            ("", "resource has 0 lines, BAR1 is not among them"),
        ] {
            assert_eq!(
                Bar1::from_resource(text),
                Bar1::Unknown(why.to_string()),
                "{text:?}"
            );
        }
        // After BAR1, a bad line loses nothing.
        let tail = format!("{VM}garbage\n");
        assert_eq!(Bar1::from_resource(&tail).size(), Some(128 << 30));
    }

    #[test]
    fn one_memory_bar_only() {
        let text = format!("{}\n{}\n", "0x1000 0x1fff 0x40200", [ZERO; 5].join("\n"));
        assert_eq!(
            Bar1::from_resource(&text),
            Bar1::Unassigned {
                index: 1,
                size: None
            }
        );
        let io_only = [ZERO, "0xe000 0xe07f 0x40101", ZERO, ZERO, ZERO, ZERO].join("\n");
        assert_eq!(
            Bar1::from_resource(&io_only),
            Bar1::Unknown("0 memory BAR(s) in the 6 BAR registers, no BAR1".to_string())
        );
    }
}
