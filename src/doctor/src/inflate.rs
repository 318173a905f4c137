// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! gzip (RFC 1952) and DEFLATE (RFC 1951) decoding, for `/proc/config.gz`
//! and `.ko.gz` modules: the doctor has no crate dependencies and runs no
//! `zcat`. Canonical Huffman codes are decoded bit by bit, as zlib's
//! `puff.c` does: slow next to zlib, quick enough for a kernel config.

/// What can be wrong with compressed data.
pub type Error = String;

/// Output beyond this is refused (a kernel config is ~300 KiB, a module a few MiB).
pub const MAX_OUTPUT: usize = 64 << 20;

/// The gzip magic bytes and the only compression method (deflate).
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 8];

/// gzip header flags.
const FHCRC: u8 = 2;
const FEXTRA: u8 = 4;
const FNAME: u8 = 8;
const FCOMMENT: u8 = 16;
const RESERVED: u8 = 0xe0;

/// Whether `data` starts like a gzip file.
pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&GZIP_MAGIC[..2])
}

/// Decompresses the first member of a gzip file and checks its CRC and size.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, Error> {
    let body = skip_header(data)?;
    let mut bits = Bits::new(body);
    let out = inflate(&mut bits)?;
    let trailer = bits.rest();
    let word = |at: usize| {
        trailer
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "truncated: the gzip trailer is missing".to_string())
    };
    let (crc, size) = (word(0)?, word(4)?);
    if crc != crc32(&out) {
        return Err(format!(
            "CRC mismatch (stored {crc:08x}, data {:08x})",
            crc32(&out)
        ));
    }
    // ISIZE is the size modulo 2^32; the output is far smaller.
    if u32::try_from(out.len()).ok() != Some(size) {
        return Err(format!("size mismatch (stored {size}, data {})", out.len()));
    }
    Ok(out)
}

/// The deflate stream after a gzip header.
fn skip_header(data: &[u8]) -> Result<&[u8], Error> {
    if data.len() < 10 {
        return Err(format!(
            "truncated: {} bytes, shorter than a gzip header",
            data.len()
        ));
    }
    if data[..3] != GZIP_MAGIC {
        return Err(format!(
            "not gzip data (starts {:02x} {:02x} {:02x})",
            data[0], data[1], data[2]
        ));
    }
    let flags = data[3];
    if flags & RESERVED != 0 {
        return Err(format!("reserved gzip header flags 0x{flags:02x}"));
    }
    let mut at = 10;
    let truncated = || "truncated gzip header".to_string();
    if flags & FEXTRA != 0 {
        let len = data.get(at..at + 2).ok_or_else(truncated)?;
        at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let end = data
                .get(at..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .ok_or_else(truncated)?;
            at += end + 1;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    data.get(at..).ok_or_else(truncated)
}

/// Reads bits least significant first, as DEFLATE packs them.
struct Bits<'a> {
    data: &'a [u8],
    /// The next byte to load.
    pos: usize,
    /// Bits loaded but not used, the next one lowest.
    buf: u32,
    /// How many bits `buf` holds.
    count: u32,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Bits<'a> {
        Bits {
            data,
            pos: 0,
            buf: 0,
            count: 0,
        }
    }

    /// The next `n` bits (at most 16) as a number.
    fn take(&mut self, n: u32) -> Result<usize, Error> {
        while self.count < n {
            let byte = *self
                .data
                .get(self.pos)
                .ok_or_else(|| "truncated deflate data".to_string())?;
            self.buf |= u32::from(byte) << self.count;
            self.pos += 1;
            self.count += 8;
        }
        // CAST: at most 16 bits.
        let value = (self.buf & ((1 << n) - 1)) as usize;
        self.buf >>= n;
        self.count -= n;
        Ok(value)
    }

    /// Drops the bits left in the current byte.
    fn align(&mut self) {
        self.buf = 0;
        self.count = 0;
    }

    /// The bytes not read yet (after [`Bits::align`]).
    fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    /// Takes `n` whole bytes (after [`Bits::align`]).
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let chunk = self
            .data
            .get(self.pos..self.pos + n)
            .ok_or_else(|| "truncated stored block".to_string())?;
        self.pos += n;
        Ok(chunk)
    }
}

