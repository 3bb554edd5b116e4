//! Reports of a run in fio's formats: the text report (`--output-format=normal`) and
//! fio's JSON (`json`, and `json+` with the latency histogram's bins), with fio 3.33's
//! field names, nesting, key order and number types, so that scripts written for fio
//! read ioswitch's results unchanged.
//!
//! What ioswitch measures beyond fio is added, clearly marked, never mixed into fio's
//! fields: lines starting with `ioswitch` in the text report, an `"ioswitch"` object per
//! job in JSON. It holds the interface that carried the I/O, the syscalls per I/O counted
//! by the backend, and the CPU of the *whole process* (fio's `usr_cpu`/`sys_cpu` are the
//! job thread's only, which misses io_uring workers, SQPOLL threads and helper threads;
//! the difference is reported as "other threads").
//! Jobs on `mmap` also get their rate as a fraction of the single-thread copy ceiling
//! measured in the same run (`ioswitch mem` line; `copy_ceiling_bps`, `copy_ceiling_fraction`)
//! when the caller measured one ([`Report::copy_ceiling_bps`]).
//!
//! # What one report entry is
//!
//! As in fio, every job instance (each of `numjobs` clones) is reported on its own unless
//! its group has `group_reporting`; then the whole reporting group is one entry, merged
//! the way fio merges it: counts, bytes and CPU times add up, latency statistics and
//! histograms merge ([`LatStats::merge`]), the runtime is the longest one, and the 500 ms
//! bandwidth/IOPS windows of concurrent jobs add up (the group's throughput).
//!
//! # Numbers
//!
//! `runtime` is in whole milliseconds, as in fio; IOPS and bandwidth are computed from
//! the nanosecond runtime, which is more precise than fio's millisecond arithmetic
//! (they differ from `total_ios / runtime` by the rounding of `runtime`).

use crate::engine::{JobResult, Mode, Usage, LAT_MS_EDGES, LAT_NS_EDGES};
use crate::hist::{percentile_key, Histogram};
use crate::jobfile::{ContinueOn, JobSpec, RawOption, UnifiedRw};
use crate::run::{JobRun, Prepared, Report};
use crate::stats::{LatStats, Stats};
use crate::verify;
use ioswitch::QueueStats;
use std::fmt::{self, Write as _};
use std::time::{Duration, UNIX_EPOCH};

/// What `"fio version"` says: this program and its version.
pub const VERSION: &str = concat!("ioswitch-", env!("CARGO_PKG_VERSION"));

// ---------------------------------------------------------------------------------------
// JSON with fio's key order and number formatting
// ---------------------------------------------------------------------------------------

/// A JSON value that keeps keys in the order they were added (fio's order) and prints
/// numbers the way fio does: integers as integers, other numbers with six decimals (C's
/// `%f`), so that every field has the JSON type it has in fio's output.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// A whole number.
    Int(i128),
    /// A number printed with six decimals; NaN and infinities print as `0.000000`.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object; keys in the order given.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The value under `key` of an object; `None` for other values or a missing key.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text, laid out as fio lays out its JSON, with a final newline.
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, 0);
        s.push('\n');
        s
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Int(v) => {
                let _ = write!(out, "{v}");
            }
            Json::Float(v) => {
                let v = if v.is_finite() { *v } else { 0.0 };
                let _ = write!(out, "{v:.6}");
            }
            Json::Str(s) => out.push_str(&quote(s)),
            Json::Arr(items) if items.is_empty() => out.push_str("[]"),
            Json::Obj(pairs) if pairs.is_empty() => out.push_str("{}"),
            Json::Arr(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    pad(out, indent + 1);
                    item.write(out, indent + 1);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                pad(out, indent);
                out.push(']');
            }
            Json::Obj(pairs) => {
                out.push_str("{\n");
                for (i, (k, v)) in pairs.iter().enumerate() {
                    pad(out, indent + 1);
                    out.push_str(&quote(k));
                    out.push_str(" : ");
                    v.write(out, indent + 1);
                    out.push_str(if i + 1 < pairs.len() { ",\n" } else { "\n" });
                }
                pad(out, indent);
                out.push('}');
            }
        }
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

fn pad(out: &mut String, indent: usize) {
    for _ in 0..indent {
        out.push_str("  ");
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

impl From<u64> for Json {
    fn from(v: u64) -> Json {
        Json::Int(v.into())
    }
}

impl From<u32> for Json {
    fn from(v: u32) -> Json {
        Json::Int(v.into())
    }
}

impl From<i32> for Json {
    fn from(v: i32) -> Json {
        Json::Int(v.into())
    }
}

impl From<f64> for Json {
    fn from(v: f64) -> Json {
        Json::Float(v)
    }
}

impl From<&str> for Json {
    fn from(v: &str) -> Json {
        Json::Str(v.to_string())
    }
}

impl From<String> for Json {
    fn from(v: String) -> Json {
        Json::Str(v)
    }
}

fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Json {
    Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

// ---------------------------------------------------------------------------------------
// Entries: instances, or groups merged as fio merges them
// ---------------------------------------------------------------------------------------

/// Statistics of the 500 ms bandwidth or IOPS windows, kept in a form that adds up
/// across concurrent jobs (fio's group reporting sums them: the group's throughput).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Windows {
    n: u64,
    min: u64,
    max: u64,
    mean: f64,
    var: f64,
}

impl Windows {
    fn of(s: &Stats) -> Windows {
        if s.samples() == 0 {
            return Windows::default();
        }
        Windows { n: s.samples(), min: s.min(), max: s.max(), mean: s.mean(), var: s.variance() }
    }

    fn add(&mut self, o: &Windows) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.n += o.n;
        self.min += o.min;
        self.max += o.max;
        self.mean += o.mean;
        self.var += o.var;
    }

    fn stddev(&self) -> f64 {
        self.var.sqrt()
    }
}

/// One direction (read or write) of an entry.
#[derive(Clone, Debug, Default)]
struct Dir {
    ios: u64,
    bytes: u64,
    slat: LatStats,
    clat: LatStats,
    lat: LatStats,
    bw: Windows,
    iops: Windows,
    runtime_ns: u64,
    /// Latencies per I/O priority (fio's `clat_prio`), by value, once the entry keeps
    /// them ([`Entry::prio_stats`]); `None` until a member added some.
    prios: Option<Vec<(u16, LatStats)>>,
}

impl Dir {
    fn add(&mut self, d: &crate::engine::DirResult, runtime_ns: u64) {
        self.ios += d.ios;
        self.bytes += d.bytes;
        self.slat.merge(&d.slat);
        self.clat.merge(&d.clat);
        self.lat.merge(&d.lat);
        self.bw.add(&Windows::of(&d.bw_samples));
        self.iops.add(&Windows::of(&d.iops_samples));
        if d.ios > 0 {
            self.runtime_ns = self.runtime_ns.max(runtime_ns);
        }
    }

    /// fio's `sum_clat_prio_stats`: a member's latencies per priority join the entry's,
    /// priority by priority; a member that kept none ran every I/O at its job's priority
    /// `ioprio`, and adds its completion latencies (total ones with `lat_percentiles`).
    fn add_prios(&mut self, d: &crate::engine::DirResult, ioprio: u16, on_lat: bool) {
        let dst = self.prios.get_or_insert_with(Vec::new);
        let mut add = |v: u16, l: &LatStats| match dst.iter_mut().find(|(p, _)| *p == v) {
            Some((_, t)) => t.merge(l),
            None => dst.push((v, l.clone())),
        };
        if d.prios.is_empty() {
            add(ioprio, if on_lat { &d.lat } else { &d.clat });
        } else {
            for (v, l) in &d.prios {
                add(*v, l);
            }
        }
    }

    /// The priorities to report apart: fio's rule, only when two or more have samples.
    fn reported_prios(&self) -> Option<impl Iterator<Item = &(u16, LatStats)>> {
        let p = self.prios.as_ref()?;
        let with = || p.iter().filter(|(_, l)| l.samples() > 0);
        (with().count() >= 2).then(with)
    }

    /// fio's `runtime`: whole milliseconds, at least 1 when anything ran.
    fn runtime_ms(&self) -> u64 {
        let ms = (self.runtime_ns + 500_000) / 1_000_000;
        if self.ios > 0 {
            ms.max(1)
        } else {
            ms
        }
    }

    fn iops(&self) -> f64 {
        if self.runtime_ns == 0 {
            0.0
        } else {
            self.ios as f64 * 1e9 / self.runtime_ns as f64
        }
    }

    fn bw_bytes(&self) -> u64 {
        if self.runtime_ns == 0 {
            0
        } else {
            (u128::from(self.bytes) * 1_000_000_000 / u128::from(self.runtime_ns)) as u64
        }
    }
}

/// CPU of the whole process over the phases an entry ran in.
#[derive(Clone, Copy, Debug, Default)]
struct ProcessCpu {
    /// `getrusage(RUSAGE_SELF)` over the phases.
    process: Usage,
    /// The job threads of every job in those phases.
    threads: Usage,
    /// Wall time of the phases, ns.
    phase_ns: u64,
    /// Job threads that ran in those phases.
    thread_count: u32,
}

/// `ns` of CPU time as a percentage of `wall_ns` of wall time (0 for no wall time).
fn cpu_share_pct(ns: u64, wall_ns: u64) -> f64 {
    if wall_ns == 0 {
        0.0
    } else {
        ns as f64 * 100.0 / wall_ns as f64
    }
}

impl ProcessCpu {
    fn pct(&self, ns: u64) -> f64 {
        cpu_share_pct(ns, self.phase_ns)
    }
    fn usr(&self) -> f64 {
        self.pct(self.process.usr_ns)
    }
    fn sys(&self) -> f64 {
        self.pct(self.process.sys_ns)
    }
    fn other_usr(&self) -> f64 {
        self.pct(self.process.usr_ns.saturating_sub(self.threads.usr_ns))
    }
    fn other_sys(&self) -> f64 {
        self.pct(self.process.sys_ns.saturating_sub(self.threads.sys_ns))
    }
}

/// One reported job: one instance, or a group with `group_reporting`.
#[derive(Clone, Debug)]
struct Entry<'a> {
    first: &'a JobRun,
    groupid: u32,
    threads: u32,
    error: i32,
    error_msg: Option<String>,
    /// Reads, writes, and both together (fio's `mixed`, for `unified_rw_reporting`).
    dirs: [Dir; 3],
    /// Trims (fio's `trim` direction; also in `mixed`).
    trim: Dir,
    /// Zones reset (`zonemode=zbd`).
    zone_resets: u64,
    /// The steady state (`ss_dur`), of the first instance that has one.
    steady: Option<crate::steady::Outcome>,
    /// Errors gone on after (`continue_on_error`), and the errno of the first.
    total_err: u64,
    first_error: i32,
    sync: LatStats,
    job_runtime_ns: u64,
    elapsed_ns: u64,
    usage: Usage,
    queue: QueueStats,
    depth_level: [u64; 7],
    submit_level: [u64; 7],
    complete_level: [u64; 7],
    lat_dist: [u64; 32],
    verified: u64,
    interfaces: Vec<String>,
    cpu: ProcessCpu,
    /// Whether latencies are kept per I/O priority (fio's `!disable_prio_stat`): some
    /// member chose priorities per command, or the members' jobs ran at different ones.
    prio_stats: bool,
}

