//! One polled queue pair: a submission ring and a completion ring in DMA memory, their
//! doorbells, phase tags, and the per-queue command table (command id → what the
//! command carries, handed back at its completion).

use super::mem::{Dma, Pool, PAGE};
use super::prp;
use super::regs;
use crate::spec::{Cqe, Sqe};
use crate::sys::vfio::{dma_fence, Bar};
use std::io;

/// Submission ring state: entries go in at the tail; the controller reports its head in
/// each completion. One entry always stays empty (full = tail + 1 == head).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SqRing {
    pub size: u16,
    pub tail: u16,
    pub head: u16,
}

impl SqRing {
    pub(crate) fn new(size: u16) -> SqRing {
        SqRing { size, tail: 0, head: 0 }
    }
    pub(crate) fn is_full(&self) -> bool {
        (self.tail + 1) % self.size == self.head
    }
    /// The slot the next entry goes to; advances the tail.
    pub(crate) fn push(&mut self) -> u16 {
        let at = self.tail;
        self.tail = (self.tail + 1) % self.size;
        at
    }
}

/// Completion ring state: the entry at the head is new when its phase tag equals
/// `phase`, which flips each time the head wraps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqRing {
    pub size: u16,
    pub head: u16,
    pub phase: bool,
}

impl CqRing {
    pub(crate) fn new(size: u16) -> CqRing {
        // The ring starts zeroed (phase 0): the controller's first pass writes phase 1.
        CqRing { size, head: 0, phase: true }
    }
    /// Whether an entry whose status word is `status` (phase tag in bit 0) is new.
    pub(crate) fn is_new(&self, status: u16) -> bool {
        (status & 1 != 0) == self.phase
    }
    pub(crate) fn advance(&mut self) {
        self.head += 1;
        if self.head == self.size {
            self.head = 0;
            self.phase = !self.phase;
        }
    }
}

/// The command table: a command id per command in flight, with what it carries.
pub(crate) struct CidTable<T> {
    slots: Vec<Option<T>>,
    free: Vec<u16>,
}

impl<T> CidTable<T> {
    pub(crate) fn new(n: u16) -> CidTable<T> {
        CidTable { slots: (0..n).map(|_| None).collect(), free: (0..n).rev().collect() }
    }
    /// A free id for `v`; `v` back when every id is in flight.
    pub(crate) fn insert(&mut self, v: T) -> Result<u16, T> {
        let Some(cid) = self.free.pop() else { return Err(v) };
        self.slots[cid as usize] = Some(v);
        Ok(cid)
    }
    /// What the command `cid` carried; `None` for an id not in flight (a stale or
    /// foreign completion, which is ignored).
    pub(crate) fn take(&mut self, cid: u16) -> Option<T> {
        let v = self.slots.get_mut(cid as usize)?.take()?;
        self.free.push(cid);
        Some(v)
    }
    /// Commands in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }
    /// What the command `cid` carries, while in flight.
    pub(crate) fn get(&self, cid: u16) -> Option<&T> {
        self.slots.get(cid as usize)?.as_ref()
    }
    /// Takes every command still in flight; every id is free again, as in a new table.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let out = self.slots.iter_mut().filter_map(Option::take).collect();
        self.free = (0..self.slots.len() as u16).rev().collect();
        out
    }
}

/// One submission/completion queue pair with its rings in DMA memory and the PRP list
/// pages of each command id (contiguous, so that they chain).
pub(crate) struct QueuePair {
    pub qid: u16,
    pub sq: SqRing,
    pub cq: CqRing,
    sq_mem: Dma,
    cq_mem: Dma,
    prp: Dma,
    /// PRP list pages per command id.
    list_pages: usize,
    sq_db: usize,
    cq_db: usize,
    /// Entries pushed since the last doorbell write.
    pending: u16,
}

/// Size of a submission entry (CC.IOSQES = 6) and a completion entry (CC.IOCQES = 4).
pub(crate) const SQE_SIZE: usize = 64;
pub(crate) const CQE_SIZE: usize = 16;

impl QueuePair {
    /// Rings of `entries` entries (at most `entries - 1` commands in flight) and
    /// `list_pages` PRP list pages (at least one) for each of `cids` command ids.
    pub(crate) fn new(
        pool: &Pool,
        qid: u16,
        entries: u16,
        cids: u16,
        list_pages: usize,
        dstrd: u32,
    ) -> io::Result<QueuePair> {
        let list_pages = list_pages.max(1);
        Ok(QueuePair {
            qid,
            sq: SqRing::new(entries),
            cq: CqRing::new(entries),
            sq_mem: pool.dma(entries as usize * SQE_SIZE)?,
            cq_mem: pool.dma(entries as usize * CQE_SIZE)?,
            prp: pool.dma(cids.max(1) as usize * list_pages * PAGE)?,
            list_pages,
            sq_db: regs::sq_tail_doorbell(qid, dstrd),
            cq_db: regs::cq_head_doorbell(qid, dstrd),
            pending: 0,
        })
    }

    /// Keeps the rings' and PRP pages' memory from ever being reused (for a queue the
    /// controller would not delete).
    pub(crate) fn leak(&mut self) {
        self.sq_mem.leaked = true;
        self.cq_mem.leaked = true;
        self.prp.leaked = true;
    }

