//! Persistent memory: load/store access to a `sync=pmem` device's mapping from C (what
//! `Device::pmem_range` gives Rust): a range handle, its address, `persist`.

use crate::dev::{ioswitch_dev, null_arg, out_and_dev};
use crate::error::{from_error, guard, status};
use ioswitch_rs::{Device, PmemSlice};
use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::ptr;

/// A range of a `sync=pmem` device's mapping lent to C (opaque): get it with
/// `ioswitch_pmem_range`, its memory with `ioswitch_pmem_addr`, make stores durable with
/// `ioswitch_pmem_persist`, give it back with `ioswitch_pmem_release`. It keeps the
/// device's mapping alive (closing the device first is allowed).
pub struct ioswitch_pmem {
    /// Borrows `*dev`; dropped before it (see Drop).
    slice: ManuallyDrop<PmemSlice<'static>>,
    /// A clone of the device (its mapping lives as long as any clone), boxed so that its
    /// address, which `slice` borrows, never moves.
    dev: ManuallyDrop<Box<Device>>,
    addr: *mut u8,
    len: usize,
}

impl Drop for ioswitch_pmem {
    fn drop(&mut self) {
        // SAFETY: the slice borrows *dev, so it goes first; each field is dropped once.
        unsafe {
            ManuallyDrop::drop(&mut self.slice);
            ManuallyDrop::drop(&mut self.dev);
        }
    }
}

/// Lends bytes `offset .. offset + len` of a `sync=pmem` device's mapping: stores into
/// it (at `ioswitch_pmem_addr`) go straight to the persistent memory and are durable
/// after `ioswitch_pmem_persist`. While lent, reads and writes of the range through
/// commands fail with -EBUSY, and an overlapping second range is refused (-EINVAL).
///
/// Returns 0 and the range in `*out`, or a negative errno (-EOPNOTSUPP when the sync
/// interface is not pmem or the device is read-only, -ERANGE outside the device, -EINVAL
/// for an empty or overlapping range or a NULL argument) with `ioswitch_last_error()`
/// saying why; `*out` is then NULL.
///
/// # Safety
/// `dev` an open device; `out` valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_range(
    dev: *const ioswitch_dev,
    offset: u64,
    len: usize,
    out: *mut *mut ioswitch_pmem,
) -> c_int {
    const F: &str = "ioswitch_pmem_range";
    guard(F, -libc::EIO, || {
        // SAFETY: out is null or valid for writing one pointer, dev null or a live device
        // (caller contract).
        let d = match unsafe { out_and_dev(F, out, dev) } {
            Ok(d) => d,
            Err(e) => return e,
        };
        let owner: Box<Device> = Box::new(d.dev.clone());
        // SAFETY: the slice borrows the boxed device, whose heap address is stable and
        // which the handle keeps, and drops only after the slice (ioswitch_pmem's Drop);
        // so the borrow, extended to 'static here, never outlives what it borrows.
        let dev_ref: &'static Device = unsafe { &*(&*owner as *const Device) };
        let mut slice = match dev_ref.pmem_range(offset, len) {
            Ok(s) => s,
            Err(e) => return from_error(F, &e),
        };
        let addr = slice.as_mut_ptr();
        let h = Box::new(ioswitch_pmem { slice: ManuallyDrop::new(slice), dev: ManuallyDrop::new(owner), addr, len });
        // SAFETY: as above.
        unsafe { out.write(Box::into_raw(h)) };
        0
    })
}

/// The first byte of a lent range (valid for reads and writes of its length until
/// `ioswitch_pmem_release`); NULL for a NULL handle.
///
/// # Safety
/// `r` NULL or a range from `ioswitch_pmem_range` not released yet.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_addr(r: *const ioswitch_pmem) -> *mut c_void {
    // SAFETY: r is null or live (caller contract).
    unsafe { r.as_ref() }.map_or(ptr::null_mut(), |r| r.addr.cast())
}

