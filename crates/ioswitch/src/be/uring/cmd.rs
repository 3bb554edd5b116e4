//! `io_uring_cmd`: NVMe passthrough through io_uring (`IORING_OP_URING_CMD`) on an NVMe
//! generic char device, `/dev/ngXnY`.
//!
//! The ring has 128-byte SQEs and 32-byte CQEs (`IORING_SETUP_SQE128 | CQE32`). Each
//! command is one `URING_CMD` SQE with `cmd_op` `NVME_URING_CMD_IO` (one buffer or
//! none) or `NVME_URING_CMD_IO_VEC` (several buffers: `addr` is an iovec array and
//! `data_len` its length), carrying `struct nvme_uring_cmd` (the command's fields, as
//! the caller built them) in the SQE's 80-byte command area. Any I/O command goes:
//! NVM read/write/flush/write zeroes/DSM, ZNS commands, anything else raw; file-set
//! commands go as NVM commands when they are whole LBAs (see [`crate::be::nvme`]).
//!
//! Completion: `cqe.res` is 0, the NVMe status field (positive: SC, SCT, CRD, More,
//! DNR), or a negative errno when the kernel refused the command; the completion's
//! DW0-1 (e.g. the LBA a Zone Append wrote) is in the big CQE's first extra dword pair
//! and becomes the completion's `result`.
//!
//! The queue works as `io_uring`'s: one ring per queue, a slot table preallocated at
//! creation (tag, moved-in data, a stable iovec array and DSM range per slot), `submit`
//! writes one SQE and makes no syscall, `commit` pushes the batch with one
//! `io_uring_enter`, `reap` takes CQEs without a syscall and enters only to wait (or, with
//! IOPOLL, to poll). Tunables: `sqpoll=1` / `sqpoll_cpu=N`, `iopoll=1` (needs poll
//! queues on the controller, the nvme driver's `poll_queues`; checked at open; no
//! `direct=1` needed: passthrough never uses the page cache), `register_files=1`.
//!
//! With `iopoll=1`, commands that move no data (flush, write zeroes, zone management
//! send, …) do not go to the ring: the driver cannot poll a request without a bio and
//! completes it by interrupt, and on Linux 6.1 that completion's task work overwrites
//! the poll cookie it shares a union with, so the next poll dereferences a function
//! pointer as a bio and the kernel oopses (seen in the test guest, Debian 6.1.192).
//! They run at `submit` through the NVMe ioctl on the same descriptor instead (one
//! counted syscall; the submit blocks for the command), and their completions wait in a
//! ring preallocated at queue creation that `reap` hands out first.
//!
//! The same kernel bug has a second trigger: with several IOPOLL rings polling the
//! namespace's poll queues, one ring's poll can complete another ring's command between
//! its issue and the moment the submitting task stores the poll cookie, so the driver
//! takes the completion for an interrupt-driven one and clobbers the cookie (seen in the
//! test guest: four threads, one queue each, general protection fault in `bio_poll`
//! called from `nvme_ns_chr_uring_cmd_iopoll`). So every `io_uring_enter` of an IOPOLL
//! queue (submitting, polling, or both) takes a process-wide lock: no queue polls while
//! another one is submitting. IOPOLL queues of one process therefore submit and poll one
//! at a time; other processes polling the same poll queues are not covered, nor are
//! SQPOLL kernel threads (`sqpoll=1` with `iopoll=1` on several queues).
//!
//! `register_buffers=1` is refused at open (fixed buffers for uring_cmd are not
//! implemented). Dropping the queue waits for commands in flight and leaks their data if
//! it cannot.

use crate::be::nvme::{self, WireData, NVME_URING_CMD_IO, NVME_URING_CMD_IO_VEC};
use crate::be::{fill_iovecs, AsyncQueue, Io, MAX_SEGMENTS};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::Completion;
use crate::spec::{errno_to_status, Status};
use ::io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::collections::VecDeque;
use std::fs;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

const IFACE: &str = "io_uring_cmd";
const ENTER_GETEVENTS: u32 = 1;
const ENTER_SQ_WAKEUP: u32 = 2;
const SQPOLL_IDLE_MS: u32 = 1000;

