//! The buffer handle table: C holds plain pointers, Rust owns the buffers.
//!
//! `ioswitch_buf_alloc` gives C the start address of a [`Buffer`] and keeps the `Buffer`
//! itself here, in a [`Slot`] found from the address. A submission *takes* the buffer out
//! of its slot (the slot is then busy) and moves it into the queue, as the Rust API does;
//! the completion puts it back. `ioswitch_buf_free` refuses a busy buffer, so C can never
//! free memory the kernel may still write.
//!
//! The hot path (take and put, once per command and buffer) takes no lock: the address
//! is looked up in a radix tree whose nodes are never freed, and a slot changes hands by
//! one compare-and-swap. Only allocating and freeing buffers lock. In front of the tree
//! sits a small direct-mapped cache of slots recently found by address: a hint only,
//! since what makes a slot the buffer's is the compare-and-swap and the address check
//! after it, which every lookup does anyway (see [`claim`]).
//!
//! Slots are never freed either: a freed slot goes to a pool for the next allocation, so
//! a stale pointer from C finds a free (or re-used, detected by its address) slot instead
//! of freed memory.

use ioswitch_rs::Buffer;
use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Every buffer starts on at least this boundary, so `address >> 12` names it uniquely.
pub(crate) const MIN_ALIGN: usize = 4096;
const SHIFT: u32 = 12;
/// Bits of the key (`address >> 12`) the tree covers: 57-bit addresses (5-level paging).
const KEY_BITS: u32 = 45;
const TOP_BITS: u32 = 12;
const NODE_BITS: u32 = 11;
const NODE_LEN: usize = 1 << NODE_BITS;

const FREE: u8 = 0;
const IDLE: u8 = 1;
const BUSY: u8 = 2;

/// One buffer's place in the table.
pub(crate) struct Slot {
    state: AtomicU8,
    addr: AtomicUsize,
    len: AtomicUsize,
    /// `Some` exactly while the state is IDLE; only the thread that moved the state away
    /// from IDLE (or that holds it BUSY) touches it.
    buf: UnsafeCell<Option<Buffer>>,
}

// SAFETY: `buf` is only accessed by the one thread that won the state transition
// (IDLE -> BUSY or IDLE -> FREE, or the allocating thread before publishing), so the
// cell is never shared between threads while it is being read or written.
unsafe impl Sync for Slot {}

impl Slot {
    /// The buffer's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

struct Node<T> {
    e: [AtomicPtr<T>; NODE_LEN],
}

impl<T> Node<T> {
    fn new_leaked() -> *mut Node<T> {
        Box::into_raw(Box::new(Node { e: [const { AtomicPtr::new(ptr::null_mut()) }; NODE_LEN] }))
    }
}

type Leaf = Node<Slot>;
type Mid = Node<Leaf>;
type Upper = Node<Mid>;

static TOP: [AtomicPtr<Upper>; 1 << TOP_BITS] = [const { AtomicPtr::new(ptr::null_mut()) }; 1 << TOP_BITS];

const CACHE_BITS: u32 = 10;
/// Slots recently found by address, at `(address >> 12) % 1024`. Any slot may be in any
/// entry (stale, freed, re-used, or the buffer of another address): an entry is a guess
/// that [`claim`] checks like a tree lookup's answer. Written on inserts and on tree
/// lookups only, so the hot path only reads it.
static CACHE: [AtomicPtr<Slot>; 1 << CACHE_BITS] = [const { AtomicPtr::new(ptr::null_mut()) }; 1 << CACHE_BITS];

#[inline(always)]
fn cache_entry(addr: usize) -> &'static AtomicPtr<Slot> {
    &CACHE[(addr >> SHIFT) & ((1 << CACHE_BITS) - 1)]
}

/// Remembers `slot` as the one for `addr`.
#[inline(always)]
fn remember(addr: usize, slot: &'static Slot) {
    cache_entry(addr).store(slot as *const Slot as *mut Slot, Ordering::Release);
}

/// Serialises changes to the tree and the slot pool (allocation and free only).
static WRITER: Mutex<Vec<&'static Slot>> = Mutex::new(Vec::new());

