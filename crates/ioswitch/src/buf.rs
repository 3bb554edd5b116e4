//! Owned, aligned I/O buffers.
//!
//! A [`Buffer`] is zero-initialised memory aligned for the device it was allocated for
//! (its LBA size and the page size, so O_DIRECT and DMA accept it). Buffers are owned:
//! an asynchronous submission moves its [`Data`] into the queue and the completion hands
//! it back, so no buffer can be freed or reused while the kernel may still touch it.

// Buffer internals (the allocation, the word-level moves of Data, the completion ring).
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Ids of buffers whose memory belongs to an [`Owner`] rather than to the global
/// allocator (DMA memory of a device) have this bit set; [`NEXT_ID`] never reaches it.
const FOREIGN: u64 = 1 << 63;

/// The owner of the memory of foreign buffers ([`Buffer::foreign`]): told when one is
/// dropped, so that it can reuse the memory.
pub(crate) trait Owner: Send + Sync {
    /// The buffer with this id was dropped: its memory is the owner's again.
    fn release(&self, id: u64);
}

/// The owners of the foreign buffers alive, by id. Taken when a foreign buffer is made
/// or dropped (never on the I/O path).
static OWNERS: Mutex<Vec<(u64, Arc<dyn Owner>)>> = Mutex::new(Vec::new());

#[cold]
fn release_foreign(id: u64) {
    let owner = {
        let mut owners = OWNERS.lock().unwrap_or_else(|e| e.into_inner());
        owners.iter().position(|(i, _)| *i == id).map(|at| owners.swap_remove(at).1)
    };
    // Outside the lock: the owner may drop the last reference to its memory here.
    if let Some(o) = owner {
        o.release(id);
    }
}

/// An owned, aligned, zero-initialised byte buffer.
///
/// 32 bytes, four words: the start address, the length, a unique id and the alignment.
/// The allocation starts at the start address rounded down to the alignment (the offset
/// past it is always less than the alignment); its size follows from the length, that
/// offset and the alignment.
///
/// The alignment is kept as its log2 in a word with only 64 valid values: the others are
/// a niche that lets [`Data`] tell its variants apart without a tag word. So a `Data` is
/// 32 bytes too and moves as whole words. (With a tag word it was 40 bytes, rebuilt on
/// the stack from 8-byte pieces and reloaded 16 bytes at a time, which stalls
/// store-to-load forwarding on every submission and completion.)
pub struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    id: u64,
    align: Log2,
}

/// log2 of a buffer's alignment, 0..=63, as a whole word whose other values are invalid
/// (a niche; see [`Buffer`]). A word rather than a byte, so that moving a `Buffer` or a
/// `Data` copies four whole words and never a byte apart.
#[derive(Clone, Copy)]
#[repr(u64)]
#[rustfmt::skip]
#[allow(dead_code)] // the variants are made by transmute in Log2::of
enum Log2 {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15,
    L16, L17, L18, L19, L20, L21, L22, L23, L24, L25, L26, L27, L28, L29, L30, L31,
    L32, L33, L34, L35, L36, L37, L38, L39, L40, L41, L42, L43, L44, L45, L46, L47,
    L48, L49, L50, L51, L52, L53, L54, L55, L56, L57, L58, L59, L60, L61, L62, L63,
}

impl Log2 {
    /// log2 of `align`, a power of two.
    fn of(align: usize) -> Log2 {
        debug_assert!(align.is_power_of_two());
        let n = align.trailing_zeros() as u64 & 63;
        // SAFETY: Log2 is repr(u64) with the 64 variants 0..=63, and n <= 63.
        unsafe { std::mem::transmute::<u64, Log2>(n) }
    }
}

/// Bytes allocated from the aligned base for `len` bytes starting `offset` past it, with
/// this alignment: whole multiples of the alignment and of [`GRANULE`], at least one.
/// `None` when that does not fit a `usize`.
fn alloc_size(len: usize, offset: usize, align: usize) -> Option<usize> {
    len.checked_add(offset).and_then(|n| n.max(1).checked_next_multiple_of(align.max(GRANULE)))
}

