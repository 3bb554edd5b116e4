//! `ramdisk`: a device in process memory, given by a size. Many readers or one writer at a
//! time (a read-write lock), so queues on several threads can share it safely.

use super::{dsm_ranges, Io, Op, SyncIo};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::error::Error;
use crate::spec::{errno_to_status, Status};
use std::io;
use std::sync::RwLock;

/// `sync=ramdisk`: the memory of a ramdisk.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "ramdisk",
    Role::Sync,
    "memory of a ramdisk (a size as URI)",
    |kind| match kind {
        DevKind::Ramdisk => None,
        _ => Some("only a ramdisk (a size as URI, e.g. 1GiB) is served from memory"),
    },
    Build::Sync(|dev| Ok(Box::new(Ramdisk::new(dev)?))),
)
.defaults(&[DevKind::Ramdisk]);

pub(crate) struct Ramdisk {
    mem: RwLock<Vec<u8>>,
    lba_size: u64,
}

impl Ramdisk {
    pub(crate) fn new(dev: &Inner) -> Result<Ramdisk, Error> {
        let n = usize::try_from(dev.geo.bytes)
            .map_err(|_| Error::BadUri { uri: dev.uri.clone(), why: "ramdisk larger than the address space".into() })?;
        let mut v = Vec::new();
        let oom = io::Error::from(io::ErrorKind::OutOfMemory);
        v.try_reserve_exact(n)
            .map_err(|_| super::os_error(&dev.uri, format!("allocate {n} bytes of ramdisk memory"), oom))?;
        v.resize(n, 0);
        Ok(Ramdisk { mem: RwLock::new(v), lba_size: dev.geo.lba_size as u64 })
    }
}

impl SyncIo for Ramdisk {
    fn exec(&self, io: &Io, _cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let (off, len) = (io.offset as usize, io.len as usize);
        match io.op {
            Op::Read => {
                let mem = self.mem.read().unwrap_or_else(|p| p.into_inner());
                let mut pos = off;
                for b in bufs.iter_mut() {
                    let take = (off + len - pos).min(b.len());
                    b[..take].copy_from_slice(&mem[pos..pos + take]);
                    pos += take;
                }
                Ok(io.len)
            }
            Op::Write => {
                let mut mem = self.mem.write().unwrap_or_else(|p| p.into_inner());
                let mut pos = off;
                for b in bufs.iter() {
                    let take = (off + len - pos).min(b.len());
                    mem[pos..pos + take].copy_from_slice(&b[..take]);
                    pos += take;
                }
                Ok(io.len)
            }
            Op::Flush => Ok(0),
            Op::Trim | Op::WriteZeroes => {
                self.mem.write().unwrap_or_else(|p| p.into_inner())[off..off + len].fill(0);
                Ok(0)
            }
            Op::Dsm { nr, deallocate } => {
                if deallocate {
                    let mut mem = self.mem.write().unwrap_or_else(|p| p.into_inner());
                    for r in dsm_ranges(bufs, nr) {
                        let s = (r.slba * self.lba_size) as usize;
                        mem[s..s + (r.nlb as u64 * self.lba_size) as usize].fill(0);
                    }
                }
                Ok(0)
            }
            Op::Passthru => Err(errno_to_status(libc::EOPNOTSUPP)),
        }
    }

    fn syscalls_per_cmd(&self) -> u64 {
        0
    }
}
