//! fio's time-series logs (`write_lat_log`, `write_bw_log`, `write_iops_log`) in fio
//! 3.33's exact format, so fio's tools (`fio2gnuplot`, `fio_generate_plots`,
//! `fiologparser.py`) read ours unchanged.
//!
//! One line per entry, fio's `flush_samples` (iolog.c):
//! `time, value, direction, block size, priority`, or with `log_offset=1`
//! `time, value, direction, block size, offset, priority`; `time` is ms since the job's
//! epoch (its start, or the end of its ramp), direction 0 read / 1 write / 2 trim, priority 1
//! for a real-time I/O priority class (`prioclass=1`), else 0, or with `log_prio=1` the
//! I/O priority value in hex; averaged entries carry 0, as fio's.
//!
//! Values (fio's stat.c): latency logs in ns (`lat` = complete − start, `clat` = complete −
//! issue, `slat` = issue − start); without `log_avg_msec` one entry per I/O, with its block
//! size and offset; the `bw` log per I/O is `bytes × 10⁶ / clat_ns` and the `iops` log
//! per I/O is 1.
//!
//! With `log_avg_msec=N`, fio's `add_log_sample`: samples of a direction go into a
//! window; the window is written (block size and offset 0) when a sample arrives N ms or
//! more after the window's start, with the window's mean rounded (`mean + 0.5`), or its
//! maximum with `log_max_value=1`; the next window starts at the sample's time rounded
//! down to a multiple of N, and what is left is written when the job ends. The `bw`
//! (KiB/s) and `iops` logs are then rates over intervals: every N ms (1 ms early is
//! close enough, fio's `LOG_MSEC_SLACK`) the bytes and I/Os done since the last
//! interval, per direction that did any, divided by its length (fio's `__add_samples`),
//! each a sample of the same windowing with the block size when the job has one.
//!
//! fio takes the bw/iops intervals on a helper thread; here the worker takes them at its
//! completions, so an interval ends at the first completion N ms after the last one.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The log options of a job (fio's names; defaults: fio's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogOpts {
    /// `write_lat_log`: the prefix of the `lat`, `clat` and `slat` logs (empty: the job's
    /// name).
    pub lat: Option<String>,
    /// `write_bw_log`: the prefix of the `bw` log.
    pub bw: Option<String>,
    /// `write_iops_log`: the prefix of the `iops` log.
    pub iops: Option<String>,
    /// `log_avg_msec` (0: one entry per I/O).
    pub avg_msec: u32,
    /// `bwavgtime` where the job sets it: the window (ms) of the bandwidth samples its
    /// statistics take; unset: 500 ms, or with a `bw` log the log's (see
    /// [`LogOpts::sample_windows`]).
    pub bw_avg_msec: Option<u32>,
    /// `iopsavgtime`, as `bwavgtime` for the IOPS samples.
    pub iops_avg_msec: Option<u32>,
    /// `log_max_value`: averaged entries hold the window's maximum, not its mean.
    pub max_value: bool,
    /// `log_offset`: entries carry the I/O's offset.
    pub offset: bool,
    /// `per_job_logs` (default on): the job's number is in the file name; off: every job
    /// appends to one file per prefix and kind.
    pub per_job: bool,
    /// `write_hist_log`: the prefix of the `clat_hist` log.
    pub hist: Option<String>,
    /// `log_hist_msec`: how often the `clat_hist` log takes a histogram (0: never, as fio).
    pub hist_msec: u32,
    /// `log_hist_coarseness`: 2^N of fio's latency buckets summed into one column (0..=6).
    pub hist_coarseness: u32,
    /// `log_compression`: fio keeps a log's entries compressed in memory in chunks of
    /// this many bytes and inflates them into the same text file at the end (0: off);
    /// here the entries stay in memory as they are and the file is the same.
    pub compression: u64,
    /// `log_prio`: the priority column holds the I/O's priority value in hex (`0x0000`:
    /// none set; see `ioprio`) instead of 1/0 for a real-time class.
    pub prio: bool,
    /// `log_store_compressed`: the logs are written as fio's `.log.fz` files (see
    /// [`Log::compressed`]), which `fio --inflate-log` turns into the text logs.
    pub store_compressed: bool,
    /// The job's I/O priority value (`prioclass`/`prio`, [`crate::placement`]; 0: none
    /// set): fio's per-I/O entries carry it (its priority column), averaged ones 0.
    pub ioprio: u16,
}

impl LogOpts {
    /// The windows (ns) over which the job's bandwidth and IOPS statistics take their
    /// samples, as fio 3.33 sets them (init.c, `setup_log`'s callers; stat.c): `bwavgtime`
    /// / `iopsavgtime` where given, else 500 ms, but with a `bw` (`iops`) log the log's
    /// `log_avg_msec`; and `None` where that log has one entry per I/O (`log_avg_msec=0`):
    /// then each I/O is a sample (fio's `per_unit_log`: its bytes over its clat, and 1).
    pub fn sample_windows(&self) -> [Option<u64>; 2] {
        let window = |log: &Option<String>, set: Option<u32>| match (log.is_some(), set) {
            (true, _) if self.avg_msec == 0 => None,
            (_, Some(ms)) => Some(u64::from(ms) * 1_000_000),
            (true, None) => Some(u64::from(self.avg_msec) * 1_000_000),
            (false, None) => Some(500_000_000),
        };
        [window(&self.bw, self.bw_avg_msec), window(&self.iops, self.iops_avg_msec)]
    }
}

