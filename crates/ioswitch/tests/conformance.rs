//! Conformance suite: one set of checks, run over every (device kind × interface) this
//! machine supports (DESIGN.md, "Testing").
//!
//! A plain `main` (`harness = false`). It prints a matrix (one row per device kind, one
//! column per interface), then every failure with its case and error, every skip and n/a
//! with its reason, and ends with the line `N passed, N failed, N skipped` (counting
//! cases; an n/a cell counts one passed case: its refusal at open was checked). It exits
//! non-zero when anything failed.
//!
//! Every case runs under `catch_unwind` (one failing case does not hide the others) and a
//! watchdog (a hang ends the run with a failure instead of blocking CI).
//!
//! Rows: files (on a disk file system and on /dev/shm), a loop device, a ramdisk; and,
//! where NVMe namespaces exist and may be overwritten (the QEMU guest of tests/vm,
//! `IOSWITCH_VM=1`, or `IOSWITCH_CONFORMANCE_NVME=1`), each namespace found through
//! /sys/block/*/nsid: conventional ones as block device (buffered and direct=1) and
//! generic char device with the NVMe columns (sync=nvme, io_uring with iopoll,
//! io_uring_cmd with sqpoll / iopoll, ...), zoned ones as block device (direct=1) and
//! char device with the zone cases. Elsewhere the NVMe rows are absent and the run says
//! why. `tests/vm/nvme-tests.sh` runs the suite in the guest.

use ioswitch::cmd::{opc, CmdSet, DsmRange};
use ioswitch::spec::idfy::{cns, IdNs, IDENTIFY_LEN};
use ioswitch::spec::zns::{ZoneAction, ZoneDesc, ZoneReport, ZoneState};
use ioswitch::{
    AsyncIface, Buffer, Cmd, Completion, Data, DevKind, Device, Error, Opts, Queue, Sqe, Status, SyncIface, Zoned,
    ZonedModel,
};
use ioswitch_testkit::dirs::{direct_works, disk_dir, fs_type, is_mem_fs};
use ioswitch_testkit::lock;
use ioswitch_testkit::loopdev::{detach_attached, LoopDev};
use ioswitch_testkit::pattern::{self, compare, describe, fill, SENTINEL};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Size of every device: 1 MiB plus three 4 KiB blocks, so a chunked pass over it ends
/// with a short command that reaches the last LBA exactly.
const DEV_BYTES: u64 = (1 << 20) + 12 * 1024;
const RAMDISK_URI: &str = "1036KiB";
/// NVMe namespaces are larger than DEV_BYTES: the whole-range passes cover their first
/// DEV_BYTES and their last TAIL_BYTES (again no multiple of the chunk sizes).
const TAIL_BYTES: u64 = 64 * 1024 + 12 * 1024;
const KIB: u64 = 1024;
/// Queue depth of the data passes.
const QD: u32 = 16;
/// A case that runs longer than this is a hang: the run stops with a failure.
const CASE_LIMIT: Duration = Duration::from_secs(30);
/// What the files this suite makes (loop backing files, probes) are named after.
const PREFIX: &str = "ioswitch-conformance";
const NOT_DONE: &str = "not part of this build";

type Res = Result<String, String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

// ---------------------------------------------------------------------------------------
// The matrix: columns (interfaces) and rows (device kinds)
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    Psync,
    Block,
    Ram,
    Nvme,
    Emu,
    Thrpool,
    Libaio,
    Uring,
    UringRegFiles,
    UringRegBufs,
    UringSqpoll,
    UringIopoll,
    Posix,
    UringCmd,
    UringCmdSqpoll,
    UringCmdIopoll,
    Nil,
    Mmap,
}

impl Col {
    /// The columns of the rows that are not NVMe (files, loop devices, ramdisk).
    const ALL: [Col; 13] = [
        Col::Psync,
        Col::Block,
        Col::Ram,
        Col::Mmap,
        Col::Emu,
        Col::Thrpool,
        Col::Libaio,
        Col::Uring,
        Col::UringRegFiles,
        Col::UringRegBufs,
        Col::UringSqpoll,
        Col::Posix,
        Col::Nil,
    ];

    /// The columns of the NVMe namespace rows.
    const NVME: [Col; 16] = [
        Col::Psync,
        Col::Block,
        Col::Nvme,
        Col::Mmap,
        Col::Emu,
        Col::Thrpool,
        Col::Libaio,
        Col::Uring,
        Col::UringRegFiles,
        Col::UringSqpoll,
        Col::UringIopoll,
        Col::Posix,
        Col::UringCmd,
        Col::UringCmdSqpoll,
        Col::UringCmdIopoll,
        Col::Nil,
    ];

    /// The columns of the zoned namespace rows (nil moves no data: no zone to check).
    const ZONED: [Col; 14] = [
        Col::Psync,
        Col::Block,
        Col::Nvme,
        Col::Emu,
        Col::Thrpool,
        Col::Libaio,
        Col::Uring,
        Col::UringRegFiles,
        Col::UringSqpoll,
        Col::UringIopoll,
        Col::Posix,
        Col::UringCmd,
        Col::UringCmdSqpoll,
        Col::UringCmdIopoll,
    ];

    fn label(self) -> &'static str {
        match self {
            Col::Psync => "psync",
            Col::Block => "block",
            Col::Ram => "ramdisk",
            Col::Nvme => "nvme",
            Col::Emu => "emu",
            Col::Thrpool => "thrpool",
            Col::Libaio => "libaio",
            Col::Uring => "io_uring",
            Col::UringRegFiles => "uring+rf",
            Col::UringRegBufs => "uring+rb",
            Col::UringSqpoll => "uring+sqp",
            Col::UringIopoll => "uring+iop",
            Col::Posix => "posix",
            Col::UringCmd => "uring_cmd",
            Col::UringCmdSqpoll => "ucmd+sqp",
            Col::UringCmdIopoll => "ucmd+iop",
            Col::Nil => "nil",
            Col::Mmap => "mmap",
        }
    }

    /// The option string naming this column's interfaces. Sync columns pair the sync
    /// interface with `emu`, so they do not depend on the state of any async backend.
    fn opts(self) -> &'static str {
        match self {
            Col::Psync => "sync=psync,async=emu",
            Col::Block => "sync=block,async=emu",
            Col::Ram => "sync=ramdisk,async=emu",
            Col::Nvme => "sync=nvme,async=emu",
            Col::Emu => "async=emu",
            Col::Thrpool => "async=thrpool",
            Col::Libaio => "async=libaio",
            Col::Uring => "async=io_uring",
            Col::UringRegFiles => "async=io_uring,register_files=1",
            Col::UringRegBufs => "async=io_uring,register_buffers=1",
            Col::UringSqpoll => "async=io_uring,sqpoll=1",
            Col::UringIopoll => "async=io_uring,iopoll=1",
            Col::Posix => "async=posix",
            Col::UringCmd => "async=io_uring_cmd",
            Col::UringCmdSqpoll => "async=io_uring_cmd,sqpoll=1",
            Col::UringCmdIopoll => "async=io_uring_cmd,iopoll=1",
            Col::Nil => "async=nil",
            Col::Mmap => "sync=mmap,async=emu",
        }
    }

    fn sync(self) -> Option<SyncIface> {
        match self {
            Col::Psync => Some(SyncIface::Psync),
            Col::Block => Some(SyncIface::Block),
            Col::Ram => Some(SyncIface::Ramdisk),
            Col::Nvme => Some(SyncIface::Nvme),
            Col::Mmap => Some(SyncIface::Mmap),
            _ => None,
        }
    }

    fn async_iface(self) -> AsyncIface {
        match self {
            Col::Psync | Col::Block | Col::Ram | Col::Nvme | Col::Mmap | Col::Emu => AsyncIface::Emu,
            Col::Thrpool => AsyncIface::Thrpool,
            Col::Libaio => AsyncIface::Libaio,
            Col::Uring | Col::UringRegFiles | Col::UringRegBufs | Col::UringSqpoll | Col::UringIopoll => {
                AsyncIface::IoUring
            }
            Col::Posix => AsyncIface::Posix,
            Col::UringCmd | Col::UringCmdSqpoll | Col::UringCmdIopoll => AsyncIface::IoUringCmd,
            Col::Nil => AsyncIface::Nil,
        }
    }

    fn sqpoll(self) -> bool {
        matches!(self, Col::UringSqpoll | Col::UringCmdSqpoll)
    }

    fn iopoll(self) -> bool {
        matches!(self, Col::UringIopoll | Col::UringCmdIopoll)
    }

    /// The `role=name` of the interface itself (what the selection table refuses).
    fn refusal_key(self) -> String {
        match self.sync() {
            Some(s) => format!("sync={s}"),
            None => format!("async={}", self.async_iface()),
        }
    }

    /// Whether (and naming what) opening this column's interfaces on this kind of device
    /// must be refused: the selection table as DESIGN.md describes it, plus the tunables
    /// that need something of the device (IOPOLL through the block layer needs
    /// direct=1). Written out here, not read from the library, so that a change in the
    /// library's table shows up as a failure. Returns the `iface` the `Unsupported` error
    /// must name.
    fn expected_refusal(self, kind: DevKind, direct: bool) -> Option<String> {
        use DevKind::*;
        let table = match self {
            Col::Psync => matches!(kind, Ramdisk | NvmeChar),
            Col::Block => !matches!(kind, Block | NvmeBlock),
            Col::Ram => kind != Ramdisk,
            Col::Nvme => !matches!(kind, NvmeBlock | NvmeChar),
            Col::Mmap => !matches!(kind, File | Block | NvmeBlock),
            Col::Emu | Col::Thrpool | Col::Nil => false,
            Col::Libaio
            | Col::Uring
            | Col::UringRegFiles
            | Col::UringRegBufs
            | Col::UringSqpoll
            | Col::UringIopoll
            | Col::Posix => matches!(kind, Ramdisk | NvmeChar),
            Col::UringCmd | Col::UringCmdSqpoll | Col::UringCmdIopoll => kind != NvmeChar,
        };
        if table {
            return Some(self.refusal_key());
        }
        if self == Col::UringIopoll && !direct {
            return Some("async=io_uring (iopoll=1)".into());
        }
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowKind {
    File,
    FileDirect,
    Shm,
    Loop,
    LoopDirect,
    Ram,
    /// An NVMe namespace's block device, /dev/nvmeXnY, buffered.
    NvmeBlock,
    /// The same with direct=1.
    NvmeBlockDirect,
    /// An NVMe namespace's generic char device, /dev/ngXnY (passthrough never caches).
    NvmeChar,
    /// A zoned namespace's block device, direct=1 (zoned writes bypass the page cache).
    ZnsBlockDirect,
    /// A zoned namespace's generic char device.
    ZnsChar,
}

impl RowKind {
    const ALL: [RowKind; 6] =
        [RowKind::File, RowKind::FileDirect, RowKind::Shm, RowKind::Loop, RowKind::LoopDirect, RowKind::Ram];

    fn dev_kind(self) -> DevKind {
        match self {
            RowKind::File | RowKind::FileDirect | RowKind::Shm => DevKind::File,
            RowKind::Loop | RowKind::LoopDirect => DevKind::Block,
            RowKind::Ram => DevKind::Ramdisk,
            RowKind::NvmeBlock | RowKind::NvmeBlockDirect | RowKind::ZnsBlockDirect => DevKind::NvmeBlock,
            RowKind::NvmeChar | RowKind::ZnsChar => DevKind::NvmeChar,
        }
    }
    fn direct(self) -> bool {
        matches!(self, RowKind::FileDirect | RowKind::LoopDirect | RowKind::NvmeBlockDirect | RowKind::ZnsBlockDirect)
    }
    fn zoned(self) -> bool {
        matches!(self, RowKind::ZnsBlockDirect | RowKind::ZnsChar)
    }
    fn nvme(self) -> bool {
        matches!(self.dev_kind(), DevKind::NvmeBlock | DevKind::NvmeChar)
    }
    /// The columns of this row.
    fn cols(self) -> &'static [Col] {
        if self.zoned() {
            &Col::ZONED
        } else if self.nvme() {
            &Col::NVME
        } else {
            &Col::ALL
        }
    }
    fn tag(self) -> &'static str {
        match self {
            RowKind::File => "file",
            RowKind::FileDirect => "file-direct",
            RowKind::Shm => "shm",
            RowKind::Loop => "loop",
            RowKind::LoopDirect => "loop-direct",
            RowKind::Ram => "ramdisk",
            RowKind::NvmeBlock => "nvme-block",
            RowKind::NvmeBlockDirect => "nvme-block-direct",
            RowKind::NvmeChar => "nvme-char",
            RowKind::ZnsBlockDirect => "zns-block-direct",
            RowKind::ZnsChar => "zns-char",
        }
    }
}

/// What deallocated (trimmed, reset) blocks read back as.
#[derive(Clone, Debug, PartialEq)]
enum Dealloc {
    /// All bytes 0x00 (files and loop devices: punched holes; NVMe: DLFEAT bits 2:0 = 001b).
    Zeroes,
    /// All bytes 0xFF (NVMe: DLFEAT bits 2:0 = 010b).
    Ones,
    /// The device does not say (DLFEAT bits 2:0 = 000b): only the commands' success and
    /// the blocks around them are checked.
    Unknown(String),
}

impl Dealloc {
    fn from_dlfeat(dlfeat: u8) -> Dealloc {
        match dlfeat & 7 {
            1 => Dealloc::Zeroes,
            2 => Dealloc::Ones,
            v => Dealloc::Unknown(format!("DLFEAT {dlfeat:#04x}: bits 2:0 = {v:03b}, the read value is not reported")),
        }
    }
    fn byte(&self) -> Option<u8> {
        match self {
            Dealloc::Zeroes => Some(0),
            Dealloc::Ones => Some(0xFF),
            Dealloc::Unknown(_) => None,
        }
    }
}

/// An NVMe namespace found through /sys/block/*/nsid.
#[derive(Clone, Debug)]
struct NvmeNs {
    nsid: u32,
    /// /dev/nvmeXnY
    block: PathBuf,
    /// /dev/ngXnY, when one serves the same namespace.
    char_dev: Result<PathBuf, String>,
    /// The controller (nvme0), from the block device's sysfs `device` link.
    ctrl: String,
    /// From sysfs: logical block size, bytes, zone size in LBAs and zone count.
    lba: u64,
    bytes: u64,
    zone_lbas: u64,
    nr_zones: u64,
    /// From Identify Namespace (DLFEAT), read through the library's admin passthrough.
    dealloc: Result<Dealloc, String>,
}

/// Where a row's devices live.
#[derive(Clone)]
enum Place {
    /// A directory: each cell makes a fresh file there.
    Dir(PathBuf),
    /// A loop device over a backing file (shared by the two loop rows).
    Loop { dev: PathBuf, backing: PathBuf },
    /// A ramdisk.
    Ram,
    /// An NVMe namespace device (block or char).
    Nvme { dev: PathBuf, ns: Box<NvmeNs> },
}

struct Row {
    kind: RowKind,
    label: String,
    place: Result<Place, String>,
}

// ---------------------------------------------------------------------------------------
// Global state: the watchdog, panic capture, the loop device to detach
// ---------------------------------------------------------------------------------------

static CURRENT: Mutex<Option<(String, Instant)>> = Mutex::new(None);
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static TALLY: Mutex<(u32, u32, u32)> = Mutex::new((0, 0, 0));
/// Every failure so far, one line each, for the final report (or the watchdog's).
static FAILS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static SEED: AtomicU64 = AtomicU64::new(0x5EED);

/// A seed no other write of this run has used, so stale data is told from fresh.
fn seed() -> u64 {
    SEED.fetch_add(1, Ordering::Relaxed)
}

fn start_watchdog() {
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_millis(100));
        let hung = lock(&CURRENT).as_ref().filter(|(_, t)| t.elapsed() > CASE_LIMIT).map(|(n, _)| n.clone());
        if let Some(name) = hung {
            println!();
            println!("FAIL {name}: still running after {}s: a hang; stopping the run", CASE_LIMIT.as_secs());
            if let Some(e) = detach_attached() {
                println!("{e}");
            }
            let fails = lock(&FAILS);
            if !fails.is_empty() {
                println!("Failures before the hang:");
                for l in fails.iter() {
                    println!("{l}");
                }
            }
            let (p, f, s) = *lock(&TALLY);
            println!("{p} passed, {} failed, {s} skipped", f + 1);
            std::process::exit(1);
        }
    });
}

/// Runs `f` under the watchdog, turning a panic into an error.
fn guarded<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    lock(&PANICS).clear();
    *lock(&CURRENT) = Some((name.to_string(), Instant::now()));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    *lock(&CURRENT) = None;
    match r {
        Ok(r) => r,
        Err(_) => {
            let msgs = lock(&PANICS).join("; ");
            Err(format!("panicked: {msgs}"))
        }
    }
}

