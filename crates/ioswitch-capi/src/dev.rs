//! Devices: open and close, geometry and identity, enumeration, buffers, and
//! synchronous commands.

use crate::cmd::{ioswitch_cmd, to_cmd};
use crate::cpl::ioswitch_cpl;
use crate::error::{fail, from_error, guard, set_static};
use crate::static_cstr;
use crate::table::{self, Refusal, Slot, MIN_ALIGN};
use ioswitch_rs::dev::Listing;
use ioswitch_rs::spec::errno_to_status;
use ioswitch_rs::{Buffer, DevKind, Device, Error, Opts, Status, ZonedModel};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

/// Device kind: a regular file.
pub const IOSWITCH_KIND_FILE: u32 = 0;
/// Device kind: a block device that is not an NVMe namespace (virtio, loop, SCSI, …).
pub const IOSWITCH_KIND_BLOCK: u32 = 1;
/// Device kind: an NVMe namespace block device, /dev/nvmeXnY.
pub const IOSWITCH_KIND_NVME_BLOCK: u32 = 2;
/// Device kind: an NVMe namespace generic char device, /dev/ngXnY.
pub const IOSWITCH_KIND_NVME_CHAR: u32 = 3;
/// Device kind: an NVMe controller char device, /dev/nvmeX.
pub const IOSWITCH_KIND_NVME_CTRL: u32 = 4;
/// Device kind: memory given by a size (a ramdisk).
pub const IOSWITCH_KIND_RAMDISK: u32 = 5;
/// A device-DAX character device, `/dev/daxX.Y` (persistent memory; `sync=pmem` only).
pub const IOSWITCH_KIND_DEVDAX: u32 = 6;
/// Device kind: an NVMe namespace of a controller given by its PCI address, driven by
/// the user-space driver (vfio).
pub const IOSWITCH_KIND_NVME_PCI: u32 = 7;

/// Zoned model: not zoned.
pub const IOSWITCH_ZONED_NONE: u32 = 0;
/// Zoned model: host-managed (writes must be sequential within a zone).
pub const IOSWITCH_ZONED_HOST_MANAGED: u32 = 1;
/// Zoned model: host-aware.
pub const IOSWITCH_ZONED_HOST_AWARE: u32 = 2;

/// Most buffers one command may carry (vectored I/O).
pub const IOSWITCH_MAX_BUFS: u32 = 64;

fn kind_code(k: DevKind) -> u32 {
    match k {
        DevKind::File => IOSWITCH_KIND_FILE,
        DevKind::Block => IOSWITCH_KIND_BLOCK,
        DevKind::NvmeBlock => IOSWITCH_KIND_NVME_BLOCK,
        DevKind::NvmeChar => IOSWITCH_KIND_NVME_CHAR,
        DevKind::NvmeCtrl => IOSWITCH_KIND_NVME_CTRL,
        DevKind::Ramdisk => IOSWITCH_KIND_RAMDISK,
        DevKind::DevDax => IOSWITCH_KIND_DEVDAX,
        DevKind::NvmePci => IOSWITCH_KIND_NVME_PCI,
    }
}

fn zoned_code(z: ZonedModel) -> u32 {
    match z {
        ZonedModel::None => IOSWITCH_ZONED_NONE,
        ZonedModel::HostManaged => IOSWITCH_ZONED_HOST_MANAGED,
        ZonedModel::HostAware => IOSWITCH_ZONED_HOST_AWARE,
    }
}

/// An open device (opaque). Open with `ioswitch_dev_open`, close with
/// `ioswitch_dev_close`. A device may be used from several threads at once, each thread
/// with its own queue.
pub struct ioswitch_dev {
    pub(crate) dev: Device,
    strings: Strings,
}

/// The C strings `ioswitch_dev_ident` hands out, owned by the device.
struct Strings {
    uri: CString,
    path: Option<CString>,
    driver: Option<CString>,
    block_name: Option<CString>,
    model: Option<CString>,
    serial: Option<CString>,
    in_use: Option<CString>,
    /// The DAX identity's namespace mode and namespace (`ioswitch_dev_dax`).
    dax_mode: Option<CString>,
    dax_namespace: Option<CString>,
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

/// A C string argument as UTF-8; `Err` with the message recorded.
///
/// # Safety
/// `p` is NULL or a valid NUL-terminated string.
pub(crate) unsafe fn arg_str<'a>(func: &str, name: &str, p: *const c_char) -> Result<&'a str, c_int> {
    if p.is_null() {
        return Err(fail(libc::EINVAL, format!("{func}: {name} is NULL")));
    }
    // SAFETY: p is non-null and NUL-terminated (caller contract).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| fail(libc::EINVAL, format!("{func}: {name} {s:?} is not UTF-8")))
}

/// Opens a device: a path (regular file, block device, /dev/nvmeXnY, /dev/ngXnY,
/// /dev/nvmeX) or a ramdisk size (`"1GiB"`), with options as a string of comma-separated
/// `key=value` items (`"async=io_uring,direct=1"`; NULL or `""` for the defaults; keys:
/// sync, async, admin, mem, nsid, direct, rdonly, wronly, create, truncate, size, sqpoll,
/// sqpoll_cpu, iopoll, register_files, register_buffers, threads, pmem_force, …).
///
/// On success stores the device in `*out` and returns 0. On failure returns a negative
/// errno (-EINVAL for a bad URI or option, -EOPNOTSUPP for an interface that cannot serve
/// this kind of device, the OS error for a failed open) and `ioswitch_last_error()` says
/// which input was wrong and why; `*out` is set to NULL.
///
/// # Safety
/// `uri` must be a NUL-terminated string; `opts` NULL or a NUL-terminated string; `out`
/// valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_dev_open(
    uri: *const c_char,
    opts: *const c_char,
    out: *mut *mut ioswitch_dev,
) -> c_int {
    const F: &str = "ioswitch_dev_open";
    guard(F, -libc::EIO, || {
        // SAFETY: out is null or valid for writing one pointer (caller contract).
        if let Err(e) = unsafe { clear_out(F, out) } {
            return e;
        }
        // SAFETY: uri is a NUL-terminated string (caller contract).
        let uri = match unsafe { arg_str(F, "uri", uri) } {
            Ok(u) => u,
            Err(e) => return e,
        };
        let opts_s = if opts.is_null() {
            ""
        } else {
            // SAFETY: opts is non-null and NUL-terminated (caller contract).
            match unsafe { arg_str(F, "opts", opts) } {
                Ok(o) => o,
                Err(e) => return e,
            }
        };
        let parsed: Opts = match opts_s.parse() {
            Ok(o) => o,
            Err(e) => return from_error(&format!("{F}({uri:?}, {opts_s:?})"), &e),
        };
        let dev = match Device::open(uri, &parsed) {
            Ok(d) => d,
            Err(e) => return from_error(F, &e),
        };
        let id = dev.ident();
        let strings = Strings {
            uri: cstring(uri),
            path: id.path.as_deref().map(|p| CString::new(p.as_os_str().as_bytes()).unwrap_or_default()),
            driver: id.driver.as_deref().map(cstring),
            block_name: id.block_name.as_deref().map(cstring),
            model: id.model.as_deref().map(cstring),
            serial: id.serial.as_deref().map(cstring),
            in_use: id.in_use.as_deref().map(cstring),
            dax_mode: id.dax.as_ref().map(|d| cstring(&d.mode)),
            dax_namespace: id.dax.as_ref().and_then(|d| d.namespace.as_deref()).map(cstring),
        };
        let handle = Box::new(ioswitch_dev { dev, strings });
        // SAFETY: as above.
        unsafe { out.write(Box::into_raw(handle)) };
        0
    })
}

