// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! What a kernel module file says about its build: `.modinfo` (`key=value`
//! strings) and the symbol CRCs it was linked against (`__versions`, or
//! `__version_ext_crcs` with `__version_ext_names` under
//! `CONFIG_EXTENDED_MODVERSIONS`), read from the ELF64 little-endian
//! relocatable object the kernel loads; the CRCs a module exports (its
//! `__crc_*` symbols); and `Module.symvers`, the CRCs a module tree exports.

use std::collections::BTreeMap;

/// Bytes of one `struct modversion_info` on 64-bit: `unsigned long crc`, `char name[56]`.
const MODVERSION_INFO: usize = 64;

/// A malformed module file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfError(pub String);

impl std::fmt::Display for ElfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(msg: impl Into<String>) -> ElfError {
    ElfError(msg.into())
}

fn u16_at(b: &[u8], off: usize) -> Result<u16, ElfError> {
    b.get(off..off + 2)
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at 0x{off:x}")))
}

fn u32_at(b: &[u8], off: usize) -> Result<u32, ElfError> {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at 0x{off:x}")))
}

fn u64_at(b: &[u8], off: usize) -> Result<u64, ElfError> {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at 0x{off:x}")))
}

fn usize_of(v: u64) -> Result<usize, ElfError> {
    usize::try_from(v).map_err(|_| bad("offset out of range"))
}

/// The named sections of an ELF64 little-endian file.
#[derive(Debug)]
pub struct Sections<'a> {
    /// `(name, contents)` in file order.
    list: Vec<(String, &'a [u8])>,
}

impl<'a> Sections<'a> {
    /// Reads the section table; `Err` says what is wrong with the file.
    pub fn parse(b: &'a [u8]) -> Result<Sections<'a>, ElfError> {
        if b.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err(bad("not an ELF file"));
        }
        if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
            return Err(bad("not ELF64 little-endian"));
        }
        let shoff = usize_of(u64_at(b, 0x28)?)?;
        let shentsize = usize::from(u16_at(b, 0x3a)?);
        let shnum = usize::from(u16_at(b, 0x3c)?);
        let shstrndx = usize::from(u16_at(b, 0x3e)?);
        if shentsize < 0x40 || shstrndx >= shnum {
            return Err(bad("bad section header table"));
        }
        let header = |i: usize| -> Result<(u32, &'a [u8]), ElfError> {
            let h = shoff + i * shentsize;
            let (name, kind) = (u32_at(b, h)?, u32_at(b, h + 4)?);
            let (off, size) = (
                usize_of(u64_at(b, h + 0x18)?)?,
                usize_of(u64_at(b, h + 0x20)?)?,
            );
            // SHT_NOBITS (8) occupies no file bytes.
            let data = if kind == 8 {
                &[][..]
            } else {
                off.checked_add(size)
                    .and_then(|end| b.get(off..end))
                    .ok_or_else(|| bad(format!("section {i} lies outside the file")))?
            };
            Ok((name, data))
        };
        let (_, names) = header(shstrndx)?;
        let mut list = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let (name, data) = header(i)?;
            list.push((cstr(names, usize_of(u64::from(name))?), data));
        }
        Ok(Sections { list })
    }

    /// The contents of the first section called `name`.
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.list.iter().find(|(n, _)| n == name).map(|(_, d)| *d)
    }

    /// The contents of the section with header index `i`.
    fn at(&self, i: usize) -> Option<&'a [u8]> {
        self.list.get(i).map(|(_, d)| *d)
    }
}

/// Bytes of one `Elf64_Sym`.
const SYM: usize = 24;
/// `SHN_ABS`: a symbol whose value is absolute.
const SHN_ABS: u16 = 0xfff1;

