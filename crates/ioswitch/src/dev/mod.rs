//! Devices: opening, kinds, geometry, identity, and enumeration.

mod bind;
mod enumerate;
mod geometry;
pub(crate) mod guard;
pub(crate) mod open;
mod pmem;

pub use bind::{bind_driver, Binding, PciDriver};
pub use enumerate::{enumerate, enumerate_pci, Listing, PciController};
pub use pmem::{Dax, PmemSlice};

use crate::be::{self, os_error as os, AdminIo, Role, SyncIo};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::error::{Error, Result};
use crate::opts::{AdminIface, AsyncIface, MemIface, Opts, SyncIface};
use crate::queue::Queue;
use crate::uri::{self, Target};
use serde::Serialize;
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;

/// What kind of thing a device URI names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DevKind {
    /// A regular file.
    File,
    /// A block device that is not an NVMe namespace (virtio, loop, SCSI, …).
    Block,
    /// An NVMe namespace block device, `/dev/nvmeXnY`.
    NvmeBlock,
    /// An NVMe namespace generic char device, `/dev/ngXnY`.
    NvmeChar,
    /// An NVMe controller char device, `/dev/nvmeX`.
    NvmeCtrl,
    /// Memory given by a size.
    Ramdisk,
    /// A device-DAX character device, `/dev/daxX.Y`: persistent memory that is only
    /// mapped (no read/write system calls).
    DevDax,
    /// A namespace of an NVMe controller given by its PCI address, driven by the
    /// user-space driver (`vfio`).
    NvmePci,
}

impl DevKind {
    /// Every kind: those a kernel driver serves, then `NvmePci`.
    pub const ALL: [DevKind; 8] = [
        DevKind::File,
        DevKind::Block,
        DevKind::NvmeBlock,
        DevKind::NvmeChar,
        DevKind::NvmeCtrl,
        DevKind::Ramdisk,
        DevKind::DevDax,
        DevKind::NvmePci,
    ];
    /// The kinds a kernel driver serves: every kind but `NvmePci`.
    pub(crate) const KERNEL: &'static [DevKind] = DevKind::ALL.split_at(7).0;

    /// The name used in output and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            DevKind::File => "file",
            DevKind::Block => "block device",
            DevKind::NvmeBlock => "NVMe namespace block device",
            DevKind::NvmeChar => "NVMe generic char device",
            DevKind::NvmeCtrl => "NVMe controller",
            DevKind::Ramdisk => "ramdisk",
            DevKind::DevDax => "devdax character device",
            DevKind::NvmePci => "NVMe PCI device",
        }
    }
}

impl fmt::Display for DevKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Zoned block device model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZonedModel {
    /// Not zoned.
    None,
    /// Host-managed: writes must be sequential within a zone.
    HostManaged,
    /// Host-aware: sequential writes preferred.
    HostAware,
}

impl ZonedModel {
    /// The model a disk's sysfs `queue/zoned` attribute names.
    pub(crate) fn from_sysfs(zoned: Option<&str>) -> ZonedModel {
        match zoned {
            Some("host-managed") => ZonedModel::HostManaged,
            Some("host-aware") => ZonedModel::HostAware,
            _ => ZonedModel::None,
        }
    }
}

/// Zone layout of a zoned device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Zoned {
    /// Zone size in LBAs.
    pub zone_size: u64,
    /// Writable LBAs per zone (≤ zone size); equal to the size when the device does not
    /// report a capacity.
    pub zone_capacity: u64,
    /// Number of zones.
    pub nr_zones: u64,
    /// Most zones open at once (0: no limit).
    pub max_open: u32,
    /// Most zones active at once (0: no limit).
    pub max_active: u32,
}

/// Where the data is and how it may be addressed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Geometry {
    /// Logical block size in bytes (emulated as 512, or the direct-I/O granularity, for
    /// files).
    pub lba_size: u32,
    /// Number of logical blocks.
    pub nlbas: u64,
    /// Size in bytes (a file's tail beyond its last whole LBA is reachable with file-set
    /// commands only).
    pub bytes: u64,
    /// Largest transfer one command may carry, in bytes (65536 LBAs for devices the
    /// kernel serves: what one NVM command can express; the kernel splits further).
    pub max_transfer: u64,
    /// Alignment of buffer addresses that direct I/O needs.
    pub dio_mem_align: u32,
    /// Alignment of offsets and lengths that direct I/O needs.
    pub dio_offset_align: u32,
    /// Zoned model.
    pub zoned: ZonedModel,
    /// Zone layout when zoned.
    pub zones: Option<Zoned>,
}

