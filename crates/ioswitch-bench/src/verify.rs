//! Block contents that can be checked after the fact (fio's `verify=`).
//!
//! Every written block starts with a 40-byte header — magic `IOSW`, block length, the
//! block's byte offset, the seed of its payload, and a checksum — followed by a payload
//! generated from the seed (or, with `verify_pattern`, that pattern repeated). The checksum
//! (crc32c, md5, crc64, xxhash or sha256) covers the first 24 header bytes and the
//! payload, so a block that was not written, written elsewhere, torn, or altered fails the
//! check, and the error says which. The header has 16 bytes for the digest: sha256's first
//! 16 are kept.
//!
//! `verify=meta` (fio's, a header-only check) writes the same header with a crc32c of its
//! first 24 bytes only: a block not written, written elsewhere or with a damaged header
//! fails, a changed payload does not (as in fio).
//!
//! `verify=pattern` (fio's) writes no header: every byte of the block is the pattern's,
//! repeated from the block's start, and the check compares every byte.

use crate::engine::Rng;
use crate::error::VerifyError;

pub use crate::jobfile::Verify;

/// fio's name of a verify kind.
pub fn name(kind: Verify) -> &'static str {
    match kind {
        Verify::None => "none",
        Verify::Crc32c => "crc32c",
        Verify::Md5 => "md5",
        Verify::Crc64 => "crc64",
        Verify::Xxhash => "xxhash",
        Verify::Sha256 => "sha256",
        Verify::Pattern => "pattern",
        Verify::Meta => "meta",
    }
}

/// Bytes of header at the start of every verified block.
pub const HEADER_LEN: usize = 40;
const MAGIC: u32 = u32::from_le_bytes(*b"IOSW");

fn digest(kind: Verify, block: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    match kind {
        Verify::None | Verify::Pattern => {}
        Verify::Crc64 => {
            let c = crc64_append(crc64_append(0, &block[..24]), &block[HEADER_LEN..]);
            out[..8].copy_from_slice(&c.to_le_bytes());
        }
        Verify::Xxhash => {
            let mut h = xxhash_rust::xxh32::Xxh32::new(1);
            h.update(&block[..24]);
            h.update(&block[HEADER_LEN..]);
            out[..4].copy_from_slice(&h.digest().to_le_bytes());
        }
        Verify::Sha256 => {
            use sha2::Digest;
            let mut h = sha2::Sha256::new();
            h.update(&block[..24]);
            h.update(&block[HEADER_LEN..]);
            out.copy_from_slice(&h.finalize()[..16]);
        }
        Verify::Crc32c => {
            let c = crc32c::crc32c_append(crc32c::crc32c(&block[..24]), &block[HEADER_LEN..]);
            out[..4].copy_from_slice(&c.to_le_bytes());
        }
        // fio's meta: the header's own crc, not the payload's.
        Verify::Meta => out[..4].copy_from_slice(&crc32c::crc32c(&block[..24]).to_le_bytes()),
        Verify::Md5 => {
            use md5::Digest;
            let mut h = md5::Md5::new();
            h.update(&block[..24]);
            h.update(&block[HEADER_LEN..]);
            out.copy_from_slice(&h.finalize());
        }
    }
    out
}

/// Fills `block` (written at byte `offset`) with a header and a payload from `seed`.
pub fn fill(kind: Verify, block: &mut [u8], offset: u64, seed: u64) {
    fill_with(kind, None, block, offset, seed)
}

