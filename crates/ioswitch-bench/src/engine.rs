//! Workers: one thread per job instance, one queue each, measured with fio's definitions.
//!
//! Timestamps (CLOCK_MONOTONIC, ns):
//! - `start`: the I/O is ready to go (buffer and offset chosen, command built);
//! - `issue`: sync interfaces: `start` (the call follows at once); async interfaces: right
//!   after [`Queue::commit`] returns, i.e. after the submit syscall, or after the queue
//!   push for interfaces with no syscall (`nil`, `emu`, `thrpool` batch into memory);
//! - `complete`: when the completion is reaped, one timestamp per reaped batch, as fio
//!   (`ioswitch_clat_stamp=batch`, the default); with `ioswitch_clat_stamp=each` the job
//!   waits for one completion at a time (up to the batch's minimum) and stamps each
//!   completion when the queue hands it over, so a completion no longer carries the wait
//!   for the rest of its batch in its clat (fio issue #855).
//!
//! slat = issue − start (async only), clat = complete − issue, lat = complete − start;
//! so for async interfaces every lat sample is exactly its slat plus its clat, and
//! mean(lat) = mean(slat) + mean(clat).
//!
//! The loop follows fio 3.33's `do_io` and `wait_for_completions` (backend.c), with
//! `td_io_getevents`' bounds (ioengines.c): submit until the queue holds `iodepth`
//! commands (committing every `iodepth_batch_submit` submissions); when it is full (or
//! after every submission when `iodepth_batch_complete_min` and `_max` are both 0), reap
//! batches of at least `min(iodepth_batch_complete_min, in flight)` (at least 1) and at
//! most `iodepth_batch_complete_max` (at least that min) completions, until no more than
//! `iodepth_low` are in flight; then fill the queue again. fio's defaults (1, 1,
//! `iodepth`) reap one completion and refill at once, so the queue stays at `iodepth`.
//! At the end, everything in flight is reaped as one batch, as fio does.
//!
//! The library's [`Queue::wait`] takes a minimum but no maximum, so a blocking reap may
//! return more completions than the batch may take; the extra ones are kept, unreaped as
//! far as the job is concerned (their slots stay busy, their completion time is the time
//! of the batch that takes them), exactly as they would wait in the kernel's ring for
//! fio's next `getevents`.

use crate::error::CheckError;
use crate::stats::{LatStats, Stats};
use crate::verify::{self, Verify};
use ioswitch::{Buffer, Cmd, Completion, Data, Device, Queue, QueueStats};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

pub use crate::jobfile::Rw;
use crate::jobfile::{Behaviour, ClatStamp, RandomGenerator};

mod offload;

/// How the job drives the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One command at a time through [`Device::pass`] (psync, block, ramdisk).
    Sync,
    /// Through a [`Queue`] on the async interface.
    Async,
}

/// A job ready to run: everything resolved, nothing left to parse.
#[derive(Clone, Debug)]
pub struct Job {
    /// Job name.
    pub name: String,
    /// Device URI.
    pub filename: String,
    /// Library options (interfaces, direct, io_uring tunables).
    pub opts: ioswitch::Opts,
    /// Sync or async.
    pub mode: Mode,
    /// Access pattern.
    pub rw: Rw,
    /// Percentage of reads in mixed workloads.
    pub rwmixread: u32,
    /// Block size of reads and of writes, in bytes.
    pub bs: [u64; 2],
    /// Queue depth (1 for sync).
    pub iodepth: u32,
    /// Submissions per commit (fio's `iodepth_batch_submit`; default 1).
    pub batch_submit: u32,
    /// Completions to wait for when the queue is full (fio's `iodepth_batch_complete_min`;
    /// 0 with `batch_complete_max` 0 is fio's reap-after-every-submission mode).
    pub batch_complete_min: u32,
    /// The most completions one reap takes (fio's `iodepth_batch_complete_max`; values
    /// below `batch_complete_min` mean `batch_complete_min`).
    pub batch_complete_max: u32,
    /// Once the queue is full, reap until at most this many are in flight (fio's
    /// `iodepth_low`; 0 or above `iodepth`: `iodepth`).
    pub iodepth_low: u32,
    /// Start of the region, bytes.
    pub offset: u64,
    /// Bytes of I/O per job and size of the region; `None`: the device from `offset` on.
    pub size: Option<u64>,
    /// Run time limit (measured part, after ramp).
    pub runtime: Option<Duration>,
    /// Keep going over the region until `runtime` ends.
    pub time_based: bool,
    /// Time run before statistics are kept.
    pub ramp: Duration,
    /// Stop after this many I/Os per loop (`loops` times this in all, as fio).
    pub number_ios: Option<u64>,
    /// Random offsets without a map (blocks may repeat within a pass).
    pub norandommap: bool,
    /// Seed of the offset and mix generators.
    pub seed: u64,
    /// CPUs this job's threads may run on (empty: any).
    pub cpus: Vec<usize>,
    /// Sync after every N writes (0: never): fsync(2) of a file, the library's flush of
    /// anything else.
    pub fsync: u32,
    /// Checksum written into every block, or none.
    pub verify: Verify,
    /// Read back and check what was written after the write phase.
    pub do_verify: bool,
    /// fio's options for file creation, ending, errors and measurement
    /// (`refill_buffers`, `exitall`, `disable_*lat`, `continue_on_error`, …).
    pub behaviour: Behaviour,
    /// Load shaping: rate limits and thinktime ([`crate::load`]).
    pub load: crate::load::Load,
    /// The time-series logs the job writes ([`crate::iolog`]).
    pub logs: crate::iolog::LogOpts,
    /// Workload shapes: block size mixes, offset distributions and modifiers,
    /// `offset_increment`, `fdatasync` ([`crate::shapes`]).
    pub shapes: crate::shapes::Shapes,
    /// The buffer seeds of every thread of the run, in fio's thread order, and this job's
    /// first thread among them: `dedupe_global`'s working set is made of the threads' own
    /// first pages, as fio makes it (see [`crate::dedupe`]). Empty: this job's alone.
    pub buffer_threads: BufferThreads,
    /// Several files per instance ([`crate::files`]): their regions and how I/O moves
    /// between them; `None`: one file, `filename`.
    pub multi: Option<crate::files::MultiFile>,
    /// The reporting group (fio's `groupid`): whose jobs `exitall` stops by default.
    pub group: u32,
}

/// What one direction (read or write) did.
#[derive(Clone, Debug, Default)]
pub struct DirResult {
    /// I/Os completed (after ramp).
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Submission latency (async only).
    pub slat: LatStats,
    /// Completion latency.
    pub clat: LatStats,
    /// Total latency.
    pub lat: LatStats,
    /// IOPS measured over 500 ms windows.
    pub iops_samples: Stats,
    /// Bandwidth in KiB/s measured over 500 ms windows.
    pub bw_samples: Stats,
    /// With per-command priorities ([`crate::cmdprio`]): the latencies of each priority
    /// apart (completion latencies, or total ones with `lat_percentiles`), the job's own
    /// priority first, by the value; empty without (fio's `clat_prio`).
    pub prios: Vec<(u16, LatStats)>,
}

/// fio's latency distribution buckets of total latency: ns, µs and ms groups.
pub const LAT_NS_EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
/// ms group edges (the last group is ">=2000").
pub const LAT_MS_EDGES: [u64; 12] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000, u64::MAX];

/// What one job instance did.
#[derive(Clone, Debug, Default)]
pub struct JobResult {
    /// Job name.
    pub name: String,
    /// Instance number (0..numjobs).
    pub instance: u32,
    /// Reads.
    pub read: DirResult,
    /// Writes.
    pub write: DirResult,
    /// Trims (`rw=trim|randtrim|trimwrite`).
    pub trim: DirResult,
    /// Zones reset (`zonemode=zbd`; fio's "zone resets").
    pub zone_resets: u64,
    /// Flush latency.
    pub sync: LatStats,
    /// Measured time (from the end of ramp to the last completion), ns.
    pub runtime_ns: u64,
    /// Whole run including ramp and verify, ns.
    pub elapsed_ns: u64,
    /// fio's `job_runtime` (its `total_run_time`): from the job's epoch to its end,
    /// verify included; the epoch is the job's start, moved to the end of `ramp_time` and
    /// to the start of `latency_target`'s final window (fio's `reset_all_stats`), ns.
    pub job_runtime_ns: u64,
    /// User CPU of the job thread since its epoch (as `job_runtime_ns`), ns; the CPU and
    /// fault counts below are counted from the same epoch (fio's `clear_rusage_stat`).
    pub usr_ns: u64,
    /// System CPU of the job thread, ns.
    pub sys_ns: u64,
    /// Context switches of the job thread.
    pub ctx: u64,
    /// Major page faults of the job thread.
    pub majf: u64,
    /// Minor page faults of the job thread.
    pub minf: u64,
    /// Queue counters (submitted, completed, syscalls); sync jobs count one call per I/O.
    pub queue: QueueStats,
    /// fio's `iodepth_level`: queue depth at each submission, buckets 1,2,4,8,16,32,>=64.
    pub depth_level: [u64; 7],
    /// fio's `iodepth_submit`: commands per commit, buckets 0,4,8,16,32,64,>=64.
    pub submit_level: [u64; 7],
    /// fio's `iodepth_complete`: completions per reap, same buckets.
    pub complete_level: [u64; 7],
    /// Reaps (batches of completions taken), the end-of-job drain included.
    pub reaps: u64,
    /// Sum over submissions of the commands in flight right after each (so
    /// `depth_sum / submissions` is the mean depth fio's `iodepth_level` buckets).
    pub depth_sum: u64,
    /// Total-latency distribution: `[0..10]` ns, `[10..20]` µs groups, `[20..32]` ms groups.
    pub lat_dist: [u64; 32],
    /// errno of the first failure (0: none), as fio's `error`.
    pub error: i32,
    /// The first failure, in words.
    pub error_msg: Option<String>,
    /// Blocks read back and checked by verify.
    pub verified: u64,
    /// Errors the job went on after (`continue_on_error`), as fio's `total_err`.
    pub total_err: u64,
    /// errno of the first of them, as fio's `first_error`.
    pub first_error: i32,
    /// The job's time-series logs, when it writes any (written to files by
    /// [`crate::run::write_logs`]).
    pub logs: Option<crate::iolog::JobLogs>,
    /// The queue depth `latency_target`'s search settled on (fio's `latency_depth`; 0:
    /// no target).
    pub latency_depth: u32,
    /// The steady state of the instance (with `group_reporting`, of its group), when
    /// the job has `ss_dur` ([`crate::steady`]).
    pub steady: Option<crate::steady::Outcome>,
}

/// Progress counters shared with the status line; updated once per reaped batch.
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes done by all jobs.
    pub bytes: AtomicU64,
    /// I/Os done by all jobs.
    pub ios: AtomicU64,
    /// Set to stop every job early (Ctrl-C, `exitall` with `exit_what=stonewall|all`).
    pub stop: AtomicBool,
    /// Set per reporting group (by group id) to stop its jobs (`exitall`); empty: the
    /// jobs are one group, which `stop` stops.
    pub groups: Vec<AtomicBool>,
    /// Set by `exitall` with `exit_what=all`: the jobs of later phases end at once.
    pub end_run: AtomicBool,
    /// fio's flow control between the jobs (`flow`, `flow_id`).
    pub flows: crate::flow::Flows,
    /// Per job instance, for the steady-state check ([`crate::steady`]): I/Os and bytes
    /// completed, and its stop flag; see [`run_job_slot`].
    pub slots: Vec<SsSlot>,
}

/// One job instance's completed I/Os and bytes, read once a second by the steady-state
/// check, and the flag with which it ends the instance.
#[derive(Debug, Default)]
pub struct SsSlot {
    /// I/Os completed (fio's `io_blocks`).
    pub ios: AtomicU64,
    /// Bytes completed (fio's `io_bytes`).
    pub bytes: AtomicU64,
    /// Set to end the instance (its steady state was attained).
    pub stop: AtomicBool,
}

impl Progress {
    /// Counters for jobs of reporting groups `0..=max_group`; `stopped`: every job ends at
    /// once (a phase after `exit_what=all`).
    pub fn with_groups(max_group: u32, stopped: bool) -> Progress {
        Progress {
            stop: AtomicBool::new(stopped),
            groups: (0..=max_group).map(|_| AtomicBool::new(false)).collect(),
            ..Progress::default()
        }
    }

