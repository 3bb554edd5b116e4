//! Fuzz target `units`: byte sizes, `ioswitch::units::parse_size` (ramdisk sizes, `size=`
//! of option strings, `--bs` lists), and its printer `fmt_size`.
//!
//! Input: any bytes. As UTF-8 text it is a size to parse; its first 8 bytes are also a
//! little-endian u64 to print.
//!
//! Invariants checked:
//! - `parse_size` and `fmt_size` never panic;
//! - a parsed size prints (in bytes, and with `fmt_size`) to a string that parses back to
//!   the same number;
//! - every u64 printed by `fmt_size` parses back to itself;
//! - an error message names the input (or says it is empty).
#![no_main]

use ioswitch::units::{fmt_size, parse_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        match parse_size(s) {
            Ok(n) => {
                assert_eq!(parse_size(&n.to_string()), Ok(n), "{s:?}");
                assert_eq!(parse_size(&fmt_size(n)), Ok(n), "{s:?} printed as {}", fmt_size(n));
            }
            Err(e) => assert!(e.contains(&format!("{s:?}")) || e == "empty size", "{s:?}: {e}"),
        }
    }
    if let Some(b) = data.get(..8) {
        let n = u64::from_le_bytes(b.try_into().unwrap());
        assert_eq!(parse_size(&fmt_size(n)), Ok(n), "{n} printed as {}", fmt_size(n));
    }
});
