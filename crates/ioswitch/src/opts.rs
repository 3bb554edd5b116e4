//! Options: which interfaces serve a device, open flags, and interface tunables.
//!
//! Build [`Opts`] as a struct or parse it from a string of comma-separated `key=value`
//! items: `"async=io_uring,direct=1,sqpoll=1"`. A boolean may be given as a bare key
//! (`direct`), or as `1/0`, `true/false`, `yes/no`, `on/off`. Unknown keys, bad values and
//! repeated keys are errors that name the key.

use crate::error::Error;
use crate::units::parse_size;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// An enum of the values one option takes (`key=value`), with its name in option strings:
/// `ALL`, `as_str`, `Display`, and `FromStr` whose error names the key, says that `what`
/// is unknown and lists what is `known` (by default every name).
macro_rules! named_enum {
    (@known [$($s:literal),*]) => { [$($s),*].join(", ") };
    (@known [$($s:literal),*] $known:literal) => { $known };
    (
        $(#[$m:meta])* $name:ident, key: $key:literal, what: $what:literal, $(known: $known:literal,)?
        { $($(#[$vm:meta])* $var:ident = $s:literal),* $(,)? }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $var),* }

        impl $name {
            /// Every value, in the order they are documented.
            pub const ALL: &'static [$name] = &[$($name::$var),*];
            /// The name used in option strings.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$var => $s),* }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                match s {
                    $($s => Ok($name::$var),)*
                    _ => {
                        let known = named_enum!(@known [$($s),*] $($known)?);
                        Err(Error::BadOpt { key: $key.into(), why: format!("unknown {} {s:?}; known: {known}", $what) })
                    }
                }
            }
        }
    };
}

named_enum!(
    /// Synchronous interfaces.
    SyncIface, key: "sync", what: "sync interface", {
        /// pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching.
        Psync = "psync",
        /// psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, sizes).
        Block = "block",
        /// Memory of a ramdisk.
        Ramdisk = "ramdisk",
        /// NVMe ioctl passthrough.
        Nvme = "nvme",
        /// The user-space NVMe driver over vfio-pci (a PCI address).
        Vfio = "vfio",
        /// Completes every command at once and moves no data (the sync twin of async nil).
        Nil = "nil",
        /// A shared memory mapping of the file or block device: reads and writes are
        /// memory copies, flush is msync.
        Mmap = "mmap",
        /// Persistent memory (a DAX file mapped with MAP_SYNC, or devdax): durable
        /// stores, flush is a fence.
        Pmem = "pmem",
    }
);

named_enum!(
    /// Asynchronous interfaces.
    AsyncIface, key: "async", what: "async interface", {
        /// Completes every command at once and moves no data: measures library overhead.
        Nil = "nil",
        /// Async API over the sync interface, executed when the queue is poked.
        Emu = "emu",
        /// A pool of worker threads running the sync interface.
        Thrpool = "thrpool",
        /// Linux AIO (io_setup/io_submit/io_getevents).
        Libaio = "libaio",
        /// io_uring read/write/readv/writev/fsync.
        IoUring = "io_uring",
        /// io_uring NVMe passthrough (IORING_OP_URING_CMD) on /dev/ngXnY.
        IoUringCmd = "io_uring_cmd",
        /// POSIX aio (aio_read/aio_write/aio_fsync).
        Posix = "posix",
        /// The user-space NVMe driver over vfio-pci: a polled queue pair per queue.
        Vfio = "vfio",
    }
);

named_enum!(
    /// Admin interfaces (identify, logs, features).
    AdminIface, key: "admin", what: "admin interface", {
        /// Identify data emulated from stat, sysfs and block ioctls.
        Emulated = "emulated",
        /// NVMe admin ioctl passthrough.
        Nvme = "nvme",
        /// The admin queue of the user-space NVMe driver.
        Vfio = "vfio",
    }
);

named_enum!(
    /// Memory interfaces (how buffers are allocated).
    MemIface, key: "mem", what: "mem interface", {
        /// Aligned heap memory.
        Posix = "posix",
        /// Hugepages mapped into a PCI device's IOMMU (DMA memory of the vfio driver).
        Vfio = "vfio",
    }
);

named_enum!(
    /// The system calls `sync=psync` moves data with (fio's engines `psync`, `sync`,
    /// `pvsync`, `pvsync2`).
    #[derive(Default)]
    PsyncCall, key: "psync_call", what: "call", {
        /// pread(2)/pwrite(2) (preadv/pwritev for several buffers): fio's `psync`.
        #[default]
        Pread = "pread",
        /// lseek(2) (only when the offset is not where the last transfer ended) then
        /// read(2)/write(2) (readv/writev for several buffers): fio's `sync`.
        Read = "read",
        /// preadv(2)/pwritev(2), also for one buffer: fio's `pvsync`.
        Preadv = "preadv",
        /// preadv2(2)/pwritev2(2), with `RWF_HIPRI` when `rwf_hipri` is set: fio's `pvsync2`.
        Preadv2 = "preadv2",
    }
);

named_enum!(
    /// How the user-space NVMe driver (`vfio`) gives the controller DMA access to its
    /// memory (`dma=`).
    #[derive(Default)]
    DmaMode, key: "dma", what: "DMA mode",
    known: "vfio (through the IOMMU), uio (physical addresses, no IOMMU)", {
        /// The controller is bound to vfio-pci; its DMA goes through the IOMMU, which lets
        /// it reach only the device's own hugepage pool.
        #[default]
        Vfio = "vfio",
        /// The controller is bound to uio_pci_generic (no IOMMU): the driver hands it
        /// physical addresses of pinned hugepages (from `/proc/self/pagemap`, which needs
        /// CAP_SYS_ADMIN). No isolation: the device can write to any memory. For testing
        /// and benchmarking only.
        Uio = "uio",
    }
);

impl DmaMode {
    /// The kernel driver the controller must be bound to.
    pub fn kernel_driver(self) -> &'static str {
        use crate::dev::PciDriver;
        match self {
            DmaMode::Vfio => PciDriver::Vfio,
            DmaMode::Uio => PciDriver::Uio,
        }
        .kernel_name()
    }
}

named_enum!(
    /// Synchronous writes asked for at open (`osync=`): the flag added to the open of a
    /// file or block device (fio's `sync=1`/`sync=dsync`). Refused at open where no file
    /// is opened for the I/O (NVMe char devices, devdax, ramdisks, PCI addresses) and with
    /// interfaces whose I/O does not go through the opened file's writes (`nil`, `mmap`,
    /// `pmem`, `nvme`, `io_uring_cmd`, `vfio`).
    OpenSync, key: "osync", what: "osync value", {
        /// O_SYNC: each write returns once its data and the metadata to read it back are
        /// on stable storage (fio's `sync=1`).
        Sync = "sync",
        /// O_DSYNC: each write returns once its data (and only the metadata needed to
        /// retrieve it) are on stable storage (fio's `sync=dsync`).
        Dsync = "dsync",
    }
);

impl OpenSync {
    /// The open(2) flag.
    pub fn flag(self) -> libc::c_int {
        match self {
            OpenSync::Sync => libc::O_SYNC,
            OpenSync::Dsync => libc::O_DSYNC,
        }
    }
    /// The flag's name, for messages.
    pub fn flag_name(self) -> &'static str {
        match self {
            OpenSync::Sync => "O_SYNC",
            OpenSync::Dsync => "O_DSYNC",
        }
    }
}