    /// fio's `exitall` at the end of a job of reporting group `group`: stops the jobs
    /// `what` names (`fio_terminate_threads`).
    pub fn exit_all(&self, group: u32, what: crate::jobfile::ExitWhat) {
        use crate::jobfile::ExitWhat;
        match (what, self.groups.get(group as usize)) {
            (ExitWhat::Group, Some(g)) => g.store(true, Ordering::Relaxed),
            (ExitWhat::Group, None) | (ExitWhat::Stonewall, _) => self.stop.store(true, Ordering::Relaxed),
            (ExitWhat::All, _) => {
                self.stop.store(true, Ordering::Relaxed);
                self.end_run.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Monotonic clock in ns.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU and faults of the calling thread (`who = RUSAGE_THREAD`) or process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU, ns.
    pub usr_ns: u64,
    /// System CPU, ns.
    pub sys_ns: u64,
    /// Voluntary + involuntary context switches.
    pub ctx: u64,
    /// Major faults.
    pub majf: u64,
    /// Minor faults.
    pub minf: u64,
}

impl Usage {
    /// Reads getrusage(`who`).
    pub fn now(who: libc::c_int) -> Usage {
        // SAFETY: rusage is plain data; all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: ru is a valid out pointer.
        unsafe { libc::getrusage(who, &mut ru) };
        let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        Usage {
            usr_ns: tv(ru.ru_utime),
            sys_ns: tv(ru.ru_stime),
            ctx: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
            majf: ru.ru_majflt as u64,
            minf: ru.ru_minflt as u64,
        }
    }
    /// `self - before`.
    pub fn since(self, before: Usage) -> Usage {
        Usage {
            usr_ns: self.usr_ns.saturating_sub(before.usr_ns),
            sys_ns: self.sys_ns.saturating_sub(before.sys_ns),
            ctx: self.ctx.saturating_sub(before.ctx),
            majf: self.majf.saturating_sub(before.majf),
            minf: self.minf.saturating_sub(before.minf),
        }
    }
}

/// xorshift64*: fast, deterministic for a seed (fio's randrepeat).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    #[inline]
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in 0..n.
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// A random permutation of 0..n without memory: a full-period LCG modulo the next power
/// of two, skipping values ≥ n. Every block is visited once per pass (fio's random map).
#[derive(Clone, Debug)]
pub(crate) struct RandMap {
    n: u64,
    mask: u64,
    a: u64,
    c: u64,
    x: u64,
    left: u64,
}

impl RandMap {
    pub(crate) fn new(n: u64, seed: u64) -> RandMap {
        let m = n.max(2).next_power_of_two();
        let mut r = Rng::new(seed);
        // Hull-Dobell: c odd, a ≡ 1 (mod 4) gives period m.
        let a = (r.next() << 2 | 1) & (m - 1) | 1;
        let a = if a % 4 == 1 { a } else { (a + 4) & (m - 1) | 1 };
        RandMap { n, mask: m - 1, a: if m <= 4 { 1 } else { a }, c: r.next() | 1, x: r.next() & (m - 1), left: n }
    }
    /// Whether every block of this pass was taken.
    pub(crate) fn pass_done(&self) -> bool {
        self.left == 0
    }

    /// A new pass starts (every block once more).
    pub(crate) fn restart(&mut self) {
        self.left = self.n;
    }

    /// Next block of the pass; starts a new pass when the last one is done.
    #[inline]
    pub(crate) fn next(&mut self) -> u64 {
        if self.left == 0 {
            self.left = self.n;
        }
        loop {
            self.x = self.x.wrapping_mul(self.a).wrapping_add(self.c) & self.mask;
            if self.x < self.n {
                self.left -= 1;
                return self.x;
            }
        }
    }
}

fn depth_bucket(d: u32) -> usize {
    match d {
        0 | 1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

fn batch_bucket(n: u32) -> usize {
    match n {
        0 => 0,
        1..=4 => 1,
        5..=8 => 2,
        9..=16 => 3,
        17..=32 => 4,
        33..=64 => 5,
        _ => 6,
    }
}

fn lat_bucket(ns: u64) -> usize {
    if ns < 1000 {
        return LAT_NS_EDGES.iter().position(|&e| ns < e).unwrap_or(9);
    }
    let us = ns / 1000;
    if us < 1000 {
        return 10 + LAT_NS_EDGES.iter().position(|&e| us < e).unwrap_or(9);
    }
    let ms = ns / 1_000_000;
    20 + LAT_MS_EDGES.iter().position(|&e| ms < e).unwrap_or(11)
}

/// Per-direction offset generator over the job's region.
struct Offsets {
    base: u64,
    bs: u64,
    /// The blocks of a pass: random, those that fit in the region (fio's `last_block`);
    /// sequential, every block that starts in it, the last one past the region's end
    /// where the file or device has room for it, as fio's `get_next_offset` and
    /// `fill_io_u` take them.
    blocks: u64,
    seq: u64,
    map: Option<RandMap>,
    rng: Rng,
    random: bool,
}

impl Offsets {
    /// `room`: the bytes from the region's start to the end of the file or device.
    fn new(job: &Job, region: u64, room: u64, bs: u64, salt: u64) -> Offsets {
        let random = job.rw.is_random();
        let starts = if random { region / bs } else { region.div_ceil(bs) };
        let blocks = (if starts.saturating_mul(bs) <= room { starts } else { region / bs }).max(1);
        Offsets {
            base: job.offset,
            bs,
            blocks,
            seq: 0,
            // lfsr visits every block once per pass whatever norandommap says.
            map: (random && (!job.norandommap || job.behaviour.random_generator == RandomGenerator::Lfsr))
                .then(|| RandMap::new(blocks, job.seed ^ salt)),
            rng: Rng::new(job.seed ^ salt ^ 0x5151),
            random,
        }
    }

    /// The next offset of the pass; `None`: the pass is over (sequential, or random with
    /// a map; random offsets without a map never run out), until [`Offsets::restart`].
    #[inline]
    fn next(&mut self) -> Option<u64> {
        let block = if !self.random {
            if self.seq == self.blocks {
                return None;
            }
            self.seq += 1;
            self.seq - 1
        } else if let Some(m) = &mut self.map {
            if m.pass_done() {
                return None;
            }
            m.next()
        } else {
            self.rng.below(self.blocks)
        };
        Some(self.base + block * self.bs)
    }

    /// A new pass over the region starts.
    fn restart(&mut self) {
        self.seq = 0;
        if let Some(m) = &mut self.map {
            m.restart();
        }
    }
}

struct Slot {
    buf: Option<Buffer>,
    start: u64,
    issue: u64,
    write: bool,
    offset: u64,
    len: u64,
    trim: bool,
    /// The job's file it went to (0 for a job with one file).
    file: u32,
    /// Its priority's index in the direction's per-priority statistics (0: the job's own).
    prio: u16,
}

/// Errors that stop a job before it starts: named after the job and the device.
pub fn check_job(job: &Job, dev: &Device) -> Result<u64, CheckError> {
    let g = dev.geometry();
    let name = || job.name.clone();
    if job.offset >= g.bytes {
        return Err(CheckError::OffsetPastEnd {
            job: name(),
            offset: job.offset,
            filename: job.filename.clone(),
            bytes: g.bytes,
        });
    }
    let region = job.size.unwrap_or(g.bytes - job.offset);
    if job.offset.checked_add(region).is_none_or(|e| e > g.bytes) {
        return Err(CheckError::RegionPastEnd {
            job: name(),
            offset: job.offset,
            region,
            filename: job.filename.clone(),
            bytes: g.bytes,
        });
    }
    for (dir, bs) in [("read", job.shapes.bs_bounds(0, job.bs[0])), ("write", job.shapes.bs_bounds(1, job.bs[1]))] {
        let bs = if bs.0 == 0 { 0 } else { bs.1 };
        if bs == 0 || bs > region {
            return Err(CheckError::BlockSize { job: name(), dir, bs, region });
        }
        if bs > g.max_transfer && g.max_transfer > 0 {
            return Err(CheckError::MaxTransfer {
                job: name(),
                dir,
                bs,
                filename: job.filename.clone(),
                max: g.max_transfer,
            });
        }
    }
    if job.verify != Verify::None && job.time_based {
        return Err(CheckError::VerifyTimeBased { job: name() });
    }
    if job.verify != Verify::None && job.verify != Verify::Pattern && job.bs[1] < verify::HEADER_LEN as u64 {
        return Err(CheckError::VerifyBlockSize { job: name(), min: verify::HEADER_LEN });
    }
    Ok(region)
}

// Always inlined: with four callers the compiler kept it out of line, a call per I/O.
#[inline(always)]
fn make_cmd(dev: &Device, write: bool, offset: u64, len: u64) -> Cmd {
    let lba = dev.geometry().lba_size as u64;
    let nsid = dev.ident().nsid;
    if offset % lba == 0 && len % lba == 0 && len / lba <= 65536 {
        let (slba, nlb) = (offset / lba, (len / lba) as u32);
        if write {
            Cmd::write(nsid, slba, nlb)
        } else {
            Cmd::read(nsid, slba, nlb)
        }
    } else if write {
        Cmd::fs_write(offset, len)
    } else {
        Cmd::fs_read(offset, len)
    }
}

/// Which sync a write count made due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncCall {
    /// `fsync=N`: fsync(2) of a file.
    Fsync,
    /// `fdatasync=N`: fdatasync(2), the library's flush.
    Fdatasync,
}

/// One sync of a file (see [`Run::sync_now`]): fsync(2) of `fsync_file` for `fsync=N`,
/// else the library's flush of `dev`. Errors carry the errno and what failed.
fn sync_call(dev: &Device, fsync_file: Option<&std::fs::File>, call: SyncCall) -> Result<(), (i32, String)> {
    match (fsync_file, call) {
        (Some(f), SyncCall::Fsync) => {
            f.sync_all().map_err(|e| (e.raw_os_error().unwrap_or(libc::EIO), format!("fsync of '{}': {e}", dev.uri())))
        }
        _ => dev.pass(&Cmd::flush(dev.ident().nsid), &mut []).map(drop).map_err(|e| {
            let what = if call == SyncCall::Fsync { "fsync" } else { "fdatasync" };
            (e.errno().unwrap_or(libc::EIO), format!("{what}: {e}"))
        }),
    }
}

/// The direction index of trims (after 0 read and 1 write).
const TRIM: usize = 2;
/// Names of the directions, by index, for error messages.
const DIR_NAMES: [&str; 3] = ["read", "write", "trim"];

/// Everything a worker keeps while running.
struct Run<'a> {
    job: &'a Job,
    dev: &'a Device,
    res: JobResult,
    progress: &'a Progress,
    /// The stop flag of the job's reporting group, if the run keeps one per group.
    group_stop: Option<&'a AtomicBool>,
    ramp_end: u64,
    /// Whether the statistics were started over at the ramp's end (true without a ramp).
    ramp_over: bool,
    /// When, and from which thread usage, the statistics were last started over (the ramp's
    /// end, `latency_target`'s final window); `None`: from the job's start.
    epoch: Option<(u64, Usage)>,
    deadline: u64,
    budget: u64,
    issued_bytes: u64,
    issued_ios: u64,
    mix: Rng,
    /// The draws of per-command priorities (fio's `prio_state`).
    prio_rng: Rng,
    offs: [Offsets; 2],
    /// `trimwrite`: the block just trimmed, to be written next.
    trimmed: Option<(u64, u64)>,
    /// Offsets and lengths of a direction with a shape ([`crate::shapes`]).
    shaped: [Option<crate::shapes::ShapedOffsets>; 2],
    /// Where this instance's region starts (`offset` + instance × `offset_increment`).
    base: u64,
    /// Several files: which file the next I/O goes to ([`crate::files`]); `None`: one.
    picker: Option<crate::files::Picker>,
    /// The files not being served, by number (the served one's entry is `None`: its
    /// state is in this `Run`'s fields).
    parked: Vec<Option<FileState<'a>>>,
    /// The file being served.
    cur: usize,
    /// Bytes issued to each file in this pass, and each file's region.
    file_issued: Vec<u64>,
    file_regions: Vec<u64>,
    /// Bytes of each file's pass: its region, or with `zonemode=zbd` its zones'
    /// capacity (fio's rule).
    file_pass: Vec<u64>,
    /// `zonemode=zbd`: the served file's zones and write pointers (the other files' wait
    /// in their [`FileState`]).
    zbd: Option<crate::zbd::Zbd>,
    /// The job's offsets ran out (fio's eof), and it ends: `zonemode=zbd`, no zone holds
    /// data left to read; `zonemode=strided`, the next I/O would pass the file's end;
    /// otherwise its last pass over the region is done ([`Run::pass_over`]).
    eof: bool,
    /// Passes over the region that ended with its offsets (with several files, every
    /// file's; not time-based).
    passes: u32,
    /// Each pass's writes are verified when it ends, before the next starts (fio's
    /// `do_verify` after each `do_io`): a job that writes and verifies, without
    /// `verify_backlog` (zoned jobs' passes end otherwise). (Before, a job with `loops=2`
    /// verified once, at its end: half of fio's verify reads.)
    verify_passes: bool,
    /// A pass ended and waits for its verify ([`Run::pass_over`], `run_job_slot`).
    pass_ended: bool,
    /// Bytes read by the verify of each pass, which fio's `keep_running` counts too.
    verify_bytes: u64,
    /// `number_ios` over all loops (fio's `exceeds_number_ios`: `number_ios × loops`; it
    /// was `number_ios` alone: `number_ios=100 loops=2` did 100 I/Os, fio 200).
    number_ios: Option<u64>,
    /// Bytes of I/O per loop (fio's `io_size`, else the region).
    per_loop: u64,
    /// `zonemode=zbd` with writes queued: the next write's zone needs what is in flight
    /// completed first ([`crate::zbd::Zbd::quiesce`]); the async loop reaps and asks again.
    zbd_quiesce: bool,
    /// `max_latency` per direction (read, write, trim; the fourth pads the index), ns;
    /// `u64::MAX` where it sets no limit.
    lat_max: [u64; 4],
    /// The job has a `max_latency` or one-sample-per-I/O statistics: each completed I/O
    /// takes [`Run::account_rare`].
    rare: bool,
    /// `fill_device`: a write met ENOSPC or EDQUOT; the job ends without an error.
    filled: bool,
    /// `fill_device`: the end of the furthest write that landed (the file is cut there
    /// when the job ends).
    fill_end: u64,
    /// `zonemode=strided`: the zones' state ([`crate::strided`]).
    strided: Option<crate::strided::Strided>,
    writes_since_sync: u32,
    writes_since_datasync: u32,
    /// The job's file, open for `fsync=N`'s fsync(2) (a file on an interface that is not
    /// a mapping); `None` otherwise.
    fsync_file: Option<std::fs::File>,
    /// Writes not yet verified by `verify_backlog` (the file's number and the offset),
    /// oldest first.
    backlog: std::collections::VecDeque<(usize, u64)>,
    window_start: u64,
    window: [(u64, u64); 2],
    /// Where the IOPS samples' window started ([`Run::window_start`] is the bandwidth
    /// samples'); their windows can differ (`bwavgtime`, `iopsavgtime`).
    iops_start: u64,
    /// The windows of the bandwidth and IOPS samples, ns; `None`: one sample per I/O
    /// ([`crate::iolog::LogOpts::sample_windows`]).
    sample_windows: [Option<u64>; 2],
    /// When the next of those windows is over (`u64::MAX`: neither has one).
    sample_due: u64,
    written: Vec<u64>,
    verify_seq: u64,
    first_done: u64,
    last_done: u64,
    /// Random data for `refill_buffers`.
    refill: Rng,
    /// Write buffers' contents under `buffer_compress_*` and `dedupe_*` (every write
    /// gets new contents, as fio turns `refill_buffers` on for them).
    bufgen: Option<crate::dedupe::Buffers>,
    /// The rate limiter, if the job is rated; `paced_from_ramp`: restarted at the ramp's end.
    pacer: Option<crate::load::Pacer>,
    paced_from_ramp: bool,
    /// The thinktime rule, if the job has one.
    thinker: Option<crate::load::Thinker>,
    /// I/Os completed (fio's `io_blocks`, for `thinktime_blocks_type=complete`).
    completed_ios: u64,
    /// The time-series logs, if the job writes any.
    logs: Option<crate::iolog::JobLogs>,
    /// The queue-depth search of `latency_target`, if the job has one; `lat_step`: what
    /// it asked for at the last completion, for the loop to act on.
    lat_target: Option<crate::load::LatencyTarget>,
    lat_step: crate::load::LatStep,
    /// The `rate_min`/`rate_iops_min` check, if the job has one.
    min_rate: Option<crate::load::MinRate>,
    /// The instance's counters and stop flag for the steady-state check, if it has one.
    slot: Option<&'a SsSlot>,
    /// The job's part in its flow (`flow`), if it has one.
    flow: Option<crate::flow::JobFlow>,
}

impl<'a> Run<'a> {
    /// fio's flow check before an I/O: `None` when the I/O may go (counted in the job's
    /// flow), else how long to sleep (after the I/Os in flight are done, where the
    /// `flow_sleep` is not 0) before trying again.
    #[inline]
    fn flow_held(&mut self) -> Option<Duration> {
        let f = self.flow.as_mut()?;
        f.held().then_some(f.sleep)
    }

    #[inline]
    fn more(&self, now: u64) -> bool {
        if self.progress.stop.load(Ordering::Relaxed)
            || self.res.error != 0
            || self.eof
            || self.filled
            || self.group_stop.is_some_and(|g| g.load(Ordering::Relaxed))
            || self.slot.is_some_and(|s| s.stop.load(Ordering::Relaxed))
        {
            return false;
        }
        if now >= self.deadline {
            return false;
        }
        if let Some(n) = self.number_ios {
            if self.issued_ios >= n {
                return false;
            }
        }
        self.job.time_based || self.issued_bytes < self.budget
    }

    /// One I/O completed well: counted for thinktime, checked against `rate_min` and
    /// `latency_target`, and put in the logs (after the ramp; times in ms since its end,
    /// fio's epoch).
    #[inline]
    fn completed_io(&mut self, dir: usize, len: u64, off: u64, t: [u64; 3], has_slat: bool, prio: u16) {
        if self.rare {
            self.account_rare(dir, len, off, t);
        }
        self.completed_ios += 1;
        if dir == 1 && self.job.behaviour.fill_device {
            self.fill_end = self.fill_end.max(off + len);
        }
        if let Some(s) = self.slot {
            s.ios.fetch_add(1, Ordering::Relaxed);
            s.bytes.fetch_add(len, Ordering::Relaxed);
        }
        if let Some(z) = self.zbd.as_mut() {
            // The write has landed: its zone is free for the other jobs (fio's zone unlock).
            z.done_at(off);
        }
        let [start, issue, complete] = t;
        if let Some(m) = self.min_rate.as_mut().filter(|_| complete >= self.ramp_end) {
            let done = [(self.res.read.bytes, self.res.read.ios), (self.res.write.bytes, self.res.write.ios)];
            if let Some(why) = m.check((complete - self.ramp_end) / 1_000_000, done) {
                self.fail(libc::EIO, why);
            }
        }
        if let Some(lt) = self.lat_target.as_mut() {
            if complete >= self.ramp_end && self.lat_step == crate::load::LatStep::Go {
                self.lat_step = lt.completed(complete - start, complete, self.completed_ios);
            }
        }
        let Some(logs) = self.logs.as_mut() else { return };
        if complete < self.ramp_end {
            return;
        }
        let b = &self.job.behaviour;
        let ms = (complete - self.ramp_end) / 1_000_000;
        let lat = [
            (!b.disable_lat).then_some(complete - start),
            (has_slat && !b.disable_slat).then_some(issue - start),
            (!b.disable_clat).then_some(complete - issue),
        ];
        logs.io(ms, dir, len, off, lat, prio);
        if !b.disable_bw {
            logs.tick(ms);
        }
    }

    /// A thinktime stall of `took_ns` ended after an I/O of direction `write`: with
    /// `rate_ignore_thinktime`, the rate limiter skips over it.
    fn stalled(&mut self, write: bool, took_ns: u64) {
        if self.job.load.rate_ignore_thinktime {
            if let Some(p) = self.pacer.as_mut() {
                p.skip_stall(write, took_ns);
            }
        }
    }

    /// The direction of the next I/O and when it may start: the rate limiter's choice
    /// (fio's `rate_ddir`) of the direction drawn; `None` when the job has no limiter.
    fn paced(&mut self, write: bool, now: u64) -> Option<(bool, u64)> {
        let p = self.pacer.as_mut()?;
        if !self.paced_from_ramp && now >= self.ramp_end && self.ramp_end > 0 {
            // fio starts the rate over when the ramp ends (reset_io_counters).
            p.restart(self.ramp_end);
            self.paced_from_ramp = true;
        }
        let mixed = matches!(self.job.rw, Rw::ReadWrite | Rw::RandRw);
        Some(p.choose(write, now, mixed))
    }

    /// The direction of the next I/O (fio's rwmix draw): whether it writes (trims take
    /// the write direction's offsets, block sizes and rate).
    #[inline]
    fn pick_dir(&mut self) -> bool {
        match self.job.rw {
            Rw::Read | Rw::RandRead => false,
            Rw::Write | Rw::RandWrite | Rw::Trim | Rw::RandTrim | Rw::TrimWrite => true,
            Rw::ReadWrite | Rw::RandRw => self.mix.below(100) >= self.job.rwmixread as u64,
        }
    }

    /// The next I/O: direction (0 read, 1 write, [`TRIM`]), offset and length.
    fn pick(&mut self) -> (usize, u64, u64) {
        let write = self.pick_dir();
        self.pick_for(write)
    }

    /// The next I/O (direction, offset, length) as [`Self::pick`], paced when the job has a
    /// rate: when its due time is after `*start`, `before_sleep` runs first (false stops
    /// the job), the thread sleeps until the due time and `*start` becomes the time after.
    /// None: the job stops (`before_sleep` said so, or the run's end came while waiting).
    /// With `zonemode=zbd`, `*start` is the time after the zone was chosen.
    fn next_io(&mut self, start: &mut u64, before_sleep: impl FnOnce(&mut Self) -> bool) -> Option<(usize, u64, u64)> {
        let io = self.next_io_paced(start, before_sleep)?;
        if self.zbd.is_some() {
            // fio stamps an I/O's start after zbd_adjust_block (get_io_u): the wait for a
            // zone another job owns, and a zone reset, are not part of its latency.
            *start = now_ns();
        }
        Some(io)
    }

    /// [`Run::next_io`] before the zone adjustment of its start time.
    fn next_io_paced(
        &mut self,
        start: &mut u64,
        before_sleep: impl FnOnce(&mut Self) -> bool,
    ) -> Option<(usize, u64, u64)> {
        if self.pacer.is_none() {
            return Some(self.pick());
        }
        let drawn = self.pick_dir();
        let (write, due) = self.paced(drawn, *start).unwrap_or((drawn, *start));
        if due > *start {
            if !before_sleep(self) {
                return None;
            }
            crate::load::sleep_until(due.min(self.deadline), now_ns);
            *start = now_ns();
            if !self.more(*start) {
                return None;
            }
        }
        Some(self.pick_for(write))
    }

    /// The next I/O of the direction drawn (`write`, after the rate limiter's choice).
    fn pick_for(&mut self, write: bool) -> (usize, u64, u64) {
        match self.job.rw {
            // Trims take the write direction's offsets and block sizes.
            Rw::Trim | Rw::RandTrim => {
                let (_, off, len) = self.pick_at(1);
                (TRIM, off, len)
            }
            // fio's trimwrite: each block is trimmed, then written.
            Rw::TrimWrite => {
                if let Some((off, len)) = self.trimmed.take() {
                    return (1, off, len);
                }
                let (_, off, len) = self.pick_at(1);
                self.trimmed = Some((off, len));
                (TRIM, off, len)
            }
            _ => self.pick_at(write as usize),
        }
    }

    /// The next offset and length of direction `d` (0 read, 1 write).
    fn pick_at(&mut self, d: usize) -> (usize, u64, u64) {
        if self.zbd.is_some() && self.parked.len() > 1 {
            // fio's io_u_quiesce covers every file of the job.
            let held = self.parked.iter().flatten().any(|p| p.zbd.as_ref().is_some_and(|z| z.holds_zones()));
            if let Some(z) = self.zbd.as_mut() {
                z.held_elsewhere = held;
            }
        }
        if let Some(z) = &mut self.zbd {
            let len = self.job.bs[d];
            let r = z.next(self.dev, self.base, d, self.job.rw.is_random(), len);
            // A reset zone's blocks are no longer there to verify.
            let bs = self.job.bs[1];
            for (start, n) in z.reset_log.drain(..) {
                for b in start / bs..(start + n) / bs {
                    set_block(&mut self.written, b, false);
                }
            }
            return match r {
                Ok(Some(off)) => (d, off, len),
                Ok(None) if z.quiesce => {
                    self.zbd_quiesce = true;
                    (d, self.base, len)
                }
                Ok(None) => {
                    // fio's zbd eof: no zone holds data left to read; the job ends.
                    self.eof = true;
                    (d, self.base, len)
                }
                Err(e) => {
                    self.fail(libc::EIO, e);
                    (d, self.base, len)
                }
            };
        }
        if let Some(s) = &mut self.strided {
            let len = self.job.bs[d];
            return match s.next(d, len) {
                Some(off) => (d, off, len),
                None => {
                    self.eof = true;
                    (d, self.base, len)
                }
            };
        }
        if let Some(g) = &mut self.shaped[d] {
            return match g.next() {
                Some((off, len)) => (d, self.base + off, len),
                None => self.pass_over(d),
            };
        }
        match self.offs[d].next() {
            Some(off) => (d, off, self.job.bs[d]),
            None => self.pass_over(d),
        }
    }

    /// Direction `d`'s offsets ran out: the pass over the region is done (fio's
    /// `get_io_u` finds no block that fits, and `do_io` returns). Time-based, and with
    /// several files (whose passes [`Run::next_file`] ends), that direction's offsets go
    /// on from the region's start. Else the next pass starts, every direction's offsets
    /// from the start, or ([`Run::last_pass`]) the job ends: `eof`, and the I/O returned
    /// is not issued. (Before, a region that is not a multiple of the block size took one
    /// I/O more than fio, back at its start: `size=1m bs=3k` read 342 blocks, the last
    /// one block 0 again, where fio reads 341 from a file of 1 MiB.)
    #[cold]
    #[inline(never)]
    fn pass_over(&mut self, d: usize) -> (usize, u64, u64) {
        if self.job.time_based || self.picker.is_some() {
            self.offs[d].restart();
            if let Some(g) = &mut self.shaped[d] {
                g.restart();
            }
        } else if self.verify_passes {
            // The job's loop ends here; `run_job_slot` verifies the pass, then decides.
            (self.eof, self.pass_ended) = (true, true);
            return (d, self.base, self.job.bs[d]);
        } else if self.last_pass() {
            return (d, self.base, self.job.bs[d]);
        } else {
            self.restart_passes();
        }
        if let Some(g) = &mut self.shaped[d] {
            let (off, len) = g.next().expect("a pass that starts over has an I/O");
            return (d, self.base + off, len);
        }
        let off = self.offs[d].next().expect("a pass that starts over has a block");
        (d, off, self.job.bs[d])
    }

    /// Every direction's offsets start a new pass.
    fn restart_passes(&mut self) {
        self.offs.iter_mut().for_each(Offsets::restart);
        self.shaped.iter_mut().flatten().for_each(crate::shapes::ShapedOffsets::restart);
    }

    /// A pass over the job's region (every file's) is done: as fio's `keep_running`, the
    /// next starts with `loops` left, or with an explicit `io_size` short of done (the
    /// verify reads count) by at least the largest block. Otherwise the job ends (`eof`),
    /// and true says so.
    fn last_pass(&mut self) -> bool {
        self.passes += 1;
        let b = &self.job.behaviour;
        let left = self.per_loop.saturating_sub(self.issued_bytes + self.verify_bytes);
        // (A percentage is not fio's `o->io_size`: it becomes its `size`.)
        let explicit = matches!(b.io_size, Some(crate::jobfile::SizeSpec::Bytes(_)));
        let again = self.passes < b.loops.max(1) || (explicit && left >= self.job.bs[0].max(self.job.bs[1]));
        self.eof = !again;
        self.eof
    }

    /// Counts an issued I/O against the job's budget; a `trimwrite` job's trims do not
    /// count, so that it trims and writes its whole region. With several files, a file
    /// whose region has been gone over is done for this pass (fio marks it done when
    /// its offsets run out; random offsets without a map never do).
    #[inline]
    fn count_issued(&mut self, dir: usize, len: u64) {
        if !(dir == TRIM && self.job.rw == Rw::TrimWrite) {
            self.issued_bytes += len;
            if self.picker.is_some() {
                self.count_file_issued(len);
            }
        }
        self.issued_ios += 1;
    }

    /// Several files: `len` more bytes of the served file's pass (out of the per-I/O
    /// path of a job with one file).
    #[cold]
    #[inline(never)]
    fn count_file_issued(&mut self, len: u64) {
        let Some(p) = self.picker.as_mut() else { return };
        let j = self.job;
        // Random offsets without a map never run out; nor, here, do a sequential pattern's
        // with holes over several files. fio's get_next_seq_offset wraps those at the
        // file's end when the file ends with the region; a file larger than its region
        // fio ends at the region (`--nrfiles=2 --size=1m --rw=write:8k --bs=5k` on two 1 MiB
        // files: fio 80 writes, ours 205), which a pass counted in bytes cannot tell.
        let endless = (j.rw.is_random() && j.norandommap && j.behaviour.random_generator != RandomGenerator::Lfsr)
            || (!j.rw.is_random() && j.shapes.rw_modifier.is_some());
        let bs = j.bs[0].min(j.bs[1]).max(1);
        let c = self.cur;
        self.file_issued[c] += len;
        if !endless && self.file_issued[c] >= self.file_pass[c] - self.file_pass[c] % bs {
            p.set_done(c);
        }
    }

    /// Several files: makes the file the next I/O goes to the served one (fio's
    /// `file_service_type`); once every file is done, a new pass starts over them, unless
    /// that was the last pass ([`Run::last_pass`]; not time-based) and the job ends (before,
    /// files that do not hold a whole number of blocks took I/Os past fio's end). The
    /// budget or the run time may end the job sooner. One file: nothing to do.
    #[inline]
    fn next_file(&mut self) {
        if self.picker.is_some() {
            self.next_of_several_files();
        }
    }

    /// [`Run::next_file`] for a job with several files, out of line: inlined, the check
    /// that a pass is the last made the one-file path 14 instructions longer per I/O.
    #[inline(never)]
    fn next_of_several_files(&mut self) {
        if self.picker.as_ref().is_some_and(|p| p.all_done()) && !self.job.time_based {
            if self.verify_passes {
                // The job's loop ends here; `run_job_slot` verifies the pass, then decides.
                (self.eof, self.pass_ended) = (true, true);
                return;
            }
            if self.last_pass() {
                return;
            }
        }
        let Some(p) = self.picker.as_mut() else { return };
        if p.all_done() {
            p.restart();
            self.file_issued.iter_mut().for_each(|b| *b = 0);
        }
        let f = p.pick().expect("a file that is not done once the pass starts over");
        self.switch_to(f);
    }

    /// Makes file `f` the served one: its state comes into this `Run`'s fields, the
    /// state of the file served until now goes back to its place.
    fn switch_to(&mut self, f: usize) {
        if f == self.cur {
            return;
        }
        let mut s = self.parked[f].take().expect("a file that is not served is parked");
        std::mem::swap(&mut self.dev, &mut s.dev);
        std::mem::swap(&mut self.base, &mut s.base);
        std::mem::swap(&mut self.offs, &mut s.offs);
        std::mem::swap(&mut self.shaped, &mut s.shaped);
        std::mem::swap(&mut self.written, &mut s.written);
        std::mem::swap(&mut self.fsync_file, &mut s.fsync_file);
        std::mem::swap(&mut self.trimmed, &mut s.trimmed);
        std::mem::swap(&mut self.zbd, &mut s.zbd);
        self.parked[self.cur] = Some(s);
        self.cur = f;
    }

    /// Every file's number and region: what the end of a job (`end_fsync`, the verify
    /// phase) goes over.
    fn all_files(&self) -> Vec<(usize, u64)> {
        self.file_regions.iter().copied().enumerate().collect()
    }

    /// A write at `off` completed: with `verify_backlog`, it waits to be verified (as in
    /// fio, only with `do_verify`, which logs the writes to verify).
    fn note_written(&mut self, write: bool, off: u64) {
        if write && self.job.verify != Verify::None && self.job.do_verify && self.job.shapes.verify_backlog > 0 {
            self.backlog.push_back((self.cur, off));
        }
    }

    /// Whether `verify_backlog` writes wait to be verified.
    fn backlog_due(&self) -> bool {
        let n = self.job.shapes.verify_backlog;
        n > 0 && self.backlog.len() as u64 >= n
    }

    /// fio's `verify_backlog`: reads back and checks the oldest `verify_backlog_batch`
    /// (default: all) of the writes waiting; they are not verified again at the end.
    fn verify_backlog(&mut self) {
        let batch = match self.job.shapes.verify_backlog_batch {
            0 => self.backlog.len(),
            b => (b as usize).min(self.backlog.len()),
        };
        let bs = self.job.bs[1];
        let entries: Vec<(usize, u64)> = self.backlog.drain(..batch).collect();
        // Several files: each file's entries with its own state, in runs of one file.
        let served = self.cur;
        for run in entries.chunk_by(|a, b| a.0 == b.0) {
            self.switch_to(run[0].0);
            let blocks: Vec<u64> = run.iter().map(|&(_, o)| (o - self.base) / bs).collect();
            verify_blocks(self, bs, blocks.iter().copied(), true);
            for b in blocks {
                set_block(&mut self.written, b, false);
            }
            if self.res.error != 0 {
                break;
            }
        }
        self.switch_to(served);
    }

    /// Counts `n` writes; whether a sync is due (fio's `fsync=N` and `fdatasync=N`, each
    /// counted on its own) and which: where both are due, fio's `get_io_u` issues the
    /// fsync.
    fn sync_due(&mut self, n: u32) -> Option<SyncCall> {
        let mut due = None;
        for (every, since, call) in [
            (self.job.shapes.fdatasync, &mut self.writes_since_datasync, SyncCall::Fdatasync),
            (self.job.fsync, &mut self.writes_since_sync, SyncCall::Fsync),
        ] {
            if every > 0 {
                *since += n;
                if *since >= every {
                    *since = 0;
                    due = Some(call);
                }
            }
        }
        due
    }

    /// Runs a sync due after writes, timed as one: `fsync=N` on a file is fsync(2), as
    /// fio's engines call it for its sync direction (data and metadata); `fdatasync=N`,
    /// and any sync of a device that is not a file or of a mapping, is the library's
    /// flush (fdatasync on a file, a device flush, msync).
    fn sync_now(&mut self, call: SyncCall) -> bool {
        let s = now_ns();
        match sync_call(self.dev, self.fsync_file.as_ref(), call) {
            Ok(()) => {
                self.res.sync.record(now_ns() - s);
                true
            }
            Err((errno, msg)) => {
                self.fail(errno, msg);
                false
            }
        }
    }

    /// The priority value of an I/O whose statistics index is `index` (0: the job's own,
    /// which the logs show as the job's).
    #[inline]
    fn prio_value(&self, dir: usize, index: u16) -> u16 {
        match dir {
            0 => &self.res.read,
            1 => &self.res.write,
            _ => return 0,
        }
        .prios
        .get(index as usize)
        .filter(|_| index > 0)
        .map_or(0, |(v, _)| *v)
    }

    fn fail(&mut self, errno: i32, msg: String) {
        // fill_device: the ENOSPC/EDQUOT that ended the job, or one of the writes that
        // were in flight with it, is no error (fio clears it).
        if self.filled && (errno == libc::ENOSPC || errno == libc::EDQUOT) {
            return;
        }
        if self.res.error == 0 {
            self.res.error = errno.max(1);
            self.res.error_msg = Some(msg);
        }
    }

    /// fio's `lat_fatal` for `max_latency`: the I/O fails with ETIMEDOUT, and with it the
    /// job.
    #[cold]
    #[inline(never)]
    fn over_max_latency(&mut self, dir: usize, off: u64, len: u64, took: u64) {
        let (what, max) = (DIR_NAMES[dir.min(2)], self.lat_max[dir & 3]);
        let msg = format!(
            "max_latency: the {what} of {len} bytes at offset {off} took {took} ns, more than the {max} ns allowed"
        );
        self.fail(libc::ETIMEDOUT, msg);
    }

    /// Accounts one finished I/O.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn account(&mut self, dir: usize, len: u64, start: u64, issue: u64, complete: u64, has_slat: bool, prio: u16) {
        if complete < self.ramp_end {
            return;
        }
        if self.first_done == 0 {
            self.first_done = complete;
        }
        self.last_done = complete;
        let d = match dir {
            0 => &mut self.res.read,
            1 => &mut self.res.write,
            _ => &mut self.res.trim,
        };
        d.ios += 1;
        d.bytes += len;
        let b = &self.job.behaviour;
        if has_slat && !b.disable_slat {
            d.slat.record(issue - start);
        }
        if !b.disable_clat {
            d.clat.record(complete - issue);
        }
        if !b.disable_lat {
            d.lat.record(complete - start);
        }
        if let Some((_, p)) = d.prios.get_mut(prio as usize) {
            // fio's add_clat_sample / add_lat_sample: total latency with lat_percentiles.
            match b.cmdprio.on_lat {
                false if !b.disable_clat => p.record(complete - issue),
                true if !b.disable_lat => p.record(complete - start),
                _ => {}
            }
        }
        self.res.lat_dist[lat_bucket(complete - start)] += 1;
        if let Some(w) = self.window.get_mut(dir) {
            w.0 += 1;
            w.1 += len;
        }
    }

    /// What a completed I/O takes only in a job that asks for it (`rare`), after the ramp
    /// (where [`Run::account`] counts it): the `max_latency` check, and fio's per-I/O
    /// bandwidth and IOPS samples.
    #[cold]
    #[inline(never)]
    fn account_rare(&mut self, dir: usize, len: u64, off: u64, [start, issue, complete]: [u64; 3]) {
        if complete < self.ramp_end {
            return;
        }
        if complete - start > self.lat_max[dir & 3] && !self.job.behaviour.disable_lat {
            self.over_max_latency(dir, off, len, complete - start);
        }
        if self.sample_windows.contains(&None) {
            self.sample_one(dir, len, complete - issue);
        }
    }

    /// Closes 500 ms bandwidth/IOPS windows.
    #[inline]
    fn sample(&mut self, now: u64) {
        if now < self.ramp_end {
            self.restart_windows(now);
            return;
        }
        if !self.ramp_over {
            // fio's reset_all_stats when the ramp is over: job_runtime counts from the
            // ramp's end (as the I/O counters do, by completion time), CPU and faults from
            // this first completion after it.
            self.ramp_over = true;
            self.epoch = Some((self.ramp_end, Usage::now(libc::RUSAGE_THREAD)));
        }
        if now >= self.sample_due {
            self.close_windows(now);
        }
    }

    /// Both sample windows start at `now` (the job's start, the ramp).
    fn restart_windows(&mut self, now: u64) {
        (self.window_start, self.iops_start) = (now, now);
        let first = self.sample_windows.iter().flatten().min().copied().unwrap_or(u64::MAX);
        self.sample_due = now.saturating_add(first);
    }

    /// Takes the bandwidth and IOPS samples whose windows are over at `now`, and sets when
    /// the next one is.
    #[inline(never)]
    fn close_windows(&mut self, now: u64) {
        let [bw, iops] = self.sample_windows;
        let active = [self.job.rw.reads(), self.job.rw.writes()];
        let bw_span = now - self.window_start;
        if bw.is_some_and(|w| bw_span >= w) {
            for (i, d) in [&mut self.res.read, &mut self.res.write].into_iter().enumerate() {
                if active[i] && !self.job.behaviour.disable_bw {
                    d.bw_samples.add(self.window[i].1 * 1_000_000_000 / bw_span / 1024);
                }
                self.window[i].1 = 0;
            }
            self.window_start = now;
        }
        let iops_span = now - self.iops_start;
        if iops.is_some_and(|w| iops_span >= w) {
            for (i, d) in [&mut self.res.read, &mut self.res.write].into_iter().enumerate() {
                if active[i] && !self.job.behaviour.disable_bw {
                    d.iops_samples.add(self.window[i].0 * 1_000_000_000 / iops_span);
                }
                self.window[i].0 = 0;
            }
            self.iops_start = now;
        }
        let due = |start: u64, w: Option<u64>| w.map_or(u64::MAX, |w| start.saturating_add(w));
        self.sample_due = due(self.window_start, bw).min(due(self.iops_start, iops));
    }

    /// fio's `per_unit_log` samples: with a `bw` (`iops`) log of one entry per I/O, each
    /// read or write is a bandwidth sample (its bytes over its clat, as fio's
    /// `add_bw_sample`) and an IOPS sample of 1 (`add_iops_sample`).
    fn sample_one(&mut self, dir: usize, len: u64, clat: u64) {
        let d = match dir {
            0 => &mut self.res.read,
            1 => &mut self.res.write,
            _ => return,
        };
        if self.job.behaviour.disable_bw {
            return;
        }
        if self.sample_windows[0].is_none() {
            d.bw_samples.add((len * 1_000_000).checked_div(clat).unwrap_or(0));
        }
        if self.sample_windows[1].is_none() {
            d.iops_samples.add(1);
        }
    }

    /// Whether an error of an I/O in direction `write` (`verify`: a verify failure) is
    /// one the job goes on after (fio's `continue_on_error`: only EIO and EILSEQ, its
    /// default `ignore_error`; a verify failure with `verify_fatal` never); if so, counts
    /// it as fio's `total_err` / `first_error`.
    /// The bytes of a block each verify header covers (fio's `verify_interval` settled
    /// as fio settles it, [`verify::interval`]).
    fn verify_interval(&self) -> usize {
        let j = self.job;
        verify::interval(j.shapes.verify_interval, j.bs[1], j.bs[0], j.rw.reads()) as usize
    }

    /// `verify_dump`: the block that failed its check (and the one expected) into files
    /// in the working directory, as fio names them (no `--aux-path`); returns the words for the error
    /// (`; received data dumped as …`), empty without `verify_dump`. Each dump is also
    /// said on stderr, as fio logs it, since a job that goes on after the failure has no
    /// error to carry it.
    fn dump_bad_block(&self, block: &[u8], offset: u64, why: &crate::error::VerifyError) -> String {
        if !self.job.behaviour.verify_dump {
            return String::new();
        }
        let pattern = self.job.shapes.verify_pattern.as_deref();
        let said = match verify::dump(
            std::path::Path::new(""),
            self.dev.uri(),
            self.job.verify,
            pattern,
            block,
            offset,
            why,
        ) {
            Ok(files) => {
                files.iter().map(|(what, p)| format!("{what} data dumped as {}", p.display())).collect::<Vec<_>>()
            }
            Err(e) => vec![format!("verify_dump: {e}")],
        };
        for line in &said {
            eprintln!("{}: {line}", self.job.name);
        }
        format!("; {}", said.join(", "))
    }

    fn goes_on_after(&mut self, write: bool, verify: bool, errno: i32) -> bool {
        let b = &self.job.behaviour;
        let c = b.continue_on_error;
        let on = if verify {
            c.verify && !b.verify_fatal
        } else if write {
            c.write
        } else {
            c.read
        };
        let listed = &b.ignore_error[if verify { 2 } else { usize::from(write) }];
        let ignored =
            if listed.is_empty() { errno == libc::EIO || errno == libc::EILSEQ } else { listed.contains(&errno) };
        // fio's fill_device: a write's ENOSPC or EDQUOT that continue_on_error does not
        // go on after ends the job, and is no error (not counted either).
        let fills = b.fill_device && write && !verify && (errno == libc::ENOSPC || errno == libc::EDQUOT);
        if fills && !(on && ignored) {
            self.filled = true;
            return false;
        }
        if !on {
            return false;
        }
        if !ignored {
            // fio's break_on_this_error: an error of a type continue_on_error covers but
            // not in its list ends the job, and is counted (update_error_count); once: the
            // I/Os still in flight when it ends fail on their own.
            if self.res.error == 0 {
                self.count_error(errno);
            }
            return false;
        }
        if b.error_dump {
            // fio's io_u error line for an error it goes on after (error_dump=1; without
            // fio's offset and length).
            let what = if verify {
                "verify"
            } else if write {
                "write"
            } else {
                "read"
            };
            eprintln!(
                "ioswitch: job {}: error on file {}: {}: {what} (going on: continue_on_error)",
                self.job.name,
                self.job.filename,
                std::io::Error::from_raw_os_error(errno)
            );
        }
        self.count_error(errno);
        true
    }

    /// fio's `update_error_count`: `total_err`, and `first_error` at the first.
    fn count_error(&mut self, errno: i32) {
        self.res.total_err += 1;
        if self.res.total_err == 1 {
            self.res.first_error = errno;
        }
    }

    /// A write at `offset` failed and the job goes on: its block is not read back by the
    /// verify phase (fio drops the failed write's entry from its verify list, so a job
    /// with `continue_on_error` counts the write's error once, not again at verify).
    fn forget_write(&mut self, offset: u64) {
        if self.job.verify != Verify::None {
            set_block(&mut self.written, (offset - self.base) / self.job.bs[1], false);
        }
    }

    /// Fills a write's buffer. `now` is the engine's latest clock reading (the I/O's start
    /// time or the previous completion), which `scramble_buffers` stamps, as fio stamps the
    /// io_u's last start time: no clock is read here, per write.
    fn fill(&mut self, buf: &mut Buffer, offset: u64, len: u64, now: u64) {
        if let Some(g) = self.bufgen.as_mut().filter(|_| self.job.verify == Verify::None) {
            g.fill(buf, self.job.bs[1]);
        } else if let Some(p) = self.job.shapes.buffer_pattern.as_deref().filter(|_| self.job.verify == Verify::None) {
            // fio's buffer_pattern in a job that reads (or refill_buffers): the reads may
            // have overwritten the buffer, so the pattern goes back before every write.
            if self.job.rw.reads() || self.job.behaviour.refill_buffers {
                fill_pattern(buf, p);
            }
        } else if self.job.behaviour.refill_buffers && self.job.verify == Verify::None {
            // fio's refill_buffers: new random contents before every write (zeros again
            // under zero_buffers).
            if self.job.behaviour.zero_buffers {
                buf.fill(0);
            } else {
                for chunk in buf.chunks_mut(8) {
                    let r = self.refill.next().to_le_bytes();
                    chunk.copy_from_slice(&r[..chunk.len()]);
                }
            }
        } else if self.job.behaviour.scramble_buffers
            && self.job.verify == Verify::None
            && self.bufgen.is_none()
            && self.job.shapes.buffer_pattern.is_none()
        {
            let n = (len as usize).min(buf.len());
            scramble(&mut buf[..n], offset, now);
        }
        if self.job.verify != Verify::None {
            self.verify_seq += 1;
            let pattern = self.job.shapes.verify_pattern.as_deref();
            let vi = self.verify_interval();
            verify::fill_pieces(self.job.verify, pattern, buf, offset, self.job.seed ^ self.verify_seq, vi);
            let bs = self.job.bs[1];
            set_block(&mut self.written, (offset - self.base) / bs, true);
        }
    }
}

/// What a job keeps per file: the file's device, region and offset generators, and what
/// the verify phase reads back. The file being served sits in [`Run`]'s own fields; the
/// others wait here ([`Run::switch_to`]).
struct FileState<'a> {
    dev: &'a Device,
    base: u64,
    /// The file's region (kept in [`Run::file_regions`] once the job runs).
    region: u64,
    offs: [Offsets; 2],
    shaped: [Option<crate::shapes::ShapedOffsets>; 2],
    written: Vec<u64>,
    fsync_file: Option<std::fs::File>,
    trimmed: Option<(u64, u64)>,
    /// `zonemode=zbd`: the file's zones (set up when the job starts).
    zbd: Option<crate::zbd::Zbd>,
}

/// Checks one file of an instance and sets up its state: `size` is the file's region
/// (`None`: the device from the offset on), `fileno` its place in the job's files.
fn file_state<'a>(
    job: &Job,
    instance: u32,
    dev: &'a Device,
    size: Option<u64>,
    fileno: u32,
) -> Result<FileState<'a>, String> {
    // (Whether the job has several files, before `job` becomes this file's own.)
    let several = job.multi.is_some();
    let one = Job { filename: dev.uri().to_string(), size, multi: None, ..job.clone() };
    let job = &one;
    let region = check_job(job, dev).map_err(|e| e.to_string())?;
    // fio's offset_increment: instance i starts i increments further on.
    // (An offset past u64 is past any end: the check below refuses it.)
    let base = u64::from(instance)
        .checked_mul(job.shapes.offset_increment)
        .and_then(|i| i.checked_add(job.offset))
        .unwrap_or(u64::MAX);
    let bytes = dev.geometry().bytes;
    let region = if job.size.is_none() { bytes.saturating_sub(base) } else { region };
    if instance > 0
        && job.shapes.offset_increment > 0
        && base.checked_add(region).is_none_or(|e| e > bytes || region == 0)
    {
        return Err(format!(
            "instance {instance} starts at offset {base} (offset_increment={}), and its {region} bytes do not fit '{}' of {bytes} bytes",
            job.shapes.offset_increment, job.filename
        ));
    }
    // File 0 keeps the seeds a job with one file always had.
    let salt = (u64::from(instance) * 0x1000_0001) ^ (u64::from(fileno) * 0x9E37_79B9);
    let room = bytes - base;
    let mut shaped = [None, None];
    for (d, slot) in shaped.iter_mut().enumerate() {
        if job.shapes.shaped(d) {
            let map = !job.norandommap || job.behaviour.random_generator == RandomGenerator::Lfsr;
            let seed = job.seed ^ salt ^ (d as u64 * 0x77);
            // As the plain offsets: time-based, and over several files, they go on from
            // the region's start (Run::pass_over).
            let wrap = job.time_based || several;
            let random = job.rw.is_random();
            let g =
                crate::shapes::ShapedOffsets::new(&job.shapes, d, job.bs[d], (region, room), random, map, wrap, seed)
                    .map_err(|e| format!("random_distribution: {e}"))?;
            *slot = Some(g);
        }
    }
    let mut offs =
        [Offsets::new(job, region, room, job.bs[0], salt), Offsets::new(job, region, room, job.bs[1], salt ^ 0x77)];
    for o in &mut offs {
        o.base = base;
    }
    let fsync_file = if job.fsync > 0 && dev.ident().kind == ioswitch::DevKind::File && !uses_mapping(job, dev) {
        let f = std::fs::File::open(&job.filename)
            .map_err(|e| format!("cannot open '{}' for fsync=N: {e}", job.filename))?;
        Some(f)
    } else {
        None
    };
    // (Rounded up: a sequential pass's last block may end past the region; it is verified.)
    let blocks_w = region.div_ceil(job.bs[1]);
    Ok(FileState {
        dev,
        base,
        region,
        offs,
        shaped,
        written: if job.verify != Verify::None { vec![0; blocks_w.div_ceil(64) as usize] } else { Vec::new() },
        fsync_file,
        trimmed: None,
        zbd: None,
    })
}