/// Closes a device (NULL is ignored). Queues made on it stay usable until
/// `ioswitch_queue_term` (each keeps the device open), and buffers stay valid until
/// `ioswitch_buf_free`.
///
/// # Safety
/// `dev` must be NULL or a device from `ioswitch_dev_open` not closed before, and no other
/// thread may use it during or after the call.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_dev_close(dev: *mut ioswitch_dev) {
    guard("ioswitch_dev_close", (), || {
        if !dev.is_null() {
            // SAFETY: dev came from Box::into_raw in ioswitch_dev_open and is closed once
            // (caller contract).
            drop(unsafe { Box::from_raw(dev) });
        }
    })
}

/// Where the data is and how it may be addressed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ioswitch_geo {
    /// Logical block size in bytes (512, or the direct-I/O granularity, for files).
    pub lba_size: u32,
    /// Alignment `ioswitch_buf_alloc` gives this device's buffers (bytes).
    pub buffer_align: u32,
    /// Number of logical blocks.
    pub nlbas: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// Largest transfer one command may carry, in bytes.
    pub max_transfer: u64,
    /// Alignment of buffer addresses that direct I/O needs.
    pub dio_mem_align: u32,
    /// Alignment of offsets and lengths that direct I/O needs.
    pub dio_offset_align: u32,
    /// Zoned model: `IOSWITCH_ZONED_*`.
    pub zoned: u32,
    /// Most zones open at once (0: no limit, or not zoned).
    pub max_open: u32,
    /// Zone size in LBAs (0 when not zoned).
    pub zone_size: u64,
    /// Writable LBAs per zone (0 when not zoned).
    pub zone_capacity: u64,
    /// Number of zones (0 when not zoned).
    pub nr_zones: u64,
    /// Most zones active at once (0: no limit, or not zoned).
    pub max_active: u32,
    /// Reserved, 0.
    pub reserved: u32,
}

/// Who a device is. The strings belong to the device: valid until `ioswitch_dev_close`;
/// a string the device does not have is NULL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ioswitch_ident {
    /// The URI it was opened with.
    pub uri: *const c_char,
    /// Its canonical path (NULL for a ramdisk).
    pub path: *const c_char,
    /// Its kind: `IOSWITCH_KIND_*`.
    pub kind: u32,
    /// Namespace id (1 for devices that are not NVMe).
    pub nsid: u32,
    /// The kind's name ("file", "block device", …); static.
    pub kind_name: *const c_char,
    /// Kernel driver (`nvme`, `virtio_blk`, `loop`), or the file system type for files.
    pub driver: *const c_char,
    /// For a file: the block device holding it; for a block device: its name.
    pub block_name: *const c_char,
    /// Model string, when the device reports one.
    pub model: *const c_char,
    /// Serial number, when the device reports one.
    pub serial: *const c_char,
    /// The sync interface serving it ("psync", "block", …), NULL when none; static.
    pub sync_iface: *const c_char,
    /// The async interface serving it ("io_uring", "libaio", …), NULL when none; static.
    pub async_iface: *const c_char,
    /// The admin interface serving it; static.
    pub admin_iface: *const c_char,
    /// The memory interface; static.
    pub mem_iface: *const c_char,
    /// Why commands that may write are refused ("/dev/loop0p1 is mounted on /mnt
    /// (ext4)"): the device, a partition of it or its disk is mounted, swapped on or held
    /// by another kernel user; NULL when writes are not guarded (nothing uses the device,
    /// a file or ramdisk, `rdonly=1`, or `allow_mounted_write=1`). Such refusals fail
    /// with -EBUSY.
    pub in_use: *const c_char,
}

/// A device argument; `Err` with the message recorded when NULL.
///
/// # Safety
/// `dev` is NULL or a live device from `ioswitch_dev_open`.
#[inline(always)]
pub(crate) unsafe fn dev_arg<'a>(func: &str, dev: *const ioswitch_dev) -> Result<&'a ioswitch_dev, c_int> {
    // SAFETY: dev is null or live (caller contract).
    unsafe { dev.as_ref() }.ok_or_else(|| null_arg(func, "dev"))
}

/// Sets the out-parameter `out` to NULL, as every call that makes a handle does first (so
/// that it is NULL whatever fails next); `Err` with the message recorded when `out` itself
/// is NULL.
///
/// # Safety
/// `out` is NULL or valid for writing one pointer.
pub(crate) unsafe fn clear_out<T>(func: &str, out: *mut *mut T) -> Result<(), c_int> {
    if out.is_null() {
        return Err(null_arg(func, "out"));
    }
    // SAFETY: out is non-null and valid for a write (caller contract).
    unsafe { out.write(ptr::null_mut()) };
    Ok(())
}

/// The start of a call that makes a handle from a device: [`clear_out`], then [`dev_arg`].
///
/// # Safety
/// `out` is NULL or valid for writing one pointer; `dev` NULL or a live device.
pub(crate) unsafe fn out_and_dev<'a, T>(
    func: &str,
    out: *mut *mut T,
    dev: *const ioswitch_dev,
) -> Result<&'a ioswitch_dev, c_int> {
    // SAFETY: forwarded caller contract.
    unsafe {
        clear_out(func, out)?;
        dev_arg(func, dev)
    }
}

/// The body of a getter that fills one struct from a device: under `guard`, checks `dev`
/// and `out` (`what` names it; NULL is -EINVAL with the message recorded), writes what
/// `make` builds from the device, returns 0.
///
/// # Safety
/// `dev` is NULL or a live device; `out` NULL or valid for writing one `T`.
unsafe fn fill<T>(
    func: &str,
    dev: *const ioswitch_dev,
    out: *mut T,
    what: &str,
    make: impl FnOnce(&ioswitch_dev) -> T,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { fill_if(func, dev, out, what, "", |d| Some(make(d))) }
}

/// [`fill`] for what a device may not have: when `make` gives `None`, `*out` is left as
/// it was and the call fails with -ENODATA, the message naming the function, the device,
/// its kind and `lacks` ("has no file descriptor").
///
/// # Safety
/// As [`fill`].
unsafe fn fill_if<T>(
    func: &str,
    dev: *const ioswitch_dev,
    out: *mut T,
    what: &str,
    lacks: &str,
    make: impl FnOnce(&ioswitch_dev) -> Option<T>,
) -> c_int {
    guard(func, -libc::EIO, || {
        // SAFETY: dev is null or open (caller contract).
        let d = match unsafe { dev_arg(func, dev) } {
            Ok(d) => d,
            Err(e) => return e,
        };
        if out.is_null() {
            return null_arg(func, what);
        }
        let Some(v) = make(d) else {
            let id = d.dev.ident();
            return fail(libc::ENODATA, format!("{func}: {} ({}) {lacks}", id.uri, id.kind));
        };
        // SAFETY: out is non-null and valid for a write (caller contract).
        unsafe { out.write(v) };
        0
    })
}

/// Fills `*geo` with the device's geometry. Returns 0, or -EINVAL for NULL arguments.
///
/// # Safety
/// `dev` must be NULL or an open device; `geo` NULL or valid for writing one struct.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_dev_geo(dev: *const ioswitch_dev, geo: *mut ioswitch_geo) -> c_int {
    // SAFETY: dev is null or open, geo null or writable (caller contract).
    unsafe { fill("ioswitch_dev_geo", dev, geo, "geo", geo_of) }
}

fn geo_of(d: &ioswitch_dev) -> ioswitch_geo {
    let g = d.dev.geometry();
    let z = g.zones.unwrap_or(ioswitch_rs::Zoned {
        zone_size: 0,
        zone_capacity: 0,
        nr_zones: 0,
        max_open: 0,
        max_active: 0,
    });
    ioswitch_geo {
        lba_size: g.lba_size,
        buffer_align: d.dev.buffer_align().max(MIN_ALIGN) as u32,
        nlbas: g.nlbas,
        bytes: g.bytes,
        max_transfer: g.max_transfer,
        dio_mem_align: g.dio_mem_align,
        dio_offset_align: g.dio_offset_align,
        zoned: zoned_code(g.zoned),
        max_open: z.max_open,
        zone_size: z.zone_size,
        zone_capacity: z.zone_capacity,
        nr_zones: z.nr_zones,
        max_active: z.max_active,
        reserved: 0,
    }
}

