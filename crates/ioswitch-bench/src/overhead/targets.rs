//! The library-overhead targets of docs/BENCHMARKS.md: what ioswitch itself costs per
//! I/O, each figure against its target ([`TARGETS`]). Run by
//! `cargo bench -p ioswitch --bench overhead -- ARGS` and by
//! `ioswitch bench overhead targets ARGS` (the same tool, the same arguments).
//!
//! Reports, in one run:
//! - ns per submit + poke + callback cycle on the `nil` interface at qd1 and qd16 (qd16:
//!   submit 16, then one poke reaps them), wall clock and thread CPU time, next to a
//!   "floor": the same loop through a minimal queue written here (no checks, no trait
//!   object), a reference for what the API shape itself costs;
//! - IOPS of the `psync`, `io_uring` and `libaio` interfaces through ioswitch against a
//!   plain loop on the same syscalls without ioswitch ("raw"), 4 KiB random reads on a
//!   /dev/shm file and on a disk file opened with O_DIRECT, qd1 and qd16 (psync is
//!   synchronous: qd1 only). Both sides read the same file, the same xorshift offset
//!   sequence and the same number of I/Os, and keep `qd` reads in flight the same way
//!   (submit every free slot, one wait for at least one completion, reap all there are).
//!   Runs are interleaved in pairs (A B, B A, …) with the same seed within a pair; each
//!   side is reported as median [min–max] with the ratio ioswitch/raw, per pair and of
//!   the medians, and the thread CPU time per I/O (robust against other load);
//! - user-space instructions per I/O of both sides (`valgrind --tool=callgrind`, the
//!   difference between runs of N and 2N I/Os, so setup cancels); the profiles are kept
//!   in the caller's [`Invocation::profiles`] folder (`target/overhead-callgrind/` for the
//!   cargo bench) for `callgrind_annotate`.
//!
//! ```text
//! ARGS: [--quick] [--nil-only] [--only PATTERN,…] [--reps N] [--ios N] [--shm FILE]
//!       [--disk FILE] [--keep-files] [--no-callgrind] [--once ioswitch|raw] [--cpu N]
//! ```
//! A configuration is named `nil-qd1`, `shm-io_uring-qd16`, `disk-psync-qd1`, …; a
//! pattern selects the names equal to it or starting with it and a `-` (`nil`, `shm`,
//! `disk-libaio`). `--once ioswitch|raw` runs each selected configuration once, on one
//! side (raw of nil: the floor), without warm-up: what the callgrind runs execute, e.g.
//! `valgrind --tool=callgrind <bench binary> --once ioswitch --only nil-qd1 --ios 100000`
//! (the callgrind runs re-enter the tool through [`Invocation::reenter`]).
//! `--cpu N` pins the bench (every side, and the callgrind runs it starts) to CPU N, so
//! that both sides of every pair run on the same CPU and none migrates mid-run; without
//! it the scheduler places the thread. The data files (256 MiB in /dev/shm, 1 GiB in
//! /var/tmp, which must be on a disk file system; by default named after the process, so
//! that runs at the same time do not share them, or the files `--shm`/`--disk` name,
//! which are reused when they have the size) are written once and removed at the end
//! unless `--keep-files`.

use super::raw::{open_raw, thread_cpu_ns, AioContext, AlignedBuf, IoEvent, Iocb, IOCB_CMD_PREAD};
use crate::error::LoopError;
use crate::error::{PinError, TargetsError};
use ioswitch::{Buffer, Cmd, Completion, Data, Device, Queue, Status};
use std::collections::VecDeque;
use std::ffi::{CString, OsString};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Bytes per I/O.
const BS: u64 = 4096;
/// Size of the /dev/shm file (a power of two of 4 KiB blocks).
const SHM_BYTES: u64 = 256 << 20;
/// Size of the disk file (a power of two of 4 KiB blocks).
const DISK_BYTES: u64 = 1 << 30;
/// The nil device: a small ramdisk (nil moves no data; only the range checks look at it).
const NIL_URI: &str = "1MiB";
/// The targets every run is judged against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Targets {
    /// Most wall-clock ns of one nil submit + poke + callback cycle (median of the runs),
    /// after xNVMe's measured cost.
    pub nil_cycle_ns: f64,
    /// Least IOPS ratio ioswitch / raw loop of an interface (median of the pairs).
    pub ratio: f64,
}

/// The targets of docs/BENCHMARKS.md.
pub const TARGETS: Targets = Targets { nil_cycle_ns: 20.0, ratio: 0.97 };

/// How the running program enters this tool: what the callgrind runs execute, and what the
/// usage text names.
#[derive(Clone, Debug)]
pub struct Invocation {
    /// The executable and the leading arguments that run this tool (the cargo bench binary
    /// alone; the `ioswitch` binary with `bench overhead targets`).
    pub reenter: Vec<OsString>,
    /// Where the callgrind profiles are kept.
    pub profiles: PathBuf,
    /// The command line as a user types it, for the usage text.
    pub name: String,
}

// ---------------------------------------------------------------------------------------
// Configurations

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Shm,
    Disk,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Iface {
    Psync,
    IoUring,
    Libaio,
}

impl Iface {
    fn name(self) -> &'static str {
        match self {
            Iface::Psync => "psync",
            Iface::IoUring => "io_uring",
            Iface::Libaio => "libaio",
        }
    }
}

#[derive(Clone, Copy)]
struct Config {
    place: Place,
    iface: Iface,
    qd: u32,
}

impl Config {
    fn name(&self) -> String {
        let place = match self.place {
            Place::Shm => "shm",
            Place::Disk => "disk",
        };
        format!("{place}-{}-qd{}", self.iface.name(), self.qd)
    }
}

