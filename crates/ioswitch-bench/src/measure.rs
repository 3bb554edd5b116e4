//! The measurement machinery the nested benchmarks share: the interfaces to measure
//! ([`Iface`]) and the job spec for each ([`spec_for`]), one run's figures ([`Sample`]),
//! their spread over repetitions ([`Spread`], [`Summary`]), the interleaved runner
//! that yields one [`Point`] per job, and the table and unit formatting
//! of their text output.
//!
//! [`compare`](crate::compare) measures one point per interface; [`sweep`](crate::sweep)
//! a grid of interfaces × queue depths × block sizes.

use crate::engine::{self, JobResult};
use crate::error::{BenchError, ListKind, UnknownIface};
use crate::jobfile::{IoEngine, JobSpec, Rw, SizeSpec};
use crate::plot::LineChart;
use crate::run::{self, JobRun, Prepared, RunOpts};
use crate::stats::LatStats;
use ioswitch::{AsyncIface, Opts, SyncIface};
use serde_json::{json, Value};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// An I/O interface to measure: a synchronous one (the job runs at queue depth 1 through
/// `Device::pass`) or an asynchronous one (through a `Queue` at the job's `iodepth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Iface {
    /// A synchronous interface (`psync`, `block`, `ramdisk`, `nvme`).
    Sync(SyncIface),
    /// An asynchronous interface (`io_uring`, `libaio`, `posix`, `thrpool`, `emu`, `nil`, …).
    Async(AsyncIface),
}

impl Iface {
    /// The interfaces of the default run, in table order: sync first, then async from
    /// the kernel's fastest path to the library's own floor.
    pub const DEFAULT_SET: [Iface; 7] = [
        Iface::Sync(SyncIface::Psync),
        Iface::Async(AsyncIface::IoUring),
        Iface::Async(AsyncIface::Libaio),
        Iface::Async(AsyncIface::Posix),
        Iface::Async(AsyncIface::Thrpool),
        Iface::Async(AsyncIface::Emu),
        Iface::Async(AsyncIface::Nil),
    ];

    /// Every interface the library knows, sync ones first (what `all` means).
    pub fn all() -> Vec<Iface> {
        SyncIface::ALL.iter().map(|&s| Iface::Sync(s)).chain(AsyncIface::ALL.iter().map(|&a| Iface::Async(a))).collect()
    }

    /// The name used in option strings and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Iface::Sync(s) => s.as_str(),
            Iface::Async(a) => a.as_str(),
        }
    }

    /// Whether the interface is synchronous (queue depth 1).
    pub fn is_sync(self) -> bool {
        matches!(self, Iface::Sync(_))
    }
}

impl fmt::Display for Iface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Iface {
    type Err = UnknownIface;
    fn from_str(s: &str) -> Result<Iface, UnknownIface> {
        if let Some(&a) = AsyncIface::ALL.iter().find(|a| a.as_str() == s) {
            return Ok(Iface::Async(a));
        }
        if let Some(&y) = SyncIface::ALL.iter().find(|y| y.as_str() == s) {
            return Ok(Iface::Sync(y));
        }
        Err(UnknownIface { name: s.to_string() })
    }
}

/// Interfaces chosen on a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The interfaces, in the order given.
    pub ifaces: Vec<Iface>,
    /// `all` was given: interfaces that cannot serve the target are skipped (with the
    /// reason printed) instead of failing the run.
    pub all: bool,
}

/// Parses a comma list with no repeats: each item, trimmed, by `one`; a value given a
/// second time is the error `twice(item, value)`.
pub(crate) fn parse_unique<T: PartialEq, E>(
    list: &str,
    mut one: impl FnMut(&str) -> Result<T, E>,
    twice: impl Fn(&str, &T) -> E,
) -> Result<Vec<T>, E> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        let v = one(item)?;
        if out.contains(&v) {
            return Err(twice(item, &v));
        }
        out.push(v);
    }
    Ok(out)
}

/// Parses `io_uring,libaio,psync` or `all`. Errors name the list and the bad item.
pub fn parse_interfaces(list: &str) -> Result<Selection, BenchError> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().all(|s| s.is_empty()) {
        return Err(BenchError::EmptyInterfaceList { list: list.to_string() });
    }
    if items == ["all"] {
        return Ok(Selection { ifaces: Iface::all(), all: true });
    }
    let ifaces = parse_unique(
        list,
        |item| {
            if item == "all" {
                return Err(BenchError::AllStandsAlone { list: list.to_string() });
            }
            item.parse::<Iface>().map_err(|source| BenchError::ListIface { list: list.to_string(), source })
        },
        |item, _| BenchError::Twice { kind: ListKind::Interfaces, list: list.to_string(), item: item.to_string() },
    )?;
    Ok(Selection { ifaces, all: false })
}