/// Options for [`Device::open`](crate::Device::open).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Opts {
    /// Synchronous interface; `None` picks the default for the device kind.
    pub sync: Option<SyncIface>,
    /// Asynchronous interface; `None` picks the default for the device kind.
    pub r#async: Option<AsyncIface>,
    /// Admin interface; `None` picks the default for the device kind.
    pub admin: Option<AdminIface>,
    /// Memory interface; `None` picks the default.
    pub mem: Option<MemIface>,
    /// Namespace id; `None` takes the device's own (1 for non-NVMe devices).
    pub nsid: Option<u32>,
    /// Open with O_DIRECT (bypass the page cache).
    pub direct: bool,
    /// Open a file or block device with O_SYNC or O_DSYNC ([`OpenSync`]); `None`: neither.
    pub osync: Option<OpenSync>,
    /// Open read-only, and refuse every command that may change data: writes, write
    /// zeroes, trims, deallocation, zone management, NVMe passthrough and admin commands
    /// that write (the kernel would let root's passthrough write through a read-only
    /// descriptor).
    pub rdonly: bool,
    /// Open write-only.
    pub wronly: bool,
    /// Create a regular file when it does not exist.
    pub create: bool,
    /// Truncate a regular file at open (then `size` sets its size).
    pub truncate: bool,
    /// Size in bytes a regular file is extended to at open (with `create`, the size of
    /// the new file); never shrinks a file.
    pub size: Option<u64>,
    /// io_uring: a kernel thread polls the submission queue (IORING_SETUP_SQPOLL).
    pub sqpoll: bool,
    /// io_uring: the CPU the SQPOLL thread is pinned to.
    pub sqpoll_cpu: Option<u32>,
    /// io_uring: completions are polled, not interrupt driven (IORING_SETUP_IOPOLL).
    pub iopoll: bool,
    /// io_uring: the file descriptor is registered with the ring.
    pub register_files: bool,
    /// io_uring: buffers are registered and fixed read/write opcodes are used.
    pub register_buffers: bool,
    /// io_uring: only the thread that creates a queue ever uses it, so the ring may defer
    /// completion work until that thread waits (IORING_SETUP_SINGLE_ISSUER and
    /// DEFER_TASKRUN, as fio sets up its rings). A queue moved to another thread then
    /// fails with an error.
    pub single_issuer: bool,
    /// io_uring: before waiting in the kernel for a completion, look at the CQ ring for up
    /// to this many nanoseconds (`reap_spin=20us`): a completion posted meanwhile is taken
    /// without entering the kernel, at the price of a busy CPU while it spins. `None` (or
    /// `reap_spin=0`): wait in the kernel at once.
    pub reap_spin_ns: Option<u64>,
    /// Worker threads of the `thrpool` interface (default 4).
    pub threads: Option<u32>,
    /// psync: the system calls that move data (`None`: pread/pwrite).
    pub psync_call: Option<PsyncCall>,
    /// psync with `psync_call=preadv2`: `RWF_HIPRI` on every read and write (polled
    /// completion where the device has poll queues; fio's `hipri` of `pvsync2`).
    pub rwf_hipri: bool,
    /// Lift the mounted-device write guard (fio's name): allow commands that may write to
    /// a block device or NVMe namespace that is mounted, swapped on or held by another
    /// kernel user (device-mapper, md). Without it such commands are refused and reads
    /// stay allowed.
    pub allow_mounted_write: bool,
    /// pmem: run on memory that is not DAX (a /dev/shm file) with the same instructions,
    /// as libpmem's PMEM_IS_PMEM_FORCE; for measurements, nothing is made durable.
    pub pmem_force: bool,
    /// pmem: map with `MAP_POPULATE`, so that the page faults of the whole mapping are
    /// taken at open, not at each page's first access in the I/O. It costs time and page
    /// tables at open in proportion to the mapped size (4 KiB pages: one page-table entry
    /// per 4 KiB); on a devdax device or a huge-page mapping (2 MiB faults) there are few
    /// faults to move.
    pub pmem_populate: bool,
    /// vfio: how the controller reaches DMA memory (`None`: through the IOMMU, vfio-pci).
    pub dma: Option<DmaMode>,
}

