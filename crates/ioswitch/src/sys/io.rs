//! Positioned reads and writes on a descriptor, and the calls that change a file's
//! blocks: pread(2)/pwrite(2), preadv(2)/pwritev(2)/pwritev2(2), fallocate(2),
//! fdatasync(2); preadv2(2) (`RWF_HIPRI`), and lseek(2) with read(2)/write(2)/readv(2)/
//! writev(2) at the file position (fio's `sync` engine). Each takes the memory it
//! transfers as a borrowed slice, so it is safe: the kernel touches nothing beyond the
//! slices, and only while the call runs.
//!
//! Every call returns what the kernel returned: the number of bytes moved (short
//! transfers are the caller's to retry), or the errno as an `io::Error`. A descriptor
//! that is not open is an error (EBADF), never memory unsafety.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::RawFd;

#[inline(always)]
fn bytes(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn unit(rc: libc::c_int) -> io::Result<()> {
    super::check(rc).map(drop)
}

/// pread(2): reads into `buf` from byte `offset` of `fd`.
#[inline(always)]
pub(crate) fn pread(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    bytes(pread_raw(fd, buf, offset))
}

/// pwrite(2): writes `buf` at byte `offset` of `fd`.
#[inline(always)]
pub(crate) fn pwrite(fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
    bytes(pwrite_raw(fd, buf, offset))
}

/// [`pread`] for a hot path: reads up to `len` bytes (never more than `buf` holds) into
/// `buf` from byte `offset` and returns what the kernel returned: the number of bytes
/// read, or -1 with the errno set (take it with `io::Error::last_os_error()` before
/// making another call). The caller compares the count with `len` first, so a complete
/// transfer costs one comparison.
#[inline(always)]
pub(crate) fn pread_upto(fd: RawFd, buf: &mut [u8], len: usize, offset: u64) -> isize {
    let n = len.min(buf.len());
    // SAFETY: the kernel writes at most n <= buf.len() bytes into buf, which is borrowed
    // mutably for the call.
    unsafe { libc::pread(fd, buf.as_mut_ptr() as *mut libc::c_void, n, offset as libc::off_t) }
}

/// [`pwrite`] for a hot path: writes up to `len` bytes (never more than `buf` holds) of
/// `buf` at byte `offset`; returns what the kernel returned (see [`pread_upto`]).
#[inline(always)]
pub(crate) fn pwrite_upto(fd: RawFd, buf: &[u8], len: usize, offset: u64) -> isize {
    let n = len.min(buf.len());
    // SAFETY: the kernel reads at most n <= buf.len() bytes from buf, borrowed for the call.
    unsafe { libc::pwrite(fd, buf.as_ptr() as *const libc::c_void, n, offset as libc::off_t) }
}

#[inline(always)]
fn pread_raw(fd: RawFd, buf: &mut [u8], offset: u64) -> isize {
    // SAFETY: the kernel writes at most buf.len() bytes into buf, which is borrowed
    // mutably for the call.
    unsafe { libc::pread(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), offset as libc::off_t) }
}

#[inline(always)]
fn pwrite_raw(fd: RawFd, buf: &[u8], offset: u64) -> isize {
    // SAFETY: the kernel reads at most buf.len() bytes from buf, borrowed for the call.
    unsafe { libc::pwrite(fd, buf.as_ptr() as *const libc::c_void, buf.len(), offset as libc::off_t) }
}

/// preadv(2): reads into the slices of `iov`, in order, from byte `offset`.
pub(crate) fn preadv(fd: RawFd, iov: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
    let n = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: IoSliceMut is ABI-compatible with struct iovec (std guarantees it on Unix);
    // each one borrows its memory mutably, and `iov` is borrowed for the call.
    bytes(unsafe { libc::preadv(fd, iov.as_ptr() as *const libc::iovec, n, offset as libc::off_t) })
}

