//! fio's strided zones (`zonemode=strided`, `zonesize`, `zonerange`, `zoneskip`; fio's
//! io_u.c `setup_strided_zone_mode`): the job does `zonesize` bytes of I/O in a zone of
//! `zonerange` bytes (default: `zonesize`) that starts at the job's offset, then moves on
//! by `zonerange` + `zoneskip` bytes, back to the job's offset once past the file's end.
//! Within a zone, sequential I/O goes on from where the direction's last I/O ended
//! (back to the zone's start past its range), random I/O draws blocks of the zone (with
//! the random map, each once until the map is reset at every `zonerange` bytes). An I/O
//! that would pass the file's end ends the job (fio's "failed getting offset"). The
//! skipped bytes do not count: the job still does `size` bytes of I/O. A time-based
//! job keeps fio's rewind of sequential I/O (get_next_seq_offset): once the last
//! position is at or past the region's end (offset + size), the I/O goes to the
//! zone's start, so such a zone past the region repeats its first block.

use crate::engine::{RandMap, Rng};

/// The zone state of one job instance's file.
pub(crate) struct Strided {
    size: u64,
    range: u64,
    skip: u64,
    /// Where the job's region starts (fio's start offset) and the file's size.
    start: u64,
    file_size: u64,
    /// The current zone's start (fio's `file_offset`) and the bytes done in it.
    zone: u64,
    zone_bytes: u64,
    /// Per direction: where the next sequential I/O goes (fio's `last_pos`).
    last_pos: [u64; 2],
    /// Random I/O: the block size, the map over the zone's blocks (None: no map) and
    /// the generator.
    random: bool,
    map: bool,
    maps: [Option<RandMap>; 2],
    rng: Rng,
    /// Time-based jobs: the region's end, where sequential I/O rewinds (see the module docs).
    pub(crate) rewind_at: Option<u64>,
}

