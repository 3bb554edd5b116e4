//! fio's per-job log files (`write_lat_log`, `write_bw_log`, `write_iops_log`) read back,
//! and `ioswitch bench plot`'s time-series charts drawn from them.
//!
//! The format is fio 3.33's `flush_samples` (iolog.c): one sample per line,
//! comma-separated, `time, value, direction, bs, [offset,] priority`:
//! - time: ms since the job started;
//! - value: latency in ns (`_lat`, `_clat`, `_slat` logs), bandwidth in KiB/s (`_bw`),
//!   or I/Os per second (`_iops`); may be negative only in fio's own bugs, refused here;
//! - direction: 0 read, 1 write, 2 trim, 3 sync;
//! - bs: bytes of the I/O (or of the window's I/Os);
//! - offset: only with `log_offset=1`: the 6-column form;
//! - priority: decimal (the 0/1 "real-time class" flag) or `0x…` with `log_prio=1`.
//!
//! Logs of older fio have no priority column: 4 columns, or 5 with `log_offset`; a
//! 5-column line is read as fio 3.33 writes it (its last column the priority), and a
//! 4-column line as an older fio's. The kind of log comes from the file name, as fio
//! names it: `NAME_lat.N.log`, `NAME_clat.N.log`, `NAME_slat.N.log`, `NAME_bw.N.log`,
//! `NAME_iops.N.log` (`.N` absent with `per_job_logs=0`).
//!
//! Histogram logs (`write_hist_log`, `NAME_clat_hist.N.log`; fio's `flush_hist_samples`):
//! `time, direction, bs, c0, c1, …`, the counts of completion latencies in fio's 1856
//! histogram buckets since the line before (the same buckets as [`crate::hist`]), every
//! `2^hist_coarseness` buckets added into one column (so 1856, 928, …, 29 columns).
//!
//! Compressed logs (`log_store_compressed=1`, `NAME_KIND[.N].log.fz`; fio's `gz_work` and
//! `iolog_file_inflate`, as ours are written by [`crate::iolog`]): one or more zlib
//! streams one after the other, each holding fio's in-memory samples (`struct io_sample`,
//! this machine's byte order: time u64, value u64, direction u32 whose bit 31 says the
//! samples carry an offset and bit 30 that the priority is logged, priority u16, 2 bytes of
//! padding, bs u64, and the offset u64 with bit 31: 32 or 40 bytes). [`inflate`] turns them
//! into the text `fio --inflate-log` prints (its `flush_samples`, the columns of each
//! stream from its first sample), which is then read as a text log. A compressed
//! histogram log is refused: fio deflates pointers to its histograms, not the counts.
//!
//! Charts ([`chart`]): time on x (seconds), windows of [`PlotOpts::window_ms`]; a latency
//! log gives p50/p99/p99.9 (nearest rank, the sample at rank ⌈p·n/100⌉ of the window's
//! sorted samples) per window and direction (no max: on a linear axis one outlier would
//! flatten the percentiles); a bandwidth or IOPS log the mean
//! of the window's samples, per direction.

use crate::plot::{LineChart, Scale, Series, TickFormat};
use std::path::{Path, PathBuf};

/// What a log holds, from its file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    /// `_lat`: total latency, ns.
    Lat,
    /// `_clat`: completion latency, ns.
    Clat,
    /// `_slat`: submission latency, ns.
    Slat,
    /// `_bw`: bandwidth, KiB/s.
    Bw,
    /// `_iops`: I/Os per second.
    Iops,
    /// `_clat_hist`: completion latency histograms, one per line.
    ClatHist,
}

impl LogKind {
    /// The file name suffix fio gives it (`lat`, `clat`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::Lat => "lat",
            LogKind::Clat => "clat",
            LogKind::Slat => "slat",
            LogKind::Bw => "bw",
            LogKind::Iops => "iops",
            LogKind::ClatHist => "clat_hist",
        }
    }

    /// Whether the values are latencies (ns).
    pub fn is_latency(self) -> bool {
        matches!(self, LogKind::Lat | LogKind::Clat | LogKind::Slat | LogKind::ClatHist)
    }

    /// The kind of the log file `name` (a file name, not a path), from fio's naming
    /// `PREFIX_KIND[.N].log`; `Err` says what is wrong with the name.
    pub fn of_file_name(name: &str) -> Result<LogKind, String> {
        let stem = name.strip_suffix(".log").ok_or("a fio log's name ends in .log")?;
        // Strip the job index fio adds with per_job_logs (default on).
        let stem = match stem.rsplit_once('.') {
            Some((s, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => s,
            _ => stem,
        };
        if stem.ends_with("_clat_hist") {
            return Ok(LogKind::ClatHist);
        }
        let kind = stem.rsplit_once('_').map(|(_, k)| k).unwrap_or("");
        Ok(match kind {
            "lat" => LogKind::Lat,
            "clat" => LogKind::Clat,
            "slat" => LogKind::Slat,
            "bw" => LogKind::Bw,
            "iops" => LogKind::Iops,
            _ => {
                return Err("fio's log name PREFIX_KIND[.N].log with KIND one of lat, clat, slat, bw, iops, clat_hist"
                    .to_string())
            }
        })
    }
}

/// One line of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogSample {
    /// ms since the job started.
    pub time_ms: u64,
    /// The value (ns, KiB/s or IOPS, by the log's kind).
    pub value: u64,
    /// 0 read, 1 write, 2 trim, 3 sync.
    pub ddir: u8,
    /// Block size, bytes.
    pub bs: u64,
    /// Offset of the I/O (`log_offset=1` logs only).
    pub offset: Option<u64>,
    /// Priority column (absent in older fio's logs).
    pub prio: Option<u32>,
}