fn install_panic_hook() {
    panic::set_hook(Box::new(|info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "(no message)".to_string()
        };
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        lock(&PANICS).push(format!("{msg}{at}"));
    }));
}

// ---------------------------------------------------------------------------------------
// Data: chunks of a range, the bytes of a command's buffers
// ---------------------------------------------------------------------------------------

fn split(pos: u64, len: u64, chunk: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    let mut p = pos;
    while p < pos + len {
        let l = chunk.min(pos + len - p);
        v.push((p, l));
        p += l;
    }
    v
}

fn buf_ids(d: &Data) -> Vec<u64> {
    d.bufs().iter().map(|b| b.id()).collect()
}

fn data_bytes(d: &Data) -> Vec<u8> {
    let mut v = Vec::with_capacity(d.total_len() as usize);
    for b in d.bufs() {
        v.extend_from_slice(b);
    }
    v
}

// ---------------------------------------------------------------------------------------
// Running commands the same way through `Device::pass` and through a `Queue`
// ---------------------------------------------------------------------------------------

/// What happened to one command.
enum Outcome {
    /// Refused before any I/O (by `pass` or by `submit`), with the data handed back.
    Rejected(Error, Data),
    /// It ran; the status says how it went.
    Done { status: Status, result: u64, data: Data },
}

fn pass_one(dev: &Device, cmd: &Cmd, mut data: Data) -> Outcome {
    match dev.pass(cmd, data.bufs_mut()) {
        Ok(result) => Outcome::Done { status: Status::OK, result, data },
        Err(Error::Command { status, .. }) => Outcome::Done { status, result: 0, data },
        Err(e) => Outcome::Rejected(e, data),
    }
}

/// Takes completions into `out` by tag, checking that every tag is known, completes once,
/// and hands back the buffers it was submitted with.
fn absorb(got: &mut Vec<Completion>, out: &mut [Option<Outcome>], ids: &[Vec<u64>]) -> Result<(), String> {
    for c in got.drain(..) {
        let i = usize::try_from(c.tag)
            .ok()
            .filter(|&i| i < ids.len())
            .ok_or_else(|| format!("a completion carries tag {}, which was never submitted", c.tag))?;
        ensure!(out[i].is_none(), "tag {i} completed twice");
        let back = buf_ids(&c.data);
        ensure!(
            back == ids[i],
            "the completion of tag {i} handed back buffers {back:?}; it was submitted with {:?}",
            ids[i]
        );
        out[i] = Some(Outcome::Done { status: c.status, result: c.result, data: c.data });
    }
    Ok(())
}

/// Submits `ops` in order, keeping at most the queue's depth in flight, then drains.
fn run_async(q: &mut Queue, ops: Vec<(Cmd, Data)>) -> Result<Vec<Outcome>, String> {
    let n = ops.len();
    let mut out: Vec<Option<Outcome>> = Vec::new();
    out.resize_with(n, || None);
    let mut ids: Vec<Vec<u64>> = Vec::with_capacity(n);
    let mut got: Vec<Completion> = Vec::new();
    let cap = q.capacity();
    for (i, (cmd, data)) in ops.into_iter().enumerate() {
        ids.push(buf_ids(&data));
        if q.outstanding() >= cap {
            let before = q.outstanding();
            let r = q.wait(1, |c| got.push(c)).map_err(|e| format!("wait(1) with {before} outstanding: {e}"))?;
            ensure!(r >= 1, "wait(1) reaped nothing with {before} commands outstanding");
            ensure!(r as usize == got.len(), "wait returned {r} but called back {} times", got.len());
            absorb(&mut got, &mut out, &ids)?;
        }
        if let Err(rej) = q.submit(&cmd, data, i as u64) {
            ensure!(
                !matches!(rej.error, Error::Busy { .. }),
                "submit #{i} said Busy with {} of {cap} slots in use",
                q.outstanding()
            );
            let back = buf_ids(&rej.data);
            ensure!(back == ids[i], "a refused submit handed back buffers {back:?}, not the {:?} given", ids[i]);
            out[i] = Some(Outcome::Rejected(rej.error, rej.data));
        }
    }
    let before = q.outstanding();
    let r = q.drain(|c| got.push(c)).map_err(|e| format!("drain with {before} outstanding: {e}"))?;
    ensure!(r == before, "drain reaped {r} with {before} outstanding");
    ensure!(got.len() == r as usize, "drain returned {r} but called back {} times", got.len());
    absorb(&mut got, &mut out, &ids)?;
    ensure!(q.outstanding() == 0, "{} commands still outstanding after drain", q.outstanding());
    out.into_iter().enumerate().map(|(i, o)| o.ok_or_else(|| format!("command #{i} never completed"))).collect()
}

/// Runs commands through the sync interface (`pass`) or a queue of the async one.
/// Depth-`QD` runners of a cell share one queue (a queue must stay usable case after
/// case, and creating queues is slow for some interfaces); a runner whose case failed
/// drops its queue instead of handing it on.
struct Runner<'a> {
    dev: Device,
    q: Option<Queue>,
    home: Option<&'a Mutex<Option<Queue>>>,
    /// NVMe passthrough: a completion's result is DW0-1, not bytes moved (see `run`).
    passthru: bool,
    lba: u64,
}

impl<'a> Runner<'a> {
    fn new(ctx: &'a Ctx, depth: u32) -> Result<Runner<'a>, String> {
        if !ctx.is_async() {
            return Ok(Runner { dev: ctx.dev.clone(), q: None, home: None, passthru: ctx.passthru, lba: ctx.lba });
        }
        let home = (depth == QD).then_some(&ctx.shared);
        let q = match home.and_then(|h| lock(h).take()) {
            Some(q) => q,
            None => ctx.dev.queue(depth).map_err(|e| format!("dev.queue({depth}): {e}"))?,
        };
        Ok(Runner { dev: ctx.dev.clone(), q: Some(q), home, passthru: ctx.passthru, lba: ctx.lba })
    }

    /// Bytes a read or write command moves (`None` for other commands).
    fn moves(&self, c: &Cmd) -> Option<u64> {
        match (c.set, c.sqe.opcode) {
            (CmdSet::Nvm, opc::READ | opc::WRITE) => Some(c.sqe.nlb() as u64 * self.lba),
            (CmdSet::Fs, opc::FS_READ | opc::FS_WRITE) => Some(c.fs_len()),
            _ => None,
        }
    }

    fn run(&mut self, ops: Vec<(Cmd, Data)>) -> Result<Vec<Outcome>, String> {
        let moves: Vec<Option<u64>> = ops.iter().map(|(c, _)| self.moves(c)).collect();
        let mut out = match self.q.as_mut() {
            Some(q) => run_async(q, ops)?,
            None => ops.into_iter().map(|(c, d)| pass_one(&self.dev, &c, d)).collect(),
        };
        // Through NVMe passthrough the result is the completion's DW0-1 (ioswitch's
        // documented semantics), which a read or write leaves 0: checked here, then
        // replaced by the bytes the command moved, so the cases' checks apply alike.
        if self.passthru {
            for (i, (o, m)) in out.iter_mut().zip(&moves).enumerate() {
                if let (Outcome::Done { status, result, .. }, Some(len)) = (o, m) {
                    if status.is_ok() {
                        ensure!(
                            *result == 0,
                            "passthrough read/write #{i} completed with result {result}; NVMe's DW0 of a read or \
                             write is 0"
                        );
                        *result = *len;
                    }
                }
            }
        }
        Ok(out)
    }

    fn one(&mut self, op: (Cmd, Data)) -> Result<Outcome, String> {
        self.run(vec![op])?.pop().ok_or_else(|| "no outcome for a command".to_string())
    }

    fn submitted(&self) -> u64 {
        self.q.as_ref().map(|q| q.stats().submitted).unwrap_or(0)
    }

    /// Ends a pass: nothing outstanding, and every submitted command completed.
    fn finish(mut self) -> Result<(), String> {
        if let Some(q) = &self.q {
            let s = q.stats();
            ensure!(q.outstanding() == 0, "{} commands outstanding at the end", q.outstanding());
            ensure!(s.submitted == s.completed, "stats: submitted {} != completed {}", s.submitted, s.completed);
        }
        if let Some(h) = self.home {
            *lock(h) = self.q.take();
        }
        Ok(())
    }
}

/// The data of a command that must have succeeded, moving `want` bytes when given.
fn done(o: Outcome, what: &str, want: Option<u64>) -> Result<Data, String> {
    match o {
        Outcome::Rejected(e, _) => Err(format!("{what}: refused: {e}")),
        Outcome::Done { status, result, data } => {
            ensure!(status.is_ok(), "{what}: failed: {status}");
            if let Some(w) = want {
                ensure!(result == w, "{what}: result {result}, expected {w} (bytes moved)");
            }
            Ok(data)
        }
    }
}

/// The error and data of a command that must have been refused before any I/O.
fn refused(o: Outcome, what: &str) -> Result<(Error, Data), String> {
    match o {
        Outcome::Rejected(e, d) => Ok((e, d)),
        Outcome::Done { status, .. } => Err(format!("{what}: was accepted and ran ({status}); it must be refused")),
    }
}

// ---------------------------------------------------------------------------------------
// One cell's context
// ---------------------------------------------------------------------------------------

struct Ctx {
    dev: Device,
    col: Col,
    row: RowKind,
    uri: String,
    /// A path std::fs can read and write the same bytes through (file or loop device).
    oracle: Option<PathBuf>,
    /// A file whose size must never change (the file, or the loop device's backing file).
    backing: Option<PathBuf>,
    /// The oracle is a block device read and written with O_DIRECT (NVMe: passthrough
    /// commands bypass the page cache, so a buffered witness could read stale pages).
    oracle_direct: bool,
    lba: u64,
    nlbas: u64,
    nsid: u32,
    /// The size the device must have.
    bytes: u64,
    /// The region the whole-range passes cover: the whole device, or (NVMe namespaces of
    /// 256 MiB) its first DEV_BYTES; the last LBAs are checked on their own.
    span: u64,
    /// What deallocated blocks read back as.
    dealloc: Dealloc,
    /// Every command of this cell reaches the device as an NVMe passthrough command
    /// (sync=nvme, io_uring_cmd, or emu/thrpool over sync=nvme).
    passthru: bool,
    /// The NVMe namespace, for NVMe rows.
    ns: Option<Box<NvmeNs>>,
    /// The zone this cell uses (zoned rows).
    zone: u64,
    /// The queue depth-`QD` runners share.
    shared: Mutex<Option<Queue>>,
}

impl Ctx {
    fn is_async(&self) -> bool {
        self.col.sync().is_none()
    }
    fn nil(&self) -> bool {
        self.col == Col::Nil
    }
    fn end(&self) -> u64 {
        self.nlbas * self.lba
    }
    /// The result a successful read or write of `len` bytes completes with: bytes moved,
    /// or NVMe's DW0 (0) through passthrough.
    fn moved(&self, len: u64) -> u64 {
        if self.passthru {
            0
        } else {
            len
        }
    }
    fn nlb(&self, len: u64) -> u32 {
        (len / self.lba) as u32
    }
    fn alloc(&self, len: u64) -> Result<Buffer, String> {
        self.dev.alloc(len as usize).map_err(|e| format!("alloc({len}): {e}"))
    }
    fn sentinel(&self, len: u64) -> Result<Buffer, String> {
        let mut b = self.alloc(len)?;
        b.fill(SENTINEL);
        Ok(b)
    }
    fn pat(&self, pos: u64, len: u64, seed: u64) -> Result<Buffer, String> {
        let mut b = self.alloc(len)?;
        fill(&mut b, pos, seed);
        Ok(b)
    }
    /// NVM write of `len` bytes at byte `pos`, carrying the pattern.
    fn w(&self, pos: u64, len: u64, seed: u64) -> Result<(Cmd, Data), String> {
        Ok((Cmd::write(self.nsid, pos / self.lba, self.nlb(len)), self.pat(pos, len, seed)?.into()))
    }
    /// NVM read of `len` bytes at byte `pos` into a sentinel-filled buffer.
    fn r(&self, pos: u64, len: u64) -> Result<(Cmd, Data), String> {
        Ok((Cmd::read(self.nsid, pos / self.lba, self.nlb(len)), self.sentinel(len)?.into()))
    }
    fn dsm(&self, ranges: &[(u64, u64)]) -> Result<(Cmd, Data), String> {
        let mut b = self.alloc(4096)?;
        for (i, &(pos, len)) in ranges.iter().enumerate() {
            let r = DsmRange { cattr: 0, nlb: self.nlb(len), slba: pos / self.lba };
            b[i * 16..i * 16 + 16].copy_from_slice(&r.to_bytes());
        }
        Ok((Cmd::dsm(self.nsid, ranges.len() as u32, true), b.into()))
    }
    fn backing_len(&self) -> Option<u64> {
        self.backing.as_ref().and_then(|p| fs::metadata(p).ok()).map(|m| m.len())
    }
    fn oracle_open(&self, p: &Path, write: bool) -> Result<fs::File, String> {
        let flags = if self.oracle_direct { libc::O_DIRECT } else { 0 };
        fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(flags)
            .open(p)
            .map_err(|e| format!("std open {}: {e}", p.display()))
    }
    fn oracle_read(&self, pos: u64, len: u64) -> Result<Option<Vec<u8>>, String> {
        let Some(p) = &self.oracle else { return Ok(None) };
        let f = self.oracle_open(p, false)?;
        if self.oracle_direct {
            // O_DIRECT wants aligned memory: a page-aligned buffer, copied out.
            let mut b = Buffer::alloc(len as usize, 4096).map_err(|e| format!("oracle buffer: {e}"))?;
            f.read_exact_at(&mut b, pos).map_err(|e| format!("std O_DIRECT read of {}: {e}", p.display()))?;
            return Ok(Some(b.to_vec()));
        }
        let mut v = vec![0u8; len as usize];
        f.read_exact_at(&mut v, pos).map_err(|e| format!("std read of {}: {e}", p.display()))?;
        Ok(Some(v))
    }
    fn oracle_write(&self, pos: u64, bytes: &[u8]) -> Result<bool, String> {
        let Some(p) = &self.oracle else { return Ok(false) };
        let f = self.oracle_open(p, true)?;
        if self.oracle_direct {
            let b = Buffer::from_slice(bytes, 4096).map_err(|e| format!("oracle buffer: {e}"))?;
            f.write_all_at(&b, pos).map_err(|e| format!("std O_DIRECT write of {}: {e}", p.display()))?;
        } else {
            f.write_all_at(bytes, pos).map_err(|e| format!("std write of {}: {e}", p.display()))?;
        }
        f.sync_all().map_err(|e| format!("std fsync of {}: {e}", p.display()))?;
        Ok(true)
    }
    /// Reads back through std::fs and compares, when the device has a path.
    fn oracle_check(&self, pos: u64, want: &[u8], seed: Option<u64>, what: &str) -> Result<(), String> {
        if let Some(got) = self.oracle_read(pos, want.len() as u64)? {
            compare(&got, want, pos, seed, &format!("{what} (read back with std::fs)"))?;
        }
        Ok(())
    }
}

fn write_pattern(r: &mut Runner<'_>, ctx: &Ctx, pos: u64, len: u64, chunk: u64, seed: u64) -> Result<usize, String> {
    let parts = split(pos, len, chunk);
    let ops = parts.iter().map(|&(p, l)| ctx.w(p, l, seed)).collect::<Result<Vec<_>, _>>()?;
    for (o, (p, l)) in r.run(ops)?.into_iter().zip(&parts) {
        done(o, &format!("write [{p}, +{l})"), Some(*l))?;
    }
    Ok(parts.len())
}

fn read_range(r: &mut Runner<'_>, ctx: &Ctx, pos: u64, len: u64, chunk: u64) -> Result<Vec<u8>, String> {
    let parts = split(pos, len, chunk);
    let ops = parts.iter().map(|&(p, l)| ctx.r(p, l)).collect::<Result<Vec<_>, _>>()?;
    let mut v = Vec::with_capacity(len as usize);
    for (o, (p, l)) in r.run(ops)?.into_iter().zip(&parts) {
        let d = done(o, &format!("read [{p}, +{l})"), Some(*l))?;
        v.extend(data_bytes(&d));
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------

/// The gate: the device is what was asked for, and (async) a queue can be made.
fn case_open(ctx: &Ctx) -> Res {
    let id = ctx.dev.ident();
    let g = ctx.dev.geometry();
    let want = ctx.row.dev_kind();
    ensure!(id.kind == want, "ident().kind is {:?}, expected {want:?}", id.kind);
    ensure!(g.bytes == ctx.bytes, "geometry().bytes is {}, expected {}", g.bytes, ctx.bytes);
    ensure!(g.lba_size >= 512 && g.lba_size.is_power_of_two(), "lba_size {} is not a power of two >= 512", g.lba_size);
    ensure!(ctx.bytes % g.lba_size as u64 == 0, "lba_size {} does not divide the device size", g.lba_size);
    ensure!(g.nlbas == g.bytes / g.lba_size as u64, "nlbas {} != bytes / lba_size", g.nlbas);
    let mut zones_note = String::new();
    if let Some(ns) = &ctx.ns {
        ensure!(id.nsid == ns.nsid, "ident().nsid is {}, but sysfs says namespace {}", id.nsid, ns.nsid);
        ensure!(g.lba_size as u64 == ns.lba, "lba_size {}, but sysfs says {}", g.lba_size, ns.lba);
        match (ctx.row.zoned(), g.zones) {
            (false, None) => {}
            (false, Some(z)) => return Err(format!("a conventional namespace reports zones: {z:?}")),
            (true, None) => return Err("the zoned namespace reports no zones".into()),
            (true, Some(z)) => {
                ensure!(g.zoned == ZonedModel::HostManaged, "zoned model {:?}, expected host-managed", g.zoned);
                ensure!(
                    (z.zone_size, z.nr_zones) == (ns.zone_lbas, ns.nr_zones),
                    "zones {z:?}; sysfs says {} zones of {} LBAs",
                    ns.nr_zones,
                    ns.zone_lbas
                );
                ensure!(
                    z.zone_capacity > 0 && z.zone_capacity <= z.zone_size,
                    "zone capacity {} of a zone of {} LBAs",
                    z.zone_capacity,
                    z.zone_size
                );
                zones_note = format!(
                    "; {} zones of {} KiB, capacity {} KiB",
                    z.nr_zones,
                    z.zone_size * ctx.lba / KIB,
                    z.zone_capacity * ctx.lba / KIB
                );
            }
        }
    }
    let o = ctx.dev.opts();
    ensure!(
        (o.sqpoll, o.iopoll, o.direct) == (ctx.col.sqpoll(), ctx.col.iopoll(), ctx.row.direct()),
        "opts() say sqpoll={} iopoll={} direct={}; the column asked for sqpoll={} iopoll={} direct={}",
        o.sqpoll,
        o.iopoll,
        o.direct,
        ctx.col.sqpoll(),
        ctx.col.iopoll(),
        ctx.row.direct()
    );
    if ctx.row.direct() {
        ensure!(
            g.dio_offset_align > 0 && g.lba_size % g.dio_offset_align == 0,
            "direct=1: lba_size {} is not a multiple of dio_offset_align {}",
            g.lba_size,
            g.dio_offset_align
        );
        ensure!(
            g.dio_mem_align > 0 && ctx.dev.buffer_align() % g.dio_mem_align as usize == 0,
            "buffer_align {} is not a multiple of dio_mem_align {}",
            ctx.dev.buffer_align(),
            g.dio_mem_align
        );
    }
    let ifs = ctx.dev.interfaces();
    if let Some(s) = ctx.col.sync() {
        ensure!(ifs.sync == Some(s), "interfaces().sync is {:?}, asked for {s:?}", ifs.sync);
    }
    ensure!(
        ifs.r#async == Some(ctx.col.async_iface()),
        "interfaces().async is {:?}, asked for {:?}",
        ifs.r#async,
        ctx.col.async_iface()
    );
    let b = ctx.alloc(8192)?;
    ensure!(b.len() == 8192 && b.iter().all(|&x| x == 0), "alloc(8192) is not 8192 zeroed bytes");
    ensure!(b.as_ptr() as usize % ctx.dev.buffer_align() == 0, "alloc() returned a buffer not aligned to buffer_align");
    if ctx.is_async() {
        let q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue({QD}): {e}"))?;
        ensure!(
            q.capacity() == QD && q.outstanding() == 0,
            "a new queue has capacity {} / outstanding {}",
            q.capacity(),
            q.outstanding()
        );
        ensure!(q.interface() == ctx.col.async_iface(), "queue.interface() is {:?}", q.interface());
        *lock(&ctx.shared) = Some(q);
        for bad in [0, 4097] {
            match ctx.dev.queue(bad) {
                Err(Error::BadOpt { .. }) => {}
                Err(e) => return Err(format!("dev.queue({bad}): expected BadOpt, got {e}")),
                Ok(_) => return Err(format!("dev.queue({bad}) was accepted")),
            }
        }
    }
    Ok(format!("{} LBAs of {} B{zones_note}", g.nlbas, g.lba_size))
}

/// Pattern over the whole device, many commands (qd up to 16 for async), read back and
/// compared, the last LBA on its own, and std::fs as an independent witness both ways.
fn case_rw(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let chunk = if ctx.is_async() { 16 * KIB } else { 64 * KIB };
    let end = ctx.end();
    let mut notes = Vec::new();

    let s0 = seed();
    let head = pattern::at(0, 64 * KIB, s0);
    if ctx.oracle_write(0, &head)? {
        let got = read_range(&mut r, ctx, 0, 64 * KIB, chunk)?;
        compare(&got, &head, 0, Some(s0), "library read of data written with std::fs")?;
        notes.push("std::fs witness");
    }

    // The whole device, or (NVMe namespaces) its first `span` bytes and its last
    // TAIL_BYTES, each ending with a short command (their lengths are no chunk multiple).
    let regions = if ctx.span >= end { vec![(0, end)] } else { vec![(0, ctx.span), (end - TAIL_BYTES, TAIL_BYTES)] };
    let s = seed();
    let mut writes = 0;
    let mut wants = Vec::new();
    for &(pos, len) in &regions {
        writes += write_pattern(&mut r, ctx, pos, len, chunk, s)?;
        let got = read_range(&mut r, ctx, pos, len, chunk)?;
        let want = pattern::at(pos, len, s);
        let what =
            if len == end { "whole-device read back".to_string() } else { format!("read back of [{pos}, +{len})") };
        compare(&got, &want, pos, Some(s), &what)?;
        wants.push(want);
    }

    let s2 = seed();
    let last = end - ctx.lba;
    let o = r.one(ctx.w(last, ctx.lba, s2)?)?;
    done(o, "write of the last LBA", Some(ctx.lba))?;
    let got = read_range(&mut r, ctx, last - ctx.lba, 2 * ctx.lba, 2 * ctx.lba)?;
    let (tail_pos, _) = regions[regions.len() - 1];
    let tail_want = wants.last_mut().ok_or("no regions")?;
    fill(&mut tail_want[(last - tail_pos) as usize..], last, s2);
    compare(&got, &tail_want[(last - ctx.lba - tail_pos) as usize..], last - ctx.lba, Some(s2), "the last two LBAs")?;
    for (&(pos, _), want) in regions.iter().zip(&wants) {
        ctx.oracle_check(pos, want, Some(s), if regions.len() == 1 { "whole device" } else { "a patterned region" })?;
    }
    // The largest transfer the device takes, in one command (the whole device when it fits).
    let one = regions[0].1.min(ctx.dev.geometry().max_transfer / ctx.lba * ctx.lba);
    let what = if one == end { "one read of the whole device".to_string() } else { format!("one read of {one} bytes") };
    let d = done(r.one(ctx.r(0, one)?)?, &what, Some(one))?;
    compare(&data_bytes(&d), &wants[0][..one as usize], 0, Some(s), &what)?;
    r.finish()?;
    if regions.len() > 1 {
        notes.push("first and last LBAs of the namespace");
    }
    Ok(format!("{writes} writes of <= {chunk} B; {}", notes.join(", ")))
}

/// Several buffers per command (Data::Vec), both directions, NVM and file sets, and no
/// byte written past the transfer when the buffers are larger than it.
fn case_vectored(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let u = ctx.lba;

    // A: vectored NVM write, vectored file-set read with another split, plain read.
    let a = 128 * KIB;
    let s = seed();
    let mut bufs = Vec::new();
    let mut p = a;
    for k in [1, 2, 1, 3, 1] {
        bufs.push(ctx.pat(p, k * u, s)?);
        p += k * u;
    }
    let total = p - a;
    let o = r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(total)), Data::Vec(bufs)))?;
    done(o, "vectored NVM write of 5 buffers", Some(total))?;
    let rb = [3, 1, 2, 2].iter().map(|&k| ctx.sentinel(k * u)).collect::<Result<Vec<_>, _>>()?;
    let o = r.one((Cmd::fs_read(a, total), Data::Vec(rb)))?;
    let d = done(o, "vectored file read of 4 buffers", Some(total))?;
    ensure!(d.bufs().len() == 4, "the vectored read handed back {} buffers, not 4", d.bufs().len());
    let want = pattern::at(a, total, s);
    compare(&data_bytes(&d), &want, a, Some(s), "vectored write, vectored read")?;
    let got = read_range(&mut r, ctx, a, total, total)?;
    compare(&got, &want, a, Some(s), "vectored write, single-buffer read")?;
    ctx.oracle_check(a, &want, Some(s), "vectored write")?;

