// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Parsing of command-line values and of what the simulators print.

use std::collections::BTreeMap;

/// Parses a number: decimal, or hexadecimal with `0x`.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| format!("'{s}' is not a number"))
}

/// Parses a size: a decimal number with an optional `K`, `M`, `G` or `T`
/// suffix (binary units, case-insensitive, optionally followed by `iB` or
/// `B`), or a plain hexadecimal number with `0x`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("'{s}' is not a size (e.g. 65536, 0x10000, 64K, 2M, 1G)");
    if s.starts_with("0x") || s.starts_with("0X") {
        return parse_u64(s).map_err(|_| bad());
    }
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let shift = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => 10,
        Some('M') => 20,
        Some('G') => 30,
        Some('T') => 40,
        _ => 0,
    };
    let digits = if shift > 0 { &s[..s.len() - 1] } else { s };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift).ok_or_else(bad)
}

/// Linux errno names, as the kernel numbers them on x86-64.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("ENODEV", 19),
    ("EINVAL", 22),
    ("ENOSPC", 28),
    ("ERANGE", 34),
    ("EDEADLK", 35),
    ("ENOSYS", 38),
    ("EPROTO", 71),
    ("EOPNOTSUPP", 95),
    ("ETIMEDOUT", 110),
    ("ENOTSUPP", 524),
];

/// Parses an errno given as a name (`ENOMEM`, `-ENOMEM`) or number (`12`,
/// `-12`); returns it positive.
pub fn parse_errno(s: &str) -> Result<i32, String> {
    let s2 = s.strip_prefix('-').unwrap_or(s);
    let n = ERRNOS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s2))
        .map(|&(_, n)| n)
        .or_else(|| s2.parse().ok())
        .filter(|&n| n > 0 && n < 4096);
    n.ok_or_else(|| format!("'{s}' is not an errno (e.g. ENOMEM, EIO, 12)"))
}

/// The name of a (positive) errno, or its number.
pub fn errno_name(n: i32) -> String {
    ERRNOS
        .iter()
        .find(|&&(_, v)| v == n)
        .map_or_else(|| n.to_string(), |(name, _)| (*name).to_string())
}

/// Parses `name value` lines (the counters files) into a map.
pub fn parse_counters(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|line| {
            let (k, v) = line.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// An MR as the core simulator's `show` command describes it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MrInfo {
    /// Every `key value` line except the SGEs, in order.
    pub fields: Vec<(String, String)>,
    /// The SG list: (DMA address, length).
    pub sges: Vec<(u64, u64)>,
}

impl MrInfo {
    /// Parses the reply of `show ID`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut mr = MrInfo::default();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            if key == "sge" {
                let (addr, len) = value
                    .split_once(' ')
                    .ok_or_else(|| format!("bad SGE line '{line}'"))?;
                mr.sges.push((parse_u64(addr)?, parse_u64(len)?));
            } else {
                mr.fields.push((key.to_string(), value.to_string()));
            }
        }
        Ok(mr)
    }

    /// A field's text.
    pub fn get(&self, key: &str) -> Result<&str, String> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("the MR has no field '{key}'"))
    }

    /// A numeric field.
    pub fn num(&self, key: &str) -> Result<u64, String> {
        parse_u64(self.get(key)?)
    }
}

/// Parses lines of two numbers (`pages`: VA BUS) into a map.
pub fn parse_pairs(text: &str) -> Result<BTreeMap<u64, u64>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (a, b) = line
                .split_once(' ')
                .ok_or_else(|| format!("bad line '{line}'"))?;
            Ok((parse_u64(a)?, parse_u64(b.trim())?))
        })
        .collect()
}

/// Parses `devices` lines (PCI_NAME DMA_OFFSET) into a map.
pub fn parse_devices(text: &str) -> Result<BTreeMap<String, u64>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (name, off) = line
                .split_once(' ')
                .ok_or_else(|| format!("bad line '{line}'"))?;
            Ok((name.to_string(), parse_u64(off.trim())?))
        })
        .collect()
}

/// The size of the buffer at @va in the GPU simulator's `buffers` view.
pub fn buffer_size(buffers: &str, va: u64) -> Result<u64, String> {
    buffers
        .lines()
        .find_map(|line| {
            let mut words = line.split(' ');
            let v = parse_u64(words.next()?).ok()?;
            (v == va).then(|| parse_u64(words.next()?).ok())?
        })
        .ok_or_else(|| format!("no GPU buffer at {va:#x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("123"), Ok(123));
        assert_eq!(parse_u64("0x7f4000000000"), Ok(0x7f40_0000_0000));
        assert_eq!(parse_u64("0XfF"), Ok(255));
        assert!(parse_u64("").is_err());
        assert!(parse_u64("12k").is_err());
        assert!(parse_u64("-1").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GB"), Ok(1 << 30));
        assert_eq!(parse_size("0x10000"), Ok(0x10000));
        assert_eq!(parse_size("0x1B"), Ok(0x1b), "hex digits are not suffixes");
        assert!(parse_size("M").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn errnos() {
        assert_eq!(parse_errno("ENOMEM"), Ok(12));
        assert_eq!(parse_errno("-ENOMEM"), Ok(12));
        assert_eq!(parse_errno("enotsupp"), Ok(524));
        assert_eq!(parse_errno("-5"), Ok(5));
        assert_eq!(parse_errno("22"), Ok(22));
        assert!(parse_errno("0").is_err());
        assert!(parse_errno("ENOPE").is_err());
        assert!(parse_errno("5000").is_err());
        assert_eq!(errno_name(12), "ENOMEM");
        assert_eq!(errno_name(4000), "4000");
    }

    #[test]
    fn counters() {
        let c = parse_counters("calls.get_pages 3\nviolations 0\nbroken\nx y\n");
        assert_eq!(c.get("calls.get_pages"), Some(&3));
        assert_eq!(c.get("violations"), Some(&0));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn mr_info() {
        let mr = MrInfo::parse(
            "id 3\nva 0x7f4000010000\nclient nv_mem\nsge 0x1000 4096\nsge 0x3000 8192\n",
        )
        .unwrap();
        assert_eq!(mr.num("id"), Ok(3));
        assert_eq!(mr.num("va"), Ok(0x7f40_0001_0000));
        assert_eq!(mr.get("client"), Ok("nv_mem"));
        assert_eq!(mr.sges, vec![(0x1000, 4096), (0x3000, 8192)]);
        assert!(mr.get("nope").is_err());
        assert!(MrInfo::parse("sge 0x1000\n").is_err());
    }

    #[test]
    fn buffers() {
        let b = "0x7f4000000000 1048576 contiguous allocated 0\n0x7f4000110000 65536 shuffled freed 1\n";
        assert_eq!(buffer_size(b, 0x7f40_0011_0000), Ok(65536));
        assert!(buffer_size(b, 0x7f40_0000_1000).is_err());
    }

    #[test]
    fn pairs_and_devices() {
        let p = parse_pairs("0x10 0x20\n0x30 0x40\n").unwrap();
        assert_eq!(p.get(&0x30), Some(&0x40));
        assert!(parse_pairs("0x10\n").is_err());
        let d = parse_devices("0000:00:00.0 0x100000000000\n").unwrap();
        assert_eq!(d.get("0000:00:00.0"), Some(&0x1000_0000_0000));
    }
}