/// The CRCs a module exports, by symbol: its `__crc_<symbol>` symbols. Before
/// Linux 5.19 each is absolute, its value the CRC; since, each points at the
/// CRC, a 32-bit word in `__kcrctab` or `__kcrctab_gpl`
/// (`include/linux/export-internal.h`, `SYMBOL_CRC`). Empty without MODVERSIONS.
pub fn exports(s: &Sections<'_>) -> Result<BTreeMap<String, u32>, ElfError> {
    let mut out = BTreeMap::new();
    let (Some(symtab), Some(strtab)) = (s.get(".symtab"), s.get(".strtab")) else {
        return Ok(out);
    };
    for sym in symtab.chunks_exact(SYM) {
        let name = cstr(strtab, usize_of(u64::from(u32_at(sym, 0)?))?);
        let Some(exported) = name.strip_prefix("__crc_") else {
            continue;
        };
        let (shndx, value) = (u16_at(sym, 6)?, u64_at(sym, 8)?);
        let crc = if shndx == SHN_ABS {
            // CAST: the CRC is the low 32 bits of the absolute value.
            value as u32
        } else {
            let table = s.at(usize::from(shndx)).ok_or_else(|| {
                bad(format!(
                    "{name} is in section {shndx}, which does not exist"
                ))
            })?;
            u32_at(table, usize_of(value)?)?
        };
        out.insert(exported.to_string(), crc);
    }
    Ok(out)
}