/// The job spec that runs `base` on one interface: `ioengine=ioswitch` with the
/// interface set in `ioswitch_opts` (other library options of an `ioswitch` base job
/// kept). io_uring tunables (`hipri`, `sqthread_poll`, `fixedbufs`, `registerfiles` and
/// their `ioswitch_opts` twins) stay on io_uring only.
pub fn spec_for(base: &JobSpec, iface: Iface) -> JobSpec {
    let mut s = base.clone();
    let mut o = match (&base.ioengine, &base.ioswitch_opts) {
        (IoEngine::Ioswitch, Some(o)) => o.clone(),
        _ => Opts::default(),
    };
    match iface {
        Iface::Sync(y) => {
            o.sync = Some(y);
            o.r#async = None;
        }
        Iface::Async(a) => o.r#async = Some(a),
    }
    if !matches!(iface, Iface::Async(AsyncIface::IoUring | AsyncIface::IoUringCmd)) {
        s.hipri = false;
        s.sqthread_poll = false;
        s.sqthread_poll_cpu = None;
        s.fixedbufs = false;
        s.registerfiles = false;
        o.iopoll = false;
        o.sqpoll = false;
        o.sqpoll_cpu = None;
        o.register_buffers = false;
        o.register_files = false;
    }
    s.ioengine = IoEngine::Ioswitch;
    s.ioswitch_opts = Some(o);
    s.stonewall = false;
    s
}

/// min / median / max of a figure over repetitions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (all zero when empty; NaNs sort last).
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Spread { median, min: v[0], max: v[n - 1] }
    }

    /// `{"median": …, "min": …, "max": …}`.
    pub fn to_json(&self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max })
    }
}

/// What one repetition of one job measured (reads and writes together, every instance
/// of `numjobs` together). Latencies in ns, bandwidth in bytes/s, CPU in percent of one
/// CPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// I/Os completed after ramp.
    pub ios: u64,
    /// Measured time (the longest instance's), ns.
    pub runtime_ns: u64,
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw: f64,
    /// Mean total latency.
    pub lat_mean: f64,
    /// Median total latency (fio's histogram).
    pub lat_p50: f64,
    /// 99th percentile of total latency.
    pub lat_p99: f64,
    /// 99.9th percentile of total latency.
    pub lat_p999: f64,
    /// Mean submission latency; `None` for sync interfaces (fio reports none).
    pub slat_mean: Option<f64>,
    /// Mean completion latency.
    pub clat_mean: f64,
    /// User CPU of the job threads, % of their run time.
    pub usr: f64,
    /// System CPU of the job threads, % of their run time.
    pub sys: f64,
    /// User CPU of the whole process (helper threads included), % of the run's wall time.
    pub proc_usr: f64,
    /// System CPU of the whole process, % of the run's wall time.
    pub proc_sys: f64,
    /// Syscalls per I/O, counted by the interface.
    pub syscalls_per_io: f64,
    /// Context switches of the job threads per I/O.
    pub ctx_per_io: f64,
}

impl Sample {
    /// The sample of one run of one job; an error when an instance failed or no I/O
    /// completed.
    pub fn of(run: &JobRun) -> Result<Sample, BenchError> {
        let mut lat = LatStats::new();
        let mut slat = LatStats::new();
        let mut clat = LatStats::new();
        let (mut ios, mut bytes, mut runtime, mut elapsed) = (0u64, 0u64, 0u64, 0u64);
        let (mut usr, mut sys, mut ctx, mut syscalls, mut completed) = (0u64, 0u64, 0u64, 0u64, 0u64);
        for r in &run.results {
            if r.error != 0 {
                return Err(result_error(r));
            }
            for d in [&r.read, &r.write] {
                lat.merge(&d.lat);
                slat.merge(&d.slat);
                clat.merge(&d.clat);
                ios += d.ios;
                bytes += d.bytes;
            }
            runtime = runtime.max(r.runtime_ns);
            elapsed = elapsed.max(r.job_runtime_ns);
            usr += r.usr_ns;
            sys += r.sys_ns;
            ctx += r.ctx;
            syscalls += r.queue.syscalls;
            completed += r.queue.completed;
        }
        if ios == 0 || runtime == 0 {
            return Err(BenchError::NoIo { job: run.spec.name.clone() });
        }
        let secs = runtime as f64 / 1e9;
        let pct = |ns: u64, of: u64| if of == 0 { 0.0 } else { ns as f64 * 100.0 / of as f64 };
        let p = |q: f64| lat.hist.percentile(q).unwrap_or(0) as f64;
        Ok(Sample {
            ios,
            runtime_ns: runtime,
            iops: ios as f64 / secs,
            bw: bytes as f64 / secs,
            lat_mean: lat.stats.mean(),
            lat_p50: p(50.0),
            lat_p99: p(99.0),
            lat_p999: p(99.9),
            slat_mean: (slat.samples() > 0).then(|| slat.stats.mean()),
            clat_mean: clat.stats.mean(),
            usr: pct(usr, elapsed),
            sys: pct(sys, elapsed),
            proc_usr: pct(run.process.usr_ns, run.phase_ns),
            proc_sys: pct(run.process.sys_ns, run.phase_ns),
            syscalls_per_io: if completed == 0 { 0.0 } else { syscalls as f64 / completed as f64 },
            ctx_per_io: if completed == 0 { 0.0 } else { ctx as f64 / completed as f64 },
        })
    }

