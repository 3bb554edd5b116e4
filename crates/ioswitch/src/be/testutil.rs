//! Helpers shared by the backends' unit tests: temporary files, opening, data patterns,
//! and the test bodies that the async backends (libaio, posix, thrpool) share.

use crate::be::{prepare, AsyncQueue, Backend, Build, Descriptor};
use crate::buf::Data;
use crate::dev::Inner;
use crate::queue::Completion;
use crate::{Buffer, Cmd, Device, Error, Opts, Queue};
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

/// A mapped interface (mmap, pmem) on the file `t`: a write reaches the file after a
/// flush, data written to the file by others reads back through the mapping, and a
/// trimmed range reads back zeroes.
pub(crate) fn mapped_writes_reach_the_file_and_reads_see_it(dev: &Device, t: &Temp) {
    let nsid = dev.ident().nsid;
    let mut w = buf(dev, &pattern(5, 8192));
    dev.pass(&Cmd::write(nsid, 16, 16), std::slice::from_mut(&mut w)).unwrap();
    dev.pass(&Cmd::flush(nsid), &mut []).unwrap();
    let on_disk = std::fs::read(&t.0).unwrap();
    assert_eq!(&on_disk[8192..16384], &pattern(5, 8192)[..]);
    std::fs::write(&t.0, pattern(9, 65536)).unwrap();
    let mut r = dev.alloc(4096).unwrap();
    dev.pass(&Cmd::read(nsid, 0, 8), std::slice::from_mut(&mut r)).unwrap();
    assert_eq!(&r[..], &pattern(9, 65536)[..4096]);
    dev.pass(&Cmd::fs_trim(0, 4096), &mut []).unwrap();
    dev.pass(&Cmd::read(nsid, 0, 8), std::slice::from_mut(&mut r)).unwrap();
    assert!(r.iter().all(|&b| b == 0));
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
        vfio: None,
    })
}

/// The constructor of one async backend's queues (its row's `Build::Async { queue }`).
pub(crate) type NewQueue = fn(&Arc<Inner>, u32) -> Result<Backend, Error>;

/// The queue constructor in an async interface's row of the interface table.
pub(crate) fn queue_fn(d: &Descriptor) -> NewQueue {
    match d.build {
        Build::Async { queue, .. } => queue,
        _ => panic!("{} is not an async interface", d.name),
    }
}

/// The interface an option string names with `async=`, which tags its temporary files:
/// "async=thrpool,threads=2,create=1" gives "thrpool".
fn tag(opts: &str) -> &str {
    let iface = opts.split(',').find_map(|o| o.strip_prefix("async="));
    iface.expect("the options name an async interface")
}

/// Runs `f` on a fresh temporary file in the temp dir, opened with `opts`.
pub(crate) fn in_temp(opts: &str, f: impl FnOnce(&Device)) {
    let t = temp_in(&std::env::temp_dir(), tag(opts));
    f(&open(&t, opts));
}

/// Runs `f` on a fresh temporary file in each of [`dirs`], opened with `opts`.
pub(crate) fn in_each_dir(opts: &str, f: impl Fn(&Device)) {
    for dir in dirs() {
        let t = temp_in(&dir, tag(opts));
        f(&open(&t, opts));
    }
}

/// Writes 16 blocks at qd16, reads them back at qd16, compares.
pub(crate) fn round_trip(dev: &Device) {
    let nsid = dev.ident().nsid;
    let lba = dev.geometry().lba_size as usize;
    let bs = 4096.max(lba);
    let nlb = (bs / lba) as u32;
    let mut q = dev.queue(16).unwrap();
    for i in 0..16u64 {
        q.submit(&Cmd::write(nsid, i * nlb as u64, nlb), buf(dev, &pattern(i, bs)).into(), i).unwrap();
    }
    let mut done = 0;
    q.drain(|c| {
        assert!(c.status.is_ok(), "write {}: {}", c.tag, c.status);
        assert_eq!(c.result, bs as u64);
        done += 1;
    })
    .unwrap();
    assert_eq!(done, 16);
    for i in 0..16u64 {
        q.submit(&Cmd::read(nsid, i * nlb as u64, nlb), dev.alloc(bs).unwrap().into(), i).unwrap();
    }
    let mut done = 0;
    q.drain(|c| {
        assert!(c.status.is_ok(), "read {}: {}", c.tag, c.status);
        assert_eq!(&c.data.into_one().unwrap()[..], &pattern(c.tag, bs)[..], "block {}", c.tag);
        done += 1;
    })
    .unwrap();
    assert_eq!(done, 16);
    assert_eq!(q.stats().completed, 32);
}