/// [`fill`] with `verify_pattern`: the payload (with `verify=pattern`, the whole block)
/// is the pattern repeated from the block's start.
pub fn fill_with(kind: Verify, pattern: Option<&[u8]>, block: &mut [u8], offset: u64, seed: u64) {
    match pattern.filter(|p| !p.is_empty()) {
        Some(p) => {
            for (b, x) in block.iter_mut().zip(p.iter().cycle()) {
                *b = *x;
            }
        }
        None => {
            let mut rng = Rng::new(seed);
            let start = HEADER_LEN.min(block.len());
            for chunk in block[start..].chunks_mut(8) {
                let r = rng.next().to_le_bytes();
                chunk.copy_from_slice(&r[..chunk.len()]);
            }
        }
    }
    if kind == Verify::Pattern {
        return;
    }
    block[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    let len = block.len() as u32;
    block[4..8].copy_from_slice(&len.to_le_bytes());
    block[8..16].copy_from_slice(&offset.to_le_bytes());
    block[16..24].copy_from_slice(&seed.to_le_bytes());
    let d = digest(kind, block);
    block[24..40].copy_from_slice(&d);
}

/// fio's `verify_interval` as its `fixup_options` settles it for a job whose blocks
/// have one size: `option` (0: unset) above the write block size is that size (or, in a
/// job that reads, above the read block size, that one); an interval that is 0 or does
/// not divide the write block size is the block size. Each piece of that many bytes of a
/// block has its own header.
pub fn interval(option: u64, bs_write: u64, bs_read: u64, reads: bool) -> u64 {
    let mut vi = option;
    if vi > bs_write {
        vi = bs_write;
    } else if reads && vi > bs_read {
        vi = bs_read;
    }
    if vi == 0 || bs_write % vi != 0 {
        vi = bs_write;
    }
    vi
}

/// [`fill_with`] for each `interval`-byte piece of `block` (at its own offset, with its
/// own seed); an interval of 0, or one not below the block's length, is the block.
/// `verify=pattern` has no header: the pattern fills the block.
pub fn fill_pieces(kind: Verify, pattern: Option<&[u8]>, block: &mut [u8], offset: u64, seed: u64, interval: usize) {
    if interval == 0 || interval >= block.len() || kind == Verify::Pattern {
        return fill_with(kind, pattern, block, offset, seed);
    }
    for (i, piece) in block.chunks_mut(interval).enumerate() {
        fill_with(kind, pattern, piece, offset + (i * interval) as u64, seed.wrapping_add(i as u64));
    }
}

/// [`check_with`] for each piece [`fill_pieces`] wrote; the error comes with the
/// piece's start within the block and its length.
pub fn check_pieces(
    kind: Verify,
    pattern: Option<&[u8]>,
    block: &[u8],
    offset: u64,
    interval: usize,
) -> Result<(), (usize, usize, VerifyError)> {
    if interval == 0 || interval >= block.len() || kind == Verify::Pattern {
        return check_with(kind, pattern, block, offset).map_err(|e| (0, block.len(), e));
    }
    for (i, piece) in block.chunks(interval).enumerate() {
        check_with(kind, pattern, piece, offset + (i * interval) as u64).map_err(|e| (i * interval, piece.len(), e))?;
    }
    Ok(())
}

/// One block's result from [`check_pieces`].
pub type PieceResult = Result<(), (usize, usize, VerifyError)>;

/// fio's `verify_async=N`: [`check_pieces`] for each `(block, offset)`, on `threads`
/// checker threads (0: in the calling thread); the results come in the blocks' order, so
/// the caller reports them as it would have checking one after the other.
pub fn check_pieces_on(
    threads: u32,
    kind: Verify,
    pattern: Option<&[u8]>,
    blocks: &[(&[u8], u64)],
    interval: usize,
) -> Vec<PieceResult> {
    let one = |&(block, offset): &(&[u8], u64)| check_pieces(kind, pattern, block, offset, interval);
    if threads == 0 || blocks.is_empty() {
        return blocks.iter().map(one).collect();
    }
    let n = (threads as usize).min(blocks.len());
    let mut out: Vec<Option<PieceResult>> = (0..blocks.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..n)
            .map(|t| {
                s.spawn(move || {
                    blocks.iter().enumerate().skip(t).step_by(n).map(|(i, b)| (i, one(b))).collect::<Vec<_>>()
                })
            })
            .collect();
        for w in workers {
            // A checker only compares bytes; a panic in it is a bug, passed on as one.
            for (i, r) in w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                out[i] = Some(r);
            }
        }
    });
    out.into_iter().map(|r| r.expect("every block is checked by one checker")).collect()
}

/// Checks a block read back from byte `offset`; says what is wrong when it is.
pub fn check(kind: Verify, block: &[u8], offset: u64) -> Result<(), VerifyError> {
    check_with(kind, None, block, offset)
}