fn io_configs() -> Vec<Config> {
    let mut v = Vec::new();
    for place in [Place::Shm, Place::Disk] {
        v.push(Config { place, iface: Iface::Psync, qd: 1 });
        for iface in [Iface::IoUring, Iface::Libaio] {
            for qd in [1, 16] {
                v.push(Config { place, iface, qd });
            }
        }
    }
    v
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Ioswitch,
    Raw,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ioswitch => "ioswitch",
            Side::Raw => "raw",
        }
    }
}

// ---------------------------------------------------------------------------------------
// Arguments

struct Args {
    quick: bool,
    only: Vec<String>,
    reps: Option<usize>,
    ios: Option<u64>,
    once: Option<Side>,
    shm: PathBuf,
    disk: PathBuf,
    keep_files: bool,
    callgrind: bool,
    cpu: Option<usize>,
    /// `--help`: print [`help`] and run nothing.
    help: bool,
}

impl Args {
    /// Reads the arguments; an error is the usage text with what was wrong.
    fn parse(inv: &Invocation, args: &[String]) -> Result<Args, TargetsError> {
        let mut a = Args {
            quick: false,
            only: Vec::new(),
            reps: None,
            ios: None,
            once: None,
            // Per process: two runs at once (two worktrees, two engineers) must not write,
            // reuse or remove each other's file.
            shm: PathBuf::from(format!("/dev/shm/ioswitch-overhead.{}.dat", std::process::id())),
            disk: PathBuf::from(format!("/var/tmp/ioswitch-overhead.{}.dat", std::process::id())),
            keep_files: false,
            callgrind: true,
            cpu: None,
            help: false,
        };
        let usage = |why: &str| usage(inv, why);
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut val = |what: &str| it.next().ok_or_else(|| usage(&format!("{arg} needs {what}")));
            match arg.as_str() {
                "--quick" => a.quick = true,
                "--nil-only" => a.only.push("nil".into()),
                "--only" => a.only.extend(val("a pattern")?.split(',').map(str::to_string)),
                "--reps" => a.reps = Some(val("a number")?.parse().map_err(|_| usage("bad --reps"))?),
                "--ios" => a.ios = Some(val("a number")?.parse().map_err(|_| usage("bad --ios"))?),
                "--once" => {
                    a.once = Some(match val("ioswitch or raw")?.as_str() {
                        "ioswitch" => Side::Ioswitch,
                        "raw" => Side::Raw,
                        _ => return Err(usage("--once takes ioswitch or raw")),
                    })
                }
                "--shm" => a.shm = val("a file")?.into(),
                "--disk" => a.disk = val("a file")?.into(),
                "--keep-files" => a.keep_files = true,
                "--no-callgrind" => a.callgrind = false,
                "--cpu" => {
                    let v = val("a CPU number")?;
                    a.cpu = Some(v.parse().map_err(|_| usage(&format!("--cpu {v:?}: not a CPU number")))?)
                }
                "-h" | "--help" => {
                    a.help = true;
                    return Ok(a);
                }
                _ => return Err(usage(&format!("unknown argument {arg:?}"))),
            }
        }
        Ok(a)
    }

    fn selected(&self, name: &str) -> bool {
        self.only.is_empty()
            || self.only.iter().any(|p| name == p || (name.starts_with(p.as_str()) && name[p.len()..].starts_with('-')))
    }

    fn reps(&self) -> usize {
        self.reps.unwrap_or(if self.quick { 5 } else { 21 })
    }

    /// I/Os per timed run.
    fn ios_for(&self, c: Option<&Config>) -> u64 {
        if let Some(n) = self.ios {
            return n;
        }
        let full = match c {
            None => 2_000_000,
            Some(c) if c.place == Place::Disk && c.qd == 1 => 5_000,
            Some(c) if c.place == Place::Disk => 20_000,
            Some(_) => 100_000,
        };
        if self.quick {
            full / 5
        } else {
            full
        }
    }
}

/// What `--help` prints: every argument with what it does, its unit and its default.
pub fn help(inv: &Invocation) -> String {
    let shm = SHM_BYTES >> 20;
    let disk = DISK_BYTES >> 30;
    format!(
        "The library-overhead targets of docs/BENCHMARKS.md: what ioswitch itself costs per I/O,
each figure against its target (nil cycle at most {nil} ns; IOPS ratio ioswitch / raw loop
at least {ratio}). 4 KiB random reads on a /dev/shm file and on a disk file opened with
O_DIRECT, each interface against a plain loop of the same syscalls, interleaved in pairs;
then user-space instructions per I/O of both sides under valgrind --tool=callgrind.

usage: {tool} [ARGS]

  --quick           a shorter run: 5 repetitions per side and a fifth of the I/Os
  --only PATTERN,…  run only these configurations (default: all). Names: nil-qd1,
                    nil-qd16, shm-psync-qd1, shm-io_uring-qd1, shm-io_uring-qd16,
                    shm-libaio-qd1, shm-libaio-qd16, and the same with disk-; a pattern
                    selects the names equal to it or starting with it and a '-' (nil,
                    shm, disk-libaio)
  --nil-only        the same as --only nil
  --reps N          timed runs per side, interleaved in pairs (default 21; 5 with --quick)
  --ios N           I/Os per timed run (default: 2000000 for nil, 100000 on /dev/shm,
                    20000 on the disk at qd16, 5000 at qd1; a fifth with --quick)
  --shm FILE        the /dev/shm data file ({shm} MiB; default
                    /dev/shm/ioswitch-overhead.PID.dat; reused when it has that size)
  --disk FILE       the disk data file ({disk} GiB, on a disk file system, not tmpfs; default
                    /var/tmp/ioswitch-overhead.PID.dat; reused when it has that size)
  --keep-files      keep the data files at the end (removed by default)
  --no-callgrind    leave out the instruction counts (valgrind is needed otherwise)
  --cpu N           pin every side, and the callgrind runs, to CPU N (default: not pinned)
  --once ioswitch|raw
                    run each selected configuration once on one side, without warm-up
                    (raw of nil: the floor): what the callgrind runs execute
  -h, --help        this text

Example:
  {tool} --quick --only nil,shm --cpu 1 --shm /dev/shm/my-overhead.dat
",
        nil = TARGETS.nil_cycle_ns,
        ratio = TARGETS.ratio,
        tool = inv.name,
    )
}

