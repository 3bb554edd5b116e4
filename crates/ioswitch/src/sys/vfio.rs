//! VFIO (`linux/vfio.h`): the container/group interface of the type1 IOMMU driver, a
//! device's regions (PCI config space, BAR0 mapped for volatile register access), DMA
//! mappings into the IOMMU, and 2 MiB hugepage memory for what the device reads and
//! writes ([`DmaMem`]).
//!
//! The guest kernel (Debian 6.1) offers the container/group interface
//! (`/dev/vfio/vfio` + `/dev/vfio/GROUP`) with `vfio_iommu_type1`; iommufd is not used.

use super::mem::Mapped;
use crate::buf::{Buffer, Owner};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

const VFIO_TYPE: u64 = b';' as u64;
const VFIO_BASE: u64 = 100;
/// `_IO(VFIO_TYPE, VFIO_BASE + n)`: every VFIO ioctl is encoded without size or direction.
const fn vfio_io(n: u64) -> u64 {
    (VFIO_TYPE << 8) | (VFIO_BASE + n)
}
const GET_API_VERSION: u64 = vfio_io(0);
const CHECK_EXTENSION: u64 = vfio_io(1);
const SET_IOMMU: u64 = vfio_io(2);
const GROUP_GET_STATUS: u64 = vfio_io(3);
const GROUP_SET_CONTAINER: u64 = vfio_io(4);
const GROUP_GET_DEVICE_FD: u64 = vfio_io(6);
const DEVICE_GET_REGION_INFO: u64 = vfio_io(8);
const IOMMU_MAP_DMA: u64 = vfio_io(13);
const IOMMU_UNMAP_DMA: u64 = vfio_io(14);

/// `VFIO_API_VERSION`.
const API_VERSION: i32 = 0;
/// `VFIO_TYPE1v2_IOMMU`.
const TYPE1V2_IOMMU: u64 = 3;
/// `VFIO_GROUP_FLAGS_VIABLE`: every device of the group is bound to vfio (or no driver).
const GROUP_VIABLE: u32 = 1;
/// `VFIO_REGION_INFO_FLAG_MMAP`.
const REGION_MMAP: u32 = 4;
/// `VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE`.
const DMA_READ_WRITE: u32 = 3;

/// `VFIO_PCI_BAR0_REGION_INDEX`.
pub(crate) const BAR0_REGION: u32 = 0;
/// `VFIO_PCI_CONFIG_REGION_INDEX`.
pub(crate) const CONFIG_REGION: u32 = 7;

/// The size of a huge page [`DmaMem`] is made of.
pub(crate) const HUGEPAGE: usize = 2 << 20;

#[repr(C)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct RegionInfoRaw {
    argsz: u32,
    flags: u32,
    index: u32,
    cap_offset: u32,
    size: u64,
    offset: u64,
}

#[repr(C)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

#[repr(C)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

/// ioctl(2) with an integer or pointer argument; the return value or the OS error.
///
/// # Safety
/// `arg` must be what the request expects: a plain integer, or a pointer to a live
/// value of the request's structure (with `argsz` set) that the kernel may read and
/// write during the call.
unsafe fn ioctl(fd: RawFd, req: u64, arg: libc::c_ulong) -> io::Result<i32> {
    // SAFETY: the caller guarantees arg matches req.
    super::check(unsafe { libc::ioctl(fd, req as libc::c_ulong, arg) })
}

/// A VFIO container (`/dev/vfio/vfio`): one IOMMU address space.
pub(crate) struct Container {
    fd: OwnedFd,
}

impl Container {
    /// Opens `/dev/vfio/vfio` and checks the API version and type1v2 IOMMU support.
    pub(crate) fn open() -> io::Result<Container> {
        let fd = super::open_path(Path::new("/dev/vfio/vfio"), libc::O_RDWR)?;
        // SAFETY: GET_API_VERSION takes no argument.
        let v = unsafe { ioctl(fd.as_raw_fd(), GET_API_VERSION, 0) }?;
        if v != API_VERSION {
            return Err(io::Error::other(format!("VFIO API version {v}, expected {API_VERSION}")));
        }
        // SAFETY: CHECK_EXTENSION takes an integer.
        let has = unsafe { ioctl(fd.as_raw_fd(), CHECK_EXTENSION, TYPE1V2_IOMMU as libc::c_ulong) }?;
        if has == 0 {
            return Err(io::Error::other("the type1v2 IOMMU (vfio_iommu_type1) is not available"));
        }
        Ok(Container { fd })
    }

