//! The matrix: its columns (interfaces, with the options that select them and the refusals
//! the selection table must give) and its rows (device kinds), and how the rows are set up
//! on this machine (disk and tmpfs directories, a loop device, a ramdisk, NVMe namespaces).

use crate::{DEV_BYTES, KIB, PREFIX, RAMDISK_URI};
use ioswitch::spec::idfy::{cns, IdNs, IDENTIFY_LEN};
use ioswitch::{AsyncIface, Cmd, DevKind, Device, Opts, SyncIface};
use ioswitch_testkit::dirs::{direct_works, disk_dir, fs_type, is_mem_fs};
use ioswitch_testkit::loopdev::LoopDev;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Col {
    Psync,
    Block,
    Ram,
    Nvme,
    Emu,
    Thrpool,
    Libaio,
    Uring,
    UringRegFiles,
    UringRegBufs,
    UringSqpoll,
    UringIopoll,
    Posix,
    UringCmd,
    UringCmdSqpoll,
    UringCmdIopoll,
    Nil,
    Mmap,
    Pmem,
    /// `pmem` with `pmem_populate=1` (the mapping made with MAP_POPULATE): the same cases
    /// on a mapping whose pages were faulted in at open.
    PmemPopulate,
    /// The user-space NVMe driver (sync and async `vfio`), on a PCI controller bound to
    /// vfio-pci; refused by every other kind of device.
    Vfio,
}

impl Col {
    /// The columns of the rows that are not NVMe (files, loop devices, ramdisk).
    pub(crate) const ALL: [Col; 16] = [
        Col::Psync,
        Col::Block,
        Col::Ram,
        Col::Mmap,
        Col::Pmem,
        Col::PmemPopulate,
        Col::Emu,
        Col::Thrpool,
        Col::Libaio,
        Col::Uring,
        Col::UringRegFiles,
        Col::UringRegBufs,
        Col::UringSqpoll,
        Col::Posix,
        Col::Nil,
        Col::Vfio,
    ];

    /// The columns of the NVMe namespace rows (kernel devices and PCI addresses alike).
    pub(crate) const NVME: [Col; 17] = [
        Col::Psync,
        Col::Block,
        Col::Nvme,
        Col::Mmap,
        Col::Emu,
        Col::Thrpool,
        Col::Libaio,
        Col::Uring,
        Col::UringRegFiles,
        Col::UringSqpoll,
        Col::UringIopoll,
        Col::Posix,
        Col::UringCmd,
        Col::UringCmdSqpoll,
        Col::UringCmdIopoll,
        Col::Nil,
        Col::Vfio,
    ];