/// The NUL-terminated string at `off`.
fn cstr(b: &[u8], off: usize) -> String {
    let tail = b.get(off..).unwrap_or(&[]);
    let end = tail.iter().position(|&c| c == 0).unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

/// `key=value` pairs of a `.modinfo` section, in order.
pub fn modinfo(section: &[u8]) -> Vec<(String, String)> {
    section
        .split(|&c| c == 0)
        .filter_map(|s| {
            let s = String::from_utf8_lossy(s);
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// The CRCs a module was linked against, by symbol.
pub fn versions(s: &Sections<'_>) -> Result<BTreeMap<String, u32>, ElfError> {
    let mut out = BTreeMap::new();
    if let (Some(crcs), Some(names)) = (s.get("__version_ext_crcs"), s.get("__version_ext_names")) {
        let names: Vec<&[u8]> = names.split(|&c| c == 0).filter(|n| !n.is_empty()).collect();
        if crcs.len() != names.len() * 4 {
            return Err(bad(format!(
                "__version_ext_crcs holds {} bytes for {} names",
                crcs.len(),
                names.len()
            )));
        }
        for (i, name) in names.iter().enumerate() {
            out.insert(
                String::from_utf8_lossy(name).into_owned(),
                u32_at(crcs, i * 4)?,
            );
        }
        return Ok(out);
    }
    let Some(table) = s.get("__versions") else {
        return Ok(out);
    };
    if table.len() % MODVERSION_INFO != 0 {
        return Err(bad(format!(
            "__versions is {} bytes, not a multiple of {MODVERSION_INFO}",
            table.len()
        )));
    }
    for entry in table.chunks(MODVERSION_INFO) {
        // CAST: the kernel stores the CRC in an unsigned long; only 32 bits are used.
        let crc = u64_at(entry, 0)? as u32;
        out.insert(cstr(entry, 8), crc);
    }
    Ok(out)
}

/// One line of `Module.symvers`: `0xCRC<TAB>symbol<TAB>module<TAB>export[<TAB>namespace]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The CRC.
    pub crc: u32,
    /// The module exporting it (`vmlinux`, or a path without `.ko`).
    pub module: String,
}

/// Parses `Module.symvers`; lines that do not parse are returned apart.
pub fn parse_symvers(text: &str) -> (BTreeMap<String, Export>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut bad_lines = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let crc = f.first().and_then(|c| {
            let c = c.trim();
            u32::from_str_radix(c.strip_prefix("0x").unwrap_or(c), 16).ok()
        });
        match (crc, f.get(1), f.get(2)) {
            (Some(crc), Some(sym), Some(module)) if !sym.is_empty() => {
                out.insert(
                    sym.to_string(),
                    Export {
                        crc,
                        module: module.to_string(),
                    },
                );
            }
            _ => bad_lines.push(line.to_string()),
        }
    }
    (out, bad_lines)
}

/// A minimal ELF64 module file: the named sections with their bytes
/// (for tests and fixtures; the inverse of [`Sections::parse`]).
pub fn build(sections: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut names = vec![0u8];
    let mut name_off = Vec::new();
    for (n, _) in sections
        .iter()
        .map(|(n, d)| (*n, d))
        .chain([(".shstrtab", &Vec::new())])
    {
        name_off.push(names.len());
        names.extend_from_slice(n.as_bytes());
        names.push(0);
    }
    let mut data: Vec<&[u8]> = sections.iter().map(|(_, d)| d.as_slice()).collect();
    data.push(&names);
    let mut out = vec![0u8; 0x40];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2;
    out[5] = 1;
    out[6] = 1;
    out[0x10] = 1; // ET_REL
    out[0x12] = 0x3e; // x86-64
    let mut placed = Vec::new();
    for d in &data {
        placed.push(out.len());
        out.extend_from_slice(d);
    }
    while out.len() % 8 != 0 {
        out.push(0);
    }
    let shoff = out.len();
    out.extend_from_slice(&[0u8; 0x40]);
    for (i, d) in data.iter().enumerate() {
        let mut h = [0u8; 0x40];
        // CAST: fixture sizes are far below 4 GiB.
        h[..4].copy_from_slice(&(name_off[i] as u32).to_le_bytes());
        let kind: u32 = if i + 1 == data.len() { 3 } else { 1 };
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&(placed[i] as u64).to_le_bytes());
        h[0x20..0x28].copy_from_slice(&(d.len() as u64).to_le_bytes());
        out.extend_from_slice(&h);
    }
    out[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
    out[0x34..0x36].copy_from_slice(&0x40u16.to_le_bytes());
    out[0x3a..0x3c].copy_from_slice(&0x40u16.to_le_bytes());
    // CAST: a handful of sections.
    let shnum = (data.len() + 1) as u16;
    out[0x3c..0x3e].copy_from_slice(&shnum.to_le_bytes());
    out[0x3e..0x40].copy_from_slice(&(shnum - 1).to_le_bytes());
    out
}

/// The sections that export `entries` with their CRCs, for [`build`]: a
/// `__kcrctab` and the `__crc_*` symbols pointing into it (`.symtab`,
/// `.strtab`), as Linux 5.19 on lays them out. `index` is the header index
/// `__kcrctab` will have: the number of sections before it, plus one.
pub fn exports_sections(entries: &[(&str, u32)], index: u16) -> Vec<(&'static str, Vec<u8>)> {
    let mut kcrctab = Vec::new();
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; SYM];
    for (name, crc) in entries {
        let mut sym = [0u8; SYM];
        // CAST: fixture tables are far below 4 GiB.
        sym[..4].copy_from_slice(&(strtab.len() as u32).to_le_bytes());
        sym[4] = 0x11; // STB_GLOBAL, STT_OBJECT
        sym[6..8].copy_from_slice(&index.to_le_bytes());
        sym[8..16].copy_from_slice(&(kcrctab.len() as u64).to_le_bytes());
        sym[16..24].copy_from_slice(&4u64.to_le_bytes());
        symtab.extend_from_slice(&sym);
        strtab.extend_from_slice(format!("__crc_{name}").as_bytes());
        strtab.push(0);
        kcrctab.extend_from_slice(&crc.to_le_bytes());
    }
    vec![
        ("__kcrctab", kcrctab),
        (".strtab", strtab),
        (".symtab", symtab),
    ]
}

/// A `__versions` table for [`build`].
pub fn versions_table(entries: &[(&str, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, crc) in entries {
        let mut e = [0u8; MODVERSION_INFO];
        e[..8].copy_from_slice(&u64::from(*crc).to_le_bytes());
        let n = name.as_bytes();
        let len = n.len().min(MODVERSION_INFO - 9);
        e[8..8 + len].copy_from_slice(&n[..len]);
        out.extend_from_slice(&e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_round_trip() {
        let ko = build(&[
            (
                ".modinfo",
                b"version=1.0.0\0srcversion=ABC123\0author=x\0".to_vec(),
            ),
            (
                "__versions",
                versions_table(&[("nvidia_p2p_get_pages", 0x1234_5678), ("module_layout", 7)]),
            ),
        ]);
        let s = Sections::parse(&ko).expect("parse");
        let info = modinfo(s.get(".modinfo").expect(".modinfo"));
        assert_eq!(info[1], ("srcversion".to_string(), "ABC123".to_string()));
        let v = versions(&s).expect("versions");
        assert_eq!(v.get("nvidia_p2p_get_pages"), Some(&0x1234_5678));
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn exported_crcs() {
        let mut sections = vec![(".modinfo", b"name=nvidia\0".to_vec())];
        sections.extend(exports_sections(
            &[
                ("nvidia_p2p_get_pages", 0x1a2b_3c4d),
                ("nvidia_p2p_put_pages", 7),
            ],
            2,
        ));
        let ko = build(&sections);
        let s = Sections::parse(&ko).expect("parse");
        let e = exports(&s).expect("exports");
        assert_eq!(e.get("nvidia_p2p_get_pages"), Some(&0x1a2b_3c4d));
        assert_eq!(e.get("nvidia_p2p_put_pages"), Some(&7));
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn exported_crcs_absolute() {
        let mut strtab = b"\0__crc_ib_register_peer_memory_client\0".to_vec();
        strtab.extend_from_slice(b"ib_core\0");
        let mut sym = vec![0u8; SYM * 2];
        sym[SYM..SYM + 4].copy_from_slice(&1u32.to_le_bytes());
        sym[SYM + 6..SYM + 8].copy_from_slice(&SHN_ABS.to_le_bytes());
        sym[SYM + 8..SYM + 16].copy_from_slice(&0x4d5e_6f70u64.to_le_bytes());
        let ko = build(&[(".strtab", strtab), (".symtab", sym)]);
        let s = Sections::parse(&ko).expect("parse");
        let e = exports(&s).expect("exports");
        assert_eq!(e.get("ib_register_peer_memory_client"), Some(&0x4d5e_6f70));
    }

    #[test]
    fn exported_crc_outside_its_section() {
        let mut sections = exports_sections(&[("x", 1)], 1);
        sections[0].1.clear();
        let ko = build(&sections);
        let s = Sections::parse(&ko).expect("parse");
        assert!(exports(&s).is_err());
    }

    #[test]
    fn extended_modversions() {
        let ko = build(&[
            (
                "__version_ext_crcs",
                [1u32, 2].iter().flat_map(|c| c.to_le_bytes()).collect(),
            ),
            (
                "__version_ext_names",
                b"a_very_long_rust_symbol_name\0b\0".to_vec(),
            ),
        ]);
        let v = versions(&Sections::parse(&ko).expect("parse")).expect("versions");
        assert_eq!(v.get("a_very_long_rust_symbol_name"), Some(&1));
        assert_eq!(v.get("b"), Some(&2));
    }

    /// Malformed files are errors that say what is wrong, never panics.
    #[test]
    fn malformed() {
        assert_eq!(
            Sections::parse(b"ELF(stand-in)").unwrap_err().0,
            "not an ELF file"
        );
        let mut ko = build(&[("__versions", vec![0; 65])]);
        let s = Sections::parse(&ko).expect("parse");
        assert!(versions(&s).unwrap_err().0.contains("not a multiple of 64"));
        ko.truncate(ko.len() - 0x30);
        assert!(Sections::parse(&ko).unwrap_err().0.contains("truncated"));
        let mut far = build(&[(".modinfo", b"a=b\0".to_vec())]);
        let shoff = usize::try_from(u64_at(&far, 0x28).expect("shoff")).expect("usize");
        far[shoff + 0x40 + 0x18..shoff + 0x40 + 0x20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Sections::parse(&far)
            .unwrap_err()
            .0
            .contains("outside the file"));
    }

    #[test]
    fn symvers() {
        let (m, bad_lines) = parse_symvers(
            "0x1a2b3c4d\tnvidia_p2p_get_pages\t/var/lib/dkms/nvidia/580/build/nvidia\tEXPORT_SYMBOL\t\n\
             0x00000001\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\n\
             garbage line\n",
        );
        assert_eq!(m["nvidia_p2p_get_pages"].crc, 0x1a2b_3c4d);
        assert_eq!(
            m["ib_register_peer_memory_client"].module,
            "drivers/infiniband/core/ib_core"
        );
        assert_eq!(bad_lines, ["garbage line"]);
    }
}
