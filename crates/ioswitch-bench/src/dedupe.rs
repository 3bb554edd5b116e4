//! What write buffers hold under fio's `buffer_compress_percentage`,
//! `buffer_compress_chunk`, `dedupe_percentage`, `dedupe_mode`,
//! `dedupe_working_set_percentage` and `dedupe_global` (fio's `fill_io_buffer`,
//! `get_buf_state` and `dedupe.c`, followed here, not copied).
//!
//! Every write gets a *page*: the seed its contents are made from. A page is unique (the
//! next seed of the job's own sequence) or, with probability `dedupe_percentage` %, a
//! copy: in `repeat` mode of the last unique page, in `working_set` mode of a page drawn
//! uniformly from the working set, the job's first `size × dedupe_working_set_percentage
//! / 100 / bs` unique pages (fio's working set is those first states of the job's buffer
//! generator). With `dedupe_global`, as in fio's `init_dedupe_working_set_seeds`, the set
//! of the run's thread `t` (of `n`, every thread of the run counted) is made of the
//! threads' own first pages in turn: `P = max(pages / n, 1)` pages of thread `t`, then `P`
//! of thread `t + 1`, and so on around, each from its first page; so copies dedupe across
//! jobs, and against the first unique writes of each job. `dedupe_percentage=100` makes
//! every write the same page.
//!
//! The page fills the buffer chunk by chunk (`buffer_compress_chunk`, at most the write
//! size): each chunk's first `(100 - buffer_compress_percentage)` % is random from the
//! page's seed and the chunk's number, the rest zeroes (or `buffer_pattern`), so a
//! compressor shrinks the data by about that share.

use crate::engine::Rng;

/// `dedupe_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DedupeMode {
    /// `repeat` (fio's default): a copy of the last unique page.
    #[default]
    Repeat,
    /// `working_set`: a copy of a page drawn from the working set.
    WorkingSet,
}

/// The options of a job that shape its buffers' contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferShape {
    /// `buffer_compress_percentage`: the share of each chunk that is zeroes (0 to 100).
    pub compress_percentage: u32,
    /// `buffer_compress_chunk` (fio's default 512).
    pub compress_chunk: u64,
    /// `dedupe_percentage`: the share of writes that are copies (0 to 100).
    pub dedupe_percentage: u32,
    /// `dedupe_mode`.
    pub dedupe_mode: DedupeMode,
    /// `dedupe_working_set_percentage` (fio's default 5): the working set's share of the
    /// job's size.
    pub working_set_percentage: u32,
    /// `dedupe_global`: one working set for every job that has it.
    pub global: bool,
}

impl Default for BufferShape {
    fn default() -> Self {
        BufferShape {
            compress_percentage: 0,
            compress_chunk: 512,
            dedupe_percentage: 0,
            dedupe_mode: DedupeMode::Repeat,
            working_set_percentage: 5,
            global: false,
        }
    }
}

impl BufferShape {
    /// Whether the shape changes anything (fio: compression or dedupe asked for).
    pub fn active(&self) -> bool {
        self.compress_percentage > 0 || self.dedupe_percentage > 0
    }
}

/// The buffer seeds of the run's threads and which one is this job's
/// ([`crate::engine::BufferThreads`], resolved for one instance).
#[derive(Clone, Copy, Debug)]
pub struct Threads<'a> {
    /// Every thread's seed, in fio's thread order.
    pub seeds: &'a [u64],
    /// This thread's index in `seeds`.
    pub me: usize,
}

/// The unique pages of the thread whose buffer seed is `seed`, in order.
fn unique_pages(seed: u64) -> Rng {
    Rng::new(seed ^ 0xB0F0_D0DE)
}

/// A job's buffer contents generator.
pub struct Buffers {
    shape: BufferShape,
    pattern: Option<Vec<u8>>,
    unique: Rng,
    choice: Rng,
    last_unique: u64,
    working_set: Vec<u64>,
}

