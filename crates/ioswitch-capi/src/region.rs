//! The lean asynchronous path: registered regions, `ioswitch_queue_submit_at` and
//! `ioswitch_queue_reap_at`.
//!
//! The classic path (`ioswitch_queue_submit` / `ioswitch_queue_reap`) moves each
//! command's buffer out of the global handle table and back, and keeps a context per
//! command for its user argument and callback. The lean path does neither:
//!
//! - a buffer from `ioswitch_buf_alloc` is made a *region* once
//!   (`ioswitch_region_new`): the region takes the buffer out of the handle table for its
//!   whole life (so `ioswitch_buf_free` refuses it with -EBUSY) and cuts it into slots of
//!   a fixed length; queues attach it (`ioswitch_queue_attach`);
//! - a submission names its data by address and length inside one slot of a region
//!   attached to the queue; the slot is marked busy (one atomic swap) until the
//!   command's completion is reaped, so a slot in flight can be neither submitted again
//!   nor freed; the library gets a borrowed buffer over the slot's bytes;
//! - the caller's 64-bit user data is the library command's tag (no context table), and
//!   `ioswitch_queue_reap_at` writes `{user_data, result, status, errnum}` once, straight
//!   into the caller's array; no callbacks.
//!
//! A queue takes the lean functions once a region is attached and the classic submitting
//! and reaping functions until then (each refuses the other's queue with -EINVAL), so
//! the two never share a queue's tags.

use crate::cmd::{ioswitch_cmd, to_cmd};
use crate::dev::null_arg;
use crate::error::{fail, from_error, guard};
use crate::queue::{bad_reap_counts, ioswitch_queue, reaped_back, rejection};
use crate::table::{self, Refusal, Slot};
use ioswitch_rs::{Buffer, Cmd, Completion, CompletionSink, Data, Error, Rejected, Status};
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::mem::{self, ManuallyDrop};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Most regions one queue may have attached.
pub const IOSWITCH_MAX_REGIONS: u32 = 16;

/// A buffer from `ioswitch_buf_alloc` registered for the lean path, cut into slots of a
/// fixed length (opaque). Made by `ioswitch_region_new`, attached to queues with
/// `ioswitch_queue_attach`, freed by `ioswitch_region_free` once no queue has it
/// attached. It may be attached to queues of several threads.
pub struct ioswitch_region {
    base: usize,
    /// Bytes covered by whole slots (the buffer's tail past the last whole slot is not).
    len: usize,
    slot_len: usize,
    /// log2(slot_len) when slot_len is a power of two (the slot of an address is then a
    /// shift, not a division), else [`NOT_POW2`]. A byte: tested in memory, no constant
    /// to load.
    shift: u8,
    /// slot_len - 1 when slot_len is a power of two (the offset inside a slot is then a
    /// mask).
    mask: usize,
    /// One flag per slot: a command in flight uses it.
    busy: Box<[AtomicBool]>,
    /// Queues that have it attached (a queue that could not finish its commands at
    /// `ioswitch_queue_term` keeps counting, so the memory is never freed under them).
    users: AtomicU32,
    /// The buffer, out of its handle-table slot while the region lives.
    held: (&'static Slot, ManuallyDrop<Buffer>),
}

/// [`ioswitch_region`]'s `shift` of a slot length that is not a power of two.
const NOT_POW2: u8 = u8::MAX;

/// A completion of the lean path, as `ioswitch_queue_reap_at` writes it.
///
/// The command succeeded when `(status & 0x7ff) == 0 && errnum == 0` (as
/// `ioswitch_cpl_ok` says of a `struct ioswitch_cpl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ioswitch_event {
    /// The `user_data` given to `ioswitch_queue_submit_at`.
    pub user_data: u64,
    /// Command-specific result, as in `struct ioswitch_cpl`: bytes moved for data
    /// commands on files and block devices, completion DW0-1 for NVMe. A read or write
    /// that succeeds moved every byte; one that ends short fails with EIO.
    pub result: u64,
    /// The NVMe status field, as in `struct ioswitch_cpl` (bits 7:0 SC, 10:8 SCT, 12:11
    /// CRD, 13 More, 14 DNR); 0 on success.
    pub status: u16,
    /// Zero.
    pub reserved: u16,
    /// The positive errno the OS reported for the failure, or 0.
    pub errnum: i32,
}

impl ioswitch_event {
    #[inline(always)]
    fn new(user_data: u64, status: Status, result: u64) -> ioswitch_event {
        ioswitch_event { user_data, result, status: status.raw, reserved: 0, errnum: status.errno_raw }
    }
}

impl ioswitch_region {
    /// The slot of the byte at offset `off` (below `len`) from the base, and the byte's
    /// offset inside it.
    #[inline(always)]
    fn locate(&self, off: usize) -> (usize, usize) {
        if self.shift != NOT_POW2 {
            (off >> self.shift, off & self.mask)
        } else {
            self.locate_div(off)
        }
    }

    /// [`locate`](Self::locate) of a slot length that is not a power of two, out of line:
    /// the shift is the fall-through path.
    #[cold]
    #[inline(never)]
    fn locate_div(&self, off: usize) -> (usize, usize) {
        (off / self.slot_len, off % self.slot_len)
    }

    /// The busy flag of slot `i`, a slot of [`locate`](Self::locate).
    #[inline(always)]
    fn flag(&self, i: usize) -> &AtomicBool {
        debug_assert!(i < self.busy.len());
        // SAFETY: locate gives i = off / slot_len for an off below len = busy.len() *
        // slot_len (see find), so i < busy.len().
        unsafe { self.busy.get_unchecked(i) }
    }
}

/// The region attached to `regions` that covers `addr`, with the slot index of `addr`
/// and its offset inside the slot. The first region inline (most queues have one), the
/// others out of line: no loop set up on the submitting path.
#[inline(always)]
fn find(regions: &[*const ioswitch_region], addr: usize) -> Option<(&ioswitch_region, usize, usize)> {
    let &first = regions.first()?;
    // SAFETY: an attached region lives until every queue that attached it is
    // terminated (ioswitch_region_free refuses it while `users` > 0).
    let r = unsafe { &*first };
    let off = addr.wrapping_sub(r.base);
    if off < r.len {
        let (i, at) = r.locate(off);
        return Some((r, i, at));
    }
    find_far(regions, addr)
}

/// [`find`] past the first region.
#[cold]
#[inline(never)]
fn find_far(regions: &[*const ioswitch_region], addr: usize) -> Option<(&ioswitch_region, usize, usize)> {
    for &r in regions.get(1..).unwrap_or_default() {
        // SAFETY: as in find.
        let r = unsafe { &*r };
        let off = addr.wrapping_sub(r.base);
        if off < r.len {
            let (i, at) = r.locate(off);
            return Some((r, i, at));
        }
    }
    None
}

/// Frees the slot a completed command's data used (the data is a borrowed buffer over
/// it, dropped without freeing anything).
#[inline(always)]
fn release(regions: &[*const ioswitch_region], data: Data) {
    free_slot(regions, &data);
    // Borrowed buffers (id 0) or none: nothing to free, no drop to run.
    mem::forget(data);
}

/// [`release`]'s part that frees the slot, the data left where it is.
#[inline(always)]
fn free_slot(regions: &[*const ioswitch_region], data: &Data) {
    if let Data::One(b) = data {
        let addr = b.as_ptr() as usize;
        // The first region inline (most queues have one), the others out of line: a
        // smaller body for the reaping loops that call it once per completion.
        if let Some(&r) = regions.first() {
            // SAFETY: as in find.
            free_slot_in(unsafe { &*r }, regions, addr);
        } else {
            free_slot_far(regions, addr);
        }
    }
}

/// Frees the slot of `addr`, `first` being `regions[0]`: inline when `first` covers it.
#[inline(always)]
fn free_slot_in(first: &ioswitch_region, regions: &[*const ioswitch_region], addr: usize) {
    let off = addr.wrapping_sub(first.base);
    if off < first.len {
        first.flag(first.locate(off).0).store(false, Ordering::Release);
    } else {
        free_slot_far(regions, addr);
    }
}

/// [`free_slot`] of an address past the first region.
#[cold]
#[inline(never)]
fn free_slot_far(regions: &[*const ioswitch_region], addr: usize) {
    if let Some((r, i, _)) = find_far(regions, addr) {
        r.flag(i).store(false, Ordering::Release);
    }
}

