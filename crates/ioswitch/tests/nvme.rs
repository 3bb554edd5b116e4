//! NVMe for real: the `nvme` sync/admin interfaces (ioctl passthrough), `io_uring_cmd`
//! (io_uring passthrough on /dev/ngXnY), geometry from identify, NVMe status decoding,
//! zones through passthrough and through the block layer, and errors the device reports
//! in a batch of commands in flight (docs/RELIABILITY.md, "Device-reported errors").
//!
//! Needs the QEMU guest of tests/vm (one controller, nsid 1: 512 B LBAs, nsid 2: 4 KiB
//! LBAs, nsid 3: zoned, 4 MiB zones of 3 MiB capacity; `nvme.poll_queues=1`):
//! `tests/vm/nvme-tests.sh`, which runs them with `--include-ignored`. Elsewhere every test
//! is ignored (so no run counts them as passed); run by hand on a machine without
//! `/dev/nvme0` they fail, saying why. With a zoned null_blk device (`/dev/nullb0`, loaded
//! by nvme-tests.sh) the block-layer zone tests also run on a device that is not NVMe.
//!
//! Zone tests hold a lock (select-all actions touch every zone); the LBA regions of the
//! other tests do not overlap, so the file may run with any number of test threads.

use ioswitch::spec::idfy::{cns, csi, IdCtrl, IdNs, IdNsZns, IDENTIFY_LEN};
use ioswitch::spec::zns::{ZoneAction, ZoneFilter, ZoneReport, ZoneState};
use ioswitch::{AsyncIface, Buffer, Cmd, Data, DevKind, Device, Error, Opts, Sqe, Status, SyncIface};
use ioswitch_testkit::{lock, pattern};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

const MIB: u64 = 1 << 20;

/// The namespaces of controller 0: nsid → (block device, generic char device).
struct Env {
    ns: BTreeMap<u32, (String, String)>,
}

impl Env {
    fn block(&self, nsid: u32) -> &str {
        &self.ns[&nsid].0
    }
    fn char(&self, nsid: u32) -> &str {
        &self.ns[&nsid].1
    }
}

/// The guest's NVMe layout; a test asked to run where there is none fails, saying why.
fn env(test: &str) -> Env {
    if !Path::new("/dev/nvme0").exists() {
        panic!("{test}: no NVMe device (/dev/nvme0) on this machine; run tests/vm/nvme-tests.sh");
    }
    let mut ns = BTreeMap::new();
    for e in fs::read_dir("/sys/block").expect("/sys/block").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("nvme0n") else { continue };
        let nsid: u32 = fs::read_to_string(e.path().join("nsid")).unwrap().trim().parse().unwrap();
        // The generic char device carries the same instance numbers as the disk.
        ns.insert(nsid, (format!("/dev/{name}"), format!("/dev/ng0n{rest}")));
    }
    for n in 1..=3 {
        assert!(ns.contains_key(&n), "the guest has no namespace {n}: {:?}", ns.keys().collect::<Vec<_>>());
    }
    Env { ns }
}

macro_rules! need_env {
    ($name:literal) => {
        env($name)
    };
}

fn opts(s: &str) -> Opts {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn open(path: &str, o: &str) -> Device {
    Device::open(path, &opts(o)).unwrap_or_else(|e| panic!("open {path} with {o:?}: {e}"))
}

fn filled(dev: &Device, seed: u64, len: usize) -> Buffer {
    let mut b = dev.alloc(len).unwrap();
    b.copy_from_slice(&pattern::bytes(seed, len));
    b
}

fn status_of(e: &Error) -> Status {
    match e {
        Error::Command { status, .. } => *status,
        other => panic!("expected a command status, got: {other}"),
    }
}

/// Zone tests run one at a time.
fn zone_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    lock(&L)
}

