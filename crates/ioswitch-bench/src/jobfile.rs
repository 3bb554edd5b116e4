//! fio job files and fio-style command lines, read into validated [`JobSpec`]s.
//!
//! # Job files
//!
//! The format is fio's INI dialect:
//!
//! - `[name]` starts a job; a section whose name starts with `global` (fio compares only
//!   the first six letters) holds defaults instead. Global options apply to the jobs that
//!   come *after* them: a `[global]` section after a job changes the jobs that follow it,
//!   not the ones before it, and globals carry over from one job file to the next.
//! - `key=value`, or a bare `key` for a boolean (meaning `key=1`); blanks around the key
//!   and the value are ignored. Everything from the first `;` or `#` of a line on is a
//!   comment, as in fio (so values cannot contain those characters).
//! - `${NAME}` in an option is the value of the environment variable NAME (fio's
//!   substitution; a variable that is not set is an error here, where fio would put
//!   nothing).
//! - `include FILE` inside a section reads FILE's options into that section; a relative
//!   FILE that does not exist as given is looked up next to the including file (fio's
//!   rule). Included files may not start sections.
//! - With several job files, the first job of every file after the first gets an
//!   implicit `stonewall`, as fio does.
//! - [`JobReader::select_section`] (`--section NAME`) keeps only the named jobs (global
//!   sections are always read).
//!
//! # Command lines
//!
//! [`JobReader::read_args`] takes fio's spelling: `--name=j --rw=randread --bs=4k …`. Each
//! `--name` starts a new job (`--name=global` a global section); options before the first
//! `--name` are global. A value may also follow as the next argument (`--bs 4k`); a
//! boolean may be bare (`--thread`). `--section`, `--output` and `--output-format` are
//! understood; every other argument not starting with `--` names a job file.
//!
//! # Values
//!
//! - Sizes: a whole number (or `0x` hex) with an optional unit, case-insensitive: `k`/`kb`,
//!   `m`/`mb`, `g`, `t`, `p` are powers of 1024. fio's default `kb_base=1024` makes the IEC
//!   spellings `kib`, `mib`, `gib`, `tib`, `pib` powers of **1000** (fio documents this
//!   inversion "for compatibility with old scripts"); this reader does the same, so
//!   `bs=4KiB` means 4000 bytes here exactly as in fio. `size` and `offset` also take a
//!   percentage (`50%`). `bs` takes a `read,write` pair (`4k,64k`; an empty side keeps
//!   the inherited value; a third, trim, value is accepted and unused: trims take the
//!   write size). The workload shapes (`bssplit`, `bsrange`, `random_distribution`,
//!   `rw=…:N`, …) are read into [`crate::shapes::Shapes`].
//! - Times: a whole number with a unit `us`/`usec`, `ms`/`msec`, `s`, `m`, `h`, `d`; a
//!   plain number is seconds (`runtime`, `ramp_time`).
//! - Booleans: `1` or `0`, or the bare key.
//! - Lists: `cpus_allowed=0-1,3`; `percentile_list=50:99:99.9`.
//!
//! Every error names the option, the file and the line (or the command-line argument),
//! and for a bad value what was expected. An option this reader does not know is an
//! error, never silently ignored. Each [`JobSpec`] keeps where each of its options was set
//! ([`JobSpec::origin`], [`JobSpec::error_at`]) so that checks made later, against a
//! real device, can point at the line too.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::OutputFormatError;
use crate::hist::DEFAULT_PERCENTILES;

/// Nested `include` levels allowed (also stops include cycles).
const MAX_INCLUDE_DEPTH: usize = 16;
/// Longest percentile list fio accepts (`FIO_IO_U_LIST_MAX_LEN`).
const MAX_PERCENTILES: usize = 20;
/// CPUs a `cpus_allowed` list may name (glibc's `CPU_SETSIZE`).
const MAX_CPUS: u32 = 1024;

/// Where an option, a section or a job was given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// Line `line` (from 1) of the job file named `file` (as it was named: path given on
    /// the command line, or the include path).
    File {
        /// The file's name.
        file: Arc<str>,
        /// Line number, from 1.
        line: u32,
    },
    /// Argument `index` (from 1) of the argument list given to [`JobReader::read_args`].
    Arg {
        /// Position of the argument, from 1.
        index: usize,
    },
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loc::File { file, line } => write!(f, "{file}:{line}"),
            Loc::Arg { index } => write!(f, "command line argument {index}"),
        }
    }
}

/// What went wrong reading jobs; every variant says where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// An option this reader does not know or does not support.
    #[error("{loc}: unknown option '{name}'{hint}")]
    UnknownOption {
        /// The option as written.
        name: String,
        /// Where.
        loc: Loc,
        /// Extra explanation (may be empty), starting with a separator.
        hint: String,
    },
    /// An option with a value that does not parse or is out of range.
    #[error("{loc}: bad value '{value}' for option '{name}': expected {expected}")]
    BadValue {
        /// The option as written.
        name: String,
        /// The value as written.
        value: String,
        /// Where.
        loc: Loc,
        /// What would have been accepted.
        expected: String,
    },
    /// An option that takes a value was given none.
    #[error("{loc}: option '{name}' needs a value ({expected})")]
    MissingValue {
        /// The option as written.
        name: String,
        /// Where.
        loc: Loc,
        /// What kind of value it takes.
        expected: String,
    },
    /// A line that is neither a section, an option nor an include, or one in the wrong
    /// place.
    #[error("{loc}: {msg}")]
    Syntax {
        /// Where.
        loc: Loc,
        /// What is wrong.
        msg: String,
    },
    /// Options that parse one by one but do not fit together, or that do not fit the
    /// device or interface they are used with (see [`JobSpec::error_at`]).
    #[error("{}job '{job}': {msg}", loc.as_ref().map(|l| format!("{l}: ")).unwrap_or_default())]
    Invalid {
        /// The job's name.
        job: String,
        /// The option (or the section) at fault; `None` for a job built in code.
        loc: Option<Loc>,
        /// What is wrong.
        msg: String,
    },
    /// A job file could not be read.
    #[error("cannot read job file '{}': {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file named by `include` could not be read.
    #[error("{loc}: cannot read included file '{}': {source}", path.display())]
    Include {
        /// Where the `include` line is.
        loc: Loc,
        /// The file, as it was looked up.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Nothing to run: no job section, no `--name`; or none of those `--section` selects.
    #[error("no job defined: {}", no_jobs_why(read, selected, skipped))]
    NoJobs {
        /// What was read: the job files by name, and the command line if it was.
        read: String,
        /// The jobs `--section` selected (empty: all).
        selected: Vec<String>,
        /// The jobs read but left out because `--section` did not name them.
        skipped: Vec<String>,
    },
}

/// The reason of [`JobError::NoJobs`]: only global options, or a `--section` that names
/// none of the jobs read.
fn no_jobs_why(read: &str, selected: &[String], skipped: &[String]) -> String {
    if selected.is_empty() || skipped.is_empty() {
        return format!("{read} set only global options (a job is a [section] other than [global], or --name)");
    }
    let quoted = |v: &[String]| v.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    format!("--section {} names no job of {read}; its jobs are {}", quoted(selected), quoted(skipped))
}

/// One `key[=value]` as written, with its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawOption {
    /// The option name as written (an alias stays an alias).
    pub key: String,
    /// The value, `None` for a bare key.
    pub value: Option<String>,
    /// Where it was given.
    pub loc: Loc,
}

/// A job as read, before its options are interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJob {
    /// Section name (or `--name` value).
    pub name: String,
    /// Where the section header (or `--name`) is.
    pub loc: Loc,
    /// The global options in force when the job started, in order.
    pub globals: Vec<RawOption>,
    /// The job's own options, in order (includes expanded).
    pub options: Vec<RawOption>,
    /// First job of a second or later job file: fio separates job files by a stonewall.
    pub file_stonewall: bool,
}

/// `--output-format`: which reports to write (fio's `normal`, `json`, `json+`; several
/// may be combined with commas).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputFormat {
    /// Human-readable text, like fio's default output.
    pub normal: bool,
    /// fio's JSON.
    pub json: bool,
    /// fio's JSON with the latency histogram bins (`json+`; implies `json`).
    pub json_plus: bool,
}

impl Default for OutputFormat {
    fn default() -> Self {
        OutputFormat { normal: true, json: false, json_plus: false }
    }
}

impl std::str::FromStr for OutputFormat {
    type Err = OutputFormatError;
    /// Parses fio's spelling: `normal`, `json`, `json+`, comma-separated.
    fn from_str(s: &str) -> Result<Self, OutputFormatError> {
        let mut f = OutputFormat { normal: false, json: false, json_plus: false };
        for item in s.split(',') {
            match item.trim() {
                "normal" => f.normal = true,
                "json" => f.json = true,
                "json+" => {
                    f.json = true;
                    f.json_plus = true;
                }
                "terse" | "minimal" | "csv" => return Err(OutputFormatError::Terse(item.to_string())),
                other => return Err(OutputFormatError::Unknown(other.to_string())),
            }
        }
        Ok(f)
    }
}

/// The I/O pattern (`rw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    RandRead,
    /// Random writes.
    RandWrite,
    /// Sequential mixed reads and writes (`rw`, `readwrite`).
    ReadWrite,
    /// Random mixed reads and writes.
    RandRw,
    /// Sequential trims (`trim`), through the library's trim command.
    Trim,
    /// Random trims (`randtrim`).
    RandTrim,
    /// Sequential trim then write of each block (`trimwrite`).
    TrimWrite,
}

impl Rw {
    /// fio's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "rw",
            Rw::RandRw => "randrw",
            Rw::Trim => "trim",
            Rw::RandTrim => "randtrim",
            Rw::TrimWrite => "trimwrite",
        }
    }

    /// Whether offsets are random.
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw | Rw::RandTrim)
    }

    /// Whether the job reads.
    pub fn reads(self) -> bool {
        matches!(self, Rw::Read | Rw::RandRead | Rw::ReadWrite | Rw::RandRw)
    }

    /// Whether the job writes (trims are not writes here; see [`Rw::trims`]).
    pub fn writes(self) -> bool {
        matches!(self, Rw::Write | Rw::RandWrite | Rw::ReadWrite | Rw::RandRw | Rw::TrimWrite)
    }

    /// Whether the job trims (changes the device's contents as writes do).
    pub fn trims(self) -> bool {
        matches!(self, Rw::Trim | Rw::RandTrim | Rw::TrimWrite)
    }
}

/// fio I/O engines this benchmark runs (`ioengine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoEngine {
    /// pread/pwrite (fio's default on Linux).
    Psync,
    /// preadv/pwritev.
    Pvsync,
    /// preadv2/pwritev2 (with `hipri`: RWF_HIPRI).
    Pvsync2,
    /// read/write with lseek.
    Sync,
    /// Linux native AIO.
    Libaio,
    /// io_uring.
    IoUring,
    /// io_uring passthrough of NVMe commands (`/dev/ngXnY`).
    IoUringCmd,
    /// POSIX aio.
    Posixaio,
    /// No I/O at all (measures the harness).
    Null,
    /// Memory-mapped file.
    Mmap,
    /// fio's libpmem engine: persistent memory through libpmem (runs `sync=pmem`;
    /// `PMEM_IS_PMEM_FORCE=1` in the environment gives it `pmem_force=1`, as libpmem).
    Libpmem,
    /// fio's dev-dax engine: a devdax device (runs `sync=pmem`).
    DevDax,
    /// xNVMe's fio engine; interfaces chosen with the `xnvme_*` options.
    Xnvme,
    /// ioswitch itself; interfaces chosen with `ioswitch_opts`.
    Ioswitch,
}

impl IoEngine {
    /// Every engine, in the order documented.
    pub const ALL: &'static [IoEngine] = &[
        IoEngine::Psync,
        IoEngine::Pvsync,
        IoEngine::Pvsync2,
        IoEngine::Sync,
        IoEngine::Libaio,
        IoEngine::IoUring,
        IoEngine::IoUringCmd,
        IoEngine::Posixaio,
        IoEngine::Null,
        IoEngine::Mmap,
        IoEngine::Libpmem,
        IoEngine::DevDax,
        IoEngine::Xnvme,
        IoEngine::Ioswitch,
    ];

    /// fio's name.
    pub fn as_str(self) -> &'static str {
        match self {
            IoEngine::Psync => "psync",
            IoEngine::Pvsync => "pvsync",
            IoEngine::Pvsync2 => "pvsync2",
            IoEngine::Sync => "sync",
            IoEngine::Libaio => "libaio",
            IoEngine::IoUring => "io_uring",
            IoEngine::IoUringCmd => "io_uring_cmd",
            IoEngine::Posixaio => "posixaio",
            IoEngine::Null => "null",
            IoEngine::Mmap => "mmap",
            IoEngine::Libpmem => "libpmem",
            IoEngine::DevDax => "dev-dax",
            IoEngine::Xnvme => "xnvme",
            IoEngine::Ioswitch => "ioswitch",
        }
    }

    fn parse(s: &str) -> Option<IoEngine> {
        IoEngine::ALL.iter().copied().find(|e| e.as_str() == s)
    }
}

impl fmt::Display for IoEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Data verification (`verify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// No verification (`none`, `0`).
    None,
    /// CRC32C checksum (`crc32c`; `crc32c-intel` is the same).
    Crc32c,
    /// MD5 digest.
    Md5,
    /// fio's CRC-64 (the Jones polynomial, reflected, as fio's `crc64`).
    Crc64,
    /// XXH32 (seed 1, as fio's `xxhash`).
    Xxhash,
    /// SHA-256 (the header keeps its first 16 bytes).
    Sha256,
    /// No header: every byte is `verify_pattern`'s (fio's `pattern`).
    Pattern,
    /// The header only (fio's `meta`, its VERIFY_HDR_ONLY): magic, length, offset and a
    /// crc32c of the header are checked, the payload is not.
    Meta,
}

/// Which jobs `exitall` ends when its job ends (`exit_what`, fio's `fio_terminate_threads`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExitWhat {
    /// `group` (fio's default): the jobs of the job's reporting group.
    #[default]
    Group,
    /// `stonewall`: every job running beside it, of any group; the next stonewalled
    /// group then runs.
    Stonewall,
    /// `all`: every job, the ones of later groups too (they start and end at once).
    All,
}

/// Which errors a job counts and goes on after (`continue_on_error`): fio's error types;
/// only EIO and EILSEQ are errors it may go on after (fio's default `ignore_error`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContinueOn {
    /// Read errors.
    pub read: bool,
    /// Write errors.
    pub write: bool,
    /// Verify failures (EILSEQ).
    pub verify: bool,
}

/// How a file is preallocated when it is laid out (`fallocate`; fio's filesetup.c
/// `fallocate_file`, over the file's whole size, before its data is written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fallocate {
    /// `none` / `0`: no preallocation.
    None,
    /// `native` (fio's default on Linux): fallocate(2) with no flags; a failure is
    /// ignored, as in fio.
    #[default]
    Native,
    /// `posix` / `1`: posix_fallocate(3); a failure is reported and the layout goes on,
    /// as in fio.
    Posix,
    /// `keep`: fallocate(2) with FALLOC_FL_KEEP_SIZE; a failure ends the job.
    Keep,
    /// `truncate`: ftruncate(2) to the size; a failure ends the job.
    Truncate,
}

/// The generator of random offsets (`random_generator`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RandomGenerator {
    /// fio's default: a uniform generator, with the random map unless `norandommap`.
    #[default]
    Tausworthe,
    /// The same with 64-bit state.
    Tausworthe64,
    /// A full-period sequence: every block exactly once per pass, with or without the
    /// random map (`norandommap` changes nothing).
    Lfsr,
}

/// `ioswitch_clat_stamp`: when a completion gets its completion time (ioswitch's own
/// option; fio has only the batch rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClatStamp {
    /// fio's rule (`batch`, the default): one time per reaped batch, taken after the
    /// batch's wait, so a completion that waited in the queue for the rest of its batch
    /// counts that wait in its clat (fio issue #855).
    #[default]
    Batch,
    /// `each`: the job waits for one completion at a time until the batch's minimum is
    /// reached, and every completion is stamped when the queue hands it over.
    Each,
}

impl ClatStamp {
    /// The option value (`batch`, `each`), as the JSON reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClatStamp::Batch => "batch",
            ClatStamp::Each => "each",
        }
    }
}

/// `unified_rw_reporting`: how reads and writes are reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnifiedRw {
    /// Separately (`none`, `0`; the default).
    #[default]
    None,
    /// As one direction, `mixed` (`mixed`, `1`).
    Mixed,
    /// Separately and as `mixed` (`both`, `2`).
    Both,
}

/// A size that may be relative to the file or device (`size`, `offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeSpec {
    /// Bytes.
    Bytes(u64),
    /// Percent (0–100) of the file's or device's size.
    Percent(u32),
}

/// A value per direction, for options written `read,write` (`bs=4k,64k`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RwPair<T> {
    /// For reads.
    pub read: T,
    /// For writes.
    pub write: T,
}

/// The `xnvme_*` options of the xNVMe engine, kept as written (mapped to ioswitch
/// interfaces by the runner).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XnvmeOpts {
    /// `xnvme_be`: backend (e.g. `linux`).
    pub be: Option<String>,
    /// `xnvme_async`: asynchronous interface (e.g. `io_uring`, `libaio`, `emu`).
    pub r#async: Option<String>,
    /// `xnvme_sync`: synchronous interface (e.g. `nvme`, `psync`).
    pub sync: Option<String>,
    /// `xnvme_admin`: admin interface (e.g. `nvme`, `block`).
    pub admin: Option<String>,
    /// `xnvme_dev_nsid`: namespace id.
    pub dev_nsid: Option<u32>,
}

/// Options of fio that change how a job creates its file, ends, handles errors and
/// measures (defaults: fio's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Behaviour {
    /// `directory`: where the job's file is (fio's `:`-separated list; a job with one file
    /// uses the first).
    pub directory: Vec<String>,
    /// `allow_file_create` (default on): create a file that does not exist; off: refuse.
    pub allow_file_create: bool,
    /// `create_on_open`: create (and lay out) the file when the job starts, not when the
    /// jobs are set up.
    pub create_on_open: bool,
    /// `overwrite`: a job that writes lays its new (or too small) file out with data
    /// first, so its writes overwrite written blocks; off (fio's default), the file of a
    /// job that writes but does not read is created anew and only preallocated
    /// (`fallocate`), as fio's `extend_file` does.
    pub overwrite: bool,
    /// `fill_device` (fio's alias `fill_fs`): ENOSPC or EDQUOT on a write ends the job
    /// without an error; a job on a regular file without `size` writes until the file
    /// system is full (see [`crate::run::prepare`]).
    pub fill_device: bool,
    /// `create_serialize` (default on): fio lays the jobs' files out one after another;
    /// off, each job lays its own out in its thread, the jobs together. Here files are
    /// laid out one after another when the jobs are set up either way (the files are the
    /// same; only fio's set-up time differs).
    pub create_serialize: bool,
    /// `refill_buffers`: new random data in every write buffer before each write
    /// (default: filled once).
    pub refill_buffers: bool,
    /// `scramble_buffers` (fio's default 1): when buffers are not refilled, each 512-byte
    /// piece of a write buffer gets its file offset and the submit time before each write.
    pub scramble_buffers: bool,
    /// `zero_buffers`: write buffers hold zeros (filled once, and again before each write
    /// under `refill_buffers`) instead of random data; `buffer_pattern` and the
    /// compression/dedupe generators take precedence, as in fio. Set, it turns
    /// `scramble_buffers` off unless that is set too (fio's `fixup_options`).
    pub zero_buffers: bool,
    /// `exitall`: when this job ends, the jobs `exit_what` names stop.
    pub exitall: bool,
    /// `exitall_on_error`: when this job ends with an error, the jobs `exit_what` names
    /// stop (fio: "terminate all jobs when one exits in error").
    pub exitall_on_error: bool,
    /// `exit_what`: which jobs `exitall` stops.
    pub exit_what: ExitWhat,
    /// `disable_slat`: no submission latency measured.
    pub disable_slat: bool,
    /// `disable_clat`: no completion latency measured.
    pub disable_clat: bool,
    /// `disable_lat`: no total latency measured.
    pub disable_lat: bool,
    /// `disable_bw_measurement` / `disable_bw`: no bandwidth and IOPS samples.
    pub disable_bw: bool,
    /// `verify_fatal`: a verify failure ends the job even with `continue_on_error=verify`.
    pub verify_fatal: bool,
    /// `verify_dump`: a block that fails its check is written to files named as fio
    /// names them ([`crate::verify::dump`]), in the working directory.
    pub verify_dump: bool,
    /// `continue_on_error`.
    pub continue_on_error: ContinueOn,
    /// `ignore_error`: per error type (read, write, verify) the errnos a job goes on after
    /// where `continue_on_error` covers the type; an empty list: fio's default, EIO and
    /// EILSEQ.
    pub ignore_error: [Vec<i32>; 3],
    /// `error_dump`: each error the job goes on after is written to stderr; off (fio 3.33's
    /// default, its option table's, whatever its HOWTO says): only the error that ends the
    /// job is.
    pub error_dump: bool,
    /// `flow`: the job's weight in its flow (fio's flow control, see [`crate::flow`]);
    /// 0: none.
    pub flow: u32,
    /// `flow_id`: which flow the job is in.
    pub flow_id: i32,
    /// `flow_sleep`: how long a job held by its flow sleeps before it tries again, µs.
    pub flow_sleep_us: u32,
    /// `fallocate`: how a file is preallocated when it is laid out.
    pub fallocate: Fallocate,
    /// `filename_format`: how the files of a job without `filename` are named (see
    /// [`crate::files::format_name`]); `None`: fio's `$jobname.$jobnum.$filenum`.
    pub filename_format: Option<String>,
    /// `random_generator`.
    pub random_generator: RandomGenerator,
    /// `unified_rw_reporting`.
    pub unified_rw_reporting: UnifiedRw,
    /// `io_size`: how much I/O the job does (per loop) within its region; `None`: as
    /// much as the region (`size`). A percentage is of the file's or device's size.
    pub io_size: Option<SizeSpec>,
    /// `startdelay`: how long the job waits before it starts.
    pub startdelay: Option<Duration>,
    /// `unlink`: remove the job's file (a regular file only) when the job is done.
    pub unlink: bool,
    /// `cpus_allowed_policy=split`: each instance runs on one CPU of `cpus_allowed`
    /// (instance i on the i-th, wrapping); `shared` (the default): all on all of them.
    pub cpus_split: bool,
    /// `end_fsync` / `fsync_on_close`: flush the file when the job's writing is done
    /// (timed as a sync, as fio times it).
    pub end_fsync: bool,
    /// `loops`: how many times the job goes over its region (default 1).
    pub loops: u32,
    /// `wait_for`: the job starts once every instance of the named earlier job is done.
    pub wait_for: Option<String>,
    /// `ioswitch_clat_stamp`: one completion time per reaped batch (fio's rule) or one
    /// per completion.
    pub clat_stamp: ClatStamp,
    /// `io_submit_mode=offload`: the job's thread generates I/Os and `iodepth` submission
    /// workers, each at depth 1 with an engine context of its own, run them
    /// (see the engine's `offload` module); off: `inline`, fio's default.
    pub offload: bool,
    /// fio's `--readonly` (a command-line option of the whole run): jobs that write or
    /// trim are refused before anything runs, and no job creates, lays out, extends,
    /// fills or removes a file; every file and device is opened read-only.
    pub read_only: bool,
    /// `nrfiles` / `nr_files`: files per job (default 1; a `filename` list gives its own
    /// count). Several files run with fio's rules ([`crate::files`]).
    pub nrfiles: u32,
    /// `openfiles`: how many of them may be open at once (0, the default: all).
    pub openfiles: u32,
    /// `file_service_type`: how I/O moves between the files.
    pub file_service: crate::files::Service,
    /// `threads`: the tiobench profile's thread count; fio accepts it in any job and it
    /// changes nothing there (ioswitch has no profiles): kept for the note that says so.
    pub tiobench_threads: Option<u32>,
    /// `time_based` was given without a `runtime`: fio 3.33 warns ("time_based requires a
    /// runtime/timeout setting") and runs the job size-based; so does ioswitch, with this
    /// kept for the note that says so (`time_based` itself is then off).
    pub time_based_ignored: bool,
    /// `numa_cpu_nodes`, `numa_mem_policy`, `prioclass`, `prio` ([`crate::placement`]).
    pub placement: crate::placement::Placement,
    /// `cmdprio_percentage`, `cmdprio_class`, `cmdprio`, `cmdprio_bssplit`: per-command
    /// I/O priorities ([`crate::cmdprio`]).
    pub cmdprio: crate::cmdprio::CmdPrio,
    /// `sync`, as written, when it asks for synchronous writes (`1` or `sync`: fio opens
    /// with O_SYNC; `dsync`: with O_DSYNC); `None` for `none` or `0`, fio's default. The
    /// engines that write through the opened file open it with the library's `osync`;
    /// libpmem and dev-dax run it as they are (their writes are durable when they
    /// return); the others refuse it ([`sync_writes`]).
    pub sync: Option<String>,
}

/// How an engine runs fio's `sync=1`/`sync=dsync` ([`Behaviour::sync`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyncWrites {
    /// The file or block device is opened with O_SYNC/O_DSYNC (the library's `osync`),
    /// as fio's engines that write through the opened file open it.
    OpenFlag,
    /// Every write is durable when it returns already (libpmem, dev-dax: fio's libpmem
    /// then drains after each write, its dev-dax persists every write anyway).
    Durable,
    /// Not run, for this reason.
    Refused(&'static str),
}

/// The open flag `sync=` asks for, as written: O_DSYNC for `dsync`, O_SYNC for `1` and
/// `sync`.
pub(crate) fn open_sync(written: &str) -> ioswitch::OpenSync {
    if written == "dsync" {
        ioswitch::OpenSync::Dsync
    } else {
        ioswitch::OpenSync::Sync
    }
}

