//! The io_uring interfaces and the one ring core they share.
//!
//! - [`file`](mod@file): `io_uring`, read/write/readv/writev/fsync/fallocate on files
//!   and block devices, on a ring of 64-byte SQEs and 16-byte CQEs;
//! - [`cmd`]: `io_uring_cmd`, NVMe passthrough (`IORING_OP_URING_CMD`) on `/dev/ngXnY`,
//!   on a ring of 128-byte SQEs and 32-byte CQEs.
//!
//! Both are a [`Ring`], generic over an [`Iface`] that names the io-uring crate's entry
//! types (`squeue::Entry` / `Entry128`, `cqueue::Entry` / `Entry32`) and says only what is
//! particular to the interface: how a command becomes an SQE (`Iface::submit`) and how a
//! CQE ends a command (`Iface::end`). An entry of the wrong size cannot be pushed onto a
//! ring: it does not compile. Everything else is written once, here:
//!
//! - **Setup from [`Opts`](crate::Opts)**: `sqpoll=1` / `sqpoll_cpu=N`, `iopoll=1`,
//!   `IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG` where the kernel has them and there is no
//!   SQPOLL thread (completions of punted work are posted when the task next enters the
//!   kernel, instead of interrupting it, as fio sets up its rings), `single_issuer=1`
//!   (`SINGLE_ISSUER | DEFER_TASKRUN`, where the interface takes it). The kernel rounds the
//!   SQ up to a power of two and makes the CQ twice as large, so neither can overflow with
//!   at most `depth` commands in flight. With SQPOLL the ring gets twice the depth: the
//!   poll thread moves the SQ head only after its whole batch, while completions of that
//!   batch can already be reaped and their slots reused, so a push never finds the SQ full
//!   while a slot is free.
//! - **Checks at open** shared by both interfaces: that the process can create a ring,
//!   that the SQPOLL CPU exists and the kernel gives this process a poll thread, that a
//!   disk has poll queues for IOPOLL (`queue/io_poll`).
//! - **Registration**: the descriptor (`register_files=1`: commands name fixed file 0)
//!   and, for the interfaces that use them, a sparse table of registered buffers
//!   ([`reg::RegTable`]).
//! - **Slots**: a table preallocated at queue creation, one slot per command, owned with
//!   the ring by a [`sys::uring::Uring`](Uring): what an SQE may point to (the moved-in
//!   [`Data`], a stable iovec array, a DSM range) is private to `sys`, which builds every
//!   SQE from it and lets it out only once the slot's CQE is taken; beside it, in the same
//!   slot, the core's [`Slot`] (the tag, the registered buffer, the interface's own state).
//!   A free list is threaded through the slots, and each SQE's `user_data` is its slot's
//!   index. No allocation, no locking and no formatting happens on the submit and reap
//!   paths.
//! - **Commit**: every SQE written since the last commit goes to the kernel with one
//!   `io_uring_enter` (made directly, not through the crate's `Submitter`, which builds a
//!   view of the ring's registers per call); with SQPOLL, commit enters only to wake a
//!   sleeping poll thread. On a `DEFER_TASKRUN` ring (`single_issuer=1`) that enter also
//!   carries `IORING_ENTER_GETEVENTS` (waiting for none), as fio's io_uring engine's
//!   submits do: it posts the completions of punted work that wait for this task, so the
//!   next reap finds them in the CQ ring instead of entering the kernel for them.
//! - **Reap**: completions come from the CQ ring without a syscall; the kernel is entered
//!   only to wait, or once to poll (IOPOLL) or to run pending task work (the taskrun flag
//!   of COOP_TASKRUN). Without SQPOLL, when every command in flight is still in the SQ no
//!   CQE can be waiting and the first look at the CQ is skipped. A waiting reap submits
//!   what is queued in the same `io_uring_enter` (`AsyncQueue::commit_and_reap`). Each
//!   batch of CQEs is read through one view of the CQ ring, and a slot is freed before
//!   its callback runs, so a callback that panics consumes only the completions handed
//!   out so far; the rest stay in the ring for the next reap or the drop.
//! - **Inline commands**: what an interface runs at submit through a synchronous call
//!   (see each interface) holds a slot until its completion, kept in a ring preallocated
//!   at queue creation, is handed out: reap hands those out before anything from the
//!   kernel.
//! - **Drop**: a queue dropped with commands in flight waits for them; if waiting fails
//!   or makes no progress, the `Uring` leaks the slot table and the data of every command
//!   in it, never freed while the kernel may still write into them.
//!
//! The `syscalls` counter counts `io_uring_enter` calls, buffer registrations and the
//! syscalls of inline commands; the setup of the ring (creating it, registering the
//! descriptor and the empty buffer table) is not counted.