    /// VFIO_SET_IOMMU (type1v2): only after a group was added.
    pub(crate) fn set_iommu(&self) -> io::Result<()> {
        // SAFETY: SET_IOMMU takes an integer.
        unsafe { ioctl(self.fd.as_raw_fd(), SET_IOMMU, TYPE1V2_IOMMU as libc::c_ulong) }.map(drop)
    }

    /// VFIO_IOMMU_MAP_DMA: the device may read and write `len` bytes of this process's
    /// memory at `vaddr` through the addresses `iova..iova + len` (the kernel pins them).
    pub(crate) fn map_dma(&self, vaddr: u64, iova: u64, len: u64) -> io::Result<()> {
        let mut m = DmaMap { argsz: size_of::<DmaMap>() as u32, flags: DMA_READ_WRITE, vaddr, iova, size: len };
        // SAFETY: m is a live vfio_iommu_type1_dma_map with argsz set.
        unsafe { ioctl(self.fd.as_raw_fd(), IOMMU_MAP_DMA, &mut m as *mut DmaMap as libc::c_ulong) }.map(drop)
    }

    /// VFIO_IOMMU_UNMAP_DMA of `iova..iova + len`.
    pub(crate) fn unmap_dma(&self, iova: u64, len: u64) -> io::Result<()> {
        let mut m = DmaUnmap { argsz: size_of::<DmaUnmap>() as u32, flags: 0, iova, size: len };
        // SAFETY: m is a live vfio_iommu_type1_dma_unmap with argsz set.
        unsafe { ioctl(self.fd.as_raw_fd(), IOMMU_UNMAP_DMA, &mut m as *mut DmaUnmap as libc::c_ulong) }.map(drop)
    }
}

/// A VFIO group (`/dev/vfio/N`).
pub(crate) struct Group {
    fd: OwnedFd,
}

impl Group {
    /// Opens `/dev/vfio/<group>`.
    pub(crate) fn open(group: u32) -> io::Result<Group> {
        Ok(Group { fd: super::open_path(Path::new(&format!("/dev/vfio/{group}")), libc::O_RDWR)? })
    }

    /// Whether every device of the group is bound to vfio-pci (or to no driver).
    pub(crate) fn viable(&self) -> io::Result<bool> {
        let mut s = GroupStatus { argsz: size_of::<GroupStatus>() as u32, flags: 0 };
        // SAFETY: s is a live vfio_group_status with argsz set.
        unsafe { ioctl(self.fd.as_raw_fd(), GROUP_GET_STATUS, &mut s as *mut GroupStatus as libc::c_ulong) }?;
        Ok(s.flags & GROUP_VIABLE != 0)
    }

    /// VFIO_GROUP_SET_CONTAINER.
    pub(crate) fn set_container(&self, c: &Container) -> io::Result<()> {
        let raw: i32 = c.fd.as_raw_fd();
        // SAFETY: the argument points at a live int holding the container's descriptor.
        unsafe { ioctl(self.fd.as_raw_fd(), GROUP_SET_CONTAINER, &raw as *const i32 as libc::c_ulong) }.map(drop)
    }

