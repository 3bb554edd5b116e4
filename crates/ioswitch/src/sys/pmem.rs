//! Persistent memory: a [`PmemMap`] of a file on a DAX file system (`MAP_SHARED_VALIDATE |
//! MAP_SYNC`) or of a devdax character device, and the stores that make data in it
//! durable without a system call: non-temporal stores for large copies, ordinary stores
//! plus a cache-line write-back for small ones and for the unaligned head and tail of
//! large ones, then one store fence.
//!
//! The write-back instruction is chosen once from CPUID ([`Flush::detect`]): CLWB, else
//! CLFLUSHOPT, else CLFLUSH. All of this is x86-64 only; elsewhere `PmemMap::map` fails
//! with `EOPNOTSUPP`.

use super::mem::Mapped;
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Linux `MAP_SYNC` (x86-64 value): page faults make the file system's metadata durable,
/// so CPU cache flushes are enough to make stores durable. Only honoured together with
/// `MAP_SHARED_VALIDATE`, which makes the kernel refuse it (EOPNOTSUPP) where it is not
/// supported rather than ignore it.
const MAP_SYNC: libc::c_int = 0x80000;

/// A cache line, the unit of a write-back.
pub(crate) const LINE: usize = 64;

/// Copies of at least this many bytes use non-temporal stores (libpmem's default
/// `PMEM_MOVNT_THRESHOLD` is 256 too); shorter ones use ordinary stores and write-backs.
pub(crate) const NT_THRESHOLD: usize = 256;

/// The cache-line write-back instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flush {
    /// CLWB: writes the line back and may keep it cached.
    Clwb,
    /// CLFLUSHOPT: writes the line back and evicts it; weakly ordered.
    Clflushopt,
    /// CLFLUSH: writes the line back and evicts it; ordered with other stores.
    Clflush,
}

impl Flush {
    /// The best instruction the CPU has (CPUID leaf 7 EBX bits 24 and 23), probed once.
    pub(crate) fn detect() -> Flush {
        static F: std::sync::OnceLock<Flush> = std::sync::OnceLock::new();
        *F.get_or_init(|| {
            let (clwb, clflushopt) = cpuid_flush_bits();
            Flush::choose(clwb, clflushopt)
        })
    }

    /// The choice from the CPU's feature bits: CLWB, else CLFLUSHOPT, else CLFLUSH
    /// (which every x86-64 CPU has).
    pub(crate) fn choose(clwb: bool, clflushopt: bool) -> Flush {
        if clwb {
            Flush::Clwb
        } else if clflushopt {
            Flush::Clflushopt
        } else {
            Flush::Clflush
        }
    }

    /// The instruction's name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Flush::Clwb => "clwb",
            Flush::Clflushopt => "clflushopt",
            Flush::Clflush => "clflush",
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_flush_bits() -> (bool, bool) {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is read only when leaf 0 says the
    // CPU has it.
    let ebx7 = unsafe {
        if __cpuid(0).eax >= 7 {
            __cpuid_count(7, 0).ebx
        } else {
            0
        }
    };
    (ebx7 & (1 << 24) != 0, ebx7 & (1 << 23) != 0)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_flush_bits() -> (bool, bool) {
    (false, false)
}

/// Writes back the cache lines covering `p .. p + n` with `how` (no fence).
#[cfg(target_arch = "x86_64")]
#[inline]
fn write_back(how: Flush, p: *const u8, n: usize) {
    if n == 0 {
        return;
    }
    let mut line = (p as usize) & !(LINE - 1);
    let end = p as usize + n;
    while line < end {
        // SAFETY: each instruction only writes back (or evicts) the cache line holding
        // `line`, an address inside the mapping the caller owns; none of them changes
        // memory contents. CLWB and CLFLUSHOPT are executed only when CPUID said the CPU
        // has them (Flush::detect), CLFLUSH exists on every x86-64 CPU.
        unsafe {
            match how {
                Flush::Clwb => std::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags)),
                Flush::Clflushopt => {
                    std::arch::asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags))
                }
                Flush::Clflush => std::arch::asm!("clflush [{0}]", in(reg) line, options(nostack, preserves_flags)),
            }
        }
        line += LINE;
    }
}

