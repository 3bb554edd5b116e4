//! `psync` and `block`: pread/pwrite/preadv/pwritev/fdatasync on a file descriptor.
//!
//! `psync_call` picks the calls that move data, as fio's engines do: pread/pwrite
//! (`psync`, the default), lseek + read/write (`sync`: the seek is skipped when the file
//! position is already there; the two calls and the position are held under a lock, so
//! queues of several threads sharing the device never interleave them), preadv/pwritev
//! (`pvsync`), preadv2/pwritev2 with `RWF_HIPRI` when `rwf_hipri` is set (`pvsync2`).
//!
//! Trim and write zeroes use fallocate (hole punching, zero range) under `psync`, and the
//! block-layer ioctls BLKDISCARD / BLKZEROOUT under `block`.
//!
//! On zoned block devices the ZNS commands (zone management send / receive) run through
//! the block layer's zone ioctls (`be/zoned.rs`), under either name.

use super::{dsm_dealloc, segments, Io, Op, SyncIo, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::opts::PsyncCall;
use crate::spec::{errno_to_status, Status};
use crate::sys::io;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::RawFd;
use std::sync::Mutex;

/// `sync=psync`: pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching.
pub(crate) const PSYNC: Descriptor = Descriptor::new(
    "psync",
    Role::Sync,
    "pread/pwrite/preadv/pwritev/fdatasync; trim by hole punching",
    refusal,
    Build::Sync(|dev| Ok(build(dev, false))),
)
.defaults(&[DevKind::File])
.tunables(TUNABLES)
.fio(&["psync", "sync", "pvsync", "pvsync2"]);

/// Why `psync` cannot serve a kind of device (`block` says more for files and NVMe
/// char devices): where the async interfaces on a descriptor cannot ([`needs_fd`](super::needs_fd)),
/// naming the sync interface to use instead of a ramdisk or an NVMe char device.
fn refusal(kind: DevKind) -> Option<&'static str> {
    match kind {
        DevKind::Ramdisk => Some("a ramdisk has no file descriptor; use sync=ramdisk"),
        DevKind::NvmeChar => Some("an NVMe generic char device has no read/write; use sync=nvme"),
        _ => super::needs_fd(kind),
    }
}

/// The tunables of both rows (fio selects the calls by engine name, not by an option).
const TUNABLES: &[(&str, Option<&str>)] = &[("psync_call", None), ("rwf_hipri", None)];

/// `sync=block`: psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, sizes).
pub(crate) const BLOCK: Descriptor = Descriptor::new(
    "block",
    Role::Sync,
    "psync plus the block-layer ioctls (BLKDISCARD, BLKZEROOUT, zones)",
    |kind| match kind {
        DevKind::File => Some("block-layer ioctls need a block device; use sync=psync"),
        DevKind::NvmeChar => Some("block-layer ioctls need a block device"),
        _ => refusal(kind),
    },
    Build::Sync(|dev| Ok(build(dev, true))),
)
.defaults(&[DevKind::Block, DevKind::NvmeBlock])
.tunables(TUNABLES);

/// The interface for `dev` (`block`: with the block-layer ioctls). The calls are chosen
/// at open: with pread/pwrite (the default) the one-buffer fast path is compiled in, so a
/// read or write does not test which calls to make.
fn build(dev: &Inner, block: bool) -> Box<dyn super::SyncIo> {
    match dev.opts.psync_call.unwrap_or_default() {
        PsyncCall::Pread => Box::new(Psync::<true>::new(dev, block)),
        _ => Box::new(Psync::<false>::new(dev, block)),
    }
}

/// psync and block; `PREAD`: the calls are pread/pwrite (`call` is `PsyncCall::Pread`).
pub(crate) struct Psync<const PREAD: bool> {
    fd: RawFd,
    block: bool,
    /// The calls that move data.
    call: PsyncCall,
    /// `RWF_*` flags of preadv2/pwritev2 (`RWF_HIPRI`).
    rwf: libc::c_int,
    /// `PsyncCall::Read`: where the file position is (`None`: not known), held for the
    /// whole seek + transfer.
    pos: Mutex<Option<u64>>,
    lba_size: u64,
    /// Zone commands through the block layer's zone ioctls (zoned block devices).
    zoned: Option<super::zoned::ZonedBlock>,
}

