//! `nvme`: NVMe ioctl passthrough, the sync interface and the admin interface.
//!
//! Every command goes to the device as the raw submission entry the caller built (only
//! the data pointer and length come from the buffers, and the command identifier is the
//! driver's):
//!
//! | what | ioctl | on |
//! |---|---|---|
//! | I/O command, no data or one buffer | `NVME_IOCTL_IO64_CMD` (`addr`, `data_len`) | `/dev/nvmeXnY`, `/dev/ngXnY` |
//! | I/O command, several buffers | `NVME_IOCTL_IO64_CMD_VEC` (`addr` = iovec array, `data_len` = count) | same |
//! | admin command | `NVME_IOCTL_ADMIN64_CMD` (one buffer) | same, and `/dev/nvmeX` |
//!
//! The ioctl's return value is the outcome: 0 success, a positive value the NVMe status
//! field of the completion (SC, SCT, CRD, More, DNR; the phase bit removed by the
//! driver), a negative value an errno (the kernel refused the command before the device
//! saw it, e.g. `EINVAL` for an nsid other than the namespace's own). The result is the
//! completion's DW0-1.
//!
//! Commands of ioswitch's byte-addressed file set run as NVM commands when their byte
//! offsets and lengths are whole LBAs: read, write, flush, and trim as a one-range
//! Dataset Management deallocate. Metadata buffers are not supported (the metadata
//! pointer of the entry is ignored; `metadata_len` is 0).
//!
//! The driver takes at most `max_hw_sectors_kb` bytes and `max_segments` pages per
//! passthrough command and does not split; [`ns_info`] folds those limits into the
//! geometry's max transfer, together with MDTS.

use super::{segments, Io, Op, SyncIo, MAX_SEGMENTS};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::cmd::opc::{self, ZONE_MGMT_RECV};
use crate::cmd::{Cmd, CmdSet, DsmRange};
use crate::dev::{DevKind, Inner, Zoned};
use crate::error::Error;
use crate::spec::idfy::{cns, csi, IdCtrl, IdNs, IdNsZns, NsDescs, IDENTIFY_LEN};
use crate::spec::{errno_to_status, Sqe, Status};
use crate::sys::nvme::{self, PassthruCmd64};
use crate::sys::page_size;
use crate::sys::sysfs::read_num;
use std::io::{self, IoSliceMut};
use std::os::fd::RawFd;
use std::path::PathBuf;

/// `sync=nvme`: NVMe ioctl passthrough.
pub(crate) const SYNC: Descriptor = Descriptor::new(
    "nvme",
    Role::Sync,
    "NVMe ioctl passthrough",
    |kind| match kind {
        DevKind::NvmeBlock | DevKind::NvmeChar => None,
        DevKind::NvmeCtrl => {
            Some("an NVMe controller takes admin commands only; open a namespace (/dev/nvmeXnY or /dev/ngXnY) for I/O")
        }
        DevKind::NvmePci => Some(super::vfio::PCI_ONLY_VFIO),
        _ => Some("NVMe ioctls need an NVMe device (/dev/nvmeXnY or /dev/ngXnY)"),
    },
    Build::Sync(|dev| Ok(Box::new(Nvme::new(dev, "sync=nvme")?))),
)
.defaults(&[DevKind::NvmeChar]);

/// `admin=nvme`: NVMe admin ioctl passthrough.
pub(crate) const ADMIN: Descriptor = Descriptor::new(
    "nvme",
    Role::Admin,
    "NVMe admin ioctl passthrough",
    |kind| match kind {
        DevKind::NvmeBlock | DevKind::NvmeChar | DevKind::NvmeCtrl => None,
        DevKind::NvmePci => Some(super::vfio::PCI_ONLY_VFIO),
        _ => Some("NVMe admin commands need an NVMe device"),
    },
    Build::Admin(|dev| Ok(Box::new(Nvme::new(dev, "admin=nvme")?))),
)
.defaults(&[DevKind::NvmeBlock, DevKind::NvmeChar, DevKind::NvmeCtrl]);