/// SFENCE: every store and write-back before it is complete (durable on pmem) before any
/// store after it.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn fence() {
    // SAFETY: SFENCE only orders stores; SSE is part of x86-64.
    unsafe { std::arch::x86_64::_mm_sfence() }
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn fence() {}

/// Copies `n` bytes from `src` to `dst` so that, after the next [`fence`], they are
/// durable: non-temporal stores for the cache-line-aligned body of copies of at least
/// [`NT_THRESHOLD`] bytes, ordinary stores plus write-backs for the rest.
///
/// # Safety
/// `src .. src + n` readable, `dst .. dst + n` writable, the two not overlapping.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn persistent_copy(how: Flush, dst: *mut u8, src: *const u8, n: usize) {
    if n < NT_THRESHOLD {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
        write_back(how, dst, n);
        return;
    }
    // Head: up to the first cache-line boundary of dst.
    let head = (LINE - (dst as usize & (LINE - 1))) & (LINE - 1);
    // SAFETY: head < LINE ≤ NT_THRESHOLD ≤ n, inside both ranges.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    write_back(how, dst, head);
    let body = (n - head) & !(LINE - 1);
    // SAFETY: head + body ≤ n.
    let (d, s) = unsafe { (dst.add(head), src.add(head)) };
    if has_avx2() {
        // SAFETY: d is 64-byte aligned, d .. d + body and s .. s + body inside the
        // caller's ranges; AVX2 is there (CPUID, probed once).
        unsafe { nt_body_avx2(d, s, body) };
    } else {
        // SAFETY: as above; SSE2 is part of x86-64.
        unsafe { nt_body_sse2(d, s, body) };
    }
    // SAFETY: head + body ≤ n.
    let (d, s) = unsafe { (d.add(body), s.add(body)) };
    let tail = n - head - body;
    // SAFETY: the last `tail` bytes of both ranges.
    unsafe { std::ptr::copy_nonoverlapping(s, d, tail) };
    write_back(how, d, tail);
}

/// Whether the CPU has AVX2 (CPUID): the non-temporal body of a copy then
/// moves 32 bytes per store instead of 16, half the instructions.
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    // The standard library caches the CPUID answer: one atomic load per copy.
    std::arch::is_x86_feature_detected!("avx2")
}

/// Non-temporal copy of `body` bytes (a multiple of [`LINE`]) with SSE2 `movntdq`.
///
/// # Safety
/// `d` 64-byte aligned; `s .. s + body` readable, `d .. d + body` writable, not
/// overlapping.
#[cfg(target_arch = "x86_64")]
unsafe fn nt_body_sse2(mut d: *mut u8, mut s: *const u8, body: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    // SAFETY: the caller's contract: body ≤ both ranges.
    let end = unsafe { d.add(body) };
    while d < end {
        // SAFETY: d is 64-byte aligned (so each 16-byte store is aligned, as MOVNTDQ
        // needs) and d .. d + 64, s .. s + 64 lie inside the caller's ranges (d < end,
        // body a multiple of 64); the loads are unaligned loads.
        unsafe {
            let a = _mm_loadu_si128(s as *const __m128i);
            let b = _mm_loadu_si128(s.add(16) as *const __m128i);
            let c = _mm_loadu_si128(s.add(32) as *const __m128i);
            let e = _mm_loadu_si128(s.add(48) as *const __m128i);
            _mm_stream_si128(d as *mut __m128i, a);
            _mm_stream_si128(d.add(16) as *mut __m128i, b);
            _mm_stream_si128(d.add(32) as *mut __m128i, c);
            _mm_stream_si128(d.add(48) as *mut __m128i, e);
            d = d.add(LINE);
            s = s.add(LINE);
        }
    }
}