pub(crate) mod cmd;
pub(crate) mod file;
mod reg;

use crate::be::{AsyncQueue, Io};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::{Completion, CompletionSink};
use crate::spec::{errno_to_status, Status};
use crate::sys::uring::{Cqe, SlotId, Sqe, Target, Uring, ENTER_GETEVENTS, ENTER_SQ_WAKEUP};
use ::io_uring::{squeue, IoUring};
use reg::RegTable;
use std::collections::VecDeque;
use std::fs;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;

/// The tunables both io_uring interfaces take, with fio's name for each.
pub(crate) const TUNABLES: &[(&str, Option<&str>)] = &[
    ("sqpoll", Some("sqthread_poll")),
    ("sqpoll_cpu", Some("sqthread_poll_cpu")),
    ("iopoll", Some("hipri")),
    ("register_files", Some("registerfiles")),
    ("register_buffers", Some("fixedbufs")),
    ("single_issuer", None),
    ("reap_spin", None),
];

/// How long the SQPOLL thread spins without work before it sleeps (the kernel default).
const SQPOLL_IDLE_MS: u32 = 1000;
/// `Slot::reg` when the command uses no registered buffer.
const NO_REG: u32 = u32::MAX;

/// What is particular to one io_uring interface; the [`Ring`] does the rest.
pub(crate) trait Iface: Send + Sized {
    /// The ring's SQE type; commands are built as this type, so no other size can be
    /// pushed.
    type Sqe: Sqe;
    /// The ring's CQE type.
    type Cqe: Cqe;
    /// The interface's own state in each slot.
    type Slot: Send;
    /// The interface's name, as in option strings (`io_uring`).
    const NAME: &'static str;
    /// Whether `single_issuer=1` sets its rings up with `SINGLE_ISSUER | DEFER_TASKRUN`.
    const SINGLE_ISSUER: bool;
    /// Whether `register_buffers=1` gives its rings a registered-buffer table.
    const FIXED_BUFFERS: bool;
    /// Whether every `io_uring_enter` of an IOPOLL ring without SQPOLL holds the
    /// process-wide [`IOPOLL_ENTER`] lock (a kernel bug; see [`cmd`]).
    const LOCK_IOPOLL_ENTER: bool;

    /// The state of a free slot.
    fn new_slot() -> Self::Slot;
    /// Puts a slot's state back to that of a free slot.
    fn free(slot: &mut Self::Slot);
    /// Takes a checked command: pushes its SQE (through the `Uring`'s pushes and
    /// [`Ring::launched`]) or runs it inline (through [`Ring::hold_ready`]). Must not block
    /// on the ring. Returns the data on error.
    fn submit(q: &mut Ring<Self>, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)>;
    /// How the CQE of a slot ends its command.
    fn end(slot: &Slot<Self::Slot>, cqe: &Self::Cqe) -> End;
    /// For [`End::Again`]: pushes slot `id`'s command again in another form; when it
    /// cannot, the slot back with the status the command completes with. Interfaces whose
    /// `end` never says `Again` keep this default.
    fn again(q: &mut Ring<Self>, id: SlotId) -> Result<(), (SlotId, Status)> {
        let _ = q;
        Err((id, errno_to_status(libc::EIO)))
    }
}

/// How a CQE ends the command of its slot.
pub(crate) enum End {
    /// The command's completion, with this status and result.
    Done(Status, u64),
    /// The command goes to the ring again in another form ([`Iface::again`]).
    Again,
}