    /// Every field, for JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "ios": self.ios,
            "runtime_ns": self.runtime_ns,
            "iops": self.iops,
            "bw_bytes": self.bw,
            "lat_mean_ns": self.lat_mean,
            "lat_p50_ns": self.lat_p50,
            "lat_p99_ns": self.lat_p99,
            "lat_p999_ns": self.lat_p999,
            "slat_mean_ns": self.slat_mean,
            "clat_mean_ns": self.clat_mean,
            "usr_cpu": self.usr,
            "sys_cpu": self.sys,
            "process_usr_cpu": self.proc_usr,
            "process_sys_cpu": self.proc_sys,
            "syscalls_per_io": self.syscalls_per_io,
            "ctx_per_io": self.ctx_per_io,
        })
    }
}

fn result_error(r: &JobResult) -> BenchError {
    let msg = r.error_msg.clone().unwrap_or_else(|| std::io::Error::from_raw_os_error(r.error).to_string());
    BenchError::Instance { job: r.name.clone(), instance: r.instance, errno: r.error, msg }
}

/// Every figure of [`Sample`] over the repetitions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Repetitions summarised.
    pub reps: usize,
    /// I/Os per second.
    pub iops: Spread,
    /// Bytes per second.
    pub bw: Spread,
    /// Mean total latency, ns.
    pub lat_mean: Spread,
    /// Median total latency, ns.
    pub lat_p50: Spread,
    /// 99th percentile, ns.
    pub lat_p99: Spread,
    /// 99.9th percentile, ns.
    pub lat_p999: Spread,
    /// Mean submission latency, ns (`None`: sync interface).
    pub slat_mean: Option<Spread>,
    /// Mean completion latency, ns.
    pub clat_mean: Spread,
    /// Job threads' user CPU, %.
    pub usr: Spread,
    /// Job threads' system CPU, %.
    pub sys: Spread,
    /// Whole-process user CPU, %.
    pub proc_usr: Spread,
    /// Whole-process system CPU, %.
    pub proc_sys: Spread,
    /// Syscalls per I/O.
    pub syscalls_per_io: Spread,
    /// Context switches per I/O.
    pub ctx_per_io: Spread,
}

impl Summary {
    /// Summarises repetitions.
    pub fn of(samples: &[Sample]) -> Summary {
        let f = |g: fn(&Sample) -> f64| Spread::of(&samples.iter().map(g).collect::<Vec<f64>>());
        let slat: Vec<f64> = samples.iter().filter_map(|s| s.slat_mean).collect();
        Summary {
            reps: samples.len(),
            iops: f(|s| s.iops),
            bw: f(|s| s.bw),
            lat_mean: f(|s| s.lat_mean),
            lat_p50: f(|s| s.lat_p50),
            lat_p99: f(|s| s.lat_p99),
            lat_p999: f(|s| s.lat_p999),
            slat_mean: (!slat.is_empty()).then(|| Spread::of(&slat)),
            clat_mean: f(|s| s.clat_mean),
            usr: f(|s| s.usr),
            sys: f(|s| s.sys),
            proc_usr: f(|s| s.proc_usr),
            proc_sys: f(|s| s.proc_sys),
            syscalls_per_io: f(|s| s.syscalls_per_io),
            ctx_per_io: f(|s| s.ctx_per_io),
        }
    }