/// Held across every `io_uring_enter` of an IOPOLL queue (see the module docs).
static IOPOLL_ENTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The IOPOLL lock when `iopoll` (a poisoned lock is still a lock: the guarded data is
/// nothing).
fn iopoll_guard(iopoll: bool) -> Option<std::sync::MutexGuard<'static, ()>> {
    iopoll.then(|| IOPOLL_ENTER.lock().unwrap_or_else(|p| p.into_inner()))
}

type Ring = IoUring<squeue::Entry128, cqueue::Entry32>;

fn queue_error(dev: &Inner, what: &'static str, source: io::Error) -> Error {
    Error::Queue { dev: dev.uri.clone(), iface: IFACE, what, source }
}

fn builder(dev: &Inner) -> ::io_uring::Builder<squeue::Entry128, cqueue::Entry32> {
    let o = &dev.opts;
    let mut b = Ring::builder();
    if o.sqpoll {
        b.setup_sqpoll(SQPOLL_IDLE_MS);
        if let Some(cpu) = o.sqpoll_cpu {
            b.setup_sqpoll_cpu(cpu);
        }
    }
    if o.iopoll {
        b.setup_iopoll();
    }
    b
}

/// Checks at open that the kernel has big-SQE rings and `URING_CMD`, and that the
/// tunables asked for will work here.
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    let iface = "async=io_uring_cmd";
    if !crate::be::io_uring_usable() {
        return Err(dev.unsupported(
            iface,
            "this process cannot create an io_uring (disabled by /proc/sys/kernel/io_uring_disabled or a seccomp filter)",
        ));
    }
    let fd = dev.raw_fd();
    if fd < 0 {
        return Err(dev.unsupported(iface, "the device has no file descriptor"));
    }
    let o = &dev.opts;
    if o.register_buffers {
        return Err(dev.unsupported(
            "async=io_uring_cmd (register_buffers=1)",
            "fixed buffers are not implemented for NVMe passthrough commands; leave register_buffers off",
        ));
    }
    let ring = match Ring::builder().build(2) {
        Ok(r) => r,
        Err(e) => {
            return Err(dev.unsupported(
                iface,
                &format!("the kernel refused a ring with 128-byte SQEs and 32-byte CQEs (needs Linux 5.19): {e}"),
            ))
        }
    };
    let mut p = ::io_uring::Probe::new();
    if ring.submitter().register_probe(&mut p).is_ok() && !p.is_supported(opcode::UringCmd80::CODE) {
        return Err(dev.unsupported(iface, "this kernel has no IORING_OP_URING_CMD (needs Linux 5.19)"));
    }
    drop(ring);
    if o.iopoll {
        check_poll_queues(dev)?;
    }
    if o.sqpoll {
        if let Some(cpu) = o.sqpoll_cpu {
            // SAFETY: sysconf has no memory-safety preconditions.
            let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            if online > 0 && cpu as libc::c_long >= online {
                return Err(dev.unsupported(
                    "async=io_uring_cmd (sqpoll_cpu)",
                    &format!("CPU {cpu} does not exist: {online} CPUs are online (0..={})", online - 1),
                ));
            }
        }
        if let Err(e) = builder(dev).build(2) {
            return Err(dev.unsupported(
                "async=io_uring_cmd (sqpoll=1)",
                &format!("the kernel refused an SQPOLL ring with 128-byte SQEs: {e}"),
            ));
        }
    }
    Ok(())
}

/// IOPOLL on a generic char device polls the namespace's poll queues: they must exist.
fn check_poll_queues(dev: &Inner) -> Result<(), Error> {
    let iface = "async=io_uring_cmd (iopoll=1)";
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and st is a valid out pointer.
    if unsafe { libc::fstat(dev.raw_fd(), &mut st) } != 0 {
        return Err(queue_error(dev, "fstat (to find the namespace for iopoll)", io::Error::last_os_error()));
    }
    let devno = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
    let Some(dir) = nvme::char_block_dir(devno, dev.ident.nsid) else {
        return Err(dev.unsupported(
            iface,
            &format!(
                "cannot tell whether namespace {} has poll queues: no block device for it in sysfs",
                dev.ident.nsid
            ),
        ));
    };
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match fs::read_to_string(dir.join("queue/io_poll")).map(|s| s.trim().to_string()).as_deref() {
        Ok("1") => Ok(()),
        Ok(v) => Err(dev.unsupported(
            iface,
            &format!(
                "the namespace ({name}) has no poll queues (queue/io_poll is {v}); \
                 load the nvme driver with poll_queues=N"
            ),
        )),
        Err(e) => {
            Err(dev.unsupported(iface, &format!("the namespace ({name}) has no poll queues (queue/io_poll: {e})")))
        }
    }
}