impl Buffers {
    /// The generator of thread `threads.me` (its seed `threads.seeds[threads.me]`), of
    /// `size` bytes written in blocks of `bs` (the working set's size comes from them).
    pub fn new(shape: &BufferShape, pattern: Option<&[u8]>, threads: Threads<'_>, size: u64, bs: u64) -> Buffers {
        let seed = threads.seeds[threads.me];
        let pages = (size.saturating_mul(u64::from(shape.working_set_percentage)) / 100 / bs.max(1)).max(1);
        let working_set = if shape.dedupe_mode == DedupeMode::WorkingSet && shape.dedupe_percentage > 0 {
            if shape.global {
                // fio's rotation: P pages of each thread in turn, from this one on.
                let n = threads.seeds.len();
                let per = (pages / n as u64).max(1);
                let mut set = Vec::with_capacity(pages as usize);
                let mut gen = unique_pages(seed);
                for i in 0..pages {
                    if i > 0 && i % per == 0 {
                        gen = unique_pages(threads.seeds[(threads.me + (i / per) as usize) % n]);
                    }
                    set.push(gen.next());
                }
                set
            } else {
                let mut gen = unique_pages(seed);
                (0..pages).map(|_| gen.next()).collect()
            }
        } else {
            Vec::new()
        };
        Buffers {
            shape: shape.clone(),
            pattern: pattern.map(<[u8]>::to_vec),
            unique: unique_pages(seed),
            choice: Rng::new(seed ^ 0xDEDE),
            // The job's first unique page is the one a first copy repeats (fio's
            // buf_state_prev starts as the generator's first state).
            last_unique: unique_pages(seed).next(),
            working_set,
        }
    }

    /// The page of the next write, and whether it is a copy.
    pub fn next_page(&mut self) -> (u64, bool) {
        let d = self.shape.dedupe_percentage;
        if d >= 100 {
            return (self.last_unique, true);
        }
        // fio draws 1..=100 and copies when the draw is at most the percentage.
        if d > 0 && self.choice.below(100) < u64::from(d) {
            return match self.shape.dedupe_mode {
                DedupeMode::Repeat => (self.last_unique, true),
                DedupeMode::WorkingSet => {
                    let i = self.choice.below(self.working_set.len() as u64) as usize;
                    (self.working_set[i], true)
                }
            };
        }
        let p = self.unique.next();
        self.last_unique = p;
        (p, false)
    }

    /// Fills `buf` for a write of at least `min_write` bytes with the next page.
    pub fn fill(&mut self, buf: &mut [u8], min_write: u64) {
        let (page, _) = self.next_page();
        fill_page(&self.shape, self.pattern.as_deref(), page, buf, min_write);
    }
}