/// How `engine` runs `sync=1`/`sync=dsync`.
pub(crate) fn sync_writes(engine: IoEngine) -> SyncWrites {
    match engine {
        IoEngine::Psync
        | IoEngine::Pvsync
        | IoEngine::Pvsync2
        | IoEngine::Sync
        | IoEngine::Libaio
        | IoEngine::IoUring
        | IoEngine::Posixaio => SyncWrites::OpenFlag,
        IoEngine::Libpmem | IoEngine::DevDax => SyncWrites::Durable,
        IoEngine::Mmap => SyncWrites::Refused(
            "its writes are stores to a mapping, which the open flag does not make synchronous (fio opens with it all the same)",
        ),
        IoEngine::IoUringCmd => SyncWrites::Refused(
            "NVMe passthrough commands do not go through writes to the opened file (fio opens /dev/ngXnY with the flag all the same)",
        ),
        IoEngine::Null => SyncWrites::Refused("it does no I/O"),
        IoEngine::Xnvme => SyncWrites::Refused("fio's xnvme engine opens its devices with direct only, never with O_SYNC or O_DSYNC"),
        IoEngine::Ioswitch => {
            SyncWrites::Refused("give the open flag in ioswitch_opts instead (osync=sync for O_SYNC, osync=dsync for O_DSYNC)")
        }
    }
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            directory: Vec::new(),
            allow_file_create: true,
            create_on_open: false,
            overwrite: false,
            fill_device: false,
            create_serialize: true,
            refill_buffers: false,
            scramble_buffers: true,
            zero_buffers: false,
            exitall: false,
            exitall_on_error: false,
            exit_what: ExitWhat::default(),
            disable_slat: false,
            disable_clat: false,
            disable_lat: false,
            disable_bw: false,
            verify_fatal: false,
            verify_dump: false,
            continue_on_error: ContinueOn::default(),
            ignore_error: Default::default(),
            error_dump: false,
            filename_format: None,
            flow: 0,
            flow_id: 0,
            flow_sleep_us: 0,
            fallocate: Fallocate::default(),
            random_generator: RandomGenerator::default(),
            unified_rw_reporting: UnifiedRw::default(),
            cpus_split: false,
            end_fsync: false,
            io_size: None,
            startdelay: None,
            unlink: false,
            loops: 1,
            wait_for: None,
            tiobench_threads: None,
            time_based_ignored: false,
            placement: Default::default(),
            cmdprio: Default::default(),
            sync: None,
            nrfiles: 1,
            openfiles: 0,
            file_service: crate::files::Service::default(),
            clat_stamp: ClatStamp::default(),
            offload: false,
            read_only: false,
        }
    }
}

/// One job, validated, with fio's defaults for everything not given.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Job name (section name or `--name`; the `name` option overrides it).
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `ioengine` (default `psync`).
    pub ioengine: IoEngine,
    /// `filename`: one or more files or devices (fio's `:`-separated list; `\:` is a
    /// literal colon). Empty: fio names files after the job.
    pub filename: Vec<String>,
    /// `size`: bytes to transfer per job (or a share of the file); `None` = whole file.
    pub size: Option<SizeSpec>,
    /// `filesize`: size of the files the job creates.
    pub filesize: Option<u64>,
    /// `offset`: where in the file I/O starts (default 0).
    pub offset: SizeSpec,
    /// `rw` / `readwrite` (default `read`).
    pub rw: Rw,
    /// `rwmixread`: percent of reads in mixed workloads (default 50); writes are the
    /// rest (`rwmixwrite` sets the complement).
    pub rwmixread: u32,
    /// `bs` / `blocksize` per direction (default 4096).
    pub bs: RwPair<u64>,
    /// `iodepth` (default 1).
    pub iodepth: u32,
    /// `iodepth_batch_submit` / `iodepth_batch` (default 1; 0 or more than `iodepth`
    /// means `iodepth`, as fio fixes it up).
    pub iodepth_batch_submit: u32,
    /// `iodepth_batch_complete_min` / `iodepth_batch_complete` (default 1; capped at
    /// `iodepth`, since fio never waits for more than are in flight). With
    /// `iodepth_batch_complete_max` also 0, fio reaps after every submission.
    pub iodepth_batch_complete_min: u32,
    /// `iodepth_batch_complete_max`: the most completions one reap takes (default: the
    /// same as `iodepth_batch_complete_min`; below it means `iodepth_batch_complete_min`,
    /// as fio fixes it up; capped at `iodepth`, as fio caps it at the depth in flight).
    pub iodepth_batch_complete_max: u32,
    /// `iodepth_low`: once the queue is full, reap until no more than this many are in
    /// flight before filling it again (default, 0, or more than `iodepth`: `iodepth`).
    pub iodepth_low: u32,
    /// `numjobs`: clones of this job (default 1).
    pub numjobs: u32,
    /// `thread`: threads instead of processes (this benchmark always uses threads; kept
    /// for reports).
    pub thread: bool,
    /// `direct` (O_DIRECT); `buffered=0` is the same as `direct=1`.
    pub direct: bool,
    /// `allow_mounted_write`: write to a device that is mounted, swapped on or held by
    /// another kernel user (refused otherwise, as fio refuses it); the library's option
    /// of the same name.
    pub allow_mounted_write: bool,
    /// `runtime` / `timeout`: time limit; `None` = none.
    pub runtime: Option<Duration>,
    /// `time_based`: repeat the workload until `runtime` is over.
    pub time_based: bool,
    /// `ramp_time`: run this long before measuring.
    pub ramp_time: Option<Duration>,
    /// `number_ios`: stop after this many I/Os.
    pub number_ios: Option<u64>,
    /// `norandommap`: random offsets may repeat before every block was touched.
    pub norandommap: bool,
    /// `invalidate` (default on): drop the file's page cache before the job, as fio does.
    pub invalidate: bool,
    /// `randrepeat`: seed random offsets the same way every run (default true).
    pub randrepeat: bool,
    /// `randseed`: the seed.
    pub randseed: Option<u64>,
    /// `allrandrepeat`: every random generator seeded the same way every run, whatever
    /// `randrepeat` and `randseed` say (fio seeds them all from its fixed seed then). A
    /// job here draws all its random numbers (offsets, the read/write mix, block sizes,
    /// buffer contents) from one seed, so this makes that seed the fixed one.
    pub allrandrepeat: bool,
    /// `cpus_allowed`: CPUs the job may run on, sorted.
    pub cpus_allowed: Option<Vec<u32>>,
    /// `group_reporting`: report the job's group as one.
    pub group_reporting: bool,
    /// `stonewall` / `wait_for_previous`: wait for earlier jobs, start a new group.
    pub stonewall: bool,
    /// `new_group`: start a new reporting group.
    pub new_group: bool,
    /// `hipri`: polled completions (io_uring, io_uring_cmd, pvsync2).
    pub hipri: bool,
    /// `sqthread_poll`: kernel SQ polling thread (io_uring, io_uring_cmd).
    pub sqthread_poll: bool,
    /// `sqthread_poll_cpu`: CPU of that thread.
    pub sqthread_poll_cpu: Option<u32>,
    /// `fixedbufs`: registered buffers (io_uring, io_uring_cmd).
    pub fixedbufs: bool,
    /// `registerfiles`: registered files (io_uring, io_uring_cmd).
    pub registerfiles: bool,
    /// `fsync`: fsync after every N writes; 0 = never.
    pub fsync: u32,
    /// `verify`.
    pub verify: Verify,
    /// `do_verify`: run the verify phase (default true).
    pub do_verify: bool,
    /// `percentile_list` (default [`DEFAULT_PERCENTILES`]), in the order given.
    pub percentile_list: Vec<f64>,
    /// `clat_percentiles` (default true).
    pub clat_percentiles: bool,
    /// `lat_percentiles` (default false).
    pub lat_percentiles: bool,
    /// `slat_percentiles` (default false).
    pub slat_percentiles: bool,
    /// The `xnvme_*` options (ioengine=xnvme only).
    pub xnvme: XnvmeOpts,
    /// `ioswitch_opts`: interfaces and tunables (ioengine=ioswitch only), parsed.
    pub ioswitch_opts: Option<ioswitch::Opts>,
    /// File creation, ending, errors and measurement options.
    pub behaviour: Behaviour,
    /// Load shaping: `rate`, `rate_iops`, `rate_process`, `thinktime*`.
    pub load: crate::load::Load,
    /// Time-series logs: `write_lat_log`, `write_bw_log`, `write_iops_log`, `log_*`,
    /// `per_job_logs`.
    pub logs: crate::iolog::LogOpts,
    /// Workload shapes: block size mixes, offset distributions and modifiers
    /// ([`crate::shapes`]).
    pub shapes: crate::shapes::Shapes,
    /// Where the job's section (or `--name`) is; `None` for a job built in code.
    pub section: Option<Loc>,
    /// The job's own options as written (fio's "job options" in JSON), in order; the
    /// global ones are in [`JobSet::global_options`].
    pub options: Vec<RawOption>,
    origins: BTreeMap<&'static str, Loc>,
    /// `ss`, `ss_dur`, `ss_ramp`: fio's steady state ([`crate::steady`]; off while
    /// `ss_dur` is under a second).
    pub steady: crate::steady::SteadySpec,
}

/// Jobs and run-wide settings read from job files and a command line.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSet {
    /// The jobs, in order.
    pub jobs: Vec<JobSpec>,
    /// Every global option, in order (fio's "global options" in JSON).
    pub global_options: Vec<RawOption>,
    /// `--output-format`.
    pub output_format: OutputFormat,
    /// `--output`: file the report goes to.
    pub output: Option<PathBuf>,
}

impl JobSet {
    /// Reads a whole command line in fio's spelling (options, `--name` jobs and job file
    /// names; see [`JobReader::read_args`]), then the job files it names.
    pub fn from_args<I, S>(args: I) -> Result<JobSet, JobError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut reader = JobReader::new();
        for file in reader.read_args(args)? {
            reader.read_file(&file)?;
        }
        reader.finish()
    }

    /// The reporting group of each job ([`group_ids`]).
    pub fn group_ids(&self) -> Vec<u32> {
        group_ids(&self.jobs)
    }
}

/// fio's reporting groups: a job with `stonewall` or `new_group` starts a new group
/// unless the current group is still empty; clones of a job (`numjobs`) share its group.
pub fn group_ids(jobs: &[JobSpec]) -> Vec<u32> {
    let mut group = 0;
    let mut jobs_in_group = 0;
    jobs.iter()
        .map(|j| {
            if (j.stonewall || j.new_group) && jobs_in_group > 0 {
                group += 1;
                jobs_in_group = 0;
            }
            jobs_in_group += 1;
            group
        })
        .collect()
}

/// What `ignore_error` takes.
const EXPECT_IGNORE_ERROR: &str =
    "up to three ','-separated lists (read, write, verify) of ':'-separated errno names (EIO, ENOSPC, …) or numbers";

/// The errno names fio's `ignore_error` knows (options.c `str2error`): Linux's errnos 1
/// to 34, in order.
const ERRNO_NAMES: [&str; 34] = [
    "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD", "EAGAIN", "ENOMEM",
    "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV", "ENOTDIR", "EISDIR", "EINVAL", "ENFILE",
    "EMFILE", "ENOTTY", "ETXTBSY", "EFBIG", "ENOSPC", "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE",
];

/// fio's `ignore_error` value: a list of errnos per error type (read, write, verify), as
/// options.c `str_ignore_error_cb`: a list ends at its first empty name; a name is one of
/// [`ERRNO_NAMES`], a number its absolute value (not 0).
fn parse_ignore_error(v: &str) -> Result<Vec<Vec<i32>>, String> {
    let lists: Vec<&str> = v.trim().split(',').collect();
    if lists.len() > 3 {
        return Err(format!("{} lists; fio's error types are read, write and verify", lists.len()));
    }
    lists
        .into_iter()
        .map(|list| {
            list.split(':')
                .take_while(|name| !name.is_empty())
                .map(|name| {
                    let errno = if name.starts_with('E') {
                        ERRNO_NAMES.iter().position(|n| *n == name).map(|i| i as i32 + 1)
                    } else {
                        name.parse::<i32>().ok().map(i32::abs).filter(|n| *n != 0)
                    };
                    errno.ok_or_else(|| format!("unknown error '{name}'"))
                })
                .collect()
        })
        .collect()
}

/// Whether an option takes no value when given bare.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Value,
}

/// Every option: canonical name, aliases, kind.
const OPTIONS: &[(&str, &[&str], Kind)] = &[
    ("name", &[], Kind::Value),
    ("description", &[], Kind::Value),
    ("ioengine", &[], Kind::Value),
    ("filename", &[], Kind::Value),
    ("size", &[], Kind::Value),
    ("filesize", &[], Kind::Value),
    ("offset", &["fileoffset"], Kind::Value),
    ("rw", &["readwrite"], Kind::Value),
    ("rwmixread", &[], Kind::Value),
    ("rwmixwrite", &[], Kind::Value),
    ("bs", &["blocksize"], Kind::Value),
    ("iodepth", &[], Kind::Value),
    ("iodepth_batch_submit", &["iodepth_batch"], Kind::Value),
    ("iodepth_batch_complete_min", &["iodepth_batch_complete"], Kind::Value),
    ("iodepth_batch_complete_max", &[], Kind::Value),
    ("iodepth_low", &[], Kind::Value),
    ("numjobs", &[], Kind::Value),
    ("thread", &[], Kind::Bool),
    ("direct", &[], Kind::Bool),
    ("buffered", &[], Kind::Bool),
    ("runtime", &["timeout"], Kind::Value),
    ("time_based", &[], Kind::Bool),
    ("ramp_time", &[], Kind::Value),
    ("number_ios", &[], Kind::Value),
    ("norandommap", &[], Kind::Bool),
    ("invalidate", &[], Kind::Bool),
    ("allow_mounted_write", &[], Kind::Bool),
    ("randrepeat", &[], Kind::Bool),
    ("randseed", &[], Kind::Value),
    ("allrandrepeat", &[], Kind::Bool),
    ("cpus_allowed", &[], Kind::Value),
    ("group_reporting", &[], Kind::Bool),
    ("stonewall", &["wait_for_previous"], Kind::Bool),
    ("new_group", &[], Kind::Bool),
    ("hipri", &[], Kind::Bool),
    ("sqthread_poll", &[], Kind::Bool),
    ("sqthread_poll_cpu", &[], Kind::Value),
    ("fixedbufs", &[], Kind::Bool),
    ("registerfiles", &[], Kind::Bool),
    ("fsync", &[], Kind::Value),
    ("verify", &[], Kind::Value),
    ("do_verify", &[], Kind::Bool),
    ("percentile_list", &[], Kind::Value),
    ("clat_percentiles", &[], Kind::Bool),
    ("lat_percentiles", &[], Kind::Bool),
    ("slat_percentiles", &[], Kind::Bool),
    ("xnvme_be", &[], Kind::Value),
    ("xnvme_async", &[], Kind::Value),
    ("xnvme_sync", &[], Kind::Value),
    ("xnvme_admin", &[], Kind::Value),
    ("xnvme_dev_nsid", &[], Kind::Value),
    ("xnvme_iovec", &[], Kind::Bool),
    ("ioswitch_opts", &[], Kind::Value),
    ("directory", &[], Kind::Value),
    ("allow_file_create", &[], Kind::Bool),
    ("create_on_open", &[], Kind::Bool),
    ("overwrite", &[], Kind::Bool),
    ("fill_device", &["fill_fs"], Kind::Bool),
    ("refill_buffers", &[], Kind::Bool),
    ("scramble_buffers", &[], Kind::Bool),
    ("zero_buffers", &[], Kind::Bool),
    ("exitall", &[], Kind::Bool),
    ("exitall_on_error", &[], Kind::Bool),
    ("exit_what", &[], Kind::Value),
    ("gtod_reduce", &[], Kind::Bool),
    ("disable_lat", &[], Kind::Bool),
    ("disable_clat", &[], Kind::Bool),
    ("disable_slat", &[], Kind::Bool),
    ("disable_bw_measurement", &["disable_bw"], Kind::Bool),
    ("verify_fatal", &[], Kind::Bool),
    ("continue_on_error", &[], Kind::Value),
    ("ignore_error", &[], Kind::Value),
    ("error_dump", &[], Kind::Bool),
    ("random_generator", &[], Kind::Value),
    ("unified_rw_reporting", &[], Kind::Value),
    ("io_submit_mode", &[], Kind::Value),
    ("threads", &[], Kind::Value),
    ("loops", &[], Kind::Value),
    ("cpus_allowed_policy", &[], Kind::Value),
    ("end_fsync", &[], Kind::Bool),
    ("fsync_on_close", &[], Kind::Bool),
    ("kb_base", &[], Kind::Value),
    ("disk_util", &[], Kind::Value),
    ("fadvise_hint", &[], Kind::Value),
    ("unique_filename", &[], Kind::Bool),
    ("create_serialize", &[], Kind::Bool),
    ("io_size", &["io_limit"], Kind::Value),
    ("startdelay", &[], Kind::Value),
    ("unlink", &[], Kind::Bool),
    ("wait_for", &[], Kind::Value),
    ("cmd_type", &[], Kind::Value),
    ("nonvectored", &[], Kind::Value),
    ("ioswitch_clat_stamp", &[], Kind::Value),
    ("rate", &[], Kind::Value),
    ("rate_iops", &[], Kind::Value),
    ("rate_process", &[], Kind::Value),
    ("thinktime", &[], Kind::Value),
    ("thinktime_spin", &[], Kind::Value),
    ("thinktime_blocks", &[], Kind::Value),
    ("thinktime_blocks_type", &[], Kind::Value),
    ("thinktime_iotime", &[], Kind::Value),
    ("rate_ignore_thinktime", &[], Kind::Bool),
    ("max_latency", &[], Kind::Value),
    ("latency_target", &[], Kind::Value),
    ("latency_window", &[], Kind::Value),
    ("latency_percentile", &[], Kind::Value),
    ("latency_run", &[], Kind::Bool),
    ("rate_min", &["ratemin"], Kind::Value),
    ("rate_iops_min", &[], Kind::Value),
    ("rate_cycle", &["ratecycle"], Kind::Value),
    // Bare, the log is named after the job (fio's default).
    ("write_lat_log", &[], Kind::Bool),
    ("write_bw_log", &[], Kind::Bool),
    ("write_iops_log", &[], Kind::Bool),
    ("log_avg_msec", &[], Kind::Value),
    ("bwavgtime", &[], Kind::Value),
    ("iopsavgtime", &[], Kind::Value),
    ("log_max_value", &[], Kind::Bool),
    ("log_offset", &[], Kind::Bool),
    ("per_job_logs", &[], Kind::Bool),
    ("write_hist_log", &[], Kind::Bool),
    ("log_prio", &[], Kind::Bool),
    ("log_compression", &[], Kind::Value),
    ("log_store_compressed", &[], Kind::Bool),
    ("log_hist_msec", &[], Kind::Value),
    ("log_hist_coarseness", &[], Kind::Value),
    ("bssplit", &[], Kind::Value),
    ("bsrange", &["blocksize_range"], Kind::Value),
    ("blocksize_unaligned", &["bs_unaligned"], Kind::Bool),
    ("blockalign", &["ba"], Kind::Value),
    ("nrfiles", &["nr_files"], Kind::Value),
    ("filename_format", &[], Kind::Value),
    ("flow", &[], Kind::Value),
    ("flow_id", &[], Kind::Value),
    ("flow_sleep", &[], Kind::Value),
    ("fallocate", &[], Kind::Value),
    ("openfiles", &[], Kind::Value),
    ("file_service_type", &[], Kind::Value),
    ("random_distribution", &[], Kind::Value),
    ("rw_sequencer", &[], Kind::Value),
    ("offset_increment", &[], Kind::Value),
    ("fdatasync", &[], Kind::Value),
    ("zonemode", &[], Kind::Value),
    ("max_open_zones", &["zbd_max_open_zones"], Kind::Value),
    ("job_max_open_zones", &[], Kind::Value),
    ("zone_reset_threshold", &[], Kind::Value),
    ("zone_reset_frequency", &[], Kind::Value),
    ("read_beyond_wp", &[], Kind::Bool),
    ("zonesize", &[], Kind::Value),
    ("zonerange", &[], Kind::Value),
    ("zoneskip", &[], Kind::Value),
    ("verify_pattern", &[], Kind::Value),
    ("verify_backlog", &[], Kind::Value),
    ("verify_async", &[], Kind::Value),
    ("verify_backlog_batch", &[], Kind::Value),
    ("numa_cpu_nodes", &[], Kind::Value),
    ("numa_mem_policy", &[], Kind::Value),
    ("prioclass", &[], Kind::Value),
    ("prio", &[], Kind::Value),
    ("cmdprio_percentage", &[], Kind::Value),
    ("cmdprio_class", &[], Kind::Value),
    ("cmdprio", &[], Kind::Value),
    ("cmdprio_bssplit", &[], Kind::Value),
    ("sync", &[], Kind::Value),
    ("steadystate", &["ss"], Kind::Value),
    ("steadystate_duration", &["ss_dur"], Kind::Value),
    ("steadystate_ramp_time", &["ss_ramp"], Kind::Value),
    ("buffer_pattern", &[], Kind::Value),
    ("verify_dump", &[], Kind::Bool),
    ("verify_interval", &[], Kind::Value),
    ("buffer_compress_percentage", &[], Kind::Value),
    ("buffer_compress_chunk", &[], Kind::Value),
    ("dedupe_percentage", &[], Kind::Value),
    ("dedupe_mode", &[], Kind::Value),
    ("dedupe_working_set_percentage", &[], Kind::Value),
    ("dedupe_global", &[], Kind::Bool),
];

/// Options that only some engines have, besides fio's names of the library's interface
/// tunables (see [`engines_for`]): (option, engines).
const ENGINE_OPTIONS: &[(&str, &[IoEngine])] = &[
    // pvsync2's hipri is RWF_HIPRI, not an interface tunable.
    ("hipri", &[IoEngine::Pvsync2]),
    ("xnvme_be", &[IoEngine::Xnvme]),
    ("xnvme_async", &[IoEngine::Xnvme]),
    ("xnvme_sync", &[IoEngine::Xnvme]),
    ("xnvme_admin", &[IoEngine::Xnvme]),
    ("xnvme_dev_nsid", &[IoEngine::Xnvme]),
    ("xnvme_iovec", &[IoEngine::Xnvme]),
    ("ioswitch_opts", &[IoEngine::Ioswitch]),
    ("cmd_type", &[IoEngine::IoUringCmd]),
    ("nonvectored", &[IoEngine::IoUring, IoEngine::IoUringCmd]),
    // fio's cmdprio.c options: the libaio and io_uring engines' only.
    ("cmdprio_percentage", &[IoEngine::Libaio, IoEngine::IoUring]),
    ("cmdprio_class", &[IoEngine::Libaio, IoEngine::IoUring]),
    ("cmdprio", &[IoEngine::Libaio, IoEngine::IoUring]),
    ("cmdprio_bssplit", &[IoEngine::Libaio, IoEngine::IoUring]),
];

/// The engines that take an engine-only option, or `None` for an option every engine takes:
/// those of the interfaces whose tunables fio spells `option` (the library's interface
/// table), then [`ENGINE_OPTIONS`].
fn engines_for(option: &str) -> Option<Vec<IoEngine>> {
    let mut out: Vec<IoEngine> = ioswitch::interfaces()
        .iter()
        .filter(|d| d.tunables.iter().any(|(_, fio)| *fio == Some(option)))
        .flat_map(|d| d.fio_engines.iter().filter_map(|n| IoEngine::parse(n)))
        .collect();
    out.extend(ENGINE_OPTIONS.iter().filter(|(o, _)| *o == option).flat_map(|(_, e)| e.iter().copied()));
    (!out.is_empty()).then_some(out)
}

/// The canonical name and kind of an option (or alias).
fn lookup(key: &str) -> Option<(&'static str, Kind)> {
    OPTIONS
        .iter()
        .find(|(name, aliases, _)| *name == key || aliases.contains(&key))
        .map(|&(name, _, kind)| (name, kind))
}

/// Whether an error refuses an `ioengine` value (an engine this benchmark does not run).
fn is_engine_refusal(e: &JobError) -> bool {
    matches!(e, JobError::BadValue { name, .. } if lookup(name).is_some_and(|(c, _)| c == "ioengine"))
}

/// fio options that `ioswitch bench` does not run, with why and, where there is one, what
/// to use instead: their refusal says so instead of a bare "unknown option".
const NOT_RUN: &[(&[&str], &str)] = &[
    (&["nice"], "the job's CPU priority is not set here; run `nice -n N ioswitch bench ...` instead"),
    (
        &["cgroup", "cgroup_weight", "cgroup_nodelete"],
        "jobs are not put in cgroups; run ioswitch bench in one (e.g. `systemd-run --scope`) instead",
    ),
    (&["uid", "gid"], "jobs do not switch user; run ioswitch bench as that user instead"),
    (
        &["ioscheduler"],
        "the device's scheduler is not changed; write /sys/block/DEV/queue/scheduler before the run instead",
    ),
    (
        &["exec_prerun", "exec_postrun"],
        "no commands are run around a job; run them before or after ioswitch bench instead",
    ),
    (&["cpumask"], "use cpus_allowed (supported) instead"),
    (
        &["mem", "iomem", "iomem_align", "mem_align", "hugepage-size"],
        "I/O buffers come from the ioswitch device's allocator; their kind and alignment cannot be chosen",
    ),
    (&["lockmem"], "memory is not locked with mlock"),
    (&["clocksource"], "times are always taken with clock_gettime (CLOCK_MONOTONIC)"),
    (
        &["significant_figures", "unit_base"],
        "fio's normal output format is not reproduced; use --output-format=json for exact numbers",
    ),
    (
        &[
            "read_iolog",
            "write_iolog",
            "replay_no_stall",
            "replay_redirect",
            "replay_align",
            "replay_scale",
            "replay_time_scale",
            "replay_skip",
        ],
        "I/O logs are not recorded or replayed",
    ),
    (
        &[
            "verify_only",
            "verify_state_save",
            "verify_state_load",
            "experimental_verify",
            "verify_async_cpus",
            "verify_offset",
        ],
        "that part of fio's verify is not implemented",
    ),
    (&["trim_percentage", "trim_verify_zero", "trim_backlog", "trim_backlog_batch"], "trims are not issued"),
    (
        &["create_only", "create_fsync", "pre_read", "file_append", "unlink_each_loop"],
        "that file set-up variant is not implemented",
    ),
    (&["sync_file_range", "write_hint", "nowait", "atomic"], "that per-I/O or per-file hint is not issued"),
    (&["stats"], "statistics are always collected"),
    (&["serialize_overlap"], "I/Os in flight are not held back when they overlap one another"),
    (&["gtod_cpu"], "there is no time-keeping thread; times are taken with clock_gettime"),
    (
        &[
            "log_unix_epoch",
            "log_alternate_epoch",
            "log_alternate_epoch_clock_id",
            "log_entries",
            "log_compression_cpus",
        ],
        "that log variant is not implemented; log times are ms since the job's start, as fio's default",
    ),
    (&["block_error_percentiles"], "trims' block error histograms are not kept"),
    (&["bs_is_seq_rand"], "block sizes are given per direction (read,write,trim), not per sequential and random"),
    (&["percentage_random"], "a mix of sequential and random offsets in one job is not implemented"),
    (&["offset_align"], "offsets are aligned to the block size only"),
    (&["softrandommap"], "the random map is always kept unless norandommap (supported) turns it off"),
    (&["write_barrier"], "barrier writes are not issued"),
    (&["ignore_zone_limits", "zonecapacity"], "zone limits and capacities are the device's own, from its zone report"),
    (&["lockfile"], "files are not locked"),
    (&["opendir"], "use filename, directory or nrfiles for the files instead"),
    (&["profile"], "fio's built-in profiles are not run"),
    (&["gpu_dev_id"], "GPUDirect RDMA is not run"),
    (
        &["merge_blktrace_file", "merge_blktrace_iters", "merge_blktrace_scalars", "read_iolog_chunked"],
        "I/O logs and traces are not replayed",
    ),
    (&["verifysort", "verifysort_nr", "flow_watermark"], "deprecated: fio ignores it; remove it from the job"),
    (&["rwmixcycle", "percentage_sequential"], "deprecated: fio refuses it too"),
];