/// Every key an option string accepts, with a one-line meaning (for `--help` texts).
pub const KEYS: &[(&str, &str)] = &[
    ("sync", "synchronous interface: psync, block, ramdisk, nvme, nil, mmap, pmem, vfio"),
    ("async", "asynchronous interface: nil, emu, thrpool, libaio, io_uring, io_uring_cmd, posix, vfio"),
    ("admin", "admin interface: emulated, nvme, vfio"),
    ("mem", "buffer memory: posix (default), vfio (the default on a PCI address)"),
    ("nsid", "namespace id (default: the device's own; 1 for files and ramdisks)"),
    ("direct", "open with O_DIRECT"),
    ("osync", "open a file or block device with O_SYNC (sync) or O_DSYNC (dsync): each write returns once stable"),
    ("rdonly", "open read-only; every command that may change data is refused (passthrough and admin included)"),
    ("wronly", "open write-only"),
    ("create", "create a regular file that does not exist"),
    ("truncate", "truncate a regular file at open"),
    ("size", "extend a regular file to this size at open (4k, 1GiB, ...)"),
    ("sqpoll", "io_uring: kernel thread polls the submission queue"),
    ("sqpoll_cpu", "io_uring with sqpoll=1: CPU the SQPOLL thread is pinned to (default: not pinned)"),
    ("iopoll", "io_uring: polled completions (needs direct=1 and poll queues)"),
    ("register_files", "io_uring: register the file descriptor"),
    ("register_buffers", "io_uring: register buffers, use fixed read/write"),
    ("single_issuer", "io_uring: only the creating thread uses a queue (defers task work, as fio)"),
    ("reap_spin", "io_uring: look at the CQ ring this long (20us, 1ms; at most 1s) before waiting in the kernel: latency for a busy CPU (default 0: wait at once)"),
    ("threads", "thrpool: number of worker threads, 1..=1024 (default 4)"),
    ("psync_call", "psync: pread (default), read (lseek + read), preadv, preadv2"),
    ("rwf_hipri", "psync with psync_call=preadv2: RWF_HIPRI (polled completions)"),
    ("allow_mounted_write", "allow writes to a device that is mounted, swapped on or held (refused otherwise)"),
    ("pmem_force", "pmem: run on memory that is not DAX (/dev/shm) with the same instructions (measurements only)"),
    ("pmem_populate", "pmem: map with MAP_POPULATE: page faults taken at open, not in the I/O (time and page tables at open in proportion to the size; on fsdax each page's first write still faults); few faults either way on devdax or huge pages"),
    ("dma", "vfio: vfio (IOMMU, default) or uio (uio_pci_generic, physical addresses: no isolation, testing only)"),
];

