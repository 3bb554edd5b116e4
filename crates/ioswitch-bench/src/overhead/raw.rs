//! What the raw reference loops of both overhead tools ([`super`]'s grid and
//! [`super::targets`]) are made of: the Linux AIO ABI and its three syscalls, page-aligned
//! buffers, plain file descriptors and the thread CPU clock. No ioswitch in here.

use std::alloc::{self, Layout};
use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::LoopError;
use std::ptr::NonNull;

/// `struct iocb` of linux/aio_abi.h (64 bytes; on big-endian machines `aio_key` and
/// `aio_rw_flags` trade places, both are 0 here).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Iocb {
    pub aio_data: u64,
    pub aio_key: u32,
    pub aio_rw_flags: i32,
    pub aio_lio_opcode: u16,
    pub aio_reqprio: i16,
    pub aio_fildes: u32,
    pub aio_buf: u64,
    pub aio_nbytes: u64,
    pub aio_offset: i64,
    pub aio_reserved2: u64,
    pub aio_flags: u32,
    pub aio_resfd: u32,
}

/// `struct io_event` of linux/aio_abi.h.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct IoEvent {
    pub data: u64,
    pub obj: u64,
    pub res: i64,
    pub res2: i64,
}

const _: () = assert!(std::mem::size_of::<Iocb>() == 64 && std::mem::size_of::<IoEvent>() == 32);

/// `IOCB_CMD_PREAD`.
pub(crate) const IOCB_CMD_PREAD: u16 = 0;

/// A Linux AIO context (`io_setup(2)`), destroyed on drop (`io_destroy(2)`).
pub(crate) struct AioContext(libc::c_ulong);

impl AioContext {
    /// `io_setup(depth)`.
    pub(crate) fn new(depth: u32) -> io::Result<AioContext> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes one aio_context_t through a valid pointer.
        let r = unsafe { libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut ctx as *mut libc::c_ulong) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AioContext(ctx))
    }

    /// One `io_submit(2)` of `iocbs`; returns how many the kernel took.
    ///
    /// # Safety
    ///
    /// Every pointer in `iocbs` points to a filled `Iocb` (the kernel copies it during the
    /// call) whose buffer stays allocated and untouched until its event is reaped.
    #[inline]
    pub(crate) unsafe fn submit(&self, iocbs: &[*mut Iocb]) -> io::Result<usize> {
        // SAFETY: the context is live; the caller vouches for the iocbs and their buffers.
        let r = unsafe { libc::syscall(libc::SYS_io_submit, self.0, iocbs.len() as libc::c_long, iocbs.as_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// One blocking `io_getevents(2)` for at least `min` events into `events`; returns how
    /// many arrived (the kernel fills at most `events.len()`).
    #[inline]
    pub(crate) fn getevents(&self, min: u32, events: &mut [IoEvent]) -> io::Result<usize> {
        // SAFETY: the context is live; events has room for events.len() entries; a null
        // timeout blocks.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.0,
                min as libc::c_long,
                events.len() as libc::c_long,
                events.as_mut_ptr(),
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

impl Drop for AioContext {
    fn drop(&mut self) {
        // SAFETY: the context came from io_setup and is destroyed once; the owners reap
        // (or leak the buffers of) every iocb they submitted before dropping it.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.0) };
    }
}

/// Page-aligned, zeroed memory owned by a raw side.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    /// `len` bytes (at least 1), 4096-aligned.
    pub(crate) fn new(len: usize) -> Result<AlignedBuf, LoopError> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|source| LoopError::Layout { len, source })?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or(LoopError::OutOfMemory { len })?;
        Ok(AlignedBuf { ptr, layout })
    }

    /// The start of the memory.
    #[inline]
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated in `new` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Opens `path` read-only for a raw loop, with O_DIRECT when `direct`.
pub(crate) fn open_raw(path: &Path, direct: bool) -> Result<File, LoopError> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(if direct { libc::O_DIRECT } else { 0 })
        .open(path)
        .map_err(|source| LoopError::OpenRaw { path: path.to_path_buf(), source })
}

/// CPU time of the calling thread (user + system), ns (`CLOCK_THREAD_CPUTIME_ID`).
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
