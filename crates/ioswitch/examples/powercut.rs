//! The workload and the check of the power-cut test (`tests/vm/power-cut.sh`, issue 17
//! part 3), run in the QEMU guest on NVMe namespace 1:
//!
//! - `powercut write`: through every kernel interface (its own 8 MiB region each: psync
//!   buffered and direct, mmap, libaio, io_uring, thrpool, posix, emu on `/dev/nvme0nX`;
//!   NVMe ioctl and io_uring_cmd on `/dev/ng0nX`) writes rounds of 16 blocks of 4 KiB, each
//!   round ended by the interface's flush; after `ROUNDS` rounds it writes one more round
//!   to the page cache without flushing (psync, buffered), prints `flushed at ROUNDS` and
//!   waits: the harness kills QEMU on that line;
//! - `powercut write vfio ADDR`: the same through the user-space driver (`sync=vfio` and
//!   `async=vfio`, NVMe commands on nsid 1 of the controller at PCI address ADDR, bound to
//!   vfio-pci by the harness), one interface after the other (a process opens a vfio
//!   group once); the control round goes to `/dev/nvme0nX` as above;
//! - `powercut write pmem`: the same through `sync=pmem` on a file in `$IOSWITCH_PMEM_DIR`
//!   (ext4 -o dax on an fsdax namespace) and on the devdax device `$IOSWITCH_PMEM_DEVDAX`
//!   (`tests/vm/pmem-tests.sh --guest-then` sets both up), each round ended by the
//!   interface's flush; the control round goes to `/dev/nvme0nX` as above;
//! - `powercut check N [vfio ADDR | vfio-driver ADDR | pmem]` (after a fresh boot on the same disk images):
//!   reads every block of rounds `0..N` back through the kernel's block device (for vfio:
//!   the namespace 1 the kernel's nvme driver made of ADDR at boot, an independent path;
//!   `vfio-driver ADDR` reads them through `sync=vfio`, after the harness bound ADDR to
//!   vfio-pci again; for pmem: the file with psync, the devdax device, which has no read(2), with
//!   `sync=pmem`) and prints `crash: power cut: …` per interface with the bytes lost (exit status 1 unless
//!   0); the unflushed round is the control: it must be missing.
//!
//! Not a test by itself (an example, so `cargo test` builds it): the harness runs it.

use ioswitch::{Cmd, Data, Device, Opts};
use std::process::ExitCode;

const BS: u64 = 4096;
const PER_ROUND: u64 = 16;
const ROUNDS: u64 = 3;
const REGION: u64 = 8 << 20;

/// The kernel interfaces: (options, on the generic char device (NVMe commands) or the
/// block device (byte offsets)).
const IFACES: &[(&str, bool)] = &[
    ("sync=psync", false),
    ("sync=psync,direct=1", false),
    ("sync=mmap", false),
    ("async=libaio,direct=1", false),
    ("async=io_uring", false),
    ("async=thrpool", false),
    ("async=posix", false),
    ("async=emu", false),
    ("sync=nvme", true),
    ("async=io_uring_cmd", true),
];

/// The user-space driver's interfaces, NVMe commands on a PCI address.
const VFIO_IFACES: &[&str] = &["sync=vfio,nsid=1", "async=vfio,nsid=1"];

/// The pmem workload's file, in `$IOSWITCH_PMEM_DIR` (2 regions: the devdax device holds the other).
const PMEM_FILE: &str = "powercut";

/// The first region (and seed) of the vfio interfaces: apart from the kernel ones, so
/// that reading the wrong namespace cannot find their data.
const VFIO_SLOT: usize = 10;

/// One interface of a run: its options, the path it opens, whether it takes NVMe
/// commands (LBAs of 512 B) rather than byte offsets, its region and seed (`slot`), and
/// the path and options the check reads its region with.
struct Iface {
    opts: String,
    path: String,
    nvme: bool,
    slot: usize,
    check: String,
    check_opts: &'static str,
}