/// Allocation granule: allocations are rounded up to whole multiples of their alignment
/// and of this, so a device that transfers whole pages (NVMe PRPs) never writes past the
/// allocation.
const GRANULE: usize = 4096;

// SAFETY: Buffer owns its allocation exclusively (like Box<[u8]>); nothing in it is tied
// to a thread.
unsafe impl Send for Buffer {}
// SAFETY: shared references only give out &[u8] (like Box<[u8]>).
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two).
    pub fn alloc(len: usize, align: usize) -> Result<Buffer, String> {
        Buffer::with_alignment(len, align, 0)
    }

    /// Allocates `len` zeroed bytes that start `offset` bytes past an `align`-aligned
    /// address. With `offset` not a multiple of the device's alignment this makes a
    /// deliberately misaligned buffer (for testing how direct I/O rejects it). Only
    /// `offset % align` matters: the start is that far past an aligned address.
    pub fn with_alignment(len: usize, align: usize, offset: usize) -> Result<Buffer, String> {
        if !align.is_power_of_two() {
            return Err(format!("buffer alignment {align} is not a power of two"));
        }
        let offset = offset % align;
        let size = alloc_size(len, offset, align).ok_or_else(|| format!("buffer of {len} bytes is too large"))?;
        let layout = Layout::from_size_align(size, align)
            .map_err(|_| format!("buffer of {len} bytes aligned to {align} is too large"))?;
        // SAFETY: layout has a non-zero size (at least one granule).
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let base = NonNull::new(p).ok_or_else(|| format!("out of memory allocating a {len}-byte buffer"))?;
        // SAFETY: offset < align <= size, inside the allocation.
        let ptr = unsafe { base.add(offset) };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Ok(Buffer { ptr, len, id, align: Log2::of(align) })
    }

    /// A buffer over memory the caller owns, lent for as long as the returned value is
    /// in use: for interfaces that take caller memory for one call, as the C ABI's
    /// `ioswitch_pass_raw` does (like `pread(2)`). It is wrapped in [`ManuallyDrop`]:
    /// dropping it frees nothing. Its id is 0, which no allocated buffer has, so
    /// interfaces that register buffers with the kernel never register it; its alignment
    /// is whatever its address has, so direct I/O checks it as for any buffer.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes while the returned value
    /// is in use, and nothing else may read or write that memory meanwhile. Dropping the
    /// `Buffer` (also one taken out of the `ManuallyDrop`, as the C ABI's registered
    /// regions do for a command in a queue) frees nothing: its id 0 marks it borrowed.
    pub unsafe fn borrow_raw(ptr: NonNull<u8>, len: usize) -> ManuallyDrop<Buffer> {
        // Id 0: capacity() is len, and nothing reads past it.
        ManuallyDrop::new(Buffer { ptr, len, id: 0, align: Log2::of(1) })
    }

    /// A buffer over memory that `owner` lends (DMA memory of a device), given back to
    /// it when the buffer is dropped. Its alignment is 4 KiB; its capacity the length
    /// rounded up to whole 4 KiB pages.
    ///
    /// # Safety
    /// `ptr` must be 4 KiB-aligned, zeroed, and valid for reads and writes of `len`
    /// rounded up to 4 KiB bytes until `owner.release(id)` is called with this buffer's
    /// id, and nothing else may use that memory meanwhile.
    pub(crate) unsafe fn foreign(ptr: NonNull<u8>, len: usize, owner: Arc<dyn Owner>) -> Buffer {
        debug_assert!(ptr.as_ptr() as usize % GRANULE == 0);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed) | FOREIGN;
        OWNERS.lock().unwrap_or_else(|e| e.into_inner()).push((id, owner));
        Buffer { ptr, len, id, align: Log2::of(GRANULE) }
    }

    /// A buffer holding a copy of `bytes`, aligned to `align`.
    pub fn from_slice(bytes: &[u8], align: usize) -> Result<Buffer, String> {
        let mut b = Buffer::alloc(bytes.len(), align)?;
        b.copy_from_slice(bytes);
        Ok(b)
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the buffer holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Start address, for alignment checks and for handing to the kernel.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    /// Start address, writable.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn align(&self) -> usize {
        1 << self.align as u64
    }
    /// Bytes from the start to the aligned base of the allocation.
    fn offset(&self) -> usize {
        self.ptr.as_ptr() as usize & (self.align() - 1)
    }
    /// Bytes allocated from [`as_ptr`](Buffer::as_ptr) to the end of the allocation
    /// (≥ `len`; whole multiples of the alignment and of 4 KiB from an aligned start).
    pub fn capacity(&self) -> usize {
        if self.id == 0 {
            return self.len; // borrowed memory: only what was lent
        }
        self.alloc_size() - self.offset()
    }
    /// Bytes allocated from the aligned base (what [`Buffer::with_alignment`] allocated).
    fn alloc_size(&self) -> usize {
        // It fitted when the buffer was allocated, and nothing here changes.
        alloc_size(self.len, self.offset(), self.align()).unwrap_or(usize::MAX)
    }
    /// A number that no other buffer alive or dead in this process has had; interfaces
    /// that register buffers with the kernel use it to tell buffers apart.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the allocation holds len initialised bytes from as_ptr(), owned by self.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.id & FOREIGN != 0 {
            return release_foreign(self.id);
        }
        if self.id == 0 {
            // Borrowed caller memory (borrow_raw): this crate did not allocate it, so a
            // drop (of one that left its ManuallyDrop, or in an unwinding panic) frees
            // nothing.
            return;
        }
        let base = self.ptr.as_ptr().wrapping_sub(self.offset());
        // SAFETY: base and this layout are exactly what with_alignment allocated: the
        // start is less than one alignment past the aligned base, the size follows from
        // the same length, offset and alignment by the same function, and size and
        // alignment were validated there. (Borrowed buffers, id 0, returned above.)
        unsafe { alloc::dealloc(base, Layout::from_size_align_unchecked(self.alloc_size(), self.align())) }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("addr", &self.as_ptr()).field("len", &self.len).finish()
    }
}