    // B: vectored file-set write, vectored NVM read of one-LBA buffers.
    let b = a + total + 4 * KIB;
    let s2 = seed();
    let mut bufs = Vec::new();
    let mut p = b;
    for k in [2, 2, 4] {
        bufs.push(ctx.pat(p, k * u, s2)?);
        p += k * u;
    }
    let total = p - b;
    let o = r.one((Cmd::fs_write(b, total), Data::Vec(bufs)))?;
    done(o, "vectored file write of 3 buffers", Some(total))?;
    let rb = (0..8).map(|_| ctx.sentinel(u)).collect::<Result<Vec<_>, _>>()?;
    let o = r.one((Cmd::read(ctx.nsid, b / u, 8), Data::Vec(rb)))?;
    let d = done(o, "vectored NVM read of 8 buffers", Some(total))?;
    let want = pattern::at(b, total, s2);
    compare(&data_bytes(&d), &want, b, Some(s2), "vectored file write, vectored NVM read")?;

    // Many buffers in one command, both directions.
    let m = b + total + 4 * KIB;
    let s3 = seed();
    let bufs = (0..32).map(|k| ctx.pat(m + k * u, u, s3)).collect::<Result<Vec<_>, _>>()?;
    done(r.one((Cmd::write(ctx.nsid, m / u, 32), Data::Vec(bufs)))?, "write of 32 buffers", Some(32 * u))?;
    let rb = (0..32).map(|_| ctx.sentinel(u)).collect::<Result<Vec<_>, _>>()?;
    let d = done(r.one((Cmd::read(ctx.nsid, m / u, 32), Data::Vec(rb)))?, "read into 32 buffers", Some(32 * u))?;
    compare(&data_bytes(&d), &pattern::at(m, 32 * u, s3), m, Some(s3), "32-buffer write, 32-buffer read")?;

    // C: buffers larger than the transfer: the bytes past it stay untouched.
    let rb = vec![ctx.sentinel(4 * u)?, ctx.sentinel(4 * u)?];
    let o = r.one((Cmd::read(ctx.nsid, b / u, 6), Data::Vec(rb)))?;
    let d = done(o, "read of 6 LBAs into 2 buffers of 4", Some(6 * u))?;
    let bytes = data_bytes(&d);
    compare(&bytes[..(6 * u) as usize], &want[..(6 * u) as usize], b, Some(s2), "read into larger buffers")?;
    ensure!(
        bytes[(6 * u) as usize..].iter().all(|&x| x == SENTINEL),
        "a 6-LBA read wrote past its transfer into the rest of the second buffer"
    );
    r.finish()?;
    Ok(String::new())
}

