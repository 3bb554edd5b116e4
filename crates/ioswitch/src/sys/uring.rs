//! The raw side of the io_uring ring core (`be/uring`): a ring and the memory its SQEs
//! point to, owned together, so that no safe call can hand the kernel a pointer that
//! outlives what it points to.
//!
//! A [`Uring`] owns one io_uring (the io-uring crate's `IoUring`, of 64- or 128-byte
//! SQEs) and a slot table of `depth` slots, allocated at creation. Per slot it keeps what
//! an SQE may point to: the command's [`Data`] and, in a box whose address never changes,
//! an iovec array and a 16-byte DSM range; beside them, in the same slot, the caller's own
//! state `M` (tag, interface state), which it reads and writes freely.
//!
//! - **Slot ids.** [`Uring::take_slot`] hands out a [`SlotId`], which cannot be copied or
//!   made outside this module: while the caller holds it, the slot is its own and not in
//!   the ring. Every push takes the id by value and builds the SQE here, from the slot's
//!   memory only (buffers of the slot's data, at most as long as they are; its iovec array;
//!   its range), with the slot index as `user_data`; a push that does not fit hands the id
//!   back. The data comes out only through [`Uring::release`], which takes the id. An id
//!   is not tied to its ring by type, so the pushes and `release` check that the slot is
//!   not in the ring (and index the table with a bounds check): an id of another ring
//!   panics there instead of touching memory under the kernel.
//! - **Completions.** A pushed slot is marked *in the ring*. [`Uring::take_cqes`] takes
//!   CQEs; one naming a slot in the ring ends that slot's SQE (each SQE these pushes build
//!   gives exactly one CQE), clears the mark and hands the slot back as a [`Reaped`], which
//!   releases it or gives its id back (to push it again). A CQE naming no slot in the ring
//!   is consumed and ignored.
//! - **Drop.** A `Uring` dropped with SQEs whose CQEs were not taken leaks its slot table,
//!   with the data of every slot, rather than free memory the kernel may still write.
//!   (The ring core waits for what is in flight before it drops its `Uring`.)
//!
//! Also here: `io_uring_enter(2)` made directly (not through the crate's `Submitter`,
//! which builds a view of the ring's registers per call), and the registration of one
//! buffer in a ring's sparse table (`IORING_REGISTER_BUFFERS_UPDATE`).

