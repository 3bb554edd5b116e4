//! sysfs, read in one place: the directory of a device number, attributes, a disk's
//! directory, a driver's name. Every path goes through [`root`], which a test points at a
//! canned tree ([`with_root`]), so the logic that reads sysfs (kind detection,
//! enumeration, the write guard's holders and partitions) is tested on any host.

use std::fs;
use std::path::{Path, PathBuf};

#[cfg(test)]
thread_local! {
    static ROOT: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Where sysfs is: `/sys`, or in a test the tree given to [`with_root`].
pub(crate) fn root() -> PathBuf {
    #[cfg(test)]
    if let Some(r) = ROOT.with(|r| r.borrow().clone()) {
        return r;
    }
    PathBuf::from("/sys")
}

/// Runs `f` with sysfs read from `tree` instead of `/sys` (this thread only).
#[cfg(test)]
pub(crate) fn with_root<R>(tree: &Path, f: impl FnOnce() -> R) -> R {
    ROOT.with(|r| *r.borrow_mut() = Some(tree.to_path_buf()));
    let out = f();
    ROOT.with(|r| *r.borrow_mut() = None);
    out
}

/// The canonical directory of device `maj:min` of `class` (`block` or `char`).
pub(crate) fn dev_dir(class: &str, devno: (u32, u32)) -> Option<PathBuf> {
    fs::canonicalize(root().join("dev").join(class).join(format!("{}:{}", devno.0, devno.1))).ok()
}

/// The kernel's name of device `maj:min` (`nvme0n1`, `ng0n1`, `loop0`).
pub(crate) fn dev_name(class: &str, devno: (u32, u32)) -> Option<String> {
    dev_dir(class, devno).and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// `/sys/class/NAME`.
pub(crate) fn class(name: &str) -> PathBuf {
    root().join("class").join(name)
}

/// An attribute's value, trimmed; `None` when it is missing or empty.
pub(crate) fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// An attribute parsed as a number.
pub(crate) fn read_num<T: std::str::FromStr>(p: &Path) -> Option<T> {
    read(p)?.parse().ok()
}

/// The names of the entries of directory `d`, sorted.
pub(crate) fn sorted_names(d: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> =
        fs::read_dir(d)?.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    Ok(names)
}

/// The entries of directory `d` that `keep` accepts, as paths, sorted; none when it
/// cannot be read.
pub(crate) fn sorted_entries(d: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(d)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| keep(p)).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// `maj:min` from a `dev` attribute's text.
pub(crate) fn parse_devno(s: &str) -> Option<(u32, u32)> {
    let (maj, min) = s.trim().split_once(':')?;
    Some((maj.parse().ok()?, min.parse().ok()?))
}

/// The sysfs directory of the whole disk holding `dir` (itself, or its parent for a
/// partition), where `queue/` lives.
pub(crate) fn disk_of(dir: &Path) -> PathBuf {
    if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf).unwrap_or_else(|| dir.to_path_buf())
    } else {
        dir.to_path_buf()
    }
}

/// The sysfs directory of the whole disk behind block device `maj:min`.
pub(crate) fn disk_dir(devno: (u32, u32)) -> Option<PathBuf> {
    dev_dir("block", devno).map(|d| disk_of(&d))
}

/// The kernel driver behind a disk's sysfs directory (`loop`, `virtio_blk`, `nvme`).
pub(crate) fn driver_of(disk: &Path) -> Option<String> {
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

/// A canned sysfs tree in a temporary directory, for tests: attribute files and the
/// symbolic links sysfs has (`dev/block/7:0 -> ../../devices/…`).
#[cfg(test)]
pub(crate) struct Tree {
    pub(crate) root: PathBuf,
}

#[cfg(test)]
impl Tree {
    pub(crate) fn new(tag: &str) -> Tree {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("ioswitch-sysfs-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        Tree { root }
    }
    /// Writes attribute `rel` (creating its directories).
    pub(crate) fn file(&self, rel: &str, text: &str) -> &Tree {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{text}\n")).unwrap();
        self
    }
    /// Makes directory `rel`.
    pub(crate) fn dir(&self, rel: &str) -> &Tree {
        fs::create_dir_all(self.root.join(rel)).unwrap();
        self
    }
    /// Links `rel` to the tree's `target` (both relative to the root).
    pub(crate) fn link(&self, rel: &str, target: &str) -> &Tree {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(self.root.join(target), p).unwrap();
        self
    }
    /// A block device: its directory under `devices/`, its `dev` attribute, and the links
    /// `dev/block/MAJ:MIN` and `class/block/NAME`.
    pub(crate) fn block(&self, dir: &str, devno: (u32, u32)) -> &Tree {
        let name = Path::new(dir).file_name().unwrap().to_str().unwrap().to_string();
        self.file(&format!("{dir}/dev"), &format!("{}:{}", devno.0, devno.1));
        self.link(&format!("dev/block/{}:{}", devno.0, devno.1), dir);
        self.link(&format!("class/block/{name}"), dir)
    }
}

#[cfg(test)]
impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_resolve_to_names_disks_and_drivers_in_a_canned_tree() {
        let t = Tree::new("basic");
        t.block("devices/virtual/block/loop3", (7, 3))
            .block("devices/virtual/block/loop3/loop3p1", (259, 0))
            .file("devices/virtual/block/loop3/loop3p1/partition", "1")
            .block("devices/pci0000:00/0000:00:04.0/virtio1/block/vda", (254, 0))
            .link("devices/pci0000:00/0000:00:04.0/virtio1/block/vda/device", "devices/pci0000:00/0000:00:04.0/virtio1")
            .link("devices/pci0000:00/0000:00:04.0/virtio1/driver", "bus/virtio/drivers/virtio_blk");
        with_root(&t.root, || {
            assert_eq!(dev_name("block", (7, 3)).as_deref(), Some("loop3"));
            assert_eq!(dev_name("block", (9, 9)), None);
            let p1 = dev_dir("block", (259, 0)).unwrap();
            assert_eq!(disk_of(&p1).file_name().unwrap(), "loop3");
            assert_eq!(disk_dir((259, 0)), dev_dir("block", (7, 3)));
            assert_eq!(driver_of(&disk_dir((7, 3)).unwrap()).as_deref(), Some("loop"));
            assert_eq!(driver_of(&disk_dir((254, 0)).unwrap()).as_deref(), Some("virtio_blk"));
        });
        assert_eq!(root(), PathBuf::from("/sys"), "the canned root is this closure's only");
        assert_eq!(parse_devno(" 259:12\n"), Some((259, 12)));
        assert_eq!(parse_devno("259"), None);
    }
}
