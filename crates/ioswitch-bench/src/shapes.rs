//! Workload shapes of fio job files: mixes of block sizes (`bssplit`, `bsrange`,
//! `blocksize_unaligned`), offsets (`random_distribution`, `rw=…:N` with
//! `rw_sequencer`, `offset_increment`) and `fdatasync=N`.
//!
//! Semantics follow fio 3.33 (HOWTO and `io_u.c`):
//! - `bssplit=4k/50:8k/50,16k/100`: per direction (read, write; one list is for both),
//!   block size / percent of the I/Os; entries without a percent share what the others
//!   leave. A share left over goes to the last entry.
//! - `bsrange=1k-16k[,2k-8k]`: fio's draw, `min + max·u` for a uniform u, rounded down
//!   to a multiple of `min` (unless `blocksize_unaligned`) and capped at `max`.
//! - Offsets are multiples of the direction's smallest block size; a length that does not
//!   fit before the region's end is drawn again (and is the smallest size at worst).
//! - `rw=write:4k` (sequential): after each I/O, skip 4k more. `rw=randread:8` (random):
//!   a new random offset every 8th I/O; between them, `rw_sequencer=sequential` (the
//!   default) goes on after the last I/O, `identical` repeats its offset.
//! - A pass over the region ends (fio's `get_next_offset` and `fill_io_u` find no I/O)
//!   when a sequential offset would start at or past the region's end, or a block that
//!   starts in it does not fit: a size drawn from a range or split must end in the region,
//!   one fixed size may end past it where the file has room. A pattern with holes ends
//!   its pass when its last I/O ended at the file's end, and goes back to the region's
//!   start when a hole reaches past the file's end (fio's `get_next_seq_offset`). With the
//!   random map, when every block was taken. Time-based jobs (and jobs with several
//!   files) go on from the region's start instead; a backward pattern (`read:-8k`) always
//!   wraps to the end.
//! - `offset_increment=N`: instance i (from 0) of a job with `numjobs` starts at
//!   `offset + i·N`.

use crate::dist::{Dist, DistGen};
use crate::engine::{RandMap, Rng};

/// Block sizes of one direction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BlockSizes {
    /// One size: the job's `bs`.
    #[default]
    Bs,
    /// `bsrange=min-max`.
    Range {
        /// Smallest.
        min: u64,
        /// Largest.
        max: u64,
    },
    /// `bssplit`: (block size, percent of I/Os), in the order given.
    Split(Vec<(u64, u32)>),
}

/// `rw_sequencer`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RwSequencer {
    /// Between random offsets, go on sequentially.
    #[default]
    Sequential,
    /// Between random offsets, repeat the last offset.
    Identical,
}