/// Fills `*ident` with who the device is; the strings stay valid until the device is
/// closed. Returns 0, or -EINVAL for NULL arguments.
///
/// # Safety
/// `dev` must be NULL or an open device; `ident` NULL or valid for writing one struct.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_dev_ident(dev: *const ioswitch_dev, ident: *mut ioswitch_ident) -> c_int {
    // SAFETY: dev is null or open, ident null or writable (caller contract).
    unsafe { fill("ioswitch_dev_ident", dev, ident, "ident", ident_of) }
}

fn ident_of(d: &ioswitch_dev) -> ioswitch_ident {
    let id = d.dev.ident();
    let ifaces = d.dev.interfaces();
    let s = &d.strings;
    ioswitch_ident {
        uri: s.uri.as_ptr(),
        path: opt_ptr(&s.path),
        kind: kind_code(id.kind),
        nsid: id.nsid,
        kind_name: static_cstr(id.kind.as_str()).as_ptr(),
        driver: opt_ptr(&s.driver),
        block_name: opt_ptr(&s.block_name),
        model: opt_ptr(&s.model),
        serial: opt_ptr(&s.serial),
        sync_iface: ifaces.sync.map_or(ptr::null(), |i| static_cstr(i.as_str()).as_ptr()),
        async_iface: ifaces.r#async.map_or(ptr::null(), |i| static_cstr(i.as_str()).as_ptr()),
        admin_iface: static_cstr(ifaces.admin.as_str()).as_ptr(),
        mem_iface: static_cstr(ifaces.mem.as_str()).as_ptr(),
        in_use: opt_ptr(&s.in_use),
    }
}

/// The persistent-memory identity of a DAX device (a devdax device, or a file on a DAX
/// file system over a pmem block device): what `ioswitch_dev_dax` fills. The strings
/// belong to the device: valid until `ioswitch_dev_close`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ioswitch_dax {
    /// The namespace's mode: "devdax" or "fsdax" (as ndctl names them).
    pub mode: *const c_char,
    /// The namespace ("namespace0.0"), NULL when sysfs does not name it.
    pub namespace_name: *const c_char,
    /// The alignment mappings of it respect, in bytes (a devdax device's `align`; the page
    /// size where sysfs gives none).
    pub align: u64,
    /// Its size in bytes (the devdax device's, or the pmem block device's).
    pub size: u64,
}

/// Fills `*dax` with the device's DAX identity (namespace mode, namespace, alignment,
/// size: what `ioswitch info` shows for it). A separate call rather than fields of
/// `ioswitch_ident`, so that struct keeps its size for programs built before. Returns 0;
/// -ENODATA when the device is not DAX (a regular file on a file system that is not DAX,
/// a block device, NVMe, a ramdisk, also with `pmem_force=1`), with
/// `ioswitch_last_error()` saying so; -EINVAL for NULL arguments.
///
/// # Safety
/// `dev` must be NULL or an open device; `dax` NULL or valid for writing one struct.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_dev_dax(dev: *const ioswitch_dev, dax: *mut ioswitch_dax) -> c_int {
    // SAFETY: dev is null or open, dax null or writable (caller contract).
    unsafe { fill_if("ioswitch_dev_dax", dev, dax, "dax", "is not a DAX device or a file on one", dax_of) }
}

/// Gives in `*fd` the open file descriptor the device's interfaces use, for the calls
/// ioswitch does not make itself (`posix_fadvise`, an `fcntl` write-life hint, an `ioctl`).
/// The descriptor stays the device's: do not close it, and do not use it after
/// `ioswitch_dev_close`. Returns 0; -ENODATA when the device has none (a ramdisk, a PCI
/// address driven by `vfio`), with `ioswitch_last_error()` saying so and `*fd` left as it was;
/// -EINVAL for NULL arguments.
///
/// # Safety
/// `dev` must be NULL or an open device; `fd` NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_dev_fd(dev: *const ioswitch_dev, fd: *mut c_int) -> c_int {
    // SAFETY: dev is null or open, fd null or writable (caller contract).
    unsafe {
        fill_if("ioswitch_dev_fd", dev, fd, "fd", "has no file descriptor", |d| d.dev.fd().map(|f| f.as_raw_fd()))
    }
}

fn dax_of(d: &ioswitch_dev) -> Option<ioswitch_dax> {
    let x = d.dev.ident().dax.as_ref()?;
    Some(ioswitch_dax {
        mode: opt_ptr(&d.strings.dax_mode),
        namespace_name: opt_ptr(&d.strings.dax_namespace),
        align: x.align,
        size: x.size,
    })
}

/// One device found by `ioswitch_enumerate`. The strings are valid during the callback
/// only; a string the device does not have is NULL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ioswitch_listing {
    /// Its path under /dev.
    pub path: *const c_char,
    /// Its kind: `IOSWITCH_KIND_*`.
    pub kind: u32,
    /// Logical block size (0 for controllers and char devices).
    pub lba_size: u32,
    /// The kind's name; static.
    pub kind_name: *const c_char,
    /// Size in bytes (0 for controllers).
    pub bytes: u64,
    /// Zoned model: `IOSWITCH_ZONED_*`.
    pub zoned: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// The kernel driver.
    pub driver: *const c_char,
    /// Model string, when reported.
    pub model: *const c_char,
}

/// The callback of `ioswitch_enumerate`: return 0 to go on, non-zero to stop.
pub type ioswitch_enumerate_cb =
    Option<unsafe extern "C" fn(listing: *const ioswitch_listing, cb_arg: *mut c_void) -> c_int>;

/// Lists the block devices and NVMe devices of this machine (from sysfs), calling `cb`
/// once per device with `cb_arg`. Returns how many devices were passed to `cb`, or a
/// negative errno.
///
/// # Safety
/// `cb` must be a valid function (or NULL: only counts); it is called on this thread.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_enumerate(cb: ioswitch_enumerate_cb, cb_arg: *mut c_void) -> c_int {
    const F: &str = "ioswitch_enumerate";
    let list: Vec<Listing> = match guard(F, Err(-libc::EIO), || ioswitch_rs::enumerate().map_err(|e| from_error(F, &e)))
    {
        Ok(l) => l,
        Err(e) => return e,
    };
    let mut n: c_int = 0;
    for l in &list {
        let strs = guard(F, None, || {
            Some((
                CString::new(Path::new(&l.path).as_os_str().as_bytes()).unwrap_or_default(),
                l.driver.as_deref().map(cstring),
                l.model.as_deref().map(cstring),
                static_cstr(l.kind.as_str()),
            ))
        });
        let Some((path, driver, model, kind_name)) = strs else { return -libc::EIO };
        let item = ioswitch_listing {
            path: path.as_ptr(),
            kind: kind_code(l.kind),
            lba_size: l.lba_size,
            kind_name: kind_name.as_ptr(),
            bytes: l.bytes,
            zoned: zoned_code(l.zoned),
            reserved: 0,
            driver: opt_ptr(&driver),
            model: opt_ptr(&model),
        };
        n += 1;
        if let Some(f) = cb {
            // SAFETY: f is a valid C function (caller contract); item and its strings live
            // until after the call. It is not called inside a Rust frame that could unwind.
            if unsafe { f(&item, cb_arg) } != 0 {
                break;
            }
        }
    }
    n
}