/// Makes a region of the buffer `buf` (from `ioswitch_buf_alloc`, not in flight) with
/// slots of `slot_len` bytes (the buffer's length divided by `slot_len`, rounded down, is
/// the number of slots) and stores it in `*out`. Returns 0, or -EINVAL (NULL argument,
/// `slot_len` 0 or larger than the buffer, `buf` not the start of a live buffer from
/// `ioswitch_buf_alloc`), -EBUSY (the buffer belongs to a command in flight or to
/// another region).
///
/// The region holds the buffer until `ioswitch_region_free`: `ioswitch_buf_free`
/// answers -EBUSY for it meanwhile, and the classic functions refuse it as a command
/// buffer. Its bytes stay the caller's to read and write, except a slot's while a
/// command submitted on it is in flight.
///
/// # Safety
/// `out` valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_region_new(buf: *mut c_void, slot_len: u64, out: *mut *mut ioswitch_region) -> c_int {
    const F: &str = "ioswitch_region_new";
    guard(F, -libc::EIO, || {
        if out.is_null() {
            return null_arg(F, "out");
        }
        // SAFETY: out is non-null and valid for a write (caller contract).
        unsafe { out.write(ptr::null_mut()) };
        if buf.is_null() {
            return null_arg(F, "buf");
        }
        let (slot, b) = match table::take(buf as usize) {
            Ok(t) => t,
            Err(Refusal::Busy) => {
                return fail(
                    libc::EBUSY,
                    format!("{F}: buffer {buf:p} belongs to a command in flight or to another region"),
                )
            }
            Err(Refusal::Unknown) => {
                return fail(
                    libc::EINVAL,
                    format!("{F}: buffer {buf:p} is not the start of a live buffer from ioswitch_buf_alloc"),
                )
            }
        };
        let blen = b.len();
        if slot_len == 0 || slot_len > blen as u64 {
            table::put(slot, b);
            return fail(
                libc::EINVAL,
                format!("{F}: slot_len {slot_len}: use 1..={blen} (the length of buffer {buf:p})"),
            );
        }
        let slot_len = slot_len as usize;
        let n = blen / slot_len;
        let r = Box::new(ioswitch_region {
            base: b.as_ptr() as usize,
            len: n * slot_len,
            slot_len,
            // trailing_zeros of a usize is below 64: a byte holds it.
            shift: if slot_len.is_power_of_two() { slot_len.trailing_zeros() as u8 } else { NOT_POW2 },
            mask: slot_len - 1,
            busy: (0..n).map(|_| AtomicBool::new(false)).collect(),
            users: AtomicU32::new(0),
            held: (slot, ManuallyDrop::new(b)),
        });
        // SAFETY: as above.
        unsafe { out.write(Box::into_raw(r)) };
        0
    })
}

/// Frees a region and gives its buffer back to the caller (free it with
/// `ioswitch_buf_free`). NULL is ignored. Returns 0, or -EBUSY (freeing nothing) while
/// a queue has it attached (`ioswitch_queue_term` detaches; a queue whose final wait
/// failed keeps it, so memory that commands may still use is never handed back).
///
/// # Safety
/// `r` NULL or a region from `ioswitch_region_new` not freed before, used by no other
/// thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_region_free(r: *mut ioswitch_region) -> c_int {
    const F: &str = "ioswitch_region_free";
    guard(F, -libc::EIO, || {
        // SAFETY: r is null or live (caller contract).
        let Some(reg) = (unsafe { r.as_ref() }) else {
            return 0;
        };
        let users = reg.users.load(Ordering::Acquire);
        if users > 0 {
            return fail(
                libc::EBUSY,
                format!("{F}: region {r:p} is attached to {users} queue(s); terminate them first"),
            );
        }
        // SAFETY: r came from Box::into_raw in ioswitch_region_new; no queue uses it.
        let reg = unsafe { Box::from_raw(r) };
        let (slot, b) = reg.held;
        table::put(slot, ManuallyDrop::into_inner(b));
        0
    })
}

/// Attaches region `r` to queue `q`: from now on the queue takes commands through
/// `ioswitch_queue_submit_at` with data inside `r` (or another attached region) and
/// hands completions out through `ioswitch_queue_reap_at`; its classic submitting and
/// reaping functions (`ioswitch_queue_submit*`, `poke`, `wait`, `drain`,
/// `ioswitch_queue_reap`) refuse it with -EINVAL. The region stays attached until
/// `ioswitch_queue_term`. Returns 0, or -EINVAL (NULL argument, `r` already attached to
/// `q`), -EBUSY (commands submitted through the classic functions are outstanding, or
/// called from one of the queue's callbacks), -ENOSPC (`IOSWITCH_MAX_REGIONS` attached).
///
/// # Safety
/// `q` a live queue used by this thread only; `r` a live region.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_attach(q: *mut ioswitch_queue, r: *mut ioswitch_region) -> c_int {
    const F: &str = "ioswitch_queue_attach";
    guard(F, -libc::EIO, || {
        // SAFETY: q is null or live and used by this thread only (caller contract).
        let Some(q) = (unsafe { q.as_mut() }) else {
            return null_arg(F, "q");
        };
        // SAFETY: r is null or live (caller contract).
        let Some(reg) = (unsafe { r.as_ref() }) else {
            return null_arg(F, "r");
        };
        if q.in_cb > 0 {
            return fail(libc::EBUSY, format!("{F}: called from a completion callback of the same queue"));
        }
        if q.regions.is_empty() && (q.rq.outstanding() > 0 || !q.kept.is_empty()) {
            return fail(
                libc::EBUSY,
                format!("{F}: commands submitted with ioswitch_queue_submit are outstanding; reap them first"),
            );
        }
        if q.regions.contains(&r.cast_const()) {
            return fail(libc::EINVAL, format!("{F}: region {r:p} is already attached to this queue"));
        }
        if q.regions.len() >= IOSWITCH_MAX_REGIONS as usize {
            return fail(libc::ENOSPC, format!("{F}: the queue has {IOSWITCH_MAX_REGIONS} regions attached already"));
        }
        reg.users.fetch_add(1, Ordering::AcqRel);
        q.regions.push(r.cast_const());
        0
    })
}

/// Submits a command whose data is the `len` bytes at `addr`, inside one slot of a
/// region attached to the queue (`len` 0 and `addr` NULL: no data), with `user_data`
/// handed back in its completion by `ioswitch_queue_reap_at`. Never blocks; the command
/// reaches the kernel at the next `ioswitch_queue_commit` or `ioswitch_queue_reap_at`.
///
/// Returns 0; -EBUSY when `depth` commands are outstanding, or when the slot already
/// belongs to a command in flight; -EINVAL for a NULL or bad argument: no region
/// attached to the queue, a range not inside one slot of an attached region, a bad
/// command; -ERANGE for a range past the end of the device. Nothing was submitted when
/// the return is not 0.
///
/// Ownership: on success the slot belongs to the queue until the command's completion
/// has been written by `ioswitch_queue_reap_at` (or `ioswitch_queue_term` returned): do
/// not read or write its bytes meanwhile; its region cannot be freed meanwhile.
///
/// # Safety
/// `q` a live queue used by this thread only; `cmd` a valid command.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_submit_at(
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
    user_data: u64,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { submit_at_then("ioswitch_queue_submit_at", q, cmd, addr, len, user_data, |_| 0) }
}

/// `ioswitch_queue_submit_at`, then, when it succeeds, `ioswitch_queue_commit`: one call
/// for a caller that commits after every command (fio does, with its default
/// `iodepth_batch=1`).
///
/// Returns 0 when the command was submitted and pushed to the kernel; a negative errno
/// when it was not submitted (as `ioswitch_queue_submit_at`: nothing was submitted); a
/// positive errno when it was submitted but the commit failed (`ioswitch_last_error`
/// says why): the command is then the queue's as after `ioswitch_queue_submit_at`, and
/// comes back through `ioswitch_queue_reap_at` like any other (pushed at the next
/// commit or reap, or completed with an error).
///
/// # Safety
/// As `ioswitch_queue_submit_at`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_submit_at_commit(
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
    user_data: u64,
) -> c_int {
    const F: &str = "ioswitch_queue_submit_at_commit";
    // SAFETY: forwarded caller contract.
    unsafe { submit_at_then(F, q, cmd, addr, len, user_data, |q| committed(F, q.rq.commit())) }
}

/// The body of `ioswitch_queue_submit_at` and `_commit`: the panic guard, the queue's
/// null check and the submission ([`submit_at`]); `then` runs on the queue after a
/// submission that succeeded, and its return is the call's.
///
/// # Safety
/// As `ioswitch_queue_submit_at`.
#[inline(always)]
unsafe fn submit_at_then(
    func: &str,
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
    user_data: u64,
    then: impl FnOnce(&mut ioswitch_queue) -> c_int,
) -> c_int {
    guard(func, -libc::EIO, move || {
        // SAFETY: q is null or live and used by this thread only (caller contract).
        let Some(q) = (unsafe { q.as_mut() }) else {
            return null_arg(func, "q");
        };
        // SAFETY: forwarded caller contract.
        let r = unsafe { submit_at(func, q, cmd, addr, len, user_data) };
        if r != 0 {
            return r;
        }
        then(q)
    })
}

