//! `ioswitch bench overhead`: what ioswitch itself costs per I/O, measured the way the
//! xNVMe paper measures xNVMe — the library against the same work done without it.
//!
//! Pairs, each run on the same file, the same offsets and the same number of I/Os:
//!
//! | interface | ioswitch side | raw side (no ioswitch) |
//! |---|---|---|
//! | `nil` | `Queue` on the nil interface: submit, poke, callback | a bare in-process queue doing the same bookkeeping (move the buffer in, range check, move it out, callback) |
//! | `psync` | `Device::pass` on psync | a `pread(2)` loop |
//! | `libaio` | `Queue` on libaio | `io_submit(2)` / `io_getevents(2)` through `libc::syscall` with our own `iocb`s |
//! | `io_uring` | `Queue` on io_uring | the `io-uring` crate: one `io_uring_enter` to submit, one to wait when the CQ is empty |
//!
//! Both sides of a pair issue the same syscalls (the table shows syscalls per I/O of
//! each, counted), and both are driven by the same generic loop (offsets from one
//! seeded generator, timestamps at submission and per reaped batch), so the difference
//! is the library. The sides alternate (ioswitch first in even repetitions, raw first in
//! odd ones) and the penalty of a repetition is the difference within that repetition;
//! the report gives the median and the min–max over repetitions, over a grid of queue
//! depths and block sizes, and checks that the penalty stays flat across the grid: a
//! library cost per I/O should not grow with the queue or the transfer.

use crate::compare::{fmt_count, Iface, Skipped, Spread, Table, TempDir};
use crate::engine::{now_ns, Rng};
use crate::error::{BenchError, LoopError, OverheadError};
use ioswitch::{AsyncIface, Buffer, Cmd, Completion, Data, Device, Opts, Queue, SyncIface};
use raw::{open_raw, thread_cpu_ns, AioContext, AlignedBuf, IoEvent, Iocb, IOCB_CMD_PREAD};
use serde_json::{json, Value};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

mod raw;
pub mod targets;

/// The interfaces with a raw reference loop.
pub const SUPPORTED: [Iface; 4] = [
    Iface::Async(AsyncIface::Nil),
    Iface::Sync(SyncIface::Psync),
    Iface::Async(AsyncIface::Libaio),
    Iface::Async(AsyncIface::IoUring),
];

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct OverheadOpts {
    /// Where the temporary file is created (when `file` is `None`); a disk file system
    /// is best (io_uring punts tmpfs reads to a worker thread).
    pub dir: PathBuf,
    /// Read this existing file or block device instead of a temporary file.
    pub file: Option<PathBuf>,
    /// Size of the temporary file, bytes.
    pub file_size: u64,
    /// Interfaces, from [`SUPPORTED`].
    pub interfaces: Vec<Iface>,
    /// Queue depths (sync interfaces run at 1 only).
    pub qds: Vec<u32>,
    /// Block sizes, bytes (multiples of 512).
    pub bss: Vec<u64>,
    /// Repetitions of every pair.
    pub reps: u32,
    /// Target duration of one side's run, ms (the I/O count is calibrated to it).
    pub run_ms: u64,
    /// Open with O_DIRECT on both sides.
    pub direct: bool,
    /// Smallest tolerance of the flatness check, ns per I/O.
    pub tolerance_floor_ns: f64,
}

impl Default for OverheadOpts {
    fn default() -> Self {
        OverheadOpts {
            dir: std::env::temp_dir(),
            file: None,
            file_size: 64 << 20,
            interfaces: SUPPORTED.to_vec(),
            qds: vec![1, 16],
            bss: vec![4096, 65536],
            reps: 7,
            run_ms: 40,
            direct: false,
            tolerance_floor_ns: 25.0,
        }
    }
}

/// One side's run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SideRun {
    /// I/Os completed.
    pub ios: u64,
    /// Wall time of the run, ns.
    pub wall_ns: u64,
    /// Sum of per-I/O latencies (submission to reaped), ns.
    pub lat_sum_ns: u128,
    /// Syscalls made.
    pub syscalls: u64,
    /// CPU time of the measuring thread over the run (user + system), ns: unlike wall
    /// time it leaves out time the thread was preempted, so it is steadier on a busy
    /// machine; it also leaves out time spent waiting for a device.
    pub cpu_ns: u64,
}

impl SideRun {
    /// `total` spread over the I/Os (0 when there were none); u128 holds every counter
    /// exactly, so the quotient is the one each counter's own type gave.
    fn per_io(&self, total: u128) -> f64 {
        if self.ios == 0 {
            0.0
        } else {
            total as f64 / self.ios as f64
        }
    }
    /// Wall time per I/O (1/IOPS), ns.
    pub fn ns_per_io(&self) -> f64 {
        self.per_io(self.wall_ns.into())
    }
    /// Mean latency, ns.
    pub fn lat_mean(&self) -> f64 {
        self.per_io(self.lat_sum_ns)
    }
    /// Thread CPU time per I/O, ns.
    pub fn cpu_per_io(&self) -> f64 {
        self.per_io(self.cpu_ns.into())
    }
    /// Syscalls per I/O.
    pub fn syscalls_per_io(&self) -> f64 {
        self.per_io(self.syscalls.into())
    }
}

/// One (interface, queue depth, block size) pair, every repetition.
#[derive(Clone, Debug, PartialEq)]
pub struct OverheadPoint {
    /// Interface.
    pub iface: Iface,
    /// Queue depth.
    pub qd: u32,
    /// Block size, bytes.
    pub bs: u64,
    /// I/Os per run (both sides).
    pub ios_per_run: u64,
    /// ioswitch side, one run per repetition.
    pub lib: Vec<SideRun>,
    /// Raw side, one run per repetition.
    pub raw: Vec<SideRun>,
}