    /// VFIO_GROUP_GET_DEVICE_FD for the device named `name` (a PCI address).
    pub(crate) fn device(&self, name: &str) -> io::Result<Device> {
        let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the argument is a valid C string, read during the call.
        let raw = unsafe { ioctl(self.fd.as_raw_fd(), GROUP_GET_DEVICE_FD, c.as_ptr() as libc::c_ulong) }?;
        // SAFETY: raw is a new descriptor that nothing else owns.
        Ok(Device { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }
}

/// A region of a VFIO device (a BAR, the config space).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    /// Its size in bytes.
    pub size: u64,
    /// Its offset in the device descriptor (for pread/pwrite/mmap).
    pub offset: u64,
    /// Whether it can be mmap'ed.
    pub mmap: bool,
}

/// A VFIO device descriptor.
pub(crate) struct Device {
    fd: OwnedFd,
}

impl Device {
    /// VFIO_DEVICE_GET_REGION_INFO of region `index`.
    pub(crate) fn region(&self, index: u32) -> io::Result<Region> {
        let mut r = RegionInfoRaw { argsz: size_of::<RegionInfoRaw>() as u32, index, ..Default::default() };
        // SAFETY: r is a live vfio_region_info with argsz set (no capability chain asked).
        unsafe { ioctl(self.fd.as_raw_fd(), DEVICE_GET_REGION_INFO, &mut r as *mut RegionInfoRaw as libc::c_ulong) }?;
        Ok(Region { size: r.size, offset: r.offset, mmap: r.flags & REGION_MMAP != 0 })
    }

    /// Reads `buf.len()` bytes at `off` of a region (pread on the device descriptor).
    pub(crate) fn read_region(&self, r: &Region, off: u64, buf: &mut [u8]) -> io::Result<()> {
        let n = super::io::pread(self.fd.as_raw_fd(), buf, r.offset + off)?;
        if n != buf.len() {
            return Err(io::Error::other(format!("short region read: {n} of {} bytes", buf.len())));
        }
        Ok(())
    }

    /// Writes `buf` at `off` of a region (pwrite on the device descriptor).
    pub(crate) fn write_region(&self, r: &Region, off: u64, buf: &[u8]) -> io::Result<()> {
        let n = super::io::pwrite(self.fd.as_raw_fd(), buf, r.offset + off)?;
        if n != buf.len() {
            return Err(io::Error::other(format!("short region write: {n} of {} bytes", buf.len())));
        }
        Ok(())
    }

    /// Maps a region that allows it (BAR0) for register access.
    pub(crate) fn map(&self, r: &Region) -> io::Result<Bar> {
        if !r.mmap || r.size == 0 {
            return Err(io::Error::other("the region cannot be mmap'ed"));
        }
        Bar::map_fd(self.fd.as_raw_fd(), r.offset, r.size as usize)
    }
}

/// A mapped BAR: device registers, accessed with volatile, naturally aligned 32- and
/// 64-bit loads and stores inside its bounds (a register offset outside it panics).
///
/// Shared between threads as it is: every access is a bounds-checked volatile load or
/// store of one register, which the device serialises.
pub(crate) struct Bar {
    map: Mapped,
}

impl Bar {
    /// Maps `len` bytes at `offset` of `fd` (a VFIO device region, a sysfs `resourceN`
    /// file) shared, for register access.
    pub(crate) fn map_fd(fd: RawFd, offset: u64, len: usize) -> io::Result<Bar> {
        Ok(Bar { map: Mapped::map(len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, offset)? })
    }

