//! The `pmem` interface against the rest of the library: data written through `pmem`
//! reads back through `psync` on the same file and the other way round; the load/store
//! API (a store through a lent range plus `persist` reads back through the command API);
//! the refusals (a file that is not DAX without `pmem_force`, other interfaces on a
//! devdax device, pmem on a ramdisk).
//!
//! On the host these run on a /dev/shm file with `pmem_force=1`. With `IOSWITCH_PMEM_DIR`
//! (a directory on ext4 mounted `-o dax`) and `IOSWITCH_PMEM_DEVDAX` (a `/dev/daxX.Y`) the
//! same checks run there without `pmem_force` (the guest's pmem stage sets them); unset,
//! those parts skip with the reason, and fail in the guest when `IOSWITCH_PMEM=1`.
//!
//! `pmem_populate=1` (`MAP_POPULATE` at open): data written reads back, and the minor page
//! faults a thread takes in the I/O after such an open are far fewer than without it
//! (counted in /proc/thread-self/stat around the commands: a behaviour, not a timing).

use ioswitch::{Cmd, DevKind, Device, Error, Opts};
use std::path::{Path, PathBuf};

fn opts(s: &str) -> Opts {
    s.parse().unwrap()
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

struct Temp(PathBuf);
impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp(dir: &Path, tag: &str) -> Temp {
    Temp(dir.join(format!("ioswitch-pmem-test-{}-{tag}", std::process::id())))
}

/// The environment's pmem directory or devdax device; `None` (the reason printed) when
/// unset, a panic when the guest's pmem stage should have set it.
fn from_env(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let on = |k: &str| std::env::var_os(k).is_some_and(|v| v == "1");
            assert!(!(on("IOSWITCH_VM") && on("IOSWITCH_PMEM")), "IOSWITCH_PMEM=1 in the guest but {var} is unset");
            eprintln!("skipped the {var} part: {var} is not set (the guest's pmem stage sets it)");
            None
        }
    }
}

/// The minor page faults the calling thread has taken so far (/proc/thread-self/stat,
/// field 10).
fn thread_minor_faults() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt ...": comm may hold
    // spaces and parentheses, so count from the last ')'.
    let rest = &s[s.rfind(')').expect("a comm in parentheses") + 1..];
    rest.split_whitespace().nth(7).and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("no minflt in {s:?}"))
}

/// The minor faults of one pass of 512 KiB commands over the first `bytes` of a device
/// opened just before (a fresh mapping): (write pass on one open, read pass on another).
/// After the write pass its data is read back through a third open.
fn faults_of_passes(uri: &str, pmem_opts: &str, bytes: u64) -> (u64, u64) {
    const PIECE: usize = 512 * 1024;
    let pass = |write: bool, fill: u8| -> u64 {
        let dev = Device::open(uri, &opts(pmem_opts)).unwrap();
        let mut b = dev.alloc(PIECE).unwrap();
        b.fill(fill); // the buffer's own pages are faulted in before the count
        let before = thread_minor_faults();
        for off in (0..bytes).step_by(PIECE) {
            let cmd = if write { Cmd::fs_write(off, PIECE as u64) } else { Cmd::fs_read(off, PIECE as u64) };
            dev.pass(&cmd, std::slice::from_mut(&mut b)).unwrap();
        }
        let faults = thread_minor_faults() - before;
        if !write {
            assert!(b.iter().all(|&x| x == fill ^ 0xFF), "{pmem_opts}: the last piece read back what was written");
        }
        faults
    };
    let fill = (bytes as u8) ^ (pmem_opts.len() as u8);
    let w = pass(true, fill ^ 0xFF);
    let r = pass(false, fill);
    (w, r)
}

