//! Fuzz target `opts`: option strings, `"...".parse::<ioswitch::Opts>()` (the `--opts`
//! flag, `ioswitch_opts` of a job, the C and Python APIs) and `Opts::set`.
//!
//! Input: any bytes; those that are not UTF-8 are skipped. The whole input is an option
//! string; it is also split at its first newline into a key and a value for `Opts::set`.
//!
//! Invariants checked:
//! - neither `parse` nor `set` panics;
//! - parsed options pass `validate` (parse validates), and print (`Display`) to a string
//!   that parses back to equal options and prints the same again;
//! - an error is `Error::BadOpt` with a reason.
#![no_main]

use ioswitch::{Error, Opts};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    match s.parse::<Opts>() {
        Ok(o) => {
            o.validate().expect("parsed options are valid");
            let printed = o.to_string();
            let again = printed
                .parse::<Opts>()
                .unwrap_or_else(|e| panic!("{s:?} printed as {printed:?}, which does not parse back: {e}"));
            assert_eq!(again, o, "{s:?} printed as {printed:?}");
            assert_eq!(again.to_string(), printed);
        }
        Err(Error::BadOpt { why, .. }) => assert!(!why.is_empty(), "{s:?}: an error without a reason"),
        Err(e) => panic!("{s:?}: not a BadOpt error: {e:?}"),
    }
    let (key, value) = s.split_once('\n').unwrap_or((s, ""));
    let mut o = Opts::default();
    match o.set(key, value) {
        Ok(()) => {
            // One valid item: its key=value form sets the same field on fresh options.
            let mut again = Opts::default();
            again.set(key, value).expect("the same item applies twice");
            assert_eq!(again, o);
        }
        Err(Error::BadOpt { why, .. }) => assert!(!why.is_empty()),
        Err(e) => panic!("{key:?}={value:?}: not a BadOpt error: {e:?}"),
    }
});