/// Longest DEFLATE code.
const MAX_BITS: usize = 15;

/// A canonical Huffman code: how many codes of each length, and the
/// symbols in code order.
struct Huffman {
    counts: [u16; MAX_BITS + 1],
    symbols: Vec<u16>,
}

impl Huffman {
    /// The code for these code lengths (0: symbol unused).
    fn new(lengths: &[u8]) -> Result<Huffman, Error> {
        let mut counts = [0u16; MAX_BITS + 1];
        for &len in lengths {
            counts[usize::from(len)] += 1;
        }
        counts[0] = 0;
        // More codes of a length than the shorter ones leave room for.
        let mut left: i32 = 1;
        for &count in &counts[1..] {
            left = 2 * left - i32::from(count);
            if left < 0 {
                return Err("over-subscribed Huffman code lengths".to_string());
            }
        }
        let mut offsets = [0usize; MAX_BITS + 2];
        for len in 1..=MAX_BITS {
            offsets[len + 1] = offsets[len] + usize::from(counts[len]);
        }
        let mut symbols = vec![0u16; lengths.len()];
        for (symbol, &len) in (0u16..).zip(lengths) {
            if len != 0 {
                symbols[offsets[usize::from(len)]] = symbol;
                offsets[usize::from(len)] += 1;
            }
        }
        Ok(Huffman { counts, symbols })
    }