/// [`round_trip`] on a 1 MiB temporary file opened with `iface` and `direct=1`; skipped
/// (with a note) where the temp dir has no O_DIRECT.
pub(crate) fn direct_io_on_a_disk_file_round_trips(iface: &str) {
    let t = temp_in(&std::env::temp_dir(), tag(iface));
    let o: Opts = format!("{iface},create=1,size=1MiB,direct=1").parse().unwrap();
    match Device::open(t.0.to_str().unwrap(), &o) {
        Ok(dev) => round_trip(&dev),
        Err(e) if e.errno() == Some(libc::EINVAL) => eprintln!("skipped: no O_DIRECT on the temp dir: {e}"),
        Err(e) => panic!("{e}"),
    }
}

/// Writes three 4 KiB buffers as one command at byte 8192, reads them back into three.
pub(crate) fn vectored_io_round_trips(dev: &Device) {
    let mut q = dev.queue(4).unwrap();
    let data = pattern(9, 3 * 4096);
    let bufs: Vec<Buffer> = data.chunks(4096).map(|c| buf(dev, c)).collect();
    q.submit(&Cmd::fs_write(8192, data.len() as u64), bufs.into(), 1).unwrap();
    q.drain(|c| assert!(c.status.is_ok() && c.result == 3 * 4096, "{}", c.status)).unwrap();
    let bufs: Vec<Buffer> = (0..3).map(|_| dev.alloc(4096).unwrap()).collect();
    q.submit(&Cmd::fs_read(8192, data.len() as u64), bufs.into(), 2).unwrap();
    q.drain(|c| {
        assert!(c.status.is_ok(), "{}", c.status);
        let got: Vec<u8> = c.data.bufs().iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(got, data);
    })
    .unwrap();
}

/// A write then `flush` at qd2: both complete.
pub(crate) fn flush_completes(dev: &Device, flush: Cmd) {
    let mut q = dev.queue(2).unwrap();
    q.submit(&Cmd::fs_write(0, 4096), buf(dev, &pattern(1, 4096)).into(), 1).unwrap();
    q.submit(&flush, Data::None, 2).unwrap();
    let mut tags = vec![];
    q.drain(|c| {
        assert!(c.status.is_ok(), "{}", c.status);
        tags.push(c.tag);
    })
    .unwrap();
    tags.sort();
    assert_eq!(tags, [1, 2]);
}

/// Writes 64 KiB, trims the first 16 KiB and zeroes the third (after a flush when
/// `flush_first`), then reads back zeroes there and the data elsewhere.
pub(crate) fn trim_and_write_zeroes_read_back_zeroes(dev: &Device, flush_first: bool) {
    let nsid = dev.ident().nsid;
    let mut q = dev.queue(4).unwrap();
    q.submit(&Cmd::fs_write(0, 65536), buf(dev, &pattern(3, 65536)).into(), 0).unwrap();
    q.drain(|c| assert!(c.status.is_ok(), "{}", c.status)).unwrap();
    let mut tag = 0;
    if flush_first {
        tag += 1;
        q.submit(&Cmd::flush(nsid), Data::None, tag).unwrap();
    }
    q.submit(&Cmd::fs_trim(0, 16384), Data::None, tag + 1).unwrap();
    q.submit(&Cmd::write_zeroes(nsid, 64, 32), Data::None, tag + 2).unwrap();
    let mut n = 0;
    let reaped = q
        .drain(|c| {
            assert!(c.status.is_ok(), "{}: {}", c.tag, c.status);
            n += 1;
        })
        .unwrap();
    assert_eq!(reaped as u64, tag + 2);
    assert_eq!(n, tag + 2);
    q.submit(&Cmd::fs_read(0, 65536), dev.alloc(65536).unwrap().into(), tag + 3).unwrap();
    q.drain(|c| {
        let b = c.data.into_one().unwrap();
        let want = pattern(3, 65536);
        assert!(b[..16384].iter().all(|&x| x == 0), "trimmed range reads zeroes");
        assert_eq!(&b[16384..32768], &want[16384..32768]);
        assert!(b[32768..49152].iter().all(|&x| x == 0), "zeroed range reads zeroes");
        assert_eq!(&b[49152..], &want[49152..]);
    })
    .unwrap();
}

