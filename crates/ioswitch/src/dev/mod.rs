//! Devices: opening, kinds, geometry, identity, and enumeration.

pub(crate) mod guard;

use crate::be::{self, AdminIo, Role, SyncIo};
use crate::buf::Buffer;
use crate::cmd::Cmd;
use crate::error::{Error, Result};
use crate::opts::{AdminIface, AsyncIface, MemIface, Opts, SyncIface};
use crate::queue::Queue;
use crate::uri::{self, Target};
use serde::Serialize;
use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
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
}

impl DevKind {
    /// The name used in output and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            DevKind::File => "file",
            DevKind::Block => "block device",
            DevKind::NvmeBlock => "NVMe namespace block device",
            DevKind::NvmeChar => "NVMe generic char device",
            DevKind::NvmeCtrl => "NVMe controller",
            DevKind::Ramdisk => "ramdisk",
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

fn os(dev: &str, what: impl Into<String>, source: io::Error) -> Error {
    Error::Os { dev: dev.into(), what: what.into(), source }
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
        let (kind, fd, geo, ident) = match target {
            Target::Ramdisk(bytes) => open_ramdisk(uri, bytes, opts)?,
            Target::Path(p) => open_path(uri, &p, opts)?,
        };
        let ifaces = Interfaces {
            sync: opts.sync.or_else(|| default_iface(Role::Sync, kind)),
            r#async: opts.r#async.or_else(|| default_iface(Role::Async, kind)),
            admin: opts.admin.or_else(|| default_iface(Role::Admin, kind)).unwrap_or(AdminIface::Emulated),
            mem: opts.mem.or_else(|| default_iface(Role::Mem, kind)).unwrap_or(MemIface::Posix),
        };
        let mut inner =
            Inner { uri: uri.to_string(), ident, geo, ifaces, opts: opts.clone(), fd, sync: None, admin: None };
        if let Some(s) = ifaces.sync {
            if let Some(why) = refusal(Role::Sync, s.as_str(), kind) {
                return Err(inner.unsupported(&format!("sync={s}"), why));
            }
            inner.sync = Some(be::new_sync(&inner, s)?);
        }
        if let Some(a) = ifaces.r#async {
            if let Some(why) = refusal(Role::Async, a.as_str(), kind) {
                return Err(inner.unsupported(&format!("async={a}"), why));
            }
            if matches!(a, AsyncIface::Emu | AsyncIface::Thrpool) && inner.sync.is_none() {
                return Err(
                    inner.unsupported(&format!("async={a}"), "it runs the sync interface, and this device has none")
                );
            }
            be::probe_async(&inner, a)?;
        }
        if let Some(why) = refusal(Role::Admin, ifaces.admin.as_str(), kind) {
            return Err(inner.unsupported(&format!("admin={}", ifaces.admin), why));
        }
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
    /// The options the device was opened with.
    pub fn opts(&self) -> &Opts {
        &self.inner.opts
    }

    /// Allocates a zeroed buffer of `nbytes`, aligned for this device (its LBA size, its
    /// direct-I/O alignment and the page size).
    pub fn alloc(&self, nbytes: usize) -> Result<Buffer> {
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
        page_size().max(g.lba_size as usize).max(g.dio_mem_align as usize)
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
        sync.exec(&io, cmd, bufs).map_err(|status| self.command_error(cmd, status))
    }

    #[cold]
    #[inline(never)]
    fn command_error(&self, cmd: &Cmd, status: crate::spec::Status) -> Error {
        Error::Command { dev: self.inner.uri.clone(), what: cmd.describe(), status }
    }

