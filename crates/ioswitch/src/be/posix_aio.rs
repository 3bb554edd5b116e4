//! `posix`: POSIX asynchronous I/O — `aio_read(3)`, `aio_write(3)`, `aio_fsync(3)`,
//! `aio_error(3)`, `aio_return(3)`, `aio_suspend(3)` — as glibc implements it: in user
//! space, with helper threads that run pread/pwrite/fdatasync. glibc serves the requests
//! of one file descriptor one after another on one helper thread, so a queue here gives
//! asynchrony (the caller does not block) but no parallelism on the device.
//!
//! Each queue preallocates a slot table of `depth` commands and a pool of
//! `depth + MAX_SEGMENTS` control blocks (`aiocb`s), boxed so they never move while glibc
//! holds their addresses. POSIX aio has no vectored operation: a command with several
//! buffers becomes one aiocb per buffer at consecutive offsets, and completes when all
//! its segments have (the first error wins; a short segment ends the command with EIO).
//! When the pool runs dry (only with vectored commands), the remaining segments start as
//! earlier ones finish.
//!
//! There is no batching: `submit` calls `aio_read`/`aio_write`/`aio_fsync(O_DSYNC)` at
//! once and `commit` pushes nothing. `reap` scans the control blocks in flight with
//! `aio_error`; when it must wait, it calls `aio_suspend` on them (the oldest 1024 at
//! most) until `min` commands are done.
//!
//! glibc's helper still reads a control block (its notification field) under glibc's
//! request lock right after it stores the final error code. glibc 2.34 and later read
//! that code under the same lock in `aio_error`; older versions do not, so before a
//! finished control block is reused or freed the queue passes through the lock once per
//! batch, with an `aio_suspend` on a finished request (which returns at once).
//!
//! Syscalls counted — POSIX aio makes them partly in our thread, partly in glibc's helper:
//! - `aio_read`, `aio_write`: 2 — handing the request over (a futex wake or a new helper
//!   thread; an upper bound, as glibc makes no call when it queues the request behind one
//!   already running on the descriptor) and the helper's pread/pwrite;
//! - `aio_fsync`: 3 — glibc's `fcntl(F_GETFL)` check, the hand-over, the fdatasync
//!   (a write with Force Unit Access is its data segments, then one `aio_fsync`);
//! - `aio_suspend` when waiting: 1 per call;
//! - `aio_error`, `aio_return` and the lock pass above: 0 (they read fields in memory,
//!   `aio_error` under glibc's request lock, which enters the kernel only when contended);
//! - trim, write zeroes and dataset management, which run inline through the device's
//!   sync interface: what that interface says one command costs.

// The aiocbs handed to aio_read/aio_write/lio_listio must stay in place until aio_return:
// this queue's control-block table owns them, so the calls stay beside it until that
// ownership moves into `sys` (issue 12, part 3: what is left). Every block says why it is
// sound.
#![allow(unsafe_code)]

use super::{exec_to_completion, AsyncQueue, Io, Op, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::Completion;
use crate::spec::{errno_to_status, Status};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, OnceLock};

/// `async=posix`: POSIX aio (aio_read/aio_write/aio_fsync).
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "posix",
    Role::Async,
    "POSIX aio (aio_read/aio_write/aio_fsync)",
    super::needs_fd,
    Build::Async { probe, queue: new_queue },
)
.fio(&["posixaio"]);

const IFACE: &str = "async=posix";

/// Most control blocks one `aio_suspend` call waits on (glibc puts two arrays of that
/// many entries on the caller's stack).
const SUSPEND_MAX: usize = 1024;

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A zeroed control block with no notification.
fn blank_aiocb() -> libc::aiocb {
    // SAFETY: aiocb is plain C data (integers and pointers); all-zero is a valid value.
    let mut cb: libc::aiocb = unsafe { std::mem::zeroed() };
    cb.aio_sigevent.sigev_notify = libc::SIGEV_NONE;
    cb
}

