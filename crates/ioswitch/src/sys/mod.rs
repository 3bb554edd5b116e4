//! Raw kernel calls that the device layer makes on a file descriptor or a path: open,
//! sizes, alignments, file-system type, block-layer ioctls; and [`sysfs`], read in one
//! place. Each wrapper is safe to call and says what it asks of the kernel.
//!
//! The calls of the interfaces sit in one file per kernel interface: [`io`] (positioned
//! reads and writes, fallocate, fdatasync, discard), [`blkzone`] (the zone ioctls),
//! [`mem`] (shared mappings; their copies survive a SIGBUS through [`sigbus`]), [`pmem`] (persistent-memory mappings and durable stores),
//! [`nvme`] (the NVMe driver's ioctls), [`aio`] (Linux AIO) and [`posix_aio`] (glibc's
//! POSIX aio), the last two owning what the kernel or glibc holds until it is done;
//! [`pci`] (PCI functions and their drivers, in sysfs), [`vfio`] (VFIO containers, groups,
//! devices, BARs, DMA mappings and hugepage memory); [`uring`] (an io_uring ring with the
//! slots whose memory its SQEs point to: every SQE built and pushed there,
//! io_uring_enter, buffer registration).

// The raw-call layer: every unsafe block of the crate outside buf.rs is here.
#![allow(unsafe_code)]

pub(crate) mod aio;
pub(crate) mod blkzone;
pub(crate) mod io;
pub(crate) mod mem;
pub(crate) mod nvme;
pub(crate) mod pci;
pub(crate) mod pmem;
pub(crate) mod posix_aio;
pub(crate) mod sigbus;
pub(crate) mod sysfs;
pub(crate) mod uio;
pub(crate) mod uring;
pub(crate) mod vfio;

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `_IOC(dir, type, nr, size)` of the generic Linux ioctl encoding (x86, arm, riscv), with
/// `dir` one of the `IOC_*` below.
pub(crate) const fn ioc(dir: u64, ty: u8, nr: u8, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | ((ty as u64) << 8) | nr as u64
}
pub(crate) const IOC_NONE: u64 = 0;
pub(crate) const IOC_WRITE: u64 = 1;
pub(crate) const IOC_READ_WRITE: u64 = 3;

