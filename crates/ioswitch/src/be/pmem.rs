//! `pmem`: persistent memory without system calls. A file on a DAX file system is mapped
//! with `MAP_SHARED_VALIDATE | MAP_SYNC`, a devdax character device (`/dev/daxX.Y`) at an
//! address aligned to the device's alignment. Writes are persistent copies into the
//! mapping ([`crate::sys::pmem`]: non-temporal stores for large copies, ordinary stores
//! plus CLWB / CLFLUSHOPT / CLFLUSH for small ones) followed by one SFENCE, so a write
//! that completed is durable; flush is therefore a fence only. Reads are memory copies.
//! Trim and write zeroes zero the range the same way.
//!
//! Where the kernel refuses `MAP_SYNC` (the file is not on a DAX file system) the open
//! fails and says so; `pmem_force=1` (libpmem's `PMEM_IS_PMEM_FORCE`) maps such a file
//! with plain `MAP_SHARED` and runs the same instructions on it, for measurements on
//! ordinary memory (`/dev/shm`): nothing there is durable beyond the page cache.
//!
//! `pmem_populate=1` maps with `MAP_POPULATE`: the page faults of the whole mapping are
//! taken at open instead of at each page's first access inside the I/O (what a DAX user
//! who pre-faults gets). It costs time and page tables at open in proportion to the size
//! (on 4 KiB pages one page-table entry per 4 KiB: a 256 MiB tmpfs file is 65 536 of them,
//! mapped by about 4 100 faults at open, 16 pages each); where the memory is mapped in
//! 2 MiB units (a devdax device with 2 MiB alignment, a huge-page mapping) there are few
//! faults either way. The kernel populates a shared mapping with read faults; a writable
//! one is then populated for writing too (`MADV_POPULATE_WRITE`, Linux 5.14), so that on a
//! DAX file with `MAP_SYNC`, whose file system tracks the first store to each page
//! (`page_mkwrite`, which allocates its blocks), the stores take no fault either. On an
//! older kernel that step is refused and the stores to a DAX file fault once per page, as
//! `PmemInfo::populate_writes` (false) says.
//!
//! A page the kernel cannot provide (a poisoned page of pmem, a page beyond the end of a
//! file that another user shrank) raises SIGBUS in the copy; each command's copies, zeroing
//! and fence run under one guard ([`crate::sys::sigbus::guarded`]), so the command
//! completes with EIO (NVMe Data Transfer Error, Do Not Retry) and the process and the
//! device keep working. A lent range ([`Device::pmem_range`](crate::Device::pmem_range))
//! offers the same guard for copies ([`PmemSlice::read_at`](crate::PmemSlice::read_at),
//! [`write_at`](crate::PmemSlice::write_at)); plain loads and stores through it are the
//! application's own, as with libpmem: a SIGBUS there ends the process unless the
//! application handles it.
//!
//! Ranges lent to the application ([`Device::pmem_range`](crate::Device::pmem_range))
//! are not reachable through the command API while lent: a read or write overlapping one
//! fails with EBUSY.

use super::{dsm_dealloc, Io, Op, SyncIo};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::spec::{errno_to_status, Status};
#[cfg(test)]
use crate::sys::pmem::Flush;
use crate::sys::pmem::{fence, MapMode, PmemMap};

/// The status of a command whose copy hit a page the kernel could not provide (SIGBUS),
/// as a failed pread's EIO would be.
fn fault_status(_at: Option<usize>) -> Status {
    errno_to_status(libc::EIO)
}

/// `sync=pmem`: persistent memory mapped from a DAX file or a devdax device.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "pmem",
    Role::Sync,
    "persistent memory (DAX file with MAP_SYNC, or devdax): writes are made durable with cache write-backs or non-temporal stores and a fence, flush is a fence",
    refusal,
    Build::Sync(|dev| Ok(Box::new(Pmem::new(dev)?))),
)
.defaults(&[DevKind::DevDax])
.tunables(&[("pmem_force", None), ("pmem_populate", None)])
.fio(&["libpmem", "dev-dax"])
.usable(usable);

