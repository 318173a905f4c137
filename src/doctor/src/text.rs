// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Words for people: byte counts and lists, as every floor writes them.

/// A byte count for people: `256 MiB`, `64 GiB`, `1.5 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return if n % size == 0 {
                format!("{} {unit}", n / size)
            } else {
                // CAST: display only; precision loss above 2^53 does not matter.
                format!("{:.1} {unit}", n as f64 / size as f64)
            };
        }
    }
    format!("{n} B")
}

/// `a, b and c`.
pub fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Lists up to four names, or counts them (`8 GPUs`).
pub fn few(items: &[String], noun: &str) -> String {
    if items.len() <= 4 {
        list(items)
    } else {
        format!("{} {noun}", items.len())
    }
}

/// `: a, b and c` for up to four names, nothing for more (the detail has them).
pub fn colon_list(items: &[String]) -> String {
    if items.is_empty() || items.len() > 4 {
        String::new()
    } else {
        format!(": {}", list(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(bytes(256 << 20), "256 MiB");
        assert_eq!(bytes(64 << 30), "64 GiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(100), "100 B");
    }

    #[test]
    fn lists() {
        assert_eq!(list(&[]), "");
        assert_eq!(list(&["a".into()]), "a");
        assert_eq!(list(&["a".into(), "b".into(), "c".into()]), "a, b and c");
    }
}
