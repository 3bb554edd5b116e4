//! Asynchronous queues: submit, commit, poke, wait, drain, with completion callbacks.
//!
//! Every command in flight has a context, preallocated at `ioswitch_queue_init`: the
//! user argument, the callback, and the table slots of its buffers. A completion reaped
//! from the library queue is finished at once (its buffers go back to their table slots,
//! its context is freed) and, when it has a callback, parked in a preallocated list as a
//! ready C completion; the callbacks run only after the library call returned, with no
//! Rust borrow of the queue alive, so a callback may submit, poke or wait on the same
//! queue.

use crate::cmd::{ioswitch_cmd, to_cmd};
use crate::cpl::ioswitch_cpl;
use crate::dev::{busy_message, ioswitch_dev, null_arg, out_and_dev, take_bufs};
use crate::error::{fail, from_error, guard};
use crate::region::{self as lean, ioswitch_event, ioswitch_region};
use crate::table::{self, Refusal, Slot};
use ioswitch_rs::{AsyncIface, Buffer, Completion, Data, Error, Queue};
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::ptr;

/// A completion callback: `cpl` is valid during the call only; `cb_arg` is the argument
/// given with the callback. By the time it runs, the command's buffers are the caller's
/// again.
pub type ioswitch_queue_cb = Option<unsafe extern "C" fn(cpl: *const ioswitch_cpl, cb_arg: *mut c_void)>;

/// An asynchronous queue on a device's async interface (opaque). One thread uses a queue
/// at a time; a device may carry several queues, each on its own thread.
pub struct ioswitch_queue {
    pub(crate) rq: Queue,
    ctxs: Box<[Ctx]>,
    free: Vec<u32>,
    /// Callbacks to run: completions reaped and finished, waiting for the library call
    /// that reaped them to return.
    parked: VecDeque<Delivery>,
    /// Completions `ioswitch_queue_reap` reaped beyond its caller's `max`, with the
    /// callback they would have had: handed out first by the next reaping call.
    pub(crate) kept: VecDeque<Kept>,
    cb: ioswitch_queue_cb,
    cb_arg: *mut c_void,
    pub(crate) in_cb: u32,
    /// Regions attached (`ioswitch_queue_attach`): when any, the queue takes the lean
    /// functions only (`region.rs`).
    pub(crate) regions: Vec<*const ioswitch_region>,
    /// Events `ioswitch_queue_reap_at` reaped beyond its caller's `max`.
    pub(crate) evkept: VecDeque<ioswitch_event>,
    /// The queue's interface is `nil`, which completes every command at once:
    /// `ioswitch_queue_submit_at_reap` with nothing outstanding takes its one-step path
    /// (`region.rs`).
    pub(crate) at_once: bool,
}

/// A completion kept by `ioswitch_queue_reap`: its callback and argument (for
/// poke/wait/drain) and the completion.
type Kept = (ioswitch_queue_cb, *mut c_void, ioswitch_cpl);

struct Ctx {
    user_arg: *mut c_void,
    own_cb: bool,
    cb: ioswitch_queue_cb,
    cb_arg: *mut c_void,
    one: Option<&'static Slot>,
    many: Vec<&'static Slot>,
    /// An empty vector kept for the next vectored command (no allocation per command).
    spare: Vec<Buffer>,
}

impl Ctx {
    /// Puts the buffers a completion (or a rejected submission) hands back into their
    /// table slots, in submission order.
    #[inline(always)]
    fn restore(&mut self, data: Data) {
        match (data, self.one.take()) {
            (Data::One(b), Some(slot)) => table::put(slot, b),
            (data, one) => {
                self.one = one;
                self.restore_other(data);
            }
        }
    }

    /// [`restore`](Ctx::restore) for everything but one buffer from one slot.
    #[inline(never)]
    fn restore_other(&mut self, data: Data) {
        match data {
            Data::None => {}
            Data::One(b) => match self.one.take() {
                Some(slot) => table::put(slot, b),
                None => self.put_many(std::iter::once(b)),
            },
            Data::Vec(mut v) => {
                if let Some(slot) = self.one.take() {
                    let mut it = v.drain(..);
                    if let Some(b) = it.next() {
                        table::put(slot, b);
                    }
                    it.for_each(std::mem::forget);
                } else {
                    self.put_many(v.drain(..));
                }
                self.spare = v;
            }
        }
    }

    fn put_many(&mut self, bufs: impl Iterator<Item = Buffer>) {
        let mut slots = self.many.drain(..);
        for b in bufs {
            match slots.next() {
                Some(slot) => table::put(slot, b),
                // Cannot happen (the data is what was submitted); leaking is the safe
                // answer, as C may still hold the address.
                None => std::mem::forget(b),
            }
        }
    }
}

/// A callback to run: the function, its argument, and the completion it reports.
type Delivery = (unsafe extern "C" fn(*const ioswitch_cpl, *mut c_void), *mut c_void, ioswitch_cpl);

/// The parts of a queue that finishing a completion touches: everything but the library
/// queue, which is borrowed by the reaping call meanwhile.
struct Finisher<'a> {
    ctxs: &'a mut [Ctx],
    free: &'a mut Vec<u32>,
    parked: &'a mut VecDeque<Delivery>,
    cb: ioswitch_queue_cb,
    cb_arg: *mut c_void,
}