/// One line of a histogram log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistSample {
    /// ms since the job started.
    pub time_ms: u64,
    /// 0 read, 1 write, 2 trim.
    pub ddir: u8,
    /// Block size, bytes.
    pub bs: u64,
    /// Completions per column since the line before; column `i` adds up fio's buckets
    /// `i·stride .. (i+1)·stride`, `stride = 1856 / counts.len()`.
    pub counts: Vec<u64>,
}

impl HistSample {
    /// Buckets per column.
    pub fn stride(&self) -> usize {
        crate::hist::PLAT_NR / self.counts.len().max(1)
    }
}

/// Parses one line of a histogram log.
pub fn parse_hist_line(text: &str) -> Result<HistSample, String> {
    let cols: Vec<&str> = text.split(',').map(str::trim).collect();
    let n = cols.len().saturating_sub(3);
    let ok = (0..=6).any(|c| n == crate::hist::PLAT_NR >> c);
    if !ok {
        return Err(format!(
            "{} columns; a fio histogram log line has time, direction, bs and 1856 counts, or 928, 464, 232, 116, 58, \
             29 with hist_coarseness 1 to 6",
            cols.len()
        ));
    }
    let time_ms = field_u64(cols[0], "time (ms)")?;
    let ddir = match cols[1] {
        "0" => 0,
        "1" => 1,
        "2" => 2,
        d => return Err(format!("the direction column is {d:?}, not 0 (read), 1 (write) or 2 (trim)")),
    };
    let bs = field_u64(cols[2], "block size")?;
    let counts = cols[3..].iter().map(|c| field_u64(c, "count")).collect::<Result<Vec<u64>, String>>()?;
    Ok(HistSample { time_ms, ddir, bs, counts })
}

/// A log read from a file.
#[derive(Clone, Debug, PartialEq)]
pub struct FioLog {
    /// The file it came from.
    pub path: PathBuf,
    /// What it holds.
    pub kind: LogKind,
    /// The samples, in file order (none in a histogram log).
    pub samples: Vec<LogSample>,
    /// The histograms of a histogram log, in file order (none in other logs).
    pub hist: Vec<HistSample>,
}

/// A log that could not be read: the file, the line (1-based, 0 for the file as a whole)
/// and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be read.
    #[error("{}: cannot read the log: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file's name does not say what the log holds.
    #[error("{}: not a log ioswitch bench plot reads: expected {reason}", path.display())]
    Name {
        /// The file.
        path: PathBuf,
        /// What the name should be.
        reason: String,
    },
    /// A compressed log (`.log.fz`) that does not inflate into fio's samples.
    #[error("{}: {reason}", path.display())]
    Compressed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A line is not a sample.
    #[error("{}:{line}: {reason}: {text:?}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong.
        reason: String,
    },
}

fn field_u64(s: &str, what: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| format!("the {what} column is {s:?}, not a whole number ≥ 0"))
}

/// Parses one line (`text` without its newline).
pub fn parse_line(text: &str) -> Result<LogSample, String> {
    let cols: Vec<&str> = text.split(',').map(str::trim).collect();
    if !(4..=6).contains(&cols.len()) {
        return Err(format!(
            "{} columns; a fio log line has 4 to 6: time, value, direction, bs, [offset,] [priority]",
            cols.len()
        ));
    }
    let time_ms = field_u64(cols[0], "time (ms)")?;
    let value = field_u64(cols[1], "value")?;
    let ddir = match cols[2] {
        "0" => 0,
        "1" => 1,
        "2" => 2,
        "3" => 3,
        d => return Err(format!("the direction column is {d:?}, not 0 (read), 1 (write), 2 (trim) or 3 (sync)")),
    };
    let bs = field_u64(cols[3], "block size")?;
    let prio = |s: &str| -> Result<u32, String> {
        let r = match s.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16),
            None => s.parse(),
        };
        r.map_err(|_| format!("the priority column is {s:?}, not a number or 0x… hex"))
    };
    let (offset, prio) = match cols.len() {
        4 => (None, None),
        5 => (None, Some(prio(cols[4])?)),
        _ => (Some(field_u64(cols[4], "offset")?), Some(prio(cols[5])?)),
    };
    Ok(LogSample { time_ms, value, ddir, bs, offset, prio })
}

/// Parses a whole log's text; `path` names it in errors (its kind comes from the name,
/// a `.fz` after `.log` ignored). Blank lines are skipped; a log with no line is read as
/// empty (fio writes an empty `_slat` log for a sync engine).
pub fn parse(path: &Path, text: &str) -> Result<FioLog, LogError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".fz").unwrap_or(name);
    let kind = LogKind::of_file_name(name).map_err(|reason| LogError::Name { path: path.to_path_buf(), reason })?;
    let mut samples = Vec::new();
    let mut hist = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason| LogError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            text: line.chars().take(120).collect(),
            reason,
        };
        if kind == LogKind::ClatHist {
            hist.push(parse_hist_line(line).map_err(bad)?);
        } else {
            samples.push(parse_line(line).map_err(bad)?);
        }
    }
    Ok(FioLog { path: path.to_path_buf(), kind, samples, hist })
}

