//! Linux AIO through the raw syscalls `io_setup(2)`, `io_submit(2)`, `io_getevents(2)` and
//! `io_destroy(2)`, with everything the kernel reads or writes owned here.
//!
//! An [`Aio`] owns one AIO context and a slot table of `depth` slots, all allocated at
//! creation: per slot an `iocb`, the command's [`Data`] (which the iocb points into) with
//! its tag beside it (one 128-byte entry), and an iovec array and a spare iocb for the
//! commands other than a read or write of one buffer (vectored, fdsync, with RWF_DSYNC or
//! a priority), so those never leave a flag in the iocb the common command reuses. A
//! command's data moves into its slot when it is queued and comes out only when the
//! kernel is done with it: when its event is handed out, when io_submit refused it, or when
//! it never reached the kernel. The iocbs are written only here, from the data they point
//! into, so no safe call can hand the kernel a pointer that outlives what it points to.
//! Dropping an `Aio` waits for every command in flight (or, if waiting fails, leaks the
//! buffers the kernel may still write), then destroys the context on a short-lived thread,
//! because `io_destroy` waits for an RCU grace period (~30 ms) even on an idle context.
//!
//! The tables the hot path indexes are a power of two long and indexed through a mask,
//! so an index is always in bounds without a check.

use crate::be::MAX_SEGMENTS;
use crate::buf::{fill_iovecs, Data};
use crate::queue::{Completion, CompletionSink};
use crate::spec::{errno_to_status, Status};

/// `aio_context_t` of linux/aio_abi.h.
type AioContext = libc::c_ulong;

/// `IOCB_CMD_*` opcodes of linux/aio_abi.h.
const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_FDSYNC: u16 = 3;
const IOCB_CMD_PREADV: u16 = 7;
const IOCB_CMD_PWRITEV: u16 = 8;
/// `aio_flags`: `aio_reqprio` holds the command's I/O priority.
const IOCB_FLAG_IOPRIO: u32 = 1 << 1;

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

/// Creates an AIO context for `nr` events; the error is the errno.
fn io_setup(nr: u32) -> Result<AioContext, i32> {
    let mut ctx: AioContext = 0;
    // SAFETY: io_setup writes one aio_context_t through the pointer, which is valid and
    // initialised to 0 as the syscall requires.
    let r = unsafe { libc::syscall(libc::SYS_io_setup, nr as libc::c_uint, &mut ctx as *mut AioContext) };
    if r < 0 {
        return Err(super::errno());
    }
    Ok(ctx)
}

/// Destroys an AIO context on a short-lived thread of its own (io_destroy blocks for an
/// RCU grace period even when nothing is in flight). The caller is done with the context
/// and with every buffer the kernel could still write (reaped, or leaked on purpose).
fn destroy_in_background(ctx: AioContext) {
    // SAFETY: ctx came from io_setup and is destroyed once; the kernel waits for requests
    // still in flight before it releases the context.
    let destroy = move || unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    let spawned = std::thread::Builder::new().name("ioswitch-aio-destroy".into()).stack_size(64 * 1024).spawn(destroy);
    if spawned.is_err() {
        destroy();
    }
}

/// Whether this process can create an AIO context: one io_setup and io_destroy; the
/// error is io_setup's errno.
pub(crate) fn probe() -> Result<(), i32> {
    destroy_in_background(io_setup(1)?);
    Ok(())
}

/// One command's place: the iocb the kernel reads for a read or write of one buffer and,
/// in the same two cache lines, what the command holds meanwhile.
#[repr(C, align(64))]
struct Slot {
    /// The iocb of the one-buffer path (`queue_one`): `aio_data` (the slot index) and
    /// `aio_fildes` are written once, at creation; `aio_lio_opcode`, `aio_buf`,
    /// `aio_nbytes` and `aio_offset` by each command; the rest stays 0 (the kernel writes
    /// 0 into `aio_key`). The other paths write their iocb into `Aio::spare` instead, so
    /// none of them leaves a flag (RWF_DSYNC, a priority) here for the next command.
    ///
    /// Its `aio_nbytes` is also the number of bytes the slot's command must move, whichever
    /// iocb went to the kernel (0 for fdsync; fewer is a short transfer): `queue_one` asks
    /// for exactly that, the other paths write it here beside their spare iocb.
    iocb: Iocb,
    data: Data,
    tag: u64,
    /// Taken (queued, in flight, or its event harvested and not yet handed out).
    busy: bool,
}