/// The shape options of a job (defaults: fio's).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shapes {
    /// Block sizes of reads and of writes.
    pub bs: [BlockSizes; 2],
    /// `blocksize_unaligned` / `bs_unaligned`: drawn sizes are not rounded to the smallest.
    pub bs_unaligned: bool,
    /// `random_distribution` of reads and of writes.
    pub dist: [Dist; 2],
    /// The number after `rw=…:` (bytes of hole for a sequential pattern, negative to go
    /// backwards; a count of I/Os for a random one); `None` without one.
    pub rw_modifier: Option<i64>,
    /// `blockalign` / `ba` per direction: random offsets are multiples of it (default:
    /// the direction's smallest block size).
    pub blockalign: [Option<u64>; 2],
    /// `rw_sequencer`.
    pub rw_sequencer: RwSequencer,
    /// `offset_increment`: bytes between the regions of a job's instances.
    pub offset_increment: u64,
    /// `fdatasync`: a data sync after every N writes; 0: never.
    pub fdatasync: u32,
    /// `filesize=LOW-HIGH`: the high end (the low end is `JobSpec::filesize`); the file
    /// gets a size drawn from `[LOW, HIGH)`, rounded down to the smallest block size, as
    /// fio's `get_rand_file_size`.
    pub filesize_high: Option<u64>,
    /// `zonemode=zbd`: I/O follows the zones of a zoned device (the rules of the `zbd` module).
    pub zbd: bool,
    /// `max_open_zones`: zones open at once over all the jobs writing a device (0: the
    /// device's limit).
    pub max_open_zones: u32,
    /// `job_max_open_zones`: zones one job may hold open (0: no limit of its own); the
    /// zones of a device are shared by the jobs that use it.
    pub job_max_open_zones: u32,
    /// `zone_reset_threshold` with `zonemode=zbd`: the share of the job's region written
    /// (the bytes below the write pointers) above which writes reset their zone every
    /// `1 / zone_reset_frequency` writes (fio's garbage-collection simulation).
    pub zone_reset_threshold: f64,
    /// `zone_reset_frequency`: 0 (fio's default) resets no zone that way.
    pub zone_reset_frequency: f64,
    /// `read_beyond_wp` with `zonemode=zbd`: reads go over each zone's capacity, written
    /// or not; off (fio's default): reads stay below each zone's write pointer.
    pub read_beyond_wp: bool,
    /// `zonesize` with `zonemode=zbd`: must be the device's zone size (fio's check).
    pub zone_size: Option<u64>,
    /// `verify_pattern`: the bytes written (and, with `verify=pattern`, checked) in
    /// every block's payload.
    pub verify_pattern: Option<Vec<u8>>,
    /// `buffer_pattern`: every write buffer holds these bytes repeated from its start
    /// (fio's `fill_buffer_pattern`); a job that also reads refills its write buffers
    /// with the pattern before every write (fio turns `refill_buffers` on).
    pub buffer_pattern: Option<Vec<u8>>,
    /// `buffer_compress_*` and `dedupe_*`: what write buffers hold ([`crate::dedupe`]).
    pub buffers: crate::dedupe::BufferShape,
    /// `verify_interval`: a verify header every this many bytes of a block (0, fio's
    /// default: one per block); settled as fio settles it by [`crate::verify::interval`].
    pub verify_interval: u64,
    /// `verify_backlog`: verify the written blocks every N writes; 0: at the end only.
    pub verify_backlog: u64,
    /// `verify_backlog_batch`: how many of those to verify (0: all of them).
    pub verify_backlog_batch: u64,
    /// `verify_async`: how many checker threads check the blocks read back (0: the job's
    /// own thread checks them).
    pub verify_async: u32,
    /// `zonemode=strided`: fio's strided zones (module `strided`), of `zone_size` bytes
    /// of I/O each.
    pub strided: bool,
    /// `zonerange` with `zonemode=strided`: the zone's bytes (default: `zonesize`).
    pub zone_range: Option<u64>,
    /// `zoneskip` with `zonemode=strided`: bytes skipped after each zone.
    pub zone_skip: u64,
}

impl Shapes {
    /// Smallest and largest block size of direction `d` (0 read, 1 write), given `bs`.
    pub fn bs_bounds(&self, d: usize, bs: u64) -> (u64, u64) {
        match &self.bs[d] {
            BlockSizes::Bs => (bs, bs),
            BlockSizes::Range { min, max } => (*min, *max),
            BlockSizes::Split(v) => {
                let sizes = v.iter().filter(|e| e.1 > 0).map(|e| e.0);
                (sizes.clone().min().unwrap_or(bs), sizes.max().unwrap_or(bs))
            }
        }
    }

    /// Whether direction `d` needs the shaped offset generator (anything but a fixed size
    /// on the uniform distribution without modifiers).
    pub fn shaped(&self, d: usize) -> bool {
        self.bs[d] != BlockSizes::Bs
            || !self.dist[d].is_uniform()
            || self.rw_modifier.is_some()
            || self.blockalign[d].is_some()
    }
}

/// The size of a job's file: `filesize`, or with a range a size drawn from it by
/// `seed`, rounded down to a multiple of `min_bs` (and at least `min_bs`).
pub fn file_size(low: Option<u64>, high: Option<u64>, min_bs: u64, seed: u64) -> Option<u64> {
    let low = low?;
    let Some(high) = high.filter(|&h| h > low) else { return Some(low) };
    let mut rng = Rng::new(seed ^ 0xF15E);
    let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    let size = low + ((high - low) as f64 * u) as u64;
    Some((size - size % min_bs.max(1)).max(min_bs))
}

