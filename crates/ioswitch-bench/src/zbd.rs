//! fio's `zonemode=zbd` on a zoned device, through the library's zone commands.
//!
//! The region (zone-aligned) is cut into the device's zones; only the first `capacity`
//! bytes of a zone are written or read (fio's rule), so a job moves at most
//! zones × capacity bytes per pass.
//! - Sequential writes go zone after zone from each zone's start; a zone is reset (Zone
//!   Management Send, Reset) before its first write, as fio resets a zone whose write
//!   pointer is not where the write goes (counted as fio's "zone resets").
//! - Random writes keep at most `max_open_zones` zones open (default: the device's
//!   limit, else 32), each picked at random and reset when opened; each write goes to the
//!   write pointer of a random open zone; a full zone is replaced by another.
//! - Reads (fio's `zbd_adjust_block` and `zbd_find_zone`): by default they stay in the
//!   written part of each zone, below its write pointer (taken from a zone report when
//!   the job starts, then moved by the job's own writes and resets). Sequential reads go
//!   from a zone's start to its write pointer, then on to the next zone holding at least a
//!   block; random reads draw a zone and an offset in its capacity, take the nearest zone
//!   holding a block when the drawn one holds none (above and below in turn), and fold the
//!   offset into the written part as fio does (`(offset % (written − len))`, block-aligned;
//!   the zone's start when it holds one block or less). When no zone (after the current
//!   one, for sequential reads) holds a block, the job ends there, without an error, as
//!   fio's does. With `read_beyond_wp=1`, reads go over each zone's capacity, written or
//!   not: sequential from each zone's start, or random within a random zone's capacity.
//!
//! Writes run one at a time (`iodepth=1`): several writes in flight to one zone would
//! need fio's per-zone locking, which is not run (refused at prepare).

use crate::engine::Rng;
use ioswitch::spec::zns::{ZoneAction, ZoneReport, ZoneState};
use ioswitch::{Cmd, Device};

/// Zones and write pointers of one job instance.
pub(crate) struct Zbd {
    zone: u64,
    cap: u64,
    zones: u64,
    /// Sequential position per direction: (zone, offset in it).
    seq: [(u64, u64); 2],
    /// Zones reset by the sequential writer (zone number of the last one).
    seq_reset: Option<u64>,
    /// Open zones of the random writer: (zone, write pointer in it).
    open: Vec<(u64, u64)>,
    max_open: usize,
    rng: Rng,
    /// Zone resets issued.
    pub(crate) resets: u64,
    /// Zones reset since the caller last looked: (byte offset from the region's start,
    /// bytes); what was written there is gone.
    pub(crate) reset_log: Vec<(u64, u64)>,
    /// Bytes written in each zone from its start (its write pointer), for reads;
    /// empty with `read_beyond_wp`.
    written: Vec<u64>,
}

impl Zbd {
    /// Zones of `region` bytes from `base` on `dev`; `Err` says why the job cannot run.
    pub(crate) fn new(
        dev: &Device,
        base: u64,
        region: u64,
        shapes: &crate::shapes::Shapes,
        seed: u64,
    ) -> Result<Zbd, String> {
        let max_open = shapes.max_open_zones;
        let g = dev.geometry();
        let Some(z) = g.zones.as_ref() else {
            return Err("zonemode=zbd needs a zoned device".into());
        };
        let lba = g.lba_size as u64;
        let (zone, cap) = (z.zone_size * lba, z.zone_capacity * lba);
        if let Some(want) = shapes.zone_size.filter(|&w| w != zone) {
            return Err(format!("zonesize={want} is not the device's zone size of {zone} bytes"));
        }
        if zone == 0 || base % zone != 0 {
            return Err(format!("zonemode=zbd: offset {base} is not on a zone boundary (zones of {zone} bytes)"));
        }
        let zones = region / zone;
        if zones == 0 {
            return Err(format!("zonemode=zbd: the region of {region} bytes holds no whole zone of {zone} bytes"));
        }
        let written = if shapes.read_beyond_wp { Vec::new() } else { write_pointers(dev, base, zones, cap)? };
        let dev_max = if z.max_open > 0 { z.max_open } else { 32 };
        let max_open = if max_open == 0 { dev_max } else { max_open.min(dev_max) };
        Ok(Zbd {
            zone,
            cap,
            zones,
            seq: [(0, 0); 2],
            seq_reset: None,
            open: Vec::new(),
            max_open: (max_open as u64).min(zones) as usize,
            rng: Rng::new(seed ^ 0x2B0),
            resets: 0,
            reset_log: Vec::new(),
            written,
        })
    }

