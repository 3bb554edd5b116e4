//! A loop device over a backing file (needs root and `losetup`), and the clean-up of the
//! ones a killed run left behind.

use crate::lock;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// The loop device this process has attached, so that [`detach_attached`] can detach it
/// from a watchdog that ends the process without unwinding.
static ATTACHED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// A loop device over a backing file; detached (and the file removed) on drop. One at a
/// time per process.
pub struct LoopDev {
    /// The device, `/dev/loopN`.
    pub dev: PathBuf,
    /// The file behind it.
    pub backing: PathBuf,
}

impl LoopDev {
    /// Attaches a loop device over a new file of `bytes` bytes in `dir`, named
    /// `PREFIX-PID-loop.img`; first detaches the devices over such files of processes that
    /// no longer exist. The error says why it cannot (not root, no losetup, …).
    pub fn setup(dir: &Path, prefix: &str, bytes: u64) -> Result<LoopDev, String> {
        let uid = fs::metadata("/proc/self").map(|m| m.uid()).map_err(|e| format!("stat /proc/self: {e}"))?;
        if uid != 0 {
            return Err(format!("needs root to attach a loop device (running as uid {uid})"));
        }
        match Command::new("losetup").arg("--version").output() {
            Ok(o) if o.status.success() => {}
            Ok(_) | Err(_) => return Err("losetup is not installed".into()),
        }
        reap_stale(prefix);
        let backing = dir.join(format!("{prefix}-{}-loop.img", std::process::id()));
        let f = fs::File::create(&backing).map_err(|e| format!("create {}: {e}", backing.display()))?;
        f.set_len(bytes).map_err(|e| format!("size {}: {e}", backing.display()))?;
        drop(f);
        let out = Command::new("losetup").arg("--find").arg("--show").arg(&backing).output();
        let out = match out {
            Ok(o) if o.status.success() => o,
            Ok(o) => {
                let _ = fs::remove_file(&backing);
                return Err(format!("losetup --find --show failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
            }
            Err(e) => {
                let _ = fs::remove_file(&backing);
                return Err(format!("losetup: {e}"));
            }
        };
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        *lock(&ATTACHED) = Some(dev.clone());
        if !dev.starts_with("/dev/") {
            let _ = detach_attached();
            let _ = fs::remove_file(&backing);
            return Err(format!("losetup printed {:?}, not a device", dev));
        }
        Ok(LoopDev { dev, backing })
    }

    /// Detaches; returns what went wrong, if anything.
    pub fn teardown(self) -> Option<String> {
        let r = detach_attached();
        let _ = fs::remove_file(&self.backing);
        std::mem::forget(self);
        r
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = detach_attached();
        let _ = fs::remove_file(&self.backing);
    }
}

/// Detaches the loop device this process attached, if any is still attached; returns
/// what went wrong, if anything.
pub fn detach_attached() -> Option<String> {
    let dev = lock(&ATTACHED).take()?;
    detach(&dev).err()
}

/// `losetup -d`, retried briefly: udev may hold a just-used loop device open for a moment.
fn detach(dev: &Path) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..5 {
        match Command::new("losetup").arg("-d").arg(dev).output() {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => last = String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => return Err(format!("losetup -d {}: {e}", dev.display())),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("losetup -d {}: {last}", dev.display()))
}

/// Detaches loop devices an earlier run left behind when it was killed (their backing
/// file, `PREFIX-PID-loop.img`, names the pid of a process that no longer exists).
fn reap_stale(prefix: &str) {
    let Ok(out) = Command::new("losetup").arg("-a").output() else { return };
    let marker = format!("{prefix}-");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((dev, rest)) = line.split_once(':') else { continue };
        let Some(i) = rest.find(&marker) else { continue };
        let tail = &rest[i + marker.len()..];
        let Some(pid) = tail.strip_suffix(")").unwrap_or(tail).split_once("-loop.img").map(|(p, _)| p) else {
            continue;
        };
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) || Path::new("/proc").join(pid).exists() {
            continue;
        }
        match detach(Path::new(dev)) {
            Ok(()) => println!("detached {dev}, left behind by an earlier run (pid {pid})"),
            Err(e) => println!("could not detach {dev}, left behind by an earlier run: {e}"),
        }
    }
}