    /// The columns of the zoned namespace rows (nil moves no data: no zone to check).
    pub(crate) const ZONED: [Col; 15] = [
        Col::Psync,
        Col::Block,
        Col::Nvme,
        Col::Emu,
        Col::Thrpool,
        Col::Libaio,
        Col::Uring,
        Col::UringRegFiles,
        Col::UringSqpoll,
        Col::UringIopoll,
        Col::Posix,
        Col::UringCmd,
        Col::UringCmdSqpoll,
        Col::UringCmdIopoll,
        Col::Vfio,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Col::Psync => "psync",
            Col::Block => "block",
            Col::Ram => "ramdisk",
            Col::Nvme => "nvme",
            Col::Emu => "emu",
            Col::Thrpool => "thrpool",
            Col::Libaio => "libaio",
            Col::Uring => "io_uring",
            Col::UringRegFiles => "uring+rf",
            Col::UringRegBufs => "uring+rb",
            Col::UringSqpoll => "uring+sqp",
            Col::UringIopoll => "uring+iop",
            Col::Posix => "posix",
            Col::UringCmd => "uring_cmd",
            Col::UringCmdSqpoll => "ucmd+sqp",
            Col::UringCmdIopoll => "ucmd+iop",
            Col::Nil => "nil",
            Col::Mmap => "mmap",
            Col::Pmem => "pmem",
            Col::PmemPopulate => "pmem+pop",
            Col::Vfio => "vfio",
        }
    }

    /// The option string naming this column's interfaces. Sync columns pair the sync
    /// interface with `emu`, so they do not depend on the state of any async backend.
    pub(crate) fn opts(self) -> &'static str {
        match self {
            Col::Psync => "sync=psync,async=emu",
            Col::Block => "sync=block,async=emu",
            Col::Ram => "sync=ramdisk,async=emu",
            Col::Nvme => "sync=nvme,async=emu",
            Col::Emu => "async=emu",
            Col::Thrpool => "async=thrpool",
            Col::Libaio => "async=libaio",
            Col::Uring => "async=io_uring",
            Col::UringRegFiles => "async=io_uring,register_files=1",
            Col::UringRegBufs => "async=io_uring,register_buffers=1",
            Col::UringSqpoll => "async=io_uring,sqpoll=1",
            Col::UringIopoll => "async=io_uring,iopoll=1",
            Col::Posix => "async=posix",
            Col::UringCmd => "async=io_uring_cmd",
            Col::UringCmdSqpoll => "async=io_uring_cmd,sqpoll=1",
            Col::UringCmdIopoll => "async=io_uring_cmd,iopoll=1",
            Col::Nil => "async=nil",
            Col::Mmap => "sync=mmap,async=emu",
            Col::Pmem => "sync=pmem,async=emu",
            Col::PmemPopulate => "sync=pmem,async=emu,pmem_populate=1",
            // The sync interface of a PCI device defaults to vfio too.
            Col::Vfio => "async=vfio",
        }
    }

    pub(crate) fn sync(self) -> Option<SyncIface> {
        match self {
            Col::Psync => Some(SyncIface::Psync),
            Col::Block => Some(SyncIface::Block),
            Col::Ram => Some(SyncIface::Ramdisk),
            Col::Nvme => Some(SyncIface::Nvme),
            Col::Mmap => Some(SyncIface::Mmap),
            Col::Pmem | Col::PmemPopulate => Some(SyncIface::Pmem),
            _ => None,
        }
    }

    pub(crate) fn async_iface(self) -> AsyncIface {
        match self {
            Col::Psync | Col::Block | Col::Ram | Col::Nvme | Col::Mmap | Col::Pmem | Col::PmemPopulate | Col::Emu => {
                AsyncIface::Emu
            }
            Col::Thrpool => AsyncIface::Thrpool,
            Col::Libaio => AsyncIface::Libaio,
            Col::Uring | Col::UringRegFiles | Col::UringRegBufs | Col::UringSqpoll | Col::UringIopoll => {
                AsyncIface::IoUring
            }
            Col::Posix => AsyncIface::Posix,
            Col::UringCmd | Col::UringCmdSqpoll | Col::UringCmdIopoll => AsyncIface::IoUringCmd,
            Col::Nil => AsyncIface::Nil,
            Col::Vfio => AsyncIface::Vfio,
        }
    }

    pub(crate) fn sqpoll(self) -> bool {
        matches!(self, Col::UringSqpoll | Col::UringCmdSqpoll)
    }

    pub(crate) fn iopoll(self) -> bool {
        matches!(self, Col::UringIopoll | Col::UringCmdIopoll)
    }

    /// The `role=name` of the interface itself (what the selection table refuses).
    pub(crate) fn refusal_key(self) -> String {
        match self.sync() {
            Some(s) => format!("sync={s}"),
            None => format!("async={}", self.async_iface()),
        }
    }

    /// Whether (and naming what) opening this column's interfaces on this kind of device
    /// must be refused: the selection table as DESIGN.md describes it, plus the tunables
    /// that need something of the device (IOPOLL through the block layer needs
    /// direct=1). Written out here, not read from the library, so that a change in the
    /// library's table shows up as a failure. Returns the `iface` the `Unsupported` error
    /// must name.
    pub(crate) fn expected_refusal(self, kind: DevKind, direct: bool) -> Option<String> {
        use DevKind::*;
        // A PCI device is driven by vfio alone (and vfio drives nothing else, below).
        if kind == NvmePci {
            return (self != Col::Vfio).then(|| self.refusal_key());
        }
        let table = match self {
            Col::Psync => matches!(kind, Ramdisk | NvmeChar | DevDax),
            Col::Block => !matches!(kind, Block | NvmeBlock),
            Col::Ram => kind != Ramdisk,
            Col::Nvme => !matches!(kind, NvmeBlock | NvmeChar),
            Col::Mmap => !matches!(kind, File | Block | NvmeBlock),
            Col::Pmem | Col::PmemPopulate => !matches!(kind, File | DevDax),
            Col::Emu | Col::Thrpool | Col::Nil => false,
            Col::Libaio
            | Col::Uring
            | Col::UringRegFiles
            | Col::UringRegBufs
            | Col::UringSqpoll
            | Col::UringIopoll
            | Col::Posix => matches!(kind, Ramdisk | NvmeChar | DevDax),
            Col::UringCmd | Col::UringCmdSqpoll | Col::UringCmdIopoll => kind != NvmeChar,
            Col::Vfio => true,
        };
        if table {
            return Some(self.refusal_key());
        }
        if self == Col::UringIopoll && !direct {
            return Some("async=io_uring (iopoll=1)".into());
        }
        if matches!(self, Col::Pmem | Col::PmemPopulate) && direct {
            return Some(self.refusal_key());
        }
        None
    }

    /// What this column needs beyond the table on a row: `pmem` (also with
    /// `pmem_populate=1`) on a file that is not on a DAX file system is refused at open
    /// (MAP_SYNC refused) unless `pmem_force=1`, which the /dev/shm row gives it. Returns
    /// (extra options, the `iface` a refusal must name).
    pub(crate) fn row_specifics(self, row: RowKind, place: &Place) -> (&'static str, Option<String>) {
        if !matches!(self, Col::Pmem | Col::PmemPopulate) {
            return ("", None);
        }
        match (row, place) {
            (RowKind::Shm, _) => ("pmem_force=1", None),
            (RowKind::File, Place::Dir(d)) if !mounted_dax(d) => ("", Some(self.refusal_key())),
            _ => ("", None),
        }
    }
}