impl Default for LogOpts {
    fn default() -> Self {
        LogOpts {
            lat: None,
            bw: None,
            iops: None,
            avg_msec: 0,
            bw_avg_msec: None,
            iops_avg_msec: None,
            max_value: false,
            offset: false,
            per_job: true,
            hist: None,
            hist_msec: 0,
            hist_coarseness: 0,
            prio: false,
            compression: 0,
            store_compressed: false,
            ioprio: 0,
        }
    }
}

impl LogOpts {
    /// Whether any log is written.
    pub fn any(&self) -> bool {
        self.lat.is_some() || self.bw.is_some() || self.iops.is_some() || self.hist.is_some()
    }
}

/// What a log holds: the reader's kinds ([`crate::fiolog::LogKind`]), of which the writer
/// makes `Lat`, `Clat`, `Slat`, `Bw` and `Iops` (its histogram log is [`HistLog`]).
/// Values: latencies in ns; bandwidth per I/O bytes × 10⁶ / clat ns, averaged KiB/s;
/// IOPS per I/O 1.
pub use crate::fiolog::LogKind;

/// One line of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// ms since the job's epoch.
    pub time_ms: u64,
    /// The value (see [`LogKind`]).
    pub value: u64,
    /// 0 read, 1 write, 2 trim.
    pub ddir: u8,
    /// Block size (0 in averaged entries).
    pub bs: u64,
    /// Offset (0 in averaged entries).
    pub offset: u64,
    /// The I/O's own priority (`cmdprio_*`, [`crate::cmdprio`]); 0: the job's.
    pub prio: u16,
}

/// fio's `io_stat` window of averaged samples.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    samples: u64,
    mean: f64,
    max: u64,
}

impl Window {
    fn add(&mut self, v: u64) {
        self.samples += 1;
        self.mean += (v as f64 - self.mean) / self.samples as f64;
        self.max = self.max.max(v);
    }
}

/// One log of one job instance.
#[derive(Clone, Debug)]
pub struct Log {
    /// What it holds.
    pub kind: LogKind,
    /// The file's prefix.
    pub prefix: String,
    /// The entries, in order.
    pub entries: Vec<Entry>,
    avg_msec: u64,
    max_value: bool,
    window: [Window; 3],
    avg_last: [u64; 3],
    ioprio: u16,
}

impl Log {
    /// An empty log.
    pub fn new(kind: LogKind, prefix: &str, opts: &LogOpts) -> Log {
        Log {
            kind,
            prefix: prefix.to_string(),
            entries: Vec::new(),
            avg_msec: u64::from(opts.avg_msec),
            max_value: opts.max_value,
            window: [Window::default(); 3],
            avg_last: [0; 3],
            ioprio: opts.ioprio,
        }
    }

    /// fio's `add_log_sample`: one sample at `time_ms` (see the module docs). `slack`:
    /// the window may close this many ms early (fio's bw and iops logs: 1; latency: 0).
    pub fn add(&mut self, e: Entry, slack: u64) {
        if self.avg_msec == 0 {
            self.entries.push(e);
            return;
        }
        let d = (e.ddir as usize).min(2);
        self.window[d].add(e.value);
        let elapsed = e.time_ms;
        if elapsed < self.avg_last[d] {
            return;
        }
        let this_window = elapsed - self.avg_last[d];
        if this_window < self.avg_msec && self.avg_msec - this_window > slack {
            return;
        }
        self.close(d, elapsed);
        self.avg_last[d] = elapsed - elapsed % self.avg_msec;
    }

    /// Writes direction `d`'s window, if it holds samples, at `time_ms`.
    fn close(&mut self, d: usize, time_ms: u64) {
        let w = std::mem::take(&mut self.window[d]);
        if w.samples > 0 {
            let value = if self.max_value { w.max } else { (w.mean + 0.5) as u64 };
            self.entries.push(Entry { time_ms, value, ddir: d as u8, bs: 0, offset: 0, prio: 0 });
        }
    }

    /// fio's `finalize_logs`: what is left in the windows, at the job's end.
    pub fn finish(&mut self, time_ms: u64) {
        if self.avg_msec > 0 {
            for d in 0..3 {
                self.close(d, time_ms);
            }
        }
    }

    /// The priority an entry shows: an I/O's own, else the job's; 0 for averaged ones.
    fn prio_of(&self, e: &Entry) -> u16 {
        match (self.avg_msec, e.prio) {
            (0, 0) => self.ioprio,
            (0, p) => p,
            _ => 0,
        }
    }

    /// The entries in fio's text format (`prio`: `log_prio`'s hex priority column).
    pub fn render(&self, with_offset: bool, prio: bool) -> String {
        let mut s = String::with_capacity(self.entries.len() * 24);
        // fio's column: the I/O's priority value in hex with log_prio, else 1 for the
        // real-time class; per-I/O entries (no averaging) carry the I/O's priority (its
        // own, or the job's).
        let column = |v: u16| {
            if prio {
                format!("0x{v:04x}")
            } else {
                u8::from(v >> crate::placement::IOPRIO_CLASS_SHIFT == crate::placement::IOPRIO_CLASS_RT).to_string()
            }
        };
        for e in &self.entries {
            use std::fmt::Write as _;
            let p = column(self.prio_of(e));
            let _ = if with_offset {
                writeln!(s, "{}, {}, {}, {}, {}, {p}", e.time_ms, e.value, e.ddir, e.bs, e.offset)
            } else {
                writeln!(s, "{}, {}, {}, {}, {p}", e.time_ms, e.value, e.ddir, e.bs)
            };
        }
        s
    }