/// A queue of depth `n` on `dev` with `n` file-set reads of 4 KiB submitted (block `i`,
/// tag `i`), not committed.
pub(crate) fn queue_of_reads(dev: &Device, n: u64) -> Queue {
    let mut q = dev.queue(n as u32).unwrap();
    for i in 0..n {
        q.submit(&Cmd::fs_read(i * 4096, 4096), dev.alloc(4096).unwrap().into(), i).unwrap();
    }
    q
}

/// A qd4 queue with 4 reads in flight refuses a fifth (Busy, the data back), takes it
/// after a wait, then pokes until nothing is outstanding.
pub(crate) fn busy_when_full_and_takes_more_after_a_wait(dev: &Device) {
    let mut q = queue_of_reads(dev, 4);
    let r = q.submit(&Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 9).unwrap_err();
    assert!(matches!(r.error, Error::Busy { depth: 4 }), "{r}");
    assert_eq!(r.data.total_len(), 4096, "the data comes back");
    assert!(q.wait(1, |c| assert!(c.status.is_ok())).unwrap() >= 1);
    q.submit(&Cmd::fs_read(0, 4096), r.data, 9).unwrap();
    let mut seen = 0;
    while q.outstanding() > 0 {
        seen += q.poke(0, |c| assert!(c.status.is_ok())).unwrap();
    }
    assert!(seen >= 1);
    assert_eq!(q.stats().completed, 5);
}

/// How [`dropping_with_commands_in_flight_is_safe`] leaves commands in flight.
pub(crate) struct InFlight {
    /// Whether the public queue commits its 32 writes before it is dropped.
    pub(crate) commit_queue: bool,
    /// Reads (of block `i % 32`) submitted to the backend alone, which has as many slots.
    pub(crate) reads: u64,
    /// The read after which the backend commits, if any (the rest stay uncommitted).
    pub(crate) commit_after: Option<u64>,
    /// Buffers per 4 KiB read: 1, or that many equal segments.
    pub(crate) segments: usize,
}

/// On a temporary file opened with `opts`: drops a public queue with 32 writes in flight
/// (its drop drains), then a backend queue made by `new_queue` with reads in flight, some
/// maybe never committed; then the last block written reads back.
pub(crate) fn dropping_with_commands_in_flight_is_safe(opts: &str, new_queue: NewQueue, how: InFlight) {
    in_temp(opts, |dev| drop_with_commands_in_flight(dev, new_queue, how));
}