/// [`check`] with `verify_pattern` (needed for `verify=pattern`; with a digest, the
/// digest covers the pattern).
pub fn check_with(kind: Verify, pattern: Option<&[u8]>, block: &[u8], offset: u64) -> Result<(), VerifyError> {
    if kind == Verify::Pattern {
        let p = pattern.filter(|p| !p.is_empty()).unwrap_or(&[0]);
        return match block.iter().zip(p.iter().cycle()).position(|(b, x)| b != x) {
            None => Ok(()),
            Some(at) => Err(VerifyError::Pattern { at, got: block[at], want: p[at % p.len()] }),
        };
    }
    let u32_at = |i: usize| u32::from_le_bytes(block[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(block[i..i + 8].try_into().expect("8 bytes"));
    if block.len() < HEADER_LEN {
        return Err(VerifyError::Short { len: block.len(), header: HEADER_LEN });
    }
    if u32_at(0) != MAGIC {
        return Err(VerifyError::NoHeader { magic: u32_at(0) });
    }
    if u32_at(4) as usize != block.len() {
        return Err(VerifyError::Length { stored: u32_at(4), len: block.len() });
    }
    if u64_at(8) != offset {
        return Err(VerifyError::Offset { stored: u64_at(8), offset });
    }
    let want = digest(kind, block);
    if block[24..40] != want {
        return Err(VerifyError::Digest {
            digest: name(kind),
            stored: hex(&block[24..40], kind),
            computed: hex(&want, kind),
        });
    }
    Ok(())
}

fn hex(b: &[u8], kind: Verify) -> String {
    let n = match kind {
        Verify::Crc32c | Verify::Xxhash | Verify::Meta => 4,
        Verify::Crc64 => 8,
        _ => 16,
    };
    b[..n].iter().map(|x| format!("{x:02x}")).collect()
}

/// fio's CRC-64 table: the Jones polynomial 0xAD93D23594C935A9, reflected.
const CRC64_TABLE: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0x95AC_9329_AC4B_C9B5 } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// `verify_dump`: writes a block that failed its check to files named as fio names them
/// (`verify.c`'s `dump_buf`), in `dir`: `BASENAME.OFFSET.hdr_fail` (the block read) when
/// its header is wrong, else `BASENAME.OFFSET.received` (the block read) and
/// `BASENAME.OFFSET.expected` (the block regenerated from the seed its header stores, or
/// the pattern). `BASENAME` is the file's name without its directories. Returns what each
/// file is and its path, as fio's "`TYPE` data dumped as `PATH`" says, or why one could
/// not be written.
pub fn dump(
    dir: &std::path::Path,
    file: &str,
    kind: Verify,
    pattern: Option<&[u8]>,
    block: &[u8],
    offset: u64,
    why: &VerifyError,
) -> Result<Vec<(&'static str, std::path::PathBuf)>, String> {
    let base = std::path::Path::new(file).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let header_wrong = matches!(
        why,
        VerifyError::Short { .. }
            | VerifyError::NoHeader { .. }
            | VerifyError::Length { .. }
            | VerifyError::Offset { .. }
    );
    let mut files: Vec<(&'static str, Vec<u8>)> = Vec::new();
    if header_wrong {
        files.push(("hdr_fail", block.to_vec()));
    } else {
        files.push(("received", block.to_vec()));
        let mut want = vec![0u8; block.len()];
        let seed = if kind == Verify::Pattern || block.len() < 24 {
            0
        } else {
            u64::from_le_bytes(block[16..24].try_into().expect("8 bytes"))
        };
        fill_with(kind, pattern, &mut want, offset, seed);
        files.push(("expected", want));
    }
    let mut out = Vec::new();
    for (what, data) in files {
        let path = dir.join(format!("{base}.{offset}.{what}"));
        std::fs::write(&path, data).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        out.push((what, path));
    }
    Ok(out)
}

/// fio's `crc64` (initial value 0, no final xor) continued over `data`.
pub fn crc64_append(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = CRC64_TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// Parses `verify_pattern` (fio's syntax, without `%o`): hex numbers `0x…` (bytes in the
/// order written), decimal numbers (little-endian, 1 to 4 bytes as wide as the value),
/// `"quoted strings"` and `'file names'` (the file's bytes), one after the other.
pub fn parse_pattern(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('\'') {
            // fio's parse_file: 'NAME' is a file whose bytes (up to the pattern's room)
            // are the pattern.
            let end = r.find('\'').ok_or_else(|| format!("a closing ' in '{s}'"))?;
            let name = &r[..end];
            let mut data = std::fs::read(name).map_err(|e| format!("the pattern file '{name}': {e}"))?;
            data.truncate(512 - out.len().min(512));
            out.extend_from_slice(&data);
            rest = r[end + 1..].trim_start();
        } else if let Some(r) = rest.strip_prefix('"') {
            let q = '"';
            let end = r.find(q).ok_or_else(|| format!("a closing {q} in '{s}'"))?;
            out.extend_from_slice(&r.as_bytes()[..end]);
            rest = r[end + 1..].trim_start();
        } else if let Some(r) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
            let end = r.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(r.len());
            let digits = &r[..end];
            if digits.is_empty() {
                return Err(format!("hex digits after 0x in '{s}'"));
            }
            let padded = if digits.len() % 2 == 1 { format!("0{digits}") } else { digits.to_string() };
            for i in (0..padded.len()).step_by(2) {
                out.push(u8::from_str_radix(&padded[i..i + 2], 16).map_err(|e| e.to_string())?);
            }
            rest = r[end..].trim_start();
        } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let v: u32 =
                rest[..end].parse().map_err(|_| format!("a decimal number below 2^32, not '{}'", &rest[..end]))?;
            let width = (4 - v.leading_zeros() as usize / 8).max(1);
            out.extend_from_slice(&v.to_le_bytes()[..width]);
            rest = rest[end..].trim_start();
        } else if rest.starts_with("%o") {
            return Err("%o (the block's offset in the pattern) is not run".into());
        } else {
            return Err(format!("a hex number, a decimal number or a quoted string at '{rest}'"));
        }
        if out.len() > 512 {
            return Err("at most 512 bytes of pattern (fio's MAX_PATTERN_SIZE)".into());
        }
    }
    if out.is_empty() {
        return Err("at least one byte".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checker_threads_report_in_the_blocks_order_as_one_thread_does() {
        let mut blocks = vec![vec![0u8; 4096]; 7];
        for (i, b) in blocks.iter_mut().enumerate() {
            fill(Verify::Crc32c, b, i as u64 * 4096, 7);
        }
        blocks[2][100] ^= 1;
        blocks[5][4000] ^= 1;
        let read: Vec<(&[u8], u64)> = blocks.iter().enumerate().map(|(i, b)| (&b[..], i as u64 * 4096)).collect();
        let one: Vec<String> =
            read.iter().map(|&(b, o)| format!("{:?}", check_pieces(Verify::Crc32c, None, b, o, 4096))).collect();
        let bad: Vec<usize> = one.iter().enumerate().filter(|(_, r)| r.starts_with("Err")).map(|(i, _)| i).collect();
        assert_eq!(bad, [2, 5]);
        for threads in [0, 1, 2, 3, 7, 16] {
            let got: Vec<String> =
                check_pieces_on(threads, Verify::Crc32c, None, &read, 4096).iter().map(|r| format!("{r:?}")).collect();
            assert_eq!(got, one, "{threads} checker threads");
        }
        assert!(check_pieces_on(4, Verify::Crc32c, None, &[], 4096).is_empty());
    }

    #[test]
    fn the_interval_is_settled_as_fio_settles_it() {
        assert_eq!(interval(512, 65536, 65536, false), 512);
        assert_eq!(interval(0, 4096, 4096, false), 4096, "unset: one header per block");
        assert_eq!(interval(8192, 4096, 4096, false), 4096, "above the block: the block");
        assert_eq!(interval(1000, 4096, 4096, false), 4096, "not dividing the block: the block");
        assert_eq!(interval(4096, 8192, 2048, true), 2048, "a reading job: not above the read size");
        assert_eq!(interval(4096, 8192, 2048, false), 4096);
    }

    #[test]
    fn an_interval_puts_a_header_in_every_piece_and_finds_a_corruption_inside_a_block() {
        for kind in [Verify::Meta, Verify::Crc32c] {
            let mut b = vec![0u8; 4096];
            fill_pieces(kind, Some(&[0xaa, 0x55]), &mut b, 65536, 9, 512);
            assert!(check_pieces(kind, Some(&[0xaa, 0x55]), &b, 65536, 512).is_ok(), "{kind:?}");
            for i in 0..8 {
                assert_eq!(&b[i * 512..i * 512 + 4], b"IOSW", "{kind:?}: piece {i} has a header");
                assert_eq!(
                    u64::from_le_bytes(b[i * 512 + 8..i * 512 + 16].try_into().unwrap()),
                    65536 + i as u64 * 512
                );
            }
            // A byte of the fourth piece's header: only a header per piece sees it with
            // verify=meta (a whole block's header does not cover it).
            b[3 * 512 + 10] ^= 1;
            let (at, len, why) = check_pieces(kind, None, &b, 65536, 512).unwrap_err();
            assert_eq!((at, len), (1536, 512), "{kind:?}: {why}");
            assert!(matches!(why, VerifyError::Offset { .. }), "{kind:?}: {why}");
        }
        let mut whole = vec![0u8; 4096];
        fill_pieces(Verify::Meta, None, &mut whole, 0, 9, 0);
        whole[3 * 512 + 10] ^= 1;
        assert!(
            check_pieces(Verify::Meta, None, &whole, 0, 0).is_ok(),
            "meta without an interval: the payload is not checked"
        );
    }

    #[test]
    fn dump_names_the_files_as_fio_and_holds_the_blocks() {
        let scratch = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-verify-dump");
        let dir = scratch.dir();
        let mut good = vec![0u8; 4096];
        fill(Verify::Crc32c, &mut good, 8192, 77);
        let mut bad = good.clone();
        bad[1000] ^= 1;
        let why = check(Verify::Crc32c, &bad, 8192).unwrap_err();
        let files = dump(dir, "/some/dir/f.dat", Verify::Crc32c, None, &bad, 8192, &why).unwrap();
        let names: Vec<_> =
            files.iter().map(|(w, p)| (*w, p.file_name().unwrap().to_string_lossy().into_owned())).collect();
        assert_eq!(
            names,
            [("received", "f.dat.8192.received".to_string()), ("expected", "f.dat.8192.expected".to_string())]
        );
        assert!(std::fs::read(&files[0].1).unwrap() == bad && std::fs::read(&files[1].1).unwrap() == good);
        bad[0] ^= 1; // the magic: a header failure
        let why = check(Verify::Crc32c, &bad, 8192).unwrap_err();
        let files = dump(dir, "f.dat", Verify::Crc32c, None, &bad, 8192, &why).unwrap();
        assert_eq!(files.len(), 1);
        assert!(files[0].1.ends_with("f.dat.8192.hdr_fail") && std::fs::read(&files[0].1).unwrap() == bad);
        let e = dump(&dir.join("missing"), "f.dat", Verify::Crc32c, None, &bad, 8192, &why).unwrap_err();
        assert!(e.contains("cannot write") && e.contains("f.dat.8192.hdr_fail"), "{e}");
    }

    #[test]
    fn every_digest_catches_a_change_a_misplaced_block_and_one_never_written() {
        for kind in [Verify::Crc32c, Verify::Md5, Verify::Crc64, Verify::Xxhash, Verify::Sha256] {
            // (where the block belongs, its seed, the byte changed and how).
            for (at, seed, byte, bits) in [(8192u64, 99, 3000, 0x01u8), (4096, 7, 4000, 0x10)] {
                let who = format!("{} at {at}", name(kind));
                let mut b = vec![0u8; 4096];
                fill(kind, &mut b, at, seed);
                assert_eq!(check(kind, &b, at), Ok(()), "{who}");
                let e = check(kind, &b, at - 4096).unwrap_err().to_string();
                assert!(e.contains(&format!("belongs at offset {at}")), "{who}: {e}");
                let mut torn = b.clone();
                torn[byte] ^= bits;
                let e = check(kind, &torn, at).unwrap_err().to_string();
                assert!(e.starts_with(&format!("{} mismatch", name(kind))), "{who}: {e}");
                let e = check(kind, &[0u8; 4096], at).unwrap_err().to_string();
                assert!(e.contains("never written"), "{who}: {e}");
            }
        }
    }

    #[test]
    fn meta_checks_the_header_and_not_the_payload_as_fio() {
        let mut b = vec![0u8; 4096];
        fill(Verify::Meta, &mut b, 4096, 7);
        assert_eq!(check(Verify::Meta, &b, 4096), Ok(()));
        assert!(check(Verify::Meta, &b, 0).unwrap_err().to_string().contains("belongs at offset 4096"));
        let mut payload = b.clone();
        payload[4000] ^= 0x10;
        assert_eq!(check(Verify::Meta, &payload, 4096), Ok(()), "fio's meta does not check the data");
        let mut header = b.clone();
        header[20] ^= 0x01;
        let e = check(Verify::Meta, &header, 4096).unwrap_err().to_string();
        assert!(e.starts_with("meta mismatch"), "{e}");
        assert!(check(Verify::Meta, &vec![0u8; 4096], 4096).unwrap_err().to_string().contains("never written"));
    }

    #[test]
    fn crc64_is_fios_jones_crc_and_xxh32_and_sha256_are_the_standard_ones() {
        // Check values over "123456789": CRC-64 with the Jones polynomial, reflected,
        // init 0 (fio's crc64, also known as CRC-64/REDIS); XXH32 seed 0; SHA-256.
        assert_eq!(crc64_append(0, b"123456789"), 0xE9C6_D914_C4B8_D9CA);
        assert_eq!(xxhash_rust::xxh32::xxh32(b"", 0), 0x02CC_5D05);
        use sha2::Digest;
        let d = sha2::Sha256::digest(b"abc");
        assert_eq!(&d[..4], &[0xba, 0x78, 0x16, 0xbf]);
    }

    #[test]
    fn a_pattern_fills_the_block_and_any_other_byte_is_named() {
        let p = parse_pattern("0xdeadbeef\"ab\"1").unwrap();
        assert_eq!(p, [0xde, 0xad, 0xbe, 0xef, b'a', b'b', 1]);
        assert_eq!(parse_pattern("258").unwrap(), [2, 1]);
        assert_eq!(parse_pattern("0xf").unwrap(), [0x0f]);
        assert!(parse_pattern("%o").unwrap_err().contains("not run"));
        assert!(parse_pattern("\"open").unwrap_err().contains("closing"));
        // 'NAME' is a file's contents, as in fio (not a string).
        let f = std::env::temp_dir().join(format!("ioswitch-pattern-{}", std::process::id()));
        std::fs::write(&f, b"\x01\x02xyz").unwrap();
        assert_eq!(parse_pattern(&format!("0xff'{}'", f.display())).unwrap(), [0xff, 1, 2, b'x', b'y', b'z']);
        std::fs::remove_file(&f).unwrap();
        let e = parse_pattern("'/nonexistent/pattern'").unwrap_err();
        assert!(e.contains("the pattern file '/nonexistent/pattern'"), "{e}");
        assert!(parse_pattern("zz").unwrap_err().contains("at 'zz'"));
        let mut b = vec![0u8; 512];
        fill_with(Verify::Pattern, Some(&p), &mut b, 0, 1);
        assert_eq!(&b[7..14], &p[..]);
        assert_eq!(check_with(Verify::Pattern, Some(&p), &b, 0), Ok(()));
        b[100] = 0;
        let e = check_with(Verify::Pattern, Some(&p), &b, 0).unwrap_err().to_string();
        assert_eq!(e, format!("pattern mismatch at byte 100: read 0x00, the pattern has {:#04x}", p[100 % 7]));
        // With a digest, the pattern is the payload and the header is checked as usual.
        let mut b = vec![0u8; 512];
        fill_with(Verify::Md5, Some(&p), &mut b, 512, 1);
        assert_eq!(&b[HEADER_LEN..HEADER_LEN + 2], &p[HEADER_LEN % 7..HEADER_LEN % 7 + 2]);
        assert_eq!(check_with(Verify::Md5, Some(&p), &b, 512), Ok(()));
    }

    #[test]
    fn crc32c_is_the_castagnoli_crc() {
        // The standard check value of CRC-32C over "123456789".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }
}
