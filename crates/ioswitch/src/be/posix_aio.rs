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
//! The control blocks and the data they point into are owned by a
//! [`sys::posix_aio::Cbs`](crate::sys::posix_aio::Cbs), which also keeps glibc's locking
//! rules and waits for glibc's helpers when the queue is dropped.
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

use super::{hand_out, AsyncQueue, Io, Op, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::{Completion, CompletionSink};
use crate::spec::{errno_to_status, Status};
use crate::sys::posix_aio::{Cbs, Finished, Seg, Started};
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

/// `async=posix`: POSIX aio (aio_read/aio_write/aio_fsync).
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "posix",
    Role::Async,
    "POSIX aio (aio_read/aio_write/aio_fsync)",
    super::needs_fd,
    Build::Async { probe, queue: |dev, depth| Ok(super::Backend::Posix(Box::new(PosixAio::new(dev, depth)?))) },
)
.fio(&["posixaio"]);

const IFACE: &str = "async=posix";

/// Checks at open that POSIX aio works in this process: one 1-byte `aio_read` of
/// /dev/null (which starts a glibc helper thread), done once per process when it works.
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    static WORKS: OnceLock<()> = OnceLock::new();
    super::probe_once(&WORKS, || crate::sys::posix_aio::probe().map_err(|why| dev.unsupported(IFACE, &why)))
}

/// A command's state; its data is held by the control-block pool, beside the requests
/// that use it. A free slot is all zeroes.
#[derive(Default)]
struct Slot {
    tag: u64,
    /// Data segments write (a write; not a read).
    write: bool,
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
    /// A segment failed with `errno` (the first error is the command's): nothing more of
    /// the command starts.
    fn fail(&mut self, errno: i32) {
        if self.errno == 0 {
            self.errno = errno;
        }
        self.left = 0;
    }

    fn has_more(&self) -> bool {
        self.flush_todo || self.left > 0
    }
}

pub(crate) struct PosixAio {
    /// First, so that dropping the queue waits for glibc's helpers before the device goes.
    cbs: Cbs,
    dev: Arc<Inner>,
    depth: u32,
    slots: Box<[Slot]>,
    free: Vec<u32>,
    /// Scratch: segments found finished by one scan.
    finished: Vec<Finished>,
    /// Slots with segments still to start, in submission order.
    pending: VecDeque<u32>,
    /// Completions waiting to be reaped.
    ready: VecDeque<Completion>,
    syscalls: u64,
}

impl PosixAio {
    fn new(dev: &Arc<Inner>, depth: u32) -> Result<PosixAio, Error> {
        let fd = super::need_fd(dev, IFACE)?;
        let n = depth as usize;
        let pool = n + MAX_SEGMENTS;
        Ok(PosixAio {
            cbs: Cbs::new(fd, n, pool),
            dev: dev.clone(),
            depth,
            slots: (0..n).map(|_| Slot::default()).collect(),
            free: (0..depth).rev().collect(),
            finished: Vec::with_capacity(pool),
            pending: VecDeque::with_capacity(n),
            ready: VecDeque::with_capacity(n),
            syscalls: 0,
        })
    }

    /// Starts the next segment of slot `s`; false when no control block is free.
    fn start_segment(&mut self, s: u32) -> bool {
        let slot = &mut self.slots[s as usize];
        let (seg, cost) = if slot.flush_todo {
            (Seg::Fsync, 3)
        } else {
            let bufs = self.cbs.data(s).bufs();
            while slot.next_buf < bufs.len() && bufs[slot.next_buf].is_empty() {
                slot.next_buf += 1;
            }
            if slot.next_buf >= bufs.len() {
                // Cannot happen for a checked command; end it rather than loop.
                slot.left = 0;
                slot.errno = libc::EINVAL;
                self.finish_if_done(s);
                return true;
            }
            (Seg::Rw { write: slot.write, buf: slot.next_buf, offset: slot.offset, len: slot.left }, 2)
        };
        let started = self.cbs.start(s, seg);
        let slot = &mut self.slots[s as usize];
        match started {
            Started::NoCb => return false,
            Started::Running(len) => {
                slot.running += 1;
                if let Seg::Fsync = seg {
                    slot.flush_todo = false;
                } else {
                    slot.offset += len;
                    slot.left -= len;
                    slot.next_buf += 1;
                }
            }
            Started::Failed(errno) => {
                slot.fail(errno);
                slot.flush_todo = false;
            }
        }
        self.syscalls += cost;
        if !matches!(started, Started::Running(_)) {
            self.finish_if_done(s);
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
        // Nothing of the command runs (checked above): its data comes back.
        let data = self.cbs.take(s).unwrap_or_default();
        self.ready.push_back(Completion { tag: slot.tag, status, result, data });
        self.free.push(s);
    }

    /// Scans the control blocks in flight and completes the commands that are done.
    fn collect(&mut self) {
        self.cbs.collect(&mut self.finished);
        for k in 0..self.finished.len() {
            let Finished { slot: s, want, error: e, ret: r } = self.finished[k];
            let slot = &mut self.slots[s as usize];
            slot.running -= 1;
            if e != 0 {
                slot.fail(if e > 0 { e } else { libc::EIO });
            } else {
                let got = r.max(0) as u64;
                slot.moved += got;
                if got != want {
                    slot.short = true;
                    slot.left = 0;
                }
            }
            self.finish_if_done(s);
        }
        self.finished.clear();
    }

    /// Blocks in `aio_suspend` until one of the oldest requests in flight finishes.
    fn suspend(&mut self) -> Result<(), i32> {
        self.syscalls += 1;
        self.cbs.suspend()
    }
}

impl AsyncQueue for PosixAio {
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        match io.op {
            Op::Read | Op::Write | Op::Flush => {}
            Op::Trim | Op::WriteZeroes | Op::Dsm { .. } => {
                let why = "it has no POSIX aio call and the device has no sync interface";
                let (c, syscalls) = super::run_inline(&self.dev, IFACE, why, io, cmd, data, tag)?;
                self.syscalls += syscalls;
                self.ready.push_back(c);
                return Ok(());
            }
            Op::Passthru => {
                let why = "POSIX aio carries reads, writes and flushes only; use an NVMe interface";
                return Err((super::bad_command(&self.dev, IFACE, cmd, why), data));
            }
        }
        let Some(s) = self.free.pop() else {
            return Err((Error::Busy { depth: self.depth }, data));
        };
        // A free slot has nothing running, so the pool takes its data.
        if let Err(data) = self.cbs.hold(s, data) {
            self.free.push(s);
            return Err((Error::Busy { depth: self.depth }, data));
        }
        let slot = &mut self.slots[s as usize];
        let flush = io.op == Op::Flush;
        *slot = Slot {
            tag,
            write: io.op != Op::Read,
            offset: io.offset,
            left: if flush { 0 } else { io.len },
            flush_todo: flush,
            fua_todo: io.op == Op::Write && cmd.is_fua(),
            ..Slot::default()
        };
        self.pending.push_back(s);
        self.pump();
        Ok(())
    }