/// Dataset Management attribute: deallocate.
const DSM_AD: u32 = 1 << 2;

/// How a command's data travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireData {
    /// No data.
    None,
    /// The first `n` bytes of the buffers.
    Bufs(u64),
    /// One DSM range built by the interface (a file-set trim).
    Range(DsmRange),
}

/// A command as it goes to the driver: the entry to send and where its data is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wire {
    pub sqe: Sqe,
    pub data: WireData,
}

/// Turns a checked command into what an NVMe passthrough interface sends; `Err` says
/// why the command cannot go (for file-set commands that are not whole LBAs).
#[inline]
pub(crate) fn wire(io: &Io, cmd: &Cmd, nsid: u32, lba: u64, bufs: &[Buffer]) -> Result<Wire, &'static str> {
    if cmd.set == CmdSet::Fs {
        let lba = lba.max(1);
        let nvm = |opcode| Sqe { opcode, nsid, ..Sqe::default() };
        return match io.op {
            Op::Flush => Ok(Wire { sqe: nvm(opc::FLUSH), data: WireData::None }),
            Op::Read | Op::Write | Op::Trim => {
                if io.offset % lba != 0 || io.len % lba != 0 {
                    return Err("NVMe passthrough moves whole LBAs: the byte offset and length of a file-set \
                                command must be multiples of the LBA size");
                }
                let (slba, nlb) = (io.offset / lba, io.len / lba);
                if io.op == Op::Trim {
                    let nlb = u32::try_from(nlb).map_err(|_| "a trim of more than 2^32-1 LBAs; split it")?;
                    let range = DsmRange { cattr: 0, nlb, slba };
                    let mut sqe = nvm(opc::DSM);
                    sqe.cdw11 = DSM_AD;
                    return Ok(Wire { sqe, data: WireData::Range(range) });
                }
                if nlb == 0 || nlb > 65536 {
                    return Err("an NVM read or write carries 1..=65536 LBAs");
                }
                let mut sqe = nvm(if io.op == Op::Read { opc::READ } else { opc::WRITE });
                sqe.cdw10 = slba as u32;
                sqe.cdw11 = (slba >> 32) as u32;
                sqe.cdw12 = (nlb - 1) as u32;
                Ok(Wire { sqe, data: WireData::Bufs(io.len) })
            }
            _ => Err("this file-set command has no NVMe equivalent"),
        };
    }
    let data = match io.op {
        Op::Read | Op::Write | Op::Dsm { .. } => WireData::Bufs(io.len),
        Op::Flush | Op::WriteZeroes | Op::Trim => WireData::None,
        Op::Passthru => {
            if bufs.len() > MAX_SEGMENTS {
                return Err("more than 64 buffers for one command");
            }
            let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
            if total > u32::MAX as u64 {
                return Err("more than 4 GiB of data for one command");
            }
            if total == 0 {
                WireData::None
            } else {
                WireData::Bufs(total)
            }
        }
    };
    Ok(Wire { sqe: cmd.sqe, data })
}

/// Outcome of a passthrough ioctl's return value (see the module docs).
#[inline]
pub(crate) fn ioctl_status(rc: i32, errno: i32) -> Status {
    if rc < 0 {
        errno_to_status(if errno == 0 { libc::EIO } else { errno })
    } else {
        Status::from_cqe_status((rc as u16) << 1)
    }
}

/// The command fields of `sqe` as the kernel's passthrough structure (flags, command id,
/// metadata and data pointers are the driver's).
#[inline]
fn passthru(sqe: &Sqe) -> PassthruCmd64 {
    PassthruCmd64 {
        opcode: sqe.opcode,
        nsid: sqe.nsid,
        cdw2: sqe.cdw2,
        cdw3: sqe.cdw3,
        cdw10: sqe.cdw10,
        cdw11: sqe.cdw11,
        cdw12: sqe.cdw12,
        cdw13: sqe.cdw13,
        cdw14: sqe.cdw14,
        cdw15: sqe.cdw15,
        ..PassthruCmd64::default()
    }
}