    /// Device addresses of the rings (for Create I/O SQ/CQ, or ASQ/ACQ).
    pub(crate) fn sq_iova(&self) -> u64 {
        self.sq_mem.iova(0)
    }
    pub(crate) fn cq_iova(&self) -> u64 {
        self.cq_mem.iova(0)
    }

    /// The first PRP list page of command id `cid`: its device address.
    pub(crate) fn prp_iova(&self, cid: u16) -> u64 {
        self.prp.iova(cid as usize * self.list_pages * PAGE)
    }

    /// The most PRP entries (pages) one command of this queue may have.
    pub(crate) fn max_entries(&self) -> usize {
        prp::max_entries(self.list_pages)
    }

    /// Describes a transfer of command id `cid` (see [`prp::describe`]): PRP1 and PRP2,
    /// with the list, when one is needed, written into `cid`'s pages.
    pub(crate) fn describe(&self, cid: u16, pieces: &[(u64, u64)]) -> Result<(u64, u64), prp::PrpError> {
        let base = self.prp.base() + cid as usize * self.list_pages * PAGE;
        let mem = self.prp.mem();
        prp::describe(pieces.iter().copied(), self.max_entries(), self.prp_iova(cid), |w, v| {
            mem.write_u64(base + 8 * w, v)
        })
    }

    /// Writes `bytes` at the start of `cid`'s first list page (data the driver builds,
    /// e.g. the DSM range of a file-set trim) and returns its device address.
    pub(crate) fn write_scratch(&self, cid: u16, bytes: &[u8]) -> u64 {
        self.prp.mem().write(self.prp.base() + cid as usize * self.list_pages * PAGE, bytes);
        self.prp_iova(cid)
    }

    /// Copies a submission entry into the ring (the caller checked it is not full);
    /// the device sees it at the next [`QueuePair::ring`].
    pub(crate) fn push(&mut self, sqe: &Sqe) {
        let at = self.sq.push() as usize;
        self.sq_mem.mem().write(self.sq_mem.base() + at * SQE_SIZE, sqe.as_bytes());
        self.pending += 1;
    }

    /// Rings the submission doorbell when entries are pending; true when it did.
    pub(crate) fn ring(&mut self, bar: &Bar) -> bool {
        if self.pending == 0 {
            return false;
        }
        dma_fence();
        bar.write32(self.sq_db, self.sq.tail as u32);
        self.pending = 0;
        true
    }

    /// Reaps at most `max` new completions, calling `f` for each, and writes the
    /// completion doorbell once. Returns how many.
    pub(crate) fn poll(&mut self, bar: &Bar, max: u32, mut f: impl FnMut(Cqe)) -> u32 {
        let mut n = 0;
        let mem = self.cq_mem.mem();
        while n < max {
            let off = self.cq_mem.base() + self.cq.head as usize * CQE_SIZE;
            let dw3 = mem.read_u32(off + 12);
            if !self.cq.is_new((dw3 >> 16) as u16) {
                break;
            }
            // Read the rest only after the phase tag said the entry is complete.
            dma_fence();
            let result = mem.read_u64(off);
            let dw2 = mem.read_u32(off + 8);
            let cqe =
                Cqe { result, sqhd: dw2 as u16, sqid: (dw2 >> 16) as u16, cid: dw3 as u16, status: (dw3 >> 16) as u16 };
            self.sq.head = cqe.sqhd % self.sq.size;
            self.cq.advance();
            n += 1;
            f(cqe);
        }
        if n > 0 {
            bar.write32(self.cq_db, self.cq.head as u32);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_submission_ring_keeps_one_entry_empty_and_wraps() {
        let mut s = SqRing::new(4);
        assert_eq!((s.push(), s.push(), s.push()), (0, 1, 2));
        assert!(s.is_full(), "3 of 4 entries used is full");
        s.head = 2; // the controller consumed two
        assert!(!s.is_full());
        assert_eq!(s.push(), 3);
        assert_eq!(s.push(), 0, "wraps to the start");
        assert!(s.is_full());
    }

    #[test]
    fn the_completion_phase_flips_at_each_wrap() {
        let mut c = CqRing::new(2);
        assert!(c.is_new(1) && !c.is_new(0), "first pass: the device writes phase 1");
        c.advance();
        assert!(c.phase);
        c.advance();
        assert_eq!(c.head, 0);
        assert!(c.is_new(0) && !c.is_new(1), "second pass: phase 0 is new, stale phase 1 entries are not");
        c.advance();
        c.advance();
        assert!(c.is_new(1));
    }

    #[test]
    fn command_ids_are_unique_in_flight_and_stale_ids_are_ignored() {
        let mut t: CidTable<&str> = CidTable::new(3);
        let a = t.insert("a").unwrap();
        let b = t.insert("b").unwrap();
        let c = t.insert("c").unwrap();
        assert!(a != b && b != c && a != c);
        assert_eq!(t.insert("d"), Err("d"), "every id in flight: the value comes back");
        assert_eq!(t.in_flight(), 3);
        assert_eq!(t.take(b), Some("b"));
        assert_eq!(t.take(b), None, "a completion for an id no longer in flight is ignored");
        assert_eq!(t.take(999), None);
        assert_eq!(t.insert("e"), Ok(b), "the freed id is reused");
        let mut rest = t.drain();
        rest.sort_unstable();
        assert_eq!(rest, vec!["a", "c", "e"]);
        assert_eq!(t.in_flight(), 0);
    }
}