use crate::be::MAX_SEGMENTS;
use crate::buf::{fill_iovecs, Buffer, Data};
use crate::sys::nvme::{NVME_URING_CMD_IO, NVME_URING_CMD_IO_VEC};
use ::io_uring::{cqueue, opcode, squeue, types, IoUring, Submitter};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// `IORING_ENTER_GETEVENTS`: wait for (or, with IOPOLL, poll for) completions.
pub(crate) const ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_SQ_WAKEUP`: wake a sleeping SQPOLL thread.
pub(crate) const ENTER_SQ_WAKEUP: u32 = 2;

/// End of the free list.
const NO_SLOT: u32 = u32::MAX;
/// `Slot::next_free` of a slot whose SQE is in the ring (not a slot index: the table
/// has fewer than `u32::MAX - 1` slots).
const IN_RING: u32 = u32::MAX - 1;

/// A submission entry type of the io-uring crate: 64 bytes (`squeue::Entry`) or 128
/// (`squeue::Entry128`).
pub(crate) trait Sqe: squeue::EntryMarker + Send {
    /// How a ring of these entries is described in errors ("" for the plain ring).
    const RING: &'static str;
    /// The entry with its `user_data` set.
    fn with_user_data(self, user_data: u64) -> Self;
}

impl Sqe for squeue::Entry {
    const RING: &'static str = "";
    #[inline(always)]
    fn with_user_data(self, user_data: u64) -> Self {
        self.user_data(user_data)
    }
}

impl Sqe for squeue::Entry128 {
    const RING: &'static str = " with 128-byte SQEs";
    #[inline(always)]
    fn with_user_data(self, user_data: u64) -> Self {
        self.user_data(user_data)
    }
}

/// A completion entry type of the io-uring crate: 16 bytes (`cqueue::Entry`) or 32
/// (`cqueue::Entry32`).
pub(crate) trait Cqe: cqueue::EntryMarker {
    /// The `user_data` of the SQE it completes: a slot index.
    fn user_data(&self) -> u64;
}

impl Cqe for cqueue::Entry {
    #[inline(always)]
    fn user_data(&self) -> u64 {
        cqueue::Entry::user_data(self)
    }
}

impl Cqe for cqueue::Entry32 {
    #[inline(always)]
    fn user_data(&self) -> u64 {
        cqueue::Entry32::user_data(self)
    }
}

/// The file an SQE names: a descriptor, or an entry of the ring's registered files.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    Fd(RawFd),
    Fixed(u32),
}

/// Builds an SQE with `$op`'s constructor on `$t` (a [`Target`]).
macro_rules! on {
    ($t:expr, |$f:ident| $body:expr) => {
        match $t {
            Target::Fd(fd) => {
                let $f = types::Fd(fd);
                $body
            }
            Target::Fixed(i) => {
                let $f = types::Fixed(i);
                $body
            }
        }
    };
}

/// What an SQE of a slot may point to besides its data's buffers; boxed, so its address
/// stays put for as long as the table lives.
struct SlotMem {
    iov: [libc::iovec; MAX_SEGMENTS],
    /// The DSM range of an NVMe passthrough command.
    range: [u8; 16],
}

// SAFETY: the iovecs only ever point into buffers owned by the same slot's `Data`, which
// is Send; nothing here is tied to a thread.
unsafe impl Send for SlotMem {}

/// One slot of the table.
struct Slot<M> {
    /// The command's data: set by `put` or a push, taken by `release`; `Data::None` in a
    /// free slot.
    data: Data,
    /// While free: the next free slot (NO_SLOT: none). In the ring: IN_RING. Taken (its
    /// `SlotId` held by the caller): anything else.
    next_free: u32,
    mem: Box<SlotMem>,
    meta: M,
}

/// A slot taken from the free list and not in the ring. Only this module makes one; it
/// cannot be copied, so for each slot there is at most one.
#[derive(Debug)]
pub(crate) struct SlotId(u32);

impl SlotId {
    /// The slot's index.
    #[inline(always)]
    #[cfg(test)]
    pub(crate) fn index(&self) -> u32 {
        self.0
    }
}

/// How the data of an NVMe passthrough command travels (see [`Uring::push_uring_cmd`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload {
    /// No data.
    None,
    /// One DSM range, kept in the slot.
    Range([u8; 16]),
    /// The first `len` bytes of the slot's buffers.
    Bufs(u64),
}

/// A ring and the slots of its commands (see the module's text).
pub(crate) struct Uring<S: Sqe, C: Cqe, M> {
    ring: IoUring<S, C>,
    ring_fd: RawFd,
    slots: Box<[Slot<M>]>,
    /// First free slot (NO_SLOT: none); the list runs through `Slot::next_free`.
    free_head: u32,
    /// Slots in the ring: pushed, their CQE not taken yet.
    inflight: u32,
}

impl<S: Sqe, C: Cqe, M> Uring<S, C, M> {
    /// Takes `ring` (set up, nothing pushed yet) with `depth` slots, each with the
    /// caller's state `meta()`.
    pub(crate) fn new(ring: IoUring<S, C>, depth: u32, mut meta: impl FnMut() -> M) -> Uring<S, C, M> {
        let depth = depth.min(IN_RING - 1);
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let slots = (0..depth)
            .map(|i| Slot {
                data: Data::None,
                next_free: if i + 1 < depth { i + 1 } else { NO_SLOT },
                mem: Box::new(SlotMem { iov: [empty; MAX_SEGMENTS], range: [0; 16] }),
                meta: meta(),
            })
            .collect();
        Uring { ring_fd: ring.as_raw_fd(), ring, slots, free_head: if depth > 0 { 0 } else { NO_SLOT }, inflight: 0 }
    }

    /// The ring's submitter, for registrations.
    pub(crate) fn submitter(&self) -> Submitter<'_> {
        self.ring.submitter()
    }

    /// Whether a slot is free.
    #[inline(always)]
    pub(crate) fn has_free_slot(&self) -> bool {
        self.free_head != NO_SLOT
    }

    /// Takes a free slot off the list.
    #[inline(always)]
    pub(crate) fn take_slot(&mut self) -> Option<SlotId> {
        let idx = self.free_head;
        let slot = self.slots.get(idx as usize)?;
        self.free_head = slot.next_free;
        Some(SlotId(idx))
    }

    /// The slot of `id` (bounds-checked: an id of another ring may be past this table).
    #[inline(always)]
    fn slot(&mut self, id: &SlotId) -> &mut Slot<M> {
        &mut self.slots[id.0 as usize]
    }

    /// The slot of `id`, which must not be in the ring. It is not, unless `id` came from
    /// another ring (an id of this one exists only while its slot is out of the ring); then
    /// this panics rather than let its memory be touched under the kernel.
    #[inline(always)]
    fn slot_out_of_ring(&mut self, id: &SlotId) -> &mut Slot<M> {
        let slot = &mut self.slots[id.0 as usize];
        if slot.next_free == IN_RING {
            in_ring(id.0);
        }
        slot
    }

    /// The caller's state in slot `id`.
    #[inline(always)]
    pub(crate) fn meta_mut(&mut self, id: &SlotId) -> &mut M {
        &mut self.slot(id).meta
    }

    /// The caller's state in slot `idx` (free, taken or in the ring), if there is one.
    #[cfg(test)]
    pub(crate) fn meta_at(&self, idx: u32) -> Option<&M> {
        self.slots.get(idx as usize).map(|s| &s.meta)
    }

    /// The data in slot `id`.
    #[cfg(test)]
    pub(crate) fn data(&mut self, id: &SlotId) -> &Data {
        &self.slot(id).data
    }

    /// Puts `data` in slot `id` (the slot holds none: it was released, or never had any).
    #[inline(always)]
    pub(crate) fn put(&mut self, id: &SlotId, data: Data) {
        // A slot that was released holds Data::None: nothing to drop. (Were it another
        // ring's id naming a slot in this ring, what it replaces would leak, not be freed.)
        std::mem::forget(std::mem::replace(&mut self.slot(id).data, data));
    }

    /// Puts slot `id` back on the free list and returns its data.
    #[inline(always)]
    pub(crate) fn release(&mut self, id: SlotId) -> Data {
        let free_head = self.free_head;
        let slot = self.slot_out_of_ring(&id);
        slot.next_free = free_head;
        let data = std::mem::take(&mut slot.data);
        self.free_head = id.0;
        data
    }

    /// Slots in the ring (pushed, their CQE not taken).
    #[inline(always)]
    pub(crate) fn inflight(&self) -> u32 {
        self.inflight
    }

    /// Writes `entry`, built from the memory of slot `id`, to the SQ; hands the id back
    /// when the SQ is full.
    #[inline(always)]
    fn push(&mut self, id: SlotId, entry: S) -> Result<(), SlotId> {
        self.push_with(id, None, entry)
    }

    /// [`Self::push`], moving `data` (when given) into the slot first.
    #[inline(always)]
    fn push_with(&mut self, id: SlotId, data: Option<Data>, entry: S) -> Result<(), SlotId> {
        let slot = &mut self.slots[id.0 as usize];
        if slot.next_free == IN_RING {
            in_ring(id.0);
        }
        if let Some(data) = data {
            // A slot out of the ring that was released holds Data::None: nothing to drop.
            std::mem::forget(std::mem::replace(&mut slot.data, data));
        }
        let entry = entry.with_user_data(id.0 as u64);
        // SAFETY: every entry pushed is built in this module from the memory of slot `id`
        // (its data's buffers, no longer than they are; its boxed iovec array and range)
        // or points to no memory, and the slot is not in the ring (checked above), so
        // nothing else points to it. That memory stays where it is and untouched until the
        // CQE of that slot is taken: the slot is marked IN_RING below, which `release` and
        // the pushes (the only writers of a slot's memory; `put` only leaks the data it
        // replaces) check, and the caller has no SlotId for it until `take_cqes` hands it
        // out; the table never moves, and the drop leaks it while a slot is in the ring.
        // The entry carries no flags: one CQE per SQE.
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            return Err(id);
        }
        slot.next_free = IN_RING;
        self.inflight += 1;
        Ok(())
    }

    /// One `io_uring_enter` on the ring: submit `to_submit` SQEs, wait for `want`
    /// completions when `flags` has [`ENTER_GETEVENTS`]; returns how many SQEs it took, or
    /// the errno it failed with (an `i32`, not an `io::Error`: the result comes back in a
    /// register, and the callers that report it make the `io::Error` from it).
    #[inline]
    pub(crate) fn enter(&self, to_submit: u32, want: u32, flags: u32) -> Result<u32, i32> {
        // SAFETY: no argument pointer is passed (NULL, size 0), as GETEVENTS and
        // SQ_WAKEUP allow; the descriptor is this ring's. The kernel reads the SQEs of the
        // ring, each pushed by `push` from its slot's memory, which stays put until the
        // slot's CQE is taken.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                self.ring_fd as libc::c_long,
                to_submit as libc::c_long,
                want as libc::c_long,
                flags as libc::c_long,
                std::ptr::null::<libc::sigset_t>(),
                0 as libc::c_long,
            )
        };
        if r < 0 {
            Err(super::errno())
        } else {
            Ok(r as u32)
        }
    }

    /// SQEs written and not yet consumed by the kernel.
    pub(crate) fn sq_len(&mut self) -> u32 {
        self.ring.submission().len() as u32
    }

    /// Whether the SQPOLL thread sleeps and needs a wake-up (`IORING_SQ_NEED_WAKEUP`).
    pub(crate) fn sq_need_wakeup(&mut self) -> bool {
        self.ring.submission().need_wakeup()
    }

    /// Whether the kernel has completions of punted work to post (COOP_TASKRUN's
    /// `IORING_SQ_TASKRUN`).
    #[inline]
    pub(crate) fn taskrun(&mut self) -> bool {
        self.ring.submission().taskrun()
    }

    /// CQEs in the CQ ring, not taken yet.
    #[inline]
    pub(crate) fn cq_len(&mut self) -> usize {
        self.ring.completion().len()
    }

    /// Takes CQEs from the CQ ring, without a syscall, and hands each one that ends a
    /// slot's SQE to `f` with that slot (now out of the ring), until `f` returns false or
    /// the ring is empty; CQEs naming no slot in the ring are consumed and passed over.
    ///
    /// One view of the CQ serves the whole batch; dropping it publishes the new head, also
    /// when `f` panics, so each CQE is consumed once: those handed out so far are gone
    /// (their slots already out of the ring), the rest stay in the ring.
    #[inline(always)]
    pub(crate) fn take_cqes(&mut self, mut f: impl FnMut(Reaped<'_, M>, &C) -> bool) {
        let mut cq = self.ring.completion();
        for cqe in &mut cq {
            let user_data = Cqe::user_data(&cqe);
            let Some(slot) = usize::try_from(user_data).ok().and_then(|i| self.slots.get_mut(i)) else {
                continue;
            };
            if slot.next_free != IN_RING {
                continue;
            }
            self.inflight -= 1;
            if !f(Reaped { idx: user_data as u32, slot, free_head: &mut self.free_head }, &cqe) {
                break;
            }
        }
    }
}

/// A slot id of another ring named a slot of this one that is in the ring.
#[cold]
#[inline(never)]
fn in_ring(idx: u32) -> ! {
    panic!("io_uring slot {idx} named while its SQE is in the ring (a slot id of another ring?)")
}

/// A slot whose CQE was just taken: out of the ring, its SQE done.
pub(crate) struct Reaped<'a, M> {
    idx: u32,
    slot: &'a mut Slot<M>,
    free_head: &'a mut u32,
}

impl<M> Reaped<'_, M> {
    /// The caller's state in the slot.
    #[inline(always)]
    pub(crate) fn meta(&mut self) -> &mut M {
        &mut self.slot.meta
    }

    /// Puts the slot back on the free list and returns its data.
    #[inline(always)]
    pub(crate) fn release(self) -> Data {
        self.slot.next_free = *self.free_head;
        *self.free_head = self.idx;
        std::mem::take(&mut self.slot.data)
    }

    /// Keeps the slot, with its data, for the caller (to push it again).
    #[inline]
    pub(crate) fn keep(self) -> SlotId {
        // Neither free nor in the ring.
        self.slot.next_free = NO_SLOT;
        SlotId(self.idx)
    }
}

impl<C: Cqe, M> Uring<squeue::Entry, C, M> {
    /// Takes a free slot and pushes a read (`write`: a write, with `rw_flags`) of `len`
    /// bytes at `offset` into the one buffer of `data`, which moves into the slot; `len` is
    /// cut to the buffer's length, and `meta` sets the caller's state of the slot. Hands
    /// `data` back, pushing nothing, when no slot is free, the SQ is full, or `data` is
    /// not one buffer (the caller sends those through [`Self::push_rw`]).
    ///
    /// One index of the table, and no in-the-ring check: a slot on the free list is never
    /// in the ring (slots go on the list only through `release`, which checks, or with
    /// their CQE).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_one(
        &mut self,
        data: Data,
        write: bool,
        fd: RawFd,
        offset: u64,
        len: u32,
        rw_flags: i32,
        meta: impl FnOnce(&mut M),
    ) -> Result<(), Data> {
        let Data::One(b) = &data else { return Err(data) };
        let (ptr, len) = (b.as_ptr().cast_mut(), (len as usize).min(b.len()) as u32);
        let idx = self.free_head;
        let Some(slot) = self.slots.get_mut(idx as usize) else { return Err(data) };
        let t = types::Fd(fd);
        let entry = if write {
            opcode::Write::new(t, ptr, len).offset(offset).rw_flags(rw_flags).build()
        } else {
            opcode::Read::new(t, ptr, len).offset(offset).build()
        }
        .user_data(idx as u64);
        // A slot on the free list holds Data::None: nothing to drop.
        std::mem::forget(std::mem::replace(&mut slot.data, data));
        // SAFETY: the entry points into the one buffer of the data now owned by slot
        // `idx`, no further than its length; the slot is free, so not in the ring and
        // nothing else points into it. It stays untouched until its CQE is taken, as in
        // `push_with` (the slot is marked IN_RING below).
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            return Err(std::mem::take(&mut slot.data));
        }
        self.free_head = slot.next_free;
        slot.next_free = IN_RING;
        meta(&mut slot.meta);
        self.inflight += 1;
        Ok(())
    }

    /// Pushes a read (`write`: a write, with `rw_flags`) of the first `len` bytes of the
    /// data in slot `id` at `offset`: one `READ`/`WRITE` when one buffer covers them (the
    /// `_FIXED` form with registered buffer `fixed`, when given; see [`one_segment`]),
    /// else `READV`/`WRITEV` over the slot's iovec array. Returns whether it used `fixed`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_rw(
        &mut self,
        id: SlotId,
        write: bool,
        t: Target,
        offset: u64,
        len: u64,
        rw_flags: i32,
        fixed: Option<u16>,
        ioprio: u16,
    ) -> Result<bool, SlotId> {
        let slot = self.slot_out_of_ring(&id);
        let n = match &slot.data {
            Data::One(b) => {
                slot.mem.iov[0] = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
                if (len as usize) < b.len() {
                    slot.mem.iov[0].iov_len = len as usize;
                }
                1
            }
            d => fill_iovecs(d.bufs(), len, &mut slot.mem.iov),
        };
        let entry = if n == 1 {
            let (ptr, len) =
                (slot.mem.iov[0].iov_base.cast::<u8>(), slot.mem.iov[0].iov_len.min(u32::MAX as usize) as u32);
            match (write, fixed) {
                (false, Some(e)) => {
                    on!(t, |f| opcode::ReadFixed::new(f, ptr, len, e).offset(offset).ioprio(ioprio).build())
                }
                (true, Some(e)) => {
                    on!(t, |f| opcode::WriteFixed::new(f, ptr, len, e)
                        .offset(offset)
                        .rw_flags(rw_flags)
                        .ioprio(ioprio)
                        .build())
                }
                (false, None) => on!(t, |f| opcode::Read::new(f, ptr, len).offset(offset).ioprio(ioprio).build()),
                (true, None) => {
                    on!(t, |f| opcode::Write::new(f, ptr, len).offset(offset).rw_flags(rw_flags).ioprio(ioprio).build())
                }
            }
        } else {
            let (iov, n) = (slot.mem.iov.as_ptr(), n as u32);
            if write {
                on!(t, |f| opcode::Writev::new(f, iov, n).offset(offset).rw_flags(rw_flags).ioprio(ioprio).build())
            } else {
                on!(t, |f| opcode::Readv::new(f, iov, n).offset(offset).ioprio(ioprio).build())
            }
        };
        self.push(id, entry).map(|()| n == 1 && fixed.is_some())
    }

    /// Pushes an fdatasync (`IORING_FSYNC_DATASYNC`).
    pub(crate) fn push_fdatasync(&mut self, id: SlotId, t: Target) -> Result<(), SlotId> {
        let entry = on!(t, |f| opcode::Fsync::new(f).flags(types::FsyncFlags::DATASYNC).build());
        self.push(id, entry)
    }

    /// Pushes an fallocate of `len` bytes at `offset` with `mode`.
    pub(crate) fn push_fallocate(
        &mut self,
        id: SlotId,
        t: Target,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> Result<(), SlotId> {
        let entry = on!(t, |f| opcode::Fallocate::new(f, len).offset(offset).mode(mode).build());
        self.push(id, entry)
    }
}

/// Whether [`Uring::push_rw`] moves the first `len` bytes of `data` with one
/// `READ`/`WRITE` (and so uses a registered buffer, if given one): one buffer, or a
/// first buffer that covers them.
pub(crate) fn one_segment(data: &Data, len: u64) -> bool {
    match data {
        Data::One(_) => true,
        d => match d.bufs() {
            [] => false,
            [b, rest @ ..] => len > 0 && (rest.is_empty() || b.len() as u64 >= len),
        },
    }
}

/// Why [`Uring::push_uring_cmd`] pushed nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The SQ is full.
    Full,
    /// The slot's buffers hold fewer bytes than the command moves, or it moves more than
    /// `u32::MAX`.
    Short,
}

impl<C: Cqe, M> Uring<squeue::Entry128, C, M> {
    /// Pushes an NVMe passthrough command (`IORING_OP_URING_CMD`): `cmd` is `struct
    /// nvme_uring_cmd` with everything but its pointers (metadata, data) and their
    /// lengths, which are written here from `payload`: nothing, a DSM range copied into
    /// the slot, or the first `len` bytes of the slot's data (`NVME_URING_CMD_IO` on one
    /// buffer, `NVME_URING_CMD_IO_VEC` on the slot's iovec array for several).
    pub(crate) fn push_uring_cmd(
        &mut self,
        id: SlotId,
        t: Target,
        mut cmd: [u8; 80],
        payload: Payload,
    ) -> Result<(), (SlotId, Refused)> {
        let slot = self.slot_out_of_ring(&id);
        let (addr, len, op) = match payload {
            Payload::None => (0, 0, NVME_URING_CMD_IO),
            Payload::Range(r) => {
                slot.mem.range = r;
                (slot.mem.range.as_ptr() as u64, 16, NVME_URING_CMD_IO)
            }
            Payload::Bufs(len) => {
                let iov = &mut slot.mem.iov;
                let n = fill_iovecs(slot.data.bufs(), len, iov);
                let covered: u64 = iov[..n].iter().map(|v| v.iov_len as u64).sum();
                if covered < len || len > u32::MAX as u64 {
                    return Err((id, Refused::Short));
                }
                if n == 1 {
                    (iov[0].iov_base as u64, iov[0].iov_len as u32, NVME_URING_CMD_IO)
                } else {
                    (iov.as_ptr() as u64, n as u32, NVME_URING_CMD_IO_VEC)
                }
            }
        };
        // struct nvme_uring_cmd: metadata (16..24), addr (24..32), metadata_len (32..36),
        // data_len (36..40).
        cmd[16..24].fill(0);
        cmd[24..32].copy_from_slice(&addr.to_le_bytes());
        cmd[32..36].fill(0);
        cmd[36..40].copy_from_slice(&len.to_le_bytes());
        let entry = on!(t, |f| opcode::UringCmd80::new(f, op).cmd(cmd).build());
        self.push(id, entry).map_err(|id| (id, Refused::Full))
    }
}

