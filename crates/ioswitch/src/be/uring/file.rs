//! `io_uring`: read/write/readv/writev/fsync/fallocate through an io_uring ring.
//!
//! One ring per [`Queue`](crate::Queue). The submission side never blocks and makes no
//! syscall: `submit` fills a slot of a table preallocated at queue creation (the tag, the
//! moved-in [`Data`], the bytes the command must move, a stable iovec array for vectored
//! commands) and writes one SQE whose `user_data` is the slot index. `commit` hands every
//! SQE written since the last commit to the kernel with one `io_uring_enter`; `reap`
//! takes completions from the CQ ring without a syscall and enters the kernel only when it
//! must wait. No allocation, no locking and no formatting happens on these paths. `reap`
//! reads each batch of CQEs through one view of the CQ ring and frees a slot before its
//! callback runs, so a callback that panics consumes only the completions handed out so
//! far; the rest stay in the ring for the next reap or the drop.
//!
//! How each command travels:
//!
//! | command | io_uring operation |
//! |---|---|
//! | read / write, one buffer | `READ` / `WRITE` (`READ_FIXED` / `WRITE_FIXED` with `register_buffers=1`) |
//! | read / write, several buffers | `READV` / `WRITEV` (also with `register_buffers=1`) |
//! | flush | `FSYNC` with `IORING_FSYNC_DATASYNC` |
//! | trim on a regular file | `FALLOCATE` with `PUNCH_HOLE \| KEEP_SIZE` |
//! | write zeroes on a regular file | `FALLOCATE` with `ZERO_RANGE \| KEEP_SIZE` (`PUNCH_HOLE` where the file system has no zero range, as on tmpfs: the first `EOPNOTSUPP` resubmits the command as a hole punch and later ones go straight to it) |
//! | dataset management; trim and write zeroes on block devices; flush, trim and write zeroes with `iopoll=1`; reads and writes over 2 GiB − 64 KiB; with `iopoll=1`, reads and writes the block layer would split (see below) | run inline, see below |
//! | NVMe passthrough | refused: use `async=io_uring_cmd` |
//!
//! *Inline commands* run at `submit` through the device's sync interface (BLKDISCARD,
//! BLKZEROOUT, one fallocate per DSM range, pread/pwrite loops for transfers larger than
//! one kernel read/write call can carry) and their completion waits in a ring
//! preallocated at queue creation, which `reap` hands out before anything from the
//! kernel. Such a `submit` blocks for as long as the sync call takes, and its syscalls
//! are counted. Commands in flight are not ordered with respect to each other (as for any
//! io_uring command), so an inline command may finish before an earlier submission.
//!
//! Tunables (from the device's options): `sqpoll=1` (a kernel thread polls the SQ; commit
//! enters the kernel only when that thread sleeps and needs a wake-up), `sqpoll_cpu=N`,
//! `iopoll=1` (completions are polled: needs `direct=1` and a block device with poll
//! queues, checked at open; every `poke` enters the kernel once to poll),
//! `register_files=1` (the descriptor is registered and commands name it as fixed file 0)
//! and `register_buffers=1`.
//!
//! **IOPOLL and split bios.** A polled O_DIRECT read or write that the block layer splits
//! into several bios never completes on Linux 6.1 (seen in the test guest: io_uring
//! IOPOLL on an NVMe namespace with poll queues; a write of two 512-byte buffers, or of
//! one 1 MiB buffer, still pending after minutes, while the same commands complete
//! without IOPOLL). With `iopoll=1` the queue therefore runs inline (through the sync
//! interface, not polled) every read and write the disk's queue limits would make the
//! kernel split, read from sysfs at queue creation: more bytes than
//! `queue/max_sectors_kb`, more pages than `queue/max_segments`, or buffers that meet
//! off `queue/virt_boundary_mask` (NVMe: each buffer but the last must end, and each but
//! the first must start, on a controller page).
//!
//! **Registered buffers.** The queue keeps a sparse table of registered buffers, bounded
//! (twice the depth, within 16..=1024 entries). A buffer is registered the first time it
//! is seen (one `IORING_REGISTER_BUFFERS_UPDATE` syscall, counted) and found again by
//! [`Buffer::id`], which no other buffer of the process ever has, so a buffer freed and
//! reallocated at the same address is registered afresh and the kernel only ever sees a
//! fixed-buffer index whose registration covers exactly the buffer of that command. When
//! the table is full an entry that no command in flight uses is replaced. Commands with
//! several buffers use plain `READV`/`WRITEV`, as do buffers over 1 GiB (the kernel's
//! limit for one registered buffer) and the rare command that finds every entry in use.
//! A registered buffer's pages stay pinned until its entry is replaced or the queue is
//! dropped, even after the buffer itself is freed.
//!
//! The `syscalls` counter counts `io_uring_enter` calls, buffer registrations and the
//! syscalls of inline commands; the setup of the ring (creating it, registering the
//! descriptor and the empty buffer table) is not counted.
//!
//! Dropping the queue with commands in flight waits for them; if waiting fails the data
//! of those commands is leaked, never freed while the kernel may still write into it.

use crate::be::{exec_to_completion, fill_iovecs, AsyncQueue, Io, Op, MAX_SEGMENTS};
use crate::buf::{Buffer, Data};
use crate::cmd::{Cmd, CmdSet};
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::queue::Completion;
use crate::spec::{errno_to_status, Status};
use ::io_uring::{opcode, squeue, types, IoUring, Submitter};
use std::collections::VecDeque;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