fn refusal(kind: DevKind) -> Option<&'static str> {
    match kind {
        DevKind::File | DevKind::DevDax => None,
        DevKind::Ramdisk => Some("a ramdisk is process memory, not persistent memory; use sync=ramdisk"),
        DevKind::Block | DevKind::NvmeBlock => {
            Some("a block device is not byte-addressable memory; pmem maps a file on a DAX file system or /dev/daxX.Y")
        }
        DevKind::NvmeChar | DevKind::NvmeCtrl => {
            Some("an NVMe device is not byte-addressable memory; pmem maps a file on a DAX file system or /dev/daxX.Y")
        }
        DevKind::NvmePci => Some(super::vfio::PCI_ONLY_VFIO),
    }
}

fn usable() -> bool {
    cfg!(target_arch = "x86_64")
}

/// How a `pmem` device's memory was mapped, for identity and benchmark reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PmemInfo {
    /// `fsdax` (a file mapped with MAP_SYNC), `devdax`, or `forced` (`pmem_force=1` on
    /// memory that is not known to be persistent).
    pub mode: &'static str,
    /// Whether `pmem_force=1` was given.
    pub forced: bool,
    /// Whether `pmem_populate=1` was given: the mapping was made with `MAP_POPULATE`
    /// (its page faults taken at open).
    pub populate: bool,
    /// Whether the populated mapping was also populated for writing
    /// (`MADV_POPULATE_WRITE`, Linux 5.14): false when read-only, not populated, or on an
    /// older kernel, where a DAX file's first store to each page still faults once.
    pub populate_writes: bool,
    /// The cache-line write-back instruction (`clwb`, `clflushopt`, `clflush`).
    pub flush: &'static str,
    /// Copies of at least this many bytes use non-temporal stores.
    pub nt_threshold: usize,
    /// The alignment the mapping's address has (a devdax device's; the page size
    /// otherwise).
    pub align: u64,
}

/// The alignment a devdax device of `len` bytes is mapped at: its sysfs alignment (the
/// page size where sysfs gives none or less). device-dax refuses a mapping whose start or
/// end is not a multiple of it (`check_vma`: "unaligned vma") and faults in units of it,
/// so the one mapping of the whole device, from offset 0, must end on it: a size that is
/// not a multiple is refused here, naming both numbers, rather than by mmap's EINVAL.
///
/// Nothing else a user gives reaches the kernel's alignment rules: `size=` is refused on
/// a device at open (it applies to regular files), the mapping always starts at offset 0,
/// command offsets and lengths are loads and stores inside that mapping (any byte), and
/// `pmem_range` lends a slice of it without a new mapping. So no other offset is refused.
fn devdax_align(len: u64, sysfs_align: Option<u64>, page: u64) -> Result<u64, String> {
    let align = sysfs_align.unwrap_or(page).max(page);
    if !align.is_power_of_two() {
        return Err(format!("the device's alignment {align} is not a power of two"));
    }
    if len % align != 0 {
        return Err(format!(
            "the device's size {len} is not a multiple of its alignment {align}: device-dax maps only whole \
             units of its alignment"
        ));
    }
    Ok(align)
}

pub(crate) struct Pmem {
    pub(crate) map: PmemMap,
    pub(crate) info: PmemInfo,
    lba_size: u64,
}

