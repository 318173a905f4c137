// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The kernel log (`/dev/kmsg`), for why a load of the module was refused.
//!
//! Each `read` of `/dev/kmsg` returns one record, `PRI,SEQ,TS,FLAGS;TEXT`,
//! followed by continuation lines that start with a space; it blocks at the
//! end unless opened non-blocking, and fails with `EPIPE` when a record was
//! overwritten before it was read. Without the right to read it
//! (`kernel.dmesg_restrict` and no root) the log is empty here. In a fixture
//! tree, `/dev/kmsg` is a plain file of such records.

use std::io::ErrorKind;

use crate::host::root::Root;
/// `EPIPE`: `/dev/kmsg` skipped records overwritten in the ring buffer.
const EPIPE: i32 = 32;
/// At most this much log is read.
const MAX_BYTES: usize = 16 << 20;

/// The text of each log record, oldest first (empty when unreadable).
pub fn read(root: &Root) -> Vec<String> {
    let Some(mut file) = root.reader("/dev/kmsg") else {
        return Vec::new();
    };
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 8192];
    while raw.len() < MAX_BYTES {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.raw_os_error() == Some(EPIPE) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break, // WouldBlock: the end of the log
        }
    }
    records(&String::from_utf8_lossy(&raw))
}

/// The texts of the records in `raw` (`PRI,SEQ,TS,FLAGS;TEXT` lines).
pub fn records(raw: &str) -> Vec<String> {
    raw.lines()
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_once(';').map(|(_, text)| text.to_string()))
        .collect()
}

/// The symbol of the latest "`module`: disagrees about version of symbol S"
/// record: the kernel refused `module` because its CRC of S is not the one
/// the loaded provider exports (`CONFIG_MODVERSIONS`).
pub fn crc_refusal(log: &[String], module: &str) -> Option<String> {
    let prefix = format!("{module}: disagrees about version of symbol ");
    log.iter().rev().find_map(|text| {
        let sym = text.strip_prefix(&prefix)?.split_whitespace().next()?;
        Some(sym.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_drop_the_prefix_and_continuation_lines() {
        let raw = "6,1,10,-;first line\n SUBSYSTEM=pci\n4,2,20,-;x: y; z\nno separator\n";
        assert_eq!(records(raw), vec!["first line", "x: y; z"]);
    }

    #[test]
    fn the_latest_refusal_wins() {
        let log: Vec<String> = [
            "nvidia_peermem: disagrees about version of symbol nvidia_p2p_put_pages",
            "nvidia_peermem: version 1.0.0 loaded",
            "nvidia_peermem: disagrees about version of symbol nvidia_p2p_get_pages",
            "other: disagrees about version of symbol foo",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            crc_refusal(&log, "nvidia_peermem").as_deref(),
            Some("nvidia_p2p_get_pages")
        );
        assert_eq!(crc_refusal(&log, "mlx5_ib"), None);
        assert_eq!(crc_refusal(&[], "nvidia_peermem"), None);
    }
}
