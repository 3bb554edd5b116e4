//! `admin=emulated`: admin commands answered from what ioswitch knows of a device that is
//! not NVMe (a file, a ramdisk, a block device), so identify and health tools work on
//! every device — the idea of xNVMe's `file_as_ns`.
//!
//! Answered:
//! - Identify Controller (CNS 01h): model `ioswitch emulated <kind>`, serial from the
//!   device (or `ioswitch`), firmware revision = the ioswitch version, MDTS from the
//!   geometry's max transfer, one namespace;
//! - Identify Namespace (CNS 00h) for the device's namespace: size = capacity =
//!   utilization = the LBA count, one LBA format with the LBA size;
//! - Active Namespace ID list (CNS 02h);
//! - Get Log Page: Error Information (no errors recorded: one unused entry), SMART /
//!   Health (zeros, except for block devices the counters the kernel keeps in
//!   `/sys/class/block/<dev>/stat`: data units and commands read and written, busy
//!   time), Firmware Slot Information (slot 1 = the ioswitch version).
//!
//! Other identify structures and log pages fail with Invalid Field in Command, other
//! namespaces with Invalid Namespace or Format, and every other admin command with
//! Invalid Command Opcode.

use super::AdminIo;
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::{opc, Cmd};
use crate::dev::{DevKind, Geometry, Ident, Inner};
use crate::spec::idfy::{cns, IDENTIFY_LEN};
use crate::spec::log::{lid, SmartLog, ERROR_ENTRY_LEN, FW_SLOT_LEN, SMART_LEN};
use crate::spec::Status;
use std::path::PathBuf;

/// `admin=emulated`: identify data emulated from stat, sysfs and block ioctls.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "emulated",
    Role::Admin,
    "identify data emulated from stat, sysfs and block ioctls",
    super::not_pci,
    Build::Admin(|dev| Ok(Box::new(AdminEmu::new(dev)))),
)
.defaults(&[DevKind::File, DevKind::Block, DevKind::Ramdisk, DevKind::DevDax]);

/// Invalid Command Opcode (generic, DNR).
const INVALID_OPCODE: Status = Status { raw: 0x01 | 1 << 14, errno_raw: 0 };
/// Invalid Field in Command (generic, DNR).
const INVALID_FIELD: Status = Status { raw: 0x02 | 1 << 14, errno_raw: 0 };
/// Invalid Namespace or Format (generic, DNR).
const INVALID_NS: Status = Status { raw: 0x0B | 1 << 14, errno_raw: 0 };

/// The minimum memory page size MDTS is counted in (CAP.MPSMIN of 4 KiB).
const MIN_PAGE: u64 = 4096;

pub(crate) struct AdminEmu {
    geo: Geometry,
    ident: Ident,
    /// Where the kernel keeps the I/O counters of a block device.
    stat: Option<PathBuf>,
}

/// Short kind names for the model string (at most 40 characters in all).
fn kind_word(kind: DevKind) -> &'static str {
    match kind {
        DevKind::File => "file",
        DevKind::Block => "block",
        DevKind::NvmeBlock => "nvme-block",
        DevKind::NvmeChar => "nvme-char",
        DevKind::NvmeCtrl => "nvme-ctrl",
        DevKind::Ramdisk => "ramdisk",
        DevKind::DevDax => "devdax",
        DevKind::NvmePci => "nvme-pci",
    }
}

/// Writes `s` as a space-padded ASCII field of `len` bytes at `off`; characters that
/// are not printable ASCII become `_`, and the text is cut to the field.
fn put_ascii(page: &mut [u8], off: usize, len: usize, s: &str, pad: u8) {
    let field = &mut page[off..off + len];
    field.fill(pad);
    for (dst, c) in field.iter_mut().zip(s.bytes()) {
        *dst = if (0x20..0x7f).contains(&c) { c } else { b'_' };
    }
}

fn put(page: &mut [u8], off: usize, bytes: &[u8]) {
    page[off..off + bytes.len()].copy_from_slice(bytes);
}

/// MDTS for a largest transfer of `bytes`: the largest `n` with 4 KiB << n ≤ bytes;
/// 0 (no limit) when unknown.
fn mdts(bytes: u64) -> u8 {
    if bytes < MIN_PAGE {
        return 0;
    }
    (bytes / MIN_PAGE).ilog2().min(u8::MAX as u32) as u8
}