impl Pmem {
    pub(crate) fn new(dev: &Inner) -> Result<Pmem, Error> {
        let iface = "sync=pmem";
        let len = super::mmap::map_len(dev, iface)?;
        if dev.opts.direct {
            return Err(dev.unsupported(iface, "direct=1 means nothing to memory stores; leave it out"));
        }
        let force = dev.opts.pmem_force;
        let page = crate::sys::page_size() as u64;
        let (mode, map_mode, align) = match dev.ident.kind {
            DevKind::DevDax => {
                let align = devdax_align(len as u64, dev.ident.dax.as_ref().map(|d| d.align), page)
                    .map_err(|why| dev.unsupported(iface, &why))?;
                ("devdax", MapMode::Shared, align)
            }
            _ if force => ("forced", MapMode::Shared, page),
            _ => ("fsdax", MapMode::Sync, page),
        };
        let writable = !dev.opts.rdonly;
        let populate = dev.opts.pmem_populate;
        let mapped = PmemMap::map(dev.raw_fd(), len, writable, map_mode, align as usize, populate);
        let map = mapped.map_err(|e| match (map_mode, e.raw_os_error()) {
            (MapMode::Sync, Some(libc::EOPNOTSUPP | libc::EINVAL)) => dev.unsupported(
                iface,
                &format!(
                    "the kernel refused MAP_SYNC ({e}): the file is not on a DAX file system{}, so stores to it \
                         are not persistent; pmem_force=1 runs pmem on it anyway (for measurements; nothing is \
                         made durable beyond the page cache)",
                    dev.ident.driver.as_deref().map(|d| format!(" (it is on {d})")).unwrap_or_default()
                ),
            ),
            _ => Error::Os {
                dev: dev.uri.clone(),
                what: if populate {
                    // The error may be the populating madvise's (a page the kernel cannot provide).
                    format!("mmap {len} bytes (sync=pmem, {mode}) and populate them (pmem_populate=1)")
                } else {
                    format!("mmap {len} bytes (sync=pmem, {mode})")
                },
                source: e,
            },
        })?;
        let info = PmemInfo {
            mode,
            forced: force,
            populate,
            populate_writes: map.populated_for_writes(),
            flush: map.flush_kind().as_str(),
            nt_threshold: crate::sys::pmem::NT_THRESHOLD,
            align,
        };
        Ok(Pmem { map, info, lba_size: dev.geo.lba_size as u64 })
    }

    /// `off + n` when `off .. off + n` lies inside the mapping (checked before a guard,
    /// inside which a failed bounds check could not unwind) and is not lent out; else LBA
    /// Out of Range (ERANGE), or EBUSY.
    #[inline]
    fn in_map(&self, off: usize, n: usize) -> Result<usize, Status> {
        match off.checked_add(n) {
            Some(end) if end <= self.map.len() && !self.map.overlaps_lent(off, n) => Ok(end),
            Some(end) if end <= self.map.len() => Err(errno_to_status(libc::EBUSY)),
            _ => Err(errno_to_status(libc::ERANGE)),
        }
    }

    /// The write-back instruction in use.
    #[cfg(test)]
    pub(crate) fn flush(&self) -> Flush {
        self.map.flush_kind()
    }
}

impl SyncIo for Pmem {
    fn exec(&self, io: &Io, _cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        match io.op {
            Op::Read | Op::Write => {
                let start = io.offset as usize;
                let end = self.in_map(start, io.len as usize)?;
                let (map, read) = (&self.map, io.op == Op::Read);
                // One guard for the command's copies and its fence.
                map.guarded(|| {
                    let mut pos = start;
                    for b in bufs.iter_mut() {
                        if pos == end {
                            break;
                        }
                        let n = (end - pos).min(b.len());
                        if read {
                            map.read_at(pos, &mut b[..n]);
                        } else {
                            map.write_at(pos, &b[..n]);
                        }
                        pos += n;
                    }
                    if !read {
                        fence();
                    }
                })
                .map_err(fault_status)?;
                Ok(io.len)
            }
            // Every completed write is durable already: the fence orders this flush after
            // them (and after stores made through lent ranges, which `persist` covers).
            Op::Flush => {
                fence();
                Ok(0)
            }
            Op::Trim | Op::WriteZeroes => {
                let (off, n) = (io.offset as usize, io.len as usize);
                self.in_map(off, n)?;
                let map = &self.map;
                map.guarded(|| {
                    map.zero(off, n);
                    fence();
                })
                .map_err(fault_status)?;
                Ok(0)
            }
            Op::Dsm { nr, deallocate } => {
                dsm_dealloc(bufs, nr, deallocate, self.lba_size, |off, n| {
                    let (off, n) = (off as usize, n as usize);
                    self.in_map(off, n)?;
                    let map = &self.map;
                    map.guarded(|| map.zero(off, n)).map_err(fault_status)
                })?;
                if deallocate {
                    fence();
                }
                Ok(0)
            }
            Op::Passthru => Err(errno_to_status(libc::EOPNOTSUPP)),
        }
    }

