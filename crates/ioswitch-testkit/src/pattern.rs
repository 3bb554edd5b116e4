//! Test data.
//!
//! - [`bytes`]: a seeded byte stream (xorshift64), for data that must differ from chunk to
//!   chunk and from seed to seed;
//! - position-stamped data ([`fill`], [`at`], [`compare`]): every 8-byte word holds its own
//!   512-byte sector and word index, scrambled by a seed, so a read-back that differs says
//!   which data it got instead: zeroes, a read buffer's [`SENTINEL`], the pattern's word
//!   for another byte (misplaced data), or an older write.

/// The byte read buffers are filled with before a read, so "no data arrived" shows.
pub const SENTINEL: u8 = 0xA5;

/// `len` bytes of xorshift64 (13, 7, 17) from `seed`, one byte a step.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn mix(seed: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// The pattern word at absolute byte `pos` (a multiple of 8): its 512-byte sector and
/// word index, scrambled by the seed. Misplaced data, zeroes and stale data all differ.
pub fn word(pos: u64, seed: u64) -> u64 {
    ((pos >> 9) << 24 | (pos & 511) >> 3) ^ mix(seed)
}

/// Fills `b` with the pattern of `seed` for the bytes starting at absolute byte `pos` (a
/// multiple of 8).
pub fn fill(b: &mut [u8], pos: u64, seed: u64) {
    assert_eq!(pos % 8, 0, "pattern positions are multiples of 8");
    let m = mix(seed);
    let whole = b.len() / 8;
    for k in 0..whole {
        let p = pos + 8 * k as u64;
        let w = ((p >> 9) << 24 | (p & 511) >> 3) ^ m;
        b[8 * k..8 * k + 8].copy_from_slice(&w.to_le_bytes());
    }
    let tail = b.len() - 8 * whole;
    if tail > 0 {
        let w = word(pos + 8 * whole as u64, seed).to_le_bytes();
        b[8 * whole..].copy_from_slice(&w[..tail]);
    }
}

/// The pattern of `seed` for `len` bytes starting at absolute byte `pos`.
pub fn at(pos: u64, len: u64, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len as usize];
    fill(&mut v, pos, seed);
    v
}

/// What the word `got`, read at absolute byte `at`, is, as far as it can be told (`seed`:
/// the pattern that was expected there, if any).
pub fn describe(got: u64, at: u64, seed: Option<u64>) -> String {
    if got == 0 {
        return "zeroes".into();
    }
    if got == u64::from_le_bytes([SENTINEL; 8]) {
        return "the read buffer's sentinel: no data arrived".into();
    }
    if let Some(seed) = seed {
        let v = got ^ mix(seed);
        if v >> 56 == 0 && v & 0xff_ffff < 64 {
            let from = (v >> 24) * 512 + (v & 0xff_ffff) * 8;
            if from == at {
                return "the pattern's own word for this byte: the data was not changed as expected".into();
            }
            return format!("the pattern's word for byte {from}: misplaced data");
        }
    }
    "other data (an older write, or garbage)".into()
}

/// Compares `got` with `want` (both starting at absolute byte `pos`; `seed`: the pattern
/// `want` holds, if any), naming the first difference, what it holds instead and how many
/// words differ; `what` begins the message.
pub fn compare(got: &[u8], want: &[u8], pos: u64, seed: Option<u64>, what: &str) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    if got.len() != want.len() {
        return Err(format!("{what}: got {} bytes, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.chunks(8).zip(want.chunks(8)).enumerate() {
        if g != w {
            let at = pos + 8 * i as u64;
            let mut gw = [0u8; 8];
            gw[..g.len()].copy_from_slice(g);
            let mut ww = [0u8; 8];
            ww[..w.len()].copy_from_slice(w);
            let (gw, ww) = (u64::from_le_bytes(gw), u64::from_le_bytes(ww));
            let bad = got.chunks(8).zip(want.chunks(8)).filter(|(g, w)| g != w).count();
            return Err(format!(
                "{what}: first difference at byte {at} (sector {}): expected {ww:#018x}, got {gw:#018x} \
                 ({}); {bad} of {} words differ",
                at / 512,
                describe(gw, at, seed),
                want.len().div_ceil(8)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_names_what_the_data_is_instead() {
        let want = at(4096, 1024, 7);
        assert_eq!(compare(&want, &want, 4096, Some(7), "r"), Ok(()));
        let e = compare(&vec![0; 1024], &want, 4096, Some(7), "r").unwrap_err();
        assert!(e.contains("first difference at byte 4096 (sector 8)") && e.contains("zeroes"), "{e}");
        let e = compare(&vec![SENTINEL; 1024], &want, 4096, Some(7), "r").unwrap_err();
        assert!(e.contains("sentinel"), "{e}");
        let e = compare(&at(0, 1024, 7), &want, 4096, Some(7), "r").unwrap_err();
        assert!(e.contains("the pattern's word for byte 0: misplaced data"), "{e}");
        let e = compare(&at(4096, 1024, 8), &want, 4096, Some(7), "r").unwrap_err();
        assert!(e.contains("older write"), "{e}");
        let e = compare(&want[..8], &want, 4096, Some(7), "r").unwrap_err();
        assert_eq!(e, "r: got 8 bytes, expected 1024");
    }

    #[test]
    fn byte_streams_depend_on_the_seed() {
        assert_eq!(bytes(1, 64), bytes(1, 64));
        assert_ne!(bytes(1, 64), bytes(2, 64));
        assert!(bytes(1, 64).windows(2).any(|w| w[0] != w[1]));
    }
}
