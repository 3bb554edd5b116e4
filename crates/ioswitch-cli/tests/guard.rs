//! The mounted-device write guard through the CLI and `ioswitch bench`: on a loop device
//! holding a mounted ext4 (made smaller than the device, so the tail past it is free to
//! write), `write` and `bench --rw=write` are refused naming the mount point and the
//! override, reads run, `info` says why writes are refused, and `allow_mounted_write=1`
//! (an `--opts` key for the device verbs, fio's job option for the bench) lets writes
//! to the free tail through; the file system checks clean afterwards. The library's own
//! cases (partitions, swap, device-mapper, NVMe) are in crates/ioswitch/tests/guard.rs.
//! Needs root, losetup, mkfs.ext4 and mount, else it says why it skips.

use ioswitch_testkit::skip;
use ioswitch_testkit::tools::OutputBounded;
use std::path::PathBuf;
use std::process::{Command, Output};

fn sh(prog: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(prog).args(args).output_bounded().map_err(|e| format!("{prog}: {e}"))?;
    if !o.status.success() {
        return Err(format!("{prog} {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn ioswitch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioswitch")).args(args).output_bounded().expect("run ioswitch")
}

fn ok(args: &[&str]) -> String {
    let o = ioswitch(args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(args: &[&str], dev: &str, mnt: &str) {
    let o = ioswitch(args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} wrote to {dev} while it is mounted on {mnt}");
    for part in [dev, mnt, "allow_mounted_write=1"] {
        assert!(e.contains(part), "{args:?}: the error does not name {part:?}: {e}");
    }
}

/// A loop device over a 64 MiB image with a 32 MiB ext4 at its start, mounted; torn down
/// on drop.
struct Mounted {
    dir: PathBuf,
    dev: String,
    mnt: String,
}

impl Mounted {
    fn new() -> Result<Mounted, String> {
        if sh("id", &["-u"])? != "0" {
            return Err("needs root (losetup, mount)".into());
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-guard-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("mnt")).map_err(|e| e.to_string())?;
        let img = dir.join("disk.img");
        std::fs::File::create(&img).and_then(|f| f.set_len(64 << 20)).map_err(|e| e.to_string())?;
        let dev = sh("losetup", &["--find", "--show", img.to_str().unwrap()])?;
        let mnt = dir.join("mnt").to_string_lossy().into_owned();
        let mut m = Mounted { dir, dev, mnt: String::new() };
        sh("mkfs.ext4", &["-q", "-F", &m.dev, "32M"])?;
        sh("mount", &["-t", "ext4", &m.dev, &mnt])?;
        m.mnt = mnt;
        Ok(m)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if !self.mnt.is_empty() {
            let _ = sh("umount", &[&self.mnt]);
        }
        for _ in 0..20 {
            if sh("losetup", &["-d", &self.dev]).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn device_verbs_and_bench_refuse_to_write_a_mounted_file_system() {
    let mut m = match Mounted::new() {
        Ok(m) => m,
        Err(why) => return skip("the CLI write-guard test", &why),
    };
    let (dev, mnt) = (m.dev.clone(), m.mnt.clone());
    let data = m.dir.join("4k.bin");
    std::fs::write(&data, vec![0x5a; 4096]).unwrap();
    let data = data.to_str().unwrap();

    refused(&["write", &dev, "--offset", "1048576", "--data", data], &dev, &mnt);
    refused(&["write", &dev, "--opts", "async=libaio", "--offset", "0", "--data", data], &dev, &mnt);
    let bench_write = ["bench", "--name=j", &format!("--filename={dev}"), "--rw=randwrite", "--bs=4k", "--size=1m"];
    refused(&bench_write, &dev, &mnt);
    // Refused before anything ran: no report.
    assert!(ioswitch(&bench_write).stdout.is_empty(), "bench ran the job before refusing it");
    let info = ok(&["info", &dev]);
    assert!(info.contains("refused") && info.contains(&mnt), "info does not say why writes are refused: {info}");

    // Reads run.
    let r = ioswitch(&["read", &dev, "--offset", "1024", "--length", "4096", "--out", "-"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(r.stdout.len(), 4096);
    ok(&["bench", "--name=r", &format!("--filename={dev}"), "--rw=randread", "--bs=4k", "--size=1m"]);

    // The override, on the 32 MiB past the file system.
    ok(&["write", &dev, "--opts", "allow_mounted_write=1", "--offset", "50331648", "--data", data]);
    let back = ioswitch(&["read", &dev, "--offset", "50331648", "--length", "4096", "--out", "-"]);
    assert_eq!(back.stdout, vec![0x5a; 4096]);
    ok(&[
        "bench",
        "--name=w",
        &format!("--filename={dev}"),
        "--rw=write",
        "--bs=64k",
        "--offset=40m",
        "--size=8m",
        "--allow_mounted_write=1",
    ]);

    sh("umount", &[&mnt]).unwrap();
    m.mnt.clear();
    sh("e2fsck", &["-f", "-n", &dev]).unwrap_or_else(|e| panic!("the file system was damaged: {e}"));
}

/// A tmpfs holding one 16 KiB file, mounted read-only; unmounted on drop.
struct ReadOnlyFs {
    dir: PathBuf,
    mnt: String,
}

impl ReadOnlyFs {
    fn new(content: &[u8]) -> Result<ReadOnlyFs, String> {
        if sh("id", &["-u"])? != "0" {
            return Err("needs root (mount)".into());
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-rofs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("mnt")).map_err(|e| e.to_string())?;
        let mnt = dir.join("mnt").to_string_lossy().into_owned();
        sh("mount", &["-t", "tmpfs", "-o", "size=1m", "tmpfs", &mnt])?;
        let fs = ReadOnlyFs { dir, mnt };
        std::fs::write(format!("{}/f", fs.mnt), content).map_err(|e| e.to_string())?;
        sh("mount", &["-o", "remount,ro", &fs.mnt])?;
        Ok(fs)
    }
}

impl Drop for ReadOnlyFs {
    fn drop(&mut self) {
        let _ = sh("umount", &[&self.mnt]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A file on a read-only file system: a write names the file, the read-write open and
/// the kernel's reason, and does not offer `rdonly=1` as its cure (it said "(rdonly=1
/// opens read-only)"); reads, `info` and a read job run, opened read-only.
#[test]
fn a_file_on_a_read_only_file_system_reads_and_its_write_says_why_not() {
    let content: Vec<u8> = (0..16384u32).map(|i| (i * 7 % 251) as u8).collect();
    let fs = match ReadOnlyFs::new(&content) {
        Ok(fs) => fs,
        Err(why) => return skip("the read-only file system test", &why),
    };
    let file = format!("{}/f", fs.mnt);
    let data = fs.dir.join("4k.bin");
    std::fs::write(&data, vec![0x5a; 4096]).unwrap();
    for args in [
        vec!["write", &file, "--offset", "0", "--data", data.to_str().unwrap()],
        vec!["bench", "--name=w", "--rw=write", "--bs=4k", "--size=16k"],
    ] {
        let mut args: Vec<String> = args.into_iter().map(String::from).collect();
        if args[0] == "bench" {
            args.push(format!("--filename={file}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ioswitch(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded on a read-only file system");
        for part in [file.as_str(), "open read-write", "Read-only file system", "work that only reads"] {
            assert!(e.contains(part), "{args:?}: the error does not say {part:?}: {e}");
        }
        assert!(!e.contains("(rdonly=1 opens read-only)"), "{args:?}: {e}");
    }
    let r = ioswitch(&["read", &file, "--offset", "4096", "--length", "8192", "--out", "-"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(r.stdout, content[4096..12288], "read back other bytes than the file holds");
    assert!(ok(&["info", &file]).contains("16KiB"), "info of a file on a read-only file system");
    ok(&["bench", "--name=r", &format!("--filename={file}"), "--rw=randread", "--bs=4k", "--size=16k"]);
    assert_eq!(std::fs::read(&file).unwrap(), content, "the file changed");
}