/// Requests reaching past the end are refused with OutOfRange before any I/O: data past
/// and at the end unchanged, file size unchanged, buffers handed back untouched.
fn case_out_of_range(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (u, n, end) = (ctx.lba, ctx.nlbas, ctx.end());
    let s = seed();
    if !ctx.nil() {
        write_pattern(&mut r, ctx, end - 2 * u, 2 * u, 2 * u, s)?;
    }
    let size0 = ctx.backing_len();
    let submitted0 = r.submitted();
    let s2 = seed();
    type Probe = (&'static str, Cmd, Data, &'static str, Option<(u64, u64, u64)>);
    let probes: Vec<Probe> = vec![
        (
            "NVM write across the end",
            Cmd::write(ctx.nsid, n - 1, 2),
            ctx.pat(end - u, 2 * u, s2)?.into(),
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
        (
            "NVM write of the first LBA past the end",
            Cmd::write(ctx.nsid, n, 1),
            ctx.pat(end, u, s2)?.into(),
            "LBAs",
            Some((n, n + 1, n)),
        ),
        (
            "NVM read across the end",
            Cmd::read(ctx.nsid, n - 1, 2),
            ctx.sentinel(2 * u)?.into(),
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
        (
            "NVM write whose slba+nlb overflows",
            Cmd::write(ctx.nsid, u64::MAX, 2),
            ctx.pat(0, 2 * u, s2)?.into(),
            "LBAs",
            None,
        ),
        (
            "file write across the end",
            Cmd::fs_write(end - u, 2 * u),
            ctx.pat(end - u, 2 * u, s2)?.into(),
            "bytes",
            Some((end - u, end + u, end)),
        ),
        ("file read past the end", Cmd::fs_read(end, u), ctx.sentinel(u)?.into(), "bytes", Some((end, end + u, end))),
        (
            "file write whose offset+len overflows",
            Cmd::fs_write(u64::MAX / u * u, u),
            ctx.pat(0, u, s2)?.into(),
            "bytes",
            None,
        ),
        (
            "write zeroes across the end",
            Cmd::write_zeroes(ctx.nsid, n - 1, 2),
            Data::None,
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
        ("file trim across the end", Cmd::fs_trim(end - u, 2 * u), Data::None, "bytes", Some((end - u, end + u, end))),
        (
            "DSM deallocate of a range across the end",
            ctx.dsm(&[(end - u, 2 * u)])?.0,
            ctx.dsm(&[(end - u, 2 * u)])?.1,
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
    ];
    let count = probes.len();
    for (what, cmd, data, unit, range) in probes {
        let before = data_bytes(&data);
        let ids = buf_ids(&data);
        let (e, back) = refused(r.one((cmd, data))?, what)?;
        match &e {
            Error::OutOfRange { unit: got_unit, start, end: e_end, limit, .. } => {
                ensure!(*got_unit == unit, "{what}: OutOfRange in {got_unit}, expected {unit}");
                if let Some((s0, e0, l0)) = range {
                    ensure!(
                        (*start, *e_end, *limit) == (s0, e0, l0),
                        "{what}: OutOfRange [{start}, {e_end}) limit {limit}, expected [{s0}, {e0}) limit {l0}"
                    );
                }
            }
            other => return Err(format!("{what}: expected Error::OutOfRange, got {other:?}")),
        }
        ensure!(e.errno() == Some(libc::ERANGE), "{what}: errno() is {:?}, expected ERANGE", e.errno());
        ensure!(buf_ids(&back) == ids, "{what}: the refusal did not hand back the same buffers");
        ensure!(data_bytes(&back) == before, "{what}: the handed-back buffer was changed (I/O happened?)");
    }
    ensure!(
        r.submitted() == submitted0,
        "refused submissions were counted as submitted ({} -> {})",
        submitted0,
        r.submitted()
    );
    if !ctx.nil() {
        let got = read_range(&mut r, ctx, end - 2 * u, 2 * u, 2 * u)?;
        let want = pattern::at(end - 2 * u, 2 * u, s);
        compare(&got, &want, end - 2 * u, Some(s), "the last two LBAs after the refused requests")?;
        ctx.oracle_check(end - 2 * u, &want, Some(s), "the last two LBAs")?;
    }
    ensure!(ctx.backing_len() == size0, "the file size changed: {size0:?} -> {:?}", ctx.backing_len());
    if ctx.row.dev_kind() == DevKind::File {
        ensure!(size0 == Some(DEV_BYTES), "the file is {size0:?} bytes, expected {DEV_BYTES}");
    }
    r.finish()?;
    Ok(format!("{count} requests refused"))
}

fn want_misaligned(o: Outcome, what: &str, field: &str, before: &[u8]) -> Result<(), String> {
    let (e, back) = refused(o, what)?;
    match &e {
        Error::Misaligned { what: w, .. } if *w == field => {}
        other => return Err(format!("{what}: expected Error::Misaligned {{ what: {field:?} }}, got {other:?}")),
    }
    ensure!(e.errno() == Some(libc::EINVAL), "{what}: errno() {:?}, expected EINVAL", e.errno());
    ensure!(data_bytes(&back) == before, "{what}: the handed-back buffer was changed");
    Ok(())
}

/// A file-set command that is not whole LBAs, on NVMe passthrough: refused before any I/O,
/// or failed with EINVAL; never done.
fn whole_lbas_only(o: Outcome, what: &str) -> Result<String, String> {
    match o {
        Outcome::Done { status, .. } if status.is_ok() => Err(format!("{what} succeeded through NVMe passthrough")),
        Outcome::Done { status, .. } => {
            ensure!(status.errno() == Some(libc::EINVAL), "{what}: failed with {status}, expected errno EINVAL");
            Ok(format!("failed ({status})"))
        }
        Outcome::Rejected(e, _) => {
            ensure!(
                matches!(e, Error::BadCommand { .. } | Error::Misaligned { .. }),
                "{what}: refused with {e:?}, expected BadCommand, Misaligned or a failure with EINVAL"
            );
            Ok("refused".into())
        }
    }
}

/// direct=1: misaligned buffers, offsets and lengths are refused with Misaligned and no
/// I/O. Buffered: misaligned buffers and byte offsets just work.
fn case_alignment(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let u = ctx.lba;
    let a = 256 * KIB;
    let len = 4 * u;
    let s_old = seed();
    write_pattern(&mut r, ctx, a, len, len, s_old)?;
    let old = pattern::at(a, len, s_old);
    let align = ctx.dev.buffer_align();
    let s = seed();
    let misaligned = |off: usize, pos: u64, fill_seed: Option<u64>| -> Result<Buffer, String> {
        let mut b = Buffer::with_alignment(len as usize, align, off).map_err(|e| format!("with_alignment: {e}"))?;
        match fill_seed {
            Some(sd) => fill(&mut b, pos, sd),
            None => b.fill(SENTINEL),
        }
        ensure!(b.as_ptr() as usize % align == off, "with_alignment gave a buffer at the wrong offset");
        Ok(b)
    };
    if ctx.row.direct() {
        let off_align = ctx.dev.geometry().dio_offset_align as u64;
        let b = misaligned(1, a, Some(s))?;
        let before = b.to_vec();
        want_misaligned(
            r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), b.into()))?,
            "write from a misaligned buffer",
            "buffer address",
            &before,
        )?;
        let b = misaligned(1, a, None)?;
        let before = b.to_vec();
        want_misaligned(
            r.one((Cmd::read(ctx.nsid, a / u, ctx.nlb(len)), b.into()))?,
            "read into a misaligned buffer",
            "buffer address",
            &before,
        )?;
        let v = vec![ctx.pat(a, u, s)?, {
            let mut b = Buffer::with_alignment(3 * u as usize, align, 1).map_err(|e| format!("with_alignment: {e}"))?;
            fill(&mut b, a + u, s);
            b
        }];
        let before: Vec<u8> = v.iter().flat_map(|b| b.iter().copied()).collect();
        want_misaligned(
            r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), Data::Vec(v)))?,
            "vectored write, second buffer misaligned",
            "buffer address",
            &before,
        )?;
        let mut checked = 4;
        if off_align >= 16 {
            let half = off_align / 2;
            let b = ctx.pat(a + half, len, s)?;
            let before = b.to_vec();
            want_misaligned(
                r.one((Cmd::fs_write(a + half, len), b.into()))?,
                "file write at a misaligned offset",
                "offset",
                &before,
            )?;
            let b = ctx.pat(a, len, s)?;
            let before = b.to_vec();
            want_misaligned(
                r.one((Cmd::fs_write(a, len - half), b.into()))?,
                "file write of a misaligned length",
                "length",
                &before,
            )?;
            let v = vec![ctx.pat(a, half, s)?, ctx.pat(a + half, len - half, s)?];
            let before: Vec<u8> = v.iter().flat_map(|b| b.iter().copied()).collect();
            want_misaligned(
                r.one((Cmd::fs_write(a, len), Data::Vec(v)))?,
                "vectored write with a misaligned buffer length",
                "buffer length",
                &before,
            )?;
            checked += 3;
        }
        let got = read_range(&mut r, ctx, a, len, len)?;
        compare(&got, &old, a, Some(s_old), "data after the refused misaligned writes")?;
        ctx.oracle_check(a, &old, Some(s_old), "data after the refused misaligned writes")?;
        r.finish()?;
        Ok(format!("{checked} misaligned requests refused"))
    } else {
        let b = misaligned(1, a, Some(s))?;
        done(
            r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), b.into()))?,
            "write from a misaligned buffer",
            Some(len),
        )?;
        let b = misaligned(3, a, None)?;
        let d = done(
            r.one((Cmd::read(ctx.nsid, a / u, ctx.nlb(len)), b.into()))?,
            "read into a misaligned buffer",
            Some(len),
        )?;
        let mut want = pattern::at(a, len, s);
        compare(&data_bytes(&d), &want, a, Some(s), "misaligned write, misaligned read")?;
        let (off, l) = (1000u64, 1000u64);
        if ctx.passthru {
            // NVMe passthrough moves whole LBAs: file-set I/O that is not whole LBAs fails
            // (EINVAL) or is refused, and moves nothing.
            let mut b = Buffer::with_alignment(l as usize, align, 5).map_err(|e| format!("with_alignment: {e}"))?;
            fill(&mut b, a + off, seed());
            let w = whole_lbas_only(r.one((Cmd::fs_write(a + off, l), b.into()))?, "file write of 1000 bytes at 1000")?;
            let mut b = Buffer::with_alignment(l as usize, align, 7).map_err(|e| format!("with_alignment: {e}"))?;
            b.fill(SENTINEL);
            let rd = whole_lbas_only(r.one((Cmd::fs_read(a + off, l), b.into()))?, "file read of 1000 bytes at 1000")?;
            let d =
                done(r.one((Cmd::fs_read(a, len), ctx.sentinel(len)?.into()))?, "file read of whole LBAs", Some(len))?;
            compare(&data_bytes(&d), &want, a, Some(s), "data after a failed unaligned file write")?;
            ctx.oracle_check(a, &want, Some(s), "after misaligned writes")?;
            r.finish()?;
            return Ok(format!(
                "passthrough: misaligned buffers accepted; file-set I/O that is not whole LBAs: write {w}, read {rd}"
            ));
        }
        // Byte-granular file-set I/O at an offset and length that are no LBA multiple.
        let s2 = seed();
        let mut b = Buffer::with_alignment(l as usize, align, 5).map_err(|e| format!("with_alignment: {e}"))?;
        fill(&mut b, a + off, s2);
        done(r.one((Cmd::fs_write(a + off, l), b.into()))?, "file write of 1000 bytes at byte offset 1000", Some(l))?;
        fill(&mut want[off as usize..(off + l) as usize], a + off, s2);
        let d = done(r.one((Cmd::fs_read(a, len), ctx.sentinel(len)?.into()))?, "file read", Some(len))?;
        compare(&data_bytes(&d), &want, a, Some(s2), "bytes around an unaligned write")?;
        let mut b = Buffer::with_alignment(l as usize, align, 7).map_err(|e| format!("with_alignment: {e}"))?;
        b.fill(SENTINEL);
        let d = done(r.one((Cmd::fs_read(a + off, l), b.into()))?, "unaligned file read", Some(l))?;
        compare(&data_bytes(&d), &want[off as usize..(off + l) as usize], a + off, Some(s2), "unaligned file read")?;
        ctx.oracle_check(a, &want, Some(s2), "after misaligned and unaligned writes")?;
        r.finish()?;
        Ok("buffered: misaligned buffers and byte offsets accepted and correct".into())
    }
}

/// Deallocation reads back as zeroes: file-set trim, NVM DSM deallocate (2 ranges) and
/// write zeroes, each on part of a patterned region; the rest stays intact.
fn case_trim(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let t = 512 * KIB;
    let len = 64 * KIB;
    let s = seed();
    write_pattern(&mut r, ctx, t, len, 16 * KIB, s)?;
    let size0 = ctx.backing_len();
    let o = r.one((Cmd::fs_trim(t + 4 * KIB, 16 * KIB), Data::None))?;
    done(o, "file trim of 16 KiB", None)?;
    let o = r.one(ctx.dsm(&[(t + 24 * KIB, 8 * KIB), (t + 40 * KIB, 4 * KIB)])?)?;
    done(o, "DSM deallocate of 2 ranges", None)?;
    let o = r.one((Cmd::write_zeroes(ctx.nsid, (t + 52 * KIB) / ctx.lba, ctx.nlb(8 * KIB)), Data::None))?;
    done(o, "write zeroes of 8 KiB", None)?;
    let got = read_range(&mut r, ctx, t, len, 16 * KIB)?;
    let mut want = pattern::at(t, len, s);
    // Deallocated ranges read back as the device's deallocated value (files: holes, so
    // zeroes; NVMe: what DLFEAT says); write zeroes always reads back zeroes.
    for (p, l, zeroes) in [(4, 16, false), (24, 8, false), (40, 4, false), (52, 8, true)] {
        let range = (p * KIB) as usize..((p + l) * KIB) as usize;
        match (zeroes, ctx.dealloc.byte()) {
            (true, _) => want[range].fill(0),
            (false, Some(b)) => want[range].fill(b),
            // Not reported: whatever is there (the rest must still be intact).
            (false, None) => want[range.clone()].copy_from_slice(&got[range]),
        }
    }
    compare(&got, &want, t, Some(s), "read after trim / DSM / write zeroes")?;
    ctx.oracle_check(t, &want, Some(s), "after trim")?;
    ensure!(ctx.backing_len() == size0, "trim changed the file size: {size0:?} -> {:?}", ctx.backing_len());
    r.finish()?;
    Ok(match &ctx.dealloc {
        Dealloc::Zeroes => "deallocated blocks read back as zeroes".into(),
        Dealloc::Ones => "deallocated blocks read back as 0xFF".into(),
        Dealloc::Unknown(why) => format!("deallocated blocks not compared ({why})"),
    })
}

fn case_flush(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let s = seed();
    let p = 768 * KIB;
    write_pattern(&mut r, ctx, p, 4 * KIB, 4 * KIB, s)?;
    done(r.one((Cmd::flush(ctx.nsid), Data::None))?, "NVM flush", None)?;
    done(r.one((Cmd::fs_flush(), Data::None))?, "file flush", None)?;
    let got = read_range(&mut r, ctx, p, 4 * KIB, 4 * KIB)?;
    compare(&got, &pattern::at(p, 4 * KIB, s), p, Some(s), "data after flush")?;
    r.finish()?;
    Ok(String::new())
}

/// Malformed requests are refused before any I/O with the error that says why.
fn case_bad_request(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let u = ctx.lba;
    let z = 800 * KIB;
    let s = seed();
    if !ctx.nil() {
        write_pattern(&mut r, ctx, z, 4 * u, 4 * u, s)?;
    }
    let s2 = seed();
    let mut bad_fs = Cmd::fs_read(0, u);
    bad_fs.sqe.opcode = 0xF5;
    ensure!(bad_fs.set == CmdSet::Fs, "Cmd::fs_read is not in the file set");
    type BadProbe = (&'static str, Cmd, Data, fn(&Error) -> bool);
    let mut probes: Vec<BadProbe> = vec![
        ("read of 4 LBAs into a 2-LBA buffer", Cmd::read(ctx.nsid, z / u, 4), ctx.sentinel(2 * u)?.into(), |e| {
            matches!(e, Error::BufferSize { .. })
        }),
        ("write of 4 LBAs from a 2-LBA buffer", Cmd::write(ctx.nsid, z / u, 4), ctx.pat(z, 2 * u, s2)?.into(), |e| {
            matches!(e, Error::BufferSize { .. })
        }),
        ("write with no buffer", Cmd::write(ctx.nsid, z / u, 1), Data::None, |e| matches!(e, Error::BufferSize { .. })),
        ("read of a namespace that does not exist", Cmd::read(ctx.nsid + 1, 0, 1), ctx.sentinel(u)?.into(), |e| {
            matches!(e, Error::BadCommand { .. })
        }),
        ("zero-length file read", Cmd::fs_read(0, 0), ctx.sentinel(u)?.into(), |e| {
            matches!(e, Error::BadCommand { .. })
        }),
        (
            "DSM of 2 ranges with a 16-byte buffer",
            Cmd::dsm(ctx.nsid, 2, true),
            Buffer::alloc(16, 16).map_err(|e| e.to_string())?.into(),
            |e| matches!(e, Error::BufferSize { .. }),
        ),
        (
            "admin command on the I/O path",
            Cmd::admin(Sqe { opcode: 0x06, nsid: 0, ..Sqe::default() }),
            ctx.sentinel(4096)?.into(),
            |e| matches!(e, Error::BadCommand { .. }),
        ),
        ("unknown file-set opcode", bad_fs, ctx.sentinel(u)?.into(), |e| matches!(e, Error::BadCommand { .. })),
    ];
    // On a generic char device every command is NVMe passthrough, and the kernel refuses a
    // command for another namespace itself (EINVAL, before the device sees it).
    let mut notes = Vec::new();
    let foreign = ctx.row.dev_kind() == DevKind::NvmeChar;
    if foreign {
        let i = probes.iter().position(|p| p.0 == "read of a namespace that does not exist").ok_or("no nsid probe")?;
        probes.remove(i);
        if ctx.nil() {
            notes
                .push("nil on a char device: the namespace check is the kernel's, which nil never reaches".to_string());
        } else {
            let what = "read of another namespace through a generic char device";
            match r.one((Cmd::read(ctx.nsid + 1, 0, 1), ctx.sentinel(u)?.into()))? {
                Outcome::Done { status, .. } => {
                    ensure!(!status.is_ok(), "{what} succeeded");
                    ensure!(status.errno() == Some(libc::EINVAL), "{what}: {status}, expected the kernel's EINVAL");
                    notes.push(format!("{what}: {status}"));
                }
                Outcome::Rejected(e, _) => {
                    ensure!(matches!(e, Error::BadCommand { .. }), "{what}: refused with {e:?}");
                    notes.push(format!("{what}: refused"));
                }
            }
        }
    }
    let count = probes.len();
    let submitted0 = r.submitted();
    for (what, cmd, data, ok) in probes {
        let before = data_bytes(&data);
        let (e, back) = refused(r.one((cmd, data))?, what)?;
        ensure!(ok(&e), "{what}: wrong error: {e:?}");
        ensure!(e.errno() == Some(libc::EINVAL), "{what}: errno() {:?}, expected EINVAL", e.errno());
        ensure!(data_bytes(&back) == before, "{what}: the handed-back buffer was changed");
    }
    ensure!(r.submitted() == submitted0, "refused submissions were counted as submitted");
    if !ctx.nil() {
        let got = read_range(&mut r, ctx, z, 4 * u, 4 * u)?;
        compare(&got, &pattern::at(z, 4 * u, s), z, Some(s), "data after refused requests")?;
    }
    r.finish()?;
    notes.insert(0, format!("{count} requests refused"));
    Ok(notes.join("; "))
}

/// Opens the cell's device again with one more option.
fn reopen(ctx: &Ctx, extra: &str) -> Result<(Ctx, String), String> {
    let opts_s = [ctx.col.opts(), if ctx.row.direct() { "direct=1" } else { "" }, extra]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    let opts: Opts = opts_s.parse().map_err(|e| format!("option string {opts_s:?}: {e}"))?;
    let dev = Device::open(&ctx.uri, &opts).map_err(|e| format!("open {} with {opts_s:?}: {e}", ctx.uri))?;
    let c = Ctx {
        dev,
        col: ctx.col,
        row: ctx.row,
        uri: ctx.uri.clone(),
        oracle: None,
        backing: None,
        oracle_direct: false,
        lba: ctx.lba,
        nlbas: ctx.nlbas,
        nsid: ctx.nsid,
        bytes: ctx.bytes,
        span: ctx.span,
        dealloc: ctx.dealloc.clone(),
        passthru: ctx.passthru,
        ns: ctx.ns.clone(),
        zone: ctx.zone,
        shared: Mutex::new(None),
    };
    Ok((c, opts_s))
}

/// A command the open mode forbids is refused before any I/O, or fails with the errno
/// the OS gave; either way nothing is written.
fn forbidden(o: Outcome, what: &str, errno: i32) -> Result<String, String> {
    match o {
        Outcome::Done { status, .. } if status.is_ok() => Err(format!("{what} succeeded")),
        Outcome::Done { status, .. } => {
            ensure!(status.errno() == Some(errno), "{what}: failed with {status}, expected errno {errno}");
            ensure!(
                status.sc() == 0x15 && status.dnr(),
                "{what}: errno {errno} should map to 0x15 Operation Denied + DNR, got {status}"
            );
            Ok(format!("failed: {status}"))
        }
        Outcome::Rejected(e, _) => {
            ensure!(
                matches!(e, Error::BadCommand { .. }),
                "{what}: refused with {e:?}, expected BadCommand or errno {errno}"
            );
            Ok("refused before I/O".into())
        }
    }
}

/// Error mapping. Open modes: a write on a rdonly=1 device and a read on a wronly=1 one are
/// refused (or fail with EBADF as Operation Denied) and write nothing. An OS failure the
/// library cannot foresee (the file shrank under an open device, so a read finds EOF)
/// comes back as a failed status with the errno kept, on every interface alike.
fn case_errno(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, 4)?;
    let u = ctx.lba;
    let s = seed();
    write_pattern(&mut r, ctx, 0, 2 * u, 2 * u, s)?;
    let mut notes = Vec::new();
    {
        let (ro, opts_s) = reopen(ctx, "rdonly=1")?;
        let mut rr = Runner::new(&ro, 4)?;
        let d = done(rr.one(ro.r(0, u)?)?, "read on a rdonly=1 device", Some(u))?;
        // Another open of a ramdisk size is another ramdisk: it starts zeroed.
        let want = if ctx.row == RowKind::Ram { vec![0; u as usize] } else { pattern::at(0, u, s) };
        compare(&data_bytes(&d), &want, 0, Some(s), "read on a rdonly=1 device")?;
        let what = format!("write on a device opened with {opts_s:?}");
        notes.push(format!("rdonly write {}", forbidden(rr.one(ro.w(0, u, seed())?)?, &what, libc::EBADF)?));
        let what = format!("file trim on a device opened with {opts_s:?}");
        forbidden(rr.one((Cmd::fs_trim(0, u), Data::None))?, &what, libc::EBADF)?;
        let what = format!("write zeroes on a device opened with {opts_s:?}");
        forbidden(rr.one((Cmd::write_zeroes(ctx.nsid, 0, 1), Data::None))?, &what, libc::EBADF)?;
        rr.finish()?;
    }
    if ctx.col == Col::Mmap {
        // A mapping needs read access: a write-only open is refused, with the reason.
        let e = reopen(ctx, "wronly=1").err().ok_or("sync=mmap accepted wronly=1")?;
        ensure!(e.contains("read access"), "wronly=1 with sync=mmap refused without the reason: {e}");
        notes.push("wronly refused at open".into());
    } else {
        let (wo, opts_s) = reopen(ctx, "wronly=1")?;
        let mut rw = Runner::new(&wo, 4)?;
        let what = format!("read on a device opened with {opts_s:?}");
        notes.push(format!("wronly read {}", forbidden(rw.one(wo.r(0, u)?)?, &what, libc::EBADF)?));
        rw.finish()?;
    }
    let got = read_range(&mut r, ctx, 0, 2 * u, 2 * u)?;
    compare(&got, &pattern::at(0, 2 * u, s), 0, Some(s), "data after the forbidden commands")?;

    if ctx.col == Col::Mmap {
        // Touching a mapping past the end of a file that shrank raises SIGBUS (as for any
        // mmap user); sync=mmap documents it and this case does not provoke it.
        notes.push("shrunk file not exercised: a mapping faults (SIGBUS) past a shrunk file's end".into());
    } else if ctx.row.dev_kind() == DevKind::File {
        let path = ctx.backing.clone().ok_or("a file row without a path")?;
        let f = fs::OpenOptions::new().write(true).open(&path).map_err(|e| format!("std open: {e}"))?;
        let end = ctx.end();
        f.set_len(end - 4 * u).map_err(|e| format!("shrink the file: {e}"))?;
        let o = ctx.r(end - 2 * u, 2 * u).and_then(|op| r.one(op));
        // A read that starts before the new end and runs past it moves only part of its
        // bytes: that is a failure too, never a success with a smaller result (callers
        // such as the fio engine rely on it: success means every byte moved).
        let straddle = ctx.r(end - 5 * u, 2 * u).and_then(|op| r.one(op));
        let restored = f.set_len(end).map_err(|e| format!("restore the file size: {e}"));
        match straddle? {
            Outcome::Done { status, result, .. } if status.is_ok() => {
                return Err(format!(
                    "a read of 2 LBAs across the end of a file that shrank under the device succeeded \
                     (result {result} of {} bytes); a short transfer must fail with EIO",
                    2 * u
                ));
            }
            Outcome::Done { status, .. } => {
                ensure!(
                    status.errno() == Some(libc::EIO),
                    "a short read across a shrunk file's end failed with {status}, not EIO"
                );
            }
            Outcome::Rejected(e, _) => {
                return Err(format!("a read across a shrunk file's end was refused before I/O: {e}"))
            }
        }
        let status = match o? {
            Outcome::Done { status, result, .. } if status.is_ok() => {
                return Err(format!(
                    "a read of 2 LBAs past the end of a file that shrank under the device succeeded (result {result}); \
                     psync reports this as EIO"
                ));
            }
            Outcome::Done { status, .. } => status,
            Outcome::Rejected(e, _) => {
                return Err(format!("a read past a shrunk file's end was refused before I/O: {e}"))
            }
        };
        restored?;
        let errno = status.errno().ok_or_else(|| format!("the failure carries no errno: {status}"))?;
        let mapped = ioswitch::spec::errno_to_status(errno);
        ensure!(
            status.code() == mapped.code() && status.dnr() == mapped.dnr(),
            "errno {errno} came back as {status}, but the mapping table says {mapped}"
        );
        notes.push(format!("read past a shrunk file: {status}"));
    }
    r.finish()?;
    Ok(notes.join("; "))
}

