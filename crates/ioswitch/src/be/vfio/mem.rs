//! DMA memory of a controller: chunks of 2 MiB hugepages whose 4 KiB pages are handed out
//! by each chunk's own page allocator ([`Chunk`], in `sys/vfio.rs`, which makes buffers
//! over them). A chunk's device address comes from the pool's [`Mapper`]: with an IOMMU
//! (vfio-pci) the chunk is mapped at addresses from an [`Iova`] allocator; without one
//! (uio_pci_generic, `dma=uio`) a chunk is pinned hugepages, each at its own physical
//! address (`/proc/self/pagemap`): the driver's own structures stay inside one hugepage,
//! a buffer may span several (its PRP entries go per page). Buffers handed out by [`Pool::buffer`]
//! keep their chunk alive (a buffer may outlive the device); the IOMMU mappings go when
//! the device closes.

use crate::buf::Buffer;
use crate::sys::uio;
pub(crate) use crate::sys::vfio::{Chunk, Dma, PAGE};
use crate::sys::vfio::{Container, DmaMem, HUGEPAGE};
use std::io;
use std::sync::{Arc, RwLock};

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

/// How a chunk gets the address the device reaches it at.
pub(crate) enum Mapper {
    /// Mapped into the IOMMU of a VFIO container at an allocated IOVA.
    Iommu(Arc<Container>),
    /// No IOMMU: the physical address of each of the chunk's hugepages (pinned, so
    /// each physically contiguous and never moved; not contiguous with each other).
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

    /// What `from` makes of `len` bytes (whole pages) in some chunk: an existing one with
    /// room, or a new one. `contiguous`: the device must see the bytes at consecutive
    /// addresses (the driver's own structures); buffers need not (their PRP entries are
    /// per page), so without an IOMMU a buffer may span several hugepages.
    fn take<T>(&self, len: usize, contiguous: bool, from: impl Fn(&Arc<Chunk>) -> Option<T>) -> io::Result<T> {
        let n = len.max(1).div_ceil(PAGE);
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = st.chunks.iter().find_map(&from) {
            return Ok(t);
        }
        if matches!(self.mapper, Mapper::Physical) && contiguous && n * PAGE > HUGEPAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} bytes of the driver's DMA memory in one piece (a queue's rings or PRP list pages): with \
                     dma=uio such a piece is at most one 2 MiB hugepage (hugepages are not physically contiguous \
                     with each other); use a shallower queue",
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
        let c = match &self.mapper {
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
                Chunk::new(mem, iova)
            }
            Mapper::Physical => {
                mem.pin().map_err(|e| io::Error::new(e.kind(), format!("mlock of DMA hugepages: {e}")))?;
                // Each hugepage at its own physical address: they are not contiguous.
                let mut segs = Vec::with_capacity(mem.len() / HUGEPAGE);
                for at in (mem.addr()..mem.addr() + mem.len() as u64).step_by(HUGEPAGE) {
                    let pa = uio::phys_addr(at)?;
                    if pa % HUGEPAGE as u64 != 0 {
                        return Err(io::Error::other(format!(
                            "the hugepage at {at:#x} has physical address {pa:#x}, not 2 MiB-aligned"
                        )));
                    }
                    segs.push(pa);
                }
                if segs.len() == 1 {
                    Chunk::new(mem, segs[0])
                } else {
                    Chunk::scattered(mem, segs)
                }
            }
        };
        let c = Arc::new(c);
        let t = from(&c).expect("a new chunk holds the request");
        st.chunks.push(c);
        Ok(t)
    }

    /// DMA memory for the driver itself (contiguous for the device).
    pub(crate) fn dma(&self, len: usize) -> io::Result<Dma> {
        self.take(len, true, |c| c.reserve(len))
    }

    /// A zeroed buffer of `len` bytes in DMA memory.
    pub(crate) fn buffer(&self, len: usize) -> io::Result<Buffer> {
        self.take(len, false, |c| c.lend(len))
    }

    /// Whether `len` bytes at `addr` are DMA memory of this pool.
    pub(crate) fn contains(&self, addr: u64, len: u64) -> bool {
        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        st.chunks.iter().any(|c| c.contains(addr, len))
    }

    /// The device-contiguous pieces of `len` bytes at `addr` (see [`Chunk::pieces`]);
    /// false when they are not DMA memory of this pool.
    pub(crate) fn pieces(&self, addr: u64, len: u64, mut put: impl FnMut(u64, u64)) -> bool {
        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        st.chunks.iter().any(|c| c.pieces(addr, len, &mut put))
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
}