impl<'a> Entry<'a> {
    fn new(first: &'a JobRun) -> Entry<'a> {
        Entry {
            first,
            groupid: first.groupid,
            threads: 0,
            error: 0,
            error_msg: None,
            dirs: Default::default(),
            trim: Dir::default(),
            zone_resets: 0,
            steady: None,
            total_err: 0,
            first_error: 0,
            sync: LatStats::new(),
            job_runtime_ns: 0,
            elapsed_ns: 0,
            usage: Usage::default(),
            queue: QueueStats::default(),
            depth_level: [0; 7],
            submit_level: [0; 7],
            complete_level: [0; 7],
            lat_dist: [0; 32],
            verified: 0,
            interfaces: Vec::new(),
            cpu: ProcessCpu::default(),
            prio_stats: false,
        }
    }

    fn add(&mut self, run: &JobRun, r: &JobResult) {
        self.threads += 1;
        if self.error == 0 && r.error != 0 {
            self.error = r.error;
            self.error_msg = r.error_msg.clone();
        } else if self.error == 0 && r.first_error != 0 && run.spec.behaviour.continue_on_error != ContinueOn::default()
        {
            // fio (stat.c) reports a job that went on after errors with its first error as
            // the job's error, though the job ran to its end (and fio exits 0).
            self.error = r.first_error;
        }
        self.dirs[0].add(&r.read, r.runtime_ns);
        self.dirs[1].add(&r.write, r.runtime_ns);
        // As fio's sum_thread_stats into a mixed ts: both directions into one.
        self.dirs[2].add(&r.read, r.runtime_ns);
        self.dirs[2].add(&r.write, r.runtime_ns);
        self.trim.add(&r.trim, r.runtime_ns);
        self.zone_resets += r.zone_resets;
        if self.steady.is_none() {
            self.steady = r.steady.clone();
        }
        self.dirs[2].add(&r.trim, r.runtime_ns);
        if self.prio_stats {
            let (ioprio, on_lat) = (run.spec.logs.ioprio, run.spec.lat_percentiles);
            for (i, d) in [(0, &r.read), (1, &r.write), (2, &r.read), (2, &r.write)] {
                self.dirs[i].add_prios(d, ioprio, on_lat);
            }
            self.trim.add_prios(&r.trim, ioprio, on_lat);
            self.dirs[2].add_prios(&r.trim, ioprio, on_lat);
        }
        if self.total_err == 0 {
            self.first_error = r.first_error;
        }
        self.total_err += r.total_err;
        self.sync.merge(&r.sync);
        self.job_runtime_ns += r.job_runtime_ns;
        self.elapsed_ns = self.elapsed_ns.max(r.elapsed_ns);
        self.usage.usr_ns += r.usr_ns;
        self.usage.sys_ns += r.sys_ns;
        self.usage.ctx += r.ctx;
        self.usage.majf += r.majf;
        self.usage.minf += r.minf;
        self.queue.submitted += r.queue.submitted;
        self.queue.completed += r.queue.completed;
        self.queue.syscalls += r.queue.syscalls;
        let ios = r.read.ios + r.write.ios + r.trim.ios;
        let sync_mode = run.job.mode == Mode::Sync;
        // A sync interface submits and completes one I/O per call: fio counts each call
        // as a batch of one, which the engine leaves implicit.
        let implicit = |level: &[u64; 7]| if sync_mode && level.iter().all(|&c| c == 0) { ios } else { 0 };
        let (submit_implicit, complete_implicit) = (implicit(&r.submit_level), implicit(&r.complete_level));
        for i in 0..7 {
            self.depth_level[i] += r.depth_level[i];
            self.submit_level[i] += r.submit_level[i];
            self.complete_level[i] += r.complete_level[i];
        }
        self.submit_level[1] += submit_implicit;
        self.complete_level[1] += complete_implicit;
        for (a, b) in self.lat_dist.iter_mut().zip(r.lat_dist.iter()) {
            *a += b;
        }
        self.verified += r.verified;
        if !self.interfaces.contains(&run.interface) {
            self.interfaces.push(run.interface.clone());
        }
    }

    fn name(&self) -> &str {
        &self.first.spec.name
    }

    fn spec(&self) -> &JobSpec {
        &self.first.spec
    }

    fn interface(&self) -> String {
        self.interfaces.join(",")
    }

    /// This entry's data rate (read + written, bytes/s) as a fraction of the single-thread
    /// copy ceiling, when it ran on `mmap` or `pmem` and a ceiling was measured: each byte through a
    /// mapping is one byte copied, which the ceiling (STREAM-counted) counts twice.
    fn copy_fraction(&self, ceiling: Option<f64>) -> Option<f64> {
        let c = ceiling.filter(|&c| c > 0.0)?;
        if !self.interfaces.iter().any(|i| crate::run::is_mapping(i)) {
            return None;
        }
        Some(2.0 * (self.dirs[0].bw_bytes() + self.dirs[1].bw_bytes()) as f64 / c)
    }

    fn total_ios(&self) -> u64 {
        self.dirs[0].ios + self.dirs[1].ios + self.trim.ios
    }

    fn cpu_pct(&self, ns: u64) -> f64 {
        cpu_share_pct(ns, self.job_runtime_ns)
    }

    fn syscalls_per_io(&self) -> f64 {
        match self.total_ios() {
            0 => 0.0,
            n => self.queue.syscalls as f64 / n as f64,
        }
    }
}

/// The entries of a report, in job order.
fn entries(report: &Report) -> Vec<Entry<'_>> {
    let phase: Vec<usize> = report.jobs.iter().map(|j| j.phase as usize).collect();
    let n_phases = phase.iter().max().map_or(0, |p| p + 1);
    let mut phases = vec![ProcessCpu::default(); n_phases];
    for (j, &p) in report.jobs.iter().zip(&phase) {
        let ph = &mut phases[p];
        ph.process = j.process;
        ph.phase_ns = j.phase_ns;
        for r in &j.results {
            ph.threads.usr_ns += r.usr_ns;
            ph.threads.sys_ns += r.sys_ns;
            ph.thread_count += 1;
        }
    }
    let cpu_of = |ps: &[usize]| {
        let mut c = ProcessCpu::default();
        for &p in ps {
            let ph = &phases[p];
            c.process.usr_ns += ph.process.usr_ns;
            c.process.sys_ns += ph.process.sys_ns;
            c.threads.usr_ns += ph.threads.usr_ns;
            c.threads.sys_ns += ph.threads.sys_ns;
            c.phase_ns += ph.phase_ns;
            c.thread_count += ph.thread_count;
        }
        c
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < report.jobs.len() {
        let g = report.jobs[i].groupid;
        let end = (i..report.jobs.len()).find(|&k| report.jobs[k].groupid != g).unwrap_or(report.jobs.len());
        let members = &report.jobs[i..end];
        if members.iter().any(|j| j.spec.group_reporting) {
            let mut e = Entry::new(&members[0]);
            // fio's init_per_prio_stats.
            let own = members[0].spec.logs.ioprio;
            e.prio_stats = members.iter().any(|j| j.spec.logs.ioprio != own || j.results.iter().any(keeps_prios));
            let mut ps = Vec::new();
            for (k, j) in members.iter().enumerate() {
                for r in &j.results {
                    e.add(j, r);
                }
                if !ps.contains(&phase[i + k]) {
                    ps.push(phase[i + k]);
                }
            }
            e.cpu = cpu_of(&ps);
            out.push(e);
        } else {
            for (k, j) in members.iter().enumerate() {
                for r in &j.results {
                    let mut e = Entry::new(j);
                    e.prio_stats = keeps_prios(r);
                    e.add(j, r);
                    e.cpu = cpu_of(&[phase[i + k]]);
                    out.push(e);
                }
            }
        }
        i = end;
    }
    out
}

/// Whether an instance kept latencies per priority (chose priorities per command).
fn keeps_prios(r: &JobResult) -> bool {
    !r.read.prios.is_empty() || !r.write.prios.is_empty()
}

/// fio's "Run status group" numbers of one direction of one group.
#[derive(Clone, Copy, Debug, Default)]
struct GroupDir {
    bytes: u64,
    /// Aggregate bandwidth: the group's bytes over its longest runtime, bytes/s.
    agg_bw: u64,
    min_bw: u64,
    max_bw: u64,
    min_run_ms: u64,
    max_run_ms: u64,
    max_run_ns: u64,
}

fn group_dir(entries: &[&Entry<'_>], d: usize) -> GroupDir {
    let mut g = GroupDir { min_bw: u64::MAX, min_run_ms: u64::MAX, ..GroupDir::default() };
    for e in entries.iter().map(|e| &e.dirs[d]).filter(|d| d.ios > 0) {
        g.bytes += e.bytes;
        g.min_bw = g.min_bw.min(e.bw_bytes());
        g.max_bw = g.max_bw.max(e.bw_bytes());
        g.min_run_ms = g.min_run_ms.min(e.runtime_ms());
        g.max_run_ms = g.max_run_ms.max(e.runtime_ms());
        g.max_run_ns = g.max_run_ns.max(e.runtime_ns);
    }
    if g.max_run_ns == 0 {
        return GroupDir::default();
    }
    g.agg_bw = (u128::from(g.bytes) * 1_000_000_000 / u128::from(g.max_run_ns)) as u64;
    g
}

/// fio's `per=` / `bw_agg`: this entry's mean window bandwidth as a share of the group's
/// aggregate bandwidth, percent.
fn bw_share(d: &Dir, g: &GroupDir) -> f64 {
    if d.bw.n == 0 || g.agg_bw == 0 {
        0.0
    } else {
        (d.bw.mean * 1024.0 * 100.0 / g.agg_bw as f64).min(100.0)
    }
}

fn groups<'e, 'a>(entries: &'e [Entry<'a>]) -> Vec<(u32, Vec<&'e Entry<'a>>)> {
    let mut out: Vec<(u32, Vec<&Entry<'_>>)> = Vec::new();
    for e in entries {
        match out.iter_mut().find(|(g, _)| *g == e.groupid) {
            Some((_, v)) => v.push(e),
            None => out.push((e.groupid, vec![e])),
        }
    }
    out
}

fn group_dirs(entries: &[Entry<'_>]) -> Vec<(u32, [GroupDir; 3])> {
    groups(entries).into_iter().map(|(g, es)| (g, [group_dir(&es, 0), group_dir(&es, 1), group_dir(&es, 2)])).collect()
}

fn group_of(gd: &[(u32, [GroupDir; 3])], groupid: u32, d: usize) -> GroupDir {
    gd.iter().find(|(g, _)| *g == groupid).map(|(_, v)| v[d]).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Percent distributions (fio's io depth and latency maps)
// ---------------------------------------------------------------------------------------

/// fio's depth/batch maps: percent of the total, with any non-zero share below 0.1%
/// shown as 0.1% (as fio does, in text and JSON).
fn depth_pct(map: &[u64; 7]) -> [f64; 7] {
    let total: u64 = map.iter().sum();
    let mut out = [0.0; 7];
    if total == 0 {
        return out;
    }
    for (o, &c) in out.iter_mut().zip(map) {
        let v = c as f64 * 100.0 / total as f64;
        *o = if c > 0 && v < 0.1 { 0.1 } else { v };
    }
    out
}

/// The latency distribution as percent of all I/Os.
fn lat_pct(dist: &[u64; 32]) -> [f64; 32] {
    let total: u64 = dist.iter().sum();
    let mut out = [0.0; 32];
    if total > 0 {
        for (o, &c) in out.iter_mut().zip(dist) {
            *o = c as f64 * 100.0 / total as f64;
        }
    }
    out
}

const DEPTH_KEYS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
const BATCH_KEYS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];

fn lat_keys() -> [Vec<String>; 3] {
    let ns: Vec<String> = LAT_NS_EDGES.iter().map(u64::to_string).collect();
    let mut ms: Vec<String> = LAT_MS_EDGES[..11].iter().map(u64::to_string).collect();
    ms.push(">=2000".into());
    [ns.clone(), ns, ms]
}

// ---------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------

/// Percentile settings of an entry.
#[derive(Clone, Copy)]
struct Pct<'s> {
    list: &'s [f64],
    slat: bool,
    clat: bool,
    lat: bool,
    plus: bool,
}

fn lat_json(l: &LatStats, percentiles: bool, p: &Pct<'_>) -> Json {
    let s = &l.stats;
    let mut pairs = vec![
        ("min".to_string(), Json::from(s.min())),
        ("max".to_string(), s.max().into()),
        ("mean".to_string(), s.mean().into()),
        ("stddev".to_string(), s.stddev().into()),
        ("N".to_string(), s.samples().into()),
    ];
    if percentiles && s.samples() > 0 {
        let ps = l.hist.percentiles(p.list);
        pairs.push(("percentile".into(), Json::Obj(ps.iter().map(|&(q, v)| (percentile_key(q), v.into())).collect())));
        if p.plus {
            pairs.push(("bins".into(), bins_json(&l.hist)));
        }
    }
    Json::Obj(pairs)
}

fn bins_json(h: &Histogram) -> Json {
    Json::Obj(h.nonzero_buckets().map(|(v, c)| (v.to_string(), c.into())).collect())
}

/// fio's `"prios"` of a direction: each priority with samples, its class, level and
/// latencies (`lat_ns` with `lat_percentiles`, else `clat_ns`).
fn prios_json(d: &Dir, p: &Pct<'_>) -> Option<Json> {
    let name = if p.lat { "lat_ns" } else { "clat_ns" };
    let list = d.reported_prios()?.map(|(v, l)| {
        Json::Obj(vec![
            ("prioclass".into(), u64::from(ioswitch::cmd::ioprio::class(*v)).into()),
            ("prio".into(), u64::from(ioswitch::cmd::ioprio::level(*v)).into()),
            (name.into(), lat_json(l, p.clat || p.lat, p)),
        ])
    });
    Some(Json::Arr(list.collect()))
}

fn dir_json(d: &Dir, g: &GroupDir, p: &Pct<'_>) -> Json {
    let j = dir_json_plain(d, g, p);
    match (j, prios_json(d, p)) {
        (Json::Obj(mut pairs), Some(prios)) => {
            // fio: after lat_ns.
            let at = pairs.iter().position(|(k, _)| k == "lat_ns").map_or(pairs.len(), |i| i + 1);
            pairs.insert(at, ("prios".into(), prios));
            Json::Obj(pairs)
        }
        (j, _) => j,
    }
}

fn dir_json_plain(d: &Dir, g: &GroupDir, p: &Pct<'_>) -> Json {
    obj([
        ("io_bytes", d.bytes.into()),
        ("io_kbytes", (d.bytes / 1024).into()),
        ("bw_bytes", d.bw_bytes().into()),
        ("bw", (d.bw_bytes() / 1024).into()),
        ("iops", d.iops().into()),
        ("runtime", d.runtime_ms().into()),
        ("total_ios", d.ios.into()),
        ("short_ios", 0u64.into()),
        ("drop_ios", 0u64.into()),
        ("slat_ns", lat_json(&d.slat, p.slat, p)),
        ("clat_ns", lat_json(&d.clat, p.clat, p)),
        ("lat_ns", lat_json(&d.lat, p.lat, p)),
        ("bw_min", d.bw.min.into()),
        ("bw_max", d.bw.max.into()),
        ("bw_agg", bw_share(d, g).into()),
        ("bw_mean", d.bw.mean.into()),
        ("bw_dev", d.bw.stddev().into()),
        ("bw_samples", d.bw.n.into()),
        ("iops_min", d.iops.min.into()),
        ("iops_max", d.iops.max.into()),
        ("iops_mean", d.iops.mean.into()),
        ("iops_stddev", d.iops.stddev().into()),
        ("iops_samples", d.iops.n.into()),
    ])
}

fn options_json(opts: &[RawOption]) -> Json {
    Json::Obj(opts.iter().filter_map(|o| o.value.as_ref().map(|v| (o.key.clone(), Json::from(v.as_str())))).collect())
}

fn pct_map(keys: &[&str], vals: &[f64]) -> Json {
    Json::Obj(keys.iter().zip(vals).map(|(k, &v)| (k.to_string(), v.into())).collect())
}

/// The directions an entry reports under `unified_rw_reporting`, by index into its dirs
/// and name: fio's read, write (and trim), `mixed` instead of them, or both.
fn reported_dirs(u: UnifiedRw) -> &'static [(usize, &'static str)] {
    match u {
        UnifiedRw::None => &[(0, "read"), (1, "write")],
        UnifiedRw::Mixed => &[(2, "mixed")],
        UnifiedRw::Both => &[(0, "read"), (1, "write"), (2, "mixed")],
    }
}

fn entry_json(e: &Entry<'_>, gd: &[(u32, [GroupDir; 3])], plus: bool, ceiling: Option<f64>) -> Json {
    let spec = e.spec();
    let p = Pct {
        list: &spec.percentile_list,
        slat: spec.slat_percentiles,
        clat: spec.clat_percentiles,
        lat: spec.lat_percentiles,
        plus,
    };
    let lat = lat_pct(&e.lat_dist);
    let [kns, kus, kms] = lat_keys();
    let keyed =
        |keys: &[String], vals: &[f64]| Json::Obj(keys.iter().zip(vals).map(|(k, &v)| (k.clone(), v.into())).collect());
    let ios = e.total_ios();
    let ioswitch = obj([
        ("interface", e.interface().into()),
        ("ios", ios.into()),
        ("syscalls", e.queue.syscalls.into()),
        ("syscalls_per_io", e.syscalls_per_io().into()),
        ("queue_submitted", e.queue.submitted.into()),
        ("queue_completed", e.queue.completed.into()),
        ("process_usr_cpu", e.cpu.usr().into()),
        ("process_sys_cpu", e.cpu.sys().into()),
        ("helper_usr_cpu", e.cpu.other_usr().into()),
        ("helper_sys_cpu", e.cpu.other_sys().into()),
        ("phase_runtime", (e.cpu.phase_ns / 1_000_000).into()),
        ("phase_threads", e.cpu.thread_count.into()),
        ("verified_blocks", e.verified.into()),
        ("zone_resets", e.zone_resets.into()),
        ("error_msg", e.error_msg.clone().unwrap_or_default().into()),
        ("clat_stamp", spec.behaviour.clat_stamp.as_str().into()),
    ]);
    let ioswitch = match (ioswitch, e.copy_fraction(ceiling)) {
        (Json::Obj(mut pairs), Some(f)) => {
            pairs.push(("copy_ceiling_bps".into(), ceiling.unwrap_or_default().into()));
            pairs.push(("copy_ceiling_fraction".into(), f.into()));
            Json::Obj(pairs)
        }
        (j, _) => j,
    };
    let mut pairs = vec![
        ("jobname", e.name().into()),
        ("groupid", e.groupid.into()),
        ("error", e.error.into()),
        ("eta", 0u64.into()),
        ("elapsed", e.elapsed_ns.div_ceil(1_000_000_000).into()),
        ("job options", options_json(&spec.options)),
        ("sync", obj([("total_ios", e.sync.samples().into()), ("lat_ns", lat_json(&e.sync, p.clat, &p))])),
        ("job_runtime", (e.job_runtime_ns / 1_000_000).into()),
        ("usr_cpu", e.cpu_pct(e.usage.usr_ns).into()),
        ("sys_cpu", e.cpu_pct(e.usage.sys_ns).into()),
        ("ctx", e.usage.ctx.into()),
        ("majf", e.usage.majf.into()),
        ("minf", e.usage.minf.into()),
        ("iodepth_level", pct_map(&DEPTH_KEYS, &depth_pct(&e.depth_level))),
        ("iodepth_submit", pct_map(&BATCH_KEYS, &depth_pct(&e.submit_level))),
        ("iodepth_complete", pct_map(&BATCH_KEYS, &depth_pct(&e.complete_level))),
        ("latency_ns", keyed(&kns, &lat[0..10])),
        ("latency_us", keyed(&kus, &lat[10..20])),
        ("latency_ms", keyed(&kms, &lat[20..32])),
        ("latency_depth", latency_of(e.first).0.into()),
        ("latency_target", latency_of(e.first).1.into()),
        ("latency_percentile", latency_of(e.first).2.into()),
        ("latency_window", latency_of(e.first).3.into()),
        ("ioswitch", ioswitch),
    ];
    // fio's order: read, write, trim, (mixed with "both"); "mixed" alone with "mixed".
    let unified = spec.behaviour.unified_rw_reporting;
    let mut at = pairs.iter().position(|(k, _)| *k == "sync").unwrap_or(pairs.len());
    for &(d, name) in reported_dirs(unified) {
        pairs.insert(at, (name, dir_json(&e.dirs[d], &group_of(gd, e.groupid, d), &p)));
        at += 1;
        if d == 1 {
            pairs.insert(at, ("trim", dir_json(&e.trim, &GroupDir::default(), &p)));
            at += 1;
        }
    }
    if spec.behaviour.continue_on_error != ContinueOn::default() {
        // fio adds these only when continue_on_error is set.
        let at = pairs.iter().position(|(k, _)| *k == "latency_depth").unwrap_or(pairs.len());
        pairs.insert(at, ("first_error", e.first_error.into()));
        pairs.insert(at, ("total_err", e.total_err.into()));
    }
    if let Some(s) = &e.steady {
        // fio: after latency_window.
        let at = pairs.iter().position(|(k, _)| *k == "latency_window").map_or(pairs.len(), |i| i + 1);
        pairs.insert(at, ("steadystate", s.json()));
    }
    if let Some(d) = &spec.description {
        pairs.insert(1, ("desc", d.as_str().into()));
    }
    Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// fio's `latency_depth`, `latency_target` (ns), `latency_percentile` and
/// `latency_window` (µs) of a job: the depth `latency_target`'s search settled on (its
/// first instance's), or `iodepth` without a target.
fn latency_of(run: &JobRun) -> (u32, u64, f64, u64) {
    let l = &run.job.load;
    match l.latency_target {
        None => (run.job.iodepth, 0, 100.0, 0),
        Some(t) => (
            run.results.first().map_or(1, |r| r.latency_depth),
            t.as_nanos() as u64,
            l.latency_percentile,
            l.latency_window.as_micros() as u64,
        ),
    }
}

/// fio's JSON output (`--output-format=json`, or `json+` when `plus`: latency histogram
/// bins next to every percentile list). `global_options` are the run's global options as
/// read ([`crate::JobSet::global_options`]); fio leaves `"global options"` out when there
/// are none, and so does this.
pub fn json(report: &Report, global_options: &[RawOption], plus: bool) -> Json {
    let entries = entries(report);
    let gd = group_dirs(&entries);
    let end = report.started + Duration::from_nanos(report.wall_ns);
    let since = end.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut top = vec![
        ("fio version".to_string(), Json::from(VERSION)),
        ("timestamp".into(), since.as_secs().into()),
        ("timestamp_ms".into(), Json::Int(since.as_millis() as i128)),
        ("time".into(), ctime(since.as_secs()).into()),
    ];
    let globals: Vec<RawOption> = global_options.iter().filter(|o| o.value.is_some()).cloned().collect();
    if !globals.is_empty() {
        top.push(("global options".into(), options_json(&globals)));
    }
    top.push((
        "jobs".into(),
        Json::Arr(entries.iter().map(|e| entry_json(e, &gd, plus, report.copy_ceiling_bps)).collect()),
    ));
    Json::Obj(top)
}

// ---------------------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------------------

/// fio's `num2str`: `value` with at most `maxlen` characters of number (the decimal point
/// included) and an SI (`k`, `M`, …) or IEC (`Ki`, `Mi`, …) prefix; decimals are shown
/// only when they fit, rounded.
pub fn num2str(value: u64, maxlen: usize, pow2: bool) -> String {
    const SI: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    const IEC: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (base, prefixes) = if pow2 { (1024u128, IEC) } else { (1000u128, SI) };
    let digits = |x: u128| x.to_string().len();
    let mut div = 1u128;
    let mut k = 0;
    while digits(u128::from(value) / div) > maxlen && k + 1 < prefixes.len() {
        div *= base;
        k += 1;
    }
    if k == 0 {
        return value.to_string();
    }
    let int = u128::from(value) / div;
    let x = value as f64 / div as f64;
    let room = maxlen as i64 - digits(int) as i64 - 1;
    if room <= 0 {
        format!("{}{}", x.round(), prefixes[k])
    } else {
        format!("{x:.prec$}{}", prefixes[k], prec = room as usize)
    }
}

/// A latency line: `    clat (usec): min=…, max=…, avg=…, stdev=…`, in fio's units.
fn lat_line(out: &mut String, name: &str, s: &Stats) {
    let (mut min, mut max, mut mean, mut dev) = (s.min(), s.max(), s.mean(), s.stddev());
    let unit = if min > 2_000_000 && max > 99_999_999 && dev > 1_000_000.0 {
        (min, max, mean, dev) = (min / 1_000_000, max / 1_000_000, mean / 1e6, dev / 1e6);
        "msec"
    } else if min > 2000 && max > 99_999 && dev > 1000.0 {
        (min, max, mean, dev) = (min / 1000, max / 1000, mean / 1e3, dev / 1e3);
        "usec"
    } else {
        "nsec"
    };
    let _ = writeln!(
        out,
        "    {name} ({unit}): min={}, max={}, avg={mean:5.2}, stdev={dev:5.2}",
        num2str(min, 6, false),
        num2str(max, 6, false)
    );
}

/// Decimals needed to show every percentile of the list (at least 2, as fio's default
/// list shows them).
fn pct_precision(list: &[f64]) -> usize {
    list.iter()
        .map(|&p| (0..=6).find(|&d| (format!("{p:.d$}").parse::<f64>().unwrap_or(p) - p).abs() < 1e-9).unwrap_or(6))
        .max()
        .unwrap_or(2)
        .max(2)
}

/// A percentile block: `    clat percentiles (usec):` and rows `     |  1.00th=[   36], …`.
fn pct_block(out: &mut String, name: &str, h: &Histogram, list: &[f64]) {
    let vals = h.percentiles(list);
    if vals.is_empty() {
        return;
    }
    let minv = vals.iter().map(|v| v.1).min().unwrap_or(0);
    let maxv = vals.iter().map(|v| v.1).max().unwrap_or(0);
    let (unit, steps, divisor) = if minv > 2_000_000 && maxv > 99_999_999 {
        ("msec", 2, 1_000_000)
    } else if minv > 2000 && maxv > 99_999 {
        ("usec", 1, 1000)
    } else {
        ("nsec", 0, 1)
    };
    let prec = pct_precision(list);
    let width = (maxv / divisor).to_string().len().max(5);
    let per_line = (73 / (prec + 10 + width)).max(1);
    let _ = write!(out, "    {name} percentiles ({unit}):\n     |");
    for (j, &(p, v)) in vals.iter().enumerate() {
        if j != 0 && j % per_line == 0 {
            out.push_str("     |");
        }
        let mut v = v;
        for _ in 0..steps {
            v = v.div_ceil(1000);
        }
        let last = j + 1 == vals.len();
        let _ = write!(out, " {p:>w$.prec$}th=[{v:>width$}]{}", if last { '\n' } else { ',' }, w = prec + 3);
        if !last && j % per_line == per_line - 1 {
            out.push('\n');
        }
    }
}

fn bw_lines(out: &mut String, d: &Dir, g: &GroupDir) {
    let w = &d.bw;
    if w.n > 0 {
        let (mut min, mut max, mut mean, mut dev, mut unit) = (w.min, w.max, w.mean, w.stddev(), "KiB");
        if mean > 1024.0 * 1024.0 {
            (min, max, mean, dev, unit) = (min / 1024, max / 1024, mean / 1024.0, dev / 1024.0, "MiB");
        }
        let _ = writeln!(
            out,
            "   bw ({unit:>5}/s): min={min:5}, max={max:5}, per={:3.2}%, avg={mean:5.2}, stdev={dev:5.2}, samples={}",
            bw_share(d, g),
            w.n
        );
    }
    let w = &d.iops;
    if w.n > 0 {
        let _ = writeln!(
            out,
            "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}",
            w.min,
            w.max,
            w.mean,
            w.stddev(),
            w.n
        );
    }
}

fn dir_text(out: &mut String, name: &str, d: &Dir, g: &GroupDir, spec: &JobSpec) {
    let bw = d.bw_bytes();
    let _ = writeln!(
        out,
        "  {name}: IOPS={}, BW={}B/s ({}B/s)({}B/{}msec)",
        num2str(d.iops().round() as u64, 4, false),
        num2str(bw, 4, true),
        num2str(bw, 4, false),
        num2str(d.bytes, 4, true),
        d.runtime_ms()
    );
    if d.slat.samples() > 0 {
        lat_line(out, "slat", &d.slat.stats);
    }
    lat_line(out, "clat", &d.clat.stats);
    lat_line(out, " lat", &d.lat.stats);
    // fio's per-priority lines, named "clat" or "lat" (with lat_percentiles).
    let kind = if spec.lat_percentiles { "lat" } else { "clat" };
    let name = |v: u16| format!("{kind} prio {}/{}", ioswitch::cmd::ioprio::class(v), ioswitch::cmd::ioprio::level(v));
    if let Some(prios) = d.reported_prios() {
        for (v, l) in prios {
            lat_line(out, &name(*v), &l.stats);
        }
    }
    if spec.slat_percentiles && d.slat.samples() > 0 {
        pct_block(out, "slat", &d.slat.hist, &spec.percentile_list);
    }
    if spec.clat_percentiles {
        pct_block(out, "clat", &d.clat.hist, &spec.percentile_list);
    }
    if spec.lat_percentiles {
        pct_block(out, " lat", &d.lat.hist, &spec.percentile_list);
    }
    if let Some(prios) = d.reported_prios().filter(|_| spec.clat_percentiles || spec.lat_percentiles) {
        let all = if spec.lat_percentiles { d.lat.samples() } else { d.clat.samples() };
        for (v, l) in prios {
            let share = 100.0 * l.samples() as f64 / all.max(1) as f64;
            pct_block(out, &format!("{} ({share:.2}% of IOs)", name(*v)), &l.hist, &spec.percentile_list);
        }
    }
    bw_lines(out, d, g);
}

fn lat_dist_text(out: &mut String, dist: &[u64; 32]) {
    let pct = lat_pct(dist);
    let keys = lat_keys();
    for (unit, (range, keys)) in
        ["nsec", "usec", "msec"].iter().zip([(0..10), (10..20), (20..32)].into_iter().zip(keys.iter()))
    {
        let shown: Vec<String> = pct[range]
            .iter()
            .zip(keys)
            .filter(|(&v, _)| v > 0.0)
            .map(|(&v, k)| format!("{k}={:3.2}%", v.max(0.01)))
            .collect();
        for line in shown.chunks(5) {
            let _ = writeln!(out, "  lat ({unit})   : {}", line.join(", "));
        }
    }
}

fn pct_row(keys: &[&str], vals: &[f64; 7]) -> String {
    keys.iter().zip(vals).map(|(k, v)| format!("{k}={v:3.1}%")).collect::<Vec<_>>().join(", ")
}

fn entry_text(out: &mut String, e: &Entry<'_>, gd: &[(u32, [GroupDir; 3])], when: &str, ceiling: Option<f64>) {
    let err = match (&e.error_msg, e.error) {
        (_, 0) => String::new(),
        (Some(m), _) => format!(" ({m})"),
        (None, _) => String::new(),
    };
    let _ = writeln!(
        out,
        "{}: (groupid={}, jobs={}): err={:2}{err}: pid={}: {when}",
        e.name(),
        e.groupid,
        e.threads,
        e.error,
        std::process::id()
    );
    let spec = e.spec();
    for &(d, name) in reported_dirs(spec.behaviour.unified_rw_reporting) {
        if e.dirs[d].ios > 0 {
            dir_text(out, name, &e.dirs[d], &group_of(gd, e.groupid, d), spec);
        }
        if d == 1 && e.trim.ios > 0 {
            dir_text(out, "trim", &e.trim, &GroupDir::default(), spec);
        }
    }
    if e.sync.samples() > 0 {
        out.push_str("  fsync/fdatasync/sync_file_range:\n");
        lat_line(out, "sync", &e.sync.stats);
        if spec.clat_percentiles {
            pct_block(out, "sync", &e.sync.hist, &spec.percentile_list);
        }
    }
    lat_dist_text(out, &e.lat_dist);
    let _ = writeln!(
        out,
        "  cpu          : usr={:3.2}%, sys={:3.2}%, ctx={}, majf={}, minf={}",
        e.cpu_pct(e.usage.usr_ns),
        e.cpu_pct(e.usage.sys_ns),
        e.usage.ctx,
        e.usage.majf,
        e.usage.minf
    );
    let _ = writeln!(out, "  IO depths    : {}", pct_row(&DEPTH_KEYS, &depth_pct(&e.depth_level)));
    let _ = writeln!(out, "     submit    : {}", pct_row(&BATCH_KEYS, &depth_pct(&e.submit_level)));
    let _ = writeln!(out, "     complete  : {}", pct_row(&BATCH_KEYS, &depth_pct(&e.complete_level)));
    let _ = writeln!(
        out,
        "     issued rwts: total={},{},{},0 short=0,0,0,0 dropped=0,0,0,0",
        e.dirs[0].ios, e.dirs[1].ios, e.trim.ios
    );
    let (depth, target, pct, window) = latency_of(e.first);
    let _ = writeln!(out, "     latency   : target={target}, window={window}, percentile={pct:.2}%, depth={depth}");
    if spec.behaviour.continue_on_error != ContinueOn::default() {
        let why = std::io::Error::from_raw_os_error(e.first_error);
        let _ = writeln!(out, "     errors    : total={}, first_error={}/<{why}>", e.total_err, e.first_error);
    }
    if let Some(ss) = &e.steady {
        let _ = writeln!(out, "{}", ss.text());
    }
    let verified = if e.verified > 0 {
        format!(", verified {} blocks ({})", e.verified, verify::name(spec.verify))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  ioswitch     : interface={}, syscalls={} ({:.2} per I/O), queue submitted={}, completed={}{verified}",
        e.interface(),
        e.queue.syscalls,
        e.syscalls_per_io(),
        e.queue.submitted,
        e.queue.completed
    );
    let shared = if e.cpu.thread_count > e.threads {
        format!(", shared by the {} job threads of the phase", e.cpu.thread_count)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  ioswitch cpu : process usr={:3.2}%, sys={:3.2}%; other threads (helpers, kernel I/O workers, main) \
         usr={:3.2}%, sys={:3.2}% (of {}msec{shared})",
        e.cpu.usr(),
        e.cpu.sys(),
        e.cpu.other_usr(),
        e.cpu.other_sys(),
        e.cpu.phase_ns / 1_000_000
    );
    if let (Some(f), Some(c)) = (e.copy_fraction(ceiling), ceiling) {
        let _ = writeln!(
            out,
            "  ioswitch mem : {:.1}% of the single-thread copy ceiling measured in this run \
             (memcpy {:.2} GB/s counted read + written, i.e. {:.2} GB/s copied)",
            f * 100.0,
            c / 1e9,
            c / 2e9
        );
    }
}

fn group_text(out: &mut String, groupid: u32, gds: &[GroupDir; 3], unified: UnifiedRw) {
    let _ = writeln!(out, "\nRun status group {groupid} (all jobs):");
    for &(d, name) in reported_dirs(unified) {
        let g = &gds[d];
        let name = match name {
            "read" => "READ",
            "write" => "WRITE",
            _ => "MIXED",
        };
        if g.bytes == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "{name:>7}: bw={}B/s ({}B/s), {}B/s-{}B/s ({}B/s-{}B/s), io={}B ({}B), run={}-{}msec",
            num2str(g.agg_bw, 4, true),
            num2str(g.agg_bw, 4, false),
            num2str(g.min_bw, 4, true),
            num2str(g.max_bw, 4, true),
            num2str(g.min_bw, 4, false),
            num2str(g.max_bw, 4, false),
            num2str(g.bytes, 4, true),
            num2str(g.bytes, 4, false),
            g.min_run_ms,
            g.max_run_ms
        );
    }
}

/// fio's text report: one block per entry (instance, or group with `group_reporting`),
/// then one "Run status group" summary per group; ioswitch's own lines start with
/// `ioswitch`.
pub fn text(report: &Report) -> String {
    let entries = entries(report);
    let gd = group_dirs(&entries);
    let end = report.started + Duration::from_nanos(report.wall_ns);
    let when = ctime(end.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs());
    let mut out = String::new();
    for e in &entries {
        entry_text(&mut out, e, &gd, &when, report.copy_ceiling_bps);
    }
    for (g, gds) in &gd {
        let unified = entries.iter().find(|e| e.groupid == *g).map(|e| e.spec().behaviour.unified_rw_reporting);
        group_text(&mut out, *g, gds, unified.unwrap_or_default());
    }
    out
}

/// What fio prints before a run: one line per job (`j: (g=0): rw=randread, bs=(R) …`,
/// `...` for its clones), the version, and how many threads start.
pub fn preamble(prepared: &[Prepared]) -> String {
    let mut out = String::new();
    let mut threads = 0;
    for p in prepared {
        let (s, j) = (&p.spec, &p.job);
        let iface = crate::run::interface_name(p);
        let _ = writeln!(
            out,
            "{}: (g={}): rw={}, bs=(R) {r}B-{r}B, (W) {w}B-{w}B, (T) {w}B-{w}B, ioengine={}, iodepth={}, \
             interface={}",
            s.name,
            p.groupid,
            s.rw,
            s.ioengine,
            j.iodepth,
            iface,
            r = j.bs[0],
            w = j.bs[1],
        );
        if s.numjobs > 1 {
            out.push_str("...\n");
        }
        threads += s.numjobs.max(1);
    }
    let _ = writeln!(out, "{VERSION}\nStarting {threads} thread{}", if threads == 1 { "" } else { "s" });
    out
}

/// One line per failed job instance: `job NAME (instance N): what failed (errno E)`;
/// instances of a job that failed the same way (the same message and errno, e.g. 300
/// threads the process's limit did not let start) share one line, which says how many
/// and which: `job NAME (instances 16-63, 48 of 64): what failed (errno E)`.
pub fn errors(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for j in &report.jobs {
        // (message, errno, instances), in the order of each reason's first instance.
        let mut reasons: Vec<(&str, i32, Vec<u32>)> = Vec::new();
        for r in j.results.iter().filter(|r| r.error != 0) {
            let what = r.error_msg.as_deref().unwrap_or("failed");
            match reasons.iter_mut().find(|(m, e, _)| *m == what && *e == r.error) {
                Some((_, _, is)) => is.push(r.instance),
                None => reasons.push((what, r.error, vec![r.instance])),
            }
        }
        for (what, errno, instances) in reasons {
            let which = match instances.len() {
                _ if j.results.len() <= 1 => String::new(),
                1 => format!(" (instance {})", instances[0]),
                n => format!(" (instances {}, {n} of {})", ranges(&instances), j.results.len()),
            };
            out.push(format!("job {}{which}: {what} (errno {errno})", j.spec.name));
        }
    }
    out
}

/// Instance numbers as ranges: `[0, 1, 2, 5, 7, 8]` → `0-2, 5, 7-8`.
fn ranges(ns: &[u32]) -> String {
    let mut sorted = ns.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut k = i;
        while k + 1 < sorted.len() && sorted[k + 1] == sorted[k] + 1 {
            k += 1;
        }
        parts.push(if k == i { sorted[i].to_string() } else { format!("{}-{}", sorted[i], sorted[k]) });
        i = k + 1;
    }
    parts.join(", ")
}

