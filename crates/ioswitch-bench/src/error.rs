//! What can go wrong in the bench: one [`BenchError`] that every fallible function of
//! this crate returns, and the smaller errors of one operation that convert into it
//! ([`JobError`] for job files, [`CheckError`] for a job that does not fit its device,
//! [`VerifyError`] for a block read back, [`OverheadError`] and [`LoopError`] for the
//! overhead benchmark, [`TargetsError`] for its targets tool, [`UnknownIface`],
//! [`OutputFormatError`]).
//!
//! Each variant carries what was being done to what (the job, the option and its
//! file:line, the list and the item, the path), and the cause, where there is one, as
//! its `source`. The messages are the ones users see: `ioswitch bench` and the Python
//! module show them as they are, and their tests compare them.

use crate::jobfile::{IoEngine, JobError, Loc};
use crate::measure::{Iface, Skipped};
use std::fmt;
use std::io;
use std::path::PathBuf;

/// The job an error is about, and the option it points at with the place that option
/// was given (a job file's line or a command-line argument) when it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At {
    /// The job's name.
    pub job: String,
    /// The option (fio's name) the error is about.
    pub option: String,
    /// Where that option was given; `None` when it was not (a default).
    pub loc: Option<Loc>,
}

impl At {
    /// The place of `option` in `spec`.
    pub fn new(spec: &crate::jobfile::JobSpec, option: &str) -> At {
        At { job: spec.name.clone(), option: option.to_string(), loc: spec.origin(option).cloned() }
    }
}

impl fmt::Display for At {
    /// `file:line: job NAME` or `job NAME`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.loc {
            Some(loc) => write!(f, "{loc}: job {}", self.job),
            None => write!(f, "job {}", self.job),
        }
    }
}

/// Which command-line list an item belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// `--engines io_uring,libaio,…`.
    Interfaces,
    /// `--qd 1,2,4,…`.
    QueueDepths,
    /// `--bs 4k,64k,…`.
    BlockSizes,
}

impl fmt::Display for ListKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ListKind::Interfaces => "interface list",
            ListKind::QueueDepths => "queue depth list",
            ListKind::BlockSizes => "block size list",
        })
    }
}

/// An interface name the library does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown interface {name:?}; known: {}, or all", known_iface_names().join(", "))]
pub struct UnknownIface {
    /// The name as given.
    pub name: String,
}

/// Every interface name an interface list takes, each once (`nil` and `vfio` are a sync
/// and an async interface both, under one name).
fn known_iface_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for i in Iface::all() {
        if !names.contains(&i.as_str()) {
            names.push(i.as_str());
        }
    }
    names
}

/// An `--output-format` item that is not `normal`, `json` or `json+`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutputFormatError {
    /// fio's terse formats (`terse`, `minimal`, `csv`).
    #[error("output format '{0}' (fio's terse) is not supported")]
    Terse(String),
    /// Anything else.
    #[error("unknown output format '{0}'")]
    Unknown(String),
}

/// A job that does not fit its open device: checked before the job runs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// `offset` starts at or after the end of the device.
    #[error("job {job}: offset {offset} is at or past the end of {filename} ({bytes} bytes)")]
    OffsetPastEnd {
        /// The job.
        job: String,
        /// Its start offset.
        offset: u64,
        /// The device or file.
        filename: String,
        /// The device's size.
        bytes: u64,
    },
    /// `offset + size` ends after the end of the device.
    #[error("job {job}: offset {offset} + size {region} reaches past the end of {filename} ({bytes} bytes)")]
    RegionPastEnd {
        /// The job.
        job: String,
        /// Its start offset.
        offset: u64,
        /// The size of its region.
        region: u64,
        /// The device or file.
        filename: String,
        /// The device's size.
        bytes: u64,
    },
    /// A block size of 0 or larger than the region.
    #[error("job {job}: {dir} block size {bs} must be 1..={region} (the region size)")]
    BlockSize {
        /// The job.
        job: String,
        /// `read` or `write`.
        dir: &'static str,
        /// The block size.
        bs: u64,
        /// The size of the region.
        region: u64,
    },
    /// A block size above what the device moves in one command.
    #[error("job {job}: {dir} block size {bs} exceeds the max transfer of {filename} ({max} bytes)")]
    MaxTransfer {
        /// The job.
        job: String,
        /// `read` or `write`.
        dir: &'static str,
        /// The block size.
        bs: u64,
        /// The device or file.
        filename: String,
        /// Its max transfer.
        max: u64,
    },
    /// `verify` with `time_based`: the blocks to read back are not known.
    #[error("job {job}: verify needs a size-based job (time_based is set)")]
    VerifyTimeBased {
        /// The job.
        job: String,
    },
    /// `verify` with blocks smaller than the verify header.
    #[error("job {job}: verify needs blocks of at least {min} bytes")]
    VerifyBlockSize {
        /// The job.
        job: String,
        /// The header's size.
        min: usize,
    },
}