fn parse_bool(key: &str, v: &str) -> Result<bool, Error> {
    match v {
        "" | "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::BadOpt { key: key.into(), why: format!("{v:?} is not a boolean (use 1 or 0)") }),
    }
}

/// The longest `reap_spin`.
const REAP_SPIN_MAX_NS: u64 = 1_000_000_000;

/// A duration of `reap_spin`: a whole number with a unit, `ns`, `us`, `ms` or `s`
/// (`0` alone too), at most 1 s; 0 gives `None`.
fn parse_spin(key: &str, v: &str) -> Result<Option<u64>, Error> {
    let bad = |why: String| Error::BadOpt { key: key.into(), why };
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad(format!("{v:?} is not a duration (use e.g. 20us or 1ms)")))?;
    let scale = match unit {
        "" if n == 0 => 1,
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => return Err(bad(format!("{v:?} has no unit (use ns, us, ms or s: e.g. {v}us)"))),
        _ => return Err(bad(format!("{v:?} has an unknown unit {unit:?} (use ns, us, ms or s)"))),
    };
    match n.checked_mul(scale) {
        Some(0) => Ok(None),
        Some(ns) if ns <= REAP_SPIN_MAX_NS => Ok(Some(ns)),
        _ => Err(bad(format!("{v} is longer than the longest spin, 1s"))),
    }
}