/// C's `ctime()` without the newline, in local time: `Sun Nov 22 13:56:38 2026`.
fn ctime(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let t = secs as libc::time_t;
    // SAFETY: tm is plain data; all-zero is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is thread-safe.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if !ok {
        return format!("@{secs}");
    }
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        DAYS[tm.tm_wday.clamp(0, 6) as usize],
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tm.tm_year + 1900
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DirResult, Job};
    use crate::jobfile::{Loc, Rw};
    use std::time::SystemTime;

    fn job(name: &str, mode: Mode) -> Job {
        let qd = if mode == Mode::Async { 4 } else { 1 };
        crate::engine::test_job(name, "f", ioswitch::Opts::default(), mode, Rw::RandRead, qd)
    }

    /// An instance that read `n` blocks with latencies derived from `k`.
    fn result(name: &str, instance: u32, n: u64, k: u64, mode: Mode) -> JobResult {
        let mut d = DirResult::default();
        for i in 0..n {
            let slat = if mode == Mode::Async { 1000 + (i * 37 + k) % 900 } else { 0 };
            let clat = 20_000 + (i * 7919 + k * 13) % 150_000;
            if mode == Mode::Async {
                d.slat.record(slat);
            }
            d.clat.record(clat);
            d.lat.record(slat + clat);
            d.ios += 1;
            d.bytes += 4096;
        }
        for w in [1000 + k, 1200, 1100] {
            d.iops_samples.add(w);
            d.bw_samples.add(w * 4);
        }
        let mut r = JobResult { name: name.into(), instance, read: d, ..JobResult::default() };
        r.runtime_ns = 1_500_000_000;
        r.elapsed_ns = 1_600_000_000;
        r.job_runtime_ns = 1_600_000_000;
        r.usr_ns = 100_000_000;
        r.sys_ns = 300_000_000;
        r.ctx = 10;
        r.minf = 3;
        r.queue = QueueStats { submitted: n, completed: n, syscalls: n / 2 };
        r.depth_level = [1, 1, n - 2, 0, 0, 0, 0];
        r.submit_level = [0, n, 0, 0, 0, 0, 0];
        r.complete_level = [0, n, 0, 0, 0, 0, 0];
        r.lat_dist[14] = n;
        r
    }

    fn job_run(name: &str, groupid: u32, results: Vec<JobResult>, mode: Mode, group_reporting: bool) -> JobRun {
        let mut spec = JobSpec::new(name);
        spec.group_reporting = group_reporting;
        spec.numjobs = results.len() as u32;
        spec.options = vec![
            RawOption { key: "name".into(), value: Some(name.into()), loc: Loc::Arg { index: 1 } },
            RawOption { key: "thread".into(), value: None, loc: Loc::Arg { index: 2 } },
        ];
        JobRun {
            spec,
            job: job(name, mode),
            groupid,
            phase: 0,
            interface: if mode == Mode::Async { "io_uring".into() } else { "psync".into() },
            results,
            process: Usage { usr_ns: 500_000_000, sys_ns: 900_000_000, ctx: 0, majf: 0, minf: 0 },
            phase_ns: 1_700_000_000,
        }
    }

    fn report(jobs: Vec<JobRun>) -> Report {
        Report {
            jobs,
            started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            wall_ns: 2_000_000_000,
            copy_ceiling_bps: None,
        }
    }

    fn parse(j: &Json) -> serde_json::Value {
        serde_json::from_str(&j.render()).expect("our JSON parses")
    }

    /// A job with reads and writes (the writes: a copy of the reads, with other values).
    fn mixed_run(unified: UnifiedRw) -> Report {
        let mut r = result("m", 0, 100, 1, Mode::Async);
        r.write = result("m", 0, 60, 5, Mode::Async).read;
        let mut jr = job_run("m", 0, vec![r], Mode::Async, false);
        jr.spec.behaviour.unified_rw_reporting = unified;
        report(vec![jr])
    }

    #[test]
    fn trims_are_reported_in_fios_trim_direction_and_in_mixed() {
        let mut r = result("t", 0, 50, 3, Mode::Sync);
        r.trim = std::mem::take(&mut r.read);
        let jr = job_run("t", 0, vec![r], Mode::Sync, false);
        let v = parse(&json(&report(vec![jr]), &[], false));
        let t = &v["jobs"][0]["trim"];
        assert_eq!((t["total_ios"].as_u64(), t["io_bytes"].as_u64()), (Some(50), Some(50 * 4096)));
        assert_eq!(t["clat_ns"]["N"].as_u64(), Some(50));
        assert_eq!(v["jobs"][0]["read"]["total_ios"].as_u64(), Some(0));
        let mut r = result("t", 0, 50, 3, Mode::Sync);
        r.trim = std::mem::take(&mut r.read);
        let mut jr = job_run("t", 0, vec![r], Mode::Sync, false);
        jr.spec.behaviour.unified_rw_reporting = UnifiedRw::Mixed;
        let rep = report(vec![jr]);
        assert_eq!(parse(&json(&rep, &[], false))["jobs"][0]["mixed"]["total_ios"].as_u64(), Some(50));
        let mut r = result("t", 0, 50, 3, Mode::Sync);
        r.trim = std::mem::take(&mut r.read);
        let out = text(&report(vec![job_run("t", 0, vec![r], Mode::Sync, false)]));
        assert!(out.contains("  trim: IOPS=") && out.contains("issued rwts: total=0,0,50,0"), "{out}");
    }

    #[test]
    fn unified_rw_reporting_reports_mixed_instead_of_or_beside_the_directions() {
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v["jobs"][0]
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| ["read", "write", "trim", "mixed"].contains(&k.as_str()))
                .cloned()
                .collect()
        };
        let none = parse(&json(&mixed_run(UnifiedRw::None), &[], false));
        assert_eq!(keys(&none), ["read", "trim", "write"]);
        let mixed = parse(&json(&mixed_run(UnifiedRw::Mixed), &[], false));
        assert_eq!(keys(&mixed), ["mixed"]);
        let m = &mixed["jobs"][0]["mixed"];
        assert_eq!((m["total_ios"].as_u64(), m["io_bytes"].as_u64()), (Some(160), Some(160 * 4096)));
        assert_eq!(m["clat_ns"]["N"].as_u64(), Some(160));
        // The merged mean is the I/O-weighted mean of the two directions.
        let (r, w) = (&none["jobs"][0]["read"]["clat_ns"]["mean"], &none["jobs"][0]["write"]["clat_ns"]["mean"]);
        let want = (r.as_f64().unwrap() * 100.0 + w.as_f64().unwrap() * 60.0) / 160.0;
        assert!((m["clat_ns"]["mean"].as_f64().unwrap() - want).abs() < 1e-6 * want, "{m}");
        let both_text = json(&mixed_run(UnifiedRw::Both), &[], false).render();
        let at =
            |k: &str| both_text.find(&format!("\"{k}\" :")).or_else(|| both_text.find(&format!("\"{k}\":"))).expect(k);
        assert!(at("read") < at("write") && at("write") < at("trim") && at("trim") < at("mixed"), "fio's order");
        let both = parse(&json(&mixed_run(UnifiedRw::Both), &[], false));
        assert_eq!(keys(&both), ["mixed", "read", "trim", "write"]);
        assert_eq!(both["jobs"][0]["mixed"], *m);
        let t = text(&mixed_run(UnifiedRw::Mixed));
        assert!(t.contains("  mixed: IOPS=") && !t.contains("  read: IOPS=") && t.contains("  MIXED: bw="), "{t}");
        let t = text(&mixed_run(UnifiedRw::Both));
        assert!(t.contains("  mixed: IOPS=") && t.contains("  read: IOPS=") && t.contains("  write: IOPS="), "{t}");
    }

    #[test]
    fn error_counts_are_reported_when_continue_on_error_is_set() {
        let mut r = result("e", 0, 10, 1, Mode::Sync);
        (r.total_err, r.first_error) = (3, libc::EIO);
        let mut jr = job_run("e", 0, vec![r], Mode::Sync, false);
        let plain = parse(&json(&report(vec![jr.clone()]), &[], false));
        assert!(plain["jobs"][0].get("total_err").is_none(), "fio leaves them out without continue_on_error");
        jr.spec.behaviour.continue_on_error.read = true;
        let v = parse(&json(&report(vec![jr.clone()]), &[], false));
        assert_eq!((v["jobs"][0]["total_err"].as_u64(), v["jobs"][0]["first_error"].as_i64()), (Some(3), Some(5)));
        // As fio: the job that went on reports its first error as the job's error.
        assert_eq!(plain["jobs"][0]["error"].as_i64(), Some(0), "without continue_on_error the job had no error");
        assert_eq!(v["jobs"][0]["error"].as_i64(), Some(5));
        let t = text(&report(vec![jr]));
        assert!(t.contains("errors    : total=3, first_error=5/<"), "{t}");
        assert!(t.contains("err= 5"), "{t}");
    }

    #[test]
    fn json_has_fios_keys_types_and_order() {
        let r = report(vec![job_run("a", 0, vec![result("a", 0, 1000, 1, Mode::Async)], Mode::Async, false)]);
        let globals =
            [RawOption { key: "ioengine".into(), value: Some("io_uring".into()), loc: Loc::Arg { index: 1 } }];
        let j = json(&r, &globals, false);
        let keys: Vec<&str> = match &j {
            Json::Obj(p) => p.iter().map(|(k, _)| k.as_str()).collect(),
            _ => panic!("an object"),
        };
        assert_eq!(keys, ["fio version", "timestamp", "timestamp_ms", "time", "global options", "jobs"]);
        let v = parse(&j);
        assert!(v["timestamp"].is_u64() && v["timestamp_ms"].is_u64() && v["time"].is_string());
        assert_eq!(v["global options"]["ioengine"], "io_uring");
        let job = &v["jobs"][0];
        assert_eq!(job["jobname"], "a");
        // A bare option has no value: fio leaves it out of "job options".
        assert_eq!(job["job options"], serde_json::json!({"name": "a"}));
        for k in ["groupid", "error", "eta", "elapsed", "job_runtime", "ctx", "majf", "minf", "latency_depth"] {
            assert!(job[k].is_u64(), "{k}: {}", job[k]);
        }
        for k in ["usr_cpu", "sys_cpu", "latency_percentile"] {
            assert!(job[k].is_f64(), "{k}: {}", job[k]);
        }
        let read = &job["read"];
        for k in ["io_bytes", "io_kbytes", "bw_bytes", "bw", "runtime", "total_ios", "short_ios", "drop_ios"] {
            assert!(read[k].is_u64(), "{k}");
        }
        for k in ["bw_min", "bw_max", "bw_samples", "iops_min", "iops_max", "iops_samples"] {
            assert!(read[k].is_u64(), "{k}");
        }
        for k in ["iops", "bw_agg", "bw_mean", "bw_dev", "iops_mean", "iops_stddev"] {
            assert!(read[k].is_f64(), "{k}");
        }
        for lat in ["slat_ns", "clat_ns", "lat_ns"] {
            for k in ["min", "max", "N"] {
                assert!(read[lat][k].is_u64(), "{lat}.{k}");
            }
            assert!(read[lat]["mean"].is_f64() && read[lat]["stddev"].is_f64(), "{lat}");
        }
        assert_eq!(read["total_ios"], 1000);
        assert_eq!(read["io_kbytes"], 4000);
        assert_eq!(read["runtime"], 1500);
        assert_eq!(read["bw_bytes"], 4096u64 * 1000 * 1000 / 1500);
        // Percentiles: clat only by default, fio's keys, values from the histogram.
        let pct = read["clat_ns"]["percentile"].as_object().expect("clat percentiles");
        assert_eq!(pct.len(), 17);
        assert!(pct["99.000000"].is_u64() && pct.contains_key("99.990000") && pct.contains_key("1.000000"));
        assert!(read["lat_ns"].get("percentile").is_none() && read["slat_ns"].get("percentile").is_none());
        assert!(read["clat_ns"].get("bins").is_none(), "bins only in json+");
        // Empty directions: zeros, no percentiles.
        assert_eq!(
            job["write"]["clat_ns"],
            serde_json::json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0})
        );
        assert!(job["trim"]["iops"].is_f64());
        assert_eq!(job["sync"]["total_ios"], 0);
        assert_eq!(job["iodepth_level"].as_object().map(|o| o.len()), Some(7));
        assert!(job["iodepth_level"][">=64"].is_f64());
        assert!(job["iodepth_submit"]["0"].is_f64());
        assert_eq!(job["latency_ns"].as_object().map(|o| o.len()), Some(10));
        assert_eq!(job["latency_ms"].as_object().map(|o| o.len()), Some(12));
        assert_eq!(job["latency_us"]["50"], 100.0);
        // 1 of 1000 at depth 1: shown as fio's 0.1% floor.
        assert_eq!(job["iodepth_level"]["1"], 0.1);
        let x = &job["ioswitch"];
        assert_eq!(x["interface"], "io_uring");
        assert_eq!(x["syscalls"], 500);
        assert_eq!(x["syscalls_per_io"], 0.5);
        assert!(x["process_usr_cpu"].is_f64() && x["helper_sys_cpu"].is_f64());
        assert_eq!(x["clat_stamp"], "batch", "fio's rule unless the job asks for another");
    }

    #[test]
    fn json_plus_adds_bins_and_optional_percentiles_follow_the_spec() {
        let mut run = job_run("a", 0, vec![result("a", 0, 500, 1, Mode::Async)], Mode::Async, false);
        run.spec.lat_percentiles = true;
        run.spec.slat_percentiles = true;
        run.spec.percentile_list = vec![50.0, 99.5];
        let v = parse(&json(&report(vec![run]), &[], true));
        assert!(v.get("global options").is_none(), "no globals: no key, as fio");
        let read = &v["jobs"][0]["read"];
        for lat in ["slat_ns", "clat_ns", "lat_ns"] {
            let keys: Vec<&String> = read[lat]["percentile"].as_object().expect(lat).keys().collect();
            assert_eq!(keys, ["50.000000", "99.500000"], "{lat}");
            let bins = read[lat]["bins"].as_object().expect("bins");
            let total: u64 = bins.values().map(|c| c.as_u64().expect("count")).sum();
            assert_eq!(total, 500);
        }
    }

    #[test]
    fn slat_plus_clat_is_lat_for_async_jobs() {
        let v = parse(&json(
            &report(vec![job_run("a", 0, vec![result("a", 0, 4000, 3, Mode::Async)], Mode::Async, false)]),
            &[],
            false,
        ));
        let read = &v["jobs"][0]["read"];
        let m = |k: &str| read[k]["mean"].as_f64().expect("mean");
        let n = read["lat_ns"]["N"].as_u64().expect("N");
        assert_eq!(n, read["slat_ns"]["N"].as_u64().expect("N"));
        assert!((m("lat_ns") - m("slat_ns") - m("clat_ns")).abs() < 1e-6 * m("lat_ns"), "{read}");
        assert!(read["lat_ns"]["min"].as_u64() >= read["clat_ns"]["min"].as_u64());
    }

    #[test]
    fn latencies_per_priority_are_reported_and_merged_as_fio_reports_them() {
        // One job that chose priorities per command: its own (0) and 0x4001.
        let mut r = result("c", 0, 30, 1, Mode::Async);
        let (mut own, mut hi) = (LatStats::new(), LatStats::new());
        for i in 0..30u64 {
            if i % 3 == 0 { &mut hi } else { &mut own }.record(20_000 + i);
        }
        r.read.prios = vec![(0, own), (2 << 13 | 1, hi)];
        let one = parse(&json(&report(vec![job_run("c", 0, vec![r.clone()], Mode::Async, false)]), &[], false));
        let read = &one["jobs"][0]["read"];
        let keys: Vec<&String> = read.as_object().unwrap().keys().collect();
        let at = keys.iter().position(|k| *k == "prios").expect("prios");
        assert_eq!(keys[at - 1], "lat_ns", "fio: after lat_ns");
        let p = read["prios"].as_array().unwrap();
        let got: Vec<(u64, u64, u64)> = p
            .iter()
            .map(|e| {
                (e["prioclass"].as_u64().unwrap(), e["prio"].as_u64().unwrap(), e["clat_ns"]["N"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(got, vec![(0, 0, 20), (2, 1, 10)]);
        assert!(p[0]["clat_ns"].get("percentile").is_some(), "clat_percentiles is on by default");
        assert!(one["jobs"][0]["write"].get("prios").is_none(), "no samples: no prios");
        // A group of it and a job without a choice at prioclass=3: that job's latencies go
        // under its own priority; its 40 I/Os join none of the others.
        let mut other = job_run("d", 0, vec![result("d", 0, 40, 2, Mode::Async)], Mode::Async, true);
        other.spec.logs.ioprio = 3 << 13;
        let mut first = job_run("c", 0, vec![r.clone()], Mode::Async, true);
        first.spec.logs.ioprio = 0;
        let g = parse(&json(&report(vec![first, other]), &[], false));
        let p = g["jobs"][0]["read"]["prios"].as_array().unwrap();
        let got: Vec<(u64, u64, u64)> = p
            .iter()
            .map(|e| {
                (e["prioclass"].as_u64().unwrap(), e["prio"].as_u64().unwrap(), e["clat_ns"]["N"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(got, vec![(0, 0, 20), (2, 1, 10), (3, 0, 40)]);
        // Two jobs at one priority, without choices: no prios (fio keeps none).
        let same = parse(&json(
            &report(vec![
                job_run("a", 0, vec![result("a", 0, 10, 1, Mode::Async)], Mode::Async, true),
                job_run("b", 0, vec![result("b", 0, 10, 2, Mode::Async)], Mode::Async, true),
            ]),
            &[],
            false,
        ));
        assert!(same["jobs"][0]["read"].get("prios").is_none());
        // The text report: fio's per-priority lines.
        let t = text(&report(vec![job_run("c", 0, vec![r], Mode::Async, false)]));
        assert!(t.contains("    clat prio 0/0 (") && t.contains("    clat prio 2/1 ("), "{t}");
        assert!(t.contains("clat prio 2/1 (33.33% of IOs) percentiles"), "{t}");
    }

    #[test]
    fn group_reporting_merges_instances_like_fio() {
        let a = result("g", 0, 1000, 1, Mode::Async);
        let mut b = result("g", 1, 3000, 2, Mode::Async);
        b.runtime_ns = 1_800_000_000;
        b.error = 5;
        b.error_msg = Some("read at offset 4096: I/O error".into());
        let mut clat = a.read.clat.clone();
        clat.merge(&b.read.clat);
        let r = report(vec![job_run("g", 0, vec![a.clone(), b.clone()], Mode::Async, true)]);
        let v = parse(&json(&r, &[], false));
        let jobs = v["jobs"].as_array().expect("jobs");
        assert_eq!(jobs.len(), 1, "one entry for the group");
        let job = &jobs[0];
        assert_eq!(job["error"], 5);
        assert_eq!(job["ioswitch"]["error_msg"], "read at offset 4096: I/O error");
        let read = &job["read"];
        assert_eq!(read["total_ios"], 4000);
        assert_eq!(read["io_bytes"], 4000 * 4096);
        assert_eq!(read["runtime"], 1800, "the longest runtime");
        assert_eq!(read["clat_ns"]["N"], 4000);
        assert_eq!(read["clat_ns"]["min"], clat.stats.min());
        assert_eq!(read["clat_ns"]["max"], clat.stats.max());
        assert!((read["clat_ns"]["mean"].as_f64().expect("mean") - clat.stats.mean()).abs() < 1e-6);
        let p99 = clat.hist.percentile(99.0).expect("p99");
        assert_eq!(read["clat_ns"]["percentile"]["99.000000"], p99);
        // Concurrent windows add up: the group's throughput.
        assert_eq!(read["iops_samples"], 6);
        assert_eq!(read["iops_min"], (1001 + 1002) as u64);
        assert_eq!(job["job_runtime"], 3200, "job threads' runtimes add up");
        assert_eq!(job["elapsed"], 2);
        assert_eq!(job["ctx"], 20);
        assert_eq!(job["ioswitch"]["syscalls"], 500 + 1500);
        // Without group_reporting: one entry per instance, both named after the job.
        let r = report(vec![job_run("g", 0, vec![a, b], Mode::Async, false)]);
        let v = parse(&json(&r, &[], false));
        let jobs = v["jobs"].as_array().expect("jobs");
        assert_eq!(jobs.len(), 2);
        assert_eq!((jobs[0]["jobname"].clone(), jobs[1]["jobname"].clone()), ("g".into(), "g".into()));
        assert_eq!(
            (jobs[0]["read"]["total_ios"].clone(), jobs[1]["read"]["total_ios"].clone()),
            (1000.into(), 3000.into())
        );
    }

    #[test]
    fn sync_jobs_have_no_slat_and_count_one_io_per_submit() {
        let r = report(vec![job_run("s", 0, vec![result("s", 0, 100, 1, Mode::Sync)], Mode::Sync, false)]);
        let mut rr = r.clone();
        rr.jobs[0].results[0].submit_level = [0; 7];
        rr.jobs[0].results[0].complete_level = [0; 7];
        let v = parse(&json(&rr, &[], false));
        let job = &v["jobs"][0];
        assert_eq!(job["read"]["slat_ns"]["N"], 0);
        assert_eq!(job["iodepth_submit"]["4"], 100.0);
        assert_eq!(job["iodepth_complete"]["4"], 100.0);
        let t = text(&rr);
        assert!(!t.contains("slat"), "{t}");
    }

    #[test]
    fn text_report_looks_like_fios() {
        let r = report(vec![
            job_run("a", 0, vec![result("a", 0, 2000, 1, Mode::Async)], Mode::Async, false),
            job_run("b", 0, vec![result("b", 0, 1000, 2, Mode::Sync)], Mode::Sync, false),
        ]);
        let t = text(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("a: (groupid=0, jobs=1): err= 0: pid="), "{t}");
        assert!(lines[1].starts_with("  read: IOPS=1333, BW=5333KiB/s (5461kB/s)(8000KiB/1500msec)"), "{t}");
        assert!(lines[2].starts_with("    slat (nsec): min=1000, max="), "{t}");
        assert!(lines[3].starts_with("    clat (usec): min=20, max="), "{t}");
        assert!(lines[4].starts_with("     lat (usec): min=21, max="), "{t}");
        assert_eq!(lines[5], "    clat percentiles (usec):");
        assert!(lines[6].starts_with("     |  1.00th=[   "), "{t}");
        assert!(t.contains("   iops        : min= 1001, max= 1200, avg=1100.33, stdev="), "{t}");
        assert!(t.contains("   bw (  KiB/s): min= 4004, max= 4800, per="), "{t}");
        assert!(t.contains("  lat (usec)   : 50=100.00%\n"), "{t}");
        assert!(t.contains("  cpu          : usr=6.25%, sys=18.75%, ctx=10, majf=0, minf=3\n"), "{t}");
        assert!(t.contains("  IO depths    : 1=0.1%, 2=0.1%, 4=99.9%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%\n"), "{t}");
        assert!(t.contains("     issued rwts: total=2000,0,0,0 short=0,0,0,0 dropped=0,0,0,0\n"), "{t}");
        assert!(t.contains("  ioswitch     : interface=io_uring, syscalls=1000 (0.50 per I/O)"), "{t}");
        assert!(t.contains("  ioswitch     : interface=psync,"), "{t}");
        assert!(t.contains("\nRun status group 0 (all jobs):\n   READ: bw="), "{t}");
        assert!(t.contains("run=1500-1500msec"), "{t}");
        assert!(!t.contains("WRITE:"), "{t}");
    }

    #[test]
    fn percentile_rows_follow_fios_layout() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let mut out = String::new();
        pct_block(&mut out, "clat", &h, &crate::hist::DEFAULT_PERCENTILES);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "    clat percentiles (usec):");
        assert_eq!(lines.len(), 6, "{out}");
        assert_eq!(lines[1], "     |  1.00th=[   11],  5.00th=[   50], 10.00th=[  100], 20.00th=[  200],");
        assert!(lines[5].starts_with("     | 99.99th=[ 1004]") && !lines[5].ends_with(','), "{out}");
    }

    #[test]
    fn num2str_matches_fios_rounding() {
        assert_eq!(num2str(53_202, 4, false), "53.2k");
        assert_eq!(num2str(67_774, 4, false), "67.8k");
        assert_eq!(num2str(999, 4, false), "999");
        assert_eq!(num2str(5432, 4, false), "5432");
        assert_eq!(num2str(123_456, 4, false), "123k");
        assert_eq!(num2str(1_234_567, 4, false), "1235k");
        assert_eq!(num2str(1_333_600, 6, false), "1333.6k");
        assert_eq!(num2str(208 << 20, 4, true), "208Mi");
        assert_eq!(num2str(16_357_785, 4, true), "15.6Mi");
        assert_eq!(num2str(0, 4, true), "0");
        assert_eq!(num2str(16 << 20, 4, true), "16.0Mi");
        assert_eq!(num2str(10_000, 4, false), "10.0k");
    }

    #[test]
    fn json_renders_like_fio() {
        let j =
            obj([("a", 1u64.into()), ("b", 0.0.into()), ("c", obj([("x y", "s\"".into())])), ("d", Json::Arr(vec![]))]);
        assert_eq!(
            j.render(),
            "{\n  \"a\" : 1,\n  \"b\" : 0.000000,\n  \"c\" : {\n    \"x y\" : \"s\\\"\"\n  },\n  \"d\" : []\n}\n"
        );
        assert_eq!(j.get("a"), Some(&Json::Int(1)));
        assert_eq!(Json::Float(f64::NAN).render(), "0.000000\n");
    }

    #[test]
    fn errors_name_the_job_and_instance() {
        let mut r0 = result("v", 0, 10, 1, Mode::Sync);
        r0.error = libc::EILSEQ;
        r0.error_msg = Some("verify: bad block at offset 12288: crc32c mismatch".into());
        let r = report(vec![job_run("v", 0, vec![r0], Mode::Sync, false)]);
        assert_eq!(
            errors(&r),
            [format!("job v: verify: bad block at offset 12288: crc32c mismatch (errno {})", libc::EILSEQ)]
        );
        assert!(text(&r).starts_with(&format!("v: (groupid=0, jobs=1): err={}", libc::EILSEQ)));
        // Several instances: each line says which, and names the job once.
        let mut r1 = result("v", 1, 10, 1, Mode::Sync);
        r1.error = libc::EINVAL;
        r1.error_msg = Some("no file to run on".into());
        let mut ok = result("v", 0, 10, 1, Mode::Sync);
        ok.error = 0;
        let r = report(vec![job_run("v", 0, vec![ok, r1], Mode::Sync, false)]);
        assert_eq!(errors(&r), [format!("job v (instance 1): no file to run on (errno {})", libc::EINVAL)]);
    }

    #[test]
    fn instances_failed_the_same_way_share_one_line() {
        // 8 instances: 0 runs, 1-3 and 6-7 cannot start their thread, 4 and 5 fail otherwise.
        let start = "starting the job's thread: Resource temporarily unavailable";
        let results = (0..8)
            .map(|i| {
                let mut r = result("t", i, 10, 1, Mode::Sync);
                (r.error, r.error_msg) = match i {
                    0 => (0, None),
                    4 | 5 => (libc::EIO, Some(format!("read at offset {}: I/O error", i * 4096))),
                    _ => (libc::EAGAIN, Some(start.into())),
                };
                r
            })
            .collect();
        let r = report(vec![job_run("t", 0, results, Mode::Sync, false)]);
        assert_eq!(
            errors(&r),
            [
                format!("job t (instances 1-3, 6-7, 5 of 8): {start} (errno {})", libc::EAGAIN),
                format!("job t (instance 4): read at offset 16384: I/O error (errno {})", libc::EIO),
                format!("job t (instance 5): read at offset 20480: I/O error (errno {})", libc::EIO),
            ]
        );
        assert_eq!(ranges(&[5, 0, 1, 2, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(ranges(&[3]), "3");
    }
}
