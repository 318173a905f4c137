// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Builds a sysfs/procfs tree from a fixture description
//! (`tests/fixtures/<name>/tree`; the format is in `tests/fixtures/README.md`).
//!
//! The description is read into a model first (so `rm` and `rmline` can
//! undo what an `include` added), then turned into the entries of a root
//! (plain files, symbolic links as sysfs has them, binary `config` files
//! and `resource` tables, programs and their answers): kept in memory for
//! the library, or written out for the binary.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use peermem_doctor::host::root::Entry;

/// The directory holding every fixture.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// A file system entry of the model.
#[derive(Debug, Clone)]
enum Node {
    File(Vec<u8>),
    /// A stand-in program: what it prints, by default and for given arguments.
    Program(Stand),
    Link(String),
    Dir,
}

/// A PCI function of the model.
#[derive(Debug, Clone)]
struct Pci {
    vendor: u16,
    device: u16,
    class: u32,
    numa: Option<i32>,
    bar1: Option<u64>,
    acs: Option<u16>,
    ib: Option<String>,
    short_config: bool,
}

impl Pci {
    /// Defaults of each shorthand.
    fn of_kind(kind: &str) -> Option<Pci> {
        let (vendor, device, class, bar1) = match kind {
            "gpu" => (0x10de, 0x2330, 0x030200, Some(64 << 30)),
            "nic" => (0x15b3, 0x101b, 0x020700, None),
            "bridge" => (0x10b5, 0x8725, 0x060400, None),
            "pci" => (0x8086, 0x0000, 0x000000, None),
            _ => return None,
        };
        Some(Pci {
            vendor,
            device,
            class,
            numa: None,
            bar1,
            acs: None,
            ib: None,
            short_config: false,
        })
    }
}

/// A fixture tree being described.
#[derive(Debug, Default)]
pub struct Tree {
    nodes: BTreeMap<String, Node>,
    /// PCI functions by device path below `sys/devices`.
    pci: BTreeMap<String, Pci>,
    /// NUMA node of each host bridge (`pci0000:00`).
    numa: BTreeMap<String, i32>,
    /// Domain type of the IOMMU groups, when the IOMMU is on.
    iommu: Option<String>,
}

/// An error with the line it comes from.
fn err(file: &Path, line: usize, msg: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{}:{line}: {msg}", file.display()))
}

/// Undoes `\n`, `\t`, `\\` and `\xNN` (any byte).
fn unescape(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = rest.find('\\') {
        out.extend(&rest.as_bytes()[..at]);
        rest = &rest[at + 1..];
        let hex = rest.get(1..3).and_then(|h| u8::from_str_radix(h, 16).ok());
        let (byte, used) = match (rest.chars().next(), hex) {
            (Some('n'), _) => (b'\n', 1),
            (Some('t'), _) => (b'\t', 1),
            (Some('x'), Some(byte)) => (byte, 3),
            (Some(c), _) if c.is_ascii() => (c as u8, 1),
            _ => (b'\\', 0),
        };
        out.push(byte);
        rest = &rest[used..];
    }
    out.extend(rest.as_bytes());
    out
}

/// A line of text as a file body: unescaped, with its newline.
fn text_line(text: &str) -> Vec<u8> {
    let mut body = unescape(text);
    body.push(b'\n');
    body
}

/// A stand-in for a program (`rustc`, `bindgen`): what it prints.
#[derive(Debug, Clone)]
struct Stand {
    /// Printed for any arguments not below (`--version`).
    text: Vec<u8>,
    /// Printed for exactly these arguments (`--print sysroot`).
    answers: Vec<(String, Vec<u8>)>,
}

/// What a stand-in prints for `text`: the line and its newline.
fn printed(text: &[u8]) -> Vec<u8> {
    let mut out = text.to_vec();
    out.push(b'\n');
    out
}

/// The shell script of a stand-in that prints `text`, or `answers` for
/// their arguments: a `case` on its arguments.
fn program(text: &[u8], answers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let print = |out: &[u8]| {
        let mut script = b"cat <<'END_OF_TEXT'\n".to_vec();
        script.extend(out);
        script.extend(b"END_OF_TEXT\n;;\n");
        script
    };
    let mut script = b"#!/bin/sh\ncase \"$*\" in\n".to_vec();
    for (args, out) in answers {
        script.extend(format!("'{}')\n", args.replace('\'', "'\\''")).into_bytes());
        script.extend(print(out));
    }
    script.extend(b"*)\n");
    script.extend(print(text));
    script.extend(b"esac\n");
    script
}

