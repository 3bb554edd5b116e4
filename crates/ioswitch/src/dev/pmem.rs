//! Persistent memory on a [`Device`]: the identity of DAX devices ([`Dax`], from sysfs)
//! and load/store access to a `pmem` device's mapping ([`Device::pmem_range`]).

use super::Device;
use crate::be::pmem::PmemInfo;
use crate::error::{Error, Result};
use crate::sys::pmem::Lent;
use crate::sys::sysfs;
use serde::Serialize;
use std::path::Path;

/// The identity of persistent memory: what a devdax device, or the pmem block device
/// under a DAX file system, says about its namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dax {
    /// The namespace's mode: `devdax` or `fsdax` (as ndctl names them).
    pub mode: String,
    /// The namespace (`namespace0.0`), when sysfs names it.
    pub namespace: Option<String>,
    /// The alignment mappings must respect, in bytes (a devdax device's `align`; the
    /// page size where sysfs gives none).
    pub align: u64,
    /// Its size in bytes (the devdax device's, or the pmem block device's).
    pub size: u64,
}

/// The alignment the first attribute of `names` (relative to `dir`) that parses as a
/// number gives, when a power of two; else the page size.
fn align(dir: &Path, names: &[&str]) -> u64 {
    let first = names.iter().find_map(|n| sysfs::read_num::<u64>(&dir.join(n)));
    first.filter(|a| a.is_power_of_two()).unwrap_or(crate::sys::page_size() as u64)
}

/// The identity of devdax device `maj:min` from its sysfs directory: its size, and its
/// alignment from the device (`align`, Linux ≥ 5.10) or its region (`dax_region/align`).
pub(crate) fn devdax(devno: (u32, u32)) -> Option<Dax> {
    let dir = sysfs::dev_dir("char", devno)?;
    devdax_in(&dir)
}

pub(super) fn devdax_in(dir: &Path) -> Option<Dax> {
    let size = sysfs::read_num(&dir.join("size"))?;
    let align = align(
        dir,
        &["align", "device/align", "../dax_region/align", "device/dax_region/align", "dax_region/align", "../align"],
    );
    let namespace = ["../namespace", "device/namespace"].iter().find_map(|n| sysfs::read(&dir.join(n)));
    Some(Dax { mode: "devdax".into(), namespace, align, size })
}

/// The identity of the pmem block device `name` (`pmem0`) under a file: its namespace's
/// mode (`fsdax`), alignment and size; `None` when it is not a pmem device.
pub(crate) fn fsdax(name: &str) -> Option<Dax> {
    if !name.starts_with("pmem") {
        return None;
    }
    // A partition (pmem0p1) belongs to its disk's namespace.
    let disk = sysfs::disk_of(&std::fs::canonicalize(sysfs::class("block").join(name)).ok()?);
    let size = sysfs::read_num::<u64>(&disk.join("size")).map(|s| s * 512)?;
    let dev = disk.join("device");
    // The parent is the namespace itself (raw/fsdax without a pfn) or its pfn device,
    // whose `namespace` names the namespace.
    let namespace = sysfs::read(&dev.join("namespace"))
        .or_else(|| std::fs::canonicalize(&dev).ok()?.file_name().map(|n| n.to_string_lossy().into_owned()));
    let ns_mode = namespace
        .as_ref()
        .and_then(|n| sysfs::read(&sysfs::root().join("bus/nd/devices").join(n).join("mode")))
        .or_else(|| sysfs::read(&dev.join("mode")));
    let mode = match ns_mode.as_deref() {
        Some("memory") | Some("fsdax") | Some("pmem") | None => "fsdax".to_string(),
        Some("dax") => "devdax".to_string(),
        Some(other) => other.to_string(),
    };
    let align = align(&dev, &["align"]);
    Some(Dax { mode, namespace, align, size })
}

