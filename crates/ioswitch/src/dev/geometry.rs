//! Geometry: what a file, a block device (its queue limits and zones, from sysfs) and an
//! NVMe namespace (from identify) look like to the library.

use super::{DevKind, Geometry, Ident, Zoned, ZonedModel};
use crate::be;
use crate::error::{Error, Result};
use crate::opts::{Opts, SyncIface};
use crate::sys::sysfs;
use std::path::Path;

/// A regular file of `bytes`: 512-byte LBAs emulated, or the direct-I/O offset alignment
/// with `direct`; `dio` is `statx`'s (memory, offset) alignment where known.
pub(super) fn file(bytes: u64, dio: Option<(u32, u32)>, direct: bool) -> Geometry {
    let (mem, off) = dio.unwrap_or((4096, 4096));
    let lba_size = if direct { off.max(512) } else { 512 };
    block(lba_size, bytes, Some((mem, off)), ZonedModel::None, None)
}

/// A block device of `bytes` with `lba`-byte logical blocks.
pub(super) fn block(
    lba: u32,
    bytes: u64,
    dio: Option<(u32, u32)>,
    zoned: ZonedModel,
    zones: Option<Zoned>,
) -> Geometry {
    let (mem, off) = dio.unwrap_or((lba, lba));
    Geometry {
        lba_size: lba,
        nlbas: bytes / lba as u64,
        bytes,
        // The kernel splits larger requests at max_sectors_kb itself; the limit of one
        // command is what an NVM command can express.
        max_transfer: 65536 * lba as u64,
        dio_mem_align: mem,
        dio_offset_align: off,
        zoned,
        zones,
    }
}

/// The zoned model and zone layout of a disk, from its sysfs `queue/` attributes;
/// `zone0` asks the device for the (start, capacity) of zone 0 in 512-byte sectors (a
/// zone may be writable over less than its size).
pub(super) fn zones(
    disk: Option<&Path>,
    lba: u32,
    zone0: impl FnOnce() -> Option<(u64, u64)>,
) -> (ZonedModel, Option<Zoned>) {
    let q = |attr: &str| disk.and_then(|d| sysfs::read(&d.join("queue").join(attr)));
    let num = |attr: &str| q(attr).and_then(|s| s.parse::<u64>().ok());
    let zoned = ZonedModel::from_sysfs(q("zoned").as_deref());
    let zones = (zoned != ZonedModel::None).then(|| {
        let zone_size = num("chunk_sectors").unwrap_or(0) * 512 / lba as u64;
        let zone_capacity =
            zone0().map(|(_, cap)| cap * 512 / lba as u64).filter(|&c| c > 0 && c <= zone_size).unwrap_or(zone_size);
        Zoned {
            zone_size,
            zone_capacity,
            nr_zones: num("nr_zones").unwrap_or(0),
            max_open: num("max_open_zones").unwrap_or(0) as u32,
            max_active: num("max_active_zones").unwrap_or(0) as u32,
        }
    });
    (zoned, zones)
}

/// Geometry and identity of an NVMe namespace from identify (see `be::nvme::ns_info`).
pub(super) fn apply_ns_info(
    uri: &str,
    opts: &Opts,
    info: &be::nvme::NsInfo,
    geo: &mut Geometry,
    ident: &mut Ident,
) -> Result<()> {
    if let Some(n) = opts.nsid.filter(|&n| n != info.nsid) {
        return Err(Error::BadOpt {
            key: "nsid".into(),
            why: format!("{uri} is namespace {}, not {n}; open the namespace's own device", info.nsid),
        });
    }
    geo.lba_size = info.lba_size;
    geo.nlbas = info.nlbas;
    geo.bytes = info.nlbas * info.lba_size as u64;
    // Passthrough commands reach the device as they are: MDTS and the driver's limits
    // bound them. Through the block layer (a namespace block device without sync=nvme)
    // the kernel splits, and the limit stays what one NVM command can express.
    let passthrough = ident.kind != DevKind::NvmeBlock || opts.sync == Some(SyncIface::Nvme);
    geo.max_transfer = if passthrough { info.max_transfer } else { 65536 * info.lba_size as u64 };
    geo.dio_offset_align = geo.dio_offset_align.max(info.lba_size);
    geo.zoned = if info.zones.is_some() { ZonedModel::HostManaged } else { ZonedModel::None };
    geo.zones = info.zones;
    ident.nsid = info.nsid;
    ident.driver = Some("nvme".into());
    ident.model = Some(info.model.clone());
    ident.serial = Some(info.serial.clone());
    if ident.block_name.is_none() {
        ident.block_name =
            info.block_dir.as_ref().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_lbas_are_512_bytes_or_its_direct_io_alignment() {
        let g = file(3 << 20, Some((512, 4096)), false);
        assert_eq!((g.lba_size, g.nlbas, g.dio_mem_align, g.dio_offset_align), (512, 6144, 512, 4096));
        let g = file(3 << 20, Some((512, 4096)), true);
        assert_eq!((g.lba_size, g.nlbas, g.max_transfer), (4096, 768, 65536 * 4096));
        let g = file(1000, None, false);
        assert_eq!((g.nlbas, g.bytes, g.dio_offset_align), (1, 1000, 4096), "a tail beyond the last LBA stays bytes");
    }

    #[test]
    fn zones_come_from_the_queue_attributes_and_zone_0s_capacity() {
        let t = sysfs::Tree::new("zones");
        let d = "devices/virtual/block/nullb0";
        t.block(d, (252, 0))
            .file(&format!("{d}/queue/zoned"), "host-managed")
            .file(&format!("{d}/queue/chunk_sectors"), "8192")
            .file(&format!("{d}/queue/nr_zones"), "256")
            .file(&format!("{d}/queue/max_open_zones"), "14")
            .file(&format!("{d}/queue/max_active_zones"), "0");
        let disk = t.root.join(d);
        // 4 MiB zones of 512 B LBAs; zone 0 writable over 3 MiB.
        let (model, z) = zones(Some(&disk), 512, || Some((0, 6144)));
        assert_eq!(model, ZonedModel::HostManaged);
        let z = z.unwrap();
        assert_eq!((z.zone_size, z.zone_capacity, z.nr_zones, z.max_open, z.max_active), (8192, 6144, 256, 14, 0));
        // 4 KiB LBAs divide the sectors; a capacity the device does not report, or one
        // larger than the zone, is the zone size.
        let z = zones(Some(&disk), 4096, || None).1.unwrap();
        assert_eq!((z.zone_size, z.zone_capacity), (1024, 1024));
        assert_eq!(zones(Some(&disk), 512, || Some((0, 9000))).1.unwrap().zone_capacity, 8192);
        t.file(&format!("{d}/queue/zoned"), "none");
        let mut asked = false;
        assert_eq!(
            zones(Some(&disk), 512, || {
                asked = true;
                None
            }),
            (ZonedModel::None, None)
        );
        assert!(!asked, "a conventional disk is not asked for a zone report");
        assert_eq!(zones(None, 512, || None), (ZonedModel::None, None));
    }
}