/// The completion sink of `ioswitch_queue_reap_at` and `ioswitch_queue_submit_at_reap`:
/// frees each completion's slot and writes its event into `evs[at]` while `at < max`,
/// keeping the rare one beyond `max` in `kept` (out of line). A [`CompletionSink`] rather
/// than a closure: its `put` is inlined into every interface's reaping loop (a closure is
/// a function of its own that LLVM kept out of line, with the completion written to
/// memory for each call; the lean path's instruction counts are recorded in
/// docs/BENCHMARKS.md). `S` frees the slots: [`Regions`] or [`First`].
struct PutEvents<'a, S> {
    slots: S,
    evs: *mut ioswitch_event,
    max: u32,
    /// The next event's index in `evs`.
    at: u32,
    kept: &'a mut VecDeque<ioswitch_event>,
}

/// How [`PutEvents`] frees a completion's slot.
trait FreeSlot {
    fn free(&self, data: &Data);
}

/// Through the queue's regions, the first one looked up per completion
/// (`ioswitch_queue_reap_at`: with [`First`] instead, its nil row took more instructions,
/// its sink being one more field to set up in memory).
struct Regions<'a>(&'a [*const ioswitch_region]);

impl FreeSlot for Regions<'_> {
    #[inline(always)]
    fn free(&self, data: &Data) {
        free_slot(self.0, data);
    }
}

/// With the first region looked up once per call (`ioswitch_queue_submit_at_reap`, whose
/// reap is inlined with its interface's loop: fewer instructions per completion there).
struct First<'a> {
    /// `regions[0]`.
    first: &'a ioswitch_region,
    regions: &'a [*const ioswitch_region],
}

impl FreeSlot for First<'_> {
    #[inline(always)]
    fn free(&self, data: &Data) {
        if let Data::One(b) = data {
            free_slot_in(self.first, self.regions, b.as_ptr() as usize);
        }
    }
}

impl<S: FreeSlot> CompletionSink for PutEvents<'_, S> {
    #[inline(always)]
    fn put(&mut self, c: Completion) {
        let Completion { tag, status, result, data } = c;
        // Borrowed buffers (id 0) or none: nothing to free, no drop to run.
        let data = ManuallyDrop::new(data);
        self.slots.free(&data);
        // The event is made in each arm: written straight into evs, not through the stack.
        if self.at < self.max {
            // SAFETY: at < max, and evs is valid for writing max events (the contract of
            // both callers).
            unsafe { self.evs.add(self.at as usize).write(ioswitch_event::new(tag, status, result)) };
            self.at += 1;
        } else {
            keep(self.kept, ioswitch_event::new(tag, status, result));
        }
    }
}

/// `ioswitch_queue_submit_at_commit`, then a reap that does not wait: what has completed
/// by then is written to `evs` from `evs[*n]` on, at most up to `evs[max - 1]`, as
/// `ioswitch_queue_reap_at` writes it (each completion once, its slot already free
/// again), and `*n` counts it (`evs[0..*n]` are the caller's, untouched). One call instead
/// of a submission and a reap for a caller that looks for completions after every
/// command (the fio engine at `iodepth_batch=1`): completions of the nil interface, and
/// of any interface that has finished a command by then, come back without another
/// call. `*n == max` reaps nothing (a commit only), and so does a queue that still holds
/// completions an earlier reap kept beyond its `max` (they come first, at the next
/// `ioswitch_queue_reap_at`).
///
/// Returns as `ioswitch_queue_submit_at_commit`: 0 when the command was submitted and
/// pushed; a negative errno when it was not submitted (-EINVAL also for a NULL `n`, a
/// NULL `evs` with `max` above 0, `*n` above `max`); a positive errno when it was
/// submitted but the commit or the reap failed (the completions reaped before the
/// failure stay in the queue and come first at the next `ioswitch_queue_reap_at`). `*n`
/// grows only when the return is 0.
///
/// # Safety
/// As `ioswitch_queue_submit_at`; `evs` valid for writing `max` events (may be NULL when
/// `max` is 0); `n` valid for reading and writing one `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_submit_at_reap(
    q: *mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
    user_data: u64,
    evs: *mut ioswitch_event,
    max: u32,
    n: *mut u32,
) -> c_int {
    const F: &str = "ioswitch_queue_submit_at_reap";
    guard(F, -libc::EIO, move || {
        // SAFETY: q is null or live and used by this thread only (caller contract).
        let Some(q) = (unsafe { q.as_mut() }) else {
            return null_arg(F, "q");
        };
        // SAFETY: n is null or valid for reads and writes (caller contract).
        let Some(n) = (unsafe { n.as_mut() }) else {
            return null_arg(F, "n");
        };
        let got = *n;
        if got > max {
            return bad_reap_to(got, max);
        }
        // A NULL array: the rest of the test out of line (a branch, where the whole test
        // inline was a flag computed every call).
        if evs.is_null() {
            if let Some(e) = null_evs(max) {
                return e;
            }
        }
        if q.at_once && q.rq.outstanding() == 0 && got < max && q.evkept.is_empty() {
            // SAFETY: forwarded caller contract; got < max.
            return unsafe { submit_at_once(q, cmd, addr, len, user_data, evs.add(got as usize), n) };
        }
        // SAFETY: forwarded caller contract.
        let r = unsafe { submit_at(F, q, cmd, addr, len, user_data) };
        if r != 0 {
            return r;
        }
        if got == max || !q.evkept.is_empty() {
            return committed(F, q.rq.commit());
        }
        let first = got;
        let ioswitch_queue { rq, regions, evkept, .. } = q;
        // submit_at refuses a queue without a region: the else is never taken.
        let Some(&r0) = regions.first() else { return no_region(F) };
        // SAFETY: as in find.
        let slots = First { first: unsafe { &*r0 }, regions };
        let mut put = PutEvents { slots, evs, max, at: got, kept: evkept };
        match rq.poke_with(max - first, &mut put) {
            Ok(_) => {
                *n = put.at;
                0
            }
            Err(e) => {
                let got = put.at;
                // SAFETY: evs[first..got] were written above.
                -unsafe { reap_at_failed(F, evkept, evs.add(first as usize), got - first, &e) }
            }
        }
    })
}

/// `ioswitch_queue_submit_at_reap` on a queue whose interface completes every command at
/// once (nil) with nothing outstanding and room for one event at `ev` (`evs[*n]`): the
/// command completes inside the call, and its completion is the only one the call can
/// reap (`Queue::submit_poke_with` says so), so the event goes straight to `ev` and the
/// slot's busy flag, known already, is cleared without looking the slot up again.
///
/// # Safety
/// As `ioswitch_queue_submit_at_reap`; `ev` valid for writing one event.
#[inline(always)]
unsafe fn submit_at_once(
    q: &mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
    user_data: u64,
    ev: *mut ioswitch_event,
    n: &mut u32,
) -> c_int {
    const F: &str = "ioswitch_queue_submit_at_reap";
    let ioswitch_queue { rq, regions, evkept, .. } = q;
    // SAFETY: forwarded caller contract.
    let (c, data, flag) = match unsafe { lean_args(F, regions, cmd, addr, len) } {
        // As in ioswitch_queue_submit_at_reap: no drop to run on an unwinding path.
        Ok((c, data, flag)) => (c, ManuallyDrop::new(data), flag),
        Err(e) => return e,
    };
    let mut one = PutOne { ev, flag, n: 0 };
    // At most 1 reaped: the command's own completion (nothing else is outstanding).
    match rq.submit_poke_with(c, ManuallyDrop::into_inner(data), user_data, 1, &mut one) {
        Ok(Ok(_)) => {
            *n += one.n;
            0
        }
        // SAFETY: ev[0..one.n] were written above.
        Ok(Err(e)) => -unsafe { reap_at_failed(F, evkept, ev, one.n, &e) },
        Err(rejected) => unrefused(F, rejected, flag),
    }
}

/// [`submit_at_once`]'s sink: the one completion it reaps, the command's own, written to
/// `ev`, its slot freed through the flag `lean_args` set.
struct PutOne<'a> {
    ev: *mut ioswitch_event,
    flag: Option<&'a AtomicBool>,
    /// Events written: 0 or 1.
    n: u32,
}

impl CompletionSink for PutOne<'_> {
    #[inline(always)]
    fn put(&mut self, c: Completion) {
        let Completion { tag, status, result, data } = c;
        // Borrowed buffers (id 0) or none: nothing to free, no drop to run.
        mem::forget(data);
        debug_assert_eq!(self.n, 0, "submit_poke_with(max 1) reaps one completion at most");
        if let Some(f) = self.flag {
            f.store(false, Ordering::Release);
        }
        // SAFETY: the poke reaps at most 1 (its max), and ev is valid for writing one
        // event (the caller's contract).
        unsafe { self.ev.write(ioswitch_event::new(tag, status, result)) };
        self.n = 1;
    }
}

