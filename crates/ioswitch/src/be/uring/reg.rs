//! The registered-buffer table of a ring (`register_buffers=1`).
//!
//! The kernel's table is sparse and bounded (twice the depth, within 16..=1024 entries).
//! A buffer is registered the first time it is seen (one
//! `IORING_REGISTER_BUFFERS_UPDATE` syscall, counted) and found again by
//! [`Buffer::id`], which no other buffer of the process ever has, so a buffer freed and
//! reallocated at the same address is registered afresh and the kernel only ever sees a
//! fixed-buffer index whose registration covers exactly the buffer of that command. When
//! the table is full an entry that no command in flight uses is replaced.

use crate::buf::Buffer;
use ::io_uring::Submitter;
use std::io;

/// Largest buffer the kernel registers.
const MAX_REG_BYTES: usize = 1 << 30;
/// Bounds of the registered-buffer table.
const REG_TABLE_MIN: u32 = 16;
const REG_TABLE_MAX: u32 = 1024;

/// The registered-buffer table: which buffer (by id) each entry of the kernel's sparse
/// table holds, how many commands in flight use it, and an id → entry map.
pub(super) struct RegTable {
    /// Buffer id registered at each entry (0: empty; buffer ids start at 1).
    pub(super) ids: Box<[u64]>,
    /// Commands in flight using each entry.
    pub(super) users: Box<[u32]>,
    map: IdMap,
    /// Entries handed out so far (entries past it were never registered).
    filled: usize,
    /// Clock hand for choosing an entry to replace.
    hand: usize,
    /// Registrations made (one syscall each).
    pub(super) registrations: u64,
}

impl RegTable {
    /// Entries of the kernel's table for a queue of `depth` slots.
    pub(super) fn len_for(depth: u32) -> u32 {
        depth.saturating_mul(2).clamp(REG_TABLE_MIN, REG_TABLE_MAX)
    }

    pub(super) fn new(len: usize) -> RegTable {
        RegTable {
            ids: vec![0; len].into_boxed_slice(),
            users: vec![0; len].into_boxed_slice(),
            map: IdMap::new(len),
            filled: 0,
            hand: 0,
            registrations: 0,
        }
    }

    /// The table entry holding `buf`, registering it first if needed (one syscall,
    /// counted in `syscalls`); None when the command must use a plain read/write (buffer
    /// too large to register, or every entry in use). Marks the entry used.
    pub(super) fn index_for(
        &mut self,
        sub: &Submitter<'_>,
        buf: &Buffer,
        syscalls: &mut u64,
    ) -> io::Result<Option<u16>> {
        let id = buf.id();
        if buf.len() > MAX_REG_BYTES || id == 0 {
            // Too large, or borrowed caller memory (id 0, Buffer::borrow_raw).
            return Ok(None);
        }
        if let Some(e) = self.map.get(id) {
            self.users[e as usize] += 1;
            return Ok(Some(e));
        }
        let Some(e) = self.victim() else { return Ok(None) };
        let old = std::mem::replace(&mut self.ids[e], 0);
        if old != 0 {
            self.map.remove(old);
        }
        *syscalls += 1;
        crate::sys::uring::register_buffer(sub, e as u32, buf)?;
        self.registrations += 1;
        self.ids[e] = id;
        self.map.insert(id, e as u16);
        self.users[e] += 1;
        Ok(Some(e as u16))
    }

    /// An entry to (re)register: a never-used one, else one no command in flight uses.
    fn victim(&mut self) -> Option<usize> {
        let len = self.ids.len();
        if self.filled < len {
            self.filled += 1;
            return Some(self.filled - 1);
        }
        for _ in 0..len {
            let e = self.hand;
            self.hand = (self.hand + 1) % len;
            if self.users[e] == 0 {
                return Some(e);
            }
        }
        None
    }

    pub(super) fn unuse(&mut self, e: usize) {
        if let Some(u) = self.users.get_mut(e) {
            *u = u.saturating_sub(1);
        }
    }
}

/// A fixed-capacity map from buffer id (non-zero) to table entry: open addressing with
/// linear probing and backward-shift deletion, at most half full, never allocating after
/// creation.
struct IdMap {
    keys: Box<[u64]>,
    vals: Box<[u16]>,
    mask: usize,
    shift: u32,
}

impl IdMap {
    /// A map for up to `n` ids.
    fn new(n: usize) -> IdMap {
        let cap = (n.max(1) * 2).next_power_of_two();
        IdMap {
            keys: vec![0; cap].into_boxed_slice(),
            vals: vec![0; cap].into_boxed_slice(),
            mask: cap - 1,
            shift: 64 - cap.trailing_zeros(),
        }
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        // Fibonacci hashing: the top bits of the product.
        (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift.min(63)) as usize & self.mask
    }

    #[inline]
    fn get(&self, id: u64) -> Option<u16> {
        let mut i = self.home(id);
        loop {
            match self.keys[i] {
                k if k == id => return Some(self.vals[i]),
                0 => return None,
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    fn insert(&mut self, id: u64, v: u16) {
        let mut i = self.home(id);
        while self.keys[i] != 0 && self.keys[i] != id {
            i = (i + 1) & self.mask;
        }
        self.keys[i] = id;
        self.vals[i] = v;
    }

    fn remove(&mut self, id: u64) {
        let mut i = self.home(id);
        loop {
            match self.keys[i] {
                0 => return,
                k if k == id => break,
                _ => i = (i + 1) & self.mask,
            }
        }
        // Shift later members of the probe run back into the hole when their home allows.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let k = self.keys[j];
            if k == 0 {
                break;
            }
            let home = self.home(k);
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.keys[hole] = k;
                self.vals[hole] = self.vals[j];
                hole = j;
            }
        }
        self.keys[hole] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_map_finds_inserts_and_removes() {
        let mut m = IdMap::new(16);
        for id in 1..=16u64 {
            m.insert(id * 1_000_003, id as u16);
        }
        for id in 1..=16u64 {
            assert_eq!(m.get(id * 1_000_003), Some(id as u16));
        }
        for id in (1..=16u64).step_by(2) {
            m.remove(id * 1_000_003);
        }
        for id in 1..=16u64 {
            let want = if id % 2 == 0 { Some(id as u16) } else { None };
            assert_eq!(m.get(id * 1_000_003), want, "id {id}");
        }
        m.remove(12345);
        for id in 100..108u64 {
            m.insert(id, 7);
        }
        assert_eq!(m.get(104), Some(7));
    }
}
