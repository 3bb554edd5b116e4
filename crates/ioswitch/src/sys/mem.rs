//! Memory mappings: mmap(2) of a descriptor as one shared [`Mapping`], copies in and out
//! of it, msync(2), and munmap(2) when it is dropped.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// A `MAP_SHARED` mapping of the first `len` bytes of a file or block device, owned until
/// drop. The memory is shared with the kernel and with every other user of the file, so
/// it is only ever copied in and out (never lent out as a reference that could alias).
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value until drop; every access
// goes through copies bounded by `len`, never through references.
unsafe impl Send for Mapping {}
// SAFETY: as above: concurrent calls only copy bytes in and out of the mapping.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// mmap(2): maps `len` bytes of `fd` from offset 0, shared, readable and (when
    /// `writable`) writable. `len` must not be 0 (EINVAL).
    pub(crate) fn shared(fd: RawFd, len: usize, writable: bool) -> io::Result<Mapping> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: a fresh mapping at an address the kernel chooses, so no existing memory
        // changes; the kernel checks fd and len.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p as *mut u8).expect("mmap returned a non-null address");
        Ok(Mapping { base, len })
    }

    /// The mapped length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Panics unless `off .. off + n` lies inside the mapping; returns its start.
    #[inline]
    fn at(&self, off: usize, n: usize) -> *mut u8 {
        assert!(off <= self.len && n <= self.len - off, "{n} bytes at {off} outside a mapping of {}", self.len);
        // SAFETY: off ≤ len, so the pointer stays inside (or one past) the mapping.
        unsafe { self.base.as_ptr().add(off) }
    }

    /// Copies `dst.len()` bytes from offset `off` of the mapping into `dst`.
    pub(crate) fn read_at(&self, off: usize, dst: &mut [u8]) {
        let m = self.at(off, dst.len());
        // SAFETY: m .. m + dst.len() lies inside the mapping (checked by `at`); dst is
        // memory of the caller, borrowed mutably, and not part of the mapping (a mapping
        // is never lent out as a slice).
        unsafe { std::ptr::copy_nonoverlapping(m, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` to offset `off` of the mapping.
    pub(crate) fn write_at(&self, off: usize, src: &[u8]) {
        let m = self.at(off, src.len());
        // SAFETY: as in read_at, the other way.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), m, src.len()) }
    }

    /// Zeroes `n` bytes at offset `off` of the mapping.
    pub(crate) fn zero(&self, off: usize, n: usize) {
        let m = self.at(off, n);
        // SAFETY: m .. m + n lies inside the mapping (checked by `at`).
        unsafe { std::ptr::write_bytes(m, 0, n) }
    }

    /// msync(2) with `MS_SYNC` over the whole mapping.
    pub(crate) fn sync(&self) -> io::Result<()> {
        // SAFETY: the whole mapping, which this value owns.
        if unsafe { libc::msync(self.base.as_ptr() as *mut libc::c_void, self.len, libc::MS_SYNC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly the mapping made in `shared`, and nothing refers to
        // it any more (its memory is never lent out).
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn copies_land_in_the_file_and_stay_inside_the_mapping() {
        let p = std::env::temp_dir().join(format!("ioswitch-sys-mem-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f.set_len(8192).unwrap();
        let m = Mapping::shared(f.as_raw_fd(), 8192, true).unwrap();
        m.write_at(8190, b"ab");
        m.zero(0, 4096);
        m.sync().unwrap();
        let mut b = [0u8; 2];
        m.read_at(8190, &mut b);
        assert_eq!(&b, b"ab");
        assert!(std::panic::catch_unwind(|| m.read_at(8191, &mut [0u8; 2])).is_err());
        assert_eq!(Mapping::shared(f.as_raw_fd(), 0, false).err().unwrap().raw_os_error(), Some(libc::EINVAL));
    }
}