/// The length of a lent range in bytes (0 for a NULL handle).
///
/// # Safety
/// `r` NULL or a range from `ioswitch_pmem_range` not released yet.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_len(r: *const ioswitch_pmem) -> usize {
    // SAFETY: r is null or live (caller contract).
    unsafe { r.as_ref() }.map_or(0, |r| r.len)
}

/// Makes bytes `off .. off + len` of a lent range (offsets relative to its start)
/// durable: writes their cache lines back (CLWB, CLFLUSHOPT or CLFLUSH) and fences.
/// Returns 0, or -EINVAL for a NULL handle or a span past the range's end.
///
/// # Safety
/// `r` NULL or a range from `ioswitch_pmem_range` not released yet.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_persist(r: *const ioswitch_pmem, off: usize, len: usize) -> c_int {
    const F: &str = "ioswitch_pmem_persist";
    guard(F, -libc::EIO, || {
        // SAFETY: r is null or live (caller contract).
        let Some(r) = (unsafe { r.as_ref() }) else { return null_arg(F, "range") };
        status(F, r.slice.persist(off, len))
    })
}

/// Copies `len` bytes at `off` of a lent range (relative to its start) into `buf`, under
/// the SIGBUS guard of the command API: where the kernel cannot provide a page (poisoned
/// persistent memory, a file another user shrank) it returns -EIO instead of ending the
/// process. Plain loads at `ioswitch_pmem_addr` are not guarded. Returns 0, -EINVAL for
/// a NULL argument or a span past the range's end, or -EIO; `ioswitch_last_error()`
/// says why.
///
/// # Safety
/// `r` NULL or a range from `ioswitch_pmem_range` not released yet; `buf` NULL or valid
/// for writing `len` bytes, not inside the range.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_read(
    r: *const ioswitch_pmem,
    off: usize,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    const F: &str = "ioswitch_pmem_read";
    guard(F, -libc::EIO, || {
        // SAFETY: r is null or live (caller contract).
        let Some(r) = (unsafe { r.as_ref() }) else { return null_arg(F, "range") };
        if buf.is_null() {
            return null_arg(F, "buf");
        }
        // SAFETY: buf is valid for writing len bytes and not inside the range (caller contract).
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        status(F, r.slice.read_at(off, dst))
    })
}

/// Copies `len` bytes from `buf` to `off` of a lent range (relative to its start)
/// durably, as a write command does (non-temporal stores or stores + cache-line
/// write-backs, then one fence: no `ioswitch_pmem_persist` needed), under the SIGBUS
/// guard: -EIO instead of the end of the process where the kernel cannot provide a page
/// (the bytes may then be partly written). Plain stores at `ioswitch_pmem_addr` are not
/// guarded. Returns 0, -EINVAL for a NULL argument or a span past the range's end, or
/// -EIO; `ioswitch_last_error()` says why.
///
/// # Safety
/// `r` NULL or a range from `ioswitch_pmem_range` not released yet, not used by another
/// thread meanwhile; `buf` NULL or valid for reading `len` bytes, not inside the range.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_write(
    r: *mut ioswitch_pmem,
    off: usize,
    buf: *const c_void,
    len: usize,
) -> c_int {
    const F: &str = "ioswitch_pmem_write";
    guard(F, -libc::EIO, || {
        // SAFETY: r is null or live, and not used elsewhere meanwhile (caller contract).
        let Some(r) = (unsafe { r.as_mut() }) else { return null_arg(F, "range") };
        if buf.is_null() {
            return null_arg(F, "buf");
        }
        // SAFETY: buf is valid for reading len bytes and not inside the range (caller contract).
        let src = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
        status(F, r.slice.write_at(off, src))
    })
}

/// Gives a lent range back (NULL is ignored): its memory may no longer be used, and
/// commands reach it again.
///
/// # Safety
/// `r` NULL or a range from `ioswitch_pmem_range` not released before.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pmem_release(r: *mut ioswitch_pmem) {
    guard("ioswitch_pmem_release", (), || {
        if !r.is_null() {
            // SAFETY: r came from Box::into_raw in ioswitch_pmem_range, released once
            // (caller contract).
            drop(unsafe { Box::from_raw(r) });
        }
    })
}