/// Several threads on one device, each with its own queue (or its own `pass` calls) and
/// its own region, verified by each thread and again after all joined.
fn case_multi(ctx: &Ctx) -> Res {
    const THREADS: u64 = 4;
    let chunk = 16 * KIB;
    let region = ctx.span / THREADS / chunk * chunk;
    let results: Vec<Result<u64, String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                sc.spawn(move || -> Result<u64, String> {
                    let mut r = Runner::new(ctx, 8)?;
                    let s = seed();
                    let pos = t * region;
                    write_pattern(&mut r, ctx, pos, region, chunk, s)?;
                    if !ctx.nil() {
                        let got = read_range(&mut r, ctx, pos, region, chunk)?;
                        compare(&got, &pattern::at(pos, region, s), pos, Some(s), &format!("thread {t}'s own region"))?;
                    }
                    r.finish()?;
                    Ok(s)
                })
            })
            .collect();
        hs.into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join().unwrap_or_else(|_| Err(format!("thread {t} panicked: {}", lock(&PANICS).join("; "))))
            })
            .collect()
    });
    let seeds = results
        .into_iter()
        .enumerate()
        .map(|(t, r)| r.map_err(|e| format!("thread {t}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if !ctx.nil() {
        let mut r = Runner::new(ctx, QD)?;
        let got = read_range(&mut r, ctx, 0, THREADS * region, chunk)?;
        for (t, s) in seeds.iter().enumerate() {
            let pos = t as u64 * region;
            let slice = &got[pos as usize..(pos + region) as usize];
            compare(
                slice,
                &pattern::at(pos, region, *s),
                pos,
                Some(*s),
                &format!("thread {t}'s region after all joined"),
            )?;
        }
        r.finish()?;
    }
    Ok(format!("{THREADS} threads x {} KiB", region / KIB))
}

/// submit on a full queue is refused with Busy and the data handed back; after reaping,
/// the same data goes in.
fn case_queue_full(ctx: &Ctx) -> Res {
    let u = ctx.lba;
    let mut q = ctx.dev.queue(4).map_err(|e| format!("dev.queue(4): {e}"))?;
    let mut got: Vec<Completion> = Vec::new();
    for i in 0..4u64 {
        let (c, d) = ctx.r(i * u, u)?;
        q.submit(&c, d, i).map_err(|e| format!("submit #{i} of 4 on a depth-4 queue: {e}"))?;
    }
    ensure!(q.outstanding() == 4, "outstanding {} after 4 submits", q.outstanding());
    let w = 384 * KIB;
    let s = seed();
    let data = Data::Vec(vec![ctx.pat(w, u, s)?, ctx.pat(w + u, u, s)?]);
    let ids = buf_ids(&data);
    let before = data_bytes(&data);
    let cmd = Cmd::write(ctx.nsid, w / u, 2);
    let rej = match q.submit(&cmd, data, 4) {
        Ok(()) => return Err("a 5th submit on a full depth-4 queue was accepted".into()),
        Err(rej) => rej,
    };
    ensure!(
        matches!(rej.error, Error::Busy { depth: 4 }),
        "a full queue said {:?}, expected Busy {{ depth: 4 }}",
        rej.error
    );
    ensure!(rej.error.errno() == Some(libc::EBUSY), "Busy errno() {:?}", rej.error.errno());
    ensure!(
        buf_ids(&rej.data) == ids && data_bytes(&rej.data) == before,
        "Busy did not hand back the same buffers unchanged"
    );
    ensure!(matches!(rej.data, Data::Vec(_)), "Busy handed back Data::Vec as another variant");
    ensure!(q.stats().submitted == 4, "the refused submit was counted: submitted {}", q.stats().submitted);
    ensure!(q.outstanding() == 4, "outstanding {} after the refused submit", q.outstanding());
    let n = q.wait(1, |c| got.push(c)).map_err(|e| format!("wait(1): {e}"))?;
    ensure!((1..=4).contains(&n), "wait(1) on a full queue reaped {n}");
    q.submit(&cmd, rej.data, 4).map_err(|e| format!("submit after reaping: {e}"))?;
    // Full again, with a command that carries no data.
    let mut extra = 0;
    while q.outstanding() < 4 {
        let (c, d) = ctx.r(0, u)?;
        q.submit(&c, d, 5 + extra).map_err(|e| format!("refill: {e}"))?;
        extra += 1;
    }
    match q.submit(&Cmd::flush(ctx.nsid), Data::None, 99) {
        Ok(()) => return Err("a flush on a full queue was accepted".into()),
        Err(rej) => {
            ensure!(
                matches!(rej.error, Error::Busy { .. }) && matches!(rej.data, Data::None),
                "flush on a full queue: {:?}",
                rej.error
            )
        }
    }
    q.drain(|c| got.push(c)).map_err(|e| format!("drain: {e}"))?;
    let total = 5 + extra;
    ensure!(got.len() as u64 == total, "{} completions for {total} accepted submits", got.len());
    let mut tags: Vec<u64> = got.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    ensure!(tags == (0..total).collect::<Vec<_>>(), "completion tags {tags:?}");
    for c in &got {
        ensure!(c.status.is_ok(), "tag {}: {}", c.tag, c.status);
    }
    let st = q.stats();
    ensure!(st.submitted == total && st.completed == total, "stats {st:?}, expected {total} submitted and completed");
    drop(q);
    if !ctx.nil() {
        let mut r = Runner::new(ctx, QD)?;
        let got = read_range(&mut r, ctx, w, 2 * u, 2 * u)?;
        compare(&got, &pattern::at(w, 2 * u, s), w, Some(s), "the write that was first refused with Busy")?;
        r.finish()?;
    }
    Ok(String::new())
}

/// drain, poke and wait: each reaps what it promises, every tag exactly once.
fn case_drain(ctx: &Ctx) -> Res {
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    let mut got: Vec<Completion> = Vec::new();
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    ensure!(q.drain(|c| got.push(c)).map_err(e("drain"))? == 0, "drain on an empty queue reaped something");
    ensure!(q.poke(0, |c| got.push(c)).map_err(e("poke"))? == 0, "poke on an empty queue reaped something");
    ensure!(q.wait(1, |c| got.push(c)).map_err(e("wait"))? == 0, "wait(1) on an empty queue reaped something");
    ensure!(got.is_empty(), "callbacks ran on an empty queue");

    let d = 640 * KIB;
    let blk = 4 * KIB;
    let s = seed();
    for i in 0..QD as u64 {
        let (c, data) = ctx.w(d + i * blk, blk, s)?;
        q.submit(&c, data, i).map_err(|e| format!("submit write #{i}: {e}"))?;
    }
    let n = q.drain(|c| got.push(c)).map_err(e("drain"))?;
    ensure!(n == QD && got.len() == QD as usize, "drain reaped {n} ({} callbacks) of {QD}", got.len());
    ensure!(q.outstanding() == 0, "outstanding {} after drain", q.outstanding());
    let mut tags: Vec<u64> = got.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    ensure!(tags == (0..QD as u64).collect::<Vec<_>>(), "drained tags {tags:?}");
    for c in got.drain(..) {
        ensure!(
            c.status.is_ok() && c.result == ctx.moved(blk),
            "write tag {}: {} result {}",
            c.tag,
            c.status,
            c.result
        );
    }

    // poke(1) reaps at most one and never waits; loop (bounded) until all came back.
    for i in 0..8u64 {
        let (c, data) = ctx.r(d + i * blk, blk)?;
        q.submit(&c, data, i).map_err(|e| format!("submit read #{i}: {e}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pokes = 0;
    while got.len() < 8 {
        ensure!(Instant::now() < deadline, "poke(1) reaped only {} of 8 in 10 s ({pokes} pokes)", got.len());
        let k = q.poke(1, |c| got.push(c)).map_err(e("poke"))?;
        ensure!(k <= 1, "poke(1) reaped {k}");
        pokes += 1;
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    ensure!(q.outstanding() == 0, "outstanding {} after all were poked out", q.outstanding());
    for c in got.drain(..) {
        ensure!(c.status.is_ok() && c.result == ctx.moved(blk), "read tag {}: {} result {}", c.tag, c.status, c.result);
        if !ctx.nil() {
            let pos = d + c.tag * blk;
            compare(
                &data_bytes(&c.data),
                &pattern::at(pos, blk, s),
                pos,
                Some(s),
                &format!("poked read tag {}", c.tag),
            )?;
        }
    }

    // wait(min) with min above what is outstanding waits for all of them, no longer.
    for i in 0..8u64 {
        let (c, data) = ctx.r(d + i * blk, blk)?;
        q.submit(&c, data, 100 + i).map_err(|e| format!("submit read #{i}: {e}"))?;
    }
    let n = q.wait(100, |c| got.push(c)).map_err(e("wait(100)"))?;
    ensure!(n == 8 && got.len() == 8 && q.outstanding() == 0, "wait(100) with 8 outstanding reaped {n}");
    for c in got.drain(..) {
        ensure!(c.status.is_ok() && (100..108).contains(&c.tag), "wait: tag {} status {}", c.tag, c.status);
    }
    let st = q.stats();
    ensure!(st.submitted == st.completed && st.submitted == QD as u64 + 16, "stats {st:?}");
    Ok(format!("{pokes} pokes"))
}

/// Dropping a queue with I/O in flight (committed, and not even committed): no crash, no
/// hang; afterwards every sector holds the old or the new data, and the device works.
fn case_drop(ctx: &Ctx) -> Res {
    let span = 256 * KIB;
    let chunk = 16 * KIB;
    let (a, b, c, d) = (seed(), seed(), seed(), seed());
    let mut r = Runner::new(ctx, QD)?;
    if !ctx.nil() {
        write_pattern(&mut r, ctx, 0, span, chunk, a)?;
        write_pattern(&mut r, ctx, span, span, chunk, c)?;
    }
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    for (i, (p, l)) in split(0, span, chunk).into_iter().enumerate() {
        let (cmd, data) = ctx.w(p, l, b)?;
        q.submit(&cmd, data, i as u64).map_err(|e| format!("submit #{i}: {e}"))?;
    }
    q.commit().map_err(|e| format!("commit: {e}"))?;
    let t = Instant::now();
    drop(q);
    let t1 = t.elapsed();
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    for (i, (p, l)) in split(span, span, chunk).into_iter().enumerate() {
        let (cmd, data) = ctx.w(p, l, d)?;
        q.submit(&cmd, data, i as u64).map_err(|e| format!("submit #{i}: {e}"))?;
    }
    drop(q);
    if ctx.nil() {
        let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue after the drops: {e}"))?;
        let (cmd, data) = ctx.r(0, 4 * KIB)?;
        q.submit(&cmd, data, 1).map_err(|e| format!("submit after the drops: {e}"))?;
        let n = q.drain(|_| {}).map_err(|e| format!("drain after the drops: {e}"))?;
        ensure!(n == 1, "a queue made after the drops reaped {n} of 1");
        return Ok(format!("drop took {} us", t1.as_micros()));
    }
    let got = read_range(&mut r, ctx, 0, 2 * span, chunk)?;
    let mut newer = [0usize; 2];
    for (half, (old, new)) in [(a, b), (c, d)].into_iter().enumerate() {
        for sec in 0..span / 512 {
            let pos = half as u64 * span + sec * 512;
            let g = &got[pos as usize..pos as usize + 512];
            if g == pattern::at(pos, 512, new).as_slice() {
                newer[half] += 1;
            } else if g != pattern::at(pos, 512, old).as_slice() {
                return Err(format!(
                    "sector {} after dropping a queue ({}) holds neither the old nor the new data: {}",
                    pos / 512,
                    if half == 0 { "committed writes" } else { "uncommitted writes" },
                    describe(u64::from_le_bytes(g[..8].try_into().unwrap_or_default()), pos, Some(new))
                ));
            }
        }
    }
    let s = seed();
    write_pattern(&mut r, ctx, 0, 32 * KIB, chunk, s)?;
    let got = read_range(&mut r, ctx, 0, 32 * KIB, chunk)?;
    compare(&got, &pattern::at(0, 32 * KIB, s), 0, Some(s), "a round trip after the drops")?;
    r.finish()?;
    let sectors = span / 512;
    Ok(format!(
        "after drop: {}/{sectors} committed and {}/{sectors} uncommitted sectors written; drop took {} us",
        newer[0],
        newer[1],
        t1.as_micros()
    ))
}

/// stats(): submitted counts what submit accepted, completed what was reaped; syscalls is
/// 0 for interfaces without any and > 0 for those built on syscalls.
fn case_stats(ctx: &Ctx) -> Res {
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    let s0 = q.stats();
    ensure!(s0.submitted == 0 && s0.completed == 0, "a new queue's stats are {s0:?}");
    let p = 900 * KIB;
    let blk = 4 * KIB;
    let s = seed();
    for i in 0..8u64 {
        let (c, d) = ctx.w(p + i * blk, blk, s)?;
        q.submit(&c, d, i).map_err(|e| format!("submit: {e}"))?;
    }
    q.drain(|_| {}).map_err(|e| format!("drain: {e}"))?;
    let mid = q.stats();
    ensure!(mid.submitted == 8 && mid.completed == 8, "after 8 writes: {mid:?}");
    for i in 0..8u64 {
        let (c, d) = ctx.r(p + i * blk, blk)?;
        q.submit(&c, d, 10 + i).map_err(|e| format!("submit: {e}"))?;
    }
    q.submit(&Cmd::flush(ctx.nsid), Data::None, 20).map_err(|e| format!("submit flush: {e}"))?;
    let (c, d) = ctx.r(ctx.end(), ctx.lba)?;
    ensure!(q.submit(&c, d, 21).is_err(), "an out-of-range read was accepted");
    q.drain(|_| {}).map_err(|e| format!("drain: {e}"))?;
    let st = q.stats();
    ensure!(st.submitted == 17 && st.completed == 17, "after 17 accepted and 1 refused: {st:?}");
    ensure!(st.syscalls >= mid.syscalls, "syscalls went down: {} -> {}", mid.syscalls, st.syscalls);
    let zero = ctx.nil() || (ctx.row == RowKind::Ram && ctx.col == Col::Emu);
    if zero {
        ensure!(
            st.syscalls == 0,
            "{} on a {} made {} syscalls; it makes none",
            ctx.col.label(),
            ctx.row.tag(),
            st.syscalls
        );
        Ok("syscalls == 0".into())
    } else if ctx.col.sqpoll() || ctx.row == RowKind::Ram {
        Ok(format!("syscalls = {} (not asserted: may legitimately be 0)", st.syscalls))
    } else {
        ensure!(st.syscalls > 0, "{} on a {} counted 0 syscalls for 17 commands", ctx.col.label(), ctx.row.tag());
        Ok(format!("syscalls = {} for 17 commands", st.syscalls))
    }
}

/// Thread ids of this process's io_uring SQPOLL threads (`iou-sqp-PID`: kernel threads
/// in the thread group of the process that made the ring).
fn sqpoll_threads() -> Result<BTreeSet<u64>, String> {
    let mut v = BTreeSet::new();
    for e in fs::read_dir("/proc/self/task").map_err(|e| format!("/proc/self/task: {e}"))?.flatten() {
        let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("iou-sqp") {
            if let Ok(tid) = e.file_name().to_string_lossy().parse() {
                v.insert(tid);
            }
        }
    }
    Ok(v)
}

/// Interrupts so far of the controller's I/O queues (`nvme0q1`, `nvme0q2`, … in
/// /proc/interrupts; the admin queue q0 left out). Poll queues have no interrupt at all.
fn io_queue_irqs(ctrl: &str) -> Result<u64, String> {
    let text = fs::read_to_string("/proc/interrupts").map_err(|e| format!("/proc/interrupts: {e}"))?;
    let mut total = 0;
    let mut lines = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = f.last() else { continue };
        let Some(q) = name.strip_prefix(ctrl).and_then(|r| r.strip_prefix('q')) else { continue };
        if q == "0" || q.is_empty() || !q.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        total += f.iter().skip(1).map_while(|x| x.parse::<u64>().ok()).sum::<u64>();
        lines += 1;
    }
    ensure!(lines > 0, "no interrupt line of {ctrl}'s I/O queues in /proc/interrupts");
    Ok(total)
}

/// `k` reads of one LBA, one at a time (each waits for its completion), through a new
/// queue of `dev`; returns how many interrupts the controller's I/O queues took meanwhile.
fn irqs_for_reads(ctx: &Ctx, dev: &Device, ctrl: &str, k: u64) -> Result<u64, String> {
    let mut q = dev.queue(4).map_err(|e| format!("dev.queue(4): {e}"))?;
    let before = io_queue_irqs(ctrl)?;
    for i in 0..k {
        let lba = i % 64;
        let b = dev.alloc(ctx.lba as usize).map_err(|e| format!("alloc: {e}"))?;
        q.submit(&Cmd::read(ctx.nsid, lba, 1), b.into(), i).map_err(|e| format!("submit read #{i}: {}", e.error))?;
        let mut st = Status::OK;
        let n = q.drain(|c| st = c.status).map_err(|e| format!("drain read #{i}: {e}"))?;
        ensure!(n == 1 && st.is_ok(), "read #{i}: reaped {n}, status {st}");
    }
    let after = io_queue_irqs(ctrl)?;
    Ok(after.saturating_sub(before))
}

/// The io_uring tunables are in effect, not just accepted: with sqpoll=1 a new queue gets
/// its own kernel submission thread (a new `iou-sqp` thread of this process); with
/// iopoll=1 reads complete through the controller's poll queue, which has no interrupt
/// (checked against the same reads on a queue without iopoll, which do raise them).
fn case_tunables(ctx: &Ctx) -> Res {
    let mut notes = Vec::new();
    if ctx.col.sqpoll() {
        let before = sqpoll_threads()?;
        let mut q = ctx.dev.queue(4).map_err(|e| format!("dev.queue(4): {e}"))?;
        let (c, d) = ctx.r(0, ctx.lba)?;
        q.submit(&c, d, 1).map_err(|e| format!("submit: {}", e.error))?;
        let mut st = Status::OK;
        q.drain(|c| st = c.status).map_err(|e| format!("drain: {e}"))?;
        ensure!(st.is_ok(), "a read on the sqpoll queue failed: {st}");
        let after = sqpoll_threads()?;
        let new: Vec<&u64> = after.difference(&before).collect();
        ensure!(
            !new.is_empty(),
            "creating a queue with sqpoll=1 started no new iou-sqp thread (before: {before:?}, after: {after:?})"
        );
        drop(q);
        notes.push(format!("a new queue has its SQPOLL thread (iou-sqp, tid {})", new[0]));
    }
    if ctx.col.iopoll() {
        let ns = ctx.ns.as_ref().ok_or("iopoll on a device that is not NVMe")?;
        const K: u64 = 32;
        let polled = irqs_for_reads(ctx, &ctx.dev, &ns.ctrl, K)?;
        let plain = ctx.col.opts().replace(",iopoll=1", "");
        let plain = if ctx.row.direct() { format!("{plain},direct=1") } else { plain };
        let opts: Opts = plain.parse().map_err(|e| format!("{plain:?}: {e}"))?;
        let ctl = Device::open(&ctx.uri, &opts).map_err(|e| format!("open {} with {plain:?}: {e}", ctx.uri))?;
        let irq = irqs_for_reads(ctx, &ctl, &ns.ctrl, K)?;
        ensure!(irq > 0, "control: {K} reads without iopoll ({plain}) raised no interrupt on {}: cannot tell", ns.ctrl);
        ensure!(
            polled * 8 <= K,
            "{K} reads with iopoll=1 raised {polled} interrupts on {}'s I/O queues ({irq} without iopoll): \
             they did not complete through the poll queue",
            ns.ctrl
        );
        notes.push(format!("{K} reads at QD1: {polled} interrupts with iopoll=1, {irq} without"));
    }
    Ok(notes.join("; "))
}

// ---------------------------------------------------------------------------------------
// Zones (zoned namespace rows)
// ---------------------------------------------------------------------------------------

static ZONE_NEXT: AtomicU64 = AtomicU64::new(0);

/// The zone a new cell uses: the next one round the device (zone 0 left alone).
fn next_zone(nr_zones: u64) -> u64 {
    1 + ZONE_NEXT.fetch_add(1, Ordering::Relaxed) % nr_zones.saturating_sub(1).max(1)
}

/// Whether the cell's queue carries zone management: the block-layer queues (libaio,
/// io_uring, POSIX aio) refuse NVMe commands they have no operation for, so their cells
/// manage zones through `Device::pass` (sync=block: the block layer's zone ioctls) and
/// check that refusal once.
fn zone_mgmt_on_queue(ctx: &Ctx) -> bool {
    !(ctx.is_async() && matches!(ctx.col.async_iface(), AsyncIface::Libaio | AsyncIface::IoUring | AsyncIface::Posix))
}

/// Runs a zone management command through the queue, or `Device::pass` (see above).
fn zone_mgmt(r: &mut Runner<'_>, ctx: &Ctx, op: (Cmd, Data)) -> Result<Outcome, String> {
    if zone_mgmt_on_queue(ctx) {
        r.one(op)
    } else {
        Ok(pass_one(&ctx.dev, &op.0, op.1))
    }
}

/// A report of the one zone starting at `zslba`, through the cell's interface.
fn zone_report(r: &mut Runner<'_>, ctx: &Ctx, zslba: u64) -> Result<ZoneDesc, String> {
    let b = ctx.alloc(128)?;
    let o = zone_mgmt(r, ctx, (Cmd::zone_mgmt_recv(ctx.nsid, zslba, 128, true), b.into()))?;
    let d = done(o, &format!("zone management receive (report of the zone at LBA {zslba})"), None)?;
    let rep = ZoneReport::parse(&data_bytes(&d)).map_err(|e| format!("zone report: {e:?}"))?;
    ensure!(rep.nr_zones == 1 && rep.zones.len() == 1, "a partial report of one zone has {} zones", rep.nr_zones);
    let z = rep.zones[0];
    ensure!(z.zslba == zslba, "the report of the zone at LBA {zslba} describes the zone at {}", z.zslba);
    Ok(z)
}

fn zone_action(r: &mut Runner<'_>, ctx: &Ctx, zslba: u64, action: ZoneAction) -> Result<(), String> {
    let o = zone_mgmt(r, ctx, (Cmd::zone_mgmt_send(ctx.nsid, zslba, action, false), Data::None))?;
    done(o, &format!("zone management send: {} the zone at LBA {zslba}", action.as_str()), None)?;
    Ok(())
}

/// Resets the cell's zone; checks the report says empty, write pointer at the start.
fn zone_fresh(r: &mut Runner<'_>, ctx: &Ctx) -> Result<(Zoned, u64), String> {
    let z = ctx.dev.geometry().zones.ok_or("the zoned namespace reports no zones")?;
    let zslba = ctx.zone * z.zone_size;
    zone_action(r, ctx, zslba, ZoneAction::Reset)?;
    let d = zone_report(r, ctx, zslba)?;
    ensure!(
        d.state == ZoneState::Empty && d.wp == zslba && d.capacity == z.zone_capacity,
        "after a reset the report says {:?} write pointer {} capacity {}; expected empty, {zslba}, {}",
        d.state,
        d.wp,
        d.capacity,
        z.zone_capacity
    );
    Ok((z, zslba))
}

/// A write the zone must refuse: through passthrough the device's status (`code`, e.g.
/// SCT 1h / SC BCh Zone Invalid Write); through the block layer, which turns it into an
/// I/O error, EIO.
fn zone_refused(ctx: &Ctx, o: Outcome, what: &str, code: u16) -> Result<String, String> {
    match o {
        Outcome::Rejected(e, _) => Err(format!("{what}: refused by the library, so the device never judged it: {e}")),
        Outcome::Done { status, .. } if status.is_ok() => Err(format!("{what} succeeded")),
        Outcome::Done { status, .. } => {
            if ctx.passthru {
                ensure!(
                    status.code() == code && status.sc() as u16 == code & 0xff,
                    "{what}: {status}, expected SCT {:x}h SC {:02X}h",
                    code >> 8,
                    code & 0xff
                );
            } else {
                ensure!(
                    status.errno() == Some(libc::EIO),
                    "{what}: {status}, expected EIO (the block layer reports a zone error of the device as EIO)"
                );
            }
            Ok(format!("{status}"))
        }
    }
}

const ZONE_INVALID_WRITE: u16 = 0x1BC;
const ZONE_IS_FULL: u16 = 0x1B9;

/// Writes at the write pointer succeed, one after the other, and move it; the data reads
/// back (and through the block device with O_DIRECT).
fn case_zone_write(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let mut note = String::new();
    if !zone_mgmt_on_queue(ctx) {
        let b = ctx.alloc(128)?;
        let ids = vec![b.id()];
        match r.one((Cmd::zone_mgmt_recv(ctx.nsid, 0, 128, true), b.into()))? {
            Outcome::Rejected(Error::BadCommand { .. }, back) if buf_ids(&back) == ids => {
                note =
                    format!("; {} refuses zone management at submit, so it goes through Device::pass", ctx.col.label());
            }
            Outcome::Rejected(e, _) => return Err(format!("zone management on the queue: refused with {e:?}")),
            Outcome::Done { status, .. } => {
                return Err(format!(
                    "zone management on a {} queue ran ({status}); update zone_mgmt_on_queue",
                    ctx.col.label()
                ))
            }
        }
    }
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let pos = zslba * u;
    let s = seed();
    for k in 0..4 {
        let p = pos + k * 8 * u;
        done(
            r.one(ctx.w(p, 8 * u, s)?)?,
            &format!("write of 8 LBAs at the write pointer (LBA {})", p / u),
            Some(8 * u),
        )?;
    }
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(
        d.state == ZoneState::ImplicitlyOpened && d.wp == zslba + 32,
        "after 32 LBAs written: {:?}, write pointer {}; expected implicitly opened, {}",
        d.state,
        d.wp,
        zslba + 32
    );
    let want = pattern::at(pos, 32 * u, s);
    let got = read_range(&mut r, ctx, pos, 32 * u, 32 * u)?;
    compare(&got, &want, pos, Some(s), "data written at the write pointer")?;
    ctx.oracle_check(pos, &want, Some(s), "data written at the write pointer")?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("zone {}: 4 writes at the write pointer; report: implicitly opened, write pointer +32{note}", ctx.zone))
}

/// Writes anywhere but the write pointer fail (passthrough: Zone Invalid Write, SCT 1h
/// SC BCh; block layer: EIO) and change nothing.
fn case_zone_invalid_write(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let pos = zslba * u;
    let s = seed();
    done(r.one(ctx.w(pos, 8 * u, s)?)?, "write of 8 LBAs at the write pointer", Some(8 * u))?;
    let s2 = seed();
    let ahead = zone_refused(
        ctx,
        r.one(ctx.w(pos + 16 * u, 8 * u, s2)?)?,
        "write 8 LBAs past the write pointer",
        ZONE_INVALID_WRITE,
    )?;
    let behind = zone_refused(
        ctx,
        r.one(ctx.w(pos, 8 * u, s2)?)?,
        "rewrite of LBAs behind the write pointer",
        ZONE_INVALID_WRITE,
    )?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.wp == zslba + 8, "the refused writes moved the write pointer: {} (expected {})", d.wp, zslba + 8);
    let got = read_range(&mut r, ctx, pos, 8 * u, 8 * u)?;
    compare(&got, &pattern::at(pos, 8 * u, s), pos, Some(s), "data after the refused writes")?;
    if let Some(b) = ctx.dealloc.byte() {
        let got = read_range(&mut r, ctx, pos + 16 * u, 8 * u, 8 * u)?;
        compare(&got, &vec![b; 8 * u as usize], pos + 16 * u, Some(s2), "LBAs past the write pointer")?;
    }
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("past the write pointer: {ahead}; behind it: {behind}"))
}

/// Zone append: through passthrough each append lands at its own LBA from the write
/// pointer on and the completion's result is that LBA (several in flight at once on a
/// queue); the block layer has no zone append for user space (Invalid Command Opcode).
fn case_zone_append(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let s = seed();
    if !ctx.passthru {
        let o = r.one((Cmd::zone_append(ctx.nsid, zslba, 2), ctx.pat(zslba * u, 2 * u, s)?.into()))?;
        let how = match o {
            Outcome::Done { status, .. } if !status.is_ok() => {
                ensure!(
                    status.code() == 0x001,
                    "zone append through the block layer: {status}, expected Invalid Command Opcode"
                );
                format!("{status}")
            }
            Outcome::Done { result, .. } => {
                return Err(format!("zone append through the block layer succeeded ({result})"))
            }
            // The block-layer queues refuse what they have no operation for.
            Outcome::Rejected(Error::BadCommand { .. }, _) if !zone_mgmt_on_queue(ctx) => "refused at submit".into(),
            Outcome::Rejected(e, _) => return Err(format!("zone append through the block layer was refused: {e}")),
        };
        let d = zone_report(&mut r, ctx, zslba)?;
        ensure!(d.state == ZoneState::Empty && d.wp == zslba, "after a failed append: {:?} wp {}", d.state, d.wp);
        r.finish()?;
        return Ok(format!("block layer: no zone append ({how})"));
    }
    // Four appends of 2 LBAs, all submitted before any is reaped (async), each with its
    // own pattern (as if written at LBA zslba + 2k).
    let ops = (0..4u64)
        .map(|k| Ok((Cmd::zone_append(ctx.nsid, zslba, 2), ctx.pat((zslba + 2 * k) * u, 2 * u, s)?.into())))
        .collect::<Result<Vec<(Cmd, Data)>, String>>()?;
    let mut at = BTreeMap::new();
    for (k, o) in r.run(ops)?.into_iter().enumerate() {
        let (status, result) = match o {
            Outcome::Done { status, result, .. } => (status, result),
            Outcome::Rejected(e, _) => return Err(format!("zone append #{k} refused: {e}")),
        };
        ensure!(status.is_ok(), "zone append #{k}: {status}");
        ensure!(
            (zslba..zslba + 8).contains(&result) && (result - zslba) % 2 == 0,
            "zone append #{k} says it wrote at LBA {result}; expected one of {zslba}, +2, +4, +6"
        );
        ensure!(at.insert(result, k as u64).is_none(), "two appends both say they wrote at LBA {result}");
    }
    for (&lba, &k) in &at {
        let got = read_range(&mut r, ctx, lba * u, 2 * u, 2 * u)?;
        let from = (zslba + 2 * k) * u;
        compare(
            &got,
            &pattern::at(from, 2 * u, s),
            from,
            Some(s),
            &format!("append #{k}, read at the LBA it returned"),
        )?;
    }
    let o = r.one((Cmd::zone_append(ctx.nsid, zslba, 2), ctx.pat(0, 2 * u, s)?.into()))?;
    let (status, result) = match o {
        Outcome::Done { status, result, .. } => (status, result),
        Outcome::Rejected(e, _) => return Err(format!("zone append refused: {e}")),
    };
    ensure!(status.is_ok() && result == zslba + 8, "a fifth append: {status}, LBA {result}; expected {}", zslba + 8);
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.wp == zslba + 10, "after 5 appends of 2 LBAs the write pointer is {}, expected {}", d.wp, zslba + 10);
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    let order: Vec<u64> = at.values().copied().collect();
    Ok(format!("5 appends returned their LBAs (first four landed in order {order:?})"))
}