    #[inline]
    fn at(&self, off: usize, n: usize) -> *mut u8 {
        self.map
            .range(off, n)
            .filter(|_| off % n == 0)
            .unwrap_or_else(|| panic!("register {off:#x} ({n} bytes) outside a BAR of {}", self.map.len()))
    }
    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
    /// A 32-bit register.
    #[inline]
    pub(crate) fn read32(&self, off: usize) -> u32 {
        // SAFETY: in bounds and 4-byte aligned (checked by `at`), in a live mapping.
        unsafe { std::ptr::read_volatile(self.at(off, 4) as *const u32) }
    }
    /// Writes a 32-bit register.
    #[inline]
    pub(crate) fn write32(&self, off: usize, v: u32) {
        // SAFETY: in bounds and 4-byte aligned (checked by `at`), in a live mapping.
        unsafe { std::ptr::write_volatile(self.at(off, 4) as *mut u32, v) }
    }
    /// A 64-bit register, as two 32-bit loads (low first), which every controller
    /// accepts.
    #[inline]
    pub(crate) fn read64(&self, off: usize) -> u64 {
        self.read32(off) as u64 | (self.read32(off + 4) as u64) << 32
    }
    /// Writes a 64-bit register as two 32-bit stores (low first).
    #[inline]
    pub(crate) fn write64(&self, off: usize, v: u64) {
        self.write32(off, v as u32);
        self.write32(off + 4, (v >> 32) as u32);
    }
}

/// Memory made of 2 MiB huge pages (`MAP_HUGETLB`, populated and locked in place by the
/// kernel's hugetlb pool), which a device reads and writes by DMA. Accessed only through
/// the bounds-checked methods below; its bytes are handed out as [`Buffer`]s by
/// [`Chunk::lend`].
///
/// Shared between threads as it is: the methods copy with volatile accesses, and the parts
/// handed out as buffers are disjoint (the caller's allocator guarantees it). Unmapped
/// when dropped, after every buffer carved out of it (each holds it alive).
///
/// [`Buffer`]: crate::buf::Buffer
pub(crate) struct DmaMem {
    map: Mapped,
}

impl DmaMem {
    /// Maps `len` bytes (rounded up to whole 2 MiB pages) of hugepage memory, zeroed.
    /// ENOMEM means the hugetlb pool has too few free pages (`vm.nr_hugepages`).
    pub(crate) fn alloc(len: usize) -> io::Result<DmaMem> {
        let len = len.max(1).next_multiple_of(HUGEPAGE);
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_POPULATE;
        Ok(DmaMem { map: Mapped::map(len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)? })
    }

    /// Locks it in memory (mlock): a hugetlb page is never swapped nor migrated while
    /// mapped, and the lock says so to the kernel for a device that gets its physical
    /// address (no IOMMU pins it).
    pub(crate) fn pin(&self) -> io::Result<()> {
        let (base, len) = (self.map.addr() as *const libc::c_void, self.map.len());
        // SAFETY: base/len are exactly this mapping; mlock only changes its residency.
        super::check(unsafe { libc::mlock(base, len) }).map(drop)
    }

    /// Its start address.
    pub(crate) fn addr(&self) -> u64 {
        self.map.addr() as u64
    }
    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[inline]
    fn at(&self, off: usize, n: usize) -> *mut u8 {
        self.map.range(off, n).unwrap_or_else(|| panic!("{n} bytes at {off} outside DMA memory of {}", self.map.len()))
    }

    /// Copies `src` to offset `off` (a submission entry, a PRP list), with volatile
    /// stores: the device reads it after the doorbell write that follows.
    #[inline]
    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        let p = self.at(off, src.len());
        for (i, b) in src.iter().enumerate() {
            // SAFETY: p + i is inside the checked range.
            unsafe { std::ptr::write_volatile(p.add(i), *b) }
        }
    }

    /// Writes a little-endian u64 at `off` (8-byte aligned): a PRP entry.
    #[inline]
    pub(crate) fn write_u64(&self, off: usize, v: u64) {
        assert!(off % 8 == 0, "unaligned u64 at {off}");
        let p = self.at(off, 8);
        // SAFETY: in bounds and 8-byte aligned (the mapping is page-aligned).
        unsafe { std::ptr::write_volatile(p as *mut u64, v.to_le()) }
    }

    /// Reads a little-endian u64 at `off` (8-byte aligned), with a volatile load: a
    /// completion entry's words, which the device writes at any time.
    #[inline]
    pub(crate) fn read_u64(&self, off: usize) -> u64 {
        assert!(off % 8 == 0, "unaligned u64 at {off}");
        let p = self.at(off, 8);
        // SAFETY: in bounds and 8-byte aligned.
        u64::from_le(unsafe { std::ptr::read_volatile(p as *const u64) })
    }

    /// Reads a little-endian u32 at `off` (4-byte aligned), volatile.
    #[inline]
    pub(crate) fn read_u32(&self, off: usize) -> u32 {
        assert!(off % 4 == 0, "unaligned u32 at {off}");
        let p = self.at(off, 4);
        // SAFETY: in bounds and 4-byte aligned.
        u32::from_le(unsafe { std::ptr::read_volatile(p as *const u32) })
    }