/// A block read back that is not the block written there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// Too short to hold the header.
    #[error("block of {len} bytes is shorter than the {header}-byte header")]
    Short {
        /// The block's length.
        len: usize,
        /// The header's length.
        header: usize,
    },
    /// No header magic.
    #[error("no verify header (magic {magic:#010x}): never written, or overwritten")]
    NoHeader {
        /// The word found where the magic belongs.
        magic: u32,
    },
    /// The header's length is not the block's.
    #[error("header says {stored} bytes, block has {len}")]
    Length {
        /// The length in the header.
        stored: u32,
        /// The block's length.
        len: usize,
    },
    /// The header's offset is not where the block was read.
    #[error("block belongs at offset {stored}, found at {offset}")]
    Offset {
        /// The offset in the header.
        stored: u64,
        /// Where it was read.
        offset: u64,
    },
    /// `verify=pattern`: a byte differs from the pattern.
    #[error("pattern mismatch at byte {at}: read {got:#04x}, the pattern has {want:#04x}")]
    Pattern {
        /// Byte of the block.
        at: usize,
        /// What was read.
        got: u8,
        /// What the pattern has there.
        want: u8,
    },
    /// The digest does not match the data.
    #[error("{digest} mismatch: stored {stored}, computed {computed}")]
    Digest {
        /// `crc32c` or `md5`.
        digest: &'static str,
        /// The stored digest, hex.
        stored: String,
        /// The digest of the data, hex.
        computed: String,
    },
}