/// Whether `path` names a compressed log (`….log.fz`).
pub fn is_compressed(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".log.fz"))
}

/// The text log of a compressed one (`log_store_compressed=1`; see the module docs), as
/// `fio --inflate-log` prints it; `Err` says what is wrong with the bytes. An empty file
/// is an empty log. Inflating stops with an error past [`MAX_INFLATED`] bytes of samples
/// (a few bytes of zlib can claim gigabytes).
pub fn inflate(bytes: &[u8]) -> Result<String, String> {
    inflate_capped(bytes, MAX_INFLATED)
}

/// The most sample bytes [`inflate`] takes from one compressed log: 1 GiB, 33.5 million
/// 32-byte samples (26.8 million with offsets), about 9 hours of a log with one sample per
/// millisecond; a longer log is refused with the error that names this cap, and is read
/// after `fio --inflate-log` has turned it into text (fio's own inflate has no cap).
pub const MAX_INFLATED: u64 = 1 << 30;

fn inflate_capped(bytes: &[u8], cap: u64) -> Result<String, String> {
    use std::fmt::Write as _;
    use std::io::Read as _;
    const OFFSET_BIT: u32 = 1 << 31;
    const PRIO_BIT: u32 = 1 << 30;
    let mut text = String::new();
    let mut rest = bytes;
    let mut stream = 0;
    let mut total = 0u64;
    while !rest.is_empty() {
        stream += 1;
        let at = bytes.len() - rest.len();
        let mut z = flate2::bufread::ZlibDecoder::new(rest);
        let mut raw = Vec::new();
        let left_to_take = cap - total;
        (&mut z).take(left_to_take + 1).read_to_end(&mut raw).map_err(|e| {
            format!("zlib stream {stream} (byte {at}) does not inflate ({e}): not fio's compressed log format")
        })?;
        if raw.len() as u64 > left_to_take {
            return Err(format!(
                "zlib stream {stream} (byte {at}) inflates past {cap} bytes of samples in all: too large for a log this tool inflates in memory (turn it into a text log with `fio --inflate-log FILE`, and give that)"
            ));
        }
        total += raw.len() as u64;
        let left = z.into_inner();
        if left.len() == rest.len() {
            return Err(format!("zlib stream {stream} (byte {at}) is empty"));
        }
        rest = left;
        let u64_at = |b: &[u8], o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let Some(first) = raw.get(16..20) else {
            if raw.is_empty() {
                continue;
            }
            return Err(format!("zlib stream {stream} holds {} bytes, less than one sample", raw.len()));
        };
        let flags = u32::from_ne_bytes(first.try_into().expect("4 bytes"));
        let (offset, prio) = (flags & OFFSET_BIT != 0, flags & PRIO_BIT != 0);
        let size = if offset { 40 } else { 32 };
        if raw.len() % size != 0 {
            return Err(format!(
                "zlib stream {stream} holds {} bytes, not a whole number of fio's {size}-byte samples",
                raw.len()
            ));
        }
        for e in raw.chunks_exact(size) {
            let (time, value) = (u64_at(e, 0), u64_at(e, 8) as i64);
            let ddir = u32::from_ne_bytes(e[16..20].try_into().expect("4 bytes")) & !(OFFSET_BIT | PRIO_BIT);
            let priority = u16::from_ne_bytes(e[20..22].try_into().expect("2 bytes"));
            let bs = u64_at(e, 24);
            let _ = write!(text, "{time}, {value}, {ddir}, {bs}, ");
            if offset {
                let _ = write!(text, "{}, ", u64_at(e, 32));
            }
            // fio prints the priority in hex with log_prio, else whether its class is
            // real-time (class 1, the bits above 13).
            let _ = if prio {
                writeln!(text, "0x{priority:04x}")
            } else {
                writeln!(text, "{}", u8::from(priority >> 13 == 1))
            };
        }
    }
    Ok(text)
}

/// Reads and parses the log file at `path`; a `….log.fz` file is inflated first
/// ([`inflate`]).
pub fn read(path: &Path) -> Result<FioLog, LogError> {
    let bytes = std::fs::read(path).map_err(|source| LogError::Read { path: path.to_path_buf(), source })?;
    if is_compressed(path) {
        let bad = |reason: String| LogError::Compressed { path: path.to_path_buf(), reason };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if LogKind::of_file_name(name.strip_suffix(".fz").unwrap_or(name)) == Ok(LogKind::ClatHist) {
            return Err(bad("a compressed histogram log cannot be read: fio deflates pointers to its histograms, not their counts (write it without log_store_compressed)".into()));
        }
        let text = inflate(&bytes).map_err(bad)?;
        return parse(path, &text);
    }
    let text = String::from_utf8(bytes).map_err(|e| LogError::Line {
        path: path.to_path_buf(),
        line: 0,
        text: String::new(),
        reason: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
    })?;
    parse(path, &text)
}

