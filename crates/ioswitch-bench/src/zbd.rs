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
//! - Reads: sequential from each zone's start, or random within a random zone's capacity.
//!
//! Writes run one at a time (`iodepth=1`): several writes in flight to one zone would
//! need fio's per-zone locking, which is not run (refused at prepare).

use crate::engine::Rng;
use ioswitch::spec::zns::ZoneAction;
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
        Ok(())
    }

    /// The next offset (from the device's start) of an I/O of `len` bytes in direction
    /// `d` (0 read, 1 write).
    pub(crate) fn next(&mut self, dev: &Device, base: u64, d: usize, random: bool, len: u64) -> Result<u64, String> {
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
                if d == 1 && at == 0 && self.seq_reset != Some(zone) {
                    self.reset(dev, base, zone)?;
                    self.seq_reset = Some(zone);
                }
                self.seq[d] = (zone, at + len);
                Ok(base + zone * self.zone + at)
            }
            (0, true) => {
                let zone = self.rng.below(self.zones);
                let at = self.rng.below(self.cap / len) * len;
                Ok(base + zone * self.zone + at)
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
                Ok(base + zone * self.zone + wp)
            }
        }
    }
}
