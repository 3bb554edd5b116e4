//! `thrpool`: a pool of worker threads per queue, each running commands through the
//! device's sync interface — concurrency for any sync interface (files, block devices,
//! ramdisks), the way xNVMe's thread pool does it.
//!
//! `submit` appends the command (which owns its data) to a local batch; `commit` moves
//! the whole batch to the shared job queue under one lock and wakes as many sleeping
//! workers as there are new jobs. Workers push completions to a second queue; `reap`
//! swaps that queue with its own (both preallocated to `depth`, so nothing allocates)
//! and hands completions out without holding the lock, sleeping on a condition variable
//! when it must wait: workers wake it only once the number it waits for is there.
//!
//! Syscalls counted: each command's cost on the sync interface, plus every futex wake or
//! wait the queue causes: a condition-variable notify when a sleeper is there to wake
//! (a notify-all for all sleepers counts once), and every sleep of a worker or of the
//! reaping thread. Uncontended locks make no syscall; contended ones are not counted.
//!
//! A worker that panics inside the sync interface loses that command (its data is
//! dropped). The queue goes on; when only lost commands are left, `reap` returns
//! [`Error::Queue`] instead of waiting forever. Dropping the queue stops the workers
//! after the job in hand and joins them; jobs still queued are dropped with their data.

use super::{AsyncQueue, Io, Job};
use super::{Build, Descriptor, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::{Completion, CompletionSink};
use std::collections::VecDeque;
use std::io;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};

/// `async=thrpool`: a pool of worker threads running the sync interface.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "thrpool",
    Role::Async,
    "a pool of worker threads running the sync interface",
    super::controller_only,
    Build::Async { probe, queue: |dev, depth| Ok(super::Backend::Thrpool(Box::new(Thrpool::new(dev, depth)?))) },
)
.defaults(&[DevKind::NvmeChar])
.tunables(&[("threads", None)]);

const IFACE: &str = "async=thrpool";

/// Worker threads per queue when the options name none.
const DEFAULT_THREADS: u32 = 4;

/// Checks at open that this interface will work for the device: it needs a sync
/// interface, and the process must be able to start threads (tried once per process).
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    static WORKS: OnceLock<()> = OnceLock::new();
    if dev.sync().is_none() {
        return Err(dev.unsupported(IFACE, "it runs the sync interface, and this device has none"));
    }
    super::probe_once(&WORKS, || match thread::Builder::new().name("ioswitch-probe".into()).spawn(|| ()) {
        Ok(h) => {
            let _ = h.join();
            Ok(())
        }
        Err(e) => Err(dev.unsupported(IFACE, &format!("cannot start a worker thread: {e}"))),
    })
}

struct Jobs {
    q: VecDeque<Job>,
    /// Workers asleep on `job_cv`.
    sleepers: u32,
    shutdown: bool,
}

struct Done {
    q: VecDeque<Completion>,
    /// How many completions the reaping thread sleeps for (0: it does not sleep).
    want: usize,
    /// Commands lost to a panicking worker.
    lost: u32,
    /// Workers still running their loop.
    alive: u32,
}

struct Shared {
    jobs: Mutex<Jobs>,
    job_cv: Condvar,
    done: Mutex<Done>,
    done_cv: Condvar,
    syscalls: AtomicU64,
}

/// Locks a mutex, going on after a panic elsewhere: the queues it guards stay consistent
/// (every update is a single push, pop or counter change).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn count(&self, n: u64) {
        self.syscalls.fetch_add(n, Ordering::Relaxed);
    }

    /// Unlocks the completions; when `wake`, the reaping thread stops waiting and is
    /// woken (a counted syscall).
    fn unlock_done(&self, mut d: MutexGuard<'_, Done>, wake: bool) {
        if wake {
            d.want = 0;
        }
        drop(d);
        if wake {
            self.count(1);
            self.done_cv.notify_one();
        }
    }
}

/// Tells the reaping thread when a worker leaves its loop, whether it returns or unwinds.
struct Alive<'a>(&'a Shared);

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        let mut d = lock(&self.0.done);
        d.alive -= 1;
        let wake = d.want > 0;
        self.0.unlock_done(d, wake);
    }
}