/// A range of a `pmem` device's mapping lent to the application
/// ([`Device::pmem_range`]): plain memory to load from and store to (it dereferences to
/// `[u8]`), and [`persist`](PmemSlice::persist) to make stores durable. It borrows the
/// device:
///
/// ```no_run
/// use ioswitch::Device;
/// let dev = Device::open("/dev/shm/x", &"sync=pmem,pmem_force=1,create=1,size=4KiB".parse()?)?;
/// let mut slice = dev.pmem_range(0, 4096)?;
/// slice[0] = 1;
/// slice.persist(0, 1)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// and so cannot outlive it (the same code with the device dropped first does not
/// compile: borrowed value does not live long enough):
///
/// ```compile_fail,E0597
/// use ioswitch::Device;
/// let mut slice = {
///     let dev = Device::open("/dev/shm/x", &"sync=pmem,pmem_force=1,create=1,size=4KiB".parse().unwrap()).unwrap();
///     dev.pmem_range(0, 4096).unwrap()
/// }; // `dev` dropped here while still borrowed
/// slice[0] = 1;
/// ```
///
/// Ranges lent at one time never overlap (a second, overlapping request is refused), and
/// while a range is lent, reads and writes of it through the command API fail with EBUSY:
/// the slice is the only way to it in this process. Loads and stores through the slice
/// are not guarded against SIGBUS (a poisoned page, a file another user shrank ends the
/// process, as with libpmem); [`read_at`](PmemSlice::read_at) and
/// [`write_at`](PmemSlice::write_at) copy under the guard and give EIO instead. Other
/// processes mapping the same file
/// share the memory, as with any shared mapping. A command that another thread started
/// before the range was lent is not waited for: do not lend a range that commands of
/// other threads are reading or writing at that moment.
pub struct PmemSlice<'a> {
    lent: Lent<'a>,
    /// The device's URI, for errors.
    uri: String,
}

impl PmemSlice<'_> {
    /// The range's offset in the device, in bytes.
    pub fn offset(&self) -> u64 {
        self.lent.offset() as u64
    }

    /// Makes bytes `off .. off + len` of the range (relative to its start) durable:
    /// writes their cache lines back (CLWB, CLFLUSHOPT or CLFLUSH) and fences. With
    /// `pmem_force=1` the same instructions run, on memory that is not persistent.
    pub fn persist(&self, off: usize, len: usize) -> Result<()> {
        self.check("persist", off, len)?;
        self.lent.persist(off, len);
        Ok(())
    }

    /// Makes the whole range durable ([`persist`](PmemSlice::persist) of all of it).
    pub fn persist_all(&self) {
        self.lent.persist(0, self.lent.slice.len());
    }

    /// Refuses `len` bytes at `off` that do not lie inside the range.
    fn check(&self, what: &str, off: usize, len: usize) -> Result<()> {
        let n = self.lent.slice.len();
        if off > n || len > n - off {
            return Err(Error::BadOpt {
                key: what.into(),
                why: format!("{len} bytes at {off} reach past the end of a {n}-byte pmem range"),
            });
        }
        Ok(())
    }

    /// A SIGBUS in a guarded copy of `len` bytes at `off`, as an EIO error.
    fn fault(&self, what: &str, off: usize, len: usize, at: Option<usize>) -> Error {
        Error::Os {
            dev: self.uri.clone(),
            what: format!(
                "{what} of {len} bytes at {off} of the pmem range at device offset {}: the kernel could not \
                 provide a page{}",
                self.offset(),
                at.map(|a| format!(" (at offset {a} of the range)")).unwrap_or_default()
            ),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        }
    }

    /// Copies `dst.len()` bytes at `off` of the range (relative to its start) into `dst`,
    /// under the SIGBUS guard the command API uses: a page the kernel cannot provide
    /// (poisoned persistent memory, a file another user shrank) gives an EIO error
    /// instead of ending the process. Plain loads through the slice are not guarded.
    pub fn read_at(&self, off: usize, dst: &mut [u8]) -> Result<()> {
        self.check("read_at", off, dst.len())?;
        self.lent.read_guarded(off, dst).map_err(|at| self.fault("read_at", off, dst.len(), at))
    }

    /// Copies `src` to `off` of the range (relative to its start) durably, as a write
    /// command does (non-temporal stores or stores + cache-line write-backs, then one
    /// fence: no [`persist`](PmemSlice::persist) needed), under the SIGBUS guard: a page the
    /// kernel cannot provide gives an EIO error instead of ending the process (the bytes
    /// may then be partly written). Plain stores through the slice are not guarded.
    pub fn write_at(&mut self, off: usize, src: &[u8]) -> Result<()> {
        self.check("write_at", off, src.len())?;
        self.lent.write_guarded(off, src).map_err(|at| self.fault("write_at", off, src.len(), at))
    }
}

