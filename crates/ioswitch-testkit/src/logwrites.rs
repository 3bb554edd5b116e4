//! A reader and replayer of the log that device-mapper's `log-writes` target keeps
//! (`dmsetup create X --table "0 N log-writes DATA LOG"`), written from the format the
//! kernel documents in `drivers/md/dm-log-writes.c`:
//!
//! - byte 0 of the log device: the super block, little-endian `magic` (u64,
//!   0x6a736677736872), `version` (u64, 1), `nr_entries` (u64), `sectorsize` (u32: the
//!   data device's logical block size);
//! - from byte `sectorsize` on, `nr_entries` entries one after the other, each a header
//!   block of `sectorsize` bytes (`sector`, `nr_sectors`, `flags`, `data_len`, all u64, the
//!   sectors counted in `sectorsize` units; a mark's name follows the header in the same
//!   block) followed, unless the entry is a discard, by `nr_sectors` blocks of the data
//!   written;
//! - flags: 1 flush, 2 FUA, 4 discard, 8 mark, 16 metadata.
//!
//! The target logs a write once a flush that follows its completion arrives: everything
//! logged before a flush entry had completed before that flush was issued. So replaying
//! the log up to a flush entry gives what a device must hold after that flush.

use std::fmt;

/// The super block's magic number.
pub const MAGIC: u64 = 0x006a_7366_7773_6872;
/// Entry flag: a flush (`REQ_PREFLUSH`).
pub const FLUSH: u64 = 1;
/// Entry flag: a write with FUA.
pub const FUA: u64 = 2;
/// Entry flag: a discard (no data in the log).
pub const DISCARD: u64 = 4;
/// Entry flag: a mark (`dmsetup message X 0 mark NAME`).
pub const MARK: u64 = 8;

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First sector written, in `sectorsize` units.
    pub sector: u64,
    /// Sectors written (0 for a flush or a mark).
    pub nr_sectors: u64,
    /// `FLUSH`, `FUA`, `DISCARD`, `MARK`, … ORed.
    pub flags: u64,
    /// A mark's name; empty otherwise.
    pub mark: String,
    /// Byte offset of the entry's data in the log (meaningful when `nr_sectors > 0` and
    /// the entry is not a discard).
    pub data_at: usize,
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.flags & MARK != 0 {
            return write!(f, "mark {:?}", self.mark);
        }
        write!(f, "sectors {}+{} flags {:#x}", self.sector, self.nr_sectors, self.flags)
    }
}

/// A parsed log: its entries and the bytes they point into.
pub struct Log {
    /// The data device's logical block size.
    pub sectorsize: u64,
    /// The entries, in log order.
    pub entries: Vec<Entry>,
    bytes: Vec<u8>,
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Log").field("sectorsize", &self.sectorsize).field("entries", &self.entries.len()).finish()
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Log {
    /// Parses the contents of a log device. The error names what is wrong and where.
    pub fn parse(bytes: Vec<u8>) -> Result<Log, String> {
        if bytes.len() < 28 {
            return Err(format!("log: {} bytes, shorter than the 28-byte super block", bytes.len()));
        }
        let magic = le64(&bytes, 0);
        if magic != MAGIC {
            return Err(format!("log: magic {magic:#x}, not dm-log-writes' {MAGIC:#x}"));
        }
        let version = le64(&bytes, 8);
        if version != 1 {
            return Err(format!("log: version {version}, this reader knows 1"));
        }
        let nr = le64(&bytes, 16);
        let ss = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes")) as u64;
        if !(512..=65536).contains(&ss) || !ss.is_power_of_two() {
            return Err(format!("log: sector size {ss} is not a power of two in 512..=65536"));
        }
        let mut entries = Vec::new();
        let mut at = ss as usize;
        for i in 0..nr {
            if at + ss as usize > bytes.len() {
                return Err(format!("log: entry {i} of {nr} at byte {at} runs past the log's {} bytes", bytes.len()));
            }
            let (sector, nr_sectors, flags, data_len) =
                (le64(&bytes, at), le64(&bytes, at + 8), le64(&bytes, at + 16), le64(&bytes, at + 24));
            let mark = if flags & MARK != 0 {
                if data_len > ss - 32 {
                    return Err(format!("log: entry {i}: mark of {data_len} bytes does not fit its block"));
                }
                String::from_utf8_lossy(&bytes[at + 32..at + 32 + data_len as usize]).into_owned()
            } else {
                String::new()
            };
            let data_at = at + ss as usize;
            let data_bytes = if flags & DISCARD != 0 { 0 } else { nr_sectors.saturating_mul(ss) };
            let end = (data_at as u64).saturating_add(data_bytes);
            if end > bytes.len() as u64 {
                return Err(format!(
                    "log: entry {i} ({} sectors at {sector}) has data to byte {end}, past the log's {} bytes",
                    nr_sectors,
                    bytes.len()
                ));
            }
            entries.push(Entry { sector, nr_sectors, flags, mark, data_at });
            at = end as usize;
        }
        Ok(Log { sectorsize: ss, entries, bytes })
    }

    /// The index of the entry that is the mark `name`.
    pub fn mark(&self, name: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.flags & MARK != 0 && e.mark == name)
    }