/// Copies `data` into the buffers, then zeroes the rest of the first `len` bytes (a
/// transfer longer than the structure reads zeroes beyond it); stops where the buffers
/// end.
fn copy_out(bufs: &mut [Buffer], data: &[u8], len: usize) {
    let bytes = data.iter().copied().chain(std::iter::repeat(0)).take(len);
    for (dst, v) in bufs.iter_mut().flat_map(|b| b.iter_mut()).zip(bytes) {
        *dst = v;
    }
}

impl AdminEmu {
    pub(crate) fn new(dev: &Inner) -> AdminEmu {
        let stat = match dev.ident.kind {
            DevKind::Block | DevKind::NvmeBlock => {
                dev.ident.block_name.as_ref().map(|n| crate::sys::sysfs::class("block").join(n).join("stat"))
            }
            _ => None,
        };
        AdminEmu { geo: dev.geo.clone(), ident: dev.ident.clone(), stat }
    }

    fn id_ctrl(&self) -> Vec<u8> {
        let mut p = vec![0u8; IDENTIFY_LEN];
        let id = &self.ident;
        // A file's block name is the disk under its file system: not the file's serial.
        let own_block = matches!(id.kind, DevKind::Block | DevKind::NvmeBlock).then(|| id.block_name.clone()).flatten();
        let serial = id.serial.clone().or(own_block).unwrap_or_else(|| "ioswitch".into());
        put_ascii(&mut p, 4, 20, &serial, b' ');
        put_ascii(&mut p, 24, 40, &format!("ioswitch emulated {}", kind_word(id.kind)), b' ');
        put_ascii(&mut p, 64, 8, env!("CARGO_PKG_VERSION"), b' ');
        p[77] = mdts(self.geo.max_transfer);
        // Version 2.0.0; an I/O controller.
        put(&mut p, 80, &0x0002_0000u32.to_le_bytes());
        p[111] = 1;
        // Firmware: one slot, read-only (slot 1), reported by the firmware slot log.
        p[260] = 0x03;
        // Submission / completion entry sizes (64 / 16 bytes, required and maximum).
        p[512] = 0x66;
        p[513] = 0x44;
        put(&mut p, 516, &id.nsid.to_le_bytes());
        // ONCS: Dataset Management (bit 2) and Write Zeroes (bit 3) are served.
        put(&mut p, 520, &0x000Cu16.to_le_bytes());
        // A volatile write cache is present unless the data lives in this process.
        p[525] = (id.kind != DevKind::Ramdisk) as u8;
        let name = id
            .path
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| id.uri.clone());
        put_ascii(&mut p, 768, 255, &format!("nqn.2024-11.io.ioswitch:emulated:{}:{name}", kind_word(id.kind)), 0);
        p
    }

    fn id_ns(&self) -> Vec<u8> {
        let mut p = vec![0u8; IDENTIFY_LEN];
        let n = self.geo.nlbas.to_le_bytes();
        put(&mut p, 0, &n);
        put(&mut p, 8, &n);
        put(&mut p, 16, &n);
        // NVM Capacity in bytes.
        put(&mut p, 48, &(self.geo.bytes as u128).to_le_bytes());
        // One LBA format (NLBAF is 0-based), in use (FLBAS 0): no metadata, the LBA size.
        p[25] = 0;
        p[26] = 0;
        p[128 + 2] = self.geo.lba_size.max(1).trailing_zeros() as u8;
        p
    }

    fn active_ns_list(&self, above: u32) -> Vec<u8> {
        let mut p = vec![0u8; IDENTIFY_LEN];
        if self.ident.nsid > above {
            put(&mut p, 0, &self.ident.nsid.to_le_bytes());
        }
        p
    }

    fn smart(&self) -> Vec<u8> {
        let mut log = SmartLog::default();
        if let Some(fields) = self.stat.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            let v: Vec<u128> = fields.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            // Units of 1000 512-byte blocks, rounded up; sectors in the stat file are 512 bytes.
            log.data_units_read = at(2).div_ceil(1000);
            log.data_units_written = at(6).div_ceil(1000);
            log.host_read_commands = at(0);
            log.host_write_commands = at(4);
            log.controller_busy_time = at(9) / 60_000;
        }
        let mut p = vec![0u8; SMART_LEN];
        // The page is exactly SMART_LEN bytes, so writing cannot fail.
        let _ = log.write_to(&mut p);
        p
    }

    fn fw_slots(&self) -> Vec<u8> {
        let mut p = vec![0u8; FW_SLOT_LEN];
        p[0] = 1;
        put_ascii(&mut p, 8, 8, env!("CARGO_PKG_VERSION"), b' ');
        p
    }

    fn identify(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let s = &cmd.sqe;
        // Any command set (CSI): the CNS values answered here are the same in all of them.
        let page = match s.cdw10 as u8 {
            cns::CTRL => self.id_ctrl(),
            cns::NS if s.nsid == self.ident.nsid => self.id_ns(),
            cns::NS => return Err(INVALID_NS),
            cns::NS_ACTIVE_LIST => self.active_ns_list(s.nsid),
            _ => return Err(INVALID_FIELD),
        };
        copy_out(bufs, &page, IDENTIFY_LEN);
        Ok(0)
    }

    fn get_log(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let s = &cmd.sqe;
        let numd = ((s.cdw11 & 0xffff) as u64) << 16 | (s.cdw10 >> 16) as u64;
        let len = (numd + 1) * 4;
        let offset = s.cdw12 as u64 | (s.cdw13 as u64) << 32;
        let page = match s.cdw10 as u8 {
            lid::ERROR => vec![0u8; ERROR_ENTRY_LEN],
            lid::SMART => self.smart(),
            lid::FW_SLOT => self.fw_slots(),
            _ => return Err(INVALID_FIELD),
        };
        if offset >= page.len() as u64 {
            return Err(INVALID_FIELD);
        }
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        copy_out(bufs, &page[offset as usize..], len);
        Ok(0)
    }
}