/// Who the device is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ident {
    /// The URI it was opened with.
    pub uri: String,
    /// Its path (canonical), when it has one.
    pub path: Option<PathBuf>,
    /// Its kind.
    pub kind: DevKind,
    /// Namespace id (1 for devices that are not NVMe).
    pub nsid: u32,
    /// The kernel driver behind it (`nvme`, `virtio_blk`, `loop`), or the file system
    /// type for files (`ext4`, `tmpfs`).
    pub driver: Option<String>,
    /// For a file: the block device holding it (`vda`); for a block device: its name.
    pub block_name: Option<String>,
    /// Model string, when the device reports one.
    pub model: Option<String>,
    /// Serial number, when the device reports one.
    pub serial: Option<String>,
    /// Why commands that may write are refused: the device, a partition of it or its
    /// disk is mounted, swapped on or held by another kernel user (device-mapper, md), in
    /// words (`"/dev/loop0p1 is mounted on /mnt (ext4)"`). Taken at open; `None` when
    /// nothing uses it, for files and ramdisks, with `rdonly=1`, and with
    /// `allow_mounted_write=1`.
    pub in_use: Option<String>,
    /// For persistent memory (a devdax device, or a file on a DAX file system): the
    /// namespace's mode, alignment and size.
    pub dax: Option<Dax>,
}

/// The interfaces serving an open device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Interfaces {
    /// Synchronous interface.
    pub sync: Option<SyncIface>,
    /// Asynchronous interface.
    pub r#async: Option<AsyncIface>,
    /// Admin interface.
    pub admin: AdminIface,
    /// Memory interface.
    pub mem: MemIface,
}

pub(crate) struct Inner {
    pub uri: String,
    pub ident: Ident,
    pub geo: Geometry,
    pub ifaces: Interfaces,
    pub opts: Opts,
    pub fd: Option<OwnedFd>,
    pub sync: Option<Box<dyn SyncIo>>,
    pub admin: Option<Box<dyn AdminIo>>,
    /// The user-space driver's controller, for a PCI device.
    pub vfio: Option<Arc<be::vfio::ctrl::Ctrl>>,
}

impl Inner {
    pub(crate) fn unsupported(&self, iface: &str, why: &str) -> Error {
        Error::Unsupported { dev: self.uri.clone(), kind: self.ident.kind, iface: iface.into(), why: why.into() }
    }
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1)
    }
    pub(crate) fn sync(&self) -> Option<&dyn SyncIo> {
        self.sync.as_deref()
    }
}

/// An open device. Cheap to clone; clones share the open file and may be used from
/// several threads, each with its own [`Queue`].
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<Inner>,
    /// What the fast check of a read or write needs, copied out of `inner` at open.
    pub(crate) lim: be::Limits,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device").field("uri", &self.inner.uri).field("kind", &self.inner.ident.kind).finish()
    }
}