/// Non-temporal copy of `body` bytes (a multiple of [`LINE`]) with AVX2 `vmovntdq`.
///
/// # Safety
/// As [`nt_body_sse2`], and the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn nt_body_avx2(mut d: *mut u8, mut s: *const u8, body: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    // SAFETY: the caller's contract: body ≤ both ranges.
    let end = unsafe { d.add(body) };
    while d < end {
        // SAFETY: d is 64-byte aligned (so each 32-byte store is aligned, as VMOVNTDQ
        // needs) and d .. d + 64, s .. s + 64 lie inside the caller's ranges (d < end,
        // body a multiple of 64); the loads are unaligned loads; the caller checked
        // that the CPU has AVX2.
        unsafe {
            let a = _mm256_loadu_si256(s as *const __m256i);
            let b = _mm256_loadu_si256(s.add(32) as *const __m256i);
            _mm256_stream_si256(d as *mut __m256i, a);
            _mm256_stream_si256(d.add(32) as *mut __m256i, b);
            d = d.add(LINE);
            s = s.add(LINE);
        }
    }
}

/// Zeroes `n` bytes at `dst` durably (after the next [`fence`]), as [`persistent_copy`].
///
/// # Safety
/// `dst .. dst + n` writable.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn persistent_zero(how: Flush, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_setzero_si128, _mm_stream_si128};
    if n < NT_THRESHOLD {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::write_bytes(dst, 0, n) };
        write_back(how, dst, n);
        return;
    }
    let head = (LINE - (dst as usize & (LINE - 1))) & (LINE - 1);
    // SAFETY: head < n.
    unsafe { std::ptr::write_bytes(dst, 0, head) };
    write_back(how, dst, head);
    let body = (n - head) & !(LINE - 1);
    // SAFETY: head + body ≤ n.
    let mut d = unsafe { dst.add(head) };
    // SAFETY: as above.
    let end = unsafe { d.add(body) };
    while d < end {
        // SAFETY: d is 64-byte aligned and d .. d + 64 lies inside the caller's range.
        unsafe {
            let z = _mm_setzero_si128();
            _mm_stream_si128(d as *mut __m128i, z);
            _mm_stream_si128(d.add(16) as *mut __m128i, z);
            _mm_stream_si128(d.add(32) as *mut __m128i, z);
            _mm_stream_si128(d.add(48) as *mut __m128i, z);
            d = d.add(LINE);
        }
    }
    let tail = n - head - body;
    // SAFETY: the last `tail` bytes of the range.
    unsafe { std::ptr::write_bytes(d, 0, tail) };
    write_back(how, d, tail);
}

/// A shared mapping of persistent memory (or, with `pmem_force`, of ordinary memory run
/// with the same instructions), owned until drop.
///
/// Besides copies in and out, it lends ranges of itself to the application
/// ([`PmemMap::lend`]): the ranges lent at one time never overlap, and reads and writes
/// through [`PmemMap::read_at`]/[`PmemMap::write_at`] on a lent range are refused by the
/// backend (it asks [`PmemMap::overlaps_lent`] first). Shared between threads as it is:
/// copies are bounded by its length and lent ranges never overlap (the `lent` list).
/// Unmapped when dropped; a lent range borrows it, so none is alive then.
pub(crate) struct PmemMap {
    map: Mapped,
    flush: Flush,
    /// The ranges lent out now (offset, length).
    lent: Mutex<Vec<(usize, usize)>>,
    /// How many ranges are lent (so the I/O path looks at the list only when some are).
    nlent: AtomicUsize,
    /// Populated for writing at open (see [`PmemMap::map`]).
    write_populated: bool,
}