    /// Every figure as `{median, min, max}`.
    pub fn to_json(&self) -> Value {
        json!({
            "reps": self.reps,
            "iops": self.iops.to_json(),
            "bw_bytes": self.bw.to_json(),
            "lat_mean_ns": self.lat_mean.to_json(),
            "lat_p50_ns": self.lat_p50.to_json(),
            "lat_p99_ns": self.lat_p99.to_json(),
            "lat_p999_ns": self.lat_p999.to_json(),
            "slat_mean_ns": self.slat_mean.map(|s| s.to_json()),
            "clat_mean_ns": self.clat_mean.to_json(),
            "usr_cpu": self.usr.to_json(),
            "sys_cpu": self.sys.to_json(),
            "process_usr_cpu": self.proc_usr.to_json(),
            "process_sys_cpu": self.proc_sys.to_json(),
            "syscalls_per_io": self.syscalls_per_io.to_json(),
            "ctx_per_io": self.ctx_per_io.to_json(),
        })
    }
}

/// An interface left out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Interface name.
    pub iface: String,
    /// Why (the open or run error).
    pub reason: String,
}

/// One measured job: an interface at one queue depth and block size, every repetition's
/// sample and their summary. [`compare`](crate::compare) has one per interface,
/// [`sweep`](crate::sweep) one per grid point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The interface asked for.
    pub iface: Iface,
    /// The interface the device reported serving the I/O.
    pub interface: String,
    /// Queue depth it ran at (1 for sync interfaces).
    pub qd: u32,
    /// Block size of reads (writes when the job only writes), bytes.
    pub bs: u64,
    /// One sample per repetition, in run order.
    pub samples: Vec<Sample>,
    /// Medians and spreads.
    pub summary: Summary,
}

/// One job to measure.
pub(crate) struct Item {
    /// The interface (items of one interface are skipped together).
    pub iface: Iface,
    /// The job.
    pub spec: JobSpec,
}

/// Runs every item `reps` times, interleaved (all items, then all items again, …), and
/// returns one [`Point`] per item measured, in item order. An item that fails to open
/// or to run ends the measurement with an error naming its interface, unless
/// `skip_unavailable`: then every item of that interface is dropped and the reason
/// recorded once.
pub(crate) fn measure(
    items: &[Item],
    reps: u32,
    skip_unavailable: bool,
    say: &mut dyn FnMut(&str),
) -> Result<(Vec<Point>, Vec<Skipped>), BenchError> {
    if reps == 0 {
        return Err(BenchError::NoRepetitions);
    }
    if items.is_empty() {
        return Err(BenchError::NothingToRun);
    }
    let mut skipped: Vec<Skipped> = Vec::new();
    let mut prepared: Vec<Option<Prepared>> = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        if skipped.iter().any(|s| s.iface == item.iface.as_str()) {
            prepared.push(None);
            continue;
        }
        if let Some(p) = on_open_controller(&prepared, &item.spec, n as u32) {
            prepared.push(Some(p.map_err(|e| BenchError::Interface { iface: item.iface, source: Box::new(e) })?));
            continue;
        }
        match run::prepare(&item.spec, n as u32, say) {
            Ok(p) => prepared.push(Some(p)),
            Err(e) if skip_unavailable => {
                drop_iface(&mut prepared, items, item.iface);
                prepared.push(None);
                skipped.push(Skipped { iface: item.iface.to_string(), reason: e.to_string() });
            }
            Err(e) => return Err(BenchError::Interface { iface: item.iface, source: Box::new(e) }),
        }
    }
    let mut out: Vec<Option<Point>> = prepared
        .iter()
        .zip(items)
        .map(|(p, it)| {
            p.as_ref().map(|p| Point {
                iface: it.iface,
                interface: String::new(),
                qd: p.job.iodepth,
                bs: job_bs(&it.spec),
                samples: Vec::new(),
                summary: Summary::default(),
            })
        })
        .collect();
    let runs = prepared.iter().filter(|p| p.is_some()).count() as u64 * reps as u64;
    if let Some(t) = items.first().and_then(|i| i.spec.runtime) {
        let one = t.saturating_add(items[0].spec.ramp_time.unwrap_or(Duration::ZERO)).as_secs_f64();
        say(&format!("{runs} runs of about {:.0} ms each: about {:.0} s", one * 1e3, (one * runs as f64).max(1.0)));
    }
    for rep in 0..reps {
        for i in 0..items.len() {
            let Some(p) = prepared[i].clone() else { continue };
            let report = run::run(vec![p], &RunOpts::default());
            let sample = report
                .jobs
                .first()
                .ok_or(BenchError::NoJob)
                .and_then(|j| Sample::of(j).map(|s| (j.interface.clone(), s)));
            match sample {
                Ok((interface, s)) => {
                    if let Some(m) = out[i].as_mut() {
                        m.interface = interface;
                        m.samples.push(s);
                    }
                }
                Err(e) if skip_unavailable => {
                    let iface = items[i].iface;
                    drop_iface(&mut prepared, items, iface);
                    for (o, it) in out.iter_mut().zip(items) {
                        if it.iface == iface {
                            *o = None;
                        }
                    }
                    skipped.push(Skipped { iface: iface.to_string(), reason: format!("repetition {}: {e}", rep + 1) });
                }
                Err(e) => {
                    return Err(BenchError::Repetition { iface: items[i].iface, rep: rep + 1, source: Box::new(e) })
                }
            }
        }
    }
    let points = out
        .into_iter()
        .flatten()
        .map(|mut p| {
            p.summary = Summary::of(&p.samples);
            p
        })
        .collect();
    Ok((points, skipped))
}

