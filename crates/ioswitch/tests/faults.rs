//! Fault injection and crash consistency with the kernel's own injectors (issue 17, parts 2
//! and 3), for real: device-mapper `flakey` (I/O errors, dropped writes), `delay` (latency
//! spikes, dropping a queue with delayed commands in flight), `log-writes` (every write and
//! flush recorded, replayed up to each flush by `ioswitch_testkit::logwrites`, on the raw
//! device and under ext4) and `scsi_debug` (medium errors on chosen sectors; commands it
//! never answers, which the SCSI layer times out), each over a
//! loop device, through every interface that runs on a block device; and `ioswitch bench`
//! beside fio on a failing device.
//!
//! The host kernel has no device-mapper and no scsi_debug: there every test says why it
//! skips. `tests/vm/fault-tests.sh` loads the modules in the QEMU guest and runs this
//! binary there with `IOSWITCH_VM=1`, where a skip is a failure. The tests print one
//! `fault:` or `crash:` line per interface, the rows of docs/RELIABILITY.md.

use ioswitch::{Cmd, Completion, Data, Device, Error, Opts, Queue, Status};
use ioswitch_testkit::tools::OutputBounded;
use ioswitch_testkit::{logwrites::Log, pattern, run, skip};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BS: u64 = 4096;
/// The async interfaces that run on a block device.
const ASYNC: &[&str] = &["libaio", "io_uring", "thrpool", "posix", "emu"];

/// A result line for the tables of docs/RELIABILITY.md, past libtest's capture.
fn report(line: String) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Root, losetup and the device-mapper targets `need`, as `dmsetup targets` (the kernel's
/// own list of loaded targets) says.
fn dm_targets(need: &[&str]) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (losetup, dmsetup)".into());
    }
    run("losetup", &["--version"]).map_err(|e| format!("losetup is not usable: {e}"))?;
    let misc = std::fs::read_to_string("/proc/misc").unwrap_or_default();
    if !misc.lines().any(|l| l.ends_with(" device-mapper")) {
        return Err("no device-mapper in this kernel (/proc/misc lists none; load dm_mod)".into());
    }
    let targets = run("dmsetup", &["targets"]).map_err(|e| format!("dmsetup is not usable: {e}"))?;
    for t in need {
        if !targets.lines().any(|l| l.split_whitespace().next() == Some(t)) {
            return Err(format!(
                "the kernel has no dm target '{t}' loaded (dmsetup targets: {targets:?}; load dm-{t})"
            ));
        }
    }
    Ok(())
}

