//! The mounted-device write guard, for real: loop devices holding a mounted ext4, a
//! partition of a mounted disk, swap, a device-mapper device on top and an exclusive
//! opener; in the QEMU guest also an NVMe namespace mounted through `/dev/nvmeXnY` and
//! written through `/dev/ngXnY`. Every case checks that commands which may write are
//! refused with the device, the user and the override named, that reads still work, that
//! `allow_mounted_write=1` lets writes through, and that the file system checks clean
//! afterwards.
//!
//! These tests need root, losetup, mkfs.ext4 and mount; without them each test says why
//! it skips (in the guest, `IOSWITCH_VM=1`, a skip is a failure). The NVMe test is
//! `#[ignore]`d: `tests/vm/nvme-tests.sh` runs it in the guest with `--include-ignored`.

use ioswitch::{AsyncIface, Cmd, Data, Device, Error, Opts};
use ioswitch_testkit::{run, skip};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the loop-device tests need from the machine, asked of the system's own tools.
fn loop_tools() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (losetup, mount)".into());
    }
    for (prog, arg) in [("losetup", "--version"), ("mkfs.ext4", "-V"), ("mount", "--version"), ("e2fsck", "-V")] {
        run(prog, &[arg]).map_err(|e| format!("{prog} is not usable: {e}"))?;
    }
    Ok(())
}

/// The start of the loop-device tests: skips test `t` (`None`) when [`loop_tools`] are
/// missing, else a [`Setup`] named `tag` with a loop device of `mib` MiB (no partitions).
fn loop_setup(t: &str, tag: &str, mib: u64) -> Option<(Setup, PathBuf)> {
    if let Err(why) = loop_tools() {
        skip(t, &why);
        return None;
    }
    let mut s = Setup::new(tag);
    let dev = s.loop_dev(mib, false).unwrap();
    Some((s, dev))
}