/// A point on a PCI address whose controller an earlier point of the same run already
/// holds open: that point's device, with this point's job (name, depth, job count,
/// block size; checked against the device as a fresh open's would be). A controller
/// opens once per process (its VFIO group is exclusive: a second open is EBUSY), and the
/// points run one at a time. `None` for any other target, or when no earlier point has
/// the same job up to name, depth, job count and block size.
fn on_open_controller(
    earlier: &[Option<Prepared>],
    spec: &JobSpec,
    groupid: u32,
) -> Option<Result<Prepared, BenchError>> {
    let pci =
        spec.filename.first().is_some_and(|f| matches!(ioswitch::uri::parse(f), Ok(ioswitch::uri::Target::Pci(_))));
    if !pci || spec.file_count() != 1 {
        return None;
    }
    let same = |s: &JobSpec| {
        let mut s = s.clone();
        s.name.clone_from(&spec.name);
        s.iodepth = spec.iodepth;
        s.numjobs = spec.numjobs;
        s.bs = spec.bs;
        s == *spec
    };
    let e = earlier.iter().flatten().find(|p| same(&p.spec))?;
    let mut p = e.clone();
    // The earlier job's depth is its spec's, unless its mode runs at depth 1 regardless.
    let forced = e.job.iodepth != e.spec.iodepth.max(1);
    if !forced {
        p.job.iodepth = spec.iodepth.max(1);
    }
    p.job.name.clone_from(&spec.name);
    p.job.bs = [spec.bs.read, spec.bs.write];
    p.job.group = groupid;
    p.groupid = groupid;
    p.spec = spec.clone();
    if let Err(source) = engine::check_job(&p.job, &p.dev) {
        return Some(Err(BenchError::Check { at: crate::error::At::new(spec, "size"), source }));
    }
    Some(Ok(p))
}

fn drop_iface(prepared: &mut [Option<Prepared>], items: &[Item], iface: Iface) {
    for (p, it) in prepared.iter_mut().zip(items) {
        if it.iface == iface {
            *p = None;
        }
    }
}

/// The job in words, for table headings.
pub(crate) fn describe(spec: &JobSpec) -> String {
    let bs = match spec.rw {
        Rw::Write | Rw::RandWrite => spec.bs.write,
        _ => spec.bs.read,
    };
    let mut s = format!("{} bs={}", spec.rw, ioswitch::units::fmt_size(bs));
    if spec.rw == Rw::ReadWrite || spec.rw == Rw::RandRw {
        s += &format!(" rwmixread={}", spec.rwmixread);
    }
    s += &format!(" iodepth={}", spec.iodepth);
    if spec.numjobs > 1 {
        s += &format!(" numjobs={}", spec.numjobs);
    }
    if spec.direct {
        s += " direct=1";
    }
    match spec.size {
        Some(SizeSpec::Bytes(b)) => s += &format!(" size={}", ioswitch::units::fmt_size(b)),
        Some(SizeSpec::Percent(p)) => s += &format!(" size={p}%"),
        None => {}
    }
    if let Some(r) = spec.runtime {
        s += &format!(" runtime={}ms", r.as_millis());
    }
    if let Some(r) = spec.ramp_time {
        s += &format!(" ramp_time={}ms", r.as_millis());
    }
    s
}

/// The target in words: the job's file (or files), else fio's default file name.
pub(crate) fn target_of(spec: &JobSpec) -> String {
    match spec.filename.as_slice() {
        [] => crate::files::format_name(spec.behaviour.filename_format.as_deref(), &spec.name, 0, 0),
        [one] => one.clone(),
        more => more.join(":"),
    }
}

/// The bytes per I/O of a job (reads, or writes for a write-only job).
pub(crate) fn job_bs(spec: &JobSpec) -> u64 {
    if spec.rw.reads() {
        spec.bs.read
    } else {
        spec.bs.write
    }
}