/// `buf` made from `page`: chunk by chunk, the random share first, then zeroes (or the
/// pattern).
pub fn fill_page(shape: &BufferShape, pattern: Option<&[u8]>, page: u64, buf: &mut [u8], min_write: u64) {
    let chunk = match (shape.compress_chunk, min_write) {
        (0, 0) => buf.len(),
        (0, w) | (w, 0) => w as usize,
        (c, w) => c.min(w) as usize,
    }
    .max(1);
    for (k, piece) in buf.chunks_mut(chunk).enumerate() {
        let random = if shape.compress_percentage >= 100 {
            0
        } else {
            (piece.len() * (100 - shape.compress_percentage as usize) / 100).min(piece.len())
        };
        let mut rng = Rng::new(page ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for c in piece[..random].chunks_mut(8) {
            let r = rng.next().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
        match pattern.filter(|p| !p.is_empty()) {
            Some(p) => {
                for (b, x) in piece[random..].iter_mut().zip(p.iter().cycle()) {
                    *b = *x;
                }
            }
            None => piece[random..].fill(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn shape(dedupe: u32, mode: DedupeMode) -> BufferShape {
        BufferShape { dedupe_percentage: dedupe, dedupe_mode: mode, ..BufferShape::default() }
    }

    /// Of `n` writes of 4 KiB, how many are copies of an earlier block's contents.
    fn copies(b: &mut Buffers, n: usize) -> (usize, HashMap<Vec<u8>, usize>) {
        let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut dup = 0;
        for _ in 0..n {
            let mut buf = vec![0u8; 4096];
            b.fill(&mut buf, 4096);
            let c = seen.entry(buf).or_default();
            dup += usize::from(*c > 0);
            *c += 1;
        }
        (dup, seen)
    }

    #[test]
    fn the_share_of_copies_is_dedupe_percentage() {
        for mode in [DedupeMode::Repeat, DedupeMode::WorkingSet] {
            for pct in [0u32, 25, 50, 90] {
                let mut b = Buffers::new(&shape(pct, mode), None, alone(&7), 4096 * 4000, 4096);
                let (dup, _) = copies(&mut b, 4000);
                let share = dup as f64 / 4000.0 * 100.0;
                // 4000 draws: the binomial's spread is under 1 point; 3 points of room
                // (and in working_set mode a first copy of a page of the set can be
                // unique contents: the set's pages are the job's first unique pages).
                assert!((share - pct as f64).abs() < 3.0, "{mode:?} {pct}%: {share:.1}% copies");
            }
        }
        let mut b = Buffers::new(&shape(100, DedupeMode::Repeat), None, alone(&7), 1 << 20, 4096);
        assert_eq!(copies(&mut b, 100).1.len(), 1, "100%: one page");
    }

    /// A thread alone in its run.
    fn alone(seed: &u64) -> Threads<'_> {
        Threads { seeds: std::slice::from_ref(seed), me: 0 }
    }

    #[test]
    fn working_set_copies_come_from_the_set_and_global_sets_are_shared() {
        let s = BufferShape { working_set_percentage: 1, ..shape(50, DedupeMode::WorkingSet) };
        // 1% of 1000 blocks: a set of 10 pages; the job's first unique pages are them.
        let mut b = Buffers::new(&s, None, alone(&3), 4096 * 1000, 4096);
        assert_eq!(b.working_set.len(), 10);
        let (_, seen) = copies(&mut b, 1000);
        let repeated = seen.values().filter(|&&c| c > 1).count();
        assert!(repeated <= 10, "copies only of the set's 10 pages: {repeated} pages repeated");
        let firsts = |seed: u64, n: usize| -> Vec<u64> {
            let mut g =
                Buffers::new(&BufferShape { dedupe_percentage: 0, ..s.clone() }, None, alone(&seed), 1 << 20, 4096);
            (0..n).map(|_| g.next_page().0).collect()
        };
        assert_eq!(b.working_set, firsts(3, 10), "the set is the job's own first 10 pages");
        // Two threads: without dedupe_global each set is its own first pages.
        // The working set of thread `me` of threads `seeds`, with or without dedupe_global.
        let set_of = |global: bool, seeds: &[u64], me: usize| {
            Buffers::new(&BufferShape { global, ..s.clone() }, None, Threads { seeds, me }, 4096 * 1000, 4096)
                .working_set
        };
        let seeds = [1u64, 2];
        let set = |global: bool, me: usize| set_of(global, &seeds, me);
        assert_eq!((set(false, 0), set(false, 1)), (firsts(1, 10), firsts(2, 10)));
        // With it, fio's rotation: 10 / 2 = 5 pages of each thread, from its own on.
        let (a, b) = (firsts(1, 5), firsts(2, 5));
        assert_eq!(set(true, 0), [a.clone(), b.clone()].concat());
        assert_eq!(set(true, 1), [b, a].concat());
        // Three threads, 10 pages: 3 of each in turn, and the tenth from the first again.
        let set = set_of(true, &[1, 2, 3], 2);
        assert_eq!(set, [firsts(3, 3), firsts(1, 3), firsts(2, 3), firsts(3, 1)].concat());
        // More threads than pages: one page of each of the next threads.
        let many: Vec<u64> = (0..40).collect();
        let set = set_of(true, &many, 35);
        let want: Vec<u64> = (0..10).map(|k| firsts((35 + k) % 40, 1)[0]).collect();
        assert_eq!(set, want);
    }

    #[test]
    fn compression_zeroes_the_end_of_every_chunk() {
        let s = BufferShape { compress_percentage: 50, compress_chunk: 512, ..BufferShape::default() };
        let mut buf = vec![0xffu8; 4096];
        fill_page(&s, None, 99, &mut buf, 4096);
        for (k, chunk) in buf.chunks(512).enumerate() {
            assert!(chunk[256..].iter().all(|&b| b == 0), "chunk {k}: the second half is zeroes");
            assert!(chunk[..256].iter().filter(|&&b| b == 0).count() < 16, "chunk {k}: the first half is random");
        }
        assert_ne!(buf[..256], buf[512..768], "each chunk its own random data");
        // The chunk is at most the write size; with a pattern the zeroes are the pattern.
        let s = BufferShape { compress_percentage: 75, compress_chunk: 8192, ..BufferShape::default() };
        let mut buf = vec![0u8; 4096];
        fill_page(&s, Some(&[0xab]), 5, &mut buf, 2048);
        assert!(buf[512..2048].iter().all(|&b| b == 0xab) && buf[2048 + 512..].iter().all(|&b| b == 0xab));
        assert!(buf[2048..2048 + 512].iter().any(|&b| b != 0xab));
    }
}