#[cold]
#[inline(never)]
fn bad_reap_to(n: u32, max: u32) -> c_int {
    const F: &str = "ioswitch_queue_submit_at_reap";
    fail(libc::EINVAL, format!("{F}: *n is {n}, above max {max}"))
}

/// `ioswitch_queue_submit_at_reap` with `evs` NULL: refused (-EINVAL) unless `max` is 0.
#[cold]
#[inline(never)]
fn null_evs(max: u32) -> Option<c_int> {
    const F: &str = "ioswitch_queue_submit_at_reap";
    (max > 0).then(|| fail(libc::EINVAL, format!("{F}: evs is NULL with max {max}")))
}

/// The return of a commit after a successful submission: 0, or the errno of its failure,
/// positive.
#[inline(always)]
fn committed(func: &str, r: Result<u32, Error>) -> c_int {
    match r {
        Ok(_) => 0,
        Err(e) => commit_failed(func, &e),
    }
}

/// A failed commit after a successful submission: the errno, positive.
#[cold]
#[inline(never)]
fn commit_failed(func: &str, e: &Error) -> c_int {
    -from_error(func, e)
}

/// The body of `ioswitch_queue_submit_at` (and `_commit`), `func` naming the caller in
/// error messages.
///
/// # Safety
/// `cmd` null or a valid command.
#[inline(always)]
unsafe fn submit_at(
    func: &str,
    q: &mut ioswitch_queue,
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
    user_data: u64,
) -> c_int {
    // SAFETY: forwarded caller contract.
    let (c, data, flag) = match unsafe { lean_args(func, &q.regions, cmd, addr, len) } {
        Ok(a) => a,
        Err(e) => return e,
    };
    match q.rq.submit(c, data, user_data) {
        Ok(()) => 0,
        Err(rejected) => unrefused(func, rejected, flag),
    }
}

/// A lean submission's command and data, checked: the library command, the data (a
/// borrowed buffer over the bytes at `addr`, or none) and the busy flag of its slot, now
/// set; or the negative errno of a refusal (recorded, nothing set).
///
/// # Safety
/// `cmd` null or a valid command.
#[inline(always)]
unsafe fn lean_args<'a>(
    func: &str,
    regions: &'a [*const ioswitch_region],
    cmd: *const ioswitch_cmd,
    addr: *mut c_void,
    len: u64,
) -> Result<(&'a Cmd, Data, Option<&'a AtomicBool>), c_int> {
    // SAFETY: cmd is null or valid (caller contract); the caller keeps it valid for the
    // call, which is as long as the borrow is used.
    let Some(c) = (unsafe { cmd.as_ref() }) else {
        return Err(null_arg(func, "cmd"));
    };
    let c = to_cmd(c, func)?;
    match NonNull::new(addr.cast::<u8>()) {
        Some(p) if len != 0 => {
            let Some((r, i, at)) = find(regions, p.as_ptr() as usize) else {
                return Err(outside(func, regions, addr, len));
            };
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > r.slot_len - at {
                return Err(crosses(func, r, addr, len));
            }
            let flag = r.flag(i);
            if flag.swap(true, Ordering::Acquire) {
                return Err(slot_busy(func, addr));
            }
            // SAFETY: the slot lies inside the region's buffer, which the region holds
            // (allocated, not freed while a queue has it attached); the busy flag gives
            // this command the slot's bytes until its completion is reaped. The buffer
            // is borrowed (id 0): dropping it frees nothing.
            let b = ManuallyDrop::into_inner(unsafe { Buffer::borrow_raw(p, len) });
            Ok((c, Data::One(b), Some(flag)))
        }
        None if len == 0 => {
            if regions.is_empty() {
                return Err(outside(func, regions, addr, len));
            }
            Ok((c, Data::None, None))
        }
        _ => Err(both_or_neither(func, addr, len)),
    }
}

/// A lean submission the queue refused: its slot is free again; returns the negative
/// errno.
#[inline(always)]
fn unrefused(func: &str, rejected: Rejected, flag: Option<&AtomicBool>) -> c_int {
    mem::forget(rejected.data);
    if let Some(f) = flag {
        f.store(false, Ordering::Release);
    }
    rejection(func, rejected.error)
}

/// A lean submission with an address but no length, or a length but no address.
#[cold]
#[inline(never)]
fn both_or_neither(func: &str, addr: *mut c_void, len: u64) -> c_int {
    fail(libc::EINVAL, format!("{func}: addr {addr:p} with len {len}: both or neither must be 0"))
}

/// Why a lean submission's data was refused: no region attached, or none covers it.
#[cold]
#[inline(never)]
fn outside(func: &str, regions: &[*const ioswitch_region], addr: *mut c_void, len: u64) -> c_int {
    if regions.is_empty() {
        return no_region(func);
    }
    fail(libc::EINVAL, format!("{func}: {len} bytes at {addr:p} are not inside a region attached to this queue"))
}

/// A lean call on a queue without a region attached.
#[cold]
#[inline(never)]
fn no_region(func: &str) -> c_int {
    fail(
        libc::EINVAL,
        format!(
            "{func}: the queue has no region attached (ioswitch_queue_attach); use ioswitch_queue_submit for \
             buffers of their own"
        ),
    )
}

#[cold]
#[inline(never)]
fn crosses(func: &str, r: &ioswitch_region, addr: *mut c_void, len: usize) -> c_int {
    fail(
        libc::EINVAL,
        format!(
            "{func}: {len} bytes at {addr:p} cross the end of their {}-byte slot of region {:p}",
            r.slot_len, r.base as *const u8
        ),
    )
}

#[cold]
#[inline(never)]
fn slot_busy(func: &str, addr: *mut c_void) -> c_int {
    fail(libc::EBUSY, format!("{func}: the slot of {addr:p} already belongs to a command that has not been reaped"))
}

/// Commits, then reaps completions into `evs`: at least `min` (waiting for them; at most
/// as many as are outstanding) and at most `max` (the length of `evs`). Returns how many
/// it wrote to `evs[0..n]`, or a negative errno: -EINVAL for a NULL argument, `max` 0,
/// `min` above `max` (an array too small for what must be waited for), or a queue with
/// no region attached; -EBUSY when called from a completion callback of the same
/// queue; an interface's failure otherwise (the completions reaped before it stay in the
/// queue and come first at the next call).
///
/// Each completion is written once, straight into `evs`, its slot already free again.
/// Completions the interface delivers beyond `max` stay in the queue for the next call;
/// `ioswitch_queue_outstanding` counts them until then.
///
/// # Safety
/// `q` a live queue used by this thread only; `evs` valid for writing `max` events.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_queue_reap_at(
    q: *mut ioswitch_queue,
    min: u32,
    max: u32,
    evs: *mut ioswitch_event,
) -> c_int {
    // SAFETY: forwarded caller contract.
    guard(REAP_AT, -libc::EIO, move || unsafe { reap_at(q, min, max, evs) })
}

const REAP_AT: &str = "ioswitch_queue_reap_at";

/// The body of `ioswitch_queue_reap_at`: a function of its own, which the guard's closure
/// calls with the arguments in registers. Written as the closure itself it was kept out
/// of line by LLVM all the same, with the arguments packed into memory and unpacked again
/// (the lean path's instruction counts are in docs/BENCHMARKS.md).
///
/// # Safety
/// As `ioswitch_queue_reap_at`.
#[inline(never)]
unsafe fn reap_at(q: *mut ioswitch_queue, min: u32, max: u32, evs: *mut ioswitch_event) -> c_int {
    // SAFETY: q is null or live and used by this thread only (caller contract).
    let Some(q) = (unsafe { q.as_mut() }) else {
        return null_arg(REAP_AT, "q");
    };
    if evs.is_null() || max == 0 || min > max || q.regions.is_empty() || q.in_cb > 0 {
        return bad_reap(q, evs, min, max);
    }
    let mut n: u32 = 0;
    if !q.evkept.is_empty() {
        while n < max {
            let Some(e) = q.evkept.pop_front() else { break };
            // SAFETY: n < max and evs is valid for max events (caller contract).
            unsafe { evs.add(n as usize).write(e) };
            n += 1;
        }
    }
    // Enough already (then take what is there, up to max), or wait for the rest.
    let (wait, count) = if n >= min { (false, max - n) } else { (true, min - n) };
    let ioswitch_queue { rq, regions, evkept, .. } = q;
    let mut put = PutEvents { slots: Regions(regions), evs, max, at: n, kept: evkept };
    let r = match (wait, count) {
        (false, 0) => rq.commit(),
        (false, left) => rq.poke_with(left, &mut put),
        (true, need) => rq.wait_with(need, &mut put),
    };
    let n = put.at;
    match r {
        Ok(_) => n as c_int,
        // SAFETY: evs[0..n] were written above.
        Err(e) => unsafe { reap_at_failed(REAP_AT, evkept, evs, n, &e) },
    }
}