impl FioLog {
    /// Whether the log has one line per I/O (fio's `log_avg_msec=0`, its default) rather
    /// than one per averaging window: read so when one direction has two samples in the
    /// same ms (an averaged log has at most one per window of at least 1 ms), or, for an
    /// IOPS log, when every value is 1 (fio logs 1 per I/O).
    pub fn per_io(&self) -> bool {
        if self.kind == LogKind::Iops && self.samples.iter().all(|s| s.value == 1) {
            return true;
        }
        let mut seen = std::collections::HashSet::new();
        self.samples.iter().any(|s| !seen.insert((s.ddir, s.time_ms)))
    }
}

/// How [`chart`] draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlotOpts {
    /// Width of a time window, ms; `None`: the log's span / 100, rounded up to 1, 2 or 5
    /// times a power of ten (at least 1 ms).
    pub window_ms: Option<u64>,
}

/// Latency percentiles drawn per window.
pub const PERCENTILES: [f64; 3] = [50.0, 99.0, 99.9];

/// Nearest-rank percentile of sorted values: the value at rank ⌈p·n/100⌉ (1-based).
pub fn nearest_rank(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

fn auto_window(span_ms: u64) -> u64 {
    let raw = span_ms.div_ceil(100).max(1);
    let mut mag = 1u64;
    loop {
        for m in [1u64, 2, 5] {
            if m.saturating_mul(mag) >= raw {
                return m.saturating_mul(mag);
            }
        }
        mag = mag.saturating_mul(10);
    }
}

const DDIR_NAMES: [&str; 4] = ["read", "write", "trim", "sync"];

fn pct_name(p: f64) -> String {
    format!("p{p}")
}

/// The window width used for `log` under `opts`.
pub fn window_of(log: &FioLog, opts: &PlotOpts) -> u64 {
    opts.window_ms.filter(|&w| w > 0).unwrap_or_else(|| {
        let times = log.samples.iter().map(|s| s.time_ms).chain(log.hist.iter().map(|h| h.time_ms));
        let (lo, hi) = times.fold((u64::MAX, 0), |(a, b), t| (a.min(t), b.max(t)));
        auto_window(hi.saturating_sub(lo))
    })
}

/// One time window of one direction: its start (ms), its samples' values, their bytes.
type Window = (u64, Vec<u64>, u64);

/// Per direction (in the order first seen), values by the start of their window.
type ByDirection<V> = Vec<(u8, std::collections::BTreeMap<u64, V>)>;

/// The value of direction `ddir` for the window of `window` ms that holds `time_ms`
/// (a default one where there is none yet).
fn window_entry<V: Default>(by: &mut ByDirection<V>, ddir: u8, time_ms: u64, window: u64) -> &mut V {
    let at = match by.iter().position(|(d, _)| *d == ddir) {
        Some(i) => i,
        None => {
            by.push((ddir, Default::default()));
            by.len() - 1
        }
    };
    by[at].1.entry(time_ms / window * window).or_default()
}

/// The samples of `log` grouped by direction and window: `(ddir, [(window start ms,
/// values, bytes)])`, directions and windows ascending.
fn windows(log: &FioLog, window: u64) -> Vec<(u8, Vec<Window>)> {
    let mut out: ByDirection<(Vec<u64>, u64)> = Vec::new();
    for s in &log.samples {
        let w = window_entry(&mut out, s.ddir, s.time_ms, window);
        w.0.push(s.value);
        w.1 = w.1.saturating_add(s.bs);
    }
    out.sort_by_key(|(d, _)| *d);
    out.into_iter().map(|(d, m)| (d, m.into_iter().map(|(t, (v, b))| (t, v, b)).collect())).collect()
}

/// The chart of one log: for a latency log the percentiles per window (µs, to be drawn on
/// a log axis: [`LineChart::to_svg_log_y`]), for
/// bandwidth (KiB/s) and IOPS logs the rate per window (see the module docs). Points sit
/// at the window's middle.
pub fn chart(log: &FioLog, opts: &PlotOpts) -> LineChart {
    let window = window_of(log, opts);
    let name = log.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mid = |start: u64| (start as f64 + window as f64 / 2.0) / 1e3;
    let per_io = log.per_io();
    let mut series = if log.kind == LogKind::ClatHist { hist_series(log, window) } else { Vec::new() };
    for (ddir, wins) in windows(log, window) {
        let dname = DDIR_NAMES[ddir as usize];
        if log.kind.is_latency() {
            let sorted: Vec<(u64, Vec<u64>)> = wins
                .into_iter()
                .map(|(t, mut v, _)| {
                    v.sort_unstable();
                    (t, v)
                })
                .collect();
            for p in PERCENTILES {
                series.push(Series {
                    name: format!("{dname} {}", pct_name(p)),
                    points: sorted
                        .iter()
                        .filter_map(|(t, v)| nearest_rank(v, p).map(|x| (mid(*t), x as f64 / 1e3)))
                        .collect(),
                });
            }
        } else {
            let secs = window as f64 / 1e3;
            series.push(Series {
                name: dname.to_string(),
                points: wins
                    .iter()
                    .map(|(t, v, bytes)| {
                        let y = match (per_io, log.kind) {
                            // One line per I/O: count them (IOPS) or add their bytes (KiB/s).
                            (true, LogKind::Iops) => v.len() as f64 / secs,
                            (true, _) => *bytes as f64 / 1024.0 / secs,
                            (false, _) => v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64,
                        };
                        (mid(*t), y)
                    })
                    .collect(),
            });
        }
    }
    let (title, y_label, y_ticks) = match log.kind {
        LogKind::ClatHist => (
            format!("clat percentiles over time (fio histograms): {name} (window {window} ms)"),
            "clat (µs, log scale)".into(),
            TickFormat::Number,
        ),
        LogKind::Lat | LogKind::Clat | LogKind::Slat => (
            format!("{} percentiles over time: {name} (window {window} ms)", log.kind.as_str()),
            format!("{} (µs, log scale)", log.kind.as_str()),
            TickFormat::Number,
        ),
        LogKind::Bw => (
            format!("Bandwidth over time: {name} (window {window} ms, {})", how(per_io)),
            "bandwidth (KiB/s)".into(),
            TickFormat::Si,
        ),
        LogKind::Iops => (
            format!("IOPS over time: {name} (window {window} ms, {})", how(per_io)),
            "IOPS (I/Os per second)".into(),
            TickFormat::Si,
        ),
    };
    LineChart {
        title,
        x_label: "time (s)".into(),
        y_label,
        x_scale: Scale::Linear,
        x_ticks: TickFormat::Number,
        y_ticks,
        series,
    }
}

/// The series of a histogram log: per direction and window, the window's histograms added
/// up, then [`PERCENTILES`] by fio's rule ([`crate::hist::Histogram::percentile`]), in µs. A column of several buckets counts at the value of
/// its middle bucket.
fn hist_series(log: &FioLog, window: u64) -> Vec<Series> {
    use crate::hist::{bucket_value, Histogram};
    let mut by: ByDirection<Histogram> = Vec::new();
    for h in &log.hist {
        let hist = window_entry(&mut by, h.ddir, h.time_ms, window);
        let stride = h.stride();
        for (i, &c) in h.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
            hist.record_n(bucket_value(i * stride + stride / 2), c);
        }
    }
    by.sort_by_key(|(d, _)| *d);
    let mid = |start: u64| (start as f64 + window as f64 / 2.0) / 1e3;
    let mut out = Vec::new();
    for (ddir, wins) in by {
        let dname = DDIR_NAMES[ddir as usize];
        for p in PERCENTILES {
            out.push(Series {
                name: format!("{dname} {}", pct_name(p)),
                points: wins.iter().filter_map(|(t, h)| h.percentile(p).map(|v| (mid(*t), v as f64 / 1e3))).collect(),
            });
        }
    }
    out
}