/// What a run covers.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The kernel's interfaces on nvme0's namespace 1.
    Kernel,
    /// The user-space driver on the controller at this PCI address.
    Vfio(&'a str),
    /// The same interfaces, checked by reading through the driver itself (`sync=vfio`;
    /// the controller bound to vfio-pci again): for `check` only.
    VfioDriver(&'a str),
    /// `sync=pmem` on a DAX file and a devdax device (from the environment).
    Pmem,
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set (tests/vm/pmem-tests.sh --guest-then sets it)"))
}

/// The interfaces of a run.
fn ifaces(target: Target) -> Result<Vec<Iface>, String> {
    let (blk, chr) = ns1("nvme0")?;
    Ok(match target {
        Target::Pmem => {
            let file = format!("{}/{PMEM_FILE}", env("IOSWITCH_PMEM_DIR")?);
            let devdax = env("IOSWITCH_PMEM_DEVDAX")?;
            let size = format!("sync=pmem,create=1,size={}", 2 * REGION);
            vec![
                Iface { opts: size, path: file.clone(), nvme: false, slot: 0, check: file, check_opts: "sync=psync" },
                Iface {
                    opts: "sync=pmem".into(),
                    path: devdax.clone(),
                    nvme: false,
                    slot: 1,
                    check: devdax,
                    check_opts: "sync=pmem",
                },
            ]
        }
        Target::Kernel => IFACES
            .iter()
            .enumerate()
            .map(|(i, (o, nvme))| Iface {
                opts: o.to_string(),
                path: if *nvme { chr.clone() } else { blk.clone() },
                nvme: *nvme,
                slot: i,
                check: blk.clone(),
                check_opts: "sync=psync,direct=1",
            })
            .collect(),
        Target::Vfio(addr) | Target::VfioDriver(addr) => {
            let (check, check_opts) = if let Target::VfioDriver(_) = target {
                (addr.to_string(), VFIO_IFACES[0])
            } else {
                // At write time the controller is vfio-pci's: no block device to name yet.
                (pci_ns1(addr).unwrap_or_default(), "sync=psync,direct=1")
            };
            VFIO_IFACES
                .iter()
                .enumerate()
                .map(|(i, o)| Iface {
                    opts: o.to_string(),
                    path: addr.to_string(),
                    nvme: true,
                    slot: VFIO_SLOT + i,
                    check: check.clone(),
                    check_opts,
                })
                .collect()
        }
    })
}

/// Namespace 1's block and char device names of controller `ctrl` (the kernel's names
/// need not follow nsids).
fn ns1(ctrl: &str) -> Result<(String, String), String> {
    let prefix = format!("{ctrl}n");
    for e in std::fs::read_dir("/sys/block").map_err(|e| format!("/sys/block: {e}"))? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix(&prefix) {
            if std::fs::read_to_string(format!("/sys/block/{name}/nsid")).map(|s| s.trim() == "1").unwrap_or(false) {
                return Ok((format!("/dev/{name}"), format!("/dev/ng{}n{rest}", &ctrl["nvme".len()..])));
            }
        }
    }
    Err(format!("no NVMe namespace 1 of {ctrl} ({prefix}*) in /sys/block"))
}

/// The block device of namespace 1 of the controller at PCI address `addr`, as the
/// kernel's nvme driver names it.
fn pci_ns1(addr: &str) -> Result<String, String> {
    let dir = format!("/sys/bus/pci/devices/{addr}/nvme");
    let mut ctrls = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e} (is {addr} bound to the nvme driver?)"))?;
    let ctrl = ctrls
        .next()
        .ok_or_else(|| format!("{dir}: no controller"))?
        .map_err(|e| e.to_string())?
        .file_name()
        .to_string_lossy()
        .into_owned();
    Ok(ns1(&ctrl)?.0)
}