    fn syscalls_per_cmd(&self) -> u64 {
        0
    }

    fn pmem(&self) -> Option<&Pmem> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use crate::be::testutil::{mapped_writes_reach_the_file_and_reads_see_it, open, temp_in};

    fn shm() -> std::path::PathBuf {
        let p = std::path::PathBuf::from("/dev/shm");
        if p.is_dir() {
            p
        } else {
            std::env::temp_dir()
        }
    }

    #[test]
    fn forced_pmem_writes_reach_the_file_and_reads_see_it() {
        let t = temp_in(&shm(), "pmem");
        let dev = open(&t, "sync=pmem,pmem_force=1,create=1,size=64KiB");
        let p = dev.pmem().unwrap();
        assert!(p.forced && p.mode == "forced");
        mapped_writes_reach_the_file_and_reads_see_it(&dev, &t);
    }

    #[test]
    fn populated_pmem_writes_reach_the_file_and_reads_see_it() {
        let t = temp_in(&shm(), "pmem-populate");
        let dev = open(&t, "sync=pmem,pmem_force=1,pmem_populate=1,create=1,size=64KiB");
        let p = dev.pmem().unwrap();
        assert!(p.forced && p.populate && p.populate_writes && p.mode == "forced", "{p:?}");
        mapped_writes_reach_the_file_and_reads_see_it(&dev, &t);
        // Read-only, populated: the file's bytes, as written above.
        let ro = open(&t, "sync=pmem,pmem_force=1,pmem_populate=1,rdonly=1");
        assert!(
            ro.pmem().unwrap().populate && !ro.pmem().unwrap().populate_writes,
            "read-only: populated for reads only"
        );
        let mut b = ro.alloc(65536).unwrap();
        ro.pass(&crate::cmd::Cmd::fs_read(0, 65536), std::slice::from_mut(&mut b)).unwrap();
        assert_eq!(&b[..], &std::fs::read(&t.0).unwrap()[..]);
        // Without the option nothing says populated.
        assert!(!open(&t, "sync=pmem,pmem_force=1").pmem().unwrap().populate);
    }

    #[test]
    fn pmem_populate_belongs_to_pmem() {
        let t = temp_in(&shm(), "pmem-populate");
        std::fs::write(&t.0, vec![0u8; 8192]).unwrap();
        for other in ["sync=psync", "sync=mmap", "async=thrpool,sync=psync"] {
            let e = crate::Device::open(t.0.to_str().unwrap(), &format!("{other},pmem_populate=1").parse().unwrap())
                .unwrap_err()
                .to_string();
            assert!(e.contains("pmem_populate") && e.contains("sync=pmem"), "{other}: {e}");
        }
    }

    #[test]
    fn a_file_that_is_not_dax_is_refused_without_pmem_force() {
        let t = temp_in(&shm(), "pmem");
        std::fs::write(&t.0, vec![0u8; 8192]).unwrap();
        let e = crate::Device::open(t.0.to_str().unwrap(), &"sync=pmem".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("MAP_SYNC") && e.contains("not on a DAX file system") && e.contains("pmem_force=1"), "{e}");
        let e = crate::Device::open("1MiB", &"sync=pmem".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("sync=pmem") && e.contains("not persistent memory"), "{e}");
        let e = crate::Device::open(t.0.to_str().unwrap(), &"sync=psync,pmem_force=1".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("pmem_force") && e.contains("sync=pmem"), "{e}");
        let e = crate::Device::open(t.0.to_str().unwrap(), &"sync=pmem,pmem_force=1,direct=1".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("direct=1"), "{e}");
    }

    /// The status of a failed command, or a panic naming what happened instead.
    fn status_of(r: crate::Result<u64>, what: &str) -> crate::spec::Status {
        match r {
            Err(crate::Error::Command { status, .. }) => status,
            other => panic!("{what}: expected a command error, got {other:?}"),
        }
    }