impl Finisher<'_> {
    /// Returns a completion's buffers to their table slots and frees its context; parks
    /// its callback (with the C completion) when it has one and `deliver` is set.
    #[inline(always)]
    fn finish(&mut self, c: Completion, deliver: bool) {
        let idx = c.tag as usize;
        let Some(ctx) = self.ctxs.get_mut(idx) else {
            // Cannot happen (tags are context indices); C may still hold the addresses,
            // so the buffers are leaked rather than freed.
            std::mem::forget(c.data);
            return;
        };
        ctx.restore(c.data);
        let (cb, arg) = if ctx.own_cb { (ctx.cb, ctx.cb_arg) } else { (self.cb, self.cb_arg) };
        let user_arg = ctx.user_arg;
        self.free.push(idx as u32);
        if let (true, Some(f)) = (deliver, cb) {
            self.parked.push_back((f, arg, ioswitch_cpl::new(user_arg, c.status, c.result)));
        }
    }
}

impl Finisher<'_> {
    /// As [`finish`](Finisher::finish) for `ioswitch_queue_reap`: returns the callback
    /// the completion would have had and the C completion, running and parking nothing.
    #[inline(always)]
    fn take(&mut self, c: Completion) -> Kept {
        let idx = c.tag as usize;
        let Some(ctx) = self.ctxs.get_mut(idx) else {
            // Cannot happen (tags are context indices); leaked as in finish.
            std::mem::forget(c.data);
            return (None, ptr::null_mut(), ioswitch_cpl::new(ptr::null_mut(), c.status, c.result));
        };
        ctx.restore(c.data);
        let (cb, arg) = if ctx.own_cb { (ctx.cb, ctx.cb_arg) } else { (self.cb, self.cb_arg) };
        let user_arg = ctx.user_arg;
        self.free.push(idx as u32);
        (cb, arg, ioswitch_cpl::new(user_arg, c.status, c.result))
    }

    /// As [`take`](Finisher::take) for a completion handed to the caller at once: the C
    /// completion only, without looking up the callback it would have had.
    #[inline(always)]
    fn take_cpl(&mut self, c: Completion) -> ioswitch_cpl {
        let idx = c.tag as usize;
        let Some(ctx) = self.ctxs.get_mut(idx) else {
            // Cannot happen (tags are context indices); leaked as in finish.
            std::mem::forget(c.data);
            return ioswitch_cpl::new(ptr::null_mut(), c.status, c.result);
        };
        ctx.restore(c.data);
        let user_arg = ctx.user_arg;
        self.free.push(idx as u32);
        ioswitch_cpl::new(user_arg, c.status, c.result)
    }
}

impl ioswitch_queue {
    /// Splits the queue into the library queue and what finishing completions needs.
    #[inline(always)]
    fn split(&mut self) -> (&mut Queue, Finisher<'_>) {
        let ioswitch_queue { rq, ctxs, free, parked, cb, cb_arg, .. } = self;
        (rq, Finisher { ctxs, free, parked, cb: *cb, cb_arg: *cb_arg })
    }
}

/// Runs the parked callbacks. No borrow of the queue lives across a callback, so
/// callbacks may use the queue.
///
/// # Safety
/// `q` is a live queue, used by this thread only.
#[inline(always)]
unsafe fn deliver(q: *mut ioswitch_queue) {
    // SAFETY: q is live (caller contract); this borrow ends before the callback.
    while let Some((f, arg, cpl)) = unsafe { (*q).parked.pop_front() } {
        // SAFETY: q is live; a place expression through the raw pointer creates no
        // lasting borrow.
        unsafe { (*q).in_cb += 1 };
        // SAFETY: f is a C function given by the caller; cpl lives across the call.
        unsafe { f(&cpl, arg) };
        // SAFETY: as for the increment; term refuses to free q while in_cb > 0.
        unsafe { (*q).in_cb -= 1 };
    }
}

/// Creates a queue of `depth` slots (1..=4096) on the device's async interface and stores
/// it in `*out`. Returns 0, or a negative errno (-EINVAL for a bad depth, -EOPNOTSUPP when
/// the device has no async interface, the OS error when the interface cannot be set up).
/// The queue keeps the device open until `ioswitch_queue_term`.
///
/// # Safety
/// `dev` an open device; `out` valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_init(
    dev: *const ioswitch_dev,
    depth: u32,
    out: *mut *mut ioswitch_queue,
) -> c_int {
    const F: &str = "ioswitch_queue_init";
    guard(F, -libc::EIO, || {
        // SAFETY: out is null or valid for writing one pointer, dev null or a live device
        // (caller contract).
        let d = match unsafe { out_and_dev(F, out, dev) } {
            Ok(d) => d,
            Err(e) => return e,
        };
        let rq = match d.dev.queue(depth) {
            Ok(q) => q,
            Err(e) => return from_error(&format!("{F}(depth {depth})"), &e),
        };
        let ctxs = (0..depth)
            .map(|_| Ctx {
                user_arg: ptr::null_mut(),
                own_cb: false,
                cb: None,
                cb_arg: ptr::null_mut(),
                one: None,
                many: Vec::new(),
                spare: Vec::new(),
            })
            .collect();
        let at_once = rq.interface() == AsyncIface::Nil;
        let q = Box::new(ioswitch_queue {
            at_once,
            rq,
            ctxs,
            free: (0..depth).rev().collect(),
            parked: VecDeque::with_capacity(depth as usize),
            kept: VecDeque::with_capacity(depth as usize),
            cb: None,
            cb_arg: ptr::null_mut(),
            in_cb: 0,
            regions: Vec::new(),
            evkept: VecDeque::with_capacity(depth as usize),
        });
        // SAFETY: as above.
        unsafe { out.write(Box::into_raw(q)) };
        0
    })
}