    /// Runs an admin command (identify, get log page, get/set features, …) synchronously
    /// on the admin interface, with `bufs` as its data. Returns the completion's result
    /// (DW0-1). Devices that are not NVMe answer from emulated identify data.
    pub fn pass_admin(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64> {
        let iface = self.inner.ifaces.admin;
        let admin = self.inner.admin.as_deref().ok_or_else(|| {
            self.inner.unsupported(&format!("admin={iface}"), "admin commands are not part of this build yet")
        })?;
        if cmd.set != crate::cmd::CmdSet::Admin {
            return Err(Error::BadCommand {
                dev: self.inner.uri.clone(),
                iface: "admin",
                what: cmd.describe(),
                why: "not an admin command; use pass for I/O commands".into(),
            });
        }
        if iface == AdminIface::Nvme {
            be::check_passthru_bufs(&self.inner, cmd, bufs)?;
            admin_guard(&self.inner, cmd)?;
        }
        admin.admin(cmd, bufs).map_err(|status| Error::Command {
            dev: self.inner.uri.clone(),
            what: cmd.describe(),
            status,
        })
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
fn guarded(opts: &Opts) -> bool {
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
    let dir = sysfs_dir(class, libc::major(md.rdev()), libc::minor(md.rdev()));
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

/// Why the table says interface `name` of `role` cannot serve `kind`.
fn refusal(role: Role, name: &str, kind: DevKind) -> Option<&'static str> {
    (be::descriptor(role, name).refusal)(kind)
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

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

fn open_ramdisk(uri: &str, bytes: u64, opts: &Opts) -> Result<(DevKind, Option<OwnedFd>, Geometry, Ident)> {
    if opts.create || opts.truncate || opts.size.is_some() {
        return Err(Error::BadOpt {
            key: "create/truncate/size".into(),
            why: format!("apply to regular files; {uri} is a ramdisk"),
        });
    }
    let geo = Geometry {
        lba_size: 512,
        nlbas: bytes / 512,
        bytes,
        max_transfer: 65536 * 512,
        dio_mem_align: 512,
        dio_offset_align: 512,
        zoned: ZonedModel::None,
        zones: None,
    };
    let ident = Ident {
        uri: uri.into(),
        path: None,
        kind: DevKind::Ramdisk,
        nsid: opts.nsid.unwrap_or(1),
        driver: Some("ioswitch-ramdisk".into()),
        block_name: None,
        model: None,
        serial: None,
        in_use: None,
    };
    Ok((DevKind::Ramdisk, None, geo, ident))
}

fn classify(uri: &str, path: &Path, md: &fs::Metadata) -> Result<DevKind> {
    let ft = md.file_type();
    if ft.is_file() {
        return Ok(DevKind::File);
    }
    if ft.is_dir() {
        return Err(Error::BadUri { uri: uri.into(), why: "is a directory; give a file or a device".into() });
    }
    let rdev = md.rdev();
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    if ft.is_block_device() {
        let name = sysfs_name("block", maj, min).unwrap_or_default();
        return Ok(if is_nvme_ns_name(&name, "nvme") { DevKind::NvmeBlock } else { DevKind::Block });
    }
    if ft.is_char_device() {
        let name = sysfs_name("char", maj, min).unwrap_or_default();
        if is_nvme_ns_name(&name, "ng") {
            return Ok(DevKind::NvmeChar);
        }
        if name.strip_prefix("nvme").is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit())) {
            return Ok(DevKind::NvmeCtrl);
        }
        return Err(Error::BadUri {
            uri: uri.into(),
            why: format!("{} is a character device ({maj}:{min}, {name:?}) that is not NVMe", path.display()),
        });
    }
    Err(Error::BadUri { uri: uri.into(), why: "is not a file, block device or NVMe device".into() })
}

fn is_nvme_ns_name(name: &str, prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else { return false };
    let Some((c, n)) = rest.split_once('n') else { return false };
    !c.is_empty() && !n.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) && n.bytes().all(|b| b.is_ascii_digit())
}

fn sysfs_dir(class: &str, maj: u32, min: u32) -> Option<PathBuf> {
    fs::canonicalize(format!("/sys/dev/{class}/{maj}:{min}")).ok()
}

fn sysfs_name(class: &str, maj: u32, min: u32) -> Option<String> {
    sysfs_dir(class, maj, min).and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn read_sysfs(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The sysfs directory of a whole disk holding `dir` (itself, or its parent for a
/// partition), where `queue/` lives.
fn disk_dir(dir: &Path) -> PathBuf {
    if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf).unwrap_or_else(|| dir.to_path_buf())
    } else {
        dir.to_path_buf()
    }
}

/// The sysfs directory of the whole disk behind block device `maj:min` (the disk
/// itself, or the parent of a partition): where `queue/` lives.
pub(crate) fn disk_sysfs_dir(maj: u32, min: u32) -> Option<PathBuf> {
    sysfs_dir("block", maj, min).map(|d| disk_dir(&d))
}

fn driver_of(disk: &Path) -> Option<String> {
    let name = disk.file_name()?.to_string_lossy().into_owned();
    if name.starts_with("loop") {
        return Some("loop".into());
    }
    for link in [disk.join("device/driver"), disk.join("device/device/driver")] {
        if let Ok(t) = fs::read_link(&link) {
            return t.file_name().map(|n| n.to_string_lossy().into_owned());
        }
    }
    if name.starts_with("nvme") {
        return Some("nvme".into());
    }
    None
}

struct Statx {
    mem_align: u32,
    offset_align: u32,
}

fn statx_dio(fd: RawFd) -> Option<Statx> {
    // SAFETY: statx is plain data; all-zero is a valid value.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: fd is open, the path is a valid C string, and sx is a valid out pointer.
    let rc = unsafe { libc::statx(fd, empty.as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut sx) };
    if rc != 0 || sx.stx_mask & libc::STATX_DIOALIGN == 0 || sx.stx_dio_mem_align == 0 {
        return None;
    }
    Some(Statx { mem_align: sx.stx_dio_mem_align, offset_align: sx.stx_dio_offset_align })
}

const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

fn open_path(uri: &str, path: &Path, opts: &Opts) -> Result<(DevKind, Option<OwnedFd>, Geometry, Ident)> {
    let existing = match fs::metadata(path) {
        Ok(md) => Some(md),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !opts.create {
                return Err(os(uri, "open (create=1 makes a new file)", e));
            }
            None
        }
        Err(e) => return Err(os(uri, "stat", e)),
    };
    let kind = match &existing {
        Some(md) => classify(uri, path, md)?,
        None => DevKind::File,
    };
    if kind != DevKind::File && (opts.create || opts.truncate || opts.size.is_some()) {
        return Err(Error::BadOpt {
            key: "create/truncate/size".into(),
            why: format!("apply to regular files; {uri} is a {kind}"),
        });
    }
    if kind == DevKind::NvmeCtrl || kind == DevKind::NvmeChar {
        return open_nvme_char(uri, path, kind, opts, existing.as_ref().map(|m| m.rdev()).unwrap_or(0));
    }
    let mut flags = libc::O_CLOEXEC;
    flags |= if opts.rdonly {
        libc::O_RDONLY
    } else if opts.wronly {
        libc::O_WRONLY
    } else {
        libc::O_RDWR
    };
    if opts.direct {
        flags |= libc::O_DIRECT;
    }
    if opts.create {
        flags |= libc::O_CREAT;
    }
    if opts.truncate {
        flags |= libc::O_TRUNC;
    }
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::BadUri { uri: uri.into(), why: "contains a NUL byte".into() })?;
    // SAFETY: cpath is a valid C string; open has no other preconditions.
    let raw = unsafe { libc::open(cpath.as_ptr(), flags, 0o644) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) if opts.direct => "open with O_DIRECT (the file system may not support direct=1)",
            Some(libc::EACCES | libc::EROFS | libc::EPERM) if !opts.rdonly => {
                "open read-write (rdonly=1 opens read-only)"
            }
            _ => "open",
        };
        return Err(os(uri, hint, e));
    }
    // SAFETY: raw is a freshly opened descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut ident = base_ident(uri, path, kind, opts);
    let dio = statx_dio(raw);
    let geo = if kind == DevKind::File {
        if let Some(size) = opts.size {
            let cur = fd_size(uri, &fd)?;
            if size > cur {
                // SAFETY: fd is an open regular file.
                if unsafe { libc::ftruncate(raw, size as libc::off_t) } != 0 {
                    return Err(os(uri, format!("extend the file to {size} bytes"), io::Error::last_os_error()));
                }
            }
        }
        let bytes = fd_size(uri, &fd)?;
        let (mem, off) = dio.map(|d| (d.mem_align, d.offset_align)).unwrap_or((4096, 4096));
        let lba_size = if opts.direct { off.max(512) } else { 512 };
        let md = fs::metadata(path).map_err(|e| os(uri, "stat", e))?;
        let dev = md.dev();
        if let Some(dir) = sysfs_dir("block", libc::major(dev), libc::minor(dev)) {
            ident.block_name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        }
        ident.driver = fs_type(raw);
        Geometry {
            lba_size,
            nlbas: bytes / lba_size as u64,
            bytes,
            max_transfer: 65536 * lba_size as u64,
            dio_mem_align: mem,
            dio_offset_align: off,
            zoned: ZonedModel::None,
            zones: None,
        }
    } else {
        let mut lba: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through the pointer, which is valid.
        if unsafe { libc::ioctl(raw, BLKSSZGET as _, &mut lba) } != 0 {
            return Err(os(uri, "BLKSSZGET (logical block size)", io::Error::last_os_error()));
        }
        let mut bytes: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid.
        if unsafe { libc::ioctl(raw, BLKGETSIZE64 as _, &mut bytes) } != 0 {
            return Err(os(uri, "BLKGETSIZE64 (device size)", io::Error::last_os_error()));
        }
        let lba = lba as u32;
        let md = fs::metadata(path).map_err(|e| os(uri, "stat", e))?;
        let dir = sysfs_dir("block", libc::major(md.rdev()), libc::minor(md.rdev()));
        let disk = dir.as_deref().map(disk_dir);
        let q = |attr: &str| disk.as_ref().and_then(|d| read_sysfs(&d.join("queue").join(attr)));
        let zoned = match q("zoned").as_deref() {
            Some("host-managed") => ZonedModel::HostManaged,
            Some("host-aware") => ZonedModel::HostAware,
            _ => ZonedModel::None,
        };
        let zones = (zoned != ZonedModel::None).then(|| {
            let zone_sectors: u64 = q("chunk_sectors").and_then(|s| s.parse().ok()).unwrap_or(0);
            let zone_size = zone_sectors * 512 / lba as u64;
            // The capacity of zone 0 from a zone report (BLKREPORTZONE): zones may be
            // writable over less than their size.
            let zone_capacity = be::zoned::zone0(raw)
                .map(|(_, cap)| cap * 512 / lba as u64)
                .filter(|&c| c > 0 && c <= zone_size)
                .unwrap_or(zone_size);
            Zoned {
                zone_size,
                zone_capacity,
                nr_zones: q("nr_zones").and_then(|s| s.parse().ok()).unwrap_or(0),
                max_open: q("max_open_zones").and_then(|s| s.parse().ok()).unwrap_or(0),
                max_active: q("max_active_zones").and_then(|s| s.parse().ok()).unwrap_or(0),
            }
        });
        if let Some(d) = &dir {
            ident.block_name = d.file_name().map(|n| n.to_string_lossy().into_owned());
            ident.nsid = opts.nsid.or_else(|| read_sysfs(&d.join("nsid")).and_then(|s| s.parse().ok())).unwrap_or(1);
        }
        if let Some(d) = &disk {
            ident.driver = driver_of(d);
            ident.model = read_sysfs(&d.join("device/model"));
            ident.serial = read_sysfs(&d.join("device/serial"));
        }
        let (mem, off) = dio.map(|d| (d.mem_align, d.offset_align)).unwrap_or((lba, lba));
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
    };
    let mut geo = geo;
    if kind == DevKind::NvmeBlock {
        let md = fs::metadata(path).map_err(|e| os(uri, "stat", e))?;
        let devno = (libc::major(md.rdev()), libc::minor(md.rdev()));
        match be::nvme::ns_info(uri, raw, devno, kind) {
            Ok(info) => apply_ns_info(uri, opts, &info, &mut geo, &mut ident)?,
            // Without identify (refused to this user) the block layer's geometry stands.
            Err(e) if matches!(e.errno(), Some(libc::EACCES | libc::EPERM)) => {}
            Err(e) => return Err(e),
        }
    }
    if kind != DevKind::File && guarded(opts) {
        let md = fs::metadata(path).map_err(|e| os(uri, "stat", e))?;
        ident.in_use = guard::block_in_use(path, (libc::major(md.rdev()), libc::minor(md.rdev())));
    }
    Ok((kind, Some(fd), geo, ident))
}

