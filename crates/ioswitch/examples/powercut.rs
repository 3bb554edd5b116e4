//! The workload and the check of the power-cut test (`tests/vm/power-cut.sh`, issue 17
//! part 3), run in the QEMU guest on NVMe namespace 1:
//!
//! - `powercut write`: through every interface (its own 8 MiB region each: psync buffered
//!   and direct, mmap, libaio, io_uring, thrpool, posix, emu on `/dev/nvme0nX`; NVMe ioctl
//!   and io_uring_cmd on `/dev/ng0nX`) writes rounds of 16 blocks of 4 KiB, each round
//!   ended by the interface's flush; after `ROUNDS` rounds it writes one more round to the
//!   page cache without flushing (psync, buffered), prints `flushed at ROUNDS` and waits:
//!   the harness kills QEMU on that line;
//! - `powercut check N` (after a fresh boot on the same disk images): reads every block of
//!   rounds `0..N` back and prints `crash: power cut: …` per interface with the bytes lost
//!   (exit status 1 unless 0); the unflushed round is the control: it must be missing.
//!
//! Not a test by itself (an example, so `cargo test` builds it): the harness runs it.

use ioswitch::{Cmd, Data, Device, Opts};
use std::process::ExitCode;

const BS: u64 = 4096;
const PER_ROUND: u64 = 16;
const ROUNDS: u64 = 3;
const REGION: u64 = 8 << 20;

/// (options, on the generic char device (NVMe commands) or the block device (byte offsets)).
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

/// Namespace 1's block and char device names (the kernel's names need not follow nsids).
fn ns1() -> Result<(String, String), String> {
    for e in std::fs::read_dir("/sys/block").map_err(|e| format!("/sys/block: {e}"))? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix("nvme0n") {
            if std::fs::read_to_string(format!("/sys/block/{name}/nsid")).map(|s| s.trim() == "1").unwrap_or(false) {
                return Ok((format!("/dev/{name}"), format!("/dev/ng0n{rest}")));
            }
        }
    }
    Err("no NVMe namespace 1 (nvme0n*) in /sys/block".into())
}

fn fill(b: &mut [u8], pos: u64, seed: u64) {
    for (k, w) in b.chunks_exact_mut(8).enumerate() {
        let p = pos + 8 * k as u64;
        w.copy_from_slice(&(p ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    }
}

fn offset(i: usize, round: u64, j: u64) -> u64 {
    i as u64 * REGION + (round * PER_ROUND + j) * BS
}

fn seed(i: usize, round: u64) -> u64 {
    1 + 100 * i as u64 + round
}

fn write_round(dev: &Device, nvme: bool, i: usize, round: u64, flush: bool) -> Result<(), String> {
    let queued = IFACES[i].0.starts_with("async=");
    let cmds: Vec<(Cmd, u64)> = (0..PER_ROUND)
        .map(|j| {
            let off = offset(i, round, j);
            (if nvme { Cmd::write(1, off / 512, (BS / 512) as u32) } else { Cmd::fs_write(off, BS) }, off)
        })
        .collect();
    let flush_cmd = if nvme { Cmd::flush(1) } else { Cmd::fs_flush() };
    let buf = |off: u64| -> Result<ioswitch::Buffer, String> {
        let mut b = dev.alloc(BS as usize).map_err(|e| e.to_string())?;
        fill(&mut b, off, seed(i, round));
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

fn write() -> Result<(), String> {
    let (blk, chr) = ns1()?;
    let devs: Vec<Device> =
        IFACES.iter().map(|(o, nvme)| open(if *nvme { &chr } else { &blk }, o)).collect::<Result<_, _>>()?;
    for round in 0..ROUNDS {
        for (i, (_, nvme)) in IFACES.iter().enumerate() {
            write_round(&devs[i], *nvme, i, round, true).map_err(|e| format!("{}: round {round}: {e}", IFACES[i].0))?;
        }
    }
    // The control: a round in the page cache only, never flushed.
    write_round(&devs[0], false, 0, ROUNDS, false)?;
    println!("flushed at {ROUNDS}");
    std::thread::sleep(std::time::Duration::from_secs(120));
    Err("still running 120 s after 'flushed at': the harness did not cut the power".into())
}

fn check(n: u64) -> Result<bool, String> {
    let (blk, _) = ns1()?;
    let dev = open(&blk, "sync=psync,direct=1")?;
    let missing = |i: usize, round: u64| -> Result<u64, String> {
        let mut lost = 0;
        for j in 0..PER_ROUND {
            let off = offset(i, round, j);
            let mut b = dev.alloc(BS as usize).map_err(|e| e.to_string())?;
            dev.pass(&Cmd::fs_read(off, BS), std::slice::from_mut(&mut b)).map_err(|e| e.to_string())?;
            let mut want = vec![0u8; BS as usize];
            fill(&mut want, off, seed(i, round));
            lost += b.iter().zip(&want).filter(|(a, b)| a != b).count() as u64;
        }
        Ok(lost)
    };
    let mut ok = true;
    for (i, (opts, _)) in IFACES.iter().enumerate() {
        let lost: u64 = (0..n).map(|r| missing(i, r)).sum::<Result<u64, String>>()?;
        println!(
            "crash: power cut: {opts}: {n} flushed rounds, {} bytes checked, {lost} bytes lost",
            n * PER_ROUND * BS
        );
        ok &= lost == 0;
    }
    let control = missing(0, n)?;
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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["write"] => write().map(|_| true),
        ["check", n] => n.parse().map_err(|e| format!("check {n}: {e}")).and_then(check),
        _ => Err("usage: powercut write | powercut check N".into()),
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