/// Allocates a zeroed buffer of `nbytes` (> 0) aligned for `dev` (its LBA size, its
/// direct-I/O alignment and the page size), or for any device when `dev` is NULL (page
/// aligned). Returns the buffer's start address, or NULL with `ioswitch_last_error()` set.
///
/// Ownership: the memory belongs to ioswitch until `ioswitch_buf_free`. Pass the start
/// address (exactly the pointer returned here, never a pointer into the middle) as a data
/// buffer of commands. A buffer given to `ioswitch_queue_submit` belongs to the queue
/// until its completion callback runs: do not read, write or free it before.
///
/// # Safety
/// `dev` must be NULL or an open device.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_buf_alloc(dev: *const ioswitch_dev, nbytes: usize) -> *mut c_void {
    const F: &str = "ioswitch_buf_alloc";
    guard(F, ptr::null_mut(), || {
        if nbytes == 0 {
            fail(libc::EINVAL, format!("{F}: nbytes is 0"));
            return ptr::null_mut();
        }
        // SAFETY: dev is null or open (caller contract).
        let d = unsafe { dev.as_ref() };
        let buf = match d {
            // The device's own allocation: DMA memory for a PCI device (vfio), aligned
            // heap memory (at least a page, so MIN_ALIGN holds) for the rest.
            Some(d) => d.dev.alloc(nbytes).map_err(|e| e.to_string()),
            None => Buffer::alloc(nbytes, ioswitch_page_size().max(MIN_ALIGN)),
        };
        let buf = match buf {
            Ok(b) => b,
            Err(why) => {
                let dev_name = d.map_or("no device".to_string(), |d| d.dev.uri().to_string());
                fail(libc::ENOMEM, format!("{F}({dev_name}, {nbytes}): {why}"));
                return ptr::null_mut();
            }
        };
        match table::insert(buf) {
            Ok(p) => p.cast(),
            Err(why) => {
                fail(libc::ENOMEM, format!("{F}({nbytes}): {why}"));
                ptr::null_mut()
            }
        }
    })
}

fn ioswitch_page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Frees a buffer from `ioswitch_buf_alloc` (NULL is ignored and returns 0).
/// Returns 0; -EBUSY, freeing nothing, while a command holds the buffer (submitted and
/// not yet completed); -EINVAL, freeing nothing, when `buf` is not the start of a live
/// buffer from `ioswitch_buf_alloc` (never allocated, already freed, or a pointer into the
/// middle of a buffer).
///
/// # Safety
/// None beyond passing a pointer: `buf` is only compared with live buffers, never
/// dereferenced unless it is one.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_buf_free(buf: *mut c_void) -> c_int {
    const F: &str = "ioswitch_buf_free";
    guard(F, -libc::EIO, || {
        if buf.is_null() {
            return 0;
        }
        match table::free(buf as usize) {
            Ok(()) => 0,
            Err(Refusal::Busy) => fail(
                libc::EBUSY,
                format!("{F}({buf:p}): the buffer belongs to a command that has not completed; free it after its completion"),
            ),
            Err(Refusal::Unknown) => fail(
                libc::EINVAL,
                format!("{F}({buf:p}): not the start of a live buffer from ioswitch_buf_alloc (already freed?)"),
            ),
        }
    })
}

/// The size in bytes of a buffer from `ioswitch_buf_alloc`, or 0 when `buf` is not the
/// start of a live one.
///
/// # Safety
/// None beyond passing a pointer (see `ioswitch_buf_free`).
#[no_mangle]
pub unsafe extern "C" fn ioswitch_buf_size(buf: *const c_void) -> usize {
    guard("ioswitch_buf_size", 0, || table::lookup(buf as usize).map_or(0, Slot::len))
}

/// Buffers taken out of the table for one command; put back on drop.
pub(crate) struct Taken {
    pub slots: Vec<&'static Slot>,
    pub bufs: Vec<Buffer>,
}

impl Drop for Taken {
    fn drop(&mut self) {
        for (slot, buf) in self.slots.drain(..).zip(self.bufs.drain(..)) {
            table::put(slot, buf);
        }
    }
}