    /// Bytes one pass can move: the zones' capacity.
    pub(crate) fn capacity(&self) -> u64 {
        self.zones * self.cap
    }

    fn reset(&mut self, dev: &Device, base: u64, zone: u64) -> Result<(), String> {
        let lba = dev.geometry().lba_size as u64;
        let slba = (base + zone * self.zone) / lba;
        dev.pass(&Cmd::zone_mgmt_send(dev.ident().nsid, slba, ZoneAction::Reset, false), &mut [])
            .map_err(|e| format!("zone reset at offset {}: {e}", base + zone * self.zone))?;
        self.resets += 1;
        self.reset_log.push((zone * self.zone, self.zone));
        self.wrote(zone, 0);
        Ok(())
    }

    /// Zone `zone` now holds `upto` bytes from its start.
    fn wrote(&mut self, zone: u64, upto: u64) {
        if let Some(w) = self.written.get_mut(zone as usize) {
            *w = upto;
        }
    }

    /// The next offset (from the device's start) of an I/O of `len` bytes in direction
    /// `d` (0 read, 1 write); `None`: no zone holds data left to read, the job ends.
    pub(crate) fn next(
        &mut self,
        dev: &Device,
        base: u64,
        d: usize,
        random: bool,
        len: u64,
    ) -> Result<Option<u64>, String> {
        if len > self.cap {
            return Err(format!(
                "zonemode=zbd: a block of {len} bytes exceeds the zone capacity of {} bytes",
                self.cap
            ));
        }
        match (d, random) {
            (_, false) => {
                let (mut zone, mut at) = self.seq[d];
                if at + len > self.cap {
                    (zone, at) = ((zone + 1) % self.zones, 0);
                }
                if d == 0 && !self.written.is_empty() {
                    // fio: past the write pointer, on to the next zone holding a block.
                    let (cur, at0) = self.seq[0];
                    let Some((zone, at)) = seq_read_at(&self.written, cur, at0, len) else { return Ok(None) };
                    self.seq[0] = (zone, at + len);
                    return Ok(Some(base + zone * self.zone + at));
                }
                if d == 1 && at == 0 && self.seq_reset != Some(zone) {
                    self.reset(dev, base, zone)?;
                    self.seq_reset = Some(zone);
                }
                self.seq[d] = (zone, at + len);
                if d == 1 {
                    self.wrote(zone, at + len);
                }
                Ok(Some(base + zone * self.zone + at))
            }
            (0, true) => {
                let zone = self.rng.below(self.zones);
                let at = self.rng.below(self.cap / len) * len;
                if self.written.is_empty() {
                    return Ok(Some(base + zone * self.zone + at));
                }
                Ok(random_read_at(&self.written, zone, at, len).map(|(z, a)| base + z * self.zone + a))
            }
            _ => {
                self.open.retain(|&(_, wp)| wp + len <= self.cap);
                while self.open.len() < self.max_open {
                    let zone = loop {
                        let z = self.rng.below(self.zones);
                        if !self.open.iter().any(|o| o.0 == z) {
                            break z;
                        }
                    };
                    self.reset(dev, base, zone)?;
                    self.open.push((zone, 0));
                }
                let i = self.rng.below(self.open.len() as u64) as usize;
                let (zone, wp) = self.open[i];
                self.open[i].1 = wp + len;
                self.wrote(zone, wp + len);
                Ok(Some(base + zone * self.zone + wp))
            }
        }
    }
}

/// Each zone's written bytes from its start, from a zone report of the region's `zones`
/// zones (of capacity `cap`) from `base`: a full zone holds its capacity, an
/// empty or offline one nothing, any other up to its write pointer.
fn write_pointers(dev: &Device, base: u64, zones: u64, cap: u64) -> Result<Vec<u64>, String> {
    let lba = dev.geometry().lba_size as u64;
    let bytes = 64 * (zones + 1);
    let fail = |e: &dyn std::fmt::Display| format!("zonemode=zbd: the zone report of '{}' for reads: {e}", dev.uri());
    let len = usize::try_from(bytes).map_err(|e| fail(&e))?;
    let mut buf = dev.alloc(len).map_err(|e| fail(&e))?;
    let cmd = Cmd::zone_mgmt_recv(dev.ident().nsid, base / lba, bytes as u32, true);
    dev.pass(&cmd, std::slice::from_mut(&mut buf)).map_err(|e| fail(&e))?;
    let report = ZoneReport::parse(&buf).map_err(|e| fail(&e))?;
    if (report.zones.len() as u64) < zones {
        return Err(fail(&format!("{} zones reported, the region has {zones}", report.zones.len())));
    }
    Ok(report
        .zones
        .iter()
        .take(zones as usize)
        .map(|z| match z.state {
            ZoneState::Full => cap,
            ZoneState::Empty | ZoneState::Offline => 0,
            _ => (z.wp.saturating_sub(z.zslba) * lba).min(cap),
        })
        .collect())
}