    /// Copies `dst.len()` bytes from offset `off` into `dst` (volatile loads: the device
    /// may have written them).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        let p = self.at(off, dst.len());
        for (i, b) in dst.iter_mut().enumerate() {
            // SAFETY: p + i is inside the checked range.
            *b = unsafe { std::ptr::read_volatile(p.add(i)) };
        }
    }

    /// Zeroes `n` bytes at `off`.
    pub(crate) fn zero(&self, off: usize, n: usize) {
        let p = self.at(off, n);
        // SAFETY: p .. p + n is inside the mapping.
        unsafe { std::ptr::write_bytes(p, 0, n) }
    }

    /// A pointer to `n` bytes at `off`, for a buffer carved out of this memory.
    pub(crate) fn ptr(&self, off: usize, n: usize) -> NonNull<u8> {
        NonNull::new(self.at(off, n)).expect("inside a non-null mapping")
    }
}

/// A full barrier between the stores to DMA memory (an entry, a PRP list) and the
/// doorbell store that tells the device to read them; and between reading a completion's
/// phase bit and reading the rest of it.
#[inline]
pub(crate) fn dma_fence() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// The DMA page size (the controller's memory page size, CC.MPS = 0).
pub(crate) const PAGE: usize = 4096;

/// Which 4 KiB pages of a chunk are in use: first fit over a bitmap.
#[derive(Debug)]
struct Pages {
    used: Vec<bool>,
}

impl Pages {
    fn new(pages: usize) -> Pages {
        Pages { used: vec![false; pages] }
    }
    /// `n` consecutive free pages: the index of the first, marked used.
    fn alloc(&mut self, n: usize) -> Option<usize> {
        if n == 0 || n > self.used.len() {
            return None;
        }
        let mut run = 0;
        for i in 0..self.used.len() {
            run = if self.used[i] { 0 } else { run + 1 };
            if run == n {
                let first = i + 1 - n;
                self.used[first..=i].iter_mut().for_each(|u| *u = true);
                return Some(first);
            }
        }
        None
    }
    /// Frees `n` pages from `first`.
    fn free(&mut self, first: usize, n: usize) {
        self.used[first..first + n].iter_mut().for_each(|u| *u = false);
    }
    /// Pages in use.
    #[cfg(test)]
    fn in_use(&self) -> usize {
        self.used.iter().filter(|u| **u).count()
    }
}

/// One piece of hugepage memory the device reaches, and its page allocator: every page
/// is free, reserved by one [`Dma`], or lent to one [`Buffer`], which is what makes the
/// buffers over it sound. Through an IOMMU the chunk is contiguous for the device (mapped
/// at `iova`); without one (`dma=uio`) each 2 MiB hugepage of it has its own physical
/// address (`segs`).
///
/// [`Buffer`]: crate::buf::Buffer
pub(crate) struct Chunk {
    pub(crate) mem: DmaMem,
    /// The device address of its first byte.
    pub(crate) iova: u64,
    /// The device address of each 2 MiB hugepage when they are apart (physical
    /// addresses); empty when the chunk is contiguous for the device from `iova` on.
    segs: Vec<u64>,
    pages: Mutex<Pages>,
    /// The buffers carved out of it: id → (first page, pages).
    lent: Mutex<Vec<(u64, usize, usize)>>,
}

/// Calls `put(device address, length)` for each device-contiguous piece of the `len`
/// bytes at offset `off` of a chunk: one piece when `segs` is empty (the chunk is
/// contiguous from `iova`), else one per 2 MiB hugepage the bytes touch, each at its own
/// address in `segs`.
pub(crate) fn split(iova: u64, segs: &[u64], off: u64, len: u64, mut put: impl FnMut(u64, u64)) {
    if len == 0 {
        return;
    }
    if segs.is_empty() {
        return put(iova + off, len);
    }
    let huge = HUGEPAGE as u64;
    let (mut at, end) = (off, off + len);
    while at < end {
        let n = ((at / huge + 1) * huge).min(end) - at;
        put(segs[(at / huge) as usize] + at % huge, n);
        at += n;
    }
}