impl Strided {
    /// The zones of a file of `file_size` bytes, for a job whose region starts at `start`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        size: u64,
        range: u64,
        skip: u64,
        start: u64,
        file_size: u64,
        random: bool,
        map: bool,
        seed: u64,
    ) -> Strided {
        Strided {
            size,
            range,
            skip,
            start,
            file_size,
            zone: start,
            zone_bytes: 0,
            last_pos: [start; 2],
            random,
            map,
            maps: [None, None],
            rng: Rng::new(seed),
            rewind_at: None,
        }
    }

    /// The offset of the next I/O of `len` bytes in direction `d`; `None`: it would pass
    /// the file's end (the job ends).
    pub(crate) fn next(&mut self, d: usize, len: u64) -> Option<u64> {
        if self.zone_bytes >= self.size {
            // The next zone, or back to the start past the file's end.
            self.zone_bytes = 0;
            self.zone += self.range + self.skip;
            if self.zone >= self.file_size {
                self.zone = self.start;
            }
            self.last_pos[d] = self.zone;
        }
        if self.last_pos[d] >= self.zone + self.range {
            // zonesize over zonerange: the same zone again.
            self.last_pos[d] = self.zone;
        }
        if self.zone_bytes % self.range == 0 {
            // fio's fio_file_reset: both directions to the zone's start, a new map.
            self.last_pos = [self.zone; 2];
            self.maps = [None, None];
        }
        let off = if self.random {
            let blocks = (self.range / len.max(1)).max(1);
            let block = if self.map {
                let seed = self.rng.next();
                let m = self.maps[d].get_or_insert_with(|| RandMap::new(blocks, seed));
                m.next()
            } else {
                self.rng.below(blocks)
            };
            self.zone + block * len
        } else {
            if self.rewind_at.is_some_and(|end| self.last_pos[d] >= end) {
                self.last_pos[d] = self.zone;
            }
            self.last_pos[d]
        };
        if off + len > self.file_size {
            return None;
        }
        self.last_pos[d] = off + len;
        self.zone_bytes += len;
        Some(off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(s: &mut Strided, n: usize) -> Vec<u64> {
        (0..n).map_while(|_| s.next(0, 4096)).map(|o| o / 4096).collect()
    }

    // The expected lists are fio 3.33's offsets (write_iolog) for a 1 MiB file, size=256k,
    // bs=4k, rw=read and the zone options named.
    #[test]
    fn sequential_offsets_are_fios() {
        let seq = |size, range, skip, start| Strided::new(size, range, skip, start, 1 << 20, false, true, 1);
        // zonesize=16k zoneskip=32k
        let want: Vec<u64> = (0..16).flat_map(|z| (0..4).map(move |b| z * 12 + b)).collect();
        assert_eq!(blocks(&mut seq(16 << 10, 16 << 10, 32 << 10, 0), 64), want);
        // zonesize=16k zonerange=64k
        let want: Vec<u64> = (0..16).flat_map(|z| (0..4).map(move |b| z * 16 + b)).collect();
        assert_eq!(blocks(&mut seq(16 << 10, 64 << 10, 0, 0), 64), want);
        // zonesize=32k zonerange=16k zoneskip=16k: each zone twice
        let want: Vec<u64> = (0..8).flat_map(|z| (0..8).map(move |b| z * 8 + b % 4)).collect();
        assert_eq!(blocks(&mut seq(32 << 10, 16 << 10, 16 << 10, 0), 64), want);
        // zonesize=16k zoneskip=300k: back to the start past the file's end
        let want: Vec<u64> = (0..16).flat_map(|z| (0..4).map(move |b| (z % 4) * 79 + b)).collect();
        assert_eq!(blocks(&mut seq(16 << 10, 16 << 10, 300 << 10, 0), 64), want);
        // zonesize=16k zoneskip=32k offset=8k
        let want: Vec<u64> = (0..16).flat_map(|z| (0..4).map(move |b| 2 + z * 12 + b)).collect();
        assert_eq!(blocks(&mut seq(16 << 10, 16 << 10, 32 << 10, 8 << 10), 64), want);
        // zonesize=128k zoneskip=200k (size=1m): the fourth zone passes the file's end,
        // which ends the job after its 10 blocks below the end (106 I/Os in fio).
        let got = blocks(&mut seq(128 << 10, 128 << 10, 200 << 10, 0), 256);
        assert_eq!(got.len(), 106);
        assert_eq!(&got[96..], &(246..256).collect::<Vec<_>>()[..]);
    }

    #[test]
    fn a_time_based_job_rewinds_past_the_regions_end_as_fio() {
        // fio 3.33, 1 MiB file, size=64k zonesize=16k zoneskip=32k time_based: zones
        // past 64 KiB read their first block four times; back to 0 past the file's end.
        let mut s = Strided::new(16 << 10, 16 << 10, 32 << 10, 0, 1 << 20, false, true, 1);
        s.rewind_at = Some(64 << 10);
        let mut want: Vec<u64> = vec![0, 1, 2, 3, 12, 13, 14, 15];
        want.extend((2..22).flat_map(|z| [z * 12; 4]));
        want.extend([0, 1, 2, 3, 12, 13, 14, 15, 24]);
        assert_eq!(blocks(&mut s, want.len()), want);
    }

    #[test]
    fn random_offsets_visit_each_block_of_each_zone_once_with_the_map() {
        let mut s = Strided::new(16 << 10, 16 << 10, 32 << 10, 0, 1 << 20, true, true, 7);
        let got = blocks(&mut s, 64);
        for (z, chunk) in got.chunks(4).enumerate() {
            let mut c = chunk.to_vec();
            c.sort_unstable();
            assert_eq!(c, (0..4).map(|b| z as u64 * 12 + b).collect::<Vec<_>>(), "zone {z}: {chunk:?}");
        }
        // Without the map blocks may repeat, but stay in the zone.
        let mut s = Strided::new(16 << 10, 16 << 10, 32 << 10, 0, 1 << 20, true, false, 7);
        for (z, chunk) in blocks(&mut s, 64).chunks(4).enumerate() {
            assert!(chunk.iter().all(|b| (z as u64 * 12..z as u64 * 12 + 4).contains(b)), "zone {z}: {chunk:?}");
        }
    }
}