/// How a mapping is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapMode {
    /// `MAP_SHARED_VALIDATE | MAP_SYNC`: a file on a DAX file system; the kernel refuses
    /// it (EOPNOTSUPP, or EINVAL on kernels without MAP_SHARED_VALIDATE) elsewhere.
    Sync,
    /// `MAP_SHARED`: a devdax device (always synchronous), or ordinary memory with
    /// `pmem_force=1`.
    Shared,
}

impl PmemMap {
    /// mmap(2) of `len` bytes of `fd` from offset 0, readable and (when `writable`)
    /// writable. The kernel picks an address aligned to `align` (a devdax device's
    /// alignment) by over-reserving and trimming.
    ///
    /// With `populate`, `MAP_POPULATE`: the kernel faults every page of the mapping in
    /// before mmap returns, so that copies later find them mapped (the open pays the
    /// faults, the I/O does not). The kernel takes these as read faults on a shared
    /// mapping, and does not fail the mmap when it cannot populate (a page it cannot
    /// provide faults, or raises SIGBUS, at its first access as without it). A writable
    /// mapping is then populated for writing too (`madvise(MADV_POPULATE_WRITE)`, Linux
    /// 5.14): where the file system tracks writes to shared pages (a DAX file with
    /// `MAP_SYNC`: ext4's and xfs's `page_mkwrite`, which also allocates the blocks) the
    /// first store to each page would otherwise still fault once. On an older kernel
    /// (EINVAL) the mapping stays populated for reading only, and [`PmemMap::populated_for_writes`]
    /// says so; any other error of that call (a page the kernel cannot provide) fails the map.
    pub(crate) fn map(
        fd: RawFd,
        len: usize,
        writable: bool,
        mode: MapMode,
        align: usize,
        populate: bool,
    ) -> io::Result<PmemMap> {
        if !cfg!(target_arch = "x86_64") {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        super::sigbus::install()?;
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        let flags = match mode {
            MapMode::Sync => libc::MAP_SHARED_VALIDATE | MAP_SYNC,
            MapMode::Shared => libc::MAP_SHARED,
        };
        let page = super::page_size();
        let mut hint: *mut libc::c_void = std::ptr::null_mut();
        let mut reserved: Option<(*mut libc::c_void, usize)> = None;
        if align > page {
            // Reserve len + align of address space, and map at its first aligned address
            // (MAP_FIXED replaces the reservation there); the rest is unmapped below.
            let span = len.checked_add(align).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
            let r = super::mem::mmap(span, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)?;
            let r = r.as_ptr() as *mut libc::c_void;
            hint = ((r as usize + align - 1) & !(align - 1)) as *mut libc::c_void;
            reserved = Some((r, span));
        }
        let fixed = if reserved.is_some() { libc::MAP_FIXED } else { 0 };
        let populate = if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: either a fresh mapping at an address the kernel chooses, or MAP_FIXED
        // inside the reservation made just above (which only this function knows of).
        let p = unsafe { libc::mmap(hint, len, prot, flags | fixed | populate, fd, 0) };
        let err = (p == libc::MAP_FAILED).then(io::Error::last_os_error);
        if let Some((r, span)) = reserved {
            // The reserved pages around the mapping go; where it failed, it is empty at
            // the reservation's start, and all of them go.
            let r = r as usize;
            let (start, end) =
                if err.is_some() { (r, r) } else { (p as usize, p as usize + len.next_multiple_of(page)) };
            if start > r {
                // SAFETY: the reserved pages before the mapping, which nothing uses.
                unsafe { libc::munmap(r as *mut libc::c_void, start - r) };
            }
            if r + span > end {
                // SAFETY: the reserved pages after the mapping, which nothing uses.
                unsafe { libc::munmap(end as *mut libc::c_void, r + span - end) };
            }
        }
        if let Some(e) = err {
            return Err(e);
        }
        let base = NonNull::new(p as *mut u8).expect("mmap returned a non-null address");
        // SAFETY: p .. p + len is the mapping made just above, which nothing else knows of.
        let map = unsafe { Mapped::adopt(base, len) };
        let mut write_populated = false;
        if populate != 0 && writable && len > 0 {
            // SAFETY: the mapping made just above, whole; populating changes no byte.
            let rc = unsafe { libc::madvise(p, len, libc::MADV_POPULATE_WRITE) };
            if rc == 0 {
                write_populated = true;
            } else {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(e);
                }
            }
        }
        Ok(PmemMap {
            map,
            flush: Flush::detect(),
            lent: Mutex::new(Vec::new()),
            nlent: AtomicUsize::new(0),
            write_populated,
        })
    }

