//! `libaio`: Linux native AIO through the raw syscalls `io_setup(2)`, `io_submit(2)`,
//! `io_getevents(2)` and `io_destroy(2)` — no libaio library is linked.
//!
//! Each queue owns one AIO context sized to its depth and a slot table of `depth` slots,
//! all allocated when the queue is created: per slot an `iocb` with the command's data
//! and tag beside it (one 128-byte entry), and an iovec array for vectored commands. The
//! tables the hot path indexes are a power of two long and indexed through a mask, so an
//! index is always in bounds without a check. `submit` fills the slot's iocb in place
//! (read/write for one buffer, readv/writev for several, fdsync for flush; a write
//! with Force Unit Access carries RWF_DSYNC) and appends its pointer to the array
//! `io_submit` reads; `commit` hands every queued iocb to the kernel in **one**
//! `io_submit` (on a partial submission the rest move to the front and go again);
//! `reap` takes completions with `io_getevents` (blocking when it must wait, a zero
//! timeout when it only looks) into an event array and hands them out one by one from
//! there. The iocb's `aio_data` carries the slot index. If a completion callback panics,
//! the events harvested after it stay in the array: the next reap hands them out, and
//! dropping the queue finishes them before it waits for the rest.
//!
//! Trim, write zeroes and dataset management have no AIO opcode: they run inline, at
//! submit, through the device's sync interface, and their completions wait in a ring
//! (preallocated to `depth`) that `reap` hands out first. NVMe passthrough commands are
//! refused.
//!
//! Syscalls counted: every `io_submit` and `io_getevents` call, plus, for commands run
//! inline, what the sync interface says one command costs.
//!
//! Without O_DIRECT, Linux AIO on most file systems performs the I/O inside `io_submit`
//! (it is asynchronous only for direct I/O): correct, but with no overlap.
//!
//! Dropping a queue reaps everything in flight (or, if that fails, leaks the buffers the
//! kernel may still write), then destroys the context on a short-lived thread, because
//! `io_destroy` waits for an RCU grace period (~30 ms) even on an idle context.

// Raw AIO syscalls and the iocb slots they point into stay here for now: io_submit hands
// the kernel pointers to iocbs and buffers that this queue's slot table keeps alive until
// io_getevents returns them, and moving that ownership into `sys` means rewriting the
// queue (issue 12, part 3: what is left). Every block says why it is sound.
#![allow(unsafe_code)]

use super::{exec_to_completion, fill_iovecs, AsyncQueue, Io, Op, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::Completion;
use crate::spec::{errno_to_status, Status};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, OnceLock};

/// `async=libaio`: Linux AIO (io_setup/io_submit/io_getevents).
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "libaio",
    Role::Async,
    "Linux AIO (io_setup/io_submit/io_getevents)",
    super::needs_fd,
    Build::Async { probe, queue: new_queue },
)
.defaults(&[DevKind::File, DevKind::Block, DevKind::NvmeBlock])
.fio(&["libaio"]);

const IFACE: &str = "async=libaio";

/// `aio_context_t` of linux/aio_abi.h.
type AioContext = libc::c_ulong;

/// `IOCB_CMD_*` opcodes of linux/aio_abi.h.
const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_FDSYNC: u16 = 3;
const IOCB_CMD_PREADV: u16 = 7;
const IOCB_CMD_PWRITEV: u16 = 8;

