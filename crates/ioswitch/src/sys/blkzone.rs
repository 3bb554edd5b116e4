//! The block layer's zone ioctls (include/uapi/linux/blkzoned.h): `BLKREPORTZONE` into a
//! [`Report`], and `BLKRESETZONE` / `BLKOPENZONE` / `BLKCLOSEZONE` / `BLKFINISHZONE` over a
//! sector range (a Zone Management Send [`ZoneAction`]). Errors are the raw errno, which
//! the zone code maps to NVMe status with its own exceptions.

use super::{ioc, IOC_READ_WRITE, IOC_WRITE};
use crate::spec::zns::ZoneAction;
use std::os::fd::RawFd;

/// `_IOWR(0x12, 130, struct blk_zone_report)`.
const BLKREPORTZONE: u64 = ioc(IOC_READ_WRITE, 0x12, 130, 16);
/// `_IOW(0x12, 131, struct blk_zone_range)`.
const BLKRESETZONE: u64 = ioc(IOC_WRITE, 0x12, 131, 16);
/// `_IOW(0x12, 134, struct blk_zone_range)`.
const BLKOPENZONE: u64 = ioc(IOC_WRITE, 0x12, 134, 16);
/// `_IOW(0x12, 135, struct blk_zone_range)`.
const BLKCLOSEZONE: u64 = ioc(IOC_WRITE, 0x12, 135, 16);
/// `_IOW(0x12, 136, struct blk_zone_range)`.
const BLKFINISHZONE: u64 = ioc(IOC_WRITE, 0x12, 136, 16);
const _: () = assert!(BLKREPORTZONE == 0xC010_1282 && BLKRESETZONE == 0x4010_1283);

/// `blk_zone_report.flags`: the zones' `capacity` field is valid.
const BLK_ZONE_REP_CAPACITY: u32 = 1;

/// The kernel's `struct blk_zone`, 64 bytes; sectors are 512 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BlkZone {
    /// First sector of the zone.
    pub start: u64,
    /// Zone length in sectors.
    pub len: u64,
    /// Write pointer, a sector.
    pub wp: u64,
    /// Zone type (1 conventional, 2 sequential write required, 3 preferred).
    pub kind: u8,
    /// Zone condition (= the NVMe zone state).
    pub cond: u8,
    /// Non-sequential write resources active.
    pub non_seq: u8,
    /// Reset recommended.
    pub reset: u8,
    /// Reserved.
    pub resv: [u8; 4],
    /// Zone capacity in sectors, valid when the report says so.
    pub capacity: u64,
    /// Reserved.
    pub reserved: [u8; 24],
}

/// Zones per [`report`] call.
pub(crate) const CHUNK: usize = 64;

/// `struct blk_zone_report` followed by room for [`CHUNK`] zones.
#[repr(C)]
pub(crate) struct Report {
    sector: u64,
    nr_zones: u32,
    flags: u32,
    /// The zones the last [`report`] filled in (its count says how many).
    pub zones: [BlkZone; CHUNK],
}

/// `struct blk_zone_range`.
#[repr(C)]
struct Range {
    sector: u64,
    nr_sectors: u64,
}

const _: () = assert!(std::mem::size_of::<BlkZone>() == 64);
const _: () = assert!(std::mem::offset_of!(BlkZone, capacity) == 32);
const _: () = assert!(std::mem::offset_of!(Report, zones) == 16);

impl Report {
    /// An empty report buffer (4 KiB, so boxed).
    pub(crate) fn new() -> Box<Report> {
        Box::new(Report { sector: 0, nr_zones: 0, flags: 0, zones: [BlkZone::default(); CHUNK] })
    }
}

/// BLKREPORTZONE: reads up to [`CHUNK`] zones starting with the one holding `sector`
/// into `r.zones`; returns how many, and whether they carry a capacity.
pub(crate) fn report(fd: RawFd, sector: u64, r: &mut Report) -> Result<(usize, bool), i32> {
    r.sector = sector;
    r.nr_zones = CHUNK as u32;
    r.flags = 0;
    // SAFETY: `r` is a blk_zone_report header followed by room for `nr_zones` zones, which
    // is all the kernel writes.
    if unsafe { libc::ioctl(fd, BLKREPORTZONE as _, r as *mut Report) } != 0 {
        return Err(super::errno());
    }
    Ok(((r.nr_zones as usize).min(CHUNK), r.flags & BLK_ZONE_REP_CAPACITY != 0))
}

/// Applies `action` to the zones in `sector .. sector + nr_sectors`; the block layer has
/// no ioctl for Offline Zone (EINVAL).
pub(crate) fn manage(fd: RawFd, action: ZoneAction, sector: u64, nr_sectors: u64) -> Result<(), i32> {
    let req = match action {
        ZoneAction::Reset => BLKRESETZONE,
        ZoneAction::Open => BLKOPENZONE,
        ZoneAction::Close => BLKCLOSEZONE,
        ZoneAction::Finish => BLKFINISHZONE,
        ZoneAction::Offline => return Err(libc::EINVAL),
    };
    let r = Range { sector, nr_sectors };
    // SAFETY: the zone management ioctls read one blk_zone_range through the pointer.
    if unsafe { libc::ioctl(fd, req as _, &r as *const Range) } != 0 {
        return Err(super::errno());
    }
    Ok(())
}
