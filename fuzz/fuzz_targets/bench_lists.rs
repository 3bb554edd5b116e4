//! Fuzz target `bench_lists`: the list arguments of `ioswitch bench` (`--qd 1,2,4`,
//! `--bs 4k,64k` of sweep, `--interfaces io_uring,libaio` of compare and sweep) and
//! `--output-format normal,json+`.
//!
//! Input: any bytes; those that are not UTF-8 are skipped. The whole input is given to
//! each of the four parsers.
//!
//! Invariants checked:
//! - no parser panics;
//! - queue depths are in 1..=4096, block sizes positive, interfaces listed once each, and
//!   none repeats;
//! - round trip: each parsed list, printed back (`1,2,4`; sizes with `fmt_size`;
//!   interface names), parses to the same list; an output format printed back as its
//!   names parses to the same format;
//! - an error about a list names the list as given.
#![no_main]

use ioswitch::units::fmt_size;
use ioswitch_bench::compare::parse_interfaces;
use ioswitch_bench::jobfile::OutputFormat;
use ioswitch_bench::sweep::{parse_bss, parse_qds, MAX_QD};
use libfuzzer_sys::fuzz_target;

fn join<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(",")
}

fn no_repeats<T: PartialEq>(items: &[T]) -> bool {
    items.iter().enumerate().all(|(i, x)| !items[..i].contains(x))
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let named = |e: &str| assert!(e.contains(&format!("{s:?}")), "error does not name {s:?}: {e}");

    match parse_qds(s) {
        Ok(qds) => {
            assert!(!qds.is_empty() && qds.iter().all(|q| (1..=MAX_QD).contains(q)) && no_repeats(&qds), "{qds:?}");
            assert_eq!(parse_qds(&join(&qds, u32::to_string)).ok(), Some(qds));
        }
        Err(e) => named(&e.to_string()),
    }
    match parse_bss(s) {
        Ok(bss) => {
            assert!(!bss.is_empty() && bss.iter().all(|b| *b > 0) && no_repeats(&bss), "{bss:?}");
            assert_eq!(parse_bss(&join(&bss, |b| fmt_size(*b))).ok(), Some(bss.clone()));
            assert_eq!(parse_bss(&join(&bss, u64::to_string)).ok(), Some(bss));
        }
        Err(e) => named(&e.to_string()),
    }
    match parse_interfaces(s) {
        Ok(sel) => {
            assert!(!sel.ifaces.is_empty() && no_repeats(&sel.ifaces), "{sel:?}");
            if !sel.all {
                assert_eq!(parse_interfaces(&join(&sel.ifaces, |i| i.to_string())).ok(), Some(sel));
            }
        }
        Err(e) => named(&e.to_string()),
    }
    if let Ok(f) = s.parse::<OutputFormat>() {
        let mut names = Vec::new();
        if f.normal {
            names.push("normal");
        }
        if f.json_plus {
            names.push("json+");
        } else if f.json {
            names.push("json");
        }
        assert!(f.json || !f.json_plus, "json+ without json: {f:?}");
        if !names.is_empty() {
            assert_eq!(names.join(",").parse::<OutputFormat>().ok(), Some(f), "{s:?}");
        }
    }
});