/// pwritev2(2): writes the slices of `iov`, in order, at byte `offset`, with `RWF_*`
/// `flags` (0: plain pwritev(2)).
pub(crate) fn pwritev(fd: RawFd, iov: &[IoSlice<'_>], offset: u64, flags: libc::c_int) -> io::Result<usize> {
    let n = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
    let p = iov.as_ptr() as *const libc::iovec;
    // SAFETY: IoSlice is ABI-compatible with struct iovec (std guarantees it on Unix);
    // each one borrows its memory, and `iov` is borrowed for the call.
    let r = unsafe {
        if flags == 0 {
            libc::pwritev(fd, p, n, offset as libc::off_t)
        } else {
            libc::pwritev2(fd, p, n, offset as libc::off_t, flags)
        }
    };
    bytes(r)
}

/// preadv2(2): [`preadv`] with `RWF_*` `flags` (`RWF_HIPRI`: poll for the completion).
pub(crate) fn preadv2(fd: RawFd, iov: &mut [IoSliceMut<'_>], offset: u64, flags: libc::c_int) -> io::Result<usize> {
    let n = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: IoSliceMut is ABI-compatible with struct iovec (std guarantees it on Unix);
    // each one borrows its memory mutably, and `iov` is borrowed for the call.
    bytes(unsafe { libc::preadv2(fd, iov.as_ptr() as *const libc::iovec, n, offset as libc::off_t, flags) })
}

/// pwritev2(2) with `RWF_*` `flags`, also when they are 0 (fio's `pvsync2` calls it so;
/// [`pwritev`] makes a plain pwritev(2) of flags 0).
pub(crate) fn pwritev2(fd: RawFd, iov: &[IoSlice<'_>], offset: u64, flags: libc::c_int) -> io::Result<usize> {
    let n = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: IoSlice is ABI-compatible with struct iovec (std guarantees it on Unix);
    // each one borrows its memory, and `iov` is borrowed for the call.
    bytes(unsafe { libc::pwritev2(fd, iov.as_ptr() as *const libc::iovec, n, offset as libc::off_t, flags) })
}

/// lseek(2) with `SEEK_SET`: moves the file position of `fd` to `offset`.
pub(crate) fn seek(fd: RawFd, offset: u64) -> io::Result<()> {
    let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: lseek takes plain integers.
    super::check(unsafe { libc::lseek(fd, off, libc::SEEK_SET) }).map(drop)
}

/// lseek(2) with `SEEK_CUR`: the file position of `fd` (the tests check where the `sync`
/// engine's calls leave it).
#[cfg(test)]
pub(crate) fn position(fd: RawFd) -> io::Result<u64> {
    // SAFETY: lseek takes plain integers.
    let r = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
    u64::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// readv(2): reads into the slices of `iov`, in order, at the file position of `fd`
/// (read(2) when there is one slice), which it advances.
pub(crate) fn readv(fd: RawFd, iov: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
    let r = match iov {
        // SAFETY: the kernel writes at most s.len() bytes into s, borrowed mutably.
        [s] => unsafe { libc::read(fd, s.as_mut_ptr() as *mut libc::c_void, s.len()) },
        _ => {
            let n = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
            // SAFETY: as in preadv: iovec-compatible slices, borrowed mutably for the call.
            unsafe { libc::readv(fd, iov.as_ptr() as *const libc::iovec, n) }
        }
    };
    bytes(r)
}

/// writev(2): writes the slices of `iov`, in order, at the file position of `fd`
/// (write(2) when there is one slice), which it advances.
pub(crate) fn writev(fd: RawFd, iov: &[IoSlice<'_>]) -> io::Result<usize> {
    let r = match iov {
        // SAFETY: the kernel reads at most s.len() bytes from s, borrowed for the call.
        [s] => unsafe { libc::write(fd, s.as_ptr() as *const libc::c_void, s.len()) },
        _ => {
            let n = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
            // SAFETY: as in pwritev: iovec-compatible slices, borrowed for the call.
            unsafe { libc::writev(fd, iov.as_ptr() as *const libc::iovec, n) }
        }
    };
    bytes(r)
}

/// fallocate(2): `mode` (`FALLOC_FL_*`) over `len` bytes at `offset`.
pub(crate) fn fallocate(fd: RawFd, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: fallocate takes plain integers.
    unit(unsafe { libc::fallocate(fd, mode, offset as libc::off_t, len as libc::off_t) })
}

/// fdatasync(2).
pub(crate) fn fdatasync(fd: RawFd) -> io::Result<()> {
    // SAFETY: fdatasync takes a descriptor.
    unit(unsafe { libc::fdatasync(fd) })
}

const BLKDISCARD: libc::c_ulong = 0x1277;
const BLKZEROOUT: libc::c_ulong = 0x127f;

/// BLKDISCARD (`zero` false) or BLKZEROOUT (`zero` true) over `len` bytes at `offset` of
/// a block device.
pub(crate) fn blk_discard(fd: RawFd, offset: u64, len: u64, zero: bool) -> io::Result<()> {
    let range = [offset, len];
    let req = if zero { BLKZEROOUT } else { BLKDISCARD };
    // SAFETY: both ioctls read a [u64; 2] (start, length) through the pointer.
    unit(unsafe { libc::ioctl(fd, req as _, range.as_ptr()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // _IO(0x12, 119) and _IO(0x12, 127).
        assert_eq!(BLKDISCARD, (0x12 << 8) | 119);
        assert_eq!(BLKZEROOUT, (0x12 << 8) | 127);
    }

    #[test]
    fn reads_and_writes_move_exactly_the_slices() {
        let f = tempfile();
        let fd = f.as_raw_fd();
        assert_eq!(pwrite(fd, b"hello", 3).unwrap(), 5);
        assert_eq!(pwritev(fd, &[IoSlice::new(b"ab"), IoSlice::new(b"cd")], 8, 0).unwrap(), 4);
        assert_eq!(pwritev(fd, &[IoSlice::new(b"!")], 12, libc::RWF_DSYNC).unwrap(), 1);
        let mut buf = [0u8; 4];
        assert_eq!(pread(fd, &mut buf, 3).unwrap(), 4);
        assert_eq!(&buf, b"hell");
        assert_eq!((pread_upto(fd, &mut buf, 4, 9), pread_upto(fd, &mut buf, 4, 11)), (4, 2), "a short read");
        assert!(pread_upto(fd, &mut buf, 2, 3) == 2 && &buf[..2] == b"he", "a prefix of the buffer");
        assert_eq!(pread_upto(fd, &mut buf, 5, 3), 4, "a length past the buffer reads what the buffer holds");
        assert_eq!(pwrite_upto(fd, b"x", 1, 13), 1);
        assert_eq!(pwrite_upto(fd, b"x", 2, 13), 1, "a length past the buffer writes what the buffer holds");
        // A failed call returns -1 with its errno.
        assert_eq!(pwrite_upto(-1, b"x", 1, 13), -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
        assert_eq!(pread_upto(-1, &mut buf, 1, 0), -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
        let (mut a, mut b) = ([0u8; 3], [0u8; 7]);
        let n = preadv(fd, &mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)], 3).unwrap();
        assert_eq!((n, &a, &b), (10, b"hel", b"loabcd!"));
        assert_eq!(pwritev2(fd, &[IoSlice::new(b"cd")], 10, 0).unwrap(), 2, "flags 0");
        let (mut a, mut b) = ([0u8; 2], [0u8; 3]);
        let n = preadv2(fd, &mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)], 8, 0).unwrap();
        assert_eq!((n, &a, &b), (5, b"ab", b"cd!"));
        seek(fd, 4).unwrap();
        assert_eq!(writev(fd, &[IoSlice::new(b"EL")]).unwrap(), 2, "write(2) at the position");
        assert_eq!(writev(fd, &[IoSlice::new(b"L"), IoSlice::new(b"O")]).unwrap(), 2, "writev(2) after it");
        seek(fd, 3).unwrap();
        assert_eq!(position(fd).unwrap(), 3);
        let mut one = [0u8; 5];
        assert_eq!(readv(fd, &mut [IoSliceMut::new(&mut one)]).unwrap(), 5);
        assert_eq!(&one, b"hELLO");
        let (mut a, mut b) = ([0u8; 2], [0u8; 2]);
        assert_eq!(readv(fd, &mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)]).unwrap(), 4, "readv(2) goes on");
        assert_eq!((&a, &b), (b"ab", b"cd"));
        assert_eq!(seek(fd, u64::MAX).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        fdatasync(fd).unwrap();
        assert_eq!(pread(-1, &mut buf, 0).unwrap_err().raw_os_error(), Some(libc::EBADF));
        assert!(blk_discard(fd, 0, 4096, false).is_err(), "a regular file is no block device");
    }

    fn tempfile() -> std::fs::File {
        let p = std::env::temp_dir().join(format!("ioswitch-sys-io-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f
    }
}