fn worker(shared: &Shared, dev: &Inner) {
    let _alive = Alive(shared);
    let Some(sync) = dev.sync() else { return };
    let per_cmd = sync.syscalls_per_cmd();
    loop {
        let job = {
            let mut g = lock(&shared.jobs);
            loop {
                if g.shutdown {
                    return;
                }
                if let Some(job) = g.q.pop_front() {
                    break job;
                }
                g.sleepers += 1;
                shared.count(1);
                g = shared.job_cv.wait(g).unwrap_or_else(|p| p.into_inner());
                g.sleepers -= 1;
            }
        };
        shared.count(per_cmd);
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| job.run(sync)));
        let mut d = lock(&shared.done);
        let wake = match outcome {
            Ok(c) => {
                d.q.push_back(c);
                d.want > 0 && d.q.len() >= d.want
            }
            Err(_) => {
                d.lost += 1;
                d.want > 0
            }
        };
        shared.unlock_done(d, wake);
    }
}

pub(crate) struct Thrpool {
    dev: Arc<Inner>,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Submitted, not yet committed.
    batch: Vec<Job>,
    /// Completions taken from the shared queue, not yet handed out.
    local: VecDeque<Completion>,
    /// Committed and not yet reaped (lost commands included).
    committed: u32,
    /// Syscalls counted on this side (commit wake-ups).
    syscalls: u64,
}

impl Thrpool {
    fn new(dev: &Arc<Inner>, depth: u32) -> Result<Thrpool, Error> {
        if dev.sync().is_none() {
            return Err(dev.unsupported(IFACE, "it runs the sync interface, and this device has none"));
        }
        let n = depth as usize;
        let threads = dev.opts.threads.unwrap_or(DEFAULT_THREADS).max(1);
        let shared = Arc::new(Shared {
            jobs: Mutex::new(Jobs { q: VecDeque::with_capacity(n), sleepers: 0, shutdown: false }),
            job_cv: Condvar::new(),
            done: Mutex::new(Done { q: VecDeque::with_capacity(n), want: 0, lost: 0, alive: 0 }),
            done_cv: Condvar::new(),
            syscalls: AtomicU64::new(0),
        });
        let mut pool = Thrpool {
            dev: dev.clone(),
            shared: shared.clone(),
            workers: Vec::with_capacity(threads as usize),
            batch: Vec::with_capacity(n),
            local: VecDeque::with_capacity(n),
            committed: 0,
            syscalls: 0,
        };
        for i in 0..threads {
            let (s, d) = (shared.clone(), dev.clone());
            lock(&shared.done).alive += 1;
            let spawned = thread::Builder::new().name(format!("ioswitch-thrpool-{i}")).spawn(move || worker(&s, &d));
            match spawned {
                Ok(h) => pool.workers.push(h),
                Err(source) => {
                    lock(&shared.done).alive -= 1;
                    // Dropping `pool` stops and joins the workers already started.
                    return Err(Error::Queue {
                        dev: dev.uri.clone(),
                        iface: IFACE,
                        what: "starting a worker thread",
                        source,
                    });
                }
            }
        }
        Ok(pool)
    }

    fn dead(&self, what: &'static str) -> Error {
        Error::Queue { dev: self.dev.uri.clone(), iface: IFACE, what, source: io::Error::other("worker failure") }
    }
}

impl AsyncQueue for Thrpool {
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if self.batch.len() == self.batch.capacity() {
            return Err((Error::Busy { depth: self.batch.capacity() as u32 }, data));
        }
        self.batch.push(Job { io: *io, cmd: *cmd, data, tag });
        Ok(())
    }

    fn commit(&mut self) -> Result<u32, Error> {
        let n = self.batch.len() as u32;
        if n == 0 {
            return Ok(0);
        }
        let sleepers = {
            let mut g = lock(&self.shared.jobs);
            g.q.extend(self.batch.drain(..));
            g.sleepers
        };
        self.committed += n;
        let wake = n.min(sleepers);
        if wake == sleepers && wake > 0 {
            self.syscalls += 1;
            self.shared.job_cv.notify_all();
        } else {
            for _ in 0..wake {
                self.syscalls += 1;
                self.shared.job_cv.notify_one();
            }
        }
        Ok(n)
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        if !self.batch.is_empty() {
            self.commit()?;
        }
        let mut n = 0u32;
        loop {
            while n < max {
                let Some(c) = self.local.pop_front() else { break };
                self.committed -= 1;
                f.put(c);
                n += 1;
            }
            if n >= max || self.committed == 0 {
                return Ok(n);
            }
            let mut d = lock(&self.shared.done);
            loop {
                let avail = d.q.len() as u32;
                // `local` is empty here, so everything committed and not reaped is either
                // in `d.q`, lost, or still with a worker.
                let lost = d.lost.min(self.committed - avail);
                let running = self.committed - avail - lost;
                // Jobs that no worker is left to run.
                let stuck = running > 0 && d.alive == 0;
                if avail > 0 && (n + avail >= min || running == 0 || stuck) {
                    mem::swap(&mut self.local, &mut d.q);
                    break;
                }
                if running == 0 || stuck {
                    // Nothing more will complete: waiting would never end.
                    let why = if stuck {
                        "every worker thread has exited"
                    } else {
                        "a worker thread panicked; commands were lost"
                    };
                    return if n > 0 { Ok(n) } else { Err(self.dead(why)) };
                }
                if n >= min {
                    return Ok(n);
                }
                d.want = (min - n) as usize;
                self.syscalls += 1;
                d = self.shared.done_cv.wait(d).unwrap_or_else(|p| p.into_inner());
                d.want = 0;
            }
        }
    }

    fn syscalls(&self) -> u64 {
        self.syscalls + self.shared.syscalls.load(Ordering::Relaxed)
    }
}