const IFACE: &str = "io_uring";
/// `IORING_ENTER_GETEVENTS`: wait for (or, with IOPOLL, poll for) completions.
const ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_SQ_WAKEUP`: wake a sleeping SQPOLL thread.
const ENTER_SQ_WAKEUP: u32 = 2;
/// How long the SQPOLL thread spins without work before it sleeps (the kernel default).
const SQPOLL_IDLE_MS: u32 = 1000;
/// Largest transfer one io_uring read/write carries in full: the kernel cuts each call
/// at `MAX_RW_COUNT` (`INT_MAX` rounded down to a page; this holds for pages up to 64 KiB).
const MAX_RW: u64 = i32::MAX as u64 & !0xffff;
/// Largest buffer the kernel registers.
const MAX_REG_BYTES: usize = 1 << 30;
/// Bounds of the registered-buffer table.
const REG_TABLE_MIN: u32 = 16;
const REG_TABLE_MAX: u32 = 1024;
/// `Slot::reg` when the command uses no registered buffer.
const NO_REG: u32 = u32::MAX;
/// Force Unit Access in CDW12 of an NVM write.
const NVM_FUA: u32 = 1 << 30;

/// Checks at open that this interface will work for the device: that io_uring can be
/// created at all, and that the tunables asked for are possible (so they fail here, not
/// at the first I/O).
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    if !crate::be::io_uring_usable() {
        let why = match IoUring::new(2) {
            Err(e) => format!(
                "this process cannot create an io_uring (io_uring_setup: {e}); io_uring may be disabled \
                 (/proc/sys/kernel/io_uring_disabled) or blocked by a seccomp filter"
            ),
            Ok(_) => "creating an io_uring failed when it was first tried".to_string(),
        };
        return Err(dev.unsupported("async=io_uring", &why));
    }
    if dev.raw_fd() < 0 {
        return Err(dev.unsupported("async=io_uring", "the device has no file descriptor"));
    }
    let o = &dev.opts;
    if o.iopoll {
        check_iopoll(dev)?;
    }
    if o.sqpoll {
        check_sqpoll(dev)?;
    }
    if o.single_issuer {
        let iface = "async=io_uring (single_issuer=1)";
        if o.sqpoll {
            return Err(
                dev.unsupported(iface, "deferred task work and an SQPOLL thread exclude each other; choose one")
            );
        }
        if !single_issuer_supported() {
            return Err(
                dev.unsupported(iface, "the kernel refused IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN (needs Linux 6.1)")
            );
        }
    }
    if o.register_buffers {
        let ring = IoUring::new(2).map_err(|e| queue_error(dev, "create a ring to probe register_buffers", e))?;
        if let Err(e) = ring.submitter().register_buffers_sparse(1) {
            return Err(dev.unsupported(
                "async=io_uring (register_buffers=1)",
                &format!("the kernel refused a sparse registered-buffer table (needs Linux 5.13): {e}"),
            ));
        }
    }
    Ok(())
}

/// IOPOLL: needs O_DIRECT and a block queue with poll queues behind the descriptor.
fn check_iopoll(dev: &Inner) -> Result<(), Error> {
    let iface = "async=io_uring (iopoll=1)";
    if !dev.opts.direct {
        return Err(dev.unsupported(
            iface,
            "polled completions need direct=1: only O_DIRECT I/O completes through the block layer's poll queues",
        ));
    }
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open (probe checked it) and st is a valid out pointer.
    if unsafe { libc::fstat(dev.raw_fd(), &mut st) } != 0 {
        return Err(queue_error(dev, "fstat (to find the disk for iopoll)", io::Error::last_os_error()));
    }
    let (devno, what) = if st.st_mode & libc::S_IFMT == libc::S_IFBLK {
        (st.st_rdev, "block device")
    } else {
        (st.st_dev, "disk holding the file")
    };
    let (maj, min) = (libc::major(devno), libc::minor(devno));
    let Some(disk) = crate::dev::disk_sysfs_dir(maj, min) else {
        return Err(dev.unsupported(
            iface,
            &format!(
                "no poll queues: there is no block device behind it (device number {maj}:{min}; \
                 a file system such as tmpfs or overlayfs)"
            ),
        ));
    };
    let name = disk.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let poll = fs::read_to_string(disk.join("queue/io_poll")).map(|s| s.trim().to_string());
    match poll.as_deref() {
        Ok("1") => Ok(()),
        Ok(v) => Err(dev.unsupported(
            iface,
            &format!(
                "the {what}, {name} ({maj}:{min}), has no poll queues (queue/io_poll is {v}); \
                 NVMe gets them with the nvme driver's poll_queues parameter"
            ),
        )),
        Err(e) => Err(dev
            .unsupported(iface, &format!("the {what}, {name} ({maj}:{min}), has no poll queues (queue/io_poll: {e})"))),
    }
}

/// The sysfs directory of the disk behind the descriptor (the block device itself, or
/// the disk holding the file).
fn disk_of_fd(fd: RawFd) -> Option<PathBuf> {
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out pointer; a bad descriptor only makes fstat fail.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    let devno = if st.st_mode & libc::S_IFMT == libc::S_IFBLK { st.st_rdev } else { st.st_dev };
    crate::dev::disk_sysfs_dir(libc::major(devno), libc::minor(devno))
}

/// The queue limits past which the block layer splits a bio (see "IOPOLL and split bios"
/// in the module docs).
#[derive(Clone, Copy, Debug)]
struct SplitLimits {
    max_bytes: u64,
    max_pages: u64,
    /// `queue/virt_boundary_mask` (0: none).
    boundary: u64,
}

impl SplitLimits {
    /// Reads the limits of the disk behind `fd`; unknown ones are taken as the smallest
    /// the kernel allows, so an unreadable sysfs errs on the side of running inline.
    fn of(fd: RawFd) -> SplitLimits {
        let disk = disk_of_fd(fd);
        let q = |attr: &str| -> Option<u64> {
            fs::read_to_string(disk.as_ref()?.join("queue").join(attr)).ok()?.trim().parse().ok()
        };
        SplitLimits {
            max_bytes: q("max_sectors_kb").map_or(4096, |kb| kb * 1024),
            max_pages: q("max_segments").unwrap_or(1),
            boundary: q("virt_boundary_mask").unwrap_or(0),
        }
    }

    /// Whether the first `len` bytes of `bufs`, as one O_DIRECT bio, exceed the limits.
    fn splits(&self, len: u64, bufs: &[Buffer]) -> bool {
        if len > self.max_bytes {
            return true;
        }
        let page = crate::dev::page_size() as u64;
        let (mut left, mut pages, mut prev_end) = (len, 0u64, None::<u64>);
        for b in bufs {
            if left == 0 {
                break;
            }
            let start = b.as_ptr() as u64;
            let end = start + left.min(b.len() as u64);
            if prev_end.is_some_and(|pe| (pe | start) & self.boundary != 0) {
                return true;
            }
            pages += end.div_ceil(page) - start / page;
            left -= end - start;
            prev_end = Some(end);
        }
        pages > self.max_pages
    }
}

/// SQPOLL: the CPU must exist, and the kernel must let this process have a poll thread.
fn check_sqpoll(dev: &Inner) -> Result<(), Error> {
    let o = &dev.opts;
    if let Some(cpu) = o.sqpoll_cpu {
        // SAFETY: sysconf has no memory-safety preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        if online > 0 && cpu as libc::c_long >= online {
            return Err(dev.unsupported(
                "async=io_uring (sqpoll_cpu)",
                &format!("CPU {cpu} does not exist: {online} CPUs are online (0..={})", online - 1),
            ));
        }
    }
    let mut b = IoUring::<squeue::Entry>::builder();
    b.setup_sqpoll(SQPOLL_IDLE_MS);
    if let Some(cpu) = o.sqpoll_cpu {
        b.setup_sqpoll_cpu(cpu);
    }
    match b.build(2) {
        Ok(ring) => {
            if !ring.params().is_feature_sqpoll_nonfixed() && !o.register_files {
                return Err(dev.unsupported(
                    "async=io_uring (sqpoll=1)",
                    "this kernel's SQPOLL thread only takes registered files (before Linux 5.11): \
                     add register_files=1",
                ));
            }
            Ok(())
        }
        Err(e) => {
            let hint = match e.raw_os_error() {
                Some(libc::EPERM) => " (before Linux 5.11 SQPOLL needs CAP_SYS_ADMIN)",
                Some(libc::EINVAL) if o.sqpoll_cpu.is_some() => " (is that CPU online and allowed for this process?)",
                _ => "",
            };
            Err(dev.unsupported("async=io_uring (sqpoll=1)", &format!("the kernel refused an SQPOLL ring: {e}{hint}")))
        }
    }
}

/// Creates a queue of `depth` slots.
pub(crate) fn new_queue(dev: &Arc<Inner>, depth: u32) -> Result<crate::be::Backend, Error> {
    Ok(crate::be::Backend::IoUring(Box::new(IoUringQueue::new(dev, depth)?)))
}

fn queue_error(dev: &Inner, what: &'static str, source: io::Error) -> Error {
    let source = if source.raw_os_error() == Some(libc::EEXIST) && dev.opts.single_issuer {
        io::Error::new(
            source.kind(),
            format!(
                "{source}: with single_issuer=1 only the thread that created the queue may use it; \
                 create the queue in the thread that uses it"
            ),
        )
    } else {
        source
    };
    Error::Queue { dev: dev.uri.clone(), iface: IFACE, what, source }
}

/// True when this kernel takes IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN (Linux 6.1), which
/// the `single_issuer=1` option asks for (probed once).
pub(crate) fn single_issuer_supported() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        let mut b = IoUring::<squeue::Entry>::builder();
        b.setup_coop_taskrun().setup_taskrun_flag().setup_single_issuer().setup_defer_taskrun();
        b.build(2).is_ok()
    })
}

/// True when this kernel takes IORING_SETUP_COOP_TASKRUN with TASKRUN_FLAG (Linux 6.0);
/// rings then get completions of punted work without being interrupted (probed once).
fn coop_taskrun() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| IoUring::<squeue::Entry>::builder().setup_coop_taskrun().setup_taskrun_flag().build(2).is_ok())
}

/// Builds an SQE on the device's descriptor: fixed file 0 when it is registered.
macro_rules! on_fd {
    ($q:ident, |$t:ident| $body:expr) => {
        if $q.fixed_file {
            let $t = types::Fixed(0);
            $body
        } else {
            let $t = types::Fd($q.fd);
            $body
        }
    };
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The slot is free.
    Free,
    /// A read or write: any result but `Slot::expect` bytes is a failure.
    Rw,
    /// Fsync or fallocate: any non-negative result is success.
    Other,
    /// Write zeroes as FALLOC_FL_ZERO_RANGE over `Slot::zero`; resubmitted as a hole punch
    /// on EOPNOTSUPP.
    ZeroRange,
    /// An inline command: its completion waits in `ready`; the slot counts it against the
    /// depth until it is handed out.
    Ready,
}

/// `Slot::expect` of a slot with no command in the ring: no CQE result equals it.
const NO_EXPECT: u64 = u64::MAX;
/// End of the free list.
const NO_SLOT: u32 = u32::MAX;

/// The iovec array of one slot: stable in memory for as long as the queue lives.
struct Iovecs([libc::iovec; MAX_SEGMENTS]);

// SAFETY: the iovecs only ever point into buffers owned by the same slot's `Data`, which
// is Send; nothing here is tied to a thread.
unsafe impl Send for Iovecs {}

struct Slot {
    /// The CQE result (read as `u32`, zero-extended) with which the command is complete
    /// and successful as it stands: the byte count of a read or write, 0 for fsync and
    /// fallocate; NO_EXPECT when the slot has no command in the ring. Every other result
    /// goes through [`outcome`].
    expect: u64,
    tag: u64,
    data: Data,
    kind: Kind,
    /// Registered-buffer table entry the command uses, or NO_REG.
    reg: u32,
    /// Next free slot (NO_SLOT: none), while this one is free.
    next_free: u32,
    /// `Kind::ZeroRange`: offset and length of the range.
    zero: (u64, u64),
    iov: Box<Iovecs>,
}

impl Slot {
    fn new(next_free: u32) -> Slot {
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        Slot {
            expect: NO_EXPECT,
            tag: 0,
            data: Data::None,
            kind: Kind::Free,
            reg: NO_REG,
            next_free,
            zero: (0, 0),
            iov: Box::new(Iovecs([empty; MAX_SEGMENTS])),
        }
    }
}

/// How a CQE whose result is not its slot's `expect` ends.
enum Outcome {
    /// The command's completion, with this status and result.
    Done(Status, u64),
    /// Not a command's end (no command in that slot).
    Stray,
    /// A zero range the file system lacks: resubmit as a hole punch.
    Punch,
}

/// The end of a command whose CQE result is not the expected one (errors, short
/// transfers, positive fsync/fallocate results, the zero-range fallback, stray CQEs).
#[cold]
#[inline(never)]
fn outcome(slot: &Slot, res: i32) -> Outcome {
    match slot.kind {
        Kind::Free | Kind::Ready => Outcome::Stray,
        // No zero range on this file system (tmpfs): a punched hole reads back as zeroes,
        // which is what write zeroes promises (as psync does).
        Kind::ZeroRange if res == -libc::EOPNOTSUPP => Outcome::Punch,
        _ if res < 0 => Outcome::Done(errno_to_status(res.wrapping_neg()), 0),
        Kind::Rw if res as u64 != slot.expect => Outcome::Done(errno_to_status(libc::EIO), res as u64),
        _ => Outcome::Done(Status::OK, res as u64),
    }
}

/// Frees slot `idx` (puts it on the free list, ends its use of a registered buffer) and
/// returns its data. A free function over the fields it needs, so it can run while a
/// view of the ring is borrowed.
#[inline(always)]
fn release(slots: &mut [Slot], free_head: &mut u32, reg: &mut Option<RegTable>, idx: u32) -> Data {
    let slot = &mut slots[idx as usize];
    slot.kind = Kind::Free;
    slot.expect = NO_EXPECT;
    if slot.reg != NO_REG {
        unuse_reg(slot, reg);
    }
    slot.next_free = *free_head;
    *free_head = idx;
    std::mem::take(&mut slot.data)
}

#[cold]
#[inline(never)]
fn unuse_reg(slot: &mut Slot, reg: &mut Option<RegTable>) {
    if let Some(t) = reg {
        t.unuse(slot.reg as usize);
    }
    slot.reg = NO_REG;
}

/// RWF_DSYNC for an NVM write with Force Unit Access.
#[inline(always)]
fn rw_flags(cmd: &Cmd) -> i32 {
    if cmd.set == CmdSet::Nvm && cmd.sqe.cdw12 & NVM_FUA != 0 {
        libc::RWF_DSYNC
    } else {
        0
    }
}

/// A queue on one io_uring ring.
pub(crate) struct IoUringQueue {
    ring: IoUring,
    /// The ring's descriptor, for `io_uring_enter`.
    ring_fd: RawFd,
    dev: Arc<Inner>,
    fd: RawFd,
    fixed_file: bool,
    sqpoll: bool,
    iopoll: bool,
    /// One-buffer reads and writes take the fast path in `submit`: no registered file or
    /// buffers, no IOPOLL split check.
    plain: bool,
    /// With IOPOLL: the limits past which a read or write runs inline.
    split: Option<SplitLimits>,
    /// Trim and write zeroes go to the ring as fallocate (a regular file, no IOPOLL).
    fallocate: bool,
    /// FALLOC_FL_ZERO_RANGE works here (cleared by the first EOPNOTSUPP).
    zero_range: bool,
    depth: u32,
    slots: Box<[Slot]>,
    /// First free slot (NO_SLOT: none); the list runs through `Slot::next_free`.
    free_head: u32,
    /// Slots holding a command the kernel has or will have (not counting `Kind::Ready`).
    inflight: u32,
    /// Without SQPOLL: SQEs written and not yet consumed by the kernel (the kernel takes
    /// SQEs only in an `io_uring_enter` of ours, which says how many it took). With
    /// SQPOLL: SQEs written since the last commit.
    unsubmitted: u32,
    /// Completions of inline commands, with their slots; capacity `depth`.
    ready: VecDeque<(u32, Completion)>,
    reg: Option<RegTable>,
    syscalls: u64,
}

impl IoUringQueue {
    fn new(dev: &Arc<Inner>, depth: u32) -> Result<IoUringQueue, Error> {
        let o = &dev.opts;
        let fd = dev.raw_fd();
        if fd < 0 {
            return Err(dev.unsupported("async=io_uring", "the device has no file descriptor"));
        }
        let depth = depth.max(1);
        let mut b = IoUring::<squeue::Entry>::builder();
        if o.sqpoll {
            b.setup_sqpoll(SQPOLL_IDLE_MS);
            if let Some(cpu) = o.sqpoll_cpu {
                b.setup_sqpoll_cpu(cpu);
            }
        }
        if o.iopoll {
            b.setup_iopoll();
        }
        if !o.sqpoll && coop_taskrun() {
            // Completions of work the kernel punted to its workers are posted when this
            // task next enters the kernel, not by interrupting it (as fio sets up its
            // rings); the flag in the SQ ring says when such work is pending.
            b.setup_coop_taskrun();
            b.setup_taskrun_flag();
        }
        if o.single_issuer && !o.sqpoll {
            b.setup_single_issuer();
            b.setup_defer_taskrun();
        }
        // The kernel rounds the SQ up to a power of two and makes the CQ twice as large, so
        // neither can overflow with at most `depth` commands in flight. An SQPOLL thread
        // moves the SQ head only after its whole batch, while completions of that batch
        // can already be reaped and their slots reused: twice the depth keeps the SQ from
        // looking full then.
        let entries = if o.sqpoll { depth.saturating_mul(2) } else { depth };
        let ring = b.build(entries).map_err(|e| queue_error(dev, "create the ring (io_uring_setup)", e))?;
        if ring.params().sq_entries() < depth {
            let why = io::Error::other(format!(
                "the kernel gave {} SQ entries for depth {depth}",
                ring.params().sq_entries()
            ));
            return Err(queue_error(dev, "create the ring (io_uring_setup)", why));
        }
        if o.register_files {
            ring.submitter()
                .register_files(&[fd])
                .map_err(|e| queue_error(dev, "register the file descriptor (register_files=1)", e))?;
        }
        let reg = if o.register_buffers {
            let len = (depth.saturating_mul(2)).clamp(REG_TABLE_MIN, REG_TABLE_MAX);
            ring.submitter()
                .register_buffers_sparse(len)
                .map_err(|e| queue_error(dev, "register an empty buffer table (register_buffers=1)", e))?;
            Some(RegTable::new(len as usize))
        } else {
            None
        };
        Ok(IoUringQueue {
            ring_fd: ring.as_raw_fd(),
            ring,
            dev: dev.clone(),
            fd,
            fixed_file: o.register_files,
            sqpoll: o.sqpoll,
            iopoll: o.iopoll,
            plain: !o.register_files && !o.register_buffers && !o.iopoll,
            split: o.iopoll.then(|| SplitLimits::of(fd)),
            fallocate: dev.ident.kind == DevKind::File && !o.iopoll,
            zero_range: true,
            depth,
            slots: (0..depth).map(|i| Slot::new(if i + 1 < depth { i + 1 } else { NO_SLOT })).collect(),
            free_head: 0,
            inflight: 0,
            unsubmitted: 0,
            ready: VecDeque::with_capacity(depth as usize),
            reg,
            syscalls: 0,
        })
    }

    #[cold]
    fn busy(&self) -> Error {
        Error::Busy { depth: self.depth }
    }

    /// Takes a free slot off the list.
    #[inline(always)]
    fn take_slot(&mut self) -> Option<u32> {
        let idx = self.free_head;
        let slot = self.slots.get(idx as usize)?;
        self.free_head = slot.next_free;
        Some(idx)
    }

    /// Frees a slot and returns its data.
    #[inline]
    fn release(&mut self, idx: u32) -> Data {
        release(&mut self.slots, &mut self.free_head, &mut self.reg, idx)
    }

    /// Writes one SQE for slot `idx`. False when the SQ is full (it cannot be: it has at
    /// least `depth` entries and every SQE holds a slot).
    #[inline(always)]
    fn push(&mut self, idx: u32, entry: squeue::Entry) -> bool {
        let entry = entry.user_data(idx as u64);
        // SAFETY: everything the entry points to (buffers, the iovec array) is owned by
        // slot `idx`, which keeps it, unmoved and untouched, until the CQE of that slot is
        // reaped or the queue is dropped (which waits for it, or leaks it).
        unsafe { self.ring.submission().push(&entry) }.is_ok()
    }

    /// Writes the SQE of slot `idx`, whose fields are set; on failure frees the slot and
    /// hands back the data.
    #[inline(always)]
    fn launch(&mut self, idx: u32, entry: squeue::Entry) -> Result<(), (Error, Data)> {
        if self.push(idx, entry) {
            self.inflight += 1;
            self.unsubmitted += 1;
            return Ok(());
        }
        self.launch_failed(idx)
    }

    #[cold]
    #[inline(never)]
    fn launch_failed(&mut self, idx: u32) -> Result<(), (Error, Data)> {
        let data = self.release(idx);
        Err((self.busy(), data))
    }

    /// The fast path: a one-buffer read or write with no registered file or buffer.
    #[inline(always)]
    fn submit_one(&mut self, io: &Io, cmd: &Cmd, ptr: *mut u8, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let Some(idx) = self.take_slot() else { return Err((self.busy(), data)) };
        let len = io.len as u32; // io.len <= MAX_RW, checked by the caller
        let t = types::Fd(self.fd);
        let entry = if io.op == Op::Write {
            opcode::Write::new(t, ptr, len).offset(io.offset).rw_flags(rw_flags(cmd)).build()
        } else {
            opcode::Read::new(t, ptr, len).offset(io.offset).build()
        };
        let slot = &mut self.slots[idx as usize];
        // A free slot's data is Data::None: nothing to drop.
        std::mem::forget(std::mem::replace(&mut slot.data, data));
        slot.tag = tag;
        slot.kind = Kind::Rw;
        slot.expect = len as u64;
        self.launch(idx, entry)
    }

    /// Everything but the fast path.
    #[inline(never)]
    fn submit_slow(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if self.free_head == NO_SLOT {
            return Err((self.busy(), data));
        }
        match io.op {
            Op::Read | Op::Write if io.len <= MAX_RW && !self.split.is_some_and(|l| l.splits(io.len, data.bufs())) => {
                self.submit_rw(io, cmd, data, tag)
            }
            Op::Flush if !self.iopoll => {
                let e = on_fd!(self, |t| opcode::Fsync::new(t).flags(types::FsyncFlags::DATASYNC).build());
                self.submit_other(Kind::Other, e, data, tag)
            }
            Op::Trim if self.fallocate => {
                let e = self.fallocate_entry(io.offset, io.len, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE);
                self.submit_other(Kind::Other, e, data, tag)
            }
            Op::WriteZeroes if self.fallocate => {
                let keep = libc::FALLOC_FL_KEEP_SIZE;
                if self.zero_range {
                    let e = self.fallocate_entry(io.offset, io.len, libc::FALLOC_FL_ZERO_RANGE | keep);
                    self.submit_zero_range(e, (io.offset, io.len), data, tag)
                } else {
                    let e = self.fallocate_entry(io.offset, io.len, libc::FALLOC_FL_PUNCH_HOLE | keep);
                    self.submit_other(Kind::Other, e, data, tag)
                }
            }
            Op::Passthru => {
                let e = Error::BadCommand {
                    dev: self.dev.uri.clone(),
                    iface: IFACE,
                    what: cmd.describe(),
                    why: "io_uring carries only read, write, flush, trim, write zeroes and dataset management \
                          here; NVMe passthrough needs async=io_uring_cmd on /dev/ngXnY"
                        .into(),
                };
                Err((e, data))
            }
            // Oversized reads and writes (and with IOPOLL those the block layer would
            // split), DSM, and what IOPOLL rings or block devices cannot take as a ring
            // operation.
            _ => self.inline(io, cmd, data, tag),
        }
    }

    /// A read or write in general: several buffers, registered files or buffers.
    fn submit_rw(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let Some(idx) = self.take_slot() else { return Err((self.busy(), data)) };
        let write = io.op == Op::Write;
        let len = io.len as u32; // io.len <= MAX_RW, checked by the caller
        let rw_flags = if write { rw_flags(cmd) } else { 0 };
        let slot = &mut self.slots[idx as usize];
        slot.data = data;
        slot.tag = tag;
        // One buffer needs no iovec.
        let n = match &slot.data {
            Data::One(_) => 1,
            d => fill_iovecs(d.bufs(), io.len, &mut slot.iov.0),
        };
        let entry = if n == 1 {
            // One buffer, or fill_iovecs used the first buffer only.
            let buf = &mut slot.data.bufs_mut()[0];
            let ptr = buf.as_mut_ptr();
            let fixed = match &mut self.reg {
                Some(t) => t.index_for(&self.ring.submitter(), buf, &mut self.syscalls),
                None => Ok(None),
            };
            let fixed = match fixed {
                Ok(e) => e,
                Err(e) => {
                    let data = self.release(idx);
                    let what = "register a buffer (IORING_REGISTER_BUFFERS_UPDATE)";
                    return Err((queue_error(&self.dev, what, e), data));
                }
            };
            let off = io.offset;
            match (write, fixed) {
                (false, Some(e)) => {
                    self.slots[idx as usize].reg = e as u32;
                    on_fd!(self, |t| opcode::ReadFixed::new(t, ptr, len, e).offset(off).build())
                }
                (true, Some(e)) => {
                    self.slots[idx as usize].reg = e as u32;
                    on_fd!(self, |t| opcode::WriteFixed::new(t, ptr, len, e).offset(off).rw_flags(rw_flags).build())
                }
                (false, None) => on_fd!(self, |t| opcode::Read::new(t, ptr, len).offset(off).build()),
                (true, None) => {
                    on_fd!(self, |t| opcode::Write::new(t, ptr, len).offset(off).rw_flags(rw_flags).build())
                }
            }
        } else {
            let iov = slot.iov.0.as_ptr();
            let (n, off) = (n as u32, io.offset);
            if write {
                on_fd!(self, |t| opcode::Writev::new(t, iov, n).offset(off).rw_flags(rw_flags).build())
            } else {
                on_fd!(self, |t| opcode::Readv::new(t, iov, n).offset(off).build())
            }
        };
        let slot = &mut self.slots[idx as usize];
        slot.kind = Kind::Rw;
        slot.expect = len as u64;
        self.launch(idx, entry)
    }

    /// Fsync or fallocate: commands with no data in the ring.
    fn submit_other(&mut self, kind: Kind, entry: squeue::Entry, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let Some(idx) = self.take_slot() else { return Err((self.busy(), data)) };
        let slot = &mut self.slots[idx as usize];
        slot.data = data;
        slot.tag = tag;
        slot.kind = kind;
        slot.expect = 0;
        self.launch(idx, entry)
    }

    fn submit_zero_range(
        &mut self,
        entry: squeue::Entry,
        range: (u64, u64),
        data: Data,
        tag: u64,
    ) -> Result<(), (Error, Data)> {
        let Some(idx) = self.take_slot() else { return Err((self.busy(), data)) };
        self.slots[idx as usize].zero = range;
        let slot = &mut self.slots[idx as usize];
        slot.data = data;
        slot.tag = tag;
        slot.kind = Kind::ZeroRange;
        slot.expect = 0;
        self.launch(idx, entry)
    }

    fn fallocate_entry(&self, offset: u64, len: u64, mode: i32) -> squeue::Entry {
        on_fd!(self, |t| opcode::Fallocate::new(t, len).offset(offset).mode(mode).build())
    }

    /// Runs a command now through the sync interface; its completion waits in `ready`,
    /// holding a slot until it is handed out.
    fn inline(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let dev = self.dev.clone();
        let Some(sync) = dev.sync() else {
            let e = Error::BadCommand {
                dev: self.dev.uri.clone(),
                iface: IFACE,
                what: cmd.describe(),
                why: "io_uring has no native operation for it here, and the device has no sync interface to run it"
                    .into(),
            };
            return Err((e, data));
        };
        let Some(idx) = self.take_slot() else { return Err((self.busy(), data)) };
        self.slots[idx as usize].kind = Kind::Ready;
        self.syscalls += sync.syscalls_per_cmd();
        let c = exec_to_completion(sync, io, cmd, data, tag);
        self.ready.push_back((idx, c));
        Ok(())
    }

    /// Hands out completions of inline commands, at most `max`.
    #[cold]
    #[inline(never)]
    fn hand_out_ready(&mut self, max: u32, f: &mut impl FnMut(Completion)) -> u32 {
        let mut n = 0;
        while n < max {
            let Some((idx, c)) = self.ready.pop_front() else { break };
            self.release(idx);
            f(c);
            n += 1;
        }
        n
    }

    /// One `io_uring_enter` on the ring, counted. Made here rather than through the
    /// crate's `Submitter` (which builds a view of the ring's registers per call): the
    /// queue knows what it submits.
    #[inline]
    fn enter(&mut self, to_submit: u32, want: u32, flags: u32) -> io::Result<u32> {
        self.syscalls += 1;
        // SAFETY: io_uring_enter on this queue's ring, which lives as long as `self`, with
        // no argument pointer (NULL, size 0), as GETEVENTS and SQ_WAKEUP allow; every SQE
        // in the ring points to memory owned by an in-flight slot (see `push`).
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                self.ring_fd as libc::c_long,
                to_submit as libc::c_long,
                want as libc::c_long,
                flags as libc::c_long,
                std::ptr::null::<libc::sigset_t>(),
                0 as libc::c_long,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as u32)
        }
    }

    /// Without SQPOLL: after an `io_uring_enter` that was given `to_submit` SQEs and took
    /// `took` (None: it failed), how many are left. Anything but all of them taken is
    /// rare; then the SQ ring's head says.
    #[inline(always)]
    fn took(&mut self, to_submit: u32, took: Option<u32>) {
        if to_submit == 0 {
            return;
        }
        match took {
            Some(k) if k >= to_submit => self.unsubmitted -= to_submit,
            _ => self.resync_unsubmitted(),
        }
    }

    #[cold]
    #[inline(never)]
    fn resync_unsubmitted(&mut self) {
        self.unsubmitted = self.ring.submission().len() as u32;
    }

    /// One `io_uring_enter` that submits what is queued and waits for `want` completions
    /// (polls once, with IOPOLL, when `want` is 0). An interrupted wait is not an error:
    /// the caller loops. Fails with the errno (see [`Self::wait_failed`]).
    #[inline(always)]
    fn enter_wait(&mut self, want: u32) -> Result<(), i32> {
        let (to_submit, flags) =
            if self.sqpoll { self.sqpoll_enter_args() } else { (self.unsubmitted, ENTER_GETEVENTS) };
        let r = self.enter(to_submit, want, flags);
        if !self.sqpoll {
            self.took(to_submit, r.as_ref().ok().copied());
        }
        match r {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR | libc::EAGAIN | libc::EBUSY) => Ok(()),
                errno => Err(errno.unwrap_or(libc::EIO)),
            },
        }
    }

    /// With SQPOLL: what to enter with to wait (everything in the SQ, and a wake-up if the
    /// poll thread sleeps).
    #[cold]
    #[inline(never)]
    fn sqpoll_enter_args(&mut self) -> (u32, u32) {
        let sq = self.ring.submission();
        let wake = if sq.need_wakeup() { ENTER_SQ_WAKEUP } else { 0 };
        (sq.len() as u32, ENTER_GETEVENTS | wake)
    }

    #[cold]
    #[inline(never)]
    fn wait_failed(&self, errno: i32) -> Error {
        queue_error(&self.dev, "io_uring_enter (wait for completions)", io::Error::from_raw_os_error(errno))
    }

    /// Takes up to `limit` completions from the CQ ring, without a syscall.
    ///
    /// One view of the CQ serves the whole batch; dropping it publishes the new head, also
    /// when a callback panics: a completion is counted out of `inflight` and its slot
    /// freed before its callback runs, so the CQEs handed out are consumed exactly once
    /// and the rest stay in the ring for the next reap (or the drop).
    #[inline(always)]
    fn take_cqes(&mut self, limit: u32, f: &mut impl FnMut(Completion)) -> u32 {
        let mut n = 0;
        loop {
            let mut punch = None;
            let mut cq = self.ring.completion();
            while n < limit {
                let Some(cqe) = cq.next() else { break };
                let (user_data, res) = (cqe.user_data(), cqe.result());
                let Some(slot) = usize::try_from(user_data).ok().and_then(|i| self.slots.get(i)) else { continue };
                let idx = user_data as u32;
                let (status, result) = if res as u32 as u64 == slot.expect {
                    (Status::OK, res as u64)
                } else {
                    match outcome(slot, res) {
                        Outcome::Done(status, result) => (status, result),
                        Outcome::Stray => continue,
                        Outcome::Punch => {
                            punch = Some(idx);
                            break;
                        }
                    }
                };
                let tag = slot.tag;
                let data = release(&mut self.slots, &mut self.free_head, &mut self.reg, idx);
                self.inflight -= 1;
                f(Completion { tag, status, result, data });
                n += 1;
            }
            drop(cq);
            // The hole-punch resubmission writes to the SQ, so it waits until the CQ view
            // is gone (its CQE already consumed; no callback runs in between).
            let Some(idx) = punch else { return n };
            if let Some(c) = self.punch_instead(idx) {
                f(c);
                n += 1;
            }
        }
    }

    /// Resubmits slot `idx`, a write zeroes that found no zero range, as a hole punch;
    /// returns its completion (EOPNOTSUPP) if the SQ does not take it.
    #[cold]
    #[inline(never)]
    fn punch_instead(&mut self, idx: u32) -> Option<Completion> {
        self.zero_range = false;
        let slot = &mut self.slots[idx as usize];
        let (offset, len) = slot.zero;
        slot.kind = Kind::Other;
        let e = self.fallocate_entry(offset, len, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE);
        if self.push(idx, e) {
            self.unsubmitted += 1;
            return None;
        }
        let tag = self.slots[idx as usize].tag;
        let data = self.release(idx);
        self.inflight -= 1;
        Some(Completion { tag, status: errno_to_status(libc::EOPNOTSUPP), result: 0, data })
    }

    /// Whether the kernel has completions of punted work to post (COOP_TASKRUN).
    #[inline]
    fn taskrun(&mut self) -> bool {
        self.ring.submission().taskrun()
    }
}

impl AsyncQueue for IoUringQueue {
    #[inline(always)]
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if let (true, Op::Read | Op::Write, Data::One(b)) = (self.plain, io.op, &data) {
            if io.len <= MAX_RW {
                let ptr = b.as_ptr().cast_mut();
                return self.submit_one(io, cmd, ptr, data, tag);
            }
        }
        self.submit_slow(io, cmd, data, tag)
    }

    fn commit(&mut self) -> Result<u32, Error> {
        if self.sqpoll {
            let queued = std::mem::take(&mut self.unsubmitted);
            // The SQEs are already visible to the poll thread; enter only to wake it.
            let wake = {
                let sq = self.ring.submission();
                !sq.is_empty() && sq.need_wakeup()
            };
            if wake {
                if let Err(e) = self.enter(0, 0, ENTER_SQ_WAKEUP) {
                    if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) {
                        return Err(queue_error(&self.dev, "io_uring_enter (wake the SQPOLL thread)", e));
                    }
                }
            }
            return Ok(queued);
        }
        let mut pushed = 0;
        while self.unsubmitted > 0 {
            let pending = self.unsubmitted;
            let r = self.enter(pending, 0, 0);
            self.took(pending, r.as_ref().ok().copied());
            // Fewer than asked: an SQE failed early (its CQE says why); submit the rest.
            let k = pending - self.unsubmitted;
            pushed += k;
            match r {
                Ok(_) if k == 0 => break,
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    // Out of kernel resources for now: the rest stays queued and goes with
                    // the next commit or wait.
                    Some(libc::EAGAIN | libc::EBUSY) => break,
                    _ => return Err(queue_error(&self.dev, "io_uring_enter (submit)", e)),
                },
            }
        }
        Ok(pushed)
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        self.reap_inline(min, max, f)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }

    /// A waiting reap enters the kernel with everything queued as `to_submit`, so the
    /// submission rides on the wait: one `io_uring_enter` instead of two.
    #[inline(always)]
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        if self.sqpoll || min == 0 {
            self.commit()?;
            return self.reap_inline(min, max, f);
        }
        let n = self.reap_inline(min, max, f)?;
        if self.unsubmitted > 0 {
            // Completions were already there, so reap never entered: submit now. Once
            // callbacks ran the reap must report them; a failed submit shows again at the
            // next commit.
            match self.commit() {
                Err(e) if n == 0 => return Err(e),
                _ => {}
            }
        }
        Ok(n)
    }
}

impl IoUringQueue {
    /// [`AsyncQueue::reap`], inlined into both reaping entry points. A failure to enter
    /// after callbacks ran is not reported (the trait's contract): the next reap meets it.
    #[inline(always)]
    fn reap_inline(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        let mut n = 0;
        if !self.ready.is_empty() {
            n = self.hand_out_ready(max, f);
        }
        let min = min.min(max).min(n.saturating_add(self.inflight));
        let mut entered = false;
        // Without SQPOLL the kernel has seen none of the SQEs still in the SQ: when those
        // are all the commands in flight, no CQE can be waiting and the first look is
        // skipped.
        let mut look = self.sqpoll || self.inflight != self.unsubmitted;
        loop {
            if look && n < max {
                n += self.take_cqes(max - n, f);
            }
            look = true;
            if n >= max || self.inflight == 0 {
                break;
            }
            let want = if n >= min {
                // With IOPOLL nothing completes unless someone polls: poll once. With
                // COOP_TASKRUN, completions of punted work wait for an enter.
                if entered || !(self.iopoll || self.taskrun()) {
                    break;
                }
                0
            } else {
                min - n
            };
            if let Err(errno) = self.enter_wait(want) {
                return if n > 0 { Ok(n) } else { Err(self.wait_failed(errno)) };
            }
            entered = true;
        }
        Ok(n)
    }
}

impl Drop for IoUringQueue {
    fn drop(&mut self) {
        // Queue::drop drains first; this is the safety net. Wait for every command the
        // kernel may still be working on, so no buffer is freed under it.
        let mut sink = |c: Completion| drop(c);
        while self.inflight > 0 {
            let want = self.inflight.saturating_add(self.ready.len() as u32);
            if self.reap(want, u32::MAX, &mut sink).is_err() {
                // Cannot prove the kernel is done: leak the data (and the iovec arrays)
                // of the commands in flight rather than free memory it may write into.
                for s in self.slots.iter_mut().filter(|s| s.kind != Kind::Free) {
                    std::mem::forget(std::mem::take(&mut s.data));
                }
                std::mem::forget(std::mem::take(&mut self.slots));
                return;
            }
        }
    }
}

/// The registered-buffer table: which buffer (by id) each entry of the kernel's sparse
/// table holds, how many commands in flight use it, and an id → entry map.
struct RegTable {
    /// Buffer id registered at each entry (0: empty; buffer ids start at 1).
    ids: Box<[u64]>,
    /// Commands in flight using each entry.
    users: Box<[u32]>,
    map: IdMap,
    /// Entries handed out so far (entries past it were never registered).
    filled: usize,
    /// Clock hand for choosing an entry to replace.
    hand: usize,
    /// Registrations made (one syscall each).
    registrations: u64,
}

impl RegTable {
    fn new(len: usize) -> RegTable {
        RegTable {
            ids: vec![0; len].into_boxed_slice(),
            users: vec![0; len].into_boxed_slice(),
            map: IdMap::new(len),
            filled: 0,
            hand: 0,
            registrations: 0,
        }
    }

    /// The table entry holding `buf`, registering it first if needed (one syscall,
    /// counted in `syscalls`); None when the command must use a plain read/write (buffer
    /// too large to register, or every entry in use). Marks the entry used.
    fn index_for(&mut self, sub: &Submitter<'_>, buf: &Buffer, syscalls: &mut u64) -> io::Result<Option<u16>> {
        let id = buf.id();
        if buf.len() > MAX_REG_BYTES || id == 0 {
            // Too large, or borrowed caller memory (id 0, Buffer::borrow_raw).
            return Ok(None);
        }
        if let Some(e) = self.map.get(id) {
            self.users[e as usize] += 1;
            return Ok(Some(e));
        }
        let Some(e) = self.victim() else { return Ok(None) };
        let old = std::mem::replace(&mut self.ids[e], 0);
        if old != 0 {
            self.map.remove(old);
        }
        let iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
        *syscalls += 1;
        // SAFETY: the iovec covers exactly `buf`, which is alive now. The kernel pins its
        // pages, so the registration itself never touches freed memory; and the kernel
        // only writes through it for a command naming entry `e`, which this table hands
        // out only for the buffer whose id is recorded here, while that buffer is owned
        // by the command's slot. The previous registration at `e` had no user.
        unsafe { sub.register_buffers_update(e as u32, std::slice::from_ref(&iov), None) }?;
        self.registrations += 1;
        self.ids[e] = id;
        self.map.insert(id, e as u16);
        self.users[e] += 1;
        Ok(Some(e as u16))
    }

    /// An entry to (re)register: a never-used one, else one no command in flight uses.
    fn victim(&mut self) -> Option<usize> {
        let len = self.ids.len();
        if self.filled < len {
            self.filled += 1;
            return Some(self.filled - 1);
        }
        for _ in 0..len {
            let e = self.hand;
            self.hand = (self.hand + 1) % len;
            if self.users[e] == 0 {
                return Some(e);
            }
        }
        None
    }

    fn unuse(&mut self, e: usize) {
        if let Some(u) = self.users.get_mut(e) {
            *u = u.saturating_sub(1);
        }
    }
}

/// A fixed-capacity map from buffer id (non-zero) to table entry: open addressing with
/// linear probing and backward-shift deletion, at most half full, never allocating after
/// creation.
struct IdMap {
    keys: Box<[u64]>,
    vals: Box<[u16]>,
    mask: usize,
    shift: u32,
}

impl IdMap {
    /// A map for up to `n` ids.
    fn new(n: usize) -> IdMap {
        let cap = (n.max(1) * 2).next_power_of_two();
        IdMap {
            keys: vec![0; cap].into_boxed_slice(),
            vals: vec![0; cap].into_boxed_slice(),
            mask: cap - 1,
            shift: 64 - cap.trailing_zeros(),
        }
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        // Fibonacci hashing: the top bits of the product.
        (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift.min(63)) as usize & self.mask
    }

    #[inline]
    fn get(&self, id: u64) -> Option<u16> {
        let mut i = self.home(id);
        loop {
            match self.keys[i] {
                k if k == id => return Some(self.vals[i]),
                0 => return None,
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    fn insert(&mut self, id: u64, v: u16) {
        let mut i = self.home(id);
        while self.keys[i] != 0 && self.keys[i] != id {
            i = (i + 1) & self.mask;
        }
        self.keys[i] = id;
        self.vals[i] = v;
    }

    fn remove(&mut self, id: u64) {
        let mut i = self.home(id);
        loop {
            match self.keys[i] {
                0 => return,
                k if k == id => break,
                _ => i = (i + 1) & self.mask,
            }
        }
        // Shift later members of the probe run back into the hole when their home allows.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let k = self.keys[j];
            if k == 0 {
                break;
            }
            let home = self.home(k);
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.keys[hole] = k;
                self.vals[hole] = self.vals[j];
                hole = j;
            }
        }
        self.keys[hole] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::DsmRange;
    use crate::{Device, Opts, Queue, Sqe};
    use std::path::Path;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A file path removed when the test ends.
    struct TempPath(PathBuf);

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = fs::remove_file(&self.0);
        }
    }

    impl TempPath {
        fn new(dir: &Path, name: &str) -> TempPath {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            TempPath(dir.join(format!("ioswitch-io_uring-{}-{n}-{name}.img", std::process::id())))
        }
        fn uri(&self) -> &str {
            self.0.to_str().expect("temp paths are UTF-8")
        }
    }

    fn opts(s: &str) -> Opts {
        s.parse().expect("test options parse")
    }

    fn open(t: &TempPath, o: &str) -> Device {
        Device::open(t.uri(), &opts(o)).unwrap_or_else(|e| panic!("open {} with {o}: {e}", t.uri()))
    }

    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (seed as usize * 131 + i * 7 + (i >> 9)) as u8 | 1).collect()
    }

    fn filled(dev: &Device, seed: u64, len: usize) -> Buffer {
        let mut b = dev.alloc(len).unwrap();
        b.copy_from_slice(&pattern(seed, len));
        b
    }

    /// Reads `len` bytes at `off` through the sync interface.
    fn sync_read(dev: &Device, off: u64, len: usize) -> Vec<u8> {
        let mut b = [dev.alloc(len).unwrap()];
        assert_eq!(dev.pass(&Cmd::fs_read(off, len as u64), &mut b).unwrap(), len as u64);
        b[0].to_vec()
    }

    /// Writes 16 blocks of `bs` bytes at queue depth 16, reads them back through the queue
    /// and through psync, and compares.
    fn write_read_qd16(dev: &Device, bs: usize) {
        let mut q = dev.queue(16).unwrap();
        for i in 0..16u64 {
            q.submit(&Cmd::fs_write(i * bs as u64, bs as u64), filled(dev, i, bs).into(), i).unwrap();
        }
        assert_eq!(q.outstanding(), 16);
        let mut n = 0;
        q.drain(|c| {
            assert!(c.status.is_ok(), "write {}: {}", c.tag, c.status);
            assert_eq!(c.result, bs as u64);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 16);
        for i in 0..16u64 {
            q.submit(&Cmd::fs_read(i * bs as u64, bs as u64), dev.alloc(bs).unwrap().into(), 100 + i).unwrap();
        }
        let mut seen = 0u32;
        q.drain(|c| {
            assert!(c.status.is_ok(), "read {}: {}", c.tag, c.status);
            assert_eq!(c.result, bs as u64);
            let b = c.data.into_one().unwrap();
            assert!(b[..] == pattern(c.tag - 100, bs)[..], "read {} returned other data", c.tag);
            seen |= 1 << (c.tag - 100);
        })
        .unwrap();
        assert_eq!(seen, 0xffff);
        for i in 0..16u64 {
            assert!(sync_read(dev, i * bs as u64, bs) == pattern(i, bs));
        }
        assert_eq!(q.stats().submitted, 32);
        assert_eq!(q.stats().completed, 32);
    }

    #[test]
    fn write_then_read_back_at_qd16() {
        let t = TempPath::new(&std::env::temp_dir(), "qd16");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        assert_eq!(dev.interfaces().r#async, Some(crate::AsyncIface::IoUring));
        write_read_qd16(&dev, 4096);
    }

    #[test]
    fn write_then_read_back_on_dev_shm() {
        let t = TempPath::new(Path::new("/dev/shm"), "shm");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        write_read_qd16(&dev, 8192);
    }

    #[test]
    fn single_issuer_rings_work_on_their_thread_and_refuse_another() {
        if !single_issuer_supported() {
            eprintln!("skip: this kernel has no IORING_SETUP_DEFER_TASKRUN (Linux 6.1)");
            return;
        }
        let t = TempPath::new(&std::env::temp_dir(), "single");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB,single_issuer=1");
        write_read_qd16(&dev, 4096);
        // A queue used from a thread other than its creator's: a clear error, no hang.
        let mut q = dev.queue(2).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                q.submit(&Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 1).unwrap();
                let e = q.wait(1, |_| {}).unwrap_err().to_string();
                assert!(e.contains("only the thread that created the queue"), "{e}");
            });
        });
        let e = Device::open(&t.0.to_string_lossy(), &"async=io_uring,single_issuer=1,sqpoll=1".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("SQPOLL"), "{e}");
    }

    #[test]
    fn nvm_commands_with_fua_work() {
        let t = TempPath::new(&std::env::temp_dir(), "nvm");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let nsid = dev.ident().nsid;
        let mut q = dev.queue(4).unwrap();
        q.submit(&Cmd::write(nsid, 8, 8).fua(), filled(&dev, 3, 4096).into(), 1).unwrap();
        q.submit(&Cmd::write(nsid, 16, 8), filled(&dev, 4, 4096).into(), 2).unwrap();
        q.drain(|c| assert!(c.status.is_ok() && c.result == 4096, "{}", c.status)).unwrap();
        q.submit(&Cmd::read(nsid, 8, 16), dev.alloc(8192).unwrap().into(), 3).unwrap();
        q.drain(|c| {
            let b = c.data.into_one().unwrap();
            assert!(b[..4096] == pattern(3, 4096)[..] && b[4096..] == pattern(4, 4096)[..]);
        })
        .unwrap();
    }

    #[test]
    fn vectored_read_and_write() {
        let t = TempPath::new(&std::env::temp_dir(), "vec");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let whole = pattern(9, 16384);
        let parts: Vec<Buffer> = [(0, 4096), (4096, 12288), (12288, 16384)]
            .iter()
            .map(|&(a, b)| Buffer::from_slice(&whole[a..b], 4096).unwrap())
            .collect();
        let mut q = dev.queue(4).unwrap();
        q.submit(&Cmd::fs_write(65536, 16384), parts.into(), 1).unwrap();
        q.drain(|c| assert!(c.status.is_ok() && c.result == 16384, "{} {}", c.status, c.result)).unwrap();
        assert!(sync_read(&dev, 65536, 16384) == whole);
        // Read back split differently, with more buffer space than the transfer: the
        // iovecs are clipped to the command's length.
        let bufs = vec![dev.alloc(8192).unwrap(), dev.alloc(4096).unwrap(), dev.alloc(8192).unwrap()];
        q.submit(&Cmd::fs_read(65536, 16384), bufs.into(), 2).unwrap();
        q.drain(|c| {
            assert!(c.status.is_ok() && c.result == 16384, "{} {}", c.status, c.result);
            let got: Vec<u8> = c.data.bufs().iter().flat_map(|b| b.iter().copied()).collect();
            assert!(got[..16384] == whole[..]);
            assert!(got[16384..].iter().all(|&x| x == 0));
        })
        .unwrap();
        // A list of one buffer goes the single-buffer way.
        q.submit(&Cmd::fs_read(65536, 4096), vec![dev.alloc(4096).unwrap()].into(), 3).unwrap();
        q.drain(|c| assert!(c.status.is_ok() && c.data.bufs()[0][..] == whole[..4096])).unwrap();
    }

    #[test]
    fn flush_completes() {
        let t = TempPath::new(&std::env::temp_dir(), "flush");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let mut q = dev.queue(4).unwrap();
        q.submit(&Cmd::fs_write(0, 4096), filled(&dev, 1, 4096).into(), 1).unwrap();
        q.drain(|c| assert!(c.status.is_ok())).unwrap();
        q.submit(&Cmd::fs_flush(), Data::None, 2).unwrap();
        q.submit(&Cmd::flush(dev.ident().nsid), Data::None, 3).unwrap();
        let mut n = 0;
        q.drain(|c| {
            assert!(c.status.is_ok(), "flush: {}", c.status);
            assert_eq!(c.result, 0);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 2);
    }

    /// Trim, write zeroes and DSM deallocate on a file, then the ranges read back as zeroes
    /// and the rest is untouched.
    fn trims_read_back_zeroes(dir: &Path) {
        let t = TempPath::new(dir, "trim");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let nsid = dev.ident().nsid;
        let data = pattern(5, 1 << 18);
        assert_eq!(
            dev.pass(&Cmd::fs_write(0, 1 << 18), &mut [Buffer::from_slice(&data, 4096).unwrap()]).unwrap(),
            1 << 18
        );
        let mut q = dev.queue(8).unwrap();
        q.submit(&Cmd::fs_trim(16384, 16384), Data::None, 1).unwrap();
        // 512-byte LBAs: LBAs 128..160 are bytes 65536..81920.
        q.submit(&Cmd::write_zeroes(nsid, 128, 32), Data::None, 2).unwrap();
        q.submit(&Cmd::write_zeroes(nsid, 256, 32), Data::None, 3).unwrap();
        let mut ranges = dev.alloc(4096).unwrap();
        ranges[..16].copy_from_slice(&DsmRange { cattr: 0, nlb: 16, slba: 320 }.to_bytes());
        ranges[16..32].copy_from_slice(&DsmRange { cattr: 0, nlb: 16, slba: 400 }.to_bytes());
        q.submit(&Cmd::dsm(nsid, 2, true), ranges.into(), 4).unwrap();
        let mut n = 0;
        q.drain(|c| {
            assert!(c.status.is_ok(), "command {}: {}", c.tag, c.status);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 4);
        let got = sync_read(&dev, 0, 1 << 18);
        let zero = |a: usize, b: usize| (a..b).all(|i| got[i] == 0);
        let same = |a: usize, b: usize| got[a..b] == data[a..b];
        assert!(same(0, 16384) && zero(16384, 32768) && same(32768, 65536));
        assert!(zero(65536, 81920) && same(81920, 131072));
        assert!(zero(131072, 147456) && same(147456, 163840));
        assert!(zero(163840, 172032) && same(172032, 204800) && zero(204800, 212992) && same(212992, 1 << 18));
        // Write zeroes again: on tmpfs the first one learnt that zero range is missing.
        q.submit(&Cmd::write_zeroes(nsid, 0, 8), Data::None, 5).unwrap();
        q.drain(|c| assert!(c.status.is_ok(), "{}", c.status)).unwrap();
        assert!(sync_read(&dev, 0, 4096).iter().all(|&x| x == 0));
    }

    #[test]
    fn trim_and_write_zeroes_on_a_file_read_back_zeroes() {
        trims_read_back_zeroes(&std::env::temp_dir());
    }

    #[test]
    fn trim_and_write_zeroes_on_tmpfs_read_back_zeroes() {
        trims_read_back_zeroes(Path::new("/dev/shm"));
    }

    #[test]
    fn register_files_reads_and_writes() {
        let t = TempPath::new(&std::env::temp_dir(), "regfiles");
        let dev = open(&t, "async=io_uring,register_files=1,create=1,size=1MiB");
        write_read_qd16(&dev, 4096);
        let mut q = dev.queue(2).unwrap();
        q.submit(&Cmd::fs_flush(), Data::None, 1).unwrap();
        q.submit(&Cmd::fs_trim(0, 4096), Data::None, 2).unwrap();
        q.drain(|c| assert!(c.status.is_ok(), "{}", c.status)).unwrap();
    }

    #[test]
    fn register_buffers_through_the_queue() {
        let t = TempPath::new(&std::env::temp_dir(), "regbufs");
        let dev = open(&t, "async=io_uring,register_buffers=1,create=1,size=1MiB");
        write_read_qd16(&dev, 4096);
        // Reuse four buffers for many commands, and then more distinct buffers than the
        // table (16 entries at depth 4) holds.
        let mut q = dev.queue(4).unwrap();
        let mut free: Vec<Buffer> = (0..4).map(|i| filled(&dev, i, 4096)).collect();
        for round in 0..40u64 {
            while let Some(b) = free.pop() {
                let off = (round % 16) * 16384 + (free.len() as u64) * 4096;
                q.submit(&Cmd::fs_write(off, 4096), b.into(), off).unwrap();
            }
            q.drain(|c| {
                assert!(c.status.is_ok(), "{}", c.status);
                free.push(c.data.into_one().unwrap());
            })
            .unwrap();
        }
        for i in 0..40u64 {
            q.submit(&Cmd::fs_write(i * 4096, 4096), filled(&dev, 1000 + i, 4096).into(), i).unwrap();
            if q.outstanding() == 4 {
                q.wait(1, |c| assert!(c.status.is_ok(), "{}", c.status)).unwrap();
            }
        }
        q.drain(|c| assert!(c.status.is_ok(), "{}", c.status)).unwrap();
        for i in 0..40u64 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
            if q.outstanding() == 4 {
                q.wait(4, |c| assert!(c.data.bufs()[0][..] == pattern(1000 + c.tag, 4096)[..])).unwrap();
            }
        }
        q.drain(|c| assert!(c.data.bufs()[0][..] == pattern(1000 + c.tag, 4096)[..])).unwrap();
    }

    /// Runs one command on a backend queue directly and returns its completion.
    fn run(q: &mut IoUringQueue, dev: &Device, cmd: &Cmd, data: Data, tag: u64) -> Completion {
        let io = crate::be::prepare(&dev.inner, cmd, data.bufs()).unwrap();
        q.submit(&io, cmd, data, tag).map_err(|(e, _)| e).unwrap();
        q.commit().unwrap();
        let mut out = None;
        assert_eq!(q.reap(1, 1, &mut |c| out = Some(c)).unwrap(), 1);
        out.unwrap()
    }

    /// Submits a command to the backend directly (no commit).
    fn put(q: &mut IoUringQueue, dev: &Device, cmd: &Cmd, data: Data, tag: u64) -> Result<(), Error> {
        let io = crate::be::prepare(&dev.inner, cmd, data.bufs()).unwrap();
        q.submit(&io, cmd, data, tag).map_err(|(e, _)| e)
    }

    /// Every slot free, on the free list once, nothing in flight or queued.
    fn assert_idle(q: &IoUringQueue) {
        assert_eq!(q.inflight, 0);
        assert_eq!(q.unsubmitted, 0);
        assert!(q.ready.is_empty());
        let mut seen = vec![false; q.slots.len()];
        let mut i = q.free_head;
        while i != NO_SLOT {
            assert!(!seen[i as usize], "slot {i} twice on the free list");
            seen[i as usize] = true;
            i = q.slots[i as usize].next_free;
        }
        assert!(seen.iter().all(|&x| x), "a slot is missing from the free list");
        for s in q.slots.iter() {
            assert!(s.kind == Kind::Free && s.expect == NO_EXPECT && s.reg == NO_REG);
            assert!(matches!(s.data, Data::None));
        }
    }

    #[test]
    fn a_panicking_callback_mid_batch_leaves_the_rest_for_the_next_reap() {
        let t = TempPath::new(Path::new("/dev/shm"), "panic");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        for i in 0..16u64 {
            dev.pass(&Cmd::fs_write(i * 4096, 4096), &mut [filled(&dev, i, 4096)]).unwrap();
        }
        let mut q = IoUringQueue::new(&dev.inner, 16).unwrap();
        for i in 0..16u64 {
            put(&mut q, &dev, &Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        // Submit and wait until all 16 CQEs are in the ring, without reaping any.
        while q.unsubmitted > 0 || q.ring.completion().len() < 16 {
            q.enter_wait(16).unwrap();
        }
        let mut seen = Vec::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.reap(1, u32::MAX, &mut |c: Completion| {
                seen.push(c.tag);
                if seen.len() == 5 {
                    panic!("callback panics");
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!(seen.len(), 5);
        assert_eq!(q.inflight, 11);
        let mut rest = Vec::new();
        let n = q
            .reap(11, u32::MAX, &mut |c: Completion| {
                assert!(c.status.is_ok() && c.result == 4096, "{}", c.status);
                assert!(c.data.bufs()[0][..] == pattern(c.tag, 4096)[..], "read {} returned other data", c.tag);
                rest.push(c.tag);
            })
            .unwrap();
        assert_eq!(n, 11);
        seen.extend(rest);
        seen.sort_unstable();
        assert_eq!(seen, (0..16).collect::<Vec<u64>>(), "a completion lost or handed out twice");
        assert_idle(&q);
        // Again, and this time the queue is dropped with the rest still in the ring.
        for i in 0..16u64 {
            put(&mut q, &dev, &Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        q.commit().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.reap(1, u32::MAX, &mut |_| panic!("callback panics"))
        }));
        assert!(r.is_err());
        assert_eq!(q.inflight, 15);
        drop(q);
        // Through a Queue: a panicking callback, then the drop does not hang.
        let mut q = dev.queue(16).unwrap();
        for i in 0..16u64 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        let mut k = 0;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.drain(|_| {
                k += 1;
                if k == 3 {
                    panic!("callback panics");
                }
            })
        }));
        assert!(r.is_err());
        drop(q);
    }

    #[test]
    fn one_slot_reused_by_every_kind_of_command_keeps_its_data_right() {
        let t = TempPath::new(&std::env::temp_dir(), "reuse");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let nsid = dev.ident().nsid;
        // The file ends 2048 bytes short of the device: the last read of each round is short.
        fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len((1 << 20) - 2048).unwrap();
        let mut q = IoUringQueue::new(&dev.inner, 1).unwrap();
        let read = |q: &mut IoUringQueue, off: u64, len: usize| -> Vec<u8> {
            let c = run(q, &dev, &Cmd::fs_read(off, len as u64), dev.alloc(len).unwrap().into(), 7);
            assert!(c.status.is_ok() && c.result == len as u64, "{} {}", c.status, c.result);
            assert_eq!(c.tag, 7);
            c.data.into_one().unwrap().to_vec()
        };
        for round in 0..3u64 {
            let base = round * 131072;
            // One-buffer write, then read.
            let c = run(&mut q, &dev, &Cmd::fs_write(base, 4096), filled(&dev, round, 4096).into(), 1);
            assert!(c.status.is_ok() && c.result == 4096 && c.tag == 1);
            assert_eq!(c.data.total_len(), 4096);
            assert!(read(&mut q, base, 4096) == pattern(round, 4096));
            // FUA write (NVM command: 512-byte LBAs).
            let c =
                run(&mut q, &dev, &Cmd::write(nsid, base / 512 + 8, 8).fua(), filled(&dev, 10 + round, 4096).into(), 2);
            assert!(c.status.is_ok() && c.result == 4096 && c.tag == 2, "{}", c.status);
            assert!(read(&mut q, base + 4096, 4096) == pattern(10 + round, 4096));
            // Vectored write and read.
            let whole = pattern(20 + round, 12288);
            let parts: Vec<Buffer> =
                (0..3).map(|i| Buffer::from_slice(&whole[i * 4096..(i + 1) * 4096], 4096).unwrap()).collect();
            let c = run(&mut q, &dev, &Cmd::fs_write(base + 8192, 12288), parts.into(), 3);
            assert!(c.status.is_ok() && c.result == 12288 && c.tag == 3, "{}", c.status);
            let bufs = vec![dev.alloc(8192).unwrap(), dev.alloc(4096).unwrap()];
            let c = run(&mut q, &dev, &Cmd::fs_read(base + 8192, 12288), bufs.into(), 4);
            assert!(c.status.is_ok() && c.result == 12288 && c.tag == 4, "{}", c.status);
            let got: Vec<u8> = c.data.bufs().iter().flat_map(|b| b.iter().copied()).collect();
            assert!(got == whole);
            assert!(read(&mut q, base, 4096) == pattern(round, 4096));
            // Flush, trim, write zeroes.
            let c = run(&mut q, &dev, &Cmd::fs_flush(), Data::None, 5);
            assert!(c.status.is_ok() && c.result == 0 && c.tag == 5);
            let c = run(&mut q, &dev, &Cmd::fs_trim(base, 4096), Data::None, 6);
            assert!(c.status.is_ok() && c.tag == 6);
            assert!(read(&mut q, base, 4096).iter().all(|&x| x == 0));
            let c = run(&mut q, &dev, &Cmd::write_zeroes(nsid, base / 512 + 8, 8), Data::None, 8);
            assert!(c.status.is_ok() && c.tag == 8);
            assert!(read(&mut q, base + 4096, 4096).iter().all(|&x| x == 0));
            // An inline command (DSM) holds the slot until it is handed out.
            let mut ranges = dev.alloc(4096).unwrap();
            ranges[..16].copy_from_slice(&DsmRange { cattr: 0, nlb: 8, slba: base / 512 + 16 }.to_bytes());
            put(&mut q, &dev, &Cmd::dsm(nsid, 1, true), ranges.into(), 9).unwrap();
            let busy = put(&mut q, &dev, &Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 10).unwrap_err();
            assert!(matches!(busy, Error::Busy { depth: 1 }), "{busy}");
            let mut out = None;
            assert_eq!(q.reap(1, 1, &mut |c| out = Some(c)).unwrap(), 1);
            let c = out.unwrap();
            assert!(c.status.is_ok() && c.tag == 9 && c.data.total_len() == 4096, "{}", c.status);
            assert!(read(&mut q, base + 8192, 4096).iter().all(|&x| x == 0));
            assert!(read(&mut q, base + 12288, 8192) == whole[4096..]);
            // A read over the end of the file: short, EIO with the bytes moved.
            let c = run(&mut q, &dev, &Cmd::fs_read((1 << 20) - 4096, 4096), dev.alloc(4096).unwrap().into(), 11);
            assert_eq!(c.status.errno(), Some(libc::EIO), "{}", c.status);
            assert_eq!(c.result, 2048);
            assert_idle(&q);
        }
    }

    #[test]
    fn a_reap_that_finds_completions_submits_what_is_queued() {
        let t = TempPath::new(&std::env::temp_dir(), "ridealong");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let mut q = IoUringQueue::new(&dev.inner, 4).unwrap();
        for i in 0..2u64 {
            put(&mut q, &dev, &Cmd::fs_write(i * 4096, 4096), filled(&dev, i, 4096).into(), i).unwrap();
        }
        assert_eq!(q.unsubmitted, 2);
        while q.unsubmitted > 0 || q.ring.completion().len() < 2 {
            q.enter_wait(2).unwrap();
        }
        for i in 2..4u64 {
            put(&mut q, &dev, &Cmd::fs_write(i * 4096, 4096), filled(&dev, i, 4096).into(), i).unwrap();
        }
        assert_eq!(q.unsubmitted, 2);
        let before = q.syscalls();
        let mut tags = Vec::new();
        assert_eq!(q.commit_and_reap(1, 1, &mut |c| tags.push(c.tag)).unwrap(), 1);
        // One completion was there: no wait, one enter to submit the two queued.
        assert_eq!(q.syscalls() - before, 1);
        assert_eq!(q.unsubmitted, 0);
        assert_eq!(q.inflight, 3);
        while q.inflight > 0 {
            q.commit_and_reap(q.inflight, u32::MAX, &mut |c| {
                assert!(c.status.is_ok() && c.result == 4096);
                tags.push(c.tag);
            })
            .unwrap();
        }
        tags.sort_unstable();
        assert_eq!(tags, [0, 1, 2, 3]);
        assert_idle(&q);
        for i in 0..4u64 {
            assert!(sync_read(&dev, i * 4096, 4096) == pattern(i, 4096));
        }
    }

    #[test]
    fn a_buffer_is_registered_once_and_replaced_buffers_are_registered_afresh() {
        let t = TempPath::new(&std::env::temp_dir(), "regonce");
        let dev = open(&t, "async=io_uring,register_buffers=1,create=1,size=1MiB");
        let mut q = IoUringQueue::new(&dev.inner, 4).unwrap();
        let table = q.reg.as_ref().unwrap().ids.len();
        assert_eq!(table, 16);
        let regs = |q: &IoUringQueue| q.reg.as_ref().unwrap().registrations;
        // One buffer, many commands: one registration.
        let mut b = filled(&dev, 1, 4096);
        for i in 0..20 {
            let c = run(&mut q, &dev, &Cmd::fs_write(i * 4096, 4096), b.into(), i);
            assert!(c.status.is_ok() && c.result == 4096);
            b = c.data.into_one().unwrap();
        }
        assert_eq!(regs(&q), 1);
        let before = q.syscalls();
        let c = run(&mut q, &dev, &Cmd::fs_read(0, 4096), b.into(), 0);
        // One enter to submit, at most one to wait; no registration.
        assert!(q.syscalls() - before <= 2);
        assert_eq!(regs(&q), 1);
        let b = c.data.into_one().unwrap();
        let id = b.id();
        drop(b);
        // A new buffer (perhaps at the same address) has a new id: registered afresh.
        let b2 = filled(&dev, 2, 4096);
        assert_ne!(b2.id(), id);
        let c = run(&mut q, &dev, &Cmd::fs_write(0, 4096), b2.into(), 0);
        assert!(c.status.is_ok());
        assert_eq!(regs(&q), 2);
        // More distinct buffers than the table holds: entries are replaced, data stays right.
        let mut keep = Vec::new();
        for i in 0..(table as u64 * 3) {
            let c = run(&mut q, &dev, &Cmd::fs_write(i * 4096, 4096), filled(&dev, 50 + i, 4096).into(), i);
            assert!(c.status.is_ok());
            keep.push(c.data.into_one().unwrap());
        }
        assert_eq!(regs(&q), 2 + table as u64 * 3);
        for (i, b) in keep.into_iter().enumerate() {
            let mut r = b;
            r.fill(0);
            let c = run(&mut q, &dev, &Cmd::fs_read(i as u64 * 4096, 4096), r.into(), 0);
            assert!(c.status.is_ok());
            assert!(c.data.bufs()[0][..] == pattern(50 + i as u64, 4096)[..], "buffer {i}");
        }
        let t = q.reg.as_ref().unwrap();
        assert!(t.users.iter().all(|&u| u == 0), "entries still marked in use");
    }

    #[test]
    fn write_zeroes_falls_back_to_a_hole_punch_where_zero_range_is_missing() {
        for dir in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
            let t = TempPath::new(&dir, "zr");
            let dev = open(&t, "async=io_uring,create=1,size=1MiB");
            dev.pass(&Cmd::fs_write(0, 8192), &mut [filled(&dev, 1, 8192)]).unwrap();
            let mut q = IoUringQueue::new(&dev.inner, 2).unwrap();
            let c = run(&mut q, &dev, &Cmd::write_zeroes(dev.ident().nsid, 0, 8), Data::None, 1);
            assert!(c.status.is_ok(), "{}: {}", t.uri(), c.status);
            // tmpfs has no FALLOC_FL_ZERO_RANGE; ext4, xfs and btrfs have it.
            let fs_has_it = dev.ident().driver.as_deref() != Some("tmpfs");
            assert_eq!(q.zero_range, fs_has_it, "{}", t.uri());
            let c = run(&mut q, &dev, &Cmd::write_zeroes(dev.ident().nsid, 8, 8), Data::None, 2);
            assert!(c.status.is_ok(), "{}: {}", t.uri(), c.status);
            assert!(sync_read(&dev, 0, 8192).iter().all(|&x| x == 0), "{}", t.uri());
        }
    }

    #[test]
    fn id_map_finds_inserts_and_removes() {
        let mut m = IdMap::new(16);
        for id in 1..=16u64 {
            m.insert(id * 1_000_003, id as u16);
        }
        for id in 1..=16u64 {
            assert_eq!(m.get(id * 1_000_003), Some(id as u16));
        }
        for id in (1..=16u64).step_by(2) {
            m.remove(id * 1_000_003);
        }
        for id in 1..=16u64 {
            let want = if id % 2 == 0 { Some(id as u16) } else { None };
            assert_eq!(m.get(id * 1_000_003), want, "id {id}");
        }
        m.remove(12345);
        for id in 100..108u64 {
            m.insert(id, 7);
        }
        assert_eq!(m.get(104), Some(7));
    }

    #[test]
    fn sqpoll_reads_and_writes() {
        let t = TempPath::new(&std::env::temp_dir(), "sqpoll");
        let dev = match Device::open(t.uri(), &opts("async=io_uring,sqpoll=1,create=1,size=1MiB")) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("skipping sqpoll_reads_and_writes: the kernel refuses SQPOLL here: {e}");
                return;
            }
        };
        write_read_qd16(&dev, 4096);
        let mut q = dev.queue(16).unwrap();
        for i in 0..16u64 {
            q.submit(&Cmd::fs_write(i * 4096, 4096), filled(&dev, i, 4096).into(), i).unwrap();
        }
        q.submit(&Cmd::fs_flush(), Data::None, 99).unwrap_err();
        assert_eq!(q.commit().unwrap(), 16);
        // The poll thread takes the SQEs; a syscall only when it slept and needs waking.
        assert!(q.stats().syscalls <= 1, "{:?}", q.stats());
        q.drain(|c| assert!(c.status.is_ok())).unwrap();
        q.submit(&Cmd::fs_flush(), Data::None, 1).unwrap();
        q.drain(|c| assert!(c.status.is_ok())).unwrap();
    }

    #[test]
    fn sqpoll_cpu_must_exist() {
        let t = TempPath::new(&std::env::temp_dir(), "sqcpu");
        let e = Device::open(t.uri(), &opts("async=io_uring,sqpoll=1,sqpoll_cpu=4095,create=1,size=1MiB"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(t.uri()) && e.contains("4095"), "{e}");
    }

    #[test]
    fn iopoll_is_refused_at_open_without_poll_queues() {
        let t = TempPath::new(&std::env::temp_dir(), "iopoll");
        match Device::open(t.uri(), &opts("async=io_uring,iopoll=1,direct=1,create=1,size=1MiB")) {
            Ok(_) => eprintln!("skipping the iopoll refusal: the disk under the temp dir has poll queues"),
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains(t.uri()) && e.contains("no poll queues") && e.contains("iopoll"), "{e}");
            }
        }
        let e = Device::open(t.uri(), &opts("async=io_uring,iopoll=1,create=1,size=1MiB")).unwrap_err().to_string();
        assert!(e.contains(t.uri()) && e.contains("direct=1"), "{e}");
        let s = TempPath::new(Path::new("/dev/shm"), "iopoll");
        let e = Device::open(s.uri(), &opts("async=io_uring,iopoll=1,direct=1,create=1,size=1MiB"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(s.uri()), "{e}");
    }

    #[test]
    fn direct_io_on_a_disk_file() {
        let t = TempPath::new(&std::env::temp_dir(), "direct");
        let dev = match Device::open(t.uri(), &opts("async=io_uring,direct=1,create=1,size=1MiB")) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("skipping direct_io_on_a_disk_file: the temp dir takes no O_DIRECT: {e}");
                return;
            }
        };
        write_read_qd16(&dev, 4096);
        let align = dev.geometry().dio_mem_align as usize;
        if align > 1 {
            let bad = Buffer::with_alignment(4096, 4096, align / 2).unwrap();
            let mut q = dev.queue(1).unwrap();
            let r = q.submit(&Cmd::fs_write(0, 4096), bad.into(), 1).unwrap_err();
            assert!(r.to_string().contains("aligned"), "{r}");
        }
        // Registered buffers with direct I/O.
        let dev2 = open(&t, "async=io_uring,direct=1,register_buffers=1,register_files=1");
        write_read_qd16(&dev2, 8192);
    }

    #[test]
    fn sixteen_submissions_and_one_commit_cost_one_syscall() {
        let t = TempPath::new(&std::env::temp_dir(), "syscalls");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let mut q = dev.queue(16).unwrap();
        for i in 0..16u64 {
            q.submit(&Cmd::fs_write(i * 4096, 4096), filled(&dev, i, 4096).into(), i).unwrap();
        }
        assert_eq!(q.stats().syscalls, 0);
        assert_eq!(q.commit().unwrap(), 16);
        assert_eq!(q.stats().syscalls, 1);
        assert_eq!(q.commit().unwrap(), 0);
        assert_eq!(q.stats().syscalls, 1);
        q.drain(|c| assert!(c.status.is_ok())).unwrap();
        assert!(q.stats().syscalls >= 1);
    }

    #[test]
    fn dropping_a_queue_with_commands_in_flight_is_safe() {
        let t = TempPath::new(&std::env::temp_dir(), "drop");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        {
            let mut q = dev.queue(16).unwrap();
            for i in 0..16u64 {
                q.submit(&Cmd::fs_write(i * 65536, 65536), filled(&dev, i, 65536).into(), i).unwrap();
            }
            q.commit().unwrap();
        }
        for i in 0..16u64 {
            assert!(sync_read(&dev, i * 65536, 65536) == pattern(i, 65536));
        }
        // The backend alone (no Queue draining in front): committed and uncommitted reads
        // in flight when it is dropped.
        let mut q = IoUringQueue::new(&dev.inner, 16).unwrap();
        for i in 0..16u64 {
            let cmd = Cmd::fs_read(i * 65536, 65536);
            let data: Data = dev.alloc(65536).unwrap().into();
            let io = crate::be::prepare(&dev.inner, &cmd, data.bufs()).unwrap();
            q.submit(&io, &cmd, data, i).map_err(|(e, _)| e).unwrap();
            if i == 7 {
                q.commit().unwrap();
            }
        }
        assert_eq!(q.inflight, 16);
        drop(q);
    }

    #[test]
    fn errors_and_short_transfers_become_completions() {
        let t = TempPath::new(&std::env::temp_dir(), "short");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        // The file shrinks under the device: reads past the new end are short.
        fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len(4096).unwrap();
        let mut q = dev.queue(4).unwrap();
        q.submit(&Cmd::fs_read(0, 8192), dev.alloc(8192).unwrap().into(), 1).unwrap();
        q.submit(&Cmd::fs_read(65536, 4096), dev.alloc(4096).unwrap().into(), 2).unwrap();
        q.drain(|c| {
            assert_eq!(c.status.errno(), Some(libc::EIO), "tag {}: {}", c.tag, c.status);
            assert_eq!(c.result, if c.tag == 1 { 4096 } else { 0 });
        })
        .unwrap();
        // A write on a read-only open is refused before it reaches the kernel, with the
        // data handed back.
        drop(q);
        drop(dev);
        fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len(1 << 20).unwrap();
        let ro = open(&t, "async=io_uring,rdonly=1");
        let mut q = ro.queue(1).unwrap();
        let r = q.submit(&Cmd::fs_write(0, 4096), filled(&ro, 1, 4096).into(), 3).unwrap_err();
        assert!(r.error.to_string().contains("read-only"), "{}", r.error);
        assert_eq!(r.data.total_len(), 4096);
        assert_eq!(q.outstanding(), 0);
    }

    #[test]
    fn passthrough_is_refused_with_the_data_handed_back() {
        let t = TempPath::new(&std::env::temp_dir(), "passthru");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB");
        let mut q: Queue = dev.queue(2).unwrap();
        let cmd = Cmd::io(Sqe { opcode: 0x7e, nsid: dev.ident().nsid, ..Sqe::default() });
        let r = q.submit(&cmd, filled(&dev, 1, 512).into(), 1).unwrap_err();
        let e = r.to_string();
        assert!(e.contains("0x7e") && e.contains("io_uring") && e.contains(t.uri()), "{e}");
        assert_eq!(r.data.total_len(), 512);
        assert_eq!(q.outstanding(), 0);
    }
}