/// The data of a command as it moves through a queue: no buffer, one, or several
/// (vectored I/O). Submitting moves it in; the completion gives it back.
#[derive(Debug, Default)]
pub enum Data {
    /// The command moves no data (flush, write zeroes, file trim).
    #[default]
    None,
    /// One buffer.
    One(Buffer),
    /// Several buffers, used in order as one scatter/gather list.
    Vec(Vec<Buffer>),
}

impl Data {
    /// The buffers as a slice.
    pub fn bufs(&self) -> &[Buffer] {
        match self {
            Data::None => &[],
            Data::One(b) => std::slice::from_ref(b),
            Data::Vec(v) => v,
        }
    }
    /// The buffers as a mutable slice.
    pub fn bufs_mut(&mut self) -> &mut [Buffer] {
        match self {
            Data::None => &mut [],
            Data::One(b) => std::slice::from_mut(b),
            Data::Vec(v) => v,
        }
    }
    /// Total bytes over all buffers.
    pub fn total_len(&self) -> u64 {
        self.bufs().iter().map(|b| b.len() as u64).sum()
    }
    /// The single buffer, when there is exactly one.
    pub fn into_one(self) -> Option<Buffer> {
        match self {
            Data::One(b) => Some(b),
            Data::Vec(mut v) if v.len() == 1 => v.pop(),
            _ => None,
        }
    }
}

/// A [`Data`] held as its four words, for a queue that keeps it while its command is out.
///
/// Moving a `Data` into memory as a `Data`, the compiler copies it through the stack with
/// 16-byte loads, which right after the 8-byte stores that put it there stall
/// store-to-load forwarding; as four words it is stored straight from the registers the
/// submission path already holds it in. (nil's ring: 34 of 41 alternating pinned runs
/// faster, median 0.95 of the cycle time; docs/BENCHMARKS.md.)
pub(crate) struct DataWords([MaybeUninit<u64>; 4]);

