//! Opening a device: what a URI names (kind detection from stat and sysfs), the open
//! itself, and the geometry and identity a device of each kind has.

use super::{geometry, guard, guarded, os, DevKind, Geometry, Ident, ZonedModel};
use crate::be;
use crate::error::{Error, Result};
use crate::opts::Opts;
use crate::sys::{self, sysfs};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// What a read-write open refused for permission or a read-only file system says: the
/// open itself, and that work that only reads can open read-only. (It said "rdonly=1
/// opens read-only", which read as the cure to a command that writes, such as
/// `ioswitch write`; there is none for that, and the error after it says why.)
const READ_WRITE_HINT: &str = "open read-write (work that only reads can open read-only: rdonly=1)";

/// A ramdisk of `bytes` bytes: its kind, no descriptor, its geometry and identity.
pub(crate) fn open_ramdisk(uri: &str, bytes: u64, opts: &Opts) -> Result<(DevKind, Option<OwnedFd>, Geometry, Ident)> {
    only_files_take_file_opts(uri, opts, "ramdisk")?;
    no_osync(uri, opts, "ramdisk (no file is opened)")?;
    let geo = geometry::block(512, bytes, None, ZonedModel::None, None);
    let ident = Ident { driver: Some("ioswitch-ramdisk".into()), ..base_ident(uri, None, DevKind::Ramdisk, opts) };
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
        let name = sysfs::dev_name("block", (maj, min)).unwrap_or_default();
        return Ok(if is_nvme_ns_name(&name, "nvme") { DevKind::NvmeBlock } else { DevKind::Block });
    }
    if ft.is_char_device() {
        let name = sysfs::dev_name("char", (maj, min)).unwrap_or_default();
        if is_nvme_ns_name(&name, "ng") {
            return Ok(DevKind::NvmeChar);
        }
        if name.strip_prefix("nvme").is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit())) {
            return Ok(DevKind::NvmeCtrl);
        }
        if is_devdax_name(&name) {
            return Ok(DevKind::DevDax);
        }
        return Err(Error::BadUri {
            uri: uri.into(),
            why: format!("{} is a character device ({maj}:{min}, {name:?}) that is not NVMe", path.display()),
        });
    }
    Err(Error::BadUri { uri: uri.into(), why: "is not a file, block device or NVMe device".into() })
}

