//! Fuzz target `zns`: zone reports a zoned namespace returns (Zone Management Receive),
//! decoded by `ioswitch::spec::zns`: `ZoneReport`, `ZoneDesc`; and the zone action names
//! and values (`ZoneAction`).
//!
//! Input: the bytes the device returned (any length), from a buffer of exactly that
//! length (so the address sanitizer catches a read past it); as UTF-8 text, it is also
//! a zone action name.
//!
//! Invariants checked:
//! - no decoder panics or reads past the buffer;
//! - a reply shorter than its 64-byte header, or a descriptor shorter than 64 bytes, is
//!   an error (`ShortPage` with need 64 and the length given);
//! - a report holds as many descriptors as both its header count and its bytes allow,
//!   each the descriptor decoded alone;
//! - round trip: a descriptor written back (`to_bytes`) decodes to the same descriptor,
//!   and keeps the bytes it has fields for;
//! - zone action names and values round trip.
#![no_main]

use ioswitch::spec::log::ShortPage;
use ioswitch::spec::zns::{ZoneAction, ZoneDesc, ZoneReport, ZONE_DESC_LEN};
use ioswitch_fuzz::decoded;
use libfuzzer_sys::fuzz_target;

/// [`decoded`] with the 64 bytes of a report's header and of a descriptor.
fn decode<T>(b: &[u8], f: impl Fn(&[u8]) -> Result<T, ShortPage>) -> Option<T> {
    decoded(b, ZONE_DESC_LEN, f)
}

fn round_trip(d: &ZoneDesc, raw: &[u8]) {
    let out = d.to_bytes();
    assert_eq!(ZoneDesc::parse(&out).as_ref(), Ok(d), "descriptor changed through to_bytes");
    assert_eq!((out[0], out[1], out[2], out[3]), (raw[0] & 0xf, raw[1] & 0xf0, raw[2], raw[3]));
    assert_eq!(out[8..32], raw[8..32]);
    let _ = d.state.short();
}

fuzz_target!(|data: &[u8]| {
    let b = data.to_vec(); // exactly data.len() bytes on the heap
    if let Some(r) = decode(&b, ZoneReport::parse) {
        let fit = (b.len() - ZONE_DESC_LEN) / ZONE_DESC_LEN;
        assert_eq!(r.zones.len() as u64, r.nr_zones.min(fit as u64), "{} bytes", b.len());
        for (i, z) in r.zones.iter().enumerate() {
            let raw = &b[ZONE_DESC_LEN * (i + 1)..][..ZONE_DESC_LEN];
            assert_eq!(decode(raw, ZoneDesc::parse).as_ref(), Some(z));
            round_trip(z, raw);
        }
    }
    if let Some(d) = decode(&b, ZoneDesc::parse) {
        round_trip(&d, &b);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(a) = s.parse::<ZoneAction>() {
            assert_eq!(a.to_string(), s);
            assert_eq!(ZoneAction::from_bits(a.bits()), Some(a));
        }
    }
    if let Some(&v) = data.first() {
        if let Some(a) = ZoneAction::from_bits(v) {
            assert_eq!(a.bits(), v);
            assert_eq!(a.as_str().parse::<ZoneAction>(), Ok(a));
        }
    }
});