/// Keeps an event `ioswitch_queue_reap_at` reaped beyond its caller's `max`.
#[cold]
#[inline(never)]
fn keep(kept: &mut VecDeque<ioswitch_event>, e: ioswitch_event) {
    kept.push_back(e);
}

#[cold]
#[inline(never)]
fn bad_reap(q: &ioswitch_queue, evs: *mut ioswitch_event, min: u32, max: u32) -> c_int {
    const F: &str = REAP_AT;
    if evs.is_null() {
        null_arg(F, "evs")
    } else if max == 0 || min > max {
        bad_reap_counts(F, min, max)
    } else if q.regions.is_empty() {
        fail(libc::EINVAL, format!("{F}: the queue has no region attached; use ioswitch_queue_reap"))
    } else {
        fail(libc::EBUSY, format!("{F}: called from a completion callback of the same queue"))
    }
}

/// A failed `ioswitch_queue_reap_at` (or the reap of `ioswitch_queue_submit_at_reap`):
/// the events written before the failure go back to the front of the kept list, in
/// order; returns the negative errno.
///
/// # Safety
/// `evs[0..n]` written.
#[cold]
#[inline(never)]
unsafe fn reap_at_failed(
    func: &str,
    kept: &mut VecDeque<ioswitch_event>,
    evs: *mut ioswitch_event,
    n: u32,
    e: &Error,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { reaped_back(func, kept, evs, n, e, |ev| ev) }
}

/// Waits for the lean commands of a queue being terminated (their slots freed as they
/// complete) and detaches its regions; when the wait fails the regions stay counted as
/// attached (never freed under commands that may still run).
pub(crate) fn term_lean(q: &mut ioswitch_queue) -> Result<(), Error> {
    let ioswitch_queue { rq, regions, .. } = q;
    let regs: &[*const ioswitch_region] = regions;
    rq.drain(|c| release(regs, c.data))?;
    for r in regions.drain(..) {
        // SAFETY: attached regions live while attached (see find).
        unsafe { &*r }.users.fetch_sub(1, Ordering::AcqRel);
    }
    Ok(())
}