/// Checks at open that POSIX aio works in this process: one 1-byte `aio_read` of
/// /dev/null (which starts a glibc helper thread), done once per process when it works.
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    static WORKS: OnceLock<()> = OnceLock::new();
    if WORKS.get().is_some() {
        return Ok(());
    }
    probe_once().map_err(|why| dev.unsupported(IFACE, &why))?;
    let _ = WORKS.set(());
    Ok(())
}

fn probe_once() -> Result<(), String> {
    let null =
        std::fs::File::open("/dev/null").map_err(|e| format!("cannot open /dev/null to probe POSIX aio: {e}"))?;
    let mut byte = Box::new([0u8; 1]);
    let mut cb = Box::new(blank_aiocb());
    cb.aio_fildes = std::os::fd::AsRawFd::as_raw_fd(&null);
    cb.aio_buf = byte.as_mut_ptr() as *mut libc::c_void;
    cb.aio_nbytes = 1;
    let p: *mut libc::aiocb = &mut *cb;
    // SAFETY: the control block and the byte it reads into are boxed and live until the
    // request has finished (waited for below).
    if unsafe { libc::aio_read(p) } != 0 {
        let e = io::Error::last_os_error();
        return Err(format!("aio_read failed ({e}): glibc could not start its POSIX aio helper thread"));
    }
    loop {
        // SAFETY: p is the control block of a request this function started.
        let err = unsafe { libc::aio_error(p) };
        let list = [p as *const libc::aiocb];
        // SAFETY: list holds one valid control block. With the request finished this
        // returns at once, and passing glibc's request lock means its helper is done
        // with the control block.
        let rc = unsafe { libc::aio_suspend(list.as_ptr(), 1, std::ptr::null()) };
        if err == libc::EINPROGRESS {
            if rc != 0 && !matches!(last_errno(), libc::EINTR | libc::EAGAIN) {
                // The request may still run: leak what it uses rather than free it.
                std::mem::forget(cb);
                std::mem::forget(byte);
                return Err(format!("aio_suspend failed: {}", io::Error::last_os_error()));
            }
            continue;
        }
        // SAFETY: the request has finished; aio_return is called once.
        let r = unsafe { libc::aio_return(p) };
        if err != 0 || r != 0 {
            let e = io::Error::from_raw_os_error(if err != 0 { err } else { libc::EIO });
            return Err(format!("a test read of /dev/null through POSIX aio failed: {e}"));
        }
        return Ok(());
    }
}

/// Creates a queue of `depth` slots.
pub(crate) fn new_queue(dev: &Arc<Inner>, depth: u32) -> Result<super::Backend, Error> {
    Ok(super::Backend::Posix(Box::new(PosixAio::new(dev, depth)?)))
}

struct Slot {
    data: Data,
    tag: u64,
    op: Op,
    /// Byte offset where the next segment starts.
    offset: u64,
    /// Bytes not yet given to a started segment.
    left: u64,
    /// Index of the buffer the next segment uses.
    next_buf: usize,
    /// A flush not yet started.
    flush_todo: bool,
    /// A write with Force Unit Access: an fdatasync follows its data segments.
    fua_todo: bool,
    /// Segments started and not finished.
    running: u32,
    /// Bytes moved by finished segments.
    moved: u64,
    /// The first error (0: none).
    errno: i32,
    /// A segment moved fewer bytes than asked.
    short: bool,
}

impl Slot {
    fn has_more(&self) -> bool {
        self.flush_todo || self.left > 0
    }
}

