//! DMA memory of a controller: chunks of 2 MiB hugepages, split into 4 KiB pages by a
//! first-fit [`Pages`] allocator. A chunk's device address comes from its [`Mapper`]:
//! with an IOMMU (vfio-pci) the chunk is mapped at addresses from an [`Iova`]
//! allocator; without one (uio_pci_generic, `dma=uio`) a chunk is one pinned hugepage
//! and its device address is its physical address (`/proc/self/pagemap`). Buffers handed out by [`Pool::buffer`] keep their chunk alive
//! (a buffer may outlive the device); the IOMMU mappings go when the device closes.
//!
//! Opts in to `unsafe_code` for one block: making a [`Buffer`] over pages of a chunk
//! (buffer internals, as in `buf.rs`), whose safety rests on this file's page allocator.
#![allow(unsafe_code)]

use crate::buf::{Buffer, Owner};
use crate::sys::uio;
use crate::sys::vfio::{Container, DmaMem, HUGEPAGE};
use std::io;
use std::sync::{Arc, Mutex, RwLock};

/// The DMA page size (the controller's memory page size, CC.MPS = 0).
pub(crate) const PAGE: usize = 4096;

/// I/O virtual addresses: handed out upwards from 4 GiB (below it sit the MSI window
/// and the reserved regions of x86 IOMMUs), never reused, up to the IOMMU's 39-bit
/// address width (QEMU's intel-iommu default).
#[derive(Debug)]
pub(crate) struct Iova {
    next: u64,
    end: u64,
}

impl Iova {
    pub(crate) fn new() -> Iova {
        Iova { next: 1 << 32, end: 1 << 39 }
    }
    /// `len` bytes of address space, aligned to 2 MiB; `None` when exhausted.
    pub(crate) fn alloc(&mut self, len: u64) -> Option<u64> {
        let start = self.next.next_multiple_of(HUGEPAGE as u64);
        let end = start.checked_add(len)?;
        if end > self.end {
            return None;
        }
        self.next = end;
        Some(start)
    }
}

/// Which 4 KiB pages of a chunk are in use: first fit over a bitmap.
#[derive(Debug)]
pub(crate) struct Pages {
    used: Vec<bool>,
}

impl Pages {
    pub(crate) fn new(pages: usize) -> Pages {
        Pages { used: vec![false; pages] }
    }
    /// `n` consecutive free pages: the index of the first, marked used.
    pub(crate) fn alloc(&mut self, n: usize) -> Option<usize> {
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
    pub(crate) fn free(&mut self, first: usize, n: usize) {
        self.used[first..first + n].iter_mut().for_each(|u| *u = false);
    }
    /// Pages in use.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.used.iter().filter(|u| **u).count()
    }
}

/// One mapped piece of hugepage memory.
pub(crate) struct Chunk {
    pub(crate) mem: DmaMem,
    pub(crate) iova: u64,
    pages: Mutex<Pages>,
    /// The buffers carved out of it: id → (first page, pages).
    lent: Mutex<Vec<(u64, usize, usize)>>,
}

impl Chunk {
    /// The IOVA of `len` bytes at `addr`, when they lie inside this chunk.
    pub(crate) fn iova_of(&self, addr: u64, len: u64) -> Option<u64> {
        let start = self.mem.addr();
        let end = start + self.mem.len() as u64;
        (addr >= start && len <= end - start && addr - start <= end - start - len).then(|| self.iova + (addr - start))
    }
}

impl Owner for Chunk {
    fn release(&self, id: u64) {
        let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = lent.iter().position(|(i, _, _)| *i == id) {
            let (_, first, n) = lent.swap_remove(at);
            // The memory goes back zeroed, as a new buffer must be.
            self.mem.zero(first * PAGE, n * PAGE);
            self.pages.lock().unwrap_or_else(|e| e.into_inner()).free(first, n);
        }
    }
}

/// Page-aligned DMA memory inside a chunk, for the driver's own structures (queues,
/// PRP lists, identify pages): freed when the `Dma` is dropped.
pub(crate) struct Dma {
    pub(crate) chunk: Arc<Chunk>,
    pub(crate) off: usize,
    pub(crate) len: usize,
    /// Never given back (the controller may still use it).
    pub(crate) leaked: bool,
}

impl Dma {
    /// The device's address of byte `off` of it.
    pub(crate) fn iova(&self, off: usize) -> u64 {
        self.chunk.iova + (self.off + off) as u64
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
        self.chunk.mem.zero(self.off, self.len);
        self.chunk.pages.lock().unwrap_or_else(|e| e.into_inner()).free(self.off / PAGE, self.len / PAGE);
    }
}

/// How a chunk gets the address the device reaches it at.
pub(crate) enum Mapper {
    /// Mapped into the IOMMU of a VFIO container at an allocated IOVA.
    Iommu(Arc<Container>),
    /// No IOMMU: the chunk's physical address (one hugepage, pinned, so physically
    /// contiguous and never moved).
    Physical,
}

/// The DMA memory of one controller.
pub(crate) struct Pool {
    mapper: Mapper,
    /// Read on every I/O (the DMA-buffer check in `prepare`), written only when a chunk is
    /// added: a read lock, so queues on several threads do not serialise on it.
    state: RwLock<PoolState>,
}