/// The refusal of the arguments for `why`, with the usage text.
fn usage(inv: &Invocation, why: &str) -> TargetsError {
    TargetsError::Usage { tool: inv.name.clone(), why: why.into() }
}

// ---------------------------------------------------------------------------------------
// Shared pieces

/// xorshift64: the offset sequence, identical on both sides for the same seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    #[inline(always)]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One timed run.
#[derive(Clone, Copy)]
struct Run {
    ios: u64,
    secs: f64,
    /// CPU time of the running thread (user + system): what the I/O loop itself cost,
    /// without the time other processes on this shared machine took from it.
    cpu: f64,
    syscalls: u64,
}

impl Run {
    fn iops(&self) -> f64 {
        self.ios as f64 / self.secs
    }
    fn ns_per_io(&self) -> f64 {
        self.secs * 1e9 / self.ios as f64
    }
    fn cpu_ns_per_io(&self) -> f64 {
        self.cpu * 1e9 / self.ios as f64
    }
}

/// Wall-clock and thread CPU time of one run.
struct Clock {
    wall: Instant,
    cpu_ns: u64,
}

impl Clock {
    fn start() -> Clock {
        Clock { cpu_ns: thread_cpu_ns(), wall: Instant::now() }
    }
    /// (wall seconds, CPU seconds) since start.
    fn stop(&self) -> (f64, f64) {
        let wall = self.wall.elapsed().as_secs_f64();
        (wall, (thread_cpu_ns() - self.cpu_ns) as f64 * 1e-9)
    }
}

/// A side of a comparison, set up once and run many times.
trait Runner {
    fn run(&mut self, ios: u64, seed: u64) -> Run;
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

fn fs_name(path: &Path) -> String {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return "?".into() };
    // SAFETY: statfs is plain data; all-zero is a valid value.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid path and s a valid out pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return "?".into();
    }
    match s.f_type as u64 {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        m => format!("fs magic {m:#x}"),
    }
}

/// Makes `path` a fully written file of `size` bytes (no holes: a hole would read as
/// zeroes without touching the disk), unless it already is one.
fn make_file(path: &Path, size: u64) -> io::Result<bool> {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    if let Ok(md) = fs::metadata(path) {
        if md.is_file() && md.len() == size && md.blocks() * 512 >= size {
            return Ok(false);
        }
    }
    let mut f = fs::File::create(path)?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut rng = Rng::new(42);
    for _ in 0..size / chunk.len() as u64 {
        for w in chunk.chunks_exact_mut(8) {
            w.copy_from_slice(&rng.next().to_le_bytes());
        }
        f.write_all(&chunk)?;
    }
    f.sync_all()?;
    Ok(true)
}

// ---------------------------------------------------------------------------------------
// nil: submit + poke + callback

/// A completion's data back into the slot it was taken from. `submit` left the slot
/// empty (`std::mem::take`), so there is nothing to drop: the old value is forgotten
/// rather than dropped, which spares every loop a drop check (and the copy of the new
/// value the compiler keeps in case that drop panics), a cost of the loop, not of the
/// library. Used by the ioswitch loops and the floor alike.
#[inline(always)]
fn put_back(slot: &mut Data, data: Data) {
    debug_assert!(matches!(slot, Data::None), "a slot held data while its command was out");
    std::mem::forget(std::mem::replace(slot, data));
}

fn nil_queue(qd: u32) -> Result<Queue, ioswitch::Error> {
    let dev = Device::open(NIL_URI, &"async=nil".parse()?)?;
    dev.queue(qd)
}

struct NilRunner {
    q: Queue,
    qd: u32,
    nsid: u32,
    slots: Vec<Data>,
}

impl NilRunner {
    fn new(qd: u32) -> Result<NilRunner, ioswitch::Error> {
        let q = nil_queue(qd)?;
        let dev = q.device().clone();
        let slots = (0..qd).map(|_| dev.alloc(BS as usize).map(Data::One)).collect::<Result<Vec<_>, _>>()?;
        Ok(NilRunner { nsid: dev.ident().nsid, q, qd, slots })
    }
}

impl Runner for NilRunner {
    /// `ios` cycles: at qd1 submit one then poke; at qd16 submit 16 then poke them.
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let nlb = (BS / self.q.device().geometry().lba_size as u64) as u32;
        let mask = self.q.device().geometry().nlbas / nlb as u64 - 1;
        let rounds = ios / self.qd as u64;
        let mut ok = true;
        let mut cmd = Cmd::read(self.nsid, 0, nlb);
        let t = Clock::start();
        for _ in 0..rounds {
            for tag in 0..self.qd {
                cmd.sqe.set_slba((rng.next() & mask) * nlb as u64);
                let data = std::mem::take(&mut self.slots[tag as usize]);
                if let Err(r) = self.q.submit(&cmd, data, tag as u64) {
                    panic!("nil submit: {r}");
                }
            }
            let slots = &mut self.slots;
            let n = self
                .q
                .poke(0, |c| {
                    ok &= c.status.is_ok();
                    put_back(&mut slots[c.tag as usize], c.data);
                })
                .expect("nil poke");
            debug_assert_eq!(n, self.qd);
        }
        let (secs, cpu) = t.stop();
        assert!(ok, "a nil command failed");
        Run { ios: rounds * self.qd as u64, secs, cpu, syscalls: 0 }
    }
}