/// Loop devices and dm devices to undo when a test ends, passed or failed.
struct Setup {
    undo: Vec<(String, Vec<String>)>,
    dir: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("ioswitch-faults-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Setup { undo: Vec::new(), dir }
    }
    fn then_undo(&mut self, prog: &str, args: &[&str]) {
        self.undo.push((prog.into(), args.iter().map(|s| s.to_string()).collect()));
    }
    /// A loop device over a new sparse image of `mib` MiB.
    fn loop_dev(&mut self, mib: u64) -> (PathBuf, PathBuf) {
        let img = self.dir.join(format!("disk{}.img", self.undo.len()));
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(mib << 20).unwrap();
        drop(f);
        let dev = run("losetup", &["--find", "--show", img.to_str().unwrap()]).unwrap();
        self.then_undo("losetup", &["-d", &dev]);
        (PathBuf::from(dev), img)
    }
    /// A device-mapper device with this table (lines of "start length target args").
    fn dm(&mut self, tag: &str, table: &str) -> (String, PathBuf) {
        let name = format!("ioswitch-faults-{tag}-{}", std::process::id());
        let file = self.dir.join(format!("{name}.table"));
        std::fs::write(&file, table).unwrap();
        run("dmsetup", &["create", &name, file.to_str().unwrap()]).unwrap();
        self.then_undo("dmsetup", &["remove", "--retry", &name]);
        // No udev in the guest: the /dev/mapper node comes from mknodes.
        run("dmsetup", &["mknodes", &name]).unwrap();
        let path = PathBuf::from(format!("/dev/mapper/{name}"));
        (name, path)
    }
    /// Undoes the newest step now (the dm device, to read its log afterwards).
    fn undo_last(&mut self) {
        if let Some((prog, args)) = self.undo.pop() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&prog, &args).unwrap();
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        while let Some((prog, args)) = self.undo.pop() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Err(e) = run(&prog, &args) {
                let _ = writeln!(std::io::stderr(), "clean-up: {e}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A [`Setup`] named `tag` with a loop device of `DEV_MIB` MiB, filled with the pattern of
/// seed 1.
fn prefilled(tag: &str) -> (Setup, PathBuf) {
    let mut s = Setup::new(tag);
    let (lo, _) = s.loop_dev(DEV_MIB);
    prefill(&lo, DEV_MIB << 20, 1);
    (s, lo)
}

/// The start of the tests over the dm `target`: skips test `t` (`None`) when the kernel
/// lacks it, else [`prefilled`].
fn dm_setup(t: &str, target: &str, tag: &str) -> Option<(Setup, PathBuf)> {
    if let Err(why) = dm_targets(&[target]) {
        skip(t, &why);
        return None;
    }
    Some(prefilled(tag))
}

fn open(dev: &Path, opts: &str) -> Device {
    let o: Opts = opts.parse().unwrap_or_else(|e| panic!("{opts}: {e}"));
    Device::open(dev.to_str().unwrap(), &o).unwrap_or_else(|e| panic!("{} with {opts}: {e}", dev.display()))
}

/// The async interface `iface` on `dev` with O_DIRECT, and a queue of 8 on it.
fn direct_queue(dev: &Path, iface: &str) -> (Device, Queue) {
    let d = open(dev, &format!("async={iface},direct=1"));
    let q = d.queue(8).unwrap();
    (d, q)
}

/// Writes the pattern of `seed` over the first `bytes` of `dev` (1 MiB at a time).
fn prefill(dev: &Path, bytes: u64, seed: u64) {
    let d = open(dev, "sync=psync,direct=1");
    let chunk = 1u64 << 20;
    for off in (0..bytes).step_by(chunk as usize) {
        let mut b = d.alloc(chunk as usize).unwrap();
        pattern::fill(&mut b, off, seed);
        d.pass(&Cmd::fs_write(off, chunk), &mut [b]).unwrap();
    }
}

/// One command of a batch: write (the pattern of `seed`) or read `BS` bytes at `off`.
#[derive(Clone, Copy, Debug)]
struct Io {
    write: bool,
    off: u64,
    seed: u64,
}

/// What came back for one tag.
struct Done {
    status: Status,
    result: u64,
    data: Data,
    latency: Duration,
}

/// Runs `ios` through the queue (tag = index), waiting for completions whenever it is
/// full; returns each tag's completion. Fails on a tag completed twice, or never.
fn run_batch(dev: &Device, q: &mut Queue, ios: &[Io]) -> Vec<Done> {
    let mut done: Vec<Option<Done>> = (0..ios.len()).map(|_| None).collect();
    let mut started = vec![Instant::now(); ios.len()];
    let record = |c: Completion, started: &[Instant], done: &mut [Option<Done>]| {
        let t = c.tag as usize;
        assert!(t < ios.len(), "completion with tag {t}, never submitted");
        assert!(done[t].is_none(), "tag {t} completed twice");
        done[t] = Some(Done { status: c.status, result: c.result, data: c.data, latency: started[t].elapsed() });
    };
    for (i, io) in ios.iter().enumerate() {
        let mut b = dev.alloc(BS as usize).unwrap();
        if io.write {
            pattern::fill(&mut b, io.off, io.seed);
        }
        let cmd = if io.write { Cmd::fs_write(io.off, BS) } else { Cmd::fs_read(io.off, BS) };
        let mut data: Data = b.into();
        loop {
            started[i] = Instant::now();
            match q.submit(&cmd, data, i as u64) {
                Ok(()) => break,
                Err(r) if matches!(r.error, Error::Busy { .. }) => {
                    data = r.data;
                    q.wait(1, |c| record(c, &started, &mut done)).unwrap();
                }
                Err(r) => panic!("submit {io:?}: {}", r.error),
            }
        }
    }
    q.drain(|c| record(c, &started, &mut done)).unwrap();
    assert_eq!(q.outstanding(), 0);
    done.into_iter()
        .enumerate()
        .map(|(t, d)| d.unwrap_or_else(|| panic!("tag {t} ({:?}) never completed", ios[t])))
        .collect()
}

/// Checks one successful completion: the whole length moved, and a read got `want_seed`'s
/// pattern.
fn check_ok(what: &str, io: &Io, d: &Done, want_seed: u64) {
    assert!(d.status.is_ok(), "{what}: {io:?} failed: {}", d.status);
    assert_eq!(d.result, BS, "{what}: {io:?} moved {} bytes", d.result);
    if !io.write {
        pattern::compare(&d.data.bufs()[0], &pattern::at(io.off, BS, want_seed), io.off, Some(want_seed), what)
            .unwrap_or_else(|e| panic!("{what}: read {io:?}: {e}"));
    }
}

/// The status every interface must give a command the device failed with EIO: the errno,
/// and NVMe's Data Transfer Error (generic status 0x04) with Do Not Retry.
fn check_eio(what: &str, io: &Io, s: Status) {
    assert!(!s.is_ok(), "{what}: {io:?} on the failing range succeeded");
    assert_eq!(s.errno(), Some(libc::EIO), "{what}: {io:?}: {s}");
    assert_eq!((s.code(), s.dnr()), (0x004, true), "{what}: {io:?}: {s}");
}

// Sectors (512 B) of the injected range: 2 MiB .. 2 MiB + 256 KiB of a 16 MiB device.
const DEV_MIB: u64 = 16;
const BAD_START: u64 = 4096;
const BAD_LEN: u64 = 512;

/// A table that maps `target` over the bad range and `linear` over the rest of `lo`.
fn table_with(lo: &Path, target: &str) -> String {
    let l = lo.display();
    let total = DEV_MIB << 11;
    let end = BAD_START + BAD_LEN;
    format!("0 {BAD_START} linear {l} 0\n{BAD_START} {BAD_LEN} {target}\n{end} {} linear {l} {end}\n", total - end)
}

/// [`table_with`] a dm-flakey target over the bad range that is always down (up 0 s, down
/// 1 s): every I/O of the range fails, or with the `features` (" 1 drop_writes") as they
/// say.
fn flakey_table(lo: &Path, features: &str) -> String {
    table_with(lo, &format!("flakey {} {BAD_START} 0 1{features}", lo.display()))
}

/// A batch of 48 commands: every third in the bad range, the others on ranges of their
/// own elsewhere; even tags write `seed`, odd tags read.
fn mixed_batch(seed: u64) -> Vec<Io> {
    (0..48u64)
        .map(|i| {
            let off = if i % 3 == 0 { (BAD_START << 9) + (i * BS) % (BAD_LEN << 9) } else { (8 << 20) + i * BS };
            Io { write: i % 2 == 0, off, seed }
        })
        .collect()
}

fn in_bad(off: u64) -> bool {
    (BAD_START << 9..(BAD_START + BAD_LEN) << 9).contains(&off)
}

#[test]
fn flakey_errors_end_exactly_the_commands_that_touch_the_failing_range() {
    const T: &str = "flakey_errors_end_exactly_the_commands_that_touch_the_failing_range";
    let Some((mut s, lo)) = dm_setup(T, "flakey", "flakey") else {
        return;
    };
    // Up 0 s, down 1 s, no features: always down, every I/O of the range fails.
    let (_, dm) = s.dm("flakey", &flakey_table(&lo, ""));
    for (k, iface) in ASYNC.iter().enumerate() {
        let seed = 10 + k as u64;
        let (dev, mut q) = direct_queue(&dm, iface);
        let ios = mixed_batch(seed);
        let done = run_batch(&dev, &mut q, &ios);
        let mut failed = 0;
        for (io, d) in ios.iter().zip(&done) {
            if in_bad(io.off) {
                check_eio(iface, io, d.status);
                failed += 1;
            } else {
                check_ok(iface, io, d, 1);
            }
        }
        // The queue keeps working: read back what the good writes wrote.
        let back: Vec<Io> =
            ios.iter().filter(|io| io.write && !in_bad(io.off)).map(|io| Io { write: false, ..*io }).collect();
        for (io, d) in back.iter().zip(run_batch(&dev, &mut q, &back)) {
            check_ok(iface, io, &d, seed);
        }
        let st = q.stats();
        assert_eq!(st.submitted, st.completed, "{iface}: {st:?}");
        report(format!(
            "fault: flakey EIO: {iface}: {failed} of {} commands failed, each with its own tag, EIO / {}; {} good commands ok; {} reads after the errors ok",
            ios.len(),
            done.iter().find(|d| !d.status.is_ok()).map(|d| d.status.to_string()).unwrap_or_default(),
            ios.len() - failed,
            back.len()
        ));
    }
    // The synchronous interfaces: the error of the one failing call. For mmap the failing
    // page raises SIGBUS in the copy, which must become the command's EIO (sys/sigbus.rs).
    for iface in ["psync", "block", "mmap"] {
        let dev = open(&dm, &format!("sync={iface},direct=1"));
        let mut failed = 0;
        for io in mixed_batch(20) {
            let mut b = dev.alloc(BS as usize).unwrap();
            if io.write {
                pattern::fill(&mut b, io.off, io.seed);
            }
            let cmd = if io.write { Cmd::fs_write(io.off, BS) } else { Cmd::fs_read(io.off, BS) };
            let mut bufs = [b];
            match dev.pass(&cmd, &mut bufs) {
                Ok(n) => {
                    assert!(!in_bad(io.off), "{iface}: {io:?} on the failing range succeeded");
                    assert_eq!(n, BS, "{iface}: {io:?}");
                    if !io.write {
                        pattern::compare(&bufs[0], &pattern::at(io.off, BS, 1), io.off, Some(1), iface).unwrap();
                    }
                }
                Err(Error::Command { status, .. }) => {
                    assert!(in_bad(io.off), "{iface}: {io:?} failed: {status}");
                    check_eio(iface, &io, status);
                    failed += 1;
                }
                Err(e) => panic!("{iface}: {io:?}: not a command error: {e}"),
            }
        }
        report(format!(
            "fault: flakey EIO: {iface}: {failed} of 48 calls failed with EIO / Data Transfer Error, the others ok"
        ));
    }
}

#[test]
fn flakey_dropped_writes_are_acknowledged_and_absent_as_the_device_says() {
    const T: &str = "flakey_dropped_writes_are_acknowledged_and_absent_as_the_device_says";
    let Some((mut s, lo)) = dm_setup(T, "flakey", "drop") else {
        return;
    };
    let (_, dm) = s.dm("drop", &flakey_table(&lo, " 1 drop_writes"));
    for (k, iface) in ASYNC.iter().enumerate() {
        let seed = 30 + k as u64;
        let (dev, mut q) = direct_queue(&dm, iface);
        let ios = mixed_batch(seed);
        for (io, d) in ios.iter().zip(run_batch(&dev, &mut q, &ios)) {
            // The device acknowledges a dropped write: nothing below the library can tell.
            check_ok(iface, io, &d, 1);
        }
        let back: Vec<Io> = ios.iter().filter(|io| io.write).map(|io| Io { write: false, ..*io }).collect();
        let mut dropped = 0;
        for (io, d) in back.iter().zip(run_batch(&dev, &mut q, &back)) {
            // Dropped writes leave the old data; the others are there.
            check_ok(iface, io, &d, if in_bad(io.off) { 1 } else { seed });
            dropped += in_bad(io.off) as u32;
        }
        report(format!(
            "fault: flakey drop_writes: {iface}: {} writes acknowledged ok, {dropped} of them dropped by the device (read back: the old data), the rest read back",
            back.len()
        ));
    }
}

/// Latencies in milliseconds at percentile `p` (the first value whose rank reaches
/// p/100·N, fio's rule).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank - 1]
}

#[test]
fn delayed_commands_show_in_the_latencies_and_do_not_wedge_or_hang_a_queue() {
    const T: &str = "delayed_commands_show_in_the_latencies_and_do_not_wedge_or_hang_a_queue";
    let Some((mut s, lo)) = dm_setup(T, "delay", "delay") else {
        return;
    };
    const DELAY_MS: u64 = 200;
    let (_, dm) = s.dm("delay", &table_with(&lo, &format!("delay {} {BAD_START} {DELAY_MS}", lo.display())));
    for iface in ASYNC {
        let (dev, mut q) = direct_queue(&dm, iface);
        // 64 reads, one in 16 on the delayed range.
        let ios: Vec<Io> = (0..64u64)
            .map(|i| Io {
                write: false,
                off: if i % 16 == 5 { (BAD_START << 9) + i * BS } else { (8 << 20) + i * BS },
                seed: 1,
            })
            .collect();
        let done = run_batch(&dev, &mut q, &ios);
        let mut lat: Vec<f64> = Vec::new();
        for (io, d) in ios.iter().zip(&done) {
            check_ok(iface, io, d, 1);
            let ms = d.latency.as_secs_f64() * 1e3;
            if in_bad(io.off) {
                assert!(ms >= DELAY_MS as f64 * 0.9, "{iface}: a delayed read took {ms:.1} ms");
            }
            lat.push(ms);
        }
        lat.sort_by(f64::total_cmp);
        let (p50, p99, max) = (percentile(&lat, 50.0), percentile(&lat, 99.0), lat[lat.len() - 1]);
        assert!(p99 >= DELAY_MS as f64 * 0.9, "{iface}: p99 {p99:.1} ms does not show the {DELAY_MS} ms spike");
        // emu runs one command at a time and glibc's POSIX aio one per file descriptor:
        // there a delayed read holds up those behind it, by design.
        if !matches!(*iface, "emu" | "posix") {
            assert!(p50 < DELAY_MS as f64 * 0.9, "{iface}: p50 {p50:.1} ms: the undelayed reads were held up");
        }
        report(format!(
            "fault: dm-delay {DELAY_MS} ms on 1 read in 16: {iface}: 64 reads ok, p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms"
        ));
        // Dropping a queue with delayed commands in flight waits for them, then the device
        // takes a new queue.
        let mut q = dev.queue(8).unwrap();
        for i in 0..8u64 {
            let b = dev.alloc(BS as usize).unwrap();
            q.submit(&Cmd::fs_read((BAD_START << 9) + i * BS, BS), b.into(), i).map_err(|r| r.error).unwrap();
        }
        q.commit().unwrap();
        let t = Instant::now();
        drop(q);
        let waited = t.elapsed();
        assert!(waited < Duration::from_secs(60), "{iface}: dropping the queue took {waited:?}");
        let mut q = dev.queue(4).unwrap();
        let again = [Io { write: false, off: 8 << 20, seed: 1 }];
        check_ok(iface, &again[0], &run_batch(&dev, &mut q, &again)[0], 1);
        report(format!(
            "fault: dm-delay: {iface}: queue dropped with 8 delayed reads in flight: drop returned after {:.0} ms, a new queue works",
            waited.as_secs_f64() * 1e3
        ));
    }
}

/// The scsi_debug disk the stage loaded (`opts=2`, medium errors) and its error range in
/// 512-byte sectors, as the module's own parameters say.
fn scsi_debug_disk() -> Result<(PathBuf, u64, u64), String> {
    let p = |n: &str| -> Result<u64, String> {
        let v = std::fs::read_to_string(format!("/sys/module/scsi_debug/parameters/{n}"))
            .map_err(|e| format!("scsi_debug is not loaded ({n}: {e}; the stage loads it with opts=2)"))?;
        v.trim().parse().map_err(|e| format!("scsi_debug parameter {n} = {v:?}: {e}"))
    };
    let (opts, start, count) = (p("opts")?, p("medium_error_start")?, p("medium_error_count")?);
    if opts & 2 == 0 {
        return Err(format!("scsi_debug opts = {opts}: medium errors (2) are off"));
    }
    for e in std::fs::read_dir("/sys/block").map_err(|e| format!("/sys/block: {e}"))? {
        let e = e.map_err(|e| e.to_string())?;
        let model = std::fs::read_to_string(e.path().join("device/model")).unwrap_or_default();
        if model.trim() == "scsi_debug" {
            return Ok((Path::new("/dev").join(e.file_name()), start, count));
        }
    }
    Err("scsi_debug is loaded but no disk of it is in /sys/block (load sd_mod)".into())
}

#[test]
fn scsi_medium_errors_end_exactly_the_reads_of_the_bad_sectors() {
    const T: &str = "scsi_medium_errors_end_exactly_the_reads_of_the_bad_sectors";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip(T, "needs root");
    }
    let (disk, start, count) = match scsi_debug_disk() {
        Ok(x) => x,
        Err(why) => return skip(T, &why),
    };
    let bad = |off: u64| off < (start + count) << 9 && off + BS > start << 9;
    // Reads of the two blocks holding the bad sectors, and reads far from them. No good
    // read is next to a bad one: the block layer merges adjacent reads into one request,
    // and a medium error fails the whole request past the bad sector (seen here: a read of
    // sectors 4112..4119 submitted beside one of 4104..4111 failed with ENODATA).
    let first = (start << 9) / BS * BS;
    let ios: Vec<Io> = (0..32u64)
        .map(|i| Io {
            write: false,
            off: if i % 4 == 0 { first + (i / 4 % 2) * BS } else { (8 << 20) + i * BS },
            seed: 0,
        })
        .collect();
    let errno_of = |s: Status| s.errno().unwrap_or(0);
    for iface in ASYNC {
        let (dev, mut q) = direct_queue(&disk, iface);
        let done = run_batch(&dev, &mut q, &ios);
        let mut failed = Vec::new();
        for (io, d) in ios.iter().zip(&done) {
            if bad(io.off) {
                assert!(!d.status.is_ok(), "{iface}: read {io:?} of a bad sector succeeded");
                // The block layer reports a medium error as ENODATA ("critical medium
                // error"): NVMe's Unrecovered Read Error.
                assert_eq!(errno_of(d.status), libc::ENODATA, "{iface}: {io:?}: {}", d.status);
                assert_eq!((d.status.code(), d.status.dnr()), (0x281, true), "{iface}: {io:?}: {}", d.status);
                failed.push(d.status);
            } else {
                assert!(d.status.is_ok(), "{iface}: {io:?}: {}", d.status);
                assert_eq!(d.result, BS);
            }
        }
        assert!(!failed.is_empty(), "{iface}: no read touched the bad sectors {start}+{count}");
        // The queue keeps working after the errors.
        let again = [Io { write: false, off: 8 << 20, seed: 0 }];
        assert!(run_batch(&dev, &mut q, &again)[0].status.is_ok(), "{iface}: read after the errors");
        report(format!(
            "fault: scsi_debug medium error (sectors {start}+{count}): {iface}: {} of {} reads failed, each with its own tag: {}; the others ok",
            failed.len(),
            ios.len(),
            failed[0]
        ));
    }
    for iface in ["psync", "block"] {
        let dev = open(&disk, &format!("sync={iface},direct=1"));
        let mut failed = 0;
        for io in &ios {
            let mut bufs = [dev.alloc(BS as usize).unwrap()];
            match dev.pass(&Cmd::fs_read(io.off, BS), &mut bufs) {
                Ok(n) => assert!(!bad(io.off) && n == BS, "{iface}: {io:?} gave {n}"),
                Err(Error::Command { status, .. }) => {
                    assert!(bad(io.off), "{iface}: {io:?}: {status}");
                    assert_eq!(errno_of(status), libc::ENODATA, "{iface}: {status}");
                    assert_eq!(status.code(), 0x281, "{iface}: {status}");
                    failed += 1;
                }
                Err(e) => panic!("{iface}: {io:?}: {e}"),
            }
        }
        report(format!("fault: scsi_debug medium error: {iface}: {failed} of {} calls failed with ENODATA / Unrecovered Read Error", ios.len()));
    }
}

/// scsi_debug's driver attributes, which take new values while the disk is in use.
const SDEBUG: &str = "/sys/bus/pseudo/drivers/scsi_debug";
/// `opts` bits: medium errors (kept on, the medium-error test needs them) and "time out
/// every `every_nth` command if it is a medium access command" (SDEBUG_OPT_MAC_TIMEOUT).
const SDEBUG_MEDIUM_ERR: u64 = 2;
const SDEBUG_MAC_TIMEOUT: u64 = 128;
/// The SCSI command timeout the test gives the disk, in seconds (the kernel's default is
/// 30): the ignored command ends this long after it was sent.
const SCSI_TIMEOUT_S: u64 = 2;

/// Sysfs values of the scsi_debug disk set for the timeout test, put back when it ends.
struct SysfsRestore(Vec<(PathBuf, String)>);

impl SysfsRestore {
    fn set(&mut self, path: &Path, value: &str) -> Result<(), String> {
        let old = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::write(path, value).map_err(|e| format!("writing {value} to {}: {e}", path.display()))?;
        self.0.push((path.to_path_buf(), old.trim().to_string()));
        Ok(())
    }
}

impl Drop for SysfsRestore {
    fn drop(&mut self) {
        while let Some((p, v)) = self.0.pop() {
            if let Err(e) = std::fs::write(&p, &v) {
                let _ = writeln!(std::io::stderr(), "clean-up: writing {v} to {}: {e}", p.display());
            }
        }
    }
}

/// The SCSI mid-layer's own record of the commands it timed out: the trace event
/// `scsi:scsi_dispatch_cmd_timeout` (tracefs), which prints each command's LBA.
struct TimeoutTrace(PathBuf);

impl TimeoutTrace {
    fn start() -> Result<TimeoutTrace, String> {
        let find = || {
            ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.join("events").is_dir())
        };
        let root = match find() {
            Some(r) => r,
            None => {
                run("mount", &["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
                    .map_err(|e| format!("no tracefs mounted, and mounting it failed: {e}"))?;
                find().ok_or("tracefs mounted on /sys/kernel/tracing has no events/")?
            }
        };
        let enable = root.join("events/scsi/scsi_dispatch_cmd_timeout/enable");
        std::fs::write(&enable, "1").map_err(|e| format!("{}: {e} (no SCSI trace events)", enable.display()))?;
        let t = TimeoutTrace(root);
        t.clear();
        Ok(t)
    }
    fn clear(&self) {
        std::fs::write(self.0.join("trace"), "").unwrap();
    }
    /// The LBAs of the commands timed out since the last `clear`.
    fn lbas(&self) -> Vec<u64> {
        let text = std::fs::read_to_string(self.0.join("trace")).unwrap();
        text.lines()
            .filter(|l| l.contains("scsi_dispatch_cmd_timeout:"))
            .map(|l| {
                let at = l.find(" lba=").unwrap_or_else(|| panic!("no lba in the trace line {l:?}"));
                let v = &l[at + 5..];
                v[..v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len())].parse().unwrap()
            })
            .collect()
    }
}

impl Drop for TimeoutTrace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("events/scsi/scsi_dispatch_cmd_timeout/enable"), "0");
    }
}