/// Waits for the commands still in flight, returns their buffers to the caller (without
/// running their callbacks: `ioswitch_queue_drain` first when they matter) and frees the
/// queue. NULL is ignored. Returns 0, -EBUSY (freeing nothing) when called from one of
/// this queue's callbacks, or the error of the final wait; in that case buffers of
/// commands that may still be in the kernel stay owned by ioswitch (`ioswitch_buf_free`
/// answers -EBUSY for them) rather than being freed under the kernel.
///
/// # Safety
/// `q` must be NULL or a queue from `ioswitch_queue_init` not terminated before.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_term(q: *mut ioswitch_queue) -> c_int {
    const F: &str = "ioswitch_queue_term";
    guard(F, -libc::EIO, || {
        if q.is_null() {
            return 0;
        }
        // SAFETY: q is live (caller contract).
        if unsafe { (*q).in_cb } > 0 {
            return fail(libc::EBUSY, format!("{F}: called from a completion callback of the same queue"));
        }
        // SAFETY: q came from Box::into_raw in ioswitch_queue_init; no callback of it runs.
        let mut qb = unsafe { Box::from_raw(q) };
        let r = if qb.regions.is_empty() {
            let (rq, mut fin) = qb.split();
            rq.drain(|c| fin.finish(c, false)).map(|_| ())
        } else {
            lean::term_lean(&mut qb)
        };
        drop(qb);
        match r {
            Ok(_) => 0,
            Err(e) => from_error(F, &e),
        }
    })
}

/// Sets the callback run for each completion of commands submitted without their own
/// (NULL: none; the completion is reaped and its buffers returned silently).
/// Returns 0, or -EINVAL for a NULL queue.
///
/// # Safety
/// `q` a live queue; `cb` NULL or a valid function.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_set_cb(
    q: *mut ioswitch_queue,
    cb: ioswitch_queue_cb,
    cb_arg: *mut c_void,
) -> c_int {
    guard("ioswitch_queue_set_cb", -libc::EIO, || {
        if q.is_null() {
            return fail(libc::EINVAL, "ioswitch_queue_set_cb: q is NULL");
        }
        // SAFETY: q is live (caller contract); place expressions, no lasting borrow.
        unsafe {
            (*q).cb = cb;
            (*q).cb_arg = cb_arg;
        }
        0
    })
}

/// The shared body of the two submit functions.
///
/// # Safety
/// As `ioswitch_queue_submit`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn submit(
    func: &str,
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    user_arg: *mut c_void,
    own_cb: bool,
    cb: ioswitch_queue_cb,
    cb_arg: *mut c_void,
) -> c_int {
    guard(func, -libc::EIO, move || {
        // SAFETY: q is null or live and used by this thread only (caller contract); no
        // callback runs while this borrow lives.
        let Some(q) = (unsafe { q.as_mut() }) else {
            return null_arg(func, "q");
        };
        if !q.regions.is_empty() {
            return lean::lean_queue(func);
        }
        // SAFETY: cmd is null or valid (caller contract).
        let Some(c) = (unsafe { cmd.as_ref() }) else {
            return null_arg(func, "cmd");
        };
        let c = match to_cmd(c, func) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let Some(idx) = q.free.pop() else {
            return busy();
        };
        let ctx = &mut q.ctxs[idx as usize];
        // Set before the library takes the command (an index and a bounds check less
        // after it); a refused command's context goes back to the free list unread.
        ctx.user_arg = user_arg;
        ctx.own_cb = own_cb;
        ctx.cb = cb;
        ctx.cb_arg = cb_arg;
        let data = if nbufs == 1 && !bufs.is_null() {
            // SAFETY: bufs is valid for one pointer (caller contract).
            let p = unsafe { *bufs };
            match table::take(p as usize) {
                Ok((slot, b)) => {
                    ctx.one = Some(slot);
                    Data::One(b)
                }
                Err(r) => {
                    q.free.push(idx);
                    return refused(func, p, r);
                }
            }
        } else if nbufs == 0 {
            Data::None
        } else {
            let mut v = std::mem::take(&mut ctx.spare);
            let many = &mut ctx.many;
            // SAFETY: bufs is valid for nbufs pointers (caller contract).
            let r = unsafe {
                take_bufs(func, bufs, nbufs, |slot, b| {
                    many.push(slot);
                    v.push(b);
                })
            };
            if let Err(e) = r {
                ctx.spare = v;
                q.free.push(idx);
                return e;
            }
            Data::Vec(v)
        };
        match q.rq.submit(c, data, idx as u64) {
            Ok(()) => 0,
            Err(rejected) => {
                q.ctxs[idx as usize].restore(rejected.data);
                q.free.push(idx);
                rejection(func, rejected.error)
            }
        }
    })
}

/// Records the "queue full" message and returns -EBUSY.
#[cold]
#[inline(never)]
fn busy() -> c_int {
    busy_message();
    -libc::EBUSY
}

/// Records why a submission's one buffer was refused; returns the negative errno.
#[cold]
#[inline(never)]
fn refused(func: &str, p: *mut c_void, r: Refusal) -> c_int {
    match r {
        Refusal::Busy => {
            fail(libc::EBUSY, format!("{func}: buffer {p:p} already belongs to a command that has not completed"))
        }
        Refusal::Unknown => fail(
            libc::EINVAL,
            format!("{func}: buffer {p:p} is not the start of a live buffer from ioswitch_buf_alloc"),
        ),
    }
}

/// Records why the library refused a submission; returns the negative errno.
#[cold]
#[inline(never)]
pub(crate) fn rejection(func: &str, e: Error) -> c_int {
    if let Error::Busy { .. } = e {
        busy()
    } else {
        from_error(func, &e)
    }
}