/// Whether the file system holding `dir` is mounted with `dax` (read from
/// /proc/self/mountinfo, independently of the library): the longest mount point that
/// contains the directory decides.
pub(crate) fn mounted_dax(dir: &Path) -> bool {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut best: Option<(usize, bool)> = None;
    for l in info.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(mp), Some(mopts)) = (f.get(4), f.get(5)) else { continue };
        let sep = f.iter().position(|x| *x == "-").unwrap_or(f.len());
        let super_opts = f.get(sep + 3).copied().unwrap_or("");
        if dir.starts_with(mp) && best.is_none_or(|(n, _)| mp.len() >= n) {
            let dax = mopts.split(',').chain(super_opts.split(',')).any(|o| o == "dax" || o == "dax=always");
            best = Some((mp.len(), dax));
        }
    }
    best.is_some_and(|(_, d)| d)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowKind {
    File,
    FileDirect,
    Shm,
    Loop,
    LoopDirect,
    Ram,
    /// An NVMe namespace's block device, /dev/nvmeXnY, buffered.
    NvmeBlock,
    /// The same with direct=1.
    NvmeBlockDirect,
    /// An NVMe namespace's generic char device, /dev/ngXnY (passthrough never caches).
    NvmeChar,
    /// A zoned namespace's block device, direct=1 (zoned writes bypass the page cache).
    ZnsBlockDirect,
    /// A zoned namespace's generic char device.
    ZnsChar,
    /// A directory on a file system mounted with DAX (ext4 `-o dax`), from
    /// `IOSWITCH_PMEM_DIR`.
    PmemFsdax,
    /// A devdax character device (`/dev/daxX.Y`), from `IOSWITCH_PMEM_DEVDAX`.
    PmemDevdax,
    /// A conventional namespace of an NVMe controller bound to vfio-pci, by its PCI
    /// address (`IOSWITCH_VFIO_PCI`) and `nsid=`.
    Pci,
    /// A zoned namespace of that controller.
    PciZoned,
}

impl RowKind {
    pub(crate) const ALL: [RowKind; 6] =
        [RowKind::File, RowKind::FileDirect, RowKind::Shm, RowKind::Loop, RowKind::LoopDirect, RowKind::Ram];