impl OverheadPoint {
    fn paired_samples(&self, f: fn(&SideRun) -> f64) -> Vec<f64> {
        self.lib.iter().zip(&self.raw).map(|(l, r)| f(l) - f(r)).collect()
    }
    fn paired(&self, f: fn(&SideRun) -> f64) -> Spread {
        Spread::of(&self.paired_samples(f))
    }
    /// Penalty in wall time per I/O (1/IOPS), ns: ioswitch − raw, paired per repetition.
    pub fn penalty(&self) -> Spread {
        self.paired(SideRun::ns_per_io)
    }
    /// Penalty in mean latency, ns.
    pub fn lat_penalty(&self) -> Spread {
        self.paired(SideRun::lat_mean)
    }
    /// Penalty in thread CPU time per I/O, ns.
    pub fn cpu_penalty(&self) -> Spread {
        self.paired(SideRun::cpu_per_io)
    }
    /// ioswitch side's wall time per I/O, ns.
    pub fn lib_ns_per_io(&self) -> Spread {
        Spread::of(&self.lib.iter().map(SideRun::ns_per_io).collect::<Vec<_>>())
    }
    /// Raw side's wall time per I/O, ns.
    pub fn raw_ns_per_io(&self) -> Spread {
        Spread::of(&self.raw.iter().map(SideRun::ns_per_io).collect::<Vec<_>>())
    }
    /// ioswitch side's syscalls per I/O (median).
    pub fn lib_syscalls_per_io(&self) -> f64 {
        Spread::of(&self.lib.iter().map(SideRun::syscalls_per_io).collect::<Vec<_>>()).median
    }
    /// Raw side's syscalls per I/O (median).
    pub fn raw_syscalls_per_io(&self) -> f64 {
        Spread::of(&self.raw.iter().map(SideRun::syscalls_per_io).collect::<Vec<_>>()).median
    }
}

/// Which penalty a flatness check looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Wall time per I/O (1/IOPS).
    Wall,
    /// Thread CPU time per I/O.
    Cpu,
}

impl Metric {
    /// `wall` or `cpu`.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Wall => "wall",
            Metric::Cpu => "cpu",
        }
    }
    /// The penalty of a point in this metric.
    pub fn penalty(self, p: &OverheadPoint) -> Spread {
        Spread::of(&self.samples(p))
    }
    /// The per-repetition penalties of a point in this metric.
    pub fn samples(self, p: &OverheadPoint) -> Vec<f64> {
        match self {
            Metric::Wall => p.paired_samples(SideRun::ns_per_io),
            Metric::Cpu => p.paired_samples(SideRun::cpu_per_io),
        }
    }
}

/// Interquartile range (linear interpolation between order statistics); 0 when empty.
pub fn iqr(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let x = p * (v.len() - 1) as f64;
        let (i, f) = (x.floor() as usize, x.fract());
        v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * f
    };
    q(0.75) - q(0.25)
}

/// Whether one interface's penalty stays flat over the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Flatness {
    /// Interface.
    pub iface: Iface,
    /// The penalty looked at.
    pub metric: Metric,
    /// Points compared.
    pub points: usize,
    /// Smallest median penalty, ns.
    pub min_ns: f64,
    /// Largest median penalty, ns.
    pub max_ns: f64,
    /// Widest interquartile range of the per-repetition penalties at one point, ns: the
    /// noise of this run (robust to one disturbed repetition, unlike min–max).
    pub noise_ns: f64,
    /// `max(floor, noise)`, ns.
    pub tolerance_ns: f64,
    /// `max − min ≤ tolerance`.
    pub flat: bool,
}

impl Flatness {
    /// The check over `points` of one interface.
    pub fn of(iface: Iface, metric: Metric, points: &[&OverheadPoint], floor_ns: f64) -> Flatness {
        let medians: Vec<f64> = points.iter().map(|p| metric.penalty(p).median).collect();
        let min_ns = medians.iter().copied().fold(f64::INFINITY, f64::min);
        let max_ns = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let noise_ns = points.iter().map(|p| iqr(&metric.samples(p))).fold(0.0, f64::max);
        let tolerance_ns = floor_ns.max(noise_ns);
        let (min_ns, max_ns) = if points.is_empty() { (0.0, 0.0) } else { (min_ns, max_ns) };
        Flatness {
            iface,
            metric,
            points: points.len(),
            min_ns,
            max_ns,
            noise_ns,
            tolerance_ns,
            flat: max_ns - min_ns <= tolerance_ns,
        }
    }
}

/// The result of [`overhead`].
#[derive(Clone, Debug, PartialEq)]
pub struct OverheadResult {
    /// The file read.
    pub file: String,
    /// Its size, bytes.
    pub file_size: u64,
    /// O_DIRECT on both sides.
    pub direct: bool,
    /// Repetitions.
    pub reps: u32,
    /// Floor of the flatness tolerance, ns.
    pub tolerance_floor_ns: f64,
    /// Pairs, grouped by interface.
    pub points: Vec<OverheadPoint>,
    /// Flatness per interface.
    pub flatness: Vec<Flatness>,
    /// Interfaces that could not run here, and why.
    pub skipped: Vec<Skipped>,
}

fn signed(ns: f64) -> String {
    format!("{ns:+.1}")
}