    /// The index of the last flush entry before entry `before`.
    pub fn flush_before(&self, before: usize) -> Option<usize> {
        self.entries[..before].iter().rposition(|e| e.flags & FLUSH != 0)
    }

    /// Applies entries `0..=upto` to `image` (the data device's contents before the log
    /// began): writes copy their data, discards zero their range. Errors name the entry
    /// that reaches past the image.
    pub fn replay(&self, image: &mut [u8], upto: usize) -> Result<(), String> {
        let ss = self.sectorsize as usize;
        for (i, e) in self.entries[..=upto].iter().enumerate() {
            if e.nr_sectors == 0 || e.flags & MARK != 0 {
                continue;
            }
            let from = e.sector as usize * ss;
            let len = e.nr_sectors as usize * ss;
            if from + len > image.len() {
                return Err(format!("log: entry {i} ({e}) reaches past the {}-byte image", image.len()));
            }
            if e.flags & DISCARD != 0 {
                image[from..from + len].fill(0);
            } else {
                image[from..from + len].copy_from_slice(&self.bytes[e.data_at..e.data_at + len]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log as the kernel lays it out, built from (sector, nr_sectors, flags, mark, data).
    fn build(ss: usize, entries: &[(u64, u64, u64, &str, u8)]) -> Vec<u8> {
        let mut b = vec![0u8; ss];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&1u64.to_le_bytes());
        b[16..24].copy_from_slice(&(entries.len() as u64).to_le_bytes());
        b[24..28].copy_from_slice(&(ss as u32).to_le_bytes());
        for &(sector, n, flags, mark, fill) in entries {
            let mut h = vec![0u8; ss];
            h[0..8].copy_from_slice(&sector.to_le_bytes());
            h[8..16].copy_from_slice(&n.to_le_bytes());
            h[16..24].copy_from_slice(&flags.to_le_bytes());
            h[24..32].copy_from_slice(&(mark.len() as u64).to_le_bytes());
            h[32..32 + mark.len()].copy_from_slice(mark.as_bytes());
            b.extend_from_slice(&h);
            if flags & DISCARD == 0 {
                b.extend(std::iter::repeat_n(fill, n as usize * ss));
            }
        }
        b
    }

    #[test]
    fn replay_up_to_a_flush_applies_exactly_the_entries_before_it() {
        let ss = 512;
        let log = build(
            ss,
            &[
                (0, 2, 0, "", 0xAA),
                (4, 1, 0, "", 0xBB),
                (0, 0, FLUSH, "", 0),
                (0, 0, MARK, "one", 0),
                (1, 1, 0, "", 0xCC),
                (4, 1, DISCARD, "", 0),
                (0, 0, FLUSH, "", 0),
            ],
        );
        let log = Log::parse(log).unwrap();
        assert_eq!(log.entries.len(), 7);
        let m = log.mark("one").unwrap();
        assert_eq!(m, 3);
        let f = log.flush_before(m).unwrap();
        assert_eq!(f, 2);
        let mut img = vec![0x11u8; 8 * ss];
        log.replay(&mut img, f).unwrap();
        assert!(img[..2 * ss].iter().all(|&b| b == 0xAA));
        assert!(img[2 * ss..4 * ss].iter().all(|&b| b == 0x11));
        assert!(img[4 * ss..5 * ss].iter().all(|&b| b == 0xBB));
        let mut img = vec![0x11u8; 8 * ss];
        log.replay(&mut img, 6).unwrap();
        assert!(img[ss..2 * ss].iter().all(|&b| b == 0xCC));
        assert!(img[4 * ss..5 * ss].iter().all(|&b| b == 0), "a discard zeroes its range");
        assert_eq!(log.mark("two"), None);
    }

    #[test]
    fn bad_logs_are_refused_saying_what_is_wrong() {
        assert!(Log::parse(vec![0; 10]).unwrap_err().contains("shorter"));
        assert!(Log::parse(vec![0; 4096]).unwrap_err().contains("magic"));
        let mut b = build(512, &[(0, 4, 0, "", 1)]);
        b.truncate(b.len() - 1);
        let e = Log::parse(b).unwrap_err();
        assert!(e.contains("entry 0") && e.contains("past the log"), "{e}");
        let b = build(512, &[(100, 1, 0, "", 1)]);
        let e = Log::parse(b).unwrap().replay(&mut [0u8; 4096], 0).unwrap_err();
        assert!(e.contains("past the 4096-byte image"), "{e}");
    }
}