/// Parses `256M`, `64G`, `1T` or a plain byte count.
fn size(s: &str) -> Option<u64> {
    let (num, shift) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 10),
        'M' => (&s[..s.len() - 1], 20),
        'G' => (&s[..s.len() - 1], 30),
        'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    num.parse::<u64>().ok().map(|n| n << shift)
}

/// Parses `0x10de` or decimal.
fn int(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The last component of a path.
fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The link text that leads from `link` to `target` (both relative to the root).
pub fn relative(link: &str, target: &str) -> String {
    let from: Vec<&str> = link.split('/').collect();
    let from = &from[..from.len() - 1];
    let to: Vec<&str> = target.split('/').collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

impl Tree {
    /// Reads the description of fixture `name`.
    pub fn load(name: &str) -> io::Result<Tree> {
        let mut tree = Tree::default();
        tree.read(&fixtures_dir().join(name).join("tree"))?;
        Ok(tree)
    }

    /// Applies one description file.
    pub fn read(&mut self, file: &Path) -> io::Result<()> {
        let text = fs::read_to_string(file).map_err(|e| err(file, 0, e))?;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            let (arg, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let arg = arg.trim_start_matches('/');
            let tail = tail.trim();
            match cmd {
                // A shared piece (`include/NAME.tree`) or another fixture (`NAME/tree`).
                "include" => {
                    let shared = fixtures_dir().join("include").join(format!("{arg}.tree"));
                    let other = fixtures_dir().join(arg).join("tree");
                    self.read(if shared.exists() { &shared } else { &other })?
                }
                "file" => {
                    let body = if tail.is_empty() {
                        Vec::new()
                    } else {
                        text_line(tail)
                    };
                    self.nodes.insert(arg.to_string(), Node::File(body));
                }
                // A file of the fixture's directory, byte for byte.
                "copy" => {
                    let from = file.parent().unwrap_or(Path::new(".")).join(tail);
                    let body = fs::read(&from)
                        .map_err(|e| err(file, n, format!("{}: {e}", from.display())))?;
                    self.nodes.insert(arg.to_string(), Node::File(body));
                }
                "program" => {
                    let stand = Stand {
                        text: unescape(tail),
                        answers: Vec::new(),
                    };
                    self.nodes.insert(arg.to_string(), Node::Program(stand));
                }
                // What a stand-in prints for exactly these arguments.
                "answer" => {
                    let Some((args, text)) = tail.split_once(" => ") else {
                        return Err(err(file, n, "answer: expected ARGS => TEXT"));
                    };
                    match self.nodes.get_mut(arg) {
                        Some(Node::Program(stand)) => stand
                            .answers
                            .push((args.trim().to_string(), unescape(text.trim()))),
                        _ => return Err(err(file, n, format!("answer: no program {arg}"))),
                    }
                }
                "append" => {
                    let entry = self
                        .nodes
                        .entry(arg.to_string())
                        .or_insert(Node::File(Vec::new()));
                    match entry {
                        Node::File(body) => body.extend(text_line(tail)),
                        _ => return Err(err(file, n, format!("{arg} is not a file"))),
                    }
                }
                "rmline" => match self.nodes.get_mut(arg) {
                    Some(Node::File(body)) => {
                        let text = String::from_utf8_lossy(body).into_owned();
                        let kept: String = text
                            .lines()
                            .filter(|l| !l.contains(tail))
                            .map(|l| format!("{l}\n"))
                            .collect();
                        *body = kept.into_bytes();
                    }
                    _ => return Err(err(file, n, format!("rmline: no file {arg}"))),
                },
                "rm" => {
                    let prefix = format!("{arg}/");
                    self.nodes
                        .retain(|p, _| p != arg && !p.starts_with(&prefix));
                    self.pci.retain(|p, _| {
                        let full = format!("sys/devices/{p}");
                        full != arg && !full.starts_with(&prefix)
                    });
                }
                "link" => {
                    self.nodes
                        .insert(arg.to_string(), Node::Link(tail.to_string()));
                }
                "dir" => {
                    self.nodes.insert(arg.to_string(), Node::Dir);
                }
                // A module file (ELF): `key=value` modinfo, `crc:SYMBOL=0xCRC` in
                // `__versions`, `export:SYMBOL=0xCRC` exported with that CRC.
                "ko" => {
                    let mut info = Vec::new();
                    let mut crcs = Vec::new();
                    let mut exports = Vec::new();
                    for w in tail.split_whitespace() {
                        let (list, entry) =
                            match (w.strip_prefix("crc:"), w.strip_prefix("export:")) {
                                (Some(c), _) => (&mut crcs, c.split_once('=')),
                                (_, Some(e)) => (&mut exports, e.split_once('=')),
                                _ => (&mut crcs, None),
                            };
                        match entry {
                            Some((sym, crc)) => list.push((
                                sym,
                                int(crc)
                                    .and_then(|c| u32::try_from(c).ok())
                                    .ok_or_else(|| err(file, n, format!("bad CRC in {w}")))?,
                            )),
                            None if w.contains('=') => {
                                info.extend(w.as_bytes());
                                info.push(0);
                            }
                            None => {
                                return Err(err(
                                    file,
                                    n,
                                    format!("ko: '{w}' is neither key=value nor crc:SYM=CRC nor export:SYM=CRC"),
                                ))
                            }
                        }
                    }
                    let mut sections = vec![(".modinfo", info)];
                    if !crcs.is_empty() {
                        sections.push((
                            "__versions",
                            peermem_doctor::host::elf::versions_table(&crcs),
                        ));
                    }
                    if !exports.is_empty() {
                        // CAST: a handful of sections; the next is `__kcrctab`.
                        let index = sections.len() as u16 + 1;
                        sections
                            .extend(peermem_doctor::host::elf::exports_sections(&exports, index));
                    }
                    let mut elf = peermem_doctor::host::elf::build(&sections);
                    // `.ko.xz`: compressed, as Debian's kernels and DKMS install modules.
                    if arg.ends_with(".ko.xz") {
                        let mut xz = Vec::new();
                        lzma_rs::xz_compress(&mut &elf[..], &mut xz)
                            .map_err(|e| err(file, n, format!("xz: {e}")))?;
                        elf = xz;
                    }
                    self.nodes.insert(arg.to_string(), Node::File(elf));
                }
                "hostbridge" => {
                    let numa = tail
                        .strip_prefix("numa=")
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| err(file, n, "hostbridge NAME numa=N"))?;
                    self.numa.insert(arg.to_string(), numa);
                }
                "iommu-groups" => self.iommu = Some(arg.to_string()),
                "gpu" | "nic" | "bridge" | "pci" => {
                    let Some(mut dev) = Pci::of_kind(cmd) else {
                        unreachable!()
                    };
                    for kv in tail.split_whitespace() {
                        let (k, v) = kv
                            .split_once('=')
                            .ok_or_else(|| err(file, n, format!("bad {kv}")))?;
                        let bad = || err(file, n, format!("bad value in {kv}"));
                        match k {
                            "vendor" => {
                                dev.vendor =
                                    int(v).and_then(|x| u16::try_from(x).ok()).ok_or_else(bad)?
                            }
                            "device" => {
                                dev.device =
                                    int(v).and_then(|x| u16::try_from(x).ok()).ok_or_else(bad)?
                            }
                            "class" => {
                                dev.class =
                                    int(v).and_then(|x| u32::try_from(x).ok()).ok_or_else(bad)?
                            }
                            "numa" => dev.numa = Some(v.parse().map_err(|_| bad())?),
                            "bar1" => dev.bar1 = Some(size(v).ok_or_else(bad)?).filter(|&b| b != 0),
                            "acs" => {
                                dev.acs = Some(
                                    int(v).and_then(|x| u16::try_from(x).ok()).ok_or_else(bad)?,
                                )
                            }
                            "ib" => dev.ib = Some(v.to_string()),
                            "config" if v == "short" => dev.short_config = true,
                            _ => return Err(err(file, n, format!("unknown key {k}"))),
                        }
                    }
                    self.pci.insert(arg.to_string(), dev);
                }
                _ => return Err(err(file, n, format!("unknown command {cmd}"))),
            }
        }
        Ok(())
    }

    /// Adds bridges for undeclared PCI components above declared functions.
    fn complete_pci(&mut self) {
        let paths: Vec<String> = self.pci.keys().cloned().collect();
        for path in paths {
            let comps: Vec<&str> = path.split('/').collect();
            for end in 2..comps.len() {
                let above = comps[..end].join("/");
                if comps[end - 1].contains('.') && !self.pci.contains_key(&above) {
                    let bridge = Pci::of_kind("bridge").unwrap_or_else(|| unreachable!());
                    self.pci.insert(above, bridge);
                }
            }
        }
    }

    /// Turns the PCI functions into files and links.
    fn materialize_pci(&mut self) {
        self.complete_pci();
        let devices: Vec<(String, Pci)> = self
            .pci
            .iter()
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect();
        for (index, (path, dev)) in devices.iter().enumerate() {
            let dir = format!("sys/devices/{path}");
            let bdf = base(path).to_string();
            let host = path.split('/').next().unwrap_or("");
            let numa = dev
                .numa
                .or_else(|| self.numa.get(host).copied())
                .unwrap_or(-1);
            // A `file` line for an attribute replaces what is generated here.
            let mut put = |name: &str, body: Vec<u8>| {
                self.nodes
                    .entry(format!("{dir}/{name}"))
                    .or_insert(Node::File(body));
            };
            put("vendor", format!("0x{:04x}\n", dev.vendor).into_bytes());
            put("device", format!("0x{:04x}\n", dev.device).into_bytes());
            put("class", format!("0x{:06x}\n", dev.class).into_bytes());
            put("numa_node", format!("{numa}\n").into_bytes());
            put("config", config(dev));
            put("resource", resource(dev, index).into_bytes());
            let bus_link = format!("sys/bus/pci/devices/{bdf}");
            self.nodes
                .insert(bus_link.clone(), Node::Link(relative(&bus_link, &dir)));
            if let Some(ib) = &dev.ib {
                let ibdir = format!("{dir}/infiniband/{ib}");
                self.nodes.insert(
                    format!("{ibdir}/ports/1/state"),
                    Node::File(b"4: ACTIVE\n".to_vec()),
                );
                let dev_link = format!("{ibdir}/device");
                self.nodes
                    .insert(dev_link.clone(), Node::Link(relative(&dev_link, &dir)));
                let class_link = format!("sys/class/infiniband/{ib}");
                self.nodes.insert(
                    class_link.clone(),
                    Node::Link(relative(&class_link, &ibdir)),
                );
            }
            if let Some(kind) = &self.iommu {
                let group = format!("sys/kernel/iommu_groups/{index}");
                self.nodes.insert(
                    format!("{group}/type"),
                    Node::File(format!("{kind}\n").into_bytes()),
                );
                let member = format!("{group}/devices/{bdf}");
                self.nodes
                    .insert(member.clone(), Node::Link(relative(&member, &dir)));
                let group_link = format!("{dir}/iommu_group");
                self.nodes.insert(
                    group_link.clone(),
                    Node::Link(relative(&group_link, &group)),
                );
            }
        }
        if self.iommu.is_some() {
            let unit = "sys/devices/virtual/iommu/dmar0";
            self.nodes
                .insert(format!("{unit}/name"), Node::File(b"dmar0\n".to_vec()));
            let link = "sys/class/iommu/dmar0";
            self.nodes
                .insert(link.to_string(), Node::Link(relative(link, unit)));
        }
    }

    /// The entries of the tree, by path below its root.
    pub fn entries(mut self) -> BTreeMap<String, Entry> {
        self.materialize_pci();
        self.nodes
            .into_iter()
            .map(|(path, node)| {
                let entry = match node {
                    Node::File(body) => Entry::File(body),
                    Node::Program(stand) => Entry::Program {
                        text: printed(&stand.text),
                        answers: stand
                            .answers
                            .iter()
                            .map(|(args, text)| (args.clone(), printed(text)))
                            .collect(),
                    },
                    Node::Link(to) => Entry::Link(to),
                    Node::Dir => Entry::Dir,
                };
                (path, entry)
            })
            .collect()
    }

    /// Writes the tree below `dir` (which must not exist yet).
    pub fn write(self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        for (path, entry) in self.entries() {
            let target = dir.join(path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            match entry {
                Entry::File(body) => fs::write(&target, body)?,
                Entry::Program { text, answers } => {
                    fs::write(&target, program(&text, &answers))?;
                    fs::set_permissions(&target, fs::Permissions::from_mode(0o755))?;
                }
                Entry::Link(to) => symlink(to, &target)?,
                Entry::Dir => fs::create_dir_all(&target)?,
            }
        }
        Ok(())
    }
}

/// Configuration space: IDs, class, header type and, past 0x100, AER then ACS.
fn config(dev: &Pci) -> Vec<u8> {
    let mut c = vec![0u8; if dev.short_config { 64 } else { 4096 }];
    c[0..2].copy_from_slice(&dev.vendor.to_le_bytes());
    c[2..4].copy_from_slice(&dev.device.to_le_bytes());
    c[9..12].copy_from_slice(&dev.class.to_le_bytes()[..3]);
    c[0x0e] = u8::from(dev.class >> 8 == 0x0604);
    if dev.short_config {
        return c;
    }
    // AER (ID 1, version 2), pointing at ACS when there is one.
    let next: u32 = if dev.acs.is_some() { 0x148 } else { 0 };
    c[0x100..0x104].copy_from_slice(&(0x0001 | 2 << 16 | next << 20).to_le_bytes());
    if let Some(control) = dev.acs {
        c[0x148..0x14c].copy_from_slice(&(0x000du32 | 1 << 16).to_le_bytes());
        // Capability register: all features, then the control register.
        c[0x14c..0x14e].copy_from_slice(&0x007fu16.to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&control.to_le_bytes());
    }
    c
}

/// An unused `resource` line.
const NO_RESOURCE: &str = "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";

/// One `resource` line.
fn resource_line(start: u64, size: u64, flags: u64) -> String {
    format!(
        "0x{start:016x} 0x{:016x} 0x{flags:016x}\n",
        start + size - 1
    )
}

/// The `resource` table of the usual bare-metal GPU, 13 lines as sysfs prints
/// them: BAR0 32-bit 16 MiB, BAR1 64-bit prefetchable at index 1 (empty lines
/// when unassigned), BAR3 64-bit prefetchable 32 MiB at index 3.
fn resource(dev: &Pci, index: usize) -> String {
    const MEM32: u64 = 0x0004_0200;
    const MEM64_PREFETCH: u64 = 0x0014_220c;
    // CAST: a function's position in the tree, far below 2^32.
    let n = index as u64;
    let mut out = resource_line(0xf000_0000 + n * (16 << 20), 16 << 20, MEM32);
    match dev.bar1 {
        Some(size) => out.push_str(&resource_line(
            0x2000_0000_0000 + n * (1 << 40),
            size,
            MEM64_PREFETCH,
        )),
        None => out.push_str(NO_RESOURCE),
    }
    out.push_str(NO_RESOURCE);
    out.push_str(&resource_line(
        0x1000_0000_0000 + n * (32 << 20),
        32 << 20,
        MEM64_PREFETCH,
    ));
    for _ in 4..13 {
        out.push_str(NO_RESOURCE);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_links() {
        assert_eq!(
            relative(
                "sys/bus/pci/devices/0000:03:00.0",
                "sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0"
            ),
            "../../../devices/pci0000:00/0000:00:01.0/0000:03:00.0"
        );
        assert_eq!(
            relative(
                "sys/class/infiniband/mlx5_0",
                "sys/devices/x/infiniband/mlx5_0"
            ),
            "../../devices/x/infiniband/mlx5_0"
        );
        assert_eq!(relative("a/b/dev/ib/m/device", "a/b/dev"), "../..");
    }

    #[test]
    fn sizes_and_escapes() {
        assert_eq!(size("256M"), Some(256 << 20));
        assert_eq!(size("64G"), Some(64 << 30));
        assert_eq!(size("x"), None);
        assert_eq!(unescape(r"a\tb\nc\\d"), b"a\tb\nc\\d");
        assert_eq!(unescape(r"\x00\xff\xzz\"), b"\x00\xffxzz\\");
    }
}