pub(crate) struct PosixAio {
    dev: Arc<Inner>,
    fd: libc::c_int,
    depth: u32,
    slots: Box<[Slot]>,
    free: Vec<u32>,
    /// Control blocks; glibc's helpers write into those in flight, so they are only
    /// touched through raw pointers.
    cbs: Box<[UnsafeCell<libc::aiocb>]>,
    /// Per control block: the slot it serves and the bytes it asks for.
    cb_slot: Box<[u32]>,
    cb_len: Box<[u64]>,
    cb_free: Vec<u32>,
    /// Control blocks in flight, oldest first.
    running: Vec<u32>,
    /// Scratch: control blocks found finished by one scan.
    finished: Vec<u32>,
    /// Slots with segments still to start, in submission order.
    pending: VecDeque<u32>,
    /// The list `aio_suspend` reads.
    suspend: Box<[*const libc::aiocb]>,
    /// Completions waiting to be reaped.
    ready: VecDeque<Completion>,
    syscalls: u64,
}

// SAFETY: the raw pointers (in `suspend` and inside the control blocks) point into memory
// this struct owns: its control block table and the buffers held in its slots. glibc's
// helper threads use them whichever thread owns the queue.
unsafe impl Send for PosixAio {}

impl PosixAio {
    fn new(dev: &Arc<Inner>, depth: u32) -> Result<PosixAio, Error> {
        let fd = dev.raw_fd();
        if fd < 0 {
            return Err(dev.unsupported(IFACE, "the device has no file descriptor"));
        }
        let n = depth as usize;
        let pool = n + MAX_SEGMENTS;
        let slot = || Slot {
            data: Data::None,
            tag: 0,
            op: Op::Flush,
            offset: 0,
            left: 0,
            next_buf: 0,
            flush_todo: false,
            fua_todo: false,
            running: 0,
            moved: 0,
            errno: 0,
            short: false,
        };
        Ok(PosixAio {
            dev: dev.clone(),
            fd,
            depth,
            slots: (0..n).map(|_| slot()).collect(),
            free: (0..depth).rev().collect(),
            cbs: (0..pool).map(|_| UnsafeCell::new(blank_aiocb())).collect(),
            cb_slot: vec![0; pool].into_boxed_slice(),
            cb_len: vec![0; pool].into_boxed_slice(),
            cb_free: (0..pool as u32).rev().collect(),
            running: Vec::with_capacity(pool),
            finished: Vec::with_capacity(pool),
            pending: VecDeque::with_capacity(n),
            suspend: vec![std::ptr::null(); pool.min(SUSPEND_MAX)].into_boxed_slice(),
            ready: VecDeque::with_capacity(n),
            syscalls: 0,
        })
    }

    fn bad_command(&self, cmd: &Cmd, why: &str) -> Error {
        Error::BadCommand { dev: self.dev.uri.clone(), iface: IFACE, what: cmd.describe(), why: why.into() }
    }

    /// Starts the next segment of slot `s`; false when no control block is free.
    fn start_segment(&mut self, s: u32) -> bool {
        let Some(cb) = self.cb_free.pop() else { return false };
        let slot = &mut self.slots[s as usize];
        let mut a = blank_aiocb();
        a.aio_fildes = self.fd;
        let (sync, cost) = (slot.flush_todo, if slot.flush_todo { 3 } else { 2 });
        if sync {
            slot.flush_todo = false;
            self.cb_len[cb as usize] = 0;
        } else {
            let bufs = slot.data.bufs();
            while slot.next_buf < bufs.len() && bufs[slot.next_buf].is_empty() {
                slot.next_buf += 1;
            }
            let Some(b) = bufs.get(slot.next_buf) else {
                // Cannot happen for a checked command; end it rather than loop.
                slot.left = 0;
                slot.errno = libc::EINVAL;
                self.cb_free.push(cb);
                self.finish_if_done(s);
                return true;
            };
            let len = slot.left.min(b.len() as u64);
            a.aio_buf = b.as_ptr() as *mut libc::c_void;
            a.aio_nbytes = len as usize;
            a.aio_offset = slot.offset as libc::off_t;
            self.cb_len[cb as usize] = len;
            slot.offset += len;
            slot.left -= len;
            slot.next_buf += 1;
        }
        let op = slot.op;
        let p = self.cbs[cb as usize].get();
        // SAFETY: this control block is free (not in flight), so nothing else reads or
        // writes it; p points into the boxed table.
        unsafe { p.write(a) };
        // SAFETY: p is a filled control block at a stable address; the buffer it names
        // is owned by slot `s`, which keeps it until every segment has finished.
        let rc = unsafe {
            match op {
                _ if sync => libc::aio_fsync(libc::O_DSYNC, p),
                Op::Read => libc::aio_read(p),
                _ => libc::aio_write(p),
            }
        };
        self.syscalls += cost;
        let slot = &mut self.slots[s as usize];
        if rc != 0 {
            if slot.errno == 0 {
                slot.errno = last_errno();
            }
            slot.left = 0;
            self.cb_free.push(cb);
            self.finish_if_done(s);
        } else {
            slot.running += 1;
            self.cb_slot[cb as usize] = s;
            self.running.push(cb);
        }
        true
    }