    /// The entries as fio keeps them in memory (iolog.h `struct io_sample`, and
    /// `struct io_sample_offset` with `log_offset`), in this machine's byte order as fio
    /// writes them: `time` u64, `value` u64, direction u32 with fio's flag bits
    /// (`LOG_OFFSET_SAMPLE_BIT` 1<<31 with offsets, `LOG_PRIO_SAMPLE_BIT` 1<<30 with
    /// `log_prio`: the inflater reads the columns from the first entry's bits), priority
    /// u16 (0: jobs here set none), 2 bytes of padding, block size u64, and the offset u64
    /// with `log_offset`: 32 or 40 bytes an entry.
    pub fn samples(&self, with_offset: bool, prio: bool) -> Vec<u8> {
        let flags = if with_offset { 1u32 << 31 } else { 0 } | if prio { 1u32 << 30 } else { 0 };
        let mut b = Vec::with_capacity(self.entries.len() * if with_offset { 40 } else { 32 });
        for e in &self.entries {
            b.extend_from_slice(&e.time_ms.to_ne_bytes());
            b.extend_from_slice(&e.value.to_ne_bytes());
            b.extend_from_slice(&(u32::from(e.ddir) | flags).to_ne_bytes());
            b.extend_from_slice(&self.prio_of(e).to_ne_bytes());
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&e.bs.to_ne_bytes());
            if with_offset {
                b.extend_from_slice(&e.offset.to_ne_bytes());
            }
        }
        b
    }

    /// The log as fio's `log_store_compressed=1` writes it (iolog.c `gz_work` and
    /// `inflate_gz_chunks`): the entries' [`Log::samples`] deflated into a zlib stream
    /// (zlib header, default level). fio writes one such stream per block of entries it
    /// kept in memory, one after the other; `fio --inflate-log` inflates the streams of a
    /// file in turn and prints each one's entries as the text log, so one stream holding
    /// every entry reads back the same. A log without entries is an empty file (fio's
    /// inflater prints nothing for it either).
    pub fn compressed(&self, with_offset: bool, prio: bool) -> Vec<u8> {
        if self.entries.is_empty() {
            return Vec::new();
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&self.samples(with_offset, prio)).expect("deflating into memory");
        z.finish().expect("deflating into memory")
    }

    /// fio's file name of this log for job number `number` (1-based over every job and
    /// clone of the run, as fio's `thread_number`): `PREFIX_KIND.N.log`, or
    /// `PREFIX_KIND.log` without `per_job_logs`; `.log.fz` for `log_store_compressed`.
    pub fn file_name(&self, number: u32, per_job: bool) -> PathBuf {
        let kind = self.kind.as_str();
        PathBuf::from(if per_job {
            format!("{}_{kind}.{number}.log", self.prefix)
        } else {
            format!("{}_{kind}.log", self.prefix)
        })
    }
}

/// One line of the `clat_hist` log: the completion-latency histogram of a direction
/// since the previous line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistEntry {
    /// ms since the job's epoch.
    pub time_ms: u64,
    /// 0 read, 1 write, 2 trim.
    pub ddir: u8,
    /// Block size of the I/O that closed the interval.
    pub bs: u64,
    /// I/Os per bucket group (fio's buckets, 2^coarseness to a column) in the interval.
    pub counts: Vec<u64>,
}

/// fio's `clat_hist` log (`write_hist_log`; stat.c's `add_clat_sample` and iolog.c's
/// `flush_hist_samples`): at the first completion `log_hist_msec` or more after the last
/// line of its direction (the first interval starts at the direction's first completion),
/// a line `time, direction, block size, c0, c1, …`: per group of 2^`log_hist_coarseness`
/// of fio's 1856 latency buckets ([`crate::hist`]), the completions in it since the
/// direction's previous line. The next interval starts `log_hist_msec` after the last one
/// did (the lateness of this one is made up).
#[derive(Clone, Debug)]
pub struct HistLog {
    /// The file's prefix.
    pub prefix: String,
    /// The lines, in order.
    pub entries: Vec<HistEntry>,
    msec: u64,
    stride: usize,
    counts: bool,
    cum: [Vec<u64>; 3],
    before: [Vec<u64>; 3],
    last: [u64; 3],
}

impl HistLog {
    /// An empty log; `counts`: whether latencies go into the histogram (fio fills it only
    /// with `clat_percentiles`, its default).
    pub fn new(prefix: &str, opts: &LogOpts, counts: bool) -> HistLog {
        let n = crate::hist::PLAT_NR;
        HistLog {
            prefix: prefix.to_string(),
            entries: Vec::new(),
            msec: u64::from(opts.hist_msec),
            stride: 1 << opts.hist_coarseness.min(6),
            counts,
            cum: [vec![0; n], vec![0; n], vec![0; n]],
            before: [vec![0; n], vec![0; n], vec![0; n]],
            last: [0; 3],
        }
    }