fn fill(b: &mut [u8], pos: u64, seed: u64) {
    for (k, w) in b.chunks_exact_mut(8).enumerate() {
        let p = pos + 8 * k as u64;
        w.copy_from_slice(&(p ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    }
}

fn offset(slot: usize, round: u64, j: u64) -> u64 {
    slot as u64 * REGION + (round * PER_ROUND + j) * BS
}

fn seed(slot: usize, round: u64) -> u64 {
    1 + 100 * slot as u64 + round
}

fn write_round(dev: &Device, it: &Iface, round: u64, flush: bool) -> Result<(), String> {
    let (nvme, slot) = (it.nvme, it.slot);
    let queued = it.opts.starts_with("async=");
    let cmds: Vec<(Cmd, u64)> = (0..PER_ROUND)
        .map(|j| {
            let off = offset(slot, round, j);
            (if nvme { Cmd::write(1, off / 512, (BS / 512) as u32) } else { Cmd::fs_write(off, BS) }, off)
        })
        .collect();
    let flush_cmd = if nvme { Cmd::flush(1) } else { Cmd::fs_flush() };
    let buf = |off: u64| -> Result<ioswitch::Buffer, String> {
        let mut b = dev.alloc(BS as usize).map_err(|e| e.to_string())?;
        fill(&mut b, off, seed(slot, round));
        Ok(b)
    };
    if queued {
        let mut q = dev.queue(PER_ROUND as u32).map_err(|e| e.to_string())?;
        for (t, (cmd, off)) in cmds.iter().enumerate() {
            q.submit(cmd, buf(*off)?.into(), t as u64).map_err(|r| r.error.to_string())?;
        }
        let mut bad = Vec::new();
        q.drain(|c| {
            if !c.status.is_ok() {
                bad.push(c.status.to_string())
            }
        })
        .map_err(|e| e.to_string())?;
        if flush {
            q.submit(&flush_cmd, Data::None, 99).map_err(|r| r.error.to_string())?;
            q.drain(|c| {
                if !c.status.is_ok() {
                    bad.push(format!("flush: {}", c.status))
                }
            })
            .map_err(|e| e.to_string())?;
        }
        if let Some(b) = bad.first() {
            return Err(b.clone());
        }
    } else {
        for (cmd, off) in &cmds {
            dev.pass(cmd, &mut [buf(*off)?]).map_err(|e| e.to_string())?;
        }
        if flush {
            dev.pass(&flush_cmd, &mut []).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn open(path: &str, opts: &str) -> Result<Device, String> {
    let o: Opts = opts.parse().map_err(|e| format!("{opts}: {e}"))?;
    Device::open(path, &o).map_err(|e| format!("{path} with {opts}: {e}"))
}

/// The control's interface: buffered psync on `/dev/nvme0nX`, slot 0.
fn control() -> Result<Iface, String> {
    let (blk, _) = ns1("nvme0")?;
    Ok(Iface {
        opts: "sync=psync".into(),
        path: blk.clone(),
        nvme: false,
        slot: 0,
        check: blk,
        check_opts: "sync=psync,direct=1",
    })
}

fn write(target: Target) -> Result<(), String> {
    if let Target::VfioDriver(_) = target {
        return Err("'vfio-driver' is a way to check, not to write: write with 'vfio PCI-ADDRESS'".into());
    }
    let list = ifaces(target)?;
    if !matches!(target, Target::Vfio(_)) {
        // Every interface open at once, the rounds interleaved across them.
        let devs: Vec<Device> = list.iter().map(|it| open(&it.path, &it.opts)).collect::<Result<_, _>>()?;
        for round in 0..ROUNDS {
            for (it, dev) in list.iter().zip(&devs) {
                write_round(dev, it, round, true).map_err(|e| format!("{}: round {round}: {e}", it.opts))?;
            }
        }
    } else {
        // One vfio open at a time: a process opens a controller's group once.
        for it in &list {
            let dev = open(&it.path, &it.opts)?;
            for round in 0..ROUNDS {
                write_round(&dev, it, round, true).map_err(|e| format!("{}: round {round}: {e}", it.opts))?;
            }
        }
    }
    // The control: a round in the page cache only, never flushed. The device stays open
    // until the cut: the last close of a block device writes its dirty pages back.
    let c = control()?;
    let cdev = open(&c.path, &c.opts)?;
    write_round(&cdev, &c, ROUNDS, false)?;
    println!("flushed at {ROUNDS}");
    std::thread::sleep(std::time::Duration::from_secs(120));
    drop(cdev);
    Err("still running 120 s after 'flushed at': the harness did not cut the power".into())
}

/// The bytes of round `round` of `it` that are not what the workload wrote.
fn missing(it: &Iface, round: u64) -> Result<u64, String> {
    let dev = open(&it.check, it.check_opts)?;
    let mut lost = 0;
    for j in 0..PER_ROUND {
        let off = offset(it.slot, round, j);
        let mut b = dev.alloc(BS as usize).map_err(|e| e.to_string())?;
        // The vfio driver takes NVMe commands (nsid 1, LBAs of 512 B), the rest byte offsets.
        let cmd = if it.check_opts.starts_with("sync=vfio") {
            Cmd::read(1, off / 512, (BS / 512) as u32)
        } else {
            Cmd::fs_read(off, BS)
        };
        dev.pass(&cmd, std::slice::from_mut(&mut b)).map_err(|e| format!("{}: {e}", it.check))?;
        let mut want = vec![0u8; BS as usize];
        fill(&mut want, off, seed(it.slot, round));
        lost += b.iter().zip(&want).filter(|(a, b)| a != b).count() as u64;
    }
    Ok(lost)
}

fn check(n: u64, target: Target) -> Result<bool, String> {
    if let Target::Vfio(addr) = target {
        let dev = pci_ns1(addr)?;
        println!("crash: power cut: reading the vfio rounds through the kernel's {dev} (controller {addr})");
    }
    if let Target::VfioDriver(addr) = target {
        println!("crash: power cut: reading the vfio rounds through the driver itself ({addr}, {})", VFIO_IFACES[0]);
    }
    let mut ok = true;
    for it in ifaces(target)? {
        let lost: u64 = (0..n).map(|r| missing(&it, r)).sum::<Result<u64, String>>()?;
        println!(
            "crash: power cut: {} on {}: {n} flushed rounds, {} bytes checked, {lost} bytes lost",
            it.opts,
            it.path,
            n * PER_ROUND * BS
        );
        ok &= lost == 0;
    }
    let control = missing(&control()?, n)?;
    println!(
        "crash: power cut: control: {control} of {} bytes written to the page cache and never flushed are missing",
        PER_ROUND * BS
    );
    if control == 0 {
        println!("crash: power cut: the control round survived: this run could not have seen a lost flush");
        ok = false;
    }
    Ok(ok)
}

/// The target named after `write` / `check N`.
fn target<'a>(rest: &[&'a str]) -> Result<Target<'a>, String> {
    match rest {
        [] => Ok(Target::Kernel),
        ["pmem"] => Ok(Target::Pmem),
        ["vfio", addr] => Ok(Target::Vfio(addr)),
        ["vfio-driver", addr] => Ok(Target::VfioDriver(addr)),
        _ => Err(format!(
            "unknown target {rest:?}: want nothing, 'vfio PCI-ADDRESS', 'vfio-driver PCI-ADDRESS' (check) or 'pmem'"
        )),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["write", rest @ ..] => target(rest).and_then(write).map(|_| true),
        ["check", n, rest @ ..] => {
            n.parse().map_err(|e| format!("check {n}: {e}")).and_then(|n| target(rest).and_then(|t| check(n, t)))
        }
        _ => Err("usage: powercut write [vfio PCI-ADDRESS | pmem] | powercut check N [vfio PCI-ADDRESS | vfio-driver PCI-ADDRESS | pmem]".into()),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("powercut: {e}");
            ExitCode::from(2)
        }
    }
}