/// The buffer seeds of a run's threads ([`Job::buffer_threads`]).
#[derive(Clone, Debug, Default)]
pub struct BufferThreads {
    /// Every thread's [`buffer_seed`], in fio's thread order (jobs as written, each job's
    /// `numjobs` instances in turn).
    pub seeds: std::sync::Arc<[u64]>,
    /// The index in `seeds` of this job's instance 0.
    pub first: usize,
}

/// The seed of the buffer contents of `job`'s instance `instance`: fio seeds every
/// thread's buffers apart (by its thread number), so two jobs with the same options write
/// different pages here too (by name, file and instance).
pub fn buffer_seed(job: &Job, instance: u32) -> u64 {
    let who = job
        .name
        .bytes()
        .chain([0])
        .chain(job.filename.bytes())
        .fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
    job.seed ^ (instance as u64 * 0x1000_0001) ^ who
}

/// Runs one job instance on an open device; never panics on I/O errors (they end up in
/// [`JobResult::error`]).
pub fn run_job(job: &Job, instance: u32, dev: &Device, progress: &Progress) -> JobResult {
    run_job_files(job, instance, &[dev], progress)
}

/// Runs one job instance on its open files (one, or those of [`Job::multi`], in order);
/// never panics on I/O errors (they end up in [`JobResult::error`]).
pub fn run_job_files(job: &Job, instance: u32, devs: &[&Device], progress: &Progress) -> JobResult {
    run_job_slot(job, instance, devs, progress, None, join_flow(job, progress))
}

/// The job's part in its flow (`flow`, `flow_id`), joined now: from here on its weight
/// counts for the other jobs of the flow (fio counts every job's weight from the start of
/// the run, [`crate::flow`]); `None` without a flow. Dropping it leaves the flow.
pub fn join_flow(job: &Job, progress: &Progress) -> Option<crate::flow::JobFlow> {
    let b = &job.behaviour;
    progress.flows.join(b.flow_id, b.flow, Duration::from_micros(u64::from(b.flow_sleep_us)))
}

