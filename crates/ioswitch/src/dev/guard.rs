//! The mounted-device write guard: a block device, or an NVMe namespace reached through
//! its generic char device, that holds a mounted file system, a swap area or another
//! kernel user's data (device-mapper, md, any holder in sysfs) is opened with its writes
//! refused, so that a mistyped device name cannot destroy a file system. Reads stay
//! allowed; `allow_mounted_write=1` (fio's name) lifts the guard.
//!
//! The block layer's exclusive open is the first line: `O_EXCL` on a block device fails
//! with EBUSY while a file system, swap, device-mapper or md claims the device, a
//! partition of it, or its whole disk. It is a probe only (opened and closed at once):
//! holding it would refuse every other opener, this process's other devices included.
//! /proc/self/mountinfo, /proc/swaps and the sysfs `holders/` directories then name the
//! reason, and they alone cover the generic char device path (`/dev/ngXnY`), which has no
//! exclusive open, and namespaces whose block device node is missing.
//!
//! The state is taken at open: a device mounted after it was opened is not seen.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::sys::{self, sysfs};

/// A block device as the guard sees it: its name, number and sysfs directory.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Blk {
    name: String,
    devno: (u32, u32),
    dir: PathBuf,
}

impl Blk {
    fn of_dir(dir: &Path) -> Option<Blk> {
        let name = dir.file_name()?.to_string_lossy().into_owned();
        let devno = sysfs::parse_devno(&fs::read_to_string(dir.join("dev")).ok()?)?;
        Some(Blk { name, devno, dir: dir.to_path_buf() })
    }
}

/// Why writes to the block device `devno` must be refused, or `None` when nothing uses it.
/// `node` is its device node, for the exclusive-open probe.
pub(crate) fn block_in_use(node: &Path, devno: (u32, u32)) -> Option<String> {
    // Nobody claims the device, its partitions or its disk: nothing to name.
    if !exclusive_open_busy(node) {
        return None;
    }
    let dir = sysfs::dev_dir("block", devno);
    let me = dir.as_deref().and_then(Blk::of_dir);
    if let Some(why) = me.as_ref().and_then(|b| users(&related(b), &Sources::read())) {
        return Some(why);
    }
    // A claim that none of those name: another mount namespace, or a program that holds
    // an exclusive open (mkfs, another tool). Ask again briefly: two openers probing at
    // the same moment see each other's probe.
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if !exclusive_open_busy(node) {
            return None;
        }
    }
    Some(format!(
        "{} is claimed by another user (the block layer refuses it an exclusive open: EBUSY), though no \
         mount, swap area or holder in this mount namespace names it",
        node.display()
    ))
}

/// Why writes to the NVMe namespace whose block device lives in sysfs at `blk_dir` must
/// be refused (the path of a generic char device `/dev/ngXnY`, which has no exclusive
/// open of its own).
pub(crate) fn namespace_in_use(blk_dir: &Path) -> Option<String> {
    let b = Blk::of_dir(blk_dir)?;
    let node = Path::new("/dev").join(&b.name);
    if let Some(why) = users(&related(&b), &Sources::read()) {
        return Some(why);
    }
    // The namespace's block device node may be claimed by something the tables do not
    // name (see block_in_use).
    if node_devno(&node) == Some(b.devno) {
        return block_in_use(&node, b.devno);
    }
    None
}

/// Why writes to NVMe namespace `nsid` (every namespace for 0 or 0xFFFFFFFF) of the
/// controller whose sysfs directory is `ctrl_dir` must be refused: for admin commands
/// (format, sanitize, …) that reach the controller.
pub(crate) fn controller_in_use(ctrl_dir: &Path, nsid: u32) -> Option<String> {
    let all = nsid == 0 || nsid == u32::MAX;
    let dirs = sysfs::sorted_entries(ctrl_dir, |p| {
        p.join("queue").is_dir() && p.join("nsid").is_file() && (all || sysfs::read_num(&p.join("nsid")) == Some(nsid))
    });
    dirs.iter().find_map(|d| namespace_in_use(d))
}