fn key(addr: usize) -> Option<usize> {
    if addr == 0 || addr % MIN_ALIGN != 0 {
        return None;
    }
    let k = addr >> SHIFT;
    (k >> KEY_BITS == 0).then_some(k)
}

fn indices(k: usize) -> [usize; 4] {
    let m = NODE_LEN - 1;
    [k >> (3 * NODE_BITS), (k >> (2 * NODE_BITS)) & m, (k >> NODE_BITS) & m, k & m]
}

/// The leaf entry for `addr`, when the tree has the nodes on the way to it.
fn entry(addr: usize) -> Option<&'static AtomicPtr<Slot>> {
    let [a, b, c, d] = indices(key(addr)?);
    let upper = TOP[a].load(Ordering::Acquire);
    // SAFETY: nodes are published (Release) fully initialised and never freed, so a
    // non-null pointer loaded with Acquire is valid for the rest of the process.
    let mid = unsafe { upper.as_ref() }?.e[b].load(Ordering::Acquire);
    // SAFETY: as above.
    let leaf = unsafe { mid.as_ref() }?.e[c].load(Ordering::Acquire);
    // SAFETY: as above.
    Some(&unsafe { leaf.as_ref() }?.e[d])
}

/// Finds the slot of the buffer that starts at `addr`.
pub(crate) fn lookup(addr: usize) -> Option<&'static Slot> {
    let p = entry(addr)?.load(Ordering::Acquire);
    // SAFETY: slots are leaked (never freed) and published with Release after their
    // fields are set.
    unsafe { p.as_ref() }
}

/// The leaf entry for `addr`, creating nodes on the way. Caller holds WRITER.
fn entry_or_insert(addr: usize) -> Option<&'static AtomicPtr<Slot>> {
    fn child<T>(at: &AtomicPtr<Node<T>>) -> &'static Node<T> {
        let mut p = at.load(Ordering::Acquire);
        if p.is_null() {
            p = Node::new_leaked();
            at.store(p, Ordering::Release);
        }
        // SAFETY: p is a leaked, fully initialised node (just made, or published before).
        unsafe { &*p }
    }
    let [a, b, c, d] = indices(key(addr)?);
    let upper = child(&TOP[a]);
    let mid = child(&upper.e[b]);
    let leaf = child(&mid.e[c]);
    Some(&leaf.e[d])
}

/// Why a buffer could not be taken or freed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No live buffer from `ioswitch_buf_alloc` starts at the address.
    Unknown,
    /// The buffer belongs to a command (submitted and not completed, or in a sync call).
    Busy,
}

/// Registers a buffer; returns its address, the handle C gets.
pub(crate) fn insert(mut buf: Buffer) -> Result<*mut u8, String> {
    let ptr = buf.as_mut_ptr();
    let addr = ptr as usize;
    let len = buf.len();
    let mut pool = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(at) = entry_or_insert(addr) else {
        return Err(format!("buffer address {addr:#x} is not {MIN_ALIGN}-byte aligned or is out of range"));
    };
    if !at.load(Ordering::Acquire).is_null() {
        return Err(format!("buffer address {addr:#x} is already registered"));
    }
    let slot: &'static Slot = match pool.pop() {
        Some(s) => s,
        None => Box::leak(Box::new(Slot {
            state: AtomicU8::new(FREE),
            addr: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            buf: UnsafeCell::new(None),
        })),
    };
    slot.addr.store(addr, Ordering::Relaxed);
    slot.len.store(len, Ordering::Relaxed);
    // SAFETY: the slot is FREE and out of the tree and the pool (we popped it, under the
    // lock), so no other thread can reach its cell; stale lookups fail the IDLE CAS.
    unsafe { *slot.buf.get() = Some(buf) };
    slot.state.store(IDLE, Ordering::Release);
    at.store(slot as *const Slot as *mut Slot, Ordering::Release);
    remember(addr, slot);
    Ok(ptr)
}