impl Drop for Thrpool {
    fn drop(&mut self) {
        lock(&self.shared.jobs).shutdown = true;
        self.shared.job_cv.notify_all();
        for h in self.workers.drain(..) {
            // A worker that panicked outside a command has nothing left to clean up.
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_help_text_of_threads_gives_its_default() {
        let (_, meaning) = crate::opts::KEYS.iter().find(|(k, _)| *k == "threads").expect("threads is a key");
        assert!(meaning.contains(&format!("(default {})", super::DEFAULT_THREADS)), "{meaning}");
    }

    use super::*;
    use crate::be::testutil::{
        buf, busy_when_full_and_takes_more_after_a_wait, dirs, dropping_with_commands_in_flight_is_safe, in_each_dir,
        in_temp, open, open_uri, pattern, queue_fn, queue_of_reads, temp_in, trim_and_write_zeroes_read_back_zeroes,
        vectored_io_round_trips, InFlight,
    };
    use crate::be::{prepare, SyncIo};
    use crate::buf::Buffer;
    use crate::dev::Interfaces;
    use crate::opts::{AdminIface, AsyncIface, MemIface, Opts};
    use crate::spec::Status;
    use crate::{Cmd, Device};

    /// Writes `count` blocks from `first` at qd16, reads them back at qd16, compares.
    fn round_trip(dev: &Device, first: u64, count: u64) {
        let nsid = dev.ident().nsid;
        let lba = dev.geometry().lba_size as usize;
        let bs = 4096.max(lba);
        let nlb = (bs / lba) as u32;
        let mut q = dev.queue(16).unwrap();
        let submit_all = |q: &mut crate::Queue, write: bool| {
            let mut reaped = 0;
            for i in first..first + count {
                let cmd =
                    if write { Cmd::write(nsid, i * nlb as u64, nlb) } else { Cmd::read(nsid, i * nlb as u64, nlb) };
                let data = if write { buf(dev, &pattern(i, bs)) } else { dev.alloc(bs).unwrap() };
                let mut data = Some(Data::from(data));
                while let Some(d) = data.take() {
                    if let Err(r) = q.submit(&cmd, d, i) {
                        assert!(matches!(r.error, Error::Busy { .. }), "{r}");
                        data = Some(r.data);
                        reaped += q.wait(1, |c| check(c, write, bs)).unwrap();
                    }
                }
            }
            reaped += q.drain(|c| check(c, write, bs)).unwrap();
            assert_eq!(reaped as u64, count);
        };
        submit_all(&mut q, true);
        submit_all(&mut q, false);
    }

    fn check(c: Completion, write: bool, bs: usize) {
        assert!(c.status.is_ok(), "{} {}: {}", if write { "write" } else { "read" }, c.tag, c.status);
        assert_eq!(c.result, bs as u64);
        if !write {
            assert_eq!(&c.data.into_one().unwrap()[..], &pattern(c.tag, bs)[..], "block {}", c.tag);
        }
    }

    #[test]
    fn thrpool_writes_then_reads_back_a_pattern_at_qd16() {
        for dir in dirs() {
            let t = temp_in(&dir, "thrpool");
            round_trip(&open(&t, "async=thrpool,create=1,size=1MiB"), 0, 64);
        }
    }

    #[test]
    fn thrpool_works_with_one_thread_and_with_eight() {
        for threads in [1, 8] {
            let t = temp_in(&std::env::temp_dir(), "thrpool");
            round_trip(&open(&t, &format!("async=thrpool,threads={threads},create=1,size=1MiB")), 0, 48);
        }
    }

    #[test]
    fn thrpool_on_a_ramdisk_serves_two_threads_with_their_own_queues() {
        let dev = open_uri("8MiB", "async=thrpool");
        thread::scope(|s| {
            for k in 0..2u64 {
                let dev = dev.clone();
                s.spawn(move || round_trip(&dev, k * 512, 256));
            }
        });
    }

    #[test]
    fn thrpool_vectored_io_round_trips() {
        in_temp("async=thrpool,create=1,size=1MiB", vectored_io_round_trips);
    }

    #[test]
    fn thrpool_flush_trim_and_write_zeroes() {
        in_each_dir("async=thrpool,create=1,size=256KiB", |dev| trim_and_write_zeroes_read_back_zeroes(dev, true));
    }

    #[test]
    fn thrpool_is_busy_when_full_and_takes_more_after_a_wait() {
        busy_when_full_and_takes_more_after_a_wait(&open_uri("1MiB", "async=thrpool,threads=2"));
    }

    #[test]
    fn thrpool_dropping_with_commands_in_flight_is_safe() {
        let how = InFlight { commit_queue: true, reads: 64, commit_after: Some(40), segments: 1 };
        dropping_with_commands_in_flight_is_safe(
            "async=thrpool,threads=2,create=1,size=1MiB",
            queue_fn(&DESCRIPTOR),
            how,
        );
    }

    #[test]
    fn thrpool_counts_the_sync_calls_and_the_wakeups() {
        let t = temp_in(&std::env::temp_dir(), "thrpool");
        let dev = open(&t, "async=thrpool,threads=1,create=1,size=1MiB");
        let mut q = queue_of_reads(&dev, 16);
        assert!(q.stats().syscalls <= 1, "submit makes no syscall; the one worker may have gone to sleep");
        q.drain(|_| {}).unwrap();
        let s = q.stats().syscalls;
        // 16 preads, plus at most: the worker's sleeps (before and after the batch), one
        // wake of it, and the reaper's sleeps and wakes.
        assert!((16..=16 + 8).contains(&s), "{s}");
    }

    #[test]
    fn thrpool_probe_refuses_a_device_without_a_sync_interface() {
        let t = temp_in(&std::env::temp_dir(), "thrpool");
        let dev = open(&t, "async=thrpool,create=1,size=64KiB");
        let inner = fake_inner(&dev.inner.uri, None);
        let e = probe(&inner).unwrap_err().to_string();
        assert!(e.contains("async=thrpool") && e.contains("sync interface"), "{e}");
    }

    /// A sync interface whose every command panics.
    struct Panics;

    impl SyncIo for Panics {
        fn exec(&self, _io: &Io, _cmd: &Cmd, _bufs: &mut [Buffer]) -> Result<u64, Status> {
            panic!("deliberate panic in a sync interface (test)");
        }
        fn syscalls_per_cmd(&self) -> u64 {
            0
        }
    }

    /// A 64 KiB ramdisk's device with `sync` as its sync interface and thrpool as its
    /// async one.
    fn fake_inner(uri: &str, sync: Option<Box<dyn SyncIo>>) -> Inner {
        let (_, _, geo, ident) = crate::dev::open::open_ramdisk(uri, 65536, &Opts::default()).unwrap();
        let ifaces = Interfaces {
            sync: None,
            r#async: Some(AsyncIface::Thrpool),
            admin: AdminIface::Emulated,
            mem: MemIface::Posix,
        };
        let opts = Opts { threads: Some(2), ..Opts::default() };
        Inner { uri: uri.into(), ident, geo, ifaces, opts, fd: None, sync, admin: None, vfio: None }
    }

    #[test]
    fn thrpool_a_panicking_worker_makes_reap_fail_instead_of_hang() {
        let dev = Arc::new(fake_inner("panics", Some(Box::new(Panics))));
        let mut q = queue_fn(&DESCRIPTOR)(&dev, 4).unwrap();
        for i in 0..3u64 {
            let cmd = Cmd::fs_read(i * 512, 512);
            let data: Data = Buffer::alloc(512, 512).unwrap().into();
            let io = prepare(&dev, &cmd, data.bufs()).unwrap();
            q.submit(&io, &cmd, data, i).map_err(|(e, _)| e).unwrap();
        }
        q.commit().unwrap();
        let e = q.reap(3, u32::MAX, &mut |_| panic!("no command can complete")).unwrap_err();
        assert!(matches!(e, Error::Queue { .. }), "{e}");
        assert!(e.to_string().contains("panicked") && e.to_string().contains("async=thrpool"), "{e}");
        let e = q.reap(0, u32::MAX, &mut |_| panic!("no command can complete")).unwrap_err();
        assert!(matches!(e, Error::Queue { .. }), "a poke says so too: {e}");
        drop(q);
    }

    #[test]
    fn thrpool_short_buffers_are_refused_before_the_interface() {
        crate::be::testutil::short_buffers_are_refused_before_the_interface("async=thrpool,threads=2");
    }
}