    /// A file shrunk under the mapping (pages beyond its end raise SIGBUS, as a poisoned
    /// DAX page does): every command touching them completes with EIO, synchronously and
    /// through a queue (another thread), and the device and the process keep working.
    #[test]
    fn a_sigbus_in_a_pmem_command_is_eio_and_the_device_keeps_working() {
        use crate::cmd::Cmd;
        let t = temp_in(&shm(), "pmem-sigbus");
        for opts in
            ["sync=pmem,pmem_force=1,create=1,size=64KiB", "sync=pmem,async=thrpool,pmem_force=1,create=1,size=64KiB"]
        {
            let dev = open(&t, opts);
            let mut w = dev.alloc(16384).unwrap();
            w.fill(7);
            dev.pass(&Cmd::fs_write(0, 16384), std::slice::from_mut(&mut w)).unwrap();
            // Cut the file to 2.5 pages: the pages from 12 KiB on are beyond its end.
            std::fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len(8192 + 2048).unwrap();
            let eio = |r: crate::Result<u64>, what: &str| {
                let st = status_of(r, &format!("{opts}: {what}"));
                assert_eq!(st.errno(), Some(libc::EIO), "{opts}: {what}: {st}");
            };
            let mut r = dev.alloc(8192).unwrap();
            // A read across the end (the copy starts on a readable page), a read wholly
            // beyond it, a large write (non-temporal body), a short write (stores + write-back),
            // write zeroes and trim.
            eio(dev.pass(&Cmd::fs_read(8192, 8192), std::slice::from_mut(&mut r)), "read across the end");
            eio(dev.pass(&Cmd::fs_read(32768, 4096), std::slice::from_mut(&mut r)), "read beyond the end");
            eio(dev.pass(&Cmd::fs_write(40960, 8192), std::slice::from_mut(&mut w)), "8 KiB write");
            let mut small = dev.alloc(512).unwrap();
            eio(dev.pass(&Cmd::fs_write(16384, 512), std::slice::from_mut(&mut small)), "512 B write");
            let nsid = dev.ident().nsid;
            let lba = dev.geometry().lba_size as u64;
            eio(dev.pass(&Cmd::write_zeroes(nsid, 49152 / lba, (4096 / lba) as u32), &mut []), "write zeroes");
            eio(dev.pass(&Cmd::fs_trim(53248, 4096), &mut []), "trim");
            // Through a queue: the command runs on another thread, and completes with EIO.
            let mut q = dev.queue(2).unwrap();
            q.submit(&Cmd::fs_read(16384, 4096), dev.alloc(4096).unwrap().into(), 1).map_err(|e| e.error).unwrap();
            let mut got = None;
            q.drain(|c| got = Some((c.tag, c.status))).unwrap();
            let (tag, st) = got.expect("a completion");
            assert_eq!((tag, st.errno()), (1, Some(libc::EIO)), "{opts}: queued read: {st}");
            // The device keeps working where the file is.
            let mut b = dev.alloc(4096).unwrap();
            dev.pass(&Cmd::fs_read(0, 4096), std::slice::from_mut(&mut b)).unwrap();
            assert!(b.iter().all(|&x| x == 7), "{opts}");
            b.fill(9);
            dev.pass(&Cmd::fs_write(4096, 4096), std::slice::from_mut(&mut b)).unwrap();
            assert_eq!(std::fs::read(&t.0).unwrap()[4096..8192], [9u8; 4096][..], "{opts}");
            // Grown again, the pages are there again (zeroes from the file's new tail).
            std::fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len(65536).unwrap();
            dev.pass(&Cmd::fs_read(32768, 4096), std::slice::from_mut(&mut b)).unwrap();
            assert!(b.iter().all(|&x| x == 0), "{opts}");
        }
    }