    pub(crate) fn dev_kind(self) -> DevKind {
        match self {
            RowKind::File | RowKind::FileDirect | RowKind::Shm | RowKind::PmemFsdax => DevKind::File,
            RowKind::PmemDevdax => DevKind::DevDax,
            RowKind::Loop | RowKind::LoopDirect => DevKind::Block,
            RowKind::Ram => DevKind::Ramdisk,
            RowKind::NvmeBlock | RowKind::NvmeBlockDirect | RowKind::ZnsBlockDirect => DevKind::NvmeBlock,
            RowKind::NvmeChar | RowKind::ZnsChar => DevKind::NvmeChar,
            RowKind::Pci | RowKind::PciZoned => DevKind::NvmePci,
        }
    }
    pub(crate) fn direct(self) -> bool {
        matches!(self, RowKind::FileDirect | RowKind::LoopDirect | RowKind::NvmeBlockDirect | RowKind::ZnsBlockDirect)
    }
    pub(crate) fn zoned(self) -> bool {
        matches!(self, RowKind::ZnsBlockDirect | RowKind::ZnsChar | RowKind::PciZoned)
    }
    pub(crate) fn nvme(self) -> bool {
        matches!(self.dev_kind(), DevKind::NvmeBlock | DevKind::NvmeChar | DevKind::NvmePci)
    }
    /// The columns of this row.
    pub(crate) fn cols(self) -> &'static [Col] {
        if self.zoned() {
            &Col::ZONED
        } else if self.nvme() {
            &Col::NVME
        } else {
            &Col::ALL
        }
    }
    pub(crate) fn tag(self) -> &'static str {
        match self {
            RowKind::File => "file",
            RowKind::FileDirect => "file-direct",
            RowKind::Shm => "shm",
            RowKind::Loop => "loop",
            RowKind::LoopDirect => "loop-direct",
            RowKind::Ram => "ramdisk",
            RowKind::NvmeBlock => "nvme-block",
            RowKind::NvmeBlockDirect => "nvme-block-direct",
            RowKind::NvmeChar => "nvme-char",
            RowKind::ZnsBlockDirect => "zns-block-direct",
            RowKind::ZnsChar => "zns-char",
            RowKind::PmemFsdax => "pmem-fsdax",
            RowKind::PmemDevdax => "pmem-devdax",
            RowKind::Pci => "pci",
            RowKind::PciZoned => "pci-zoned",
        }
    }
    /// The persistent-memory rows.
    pub(crate) fn pmem(self) -> bool {
        matches!(self, RowKind::PmemFsdax | RowKind::PmemDevdax)
    }
}

/// What deallocated (trimmed, reset) blocks read back as.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dealloc {
    /// All bytes 0x00 (files and loop devices: punched holes; NVMe: DLFEAT bits 2:0 = 001b).
    Zeroes,
    /// All bytes 0xFF (NVMe: DLFEAT bits 2:0 = 010b).
    Ones,
    /// The device does not say (DLFEAT bits 2:0 = 000b): only the commands' success and
    /// the blocks around them are checked.
    Unknown(String),
    /// DLFEAT could not be read (Identify Namespace failed): the trim cases fail, since
    /// what deallocated blocks read back as would go unchecked for no reason the device gave.
    Unreadable(String),
}

impl Dealloc {
    pub(crate) fn from_dlfeat(dlfeat: u8) -> Dealloc {
        match dlfeat & 7 {
            1 => Dealloc::Zeroes,
            2 => Dealloc::Ones,
            v => Dealloc::Unknown(format!("DLFEAT {dlfeat:#04x}: bits 2:0 = {v:03b}, the read value is not reported")),
        }
    }
    pub(crate) fn byte(&self) -> Option<u8> {
        match self {
            Dealloc::Zeroes => Some(0),
            Dealloc::Ones => Some(0xFF),
            Dealloc::Unknown(_) | Dealloc::Unreadable(_) => None,
        }
    }
}

/// An NVMe namespace found through /sys/block/*/nsid.
#[derive(Clone, Debug)]
pub(crate) struct NvmeNs {
    pub(crate) nsid: u32,
    /// /dev/nvmeXnY
    pub(crate) block: PathBuf,
    /// /dev/ngXnY, when one serves the same namespace.
    pub(crate) char_dev: Result<PathBuf, String>,
    /// The controller (nvme0), from the block device's sysfs `device` link.
    pub(crate) ctrl: String,
    /// From sysfs: logical block size, bytes, zone size in LBAs and zone count.
    pub(crate) lba: u64,
    pub(crate) bytes: u64,
    pub(crate) zone_lbas: u64,
    pub(crate) nr_zones: u64,
    /// From Identify Namespace (DLFEAT), read through the library's admin passthrough.
    pub(crate) dealloc: Result<Dealloc, String>,
}

/// Where a row's devices live.
#[derive(Clone)]
pub(crate) enum Place {
    /// A directory: each cell makes a fresh file there.
    Dir(PathBuf),
    /// A loop device over a backing file (shared by the two loop rows).
    Loop { dev: PathBuf, backing: PathBuf },
    /// A ramdisk.
    Ram,
    /// An NVMe namespace device (block or char).
    Nvme { dev: PathBuf, ns: Box<NvmeNs> },
    /// A devdax character device (no read/write: no oracle beside the library).
    DevDax(PathBuf),
    /// A namespace of a PCI controller bound to vfio-pci (no kernel device: no oracle
    /// beside the library).
    Pci { addr: String, ns: Box<NvmeNs> },
}

