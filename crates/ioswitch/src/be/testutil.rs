//! Helpers shared by the backends' unit tests: temporary files, opening, data patterns.

use crate::be::{prepare, AsyncQueue, Backend};
use crate::buf::Data;
use crate::dev::Inner;
use crate::queue::Completion;
use crate::{Buffer, Cmd, Device, Opts};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A file that is removed when the test ends.
pub(crate) struct Temp(pub(crate) PathBuf);

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh file name in `dir`, unique in this process; `tag` names the test module.
pub(crate) fn temp_in(dir: &Path, tag: &str) -> Temp {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    Temp(dir.join(format!("ioswitch-{tag}-test-{}-{n}", std::process::id())))
}

/// Opens a URI with an option string; panics (in a test) when it cannot.
pub(crate) fn open_uri(uri: &str, opts: &str) -> Device {
    let o: Opts = opts.parse().unwrap();
    Device::open(uri, &o).unwrap()
}

/// Opens a temporary file with an option string.
pub(crate) fn open(t: &Temp, opts: &str) -> Device {
    open_uri(t.0.to_str().unwrap(), opts)
}

/// The directories the file tests run in: the temp dir, and /dev/shm when there is one.
pub(crate) fn dirs() -> Vec<PathBuf> {
    let mut v = vec![std::env::temp_dir()];
    if Path::new("/dev/shm").is_dir() {
        v.push("/dev/shm".into());
    }
    v
}

/// Bytes that differ with the seed and along the buffer.
pub(crate) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed.wrapping_mul(131).wrapping_add(i as u64 * 7) % 251) as u8).collect()
}

/// A device buffer holding `bytes`.
pub(crate) fn buf(dev: &Device, bytes: &[u8]) -> Buffer {
    let mut b = dev.alloc(bytes.len()).unwrap();
    b.copy_from_slice(bytes);
    b
}

/// Runs one command through a backend queue made directly (not through `Queue`).
pub(crate) fn run_one(be: &mut Backend, dev: &Inner, cmd: Cmd, data: Data, tag: u64) -> Completion {
    let io = prepare(dev, &cmd, data.bufs()).unwrap();
    be.submit(&io, &cmd, data, tag).map_err(|(e, _)| e).unwrap();
    be.commit().unwrap();
    let mut out = None;
    while out.is_none() {
        be.reap(1, 1, &mut |c| out = Some(c)).unwrap();
    }
    out.unwrap()
}

/// The device of temporary file `t` behind a read-only descriptor that the checks do not
/// know about (no sync interface), so a write reaches the kernel and fails there.
pub(crate) fn behind_readonly_fd(dev: &Device, t: &Temp) -> Arc<Inner> {
    let ro: std::os::fd::OwnedFd = std::fs::File::open(&t.0).unwrap().into();
    let i = &dev.inner;
    Arc::new(Inner {
        uri: i.uri.clone(),
        ident: i.ident.clone(),
        geo: i.geo.clone(),
        ifaces: i.ifaces,
        opts: i.opts.clone(),
        fd: Some(ro),
        sync: None,
        admin: None,
    })
}