/// Splits a per-direction value `R[,W]` (fio's `str_split_parse`: one value is for both;
/// a third, trim, value is accepted and unused). Empty sides keep `None`.
pub fn per_direction(s: &str) -> Result<[Option<&str>; 2], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [one] => Ok([Some(one), Some(one)]),
        [r, w] | [r, w, _] => Ok([Some(*r).filter(|s| !s.is_empty()), Some(*w).filter(|s| !s.is_empty())]),
        _ => Err("at most three comma-separated lists (read, write, trim)".into()),
    }
}

/// One direction of `bssplit`: `bs/perc:bs/perc…` with fio's rules.
pub fn parse_bssplit(s: &str, parse_size: impl Fn(&str) -> Option<u64>) -> Result<Vec<(u64, u32)>, String> {
    let mut v: Vec<(u64, Option<u32>)> = Vec::new();
    for item in s.split(':').map(str::trim) {
        if item.is_empty() {
            break;
        }
        let (b, p) = item.split_once('/').map_or((item, None), |(b, p)| (b, Some(p)));
        let bs = parse_size(b.trim()).filter(|&b| b > 0).ok_or_else(|| format!("a block size, not '{b}'"))?;
        let perc = match p.map(str::trim) {
            None | Some("") => None,
            Some(p) => Some(p.parse::<u32>().map_err(|_| format!("a percentage, not '{p}'"))?.min(100)),
        };
        // fio: a percentage of 0 is "not given" too.
        v.push((bs, perc.filter(|&p| p > 0)));
        if v.len() > 64 {
            return Err("at most 64 block sizes".into());
        }
    }
    if v.is_empty() {
        return Err("block size/percent pairs such as 4k/50:8k/50".into());
    }
    let given: u32 = v.iter().filter_map(|e| e.1).sum();
    let missing = v.iter().filter(|e| e.1.is_none()).count() as u32;
    if given > 100 {
        return Err(format!("percentages adding up to at most 100 (they add up to {given})"));
    }
    let share = (100 - given).checked_div(missing).unwrap_or(0);
    let share = if missing == 1 && v.len() == 1 { 100 } else { share };
    Ok(v.into_iter().map(|(b, p)| (b, p.unwrap_or(share))).collect())
}

/// One direction of `bsrange`: `min-max`.
pub fn parse_bsrange(s: &str, parse_size: impl Fn(&str) -> Option<u64>) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("MIN-MAX such as 1k-16k, not '{s}'"))?;
    let min = parse_size(a.trim()).filter(|&n| n > 0).ok_or_else(|| format!("a block size, not '{a}'"))?;
    let max = parse_size(b.trim()).filter(|&n| n > 0).ok_or_else(|| format!("a block size, not '{b}'"))?;
    Ok((min.min(max), min.max(max)))
}

/// Draws block lengths of one direction.
#[derive(Clone, Debug)]
pub(crate) struct LenGen {
    sizes: BlockSizes,
    min: u64,
    max: u64,
    unaligned: bool,
    rng: Rng,
}

impl LenGen {
    pub(crate) fn new(sizes: &BlockSizes, bs: u64, unaligned: bool, seed: u64) -> LenGen {
        let s = Shapes { bs: [sizes.clone(), BlockSizes::Bs], ..Shapes::default() };
        let (min, max) = s.bs_bounds(0, bs);
        LenGen { sizes: sizes.clone(), min, max, unaligned, rng: Rng::new(seed ^ 0xB5B5) }
    }