/// Creates a queue of `depth` slots.
pub(crate) fn new_queue(dev: &Arc<Inner>, depth: u32) -> Result<crate::be::Backend, Error> {
    Ok(crate::be::Backend::IoUringCmd(Box::new(UringCmdQueue::new(dev, depth)?)))
}

/// A slot's iovec array; stable in memory (the slot table never moves or grows).
struct Iovecs([libc::iovec; MAX_SEGMENTS]);

// SAFETY: the iovecs only point into buffers owned by the same slot's `Data`, which is
// Send; nothing here is tied to a thread.
unsafe impl Send for Iovecs {}

struct Slot {
    tag: u64,
    data: Data,
    busy: bool,
    iov: Iovecs,
    /// The DSM range of a file-set trim.
    range: [u8; 16],
}

/// A queue on one big-SQE io_uring ring.
pub(crate) struct UringCmdQueue {
    ring: Ring,
    dev: Arc<Inner>,
    fd: RawFd,
    nsid: u32,
    lba: u64,
    fixed_file: bool,
    sqpoll: bool,
    iopoll: bool,
    depth: u32,
    slots: Box<[Slot]>,
    /// Free slot indices; capacity `depth`, so pushing never allocates.
    free: Vec<u32>,
    inflight: u32,
    queued: u32,
    /// Completions of commands run inline (no-data commands with IOPOLL); capacity `depth`.
    ready: VecDeque<Completion>,
    syscalls: u64,
}

impl UringCmdQueue {
    fn new(dev: &Arc<Inner>, depth: u32) -> Result<UringCmdQueue, Error> {
        let fd = dev.raw_fd();
        if fd < 0 {
            return Err(dev.unsupported("async=io_uring_cmd", "the device has no file descriptor"));
        }
        let depth = depth.max(1);
        // With SQPOLL the kernel thread moves the SQ head only after a whole batch, while
        // completions of that batch may already be reaped: up to `depth` consumed entries
        // can still count as used, so the SQ gets room for two depths and a push never
        // finds it full while a slot is free.
        let entries = if dev.opts.sqpoll { depth.saturating_mul(2) } else { depth };
        let ring = builder(dev).build(entries).map_err(|e| queue_error(dev, "create the ring (io_uring_setup)", e))?;
        if ring.params().sq_entries() < depth {
            let why = io::Error::other(format!(
                "the kernel gave {} SQ entries for depth {depth}",
                ring.params().sq_entries()
            ));
            return Err(queue_error(dev, "create the ring (io_uring_setup)", why));
        }
        if dev.opts.register_files {
            ring.submitter()
                .register_files(&[fd])
                .map_err(|e| queue_error(dev, "register the file descriptor (register_files=1)", e))?;
        }
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let slots = (0..depth)
            .map(|_| Slot { tag: 0, data: Data::None, busy: false, iov: Iovecs([empty; MAX_SEGMENTS]), range: [0; 16] })
            .collect();
        Ok(UringCmdQueue {
            ring,
            dev: dev.clone(),
            fd,
            nsid: dev.ident.nsid,
            lba: dev.geo.lba_size as u64,
            fixed_file: dev.opts.register_files,
            sqpoll: dev.opts.sqpoll,
            iopoll: dev.opts.iopoll,
            depth,
            slots,
            free: (0..depth).rev().collect(),
            inflight: 0,
            queued: 0,
            ready: VecDeque::with_capacity(depth as usize),
            syscalls: 0,
        })
    }

    fn busy(&self) -> Error {
        Error::Busy { depth: self.depth }
    }