const _: () = assert!(std::mem::size_of::<Data>() == std::mem::size_of::<DataWords>());

impl DataWords {
    /// Takes the data in.
    #[inline(always)]
    pub(crate) fn new(data: Data) -> DataWords {
        // SAFETY: Data and the array have the same size (checked above); words that
        // Data leaves uninitialised (Data::None's) stay MaybeUninit. The value moves
        // into the array and is owned by it until into_data.
        let w = unsafe { std::mem::transmute::<Data, [MaybeUninit<u64>; 4]>(data) };
        DataWords([w[0], w[1], w[2], w[3]])
    }

    /// Gives the data back.
    #[inline(always)]
    pub(crate) fn into_data(self) -> Data {
        // SAFETY: the words are a Data's, moved in by new and moved out once here (self
        // is consumed).
        unsafe { std::mem::transmute::<[MaybeUninit<u64>; 4], Data>(self.0) }
    }
}

impl From<Buffer> for Data {
    fn from(b: Buffer) -> Data {
        Data::One(b)
    }
}

impl From<Vec<Buffer>> for Data {
    fn from(v: Vec<Buffer>) -> Data {
        Data::Vec(v)
    }
}

/// A first-in first-out ring of at most a power-of-two number of values, without bounds
/// checks on the hot path: positions wrap through a mask, so they are always in bounds,
/// and `len` says which entries hold a value. nil's completion ring.
pub(crate) struct Fifo<T> {
    /// `len` initialised entries from `head` (wrapping).
    slots: Box<[MaybeUninit<T>]>,
    mask: usize,
    head: usize,
    len: usize,
}

impl<T> Fifo<T> {
    /// An empty ring for at least `min` values (`min` rounded up to a power of two, at
    /// least 1).
    pub(crate) fn new(min: usize) -> Fifo<T> {
        let size = min.next_power_of_two();
        Fifo { slots: (0..size).map(|_| MaybeUninit::uninit()).collect(), mask: size - 1, head: 0, len: 0 }
    }

    /// How many values it holds.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// How many values it can hold.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Whether it holds as many values as it can.
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Appends `v`, or gives it back when the ring is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, v: T) -> Result<(), T> {
        if self.len == self.slots.len() {
            return Err(v);
        }
        let i = (self.head + self.len) & self.mask;
        // SAFETY: i is masked into the ring (its length is mask + 1), and the entry is
        // free: the ring is not full, and entries from head + len on hold nothing.
        unsafe { self.slots.get_unchecked_mut(i) }.write(v);
        self.len += 1;
        Ok(())
    }

    /// Takes the value at the front, the oldest, if any.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        // SAFETY: head is masked into the ring and, with len > 0, holds an initialised
        // value; head and len move on past it, so the entry is read exactly once.
        let v = unsafe { self.slots.get_unchecked(self.head).assume_init_read() };
        self.head = (self.head + 1) & self.mask;
        self.len -= 1;
        Some(v)
    }

    /// Takes up to `max` values from the front, oldest first, into `f`; returns how many.
    /// Each value leaves the ring before `f` sees it, so a panicking `f` loses none twice.
    #[inline(always)]
    pub(crate) fn drain_front(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        let n = self.len.min(max);
        let mut left = n;
        while left > 0 {
            left -= 1;
            // SAFETY: head is masked into the ring and, with len > 0, holds an initialised
            // value; head and len move on before f runs, so the entry is read exactly once.
            let v = unsafe { self.slots.get_unchecked(self.head).assume_init_read() };
            self.head = (self.head + 1) & self.mask;
            self.len -= 1;
            f(v);
        }
        n
    }
}

impl<T> Drop for Fifo<T> {
    fn drop(&mut self) {
        self.drain_front(usize::MAX, drop);
    }
}