    fn draw(&mut self) -> u64 {
        let mut len = match &self.sizes {
            BlockSizes::Bs => return self.min,
            BlockSizes::Range { min, max } => {
                let u = (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                min.saturating_add((*max as f64 * u) as u64)
            }
            BlockSizes::Split(v) => {
                let r = self.rng.below(100) as u32;
                let mut cum = 0;
                let mut pick = self.min;
                for &(bs, perc) in v.iter().filter(|e| e.1 > 0) {
                    cum += perc;
                    pick = bs;
                    if r < cum {
                        break;
                    }
                }
                pick
            }
        };
        if !self.unaligned {
            len -= len % self.min;
        }
        len.clamp(self.min, self.max)
    }

    /// A length that fits in `room` bytes (the smallest when nothing drawn does).
    pub(crate) fn next(&mut self, room: u64) -> u64 {
        for _ in 0..32 {
            let l = self.draw();
            if l <= room {
                return l;
            }
        }
        self.min
    }
}

/// Offsets and lengths of one direction with a shape (see the module docs).
pub(crate) struct ShapedOffsets {
    region: u64,
    align: u64,
    blocks: u64,
    lens: LenGen,
    random: bool,
    dist: Option<DistGen>,
    map: Option<RandMap>,
    rng: Rng,
    /// Byte position after the last I/O, from the region's start.
    next_seq: u64,
    last_start: u64,
    started: bool,
    hole: i64,
    seq_nr: u64,
    seq_left: u64,
    sequencer: RwSequencer,
    /// Bytes from the region's start to the end of the file or device.
    room: u64,
    /// At the region's end, go on from its start (a time-based job; several files);
    /// else the pass is over ([`ShapedOffsets::next`] says `None`).
    wrap: bool,
}

impl ShapedOffsets {
    /// A generator over `region` bytes for direction `d` (`room`: bytes from its start to
    /// the end of the file or device; `wrap`: see the field); `map`: use the random map
    /// (uniform distribution without `norandommap`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shapes: &Shapes,
        d: usize,
        bs: u64,
        (region, room): (u64, u64),
        random: bool,
        map: bool,
        wrap: bool,
        seed: u64,
    ) -> Result<ShapedOffsets, String> {
        let lens = LenGen::new(&shapes.bs[d], bs, shapes.bs_unaligned, seed);
        let align = shapes.blockalign[d].unwrap_or(lens.min).max(1);
        // fio's last_block: a smallest size above the alignment shortens the span.
        let span = region.saturating_sub(lens.min.saturating_sub(align));
        let blocks = (span / align).max(1);
        let dist =
            (!shapes.dist[d].is_uniform()).then(|| DistGen::new(&shapes.dist[d], blocks, align, seed)).transpose()?;
        let (hole, seq_nr) = match (random, shapes.rw_modifier) {
            (false, Some(add)) => (add, 1),
            (true, Some(nr)) => (0, nr.max(1) as u64),
            (_, None) => (0, 1),
        };
        Ok(ShapedOffsets {
            region,
            align,
            blocks,
            lens,
            random,
            map: (random && map && shapes.dist[d].is_uniform()).then(|| RandMap::new(blocks, seed)),
            dist,
            rng: Rng::new(seed ^ 0x0FF5),
            next_seq: 0,
            last_start: 0,
            started: false,
            hole,
            seq_nr,
            seq_left: seq_nr,
            sequencer: shapes.rw_sequencer,
            room,
            wrap,
        })
    }

    /// A new pass over the region starts.
    pub(crate) fn restart(&mut self) {
        self.started = false;
        self.next_seq = 0;
        self.seq_left = self.seq_nr;
        if let Some(m) = &mut self.map {
            m.restart();
        }
    }

    fn random_block(&mut self) -> u64 {
        if let Some(d) = &mut self.dist {
            d.next()
        } else if let Some(m) = &mut self.map {
            m.next()
        } else {
            self.rng.below(self.blocks)
        }
    }