/// The ring core's part of one command's slot (the `Uring` keeps the data and what the
/// SQE points to beside it).
pub(crate) struct Slot<X> {
    tag: u64,
    /// Registered-buffer table entry the command uses, or NO_REG.
    reg: u32,
    /// The interface's state.
    x: X,
}

impl<X> Slot<X> {
    fn new(x: X) -> Slot<X> {
        Slot { tag: 0, reg: NO_REG, x }
    }
}

/// Held across every `io_uring_enter` of an IOPOLL ring without SQPOLL of the interfaces
/// that ask for it ([`Iface::LOCK_IOPOLL_ENTER`]).
static IOPOLL_ENTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A queue on one io_uring ring, for the interface `I`.
pub(crate) struct Ring<I: Iface> {
    /// The ring and the slots (what SQEs point to, and the core's [`Slot`] beside it).
    uring: Uring<I::Sqe, I::Cqe, Slot<I::Slot>>,
    dev: Arc<Inner>,
    fd: RawFd,
    fixed_file: bool,
    sqpoll: bool,
    iopoll: bool,
    /// `reap_spin`: how long a reap that must wait looks at the CQ ring before entering
    /// the kernel to wait (0: it enters at once).
    spin_ns: u64,
    /// The flags of a submitting `io_uring_enter` ([`AsyncQueue::commit`]):
    /// `IORING_ENTER_GETEVENTS` on a `DEFER_TASKRUN` ring (`single_issuer=1`), whose
    /// completions of punted work are posted only when its task enters with GETEVENTS:
    /// the submit posts them (waiting for none), as fio's io_uring engine does, so the
    /// reap that follows finds them in the CQ ring without an enter of its own. 0 otherwise.
    submit_flags: u32,
    depth: u32,
    /// Without SQPOLL: SQEs written and not yet consumed by the kernel (the kernel takes
    /// SQEs only in an `io_uring_enter` of ours, which says how many it took). With
    /// SQPOLL: SQEs written since the last commit.
    unsubmitted: u32,
    /// Completions of inline commands, with their slots; capacity `depth`.
    ready: VecDeque<(SlotId, Completion)>,
    reg: Option<RegTable>,
    syscalls: u64,
    /// Spins that ended because the kernel flagged completions to post through an enter
    /// (TASKRUN), for the tests.
    #[cfg(test)]
    spin_taskrun: u64,
    /// What the next `io_uring_enter`s do instead of the plain call, in order, for the
    /// tests of the paths after an enter that took fewer SQEs than it was given or failed.
    #[cfg(test)]
    enter_faults: VecDeque<EnterFault>,
    /// The interface's own state.
    iface: I,
}

/// A test's stand-in for one `io_uring_enter` ([`Ring::enter`]).
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum EnterFault {
    /// The enter is made with at most this many SQEs to submit, so the kernel takes no
    /// more than these (as when an SQE fails early and the kernel stops there).
    Take(u32),
    /// No enter is made (the kernel takes nothing); it fails with this errno, as an
    /// interrupted or refused enter does.
    Fail(i32),
}