    /// Whether the mapping was populated for writing at open (`pmem_populate=1` on a
    /// writable mapping, on Linux 5.14 or later): its stores take no page fault.
    pub(crate) fn populated_for_writes(&self) -> bool {
        self.write_populated
    }

    /// The mapped length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The write-back instruction its stores use.
    pub(crate) fn flush_kind(&self) -> Flush {
        self.flush
    }

    /// Runs `f` (copies in and out of this mapping) under one SIGBUS guard
    /// ([`super::sigbus::guarded`]): a page the kernel cannot provide (a poisoned page, a
    /// page beyond the end of a file another user shrank) stops `f` and gives the offset
    /// in the mapping of the faulting byte (`None` when the fault was outside the mapping,
    /// in the caller's memory) instead of ending the process. The bytes before the fault
    /// may or may not have been copied.
    ///
    /// `f` must check nothing that can panic (bounds are checked before, by the caller)
    /// and own nothing with a destructor: its frames are abandoned at a fault.
    pub(crate) fn guarded(&self, f: impl FnMut()) -> Result<(), Option<usize>> {
        // SAFETY: the closures passed here (be/pmem.rs) only copy, zero and fence over
        // ranges checked before the call, with no destructor and no lock in their frames.
        unsafe { super::sigbus::guarded(f) }.map_err(|at| self.map.offset_of(at))
    }

    /// The mapping's start address (for its alignment).
    #[cfg(test)]
    pub(crate) fn addr(&self) -> usize {
        self.map.addr()
    }

    /// Panics unless `off .. off + n` lies inside the mapping; returns its start.
    #[inline]
    fn at(&self, off: usize, n: usize) -> *mut u8 {
        self.map.range(off, n).unwrap_or_else(|| panic!("{n} bytes at {off} outside a mapping of {}", self.map.len()))
    }

