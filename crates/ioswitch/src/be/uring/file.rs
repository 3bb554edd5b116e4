//! `io_uring`: read/write/readv/writev/fsync/fallocate through an io_uring ring.
//!
//! One ring of 64-byte SQEs per [`Queue`](crate::Queue), a [`Ring`] of the ring core
//! (see [`super`]: setup, slots, commit, reap, drop); this file says how each command
//! becomes an SQE and how its CQE ends it. `submit` fills a slot (the tag, the moved-in
//! [`Data`], the bytes the command must move, a stable iovec array for vectored commands)
//! and writes one SQE; a one-buffer read or write with no registered file or buffer
//! takes a short path, inlined into the caller. A CQE whose result is the slot's expected
//! one (the bytes of a read or write, 0 for fsync and fallocate) completes its command at
//! once; any other result goes through one out-of-line function.
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
//! **Registered buffers** (`register_buffers=1`, see [`super::reg`]): a one-buffer read or
//! write uses `READ_FIXED` / `WRITE_FIXED` with the buffer's entry in the ring's sparse
//! table, registered the first time the buffer is seen. Commands with several buffers use
//! plain `READV`/`WRITEV`, as do buffers over 1 GiB (the kernel's limit for one registered
//! buffer) and the rare command that finds every entry in use. A registered buffer's
//! pages stay pinned until its entry is replaced or the queue is dropped, even after the
//! buffer itself is freed.
//!
//! The `syscalls` counter also counts buffer registrations and the syscalls of inline
//! commands. Dropping the queue with commands in flight waits for them, or leaks their
//! data (see [`super`]).

use super::{check_poll_queues, check_reap_spin, check_sqpoll, check_usable, End, Iface, Ring, Slot};
use crate::be::{bad_command, exec_to_completion, Io, Op};
use crate::be::{Backend, Build, Descriptor, Role};
use crate::buf::{Buffer, Data};
use crate::cmd::{Cmd, CmdSet};
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::spec::{errno_to_status, Status};
use crate::sys::uring::{one_segment, SlotId};
use ::io_uring::{cqueue, squeue, IoUring};
use std::os::fd::RawFd;
use std::sync::Arc;

/// `async=io_uring`: io_uring read/write/readv/writev/fsync.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "io_uring",
    Role::Async,
    "io_uring read/write/readv/writev/fsync",
    crate::be::needs_fd,
    Build::Async { probe, queue: |dev, depth| Ok(Backend::IoUring(Box::new(IoUringQueue::new(dev, depth)?))) },
)
.defaults(&[DevKind::File, DevKind::Block, DevKind::NvmeBlock])
.tunables(super::TUNABLES)
.fio(&["io_uring"])
.usable(crate::be::io_uring_usable);

/// Largest transfer one io_uring read/write carries in full: the kernel cuts each call
/// at `MAX_RW_COUNT` (`INT_MAX` rounded down to a page; this holds for pages up to 64 KiB).
const MAX_RW: u64 = i32::MAX as u64 & !0xffff;
/// Force Unit Access in CDW12 of an NVM write.
const NVM_FUA: u32 = 1 << 30;

/// Checks at open that this interface will work for the device: that io_uring can be
/// created at all, and that the tunables asked for are possible (so they fail here, not
/// at the first I/O).
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    check_usable(dev, "async=io_uring")?;
    check_reap_spin::<File>(dev)?;
    let o = &dev.opts;
    if o.iopoll {
        check_iopoll(dev)?;
    }
    if o.sqpoll {
        check_sqpoll::<File>(dev)?;
    }
    if o.single_issuer {
        let iface = "async=io_uring (single_issuer=1)";
        if o.sqpoll {
            return Err(
                dev.unsupported(iface, "deferred task work and an SQPOLL thread exclude each other; choose one")
            );
        }
        if !super::single_issuer_supported() {
            return Err(
                dev.unsupported(iface, "the kernel refused IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN (needs Linux 6.1)")
            );
        }
    }
    if o.register_buffers {
        let ring = IoUring::new(2)
            .map_err(|e| super::queue_error::<File>(dev, "create a ring to probe register_buffers", e))?;
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
    let ((maj, min), what) = disk_devno(dev.raw_fd())
        .map_err(|e| super::queue_error::<File>(dev, "fstat (to find the disk for iopoll)", e))?;
    let Some(disk) = crate::sys::sysfs::disk_dir((maj, min)) else {
        return Err(dev.unsupported(
            iface,
            &format!(
                "no poll queues: there is no block device behind it (device number {maj}:{min}; \
                 a file system such as tmpfs or overlayfs)"
            ),
        ));
    };
    let name = disk.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    check_poll_queues(
        dev,
        iface,
        &disk,
        &format!("the {what}, {name} ({maj}:{min}),"),
        "NVMe gets them with the nvme driver's poll_queues parameter",
    )
}

