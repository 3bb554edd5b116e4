//! Directories for tests: scratch directories, a directory on a disk file system, a small
//! tmpfs of a chosen size.

use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A scratch directory for one test, emptied when made and removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `base/NAME-PID` (pass the test target's `env!("CARGO_TARGET_TMPDIR")` as `base`).
    pub fn new(base: impl AsRef<Path>, name: &str) -> Scratch {
        let dir = base.as_ref().join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create scratch directory {}: {e}", dir.display()));
        Scratch(dir)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// A path in the directory, as a string for a command line.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }

    /// A directory `name` in the directory, made (with any missing parents); its path.
    pub fn subdir(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
        fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create test directory {}: {e}", d.display()));
        d
    }

    /// A file of `len` zero bytes in the directory; its path as a string.
    pub fn file(&self, name: &str, len: u64) -> String {
        let p = self.path(name);
        fs::File::create(&p).and_then(|f| f.set_len(len)).unwrap_or_else(|e| panic!("create test file {p}: {e}"));
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The file system type holding `path`, from /proc/self/mountinfo (longest mount point
/// that contains it).
pub fn fs_type(path: &Path) -> Option<String> {
    let path = fs::canonicalize(path).ok()?;
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|&x| x == "-") else { continue };
        let (Some(mp), Some(ty)) = (f.get(4), f.get(sep + 1)) else { continue };
        let mp = mp.replace("\\040", " ");
        if path.starts_with(&mp) && !matches!(&best, Some((l, _)) if mp.len() < *l) {
            best = Some((mp.len(), ty.to_string()));
        }
    }
    best.map(|(_, t)| t)
}

/// Whether a file system type keeps its files in memory.
pub fn is_mem_fs(t: &str) -> bool {
    matches!(t, "tmpfs" | "ramfs")
}

/// The first of `candidates` that is (or can be made) a writable directory on a disk file
/// system, with its file system type; `probe` names the file written to check. The error
/// says what was wrong with each.
pub fn disk_dir(candidates: &[PathBuf], probe: &str) -> Result<(PathBuf, String), String> {
    let mut seen = Vec::new();
    for dir in candidates {
        if fs::create_dir_all(dir).is_err() {
            seen.push(format!("{} (cannot create)", dir.display()));
            continue;
        }
        let probe = dir.join(format!("{probe}-{}-write-probe", std::process::id()));
        if let Err(e) = fs::File::create(&probe) {
            seen.push(format!("{} is not writable ({e})", dir.display()));
            continue;
        }
        let _ = fs::remove_file(&probe);
        match fs_type(dir) {
            Some(t) if !is_mem_fs(&t) => return Ok((dir.clone(), t)),
            t => seen.push(format!("{} is {}", dir.display(), t.unwrap_or_else(|| "of unknown type".into()))),
        }
    }
    Err(format!("no directory on a disk file system: {}", seen.join(", ")))
}

/// Whether the file system of `dir` opens files with O_DIRECT (a file named after `probe`
/// is made and removed).
pub fn direct_works(dir: &Path, probe: &str) -> Result<(), String> {
    let p = dir.join(format!("{probe}-{}-odirect-probe", std::process::id()));
    let r =
        fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).custom_flags(libc::O_DIRECT).open(&p);
    let _ = fs::remove_file(&p);
    r.map(|_| ()).map_err(|e| format!("the file system of {} refuses O_DIRECT: {e}", dir.display()))
}

/// A tmpfs mounted for one test (a file system that fills up at a known size), unmounted
/// when dropped: declare it after the [`Scratch`] holding its mount point, so that it is
/// unmounted before the directory is removed.
pub struct Tmpfs(String);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount's `size=` value, e.g. `16m`) at `dir`, made when
    /// missing. `Err` says why it could not be (not root, no `mount`): a reason to skip.
    pub fn mount(dir: &str, size: &str) -> Result<Tmpfs, String> {
        fs::create_dir_all(dir).map_err(|e| format!("cannot make the mount point {dir}: {e}"))?;
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", dir])
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !o.status.success() {
            return Err(format!("cannot mount a tmpfs: {}", String::from_utf8_lossy(&o.stderr).trim()));
        }
        Ok(Tmpfs(dir.to_string()))
    }

    /// [`Tmpfs::mount`] for `test`: `None`, after saying why `test` skips ([`crate::skip`]:
    /// in the guest, a failure), where it cannot be mounted.
    pub fn mount_or_skip(test: &str, dir: &str, size: &str) -> Option<Tmpfs> {
        Tmpfs::mount(dir, size).map_err(|why| crate::skip(test, &why)).ok()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_holds_made_subdirectories_and_goes_when_dropped() {
        let s = Scratch::new(std::env::temp_dir(), "tk-subdir");
        let d = s.subdir("a/b");
        assert!(d.is_dir() && d.starts_with(s.dir()), "{}", d.display());
        // Made again: no error.
        assert_eq!(s.subdir("a/b"), d);
        let top = s.dir().to_path_buf();
        drop(s);
        assert!(!top.exists());
    }
}