/// A `reap_spin` duration as given: in the largest of `s`, `ms`, `us`, `ns` that holds it
/// whole (20000 ns is `20us`), so that `ioswitch info` shows the unit a user writes.
fn fmt_spin(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

fn parse_u32(key: &str, v: &str) -> Result<u32, Error> {
    v.parse().map_err(|_| Error::BadOpt { key: key.into(), why: format!("{v:?} is not a whole number") })
}

impl Opts {
    /// Applies one `key=value` item (a bare `key` means `key=1` for booleans).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let bad = |why: String| Error::BadOpt { key: key.into(), why };
        match key {
            "direct" => self.direct = parse_bool(key, value)?,
            "rdonly" => self.rdonly = parse_bool(key, value)?,
            "wronly" => self.wronly = parse_bool(key, value)?,
            "create" => self.create = parse_bool(key, value)?,
            "truncate" => self.truncate = parse_bool(key, value)?,
            "sqpoll" => self.sqpoll = parse_bool(key, value)?,
            "iopoll" => self.iopoll = parse_bool(key, value)?,
            "register_files" => self.register_files = parse_bool(key, value)?,
            "register_buffers" => self.register_buffers = parse_bool(key, value)?,
            "single_issuer" => self.single_issuer = parse_bool(key, value)?,
            "rwf_hipri" => self.rwf_hipri = parse_bool(key, value)?,
            "allow_mounted_write" => self.allow_mounted_write = parse_bool(key, value)?,
            "pmem_force" => self.pmem_force = parse_bool(key, value)?,
            "pmem_populate" => self.pmem_populate = parse_bool(key, value)?,
            // Every other known key takes a value.
            _ if value.is_empty() && KEYS.iter().any(|(k, _)| *k == key) => {
                return Err(bad("needs a value (key=value)".into()))
            }
            "sync" => self.sync = Some(value.parse()?),
            "async" => self.r#async = Some(value.parse()?),
            "admin" => self.admin = Some(value.parse()?),
            "mem" => self.mem = Some(value.parse()?),
            "osync" => self.osync = Some(value.parse()?),
            "nsid" => match parse_u32(key, value)? {
                n @ (0 | u32::MAX) => return Err(bad(format!("namespace id {n} is reserved"))),
                n => self.nsid = Some(n),
            },
            "size" => self.size = Some(parse_size(value).map_err(bad)?),
            "sqpoll_cpu" => self.sqpoll_cpu = Some(parse_u32(key, value)?),
            "reap_spin" => self.reap_spin_ns = parse_spin(key, value)?,
            "threads" => match parse_u32(key, value)? {
                n @ 1..=1024 => self.threads = Some(n),
                n => return Err(bad(format!("{n} threads: use 1..=1024"))),
            },
            "psync_call" => self.psync_call = Some(value.parse()?),
            "dma" => self.dma = Some(value.parse()?),
            _ => {
                let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
                return Err(bad(format!("unknown option; known options: {}", known.join(", "))));
            }
        }
        Ok(())
    }

    /// The value of option `key` as an option string writes it (`1` for a boolean that is
    /// on); `None` where it is the default.
    fn shown(&self, key: &str) -> Option<String> {
        let on = |b: bool| b.then(|| "1".to_string());
        match key {
            "sync" => self.sync.map(|v| v.to_string()),
            "async" => self.r#async.map(|v| v.to_string()),
            "admin" => self.admin.map(|v| v.to_string()),
            "mem" => self.mem.map(|v| v.to_string()),
            "nsid" => self.nsid.map(|v| v.to_string()),
            "direct" => on(self.direct),
            "osync" => self.osync.map(|v| v.to_string()),
            "rdonly" => on(self.rdonly),
            "wronly" => on(self.wronly),
            "create" => on(self.create),
            "truncate" => on(self.truncate),
            "size" => self.size.map(|v| v.to_string()),
            "sqpoll" => on(self.sqpoll),
            "sqpoll_cpu" => self.sqpoll_cpu.map(|v| v.to_string()),
            "iopoll" => on(self.iopoll),
            "register_files" => on(self.register_files),
            "register_buffers" => on(self.register_buffers),
            "single_issuer" => on(self.single_issuer),
            "reap_spin" => self.reap_spin_ns.map(fmt_spin),
            "threads" => self.threads.map(|v| v.to_string()),
            "psync_call" => self.psync_call.map(|v| v.as_str().into()),
            "rwf_hipri" => on(self.rwf_hipri),
            "allow_mounted_write" => on(self.allow_mounted_write),
            "pmem_force" => on(self.pmem_force),
            "pmem_populate" => on(self.pmem_populate),
            "dma" => self.dma.map(|v| v.as_str().into()),
            _ => None,
        }
    }

    /// The keys of the interface tunables set (`sqpoll`, `threads`, …): options that only
    /// some interfaces take (the interface table says which).
    pub(crate) fn tunables_set(&self) -> impl Iterator<Item = &'static str> + '_ {
        const TUNABLES: &[&str] = &[
            "sqpoll",
            "sqpoll_cpu",
            "iopoll",
            "register_files",
            "register_buffers",
            "single_issuer",
            "reap_spin",
            "threads",
            "psync_call",
            "rwf_hipri",
            "pmem_force",
            "pmem_populate",
            "dma",
        ];
        TUNABLES.iter().copied().filter(|k| self.shown(k).is_some())
    }

    /// These options, read-only (`rdonly=1`) unless they ask for a write mode (`wronly`,
    /// `create`, `truncate`, `size`): for work that only reads, which then runs on a file
    /// or device it may read but not write, and cannot write by mistake (fio opens the
    /// files of a job that only reads `O_RDONLY` too).
    pub fn for_reading(mut self) -> Opts {
        if !self.asks_write_mode() {
            self.rdonly = true;
        }
        self
    }

    /// Whether these options ask for an open that writes: `wronly`, `create`, `truncate`
    /// or `size`.
    pub fn asks_write_mode(&self) -> bool {
        self.wronly || self.create || self.truncate || self.size.is_some()
    }

    /// Checks combinations that are wrong whatever the device (rdonly with wronly, …).
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, why: &str| Err(Error::BadOpt { key: key.into(), why: why.into() });
        if self.rdonly && self.wronly {
            return bad("rdonly", "rdonly and wronly exclude each other");
        }
        if self.rdonly && (self.create || self.truncate || self.size.is_some()) {
            return bad("rdonly", "a read-only open cannot create, truncate or size a file");
        }
        if self.sqpoll_cpu.is_some() && !self.sqpoll {
            return bad("sqpoll_cpu", "only means something with sqpoll=1");
        }
        if self.rwf_hipri && self.psync_call != Some(PsyncCall::Preadv2) {
            return bad("rwf_hipri", "only means something with psync_call=preadv2");
        }
        if let Some(o) = self.osync {
            use {AsyncIface as A, SyncIface as S};
            let sync = self.sync.filter(|s| matches!(s, S::Nil | S::Mmap | S::Pmem | S::Nvme | S::Ramdisk | S::Vfio));
            let r#async = self.r#async.filter(|a| matches!(a, A::Nil | A::IoUringCmd | A::Vfio));
            let unfit = sync.map(|s| format!("sync={s}")).or(r#async.map(|a| format!("async={a}")));
            if let Some(iface) = unfit {
                return Err(Error::BadOpt {
                    key: "osync".into(),
                    why: format!(
                        "osync={o} ({}) means nothing with {iface}: its I/O does not go through writes to the opened file",
                        o.flag_name()
                    ),
                });
            }
        }
        Ok(())
    }
}