/// [`run_job_files`], counting the instance's completions in `progress.slots[slot]` and
/// ending when its stop flag is set (the steady-state check, [`crate::steady`]), with its
/// part in its flow joined beforehand ([`join_flow`]), so that the jobs of a phase weigh on
/// each other from its start, whichever thread runs first.
pub fn run_job_slot(
    job: &Job,
    instance: u32,
    devs: &[&Device],
    progress: &Progress,
    slot: Option<usize>,
    flow: Option<crate::flow::JobFlow>,
) -> JobResult {
    let thread_before = Usage::now(libc::RUSAGE_THREAD);
    let t0 = now_ns();
    let mut res = JobResult { name: job.name.clone(), instance, ..JobResult::default() };
    let regions: Vec<Option<u64>> = match &job.multi {
        Some(m) if m.regions.len() == devs.len() => m.regions.clone(),
        Some(m) => {
            res.error = libc::EINVAL;
            res.error_msg = Some(format!("{} files open for {} regions", devs.len(), m.regions.len()));
            return res;
        }
        None => vec![job.size; devs.len()],
    };
    let mut files = Vec::with_capacity(devs.len());
    for (i, (dev, size)) in devs.iter().zip(&regions).enumerate() {
        match file_state(job, instance, dev, *size, i as u32) {
            Ok(f) => files.push(f),
            Err(msg) => {
                res.error = libc::EINVAL;
                res.error_msg = Some(msg);
                return res;
            }
        }
    }
    if files.is_empty() {
        res.error = libc::EINVAL;
        res.error_msg = Some("no file to run on".to_string());
        return res;
    }
    let file_regions: Vec<u64> = files.iter().map(|f| f.region).collect();
    let mut files = files.into_iter();
    let first = files.next().expect("one file at least");
    let parked: Vec<Option<FileState>> = std::iter::once(None).chain(files.map(Some)).collect();
    let (dev, region, base) = (first.dev, first.region, first.base);
    let pinned = match job.cpus.len() {
        0 => Ok(()),
        // cpus_allowed_policy=split: one CPU of the set per instance.
        n if job.behaviour.cpus_split => pin(&[job.cpus[instance as usize % n]]),
        _ => pin(&job.cpus),
    };
    if let Err(msg) = pinned {
        res.error = libc::EINVAL;
        res.error_msg = Some(format!("cpus_allowed: {msg}"));
        return res;
    }
    // numa_cpu_nodes, numa_mem_policy, prioclass/prio: after the pin, as fio.
    if let Err(msg) = job.behaviour.placement.apply() {
        res.error = libc::EINVAL;
        res.error_msg = Some(msg);
        return res;
    }
    if let Some(d) = job.behaviour.startdelay {
        // fio's startdelay: the job starts (and its clock with it) this much later.
        let until = t0 + d.as_nanos() as u64;
        while now_ns() < until && !progress.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_nanos((until - now_ns().min(until)).min(10_000_000)));
        }
    }
    let t0 = now_ns();
    let salt = instance as u64 * 0x1000_0001;
    let ramp_end = t0 + job.ramp.as_nanos() as u64;
    let deadline = job.runtime.map(|r| ramp_end + r.as_nanos() as u64).unwrap_or(u64::MAX);
    // fio's io_size (how much I/O per loop; the region is still `size`) and loops; with
    // several files, `size` is over all of them (at most their regions' sum).
    let per_loop = match &job.multi {
        Some(m) => match job.behaviour.io_size {
            Some(_) => io_size(job, &file_regions),
            None => m.total.unwrap_or(u64::MAX).min(file_regions.iter().sum()),
        },
        None => io_size(job, &[region]),
    };
    let mut run = Run {
        job,
        dev,
        res,
        progress,
        group_stop: progress.groups.get(job.group as usize),
        ramp_end,
        ramp_over: job.ramp.is_zero(),
        epoch: None,
        deadline,
        budget: per_loop.saturating_mul(u64::from(job.behaviour.loops.max(1))),
        issued_bytes: 0,
        issued_ios: 0,
        mix: Rng::new(job.seed ^ salt ^ 0xA5A5),
        prio_rng: Rng::new(job.seed ^ salt ^ 0x9210),
        offs: first.offs,
        trimmed: None,
        shaped: first.shaped,
        base,
        picker: job.multi.as_ref().map(|m| {
            crate::files::Picker::new(m.service.clone(), file_regions.len(), m.openfiles as usize, job.seed ^ salt)
        }),
        parked,
        cur: 0,
        file_issued: vec![0; file_regions.len()],
        file_pass: file_regions.clone(),
        file_regions,
        zbd: None,
        eof: false,
        passes: 0,
        verify_passes: job.verify != Verify::None
            && job.do_verify
            && job.rw.writes()
            && !job.time_based
            && job.shapes.verify_backlog == 0,
        pass_ended: false,
        verify_bytes: 0,
        number_ios: job.number_ios.map(|n| n.saturating_mul(u64::from(job.behaviour.loops.max(1)))),
        per_loop,
        zbd_quiesce: false,
        lat_max: {
            let m = job.load.max_latency.map(|ns| if ns == 0 { u64::MAX } else { ns });
            [m[0], m[1], m[2], u64::MAX]
        },
        rare: job.load.max_latency != [0; 3] || job.logs.sample_windows().contains(&None),
        filled: false,
        fill_end: 0,
        strided: None,
        writes_since_sync: 0,
        writes_since_datasync: 0,
        fsync_file: first.fsync_file,
        backlog: std::collections::VecDeque::new(),
        window_start: t0,
        window: [(0, 0); 2],
        iops_start: t0,
        sample_windows: job.logs.sample_windows(),
        sample_due: 0,
        written: first.written,
        verify_seq: 0,
        first_done: 0,
        last_done: 0,
        refill: Rng::new(job.seed ^ salt ^ 0xF111),
        bufgen: job.shapes.buffers.active().then(|| {
            let size = job.size.unwrap_or(0);
            let own = buffer_seed(job, instance);
            let threads = &job.buffer_threads;
            let (peers, me) = if threads.seeds.is_empty() {
                (std::slice::from_ref(&own), 0)
            } else {
                (&threads.seeds[..], threads.first + instance as usize)
            };
            crate::dedupe::Buffers::new(
                &job.shapes.buffers,
                job.shapes.buffer_pattern.as_deref(),
                crate::dedupe::Threads { seeds: peers, me },
                size,
                job.bs[1],
            )
        }),
        pacer: crate::load::Pacer::new(&job.load, job.bs, job.seed ^ salt, t0),
        paced_from_ramp: job.ramp.is_zero(),
        thinker: crate::load::Thinker::new(&job.load, t0),
        completed_ios: 0,
        lat_target: crate::load::LatencyTarget::new(&job.load, job.iodepth, ramp_end),
        lat_step: crate::load::LatStep::Go,
        min_rate: crate::load::MinRate::new(&job.load),
        slot: slot.and_then(|i| progress.slots.get(i)),
        flow,
        logs: job.logs.any().then(|| {
            let b = &job.behaviour;
            crate::iolog::JobLogs::new(
                &job.logs,
                &job.name,
                job.bs,
                [!b.disable_lat, !b.disable_slat, !b.disable_clat, !b.disable_bw],
            )
        }),
    };
    run.restart_windows(t0);
    if let Some(c) = &job.behaviour.cmdprio.chooser {
        for (d, values) in [&mut run.res.read, &mut run.res.write].into_iter().zip(&c.values) {
            d.prios = values.iter().map(|&v| (v, LatStats::new())).collect();
        }
    }
    if job.shapes.strided {
        let sh = &job.shapes;
        let size = sh.zone_size.unwrap_or(region).max(1);
        let map = job.rw.is_random() && (!job.norandommap || job.behaviour.random_generator == RandomGenerator::Lfsr);
        run.strided = Some(crate::strided::Strided::new(
            size,
            sh.zone_range.unwrap_or(size),
            sh.zone_skip,
            base,
            dev.geometry().bytes,
            job.rw.is_random(),
            map,
            job.seed ^ salt ^ 0x5747,
        ));
        if let Some(s) = run.strided.as_mut().filter(|_| job.time_based) {
            s.rewind_at = Some(base + region);
        }
    }
    if job.shapes.zbd {
        // Each file's zones (fio: each file's zone information, zbd.c zbd_init_files);
        // file 0 keeps the seed a job with one file always had.
        let mut capacity = 0u64;
        for f in 0..run.file_regions.len() {
            let (fdev, fbase, fregion) = match run.parked[f].as_ref() {
                Some(p) => (p.dev, p.base, p.region),
                None => (dev, base, region),
            };
            let seed = job.seed ^ salt ^ (f as u64 * 0x9E37_79B9);
            let verify = job.verify != Verify::None && job.do_verify;
            match crate::zbd::Zbd::new(fdev, fbase, fregion, &job.shapes, seed, job.rw.writes(), verify) {
                Ok(mut z) => {
                    // Several writes in flight (fio's recursive zone lock): each zone is
                    // released when its own write completes.
                    z.queued = job.mode == Mode::Async && job.iodepth > 1 && !job.behaviour.offload;
                    capacity = capacity.saturating_add(z.capacity());
                    run.file_pass[f] = z.capacity();
                    match run.parked[f].as_mut() {
                        Some(p) => p.zbd = Some(z),
                        None => run.zbd = Some(z),
                    }
                }
                Err(e) => {
                    run.fail(libc::EINVAL, e.to_string());
                    break;
                }
            }
        }
        // fio's rule: a pass moves the zones' capacity, not their size.
        run.budget = run.budget.min(capacity.saturating_mul(u64::from(job.behaviour.loops.max(1))));
    }
    loop {
        match job.mode {
            _ if job.behaviour.offload => offload::run_offload(&mut run),
            Mode::Sync => run_sync(&mut run),
            Mode::Async => run_async(&mut run),
        }
        if !std::mem::take(&mut run.pass_ended) || run.res.error != 0 {
            break;
        }
        // A pass of a job that verifies ended: its writes are read back and checked now,
        // file by file, then the next pass starts or the job ends (fio's do_verify,
        // keep_running).
        for (f, _) in run.all_files() {
            run.switch_to(f);
            run.verify_bytes += blocks_set(&run.written).len() as u64 * job.bs[1];
            verify_phase(&mut run);
            run.written.iter_mut().for_each(|w| *w = 0);
            if run.res.error != 0 {
                break;
            }
        }
        if run.res.error != 0 || run.last_pass() {
            break;
        }
        // The job's loop starts with file 0 served, the others parked (run_async's queues).
        run.switch_to(0);
        run.eof = false;
        run.restart_passes();
        if let Some(p) = run.picker.as_mut() {
            p.restart();
            run.file_issued.iter_mut().for_each(|b| *b = 0);
        }
    }
    let measured_from = run.ramp_end.max(t0);
    if let Some(lt) = &run.lat_target {
        run.res.latency_depth = lt.depth();
    }
    if let Some(mut logs) = run.logs.take() {
        logs.finish(now_ns().saturating_sub(run.ramp_end) / 1_000_000);
        run.res.logs = Some(logs);
    }
    run.res.runtime_ns = run.last_done.saturating_sub(measured_from).max(if run.last_done > 0 { 1 } else { 0 });
    if job.behaviour.fill_device
        && job.rw.writes()
        && !job.rw.reads()
        && run.dev.ident().kind == ioswitch::DevKind::File
    {
        // fio's fill leaves the file as long as its writes made it (they extend it); the
        // file was sized ahead here, so it is cut to the end of the furthest write.
        let end = run.fill_end.max(base);
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(run.dev.uri()).and_then(|f| f.set_len(end)) {
            run.fail(
                e.raw_os_error().unwrap_or(libc::EIO),
                format!("fill_device: cutting {} to {end} bytes: {e}", run.dev.uri()),
            );
        }
    }
    // The end of the job goes over every file, in order (one file: just it).
    for (f, region) in run.all_files() {
        run.switch_to(f);
        if job.behaviour.end_fsync && job.rw.writes() && run.res.error == 0 {
            // fio's end_fsync: one flush once the writing is done, timed as a sync.
            let s = now_ns();
            match run.dev.pass(&Cmd::flush(run.dev.ident().nsid), &mut []) {
                Ok(_) => run.res.sync.record(now_ns() - s),
                Err(e) => run.fail(e.errno().unwrap_or(libc::EIO), format!("end_fsync: {e}")),
            }
        }
        if job.verify != Verify::None && job.do_verify && run.res.error == 0 && job.rw.writes() {
            verify_phase(&mut run);
        }
        if job.verify != Verify::None && job.do_verify && run.res.error == 0 && !job.rw.writes() {
            verify_region(&mut run, region);
        }
    }
    run.res.zone_resets =
        run.zbd.iter().chain(run.parked.iter().flatten().filter_map(|p| p.zbd.as_ref())).map(|z| z.resets).sum();
    let (epoch, usage_from) = run.epoch.unwrap_or((t0, thread_before));
    let u = Usage::now(libc::RUSAGE_THREAD).since(usage_from);
    let mut res = run.res;
    res.usr_ns = u.usr_ns;
    res.sys_ns = u.sys_ns;
    res.ctx = u.ctx;
    res.majf = u.majf;
    res.minf = u.minf;
    let end = now_ns();
    res.elapsed_ns = end - t0;
    res.job_runtime_ns = end.saturating_sub(epoch);
    if job.behaviour.exitall || (job.behaviour.exitall_on_error && res.error != 0) {
        // fio's exitall: this job's end ends the jobs exit_what names; exitall_on_error:
        // its end in error does.
        progress.exit_all(job.group, job.behaviour.exit_what);
    }
    res
}

/// Whether the job's interface copies through a mapping (`mmap`, `pmem`), whose sync is
/// its own (msync, a drain), as in fio's engines for them.
fn uses_mapping(job: &Job, dev: &Device) -> bool {
    let i = dev.interfaces();
    let name = match job.mode {
        Mode::Sync => i.sync.map(|s| s.as_str()),
        Mode::Async => i.r#async.map(|a| a.as_str()),
    };
    name.is_some_and(crate::run::is_mapping)
}

/// Bytes of I/O per loop: `io_size`, or the regions (`regions`: each file's). A
/// percentage is of each file's region, summed, as fio's `setup_files` takes it (it was of
/// the device: `size=1m io_size=50%` on a 4 MiB file did 2 MiB, fio 512 KiB).
fn io_size(job: &Job, regions: &[u64]) -> u64 {
    match job.behaviour.io_size {
        None => regions.iter().sum(),
        Some(crate::jobfile::SizeSpec::Bytes(b)) => b,
        Some(crate::jobfile::SizeSpec::Percent(p)) => regions.iter().map(|r| r * u64::from(p) / 100).sum(),
    }
}