    /// Starts pending segments while control blocks are free.
    fn pump(&mut self) {
        while let Some(&s) = self.pending.front() {
            if !self.slots[s as usize].has_more() {
                self.pending.pop_front();
                continue;
            }
            if !self.start_segment(s) {
                return;
            }
        }
    }

    /// Completes slot `s` when nothing of it is running or left to start; a FUA write
    /// whose data all landed gets its fdatasync started first.
    fn finish_if_done(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        if slot.running > 0 || slot.has_more() {
            return;
        }
        if slot.fua_todo && slot.errno == 0 && !slot.short {
            slot.fua_todo = false;
            slot.flush_todo = true;
            self.pending.push_back(s);
            return;
        }
        let (status, result) = if slot.errno != 0 {
            (errno_to_status(slot.errno), 0)
        } else if slot.short {
            (errno_to_status(libc::EIO), slot.moved)
        } else {
            (Status::OK, slot.moved)
        };
        let data = std::mem::take(&mut slot.data);
        self.ready.push_back(Completion { tag: slot.tag, status, result, data });
        self.free.push(s);
    }

    /// Scans the control blocks in flight and completes the commands that are done.
    fn collect(&mut self) {
        let mut keep = 0;
        for r in 0..self.running.len() {
            let cb = self.running[r];
            // SAFETY: cb is a control block of a request this queue started.
            let e = unsafe { libc::aio_error(self.cbs[cb as usize].get()) };
            if e == libc::EINPROGRESS {
                self.running[keep] = cb;
                keep += 1;
            } else {
                self.finished.push(cb);
            }
        }
        self.running.truncate(keep);
        let Some(&first) = self.finished.first() else { return };
        let list = [self.cbs[first as usize].get() as *const libc::aiocb];
        // SAFETY: list holds one finished control block, so this returns at once; it takes
        // glibc's request lock, after which no helper touches the finished blocks.
        unsafe { libc::aio_suspend(list.as_ptr(), 1, std::ptr::null()) };
        for k in 0..self.finished.len() {
            let cb = self.finished[k];
            let p = self.cbs[cb as usize].get();
            // SAFETY: the request has finished and glibc is done with the block; each
            // finished request is asked for its error and return value once.
            let (e, r) = unsafe { (libc::aio_error(p), libc::aio_return(p)) };
            let s = self.cb_slot[cb as usize];
            let want = self.cb_len[cb as usize];
            let slot = &mut self.slots[s as usize];
            slot.running -= 1;
            if e != 0 {
                if slot.errno == 0 {
                    slot.errno = if e > 0 { e } else { libc::EIO };
                }
                slot.left = 0;
            } else {
                let got = r.max(0) as u64;
                slot.moved += got;
                if got != want {
                    slot.short = true;
                    slot.left = 0;
                }
            }
            self.cb_free.push(cb);
            self.finish_if_done(s);
        }
        self.finished.clear();
    }