    fn commit(&mut self) -> Result<u32, Error> {
        Ok(0)
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        let mut n = 0;
        loop {
            n += hand_out(&mut self.ready, max - n, f);
            if n >= max || ((self.cbs.running() == 0) && self.pending.is_empty()) {
                return Ok(n);
            }
            self.collect();
            self.pump();
            n += hand_out(&mut self.ready, max - n, f);
            if n >= max || n >= min || ((self.cbs.running() == 0) && self.ready.is_empty()) {
                return Ok(n);
            }
            if self.cbs.running() == 0 {
                continue;
            }
            match self.suspend() {
                Ok(()) | Err(libc::EINTR | libc::EAGAIN) => {}
                Err(_) if n > 0 => return Ok(n),
                Err(errno) => return Err(super::queue_errno(&self.dev, IFACE, "aio_suspend", errno)),
            }
        }
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::testutil::{
        buf, direct_io_on_a_disk_file_round_trips, dirs, dropping_with_commands_in_flight_is_safe,
        errors_complete_with_the_errno_as_status, flush_completes, in_each_dir, in_temp, open, pattern, queue_fn,
        queue_of_reads, refuses_passthrough_commands_and_keeps_the_data, round_trip,
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
        let mut q = queue_of_reads(&dev, 4);
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
        let mut q = queue_of_reads(&dev, 32);
        let n = q.wait(8, |c| assert!(c.status.is_ok())).unwrap();
        assert!(n >= 8, "{n}");
        assert_eq!(n + q.drain(|c| assert!(c.status.is_ok())).unwrap(), 32);
        assert_eq!(q.outstanding(), 0);
    }

    #[test]
    fn posix_dropping_with_commands_in_flight_is_safe() {
        let how = InFlight { commit_queue: false, reads: 16, commit_after: None, segments: 4 };
        dropping_with_commands_in_flight_is_safe("async=posix,create=1,size=1MiB", queue_fn(&DESCRIPTOR), how);
    }

    #[test]
    fn posix_errors_complete_with_the_errno_as_status() {
        errors_complete_with_the_errno_as_status("async=posix", queue_fn(&DESCRIPTOR));
    }

    #[test]
    fn posix_short_transfers_complete_with_eio_and_the_bytes_moved() {
        short_transfers_complete_with_eio_and_the_bytes_moved("async=posix");
    }

    #[test]
    fn posix_counts_two_syscalls_per_single_buffer_read() {
        let t = temp_in(&std::env::temp_dir(), "posix");
        let dev = open(&t, "async=posix,create=1,size=1MiB");
        let mut q = queue_of_reads(&dev, 16);
        assert_eq!(q.stats().syscalls, 32);
        assert_eq!(q.commit().unwrap(), 0, "nothing is batched");
        q.drain(|_| {}).unwrap();
        assert!(q.stats().syscalls >= 32);
    }

    #[test]
    fn posix_refuses_passthrough_commands_and_keeps_the_data() {
        refuses_passthrough_commands_and_keeps_the_data("async=posix");
    }

    #[test]
    fn posix_short_buffers_are_refused_before_the_interface() {
        crate::be::testutil::short_buffers_are_refused_before_the_interface("async=posix");
    }
}
