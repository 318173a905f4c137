// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Decompression for `/proc/config.gz` and compressed modules (`.ko.gz`,
//! `.ko.xz` as Debian's DKMS and kernels install them, `.ko.zst`), through
//! pure-Rust decoders (flate2 with miniz_oxide, lzma-rs, ruzstd): no C
//! library to link, no `zcat` to run. This module keeps the doctor's own
//! limits and errors around them: output beyond [`MAX_OUTPUT`] is refused,
//! and what is wrong with the data is said in words, "truncated" first
//! where it is cut short (gzip).

use std::io::{ErrorKind, Read};

use flate2::read::GzDecoder;

/// What can be wrong with compressed data.
pub type Error = String;

/// Output beyond this is refused (a kernel config is ~300 KiB).
pub const MAX_OUTPUT: usize = 64 << 20;

/// A module beyond this is refused (NVIDIA's `nvidia.ko` is 88 MB: Debian's
/// 550.163.01, `nvidia-current.ko.xz` unpacked).
pub const MAX_MODULE: usize = 512 << 20;

/// Whether `data` starts like a gzip file.
pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&[0x1f, 0x8b])
}

/// Decompresses the first member of a gzip file; flate2 checks its CRC and size.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, Error> {
    gunzip_limited(data, MAX_OUTPUT)
}

/// [`gunzip`] with output beyond `limit` bytes refused.
fn gunzip_limited(data: &[u8], limit: usize) -> Result<Vec<u8>, Error> {
    if data.len() >= 3 && !is_gzip(data) {
        return Err(format!(
            "not gzip data (starts {:02x} {:02x} {:02x})",
            data[0], data[1], data[2]
        ));
    }
    let mut out = Vec::new();
    // One byte past the limit tells a stream that ends there from a longer one.
    let take = u64::try_from(limit).map_or(u64::MAX, |n| n.saturating_add(1));
    GzDecoder::new(data)
        .take(take)
        .read_to_end(&mut out)
        .map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => format!("truncated: {e}"),
            _ => e.to_string(),
        })?;
    if out.len() > limit {
        return Err(if limit % (1 << 20) == 0 {
            format!("larger than {} MiB", limit >> 20)
        } else {
            format!("larger than {limit} bytes")
        });
    }
    Ok(out)
}

/// Refuses output beyond `limit`: one byte past it tells a stream that ends
/// there from a longer one.
fn within(out: Vec<u8>, limit: usize) -> Result<Vec<u8>, Error> {
    if out.len() > limit {
        return Err(format!("larger than {} MiB", limit >> 20));
    }
    Ok(out)
}

/// Decompresses an xz file (lzma-rs checks its CRC).
pub fn unxz(data: &[u8]) -> Result<Vec<u8>, Error> {
    unxz_limited(data, MAX_OUTPUT)
}

/// [`unxz`] with output beyond `limit` bytes refused.
fn unxz_limited(data: &[u8], limit: usize) -> Result<Vec<u8>, Error> {
    /// A `Write` that stops one byte past the limit.
    struct Capped(Vec<u8>, usize);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() > self.1 {
                return Err(std::io::Error::other("output limit"));
            }
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new(), limit);
    lzma_rs::xz_decompress(&mut &data[..], &mut out).map_err(|e| {
        if out.0.len() > limit {
            format!("larger than {} MiB", limit >> 20)
        } else {
            format!("not a whole xz file: {e}")
        }
    })?;
    within(out.0, limit)
}

/// Decompresses a zstd file.
pub fn unzstd(data: &[u8]) -> Result<Vec<u8>, Error> {
    unzstd_limited(data, MAX_OUTPUT)
}

/// [`unzstd`] with output beyond `limit` bytes refused.
fn unzstd_limited(data: &[u8], limit: usize) -> Result<Vec<u8>, Error> {
    let mut decoder =
        ruzstd::StreamingDecoder::new(data).map_err(|e| format!("not a zstd file: {e}"))?;
    let mut out = Vec::new();
    let take = u64::try_from(limit).map_or(u64::MAX, |n| n.saturating_add(1));
    (&mut decoder)
        .take(take)
        .read_to_end(&mut out)
        .map_err(|e| format!("not a whole zstd file: {e}"))?;
    within(out, limit)
}

