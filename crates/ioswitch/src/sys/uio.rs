//! The user-space driver's calls without an IOMMU (a PCI function bound to
//! uio_pci_generic, SPDK's uio mode): the function's BAR0 mapped through its sysfs
//! `resource0` file, its config space read and written through the sysfs `config` file,
//! and the physical address of a (pinned) page from `/proc/self/pagemap`.
//!
//! Nothing here checks what the device does with the addresses it is given: without an
//! IOMMU a bus-mastering device reaches all memory (docs/PCI.md).

use super::vfio::Bar;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// Maps a BAR's sysfs resource file (`/sys/bus/pci/devices/ADDR/resource0`), whose size
/// is the BAR's, for register access. The mapping outlives the file descriptor.
pub(crate) fn map_resource(path: &Path) -> io::Result<Bar> {
    let fd = super::open_path(path, libc::O_RDWR | libc::O_SYNC)?;
    let len = super::file_size(&fd)?;
    if len == 0 {
        return Err(io::Error::other(format!("{} is empty: the BAR is not a memory BAR", path.display())));
    }
    Bar::map_fd(fd.as_raw_fd(), 0, len as usize)
}

/// A PCI function's config space, through its sysfs `config` file (writes need root).
pub(crate) struct Config {
    fd: OwnedFd,
}

impl Config {
    /// Opens `path` (`/sys/bus/pci/devices/ADDR/config`) for reading and writing.
    pub(crate) fn open(path: &Path) -> io::Result<Config> {
        Ok(Config { fd: super::open_path(path, libc::O_RDWR)? })
    }

    /// Takes an exclusive lock (flock, non-blocking) on the file: one driver per
    /// controller, in this process or another, as VFIO's group gives with vfio-pci.
    /// EWOULDBLOCK becomes EBUSY.
    pub(crate) fn lock(&self) -> io::Result<()> {
        // SAFETY: flock on an open descriptor; no memory is involved.
        let rc = unsafe { libc::flock(self.fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        super::check(rc).map(drop).map_err(|e| match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => io::Error::from_raw_os_error(libc::EBUSY),
            _ => e,
        })
    }

    /// The 16-bit register at `off`.
    pub(crate) fn read16(&self, off: u64) -> io::Result<u16> {
        let mut b = [0u8; 2];
        let n = super::io::pread(self.fd.as_raw_fd(), &mut b, off)?;
        if n != 2 {
            return Err(io::Error::other(format!("short config space read: {n} of 2 bytes at {off:#x}")));
        }
        Ok(u16::from_le_bytes(b))
    }

    /// Writes the 16-bit register at `off`.
    pub(crate) fn write16(&self, off: u64, v: u16) -> io::Result<()> {
        let n = super::io::pwrite(self.fd.as_raw_fd(), &v.to_le_bytes(), off)?;
        if n != 2 {
            return Err(io::Error::other(format!("short config space write: {n} of 2 bytes at {off:#x}")));
        }
        Ok(())
    }
}

/// A `/proc/self/pagemap` entry: bit 63 page present, bits 0-54 the page frame number.
pub(crate) fn pagemap_pfn(entry: u64) -> Option<u64> {
    (entry >> 63 == 1).then_some(entry & ((1 << 55) - 1))
}

/// The physical address of the byte at `vaddr` of this process, which must be present
/// (populated) memory. A PFN of 0 is what the kernel shows a process without
/// CAP_SYS_ADMIN: an error saying so.
pub(crate) fn phys_addr(vaddr: u64) -> io::Result<u64> {
    let page = super::page_size() as u64;
    let fd = super::open_path(Path::new("/proc/self/pagemap"), libc::O_RDONLY)?;
    let mut b = [0u8; 8];
    let n = super::io::pread(fd.as_raw_fd(), &mut b, vaddr / page * 8)?;
    if n != 8 {
        return Err(io::Error::other(format!("short /proc/self/pagemap read: {n} of 8 bytes")));
    }
    match pagemap_pfn(u64::from_le_bytes(b)) {
        None => Err(io::Error::other(format!("page {vaddr:#x} is not present (/proc/self/pagemap)"))),
        Some(0) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "/proc/self/pagemap shows page frame 0: reading physical addresses needs CAP_SYS_ADMIN (run as root)",
        )),
        Some(pfn) => Ok(pfn * page + vaddr % page),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_config_file_is_busy_until_the_first_goes() {
        let p = std::env::temp_dir().join(format!("ioswitch-uio-config-{}", std::process::id()));
        std::fs::write(&p, [0u8; 64]).unwrap();
        let a = Config::open(&p).unwrap();
        a.lock().unwrap();
        let b = Config::open(&p).unwrap();
        assert_eq!(b.lock().unwrap_err().raw_os_error(), Some(libc::EBUSY));
        drop(a);
        b.lock().unwrap();
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn pagemap_entries_give_the_frame_only_when_present() {
        assert_eq!(pagemap_pfn(1 << 63 | 0x1234), Some(0x1234));
        assert_eq!(pagemap_pfn(1 << 63 | 1 << 55 | 0x1234), Some(0x1234), "soft-dirty is not part of the frame");
        assert_eq!(pagemap_pfn(0x1234), None, "not present");
        assert_eq!(pagemap_pfn(1 << 63), Some(0));
    }

    #[test]
    fn a_present_page_has_an_address_or_the_missing_capability_is_named() {
        let v = vec![1u8; 4096];
        match phys_addr(v.as_ptr() as u64) {
            Ok(pa) => assert_eq!(pa % 4096, v.as_ptr() as u64 % 4096, "same offset in the page"),
            Err(e) => assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}"),
        }
    }
}