/// fio's sequential read of a zoned device below the write pointers: from `at` in zone
/// `zone`, or, when a block of `len` bytes does not fit below its write pointer, from the
/// start of the next zone holding one (forward only, as `zbd_find_zone` for sequential
/// I/O); `None` when there is none.
fn seq_read_at(written: &[u64], zone: u64, at: u64, len: u64) -> Option<(u64, u64)> {
    if written.get(zone as usize).is_some_and(|&w| at + len <= w) {
        return Some((zone, at));
    }
    (zone + 1..written.len() as u64).find(|&z| written[z as usize] >= len).map(|z| (z, 0))
}

/// fio's random read of a zoned device below the write pointers: the drawn `zone` and
/// offset `at` in it; a zone holding less than a block gives way to the nearest one that
/// holds one (above first, then below, as `zbd_find_zone`); the offset is folded into the
/// written part (`zbd_adjust_block`); `None` when no zone holds a block.
fn random_read_at(written: &[u64], zone: u64, at: u64, len: u64) -> Option<(u64, u64)> {
    let n = written.len() as u64;
    let holds = |z: u64| written[z as usize] >= len;
    let z = if holds(zone) {
        zone
    } else {
        (1..n).find_map(|i| {
            let up = zone + i;
            if up < n && holds(up) {
                return Some(up);
            }
            zone.checked_sub(i).filter(|&down| holds(down))
        })?
    };
    let range = written[z as usize];
    let off = if range <= len { 0 } else { (at % (range - len)) / len * len };
    Some((z, off))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 4096;

    #[test]
    fn sequential_reads_stop_at_each_write_pointer_and_skip_zones_without_a_block() {
        // Zones holding 2 blocks, nothing, half a block, 1 block.
        let w = [2 * K, 0, K / 2, K];
        assert_eq!(seq_read_at(&w, 0, 0, K), Some((0, 0)));
        assert_eq!(seq_read_at(&w, 0, K, K), Some((0, K)));
        // Past zone 0's write pointer: zones 1 and 2 hold no whole block, zone 3 does.
        assert_eq!(seq_read_at(&w, 0, 2 * K, K), Some((3, 0)));
        // After the last zone holding data, fio's sequential zbd_find_zone finds none.
        assert_eq!(seq_read_at(&w, 3, K, K), None);
        assert_eq!(seq_read_at(&[0, 0], 0, 0, K), None, "nothing written: nothing to read");
    }

    #[test]
    fn random_reads_fold_into_the_written_part_and_take_the_nearest_zone_with_a_block() {
        let w = [0, 0, 8 * K, 0, K];
        // Zone 2 holds 8 blocks: the offset folds into (at % (8K − K)), block-aligned.
        assert_eq!(random_read_at(&w, 2, 3 * K, K), Some((2, 3 * K)));
        assert_eq!(random_read_at(&w, 2, 7 * K, K), Some((2, 0)));
        assert_eq!(random_read_at(&w, 2, 10 * K + 5, K), Some((2, 3 * K)));
        // Zone 3 holds nothing: the nearest above (4) comes before the one below (2).
        assert_eq!(random_read_at(&w, 3, 5 * K, K), Some((4, 0)), "one block: the zone's start");
        // Zone 0: nothing above until 2 (nothing below).
        assert_eq!(random_read_at(&w, 0, 2 * K, K), Some((2, 2 * K)));
        assert_eq!(random_read_at(&[0, K - 1], 1, 0, K), None, "no zone holds a whole block");
        // Every read stays below the write pointer.
        for at in (0..64 * K).step_by(512) {
            let (z, off) = random_read_at(&w, 2, at, K).unwrap();
            assert!(off + K <= w[z as usize] && off % K == 0, "{at}: {off}");
        }
    }
}