/// Takes `nbufs` buffers named by C pointers out of the table (all or none), with the
/// message recorded on failure.
///
/// # Safety
/// `bufs` is NULL (then `nbufs` must be 0) or valid for reading `nbufs` pointers.
pub(crate) unsafe fn take_bufs(
    func: &str,
    bufs: *const *mut c_void,
    nbufs: u32,
    mut each: impl FnMut(&'static Slot, Buffer),
) -> Result<(), c_int> {
    if nbufs == 0 {
        return Ok(());
    }
    if bufs.is_null() {
        return Err(fail(libc::EINVAL, format!("{func}: bufs is NULL but nbufs is {nbufs}")));
    }
    if nbufs > IOSWITCH_MAX_BUFS {
        return Err(fail(
            libc::EINVAL,
            format!("{func}: nbufs {nbufs}: at most {IOSWITCH_MAX_BUFS} buffers per command"),
        ));
    }
    // SAFETY: bufs is valid for reading nbufs pointers (caller contract).
    let ptrs = unsafe { std::slice::from_raw_parts(bufs, nbufs as usize) };
    let mut taken: Vec<(&'static Slot, Buffer)> = Vec::new();
    for (i, &p) in ptrs.iter().enumerate() {
        match table::take(p as usize) {
            Ok(t) if ptrs.len() == 1 => {
                each(t.0, t.1);
                return Ok(());
            }
            Ok(t) => taken.push(t),
            Err(r) => {
                for (slot, buf) in taken {
                    table::put(slot, buf);
                }
                return Err(refusal(func, i, nbufs, p, r));
            }
        }
    }
    for (slot, buf) in taken {
        each(slot, buf);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn refusal(func: &str, i: usize, n: u32, p: *mut c_void, r: Refusal) -> c_int {
    match r {
        Refusal::Busy => fail(
            libc::EBUSY,
            format!("{func}: buffer {i} of {n} ({p:p}) already belongs to a command that has not completed (or appears twice)"),
        ),
        Refusal::Unknown => fail(
            libc::EINVAL,
            format!("{func}: buffer {i} of {n} ({p:p}) is not the start of a live buffer from ioswitch_buf_alloc"),
        ),
    }
}

/// Fills a completion for a synchronous command.
///
/// # Safety
/// `cpl` is NULL or valid for writing one struct.
#[inline(always)]
unsafe fn write_cpl(cpl: *mut ioswitch_cpl, status: Status, result: u64) {
    if !cpl.is_null() {
        // SAFETY: cpl is non-null and valid for a write (caller contract).
        unsafe { cpl.write(ioswitch_cpl::new(ptr::null_mut(), status, result)) };
    }
}

/// What a synchronous call's error means for the completion and the return value.
///
/// # Safety
/// `cpl` is NULL or valid for writing one struct.
#[cold]
#[inline(never)]
unsafe fn sync_error(func: &str, cpl: *mut ioswitch_cpl, e: Error) -> c_int {
    let status = match e {
        Error::Command { status, .. } => status,
        ref other => errno_to_status(other.errno().unwrap_or(libc::EIO)),
    };
    // SAFETY: forwarded caller contract on cpl.
    unsafe { write_cpl(cpl, status, 0) };
    from_error(func, &e)
}

/// The return value of a synchronous call, with `*cpl` filled.
///
/// # Safety
/// `cpl` is NULL or valid for writing one struct.
#[inline(always)]
unsafe fn sync_done(func: &str, cpl: *mut ioswitch_cpl, r: ioswitch_rs::Result<u64>) -> c_int {
    match r {
        Ok(result) => {
            // SAFETY: forwarded caller contract on cpl.
            unsafe { write_cpl(cpl, Status::OK, result) };
            0
        }
        // SAFETY: as above.
        Err(e) => unsafe { sync_error(func, cpl, e) },
    }
}

/// The shared body of `ioswitch_pass` and `ioswitch_pass_admin`.
///
/// The common case (valid arguments, one buffer) stays inline and small; NULL
/// arguments, several buffers and every failure take out-of-line paths.
///
/// # Safety
/// As `ioswitch_pass`.
#[inline(always)]
unsafe fn pass_with(
    func: &str,
    call: impl Fn(&Device, &ioswitch_rs::Cmd, &mut [Buffer]) -> ioswitch_rs::Result<u64>,
    dev: *const ioswitch_dev,
    cmd: *const ioswitch_cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    cpl: *mut ioswitch_cpl,
) -> c_int {
    guard(func, -libc::EIO, move || {
        // SAFETY: dev and cmd are null or valid (caller contract).
        let (d, c) = match unsafe { dev_and_cmd(func, dev, cmd) } {
            Ok(dc) => dc,
            Err(e) => return e,
        };
        if nbufs != 1 || bufs.is_null() {
            // SAFETY: forwarded caller contract.
            return unsafe { pass_many(func, &call, d, c, bufs, nbufs, cpl) };
        }
        // The common case: one buffer, lent to the call in its table slot (busy while
        // the call runs), not moved out and back, no allocation.
        // SAFETY: bufs is valid for one pointer (caller contract).
        let p = unsafe { *bufs };
        let lent = |b: &mut Buffer| {
            let r = call(&d.dev, c, std::slice::from_mut(b));
            // SAFETY: cpl is null or valid (caller contract).
            unsafe { sync_done(func, cpl, r) }
        };
        match table::with(p as usize, lent) {
            Ok(r) => r,
            Err(why) => refusal(func, 0, 1, p, why),
        }
    })
}

/// The device and the command of a pass, or the error code after recording which is NULL
/// or that the command set is unknown.
///
/// # Safety
/// `dev` and `cmd` are NULL or valid for the lifetime the caller gives them.
#[inline(always)]
unsafe fn dev_and_cmd<'a>(
    func: &str,
    dev: *const ioswitch_dev,
    cmd: *const ioswitch_cmd,
) -> Result<(&'a ioswitch_dev, &'a ioswitch_rs::Cmd), c_int> {
    // SAFETY: forwarded caller contract.
    let (Some(d), Some(c)) = (unsafe { dev.as_ref() }, unsafe { cmd.as_ref() }) else {
        return Err(null_dev_or_cmd(func, dev));
    };
    Ok((d, to_cmd(c, func)?))
}

/// `ioswitch_pass` with no buffer or several (or a NULL `bufs`): the buffers taken out
/// of the table for the call and put back after it.
///
/// # Safety
/// As `ioswitch_pass`.
#[inline(never)]
unsafe fn pass_many(
    func: &str,
    call: &impl Fn(&Device, &ioswitch_rs::Cmd, &mut [Buffer]) -> ioswitch_rs::Result<u64>,
    d: &ioswitch_dev,
    c: &ioswitch_rs::Cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    cpl: *mut ioswitch_cpl,
) -> c_int {
    let mut taken = Taken { slots: Vec::new(), bufs: Vec::new() };
    // SAFETY: bufs is valid for nbufs pointers (caller contract).
    if let Err(e) = unsafe {
        take_bufs(func, bufs, nbufs, |s, b| {
            taken.slots.push(s);
            taken.bufs.push(b);
        })
    } {
        return e;
    }
    let r = call(&d.dev, c, &mut taken.bufs);
    drop(taken);
    // SAFETY: cpl is null or valid (caller contract).
    unsafe { sync_done(func, cpl, r) }
}

/// Records which of `dev` and `cmd` is NULL (`dev` when both) and returns -EINVAL.
#[cold]
#[inline(never)]
fn null_dev_or_cmd(func: &str, dev: *const ioswitch_dev) -> c_int {
    null_arg(func, if dev.is_null() { "dev" } else { "cmd" })
}

/// Records "`func`: `what` is NULL" and returns -EINVAL.
#[cold]
#[inline(never)]
pub(crate) fn null_arg(func: &str, what: &str) -> c_int {
    fail(libc::EINVAL, format!("{func}: {what} is NULL"))
}

/// Runs an I/O command synchronously on the device's sync interface, with `nbufs`
/// buffers from `ioswitch_buf_alloc` as its data (read into or written from, in order;
/// several make vectored I/O; a buffer may be longer than its share). The buffers are the
/// command's during the call.
///
/// Returns 0 on success, or a negative errno (the OS error when there is one, -EIO for a
/// device error without one, -EINVAL for a bad command or buffer, -ERANGE out of range).
/// When `cpl` is not NULL it receives the status and result of a command that was run,
/// or refused by the device's checks (out of range, misaligned, too small a buffer); a
/// call refused for its arguments (a NULL `dev` or `cmd`, an unknown command set, a
/// pointer that is not a live buffer from `ioswitch_buf_alloc`, a buffer already in use)
/// leaves it unchanged.
///
/// # Safety
/// `dev` an open device; `cmd` a valid command; `bufs` valid for reading `nbufs` pointers
/// (NULL when `nbufs` is 0); `cpl` NULL or valid for writing one struct.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pass(
    dev: *const ioswitch_dev,
    cmd: *const ioswitch_cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    cpl: *mut ioswitch_cpl,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { pass_with("ioswitch_pass", Device::pass, dev, cmd, bufs, nbufs, cpl) }
}

/// Runs an I/O command synchronously on the device's sync interface with any caller
/// memory as its data, like `pread(2)` / `pwrite(2)`: `len` bytes at `data` are read into
/// or written from. No buffer from `ioswitch_buf_alloc` is needed, and none is looked up.
///
/// Contract for `data`:
/// - it must be valid for reading and writing `len` bytes (for a write command too: not
///   read-only memory such as a string literal), and nothing else may use those bytes
///   during the call: no other thread, and no command submitted to a queue (memory given
///   to `ioswitch_queue_submit` must be from `ioswitch_buf_alloc`). The library keeps no
///   reference to it after the call returns;
/// - for direct I/O (`direct=1`) it must be aligned as the device needs
///   (`ioswitch_geo.dio_mem_align`, with lengths and offsets multiples of
///   `dio_offset_align`): the library checks alignment, range and size as for any
///   buffer and refuses a misaligned one with -EINVAL and a message saying what is
///   misaligned;
/// - `len` 0 means the command moves no data (flush, write zeroes, trim); `data` is then
///   not looked at and may be NULL. A NULL `data` with `len` > 0 is refused (-EINVAL).
///
/// Returns 0 on success, or a negative errno as `ioswitch_pass` (-EINVAL for a bad
/// command, a NULL argument, or memory too small or misaligned for the command; -ERANGE
/// out of range), with `ioswitch_last_error()` saying why. When `cpl` is not NULL it
/// receives the status and result of a command that was run or refused by the device's
/// checks; a call refused for its arguments (a NULL `dev`, `cmd` or `data`) leaves it
/// unchanged.
///
/// # Safety
/// `dev` an open device; `cmd` a valid command; `data` as above; `cpl` NULL or valid for
/// writing one struct.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pass_raw(
    dev: *const ioswitch_dev,
    cmd: *const ioswitch_cmd,
    data: *mut c_void,
    len: usize,
    cpl: *mut ioswitch_cpl,
) -> c_int {
    const F: &str = "ioswitch_pass_raw";
    guard(F, -libc::EIO, move || {
        // SAFETY: dev and cmd are null or valid (caller contract).
        let (d, c) = match unsafe { dev_and_cmd(F, dev, cmd) } {
            Ok(dc) => dc,
            Err(e) => return e,
        };
        // One compare for both 0 < len and len <= isize::MAX (what a slice may span); no
        // data, a NULL `data` and an impossible length go out of line.
        let r = match ptr::NonNull::new(data.cast::<u8>()) {
            Some(p) if len.wrapping_sub(1) < isize::MAX as usize => {
                // SAFETY: data is valid for reads and writes of len bytes, and nothing
                // else uses them during this call (caller contract); `b` is used only
                // for this call and stays in its ManuallyDrop.
                let mut b = unsafe { Buffer::borrow_raw(p, len) };
                d.dev.pass(c, std::slice::from_mut(&mut *b))
            }
            // SAFETY: cpl is null or valid (caller contract).
            _ => return unsafe { pass_raw_other(F, d, c, data, len, cpl) },
        };
        // SAFETY: cpl is null or valid (caller contract).
        unsafe { sync_done(F, cpl, r) }
    })
}

/// `ioswitch_pass_raw` without data (`len` 0), or refused: a NULL `data` with a length,
/// or a length no memory can have.
///
/// # Safety
/// `cpl` is NULL or valid for writing one struct.
#[cold]
#[inline(never)]
unsafe fn pass_raw_other(
    func: &str,
    d: &ioswitch_dev,
    c: &ioswitch_rs::Cmd,
    data: *mut c_void,
    len: usize,
    cpl: *mut ioswitch_cpl,
) -> c_int {
    if len == 0 {
        let r = d.dev.pass(c, &mut []);
        // SAFETY: forwarded caller contract on cpl.
        return unsafe { sync_done(func, cpl, r) };
    }
    if data.is_null() {
        return fail(libc::EINVAL, format!("{func}: data is NULL but len is {len}"));
    }
    fail(libc::EINVAL, format!("{func}: len {len} is larger than any memory can be (at most {})", isize::MAX))
}

/// Runs an admin command (identify, get log page, get/set features, …; `cmd->set` must be
/// `IOSWITCH_SET_ADMIN`) synchronously on the admin interface, with `nbufs` buffers as its
/// data. Returns and reports as `ioswitch_pass`; the result is completion DW0-1.
///
/// # Safety
/// As `ioswitch_pass`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_pass_admin(
    dev: *const ioswitch_dev,
    cmd: *const ioswitch_cmd,
    bufs: *const *mut c_void,
    nbufs: u32,
    cpl: *mut ioswitch_cpl,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { pass_with("ioswitch_pass_admin", Device::pass_admin, dev, cmd, bufs, nbufs, cpl) }
}