/// The size of a memory page.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// The errno of the call that just failed (EIO where the OS gives none).
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// What a call returned; a negative value (the -1 of a failed call) gives its errno as
/// an `io::Error`.
#[inline]
pub(crate) fn check<T: Default + PartialOrd>(rc: T) -> std::io::Result<T> {
    if rc < T::default() {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// open(2): `path` with `flags` (O_CLOEXEC is the caller's to add), `mode` for a new file.
pub(crate) fn open(path: &CStr, flags: libc::c_int, mode: libc::mode_t) -> std::io::Result<OwnedFd> {
    // SAFETY: path is a valid C string; open has no other preconditions.
    let raw = check(unsafe { libc::open(path.as_ptr(), flags, mode as libc::c_uint) })?;
    // SAFETY: raw is a freshly opened descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// open(2) of an existing `path` with `flags` and O_CLOEXEC; a path with a NUL byte is
/// InvalidInput.
pub(crate) fn open_path(path: &std::path::Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    open(&c, flags | libc::O_CLOEXEC, 0)
}

/// The direct-I/O alignments of an open file, `(memory, offset)`, from
/// `statx(STATX_DIOALIGN)`; `None` where the kernel or file system does not say.
pub(crate) fn dio_align(fd: &impl AsRawFd) -> Option<(u32, u32)> {
    // SAFETY: statx is plain data; all-zero is a valid value.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open, the path is a valid C string, and sx is a valid out pointer.
    let rc = unsafe { libc::statx(fd.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut sx) };
    if rc != 0 || sx.stx_mask & libc::STATX_DIOALIGN == 0 || sx.stx_dio_mem_align == 0 {
        return None;
    }
    Some((sx.stx_dio_mem_align, sx.stx_dio_offset_align))
}

/// fstat(2) of an open descriptor.
pub(crate) fn fstat(fd: &impl AsRawFd) -> std::io::Result<libc::stat> {
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out pointer; a bad descriptor only makes fstat fail.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// The number of CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`; -1 where unknown).
pub(crate) fn cpus_online() -> libc::c_long {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }
}

/// The effective user id of this process (geteuid(2)).
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The 64 bytes of an NVMe submission entry, in place.
pub(crate) fn sqe_bytes(sqe: &crate::spec::Sqe) -> &[u8; 64] {
    const _: () = assert!(std::mem::size_of::<crate::spec::Sqe>() == 64);
    // SAFETY: Sqe is repr(C), 64 bytes (checked above), has no padding (every field is
    // naturally aligned and the sizes add up to 64), and any byte pattern is a valid
    // [u8; 64], whose alignment (1) Sqe's satisfies.
    unsafe { &*(sqe as *const crate::spec::Sqe as *const [u8; 64]) }
}

/// An NVMe submission entry from its 64 bytes.
pub(crate) fn sqe_from_bytes(bytes: &[u8; 64]) -> crate::spec::Sqe {
    // SAFETY: every bit pattern is a valid Sqe (plain integers, no padding), the source is
    // exactly 64 bytes, and read_unaligned has no alignment requirement.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const crate::spec::Sqe) }
}

/// A file's size in bytes (fstat).
pub(crate) fn file_size(fd: &impl AsRawFd) -> std::io::Result<u64> {
    Ok(fstat(fd)?.st_size as u64)
}

/// Sets a file's size (ftruncate).
pub(crate) fn set_file_size(fd: &impl AsRawFd, bytes: u64) -> std::io::Result<()> {
    // SAFETY: fd is open; ftruncate has no memory-safety preconditions.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) }).map(drop)
}

/// The magic number of the file system holding an open file (fstatfs).
pub(crate) fn fs_magic(fd: &impl AsRawFd) -> Option<u64> {
    // SAFETY: statfs is plain data; all-zero is valid.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and s is a valid out pointer.
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut s) }).ok()?;
    Some(s.f_type as u64)
}

const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

/// A block device's logical block size (BLKSSZGET).
pub(crate) fn blk_logical_block_size(fd: &impl AsRawFd) -> std::io::Result<u32> {
    let mut lba: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer, which is valid.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKSSZGET as _, &mut lba) })?;
    Ok(lba as u32)
}

/// A block device's size in bytes (BLKGETSIZE64).
pub(crate) fn blk_size(fd: &impl AsRawFd) -> std::io::Result<u64> {
    let mut bytes: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKGETSIZE64 as _, &mut bytes) })?;
    Ok(bytes)
}

/// Whether an exclusive open of block device `path` fails with EBUSY: someone (a file
/// system, swap, device-mapper, md, a program holding `O_EXCL`) claims it, a partition of
/// it or its disk. The probe's descriptor is closed at once. Any other failure says
/// nothing about users and answers `false`.
pub(crate) fn exclusive_open_busy(path: &CStr) -> bool {
    match open(path, libc::O_RDONLY | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NONBLOCK, 0) {
        Ok(_probe) => false,
        Err(e) => e.raw_os_error() == Some(libc::EBUSY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // _IO(0x12, 104) and _IOR(0x12, 114, size_t).
        assert_eq!(BLKSSZGET, (0x12 << 8) | 104);
        assert_eq!(BLKGETSIZE64, (2 << 30) | (8 << 16) | (0x12 << 8) | 114);
    }

    #[test]
    fn a_file_opened_here_reports_size_and_file_system() {
        let p = std::env::temp_dir().join(format!("ioswitch-sys-{}", std::process::id()));
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        let fd = open(&c, libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC, 0o600).unwrap();
        set_file_size(&fd, 12345).unwrap();
        assert_eq!(file_size(&fd).unwrap(), 12345);
        assert!(fs_magic(&fd).is_some());
        assert!(blk_size(&fd).is_err(), "a regular file is no block device");
        let _ = std::fs::remove_file(&p);
        let missing = c"/nonexistent/ioswitch";
        assert_eq!(open(missing, libc::O_RDONLY, 0).unwrap_err().raw_os_error(), Some(libc::ENOENT));
        assert!(!exclusive_open_busy(missing));
    }
}