// ---------------------------------------------------------------------------------------
// Opening, interfaces and geometry
// ---------------------------------------------------------------------------------------

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn defaults_and_refusals_per_nvme_device_kind() {
    let env = need_env!("defaults_and_refusals_per_nvme_device_kind");
    let b = open(env.block(1), "");
    assert_eq!(b.ident().kind, DevKind::NvmeBlock);
    let i = b.interfaces();
    assert_eq!(
        (i.sync, i.r#async, i.admin),
        (Some(SyncIface::Block), Some(AsyncIface::IoUring), ioswitch::AdminIface::Nvme)
    );
    let c = open(env.char(1), "");
    assert_eq!(c.ident().kind, DevKind::NvmeChar);
    let i = c.interfaces();
    assert_eq!(
        (i.sync, i.r#async, i.admin),
        (Some(SyncIface::Nvme), Some(AsyncIface::IoUringCmd), ioswitch::AdminIface::Nvme)
    );
    let ctrl = open("/dev/nvme0", "");
    assert_eq!(ctrl.ident().kind, DevKind::NvmeCtrl);
    let i = ctrl.interfaces();
    assert_eq!((i.sync, i.r#async, i.admin), (None, None, ioswitch::AdminIface::Nvme));
    assert!(ctrl.ident().model.as_deref().unwrap_or("").contains("QEMU"), "{:?}", ctrl.ident());
    let e = ctrl.pass(&Cmd::read(1, 0, 1), &mut [ctrl.alloc(512).unwrap()]).unwrap_err().to_string();
    assert!(e.contains("/dev/nvme0") && e.contains("sync"), "{e}");
    for (path, o, want) in [
        ("/dev/nvme0", "sync=nvme", "admin commands only"),
        ("/dev/nvme0", "async=io_uring_cmd", "admin commands only"),
        (env.block(1), "async=io_uring_cmd", "generic char device"),
        (env.char(1), "sync=psync", "sync=nvme"),
        (env.char(1), "async=io_uring", "io_uring_cmd"),
        (env.char(1), "async=io_uring_cmd,register_buffers=1", "register_buffers"),
    ] {
        let e = Device::open(path, &opts(o)).unwrap_err().to_string();
        assert!(e.contains(path) && e.contains(want), "{path} {o}: {e}");
    }
    // A namespace id that is not the device's own is refused at open.
    let e = Device::open(env.char(1), &opts("nsid=2")).unwrap_err().to_string();
    assert!(e.contains("namespace 1"), "{e}");
    // Both namespace devices take sync=nvme.
    open(env.block(1), "sync=nvme");
    open(env.char(2), "sync=nvme,async=thrpool");
}

/// `rdonly=1` refuses every command that may write before the kernel sees it: root's NVMe
/// passthrough would go through a read-only descriptor (the kernel checks write access
/// only for users without CAP_SYS_ADMIN). Reads and identify still work. Each refused
/// command is one the device would also refuse (a vendor opcode, a format of a namespace
/// that does not exist) or a write to an LBA no other test uses, so a refusal that fails
/// shows as a missing "rdonly=1", not as damage.
#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn read_only_opens_refuse_passthrough_and_admin_writes() {
    let env = need_env!("read_only_opens_refuse_passthrough_and_admin_writes");
    let refused = |what: &str, r: Result<u64, Error>| {
        let e = r.expect_err(what).to_string();
        assert!(e.contains("read-only (rdonly=1)"), "{what}: {e}");
    };
    let lba = 7000;
    for (path, o) in [
        (env.char(1), "rdonly=1"),
        (env.block(1), "rdonly=1,sync=nvme"),
        (env.char(1), "rdonly=1,sync=nvme,async=io_uring_cmd"),
    ] {
        let d = open(path, o);
        let mut b = vec![d.alloc(512).unwrap()];
        d.pass(&Cmd::read(1, lba, 1), &mut b).unwrap_or_else(|e| panic!("{path} {o}: read: {e}"));
        refused(&format!("{path} {o}: write"), d.pass(&Cmd::write(1, lba, 1), &mut b));
        refused(&format!("{path} {o}: write zeroes"), d.pass(&Cmd::write_zeroes(1, lba, 1), &mut []));
        let vendor = Cmd::io(Sqe { opcode: 0x81, nsid: 1, ..Sqe::default() });
        refused(&format!("{path} {o}: vendor opcode 0x81"), d.pass(&vendor, &mut []));
        let mut q = d.queue(2).unwrap();
        let r = q.submit(&Cmd::write(1, lba, 1), Data::Vec(b), 1).map_err(|r| r.error);
        refused(&format!("{path} {o}: queued write"), r.map(|()| 0));
    }
    {
        let _z = zone_lock();
        let z = open(env.char(3), "rdonly=1");
        refused("zone reset of every zone", zone_send(&z, 0, ZoneAction::Reset, true));
    }
    let ctrl = open("/dev/nvme0", "rdonly=1");
    let mut id = vec![ctrl.alloc(IDENTIFY_LEN).unwrap()];
    ctrl.pass_admin(&Cmd::identify(cns::CTRL, 0, 0, csi::NVM), &mut id).expect("identify through rdonly=1");
    let format = Cmd::admin(Sqe { opcode: 0x80, nsid: 0xdead, ..Sqe::default() });
    refused("format NVM", ctrl.pass_admin(&format, &mut []));
    let vendor = Cmd::admin(Sqe { opcode: 0xc1, ..Sqe::default() });
    refused("vendor admin opcode 0xc1", ctrl.pass_admin(&vendor, &mut []));
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn enumerate_lists_controller_namespaces_and_char_devices_with_sizes() {
    let env = need_env!("enumerate_lists_controller_namespaces_and_char_devices_with_sizes");
    let all = ioswitch::enumerate().unwrap();
    let find = |p: &str| all.iter().find(|l| l.path == Path::new(p)).unwrap_or_else(|| panic!("{p} not listed"));
    assert_eq!(find("/dev/nvme0").kind, ioswitch::DevKind::NvmeCtrl);
    for nsid in 1..=3 {
        let (b, c) = (find(env.block(nsid)), find(env.char(nsid)));
        assert_eq!(b.kind, ioswitch::DevKind::NvmeBlock);
        assert_eq!(c.kind, ioswitch::DevKind::NvmeChar);
        assert!(b.bytes > 0 && (c.bytes, c.lba_size, c.zoned) == (b.bytes, b.lba_size, b.zoned), "{b:?} vs {c:?}");
    }
    assert_eq!(find(env.block(2)).lba_size, 4096);
    assert_eq!(find(env.char(3)).zoned, ioswitch::ZonedModel::HostManaged);
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn geometry_comes_from_identify() {
    let env = need_env!("geometry_comes_from_identify");
    let want = [(1u32, 512u32, 256 * MIB), (2, 4096, 256 * MIB), (3, 512, 128 * MIB)];
    for (nsid, lba, bytes) in want {
        for (path, o) in [(env.block(nsid), "sync=nvme"), (env.char(nsid), "")] {
            let d = open(path, o);
            let g = d.geometry();
            assert_eq!(d.ident().nsid, nsid, "{path}");
            assert_eq!((g.lba_size, g.bytes, g.nlbas), (lba, bytes, bytes / lba as u64), "{path}");
            // MDTS 7 of 4 KiB pages is 512 KiB; the driver's segment limit may cut it.
            assert!(g.max_transfer >= 256 * 1024 && g.max_transfer <= 512 * 1024, "{path}: {g:?}");
            assert_eq!(g.max_transfer % lba as u64, 0, "{path}");
            assert_eq!(d.ident().driver.as_deref(), Some("nvme"), "{path}");
            assert_eq!(d.ident().serial.as_deref(), Some("ioswitch-vm-0"), "{path}");
            // Through the block layer the kernel splits: one NVM command's worth.
            let b = open(env.block(nsid), "sync=block");
            assert_eq!(b.geometry().max_transfer, 65536 * lba as u64, "{path}");
            assert_eq!(b.geometry().zones, g.zones, "{path}");
            if nsid == 3 {
                let z = g.zones.unwrap_or_else(|| panic!("{path}: no zones: {g:?}"));
                assert_eq!(g.zoned, ioswitch::ZonedModel::HostManaged, "{path}");
                assert_eq!((z.zone_size, z.zone_capacity, z.nr_zones), (8192, 6144, 32), "{path}: {z:?}");
                assert_eq!((z.max_open, z.max_active), (0, 0), "{path}: QEMU's zones have no limits");
            } else {
                assert!(g.zones.is_none(), "{path}: {g:?}");
            }
        }
    }
    // The identify pages, parsed, agree with the geometry.
    let ctrl = open("/dev/nvme0", "");
    let mut page = ctrl.alloc(IDENTIFY_LEN).unwrap();
    ctrl.pass_admin(&Cmd::identify(cns::CTRL, 0, 0, 0), std::slice::from_mut(&mut page)).unwrap();
    let c = IdCtrl::from_bytes(&page).unwrap();
    assert_eq!((c.sn.as_str(), c.mdts), ("ioswitch-vm-0", 7));
    assert!(c.nn >= 3 && c.mn.starts_with("QEMU"), "{c:?}");
    assert!(c.oncs & 1 != 0, "compare must be supported: {c:?}");
    let d = open(env.char(3), "");
    d.pass_admin(&Cmd::identify(cns::NS, 3, 0, 0), std::slice::from_mut(&mut page)).unwrap();
    let n = IdNs::from_bytes(&page).unwrap();
    assert_eq!(n.nsze, d.geometry().nlbas);
    assert_eq!(n.lbaf_in_use().unwrap().data_size(), 512);
    d.pass_admin(&Cmd::identify(cns::CSI_NS, 3, 0, csi::ZNS), std::slice::from_mut(&mut page)).unwrap();
    let z = IdNsZns::from_bytes(&page, n.nlbaf).unwrap();
    assert_eq!(z.lbafe[n.lbaf_index()].zsze, 8192);
    assert_eq!((z.max_active(), z.max_open()), (None, None));
}

// ---------------------------------------------------------------------------------------
// Data through the nvme sync interface
// ---------------------------------------------------------------------------------------

/// Writes, reads back and compares through `pass` on LBAs from `lba0`.
fn sync_data(d: &Device, lba0: u64, seed: u64) {
    let u = d.geometry().lba_size as usize;
    let nsid = d.ident().nsid;
    let what = format!("{} ({:?})", d.uri(), d.interfaces().sync);
    // One buffer.
    let mut w = filled(d, seed, 8 * u);
    let r0 = d.pass(&Cmd::write(nsid, lba0, 8), std::slice::from_mut(&mut w)).unwrap();
    if d.interfaces().sync == Some(SyncIface::Nvme) {
        assert_eq!(r0, 0, "{what}: an NVM write's completion result");
    }
    let mut r = d.alloc(8 * u).unwrap();
    d.pass(&Cmd::read(nsid, lba0, 8), std::slice::from_mut(&mut r)).unwrap();
    assert!(r[..] == w[..], "{what}: read back differs");
    // Vectored: three buffers of 1, 2 and 5 LBAs.
    let mut v: Vec<Buffer> =
        [1usize, 2, 5].iter().enumerate().map(|(i, &n)| filled(d, seed + 10 + i as u64, n * u)).collect();
    d.pass(&Cmd::write(nsid, lba0 + 8, 8), &mut v).unwrap();
    let mut rv: Vec<Buffer> = [4usize, 4].iter().map(|&n| d.alloc(n * u).unwrap()).collect();
    d.pass(&Cmd::read(nsid, lba0 + 8, 8), &mut rv).unwrap();
    let wrote: Vec<u8> = v.iter().flat_map(|b| b.iter().copied()).collect();
    let read: Vec<u8> = rv.iter().flat_map(|b| b.iter().copied()).collect();
    assert!(wrote == read, "{what}: vectored read back differs");
    // File-set commands on whole LBAs.
    let mut f = filled(d, seed + 20, 2 * u);
    d.pass(&Cmd::fs_write((lba0 + 16) * u as u64, 2 * u as u64), std::slice::from_mut(&mut f)).unwrap();
    let mut fr = d.alloc(2 * u).unwrap();
    d.pass(&Cmd::fs_read((lba0 + 16) * u as u64, 2 * u as u64), std::slice::from_mut(&mut fr)).unwrap();
    assert!(f[..] == fr[..], "{what}: file-set read back differs");
    // Flush, write zeroes, trim.
    d.pass(&Cmd::flush(nsid), &mut []).unwrap();
    d.pass(&Cmd::fs_flush(), &mut []).unwrap();
    d.pass(&Cmd::write_zeroes(nsid, lba0, 2), &mut []).unwrap();
    d.pass(&Cmd::read(nsid, lba0, 8), std::slice::from_mut(&mut r)).unwrap();
    assert!(r[..2 * u].iter().all(|&x| x == 0), "{what}: write zeroes left data");
    assert!(r[2 * u..] == w[2 * u..], "{what}: write zeroes went too far");
    d.pass(&Cmd::fs_trim((lba0 + 16) * u as u64, 2 * u as u64), &mut []).unwrap();
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn nvme_sync_writes_read_back_on_block_and_char_devices() {
    let env = need_env!("nvme_sync_writes_read_back_on_block_and_char_devices");
    sync_data(&open(env.block(1), "sync=nvme"), 0, 1);
    sync_data(&open(env.char(1), "sync=nvme"), 64, 2);
    sync_data(&open(env.char(2), "sync=nvme"), 0, 3);
    // The block interface sees what passthrough wrote, and the other way round.
    let p = open(env.char(1), "");
    let b = open(env.block(1), "sync=block,direct=1");
    sync_data(&b, 128, 4);
    let mut w = filled(&p, 5, 4096);
    p.pass(&Cmd::write(1, 256, 8), std::slice::from_mut(&mut w)).unwrap();
    let mut r = b.alloc(4096).unwrap();
    b.pass(&Cmd::read(1, 256, 8), std::slice::from_mut(&mut r)).unwrap();
    assert!(r[..] == w[..], "the block device reads back what passthrough wrote");
    // A file-set command that is not whole LBAs cannot go as an NVMe command.
    let e = p.pass(&Cmd::fs_read(100, 512), &mut [p.alloc(512).unwrap()]).unwrap_err();
    assert_eq!(status_of(&e).errno(), Some(libc::EINVAL), "{e}");
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn the_largest_transfer_goes_in_one_command_and_a_larger_one_is_refused() {
    let env = need_env!("the_largest_transfer_goes_in_one_command_and_a_larger_one_is_refused");
    for path in [env.char(1), env.block(1)] {
        let d = open(path, "sync=nvme");
        let (max, u) = (d.geometry().max_transfer as usize, d.geometry().lba_size as usize);
        let n = (max / u) as u32;
        let lba0 = 16384;
        let mut w = filled(&d, 6, max);
        d.pass(&Cmd::write(1, lba0, n), std::slice::from_mut(&mut w)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut r = d.alloc(max).unwrap();
        d.pass(&Cmd::read(1, lba0, n), std::slice::from_mut(&mut r)).unwrap();
        assert!(r[..] == w[..], "{path}");
        let e = d.pass(&Cmd::read(1, lba0, n + 1), &mut [d.alloc(max + u).unwrap()]).unwrap_err().to_string();
        assert!(e.contains("max transfer"), "{path}: {e}");
    }
}

// ---------------------------------------------------------------------------------------
// io_uring_cmd
// ---------------------------------------------------------------------------------------

/// qd16 writes (one commit), reads, compare; then vectored commands through the queue.
fn queue_data(d: &Device, lba0: u64, seed: u64) {
    let u = d.geometry().lba_size as usize;
    let nsid = d.ident().nsid;
    let what = format!("{} with {}", d.uri(), d.opts());
    let mut q = d.queue(16).unwrap();
    let chunk = 4 * u;
    for i in 0..16u64 {
        let b = filled(d, seed + i, chunk);
        q.submit(&Cmd::write(nsid, lba0 + 4 * i, 4), b.into(), i).map_err(|r| r.error).unwrap();
    }
    assert_eq!(q.commit().unwrap(), 16, "{what}");
    let mut done = 0;
    q.drain(|c| {
        assert!(c.status.is_ok(), "{what}: write {}: {}", c.tag, c.status);
        done += 1;
    })
    .unwrap();
    assert_eq!(done, 16);
    for i in 0..16u64 {
        q.submit(&Cmd::read(nsid, lba0 + 4 * i, 4), d.alloc(chunk).unwrap().into(), i).map_err(|r| r.error).unwrap();
    }
    q.drain(|c| {
        assert!(c.status.is_ok(), "{what}: read {}: {}", c.tag, c.status);
        assert!(c.data.bufs()[0][..] == pattern::bytes(seed + c.tag, chunk)[..], "{what}: read {} differs", c.tag);
    })
    .unwrap();
    // Vectored write and read.
    let v: Vec<Buffer> = (0..4).map(|i| filled(d, seed + 100 + i, u)).collect();
    let wrote: Vec<u8> = v.iter().flat_map(|b| b.iter().copied()).collect();
    q.submit(&Cmd::write(nsid, lba0 + 64, 4), Data::Vec(v), 100).map_err(|r| r.error).unwrap();
    q.drain(|c| assert!(c.status.is_ok(), "{what}: vectored write: {}", c.status)).unwrap();
    let rv: Vec<Buffer> = (0..2).map(|_| d.alloc(2 * u).unwrap()).collect();
    q.submit(&Cmd::read(nsid, lba0 + 64, 4), Data::Vec(rv), 101).map_err(|r| r.error).unwrap();
    q.drain(|c| {
        assert!(c.status.is_ok(), "{what}: vectored read: {}", c.status);
        let read: Vec<u8> = c.data.bufs().iter().flat_map(|b| b.iter().copied()).collect();
        assert!(read == wrote, "{what}: vectored read back differs");
    })
    .unwrap();
    // Flush, write zeroes, file-set trim and read through the queue.
    q.submit(&Cmd::flush(nsid), Data::None, 1).map_err(|r| r.error).unwrap();
    q.submit(&Cmd::write_zeroes(nsid, lba0, 4), Data::None, 2).map_err(|r| r.error).unwrap();
    q.submit(&Cmd::fs_trim((lba0 + 4) * u as u64, 4 * u as u64), Data::None, 3).map_err(|r| r.error).unwrap();
    q.drain(|c| assert!(c.status.is_ok(), "{what}: tag {}: {}", c.tag, c.status)).unwrap();
    q.submit(&Cmd::fs_read(lba0 * u as u64, chunk as u64), d.alloc(chunk).unwrap().into(), 4)
        .map_err(|r| r.error)
        .unwrap();
    q.drain(|c| {
        assert!(c.status.is_ok(), "{what}: {}", c.status);
        assert!(c.data.bufs()[0].iter().all(|&x| x == 0), "{what}: write zeroes left data");
    })
    .unwrap();
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn io_uring_cmd_at_qd16_plain_and_vectored() {
    let env = need_env!("io_uring_cmd_at_qd16_plain_and_vectored");
    let d = open(env.char(1), "async=io_uring_cmd");
    queue_data(&d, 4096, 10);
    queue_data(&open(env.char(2), ""), 4096, 11);
    queue_data(&open(env.char(1), "register_files=1"), 4096 + 256, 12);
    // Sixteen submissions, one commit: one syscall.
    let mut q = d.queue(16).unwrap();
    for i in 0..16u64 {
        q.submit(&Cmd::read(1, 4096 + i, 1), d.alloc(512).unwrap().into(), i).map_err(|r| r.error).unwrap();
    }
    assert_eq!(q.stats().syscalls, 0);
    q.commit().unwrap();
    assert_eq!(q.stats().syscalls, 1);
    // Dropping the queue with the reads in flight is safe.
    drop(q);
    // The data written through io_uring_cmd reads back through the ioctl interface.
    let s = open(env.char(1), "sync=nvme");
    let mut r = s.alloc(2048).unwrap();
    s.pass(&Cmd::read(1, 4096 + 8, 4), std::slice::from_mut(&mut r)).unwrap();
    assert!(r[..] == pattern::bytes(10 + 2, 2048)[..]);
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn io_uring_cmd_with_iopoll() {
    let env = need_env!("io_uring_cmd_with_iopoll");
    let d = open(env.char(1), "async=io_uring_cmd,iopoll=1");
    queue_data(&d, 8192, 20);
    queue_data(&open(env.char(2), "iopoll=1"), 8192, 21);
    // Commands without data on an IOPOLL ring oopsed Linux 6.1 (the driver cannot poll
    // them, and their interrupt completion clobbers the poll cookie): they run through
    // the ioctl at submit, one syscall each, and mix with polled reads.
    let mut q = d.queue(8).unwrap();
    for round in 0..20u64 {
        let before = q.stats().syscalls;
        q.submit(&Cmd::flush(1), Data::None, 1).map_err(|r| r.error).unwrap();
        q.submit(&Cmd::write_zeroes(1, 8192 + 512 + round, 1), Data::None, 2).map_err(|r| r.error).unwrap();
        assert_eq!(q.stats().syscalls - before, 2, "round {round}");
        q.submit(&Cmd::read(1, 8192 + round, 1), d.alloc(512).unwrap().into(), 3).map_err(|r| r.error).unwrap();
        let mut n = 0;
        q.drain(|c| {
            assert!(c.status.is_ok(), "round {round} tag {}: {}", c.tag, c.status);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 3);
    }
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn io_uring_cmd_with_sqpoll() {
    let env = need_env!("io_uring_cmd_with_sqpoll");
    let d = open(env.char(1), "async=io_uring_cmd,sqpoll=1");
    queue_data(&d, 12288, 30);
    let mut q = d.queue(16).unwrap();
    for i in 0..16u64 {
        q.submit(&Cmd::read(1, 12288 + i, 1), d.alloc(512).unwrap().into(), i).map_err(|r| r.error).unwrap();
    }
    q.commit().unwrap();
    // The poll thread takes the SQEs: a syscall only to wake it.
    assert!(q.stats().syscalls <= 1, "{:?}", q.stats());
    q.drain(|c| assert!(c.status.is_ok())).unwrap();
    // Full queues over and over, with commands the kernel fails at once (another nsid:
    // EINVAL while the poll thread is still in its batch): a free slot always takes a
    // submission.
    for round in 0..50u64 {
        for i in 0..16u64 {
            let nsid = if i % 4 == 0 { 2 } else { 1 };
            let r = q.submit(&Cmd::read(nsid, 12288 + i, 1), d.alloc(512).unwrap().into(), i);
            r.unwrap_or_else(|e| panic!("round {round} submit {i}: {e}"));
        }
        q.drain(|c| assert_eq!(c.status.is_ok(), c.tag % 4 != 0, "{}", c.status)).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// Errors: what the device says, decoded
// ---------------------------------------------------------------------------------------

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn device_status_is_decoded_for_each_interface() {
    let env = need_env!("device_status_is_decoded_for_each_interface");
    let s = open(env.char(1), "sync=nvme");
    let n = s.geometry().nlbas;
    // Invalid Command Opcode from the device: an I/O opcode nobody assigned.
    let bad_op = Cmd::io(Sqe { opcode: 0x7F, nsid: 1, ..Sqe::default() });
    let st = status_of(&s.pass(&bad_op, &mut []).unwrap_err());
    assert_eq!((st.code(), st.name(), st.errno()), (0x001, "Invalid Command Opcode", None), "{st}");
    assert!(st.dnr(), "{st}");
    // LBA Out of Range from the device: Compare is not range-checked by the library
    // (it is passed through as it is), so the device sees LBA nlbas.
    let cmp = Cmd::io(Sqe { opcode: 0x05, nsid: 1, cdw10: n as u32, cdw11: (n >> 32) as u32, ..Sqe::default() });
    let st = status_of(&s.pass(&cmp, &mut [s.alloc(512).unwrap()]).unwrap_err());
    assert_eq!((st.code(), st.name(), st.errno()), (0x080, "LBA Out of Range", None), "{st}");
    // A read past the end never reaches the device: the library refuses it first.
    let e = s.pass(&Cmd::read(1, n, 1), &mut [s.alloc(512).unwrap()]).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    // Compare that does not match: Media and Data Integrity Errors / Compare Failure.
    let mut w = filled(&s, 40, 512);
    s.pass(&Cmd::write(1, 20000, 1), std::slice::from_mut(&mut w)).unwrap();
    let mut other = filled(&s, 41, 512);
    let cmp_ok = Cmd::io(Sqe { opcode: 0x05, nsid: 1, cdw10: 20000, ..Sqe::default() });
    s.pass(&cmp_ok, std::slice::from_mut(&mut w)).unwrap();
    let st = status_of(&s.pass(&cmp_ok, std::slice::from_mut(&mut other)).unwrap_err());
    assert_eq!((st.code(), st.name()), (0x285, "Compare Failure"), "{st}");
    // A namespace that does not exist. The kernel refuses an I/O command whose nsid is
    // not the device's own before the device sees it (EINVAL) ...
    let e = s.pass(&Cmd::read(99, 0, 1), &mut [s.alloc(512).unwrap()]).unwrap_err();
    assert_eq!(status_of(&e).errno(), Some(libc::EINVAL), "{e}");
    // ... so the device's own answer comes from an admin command about namespace 99.
    let ctrl = open("/dev/nvme0", "");
    let smart = Cmd::admin(Sqe { opcode: 0x02, nsid: 99, cdw10: 0x02 | (512 / 4 - 1) << 16, ..Sqe::default() });
    let st = status_of(&ctrl.pass_admin(&smart, &mut [ctrl.alloc(512).unwrap()]).unwrap_err());
    assert_eq!((st.code(), st.name(), st.errno()), (0x00B, "Invalid Namespace or Format", None), "{st}");
    // The same log for every namespace works.
    ctrl.pass_admin(&smart.with_nsid(0xFFFF_FFFF), &mut [ctrl.alloc(512).unwrap()]).unwrap();
    // Through io_uring_cmd: the same statuses in the completions.
    let d = open(env.char(1), "");
    let mut q = d.queue(4).unwrap();
    q.submit(&bad_op, Data::None, 1).map_err(|r| r.error).unwrap();
    q.submit(&cmp, d.alloc(512).unwrap().into(), 2).map_err(|r| r.error).unwrap();
    q.submit(&Cmd::read(99, 0, 1), d.alloc(512).unwrap().into(), 3).map_err(|r| r.error).unwrap();
    let mut seen = 0;
    q.drain(|c| {
        seen += 1;
        let want = match c.tag {
            1 => (0x001, None),
            2 => (0x080, None),
            _ => (0x002, Some(libc::EINVAL)),
        };
        assert_eq!((c.status.code(), c.status.errno()), want, "tag {}: {}", c.tag, c.status);
    })
    .unwrap();
    assert_eq!(seen, 3);
    let r = q.submit(&Cmd::read(1, n, 1), d.alloc(512).unwrap().into(), 4).unwrap_err();
    assert!(matches!(r.error, Error::OutOfRange { .. }), "{}", r.error);
    assert_eq!(r.data.total_len(), 512);
}

// ---------------------------------------------------------------------------------------
// Zones
// ---------------------------------------------------------------------------------------

fn report(d: &Device, slba: u64, zones: u32) -> ZoneReport {
    let bytes = 64 * (zones + 1);
    let mut b = d.alloc(bytes as usize).unwrap();
    d.pass(&Cmd::zone_mgmt_recv(d.ident().nsid, slba, bytes, true), std::slice::from_mut(&mut b))
        .unwrap_or_else(|e| panic!("{}: report at {slba}: {e}", d.uri()));
    ZoneReport::parse(&b).unwrap()
}

fn zone_send(d: &Device, zslba: u64, a: ZoneAction, all: bool) -> Result<u64, Error> {
    d.pass(&Cmd::zone_mgmt_send(d.ident().nsid, zslba, a, all), &mut [])
}

/// Sequential-write rules and zone actions through `d`'s sync interface, on zone `zone`.
fn zone_rules(d: &Device, zone: u64, append: bool) {
    let z = d.geometry().zones.unwrap();
    let (u, nsid) = (d.geometry().lba_size as usize, d.ident().nsid);
    let zslba = zone * z.zone_size;
    let what = format!("{} ({:?})", d.uri(), d.interfaces().sync);
    zone_send(d, zslba, ZoneAction::Reset, false).unwrap();
    let r = report(d, zslba, 1);
    assert_eq!(r.nr_zones, 1, "{what}");
    let zd = r.zones[0];
    assert_eq!((zd.state, zd.zslba, zd.wp, zd.capacity), (ZoneState::Empty, zslba, zslba, z.zone_capacity), "{what}");
    // At the write pointer: fine. Anywhere else: refused.
    let mut w = filled(d, zone, 8 * u);
    d.pass(&Cmd::write(nsid, zslba, 8), std::slice::from_mut(&mut w)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let e = d.pass(&Cmd::write(nsid, zslba + 16, 8), std::slice::from_mut(&mut w)).unwrap_err();
    let st = status_of(&e);
    if d.interfaces().sync == Some(SyncIface::Nvme) {
        assert_eq!((st.code(), st.name()), (0x1BC, "Zone Invalid Write"), "{what}: {st}");
    } else {
        // The block layer turns the device's status into EIO.
        assert!(st.errno().is_some(), "{what}: {st}");
    }
    let r = report(d, zslba, 1);
    assert_eq!((r.zones[0].state, r.zones[0].wp), (ZoneState::ImplicitlyOpened, zslba + 8), "{what}");
    if append {
        let mut a = filled(d, zone + 1000, 8 * u);
        let lba = d.pass(&Cmd::zone_append(nsid, zslba, 8), std::slice::from_mut(&mut a)).unwrap();
        assert_eq!(lba, zslba + 8, "{what}: zone append returns the LBA it wrote at");
        let mut rd = d.alloc(8 * u).unwrap();
        d.pass(&Cmd::read(nsid, zslba + 8, 8), std::slice::from_mut(&mut rd)).unwrap();
        assert!(rd[..] == a[..], "{what}: appended data");
    } else {
        let e = d.pass(&Cmd::zone_append(nsid, zslba, 8), &mut [filled(d, 1, 8 * u)]).unwrap_err();
        assert_eq!(status_of(&e).code(), 0x001, "{what}: {e}");
    }
    let mut rd = d.alloc(8 * u).unwrap();
    d.pass(&Cmd::read(nsid, zslba, 8), std::slice::from_mut(&mut rd)).unwrap();
    assert!(rd[..] == w[..], "{what}: data at the zone start");
    // Close, open, finish, reset.
    zone_send(d, zslba, ZoneAction::Close, false).unwrap();
    assert_eq!(report(d, zslba, 1).zones[0].state, ZoneState::Closed, "{what}");
    zone_send(d, zslba, ZoneAction::Open, false).unwrap();
    assert_eq!(report(d, zslba, 1).zones[0].state, ZoneState::ExplicitlyOpened, "{what}");
    zone_send(d, zslba, ZoneAction::Finish, false).unwrap();
    assert_eq!(report(d, zslba, 1).zones[0].state, ZoneState::Full, "{what}");
    let e = d.pass(&Cmd::write(nsid, zslba, 8), std::slice::from_mut(&mut w)).unwrap_err();
    if d.interfaces().sync == Some(SyncIface::Nvme) {
        assert_eq!(status_of(&e).code(), 0x1B9, "{what}: Zone Is Full: {e}");
    }
    zone_send(d, zslba, ZoneAction::Reset, false).unwrap();
    let r = report(d, zslba, 1);
    assert_eq!((r.zones[0].state, r.zones[0].wp), (ZoneState::Empty, zslba), "{what}: reset empties the zone");
    // A zone action on an LBA that is not a zone start: Invalid Field in Command.
    let e = zone_send(d, zslba + 1, ZoneAction::Reset, false).unwrap_err();
    assert_eq!(status_of(&e).code(), 0x002, "{what}: {e}");
}

/// Select-all actions, filters and whole-device reports.
fn zone_all(d: &Device) {
    let z = d.geometry().zones.unwrap();
    let (u, nsid) = (d.geometry().lba_size as usize, d.ident().nsid);
    let what = d.uri().to_string();
    zone_send(d, 0, ZoneAction::Reset, true).unwrap();
    for zone in [2u64, 4, 6] {
        d.pass(&Cmd::write(nsid, zone * z.zone_size, 1), &mut [filled(d, zone, u)]).unwrap();
    }
    let full = report(d, 0, z.nr_zones as u32);
    assert_eq!(full.nr_zones, z.nr_zones, "{what}");
    let open: Vec<u64> =
        full.zones.iter().filter(|x| x.state == ZoneState::ImplicitlyOpened).map(|x| x.zslba / z.zone_size).collect();
    assert_eq!(open, [2, 4, 6], "{what}");
    // A non-partial report counts every matching zone even when the buffer holds fewer.
    let mut b = d.alloc(128).unwrap();
    let c = Cmd::zone_mgmt_recv(nsid, 0, 128, false).zone_filter(ZoneFilter::ImplicitlyOpened);
    d.pass(&c, std::slice::from_mut(&mut b)).unwrap();
    let r = ZoneReport::parse(&b).unwrap();
    assert_eq!((r.nr_zones, r.zones.len(), r.zones[0].zslba), (3, 1, 2 * z.zone_size), "{what}");
    let c = Cmd::zone_mgmt_recv(nsid, 0, 128, false).zone_filter(ZoneFilter::Empty);
    d.pass(&c, std::slice::from_mut(&mut b)).unwrap();
    assert_eq!(ZoneReport::parse(&b).unwrap().nr_zones, z.nr_zones - 3, "{what}");
    zone_send(d, 0, ZoneAction::Close, true).unwrap();
    let closed = report(d, 0, z.nr_zones as u32).zones.iter().filter(|x| x.state == ZoneState::Closed).count();
    assert_eq!(closed, 3, "{what}: close all");
    zone_send(d, 0, ZoneAction::Open, true).unwrap();
    let opened =
        report(d, 0, z.nr_zones as u32).zones.iter().filter(|x| x.state == ZoneState::ExplicitlyOpened).count();
    assert_eq!(opened, 3, "{what}: open all opens the closed zones only");
    zone_send(d, 0, ZoneAction::Finish, true).unwrap();
    let r = report(d, 0, z.nr_zones as u32);
    assert_eq!(r.zones.iter().filter(|x| x.state == ZoneState::Full).count(), 3, "{what}: finish all");
    zone_send(d, 0, ZoneAction::Reset, true).unwrap();
    let r = report(d, 0, z.nr_zones as u32);
    assert!(r.zones.iter().all(|x| x.state == ZoneState::Empty && x.wp == x.zslba), "{what}: reset all");
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn zones_through_nvme_passthrough() {
    let env = need_env!("zones_through_nvme_passthrough");
    let _l = zone_lock();
    zone_rules(&open(env.char(3), "sync=nvme"), 1, true);
    zone_rules(&open(env.block(3), "sync=nvme"), 3, true);
    zone_all(&open(env.char(3), "sync=nvme"));
    // Zone appends through io_uring_cmd: each lands at its own LBA, reported in the result.
    let d = open(env.char(3), "");
    let z = d.geometry().zones.unwrap();
    let zslba = 5 * z.zone_size;
    zone_send(&d, zslba, ZoneAction::Reset, false).unwrap();
    let mut q = d.queue(8).unwrap();
    for i in 0..8u64 {
        q.submit(&Cmd::zone_append(3, zslba, 2), filled(&d, 50 + i, 1024).into(), i).map_err(|r| r.error).unwrap();
    }
    let mut at = BTreeMap::new();
    q.drain(|c| {
        assert!(c.status.is_ok(), "append {}: {}", c.tag, c.status);
        assert!(c.result >= zslba && c.result < zslba + 16 && (c.result - zslba) % 2 == 0, "append at {}", c.result);
        at.insert(c.result, c.tag);
    })
    .unwrap();
    assert_eq!(at.len(), 8, "every append at its own LBA: {at:?}");
    for (lba, tag) in at {
        let mut r = d.alloc(1024).unwrap();
        d.pass(&Cmd::read(3, lba, 2), std::slice::from_mut(&mut r)).unwrap();
        assert!(r[..] == pattern::bytes(50 + tag, 1024)[..], "append {tag} at {lba}");
    }
    // A write off the write pointer through io_uring_cmd: Zone Invalid Write.
    q.submit(&Cmd::write(3, zslba + 100, 1), filled(&d, 1, 512).into(), 9).map_err(|r| r.error).unwrap();
    q.drain(|c| assert_eq!(c.status.code(), 0x1BC, "{}", c.status)).unwrap();
    zone_send(&d, zslba, ZoneAction::Reset, false).unwrap();
}

/// One command of [`device_errors_end_exactly_the_failing_commands_of_a_batch`] and the
/// status code the device must give it (0: success).
struct Expect {
    cmd: Cmd,
    data: Option<Buffer>,
    code: u16,
    /// A read of zone 15: which of its three 8-LBA pieces it must return.
    piece: Option<usize>,
}

/// Runs `cmds` through `q` (tag = index; when the queue is full, waits for one), and
/// returns each tag's status and result. Fails on a tag completed twice, never, or
/// unknown.
fn batch(q: &mut ioswitch::Queue, cmds: &mut [Expect]) -> Vec<(Status, u64, Data)> {
    let mut done: Vec<Option<(Status, u64, Data)>> = (0..cmds.len()).map(|_| None).collect();
    let mut record = |c: ioswitch::Completion| {
        let t = c.tag as usize;
        assert!(t < done.len(), "completion for tag {t}, never submitted");
        assert!(done[t].is_none(), "tag {t} completed twice");
        done[t] = Some((c.status, c.result, c.data));
    };
    for (i, e) in cmds.iter_mut().enumerate() {
        let mut data: Data = e.data.take().map(Data::from).unwrap_or(Data::None);
        loop {
            match q.submit(&e.cmd, data, i as u64) {
                Ok(()) => break,
                Err(r) if matches!(r.error, Error::Busy { .. }) => {
                    data = r.data;
                    q.wait(1, &mut record).unwrap();
                }
                Err(r) => panic!("submit tag {i}: {}", r.error),
            }
        }
    }
    q.drain(&mut record).unwrap();
    assert_eq!(q.outstanding(), 0);
    let st = q.stats();
    assert_eq!(st.submitted, st.completed, "{st:?}");
    done.into_iter().enumerate().map(|(t, d)| d.unwrap_or_else(|| panic!("tag {t} never completed"))).collect()
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn device_errors_end_exactly_the_failing_commands_of_a_batch() {
    // Errors the (emulated) device reports, not injected ones: QEMU's NVMe has no error
    // injection and device-mapper cannot sit under /dev/ngXnY (docs/RELIABILITY.md). On the
    // zoned namespace: a write to a full zone (Zone Is Full), a write off the write pointer
    // (Zone Invalid Write); through passthrough also an unassigned opcode (Invalid Command
    // Opcode) and a Compare past the end (LBA Out of Range), among good writes and reads
    // in flight at queue depth 8.
    let env = need_env!("device_errors_end_exactly_the_failing_commands_of_a_batch");
    let _l = zone_lock();
    let p = open(env.char(3), "sync=nvme");
    let z = p.geometry().zones.unwrap();
    let (u, n) = (p.geometry().lba_size as usize, p.geometry().nlbas);
    let zs = |zone: u64| zone * z.zone_size;
    // Zone 15 holds data every batch reads.
    zone_send(&p, zs(15), ZoneAction::Reset, false).unwrap();
    p.pass(&Cmd::write(3, zs(15), 24), &mut [filled(&p, 1500, 24 * u)]).unwrap();
    let configs: [(&str, &str, bool); 5] = [
        (env.char(3), "", true),                          // io_uring_cmd
        (env.char(3), "sync=nvme,async=thrpool", true),   // NVMe ioctl calls in flight on threads
        (env.char(3), "sync=nvme", true),                 // NVMe ioctl, one call at a time
        (env.block(3), "async=io_uring,direct=1", false), // block layer
        (env.block(3), "async=libaio,direct=1", false),
    ];
    for (k, (path, o, passthrough)) in configs.into_iter().enumerate() {
        let d = open(path, o);
        let what = format!("{path} {o:?} ({:?})", if o == "sync=nvme" { None } else { d.interfaces().r#async });
        // Zones of this run: a full one, two empty ones.
        let (full, empty, off_wp) = (16 + 3 * k as u64, 17 + 3 * k as u64, 18 + 3 * k as u64);
        for zone in [full, empty, off_wp] {
            zone_send(&p, zs(zone), ZoneAction::Reset, false).unwrap();
        }
        zone_send(&p, zs(full), ZoneAction::Finish, false).unwrap();
        let seed = 1600 + 10 * k as u64;
        let write = |slba: u64, s: u64, code: u16| Expect {
            cmd: Cmd::write(3, slba, 8),
            data: Some(filled(&d, s, 8 * u)),
            code,
            piece: None,
        };
        let read = |piece: usize| Expect {
            cmd: Cmd::read(3, zs(15) + 8 * piece as u64, 8),
            data: Some(d.alloc(8 * u).unwrap()),
            code: 0,
            piece: Some(piece),
        };
        let mut cmds = vec![
            write(zs(empty), seed, 0),
            read(0),
            write(zs(full), seed + 1, 0x1B9),
            read(1),
            write(zs(off_wp) + 16, seed + 2, 0x1BC),
            read(2),
        ];
        if passthrough {
            let bad_op = Cmd::io(Sqe { opcode: 0x7F, nsid: 3, ..Sqe::default() });
            let cmp =
                Cmd::io(Sqe { opcode: 0x05, nsid: 3, cdw10: n as u32, cdw11: (n >> 32) as u32, ..Sqe::default() });
            cmds.push(Expect { cmd: bad_op, data: None, code: 0x001, piece: None });
            cmds.push(Expect { cmd: cmp, data: Some(d.alloc(u).unwrap()), code: 0x080, piece: None });
        }
        cmds.push(write(zs(off_wp), seed + 3, 0));
        let want: Vec<(u16, Option<usize>)> = cmds.iter().map(|e| (e.code, e.piece)).collect();
        let got: Vec<(Status, u64, Data)> = if o == "sync=nvme" {
            cmds.iter_mut()
                .map(|e| {
                    let mut bufs: Vec<Buffer> = e.data.take().into_iter().collect();
                    match d.pass(&e.cmd, &mut bufs) {
                        Ok(r) => (Status::OK, r, bufs.pop().map(Data::from).unwrap_or(Data::None)),
                        Err(Error::Command { status, .. }) => (status, 0, Data::None),
                        Err(e) => panic!("{what}: not a command error: {e}"),
                    }
                })
                .collect()
        } else {
            let mut q = d.queue(8).unwrap();
            batch(&mut q, &mut cmds)
        };
        let mut failed = Vec::new();
        let zone15 = pattern::bytes(1500, 24 * u);
        for (t, ((st, _, data), &(code, piece))) in got.iter().zip(&want).enumerate() {
            if code == 0 {
                assert!(st.is_ok(), "{what}: tag {t} failed: {st}");
                if let Some(i) = piece {
                    let b = &data.bufs()[0];
                    assert!(b[..] == zone15[i * 8 * u..(i + 1) * 8 * u], "{what}: read tag {t}: wrong data");
                }
            } else if passthrough {
                // The device's own status, as it gave it: no errno, Do Not Retry as set.
                assert_eq!((st.code(), st.errno(), st.dnr()), (code, None, true), "{what}: tag {t}: {st}");
                failed.push(format!("tag {t} {}", st.name()));
            } else {
                // The block layer turns a zone error into BLK_STS_IOERR: EIO, which maps to
                // Data Transfer Error.
                assert_eq!((st.errno(), st.code(), st.dnr()), (Some(libc::EIO), 0x004, true), "{what}: tag {t}: {st}");
                failed.push(format!("tag {t} EIO"));
            }
        }
        // The good writes are there, the failed ones changed nothing.
        let r = report(&p, zs(full), 4);
        // (A full zone's write pointer is not valid: only its state counts.)
        let states: Vec<(ZoneState, Option<u64>)> =
            r.zones[..3].iter().map(|x| (x.state, (x.state != ZoneState::Full).then(|| x.wp - x.zslba))).collect();
        assert_eq!(
            states,
            [(ZoneState::Full, None), (ZoneState::ImplicitlyOpened, Some(8)), (ZoneState::ImplicitlyOpened, Some(8))],
            "{what}: zones {full}, {empty}, {off_wp} after the batch"
        );
        for (zone, s) in [(empty, seed), (off_wp, seed + 3)] {
            let mut b = p.alloc(8 * u).unwrap();
            p.pass(&Cmd::read(3, zs(zone), 8), std::slice::from_mut(&mut b)).unwrap();
            assert!(b[..] == pattern::bytes(s, 8 * u)[..], "{what}: the write to zone {zone}");
        }
        // The same device keeps working after the errors.
        if o != "sync=nvme" {
            let mut q = d.queue(8).unwrap();
            let mut again = vec![write(zs(empty) + 8, seed + 4, 0)];
            for (st, _, _) in batch(&mut q, &mut again) {
                assert!(st.is_ok(), "{what}: a write after the errors: {st}");
            }
        }
        let _ = writeln!(std::io::stderr(), "fault: device-reported errors, {what}: {} of {} commands failed, each with its own status: {}; the others ok; zone write pointers as the good writes left them", failed.len(), want.len(), failed.join(", "));
        for zone in [full, empty, off_wp] {
            zone_send(&p, zs(zone), ZoneAction::Reset, false).unwrap();
        }
    }
    zone_send(&p, zs(15), ZoneAction::Reset, false).unwrap();
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn zones_through_the_block_layer() {
    let env = need_env!("zones_through_the_block_layer");
    let _l = zone_lock();
    let b = open(env.block(3), "sync=block,direct=1");
    zone_rules(&b, 7, false);
    zone_all(&b);
    // The block layer's report and the device's own agree.
    let p = open(env.char(3), "sync=nvme");
    let z = p.geometry().zones.unwrap();
    for zone in [9u64, 10] {
        p.pass(&Cmd::write(3, zone * z.zone_size, 4), &mut [filled(&p, zone, 2048)]).unwrap();
    }
    zone_send(&p, 10 * z.zone_size, ZoneAction::Close, false).unwrap();
    let (rb, rp) = (report(&b, 8 * z.zone_size, 4), report(&p, 8 * z.zone_size, 4));
    assert_eq!(rb, rp, "block-layer report vs passthrough report");
    zone_send(&b, 0, ZoneAction::Reset, true).unwrap();
    assert!(report(&p, 0, 32).zones.iter().all(|x| x.state == ZoneState::Empty));
}

#[test]
#[ignore = "needs the QEMU guest's NVMe: tests/vm/nvme-tests.sh runs it with --include-ignored"]
fn zones_on_a_zoned_block_device_that_is_not_nvme() {
    let path = "/dev/nullb0";
    let zoned = fs::read_to_string("/sys/block/nullb0/queue/zoned").map(|s| s.trim().to_string());
    if zoned.as_deref().map_or(true, |z| z == "none") {
        panic!("no zoned null_blk device (/dev/nullb0): nvme-tests.sh loads one in the guest");
    }
    let _l = zone_lock();
    let d = open(path, "direct=1");
    assert_eq!(d.ident().kind, DevKind::Block);
    let z = d.geometry().zones.unwrap();
    // Loaded by nvme-tests.sh with zone_size=4 and zone_capacity=3 (MiB): the capacity
    // comes from BLKREPORTZONE, not the zone size.
    let u = d.geometry().lba_size as u64;
    assert_eq!((z.zone_size * u, z.zone_capacity * u), (4 * MIB, 3 * MIB), "{z:?}");
    zone_rules(&d, 1, false);
    zone_all(&d);
}