/// A reference for the nil numbers, not a target: the same cycle (command LBA set, data
/// moved in and handed back through a `dyn FnMut` callback with a [`Completion`]) through
/// the least a queue of this API shape must do, written here: a ring of completions, no
/// command checks, no trait object, no counters. Calls are kept out of line, as a
/// library's would be.
struct FloorQueue {
    done: VecDeque<Completion>,
    depth: usize,
}

impl FloorQueue {
    #[inline(never)]
    fn submit(&mut self, cmd: &Cmd, data: Data, tag: u64) -> Result<(), Data> {
        if self.done.len() >= self.depth {
            return Err(data);
        }
        let len = (cmd.sqe.cdw12 as u64 + 1) * 512;
        self.done.push_back(Completion { tag, status: Status::OK, result: len, data });
        Ok(())
    }

    #[inline(never)]
    fn poke(&mut self, f: &mut dyn FnMut(Completion)) -> u32 {
        let mut n = 0;
        while let Some(c) = self.done.pop_front() {
            f(c);
            n += 1;
        }
        n
    }
}

struct FloorRunner {
    q: FloorQueue,
    qd: u32,
    slots: Vec<Data>,
}

impl FloorRunner {
    fn new(qd: u32) -> FloorRunner {
        let slots = (0..qd).map(|_| Data::One(Buffer::alloc(BS as usize, 4096).expect("buffer"))).collect();
        FloorRunner { q: FloorQueue { done: VecDeque::with_capacity(qd as usize), depth: qd as usize }, qd, slots }
    }
}

impl Runner for FloorRunner {
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let (nlb, mask) = (8u32, (1u64 << 20) / BS - 1);
        let rounds = ios / self.qd as u64;
        let mut ok = true;
        let mut cmd = Cmd::read(1, 0, nlb);
        let t = Clock::start();
        for _ in 0..rounds {
            for tag in 0..self.qd {
                cmd.sqe.set_slba((rng.next() & mask) * nlb as u64);
                let data = std::mem::take(&mut self.slots[tag as usize]);
                if self.q.submit(&cmd, data, tag as u64).is_err() {
                    panic!("floor queue full");
                }
            }
            let slots = &mut self.slots;
            self.q.poke(&mut |c| {
                ok &= c.status.is_ok();
                put_back(&mut slots[c.tag as usize], c.data);
            });
        }
        let (secs, cpu) = t.stop();
        assert!(ok);
        Run { ios: rounds * self.qd as u64, secs, cpu, syscalls: 0 }
    }
}

// ---------------------------------------------------------------------------------------
// ioswitch sides

struct IoswitchPsync {
    dev: Device,
    buf: Buffer,
    nlb: u32,
    mask: u64,
}

struct IoswitchQueue {
    q: Queue,
    nsid: u32,
    nlb: u32,
    mask: u64,
    slots: Vec<Data>,
    free: Vec<u32>,
}

fn ioswitch_side(c: &Config, path: &Path) -> Result<Box<dyn Runner>, ioswitch::Error> {
    let mut opts = match c.iface {
        Iface::Psync => "sync=psync".to_string(),
        Iface::IoUring => "async=io_uring".to_string(),
        Iface::Libaio => "async=libaio".to_string(),
    };
    if c.place == Place::Disk {
        opts.push_str(",direct=1");
    }
    let dev = Device::open(&path.to_string_lossy(), &opts.parse()?)?;
    let g = dev.geometry();
    let nlb = (BS / g.lba_size as u64) as u32;
    let blocks = g.bytes / BS;
    assert!(blocks.is_power_of_two(), "{}: size must be a power of two of 4 KiB blocks", path.display());
    let mask = blocks - 1;
    if c.iface == Iface::Psync {
        let buf = dev.alloc(BS as usize)?;
        return Ok(Box::new(IoswitchPsync { dev, buf, nlb, mask }));
    }
    let q = dev.queue(c.qd)?;
    let slots = (0..c.qd).map(|_| dev.alloc(BS as usize).map(Data::One)).collect::<Result<Vec<_>, _>>()?;
    Ok(Box::new(IoswitchQueue { nsid: dev.ident().nsid, q, nlb, mask, slots, free: (0..c.qd).rev().collect() }))
}

impl Runner for IoswitchPsync {
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let nsid = self.dev.ident().nsid;
        let mut ok = true;
        let mut cmd = Cmd::read(nsid, 0, self.nlb);
        let t = Clock::start();
        for _ in 0..ios {
            cmd.sqe.set_slba((rng.next() & self.mask) * self.nlb as u64);
            match self.dev.pass(&cmd, std::slice::from_mut(&mut self.buf)) {
                Ok(n) => ok &= n == BS,
                Err(e) => panic!("ioswitch psync read: {e}"),
            }
        }
        let (secs, cpu) = t.stop();
        assert!(ok, "a read came back short");
        Run { ios, secs, cpu, syscalls: ios }
    }
}

