//! Zone management on zoned block devices through the block layer's zone ioctls, so
//! the ZNS commands work on `sync=block` (and `psync`) exactly as on NVMe passthrough.
//!
//! | NVMe command | block layer |
//! |---|---|
//! | Zone Management Receive, Report Zones (ZRA 0), any state filter, partial or not | `BLKREPORTZONE`, in chunks |
//! | Zone Management Send: close / finish / open / reset one zone | `BLKCLOSEZONE` / `BLKFINISHZONE` / `BLKOPENZONE` / `BLKRESETZONE` over that zone |
//! | the same with Select All | reset: one `BLKRESETZONE` over the whole device; open / close / finish: one ioctl per zone in a state the action applies to (closed; open; open or closed), found by a report |
//! | offline, set zone descriptor extension, extended report, zone append | refused: Invalid Field in Command (append: Invalid Command Opcode) |
//!
//! The report is written in the NVMe Zone Management Receive layout, so one parser
//! serves both paths: a 64-byte header (bytes 0-7: number of zones) and 64-byte zone
//! descriptors (byte 0 zone type, byte 1 bits 7:4 zone state, byte 2 zone attributes,
//! bytes 8-15 zone capacity, 16-23 zone start LBA, 24-31 write pointer, all in LBAs).
//! Block-layer values map one to one: zone type (2 = sequential write required; the
//! block layer's 1 = conventional and 3 = sequential write preferred are passed through
//! although ZNS defines no such types), zone condition = NVMe zone state (empty 1,
//! implicitly open 2, explicitly open 3, closed 4, read only 0xD, full 0xE, offline 0xF;
//! 0 for conventional zones), "reset recommended" = attribute bit 2 (RZR). The zone
//! capacity is the block layer's when it reports one (`BLK_ZONE_REP_CAPACITY`), else the
//! zone size. For full zones the block layer reports the write pointer at the zone end.
//!
//! Errors: the ioctls' errno values map to NVMe status as everywhere in ioswitch, except
//! the zone resource errors the block layer has its own codes for (EOVERFLOW: Too Many
//! Active Zones, ETOOMANYREFS: Too Many Open Zones).

use crate::buf::Buffer;
use crate::cmd::opc::{ZONE_APPEND, ZONE_MGMT_RECV, ZONE_MGMT_SEND};
use crate::cmd::Cmd;
use crate::spec::zns::ZoneAction;
use crate::spec::{errno_to_status, Status};
use crate::sys::blkzone::{self, report, BlkZone, Report};
use std::os::fd::RawFd;

/// Zone conditions of the block layer (= NVMe zone states).
const COND_EMPTY: u8 = 0x1;
const COND_IMP_OPEN: u8 = 0x2;
const COND_EXP_OPEN: u8 = 0x3;
const COND_CLOSED: u8 = 0x4;
const COND_READONLY: u8 = 0xD;
const COND_FULL: u8 = 0xE;
const COND_OFFLINE: u8 = 0xF;

/// The zone condition each Zone Receive Action Specific filter 1..=7 reports.
const REPORT_FILTER: [u8; 7] =
    [COND_EMPTY, COND_IMP_OPEN, COND_EXP_OPEN, COND_CLOSED, COND_FULL, COND_READONLY, COND_OFFLINE];

/// errno of a zone ioctl → NVMe status.
fn zone_status(e: i32) -> Status {
    match e {
        libc::EOVERFLOW => Status { errno_raw: e, ..Status::new(1, 0xBD, true) },
        libc::ETOOMANYREFS => Status { errno_raw: e, ..Status::new(1, 0xBE, true) },
        _ => errno_to_status(e),
    }
}

fn invalid_field() -> Status {
    errno_to_status(libc::EINVAL)
}

fn range_ioctl(fd: RawFd, action: ZoneAction, sector: u64, nr_sectors: u64) -> Result<(), Status> {
    blkzone::manage(fd, action, sector, nr_sectors).map_err(zone_status)
}