    /// A lent range's guarded copies: they read and write the same bytes the command API
    /// and the slice see, a write is in the file without `persist`, out-of-range requests
    /// are refused naming the range, and a page beyond a shrunk file's end gives EIO
    /// (read and write, large and short) while the range and the device keep working.
    #[test]
    fn a_lent_range_copies_under_the_sigbus_guard() {
        use crate::cmd::Cmd;
        let t = temp_in(&shm(), "pmem-lent-guard");
        let dev = open(&t, "sync=pmem,pmem_force=1,create=1,size=64KiB");
        let mut s = dev.pmem_range(4096, 32768).unwrap();
        let data: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        // A large (non-temporal body) and a short (stores + write-back) write.
        s.write_at(100, &data).unwrap();
        s.write_at(9000, &data[..40]).unwrap();
        assert_eq!(&s[100..100 + 8192], &data[..]);
        let mut back = vec![0u8; 8192];
        s.read_at(100, &mut back).unwrap();
        assert_eq!(back, data);
        let file = std::fs::read(&t.0).unwrap();
        assert_eq!(&file[4096 + 100..4096 + 100 + 8192], &data[..]);
        assert_eq!(&file[4096 + 9000..4096 + 9040], &data[..40]);
        // Stores through the slice read back through read_at.
        s[0] = 0x5a;
        let mut one = [0u8; 1];
        s.read_at(0, &mut one).unwrap();
        assert_eq!(one[0], 0x5a);
        // Out of the range: refused, nothing copied.
        let e = s.read_at(32760, &mut [0u8; 16]).unwrap_err().to_string();
        assert!(e.contains("read_at") && e.contains("16 bytes at 32760") && e.contains("32768-byte"), "{e}");
        let e = s.write_at(usize::MAX, b"x").unwrap_err().to_string();
        assert!(e.contains("write_at") && e.contains("past the end"), "{e}");
        // Cut the file to 5 KiB: the range from its offset 4096 (device offset 8192) on is
        // beyond the end.
        std::fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len(5120).unwrap();
        let eio = |r: crate::Result<()>, what: &str| match r {
            Err(crate::Error::Os { source, what: w, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::EIO), "{what}: {w}");
                assert!(w.contains("could not provide a page") && w.contains("device offset 4096"), "{what}: {w}");
            }
            other => panic!("{what}: expected EIO, got {other:?}"),
        };
        eio(s.read_at(0, &mut back), "read across the end");
        eio(s.read_at(20000, &mut back[..100]), "read beyond the end");
        eio(s.write_at(12288, &data), "8 KiB write");
        eio(s.write_at(16384, &data[..64]), "64 B write");
        // The range's first kilobyte is still in the file; the device keeps working.
        s.read_at(0, &mut one).unwrap();
        assert_eq!(one[0], 0x5a);
        drop(s);
        let mut b = dev.alloc(4096).unwrap();
        b.fill(3);
        dev.pass(&Cmd::fs_write(0, 4096), std::slice::from_mut(&mut b)).unwrap();
        assert_eq!(std::fs::read(&t.0).unwrap()[..4096], [3u8; 4096][..]);
    }

    #[test]
    fn a_devdax_mapping_is_aligned_and_must_cover_whole_units() {
        use super::devdax_align;
        const MIB: u64 = 1 << 20;
        assert_eq!(devdax_align(64 * MIB, Some(2 * MIB), 4096), Ok(2 * MIB));
        assert!(devdax_align(64 * MIB, Some(1 << 30), 4096).unwrap_err().contains("not a multiple"));
        // No alignment in sysfs, or one below the page size: the page size.
        assert_eq!(devdax_align(8192, None, 4096), Ok(4096));
        assert_eq!(devdax_align(8192, Some(512), 4096), Ok(4096));
        let e = devdax_align(3 * MIB, Some(2 * MIB), 4096).unwrap_err();
        assert!(e.contains(&(3 * MIB).to_string()) && e.contains(&(2 * MIB).to_string()), "{e}");
        assert!(devdax_align(6 * 4096, Some(3 * 4096), 4096).unwrap_err().contains("power of two"));
    }

    #[test]
    fn the_instruction_in_use_is_the_detected_one() {
        let t = temp_in(&shm(), "pmem");
        let dev = open(&t, "sync=pmem,pmem_force=1,create=1,size=4KiB");
        let d = dev.inner.sync().unwrap().pmem().unwrap();
        assert_eq!(d.flush(), crate::sys::pmem::Flush::detect());
        assert_eq!(dev.pmem().unwrap().flush, d.flush().as_str());
    }
}