fn how(per_io: bool) -> &'static str {
    if per_io {
        "one line per I/O, summed"
    } else {
        "mean of the samples"
    }
}

/// The SVG file name for a log: its name with `.log` (or `.log.fz`) replaced by `.svg`.
pub fn svg_name(log: &Path) -> String {
    let name = log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = name.strip_suffix(".fz").filter(|n| n.ends_with(".log")).unwrap_or(&name);
    format!("{}.svg", name.strip_suffix(".log").unwrap_or(name))
}

/// Reads every log, draws its chart and writes it into `out` (created when missing) as
/// [`svg_name`]; returns the files written, each with the number of lines (samples or
/// histograms) its log held (an empty log is drawn as a chart saying "no data"). Latency
/// charts have a logarithmic y axis ([`LineChart::to_svg_log_y`]). Any log that cannot be read fails the whole
/// call before anything is written.
pub fn plot_files(logs: &[PathBuf], out: &Path, opts: &PlotOpts) -> Result<Vec<(PathBuf, usize)>, PlotError> {
    if logs.is_empty() {
        return Err(PlotError::NoLogs);
    }
    let mut read_logs = Vec::new();
    for p in logs {
        read_logs.push(read(p)?);
    }
    let mut names: Vec<String> = Vec::new();
    for l in &read_logs {
        let n = svg_name(&l.path);
        if names.contains(&n) {
            return Err(PlotError::SameName { name: n });
        }
        names.push(n);
    }
    std::fs::create_dir_all(out).map_err(|source| PlotError::Write { path: out.to_path_buf(), source })?;
    let mut written = Vec::new();
    for (l, n) in read_logs.iter().zip(names) {
        let path = out.join(n);
        let c = chart(l, opts);
        let svg = if l.kind.is_latency() { c.to_svg_log_y() } else { c.to_svg() };
        std::fs::write(&path, svg).map_err(|source| PlotError::Write { path: path.clone(), source })?;
        written.push((path, l.samples.len() + l.hist.len()));
    }
    Ok(written)
}