/// Submits a command with `nbufs` (0..=64) buffers from `ioswitch_buf_alloc` as its data
/// and a `user_arg` handed back in its completion; the queue's callback
/// (`ioswitch_queue_set_cb`) reports it. Never blocks.
///
/// Returns 0; -EBUSY when `depth` commands are outstanding (reap with poke or wait, then
/// submit again), or when a buffer still belongs to another command; -EINVAL for a bad
/// command or buffer; -ERANGE for a range past the end of the device. Nothing was
/// submitted when the return is not 0, and the buffers are still the caller's.
///
/// Ownership: on success the buffers belong to the queue until the command's completion
/// callback runs (or `ioswitch_queue_drain`/`ioswitch_queue_term` returns): do not read,
/// write or free them before (`ioswitch_buf_free` refuses with -EBUSY meanwhile).
///
/// The command reaches the kernel at the next `ioswitch_queue_commit`, `poke`, `wait` or
/// `drain` (one system call for the whole batch where the interface batches).
///
/// # Safety
/// `q` a live queue used by this thread only; `cmd` a valid command; `bufs` valid for
/// reading `nbufs` pointers (NULL when `nbufs` is 0).
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_submit(
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    user_arg: *mut c_void,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { submit("ioswitch_queue_submit", q, cmd, bufs, nbufs, user_arg, false, None, ptr::null_mut()) }
}

/// As `ioswitch_queue_submit`, with a callback of its own for this command: `cb(cpl,
/// cb_arg)` runs instead of the queue's (a NULL `cb` means no callback for it).
///
/// # Safety
/// As `ioswitch_queue_submit`; `cb` NULL or a valid function.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_submit_cb(
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    user_arg: *mut c_void,
    cb: ioswitch_queue_cb,
    cb_arg: *mut c_void,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { submit("ioswitch_queue_submit_cb", q, cmd, bufs, nbufs, user_arg, true, cb, cb_arg) }
}

/// Pushes every command submitted since the last commit to the kernel (one system call
/// where the interface batches). Returns how many were pushed, or a negative errno.
///
/// # Safety
/// `q` a live queue used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_commit(q: *mut ioswitch_queue) -> c_int {
    const F: &str = "ioswitch_queue_commit";
    guard(F, -libc::EIO, || {
        // SAFETY: q is null or live, used by this thread only (caller contract).
        let Some(q) = (unsafe { q.as_mut() }) else {
            return null_arg(F, "q");
        };
        match q.rq.commit() {
            Ok(n) => n as c_int,
            Err(e) => from_error(F, &e),
        }
    })
}

/// How the three reaping entry points differ.
#[derive(Clone, Copy)]
enum Reap {
    Poke(u32),
    Wait(u32),
    Drain,
}

/// # Safety
/// `q` null or a live queue used by this thread only.
#[inline(always)]
unsafe fn reap(func: &str, q: *mut ioswitch_queue, how: Reap) -> c_int {
    guard(func, -libc::EIO, move || {
        if q.is_null() {
            return null_arg(func, "q");
        }
        // SAFETY: q is live (caller contract); a short read through the raw pointer.
        if !unsafe { (*q).regions.is_empty() } {
            return lean::lean_queue(func);
        }
        // Completions an ioswitch_queue_reap kept come first, with their callbacks.
        // SAFETY: q is live (caller contract); the borrow ends before deliver runs.
        let (mut total, how) = match unsafe { &mut *q }.kept.len() {
            0 => (0, how),
            // SAFETY: as above.
            _ => match unsafe { unkeep(&mut *q, how) } {
                (n, Some(rest)) => (n, rest),
                (n, None) => {
                    // Enough for the caller already: commit only, as every reap does.
                    // SAFETY: as above.
                    let r = unsafe { &mut *q }.rq.commit();
                    // SAFETY: q is live and used by this thread only.
                    unsafe { deliver(q) };
                    return match r {
                        Ok(_) => n as c_int,
                        Err(e) => from_error(func, &e),
                    };
                }
            },
        };
        loop {
            let r = {
                // SAFETY: q is live (caller contract); the borrow ends before deliver runs
                // callbacks.
                let (rq, mut fin) = unsafe { &mut *q }.split();
                match how {
                    Reap::Poke(max) => rq.poke(max, |c| fin.finish(c, true)),
                    Reap::Wait(min) => rq.wait(min, |c| fin.finish(c, true)),
                    Reap::Drain => rq.drain(|c| fin.finish(c, true)),
                }
            };
            // Completions reaped before a failure still get their callbacks.
            // SAFETY: q is live and used by this thread only.
            unsafe { deliver(q) };
            match r {
                Ok(n) => total += n,
                Err(e) => return from_error(func, &e),
            }
            // A callback may have submitted more; drain means everything.
            // SAFETY: as above; a short read through the raw pointer.
            if !matches!(how, Reap::Drain) || unsafe { (*q).rq.outstanding() } == 0 {
                return total as c_int;
            }
        }
    })
}

/// Parks the completions `ioswitch_queue_reap` kept (as many as `how` asks for) with
/// their callbacks; returns how many, and what the library still has to reap (None:
/// nothing, the caller's count is reached).
#[cold]
#[inline(never)]
fn unkeep(q: &mut ioswitch_queue, how: Reap) -> (u32, Option<Reap>) {
    let avail = q.kept.len() as u32;
    let (n, rest) = match how {
        Reap::Poke(max) if max != 0 && max <= avail => (max, None),
        Reap::Poke(max) => (avail, Some(Reap::Poke(if max == 0 { 0 } else { max - avail }))),
        Reap::Wait(min) if min <= avail => (avail, None),
        Reap::Wait(min) => (avail, Some(Reap::Wait(min - avail))),
        Reap::Drain => (avail, Some(Reap::Drain)),
    };
    for (cb, arg, cpl) in q.kept.drain(..n as usize) {
        if let Some(f) = cb {
            q.parked.push_back((f, arg, cpl));
        }
    }
    (n, rest)
}