fn tmpdir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("ioswitch-guard-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Something to undo when a test ends, passed or failed: unmount, swapoff, dmsetup
/// remove, losetup -d, in the reverse order of setting up.
struct Setup {
    undo: Vec<(String, Vec<String>)>,
    dir: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        Setup { undo: Vec::new(), dir: tmpdir(tag) }
    }
    fn then_undo(&mut self, prog: &str, args: &[&str]) {
        self.undo.push((prog.into(), args.iter().map(|s| s.to_string()).collect()));
    }
    /// A loop device over a new sparse image of `mib` MiB; with `parts`, an MBR with two
    /// primary partitions of equal size and the kernel's partition devices (`-P`).
    fn loop_dev(&mut self, mib: u64, parts: bool) -> Result<PathBuf, String> {
        let img = self.dir.join(format!("disk{}.img", self.undo.len()));
        let f = std::fs::File::create(&img).map_err(|e| format!("{}: {e}", img.display()))?;
        f.set_len(mib << 20).map_err(|e| format!("{}: {e}", img.display()))?;
        if parts {
            write_mbr(&img, mib << 11)?;
        }
        let img_s = img.to_str().unwrap();
        let mut args = vec!["--find", "--show"];
        if parts {
            args.push("-P");
        }
        args.push(img_s);
        let dev = run("losetup", &args)?;
        self.then_undo("losetup", &["-d", &dev]);
        let dev = PathBuf::from(dev);
        if parts {
            for p in [part(&dev, 1), part(&dev, 2)] {
                wait_for(&p)?;
            }
        }
        Ok(dev)
    }
    /// ext4 on `dev`, mounted on a new directory; returns the mount point.
    fn mount_ext4(&mut self, dev: &Path) -> Result<PathBuf, String> {
        let d = dev.to_str().unwrap();
        run("mkfs.ext4", &["-q", "-F", d])?;
        let mnt = self.dir.join(format!("mnt{}", self.undo.len()));
        std::fs::create_dir_all(&mnt).unwrap();
        run("mount", &["-t", "ext4", d, mnt.to_str().unwrap()])?;
        self.then_undo("umount", &[mnt.to_str().unwrap()]);
        std::fs::write(mnt.join("keep.txt"), b"data that must survive\n").unwrap();
        run("sync", &[])?;
        Ok(mnt)
    }
    /// Unmounts now (the undo list keeps its entry, which then fails quietly).
    fn umount(&mut self, mnt: &Path) {
        run("umount", &[mnt.to_str().unwrap()]).unwrap();
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        while let Some((prog, args)) = self.undo.pop() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // losetup -d may race a just-closed user for a moment.
            for _ in 0..20 {
                if run(&prog, &args).is_ok() || prog != "losetup" {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn part(dev: &Path, n: u32) -> PathBuf {
    PathBuf::from(format!("{}p{n}", dev.display()))
}

fn wait_for(p: &Path) -> Result<(), String> {
    for _ in 0..100 {
        if p.exists() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{} did not appear", p.display()))
}

/// A DOS partition table with two Linux partitions splitting `sectors` after the first
/// MiB (the layout fdisk makes), written into the image's first sector.
fn write_mbr(img: &Path, sectors: u64) -> Result<(), String> {
    let mut mbr = [0u8; 512];
    let first = 2048u64;
    let each = (sectors - first) / 2;
    for (i, start) in [first, first + each].into_iter().enumerate() {
        let e = &mut mbr[446 + 16 * i..446 + 16 * (i + 1)];
        e[1..4].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
        e[4] = 0x83;
        e[5..8].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
        e[8..12].copy_from_slice(&(start as u32).to_le_bytes());
        e[12..16].copy_from_slice(&(each as u32).to_le_bytes());
    }
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(img).map_err(|e| e.to_string())?;
    f.write_all_at(&mbr, 0).map_err(|e| e.to_string())
}

fn opts(s: &str) -> Opts {
    s.parse().unwrap()
}

/// Asserts a refusal by the guard: EBUSY, naming the device, `user` and the override.
fn assert_guarded(what: &str, r: Result<(), Error>, dev: &Path, user: &str) {
    let e = match r {
        Ok(()) => panic!("{what} on {} went through, but {user} uses it", dev.display()),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(matches!(e, Error::InUse { .. }), "{what}: not the guard's error: {msg}");
    assert_eq!(e.errno(), Some(libc::EBUSY), "{what}: {msg}");
    for part in [&dev.display().to_string(), user, "allow_mounted_write=1"] {
        assert!(msg.contains(part), "{what}: {msg:?} does not name {part:?}");
    }
}

fn pass(dev: &Device, cmd: Cmd, len: usize) -> Result<(), Error> {
    let mut bufs = if len > 0 { vec![dev.alloc(len)?] } else { vec![] };
    dev.pass(&cmd, &mut bufs).map(|_| ())
}

/// A write through an async queue: `Err` when refused at submit; `Ok` once it reached
/// the interface, whatever its completion said.
fn queued_write(dev: &Device, offset: u64) -> Result<(), Error> {
    let mut q = dev.queue(4)?;
    let buf = dev.alloc(4096)?;
    q.submit(&Cmd::fs_write(offset, 4096), Data::One(buf), 1).map_err(|r| r.error)?;
    q.drain(|_| {})?;
    Ok(())
}

/// Every kind of write a block device takes, each refused; reads allowed.
fn check_block_refusals(uri: &Path, user: &str) {
    let u = uri.to_str().unwrap();
    let dev = Device::open(u, &Opts::default()).unwrap();
    let why = dev.ident().in_use.clone().unwrap_or_else(|| panic!("{u}: ident().in_use is None while {user} uses it"));
    assert!(why.contains(user), "{u}: in_use {why:?} does not name {user:?}");
    pass(&dev, Cmd::fs_read(1 << 20, 4096), 4096).unwrap();
    pass(&dev, Cmd::fs_flush(), 0).unwrap();
    assert_guarded("write", pass(&dev, Cmd::fs_write(1 << 20, 4096), 4096), uri, user);
    assert_guarded("trim", pass(&dev, Cmd::fs_trim(1 << 20, 4096), 0), uri, user);
    assert_guarded("write zeroes", pass(&dev, Cmd::write_zeroes(1, 2048, 8), 0), uri, user);
    assert_guarded("deallocate", pass(&dev, Cmd::dsm(1, 1, true), 4096), uri, user);
    for a in [AsyncIface::Libaio, AsyncIface::IoUring, AsyncIface::Thrpool] {
        let o = Opts { r#async: Some(a), ..Opts::default() };
        let d = Device::open(u, &o).unwrap();
        assert_guarded(&format!("async={a} write"), queued_write(&d, 1 << 20), uri, user);
    }
    // rdonly=1 needs no guard: every write is refused as read-only.
    let ro = Device::open(u, &opts("rdonly=1")).unwrap();
    assert_eq!(ro.ident().in_use, None);
    pass(&ro, Cmd::fs_read(0, 4096), 4096).unwrap();
}

/// With `allow_mounted_write=1` a write goes through: the bytes at `offset` read and
/// written back unchanged, so the file system under them stays whole.
fn write_back_with_override(uri: &Path, offset: u64) {
    let dev = Device::open(uri.to_str().unwrap(), &opts("allow_mounted_write=1")).unwrap();
    assert_eq!(dev.ident().in_use, None);
    let mut b = vec![dev.alloc(4096).unwrap()];
    dev.pass(&Cmd::fs_read(offset, 4096), &mut b).unwrap();
    dev.pass(&Cmd::fs_write(offset, 4096), &mut b).unwrap();
    dev.pass(&Cmd::fs_flush(), &mut []).unwrap();
}

fn fsck_clean(dev: &Path) {
    run("e2fsck", &["-f", "-n", dev.to_str().unwrap()]).unwrap_or_else(|e| panic!("file system damaged: {e}"));
}

#[test]
fn a_mounted_file_system_refuses_writes_and_allows_reads() {
    const T: &str = "a_mounted_file_system_refuses_writes_and_allows_reads";
    let Some((mut s, dev)) = loop_setup(T, "mounted", 64) else {
        return;
    };
    let mnt = s.mount_ext4(&dev).unwrap();
    check_block_refusals(&dev, &format!("mounted on {}", mnt.display()));
    write_back_with_override(&dev, 1 << 20);
    assert_eq!(std::fs::read(mnt.join("keep.txt")).unwrap(), b"data that must survive\n");
    s.umount(&mnt);
    fsck_clean(&dev);
    // Unmounted, nothing guards it: writes go through.
    let d = Device::open(dev.to_str().unwrap(), &Opts::default()).unwrap();
    assert_eq!(d.ident().in_use, None);
    pass(&d, Cmd::fs_write(32 << 20, 4096), 4096).unwrap();
}

#[test]
fn a_disk_with_a_mounted_partition_refuses_writes_but_its_other_partition_takes_them() {
    const T: &str = "a_disk_with_a_mounted_partition_refuses_writes_but_its_other_partition_takes_them";
    if let Err(why) = loop_tools() {
        return skip(T, &why);
    }
    let mut s = Setup::new("part");
    let dev = match s.loop_dev(64, true) {
        Ok(d) => d,
        // Probe the kernel's partition support independently: losetup -P made no nodes.
        Err(e) => return skip(T, &format!("the kernel made no partition devices (no DOS partition support?): {e}")),
    };
    let p1 = part(&dev, 1);
    let mnt = s.mount_ext4(&p1).unwrap();
    let user = format!("{} is mounted on {}", p1.display(), mnt.display());
    check_block_refusals(&dev, &user);
    check_block_refusals(&p1, &format!("mounted on {}", mnt.display()));
    // The other partition holds nothing in use.
    let p2 = part(&dev, 2);
    let d = Device::open(p2.to_str().unwrap(), &Opts::default()).unwrap();
    assert_eq!(d.ident().in_use, None, "{}", p2.display());
    pass(&d, Cmd::fs_write(0, 4096), 4096).unwrap();
    write_back_with_override(&dev, 2 << 20);
    s.umount(&mnt);
    fsck_clean(&p1);
}

#[test]
fn a_swap_device_refuses_writes() {
    const T: &str = "a_swap_device_refuses_writes";
    let Some((mut s, dev)) = loop_setup(T, "swap", 32) else {
        return;
    };
    let d = dev.to_str().unwrap();
    run("mkswap", &[d]).unwrap();
    if let Err(e) = run("swapon", &[d]) {
        return skip(T, &format!("swapon refused here: {e}"));
    }
    s.then_undo("swapoff", &[d]);
    check_block_refusals(&dev, "in use as swap");
    // The swap signature is still there: swapoff and swapon take it again.
    run("swapoff", &[d]).unwrap();
    run("swapon", &[d]).unwrap();
}

#[test]
fn a_device_under_device_mapper_refuses_writes() {
    const T: &str = "a_device_under_device_mapper_refuses_writes";
    if let Err(why) = loop_tools() {
        return skip(T, &why);
    }
    let misc = std::fs::read_to_string("/proc/misc").unwrap_or_default();
    if !misc.lines().any(|l| l.ends_with(" device-mapper")) {
        return skip(T, "no device-mapper in this kernel (/proc/misc lists none; load dm_mod)");
    }
    let mut s = Setup::new("dm");
    let dev = s.loop_dev(32, false).unwrap();
    let name = format!("ioswitch-guard-{}", std::process::id());
    let table = format!("0 {} linear {} 0", 32 << 11, dev.display());
    run("dmsetup", &["create", &name, "--table", &table]).unwrap();
    s.then_undo("dmsetup", &["remove", &name]);
    check_block_refusals(&dev, &format!("held by device-mapper device {name}"));
    write_back_with_override(&dev, 1 << 20);
}

#[test]
fn an_exclusive_opener_is_refused_even_when_no_table_names_it() {
    const T: &str = "an_exclusive_opener_is_refused_even_when_no_table_names_it";
    let Some((_s, dev)) = loop_setup(T, "excl", 16) else {
        return;
    };
    let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_EXCL | libc::O_CLOEXEC) };
    assert!(fd >= 0, "exclusive open of {}: {}", dev.display(), std::io::Error::last_os_error());
    check_block_refusals(&dev, "claimed by another user");
    // SAFETY: fd was opened above and is closed once.
    unsafe { libc::close(fd) };
    let d = Device::open(dev.to_str().unwrap(), &Opts::default()).unwrap();
    assert_eq!(d.ident().in_use, None);
}

/// The namespace with id 1 of the guest's first NVMe controller: (block device, generic
/// char device, controller), only on the QEMU guest's emulated controller (serial
/// `ioswitch-vm-0`), never on a real disk.
fn guest_namespace() -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let ctrl = Path::new("/sys/class/nvme/nvme0");
    let serial = std::fs::read_to_string(ctrl.join("serial")).map_err(|e| format!("no NVMe controller nvme0: {e}"))?;
    if serial.trim() != "ioswitch-vm-0" {
        return Err(format!("nvme0 is not the test guest's controller (serial {:?})", serial.trim()));
    }
    for e in std::fs::read_dir(ctrl).map_err(|e| e.to_string())?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let nsid = std::fs::read_to_string(e.path().join("nsid")).unwrap_or_default();
        if name.starts_with("nvme0n") && nsid.trim() == "1" {
            let ng = format!("/dev/ng0n{}", &name["nvme0n".len()..]);
            return Ok((Path::new("/dev").join(&name), PathBuf::from(ng), PathBuf::from("/dev/nvme0")));
        }
    }
    Err("nvme0 has no namespace 1".into())
}

#[test]
#[ignore = "needs the QEMU guest's NVMe; tests/vm/nvme-tests.sh runs it there"]
fn an_nvme_namespace_mounted_through_its_block_device_refuses_writes_through_its_char_device() {
    const T: &str = "an_nvme_namespace_mounted_through_its_block_device_refuses_writes_through_its_char_device";
    if let Err(why) = loop_tools() {
        return skip(T, &why);
    }
    let (blk, ng, ctrl) = match guest_namespace() {
        Ok(v) => v,
        Err(why) => return skip(T, &why),
    };
    let mut s = Setup::new("nvme");
    let mnt = s.mount_ext4(&blk).unwrap();
    let user = format!("{} is mounted on {}", blk.display(), mnt.display());
    let dev = Device::open(ng.to_str().unwrap(), &Opts::default()).unwrap();
    let lba = dev.geometry().lba_size as usize;
    assert_eq!(dev.ident().in_use, Some(format!("{user} (ext4)")));
    pass(&dev, Cmd::read(1, 2048, 8), 8 * lba).unwrap();
    pass(&dev, Cmd::flush(1), 0).unwrap();
    assert_guarded("NVM write", pass(&dev, Cmd::write(1, 2048, 8), 8 * lba), &ng, &user);
    assert_guarded("NVM write zeroes", pass(&dev, Cmd::write_zeroes(1, 2048, 8), 0), &ng, &user);
    assert_guarded("NVM deallocate", pass(&dev, Cmd::dsm(1, 1, true), 4096), &ng, &user);
    assert_guarded("io_uring_cmd write", queued_write(&dev, 1 << 20), &ng, &user);
    // The same namespace through the block device, and a format through the controller.
    check_block_refusals(&blk, &format!("mounted on {}", mnt.display()));
    let c = Device::open(ctrl.to_str().unwrap(), &Opts::default()).unwrap();
    let format = Cmd::admin(ioswitch::Sqe { opcode: 0x80, nsid: 1, ..Default::default() });
    assert_guarded("Format NVM", c.pass_admin(&format, &mut []).map(|_| ()), &ctrl, &user);
    let sanitize = Cmd::admin(ioswitch::Sqe { opcode: 0x84, nsid: 0, cdw10: 2, ..Default::default() });
    assert_guarded("Sanitize", c.pass_admin(&sanitize, &mut []).map(|_| ()), &ctrl, &user);
    let mut id = vec![c.alloc(4096).unwrap()];
    c.pass_admin(&Cmd::identify(0, 1, 0, 0), &mut id).unwrap();
    // With the override: the LBAs read and written back unchanged.
    let dev = Device::open(ng.to_str().unwrap(), &opts("allow_mounted_write=1")).unwrap();
    let mut b = vec![dev.alloc(8 * lba).unwrap()];
    dev.pass(&Cmd::read(1, 2048, 8), &mut b).unwrap();
    dev.pass(&Cmd::write(1, 2048, 8), &mut b).unwrap();
    assert_eq!(std::fs::read(mnt.join("keep.txt")).unwrap(), b"data that must survive\n");
    s.umount(&mnt);
    fsck_clean(&blk);
}