impl FromStr for Opts {
    type Err = Error;
    /// Parses `"key=value,key,…"`; the empty string gives the defaults.
    fn from_str(s: &str) -> Result<Opts, Error> {
        let mut o = Opts::default();
        let mut seen: Vec<&str> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').map(|(k, v)| (k.trim(), v.trim())).unwrap_or((item, ""));
            if seen.contains(&k) {
                return Err(Error::BadOpt { key: k.into(), why: "given twice".into() });
            }
            seen.push(k);
            o.set(k, v)?;
        }
        o.validate()?;
        Ok(o)
    }
}

impl fmt::Display for Opts {
    /// The option string that parses back to these options (defaults left out).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = KEYS.iter().filter_map(|(k, _)| Some(format!("{k}={}", self.shown(k)?))).collect();
        f.write_str(&items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_strings_parse_into_fields() {
        let o: Opts = "async=io_uring,direct=1,sqpoll,sqpoll_cpu=1,threads=8,size=1MiB".parse().unwrap();
        assert_eq!(o.r#async, Some(AsyncIface::IoUring));
        assert!(o.direct && o.sqpoll);
        assert_eq!(o.sqpoll_cpu, Some(1));
        assert_eq!(o.threads, Some(8));
        assert_eq!(o.size, Some(1 << 20));
        assert_eq!("".parse::<Opts>().unwrap(), Opts::default());
    }

    #[test]
    fn reap_spin_takes_a_duration_up_to_one_second() {
        for (v, ns, shown) in [
            ("20us", Some(20_000), "20us"),
            ("1ms", Some(1_000_000), "1ms"),
            ("500ns", Some(500), "500ns"),
            ("1s", Some(1_000_000_000), "1s"),
            ("20000ns", Some(20_000), "20us"),
            ("1500us", Some(1_500_000), "1500us"),
            ("1000ms", Some(1_000_000_000), "1s"),
        ] {
            let o: Opts = format!("async=io_uring,reap_spin={v}").parse().unwrap();
            assert_eq!(o.reap_spin_ns, ns, "reap_spin={v}");
            assert_eq!(o.to_string(), format!("async=io_uring,reap_spin={shown}"), "reap_spin={v}");
            assert_eq!(o.to_string().parse::<Opts>().unwrap(), o);
            assert_eq!(o.tunables_set().collect::<Vec<_>>(), ["reap_spin"]);
        }
        for v in ["0", "0us"] {
            let o: Opts = format!("reap_spin={v}").parse().unwrap();
            assert_eq!(o.reap_spin_ns, None, "reap_spin={v} is the default");
            assert_eq!(o.to_string(), "");
        }
        for (v, why) in [
            ("20", "no unit"),
            ("20 minutes", "unknown unit"),
            ("2s", "longest spin"),
            ("1001ms", "longest spin"),
            ("99999999999999999999s", "not a duration"),
            ("us", "not a duration"),
            ("-1us", "not a duration"),
        ] {
            let e = format!("reap_spin={v}").parse::<Opts>().unwrap_err().to_string();
            assert!(e.contains("reap_spin") && e.contains(why), "reap_spin={v}: {e}");
        }
        let e = "reap_spin".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("reap_spin") && e.contains("needs a value"), "{e}");
    }

    #[test]
    fn option_strings_round_trip_through_display() {
        let s = "sync=block,async=libaio,admin=emulated,nsid=2,direct=1,osync=dsync,create=1,register_files=1,single_issuer=1,allow_mounted_write=1,pmem_force=1";
        let o: Opts = s.parse().unwrap();
        assert_eq!(o.osync, Some(OpenSync::Dsync));
        assert_eq!(o.to_string().parse::<Opts>().unwrap(), o);
        let o: Opts = "sync=pmem,pmem_force=1,pmem_populate=1".parse().unwrap();
        assert!(o.pmem_force && o.pmem_populate);
        assert_eq!(o.to_string(), "sync=pmem,pmem_force=1,pmem_populate=1");
        assert_eq!(o.tunables_set().collect::<Vec<_>>(), ["pmem_force", "pmem_populate"]);
        assert!(!"pmem_populate=0".parse::<Opts>().unwrap().pmem_populate);
        let e = "pmem_populate=2".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("pmem_populate") && e.contains("boolean"), "{e}");
        let s = "sync=psync,psync_call=preadv2,rwf_hipri=1";
        let o: Opts = s.parse().unwrap();
        assert_eq!(o.to_string().parse::<Opts>().unwrap(), o);
        for (s, mode) in [("dma=uio", DmaMode::Uio), ("dma=vfio", DmaMode::Vfio)] {
            let o: Opts = s.parse().unwrap();
            assert_eq!(o.dma, Some(mode));
            assert_eq!(o.to_string(), s);
            assert_eq!(o.tunables_set().collect::<Vec<_>>(), ["dma"]);
        }
    }