/// Finish makes the zone full; a write to it fails (passthrough: Zone Is Full, SCT 1h
/// SC B9h; block layer: EIO).
fn case_zone_finish(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    done(r.one(ctx.w(zslba * u, 8 * u, seed())?)?, "write of 8 LBAs at the write pointer", Some(8 * u))?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Finish)?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.state == ZoneState::Full, "after finish the zone is {:?}, expected full", d.state);
    let st = zone_refused(ctx, r.one(ctx.w((zslba + 8) * u, u, seed())?)?, "write to a full zone", ZONE_IS_FULL)?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("write to the full zone: {st}"))
}

/// Reset empties the zone: the report shows it empty with the write pointer at its start,
/// the data reads back as deallocated blocks, and a write at the start works again.
fn case_zone_reset(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let pos = zslba * u;
    let s = seed();
    write_pattern(&mut r, ctx, pos, 16 * u, 16 * u, s)?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.wp == zslba + 16, "after 16 LBAs the write pointer is {}", d.wp);
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(
        d.state == ZoneState::Empty && d.wp == zslba,
        "after reset: {:?}, write pointer {}; expected empty, {zslba}",
        d.state,
        d.wp
    );
    let got = read_range(&mut r, ctx, pos, 16 * u, 16 * u)?;
    let note = match ctx.dealloc.byte() {
        Some(b) => {
            compare(&got, &vec![b; 16 * u as usize], pos, Some(s), "a reset zone")?;
            format!("reads back as {b:#04x} bytes")
        }
        None => {
            ensure!(got != pattern::at(pos, 16 * u, s), "a reset zone still reads back its old data");
            "old data gone".into()
        }
    };
    let s2 = seed();
    done(r.one(ctx.w(pos, 4 * u, s2)?)?, "write at the start of the reset zone", Some(4 * u))?;
    let got = read_range(&mut r, ctx, pos, 4 * u, 4 * u)?;
    compare(&got, &pattern::at(pos, 4 * u, s2), pos, Some(s2), "a write after the reset")?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("reset: empty, write pointer at the zone start, {note}"))
}