impl Runner for IoswitchQueue {
    /// Keeps `qd` reads in flight: submit what is free, wait for at least one, reap all.
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let (mut issued, mut done) = (0u64, 0u64);
        let mut ok = true;
        let sys0 = self.q.stats().syscalls;
        let mut cmd = Cmd::read(self.nsid, 0, self.nlb);
        let t = Clock::start();
        while done < ios {
            while issued < ios {
                let Some(tag) = self.free.pop() else { break };
                cmd.sqe.set_slba((rng.next() & self.mask) * self.nlb as u64);
                let data = std::mem::take(&mut self.slots[tag as usize]);
                if let Err(r) = self.q.submit(&cmd, data, tag as u64) {
                    panic!("ioswitch submit: {r}");
                }
                issued += 1;
            }
            let (slots, free) = (&mut self.slots, &mut self.free);
            let n = self
                .q
                .wait(1, |c| {
                    ok &= c.status.is_ok() && c.result == BS;
                    free.push(c.tag as u32);
                    put_back(&mut slots[c.tag as usize], c.data);
                })
                .unwrap_or_else(|e| panic!("ioswitch wait: {e}"));
            done += n as u64;
        }
        let (secs, cpu) = t.stop();
        assert!(ok, "a read failed or came back short");
        Run { ios, secs, cpu, syscalls: self.q.stats().syscalls - sys0 }
    }
}

// ---------------------------------------------------------------------------------------
// raw sides: the same syscalls, no ioswitch

struct RawPsync {
    file: File,
    buf: AlignedBuf,
    mask: u64,
}

impl Runner for RawPsync {
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let mut ok = true;
        let t = Clock::start();
        for _ in 0..ios {
            let off = ((rng.next() & self.mask) * BS) as libc::off_t;
            // SAFETY: buf holds BS writable bytes owned by self for the whole call.
            let r = unsafe { libc::pread(self.file.as_raw_fd(), self.buf.as_mut_ptr().cast(), BS as usize, off) };
            ok &= r == BS as isize;
        }
        let (secs, cpu) = t.stop();
        assert!(ok, "a raw pread failed or came back short");
        Run { ios, secs, cpu, syscalls: ios }
    }
}

struct RawUring {
    ring: io_uring::IoUring,
    file: File,
    bufs: Vec<AlignedBuf>,
    free: Vec<u32>,
    mask: u64,
}

impl Runner for RawUring {
    /// Pushes a read for every free slot, one io_uring_enter (submit and wait for one),
    /// reaps every completion there is.
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let (mut issued, mut done, mut syscalls) = (0u64, 0u64, 0u64);
        let mut ok = true;
        let t = Clock::start();
        while done < ios {
            {
                let mut sq = self.ring.submission();
                while issued < ios {
                    let Some(tag) = self.free.pop() else { break };
                    let off = (rng.next() & self.mask) * BS;
                    let e = io_uring::opcode::Read::new(
                        io_uring::types::Fd(self.file.as_raw_fd()),
                        self.bufs[tag as usize].as_mut_ptr(),
                        BS as u32,
                    )
                    .offset(off)
                    .build()
                    .user_data(tag as u64);
                    // SAFETY: the buffer stays alive and untouched until this entry's
                    // completion is reaped below; the ring has a slot per tag.
                    unsafe { sq.push(&e) }.expect("submission ring full");
                    issued += 1;
                }
            }
            loop {
                syscalls += 1;
                match self.ring.submit_and_wait(1) {
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => panic!("io_uring_enter: {e}"),
                }
            }
            for cqe in self.ring.completion() {
                ok &= cqe.result() == BS as i32;
                self.free.push(cqe.user_data() as u32);
                done += 1;
            }
        }
        let (secs, cpu) = t.stop();
        assert!(ok, "a raw io_uring read failed or came back short");
        Run { ios, secs, cpu, syscalls }
    }
}

struct RawAio {
    ctx: AioContext,
    file: File,
    bufs: Vec<AlignedBuf>,
    iocbs: Vec<Iocb>,
    ptrs: Vec<*mut Iocb>,
    events: Vec<IoEvent>,
    free: Vec<u32>,
    mask: u64,
}

impl RawAio {
    fn new(file: File, qd: u32, mask: u64) -> Result<RawAio, LoopError> {
        Ok(RawAio {
            ctx: AioContext::new(qd).map_err(|source| LoopError::Sys { call: format!("io_setup({qd})"), source })?,
            file,
            bufs: buffers(qd)?,
            iocbs: vec![Iocb::default(); qd as usize],
            ptrs: vec![std::ptr::null_mut(); qd as usize],
            events: vec![IoEvent::default(); qd as usize],
            free: (0..qd).rev().collect(),
            mask,
        })
    }
}

impl Runner for RawAio {
    /// io_submit of every free slot, then io_getevents for at least one.
    fn run(&mut self, ios: u64, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let (mut issued, mut done, mut syscalls) = (0u64, 0u64, 0u64);
        let mut ok = true;
        let t = Clock::start();
        while done < ios {
            let mut k = 0;
            while issued < ios {
                let Some(tag) = self.free.pop() else { break };
                let cb = &mut self.iocbs[tag as usize];
                *cb = Iocb {
                    aio_data: tag as u64,
                    aio_lio_opcode: IOCB_CMD_PREAD,
                    aio_fildes: self.file.as_raw_fd() as u32,
                    aio_buf: self.bufs[tag as usize].as_mut_ptr() as u64,
                    aio_nbytes: BS,
                    aio_offset: ((rng.next() & self.mask) * BS) as i64,
                    ..Iocb::default()
                };
                self.ptrs[k] = cb;
                k += 1;
                issued += 1;
            }
            let mut sent = 0;
            while sent < k {
                syscalls += 1;
                // SAFETY: ptrs[sent..k] point to initialised iocbs in self.iocbs whose
                // buffers stay alive until their events are reaped.
                match unsafe { self.ctx.submit(&self.ptrs[sent..k]) } {
                    Ok(r) => sent += r,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EAGAIN) => {}
                    Err(e) => panic!("io_submit: {e}"),
                }
            }
            let n = loop {
                syscalls += 1;
                match self.ctx.getevents(1, &mut self.events) {
                    Ok(n) => break n,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => panic!("io_getevents: {e}"),
                }
            };
            for ev in &self.events[..n] {
                ok &= ev.res == BS as i64;
                self.free.push(ev.data as u32);
            }
            done += n as u64;
        }
        let (secs, cpu) = t.stop();
        assert!(ok, "a raw libaio read failed or came back short");
        Run { ios, secs, cpu, syscalls }
    }
}