impl Chunk {
    /// A chunk over `mem`, mapped at `iova`, with every page free.
    pub(crate) fn new(mem: DmaMem, iova: u64) -> Chunk {
        Chunk::with_segs(mem, iova, Vec::new())
    }

    /// A chunk over `mem` whose 2 MiB hugepages the device reaches at `segs` (one
    /// address each, 2 MiB-aligned; physical addresses, not contiguous with each other).
    pub(crate) fn scattered(mem: DmaMem, segs: Vec<u64>) -> Chunk {
        debug_assert_eq!(segs.len(), mem.len() / HUGEPAGE);
        Chunk::with_segs(mem, segs[0], segs)
    }

    fn with_segs(mem: DmaMem, iova: u64, segs: Vec<u64>) -> Chunk {
        let pages = Pages::new(mem.len() / PAGE);
        Chunk { mem, iova, segs, pages: Mutex::new(pages), lent: Mutex::new(Vec::new()) }
    }

    /// The offset of `len` bytes at host address `addr` in this chunk, when they lie
    /// inside it.
    fn offset_of(&self, addr: u64, len: u64) -> Option<u64> {
        let start = self.mem.addr();
        let size = self.mem.len() as u64;
        (addr >= start && len <= size && addr - start <= size - len).then(|| addr - start)
    }

    /// Whether `len` bytes at `addr` lie inside this chunk.
    pub(crate) fn contains(&self, addr: u64, len: u64) -> bool {
        self.offset_of(addr, len).is_some()
    }

    /// The device-contiguous pieces of `len` bytes at `addr`, through `put(device
    /// address, length)` (see [`split`]); false, calling nothing, when they do not lie
    /// inside this chunk.
    pub(crate) fn pieces(&self, addr: u64, len: u64, put: impl FnMut(u64, u64)) -> bool {
        let Some(off) = self.offset_of(addr, len) else { return false };
        split(self.iova, &self.segs, off, len, put);
        true
    }

    /// The device address of byte `off` of the chunk.
    fn dev_addr(&self, off: u64) -> u64 {
        let mut a = 0;
        split(self.iova, &self.segs, off, 1, |at, _| a = at);
        a
    }

    /// `len` bytes rounded up to whole pages: the index of the first page and the count.
    fn alloc(&self, len: usize) -> Option<(usize, usize)> {
        let n = len.max(1).div_ceil(PAGE);
        let first = self.pages.lock().unwrap_or_else(|e| e.into_inner()).alloc(n)?;
        Some((first, n))
    }

    /// Zeroes pages `first..first + n` and frees them.
    fn free(&self, first: usize, n: usize) {
        // The memory goes back zeroed, as a new buffer must be.
        self.mem.zero(first * PAGE, n * PAGE);
        self.pages.lock().unwrap_or_else(|e| e.into_inner()).free(first, n);
    }

    /// `len` bytes (whole pages) of it for the driver's own structures; `None` when it
    /// has no room. Those need memory contiguous for the device, so a scattered chunk
    /// reserves none.
    pub(crate) fn reserve(self: &Arc<Self>, len: usize) -> Option<Dma> {
        if !self.segs.is_empty() {
            return None;
        }
        let (first, n) = self.alloc(len)?;
        Some(Dma { chunk: self.clone(), off: first * PAGE, len: n * PAGE, leaked: false })
    }

    /// A zeroed buffer of `len` bytes in it; `None` when it has no room.
    pub(crate) fn lend(self: &Arc<Self>, len: usize) -> Option<Buffer> {
        let (first, n) = self.alloc(len)?;
        let ptr = self.mem.ptr(first * PAGE, n * PAGE);
        let owner: Arc<dyn Owner> = self.clone();
        // SAFETY: the pages first..first + n of the chunk are page-aligned, zeroed (fresh
        // or zeroed on release), reserved for this buffer until its release (the page
        // allocator is private to this type), and live as long as the chunk, which the
        // owner reference keeps alive.
        let b = unsafe { Buffer::foreign(ptr, len, owner) };
        self.lent.lock().unwrap_or_else(|e| e.into_inner()).push((b.id(), first, n));
        Some(b)
    }
}