/// Opens an NVMe generic char device (`/dev/ngXnY`) or controller (`/dev/nvmeX`):
/// read-write (read-only with `rdonly=1`), never O_DIRECT (passthrough bypasses the page
/// cache anyway). A namespace's geometry comes from identify; a controller has none.
fn open_nvme_char(
    uri: &str,
    path: &Path,
    kind: DevKind,
    opts: &Opts,
    rdev: u64,
) -> Result<(DevKind, Option<OwnedFd>, Geometry, Ident)> {
    let flags = libc::O_CLOEXEC | if opts.rdonly { libc::O_RDONLY } else { libc::O_RDWR };
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::BadUri { uri: uri.into(), why: "contains a NUL byte".into() })?;
    // SAFETY: cpath is a valid C string; open has no other preconditions.
    let raw = unsafe { libc::open(cpath.as_ptr(), flags) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) if !opts.rdonly => "open read-write (rdonly=1 opens read-only)",
            _ => "open",
        };
        return Err(os(uri, hint, e));
    }
    // SAFETY: raw is a freshly opened descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut ident = base_ident(uri, path, kind, opts);
    ident.driver = Some("nvme".into());
    let mut geo = Geometry {
        lba_size: 512,
        nlbas: 0,
        bytes: 0,
        max_transfer: 0,
        dio_mem_align: 4,
        dio_offset_align: 512,
        zoned: ZonedModel::None,
        zones: None,
    };
    if kind == DevKind::NvmeCtrl {
        if let Ok(c) = be::nvme::identify_ctrl(raw) {
            ident.model = Some(c.mn);
            ident.serial = Some(c.sn);
        }
        return Ok((kind, Some(fd), geo, ident));
    }
    let devno = (libc::major(rdev), libc::minor(rdev));
    let info = be::nvme::ns_info(uri, raw, devno, kind)?;
    geo.dio_mem_align = info.dma_align;
    apply_ns_info(uri, opts, &info, &mut geo, &mut ident)?;
    if guarded(opts) {
        ident.in_use = info.block_dir.as_deref().and_then(guard::namespace_in_use);
    }
    Ok((kind, Some(fd), geo, ident))
}