/// pmem and psync on the same file see each other's data, in both directions, at offsets
/// and sizes on both sides of the non-temporal-store threshold.
fn pmem_and_psync_agree(path: &Path, pmem_opts: &str) {
    let uri = path.to_str().unwrap();
    let pm = Device::open(uri, &opts(pmem_opts)).unwrap();
    let ps = Device::open(uri, &opts("sync=psync")).unwrap();
    let nsid = pm.ident().nsid;
    for (slba, nlb) in [(0u64, 1u32), (3, 8), (64, 128)] {
        let n = nlb as usize * 512;
        let mut w = pm.alloc(n).unwrap();
        w.copy_from_slice(&pattern(slba as u8, n));
        pm.pass(&Cmd::write(nsid, slba, nlb), std::slice::from_mut(&mut w)).unwrap();
        let mut r = ps.alloc(n).unwrap();
        ps.pass(&Cmd::read(nsid, slba, nlb), std::slice::from_mut(&mut r)).unwrap();
        assert_eq!(&r[..], &w[..], "pmem write of {n} bytes at LBA {slba}, read with psync");

        let mut w2 = ps.alloc(n).unwrap();
        w2.copy_from_slice(&pattern(slba as u8 ^ 0x5A, n));
        ps.pass(&Cmd::write(nsid, slba, nlb), std::slice::from_mut(&mut w2)).unwrap();
        let mut r2 = pm.alloc(n).unwrap();
        pm.pass(&Cmd::read(nsid, slba, nlb), std::slice::from_mut(&mut r2)).unwrap();
        assert_eq!(&r2[..], &w2[..], "psync write of {n} bytes at LBA {slba}, read with pmem");
    }
    // Byte-granular file commands, unaligned head and tail.
    let mut w = pm.alloc(1000).unwrap();
    w.copy_from_slice(&pattern(77, 1000));
    pm.pass(&Cmd::fs_write(100_003, 1000), std::slice::from_mut(&mut w)).unwrap();
    let mut r = ps.alloc(1000).unwrap();
    ps.pass(&Cmd::fs_read(100_003, 1000), std::slice::from_mut(&mut r)).unwrap();
    assert_eq!(&r[..], &w[..]);
}

/// A store through a lent range plus persist is what the command API reads; a command on
/// a lent range is refused while lent; ranges do not overlap.
fn load_store(dev: &Device) {
    let nsid = dev.ident().nsid;
    {
        let mut s = dev.pmem_range(4096, 8192).unwrap();
        assert_eq!(s.len(), 8192);
        assert_eq!(s.offset(), 4096);
        s[..8192].copy_from_slice(&pattern(9, 8192));
        s.persist(0, 8192).unwrap();
        let e = s.persist(8000, 193).unwrap_err().to_string();
        assert!(e.contains("past the end"), "{e}");
        // Not reachable through commands while lent, and not lent twice.
        let mut b = dev.alloc(4096).unwrap();
        let e = dev.pass(&Cmd::read(nsid, 8, 8), std::slice::from_mut(&mut b)).unwrap_err();
        assert_eq!(e.errno(), Some(libc::EBUSY), "{e}");
        let e = dev.pmem_range(12287, 2).unwrap_err().to_string();
        assert!(e.contains("overlap"), "{e}");
        let other = dev.pmem_range(12288, 4096).unwrap();
        assert_eq!(other.offset(), 12288);
    }
    let mut b = dev.alloc(8192).unwrap();
    dev.pass(&Cmd::read(nsid, 8, 16), std::slice::from_mut(&mut b)).unwrap();
    assert_eq!(&b[..], &pattern(9, 8192)[..]);
    // Out of range and empty ranges are refused, naming the range.
    let size = dev.geometry().bytes;
    let e = dev.pmem_range(size - 4096, 4097).unwrap_err().to_string();
    assert!(e.contains("pmem range") && e.contains("out of range"), "{e}");
    assert!(dev.pmem_range(0, 0).is_err());
}

/// A file of `len` zero bytes in /dev/shm (named by `tag`, removed on drop) on which
/// `pmem_opts` agrees with psync ([`pmem_and_psync_agree`]), and the device `pmem_opts`
/// opens on it; `None`, the test skipped (saying so), where /dev/shm does not exist.
fn on_shm(tag: &str, len: u64, pmem_opts: &str) -> Option<(Temp, Device)> {
    let dir = Path::new("/dev/shm");
    if !dir.is_dir() {
        eprintln!("skipped: /dev/shm does not exist");
        return None;
    }
    let t = temp(dir, tag);
    std::fs::write(&t.0, vec![0u8; len as usize]).unwrap();
    pmem_and_psync_agree(&t.0, pmem_opts);
    let dev = Device::open(t.0.to_str().unwrap(), &opts(pmem_opts)).unwrap();
    Some((t, dev))
}

#[test]
fn pmem_forced_on_shm_agrees_with_psync_and_lends_ranges() {
    let Some((t, dev)) = on_shm("shm", 1 << 20, "sync=pmem,pmem_force=1") else { return };
    let info = dev.pmem().unwrap();
    assert!(info.forced);
    assert_eq!(info.mode, "forced");
    load_store(&dev);
    // Load/store needs sync=pmem, and a read-only device lends nothing.
    let ps = Device::open(t.0.to_str().unwrap(), &opts("sync=psync")).unwrap();
    assert!(ps.pmem().is_none());
    let e = ps.pmem_range(0, 10).unwrap_err().to_string();
    assert!(e.contains("sync=pmem"), "{e}");
    let ro = Device::open(t.0.to_str().unwrap(), &opts("sync=pmem,pmem_force=1,rdonly=1")).unwrap();
    let e = ro.pmem_range(0, 10).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
}