/// `n` buffers of one I/O each.
fn buffers(n: u32) -> Result<Vec<AlignedBuf>, LoopError> {
    (0..n).map(|_| AlignedBuf::new(BS as usize)).collect()
}

fn raw_side(c: &Config, path: &Path) -> Result<Box<dyn Runner>, LoopError> {
    let direct = c.place == Place::Disk;
    let file = open_raw(path, direct)?;
    let blocks = file.metadata().map_err(|source| LoopError::Metadata { path: path.to_path_buf(), source })?.len() / BS;
    assert!(blocks.is_power_of_two(), "{}: size must be a power of two of 4 KiB blocks", path.display());
    let mask = blocks - 1;
    Ok(match c.iface {
        Iface::Psync => Box::new(RawPsync { file, buf: AlignedBuf::new(BS as usize)?, mask }),
        Iface::IoUring => Box::new(RawUring {
            ring: io_uring::IoUring::new(c.qd)
                .map_err(|source| LoopError::Sys { call: format!("io_uring_setup({})", c.qd), source })?,
            file,
            bufs: buffers(c.qd)?,
            free: (0..c.qd).rev().collect(),
            mask,
        }),
        Iface::Libaio => Box::new(RawAio::new(file, c.qd, mask)?),
    })
}

// ---------------------------------------------------------------------------------------
// Driving

struct Pairs {
    a: Vec<Run>,
    b: Vec<Run>,
}

/// Warm-up, then `reps` pairs, alternating which side runs first (A B, B A, …). Pair `i`
/// uses seed `i + 1` on both sides, so both read the same offsets.
fn interleave(a: &mut dyn Runner, b: &mut dyn Runner, ios: u64, reps: usize) -> Pairs {
    let warm = (ios / 10).max(1);
    a.run(warm, 999);
    b.run(warm, 999);
    let mut p = Pairs { a: Vec::new(), b: Vec::new() };
    for i in 0..reps {
        let seed = i as u64 + 1;
        if i % 2 == 0 {
            p.a.push(a.run(ios, seed));
            p.b.push(b.run(ios, seed));
        } else {
            p.b.push(b.run(ios, seed));
            p.a.push(a.run(ios, seed));
        }
    }
    p
}

fn fmt_k(iops: f64) -> String {
    if iops >= 1e6 {
        format!("{:.3} M", iops / 1e6)
    } else {
        format!("{:.1} k", iops / 1e3)
    }
}

fn spread(v: &[f64], f: fn(f64) -> String) -> String {
    let (lo, hi) = min_max(v);
    format!("{} [{}–{}]", f(median(v)), f(lo), f(hi))
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn uname_r() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// Runs this tool under callgrind with `args`; returns the instructions it executed.
fn callgrind_count(inv: &Invocation, out: &Path, args: &[String]) -> Result<u64, TargetsError> {
    let o = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .args(&inv.reenter)
        .args(args)
        .output()
        .map_err(TargetsError::ValgrindStart)?;
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(TargetsError::ValgrindFailed { last_line: err.lines().last().unwrap_or("").into() });
    }
    err.lines()
        .find_map(|l| l.split("Collected :").nth(1).and_then(|n| n.trim().parse().ok()))
        .ok_or(TargetsError::NoCount)
}

/// Pins this process to one CPU; the error says why it cannot.
fn pin_to_cpu(cpu: usize) -> Result<(), PinError> {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: allowed is a valid cpu_set_t of `size` bytes that the call fills.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        return Err(PinError::GetAffinity { cpu, source: io::Error::last_os_error() });
    }
    // SAFETY: CPU_ISSET reads the set; cpu is bounds-checked against CPU_SETSIZE first.
    let ok = cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &allowed) };
    if !ok {
        // SAFETY: as above; i < CPU_SETSIZE.
        let allowed = (0..libc::CPU_SETSIZE as usize).filter(|&i| unsafe { libc::CPU_ISSET(i, &allowed) }).collect();
        return Err(PinError::NotAllowed { cpu, allowed });
    }
    // SAFETY: as above.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut one) };
    // SAFETY: one is a valid cpu_set_t of `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &one) } != 0 {
        return Err(PinError::SetAffinity { cpu, source: io::Error::last_os_error() });
    }
    Ok(())
}