/// A SCSI device's counter in sysfs (`iotmo_cnt`, `ioerr_cnt`: hexadecimal).
fn scsi_counter(sysdev: &Path, name: &str) -> u64 {
    let v = std::fs::read_to_string(sysdev.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", sysdev.display()));
    u64::from_str_radix(v.trim().trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{name} = {v:?}: {e}"))
}

#[test]
fn scsi_timeouts_end_exactly_the_command_the_device_ignored() {
    const T: &str = "scsi_timeouts_end_exactly_the_command_the_device_ignored";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip(T, "needs root");
    }
    let disk = match scsi_debug_disk() {
        Ok((d, ..)) => d,
        Err(why) => return skip(T, &why),
    };
    let name = disk.file_name().unwrap().to_str().unwrap().to_string();
    let sysdev = Path::new("/sys/block").join(&name).join("device");
    // The disk's retry count (sd's max_retries): 0, so the timed-out command is not sent
    // again (a retry is another command, which the device would answer) but ends.
    let retries = std::fs::read_dir(sysdev.join("scsi_disk"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path().join("max_retries"))
        .filter(|p| p.exists());
    let Some(retries) = retries else {
        return skip(T, &format!("{}/scsi_disk/*/max_retries is missing (sd has no retry setting)", sysdev.display()));
    };
    for p in [format!("{SDEBUG}/every_nth"), format!("{SDEBUG}/opts")] {
        if !Path::new(&p).exists() {
            return skip(T, &format!("{p} is missing"));
        }
    }
    // Known data where the reads go (before any timeout is armed).
    const AREA: u64 = 8 << 20;
    const SEED: u64 = 77;
    {
        let d = open(&disk, "sync=psync,direct=1");
        let mut b = d.alloc(1 << 20).unwrap();
        pattern::fill(&mut b, AREA, SEED);
        d.pass(&Cmd::fs_write(AREA, 1 << 20), &mut [b]).unwrap();
    }
    let mut restore = SysfsRestore(Vec::new());
    restore.set(&sysdev.join("timeout"), &SCSI_TIMEOUT_S.to_string()).unwrap();
    let own_retries = std::fs::read_to_string(&retries).unwrap().trim().to_string();
    restore.set(&retries, "0").unwrap();
    let opts = std::fs::read_to_string(format!("{SDEBUG}/opts")).unwrap();
    let opts = opts.trim();
    let opts = u64::from_str_radix(opts.trim_start_matches("0x"), if opts.starts_with("0x") { 16 } else { 10 })
        .unwrap_or_else(|e| panic!("{SDEBUG}/opts = {opts:?}: {e}"));
    restore
        .set(Path::new(&format!("{SDEBUG}/opts")), &(opts | SDEBUG_MEDIUM_ERR | SDEBUG_MAC_TIMEOUT).to_string())
        .unwrap();
    restore.set(Path::new(&format!("{SDEBUG}/every_nth")), "0").unwrap();
    let every_nth = |n: u64| std::fs::write(format!("{SDEBUG}/every_nth"), n.to_string()).unwrap();
    let trace = match TimeoutTrace::start() {
        Ok(t) => t,
        Err(why) => return skip(T, &format!("the SCSI timeout trace event is not usable: {why}")),
    };
    // 8 reads of 4 KiB, none adjacent to another (the block layer would merge adjacent
    // reads into one SCSI command, and the timeout would end both).
    const N: u64 = 8;
    let ios: Vec<Io> = (0..N).map(|i| Io { write: false, off: AREA + i * 2 * BS, seed: SEED }).collect();
    let timeout = Duration::from_secs(SCSI_TIMEOUT_S);
    let check_failed = |what: &str, io: &Io, s: Status, took: Duration| {
        assert!(!s.is_ok(), "{what}: {io:?}: the timed-out read succeeded");
        // The SCSI mid-layer ends the command with DID_TIME_OUT, which the block layer
        // reports as an I/O error: EIO, Data Transfer Error.
        check_eio(what, io, s);
        assert!(took >= timeout.mul_f64(0.9), "{what}: {io:?} failed after {took:?}, before the {timeout:?} timeout");
    };
    for iface in ASYNC {
        let (dev, mut q) = direct_queue(&disk, iface);
        // Writing every_nth sets scsi_debug's command count to a multiple of it: the
        // N-th medium access command from now on is ignored (never answered). scsi_debug
        // counts and tests the count in two steps, so commands queued at the same moment
        // from several threads (thrpool, posix) can step over the multiple and none is
        // ignored: then the batch runs again. Which commands timed out, the SCSI layer
        // says (trace event, iotmo_cnt); the library must fail exactly those.
        let mut attempts = 0;
        let (failed, done) = loop {
            attempts += 1;
            trace.clear();
            let tmo = scsi_counter(&sysdev, "iotmo_cnt");
            every_nth(N);
            let done = run_batch(&dev, &mut q, &ios);
            every_nth(0);
            let mut timed_out = trace.lbas();
            timed_out.sort_unstable();
            assert_eq!(
                scsi_counter(&sysdev, "iotmo_cnt") - tmo,
                timed_out.len() as u64,
                "{iface}: timeouts counted by the SCSI layer vs its trace {timed_out:?}"
            );
            let failed: Vec<usize> = (0..ios.len()).filter(|&t| !done[t].status.is_ok()).collect();
            let mut failed_sectors: Vec<u64> = failed.iter().map(|&t| ios[t].off >> 9).collect();
            failed_sectors.sort_unstable();
            assert_eq!(
                failed_sectors, timed_out,
                "{iface}: the library failed tags {failed:?} (sectors left), the SCSI layer timed out sectors (right)"
            );
            for (k, (io, d)) in ios.iter().zip(&done).enumerate() {
                if failed.contains(&k) {
                    check_failed(iface, io, d.status, d.latency);
                } else {
                    check_ok(iface, io, d, SEED);
                }
            }
            if !failed.is_empty() {
                break (failed, done);
            }
            assert!(attempts < 5, "{iface}: scsi_debug ignored none of {attempts} batches of {N} reads");
        };
        // The queue keeps working: the same reads again, all of them.
        for (io, d) in ios.iter().zip(run_batch(&dev, &mut q, &ios)) {
            check_ok(iface, io, &d, SEED);
        }
        let st = q.stats();
        assert_eq!(st.submitted, st.completed, "{iface}: {st:?}");
        report(format!(
            "fault: scsi_debug timeout ({SCSI_TIMEOUT_S} s, no retry): {iface}: {} of {N} reads (tags {failed:?}, sectors {:?}; batch {attempts}) ended after {:.2} s or more with {}; the SCSI layer timed out those sectors and no other (trace event, iotmo_cnt); the other {} ok; the queue read all {N} again",
            failed.len(),
            failed.iter().map(|&t| ios[t].off >> 9).collect::<Vec<_>>(),
            failed.iter().map(|&t| done[t].latency.as_secs_f64()).fold(f64::INFINITY, f64::min),
            done[failed[0]].status,
            N as usize - failed.len()
        ));
    }
    for iface in ["psync", "block"] {
        let dev = open(&disk, &format!("sync={iface},direct=1"));
        trace.clear();
        every_nth(N);
        let mut outcome = Vec::new();
        for io in &ios {
            let mut bufs = [dev.alloc(BS as usize).unwrap()];
            let t0 = Instant::now();
            let r = dev.pass(&Cmd::fs_read(io.off, BS), &mut bufs);
            outcome.push((r, t0.elapsed(), bufs));
        }
        every_nth(0);
        // Called one after another, the N-th read is the N-th command: it times out.
        for (k, (io, (r, took, bufs))) in ios.iter().zip(&outcome).enumerate() {
            match r {
                Ok(n) => {
                    assert!(k as u64 != N - 1, "{iface}: the read the device ignored succeeded");
                    assert_eq!(*n, BS, "{iface}: {io:?}");
                    pattern::compare(&bufs[0], &pattern::at(io.off, BS, SEED), io.off, Some(SEED), iface).unwrap();
                }
                Err(Error::Command { status, .. }) => {
                    assert_eq!(k as u64, N - 1, "{iface}: call {k} ({io:?}) failed: {status}");
                    check_failed(iface, io, *status, *took);
                }
                Err(e) => panic!("{iface}: {io:?}: not a command error: {e}"),
            }
        }
        assert_eq!(trace.lbas(), [ios[N as usize - 1].off >> 9], "{iface}: the sectors the SCSI layer timed out");
        let mut bufs = [dev.alloc(BS as usize).unwrap()];
        assert_eq!(dev.pass(&Cmd::fs_read(ios[0].off, BS), &mut bufs).unwrap(), BS, "{iface}: a read afterwards");
        let (_, took, _) = &outcome[N as usize - 1];
        report(format!(
            "fault: scsi_debug timeout ({SCSI_TIMEOUT_S} s, no retry): {iface}: call {N} of {N} ended after {:.2} s with EIO / Data Transfer Error, the sector the SCSI layer timed out; the others ok; a read afterwards ok",
            took.as_secs_f64()
        ));
    }
    // With the disk's own retry count the mid-layer sends the ignored command again
    // after the timeout; the device answers the retry and the read succeeds, late.
    if own_retries != "0" {
        std::fs::write(&retries, &own_retries).unwrap();
        let dev = open(&disk, "sync=psync,direct=1");
        trace.clear();
        every_nth(N);
        let mut took = Duration::ZERO;
        for io in &ios {
            let mut bufs = [dev.alloc(BS as usize).unwrap()];
            let t0 = Instant::now();
            let n = dev
                .pass(&Cmd::fs_read(io.off, BS), &mut bufs)
                .unwrap_or_else(|e| panic!("psync, retries {own_retries}: {io:?}: {e}"));
            took = t0.elapsed();
            assert_eq!(n, BS);
            pattern::compare(&bufs[0], &pattern::at(io.off, BS, SEED), io.off, Some(SEED), "psync").unwrap();
        }
        every_nth(0);
        assert!(
            took >= timeout.mul_f64(0.9),
            "psync, retries {own_retries}: the ignored read took {took:?}, under the timeout"
        );
        let last = ios[N as usize - 1].off >> 9;
        assert_eq!(trace.lbas(), [last], "psync, retries {own_retries}: the sectors the SCSI layer timed out");
        report(format!(
            "fault: scsi_debug timeout ({SCSI_TIMEOUT_S} s, max_retries {own_retries}): psync: the ignored read timed out (trace event: that sector), was sent again by the SCSI layer and succeeded after {:.2} s with the right data; no error",
            took.as_secs_f64()
        ));
    }
    drop(restore);
}

/// Writes and flushes through a queue or the synchronous path.
enum Writer {
    Sync(Device),
    Async(Device, Queue),
}

impl Writer {
    /// The synchronous path of `dev` for a `sync=` configuration, else a queue of 8.
    fn new(dev: Device, opts: &str) -> Writer {
        if opts.starts_with("sync=") {
            Writer::Sync(dev)
        } else {
            let q = dev.queue(8).unwrap();
            Writer::Async(dev, q)
        }
    }
    /// Writes `n` blocks with the pattern of `seed`, at block offsets below `blocks` drawn
    /// from the generator state `x` (advanced), and records each in `model` (offset →
    /// seed); returns them.
    fn write_random(&mut self, x: &mut u64, n: u64, blocks: u64, seed: u64, model: &mut BTreeMap<u64, u64>) -> Vec<Io> {
        let ios: Vec<Io> = (0..n)
            .map(|_| {
                *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                Io { write: true, off: ((*x >> 33) % blocks) * BS, seed }
            })
            .collect();
        self.write_all(&ios);
        for io in &ios {
            model.insert(io.off, io.seed);
        }
        ios
    }
    fn write_all(&mut self, ios: &[Io]) {
        match self {
            Writer::Sync(d) => {
                for io in ios {
                    let mut b = d.alloc(BS as usize).unwrap();
                    pattern::fill(&mut b, io.off, io.seed);
                    d.pass(&Cmd::fs_write(io.off, BS), &mut [b]).unwrap();
                }
            }
            Writer::Async(d, q) => {
                for (io, r) in ios.iter().zip(run_batch(d, q, ios)) {
                    check_ok("write", io, &r, 0);
                }
            }
        }
    }
    fn flush(&mut self) {
        match self {
            Writer::Sync(d) => {
                d.pass(&Cmd::fs_flush(), &mut []).unwrap();
            }
            Writer::Async(_, q) => {
                q.submit(&Cmd::fs_flush(), Data::None, 7).map_err(|r| r.error).unwrap();
                let mut st = None;
                q.drain(|c| st = Some(c.status)).unwrap();
                let st = st.expect("the flush completed");
                assert!(st.is_ok(), "flush: {st}");
            }
        }
    }
}

#[test]
fn every_write_acknowledged_before_a_flush_is_in_the_log_before_that_flush() {
    const T: &str = "every_write_acknowledged_before_a_flush_is_in_the_log_before_that_flush";
    if let Err(why) = dm_targets(&["log-writes"]) {
        return skip(T, &why);
    }
    const PHASES: u64 = 4;
    const PER_PHASE: u64 = 24;
    // Every interface through the page cache (where a missing flush loses data), and with
    // O_DIRECT those with a path of their own for it (thrpool, posix and emu run psync's).
    let configs: Vec<String> = ["sync=psync", "sync=psync,direct=1", "sync=mmap"]
        .iter()
        .map(|o| o.to_string())
        .chain(ASYNC.iter().map(|i| format!("async={i}")))
        .chain(["async=libaio,direct=1", "async=io_uring,direct=1"].iter().map(|o| o.to_string()))
        .collect();
    let blocks = (DEV_MIB << 20) / BS;
    // One pair of loop devices for every configuration (a process start costs a quarter
    // of a second in the software-emulated guest): each configuration gets a new
    // log-writes device, whose new super block counts only its own entries, and the
    // replay starts from zeroes whatever the data device holds.
    let mut s = Setup::new("lw");
    let (data, _) = s.loop_dev(DEV_MIB);
    let (log_dev, log_img) = s.loop_dev(64);
    let table = format!("0 {} log-writes {} {}\n", DEV_MIB << 11, data.display(), log_dev.display());
    for (k, opts) in configs.iter().enumerate() {
        let (name, dm) = s.dm("lw", &table);
        let dev = open(&dm, opts);
        let mut path = Writer::new(dev, opts);
        // Phases of writes (later ones overwrite some blocks of earlier ones), each ended
        // by a flush and a mark; the last phase is not flushed.
        let mut model: BTreeMap<u64, u64> = BTreeMap::new();
        let mut snapshots = Vec::new();
        let mut unflushed = None;
        let mut x = 0x9E37_79B9u64 ^ k as u64;
        for phase in 0..=PHASES {
            let seed = 1000 * (k as u64 + 1) + phase;
            let ios = path.write_random(&mut x, PER_PHASE, blocks, seed, &mut model);
            if phase == PHASES && opts == "sync=psync" {
                run("dmsetup", &["message", &name, "0", "mark", "unflushed"]).unwrap();
                unflushed = Some(ios.clone());
            }
            if phase < PHASES {
                path.flush();
                run("dmsetup", &["message", &name, "0", "mark", &format!("flushed-{phase}")]).unwrap();
                snapshots.push(model.clone());
            }
        }
        drop(path);
        s.undo_last(); // dmsetup remove: the target writes what it holds and its super block
        let log = Log::parse(std::fs::read(&log_img).unwrap()).unwrap_or_else(|e| panic!("{opts}: {e}"));
        let (mut checked, mut lost) = (0u64, 0u64);
        let mut prev_flush = None;
        for (phase, want) in snapshots.iter().enumerate() {
            let m = log
                .mark(&format!("flushed-{phase}"))
                .unwrap_or_else(|| panic!("{opts}: mark flushed-{phase} is not in the log"));
            let f = log
                .flush_before(m)
                .unwrap_or_else(|| panic!("{opts}: no flush in the log before mark flushed-{phase}"));
            assert!(
                prev_flush.is_none_or(|p| f > p),
                "{opts}: phase {phase}'s flush is not after phase {}'s",
                phase.max(1) - 1
            );
            prev_flush = Some(f);
            let mut img = vec![0u8; (DEV_MIB << 20) as usize];
            log.replay(&mut img, f).unwrap();
            for (&off, &seed) in want {
                let got = &img[off as usize..(off + BS) as usize];
                let exp = pattern::at(off, BS, seed);
                lost += got.iter().zip(&exp).filter(|(a, b)| a != b).count() as u64;
                checked += BS;
            }
        }
        assert_eq!(
            lost, 0,
            "{opts}: {lost} of {checked} bytes acknowledged before a flush are missing in the replay up to that flush"
        );
        if let Some(ios) = &unflushed {
            // The control: page-cache writes never flushed are not in the log before the
            // mark that followed them, and the check above would have counted them lost.
            let m = log.mark("unflushed").unwrap_or_else(|| panic!("{opts}: mark unflushed is not in the log"));
            let f = log.flush_before(m).expect("flushes before the unflushed phase");
            let mut img = vec![0u8; (DEV_MIB << 20) as usize];
            log.replay(&mut img, f).unwrap();
            let missing: u64 = ios
                .iter()
                .map(|io| {
                    let got = &img[io.off as usize..(io.off + BS) as usize];
                    got.iter().zip(pattern::at(io.off, BS, io.seed)).filter(|(a, b)| **a != *b).count() as u64
                })
                .sum();
            assert!(missing > 0, "{opts}: the unflushed page-cache writes are all in the log before their mark");
            report(format!(
                "crash: control: {opts}: {missing} of {} bytes written to the page cache and not flushed are missing in the replay up to the last flush (the check sees missing data)",
                ios.len() as u64 * BS
            ));
        }
        report(format!(
            "crash: dm-log-writes: {opts}: {} flush marks checked, {checked} bytes checked, {lost} bytes lost ({} log entries)",
            snapshots.len(),
            log.entries.len()
        ));
    }
}

/// The integer after `"key"` in the first object or array named `section` of a JSON text
/// (fio's and `ioswitch bench`'s JSON: `"key" : 5` or `"key": 5`).
fn json_int(text: &str, section: &str, key: &str) -> Option<i64> {
    let name = format!("\"{section}\"");
    let mut at = 0;
    let s = loop {
        let i = at + text[at..].find(&name)?;
        let rest = text[i + name.len()..].trim_start();
        if let Some(r) = rest.strip_prefix(':') {
            if r.trim_start().starts_with(['{', '[']) {
                break &text[i..];
            }
        }
        at = i + name.len();
    };
    let s = &s[s.find(&format!("\"{key}\""))? + key.len() + 2..];
    let s = s.trim_start().strip_prefix(':')?.trim_start();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// What the tests that run `ioswitch bench` beside fio on a dm-flakey device need: the
/// flakey target, the CLI (`IOSWITCH_CLI`) and a working fio. Skips test `t` with the
/// reason and gives `None` when one is missing; else the CLI and [`prefilled`]`(tag)`.
fn bench_and_fio_on_flakey(t: &str, tag: &str) -> Option<(std::ffi::OsString, Setup, PathBuf)> {
    if let Err(why) = dm_targets(&["flakey"]) {
        skip(t, &why);
        return None;
    }
    let Some(cli) = std::env::var_os("IOSWITCH_CLI") else {
        skip(t, "IOSWITCH_CLI (the ioswitch binary) is not set; tests/vm/fault-tests.sh sets it");
        return None;
    };
    if let Err(e) = run("fio", &["--version"]) {
        skip(t, &format!("fio is not usable: {e}"));
        return None;
    }
    let (s, lo) = prefilled(tag);
    Some((cli, s, lo))
}

/// The job both fio and `ioswitch bench` run in the tests below: `rw` of `size` bytes
/// over `dev` through libaio at iodepth 1, O_DIRECT, 4 KiB blocks, `verify`, then the
/// options `more`, with fio's JSON report.
fn libaio_qd1_job(dev: &Path, rw: &str, size: &str, verify: &str, more: &[String]) -> Vec<String> {
    let mut args = vec![
        "--name=j".to_string(),
        format!("--filename={}", dev.display()),
        format!("--rw={rw}"),
        "--bs=4k".into(),
        format!("--size={size}"),
        "--ioengine=libaio".into(),
        "--iodepth=1".into(),
        "--direct=1".into(),
        format!("--verify={verify}"),
    ];
    args.extend_from_slice(more);
    args.push("--output-format=json".into());
    args
}

#[test]
fn bench_stops_at_the_first_failed_io_and_reports_it_as_fio_does() {
    const T: &str = "bench_stops_at_the_first_failed_io_and_reports_it_as_fio_does";
    let Some((cli, mut s, lo)) = bench_and_fio_on_flakey(T, "bench") else {
        return;
    };
    let (_, dm) = s.dm("bench", &flakey_table(&lo, ""));
    // Sequential jobs over the first 4 MiB run into the failing range at 2 MiB. The read
    // job does not verify: the device holds no data with fio's verify headers.
    for (rw, dir, verify) in [("write", "write", "crc32c"), ("read", "read", "0")] {
        let args = libaio_qd1_job(&dm, rw, "4m", verify, &[]);
        let fio = Command::new("fio").args(&args).output_bounded().unwrap();
        let ours = Command::new(&cli).arg("bench").args(&args).output_bounded().unwrap();
        let (fo, oo) = (String::from_utf8_lossy(&fio.stdout), String::from_utf8_lossy(&ours.stdout));
        let fe = json_int(&fo, "jobs", "error").unwrap_or_else(|| panic!("fio {rw}: no error field: {fo}"));
        let oe = json_int(&oo, "jobs", "error").unwrap_or_else(|| {
            panic!("ioswitch bench {rw}: no error field: {oo} {}", String::from_utf8_lossy(&ours.stderr))
        });
        assert_eq!(fe, libc::EIO as i64, "fio {rw}: error {fe}");
        assert_eq!(oe, fe, "{rw}: ioswitch bench reports error {oe}, fio {fe}");
        let fb = json_int(&fo, dir, "io_bytes").unwrap();
        let ob = json_int(&oo, dir, "io_bytes").unwrap();
        assert_eq!(ob, fb, "{rw}: ioswitch bench moved {ob} bytes before stopping, fio {fb}");
        assert_eq!(
            ours.status.success(),
            fio.status.success(),
            "{rw}: exit status: ours {}, fio {}",
            ours.status,
            fio.status
        );
        report(format!(
            "fault: flakey EIO under `bench --rw={rw} --verify={verify}` (libaio, qd1): job error {oe} (fio: {fe}), {ob} bytes before the stop (fio: {fb}), exit {} (fio: {})",
            ours.status.code().unwrap_or(-1),
            fio.status.code().unwrap_or(-1)
        ));
    }
}

/// One job of [`bench_goes_on_after_failed_ios_with_continue_on_error_as_fio_does`]: what
/// fio and `ioswitch bench` reported, and must report alike.
#[derive(Debug, PartialEq)]
struct JobOutcome {
    error: i64,
    total_err: i64,
    first_error: i64,
    read_bytes: i64,
    write_bytes: i64,
    exit: Option<i32>,
}

/// Runs `prog` (fio, or the CLI with `bench` first) with the job `args` and reads its JSON.
fn job_outcome(what: &str, cmd: &mut Command) -> JobOutcome {
    let out = cmd.output_bounded().unwrap_or_else(|e| panic!("{what}: {e}"));
    let o = String::from_utf8_lossy(&out.stdout);
    let get = |section: &str, key: &str| {
        json_int(&o, section, key).unwrap_or_else(|| {
            panic!("{what}: no {section}.{key} in its JSON: {o} {}", String::from_utf8_lossy(&out.stderr))
        })
    };
    JobOutcome {
        error: get("jobs", "error"),
        total_err: get("jobs", "total_err"),
        first_error: get("jobs", "first_error"),
        read_bytes: get("read", "io_bytes"),
        write_bytes: get("write", "io_bytes"),
        exit: out.status.code(),
    }
}

#[test]
fn bench_goes_on_after_failed_ios_with_continue_on_error_as_fio_does() {
    const T: &str = "bench_goes_on_after_failed_ios_with_continue_on_error_as_fio_does";
    let Some((cli, mut s, lo)) = bench_and_fio_on_flakey(T, "coe") else {
        return;
    };
    // Every I/O of the range fails (EIO); and a device that drops the range's writes, so
    // that a verify finds old data there (EILSEQ).
    let (_, down) = s.dm("coe-down", &flakey_table(&lo, ""));
    let (_, drop) = s.dm("coe-drop", &flakey_table(&lo, " 1 drop_writes"));
    const SIZE: i64 = 3 << 20;
    let bad_ios = (BAD_LEN << 9) as i64 / BS as i64;
    let good = SIZE - (BAD_LEN << 9) as i64;
    let (eio, eilseq) = (libc::EIO as i64, libc::EILSEQ as i64);
    // (device, rw, verify, continue_on_error, what both must report). Failed I/Os move no
    // bytes and count once: a failed write is not read back by the verify phase (fio
    // unlogs its io_piece); the job goes on to the end and exits 0, and reports its first
    // error as the job's error (fio's stat.c).
    let cases = [
        (&down, "write", "crc32c", "all", (eio, bad_ios, eio, good, good, 0)),
        (&down, "read", "0", "all", (eio, bad_ios, eio, good, 0, 0)),
        // continue_on_error=write does not cover reads: the job stops at the first
        // failed read, at 2 MiB, as without the option.
        (&down, "read", "0", "write", (eio, 0, 0, (BAD_START << 9) as i64, 0, 1)),
        // The dropped writes succeed; the verify of each fails (old data), the job goes on.
        (&drop, "write", "crc32c", "verify", (eilseq, bad_ios, eilseq, SIZE, SIZE, 0)),
    ];
    for (dm, rw, verify, coe, want) in cases {
        let args = libaio_qd1_job(dm, rw, &SIZE.to_string(), verify, &[format!("--continue_on_error={coe}")]);
        let job = format!("--rw={rw} --verify={verify} --continue_on_error={coe} on {}", dm.display());
        let fio = job_outcome(&format!("fio {job}"), Command::new("fio").args(&args));
        let ours = job_outcome(&format!("ioswitch bench {job}"), Command::new(&cli).arg("bench").args(&args));
        report(format!("fault: continue_on_error: {job}: fio {fio:?}, ioswitch bench {ours:?}"));
        assert_eq!(ours, fio, "{job}: ioswitch bench (left) and fio (right) differ");
        let (error, total_err, first_error, read_bytes, write_bytes, exit) = want;
        let want = JobOutcome { error, total_err, first_error, read_bytes, write_bytes, exit: Some(exit) };
        assert_eq!(fio, want, "{job}: fio (left) does not report what the device did (right)");
    }
}

#[test]
fn file_writes_flushed_under_ext4_are_in_the_file_system_replayed_to_that_flush() {
    const T: &str = "file_writes_flushed_under_ext4_are_in_the_file_system_replayed_to_that_flush";
    if let Err(why) = dm_targets(&["log-writes"]) {
        return skip(T, &why);
    }
    let fss = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !fss.lines().any(|l| l.split_whitespace().last() == Some("ext4")) {
        return skip(T, "the kernel has no ext4 (/proc/filesystems; load ext4)");
    }
    for (prog, arg) in [("mkfs.ext4", "-V"), ("mount", "--version")] {
        if let Err(e) = run(prog, &[arg]) {
            return skip(T, &format!("{prog} is not usable: {e}"));
        }
    }
    const FS_MIB: u64 = 32;
    const FILE: u64 = 1 << 20;
    const PHASES: u64 = 2;
    let configs =
        ["sync=psync", "sync=mmap", "async=libaio", "async=io_uring", "async=thrpool", "async=posix", "async=emu"];
    let mut s = Setup::new("lwfs");
    let (data, _) = s.loop_dev(FS_MIB);
    let (log_dev, log_img) = s.loop_dev(128);
    let table = format!("0 {} log-writes {} {}\n", FS_MIB << 11, data.display(), log_dev.display());
    let (name, dm) = s.dm("lwfs", &table);
    let dm_s = dm.to_str().unwrap();
    // Inode tables and journal written at mkfs, no discards: the log replays from zeroes.
    run("mkfs.ext4", &["-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", dm_s]).unwrap();
    let mnt = s.dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    run("mount", &["-t", "ext4", dm_s, mnt.to_str().unwrap()]).unwrap();
    s.then_undo("umount", &[mnt.to_str().unwrap()]);
    // The files exist (and are durable, `sync`) before the checked phases begin: a file's
    // name is its directory's business, not the data flush's.
    let files: Vec<PathBuf> = (0..configs.len()).map(|k| mnt.join(format!("f{k}"))).collect();
    for f in &files {
        drop(open(f, &format!("create=1,size={FILE}")));
    }
    run("sync", &[]).unwrap();
    let blocks = FILE / BS;
    let mut snapshots: Vec<Vec<BTreeMap<u64, u64>>> = Vec::new();
    let mut control = Vec::new();
    for (k, opts) in configs.iter().enumerate() {
        let dev = open(&files[k], opts);
        let mut path = Writer::new(dev, opts);
        let mut model = BTreeMap::new();
        let mut snaps = Vec::new();
        let mut x = 0x51ED_270Bu64 ^ k as u64;
        for phase in 0..PHASES {
            let seed = 5000 + 10 * k as u64 + phase;
            path.write_random(&mut x, 16, blocks, seed, &mut model);
            path.flush();
            run("dmsetup", &["message", &name, "0", "mark", &format!("f{k}-{phase}")]).unwrap();
            snaps.push(model.clone());
        }
        if k == 0 {
            // The control: page-cache writes never flushed, then a mark.
            let ios: Vec<Io> = (0..16).map(|j| Io { write: true, off: j * 2 * BS, seed: 4999 }).collect();
            path.write_all(&ios);
            run("dmsetup", &["message", &name, "0", "mark", "unflushed"]).unwrap();
            control = ios;
        }
        snapshots.push(snaps);
    }
    s.undo_last(); // umount
    s.undo_last(); // dmsetup remove
    let log = Log::parse(std::fs::read(&log_img).unwrap()).unwrap();
    let img_path = s.dir.join("replay.img");
    let chk = s.dir.join("chk");
    std::fs::create_dir_all(&chk).unwrap();
    let mut prev_mark = 0;
    for (k, opts) in configs.iter().enumerate() {
        let (mut checked, mut lost) = (0u64, 0u64);
        for (phase, want) in snapshots[k].iter().enumerate() {
            let m = log.mark(&format!("f{k}-{phase}")).unwrap_or_else(|| panic!("{opts}: mark f{k}-{phase} missing"));
            // The target logs a write only once it is stable (after a flush, or at once
            // with FUA), so the log up to the mark is the disk after a power cut there.
            // Up to the last flush is too early here: dm splits ext4's journal commit (a
            // write with PREFLUSH and FUA) into an empty flush and the FUA write of the
            // commit block, logged after it. A flush must still lie between the marks.
            let f = log.flush_before(m).unwrap_or_else(|| panic!("{opts}: no flush before mark f{k}-{phase}"));
            assert!(f > prev_mark, "{opts}: no flush between the marks before f{k}-{phase}");
            prev_mark = m;
            let mut img = vec![0u8; (FS_MIB << 20) as usize];
            log.replay(&mut img, m).unwrap();
            std::fs::write(&img_path, &img).unwrap();
            // A fresh mount of the replayed image (ext4 replays its journal), as after a
            // power cut at that flush.
            run("mount", &["-t", "ext4", "-o", "loop", img_path.to_str().unwrap(), chk.to_str().unwrap()])
                .unwrap_or_else(|e| panic!("{opts}: the file system replayed to flush {phase} does not mount: {e}"));
            let got = std::fs::read(chk.join(format!("f{k}")));
            run("umount", &[chk.to_str().unwrap()]).unwrap();
            let got = got.unwrap_or_else(|e| panic!("{opts}: f{k} in the file system replayed to flush {phase}: {e}"));
            for (&off, &seed) in want {
                let exp = pattern::at(off, BS, seed);
                let have = got.get(off as usize..(off + BS) as usize).unwrap_or(&[]);
                lost += exp.iter().enumerate().filter(|(i, b)| have.get(*i) != Some(b)).count() as u64;
                checked += BS;
            }
        }
        if k == 0 {
            // The control's blocks must be missing in the file system replayed to its mark
            // (which shows the check sees lost data).
            let m = log.mark("unflushed").expect("mark unflushed in the log");
            let mut img = vec![0u8; (FS_MIB << 20) as usize];
            log.replay(&mut img, m).unwrap();
            std::fs::write(&img_path, &img).unwrap();
            run("mount", &["-t", "ext4", "-o", "loop", img_path.to_str().unwrap(), chk.to_str().unwrap()]).unwrap();
            let got = std::fs::read(chk.join("f0"));
            run("umount", &[chk.to_str().unwrap()]).unwrap();
            let got = got.unwrap();
            let missing: u64 = control
                .iter()
                .map(|io| {
                    let exp = pattern::at(io.off, BS, io.seed);
                    let have = &got[io.off as usize..(io.off + BS) as usize];
                    exp.iter().zip(have).filter(|(a, b)| a != b).count() as u64
                })
                .sum();
            assert!(missing > 0, "{opts}: the unflushed page-cache writes are all in the replayed file system");
            report(format!(
                "crash: control under ext4: {opts}: {missing} of {} bytes written to the page cache and not flushed are missing in the file system replayed to the mark after them",
                control.len() as u64 * BS
            ));
        }
        assert_eq!(lost, 0, "{opts}: {lost} of {checked} bytes flushed into f{k} are missing after replay");
        report(format!(
            "crash: dm-log-writes under ext4: {opts} (a 1 MiB file): {PHASES} flush marks checked, {checked} bytes checked, {lost} bytes lost"
        ));
    }
}