/// Makes the slot of the buffer that starts at `addr` busy (IDLE -> BUSY) and returns it:
/// this thread then owns the slot's cell until it stores IDLE again.
#[inline(always)]
fn claim(addr: usize) -> Result<&'static Slot, Refusal> {
    match claim_cached(addr) {
        Some(slot) => Ok(slot),
        None => claim_from_tree(addr),
    }
}

/// [`claim`] by the slot the cache names for `addr`, when that slot says it holds
/// `addr`; `None` for anything else (no entry, another address, a free or busy slot),
/// which the tree then decides.
///
/// The answer is trusted only after winning the slot's compare-and-swap and finding
/// `addr` in it again, exactly as for a slot found in the tree: a cache entry is no more
/// stale than a tree lookup that raced with a free and a re-use.
#[inline(always)]
fn claim_cached(addr: usize) -> Option<&'static Slot> {
    // SAFETY: slots are leaked (never freed) and published with Release after their
    // fields are set; the cache's entries are stored with Release after that.
    let slot = unsafe { cache_entry(addr).load(Ordering::Acquire).as_ref() }?;
    // The address check before the swap keeps a guess for another buffer from making that
    // buffer busy, even for a moment.
    if slot.addr.load(Ordering::Relaxed) != addr
        || slot.state.compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed).is_err()
    {
        return None;
    }
    if slot.addr.load(Ordering::Relaxed) != addr {
        // Freed and re-used for another address between the check and the swap.
        slot.state.store(IDLE, Ordering::Release);
        return None;
    }
    Some(slot)
}

/// [`claim`] by the tree; remembers the slot found in the cache.
#[inline(never)]
fn claim_from_tree(addr: usize) -> Result<&'static Slot, Refusal> {
    let slot = lookup(addr).ok_or(Refusal::Unknown)?;
    match slot.state.compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => {}
        Err(BUSY) => return Err(Refusal::Busy),
        Err(_) => return Err(Refusal::Unknown),
    }
    if slot.addr.load(Ordering::Relaxed) != addr {
        // A stale lookup raced with a free and a re-use of the slot for another address.
        slot.state.store(IDLE, Ordering::Release);
        return Err(Refusal::Unknown);
    }
    remember(addr, slot);
    Ok(slot)
}

/// Takes the buffer that starts at `addr` out of its slot (the slot becomes busy).
#[inline]
pub(crate) fn take(addr: usize) -> Result<(&'static Slot, Buffer), Refusal> {
    let slot = claim(addr)?;
    // SAFETY: winning IDLE -> BUSY gives this thread the cell until it stores IDLE again.
    match unsafe { (*slot.buf.get()).take() } {
        Some(b) => Ok((slot, b)),
        None => {
            slot.state.store(IDLE, Ordering::Release);
            Err(Refusal::Unknown)
        }
    }
}

/// Lends the buffer that starts at `addr` to `f` for the duration of the call, without
/// moving it out of its slot: the slot is busy while `f` runs (so the buffer can be
/// neither taken nor freed meanwhile) and idle again afterwards, also when `f` panics.
/// The synchronous path uses this: one (usually cached) lookup, one compare-and-swap,
/// one store.
#[inline]
pub(crate) fn with<R>(addr: usize, f: impl FnOnce(&mut Buffer) -> R) -> Result<R, Refusal> {
    lend(claim(addr)?, f)
}