impl Device {
    /// Opens a device: a path (file, block device, NVMe device) or a ramdisk size.
    ///
    /// Interfaces not named in `opts` get the default for the device kind; a named
    /// interface that cannot serve this kind of device fails here, with the device, its
    /// kind, the interface and the reason in the error.
    pub fn open(uri: &str, opts: &Opts) -> Result<Device> {
        opts.validate()?;
        let target = uri::parse(uri)?;
        let mut vfio = None;
        let (kind, fd, geo, ident) = match target {
            Target::Ramdisk(bytes) => open::open_ramdisk(uri, bytes, opts)?,
            Target::Path(p) => open::open_path(uri, &p, opts)?,
            Target::Pci(addr) => {
                let (ctrl, opened) = open::open_pci(uri, &addr.to_string(), opts)?;
                vfio = Some(ctrl);
                opened
            }
        };
        let ifaces = Interfaces {
            sync: opts.sync.or_else(|| default_iface(Role::Sync, kind)),
            r#async: opts.r#async.or_else(|| default_iface(Role::Async, kind)),
            admin: opts.admin.or_else(|| default_iface(Role::Admin, kind)).unwrap_or(AdminIface::Emulated),
            mem: opts.mem.or_else(|| default_iface(Role::Mem, kind)).unwrap_or(MemIface::Posix),
        };
        let mut inner =
            Inner { uri: uri.to_string(), ident, geo, ifaces, opts: opts.clone(), fd, sync: None, admin: None, vfio };
        if let Some(s) = ifaces.sync {
            refuse_unfit(&inner, Role::Sync, s.as_str())?;
            inner.sync = Some(be::new_sync(&inner, s)?);
        }
        if let Some(a) = ifaces.r#async {
            refuse_unfit(&inner, Role::Async, a.as_str())?;
            if matches!(a, AsyncIface::Emu | AsyncIface::Thrpool) && inner.sync.is_none() {
                return Err(
                    inner.unsupported(&format!("async={a}"), "it runs the sync interface, and this device has none")
                );
            }
            be::probe_async(&inner, a)?;
        }
        refuse_unfit(&inner, Role::Admin, ifaces.admin.as_str())?;
        refuse_unfit(&inner, Role::Mem, ifaces.mem.as_str())?;
        inner.admin = Some(be::new_admin(&inner, ifaces.admin)?);
        check_tunables(&inner)?;
        let lim = be::Limits::new(&inner);
        Ok(Device { inner: Arc::new(inner), lim })
    }

    /// The URI the device was opened with.
    pub fn uri(&self) -> &str {
        &self.inner.uri
    }
    /// Identity: kind, nsid, driver, …
    pub fn ident(&self) -> &Ident {
        &self.inner.ident
    }
    /// Geometry: LBA size and count, limits, zones.
    pub fn geometry(&self) -> &Geometry {
        &self.inner.geo
    }
    /// The interfaces serving this device.
    pub fn interfaces(&self) -> Interfaces {
        self.inner.ifaces
    }
    /// The open file descriptor the device's interfaces use, lent for the calls ioswitch
    /// does not make itself (`posix_fadvise`, `fcntl` write-life hints, an `ioctl`); `None`
    /// for a device without one (a ramdisk, a PCI address driven by `vfio`). The device
    /// keeps owning it: it stays open for as long as the borrow, and is closed with the
    /// last clone of the device.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.fd.as_ref().map(|f| f.as_fd())
    }
    /// The options the device was opened with.
    pub fn opts(&self) -> &Opts {
        &self.inner.opts
    }

    /// Allocates a zeroed buffer of `nbytes`, aligned for this device (its LBA size, its
    /// direct-I/O alignment and the page size).
    pub fn alloc(&self, nbytes: usize) -> Result<Buffer> {
        if let (MemIface::Vfio, Some(ctrl)) = (self.inner.ifaces.mem, &self.inner.vfio) {
            return ctrl
                .pool
                .buffer(nbytes)
                .map_err(|e| os(&self.inner.uri, format!("allocating a {nbytes}-byte DMA buffer"), e));
        }
        Buffer::alloc(nbytes, self.buffer_align()).map_err(|why| {
            os(
                &self.inner.uri,
                format!("allocating a {nbytes}-byte buffer"),
                io::Error::new(io::ErrorKind::OutOfMemory, why),
            )
        })
    }

    /// The alignment [`Device::alloc`] gives buffers.
    pub fn buffer_align(&self) -> usize {
        let g = &self.inner.geo;
        crate::sys::page_size().max(g.lba_size as usize).max(g.dio_mem_align as usize)
    }

    /// Runs an I/O command synchronously on the sync interface. `bufs` is the data
    /// (read into, or written from; several buffers make vectored I/O). Returns the
    /// command-specific result: bytes moved for data commands on files and block devices
    /// (a read or write that succeeds moved every byte; one that ends short, say at the
    /// end of a file that shrank, fails with EIO), completion DW0-1 for NVMe.
    #[inline(always)]
    pub fn pass(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64> {
        // A one-buffer read or write that passes the fast check goes straight to the
        // interface; everything else, refusals included, takes the full check.
        if let ([b], Some(sync)) = (&*bufs, self.inner.sync()) {
            if let Some(io) = be::fast_check_buf(&self.lim, cmd, b) {
                return match sync.exec(&io, cmd, bufs) {
                    Ok(v) => Ok(v),
                    Err(status) => Err(self.command_error(cmd, status)),
                };
            }
        }
        self.pass_slow(cmd, bufs)
    }

    #[inline(never)]
    fn pass_slow(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64> {
        let sync =
            self.inner.sync().ok_or_else(|| self.inner.unsupported("sync", "the device has no sync interface"))?;
        let io = be::prepare(&self.inner, cmd, bufs)?;
        if cmd.ioprio != 0 {
            return Err(be::prio_refused(&self.inner, None, &io, cmd).expect("a sync call carries no priority"));
        }
        sync.exec(&io, cmd, bufs).map_err(|status| self.command_error(cmd, status))
    }

    #[cold]
    #[inline(never)]
    fn command_error(&self, cmd: &Cmd, status: crate::spec::Status) -> Error {
        Error::Command { dev: self.inner.uri.clone(), what: cmd.describe(), status }
    }

    /// Runs an admin command (identify, get log page, get/set features, …) synchronously
    /// on the admin interface, with `bufs` as its data. Returns the completion's result
    /// (DW0-1). Devices that are not NVMe answer from emulated identify data. With
    /// `rdonly=1`, commands that may change data (format, sanitize, namespace management,
    /// firmware, vendor) are refused.
    pub fn pass_admin(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64> {
        let iface = self.inner.ifaces.admin;
        let admin = self.inner.admin.as_deref().ok_or_else(|| {
            self.inner.unsupported(&format!("admin={iface}"), "admin commands are not part of this build yet")
        })?;
        let refuse = |why: String| -> Result<u64> {
            Err(Error::BadCommand { dev: self.inner.uri.clone(), iface: "admin", what: cmd.describe(), why })
        };
        if cmd.set != crate::cmd::CmdSet::Admin {
            return refuse("not an admin command; use pass for I/O commands".into());
        }
        if cmd.ioprio != 0 {
            return refuse("an admin command carries no I/O priority; submit it without one".into());
        }
        // As for I/O: `rdonly=1` refuses what may change data (format, sanitize, namespace
        // management, firmware, vendor commands), which root's passthrough would let
        // through a read-only descriptor. Emulated admin changes nothing.
        if self.inner.opts.rdonly && iface != AdminIface::Emulated && !guard::admin_opcode_keeps_data(cmd.sqe.opcode) {
            return refuse("the device was opened read-only (rdonly=1) and this command may change data".into());
        }
        if iface == AdminIface::Nvme {
            be::check_passthru_bufs(&self.inner, cmd, bufs)?;
            admin_guard(&self.inner, cmd)?;
        }
        if let Some(i) = be::vfio::not_dma(&self.inner, bufs) {
            return refuse(be::not_dma_why(i, &bufs[i]));
        }
        if let Some(why) = be::vfio::admin_refusal(&self.inner, bufs) {
            return refuse(why);
        }
        admin.admin(cmd, bufs).map_err(|status| self.command_error(cmd, status))
    }

    /// Syscalls one command on the sync interface costs (1 for psync and block, 0 for a
    /// ramdisk); 0 when the device has no sync interface. Benchmarks use it to report
    /// syscalls per I/O for sync jobs.
    pub fn sync_syscalls_per_cmd(&self) -> u64 {
        self.inner.sync().map(|s| s.syscalls_per_cmd()).unwrap_or(0)
    }

    /// Creates an asynchronous queue of `depth` slots (1..=4096) on the async interface.
    pub fn queue(&self, depth: u32) -> Result<Queue> {
        Queue::new(self.clone(), depth)
    }
}

/// Whether the write guard applies: writes are possible and not explicitly allowed.
pub(super) fn guarded(opts: &Opts) -> bool {
    !opts.rdonly && !opts.allow_mounted_write
}

/// Refuses an admin command that may change data (format, sanitize, …) while a namespace
/// it reaches is in use (see [`guard`]); looked up at the command, not at open.
fn admin_guard(d: &Inner, cmd: &Cmd) -> Result<()> {
    if d.opts.allow_mounted_write || guard::admin_opcode_keeps_data(cmd.sqe.opcode) {
        return Ok(());
    }
    let Some(path) = &d.ident.path else { return Ok(()) };
    let md = fs::metadata(path).map_err(|e| os(&d.uri, "stat", e))?;
    let class = if md.file_type().is_block_device() { "block" } else { "char" };
    let dir = crate::sys::sysfs::dev_dir(class, (libc::major(md.rdev()), libc::minor(md.rdev())));
    let why = dir.as_deref().and_then(guard::controller_dir).and_then(|c| guard::controller_in_use(&c, cmd.sqe.nsid));
    match why {
        Some(why) => Err(Error::InUse { dev: d.uri.clone(), what: cmd.describe(), why }),
        None => Ok(()),
    }
}

/// The interface of `role` the table gives a kind of device by default.
fn default_iface<T: std::str::FromStr>(role: Role, kind: DevKind) -> Option<T> {
    be::default_for(role, kind).and_then(|d| d.name.parse().ok())
}

/// Refuses interface `name` of `role` (`sync=psync`) where the table says it cannot serve
/// the device's kind, with the table's reason.
fn refuse_unfit(d: &Inner, role: Role, name: &str) -> Result<()> {
    let t = be::descriptor(role, name);
    match (t.refusal)(d.ident.kind) {
        Some(why) => Err(d.unsupported(&t.option(), why)),
        None => Ok(()),
    }
}

/// Every tunable set in the options must belong to an interface serving the device: the
/// table says which interface takes which.
fn check_tunables(d: &Inner) -> Result<()> {
    let i = &d.ifaces;
    let chosen = |role: Role| -> Option<&'static str> {
        match role {
            Role::Sync => i.sync.map(|s| s.as_str()),
            Role::Async => i.r#async.map(|a| a.as_str()),
            Role::Admin => Some(i.admin.as_str()),
            Role::Mem => Some(i.mem.as_str()),
        }
    };
    for key in d.opts.tunables_set() {
        let owners: Vec<&be::Descriptor> =
            be::TABLE.iter().copied().filter(|t| t.tunables.iter().any(|(k, _)| *k == key)).collect();
        if owners.iter().any(|t| chosen(t.role) == Some(t.name)) {
            continue;
        }
        let names: Vec<String> = owners.iter().map(|t| t.option()).collect();
        let role = owners.first().map_or(Role::Async, |t| t.role);
        return Err(Error::BadOpt {
            key: key.into(),
            why: format!(
                "is a tunable of {}, but the {} interface is {}",
                names.join(" and "),
                role.key(),
                chosen(role).unwrap_or("none")
            ),
        });
    }
    if d.opts.direct && d.ident.kind == DevKind::Ramdisk {
        return Err(d.unsupported("direct=1", "a ramdisk has no page cache to bypass"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_lists_hold_every_kind_once_and_kernel_all_but_pci() {
        // A new variant fails to compile here until it is placed in the lists.
        let kernel = |k: DevKind| match k {
            DevKind::File
            | DevKind::Block
            | DevKind::NvmeBlock
            | DevKind::NvmeChar
            | DevKind::NvmeCtrl
            | DevKind::Ramdisk
            | DevKind::DevDax => true,
            DevKind::NvmePci => false,
        };
        for (i, k) in DevKind::ALL.iter().enumerate() {
            assert!(!DevKind::ALL[..i].contains(k), "{k:?} twice in ALL");
            assert_eq!(DevKind::KERNEL.contains(k), kernel(*k), "{k:?} in KERNEL");
        }
        assert_eq!(DevKind::KERNEL.len(), DevKind::ALL.iter().filter(|k| kernel(**k)).count());
    }

    /// A PCI address opens through the user-space driver: where the function is absent
    /// (a canned sysfs without it), the error names the address and what is missing.
    #[test]
    fn opening_a_pci_address_goes_to_the_user_space_driver() {
        let t = crate::sys::sysfs::Tree::new("pci-open");
        t.dir("bus/pci/devices");
        for uri in ["0000:00:05.0", "pci:0000:00:05.0"] {
            let e = crate::sys::sysfs::with_root(&t.root, || Device::open(uri, &Opts::default())).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("0000:00:05.0") && msg.contains("no PCI device"), "{uri}: {msg}");
        }
    }
}