pub(crate) struct Row {
    pub(crate) kind: RowKind,
    pub(crate) label: String,
    pub(crate) place: Result<Place, String>,
}

// ---------------------------------------------------------------------------------------
// Setting up the rows
// ---------------------------------------------------------------------------------------

/// The environment variable that lets the NVMe rows run outside the test guest: they
/// write over the namespaces, so they run only on a throw-away device.
pub(crate) const NVME_ENV: &str = "IOSWITCH_CONFORMANCE_NVME";

pub(crate) fn sysfs_u64(p: &Path) -> Result<u64, String> {
    let t = fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    t.trim().parse().map_err(|_| format!("{}: {:?} is not a number", p.display(), t.trim()))
}

/// Deallocated-block behaviour of a namespace, from Identify Namespace DLFEAT (read
/// through the library's admin passthrough on its block device).
pub(crate) fn read_dlfeat(block: &Path, nsid: u32) -> Result<Dealloc, String> {
    let uri = block.display().to_string();
    let d = Device::open(&uri, &Opts::default()).map_err(|e| format!("open {uri}: {e}"))?;
    let mut page = d.alloc(IDENTIFY_LEN).map_err(|e| format!("alloc: {e}"))?;
    d.pass_admin(&Cmd::identify(cns::NS, nsid, 0, 0), std::slice::from_mut(&mut page))
        .map_err(|e| format!("Identify Namespace {nsid}: {e}"))?;
    let id = IdNs::from_bytes(&page).map_err(|e| format!("Identify Namespace {nsid}: {e:?}"))?;
    Ok(Dealloc::from_dlfeat(id.dlfeat))
}