/// Lends the buffer of `slot`, which this thread has claimed, to `f`; the slot is idle
/// again afterwards.
#[inline(always)]
fn lend<R>(slot: &'static Slot, f: impl FnOnce(&mut Buffer) -> R) -> Result<R, Refusal> {
    /// Makes the slot idle again when dropped.
    struct Lent(&'static Slot);
    impl Drop for Lent {
        #[inline]
        fn drop(&mut self) {
            self.0.state.store(IDLE, Ordering::Release);
        }
    }
    let lent = Lent(slot);
    // SAFETY: winning IDLE -> BUSY (the caller's claim) gives this thread the cell until
    // `lent` stores IDLE again, after the last use of this borrow.
    match unsafe { (*slot.buf.get()).as_mut() } {
        Some(b) => Ok(f(b)),
        None => {
            drop(lent);
            Err(Refusal::Unknown)
        }
    }
}

/// Puts a buffer taken with [`take`] back; the slot is idle again.
#[inline]
pub(crate) fn put(slot: &'static Slot, buf: Buffer) {
    // SAFETY: the caller took this buffer from this slot, so it holds the slot BUSY and
    // owns the cell until the Release store below.
    unsafe { *slot.buf.get() = Some(buf) };
    slot.state.store(IDLE, Ordering::Release);
}

/// Frees the buffer that starts at `addr`, unless a command holds it.
pub(crate) fn free(addr: usize) -> Result<(), Refusal> {
    let buf = {
        let mut pool = WRITER.lock().unwrap_or_else(|e| e.into_inner());
        let at = entry(addr).ok_or(Refusal::Unknown)?;
        // SAFETY: slots are leaked and never freed.
        let slot: &'static Slot = unsafe { at.load(Ordering::Acquire).as_ref() }.ok_or(Refusal::Unknown)?;
        match slot.state.compare_exchange(IDLE, FREE, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {}
            Err(BUSY) => return Err(Refusal::Busy),
            Err(_) => return Err(Refusal::Unknown),
        }
        at.store(ptr::null_mut(), Ordering::Release);
        // SAFETY: winning IDLE -> FREE gives this thread the cell; the slot is now out of
        // the tree, and goes to the pool only below, under the same lock.
        let buf = unsafe { (*slot.buf.get()).take() };
        pool.push(slot);
        buf
    };
    #[cfg(not(test))]
    drop(buf);
    #[cfg(test)]
    tests::keep_freed(buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buffers freed by any test of this process, kept allocated to the end. Tests run
    /// in parallel threads of one process and share the table: without this, a buffer
    /// another test allocates could land at the address one test has just freed, and that
    /// test's "a freed address is unknown" check would see the other test's buffer (this
    /// happened: buffers_sharing_a_cache_entry_stay_apart failed 1 run in 9). Freeing still
    /// takes the buffer out of the table exactly as outside tests; only the memory stays.
    static FREED: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());

    pub(super) fn keep_freed(buf: Option<Buffer>) {
        FREED.lock().unwrap_or_else(|e| e.into_inner()).extend(buf);
    }

    fn buffer(len: usize) -> Buffer {
        Buffer::alloc(len, MIN_ALIGN).unwrap()
    }

    #[test]
    fn a_buffer_is_found_by_its_start_address_only() {
        let p = insert(buffer(8192)).unwrap() as usize;
        assert_eq!(lookup(p).unwrap().len(), 8192);
        assert!(lookup(p + 4096).is_none());
        assert!(lookup(p + 1).is_none());
        assert_eq!(free(p), Ok(()));
        assert!(lookup(p).is_none());
    }

    #[test]
    fn a_taken_buffer_cannot_be_taken_again_or_freed() {
        let p = insert(buffer(4096)).unwrap() as usize;
        let (slot, b) = take(p).unwrap();
        assert_eq!(b.as_ptr() as usize, p);
        assert_eq!(take(p).err(), Some(Refusal::Busy));
        assert_eq!(free(p), Err(Refusal::Busy));
        put(slot, b);
        assert_eq!(free(p), Ok(()));
        assert_eq!(free(p), Err(Refusal::Unknown));
        assert_eq!(take(p).err(), Some(Refusal::Unknown));
    }

    #[test]
    fn a_lent_buffer_is_busy_during_the_call_only() {
        let p = insert(buffer(4096)).unwrap() as usize;
        let r = with(p, |b| {
            assert_eq!(b.as_ptr() as usize, p);
            assert_eq!(take(p).err(), Some(Refusal::Busy));
            assert_eq!(with(p, |_| ()).err(), Some(Refusal::Busy));
            assert_eq!(free(p), Err(Refusal::Busy));
            7
        });
        assert_eq!(r, Ok(7));
        let caught = std::panic::catch_unwind(|| with(p, |_| panic!("in the call")));
        assert!(caught.is_err());
        assert_eq!(with(p, |b| b.len()), Ok(4096), "idle again after a panic");
        assert_eq!(with(p + 1, |_| ()).err(), Some(Refusal::Unknown));
        assert_eq!(free(p), Ok(()));
        assert_eq!(with(p, |_| ()).err(), Some(Refusal::Unknown));
    }

    #[test]
    fn slots_are_reused_and_stale_addresses_stay_unknown() {
        let a = insert(buffer(4096)).unwrap() as usize;
        free(a).unwrap();
        let b = insert(buffer(4096)).unwrap() as usize;
        if a != b {
            assert_eq!(take(a).err(), Some(Refusal::Unknown));
        }
        free(b).unwrap();
    }

    #[test]
    fn buffers_sharing_a_cache_entry_stay_apart() {
        // 4 MiB alignment: every such buffer has the cache entry of index 0.
        let big = |len| Buffer::alloc(len, 4096 << CACHE_BITS).unwrap();
        let a = insert(big(4096)).unwrap() as usize;
        let b = insert(big(8192)).unwrap() as usize;
        assert!(ptr::eq(cache_entry(a), cache_entry(b)));
        for _ in 0..3 {
            assert_eq!(with(a, |x| x.len()), Ok(4096));
            assert_eq!(with(b, |x| x.len()), Ok(8192));
        }
        // Lending one leaves the other free to use, whichever the entry names.
        let r = with(a, |_| {
            assert_eq!(take(a).err(), Some(Refusal::Busy));
            assert_eq!(with(b, |x| x.len()), Ok(8192));
            assert_eq!(take(a).err(), Some(Refusal::Busy), "busy also once the entry names b");
            assert_eq!(free(a), Err(Refusal::Busy));
        });
        assert_eq!(r, Ok(()));
        let (slot, buf) = take(b).unwrap();
        assert_eq!(with(a, |x| x.len()), Ok(4096));
        assert_eq!(with(b, |_| ()).err(), Some(Refusal::Busy));
        put(slot, buf);
        // A freed buffer stays unknown while the entry still names its slot.
        assert_eq!(with(a, |_| ()), Ok(()));
        assert_eq!(free(a), Ok(()));
        assert_eq!(with(a, |_| ()).err(), Some(Refusal::Unknown));
        assert_eq!(take(a).err(), Some(Refusal::Unknown));
        assert_eq!(with(b, |x| x.len()), Ok(8192));
        assert_eq!(free(b), Ok(()));
        assert_eq!(with(b, |_| ()).err(), Some(Refusal::Unknown));
    }

    #[test]
    fn a_stale_cache_entry_grants_nothing() {
        // Entries that name slots since freed and re-used for other addresses (a slot
        // keeps its last address while free, and takes a new one when re-used).
        let mut freed = Vec::new();
        for _ in 0..8 {
            let p = insert(buffer(4096)).unwrap() as usize;
            assert_eq!(with(p, |_| ()), Ok(()));
            free(p).unwrap();
            freed.push(p);
        }
        let live: Vec<usize> = (0..8).map(|_| insert(buffer(4096)).unwrap() as usize).collect();
        for &p in &freed {
            if !live.contains(&p) {
                assert_eq!(with(p, |_| ()).err(), Some(Refusal::Unknown));
                assert_eq!(take(p).err(), Some(Refusal::Unknown));
            }
        }
        for &p in &live {
            assert_eq!(with(p, |b| b.as_ptr() as usize), Ok(p));
            free(p).unwrap();
        }
    }

    #[test]
    fn threads_lending_buffers_that_share_cache_entries_never_see_each_others_busy() {
        let big = |len| Buffer::alloc(len, 4096 << CACHE_BITS).unwrap();
        let ps: Vec<usize> = (0..4).map(|_| insert(big(4096)).unwrap() as usize).collect();
        let threads: Vec<_> = ps
            .iter()
            .map(|&p| {
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        assert_eq!(with(p, |b| b.as_ptr() as usize), Ok(p));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for p in ps {
            free(p).unwrap();
        }
    }

    #[test]
    fn many_threads_share_the_table() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..200 {
                        let p = insert(buffer(4096)).unwrap() as usize;
                        let (s, b) = take(p).unwrap();
                        put(s, b);
                        free(p).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