/// Everything the bench can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A job file or fio command line that does not read.
    #[error(transparent)]
    Job(#[from] JobError),

    /// An `xnvme_async`/`xnvme_sync` interface that ioswitch does not have for the role.
    #[error("{at}: {}={value:?} has no ioswitch interface ({})", at.option, allowed.join(", "))]
    XnvmeIface {
        /// The job and option.
        at: At,
        /// The interface asked for.
        value: String,
        /// Those xNVMe has for the role.
        allowed: Vec<&'static str>,
    },
    /// An `xnvme_be` other than `linux`.
    #[error("{at}: xnvme_be={value:?}: only the linux backend exists in ioswitch")]
    XnvmeBackend {
        /// The job and option.
        at: At,
        /// The backend asked for.
        value: String,
    },
    /// An `xnvme_admin` interface that ioswitch does not have.
    #[error("{at}: xnvme_admin={value:?} has no ioswitch interface")]
    XnvmeAdmin {
        /// The job and option.
        at: At,
        /// The interface asked for.
        value: String,
    },
    /// An `ioengine` no library interface serves.
    #[error("{at}: ioengine={engine} has no ioswitch interface")]
    Engine {
        /// The job and option.
        at: At,
        /// The engine.
        engine: IoEngine,
    },
    /// A fio engine other than `ioswitch` on a PCI address.
    #[error(
        "{at}: {filename} is a PCI address (an NVMe controller for the user-space driver); \
         ioengine={engine} reaches devices through the kernel and cannot drive it: \
         use --ioengine=ioswitch (interface vfio, the default on a PCI address)"
    )]
    PciEngine {
        /// The job and option.
        at: At,
        /// The job's engine.
        engine: IoEngine,
        /// The address.
        filename: String,
    },
    /// An io_uring tunable (`hipri`, `sqthread_poll`, …) with another engine.
    #[error("{at}: {} is an io_uring option; ioengine is {engine}", at.option)]
    IoUringOnly {
        /// The job and the tunable.
        at: At,
        /// The job's engine.
        engine: IoEngine,
    },
    /// The library refused an interface tunable.
    #[error("{at}: {source}")]
    Tunable {
        /// The job and the tunable.
        at: At,
        /// Why.
        #[source]
        source: ioswitch::Error,
    },
    /// `ioengine=null` without a file needs its size in bytes.
    #[error("{at}: ioengine=null needs size=BYTES (fio's null engine opens no file, so no file gives the job a size)")]
    NullNeedsSize {
        /// The job and option (`size`).
        at: At,
    },
    /// What `--readonly` forbids a job that reads: changing its file.
    #[error("{at}: {filename}: {what}, which --readonly forbids (it keeps every file and device as it is)")]
    ReadOnly {
        /// The job and the option that asks for it.
        at: At,
        /// The file.
        filename: String,
        /// What the job would do, in words.
        what: String,
    },
    /// A file that does not exist, with `allow_file_create=0`.
    #[error("{at}: {filename} does not exist, and allow_file_create=0 forbids creating it")]
    NoCreate {
        /// The job and option (`allow_file_create`).
        at: At,
        /// The file.
        filename: String,
    },
    /// A file to create without a size.
    #[error("{at}: {filename} does not exist: give size= or filesize= to create it")]
    NoSize {
        /// The job and option (`size`).
        at: At,
        /// The file.
        filename: String,
    },
    /// Writing the job's file to its size failed.
    #[error("{at}: laying out {filename}: {source}")]
    LayOut {
        /// The job and option (`filename`).
        at: At,
        /// The file.
        filename: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The library could not open the job's target.
    #[error("{at}: {source}")]
    Open {
        /// The job and option (`filename`).
        at: At,
        /// The target as given.
        filename: String,
        /// Why.
        #[source]
        source: ioswitch::Error,
    },
    /// A job that writes, on a device in use.
    #[error("{at}: writes to {filename} refused before the job ran: {why}; writing there could destroy that data (allow_mounted_write=1 overrides)")]
    InUse {
        /// The job and option (`filename`).
        at: At,
        /// The device.
        filename: String,
        /// What uses it.
        why: String,
    },
    /// The job does not fit its device (the check's own message names the job: only the
    /// place is put before it).
    #[error("{}{source}", at.loc.as_ref().map(|l| format!("{l}: ")).unwrap_or_default())]
    Check {
        /// The job and option (`size`).
        at: At,
        /// What does not fit.
        #[source]
        source: CheckError,
    },
    /// Dropping the page cache of the job's file (`invalidate`) failed.
    #[error("{at}: dropping the page cache of {filename}: {source}")]
    Invalidate {
        /// The job and option (`invalidate`).
        at: At,
        /// The file.
        filename: String,
        /// Why.
        #[source]
        source: io::Error,
    },

    /// An instance of a job ended with an error.
    #[error("job {job} instance {instance}: {msg}")]
    Instance {
        /// The job.
        job: String,
        /// The instance (of `numjobs`).
        instance: u32,
        /// Its errno.
        errno: i32,
        /// What it reported.
        msg: String,
    },
    /// A job that completed no I/O in its measured time.
    #[error("job {job}: no I/O completed in the measured time")]
    NoIo {
        /// The job.
        job: String,
    },
    /// A run that returned no job.
    #[error("the run returned no job")]
    NoJob,
    /// Zero repetitions asked for.
    #[error("repetitions: 0 given; use 1 or more")]
    NoRepetitions,
    /// No interface to measure.
    #[error("nothing to run: no interfaces")]
    NothingToRun,
    /// An interface that could not open the target or run the job.
    #[error("interface {iface}: {source}")]
    Interface {
        /// The interface.
        iface: Iface,
        /// Why.
        #[source]
        source: Box<BenchError>,
    },
    /// An interface that failed in one repetition.
    #[error("interface {iface}: repetition {rep}: {source}")]
    Repetition {
        /// The interface.
        iface: Iface,
        /// The repetition, from 1.
        rep: u32,
        /// Why.
        #[source]
        source: Box<BenchError>,
    },
    /// Every interface was skipped.
    #[error("no interface could run the job on {target}: {}", reasons(skipped))]
    NoneRan {
        /// The target in words.
        target: String,
        /// The interfaces, each with its reason.
        skipped: Vec<Skipped>,
    },

    /// A command-line list that is empty.
    #[error("interface list {list:?} is empty (e.g. io_uring,libaio,psync or all)")]
    EmptyInterfaceList {
        /// The list as given.
        list: String,
    },
    /// `all` together with other interfaces.
    #[error("interface list {list:?}: `all` stands alone")]
    AllStandsAlone {
        /// The list as given.
        list: String,
    },
    /// An unknown interface in a list.
    #[error("interface list {list:?}: {source}")]
    ListIface {
        /// The list as given.
        list: String,
        /// The item.
        #[source]
        source: UnknownIface,
    },
    /// An item given twice in a list.
    #[error("{kind} {list:?}: {item} is given twice")]
    Twice {
        /// Which list.
        kind: ListKind,
        /// The list as given.
        list: String,
        /// The item.
        item: String,
    },
    /// A queue depth that is not a number.
    #[error("queue depth list {list:?}: {item:?} is not a whole number")]
    QdNotANumber {
        /// The list as given.
        list: String,
        /// The item.
        item: String,
        /// Why.
        #[source]
        source: std::num::ParseIntError,
    },
    /// A queue depth out of range (in a list, or in a sweep plan: `list` is `None`).
    #[error("{}queue depth {qd} is out of range (1..={max})", list.as_ref().map(|l| format!("queue depth list {l:?}: ")).unwrap_or_else(|| "sweep: ".into()))]
    QdRange {
        /// The list as given; `None` for a plan built in code.
        list: Option<String>,
        /// The queue depth.
        qd: u32,
        /// The largest allowed.
        max: u32,
    },
    /// A block size that does not parse.
    #[error("block size list {list:?}: {reason}")]
    BadBlockSize {
        /// The list as given.
        list: String,
        /// The item.
        item: String,
        /// Why (the library's size parser).
        reason: String,
    },
    /// A block size of 0 (in a list, or in a sweep plan: `list` is `None`).
    #[error("{}block size 0", list.as_ref().map(|l| format!("block size list {l:?}: ")).unwrap_or_else(|| "sweep: ".into()))]
    ZeroBlockSize {
        /// The list as given; `None` for a plan built in code.
        list: Option<String>,
    },

    /// A sweep plan without interfaces.
    #[error("sweep: no interfaces given")]
    SweepNoInterfaces,
    /// A sweep plan without queue depths or block sizes.
    #[error("sweep: give at least one queue depth and one block size")]
    SweepEmptyGrid,
    /// A sweep where every interface was skipped.
    #[error("sweep: {0}")]
    Sweep(#[source] Box<BenchError>),

    /// A directory to create a run's files in that cannot be read.
    #[error("directory {}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A path given as a directory that is not one.
    #[error("{} is not a directory", path.display())]
    NotADir {
        /// The path.
        path: PathBuf,
    },
    /// Creating a run's temporary directory failed.
    #[error("creating {}: {source}", path.display())]
    CreateTemp {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Creating an output directory failed.
    #[error("creating output directory {}: {source}", path.display())]
    CreateOutputDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Encoding a JSON output failed.
    #[error("encoding {file}: {source}")]
    Encode {
        /// The output file's name.
        file: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// `ioswitch bench overhead`: options that do not fit, or nothing measured.
    #[error("overhead: {0}")]
    Overhead(#[from] OverheadError),
    /// Writing an output file failed.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn reasons(skipped: &[Skipped]) -> String {
    skipped.iter().map(|s| format!("{}: {}", s.iface, s.reason)).collect::<Vec<_>>().join("; ")
}

/// What stops one side of an overhead pair: the library's loop or the raw reference
/// loop it is compared with (setting it up, or one of its reads).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoopError {
    /// The library refused (opening, allocating, a queue, a synchronous read).
    #[error(transparent)]
    Lib(#[from] ioswitch::Error),
    /// A slot reused before its read came back.
    #[error("slot {slot} has no buffer")]
    NoBuffer {
        /// The slot.
        slot: u32,
    },
    /// The device handed out no buffer.
    #[error("no buffer")]
    NoBuffers,
    /// The library refused a read at submission.
    #[error("submit at offset {offset}: {source}")]
    Submit {
        /// Where the read was to go.
        offset: u64,
        /// Why.
        #[source]
        source: ioswitch::Error,
    },
    /// The library's commit failed.
    #[error("commit: {0}")]
    Commit(#[source] ioswitch::Error),
    /// Reaping the library's completions failed.
    #[error("reap: {0}")]
    Reap(#[source] ioswitch::Error),
    /// A read of the library's loop completed with an error status.
    #[error("read failed: {0}")]
    ReadFailed(ioswitch::Status),
    /// A read outside the file.
    #[error("offset {offset} + {bs} is past the end ({size})")]
    PastEnd {
        /// Where the read was to go.
        offset: u64,
        /// Its length.
        bs: u64,
        /// The file's size.
        size: u64,
    },
    /// A raw read that failed.
    #[error("{call} at offset {offset}: {source}")]
    ReadError {
        /// `pread`, `io_uring read`, `aio read`.
        call: &'static str,
        /// Where (0 where the completion does not say).
        offset: u64,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A raw read that moved fewer bytes than asked.
    #[error("{call} at offset {offset}: {got} bytes of {want}")]
    ShortRead {
        /// `pread`, `io_uring read`, `aio read`.
        call: &'static str,
        /// Where (0 where the completion does not say).
        offset: u64,
        /// Bytes read.
        got: i64,
        /// Bytes asked for.
        want: u64,
    },
    /// A system call of a raw loop that failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call, with what it was for.
        call: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Reading the size of a raw loop's file failed.
    #[error("{}: {source}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Opening the file for a raw loop failed.
    #[error("opening {} for the raw loop: {source}", path.display())]
    OpenRaw {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A block size one io_uring read cannot carry.
    #[error("block size {bs} is too large for one io_uring read")]
    TooLarge {
        /// The block size.
        bs: u64,
    },
    /// The raw io_uring loop found its submission queue full.
    #[error("the submission queue is full")]
    SqFull,
    /// `io_uring_enter` submitted nothing.
    #[error("io_uring_enter took none of {pending} entries")]
    EnterTookNone {
        /// Entries waiting.
        pending: u32,
    },
    /// `io_submit` submitted nothing.
    #[error("io_submit took no iocb")]
    SubmitTookNone,
    /// A raw loop's buffer that cannot be laid out.
    #[error("a {len}-byte buffer: {source}")]
    Layout {
        /// Its length.
        len: usize,
        /// Why.
        #[source]
        source: std::alloc::LayoutError,
    },
    /// A raw loop's buffer that cannot be allocated.
    #[error("out of memory allocating a {len}-byte buffer")]
    OutOfMemory {
        /// Its length.
        len: usize,
    },
    /// A block size that is not a whole number of the device's logical blocks.
    #[error("block size {bs} is not 1..=65536 logical blocks of {lba} bytes")]
    BlockSize {
        /// The block size.
        bs: u64,
        /// The logical block size.
        lba: u64,
    },
    /// An interface without a raw loop to compare with.
    #[error("{iface} has no raw reference loop")]
    NoRawLoop {
        /// The interface.
        iface: ioswitch::AsyncIface,
    },
}

/// Options of `ioswitch bench overhead` that do not fit, and runs where nothing could be
/// measured; shown after `overhead: `.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OverheadError {
    /// Zero repetitions.
    #[error("repetitions: 0 given; use 1 or more")]
    NoRepetitions,
    /// Zero run time.
    #[error("run time per side: 0 ms given; use 1 or more")]
    NoRunTime,
    /// An empty grid.
    #[error("give at least one interface, queue depth and block size")]
    EmptyGrid,
    /// An interface without a raw reference loop.
    #[error("interface {iface} has no raw reference loop; use {}", supported.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", "))]
    NoRawLoop {
        /// The interface.
        iface: Iface,
        /// Those that have one.
        supported: Vec<Iface>,
    },
    /// A queue depth out of range.
    #[error("queue depth {qd} is out of range (1..={max})")]
    QdRange {
        /// The queue depth.
        qd: u32,
        /// The largest allowed.
        max: u32,
    },
    /// A block size that is not a multiple of 512.
    #[error("block size {bs} is not a multiple of 512")]
    BlockSize {
        /// The block size.
        bs: u64,
    },
    /// A negative or not finite tolerance floor.
    #[error("tolerance floor {ns} ns is not a non-negative number")]
    ToleranceFloor {
        /// The floor given.
        ns: f64,
    },
    /// A file smaller than the largest block.
    #[error("file size {size} is smaller than the largest block size")]
    FileSize {
        /// The file size given.
        size: u64,
    },
    /// Every interface was skipped before measuring.
    #[error("nothing could run on {}: {}", path.display(), reasons(skipped))]
    NothingRan {
        /// The file.
        path: PathBuf,
        /// The interfaces, each with its reason.
        skipped: Vec<Skipped>,
    },
    /// Every interface failed while measuring.
    #[error("every interface failed on {}: {}", path.display(), reasons(skipped))]
    AllFailed {
        /// The file.
        path: PathBuf,
        /// The interfaces, each with its reason.
        skipped: Vec<Skipped>,
    },
}

/// What the overhead targets tool (`overhead::targets`) refuses or cannot do: an argument,
/// `--cpu`, or one of the callgrind runs it starts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetsError {
    /// An argument refused: shown before the usage text (`--help` prints [`crate::overhead::targets::help`] instead).
    #[error("{}{}", if why.is_empty() { String::new() } else { format!("overhead: {why}\n") }, targets_usage(tool))]
    Usage {
        /// How the tool was invoked (`cargo bench -p ioswitch --bench overhead --`, …).
        tool: String,
        /// What was wrong.
        why: String,
    },
    /// `--cpu N` cannot be had; shown before the usage text.
    #[error("overhead: {source}\n{}", targets_usage(tool))]
    Pin {
        /// How the tool was invoked.
        tool: String,
        /// Why.
        #[source]
        source: PinError,
    },
    /// valgrind could not be started.
    #[error("valgrind: {0}")]
    ValgrindStart(#[source] io::Error),
    /// valgrind ran and failed; the last line of what it wrote on stderr.
    #[error("valgrind failed: {last_line}")]
    ValgrindFailed {
        /// The last line of its stderr.
        last_line: String,
    },
    /// valgrind succeeded but printed no instruction count.
    #[error("no 'Collected :' line in valgrind's output")]
    NoCount,
}

fn targets_usage(tool: &str) -> String {
    format!(
        "usage: {tool} [--quick] [--nil-only] [--only PATTERN,...]\n\
         \x20      [--reps N] [--ios N] [--shm FILE] [--disk FILE] [--keep-files] [--no-callgrind]\n\
         \x20      [--once ioswitch|raw] [--cpu N]"
    )
}

/// Why this process cannot be pinned to CPU `cpu` (`--cpu`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// Reading the CPUs this process may run on failed.
    #[error("--cpu {cpu}: sched_getaffinity failed: {source}")]
    GetAffinity {
        /// The CPU asked for.
        cpu: usize,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The CPU is not one this process may run on.
    #[error("--cpu {cpu}: not a CPU this process may run on (allowed: {})", allowed.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","))]
    NotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// Those it may run on.
        allowed: Vec<usize>,
    },
    /// Pinning failed.
    #[error("--cpu {cpu}: sched_setaffinity failed: {source}")]
    SetAffinity {
        /// The CPU asked for.
        cpu: usize,
        /// Why.
        #[source]
        source: io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_interface_lists_each_known_name_once() {
        let msg = UnknownIface { name: "io_ring".into() }.to_string();
        let known = msg.split_once("; known: ").map(|(_, k)| k.trim_end_matches(", or all")).unwrap_or_default();
        let names: Vec<&str> = known.split(", ").collect();
        for n in ["psync", "io_uring", "libaio", "nil", "vfio", "mmap", "pmem", "thrpool"] {
            assert_eq!(names.iter().filter(|&&x| x == n).count(), 1, "{n} once in: {msg}");
        }
        assert!(msg.starts_with("unknown interface \"io_ring\"; known: "), "{msg}");
    }
}