/// The 80-byte command area of a 128-byte io_uring SQE holding `struct nvme_uring_cmd`
/// for `sqe` with data at `addr` (`data_len` bytes, or iovecs for the vectored op).
#[inline]
pub(crate) fn uring_cmd(sqe: &Sqe, addr: u64, data_len: u32) -> [u8; 80] {
    let mut b = [0u8; 80];
    b[0] = sqe.opcode;
    b[4..8].copy_from_slice(&sqe.nsid.to_le_bytes());
    b[8..12].copy_from_slice(&sqe.cdw2.to_le_bytes());
    b[12..16].copy_from_slice(&sqe.cdw3.to_le_bytes());
    // 16..24 metadata pointer: none.
    b[24..32].copy_from_slice(&addr.to_le_bytes());
    // 32..36 metadata length: 0.
    b[36..40].copy_from_slice(&data_len.to_le_bytes());
    for (i, v) in [sqe.cdw10, sqe.cdw11, sqe.cdw12, sqe.cdw13, sqe.cdw14, sqe.cdw15].into_iter().enumerate() {
        b[40 + 4 * i..44 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    // 64..68 timeout (0: the driver's default), 68..72 reserved.
    b
}

/// Runs one passthrough ioctl; returns the result dword(s) or the status.
fn ioctl_cmd(fd: RawFd, queue: nvme::Queue, sqe: &Sqe, data: nvme::Data<'_, '_>) -> Result<u64, Status> {
    nvme::passthru(fd, queue, &mut passthru(sqe), data).map_err(|(rc, errno)| ioctl_status(rc, errno))
}

/// Sends an I/O command with the data `w` describes, in `bufs` (or the range).
pub(crate) fn io_cmd(fd: RawFd, w: &Wire, bufs: &mut [Buffer]) -> Result<u64, Status> {
    match w.data {
        WireData::None => ioctl_cmd(fd, nvme::Queue::Io, &w.sqe, nvme::Data::None),
        WireData::Range(r) => ioctl_cmd(fd, nvme::Queue::Io, &w.sqe, nvme::Data::One(&mut r.to_bytes())),
        WireData::Bufs(len) => {
            let mut iov: [IoSliceMut<'_>; MAX_SEGMENTS] = std::array::from_fn(|_| IoSliceMut::new(&mut []));
            let n = iov.iter_mut().zip(segments(bufs, len)).map(|(v, s)| *v = IoSliceMut::new(s)).count();
            let covered: u64 = iov[..n].iter().map(|v| v.len() as u64).sum();
            if covered < len || len > u32::MAX as u64 {
                return Err(errno_to_status(libc::EINVAL));
            }
            let data = match &mut iov[..n] {
                [one] => nvme::Data::One(one),
                v => nvme::Data::Vectored(v),
            };
            ioctl_cmd(fd, nvme::Queue::Io, &w.sqe, data)
        }
    }
}

/// Sends an admin command with `buf` (may be empty) as its data.
fn admin_cmd(fd: RawFd, sqe: &Sqe, buf: &mut [u8]) -> Result<u64, Status> {
    let data = if buf.is_empty() { nvme::Data::None } else { nvme::Data::One(buf) };
    ioctl_cmd(fd, nvme::Queue::Admin, sqe, data)
}

/// The `nvme` sync and admin interface on one descriptor.
pub(crate) struct Nvme {
    fd: RawFd,
    nsid: u32,
    lba: u64,
}

impl Nvme {
    /// The interface on the device's descriptor; refused, naming `iface`, where it has none.
    fn new(dev: &Inner, iface: &str) -> Result<Nvme, Error> {
        Ok(Nvme { fd: super::need_fd(dev, iface)?, nsid: dev.ident.nsid, lba: dev.geo.lba_size as u64 })
    }
}

impl SyncIo for Nvme {
    fn exec(&self, io: &Io, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let w = wire(io, cmd, self.nsid, self.lba, bufs).map_err(|_| errno_to_status(libc::EINVAL))?;
        io_cmd(self.fd, &w, bufs)
    }

    fn syscalls_per_cmd(&self) -> u64 {
        1
    }
}

impl super::AdminIo for Nvme {
    fn admin(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        match bufs {
            [] => admin_cmd(self.fd, &cmd.sqe, &mut []),
            [b] => admin_cmd(self.fd, &cmd.sqe, &mut b[..]),
            // The admin ioctl has no vectored form.
            _ => Err(errno_to_status(libc::EINVAL)),
        }
    }
}

/// Runs an Identify into a fresh page-aligned page (as every passthrough buffer: see
/// `be::check_passthru_bufs`).
fn identify(fd: RawFd, cns: u8, nsid: u32, csi: u8) -> Result<Buffer, Status> {
    let mut page = Buffer::alloc(IDENTIFY_LEN, page_size()).map_err(|_| errno_to_status(libc::ENOMEM))?;
    admin_cmd(fd, &Cmd::identify(cns, nsid, 0, csi).sqe, &mut page)?;
    Ok(page)
}

/// The controller's Identify data, through any NVMe descriptor.
pub(crate) fn identify_ctrl(fd: RawFd) -> Result<IdCtrl, Status> {
    let page = identify(fd, cns::CTRL, 0, 0)?;
    IdCtrl::from_bytes(&page).map_err(|_| errno_to_status(libc::EIO))
}

/// A Zone Management Receive of a partial report of `len` bytes from zone 0 (the
/// header and the first descriptors).
pub(crate) fn zone_report0(nsid: u32, len: u32) -> Sqe {
    Sqe { opcode: ZONE_MGMT_RECV, nsid, cdw12: (len / 4) - 1, cdw13: 1 << 16, ..Sqe::default() }
}

/// What [`ns_info`] asks a namespace device. The device answers through its descriptor's
/// ioctls; a unit test answers with canned pages, so the geometry logic is tested on any
/// host.
pub(crate) trait Ask {
    /// The namespace id of the device (`NVME_IOCTL_ID`).
    fn nsid(&self) -> io::Result<u32>;
    /// An Identify page.
    fn identify(&self, cns: u8, nsid: u32, csi: u8) -> Result<Buffer, Status>;
    /// A Zone Management Receive report into `rep` (one zone descriptor, partial).
    fn zone_report(&self, nsid: u32, rep: &mut Buffer) -> Result<u64, Status>;
}

/// The device itself, through the ioctls of its descriptor.
pub(crate) struct Fd(pub(crate) RawFd);

impl Ask for Fd {
    fn nsid(&self) -> io::Result<u32> {
        nvme::ioctl_id(self.0)
    }
    fn identify(&self, cns: u8, nsid: u32, csi: u8) -> Result<Buffer, Status> {
        identify(self.0, cns, nsid, csi)
    }
    fn zone_report(&self, nsid: u32, rep: &mut Buffer) -> Result<u64, Status> {
        let w = Wire { sqe: zone_report0(nsid, rep.len() as u32), data: WireData::Bufs(rep.len() as u64) };
        io_cmd(self.0, &w, std::slice::from_mut(rep))
    }
}

/// What identify says about a namespace, for the device's geometry and identity.
#[derive(Clone, Debug)]
pub(crate) struct NsInfo {
    pub nsid: u32,
    pub lba_size: u32,
    pub nlbas: u64,
    /// MDTS (CAP.MPSMIN taken as 4 KiB) within the kernel's passthrough limits.
    pub max_transfer: u64,
    pub zones: Option<Zoned>,
    pub model: String,
    pub serial: String,
    /// The namespace's block device in sysfs (for a generic char device: its sibling).
    pub block_dir: Option<PathBuf>,
    /// The kernel's DMA alignment for user buffers (`queue/dma_alignment` + 1).
    pub dma_align: u32,
}

/// The controller's minimum memory page size, CAP.MPSMIN. CAP is a controller register
/// that no ioctl exposes; every controller seen so far (QEMU's included) has 4 KiB.
const MPSMIN: u64 = 4096;

/// Identifies the namespace behind a namespace device (block or generic char): its id
/// (`NVME_IOCTL_ID`), LBA format and size (Identify Namespace), MDTS (Identify
/// Controller), and for zoned namespaces the zone size, open/active limits (ZNS Identify
/// Namespace) and zone capacity (a Zone Management Receive report of zone 0).
pub(crate) fn ns_info(uri: &str, fd: RawFd, devno: (u32, u32), kind: DevKind) -> Result<NsInfo, Error> {
    let block_dir = |nsid| match kind {
        DevKind::NvmeChar => char_block_dir(devno, nsid),
        _ => crate::sys::sysfs::disk_dir(devno),
    };
    ns_info_from(uri, &Fd(fd), block_dir)
}

/// [`ns_info`] from what `dev` answers, with the namespace's block device directory in
/// sysfs (for the queue limits) from `block_dir(nsid)`.
pub(crate) fn ns_info_from(
    uri: &str,
    dev: &impl Ask,
    block_dir: impl FnOnce(u32) -> Option<PathBuf>,
) -> Result<NsInfo, Error> {
    let failed = |what: &str, status: Status| Error::Command { dev: uri.into(), what: what.into(), status };
    let nsid = dev.nsid().map_err(|e| super::os_error(uri, "NVME_IOCTL_ID (namespace id of the device)", e))?;
    let ctrl = dev
        .identify(cns::CTRL, 0, 0)
        .and_then(|p| IdCtrl::from_bytes(&p).map_err(|_| errno_to_status(libc::EIO)))
        .map_err(|s| failed("Identify Controller (CNS 01h) at open", s))?;
    let page = dev.identify(cns::NS, nsid, 0).map_err(|s| failed("Identify Namespace (CNS 00h) at open", s))?;
    let ns = IdNs::from_bytes(&page).map_err(|_| failed("Identify Namespace", errno_to_status(libc::EIO)))?;
    let lbaf = ns.lbaf_in_use().copied().unwrap_or_default();
    let lba_size = lbaf.data_size();
    if lba_size == 0 {
        return Err(Error::BadUri {
            uri: uri.into(),
            why: format!(
                "namespace {nsid} reports an unusable LBA format (FLBAS {:#x}, LBADS {}): is it formatted?",
                ns.flbas, lbaf.ds
            ),
        });
    }
    let block_dir = block_dir(nsid);
    let q = |attr: &str| -> Option<u64> { read_num(&block_dir.as_ref()?.join("queue").join(attr)) };
    // The least of 65536 LBAs and the limits that are known: MDTS, the kernel's bytes and
    // segments (one page-aligned buffer of N pages takes at most N segments).
    let limits = [
        ctrl.max_transfer(MPSMIN),
        q("max_hw_sectors_kb").map(|kb| kb * 1024),
        q("max_segments").map(|segs| segs * page_size() as u64),
    ];
    let max = limits.into_iter().flatten().fold(65536 * lba_size as u64, u64::min);
    let max = (max / lba_size as u64).max(1) * lba_size as u64;
    let dma_align = q("dma_alignment").map(|a| (a + 1) as u32).filter(|a| a.is_power_of_two()).unwrap_or(4);
    let zones = zone_info(dev, nsid, &ns, uri)?;
    Ok(NsInfo {
        nsid,
        lba_size,
        nlbas: ns.nsze,
        max_transfer: max,
        zones,
        model: ctrl.mn,
        serial: ctrl.sn,
        block_dir,
        dma_align,
    })
}

/// Zone layout of a zoned namespace, `None` for others.
fn zone_info(dev: &impl Ask, nsid: u32, ns: &IdNs, uri: &str) -> Result<Option<Zoned>, Error> {
    let failed = |what: &str, status: Status| Error::Command { dev: uri.into(), what: what.into(), status };
    // The command set of the namespace, from its descriptor list; controllers that
    // predate it (NVMe < 1.3) have no ZNS either.
    let descs = dev.identify(cns::NS_DESC_LIST, nsid, 0).ok().and_then(|page| NsDescs::from_bytes(&page).ok());
    if descs.and_then(|d| d.csi) != Some(csi::ZNS) {
        return Ok(None);
    }
    let page = dev
        .identify(cns::CSI_NS, nsid, csi::ZNS)
        .map_err(|s| failed("ZNS Identify Namespace (CNS 05h, CSI 02h) at open", s))?;
    let z = IdNsZns::from_bytes(&page, ns.nlbaf)
        .map_err(|_| failed("ZNS Identify Namespace", errno_to_status(libc::EIO)))?;
    let zone_size = z.lbafe.get(ns.lbaf_index()).map(|e| e.zsze).unwrap_or(0);
    if zone_size == 0 {
        return Err(Error::BadUri { uri: uri.into(), why: format!("zoned namespace {nsid} reports a zone size of 0") });
    }
    // Zone 0's capacity from a one-descriptor report (partial report: the header counts
    // the descriptors returned).
    let mut rep = Buffer::alloc(128, page_size()).map_err(|why| {
        super::os_error(uri, "allocating a zone report buffer", io::Error::new(io::ErrorKind::OutOfMemory, why))
    })?;
    dev.zone_report(nsid, &mut rep).map_err(|s| failed("Zone Management Receive (report of zone 0) at open", s))?;
    let nr = u64::from_le_bytes(rep[0..8].try_into().unwrap_or([0; 8]));
    let zcap = u64::from_le_bytes(rep[72..80].try_into().unwrap_or([0; 8]));
    let zone_capacity = if nr >= 1 && zcap != 0 { zcap } else { zone_size };
    Ok(Some(Zoned {
        zone_size,
        zone_capacity,
        nr_zones: ns.nsze.div_ceil(zone_size),
        max_open: z.max_open().unwrap_or(0),
        max_active: z.max_active().unwrap_or(0),
    }))
}

/// The block device of the namespace a generic char device (`ngXnY`, `maj:min`) serves:
/// a sibling `nvme*` disk in the same controller directory with the same nsid.
pub(crate) fn char_block_dir(devno: (u32, u32), nsid: u32) -> Option<PathBuf> {
    let me = crate::sys::sysfs::dev_dir("char", devno)?;
    let disks = crate::sys::sysfs::sorted_entries(me.parent()?, |p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("nvme") && n.contains('n'))
            && p.join("queue").is_dir()
    });
    disks.into_iter().find(|p| read_num(&p.join("nsid")) == Some(nsid))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace that answers from canned pages: its Identify pages by CNS, and zone 0's
    /// capacity for a zone report.
    struct Canned {
        nsid: u32,
        pages: Vec<(u8, Vec<u8>)>,
        zcap: u64,
    }

    impl Ask for Canned {
        fn nsid(&self) -> io::Result<u32> {
            Ok(self.nsid)
        }
        fn identify(&self, cns: u8, _nsid: u32, _csi: u8) -> Result<Buffer, Status> {
            let (_, p) = self.pages.iter().find(|(c, _)| *c == cns).ok_or(errno_to_status(libc::EINVAL))?;
            let mut b = Buffer::alloc(IDENTIFY_LEN, 4096).unwrap();
            b.copy_from_slice(p);
            Ok(b)
        }
        fn zone_report(&self, _nsid: u32, rep: &mut Buffer) -> Result<u64, Status> {
            rep[0..8].copy_from_slice(&1u64.to_le_bytes());
            rep[72..80].copy_from_slice(&self.zcap.to_le_bytes());
            Ok(0)
        }
    }

    /// Identify Controller with MDTS `mdts`; Identify Namespace of `nsze` LBAs of 2^`ds`
    /// bytes; for a zoned namespace (`zsze` > 0) the descriptor list naming ZNS and the ZNS
    /// page with zone size and open/active limits.
    fn canned(mdts: u8, nsze: u64, ds: u8, zsze: u64, zcap: u64) -> Canned {
        let mut ctrl = vec![0u8; IDENTIFY_LEN];
        ctrl[4..24].copy_from_slice(b"canned-serial       ");
        ctrl[24..64].copy_from_slice(&[b' '; 40]);
        ctrl[24..30].copy_from_slice(b"Canned");
        ctrl[77] = mdts;
        let mut ns = vec![0u8; IDENTIFY_LEN];
        ns[0..8].copy_from_slice(&nsze.to_le_bytes());
        ns[128..132].copy_from_slice(&((ds as u32) << 16).to_le_bytes());
        let mut pages = vec![(cns::CTRL, ctrl), (cns::NS, ns)];
        if zsze > 0 {
            let mut desc = vec![0u8; IDENTIFY_LEN];
            desc[0..5].copy_from_slice(&[4, 1, 0, 0, csi::ZNS]);
            let mut zns = vec![0u8; IDENTIFY_LEN];
            zns[4..8].copy_from_slice(&13u32.to_le_bytes()); // MAR: 14 active
            zns[8..12].copy_from_slice(&11u32.to_le_bytes()); // MOR: 12 open
            zns[2816..2824].copy_from_slice(&zsze.to_le_bytes());
            pages.push((cns::NS_DESC_LIST, desc));
            pages.push((cns::CSI_NS, zns));
        }
        Canned { nsid: 3, pages, zcap }
    }

    #[test]
    fn namespace_geometry_comes_from_identify_and_the_queue_limits() {
        let t = crate::sys::sysfs::Tree::new("nsinfo");
        t.file("nvme0n3/queue/max_hw_sectors_kb", "512")
            .file("nvme0n3/queue/max_segments", "33")
            .file("nvme0n3/queue/dma_alignment", "3");
        let dir = t.root.join("nvme0n3");
        // MDTS 7 (512 KiB) and 512 KiB of hardware sectors, but 33 segments: 132 KiB.
        let i = ns_info_from("canned", &canned(7, 1 << 18, 9, 0, 0), |n| {
            assert_eq!(n, 3, "the block directory of the device's own namespace");
            Some(dir.clone())
        })
        .unwrap();
        assert_eq!((i.nsid, i.lba_size, i.nlbas, i.dma_align), (3, 512, 1 << 18, 4));
        assert_eq!(i.max_transfer, 33 * page_size() as u64);
        assert_eq!((i.model.as_str(), i.serial.as_str()), ("Canned", "canned-serial"));
        assert_eq!(i.zones, None);
        // Without sysfs limits: MDTS 5 of 4 KiB pages (128 KiB), whole 4 KiB LBAs.
        let i = ns_info_from("canned", &canned(5, 1000, 12, 0, 0), |_| None).unwrap();
        assert_eq!((i.lba_size, i.max_transfer, i.dma_align), (4096, 128 << 10, 4));
    }

    #[test]
    fn a_zoned_namespace_takes_zone_size_limits_and_zone_0s_capacity() {
        let i = ns_info_from("canned", &canned(0, 8192 * 10 + 5, 9, 8192, 6144), |_| None).unwrap();
        let z = i.zones.unwrap();
        assert_eq!((z.zone_size, z.zone_capacity, z.nr_zones, z.max_open, z.max_active), (8192, 6144, 11, 12, 14));
        assert_eq!(i.max_transfer, 65536 * 512, "no MDTS: what one command can express");
        // A report without a capacity: the zone size.
        let z = ns_info_from("canned", &canned(0, 8192, 9, 8192, 0), |_| None).unwrap().zones.unwrap();
        assert_eq!(z.zone_capacity, 8192);
    }

    #[test]
    fn unusable_namespaces_are_refused_by_name() {
        let e = ns_info_from("canned", &canned(0, 8, 0, 0, 0), |_| None).unwrap_err().to_string();
        assert!(e.contains("unusable LBA format") && e.contains("namespace 3"), "{e}");
        let e = ns_info_from("canned", &canned(0, 8, 9, 0, 0).without(cns::NS), |_| None).unwrap_err().to_string();
        assert!(e.contains("Identify Namespace (CNS 00h)"), "{e}");
        let mut z = canned(0, 8, 9, 1, 0);
        if let Some((_, p)) = z.pages.iter_mut().find(|(c, _)| *c == cns::CSI_NS) {
            p[2816..2824].fill(0);
        }
        let e = ns_info_from("canned", &z, |_| None).unwrap_err().to_string();
        assert!(e.contains("zone size of 0"), "{e}");
    }

    impl Canned {
        fn without(mut self, cns: u8) -> Canned {
            self.pages.retain(|(c, _)| *c != cns);
            self
        }
    }

    #[test]
    fn ioctl_return_values_decode_to_status() {
        // The driver returns the status field without the phase bit: SCT 1, SC 0xBC, DNR.
        let s = ioctl_status(0x41BC, 0);
        assert_eq!(s.code(), 0x1BC);
        assert!(s.dnr());
        assert_eq!(s.name(), "Zone Invalid Write");
        assert_eq!(s.errno(), None);
        let s = ioctl_status(-1, libc::EINVAL);
        assert_eq!(s.errno(), Some(libc::EINVAL));
        assert!(ioctl_status(0, 0).is_ok());
    }

    #[test]
    fn uring_cmd_bytes_follow_the_kernel_layout() {
        let sqe = Sqe { opcode: 2, nsid: 3, cdw2: 4, cdw10: 10, cdw12: 7, cdw15: 15, ..Sqe::default() };
        let b = uring_cmd(&sqe, 0x1122_3344_5566_7788, 4096);
        assert_eq!(b[0], 2);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 4);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0x1122_3344_5566_7788);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 4096);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 10);
        assert_eq!(u32::from_le_bytes(b[48..52].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(b[60..64].try_into().unwrap()), 15);
        assert!(b[64..].iter().all(|&x| x == 0));
    }

    #[test]
    fn file_set_commands_become_nvm_commands_when_they_are_whole_lbas() {
        let io = Io { op: Op::Read, offset: 4096, len: 8192 };
        let w = wire(&io, &Cmd::fs_read(4096, 8192), 5, 512, &[]).unwrap();
        assert_eq!((w.sqe.opcode, w.sqe.nsid, w.sqe.slba(), w.sqe.nlb()), (opc::READ, 5, 8, 16));
        assert_eq!(w.data, WireData::Bufs(8192));
        let io = Io { op: Op::Trim, offset: 512, len: 1024 };
        let w = wire(&io, &Cmd::fs_trim(512, 1024), 1, 512, &[]).unwrap();
        assert_eq!((w.sqe.opcode, w.sqe.cdw10, w.sqe.cdw11), (opc::DSM, 0, DSM_AD));
        assert_eq!(w.data, WireData::Range(DsmRange { cattr: 0, nlb: 2, slba: 1 }));
        let io = Io { op: Op::Write, offset: 1000, len: 512 };
        assert!(wire(&io, &Cmd::fs_write(1000, 512), 1, 512, &[]).unwrap_err().contains("multiples"));
        // NVM commands go as they are.
        let c = Cmd::write(1, 9, 2).fua();
        let io = Io { op: Op::Write, offset: 9 * 512, len: 1024 };
        let w = wire(&io, &c, 7, 512, &[]).unwrap();
        assert_eq!(w.sqe, c.sqe);
    }
}