    /// Reads one symbol.
    fn decode(&self, bits: &mut Bits<'_>) -> Result<u16, Error> {
        // The codes of the current length run from `first`, their symbols
        // from `index`; `code` (the bits so far) is never below `first`.
        let (mut code, mut first, mut index) = (0usize, 0usize, 0usize);
        for &count in &self.counts[1..] {
            code |= bits.take(1)?;
            let count = usize::from(count);
            if code < first + count {
                return Ok(self.symbols[index + code - first]);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err("invalid Huffman code".to_string())
    }
}

/// Base lengths of length symbols 257..285, and their extra bits.
const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// Base distances of distance symbols 0..29, and their extra bits.
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Order of the code length code lengths in a dynamic block header.
const CLEN_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Decodes a whole DEFLATE stream; `bits` is left at the byte after it.
fn inflate(bits: &mut Bits<'_>) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    loop {
        let last = bits.take(1)? == 1;
        match bits.take(2)? {
            0 => stored(bits, &mut out)?,
            1 => {
                let (lit, dist) = fixed_codes()?;
                codes(bits, &lit, &dist, &mut out)?
            }
            2 => {
                let (lit, dist) = dynamic_codes(bits)?;
                codes(bits, &lit, &dist, &mut out)?
            }
            _ => return Err("invalid block type 3".to_string()),
        }
        if last {
            bits.align();
            return Ok(out);
        }
    }
}

/// A stored (uncompressed) block.
fn stored(bits: &mut Bits<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
    bits.align();
    let header = bits.bytes(4)?;
    let len = u16::from_le_bytes([header[0], header[1]]);
    let nlen = u16::from_le_bytes([header[2], header[3]]);
    if len != !nlen {
        return Err("stored block length does not match its complement".to_string());
    }
    let data = bits.bytes(usize::from(len))?;
    grow(out, data.len())?;
    out.extend_from_slice(data);
    Ok(())
}

/// The fixed literal/length and distance codes.
fn fixed_codes() -> Result<(Huffman, Huffman), Error> {
    let mut lengths = [8u8; 288];
    lengths[144..256].fill(9);
    lengths[256..280].fill(7);
    Ok((Huffman::new(&lengths)?, Huffman::new(&[5u8; 30])?))
}

/// The codes of a dynamic block, from its header.
fn dynamic_codes(bits: &mut Bits<'_>) -> Result<(Huffman, Huffman), Error> {
    let nlen = bits.take(5)? + 257;
    let ndist = bits.take(5)? + 1;
    let ncode = bits.take(4)? + 4;
    if nlen > 286 || ndist > 30 {
        return Err("bad counts in a dynamic block header".to_string());
    }
    let mut clens = [0u8; 19];
    for &i in &CLEN_ORDER[..ncode] {
        // CAST: three bits.
        clens[i] = bits.take(3)? as u8;
    }
    let clen_code = Huffman::new(&clens)?;
    let mut lengths = vec![0u8; nlen + ndist];
    let mut i = 0;
    while i < lengths.len() {
        let symbol = clen_code.decode(bits)?;
        let (value, repeat) = match symbol {
            // CAST: 0..=15 just matched.
            0..=15 => (symbol as u8, 1),
            16 if i > 0 => (lengths[i - 1], 3 + bits.take(2)?),
            16 => return Err("length repeat with no length before".to_string()),
            17 => (0, 3 + bits.take(3)?),
            _ => (0, 11 + bits.take(7)?),
        };
        let end = lengths
            .get_mut(i..i + repeat)
            .ok_or_else(|| "code lengths repeat past their end".to_string())?;
        end.fill(value);
        i += repeat;
    }
    if lengths[256] == 0 {
        return Err("no end-of-block code".to_string());
    }
    Ok((
        Huffman::new(&lengths[..nlen])?,
        Huffman::new(&lengths[nlen..])?,
    ))
}

/// The literals and copies of a compressed block, up to its end-of-block code.
fn codes(
    bits: &mut Bits<'_>,
    lit: &Huffman,
    dist: &Huffman,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    loop {
        let symbol = lit.decode(bits)?;
        match symbol {
            0..=255 => {
                grow(out, 1)?;
                // CAST: 0..=255 just matched.
                out.push(symbol as u8);
            }
            256 => return Ok(()),
            _ => {
                let i = usize::from(symbol - 257);
                let (Some(&base), Some(&extra)) = (LENGTH_BASE.get(i), LENGTH_EXTRA.get(i)) else {
                    return Err(format!("invalid length symbol {symbol}"));
                };
                let len = usize::from(base) + bits.take(u32::from(extra))?;
                let d = usize::from(dist.decode(bits)?);
                let (Some(&base), Some(&extra)) = (DIST_BASE.get(d), DIST_EXTRA.get(d)) else {
                    return Err(format!("invalid distance symbol {d}"));
                };
                let back = usize::from(base) + bits.take(u32::from(extra))?;
                copy_back(out, back, len)?;
            }
        }
    }
}

/// Appends `len` bytes copied from `back` bytes before the end (they may overlap).
fn copy_back(out: &mut Vec<u8>, back: usize, len: usize) -> Result<(), Error> {
    let Some(from) = out.len().checked_sub(back) else {
        return Err("a copy reaches before the start of the data".to_string());
    };
    grow(out, len)?;
    for k in from..from + len {
        out.push(out[k]);
    }
    Ok(())
}

/// Refuses output beyond [`MAX_OUTPUT`].
fn grow(out: &[u8], more: usize) -> Result<(), Error> {
    if out.len() + more > MAX_OUTPUT {
        return Err(format!("larger than {} MiB", MAX_OUTPUT >> 20));
    }
    Ok(())
}

/// CRC-32 as gzip computes it (reflected, polynomial 0xedb88320).
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut n = 0;
        while n < 256 {
            // CAST: below 256.
            let mut c = n as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[n] = c;
            n += 1;
        }
        table
    };
    // CAST: the low byte of the running CRC.
    !data
        .iter()
        .fold(!0u32, |c, &b| TABLE[usize::from((c as u8) ^ b)] ^ (c >> 8))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    const H100_CONFIG: &[u8] = include_bytes!("../../../tests/fixtures/h100-vm/config.gz");

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
        assert_eq!(err, "truncated: the gzip trailer is missing");
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
            Err("CRC mismatch (stored 526e42e6, data 526e42e7)".to_string())
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
        assert_eq!(gunzip(&bad), Err("invalid block type 3".to_string()));
        // A stored block whose length and complement disagree.
        let mut bad = STORED;
        bad[13] = 0;
        assert_eq!(
            gunzip(&bad),
            Err("stored block length does not match its complement".to_string())
        );
    }

    #[test]
    fn output_limit() {
        assert!(grow(&[], MAX_OUTPUT).is_ok());
        assert_eq!(
            grow(&[0], MAX_OUTPUT),
            Err("larger than 64 MiB".to_string())
        );
    }

    #[test]
    fn crc() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }
}