/// Commits, then reaps the commands that have completed, at most `max` (0: no limit),
/// without waiting, running their callbacks. Returns how many completed, or a negative
/// errno.
///
/// # Safety
/// `q` a live queue used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_poke(q: *mut ioswitch_queue, max: u32) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { reap("ioswitch_queue_poke", q, Reap::Poke(max)) }
}

/// Commits, then waits until at least `min` commands (at most all outstanding) have
/// completed, running their callbacks. Returns how many completed, or a negative errno.
///
/// # Safety
/// `q` a live queue used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_wait(q: *mut ioswitch_queue, min: u32) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { reap("ioswitch_queue_wait", q, Reap::Wait(min)) }
}

/// Commits, then waits for every outstanding command (including those submitted by
/// callbacks meanwhile), running their callbacks. Returns how many completed, or a
/// negative errno.
///
/// # Safety
/// `q` a live queue used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_drain(q: *mut ioswitch_queue) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { reap("ioswitch_queue_drain", q, Reap::Drain) }
}

/// Commits, then reaps completions into `cpls` instead of running callbacks: at least
/// `min` (waiting for them; at most as many as are outstanding) and at most `max`. Returns
/// how many it wrote to `cpls[0..n]`, or a negative errno: -EINVAL for a NULL argument,
/// `max` 0, or `min` above `max`; -EBUSY when called from a completion callback of the
/// same queue; an interface's failure otherwise, in which case the completions reaped
/// before the failure stay in the queue (their buffers are the caller's again) and the
/// next `ioswitch_queue_reap` hands them out first.
///
/// This is the batch form of poke and wait for callers that keep their own per-command
/// state (fio's engine hands each `user_arg` to fio as an event): no callback runs, not
/// the queue's nor a command's own, for the completions it returns. Each completion is
/// written once, in place, with the command's buffers already back with the caller.
/// Completions the interface delivers beyond `max` are kept in the queue and handed out
/// first by the next `ioswitch_queue_reap` (or, with their callbacks, by the next poke,
/// wait or drain); `ioswitch_queue_outstanding` counts them until then, and
/// `ioswitch_queue_term` drops them.
///
/// # Safety
/// `q` a live queue used by this thread only; `cpls` valid for writing `max` completions.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_reap(
    q: *mut ioswitch_queue,
    min: u32,
    max: u32,
    cpls: *mut ioswitch_cpl,
) -> c_int {
    const F: &str = "ioswitch_queue_reap";
    guard(F, -libc::EIO, move || {
        // SAFETY: q is null or live and used by this thread only (caller contract); no
        // callback runs while this borrow lives (this function runs none).
        let Some(q) = (unsafe { q.as_mut() }) else {
            return null_arg(F, "q");
        };
        if cpls.is_null() {
            return null_arg(F, "cpls");
        }
        if max == 0 || min > max {
            return bad_reap_counts(F, min, max);
        }
        if q.in_cb > 0 {
            return fail(libc::EBUSY, format!("{F}: called from a completion callback of the same queue"));
        }
        if !q.regions.is_empty() {
            return lean::lean_queue(F);
        }
        let mut n: u32 = 0;
        while n < max {
            let Some((_, _, c)) = q.kept.pop_front() else { break };
            // SAFETY: n < max and cpls is valid for max completions (caller contract).
            unsafe { cpls.add(n as usize).write(c) };
            n += 1;
        }
        let ioswitch_queue { rq, ctxs, free, parked, kept, cb, cb_arg, .. } = q;
        let mut fin = Finisher { ctxs, free, parked, cb: *cb, cb_arg: *cb_arg };
        // Enough already, or nothing to wait for: take what is there, up to max.
        let how = if n >= min { Reap::Poke(max - n) } else { Reap::Wait(min - n) };
        let mut put = |c: Completion| {
            if n < max {
                let cpl = fin.take_cpl(c);
                // SAFETY: as above.
                unsafe { cpls.add(n as usize).write(cpl) };
                n += 1;
            } else {
                // At most the queue's depth: kept is empty when the library reaps.
                kept.push_back(fin.take(c));
            }
        };
        let r = match how {
            Reap::Poke(0) => rq.commit(),
            Reap::Poke(left) => rq.poke(left, &mut put),
            Reap::Wait(need) => rq.wait(need, &mut put),
            Reap::Drain => rq.drain(&mut put),
        };
        match r {
            Ok(_) => n as c_int,
            // SAFETY: cpls[0..n] were written above.
            Err(e) => unsafe { reap_failed(kept, cpls, n, &e) },
        }
    })
}

/// A failed `ioswitch_queue_reap`: the completions written before the failure are not
/// lost, they go back to the front of the queue's kept list, in order, for the next reap.
///
/// # Safety
/// `cpls[0..n]` written.
#[cold]
#[inline(never)]
unsafe fn reap_failed(kept: &mut VecDeque<Kept>, cpls: *mut ioswitch_cpl, n: u32, e: &Error) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { reaped_back("ioswitch_queue_reap", kept, cpls, n, e, |c| (None, ptr::null_mut(), c)) }
}

/// What the reaping functions that write completions to the caller's array do when a
/// reap fails: the `n` written to `out` go back to the front of `kept` (each as `keep`
/// makes it), in order, for the next reap; returns the failure's negative errno.
///
/// # Safety
/// `out[0..n]` written.
pub(crate) unsafe fn reaped_back<T, K>(
    func: &str,
    kept: &mut VecDeque<K>,
    out: *mut T,
    n: u32,
    e: &Error,
    keep: impl Fn(T) -> K,
) -> c_int {
    for i in (0..n as usize).rev() {
        // SAFETY: i < n; out[i] was written (caller contract).
        kept.push_front(keep(unsafe { out.add(i).read() }));
    }
    from_error(func, e)
}