/// Refuses a classic submitting or reaping function on a queue with a region attached.
#[cold]
#[inline(never)]
pub(crate) fn lean_queue(func: &str) -> c_int {
    fail(
        libc::EINVAL,
        format!("{func}: the queue has a region attached; use ioswitch_queue_submit_at and ioswitch_queue_reap_at"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{ioswitch_cmd_fs_flush, ioswitch_cmd_fs_read, ioswitch_cmd_fs_write};
    use crate::cpl::ioswitch_cpl;
    use crate::dev::{ioswitch_buf_alloc, ioswitch_buf_free, ioswitch_dev, ioswitch_dev_close, ioswitch_dev_open};
    use crate::error::last_string;
    use crate::queue::{
        ioswitch_queue_init, ioswitch_queue_outstanding, ioswitch_queue_poke, ioswitch_queue_reap,
        ioswitch_queue_submit, ioswitch_queue_term,
    };
    use std::ffi::CString;

    const SLOT: usize = 4096;

    // Safe wrappers for the tests: every call below passes live handles (or NULL where a
    // refusal is tested), valid commands, and out pointers and arrays valid for what the
    // function writes; addresses of region memory are only dereferenced by the library
    // when they lie inside a slot.
    macro_rules! wrap {
        ($($w:ident => $f:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {$(
            #[allow(clippy::too_many_arguments)] // ioswitch_queue_submit_at_reap's 8
            fn $w($($a: $t),*) -> $r {
                // SAFETY: see above.
                unsafe { $f($($a),*) }
            }
        )*};
    }
    wrap! {
        s_buf_alloc => ioswitch_buf_alloc(d: *const ioswitch_dev, n: usize) -> *mut c_void;
        s_buf_free => ioswitch_buf_free(b: *mut c_void) -> c_int;
        s_cmd_fs_flush => ioswitch_cmd_fs_flush(o: *mut ioswitch_cmd) -> c_int;
        s_dev_open => ioswitch_dev_open(u: *const std::ffi::c_char, o: *const std::ffi::c_char, d: *mut *mut ioswitch_dev) -> c_int;
        s_queue_attach => ioswitch_queue_attach(q: *mut ioswitch_queue, r: *mut ioswitch_region) -> c_int;
        s_queue_init => ioswitch_queue_init(d: *const ioswitch_dev, n: u32, o: *mut *mut ioswitch_queue) -> c_int;
        s_queue_outstanding => ioswitch_queue_outstanding(q: *const ioswitch_queue) -> c_int;
        s_queue_poke => ioswitch_queue_poke(q: *mut ioswitch_queue, m: u32) -> c_int;
        s_queue_reap => ioswitch_queue_reap(q: *mut ioswitch_queue, a: u32, b: u32, c: *mut ioswitch_cpl) -> c_int;
        s_queue_reap_at => ioswitch_queue_reap_at(q: *mut ioswitch_queue, a: u32, b: u32, e: *mut ioswitch_event) -> c_int;
        s_queue_submit => ioswitch_queue_submit(q: *mut ioswitch_queue, c: *const ioswitch_cmd, b: *const *mut c_void, n: u32, u: *mut c_void) -> c_int;
        s_queue_submit_at => ioswitch_queue_submit_at(q: *mut ioswitch_queue, c: *const ioswitch_cmd, a: *mut c_void, l: u64, u: u64) -> c_int;
        s_queue_submit_at_commit => ioswitch_queue_submit_at_commit(q: *mut ioswitch_queue, c: *const ioswitch_cmd, a: *mut c_void, l: u64, u: u64) -> c_int;
        s_queue_submit_at_reap => ioswitch_queue_submit_at_reap(q: *mut ioswitch_queue, c: *const ioswitch_cmd, a: *mut c_void, l: u64, u: u64, e: *mut ioswitch_event, m: u32, n: *mut u32) -> c_int;
        s_queue_term => ioswitch_queue_term(q: *mut ioswitch_queue) -> c_int;
        s_region_free => ioswitch_region_free(r: *mut ioswitch_region) -> c_int;
        s_region_new => ioswitch_region_new(b: *mut c_void, l: u64, o: *mut *mut ioswitch_region) -> c_int;
    }

    /// A file device with one queue, and a 4-slot region (not attached yet).
    struct Fixture {
        dev: *mut ioswitch_dev,
        q: *mut ioswitch_queue,
        buf: *mut c_void,
        r: *mut ioswitch_region,
        path: std::path::PathBuf,
    }

    impl Fixture {
        fn new(name: &str, opts: &str) -> Fixture {
            let path = std::env::temp_dir().join(format!("ioswitch-capi-lean-{name}-{}.img", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let uri = CString::new(path.to_str().unwrap()).unwrap();
            let opts = CString::new(format!("create=1,size=1MiB,{opts}")).unwrap();
            let (mut dev, mut q, mut r) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
            assert_eq!(s_dev_open(uri.as_ptr(), opts.as_ptr(), &mut dev), 0, "{}", last_string());
            assert_eq!(s_queue_init(dev, 8, &mut q), 0, "{}", last_string());
            let buf = s_buf_alloc(dev, 4 * SLOT);
            assert!(!buf.is_null());
            assert_eq!(s_region_new(buf, SLOT as u64, &mut r), 0, "{}", last_string());
            Fixture { dev, q, buf, r, path }
        }
        fn slot(&self, i: usize) -> *mut c_void {
            self.buf.cast::<u8>().wrapping_add(i * SLOT).cast()
        }
        fn attach(&self) {
            assert_eq!(s_queue_attach(self.q, self.r), 0, "{}", last_string());
        }
        /// Terminates the queue, frees a region `r` and its buffer `buf` that the test made
        /// beside the fixture's, and gives the fixture a fresh queue (its Drop terminates
        /// one).
        fn free_beside(&mut self, r: *mut ioswitch_region, buf: *mut c_void) {
            // SAFETY: q is live and idle (the caller's test has reaped everything); r and
            // buf are no longer in use once q is terminated.
            unsafe {
                assert_eq!(ioswitch_queue_term(self.q), 0);
                assert_eq!(ioswitch_region_free(r), 0, "{}", last_string());
                assert_eq!(ioswitch_buf_free(buf), 0, "{}", last_string());
            }
            assert_eq!(s_queue_init(self.dev, 8, &mut self.q), 0, "{}", last_string());
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            // SAFETY: q, r, buf and dev are live and used by this thread only.
            unsafe {
                assert_eq!(ioswitch_queue_term(self.q), 0);
                assert_eq!(ioswitch_region_free(self.r), 0, "{}", last_string());
                assert_eq!(ioswitch_buf_free(self.buf), 0, "{}", last_string());
                ioswitch_dev_close(self.dev);
            }
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn fs_cmd(write: bool, off: u64, len: u64) -> ioswitch_cmd {
        let mut c = ioswitch_cmd::default();
        // SAFETY: c is a valid out location.
        let r = unsafe {
            if write {
                ioswitch_cmd_fs_write(off, len, &mut c)
            } else {
                ioswitch_cmd_fs_read(off, len, &mut c)
            }
        };
        assert_eq!(r, 0);
        c
    }

    fn reap(q: *mut ioswitch_queue, min: u32, max: u32) -> Vec<ioswitch_event> {
        let mut evs = vec![ioswitch_event::default(); max as usize];
        let n = s_queue_reap_at(q, min, max, evs.as_mut_ptr());
        assert!(n >= min as c_int, "{n}: {}", last_string());
        evs.truncate(n as usize);
        evs
    }

    #[test]
    fn submit_at_commit_pushes_the_command_before_any_reap_and_refuses_as_submit_at() {
        // thrpool runs a command once it is committed: the write reaches the file with no
        // further call (ioswitch_queue_submit_at alone would leave it queued).
        let f = Fixture::new("push", "async=thrpool");
        f.attach();
        let src = f.slot(2).cast::<u8>();
        // SAFETY: slot 2 is idle region memory (the caller's to write).
        unsafe { std::slice::from_raw_parts_mut(src, SLOT) }.fill(0x5a);
        let r = s_queue_submit_at_commit(f.q, &fs_cmd(true, 4096, 4096), f.slot(2), 4096, 77);
        assert_eq!(r, 0, "{}", last_string());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let data = std::fs::read(&f.path).unwrap();
            if data[4096..8192].iter().all(|&b| b == 0x5a) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the committed write never reached the file");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Refused as ioswitch_queue_submit_at refuses, naming itself: the slot is busy
        // until reaped; a range across slots; no command.
        let r = s_queue_submit_at_commit(f.q, &fs_cmd(true, 0, 512), f.slot(2), 512, 78);
        assert_eq!(r, -libc::EBUSY);
        assert!(last_string().starts_with("ioswitch_queue_submit_at_commit: the slot of"), "{}", last_string());
        let mid = f.slot(0).cast::<u8>().wrapping_add(512).cast::<c_void>();
        assert_eq!(s_queue_submit_at_commit(f.q, &fs_cmd(true, 0, 4096), mid, 4096, 79), -libc::EINVAL);
        assert!(last_string().contains("cross the end of their 4096-byte slot"), "{}", last_string());
        assert_eq!(s_queue_submit_at_commit(f.q, ptr::null(), f.slot(0), 4096, 80), -libc::EINVAL);
        let evs = reap(f.q, 1, 4);
        assert_eq!(evs.len(), 1);
        assert_eq!((evs[0].user_data, evs[0].result, evs[0].status, evs[0].errnum), (77, 4096, 0, 0));
    }

    #[test]
    fn submit_at_reap_hands_back_what_completed_after_the_callers_events_and_refuses_as_submit_at() {
        let f = Fixture::new("sreap", "async=nil");
        f.attach();
        let rd = |i: u64| fs_cmd(false, i * 4096, 4096);
        let mut evs = [ioswitch_event::default(); 4];
        evs[0].user_data = 999; // the caller's, before *n: left alone
        let mut n = 1u32;
        // nil completes at once: each command comes back in its own call, after evs[n - 1].
        for i in 0..3u64 {
            let r = s_queue_submit_at_reap(f.q, &rd(i), f.slot(i as usize), 4096, 10 + i, evs.as_mut_ptr(), 4, &mut n);
            assert_eq!(r, 0, "{}", last_string());
            assert_eq!(n, 2 + i as u32);
        }
        assert_eq!(s_queue_outstanding(f.q), 0);
        let got: Vec<(u64, u64, u16, i32)> = evs.iter().map(|e| (e.user_data, e.result, e.status, e.errnum)).collect();
        assert_eq!(got[..4], [(999, 0, 0, 0), (10, 4096, 0, 0), (11, 4096, 0, 0), (12, 4096, 0, 0)]);
        // Reaped: the slots are free again. With the array full (*n == max) the command is
        // submitted and committed, not reaped: reap_at hands it over later.
        assert_eq!(s_queue_submit_at_reap(f.q, &rd(0), f.slot(0), 4096, 20, evs.as_mut_ptr(), 4, &mut n), 0);
        assert_eq!((n, s_queue_outstanding(f.q)), (4, 1));
        assert_eq!(reap(f.q, 1, 4).iter().map(|e| e.user_data).collect::<Vec<_>>(), [20]);
        // max 0 with no array: a commit only.
        let mut z = 0u32;
        assert_eq!(s_queue_submit_at_reap(f.q, &rd(1), f.slot(1), 4096, 21, ptr::null_mut(), 0, &mut z), 0);
        assert_eq!((z, s_queue_outstanding(f.q)), (0, 1));
        // Refusals, naming the function, nothing submitted and *n unchanged: the slot of
        // the command above is busy; a range across slots; no n; *n above max; no array.
        let mut m = 1u32;
        assert_eq!(s_queue_submit_at_reap(f.q, &rd(1), f.slot(1), 4096, 22, evs.as_mut_ptr(), 4, &mut m), -libc::EBUSY);
        assert!(last_string().starts_with("ioswitch_queue_submit_at_reap: the slot of"), "{}", last_string());
        let mid = f.slot(2).cast::<u8>().wrapping_add(512).cast::<c_void>();
        assert_eq!(s_queue_submit_at_reap(f.q, &rd(2), mid, 4096, 23, evs.as_mut_ptr(), 4, &mut m), -libc::EINVAL);
        assert!(last_string().contains("cross the end of their 4096-byte slot"), "{}", last_string());
        assert_eq!(
            s_queue_submit_at_reap(f.q, &rd(2), f.slot(2), 4096, 24, evs.as_mut_ptr(), 4, ptr::null_mut()),
            -libc::EINVAL
        );
        assert!(last_string().contains("n is NULL"), "{}", last_string());
        let mut over = 5u32;
        assert_eq!(
            s_queue_submit_at_reap(f.q, &rd(2), f.slot(2), 4096, 25, evs.as_mut_ptr(), 4, &mut over),
            -libc::EINVAL
        );
        assert!(last_string().contains("*n is 5, above max 4"), "{}", last_string());
        assert_eq!(s_queue_submit_at_reap(f.q, &rd(2), f.slot(2), 4096, 26, ptr::null_mut(), 4, &mut m), -libc::EINVAL);
        assert!(last_string().contains("evs is NULL with max 4"), "{}", last_string());
        assert_eq!((m, over, s_queue_outstanding(f.q)), (1, 5, 1));
        assert_eq!(reap(f.q, 1, 4).iter().map(|e| e.user_data).collect::<Vec<_>>(), [21]);
    }

    /// nil with nothing outstanding: ioswitch_queue_submit_at_reap completes the command
    /// inside the call (its one-step path). Its event lands at evs[*n], even with room for
    /// that one only; its slot is free again when the call returns, refused or not; a
    /// slot busy on another queue is refused; a command the inlined checks leave to the
    /// library's full path (no data, a flush) completes in the call all the same.
    #[test]
    fn submit_at_reap_on_nil_with_nothing_outstanding_completes_in_the_call() {
        let f = Fixture::new("sreaponce", "async=nil");
        f.attach();
        let mut q2 = ptr::null_mut();
        assert_eq!(s_queue_init(f.dev, 8, &mut q2), 0, "{}", last_string());
        assert_eq!(s_queue_attach(q2, f.r), 0, "{}", last_string());
        let mut evs = [ioswitch_event { user_data: 999, ..Default::default() }; 3];
        let mut n = 2u32;
        // Room for one event: it is evs[2], written in the call.
        let r = s_queue_submit_at_reap(f.q, &fs_cmd(true, 8192, 4096), f.slot(1), 4096, 7, evs.as_mut_ptr(), 3, &mut n);
        assert_eq!((r, n), (0, 3), "{}", last_string());
        let got: Vec<(u64, u64, u16, i32)> = evs.iter().map(|e| (e.user_data, e.result, e.status, e.errnum)).collect();
        assert_eq!(got, [(999, 0, 0, 0), (999, 0, 0, 0), (7, 4096, 0, 0)]);
        assert_eq!(s_queue_outstanding(f.q), 0);
        // Its slot is free: the other queue takes it, and holds it until reaped.
        assert_eq!(s_queue_submit_at(q2, &fs_cmd(false, 0, 4096), f.slot(1), 4096, 8), 0, "{}", last_string());
        // A slot busy on the other queue is refused, nothing submitted, *n unchanged.
        let mut evs = [ioswitch_event::default(); 4];
        let mut n = 0u32;
        let r = s_queue_submit_at_reap(f.q, &fs_cmd(false, 0, 4096), f.slot(1), 4096, 9, evs.as_mut_ptr(), 4, &mut n);
        assert_eq!((r, n, s_queue_outstanding(f.q)), (-libc::EBUSY, 0, 0));
        assert!(last_string().starts_with("ioswitch_queue_submit_at_reap: the slot of"), "{}", last_string());
        assert_eq!(reap(q2, 1, 4).iter().map(|e| e.user_data).collect::<Vec<_>>(), [8]);
        // A range past the end of the 1 MiB device is refused, and its slot is free again.
        let past = fs_cmd(false, 1 << 20, 4096);
        let r = s_queue_submit_at_reap(f.q, &past, f.slot(2), 4096, 10, evs.as_mut_ptr(), 4, &mut n);
        assert_eq!((r, n, s_queue_outstanding(f.q)), (-libc::ERANGE, 0, 0), "{}", last_string());
        assert_eq!(s_queue_submit_at(q2, &fs_cmd(false, 0, 4096), f.slot(2), 4096, 11), 0, "{}", last_string());
        assert_eq!(reap(q2, 1, 4).iter().map(|e| e.user_data).collect::<Vec<_>>(), [11]);
        // No data (a flush): not the inlined read or write, completed in the call all the same.
        let mut flush = ioswitch_cmd::default();
        assert_eq!(s_cmd_fs_flush(&mut flush), 0);
        let r = s_queue_submit_at_reap(f.q, &flush, ptr::null_mut(), 0, 12, evs.as_mut_ptr(), 4, &mut n);
        assert_eq!((r, n, s_queue_outstanding(f.q)), (0, 1, 0), "{}", last_string());
        assert_eq!((evs[0].user_data, evs[0].status, evs[0].errnum), (12, 0, 0));
        // And a read after it, on the slot the other queue used.
        let r = s_queue_submit_at_reap(f.q, &fs_cmd(false, 4096, 512), f.slot(2), 512, 13, evs.as_mut_ptr(), 4, &mut n);
        assert_eq!((r, n), (0, 2), "{}", last_string());
        assert_eq!((evs[1].user_data, evs[1].result), (13, 512));
        // SAFETY: q2 is live, idle and used by this thread only.
        assert_eq!(unsafe { ioswitch_queue_term(q2) }, 0);
    }

    #[test]
    fn submit_at_reap_leaves_completions_kept_by_an_earlier_reap_first_in_line() {
        let f = Fixture::new("sreapkept", "async=nil");
        f.attach();
        for i in 0..3u64 {
            assert_eq!(s_queue_submit_at(f.q, &fs_cmd(false, 0, 4096), f.slot(i as usize), 4096, i), 0);
        }
        // One handed over, two kept beyond max.
        assert_eq!(reap(f.q, 1, 1).len(), 1);
        let mut evs = [ioswitch_event::default(); 4];
        let mut n = 0u32;
        let r = s_queue_submit_at_reap(f.q, &fs_cmd(false, 0, 4096), f.slot(3), 4096, 3, evs.as_mut_ptr(), 4, &mut n);
        assert_eq!((r, n), (0, 0), "{}", last_string());
        let mut ud: Vec<u64> = reap(f.q, 3, 4).iter().map(|e| e.user_data).collect();
        assert_eq!(ud[..2], [1, 2], "the kept ones come first");
        ud.sort_unstable();
        assert_eq!(ud, [1, 2, 3]);
    }

    #[test]
    fn a_slot_of_a_second_region_is_free_again_once_its_completion_is_reaped() {
        let mut f = Fixture::new("second", "async=nil");
        f.attach();
        let buf2 = s_buf_alloc(f.dev, 2 * SLOT);
        let mut r2 = ptr::null_mut();
        assert_eq!(s_region_new(buf2, SLOT as u64, &mut r2), 0, "{}", last_string());
        assert_eq!(s_queue_attach(f.q, r2), 0, "{}", last_string());
        let cmd = fs_cmd(false, 0, 4096);
        let in2 = buf2.cast::<u8>().wrapping_add(SLOT).cast::<c_void>();
        let mut evs = [ioswitch_event::default(); 2];
        for round in 0..3u64 {
            // Through each reaping function: the slot is busy until reaped, free after.
            let mut n = 0u32;
            assert_eq!(s_queue_submit_at_reap(f.q, &cmd, in2, 4096, round, evs.as_mut_ptr(), 2, &mut n), 0);
            assert_eq!((n, evs[0].user_data), (1, round), "{}", last_string());
            assert_eq!(s_queue_submit_at(f.q, &cmd, in2, 4096, 10 + round), 0, "{}", last_string());
            assert_eq!(s_queue_submit_at(f.q, &cmd, in2, 4096, 20), -libc::EBUSY);
            assert_eq!(reap(f.q, 1, 2).iter().map(|e| e.user_data).collect::<Vec<_>>(), [10 + round]);
        }
        f.free_beside(r2, buf2);
    }

    #[test]
    fn data_written_from_one_slot_reads_back_into_another_with_the_64_bit_user_data() {
        for iface in ["thrpool", "emu", "io_uring"] {
            let f = Fixture::new(&format!("rw-{iface}"), &format!("async={iface}"));
            f.attach();
            let src = f.slot(1).cast::<u8>();
            // SAFETY: slot 1 is idle region memory (the caller's to write).
            let bytes = unsafe { std::slice::from_raw_parts_mut(src, SLOT) };
            bytes.iter_mut().enumerate().for_each(|(i, b)| *b = (i * 7 + 3) as u8);
            let ud_w = 0xfeed_0000_0000_0001_u64;
            let r = s_queue_submit_at(f.q, &fs_cmd(true, 8192, 4096), f.slot(1), 4096, ud_w);
            assert_eq!(r, 0, "{iface}: {}", last_string());
            let evs = reap(f.q, 1, 4);
            assert_eq!(evs.len(), 1);
            assert_eq!((evs[0].user_data, evs[0].result, evs[0].status, evs[0].errnum), (ud_w, 4096, 0, 0), "{iface}");
            // Read the first 512 of those bytes back into slot 2's second half (an
            // address inside the slot, not its start).
            let half = f.slot(2).cast::<u8>().wrapping_add(2048).cast::<c_void>();
            let r = s_queue_submit_at(f.q, &fs_cmd(false, 8192, 512), half, 512, u64::MAX);
            assert_eq!(r, 0, "{iface}: {}", last_string());
            let evs = reap(f.q, 1, 1);
            assert_eq!((evs[0].user_data, evs[0].result), (u64::MAX, 512), "{iface}");
            // SAFETY: both slots are idle again, the caller's to read.
            let (a, b) =
                unsafe { (std::slice::from_raw_parts(src, 512), std::slice::from_raw_parts(half.cast::<u8>(), 512)) };
            assert_eq!(a, b, "{iface}");
        }
    }

    #[test]
    fn slots_of_a_length_not_a_power_of_two_are_found_by_division() {
        // The fixture's 4096-byte slots take the shift; 1536-byte slots (4 * 4096 / 1536:
        // 10 whole slots) take the division. fs commands on a nil queue need no alignment.
        let mut f = Fixture::new("odd", "async=nil");
        const ODD: usize = 1536;
        let mut r = ptr::null_mut();
        // The fixture's region holds the buffer: a second region over it is refused, so
        // make one over a buffer of its own.
        let buf = s_buf_alloc(f.dev, 4 * SLOT);
        assert!(!buf.is_null());
        assert_eq!(s_region_new(buf, ODD as u64, &mut r), 0, "{}", last_string());
        assert_eq!(s_queue_attach(f.q, r), 0, "{}", last_string());
        let at = |i: usize, off: usize| buf.cast::<u8>().wrapping_add(i * ODD + off).cast::<c_void>();
        let cmd = |len: u64| fs_cmd(false, 0, len);
        // Slot 3 at an inner address, to its end: taken; a second command in slot 3 is
        // refused, one in slot 4 (its first byte just past slot 3) is taken.
        assert_eq!(s_queue_submit_at(f.q, &cmd(1036), at(3, 500), 1036, 3), 0, "{}", last_string());
        assert_eq!(s_queue_submit_at(f.q, &cmd(1), at(3, ODD - 1), 1, 33), -libc::EBUSY);
        assert_eq!(s_queue_submit_at(f.q, &cmd(ODD as u64), at(4, 0), ODD as u64, 4), 0, "{}", last_string());
        // One byte across the end of slot 5; past the last whole slot (the tail of 16384
        // - 10 * 1536 bytes is no slot).
        assert_eq!(s_queue_submit_at(f.q, &cmd(1037), at(5, 500), 1037, 5), -libc::EINVAL);
        assert!(last_string().contains("cross the end of their 1536-byte slot"), "{}", last_string());
        assert_eq!(s_queue_submit_at(f.q, &cmd(1), at(10, 0), 1, 10), -libc::EINVAL);
        let mut ud: Vec<u64> = reap(f.q, 2, 4).iter().map(|e| e.user_data).collect();
        ud.sort_unstable();
        assert_eq!(ud, [3, 4]);
        // Reaped: slot 3 is free again.
        assert_eq!(s_queue_submit_at(f.q, &cmd(1), at(3, ODD - 1), 1, 33), 0, "{}", last_string());
        assert_eq!(reap(f.q, 1, 1)[0].user_data, 33);
        f.free_beside(r, buf);
    }

    #[test]
    fn a_slot_in_flight_a_range_outside_or_across_slots_and_a_classic_call_are_refused() {
        let f = Fixture::new("refuse", "async=nil");
        let cmd = fs_cmd(true, 0, 4096);
        // No region attached: the lean functions refuse the queue.
        assert_eq!(s_queue_submit_at(f.q, &cmd, f.slot(0), 4096, 1), -libc::EINVAL);
        assert!(last_string().contains("no region attached"), "{}", last_string());
        let mut ev = [ioswitch_event::default(); 1];
        assert_eq!(s_queue_reap_at(f.q, 0, 1, ev.as_mut_ptr()), -libc::EINVAL);
        f.attach();
        // Attached twice.
        assert_eq!(s_queue_attach(f.q, f.r), -libc::EINVAL);
        // A buffer of its own, not in the region.
        let other = s_buf_alloc(f.dev, 4096);
        assert_eq!(s_queue_submit_at(f.q, &cmd, other, 4096, 1), -libc::EINVAL);
        assert!(last_string().contains("not inside a region attached to this queue"), "{}", last_string());
        // Past the region's end, and across the end of slot 0.
        assert_eq!(s_queue_submit_at(f.q, &cmd, f.slot(4), 4096, 1), -libc::EINVAL);
        let mid = f.buf.cast::<u8>().wrapping_add(512).cast::<c_void>();
        assert_eq!(s_queue_submit_at(f.q, &cmd, mid, 4096, 1), -libc::EINVAL);
        assert!(last_string().contains("cross the end of their 4096-byte slot"), "{}", last_string());
        // Address and length disagree about having data.
        assert_eq!(s_queue_submit_at(f.q, &cmd, ptr::null_mut(), 4096, 1), -libc::EINVAL);
        // A slot in flight: taken once, refused again (also at another address in it).
        assert_eq!(s_queue_submit_at(f.q, &cmd, f.slot(0), 4096, 1), 0, "{}", last_string());
        assert_eq!(s_queue_submit_at(f.q, &cmd, mid, 512, 2), -libc::EBUSY);
        assert!(last_string().contains("already belongs to a command"), "{}", last_string());
        // The classic functions refuse a queue with a region.
        let p = other;
        assert_eq!(s_queue_submit(f.q, &cmd, &p, 1, ptr::null_mut()), -libc::EINVAL);
        assert!(last_string().contains("has a region attached"), "{}", last_string());
        let mut cpl = [ioswitch_cpl::new(ptr::null_mut(), Status::OK, 0); 1];
        assert_eq!(s_queue_reap(f.q, 0, 1, cpl.as_mut_ptr()), -libc::EINVAL);
        assert_eq!(s_queue_poke(f.q, 0), -libc::EINVAL);
        // The region's buffer cannot be freed, nor the region while attached.
        assert_eq!(s_buf_free(f.buf), -libc::EBUSY);
        assert_eq!(s_region_free(f.r), -libc::EBUSY);
        assert!(last_string().contains("attached to 1 queue"), "{}", last_string());
        // An array too small for what must be waited for; no array; max 0.
        assert_eq!(s_queue_reap_at(f.q, 2, 1, ev.as_mut_ptr()), -libc::EINVAL);
        assert!(last_string().contains("min 2 and max 1"), "{}", last_string());
        assert_eq!(s_queue_reap_at(f.q, 0, 1, ptr::null_mut()), -libc::EINVAL);
        assert_eq!(s_queue_reap_at(f.q, 0, 0, ev.as_mut_ptr()), -libc::EINVAL);
        // The command is still there, and its slot is free once it is reaped.
        let evs = reap(f.q, 1, 1);
        assert_eq!(evs[0].user_data, 1);
        assert_eq!(s_queue_submit_at(f.q, &fs_cmd(true, 0, 512), mid, 512, 3), 0, "{}", last_string());
        assert_eq!(reap(f.q, 1, 1)[0].user_data, 3);
        assert_eq!(s_buf_free(other), 0);
    }

    #[test]
    fn a_region_of_another_queue_is_foreign_and_attach_waits_for_classic_commands() {
        let f = Fixture::new("foreign", "async=nil");
        let mut q2 = ptr::null_mut();
        assert_eq!(s_queue_init(f.dev, 4, &mut q2), 0);
        // q2 has a classic command outstanding: attaching waits for it to be reaped.
        let own = s_buf_alloc(f.dev, 4096);
        let cmd = fs_cmd(false, 0, 4096);
        assert_eq!(s_queue_submit(q2, &cmd, &own, 1, ptr::null_mut()), 0);
        let mut r2 = ptr::null_mut();
        let buf2 = s_buf_alloc(f.dev, 2 * SLOT);
        assert_eq!(s_region_new(buf2, SLOT as u64, &mut r2), 0);
        assert_eq!(s_queue_attach(q2, r2), -libc::EBUSY);
        assert_eq!(s_queue_poke(q2, 0), 1);
        assert_eq!(s_queue_attach(q2, r2), 0, "{}", last_string());
        // f.r belongs to f.q only: q2 refuses its memory.
        f.attach();
        assert_eq!(s_queue_submit_at(q2, &cmd, f.slot(0), 4096, 9), -libc::EINVAL);
        assert!(last_string().contains("not inside a region attached to this queue"), "{}", last_string());
        assert_eq!(s_queue_submit_at(q2, &cmd, buf2, 4096, 9), 0);
        // Terminating q2 waits for its command and detaches r2: then it can be freed.
        assert_eq!(s_region_free(r2), -libc::EBUSY);
        assert_eq!(s_queue_term(q2), 0);
        assert_eq!(s_region_free(r2), 0, "{}", last_string());
        assert_eq!(s_buf_free(buf2), 0);
        assert_eq!(s_buf_free(own), 0);
    }

    #[test]
    fn completions_beyond_max_are_kept_and_counted_and_commands_without_data_take_none() {
        let f = Fixture::new("kept", "async=nil");
        f.attach();
        let mut flush = ioswitch_cmd::default();
        assert_eq!(s_cmd_fs_flush(&mut flush), 0);
        for i in 0..4u64 {
            assert_eq!(s_queue_submit_at(f.q, &fs_cmd(false, 0, 4096), f.slot(i as usize), 4096, i), 0);
        }
        assert_eq!(s_queue_submit_at(f.q, &flush, ptr::null_mut(), 0, 100), 0, "{}", last_string());
        // Waiting for 1 reaps all 5 from nil: 2 handed over, 3 kept and still counted.
        let first = reap(f.q, 1, 2);
        assert_eq!(first.len(), 2);
        assert_eq!(s_queue_outstanding(f.q), 3);
        let rest = reap(f.q, 3, 8);
        assert_eq!(rest.len(), 3);
        let mut ud: Vec<u64> = first.iter().chain(&rest).map(|e| e.user_data).collect();
        ud.sort_unstable();
        assert_eq!(ud, [0, 1, 2, 3, 100]);
        assert_eq!(s_queue_outstanding(f.q), 0);
        // Every slot is free again.
        for i in 0..4 {
            assert_eq!(s_queue_submit_at(f.q, &fs_cmd(false, 0, 4096), f.slot(i), 4096, 7), 0);
        }
        assert_eq!(reap(f.q, 4, 4).len(), 4);
    }

    #[test]
    fn a_region_refuses_a_bad_buffer_or_slot_length() {
        let mut r = ptr::null_mut();
        let b = s_buf_alloc(ptr::null(), 8192);
        assert_eq!(s_region_new(b, 0, &mut r), -libc::EINVAL);
        assert_eq!(s_region_new(b, 8193, &mut r), -libc::EINVAL);
        assert!(last_string().contains("use 1..=8192"), "{}", last_string());
        let inside = b.cast::<u8>().wrapping_add(16).cast::<c_void>();
        assert_eq!(s_region_new(inside, 16, &mut r), -libc::EINVAL);
        assert!(r.is_null());
        // One region per buffer.
        assert_eq!(s_region_new(b, 4096, &mut r), 0);
        let mut r2 = ptr::null_mut();
        assert_eq!(s_region_new(b, 4096, &mut r2), -libc::EBUSY);
        assert_eq!(s_region_free(r), 0);
        assert_eq!(s_region_free(ptr::null_mut()), 0);
        assert_eq!(s_buf_free(b), 0);
    }
}
