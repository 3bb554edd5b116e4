//! Fuzz target `uri`: `ioswitch::uri::parse`, the device string of every front end.
//!
//! Input: any bytes; those that are not UTF-8 are skipped (a device string is a `&str`).
//!
//! Invariants checked:
//! - `parse` never panics;
//! - a ramdisk is a positive multiple of 512 bytes, and `ramdisk:N` (N in bytes) and
//!   `ramdisk:` + `fmt_size(N)` parse back to the same ramdisk;
//! - a path is the input, unchanged;
//! - a PCI address is written back as the input's bus:device.function (in lower case)
//!   and parses back to itself;
//! - an error is `Error::BadUri` carrying the input as given, with a reason.
#![no_main]

use ioswitch::units::fmt_size;
use ioswitch::uri::{parse, Target};
use ioswitch::Error;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    match parse(s) {
        Ok(Target::Ramdisk(n)) => {
            assert!(n > 0 && n % 512 == 0, "{s:?} gave a ramdisk of {n} bytes");
            assert_eq!(parse(&format!("ramdisk:{n}")).unwrap(), Target::Ramdisk(n), "{s:?}");
            assert_eq!(parse(&format!("ramdisk:{}", fmt_size(n))).unwrap(), Target::Ramdisk(n), "{s:?}");
        }
        Ok(Target::Path(p)) => assert_eq!(p.as_os_str(), s, "a path must be kept as given"),
        Ok(Target::Pci(a)) => {
            let shown = a.to_string();
            assert!(s.to_ascii_lowercase().ends_with(&shown[shown.len() - 7..]), "{s:?} shown as {shown}");
            assert_eq!(parse(&format!("pci:{a}")).unwrap(), Target::Pci(a), "{s:?}");
        }
        Err(Error::BadUri { uri, why }) => {
            assert_eq!(uri, s);
            assert!(!why.is_empty(), "{s:?}: an error without a reason");
        }
        Err(e) => panic!("{s:?}: not a BadUri error: {e:?}"),
    }
});