impl std::ops::Deref for PmemSlice<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.lent.slice
    }
}

impl std::ops::DerefMut for PmemSlice<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.lent.slice
    }
}

impl std::fmt::Debug for PmemSlice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmemSlice").field("offset", &self.offset()).field("len", &self.lent.slice.len()).finish()
    }
}

impl Device {
    /// How the `pmem` interface mapped this device (mode, whether `pmem_force` is on, the
    /// write-back instruction); `None` when the sync interface is not `pmem`.
    pub fn pmem(&self) -> Option<PmemInfo> {
        self.inner.sync().and_then(|s| s.pmem()).map(|p| p.info)
    }

    /// Lends bytes `offset .. offset + len` of a `pmem` device's mapping to the caller:
    /// loads and stores go straight to the (persistent) memory, and
    /// [`PmemSlice::persist`] makes stores durable. Refused when the sync interface is not
    /// `pmem`, the range is empty or outside the device, the device is read-only, or the
    /// range overlaps one lent now.
    pub fn pmem_range(&self, offset: u64, len: usize) -> Result<PmemSlice<'_>> {
        let uri = &self.inner.uri;
        let p = self
            .inner
            .sync()
            .and_then(|s| s.pmem())
            .ok_or_else(|| self.inner.unsupported("pmem_range", "load/store access needs sync=pmem"))?;
        let size = p.map.len() as u64;
        if len == 0 {
            return Err(Error::BadOpt {
                key: "pmem_range".into(),
                why: format!("an empty range at {offset} of {uri}"),
            });
        }
        if offset > size || len as u64 > size - offset {
            return Err(Error::OutOfRange {
                dev: uri.clone(),
                what: "pmem range",
                start: offset,
                end: offset.saturating_add(len as u64),
                limit: size,
                unit: "bytes",
            });
        }
        if self.inner.opts.rdonly {
            return Err(self.inner.unsupported("pmem_range", "the device was opened read-only (rdonly=1)"));
        }
        let lent = p.map.lend(offset as usize, len).ok_or_else(|| Error::BadOpt {
            key: "pmem_range".into(),
            why: format!("{len} bytes at {offset} of {uri} overlap a range lent out now"),
        })?;
        Ok(PmemSlice { lent, uri: uri.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devdax_device_is_read_from_its_sysfs_directory() {
        let t = std::env::temp_dir().join(format!("ioswitch-devdax-sysfs-{}", std::process::id()));
        let region = t.join("region0/dax0.0");
        let dev = region.join("dax0.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("size"), "1071644672\n").unwrap();
        std::fs::write(region.join("namespace"), "namespace0.0\n").unwrap();
        std::fs::create_dir_all(region.join("dax_region")).unwrap();
        std::fs::write(region.join("dax_region/align"), "2097152\n").unwrap();
        let d = devdax_in(&dev).unwrap();
        assert_eq!(
            d,
            Dax { mode: "devdax".into(), namespace: Some("namespace0.0".into()), align: 2 << 20, size: 1071644672 }
        );
        // The device's own align (Linux ≥ 5.10) comes first.
        std::fs::write(dev.join("align"), "4096\n").unwrap();
        assert_eq!(devdax_in(&dev).unwrap().align, 4096);
        std::fs::remove_file(dev.join("size")).unwrap();
        assert_eq!(devdax_in(&dev), None);
        std::fs::remove_dir_all(&t).unwrap();
    }
}

#[cfg(test)]
mod name_tests {
    #[test]
    fn devdax_names_are_dax_region_dot_instance() {
        use super::super::open::is_devdax_name;
        for ok in ["dax0.0", "dax12.3"] {
            assert!(is_devdax_name(ok), "{ok}");
        }
        for bad in ["dax0", "dax.0", "dax0.", "daxa.0", "dax0.0p1", "pmem0", "dax_region"] {
            assert!(!is_devdax_name(bad), "{bad}");
        }
    }
}