/// Zone 0's length and capacity, in 512-byte sectors (capacity = length when the
/// kernel does not report capacities); `None` when the report fails.
pub(crate) fn zone0(fd: RawFd) -> Option<(u64, u64)> {
    let mut r = Report::new();
    let (n, cap) = report(fd, 0, &mut r).ok()?;
    let z = r.zones[..n].first()?;
    Some((z.len, if cap && z.capacity != 0 { z.capacity } else { z.len }))
}

/// A zoned block device as zone commands see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZonedBlock {
    pub fd: RawFd,
    pub nsid: u32,
    /// 512-byte sectors per LBA.
    pub spl: u64,
    /// Device size in LBAs.
    pub nlbas: u64,
}

impl ZonedBlock {
    /// Runs a ZNS command; everything else is Invalid Command Opcode.
    pub(crate) fn exec(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let s = &cmd.sqe;
        let known = matches!(s.opcode, ZONE_MGMT_SEND | ZONE_MGMT_RECV | ZONE_APPEND);
        if !known {
            return Err(errno_to_status(libc::EOPNOTSUPP));
        }
        if s.nsid != self.nsid {
            return Err(Status::new(0, 0x0B, true));
        }
        match s.opcode {
            ZONE_MGMT_RECV => self.receive(cmd, bufs),
            ZONE_MGMT_SEND => self.send(cmd).map(|_| 0),
            // No zone append through the block layer's user interface.
            _ => Err(errno_to_status(libc::EOPNOTSUPP)),
        }
    }

    /// Calls `f` with each zone from `sector` to the end of the device, in order, and with
    /// whether the report gave zone capacities, until `f` says to stop (false).
    fn each_zone(
        &self,
        mut sector: u64,
        mut f: impl FnMut(&BlkZone, bool) -> Result<bool, Status>,
    ) -> Result<(), Status> {
        let end = self.nlbas * self.spl;
        let mut r = Report::new();
        while sector < end {
            let (n, cap) = report(self.fd, sector, &mut r).map_err(zone_status)?;
            if n == 0 {
                break;
            }
            for z in &r.zones[..n] {
                if !f(z, cap)? {
                    return Ok(());
                }
            }
            let last = r.zones[n - 1];
            sector = last.start + last.len.max(1);
        }
        Ok(())
    }

    fn send(&self, cmd: &Cmd) -> Result<(), Status> {
        let all = cmd.sqe.cdw13 & (1 << 8) != 0;
        // Offline Zone has no block-layer ioctl.
        let req = ZoneAction::from_bits(cmd.sqe.cdw13 as u8)
            .filter(|&a| a != ZoneAction::Offline)
            .ok_or_else(invalid_field)?;
        if all {
            if req == ZoneAction::Reset {
                return range_ioctl(self.fd, req, 0, self.nlbas * self.spl);
            }
            let applies = |cond: u8| match req {
                ZoneAction::Close => matches!(cond, COND_IMP_OPEN | COND_EXP_OPEN),
                ZoneAction::Open => cond == COND_CLOSED,
                _ => matches!(cond, COND_IMP_OPEN | COND_EXP_OPEN | COND_CLOSED),
            };
            return self.each_zone(0, |z, _| {
                if applies(z.cond) {
                    range_ioctl(self.fd, req, z.start, z.len)?;
                }
                Ok(true)
            });
        }
        let slba = cmd.sqe.slba();
        if slba >= self.nlbas {
            return Err(Status::new(0, 0x80, true));
        }
        let sector = slba * self.spl;
        let mut r = Report::new();
        let (n, _) = report(self.fd, sector, &mut r).map_err(zone_status)?;
        let z = r.zones[..n].first().copied().ok_or_else(invalid_field)?;
        if z.start != sector {
            // SLBA must be the lowest LBA of a zone.
            return Err(invalid_field());
        }
        range_ioctl(self.fd, req, z.start, z.len)
    }