/// The refusal of a reaping function's `min` and `max`.
#[cold]
#[inline(never)]
pub(crate) fn bad_reap_counts(func: &str, min: u32, max: u32) -> c_int {
    fail(libc::EINVAL, format!("{func}: min {min} and max {max}: max must be at least 1 and at least min"))
}

/// Commands submitted and not yet handed to the caller (by a callback or
/// `ioswitch_queue_reap`), or -EINVAL for a NULL queue.
///
/// # Safety
/// `q` NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_outstanding(q: *const ioswitch_queue) -> c_int {
    guard("ioswitch_queue_outstanding", -libc::EIO, || {
        // SAFETY: q is null or live (caller contract).
        match unsafe { q.as_ref() } {
            Some(q) => (q.rq.outstanding() as usize + q.kept.len() + q.evkept.len()) as c_int,
            None => fail(libc::EINVAL, "ioswitch_queue_outstanding: q is NULL"),
        }
    })
}

/// The queue depth given at init, or -EINVAL for a NULL queue.
///
/// # Safety
/// `q` NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_capacity(q: *const ioswitch_queue) -> c_int {
    guard("ioswitch_queue_capacity", -libc::EIO, || {
        // SAFETY: q is null or live (caller contract).
        match unsafe { q.as_ref() } {
            Some(q) => q.rq.capacity() as c_int,
            None => fail(libc::EINVAL, "ioswitch_queue_capacity: q is NULL"),
        }
    })
}

/// Counters of a queue.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ioswitch_queue_stats {
    /// Commands taken by submit.
    pub submitted: u64,
    /// Completions reaped.
    pub completed: u64,
    /// System calls the interface made for this queue (submission, reaping, wake-ups).
    pub syscalls: u64,
}

