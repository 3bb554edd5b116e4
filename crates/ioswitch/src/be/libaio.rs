//! `libaio`: Linux native AIO through the raw syscalls `io_setup(2)`, `io_submit(2)`,
//! `io_getevents(2)` and `io_destroy(2)` — no libaio library is linked.
//!
//! Each queue owns one [`sys::aio::Aio`](crate::sys::aio::Aio) sized to its depth (the
//! context, and the slots that own each command's iocb and data until the kernel is done).
//! `submit` fills a slot's iocb (read/write for one buffer, readv/writev for several,
//! fdsync for flush; a FUA write carries RWF_DSYNC); `commit` hands every queued iocb to
//! the kernel in **one** `io_submit`; `reap` takes completions with `io_getevents`
//! (blocking only when it must wait) and hands them out one by one; events harvested
//! after a panicking callback stay for the next reap or the drop.
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
//! (it is asynchronous only for direct I/O): correct, but with no overlap. Dropping a
//! queue settles and destroys its `Aio` (see there).

use super::{exec_to_completion, AsyncQueue, Io, Op};
use super::{Build, Descriptor, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::queue::{Completion, CompletionSink};
use crate::spec::errno_to_status;
use crate::sys::aio::{Aio, Refused};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, OnceLock};

/// `async=libaio`: Linux AIO (io_setup/io_submit/io_getevents).
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "libaio",
    Role::Async,
    "Linux AIO (io_setup/io_submit/io_getevents)",
    super::needs_fd,
    Build::Async { probe, queue: |dev, depth| Ok(super::Backend::Libaio(Box::new(Libaio::new(dev, depth)?))) },
)
.defaults(&[DevKind::File, DevKind::Block, DevKind::NvmeBlock])
.fio(&["libaio"]);

const IFACE: &str = "async=libaio";

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
    super::probe_once(&WORKS, || {
        crate::sys::aio::probe().map_err(|errno| dev.unsupported(IFACE, &setup_failure(errno)))
    })
}

pub(crate) struct Libaio {
    /// First, so that dropping the queue settles what is in flight before the device goes.
    aio: Aio,
    dev: Arc<Inner>,
    /// Completions that did not come from the kernel (inline commands, refused iocbs).
    ready: VecDeque<Completion>,
    syscalls: u64,
}

impl Libaio {
    /// A read or write with a priority: `aio_reqprio` with `IOCB_FLAG_IOPRIO`, written
    /// by the general path (the one-buffer path leaves both alone).
    pub(crate) fn submit_prio(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        self.submit_other(io, cmd, data, tag)
    }

    fn new(dev: &Arc<Inner>, depth: u32) -> Result<Libaio, Error> {
        let fd = super::need_fd(dev, IFACE)?;
        let aio = Aio::new(fd as u32, depth).map_err(|errno| {
            let what = match errno {
                libc::EAGAIN => {
                    "io_setup: the system-wide AIO event limit (/proc/sys/fs/aio-max-nr) is reached; \
                     raise it, or use fewer or shallower queues"
                }
                _ => "io_setup",
            };
            super::queue_errno(dev, IFACE, what, errno)
        })?;
        let ready = VecDeque::with_capacity((depth as usize).next_power_of_two());
        Ok(Libaio { aio, dev: dev.clone(), ready, syscalls: 0 })
    }

    fn bad_command(&self, cmd: &Cmd, why: &str) -> Error {
        super::bad_command(&self.dev, IFACE, cmd, why)
    }

    fn busy(&self, data: Data) -> (Error, Data) {
        (Error::Busy { depth: self.aio.depth() }, data)
    }

    /// Everything but a read or write of one buffer without FUA: flush, vectored I/O,
    /// FUA writes, inline commands, refusals.
    #[inline(never)]
    fn submit_other(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let write = match io.op {
            Op::Flush => return self.aio.queue_fdsync(data, tag).map_err(|d| self.busy(d)),
            Op::Read => false,
            Op::Write => true,
            Op::Trim | Op::WriteZeroes | Op::Dsm { .. } => return self.run_inline(io, cmd, data, tag),
            Op::Passthru => {
                let e =
                    self.bad_command(cmd, "Linux AIO carries reads, writes and flushes only; use an NVMe interface");
                return Err((e, data));
            }
        };
        self.aio.queue_vectored(write, data, io.len, io.offset, write && cmd.is_fua(), cmd.ioprio, tag).map_err(
            |(why, d)| match why {
                Refused::Full => self.busy(d),
                Refused::Empty => (self.bad_command(cmd, "it moves data but carries no buffer"), d),
            },
        )
    }

