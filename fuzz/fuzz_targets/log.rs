//! Fuzz target `log`: the log pages a controller returns, decoded by
//! `ioswitch::spec::log`: `ErrorLog` (and `ErrorEntry`), `SmartLog`, `FwSlotLog`,
//! `ChangedNsList`; plus the completion status word (`Status::from_cqe_status`).
//!
//! Input: the bytes the device returned (any length); every decoder reads the same
//! bytes, from a buffer of exactly that length (so the address sanitizer catches a read
//! past it).
//!
//! Invariants checked:
//! - no decoder panics or reads past the buffer;
//! - a buffer shorter than what a page's fields need is an error (`ShortPage` with that
//!   need and the length given): 64 bytes for the error log and an entry, 232 for SMART,
//!   64 for the firmware slots, 4 for the changed namespace list; a long enough one is
//!   decoded;
//! - the error log holds one entry per whole 64 bytes, each the entry decoded alone;
//! - SMART round trip: `write_to` a 512-byte page, decoded again, gives the same log;
//! - firmware slots are 1..=7, ascending, with printable revisions; the active slot and
//!   the next one fit in 3 bits;
//! - the changed namespace list holds at most one id per whole dword and no zero id, and
//!   nothing when it overflowed;
//! - a status word decodes and prints without panicking.
#![no_main]

use ioswitch::spec::log::{ChangedNsList, ErrorEntry, ErrorLog, FwSlotLog, SmartLog, SMART_LEN};
use ioswitch::spec::Status;
use ioswitch_fuzz::decoded as decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let b = data.to_vec(); // exactly data.len() bytes on the heap
    if let Some(log) = decode(&b, 64, ErrorLog::parse) {
        assert_eq!(log.entries.len(), b.len() / 64);
        for (e, chunk) in log.entries.iter().zip(b.chunks_exact(64)) {
            assert_eq!(Some(*e), decode(chunk, 64, ErrorEntry::parse));
            let _ = (e.status().to_string(), e.is_valid());
        }
    }
    decode(&b, 64, ErrorEntry::parse);
    if let Some(s) = decode(&b, 232, SmartLog::parse) {
        let mut page = [0u8; SMART_LEN];
        s.write_to(&mut page).expect("512 bytes are enough");
        assert_eq!(SmartLog::parse(&page).as_ref(), Ok(&s), "SMART log changed through write_to");
        assert!(s.temperature_sensors.iter().all(|t| (1..=8).contains(&t.sensor) && t.kelvin != 0));
    }
    if let Some(f) = decode(&b, 64, FwSlotLog::parse) {
        assert!(f.active_slot < 8 && f.next_slot.is_none_or(|n| (1..8).contains(&n)), "{f:?}");
        assert!(f.slots.windows(2).all(|w| w[0].slot < w[1].slot), "{f:?}");
        for slot in &f.slots {
            assert!((1..=7).contains(&slot.slot), "{f:?}");
            assert!(slot.revision.bytes().all(|c| (0x20..0x7f).contains(&c)), "{f:?}");
        }
    }
    if let Some(c) = decode(&b, 4, ChangedNsList::parse) {
        assert!(c.nsids.len() <= b.len() / 4 && !c.nsids.contains(&0), "{c:?}");
        assert!(!c.overflow || c.nsids.is_empty(), "{c:?}");
    }
    if let Some(w) = data.get(..2) {
        let st = Status::from_cqe_status(u16::from_le_bytes([w[0], w[1]]));
        let _ = (st.to_string(), st.sct(), st.sc(), st.dnr(), st.more(), st.crd(), st.errno(), st.is_ok());
    }
});