fn drop_with_commands_in_flight(dev: &Device, new_queue: NewQueue, how: InFlight) {
    // Through the public queue (its drop drains).
    let mut q = dev.queue(32).unwrap();
    for i in 0..32 {
        q.submit(&Cmd::fs_write(i * 4096, 4096), buf(dev, &pattern(i, 4096)).into(), i).unwrap();
    }
    if how.commit_queue {
        q.commit().unwrap();
    }
    drop(q);
    // The backend alone, with the commands in flight.
    let mut be = new_queue(&dev.inner, how.reads as u32).unwrap();
    for i in 0..how.reads {
        let cmd = Cmd::fs_read((i % 32) * 4096, 4096);
        let data: Data = if how.segments == 1 {
            dev.alloc(4096).unwrap().into()
        } else {
            let bufs: Vec<Buffer> = (0..how.segments).map(|_| dev.alloc(4096 / how.segments).unwrap()).collect();
            bufs.into()
        };
        let io = prepare(&dev.inner, &cmd, data.bufs()).unwrap();
        be.submit(&io, &cmd, data, i).map_err(|(e, _)| e).unwrap();
        if Some(i) == how.commit_after {
            be.commit().unwrap();
        }
    }
    drop(be);
    let mut q = dev.queue(1).unwrap();
    q.submit(&Cmd::fs_read(31 * 4096, 4096), dev.alloc(4096).unwrap().into(), 0).unwrap();
    q.drain(|c| assert_eq!(&c.data.into_one().unwrap()[..], &pattern(31, 4096)[..])).unwrap();
}

/// A write through a descriptor opened read-only completes with EBADF as its status and
/// gives its data back; a read on the same queue then succeeds.
pub(crate) fn errors_complete_with_the_errno_as_status(iface: &str, new_queue: NewQueue) {
    let t = temp_in(&std::env::temp_dir(), tag(iface));
    let dev = open(&t, &format!("{iface},create=1,size=64KiB"));
    let inner = behind_readonly_fd(&dev, &t);
    let mut be = new_queue(&inner, 4).unwrap();
    let c = run_one(&mut be, &inner, Cmd::fs_write(0, 4096), buf(&dev, &pattern(0, 4096)).into(), 5);
    assert_eq!((c.tag, c.status.errno(), c.result), (5, Some(libc::EBADF), 0), "{}", c.status);
    assert_eq!(c.data.total_len(), 4096, "the data comes back");
    let c = run_one(&mut be, &inner, Cmd::fs_read(0, 4096), dev.alloc(4096).unwrap().into(), 6);
    assert!(c.status.is_ok(), "{}", c.status);
}

/// Reads past the end of a file that shrank under the open device complete with EIO and
/// the bytes they moved.
pub(crate) fn short_transfers_complete_with_eio_and_the_bytes_moved(iface: &str) {
    let t = temp_in(&std::env::temp_dir(), tag(iface));
    let dev = open(&t, &format!("{iface},create=1,size=64KiB"));
    // The file shrinks under the open device: reads past the new end come up short.
    std::fs::OpenOptions::new().write(true).open(&t.0).unwrap().set_len(6144).unwrap();
    let mut q = dev.queue(2).unwrap();
    q.submit(&Cmd::fs_read(4096, 4096), dev.alloc(4096).unwrap().into(), 1).unwrap();
    q.submit(&Cmd::fs_read(16384, 4096), dev.alloc(4096).unwrap().into(), 2).unwrap();
    let mut seen = vec![];
    q.drain(|c| seen.push((c.tag, c.status.errno(), c.result))).unwrap();
    seen.sort();
    assert_eq!(seen, [(1, Some(libc::EIO), 2048), (2, Some(libc::EIO), 0)]);
}

/// An NVMe passthrough command is refused (naming the interface) with its data back.
pub(crate) fn refuses_passthrough_commands_and_keeps_the_data(iface: &str) {
    let t = temp_in(&std::env::temp_dir(), tag(iface));
    let dev = open(&t, &format!("{iface},create=1,size=64KiB"));
    let mut q = dev.queue(4).unwrap();
    let sqe = crate::Sqe { opcode: 0x80, nsid: dev.ident().nsid, ..Default::default() };
    let r = q.submit(&Cmd::io(sqe), dev.alloc(512).unwrap().into(), 1).unwrap_err();
    assert!(matches!(r.error, Error::BadCommand { .. }), "{r}");
    assert!(r.to_string().contains(iface), "{r}");
    assert_eq!(r.data.total_len(), 512);
    assert_eq!(q.outstanding(), 0);
}

