//! `mmap`: the device as a shared memory mapping (MAP_SHARED of the whole file or block
//! device). Reads and writes are memory copies between the mapping and the buffers; flush
//! is `msync(MS_SYNC)`; trim, write zeroes and DSM deallocate zero the range in the
//! mapping (reads return zeroes afterwards; the storage is not deallocated).
//!
//! A page the kernel cannot provide (an I/O error reading it in) raises SIGBUS in the copy;
//! the copy recovers from it (`sys::sigbus`) and the command completes with EIO (NVMe Data
//! Transfer Error, Do Not Retry), as a failed pread would; the process and the device keep
//! working.
//!
//! The mapping is shared with the kernel and with every other user of the file, as any
//! MAP_SHARED mapping is: like a disk, overlapping concurrent writes leave one of them.

use super::{dsm_dealloc, Io, Op, SyncIo};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::error::Error;
use crate::spec::{errno_to_status, Status};
use crate::sys::mem::{MapFault, Mapping};

/// The status of a command whose copy hit a page the kernel could not provide.
fn fault_status(_: MapFault) -> Status {
    errno_to_status(libc::EIO)
}

/// `sync=mmap`: a shared mapping of the file or block device.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "mmap",
    Role::Sync,
    "a shared memory mapping of the file or block device: reads and writes are memory copies, flush is msync",
    |kind| match kind {
        DevKind::File | DevKind::Block | DevKind::NvmeBlock => None,
        DevKind::Ramdisk => Some("a ramdisk is memory already; use sync=ramdisk"),
        DevKind::DevDax => Some("a devdax device is persistent memory, mapped with its alignment by sync=pmem"),
        DevKind::NvmePci => Some(super::vfio::PCI_ONLY_VFIO),
        _ => Some("only files and block devices can be memory-mapped"),
    },
    Build::Sync(|dev| Ok(Box::new(Mmap::new(dev)?))),
)
.fio(&["mmap"]);

pub(crate) struct Mmap {
    map: Mapping,
    lba_size: u64,
}

/// The length of a mapping of the whole device for `iface` (`mmap`, `pmem`); refused
/// where the device cannot be mapped.
pub(crate) fn map_len(dev: &Inner, iface: &str) -> Result<usize, Error> {
    let len = usize::try_from(dev.geo.bytes)
        .map_err(|_| dev.unsupported(iface, "the device is larger than the address space"))?;
    if len == 0 {
        return Err(dev.unsupported(iface, "an empty file cannot be mapped; give size= to extend it"));
    }
    if dev.opts.wronly {
        return Err(dev.unsupported(iface, "a mapping needs read access; wronly=1 excludes it"));
    }
    Ok(len)
}

impl Mmap {
    pub(crate) fn new(dev: &Inner) -> Result<Mmap, Error> {
        let len = map_len(dev, "sync=mmap")?;
        let map = Mapping::shared(dev.raw_fd(), len, !dev.opts.rdonly)
            .map_err(|e| super::os_error(&dev.uri, format!("mmap {len} bytes (sync=mmap)"), e))?;
        Ok(Mmap { map, lba_size: dev.geo.lba_size as u64 })
    }

    /// Zeroes `len` bytes at `off` (bounds checked by `prepare`).
    fn zero(&self, off: u64, len: u64) -> Result<(), Status> {
        self.map.zero(off as usize, len as usize).map_err(fault_status)
    }
}

impl SyncIo for Mmap {
    fn exec(&self, io: &Io, _cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        match io.op {
            Op::Read | Op::Write => {
                let mut pos = io.offset as usize;
                let end = pos + io.len as usize;
                debug_assert!(end <= self.map.len());
                for b in bufs.iter_mut() {
                    if pos == end {
                        break;
                    }
                    let n = (end - pos).min(b.len());
                    if io.op == Op::Read {
                        self.map.read_at(pos, &mut b[..n]).map_err(fault_status)?;
                    } else {
                        self.map.write_at(pos, &b[..n]).map_err(fault_status)?;
                    }
                    pos += n;
                }
                Ok(io.len)
            }
            Op::Flush => {
                self.map.sync().map_err(|e| errno_to_status(e.raw_os_error().unwrap_or(libc::EIO)))?;
                Ok(0)
            }
            Op::Trim | Op::WriteZeroes => {
                self.zero(io.offset, io.len)?;
                Ok(0)
            }
            Op::Dsm { nr, deallocate } => {
                dsm_dealloc(bufs, nr, deallocate, self.lba_size, |off, len| self.zero(off, len))
            }
            Op::Passthru => Err(errno_to_status(libc::EOPNOTSUPP)),
        }
    }

    fn syscalls_per_cmd(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use crate::be::testutil::{mapped_writes_reach_the_file_and_reads_see_it, open, open_uri, temp_in};

    #[test]
    fn writes_through_the_mapping_reach_the_file() {
        let t = temp_in(&std::env::temp_dir(), "mmap");
        let dev = open(&t, "sync=mmap,create=1,size=64KiB");
        mapped_writes_reach_the_file_and_reads_see_it(&dev, &t);
    }

    #[test]
    fn what_cannot_be_mapped_is_refused_at_open() {
        let t = temp_in(&std::env::temp_dir(), "mmap");
        std::fs::write(&t.0, b"").unwrap();
        let e = crate::Device::open(t.0.to_str().unwrap(), &"sync=mmap".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("empty file"), "{e}");
        let e = crate::Device::open("1MiB", &"sync=mmap".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("ramdisk") && e.contains("sync=mmap"), "{e}");
        let dev = open_uri(t.0.to_str().unwrap(), "size=4096");
        assert_eq!(dev.geometry().bytes, 4096);
    }
}