    /// Runs a command with no AIO opcode through the sync interface, now.
    fn run_inline(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let why = "it has no AIO opcode and the device has no sync interface to run it";
        let (c, syscalls) = super::run_inline(&self.dev, IFACE, why, io, cmd, data, tag)?;
        self.syscalls += syscalls;
        self.ready.push_back(c);
        Ok(())
    }

    /// Completes the first queued command with `errno` (io_submit refused its iocb).
    /// Kernels before 4.18 have no AIO fdsync (EINVAL): a flush then runs through the
    /// sync interface instead.
    #[cold]
    fn refuse_first(&mut self, errno: i32) {
        let Some((tag, data, fdsync)) = self.aio.refuse_first() else { return };
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
    fn commit_rest(&mut self, mut r: Result<u32, i32>) -> u32 {
        let mut pushed = 0u32;
        loop {
            match r {
                Ok(0) => self.refuse_first(libc::EAGAIN), // nothing taken and no error: do not spin
                Ok(n) => pushed += n,
                Err(libc::EINTR) => {}
                Err(errno) => self.refuse_first(errno), // the error of the first iocb
            }
            if self.aio.queued() == 0 {
                return pushed;
            }
            self.syscalls += 1;
            r = self.aio.submit().or_else(|part| part);
        }
    }

    /// Hands out the completions waiting in `ready`, at most `max`.
    #[inline(never)]
    fn hand_out_ready(&mut self, max: u32, f: &mut impl CompletionSink) -> u32 {
        super::hand_out(&mut self.ready, max, f)
    }

    /// Hands out harvested events, at most `max`; returns how many.
    #[inline(always)]
    fn hand_out(&mut self, max: u32, f: &mut impl CompletionSink) -> u32 {
        let k = self.aio.harvested().min(max);
        let mut n = 0u32;
        while n < k && self.aio.hand_out_next(f) {
            n += 1;
        }
        n
    }

    /// [`Self::hand_out`] of events an earlier reap left harvested (rare), out of line.
    #[cold]
    #[inline(never)]
    fn hand_out_left(&mut self, max: u32, f: &mut impl CompletionSink) -> u32 {
        self.hand_out(max, f)
    }

    /// Reaps without committing: what `ready` holds, then the harvested events, then
    /// io_getevents as `min` and `max` ask.
    #[inline(always)]
    fn reap_now(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        let mut n = 0u32;
        if !self.ready.is_empty() {
            n = self.hand_out_ready(max, f);
        }
        // Events are left harvested only by a callback that panicked, or by a reap that
        // reached its `max`: look at them only then.
        if self.aio.harvested() != 0 {
            n += self.hand_out_left(max - n, f);
        }
        loop {
            if n >= max || self.aio.in_flight() == 0 || (min > 0 && n >= min) {
                return Ok(n);
            }
            let want_max = (max - n).min(self.aio.in_flight());
            let want_min = min.saturating_sub(n).min(want_max);
            self.syscalls += 1;
            match self.aio.harvest(want_min, want_max, want_min > 0) {
                Ok(_) => {}
                Err(libc::EINTR) => continue,
                Err(_) if n > 0 => return Ok(n),
                Err(errno) => return Err(self.getevents_failed(errno)),
            }
            n += self.hand_out(max - n, f);
            if want_min == 0 {
                return Ok(n); // one look without waiting is all a poll makes
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn getevents_failed(&self, errno: i32) -> Error {
        super::queue_errno(&self.dev, IFACE, "io_getevents", errno)
    }
}

impl AsyncQueue for Libaio {
    #[inline(always)]
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        // The common command: a read, or a write without FUA, of one buffer (the checks
        // made sure the buffer holds at least `len` bytes).
        let write = match (io.op, &data) {
            (Op::Read, Data::One(_)) => false,
            (Op::Write, Data::One(_)) if !cmd.is_fua() => true,
            _ => return self.submit_other(&{ *io }, cmd, super::own(data), tag),
        };
        self.aio.queue_one(write, data, io.len, io.offset, tag).map_err(|d| self.busy(d))
    }

    #[inline]
    fn commit(&mut self) -> Result<u32, Error> {
        if self.aio.queued() == 0 {
            return Ok(0);
        }
        self.syscalls += 1;
        match self.aio.submit() {
            Ok(n) => Ok(n),
            Err(part) => Ok(self.commit_rest(part)),
        }
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        self.commit()?;
        self.reap_now(min, max, f)
    }

    #[inline(always)]
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        self.commit()?;
        self.reap_now(min, max, f)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::prepare;
    use crate::be::testutil::{
        buf, busy_when_full_and_takes_more_after_a_wait, direct_io_on_a_disk_file_round_trips, dirs,
        dropping_with_commands_in_flight_is_safe, errors_complete_with_the_errno_as_status, flush_completes,
        in_each_dir, in_temp, open, pattern, queue_fn, queue_of_reads, refuses_passthrough_commands_and_keeps_the_data,
        round_trip, run_one, short_transfers_complete_with_eio_and_the_bytes_moved, temp_in,
        trim_and_write_zeroes_read_back_zeroes, vectored_io_round_trips, InFlight, Temp,
    };
    use crate::{Buffer, Cmd, Device};

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
        dropping_with_commands_in_flight_is_safe(
            "async=libaio,create=1,size=1MiB,direct=1",
            queue_fn(&DESCRIPTOR),
            how,
        );
    }

    #[test]
    fn libaio_sixteen_submissions_cost_one_io_submit() {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, "async=libaio,create=1,size=1MiB");
        let mut q = queue_of_reads(&dev, 16);
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
        errors_complete_with_the_errno_as_status("async=libaio", queue_fn(&DESCRIPTOR));
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

    /// A backend of `depth` slots made directly on a new temporary file of `size`; the
    /// file lives as long as the first part.
    fn backend(size: &str, depth: u32) -> (Temp, Device, Libaio) {
        let t = temp_in(&std::env::temp_dir(), "libaio");
        let dev = open(&t, &format!("async=libaio,create=1,size={size}"));
        let be = Libaio::new(&dev.inner, depth).unwrap();
        (t, dev, be)
    }

    /// Submits one-block reads of the first `n` blocks, tagged `tag0` and on.
    fn put_reads(be: &mut Libaio, dev: &Device, n: u64, tag0: u64) {
        for i in 0..n {
            put(be, dev, Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), tag0 + i).unwrap();
        }
    }

    /// Every slot free and empty, nothing queued, harvested or in flight.
    fn assert_idle(be: &Libaio) {
        let (nfree, held, _, queued, harvested, in_flight) = be.aio.state();
        assert_eq!(nfree, be.aio.depth(), "every slot is free");
        assert_eq!(held, 0, "no slot is busy or holds data");
        assert_eq!((queued, harvested, in_flight), (0, 0, 0));
        assert!(be.ready.is_empty());
    }

    #[test]
    fn libaio_a_depth_that_is_no_power_of_two_uses_exactly_its_slots() {
        // The tables are 8 long for depth 5 and indexed through a mask: the free list,
        // the iocb pointers and the events must still stay within the 5 slots in use.
        let (_t, dev, mut be) = backend("1MiB", 5);
        assert_eq!((be.aio.depth(), be.aio.state().2), (5, 8));
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
            assert!(!be.aio.busy_from(5), "the slots past the depth are never used");
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
        let (_t, dev, mut be) = backend("1MiB", 8);
        for round in 0..2u64 {
            put_reads(&mut be, &dev, 8, 0);
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
            assert_eq!((be.aio.harvested(), be.aio.in_flight()), (6, 0), "round {round}");
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
        let (_t, dev, mut be) = backend("1MiB", 18);
        put_reads(&mut be, &dev, 16, 0);
        be.commit().unwrap();
        // Harvest 4 of 16; the first callback panics: 3 harvested and 12 with the kernel.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            be.reap(4, 4, &mut |_c: Completion| panic!("callback fails"))
        }));
        assert!(r.is_err());
        assert_eq!((be.aio.harvested(), be.aio.in_flight()), (3, 12));
        // Two more queued and never committed.
        put_reads(&mut be, &dev, 2, 20);
        // What drop does: it must not wait for the 3 harvested events (it would hang), and
        // it must free every buffer (no slot left holding data).
        be.aio.settle();
        assert_idle(&be);
        drop(be);
    }

    #[test]
    fn libaio_partial_io_submit_refuses_the_bad_iocb_and_submits_the_rest() {
        let (_t, dev, mut be) = backend("64KiB", 4);
        for i in 0..4u64 {
            put(&mut be, &dev, Cmd::fs_write(i * 4096, 4096), buf(&dev, &pattern(i, 4096)).into(), i).unwrap();
        }
        // The second iocb carries an opcode the kernel does not know: io_submit takes the
        // first, stops there (1), refuses the second (EINVAL), then takes the last two.
        let (second, first) = be.aio.break_queued(1);
        assert_ne!(first, second);
        assert_eq!(be.commit().unwrap(), 3);
        assert_eq!(be.syscalls(), 3, "io_submit: 1 taken, the bad one refused, 2 taken");
        assert_eq!(be.aio.queued(), 0);
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
        let (_t, dev, mut be) = backend("64KiB", 2);
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
            let mut be = queue_fn(&DESCRIPTOR)(&dev.inner, 1).unwrap();
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

    #[test]
    fn libaio_short_buffers_are_refused_before_the_interface() {
        crate::be::testutil::short_buffers_are_refused_before_the_interface("async=libaio");
    }
}