    fn release(&mut self, idx: u32) -> Data {
        let slot = &mut self.slots[idx as usize];
        slot.busy = false;
        let data = std::mem::take(&mut slot.data);
        self.free.push(idx);
        data
    }

    /// One `io_uring_enter` that submits what is queued and waits for `want`
    /// completions (polls once with IOPOLL when `want` is 0).
    fn enter_wait(&mut self, want: u32) -> Result<(), Error> {
        let mut flags = ENTER_GETEVENTS;
        let to_submit = {
            let sq = self.ring.submission();
            if self.sqpoll && sq.need_wakeup() {
                flags |= ENTER_SQ_WAKEUP;
            }
            sq.len() as u32
        };
        self.syscalls += 1;
        let _guard = iopoll_guard(self.iopoll && !self.sqpoll);
        // SAFETY: no argument pointer; every SQE in the ring points to memory owned by an
        // in-flight slot (see `submit`).
        let r = unsafe { self.ring.submitter().enter::<libc::sigset_t>(to_submit, want, flags, None) };
        match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => Ok(()),
            Err(e) => Err(queue_error(&self.dev, "io_uring_enter (wait for completions)", e)),
        }
    }

    #[inline]
    fn take_cqes(&mut self, limit: u32, f: &mut impl FnMut(Completion)) -> u32 {
        let mut n = 0;
        while n < limit {
            let Some(cqe) = self.ring.completion().next() else { break };
            let idx = cqe.user_data();
            let Some(idx) = u32::try_from(idx).ok().filter(|&i| (i as usize) < self.slots.len()) else { continue };
            if !self.slots[idx as usize].busy {
                continue;
            }
            let res = cqe.result();
            let (status, result) = if res < 0 {
                (errno_to_status(res.wrapping_neg()), 0)
            } else if res > 0 {
                (Status::from_cqe_status((res as u16) << 1), cqe.big_cqe()[0])
            } else {
                (Status::OK, cqe.big_cqe()[0])
            };
            let tag = self.slots[idx as usize].tag;
            let data = self.release(idx);
            self.inflight -= 1;
            f(Completion { tag, status, result, data });
            n += 1;
        }
        n
    }
}