/// The error of a ring operation on `dev`; with `single_issuer=1`, EEXIST says which
/// thread may use the queue.
fn queue_error<I: Iface>(dev: &Inner, what: &'static str, source: io::Error) -> Error {
    let source = if I::SINGLE_ISSUER && source.raw_os_error() == Some(libc::EEXIST) && dev.opts.single_issuer {
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
    Error::Queue { dev: dev.uri.clone(), iface: I::NAME, what, source }
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

/// Checks at open what every io_uring interface needs: that this process can create a
/// ring, and a descriptor.
fn check_usable(dev: &Inner, iface: &str) -> Result<(), Error> {
    if !crate::be::io_uring_usable() {
        let why = match IoUring::new(2) {
            Err(e) => format!(
                "this process cannot create an io_uring (io_uring_setup: {e}); io_uring may be disabled \
                 (/proc/sys/kernel/io_uring_disabled) or blocked by a seccomp filter"
            ),
            Ok(_) => "creating an io_uring failed when it was first tried".to_string(),
        };
        return Err(dev.unsupported(iface, &why));
    }
    crate::be::need_fd(dev, iface).map(drop)
}

/// `reap_spin`: with IOPOLL and no SQPOLL thread nothing reaches the CQ ring unless the
/// task polls in `io_uring_enter`, so there is nothing to spin on.
fn check_reap_spin<I: Iface>(dev: &Inner) -> Result<(), Error> {
    let o = &dev.opts;
    if o.reap_spin_ns.is_some() && o.iopoll && !o.sqpoll {
        return Err(dev.unsupported(
            &format!("async={} (reap_spin)", I::NAME),
            "with iopoll=1 (and no sqpoll=1) completions reach the CQ ring only when this thread polls in \
             io_uring_enter: there is nothing to spin on; drop reap_spin or iopoll",
        ));
    }
    Ok(())
}

/// SQPOLL: the CPU must exist, and the kernel must give this process a poll thread on a
/// ring of the interface's entries.
fn check_sqpoll<I: Iface>(dev: &Inner) -> Result<(), Error> {
    let o = &dev.opts;
    if let Some(cpu) = o.sqpoll_cpu {
        let online = crate::sys::cpus_online();
        if online > 0 && cpu as libc::c_long >= online {
            return Err(dev.unsupported(
                &format!("async={} (sqpoll_cpu)", I::NAME),
                &format!("CPU {cpu} does not exist: {online} CPUs are online (0..={})", online - 1),
            ));
        }
    }
    let iface = format!("async={} (sqpoll=1)", I::NAME);
    match builder::<I>(true, o.sqpoll_cpu).build(2) {
        Ok(ring) => {
            if !ring.params().is_feature_sqpoll_nonfixed() && !o.register_files {
                return Err(dev.unsupported(
                    &iface,
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
            let ring = <I::Sqe as Sqe>::RING;
            Err(dev.unsupported(&iface, &format!("the kernel refused an SQPOLL ring{ring}: {e}{hint}")))
        }
    }
}

/// A ring builder of the interface's entries, with an SQPOLL thread (on CPU `cpu` when
/// given) when `sqpoll`.
fn builder<I: Iface>(sqpoll: bool, cpu: Option<u32>) -> ::io_uring::Builder<I::Sqe, I::Cqe> {
    let mut b = IoUring::<I::Sqe, I::Cqe>::builder();
    if sqpoll {
        b.setup_sqpoll(SQPOLL_IDLE_MS);
        if let Some(cpu) = cpu {
            b.setup_sqpoll_cpu(cpu);
        }
    }
    b
}

/// IOPOLL: the disk `dir` (a sysfs block directory) must have poll queues. `subject` names
/// it in the refusal, `hint` says how to get them.
fn check_poll_queues(dev: &Inner, iface: &str, dir: &Path, subject: &str, hint: &str) -> Result<(), Error> {
    match fs::read_to_string(dir.join("queue/io_poll")).map(|s| s.trim().to_string()).as_deref() {
        Ok("1") => Ok(()),
        Ok(v) => Err(dev.unsupported(iface, &format!("{subject} has no poll queues (queue/io_poll is {v}); {hint}"))),
        Err(e) => Err(dev.unsupported(iface, &format!("{subject} has no poll queues (queue/io_poll: {e})"))),
    }
}

impl<I: Iface> Ring<I> {
    /// Sets up a ring of `depth` slots for the device's options, with the interface's
    /// state `iface`.
    fn setup(dev: &Arc<Inner>, depth: u32, iface: I) -> Result<Ring<I>, Error> {
        let o = &dev.opts;
        let fd = crate::be::need_fd(dev, &format!("async={}", I::NAME))?;
        let depth = depth.max(1);
        let mut b = builder::<I>(o.sqpoll, o.sqpoll_cpu);
        if o.iopoll {
            b.setup_iopoll();
        }
        if !o.sqpoll && coop_taskrun() {
            b.setup_coop_taskrun();
            b.setup_taskrun_flag();
        }
        let defer_taskrun = I::SINGLE_ISSUER && o.single_issuer && !o.sqpoll;
        if defer_taskrun {
            b.setup_single_issuer();
            b.setup_defer_taskrun();
        }
        let entries = if o.sqpoll { depth.saturating_mul(2) } else { depth };
        let ring = b.build(entries).map_err(|e| queue_error::<I>(dev, "create the ring (io_uring_setup)", e))?;
        if ring.params().sq_entries() < depth {
            let why = io::Error::other(format!(
                "the kernel gave {} SQ entries for depth {depth}",
                ring.params().sq_entries()
            ));
            return Err(queue_error::<I>(dev, "create the ring (io_uring_setup)", why));
        }
        if o.register_files {
            ring.submitter()
                .register_files(&[fd])
                .map_err(|e| queue_error::<I>(dev, "register the file descriptor (register_files=1)", e))?;
        }
        let reg = if I::FIXED_BUFFERS && o.register_buffers {
            let len = RegTable::len_for(depth);
            ring.submitter()
                .register_buffers_sparse(len)
                .map_err(|e| queue_error::<I>(dev, "register an empty buffer table (register_buffers=1)", e))?;
            Some(RegTable::new(len as usize))
        } else {
            None
        };
        Ok(Ring {
            uring: Uring::new(ring, depth, || Slot::new(I::new_slot())),
            dev: dev.clone(),
            fd,
            fixed_file: o.register_files,
            sqpoll: o.sqpoll,
            iopoll: o.iopoll,
            spin_ns: o.reap_spin_ns.unwrap_or(0),
            submit_flags: if defer_taskrun { ENTER_GETEVENTS } else { 0 },
            depth,
            unsubmitted: 0,
            ready: VecDeque::with_capacity(depth as usize),
            reg,
            syscalls: 0,
            #[cfg(test)]
            spin_taskrun: 0,
            #[cfg(test)]
            enter_faults: VecDeque::new(),
            iface,
        })
    }

    /// The error of a ring operation.
    #[cold]
    #[inline(never)]
    fn error(&self, what: &'static str, source: io::Error) -> Error {
        queue_error::<I>(&self.dev, what, source)
    }

    #[cold]
    fn busy(&self) -> Error {
        Error::Busy { depth: self.depth }
    }

    /// The file commands name: fixed file 0 when the descriptor is registered.
    #[inline(always)]
    fn target(&self) -> Target {
        if self.fixed_file {
            Target::Fixed(0)
        } else {
            Target::Fd(self.fd)
        }
    }

    /// Frees slot `id` (ends its use of a registered buffer) and returns its data.
    #[inline]
    fn release(&mut self, id: SlotId) -> Data {
        let slot = self.uring.meta_mut(&id);
        I::free(&mut slot.x);
        if slot.reg != NO_REG {
            unuse_reg(&mut slot.reg, &mut self.reg);
        }
        self.uring.release(id)
    }

    /// After a push of slot `id`'s SQE: counts it, or (the SQ full: it cannot be, it has
    /// at least `depth` entries and every SQE holds a slot) frees the slot and hands back
    /// the data.
    #[inline(always)]
    fn launched(&mut self, pushed: Result<(), SlotId>) -> Result<(), (Error, Data)> {
        match pushed {
            Ok(()) => {
                self.unsubmitted += 1;
                Ok(())
            }
            Err(id) => self.launch_failed(id),
        }
    }

    #[cold]
    #[inline(never)]
    fn launch_failed(&mut self, id: SlotId) -> Result<(), (Error, Data)> {
        let data = self.release(id);
        Err((self.busy(), data))
    }

    /// The completion of an inline command in slot `id`: it waits in `ready`, holding
    /// the slot until it is handed out.
    #[inline]
    fn hold_ready(&mut self, id: SlotId, c: Completion) {
        self.ready.push_back((id, c));
    }

    /// Hands out completions of inline commands, at most `max`.
    #[cold]
    #[inline(never)]
    fn hand_out_ready(&mut self, max: u32, f: &mut impl CompletionSink) -> u32 {
        let mut n = 0;
        while n < max {
            let Some((id, c)) = self.ready.pop_front() else { break };
            self.release(id);
            f.put(c);
            n += 1;
        }
        n
    }

    /// One `io_uring_enter` on the ring, counted: how many SQEs it took, or its errno.
    #[inline(always)]
    fn enter(&mut self, to_submit: u32, want: u32, flags: u32) -> Result<u32, i32> {
        self.syscalls += 1;
        #[cfg(test)]
        let to_submit = match self.enter_faults.pop_front() {
            Some(EnterFault::Take(n)) => to_submit.min(n),
            Some(EnterFault::Fail(errno)) => return Err(errno),
            None => to_submit,
        };
        let _guard = (I::LOCK_IOPOLL_ENTER && self.iopoll && !self.sqpoll)
            .then(|| IOPOLL_ENTER.lock().unwrap_or_else(|p| p.into_inner()));
        self.uring.enter(to_submit, want, flags)
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
        self.unsubmitted = self.uring.sq_len();
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
            self.took(to_submit, r.ok());
        }
        match r {
            Ok(_) | Err(libc::EINTR | libc::EAGAIN | libc::EBUSY) => Ok(()),
            Err(errno) => Err(errno),
        }
    }

    /// With SQPOLL: what to enter with to wait (everything in the SQ, and a wake-up if the
    /// poll thread sleeps).
    #[cold]
    #[inline(never)]
    fn sqpoll_enter_args(&mut self) -> (u32, u32) {
        let wake = if self.uring.sq_need_wakeup() { ENTER_SQ_WAKEUP } else { 0 };
        (self.uring.sq_len(), ENTER_GETEVENTS | wake)
    }

    #[cold]
    #[inline(never)]
    fn wait_failed(&self, errno: i32) -> Error {
        self.error("io_uring_enter (wait for completions)", io::Error::from_raw_os_error(errno))
    }

    /// Takes up to `limit` (at least 1) completions from the CQ ring, without a syscall.
    ///
    /// One view of the CQ serves the whole batch ([`Uring::take_cqes`]); dropping it
    /// publishes the new head, also when a callback panics: a completion's slot is freed
    /// before its callback runs, so the CQEs handed out are consumed exactly once and the
    /// rest stay in the ring for the next reap (or the drop).
    #[inline(always)]
    fn take_cqes(&mut self, limit: u32, f: &mut impl CompletionSink) -> u32 {
        let mut n = 0;
        loop {
            let mut again = None;
            let reg = &mut self.reg;
            // Inlined: a closure called per CQE that stays a call costs more than its body.
            self.uring.take_cqes(
                #[inline(always)]
                |mut r, cqe| {
                    let slot = r.meta();
                    let (status, result) = match I::end(slot, cqe) {
                        End::Done(status, result) => (status, result),
                        End::Again => {
                            again = Some(r.keep());
                            return false;
                        }
                    };
                    let tag = slot.tag;
                    I::free(&mut slot.x);
                    if slot.reg != NO_REG {
                        unuse_reg(&mut slot.reg, reg);
                    }
                    let data = r.release();
                    f.put(Completion { tag, status, result, data });
                    n += 1;
                    n < limit
                },
            );
            // The resubmission writes to the SQ, so it waits until the CQ view is gone (its
            // CQE already consumed; no callback runs in between).
            let Some(id) = again else { return n };
            if let Some(c) = self.again(id) {
                f.put(c);
                n += 1;
            }
            if n >= limit {
                return n;
            }
        }
    }

    /// Pushes slot `id` again ([`Iface::again`]); returns its completion if it cannot.
    #[cold]
    #[inline(never)]
    fn again(&mut self, id: SlotId) -> Option<Completion> {
        let (id, status) = match I::again(self, id) {
            Ok(()) => {
                self.unsubmitted += 1;
                return None;
            }
            Err(e) => e,
        };
        let tag = self.uring.meta_mut(&id).tag;
        let data = self.release(id);
        Some(Completion { tag, status, result: 0, data })
    }

    /// Whether the kernel has completions of punted work to post (COOP_TASKRUN).
    #[inline]
    fn taskrun(&mut self) -> bool {
        self.uring.taskrun()
    }

    /// [`AsyncQueue::commit`] without SQPOLL and with something queued, inlined into
    /// `commit_and_reap` (the engine's submit-and-reap call, one per I/O): the one enter
    /// that takes every queued SQE, the usual case, costs no call into `commit`; anything
    /// else (fewer taken, a failure) goes on in `commit`, which submits the rest or reports
    /// the failure exactly as a plain commit does.
    #[inline(always)]
    fn commit_inline(&mut self) -> Result<(), Error> {
        debug_assert!(!self.sqpoll && self.unsubmitted > 0);
        let pending = self.unsubmitted;
        // min_complete 0: with GETEVENTS (DEFER_TASKRUN) the enter posts what has
        // completed and returns without waiting.
        let r = self.enter(pending, 0, self.submit_flags);
        if let Ok(k) = r {
            if k >= pending {
                self.unsubmitted = 0;
                return Ok(());
            }
        }
        self.commit_rest(pending, r).map(drop)
    }

    /// A submitting enter (of `commit` or `commit_inline`) was given `pending` SQEs and
    /// took fewer or failed (`r`): the commit goes on (an SQE failed early, its CQE says
    /// why: the rest is submitted; an interrupted enter is tried again; EAGAIN and EBUSY,
    /// out of kernel resources for now, leave the rest queued for the next commit or
    /// wait; any other failure is the error). Returns how many SQEs the commit pushed.
    #[cold]
    #[inline(never)]
    fn commit_rest(&mut self, pending: u32, r: Result<u32, i32>) -> Result<u32, Error> {
        let mut pending = pending;
        let mut r = r;
        let mut pushed = 0;
        loop {
            self.took(pending, r.ok());
            let k = pending - self.unsubmitted;
            pushed += k;
            match r {
                Ok(_) if k == 0 => break,
                Ok(_) | Err(libc::EINTR) => {}
                Err(libc::EAGAIN | libc::EBUSY) => break,
                Err(errno) => return Err(self.error("io_uring_enter (submit)", io::Error::from_raw_os_error(errno))),
            }
            if self.unsubmitted == 0 {
                break;
            }
            pending = self.unsubmitted;
            // min_complete 0: with GETEVENTS (DEFER_TASKRUN) the enter posts what has
            // completed and returns without waiting.
            r = self.enter(pending, 0, self.submit_flags);
        }
        Ok(pushed)
    }

    /// [`AsyncQueue::commit`] with SQPOLL: the SQEs are already visible to the poll
    /// thread; it enters only to wake it.
    #[cold]
    #[inline(never)]
    fn commit_sqpoll(&mut self) -> Result<u32, Error> {
        let queued = std::mem::take(&mut self.unsubmitted);
        let wake = self.uring.sq_len() > 0 && self.uring.sq_need_wakeup();
        if wake {
            match self.enter(0, 0, ENTER_SQ_WAKEUP) {
                Ok(_) | Err(libc::EINTR | libc::EAGAIN | libc::EBUSY) => {}
                Err(errno) => {
                    let e = io::Error::from_raw_os_error(errno);
                    return Err(self.error("io_uring_enter (wake the SQPOLL thread)", e));
                }
            }
        }
        Ok(queued)
    }

    /// `reap_spin`: looks at the CQ ring until a CQE is there (true), or until the kernel
    /// has completions to post that need an enter (the taskrun flag: false, as when the
    /// spin runs out).
    #[inline(never)]
    fn spin(&mut self) -> bool {
        let start = std::time::Instant::now();
        loop {
            if self.uring.cq_len() > 0 {
                return true;
            }
            if self.taskrun() {
                #[cfg(test)]
                {
                    self.spin_taskrun += 1;
                }
                return false;
            }
            if start.elapsed().as_nanos() >= u128::from(self.spin_ns) {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    /// [`AsyncQueue::reap`], inlined into both reaping entry points. A failure to enter
    /// after callbacks ran is not reported (the trait's contract): the next reap meets it.
    /// `entered`: the caller has just entered with GETEVENTS (a commit on a DEFER_TASKRUN
    /// ring), which posted the completions waiting for this task, so a reap that needs no
    /// more than it finds does not enter again for those that came since (fio's io_uring
    /// engine leaves them for its next submit too).
    #[inline(always)]
    fn reap_inline(&mut self, entered: bool, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        let mut n = 0;
        if !self.ready.is_empty() {
            n = self.hand_out_ready(max, f);
        }
        let min = min.min(max).min(n.saturating_add(self.uring.inflight()));
        let mut entered = entered;
        // Without SQPOLL the kernel has seen none of the SQEs still in the SQ: when those
        // are all the commands in flight, no CQE can be waiting and the first look is
        // skipped.
        let mut look = self.sqpoll || self.uring.inflight() != self.unsubmitted;
        loop {
            if look && n < max {
                n += self.take_cqes(max - n, f);
            }
            look = true;
            if n >= max || self.uring.inflight() == 0 {
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
            // reap_spin: the kernel has every SQE (so a completion can come without an
            // enter); look at the CQ ring before sleeping in the kernel.
            if want > 0 && self.spin_ns != 0 && (self.sqpoll || self.unsubmitted == 0) && self.spin() {
                continue;
            }
            if let Err(errno) = self.enter_wait(want) {
                return if n > 0 { Ok(n) } else { Err(self.wait_failed(errno)) };
            }
            entered = true;
        }
        Ok(n)
    }
}

#[cold]
#[inline(never)]
fn unuse_reg(slot_reg: &mut u32, reg: &mut Option<RegTable>) {
    if let Some(t) = reg {
        t.unuse(*slot_reg as usize);
    }
    *slot_reg = NO_REG;
}

impl<I: Iface> AsyncQueue for Ring<I> {
    #[inline(always)]
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        I::submit(self, io, cmd, data, tag)
    }

    /// The usual commit (no SQPOLL, the enter takes every queued SQE) is one enter and
    /// a few compares; the rest goes on out of line (`commit_rest`, `commit_sqpoll`).
    #[inline(always)]
    fn commit(&mut self) -> Result<u32, Error> {
        if self.sqpoll {
            return self.commit_sqpoll();
        }
        let pending = self.unsubmitted;
        if pending == 0 {
            return Ok(0);
        }
        // min_complete 0: with GETEVENTS (DEFER_TASKRUN) the enter posts what has
        // completed and returns without waiting.
        let r = self.enter(pending, 0, self.submit_flags);
        if let Ok(k) = r {
            if k >= pending {
                self.unsubmitted = 0;
                return Ok(pending);
            }
        }
        self.commit_rest(pending, r)
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        self.reap_inline(false, min, max, f)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }

    /// A waiting reap enters the kernel with everything queued as `to_submit`, so the
    /// submission rides on the wait: one `io_uring_enter` instead of two.
    #[inline(always)]
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        if self.sqpoll || min == 0 {
            let queued = !self.sqpoll && self.unsubmitted > 0;
            let posted = queued && self.submit_flags != 0;
            if queued {
                self.commit_inline()?;
            } else {
                self.commit()?;
            }
            return self.reap_inline(posted, min, max, f);
        }
        let n = self.reap_inline(false, min, max, f)?;
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

impl<I: Iface> Drop for Ring<I> {
    fn drop(&mut self) {
        // Queue::drop drains first; this is the safety net. Wait for every command the
        // kernel may still be working on, so no buffer is freed under it.
        let mut sink = |c: Completion| drop(c);
        while self.uring.inflight() > 0 {
            let want = self.uring.inflight().saturating_add(self.ready.len() as u32);
            match self.reap_inline(false, want, u32::MAX, &mut sink) {
                Ok(n) if n > 0 => {}
                // Cannot prove the kernel is done (waiting failed, or made no progress):
                // the Uring's drop leaks the slot table, with the data and the iovec
                // arrays of the commands in flight, rather than free memory it may write
                // into.
                _ => return,
            }
        }
    }
}