impl Owner for Chunk {
    fn release(&self, id: u64) {
        let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = lent.iter().position(|(i, _, _)| *i == id) {
            let (_, first, n) = lent.swap_remove(at);
            self.free(first, n);
        }
    }
}

/// Page-aligned DMA memory inside a chunk, for the driver's own structures (queues,
/// PRP lists, identify pages): freed when the `Dma` is dropped.
pub(crate) struct Dma {
    chunk: Arc<Chunk>,
    off: usize,
    len: usize,
    /// Never given back (the controller may still use it).
    pub(crate) leaked: bool,
}

impl Dma {
    /// The device's address of byte `off` of it.
    pub(crate) fn iova(&self, off: usize) -> u64 {
        self.chunk.dev_addr((self.off + off) as u64)
    }
    /// The memory (offsets in the chunk: add [`Dma::base`]).
    pub(crate) fn mem(&self) -> &DmaMem {
        &self.chunk.mem
    }
    /// Its offset in the chunk's memory.
    pub(crate) fn base(&self) -> usize {
        self.off
    }
}

impl Drop for Dma {
    fn drop(&mut self) {
        if self.leaked {
            return;
        }
        self.chunk.free(self.off / PAGE, self.len / PAGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scattered_chunk_splits_transfers_at_each_hugepage_with_its_own_address() {
        let huge = HUGEPAGE as u64;
        let collect = |segs: &[u64], off: u64, len: u64| {
            let mut v = Vec::new();
            split(0x1_0000_0000, segs, off, len, |a, n| v.push((a, n)));
            v
        };
        // Contiguous (IOMMU): one piece at iova + offset, whatever its length.
        assert_eq!(collect(&[], 4096, 3 * huge), [(0x1_0000_0000 + 4096, 3 * huge)]);
        // Physical hugepages out of order: 4 MiB from the start is two pieces, each at its
        // hugepage's address; 4 MiB from 512 bytes before the first boundary, three.
        let segs = [0x4000_0000_u64, 0x2000_0000, 0x8000_0000];
        assert_eq!(collect(&segs, 0, 2 * huge), [(segs[0], huge), (segs[1], huge)]);
        assert_eq!(
            collect(&segs, huge - 512, 2 * huge),
            [(segs[0] + huge - 512, 512), (segs[1], huge), (segs[2], huge - 512)]
        );
        // Inside one hugepage: one piece at its address plus the offset in it.
        assert_eq!(collect(&segs, huge + 8192, 4096), [(segs[1] + 8192, 4096)]);
        assert_eq!(collect(&segs, 5, 0), []);
        // Every piece but the first starts on a hugepage (so on a PRP page), every one
        // but the last ends on one: the PRP rules hold for the pieces of one buffer.
        let p = collect(&segs, 3 * 4096, 2 * huge + 4096 * 5 - 3 * 4096 * 2);
        assert!(p[1..].iter().all(|&(a, _)| a % huge == 0));
        assert!(p[..p.len() - 1].iter().all(|&(a, n)| (a + n) % huge == 0));
        assert_eq!(p.iter().map(|x| x.1).sum::<u64>(), 2 * huge + 4096 * 5 - 3 * 4096 * 2);
    }

    #[test]
    fn pages_are_first_fit_and_reused_after_free() {
        let mut p = Pages::new(8);
        assert_eq!(p.alloc(3), Some(0));
        assert_eq!(p.alloc(3), Some(3));
        assert_eq!(p.alloc(3), None, "only 2 pages left");
        p.free(0, 3);
        assert_eq!(p.alloc(2), Some(0));
        assert_eq!(p.alloc(2), Some(6));
        assert_eq!(p.in_use(), 7);
        assert_eq!(p.alloc(0), None);
        assert_eq!(p.alloc(9), None);
    }
}