/// The status of a failed one-buffer transfer, or `None` for EINTR (the general loop
/// sends it again).
#[cold]
#[inline(never)]
fn failed(e: std::io::Error) -> Option<Status> {
    (e.raw_os_error() != Some(libc::EINTR)).then(|| status(e))
}

fn status(e: std::io::Error) -> Status {
    errno_to_status(e.raw_os_error().unwrap_or(libc::EIO))
}

impl<const PREAD: bool> Psync<PREAD> {
    /// Only [`build`] picks `PREAD`, from the same option as `call`.
    fn new(dev: &Inner, block: bool) -> Psync<PREAD> {
        let blockdev = matches!(dev.ident.kind, crate::dev::DevKind::Block | crate::dev::DevKind::NvmeBlock);
        let zoned = (blockdev && dev.geo.zones.is_some()).then(|| super::zoned::ZonedBlock {
            fd: dev.raw_fd(),
            nsid: dev.ident.nsid,
            spl: (dev.geo.lba_size as u64 / 512).max(1),
            nlbas: dev.geo.nlbas,
        });
        Psync {
            fd: dev.raw_fd(),
            block,
            call: dev.opts.psync_call.unwrap_or_default(),
            rwf: if dev.opts.rwf_hipri { libc::RWF_HIPRI } else { 0 },
            pos: Mutex::new(None),
            lba_size: dev.geo.lba_size as u64,
            zoned,
        }
    }