/// Records the static "queue full" message (no allocation on the submit path).
pub(crate) fn busy_message() {
    set_static(c"queue full: depth commands are outstanding; reap completions (poke or wait), then submit again");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{ioswitch_cmd_read, ioswitch_cmd_write};
    use crate::cpl::ioswitch_cpl_ok;
    use crate::error::last_string;

    fn open(uri: &str, opts: &str) -> (c_int, *mut ioswitch_dev) {
        let (u, o) = (CString::new(uri).unwrap(), CString::new(opts).unwrap());
        let mut dev = ptr::null_mut();
        // SAFETY: valid strings and out pointer.
        let r = unsafe { ioswitch_dev_open(u.as_ptr(), o.as_ptr(), &mut dev) };
        (r, dev)
    }

    #[test]
    fn open_errors_name_the_input_and_leave_out_null() {
        let (r, dev) = open("/nonexistent/ioswitch-capi.img", "");
        assert_eq!(r, -libc::ENOENT);
        assert!(dev.is_null());
        assert!(last_string().contains("/nonexistent/ioswitch-capi.img"), "{}", last_string());
        let (r, _) = open("1MiB", "async=emu,threads=x");
        assert_eq!(r, -libc::EINVAL);
        assert!(last_string().contains("\"threads\""), "{}", last_string());
        // SAFETY: a null uri is refused, not read.
        let r = unsafe { ioswitch_dev_open(ptr::null(), ptr::null(), &mut ptr::null_mut()) };
        assert_eq!(r, -libc::EINVAL);
        assert!(last_string().contains("uri is NULL"));
    }

    #[test]
    fn fd_lends_the_device_descriptor_of_a_file_and_names_a_ramdisk_without_one() {
        let file = TempPath::new(&std::env::temp_dir(), "dev-fd");
        let (r, dev) = open(file.uri(), "create=1,size=1MiB");
        assert_eq!(r, 0, "{}", last_string());
        let mut fd = -2;
        // SAFETY: an open device and a writable int.
        assert_eq!(unsafe { ioswitch_dev_fd(dev, &mut fd) }, 0, "{}", last_string());
        // The descriptor is the file's: the same inode as the path.
        // SAFETY: an all-zero stat is valid; fd is the device's open descriptor.
        let (mut a, mut b): (libc::stat, libc::stat) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let path = CString::new(file.uri()).unwrap();
        // SAFETY: valid descriptor, path and out structs.
        unsafe {
            assert_eq!(libc::fstat(fd, &mut a), 0);
            assert_eq!(libc::stat(path.as_ptr(), &mut b), 0);
        }
        assert_eq!((a.st_dev, a.st_ino), (b.st_dev, b.st_ino));
        // SAFETY: an open device.
        unsafe { ioswitch_dev_close(dev) };

        let (r, dev) = open("1MiB", "");
        assert_eq!(r, 0, "{}", last_string());
        // SAFETY: an open device, then NULL arguments, refused before anything is written.
        unsafe {
            fd = -2;
            assert_eq!(ioswitch_dev_fd(dev, &mut fd), -libc::ENODATA);
            assert_eq!(fd, -2, "left as it was");
            assert!(
                last_string().contains("1MiB") && last_string().contains("no file descriptor"),
                "{}",
                last_string()
            );
            assert_eq!(ioswitch_dev_fd(ptr::null(), &mut fd), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_fd: dev is NULL");
            assert_eq!(ioswitch_dev_fd(dev, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_fd: fd is NULL");
            ioswitch_dev_close(dev);
        }
    }

    #[test]
    fn geo_and_ident_refuse_null_arguments_naming_them() {
        let (r, dev) = open("1MiB", "");
        assert_eq!(r, 0, "{}", last_string());
        // SAFETY: NULL arguments are refused before anything is read or written.
        unsafe {
            assert_eq!(ioswitch_dev_geo(ptr::null(), &mut ioswitch_geo::default()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_geo: dev is NULL");
            assert_eq!(ioswitch_dev_geo(dev, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_geo: geo is NULL");
            assert_eq!(ioswitch_dev_ident(ptr::null(), &mut std::mem::zeroed()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_ident: dev is NULL");
            assert_eq!(ioswitch_dev_ident(dev, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_ident: ident is NULL");
            assert_eq!(ioswitch_dev_dax(ptr::null(), &mut std::mem::zeroed()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_dax: dev is NULL");
            assert_eq!(ioswitch_dev_dax(dev, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(last_string(), "ioswitch_dev_dax: dax is NULL");
            ioswitch_dev_close(dev);
        }
    }

    #[test]
    fn a_ramdisk_round_trips_data_through_pass() {
        let (r, dev) = open("1MiB", "");
        assert_eq!(r, 0, "{}", last_string());
        let mut geo = ioswitch_geo::default();
        // SAFETY: dev is open and geo a valid out location.
        assert_eq!(unsafe { ioswitch_dev_geo(dev, &mut geo) }, 0);
        assert_eq!((geo.lba_size, geo.bytes), (512, 1 << 20));
        // SAFETY: dev is open; the buffers are used as the API says and freed once.
        unsafe {
            let mut id = std::mem::zeroed::<ioswitch_ident>();
            assert_eq!(ioswitch_dev_ident(dev, &mut id), 0);
            assert_eq!(CStr::from_ptr(id.kind_name).to_str().unwrap(), "ramdisk");
            assert!(id.path.is_null());
            // A ramdisk is not DAX: no DAX identity, said by name, and *dax left alone.
            let mut dax = ioswitch_dax { mode: ptr::null(), namespace_name: ptr::null(), align: 7, size: 7 };
            assert_eq!(ioswitch_dev_dax(dev, &mut dax), -libc::ENODATA);
            assert!(last_string().contains("not a DAX device") && last_string().contains("1MiB"), "{}", last_string());
            assert_eq!((dax.align, dax.size), (7, 7));
            let w = ioswitch_buf_alloc(dev, 4096);
            let r = ioswitch_buf_alloc(dev, 4096);
            assert_eq!(w as usize % geo.buffer_align as usize, 0);
            assert_eq!(ioswitch_buf_size(w), 4096);
            std::slice::from_raw_parts_mut(w as *mut u8, 4096).fill(0x5a);
            let mut c = crate::cmd::ioswitch_cmd::default();
            let mut cpl = std::mem::zeroed::<ioswitch_cpl>();
            ioswitch_cmd_write(1, 8, 8, &mut c);
            assert_eq!(ioswitch_pass(dev, &c, &w, 1, &mut cpl), 0, "{}", last_string());
            assert!(ioswitch_cpl_ok(&cpl));
            ioswitch_cmd_read(1, 8, 8, &mut c);
            assert_eq!(ioswitch_pass(dev, &c, &r, 1, &mut cpl), 0);
            assert_eq!(cpl.result, 4096);
            assert!(std::slice::from_raw_parts(r as *const u8, 4096).iter().all(|&b| b == 0x5a));
            ioswitch_cmd_read(1, 2047, 2, &mut c);
            assert_eq!(ioswitch_pass(dev, &c, &r, 1, &mut cpl), -libc::ERANGE);
            assert!(!ioswitch_cpl_ok(&cpl));
            assert_eq!(ioswitch_buf_free(w), 0);
            assert_eq!(ioswitch_buf_free(r), 0);
            ioswitch_dev_close(dev);
        }
    }

    #[test]
    fn pass_refuses_busy_inner_and_freed_buffers_and_keeps_them_usable() {
        use crate::queue::{ioswitch_queue_drain, ioswitch_queue_init, ioswitch_queue_submit, ioswitch_queue_term};
        let (r, dev) = open("1MiB", "sync=nil,async=nil");
        assert_eq!(r, 0, "{}", last_string());
        // SAFETY: dev is open; buffers and the queue are used as the API says.
        unsafe {
            let b = ioswitch_buf_alloc(dev, 4096);
            let mut c = crate::cmd::ioswitch_cmd::default();
            let mut cpl = std::mem::zeroed::<ioswitch_cpl>();
            ioswitch_cmd_read(1, 0, 8, &mut c);
            assert_eq!(ioswitch_pass(dev, &c, &b, 1, &mut cpl), 0, "{}", last_string());
            assert_eq!(cpl.result, 4096);
            // A buffer submitted to a queue belongs to it until its completion.
            let mut q = ptr::null_mut();
            assert_eq!(ioswitch_queue_init(dev, 1, &mut q), 0);
            assert_eq!(ioswitch_queue_submit(q, &c, &b, 1, ptr::null_mut()), 0);
            assert_eq!(ioswitch_pass(dev, &c, &b, 1, ptr::null_mut()), -libc::EBUSY);
            assert!(last_string().contains("already belongs to a command"), "{}", last_string());
            assert_eq!(ioswitch_queue_drain(q), 1);
            assert_eq!(ioswitch_pass(dev, &c, &b, 1, ptr::null_mut()), 0, "{}", last_string());
            assert_eq!(ioswitch_queue_term(q), 0);
            // A pointer into the middle of a buffer, and a freed buffer, are unknown.
            let inner = (b as *mut u8).add(512) as *mut c_void;
            assert_eq!(ioswitch_pass(dev, &c, &inner, 1, ptr::null_mut()), -libc::EINVAL);
            assert!(last_string().contains("not the start of a live buffer"), "{}", last_string());
            // A call refused for its arguments leaves the completion as it was (the
            // header says so); a command refused by the device's checks fills it.
            let mut kept = std::mem::zeroed::<ioswitch_cpl>();
            kept.result = 0x5eed;
            assert_eq!(ioswitch_pass(dev, &c, &inner, 1, &mut kept), -libc::EINVAL);
            assert_eq!(kept.result, 0x5eed, "a refused buffer must leave cpl unchanged");
            assert_eq!(ioswitch_buf_free(b), 0, "idle again after every pass");
            assert_eq!(ioswitch_pass(dev, &c, &b, 1, ptr::null_mut()), -libc::EINVAL);
            // NULL arguments.
            assert_eq!(ioswitch_pass(ptr::null(), &c, &b, 1, ptr::null_mut()), -libc::EINVAL);
            assert!(last_string().contains("dev is NULL"), "{}", last_string());
            assert_eq!(ioswitch_pass(dev, ptr::null(), &b, 1, ptr::null_mut()), -libc::EINVAL);
            assert!(last_string().contains("cmd is NULL"), "{}", last_string());
            ioswitch_dev_close(dev);
        }
    }

    /// A file path unique to this process and test, removed on drop.
    struct TempPath(std::path::PathBuf);

    impl TempPath {
        fn new(dir: &Path, name: &str) -> TempPath {
            let p = dir.join(format!("ioswitch-capi-{name}-{}.img", std::process::id()));
            let _ = std::fs::remove_file(&p);
            TempPath(p)
        }
        fn uri(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn fill(p: &mut [u8], seed: u8) {
        for (i, b) in p.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed).wrapping_add((i >> 9) as u8);
        }
    }

    /// Writes 8 KiB from `w` at byte 4096 with ioswitch_pass_raw and reads it back into `r`.
    ///
    /// # Safety
    /// `dev` is open; `w` and `r` are valid for 8192 bytes each and used by nothing else.
    unsafe fn raw_round_trip(dev: *mut ioswitch_dev, w: *mut u8, r: *mut u8) {
        use crate::cmd::{ioswitch_cmd_fs_read, ioswitch_cmd_fs_write};
        // SAFETY: caller contract on dev, w and r.
        unsafe {
            let (ws, rs) = (std::slice::from_raw_parts_mut(w, 8192), std::slice::from_raw_parts_mut(r, 8192));
            fill(ws, 7);
            rs.fill(0);
            let mut c = crate::cmd::ioswitch_cmd::default();
            let mut cpl = std::mem::zeroed::<ioswitch_cpl>();
            ioswitch_cmd_fs_write(4096, 8192, &mut c);
            assert_eq!(ioswitch_pass_raw(dev, &c, w.cast(), 8192, &mut cpl), 0, "{}", last_string());
            assert!(ioswitch_cpl_ok(&cpl));
            assert_eq!(cpl.result, 8192);
            ioswitch_cmd_fs_read(4096, 8192, &mut c);
            cpl.result = 0;
            assert_eq!(ioswitch_pass_raw(dev, &c, r.cast(), 8192, &mut cpl), 0, "{}", last_string());
            assert_eq!(cpl.result, 8192);
            assert!(ioswitch_cpl_ok(&cpl));
            assert!(ws == rs, "data read back differs");
            // NVM commands too: 512-byte LBAs, so byte 4096 is LBA 8.
            rs.fill(0);
            ioswitch_cmd_read(1, 8, 16, &mut c);
            assert_eq!(ioswitch_pass_raw(dev, &c, r.cast(), 8192, &mut cpl), 0, "{}", last_string());
            assert!(ws == rs, "data read back with an NVM read differs");
        }
    }

    #[test]
    fn pass_raw_round_trips_vec_and_malloc_memory_on_a_ramdisk_and_a_file() {
        let file = TempPath::new(&std::env::temp_dir(), "raw-rt");
        for (uri, opts) in [("1MiB", ""), (file.uri(), "create=1,size=1MiB,sync=psync")] {
            let (r, dev) = open(uri, opts);
            assert_eq!(r, 0, "{uri}: {}", last_string());
            let (mut w, mut rd) = (vec![0u8; 8192], vec![0u8; 8192]);
            // SAFETY: dev is open; the Vecs hold 8192 bytes each and nothing else uses them.
            unsafe { raw_round_trip(dev, w.as_mut_ptr(), rd.as_mut_ptr()) };
            // SAFETY: malloc'ed memory of 8192 bytes each, used by nothing else, freed once.
            unsafe {
                let (w, rd) = (libc::malloc(8192).cast::<u8>(), libc::malloc(8192).cast::<u8>());
                assert!(!w.is_null() && !rd.is_null());
                raw_round_trip(dev, w, rd);
                libc::free(w.cast());
                libc::free(rd.cast());
                ioswitch_dev_close(dev);
            }
        }
    }

    #[test]
    fn pass_raw_with_no_data_runs_a_flush() {
        use crate::cmd::{ioswitch_cmd_flush, ioswitch_cmd_fs_flush};
        let file = TempPath::new(&std::env::temp_dir(), "raw-flush");
        for (uri, opts) in [("1MiB", ""), (file.uri(), "create=1,size=1MiB")] {
            let (r, dev) = open(uri, opts);
            assert_eq!(r, 0, "{uri}: {}", last_string());
            // SAFETY: dev is open; no data is passed.
            unsafe {
                let mut c = crate::cmd::ioswitch_cmd::default();
                let mut cpl = std::mem::zeroed::<ioswitch_cpl>();
                cpl.errnum = -1;
                ioswitch_cmd_fs_flush(&mut c);
                assert_eq!(ioswitch_pass_raw(dev, &c, ptr::null_mut(), 0, &mut cpl), 0, "{}", last_string());
                assert!(ioswitch_cpl_ok(&cpl));
                ioswitch_cmd_flush(1, &mut c);
                assert_eq!(ioswitch_pass_raw(dev, &c, ptr::null_mut(), 0, ptr::null_mut()), 0, "{}", last_string());
                // len 0: the pointer is not looked at.
                let mut byte = 0u8;
                assert_eq!(ioswitch_pass_raw(dev, &c, (&raw mut byte).cast(), 0, ptr::null_mut()), 0);
                ioswitch_dev_close(dev);
            }
        }
    }

    #[test]
    fn pass_raw_names_null_arguments_and_refuses_bad_ranges_and_sizes() {
        let (r, dev) = open("1MiB", "");
        assert_eq!(r, 0, "{}", last_string());
        let mut mem = vec![0u8; 4096];
        let p: *mut c_void = mem.as_mut_ptr().cast();
        // SAFETY: dev is open; mem holds 4096 bytes used by nothing else; the NULL and
        // too-long arguments are refused before anything is read.
        unsafe {
            let mut c = crate::cmd::ioswitch_cmd::default();
            let mut cpl = std::mem::zeroed::<ioswitch_cpl>();
            ioswitch_cmd_read(1, 0, 8, &mut c);
            assert_eq!(ioswitch_pass_raw(ptr::null(), &c, p, 4096, &mut cpl), -libc::EINVAL);
            assert!(last_string().contains("ioswitch_pass_raw: dev is NULL"), "{}", last_string());
            assert_eq!(ioswitch_pass_raw(dev, ptr::null(), p, 4096, &mut cpl), -libc::EINVAL);
            assert!(last_string().contains("ioswitch_pass_raw: cmd is NULL"), "{}", last_string());
            assert_eq!(ioswitch_pass_raw(dev, &c, ptr::null_mut(), 4096, &mut cpl), -libc::EINVAL);
            assert!(last_string().contains("ioswitch_pass_raw: data is NULL but len is 4096"), "{}", last_string());
            assert_eq!(ioswitch_pass_raw(dev, &c, p, usize::MAX, &mut cpl), -libc::EINVAL);
            assert!(last_string().contains("len"), "{}", last_string());
            // A read past the end of the device: -ERANGE, reported in the completion too.
            ioswitch_cmd_read(1, 2047, 2, &mut c);
            assert_eq!(ioswitch_pass_raw(dev, &c, p, 4096, &mut cpl), -libc::ERANGE);
            assert!(!ioswitch_cpl_ok(&cpl));
            assert!(last_string().contains("out of range"), "{}", last_string());
            // Memory smaller than the command moves.
            ioswitch_cmd_read(1, 0, 16, &mut c);
            assert_eq!(ioswitch_pass_raw(dev, &c, p, 4096, &mut cpl), -libc::EINVAL);
            assert!(last_string().contains("moves 8192 bytes"), "{}", last_string());
            // A bad command set.
            c.set = 7;
            assert_eq!(ioswitch_pass_raw(dev, &c, p, 4096, &mut cpl), -libc::EINVAL);
            assert!(last_string().contains("cmd->set is 7"), "{}", last_string());
            ioswitch_dev_close(dev);
        }
    }

    #[test]
    fn pass_raw_refuses_misaligned_memory_for_direct_io() {
        use crate::cmd::{ioswitch_cmd_fs_read, ioswitch_cmd_fs_write};
        // On a disk file system: O_DIRECT needs one (tmpfs may not have it).
        let file = TempPath::new(Path::new("/var/tmp"), "raw-direct");
        let (r, dev) = open(file.uri(), "create=1,size=1MiB,direct=1,sync=psync");
        assert_eq!(r, 0, "{}", last_string());
        let mut geo = ioswitch_geo::default();
        // SAFETY: dev is open; geo is a valid out location.
        assert_eq!(unsafe { ioswitch_dev_geo(dev, &mut geo) }, 0);
        assert!(geo.dio_mem_align > 1, "direct I/O on {} needs no memory alignment", file.uri());
        let align = geo.buffer_align as usize;
        let mut mem = vec![0u8; 4096 + 2 * align];
        let off = mem.as_ptr().align_offset(align);
        // SAFETY: dev is open; both pointers lie inside mem with 4096 bytes after them,
        // used by nothing else.
        unsafe {
            let aligned = mem.as_mut_ptr().add(off);
            fill(std::slice::from_raw_parts_mut(aligned, 4096), 3);
            let mut c = crate::cmd::ioswitch_cmd::default();
            let mut cpl = std::mem::zeroed::<ioswitch_cpl>();
            ioswitch_cmd_fs_write(0, 4096, &mut c);
            assert_eq!(ioswitch_pass_raw(dev, &c, aligned.cast(), 4096, &mut cpl), 0, "{}", last_string());
            assert_eq!(cpl.result, 4096);
            let misaligned = aligned.add(1);
            ioswitch_cmd_fs_read(0, 4096, &mut c);
            assert_eq!(ioswitch_pass_raw(dev, &c, misaligned.cast(), 4096, &mut cpl), -libc::EINVAL);
            assert!(!ioswitch_cpl_ok(&cpl));
            let m = last_string();
            assert!(
                m.starts_with("ioswitch_pass_raw: ") && m.contains("direct I/O needs buffer address aligned"),
                "{m}"
            );
            // The aligned memory still reads back what was written.
            let mut back = vec![0u8; 4096 + align];
            let b = back.as_mut_ptr().add(back.as_ptr().align_offset(align));
            assert_eq!(ioswitch_pass_raw(dev, &c, b.cast(), 4096, &mut cpl), 0, "{}", last_string());
            assert!(std::slice::from_raw_parts(b, 4096) == std::slice::from_raw_parts(aligned, 4096));
            ioswitch_dev_close(dev);
        }
    }
}