/// The sysfs directory of the NVMe controller behind a device's sysfs directory: the
/// controller itself (`nvmeX`), or the parent of a namespace (`nvmeXnY`, `ngXnY`).
pub(crate) fn controller_dir(dev_dir: &Path) -> Option<PathBuf> {
    let name = dev_dir.file_name()?.to_str()?;
    let is_ctrl = name.strip_prefix("nvme").is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()));
    if is_ctrl {
        Some(dev_dir.to_path_buf())
    } else {
        dev_dir.parent().map(Path::to_path_buf)
    }
}

/// Whether someone claims block device `node` (see [`sys::exclusive_open_busy`]).
fn exclusive_open_busy(node: &Path) -> bool {
    CString::new(node.as_os_str().as_bytes()).is_ok_and(|c| sys::exclusive_open_busy(&c))
}

/// The device, its partitions, and for a partition its whole disk: writing any of them
/// reaches data the others hold.
fn related(b: &Blk) -> Vec<Blk> {
    let mut out = vec![b.clone()];
    if b.dir.join("partition").exists() {
        if let Some(disk) = b.dir.parent().and_then(Blk::of_dir) {
            out.push(disk);
        }
    } else {
        let parts = sysfs::sorted_entries(&b.dir, |p| p.join("partition").exists());
        out.extend(parts.iter().filter_map(|p| Blk::of_dir(p)));
    }
    out
}

/// The system tables the guard reads, as text (canned in tests).
struct Sources {
    mountinfo: String,
    swaps: String,
}

impl Sources {
    fn read() -> Sources {
        Sources {
            mountinfo: fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
            swaps: fs::read_to_string("/proc/swaps").unwrap_or_default(),
        }
    }
}

/// The first user of any of `devs` that the tables name, in words.
fn users(devs: &[Blk], src: &Sources) -> Option<String> {
    let numbers: Vec<(u32, u32)> = devs.iter().map(|b| b.devno).collect();
    let devno_of = |p: &str| node_devno(Path::new(p));
    for m in mounts(&src.mountinfo) {
        // The number in mountinfo is the file system's st_dev, which for btrfs and others
        // is not the device's: the mount source names it then.
        let hit = numbers.contains(&m.devno)
            || (m.source.starts_with('/') && devno_of(&m.source).is_some_and(|d| numbers.contains(&d)));
        if hit {
            return Some(format!("{} is mounted on {} ({})", m.source, m.point, m.fstype));
        }
    }
    for s in swaps(&src.swaps) {
        if devno_of(&s).is_some_and(|d| numbers.contains(&d)) {
            return Some(format!("{s} is in use as swap"));
        }
    }
    for b in devs {
        if let Some(h) = holders(&b.dir).into_iter().next() {
            return Some(format!("/dev/{} is held by {h}", b.name));
        }
    }
    None
}

fn node_devno(p: &Path) -> Option<(u32, u32)> {
    let m = fs::metadata(p).ok()?;
    m.file_type().is_block_device().then(|| (libc::major(m.rdev()), libc::minor(m.rdev())))
}

/// One line of mountinfo, the fields the guard uses.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    devno: (u32, u32),
    point: String,
    fstype: String,
    source: String,
}

/// Parses /proc/self/mountinfo (proc(5)): `ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS…] -
/// FSTYPE SOURCE SUPEROPTS`; lines that do not have that shape are skipped.
fn mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let f: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            if f.len() < 6 || t.len() < 2 {
                return None;
            }
            Some(Mount {
                devno: sysfs::parse_devno(f[2])?,
                point: unescape(f[4]),
                fstype: unescape(t[0]),
                source: unescape(t[1]),
            })
        })
        .collect()
}

/// The file names of /proc/swaps (a header line, then `FILENAME TYPE SIZE USED PRIO`).
fn swaps(text: &str) -> Vec<String> {
    text.lines().skip(1).filter_map(|l| l.split_whitespace().next()).map(unescape).collect()
}