    /// Every key of `KEYS` shows in `Display` when it is set (`Opts::shown` has an arm for
    /// it) and parses back to the same options: a key added to `KEYS` and `set` but not to
    /// `shown` would otherwise drop out of the option string without a word.
    #[test]
    fn every_key_shows_in_the_option_string() {
        let sample = |key: &str| -> Option<String> {
            let s = match key {
                "sync" => "sync=psync",
                "async" => "async=libaio",
                "admin" => "admin=emulated",
                "mem" => "mem=posix",
                "nsid" => "nsid=3",
                "osync" => "osync=sync",
                "size" => "size=8192",
                "sqpoll_cpu" => "sqpoll=1,sqpoll_cpu=1",
                "reap_spin" => "reap_spin=5us",
                "threads" => "threads=3",
                "psync_call" => "psync_call=read",
                "rwf_hipri" => "psync_call=preadv2,rwf_hipri=1",
                "dma" => "dma=uio",
                "direct"
                | "rdonly"
                | "wronly"
                | "create"
                | "truncate"
                | "sqpoll"
                | "iopoll"
                | "register_files"
                | "register_buffers"
                | "single_issuer"
                | "allow_mounted_write"
                | "pmem_force"
                | "pmem_populate" => {
                    return Some(format!("{key}=1"));
                }
                _ => return None,
            };
            Some(s.to_string())
        };
        for (key, _) in KEYS {
            let s = sample(key).unwrap_or_else(|| panic!("no sample value for option key {key}: add one here"));
            let o: Opts = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            let shown = o.to_string();
            assert!(
                shown.split(',').any(|item| item.starts_with(&format!("{key}="))),
                "{key} set by {s:?}, shown as {shown:?}"
            );
            assert_eq!(shown.parse::<Opts>().unwrap(), o, "{s:?} shown as {shown:?}");
        }
    }

    #[test]
    fn bad_options_name_the_key() {
        let e = "asynk=io_uring".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("\"asynk\"") && e.contains("unknown option"), "{e}");
        let e = "async=iouring".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("\"iouring\"") && e.contains("io_uring"), "{e}");
        let e = "direct=maybe".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("direct") && e.contains("boolean"), "{e}");
        let e = "direct=1,direct=0".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        let e = "rdonly,wronly".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("exclude"), "{e}");
        let e = "dma=iommu".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("dma") && e.contains("\"iommu\"") && e.contains("uio"), "{e}");
        let e = "dma".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("dma") && e.contains("needs a value"), "{e}");
        let e = "threads=0".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("threads"), "{e}");
        let e = "psync_call=readv".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("\"readv\"") && e.contains("preadv2"), "{e}");
        let e = "psync_call=preadv,rwf_hipri".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("rwf_hipri") && e.contains("psync_call=preadv2"), "{e}");
        let e = "async".parse::<Opts>().unwrap_err().to_string();
        assert!(e.contains("needs a value"), "{e}");
    }
}