/// Pins the calling thread to `cpus`. Refused, as fio refuses it, when a CPU is one the
/// machine does not have ("CPU N too large"), or when the kernel refuses the set (none of
/// them is one this process may use): the job would otherwise run unpinned, silently.
fn pin(cpus: &[usize]) -> Result<(), String> {
    if let (Some(n), Some(&top)) = (crate::placement::configured_cpus(), cpus.iter().max()) {
        if top >= n as usize {
            return Err(format!("CPU {top} does not exist: this machine has CPUs 0..={}", n - 1));
        }
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it (the job
    // file's reader keeps every CPU below CPU_SETSIZE).
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        let list = cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        return Err(format!("sched_setaffinity to CPUs {list}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `pattern` repeated over `buf` from its start (fio's `fill_pattern`).
fn fill_pattern(buf: &mut [u8], pattern: &[u8]) {
    for (b, x) in buf.iter_mut().zip(pattern.iter().cycle()) {
        *b = *x;
    }
}

/// fio's `small_content_scramble` (`scramble_buffers`): in every whole 512-byte piece of
/// `buf` (written at `offset`), the piece's offset goes at the start of one of its eight
/// 64-byte lines (chosen by the time's nanoseconds XOR the I/O's offset) and the time
/// (seconds, nanoseconds; `now` in ns, as u64 little-endian) at bytes 48..64.
fn scramble(buf: &mut [u8], offset: u64, now: u64) {
    let (sec, nsec) = (now / 1_000_000_000, now % 1_000_000_000);
    let line = (((nsec ^ offset) & 7) as usize) << 6;
    let mut boff = offset;
    for piece in buf.chunks_exact_mut(512) {
        piece[line..line + 8].copy_from_slice(&boff.to_le_bytes());
        piece[48..56].copy_from_slice(&sec.to_le_bytes());
        piece[56..64].copy_from_slice(&nsec.to_le_bytes());
        boff += 512;
    }
}

fn alloc_buffers(run: &mut Run, n: u32) -> Option<Vec<Buffer>> {
    let j = run.job;
    let len = j.shapes.bs_bounds(0, j.bs[0]).1.max(j.shapes.bs_bounds(1, j.bs[1]).1) as usize;
    let mut v = Vec::with_capacity(n as usize);
    let mut rng = Rng::new(run.job.seed ^ 0xB0F);
    for _ in 0..n {
        match run.dev.alloc(len) {
            Ok(mut b) => {
                // fio fills write buffers with random data once (refill_buffers off),
                // or with buffer_pattern repeated from the buffer's start, or with zeros
                // (zero_buffers).
                match j.shapes.buffer_pattern.as_deref() {
                    Some(p) => fill_pattern(&mut b, p),
                    None if j.behaviour.zero_buffers => b.fill(0),
                    None => {
                        for chunk in b.chunks_mut(8) {
                            let r = rng.next().to_le_bytes();
                            chunk.copy_from_slice(&r[..chunk.len()]);
                        }
                    }
                }
                v.push(b)
            }
            Err(e) => {
                run.fail(libc::ENOMEM, e.to_string());
                return None;
            }
        }
    }
    Some(v)
}

/// A job held by its flow: sleeps `flow_sleep`, or (0) yields the CPU once.
fn flow_pause(sleep: Duration) {
    if sleep.is_zero() {
        std::thread::yield_now();
    } else {
        std::thread::sleep(sleep);
    }
}

fn run_sync(run: &mut Run) {
    let Some(mut bufs) = alloc_buffers(run, 1) else { return };
    let mut buf = bufs.pop().expect("one buffer");
    let per_cmd = run.dev.sync_syscalls_per_cmd();
    let mut batch = 0u64;
    // A sync due after a write runs before the next I/O, and only if there is one: fio
    // decides on it when it gets that I/O (get_rw_ddir), so a job's last write has none.
    let mut pending_sync = None;
    loop {
        let mut start = now_ns();
        if !run.more(start) {
            break;
        }
        if let Some(sleep) = run.flow_held() {
            flow_pause(sleep);
            continue;
        }
        // As fio's get_io_u: the file first (a sync, too, takes its turn of the
        // file_service_type and goes to that file).
        run.next_file();
        if let Some(call) = pending_sync.take() {
            if !run.sync_now(call) {
                break;
            }
            run.res.queue.syscalls += per_cmd;
            continue;
        }
        // Nothing is in flight in a sync job when it waits for a paced I/O's due time.
        let Some((dir, off, len)) = run.next_io(&mut start, |_| true) else { break };
        if run.res.error != 0 || run.eof {
            break;
        }
        let write = dir == 1;
        if write {
            run.fill(&mut buf, off, len, start);
        }
        let cmd = if dir == TRIM { Cmd::fs_trim(off, len) } else { make_cmd(run.dev, write, off, len) };
        run.count_issued(dir, len);
        run.res.depth_level[0] += 1;
        run.res.depth_sum += 1;
        run.res.reaps += 1;
        let r = run.dev.pass(&cmd, std::slice::from_mut(&mut buf));
        let complete = now_ns();
        run.res.queue.submitted += 1;
        run.res.queue.completed += 1;
        run.res.queue.syscalls += per_cmd;
        if let Some(p) = run.pacer.as_mut() {
            p.issued(write, len);
        }
        match r {
            Ok(_) => {
                run.note_written(write, off);
                run.account(dir, len, start, start, complete, false, 0);
                run.completed_io(dir, len, off, [start, start, complete], false, 0);
            }
            Err(e) => {
                let errno = e.errno().unwrap_or(libc::EIO);
                if let Some(z) = run.zbd.as_ref().filter(|_| write) {
                    z.failed_unqueued_write(off, len);
                }
                if !run.goes_on_after(dir != 0, false, errno) {
                    if run.filled && write {
                        run.forget_write(off);
                    }
                    run.fail(errno, format!("{} at offset {off}: {e}", DIR_NAMES[dir]));
                    break;
                }
                if write {
                    run.forget_write(off);
                }
            }
        }
        if write {
            pending_sync = run.sync_due(1).or(pending_sync);
        }
        if run.backlog_due() {
            run.verify_backlog();
            if run.res.error != 0 {
                break;
            }
        }
        run.sample(complete);
        if let Some(t) = run.thinker.as_mut() {
            if t.due(run.issued_ios, run.completed_ios, now_ns()) {
                let took = t.stall(now_ns);
                run.stalled(dir != 0, took);
            }
        }
        if run.lat_target.is_some() && !latency_step(run, None) {
            break;
        }
        batch += 1;
        if batch == 64 {
            run.progress.ios.fetch_add(batch, Ordering::Relaxed);
            run.progress.bytes.fetch_add(batch * len, Ordering::Relaxed);
            batch = 0;
        }
    }
    run.progress.ios.fetch_add(batch, Ordering::Relaxed);
}

/// fio's reaping rule, resolved for one job (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ReapPolicy {
    /// `iodepth_batch_complete_min`, capped at the depth.
    min: u32,
    /// `iodepth_batch_complete_max`, at least `min`.
    max: u32,
    /// `iodepth_low`.
    low: u32,
    /// Both `iodepth_batch_complete_min` and `_max` are 0: reap after every submission.
    polling: bool,
}

impl ReapPolicy {
    fn new(job: &Job, depth: u32) -> ReapPolicy {
        let min = job.batch_complete_min.min(depth);
        let low = if job.iodepth_low == 0 || job.iodepth_low > depth { depth } else { job.iodepth_low };
        ReapPolicy {
            min,
            max: job.batch_complete_max.max(min),
            low,
            polling: job.batch_complete_min == 0 && job.batch_complete_max == 0,
        }
    }

    /// The bounds of one reap with `inflight` commands in flight: fio's
    /// `wait_for_completions` waits for `min(iodepth_batch_complete_min, in flight)`, and
    /// for 1 where that is 0 (`iodepth_batch_complete_min=0` included: fio 3.33's code
    /// waits there although its HOWTO says it does not); `td_io_getevents` takes at most
    /// `min(iodepth_batch_complete_max, in flight)`, and never fewer than that min.
    fn batch(&self, inflight: u32) -> (u32, u32) {
        let min = self.min.min(inflight).max(1).min(inflight);
        (min, self.max.min(inflight).max(min))
    }
}

/// A queue with fio's view of it: the slots of commands not yet reaped by a batch, and
/// the completions the queue handed over beyond what a batch could take.
struct Flight {
    q: Queue,
    /// A job with several files: the queues of files 1.. (`q` is file 0's).
    more_q: Vec<Queue>,
    depth: u32,
    slots: Vec<Slot>,
    free: Vec<u32>,
    uncommitted: Vec<u32>,
    /// Reaped from the queue but not yet taken by a batch, oldest first, each with the
    /// time the queue handed it over (`ioswitch_clat_stamp=each`; 0 otherwise).
    pending: std::collections::VecDeque<(Completion, u64)>,
}

impl Flight {
    /// Commands in flight as fio counts them (`cur_depth`): submitted and not yet taken
    /// by a batch.
    #[inline]
    fn inflight(&self) -> u32 {
        self.depth - self.free.len() as u32
    }

    fn commit(&mut self, run: &mut Run) {
        if self.uncommitted.is_empty() {
            return;
        }
        if !self.more_q.is_empty() {
            // Several files: each queue with a submission of this batch pushes it first.
            for (i, q) in self.more_q.iter_mut().enumerate() {
                if self.uncommitted.iter().any(|&s| self.slots[s as usize].file == i as u32 + 1) {
                    if let Err(e) = q.commit() {
                        run.fail(e.errno().unwrap_or(libc::EIO), e.to_string());
                    }
                }
            }
        }
        commit(run, &mut self.q, &mut self.slots, &mut self.uncommitted);
    }

    /// The queue of the job's file `file`.
    #[inline]
    fn queue(&mut self, file: usize) -> &mut Queue {
        match file {
            0 => &mut self.q,
            f => &mut self.more_q[f - 1],
        }
    }

    /// Several files: takes completions from every queue into `pending` until it holds
    /// at least `min` (waiting on a queue with commands in flight while it does not) or
    /// `max`.
    fn gather_all(&mut self, min: u32, max: u32, each: bool) -> ioswitch::Result<()> {
        let pending = &mut self.pending;
        let stamp = |c| (c, if each { now_ns() } else { 0 });
        loop {
            for q in std::iter::once(&mut self.q).chain(self.more_q.iter_mut()) {
                let have = pending.len() as u32;
                if have >= max {
                    break;
                }
                if q.outstanding() > 0 {
                    q.poke(max - have, |c| pending.push_back(stamp(c)))?;
                }
            }
            if pending.len() as u32 >= min {
                return Ok(());
            }
            let busy = std::iter::once(&mut self.q).chain(self.more_q.iter_mut()).find(|q| q.outstanding() > 0);
            match busy {
                Some(q) => q.wait(1, |c| pending.push_back(stamp(c)))?,
                None => return Ok(()),
            };
        }
    }

    /// One reap, as fio's `io_u_queued_complete`: commits, takes at least `min` and at most
    /// `max` completions (waiting for `min`), stamps them with one completion time and
    /// accounts them. Returns how many were taken, or `None` when the queue failed.
    fn reap(&mut self, run: &mut Run, min: u32, max: u32) -> Option<u32> {
        self.commit(run);
        let each = run.job.behaviour.clat_stamp == ClatStamp::Each;
        let mut r = Ok(());
        if !self.more_q.is_empty() {
            r = self.gather_all(min, max, each);
        }
        let pending = &mut self.pending;
        if each && self.more_q.is_empty() {
            // One completion at a time, each stamped as it arrives.
            while r.is_ok() && (pending.len() as u32) < min {
                r = self.q.wait(1, |c| pending.push_back((c, now_ns()))).map(drop);
            }
        }
        let have = pending.len() as u32;
        let stamp = |c| (c, if each { now_ns() } else { 0 });
        if r.is_ok() && self.more_q.is_empty() {
            r = if have < min {
                self.q.wait(min - have, |c| pending.push_back(stamp(c))).map(drop)
            } else if have < max {
                self.q.poke(max - have, |c| pending.push_back(stamp(c))).map(drop)
            } else {
                Ok(())
            };
        }
        if let Err(e) = r {
            run.fail(e.errno().unwrap_or(libc::EIO), e.to_string());
            return None;
        }
        let complete = now_ns();
        let n = (self.pending.len() as u32).min(max);
        run.res.complete_level[batch_bucket(n)] += 1;
        run.res.reaps += 1;
        let mut bytes = 0;
        // Several files: each completion is accounted with its own file's state.
        let served = run.cur;
        let several = !self.more_q.is_empty();
        // The batch: the oldest n of pending, taken one at a time (a drain into a staging
        // vector cost ~40 instructions per I/O out of line).
        for _ in 0..n {
            let Some((c, at)) = self.pending.pop_front() else { break };
            let s = c.tag as u32;
            let slot = &mut self.slots[s as usize];
            let (write, start, issue, off) = (slot.write, slot.start, slot.issue, slot.offset);
            let (len, prio) = (slot.len, slot.prio);
            let dir = if slot.trim { TRIM } else { write as usize };
            slot.buf = c.data.into_one();
            if several {
                run.switch_to(slot.file as usize);
            }
            self.free.push(s);
            if !c.status.is_ok() {
                if let Some(z) = run.zbd.as_mut() {
                    // A failed write holds its zone no longer either.
                    z.done_at(off);
                }
                let errno = c.status.errno().unwrap_or(libc::EIO);
                if !run.goes_on_after(dir != 0, false, errno) {
                    if run.filled && write {
                        run.forget_write(off);
                    }
                    run.fail(errno, format!("{} at offset {off}: {}", DIR_NAMES[dir], c.status));
                } else if write {
                    run.forget_write(off);
                }
                continue;
            }
            bytes += len;
            let done = if each { at } else { complete };
            run.note_written(write, off);
            run.account(dir, len, start, issue, done, true, prio);
            let value = run.prio_value(dir, prio);
            run.completed_io(dir, len, off, [start, issue, done], true, value);
        }
        if several {
            run.switch_to(served);
        }
        run.sample(complete);
        run.progress.ios.fetch_add(n as u64, Ordering::Relaxed);
        run.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
        Some(n)
    }

    /// Reaps everything in flight as one batch, as fio does at the end of a job.
    fn reap_all(&mut self, run: &mut Run) -> Option<u32> {
        match self.inflight() {
            0 => Some(0),
            n => self.reap(run, n, n),
        }
    }
}

fn run_async(run: &mut Run) {
    let depth = run.job.iodepth.max(1);
    if depth > ioswitch::queue::MAX_DEPTH {
        // The library's refusal names its own parameter ("depth"); the job's is iodepth.
        let max = ioswitch::queue::MAX_DEPTH;
        return run.fail(libc::EINVAL, format!("iodepth={depth}: an ioswitch queue holds at most {max} commands"));
    }
    let q = match run.dev.queue(depth) {
        Ok(q) => q,
        Err(e) => {
            run.fail(e.errno().unwrap_or(libc::EINVAL), e.to_string());
            return;
        }
    };
    // Several files: a queue per file (fio's one io context serves them all; a queue
    // of the library serves one device), the depth shared by the slots.
    let mut more_q = Vec::new();
    for parked in run.parked.iter().skip(1) {
        let dev = parked.as_ref().expect("files 1.. are parked when the job starts").dev;
        match dev.queue(depth) {
            Ok(q) => more_q.push(q),
            Err(e) => {
                run.fail(e.errno().unwrap_or(libc::EINVAL), format!("{}: {e}", dev.uri()));
                return;
            }
        }
    }
    let Some(bufs) = alloc_buffers(run, depth) else { return };
    let mut f = Flight {
        q,
        more_q,
        depth,
        slots: bufs
            .into_iter()
            .map(|b| Slot {
                buf: Some(b),
                start: 0,
                issue: 0,
                write: false,
                offset: 0,
                len: 0,
                trim: false,
                file: 0,
                prio: 0,
            })
            .collect(),
        free: (0..depth).rev().collect(),
        uncommitted: Vec::with_capacity(depth as usize),
        pending: std::collections::VecDeque::with_capacity(depth as usize),
    };
    let batch_submit = run.job.batch_submit.max(1);
    let policy = ReapPolicy::new(run.job, depth);
    // fio's do_io: one I/O per turn; reap when the queue is full (or after every I/O when
    // polling), until no more than iodepth_low are in flight.
    'io: loop {
        let mut start = now_ns();
        if !run.more(start) {
            break;
        }
        if let Some(sleep) = run.flow_held() {
            // fio's io_u_quiesce before the sleep.
            if !sleep.is_zero() && (f.reap_all(run).is_none() || run.res.error != 0) {
                break 'io;
            }
            flow_pause(sleep);
            continue;
        }
        run.next_file();
        // Before a paced I/O's due time fio (inline submission) waits for everything in
        // flight, then sleeps.
        let Some((dir, off, len)) = run.next_io(&mut start, |run| f.reap_all(run).is_some() && run.res.error == 0)
        else {
            break 'io;
        };
        if run.zbd_quiesce {
            // fio's io_u_quiesce before waiting for a zone another job holds, or before a
            // zone reset: everything in flight completes, then the zone is asked again.
            run.zbd_quiesce = false;
            if f.reap_all(run).is_none() || run.res.error != 0 {
                break 'io;
            }
            continue;
        }
        if run.res.error != 0 || run.eof {
            break;
        }
        let write = dir == 1;
        let s = f.free.pop().expect("a free slot whenever the queue is not full");
        let slot = &mut f.slots[s as usize];
        let mut buf = slot.buf.take().expect("an idle slot holds its buffer");
        if write {
            run.fill(&mut buf, off, len, start);
        }
        let mut cmd = if dir == TRIM { Cmd::fs_trim(off, len) } else { make_cmd(run.dev, write, off, len) };
        slot.prio = 0;
        if let Some((value, index)) =
            run.job.behaviour.cmdprio.chooser.as_ref().and_then(|c| c.choose(dir, len, &mut run.prio_rng))
        {
            cmd = cmd.with_ioprio(value);
            slot.prio = index;
        }
        slot.start = start;
        slot.write = write;
        slot.offset = off;
        slot.len = len;
        slot.trim = dir == TRIM;
        slot.file = run.cur as u32;
        if let Err(rej) = f.queue(run.cur).submit(&cmd, Data::One(buf), s as u64) {
            f.slots[s as usize].buf = rej.data.into_one();
            f.free.push(s);
            if let Some(z) = run.zbd.as_mut().filter(|_| write) {
                // Refused, it never reached the device (fio: a queue that fails does not
                // move the write pointer): the table's goes back, the zone is let go.
                z.failed_unqueued_write(off, len);
                z.done_at(off);
            }
            run.fail(rej.error.errno().unwrap_or(libc::EIO), rej.error.to_string());
            break;
        }
        run.count_issued(dir, len);
        if let Some(p) = run.pacer.as_mut() {
            p.issued(write, len);
        }
        let inflight = f.inflight();
        run.res.depth_level[depth_bucket(inflight)] += 1;
        run.res.depth_sum += inflight as u64;
        f.uncommitted.push(s);
        if f.uncommitted.len() as u32 >= batch_submit {
            f.commit(run);
        }
        // fio's queue_full: with latency_target the queue is full at the searched depth.
        let full = f.free.is_empty() || run.lat_target.as_ref().is_some_and(|l| f.inflight() >= l.depth());
        if !full && !policy.polling {
            if think(run, &mut f, dir != 0).is_none() || (run.lat_target.is_some() && !latency_step(run, Some(&mut f)))
            {
                break 'io;
            }
            continue;
        }
        loop {
            let (min, max) = policy.batch(f.inflight());
            let Some(n) = f.reap(run, min, max) else { break 'io };
            if run.res.error != 0 {
                break 'io;
            }
            // As fio, no sync once the job has no I/O left to issue.
            let due = run.job.rw.writes().then(|| run.sync_due(n)).flatten().filter(|_| run.more(now_ns()));
            if let Some(call) = due {
                // Everything in flight completes before the sync, accounted as a batch.
                if f.reap_all(run).is_none() || !run.sync_now(call) {
                    break 'io;
                }
            }
            if run.backlog_due() {
                // The writes to verify complete first, as one batch (as for a flush).
                if f.reap_all(run).is_none() {
                    break 'io;
                }
                run.verify_backlog();
                if run.res.error != 0 {
                    break 'io;
                }
            }
            let low = match &run.lat_target {
                Some(l) => policy.low.min(l.depth().saturating_sub(1)),
                None => policy.low,
            };
            if !(full && f.inflight() > low) {
                break;
            }
        }
        if think(run, &mut f, dir != 0).is_none() || (run.lat_target.is_some() && !latency_step(run, Some(&mut f))) {
            break 'io;
        }
    }
    // The end (or a failure): everything still in flight, as one batch.
    f.reap_all(run);
    run.res.queue = f.q.stats();
    for q in &f.more_q {
        let st = q.stats();
        run.res.queue.submitted += st.submitted;
        run.res.queue.completed += st.completed;
        run.res.queue.syscalls += st.syscalls;
    }
}

/// The latency target's search after an I/O (fio's `lat_target_check` and what a
/// completion over the target asked for): quiesces the queue `f` when the depth went down,
/// starts the statistics over for the final window, fails the job when depth 1 misses the
/// target. Returns whether the job goes on.
fn latency_step(run: &mut Run, mut f: Option<&mut Flight>) -> bool {
    use crate::load::LatStep;
    let now = now_ns();
    if now < run.ramp_end {
        return true;
    }
    let mut step = std::mem::replace(&mut run.lat_step, LatStep::Go);
    if step == LatStep::Go {
        if let Some(lt) = run.lat_target.as_mut() {
            step = lt.check(now, run.completed_ios);
        }
    }
    match step {
        LatStep::Go => true,
        LatStep::Quiesce => f.map_or(Some(0), |f| f.reap_all(run)).is_some(),
        LatStep::Fatal => {
            let target = run.job.load.latency_target.unwrap_or_default();
            run.fail(libc::ETIMEDOUT, format!("latency_target {target:?} missed at queue depth 1"));
            false
        }
        LatStep::FinalRun => {
            if let Some(f) = f.as_mut() {
                if f.reap_all(run).is_none() {
                    return false;
                }
            }
            // fio's reset_all_stats: what was measured before this window is dropped.
            let now = now_ns();
            let keep = JobResult {
                name: std::mem::take(&mut run.res.name),
                instance: run.res.instance,
                latency_depth: run.lat_target.as_ref().map_or(0, |l| l.depth()),
                ..JobResult::default()
            };
            run.res = keep;
            run.ramp_end = now;
            run.ramp_over = true;
            run.epoch = Some((now, Usage::now(libc::RUSAGE_THREAD)));
            run.restart_windows(now);
            run.window = [(0, 0); 2];
            run.first_done = 0;
            if let Some(l) = run.logs.as_mut() {
                l.restart();
            }
            true
        }
        LatStep::Done => false,
    }
}

/// fio's `handle_thinktime` after an I/O: when a stall is due, waits for everything in
/// flight (`io_u_quiesce`), then stalls. `None` when the queue failed.
fn think(run: &mut Run, f: &mut Flight, write: bool) -> Option<()> {
    let due = match run.thinker.as_mut() {
        Some(t) => t.due(run.issued_ios, run.completed_ios, now_ns()),
        None => false,
    };
    if due {
        f.reap_all(run)?;
        if let Some(t) = run.thinker.as_ref() {
            let took = t.stall(now_ns);
            run.stalled(write, took);
        }
    }
    Some(())
}

#[inline]
fn commit(run: &mut Run, q: &mut Queue, slots: &mut [Slot], uncommitted: &mut Vec<u32>) {
    let r = q.commit();
    let issue = now_ns();
    run.res.submit_level[batch_bucket(uncommitted.len() as u32)] += 1;
    for &s in uncommitted.iter() {
        slots[s as usize].issue = issue;
    }
    uncommitted.clear();
    if let Err(e) = r {
        run.fail(e.errno().unwrap_or(libc::EIO), e.to_string());
    }
}

/// Marks block `block` of a verify bitmap as written (`on`) or not.
fn set_block(bits: &mut [u64], block: u64, on: bool) {
    if let Some(w) = bits.get_mut((block / 64) as usize) {
        if on {
            *w |= 1 << (block % 64);
        } else {
            *w &= !(1 << (block % 64));
        }
    }
}

/// The blocks a verify bitmap marks as written, in order.
fn blocks_set(bits: &[u64]) -> Vec<u64> {
    (0..bits.len() as u64 * 64).filter(|b| bits[(b / 64) as usize] & (1 << (b % 64)) != 0).collect()
}

/// Reads back every block written and checks its header and checksum; the reads count
/// as reads of the job, as fio counts its verify phase, and in `iodepth_level` (fio's
/// `do_verify` queues them with `td_io_queue`, which marks their depth). An async job
/// verifies at its `iodepth`, as fio's does ([`verify_blocks_async`]).
fn verify_phase(run: &mut Run) {
    let blocks = blocks_set(&run.written);
    if run.job.mode == Mode::Async {
        verify_blocks_async(run, run.job.bs[1], &blocks);
    } else {
        verify_blocks(run, run.job.bs[1], blocks, true);
    }
}

/// The verify phase of an async job, as fio's `do_verify` runs it: the reads are queued
/// up to `iodepth` (each marks the depth in flight after it, as the job's own I/O), and
/// reaped by the job's reaping policy (`iodepth_batch_complete_min/max`, `iodepth_low`);
/// each completion is checked and counted as a read (slat, clat, lat). Stops at the first
/// bad block unless `continue_on_error` says to go on, as [`verify_blocks`].
fn verify_blocks_async(run: &mut Run, bs: u64, blocks: &[u64]) {
    let depth = run.job.iodepth.max(1);
    let mut q = match run.dev.queue(depth) {
        Ok(q) => q,
        Err(e) => return run.fail(e.errno().unwrap_or(libc::EINVAL), format!("verify: {e}")),
    };
    // (buffer, offset, start, issue) per slot.
    let mut slots: Vec<(Option<Buffer>, u64, u64, u64)> = Vec::with_capacity(depth as usize);
    for _ in 0..depth {
        match run.dev.alloc(bs as usize) {
            Ok(b) => slots.push((Some(b), 0, 0, 0)),
            Err(e) => return run.fail(libc::ENOMEM, e.to_string()),
        }
    }
    let mut free: Vec<u32> = (0..depth).rev().collect();
    let mut pending = std::collections::VecDeque::with_capacity(depth as usize);
    let mut uncommitted = 0u32;
    let policy = ReapPolicy::new(run.job, depth);
    let batch_submit = run.job.batch_submit.max(1);
    let commit =
        |run: &mut Run, q: &mut Queue, slots: &mut [(Option<Buffer>, u64, u64, u64)], free: &[u32], n: &mut u32| {
            if *n == 0 {
                return;
            }
            let r = q.commit();
            let issue = now_ns();
            run.res.submit_level[batch_bucket(*n)] += 1;
            // The uncommitted slots are the last n taken: stamp every busy slot not stamped.
            for (i, s) in slots.iter_mut().enumerate() {
                if s.3 == 0 && !free.contains(&(i as u32)) {
                    s.3 = issue;
                }
            }
            *n = 0;
            if let Err(e) = r {
                run.fail(e.errno().unwrap_or(libc::EIO), format!("verify: {e}"));
            }
        };
    // One reap of at least `min`, at most `max` completions, stamped with one time. The
    // queue may hand over more than a batch takes: those wait in `pending`, still in
    // flight as fio counts them (as [`Flight::reap`]).
    let reap = |run: &mut Run,
                q: &mut Queue,
                slots: &mut [(Option<Buffer>, u64, u64, u64)],
                free: &mut Vec<u32>,
                pending: &mut std::collections::VecDeque<Completion>,
                n: &mut u32,
                min: u32,
                max: u32| {
        commit(run, q, slots, free, n);
        let have = pending.len() as u32;
        let r = if have < min {
            q.wait(min - have, |c| pending.push_back(c)).map(drop)
        } else if have < max {
            q.poke(max - have, |c| pending.push_back(c)).map(drop)
        } else {
            Ok(())
        };
        if let Err(e) = r {
            return run.fail(e.errno().unwrap_or(libc::EIO), format!("verify: {e}"));
        }
        let take = (pending.len() as u32).min(max) as usize;
        let done: Vec<Completion> = pending.drain(..take).collect();
        let complete = now_ns();
        run.res.complete_level[batch_bucket(done.len() as u32)] += 1;
        run.res.reaps += 1;
        // The reaped blocks' checks (on `verify_async` checker threads), reported below in
        // the completions' order as if each were checked there.
        let (pattern, vi) = (run.job.shapes.verify_pattern.as_deref(), run.verify_interval());
        let read: Vec<(&[u8], u64)> = done
            .iter()
            .filter(|c| c.status.is_ok())
            .filter_map(|c| match &c.data {
                Data::One(b) => Some((&b[..], slots[c.tag as usize].1)),
                _ => None,
            })
            .collect();
        let mut checks =
            verify::check_pieces_on(run.job.shapes.verify_async, run.job.verify, pattern, &read, vi).into_iter();
        drop(read);
        for c in done {
            let check = if c.status.is_ok() && matches!(c.data, Data::One(_)) { checks.next() } else { None };
            let s = c.tag as u32;
            let slot = &mut slots[s as usize];
            let (off, start, issue) = (slot.1, slot.2, slot.3);
            slot.0 = c.data.into_one();
            slot.3 = 0;
            free.push(s);
            if run.res.error != 0 {
                continue;
            }
            if !c.status.is_ok() {
                let errno = c.status.errno().unwrap_or(libc::EIO);
                if !run.goes_on_after(false, false, errno) {
                    run.fail(errno, format!("verify read at offset {off}: {}", c.status));
                }
                continue;
            }
            let b = &run.job.behaviour;
            let (slat, clat, lat) = (!b.disable_slat, !b.disable_clat, !b.disable_lat);
            let d = &mut run.res.read;
            d.ios += 1;
            d.bytes += bs;
            if slat {
                d.slat.record(issue - start);
            }
            if clat {
                d.clat.record(complete - issue);
            }
            if lat {
                d.lat.record(complete - start);
            }
            let buf = slots[s as usize].0.as_ref().expect("a reaped slot holds its buffer");
            let check = check.unwrap_or_else(|| {
                verify::check_pieces(run.job.verify, run.job.shapes.verify_pattern.as_deref(), buf, off, vi)
            });
            if let Err((at, len, why)) = check {
                let off = off + at as u64;
                let dumped = run.dump_bad_block(&buf[at..at + len], off, &why);
                if !run.goes_on_after(false, true, libc::EILSEQ) {
                    run.fail(libc::EILSEQ, format!("verify: bad block at offset {off}: {why}{dumped}"));
                }
                continue;
            }
            run.res.verified += 1;
        }
    };
    for &b in blocks {
        if run.res.error != 0 {
            break;
        }
        let off = run.base + b * bs;
        let s = free.pop().expect("a free slot whenever the queue is not full");
        let buf = slots[s as usize].0.take().expect("an idle slot holds its buffer");
        let start = now_ns();
        slots[s as usize].1 = off;
        slots[s as usize].2 = start;
        if let Err(rej) = q.submit(&make_cmd(run.dev, false, off, bs), Data::One(buf), s as u64) {
            slots[s as usize].0 = rej.data.into_one();
            free.push(s);
            run.fail(rej.error.errno().unwrap_or(libc::EIO), format!("verify: {}", rej.error));
            break;
        }
        let inflight = depth - free.len() as u32;
        run.res.depth_level[depth_bucket(inflight)] += 1;
        run.res.depth_sum += inflight as u64;
        uncommitted += 1;
        if uncommitted >= batch_submit {
            commit(run, &mut q, &mut slots, &free, &mut uncommitted);
        }
        if !free.is_empty() && !policy.polling {
            continue;
        }
        let full = free.is_empty();
        loop {
            let (min, max) = policy.batch(depth - free.len() as u32);
            reap(run, &mut q, &mut slots, &mut free, &mut pending, &mut uncommitted, min, max);
            if run.res.error != 0 || !(full && depth - free.len() as u32 > policy.low) {
                break;
            }
        }
    }
    // The rest, as one batch.
    let left = depth - free.len() as u32;
    if left > 0 {
        reap(run, &mut q, &mut slots, &mut free, &mut pending, &mut uncommitted, left, left);
    }
    // (The queue's counters stay the job's own, as the sync verify's calls do.)
}

/// A read job with `verify=`: re-reads its whole region after the measured part and checks
/// every block (not counted as reads: the measured reads already were).
fn verify_region(run: &mut Run, region: u64) {
    let bs = run.job.bs[0];
    verify_blocks(run, bs, 0..region / bs, false);
}

/// Reads `blocks` (block numbers of size `bs` from the job's offset) and checks each; stops
/// at the first bad one, naming its offset. With `verify_async=N`, N blocks are read, then
/// checked by N checker threads, their results reported in the blocks' order.
fn verify_blocks(run: &mut Run, bs: u64, blocks: impl IntoIterator<Item = u64>, count_reads: bool) {
    let threads = run.job.shapes.verify_async;
    let mut bufs = Vec::new();
    for _ in 0..threads.max(1) {
        match run.dev.alloc(bs as usize) {
            Ok(b) => bufs.push(b),
            Err(e) => return run.fail(libc::ENOMEM, e.to_string()),
        }
    }
    let mut blocks = blocks.into_iter().peekable();
    let mut offs: Vec<u64> = Vec::with_capacity(bufs.len());
    while blocks.peek().is_some() {
        offs.clear();
        while offs.len() < bufs.len() {
            let Some(b) = blocks.next() else { break };
            if let Some(off) = verify_read(run, bs, b, count_reads, &mut bufs[offs.len()]) {
                offs.push(off);
            } else if run.res.error != 0 {
                return;
            }
        }
        let (pattern, vi) = (run.job.shapes.verify_pattern.as_deref(), run.verify_interval());
        let read: Vec<(&[u8], u64)> = bufs.iter().zip(&offs).map(|(b, &o)| (&b[..], o)).collect();
        let results = verify::check_pieces_on(threads, run.job.verify, pattern, &read, vi);
        drop(read);
        for ((buf, &off), r) in bufs.iter().zip(&offs).zip(results) {
            if let Err((at, len, why)) = r {
                let off = off + at as u64;
                let dumped = run.dump_bad_block(&buf[at..at + len], off, &why);
                if run.goes_on_after(false, true, libc::EILSEQ) {
                    continue;
                }
                return run.fail(libc::EILSEQ, format!("verify: bad block at offset {off}: {why}{dumped}"));
            }
            run.res.verified += 1;
        }
    }
}

/// One read of [`verify_blocks`] into `buf`: its offset once read (counted as a read
/// where `count_reads`); `None` after a read error, which fails the job unless
/// `continue_on_error` says to go on.
fn verify_read(run: &mut Run, bs: u64, b: u64, count_reads: bool, buf: &mut Buffer) -> Option<u64> {
    {
        let off = run.base + b * bs;
        let cmd = make_cmd(run.dev, false, off, bs);
        let start = now_ns();
        if let Err(e) = run.dev.pass(&cmd, std::slice::from_mut(buf)) {
            let errno = e.errno().unwrap_or(libc::EIO);
            if !run.goes_on_after(false, false, errno) {
                run.fail(errno, format!("verify read at offset {off}: {e}"));
            }
            return None;
        }
        if count_reads {
            // One read at a time: depth 1, as fio marks a sync engine's verify reads.
            run.res.depth_level[0] += 1;
            run.res.depth_sum += 1;
            run.res.reaps += 1;
            let took = now_ns() - start;
            run.res.read.ios += 1;
            run.res.read.bytes += bs;
            run.res.read.clat.record(took);
            run.res.read.lat.record(took);
        }
        Some(off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_random_map_visits_every_block_once_per_pass() {
        for n in [1u64, 2, 3, 5, 64, 1000, 4097] {
            let mut m = RandMap::new(n, 42);
            let mut seen = vec![0u32; n as usize];
            for _ in 0..n * 2 {
                seen[m.next() as usize] += 1;
            }
            assert!(seen.iter().all(|&c| c == 2), "n={n}: {seen:?}");
        }
    }

    #[test]
    fn the_random_map_is_not_sequential() {
        let mut m = RandMap::new(1000, 7);
        let v: Vec<u64> = (0..10).map(|_| m.next()).collect();
        assert!(v.windows(2).any(|w| w[1] != w[0] + 1), "{v:?}");
    }

    #[test]
    fn fio_depth_and_batch_buckets() {
        assert_eq!([1, 2, 3, 4, 8, 16, 31, 32, 64, 100].map(depth_bucket), [0, 1, 1, 2, 3, 4, 4, 5, 6, 6]);
        assert_eq!([0, 1, 4, 5, 8, 9, 16, 17, 64, 65].map(batch_bucket), [0, 1, 1, 2, 2, 3, 3, 4, 5, 6]);
    }

    #[test]
    fn latency_buckets_follow_fio_groups() {
        assert_eq!(lat_bucket(1), 0); // < 2 ns
        assert_eq!(lat_bucket(999), 9); // 750..1000 ns
        assert_eq!(lat_bucket(1500), 10); // 1.5 µs: < 2 µs
        assert_eq!(lat_bucket(90_000), 15); // 90 µs: 50..100
        assert_eq!(lat_bucket(3_000_000), 21); // 3 ms: 2..4
        assert_eq!(lat_bucket(5_000_000_000), 31); // 5 s: >= 2000 ms
    }
}

/// A job for the unit tests: `name` on `filename` with `opts`, `mode`, `rw` and depth `qd`
/// (also its `iodepth_low`), 4 KiB blocks over 1 MiB, every other setting its default.
#[cfg(test)]
pub(crate) fn test_job(name: &str, filename: &str, opts: ioswitch::Opts, mode: Mode, rw: Rw, qd: u32) -> Job {
    Job {
        name: name.into(),
        filename: filename.into(),
        opts,
        mode,
        rw,
        rwmixread: 50,
        bs: [4096, 4096],
        iodepth: qd,
        batch_submit: 1,
        batch_complete_min: 1,
        batch_complete_max: 1,
        iodepth_low: qd,
        offset: 0,
        size: Some(1 << 20),
        runtime: None,
        time_based: false,
        ramp: Duration::ZERO,
        number_ios: None,
        norandommap: false,
        seed: 1,
        cpus: vec![],
        fsync: 0,
        verify: Verify::None,
        do_verify: false,
        behaviour: Behaviour::default(),
        load: crate::load::Load::new(),
        logs: Default::default(),
        shapes: Default::default(),
        buffer_threads: Default::default(),
        multi: None,
        group: 0,
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;

    fn job(uri: &str, opts: &str, mode: Mode, rw: Rw, qd: u32) -> Job {
        test_job("t", uri, opts.parse().unwrap(), mode, rw, qd)
    }

    fn run(j: &Job) -> JobResult {
        let dev = Device::open(&j.filename, &j.opts).unwrap();
        run_job(j, 0, &dev, &Progress::default())
    }

    #[test]
    fn clat_stamp_batch_gives_a_batch_one_time_and_each_one_per_completion() {
        // One batch: 32 commands committed together (one issue time), reaped as one batch
        // of 32 (fio's iodepth_batch_complete_min = max = 32).
        let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandRead, 32);
        (j.batch_submit, j.batch_complete_min, j.batch_complete_max) = (32, 32, 32);
        j.number_ios = Some(32);
        let b = run(&j);
        assert_eq!((b.error, b.read.ios, b.reaps), (0, 32, 1), "{:?}", b.error_msg);
        assert_eq!(b.read.clat.stats.min(), b.read.clat.stats.max(), "batch: one issue and one completion time");
        j.behaviour.clat_stamp = ClatStamp::Each;
        let e = run(&j);
        assert_eq!((e.error, e.read.ios, e.reaps), (0, 32, 1), "{:?}", e.error_msg);
        assert!(e.read.clat.stats.min() < e.read.clat.stats.max(), "each: a time per completion");
        // lat is still slat + clat, sample by sample.
        assert_eq!(e.read.lat.stats.sum(), e.read.slat.stats.sum() + e.read.clat.stats.sum());
    }

    #[test]
    fn an_async_job_moves_its_size_and_lat_is_slat_plus_clat() {
        let r = run(&job("4MiB", "async=emu", Mode::Async, Rw::RandRead, 8));
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!(r.read.ios, 256);
        assert_eq!(r.read.bytes, 1 << 20);
        assert_eq!(r.write.ios, 0);
        // Every sample of lat is exactly its slat plus its clat, so the sums agree.
        assert_eq!(r.read.lat.stats.sum(), r.read.slat.stats.sum() + r.read.clat.stats.sum());
        assert_eq!(r.read.slat.samples(), 256);
        assert_eq!(r.queue.submitted, 256);
        assert_eq!(r.depth_level.iter().sum::<u64>(), 256);
    }

    #[test]
    fn ramp_time_starts_job_runtime_cpu_and_faults_over_as_fio_does() {
        // A sync job on a ram disk keeps its thread busy: 300 ms of ramp, then 300 ms
        // measured. fio's reset_all_stats at the ramp's end starts job_runtime and the
        // thread's CPU over; counted from the job's start they would be about 600 ms.
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        (j.runtime, j.ramp, j.time_based) = (Some(Duration::from_millis(300)), Duration::from_millis(300), true);
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert!(r.elapsed_ns >= 600_000_000, "the whole run takes ramp + runtime: {} ns", r.elapsed_ns);
        assert!(
            r.job_runtime_ns >= 300_000_000 && r.job_runtime_ns + 250_000_000 <= r.elapsed_ns,
            "job_runtime counts from the ramp's end: {} ns of {} ns",
            r.job_runtime_ns,
            r.elapsed_ns
        );
        let cpu = r.usr_ns + r.sys_ns;
        assert!(
            cpu <= r.job_runtime_ns + 20_000_000,
            "CPU {cpu} ns counted from the ramp's end, job_runtime {} ns",
            r.job_runtime_ns
        );
        // Without a ramp the job's epoch is its start: job_runtime is the whole run.
        (j.ramp, j.runtime) = (Duration::ZERO, Some(Duration::from_millis(100)));
        let r = run(&j);
        assert_eq!(r.job_runtime_ns, r.elapsed_ns);
    }

    #[test]
    fn a_sync_job_has_no_slat_and_lat_equals_clat() {
        let r = run(&job("4MiB", "", Mode::Sync, Rw::Write, 1));
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!(r.write.ios, 256);
        assert_eq!(r.write.slat.samples(), 0);
        assert_eq!(r.write.lat.stats.sum(), r.write.clat.stats.sum());
        assert_eq!(r.queue.syscalls, 0, "a ramdisk makes no syscalls");
    }

    #[test]
    fn mixed_jobs_split_by_rwmix_and_number_ios_stops_early() {
        let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandRw, 4);
        j.rwmixread = 70;
        j.number_ios = Some(200);
        let r = run(&j);
        assert_eq!(r.read.ios + r.write.ios, 200);
        assert!((110..=170).contains(&r.read.ios), "reads {}", r.read.ios);
    }

    fn scratch(test: &str) -> ioswitch_testkit::dirs::Scratch {
        ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), &format!("ioswitch-engine-{test}"))
    }

    /// A 1 MiB file job whose file is cut to half its size after the device is open, so
    /// that every I/O in the second half ends with EIO (a transfer that moves nothing).
    fn half_gone(s: &ioswitch_testkit::dirs::Scratch, mode: Mode, rw: Rw, behaviour: Behaviour) -> JobResult {
        let path = s.file("f", 1 << 20);
        let mut j = job(&path, "", mode, rw, if mode == Mode::Sync { 1 } else { 4 });
        if mode == Mode::Async {
            j.opts = "async=emu".parse().unwrap();
        }
        j.behaviour = behaviour;
        let dev = Device::open(&j.filename, &j.opts).unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(512 << 10).unwrap();
        run_job(&j, 0, &dev, &Progress::default())
    }

    #[test]
    fn continue_on_error_counts_eio_and_goes_on_only_for_its_direction() {
        let s = scratch("coe");
        for mode in [Mode::Sync, Mode::Async] {
            let r = half_gone(&s, mode, Rw::RandRead, Behaviour::default());
            assert_eq!(r.error, libc::EIO, "{mode:?}: without continue_on_error an EIO ends the job");
            assert_eq!(r.total_err, 0);
            let mut b = Behaviour::default();
            b.continue_on_error.read = true;
            let r = half_gone(&s, mode, Rw::RandRead, b.clone());
            assert_eq!(r.error, 0, "{mode:?}: {:?}", r.error_msg);
            assert_eq!((r.total_err, r.first_error, r.read.ios), (128, libc::EIO, 128), "{mode:?}");
            b.continue_on_error = crate::jobfile::ContinueOn { write: true, verify: true, read: false };
            let r = half_gone(&s, mode, Rw::RandRead, b);
            assert_eq!((r.error, r.total_err), (libc::EIO, 0), "{mode:?}: write and verify do not cover reads");
        }
    }

    #[test]
    fn ignore_error_goes_on_after_the_listed_errnos_only() {
        let s = scratch("ignerr");
        for mode in [Mode::Sync, Mode::Async] {
            let mut b = Behaviour::default();
            b.continue_on_error.read = true;
            // A read list without EIO replaces fio's default (EIO, EILSEQ): the EIO ends it.
            b.ignore_error[0] = vec![libc::ENOSPC];
            let r = half_gone(&s, mode, Rw::RandRead, b.clone());
            // Counted as fio counts it (break_on_this_error): the type is covered.
            assert_eq!((r.error, r.total_err, r.first_error), (libc::EIO, 1, libc::EIO), "{mode:?}: EIO is not listed");
            b.ignore_error[0] = vec![libc::ENOSPC, libc::EIO];
            let r = half_gone(&s, mode, Rw::RandRead, b.clone());
            assert_eq!(r.error, 0, "{mode:?}: {:?}", r.error_msg);
            assert_eq!((r.total_err, r.first_error, r.read.ios), (128, libc::EIO, 128), "{mode:?}");
            // The write list does not cover reads.
            b.ignore_error = [vec![libc::ENOSPC], vec![libc::EIO], Vec::new()];
            b.continue_on_error.write = true;
            let r = half_gone(&s, mode, Rw::RandRead, b);
            assert_eq!((r.error, r.total_err), (libc::EIO, 1), "{mode:?}: the write list is not the read list");
        }
    }

    #[test]
    fn a_failed_write_is_dropped_from_the_verify_list_as_fio_does() {
        // fio unlogs a failed write's io_piece (io_u.c, io_completed): with
        // continue_on_error=write the verify phase does not read that block back.
        let mut bits = vec![0u64; 3];
        for b in [0, 5, 63, 64, 130, 131] {
            set_block(&mut bits, b, true);
        }
        set_block(&mut bits, 64, false);
        set_block(&mut bits, 131, false);
        set_block(&mut bits, 7, false); // never written: stays unwritten
        set_block(&mut bits, 10_000, true); // past the region: ignored, no panic
        assert_eq!(blocks_set(&bits), vec![0, 5, 63, 130]);
    }

    #[test]
    fn verify_failures_go_on_with_continue_on_error_unless_verify_fatal() {
        let s = scratch("vfatal");
        let path = s.file("f", 1 << 20);
        let mut w = job(&path, "", Mode::Sync, Rw::Write, 1);
        w.verify = Verify::Crc32c;
        w.do_verify = true;
        assert_eq!(run(&w).error, 0);
        // One bad block (the 5th).
        use std::os::unix::fs::FileExt;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all_at(b"garbage!", 4 * 4096 + 100).unwrap();
        let mut r = job(&path, "", Mode::Sync, Rw::Read, 1);
        r.verify = Verify::Crc32c;
        r.do_verify = true;
        let res = run(&r);
        assert_eq!(res.error, libc::EILSEQ, "by default a bad block ends the job");
        r.behaviour.continue_on_error.verify = true;
        let res = run(&r);
        assert_eq!((res.error, res.total_err, res.first_error, res.verified), (0, 1, libc::EILSEQ, 255));
        r.behaviour.verify_fatal = true;
        let res = run(&r);
        assert_eq!((res.error, res.total_err), (libc::EILSEQ, 0), "verify_fatal wins over continue_on_error");
    }

    #[test]
    fn verify_async_checkers_give_the_results_the_job_thread_gives() {
        let s = scratch("vasync");
        let path = s.file("f", 1 << 20);
        let mut w = job(&path, "", Mode::Sync, Rw::Write, 1);
        (w.verify, w.do_verify) = (Verify::Crc32c, true);
        assert_eq!(run(&w).error, 0);
        // Two bad blocks (the 5th and the 200th).
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(b"garbage!", 4 * 4096 + 100).unwrap();
        f.write_all_at(b"garbage!", 199 * 4096 + 8).unwrap();
        for (mode, spec, qd) in [(Mode::Sync, "", 1), (Mode::Async, "async=emu", 8)] {
            for go_on in [false, true] {
                let outcome = |threads: u32| {
                    let mut r = job(&path, spec, mode, Rw::Read, qd);
                    (r.verify, r.do_verify, r.shapes.verify_async) = (Verify::Crc32c, true, threads);
                    r.behaviour.continue_on_error.verify = go_on;
                    let res = run(&r);
                    (res.error, res.total_err, res.first_error, res.verified, res.error_msg)
                };
                let inline = outcome(0);
                assert_eq!(inline.0, if go_on { 0 } else { libc::EILSEQ }, "{mode:?} {inline:?}");
                if go_on {
                    assert_eq!((inline.1, inline.3), (2, 254), "{mode:?}");
                } else {
                    assert!(format!("{:?}", inline.4).contains("bad block at offset 16384"), "{inline:?}");
                }
                for threads in [1, 3, 4] {
                    assert_eq!(outcome(threads), inline, "{mode:?} verify_async={threads} continue_on_error={go_on}");
                }
            }
        }
    }

    /// The short job of the exitall tests: 100 random 4 KiB reads, sync, on a ramdisk.
    fn hundred_reads() -> Job {
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        j.number_ios = Some(100);
        j
    }

    /// Runs `short` beside a time-based job of `long_for`, both on one [`Progress`]:
    /// their results, the time both took, and whether the run was told to stop.
    fn beside_a_timed_job(short: &Job, long_for: Duration) -> (JobResult, JobResult, Duration, bool) {
        let mut long = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        (long.time_based, long.runtime) = (true, Some(long_for));
        let progress = Progress::default();
        let (d1, d2) = (Device::open("4MiB", &short.opts).unwrap(), Device::open("4MiB", &long.opts).unwrap());
        let t0 = now_ns();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| run_job(short, 0, &d1, &progress));
            let b = s.spawn(|| run_job(&long, 0, &d2, &progress));
            (a.join().unwrap(), b.join().unwrap())
        });
        (a, b, Duration::from_nanos(now_ns() - t0), progress.stop.load(Ordering::Relaxed))
    }

    #[test]
    fn exitall_stops_the_jobs_beside_it_when_it_ends() {
        for exitall in [true, false] {
            let mut short = hundred_reads();
            short.behaviour.exitall = exitall;
            let long_for = if exitall { Duration::from_secs(30) } else { Duration::from_millis(300) };
            let (a, b, took, stopped) = beside_a_timed_job(&short, long_for);
            assert_eq!((a.error, b.error, a.read.ios), (0, 0, 100));
            if exitall {
                assert!(took < Duration::from_secs(10), "the 30 s job ran on for {took:?}");
            } else {
                assert!(took >= Duration::from_millis(300), "without exitall the other job runs its time");
                assert!(!stopped);
            }
        }
    }

    #[test]
    fn exitall_on_error_stops_the_jobs_beside_it_when_it_ends_in_error_only() {
        // A job that ends with an error (max_latency at 1 ns: its first read), or without
        // one, beside a 30 s job.
        for fails in [true, false] {
            let mut short = hundred_reads();
            short.behaviour.exitall_on_error = true;
            if fails {
                short.load = crate::load::Load { max_latency: [1; 3], ..crate::load::Load::new() };
            }
            let long_for = if fails { Duration::from_secs(30) } else { Duration::from_millis(300) };
            let (a, b, took, stopped) = beside_a_timed_job(&short, long_for);
            assert_eq!((a.error, b.error), (if fails { libc::ETIMEDOUT } else { 0 }, 0), "{:?}", a.error_msg);
            if fails {
                assert!(took < Duration::from_secs(10), "the 30 s job ran on for {took:?}");
            } else {
                assert!(took >= Duration::from_millis(300), "without an error the other job runs its time");
                assert_eq!(a.read.ios, 100);
                assert!(!stopped);
            }
        }
    }

    /// A region that is not a multiple of the block size, as fio 3.33 takes it (`io_u.c`
    /// `last_block`, `get_next_offset`, `fill_io_u`; `backend.c` `do_io`, `keep_running`;
    /// each count below is what fio issued for the same job): random offsets, the blocks
    /// that fit in the region; sequential ones, every block that starts in it, the last
    /// only where the device has room for its end; once per pass, never block 0 twice.
    /// Before, `size=1m bs=3k` took 342 I/Os whatever the device, the last one at offset
    /// 0; fio takes 341 on a 1 MiB file, 342 on a larger one, the last at 1047552.
    #[test]
    fn a_region_that_is_not_a_multiple_of_the_block_size_takes_the_blocks_that_start_in_it() {
        const BS: u64 = 3072;
        // (device, rw, mode, norandommap, loops, io_size, ios); the region is 1 MiB.
        let cases = [
            ("1MiB", Rw::Read, Mode::Sync, false, 1, None, 341u64),
            ("4MiB", Rw::Read, Mode::Sync, false, 1, None, 342),
            ("1MiB", Rw::Write, Mode::Sync, false, 1, None, 341),
            ("1MiB", Rw::Read, Mode::Async, false, 1, None, 341),
            ("4MiB", Rw::Read, Mode::Async, false, 1, None, 342),
            ("4MiB", Rw::RandRead, Mode::Sync, false, 1, None, 341),
            ("4MiB", Rw::RandRead, Mode::Async, false, 1, None, 341),
            // Without a map random offsets never run out: bytes decide (1 MiB / 3 KiB, up).
            ("1MiB", Rw::RandRead, Mode::Sync, true, 1, None, 342),
            ("1MiB", Rw::Read, Mode::Sync, false, 2, None, 682),
            ("4MiB", Rw::Read, Mode::Sync, false, 2, None, 683),
            ("1MiB", Rw::RandRead, Mode::Sync, false, 3, None, 1023),
            // io_size past the region: passes go on while at least a block is left to do.
            ("1MiB", Rw::Read, Mode::Sync, false, 1, Some(2u64 << 20), 682),
            ("1MiB", Rw::RandRead, Mode::Sync, false, 1, Some(2 << 20), 682),
            // ... counted over all loops, as fio's keep_running counts (5 passes here).
            ("1MiB", Rw::Read, Mode::Sync, false, 2, Some(4 << 20), 1705),
            ("4MiB", Rw::Read, Mode::Sync, false, 2, Some(4 << 20), 1368),
        ];
        for (dev, rw, mode, norandommap, loops, io_size, ios) in cases {
            let mut j = job(dev, "", mode, rw, if mode == Mode::Async { 8 } else { 1 });
            j.bs = [BS, BS];
            j.norandommap = norandommap;
            j.behaviour.loops = loops;
            j.behaviour.io_size = io_size.map(crate::jobfile::SizeSpec::Bytes);
            let r = run(&j);
            let d = if rw.writes() { &r.write } else { &r.read };
            let what = format!("{dev} {rw:?} {mode:?} norandommap={norandommap} loops={loops} io_size={io_size:?}");
            assert_eq!((r.error, d.ios, d.bytes), (0, ios, ios * BS), "{what}: {:?}", r.error_msg);
        }
        // io_size inside the region: bytes decide (1 MiB of a 2 MiB region).
        let mut j = job("4MiB", "", Mode::Sync, Rw::Read, 1);
        (j.bs, j.size) = ([BS, BS], Some(2 << 20));
        j.behaviour.io_size = Some(crate::jobfile::SizeSpec::Bytes(1 << 20));
        let r = run(&j);
        assert_eq!((r.error, r.read.ios), (0, 342), "{:?}", r.error_msg);
        // Block 0 is written once: every block written is verified, and verifies.
        for (dev, ios) in [("1MiB", 341), ("4MiB", 342)] {
            let mut j = job(dev, "", Mode::Sync, Rw::Write, 1);
            j.bs = [BS, BS];
            (j.verify, j.do_verify) = (Verify::Crc32c, true);
            let r = run(&j);
            assert_eq!((r.error, r.write.ios, r.verified), (0, ios, ios), "{dev}: {:?}", r.error_msg);
        }
        // Time-based, the offsets start over from the region's start, as fio's.
        let mut j = job("1MiB", "", Mode::Sync, Rw::Read, 1);
        j.bs = [BS, BS];
        (j.time_based, j.runtime) = (true, Some(Duration::from_millis(200)));
        let r = run(&j);
        assert!(r.error == 0 && r.read.ios > 341, "time-based: {} I/Os, {:?}", r.read.ios, r.error_msg);
    }

    #[test]
    fn loops_go_over_the_region_that_many_times() {
        for (rw, loops) in [(Rw::Read, 1), (Rw::Read, 3), (Rw::RandRead, 3)] {
            let mut j = job("4MiB", "", Mode::Sync, rw, 1);
            j.behaviour.loops = loops;
            let r = run(&j);
            assert_eq!(
                (r.error, r.read.ios, r.read.bytes),
                (0, 256 * loops as u64, (1 << 20) * loops as u64),
                "{rw:?}"
            );
        }
    }

    #[test]
    fn io_size_sets_the_io_done_and_size_the_region() {
        use crate::jobfile::SizeSpec;
        // A percentage is of the region (1 MiB here), not of the device (4 MiB): 50 % twice
        // is 256 blocks, as fio 3.33 does `size=1m io_size=50% loops=2` on a 4 MiB file.
        // (This case asked 1024 until the percentage was taken as fio takes it.)
        for (io, loops, ios) in [
            (SizeSpec::Bytes(256 << 10), 1, 64u64),
            (SizeSpec::Bytes(3 << 20), 1, 768),
            (SizeSpec::Percent(50), 2, 256),
        ] {
            let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
            j.behaviour.io_size = Some(io);
            j.behaviour.loops = loops;
            let r = run(&j);
            assert_eq!((r.error, r.read.ios), (0, ios), "{io:?}");
        }
        // 3 MiB of I/O over a 1 MiB region: the region again and again, each pass's
        // writes verified when it ends. The verify reads count toward io_size, as fio's
        // keep_running counts them: two passes, 512 writes and 512 verified, as fio 3.33
        // does `size=1m io_size=3m rw=write verify=crc32c` (this case asked 768 writes and
        // 256 verified, one verify at the end, until each pass was verified as fio's).
        let mut j = job("4MiB", "", Mode::Sync, Rw::Write, 1);
        j.behaviour.io_size = Some(SizeSpec::Bytes(3 << 20));
        j.verify = Verify::Crc32c;
        j.do_verify = true;
        let r = run(&j);
        assert_eq!((r.error, r.write.ios, r.verified), (0, 512, 512), "{:?}", r.error_msg);
        // Without verify, all 3 MiB are written: every block three times.
        j.verify = Verify::None;
        j.do_verify = false;
        let r = run(&j);
        assert_eq!((r.error, r.write.ios), (0, 768), "{:?}", r.error_msg);
    }

    #[test]
    fn startdelay_starts_the_job_and_its_clock_later() {
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        j.number_ios = Some(10);
        j.behaviour.startdelay = Some(Duration::from_millis(300));
        let t0 = now_ns();
        let r = run(&j);
        let took = now_ns() - t0;
        assert_eq!((r.error, r.read.ios), (0, 10));
        assert!(took >= 300_000_000, "{took} ns");
        assert!(
            r.elapsed_ns < took - 250_000_000,
            "the job's clock started after the delay: {} of {took}",
            r.elapsed_ns
        );
    }

    #[test]
    fn end_fsync_flushes_once_after_writing_and_is_timed_as_a_sync() {
        for (rw, end, want) in [(Rw::Write, true, 1), (Rw::Write, false, 0), (Rw::Read, true, 0)] {
            let mut j = job("4MiB", "async=emu", Mode::Async, rw, 4);
            j.behaviour.end_fsync = end;
            let r = run(&j);
            assert_eq!((r.error, r.sync.samples()), (0, want), "{rw:?} end_fsync={end}");
        }
    }

    /// The CPUs the calling thread may run on.
    fn affinity() -> Vec<usize> {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity writes one into it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
            (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
        }
    }

    #[test]
    fn cpus_allowed_policy_split_gives_each_instance_one_cpu_of_the_set() {
        let online = affinity();
        if online.len() < 2 {
            return eprintln!("skipped: this process may run on {} CPU(s); split needs 2", online.len());
        }
        let set = vec![online[0], online[1]];
        for (split, instance, want) in [(true, 0u32, vec![set[0]]), (true, 3, vec![set[1]]), (false, 1, set.clone())] {
            let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
            j.number_ios = Some(4);
            j.cpus = set.clone();
            j.behaviour.cpus_split = split;
            let got = std::thread::scope(|s| {
                s.spawn(|| {
                    let dev = Device::open(&j.filename, &j.opts).unwrap();
                    assert_eq!(run_job(&j, instance, &dev, &Progress::default()).error, 0);
                    affinity()
                })
                .join()
                .unwrap()
            });
            assert_eq!(got, want, "split={split} instance {instance}");
        }
    }

    #[test]
    fn the_job_thread_runs_with_its_numa_nodes_and_io_priority_after_the_pin() {
        use crate::placement::{online_nodes, parse_list, thread_ioprio, Placement};
        let online = affinity();
        let node0 = online_nodes()[0];
        let cpulist = format!("/sys/devices/system/node/node{node0}/cpulist");
        let Some(node_cpus) = std::fs::read_to_string(&cpulist).ok().and_then(|s| parse_list(s.trim())) else {
            return eprintln!("skipped: no {cpulist} (a kernel without NUMA)");
        };
        let node_cpus: Vec<usize> = node_cpus.into_iter().map(|c| c as usize).filter(|c| online.contains(c)).collect();
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        j.number_ios = Some(4);
        j.cpus = vec![online[0]];
        j.behaviour.placement =
            Placement { cpu_nodes: Some(vec![node0]), prioclass: Some(2), prio: Some(6), ..Default::default() };
        let (err, cpus, prio) = std::thread::scope(|s| {
            s.spawn(|| {
                let dev = Device::open(&j.filename, &j.opts).unwrap();
                let r = run_job(&j, 0, &dev, &Progress::default());
                (r.error, affinity(), thread_ioprio().unwrap())
            })
            .join()
            .unwrap()
        });
        assert_eq!(err, 0);
        assert_eq!(cpus, node_cpus, "numa_cpu_nodes replaces cpus_allowed's pin, as in fio");
        assert_eq!(prio, 2 << 13 | 6);
        // A node without CPUs to read: the job fails with the option named.
        j.behaviour.placement = Placement { cpu_nodes: Some(vec![65000]), ..Default::default() };
        let r = std::thread::scope(|s| s.spawn(|| run(&j)).join().unwrap());
        assert_eq!(r.error, libc::EINVAL);
        let msg = r.error_msg.unwrap_or_default();
        // The job's name is put before the message where it is shown, once
        // (`report::errors`: "job t: numa_cpu_nodes: ..."): the message does not carry it.
        assert!(msg.starts_with("numa_cpu_nodes: read the CPUs of node 65000"), "{msg}");
        assert!(!msg.contains("job"), "{msg}");
    }

    #[test]
    fn buffer_pattern_is_in_every_written_block_from_its_start() {
        let s = scratch("bufpat");
        // A pattern whose length does not divide the block: each block starts over.
        let pattern = vec![0xde, 0xad, 0x01];
        for rw in [Rw::Write, Rw::ReadWrite] {
            let path = s.file(&format!("f{rw:?}"), 1 << 18);
            std::fs::write(&path, vec![0x77u8; 1 << 18]).unwrap();
            let mut j = job(&path, "", Mode::Sync, rw, 1);
            j.size = Some(1 << 18);
            j.shapes.buffer_pattern = Some(pattern.clone());
            let r = run(&j);
            assert_eq!(r.error, 0);
            assert!(rw == Rw::Write || r.read.bytes > 0, "{rw:?} read nothing");
            let data = std::fs::read(&path).unwrap();
            let mut written = 0;
            for block in data.chunks(4096) {
                if block.iter().all(|&b| b == 0x77) {
                    continue; // not written
                }
                written += 1;
                for (i, b) in block.iter().enumerate() {
                    assert_eq!(*b, pattern[i % 3], "{rw:?}: byte {i} of a written block");
                }
            }
            // Each write went to a block of its own (sequential): every one holds the pattern.
            assert_eq!(written, r.write.ios, "{rw:?}: blocks holding the pattern");
        }
    }

    #[test]
    fn scramble_stamps_offset_and_time_in_every_512_byte_piece() {
        let mut b = vec![0xEEu8; 1536 + 100];
        let now = 7 * 1_000_000_000 + 3; // nsec 3, offset 4096: line (3 ^ 4096) & 7 = 3
        scramble(&mut b, 4096, now);
        for (i, p) in b.chunks(512).enumerate() {
            if p.len() < 512 {
                assert!(p.iter().all(|&x| x == 0xEE), "a partial piece is left alone");
                continue;
            }
            let u = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
            assert_eq!(u(3 * 64), 4096 + 512 * i as u64, "piece {i}'s offset");
            assert_eq!((u(48), u(56)), (7, 3), "piece {i}'s time");
            let stamped = |k: usize| (192..200).contains(&k) || (48..64).contains(&k);
            assert!(p.iter().enumerate().all(|(k, &x)| stamped(k) || x == 0xEE), "only 24 bytes change");
        }
    }

    #[test]
    fn scramble_buffers_makes_a_default_jobs_blocks_differ() {
        let s = scratch("scramble");
        for scramble in [false, true] {
            let path = s.file(&format!("f{scramble}"), 8192);
            let mut j = job(&path, "", Mode::Sync, Rw::Write, 1);
            j.size = Some(8192);
            j.behaviour.scramble_buffers = scramble;
            assert_eq!(run(&j).error, 0);
            let data = std::fs::read(&path).unwrap();
            assert_eq!(data[..4096] != data[4096..], scramble, "scramble_buffers={scramble}");
            // Apart from the stamps (24 bytes per 512) the two blocks hold the same data.
            let same = data[..4096].iter().zip(&data[4096..]).filter(|(a, b)| a == b).count();
            assert!(same >= 4096 - 8 * 24, "{same} bytes alike");
            if scramble {
                let off = |p: &[u8]| {
                    (0..8).map(|l| u64::from_le_bytes(p[l * 64..l * 64 + 8].try_into().unwrap())).collect::<Vec<_>>()
                };
                assert!(
                    off(&data[4096 + 512..]).contains(&(4096 + 512)),
                    "the second block's second piece holds its offset"
                );
            }
        }
    }

    #[test]
    fn zero_buffers_writes_zeros_filled_once_or_refilled() {
        let s = scratch("zero");
        for refill in [false, true] {
            let path = s.file(&format!("f{refill}"), 8192);
            // Not zeros beforehand, so that the writes must have put the zeros there.
            std::fs::write(&path, vec![0xAAu8; 8192]).unwrap();
            let mut j = job(&path, "", Mode::Sync, Rw::Write, 1);
            j.size = Some(8192);
            j.behaviour.zero_buffers = true;
            j.behaviour.refill_buffers = refill;
            j.behaviour.scramble_buffers = false;
            assert_eq!(run(&j).error, 0);
            let data = std::fs::read(&path).unwrap();
            assert!(data.iter().all(|&b| b == 0), "zero_buffers (refill_buffers={refill}) writes zeros");
        }
        // With scramble_buffers as well, the zeroed blocks carry the stamps (fio's order).
        let path = s.file("scrambled", 8192);
        let mut j = job(&path, "", Mode::Sync, Rw::Write, 1);
        j.size = Some(8192);
        j.behaviour.zero_buffers = true;
        j.behaviour.scramble_buffers = true;
        assert_eq!(run(&j).error, 0);
        let data = std::fs::read(&path).unwrap();
        let nonzero = data.iter().filter(|&&b| b != 0).count();
        assert!(nonzero > 0 && nonzero <= 16 * 24, "{nonzero} stamped bytes, the rest zeros");
    }

    #[test]
    fn refill_buffers_writes_new_data_every_time() {
        let s = scratch("refill");
        for refill in [false, true] {
            let path = s.file(&format!("f{refill}"), 8192);
            let mut j = job(&path, "", Mode::Sync, Rw::Write, 1);
            j.size = Some(8192);
            j.behaviour.refill_buffers = refill;
            // fio's scramble_buffers (default on) stamps each 512-byte piece; off here, so
            // the buffers filled once write the same data every time.
            j.behaviour.scramble_buffers = false;
            assert_eq!(run(&j).error, 0);
            let data = std::fs::read(&path).unwrap();
            assert!(data[..4096].iter().any(|&b| b != 0), "random data, not zeroes");
            assert_eq!(data[..4096] != data[4096..], refill, "refill_buffers={refill}");
        }
    }

    #[test]
    fn disabled_latencies_are_not_measured_and_gtod_reduce_drops_all() {
        let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandRead, 4);
        j.behaviour.disable_clat = true;
        let r = run(&j);
        assert_eq!((r.read.clat.samples(), r.read.slat.samples(), r.read.lat.samples()), (0, 256, 256));
        j.behaviour.disable_clat = false;
        j.behaviour.disable_slat = true;
        j.behaviour.disable_lat = true;
        let r = run(&j);
        assert_eq!((r.read.clat.samples(), r.read.slat.samples(), r.read.lat.samples()), (256, 0, 0));
        // gtod_reduce: nothing timed, nothing sampled; the I/Os still run and count.
        let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandRead, 4);
        j.time_based = true;
        j.runtime = Some(Duration::from_millis(1100));
        let on = run(&j);
        assert!(
            on.read.iops_samples.samples() > 0 && on.read.bw_samples.samples() > 0,
            "windows of 500 ms were sampled"
        );
        let b = &mut j.behaviour;
        (b.disable_lat, b.disable_clat, b.disable_slat, b.disable_bw) = (true, true, true, true);
        let off = run(&j);
        assert!(off.read.ios > 0);
        assert_eq!((off.read.lat.samples(), off.read.clat.samples(), off.read.slat.samples()), (0, 0, 0));
        assert_eq!((off.read.iops_samples.samples(), off.read.bw_samples.samples()), (0, 0));
    }

    #[test]
    fn lfsr_visits_every_block_once_per_pass_even_without_the_random_map() {
        for (generator, norandommap, once) in [
            (RandomGenerator::Lfsr, true, true),
            (RandomGenerator::Lfsr, false, true),
            (RandomGenerator::Tausworthe, false, true),
            (RandomGenerator::Tausworthe, true, false),
        ] {
            let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
            j.norandommap = norandommap;
            j.behaviour.random_generator = generator;
            let mut o = Offsets::new(&j, 1 << 20, 1 << 20, 4096, 3);
            let mut seen: Vec<u64> = (0..256).map(|_| o.next().expect("256 blocks in a pass")).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len() == 256, once, "{generator:?} norandommap={norandommap}: {} distinct", seen.len());
        }
    }

    #[test]
    fn verify_reads_back_every_written_block() {
        let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandWrite, 4);
        j.verify = Verify::Crc32c;
        j.do_verify = true;
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!(r.verified, 256);
        assert_eq!(r.read.ios, 256, "verify reads count as reads, as in fio");
        // fio marks the verify reads' depth too, and verifies at the job's iodepth: the
        // reads fill the queue to 4 as the writes did (1, 2 and 3 once each, then 4;
        // the buckets are 1, 2–3, 4–7).
        assert_eq!(r.depth_level.iter().sum::<u64>(), 512, "{:?}", r.depth_level);
        assert_eq!(r.depth_level[..3], [2, 4, 512 - 6], "{:?}", r.depth_level);
        assert_eq!(r.read.slat.samples(), 256, "an async verify read has a submission latency");
        // A sync job verifies one read at a time: all 512 at depth 1.
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandWrite, 1);
        j.verify = Verify::Crc32c;
        j.do_verify = true;
        let r = run(&j);
        assert_eq!((r.error, r.verified, r.read.ios), (0, 256, 256), "{:?}", r.error_msg);
        assert_eq!(r.depth_level, [512, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn offload_moves_the_size_and_verifies_every_block_with_sync_and_async_workers() {
        for (opts, mode) in [("", Mode::Sync), ("async=emu", Mode::Async), ("async=thrpool", Mode::Async)] {
            let mut j = job("4MiB", opts, mode, Rw::RandWrite, 4);
            j.behaviour.offload = true;
            j.verify = Verify::Crc32c;
            j.do_verify = true;
            let r = run(&j);
            assert_eq!(r.error, 0, "{opts}: {:?}", r.error_msg);
            assert_eq!((r.write.ios, r.write.bytes), (256, 1 << 20), "{opts}");
            assert_eq!(r.verified, 256, "{opts}: every written block reads back right");
            // Every worker runs at depth 1, as fio's; the verify phase runs in the job
            // thread (fio's do_verify queues with td_io_queue, not the workers), at
            // depth 1 for a sync engine and at the job's iodepth (4) for an async one.
            let verify_depths = if mode == Mode::Async { [1, 2, 253] } else { [256, 0, 0] };
            let want = [256 + verify_depths[0], verify_depths[1], verify_depths[2], 0, 0, 0, 0];
            assert_eq!(r.depth_level, want, "{opts}");
            assert_eq!(r.queue.submitted, 256, "{opts}: the workers' engine contexts did the writes");
            assert_eq!(r.write.clat.samples(), 256, "{opts}");
            assert_eq!(r.write.lat.samples(), 256, "{opts}");
            // slat only where the worker's engine is async, as in fio.
            let slat = if mode == Mode::Async { 256 } else { 0 };
            assert_eq!(r.write.slat.samples(), slat, "{opts}");
            // lat counts from the job thread's start, clat from the worker's issue.
            assert!(r.write.lat.stats.mean() >= r.write.clat.stats.mean(), "{opts}");
        }
    }

    #[test]
    fn offload_hands_a_sync_to_a_worker_every_n_writes_and_none_after_the_last() {
        // The counts of the inline test (fdatasync_flushes_every_n_writes_beside_fsync):
        // the same rule, with the writes counted as they are handed on, as fio's
        // io_issues under offload.
        for (opts, mode) in [("", Mode::Sync), ("async=emu", Mode::Async), ("async=thrpool", Mode::Async)] {
            for (fsync, fdatasync, want) in [(0, 4, 63), (8, 0, 31), (8, 12, 31 + 21 - 10), (256, 0, 0), (255, 0, 1)] {
                let mut j = shaped(job("4MiB", opts, mode, Rw::Write, 4), |s| s.fdatasync = fdatasync);
                (j.fsync, j.behaviour.offload) = (fsync, true);
                let r = run(&j);
                let what = format!("{opts} fsync={fsync} fdatasync={fdatasync}");
                assert_eq!((r.error, r.write.ios, r.sync.samples()), (0, 256, want), "{what}: {:?}", r.error_msg);
                // The syncs are no I/Os: the workers' engine contexts did 256 writes.
                assert_eq!(r.queue.submitted, 256, "{what}");
            }
        }
    }

    #[test]
    fn offload_verifies_the_backlog_as_it_goes() {
        for (opts, mode, backlog, batch) in
            [("", Mode::Sync, 16, 0), ("async=emu", Mode::Async, 16, 0), ("async=thrpool", Mode::Async, 16, 4)]
        {
            let mut j = job("4MiB", opts, mode, Rw::RandWrite, 4);
            (j.verify, j.do_verify, j.behaviour.offload) = (Verify::Crc32c, true, true);
            (j.shapes.verify_backlog, j.shapes.verify_backlog_batch) = (backlog, batch);
            let r = run(&j);
            assert_eq!(r.error, 0, "{opts}: {:?}", r.error_msg);
            // Every block is verified once: along the way, and what is left at the end.
            assert_eq!((r.write.ios, r.verified, r.read.ios), (256, 256, 256), "{opts} batch {batch}");
            // The reads along the way are the workers' (fio hands them on like I/Os); at
            // the end at most the last 16 writes' backlog and a batch not yet handed on
            // are left to the job's verify phase.
            let by_workers = r.queue.submitted - 256;
            assert!(
                (256 - 32..=256).contains(&by_workers),
                "{opts} batch {batch}: {by_workers} verify reads by workers"
            );
        }
    }

    #[test]
    fn offload_with_async_workers_has_lat_equal_to_slat_plus_clat() {
        let mut j = job("4MiB", "async=thrpool", Mode::Async, Rw::RandRead, 8);
        j.behaviour.offload = true;
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!(r.read.ios, 256);
        let (l, s, c) = (r.read.lat.stats.sum(), r.read.slat.stats.sum(), r.read.clat.stats.sum());
        assert_eq!(l, s + c, "every lat sample is its slat plus its clat");
    }

    #[test]
    fn offload_stops_at_number_ios_and_time() {
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 4);
        j.behaviour.offload = true;
        j.number_ios = Some(100);
        let r = run(&j);
        assert_eq!((r.error, r.read.ios), (0, 100));
        j.number_ios = None;
        j.time_based = true;
        j.runtime = Some(Duration::from_millis(200));
        let t = std::time::Instant::now();
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert!(r.read.ios > 256, "a time-based job goes over its region more than once: {}", r.read.ios);
        assert!(t.elapsed() < Duration::from_secs(10), "the workers end with the run time");
    }

    /// A 16 MiB random-read job of 4096 I/Os at depth `qd` with fio's reaping options.
    fn reap_job(opts: &str, qd: u32, min: u32, max: u32, low: u32) -> JobResult {
        let mut j = job("16MiB", opts, Mode::Async, Rw::RandRead, qd);
        j.size = Some(16 << 20);
        (j.batch_complete_min, j.batch_complete_max, j.iodepth_low) = (min, max, low);
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!(r.read.ios, N);
        r
    }
    const N: u64 = 4096;

    #[test]
    fn fio_default_policy_reaps_one_and_keeps_the_queue_at_iodepth() {
        for opts in ["async=nil", "async=emu"] {
            for qd in [4u32, 16, 32] {
                let r = reap_job(opts, qd, 1, 1, qd);
                // One completion per reap while running, then the qd-1 left in one batch.
                assert_eq!(r.reaps, N - qd as u64 + 2, "{opts} qd{qd}");
                assert_eq!(r.depth_level.iter().sum::<u64>(), N);
                // Little's law in counts: the queue is at iodepth at every submission once
                // filled, so the mean depth is qd within 5% (exactly known here).
                let want = (qd as u64 * (qd as u64 + 1) / 2 + (N - qd as u64) * qd as u64) as f64 / N as f64;
                let mean = r.depth_sum as f64 / N as f64;
                assert_eq!(mean, want, "{opts} qd{qd}");
                assert!((mean / qd as f64 - 1.0).abs() < 0.05, "{opts} qd{qd}: mean depth {mean}");
                // qd is a power of two: its bucket holds depth qd alone.
                let at_qd = r.depth_level[depth_bucket(qd)];
                assert_eq!(at_qd, N - qd as u64 + 1, "{opts} qd{qd}: {:?}", r.depth_level);
            }
        }
    }

    #[test]
    fn a_larger_complete_max_reaps_bigger_batches() {
        for opts in ["async=nil", "async=emu"] {
            let r = reap_job(opts, 16, 1, 16, 16);
            // Everything is done at once on these interfaces: each reap takes all 16.
            assert_eq!(r.reaps, N / 16, "{opts}");
            assert_eq!(r.complete_level, [0, 0, 0, N / 16, 0, 0, 0], "{opts}");
            assert_eq!(r.depth_sum, (N / 16) * (16 * 17 / 2), "{opts}");
        }
    }

    #[test]
    fn iodepth_low_lets_the_queue_drain_before_refilling() {
        // fio's HOWTO example: iodepth=16, iodepth_low=4: fill to 16, reap one at a time
        // down to 4, fill again. After the first fill every cycle submits at 5..=16.
        let r = reap_job("async=emu", 16, 1, 1, 4);
        let cycles = (N - 16) / 12;
        assert_eq!(r.depth_level, [1, 2, 4 + 3 * cycles, 8 + 8 * cycles, 1 + cycles, 0, 0]);
        // (fio 3.33 reports this job's depths as 4=25.0%, 8=66.7%, 16=8.3%.) Twelve reaps
        // of one after each fill, then the four left as one batch.
        assert_eq!(r.reaps, 12 * (cycles + 1) + 1);
    }

    #[test]
    fn both_complete_bounds_zero_reap_after_every_submission_as_fio_3_33_does() {
        // fio 3.33 waits for one completion after each submission here (backend.c
        // wait_for_completions sets min_evts = 1), so the depth never passes 1.
        let r = reap_job("async=emu", 8, 0, 0, 8);
        assert_eq!(r.depth_level, [N, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.reaps, N);
    }

    #[test]
    fn complete_min_waits_for_that_many() {
        // min 4 of 16: each reap takes exactly 4 on emu (max = min), refilled at once.
        let r = reap_job("async=emu", 16, 4, 4, 16);
        assert_eq!(r.reaps, (N - 16) / 4 + 1 + 1);
        assert_eq!(r.complete_level[1], (N - 16) / 4 + 1);
    }

    #[test]
    fn the_policy_bounds_follow_fio() {
        let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandRead, 16);
        (j.batch_complete_min, j.batch_complete_max, j.iodepth_low) = (1, 1, 0);
        let p = ReapPolicy::new(&j, 16);
        assert_eq!((p.batch(16), p.low, p.polling), ((1, 1), 16, false));
        (j.batch_complete_min, j.batch_complete_max) = (0, 16);
        let p = ReapPolicy::new(&j, 16);
        assert_eq!((p.batch(16), p.batch(3), p.polling), ((1, 16), (1, 3), false));
        (j.batch_complete_min, j.batch_complete_max, j.iodepth_low) = (8, 2, 40);
        let p = ReapPolicy::new(&j, 16);
        assert_eq!((p.batch(16), p.batch(5), p.low), ((8, 8), (5, 5), 16));
        (j.batch_complete_min, j.batch_complete_max) = (0, 0);
        assert!(ReapPolicy::new(&j, 16).polling);
    }

    #[test]
    fn a_region_past_the_end_is_refused_before_any_io() {
        let mut j = job("1MiB", "async=emu", Mode::Async, Rw::Read, 4);
        j.offset = 4096;
        let r = run(&j);
        assert_eq!(r.error, libc::EINVAL);
        assert!(r.error_msg.unwrap().contains("past the end"));
        assert_eq!(r.read.ios, 0);
    }

    /// Tests whose figures are rates over wall-clock time (rate, thinktime, latency
    /// targets) run one at a time: on a 2-CPU machine two of them beside each other take
    /// each other's CPU time and miss their rates (a_rated_job's sibling
    /// rate_ignore_thinktime failed that way). The other tests still run beside them.
    fn timed() -> std::sync::MutexGuard<'static, ()> {
        static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());
        TIMED.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn rated(opts: &str, mode: Mode, qd: u32, load: crate::load::Load, ms: u64) -> JobResult {
        let mut j = job("4MiB", opts, mode, Rw::RandRead, qd);
        j.runtime = Some(Duration::from_millis(ms));
        j.time_based = true;
        j.load = load;
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        r
    }

    #[test]
    fn rate_ignore_thinktime_goes_on_at_the_rate_instead_of_catching_up() {
        let _alone = timed();
        // 2000 IOPS with a 25 ms stall every 25 I/Os (12.5 ms of I/O at the rate). fio's
        // default catches up after each stall: the 25 I/Os go at once, a cycle is the
        // stall, 1000 IOPS. With rate_ignore_thinktime they go at the rate after it: a
        // cycle is 25 + 12 ms (one block less), 676 IOPS, two thirds of that.
        let load = |ignore: bool| crate::load::Load {
            rate_iops: [2000, 0],
            thinktime: Duration::from_millis(25),
            thinktime_blocks: 25,
            rate_ignore_thinktime: ignore,
            ..crate::load::Load::new()
        };
        let ios = |ignore: bool| {
            let r = rated("async=emu", Mode::Sync, 1, load(ignore), 600);
            r.read.ios as f64 / 0.6
        };
        let (catch_up, ignored) = (ios(false), ios(true));
        assert!(
            catch_up > 800.0 && (500.0..0.8 * catch_up).contains(&ignored),
            "catching up {catch_up:.0} IOPS, ignoring {ignored:.0}"
        );
    }

    /// The rate of a run, I/Os per second over its measured time (from its start to its
    /// last completion: a job descheduled at the end on a loaded machine ends early, not slow).
    fn iops_of(r: &JobResult) -> f64 {
        (r.read.ios + r.write.ios) as f64 / (r.runtime_ns as f64 / 1e9)
    }

    #[test]
    fn a_rated_job_issues_at_its_rate() {
        let _alone = timed();
        use crate::load::{Load, RateProcess};
        for (opts, mode, qd) in [("", Mode::Sync, 1), ("async=nil", Mode::Async, 4), ("async=emu", Mode::Async, 8)] {
            // 2000 IOPS for 500 ms: ~1000 I/Os, never more than the rate allows.
            let r = rated(opts, mode, qd, Load { rate_iops: [2000, 0], ..Load::new() }, 500);
            let iops = iops_of(&r);
            assert!((iops / 2000.0 - 1.0).abs() < 0.05, "{opts:?} qd{qd}: {iops} IOPS, want 2000 ± 5%");
            assert!(r.read.ios <= 1001, "{opts:?} qd{qd}: {} I/Os in 500 ms at 2000 IOPS", r.read.ios);
            // rate in bytes: 4 MiB/s of 4 KiB blocks is 1024 IOPS.
            let r = rated(opts, mode, qd, Load { rate: [4 << 20, 0], ..Load::new() }, 500);
            let iops = iops_of(&r);
            assert!((iops / 1024.0 - 1.0).abs() < 0.05, "{opts:?} qd{qd}: {iops} IOPS at 4 MiB/s, want 1024 ± 5%");
        }
        // Poisson arrivals at the same mean rate: ±10% (the count of a Poisson process of
        // mean 1000 has a standard deviation of 32).
        let r =
            rated("", Mode::Sync, 1, Load { rate_iops: [2000, 0], process: RateProcess::Poisson, ..Load::new() }, 500);
        let iops = iops_of(&r);
        assert!((iops / 2000.0 - 1.0).abs() < 0.10, "poisson: {iops} IOPS, want 2000 ± 10%");
    }

    #[test]
    fn an_offloaded_rated_job_issues_at_its_rate() {
        let _alone = timed();
        use crate::load::Load;
        for (opts, mode) in [("", Mode::Sync), ("async=emu", Mode::Async)] {
            // The job's thread paces the handoffs: 2000 IOPS for 500 ms over 8 workers.
            let mut j = job("4MiB", opts, mode, Rw::RandRead, 8);
            j.runtime = Some(Duration::from_millis(500));
            j.time_based = true;
            j.load = Load { rate_iops: [2000, 0], ..Load::new() };
            j.behaviour.offload = true;
            let r = run(&j);
            assert_eq!(r.error, 0, "{:?}", r.error_msg);
            let iops = iops_of(&r);
            assert!((iops / 2000.0 - 1.0).abs() < 0.05, "{opts:?}: {iops} IOPS, want 2000 ± 5%");
            assert!(r.read.ios <= 1001, "{opts:?}: {} I/Os in 500 ms at 2000 IOPS", r.read.ios);
        }
    }

    #[test]
    fn a_mixed_job_keeps_each_directions_rate() {
        let _alone = timed();
        use crate::load::Load;
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRw, 1);
        (j.runtime, j.time_based) = (Some(Duration::from_millis(500)), true);
        j.load = Load { rate_iops: [1000, 400], ..Load::new() };
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        let secs = r.runtime_ns as f64 / 1e9;
        let (rd, wr) = (r.read.ios as f64 / secs, r.write.ios as f64 / secs);
        assert!((rd / 1000.0 - 1.0).abs() < 0.05, "{rd} reads/s, want 1000 ± 5%");
        assert!((wr / 400.0 - 1.0).abs() < 0.05, "{wr} writes/s, want 400 ± 5%");
    }

    fn logged(opts: &str, mode: Mode, qd: u32, load: crate::load::Load, ios: u64) -> crate::iolog::JobLogs {
        let mut j = job("4MiB", opts, mode, Rw::RandRead, qd);
        j.number_ios = Some(ios);
        j.load = load;
        j.logs = crate::iolog::LogOpts { lat: Some(String::new()), ..Default::default() };
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        r.logs.expect("the job writes logs")
    }

    #[test]
    fn thinktime_stalls_after_every_thinktime_blocks_ios() {
        let _alone = timed();
        use crate::load::Load;
        // 20 ms: far above what a descheduled test thread on a loaded 2-core machine
        // loses between two I/Os of nil-speed emulation, so that only stalls show as gaps.
        let load = Load { thinktime: Duration::from_millis(20), thinktime_blocks: 4, ..Load::new() };
        let logs = logged("", Mode::Sync, 1, load.clone(), 40);
        let lat = &logs.logs[0];
        assert_eq!(lat.kind, crate::iolog::LogKind::Lat);
        assert_eq!(lat.entries.len(), 40);
        // The I/Os after each stall complete at least thinktime (20 ms) after those before
        // it: their ms stamps are at least 20 apart (a floor of times ≥ 20 ms apart).
        for k in (4..40).step_by(4) {
            let gap = lat.entries[k].time_ms - lat.entries[k - 1].time_ms;
            assert!(gap >= 20, "I/O {k} came {gap} ms after I/O {}", k - 1);
        }
        // At qd 4 a stall first waits for the I/Os in flight, so each covers 4 to 7
        // completions: 40 I/Os make 5 to 10 stalls, each a gap of at least 20 ms.
        let logs = logged("async=emu", Mode::Async, 4, load, 40);
        let t: Vec<u64> = logs.logs[0].entries.iter().map(|e| e.time_ms).collect();
        let stalls = t.windows(2).filter(|w| w[1] - w[0] >= 20).count();
        assert!((5..=10).contains(&stalls), "{stalls} stalls: {t:?}");
    }

    #[test]
    fn per_io_logs_hold_every_io_with_lat_equal_to_slat_plus_clat() {
        let logs = logged("async=emu", Mode::Async, 4, crate::load::Load::new(), 100);
        let kinds: Vec<_> = logs.logs.iter().map(|l| l.kind).collect();
        use crate::iolog::LogKind;
        assert_eq!(kinds, [LogKind::Lat, LogKind::Slat, LogKind::Clat]);
        let [lat, slat, clat] = [0, 1, 2].map(|i| &logs.logs[i].entries);
        assert_eq!((lat.len(), slat.len(), clat.len()), (100, 100, 100));
        for i in 0..100 {
            assert_eq!(lat[i].value, slat[i].value + clat[i].value, "entry {i}");
            assert_eq!((lat[i].ddir, lat[i].bs), (0, 4096));
            assert_eq!(lat[i].offset % 4096, 0);
        }
        assert!(lat.windows(2).all(|w| w[0].time_ms <= w[1].time_ms), "times never go back");
        // A sync job has no slat log entries (fio measures no slat there).
        let sync = logged("", Mode::Sync, 1, crate::load::Load::new(), 10);
        assert_eq!(sync.logs.iter().map(|l| l.entries.len()).collect::<Vec<_>>(), [10, 0, 10]);
    }

    fn targeted(target: Duration, pct: f64) -> (JobResult, Duration) {
        let mut j = job("16MiB", "async=nil", Mode::Async, Rw::RandRead, 16);
        (j.runtime, j.time_based) = (Some(Duration::from_secs(20)), true);
        j.load = crate::load::Load {
            latency_target: Some(target),
            latency_window: Duration::from_millis(20),
            latency_percentile: pct,
            ..crate::load::Load::new()
        };
        let t0 = std::time::Instant::now();
        let r = run(&j);
        (r, t0.elapsed())
    }

    #[test]
    fn latency_target_searches_the_depth_and_ends_after_the_final_window() {
        let _alone = timed();
        // nil completes at once: every depth meets 1 s, so the search doubles up to
        // iodepth (1, 2, 4, 8, 16), stays there, runs one final window and ends the job
        // long before its 20 s run time.
        let (r, took) = targeted(Duration::from_secs(1), 100.0);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!(r.latency_depth, 16);
        assert!(took < Duration::from_secs(10), "the search ran {took:?}");
        // The statistics are of the final window at depth 16 only.
        assert!(r.read.ios > 0 && r.runtime_ns < 1_000_000_000, "{} I/Os in {} ns", r.read.ios, r.runtime_ns);
        // Once settled the queue fills from empty (after the quiesce) once, then stays at 16.
        assert_eq!(r.depth_level[..4], [1, 2, 4, 8], "depths 1 to 15 once: {:?}", r.depth_level);
    }

    #[test]
    fn latency_target_missed_at_depth_one_fails_the_job() {
        let _alone = timed();
        let (r, _) = targeted(Duration::from_nanos(1), 100.0);
        assert_eq!(r.error, libc::ETIMEDOUT, "{:?}", r.error_msg);
        assert!(r.error_msg.unwrap().contains("latency_target"));
    }

    #[test]
    fn an_io_over_max_latency_fails_the_job_with_etimedout_in_its_direction_only() {
        use crate::load::Load;
        // Every I/O takes more than 1 ns; none takes 60 s.
        let with = |rw: Rw, mode: Mode, max: [u64; 3]| {
            let opts = if mode == Mode::Async { "async=emu" } else { "" };
            let mut j = job("4MiB", opts, mode, rw, 4);
            j.number_ios = Some(64);
            j.load = Load { max_latency: max, ..Load::new() };
            run(&j)
        };
        for mode in [Mode::Sync, Mode::Async] {
            let r = with(Rw::RandRead, mode, [1; 3]);
            assert_eq!(r.error, libc::ETIMEDOUT, "{mode:?}: {:?}", r.error_msg);
            let msg = r.error_msg.unwrap();
            assert!(msg.starts_with("max_latency: the read of 4096 bytes at offset "), "{msg}");
            assert!(msg.ends_with("more than the 1 ns allowed"), "{msg}");
            assert!(r.read.ios < 64, "{mode:?}: the job ended at the first late I/O, not after {}", r.read.ios);
            let r = with(Rw::RandRead, mode, [60_000_000_000; 3]);
            assert_eq!((r.error, r.read.ios), (0, 64), "{mode:?}: {:?}", r.error_msg);
            // Reads unlimited (0), writes at 1 ns: only the writes fail.
            let r = with(Rw::RandRead, mode, [0, 1, 1]);
            assert_eq!((r.error, r.read.ios), (0, 64), "{mode:?}: {:?}", r.error_msg);
            let r = with(Rw::RandWrite, mode, [0, 1, 1]);
            assert_eq!(r.error, libc::ETIMEDOUT, "{mode:?}: {:?}", r.error_msg);
            assert!(r.error_msg.unwrap().starts_with("max_latency: the write of 4096 bytes at offset "));
        }
        // With disable_lat there is no total latency to hold against it (fio checks it
        // where it records one).
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        j.number_ios = Some(16);
        j.load = Load { max_latency: [1; 3], ..Load::new() };
        j.behaviour.disable_lat = true;
        let r = run(&j);
        assert_eq!((r.error, r.read.ios), (0, 16), "{:?}", r.error_msg);
    }

    #[test]
    fn bwavgtime_and_iopsavgtime_set_each_statistics_window() {
        let _alone = timed();
        use crate::load::Load;
        // 1 s at 2000 IOPS: bandwidth over 100 ms windows (9 or 10 close; fewer where a
        // loaded machine keeps the job's thread off a CPU past a window's end), IOPS over
        // 250 ms (3 or 4); by default both over 500 ms (1 or 2).
        let run_with = |bw: Option<u32>, iops: Option<u32>| {
            let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
            (j.runtime, j.time_based) = (Some(Duration::from_secs(1)), true);
            j.load = Load { rate_iops: [2000, 0], ..Load::new() };
            (j.logs.bw_avg_msec, j.logs.iops_avg_msec) = (bw, iops);
            let r = run(&j);
            assert_eq!(r.error, 0, "{:?}", r.error_msg);
            (r.read.bw_samples.samples(), r.read.iops_samples.samples())
        };
        let (bw, iops) = run_with(Some(100), Some(250));
        assert!((5..=10).contains(&bw) && (1..=4).contains(&iops) && bw > iops, "bw {bw} and iops {iops} samples");
        let (bw, iops) = run_with(None, None);
        assert!((1..=2).contains(&bw) && (1..=2).contains(&iops), "bw {bw} and iops {iops} samples by default");
    }

    #[test]
    fn a_job_below_rate_iops_min_fails_after_the_settling_time() {
        let _alone = timed();
        use crate::load::Load;
        // thinktime 5 ms after every I/O: under 200 IOPS, against a minimum of 500.
        let load = Load {
            thinktime: Duration::from_millis(5),
            rate_iops_min: [500, 0],
            rate_cycle: Duration::from_millis(200),
            ..Load::new()
        };
        let mut j = job("4MiB", "", Mode::Sync, Rw::RandRead, 1);
        (j.runtime, j.time_based, j.load) = (Some(Duration::from_secs(10)), true, load);
        let t0 = std::time::Instant::now();
        let r = run(&j);
        let took = t0.elapsed();
        assert_eq!(r.error, libc::EIO, "{:?}", r.error_msg);
        assert!(r.error_msg.as_deref().unwrap().starts_with("rate_iops_min=500 not met, got "), "{:?}", r.error_msg);
        assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(5), "failed after {took:?}");
    }

    fn shaped(mut j: Job, f: impl FnOnce(&mut crate::shapes::Shapes)) -> Job {
        f(&mut j.shapes);
        j
    }

    #[test]
    fn bssplit_mixes_block_sizes_in_proportion_sync_and_async() {
        use crate::shapes::BlockSizes;
        for (mode, qd) in [(Mode::Sync, 1), (Mode::Async, 4)] {
            let mut j = shaped(job("4MiB", "async=emu", mode, Rw::RandWrite, qd), |s| {
                s.bs[1] = BlockSizes::Split(vec![(4096, 75), (16384, 25)]);
            });
            j.behaviour.loops = 32;
            let r = run(&j);
            assert_eq!(r.error, 0, "{:?}", r.error_msg);
            // n I/Os of 4k or 16k moving B bytes: (B − 4k·n) / 12k of them were 16k.
            let (n, b) = (r.write.ios, r.write.bytes);
            let big = (b - 4096 * n) / 12288;
            assert_eq!(4096 * (n - big) + 16384 * big, b, "only 4k and 16k I/Os");
            let share = big as f64 / n as f64;
            assert!((share - 0.25).abs() < 0.03, "{mode:?}: 16k share {share} of {n}");
        }
    }

    #[test]
    fn a_write_hole_skips_that_much_after_each_io() {
        let s = scratch("hole");
        let path = s.file("f", 1 << 20);
        let mut j = shaped(job(&path, "", Mode::Sync, Rw::Write, 1), |s| s.rw_modifier = Some(4096));
        j.number_ios = Some(128);
        let r = run(&j);
        assert_eq!((r.error, r.write.ios), (0, 128), "{:?}", r.error_msg);
        let data = std::fs::read(&path).unwrap();
        for (i, block) in data.chunks(4096).enumerate() {
            let zero = block.iter().all(|&b| b == 0);
            assert_eq!(zero, i % 2 == 1, "block {i}: written blocks alternate with 4k holes");
        }
    }

    #[test]
    fn offset_increment_moves_each_instance_on_and_refuses_one_past_the_end() {
        let s = scratch("incr");
        let path = s.file("f", 1 << 20);
        let mut j = shaped(job(&path, "", Mode::Sync, Rw::Write, 1), |s| s.offset_increment = 512 << 10);
        j.size = Some(256 << 10);
        let dev = Device::open(&j.filename, &j.opts).unwrap();
        for i in 0..2 {
            let r = run_job(&j, i, &dev, &Progress::default());
            assert_eq!((r.error, r.write.bytes), (0, 256 << 10), "{:?}", r.error_msg);
        }
        let data = std::fs::read(&path).unwrap();
        for (i, block) in data.chunks(4096).enumerate() {
            let written = block.iter().any(|&b| b != 0);
            assert_eq!(written, i < 64 || (128..192).contains(&i), "block {i}");
        }
        let r = run_job(&j, 2, &dev, &Progress::default());
        assert_eq!(r.error, libc::EINVAL);
        let msg = r.error_msg.unwrap();
        assert!(msg.contains("offset_increment=524288") && msg.contains("instance 2"), "{msg}");
        // An increment past the end of u64 is refused the same way, not an overflow.
        j.shapes.offset_increment = u64::MAX / 2;
        let r = run_job(&j, 3, &dev, &Progress::default());
        assert!(r.error == libc::EINVAL && r.error_msg.unwrap().contains("instance 3"));
    }

    #[test]
    fn fdatasync_flushes_every_n_writes_beside_fsync() {
        for (mode, fsync, fdatasync, want) in
            [(Mode::Sync, 0, 4, 63), (Mode::Async, 0, 4, 63), (Mode::Sync, 8, 0, 31), (Mode::Sync, 8, 12, 31 + 21 - 10)]
        {
            let mut j = shaped(job("4MiB", "async=emu", mode, Rw::Write, 1), |s| s.fdatasync = fdatasync);
            j.fsync = fsync;
            // 256 writes; fio syncs before the next write, so the 256th has none; where
            // both are due (every 24th write) fio syncs once (its last_was_sync rule):
            // 31 + 21 − 10 syncs for fsync=8 and fdatasync=12.
            let r = run(&j);
            assert_eq!((r.error, r.sync.samples()), (0, want), "{mode:?} fsync={fsync} fdatasync={fdatasync}");
        }
    }

    #[test]
    fn a_skewed_distribution_hits_few_blocks_often() {
        use crate::dist::Dist;
        let mut j = shaped(job("4MiB", "", Mode::Sync, Rw::RandWrite, 1), |s| {
            s.dist[1] = Dist::Zoned(vec![crate::dist::Zone { access: 100, size: 10 }]);
        });
        j.verify = Verify::Crc32c;
        j.do_verify = true;
        let r = run(&j);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        // Every write went to the first 10% of the 256 blocks: at most 25 distinct ones.
        assert!(r.verified <= 25 && r.verified > 10, "{} blocks written", r.verified);
        assert_eq!(r.write.ios, 256);
    }

    #[test]
    fn every_verify_method_reads_back_what_it_wrote() {
        for kind in [Verify::Crc64, Verify::Xxhash, Verify::Sha256, Verify::Pattern, Verify::Md5, Verify::Meta] {
            let mut j = job("4MiB", "async=emu", Mode::Async, Rw::RandWrite, 4);
            j.verify = kind;
            j.do_verify = true;
            j.shapes.verify_pattern = (kind == Verify::Pattern).then(|| vec![0xA5, 0x5A, 0x01]);
            let r = run(&j);
            assert_eq!((r.error, r.verified), (0, 256), "{kind:?}: {:?}", r.error_msg);
        }
    }

    #[test]
    fn verify_pattern_finds_a_block_that_is_not_the_pattern() {
        let s = scratch("pattern");
        let path = s.file("f", 1 << 20);
        let mut j = job(&path, "", Mode::Sync, Rw::Read, 1);
        j.verify = Verify::Pattern;
        j.do_verify = true;
        j.shapes.verify_pattern = Some(vec![0xAB]);
        std::fs::write(&path, vec![0xABu8; 1 << 20]).unwrap();
        let r = run(&j);
        assert_eq!((r.error, r.verified), (0, 256), "{:?}", r.error_msg);
        let mut data = vec![0xABu8; 1 << 20];
        data[5 * 4096 + 17] = 0xAC;
        std::fs::write(&path, data).unwrap();
        let r = run(&j);
        assert_eq!(r.error, libc::EILSEQ);
        let msg = r.error_msg.unwrap();
        assert!(msg.contains("offset 20480") && msg.contains("byte 17: read 0xac"), "{msg}");
    }

    #[test]
    fn verify_backlog_checks_writes_as_it_goes() {
        for (mode, qd, backlog, batch) in [(Mode::Sync, 1, 16, 0), (Mode::Async, 4, 16, 0), (Mode::Sync, 1, 16, 4)] {
            let mut j = job("4MiB", "async=emu", mode, Rw::Write, qd);
            j.verify = Verify::Crc32c;
            j.do_verify = true;
            j.shapes.verify_backlog = backlog;
            j.shapes.verify_backlog_batch = batch;
            let r = run(&j);
            assert_eq!(r.error, 0, "{:?}", r.error_msg);
            // Every block is verified once: along the way, and what is left at the end.
            assert_eq!((r.write.ios, r.verified, r.read.ios), (256, 256, 256), "{mode:?} batch {batch}");
        }
        // As in fio, do_verify=0 logs no writes to verify: no backlog either.
        let mut j = job("4MiB", "", Mode::Sync, Rw::Write, 1);
        (j.verify, j.do_verify, j.shapes.verify_backlog) = (Verify::Crc32c, false, 16);
        let r = run(&j);
        assert_eq!((r.error, r.verified, r.read.ios), (0, 0, 0), "{:?}", r.error_msg);
    }

    /// Runs `rw` over a 1 MiB file full of 0xEE and returns the job's result and the
    /// file's 4 KiB blocks that read back as zeroes.
    fn trim_file(test: &str, rw: Rw, mode: Mode, number_ios: Option<u64>) -> (JobResult, Vec<usize>) {
        let s = scratch(test);
        let path = s.file("f", 1 << 20);
        std::fs::write(&path, vec![0xEEu8; 1 << 20]).unwrap();
        let mut j = job(&path, "async=emu", mode, rw, if mode == Mode::Sync { 1 } else { 4 });
        j.number_ios = number_ios;
        let r = run(&j);
        let data = std::fs::read(&path).unwrap();
        let zero = data.chunks(4096).enumerate().filter(|(_, b)| b.iter().all(|&x| x == 0)).map(|(i, _)| i).collect();
        (r, zero)
    }

    #[test]
    fn trimmed_ranges_of_a_file_read_back_as_zeroes() {
        // The library trims a file by punching a hole: the range then reads as zeroes.
        for mode in [Mode::Sync, Mode::Async] {
            let (r, zero) = trim_file("trim", Rw::Trim, mode, None);
            assert_eq!(r.error, 0, "{:?}", r.error_msg);
            assert_eq!((r.trim.ios, r.trim.bytes, r.read.ios, r.write.ios), (256, 1 << 20, 0, 0));
            assert_eq!(r.trim.clat.samples(), 256, "trims are timed as fio times them");
            assert_eq!(zero.len(), 256, "{mode:?}: every trimmed block reads back as zeroes");
            // randtrim: with the random map, 40 trims hit 40 different blocks, and only those.
            let (r, zero) = trim_file("randtrim", Rw::RandTrim, mode, Some(40));
            assert_eq!((r.error, r.trim.ios), (0, 40), "{:?}", r.error_msg);
            assert_eq!(zero.len(), 40, "{mode:?}");
            assert!(zero.windows(2).any(|w| w[1] != w[0] + 1), "{mode:?}: random blocks {zero:?}");
        }
    }

    #[test]
    fn trimwrite_trims_then_writes_each_block_of_the_region() {
        let (r, zero) = trim_file("trimwrite", Rw::TrimWrite, Mode::Sync, None);
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        assert_eq!((r.trim.ios, r.write.ios, r.write.bytes), (256, 256, 1 << 20));
        assert!(zero.is_empty(), "every trimmed block was written again: {zero:?}");
    }
}