impl AsyncQueue for UringCmdQueue {
    #[inline]
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let w = match nvme::wire(io, cmd, self.nsid, self.lba, data.bufs()) {
            Ok(w) => w,
            Err(why) => {
                let e = Error::BadCommand {
                    dev: self.dev.uri.clone(),
                    iface: IFACE,
                    what: cmd.describe(),
                    why: why.into(),
                };
                return Err((e, data));
            }
        };
        if self.inflight as usize + self.ready.len() >= self.depth as usize {
            return Err((self.busy(), data));
        }
        if self.iopoll && w.data == WireData::None {
            // Not through the IOPOLL ring (see the module docs): through the ioctl, now.
            let mut data = data;
            self.syscalls += 1;
            let c = match nvme::io_cmd(self.fd, &w, data.bufs_mut()) {
                Ok(result) => Completion { tag, status: Status::OK, result, data },
                Err(status) => Completion { tag, status, result: 0, data },
            };
            self.ready.push_back(c);
            return Ok(());
        }
        let Some(idx) = self.free.pop() else { return Err((self.busy(), data)) };
        let slot = &mut self.slots[idx as usize];
        slot.data = data;
        slot.tag = tag;
        let (addr, len, op) = match w.data {
            WireData::None => (0, 0, NVME_URING_CMD_IO),
            WireData::Range(r) => {
                slot.range = r.to_bytes();
                (slot.range.as_ptr() as u64, 16, NVME_URING_CMD_IO)
            }
            WireData::Bufs(len) => {
                let n = fill_iovecs(slot.data.bufs(), len, &mut slot.iov.0);
                let covered: u64 = slot.iov.0[..n].iter().map(|v| v.iov_len as u64).sum();
                if covered < len || len > u32::MAX as u64 {
                    let data = self.release(idx);
                    let e = Error::BadCommand {
                        dev: self.dev.uri.clone(),
                        iface: IFACE,
                        what: cmd.describe(),
                        why: format!("the buffers hold fewer than the {len} bytes the command moves"),
                    };
                    return Err((e, data));
                }
                if n == 1 {
                    (slot.iov.0[0].iov_base as u64, slot.iov.0[0].iov_len as u32, NVME_URING_CMD_IO)
                } else {
                    (slot.iov.0.as_ptr() as u64, n as u32, NVME_URING_CMD_IO_VEC)
                }
            }
        };
        let bytes = nvme::uring_cmd(&w.sqe, addr, len);
        let entry = if self.fixed_file {
            opcode::UringCmd80::new(types::Fixed(0), op).cmd(bytes).build()
        } else {
            opcode::UringCmd80::new(types::Fd(self.fd), op).cmd(bytes).build()
        };
        let entry = entry.user_data(idx as u64);
        // SAFETY: everything the entry points to (the buffers, the slot's iovec array and
        // range) is owned by slot `idx`, which keeps it unmoved (the slot table is a boxed
        // slice that never reallocates) until the slot's CQE is reaped or the queue is
        // dropped (which waits, or leaks).
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            let data = self.release(idx);
            return Err((self.busy(), data));
        }
        self.slots[idx as usize].busy = true;
        self.inflight += 1;
        self.queued += 1;
        Ok(())
    }

    fn commit(&mut self) -> Result<u32, Error> {
        let queued = std::mem::take(&mut self.queued);
        if self.sqpoll {
            let wake = {
                let sq = self.ring.submission();
                !sq.is_empty() && sq.need_wakeup()
            };
            if wake {
                self.syscalls += 1;
                // SAFETY: no argument pointer; SQEs as in `submit`.
                let r = unsafe { self.ring.submitter().enter::<libc::sigset_t>(0, 0, ENTER_SQ_WAKEUP, None) };
                if let Err(e) = r {
                    if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) {
                        return Err(queue_error(&self.dev, "io_uring_enter (wake the SQPOLL thread)", e));
                    }
                }
            }
            return Ok(queued);
        }
        let mut pending = self.ring.submission().len() as u32;
        let mut pushed = 0;
        while pending > 0 {
            self.syscalls += 1;
            let _guard = iopoll_guard(self.iopoll);
            // SAFETY: no argument pointer and no flags; SQEs as in `submit`.
            let r = unsafe { self.ring.submitter().enter::<libc::sigset_t>(pending, 0, 0, None) };
            match r {
                Ok(k) => {
                    let k = (k as u32).min(pending);
                    if k == 0 {
                        break;
                    }
                    pushed += k;
                    pending -= k;
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::EAGAIN | libc::EBUSY) => break,
                    _ => return Err(queue_error(&self.dev, "io_uring_enter (submit)", e)),
                },
            }
        }
        Ok(pushed)
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        let mut n = 0;
        while n < max {
            let Some(c) = self.ready.pop_front() else { break };
            f(c);
            n += 1;
        }
        let min = min.min(max).min(n.saturating_add(self.inflight));
        let mut entered = false;
        loop {
            if n < max {
                n += self.take_cqes(max - n, f);
            }
            if n >= max || self.inflight == 0 {
                break;
            }
            if n >= min {
                if self.iopoll && !entered {
                    if let Err(e) = self.enter_wait(0) {
                        return if n > 0 { Ok(n) } else { Err(e) };
                    }
                    entered = true;
                    continue;
                }
                break;
            }
            if let Err(e) = self.enter_wait(min - n) {
                return if n > 0 { Ok(n) } else { Err(e) };
            }
            entered = true;
        }
        Ok(n)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

impl Drop for UringCmdQueue {
    fn drop(&mut self) {
        let mut sink = |c: Completion| drop(c);
        while self.inflight > 0 {
            let want = self.inflight;
            match self.reap(want, u32::MAX, &mut sink) {
                Ok(n) if n > 0 => {}
                _ => {
                    // Cannot prove the kernel is done: leak the data of the commands in
                    // flight (and the slot table their iovecs live in) rather than free
                    // memory it may still use.
                    for s in self.slots.iter_mut().filter(|s| s.busy) {
                        std::mem::forget(std::mem::take(&mut s.data));
                    }
                    std::mem::forget(std::mem::take(&mut self.slots));
                    return;
                }
            }
        }
    }
}