#[test]
fn pmem_populate_on_shm_reads_back_and_takes_the_faults_at_open() {
    const BYTES: u64 = 16 << 20;
    let Some((t, dev)) = on_shm("populate", BYTES, "sync=pmem,pmem_force=1,pmem_populate=1") else { return };
    assert!(dev.pmem().unwrap().populate);
    load_store(&dev);
    drop(dev);

    let uri = t.0.to_str().unwrap();
    let (w0, r0) = faults_of_passes(uri, "sync=pmem,pmem_force=1", BYTES);
    let (w1, r1) = faults_of_passes(uri, "sync=pmem,pmem_force=1,pmem_populate=1", BYTES);
    let pages = BYTES / 4096;
    eprintln!(
        "minor faults over {BYTES} bytes of /dev/shm in 512 KiB commands: writes {w0} without pmem_populate, {w1} \
         with; reads {r0} without, {r1} with"
    );
    // Populated at open, a pass over the whole mapping finds every page mapped.
    assert!(w1 <= pages / 64 && r1 <= pages / 64, "pmem_populate=1: {w1} write, {r1} read faults over {pages} pages");
    if w0 >= pages / 2 {
        // tmpfs with 4 KiB pages: one write fault per page without it.
        assert!(w1 * 16 <= w0, "pmem_populate=1 took {w1} write faults, without it {w0}");
    } else {
        eprintln!(
            "not compared: without pmem_populate the writes took {w0} faults for {pages} pages (this /dev/shm maps \
             large pages), so there were few to move"
        );
    }
}

#[test]
fn pmem_refuses_what_is_not_persistent_memory() {
    // A file that is not on a DAX file system, without pmem_force: MAP_SYNC refused.
    let t = temp(&std::env::temp_dir(), "notdax");
    std::fs::write(&t.0, vec![0u8; 65536]).unwrap();
    match Device::open(t.0.to_str().unwrap(), &opts("sync=pmem")) {
        Err(Error::Unsupported { iface, why, kind, .. }) => {
            assert_eq!(iface, "sync=pmem");
            assert_eq!(kind, DevKind::File);
            assert!(why.contains("MAP_SYNC") && why.contains("pmem_force=1"), "{why}");
        }
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(d) => {
            // Only a temp dir on a DAX file system may accept it.
            assert_eq!(d.pmem().unwrap().mode, "fsdax");
            eprintln!("{} is on a DAX file system: the refusal is not exercised here", t.0.display());
        }
    }
    // A ramdisk and a block device: the table refuses, naming why.
    let e = Device::open("1MiB", &opts("sync=pmem")).unwrap_err().to_string();
    assert!(e.contains("not persistent memory"), "{e}");
    // pmem_force and pmem_populate belong to pmem.
    let e = Device::open(t.0.to_str().unwrap(), &opts("sync=mmap,pmem_force=1")).unwrap_err().to_string();
    assert!(e.contains("pmem_force") && e.contains("sync=pmem"), "{e}");
    for other in ["sync=mmap", "sync=psync", "async=io_uring"] {
        match Device::open(t.0.to_str().unwrap(), &opts(&format!("{other},pmem_populate=1"))) {
            Err(Error::BadOpt { key, why }) => {
                assert_eq!(key, "pmem_populate", "{other}");
                assert!(why.contains("sync=pmem"), "{other}: {why}");
            }
            r => panic!("{other},pmem_populate=1: expected a refusal naming the key, got {r:?}"),
        }
    }
}