    /// Reads or writes `len` bytes at `offset` through `bufs`, looping over short
    /// transfers (a signal, a huge request); a transfer that makes no progress is EIO, and
    /// a failed call ends the command with its errno (never sent again).
    /// `fua` writes through to stable storage (pwritev2 with RWF_DSYNC).
    #[inline(always)]
    fn rw(&self, write: bool, fua: bool, offset: u64, len: u64, bufs: &mut [Buffer]) -> Result<u64, Status> {
        if let ([buf], false, true) = (&mut *bufs, fua, PREAD) {
            // One buffer: pread/pwrite straight from it, no iovec to build (prepare
            // checked len <= buf.len()).
            let (fd, n) = (self.fd, len as usize);
            let r = if write { io::pwrite_upto(fd, buf, n, offset) } else { io::pread_upto(fd, buf, n, offset) };
            if r as u64 == len {
                return Ok(len);
            }
            if r < 0 {
                // The device's error is the command's, reported once: sent again, the
                // command would run twice and a passing fault (a timeout) would be hidden.
                if let Some(s) = failed(std::io::Error::last_os_error()) {
                    return Err(s);
                }
            }
            // A signal, or a short transfer: the general loop retries and reports.
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
            let rwf = self.rwf | if fua { libc::RWF_DSYNC } else { 0 };
            if self.call == PsyncCall::Read && !fua {
                return self.at_position(offset, len, |skip| {
                    IoSlice::advance_slices(&mut iov, skip);
                    io::writev(fd, iov)
                });
            }
            retry(offset, len, |skip, off| {
                IoSlice::advance_slices(&mut iov, skip);
                match self.call {
                    PsyncCall::Preadv2 => io::pwritev2(fd, iov, off, rwf),
                    _ if rwf != 0 => io::pwritev(fd, iov, off, rwf),
                    PsyncCall::Pread if iov.len() == 1 => io::pwrite(fd, &iov[0], off),
                    _ => io::pwritev(fd, iov, off, 0),
                }
            })
        } else {
            let mut iov: [IoSliceMut<'_>; MAX_SEGMENTS] = std::array::from_fn(|_| IoSliceMut::new(&mut []));
            let n = iov.iter_mut().zip(segments(bufs, len)).map(|(v, s)| *v = IoSliceMut::new(s)).count();
            let mut iov = &mut iov[..n];
            if self.call == PsyncCall::Read {
                return self.at_position(offset, len, |skip| {
                    IoSliceMut::advance_slices(&mut iov, skip);
                    io::readv(fd, iov)
                });
            }
            retry(offset, len, |skip, off| {
                IoSliceMut::advance_slices(&mut iov, skip);
                match self.call {
                    PsyncCall::Preadv2 => io::preadv2(fd, iov, off, self.rwf),
                    PsyncCall::Pread if iov.len() == 1 => io::pread(fd, &mut iov[0], off),
                    _ => io::preadv(fd, iov, off),
                }
            })
        }
    }

    /// fio's `sync` engine: seeks to `offset` unless the file position is there already,
    /// then moves `len` bytes with `step(skip)` at the file position (see [`retry`]),
    /// all under the position lock. After an error the position is not known.
    fn at_position(
        &self,
        offset: u64,
        len: u64,
        mut step: impl FnMut(usize) -> std::io::Result<usize>,
    ) -> Result<u64, Status> {
        let mut pos = self.pos.lock().unwrap_or_else(|e| e.into_inner());
        let moved = retry(offset, len, |skip, off| {
            if *pos != Some(off) {
                *pos = None;
                io::seek(self.fd, off)?;
                *pos = Some(off);
            }
            let n = step(skip)?;
            *pos = Some(off + n as u64);
            Ok(n)
        });
        if moved.is_err() {
            *pos = None;
        }
        moved
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

impl<const PREAD: bool> SyncIo for Psync<PREAD> {
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

impl<const PREAD: bool> Psync<PREAD> {
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
                dsm_dealloc(bufs, nr, deallocate, self.lba_size, |off, len| self.punch(off, len, false))
            }
            Op::Passthru => match &self.zoned {
                Some(z) => z.exec(cmd, bufs),
                None => Err(errno_to_status(libc::EOPNOTSUPP)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::testutil::{buf, open, pattern, temp_in};
    use crate::Device;

    const CALLS: &[&str] = &["", ",psync_call=pread", ",psync_call=read", ",psync_call=preadv", ",psync_call=preadv2"];

    /// The file position of the device's descriptor.
    fn position(dev: &Device) -> u64 {
        io::position(dev.inner.raw_fd()).unwrap()
    }

    /// 4 KiB read at `off` through `Device::pass`.
    fn read(dev: &Device, off: u64) -> Buffer {
        let mut b = [dev.alloc(4096).unwrap()];
        dev.pass(&Cmd::fs_read(off, 4096), &mut b).unwrap();
        let [b] = b;
        b
    }

    #[test]
    fn every_call_writes_and_reads_back_one_and_several_buffers() {
        for call in CALLS
            .iter()
            .map(|c| format!("sync=psync,create=1,size=1MiB{c}"))
            .chain(["sync=psync,create=1,size=1MiB,psync_call=preadv2,rwf_hipri=1".to_string()])
        {
            let t = temp_in(&std::env::temp_dir(), "psync");
            let dev = open(&t, &call);
            let data = pattern(3, 3 * 4096);
            // Backwards, so every transfer of the `read` call needs its seek.
            for (i, off) in [(0u64, 65536u64), (1, 8192), (2, 0)] {
                let chunk = &data[i as usize * 4096..][..4096];
                dev.pass(&Cmd::fs_write(off, 4096), &mut [buf(&dev, chunk)]).unwrap();
            }
            let mut bufs: Vec<Buffer> = data.chunks(4096).map(|c| buf(&dev, c)).collect();
            dev.pass(&Cmd::fs_write(131072, data.len() as u64), &mut bufs).unwrap();
            for (i, off) in [(2u64, 0u64), (1, 8192), (0, 65536)] {
                assert!(read(&dev, off)[..] == data[i as usize * 4096..][..4096], "{call}: at {off}");
            }
            let mut bufs: Vec<Buffer> = (0..3).map(|_| dev.alloc(4096).unwrap()).collect();
            dev.pass(&Cmd::fs_read(131072, data.len() as u64), &mut bufs).unwrap();
            let got: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            assert!(got == data, "{call}: vectored");
        }
    }

    #[test]
    fn only_the_read_call_moves_the_file_position() {
        for call in CALLS {
            let t = temp_in(&std::env::temp_dir(), "psync");
            let dev = open(&t, &format!("sync=psync,create=1,size=1MiB{call}"));
            read(&dev, 8192);
            let want = if call.ends_with("=read") { 12288 } else { 0 };
            assert_eq!(position(&dev), want, "{call:?}");
        }
    }

    #[test]
    fn the_read_call_seeks_only_when_the_offset_is_not_where_the_last_transfer_ended() {
        let t = temp_in(&std::env::temp_dir(), "psync");
        let dev = open(&t, "sync=psync,create=1,size=1MiB,psync_call=read");
        let data = pattern(5, 8192);
        dev.pass(&Cmd::fs_write(4096, 4096), &mut [buf(&dev, &data[4096..])]).unwrap();
        dev.pass(&Cmd::fs_write(0, 4096), &mut [buf(&dev, &data[..4096])]).unwrap();
        assert_eq!(position(&dev), 4096);
        // The next transfer starts where the last ended: no seek, so a position moved
        // by someone else shows (fio's sync engine skips the seek the same way).
        io::seek(dev.inner.raw_fd(), 0).unwrap();
        assert!(read(&dev, 4096)[..] == data[..4096], "no seek for a sequential transfer, as fio");
        assert!(read(&dev, 4096)[..] == data[4096..], "the position it believed was right again");
        assert!(read(&dev, 0)[..] == data[..4096], "a seek for any other offset");
    }

    #[test]
    fn the_read_call_keeps_seek_and_transfer_together_across_threads() {
        let t = temp_in(&std::env::temp_dir(), "psync");
        let dev = open(&t, "sync=psync,create=1,size=4MiB,psync_call=read");
        std::thread::scope(|s| {
            for th in 0..2u64 {
                let dev = &dev;
                s.spawn(move || {
                    for i in 0..256u64 {
                        let blk = i * 2 + th;
                        dev.pass(&Cmd::fs_write(blk * 4096, 4096), &mut [buf(dev, &pattern(blk, 4096))]).unwrap();
                    }
                });
            }
        });
        for blk in 0..512u64 {
            assert!(read(&dev, blk * 4096)[..] == pattern(blk, 4096)[..], "block {blk}");
        }
    }

    #[test]
    fn hipri_sets_rwf_hipri_and_needs_preadv2() {
        let t = temp_in(&std::env::temp_dir(), "psync");
        let dev = open(&t, "sync=psync,create=1,size=1MiB,psync_call=preadv2,rwf_hipri=1");
        let p = Psync::<false>::new(&dev.inner, false);
        assert_eq!((p.call, p.rwf), (PsyncCall::Preadv2, libc::RWF_HIPRI));
        let o: crate::Opts = "sync=psync,create=1,size=1MiB,psync_call=preadv".parse().unwrap();
        let p = Psync::<false>::new(&Device::open(t.0.to_str().unwrap(), &o).unwrap().inner, false);
        assert_eq!((p.call, p.rwf), (PsyncCall::Preadv, 0));
        let e = "sync=psync,rwf_hipri=1".parse::<crate::Opts>().unwrap_err().to_string();
        assert!(e.contains("psync_call=preadv2"), "{e}");
    }

    #[test]
    fn the_calls_are_tunables_of_psync_and_block_only() {
        let t = temp_in(&std::env::temp_dir(), "psync");
        let o: crate::Opts = "sync=nil,create=1,size=1MiB,psync_call=read".parse().unwrap();
        let e = Device::open(t.0.to_str().unwrap(), &o).unwrap_err().to_string();
        assert!(e.contains("psync_call") && e.contains("sync=psync"), "{e}");
    }
}