impl<S: Sqe, C: Cqe, M> Drop for Uring<S, C, M> {
    fn drop(&mut self) {
        if self.inflight > 0 {
            // The kernel may still read or write what those SQEs point to: leak the
            // table, with every slot's data and iovec array, rather than free it.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}

/// Registers exactly `buf` at entry `e` of the ring's sparse buffer table, replacing what
/// was there (one syscall).
pub(crate) fn register_buffer(sub: &Submitter<'_>, e: u32, buf: &Buffer) -> io::Result<()> {
    let iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: the iovec covers exactly `buf`, which is alive during the call; the kernel
    // pins its pages, so the registration itself never touches freed memory. The kernel
    // writes through an entry only for an SQE naming it with an address range inside the
    // registration; such SQEs are pushed by `Uring::push_rw` with the address range of a
    // buffer that its slot owns until the CQE is taken (pages freed and mapped again
    // elsewhere are not those the registration pinned).
    unsafe { sub.register_buffers_update(e, std::slice::from_ref(&iov), None) }
}

#[cfg(test)]
impl<S: Sqe, C: Cqe, M> Uring<S, C, M> {
    /// Every slot free, on the free list once, holding no data; nothing in the ring.
    pub(crate) fn assert_idle(&self) {
        assert_eq!(self.inflight, 0);
        let mut seen = vec![false; self.slots.len()];
        let mut i = self.free_head;
        while i != NO_SLOT {
            assert!(!seen[i as usize], "slot {i} twice on the free list");
            seen[i as usize] = true;
            i = self.slots[i as usize].next_free;
        }
        assert!(seen.iter().all(|&x| x), "a slot is missing from the free list");
        assert!(self.slots.iter().all(|s| matches!(s.data, Data::None)), "a free slot holds data");
    }

    /// The number of slots.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(depth: u32) -> Option<Uring<squeue::Entry, cqueue::Entry, u64>> {
        match IoUring::new(depth) {
            Ok(r) => Some(Uring::new(r, depth, || 0)),
            Err(e) => {
                eprintln!("skip: this process cannot create an io_uring: {e}");
                None
            }
        }
    }

    #[test]
    fn a_slot_comes_back_only_through_its_cqe_and_reads_stay_inside_their_buffer() {
        let Some(mut u) = ring(2) else { return };
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let mut head = [0u8; 8];
        std::io::Read::read_exact(&mut &f, &mut head).unwrap();
        // A read asked for more than its buffer holds reads only the buffer.
        let buf = Buffer::alloc(4, 1).unwrap();
        u.push_one(Data::One(buf), false, f.as_raw_fd(), 0, 4096, 0, |m| *m = 3).unwrap();
        let b = u.take_slot().unwrap();
        assert!(u.take_slot().is_none() && !u.has_free_slot());
        let refused = u.push_one(Data::One(Buffer::alloc(4, 1).unwrap()), false, f.as_raw_fd(), 0, 4, 0, |_| {});
        assert_eq!(refused.unwrap_err().total_len(), 4, "no slot is free: the data comes back");
        *u.meta_mut(&b) = 7;
        let bufs: Data = vec![Buffer::alloc(3, 1).unwrap(), Buffer::alloc(2, 1).unwrap()].into();
        u.put(&b, bufs);
        assert!(!one_segment(u.data(&b), 5));
        assert!(!u.push_rw(b, false, Target::Fd(f.as_raw_fd()), 1, 5, 0, Some(0), 0).unwrap());
        assert_eq!(u.inflight(), 2);
        u.enter(2, 2, ENTER_GETEVENTS).unwrap();
        let mut got = Vec::new();
        u.take_cqes(|mut r, cqe| {
            let m = *r.meta();
            got.push((m, cqe.result(), r.release().bufs().iter().flat_map(|b| b.to_vec()).collect::<Vec<u8>>()));
            true
        });
        got.sort();
        assert_eq!(got, vec![(3, 4, head[..4].to_vec()), (7, 5, head[1..6].to_vec())]);
        assert_eq!(u.inflight(), 0);
        u.assert_idle();
    }

    #[test]
    fn an_id_of_another_ring_cannot_reach_a_slot_in_the_ring() {
        let (Some(mut a), Some(mut b)) = (ring(1), ring(1)) else { return };
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let t = Target::Fd(f.as_raw_fd());
        let ia = a.take_slot().unwrap();
        a.put(&ia, Data::One(Buffer::alloc(8, 1).unwrap()));
        a.push_rw(ia, false, t, 0, 8, 0, None, 0).unwrap();
        // b's id for its slot 0 names a's slot 0, which is in a's ring.
        let ib = b.take_slot().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.release(ib)));
        assert!(r.is_err(), "released a slot that is in the ring");
        let other = || ring(1).unwrap().take_slot().unwrap();
        let id = other();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.push_fdatasync(id, t)));
        assert!(r.is_err(), "pushed a slot that is in the ring");
        let id = other();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.push_rw(id, false, t, 0, 8, 0, None, 0)));
        assert!(r.is_err(), "rewrote the iovecs of a slot that is in the ring");
        // An id past the table: a bounds-check panic, nothing touched.
        let mut big = ring(4).unwrap();
        let _ = (big.take_slot(), big.take_slot(), big.take_slot());
        let id = big.take_slot().unwrap();
        assert_eq!(id.index(), 3);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.push_fdatasync(id, t)));
        assert!(r.is_err(), "an id past the table was taken");
        // a's own command is untouched: it reads the file's first 8 bytes.
        a.enter(1, 1, ENTER_GETEVENTS).unwrap();
        let mut got = None;
        a.take_cqes(|r, cqe| {
            got = Some((cqe.result(), r.release().into_one().unwrap().to_vec()));
            true
        });
        let mut head = [0u8; 8];
        std::io::Read::read_exact(&mut &f, &mut head).unwrap();
        assert_eq!(got, Some((8, head.to_vec())));
        a.assert_idle();
    }

    #[test]
    fn a_cqe_that_names_no_slot_in_the_ring_is_ignored() {
        let Some(mut u) = ring(2) else { return };
        let a = u.take_slot().unwrap();
        // A NOP carrying the index of a slot that is taken but was never pushed, and one
        // past the table: both consumed, neither hands a slot out.
        for ud in [a.index() as u64, 99] {
            let nop = opcode::Nop::new().build().user_data(ud);
            // SAFETY: a NOP points to no memory.
            unsafe { u.ring.submission().push(&nop) }.unwrap();
        }
        u.enter(2, 2, ENTER_GETEVENTS).unwrap();
        let mut n = 0;
        u.take_cqes(|_, _| {
            n += 1;
            true
        });
        assert_eq!((n, u.cq_len(), u.inflight()), (0, 0, 0));
        assert!(matches!(u.release(a), Data::None));
        u.assert_idle();
    }
}