/// `struct iocb` of linux/aio_abi.h: 64 bytes; `aio_key` and `aio_rw_flags` swap places
/// on big-endian machines.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Iocb {
    aio_data: u64,
    #[cfg(target_endian = "little")]
    aio_key: u32,
    aio_rw_flags: i32,
    #[cfg(target_endian = "big")]
    aio_key: u32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event` of linux/aio_abi.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const _: () = assert!(std::mem::size_of::<Iocb>() == 64);
const _: () = assert!(std::mem::size_of::<IoEvent>() == 32);

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Creates an AIO context for `nr` events.
fn io_setup(nr: u32) -> Result<AioContext, i32> {
    let mut ctx: AioContext = 0;
    // SAFETY: io_setup writes one aio_context_t through the pointer, which is valid and
    // initialised to 0 as the syscall requires.
    let r = unsafe { libc::syscall(libc::SYS_io_setup, nr as libc::c_uint, &mut ctx as *mut AioContext) };
    if r < 0 {
        return Err(last_errno());
    }
    Ok(ctx)
}

fn io_destroy(ctx: AioContext) {
    // SAFETY: ctx came from io_setup and is destroyed once; the kernel waits for requests
    // still in flight before it releases the context.
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
}

/// Destroys an AIO context on a short-lived thread of its own: io_destroy blocks for an
/// RCU grace period (about 30 ms on a small VM) even when nothing is in flight, which
/// would make every queue drop that slow. The caller must be done with the context and
/// with every buffer the kernel could still write (reaped, or leaked on purpose).
fn destroy_in_background(ctx: AioContext) {
    let spawned = std::thread::Builder::new()
        .name("ioswitch-aio-destroy".into())
        .stack_size(64 * 1024)
        .spawn(move || io_destroy(ctx));
    if spawned.is_err() {
        io_destroy(ctx);
    }
}

/// Why io_setup failed, in words, for the open-time probe.
fn setup_failure(errno: i32) -> String {
    let e = io::Error::from_raw_os_error(errno);
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into());
    match errno {
        libc::EAGAIN => format!(
            "io_setup failed ({e}): the system-wide limit of AIO events is exhausted \
             (fs.aio-nr {} of fs.aio-max-nr {}); raise /proc/sys/fs/aio-max-nr or close other AIO users",
            read("/proc/sys/fs/aio-nr"),
            read("/proc/sys/fs/aio-max-nr"),
        ),
        libc::ENOSYS => format!("io_setup failed ({e}): this kernel was built without Linux AIO (CONFIG_AIO)"),
        libc::EPERM => format!("io_setup failed ({e}): AIO syscalls are blocked here (a seccomp filter?)"),
        _ => format!("io_setup failed: {e}"),
    }
}

/// Checks at open that this interface will work for the device: one io_setup and
/// io_destroy, done once per process when it succeeds.
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    static WORKS: OnceLock<()> = OnceLock::new();
    if WORKS.get().is_some() {
        return Ok(());
    }
    match io_setup(1) {
        Ok(ctx) => {
            destroy_in_background(ctx);
            let _ = WORKS.set(());
            Ok(())
        }
        Err(errno) => Err(dev.unsupported(IFACE, &setup_failure(errno))),
    }
}

/// Creates a queue of `depth` slots.
pub(crate) fn new_queue(dev: &Arc<Inner>, depth: u32) -> Result<super::Backend, Error> {
    Ok(super::Backend::Libaio(Box::new(Libaio::new(dev, depth)?)))
}

/// One command's place: the iocb the kernel reads, and beside it, in the same two cache
/// lines, what the command holds meanwhile. The iocb comes first, so a pointer to it is a
/// pointer to its slot.
#[repr(C, align(64))]
struct Slot {
    /// `aio_data` (the slot index) and `aio_fildes` are written once, at creation;
    /// `aio_key`, `aio_reqprio`, `aio_reserved2`, `aio_flags` and `aio_resfd` stay 0 (the
    /// kernel writes 0 into `aio_key`). Submit writes the rest.
    iocb: Iocb,
    data: Data,
    tag: u64,
    /// Bytes the command must move (0 for flush); fewer is a short transfer.
    expect: u64,
    /// Taken by submit (queued, in flight, or its event harvested and not yet handed
    /// out); free again once its completion is made.
    busy: bool,
}

pub(crate) struct Libaio {
    dev: Arc<Inner>,
    ctx: AioContext,
    fd: u32,
    /// The queue's depth: slots `0..depth` are in use; the tables below are `mask + 1`
    /// long (the depth rounded up to a power of two), so `i & mask` is always in bounds.
    depth: u32,
    mask: usize,
    slots: Box<[Slot]>,
    /// One iovec array per slot in use (`depth` of them; only vectored commands, off
    /// the hot path, use them).
    iovecs: Box<[[libc::iovec; MAX_SEGMENTS]]>,
    /// Free slot indices: `free[..nfree]`, each below `depth`.
    free: Box<[u32]>,
    nfree: u32,
    /// The iocb pointer array io_submit reads: `ptrs[..nqueued]` are the commands
    /// submitted and not yet accepted by io_submit, in submission order.
    ptrs: Box<[*mut Iocb]>,
    nqueued: u32,
    /// Events io_getevents harvested: `events[ev_head..ev_len]` are not handed out yet
    /// (a reap asks for no more than it may hand out, so only a callback that panicked
    /// leaves some there).
    events: Box<[IoEvent]>,
    ev_head: u32,
    ev_len: u32,
    /// Completions that did not come from the kernel (inline commands, refused iocbs).
    ready: VecDeque<Completion>,
    /// Commands accepted by io_submit whose events have not been harvested yet.
    in_flight: u32,
    syscalls: u64,
}

// SAFETY: the raw pointers in `ptrs` and in the iocbs/iovecs point into memory this
// struct owns (its slot and iovec tables and the buffers held in its slots); nothing is
// tied to the thread that created it, and the AIO context may be used from any thread.
unsafe impl Send for Libaio {}

impl Libaio {
    fn new(dev: &Arc<Inner>, depth: u32) -> Result<Libaio, Error> {
        let fd = dev.raw_fd();
        if fd < 0 {
            return Err(dev.unsupported(IFACE, "the device has no file descriptor"));
        }
        let ctx = io_setup(depth).map_err(|errno| Error::Queue {
            dev: dev.uri.clone(),
            iface: IFACE,
            what: match errno {
                libc::EAGAIN => {
                    "io_setup: the system-wide AIO event limit (/proc/sys/fs/aio-max-nr) is reached; \
                     raise it, or use fewer or shallower queues"
                }
                _ => "io_setup",
            },
            source: io::Error::from_raw_os_error(errno),
        })?;
        // The masked tables: a power of two long (the entries past depth are never used).
        let n = (depth as usize).next_power_of_two();
        let iov0 = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let fd = fd as u32;
        let slot = |i: usize| Slot {
            iocb: Iocb { aio_data: i as u64, aio_fildes: fd, ..Iocb::default() },
            data: Data::None,
            tag: 0,
            expect: 0,
            busy: false,
        };
        let mut free = vec![0u32; n].into_boxed_slice();
        for (k, i) in (0..depth).rev().enumerate() {
            free[k] = i;
        }
        Ok(Libaio {
            dev: dev.clone(),
            ctx,
            fd,
            depth,
            mask: n - 1,
            slots: (0..n).map(slot).collect(),
            iovecs: vec![[iov0; MAX_SEGMENTS]; depth as usize].into_boxed_slice(),
            free,
            nfree: depth,
            ptrs: vec![std::ptr::null_mut(); n].into_boxed_slice(),
            nqueued: 0,
            events: vec![IoEvent::default(); n].into_boxed_slice(),
            ev_head: 0,
            ev_len: 0,
            ready: VecDeque::with_capacity(n),
            in_flight: 0,
            syscalls: 0,
        })
    }

    fn bad_command(&self, cmd: &Cmd, why: &str) -> Error {
        Error::BadCommand { dev: self.dev.uri.clone(), iface: IFACE, what: cmd.describe(), why: why.into() }
    }

    /// The slot at `i`, masked into the table (`i` is always below `depth` here; the
    /// mask only spares the bounds check).
    #[inline(always)]
    fn slot(&mut self, i: usize) -> &mut Slot {
        debug_assert!(i < self.depth as usize);
        // SAFETY: i & mask < mask + 1 == slots.len().
        unsafe { self.slots.get_unchecked_mut(i & self.mask) }
    }

    /// Takes a free slot, or `None` when all are busy.
    #[inline(always)]
    fn take_slot(&mut self) -> Option<usize> {
        let k = self.nfree.checked_sub(1)?;
        self.nfree = k;
        // SAFETY: k & mask < mask + 1 == free.len(). (k itself is below depth already.)
        Some(unsafe { *self.free.get_unchecked(k as usize & self.mask) } as usize)
    }

    /// Gives a slot back to the free list.
    #[inline(always)]
    fn put_slot(&mut self, idx: usize) {
        // nfree < depth: the slot given back was taken.
        debug_assert!(self.nfree < self.depth);
        // SAFETY: nfree & mask < mask + 1 == free.len().
        unsafe { *self.free.get_unchecked_mut(self.nfree as usize & self.mask) = idx as u32 };
        self.nfree += 1;
    }

    /// Fills the slot and queues its iocb (already written) for the next commit.
    #[inline(always)]
    fn queue(&mut self, idx: usize, data: Data, tag: u64, expect: u64) {
        // nqueued < depth: every queued command holds one of the depth slots, and this
        // one holds a slot that was free.
        debug_assert!(self.nqueued < self.depth);
        let q = self.nqueued as usize & self.mask;
        let slot = self.slot(idx);
        let cb: *mut Iocb = &mut slot.iocb;
        slot.tag = tag;
        slot.expect = expect;
        slot.busy = true;
        // A free slot holds Data::None (whoever freed it took its data): nothing to drop.
        std::mem::forget(std::mem::replace(&mut slot.data, data));
        // SAFETY: q = nqueued & mask < mask + 1 == ptrs.len().
        unsafe { *self.ptrs.get_unchecked_mut(q) = cb };
        self.nqueued += 1;
    }

    /// Everything but a read or write of one buffer without FUA: flush, vectored I/O,
    /// FUA writes, inline commands, refusals.
    #[inline(never)]
    fn submit_other(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        match io.op {
            Op::Read | Op::Write | Op::Flush => {}
            Op::Trim | Op::WriteZeroes | Op::Dsm { .. } => return self.run_inline(io, cmd, data, tag),
            Op::Passthru => {
                let e =
                    self.bad_command(cmd, "Linux AIO carries reads, writes and flushes only; use an NVMe interface");
                return Err((e, data));
            }
        }
        let Some(i) = self.take_slot() else {
            return Err((Error::Busy { depth: self.depth }, data));
        };
        let mut cb = Iocb { aio_data: i as u64, aio_fildes: self.fd, ..Iocb::default() };
        if io.op == Op::Flush {
            cb.aio_lio_opcode = IOCB_CMD_FDSYNC;
        } else {
            let iov = &mut self.iovecs[i];
            let n = fill_iovecs(data.bufs(), io.len, iov);
            let write = io.op == Op::Write;
            if n == 1 {
                cb.aio_lio_opcode = if write { IOCB_CMD_PWRITE } else { IOCB_CMD_PREAD };
                cb.aio_buf = iov[0].iov_base as u64;
                cb.aio_nbytes = iov[0].iov_len as u64;
            } else if n > 1 {
                cb.aio_lio_opcode = if write { IOCB_CMD_PWRITEV } else { IOCB_CMD_PREADV };
                cb.aio_buf = iov.as_ptr() as u64;
                cb.aio_nbytes = n as u64;
            } else {
                self.put_slot(i);
                return Err((self.bad_command(cmd, "it moves data but carries no buffer"), data));
            }
            cb.aio_offset = io.offset as i64;
            if write && cmd.is_fua() {
                cb.aio_rw_flags = libc::RWF_DSYNC;
            }
        }
        self.slot(i).iocb = cb;
        let expect = if io.op == Op::Flush { 0 } else { io.len };
        self.queue(i, data, tag, expect);
        Ok(())
    }

    /// Runs a command with no AIO opcode through the sync interface, now.
    fn run_inline(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let Some(sync) = self.dev.sync() else {
            let e = self.bad_command(cmd, "it has no AIO opcode and the device has no sync interface to run it");
            return Err((e, data));
        };
        self.syscalls += sync.syscalls_per_cmd();
        self.ready.push_back(exec_to_completion(sync, io, cmd, data, tag));
        Ok(())
    }

    /// The slot index of the first queued command.
    fn first_queued(&self) -> usize {
        (self.ptrs[0] as usize - self.slots.as_ptr() as usize) / std::mem::size_of::<Slot>()
    }

    /// Takes the first `k` queued commands off the queue (io_submit took them, or
    /// refused the first); the rest move to the front.
    fn unqueue_front(&mut self, k: u32) {
        let n = self.nqueued as usize;
        self.ptrs.copy_within(k as usize..n, 0);
        self.nqueued -= k;
    }

    /// Completes the first queued command with `errno` (io_submit refused its iocb).
    /// Kernels before 4.18 have no AIO fdsync (EINVAL): a flush then runs through the
    /// sync interface instead.
    #[cold]
    fn refuse_first(&mut self, errno: i32) {
        let idx = self.first_queued();
        self.unqueue_front(1);
        let slot = &mut self.slots[idx];
        let fdsync = slot.iocb.aio_lio_opcode == IOCB_CMD_FDSYNC;
        let (data, tag) = (std::mem::take(&mut slot.data), slot.tag);
        slot.busy = false;
        self.put_slot(idx);
        let c = match self.dev.sync() {
            Some(sync) if fdsync && errno == libc::EINVAL => {
                self.syscalls += sync.syscalls_per_cmd();
                let io = Io { op: Op::Flush, offset: 0, len: 0 };
                exec_to_completion(sync, &io, &Cmd::fs_flush(), data, tag)
            }
            _ => Completion { tag, status: errno_to_status(errno), result: 0, data },
        };
        self.ready.push_back(c);
    }

    /// What io_submit did not take at once: a partial submission, a refusal, EINTR.
    #[cold]
    #[inline(never)]
    fn commit_rest(&mut self, mut r: libc::c_long) -> u32 {
        let mut pushed = 0u32;
        loop {
            if r > 0 {
                let r = (r as u32).min(self.nqueued);
                self.unqueue_front(r);
                self.in_flight += r;
                pushed += r;
            } else if r == 0 {
                // Nothing taken and no error: report it on the first command rather than spin.
                self.refuse_first(libc::EAGAIN);
            } else {
                let errno = last_errno();
                if errno != libc::EINTR {
                    // io_submit reports the error of the first iocb when it took none.
                    self.refuse_first(errno);
                }
            }
            if self.nqueued == 0 {
                return pushed;
            }
            r = self.io_submit();
        }
    }

    /// One io_submit of every queued iocb; returns what the syscall returned.
    #[inline(always)]
    fn io_submit(&mut self) -> libc::c_long {
        self.syscalls += 1;
        // SAFETY: ctx is live; ptrs[..nqueued] point into the slot table at filled iocbs
        // whose buffers (and iovec arrays) are owned by their slots and stay put until
        // the events are reaped; the kernel copies the iocbs and iovecs during the call.
        unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, self.nqueued as libc::c_long, self.ptrs.as_mut_ptr()) }
    }

    /// Takes the next harvested event: the slot it completes, and its result. `None`
    /// when none is left; `Some((None, _))` for an event that names no busy slot.
    #[inline(always)]
    fn next_event(&mut self) -> Option<(Option<usize>, i64)> {
        if self.ev_head >= self.ev_len {
            return None;
        }
        // SAFETY: ev_head & mask < mask + 1 == events.len().
        let ev = unsafe { self.events.get_unchecked(self.ev_head as usize & self.mask) };
        let (idx, res) = (ev.data as usize, ev.res);
        self.ev_head += 1;
        let busy = idx < self.depth as usize && self.slot(idx).busy;
        Some((busy.then_some(idx), res))
    }

    /// Turns a busy slot's event result into its completion and frees the slot.
    #[inline(always)]
    fn finish(&mut self, idx: usize, res: i64) -> Completion {
        self.put_slot(idx);
        let slot = self.slot(idx);
        slot.busy = false;
        let (status, result) =
            if res >= 0 && res as u64 == slot.expect { (Status::OK, res as u64) } else { failed(res) };
        Completion { tag: slot.tag, status, result, data: std::mem::take(&mut slot.data) }
    }

    /// One io_getevents call into `self.events`; returns how many events landed there.
    #[inline(always)]
    fn getevents(&mut self, min: u32, max: u32, wait: bool) -> Result<usize, i32> {
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let timeout: *const libc::timespec = if wait { std::ptr::null() } else { &zero };
        let max = (max as usize).min(self.events.len());
        self.syscalls += 1;
        // SAFETY: ctx is live; events has room for `max` entries; timeout is null or
        // points to `zero`, which outlives the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.ctx,
                min as libc::c_long,
                max as libc::c_long,
                self.events.as_mut_ptr(),
                timeout,
            )
        };
        if r < 0 {
            return Err(last_errno());
        }
        Ok((r as usize).min(max))
    }

    /// Hands out the completions waiting in `ready`, at most `max`.
    #[inline(never)]
    fn hand_out_ready(&mut self, max: u32, f: &mut impl FnMut(Completion)) -> u32 {
        let mut n = 0u32;
        while n < max {
            let Some(c) = self.ready.pop_front() else { break };
            f(c);
            n += 1;
        }
        n
    }

    /// Reaps without committing: what `ready` holds, then the harvested events, then
    /// io_getevents as `min` and `max` ask.
    #[inline(always)]
    fn reap_now(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        let mut n = 0u32;
        if !self.ready.is_empty() {
            n = self.hand_out_ready(max, f);
        }
        let mut polled = false;
        loop {
            // The head moves past an event before its callback runs: if the callback
            // panics, the events after it stay here for the next reap (or for drop).
            while n < max {
                let Some((slot, res)) = self.next_event() else { break };
                if let Some(idx) = slot {
                    f(self.finish(idx, res));
                    n += 1;
                }
            }
            if n >= max || self.in_flight == 0 || (min > 0 && n >= min) || polled {
                return Ok(n);
            }
            let want_max = (max - n).min(self.in_flight);
            let want_min = min.saturating_sub(n).min(want_max);
            match self.getevents(want_min, want_max, want_min > 0) {
                Ok(got) => {
                    self.ev_head = 0;
                    self.ev_len = got as u32;
                    self.in_flight -= got as u32;
                }
                Err(libc::EINTR) => continue,
                Err(_) if n > 0 => return Ok(n),
                Err(errno) => return Err(self.getevents_failed(errno)),
            }
            polled = want_min == 0;
        }
    }

    #[cold]
    #[inline(never)]
    fn getevents_failed(&self, errno: i32) -> Error {
        Error::Queue {
            dev: self.dev.uri.clone(),
            iface: IFACE,
            what: "io_getevents",
            source: io::Error::from_raw_os_error(errno),
        }
    }
}

/// The status and result of an event that is not a full transfer: an error (negative
/// errno) or a short transfer (EIO with the bytes moved).
#[cold]
#[inline(never)]
fn failed(res: i64) -> (Status, u64) {
    if res < 0 {
        (errno_to_status(res.unsigned_abs().min(i32::MAX as u64) as i32), 0)
    } else {
        (errno_to_status(libc::EIO), res as u64)
    }
}

impl AsyncQueue for Libaio {
    #[inline(always)]
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        // The common command: a read, or a write without FUA, of one buffer. The iocb is
        // written in place (the fields submit does not write never change).
        let opcode = match (io.op, &data) {
            (Op::Read, Data::One(_)) => IOCB_CMD_PREAD,
            (Op::Write, Data::One(_)) if !cmd.is_fua() => IOCB_CMD_PWRITE,
            _ => return self.submit_other(io, cmd, data, tag),
        };
        let Some(i) = self.take_slot() else {
            return Err((Error::Busy { depth: self.depth }, data));
        };
        let Data::One(b) = &data else { unreachable!() };
        let cb = &mut self.slot(i).iocb;
        cb.aio_rw_flags = 0;
        cb.aio_lio_opcode = opcode;
        cb.aio_buf = b.as_ptr() as u64;
        // The checks made sure the buffer holds at least `len` bytes.
        cb.aio_nbytes = io.len;
        cb.aio_offset = io.offset as i64;
        self.queue(i, data, tag, io.len);
        Ok(())
    }

    #[inline]
    fn commit(&mut self) -> Result<u32, Error> {
        if self.nqueued == 0 {
            return Ok(0);
        }
        let n = self.nqueued;
        let r = self.io_submit();
        if r == n as libc::c_long {
            self.nqueued = 0;
            self.in_flight += n;
            return Ok(n);
        }
        Ok(self.commit_rest(r))
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        self.commit()?;
        self.reap_now(min, max, f)
    }

    #[inline(always)]
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        self.commit()?;
        self.reap_now(min, max, f)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

impl Libaio {
    /// Ends everything the queue holds, for drop: queued commands are dropped, harvested
    /// events finished, commands in flight waited for (or, if waiting fails, their
    /// buffers leaked, since the kernel may still write into them).
    fn settle(&mut self) {
        // Queued commands never reached the kernel: their data can go now.
        while self.nqueued > 0 {
            let idx = self.first_queued();
            self.unqueue_front(1);
            let slot = &mut self.slots[idx];
            slot.busy = false;
            drop(std::mem::take(&mut slot.data));
            self.put_slot(idx);
        }
        // Events already harvested (a callback panicked) will not come again: finish them
        // before waiting for the rest.
        while let Some((slot, res)) = self.next_event() {
            if let Some(idx) = slot {
                drop(self.finish(idx, res));
            }
        }
        // Commands in flight must finish before their buffers are freed.
        while self.in_flight > 0 {
            let n = self.in_flight;
            match self.getevents(n, n, true) {
                Ok(got) => {
                    self.in_flight -= got as u32;
                    (self.ev_head, self.ev_len) = (0, got as u32);
                    while let Some((slot, res)) = self.next_event() {
                        if let Some(idx) = slot {
                            drop(self.finish(idx, res));
                        }
                    }
                }
                Err(libc::EINTR) => continue,
                Err(_) => break,
            }
        }
        if self.in_flight > 0 {
            // The kernel may still write into these buffers: leak them rather than free.
            for slot in self.slots.iter_mut().filter(|s| s.busy) {
                std::mem::forget(std::mem::take(&mut slot.data));
            }
        }
    }
}

impl Drop for Libaio {
    fn drop(&mut self) {
        self.settle();
        destroy_in_background(self.ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::prepare;
    use crate::be::testutil::{
        buf, busy_when_full_and_takes_more_after_a_wait, direct_io_on_a_disk_file_round_trips, dirs,
        dropping_with_commands_in_flight_is_safe, errors_complete_with_the_errno_as_status, flush_completes,
        in_each_dir, in_temp, open, pattern, refuses_passthrough_commands_and_keeps_the_data, round_trip, run_one,
        short_transfers_complete_with_eio_and_the_bytes_moved, temp_in, trim_and_write_zeroes_read_back_zeroes,
        vectored_io_round_trips, InFlight,
    };
    use crate::{Buffer, Cmd, Device};

    #[test]
    fn iocb_and_io_event_match_the_kernel_layout() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(Iocb, aio_lio_opcode), 16);
        assert_eq!(offset_of!(Iocb, aio_fildes), 20);
        assert_eq!(offset_of!(Iocb, aio_buf), 24);
        assert_eq!(offset_of!(Iocb, aio_nbytes), 32);
        assert_eq!(offset_of!(Iocb, aio_offset), 40);
        assert_eq!(offset_of!(Iocb, aio_flags), 56);
        assert_eq!(offset_of!(Iocb, aio_resfd), 60);
        assert_eq!(offset_of!(IoEvent, res), 16);
    }

    #[test]
    fn io_setup_failures_are_explained() {
        let why = setup_failure(libc::EAGAIN);
        assert!(why.contains("aio-max-nr") && why.contains("fs.aio-nr"), "{why}");
        assert!(setup_failure(libc::ENOSYS).contains("CONFIG_AIO"));
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=64KiB");
        let e = dev.inner.unsupported(IFACE, &why).to_string();
        assert!(e.contains(&dev.inner.uri) && e.contains("async=libaio") && e.contains("aio-max-nr"), "{e}");
    }

    #[test]
    fn libaio_writes_then_reads_back_a_pattern_at_qd16() {
        in_each_dir("async=libaio,create=1,size=1MiB", round_trip);
    }

    #[test]
    fn libaio_direct_io_on_a_disk_file_round_trips() {
        direct_io_on_a_disk_file_round_trips("async=libaio");
    }

    #[test]
    fn libaio_vectored_io_round_trips() {
        in_each_dir("async=libaio,create=1,size=1MiB", vectored_io_round_trips);
    }

    #[test]
    fn libaio_flush_completes() {
        in_temp("async=libaio,create=1,size=64KiB", |dev| flush_completes(dev, Cmd::flush(dev.ident().nsid)));
    }

    #[test]
    fn libaio_fua_writes_complete_and_read_back() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=64KiB");
        let mut q = dev.queue(2).unwrap();
        q.submit(&Cmd::write(dev.ident().nsid, 8, 8).fua(), buf(&dev, &pattern(4, 4096)).into(), 1).unwrap();
        q.drain(|c| assert!(c.status.is_ok() && c.result == 4096, "{}", c.status)).unwrap();
        q.submit(&Cmd::fs_read(4096, 4096), dev.alloc(4096).unwrap().into(), 2).unwrap();
        q.drain(|c| assert_eq!(&c.data.into_one().unwrap()[..], &pattern(4, 4096)[..])).unwrap();
    }

    #[test]
    fn libaio_trim_and_write_zeroes_read_back_zeroes() {
        in_each_dir("async=libaio,create=1,size=256KiB", |dev| trim_and_write_zeroes_read_back_zeroes(dev, false));
    }

    #[test]
    fn libaio_is_busy_when_full_and_takes_more_after_a_wait() {
        in_temp("async=libaio,create=1,size=64KiB", busy_when_full_and_takes_more_after_a_wait);
    }

    #[test]
    fn libaio_drain_reaps_everything_and_poke_never_blocks() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=1MiB");
        let mut q = dev.queue(64).unwrap();
        assert_eq!(q.poke(0, |_| panic!("nothing is outstanding")).unwrap(), 0);
        for i in 0..64 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        let mut n = q.poke(3, |_| {}).unwrap();
        assert!(n <= 3);
        n += q.drain(|c| assert!(c.status.is_ok())).unwrap();
        assert_eq!(n, 64);
        assert_eq!(q.outstanding(), 0);
    }

    #[test]
    fn libaio_dropping_with_commands_in_flight_is_safe() {
        let how = InFlight { commit_queue: true, reads: 16, commit_after: Some(11), segments: 1 };
        dropping_with_commands_in_flight_is_safe("async=libaio,create=1,size=1MiB,direct=1", new_queue, how);
    }

    #[test]
    fn libaio_sixteen_submissions_cost_one_io_submit() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=1MiB");
        let mut q = dev.queue(16).unwrap();
        for i in 0..16 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        assert_eq!(q.stats().syscalls, 0, "submit makes no syscall");
        assert_eq!(q.commit().unwrap(), 16);
        assert_eq!(q.stats().syscalls, 1, "one io_submit for the batch");
        assert_eq!(q.commit().unwrap(), 0);
        assert_eq!(q.stats().syscalls, 1, "an empty commit makes no syscall");
        q.drain(|_| {}).unwrap();
        let s = q.stats().syscalls;
        assert!(s >= 2, "reaping costs io_getevents calls: {s}");
    }

    #[test]
    fn libaio_errors_complete_with_the_errno_as_status() {
        errors_complete_with_the_errno_as_status("async=libaio", new_queue);
    }

    #[test]
    fn libaio_short_transfers_complete_with_eio_and_the_bytes_moved() {
        short_transfers_complete_with_eio_and_the_bytes_moved("async=libaio");
    }

    #[test]
    fn libaio_refuses_passthrough_commands_and_keeps_the_data() {
        refuses_passthrough_commands_and_keeps_the_data("async=libaio");
    }

    /// Submits one command to a backend made directly; returns the data on refusal.
    fn put(be: &mut Libaio, dev: &Device, cmd: Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let io = prepare(&dev.inner, &cmd, data.bufs()).unwrap();
        be.submit(&io, &cmd, data, tag)
    }

    /// Every slot free and empty, nothing queued, harvested or in flight.
    fn assert_idle(be: &Libaio) {
        assert_eq!(be.nfree, be.depth, "every slot is free");
        assert!(be.slots.iter().all(|s| !s.busy && matches!(s.data, Data::None)), "no slot holds data");
        assert_eq!((be.nqueued, be.ev_head, be.ev_len, be.in_flight), (0, be.ev_len, be.ev_len, 0));
        assert!(be.ready.is_empty());
    }

    #[test]
    fn libaio_a_depth_that_is_no_power_of_two_uses_exactly_its_slots() {
        // The tables are 8 long for depth 5 and indexed through a mask: the free list,
        // the iocb pointers and the events must still stay within the 5 slots in use.
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=1MiB");
        let mut be = Libaio::new(&dev.inner, 5).unwrap();
        assert_eq!((be.depth, be.slots.len()), (5, 8));
        for round in 0..4u64 {
            for i in 0..5u64 {
                let tag = round * 5 + i;
                put(&mut be, &dev, Cmd::fs_write(tag * 4096, 4096), buf(&dev, &pattern(tag, 4096)).into(), tag)
                    .unwrap();
            }
            let full = put(&mut be, &dev, Cmd::fs_write(0, 4096), dev.alloc(4096).unwrap().into(), 99);
            assert!(matches!(full, Err((Error::Busy { depth: 5 }, _))), "the sixth command finds the queue full");
            // Reap in uneven steps so that slots come back in varied orders.
            let mut seen = vec![];
            while seen.len() < 5 {
                be.reap(1, 2, &mut |c: Completion| {
                    assert!(c.status.is_ok() && c.result == 4096, "{}", c.status);
                    seen.push(c.tag);
                })
                .unwrap();
            }
            seen.sort();
            assert_eq!(seen, (round * 5..round * 5 + 5).collect::<Vec<_>>());
            assert!(be.slots[5..].iter().all(|s| !s.busy), "the slots past the depth are never used");
            assert_idle(&be);
        }
        for tag in 0..20u64 {
            put(&mut be, &dev, Cmd::fs_read(tag * 4096, 4096), dev.alloc(4096).unwrap().into(), tag).unwrap();
            be.reap(1, 1, &mut |c: Completion| {
                assert_eq!(&c.data.into_one().unwrap()[..], &pattern(tag, 4096)[..], "block {tag}");
            })
            .unwrap();
        }
        assert_idle(&be);
    }

    #[test]
    fn libaio_a_panicking_callback_leaves_the_rest_for_the_next_reap() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=1MiB");
        let mut be = Libaio::new(&dev.inner, 8).unwrap();
        for round in 0..2u64 {
            for i in 0..8u64 {
                put(&mut be, &dev, Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
            }
            assert_eq!(be.commit().unwrap(), 8);
            let mut calls = 0;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                be.reap(8, 8, &mut |_c: Completion| {
                    calls += 1;
                    if calls == 2 {
                        panic!("callback fails on its second completion");
                    }
                })
            }));
            assert!(r.is_err(), "the callback panicked");
            assert_eq!(calls, 2);
            // All 8 events were harvested in one io_getevents; 6 are still to hand out.
            assert_eq!((be.ev_len - be.ev_head, be.in_flight), (6, 0), "round {round}");
            let sys = be.syscalls();
            let mut tags = vec![];
            let n = be.reap(0, u32::MAX, &mut |c: Completion| {
                assert!(c.status.is_ok() && c.result == 4096, "{}", c.status);
                assert_eq!(c.data.total_len(), 4096);
                tags.push(c.tag);
            });
            assert_eq!(n.unwrap(), 6);
            assert_eq!(be.syscalls(), sys, "the harvested events need no syscall");
            tags.sort();
            tags.dedup();
            assert_eq!(tags.len(), 6, "six distinct commands: {tags:?}");
            // Every slot came back, and the queue takes a full batch again.
            assert_idle(&be);
        }
    }

    #[test]
    fn libaio_drop_finishes_harvested_events_before_waiting_for_the_rest() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=1MiB");
        let mut be = Libaio::new(&dev.inner, 18).unwrap();
        for i in 0..16u64 {
            put(&mut be, &dev, Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        be.commit().unwrap();
        // Harvest 4 of 16; the first callback panics: 3 harvested and 12 with the kernel.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            be.reap(4, 4, &mut |_c: Completion| panic!("callback fails"))
        }));
        assert!(r.is_err());
        assert_eq!((be.ev_len - be.ev_head, be.in_flight), (3, 12));
        // Two more queued and never committed.
        for i in 0..2u64 {
            put(&mut be, &dev, Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), 20 + i).unwrap();
        }
        // What drop does: it must not wait for the 3 harvested events (it would hang), and
        // it must free every buffer (no slot left holding data).
        be.settle();
        assert_idle(&be);
        drop(be);
    }

    #[test]
    fn libaio_partial_io_submit_refuses_the_bad_iocb_and_submits_the_rest() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=64KiB");
        let mut be = Libaio::new(&dev.inner, 4).unwrap();
        for i in 0..4u64 {
            put(&mut be, &dev, Cmd::fs_write(i * 4096, 4096), buf(&dev, &pattern(i, 4096)).into(), i).unwrap();
        }
        // The second iocb carries an opcode the kernel does not know: io_submit takes the
        // first, stops there (1), refuses the second (EINVAL), then takes the last two.
        let second = (be.ptrs[1] as usize - be.slots.as_ptr() as usize) / std::mem::size_of::<Slot>();
        assert_ne!(be.first_queued(), second);
        be.slots[second].iocb.aio_lio_opcode = 0x7fff;
        assert_eq!(be.commit().unwrap(), 3);
        assert_eq!(be.syscalls(), 3, "io_submit: 1 taken, the bad one refused, 2 taken");
        assert_eq!(be.nqueued, 0);
        let mut seen = vec![];
        while seen.len() < 4 {
            be.reap(1, 4, &mut |c: Completion| {
                assert_eq!(c.data.total_len(), 4096, "the data comes back");
                seen.push((c.tag, c.status.errno(), c.result));
            })
            .unwrap();
        }
        seen.sort();
        assert_eq!(seen, [(0, None, 4096), (1, Some(libc::EINVAL), 0), (2, None, 4096), (3, None, 4096)]);
        assert_idle(&be);
    }

    #[test]
    fn libaio_backend_is_busy_when_every_slot_is_taken() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=64KiB");
        let mut be = Libaio::new(&dev.inner, 2).unwrap();
        put(&mut be, &dev, Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 1).unwrap();
        put(&mut be, &dev, Cmd::flush(dev.ident().nsid), Data::None, 2).unwrap();
        // Both paths: the one-buffer read and everything else (here a vectored read).
        let (e, data) = put(&mut be, &dev, Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 3).unwrap_err();
        assert!(matches!(e, Error::Busy { depth: 2 }), "{e}");
        assert_eq!(data.total_len(), 4096);
        let two: Data = vec![dev.alloc(2048).unwrap(), dev.alloc(2048).unwrap()].into();
        let (e, data) = put(&mut be, &dev, Cmd::fs_read(0, 4096), two, 4).unwrap_err();
        assert!(matches!(e, Error::Busy { depth: 2 }), "{e}");
        assert_eq!(data.bufs().len(), 2);
        let mut n = 0;
        while n < 2 {
            n += be.reap(2, 2, &mut |c: Completion| assert!(c.status.is_ok(), "{}", c.status)).unwrap();
        }
        assert_idle(&be);
    }

    #[test]
    fn libaio_one_slot_reused_by_every_kind_of_command_keeps_its_iocb_right() {
        for dir in dirs() {
            let t = temp_in(&dir, "libaio");
            let dev = open(&t, "async=libaio,create=1,size=64KiB");
            let nsid = dev.ident().nsid;
            let mut be = new_queue(&dev.inner, 1).unwrap();
            // FUA write (RWF_DSYNC), plain read, flush, vectored write, plain write, read:
            // all through slot 0, so every path must leave the iocb right for the next.
            let c = run_one(&mut be, &dev.inner, Cmd::write(nsid, 0, 8).fua(), buf(&dev, &pattern(1, 4096)).into(), 1);
            assert!(c.status.is_ok() && c.result == 4096, "{}", c.status);
            let c = run_one(&mut be, &dev.inner, Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 2);
            assert_eq!(&c.data.into_one().unwrap()[..], &pattern(1, 4096)[..]);
            let c = run_one(&mut be, &dev.inner, Cmd::flush(nsid), Data::None, 3);
            assert!(c.status.is_ok() && c.result == 0, "{}", c.status);
            let data = pattern(2, 8192);
            let bufs: Vec<Buffer> = data.chunks(4096).map(|c| buf(&dev, c)).collect();
            let c = run_one(&mut be, &dev.inner, Cmd::fs_write(4096, 8192), bufs.into(), 4);
            assert!(c.status.is_ok() && c.result == 8192, "{}", c.status);
            let c = run_one(&mut be, &dev.inner, Cmd::fs_write(16384, 4096), buf(&dev, &pattern(3, 4096)).into(), 5);
            assert!(c.status.is_ok() && c.result == 4096, "{}", c.status);
            let c = run_one(&mut be, &dev.inner, Cmd::fs_read(0, 20480), dev.alloc(20480).unwrap().into(), 6);
            assert!(c.status.is_ok() && c.result == 20480, "{}", c.status);
            let b = c.data.into_one().unwrap();
            assert_eq!(&b[..4096], &pattern(1, 4096)[..]);
            assert_eq!(&b[4096..12288], &data[..]);
            assert!(b[12288..16384].iter().all(|&x| x == 0));
            assert_eq!(&b[16384..], &pattern(3, 4096)[..]);
        }
    }
}