/// Geometry and identity of an NVMe namespace from identify (see `be::nvme::ns_info`).
fn apply_ns_info(uri: &str, opts: &Opts, info: &be::nvme::NsInfo, geo: &mut Geometry, ident: &mut Ident) -> Result<()> {
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

fn base_ident(uri: &str, path: &Path, kind: DevKind, opts: &Opts) -> Ident {
    Ident {
        uri: uri.into(),
        path: Some(fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
        kind,
        nsid: opts.nsid.unwrap_or(1),
        driver: None,
        block_name: None,
        model: None,
        serial: None,
        in_use: None,
    }
}

fn fd_size(uri: &str, fd: &OwnedFd) -> Result<u64> {
    // SAFETY: fstat fills a plain struct through a valid pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and st is a valid out pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(os(uri, "fstat", io::Error::last_os_error()));
    }
    Ok(st.st_size as u64)
}

fn fs_type(fd: RawFd) -> Option<String> {
    // SAFETY: statfs is plain data; all-zero is valid.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and s is a valid out pointer.
    if unsafe { libc::fstatfs(fd, &mut s) } != 0 {
        return None;
    }
    let name = match s.f_type as u64 {
        0xEF53 => "ext4",
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0xF2F5_2010 => "f2fs",
        0x6462_6720 => "debugfs",
        other => return Some(format!("fs-magic-{other:#x}")),
    };
    Some(name.into())
}

/// One device found by [`enumerate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// Its path under /dev.
    pub path: PathBuf,
    /// Its kind.
    pub kind: DevKind,
    /// Size in bytes (0 for controllers).
    pub bytes: u64,
    /// Logical block size (0 for controllers and char devices).
    pub lba_size: u32,
    /// Zoned model.
    pub zoned: ZonedModel,
    /// The kernel driver.
    pub driver: Option<String>,
    /// Model string, when reported.
    pub model: Option<String>,
}