/// Undoes the octal escapes (`\040` for a space, …) the kernel writes in these tables.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) => {
                let v = d.iter().fold(0u32, |a, c| a * 8 + (c - b'0') as u32);
                out.push(v as u8);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The kernel users listed in a block device's `holders/` directory, in words:
/// device-mapper devices by their name, md arrays, anything else by its sysfs name.
fn holders(dir: &Path) -> Vec<String> {
    let names = sysfs::sorted_names(&dir.join("holders")).unwrap_or_default();
    names
        .into_iter()
        .map(|n| {
            let h = dir.join("holders").join(&n);
            if let Some(dm) = sysfs::read(&h.join("dm/name")) {
                format!("device-mapper device {dm} (/dev/{n})")
            } else if h.join("md").is_dir() {
                format!("md array /dev/{n}")
            } else {
                format!("/dev/{n}")
            }
        })
        .collect()
}

/// NVM I/O opcodes that never change the medium: flush, read, compare, verify,
/// reservation report, zone management receive. Every other NVM command (write, write
/// zeroes, DSM, write uncorrectable, copy, zone send and append, vendor commands) may
/// write, and is refused on a guarded device.
pub(crate) fn nvm_opcode_reads_only(opcode: u8) -> bool {
    matches!(opcode, 0x00 | 0x02 | 0x05 | 0x0C | 0x0E | 0x7A)
}