// ---------------------------------------------------------------------------------------
// Cells
// ---------------------------------------------------------------------------------------

type CaseFn = fn(&Ctx) -> Res;

fn cases_for(row: RowKind, col: Col) -> Vec<(&'static str, CaseFn)> {
    let mut v: Vec<(&'static str, CaseFn)> = Vec::new();
    if row.zoned() {
        v.push(("zone-write", case_zone_write));
        v.push(("zone-invalid-write", case_zone_invalid_write));
        v.push(("zone-append", case_zone_append));
        v.push(("zone-finish", case_zone_finish));
        v.push(("zone-reset", case_zone_reset));
        if col.sqpoll() || col.iopoll() {
            v.push(("tunables", case_tunables));
        }
        return v;
    }
    if col == Col::Nil {
        v.push(("out-of-range", case_out_of_range));
        v.push(("bad-request", case_bad_request));
    } else {
        v.push(("rw-pattern", case_rw));
        v.push(("vectored", case_vectored));
        v.push(("out-of-range", case_out_of_range));
        v.push(("alignment", case_alignment));
        v.push(("trim", case_trim));
        v.push(("flush", case_flush));
        v.push(("bad-request", case_bad_request));
        v.push(("errno-map", case_errno));
    }
    v.push(("multi-queue", case_multi));
    if col.sync().is_none() {
        v.push(("queue-full", case_queue_full));
        v.push(("drain", case_drain));
        v.push(("drop-inflight", case_drop));
        v.push(("stats", case_stats));
    }
    if col.sqpoll() || col.iopoll() {
        v.push(("tunables", case_tunables));
    }
    v
}

enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

#[derive(Clone, PartialEq)]
enum CellState {
    Pass,
    Fail,
    Skip(String),
    Na(String),
}

struct Cell {
    state: CellState,
    cases: Vec<(&'static str, Verdict)>,
    ms: u128,
    /// Milliseconds per case, for the verbose listing.
    case_ms: Vec<u128>,
}

fn check_refusal(e: &Error, kind: DevKind, key: &str) -> Result<String, String> {
    match e {
        Error::Unsupported { kind: k, iface, why, .. } => {
            ensure!(*k == kind, "refused naming the device kind {k:?}, but it is {kind:?}: {e}");
            ensure!(*iface == key, "refused naming the interface {iface:?}, expected {key:?}: {e}");
            ensure!(!why.trim().is_empty(), "refused without a reason: {e}");
            ensure!(!why.contains(NOT_DONE), "refused as unfinished, not as impossible: {e}");
            Ok(why.clone())
        }
        other => Err(format!("expected Error::Unsupported at open, got {other:?} ({other})")),
    }
}

fn run_cell(row: &Row, col: Col, probe: Option<Result<String, String>>) -> Cell {
    let t0 = Instant::now();
    let name = format!("{} / {}", row.label, col.label());
    let mut cell = Cell { state: CellState::Pass, cases: Vec::new(), ms: 0, case_ms: Vec::new() };
    let place = match &row.place {
        Ok(p) => p.clone(),
        Err(why) => {
            cell.state = CellState::Skip(why.clone());
            cell.cases.push(("all", Verdict::Skip(why.clone())));
            return cell;
        }
    };
    let kind = row.kind.dev_kind();
    let mut ns = None;
    let (uri, extra, oracle, backing, cleanup) = match &place {
        Place::Dir(dir) => {
            let p =
                dir.join(format!("ioswitch-conformance-{}-{}-{}.img", std::process::id(), row.kind.tag(), col.label()));
            let _ = fs::remove_file(&p);
            (
                p.display().to_string(),
                format!("create=1,truncate=1,size={DEV_BYTES}"),
                Some(p.clone()),
                Some(p.clone()),
                Some(p),
            )
        }
        Place::Loop { dev, backing } => {
            (dev.display().to_string(), String::new(), Some(dev.clone()), Some(backing.clone()), None)
        }
        Place::Ram => (RAMDISK_URI.to_string(), String::new(), None, None, None),
        Place::Nvme { dev, ns: n } => {
            ns = Some(n.clone());
            // The namespace's block device, with O_DIRECT, witnesses both its rows.
            (dev.display().to_string(), String::new(), Some(n.block.clone()), None, None)
        }
    };
    let opts_s = [col.opts(), extra.as_str(), if row.kind.direct() { "direct=1" } else { "" }]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    let expected = col.expected_refusal(kind, row.kind.direct());
    let expect_refusal = expected.is_some();
    let opened = guarded(&format!("{name}: open"), || {
        let opts: Opts = opts_s.parse().map_err(|e| format!("option string {opts_s:?} does not parse: {e}"))?;
        Ok(Device::open(&uri, &opts))
    });
    let fail = |cell: &mut Cell, case: &'static str, msg: String| {
        cell.state = CellState::Fail;
        cell.cases.push((case, Verdict::Fail(msg)));
    };
    match opened {
        Err(msg) => fail(&mut cell, "open", msg),
        Ok(Ok(_)) if expect_refusal => fail(
            &mut cell,
            "open",
            format!("opening a {kind} with {opts_s:?} was accepted; the selection table must refuse it"),
        ),
        Ok(Err(e)) if expect_refusal => match check_refusal(&e, kind, expected.as_deref().unwrap_or_default()) {
            Ok(why) => {
                cell.state = CellState::Na(why.clone());
                cell.cases.push(("refused-at-open", Verdict::Pass(why)));
            }
            Err(msg) => fail(&mut cell, "refused-at-open", msg),
        },
        Ok(Err(e)) => fail(&mut cell, "open", format!("open {uri} with {opts_s:?}: {e}")),
        Ok(Ok(dev)) => {
            let g = dev.geometry().clone();
            let ifs = dev.interfaces();
            let passthru = match col.sync() {
                Some(s) => s == SyncIface::Nvme,
                None => match col.async_iface() {
                    AsyncIface::IoUringCmd => true,
                    AsyncIface::Emu | AsyncIface::Thrpool => ifs.sync == Some(SyncIface::Nvme),
                    _ => false,
                },
            };
            let bytes = ns.as_ref().map_or(DEV_BYTES, |n| n.bytes);
            let dealloc = match ns.as_ref().map(|n| &n.dealloc) {
                None => Dealloc::Zeroes,
                Some(Ok(d)) => d.clone(),
                Some(Err(e)) => Dealloc::Unknown(e.clone()),
            };
            let zone = ns.as_ref().filter(|n| n.nr_zones > 0).map_or(0, |n| next_zone(n.nr_zones));
            let ctx = Ctx {
                nsid: dev.ident().nsid,
                dev,
                col,
                row: row.kind,
                uri: uri.clone(),
                oracle,
                backing,
                oracle_direct: ns.is_some(),
                lba: g.lba_size as u64,
                nlbas: g.nlbas,
                bytes,
                span: bytes.min(DEV_BYTES),
                dealloc,
                passthru,
                ns,
                zone,
                shared: Mutex::new(None),
            };
            match guarded(&format!("{name}: open"), || case_open(&ctx)) {
                Ok(note) => cell.cases.push(("open", Verdict::Pass(note))),
                Err(msg) => fail(&mut cell, "open", msg),
            }
            let cases = cases_for(row.kind, col);
            if cell.state == CellState::Fail {
                let n = cases.len();
                if let Some((_, Verdict::Fail(m))) = cell.cases.last_mut() {
                    let _ = write!(m, " [the other {n} cases did not run]");
                }
            } else {
                for (cname, f) in cases {
                    let tc = Instant::now();
                    match guarded(&format!("{name}: {cname}"), || f(&ctx)) {
                        Ok(note) => cell.cases.push((cname, Verdict::Pass(note))),
                        Err(msg) => fail(&mut cell, cname, msg),
                    }
                    cell.case_ms.push(tc.elapsed().as_millis());
                }
                match probe {
                    Some(Ok(note)) => cell.cases.push(("callback-panic", Verdict::Pass(note))),
                    Some(Err(msg)) => fail(&mut cell, "callback-panic", msg),
                    None => {}
                }
                if cell.case_ms.len() < cell.cases.len() - 1 {
                    cell.case_ms.push(0);
                }
            }
        }
    }
    if let Some(p) = cleanup {
        let _ = fs::remove_file(p);
    }
    cell.ms = t0.elapsed().as_millis();
    cell
}

// ---------------------------------------------------------------------------------------
// Setting up the rows
// ---------------------------------------------------------------------------------------

/// The environment variable that lets the NVMe rows run outside the test guest: they
/// write over the namespaces, so they run only on a throw-away device.
const NVME_ENV: &str = "IOSWITCH_CONFORMANCE_NVME";

fn sysfs_u64(p: &Path) -> Result<u64, String> {
    let t = fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    t.trim().parse().map_err(|_| format!("{}: {:?} is not a number", p.display(), t.trim()))
}

/// Deallocated-block behaviour of a namespace, from Identify Namespace DLFEAT (read
/// through the library's admin passthrough on its block device).
fn read_dlfeat(block: &Path, nsid: u32) -> Result<Dealloc, String> {
    let uri = block.display().to_string();
    let d = Device::open(&uri, &Opts::default()).map_err(|e| format!("open {uri}: {e}"))?;
    let mut page = d.alloc(IDENTIFY_LEN).map_err(|e| format!("alloc: {e}"))?;
    d.pass_admin(&Cmd::identify(cns::NS, nsid, 0, 0), std::slice::from_mut(&mut page))
        .map_err(|e| format!("Identify Namespace {nsid}: {e}"))?;
    let id = IdNs::from_bytes(&page).map_err(|e| format!("Identify Namespace {nsid}: {e:?}"))?;
    Ok(Dealloc::from_dlfeat(id.dlfeat))
}

/// The NVMe namespaces of this machine, found through /sys/block/*/nsid (names are not
/// relied on), or why there are none to test.
fn find_nvme() -> Result<Vec<NvmeNs>, String> {
    let guest = std::env::var_os("IOSWITCH_VM").is_some_and(|v| v == "1");
    let asked = std::env::var_os(NVME_ENV).is_some_and(|v| v == "1");
    let dir = fs::read_dir("/sys/block").map_err(|e| format!("/sys/block: {e}"))?;
    let mut found = Vec::new();
    for e in dir.flatten() {
        let sys = e.path();
        let Ok(nsid) = sysfs_u64(&sys.join("nsid")) else { continue };
        let disk = e.file_name().to_string_lossy().into_owned();
        let ctrl = fs::read_link(sys.join("device"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "?".into());
        let lba = sysfs_u64(&sys.join("queue/logical_block_size"))?;
        let bytes = sysfs_u64(&sys.join("size"))? * 512;
        let zoned = fs::read_to_string(sys.join("queue/zoned")).unwrap_or_default().trim().to_string();
        let (zone_lbas, nr_zones) = if zoned == "none" || zoned.is_empty() {
            (0, 0)
        } else {
            (sysfs_u64(&sys.join("queue/chunk_sectors"))? * 512 / lba, sysfs_u64(&sys.join("queue/nr_zones"))?)
        };
        let block = PathBuf::from("/dev").join(&disk);
        // The generic char device carries the disk's instance numbers: nvmeXnY -> ngXnY
        // (checked: the library's ident().nsid must match sysfs, in every cell's open).
        let char_dev = match disk.strip_prefix("nvme") {
            Some(rest) if Path::new("/dev").join(format!("ng{rest}")).exists() => {
                Ok(Path::new("/dev").join(format!("ng{rest}")))
            }
            _ => Err(format!("no generic char device for {disk} (/dev/ng*)")),
        };
        found.push(NvmeNs {
            nsid: nsid as u32,
            dealloc: Err(String::new()),
            block,
            char_dev,
            ctrl,
            lba,
            bytes,
            zone_lbas,
            nr_zones,
        });
    }
    ensure!(!found.is_empty(), "no NVMe namespace on this machine (no /sys/block/*/nsid); run tests/vm/nvme-tests.sh");
    ensure!(
        guest || asked,
        "{} NVMe namespace(s) here, but these rows write over them: they run only in the test guest \
         (IOSWITCH_VM=1, tests/vm/nvme-tests.sh) or with {NVME_ENV}=1 on a throw-away device",
        found.len()
    );
    found.sort_by(|a, b| (&a.ctrl, a.nsid).cmp(&(&b.ctrl, b.nsid)));
    for ns in &mut found {
        ns.dealloc = read_dlfeat(&ns.block, ns.nsid);
    }
    Ok(found)
}

/// Rows of the NVMe namespaces: conventional ones as block (buffered and direct=1) and
/// char rows, zoned ones as block (direct=1) and char rows.
fn nvme_rows(found: &[NvmeNs]) -> Vec<Row> {
    let mut rows = Vec::new();
    for ns in found {
        let kinds: &[RowKind] = if ns.nr_zones > 0 {
            &[RowKind::ZnsBlockDirect, RowKind::ZnsChar]
        } else {
            &[RowKind::NvmeBlock, RowKind::NvmeBlockDirect, RowKind::NvmeChar]
        };
        let name = if ns.nr_zones > 0 { format!("nvme ns{} zoned", ns.nsid) } else { format!("nvme ns{}", ns.nsid) };
        for &kind in kinds {
            let (label, dev) = match kind {
                RowKind::NvmeBlock => (format!("{name} (block)"), Ok(ns.block.clone())),
                RowKind::NvmeBlockDirect | RowKind::ZnsBlockDirect => {
                    (format!("{name} (block) direct"), Ok(ns.block.clone()))
                }
                _ => (format!("{name} (char)"), ns.char_dev.clone()),
            };
            let place = dev.map(|dev| Place::Nvme { dev, ns: Box::new(ns.clone()) });
            rows.push(Row { kind, label, place });
        }
    }
    rows
}

fn setup_rows() -> (Vec<Row>, Option<LoopDev>) {
    let disk = disk_dir(&[PathBuf::from(env!("CARGO_TARGET_TMPDIR")), std::env::temp_dir()], PREFIX);
    let mut loopdev = None;
    let loop_place: Result<Place, String> = match &disk {
        Err(e) => Err(e.clone()),
        Ok((dir, _)) => LoopDev::setup(dir, PREFIX, DEV_BYTES).map(|l| {
            let p = Place::Loop { dev: l.dev.clone(), backing: l.backing.clone() };
            loopdev = Some(l);
            p
        }),
    };
    let loop_name = match &loop_place {
        Ok(Place::Loop { dev, .. }) => dev.display().to_string(),
        _ => "loop".into(),
    };
    let mut rows = Vec::new();
    for kind in RowKind::ALL {
        let (label, place) = match kind {
            RowKind::File => match &disk {
                Ok((d, t)) => (format!("file ({t})"), Ok(Place::Dir(d.clone()))),
                Err(e) => ("file (disk)".into(), Err(e.clone())),
            },
            RowKind::FileDirect => match &disk {
                Ok((d, t)) => (format!("file ({t}) direct"), direct_works(d, PREFIX).map(|_| Place::Dir(d.clone()))),
                Err(e) => ("file (disk) direct".into(), Err(e.clone())),
            },
            RowKind::Shm => {
                let d = PathBuf::from("/dev/shm");
                let place = match fs_type(&d) {
                    Some(t) if is_mem_fs(&t) => Ok(Place::Dir(d)),
                    Some(t) => Err(format!("/dev/shm is {t}, not tmpfs")),
                    None => Err("/dev/shm does not exist".into()),
                };
                ("file (/dev/shm tmpfs)".into(), place)
            }
            RowKind::Loop => (format!("{loop_name} (block)"), loop_place.clone()),
            RowKind::LoopDirect => (format!("{loop_name} direct"), loop_place.clone()),
            RowKind::Ram => (format!("ramdisk {RAMDISK_URI}"), Ok(Place::Ram)),
            // Not in RowKind::ALL: the NVMe rows come from nvme_rows().
            _ => continue,
        };
        rows.push(Row { kind, label, place });
    }
    (rows, loopdev)
}

// ---------------------------------------------------------------------------------------
// A completion callback that panics, checked in a child process (it may hang)
// ---------------------------------------------------------------------------------------

const PROBE_ENV: &str = "IOSWITCH_CONFORMANCE_PROBE";
/// How long all the children together may take before they count as hung.
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// The child's side: a drain whose callback panics must propagate the panic, the queue
/// must drop (during the unwinding) without hanging, and the device must work after.
/// Exit status 0: all well; 2: setup failed; 3: the panic was swallowed; 4: the device
/// failed afterwards. A hang is the parent's to see.
fn probe_main(spec: &str) -> i32 {
    install_panic_hook();
    let Some((uri, opts)) = spec.split_once('\t') else { return 2 };
    let run = || -> Result<i32, String> {
        let opts: Opts = opts.parse().map_err(|e| format!("{e}"))?;
        let dev = Device::open(uri, &opts).map_err(|e| format!("open: {e}"))?;
        let lba = dev.geometry().lba_size as u64;
        let nsid = dev.ident().nsid;
        let mut q = dev.queue(4).map_err(|e| format!("queue: {e}"))?;
        for t in 0..3u64 {
            let b = dev.alloc(lba as usize).map_err(|e| format!("alloc: {e}"))?;
            q.submit(&Cmd::read(nsid, t, 1), b.into(), t).map_err(|e| format!("submit: {e}"))?;
        }
        let r = panic::catch_unwind(AssertUnwindSafe(move || {
            let _ = q.drain(|_| panic!("a completion callback panics"));
        }));
        if r.is_ok() {
            eprintln!("the callback's panic did not reach the caller of drain");
            return Ok(3);
        }
        let mut q = dev.queue(4).map_err(|e| format!("queue after the panic: {e}"))?;
        let b = dev.alloc(lba as usize).map_err(|e| format!("alloc: {e}"))?;
        q.submit(&Cmd::read(nsid, 0, 1), b.into(), 9).map_err(|e| format!("submit after the panic: {e}"))?;
        let mut ok = false;
        q.drain(|c| ok = c.status.is_ok() && c.tag == 9).map_err(|e| format!("drain after the panic: {e}"))?;
        if !ok {
            eprintln!("a read after the panic failed");
            return Ok(4);
        }
        Ok(0)
    };
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            2
        }
    }
}