    /// Blocks in `aio_suspend` until one of the oldest requests in flight finishes.
    fn suspend(&mut self) -> Result<(), i32> {
        let k = self.running.len().min(self.suspend.len());
        for (dst, &cb) in self.suspend.iter_mut().zip(&self.running[..k]) {
            *dst = self.cbs[cb as usize].get();
        }
        self.syscalls += 1;
        // SAFETY: suspend[..k] point to control blocks of requests in flight, which stay
        // put until they are collected.
        let rc = unsafe { libc::aio_suspend(self.suspend.as_ptr(), k as libc::c_int, std::ptr::null()) };
        if rc != 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    fn hand_out(&mut self, n: &mut u32, max: u32, f: &mut impl FnMut(Completion)) {
        while *n < max {
            let Some(c) = self.ready.pop_front() else { break };
            f(c);
            *n += 1;
        }
    }
}

impl AsyncQueue for PosixAio {
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        match io.op {
            Op::Read | Op::Write | Op::Flush => {}
            Op::Trim | Op::WriteZeroes | Op::Dsm { .. } => {
                let Some(sync) = self.dev.sync() else {
                    let e = self.bad_command(cmd, "it has no POSIX aio call and the device has no sync interface");
                    return Err((e, data));
                };
                self.syscalls += sync.syscalls_per_cmd();
                self.ready.push_back(exec_to_completion(sync, io, cmd, data, tag));
                return Ok(());
            }
            Op::Passthru => {
                let e =
                    self.bad_command(cmd, "POSIX aio carries reads, writes and flushes only; use an NVMe interface");
                return Err((e, data));
            }
        }
        let Some(s) = self.free.pop() else {
            return Err((Error::Busy { depth: self.depth }, data));
        };
        let slot = &mut self.slots[s as usize];
        let flush = io.op == Op::Flush;
        *slot = Slot {
            data,
            tag,
            op: io.op,
            offset: io.offset,
            left: if flush { 0 } else { io.len },
            next_buf: 0,
            flush_todo: flush,
            fua_todo: io.op == Op::Write && cmd.is_fua(),
            running: 0,
            moved: 0,
            errno: 0,
            short: false,
        };
        self.pending.push_back(s);
        self.pump();
        Ok(())
    }