    /// The next (offset from the region's start, length); `None`: the pass is over (see
    /// the module docs), and the caller starts the next ([`ShapedOffsets::restart`]) or
    /// ends the job.
    pub(crate) fn next(&mut self) -> Option<(u64, u64)> {
        // fio's ddir_seq_nr: a new random offset on every seq_nr-th I/O.
        self.seq_left -= 1;
        let new_random = self.seq_left == 0;
        if new_random {
            self.seq_left = self.seq_nr;
        }
        let mut spill = false;
        let mut off = if self.random && new_random {
            if !self.wrap && self.map.as_ref().is_some_and(RandMap::pass_done) {
                return None;
            }
            self.random_block() * self.align
        } else if self.random && self.sequencer == RwSequencer::Identical && self.started {
            self.last_start
        } else {
            // Sequential: after the last I/O, plus the hole (not before the first); fio
            // wraps a backward pattern to the end, less the hole. Not wrapping (below): as
            // fio's get_next_seq_offset, a pass whose last I/O ended at the file's end is
            // over, and a hole that reaches past it goes back to the region's start.
            if !self.wrap && self.started && self.next_seq >= self.room {
                return None;
            }
            let pos = if self.started { self.next_seq as i64 + self.hole } else { 0 };
            let pos = if !self.wrap && self.hole > 0 && pos as u64 >= self.room { 0 } else { pos };
            let pos = if pos < 0 { (self.region as i64 + self.hole).max(0) as u64 } else { pos as u64 };
            if pos + self.lens.min <= self.region {
                pos
            } else if self.wrap {
                0
            } else if pos < self.region && self.lens.min == self.lens.max && pos + self.lens.min <= self.room {
                spill = true;
                pos
            } else {
                return None;
            }
        };
        if off + self.lens.min > self.region && !spill {
            off = self.region.saturating_sub(self.lens.min) / self.align * self.align;
        }
        let len = self.lens.next(self.region - off);
        self.started = true;
        self.last_start = off;
        self.next_seq = off + len;
        Some((off, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(s: &str) -> Option<u64> {
        let t = s.to_ascii_lowercase();
        match t.strip_suffix('k') {
            Some(n) => n.parse::<u64>().ok().map(|n| n << 10),
            None => t.parse().ok(),
        }
    }

    fn shares(g: &mut LenGen, draws: u32) -> std::collections::BTreeMap<u64, f64> {
        let mut m = std::collections::BTreeMap::new();
        for _ in 0..draws {
            *m.entry(g.next(u64::MAX)).or_insert(0.0) += 1.0 / draws as f64;
        }
        m
    }

    #[test]
    fn bssplit_parses_with_fios_rules() {
        assert_eq!(parse_bssplit("4k/50:8k/50", size), Ok(vec![(4096, 50), (8192, 50)]));
        // Entries without a percent share what is left.
        assert_eq!(parse_bssplit("4k/40:8k:16k", size), Ok(vec![(4096, 40), (8192, 30), (16384, 30)]));
        assert_eq!(parse_bssplit("64k", size), Ok(vec![(65536, 100)]));
        assert!(parse_bssplit("4k/60:8k/60", size).unwrap_err().contains("add up to 120"));
        assert!(parse_bssplit("4q/60", size).unwrap_err().contains("'4q'"));
        assert_eq!(per_direction("4k/50:8k/50,16k/100"), Ok([Some("4k/50:8k/50"), Some("16k/100")]));
        assert_eq!(per_direction("4k/100"), Ok([Some("4k/100"), Some("4k/100")]));
        assert_eq!(parse_bsrange("16k-4k", size), Ok((4096, 16384)));
        assert!(parse_bsrange("4k", size).unwrap_err().contains("MIN-MAX"));
    }

    #[test]
    fn a_filesize_range_draws_sizes_inside_it_on_the_block_size() {
        assert_eq!(file_size(Some(1 << 20), None, 4096, 1), Some(1 << 20));
        assert_eq!(file_size(None, None, 4096, 1), None);
        let sizes: std::collections::BTreeSet<u64> =
            (0..200).map(|seed| file_size(Some(1 << 20), Some(4 << 20), 4096, seed).unwrap()).collect();
        assert!(sizes.len() > 100, "{} sizes", sizes.len());
        assert!(sizes.iter().all(|&s| (1 << 20..4 << 20).contains(&s) && s % 4096 == 0));
    }

    #[test]
    fn bssplit_proportions_hold_over_many_draws() {
        let split = parse_bssplit("4k/10:8k/60:64k/30", size).unwrap();
        let mut g = LenGen::new(&BlockSizes::Split(split), 4096, false, 5);
        let s = shares(&mut g, 200_000);
        assert_eq!(s.len(), 3);
        for (bs, want) in [(4096, 0.10), (8192, 0.60), (65536, 0.30)] {
            assert!((s[&bs] - want).abs() < 0.01, "{bs}: {} want {want}", s[&bs]);
        }
    }

    #[test]
    fn bsrange_draws_fios_sizes_multiples_of_the_smallest() {
        // fio: min + max·u rounded down to min, capped at max: 4k..16k gives the four
        // multiples of 4k, a quarter each.
        let mut g = LenGen::new(&BlockSizes::Range { min: 4096, max: 16384 }, 4096, false, 9);
        let s = shares(&mut g, 100_000);
        assert_eq!(s.keys().copied().collect::<Vec<_>>(), vec![4096, 8192, 12288, 16384]);
        for v in s.values() {
            assert!((v - 0.25).abs() < 0.01, "{s:?}");
        }
        // Unaligned: any size from min to max.
        let mut g = LenGen::new(&BlockSizes::Range { min: 1000, max: 3000 }, 4096, true, 9);
        let s = shares(&mut g, 20_000);
        assert!(s.len() > 1000, "{} sizes", s.len());
        assert!(s.keys().all(|&b| (1000..=3000).contains(&b)));
    }

    #[test]
    fn lengths_fit_before_the_end() {
        let mut g = LenGen::new(&BlockSizes::Split(vec![(4096, 50), (65536, 50)]), 4096, false, 1);
        for _ in 0..1000 {
            assert_eq!(g.next(8192), 4096);
        }
    }

    /// A time-based job's generator (it wraps at the region's end) over 64 blocks.
    fn shaped(rw_mod: Option<i64>, seq: RwSequencer, random: bool) -> ShapedOffsets {
        let s = Shapes { rw_modifier: rw_mod, rw_sequencer: seq, ..Shapes::default() };
        ShapedOffsets::new(&s, 0, 4096, (64 * 4096, 64 * 4096), random, true, true, 3).unwrap()
    }

    /// A pass that is not time-based ends where fio's does, and starts over on restart.
    #[test]
    fn a_pass_ends_at_the_region_end_unless_it_wraps() {
        let pass = |rw_mod: Option<i64>, random: bool, bs: BlockSizes, (region, room): (u64, u64)| {
            let s = Shapes { rw_modifier: rw_mod, bs: [bs, BlockSizes::Bs], ..Shapes::default() };
            let mut o = ShapedOffsets::new(&s, 0, 4096, (region, room), random, true, false, 3).unwrap();
            let mut got = Vec::new();
            while let Some(io) = o.next() {
                got.push(io);
                assert!(got.len() < 10_000, "the pass never ends");
            }
            o.restart();
            let first = |io: Option<(u64, u64)>| io.map(|io| io.0);
            assert_eq!(first(o.next()), first(got.first().copied()), "restart: the first offset of a pass again");
            got
        };
        // read:8k over 1 MiB: a 12 KiB stride; the 86th I/O starts in the region (fio: 86).
        let offs: Vec<u64> =
            pass(Some(8192), false, BlockSizes::Bs, (1 << 20, 1 << 20)).iter().map(|io| io.0).collect();
        assert_eq!(offs, (0..86).map(|i| i * 12288).collect::<Vec<_>>());
        // Its last block ends past the region, which is the device's end: no room for it.
        let r = (1 << 20) - 1024;
        assert_eq!(pass(Some(8192), false, BlockSizes::Bs, (r, r)).len(), 85);
        assert_eq!(pass(Some(8192), false, BlockSizes::Bs, (r, 1 << 20)).len(), 86);
        // A size drawn from a range must end in the region.
        for (off, len) in pass(None, false, BlockSizes::Range { min: 2048, max: 8192 }, (r, 4 << 20)) {
            assert!(off + len <= r, "{off}+{len}");
        }
        // The random map: every block once, then the pass is over.
        let mut blocks: Vec<u64> =
            pass(None, true, BlockSizes::Bs, (64 * 4096, 64 * 4096)).iter().map(|io| io.0 / 4096).collect();
        blocks.sort_unstable();
        assert_eq!(blocks, (0..64).collect::<Vec<_>>());
        // randread:4: the sequential run after a random offset ends the pass at the
        // region's end (fio's get_next_seq_offset), if the map does not first.
        let ios = pass(Some(4), true, BlockSizes::Bs, (64 * 4096, 64 * 4096));
        assert!(ios.len() <= 4 * 64 && ios.iter().all(|io| io.0 + io.1 <= 64 * 4096), "{ios:?}");
    }

    #[test]
    fn a_hole_after_each_sequential_io_and_a_wrap_at_the_end() {
        let mut o = shaped(Some(4096), RwSequencer::Sequential, false);
        let offs: Vec<u64> = (0..34).map(|_| o.next().unwrap().0 / 4096).collect();
        let want: Vec<u64> = (0..32).map(|i| i * 2).chain([0, 2]).collect();
        assert_eq!(offs, want);
    }

    #[test]
    fn a_negative_hole_reads_backwards_from_the_end_as_fio() {
        // fio's backwards-read.fio: bs=4k, rw=read:-8k: 0, then the end less 8k, and on
        // down by 4k, wrapping again after 0.
        let mut o = shaped(Some(-8192), RwSequencer::Sequential, false);
        let offs: Vec<u64> = (0..66).map(|_| o.next().unwrap().0 / 4096).collect();
        let want: Vec<u64> = [0].into_iter().chain((0..63).map(|i| 62 - i)).chain([62, 61]).collect();
        assert_eq!(offs, want);
    }

    #[test]
    fn blockalign_aligns_random_offsets_of_smaller_blocks() {
        let s = Shapes {
            bs: [BlockSizes::Split(vec![(512, 50), (8192, 50)]), BlockSizes::Bs],
            blockalign: [Some(4096), None],
            ..Shapes::default()
        };
        let region = 64 * 4096;
        let mut o = ShapedOffsets::new(&s, 0, 4096, (region, region), true, false, true, 3).unwrap();
        let mut lens = std::collections::BTreeSet::new();
        for _ in 0..5000 {
            let (off, len) = o.next().unwrap();
            assert_eq!(off % 4096, 0, "offsets on the 4k alignment");
            assert!(off + len <= region);
            lens.insert(len);
        }
        assert_eq!(lens.into_iter().collect::<Vec<_>>(), vec![512, 8192]);
    }

    #[test]
    fn randread_n_takes_a_new_random_offset_every_nth_io() {
        let mut o = shaped(Some(4), RwSequencer::Sequential, true);
        let offs: Vec<u64> = (0..4000).map(|_| o.next().unwrap().0 / 4096).collect();
        // Within each group of 4 (the random one last, as fio counts), the next three go on.
        let mut jumps = 0;
        for (i, w) in offs.windows(2).enumerate() {
            if (i + 2) % 4 == 0 {
                jumps += (w[1] != (w[0] + 1) % 64) as u32;
            } else {
                assert_eq!(w[1], (w[0] + 1) % 64, "{i}: sequential between random offsets, wrapping at the end");
            }
        }
        assert!(jumps > 900, "only {jumps} random jumps in 1000 groups");
        let mut o = shaped(Some(4), RwSequencer::Identical, true);
        let offs: Vec<u64> = (0..400).map(|_| o.next().unwrap().0).collect();
        for (i, w) in offs.windows(2).enumerate() {
            if (i + 2) % 4 != 0 {
                assert_eq!(w[0], w[1], "{i}");
            }
        }
    }

    #[test]
    fn shaped_offsets_stay_inside_the_region_and_on_the_smallest_block() {
        let s = Shapes {
            bs: [BlockSizes::Split(vec![(4096, 50), (16384, 50)]), BlockSizes::Bs],
            dist: [Dist::Zipf { theta: 1.2, center: None }, Dist::Random],
            ..Shapes::default()
        };
        let region = 100 * 4096 + 100;
        let mut o = ShapedOffsets::new(&s, 0, 4096, (region, region), true, false, true, 3).unwrap();
        for _ in 0..10_000 {
            let (off, len) = o.next().unwrap();
            assert_eq!(off % 4096, 0);
            assert!(off + len <= region, "{off}+{len}");
        }
    }
}