/// Admin opcodes that leave the data alone: get log page, identify, set and get features,
/// device self-test, keep alive. Format, sanitize, namespace management and attachment,
/// security send, firmware, queue creation and deletion (which would pull the kernel
/// driver's queues away) and vendor commands are refused while a namespace is in use.
pub(crate) fn admin_opcode_keeps_data(opcode: u8) -> bool {
    matches!(opcode, 0x02 | 0x06 | 0x09 | 0x0A | 0x14 | 0x18)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
98 22 7:1 / /mnt/with\\040space rw,relatime shared:50 - ext4 /dev/loop0p1 rw
99 22 0:45 / /srv rw shared:51 - btrfs /dev/loop3 rw,space_cache
100 22 0:26 / /dev/shm rw - tmpfs tmpfs rw
bad line without separator
";

    #[test]
    fn mountinfo_lines_give_number_point_type_and_source() {
        let m = mounts(MOUNTINFO);
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[1],
            Mount {
                devno: (7, 1),
                point: "/mnt/with space".into(),
                fstype: "ext4".into(),
                source: "/dev/loop0p1".into()
            }
        );
        assert_eq!((m[2].devno, m[2].fstype.as_str()), ((0, 45), "btrfs"));
        assert_eq!(m[3].source, "tmpfs");
    }

    #[test]
    fn optional_mountinfo_fields_do_not_shift_the_rest() {
        let m = mounts("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n");
        assert_eq!(m[0].point, "/mnt2");
        assert_eq!(m[0].fstype, "ext3");
        assert_eq!(m[0].source, "/dev/root");
    }

    #[test]
    fn swap_table_gives_file_names() {
        let t = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/loop2  partition\t1020\t0\t-2\n/var/my\\040swap file 4 0 -3\n";
        assert_eq!(swaps(t), vec!["/dev/loop2".to_string(), "/var/my swap".to_string()]);
        assert!(swaps("Filename Type Size Used Priority\n").is_empty());
    }

    #[test]
    fn octal_escapes_decode_and_lone_backslashes_stay() {
        assert_eq!(unescape("a\\040b\\011c"), "a b\tc");
        assert_eq!(unescape("tail\\"), "tail\\");
        assert_eq!(unescape("\\09x"), "\\09x");
    }

    #[test]
    fn a_mount_of_the_device_number_is_named() {
        let devs = [Blk { name: "loop0p1".into(), devno: (7, 1), dir: PathBuf::from("/nonexistent") }];
        let src = Sources { mountinfo: MOUNTINFO.into(), swaps: String::new() };
        let why = users(&devs, &src).unwrap();
        assert_eq!(why, "/dev/loop0p1 is mounted on /mnt/with space (ext4)");
        let other = [Blk { name: "loop5".into(), devno: (7, 5), dir: PathBuf::from("/nonexistent") }];
        assert_eq!(users(&other, &src), None);
    }

    /// A loop disk with two partitions, the second under device-mapper; an NVMe
    /// controller whose namespace 2 is an md member: the holders are named, and a free
    /// device has none.
    #[test]
    fn holders_of_a_device_its_partitions_and_its_disk_are_named_from_sysfs() {
        let t = sysfs::Tree::new("guard");
        let l = "devices/virtual/block/loop3";
        t.block(l, (7, 3))
            .block(&format!("{l}/loop3p1"), (259, 0))
            .file(&format!("{l}/loop3p1/partition"), "1")
            .block(&format!("{l}/loop3p2"), (259, 1))
            .file(&format!("{l}/loop3p2/partition"), "2")
            .dir(&format!("{l}/loop3p1/holders"))
            .dir(&format!("{l}/holders"))
            .block("devices/virtual/block/dm-0", (253, 0))
            .file("devices/virtual/block/dm-0/dm/name", "vg-data")
            .link(&format!("{l}/loop3p2/holders/dm-0"), "devices/virtual/block/dm-0");
        let c = "devices/pci0000:00/0000:00:05.0/nvme/nvme0";
        for (ns, min) in [(1, 1), (2, 2)] {
            t.block(&format!("{c}/nvme0n{ns}"), (259, 10 + min))
                .file(&format!("{c}/nvme0n{ns}/nsid"), &ns.to_string())
                .dir(&format!("{c}/nvme0n{ns}/queue"));
        }
        t.block("devices/virtual/block/md0", (9, 0))
            .dir("devices/virtual/block/md0/md")
            .link(&format!("{c}/nvme0n2/holders/md0"), "devices/virtual/block/md0");
        let none = Sources { mountinfo: String::new(), swaps: String::new() };
        sysfs::with_root(&t.root, || {
            let blk = |devno| Blk::of_dir(&sysfs::dev_dir("block", devno).unwrap()).unwrap();
            let disk = blk((7, 3));
            let names: Vec<String> = related(&disk).into_iter().map(|b| b.name).collect();
            assert_eq!(names, ["loop3", "loop3p1", "loop3p2"]);
            let want = "/dev/loop3p2 is held by device-mapper device vg-data (/dev/dm-0)";
            assert_eq!(users(&related(&disk), &none).as_deref(), Some(want));
            // A partition's users include its disk's, not its sibling's.
            let p1: Vec<String> = related(&blk((259, 0))).into_iter().map(|b| b.name).collect();
            assert_eq!(p1, ["loop3p1", "loop3"]);
            assert_eq!(users(&related(&blk((259, 0))), &none), None);
            let ctrl = t.root.join(c);
            assert_eq!(controller_dir(&ctrl.join("nvme0n1")).unwrap(), ctrl);
            assert_eq!(controller_in_use(&ctrl, 1), None);
            let md = "/dev/nvme0n2 is held by md array /dev/md0";
            assert_eq!(controller_in_use(&ctrl, 2).as_deref(), Some(md));
            assert_eq!(controller_in_use(&ctrl, u32::MAX).as_deref(), Some(md), "a broadcast nsid reaches all");
        });
    }

    #[test]
    fn read_only_opcodes_are_the_ones_that_cannot_change_the_medium() {
        for op in [0x00, 0x02, 0x05, 0x0C, 0x7A] {
            assert!(nvm_opcode_reads_only(op), "{op:#x}");
        }
        for op in [0x01, 0x04, 0x08, 0x09, 0x19, 0x79, 0x7D, 0x80, 0x81] {
            assert!(!nvm_opcode_reads_only(op), "{op:#x}");
        }
        for op in [0x02, 0x06, 0x0A] {
            assert!(admin_opcode_keeps_data(op), "{op:#x}");
        }
        // Delete/create queues, namespace management, format, security send, sanitize.
        for op in [0x00, 0x01, 0x04, 0x05, 0x0D, 0x15, 0x80, 0x81, 0x84, 0xC0] {
            assert!(!admin_opcode_keeps_data(op), "{op:#x}");
        }
    }
}
