//! `psync` and `block`: pread/pwrite/preadv/pwritev/fdatasync on a file descriptor.
//!
//! Trim and write zeroes use fallocate (hole punching, zero range) under `psync`, and the
//! block-layer ioctls BLKDISCARD / BLKZEROOUT under `block`.
//!
//! On zoned block devices the ZNS commands (zone management send / receive) run through
//! the block layer's zone ioctls (`be/zoned.rs`), under either name.

use super::{dsm_ranges, segments, Io, Op, SyncIo, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::spec::{errno_to_status, Status};
use crate::sys::io;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::RawFd;

/// `sync=psync`: pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching.
pub(crate) const PSYNC: Descriptor = Descriptor::new(
    "psync",
    Role::Sync,
    "pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching",
    |kind| match kind {
        DevKind::File | DevKind::Block | DevKind::NvmeBlock => None,
        DevKind::Ramdisk => Some("a ramdisk has no file descriptor; use sync=ramdisk"),
        DevKind::NvmeChar => Some("an NVMe generic char device has no read/write; use sync=nvme"),
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
        DevKind::NvmePci => Some(super::vfio::PCI_ONLY_VFIO),
    },
    Build::Sync(|dev| Ok(Box::new(Psync::new(dev, false)))),
)
.defaults(&[DevKind::File])
.fio(&["psync", "sync", "pvsync", "pvsync2"]);

/// `sync=block`: psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, sizes).
pub(crate) const BLOCK: Descriptor = Descriptor::new(
    "block",
    Role::Sync,
    "psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, zones)",
    |kind| match kind {
        DevKind::Block | DevKind::NvmeBlock => None,
        DevKind::File => Some("block-layer ioctls need a block device; use sync=psync"),
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
        DevKind::Ramdisk => Some("a ramdisk has no file descriptor; use sync=ramdisk"),
        DevKind::NvmeChar => Some("block-layer ioctls need a block device"),
        DevKind::NvmePci => Some(super::vfio::PCI_ONLY_VFIO),
    },
    Build::Sync(|dev| Ok(Box::new(Psync::new(dev, true)))),
)
.defaults(&[DevKind::Block, DevKind::NvmeBlock]);

pub(crate) struct Psync {
    fd: RawFd,
    block: bool,
    lba_size: u64,
    /// Zone commands through the block layer's zone ioctls (zoned block devices).
    zoned: Option<super::zoned::ZonedBlock>,
}

fn status(e: std::io::Error) -> Status {
    errno_to_status(e.raw_os_error().unwrap_or(libc::EIO))
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
            // One buffer: pread/pwrite straight from it, no iovec to build (prepare
            // checked len <= buf.len()).
            let (fd, n) = (self.fd, len as usize);
            if if write { io::pwrite_all(fd, buf, n, offset) } else { io::pread_all(fd, buf, n, offset) } {
                return Ok(len);
            }
            // An error, or a short transfer: the general loop retries and reports.
        }
        self.rw_vectored(write, fua, offset, len, bufs)
    }

    /// [`rw`](Psync::rw) for several buffers, FUA, and transfers to retry.
    #[inline(never)]
    fn rw_vectored(&self, write: bool, fua: bool, offset: u64, len: u64, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let fd = self.fd;
        if write {
            let mut iov = [IoSlice::new(&[]); MAX_SEGMENTS];
            let n = iov.iter_mut().zip(segments(bufs, len)).map(|(v, s)| *v = IoSlice::new(s)).count();
            let mut iov = &mut iov[..n];
            retry(offset, len, |skip, off| {
                IoSlice::advance_slices(&mut iov, skip);
                if fua {
                    io::pwritev(fd, iov, off, libc::RWF_DSYNC)
                } else if iov.len() == 1 {
                    io::pwrite(fd, &iov[0], off)
                } else {
                    io::pwritev(fd, iov, off, 0)
                }
            })
        } else {
            let mut iov: [IoSliceMut<'_>; MAX_SEGMENTS] = std::array::from_fn(|_| IoSliceMut::new(&mut []));
            let n = iov.iter_mut().zip(segments(bufs, len)).map(|(v, s)| *v = IoSliceMut::new(s)).count();
            let mut iov = &mut iov[..n];
            retry(offset, len, |skip, off| {
                IoSliceMut::advance_slices(&mut iov, skip);
                if iov.len() == 1 {
                    io::pread(fd, &mut iov[0], off)
                } else {
                    io::preadv(fd, iov, off)
                }
            })
        }
    }

    fn punch(&self, offset: u64, len: u64, zero: bool) -> Result<(), Status> {
        if self.block {
            return io::blk_discard(self.fd, offset, len, zero).map_err(status);
        }
        let keep = libc::FALLOC_FL_KEEP_SIZE;
        let mode = if zero { libc::FALLOC_FL_ZERO_RANGE | keep } else { libc::FALLOC_FL_PUNCH_HOLE | keep };
        match io::fallocate(self.fd, mode, offset, len) {
            // Some file systems (tmpfs) cannot zero a range in place; a punched hole reads
            // back as zeroes, which is what write zeroes promises.
            Err(e) if zero && e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                io::fallocate(self.fd, libc::FALLOC_FL_PUNCH_HOLE | keep, offset, len).map_err(status)
            }
            r => r.map_err(status),
        }
    }
}

/// Moves `len` bytes from `offset` with `step(skip, offset + done)`, which first drops
/// the `skip` bytes the previous step moved from its iovecs: retries after EINTR and
/// short transfers; a step that moves nothing (the file shrank under us) is EIO.
fn retry(offset: u64, len: u64, mut step: impl FnMut(usize, u64) -> std::io::Result<usize>) -> Result<u64, Status> {
    let (mut done, mut skip) = (0u64, 0usize);
    while done < len {
        match step(skip, offset + done) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => skip = 0,
            Err(e) => return Err(status(e)),
            Ok(0) => return Err(errno_to_status(libc::EIO)),
            Ok(r) => {
                done += r as u64;
                skip = r;
            }
        }
    }
    Ok(done)
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
                io::fdatasync(self.fd).map_err(status)?;
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
