//! Fuzz target `fiolog`: fio's log files as `ioswitch bench plot` reads them
//! (`ioswitch_bench::fiolog`), and the charts drawn from them. The `log` target is the
//! NVMe log pages, a different input.
//!
//! Input: any bytes, read as the text of a latency log (`f_clat.1.log`), of an IOPS log
//! (`f_iops.1.log`) and of a histogram log (`f_clat_hist.1.log`); not UTF-8 is skipped
//! (the reader refuses it before parsing).
//!
//! Invariants checked:
//! - parsing never panics; an error names the file and a line that exists (1-based);
//! - a parsed log has one sample (or histogram) per non-blank line, and each sample printed
//!   in fio 3.33's format (`time, value, ddir, bs, [offset,] prio`) parses back to itself;
//! - the chart of a parsed log (automatic window and a 1 ms window) never panics, is one
//!   `<svg>` document, and holds no NaN or infinity;
//! - the same bytes as a compressed log (`.log.fz`): `inflate` never panics, and the text
//!   it makes has one line of 5 or 6 columns per sample (fio's `flush_samples`).
#![no_main]

use ioswitch_bench::fiolog::{chart, inflate, parse, parse_line, LogSample, PlotOpts};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fn print(s: &LogSample) -> String {
    let mut line = format!("{}, {}, {}, {}", s.time_ms, s.value, s.ddir, s.bs);
    if let Some(o) = s.offset {
        line += &format!(", {o}");
    }
    if let Some(p) = s.prio {
        line += &format!(", {p}");
    }
    line
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = inflate(data) {
        for line in text.lines() {
            let cols = line.split(", ").count();
            assert!(cols == 5 || cols == 6, "{line:?}");
        }
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count();
    for name in ["f_clat.1.log", "f_iops.1.log", "f_clat_hist.1.log"] {
        match parse(Path::new(name), text) {
            Err(e) => {
                let msg = e.to_string();
                let rest = msg.strip_prefix(&format!("{name}:")).unwrap_or_else(|| panic!("{msg:?} names no file"));
                let line: usize = rest.split(':').next().unwrap().parse().unwrap_or_else(|_| panic!("{msg:?}"));
                assert!((1..=lines).contains(&line), "{msg:?}: {lines} lines");
            }
            Ok(log) => {
                let n = text.lines().filter(|l| !l.trim().is_empty()).count();
                assert_eq!(log.samples.len() + log.hist.len(), n);
                assert!(log.hist.iter().all(|h| h.stride() * h.counts.len() == 1856), "{:?}", log.hist);
                for s in &log.samples {
                    assert_eq!(parse_line(&print(s)).as_ref(), Ok(s), "{s:?}");
                }
                for window_ms in [None, Some(1)] {
                    let svg = chart(&log, &PlotOpts { window_ms }).to_svg();
                    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
                    assert_eq!(svg.matches("<svg").count(), 1);
                    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
                }
            }
        }
    }
});