#[test]
fn pmem_on_an_fsdax_directory() {
    let Some(dir) = from_env("IOSWITCH_PMEM_DIR") else { return };
    let t = temp(&dir, "fsdax");
    std::fs::write(&t.0, vec![0u8; 1 << 20]).unwrap();
    pmem_and_psync_agree(&t.0, "sync=pmem");
    let dev = Device::open(t.0.to_str().unwrap(), &opts("sync=pmem")).unwrap();
    let info = dev.pmem().unwrap();
    assert_eq!((info.mode, info.forced), ("fsdax", false));
    let dax = dev.ident().dax.clone().expect("a file on pmem has a dax identity");
    assert_eq!(dax.mode, "fsdax");
    load_store(&dev);
    drop(dev);
    // Populated at open (MAP_POPULATE over MAP_SYNC, then MADV_POPULATE_WRITE): the same
    // data; a read pass and a write pass find every page mapped. Without the second step
    // ext4's page_mkwrite saw each page's first store (the guest's 6.1 kernel: 256 write
    // faults for 256 pages with MAP_POPULATE alone).
    pmem_and_psync_agree(&t.0, "sync=pmem,pmem_populate=1");
    let dev = Device::open(t.0.to_str().unwrap(), &opts("sync=pmem,pmem_populate=1")).unwrap();
    let p = dev.pmem().unwrap();
    assert_eq!((p.mode, p.populate, p.populate_writes), ("fsdax", true, true), "{p:?}");
    load_store(&dev);
    drop(dev);
    let uri = t.0.to_str().unwrap();
    let bytes = 1u64 << 20;
    let pages = bytes / 4096;
    let (w0, r0) = faults_of_passes(uri, "sync=pmem", bytes);
    let (w1, r1) = faults_of_passes(uri, "sync=pmem,pmem_populate=1", bytes);
    eprintln!("fsdax, minor faults over {bytes} bytes: writes {w0} without pmem_populate, {w1} with; reads {r0}, {r1}");
    assert!(w1 <= pages / 64, "fsdax writes: {w1} faults with pmem_populate=1 over {pages} pages ({w0} without)");
    assert!(r1 * 4 <= r0.max(4), "fsdax reads: {r1} faults with pmem_populate=1, {r0} without");
}

#[test]
fn pmem_on_a_devdax_device() {
    let Some(path) = from_env("IOSWITCH_PMEM_DEVDAX") else { return };
    let uri = path.to_str().unwrap();
    let dev = Device::open(uri, &Opts::default()).unwrap();
    assert_eq!(dev.ident().kind, DevKind::DevDax);
    assert_eq!(dev.interfaces().sync, Some(ioswitch::SyncIface::Pmem), "devdax defaults to sync=pmem");
    let dax = dev.ident().dax.clone().expect("a devdax device has a dax identity");
    assert_eq!(dax.mode, "devdax");
    assert!(dax.align.is_power_of_two() && dax.size % dax.align == 0, "{dax:?}");
    assert_eq!(dev.geometry().bytes, dax.size);
    assert_eq!(dev.pmem().unwrap().align, dax.align.max(4096));
    load_store(&dev);
    // Populated at open: the same load/store behaviour, and no fault in the passes (the
    // device maps whole units of its alignment: few faults without it either).
    {
        let pop = Device::open(uri, &opts("pmem_populate=1")).unwrap();
        assert!(pop.pmem().unwrap().populate);
        load_store(&pop);
    }
    let bytes = dax.size.min(16 << 20) / (512 * 1024) * (512 * 1024);
    let (w0, r0) = faults_of_passes(uri, "sync=pmem", bytes);
    let (w1, r1) = faults_of_passes(uri, "sync=pmem,pmem_populate=1", bytes);
    eprintln!(
        "devdax (align {}), minor faults over {bytes} bytes: writes {w0} without pmem_populate, {w1} with; reads {r0}, {r1}",
        dax.align
    );
    assert!(w1 + r1 <= 2, "devdax with pmem_populate=1: {w1} write + {r1} read faults (without: {w0} + {r0})");
    // Offsets inside the one aligned mapping need no alignment: a byte-granular command and
    // a lent range that start neither on the device's alignment nor on a page.
    let at = dax.align + 4096 + 7;
    let mut w = dev.alloc(1000).unwrap();
    w.copy_from_slice(&pattern(31, 1000));
    dev.pass(&Cmd::fs_write(at, 1000), std::slice::from_mut(&mut w)).unwrap();
    {
        let s = dev.pmem_range(at, 1000).unwrap();
        assert_eq!(&s[..], &pattern(31, 1000)[..], "a lent range at {at} sees the command's write");
    }
    // size= (the only number that could change the mapping) is refused on a device.
    match Device::open(uri, &opts("size=3MiB")) {
        Err(Error::BadOpt { key, why }) => assert!(key.contains("size") && why.contains("regular files"), "{why}"),
        r => panic!("size= on devdax: expected a refusal, got {r:?}"),
    }
    for other in ["sync=psync", "sync=mmap", "async=libaio", "async=io_uring"] {
        match Device::open(uri, &opts(other)) {
            Err(Error::Unsupported { kind, why, .. }) => {
                assert_eq!(kind, DevKind::DevDax);
                assert!(why.contains("devdax"), "{other}: {why}");
            }
            r => panic!("{other} on devdax: expected a refusal, got {r:?}"),
        }
    }
}