fn unknown_option(name: &str, loc: &Loc) -> JobError {
    let hint = match name {
        "output-format" | "output" | "section" => format!(" (a command-line option: --{name}=...)"),
        "readonly" => " (a command-line option of the whole run: --readonly)".to_string(),
        _ => match NOT_RUN.iter().find(|(names, _)| names.contains(&name)) {
            Some((_, why)) => format!(": a fio option ioswitch bench does not run ({why})"),
            None => String::new(),
        },
    };
    JobError::UnknownOption { name: name.to_string(), loc: loc.clone(), hint }
}

/// One option's value as written, read as the kind the option takes; the errors name
/// the option, the value and where it was given.
struct OptValue<'a> {
    opt: &'a RawOption,
}

impl<'a> OptValue<'a> {
    /// The value is not what the option takes.
    fn bad(&self, expected: &str) -> JobError {
        JobError::BadValue {
            name: self.opt.key.clone(),
            value: self.opt.value.as_deref().unwrap_or_default().to_string(),
            loc: self.opt.loc.clone(),
            expected: expected.to_string(),
        }
    }

    /// The value is not what the option takes, for the reason `why`: `EXPECTED: WHY`.
    fn bad_because(&self, expected: &str, why: impl std::fmt::Display) -> JobError {
        self.bad(&format!("{expected}: {why}"))
    }

    /// The value as `parse` reads it; the reason `parse` gives for refusing it follows
    /// `expected` in the error ([`bad_because`](Self::bad_because)).
    fn parsed<T, E: std::fmt::Display>(
        &self,
        expected: &str,
        parse: impl FnOnce(&'a str) -> Result<T, E>,
    ) -> Result<T, JobError> {
        parse(self.value(expected)?).map_err(|e| self.bad_because(expected, e))
    }

    /// Each direction's part of the value (`R[,W]`: [`crate::shapes::per_direction`]),
    /// given to `set` with its direction (0 read, 1 write); a part left empty is skipped.
    fn each_direction(
        &self,
        expected: &str,
        mut set: impl FnMut(usize, &'a str) -> Result<(), JobError>,
    ) -> Result<(), JobError> {
        let sides = self.parsed(expected, crate::shapes::per_direction)?;
        for (d, side) in sides.into_iter().enumerate() {
            if let Some(side) = side {
                set(d, side)?;
            }
        }
        Ok(())
    }

    /// A size with fio's units ([`parse_bytes`]) of at least `min` bytes.
    fn size(&self, min: u64) -> Result<u64, JobError> {
        parse_bytes(self.value(EXPECT_SIZE)?).filter(|&n| n >= min).ok_or_else(|| self.bad(EXPECT_SIZE))
    }

    /// The value, trimmed; an error when there is none.
    fn value(&self, expected: &str) -> Result<&'a str, JobError> {
        match self.opt.value.as_deref().map(str::trim) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(JobError::MissingValue {
                name: self.opt.key.clone(),
                loc: self.opt.loc.clone(),
                expected: expected.to_string(),
            }),
        }
    }

    /// The meaning of the value in `table` (word, meaning); an error when it is none of
    /// the words (`expected` lists them).
    fn choice<T: Clone>(&self, expected: &str, table: &[(&str, T)]) -> Result<T, JobError> {
        let v = self.value(expected)?;
        table.iter().find(|(w, _)| *w == v).map(|(_, t)| t.clone()).ok_or_else(|| self.bad(expected))
    }

    /// A boolean; the bare option means 1.
    fn flag(&self) -> Result<bool, JobError> {
        let raw = self.opt.value.as_deref();
        match raw {
            Some(v) if v.trim().is_empty() => Err(self.bad(EXPECT_BOOL)),
            _ => parse_bool(raw).ok_or_else(|| self.bad(EXPECT_BOOL)),
        }
    }

    /// A whole number (with fio's units) of at least `min`.
    fn count(&self, min: u64) -> Result<u64, JobError> {
        let expected = if min == 0 { EXPECT_COUNT.to_string() } else { format!("a whole number of at least {min}") };
        parse_bytes(self.value(&expected)?).filter(|&n| n >= min).ok_or_else(|| self.bad(&expected))
    }

    /// [`count`](Self::count) that fits 32 bits.
    fn count32(&self, min: u64) -> Result<u32, JobError> {
        let n = self.count(min)?;
        u32::try_from(n).map_err(|_| self.bad("a whole number below 2^32"))
    }

    /// A percentage from 0 to 100.
    fn percent(&self) -> Result<u32, JobError> {
        let expected = "a percentage from 0 to 100";
        self.value(expected)?.parse::<u32>().ok().filter(|p| *p <= 100).ok_or_else(|| self.bad(expected))
    }

    /// A number from 0 to 1 (fio's float options with those bounds).
    fn fraction(&self) -> Result<f64, JobError> {
        let expected = "a number from 0 to 1, such as 0.25";
        self.value(expected)?.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f)).ok_or_else(|| self.bad(expected))
    }

    /// Any text that is not empty.
    fn text(&self) -> Result<String, JobError> {
        self.value("some text").map(str::to_string)
    }

    /// A time; zero means none.
    fn time(&self) -> Result<Option<Duration>, JobError> {
        let d = parse_time(self.value(EXPECT_TIME)?).ok_or_else(|| self.bad(EXPECT_TIME))?;
        Ok((!d.is_zero()).then_some(d))
    }
}

const EXPECT_BOOL: &str = "1 or 0 (or the bare option for 1)";
const EXPECT_SIZE: &str =
    "a size such as 4096, 4k, 64m or 1g (k, m, g, t, p: powers of 1024; kib, mib, ...: powers of 1000, as in fio)";
const EXPECT_SIZE_PCT: &str = "a size such as 4k or 1g, or a percentage such as 50%";
const EXPECT_COUNT: &str = "a whole number";
const EXPECT_TIME: &str = "a time such as 30 (seconds), 500ms, 10s, 5m or 1h";
const EXPECT_RW: &str = "read, write, randread, randwrite, rw (readwrite), randrw, trim, randtrim or trimwrite";
const EXPECT_VERIFY: &str = "crc32c, crc32c-intel, md5, crc64, xxhash, sha256, pattern, meta or none";

/// Parses a whole number with an optional fio size unit (see the module docs).
pub(crate) fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok();
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let (base, pow): (u64, u32) = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => (1, 0),
        "k" | "kb" => (1024, 1),
        "m" | "mb" => (1024, 2),
        "g" | "gb" => (1024, 3),
        "t" | "tb" => (1024, 4),
        "p" | "pb" => (1024, 5),
        "kib" => (1000, 1),
        "mib" => (1000, 2),
        "gib" => (1000, 3),
        "tib" => (1000, 4),
        "pib" => (1000, 5),
        _ => return None,
    };
    n.checked_mul(base.checked_pow(pow)?)
}

/// A size or, when `pct` allows, a percentage in `pct`'s range.
fn parse_size_spec(s: &str, pct: std::ops::RangeInclusive<u32>) -> Option<SizeSpec> {
    match s.trim().strip_suffix('%') {
        Some(num) => num.trim().parse().ok().filter(|p| pct.contains(p)).map(SizeSpec::Percent),
        None => parse_bytes(s).map(SizeSpec::Bytes),
    }
}

/// A time; a plain number is seconds (also `membw --shape --runtime/--ramp`, parsed as a
/// job's `runtime` and `ramp_time` are).
pub(crate) fn parse_time(s: &str) -> Option<Duration> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let micros_per: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1_000_000,
        "us" | "usec" => 1,
        "ms" | "msec" => 1_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => return None,
    };
    n.checked_mul(micros_per).map(Duration::from_micros)
}

fn parse_bool(v: Option<&str>) -> Option<bool> {
    match v.map(str::trim) {
        None | Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    }
}

/// `R`, `R,W` or `R,W,T` (T: trims, which are not run, so only 0 or empty); one value
/// sets both directions, an empty side keeps `current` (fio's rule for per-direction
/// options, as for `bs`).
fn parse_rw_pair(v: &str, current: [u64; 2]) -> Option<[u64; 2]> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    let side = |s: &str, cur: u64| if s.is_empty() { Some(cur) } else { parse_bytes(s) };
    match parts.as_slice() {
        [one] => parse_bytes(one).map(|n| [n, n]),
        [r, w] => Some([side(r, current[0])?, side(w, current[1])?]),
        [r, w, t] if t.is_empty() || parse_bytes(t) == Some(0) => Some([side(r, current[0])?, side(w, current[1])?]),
        _ => None,
    }
}

/// fio's `max_latency` (µs without a unit), in ns for read, write and trim: one value
/// for all three; `r,w` (trims as writes); or `r,w,t`. An empty field keeps what was set.
fn parse_max_latency(v: &str, current: [u64; 3]) -> Option<[u64; 3]> {
    let one = |s: &str, cur: u64| {
        if s.trim().is_empty() {
            return Some(cur);
        }
        u64::try_from(parse_time_us(s)?.as_nanos()).ok()
    };
    match v.split(',').collect::<Vec<_>>().as_slice() {
        [a] => one(a, current[0]).map(|n| [n; 3]),
        [r, w] => {
            let w = one(w, current[1])?;
            Some([one(r, current[0])?, w, w])
        }
        [r, w, t] => Some([one(r, current[0])?, one(w, current[1])?, one(t, current[2])?]),
        _ => None,
    }
}

/// A time whose plain number is µs (fio's `thinktime`); units as [`parse_time`].
fn parse_time_us(s: &str) -> Option<Duration> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().ok().map(Duration::from_micros);
    }
    parse_time(t)
}

/// `0-3,8,10-11`, sorted and without repeats.
fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    crate::placement::parse_list_below(s, MAX_CPUS)
}

fn parse_percentile_list(s: &str) -> Option<Vec<f64>> {
    let list: Vec<f64> = s
        .split(':')
        .map(|p| p.trim().parse::<f64>().ok().filter(|p| *p > 0.0 && *p <= 100.0))
        .collect::<Option<_>>()?;
    (list.len() <= MAX_PERCENTILES).then_some(list)
}