    fn commit(&mut self) -> Result<u32, Error> {
        Ok(0)
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl FnMut(Completion)) -> Result<u32, Error> {
        let mut n = 0;
        loop {
            self.hand_out(&mut n, max, f);
            if n >= max || (self.running.is_empty() && self.pending.is_empty()) {
                return Ok(n);
            }
            self.collect();
            self.pump();
            self.hand_out(&mut n, max, f);
            if n >= max || n >= min || (self.running.is_empty() && self.ready.is_empty()) {
                return Ok(n);
            }
            if self.running.is_empty() {
                continue;
            }
            match self.suspend() {
                Ok(()) | Err(libc::EINTR | libc::EAGAIN) => {}
                Err(_) if n > 0 => return Ok(n),
                Err(errno) => {
                    return Err(Error::Queue {
                        dev: self.dev.uri.clone(),
                        iface: IFACE,
                        what: "aio_suspend",
                        source: io::Error::from_raw_os_error(errno),
                    })
                }
            }
        }
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

impl Drop for PosixAio {
    fn drop(&mut self) {
        // Start nothing new; wait for what glibc's helpers hold before freeing it.
        self.pending.clear();
        loop {
            self.collect();
            if self.running.is_empty() {
                return;
            }
            match self.suspend() {
                Ok(()) | Err(libc::EINTR | libc::EAGAIN) => {}
                Err(_) => break,
            }
        }
        // Helpers may still write into these control blocks and buffers: leak them.
        for k in 0..self.running.len() {
            let s = self.cb_slot[self.running[k] as usize];
            std::mem::forget(std::mem::take(&mut self.slots[s as usize].data));
        }
        std::mem::forget(std::mem::take(&mut self.cbs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::testutil::{
        buf, direct_io_on_a_disk_file_round_trips, dirs, dropping_with_commands_in_flight_is_safe,
        errors_complete_with_the_errno_as_status, flush_completes, in_each_dir, in_temp, open, pattern,
        refuses_passthrough_commands_and_keeps_the_data, round_trip,
        short_transfers_complete_with_eio_and_the_bytes_moved, temp_in, trim_and_write_zeroes_read_back_zeroes,
        InFlight,
    };
    use crate::{Buffer, Cmd};

    #[test]
    fn posix_writes_then_reads_back_a_pattern_at_qd16() {
        in_each_dir("async=posix,create=1,size=1MiB", round_trip);
    }

    #[test]
    fn posix_direct_io_on_a_disk_file_round_trips() {
        direct_io_on_a_disk_file_round_trips("async=posix");
    }

    #[test]
    fn posix_vectored_io_becomes_one_request_per_segment() {
        for dir in dirs() {
            let t = temp_in(&dir, "posix");
            let dev = open(&t, "async=posix,create=1,size=1MiB");
            let mut q = dev.queue(4).unwrap();
            // Uneven segments; the command covers part of the last one only.
            let data = pattern(9, 4096 + 512 + 8192);
            let bufs = vec![buf(&dev, &data[..4096]), buf(&dev, &data[4096..4608]), buf(&dev, &data[4608..])];
            q.submit(&Cmd::fs_write(8192, data.len() as u64), bufs.into(), 1).unwrap();
            q.drain(|c| assert!(c.status.is_ok() && c.result == data.len() as u64, "{} {}", c.status, c.result))
                .unwrap();
            let before = q.stats().syscalls;
            let bufs = vec![dev.alloc(4096).unwrap(), dev.alloc(512).unwrap(), dev.alloc(16384).unwrap()];
            q.submit(&Cmd::fs_read(8192, data.len() as u64), bufs.into(), 2).unwrap();
            assert!(q.stats().syscalls - before >= 6, "three aio_read calls, each counted as two syscalls");
            q.drain(|c| {
                assert!(c.status.is_ok(), "{}", c.status);
                assert_eq!(c.result, data.len() as u64);
                let got: Vec<u8> = c.data.bufs().iter().flat_map(|b| b.iter().copied()).collect();
                assert_eq!(&got[..data.len()], &data[..]);
                assert!(got[data.len()..].iter().all(|&x| x == 0), "bytes past the command are untouched");
            })
            .unwrap();
        }
    }

    #[test]
    fn posix_many_segment_commands_wait_for_free_control_blocks() {
        let t = temp_in(&std::env::temp_dir(), "posix");
        let dev = open(&t, "async=posix,create=1,size=4MiB");
        let mut q = dev.queue(8).unwrap();
        // 8 commands of 64 segments: 512 requests for a pool of 8 + 64 control blocks.
        for i in 0..8u64 {
            let bufs: Vec<Buffer> = (0..64).map(|k| buf(&dev, &pattern(i * 64 + k, 512))).collect();
            q.submit(&Cmd::fs_write(i * 32768, 32768), bufs.into(), i).unwrap();
        }
        q.drain(|c| assert!(c.status.is_ok() && c.result == 32768, "{}", c.status)).unwrap();
        for i in 0..8u64 {
            q.submit(&Cmd::fs_read(i * 32768, 32768), dev.alloc(32768).unwrap().into(), i).unwrap();
        }
        q.drain(|c| {
            let b = c.data.into_one().unwrap();
            for k in 0..64 {
                assert_eq!(&b[k * 512..(k + 1) * 512], &pattern(c.tag * 64 + k as u64, 512)[..]);
            }
        })
        .unwrap();
    }

    #[test]
    fn posix_flush_completes() {
        in_temp("async=posix,create=1,size=64KiB", |dev| flush_completes(dev, Cmd::fs_flush()));
    }

    #[test]
    fn posix_fua_writes_sync_after_their_data() {
        let t = temp_in(&std::env::temp_dir(), "posix");
        let dev = open(&t, "async=posix,create=1,size=64KiB");
        let mut q = dev.queue(2).unwrap();
        let data = pattern(4, 8192);
        let bufs = vec![buf(&dev, &data[..4096]), buf(&dev, &data[4096..])];
        q.submit(&Cmd::write(dev.ident().nsid, 8, 16).fua(), bufs.into(), 1).unwrap();
        q.drain(|c| assert!(c.status.is_ok() && c.result == 8192, "{} {}", c.status, c.result)).unwrap();
        let s = q.stats().syscalls;
        assert!(s >= 2 * 2 + 3, "two aio_write and one aio_fsync: {s}");
        q.submit(&Cmd::fs_read(4096, 8192), dev.alloc(8192).unwrap().into(), 2).unwrap();
        q.drain(|c| assert_eq!(&c.data.into_one().unwrap()[..], &data[..])).unwrap();
    }

    #[test]
    fn posix_trim_and_write_zeroes_read_back_zeroes() {
        in_each_dir("async=posix,create=1,size=256KiB", |dev| trim_and_write_zeroes_read_back_zeroes(dev, false));
    }

    #[test]
    fn posix_is_busy_when_full_and_takes_more_after_a_poke() {
        let t = temp_in(&std::env::temp_dir(), "posix");
        let dev = open(&t, "async=posix,create=1,size=64KiB");
        let mut q = dev.queue(4).unwrap();
        for i in 0..4 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        let r = q.submit(&Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 9).unwrap_err();
        assert!(matches!(r.error, Error::Busy { depth: 4 }), "{r}");
        let mut data = Some(r.data);
        while let Some(d) = data.take() {
            q.poke(0, |c| assert!(c.status.is_ok())).unwrap();
            if let Err(r) = q.submit(&Cmd::fs_read(0, 4096), d, 9) {
                assert!(matches!(r.error, Error::Busy { .. }));
                data = Some(r.data);
            }
        }
        q.drain(|c| assert!(c.status.is_ok())).unwrap();
        assert_eq!(q.stats().completed, 5);
    }

    #[test]
    fn posix_wait_returns_at_least_min_and_drain_the_rest() {
        let t = temp_in(&std::env::temp_dir(), "posix");
        let dev = open(&t, "async=posix,create=1,size=1MiB");
        let mut q = dev.queue(32).unwrap();
        for i in 0..32 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        let n = q.wait(8, |c| assert!(c.status.is_ok())).unwrap();
        assert!(n >= 8, "{n}");
        assert_eq!(n + q.drain(|c| assert!(c.status.is_ok())).unwrap(), 32);
        assert_eq!(q.outstanding(), 0);
    }

    #[test]
    fn posix_dropping_with_commands_in_flight_is_safe() {
        let how = InFlight { commit_queue: false, reads: 16, commit_after: None, segments: 4 };
        dropping_with_commands_in_flight_is_safe("async=posix,create=1,size=1MiB", new_queue, how);
    }

    #[test]
    fn posix_errors_complete_with_the_errno_as_status() {
        errors_complete_with_the_errno_as_status("async=posix", new_queue);
    }

    #[test]
    fn posix_short_transfers_complete_with_eio_and_the_bytes_moved() {
        short_transfers_complete_with_eio_and_the_bytes_moved("async=posix");
    }

    #[test]
    fn posix_counts_two_syscalls_per_single_buffer_read() {
        let t = temp_in(&std::env::temp_dir(), "posix");
        let dev = open(&t, "async=posix,create=1,size=1MiB");
        let mut q = dev.queue(16).unwrap();
        for i in 0..16 {
            q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
        }
        assert_eq!(q.stats().syscalls, 32);
        assert_eq!(q.commit().unwrap(), 0, "nothing is batched");
        q.drain(|_| {}).unwrap();
        assert!(q.stats().syscalls >= 32);
    }

    #[test]
    fn posix_refuses_passthrough_commands_and_keeps_the_data() {
        refuses_passthrough_commands_and_keeps_the_data("async=posix");
    }
}