/// The device number of the disk behind the descriptor, and what that disk is to it:
/// the block device itself, or the disk holding the file.
fn disk_devno(fd: RawFd) -> std::io::Result<((u32, u32), &'static str)> {
    let st = crate::sys::fstat(&fd)?;
    let (devno, what) = if st.st_mode & libc::S_IFMT == libc::S_IFBLK {
        (st.st_rdev, "block device")
    } else {
        (st.st_dev, "disk holding the file")
    };
    Ok(((libc::major(devno), libc::minor(devno)), what))
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
        let disk = disk_devno(fd).ok().and_then(|(devno, _)| crate::sys::sysfs::disk_dir(devno));
        let q = |attr: &str| -> Option<u64> { crate::sys::sysfs::read_num(&disk.as_ref()?.join("queue").join(attr)) };
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
        let page = crate::sys::page_size() as u64;
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

/// A queue of the `io_uring` interface.
pub(crate) type IoUringQueue = Ring<File>;

/// What is particular to the `io_uring` interface in a [`Ring`].
pub(crate) struct File {
    /// One-buffer reads and writes take the fast path in `submit`: no registered file or
    /// buffers, no IOPOLL split check.
    plain: bool,
    /// With IOPOLL: the limits past which a read or write runs inline.
    split: Option<SplitLimits>,
    /// Trim and write zeroes go to the ring as fallocate (a regular file, no IOPOLL).
    fallocate: bool,
    /// FALLOC_FL_ZERO_RANGE works here (cleared by the first EOPNOTSUPP).
    zero_range: bool,
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The slot is free.
    Free,
    /// A read or write: any result but `FileSlot::expect` bytes is a failure.
    Rw,
    /// Fsync or fallocate: any non-negative result is success.
    Other,
    /// Write zeroes as FALLOC_FL_ZERO_RANGE over `FileSlot::zero`; resubmitted as a hole
    /// punch on EOPNOTSUPP.
    ZeroRange,
    /// An inline command: its completion waits in the ring's `ready`; the slot counts it
    /// against the depth until it is handed out.
    Ready,
}

/// `FileSlot::expect` of a slot with no command in the ring: no CQE result equals it.
const NO_EXPECT: u64 = u64::MAX;

/// The `io_uring` state of a slot.
pub(crate) struct FileSlot {
    /// The CQE result (read as `u32`, zero-extended) with which the command is complete
    /// and successful as it stands: the byte count of a read or write, 0 for fsync and
    /// fallocate; NO_EXPECT when the slot has no command in the ring. Every other result
    /// goes through [`outcome`].
    expect: u64,
    kind: Kind,
    /// `Kind::ZeroRange`: offset and length of the range.
    zero: (u64, u64),
}

/// The end of a command whose CQE result is not the expected one (errors, short
/// transfers, positive fsync/fallocate results, the zero-range fallback).
#[cold]
#[inline(never)]
fn outcome(slot: &FileSlot, res: i32) -> End {
    match slot.kind {
        // The ring hands out only CQEs of slots it has in the ring, and those are Rw,
        // Other or ZeroRange: not reached.
        Kind::Free | Kind::Ready => End::Done(errno_to_status(libc::EIO), 0),
        // No zero range on this file system (tmpfs): a punched hole reads back as zeroes,
        // which is what write zeroes promises (as psync does).
        Kind::ZeroRange if res == -libc::EOPNOTSUPP => End::Again,
        _ if res < 0 => End::Done(errno_to_status(res.wrapping_neg()), 0),
        Kind::Rw if res as u64 != slot.expect => End::Done(errno_to_status(libc::EIO), res as u64),
        _ => End::Done(Status::OK, res as u64),
    }
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

impl Iface for File {
    type Sqe = squeue::Entry;
    type Cqe = cqueue::Entry;
    type Slot = FileSlot;
    const NAME: &'static str = "io_uring";
    const SINGLE_ISSUER: bool = true;
    const FIXED_BUFFERS: bool = true;
    const LOCK_IOPOLL_ENTER: bool = false;

    fn new_slot() -> FileSlot {
        FileSlot { expect: NO_EXPECT, kind: Kind::Free, zero: (0, 0) }
    }

    #[inline(always)]
    fn free(slot: &mut FileSlot) {
        slot.kind = Kind::Free;
        slot.expect = NO_EXPECT;
    }

    #[inline(always)]
    fn submit(q: &mut Ring<File>, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if let (true, Op::Read | Op::Write, Data::One(_)) = (q.iface.plain, io.op, &data) {
            if io.len <= MAX_RW {
                return q.submit_one(io, cmd, data, tag);
            }
        }
        q.submit_slow(&{ *io }, cmd, crate::be::own(data), tag)
    }

    #[inline(always)]
    fn end(slot: &Slot<FileSlot>, cqe: &cqueue::Entry) -> End {
        let res = cqe.result();
        if res as u32 as u64 == slot.x.expect {
            End::Done(Status::OK, res as u64)
        } else {
            outcome(&slot.x, res)
        }
    }

    /// A write zeroes that found no zero range goes again as a hole punch; if the SQ does
    /// not take it, the command ends with the EOPNOTSUPP it got.
    fn again(q: &mut Ring<File>, id: SlotId) -> Result<(), (SlotId, Status)> {
        q.iface.zero_range = false;
        let slot = q.uring.meta_mut(&id);
        let (offset, len) = slot.x.zero;
        slot.x.kind = Kind::Other;
        let t = q.target();
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        q.uring.push_fallocate(id, t, offset, len, mode).map_err(|id| (id, errno_to_status(libc::EOPNOTSUPP)))
    }
}

impl Ring<File> {
    /// A read or write with a priority goes through the general path, which writes
    /// `sqe->ioprio` (the fast path leaves it 0); one that would run outside the ring is
    /// refused, since that would lose its priority.
    pub(crate) fn submit_prio(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if !self.uring.has_free_slot() {
            return Err((self.busy(), data));
        }
        if matches!(io.op, Op::Read | Op::Write)
            && io.len <= MAX_RW
            && !self.iface.split.is_some_and(|l| l.splits(io.len, data.bufs()))
        {
            return self.submit_rw(io, cmd, data, tag);
        }
        let why = format!(
            "a read or write of {} bytes runs outside the ring here (longer than one ring operation takes, or \
             split under IOPOLL), which cannot carry its I/O priority; submit shorter commands, or none with a \
             priority",
            io.len
        );
        Err((bad_command(&self.dev, File::NAME, cmd, why), data))
    }

    /// A queue of `depth` slots on a new ring.
    pub(crate) fn new(dev: &Arc<Inner>, depth: u32) -> Result<IoUringQueue, Error> {
        let o = &dev.opts;
        let fd = dev.raw_fd();
        let file = File {
            plain: !o.register_files && !o.register_buffers && !o.iopoll,
            split: o.iopoll.then(|| SplitLimits::of(fd)),
            fallocate: dev.ident.kind == DevKind::File && !o.iopoll,
            zero_range: true,
        };
        Ring::setup(dev, depth, file)
    }

    /// The fast path: a one-buffer read or write with no registered file or buffer.
    #[inline(always)]
    fn submit_one(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let len = io.len as u32; // io.len <= MAX_RW, checked by the caller
        let write = io.op == Op::Write;
        let flags = if write { rw_flags(cmd) } else { 0 };
        let meta = |slot: &mut Slot<FileSlot>| {
            slot.tag = tag;
            slot.x.kind = Kind::Rw;
            slot.x.expect = len as u64;
        };
        match self.uring.push_one(data, write, self.fd, io.offset, len, flags, meta) {
            Ok(()) => {
                self.unsubmitted += 1;
                Ok(())
            }
            // No slot free (the SQ, at least `depth` long, cannot be full).
            Err(data) => Err((self.busy(), data)),
        }
    }

    /// Everything but the fast path.
    #[inline(never)]
    fn submit_slow(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if !self.uring.has_free_slot() {
            return Err((self.busy(), data));
        }
        match io.op {
            Op::Read | Op::Write
                if io.len <= MAX_RW && !self.iface.split.is_some_and(|l| l.splits(io.len, data.bufs())) =>
            {
                self.submit_rw(io, cmd, data, tag)
            }
            Op::Flush if !self.iopoll => self.submit_other(Kind::Other, None, data, tag),
            Op::Trim | Op::WriteZeroes if self.iface.fallocate => {
                let (kind, mode) = match io.op {
                    Op::WriteZeroes if self.iface.zero_range => (Kind::ZeroRange, libc::FALLOC_FL_ZERO_RANGE),
                    _ => (Kind::Other, libc::FALLOC_FL_PUNCH_HOLE),
                };
                let range = (io.offset, io.len, mode | libc::FALLOC_FL_KEEP_SIZE);
                self.submit_other(kind, Some(range), data, tag)
            }
            Op::Passthru => {
                let why = "io_uring carries only read, write, flush, trim, write zeroes and dataset management \
                           here; NVMe passthrough needs async=io_uring_cmd on /dev/ngXnY";
                Err((bad_command(&self.dev, File::NAME, cmd, why), data))
            }
            // Oversized reads and writes (and with IOPOLL those the block layer would
            // split), DSM, and what IOPOLL rings or block devices cannot take as a ring
            // operation.
            _ => self.inline(io, cmd, data, tag),
        }
    }

    /// A read or write in general: several buffers, registered files or buffers.
    fn submit_rw(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let Some(id) = self.uring.take_slot() else { return Err((self.busy(), data)) };
        let write = io.op == Op::Write;
        let rw_flags = if write { rw_flags(cmd) } else { 0 };
        // One buffer for the whole transfer: a registered buffer, with register_buffers=1.
        let fixed = match &mut self.reg {
            Some(t) if one_segment(&data, io.len) => {
                t.index_for(&self.uring.submitter(), &data.bufs()[0], &mut self.syscalls)
            }
            _ => Ok(None),
        };
        let fixed = match fixed {
            Ok(e) => e,
            Err(e) => {
                self.uring.release(id);
                let what = "register a buffer (IORING_REGISTER_BUFFERS_UPDATE)";
                return Err((self.error(what, e), data));
            }
        };
        let slot = self.uring.meta_mut(&id);
        slot.tag = tag;
        slot.x.kind = Kind::Rw;
        slot.x.expect = io.len; // io.len <= MAX_RW, checked by the caller
        if let Some(e) = fixed {
            slot.reg = e as u32;
        }
        self.uring.put(&id, data);
        let t = self.target();
        let pushed = self.uring.push_rw(id, write, t, io.offset, io.len, rw_flags, fixed, cmd.ioprio).map(|_| ());
        self.launched(pushed)
    }

    /// Fsync (`range` None) or fallocate (offset, length, mode): commands with no data in
    /// the ring.
    fn submit_other(
        &mut self,
        kind: Kind,
        range: Option<(u64, u64, i32)>,
        data: Data,
        tag: u64,
    ) -> Result<(), (Error, Data)> {
        let Some(id) = self.uring.take_slot() else { return Err((self.busy(), data)) };
        let slot = self.uring.meta_mut(&id);
        slot.tag = tag;
        slot.x.kind = kind;
        slot.x.expect = 0;
        if let Some((offset, len, _)) = range {
            slot.x.zero = (offset, len);
        }
        self.uring.put(&id, data);
        let t = self.target();
        let pushed = match range {
            None => self.uring.push_fdatasync(id, t),
            Some((offset, len, mode)) => self.uring.push_fallocate(id, t, offset, len, mode),
        };
        self.launched(pushed)
    }

    /// Runs a command now through the sync interface; its completion waits in `ready`,
    /// holding a slot until it is handed out.
    fn inline(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let dev = self.dev.clone();
        let Some(sync) = dev.sync() else {
            let why = "io_uring has no native operation for it here, and the device has no sync interface to run it";
            return Err((bad_command(&self.dev, File::NAME, cmd, why), data));
        };
        let Some(id) = self.uring.take_slot() else { return Err((self.busy(), data)) };
        self.uring.meta_mut(&id).x.kind = Kind::Ready;
        self.syscalls += sync.syscalls_per_cmd();
        let c = exec_to_completion(sync, io, cmd, data, tag);
        self.hold_ready(id, c);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::testutil::queue_of_reads;
    use crate::be::uring::{single_issuer_supported, EnterFault, NO_REG};
    use crate::be::AsyncQueue;
    use crate::cmd::DsmRange;
    use crate::queue::Completion;
    use crate::{Device, Opts, Queue, Sqe};
    use std::fs;
    use std::path::Path;
    use std::path::PathBuf;
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
        // Asked of the kernel through the io-uring crate, not through ioswitch's own probe.
        let kernel_has_it = ::io_uring::IoUring::<::io_uring::squeue::Entry>::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(2)
            .is_ok();
        assert_eq!(single_issuer_supported(), kernel_has_it, "ioswitch's probe disagrees with the kernel");
        if !kernel_has_it {
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
    fn a_submit_on_a_deferred_task_work_ring_posts_what_has_completed() {
        if !single_issuer_supported() {
            eprintln!("skip: this kernel has no IORING_SETUP_DEFER_TASKRUN (Linux 6.1)");
            return;
        }
        let t = TempPath::new(Path::new("/dev/shm"), "defer");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB,single_issuer=1");
        for i in 0..2u64 {
            dev.pass(&Cmd::fs_write(i * 4096, 4096), &mut [filled(&dev, 20 + i, 4096)]).unwrap();
        }
        let mut q = IoUringQueue::new(&dev.inner, 2).unwrap();
        put(&mut q, &dev, &Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 0).unwrap();
        q.commit().unwrap();
        // Without entering the kernel: wait until the first read has completed, either
        // inside the submit (its CQE in the ring) or in an io-wq worker (its completion
        // deferred to this task: IORING_SQ_TASKRUN).
        let start = std::time::Instant::now();
        while q.uring.cq_len() == 0 && !q.uring.taskrun() {
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "the first read never completed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if q.uring.cq_len() > 0 {
            eprintln!("skip: this kernel completed the /dev/shm read inside the submit: no deferred task work to post");
            q.reap(1, 1, &mut |c: Completion| assert!(c.status.is_ok())).unwrap();
            return;
        }
        let calls = q.syscalls;
        put(&mut q, &dev, &Cmd::fs_read(4096, 4096), dev.alloc(4096).unwrap().into(), 1).unwrap();
        q.commit().unwrap();
        assert_eq!(q.syscalls, calls + 1, "one io_uring_enter submits");
        assert!(q.uring.cq_len() >= 1, "the submit did not post the first read's deferred completion");
        let mut seen = Vec::new();
        let check = |seen: &mut Vec<u64>, c: Completion| {
            assert!(c.status.is_ok() && c.result == 4096, "{} {}", c.status, c.result);
            assert!(c.data.bufs()[0][..] == pattern(20 + c.tag, 4096)[..], "read {} returned other data", c.tag);
            seen.push(c.tag);
        };
        // Taken from the CQ ring without a system call.
        assert!(q.take_cqes(2, &mut |c| check(&mut seen, c)) >= 1);
        assert_eq!(q.syscalls, calls + 1);
        assert!(seen.contains(&0), "the first read's completion was not in the ring: {seen:?}");
        while q.uring.inflight() > 0 {
            q.reap(1, 2, &mut |c| check(&mut seen, c)).unwrap();
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1]);
        assert_idle(&q);
    }

    #[test]
    fn reap_spin_takes_a_completion_from_the_ring_without_waiting_in_the_kernel() {
        let t = TempPath::new(Path::new("/dev/shm"), "spin");
        let dev = open(&t, "async=io_uring,create=1,size=1MiB,reap_spin=1s");
        dev.pass(&Cmd::fs_write(0, 4096), &mut [filled(&dev, 30, 4096)]).unwrap();
        let mut q = IoUringQueue::new(&dev.inner, 2).unwrap();
        let mut from_ring = 0;
        for round in 0..20 {
            put(&mut q, &dev, &Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), round).unwrap();
            q.commit().unwrap();
            let (calls, taskrun) = (q.syscalls, q.spin_taskrun);
            let mut got = None;
            assert_eq!(q.reap(1, 1, &mut |c| got = Some(c)).unwrap(), 1);
            let c = got.unwrap();
            assert!(c.status.is_ok() && c.result == 4096 && c.tag == round, "{} {}", c.status, c.result);
            assert!(c.data.bufs()[0][..] == pattern(30, 4096)[..]);
            // io-wq's completion of the tmpfs read reaches the CQ ring by itself on this
            // ring (no DEFER_TASKRUN): the spin finds it, no enter waits for it. The kernel
            // may instead hand a completion to this task as task work (on a busy machine,
            // about one run in six of the whole test binary met it once); it then flags
            // TASKRUN and only an enter posts it: the spin stops and enters, once. A spin
            // that ran out (1 s) would be an enter without the flag.
            let entered = q.syscalls - calls;
            assert_eq!(entered, q.spin_taskrun - taskrun, "round {round}: the reap entered the kernel without TASKRUN");
            assert!(entered <= 1, "round {round}: {entered} enters");
            from_ring += u32::from(entered == 0);
        }
        assert!(from_ring >= 10, "only {from_ring} of 20 completions were taken from the ring without an enter");
        assert_idle(&q);
        // Refused where there is nothing to spin on, and by interfaces without a CQ ring.
        let e =
            Device::open(t.uri(), &opts("async=io_uring,reap_spin=20us,iopoll=1,direct=1")).unwrap_err().to_string();
        assert!(e.contains("reap_spin") && e.contains("iopoll"), "{e}");
        let e = Device::open(t.uri(), &opts("async=libaio,reap_spin=20us")).unwrap_err().to_string();
        assert!(e.contains("reap_spin") && e.contains("io_uring") && e.contains("libaio"), "{e}");
    }

    /// The submit's inlined commit (`commit_inline`, the engine's submit-and-reap call at
    /// min 0) after an enter that took fewer SQEs than were queued, was interrupted, was
    /// refused for now (EAGAIN, EBUSY) or failed: `commit_rest` submits the rest, leaves
    /// it queued, or reports the failure, and every read completes exactly once, with its
    /// data. The kernel really takes fewer SQEs (the test seam caps what the enter gives
    /// it); only the failures are stood in for.
    #[test]
    fn inlined_commit_after_a_partial_or_failed_enter_loses_and_repeats_no_read() {
        use crate::be::uring::EnterFault::{Fail, Take};
        use libc::{EAGAIN, EBUSY, EINTR, EINVAL};
        let t = TempPath::new(Path::new("/dev/shm"), "partial");
        let mut rings = vec!["async=io_uring,create=1,size=1MiB"];
        if single_issuer_supported() {
            rings.push("async=io_uring,create=1,size=1MiB,single_issuer=1");
        } else {
            eprintln!("skip: SINGLE_ISSUER | DEFER_TASKRUN ring: this kernel has none (the default ring is tested)");
        }
        const N: u64 = 4;
        // (faults of the enters in order, the enters the commit makes, the SQEs it leaves
        // queued, whether it fails)
        let cases: [(&[EnterFault], u64, u32, bool); 9] = [
            (&[], 1, 0, false),
            (&[Take(1)], 2, 0, false),
            (&[Take(1), Take(1)], 3, 0, false),
            (&[Take(3)], 2, 0, false),
            (&[Fail(EINTR)], 2, 0, false),
            (&[Take(2), Fail(EINTR)], 3, 0, false),
            (&[Fail(EAGAIN)], 1, N as u32, false),
            (&[Take(1), Fail(EBUSY)], 2, N as u32 - 1, false),
            (&[Fail(EINVAL)], 1, N as u32, true),
        ];
        for o in rings {
            let dev = open(&t, o);
            for i in 0..N {
                dev.pass(&Cmd::fs_write(i * 4096, 4096), &mut [filled(&dev, 50 + i, 4096)]).unwrap();
            }
            let mut q = IoUringQueue::new(&dev.inner, N as u32).unwrap();
            for (round, (faults, enters, left, fails)) in cases.iter().enumerate() {
                let what = format!("{o}, faults {faults:?}");
                let mut seen = Vec::new();
                let mut check = |c: Completion| {
                    assert!(c.status.is_ok() && c.result == 4096, "{what}: read {}: {} {}", c.tag, c.status, c.result);
                    let i = c.tag % N;
                    assert!(c.data.bufs()[0][..] == pattern(50 + i, 4096)[..], "{what}: read {i} returned other data");
                    seen.push(c.tag);
                };
                for i in 0..N {
                    let tag = round as u64 * N + i;
                    put(&mut q, &dev, &Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), tag).unwrap();
                }
                assert_eq!(q.unsubmitted, N as u32);
                q.enter_faults.extend(faults.iter().copied());
                let calls = q.syscalls;
                let r = q.commit_inline();
                match r {
                    Err(e) => {
                        assert!(fails, "{what}: {e}");
                        assert!(e.to_string().contains("io_uring_enter (submit)"), "{what}: {e}");
                    }
                    Ok(()) => assert!(!fails, "{what}: the failed enter was not reported"),
                }
                assert!(q.enter_faults.is_empty(), "{what}: {:?} of the faults were not met", q.enter_faults);
                assert_eq!(q.syscalls - calls, *enters, "{what}: enters");
                assert_eq!(q.unsubmitted, *left, "{what}: SQEs left queued");
                assert_eq!(q.uring.sq_len(), *left, "{what}: the SQ ring disagrees");
                assert_eq!(q.uring.inflight(), N as u32, "{what}: commands in flight");
                // What was left queued goes with the waits.
                while q.uring.inflight() > 0 {
                    q.reap(1, N as u32, &mut check).unwrap();
                }
                seen.sort_unstable();
                let want: Vec<u64> = (0..N).map(|i| round as u64 * N + i).collect();
                assert_eq!(seen, want, "{what}: completions");
                assert_idle(&q);
            }
            // The engine's call: commit_and_reap at min 0 goes through the inlined commit.
            for i in 0..N {
                put(&mut q, &dev, &Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), 1000 + i).unwrap();
            }
            q.enter_faults.extend([Take(1), Fail(EINTR)]);
            let mut seen = Vec::new();
            let mut got = |c: Completion| {
                assert!(c.status.is_ok() && c.result == 4096, "{o}: read {}: {}", c.tag, c.status);
                assert!(c.data.bufs()[0][..] == pattern(50 + c.tag % N, 4096)[..], "{o}: read {} data", c.tag);
                seen.push(c.tag);
            };
            q.commit_and_reap(0, N as u32, &mut got).unwrap();
            assert!(q.enter_faults.is_empty() && q.unsubmitted == 0, "{o}: {:?} {}", q.enter_faults, q.unsubmitted);
            while q.uring.inflight() > 0 {
                q.reap(1, N as u32, &mut got).unwrap();
            }
            seen.sort_unstable();
            assert_eq!(seen, (1000..1000 + N).collect::<Vec<_>>(), "{o}");
            assert_idle(&q);
        }
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
        assert_eq!(q.uring.inflight(), 0);
        assert_eq!(q.unsubmitted, 0);
        assert!(q.ready.is_empty());
        // The free list, the slots' data, nothing in the ring.
        q.uring.assert_idle();
        for i in 0..q.uring.slot_count() as u32 {
            let s = q.uring.meta_at(i).unwrap();
            assert!(s.x.kind == Kind::Free && s.x.expect == NO_EXPECT && s.reg == NO_REG);
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
        while q.unsubmitted > 0 || q.uring.cq_len() < 16 {
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
        assert_eq!(q.uring.inflight(), 11);
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
        assert_eq!(q.uring.inflight(), 15);
        drop(q);
        // Through a Queue: a panicking callback, then the drop does not hang.
        let mut q = queue_of_reads(&dev, 16);
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
        while q.unsubmitted > 0 || q.uring.cq_len() < 2 {
            q.enter_wait(2).unwrap();
        }
        for i in 2..4u64 {
            put(&mut q, &dev, &Cmd::fs_write(i * 4096, 4096), filled(&dev, i, 4096).into(), i).unwrap();
        }
        assert_eq!(q.unsubmitted, 2);
        let before = q.syscalls();
        let mut tags = Vec::new();
        assert_eq!(q.commit_and_reap(1, 1, &mut |c: Completion| tags.push(c.tag)).unwrap(), 1);
        // One completion was there: no wait, one enter to submit the two queued.
        assert_eq!(q.syscalls() - before, 1);
        assert_eq!(q.unsubmitted, 0);
        assert_eq!(q.uring.inflight(), 3);
        while q.uring.inflight() > 0 {
            q.commit_and_reap(q.uring.inflight(), u32::MAX, &mut |c: Completion| {
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
            assert_eq!(q.iface.zero_range, fs_has_it, "{}", t.uri());
            let c = run(&mut q, &dev, &Cmd::write_zeroes(dev.ident().nsid, 8, 8), Data::None, 2);
            assert!(c.status.is_ok(), "{}: {}", t.uri(), c.status);
            assert!(sync_read(&dev, 0, 8192).iter().all(|&x| x == 0), "{}", t.uri());
        }
    }

    #[test]
    fn sqpoll_reads_and_writes() {
        let t = TempPath::new(&std::env::temp_dir(), "sqpoll");
        // Asked of the kernel directly: where it gives this process an SQPOLL ring,
        // ioswitch must open one too.
        if let Err(e) = ::io_uring::IoUring::<::io_uring::squeue::Entry>::builder().setup_sqpoll(1000).build(2) {
            eprintln!("skipping sqpoll_reads_and_writes: the kernel refuses SQPOLL here: {e}");
            return;
        }
        let dev = open(&t, "async=io_uring,sqpoll=1,create=1,size=1MiB");
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
        // Whether the disk under the temp dir polls, from its own sysfs attribute.
        let polls = std::fs::metadata(std::env::temp_dir()).ok().and_then(|m| {
            use std::os::unix::fs::MetadataExt;
            let dir = crate::sys::sysfs::disk_dir((libc::major(m.dev()), libc::minor(m.dev())))?;
            crate::sys::sysfs::read(&dir.join("queue/io_poll"))
        });
        match (Device::open(t.uri(), &opts("async=io_uring,iopoll=1,direct=1,create=1,size=1MiB")), polls.as_deref()) {
            (Ok(_), Some("1")) => {}
            (Ok(_), p) => panic!("iopoll opened on a disk whose queue/io_poll is {p:?}"),
            (Err(e), p) => {
                let e = e.to_string();
                assert_ne!(p, Some("1"), "refused on a disk with poll queues: {e}");
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
        // Asked of the file system directly: where it takes O_DIRECT, ioswitch must too.
        let probe = std::env::temp_dir().join(format!("ioswitch-odirect-{}", std::process::id()));
        let direct = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().write(true).create(true).custom_flags(libc::O_DIRECT).open(&probe)
        };
        let _ = std::fs::remove_file(&probe);
        if let Err(e) = direct {
            eprintln!("skipping direct_io_on_a_disk_file: the temp dir takes no O_DIRECT: {e}");
            return;
        }
        let dev = open(&t, "async=io_uring,direct=1,create=1,size=1MiB");
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
        assert_eq!(q.uring.inflight(), 16);
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