/// A module file's ELF bytes, by its name: `.ko` as it is, `.ko.gz`,
/// `.ko.xz` and `.ko.zst` decompressed (up to [`MAX_MODULE`]).
pub fn module(path: &str, data: Vec<u8>) -> Result<Vec<u8>, Error> {
    match path.rsplit_once(".ko") {
        Some((_, "")) => Ok(data),
        Some((_, ".gz")) => gunzip_limited(&data, MAX_MODULE),
        Some((_, ".xz")) => unxz_limited(&data, MAX_MODULE),
        Some((_, ".zst")) => unzstd_limited(&data, MAX_MODULE),
        _ => Err(format!("{path}: not a module file name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `CONFIG_RUST=y\n`, `xz` with its default CRC-64 check.
    const XZ: [u8; 72] = [
        0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46, 0x02, 0x00, 0x21,
        0x01, 0x16, 0x00, 0x00, 0x00, 0x74, 0x2f, 0xe5, 0xa3, 0x01, 0x00, 0x0d, 0x43, 0x4f, 0x4e,
        0x46, 0x49, 0x47, 0x5f, 0x52, 0x55, 0x53, 0x54, 0x3d, 0x79, 0x0a, 0x00, 0x00, 0x00, 0x3e,
        0xad, 0x33, 0x5e, 0x16, 0x6b, 0x12, 0x16, 0x00, 0x01, 0x26, 0x0e, 0x08, 0x1b, 0xe0, 0x04,
        0x1f, 0xb6, 0xf3, 0x7d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x59, 0x5a,
    ];

    /// `CONFIG_RUST=y\n`, `zstd` at its default level.
    const ZST: [u8; 27] = [
        0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x0e, 0x71, 0x00, 0x00, 0x43, 0x4f, 0x4e, 0x46, 0x49, 0x47,
        0x5f, 0x52, 0x55, 0x53, 0x54, 0x3d, 0x79, 0x0a, 0x94, 0x39, 0xfd, 0xbc,
    ];

    #[test]
    fn xz_and_zstd() {
        assert_eq!(unxz(&XZ).as_deref(), Ok(&b"CONFIG_RUST=y\n"[..]));
        assert_eq!(unzstd(&ZST).as_deref(), Ok(&b"CONFIG_RUST=y\n"[..]));
        assert_eq!(
            module("a/b.ko.xz", XZ.to_vec()).as_deref(),
            Ok(&b"CONFIG_RUST=y\n"[..])
        );
        assert_eq!(
            module("b.ko.zst", ZST.to_vec()).as_deref(),
            Ok(&b"CONFIG_RUST=y\n"[..])
        );
        assert_eq!(module("b.ko", b"x".to_vec()).as_deref(), Ok(&b"x"[..]));
        assert!(module("b.ko.bz2", b"x".to_vec()).is_err());
    }

    /// Cut or damaged files are errors, never a panic.
    #[test]
    fn xz_and_zstd_limits() {
        assert_eq!(unxz_limited(&XZ, 13).unwrap_err(), "larger than 0 MiB");
        assert_eq!(unzstd_limited(&ZST, 13).unwrap_err(), "larger than 0 MiB");
        assert!(unxz_limited(&XZ, 14).is_ok() && unzstd_limited(&ZST, 14).is_ok());
    }

    #[test]
    fn xz_and_zstd_damaged() {
        for cut in 0..XZ.len() {
            assert!(unxz(&XZ[..cut]).is_err(), "xz cut at {cut}");
        }
        for cut in 0..ZST.len() - 4 {
            assert!(unzstd(&ZST[..cut]).is_err(), "zstd cut at {cut}");
        }
        let mut bad = XZ;
        bad[30] ^= 0xff;
        assert!(unxz(&bad).is_err());
        assert!(unzstd(&FIXED).is_err() && unxz(&FIXED).is_err());
    }

    /// `hello, hello, hello\n`, one fixed-Huffman block (gzip -9).
    const FIXED: [u8; 30] = [
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9,
        0xd7, 0x51, 0xc8, 0x40, 0xa2, 0xb8, 0x00, 0xe7, 0x42, 0x6e, 0x52, 0x14, 0x00, 0x00, 0x00,
    ];

    /// `CONFIG_RUST=y\n`, one stored block (level 0).
    const STORED: [u8; 37] = [
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x03, 0x01, 0x0e, 0x00, 0xf1, 0xff,
        0x43, 0x4f, 0x4e, 0x46, 0x49, 0x47, 0x5f, 0x52, 0x55, 0x53, 0x54, 0x3d, 0x79, 0x0a, 0xa9,
        0xea, 0x25, 0x24, 0x0e, 0x00, 0x00, 0x00,
    ];

    /// `CONFIG_X=y\n` with the file name `config` in the header.
    const NAMED: [u8; 38] = [
        0x1f, 0x8b, 0x08, 0x08, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x63, 0x6f, 0x6e, 0x66, 0x69,
        0x67, 0x00, 0x73, 0xf6, 0xf7, 0x73, 0xf3, 0x74, 0x8f, 0x8f, 0xb0, 0xad, 0xe4, 0x02, 0x00,
        0x9b, 0xa9, 0x91, 0xf7, 0x0b, 0x00, 0x00, 0x00,
    ];

    /// The real `/proc/config.gz` of the H100 VM (dynamic blocks).
    const H100_CONFIG: &[u8] = include_bytes!("../../../../tests/fixtures/h100-vm/config.gz");

    #[test]
    fn block_types() {
        assert_eq!(gunzip(&FIXED).as_deref(), Ok(&b"hello, hello, hello\n"[..]));
        assert_eq!(gunzip(&STORED).as_deref(), Ok(&b"CONFIG_RUST=y\n"[..]));
        assert_eq!(gunzip(&NAMED).as_deref(), Ok(&b"CONFIG_X=y\n"[..]));
        assert!(is_gzip(&FIXED) && !is_gzip(b"CONFIG_RUST=y"));
    }

    #[test]
    fn a_real_kernel_config() {
        let text = gunzip(H100_CONFIG).expect("the H100 VM's config.gz");
        assert_eq!(text.len(), 109_057);
        let text = String::from_utf8(text).expect("text");
        assert!(text.starts_with("#\n# Automatically generated file; DO NOT EDIT.\n"));
        assert!(text.contains("\nCONFIG_MODULE_SIG_FORCE=y\n"));
        assert!(text.contains("\nCONFIG_RUSTC_VERSION=0\n"));
    }

    /// Every cut of a file is an error that says so, never a panic.
    #[test]
    fn truncated() {
        for sample in [&FIXED[..], &STORED, &NAMED] {
            for cut in 0..sample.len() {
                let err = gunzip(&sample[..cut]).expect_err("a truncated file");
                assert!(err.starts_with("truncated"), "cut at {cut}: {err}");
            }
        }
        let step = H100_CONFIG.len() / 7;
        for cut in (0..H100_CONFIG.len()).step_by(step) {
            assert!(gunzip(&H100_CONFIG[..cut]).is_err(), "cut at {cut}");
        }
        let err = gunzip(&H100_CONFIG[..H100_CONFIG.len() - 4]).expect_err("no size");
        assert_eq!(err, "truncated: unexpected end of file");
        let err = gunzip(&FIXED[..15]).expect_err("half a block");
        assert_eq!(err, "truncated: incomplete deflate stream");
    }

    /// A damaged byte gives an error, never a panic, and never other data:
    /// what the decoder cannot catch the CRC does (header fields such as the
    /// time and padding bits may change unnoticed).
    #[test]
    fn damaged() {
        for sample in [&FIXED[..], &STORED, &NAMED] {
            let good = gunzip(sample).expect("the sample");
            for at in 0..sample.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut bad = sample.to_vec();
                    bad[at] ^= flip;
                    if let Ok(out) = gunzip(&bad) {
                        assert_eq!(out, good, "byte {at} ^ {flip:x}");
                    }
                }
            }
        }
        let mut bad_crc = FIXED;
        bad_crc[22] ^= 1;
        assert_eq!(
            gunzip(&bad_crc),
            Err("corrupt gzip stream does not have a matching checksum".to_string())
        );
        // The size in the trailer is checked too.
        let mut bad_size = FIXED;
        bad_size[26] ^= 1;
        assert_eq!(
            gunzip(&bad_size),
            Err("corrupt gzip stream does not have a matching checksum".to_string())
        );
    }

    #[test]
    fn not_deflate() {
        assert_eq!(
            gunzip(b"CONFIG_RUST=y\nCONFIG_MODULES=y\n"),
            Err("not gzip data (starts 43 4f 4e)".to_string())
        );
        // Block type 3 does not exist.
        let mut bad = FIXED;
        bad[10] = 0x07;
        assert_eq!(gunzip(&bad), Err("corrupt deflate stream".to_string()));
        // A stored block whose length and complement disagree.
        let mut bad = STORED;
        bad[13] = 0;
        assert_eq!(gunzip(&bad), Err("corrupt deflate stream".to_string()));
        // Reserved header flags, and a method other than deflate.
        for (at, value) in [(3, 0xe0), (2, 9)] {
            let mut bad = FIXED;
            bad[at] = value;
            assert_eq!(gunzip(&bad), Err("invalid gzip header".to_string()));
        }
    }

    /// Only the first member is read: what follows it is not output.
    #[test]
    fn first_member_only() {
        let mut two = FIXED.to_vec();
        two.extend_from_slice(&STORED);
        assert_eq!(gunzip(&two).as_deref(), Ok(&b"hello, hello, hello\n"[..]));
    }

    /// Output up to the limit is given, one byte more is refused.
    #[test]
    fn output_limit() {
        let config = gunzip(H100_CONFIG).expect("the H100 VM's config.gz");
        assert_eq!(gunzip_limited(H100_CONFIG, config.len()), Ok(config));
        assert_eq!(
            gunzip_limited(H100_CONFIG, 109_056),
            Err("larger than 109056 bytes".to_string())
        );
        assert_eq!(
            gunzip_limited(H100_CONFIG, 1 << 16),
            Err("larger than 65536 bytes".to_string())
        );
        assert_eq!(
            gunzip_limited(H100_CONFIG, 1 << 20).map(|t| t.len()),
            Ok(109_057)
        );
        assert_eq!(
            gunzip_limited(&FIXED, 19),
            Err("larger than 19 bytes".to_string())
        );
    }
}