/// The error of a measurement where every interface was skipped: each with its reason.
pub(crate) fn none_ran(base: &JobSpec, skipped: Vec<Skipped>) -> BenchError {
    BenchError::NoneRan { target: target_of(base), skipped }
}

/// ns as `812ns`, `4.21µs`, `65.1µs`, `1.23ms`, `2.50s` (three significant digits).
pub fn fmt_ns(ns: f64) -> String {
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if unit == "ns" {
        format!("{v:.0}{unit}")
    } else if v < 10.0 {
        format!("{v:.2}{unit}")
    } else if v < 100.0 {
        format!("{v:.1}{unit}")
    } else {
        format!("{v:.0}{unit}")
    }
}

/// A count as `950`, `31.5k`, `1.23M`.
pub fn fmt_count(n: f64) -> String {
    if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

/// A plain-text table: columns padded to their widest cell (counted in characters),
/// the first `left` columns left-aligned, the others right-aligned.
pub(crate) struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub left: usize,
}

impl Table {
    pub(crate) fn new(head: &[&str], left: usize) -> Table {
        Table { head: head.iter().map(|s| s.to_string()).collect(), rows: Vec::new(), left }
    }

    /// The table as CSV: the header, then the rows, cells joined by commas.
    pub(crate) fn to_csv(&self) -> String {
        std::iter::once(&self.head).chain(&self.rows).map(|line| line.join(",") + "\n").collect()
    }