/// Runs the tool with `args` (the arguments after the ones that name it); prints the
/// report on stdout. An error is a refused argument (with the usage text) or a `--cpu` that
/// cannot be had; a run that fails panics with what failed.
pub fn run(inv: &Invocation, args: &[String]) -> Result<(), TargetsError> {
    let args = Args::parse(inv, args)?;
    if args.help {
        print!("{}", help(inv));
        return Ok(());
    }
    if let Some(cpu) = args.cpu {
        pin_to_cpu(cpu).map_err(|source| TargetsError::Pin { tool: inv.name.clone(), source })?;
    }
    if let Some(side) = args.once {
        run_once(&args, side);
        return Ok(());
    }
    let reps = args.reps();
    let mut md = String::new(); // the summary, ready for docs/BENCHMARKS.md
    println!("ioswitch library overhead{}", if args.quick { " (--quick)" } else { "" });
    println!(
        "kernel {}, {} CPUs{}, load average at start {}, {} repetitions per side",
        uname_r(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        args.cpu.map(|c| format!(", pinned to CPU {c}")).unwrap_or_default(),
        loadavg(),
        reps
    );

    // nil, interleaved with the floor (a minimal queue written here)
    for qd in [1u32, 16] {
        let name = format!("nil-qd{qd}");
        if !args.selected(&name) {
            continue;
        }
        let mut a = match NilRunner::new(qd) {
            Ok(r) => r,
            Err(e) => {
                println!("{name}: skipped: {e}");
                continue;
            }
        };
        let mut b = FloorRunner::new(qd);
        let ios = args.ios_for(None);
        let p = interleave(&mut a, &mut b, ios, reps.max(5));
        let na: Vec<f64> = p.a.iter().map(Run::ns_per_io).collect();
        let nb: Vec<f64> = p.b.iter().map(Run::ns_per_io).collect();
        let ca: Vec<f64> = p.a.iter().map(Run::cpu_ns_per_io).collect();
        let cb: Vec<f64> = p.b.iter().map(Run::cpu_ns_per_io).collect();
        let ns1 = |x: f64| format!("{x:.1}");
        let m = median(&na);
        let verdict = if m <= TARGETS.nil_cycle_ns { "met" } else { "NOT met" };
        println!(
            "{name}: ioswitch {} ns per submit+poke+callback cycle (CPU time {} ns), floor {} ns (CPU {} ns), \
             {ios} cycles per run, load {}: ≤ {} ns {verdict}",
            spread(&na, ns1),
            spread(&ca, ns1),
            spread(&nb, ns1),
            spread(&cb, ns1),
            loadavg(),
            TARGETS.nil_cycle_ns
        );
        if md.is_empty() {
            let _ = writeln!(
                md,
                "| nil cycle | ioswitch ns/cycle, wall, median [min–max] | ioswitch ns/cycle, thread CPU time | \
                 floor ns/cycle, wall (reference) | floor, CPU time | wall median ≤ {} ns |\n|---|---|---|---|---|---|",
                TARGETS.nil_cycle_ns
            );
        }
        let _ = writeln!(
            md,
            "| qd{qd} | {} | {} | {} | {} | {verdict} |",
            spread(&na, ns1),
            spread(&ca, ns1),
            spread(&nb, ns1),
            spread(&cb, ns1)
        );
    }

    // files
    let configs: Vec<Config> = io_configs().into_iter().filter(|c| args.selected(&c.name())).collect();
    let mut made: Vec<PathBuf> = Vec::new();
    for (place, path, size) in [(Place::Shm, &args.shm, SHM_BYTES), (Place::Disk, &args.disk, DISK_BYTES)] {
        if !configs.iter().any(|c| c.place == place) {
            continue;
        }
        let t = Instant::now();
        match make_file(path, size) {
            Ok(fresh) => {
                println!(
                    "{}: {} MiB on {}{}",
                    path.display(),
                    size >> 20,
                    fs_name(path),
                    if fresh { format!(", written in {:.1} s", t.elapsed().as_secs_f64()) } else { ", reused".into() }
                );
                made.push(path.clone());
            }
            Err(e) => println!("{}: cannot make the file: {e}", path.display()),
        }
    }
    if configs.iter().any(|c| c.place == Place::Disk) && fs_name(&args.disk) == "tmpfs" {
        println!("warning: {} is on tmpfs, not a disk", args.disk.display());
    }

    // interfaces
    let mut rows: Vec<String> = Vec::new();
    for c in &configs {
        let name = c.name();
        let path = if c.place == Place::Shm { &args.shm } else { &args.disk };
        let mut a = match ioswitch_side(c, path) {
            Ok(a) => a,
            Err(e) => {
                println!("{name}: skipped: ioswitch: {e}");
                rows.push(format!("| {name} | skipped: {e} | | | |"));
                continue;
            }
        };
        let mut b = match raw_side(c, path) {
            Ok(b) => b,
            Err(e) => {
                println!("{name}: skipped: raw: {e}");
                continue;
            }
        };
        let ios = args.ios_for(Some(c));
        let p = interleave(a.as_mut(), b.as_mut(), ios, reps);
        drop(a);
        drop(b);
        let ia: Vec<f64> = p.a.iter().map(Run::iops).collect();
        let ib: Vec<f64> = p.b.iter().map(Run::iops).collect();
        let pair: Vec<f64> = ia.iter().zip(&ib).map(|(x, y)| x / y).collect();
        let ratio = median(&ia) / median(&ib);
        let pm = median(&pair);
        // Interference only ever slows a run down: the best runs estimate the uncontended cost.
        let best = min_max(&ia).1 / min_max(&ib).1;
        let (plo, phi) = min_max(&pair);
        // CPU time of the I/O thread per I/O, and raw/ioswitch per pair (> 1: ioswitch cheaper).
        let ua: Vec<f64> = p.a.iter().map(|r| r.cpu_ns_per_io() / 1e3).collect();
        let ub: Vec<f64> = p.b.iter().map(|r| r.cpu_ns_per_io() / 1e3).collect();
        let cpair: Vec<f64> = ua.iter().zip(&ub).map(|(x, y)| y / x).collect();
        let cm = median(&cpair);
        let sa = p.a.iter().map(|r| r.syscalls as f64 / r.ios as f64).sum::<f64>() / p.a.len() as f64;
        let sb = p.b.iter().map(|r| r.syscalls as f64 / r.ios as f64).sum::<f64>() / p.b.len() as f64;
        let verdict = if pm >= TARGETS.ratio { "met" } else { "NOT met" };
        let us2 = |x: f64| format!("{x:.2}");
        println!(
            "{name}: ioswitch {} IOPS, raw {} IOPS, ratio of medians {ratio:.3}, pair ratios {pm:.3} [{plo:.3}–{phi:.3}], best runs {best:.3}; \
             CPU µs/IO {} vs {}, raw/ioswitch {cm:.3}; syscalls/IO {sa:.2} vs {sb:.2}; {ios} I/Os per run, load {}: {verdict}",
            spread(&ia, fmt_k),
            spread(&ib, fmt_k),
            spread(&ua, us2),
            spread(&ub, us2),
            loadavg(),
        );
        rows.push(format!(
            "| {name} | {} | {} | {ratio:.3} | {pm:.3} [{plo:.3}–{phi:.3}] | {best:.3} | {} / {} | {cm:.3} | {sa:.2} / {sb:.2} | {verdict} |",
            spread(&ia, fmt_k),
            spread(&ib, fmt_k),
            us2(median(&ua)),
            us2(median(&ub)),
        ));
    }
    if !rows.is_empty() {
        let _ = writeln!(
            md,
            "\n| config | ioswitch IOPS, median [min–max] | raw IOPS, median [min–max] | ratio of medians | \
             ratio per pair, median [min–max] | ratio of best runs | CPU µs/IO ioswitch / raw (medians) | \
             CPU raw/ioswitch, pair median | syscalls/IO ioswitch / raw | pair median ≥ {} |\n\
             |---|---|---|---|---|---|---|---|---|---|",
            TARGETS.ratio
        );
        for r in &rows {
            let _ = writeln!(md, "{r}");
        }
    }

    // instructions (callgrind)
    if args.callgrind {
        let have = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
        if have {
            callgrind_section(inv, &args, &configs, &mut md);
        } else {
            println!("valgrind not found: no instruction counts");
        }
    }

    println!("load average at end {}", loadavg());
    println!("\n---- summary (markdown) ----\n{md}");

    if !args.keep_files {
        for p in made {
            let _ = fs::remove_file(&p);
        }
    }
    Ok(())
}

fn callgrind_section(inv: &Invocation, args: &Args, configs: &[Config], md: &mut String) {
    let dir = &inv.profiles;
    let _ = fs::create_dir_all(dir);
    println!("callgrind: user-space instructions per I/O = (Ir(2N) - Ir(N)) / N; profiles in {}", dir.display());
    let mut jobs: Vec<(String, u64)> = Vec::new();
    for qd in [1, 16] {
        let name = format!("nil-qd{qd}");
        if args.selected(&name) {
            jobs.push((name, if args.quick { 50_000 } else { 100_000 }));
        }
    }
    for c in configs.iter().filter(|c| c.place == Place::Shm) {
        jobs.push((c.name(), if args.quick { 5_000 } else { 10_000 }));
    }
    let mut rows: Vec<String> = Vec::new();
    for (name, n) in jobs {
        let mut per = [None, None];
        for (i, side) in [Side::Ioswitch, Side::Raw].into_iter().enumerate() {
            let mut counts = Vec::new();
            for k in [n, 2 * n] {
                let out = dir.join(format!("{name}.{}.{k}.out", side.name()));
                let a: Vec<String> = ["--once", side.name(), "--only", &name, "--ios", &k.to_string(), "--shm"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([args.shm.to_string_lossy().into_owned()])
                    .collect();
                match callgrind_count(inv, &out, &a) {
                    Ok(ir) => counts.push(ir),
                    Err(e) => {
                        println!("callgrind {name} {}: {e}", side.name());
                        break;
                    }
                }
            }
            if let [c1, c2] = counts[..] {
                let p = (c2 as f64 - c1 as f64) / n as f64;
                println!(
                    "callgrind {name} {}: Ir({n}) = {c1}, Ir({}) = {c2}: {p:.1} instructions per I/O",
                    side.name(),
                    2 * n
                );
                per[i] = Some(p);
            }
        }
        let f = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.1}"));
        let extra = match per {
            [Some(a), Some(b)] => format!("{:+.1}", a - b),
            _ => "–".into(),
        };
        rows.push(format!("| {name} | {} | {} | {extra} |", f(per[0]), f(per[1])));
    }
    if !rows.is_empty() {
        let _ = writeln!(
            md,
            "\n| callgrind: user-space instructions per I/O | ioswitch | raw loop (nil: floor) | extra |\n|---|---|---|---|"
        );
        for r in rows {
            let _ = writeln!(md, "{r}");
        }
    }
}

/// One run of each selected configuration on one side, no warm-up (for callgrind).
fn run_once(args: &Args, side: Side) {
    for qd in [1u32, 16] {
        let name = format!("nil-qd{qd}");
        if args.selected(&name) {
            let mut r: Box<dyn Runner> = match side {
                Side::Ioswitch => Box::new(NilRunner::new(qd).unwrap_or_else(|e| panic!("{name}: {e}"))),
                Side::Raw => Box::new(FloorRunner::new(qd)),
            };
            let run = r.run(args.ios_for(None), 1);
            println!("{name}: {} cycles, {:.1} ns per cycle", run.ios, run.ns_per_io());
        }
    }
    for c in io_configs().iter().filter(|c| args.selected(&c.name())) {
        let (path, size) = if c.place == Place::Shm { (&args.shm, SHM_BYTES) } else { (&args.disk, DISK_BYTES) };
        make_file(path, size).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut r: Box<dyn Runner> = match side {
            Side::Ioswitch => ioswitch_side(c, path).unwrap_or_else(|e| panic!("{}: {e}", c.name())),
            Side::Raw => raw_side(c, path).unwrap_or_else(|e| panic!("{}: {e}", c.name())),
        };
        let run = r.run(args.ios_for(Some(c)), 1);
        println!(
            "{} {}: {} I/Os, {} IOPS, {} syscalls",
            c.name(),
            side.name(),
            run.ios,
            fmt_k(run.iops()),
            run.syscalls
        );
    }
}