impl AdminIo for AdminEmu {
    fn admin(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        match cmd.sqe.opcode {
            opc::ADMIN_IDENTIFY => self.identify(cmd, bufs),
            opc::ADMIN_GET_LOG_PAGE => self.get_log(cmd, bufs),
            _ => Err(INVALID_OPCODE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cmd::Cmd;
    use crate::spec::idfy::{IdCtrl, IdNs};
    use crate::spec::log::{ErrorLog, FwSlotLog};
    use crate::spec::Sct;
    use crate::{Device, Error};

    fn admin(dev: &Device, cmd: &Cmd, len: usize) -> Result<Vec<u8>, Error> {
        let mut buf = dev.alloc(len)?;
        buf.fill(0xee);
        dev.pass_admin(cmd, std::slice::from_mut(&mut buf))?;
        Ok(buf.to_vec())
    }

    fn status_of(e: Error) -> Status {
        match e {
            Error::Command { status, .. } => status,
            other => panic!("expected a command status, got {other}"),
        }
    }

    #[test]
    fn a_ramdisk_identifies_as_an_emulated_controller_and_namespace() {
        let dev = Device::open("4MiB", &"nsid=3".parse().unwrap()).unwrap();
        let c = IdCtrl::from_bytes(&admin(&dev, &Cmd::identify(cns::CTRL, 0, 0, 0), 4096).unwrap()).unwrap();
        assert_eq!(c.mn, "ioswitch emulated ramdisk");
        assert_eq!(c.sn, "ioswitch");
        assert_eq!(c.fr, env!("CARGO_PKG_VERSION"));
        assert_eq!((c.nn, c.mdts, c.ver, c.vwc), (3, 13, 0x0002_0000, 0));
        let ns = IdNs::from_bytes(&admin(&dev, &Cmd::identify(cns::NS, 3, 0, 0), 4096).unwrap()).unwrap();
        assert_eq!((ns.nsze, ns.ncap, ns.nuse, ns.nlbaf, ns.flbas), (8192, 8192, 8192, 0, 0));
        assert_eq!(ns.nvmcap, 4 << 20);
        assert_eq!(ns.lbaf_in_use().map(|f| f.data_size()), Some(512));
        let list = admin(&dev, &Cmd::identify(cns::NS_ACTIVE_LIST, 0, 0, 0), 4096).unwrap();
        assert_eq!(&list[..8], &[3, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_file_reports_its_lba_size_and_count() {
        let path = std::env::temp_dir().join(format!("ioswitch-admin-emu-{}", std::process::id()));
        let dev = Device::open(path.to_str().unwrap(), &"create=1,size=1MiB".parse().unwrap()).unwrap();
        let ns = IdNs::from_bytes(&admin(&dev, &Cmd::identify(cns::NS, 1, 0, 0), 4096).unwrap()).unwrap();
        assert_eq!(ns.nsze * ns.lbaf_in_use().map(|f| f.data_size() as u64).unwrap_or(0), 1 << 20);
        let c = IdCtrl::from_bytes(&admin(&dev, &Cmd::identify(cns::CTRL, 0, 0, 0), 4096).unwrap()).unwrap();
        assert_eq!((c.mn.as_str(), c.vwc), ("ioswitch emulated file", 1));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn logs_are_answered_and_the_rest_is_refused_with_nvme_status() {
        let dev = Device::open("1MiB", &Default::default()).unwrap();
        let smart = admin(&dev, &Cmd::get_log(u32::MAX, lid::SMART, 0, 512, 0), 512).unwrap();
        assert_eq!(SmartLog::parse(&smart).unwrap(), SmartLog::default());
        // A transfer longer than the page reads zeroes past its end.
        let long = admin(&dev, &Cmd::get_log(u32::MAX, lid::SMART, 0, 1024, 0), 1024).unwrap();
        assert!(long.iter().all(|&b| b == 0));
        let err = admin(&dev, &Cmd::get_log(u32::MAX, lid::ERROR, 0, 64, 0), 64).unwrap();
        assert!(!ErrorLog::parse(&err).unwrap().entries[0].is_valid());
        let fw = FwSlotLog::parse(&admin(&dev, &Cmd::get_log(0, lid::FW_SLOT, 0, 512, 0), 512).unwrap()).unwrap();
        assert_eq!((fw.active_slot, fw.slots[0].revision.as_str()), (1, env!("CARGO_PKG_VERSION")));

        let s = status_of(admin(&dev, &Cmd::get_log(0, 0xC0, 0, 512, 0), 512).unwrap_err());
        assert_eq!((s.sct(), s.sc()), (Sct::Generic, 0x02));
        let s = status_of(admin(&dev, &Cmd::get_log(0, lid::SMART, 0, 4, 512), 4).unwrap_err());
        assert_eq!(s.sc(), 0x02);
        let s = status_of(admin(&dev, &Cmd::identify(cns::NS, 2, 0, 0), 4096).unwrap_err());
        assert_eq!(s.sc(), 0x0B);
        let s = status_of(admin(&dev, &Cmd::get_features(6, crate::spec::feat::Select::Current, 0, 0), 0).unwrap_err());
        assert_eq!((s.sc(), s.name()), (0x01, "Invalid Command Opcode"));
    }

    #[test]
    fn mdts_counts_4k_pages_as_a_power_of_two() {
        assert_eq!(mdts(0), 0);
        assert_eq!(mdts(4095), 0);
        assert_eq!(mdts(4096), 0);
        assert_eq!(mdts(8192), 1);
        assert_eq!(mdts(65536 * 512), 13);
        assert_eq!(mdts(3 * 4096), 1);
    }

    #[test]
    fn ascii_fields_are_padded_cut_and_printable() {
        let mut p = [0u8; 8];
        put_ascii(&mut p, 2, 4, "aé", b' ');
        assert_eq!(&p, b"\0\0a__\x20\0\0");
        put_ascii(&mut p, 0, 3, "abcdef", 0);
        assert_eq!(&p[..3], b"abc");
    }

    #[test]
    fn transfers_fill_buffers_in_order_and_zero_past_the_structure() {
        let mut bufs = [Buffer::alloc(3, 8).unwrap(), Buffer::alloc(4, 8).unwrap()];
        bufs[1].fill(0xff);
        copy_out(&mut bufs, &[1, 2, 3, 4, 5], 6);
        assert_eq!(&bufs[0][..], &[1, 2, 3]);
        assert_eq!(&bufs[1][..], &[4, 5, 0, 0xff]);
    }
}