/// Fills `*stats` with the queue's counters. Returns 0, or -EINVAL for NULL arguments.
///
/// # Safety
/// `q` NULL or a live queue; `stats` NULL or valid for writing one struct.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_stats(q: *const ioswitch_queue, stats: *mut ioswitch_queue_stats) -> c_int {
    const F: &str = "ioswitch_queue_stats";
    guard(F, -libc::EIO, || {
        // SAFETY: q is null or live (caller contract).
        let Some(q) = (unsafe { q.as_ref() }) else {
            return null_arg(F, "q");
        };
        if stats.is_null() {
            return null_arg(F, "stats");
        }
        let s = q.rq.stats();
        // SAFETY: stats is non-null and valid for a write (caller contract).
        unsafe {
            stats.write(ioswitch_queue_stats { submitted: s.submitted, completed: s.completed, syscalls: s.syscalls })
        };
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{ioswitch_cmd_fs_read, ioswitch_cmd_fs_write};
    use crate::dev::{ioswitch_buf_alloc, ioswitch_buf_free, ioswitch_dev_close, ioswitch_dev_open};
    use crate::error::last_string;
    use std::ffi::CString;

    struct Fixture {
        dev: *mut ioswitch_dev,
        q: *mut ioswitch_queue,
        path: std::path::PathBuf,
    }

    impl Fixture {
        fn new(name: &str, opts: &str, depth: u32) -> Fixture {
            let path = std::env::temp_dir().join(format!("ioswitch-capi-{name}-{}.img", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let uri = CString::new(path.to_str().unwrap()).unwrap();
            let opts = CString::new(format!("create=1,size=1MiB,{opts}")).unwrap();
            let mut dev = ptr::null_mut();
            let mut q = ptr::null_mut();
            // SAFETY: valid strings and out pointers.
            assert_eq!(unsafe { ioswitch_dev_open(uri.as_ptr(), opts.as_ptr(), &mut dev) }, 0, "{}", last_string());
            // SAFETY: dev is open; q is a valid out pointer.
            assert_eq!(unsafe { ioswitch_queue_init(dev, depth, &mut q) }, 0, "{}", last_string());
            Fixture { dev, q, path }
        }
        fn buf(&self) -> *mut c_void {
            // SAFETY: dev is open.
            let b = unsafe { ioswitch_buf_alloc(self.dev, 4096) };
            assert!(!b.is_null());
            b
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            // SAFETY: q and dev are live and used by this thread only.
            unsafe {
                ioswitch_queue_term(self.q);
                ioswitch_dev_close(self.dev);
            }
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn write_cmd(off: u64) -> ioswitch_cmd {
        let mut c = ioswitch_cmd::default();
        // SAFETY: c is a valid out location.
        assert_eq!(unsafe { ioswitch_cmd_fs_write(off, 4096, &mut c) }, 0);
        c
    }

    unsafe extern "C" fn count(cpl: *const ioswitch_cpl, arg: *mut c_void) {
        // SAFETY: the test passes a *mut u32 as cb_arg; cpl is valid during the call.
        unsafe {
            assert!(crate::cpl::ioswitch_cpl_ok(cpl));
            *(arg as *mut u32) += 1;
        }
    }

    #[test]
    fn a_full_queue_answers_ebusy_and_keeps_the_buffer_with_the_caller() {
        let f = Fixture::new("busy", "async=emu", 1);
        let (a, b) = (f.buf(), f.buf());
        let c = write_cmd(0);
        // SAFETY: live queue, valid command and buffer pointers.
        unsafe {
            assert_eq!(ioswitch_queue_submit(f.q, &c, &a, 1, ptr::null_mut()), 0);
            assert_eq!(ioswitch_queue_submit(f.q, &c, &b, 1, ptr::null_mut()), -libc::EBUSY);
            assert!(last_string().contains("queue full"));
            assert_eq!(ioswitch_buf_free(a), -libc::EBUSY, "a belongs to the queue");
            assert_eq!(ioswitch_buf_free(b), 0, "b stayed with the caller");
            assert_eq!(ioswitch_queue_drain(f.q), 1);
            assert_eq!(ioswitch_buf_free(a), 0);
        }
    }

    #[test]
    fn a_buffer_in_flight_cannot_be_submitted_twice() {
        let f = Fixture::new("twice", "async=emu", 4);
        let a = f.buf();
        let c = write_cmd(0);
        let two = [a, a];
        // SAFETY: live queue, valid command and buffer pointers.
        unsafe {
            assert_eq!(ioswitch_queue_submit(f.q, &c, two.as_ptr(), 2, ptr::null_mut()), -libc::EBUSY);
            assert!(last_string().contains("buffer 1 of 2"), "{}", last_string());
            assert_eq!(ioswitch_queue_outstanding(f.q), 0);
            let inner = (a as *mut u8).add(4096 / 2) as *mut c_void;
            assert_eq!(ioswitch_queue_submit(f.q, &c, &inner, 1, ptr::null_mut()), -libc::EINVAL);
            assert!(last_string().contains("not the start of a live buffer"));
            assert_eq!(ioswitch_buf_free(a), 0);
        }
    }

    #[test]
    fn callbacks_run_per_queue_or_per_submission_and_may_resubmit() {
        struct State {
            q: *mut ioswitch_queue,
            buf: *mut c_void,
            left: u32,
            seen: u32,
        }
        unsafe extern "C" fn again(cpl: *const ioswitch_cpl, arg: *mut c_void) {
            // SAFETY: arg is the test's State, alive for the whole test; cpl is valid.
            unsafe {
                let s = &mut *(arg as *mut State);
                assert_eq!((*cpl).user_arg, arg);
                s.seen += 1;
                if s.left > 0 {
                    s.left -= 1;
                    let c = write_cmd(4096);
                    // The buffer is the caller's again inside its callback: resubmit it.
                    assert_eq!(ioswitch_queue_submit_cb(s.q, &c, &s.buf, 1, arg, Some(again), arg), 0);
                }
            }
        }
        let f = Fixture::new("cb", "async=thrpool", 4);
        let mut n = 0u32;
        let a = f.buf();
        let mut st = State { q: f.q, buf: f.buf(), left: 5, seen: 0 };
        let sp = &mut st as *mut State as *mut c_void;
        // SAFETY: live queue; the callbacks' arguments outlive the drain below.
        unsafe {
            assert_eq!(ioswitch_queue_set_cb(f.q, Some(count), &mut n as *mut u32 as *mut c_void), 0);
            assert_eq!(ioswitch_queue_submit(f.q, &write_cmd(0), &a, 1, ptr::null_mut()), 0);
            assert_eq!(ioswitch_queue_submit_cb(f.q, &write_cmd(4096), &st.buf, 1, sp, Some(again), sp), 0);
            assert!(ioswitch_queue_drain(f.q) >= 2);
            assert_eq!(ioswitch_queue_outstanding(f.q), 0);
        }
        assert_eq!(n, 1);
        assert_eq!((st.seen, st.left), (6, 0));
        // SAFETY: both buffers are back with the caller.
        unsafe {
            assert_eq!(ioswitch_buf_free(a), 0);
            assert_eq!(ioswitch_buf_free(st.buf), 0);
        }
    }

    #[test]
    fn term_from_a_callback_is_refused() {
        unsafe extern "C" fn term(_: *const ioswitch_cpl, arg: *mut c_void) {
            // SAFETY: arg is the live queue.
            let r = unsafe { ioswitch_queue_term(arg as *mut ioswitch_queue) };
            assert_eq!(r, -libc::EBUSY);
        }
        let f = Fixture::new("term", "async=nil", 2);
        let a = f.buf();
        // SAFETY: live queue and buffer.
        unsafe {
            assert_eq!(ioswitch_queue_submit_cb(f.q, &write_cmd(0), &a, 1, ptr::null_mut(), Some(term), f.q.cast()), 0);
            assert_eq!(ioswitch_queue_poke(f.q, 0), 1);
            assert_eq!(ioswitch_buf_free(a), 0);
        }
    }

    #[test]
    fn term_with_commands_in_flight_returns_their_buffers() {
        let mut f = Fixture::new("inflight", "async=io_uring", 8);
        let bufs: Vec<_> = (0..8).map(|_| f.buf()).collect();
        // SAFETY: live queue and buffers; the queue is terminated once (f.q is cleared).
        unsafe {
            for (i, b) in bufs.iter().enumerate() {
                assert_eq!(ioswitch_queue_submit(f.q, &write_cmd(i as u64 * 4096), b, 1, ptr::null_mut()), 0);
            }
            assert_eq!(ioswitch_queue_commit(f.q), 8);
            assert_eq!(ioswitch_queue_term(std::mem::replace(&mut f.q, ptr::null_mut())), 0);
            for b in bufs {
                assert_eq!(ioswitch_buf_free(b), 0, "{}", last_string());
            }
        }
    }

    #[test]
    fn reap_writes_completions_in_place_without_running_callbacks() {
        let f = Fixture::new("reap", "async=thrpool", 4);
        let bufs: Vec<_> = (0..4).map(|_| f.buf()).collect();
        let mut n = 0u32;
        let mut cpls = [ioswitch_cpl::new(ptr::null_mut(), ioswitch_rs::Status::OK, 0); 4];
        // SAFETY: live queue and buffers; cpls has room for 4 completions.
        unsafe {
            assert_eq!(ioswitch_queue_set_cb(f.q, Some(count), &mut n as *mut u32 as *mut c_void), 0);
            for (i, b) in bufs.iter().enumerate() {
                let tag = (i + 1) as *mut c_void;
                assert_eq!(ioswitch_queue_submit(f.q, &write_cmd(i as u64 * 4096), b, 1, tag), 0);
            }
            assert_eq!(ioswitch_queue_reap(f.q, 4, 4, cpls.as_mut_ptr()), 4, "{}", last_string());
            assert_eq!(ioswitch_queue_outstanding(f.q), 0);
            for b in &bufs {
                assert_eq!(ioswitch_buf_free(*b), 0, "the buffer is the caller's again: {}", last_string());
            }
        }
        assert_eq!(n, 0, "no callback ran");
        let mut tags: Vec<usize> = cpls.iter().map(|c| c.user_arg as usize).collect();
        tags.sort_unstable();
        assert_eq!(tags, [1, 2, 3, 4]);
        assert!(cpls.iter().all(|c| c.status == 0 && c.errnum == 0 && c.result == 4096));
    }

    #[test]
    fn reap_keeps_what_exceeds_max_for_the_next_reaping_call() {
        let f = Fixture::new("reapmax", "async=nil", 8);
        let a = f.buf();
        let mut n = 0u32;
        let mut cpls = [ioswitch_cpl::new(ptr::null_mut(), ioswitch_rs::Status::OK, 0); 8];
        // SAFETY: live queue and buffer; cpls has room for 8 completions.
        unsafe {
            assert_eq!(ioswitch_queue_set_cb(f.q, Some(count), &mut n as *mut u32 as *mut c_void), 0);
            for i in 0..6usize {
                // One write with a buffer, then flushes (no data); nil completes each at once.
                let (c, bufs, nb) = if i == 0 {
                    (write_cmd(0), &a as *const *mut c_void, 1)
                } else {
                    let mut c = ioswitch_cmd::default();
                    assert_eq!(crate::cmd::ioswitch_cmd_fs_flush(&mut c), 0);
                    (c, ptr::null(), 0)
                };
                assert_eq!(ioswitch_queue_submit(f.q, &c, bufs, nb, (i + 1) as *mut c_void), 0);
            }
            // Waiting for 1 reaps all 6 from nil; 2 are handed over, 4 kept.
            assert_eq!(ioswitch_queue_reap(f.q, 1, 2, cpls.as_mut_ptr()), 2, "{}", last_string());
            assert_eq!(ioswitch_queue_outstanding(f.q), 4, "kept completions count as outstanding");
            assert_eq!(ioswitch_buf_free(a), 0, "the first command's buffer came back with its completion");
            // The next reap hands over kept ones first, without waiting.
            assert_eq!(ioswitch_queue_reap(f.q, 0, 3, cpls.as_mut_ptr().add(2)), 3);
            assert_eq!(ioswitch_queue_outstanding(f.q), 1);
            // A poke delivers the last kept one through the queue's callback.
            assert_eq!(ioswitch_queue_poke(f.q, 0), 1);
            assert_eq!(ioswitch_queue_outstanding(f.q), 0);
        }
        assert_eq!(n, 1, "only the poke ran a callback");
        let mut tags: Vec<usize> = cpls[..5].iter().map(|c| c.user_arg as usize).collect();
        tags.sort_unstable();
        assert_eq!(tags.len(), 5);
        tags.dedup();
        assert_eq!(tags.len(), 5, "each completion handed out once: {tags:?}");
        assert!(tags.iter().all(|t| (1..=6).contains(t)));
    }

    #[test]
    fn reap_refuses_bad_counts_and_null_arguments_by_name() {
        let f = Fixture::new("reapbad", "async=nil", 2);
        let mut cpl = [ioswitch_cpl::new(ptr::null_mut(), ioswitch_rs::Status::OK, 0); 2];
        // SAFETY: live queue; cpl has room for 2 completions.
        unsafe {
            assert_eq!(ioswitch_queue_reap(f.q, 0, 0, cpl.as_mut_ptr()), -libc::EINVAL);
            assert!(last_string().contains("min 0 and max 0"), "{}", last_string());
            assert_eq!(ioswitch_queue_reap(f.q, 2, 1, cpl.as_mut_ptr()), -libc::EINVAL);
            assert!(last_string().contains("min 2 and max 1"), "{}", last_string());
            assert_eq!(ioswitch_queue_reap(f.q, 0, 1, ptr::null_mut()), -libc::EINVAL);
            assert!(last_string().contains("cpls"), "{}", last_string());
            assert_eq!(ioswitch_queue_reap(ptr::null_mut(), 0, 1, cpl.as_mut_ptr()), -libc::EINVAL);
            // Nothing outstanding: waiting for 1 returns 0 rather than blocking.
            assert_eq!(ioswitch_queue_reap(f.q, 1, 2, cpl.as_mut_ptr()), 0);
        }
    }

    #[test]
    fn a_read_past_the_end_is_refused_before_submission() {
        let f = Fixture::new("range", "async=libaio", 2);
        let a = f.buf();
        let mut c = ioswitch_cmd::default();
        // SAFETY: live queue, valid command and buffer.
        unsafe {
            assert_eq!(ioswitch_cmd_fs_read(1 << 20, 4096, &mut c), 0);
            assert_eq!(ioswitch_queue_submit(f.q, &c, &a, 1, ptr::null_mut()), -libc::ERANGE);
            assert!(last_string().contains("out of range"), "{}", last_string());
            assert_eq!(ioswitch_queue_outstanding(f.q), 0);
            assert_eq!(ioswitch_buf_free(a), 0);
        }
    }
}