    /// Copies `dst.len()` bytes at `off` of the mapping into `dst`.
    pub(crate) fn read_at(&self, off: usize, dst: &mut [u8]) {
        let m = self.at(off, dst.len());
        // SAFETY: m .. m + len inside the mapping (`at`); dst is the caller's memory,
        // not a lent range of this mapping (a lent slice is borrowed mutably by its
        // holder, so it cannot be passed here as well).
        unsafe { std::ptr::copy_nonoverlapping(m, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` to `off` of the mapping with persistent stores; durable after
    /// [`fence`].
    pub(crate) fn write_at(&self, off: usize, src: &[u8]) {
        let m = self.at(off, src.len());
        #[cfg(target_arch = "x86_64")]
        // SAFETY: m .. m + len inside the mapping (`at`), src the caller's memory.
        unsafe {
            persistent_copy(self.flush, m, src.as_ptr(), src.len())
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = m;
    }

    /// Zeroes `n` bytes at `off` with persistent stores; durable after [`fence`].
    pub(crate) fn zero(&self, off: usize, n: usize) {
        let m = self.at(off, n);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: m .. m + n inside the mapping (`at`).
        unsafe {
            persistent_zero(self.flush, m, n)
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = m;
    }

    /// Writes back the lines of `off .. off + n` and fences: what stores made through a
    /// lent range need to be durable.
    pub(crate) fn persist(&self, off: usize, n: usize) {
        let m = self.at(off, n);
        #[cfg(target_arch = "x86_64")]
        write_back(self.flush, m, n);
        let _ = m;
        fence();
    }

    /// Whether `off .. off + n` overlaps a range lent out now.
    #[inline]
    pub(crate) fn overlaps_lent(&self, off: usize, n: usize) -> bool {
        if self.nlent.load(Ordering::Acquire) == 0 {
            return false;
        }
        let lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        lent.iter().any(|&(o, l)| off < o + l && o < off + n)
    }

    /// Lends `off .. off + n` of the mapping as a mutable slice until the returned
    /// [`Lent`] is dropped. `None` when it overlaps a range lent out now.
    pub(crate) fn lend(&self, off: usize, n: usize) -> Option<Lent<'_>> {
        let m = self.at(off, n);
        let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        if lent.iter().any(|&(o, l)| off < o + l && o < off + n) {
            return None;
        }
        lent.push((off, n));
        self.nlent.fetch_add(1, Ordering::AcqRel);
        // SAFETY: m .. m + n lies inside the mapping, which outlives the returned value
        // (it borrows self); no other lent range overlaps it (checked above under the
        // lock), and the backend refuses copies in and out of lent ranges.
        let slice = unsafe { std::slice::from_raw_parts_mut(m, n) };
        Some(Lent { map: self, off, slice })
    }
}

/// A range of a [`PmemMap`] lent out (see [`PmemMap::lend`]); returned on drop.
pub(crate) struct Lent<'a> {
    map: &'a PmemMap,
    off: usize,
    /// The lent memory.
    pub(crate) slice: &'a mut [u8],
}

impl Lent<'_> {
    /// The offset of the range in the mapping.
    pub(crate) fn offset(&self) -> usize {
        self.off
    }
    /// Makes `off .. off + n` of the lent range durable (offsets relative to it).
    pub(crate) fn persist(&self, off: usize, n: usize) {
        assert!(off <= self.slice.len() && n <= self.slice.len() - off);
        self.map.persist(self.off + off, n);
    }

    /// The offset in the lent range of a faulting address, when it lies inside it.
    fn fault_offset(&self, at: usize) -> Option<usize> {
        let base = self.slice.as_ptr() as usize;
        (base..base + self.slice.len()).contains(&at).then(|| at - base)
    }

    /// Copies `dst.len()` bytes at `off` of the lent range (relative to it) into `dst`
    /// under the SIGBUS guard: `Err` (the fault's offset in the range, when inside it)
    /// where the kernel could not provide a page. Panics unless the bytes lie inside the
    /// range (the caller checks).
    pub(crate) fn read_guarded(&self, off: usize, dst: &mut [u8]) -> Result<(), Option<usize>> {
        let src = &self.slice[off..off + dst.len()];
        let (s, d, n) = (src.as_ptr(), dst.as_mut_ptr(), dst.len());
        // SAFETY: s .. s + n lies inside the lent range (sliced above), d .. d + n is the
        // caller's buffer, which cannot be this range (it is borrowed here); the closure
        // only copies: no destructor, nothing that can panic.
        unsafe { super::sigbus::guarded(|| std::ptr::copy_nonoverlapping(s, d, n)) }.map_err(|at| self.fault_offset(at))
    }

    /// Copies `src` to `off` of the lent range (relative to it) with persistent stores and
    /// one fence, as a command's write (durable when it returns), under the SIGBUS guard:
    /// `Err` as [`Lent::read_guarded`]. Panics unless the bytes lie inside the range.
    pub(crate) fn write_guarded(&mut self, off: usize, src: &[u8]) -> Result<(), Option<usize>> {
        let dst = &mut self.slice[off..off + src.len()];
        let (d, s, n) = (dst.as_mut_ptr(), src.as_ptr(), src.len());
        #[cfg(target_arch = "x86_64")]
        let how = self.map.flush;
        // SAFETY: d .. d + n lies inside the lent range (sliced above, borrowed mutably
        // here), s .. s + n is the caller's buffer, which cannot overlap it; the closure
        // only copies and fences: no destructor, nothing that can panic.
        unsafe {
            super::sigbus::guarded(|| {
                #[cfg(target_arch = "x86_64")]
                persistent_copy(how, d, s, n);
                #[cfg(not(target_arch = "x86_64"))]
                std::ptr::copy_nonoverlapping(s, d, n);
                fence();
            })
        }
        .map_err(|at| self.fault_offset(at))
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let mut lent = self.map.lent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = lent.iter().position(|&(o, l)| o == self.off && l == self.slice.len()) {
            lent.swap_remove(i);
            self.map.nlent.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn shm_file(len: u64) -> std::fs::File {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let p = dir.join(format!("ioswitch-sys-pmem-{}-{len}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f.set_len(len).unwrap();
        f
    }

    #[test]
    fn the_write_back_is_clwb_else_clflushopt_else_clflush() {
        assert_eq!(Flush::choose(true, true), Flush::Clwb);
        assert_eq!(Flush::choose(true, false), Flush::Clwb);
        assert_eq!(Flush::choose(false, true), Flush::Clflushopt);
        assert_eq!(Flush::choose(false, false), Flush::Clflush);
        // What this CPU says, read independently from /proc/cpuinfo.
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let flags: Vec<&str> =
            info.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().collect()).unwrap_or_default();
        if flags.is_empty() {
            eprintln!("skipped the CPUID cross-check: /proc/cpuinfo has no flags line");
            return;
        }
        let want = Flush::choose(flags.contains(&"clwb"), flags.contains(&"clflushopt"));
        assert_eq!(Flush::detect(), want, "cpuinfo flags and CPUID disagree");
    }

    /// Copies of every size around the non-temporal threshold and every head
    /// misalignment within a cache line land exactly, and touch nothing outside.
    #[test]
    fn persistent_copies_and_zeroing_land_exactly_around_the_threshold() {
        let f = shm_file(1 << 16);
        let m = PmemMap::map(f.as_raw_fd(), 1 << 16, true, MapMode::Shared, 0, false).unwrap();
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut back = vec![0u8; 16384];
        let sizes = [0, 1, 63, 64, 65, 127, NT_THRESHOLD - 1, NT_THRESHOLD, NT_THRESHOLD + 1, 319, 320, 1000, 4095];
        for &n in &sizes {
            for head in [0usize, 1, 7, 31, 63] {
                let off = 4096 + head;
                m.write_at(0, &vec![0xAAu8; 16384]);
                m.write_at(off, &src[..n]);
                fence();
                m.read_at(0, &mut back);
                assert!(back[..off].iter().all(|&b| b == 0xAA), "bytes before the copy changed (n {n}, head {head})");
                assert_eq!(&back[off..off + n], &src[..n], "n {n}, head {head}");
                assert!(
                    back[off + n..].iter().all(|&b| b == 0xAA),
                    "bytes after the copy changed (n {n}, head {head})"
                );
                m.zero(off, n);
                fence();
                m.read_at(0, &mut back);
                assert!(back[off..off + n].iter().all(|&b| b == 0), "zeroing n {n}, head {head}");
                assert!(back[..off].iter().chain(&back[off + n..]).all(|&b| b == 0xAA), "zeroing n {n}, head {head}");
            }
        }
        // The copies reach the file (read back with pread, not through the mapping).
        m.write_at(100, b"durable");
        m.persist(100, 7);
        let mut b = [0u8; 7];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, 100).unwrap();
        assert_eq!(&b, b"durable");
    }

    /// Both non-temporal bodies (SSE2, and AVX2 where the CPU has it, probed from
    /// /proc/cpuinfo) copy every line exactly and nothing beyond, whichever one
    /// `persistent_copy` picks on this CPU.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn both_non_temporal_bodies_copy_exactly() {
        let f = shm_file(1 << 16);
        let m = PmemMap::map(f.as_raw_fd(), 1 << 16, true, MapMode::Shared, 0, false).unwrap();
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 13 + 5) as u8).collect();
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let avx2 =
            info.lines().find(|l| l.starts_with("flags")).is_some_and(|l| l.split_whitespace().any(|w| w == "avx2"));
        assert_eq!(has_avx2(), avx2, "cpuinfo and CPUID disagree on avx2");
        for body in [LINE, 2 * LINE, 4096, 8192 - LINE] {
            for src_off in [0usize, 1, 17, 32] {
                let n = body.min(src.len() - src_off);
                let n = n - n % LINE;
                let mut variants: Vec<(&str, NtBody)> = vec![("sse2", nt_body_sse2)];
                if avx2 {
                    variants.push(("avx2", nt_body_avx2_checked));
                } else {
                    eprintln!("skipped the avx2 body: /proc/cpuinfo has no avx2 flag");
                }
                for (name, copy) in variants {
                    m.write_at(0, &vec![0xAAu8; 16384]);
                    fence();
                    // SAFETY: 4096 is 64-byte aligned in the mapping (page-aligned), n ≤ 8192
                    // bytes there and in src from src_off.
                    unsafe { copy(m.at(4096, n), src.as_ptr().add(src_off), n) };
                    fence();
                    let mut back = vec![0u8; 16384];
                    m.read_at(0, &mut back);
                    assert!(back[..4096].iter().all(|&b| b == 0xAA), "{name}: bytes before changed (n {n})");
                    assert_eq!(&back[4096..4096 + n], &src[src_off..src_off + n], "{name}: n {n}, src_off {src_off}");
                    assert!(back[4096 + n..].iter().all(|&b| b == 0xAA), "{name}: bytes after changed (n {n})");
                }
            }
        }
    }

    /// A non-temporal body: (destination, source, bytes).
    #[cfg(target_arch = "x86_64")]
    type NtBody = unsafe fn(*mut u8, *const u8, usize);

    /// The AVX2 body behind a plain `unsafe fn` pointer (only called where cpuinfo says
    /// the CPU has AVX2).
    #[cfg(target_arch = "x86_64")]
    unsafe fn nt_body_avx2_checked(d: *mut u8, s: *const u8, body: usize) {
        assert!(has_avx2());
        // SAFETY: the caller's contract, and the CPU has AVX2 (asserted).
        unsafe { nt_body_avx2(d, s, body) }
    }

    #[test]
    fn lent_ranges_never_overlap_and_come_back_on_drop() {
        let f = shm_file(16384);
        let m = PmemMap::map(f.as_raw_fd(), 16384, true, MapMode::Shared, 0, false).unwrap();
        let a = m.lend(0, 4096).unwrap();
        assert!(m.lend(4095, 2).is_none());
        assert!(m.overlaps_lent(4000, 100) && !m.overlaps_lent(4096, 100));
        let b = m.lend(4096, 4096).unwrap();
        a.slice[10] = 42;
        a.persist(10, 1);
        drop(a);
        assert!(!m.overlaps_lent(0, 4096));
        let mut x = [0u8; 1];
        m.read_at(10, &mut x);
        assert_eq!(x[0], 42);
        assert_eq!(b.offset(), 4096);
    }

    #[test]
    fn an_aligned_mapping_starts_on_its_alignment() {
        let f = shm_file(1 << 20);
        let align = 2 << 20;
        let m = PmemMap::map(f.as_raw_fd(), 1 << 20, true, MapMode::Shared, align, false).unwrap();
        assert_eq!(m.addr() % align, 0);
        m.write_at(0, b"x");
    }

    #[test]
    fn map_sync_on_memory_that_is_not_dax_is_refused_by_the_kernel() {
        let f = shm_file(4096);
        let e = PmemMap::map(f.as_raw_fd(), 4096, true, MapMode::Sync, 0, false).err().expect("tmpfs is not DAX");
        assert!(matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)), "{e}");
    }
}