/// `daxX.Y`: a device-DAX character device.
pub(super) fn is_devdax_name(name: &str) -> bool {
    let Some((r, n)) = name.strip_prefix("dax").and_then(|r| r.split_once('.')) else { return false };
    !r.is_empty() && !n.is_empty() && r.bytes().all(|b| b.is_ascii_digit()) && n.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn is_nvme_ns_name(name: &str, prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else { return false };
    let Some((c, n)) = rest.split_once('n') else { return false };
    !c.is_empty() && !n.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) && n.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn open_path(uri: &str, path: &Path, opts: &Opts) -> Result<(DevKind, Option<OwnedFd>, Geometry, Ident)> {
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
    if kind != DevKind::File {
        only_files_take_file_opts(uri, opts, kind)?;
    }
    if kind == DevKind::NvmeCtrl || kind == DevKind::NvmeChar {
        no_osync(uri, opts, format!("{kind} (passthrough commands do not go through the file's writes)"))?;
        return open_nvme_char(uri, path, kind, opts, existing.as_ref().map(|m| m.rdev()).unwrap_or(0));
    }
    if kind == DevKind::DevDax {
        no_osync(uri, opts, "devdax device (written by stores to a mapping)")?;
        return open_devdax(uri, path, opts, existing.as_ref().map(|m| m.rdev()).unwrap_or(0));
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
    if let Some(o) = opts.osync {
        flags |= o.flag();
    }
    let fd = open_fd(uri, path, flags, |errno| match errno {
        Some(libc::EINVAL) if opts.direct => "open with O_DIRECT (the file system may not support direct=1)",
        Some(libc::EACCES | libc::EROFS | libc::EPERM) if !opts.rdonly => READ_WRITE_HINT,
        _ => "open",
    })?;

    let mut ident = base_ident(uri, Some(path), kind, opts);
    let dio = sys::dio_align(&fd);
    let md = fs::metadata(path).map_err(|e| os(uri, "stat", e))?;
    let rdev = (libc::major(md.rdev()), libc::minor(md.rdev()));
    let geo = if kind == DevKind::File {
        if let Some(size) = opts.size {
            let cur = fd_size(uri, &fd)?;
            if size > cur {
                sys::set_file_size(&fd, size).map_err(|e| os(uri, format!("extend the file to {size} bytes"), e))?;
            }
        }
        let bytes = fd_size(uri, &fd)?;
        ident.block_name = sysfs::dev_name("block", (libc::major(md.dev()), libc::minor(md.dev())));
        ident.driver = sys::fs_magic(&fd).map(fs_name);
        ident.dax = ident.block_name.as_deref().and_then(super::pmem::fsdax);
        geometry::file(bytes, dio, opts.direct)
    } else {
        let lba = sys::blk_logical_block_size(&fd).map_err(|e| os(uri, "BLKSSZGET (logical block size)", e))?;
        let bytes = sys::blk_size(&fd).map_err(|e| os(uri, "BLKGETSIZE64 (device size)", e))?;
        let dir = sysfs::dev_dir("block", rdev);
        let disk = dir.as_deref().map(sysfs::disk_of);
        let (zoned, zones) = geometry::zones(disk.as_deref(), lba, || be::zoned::zone0(fd.as_raw_fd()));
        if let Some(d) = &dir {
            ident.block_name = d.file_name().map(|n| n.to_string_lossy().into_owned());
            ident.nsid = opts.nsid.or_else(|| sysfs::read_num(&d.join("nsid"))).unwrap_or(1);
        }
        if let Some(d) = &disk {
            ident.driver = sysfs::driver_of(d);
            ident.model = sysfs::read(&d.join("device/model"));
            ident.serial = sysfs::read(&d.join("device/serial"));
        }
        geometry::block(lba, bytes, dio, zoned, zones)
    };
    let mut geo = geo;
    if kind == DevKind::NvmeBlock {
        match be::nvme::ns_info(uri, fd.as_raw_fd(), rdev, kind) {
            Ok(info) => geometry::apply_ns_info(uri, opts, &info, &mut geo, &mut ident)?,
            // Without identify (refused to this user) the block layer's geometry stands.
            Err(e) if matches!(e.errno(), Some(libc::EACCES | libc::EPERM)) => {}
            Err(e) => return Err(e),
        }
    }
    if kind != DevKind::File && guarded(opts) {
        ident.in_use = guard::block_in_use(path, rdev);
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
    let fd = open_fd(uri, path, flags, |errno| match errno {
        Some(libc::EACCES | libc::EPERM) if !opts.rdonly => READ_WRITE_HINT,
        _ => "open",
    })?;
    let raw = fd.as_raw_fd();
    let mut ident = base_ident(uri, Some(path), kind, opts);
    ident.driver = Some("nvme".into());
    let mut geo = unidentified_namespace();
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
    geometry::apply_ns_info(uri, opts, &info, &mut geo, &mut ident)?;
    if guarded(opts) {
        ident.in_use = info.block_dir.as_deref().and_then(guard::namespace_in_use);
    }
    Ok((kind, Some(fd), geo, ident))
}

/// Opens a devdax character device (`/dev/daxX.Y`): read-write (read-only with
/// `rdonly=1`); its size and alignment come from sysfs, and only `pmem` can use it (the
/// device has no read/write, only mmap). Offsets are byte offsets into one mapping of the
/// whole device, made at an address aligned to the device's alignment.
fn open_devdax(uri: &str, path: &Path, opts: &Opts, rdev: u64) -> Result<(DevKind, Option<OwnedFd>, Geometry, Ident)> {
    if opts.direct {
        return Err(Error::BadOpt {
            key: "direct".into(),
            why: format!("{uri} is a devdax device: there is no page cache to bypass"),
        });
    }
    let devno = (libc::major(rdev), libc::minor(rdev));
    let dax = super::pmem::devdax(devno).ok_or_else(|| Error::BadUri {
        uri: uri.into(),
        why: format!("{} is a devdax device ({}:{}) whose size sysfs does not give", path.display(), devno.0, devno.1),
    })?;
    let flags = libc::O_CLOEXEC | if opts.rdonly { libc::O_RDONLY } else { libc::O_RDWR };
    let fd = open_fd(uri, path, flags, |_| "open")?;
    let mut ident = base_ident(uri, Some(path), DevKind::DevDax, opts);
    ident.driver = Some("device_dax".into());
    ident.block_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let geo = geometry::file(dax.size, None, false);
    ident.dax = Some(dax);
    Ok((DevKind::DevDax, Some(fd), geo, ident))
}

/// Opens the NVMe controller at PCI address `addr` through the user-space driver and
/// identifies the namespace `nsid=` names (default: the first active one). Buffers must
/// be its DMA memory, so there is no direct-I/O alignment beyond the PRP rule (dwords).
#[allow(clippy::type_complexity)]
pub(super) fn open_pci(
    uri: &str,
    addr: &str,
    opts: &Opts,
) -> Result<(std::sync::Arc<be::vfio::ctrl::Ctrl>, (DevKind, Option<OwnedFd>, Geometry, Ident))> {
    only_files_take_file_opts(uri, opts, "PCI device")?;
    no_osync(uri, opts, "PCI device (the user-space driver opens no file)")?;
    let dma = opts.dma.unwrap_or_default();
    let (ctrl, info) = be::vfio::open(uri, addr, opts.nsid, dma)?;
    let kind = DevKind::NvmePci;
    let mut ident = base_ident(uri, None, kind, opts);
    let mut geo = unidentified_namespace();
    geometry::apply_ns_info(uri, opts, &info, &mut geo, &mut ident)?;
    ident.driver = Some(dma.kernel_driver().into());
    Ok((ctrl, (kind, None, geo, ident)))
}

/// open(2) of `path` (the device `uri` names) with `flags` (a new file gets mode 0644); a
/// path with a NUL byte is a bad URI, and a failed open says what it tried with `what`,
/// from its errno.
fn open_fd(uri: &str, path: &Path, flags: libc::c_int, what: impl Fn(Option<i32>) -> &'static str) -> Result<OwnedFd> {
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::BadUri { uri: uri.into(), why: "contains a NUL byte".into() })?;
    sys::open(&cpath, flags, 0o644).map_err(|e| os(uri, what(e.raw_os_error()), e))
}

/// Refuses `create`, `truncate` and `size`, which apply to regular files, for `uri`, a
/// `what` (a ramdisk, a block device, …).
fn only_files_take_file_opts(uri: &str, opts: &Opts, what: impl std::fmt::Display) -> Result<()> {
    if opts.create || opts.truncate || opts.size.is_some() {
        return Err(Error::BadOpt {
            key: "create/truncate/size".into(),
            why: format!("apply to regular files; {uri} is a {what}"),
        });
    }
    Ok(())
}

/// Refuses `osync`, which adds a flag to the open of a file or block device, for `uri`,
/// a `what` (with the reason it means nothing there).
fn no_osync(uri: &str, opts: &Opts, what: impl std::fmt::Display) -> Result<()> {
    match opts.osync {
        Some(o) => Err(Error::BadOpt {
            key: "osync".into(),
            why: format!("osync={o} ({}) applies to files and block devices; {uri} is a {what}", o.flag_name()),
        }),
        None => Ok(()),
    }
}

fn base_ident(uri: &str, path: Option<&Path>, kind: DevKind, opts: &Opts) -> Ident {
    Ident {
        uri: uri.into(),
        path: path.map(|p| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())),
        kind,
        nsid: opts.nsid.unwrap_or(1),
        driver: None,
        block_name: None,
        model: None,
        serial: None,
        in_use: None,
        dax: None,
    }
}

fn fd_size(uri: &str, fd: &OwnedFd) -> Result<u64> {
    sys::file_size(fd).map_err(|e| os(uri, "fstat", e))
}

/// A file system's name from its magic number (statfs(2)).
fn fs_name(magic: u64) -> String {
    let name = match magic {
        0xEF53 => "ext4",
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0xF2F5_2010 => "f2fs",
        0x6462_6720 => "debugfs",
        other => return format!("fs-magic-{other:#x}"),
    };
    name.into()
}

/// The geometry of an NVMe namespace before its identify data fills it in
/// (`geometry::apply_ns_info`): 512-byte LBAs, no size, dword-aligned memory.
fn unidentified_namespace() -> Geometry {
    Geometry {
        lba_size: 512,
        nlbas: 0,
        bytes: 0,
        max_transfer: 0,
        dio_mem_align: 4,
        dio_offset_align: 512,
        zoned: ZonedModel::None,
        zones: None,
    }
}

#[cfg(test)]
mod tests {
    use crate::be::testutil::{open, temp_in};
    use crate::{Device, Opts};

    /// The open flags of descriptor `fd` of this process, as the kernel keeps them
    /// (`flags:` of /proc/self/fdinfo, octal).
    fn fd_flags(fd: i32) -> libc::c_int {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).expect("fdinfo has a flags line");
        libc::c_int::from_str_radix(flags.trim(), 8).unwrap()
    }

    #[test]
    fn osync_puts_its_flag_on_the_open_file() {
        // O_SYNC is O_DSYNC plus a bit of its own, so each case checks both bits.
        let sync_only = libc::O_SYNC & !libc::O_DSYNC;
        for (opts, dsync, sync) in [("", false, false), (",osync=dsync", true, false), (",osync=sync", true, true)] {
            let t = temp_in(&std::env::temp_dir(), "osync");
            let dev = open(&t, &format!("create=1,size=64k{opts}"));
            let flags = fd_flags(dev.inner.raw_fd());
            assert_eq!((flags & libc::O_DSYNC != 0, flags & sync_only != 0), (dsync, sync), "{opts}: flags {flags:o}");
            // The option shows in the options the device was opened with.
            assert_eq!(dev.inner.opts.to_string().contains("osync="), !opts.is_empty(), "{opts}");
        }
    }

    #[test]
    fn osync_is_refused_where_no_file_is_written() {
        let err = |uri: &str, opts: &str| {
            let o: Opts = match opts.parse() {
                Ok(o) => o,
                Err(e) => return e.to_string(),
            };
            Device::open(uri, &o).map(|_| ()).unwrap_err().to_string()
        };
        let e = err("ramdisk:1MiB", "osync=sync");
        assert!(e.contains("osync=sync (O_SYNC) applies to files and block devices") && e.contains("ramdisk"), "{e}");
        let e = err("pci:0000:00:00.0", "osync=dsync");
        assert!(e.contains("osync=dsync (O_DSYNC) applies to files and block devices") && e.contains("PCI"), "{e}");
        let t = temp_in(&std::env::temp_dir(), "osync");
        let path = t.0.to_str().unwrap();
        for iface in ["sync=nil", "sync=mmap", "sync=pmem", "async=nil", "async=io_uring_cmd"] {
            let e = err(path, &format!("create=1,size=64k,osync=dsync,{iface}"));
            assert!(e.contains(&format!("osync=dsync (O_DSYNC) means nothing with {iface}")), "{iface}: {e}");
        }
        let e = err(path, "osync=fsync");
        assert!(e.contains("osync") && e.contains("fsync"), "{e}");
    }
}
