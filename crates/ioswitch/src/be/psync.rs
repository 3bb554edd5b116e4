//! `psync` and `block`: pread/pwrite/preadv/pwritev/fdatasync on a file descriptor.
//!
//! Trim and write zeroes use fallocate (hole punching, zero range) under `psync`, and the
//! block-layer ioctls BLKDISCARD / BLKZEROOUT under `block`.
//!
//! On zoned block devices the ZNS commands (zone management send / receive) run through
//! the block layer's zone ioctls (`be/zoned.rs`), under either name.

use super::{dsm_ranges, fill_iovecs, Io, Op, SyncIo, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::spec::{errno_to_status, Status};
use std::io;
use std::os::fd::RawFd;

/// `sync=psync`: pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching.
pub(crate) const PSYNC: Descriptor = Descriptor {
    name: "psync",
    role: Role::Sync,
    summary: "pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching",
    refusal: |kind| match kind {
        DevKind::File | DevKind::Block | DevKind::NvmeBlock => None,
        DevKind::Ramdisk => Some("a ramdisk has no file descriptor; use sync=ramdisk"),
        DevKind::NvmeChar => Some("an NVMe generic char device has no read/write; use sync=nvme"),
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
    },
    default_for: &[DevKind::File],
    tunables: &[],
    fio_engines: &["psync", "sync", "pvsync", "pvsync2"],
    usable: super::always,
    build: Build::Sync(|dev| Ok(Box::new(Psync::new(dev, false)))),
};

/// `sync=block`: psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, sizes).
pub(crate) const BLOCK: Descriptor = Descriptor {
    name: "block",
    role: Role::Sync,
    summary: "psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, zones)",
    refusal: |kind| match kind {
        DevKind::Block | DevKind::NvmeBlock => None,
        DevKind::File => Some("block-layer ioctls need a block device; use sync=psync"),
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
        DevKind::Ramdisk => Some("a ramdisk has no file descriptor; use sync=ramdisk"),
        DevKind::NvmeChar => Some("block-layer ioctls need a block device"),
    },
    default_for: &[DevKind::Block, DevKind::NvmeBlock],
    tunables: &[],
    fio_engines: &[],
    usable: super::always,
    build: Build::Sync(|dev| Ok(Box::new(Psync::new(dev, true)))),
};

const BLKDISCARD: libc::c_ulong = 0x1277;
const BLKZEROOUT: libc::c_ulong = 0x127f;

pub(crate) struct Psync {
    fd: RawFd,
    block: bool,
    lba_size: u64,
    /// Zone commands through the block layer's zone ioctls (zoned block devices).
    zoned: Option<super::zoned::ZonedBlock>,
}

fn last_errno() -> Status {
    errno_to_status(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

impl Psync {
    pub(crate) fn new(dev: &Inner, block: bool) -> Psync {
        let blockdev = matches!(dev.ident.kind, crate::dev::DevKind::Block | crate::dev::DevKind::NvmeBlock);
        let zoned = (blockdev && dev.geo.zones.is_some()).then(|| super::zoned::ZonedBlock {
            fd: dev.raw_fd(),
            nsid: dev.ident.nsid,
            spl: (dev.geo.lba_size as u64 / 512).max(1),
            nlbas: dev.geo.nlbas,
        });
        Psync { fd: dev.raw_fd(), block, lba_size: dev.geo.lba_size as u64, zoned }
    }

    /// Reads or writes `len` bytes at `offset` through `bufs`, looping over short
    /// transfers (a signal, a huge request); a transfer that makes no progress is EIO.
    /// `fua` writes through to stable storage (pwritev2 with RWF_DSYNC).
    #[inline(always)]
    fn rw(&self, write: bool, fua: bool, offset: u64, len: u64, bufs: &mut [Buffer]) -> Result<u64, Status> {
        if let ([buf], false) = (&mut *bufs, fua) {
            // One buffer: pread/pwrite straight from it, no iovec to build.
            let p = buf.as_mut_ptr() as *mut libc::c_void;
            let r = if write {
                // SAFETY: p..p+len lies inside `buf` (prepare checked len <= buf.len()),
                // which `bufs` borrows for this call.
                unsafe { libc::pwrite(self.fd, p, len as usize, offset as libc::off_t) }
            } else {
                // SAFETY: as above; the buffer is borrowed mutably, so writing is allowed.
                unsafe { libc::pread(self.fd, p, len as usize, offset as libc::off_t) }
            };
            if r as u64 == len {
                return Ok(len);
            }
            // An error, or a short transfer: the general loop retries and reports.
        }
        self.rw_vectored(write, fua, offset, len, bufs)
    }

    /// [`rw`](Psync::rw) for several buffers, FUA, and transfers to retry.
    #[inline(never)]
    fn rw_vectored(&self, write: bool, fua: bool, offset: u64, len: u64, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_SEGMENTS];
        let n = fill_iovecs(bufs, len, &mut iov);
        let mut iov = &mut iov[..n];
        let mut done: u64 = 0;
        while done < len {
            let off = (offset + done) as libc::off_t;
            let r = if fua {
                // SAFETY: every iovec points into a buffer borrowed from `bufs`.
                unsafe { libc::pwritev2(self.fd, iov.as_ptr(), iov.len() as libc::c_int, off, libc::RWF_DSYNC) }
            } else if iov.len() == 1 {
                let (p, l) = (iov[0].iov_base, iov[0].iov_len);
                if write {
                    // SAFETY: p..p+l lies inside a buffer that `bufs` borrows for this call.
                    unsafe { libc::pwrite(self.fd, p, l, off) }
                } else {
                    // SAFETY: as above; the buffer is borrowed mutably, so writing is allowed.
                    unsafe { libc::pread(self.fd, p, l, off) }
                }
            } else if write {
                // SAFETY: every iovec points into a buffer borrowed from `bufs`.
                unsafe { libc::pwritev(self.fd, iov.as_ptr(), iov.len() as libc::c_int, off) }
            } else {
                // SAFETY: as above, borrowed mutably.
                unsafe { libc::preadv(self.fd, iov.as_ptr(), iov.len() as libc::c_int, off) }
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(errno_to_status(e.raw_os_error().unwrap_or(libc::EIO)));
            }
            if r == 0 {
                // End of file inside the device's range: the file shrank under us.
                return Err(errno_to_status(libc::EIO));
            }
            done += r as u64;
            iov = advance(iov, r as usize);
        }
        Ok(done)
    }

    fn punch(&self, offset: u64, len: u64, zero: bool) -> Result<(), Status> {
        if self.block {
            let range = [offset, len];
            let req = if zero { BLKZEROOUT } else { BLKDISCARD };
            // SAFETY: both ioctls read a [u64; 2] (start, length) through the pointer.
            if unsafe { libc::ioctl(self.fd, req as _, range.as_ptr()) } != 0 {
                return Err(last_errno());
            }
            return Ok(());
        }
        let keep = libc::FALLOC_FL_KEEP_SIZE;
        let mode = if zero { libc::FALLOC_FL_ZERO_RANGE | keep } else { libc::FALLOC_FL_PUNCH_HOLE | keep };
        // SAFETY: fallocate takes plain integers.
        let mut rc = unsafe { libc::fallocate(self.fd, mode, offset as libc::off_t, len as libc::off_t) };
        if rc != 0 && zero && io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP) {
            // Some file systems (tmpfs) cannot zero a range in place; a punched hole reads
            // back as zeroes, which is what write zeroes promises.
            // SAFETY: as above.
            rc = unsafe {
                libc::fallocate(self.fd, libc::FALLOC_FL_PUNCH_HOLE | keep, offset as libc::off_t, len as libc::off_t)
            };
        }
        if rc != 0 {
            return Err(last_errno());
        }
        Ok(())
    }
}

/// Drops the first `n` bytes from an iovec list.
fn advance(mut iov: &mut [libc::iovec], mut n: usize) -> &mut [libc::iovec] {
    while n > 0 && !iov.is_empty() {
        if n >= iov[0].iov_len {
            n -= iov[0].iov_len;
            iov = &mut iov[1..];
        } else {
            // SAFETY: n < iov_len, so the new base stays inside the same buffer.
            iov[0].iov_base = unsafe { (iov[0].iov_base as *mut u8).add(n) } as *mut libc::c_void;
            iov[0].iov_len -= n;
            n = 0;
        }
    }
    iov
}

impl SyncIo for Psync {
    fn exec(&self, io: &Io, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        match io.op {
            Op::Read => self.rw(false, false, io.offset, io.len, bufs),
            Op::Write => self.rw(true, cmd.is_fua(), io.offset, io.len, bufs),
            _ => self.exec_other(io, cmd, bufs),
        }
    }

    fn syscalls_per_cmd(&self) -> u64 {
        1
    }
}

impl Psync {
    /// Everything but reads and writes.
    #[inline(never)]
    fn exec_other(&self, io: &Io, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        match io.op {
            Op::Read | Op::Write => self.rw(io.op == Op::Write, cmd.is_fua(), io.offset, io.len, bufs),
            Op::Flush => {
                // SAFETY: fdatasync takes a descriptor.
                if unsafe { libc::fdatasync(self.fd) } != 0 {
                    return Err(last_errno());
                }
                Ok(0)
            }
            Op::Trim => self.punch(io.offset, io.len, false).map(|_| 0),
            Op::WriteZeroes => self.punch(io.offset, io.len, true).map(|_| 0),
            Op::Dsm { nr, deallocate } => {
                if deallocate {
                    for r in dsm_ranges(bufs, nr) {
                        self.punch(r.slba * self.lba_size, r.nlb as u64 * self.lba_size, false)?;
                    }
                }
                Ok(0)
            }
            Op::Passthru => match &self.zoned {
                Some(z) => z.exec(cmd, bufs),
                None => Err(errno_to_status(libc::EOPNOTSUPP)),
            },
        }
    }
}