    /// One completion of direction `d` with completion latency `clat_ns` at `time_ms`.
    pub fn add(&mut self, time_ms: u64, d: usize, bs: u64, clat_ns: u64) {
        if self.counts {
            self.cum[d][crate::hist::bucket_index(clat_ns)] += 1;
        }
        if self.msec == 0 {
            return;
        }
        if self.last[d] == 0 {
            self.last[d] = time_ms;
        }
        let window = time_ms.saturating_sub(self.last[d]);
        if window < self.msec {
            return;
        }
        let counts = (0..crate::hist::PLAT_NR)
            .step_by(self.stride)
            .map(|j| (j..j + self.stride).map(|k| self.cum[d][k] - self.before[d][k]).sum())
            .collect();
        self.before[d].clone_from(&self.cum[d]);
        self.entries.push(HistEntry { time_ms, ddir: d as u8, bs, counts });
        self.last[d] = time_ms - (window - self.msec);
    }

    /// The lines in fio's text format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for e in &self.entries {
            use std::fmt::Write as _;
            let _ = write!(s, "{}, {}, {}", e.time_ms, e.ddir, e.bs);
            for c in &e.counts {
                let _ = write!(s, ", {c}");
            }
            s.push('\n');
        }
        s
    }

    /// fio's file name: `PREFIX_clat_hist.N.log`, or `PREFIX_clat_hist.log` without
    /// `per_job_logs`.
    pub fn file_name(&self, number: u32, per_job: bool) -> PathBuf {
        PathBuf::from(if per_job {
            format!("{}_clat_hist.{number}.log", self.prefix)
        } else {
            format!("{}_clat_hist.log", self.prefix)
        })
    }
}

/// The logs of one job instance and the interval state of its bw and iops logs.
#[derive(Clone, Debug, Default)]
pub struct JobLogs {
    /// Every log the job writes.
    pub logs: Vec<Log>,
    /// The `clat_hist` log, if the job writes it.
    pub hist: Option<HistLog>,
    lat: Option<[usize; 3]>,
    bw: Option<usize>,
    iops: Option<usize>,
    avg_msec: u64,
    /// Fixed block size per direction (0: it varies), for averaged bw/iops entries;
    /// trims take the writes' (as the engine's trims do).
    bs: [u64; 3],
    last_ms: u64,
    /// Whether per-I/O bw and iops entries are written (fio: not with `disable_bw`).
    per_io_rates: bool,
    /// Bytes and I/Os done per direction (read, write, trim) since the epoch, and at the
    /// last interval.
    done: [(u64, u64); 3],
    at_last: [(u64, u64); 3],
}

impl JobLogs {
    /// The logs `opts` asks for, of a job named `name` with block sizes `bs`; with the
    /// latency kinds fio leaves out where the job does not measure them (`measured`: lat,
    /// slat, clat; `disable_lat`, `disable_slat`, `disable_clat`), and no per-I/O bw and iops
    /// entries without bandwidth measurement (`measured[3]`: not `disable_bw`).
    pub fn new(opts: &LogOpts, name: &str, bs: [u64; 2], measured: [bool; 4]) -> JobLogs {
        let mut l = JobLogs {
            avg_msec: u64::from(opts.avg_msec),
            bs: [bs[0], bs[1], bs[1]],
            per_io_rates: measured[3],
            ..JobLogs::default()
        };
        let prefix = |p: &String| if p.is_empty() { name.to_string() } else { p.clone() };
        l.hist = opts.hist.as_ref().map(|p| HistLog::new(&prefix(p), opts, measured[2]));
        if let Some(p) = &opts.lat {
            let mut idx = [usize::MAX; 3];
            for (i, kind) in [LogKind::Lat, LogKind::Slat, LogKind::Clat].into_iter().enumerate() {
                if measured[i] {
                    idx[i] = l.logs.len();
                    l.logs.push(Log::new(kind, &prefix(p), opts));
                }
            }
            l.lat = Some(idx);
        }
        if let Some(p) = &opts.bw {
            l.bw = Some(l.logs.len());
            l.logs.push(Log::new(LogKind::Bw, &prefix(p), opts));
        }
        if let Some(p) = &opts.iops {
            l.iops = Some(l.logs.len());
            l.logs.push(Log::new(LogKind::Iops, &prefix(p), opts));
        }
        l
    }

    /// Starts the logs' clock over (the ramp ended): fio's epoch moves there.
    pub fn restart(&mut self) {
        self.done = [(0, 0); 3];
        self.at_last = [(0, 0); 3];
        self.last_ms = 0;
        for log in &mut self.logs {
            log.entries.clear();
            log.window = [Window::default(); 3];
            log.avg_last = [0; 3];
        }
        if let Some(h) = self.hist.as_mut() {
            *h = HistLog { entries: Vec::new(), ..h.clone() };
            for d in 0..3 {
                h.cum[d].fill(0);
                h.before[d].fill(0);
            }
            h.last = [0; 3];
        }
    }

    /// One completed I/O of direction `d` (0 read, 1 write, 2 trim: fio's ddir) at
    /// `time_ms`: its latencies (ns; `slat` `None` for a sync job), block size and offset.
    pub fn io(&mut self, time_ms: u64, d: usize, len: u64, offset: u64, lat: [Option<u64>; 3], prio: u16) {
        let d = d.min(2);
        let ddir = d as u8;
        self.done[d].0 += len;
        self.done[d].1 += 1;
        if let Some(idx) = self.lat {
            for (i, v) in lat.into_iter().enumerate() {
                if let (Some(v), Some(log)) = (v, self.logs.get_mut(idx[i])) {
                    log.add(Entry { time_ms, value: v, ddir, bs: len, offset, prio }, 0);
                }
            }
        }
        if let (Some(h), Some(clat)) = (self.hist.as_mut(), lat[2]) {
            h.add(time_ms, d, len, clat);
        }
        if self.avg_msec == 0 && self.per_io_rates {
            // fio's per-I/O bw and iops entries.
            if let (Some(i), Some(clat)) = (self.bw, lat[2]) {
                let value = (len * 1_000_000).checked_div(clat).unwrap_or(0);
                self.logs[i].add(Entry { time_ms, value, ddir, bs: len, offset, prio }, 0);
            }
            if let Some(i) = self.iops {
                self.logs[i].add(Entry { time_ms, value: 1, ddir, bs: len, offset, prio }, 0);
            }
        }
    }