/// One AIO context and the slots of its commands (see the module's text).
pub(crate) struct Aio {
    ctx: AioContext,
    /// The number of slots in use: slots `0..depth`; the tables below are `mask + 1`
    /// long (the depth rounded up to a power of two), so `i & mask` is always in bounds.
    depth: u32,
    mask: usize,
    slots: Box<[Slot]>,
    /// One iovec array per slot in use (only vectored commands use them).
    iovecs: Box<[[libc::iovec; MAX_SEGMENTS]]>,
    /// One iocb per slot in use for the commands `queue_one` does not queue (vectored,
    /// with RWF_DSYNC or a priority, fdsync), written whole by each; `aio_data` is the
    /// slot index as in the slot's own iocb.
    spare: Box<[Iocb]>,
    /// Free slot indices: `free[..nfree]`, each below `depth`.
    free: Box<[u32]>,
    nfree: u32,
    /// The iocb pointer array io_submit reads: `ptrs[..nqueued]` are the commands queued
    /// and not yet accepted by io_submit, in order.
    ptrs: Box<[*mut Iocb]>,
    nqueued: u32,
    /// Events io_getevents harvested: `events[ev_head..ev_len]` are not handed out yet.
    events: Box<[IoEvent]>,
    ev_head: u32,
    ev_len: u32,
    /// Commands accepted by io_submit whose events have not been harvested yet.
    in_flight: u32,
}

// SAFETY: the raw pointers in `ptrs` and in the iocbs/iovecs point into memory this
// struct owns (its slot and iovec tables and the buffers held in its slots); nothing is
// tied to the thread that created it, and the AIO context may be used from any thread.
unsafe impl Send for Aio {}

impl Aio {
    /// A context for `depth` commands on descriptor `fd`; the error is io_setup's errno.
    pub(crate) fn new(fd: u32, depth: u32) -> Result<Aio, i32> {
        let ctx = io_setup(depth)?;
        let n = (depth as usize).next_power_of_two();
        let iov0 = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let slot = |i: usize| Slot {
            iocb: Iocb { aio_data: i as u64, aio_fildes: fd, ..Iocb::default() },
            data: Data::None,
            tag: 0,
            busy: false,
        };
        Ok(Aio {
            ctx,
            depth,
            mask: n - 1,
            slots: (0..n).map(slot).collect(),
            iovecs: vec![[iov0; MAX_SEGMENTS]; depth as usize].into_boxed_slice(),
            spare: vec![Iocb::default(); depth as usize].into_boxed_slice(),
            free: (0..n as u32).map(|k| depth.saturating_sub(k + 1)).collect(),
            nfree: depth,
            ptrs: vec![std::ptr::null_mut(); n].into_boxed_slice(),
            nqueued: 0,
            events: vec![IoEvent::default(); n].into_boxed_slice(),
            ev_head: 0,
            ev_len: 0,
            in_flight: 0,
        })
    }

    /// The number of slots.
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// Commands queued and not yet accepted by io_submit.
    pub(crate) fn queued(&self) -> u32 {
        self.nqueued
    }

