//! The raw calls of the io_uring ring core (`be/uring`) that are not SQE pushes:
//! `io_uring_enter(2)` made directly (not through the io-uring crate's `Submitter`, which
//! builds a view of the ring's registers per call), the registration of one buffer in a
//! ring's sparse table (`IORING_REGISTER_BUFFERS_UPDATE`), and the iovec array a slot
//! keeps for vectored commands.
//!
//! What an SQE points to is kept alive by the ring core's slot table, under the contract
//! of its `unsafe fn push` (be/uring/mod.rs): these calls add no pointer of their own.

use crate::be::MAX_SEGMENTS;
use crate::buf::Buffer;
use ::io_uring::Submitter;
use std::io;
use std::os::fd::RawFd;

/// `IORING_ENTER_GETEVENTS`: wait for (or, with IOPOLL, poll for) completions.
pub(crate) const ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_SQ_WAKEUP`: wake a sleeping SQPOLL thread.
pub(crate) const ENTER_SQ_WAKEUP: u32 = 2;

/// One `io_uring_enter` on the ring `ring_fd`: submit `to_submit` SQEs, wait for `want`
/// completions when `flags` has [`ENTER_GETEVENTS`]; returns how many SQEs it took.
#[inline]
pub(crate) fn enter(ring_fd: RawFd, to_submit: u32, want: u32, flags: u32) -> io::Result<u32> {
    // SAFETY: no argument pointer is passed (NULL, size 0), as GETEVENTS and SQ_WAKEUP
    // allow. The kernel reads the SQEs of the ring, each written under the ring core's
    // `push` contract (what it points to stays owned by its slot until its CQE is
    // reaped); on a descriptor that is not a ring the call fails with an errno.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            ring_fd as libc::c_long,
            to_submit as libc::c_long,
            want as libc::c_long,
            flags as libc::c_long,
            std::ptr::null::<libc::sigset_t>(),
            0 as libc::c_long,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as u32)
    }
}

/// Registers exactly `buf` at entry `e` of the ring's sparse buffer table, replacing what
/// was there (one syscall).
pub(crate) fn register_buffer(sub: &Submitter<'_>, e: u32, buf: &Buffer) -> io::Result<()> {
    let iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: the iovec covers exactly `buf`, which is alive during the call; the kernel
    // pins its pages, so the registration itself never touches freed memory. The kernel
    // writes through an entry only for an SQE naming it with an address range inside the
    // registration, and such an SQE is pushed under the ring core's `push` contract (its
    // buffer is owned by its slot until the CQE is reaped).
    unsafe { sub.register_buffers_update(e, std::slice::from_ref(&iov), None) }
}

/// The iovec array of one slot: stable in memory for as long as the queue lives.
pub(crate) struct Iovecs(pub(crate) [libc::iovec; MAX_SEGMENTS]);

impl Iovecs {
    /// An array of empty iovecs, boxed (its address never changes).
    pub(crate) fn new() -> Box<Iovecs> {
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        Box::new(Iovecs([empty; MAX_SEGMENTS]))
    }
}

// SAFETY: the iovecs only ever point into buffers owned by the same slot's `Data`, which
// is Send; nothing here is tied to a thread.
unsafe impl Send for Iovecs {}