    fn receive(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let s = &cmd.sqe;
        let bytes = ((s.cdw12 as u64) + 1) * 4;
        let (zra, zrasf, partial) = (s.cdw13 as u8, (s.cdw13 >> 8) as u8, s.cdw13 & (1 << 16) != 0);
        if zra != 0 || bytes < 64 {
            return Err(invalid_field());
        }
        let want: Option<u8> = match zrasf {
            0 => None,
            f => Some(*REPORT_FILTER.get(f as usize - 1).ok_or_else(invalid_field)?),
        };
        let Some(buf) = bufs.first_mut() else { return Err(invalid_field()) };
        if (buf.len() as u64) < bytes {
            return Err(invalid_field());
        }
        let slba = s.slba();
        if slba >= self.nlbas {
            return Err(Status::new(0, 0x80, true));
        }
        let out = &mut buf[..bytes as usize];
        out.fill(0);
        let room = (bytes as usize - 64) / 64;
        let (mut matched, mut written) = (0u64, 0usize);
        self.each_zone(slba * self.spl, |z, cap| {
            if want.is_some_and(|c| c != z.cond) {
                return Ok(true);
            }
            matched += 1;
            if written < room {
                self.descriptor(z, cap, &mut out[64 + 64 * written..128 + 64 * written]);
                written += 1;
            } else if partial {
                return Ok(false);
            }
            Ok(true)
        })?;
        let nr = if partial { written as u64 } else { matched };
        out[0..8].copy_from_slice(&nr.to_le_bytes());
        Ok(0)
    }

    /// One NVMe zone descriptor from a block-layer zone.
    fn descriptor(&self, z: &BlkZone, cap: bool, d: &mut [u8]) {
        let spl = self.spl.max(1);
        let capacity = if cap && z.capacity != 0 { z.capacity } else { z.len };
        d[0] = z.kind;
        d[1] = z.cond << 4;
        d[2] = if z.reset != 0 { 1 << 2 } else { 0 };
        d[8..16].copy_from_slice(&(capacity / spl).to_le_bytes());
        d[16..24].copy_from_slice(&(z.start / spl).to_le_bytes());
        d[24..32].copy_from_slice(&(z.wp / spl).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_follow_the_nvme_layout() {
        let zb = ZonedBlock { fd: -1, nsid: 1, spl: 8, nlbas: 1 << 20 };
        let z = BlkZone {
            start: 8192 * 8,
            len: 8192 * 8,
            wp: 8192 * 8 + 64,
            kind: 2,
            cond: COND_IMP_OPEN,
            reset: 1,
            capacity: 6144 * 8,
            ..BlkZone::default()
        };
        let mut d = [0u8; 64];
        zb.descriptor(&z, true, &mut d);
        assert_eq!((d[0], d[1], d[2]), (2, 0x20, 4));
        assert_eq!(u64::from_le_bytes(d[8..16].try_into().unwrap()), 6144);
        assert_eq!(u64::from_le_bytes(d[16..24].try_into().unwrap()), 8192);
        assert_eq!(u64::from_le_bytes(d[24..32].try_into().unwrap()), 8200);
        zb.descriptor(&z, false, &mut d);
        assert_eq!(u64::from_le_bytes(d[8..16].try_into().unwrap()), 8192);
    }

    #[test]
    fn other_opcodes_and_bad_fields_are_refused_without_touching_the_device() {
        let zb = ZonedBlock { fd: -1, nsid: 1, spl: 1, nlbas: 100 };
        let io = |opcode, nsid, cdw13| Cmd::io(crate::Sqe { opcode, nsid, cdw13, ..Default::default() });
        assert_eq!(zb.exec(&io(0x02, 1, 0), &mut []).unwrap_err().sc(), 0x01);
        assert_eq!(zb.exec(&io(ZONE_MGMT_SEND, 2, 4), &mut []).unwrap_err().sc(), 0x0B);
        assert_eq!(zb.exec(&io(ZONE_MGMT_SEND, 1, 5), &mut []).unwrap_err().sc(), 0x02);
        assert_eq!(zb.exec(&io(ZONE_MGMT_RECV, 1, 1), &mut []).unwrap_err().sc(), 0x02);
        assert_eq!(zb.exec(&io(ZONE_APPEND, 1, 0), &mut []).unwrap_err().sc(), 0x01);
        assert_eq!(zone_status(libc::EOVERFLOW).code(), 0x1BD);
        assert_eq!(zone_status(libc::ETOOMANYREFS).code(), 0x1BE);
    }
}