    /// fio's `__add_samples` for the averaged bw and iops logs at `time_ms`: when an
    /// interval of `log_avg_msec` (less 1 ms of slack) has passed, one rate per
    /// direction that did I/O in it.
    pub fn tick(&mut self, time_ms: u64) {
        if self.avg_msec == 0 || (self.bw.is_none() && self.iops.is_none()) {
            return;
        }
        let spent = time_ms.saturating_sub(self.last_ms);
        if spent < self.avg_msec && self.avg_msec - spent > 1 {
            return;
        }
        for d in 0..3 {
            let (bytes, ios) = (self.done[d].0 - self.at_last[d].0, self.done[d].1 - self.at_last[d].1);
            if ios == 0 {
                continue;
            }
            let bs = self.bs[d];
            let rate = |delta: u64, kib: bool| match spent {
                0 => 0,
                s if kib => delta * 1000 / s / 1024,
                s => delta * 1000 / s,
            };
            let ddir = d as u8;
            if let Some(i) = self.bw {
                self.logs[i].add(Entry { time_ms, value: rate(bytes, true), ddir, bs, offset: 0, prio: 0 }, 1);
            }
            if let Some(i) = self.iops {
                self.logs[i].add(Entry { time_ms, value: rate(ios, false), ddir, bs, offset: 0, prio: 0 }, 1);
            }
            self.at_last[d] = self.done[d];
        }
        self.last_ms = time_ms;
    }

    /// The job ended at `time_ms`: what is left in the windows (fio's `finalize_logs`; as
    /// in fio, the bw and iops rates of an interval cut short by the end are not taken).
    pub fn finish(&mut self, time_ms: u64) {
        for log in &mut self.logs {
            log.finish(time_ms);
        }
    }
}

/// Writes the logs of every job instance of a run: `logs[k]` is job number k + 1 (fio's
/// numbering over jobs and their clones, in order; `None`: a job without logs). Without `per_job_logs` the entries are
/// appended to the file, as fio does (it opens such files for appending).
pub fn write_all(logs: &[(&LogOpts, Option<&JobLogs>)]) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (k, (opts, job)) in logs.iter().enumerate() {
        let n = k as u32 + 1;
        let files = job.iter().flat_map(|j| &j.logs).map(|log| {
            let path = log.file_name(n, opts.per_job);
            if opts.store_compressed {
                (path.with_extension("log.fz"), log.compressed(opts.offset, opts.prio))
            } else {
                (path, log.render(opts.offset, opts.prio).into_bytes())
            }
        });
        // The hist log with log_store_compressed is refused by the job file's checks.
        let hist = job.and_then(|j| j.hist.as_ref()).map(|h| (h.file_name(n, opts.per_job), h.render().into_bytes()));
        for (path, text) in files.chain(hist) {
            write_log(&path, &text, opts.per_job)?;
            if !written.contains(&path) {
                written.push(path);
            }
        }
    }
    Ok(written)
}