/// A read or write whose buffers hold fewer bytes than it moves is refused by the checks
/// every caller's command takes before it reaches the interface (`Queue::submit`: the
/// fast check, then `prepare`; `Device::pass` the same), on every path into the backend:
/// one buffer (the fast path's shape), several, FUA, an I/O priority. The refusal names
/// the command, the bytes it moves and the bytes the buffers hold; the data comes back
/// unchanged, nothing is counted as submitted, and the file is untouched. The backends'
/// own one-buffer paths (libaio's `Aio::queue_one`) rely on this and only debug-assert it.
pub(crate) fn short_buffers_are_refused_before_the_interface(iface: &str) {
    let t = temp_in(&std::env::temp_dir(), tag(iface));
    let dev = open(&t, &format!("{iface},create=1,size=64KiB"));
    let (nsid, lba) = (dev.ident().nsid, dev.geometry().lba_size as u64);
    std::fs::write(&t.0, pattern(3, 65536)).unwrap();
    let mut q = dev.queue(4).unwrap();
    let one = |n: u64, seed: u64| -> Data { buf(&dev, &pattern(seed, n as usize)).into() };
    let two = |n: u64, seed: u64| -> Data {
        Data::Vec(vec![buf(&dev, &pattern(seed, n as usize)), buf(&dev, &pattern(seed + 1, n as usize))])
    };
    let prio = crate::cmd::ioprio::value(crate::cmd::ioprio::CLASS_BE, 4);
    let cases: Vec<(&str, Cmd, Data, u64, u64)> = vec![
        ("read", Cmd::read(nsid, 8, 4), one(2 * lba, 10), 4 * lba, 2 * lba),
        ("write", Cmd::write(nsid, 8, 4), one(2 * lba, 11), 4 * lba, 2 * lba),
        ("read", Cmd::fs_read(4096, 8192), one(8191, 12), 8192, 8191),
        ("write", Cmd::fs_write(4096, 8192), one(4096, 13), 8192, 4096),
        ("read", Cmd::fs_read(4096, 8192), two(2048, 14), 8192, 4096),
        ("write", Cmd::fs_write(4096, 8192), two(4095, 16), 8192, 8190),
        ("write", Cmd::write(nsid, 8, 4).fua(), one(lba, 18), 4 * lba, lba),
        ("read", Cmd::fs_read(4096, 8192).with_ioprio(prio), one(4096, 19), 8192, 4096),
        ("write", Cmd::fs_write(4096, 8192).with_ioprio(prio), one(4096, 20), 8192, 4096),
    ];
    for (i, (name, cmd, data, need, have)) in cases.into_iter().enumerate() {
        let before: Vec<Vec<u8>> = data.bufs().iter().map(|b| b.to_vec()).collect();
        let r = q.submit(&cmd, data, i as u64).expect_err("a command longer than its buffers was taken");
        let msg = r.error.to_string();
        assert!(
            matches!(r.error, Error::BufferSize { what, need: n, have: h, .. } if what == name && n == need && h == have),
            "{iface}: {cmd:?}: {:?}",
            r.error
        );
        assert!(
            msg.contains(&format!("{name} moves {need} bytes")) && msg.contains(&format!("holds only {have}")),
            "{msg}"
        );
        let after: Vec<Vec<u8>> = r.data.bufs().iter().map(|b| b.to_vec()).collect();
        assert_eq!(before, after, "{iface}: {cmd:?}: the data comes back unchanged");
        assert_eq!((q.outstanding(), q.stats().submitted), (0, 0), "{iface}: {cmd:?}");
        // The sync call takes the same checks.
        if dev.inner.sync().is_some() && cmd.ioprio == 0 {
            let mut data = r.data;
            let e = dev.pass(&cmd, data.bufs_mut()).expect_err("a sync call longer than its buffers was taken");
            assert!(matches!(e, Error::BufferSize { need: n, have: h, .. } if n == need && h == have), "{e:?}");
        }
    }
    q.drain(drop).unwrap();
    assert_eq!(std::fs::read(&t.0).unwrap(), pattern(3, 65536), "{iface}: the file was changed");
}