    /// Commands accepted by io_submit whose events have not been harvested.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The slot at `i`, masked into the table.
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
        // SAFETY: k & mask < mask + 1 == free.len().
        Some(unsafe { *self.free.get_unchecked(k as usize & self.mask) } as usize)
    }

    /// Gives a slot back to the free list.
    #[inline(always)]
    fn put_slot(&mut self, idx: usize) {
        debug_assert!(self.nfree < self.depth);
        // SAFETY: nfree & mask < mask + 1 == free.len().
        unsafe { *self.free.get_unchecked_mut(self.nfree as usize & self.mask) = idx as u32 };
        self.nfree += 1;
    }

    /// Writes `cb` into slot `idx`'s spare iocb and queues the slot with it; the command
    /// must move `expect` bytes.
    fn queue_spare(&mut self, idx: usize, cb: Iocb, data: Data, tag: u64, expect: u64) {
        let spare = &mut self.spare[idx];
        *spare = cb;
        let cb: *mut Iocb = spare;
        self.queue_iocb(idx, data, tag, |own| {
            own.aio_nbytes = expect;
            cb
        });
    }

    /// Fills slot `idx` and queues it for the next submit with the iocb `fill` returns
    /// (the slot's own, which `fill` gets to write, or its spare one, already written);
    /// the own iocb's `aio_nbytes` must be what the command must move. The slot is looked
    /// up once, and the queue's position read before anything is written into the slot.
    #[inline(always)]
    fn queue_iocb(&mut self, idx: usize, data: Data, tag: u64, fill: impl FnOnce(&mut Iocb) -> *mut Iocb) {
        debug_assert!(self.nqueued < self.depth);
        let q = self.nqueued as usize & self.mask;
        let slot = self.slot(idx);
        let cb = fill(&mut slot.iocb);
        slot.tag = tag;
        slot.busy = true;
        // A free slot holds Data::None (whoever freed it took its data): nothing to drop.
        std::mem::forget(std::mem::replace(&mut slot.data, data));
        // SAFETY: q = nqueued & mask < mask + 1 == ptrs.len().
        unsafe { *self.ptrs.get_unchecked_mut(q) = cb };
        self.nqueued += 1;
    }

    /// Queues a read (or write) of `len` bytes of the one buffer of `data` at `offset`,
    /// writing only the fields that change; the data comes back when the queue is full or
    /// `data` is not one buffer. The caller's checks made sure the buffer holds `len`
    /// bytes: a shorter one would be cut to its length, and the command would count as
    /// complete once that much moved (`aio_nbytes` is what the event is measured against).
    /// Every command reaches here through `Queue::submit`, whose fast check and `prepare`
    /// both refuse a buffer shorter than the command (`Error::BufferSize`); the test
    /// `short_buffers_are_refused_before_the_interface` holds them to it.
    #[inline(always)]
    pub(crate) fn queue_one(&mut self, write: bool, data: Data, len: u64, offset: u64, tag: u64) -> Result<(), Data> {
        let Data::One(b) = &data else { return Err(data) };
        let (ptr, max) = (b.as_ptr() as u64, b.len() as u64);
        debug_assert!(len <= max, "the checks let a buffer shorter than the command through");
        let Some(i) = self.take_slot() else { return Err(data) };
        self.queue_iocb(i, data, tag, |cb| {
            cb.aio_lio_opcode = if write { IOCB_CMD_PWRITE } else { IOCB_CMD_PREAD };
            cb.aio_buf = ptr;
            cb.aio_nbytes = len.min(max);
            cb.aio_offset = offset as i64;
            cb
        });
        Ok(())
    }

    /// Queues a read or write of the first `len` bytes of `data` at `offset` (readv/writev
    /// for several buffers), with RWF_DSYNC when `dsync`, at I/O priority `ioprio` (0:
    /// the submitting thread's). The data comes back with `Full` when no slot is free,
    /// `Empty` when it holds no buffer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn queue_vectored(
        &mut self,
        write: bool,
        data: Data,
        len: u64,
        offset: u64,
        dsync: bool,
        ioprio: u16,
        tag: u64,
    ) -> Result<(), (Refused, Data)> {
        let Some(i) = self.take_slot() else { return Err((Refused::Full, data)) };
        let mut cb = Iocb { aio_data: i as u64, aio_fildes: self.fd(), ..Iocb::default() };
        let iov = &mut self.iovecs[i];
        let n = fill_iovecs(data.bufs(), len, iov);
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
            return Err((Refused::Empty, data));
        }
        cb.aio_offset = offset as i64;
        if dsync {
            cb.aio_rw_flags = libc::RWF_DSYNC;
        }
        if ioprio != 0 {
            cb.aio_reqprio = ioprio as i16;
            cb.aio_flags = IOCB_FLAG_IOPRIO;
        }
        self.queue_spare(i, cb, data, tag, len);
        Ok(())
    }

    /// Queues an fdsync; the data (normally none) comes back when no slot is free.
    pub(crate) fn queue_fdsync(&mut self, data: Data, tag: u64) -> Result<(), Data> {
        let Some(i) = self.take_slot() else { return Err(data) };
        let cb = Iocb { aio_data: i as u64, aio_fildes: self.fd(), aio_lio_opcode: IOCB_CMD_FDSYNC, ..Iocb::default() };
        self.queue_spare(i, cb, data, tag, 0);
        Ok(())
    }

    /// The descriptor every iocb names.
    fn fd(&self) -> u32 {
        self.slots[0].iocb.aio_fildes
    }

    /// The `k`-th queued iocb (`k < nqueued`).
    fn queued_iocb(&self, k: usize) -> &Iocb {
        assert!(k < self.nqueued as usize);
        // SAFETY: ptrs[..nqueued] point at iocbs in `slots` or `spare`, which this
        // struct owns and which nothing writes while the shared borrow of self lasts.
        unsafe { &*self.ptrs[k] }
    }

    /// The slot index of the first queued command.
    fn first_queued(&self) -> usize {
        self.queued_iocb(0).aio_data as usize
    }

    /// Takes the first `k` queued commands off the queue; the rest move to the front.
    fn unqueue_front(&mut self, k: u32) {
        self.ptrs.copy_within(k as usize..self.nqueued as usize, 0);
        self.nqueued -= k;
    }

    /// One io_submit of every queued iocb: `Ok` with their number when it took them all
    /// (now in flight), else `Err` with what it did: `Ok` with the number it took (the
    /// rest stay queued, at the front), or its errno (when it took none, the error of
    /// the first iocb).
    #[inline(always)]
    pub(crate) fn submit(&mut self) -> Result<u32, Result<u32, i32>> {
        let n = self.nqueued;
        // SAFETY: ctx is live; ptrs[..nqueued] point into the slot or spare table at iocbs
        // written by the queue_* functions from the data their slots own, which stays put until
        // the events are harvested; the kernel copies the iocbs and iovecs during the call.
        let r = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, n as libc::c_long, self.ptrs.as_mut_ptr()) };
        if r == n as libc::c_long {
            self.nqueued = 0;
            self.in_flight += n;
            return Ok(n);
        }
        Err(self.submitted_part(r))
    }

    /// What io_submit did when it did not take everything.
    #[cold]
    #[inline(never)]
    fn submitted_part(&mut self, r: libc::c_long) -> Result<u32, i32> {
        if r < 0 {
            return Err(super::errno());
        }
        let r = (r as u32).min(self.nqueued);
        self.unqueue_front(r);
        self.in_flight += r;
        Ok(r)
    }

    /// Takes the first queued command off the queue (io_submit refused it): its tag, its
    /// data, and whether it was an fdsync; `None` when nothing is queued.
    pub(crate) fn refuse_first(&mut self) -> Option<(u64, Data, bool)> {
        if self.nqueued == 0 {
            return None;
        }
        let idx = self.first_queued();
        let fdsync = self.queued_iocb(0).aio_lio_opcode == IOCB_CMD_FDSYNC;
        self.unqueue_front(1);
        let slot = &mut self.slots[idx];
        let (data, tag) = (std::mem::take(&mut slot.data), slot.tag);
        slot.busy = false;
        self.put_slot(idx);
        Some((tag, data, fdsync))
    }

    /// Hands the completion of the next harvested event to `f`: OK with the bytes moved
    /// when the command moved all it had to, the errno when the kernel failed it, EIO
    /// with the bytes moved when it moved fewer. False when no event is left (events that
    /// name no busy slot are passed over). The head moves past the event and its slot is
    /// freed before `f` runs, so an `f` that panics loses only this one.
    #[inline(always)]
    pub(crate) fn hand_out_next(&mut self, f: &mut impl CompletionSink) -> bool {
        loop {
            if self.ev_head >= self.ev_len {
                return false;
            }
            // SAFETY: ev_head & mask < mask + 1 == events.len().
            let ev = unsafe { self.events.get_unchecked(self.ev_head as usize & self.mask) };
            let (idx, res) = (ev.data as usize, ev.res);
            self.ev_head += 1;
            if idx >= self.depth as usize {
                continue;
            }
            // SAFETY: idx < depth <= slots.len().
            let slot = unsafe { self.slots.get_unchecked_mut(idx) };
            if slot.busy {
                slot.busy = false;
                self.put_slot(idx);
                // SAFETY: as above.
                let slot = unsafe { self.slots.get_unchecked_mut(idx) };
                let (status, result) =
                    if res >= 0 && res as u64 == slot.iocb.aio_nbytes { (Status::OK, res as u64) } else { failed(res) };
                f.put(Completion { tag: slot.tag, status, result, data: std::mem::take(&mut slot.data) });
                return true;
            }
        }
    }

    /// Events not handed out yet: `hand_out_next` hands them out without a syscall.
    pub(crate) fn harvested(&self) -> u32 {
        self.ev_len - self.ev_head
    }

    /// One io_getevents call for between `min` and `max` events (`min <= max`; `max` is
    /// capped at what is in flight), waiting when `wait`, with a zero timeout otherwise; returns how many it
    /// harvested. Call it only when every harvested event was handed out.
    #[inline(always)]
    pub(crate) fn harvest(&mut self, min: u32, max: u32, wait: bool) -> Result<u32, i32> {
        debug_assert_eq!(self.harvested(), 0);
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let timeout: *const libc::timespec = if wait { std::ptr::null() } else { &zero };
        let max = max.min(self.in_flight);
        // SAFETY: ctx is live; events has room for `max` <= depth entries; timeout is
        // null or points to `zero`, which outlives the call.
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
            return Err(super::errno());
        }
        let got = (r as u32).min(max);
        (self.ev_head, self.ev_len) = (0, got);
        self.in_flight -= got;
        Ok(got)
    }

    /// Ends everything, for drop: queued commands are dropped, harvested events
    /// finished, commands in flight waited for (or, if waiting fails, their buffers
    /// leaked, since the kernel may still write into them).
    pub(crate) fn settle(&mut self) {
        while self.refuse_first().is_some() {}
        loop {
            while self.hand_out_next(&mut drop) {}
            if self.in_flight == 0 {
                return;
            }
            match self.harvest(self.in_flight, self.in_flight, true) {
                Ok(_) | Err(libc::EINTR) => {}
                Err(_) => break,
            }
        }
        // The kernel may still write into these buffers: leak them rather than free.
        for slot in self.slots.iter_mut().filter(|s| s.busy) {
            std::mem::forget(std::mem::take(&mut slot.data));
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

/// Why `queue_vectored` did not queue a command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every slot is taken.
    Full,
    /// The command moves data but carries no buffer.
    Empty,
}

impl Drop for Aio {
    fn drop(&mut self) {
        self.settle();
        destroy_in_background(self.ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// What the unit tests of `be::libaio` look at.
    impl Aio {
        /// What the tests check: `(free slots, slots holding data or busy, table length,
        /// queued, harvested, in flight)`.
        pub(crate) fn state(&self) -> (u32, usize, usize, u32, u32, u32) {
            let held = self.slots.iter().filter(|s| s.busy || !matches!(s.data, Data::None)).count();
            (self.nfree, held, self.slots.len(), self.nqueued, self.harvested(), self.in_flight)
        }

        /// Whether any slot at or past `from` was ever left busy.
        pub(crate) fn busy_from(&self, from: usize) -> bool {
            self.slots[from..].iter().any(|s| s.busy)
        }

        /// Gives the `k`-th queued iocb an opcode the kernel does not know; returns its slot
        /// and the slot of the first queued one.
        pub(crate) fn break_queued(&mut self, k: usize) -> (usize, usize) {
            let idx = self.queued_iocb(k).aio_data as usize;
            // SAFETY: as in queued_iocb; the exclusive borrow of self keeps everything
            // else off the iocb while it is written.
            unsafe { (*self.ptrs[k]).aio_lio_opcode = 0x7fff };
            (idx, self.first_queued())
        }
    }

    #[test]
    fn iocb_and_io_event_match_the_kernel_layout() {
        assert_eq!(offset_of!(Iocb, aio_lio_opcode), 16);
        assert_eq!(offset_of!(Iocb, aio_fildes), 20);
        assert_eq!(offset_of!(Iocb, aio_buf), 24);
        assert_eq!(offset_of!(Iocb, aio_nbytes), 32);
        assert_eq!(offset_of!(Iocb, aio_offset), 40);
        assert_eq!(offset_of!(Iocb, aio_flags), 56);
        assert_eq!(offset_of!(Iocb, aio_resfd), 60);
        assert_eq!(offset_of!(IoEvent, res), 16);
    }
}
