//! Fuzz target `idfy`: the Identify pages a controller returns, decoded by
//! `ioswitch::spec::idfy`: `IdCtrl`, `IdNs`, `IdNsZns` (with the namespace's `nlbaf`, and
//! with every value), `IdCtrlZns`, `NsDescs`.
//!
//! Input: the bytes the device returned (any length); every decoder reads the same
//! bytes, from a buffer of exactly that length (so the address sanitizer catches a read
//! past it).
//!
//! Invariants checked:
//! - no decoder panics or reads past the buffer;
//! - a buffer shorter than 4096 bytes is an error (`ShortPage` with need 4096 and the
//!   length given), a longer one is decoded;
//! - only the page is read: a longer buffer decodes as its first 4096 bytes;
//! - list lengths follow their counts (power states `npss + 1`, at most 32; LBA formats
//!   and their ZNS extensions `nlbaf + 1`, at most 64); string fields carry no trailing
//!   blanks or NULs; the derived values (`max_transfer`, `lbaf_in_use`, `data_size`,
//!   `max_active`, `max_open`) never panic.
#![no_main]

use ioswitch::spec::idfy::{IdCtrl, IdCtrlZns, IdNs, IdNsZns, NsDescs, ShortPage, IDENTIFY_LEN};
use ioswitch_fuzz::decoded;
use libfuzzer_sys::fuzz_target;

/// The short-page rule ([`decoded`]) of one decoder, and that bytes past the page change
/// nothing; its value for a whole page.
fn decode<T: PartialEq + std::fmt::Debug>(b: &[u8], f: impl Fn(&[u8]) -> Result<T, ShortPage>) -> Option<T> {
    let v = decoded(b, IDENTIFY_LEN, &f)?;
    assert_eq!(f(&b[..IDENTIFY_LEN]).as_ref().ok(), Some(&v), "bytes past the page changed the result");
    Some(v)
}

fn clean(s: &str) -> bool {
    !s.ends_with([' ', '\0'])
}

fuzz_target!(|data: &[u8]| {
    let b = data.to_vec(); // exactly data.len() bytes on the heap
    if let Some(c) = decode(&b, IdCtrl::from_bytes) {
        assert_eq!(c.psds.len(), c.npss.min(31) as usize + 1);
        assert!(clean(&c.sn) && clean(&c.mn) && clean(&c.fr) && clean(&c.subnqn), "{c:?}");
        for page in [0, 1, 4096, u64::MAX] {
            let _ = c.max_transfer(page);
        }
    }
    if let Some(n) = decode(&b, IdNs::from_bytes) {
        assert_eq!(n.lbafs.len(), n.nlbaf.min(63) as usize + 1);
        let _ = (n.lbaf_index(), n.extended_metadata());
        if let Some(f) = n.lbaf_in_use() {
            let size = f.data_size();
            assert!(size == 0 || (size.is_power_of_two() && size >= 512), "{f:?}");
        }
        if let Some(z) = decode(&b, |p| IdNsZns::from_bytes(p, n.nlbaf)) {
            assert_eq!(z.lbafe.len(), n.lbafs.len());
        }
    }
    let nlbaf = data.first().copied().unwrap_or(0);
    if let Some(z) = decode(&b, |p| IdNsZns::from_bytes(p, nlbaf)) {
        assert_eq!(z.lbafe.len(), nlbaf.min(63) as usize + 1);
        let _ = (z.max_active(), z.max_open());
    }
    decode(&b, IdCtrlZns::from_bytes);
    decode(&b, NsDescs::from_bytes);
});