/// Writes one log file: a new file with `per_job_logs`, else appended to (fio opens
/// shared log files for appending). An error names the file and what was being done.
fn write_log(path: &Path, text: &[u8], per_job: bool) -> std::io::Result<()> {
    let what =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("writing the fio log {}: {e}", path.display()));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(!per_job)
        .truncate(per_job)
        .open(path)
        .map_err(what)?;
    f.write_all(text).map_err(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_sample_windows_follow_fios_rules() {
        let ms = 1_000_000;
        let w = |bw: Option<&str>, iops: Option<&str>, avg, bwt, iopst| {
            LogOpts {
                bw: bw.map(String::from),
                iops: iops.map(String::from),
                avg_msec: avg,
                bw_avg_msec: bwt,
                iops_avg_msec: iopst,
                ..LogOpts::default()
            }
            .sample_windows()
        };
        // No logs: 500 ms unless set.
        assert_eq!(w(None, None, 0, None, None), [Some(500 * ms); 2]);
        assert_eq!(w(None, None, 0, Some(100), Some(250)), [Some(100 * ms), Some(250 * ms)]);
        // A log averaged over log_avg_msec: its kind samples over that window, unless set.
        assert_eq!(w(Some("b"), None, 100, None, None), [Some(100 * ms), Some(500 * ms)]);
        assert_eq!(w(Some("b"), Some("i"), 100, Some(200), None), [Some(200 * ms), Some(100 * ms)]);
        // A log of one entry per I/O: one sample per I/O of its kind, whatever is set.
        assert_eq!(w(Some("b"), None, 0, Some(200), None), [None, Some(500 * ms)]);
        assert_eq!(w(None, Some("i"), 0, None, None), [Some(500 * ms), None]);
    }

    fn opts(avg: u32, max: bool) -> LogOpts {
        LogOpts { lat: Some(String::new()), avg_msec: avg, max_value: max, ..LogOpts::default() }
    }

    fn e(t: u64, v: u64, d: u8) -> Entry {
        Entry { time_ms: t, value: v, ddir: d, bs: 4096, offset: 8192, prio: 0 }
    }

    #[test]
    fn lines_are_fios_columns_with_and_without_offset() {
        let mut log = Log::new(LogKind::Clat, "j", &opts(0, false));
        log.add(e(3, 12345, 1), 0);
        assert_eq!(log.render(false, false), "3, 12345, 1, 4096, 0\n");
        assert_eq!(log.render(true, false), "3, 12345, 1, 4096, 8192, 0\n");
        // log_prio: fio's hex priority value (none set: 0).
        assert_eq!(log.render(false, true), "3, 12345, 1, 4096, 0x0000\n");
    }

    #[test]
    fn per_io_entries_carry_the_jobs_io_priority_averaged_ones_none() {
        // prioclass=1 prio=2: fio's column is 1 (real-time) without log_prio, the value with.
        let rt = LogOpts { ioprio: 1 << 13 | 2, ..opts(0, false) };
        let mut log = Log::new(LogKind::Clat, "j", &rt);
        log.add(e(3, 12345, 1), 0);
        assert_eq!(log.render(false, false), "3, 12345, 1, 4096, 1\n");
        assert_eq!(log.render(false, true), "3, 12345, 1, 4096, 0x2002\n");
        assert_eq!(&log.samples(false, true)[20..22], &(0x2002u16).to_ne_bytes());
        let idle = LogOpts { ioprio: 3 << 13, ..opts(0, false) };
        let mut log = Log::new(LogKind::Clat, "j", &idle);
        log.add(e(3, 12345, 1), 0);
        assert_eq!(log.render(false, false), "3, 12345, 1, 4096, 0\n");
        assert_eq!(log.render(false, true), "3, 12345, 1, 4096, 0x6000\n");
        let mut avg = Log::new(LogKind::Clat, "j", &LogOpts { avg_msec: 10, ..rt });
        for t in [1, 5, 12] {
            avg.add(e(t, 100, 0), 0);
        }
        assert!(!avg.entries.is_empty());
        assert!(avg.render(false, true).lines().all(|l| l.ends_with(", 0x0000")), "{}", avg.render(false, true));
    }

    #[test]
    fn compressed_logs_hold_fios_samples_in_a_zlib_stream() {
        use std::io::Read as _;
        let mut log = Log::new(LogKind::Clat, "j", &opts(0, false));
        log.add(e(3, 12345, 1), 0);
        log.add(e(7, u64::MAX - 1, 2), 0);
        for (offset, prio, size) in [(false, false, 32), (true, false, 40), (true, true, 40)] {
            let z = log.compressed(offset, prio);
            assert_eq!(&z[..2], &[0x78, 0x9c], "a zlib header at the default level");
            let mut raw = Vec::new();
            flate2::read::ZlibDecoder::new(&z[..]).read_to_end(&mut raw).unwrap();
            assert_eq!(raw, log.samples(offset, prio));
            assert_eq!(raw.len(), 2 * size);
            let u64_at = |i: usize| u64::from_ne_bytes(raw[i..i + 8].try_into().unwrap());
            let ddir = u32::from_ne_bytes(raw[size + 16..size + 20].try_into().unwrap());
            let bits = if offset { 1 << 31 } else { 0 } | if prio { 1 << 30 } else { 0 };
            assert_eq!((u64_at(size), u64_at(size + 8), ddir, u64_at(size + 24)), (7, u64::MAX - 1, 2 | bits, 4096));
            assert_eq!(&raw[size + 20..size + 24], &[0; 4], "priority 0 and padding");
            if offset {
                assert_eq!(u64_at(size + 32), 8192);
            }
        }
        assert!(Log::new(LogKind::Lat, "j", &opts(0, false)).compressed(false, false).is_empty());
    }

    /// fio's own inflater reads our `.log.fz` files back into exactly the text logs we
    /// write without `log_store_compressed`.
    #[test]
    fn fio_inflates_our_compressed_logs_into_our_text_logs() {
        let test = "fio_inflates_our_compressed_logs_into_our_text_logs";
        if std::process::Command::new("fio").arg("--version").output().is_err() {
            eprintln!("skipping {test}: fio is not on PATH (./scripts/test installs it with apt)");
            return;
        }
        let s = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-iolog-fz");
        let mut log = Log::new(LogKind::Lat, "x", &opts(0, false));
        for i in 0..5000u64 {
            log.add(
                Entry {
                    time_ms: i / 7,
                    value: 1000 + i * i,
                    ddir: (i % 3) as u8,
                    bs: 4096 << (i % 4),
                    offset: i * 4096,
                    prio: 0,
                },
                0,
            );
        }
        for (offset, prio) in [(false, false), (true, false), (false, true), (true, true)] {
            for per_job in [true, false] {
                let lo =
                    LogOpts { lat: Some(s.path("t")), offset, prio, per_job, store_compressed: true, ..opts(0, false) };
                let mut jl = JobLogs::new(&lo, "j", [4096; 2], [true, false, false, true]);
                jl.logs[0].entries = log.entries.clone();
                // Two jobs: without per_job_logs the second appends its stream to the file.
                let written = write_all(&[(&lo, Some(&jl)), (&lo, Some(&jl))]).unwrap();
                let want = log.render(offset, prio).repeat(if per_job { 1 } else { 2 });
                let name = if per_job { "t_lat.1.log.fz" } else { "t_lat.log.fz" };
                let path = s.dir().join(name);
                assert!(written.contains(&path), "{written:?}");
                let o = std::process::Command::new("fio")
                    .arg(format!("--inflate-log={}", path.display()))
                    .output()
                    .unwrap();
                assert!(o.status.success(), "fio --inflate-log: {}", String::from_utf8_lossy(&o.stderr));
                assert!(String::from_utf8_lossy(&o.stdout) == want, "offset {offset} prio {prio} per_job {per_job}");
                // Our reader (`ioswitch bench plot`'s) inflates it as fio does.
                let ours = crate::fiolog::inflate(&std::fs::read(&path).unwrap()).unwrap();
                assert!(ours == String::from_utf8_lossy(&o.stdout), "fiolog::inflate, offset {offset} prio {prio}");
                std::fs::remove_file(&path).unwrap();
            }
        }
    }

    #[test]
    fn file_names_follow_fio() {
        let log = Log::new(LogKind::Bw, "mylog", &opts(0, false));
        assert_eq!(log.file_name(3, true), PathBuf::from("mylog_bw.3.log"));
        assert_eq!(log.file_name(3, false), PathBuf::from("mylog_bw.log"));
        let l = JobLogs::new(&opts(0, false), "job1", [4096; 2], [true; 4]);
        let names: Vec<_> = l.logs.iter().map(|g| g.file_name(1, true)).collect();
        assert_eq!(names, [PathBuf::from("job1_lat.1.log"), "job1_slat.1.log".into(), "job1_clat.1.log".into()]);
        let no_slat = JobLogs::new(&opts(0, false), "j", [4096; 2], [true, false, true, true]);
        assert_eq!(no_slat.logs.iter().map(|g| g.kind).collect::<Vec<_>>(), [LogKind::Lat, LogKind::Clat]);
    }

    #[test]
    fn averaging_writes_the_rounded_mean_of_each_window_per_direction() {
        let mut log = Log::new(LogKind::Lat, "j", &opts(100, false));
        // Window [0, 100) of reads: 10, 11 → closes at the sample at 105 ms (mean of 10, 11, 13).
        log.add(e(10, 10, 0), 0);
        log.add(e(50, 11, 0), 0);
        log.add(e(60, 7, 1), 0);
        log.add(e(105, 13, 0), 0);
        // Next read window starts at 100 (105 rounded down): 150 ms is inside it.
        log.add(e(150, 20, 0), 0);
        log.add(e(210, 30, 0), 0);
        log.finish(250);
        let got: Vec<(u64, u64, u8, u64)> = log.entries.iter().map(|e| (e.time_ms, e.value, e.ddir, e.bs)).collect();
        // (10+11+13)/3 = 11.33 → 11; (20+30)/2 = 25; the write window is written at the end.
        assert_eq!(got, [(105, 11, 0, 0), (210, 25, 0, 0), (250, 7, 1, 0)]);
    }

    #[test]
    fn log_max_value_writes_the_windows_maximum() {
        let mut log = Log::new(LogKind::Lat, "j", &opts(100, true));
        for (t, v) in [(1, 5), (20, 90), (40, 3), (101, 4)] {
            log.add(e(t, v, 0), 0);
        }
        assert_eq!(log.entries.iter().map(|e| e.value).collect::<Vec<_>>(), [90]);
        // The mean rounds half up: (1 + 2) / 2 = 1.5 → 2.
        let mut mean = Log::new(LogKind::Lat, "j", &opts(100, false));
        for (t, v) in [(1, 1), (100, 2)] {
            mean.add(e(t, v, 0), 0);
        }
        assert_eq!(mean.entries[0].value, 2);
    }

    #[test]
    fn per_io_bw_and_iops_entries_are_fios() {
        let o = LogOpts { bw: Some("b".into()), iops: Some("i".into()), ..LogOpts::default() };
        let mut l = JobLogs::new(&o, "j", [4096; 2], [true; 4]);
        l.io(7, 1, 4096, 0, [Some(20_000), Some(1_000), Some(10_000)], 0);
        assert_eq!(l.logs[0].render(false, false), "7, 409600, 1, 4096, 0\n", "bytes × 10⁶ / clat ns");
        assert_eq!(l.logs[1].render(false, false), "7, 1, 1, 4096, 0\n");
        let mut off = JobLogs::new(&o, "j", [4096; 2], [true, true, true, false]);
        off.io(7, 1, 4096, 0, [Some(20_000), Some(1_000), Some(10_000)], 0);
        assert!(off.logs.iter().all(|g| g.entries.is_empty()), "disable_bw: no per-I/O rates, as fio");
    }

    #[test]
    fn per_io_entries_carry_the_ios_own_priority_else_the_jobs() {
        // prioclass=3 for the job; one I/O given 0x4001 by cmdprio, one none of its own.
        let o = LogOpts { lat: Some(String::new()), ioprio: 3 << 13, ..LogOpts::default() };
        let mut l = JobLogs::new(&o, "j", [4096; 2], [true; 4]);
        l.io(7, 0, 4096, 0, [Some(20_000), None, None], 2 << 13 | 1);
        l.io(8, 0, 4096, 0, [Some(30_000), None, None], 0);
        l.io(9, 0, 4096, 0, [Some(30_000), None, None], 1 << 13);
        assert_eq!(
            l.logs[0].render(false, true),
            "7, 20000, 0, 4096, 0x4001\n8, 30000, 0, 4096, 0x6000\n9, 30000, 0, 4096, 0x2000\n"
        );
        // Without log_prio: 1 for the real-time class only.
        assert_eq!(
            l.logs[0].render(false, false),
            "7, 20000, 0, 4096, 0\n8, 30000, 0, 4096, 0\n9, 30000, 0, 4096, 1\n"
        );
        assert_eq!(&l.logs[0].samples(false, true)[20..22], &(0x4001u16).to_ne_bytes());
    }

    #[test]
    fn trims_are_logged_in_direction_2_with_the_writes_block_size() {
        let o = LogOpts { lat: Some(String::new()), iops: Some(String::new()), avg_msec: 100, ..LogOpts::default() };
        let mut l = JobLogs::new(&o, "j", [4096, 65536], [true; 4]);
        for t in [10, 50, 101] {
            l.io(t, 2, 65536, 0, [Some(1000), None, Some(1000)], 0);
            l.tick(t);
        }
        l.finish(150);
        let lat = &l.logs[0].entries;
        assert!(!lat.is_empty() && lat.iter().all(|e| e.ddir == 2), "{lat:?}");
        let iops: Vec<(u8, u64)> = l.logs.last().unwrap().entries.iter().map(|e| (e.ddir, e.bs)).collect();
        assert_eq!(iops, [(2, 0)], "one interval of trims (averaged entries carry no block size)");
    }

    #[test]
    fn averaged_bw_and_iops_are_rates_over_intervals() {
        let o = LogOpts { bw: Some(String::new()), iops: Some(String::new()), avg_msec: 100, ..LogOpts::default() };
        let mut l = JobLogs::new(&o, "j", [4096, 4096], [true; 4]);
        // 251 reads of 4 KiB in the first 99 ms.
        for i in 0..250 {
            l.io(i * 98 / 250, 0, 4096, 0, [None; 3], 0);
            l.tick(i * 98 / 250);
        }
        assert!(l.logs[0].entries.is_empty(), "no interval has passed yet");
        l.io(99, 0, 4096, 0, [None; 3], 0);
        l.tick(99); // 1 ms early is within fio's slack
        let bw = &l.logs[0].entries;
        assert_eq!(bw.len(), 1);
        assert_eq!((bw[0].time_ms, bw[0].ddir, bw[0].bs), (99, 0, 0));
        assert_eq!(bw[0].value, 251 * 4096 * 1000 / 99 / 1024);
        assert_eq!(l.logs[1].entries[0].value, 251 * 1000 / 99);
        // An interval without writes writes no write entry; a later one with I/O does.
        l.io(150, 0, 4096, 0, [None; 3], 0);
        l.tick(200);
        assert_eq!(l.logs[1].entries.len(), 2);
        assert!(l.logs[1].entries.iter().all(|e| e.ddir == 0));
        // The interval the end cuts short is not taken, as in fio.
        l.io(205, 0, 4096, 0, [None; 3], 0);
        l.finish(210);
        assert_eq!(l.logs[1].entries.len(), 2);
    }

    #[test]
    fn the_hist_log_holds_each_intervals_clat_histogram_in_fios_buckets() {
        let o = LogOpts { hist: Some("h".into()), hist_msec: 100, hist_coarseness: 1, ..LogOpts::default() };
        let mut l = JobLogs::new(&o, "j", [4096; 2], [true; 4]);
        // The first interval starts at the first completion (10 ms).
        l.io(10, 0, 4096, 0, [None, None, Some(50)], 0);
        l.io(60, 0, 4096, 0, [None, None, Some(51)], 0);
        l.io(115, 0, 4096, 0, [None, None, Some(1000)], 0);
        l.io(150, 0, 4096, 0, [None, None, Some(50)], 0);
        l.io(215, 0, 4096, 0, [None, None, Some(50)], 0);
        let h = l.hist.as_ref().unwrap();
        assert_eq!(h.entries.len(), 2);
        let cols = crate::hist::PLAT_NR / 2;
        assert!(h.entries.iter().all(|e| e.counts.len() == cols), "1856 buckets, 2 to a column");
        // 50 and 51 ns share a column at coarseness 1 (buckets 50 and 51); 1000 ns is elsewhere.
        let (e0, e1) = (&h.entries[0], &h.entries[1]);
        assert_eq!((e0.time_ms, e0.ddir, e0.bs, e0.counts.iter().sum::<u64>()), (115, 0, 4096, 3));
        assert_eq!(e0.counts[25], 2);
        assert_eq!(e0.counts[crate::hist::bucket_index(1000) / 2], 1);
        // The second holds only what came after the first (the next interval starts at
        // 110 ms: 115 less its 5 ms of lateness).
        assert_eq!((e1.time_ms, e1.counts.iter().sum::<u64>(), e1.counts[25]), (215, 2, 2));
        let line = h.render();
        let first = line.lines().next().unwrap();
        assert!(first.starts_with("115, 0, 4096, 0, "), "{first}");
        assert_eq!(first.split(", ").count(), 3 + cols);
        assert_eq!(h.file_name(2, true), PathBuf::from("h_clat_hist.2.log"));
        // Without log_hist_msec, fio writes no lines.
        let mut none = JobLogs::new(&LogOpts { hist_msec: 0, ..o }, "j", [4096; 2], [true; 4]);
        none.io(500, 0, 4096, 0, [None, None, Some(50)], 0);
        assert!(none.hist.unwrap().entries.is_empty());
    }
}