/// The NVMe namespaces of this machine, found through /sys/block/*/nsid (names are not
/// relied on), or why there are none to test.
pub(crate) fn find_nvme() -> Result<Vec<NvmeNs>, String> {
    let guest = std::env::var_os("IOSWITCH_VM").is_some_and(|v| v == "1");
    let asked = std::env::var_os(NVME_ENV).is_some_and(|v| v == "1");
    let dir = fs::read_dir("/sys/block").map_err(|e| format!("/sys/block: {e}"))?;
    let mut found = Vec::new();
    for e in dir.flatten() {
        let sys = e.path();
        let Ok(nsid) = sysfs_u64(&sys.join("nsid")) else { continue };
        let disk = e.file_name().to_string_lossy().into_owned();
        let ctrl = fs::read_link(sys.join("device"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "?".into());
        let lba = sysfs_u64(&sys.join("queue/logical_block_size"))?;
        let bytes = sysfs_u64(&sys.join("size"))? * 512;
        let zoned = fs::read_to_string(sys.join("queue/zoned")).unwrap_or_default().trim().to_string();
        let (zone_lbas, nr_zones) = if zoned == "none" || zoned.is_empty() {
            (0, 0)
        } else {
            (sysfs_u64(&sys.join("queue/chunk_sectors"))? * 512 / lba, sysfs_u64(&sys.join("queue/nr_zones"))?)
        };
        let block = PathBuf::from("/dev").join(&disk);
        // The generic char device carries the disk's instance numbers: nvmeXnY -> ngXnY
        // (checked: the library's ident().nsid must match sysfs, in every cell's open).
        let char_dev = match disk.strip_prefix("nvme") {
            Some(rest) if Path::new("/dev").join(format!("ng{rest}")).exists() => {
                Ok(Path::new("/dev").join(format!("ng{rest}")))
            }
            _ => Err(format!("no generic char device for {disk} (/dev/ng*)")),
        };
        found.push(NvmeNs {
            nsid: nsid as u32,
            dealloc: Err(String::new()),
            block,
            char_dev,
            ctrl,
            lba,
            bytes,
            zone_lbas,
            nr_zones,
        });
    }
    ensure!(!found.is_empty(), "no NVMe namespace on this machine (no /sys/block/*/nsid); run tests/vm/nvme-tests.sh");
    ensure!(
        guest || asked,
        "{} NVMe namespace(s) here, but these rows write over them: they run only in the test guest \
         (IOSWITCH_VM=1, tests/vm/nvme-tests.sh) or with {NVME_ENV}=1 on a throw-away device",
        found.len()
    );
    found.sort_by(|a, b| (&a.ctrl, a.nsid).cmp(&(&b.ctrl, b.nsid)));
    for ns in &mut found {
        ns.dealloc = read_dlfeat(&ns.block, ns.nsid);
    }
    Ok(found)
}

/// Rows of the NVMe namespaces: conventional ones as block (buffered and direct=1) and
/// char rows, zoned ones as block (direct=1) and char rows.
pub(crate) fn nvme_rows(found: &[NvmeNs]) -> Vec<Row> {
    let mut rows = Vec::new();
    for ns in found {
        let kinds: &[RowKind] = if ns.nr_zones > 0 {
            &[RowKind::ZnsBlockDirect, RowKind::ZnsChar]
        } else {
            &[RowKind::NvmeBlock, RowKind::NvmeBlockDirect, RowKind::NvmeChar]
        };
        let name = if ns.nr_zones > 0 { format!("nvme ns{} zoned", ns.nsid) } else { format!("nvme ns{}", ns.nsid) };
        for &kind in kinds {
            let (label, dev) = match kind {
                RowKind::NvmeBlock => (format!("{name} (block)"), Ok(ns.block.clone())),
                RowKind::NvmeBlockDirect | RowKind::ZnsBlockDirect => {
                    (format!("{name} (block) direct"), Ok(ns.block.clone()))
                }
                _ => (format!("{name} (char)"), ns.char_dev.clone()),
            };
            let place = dev.map(|dev| Place::Nvme { dev, ns: Box::new(ns.clone()) });
            rows.push(Row { kind, label, place });
        }
    }
    rows
}

/// The PCI address of an NVMe controller bound to vfio-pci (the `--iommu` guest's
/// 0000:00:05.0, which tests/vm/vfio-driver-tests.sh binds): the PCI rows run on it.
pub(crate) const VFIO_PCI_ENV: &str = "IOSWITCH_VFIO_PCI";
/// Its namespaces as the kernel's nvme driver saw them before the controller was bound
/// to vfio-pci (sysfs and nvme-cli, read by the script, not by the library): space-separated
/// `nsid:lba_bytes:bytes:zone_lbas:nr_zones:dlfeat` (zone fields 0 when conventional).
pub(crate) const VFIO_NS_ENV: &str = "IOSWITCH_VFIO_NS";
/// `uio` when the controller is bound to uio_pci_generic instead (the `--pci` guest,
/// tests/vm/uio-driver-tests.sh): the PCI rows then open it with `dma=uio`.
pub(crate) const VFIO_DMA_ENV: &str = "IOSWITCH_VFIO_DMA";

/// The options the PCI rows add for `IOSWITCH_VFIO_DMA` (`,dma=uio`, or nothing).
pub(crate) fn pci_dma_opt() -> String {
    match std::env::var(VFIO_DMA_ENV) {
        Ok(m) if !m.is_empty() => format!(",dma={m}"),
        _ => String::new(),
    }
}

/// Whether this is the test guest (`IOSWITCH_VM=1`), where a skip is a failure.
pub(crate) fn guest() -> bool {
    std::env::var_os("IOSWITCH_VM").is_some_and(|v| v == "1")
}

/// Parses one namespace of `IOSWITCH_VFIO_NS`.
fn parse_vfio_ns(addr: &str, item: &str) -> Result<NvmeNs, String> {
    let f: Vec<&str> = item.split(':').collect();
    let num = |i: usize, what: &str| -> Result<u64, String> {
        let t = f.get(i).ok_or_else(|| format!("{VFIO_NS_ENV}: {item:?} has no {what} (field {})", i + 1))?;
        t.parse().map_err(|_| format!("{VFIO_NS_ENV}: {item:?}: {what} {t:?} is not a number"))
    };
    ensure!(f.len() == 6, "{VFIO_NS_ENV}: {item:?} is not nsid:lba_bytes:bytes:zone_lbas:nr_zones:dlfeat");
    let nsid = u32::try_from(num(0, "nsid")?).map_err(|_| format!("{VFIO_NS_ENV}: {item:?}: nsid too large"))?;
    let dlfeat = u8::try_from(num(5, "dlfeat")?).map_err(|_| format!("{VFIO_NS_ENV}: {item:?}: dlfeat too large"))?;
    Ok(NvmeNs {
        nsid,
        block: PathBuf::new(),
        char_dev: Err(format!("{addr} is bound to vfio-pci: no kernel device")),
        ctrl: addr.to_string(),
        lba: num(1, "LBA size")?,
        bytes: num(2, "size")?,
        zone_lbas: num(3, "zone size")?,
        nr_zones: num(4, "zone count")?,
        dealloc: Ok(Dealloc::from_dlfeat(dlfeat)),
    })
}

/// The rows of the namespaces of the controller named by `IOSWITCH_VFIO_PCI` (one row
/// per namespace of `IOSWITCH_VFIO_NS`, conventional or zoned), or one row that says why
/// there are none (a skip on the host; in the guest a skip fails the run).
pub(crate) fn pci_rows() -> Vec<Row> {
    let missing = |why: String| vec![Row { kind: RowKind::Pci, label: "nvme pci (vfio)".into(), place: Err(why) }];
    let unset = "is not set (an NVMe controller bound to vfio-pci; tests/vm/vfio-driver-tests.sh sets it)";
    let addr = match std::env::var(VFIO_PCI_ENV) {
        Ok(a) if !a.is_empty() => a,
        _ => return missing(format!("{VFIO_PCI_ENV} {unset}")),
    };
    let list = std::env::var(VFIO_NS_ENV).unwrap_or_default();
    if list.trim().is_empty() {
        return missing(format!("{VFIO_PCI_ENV}={addr}, but {VFIO_NS_ENV} (its namespaces' geometry) is not set"));
    }
    let mut rows = Vec::new();
    for item in list.split_whitespace() {
        match parse_vfio_ns(&addr, item) {
            Err(why) => rows.push(Row { kind: RowKind::Pci, label: format!("{addr} ({item})"), place: Err(why) }),
            Ok(ns) => {
                let (kind, label) = if ns.nr_zones > 0 {
                    (RowKind::PciZoned, format!("{addr} ns{} zoned", ns.nsid))
                } else {
                    (RowKind::Pci, format!("{addr} ns{}", ns.nsid))
                };
                rows.push(Row { kind, label, place: Ok(Place::Pci { addr: addr.clone(), ns: Box::new(ns) }) });
            }
        }
    }
    rows
}

/// Set (to 1) by the guest stage that provides the persistent-memory rows: then a
/// missing row is a failure, not a skip.
pub(crate) const PMEM_ENV: &str = "IOSWITCH_PMEM";
/// A directory on ext4 mounted `-o dax`.
pub(crate) const PMEM_DIR_ENV: &str = "IOSWITCH_PMEM_DIR";
/// A devdax device, `/dev/daxX.Y`.
pub(crate) const PMEM_DEVDAX_ENV: &str = "IOSWITCH_PMEM_DEVDAX";

/// Whether a missing persistent-memory row fails the run (the guest with IOSWITCH_PMEM=1).
pub(crate) fn pmem_required() -> bool {
    let on = |k: &str| std::env::var_os(k).is_some_and(|v| v == "1");
    on("IOSWITCH_VM") && on(PMEM_ENV)
}

/// The persistent-memory rows: an fsdax directory and a devdax device, from the
/// environment (the guest's pmem stage sets them), or why they are absent.
pub(crate) fn pmem_rows() -> Vec<Row> {
    let dir = match std::env::var_os(PMEM_DIR_ENV) {
        None => Err(format!(
            "{PMEM_DIR_ENV} is not set (a directory on ext4 mounted -o dax; the guest's pmem stage sets it)"
        )),
        Some(d) => {
            let d = PathBuf::from(d);
            if !d.is_dir() {
                Err(format!("{PMEM_DIR_ENV}={} is not a directory", d.display()))
            } else if !mounted_dax(&d) {
                Err(format!(
                    "{PMEM_DIR_ENV}={} is not on a file system mounted with dax (/proc/self/mountinfo)",
                    d.display()
                ))
            } else {
                Ok(Place::Dir(d))
            }
        }
    };
    let devdax = match std::env::var_os(PMEM_DEVDAX_ENV) {
        None => Err(format!("{PMEM_DEVDAX_ENV} is not set (a /dev/daxX.Y device; the guest's pmem stage sets it)")),
        Some(d) => {
            let d = PathBuf::from(d);
            use std::os::unix::fs::FileTypeExt;
            match fs::metadata(&d) {
                Ok(m) if m.file_type().is_char_device() => Ok(Place::DevDax(d)),
                Ok(_) => Err(format!("{PMEM_DEVDAX_ENV}={} is not a character device", d.display())),
                Err(e) => Err(format!("{PMEM_DEVDAX_ENV}={}: {e}", d.display())),
            }
        }
    };
    let dir_label = match &dir {
        Ok(Place::Dir(d)) => format!("pmem fsdax ({})", d.display()),
        _ => "pmem fsdax".into(),
    };
    let dax_label = match &devdax {
        Ok(Place::DevDax(d)) => format!("pmem devdax ({})", d.display()),
        _ => "pmem devdax".into(),
    };
    vec![
        Row { kind: RowKind::PmemFsdax, label: dir_label, place: dir },
        Row { kind: RowKind::PmemDevdax, label: dax_label, place: devdax },
    ]
}

/// A devdax device's size from sysfs (the dax bus, else the dax class); 0 when sysfs does
/// not say (the open case then fails on the size).
pub(crate) fn devdax_size(dev: &Path) -> u64 {
    let name = dev.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    ["/sys/bus/dax/devices", "/sys/class/dax"]
        .iter()
        .find_map(|d| sysfs_u64(&Path::new(d).join(&name).join("size")).ok())
        .unwrap_or(0)
}

pub(crate) fn setup_rows() -> (Vec<Row>, Option<LoopDev>) {
    let disk = disk_dir(&[PathBuf::from(env!("CARGO_TARGET_TMPDIR")), std::env::temp_dir()], PREFIX);
    let mut loopdev = None;
    let loop_place: Result<Place, String> = match &disk {
        Err(e) => Err(e.clone()),
        Ok((dir, _)) => LoopDev::setup(dir, PREFIX, DEV_BYTES).map(|l| {
            let p = Place::Loop { dev: l.dev.clone(), backing: l.backing.clone() };
            loopdev = Some(l);
            p
        }),
    };
    let loop_name = match &loop_place {
        Ok(Place::Loop { dev, .. }) => dev.display().to_string(),
        _ => "loop".into(),
    };
    let mut rows = Vec::new();
    for kind in RowKind::ALL {
        let (label, place) = match kind {
            RowKind::File => match &disk {
                Ok((d, t)) => (format!("file ({t})"), Ok(Place::Dir(d.clone()))),
                Err(e) => ("file (disk)".into(), Err(e.clone())),
            },
            RowKind::FileDirect => match &disk {
                Ok((d, t)) => (format!("file ({t}) direct"), direct_works(d, PREFIX).map(|_| Place::Dir(d.clone()))),
                Err(e) => ("file (disk) direct".into(), Err(e.clone())),
            },
            RowKind::Shm => {
                let d = PathBuf::from("/dev/shm");
                let place = match fs_type(&d) {
                    Some(t) if is_mem_fs(&t) => Ok(Place::Dir(d)),
                    Some(t) => Err(format!("/dev/shm is {t}, not tmpfs")),
                    None => Err("/dev/shm does not exist".into()),
                };
                ("file (/dev/shm tmpfs)".into(), place)
            }
            RowKind::Loop => (format!("{loop_name} (block)"), loop_place.clone()),
            RowKind::LoopDirect => (format!("{loop_name} direct"), loop_place.clone()),
            RowKind::Ram => (format!("ramdisk {RAMDISK_URI}"), Ok(Place::Ram)),
            // Not in RowKind::ALL: the NVMe rows come from nvme_rows().
            _ => continue,
        };
        rows.push(Row { kind, label, place });
    }
    (rows, loopdev)
}

impl NvmeNs {
    /// One line for the start of the report: devices, LBA size, size, zones, DLFEAT.
    pub(crate) fn describe(&self) -> String {
        let dealloc = match &self.dealloc {
            Ok(Dealloc::Zeroes) => "DLFEAT: deallocated blocks read 0x00 (checked)".to_string(),
            Ok(Dealloc::Ones) => "DLFEAT: deallocated blocks read 0xFF (checked)".to_string(),
            Ok(Dealloc::Unknown(w)) => format!("{w} (not checked)"),
            Ok(Dealloc::Unreadable(e)) | Err(e) => format!("DLFEAT unreadable: {e} (the trim cases fail)"),
        };
        let zones = if self.nr_zones > 0 {
            format!(", zoned: {} zones of {} KiB", self.nr_zones, self.zone_lbas * self.lba / KIB)
        } else {
            String::new()
        };
        let chr = match &self.char_dev {
            Ok(c) => c.display().to_string(),
            Err(e) => e.clone(),
        };
        format!(
            "NVMe: {} nsid {}: {} + {chr}, {} B LBAs, {} MiB{zones}; {dealloc}",
            self.ctrl,
            self.nsid,
            self.block.display(),
            self.lba,
            self.bytes >> 20
        )
    }
}