/// Fills `out` with iovecs covering the first `len` bytes of `bufs`; returns how many.
/// Each iovec lies within one buffer of `bufs` (the raw AIO calls rely on it).
pub(crate) fn fill_iovecs(bufs: &[Buffer], len: u64, out: &mut [libc::iovec]) -> usize {
    let mut left = len as usize;
    let mut n = 0;
    for b in bufs {
        if left == 0 || n == out.len() {
            break;
        }
        let take = left.min(b.len());
        out[n] = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: take };
        left -= take;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fifo_gives_values_back_in_order_and_refuses_when_full() {
        let mut f = super::Fifo::new(3);
        for i in 0..4 {
            f.push(i).unwrap();
        }
        assert_eq!(f.push(9), Err(9));
        let mut got = vec![];
        assert_eq!(f.drain_front(3, |v| got.push(v)), 3);
        f.push(4).unwrap();
        f.push(5).unwrap();
        assert_eq!(f.drain_front(usize::MAX, |v| got.push(v)), 3);
        assert_eq!((got, f.len()), (vec![0, 1, 2, 3, 4, 5], 0));
        let rc = std::rc::Rc::new(1);
        let mut d = super::Fifo::new(2);
        d.push(std::rc::Rc::clone(&rc)).unwrap();
        drop(d);
        assert_eq!(std::rc::Rc::strong_count(&rc), 1, "a dropped ring drops what it holds");
    }

    #[test]
    fn a_fifo_drained_by_a_panicking_callback_keeps_the_rest_once() {
        // Values are Rc clones: each one dropped twice, or never, shows in the count.
        let rc = std::rc::Rc::new(0);
        let mut f = super::Fifo::new(4);
        for _ in 0..4 {
            f.push(std::rc::Rc::clone(&rc)).unwrap();
        }
        let mut seen = 0;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.drain_front(usize::MAX, |v| {
                seen += 1;
                drop(v);
                if seen == 2 {
                    panic!("the callback fails on its second value");
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!((f.len(), std::rc::Rc::strong_count(&rc)), (2, 3), "two taken, two left in the ring");
        f.push(std::rc::Rc::clone(&rc)).unwrap();
        assert_eq!(f.drain_front(usize::MAX, drop), 3, "the ring goes on from where the panic left it");
        assert_eq!(std::rc::Rc::strong_count(&rc), 1);
    }

    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_unique() {
        let a = Buffer::alloc(8192, 4096).unwrap();
        let b = Buffer::alloc(8192, 4096).unwrap();
        assert_eq!(a.as_ptr() as usize % 4096, 0);
        assert!(a.iter().all(|&x| x == 0));
        assert_ne!(a.id(), b.id());
        assert_eq!(a.len(), 8192);
        let small = Buffer::alloc(64, 8).unwrap();
        assert_eq!(small.len(), 64);
        assert_eq!(small.capacity() % 4096, 0, "allocations are whole pages");
    }

    #[test]
    fn a_misaligned_buffer_can_be_made_on_purpose() {
        let b = Buffer::with_alignment(512, 4096, 3).unwrap();
        assert_eq!(b.as_ptr() as usize % 4096, 3);
        assert_eq!(b.len(), 512);
        assert_eq!(b.capacity(), 4093);
        let far = Buffer::with_alignment(512, 512, 512 * 3 + 7).unwrap();
        assert_eq!(far.as_ptr() as usize % 512, 7, "only the offset modulo the alignment matters");
        assert!(far.capacity() >= 512);
    }

    #[test]
    fn buffers_and_data_stay_small() {
        // They move through every submission and completion.
        assert_eq!(std::mem::size_of::<Buffer>(), 32);
        assert_eq!(std::mem::size_of::<Data>(), 32, "Data's variants share the Buffer's niche, no tag word");
        assert_eq!(std::mem::size_of::<crate::Completion>(), 56, "a completion fits a cache line");
    }

    #[test]
    fn capacity_is_what_was_allocated_from_the_start() {
        // (len, align, offset) -> bytes from the start to the end of the allocation,
        // worked out by hand: whole multiples of max(align, 4096) from the aligned base.
        for (len, align, offset, capacity) in [
            (0, 512, 0, 4096),
            (1, 1, 0, 4096),
            (4096, 4096, 0, 4096),
            (4097, 4096, 0, 8192),
            (512, 4096, 3, 4093),
            (10_000, 8192, 5, 16_379),
            (65_536, 1 << 16, 0, 65_536),
            (100, 1 << 21, 4095, (1 << 21) - 4095),
        ] {
            let b = Buffer::with_alignment(len, align, offset).unwrap();
            assert_eq!(b.capacity(), capacity, "len {len}, align {align}, offset {offset}");
            assert_eq!(b.as_ptr() as usize % align, offset % align);
            assert_eq!((b.len(), b.align()), (len, align));
        } // each drop frees with the size recomputed from len, offset and alignment
    }

    #[test]
    fn a_borrowed_buffer_covers_the_callers_memory_and_frees_nothing() {
        let mut mem = vec![7u8; 4096 + 512];
        let off = mem.as_ptr().align_offset(512);
        let p = NonNull::new(mem[off..].as_mut_ptr()).unwrap();
        {
            // SAFETY: mem outlives the borrow and nothing else touches it meanwhile.
            let mut b = unsafe { Buffer::borrow_raw(p, 4096) };
            assert_eq!((b.as_ptr(), b.len(), b.capacity(), b.id()), (p.as_ptr() as *const u8, 4096, 4096, 0));
            b[0] = 1;
            b[4095] = 2;
        } // dropping the ManuallyDrop frees nothing: mem is still whole below
        assert_eq!((mem[off], mem[off + 4095], mem[off + 4096]), (1, 2, 7));
    }

    #[test]
    fn a_borrowed_buffer_taken_out_of_its_manually_drop_frees_nothing_when_dropped() {
        let mut mem = vec![7u8; 8192];
        let p = NonNull::new(mem[100..].as_mut_ptr()).unwrap();
        // SAFETY: mem outlives the borrow and nothing else touches it meanwhile.
        let b = ManuallyDrop::into_inner(unsafe { Buffer::borrow_raw(p, 4096) });
        // In a Data, as a queue holds it: dropping it must not hand mem[100..] to the
        // allocator (which would corrupt the heap, and the checks below or the vector's
        // own drop would fail under the test harness's allocator).
        drop(Data::One(b));
        mem[100] = 3;
        assert_eq!((mem[99], mem[100], mem[8191]), (7, 3, 7));
    }

    #[test]
    fn data_moved_through_its_words_comes_back_whole() {
        let one = Buffer::from_slice(b"one", 8).unwrap();
        let (p1, id1) = (one.as_ptr(), one.id());
        let two = vec![Buffer::from_slice(b"first", 512).unwrap(), Buffer::from_slice(b"second", 4096).unwrap()];
        for (data, want) in [
            (Data::None, vec![]),
            (Data::One(one), vec![b"one".to_vec()]),
            (Data::Vec(two), vec![b"first".to_vec(), b"second".to_vec()]),
        ] {
            let back = DataWords::new(data).into_data();
            let got: Vec<Vec<u8>> = back.bufs().iter().map(|b| b.to_vec()).collect();
            assert_eq!(got, want);
            if let Data::One(b) = &back {
                assert_eq!((b.as_ptr(), b.id()), (p1, id1), "the same buffer, not a copy");
            }
        } // each comes back owned and is dropped (freed) once here
    }

    #[test]
    fn bad_alignment_is_an_error() {
        assert!(Buffer::alloc(10, 3).unwrap_err().contains("power of two"));
    }

    #[test]
    fn data_reports_its_total_length() {
        let d: Data = vec![Buffer::alloc(512, 512).unwrap(), Buffer::alloc(1024, 512).unwrap()].into();
        assert_eq!(d.total_len(), 1536);
        assert_eq!(Data::None.total_len(), 0);
        assert!(Data::from(Buffer::alloc(1, 1).unwrap()).into_one().is_some());
    }
}