impl OverheadResult {
    /// The table, the flatness verdicts, and the skipped interfaces.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "ioswitch bench overhead: ioswitch against the same work without it, random reads of {} ({}, {}),\n\
             {} repetitions, sides alternating, same offsets and I/O count on both sides\n\
             raw side: nil = a bare in-process queue (same bookkeeping, no library); psync = a pread loop;\n\
             libaio = io_submit/io_getevents with our own iocbs; io_uring = the io-uring crate, same io_uring_enter calls\n\n",
            self.file,
            ioswitch::units::fmt_size(self.file_size),
            if self.direct { "O_DIRECT" } else { "buffered: page cache" },
            self.reps
        );
        let mut t = Table::new(
            &[
                "interface",
                "qd",
                "bs",
                "I/Os/run",
                "raw ns/IO",
                "ioswitch ns/IO",
                "penalty ns/IO",
                "penalty min..max",
                "cpu penalty ns/IO",
                "cpu penalty min..max",
                "lat penalty ns",
                "syscalls/IO raw|ioswitch",
            ],
            1,
        );
        for p in &self.points {
            let (pen, cpu) = (p.penalty(), p.cpu_penalty());
            t.rows.push(vec![
                p.iface.to_string(),
                p.qd.to_string(),
                ioswitch::units::fmt_size(p.bs),
                fmt_count(p.ios_per_run as f64),
                format!("{:.1}", p.raw_ns_per_io().median),
                format!("{:.1}", p.lib_ns_per_io().median),
                signed(pen.median),
                format!("{}..{}", signed(pen.min), signed(pen.max)),
                signed(cpu.median),
                format!("{}..{}", signed(cpu.min), signed(cpu.max)),
                signed(p.lat_penalty().median),
                format!("{:.2}|{:.2}", p.raw_syscalls_per_io(), p.lib_syscalls_per_io()),
            ]);
        }
        out += &t.render();
        out += "\npenalty = ioswitch − raw in wall time per I/O (1/IOPS), paired per repetition: median, min..max;\n\
                cpu penalty = the same in CPU time of the measuring thread (steadier: preemption left out);\n\
                lat penalty = the same for mean latency (submission to reaped; at qd > 1 it includes queueing).\n";
        out += &format!(
            "\nflat check: the median penalties of an interface over qd × bs lie within a tolerance of\n\
             max({:.0} ns, noise), noise = the widest interquartile range of one point's penalties in this run:\n",
            self.tolerance_floor_ns
        );
        let mut f = Table::new(
            &["interface", "penalty", "points", "median range ns", "spread ns", "noise ns", "tolerance ns", "verdict"],
            1,
        );
        for x in &self.flatness {
            f.rows.push(vec![
                x.iface.to_string(),
                x.metric.as_str().to_string(),
                x.points.to_string(),
                format!("{}..{}", signed(x.min_ns), signed(x.max_ns)),
                format!("{:.1}", x.max_ns - x.min_ns),
                format!("{:.1}", x.noise_ns),
                format!("{:.1}", x.tolerance_ns),
                match (x.points, x.flat) {
                    (0 | 1, _) => "one point".to_string(),
                    (_, true) => "flat".to_string(),
                    (_, false) => "NOT flat".to_string(),
                },
            ]);
        }
        out += &f.render();
        for s in &self.skipped {
            out += &format!("skipped {}: {}\n", s.iface, s.reason);
        }
        out
    }

    /// Everything, with per-repetition runs of both sides.
    pub fn to_json(&self) -> Value {
        let side = |r: &SideRun| {
            json!({
                "ios": r.ios,
                "wall_ns": r.wall_ns,
                "ns_per_io": r.ns_per_io(),
                "lat_mean_ns": r.lat_mean(),
                "syscalls_per_io": r.syscalls_per_io(),
                "cpu_ns": r.cpu_ns,
                "cpu_ns_per_io": r.cpu_per_io(),
            })
        };
        json!({
            "file": self.file,
            "file_size": self.file_size,
            "direct": self.direct,
            "reps": self.reps,
            "tolerance_floor_ns": self.tolerance_floor_ns,
            "points": self.points.iter().map(|p| json!({
                "interface": p.iface.as_str(),
                "qd": p.qd,
                "bs": p.bs,
                "ios_per_run": p.ios_per_run,
                "raw_ns_per_io": p.raw_ns_per_io().to_json(),
                "ioswitch_ns_per_io": p.lib_ns_per_io().to_json(),
                "penalty_ns_per_io": p.penalty().to_json(),
                "cpu_penalty_ns_per_io": p.cpu_penalty().to_json(),
                "lat_penalty_ns": p.lat_penalty().to_json(),
                "raw_syscalls_per_io": p.raw_syscalls_per_io(),
                "ioswitch_syscalls_per_io": p.lib_syscalls_per_io(),
                "raw": p.raw.iter().map(side).collect::<Vec<_>>(),
                "ioswitch": p.lib.iter().map(side).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "flatness": self.flatness.iter().map(|x| json!({
                "interface": x.iface.as_str(),
                "metric": x.metric.as_str(),
                "points": x.points,
                "min_ns": x.min_ns,
                "max_ns": x.max_ns,
                "noise_ns": x.noise_ns,
                "tolerance_ns": x.tolerance_ns,
                "flat": x.flat,
            })).collect::<Vec<_>>(),
            "skipped": self.skipped.iter().map(|s| json!({"interface": s.iface, "reason": s.reason})).collect::<Vec<_>>(),
        })
    }
}

// ---------------------------------------------------------------------------------------
// The two kinds of loop, shared by both sides.

/// A queue-like side: commands go in by slot, come back by slot.
trait AsyncSide {
    /// Queues a read of the side's block size at `offset` into slot `slot`'s buffer.
    fn submit(&mut self, slot: u32, offset: u64) -> Result<(), LoopError>;
    /// Hands queued reads to the kernel.
    fn commit(&mut self) -> Result<(), LoopError>;
    /// Reaps at least one completion (waiting if needed), calling `f` with each slot.
    fn reap<F: FnMut(u32)>(&mut self, f: F) -> Result<(), LoopError>;
    /// Syscalls so far.
    fn syscalls(&self) -> u64;
}

/// A synchronous side.
trait SyncSide {
    /// Reads the side's block size at `offset`.
    fn read(&mut self, offset: u64) -> Result<(), LoopError>;
    /// Syscalls so far.
    fn syscalls(&self) -> u64;
}

/// Memory both loops reuse between runs, so a run allocates nothing.
struct Scratch {
    starts: Vec<u64>,
    free: Vec<u32>,
}

/// One run through a queue-like side: keep `depth` reads in flight until `n` are done,
/// fio-style (fill the queue, commit, reap at least one; one timestamp per reaped batch).
fn drive_async<T: AsyncSide>(
    t: &mut T,
    depth: u32,
    n: u64,
    bs: u64,
    blocks: u64,
    seed: u64,
    sc: &mut Scratch,
) -> Result<SideRun, LoopError> {
    sc.free.clear();
    sc.free.extend((0..depth).rev());
    let mut rng = Rng::new(seed);
    let s0 = t.syscalls();
    let (mut issued, mut done, mut lat) = (0u64, 0u64, 0u128);
    let c0 = thread_cpu_ns();
    let t0 = now_ns();
    while done < n {
        while issued < n {
            let Some(slot) = sc.free.pop() else { break };
            let off = rng.below(blocks) * bs;
            sc.starts[slot as usize] = now_ns();
            t.submit(slot, off)?;
            issued += 1;
        }
        t.commit()?;
        let mut complete = 0u64;
        let (starts, free) = (&sc.starts, &mut sc.free);
        t.reap(|slot| {
            if complete == 0 {
                complete = now_ns();
            }
            lat += (complete - starts[slot as usize]) as u128;
            free.push(slot);
            done += 1;
        })?;
    }
    let wall_ns = now_ns() - t0;
    let cpu_ns = thread_cpu_ns() - c0;
    Ok(SideRun { ios: done, wall_ns, lat_sum_ns: lat, syscalls: t.syscalls() - s0, cpu_ns })
}

/// One run through a synchronous side.
fn drive_sync<T: SyncSide>(t: &mut T, n: u64, bs: u64, blocks: u64, seed: u64) -> Result<SideRun, LoopError> {
    let mut rng = Rng::new(seed);
    let s0 = t.syscalls();
    let mut lat = 0u128;
    let c0 = thread_cpu_ns();
    let t0 = now_ns();
    for _ in 0..n {
        let off = rng.below(blocks) * bs;
        let start = now_ns();
        t.read(off)?;
        lat += (now_ns() - start) as u128;
    }
    let wall_ns = now_ns() - t0;
    let cpu_ns = thread_cpu_ns() - c0;
    Ok(SideRun { ios: n, wall_ns, lat_sum_ns: lat, syscalls: t.syscalls() - s0, cpu_ns })
}

// ---------------------------------------------------------------------------------------
// ioswitch sides.

/// A `Queue` with one buffer per slot, moved in at submit and back at completion.
struct LibQueue {
    q: Queue,
    bufs: Vec<Option<Buffer>>,
    nsid: u32,
    lba: u64,
    nlb: u32,
    /// Reap with `poke` (nil: everything is done at commit) instead of `wait(1)`.
    poke: bool,
}

impl AsyncSide for LibQueue {
    #[inline]
    fn submit(&mut self, slot: u32, offset: u64) -> Result<(), LoopError> {
        let Some(buf) = self.bufs[slot as usize].take() else {
            return Err(LoopError::NoBuffer { slot });
        };
        let cmd = Cmd::read(self.nsid, offset / self.lba, self.nlb);
        match self.q.submit(&cmd, Data::One(buf), slot as u64) {
            Ok(()) => Ok(()),
            Err(r) => {
                self.bufs[slot as usize] = r.data.into_one();
                Err(LoopError::Submit { offset, source: r.error })
            }
        }
    }
    #[inline]
    fn commit(&mut self) -> Result<(), LoopError> {
        self.q.commit().map(|_| ()).map_err(LoopError::Commit)
    }
    #[inline]
    fn reap<F: FnMut(u32)>(&mut self, mut f: F) -> Result<(), LoopError> {
        let bufs = &mut self.bufs;
        let mut failed = None;
        let mut cb = |c: Completion| {
            let slot = c.tag as usize;
            if !c.status.is_ok() && failed.is_none() {
                failed = Some(c.status);
            }
            bufs[slot] = c.data.into_one();
            f(slot as u32);
        };
        let r = if self.poke { self.q.poke(0, &mut cb) } else { self.q.wait(1, &mut cb) };
        r.map_err(LoopError::Reap)?;
        match failed {
            Some(s) => Err(LoopError::ReadFailed(s)),
            None => Ok(()),
        }
    }
    fn syscalls(&self) -> u64 {
        self.q.stats().syscalls
    }
}

/// `Device::pass` on the sync interface.
struct LibSync {
    dev: Device,
    buf: Buffer,
    nsid: u32,
    lba: u64,
    nlb: u32,
    calls: u64,
}

impl SyncSide for LibSync {
    #[inline]
    fn read(&mut self, offset: u64) -> Result<(), LoopError> {
        self.calls += 1;
        let cmd = Cmd::read(self.nsid, offset / self.lba, self.nlb);
        self.dev.pass(&cmd, std::slice::from_mut(&mut self.buf)).map(|_| ()).map_err(LoopError::Lib)
    }
    fn syscalls(&self) -> u64 {
        self.calls * self.dev.sync_syscalls_per_cmd()
    }
}

// ---------------------------------------------------------------------------------------
// Raw sides: no ioswitch.

/// The bookkeeping of a queue without the library: the buffer moves into a pending
/// ring at submit (after a range check, as any queue does) and back out at reap.
struct BareQueue {
    bufs: Vec<Option<AlignedBuf>>,
    pending: std::collections::VecDeque<(u32, AlignedBuf)>,
    size: u64,
    bs: u64,
}

impl AsyncSide for BareQueue {
    #[inline]
    fn submit(&mut self, slot: u32, offset: u64) -> Result<(), LoopError> {
        if offset.checked_add(self.bs).is_none_or(|end| end > self.size) {
            return Err(LoopError::PastEnd { offset, bs: self.bs, size: self.size });
        }
        let Some(buf) = self.bufs[slot as usize].take() else {
            return Err(LoopError::NoBuffer { slot });
        };
        self.pending.push_back((slot, buf));
        Ok(())
    }
    #[inline]
    fn commit(&mut self) -> Result<(), LoopError> {
        Ok(())
    }
    #[inline]
    fn reap<F: FnMut(u32)>(&mut self, mut f: F) -> Result<(), LoopError> {
        while let Some((slot, buf)) = self.pending.pop_front() {
            self.bufs[slot as usize] = Some(buf);
            f(slot);
        }
        Ok(())
    }
    fn syscalls(&self) -> u64 {
        0
    }
}

/// A `pread(2)` loop.
struct RawPsync {
    file: File,
    buf: AlignedBuf,
    bs: usize,
    calls: u64,
}

impl SyncSide for RawPsync {
    #[inline]
    fn read(&mut self, offset: u64) -> Result<(), LoopError> {
        self.calls += 1;
        // SAFETY: buf holds at least bs bytes and lives in self for the whole call; the
        // descriptor is open.
        let r =
            unsafe { libc::pread(self.file.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.bs, offset as libc::off_t) };
        if r != self.bs as isize {
            return Err(short("pread", r as i64, self.bs as u64, offset));
        }
        Ok(())
    }
    fn syscalls(&self) -> u64 {
        self.calls
    }
}

fn short(call: &'static str, r: i64, want: u64, offset: u64) -> LoopError {
    if r < 0 {
        let e = if r == -1 { std::io::Error::last_os_error() } else { std::io::Error::from_raw_os_error(-r as i32) };
        LoopError::ReadError { call, offset, source: e }
    } else {
        LoopError::ShortRead { call, offset, got: r, want }
    }
}

/// `IORING_ENTER_GETEVENTS`.
const ENTER_GETEVENTS: u32 = 1;

/// io_uring through the `io-uring` crate: READ entries, one `io_uring_enter` per commit,
/// one more only when the completion queue is empty and the loop must wait.
struct RawUring {
    ring: io_uring::IoUring,
    file: File,
    bufs: Vec<AlignedBuf>,
    bs: u32,
    inflight: u32,
    calls: u64,
}

impl RawUring {
    fn new(path: &Path, direct: bool, depth: u32, bs: u64) -> Result<RawUring, LoopError> {
        let ring = io_uring::IoUring::new(depth)
            .map_err(|source| LoopError::Sys { call: "io_uring_setup for the raw loop".into(), source })?;
        let bufs = (0..depth).map(|_| AlignedBuf::new(bs as usize)).collect::<Result<Vec<_>, _>>()?;
        let bs = u32::try_from(bs).map_err(|_| LoopError::TooLarge { bs })?;
        Ok(RawUring { ring, file: open_raw(path, direct)?, bufs, bs, inflight: 0, calls: 0 })
    }

    fn enter(&mut self, submit: u32, wait: u32, flags: u32) -> std::io::Result<usize> {
        self.calls += 1;
        // SAFETY: no argument pointer is passed; every SQE in the ring points into a
        // buffer of `self.bufs` that stays put until its completion is reaped.
        unsafe { self.ring.submitter().enter::<libc::sigset_t>(submit, wait, flags, None) }
    }
}

impl AsyncSide for RawUring {
    #[inline]
    fn submit(&mut self, slot: u32, offset: u64) -> Result<(), LoopError> {
        let fd = io_uring::types::Fd(self.file.as_raw_fd());
        let ptr = self.bufs[slot as usize].as_mut_ptr();
        let e = io_uring::opcode::Read::new(fd, ptr, self.bs).offset(offset).build().user_data(slot as u64);
        // SAFETY: the entry points into bufs[slot], which self owns and the loop does not
        // hand out again before this entry's completion is reaped; Drop waits for every
        // entry in flight before the buffers are freed.
        unsafe { self.ring.submission().push(&e) }.map_err(|_| LoopError::SqFull)?;
        self.inflight += 1;
        Ok(())
    }
    #[inline]
    fn commit(&mut self) -> Result<(), LoopError> {
        let mut pending = self.ring.submission().len() as u32;
        while pending > 0 {
            match self.enter(pending, 0, 0) {
                // Waiting with entries left unsubmitted would never end: stop here.
                Ok(0) => return Err(LoopError::EnterTookNone { pending }),
                Ok(k) => pending -= (k as u32).min(pending),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(source) => return Err(LoopError::Sys { call: "io_uring_enter (submit)".into(), source }),
            }
        }
        Ok(())
    }
    #[inline]
    fn reap<F: FnMut(u32)>(&mut self, mut f: F) -> Result<(), LoopError> {
        loop {
            let mut got = 0u32;
            let mut bad = None;
            for cqe in self.ring.completion() {
                got += 1;
                if cqe.result() != self.bs as i32 && bad.is_none() {
                    bad = Some(cqe.result());
                }
                f(cqe.user_data() as u32);
            }
            self.inflight -= got;
            if let Some(r) = bad {
                return Err(short("io_uring read", r as i64, self.bs as u64, 0));
            }
            if got > 0 || self.inflight == 0 {
                return Ok(());
            }
            match self.enter(0, 1, ENTER_GETEVENTS) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(source) => return Err(LoopError::Sys { call: "io_uring_enter (wait)".into(), source }),
            }
        }
    }
    fn syscalls(&self) -> u64 {
        self.calls
    }
}

impl Drop for RawUring {
    fn drop(&mut self) {
        while self.inflight > 0 {
            let got = self.ring.completion().count() as u32;
            self.inflight -= got.min(self.inflight);
            if self.inflight > 0 {
                if let Err(e) = self.enter(0, 1, ENTER_GETEVENTS) {
                    if e.raw_os_error() != Some(libc::EINTR) {
                        // Cannot prove the kernel is done with the buffers: leak them.
                        std::mem::forget(std::mem::take(&mut self.bufs));
                        return;
                    }
                }
            }
        }
    }
}

/// Linux AIO through raw syscalls: one `io_submit` per commit, one blocking
/// `io_getevents(min 1)` per reap.
struct RawAio {
    ctx: AioContext,
    file: File,
    bufs: Vec<AlignedBuf>,
    iocbs: Box<[Iocb]>,
    ptrs: Box<[*mut Iocb]>,
    queued: Vec<u32>,
    events: Box<[IoEvent]>,
    bs: u64,
    inflight: u32,
    calls: u64,
}

impl RawAio {
    fn new(path: &Path, direct: bool, depth: u32, bs: u64) -> Result<RawAio, LoopError> {
        let file = open_raw(path, direct)?;
        let bufs = (0..depth).map(|_| AlignedBuf::new(bs as usize)).collect::<Result<Vec<_>, _>>()?;
        let ctx = AioContext::new(depth)
            .map_err(|source| LoopError::Sys { call: format!("io_setup({depth}) for the raw loop"), source })?;
        let n = depth as usize;
        Ok(RawAio {
            ctx,
            file,
            bufs,
            iocbs: vec![Iocb::default(); n].into_boxed_slice(),
            ptrs: vec![std::ptr::null_mut(); n].into_boxed_slice(),
            queued: Vec::with_capacity(n),
            events: vec![IoEvent::default(); n].into_boxed_slice(),
            bs,
            inflight: 0,
            calls: 0,
        })
    }

    /// One `io_getevents(min, nr)` call, blocking; returns the events received.
    fn getevents(&mut self, min: u32, nr: u32) -> Result<usize, std::io::Error> {
        self.calls += 1;
        let nr = (nr as usize).min(self.events.len());
        self.ctx.getevents(min, &mut self.events[..nr]).map(|n| n.min(nr))
    }
}

impl AsyncSide for RawAio {
    #[inline]
    fn submit(&mut self, slot: u32, offset: u64) -> Result<(), LoopError> {
        self.iocbs[slot as usize] = Iocb {
            aio_data: slot as u64,
            aio_lio_opcode: IOCB_CMD_PREAD,
            aio_fildes: self.file.as_raw_fd() as u32,
            aio_buf: self.bufs[slot as usize].as_mut_ptr() as u64,
            aio_nbytes: self.bs,
            aio_offset: offset as i64,
            ..Iocb::default()
        };
        self.queued.push(slot);
        Ok(())
    }
    #[inline]
    fn commit(&mut self) -> Result<(), LoopError> {
        while !self.queued.is_empty() {
            let n = self.queued.len();
            let base = self.iocbs.as_mut_ptr();
            for (p, &s) in self.ptrs.iter_mut().zip(&self.queued) {
                *p = base.wrapping_add(s as usize);
            }
            self.calls += 1;
            // SAFETY: ptrs[..n] point to filled iocbs in self.iocbs whose buffers
            // (self.bufs) stay put until their events are reaped.
            let r = match unsafe { self.ctx.submit(&self.ptrs[..n]) } {
                Ok(r) => r,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(source) => return Err(LoopError::Sys { call: "io_submit".into(), source }),
            };
            if r == 0 {
                return Err(LoopError::SubmitTookNone);
            }
            let r = r.min(n);
            self.queued.drain(..r);
            self.inflight += r as u32;
        }
        Ok(())
    }
    #[inline]
    fn reap<F: FnMut(u32)>(&mut self, mut f: F) -> Result<(), LoopError> {
        if self.inflight == 0 {
            return Ok(());
        }
        let got = loop {
            match self.getevents(1, self.inflight) {
                Ok(n) => break n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(source) => return Err(LoopError::Sys { call: "io_getevents".into(), source }),
            }
        };
        self.inflight -= got as u32;
        let mut bad = None;
        for ev in &self.events[..got] {
            if ev.res != self.bs as i64 && bad.is_none() {
                bad = Some(ev.res);
            }
            f(ev.data as u32);
        }
        match bad {
            Some(r) => Err(short("aio read", r, self.bs, 0)),
            None => Ok(()),
        }
    }
    fn syscalls(&self) -> u64 {
        self.calls
    }
}

impl Drop for RawAio {
    fn drop(&mut self) {
        while self.inflight > 0 {
            match self.getevents(self.inflight, self.inflight) {
                Ok(n) => self.inflight -= n as u32,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => {
                    // Cannot prove the kernel is done with the buffers: leak them.
                    std::mem::forget(std::mem::take(&mut self.bufs));
                    break;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Pairs.

enum Side {
    LibQueue(LibQueue),
    LibSync(LibSync),
    Bare(BareQueue),
    Pread(RawPsync),
    Uring(RawUring),
    Aio(RawAio),
}

impl Side {
    fn run(
        &mut self,
        depth: u32,
        n: u64,
        bs: u64,
        blocks: u64,
        seed: u64,
        sc: &mut Scratch,
    ) -> Result<SideRun, LoopError> {
        match self {
            Side::LibQueue(t) => drive_async(t, depth, n, bs, blocks, seed, sc),
            Side::Bare(t) => drive_async(t, depth, n, bs, blocks, seed, sc),
            Side::Uring(t) => drive_async(t, depth, n, bs, blocks, seed, sc),
            Side::Aio(t) => drive_async(t, depth, n, bs, blocks, seed, sc),
            Side::LibSync(t) => drive_sync(t, n, bs, blocks, seed),
            Side::Pread(t) => drive_sync(t, n, bs, blocks, seed),
        }
    }
}

struct Pair {
    point: OverheadPoint,
    lib: Side,
    raw: Side,
    blocks: u64,
}

fn lib_device(path: &Path, iface: Iface, direct: bool) -> Result<Device, ioswitch::Error> {
    let mut o = Opts { sync: Some(SyncIface::Psync), direct, ..Opts::default() };
    if let Iface::Async(a) = iface {
        o.r#async = Some(a);
    }
    Device::open(&path.display().to_string(), &o)
}

fn make_pair(
    dev: &Device,
    path: &Path,
    iface: Iface,
    qd: u32,
    bs: u64,
    size: u64,
    direct: bool,
) -> Result<Pair, LoopError> {
    let lba = dev.geometry().lba_size as u64;
    if lba == 0 || bs % lba != 0 || bs / lba > 65536 {
        return Err(LoopError::BlockSize { bs, lba });
    }
    let nlb = (bs / lba) as u32;
    let nsid = dev.ident().nsid;
    let alloc = |n: u32| (0..n).map(|_| dev.alloc(bs as usize)).collect::<Result<Vec<_>, _>>();
    let (lib, raw) = match iface {
        Iface::Sync(_) => {
            let buf = alloc(1)?.pop().ok_or(LoopError::NoBuffers)?;
            let lib = Side::LibSync(LibSync { dev: dev.clone(), buf, nsid, lba, nlb, calls: 0 });
            let raw = Side::Pread(RawPsync {
                file: open_raw(path, direct)?,
                buf: AlignedBuf::new(bs as usize)?,
                bs: bs as usize,
                calls: 0,
            });
            (lib, raw)
        }
        Iface::Async(a) => {
            let q = dev.queue(qd)?;
            let bufs = alloc(qd)?.into_iter().map(Some).collect();
            let lib = Side::LibQueue(LibQueue { q, bufs, nsid, lba, nlb, poke: a == AsyncIface::Nil });
            let raw = match a {
                AsyncIface::Nil => Side::Bare(BareQueue {
                    bufs: (0..qd).map(|_| AlignedBuf::new(bs as usize).map(Some)).collect::<Result<Vec<_>, _>>()?,
                    pending: std::collections::VecDeque::with_capacity(qd as usize),
                    size,
                    bs,
                }),
                AsyncIface::Libaio => Side::Aio(RawAio::new(path, direct, qd, bs)?),
                AsyncIface::IoUring => Side::Uring(RawUring::new(path, direct, qd, bs)?),
                other => return Err(LoopError::NoRawLoop { iface: other }),
            };
            (lib, raw)
        }
    };
    Ok(Pair {
        point: OverheadPoint { iface, qd, bs, ios_per_run: 0, lib: Vec::new(), raw: Vec::new() },
        lib,
        raw,
        blocks: size / bs,
    })
}

/// Writes `size` bytes of pseudo-random data into a new file (so reads move real data),
/// then syncs it so write-back does not disturb the measurement.
fn lay_out(path: &Path, size: u64) -> Result<(), BenchError> {
    use std::io::Write;
    let ctx = |source: std::io::Error| BenchError::Write { path: path.to_path_buf(), source };
    let mut f = File::create(path).map_err(ctx)?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut rng = Rng::new(0xDA7A);
    for c in chunk.chunks_mut(8) {
        let v = rng.below(u64::MAX).to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).map_err(ctx)?;
        left -= n as u64;
    }
    f.sync_all().map_err(ctx)
}

fn check_opts(o: &OverheadOpts) -> Result<(), OverheadError> {
    if o.reps == 0 {
        return Err(OverheadError::NoRepetitions);
    }
    if o.run_ms == 0 {
        return Err(OverheadError::NoRunTime);
    }
    if o.interfaces.is_empty() || o.qds.is_empty() || o.bss.is_empty() {
        return Err(OverheadError::EmptyGrid);
    }
    if let Some(&iface) = o.interfaces.iter().find(|i| !SUPPORTED.contains(i)) {
        return Err(OverheadError::NoRawLoop { iface, supported: SUPPORTED.to_vec() });
    }
    if let Some(&qd) = o.qds.iter().find(|&&q| q == 0 || q > crate::sweep::MAX_QD) {
        return Err(OverheadError::QdRange { qd, max: crate::sweep::MAX_QD });
    }
    if let Some(&bs) = o.bss.iter().find(|&&b| b == 0 || b % 512 != 0) {
        return Err(OverheadError::BlockSize { bs });
    }
    if !o.tolerance_floor_ns.is_finite() || o.tolerance_floor_ns < 0.0 {
        return Err(OverheadError::ToleranceFloor { ns: o.tolerance_floor_ns });
    }
    if o.file.is_none() && o.file_size < o.bss.iter().copied().max().unwrap_or(0) {
        return Err(OverheadError::FileSize { size: o.file_size });
    }
    Ok(())
}

/// Fewest I/Os of one run.
const MIN_IOS: u64 = 256;
/// Most I/Os of one run.
const MAX_IOS: u64 = 50_000_000;

/// Runs the overhead measurement. `say` receives progress messages.
pub fn overhead(opts: &OverheadOpts, say: &mut dyn FnMut(&str)) -> Result<OverheadResult, BenchError> {
    check_opts(opts)?;
    let tmp;
    let path = match &opts.file {
        Some(f) => f.clone(),
        None => {
            tmp = TempDir::new(&opts.dir)?;
            let p = tmp.path().join("data");
            say(&format!("Laying out {} ({} bytes)", p.display(), opts.file_size));
            lay_out(&p, opts.file_size)?;
            p
        }
    };
    let mut skipped = Vec::new();
    let mut pairs: Vec<Pair> = Vec::new();
    let mut size = 0u64;
    for &iface in &opts.interfaces {
        let dev = match lib_device(&path, iface, opts.direct) {
            Ok(d) => d,
            Err(e) => {
                skipped.push(Skipped { iface: iface.to_string(), reason: e.to_string() });
                continue;
            }
        };
        size = dev.geometry().bytes;
        let mut mine = Vec::new();
        let mut failed = None;
        'grid: for &bs in &opts.bss {
            if bs > size {
                failed = Some(format!("block size {bs} is larger than {} ({size} bytes)", path.display()));
                break;
            }
            for &qd in &opts.qds {
                if iface.is_sync() && qd != 1 {
                    continue;
                }
                match make_pair(&dev, &path, iface, qd, bs, size, opts.direct) {
                    Ok(p) => mine.push(p),
                    Err(e) => {
                        failed = Some(format!("qd {qd}, bs {bs}: {e}"));
                        break 'grid;
                    }
                }
            }
        }
        match failed {
            Some(e) => skipped.push(Skipped { iface: iface.to_string(), reason: e }),
            None if mine.is_empty() => skipped.push(Skipped {
                iface: iface.to_string(),
                reason: "a sync interface runs at queue depth 1, which is not in the grid".into(),
            }),
            None => pairs.extend(mine),
        }
    }
    if pairs.is_empty() {
        return Err(OverheadError::NothingRan { path, skipped }.into());
    }
    let max_qd = pairs.iter().map(|p| p.point.qd).max().unwrap_or(1) as usize;
    let mut sc = Scratch { starts: vec![0; max_qd], free: Vec::with_capacity(max_qd) };

    // Calibrate: warm both sides up with growing pilot runs until one lasts a fifth of
    // run_ms, then size a run to about run_ms on the slower side.
    let target_ns = opts.run_ms as f64 * 1e6;
    let mut dropped: Vec<(Iface, String)> = Vec::new();
    for p in pairs.iter_mut() {
        let (qd, bs) = (p.point.qd, p.point.bs);
        let mut n = MIN_IOS;
        let per_io = loop {
            let pilot = p
                .lib
                .run(qd, n, bs, p.blocks, 1, &mut sc)
                .and_then(|l| p.raw.run(qd, n, bs, p.blocks, 1, &mut sc).map(|r| (l, r)));
            match pilot {
                Ok((l, r)) if l.wall_ns.min(r.wall_ns) as f64 >= target_ns / 5.0 || n >= MAX_IOS => {
                    break Ok(l.ns_per_io().max(r.ns_per_io()).max(1.0));
                }
                Ok(_) => n = n.saturating_mul(4).min(MAX_IOS),
                Err(e) => break Err(e),
            }
        };
        match per_io {
            Ok(per_io) => p.point.ios_per_run = ((target_ns / per_io) as u64).clamp(MIN_IOS, MAX_IOS),
            Err(e) => dropped.push((p.point.iface, format!("qd {qd}, bs {bs}: {e}"))),
        }
    }
    drop_failed(&mut pairs, &mut skipped, dropped);
    let runs = pairs.len() as u64 * 2 * opts.reps as u64;
    say(&format!("{runs} runs of about {} ms: about {} s", opts.run_ms, (runs * opts.run_ms).div_ceil(1000)));

    for rep in 0..opts.reps {
        let seed = 0x0E4E_AD00 + rep as u64;
        let mut dropped = Vec::new();
        for p in pairs.iter_mut() {
            let (qd, bs, n) = (p.point.qd, p.point.bs, p.point.ios_per_run);
            let r = if rep % 2 == 0 {
                p.lib
                    .run(qd, n, bs, p.blocks, seed, &mut sc)
                    .and_then(|l| p.raw.run(qd, n, bs, p.blocks, seed, &mut sc).map(|r| (l, r)))
            } else {
                p.raw
                    .run(qd, n, bs, p.blocks, seed, &mut sc)
                    .and_then(|r| p.lib.run(qd, n, bs, p.blocks, seed, &mut sc).map(|l| (l, r)))
            };
            match r {
                Ok((l, r)) => {
                    p.point.lib.push(l);
                    p.point.raw.push(r);
                }
                Err(e) => dropped.push((p.point.iface, format!("repetition {}, qd {qd}, bs {bs}: {e}", rep + 1))),
            }
        }
        drop_failed(&mut pairs, &mut skipped, dropped);
    }
    if pairs.is_empty() {
        return Err(OverheadError::AllFailed { path, skipped }.into());
    }
    let points: Vec<OverheadPoint> = pairs.into_iter().map(|p| p.point).collect();
    let flatness = opts
        .interfaces
        .iter()
        .filter_map(|&i| {
            let mine: Vec<&OverheadPoint> = points.iter().filter(|p| p.iface == i).collect();
            (!mine.is_empty())
                .then(|| [Metric::Wall, Metric::Cpu].map(|m| Flatness::of(i, m, &mine, opts.tolerance_floor_ns)))
        })
        .flatten()
        .collect();
    Ok(OverheadResult {
        file: match &opts.file {
            Some(f) => f.display().to_string(),
            None => format!("a temporary file in {}", opts.dir.display()),
        },
        file_size: size,
        direct: opts.direct,
        reps: opts.reps,
        tolerance_floor_ns: opts.tolerance_floor_ns,
        points,
        flatness,
        skipped,
    })
}

/// Removes every pair of an interface that failed (its sides are dropped, which waits
/// for anything in flight) and records why.
fn drop_failed(pairs: &mut Vec<Pair>, skipped: &mut Vec<Skipped>, failed: Vec<(Iface, String)>) {
    for (iface, why) in failed {
        if pairs.iter().any(|p| p.point.iface == iface) {
            pairs.retain(|p| p.point.iface != iface);
            skipped.push(Skipped { iface: iface.to_string(), reason: why });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(iface: Iface, qd: u32, bs: u64, lib: &[f64], raw: &[f64]) -> OverheadPoint {
        let run = |ns: f64| SideRun {
            cpu_ns: (ns * 900.0) as u64,
            ios: 1000,
            wall_ns: (ns * 1000.0) as u64,
            lat_sum_ns: (ns * 1000.0) as u128,
            syscalls: 1000,
        };
        OverheadPoint {
            iface,
            qd,
            bs,
            ios_per_run: 1000,
            lib: lib.iter().map(|&x| run(x)).collect(),
            raw: raw.iter().map(|&x| run(x)).collect(),
        }
    }

    const URING: Iface = Iface::Async(AsyncIface::IoUring);

    #[test]
    fn the_penalty_is_paired_per_repetition() {
        let p = point(URING, 1, 4096, &[1100.0, 1300.0, 1020.0], &[1000.0, 1250.0, 1000.0]);
        let s = p.penalty();
        assert_eq!((s.min, s.median, s.max), (20.0, 50.0, 100.0));
        assert_eq!(p.raw_syscalls_per_io(), 1.0);
    }

    #[test]
    fn flatness_compares_the_range_with_noise_and_floor() {
        let a = point(URING, 1, 4096, &[1030.0, 1031.0], &[1000.0, 1000.0]);
        let b = point(URING, 16, 4096, &[1040.0, 1041.0], &[1000.0, 1000.0]);
        let f = Flatness::of(URING, Metric::Wall, &[&a, &b], 25.0);
        assert!(f.flat && (f.max_ns - f.min_ns - 10.0).abs() < 1e-9 && f.tolerance_ns == 25.0, "{f:?}");
        let c = point(URING, 16, 65536, &[1200.0, 1201.0], &[1000.0, 1000.0]);
        let f = Flatness::of(URING, Metric::Wall, &[&a, &c], 25.0);
        assert!(!f.flat, "{f:?}");
        // Noisy points widen the tolerance.
        let d = point(URING, 16, 65536, &[1100.0, 1150.0, 1350.0, 1400.0], &[1000.0; 4]);
        let f = Flatness::of(URING, Metric::Wall, &[&a, &d], 25.0);
        assert!(f.flat && f.noise_ns == 225.0, "{f:?}");
    }

    #[test]
    fn one_disturbed_repetition_does_not_make_the_noise() {
        assert_eq!(iqr(&[10.0, 11.0, 12.0, 13.0, 500.0]), 2.0);
        assert_eq!(iqr(&[5.0]), 0.0);
        assert_eq!(iqr(&[]), 0.0);
    }

    #[test]
    fn text_and_json_show_every_point_and_verdict() {
        let r = OverheadResult {
            file: "/tmp/x".into(),
            file_size: 1 << 20,
            direct: false,
            reps: 2,
            tolerance_floor_ns: 25.0,
            points: vec![
                point(URING, 1, 4096, &[1030.0, 1031.0], &[1000.0, 1000.0]),
                point(URING, 16, 4096, &[1040.0, 1041.0], &[1000.0, 1000.0]),
            ],
            flatness: vec![],
            skipped: vec![Skipped { iface: "libaio".into(), reason: "no AIO".into() }],
        };
        let r = OverheadResult {
            flatness: vec![Flatness::of(URING, Metric::Cpu, &r.points.iter().collect::<Vec<_>>(), 25.0)],
            ..r
        };
        let text = r.to_text();
        assert_eq!(text.lines().filter(|l| l.starts_with("io_uring ")).count(), 3, "{text}");
        assert!(text.contains("+30.5") && text.contains(" flat") && text.contains("skipped libaio: no AIO"), "{text}");
        let v = r.to_json();
        assert_eq!(v["points"][1]["penalty_ns_per_io"]["median"], 40.5);
        assert_eq!(v["flatness"][0]["flat"], true);
        assert_eq!(v["points"][0]["ioswitch"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn bad_options_are_errors_that_name_them() {
        let o = OverheadOpts { interfaces: vec![Iface::Async(AsyncIface::Emu)], ..OverheadOpts::default() };
        assert!(overhead(&o, &mut |_| {}).unwrap_err().to_string().contains("emu"));
        let o = OverheadOpts { bss: vec![1000], ..OverheadOpts::default() };
        assert!(overhead(&o, &mut |_| {}).unwrap_err().to_string().contains("1000"));
        let o = OverheadOpts { reps: 0, ..OverheadOpts::default() };
        assert!(overhead(&o, &mut |_| {}).is_err());
        let o = OverheadOpts { dir: "/nonexistent/ioswitch".into(), ..OverheadOpts::default() };
        assert!(overhead(&o, &mut |_| {}).unwrap_err().to_string().contains("/nonexistent/ioswitch"));
    }

    #[test]
    fn a_tiny_real_run_measures_every_supported_interface_or_says_why_not() {
        let o = OverheadOpts {
            file_size: 1 << 20,
            qds: vec![1, 4],
            bss: vec![4096, 8192],
            reps: 2,
            run_ms: 2,
            ..OverheadOpts::default()
        };
        let r = overhead(&o, &mut |_| {}).unwrap();
        // An interface may be skipped only where the kernel itself says it lacks it (asked
        // directly, not through ioswitch): io_uring_setup or io_setup fails.
        let kernel_lacks = |i: &str| match i {
            "io_uring" => ::io_uring::IoUring::new(2).is_err(),
            "libaio" => raw::AioContext::new(1).is_err(),
            _ => false,
        };
        for i in SUPPORTED {
            let n = r.points.iter().filter(|p| p.iface == i).count();
            let skipped = r.skipped.iter().any(|s| s.iface == i.as_str());
            assert_eq!(skipped, kernel_lacks(i.as_str()), "{i}: skipped {skipped}, {r:?}");
            assert!(skipped || n == if i.is_sync() { 2 } else { 4 }, "{i}: {n} points, {r:?}");
        }
        assert!(r.skipped.iter().all(|s| s.iface != "nil" && s.iface != "psync"), "{:?}", r.skipped);
        for p in &r.points {
            assert_eq!((p.lib.len(), p.raw.len()), (2, 2));
            assert!(p.lib.iter().chain(&p.raw).all(|s| s.ios == p.ios_per_run && s.wall_ns > 0));
            // The same syscalls on both sides.
            if p.iface != Iface::Async(AsyncIface::Nil) {
                let (l, w) = (p.lib_syscalls_per_io(), p.raw_syscalls_per_io());
                assert!((l - w).abs() <= 0.25 * w.max(1.0), "{} qd {}: {l} vs {w}", p.iface, p.qd);
            }
        }
        assert!(r.to_text().contains("flat check"));
    }
}