/// Why [`plot_files`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No log named.
    #[error("no log files given (ioswitch bench plot LOG...)")]
    NoLogs,
    /// A log could not be read.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Two logs would write the same SVG.
    #[error("two logs would both be drawn as {name}: give logs with different file names")]
    SameName {
        /// The SVG name.
        name: String,
    },
    /// A file or the output directory could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> PathBuf {
        PathBuf::from(format!("/x/{name}"))
    }

    #[test]
    fn fio_3_33s_five_and_six_column_lines_and_older_four_column_ones_parse() {
        let five = parse_line("12, 34567, 1, 4096, 0").unwrap();
        assert_eq!(five, LogSample { time_ms: 12, value: 34567, ddir: 1, bs: 4096, offset: None, prio: Some(0) });
        let six = parse_line("7, 900, 0, 512, 1048576, 0x2004").unwrap();
        assert_eq!(six.offset, Some(1 << 20));
        assert_eq!(six.prio, Some(0x2004));
        let four = parse_line("3,5,0,4096").unwrap();
        assert_eq!((four.time_ms, four.value, four.offset, four.prio), (3, 5, None, None));
    }

    #[test]
    fn a_bad_line_is_named_with_its_file_and_line_number() {
        let text = "1, 100, 0, 4096, 0\n\n2, 1x0, 0, 4096, 0\n";
        let e = parse(&p("j_lat.1.log"), text).unwrap_err().to_string();
        assert!(e.starts_with("/x/j_lat.1.log:3: "), "{e}");
        assert!(e.contains("value column is \"1x0\""), "{e}");
        for (line, want) in [
            ("1, 2, 0", "3 columns"),
            ("1, 2, 7, 4096, 0", "direction column is \"7\""),
            ("1, -2, 0, 4096, 0", "value column is \"-2\""),
            ("1, 2, 0, 4096, 0xZZ", "priority column"),
            ("1, 2, 0, 4096, 1, 2, 3", "7 columns"),
        ] {
            let e = parse(&p("j_bw.1.log"), line).unwrap_err().to_string();
            assert!(e.starts_with("/x/j_bw.1.log:1: ") && e.contains(want), "{line}: {e}");
        }
        assert!(parse(&p("j_slat.1.log"), "\n").unwrap().samples.is_empty());
    }

    #[test]
    fn the_kind_comes_from_fios_file_name() {
        assert_eq!(LogKind::of_file_name("job_lat.1.log"), Ok(LogKind::Lat));
        assert_eq!(LogKind::of_file_name("a_b_clat.12.log"), Ok(LogKind::Clat));
        assert_eq!(LogKind::of_file_name("x_slat.log"), Ok(LogKind::Slat));
        assert_eq!(LogKind::of_file_name("x_bw.3.log"), Ok(LogKind::Bw));
        assert_eq!(LogKind::of_file_name("x_iops.1.log"), Ok(LogKind::Iops));
        assert_eq!(LogKind::of_file_name("x_clat_hist.1.log"), Ok(LogKind::ClatHist));
        assert!(LogKind::of_file_name("x_lat_hist.1.log").is_err());
        assert!(LogKind::of_file_name("x_lat.1.txt").is_err());
        assert!(LogKind::of_file_name("notes.log").is_err());
        let e = parse(&p("notes.log"), "1,2,0,4096,0").unwrap_err().to_string();
        assert!(e.starts_with("/x/notes.log: not a log"), "{e}");
    }

    #[test]
    fn nearest_rank_percentiles_follow_their_definition() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50.0), Some(50));
        assert_eq!(nearest_rank(&v, 99.0), Some(99));
        assert_eq!(nearest_rank(&v, 99.9), Some(100));
        assert_eq!(nearest_rank(&[7], 50.0), Some(7));
        assert_eq!(nearest_rank(&[], 50.0), None);
    }

    #[test]
    fn a_latency_chart_has_percentiles_per_window_and_direction() {
        // Window 0–999 ms: reads 1..=100 µs; window 1000–1999: reads 200 µs; writes 5 µs.
        let mut text = String::new();
        for i in 1..=100u64 {
            text += &format!("{}, {}, 0, 4096, 0\n", i * 5, i * 1000);
        }
        text += "1500, 200000, 0, 4096, 0\n1500, 5000, 1, 4096, 0\n";
        let log = parse(&p("j_clat.1.log"), &text).unwrap();
        let c = chart(&log, &PlotOpts { window_ms: Some(1000) });
        let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read p50", "read p99", "read p99.9", "write p50", "write p99", "write p99.9"]);
        assert_eq!(c.series[0].points, [(0.5, 50.0), (1.5, 200.0)]);
        assert_eq!(c.series[1].points, [(0.5, 99.0), (1.5, 200.0)]);
        assert_eq!(c.series[2].points, [(0.5, 100.0), (1.5, 200.0)]);
        assert_eq!(c.series[3].points, [(1.5, 5.0)]);
        assert_eq!((c.x_label.as_str(), c.y_label.as_str()), ("time (s)", "clat (µs, log scale)"));
        let svg = c.to_svg();
        assert!(svg.contains(">read p99</text>") && svg.contains(">clat (µs, log scale)</text>"));
    }

    #[test]
    fn a_bandwidth_chart_has_the_window_mean() {
        let log =
            parse(&p("j_bw.1.log"), "100, 1000, 0, 4096, 0\n400, 3000, 0, 4096, 0\n600, 10, 0, 4096, 0\n").unwrap();
        let c = chart(&log, &PlotOpts { window_ms: Some(500) });
        assert_eq!(c.series.len(), 1);
        assert_eq!(c.series[0].name, "read");
        assert_eq!(c.series[0].points, [(0.25, 2000.0), (0.75, 10.0)]);
        assert_eq!(c.y_label, "bandwidth (KiB/s)");
        // Automatic window: span 500 ms / 100 = 5 ms.
        assert_eq!(window_of(&log, &PlotOpts { window_ms: None }), 5);
        assert_eq!(auto_window(0), 1);
        assert_eq!(auto_window(30_000), 500);
        assert_eq!(auto_window(12_345), 200);
        assert_eq!(auto_window(u64::MAX), 200_000_000_000_000_000, "no overflow at the largest span");
    }

    #[test]
    fn a_log_of_one_line_per_io_is_counted_per_window() {
        // fio's default iops log: 1 per I/O; 30 reads in the first 100 ms, 10 in the next.
        // Two I/Os in each logged ms.
        let mut text = String::new();
        for i in 0..40u64 {
            let t = if i < 30 { i / 2 * 5 } else { 100 + i / 2 };
            text += &format!("{t}, 1, 0, 4096, 0\n");
        }
        let log = parse(&p("j_iops.1.log"), &text).unwrap();
        assert!(log.per_io());
        let c = chart(&log, &PlotOpts { window_ms: Some(100) });
        assert_eq!(c.series[0].points, [(0.05, 300.0), (0.15, 100.0)]);
        // The bandwidth log of the same I/Os (values are per-I/O rates): bytes per window.
        let log = parse(&p("j_bw.1.log"), &text.replace(", 1, 0,", ", 777, 0,")).unwrap();
        assert!(log.per_io(), "two samples in one ms");
        let c = chart(&log, &PlotOpts { window_ms: Some(100) });
        assert_eq!(c.series[0].points, [(0.05, 30.0 * 4.0 / 0.1), (0.15, 10.0 * 4.0 / 0.1)]);
        assert!(c.title.contains("one line per I/O"));
        // An averaged log (one sample per direction per window) is not.
        let avg = parse(&p("j_iops.1.log"), "100, 1500, 0, 4096, 0\n100, 700, 1, 4096, 0\n200, 1, 0, 4096, 0\n");
        assert!(!avg.unwrap().per_io());
    }

    #[test]
    fn a_histogram_log_gives_fios_percentiles_per_window() {
        use crate::hist::{bucket_index, Histogram, PLAT_NR};
        // Window 0: 90 completions at 10 µs, 10 at 1 ms; window 1: 5 at 50 µs.
        let line = |t: u64, entries: &[(u64, u64)]| {
            let mut c = vec![0u64; PLAT_NR];
            for &(ns, n) in entries {
                c[bucket_index(ns)] += n;
            }
            format!("{t}, 0, 4096, {}\n", c.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
        };
        let text =
            line(100, &[(10_000, 50)]) + &line(600, &[(10_000, 40), (1_000_000, 10)]) + &line(1200, &[(50_000, 5)]);
        let log = parse(&p("j_clat_hist.1.log"), &text).unwrap();
        assert_eq!((log.hist.len(), log.samples.len()), (3, 0));
        let c = chart(&log, &PlotOpts { window_ms: Some(1000) });
        let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read p50", "read p99", "read p99.9"]);
        let mut want = Histogram::new();
        want.record_n(10_000, 90);
        want.record_n(1_000_000, 10);
        let us = |v: Option<u64>| v.unwrap() as f64 / 1e3;
        let at_50us = crate::hist::bucket_value(bucket_index(50_000)) as f64 / 1e3;
        assert_eq!(c.series[0].points, [(0.5, us(want.percentile(50.0))), (1.5, at_50us)]);
        assert_eq!(c.series[1].points[0], (0.5, us(want.percentile(99.0))));
        assert!((c.series[1].points[0].1 - 1000.0).abs() < 1000.0 / 64.0, "p99 is the 1 ms bucket");
        // Coarseness 6: 29 columns of 64 buckets each.
        let coarse =
            format!("0, 1, 4096, {}\n", (0..29).map(|i| if i == 3 { "7" } else { "0" }).collect::<Vec<_>>().join(", "));
        let log = parse(&p("j_clat_hist.1.log"), &coarse).unwrap();
        assert_eq!(log.hist[0].stride(), 64);
        assert_eq!(chart(&log, &PlotOpts { window_ms: None }).series[0].name, "write p50");
        // A line with a column count of no coarseness is named.
        let e = parse(&p("j_clat_hist.1.log"), "0, 0, 4096, 1, 2, 3\n").unwrap_err().to_string();
        assert!(e.starts_with("/x/j_clat_hist.1.log:1: 6 columns; a fio histogram log line"), "{e}");
    }

    #[test]
    fn plot_files_writes_one_svg_per_log_and_refuses_clashes() {
        let scratch = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-fiolog");
        let dir = scratch.dir();
        let a = dir.join("j_iops.1.log");
        std::fs::write(&a, "500, 1200, 0, 4096, 0\n1000, 1300, 0, 4096, 0\n").unwrap();
        let out = dir.join("out");
        let files = plot_files(std::slice::from_ref(&a), &out, &PlotOpts { window_ms: None }).unwrap();
        assert_eq!(files, [(out.join("j_iops.1.svg"), 2)]);
        assert!(std::fs::read_to_string(&files[0].0).unwrap().contains(">IOPS (I/Os per second)</text>"));
        let e = plot_files(&[a.clone(), a.clone()], &out, &PlotOpts { window_ms: None }).unwrap_err();
        assert!(e.to_string().contains("j_iops.1.svg"), "{e}");
        let e = plot_files(&[dir.join("missing_lat.1.log")], &out, &PlotOpts { window_ms: None }).unwrap_err();
        assert!(e.to_string().contains("missing_lat.1.log: cannot read"), "{e}");
        assert!(plot_files(&[], &out, &PlotOpts { window_ms: None }).is_err());
    }

    /// fio's in-memory sample (`struct io_sample`, + offset), as `gz_work` deflates it.
    fn sample(time: u64, value: u64, ddir: u32, prio: u16, bs: u64, offset: Option<u64>) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&value.to_ne_bytes());
        b.extend_from_slice(&ddir.to_ne_bytes());
        b.extend_from_slice(&prio.to_ne_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&bs.to_ne_bytes());
        if let Some(o) = offset {
            b.extend_from_slice(&o.to_ne_bytes());
        }
        b
    }

    fn deflate(raw: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(raw).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn compressed_logs_inflate_stream_by_stream_into_fios_text() {
        // Two streams, as fio writes one per block of samples: the first without offsets
        // (a real-time priority prints 1, class 1 << 13), the second with offsets and
        // log_prio (hex): each stream's columns come from its first sample.
        let mut one = sample(1, 1500, 0, 1 << 13, 4096, None);
        one.extend(sample(2, 2500, 1, 4, 8192, None));
        let two = sample(9, 700, (1 << 31) | (1 << 30) | 2, 0x2004, 4096, Some(12288));
        let mut file = deflate(&one);
        file.extend(deflate(&two));
        assert_eq!(
            inflate(&file).unwrap(),
            "1, 1500, 0, 4096, 1\n2, 2500, 1, 8192, 0\n9, 700, 2, 4096, 12288, 0x2004\n"
        );
        assert_eq!(inflate(&[]).unwrap(), "");
        // What is not fio's format is named.
        let e = inflate(b"not zlib").unwrap_err();
        assert!(e.contains("stream 1 (byte 0) does not inflate"), "{e}");
        let mut bad = file.clone();
        bad.extend(deflate(&one[..40]));
        let e = inflate(&bad).unwrap_err();
        assert!(e.contains("stream 3") && e.contains("40 bytes, not a whole number of fio's 32-byte samples"), "{e}");
        let e = inflate(&file[..file.len() - 3]).unwrap_err();
        assert!(e.contains("stream 2") && e.contains("does not inflate"), "{e}");
    }

    #[test]
    fn inflating_stops_at_the_cap_over_all_streams() {
        // Three streams of two 32-byte samples each: 192 bytes of samples in all.
        let raw: Vec<u8> = (0..2u64).flat_map(|i| sample(i, 100 + i, 0, 0, 4096, None)).collect();
        let file: Vec<u8> = (0..3).flat_map(|_| deflate(&raw)).collect();
        assert_eq!(inflate_capped(&file, 192).unwrap().lines().count(), 6);
        let e = inflate_capped(&file, 191).unwrap_err();
        assert!(e.contains("zlib stream 3 (byte") && e.contains("inflates past 191 bytes of samples in all"), "{e}");
        // A zlib bomb: 64 MiB of zeroes deflate to about 64 KiB; past a 1 MiB cap it stops
        // without inflating the rest.
        let bomb = deflate(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        let e = inflate_capped(&bomb, 1 << 20).unwrap_err();
        assert!(e.contains("zlib stream 1 (byte 0) inflates past 1048576 bytes"), "{e}");
    }

    #[test]
    fn compressed_logs_are_read_and_named_as_their_text_logs() {
        let s = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-fiolog-fz");
        let raw: Vec<u8> = (0..50u64).flat_map(|i| sample(i, 1000 + i, (i % 2) as u32, 0, 4096, None)).collect();
        let fz = s.dir().join("j_clat.3.log.fz");
        std::fs::write(&fz, deflate(&raw)).unwrap();
        let text = s.dir().join("j_clat.3.log");
        std::fs::write(&text, inflate(&deflate(&raw)).unwrap()).unwrap();
        let (a, b) = (read(&fz).unwrap(), read(&text).unwrap());
        assert_eq!((a.kind, a.samples.len()), (LogKind::Clat, 50));
        assert_eq!(a.samples, b.samples);
        assert_eq!((svg_name(&fz), svg_name(&text)), ("j_clat.3.svg".to_string(), "j_clat.3.svg".to_string()));
        // fio deflates its histogram logs' pointers: refused, saying so.
        let hist = s.dir().join("j_clat_hist.1.log.fz");
        std::fs::write(&hist, deflate(&raw)).unwrap();
        let e = read(&hist).unwrap_err().to_string();
        assert!(e.contains("j_clat_hist.1.log.fz: a compressed histogram log cannot be read"), "{e}");
        let garbage = s.dir().join("j_bw.log.fz");
        std::fs::write(&garbage, b"plain text, 1, 2").unwrap();
        let e = read(&garbage).unwrap_err().to_string();
        assert!(e.contains("j_bw.log.fz: zlib stream 1 (byte 0) does not inflate"), "{e}");
    }
}
