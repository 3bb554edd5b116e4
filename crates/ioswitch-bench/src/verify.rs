//! Block contents that can be checked after the fact (fio's `verify=`).
//!
//! Every written block starts with a 40-byte header — magic `IOSW`, block length, the
//! block's byte offset, the seed of its payload, and a checksum — followed by a payload
//! generated from the seed. The checksum (crc32c or md5) covers the first 24 header bytes
//! and the payload, so a block that was not written, written elsewhere, torn, or altered
//! fails the check, and the error says which.

use crate::engine::Rng;
use crate::error::VerifyError;

pub use crate::jobfile::Verify;

/// fio's name of a verify kind.
pub fn name(kind: Verify) -> &'static str {
    match kind {
        Verify::None => "none",
        Verify::Crc32c => "crc32c",
        Verify::Md5 => "md5",
    }
}

/// Bytes of header at the start of every verified block.
pub const HEADER_LEN: usize = 40;
const MAGIC: u32 = u32::from_le_bytes(*b"IOSW");

fn digest(kind: Verify, block: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    match kind {
        Verify::None => {}
        Verify::Crc32c => {
            let c = crc32c::crc32c_append(crc32c::crc32c(&block[..24]), &block[HEADER_LEN..]);
            out[..4].copy_from_slice(&c.to_le_bytes());
        }
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
    let mut rng = Rng::new(seed);
    for chunk in block[HEADER_LEN..].chunks_mut(8) {
        let r = rng.next().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    block[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    let len = block.len() as u32;
    block[4..8].copy_from_slice(&len.to_le_bytes());
    block[8..16].copy_from_slice(&offset.to_le_bytes());
    block[16..24].copy_from_slice(&seed.to_le_bytes());
    let d = digest(kind, block);
    block[24..40].copy_from_slice(&d);
}

/// Checks a block read back from byte `offset`; says what is wrong when it is.
pub fn check(kind: Verify, block: &[u8], offset: u64) -> Result<(), VerifyError> {
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
    let n = if kind == Verify::Crc32c { 4 } else { 16 };
    b[..n].iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_block_checks_and_any_change_is_caught() {
        for kind in [Verify::Crc32c, Verify::Md5] {
            let mut b = vec![0u8; 4096];
            fill(kind, &mut b, 8192, 99);
            assert_eq!(check(kind, &b, 8192), Ok(()));
            assert!(check(kind, &b, 4096).unwrap_err().to_string().contains("belongs at offset 8192"));
            let mut torn = b.clone();
            torn[3000] ^= 1;
            assert!(check(kind, &torn, 8192).unwrap_err().to_string().contains("mismatch"));
            let zero = vec![0u8; 4096];
            assert!(check(kind, &zero, 8192).unwrap_err().to_string().contains("never written"));
        }
    }

    #[test]
    fn crc32c_is_the_castagnoli_crc() {
        // The standard check value of CRC-32C over "123456789".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }
}