/// fio's filename list: `:` separates names, `\:` is a colon.
fn split_filenames(s: &str) -> Vec<String> {
    let mut names = vec![String::new()];
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ':' => names.push(String::new()),
            c => {
                let c = if c == '\\' && chars.peek() == Some(&':') { chars.next().unwrap_or(c) } else { c };
                if let Some(name) = names.last_mut() {
                    name.push(c);
                }
            }
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

impl JobSpec {
    /// A job with fio's defaults for everything.
    pub fn new(name: impl Into<String>) -> JobSpec {
        JobSpec {
            name: name.into(),
            description: None,
            ioengine: IoEngine::Psync,
            filename: Vec::new(),
            size: None,
            filesize: None,
            offset: SizeSpec::Bytes(0),
            rw: Rw::Read,
            rwmixread: 50,
            bs: RwPair { read: 4096, write: 4096 },
            iodepth: 1,
            iodepth_batch_submit: 1,
            iodepth_batch_complete_min: 1,
            // fio's fix-ups of the unset options at the default iodepth=1 (see fix_up).
            iodepth_batch_complete_max: 1,
            iodepth_low: 1,
            numjobs: 1,
            thread: false,
            direct: false,
            runtime: None,
            time_based: false,
            ramp_time: None,
            number_ios: None,
            norandommap: false,
            invalidate: true,
            randrepeat: true,
            randseed: None,
            allrandrepeat: false,
            cpus_allowed: None,
            group_reporting: false,
            stonewall: false,
            new_group: false,
            hipri: false,
            sqthread_poll: false,
            sqthread_poll_cpu: None,
            fixedbufs: false,
            registerfiles: false,
            fsync: 0,
            allow_mounted_write: false,
            verify: Verify::None,
            do_verify: true,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
            xnvme: XnvmeOpts::default(),
            ioswitch_opts: None,
            behaviour: Behaviour::default(),
            load: crate::load::Load::new(),
            logs: crate::iolog::LogOpts::default(),
            shapes: crate::shapes::Shapes::default(),
            section: None,
            options: Vec::new(),
            origins: BTreeMap::new(),
            steady: crate::steady::SteadySpec::default(),
        }
    }

    /// Interprets a job as read: its globals, then its own options (the last setting of
    /// an option wins), then checks that they fit together.
    pub fn from_raw(raw: &RawJob) -> Result<JobSpec, JobError> {
        let mut spec = JobSpec::new(raw.name.clone());
        spec.section = Some(raw.loc.clone());
        if raw.file_stonewall {
            spec.stonewall = true;
            spec.origins.insert("stonewall", raw.loc.clone());
        }
        for opt in raw.globals.iter().chain(&raw.options) {
            spec.apply(opt)?;
        }
        spec.options = raw.options.clone();
        spec.fix_up()?;
        Ok(spec)
    }

    /// Where an option (canonical name or alias) was last set for this job; `None` when
    /// it has its default.
    pub fn origin(&self, option: &str) -> Option<&Loc> {
        lookup(option).and_then(|(name, _)| self.origins.get(name))
    }

    /// An error about this job, placed at the line that set `option` (or at the job's
    /// section when the option has its default): for checks made later, e.g. "`hipri`
    /// needs a device with poll queues".
    pub fn error_at(&self, option: &str, msg: impl Into<String>) -> JobError {
        let loc = self.origin(option).or(self.section.as_ref()).cloned();
        JobError::Invalid { job: self.name.clone(), loc, msg: msg.into() }
    }

    /// Applies one option: each group of options has its own function, which reports
    /// whether the option was one of its own.
    fn apply(&mut self, opt: &RawOption) -> Result<(), JobError> {
        let (canon, _) = lookup(&opt.key).ok_or_else(|| unknown_option(&opt.key, &opt.loc))?;
        let val = OptValue { opt };
        let known = self.apply_job_and_target(canon, &val)?
            || self.apply_workload(canon, &val)?
            || self.apply_timing(canon, &val)?
            || self.apply_concurrency(canon, &val)?
            || self.apply_engine_tunables(canon, &val)?
            || self.apply_verify_and_report(canon, &val)?
            || self.apply_behaviour(canon, &val)?
            || self.apply_load_and_logs(canon, &val)?
            || self.apply_shapes(canon, &val)?
            || self.apply_placement(canon, &val)?
            || self.apply_steady(canon, &val)?;
        if !known {
            return Err(unknown_option(&opt.key, &opt.loc));
        }
        self.origins.insert(canon, opt.loc.clone());
        Ok(())
    }

    /// The job's name and engine, and what it runs on: files, their size and region, and how they are opened.
    fn apply_job_and_target(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "name" => self.name = val.text()?,
            "description" => self.description = Some(val.text()?),
            "ioengine" => {
                let v = val.value("an ioengine name")?;
                self.ioengine = IoEngine::parse(v).ok_or_else(|| {
                    let known: Vec<&str> = IoEngine::ALL.iter().map(|e| e.as_str()).collect();
                    val.bad(&format!("one of {} (other fio engines are not supported)", known.join(", ")))
                })?;
            }
            "filename" => {
                let names = split_filenames(val.value("a file or device name")?);
                if names.is_empty() {
                    return Err(val.bad("a file or device name"));
                }
                self.filename = names;
            }
            "size" => {
                self.size = match parse_size_spec(val.value(EXPECT_SIZE_PCT)?, 1..=100)
                    .ok_or_else(|| val.bad(EXPECT_SIZE_PCT))?
                {
                    SizeSpec::Bytes(0) => None,
                    s => Some(s),
                }
            }
            "filesize" => {
                const EXPECT: &str = "a size such as 4k or 1g, or a range such as 1m-4m";
                let v = val.value(EXPECT)?;
                // fio's range: each file gets a size drawn from it (see Shapes::filesize_high).
                let (low, high) = match v.split_once('-') {
                    Some((a, b)) => (parse_bytes(a), parse_bytes(b)),
                    None => (parse_bytes(v), parse_bytes(v)),
                };
                let (low, high) = low.zip(high).filter(|&(l, h)| l > 0 && h >= l).ok_or_else(|| val.bad(EXPECT))?;
                self.filesize = Some(low);
                self.shapes.filesize_high = (high > low).then_some(high);
            }
            "offset" => {
                self.offset =
                    parse_size_spec(val.value(EXPECT_SIZE_PCT)?, 0..=100).ok_or_else(|| val.bad(EXPECT_SIZE_PCT))?
            }
            "direct" => self.direct = val.flag()?,
            "buffered" => self.direct = !val.flag()?,
            "invalidate" => self.invalidate = val.flag()?,
            "allow_mounted_write" => self.allow_mounted_write = val.flag()?,
            "fsync" => self.fsync = val.count32(0)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The I/O pattern: direction, mix, block sizes, how many I/Os, and where random offsets come from.
    fn apply_workload(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "rw" => {
                let v = val.value(EXPECT_RW)?;
                // fio's offset modifier: `rw=write:4k` (a hole after each I/O; `read:-8k`
                // goes backwards) or `rw=randread:8` (a new random offset every 8 I/Os).
                let (v, modifier) = match v.split_once(':') {
                    Some((rw, m)) => {
                        const EXPECT: &str =
                            "a pattern with an offset modifier, such as write:4k, read:-8k or randread:8";
                        let m = m.trim();
                        let (neg, m) = m.strip_prefix('-').map_or((false, m), |m| (true, m));
                        let n = parse_bytes(m).and_then(|n| i64::try_from(n).ok()).ok_or_else(|| val.bad(EXPECT))?;
                        (rw.trim(), Some(if neg { -n } else { n }))
                    }
                    None => (v, None),
                };
                self.shapes.rw_modifier = modifier.filter(|&m| m != 0);
                self.rw = match v {
                    "read" => Rw::Read,
                    "write" => Rw::Write,
                    "randread" => Rw::RandRead,
                    "randwrite" => Rw::RandWrite,
                    "rw" | "readwrite" => Rw::ReadWrite,
                    "randrw" => Rw::RandRw,
                    "trim" => Rw::Trim,
                    "randtrim" => Rw::RandTrim,
                    "trimwrite" => Rw::TrimWrite,
                    "randtrimwrite" => return Err(val.bad(&format!("{EXPECT_RW} (randtrimwrite is not run)"))),
                    _ => return Err(val.bad(EXPECT_RW)),
                };
            }
            "rwmixread" => self.rwmixread = val.percent()?,
            "rwmixwrite" => self.rwmixread = 100 - val.percent()?,
            "bs" => self.bs = self.parse_bs(val.value(EXPECT_SIZE)?).ok_or_else(|| val.bad(EXPECT_SIZE))?,
            "number_ios" => self.number_ios = Some(val.count(0)?).filter(|&n| n > 0),
            "norandommap" => self.norandommap = val.flag()?,
            "randrepeat" => self.randrepeat = val.flag()?,
            "randseed" => self.randseed = Some(val.count(0)?),
            "allrandrepeat" => self.allrandrepeat = val.flag()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// How long the job runs.
    fn apply_timing(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "runtime" => self.runtime = val.time()?,
            "time_based" => self.time_based = val.flag()?,
            "ramp_time" => self.ramp_time = val.time()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Queue depth and batching, job copies and threads, CPUs, and reporting groups and phases.
    fn apply_concurrency(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "iodepth" => self.iodepth = val.count32(1)?,
            "iodepth_batch_submit" => self.iodepth_batch_submit = val.count32(0)?,
            "iodepth_batch_complete_min" => self.iodepth_batch_complete_min = val.count32(0)?,
            "iodepth_batch_complete_max" => self.iodepth_batch_complete_max = val.count32(0)?,
            "iodepth_low" => self.iodepth_low = val.count32(0)?,
            "numjobs" => self.numjobs = val.count32(1)?,
            "thread" => self.thread = val.flag()?,
            "cpus_allowed" => {
                let expected = format!("a CPU list such as 0-1,3 (CPUs below {MAX_CPUS})");
                self.cpus_allowed = Some(parse_cpu_list(val.value(&expected)?).ok_or_else(|| val.bad(&expected))?);
            }
            "group_reporting" => self.group_reporting = val.flag()?,
            "stonewall" => self.stonewall = val.flag()?,
            "new_group" => self.new_group = val.flag()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Engine-specific options: io_uring's tunables, the xNVMe engine's interfaces, ioswitch's option string.
    fn apply_engine_tunables(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "hipri" => self.hipri = val.flag()?,
            "sqthread_poll" => self.sqthread_poll = val.flag()?,
            "sqthread_poll_cpu" => self.sqthread_poll_cpu = Some(val.count32(0)?),
            "fixedbufs" => self.fixedbufs = val.flag()?,
            "registerfiles" => self.registerfiles = val.flag()?,
            "xnvme_be" => self.xnvme.be = Some(val.text()?),
            "xnvme_async" => self.xnvme.r#async = Some(val.text()?),
            "xnvme_sync" => self.xnvme.sync = Some(val.text()?),
            "xnvme_admin" => self.xnvme.admin = Some(val.text()?),
            "xnvme_dev_nsid" => self.xnvme.dev_nsid = Some(val.count32(1)?),
            "xnvme_iovec" => {
                if val.flag()? {
                    return Err(val.bad(
                        "0 (xNVMe's vectored commands, xnvme_iovec=1, are not run: ioswitch bench submits one buffer per command)",
                    ));
                }
            }
            "ioswitch_opts" => {
                let v = val.value("an ioswitch option string such as async=io_uring,sqpoll=1")?;
                let opts =
                    v.parse::<ioswitch::Opts>().map_err(|e| val.bad(&format!("an ioswitch option string ({e})")))?;
                self.ioswitch_opts = Some(opts);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Data verification and which latency percentiles are reported.
    fn apply_verify_and_report(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "verify" => {
                self.verify = match val.value(EXPECT_VERIFY)? {
                    "none" | "0" => Verify::None,
                    "crc32c" | "crc32c-intel" => Verify::Crc32c,
                    "md5" => Verify::Md5,
                    "crc64" => Verify::Crc64,
                    "xxhash" => Verify::Xxhash,
                    "sha256" => Verify::Sha256,
                    "pattern" => Verify::Pattern,
                    "meta" => Verify::Meta,
                    "crc32" | "crc16" | "crc7" | "sha1" | "sha512" | "sha3-224" | "sha3-256" | "sha3-384"
                    | "sha3-512" | "null" => {
                        return Err(val.bad(&format!("{EXPECT_VERIFY} (this fio method is not supported)")))
                    }
                    _ => return Err(val.bad(EXPECT_VERIFY)),
                }
            }
            "do_verify" => self.do_verify = val.flag()?,
            "percentile_list" => {
                let expected = format!("up to {MAX_PERCENTILES} percentiles above 0 and at most 100, separated by ':'");
                self.percentile_list =
                    parse_percentile_list(val.value(&expected)?).ok_or_else(|| val.bad(&expected))?;
            }
            "clat_percentiles" => self.clat_percentiles = val.flag()?,
            "lat_percentiles" => self.lat_percentiles = val.flag()?,
            "slat_percentiles" => self.slat_percentiles = val.flag()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// File creation, ending, error handling and measurement ([`Behaviour`]).
    fn apply_behaviour(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        let b = &mut self.behaviour;
        match canon {
            "directory" => {
                let dirs = split_filenames(val.value("a directory")?);
                if dirs.is_empty() {
                    return Err(val.bad("a directory"));
                }
                b.directory = dirs;
            }
            "allow_file_create" => b.allow_file_create = val.flag()?,
            "create_on_open" => b.create_on_open = val.flag()?,
            "overwrite" => b.overwrite = val.flag()?,
            "fill_device" => b.fill_device = val.flag()?,
            "refill_buffers" => b.refill_buffers = val.flag()?,
            "scramble_buffers" => b.scramble_buffers = val.flag()?,
            "zero_buffers" => b.zero_buffers = val.flag()?,
            "verify_dump" => b.verify_dump = val.flag()?,
            "exitall" => b.exitall = val.flag()?,
            "exitall_on_error" => b.exitall_on_error = val.flag()?,
            "exit_what" => {
                b.exit_what = val.choice(
                    "group, stonewall or all",
                    &[("group", ExitWhat::Group), ("stonewall", ExitWhat::Stonewall), ("all", ExitWhat::All)],
                )?
            }
            // fio's callback sets the four it stands for, each of which a later option
            // may set again.
            "gtod_reduce" => {
                let on = val.flag()?;
                (b.disable_lat, b.disable_clat, b.disable_slat, b.disable_bw) = (on, on, on, on);
            }
            "disable_lat" => b.disable_lat = val.flag()?,
            "disable_clat" => b.disable_clat = val.flag()?,
            "disable_slat" => b.disable_slat = val.flag()?,
            "disable_bw_measurement" => b.disable_bw = val.flag()?,
            "verify_fatal" => b.verify_fatal = val.flag()?,
            "continue_on_error" => {
                const EXPECT: &str = "none, read, write, io, verify, all, 0 or 1";
                let (read, write, verify) = match val.value(EXPECT)? {
                    "none" | "0" => (false, false, false),
                    "read" => (true, false, false),
                    "write" => (false, true, false),
                    "io" => (true, true, false),
                    "verify" => (false, false, true),
                    "all" | "1" => (true, true, true),
                    _ => return Err(val.bad(EXPECT)),
                };
                b.continue_on_error = ContinueOn { read, write, verify };
            }
            "ignore_error" => {
                for (kind, list) in parse_ignore_error(val.value(EXPECT_IGNORE_ERROR)?)
                    .map_err(|why| val.bad(&format!("{EXPECT_IGNORE_ERROR} ({why})")))?
                    .into_iter()
                    .enumerate()
                {
                    // fio (options.c ignore_error_type): a list turns continue_on_error on
                    // for its error type; an empty one leaves the type as it was.
                    if !list.is_empty() {
                        match kind {
                            0 => b.continue_on_error.read = true,
                            1 => b.continue_on_error.write = true,
                            _ => b.continue_on_error.verify = true,
                        }
                        b.ignore_error[kind] = list;
                    }
                }
            }
            "error_dump" => b.error_dump = val.flag()?,
            "flow" => {
                const EXPECT: &str = "a weight from 0 to 1000 (fio's FLOW_MAX_WEIGHT)";
                b.flow =
                    val.value(EXPECT)?.parse::<u32>().ok().filter(|w| *w <= 1000).ok_or_else(|| val.bad(EXPECT))?;
            }
            "flow_id" => {
                const EXPECT: &str = "a whole number (a flow's id)";
                b.flow_id = val.value(EXPECT)?.parse::<i32>().map_err(|_| val.bad(EXPECT))?;
            }
            "flow_sleep" => b.flow_sleep_us = val.count32(0)?,
            "fallocate" => {
                b.fallocate = val.choice(
                    "none, native, posix, keep, truncate, 0 (none) or 1 (posix)",
                    &[
                        ("none", Fallocate::None),
                        ("0", Fallocate::None),
                        ("native", Fallocate::Native),
                        ("posix", Fallocate::Posix),
                        ("1", Fallocate::Posix),
                        ("keep", Fallocate::Keep),
                        ("truncate", Fallocate::Truncate),
                    ],
                )?
            }
            "ioswitch_clat_stamp" => {
                b.clat_stamp = val.choice(
                    "batch (one completion time per reaped batch, as fio) or each",
                    &[("batch", ClatStamp::Batch), ("each", ClatStamp::Each)],
                )?
            }
            "random_generator" => {
                b.random_generator = val.choice(
                    "tausworthe, lfsr or tausworthe64",
                    &[
                        ("tausworthe", RandomGenerator::Tausworthe),
                        ("tausworthe64", RandomGenerator::Tausworthe64),
                        ("lfsr", RandomGenerator::Lfsr),
                    ],
                )?
            }
            "unified_rw_reporting" => {
                b.unified_rw_reporting = val.choice(
                    "none, mixed, both, 0, 1 or 2",
                    &[
                        ("none", UnifiedRw::None),
                        ("0", UnifiedRw::None),
                        ("mixed", UnifiedRw::Mixed),
                        ("1", UnifiedRw::Mixed),
                        ("both", UnifiedRw::Both),
                        ("2", UnifiedRw::Both),
                    ],
                )?
            }
            "io_submit_mode" => b.offload = val.choice("inline or offload", &[("inline", false), ("offload", true)])?,
            "threads" => b.tiobench_threads = Some(val.count32(1)?),
            "loops" => b.loops = val.count32(1)?,
            "cpus_allowed_policy" => {
                b.cpus_split = val.choice("shared or split", &[("shared", false), ("split", true)])?
            }
            // One flush at the end either way: the job has one file, closed when it ends.
            "end_fsync" | "fsync_on_close" => b.end_fsync = val.flag()?,
            // Sizes are read with fio's default base (see the module docs).
            "kb_base" => {
                if val.value("1024")? != "1024" {
                    return Err(val.bad("1024 (fio's default; kb_base=1000 is not supported)"));
                }
            }
            // fio's posix_fadvise of each file at open (default 1: RANDOM or SEQUENTIAL by
            // the workload) is not issued here: 0, fio's "no hint", is what runs.
            "fadvise_hint" => {
                if val.value("0")? != "0" {
                    return Err(val.bad(
                        "0 (no posix_fadvise hint, which is what ioswitch bench runs; fio's 1, sequential \
                         and random are not issued)",
                    ));
                }
            }
            // fio's disk utilization statistics (default 1) are not collected: 0, which
            // turns them off, is what runs.
            "disk_util" => {
                if val.flag()? {
                    return Err(val.bad(
                        "0 (no disk utilization statistics, which is what ioswitch bench runs; fio's default 1 \
                         collects them, which is not done here)",
                    ));
                }
            }
            // fio prefixes the files it names with the client's address in client/server
            // mode only, which ioswitch bench does not have: no effect either way.
            "unique_filename" => {
                val.flag()?;
            }
            "create_serialize" => b.create_serialize = val.flag()?,
            "io_size" => {
                b.io_size = match parse_size_spec(val.value(EXPECT_SIZE_PCT)?, 1..=100)
                    .ok_or_else(|| val.bad(EXPECT_SIZE_PCT))?
                {
                    SizeSpec::Bytes(0) => None,
                    s => Some(s),
                }
            }
            "startdelay" => {
                let v = val.value(EXPECT_TIME)?;
                if v.contains('-') {
                    return Err(val.bad(&format!("{EXPECT_TIME} (a range of delays is not run)")));
                }
                b.startdelay = val.time()?;
            }
            "unlink" => b.unlink = val.flag()?,
            "wait_for" => b.wait_for = Some(val.text()?),
            // io_uring_cmd's command set: fio knows only NVMe, as ioswitch does.
            "cmd_type" => {
                if val.value("nvme")? != "nvme" {
                    return Err(val.bad("nvme"));
                }
            }
            // fio's default (-1) and any other value but 0 mean non-vectored commands,
            // which is what a job of one buffer per command submits.
            "nonvectored" => {
                const EXPECT: &str =
                    "-1 or 1 (non-vectored commands; nonvectored=0, vectored commands for one buffer, is not run)";
                match val.value(EXPECT)?.parse::<i64>() {
                    Ok(0) | Err(_) => return Err(val.bad(EXPECT)),
                    Ok(_) => {}
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Load shaping ([`crate::load`]) and time-series logs ([`crate::iolog`]).
    fn apply_load_and_logs(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        const EXPECT_RATE: &str =
            "a rate such as 10m or 500k, or one per direction (reads,writes) such as 1m,500k or ,500k";
        const EXPECT_US: &str = "a time such as 100 (µs), 10ms or 1s";
        let (l, g) = (&mut self.load, &mut self.logs);
        match canon {
            "rate" | "rate_iops" => {
                // fio's third value is the trims' rate: kept to refuse it for a job that
                // trims (trims here are paced at the writes' rate); in a job that does
                // not trim it changes nothing, in fio as here.
                let v = val.value(EXPECT_RATE)?;
                let (pair, trim) = match v.rsplit_once(',') {
                    Some((rw, t)) if rw.contains(',') => (rw, parse_bytes(t.trim()).filter(|&n| n > 0)),
                    _ => (v, None),
                };
                let target = if canon == "rate" { &mut l.rate } else { &mut l.rate_iops };
                *target = parse_rw_pair(pair, *target).ok_or_else(|| val.bad(EXPECT_RATE))?;
                l.trim_rate = trim.map(|_| if canon == "rate" { "rate" } else { "rate_iops" });
            }
            "rate_process" => {
                l.process = val.choice(
                    "linear or poisson",
                    &[("linear", crate::load::RateProcess::Linear), ("poisson", crate::load::RateProcess::Poisson)],
                )?
            }
            "thinktime" => l.thinktime = parse_time_us(val.value(EXPECT_US)?).ok_or_else(|| val.bad(EXPECT_US))?,
            "thinktime_spin" => {
                l.thinktime_spin = parse_time_us(val.value(EXPECT_US)?).ok_or_else(|| val.bad(EXPECT_US))?
            }
            "thinktime_blocks" => {
                l.thinktime_blocks = val.count32(1)?;
                l.thinktime_blocks_given = true;
            }
            // A plain number is seconds here (fio's is_seconds), unlike thinktime's µs.
            "thinktime_iotime" => l.thinktime_iotime = val.time()?.unwrap_or_default(),
            "rate_ignore_thinktime" => l.rate_ignore_thinktime = val.flag()?,
            "thinktime_blocks_type" => {
                l.thinktime_count = val.choice(
                    "complete or issue",
                    &[("complete", crate::load::ThinkCount::Complete), ("issue", crate::load::ThinkCount::Issue)],
                )?
            }
            "latency_target" => {
                let t = parse_time_us(val.value(EXPECT_US)?).ok_or_else(|| val.bad(EXPECT_US))?;
                l.latency_target = (!t.is_zero()).then_some(t);
            }
            "max_latency" => {
                const EXPECT: &str =
                    "a time such as 100 (µs), 10ms or 1s, or one per direction: read,write[,trim] (0: no limit)";
                l.max_latency = parse_max_latency(val.value(EXPECT)?, l.max_latency).ok_or_else(|| val.bad(EXPECT))?;
            }
            "latency_window" => {
                l.latency_window = parse_time_us(val.value(EXPECT_US)?).ok_or_else(|| val.bad(EXPECT_US))?
            }
            "latency_percentile" => {
                const EXPECT: &str = "a percentage from 0 to 100, such as 99.9";
                l.latency_percentile = val
                    .value(EXPECT)?
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| val.bad(EXPECT))?;
            }
            "latency_run" => l.latency_run = val.flag()?,
            "rate_min" => {
                l.rate_min = parse_rw_pair(val.value(EXPECT_RATE)?, l.rate_min).ok_or_else(|| val.bad(EXPECT_RATE))?
            }
            "rate_iops_min" => {
                l.rate_iops_min =
                    parse_rw_pair(val.value(EXPECT_RATE)?, l.rate_iops_min).ok_or_else(|| val.bad(EXPECT_RATE))?
            }
            // fio's rate_cycle is a plain number of ms.
            "rate_cycle" => l.rate_cycle = Duration::from_millis(val.count(1)?),
            "write_lat_log" | "write_bw_log" | "write_iops_log" | "write_hist_log" => {
                let prefix = val.opt.value.as_deref().map(str::trim).unwrap_or_default().to_string();
                // fio reads `write_lat_log=0` as a log named "0"; so does this.
                match canon {
                    "write_lat_log" => g.lat = Some(prefix),
                    "write_bw_log" => g.bw = Some(prefix),
                    "write_hist_log" => g.hist = Some(prefix),
                    _ => g.iops = Some(prefix),
                }
            }
            "log_avg_msec" => g.avg_msec = val.count32(0)?,
            "bwavgtime" => g.bw_avg_msec = Some(val.count32(1)?),
            "iopsavgtime" => g.iops_avg_msec = Some(val.count32(1)?),
            "log_max_value" => g.max_value = val.flag()?,
            "log_offset" => g.offset = val.flag()?,
            "per_job_logs" => g.per_job = val.flag()?,
            "log_prio" => g.prio = val.flag()?,
            "log_compression" => g.compression = val.size(0)?,
            "log_store_compressed" => g.store_compressed = val.flag()?,
            "log_hist_msec" => g.hist_msec = val.count32(0)?,
            "log_hist_coarseness" => {
                const EXPECT: &str = "a whole number from 0 to 6";
                g.hist_coarseness =
                    val.value(EXPECT)?.parse().ok().filter(|c| *c <= 6).ok_or_else(|| val.bad(EXPECT))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Workload shapes ([`crate::shapes`]): block size mixes, offset distributions,
    /// `rw_sequencer`, `offset_increment`, `fdatasync`.
    fn apply_shapes(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        use crate::shapes::{self, BlockSizes, RwSequencer};
        let sh = &mut self.shapes;
        match canon {
            "bssplit" => {
                const EXPECT: &str = "block size/percent lists such as 4k/50:8k/50, one per direction (read,write)";
                val.each_direction(EXPECT, |d, side| {
                    let v = shapes::parse_bssplit(side, parse_bytes).map_err(|e| val.bad_because(EXPECT, e))?;
                    sh.bs[d] = BlockSizes::Split(v);
                    Ok(())
                })?
            }
            "bsrange" => {
                const EXPECT: &str = "MIN-MAX block sizes such as 1k-16k, one per direction (read,write)";
                val.each_direction(EXPECT, |d, side| {
                    let (min, max) =
                        shapes::parse_bsrange(side, parse_bytes).map_err(|e| val.bad_because(EXPECT, e))?;
                    sh.bs[d] = BlockSizes::Range { min, max };
                    Ok(())
                })?
            }
            "blocksize_unaligned" => sh.bs_unaligned = val.flag()?,
            "blockalign" => {
                const EXPECT: &str = "an alignment such as 4k, one per direction (read,write)";
                val.each_direction(EXPECT, |d, side| {
                    sh.blockalign[d] = Some(parse_bytes(side).filter(|&n| n > 0).ok_or_else(|| val.bad(EXPECT))?);
                    Ok(())
                })?
            }
            "random_distribution" => {
                const EXPECT: &str = "random, zipf[:θ[:center]], pareto[:h[:center]], normal[:σ[:center]], zoned:A/S:… or zoned_abs:A/SIZE:… (one per direction, comma-separated, for zoned)";
                let v = val.value(EXPECT)?;
                // Only the zoned forms take a list per direction (fio's str_split_parse).
                let sides = if v.starts_with("zoned") {
                    shapes::per_direction(v).map_err(|e| val.bad_because(EXPECT, e))?
                } else {
                    [Some(v), Some(v)]
                };
                let prefix = v.split(':').next().unwrap_or_default();
                for (d, side) in sides.iter().enumerate() {
                    if let Some(side) = side {
                        // fio's zoned lists after the first side carry no "zoned:" prefix.
                        let full = if side.starts_with(prefix) { side.to_string() } else { format!("{prefix}:{side}") };
                        sh.dist[d] = crate::dist::parse(&full, parse_bytes).map_err(|e| val.bad_because(EXPECT, e))?;
                    }
                }
            }
            "rw_sequencer" => {
                sh.rw_sequencer = val.choice(
                    "sequential or identical",
                    &[("sequential", RwSequencer::Sequential), ("identical", RwSequencer::Identical)],
                )?
            }
            "offset_increment" => {
                sh.offset_increment = parse_bytes(val.value(EXPECT_SIZE)?).ok_or_else(|| {
                    val.bad(&format!("{EXPECT_SIZE} (a percentage, fio's share of the file, is not run)"))
                })?
            }
            "fdatasync" => sh.fdatasync = val.count32(0)?,
            "zonemode" => {
                (sh.zbd, sh.strided) = val.choice(
                    "none, strided or zbd",
                    &[("none", (false, false)), ("zbd", (true, false)), ("strided", (false, true))],
                )?
            }
            "max_open_zones" => sh.max_open_zones = val.count32(0)?,
            "job_max_open_zones" => sh.job_max_open_zones = val.count32(0)?,
            "zone_reset_threshold" => sh.zone_reset_threshold = val.fraction()?,
            "zone_reset_frequency" => sh.zone_reset_frequency = val.fraction()?,
            "read_beyond_wp" => sh.read_beyond_wp = val.flag()?,
            "zonesize" => sh.zone_size = Some(val.size(1)?),
            // Several files per job: crate::files; openfiles below nrfiles is checked in
            // fix_up, where the file count is known.
            "nrfiles" => self.behaviour.nrfiles = val.count32(1)?,
            "filename_format" => self.behaviour.filename_format = Some(val.text()?),
            "openfiles" => self.behaviour.openfiles = val.count32(0)?,
            "file_service_type" => {
                self.behaviour.file_service = crate::files::Service::parse(val.value(crate::files::EXPECT_SERVICE)?)
                    .map_err(|e| val.bad(&format!("{} ({e})", crate::files::EXPECT_SERVICE)))?;
            }
            // fio's buffer_pattern takes verify_pattern's syntax without formats (%o).
            "verify_pattern" | "buffer_pattern" => {
                const EXPECT: &str = "a pattern of hex numbers (0x…), decimal numbers and \"quoted strings\"";
                let p = Some(val.parsed(EXPECT, crate::verify::parse_pattern)?);
                if canon == "verify_pattern" {
                    sh.verify_pattern = p;
                } else {
                    sh.buffer_pattern = p;
                }
            }
            "verify_interval" => {
                // fio's minval: twice its verify header (80 bytes; ours is 40).
                const EXPECT: &str = "a size of at least 80 bytes (fio's minimum)";
                sh.verify_interval =
                    parse_bytes(val.value(EXPECT)?).filter(|&v| v >= 80).ok_or_else(|| val.bad(EXPECT))?;
            }
            "buffer_compress_percentage" => sh.buffers.compress_percentage = val.percent()?,
            "buffer_compress_chunk" => sh.buffers.compress_chunk = val.size(0)?,
            "dedupe_percentage" => sh.buffers.dedupe_percentage = val.percent()?,
            "dedupe_mode" => {
                sh.buffers.dedupe_mode = val.choice(
                    "repeat or working_set",
                    &[
                        ("repeat", crate::dedupe::DedupeMode::Repeat),
                        ("working_set", crate::dedupe::DedupeMode::WorkingSet),
                    ],
                )?
            }
            "dedupe_working_set_percentage" => sh.buffers.working_set_percentage = val.percent()?,
            "dedupe_global" => sh.buffers.global = val.flag()?,
            "verify_backlog" => sh.verify_backlog = val.count(0)?,
            "verify_async" => {
                sh.verify_async = u32::try_from(val.count(0)?).map_err(|_| val.bad("a number of checker threads"))?
            }
            "zonerange" => sh.zone_range = Some(val.size(1)?),
            "zoneskip" => {
                sh.zone_skip = parse_bytes(val.value(EXPECT_SIZE)?)
                    .ok_or_else(|| val.bad(&format!("{EXPECT_SIZE} (a count of zones, Nz, is not run)")))?
            }
            "verify_backlog_batch" => sh.verify_backlog_batch = val.count(0)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `zonemode=strided` ([`crate::strided`]) and its options: what fits.
    fn check_strided(&self) -> Result<(), JobError> {
        let sh = &self.shapes;
        for o in ["zonerange", "zoneskip"] {
            if self.origin(o).is_some() && !sh.strided {
                return Err(self.error_at(o, format!("{o} without zonemode=strided is not run")));
            }
        }
        if !sh.strided {
            return Ok(());
        }
        let why = if sh.zone_size.is_none() {
            "zonemode=strided needs zonesize (as in fio)"
        } else if !matches!(self.rw, Rw::Read | Rw::Write | Rw::RandRead | Rw::RandWrite | Rw::ReadWrite | Rw::RandRw) {
            "zonemode=strided with trims is not run"
        } else if sh.shaped(0) || sh.shaped(1) {
            "zonemode=strided with bssplit, bsrange, random_distribution, rw=…:N or blockalign is not run"
        } else if self.verify != Verify::None && self.do_verify {
            "zonemode=strided with verify is not run (its offsets leave the job's region)"
        } else if self.behaviour.nrfiles > 1 || self.filename.len() > 1 {
            "zonemode=strided with several files is not run (fio drops the zones then)"
        } else {
            return Ok(());
        };
        Err(self.error_at("zonemode", why))
    }

    /// fio's steady state: `ss`, `ss_dur`, `ss_ramp` ([`crate::steady`]).
    fn apply_steady(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        match canon {
            "steadystate" => {
                self.steady.crit = crate::steady::Criterion::parse(val.value(crate::steady::EXPECT_SS)?)
                    .map_err(|e| val.bad(&format!("{} ({e})", crate::steady::EXPECT_SS)))?
            }
            // fio keeps whole seconds of the window.
            "steadystate_duration" => {
                self.steady.dur = val.time()?.map_or(0, |d| d.as_secs().min(u32::MAX as u64) as u32)
            }
            "steadystate_ramp_time" => self.steady.ramp = val.time()?.unwrap_or_default(),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Shapes that do not fit the rest of the job.
    fn check_shapes(&mut self) -> Result<(), JobError> {
        use crate::shapes::BlockSizes;
        // fio: a verify_pattern without a verify method verifies the pattern.
        if self.shapes.verify_pattern.is_some() && self.origin("verify").is_none() {
            self.verify = Verify::Pattern;
        }
        if self.shapes.zbd && !matches!(self.rw, Rw::Read | Rw::Write | Rw::RandRead | Rw::RandWrite) {
            return Err(self.error_at(
                "zonemode",
                format!("zonemode=zbd with rw={} is not run (read, write, randread, randwrite are)", self.rw),
            ));
        }
        if self.shapes.zone_size.is_some() && !self.shapes.zbd && !self.shapes.strided {
            return Err(self.error_at(
                "zonesize",
                "zonesize without zonemode=zbd or zonemode=strided is not run (fio: zonemode=none and zonesize are not compatible)",
            ));
        }
        self.check_strided()?;
        if self.shapes.zbd && self.rw.writes() && self.numjobs > 1 && self.verify != Verify::None && self.do_verify {
            return Err(self.error_at(
                "numjobs",
                "zonemode=zbd writes with verify and numjobs>1 are not run (the clones share the zones; a zone one clone resets loses the blocks another wrote and would verify)",
            ));
        }
        if self.shapes.zbd && self.shapes.shaped(0) | self.shapes.shaped(1) {
            return Err(self.error_at(
                "zonemode",
                "zonemode=zbd with bssplit, bsrange, random_distribution, rw=…:N or blockalign is not run",
            ));
        }
        if self.rw.is_random() && self.shapes.rw_modifier.is_some_and(|m| m < 0) {
            return Err(self
                .error_at("rw", format!("rw={}: a random pattern takes a positive count of I/Os after ':'", self.rw)));
        }
        if self.verify != Verify::None && matches!(self.rw, Rw::Trim | Rw::RandTrim) {
            return Err(self
                .error_at("verify", format!("verify with rw={} is not run: a trim writes no data to check", self.rw)));
        }
        if self.verify == Verify::Pattern && self.shapes.verify_pattern.is_none() {
            return Err(self.error_at("verify", "verify=pattern needs a verify_pattern"));
        }
        let bufs = &self.shapes.buffers;
        if bufs.dedupe_percentage > 0 && bufs.dedupe_mode == crate::dedupe::DedupeMode::WorkingSet {
            // fio's checks (init.c), in its words.
            if self.origin("size").is_none() {
                return Err(self.error_at("dedupe_mode", "pregenerated dedupe working set requires size to be set"));
            }
            if self.behaviour.nrfiles != 1 || self.filename.len() > 1 {
                return Err(self.error_at("dedupe_mode", "dedupe working set mode supported with single file per job"));
            }
            if bufs.working_set_percentage + bufs.dedupe_percentage > 100 {
                return Err(self.error_at(
                    "dedupe_working_set_percentage",
                    format!(
                        "impossible to reach expected dedupe percentage {} since {} percentage of size is reserved to dedupe working set (those are unique pages)",
                        bufs.dedupe_percentage, bufs.working_set_percentage
                    ),
                ));
            }
        }
        if self.verify != Verify::None && self.shapes.bs[1] != BlockSizes::Bs {
            let opt = if self.origin("bssplit").is_some() { "bssplit" } else { "bsrange" };
            return Err(self.error_at(
                opt,
                format!(
                    "{opt} for writes with verify={} is not run: verified blocks have one size (bs)",
                    crate::verify::name(self.verify)
                ),
            ));
        }
        if self.verify != Verify::None && self.rw.writes() {
            // Verified blocks lie on multiples of bs from the region's start; writes between
            // them were read back as blocks never written (a false "bad block"), where fio
            // verifies each write where it went.
            let (bs, v) = (self.bs.write, crate::verify::name(self.verify));
            if let Some(hole) = self.shapes.rw_modifier.filter(|h| !self.rw.is_random() && h.unsigned_abs() % bs != 0) {
                return Err(self.error_at(
                    "rw",
                    format!("a hole of {hole} bytes (rw=…:{hole}) with verify={v} is not run: verified blocks lie on multiples of bs ({bs}), and a hole that is a multiple of bs is run"),
                ));
            }
            if let Some(a) = self.shapes.blockalign[1].filter(|a| a % bs != 0) {
                return Err(self.error_at(
                    "blockalign",
                    format!("blockalign={a} for writes with verify={v} is not run: verified blocks lie on multiples of bs ({bs}), and an alignment that is a multiple of bs is run"),
                ));
            }
        }
        Ok(())
    }

    /// `bs=R`, `bs=R,W` or `bs=R,W,T`; an empty side keeps the current value.
    fn parse_bs(&self, v: &str) -> Option<RwPair<u64>> {
        let v = v.strip_suffix(',').filter(|s| !s.contains(',')).unwrap_or(v);
        let parts: Vec<&str> = v.split(',').map(str::trim).collect();
        let side = |s: &str, current: u64| -> Option<u64> {
            if s.is_empty() {
                Some(current)
            } else {
                parse_bytes(s).filter(|&n| n > 0)
            }
        };
        match parts.as_slice() {
            [one] => parse_bytes(one).filter(|&n| n > 0).map(|n| RwPair { read: n, write: n }),
            [r, w] | [r, w, _] if parts.iter().any(|p| !p.is_empty()) => {
                if let Some(t) = parts.get(2) {
                    side(t, 1)?;
                }
                Some(RwPair { read: side(r, self.bs.read)?, write: side(w, self.bs.write)? })
            }
            _ => None,
        }
    }

    /// fio's cross-option checks and fix-ups, after every option is applied.
    /// How many files each instance of the job has: the `filename` list's names, or
    /// `nrfiles` (fio's `jobname.jobnum.filenum`).
    pub fn file_count(&self) -> u32 {
        match self.filename.len() {
            0 => self.behaviour.nrfiles.max(1),
            n => n as u32,
        }
    }

    /// The checks of a job with several files (see [`crate::files`]).
    fn check_files(&self) -> Result<(), JobError> {
        let b = &self.behaviour;
        let n = self.file_count();
        if !self.filename.is_empty() && self.origin("nrfiles").is_some() && b.nrfiles != n {
            return Err(self.error_at(
                "nrfiles",
                format!(
                    "nrfiles={} but filename names {n} files (give one or the other, or the same count)",
                    b.nrfiles
                ),
            ));
        }
        let b = &self.behaviour;
        if matches!(b.file_service, crate::files::Service::Dist(_)) && b.openfiles > 0 && b.openfiles < n {
            return Err(self.error_at(
                "openfiles",
                format!(
                    "openfiles={} below the {n} files with a zipf, pareto or normal file_service_type is not run: a file closes only when it is done, and under these choices files are never done (fio starts a file over), so the choice would keep drawing files that may not open",
                    b.openfiles
                ),
            ));
        }
        if self.shapes.zbd {
            if let Some(dup) = self.filename.iter().enumerate().find(|(i, f)| self.filename[..*i].contains(f)) {
                return Err(self.error_at(
                    "filename",
                    format!(
                        "zonemode=zbd with '{}' named twice in one job is not run: fio shares one zone state between them; here they would be two writers of the same zones in the job's one thread, and one waiting for a zone the other holds would wait for itself",
                        dup.1
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `bwavgtime` / `iopsavgtime` below `log_avg_msec` with that log: fio averages the
    /// log's entries over the shorter window then (`setup_log`'s `avg_msec`), and this
    /// log keeps one window for its bw and iops entries, `log_avg_msec`'s: refused.
    fn check_avg_times(&self) -> Result<(), JobError> {
        let g = &self.logs;
        for (opt, set, log) in [("bwavgtime", g.bw_avg_msec, &g.bw), ("iopsavgtime", g.iops_avg_msec, &g.iops)] {
            if let Some(ms) = set.filter(|&ms| log.is_some() && g.avg_msec > ms) {
                return Err(self.error_at(
                    opt,
                    format!(
                        "{opt}={ms} below log_avg_msec={}: fio would average that log over {ms} ms; not run \
                         (give log_avg_msec={ms}, or a {opt} of at least log_avg_msec)",
                        g.avg_msec
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checks of `io_submit_mode=offload`: what fio refuses, and what is not run here.
    fn check_offload(&self) -> Result<(), JobError> {
        if !self.behaviour.offload {
            return Ok(());
        }
        if matches!(self.ioengine, IoEngine::IoUring | IoEngine::IoUringCmd) {
            // fio's FIO_NO_OFFLOAD (ioengines.c): "can't be used with offloaded submit".
            return Err(self.error_at(
                "io_submit_mode",
                format!("io_submit_mode=offload: ioengine={} can't be used with offloaded submit (as in fio); use a sync engine", self.ioengine),
            ));
        }
        let not_run = |opt: &str, why: &str| {
            Err(self.error_at(opt, format!("io_submit_mode=offload with {opt} is not run: {why}")))
        };
        if self.load.latency_target.is_some() {
            // fio 3.33 accepts it and runs no search: its queue_full (io_u.c) compares the
            // searched depth with the job thread's cur_depth, which stays 0 under offload
            // (each worker raises its own), and the latencies over the target are counted
            // in the workers' copies (lat_target_failed on the worker's td), never seen
            // by the job thread's lat_target_check.
            return not_run(
                "latency_target",
                "fio 3.33 runs no search there (its workers count the latencies over the target in their own copies and the searched depth limits nothing), so there are no fio semantics to follow",
            );
        }
        Ok(())
    }

    /// NUMA placement and I/O priority of the job's thread ([`crate::placement`]), and `sync`.
    fn apply_placement(&mut self, canon: &str, val: &OptValue) -> Result<bool, JobError> {
        let p = &mut self.behaviour.placement;
        match canon {
            "numa_cpu_nodes" => {
                let v = val.value("a node list such as 0 or 0-1")?;
                p.cpu_nodes =
                    Some(crate::placement::parse_nodes(v, &crate::placement::online_nodes()).map_err(|e| val.bad(&e))?);
            }
            "numa_mem_policy" => {
                let v = val.value("default, prefer:NODE, bind:NODES, interleave[:NODES] or local")?;
                p.mem_policy = Some(
                    crate::placement::parse_mem_policy(v, &crate::placement::online_nodes())
                        .map_err(|e| val.bad(&e))?,
                );
            }
            "prioclass" => {
                const EXPECT: &str =
                    "an I/O priority class from 0 to 3 (0 none: best-effort, 1 real-time, 2 best-effort, 3 idle)";
                p.prioclass = Some(val.value(EXPECT)?.parse().ok().filter(|c| *c <= 3).ok_or_else(|| val.bad(EXPECT))?);
            }
            "prio" => {
                const EXPECT: &str = "an I/O priority level from 0 (highest) to 7 (lowest)";
                p.prio = Some(val.value(EXPECT)?.parse().ok().filter(|c| *c <= 7).ok_or_else(|| val.bad(EXPECT))?);
            }
            "cmdprio_percentage" => {
                let c = &mut self.behaviour.cmdprio.opts;
                c.percentage =
                    crate::cmdprio::parse_pair(val.value("a percentage")?, 0, 100).map_err(|e| val.bad(&e))?;
            }
            "cmdprio_class" => {
                let c = &mut self.behaviour.cmdprio.opts;
                let v = crate::cmdprio::parse_pair(val.value("a class")?, 1, 3).map_err(|e| val.bad(&e))?;
                c.class = v.map(|x| x as u16);
            }
            "cmdprio" => {
                let c = &mut self.behaviour.cmdprio.opts;
                let v = crate::cmdprio::parse_pair(val.value("a level")?, 0, 7).map_err(|e| val.bad(&e))?;
                c.level = v.map(|x| x as u16);
            }
            "cmdprio_bssplit" => {
                const EXPECT: &str = "entries bs/percentage[/class/level] separated by ':', per direction READ,WRITE";
                let v = val.value(EXPECT)?;
                let split =
                    crate::cmdprio::parse_bssplit(v, parse_bytes).map_err(|e| val.bad(&format!("{EXPECT} ({e})")))?;
                self.behaviour.cmdprio.opts.bssplit = Some(split);
            }
            "sync" => {
                let on = val.choice(
                    "none, 0, sync, 1 or dsync",
                    &[("none", false), ("0", false), ("sync", true), ("1", true), ("dsync", true)],
                )?;
                self.behaviour.sync = on.then(|| val.text()).transpose()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// fio's `fio_cmdprio_init`: the two ways to choose exclude each other; the choice is
    /// made once here, for the directions the job does.
    fn check_cmdprio(&mut self) -> Result<(), JobError> {
        let c = &self.behaviour.cmdprio.opts;
        if c.bssplit.is_some() && c.percentage.iter().any(|&p| p > 0) {
            return Err(self.error_at(
                "cmdprio_bssplit",
                "cmdprio_percentage and cmdprio_bssplit options are mutually exclusive (as in fio)",
            ));
        }
        if !c.is_set() {
            return Ok(());
        }
        let opt = if c.bssplit.is_some() { "cmdprio_bssplit" } else { "cmdprio_percentage" };
        if self.behaviour.offload {
            return Err(self.error_at(
                opt,
                format!("{opt} with io_submit_mode=offload is not run: the offload workers do not choose priorities"),
            ));
        }
        if self.verify != Verify::None && self.do_verify {
            return Err(self.error_at(
                opt,
                format!("{opt} with verify is not run: the verify phase's reads do not choose priorities here"),
            ));
        }
        let chooser = crate::cmdprio::Chooser::new(c, self.logs.ioprio, [self.rw.reads(), self.rw.writes()]);
        self.behaviour.cmdprio.chooser = chooser;
        self.behaviour.cmdprio.on_lat = self.lat_percentiles;
        Ok(())
    }

    fn fix_up(&mut self) -> Result<(), JobError> {
        self.logs.ioprio = self.behaviour.placement.ioprio().unwrap_or(0);
        if let Some(written) = self.behaviour.sync.as_deref() {
            if let SyncWrites::Refused(why) = sync_writes(self.ioengine) {
                let flag = open_sync(written).flag_name();
                return Err(self.error_at(
                    "sync",
                    format!("sync={written} ({flag} writes) is not run with ioengine={}: {why}", self.ioengine),
                ));
            }
        }
        for option in self.origins.keys() {
            let Some(engines) = engines_for(option) else { continue };
            if !engines.contains(&self.ioengine) {
                let names: Vec<&str> = engines.iter().map(|e| e.as_str()).collect();
                return Err(self.error_at(
                    option,
                    format!(
                        "option '{option}' belongs to ioengine {}, but the job uses ioengine={}",
                        names.join(" or "),
                        self.ioengine
                    ),
                ));
            }
        }
        self.check_files()?;
        self.check_offload()?;
        self.check_avg_times()?;
        self.check_cmdprio()?;
        if let Some(opt) = self.load.trim_rate.filter(|_| self.rw.trims()) {
            return Err(self.error_at(
                opt,
                format!("{opt} with a third value, for trims, is not run: trims are paced at the writes' rate here"),
            ));
        }
        let l = &self.load;
        let any = |v: &[u64; 2]| v.iter().any(|&r| r > 0);
        if any(&l.rate) && any(&l.rate_iops) {
            return Err(self.error_at("rate_iops", "rate and rate_iops are mutually exclusive (as in fio)"));
        }
        if any(&l.rate_min) && any(&l.rate_iops_min) {
            return Err(self.error_at("rate_iops_min", "rate_min and rate_iops_min are mutually exclusive (as in fio)"));
        }
        for d in 0..2 {
            if (l.rate[d] > 0 && l.rate[d] < l.rate_min[d])
                || (l.rate_iops[d] > 0 && l.rate_iops[d] < l.rate_iops_min[d])
            {
                let opt = if l.rate_min[d] > 0 { "rate_min" } else { "rate_iops_min" };
                return Err(
                    self.error_at(opt, format!("the minimum rate exceeds the rate ({})", ["reads", "writes"][d]))
                );
            }
        }
        if self.logs.hist.is_some() && !self.clat_percentiles {
            return Err(self.error_at(
                "clat_percentiles",
                "write_hist_log logs the clat histogram, which clat_percentiles=0 turns off (fio would write zeros)",
            ));
        }
        if self.logs.hist.is_some() && self.logs.store_compressed {
            return Err(self.error_at(
                "log_store_compressed",
                "write_hist_log with log_store_compressed is not run: fio 3.33 deflates the clat_hist log's in-memory entries, which hold pointers to its histograms, so `fio --inflate-log` prints memory addresses, not the histogram (write the clat_hist log uncompressed, or drop write_hist_log)",
            ));
        }
        if self.load.thinktime_spin > self.load.thinktime {
            return Err(self.error_at("thinktime_spin", "thinktime_spin is longer than thinktime"));
        }
        // fio's fixup_options: time_based without a runtime is warned about and dropped
        // (the job runs until its size is done), not refused.
        if self.time_based && self.runtime.is_none() {
            self.time_based = false;
            self.behaviour.time_based_ignored = true;
        }
        if self.iodepth_batch_submit == 0 || self.iodepth_batch_submit > self.iodepth {
            self.iodepth_batch_submit = self.iodepth;
        }
        self.iodepth_batch_complete_min = self.iodepth_batch_complete_min.min(self.iodepth);
        // fio's fixup_options (init.c): a max below the min (the default, 0, included) is
        // the min; a low water mark of 0 or above iodepth is iodepth.
        // An option never set has fio's default 0 here.
        let set = |o: &str| self.origins.contains_key(o);
        if !set("iodepth_batch_complete_max") || self.iodepth_batch_complete_max < self.iodepth_batch_complete_min {
            self.iodepth_batch_complete_max = self.iodepth_batch_complete_min;
        }
        self.iodepth_batch_complete_max = self.iodepth_batch_complete_max.min(self.iodepth);
        if !set("iodepth_low") || self.iodepth_low == 0 || self.iodepth_low > self.iodepth {
            self.iodepth_low = self.iodepth;
        }
        // fio scrambles buffers by default, but not when asked for zeroed buffers, unless
        // scramble_buffers was asked for too.
        if self.behaviour.zero_buffers && !set("scramble_buffers") {
            self.behaviour.scramble_buffers = false;
        }
        self.check_shapes()?;
        Ok(())
    }
}

/// The section lines are going to now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cur {
    /// Before any section (options are errors in files, globals on the command line).
    None,
    /// A section left out by `--section`.
    Skip,
    /// A global section.
    Global,
    /// Job number n.
    Job(usize),
}

/// The most jobs one run takes, every job's `numjobs` clones counted: fio's `REAL_MAX_JOBS`.
pub const MAX_JOBS: u64 = 4096;

/// Reads job files and command lines, in order, into jobs; [`JobReader::finish`] turns
/// them into [`JobSpec`]s.
#[derive(Debug)]
pub struct JobReader {
    globals: Vec<RawOption>,
    jobs: Vec<RawJob>,
    sections: Vec<String>,
    /// Jobs left out because `--section` did not name them, for the error when none is left.
    skipped: Vec<String>,
    files_read: usize,
    /// Names of the job files read, in order, for an error that must name them.
    names_read: Vec<String>,
    /// A command line was read.
    args_read: bool,
    output_format: OutputFormat,
    output: Option<PathBuf>,
    /// `--readonly`.
    read_only: bool,
    /// While a job file is read: its first unknown option, reported at the file's end
    /// unless the file names an ioengine this benchmark does not run (whose refusal wins:
    /// such options, e.g. nfs's `nfs_url`, belong to that engine).
    deferred: Option<JobError>,
}

impl Default for JobReader {
    fn default() -> Self {
        Self::new()
    }
}

/// Cuts a line at its first `;` or `#` and trims it (fio's comment rule).
pub fn strip_comment(line: &str) -> &str {
    line.split(['#', ';']).next().unwrap_or_default().trim()
}

impl JobReader {
    /// Nothing read yet.
    pub fn new() -> JobReader {
        JobReader {
            globals: Vec::new(),
            jobs: Vec::new(),
            sections: Vec::new(),
            skipped: Vec::new(),
            files_read: 0,
            names_read: Vec::new(),
            args_read: false,
            output_format: OutputFormat::default(),
            output: None,
            read_only: false,
            deferred: None,
        }
    }

    /// Keeps only jobs named `name` (may be called several times) among those read from
    /// now on; global sections are always read.
    pub fn select_section(&mut self, name: &str) {
        self.sections.push(name.to_string());
    }

    /// The jobs read so far, uninterpreted.
    pub fn raw_jobs(&self) -> &[RawJob] {
        &self.jobs
    }

    /// The global options read so far.
    pub fn global_options(&self) -> &[RawOption] {
        &self.globals
    }

    /// Reads a job file.
    pub fn read_file(&mut self, path: impl AsRef<Path>) -> Result<(), JobError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|source| JobError::Read { path: path.to_path_buf(), source })?;
        self.read_str(&path.to_string_lossy(), &text)
    }

    /// Reads a job file's text; `name` names it in errors and places relative includes.
    pub fn read_str(&mut self, name: &str, text: &str) -> Result<(), JobError> {
        let mut file_stonewall = self.files_read > 0;
        self.files_read += 1;
        self.names_read.push(name.to_string());
        let mut cur = Cur::None;
        self.deferred = None;
        let read = self.read_lines(&Arc::from(name), text, &mut cur, 0, &mut file_stonewall);
        let deferred = self.deferred.take();
        match (read, deferred) {
            (Err(e), _) if is_engine_refusal(&e) => Err(e),
            (_, Some(unknown)) => Err(unknown),
            (read, None) => read,
        }
    }

    fn read_lines(
        &mut self,
        file: &Arc<str>,
        text: &str,
        cur: &mut Cur,
        depth: usize,
        file_stonewall: &mut bool,
    ) -> Result<(), JobError> {
        for (n, raw_line) in text.lines().enumerate() {
            let loc = Loc::File { file: file.clone(), line: u32::try_from(n + 1).unwrap_or(u32::MAX) };
            let line = strip_comment(raw_line);
            if line.is_empty() {
                continue;
            }
            if let Some(header) = line.strip_prefix('[') {
                if depth > 0 {
                    return Err(JobError::Syntax { loc, msg: "an included file may not start a section".into() });
                }
                let name = header.strip_suffix(']').filter(|n| !n.trim().is_empty()).ok_or_else(|| {
                    JobError::Syntax { loc: loc.clone(), msg: format!("bad section header '{line}': expected [name]") }
                })?;
                let stonewall = std::mem::take(file_stonewall);
                *cur = self.start_section(name, loc, stonewall);
                *file_stonewall = stonewall && !matches!(cur, Cur::Job(_));
                continue;
            }
            if *cur == Cur::Skip {
                continue;
            }
            if let Some(rest) = line.strip_prefix("include").filter(|r| r.starts_with(char::is_whitespace)) {
                if *cur == Cur::None {
                    return Err(JobError::Syntax { loc, msg: "include outside of a [section]".into() });
                }
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(JobError::Syntax {
                        loc,
                        msg: format!("includes nested more than {MAX_INCLUDE_DEPTH} deep (an include cycle?)"),
                    });
                }
                let path = include_path(rest.trim(), file);
                let text = std::fs::read_to_string(&path).map_err(|source| JobError::Include {
                    loc: loc.clone(),
                    path: path.clone(),
                    source,
                })?;
                self.read_lines(&Arc::from(path.to_string_lossy().as_ref()), &text, cur, depth + 1, file_stonewall)?;
                continue;
            }
            let line = substitute_env(line, &loc, &process_env)?;
            let line = line.as_str();
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
                None => (line, None),
            };
            if key.is_empty() {
                return Err(JobError::Syntax { loc, msg: format!("'{line}' has no option name") });
            }
            if *cur == Cur::None {
                return Err(JobError::Syntax { loc, msg: format!("option '{key}' outside of a [section]") });
            }
            let opt = RawOption { key: key.to_string(), value, loc };
            match self.add_option(*cur, opt) {
                Ok(()) => {}
                Err(e) if is_engine_refusal(&e) => return Err(e),
                // The file is refused for its first unknown option at its end (read_str).
                Err(_) if self.deferred.is_some() => {}
                Err(e @ JobError::UnknownOption { .. }) => self.deferred = Some(e),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Starts a section or `--name` job and says where its options go.
    fn start_section(&mut self, name: &str, loc: Loc, file_stonewall: bool) -> Cur {
        if name.starts_with("global") {
            Cur::Global
        } else if !self.sections.is_empty() && !self.sections.iter().any(|s| s == name) {
            if !self.skipped.iter().any(|s| s == name) {
                self.skipped.push(name.to_string());
            }
            Cur::Skip
        } else {
            self.jobs.push(RawJob {
                name: name.to_string(),
                loc,
                globals: self.globals.clone(),
                options: Vec::new(),
                file_stonewall,
            });
            Cur::Job(self.jobs.len() - 1)
        }
    }

    /// Checks an option on its own (name and value) and files it.
    fn add_option(&mut self, cur: Cur, opt: RawOption) -> Result<(), JobError> {
        JobSpec::new("").apply(&opt)?;
        match cur {
            Cur::Job(i) => self.jobs[i].options.push(opt),
            Cur::None | Cur::Global => self.globals.push(opt),
            Cur::Skip => {}
        }
        Ok(())
    }

    /// Reads a command line in fio's spelling (see the module docs) and returns the job
    /// files it names, for [`JobReader::read_file`]. Errors place an argument by its
    /// position in `args`, from 1.
    pub fn read_args<I, S>(&mut self, args: I) -> Result<Vec<PathBuf>, JobError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_string()).collect();
        self.args_read = true;
        let mut files = Vec::new();
        let mut cur = Cur::None;
        let mut i = 0;
        while i < args.len() {
            let loc = Loc::Arg { index: i + 1 };
            let arg = &args[i];
            i += 1;
            let arg = &substitute_env(arg, &loc, &process_env)?;
            let Some(body) = arg.strip_prefix("--").filter(|b| !b.is_empty()) else {
                files.push(PathBuf::from(arg));
                continue;
            };
            let (key, mut value) = match body.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (body, None),
            };
            if key == "readonly" {
                // fio's safety flag: a flag alone, no value (fio's getopt takes none).
                if let Some(v) = value {
                    return Err(JobError::BadValue {
                        name: key.to_string(),
                        value: v,
                        loc,
                        expected: "nothing: --readonly is a flag".into(),
                    });
                }
                self.read_only = true;
                continue;
            }
            let kind = match key {
                "section" | "output" | "output-format" => Kind::Value,
                _ => lookup(key).ok_or_else(|| unknown_option(key, &loc))?.1,
            };
            if value.is_none() {
                let next = args.get(i).filter(|n| !n.starts_with("--"));
                if let Some(next) = next.filter(|n| kind == Kind::Value || *n == "0" || *n == "1") {
                    // The value is an argument of its own: `${VAR}` in it is substituted
                    // as in any other argument, and an error names that argument.
                    value = Some(substitute_env(next, &Loc::Arg { index: i + 1 }, &process_env)?);
                    i += 1;
                }
            }
            let need_value = |what: &str| JobError::MissingValue {
                name: key.to_string(),
                loc: loc.clone(),
                expected: what.to_string(),
            };
            match key {
                "section" => self.select_section(&value.ok_or_else(|| need_value("a job name"))?),
                "output" => self.output = Some(PathBuf::from(value.ok_or_else(|| need_value("a file name"))?)),
                "output-format" => {
                    let v = value.ok_or_else(|| need_value("normal, json or json+"))?;
                    self.output_format = v.parse().map_err(|why: OutputFormatError| JobError::BadValue {
                        name: key.to_string(),
                        value: v.clone(),
                        loc: loc.clone(),
                        expected: format!("normal, json or json+, comma-separated ({why})"),
                    })?;
                }
                "name" => {
                    let name = value.clone().ok_or_else(|| need_value("a job name"))?;
                    cur = self.start_section(&name, loc.clone(), false);
                    if matches!(cur, Cur::Job(_)) {
                        self.add_option(cur, RawOption { key: key.to_string(), value, loc })?;
                    }
                }
                _ => self.add_option(cur, RawOption { key: key.to_string(), value, loc })?,
            }
        }
        Ok(files)
    }

    /// "a.fio", "a.fio, b.fio and the command line", "the command line", … for errors.
    fn what_was_read(&self) -> String {
        let mut parts: Vec<&str> = self.names_read.iter().map(String::as_str).collect();
        if self.args_read || parts.is_empty() {
            parts.push("the command line");
        }
        match parts.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => unreachable!("parts is never empty"),
        }
    }

    /// Interprets every job read: fio's defaults, then the job's globals, then its own
    /// options; checks each job as a whole.
    pub fn finish(self) -> Result<JobSet, JobError> {
        if self.jobs.is_empty() {
            return Err(JobError::NoJobs {
                read: self.what_was_read(),
                selected: self.sections.clone(),
                skipped: self.skipped.clone(),
            });
        }
        let mut jobs = self.jobs.iter().map(JobSpec::from_raw).collect::<Result<Vec<_>, _>>()?;
        if self.read_only {
            // fio's fixup_options: no write or trim under --readonly; refused before any
            // job runs, naming the job.
            for j in &mut jobs {
                if j.rw.writes() || j.rw.trims() {
                    return Err(j.error_at(
                        "rw",
                        format!("rw={}: trim and write operations are not allowed with --readonly (as fio)", j.rw),
                    ));
                }
                j.behaviour.read_only = true;
            }
        }
        // fio's limit on the jobs of one run, clones included: beyond it fio refuses the
        // job ("maximum number of jobs reached"), and a thread per job would exhaust the
        // machine before anything ran.
        let mut total = 0u64;
        for j in &jobs {
            total += u64::from(j.numjobs.max(1));
            if total > MAX_JOBS {
                return Err(j.error_at(
                    "numjobs",
                    format!(
                        "numjobs={}: {total} jobs in all, clones included, and a run takes at most {MAX_JOBS} (as fio)",
                        j.numjobs
                    ),
                ));
            }
        }
        // fio's wait_for: the waitee is an earlier job (no forward references).
        for (i, j) in jobs.iter().enumerate() {
            if let Some(w) = &j.behaviour.wait_for {
                if !jobs[..i].iter().any(|e| &e.name == w) {
                    return Err(j.error_at("wait_for", format!("wait_for={w}: no job named {w} before this one")));
                }
            }
        }
        check_steady_groups(&jobs)?;
        Ok(JobSet { jobs, global_options: self.globals, output_format: self.output_format, output: self.output })
    }
}

/// fio's rule: the jobs of a reporting group have the same steady-state settings (all
/// without, or all with the same `ss`, `ss_dur` and `ss_ramp`).
fn check_steady_groups(jobs: &[JobSpec]) -> Result<(), JobError> {
    let groups = group_ids(jobs);
    let rule = |j: &JobSpec| j.steady.on().then_some(j.steady);
    for (i, j) in jobs.iter().enumerate() {
        if let Some(first) = (0..i).find(|&k| groups[k] == groups[i]) {
            if rule(&jobs[first]) != rule(j) {
                let at = ["ss_dur", "ss", "ss_ramp"].into_iter().find(|o| j.origin(o).is_some()).unwrap_or("ss_dur");
                return Err(j.error_at(
                    at,
                    format!(
                        "steady-state options (ss, ss_dur, ss_ramp) differ from those of job '{}' of the same reporting group; fio rejects that (they must be consistent within a reporting group)",
                        jobs[first].name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// fio's `${VAR}` substitution: every `${NAME}` in an option becomes the value of the
/// environment variable NAME (`env` looks it up). fio substitutes nothing for a variable
/// that is not set; that is an error here, naming the variable, because the option that
/// results (`rw=`, `filename=/x`) is never what the job file meant.
fn substitute_env(text: &str, loc: &Loc, env: &dyn Fn(&str) -> Option<String>) -> Result<String, JobError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let Some(len) = rest[at + 2..].find('}').filter(|&n| n > 0) else { break };
        let name = &rest[at + 2..at + 2 + len];
        let value = env(name).ok_or_else(|| JobError::Syntax {
            loc: loc.clone(),
            msg: format!("'{text}' names the environment variable {name}, which is not set"),
        })?;
        out.push_str(&rest[..at]);
        out.push_str(&value);
        rest = &rest[at + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` with fio's `${VAR}` substitution from the process environment, as the reader
/// applies it to every line of a job file and every argument of a command line (an
/// error, placed at `loc`, names a variable that is not set). Options and errors name
/// what results, so a caller matching an error against the text as written substitutes
/// it first.
pub fn expand_env(text: &str, loc: &Loc) -> Result<String, JobError> {
    substitute_env(text, loc, &process_env)
}

/// The process environment, for [`substitute_env`].
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// fio's include lookup: the path as given if it exists, else next to the including file.
fn include_path(name: &str, including: &str) -> PathBuf {
    let given = PathBuf::from(name);
    if given.is_absolute() || given.exists() {
        return given;
    }
    match Path::new(including).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(given),
        _ => given,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<JobSet, JobError> {
        let mut r = JobReader::new();
        r.read_str("job.fio", text)?;
        r.finish()
    }

    fn one(text: &str) -> JobSpec {
        let mut set = read(text).unwrap();
        assert_eq!(set.jobs.len(), 1);
        set.jobs.remove(0)
    }

    fn err(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn sizes_follow_fio_units() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("4k"), Some(4096));
        assert_eq!(parse_bytes("4K"), Some(4096));
        assert_eq!(parse_bytes("4kb"), Some(4096));
        assert_eq!(parse_bytes("64m"), Some(64 << 20));
        assert_eq!(parse_bytes("1g"), Some(1 << 30));
        assert_eq!(parse_bytes("2T"), Some(2 << 40));
        assert_eq!(parse_bytes("1p"), Some(1 << 50));
        assert_eq!(parse_bytes("512b"), Some(512));
        assert_eq!(parse_bytes("0x1000"), Some(4096));
        // fio's kb_base=1024 inverts the IEC spellings.
        assert_eq!(parse_bytes("4KiB"), Some(4000));
        assert_eq!(parse_bytes("1mib"), Some(1_000_000));
        assert_eq!(parse_bytes("1GiB"), Some(1_000_000_000));
        for bad in ["", "k", "1.5k", "-4k", "4q", "4 k k", "99999999999p", "0xzz"] {
            assert_eq!(parse_bytes(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn times_default_to_seconds() {
        assert_eq!(parse_time("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_time("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_time("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_time("250us"), Some(Duration::from_micros(250)));
        assert_eq!(parse_time("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_time("2d"), Some(Duration::from_secs(2 * 86400)));
        for bad in ["", "s", "1.5s", "10sec", "10x", "-1"] {
            assert_eq!(parse_time(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cpu_and_percentile_lists() {
        assert_eq!(parse_cpu_list("0-1,3"), Some(vec![0, 1, 3]));
        assert_eq!(parse_cpu_list("3,1-2,2"), Some(vec![1, 2, 3]));
        assert_eq!(parse_cpu_list("2-1"), None);
        assert_eq!(parse_cpu_list("0,,1"), None);
        assert_eq!(parse_cpu_list("4096"), None);
        assert_eq!(parse_percentile_list("50:99:99.9"), Some(vec![50.0, 99.0, 99.9]));
        assert_eq!(parse_percentile_list("0:50"), None);
        assert_eq!(parse_percentile_list("101"), None);
        assert_eq!(parse_percentile_list("nan"), None);
        assert_eq!(parse_percentile_list(&["1"; 21].join(":")), None);
    }

    #[test]
    fn several_files_per_job_are_read_with_fios_rules_and_what_is_not_run_is_refused() {
        let j = one("[j]\nnrfiles=4\nfile_service_type=roundrobin:3\nopenfiles=4\n");
        assert_eq!((j.file_count(), j.behaviour.file_service), (4, crate::files::Service::RoundRobin(3)));
        assert_eq!(one("[j]\nfilename=a:b\\:c:d\n").file_count(), 3);
        assert_eq!(
            one("[j]\nnr_files=2\nfile_service_type=sequential\n").behaviour.file_service,
            crate::files::Service::Sequential
        );
        assert_eq!(one("[j]\nnrfiles=4\nopenfiles=2\n").behaviour.openfiles, 2);
        let e = err("[j]\nfilename=a:b:c\nnrfiles=2\n");
        assert!(e.starts_with("job.fio:3: job 'j': nrfiles=2 but filename names 3 files"), "{e}");
        let j = one("[j]\nnrfiles=4\nfile_service_type=zipf:1.2\n");
        assert_eq!(
            j.behaviour.file_service,
            crate::files::Service::Dist(crate::dist::Dist::Zipf { theta: 1.2, center: None })
        );
        assert!(one("[j]\nfilename=a:b\nzonemode=zbd\n").shapes.zbd, "zbd over several files runs");
        let e = err("[j]\nfilename=a:b:a\nzonemode=zbd\n");
        assert!(e.contains("job.fio:2") && e.contains("'a' named twice"), "{e}");
        let e = err("[j]\nfile_service_type=zipf:1\n");
        assert!(e.starts_with("job.fio:2: bad value 'zipf:1' for option 'file_service_type'"), "{e}");
        let e = err("[j]\nnrfiles=4\nopenfiles=2\nfile_service_type=pareto\n");
        assert!(e.contains("job.fio:3") && e.contains("never done"), "{e}");
        assert_eq!(one("[j]\nnrfiles=2\nverify=md5\nverify_backlog=8\nrw=write\n").shapes.verify_backlog, 8);
        assert!(err("[j]\nnrfiles=0\n").contains("at least 1"));
    }

    #[test]
    fn filenames_split_on_unescaped_colons() {
        assert_eq!(split_filenames("/dev/a:/dev/b"), vec!["/dev/a", "/dev/b"]);
        assert_eq!(split_filenames(r"/tmp/a\:b"), vec!["/tmp/a:b"]);
    }

    #[test]
    fn defaults_are_fios() {
        let j = one("[j]\n");
        assert_eq!(j, {
            let mut d = JobSpec::new("j");
            d.section = j.section.clone();
            d
        });
        assert_eq!(
            (j.ioengine, j.rw, j.bs, j.iodepth, j.numjobs),
            (IoEngine::Psync, Rw::Read, RwPair { read: 4096, write: 4096 }, 1, 1)
        );
        assert_eq!((j.rwmixread, j.iodepth_batch_submit, j.iodepth_batch_complete_min), (50, 1, 1));
        assert!(j.randrepeat && j.do_verify && j.clat_percentiles && !j.lat_percentiles && !j.slat_percentiles);
        assert_eq!(j.percentile_list, DEFAULT_PERCENTILES);
        assert_eq!(j.verify, Verify::None);
        assert_eq!(j.section, Some(Loc::File { file: "job.fio".into(), line: 1 }));
    }

    #[test]
    fn every_option_parses_into_the_spec() {
        let j = one("[global]\nioengine=io_uring\n[all]\nfilename=/dev/nvme0n1\nsize=50%\nfilesize=1g\noffset=4k\n\
             rw=randrw\nrwmixwrite=30\nbs=4k,64k\niodepth=32\niodepth_batch=8\niodepth_batch_complete_min=4\n\
             numjobs=2\nthread\ndirect=1\nruntime=10s\ntime_based\nramp_time=500ms\nnumber_ios=1000\n\
             norandommap\nrandrepeat=0\nrandseed=42\ncpus_allowed=0-1,3\ngroup_reporting\nstonewall\nnew_group\n\
             hipri\nsqthread_poll=1\nsqthread_poll_cpu=1\nfixedbufs\nregisterfiles\nfsync=8\n\
             verify=crc32c-intel\ndo_verify=0\npercentile_list=50:99.9\nlat_percentiles=1\n\
             clat_percentiles=0\nslat_percentiles=1\ndescription=everything\n");
        assert_eq!(j.ioengine, IoEngine::IoUring);
        assert_eq!(j.filename, vec!["/dev/nvme0n1"]);
        assert_eq!((j.size, j.filesize, j.offset), (Some(SizeSpec::Percent(50)), Some(1 << 30), SizeSpec::Bytes(4096)));
        assert_eq!((j.rw, j.rwmixread), (Rw::RandRw, 70));
        assert_eq!(j.bs, RwPair { read: 4096, write: 65536 });
        assert_eq!((j.iodepth, j.iodepth_batch_submit, j.iodepth_batch_complete_min, j.numjobs), (32, 8, 4, 2));
        assert!(j.thread && j.direct && j.time_based && j.norandommap && !j.randrepeat);
        assert_eq!((j.runtime, j.ramp_time), (Some(Duration::from_secs(10)), Some(Duration::from_millis(500))));
        assert_eq!((j.number_ios, j.randseed, j.fsync), (Some(1000), Some(42), 8));
        assert_eq!(j.cpus_allowed, Some(vec![0, 1, 3]));
        assert!(j.group_reporting && j.stonewall && j.new_group);
        assert!(j.hipri && j.sqthread_poll && j.fixedbufs && j.registerfiles);
        assert_eq!(j.sqthread_poll_cpu, Some(1));
        assert_eq!((j.verify, j.do_verify), (Verify::Crc32c, false));
        assert_eq!(j.percentile_list, vec![50.0, 99.9]);
        assert!(j.lat_percentiles && !j.clat_percentiles && j.slat_percentiles);
        assert_eq!(j.description.as_deref(), Some("everything"));
        assert_eq!(j.options.len(), 37);
    }

    #[test]
    fn comments_blanks_and_bare_keys() {
        let j = one("; leading comment\n# another\n\n  [job] ; trailing comment\n  bs = 8k   # inline\n\
             direct\t=\t1\r\n thread \n");
        assert_eq!(j.bs.read, 8192);
        assert!(j.direct && j.thread);
        assert_eq!(j.origin("bs"), Some(&Loc::File { file: "job.fio".into(), line: 5 }));
        assert_eq!(j.origin("blocksize"), j.origin("bs"));
        assert_eq!(j.origin("iodepth"), None);
    }

    #[test]
    fn globals_apply_to_later_jobs_only() {
        let set = read("[global]\nbs=8k\n[a]\n[global]\nbs=16k\niodepth=4\n[b]\nbs=32k\n[c]\n").unwrap();
        let got: Vec<(&str, u64, u32)> = set.jobs.iter().map(|j| (j.name.as_str(), j.bs.read, j.iodepth)).collect();
        assert_eq!(got, vec![("a", 8192, 1), ("b", 32768, 4), ("c", 16384, 4)]);
        assert_eq!(set.global_options.len(), 3);
        assert_eq!(set.jobs[1].options.len(), 1);
    }

    #[test]
    fn any_section_starting_with_global_is_global() {
        let set = read("[global-defaults]\niodepth=8\n[a]\n").unwrap();
        assert_eq!(set.jobs.len(), 1);
        assert_eq!(set.jobs[0].iodepth, 8);
    }

    #[test]
    fn bs_pairs_keep_or_inherit_each_side() {
        assert_eq!(one("[j]\nbs=4k,\n").bs, RwPair { read: 4096, write: 4096 });
        assert_eq!(one("[j]\nbs=,8k\n").bs, RwPair { read: 4096, write: 8192 });
        assert_eq!(one("[global]\nbs=16k\n[j]\nbs=,8k\n").bs, RwPair { read: 16384, write: 8192 });
        assert_eq!(one("[j]\nbs=8k,16k,4k\n").bs, RwPair { read: 8192, write: 16384 });
        assert!(err("[j]\nbs=,\n").contains("bad value ',' for option 'bs'"));
        assert!(err("[j]\nbs=0\n").contains("option 'bs'"));
        assert!(err("[j]\nbs=4k,8k,1k,2k\n").contains("option 'bs'"));
    }

    #[test]
    fn verify_async_is_a_number_of_checker_threads() {
        assert_eq!(one("[j]\nverify=crc32c\nverify_async=4\n").shapes.verify_async, 4);
        assert_eq!(one("[j]\nverify=crc32c\n").shapes.verify_async, 0);
        assert!(err("[j]\nverify_async=x\n").starts_with("job.fio:2: bad value 'x' for option 'verify_async'"));
        assert!(err("[j]\nverify_async=8g\n").starts_with("job.fio:2: bad value '8g' for option 'verify_async'"));
        assert_eq!(
            err("[j]\nverify_async_cpus=0\n"),
            "job.fio:2: unknown option 'verify_async_cpus': a fio option ioswitch bench does not run \
             (that part of fio's verify is not implemented)"
        );
    }

    #[test]
    fn an_unknown_option_of_a_job_whose_engine_is_not_run_counts_as_the_engine_refusal() {
        // nfs.fio: nfs_url (an option of fio's nfs engine) comes before ioengine=nfs.
        let e = err("[global]\nnfs_url=nfs://127.0.0.1/nfs\nbs=4k\nioengine=nfs\n[j]\nrw=read\n");
        assert!(e.starts_with("job.fio:4: bad value 'nfs' for option 'ioengine'"), "{e}");
        // Without such an engine, the first unknown option is reported, even when a later
        // line is wrong too.
        let e = err("[j]\nioengine=libaio\nfoo=1\nbs=x\nbar=2\n");
        assert_eq!(e, "job.fio:3: unknown option 'foo'");
        let e = err("[j]\nfoo=1\n[k]\nioengine=spdk\n");
        assert!(e.starts_with("job.fio:4: bad value 'spdk' for option 'ioengine'"), "{e}");
    }

    #[test]
    fn unknown_options_name_the_file_and_line() {
        assert_eq!(err("[global]\n\n[j]\nrw=read\nfoo=1\n"), "job.fio:5: unknown option 'foo'");
        assert_eq!(err("[j]\nbar\n"), "job.fio:2: unknown option 'bar'");
        assert!(err("[j]\noutput-format=json\n").contains("a command-line option"));
    }

    #[test]
    fn bad_values_say_what_was_expected() {
        let e = err("[j]\n\nbs=4q\n");
        assert!(e.starts_with("job.fio:3: bad value '4q' for option 'bs': expected a size"), "{e}");
        let e = err("[j]\nruntime=10x\n");
        assert!(e.contains("'10x' for option 'runtime': expected a time"), "{e}");
        assert!(err("[j]\ndirect=yes\n").contains("expected 1 or 0"));
        assert!(err("[j]\ndirect=\n").contains("option 'direct'"));
        assert!(err("[j]\niodepth=0\n").contains("at least 1"));
        assert!(err("[j]\niodepth=5000000000\n").contains("below 2^32"));
        assert!(err("[j]\nrwmixread=101\n").contains("percentage"));
        assert!(err("[j]\nsize=0%\n").contains("option 'size'"));
        assert!(err("[j]\nioengine=spdk\n").contains("one of psync, pvsync"));
        assert!(err("[j]\nverify=sha512\n").contains("not supported"));
        assert!(err("[j]\nverify=bogus\n")
            .contains("crc32c, crc32c-intel, md5, crc64, xxhash, sha256, pattern, meta or none"));
        assert!(err("[j]\nioengine=ioswitch\nioswitch_opts=async=warp\n").contains("option 'ioswitch_opts'"));
        assert_eq!(err("[j]\nbs\n"), "job.fio:2: option 'bs' needs a value (a size such as 4096, 4k, 64m or 1g (k, m, g, t, p: powers of 1024; kib, mib, ...: powers of 1000, as in fio))");
    }

    #[test]
    fn rw_patterns_and_rejections() {
        for (v, rw) in [
            ("read", Rw::Read),
            ("write", Rw::Write),
            ("randread", Rw::RandRead),
            ("randwrite", Rw::RandWrite),
            ("rw", Rw::ReadWrite),
            ("readwrite", Rw::ReadWrite),
            ("randrw", Rw::RandRw),
        ] {
            assert_eq!(one(&format!("[j]\nrw={v}\n")).rw, rw);
            assert_eq!(one(&format!("[j]\nreadwrite={v}\n")).rw, rw);
        }
        // fio's offset modifier runs now (see workload_shapes_are_read_per_direction…).
        assert_eq!(one("[j]\nrw=randread:8\n").shapes.rw_modifier, Some(8));
        assert_eq!((one("[j]\nrw=trim\n").rw, one("[j]\nrw=randtrim\n").rw), (Rw::Trim, Rw::RandTrim));
        assert_eq!(one("[j]\nrw=trimwrite\n").rw, Rw::TrimWrite);
        assert!(err("[j]\nrw=randtrimwrite\n").contains("randtrimwrite is not run"));
        assert!(Rw::Trim.trims() && !Rw::Trim.writes() && !Rw::Trim.reads() && Rw::RandTrim.is_random());
        assert!(Rw::TrimWrite.trims() && Rw::TrimWrite.writes() && !Rw::TrimWrite.is_random());
        assert!(Rw::RandRw.is_random() && Rw::RandRw.reads() && Rw::RandRw.writes());
        assert!(!Rw::Write.reads() && !Rw::Read.writes());
    }

    #[test]
    fn direct_and_buffered_are_one_setting() {
        assert!(one("[j]\nbuffered=0\n").direct);
        assert!(!one("[j]\ndirect=1\nbuffered=1\n").direct);
    }

    #[test]
    fn zero_times_and_counts_mean_unset() {
        let j = one("[j]\nruntime=0\nramp_time=0\nnumber_ios=0\nsize=0\n");
        assert_eq!((j.runtime, j.ramp_time, j.number_ios, j.size), (None, None, None, None));
    }

    #[test]
    fn fio_fixups_of_batch_depths() {
        let j = one("[j]\niodepth=16\niodepth_batch_submit=0\niodepth_batch_complete_min=64\n");
        assert_eq!((j.iodepth_batch_submit, j.iodepth_batch_complete_min), (16, 16));
        let j = one("[j]\niodepth=4\niodepth_batch=32\niodepth_batch_complete=0\n");
        assert_eq!((j.iodepth_batch_submit, j.iodepth_batch_complete_min), (4, 0));
    }

    #[test]
    fn reaping_options_default_to_fio_policy() {
        // fio's defaults: reap at least 1 and at most 1, refill at once (iodepth_low = iodepth).
        let j = one("[j]\niodepth=16\n");
        let got = (j.iodepth_batch_complete_min, j.iodepth_batch_complete_max, j.iodepth_low);
        assert_eq!(got, (1, 1, 16));
        let j = one("[j]\n");
        assert_eq!((j.iodepth_batch_complete_max, j.iodepth_low), (1, 1));
    }

    #[test]
    fn reaping_options_take_fio_values_and_fix_ups() {
        let j = one("[j]\niodepth=32\niodepth_batch_complete_min=2\niodepth_batch_complete_max=16\niodepth_low=4\n");
        let got = (j.iodepth_batch_complete_min, j.iodepth_batch_complete_max, j.iodepth_low);
        assert_eq!(got, (2, 16, 4));
        // A max below the min is the min; 0 or above iodepth for iodepth_low is iodepth.
        let j = one("[j]\niodepth=16\niodepth_batch_complete=8\niodepth_batch_complete_max=2\niodepth_low=0\n");
        assert_eq!((j.iodepth_batch_complete_min, j.iodepth_batch_complete_max, j.iodepth_low), (8, 8, 16));
        let j = one("[j]\niodepth=8\niodepth_batch_complete_max=64\niodepth_low=9\n");
        assert_eq!((j.iodepth_batch_complete_max, j.iodepth_low), (8, 8));
        // fio's polling mode: both 0.
        let j = one("[j]\niodepth=8\niodepth_batch_complete_min=0\niodepth_batch_complete_max=0\n");
        assert_eq!((j.iodepth_batch_complete_min, j.iodepth_batch_complete_max), (0, 0));
        // Globals carry to jobs, and the command line takes the same spellings.
        let set = read("[global]\niodepth=16\niodepth_low=8\n[a]\n").unwrap();
        assert_eq!(set.jobs[0].iodepth_low, 8);
        let set = JobSet::from_args(["--name=a", "--iodepth=4", "--iodepth_batch_complete_max=4"]).unwrap();
        assert_eq!(set.jobs[0].iodepth_batch_complete_max, 4);
    }

    #[test]
    fn bad_reaping_values_name_the_option_and_line() {
        let e = err("[j]\niodepth=4\niodepth_batch_complete_max=-1\n");
        assert!(e.starts_with("job.fio:3: bad value '-1' for option 'iodepth_batch_complete_max'"), "{e}");
        let e = err("[j]\n\niodepth_low=lots\n");
        assert!(e.starts_with("job.fio:3: bad value 'lots' for option 'iodepth_low'"), "{e}");
        let e = err("[j]\niodepth_low=5000000000\n");
        assert!(e.contains("option 'iodepth_low'") && e.contains("below 2^32"), "{e}");
        let e = err("[j]\niodepth_batch_complete_max\n");
        assert!(e.starts_with("job.fio:2: option 'iodepth_batch_complete_max' needs a value"), "{e}");
    }

    #[test]
    fn engine_options_need_their_engine() {
        let e = err("[j]\nioengine=libaio\nfixedbufs\n");
        assert_eq!(e, "job.fio:3: job 'j': option 'fixedbufs' belongs to ioengine io_uring or io_uring_cmd, but the job uses ioengine=libaio");
        // Accepted here and run as RWF_HIPRI by the runner (run.rs tests).
        assert!(one("[j]\nioengine=pvsync2\nhipri\n").hipri);
        let e = err("[global]\nxnvme_async=io_uring\n[j]\nioengine=psync\n");
        assert!(e.starts_with("job.fio:2: job 'j': option 'xnvme_async' belongs to ioengine xnvme"), "{e}");
        let j = one("[j]\nioengine=xnvme\nxnvme_be=linux\nxnvme_async=io_uring_cmd\nxnvme_sync=nvme\nxnvme_admin=nvme\nxnvme_dev_nsid=1\nxnvme_iovec=0\n");
        assert_eq!(
            j.xnvme,
            XnvmeOpts {
                be: Some("linux".into()),
                r#async: Some("io_uring_cmd".into()),
                sync: Some("nvme".into()),
                admin: Some("nvme".into()),
                dev_nsid: Some(1),
            }
        );
        let e = err("[j]\nioengine=xnvme\nxnvme_iovec=1\n");
        assert!(e.starts_with("job.fio:3: bad value '1' for option 'xnvme_iovec'") && e.contains("not run"), "{e}");
        let e = err("[j]\nioengine=xnvme\nxnvme_iovec\n");
        assert!(e.starts_with("job.fio:3: bad value '' for option 'xnvme_iovec'"), "{e}");
        let j = one("[j]\nioengine=ioswitch\nioswitch_opts=async=io_uring,sqpoll=1\n");
        let opts = j.ioswitch_opts.unwrap();
        assert_eq!(opts.r#async, Some(ioswitch::AsyncIface::IoUring));
        assert!(opts.sqpoll);
    }

    #[test]
    fn environment_variables_are_substituted_and_unset_ones_named() {
        let env = |n: &str| match n {
            "FIO_BS" => Some("64k".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let loc = Loc::Arg { index: 1 };
        assert_eq!(substitute_env("bs=${FIO_BS}", &loc, &env).unwrap(), "bs=64k");
        assert_eq!(substitute_env("a${EMPTY}b${FIO_BS}c", &loc, &env).unwrap(), "ab64kc");
        assert_eq!(substitute_env("x=${}y${open", &loc, &env).unwrap(), "x=${}y${open", "not variables");
        let e = substitute_env("rw=${FIO_NOPE}", &loc, &env).unwrap_err().to_string();
        assert!(e.contains("FIO_NOPE") && e.contains("not set") && e.contains("argument 1"), "{e}");
        // Through a job file, with the process environment.
        std::env::set_var("IOSWITCH_TEST_JOBFILE_RW", "randwrite");
        let j = one("[j]\nrw=${IOSWITCH_TEST_JOBFILE_RW}\n");
        assert_eq!(j.rw, Rw::RandWrite);
        let e = err("[j]\nbs=${IOSWITCH_TEST_JOBFILE_UNSET}\n");
        assert!(e.starts_with("job.fio:2: ") && e.contains("IOSWITCH_TEST_JOBFILE_UNSET"), "{e}");
        // On a command line, also in a value given as the next argument (`--rw VALUE`):
        // found by the fuzz target `jobargs`, where the value was kept unsubstituted.
        let mut r = JobReader::new();
        r.read_args(["--name=j", "--rw", "${IOSWITCH_TEST_JOBFILE_RW}"]).unwrap();
        assert_eq!(r.finish().unwrap().jobs[0].rw, Rw::RandWrite);
        let e = JobReader::new()
            .read_args(["--name=j", "--directory", "/d${IOSWITCH_TEST_JOBFILE_UNSET}"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("argument 3") && e.contains("IOSWITCH_TEST_JOBFILE_UNSET"), "{e}");
    }

    #[test]
    fn fio_options_not_run_are_refused_saying_why() {
        let e = err("[j]\nnice=5\n");
        assert!(e.starts_with("job.fio:2: unknown option 'nice': a fio option ioswitch bench does not run"), "{e}");
        assert!(e.contains("nice -n N ioswitch bench"), "{e}");
        let e = JobReader::new().read_args(["--name=j", "--cpumask=1"]).unwrap_err().to_string();
        assert!(e.contains("'cpumask'") && e.contains("cpus_allowed"), "{e}");
        // Every name in the table is one this reader does not know (else the entry is stale).
        for (names, _) in NOT_RUN {
            for n in *names {
                assert!(lookup(n).is_none(), "{n} is both run and listed as not run");
            }
        }
        // bwavgtime / iopsavgtime: ms, at least 1; below log_avg_msec with their log,
        // refused (fio would average the log over them).
        let g = one("[j]\nbwavgtime=100\niopsavgtime=250\n").logs;
        assert_eq!((g.bw_avg_msec, g.iops_avg_msec), (Some(100), Some(250)));
        assert_eq!(g.sample_windows(), [Some(100_000_000), Some(250_000_000)]);
        one("[j]\nwrite_bw_log=b\nlog_avg_msec=100\nbwavgtime=200\n");
        let e = err("[j]\nwrite_bw_log=b\nlog_avg_msec=500\nbwavgtime=200\n");
        assert!(e.contains("bwavgtime=200 below log_avg_msec=500"), "{e}");
        assert!(err("[j]\niopsavgtime=0\n").contains("bad value '0' for option 'iopsavgtime'"));
        // disk_util: 0 is what runs; fio's default 1 is refused, saying so.
        one("[j]\ndisk_util=0\n");
        let e = err("[j]\ndisk_util=1\n");
        assert!(e.contains("bad value '1' for option 'disk_util': expected 0 (no disk utilization"), "{e}");
        // Deprecated options: fio ignores some, refuses others; here both are refused, saying which.
        assert!(err("[j]\nverifysort=1\n").contains("deprecated: fio ignores it; remove it from the job"));
        assert!(err("[j]\nrwmixcycle=100\n").contains("deprecated: fio refuses it too"));
        // A name fio does not have either stays a bare unknown option.
        assert_eq!(err("[j]\nfoo=1\n"), "job.fio:2: unknown option 'foo'");
    }

    #[test]
    fn fadvise_hint_0_and_unique_filename_parse_other_hints_are_refused() {
        one("[j]\nfadvise_hint=0\nunique_filename=0\n");
        one("[j]\nunique_filename\n");
        for v in ["1", "sequential", "random"] {
            let e = err(&format!("[j]\nfadvise_hint={v}\n"));
            assert!(
                e.starts_with(&format!("job.fio:2: bad value '{v}' for option 'fadvise_hint': expected 0 (")),
                "{e}"
            );
        }
        assert!(err("[j]\nunique_filename=maybe\n").contains("unique_filename"));
    }

    #[test]
    fn zero_buffers_turns_scramble_off_unless_scramble_is_set() {
        let b = one("[j]\n").behaviour;
        assert!(!b.zero_buffers && b.scramble_buffers, "fio's defaults");
        let b = one("[j]\nzero_buffers\n").behaviour;
        assert!(b.zero_buffers && !b.scramble_buffers);
        let b = one("[j]\nzero_buffers=0\n").behaviour;
        assert!(!b.zero_buffers && b.scramble_buffers);
        // Set explicitly, scramble_buffers stays on, in either order, and from a global.
        for f in ["[j]\nzero_buffers\nscramble_buffers=1\n", "[global]\nscramble_buffers=1\n[j]\nzero_buffers\n"] {
            let b = one(f).behaviour;
            assert!(b.zero_buffers && b.scramble_buffers, "{f}");
        }
        let mut r = JobReader::new();
        r.read_args(["--name=j", "--zero_buffers"]).unwrap();
        assert!(r.finish().unwrap().jobs[0].behaviour.zero_buffers);
        assert!(err("[j]\nzero_buffers=maybe\n").contains("zero_buffers"));
    }

    #[test]
    fn behaviour_options_take_fio_values() {
        let b = one("[j]\ndirectory=/a\\:b:/c\nallow_file_create=0\ncreate_on_open\nrefill_buffers\nexitall\n\
                     exitall_on_error\noverwrite=1\nverify_fatal=1\ncontinue_on_error=io\nrandom_generator=lfsr\nunified_rw_reporting=both\n\
                     io_submit_mode=inline\nthreads=4\n")
        .behaviour;
        assert_eq!(b.directory, vec!["/a:b", "/c"]);
        assert!(!b.allow_file_create && b.create_on_open && b.refill_buffers && b.exitall && b.verify_fatal);
        assert!(b.exitall_on_error && b.overwrite);
        assert_eq!(b.continue_on_error, ContinueOn { read: true, write: true, verify: false });
        assert_eq!((b.random_generator, b.unified_rw_reporting), (RandomGenerator::Lfsr, UnifiedRw::Both));
        assert_eq!(b.tiobench_threads, Some(4));
        let d = JobSpec::new("d").behaviour;
        assert!(d.allow_file_create && !d.exitall && !d.refill_buffers && d.directory.is_empty());
        assert!(!d.exitall_on_error && !d.overwrite, "fio's defaults");
        for (v, want) in [
            ("none", ContinueOn::default()),
            ("0", ContinueOn::default()),
            ("read", ContinueOn { read: true, ..ContinueOn::default() }),
            ("write", ContinueOn { write: true, ..ContinueOn::default() }),
            ("verify", ContinueOn { verify: true, ..ContinueOn::default() }),
            ("all", ContinueOn { read: true, write: true, verify: true }),
            ("1", ContinueOn { read: true, write: true, verify: true }),
        ] {
            assert_eq!(one(&format!("[j]\ncontinue_on_error={v}\n")).behaviour.continue_on_error, want, "{v}");
        }
        for (v, want) in
            [("0", UnifiedRw::None), ("mixed", UnifiedRw::Mixed), ("1", UnifiedRw::Mixed), ("2", UnifiedRw::Both)]
        {
            assert_eq!(one(&format!("[j]\nunified_rw_reporting={v}\n")).behaviour.unified_rw_reporting, want, "{v}");
        }
        assert!(one("[j]\nio_submit_mode=offload\n").behaviour.offload);
        assert!(!one("[j]\nio_submit_mode=inline\n").behaviour.offload);
        assert!(!JobSpec::new("d").behaviour.offload, "inline by default, as fio");
        let e = err("[j]\nio_submit_mode=sideways\n");
        assert!(e.starts_with("job.fio:2: bad value 'sideways' for option 'io_submit_mode'"), "{e}");
        let e = err("[j]\ncontinue_on_error=sometimes\n");
        assert!(e.contains("none, read, write, io, verify, all"), "{e}");
        let e = err("[j]\nrandom_generator=mt19937\n");
        assert!(e.contains("tausworthe, lfsr or tausworthe64"), "{e}");
    }

    #[test]
    fn ignore_error_lists_per_error_type_as_fio() {
        // enospc-pressure.fio's: continue_on_error=write, then an empty read list and ENOSPC.
        let b = one("[j]\ncontinue_on_error=write\nignore_error=,ENOSPC\nerror_dump=1\n").behaviour;
        assert_eq!(b.ignore_error, [vec![], vec![libc::ENOSPC], vec![]]);
        assert_eq!(b.continue_on_error, ContinueOn { write: true, ..ContinueOn::default() });
        assert!(b.error_dump && !JobSpec::new("d").behaviour.error_dump, "fio 3.33 dumps no errors by default");
        // A list turns continue_on_error on for its type; numbers are taken as absolute
        // values; a list ends at an empty name.
        let b = one("[j]\nignore_error=EIO:-28::EPERM,,84\n").behaviour;
        assert_eq!(b.ignore_error, [vec![libc::EIO, libc::ENOSPC], vec![], vec![84]]);
        assert_eq!(b.continue_on_error, ContinueOn { read: true, write: false, verify: true });
        // A later continue_on_error sets the types again, as in fio (its bits are one value).
        let b = one("[j]\nignore_error=EIO\ncontinue_on_error=none\n").behaviour;
        assert_eq!((b.continue_on_error, b.ignore_error[0].clone()), (ContinueOn::default(), vec![libc::EIO]));
        assert_eq!(JobSpec::new("d").behaviour.ignore_error, [vec![], vec![], vec![]] as [Vec<i32>; 3]);
        for (v, why) in [
            ("EWHATEVER", "unknown error 'EWHATEVER'"),
            ("0", "unknown error '0'"),
            ("eio", "unknown error 'eio'"),
            ("EIO,EIO,EIO,EIO", "4 lists"),
        ] {
            let e = err(&format!("[j]\nignore_error={v}\n"));
            assert!(e.contains("ignore_error") && e.contains(why), "{v}: {e}");
        }
    }

    #[test]
    fn flow_options_as_fio() {
        let b = one("[global]\nflow_sleep=1000\n[j]\nflow=8\nflow_id=-2\n").behaviour;
        assert_eq!((b.flow, b.flow_id, b.flow_sleep_us), (8, -2, 1000));
        let d = JobSpec::new("d").behaviour;
        assert_eq!((d.flow, d.flow_id, d.flow_sleep_us), (0, 0, 0), "fio's defaults: no flow");
        assert_eq!(one("[j]\nflow=1000\n").behaviour.flow, 1000);
        for bad in ["flow=1001", "flow=-1", "flow=x", "flow_id=1.5", "flow_sleep=-3"] {
            let e = err(&format!("[j]\n{bad}\n"));
            assert!(e.contains(bad.split('=').next().unwrap()), "{bad}: {e}");
        }
    }

    #[test]
    fn fallocate_modes_as_fio() {
        assert_eq!(JobSpec::new("d").behaviour.fallocate, Fallocate::Native, "fio's default on Linux");
        for (v, want) in [
            ("none", Fallocate::None),
            ("0", Fallocate::None),
            ("native", Fallocate::Native),
            ("posix", Fallocate::Posix),
            ("1", Fallocate::Posix),
            ("keep", Fallocate::Keep),
            ("truncate", Fallocate::Truncate),
        ] {
            assert_eq!(one(&format!("[j]\nfallocate={v}\n")).behaviour.fallocate, want, "{v}");
        }
        let e = err("[j]\nfallocate=2\n");
        assert!(e.contains("'fallocate'") && e.contains("none, native, posix, keep, truncate"), "{e}");
    }

    #[test]
    fn filename_format_is_kept_for_the_file_names() {
        let b = one("[global]\nfilename_format=f.$jobnum.$filenum\n[j]\n").behaviour;
        assert_eq!(b.filename_format.as_deref(), Some("f.$jobnum.$filenum"));
        assert_eq!(JobSpec::new("d").behaviour.filename_format, None, "fio's $jobname.$jobnum.$filenum");
        assert!(err("[j]\nfilename_format=\n").contains("filename_format"));
    }

    #[test]
    fn fill_device_and_its_alias_fill_fs_are_read() {
        assert!(!one("[j]\n").behaviour.fill_device, "off by default");
        assert!(one("[j]\nfill_device=1\n").behaviour.fill_device);
        assert!(one("[j]\nfill_fs\n").behaviour.fill_device);
        assert!(!one("[j]\nfill_fs=0\n").behaviour.fill_device);
        assert!(err("[j]\nfill_device=2\n").contains("fill_device"));
    }

    #[test]
    fn cpus_policy_end_fsync_kb_base_and_create_serialize() {
        let b = one("[j]\ncpus_allowed=0-1\ncpus_allowed_policy=split\nend_fsync=1\n").behaviour;
        assert!(b.cpus_split && b.end_fsync);
        assert!(!one("[j]\ncpus_allowed_policy=shared\n").behaviour.cpus_split);
        assert!(one("[j]\nfsync_on_close=1\n").behaviour.end_fsync);
        assert_eq!(one("[j]\nkb_base=1024\nbs=4k\ncreate_serialize=1\n").bs.read, 4096);
        assert!(err("[j]\nkb_base=1000\n").contains("kb_base=1000 is not supported"));
        assert!(one("[j]\n").behaviour.create_serialize, "on by default");
        assert!(!one("[j]\ncreate_serialize=0\n").behaviour.create_serialize);
        assert!(err("[j]\ncreate_serialize=2\n").contains("create_serialize"));
        assert!(err("[j]\ncpus_allowed_policy=spread\n").contains("shared or split"));
    }

    #[test]
    fn io_size_startdelay_and_unlink() {
        let b = one("[j]\nio_size=40m\nstartdelay=250ms\nunlink\n").behaviour;
        assert_eq!(
            (b.io_size, b.startdelay, b.unlink),
            (Some(SizeSpec::Bytes(40 << 20)), Some(Duration::from_millis(250)), true)
        );
        assert_eq!(one("[j]\nio_limit=50%\n").behaviour.io_size, Some(SizeSpec::Percent(50)));
        assert!(err("[j]\nstartdelay=1-5\n").contains("a range of delays is not run"));
    }

    #[test]
    fn loops_wait_for_and_io_uring_cmd_spellings() {
        let set = read("[a]\nrw=read\n[b]\nwait_for=a\nloops=3\n").unwrap();
        assert_eq!((set.jobs[0].behaviour.loops, set.jobs[1].behaviour.loops), (1, 3));
        assert_eq!(set.jobs[1].behaviour.wait_for.as_deref(), Some("a"));
        let e = err("[a]\nwait_for=b\n[b]\nrw=read\n");
        assert_eq!(e, "job.fio:2: job 'a': wait_for=b: no job named b before this one");
        assert!(err("[a]\nloops=0\n").contains("at least 1"));
        one("[j]\nioengine=io_uring_cmd\ncmd_type=nvme\nnonvectored=1\n");
        one("[j]\nioengine=io_uring\nnonvectored=-1\n");
        let e = err("[j]\nioengine=io_uring\nnonvectored=0\n");
        assert!(e.contains("bad value '0' for option 'nonvectored'") && e.contains("not run"), "{e}");
        assert!(err("[j]\nioengine=io_uring_cmd\ncmd_type=scsi\n").contains("expected nvme"));
        let e = err("[j]\nioengine=libaio\ncmd_type=nvme\n");
        assert!(e.contains("belongs to ioengine io_uring_cmd"), "{e}");
    }

    #[test]
    fn gtod_reduce_sets_the_four_it_stands_for_and_later_options_win() {
        let b = one("[j]\ngtod_reduce=1\n").behaviour;
        assert!(b.disable_lat && b.disable_clat && b.disable_slat && b.disable_bw);
        let b = one("[j]\ngtod_reduce=1\ndisable_clat=0\n").behaviour;
        assert!(b.disable_lat && !b.disable_clat && b.disable_slat && b.disable_bw);
        let b = one("[j]\ndisable_clat=1\ngtod_reduce=0\n").behaviour;
        assert!(!b.disable_clat, "gtod_reduce=0 clears them too, as fio's callback does");
        assert!(one("[j]\ndisable_bw=1\n").behaviour.disable_bw);
    }

    #[test]
    fn time_based_without_a_runtime_is_dropped_as_fio_drops_it() {
        for text in ["[j]\ntime_based=1\n", "[j]\ntime_based\nruntime=0\n"] {
            let j = one(text);
            assert!(!j.time_based && j.behaviour.time_based_ignored, "{text}");
        }
        let j = one("[j]\ntime_based\nruntime=2s\n");
        assert!(j.time_based && !j.behaviour.time_based_ignored);
        assert_eq!(j.runtime, Some(Duration::from_secs(2)));
    }

    #[test]
    fn structural_errors_are_placed() {
        assert_eq!(err("bs=4k\n[j]\n"), "job.fio:1: option 'bs' outside of a [section]");
        assert_eq!(err("[j\n"), "job.fio:1: bad section header '[j': expected [name]");
        assert_eq!(err("[]\n"), "job.fio:1: bad section header '[]': expected [name]");
        assert_eq!(err("[j]\n=4k\n"), "job.fio:2: '=4k' has no option name");
        assert_eq!(
            err("[global]\nbs=4k\n"),
            "no job defined: job.fio set only global options (a job is a [section] other than [global], or --name)"
        );
        assert_eq!(err("include x.fio\n"), "job.fio:1: include outside of a [section]");
        let e = err("[j]\ninclude /nonexistent/ioswitch-x.fio\n");
        assert!(e.starts_with("job.fio:2: cannot read included file '/nonexistent/ioswitch-x.fio'"), "{e}");
    }

    #[test]
    fn section_selection_keeps_named_jobs_and_all_globals() {
        let mut r = JobReader::new();
        r.select_section("b");
        r.read_str("job.fio", "[a]\nfoo=ignored\n[global]\niodepth=2\n[b]\n[c]\n").unwrap();
        let set = r.finish().unwrap();
        let names: Vec<&str> = set.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert_eq!(set.jobs[0].iodepth, 2);
    }

    #[test]
    fn later_job_files_start_with_a_stonewall() {
        let mut r = JobReader::new();
        r.read_str("one.fio", "[a]\n[b]\n").unwrap();
        r.read_str("two.fio", "[global]\nbs=8k\n[c]\n[d]\n").unwrap();
        let set = r.finish().unwrap();
        let walls: Vec<bool> = set.jobs.iter().map(|j| j.stonewall).collect();
        assert_eq!(walls, [false, false, true, false]);
        assert_eq!(set.jobs[2].bs.read, 8192);
        assert_eq!(set.jobs[3].bs.read, 8192, "globals carry across files");
        assert_eq!(set.group_ids(), [0, 0, 1, 1]);
        assert_eq!(set.jobs[2].origin("stonewall"), Some(&Loc::File { file: "two.fio".into(), line: 3 }));
    }

    #[test]
    fn groups_start_at_stonewalls_and_new_groups_but_never_empty() {
        let set = read("[a]\nstonewall\n[b]\n[c]\nnew_group\n[d]\nstonewall\n[e]\n").unwrap();
        assert_eq!(set.group_ids(), [0, 0, 1, 2, 2]);
    }

    #[test]
    fn command_line_jobs_in_fio_spelling() {
        let mut r = JobReader::new();
        let files = r
            .read_args([
                "--ioengine=libaio",
                "--direct",
                "--output-format=json+",
                "--name=first",
                "--rw=randread",
                "--bs",
                "8k",
                "--thread",
                "--name=second",
                "--iodepth=4",
                "--time_based",
                "1",
                "--runtime=2",
                "extra.fio",
                "--output",
                "out.json",
            ])
            .unwrap();
        assert_eq!(files, [PathBuf::from("extra.fio")]);
        let set = r.finish().unwrap();
        assert_eq!(set.output_format, OutputFormat { normal: false, json: true, json_plus: true });
        assert_eq!(set.output, Some(PathBuf::from("out.json")));
        let [a, b] = &set.jobs[..] else { panic!("two jobs expected") };
        assert_eq!(
            (a.name.as_str(), a.ioengine, a.direct, a.rw, a.bs.read, a.thread),
            ("first", IoEngine::Libaio, true, Rw::RandRead, 8192, true)
        );
        assert_eq!((b.name.as_str(), b.iodepth, b.rw, b.time_based), ("second", 4, Rw::Read, true));
        assert_eq!(a.origin("bs"), Some(&Loc::Arg { index: 6 }));
        assert_eq!(set.global_options.len(), 2);
        assert_eq!(a.options[0].key, "name");
    }

    #[test]
    fn command_line_errors_name_the_argument() {
        let e = JobSet::from_args(["--name=j", "--bogus=1"]).unwrap_err().to_string();
        assert_eq!(e, "command line argument 2: unknown option 'bogus'");
        let e = JobSet::from_args(["--name=j", "--bs=4x"]).unwrap_err().to_string();
        assert!(e.starts_with("command line argument 2: bad value '4x' for option 'bs'"), "{e}");
        let e = JobSet::from_args(["--name"]).unwrap_err().to_string();
        assert!(e.starts_with("command line argument 1: option 'name' needs a value"), "{e}");
        let e = JobSet::from_args(["--output-format=terse", "--name=j"]).unwrap_err().to_string();
        assert!(e.contains("not supported"), "{e}");
        let e = JobSet::from_args(["--rw=read"]).unwrap_err();
        assert!(matches!(&e, JobError::NoJobs { read, .. } if read == "the command line"), "{e}");
        assert!(matches!(JobSet::from_args(["--name=j", "/nonexistent/x.fio"]), Err(JobError::Read { .. })));
    }

    #[test]
    fn command_line_sections_and_global_name() {
        let set = JobSet::from_args(["--section=b", "--name=a", "--iodepth=9", "--name=global", "--bs=8k", "--name=b"])
            .unwrap();
        assert_eq!(set.jobs.len(), 1);
        assert_eq!((set.jobs[0].name.as_str(), set.jobs[0].iodepth, set.jobs[0].bs.read), ("b", 1, 8192));
    }

    #[test]
    fn offload_is_refused_where_fio_refuses_it_and_where_it_is_not_run() {
        for engine in ["io_uring", "io_uring_cmd"] {
            let e = err(&format!("[j]\nioengine={engine}\niodepth=4\nio_submit_mode=offload\n"));
            assert!(
                e.starts_with("job.fio:4: job 'j': io_submit_mode=offload: ioengine=")
                    && e.contains("can't be used with offloaded submit"),
                "{e}"
            );
        }
        let e = err("[j]\nrw=write\nio_submit_mode=offload\nlatency_target=1ms\n");
        assert!(e.contains("io_submit_mode=offload with latency_target is not run"), "{e}");
        assert!(e.starts_with("job.fio:4:") && e.contains("fio 3.33 runs no search"), "{e}");
        // These run (engine.rs's offload tests run each): the sync handed to a worker,
        // the workers serving the file the job picked, the backlog verified as it goes.
        for opt in
            ["fsync=4", "fdatasync=4", "verify=crc32c\nverify_backlog=8", "nrfiles=2", "filename=a:b", "zonemode=zbd"]
        {
            let j = one(&format!("[j]\nrw=write\nio_submit_mode=offload\n{opt}\n"));
            assert!(j.behaviour.offload, "{opt}");
        }
        for engine in ["psync", "libaio", "posixaio", "null", "mmap"] {
            let j = one(&format!("[j]\nioengine={engine}\niodepth=4\nio_submit_mode=offload\n"));
            assert!(j.behaviour.offload, "{engine}");
        }
    }

    #[test]
    fn error_at_points_at_the_option_or_the_section() {
        let j = one("[j]\nioengine=io_uring\nhipri\n");
        assert_eq!(j.error_at("hipri", "needs poll queues").to_string(), "job.fio:3: job 'j': needs poll queues");
        assert_eq!(j.error_at("iodepth", "too deep").to_string(), "job.fio:1: job 'j': too deep");
    }

    #[test]
    fn name_option_renames_the_job() {
        assert_eq!(one("[j]\nname=renamed\n").name, "renamed");
    }

    #[test]
    fn ioswitch_clat_stamp_is_batch_by_default_and_takes_each() {
        assert_eq!(JobSpec::new("d").behaviour.clat_stamp, ClatStamp::Batch);
        assert_eq!(one("[j]\nioswitch_clat_stamp=each\n").behaviour.clat_stamp, ClatStamp::Each);
        assert_eq!(one("[j]\nioswitch_clat_stamp=batch\n").behaviour.clat_stamp, ClatStamp::Batch);
        let e = err("[j]\nioswitch_clat_stamp=per-io\n");
        assert!(e.starts_with("job.fio:2: bad value 'per-io' for option 'ioswitch_clat_stamp'"), "{e}");
        assert!(e.contains("batch") && e.contains("each"), "{e}");
    }

    #[test]
    fn rates_take_fio_pairs_and_units() {
        use crate::load::{RateProcess, ThinkCount};
        assert_eq!(one("[j]\nrate=1m\n").load.rate, [1 << 20, 1 << 20], "one value: both directions");
        assert_eq!(one("[j]\nrate=1m,500k\n").load.rate, [1 << 20, 500 << 10]);
        assert_eq!(one("[j]\nrate=,500k\n").load.rate, [0, 500 << 10], "only writes");
        assert_eq!(one("[j]\nrate=500k,\n").load.rate, [500 << 10, 0], "only reads");
        assert_eq!(one("[j]\nrate_iops=100,50,\n").load.rate_iops, [100, 50]);
        let j = one("[j]\nrate_iops=10\nrate_process=poisson\n");
        assert_eq!(j.load.process, RateProcess::Poisson);
        assert_eq!(one("[j]\n").load, crate::load::Load::new(), "fio's defaults: no shaping");
        let t = one("[j]\nthinktime=250\nthinktime_spin=100\nthinktime_blocks=8\nthinktime_blocks_type=issue\n").load;
        assert_eq!(t.thinktime, Duration::from_micros(250), "a plain number is µs, as in fio");
        assert_eq!(t.thinktime_spin, Duration::from_micros(100));
        assert_eq!((t.thinktime_blocks, t.thinktime_count), (8, ThinkCount::Issue));
        assert_eq!(one("[j]\nthinktime=2ms\n").load.thinktime, Duration::from_millis(2));
        let io = one("[j]\nthinktime=1s\nthinktime_iotime=9\n").load;
        assert_eq!((io.thinktime_iotime, io.thinktime_blocks_given), (Duration::from_secs(9), false));
        assert!(t.thinktime_blocks_given);
        let m = one("[j]\nrate=1250\nratemin=1024\nratecycle=500\n").load;
        assert_eq!((m.rate_min, m.rate_cycle), ([1024, 1024], Duration::from_millis(500)));
        assert_eq!(one("[j]\nrate_iops_min=,5\n").load.rate_iops_min, [0, 5]);
        assert_eq!(one("[j]\n").load.rate_cycle, Duration::from_secs(1), "fio's default cycle");
        let l = one("[j]\nlatency_target=500000\nlatency_window=5s\nlatency_percentile=99.9\nlatency_run=1\n").load;
        assert_eq!(l.latency_target, Some(Duration::from_millis(500)), "µs without a unit");
        assert_eq!((l.latency_window, l.latency_percentile, l.latency_run), (Duration::from_secs(5), 99.9, true));
        // max_latency: µs without a unit; one value for all directions, r,w (trims as
        // writes), r,w,t; an empty field keeps what was set; 0 is no limit.
        let ms = 1_000_000;
        assert_eq!(one("[j]\nmax_latency=10ms\n").load.max_latency, [10 * ms; 3]);
        assert_eq!(one("[j]\nmax_latency=500\n").load.max_latency, [500_000; 3]);
        assert_eq!(one("[j]\nmax_latency=1ms,2ms\n").load.max_latency, [ms, 2 * ms, 2 * ms]);
        assert_eq!(one("[j]\nmax_latency=1ms,2ms,3ms\n").load.max_latency, [ms, 2 * ms, 3 * ms]);
        assert_eq!(one("[j]\nmax_latency=1ms\nmax_latency=,0\n").load.max_latency, [ms, 0, 0]);
        assert_eq!(one("[j]\n").load.max_latency, [0; 3], "no limit by default");
        for bad in ["fast", "1ms,2ms,3ms,4ms", "1ms,x"] {
            let e = err(&format!("[j]\nmax_latency={bad}\n"));
            assert!(e.starts_with(&format!("job.fio:2: bad value '{bad}' for option 'max_latency'")), "{e}");
        }
        let e = err("[j]\nlatency_percentile=101\n");
        assert!(e.starts_with("job.fio:2: bad value '101' for option 'latency_percentile'"), "{e}");
    }

    #[test]
    fn bad_shaping_values_name_the_option_and_line() {
        let e = err("[j]\nrate=fast\n");
        assert!(e.starts_with("job.fio:2: bad value 'fast' for option 'rate'"), "{e}");
        // A rate for trims is refused where the job trims (and changes nothing elsewhere).
        let e = err("[j]\nrw=trim\nrate=1m,1m,1m\n");
        assert!(e.contains("job.fio:3") && e.contains("rate with a third value, for trims, is not run"), "{e}");
        let e = err("[j]\n\nrate_process=bursty\n");
        assert!(
            e.starts_with("job.fio:3: bad value 'bursty' for option 'rate_process'") && e.contains("poisson"),
            "{e}"
        );
        let e = err("[j]\nthinktime_blocks=0\n");
        assert!(e.contains("option 'thinktime_blocks'"), "{e}");
        let e = err("[j]\nrate=1m\nrate_iops=100\n");
        assert!(e.contains("job.fio:3") && e.contains("mutually exclusive"), "{e}");
        let e = err("[j]\nthinktime=10\nthinktime_spin=20\n");
        assert!(e.contains("job.fio:3") && e.contains("longer than thinktime"), "{e}");
        // Options of this group that are not run are refused where they are written.
        let e = err("[j]\nrate=1m\nrate_min=2m\n");
        assert!(e.contains("job.fio:3") && e.contains("minimum rate exceeds the rate (reads)"), "{e}");
        let e = err("[j]\nratemin=1m\nrate_iops_min=1\n");
        assert!(e.contains("job.fio:3") && e.contains("mutually exclusive"), "{e}");
        assert!(one("[j]\nrate=1m\nthinktime=1ms\nrate_ignore_thinktime\n").load.rate_ignore_thinktime);
        assert_eq!(one("[j]\nwrite_lat_log\nlog_compression=1m\nlog_store_compressed=0\n").logs.compression, 1 << 20);
        assert!(one("[j]\nwrite_lat_log\nlog_store_compressed=1\n").logs.store_compressed);
        let e = err("[j]\nwrite_hist_log\nlog_store_compressed=1\n");
        assert!(e.contains("job.fio:3") && e.contains("memory addresses"), "{e}");
    }

    #[test]
    fn log_options_take_fio_values() {
        let j = one("[j]\nwrite_lat_log\nwrite_bw_log=bw\nwrite_iops_log=io\nlog_avg_msec=100\nlog_max_value=1\nlog_offset=1\nper_job_logs=0\n");
        let want = crate::iolog::LogOpts {
            lat: Some(String::new()),
            bw: Some("bw".into()),
            iops: Some("io".into()),
            avg_msec: 100,
            bw_avg_msec: None,
            iops_avg_msec: None,
            max_value: true,
            offset: true,
            per_job: false,
            hist: None,
            hist_msec: 0,
            hist_coarseness: 0,
            prio: false,
            compression: 0,
            store_compressed: false,
            ioprio: 0,
        };
        assert_eq!(j.logs, want);
        assert_eq!(one("[j]\n").logs, crate::iolog::LogOpts::default());
        let h = one("[j]\nwrite_hist_log=h\nlog_hist_msec=500\nlog_hist_coarseness=4\n").logs;
        assert_eq!((h.hist.as_deref(), h.hist_msec, h.hist_coarseness), (Some("h"), 500, 4));
        let e = err("[j]\nlog_hist_coarseness=7\n");
        assert!(e.starts_with("job.fio:2: bad value '7' for option 'log_hist_coarseness'"), "{e}");
        let e = err("[j]\nwrite_hist_log\nclat_percentiles=0\n");
        assert!(e.contains("job.fio:3") && e.contains("clat_percentiles=0"), "{e}");
        assert!(crate::iolog::LogOpts::default().per_job, "per_job_logs defaults to on");
        let e = err("[j]\nlog_avg_msec=often\n");
        assert!(e.starts_with("job.fio:2: bad value 'often' for option 'log_avg_msec'"), "{e}");
    }

    #[test]
    fn a_third_rate_for_trims_changes_nothing_without_trims_and_is_refused_with_them() {
        let j = one("[j]\nrw=randrw\nrate=300,400,300\nrate_iops=,,5\n");
        assert_eq!((j.load.rate, j.load.rate_iops), ([300, 400], [0, 0]));
        let e = err("[j]\nrw=randtrim\nrate_iops=10,10,10\n");
        assert!(e.starts_with("job.fio:3: job 'j': rate_iops with a third value, for trims, is not run"), "{e}");
        assert_eq!(one("[j]\nrw=trim\nrate=1m,2m,0\n").load.rate, [1 << 20, 2 << 20]);
    }

    #[test]
    fn exit_what_takes_fios_three_values() {
        assert_eq!(one("[j]\nexitall\n").behaviour.exit_what, ExitWhat::Group);
        for (v, w) in [("group", ExitWhat::Group), ("stonewall", ExitWhat::Stonewall), ("all", ExitWhat::All)] {
            assert_eq!(one(&format!("[j]\nexitall\nexit_what={v}\n")).behaviour.exit_what, w);
        }
        let e = err("[j]\nexit_what=some\n");
        assert!(
            e.starts_with("job.fio:2: bad value 'some' for option 'exit_what'")
                && e.contains("group, stonewall or all"),
            "{e}"
        );
    }

    #[test]
    fn trim_jobs_take_every_log() {
        let j = one("[j]\nrw=trimwrite\nwrite_lat_log=t\nwrite_bw_log\nwrite_iops_log=t\nwrite_hist_log=t\n");
        assert_eq!((j.rw, j.logs.lat.as_deref(), j.logs.hist.as_deref()), (Rw::TrimWrite, Some("t"), Some("t")));
    }

    #[test]
    fn workload_shapes_are_read_per_direction_with_fios_spellings() {
        use crate::dist::{Dist, Zone};
        use crate::shapes::{BlockSizes, RwSequencer};
        let j = one("[j]\nrw=randrw\nbssplit=4k/50:8k/50,16k/100\nrandom_distribution=zipf:1.2\n");
        assert_eq!(j.shapes.bs[0], BlockSizes::Split(vec![(4096, 50), (8192, 50)]));
        assert_eq!(j.shapes.bs[1], BlockSizes::Split(vec![(16384, 100)]));
        assert_eq!(j.shapes.dist, [Dist::Zipf { theta: 1.2, center: None }, Dist::Zipf { theta: 1.2, center: None }]);
        let j = one("[j]\nbsrange=1k-4k,8k-64k\nbs_unaligned\nrandom_distribution=zoned:50/10:50/90,100/100\n");
        assert_eq!(
            j.shapes.bs,
            [BlockSizes::Range { min: 1024, max: 4096 }, BlockSizes::Range { min: 8192, max: 65536 }]
        );
        assert!(j.shapes.bs_unaligned);
        assert_eq!(j.shapes.dist[0], Dist::Zoned(vec![Zone { access: 50, size: 10 }, Zone { access: 50, size: 90 }]));
        assert_eq!(j.shapes.dist[1], Dist::Zoned(vec![Zone { access: 100, size: 100 }]));
        let j = one("[j]\nrw=write:4k\n");
        assert_eq!((j.rw, j.shapes.rw_modifier), (Rw::Write, Some(4096)));
        let j = one("[j]\nrw=randread:8\nrw_sequencer=identical\noffset_increment=1m\nfdatasync=16\n");
        assert_eq!(
            (j.rw, j.shapes.rw_modifier, j.shapes.rw_sequencer),
            (Rw::RandRead, Some(8), RwSequencer::Identical)
        );
        assert_eq!((j.shapes.offset_increment, j.shapes.fdatasync), (1 << 20, 16));
    }

    #[test]
    fn bad_workload_shapes_name_the_option_the_file_and_the_line() {
        let e = err("[j]\nbs=4k\nbssplit=4k/70:8k/70\n");
        assert!(
            e.starts_with("job.fio:3: bad value '4k/70:8k/70' for option 'bssplit'") && e.contains("add up to 140"),
            "{e}"
        );
        let e = err("[j]\nrandom_distribution=pareto:2\n");
        assert!(
            e.starts_with("job.fio:2:") && e.contains("'random_distribution'") && e.contains("between 0 and 1"),
            "{e}"
        );
        let e = err("[j]\nrandom_distribution=zoned:60/10:30/90\n");
        assert!(e.contains("add up to 90"), "{e}");
        assert_eq!(one("[j]\nrw=read:-8k\n").shapes.rw_modifier, Some(-8192));
        let e = err("[j]\nrw=randread:-8\n");
        assert!(e.starts_with("job.fio:2: job 'j': rw=randread: a random pattern takes a positive count"), "{e}");
        let e = err("[j]\nrw=read:x\n");
        assert!(e.starts_with("job.fio:2: bad value 'read:x' for option 'rw'"), "{e}");
        assert_eq!(one("[j]\nblockalign=4k\n").shapes.blockalign, [Some(4096), Some(4096)]);
        let j = one("[j]\nfilesize=1m-4m\nnrfiles=1\nopenfiles=1\nfile_service_type=random:8\n");
        assert_eq!((j.filesize, j.shapes.filesize_high), (Some(1 << 20), Some(4 << 20)));
        assert_eq!(one("[j]\nfilesize=2m\n").shapes.filesize_high, None);
        assert!(err("[j]\nfilesize=4m-1m\n").contains("a range such as 1m-4m"));
        assert!(err("[j]\nfile_service_type=random:x\n").contains("roundrobin"));
        assert!(err("[j]\nba=0\n").contains("an alignment"));
        let e = err("[j]\nrw_sequencer=reverse\n");
        assert!(e.contains("sequential or identical"), "{e}");
        let e = err("[j]\nrw=randwrite\nverify=md5\nbssplit=4k/50:8k/50\n");
        assert!(e.starts_with("job.fio:4: job 'j': bssplit for writes with verify=md5 is not run"), "{e}");
        // Writes off the multiples of bs with verify: refused (they were read back as blocks
        // never written, a false bad block); on them, read.
        let e = err("[j]\nrw=write:8k\nbs=3k\nverify=crc32c\n");
        assert!(e.contains("job 'j': a hole of 8192 bytes (rw=…:8192) with verify=crc32c is not run"), "{e}");
        assert!(e.contains("multiples of bs (3072)"), "{e}");
        let e = err("[j]\nrw=randwrite\nbs=8k\nblockalign=4k\nverify=md5\n");
        assert!(e.contains("job 'j': blockalign=4096 for writes with verify=md5 is not run"), "{e}");
        for ok in [
            "[j]\nrw=write:8k\nbs=4k\nverify=crc32c\n",
            "[j]\nrw=write:-8k\nbs=4k\nverify=crc32c\n",
            "[j]\nrw=randwrite:3\nbs=3k\nverify=crc32c\n",
            "[j]\nrw=read:8k\nbs=3k\nverify=crc32c\n",
            "[j]\nrw=randwrite\nbs=4k\nblockalign=8k\nverify=md5\n",
            "[j]\nrw=write:8k\nbs=3k\n",
        ] {
            one(ok);
        }
    }

    #[test]
    fn verify_variants_and_their_options_are_read() {
        for (v, kind) in [("crc64", Verify::Crc64), ("xxhash", Verify::Xxhash), ("sha256", Verify::Sha256)] {
            assert_eq!(one(&format!("[j]\nverify={v}\n")).verify, kind);
        }
        let j = one("[j]\nverify=pattern\nverify_pattern=0xdead\nverify_backlog=64\nverify_backlog_batch=8\n");
        assert_eq!((j.verify, j.shapes.verify_pattern.as_deref()), (Verify::Pattern, Some(&[0xde, 0xad][..])));
        assert_eq!((j.shapes.verify_backlog, j.shapes.verify_backlog_batch), (64, 8));
        // fio: a pattern alone means verify=pattern; with a method, the method stays.
        assert_eq!(one("[j]\nverify_pattern=\"ab\"\n").verify, Verify::Pattern);
        assert_eq!(one("[j]\nverify=md5\nverify_pattern=1\n").verify, Verify::Md5);
        let e = err("[j]\nverify=pattern\n");
        assert!(e.starts_with("job.fio:2: job 'j': verify=pattern needs a verify_pattern"), "{e}");
        assert!(one("[j]\nverify=crc32c\nverify_dump=1\n").behaviour.verify_dump);
        assert!(!one("[j]\nverify=crc32c\n").behaviour.verify_dump, "fio's default is off");
        assert!(err("[j]\nverify_dump=2\n").contains("option 'verify_dump'"));
        let j = one("[j]\nbs=64k\nverify=meta\nverify_pattern=0xaa555aa5\nverify_interval=512\n");
        assert_eq!(j.shapes.verify_interval, 512);
        assert_eq!(one("[j]\nverify=md5\nverify_interval=1k\n").shapes.verify_interval, 1024);
        let e = err("[j]\nverify=md5\nverify_interval=0\n");
        assert!(
            e.starts_with("job.fio:3: bad value '0' for option 'verify_interval'") && e.contains("at least 80"),
            "{e}"
        );
        one("[j]\nverify=md5\nverify_interval=80\n");
        assert!(err("[j]\nverify_interval=x\n").contains("option 'verify_interval'"));
        let j = one("[j]\nsize=100m\ndedupe_mode=working_set\ndedupe_global=1\ndedupe_percentage=50\nbuffer_compress_percentage=50\ndedupe_working_set_percentage=50\nbuffer_compress_chunk=1k\n");
        let b = &j.shapes.buffers;
        assert_eq!(
            (b.dedupe_mode, b.global, b.dedupe_percentage, b.compress_percentage),
            (crate::dedupe::DedupeMode::WorkingSet, true, 50, 50)
        );
        assert_eq!((b.working_set_percentage, b.compress_chunk), (50, 1024));
        let d = one("[j]\n").shapes.buffers;
        assert_eq!(
            (d.dedupe_mode, d.working_set_percentage, d.compress_chunk, d.active()),
            (crate::dedupe::DedupeMode::Repeat, 5, 512, false)
        );
        assert!(err("[j]\ndedupe_mode=sometimes\n").contains("expected repeat or working_set"));
        assert!(err("[j]\ndedupe_percentage=101\n").contains("option 'dedupe_percentage'"));
        let e = err("[j]\ndedupe_mode=working_set\ndedupe_percentage=50\n");
        assert!(e.contains("working set requires size to be set"), "{e}");
        let e = err("[j]\nsize=1m\ndedupe_mode=working_set\ndedupe_percentage=60\ndedupe_working_set_percentage=50\n");
        assert!(e.starts_with("job.fio:5: job 'j': impossible to reach expected dedupe percentage 60"), "{e}");
        let j = one("[j]\nbuffer_pattern=0x01\"ab\"258\n");
        assert_eq!(j.shapes.buffer_pattern.as_deref(), Some(&[0x01, b'a', b'b', 0x02, 0x01][..]));
        assert_eq!(j.verify, Verify::None, "buffer_pattern is no verify_pattern");
        let e = err("[j]\nbuffer_pattern=%o\n");
        assert!(e.starts_with("job.fio:2: bad value '%o' for option 'buffer_pattern'") && e.contains("not run"), "{e}");
        assert!(err("[j]\nbuffer_pattern=0x\n").contains("hex digits after 0x"));
        let e = err("[j]\nverify_pattern=%o\n");
        assert!(e.starts_with("job.fio:2: bad value '%o' for option 'verify_pattern'") && e.contains("not run"), "{e}");
    }

    #[test]
    fn zonemode_and_max_open_zones_are_read_and_misfits_refused() {
        assert!(!one("[j]\nrw=randread\nzonemode=zbd\n").shapes.read_beyond_wp, "off by default, as fio");
        assert!(one("[j]\nrw=randread\nzonemode=zbd\nread_beyond_wp=1\n").shapes.read_beyond_wp);
        assert!(one("[j]\nrw=randread\nzonemode=zbd\nread_beyond_wp\n").shapes.read_beyond_wp);
        let j = one("[j]\nrw=randwrite\nzonemode=zbd\nmax_open_zones=4\n");
        assert!(j.shapes.zbd);
        assert_eq!(j.shapes.max_open_zones, 4);
        assert!(!one("[j]\nzonemode=none\n").shapes.zbd);
        assert!(err("[j]\nzonemode=strided\n").contains("zonemode=strided needs zonesize"));
        let e = err("[j]\nzonemode=zbd\nrw=randrw\n");
        assert!(e.starts_with("job.fio:2: job 'j': zonemode=zbd with rw=randrw is not run"), "{e}");
        let e = err("[j]\nzonemode=zbd\nrw=write\nbssplit=4k/50:8k/50\n");
        assert!(e.contains("zonemode=zbd with bssplit"), "{e}");
        assert_eq!(one("[j]\nzonemode=zbd\nzonesize=256m\n").shapes.zone_size, Some(256 << 20));
        let e = err("[j]\nzonesize=256m\n");
        assert!(e.starts_with("job.fio:2: job 'j': zonesize without zonemode=zbd"), "{e}");
        let j = one("[j]\nzonemode=zbd\nrw=randwrite\nnumjobs=16\nmax_open_zones=4\njob_max_open_zones=2\n");
        assert_eq!(
            (j.numjobs, j.shapes.max_open_zones, j.shapes.job_max_open_zones),
            (16, 4, 2),
            "clones share the zones"
        );
        let e = err("[j]\nzonemode=zbd\nrw=randwrite\nnumjobs=16\nverify=crc32c\n");
        assert!(e.starts_with("job.fio:4: job 'j': zonemode=zbd writes with verify and numjobs>1 are not run"), "{e}");
        // fio's garbage-collection simulation: two numbers from 0 to 1.
        let j = one("[j]\nzonemode=zbd\nrw=write\nzone_reset_threshold=0.6\nzone_reset_frequency=.25\n");
        assert_eq!((j.shapes.zone_reset_threshold, j.shapes.zone_reset_frequency), (0.6, 0.25));
        for bad in ["zone_reset_threshold=1.5", "zone_reset_frequency=-0.1", "zone_reset_frequency=often"] {
            let e = err(&format!("[j]\nzonemode=zbd\nrw=write\n{bad}\n"));
            let name = bad.split('=').next().unwrap();
            assert!(e.contains(name) && e.contains("a number from 0 to 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn numa_and_io_priority_options_take_fios_values() {
        let node0 = crate::placement::online_nodes()[0];
        let j = one(&format!("[j]\nnuma_cpu_nodes={node0}\nnuma_mem_policy=bind:{node0}\nprioclass=3\nprio=7\n"));
        let p = &j.behaviour.placement;
        assert_eq!(p.cpu_nodes, Some(vec![node0]));
        assert_eq!(p.mem_policy, Some(crate::placement::MemPolicy::Bind(vec![node0])));
        assert_eq!((p.prioclass, p.prio, p.ioprio()), (Some(3), Some(7), Some(3 << 13 | 7)));
        assert_eq!(j.logs.ioprio, 3 << 13 | 7, "the logs' priority column");
        assert_eq!(one("[j]\n").logs.ioprio, 0);
        assert_eq!(
            one("[j]\nnuma_mem_policy=local\n").behaviour.placement.mem_policy,
            Some(crate::placement::MemPolicy::Local)
        );
        let e = err("[j]\nnuma_cpu_nodes=65000\n");
        assert!(
            e.starts_with("job.fio:2: bad value '65000' for option 'numa_cpu_nodes'")
                && e.contains("node 65000 does not exist"),
            "{e}"
        );
        let e = err("[j]\nnuma_mem_policy=prefer:0-1\n");
        assert!(e.contains("option 'numa_mem_policy'"), "{e}");
        assert!(err("[j]\nprioclass=4\n").contains("for option 'prioclass'"));
        assert!(err("[j]\nprio=8\n").contains("for option 'prio'"));
    }

    #[test]
    fn group_reporting_over_different_io_priorities_runs() {
        // fio reports such a group's latencies per priority ("prios", crate::report).
        assert!(read("[global]\ngroup_reporting\n[a]\nprioclass=3\n[b]\nprioclass=2\n").is_ok());
    }

    #[test]
    fn cmdprio_options_take_fios_values_on_libaio_and_io_uring_only() {
        use crate::cmdprio::SplitPrio;
        let j = one("[j]\nioengine=libaio\nrw=randrw\ncmdprio_percentage=20,40\ncmdprio_class=3\ncmdprio=2,5\n");
        let c = &j.behaviour.cmdprio;
        assert_eq!((c.opts.percentage, c.opts.class, c.opts.level), ([20, 40], [3, 3], [2, 5]));
        assert_eq!(c.chooser.as_ref().unwrap().values, [vec![0, 3 << 13 | 2], vec![0, 3 << 13 | 5]]);
        // The job's own priority is index 0; a read-only job keeps no write priorities.
        let j = one("[j]\nioengine=io_uring\nrw=randread\nprioclass=2\nprio=4\ncmdprio_percentage=10\n");
        assert_eq!(j.behaviour.cmdprio.chooser.as_ref().unwrap().values, [vec![2 << 13 | 4, 1 << 13], vec![]]);
        let j = one("[j]\nioengine=io_uring\nrw=randread\ncmdprio_bssplit=4k/10/3/1:64k/50\n");
        assert_eq!(
            j.behaviour.cmdprio.opts.bssplit.as_ref().unwrap()[0],
            vec![
                SplitPrio { bs: 4096, perc: 10, prio: Some(3 << 13 | 1) },
                SplitPrio { bs: 65536, perc: 50, prio: None }
            ]
        );
        assert!(one("[j]\nioengine=libaio\n").behaviour.cmdprio.chooser.is_none());
        let e = err("[j]\nioengine=psync\ncmdprio_percentage=10\n");
        assert!(e.contains("option 'cmdprio_percentage' belongs to ioengine libaio or io_uring"), "{e}");
        let e = err("[j]\nioengine=libaio\ncmdprio_percentage=10\ncmdprio_bssplit=4k/10\n");
        assert!(e.contains("mutually exclusive"), "{e}");
        assert!(err("[j]\nioengine=libaio\ncmdprio_percentage=101\n").contains("for option 'cmdprio_percentage'"));
        assert!(err("[j]\nioengine=libaio\ncmdprio_class=0\n").contains("for option 'cmdprio_class'"));
        assert!(err("[j]\nioengine=libaio\ncmdprio=8\n").contains("for option 'cmdprio'"));
        let e = err("[j]\nioengine=libaio\ncmdprio_bssplit=4k/60:4k/60\n");
        assert!(e.contains("for option 'cmdprio_bssplit'") && e.contains("more than 100"), "{e}");
        let e = err("[j]\nioengine=libaio\nrw=write\nverify=crc32c\ncmdprio_percentage=10\n");
        assert!(e.contains("with verify is not run"), "{e}");
        let e = err("[j]\nioengine=libaio\nio_submit_mode=offload\ncmdprio_percentage=10\n");
        assert!(e.contains("with io_submit_mode=offload is not run"), "{e}");
    }

    #[test]
    fn sync_runs_on_the_engines_that_write_through_the_opened_file() {
        assert_eq!(one("[j]\nioengine=libpmem\nsync=1\n").behaviour.sync.as_deref(), Some("1"));
        assert_eq!(one("[j]\nioengine=libpmem\nsync=dsync\n").behaviour.sync.as_deref(), Some("dsync"));
        assert_eq!(one("[j]\nsync=none\n").behaviour.sync, None);
        assert_eq!(one("[j]\nsync=0\n").behaviour.sync, None);
        // Kept as written, on every engine fio opens the file with the flag for.
        for engine in ["psync", "sync", "pvsync", "pvsync2", "libaio", "io_uring", "posixaio"] {
            for value in ["1", "sync", "dsync"] {
                let j = one(&format!("[j]\nioengine={engine}\nsync={value}\n"));
                assert_eq!(j.behaviour.sync.as_deref(), Some(value), "{engine}");
                assert_eq!(sync_writes(j.ioengine), SyncWrites::OpenFlag, "{engine}");
            }
        }
        assert_eq!(sync_writes(IoEngine::DevDax), SyncWrites::Durable);
        // The refusal names the value as written, its flag, the engine and why.
        let e = err("[j]\nioengine=mmap\nsync=dsync\n");
        assert!(e.starts_with("job.fio:3: job 'j': sync=dsync (O_DSYNC writes) is not run with ioengine=mmap: its writes are stores to a mapping"), "{e}");
        let e = err("[j]\nioengine=null\nsync=1\n");
        assert!(
            e.starts_with("job.fio:3: job 'j': sync=1 (O_SYNC writes) is not run with ioengine=null: it does no I/O"),
            "{e}"
        );
        let e = err("[j]\nioengine=io_uring_cmd\nsync=sync\n");
        assert!(e.contains("sync=sync (O_SYNC writes) is not run with ioengine=io_uring_cmd: NVMe passthrough"), "{e}");
        let e = err("[j]\nioengine=xnvme\nsync=1\n");
        assert!(
            e.contains("is not run with ioengine=xnvme: fio's xnvme engine opens its devices with direct only"),
            "{e}"
        );
        let e = err("[j]\nioengine=ioswitch\nsync=dsync\n");
        assert!(
            e.contains("is not run with ioengine=ioswitch: give the open flag in ioswitch_opts instead (osync=sync"),
            "{e}"
        );
        assert!(err("[j]\nsync=2\n").contains("bad value '2' for option 'sync'"));
    }

    #[test]
    fn steady_state_options_are_read_as_fio_reads_them() {
        let j = one("[j]\nss=bw_slope:1%\nss_dur=10s\nss_ramp=5s\n");
        let c = j.steady.crit;
        assert_eq!((c.iops, c.slope, c.pct, c.limit), (false, true, true, 1.0));
        assert_eq!((j.steady.dur, j.steady.ramp), (10, Duration::from_secs(5)));
        assert!(j.steady.on());
        let j = one("[j]\nsteadystate=iops:500\nsteadystate_duration=1500ms\n");
        assert_eq!((j.steady.crit.iops, j.steady.crit.pct, j.steady.crit.limit, j.steady.dur), (true, false, 500.0, 1));
        assert!(!one("[j]\nss=iops:10%\n").steady.on(), "off without ss_dur, as fio");
        let d = one("[j]\nss_dur=30\n").steady;
        assert_eq!((d.dur, d.crit.iops, d.crit.slope, d.crit.limit), (30, true, true, 0.01), "fio's default criterion");
        let e = err("[a]\nss=iops:10%\nss_dur=10\n[b]\nss=iops:20%\nss_dur=10\n");
        assert!(
            e.starts_with(
                "job.fio:6: job 'b': steady-state options (ss, ss_dur, ss_ramp) differ from those of job 'a'"
            ),
            "{e}"
        );
        let e = err("[a]\nss_dur=10\n[b]\n");
        assert!(e.contains("job 'b'") && e.contains("differ from those of job 'a'"), "{e}");
        let set = read("[a]\nss=iops:10%\nss_dur=10\n[b]\nnew_group\nss=bw:1m\nss_dur=5\n[c]\nstonewall\n").unwrap();
        assert_eq!(set.jobs.len(), 3, "each group consistent");
        let e = err("[j]\nss=lat:5%\n");
        assert!(e.starts_with("job.fio:2: ") && e.contains("'lat' is not a criterion"), "{e}");
    }

    #[test]
    fn strided_zones_are_read_and_misfits_refused() {
        let j = one("[j]\nzonemode=strided\nzonesize=256m\nzoneskip=2g\n");
        let sh = &j.shapes;
        assert!(sh.strided && !sh.zbd);
        assert_eq!((sh.zone_size, sh.zone_range, sh.zone_skip), (Some(256 << 20), None, 2 << 30));
        assert_eq!(one("[j]\nzonemode=strided\nzonesize=1m\nzonerange=4m\n").shapes.zone_range, Some(4 << 20));
        for (text, why) in [
            ("[j]\nzoneskip=1m\n", "job.fio:2: job 'j': zoneskip without zonemode=strided"),
            ("[j]\nzonemode=zbd\nzonerange=1m\n", "job.fio:3: job 'j': zonerange without zonemode=strided"),
            ("[j]\nzonemode=strided\nzonesize=1m\nrw=trim\n", "job.fio:2: job 'j': zonemode=strided with trims"),
            (
                "[j]\nzonemode=strided\nzonesize=1m\nverify=crc32c\nrw=write\n",
                "job.fio:2: job 'j': zonemode=strided with verify",
            ),
            (
                "[j]\nzonemode=strided\nzonesize=1m\nfilename=a:b\n",
                "job.fio:2: job 'j': zonemode=strided with several files",
            ),
            (
                "[j]\nzonemode=strided\nzonesize=1m\nbssplit=4k/50:8k/50\n",
                "job.fio:2: job 'j': zonemode=strided with bssplit",
            ),
            ("[j]\nzonemode=strided\nzonesize=1m\nzoneskip=2z\n", "job.fio:4: bad value '2z' for option 'zoneskip'"),
        ] {
            let e = err(text);
            assert!(e.starts_with(why), "{text}: {e}");
        }
    }
}