/// Lists the block devices and NVMe devices (namespaces, generic char devices,
/// controllers) on this machine, from sysfs. Empty loop and ram devices are left out.
pub fn enumerate() -> Result<Vec<Listing>> {
    let mut out = Vec::new();
    let mut names: Vec<String> = match fs::read_dir("/sys/class/block") {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(e) => return Err(os("/sys/class/block", "list block devices", e)),
    };
    names.sort();
    for name in names {
        let dir = fs::canonicalize(Path::new("/sys/class/block").join(&name)).unwrap_or_default();
        let sectors: u64 = read_sysfs(&dir.join("size")).and_then(|s| s.parse().ok()).unwrap_or(0);
        if sectors == 0 && (name.starts_with("loop") || name.starts_with("ram")) {
            continue;
        }
        let disk = disk_dir(&dir);
        let q = |a: &str| read_sysfs(&disk.join("queue").join(a));
        out.push(Listing {
            path: Path::new("/dev").join(&name),
            kind: if is_nvme_ns_name(&name, "nvme") { DevKind::NvmeBlock } else { DevKind::Block },
            bytes: sectors * 512,
            lba_size: q("logical_block_size").and_then(|s| s.parse().ok()).unwrap_or(512),
            zoned: match q("zoned").as_deref() {
                Some("host-managed") => ZonedModel::HostManaged,
                Some("host-aware") => ZonedModel::HostAware,
                _ => ZonedModel::None,
            },
            driver: driver_of(&disk),
            model: read_sysfs(&disk.join("device/model")),
        });
    }
    for (class, kind) in [("nvme-generic", DevKind::NvmeChar), ("nvme", DevKind::NvmeCtrl)] {
        let Ok(rd) = fs::read_dir(Path::new("/sys/class").join(class)) else { continue };
        let mut names: Vec<String> =
            rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        for name in names {
            let dir = Path::new("/sys/class").join(class).join(&name);
            let mut l = Listing {
                path: Path::new("/dev").join(&name),
                kind,
                bytes: 0,
                lba_size: 0,
                zoned: ZonedModel::None,
                driver: Some("nvme".into()),
                model: read_sysfs(&dir.join("model")).or_else(|| read_sysfs(&dir.join("device/model"))),
            };
            // A generic char device ngXnY is the same namespace as the block device
            // nvmeXnY when the kernel has one: take size, LBA size and zoning from it.
            if let Some(blk) = name.strip_prefix("ng").map(|rest| format!("nvme{rest}")) {
                if let Some(b) = out.iter().find(|b| b.path == Path::new("/dev").join(&blk)) {
                    (l.bytes, l.lba_size, l.zoned) = (b.bytes, b.lba_size, b.zoned);
                    l.model = l.model.or_else(|| b.model.clone());
                }
            }
            out.push(l);
        }
    }
    Ok(out)
}