struct PoolState {
    iova: Iova,
    chunks: Vec<Arc<Chunk>>,
}

impl Pool {
    pub(crate) fn new(mapper: Mapper) -> Pool {
        Pool { mapper, state: RwLock::new(PoolState { iova: Iova::new(), chunks: Vec::new() }) }
    }

    /// `len` bytes (whole pages) in some chunk: an existing one with room, or a new one.
    fn take(&self, len: usize) -> io::Result<(Arc<Chunk>, usize)> {
        let n = len.max(1).div_ceil(PAGE);
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        for c in &st.chunks {
            if let Some(first) = c.pages.lock().unwrap_or_else(|e| e.into_inner()).alloc(n) {
                return Ok((c.clone(), first));
            }
        }
        if matches!(self.mapper, Mapper::Physical) && n * PAGE > HUGEPAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} bytes of DMA memory in one piece: with dma=uio a piece (a buffer, a queue's PRP pages) is \
                     at most one 2 MiB hugepage (hugepages are not physically contiguous with each other)",
                    n * PAGE
                ),
            ));
        }
        let mem = DmaMem::alloc(n * PAGE).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOMEM) => io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "no free 2 MiB hugepages for {} bytes of DMA memory: reserve some with \
                     `sysctl vm.nr_hugepages=N` (or the kernel parameter hugepages=N)",
                    n * PAGE
                ),
            ),
            _ => e,
        })?;
        let iova = match &self.mapper {
            Mapper::Iommu(container) => {
                let iova = st
                    .iova
                    .alloc(mem.len() as u64)
                    .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "the IOMMU address space is used up"))?;
                container.map_dma(mem.addr(), iova, mem.len() as u64).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("VFIO_IOMMU_MAP_DMA of {} bytes at IOVA {iova:#x}: {e}", mem.len()),
                    )
                })?;
                iova
            }
            Mapper::Physical => {
                mem.pin().map_err(|e| io::Error::new(e.kind(), format!("mlock of a DMA hugepage: {e}")))?;
                let pa = uio::phys_addr(mem.addr())?;
                if pa % HUGEPAGE as u64 != 0 {
                    return Err(io::Error::other(format!(
                        "the hugepage at {:#x} has physical address {pa:#x}, not 2 MiB-aligned",
                        mem.addr()
                    )));
                }
                pa
            }
        };
        let mut pages = Pages::new(mem.len() / PAGE);
        let first = pages.alloc(n).expect("a new chunk holds the request");
        let c = Arc::new(Chunk { mem, iova, pages: Mutex::new(pages), lent: Mutex::new(Vec::new()) });
        st.chunks.push(c.clone());
        Ok((c, first))
    }

    /// DMA memory for the driver itself.
    pub(crate) fn dma(&self, len: usize) -> io::Result<Dma> {
        let (chunk, first) = self.take(len)?;
        Ok(Dma { chunk, off: first * PAGE, len: len.max(1).div_ceil(PAGE) * PAGE, leaked: false })
    }

    /// A zeroed buffer of `len` bytes in DMA memory.
    pub(crate) fn buffer(&self, len: usize) -> io::Result<Buffer> {
        let (chunk, first) = self.take(len)?;
        let n = len.max(1).div_ceil(PAGE);
        let ptr = chunk.mem.ptr(first * PAGE, n * PAGE);
        let owner: Arc<dyn Owner> = chunk.clone();
        // SAFETY: the pages first..first + n of the chunk are page-aligned, zeroed (fresh
        // or zeroed on release), reserved for this buffer until its release, and live as
        // long as the chunk, which the owner reference keeps alive.
        let b = unsafe { Buffer::foreign(ptr, len, owner) };
        chunk.lent.lock().unwrap_or_else(|e| e.into_inner()).push((b.id(), first, n));
        Ok(b)
    }

    /// The IOVA of `len` bytes at `addr` when they are DMA memory of this pool.
    pub(crate) fn iova_of(&self, addr: u64, len: u64) -> Option<u64> {
        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        st.chunks.iter().find_map(|c| c.iova_of(addr, len))
    }

    /// A snapshot of the chunks, for lock-free lookups on the I/O path.
    pub(crate) fn chunks(&self) -> Vec<Arc<Chunk>> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).chunks.clone()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The device is closing: nothing may reach the memory through the IOMMU any
        // more. Buffers still alive keep their memory (not the mapping). Without an
        // IOMMU there is nothing to unmap: the controller was disabled before this.
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Mapper::Iommu(container) = &self.mapper {
            for c in &st.chunks {
                let _ = container.unmap_dma(c.iova, c.mem.len() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iova_ranges_are_2mib_aligned_disjoint_and_bounded() {
        let mut a = Iova::new();
        let x = a.alloc(4096).unwrap();
        let y = a.alloc(3 << 20).unwrap();
        assert_eq!(x, 1 << 32);
        assert_eq!(y, x + (2 << 20), "the next range starts at the next 2 MiB boundary");
        assert!(a.alloc(1 << 39).is_none(), "past the address width");
        let z = a.alloc(4096).unwrap();
        assert!(z >= y + (3 << 20) && z % (2 << 20) == 0);
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