/// Starts one child per async interface on a file in `dir`, waits for all of them (at
/// most PROBE_LIMIT together), and says how each went.
fn run_probes(dir: &Path, direct: bool) -> Vec<(Col, Result<String, String>)> {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return vec![(Col::Emu, Err(format!("cannot find the test binary to re-run: {e}")))],
    };
    let mut kids = Vec::new();
    for col in Col::ALL.into_iter().filter(|c| c.sync().is_none()) {
        let file = dir.join(format!("ioswitch-conformance-{}-probe-{}.img", std::process::id(), col.label()));
        let made = fs::File::create(&file).and_then(|f| f.set_len(DEV_BYTES));
        let opts = if direct { format!("{},direct=1", col.opts()) } else { col.opts().to_string() };
        let child = made.map_err(|e| format!("create {}: {e}", file.display())).and_then(|_| {
            Command::new(&exe)
                .env(PROBE_ENV, format!("{}\t{opts}", file.display()))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("spawn {}: {e}", exe.display()))
        });
        kids.push((col, file, child));
    }
    let deadline = Instant::now() + PROBE_LIMIT;
    let mut out = Vec::new();
    for (col, file, child) in kids {
        let verdict = child.and_then(|mut ch| {
            let status = loop {
                match ch.try_wait() {
                    Ok(Some(st)) => break Some(st),
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                    Ok(None) | Err(_) => break None,
                }
            };
            let Some(st) = status else {
                let _ = ch.kill();
                let _ = ch.wait();
                return Err(format!(
                    "hang: a completion callback that panics inside drain leaves the queue unable to drop \
                     (the child was still running after {} s and was killed)",
                    PROBE_LIMIT.as_secs()
                ));
            };
            let mut err = String::new();
            if let Some(mut e) = ch.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let err = err.trim().to_string();
            match st.code() {
                Some(0) => Ok("the panic propagated, the queue dropped, the device works".into()),
                Some(3) => Err(format!("the panic was swallowed: {err}")),
                Some(4) => Err(format!("the device failed after the panic: {err}")),
                Some(c) => Err(format!("child exited with {c}: {err}")),
                None => Err(format!("child killed by a signal ({st}): {err}")),
            }
        });
        let _ = fs::remove_file(&file);
        out.push((col, verdict));
    }
    out
}

// ---------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------

fn tally(cell: &Cell, t: &mut (u32, u32, u32)) {
    for (_, v) in &cell.cases {
        match v {
            Verdict::Pass(_) => t.0 += 1,
            Verdict::Fail(_) => t.1 += 1,
            Verdict::Skip(_) => t.2 += 1,
        }
    }
}

fn main() {
    if let Some(spec) = std::env::var_os(PROBE_ENV) {
        std::process::exit(probe_main(&spec.to_string_lossy()));
    }
    install_panic_hook();
    start_watchdog();
    let t0 = Instant::now();
    let verbose = std::env::var_os("IOSWITCH_CONFORMANCE_VERBOSE").is_some();
    println!("ioswitch conformance: every (device kind x interface), {} KiB devices", DEV_BYTES / KIB);
    let (mut rows, loopdev) = setup_rows();
    match find_nvme() {
        Ok(found) => {
            for ns in &found {
                let dealloc = match &ns.dealloc {
                    Ok(Dealloc::Zeroes) => "DLFEAT: deallocated blocks read 0x00 (checked)".to_string(),
                    Ok(Dealloc::Ones) => "DLFEAT: deallocated blocks read 0xFF (checked)".to_string(),
                    Ok(Dealloc::Unknown(w)) => format!("{w} (not checked)"),
                    Err(e) => format!("DLFEAT unknown: {e} (not checked)"),
                };
                let zones = if ns.nr_zones > 0 {
                    format!(", zoned: {} zones of {} KiB", ns.nr_zones, ns.zone_lbas * ns.lba / KIB)
                } else {
                    String::new()
                };
                let chr = match &ns.char_dev {
                    Ok(c) => c.display().to_string(),
                    Err(e) => e.clone(),
                };
                println!(
                    "NVMe: {} nsid {}: {} + {chr}, {} B LBAs, {} MiB{zones}; {dealloc}",
                    ns.ctrl,
                    ns.nsid,
                    ns.block.display(),
                    ns.lba,
                    ns.bytes >> 20
                );
            }
            rows.extend(nvme_rows(&found));
        }
        Err(why) => println!("NVMe rows: none: {why}"),
    }
    // The callback-panic check runs once per async interface, on the first file row
    // that can hold its files; its verdict is a case of that row's cells.
    let probe_row = rows.iter().position(|r| matches!(r.place, Ok(Place::Dir(_))));
    let probes: Vec<(Col, Result<String, String>)> = match probe_row.map(|i| &rows[i]) {
        Some(Row { place: Ok(Place::Dir(dir)), kind, .. }) => run_probes(dir, kind.direct()),
        _ => Vec::new(),
    };
    let mut results: BTreeMap<(usize, usize), Cell> = BTreeMap::new();
    for (ri, row) in rows.iter().enumerate() {
        for (ci, &col) in row.kind.cols().iter().enumerate() {
            let probe = if Some(ri) == probe_row { probes.iter().find(|(c, _)| *c == col) } else { None };
            let cell = run_cell(row, col, probe.map(|(_, v)| v.clone()));
            {
                let mut t = lock(&TALLY);
                tally(&cell, &mut t);
            }
            let state = match &cell.state {
                CellState::Pass => "PASS",
                CellState::Fail => "FAIL",
                CellState::Skip(_) => "skip",
                CellState::Na(_) => "n/a",
            };
            println!("  {:<30} {:<10} {state:<5} {} cases, {} ms", row.label, col.label(), cell.cases.len(), cell.ms);
            if verbose {
                let skip = cell.cases.len() - cell.case_ms.len();
                for (i, (name, v)) in cell.cases.iter().enumerate() {
                    let ms = i.checked_sub(skip).and_then(|k| cell.case_ms.get(k)).map(|m| format!(" ({m} ms)"));
                    let ms = ms.unwrap_or_default();
                    match v {
                        Verdict::Pass(n) => println!("      ok   {name}{ms} {n}"),
                        Verdict::Fail(m) => println!("      FAIL {name}: {m}"),
                        Verdict::Skip(m) => println!("      skip {name}: {m}"),
                    }
                }
            }
            let at = format!("{} / {}", row.label, col.label());
            for (name, v) in &cell.cases {
                if let Verdict::Fail(m) = v {
                    let tag = if m.contains(NOT_DONE) { " [not done]" } else { "" };
                    lock(&FAILS).push(format!("  FAIL {at}: {name}{tag}: {m}"));
                }
            }
            results.insert((ri, ci), cell);
        }
    }
    let mut extra_fail = None;
    if let Some(l) = loopdev {
        extra_fail = l.teardown();
    }

    for group in [&Col::ALL[..], &Col::NVME[..], &Col::ZONED[..]] {
        let members: Vec<usize> = (0..rows.len()).filter(|&ri| rows[ri].kind.cols() == group).collect();
        if members.is_empty() {
            continue;
        }
        println!();
        print!("{:<30}", "device \\ interface");
        for c in group {
            print!(" {:<9}", c.label());
        }
        println!();
        for ri in members {
            print!("{:<30}", rows[ri].label);
            for ci in 0..group.len() {
                let s = match results.get(&(ri, ci)).map(|c| &c.state) {
                    Some(CellState::Pass) => "PASS",
                    Some(CellState::Fail) => "FAIL",
                    Some(CellState::Skip(_)) => "skip",
                    Some(CellState::Na(_)) => "n/a",
                    None => "?",
                };
                print!(" {s:<9}");
            }
            println!();
        }
    }
    let mut used: Vec<Col> = Vec::new();
    for row in &rows {
        for &c in row.kind.cols() {
            if !used.contains(&c) {
                used.push(c);
            }
        }
    }
    let legend: Vec<String> = used.iter().map(|c| format!("{} = {}", c.label(), c.opts())).collect();
    println!("column options (rows named direct add direct=1): {}", legend.join("; "));
    println!(
        "columns: sync interfaces psync/block/ramdisk/nvme run through Device::pass (opened with async=emu); \
         nil runs queue-semantics cases only; +sqp / +iop cells also check that the tunable is in effect \
         (a new iou-sqp kernel thread per sqpoll queue; iopoll reads raise no interrupt on the controller's \
         I/O queues, compared with the same reads without iopoll)"
    );
    println!(
        "trim: file-set trim, DSM deallocate and write zeroes must read back zeroes on every file and loop row (the loop device \
         sits on a file, so BLKDISCARD punches holes in it and reads zero); errno-map: writes on rdonly=1, reads on \
         wronly=1, and a read past the end of a file that shrank under the device (files: an OS error, EIO)"
    );
    if rows.iter().any(|r| r.kind.nvme()) {
        println!(
            "NVMe: whole-range passes cover the first {} KiB and the last {} KiB of each namespace; deallocated \
             blocks (trim, DSM, zone reset) must read back what Identify Namespace DLFEAT says; write zeroes reads \
             zeroes; the block device read and written with O_DIRECT is the independent witness of every NVMe row; \
             passthrough cells (nvme, uring_cmd, and emu/thrpool on char devices) refuse or fail (EINVAL) file-set \
             I/O that is not whole LBAs",
            DEV_BYTES / KIB,
            TAIL_BYTES / KIB
        );
    }
    if rows.iter().any(|r| r.kind.zoned()) {
        println!(
            "zoned: each cell owns one zone; writes at the write pointer succeed and move it; writes past or \
             behind it fail (passthrough: Zone Invalid Write, SCT 1h SC BCh; block layer: EIO); zone append returns \
             the LBA it wrote (passthrough; the block layer has none: Invalid Command Opcode); finish makes the \
             zone full (writes: Zone Is Full / EIO); reset empties it (report: empty, write pointer at the start; \
             data reads back as DLFEAT says); the block-layer queues (libaio, io_uring, posix) refuse zone \
             management and zone append at submit (checked), so their cells manage zones through Device::pass"
        );
    }

    let mut others = String::new();
    for ((ri, ci), cell) in &results {
        let at = format!("{} / {}", rows[*ri].label, rows[*ri].kind.cols()[*ci].label());
        match &cell.state {
            CellState::Skip(why) => {
                let _ = writeln!(others, "  skip {at}: {why}");
            }
            CellState::Na(why) => {
                let _ = writeln!(others, "  n/a  {at}: refused at open: {why}");
            }
            _ => {}
        }
    }
    if let Some(m) = &extra_fail {
        lock(&FAILS).push(format!("  FAIL loop device teardown: {m}"));
    }
    let fails = lock(&FAILS).clone();
    if !fails.is_empty() {
        println!();
        println!("Failures:");
        for l in &fails {
            println!("{l}");
        }
    }
    if !others.is_empty() {
        println!();
        println!("Skipped and n/a:");
        print!("{others}");
    }
    let (p, mut f, s) = *lock(&TALLY);
    if extra_fail.is_some() {
        f += 1;
    }
    println!();
    println!("conformance ran in {} ms", t0.elapsed().as_millis());
    println!("{p} passed, {f} failed, {s} skipped");
    std::process::exit(if f > 0 { 1 } else { 0 });
}
