//! Fuzz target `feat`: feature values a controller returns (the Get Features completion
//! dword), decoded by `ioswitch::spec::feat::Feature::decode` and the per-feature
//! decoders, and encoded back for Set Features.
//!
//! Input: byte 0 is the feature identifier, bytes 1..5 the dword (little-endian; missing
//! bytes are 0).
//!
//! Invariants checked:
//! - decoding and encoding never panic;
//! - the decoded feature keeps its identifier, and its name is known or "Unknown Feature";
//! - round trip: the dword encoded from a decoded feature decodes to the same feature
//!   (and to the same dword for the features whose every bit is a field: arbitration's
//!   weights, the queue counts, and raw features);
//! - queue counts are 1..=65536; capabilities decode from any dword.
#![no_main]

use ioswitch::spec::feat::{name, Capabilities, Feature};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&id, rest)) = data.split_first() else { return };
    let mut dw = [0u8; 4];
    for (d, s) in dw.iter_mut().zip(rest) {
        *d = *s;
    }
    let dw = u32::from_le_bytes(dw);
    let f = Feature::decode(id, dw);
    assert_eq!(f.fid(), id);
    assert!(!name(id).is_empty());
    let enc = f.to_dword();
    assert_eq!(Feature::decode(id, enc), f, "{f:?} encoded as {enc:#x}");
    match f {
        Feature::NumberOfQueues(q) => {
            assert!((1..=65536).contains(&q.submission_queues) && (1..=65536).contains(&q.completion_queues));
            assert_eq!(enc, dw);
        }
        Feature::Other { dword, .. } => assert_eq!(enc, dword),
        Feature::Arbitration(_) => assert_eq!(enc, dw & !0xf8, "{f:?}"),
        _ => {}
    }
    let _ = Capabilities::from_dword(dw);
});