    pub(crate) fn render(&self) -> String {
        let n = self.head.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.head).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.head).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(n) {
                let pad = " ".repeat(w[i] - c.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                if i < self.left {
                    line.push_str(c);
                    line.push_str(&pad);
                } else {
                    line.push_str(&pad);
                    line.push_str(c);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The first line of a results table: which command, the job, the target and the
/// repetitions its medians are over.
pub(crate) fn heading(command: &str, job: &str, target: &str, reps: u32) -> String {
    format!(
        "ioswitch bench {command}: {job} on {target}, median of {reps} repetition{} (interleaved)\n\n",
        if reps == 1 { "" } else { "s" }
    )
}

/// A column of a results table or CSV that a point's [`Summary`] fills.
pub(crate) struct SummaryColumn {
    /// The header.
    pub name: &'static str,
    /// The cell.
    pub cell: fn(&Summary) -> String,
}

/// Every summary column of the CSVs, in their order: medians (and the IOPS spread),
/// latencies in ns, CPU in % of one CPU; `slat_mean_ns` is empty for sync interfaces.
pub(crate) const CSV_COLUMNS: [SummaryColumn; 15] = [
    SummaryColumn { name: "reps", cell: |m| m.reps.to_string() },
    SummaryColumn { name: "iops", cell: |m| format!("{:.1}", m.iops.median) },
    SummaryColumn { name: "iops_min", cell: |m| format!("{:.1}", m.iops.min) },
    SummaryColumn { name: "iops_max", cell: |m| format!("{:.1}", m.iops.max) },
    SummaryColumn { name: "bw_bytes_per_s", cell: |m| format!("{:.0}", m.bw.median) },
    SummaryColumn { name: "lat_mean_ns", cell: |m| format!("{:.1}", m.lat_mean.median) },
    SummaryColumn { name: "lat_p50_ns", cell: |m| format!("{:.1}", m.lat_p50.median) },
    SummaryColumn { name: "lat_p99_ns", cell: |m| format!("{:.1}", m.lat_p99.median) },
    SummaryColumn { name: "lat_p999_ns", cell: |m| format!("{:.1}", m.lat_p999.median) },
    SummaryColumn {
        name: "slat_mean_ns",
        cell: |m| m.slat_mean.map(|x| format!("{:.1}", x.median)).unwrap_or_default(),
    },
    SummaryColumn { name: "clat_mean_ns", cell: |m| format!("{:.1}", m.clat_mean.median) },
    SummaryColumn { name: "usr_cpu_pct", cell: |m| format!("{:.1}", m.usr.median) },
    SummaryColumn { name: "sys_cpu_pct", cell: |m| format!("{:.1}", m.sys.median) },
    SummaryColumn { name: "process_cpu_pct", cell: |m| format!("{:.1}", m.proc_usr.median + m.proc_sys.median) },
    SummaryColumn { name: "syscalls_per_io", cell: |m| format!("{:.3}", m.syscalls_per_io.median) },
];

/// The summary columns of the terminal tables: medians (and the IOPS spread); `slat` is
/// `-` for sync interfaces; CPU in % of one CPU (`thread`: the job threads, `process`,
/// `CPU`: the whole process).
pub(crate) const TEXT_COLUMNS: [SummaryColumn; 13] = [
    SummaryColumn { name: "IOPS", cell: |m| fmt_count(m.iops.median) },
    SummaryColumn {
        name: "IOPS min–max", cell: |m| format!("{}–{}", fmt_count(m.iops.min), fmt_count(m.iops.max))
    },
    SummaryColumn { name: "BW", cell: |m| format!("{}/s", run::human_bytes(m.bw.median)) },
    SummaryColumn { name: "lat mean", cell: |m| fmt_ns(m.lat_mean.median) },
    SummaryColumn { name: "p50", cell: |m| fmt_ns(m.lat_p50.median) },
    SummaryColumn { name: "p99", cell: |m| fmt_ns(m.lat_p99.median) },
    SummaryColumn { name: "p99.9", cell: |m| fmt_ns(m.lat_p999.median) },
    SummaryColumn { name: "slat", cell: |m| m.slat_mean.map(|x| fmt_ns(x.median)).unwrap_or_else(|| "-".into()) },
    SummaryColumn { name: "clat", cell: |m| fmt_ns(m.clat_mean.median) },
    SummaryColumn { name: "thread usr/sys", cell: |m| format!("{:.0}%/{:.0}%", m.usr.median, m.sys.median) },
    SummaryColumn { name: "process usr/sys", cell: |m| format!("{:.0}%/{:.0}%", m.proc_usr.median, m.proc_sys.median) },
    SummaryColumn { name: "syscalls/IO", cell: |m| format!("{:.2}", m.syscalls_per_io.median) },
    SummaryColumn { name: "CPU", cell: |m| format!("{:.0}%", m.proc_usr.median + m.proc_sys.median) },
];

/// A table of results, one row per point: the header (`keys`, left-aligned, then the
/// columns of `all` — [`TEXT_COLUMNS`] or [`CSV_COLUMNS`] — named in `columns`, in that
/// order) and the rows (each row's key cells, then those columns of its summary).
pub(crate) fn results_table<'a>(
    all: &[SummaryColumn],
    keys: &[&str],
    columns: &[&str],
    rows: impl IntoIterator<Item = (Vec<String>, &'a Summary)>,
) -> Table {
    let columns: Vec<&SummaryColumn> = columns.iter().filter_map(|n| all.iter().find(|c| c.name == *n)).collect();
    let head = keys.iter().map(|k| k.to_string()).chain(columns.iter().map(|c| c.name.to_string())).collect();
    let rows =
        rows.into_iter().map(|(key, m)| key.into_iter().chain(columns.iter().map(|c| (c.cell)(m))).collect()).collect();
    Table { head, rows, left: keys.len() }
}

/// Writes a result into `dir` (created when missing): `{stem}.csv`, `{stem}.json` and
/// every chart as SVG under its name; returns the paths written.
pub(crate) fn write_result(
    dir: &Path,
    stem: &str,
    csv: String,
    json: &Value,
    charts: impl IntoIterator<Item = (String, LineChart)>,
) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir).map_err(|source| BenchError::CreateOutputDir { path: dir.to_path_buf(), source })?;
    let json_name = format!("{stem}.json");
    let json =
        serde_json::to_string_pretty(json).map_err(|source| BenchError::Encode { file: json_name.clone(), source })?;
    let mut files = vec![(format!("{stem}.csv"), csv), (json_name, json + "\n")];
    files.extend(charts.into_iter().map(|(name, c)| (name, c.to_svg())));
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| BenchError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

/// A directory created for a run and removed, with everything in it, when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// Creates `parent/ioswitch-bench-<pid>-<n>`.
    pub(crate) fn new(parent: &Path) -> Result<TempDir, BenchError> {
        let meta =
            std::fs::metadata(parent).map_err(|source| BenchError::Dir { path: parent.to_path_buf(), source })?;
        if !meta.is_dir() {
            return Err(BenchError::NotADir { path: parent.to_path_buf() });
        }
        let stamp = engine::now_ns();
        let path = parent.join(format!("ioswitch-bench-{}-{stamp}", std::process::id()));
        std::fs::create_dir(&path).map_err(|source| BenchError::CreateTemp { path: path.clone(), source })?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_on_an_open_controller_takes_its_device_with_its_own_job() {
        // The first point's device is opened on a ramdisk (no controller here); its spec
        // then names a PCI address, as a vfio point's does.
        let pci = "0000:00:05.0".to_string();
        let mut first = JobSpec::new("s-vfio-j1-qd1");
        first.filename = vec!["ramdisk:1m".into()];
        first.rw = Rw::RandRead;
        first.iodepth = 1;
        let mut p = run::prepare(&spec_for(&first, Iface::Async(AsyncIface::Nil)), 0, &mut |_| {}).unwrap();
        p.spec.filename = vec![pci.clone()];
        let earlier = vec![Some(p.clone()), None];
        let mut next = p.spec.clone();
        next.name = "s-vfio-j2-qd16".into();
        next.iodepth = 16;
        next.numjobs = 2;
        next.bs.read = 8192;
        let q = on_open_controller(&earlier, &next, 2)
            .expect("the same job up to name, depth, job count and block size")
            .unwrap();
        assert_eq!(q.job.bs[0], 8192);
        assert_eq!((q.job.iodepth, q.spec.numjobs, q.job.name.as_str()), (16, 2, "s-vfio-j2-qd16"));
        assert_eq!((q.groupid, q.job.group), (2, 2));
        assert_eq!(q.dev.uri(), p.dev.uri(), "the earlier point's device");
        // Another job on the controller, or a target that is not a PCI address, opens its own.
        let mut other = next.clone();
        other.rw = Rw::Read;
        assert!(on_open_controller(&earlier, &other, 2).is_none());
        let mut file = next.clone();
        file.filename = vec!["ramdisk:1m".into()];
        let mut earlier_file = p.clone();
        earlier_file.spec.filename = file.filename.clone();
        assert!(on_open_controller(&[Some(earlier_file)], &file, 2).is_none());
        // A block size the region cannot hold is refused as a fresh open's check would.
        let mut odd = next.clone();
        odd.bs.read = 2 << 20;
        let e = on_open_controller(&earlier, &odd, 2).expect("the same controller").unwrap_err().to_string();
        assert!(e.contains("s-vfio-j2-qd16"), "{e}");
    }

    #[test]
    fn spread_takes_the_median_and_extremes() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Spread { median: 2.0, min: 1.0, max: 3.0 });
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]), Spread { median: 2.5, min: 1.0, max: 4.0 });
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn interface_lists_parse_and_errors_name_the_item() {
        let s = parse_interfaces("io_uring, libaio,psync").unwrap();
        assert_eq!(
            s.ifaces,
            [Iface::Async(AsyncIface::IoUring), Iface::Async(AsyncIface::Libaio), Iface::Sync(SyncIface::Psync)]
        );
        assert!(!s.all);
        let all = parse_interfaces("all").unwrap();
        assert!(all.all && all.ifaces.len() == SyncIface::ALL.len() + AsyncIface::ALL.len());
        assert!(parse_interfaces("io_uring,bogus").unwrap_err().to_string().contains("\"bogus\""));
        assert!(parse_interfaces("nil,nil").unwrap_err().to_string().contains("twice"));
        assert!(parse_interfaces("").unwrap_err().to_string().contains("empty"));
        assert!(parse_interfaces("all,nil").unwrap_err().to_string().contains("alone"));
    }

    #[test]
    fn spec_for_sets_the_interface_and_keeps_io_uring_tunables_on_io_uring() {
        let mut base = JobSpec::new("j");
        base.ioengine = IoEngine::IoUring;
        base.sqthread_poll = true;
        base.iodepth = 8;
        let s = spec_for(&base, Iface::Async(AsyncIface::Libaio));
        assert_eq!(s.ioengine, IoEngine::Ioswitch);
        assert_eq!(s.ioswitch_opts.as_ref().unwrap().r#async, Some(AsyncIface::Libaio));
        assert!(!s.sqthread_poll);
        assert_eq!(s.iodepth, 8);
        assert!(spec_for(&base, Iface::Async(AsyncIface::IoUring)).sqthread_poll);
        let p = spec_for(&base, Iface::Sync(SyncIface::Psync));
        let o = p.ioswitch_opts.unwrap();
        assert_eq!((o.sync, o.r#async), (Some(SyncIface::Psync), None));
        let (_, mode) = run::engine_opts(&spec_for(&base, Iface::Sync(SyncIface::Psync))).unwrap();
        assert_eq!(mode, engine::Mode::Sync);
    }

    #[test]
    fn units_read_naturally() {
        assert_eq!(fmt_ns(812.0), "812ns");
        assert_eq!(fmt_ns(4210.0), "4.21µs");
        assert_eq!(fmt_ns(65_100.0), "65.1µs");
        assert_eq!(fmt_ns(1_230_000.0), "1.23ms");
        assert_eq!(fmt_count(950.0), "950");
        assert_eq!(fmt_count(31_500.0), "31.5k");
        assert_eq!(fmt_count(1_234_000.0), "1.23M");
    }
}
