//! Memory mappings: [`Mapped`], the owner of every mapping the library keeps (unmapped
//! when it is dropped), and on it mmap(2) of a descriptor as one shared [`Mapping`], copies
//! in and out of it and msync(2). The copies survive a SIGBUS (a page the kernel cannot
//! read or write, e.g. a media error under the mapping): they go through
//! [`super::sigbus`] and return [`MapFault`] instead of ending the process.

use libc::c_int;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

use super::sigbus;

/// A copy in or out of a [`Mapping`] stopped by a SIGBUS: the kernel could not provide the
/// page at `off` (an I/O error reading it in, a page beyond the end of a truncated file).
/// The bytes before it were copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MapFault {
    /// The offset in the mapping of the byte whose access faulted.
    pub(crate) off: usize,
}

impl std::fmt::Display for MapFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SIGBUS (the kernel could not provide the page) at offset {} of the mapping", self.off)
    }
}

/// A range of address space mapped with mmap(2), owned until drop, when it is unmapped:
/// the one owner of the mappings the library keeps ([`Mapping`], a device's BAR, DMA
/// memory, persistent memory). It never reads or writes its memory itself; it hands out
/// bounds-checked raw pointers into it, and the type that holds it says, at each access,
/// why that access is sound (volatile register accesses, copies, lent ranges).
pub(crate) struct Mapped {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Mapped` is an address range this value alone unmaps; its safe methods only
// compute addresses, and every access through them is `unsafe` in the holder, which
// states there what makes it sound from any thread.
unsafe impl Send for Mapped {}
// SAFETY: as above: shared references give out addresses, never access the memory.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// mmap(2) of `len` bytes of `fd` from `offset` (see [`mmap`]).
    pub(crate) fn map(len: usize, prot: c_int, flags: c_int, fd: RawFd, offset: u64) -> io::Result<Mapped> {
        Ok(Mapped { base: mmap(len, prot, flags, fd, offset)?, len })
    }

    /// Takes over a mapping made by the caller.
    ///
    /// # Safety
    /// `base .. base + len` must be exactly one mapping the caller made, which nothing
    /// else unmaps or refers to once this returns.
    pub(crate) unsafe fn adopt(base: NonNull<u8>, len: usize) -> Mapped {
        Mapped { base, len }
    }

    /// The mapped length in bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The start address.
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// The start of `off .. off + n` when that lies inside the mapping.
    #[inline]
    pub(crate) fn range(&self, off: usize, n: usize) -> Option<*mut u8> {
        (off <= self.len && n <= self.len - off).then(|| self.base.as_ptr().wrapping_add(off))
    }

    /// The offset in the mapping of address `at`, when it lies inside.
    pub(crate) fn offset_of(&self, at: usize) -> Option<usize> {
        (self.addr()..self.addr() + self.len).contains(&at).then(|| at - self.addr())
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly one mapping made by `map` or handed over to
        // `adopt`, unmapped once, here; the holder's borrows of it have ended.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// A `MAP_SHARED` mapping of the first `len` bytes of a file or block device, owned until
/// drop. The memory is shared with the kernel and with every other user of the file, so
/// it is only ever copied in and out (never lent out as a reference that could alias).
pub(crate) struct Mapping {
    map: Mapped,
}

/// mmap(2) of `len` bytes of `fd` from `offset` (anonymous memory: `fd` -1 with
/// `MAP_ANONYMOUS`) at an address the kernel chooses (`MAP_FIXED` is dropped from `flags`):
/// the start of a new mapping, which the caller owns and unmaps.
pub(crate) fn mmap(len: usize, prot: c_int, flags: c_int, fd: RawFd, offset: u64) -> io::Result<NonNull<u8>> {
    let flags = flags & !libc::MAP_FIXED;
    // SAFETY: a fresh mapping at an address the kernel chooses (no MAP_FIXED), so no
    // existing memory changes; the kernel checks the descriptor, offset and length.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset as libc::off_t) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(NonNull::new(p as *mut u8).expect("mmap returned a non-null address"))
}

impl Mapping {
    /// mmap(2): maps `len` bytes of `fd` from offset 0, shared, readable and (when
    /// `writable`) writable. `len` must not be 0 (EINVAL). Installs the SIGBUS handler of
    /// [`super::sigbus`] first (once per process).
    pub(crate) fn shared(fd: RawFd, len: usize, writable: bool) -> io::Result<Mapping> {
        sigbus::install()?;
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        Ok(Mapping { map: Mapped::map(len, prot, libc::MAP_SHARED, fd, 0)? })
    }

    /// The mapped length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Panics unless `off .. off + n` lies inside the mapping; returns its start.
    #[inline]
    fn at(&self, off: usize, n: usize) -> *mut u8 {
        self.map.range(off, n).unwrap_or_else(|| panic!("{n} bytes at {off} outside a mapping of {}", self.map.len()))
    }

    /// Copies `dst.len()` bytes from offset `off` of the mapping into `dst`; a page the
    /// kernel cannot read ends the copy with [`MapFault`].
    pub(crate) fn read_at(&self, off: usize, dst: &mut [u8]) -> Result<(), MapFault> {
        let m = self.at(off, dst.len());
        // SAFETY: m .. m + dst.len() lies inside the mapping (checked by `at`); dst is
        // memory of the caller, borrowed mutably, and not part of the mapping (a mapping
        // is never lent out as a slice).
        unsafe { sigbus::copy(dst.as_mut_ptr(), m, dst.len()) }.map_err(|f| MapFault { off: off + f.done })
    }

    /// Copies `src` to offset `off` of the mapping; a page the kernel cannot provide ends
    /// the copy with [`MapFault`].
    pub(crate) fn write_at(&self, off: usize, src: &[u8]) -> Result<(), MapFault> {
        let m = self.at(off, src.len());
        // SAFETY: as in read_at, the other way.
        unsafe { sigbus::copy(m, src.as_ptr(), src.len()) }.map_err(|f| MapFault { off: off + f.done })
    }

    /// Zeroes `n` bytes at offset `off` of the mapping; a page the kernel cannot provide
    /// ends it with [`MapFault`].
    pub(crate) fn zero(&self, off: usize, n: usize) -> Result<(), MapFault> {
        let m = self.at(off, n);
        // SAFETY: m .. m + n lies inside the mapping (checked by `at`).
        unsafe { sigbus::zero(m, n) }.map_err(|f| MapFault { off: off + f.done })
    }

    /// msync(2) with `MS_SYNC` over the whole mapping.
    pub(crate) fn sync(&self) -> io::Result<()> {
        let (base, len) = (self.map.addr() as *mut libc::c_void, self.map.len());
        // SAFETY: the whole mapping, which this value owns.
        super::check(unsafe { libc::msync(base, len, libc::MS_SYNC) }).map(drop)
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
        m.write_at(8190, b"ab").unwrap();
        m.zero(0, 4096).unwrap();
        m.sync().unwrap();
        let mut b = [0u8; 2];
        m.read_at(8190, &mut b).unwrap();
        assert_eq!(&b, b"ab");
        assert!(std::panic::catch_unwind(|| m.read_at(8191, &mut [0u8; 2])).is_err());
        assert_eq!(Mapping::shared(f.as_raw_fd(), 0, false).err().unwrap().raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn a_sigbus_in_a_copy_is_an_error_and_the_process_lives_on() {
        let p = std::env::temp_dir().join(format!("ioswitch-sys-mem-sigbus-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f.set_len(4 * 4096).unwrap();
        let m = Mapping::shared(f.as_raw_fd(), 4 * 4096, true).unwrap();
        m.write_at(0, &[7u8; 4096]).unwrap();
        // Cut the file to one page and a half: the kernel raises SIGBUS on any access to a
        // page of the mapping wholly beyond the end of the file (mmap(2)).
        f.set_len(4096 + 2048).unwrap();
        let mut b = vec![1u8; 4096];
        assert_eq!(m.read_at(4096, &mut b), Ok(()), "the page holding the end of the file reads (zeroes past it)");
        assert!(b.iter().all(|&x| x == 0));
        // A read across the end: the bytes of the readable page are copied, then the fault.
        let mut b = vec![1u8; 4096 + 100];
        assert_eq!(m.read_at(4096 + 4000, &mut b), Err(MapFault { off: 8192 }));
        assert!(b[..96].iter().all(|&x| x == 0), "the bytes before the fault were copied");
        assert!(b[96..].iter().all(|&x| x == 1), "nothing after the fault was written");
        // Writes and zeroing beyond the end, and a read wholly beyond it.
        assert_eq!(m.write_at(3 * 4096 + 5, &[9u8; 10]), Err(MapFault { off: 3 * 4096 + 5 }));
        assert_eq!(m.zero(2 * 4096, 4096), Err(MapFault { off: 2 * 4096 }));
        assert_eq!(m.read_at(2 * 4096 + 1, &mut [0u8; 1]), Err(MapFault { off: 2 * 4096 + 1 }));
        // The process is alive and the mapping keeps working where the file is.
        let mut b = [0u8; 4096];
        m.read_at(0, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 7));
        m.write_at(100, b"after").unwrap();
        m.read_at(100, &mut b[..5]).unwrap();
        assert_eq!(&b[..5], b"after");
        // Grown again, the pages are readable again (zeroes from the file's new tail).
        f.set_len(4 * 4096).unwrap();
        let mut b = [1u8; 4096];
        m.read_at(3 * 4096, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        assert!(
            MapFault { off: 8192 }.to_string().contains("SIGBUS")
                && MapFault { off: 8192 }.to_string().contains("8192")
        );
    }
}
