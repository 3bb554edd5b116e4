//! The io_uring tunables are in effect: sqpoll threads, iopoll without interrupts.

use crate::ctx::Ctx;
use crate::Res;
use ioswitch::{Cmd, Device, Opts, Status};
use std::collections::BTreeSet;
use std::fs;

/// Thread ids of this process's io_uring SQPOLL threads (`iou-sqp-PID`: kernel threads
/// in the thread group of the process that made the ring).
pub(crate) fn sqpoll_threads() -> Result<BTreeSet<u64>, String> {
    let mut v = BTreeSet::new();
    for e in fs::read_dir("/proc/self/task").map_err(|e| format!("/proc/self/task: {e}"))?.flatten() {
        let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("iou-sqp") {
            if let Ok(tid) = e.file_name().to_string_lossy().parse() {
                v.insert(tid);
            }
        }
    }
    Ok(v)
}

/// Interrupts so far of the controller's I/O queues (`nvme0q1`, `nvme0q2`, … in
/// /proc/interrupts; the admin queue q0 left out). Poll queues have no interrupt at all.
pub(crate) fn io_queue_irqs(ctrl: &str) -> Result<u64, String> {
    let text = fs::read_to_string("/proc/interrupts").map_err(|e| format!("/proc/interrupts: {e}"))?;
    let mut total = 0;
    let mut lines = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = f.last() else { continue };
        let Some(q) = name.strip_prefix(ctrl).and_then(|r| r.strip_prefix('q')) else { continue };
        if q == "0" || q.is_empty() || !q.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        total += f.iter().skip(1).map_while(|x| x.parse::<u64>().ok()).sum::<u64>();
        lines += 1;
    }
    ensure!(lines > 0, "no interrupt line of {ctrl}'s I/O queues in /proc/interrupts");
    Ok(total)
}

/// `k` reads of one LBA, one at a time (each waits for its completion), through a new
/// queue of `dev`; returns how many interrupts the controller's I/O queues took meanwhile.
pub(crate) fn irqs_for_reads(ctx: &Ctx, dev: &Device, ctrl: &str, k: u64) -> Result<u64, String> {
    let mut q = dev.queue(4).map_err(|e| format!("dev.queue(4): {e}"))?;
    let before = io_queue_irqs(ctrl)?;
    for i in 0..k {
        let lba = i % 64;
        let b = dev.alloc(ctx.lba as usize).map_err(|e| format!("alloc: {e}"))?;
        q.submit(&Cmd::read(ctx.nsid, lba, 1), b.into(), i).map_err(|e| format!("submit read #{i}: {}", e.error))?;
        let mut st = Status::OK;
        let n = q.drain(|c| st = c.status).map_err(|e| format!("drain read #{i}: {e}"))?;
        ensure!(n == 1 && st.is_ok(), "read #{i}: reaped {n}, status {st}");
    }
    let after = io_queue_irqs(ctrl)?;
    Ok(after.saturating_sub(before))
}

/// The io_uring tunables are in effect, not just accepted: with sqpoll=1 a new queue gets
/// its own kernel submission thread (a new `iou-sqp` thread of this process); with
/// iopoll=1 reads complete through the controller's poll queue, which has no interrupt
/// (checked against the same reads on a queue without iopoll, which do raise them).
pub(crate) fn case_tunables(ctx: &Ctx) -> Res {
    let mut notes = Vec::new();
    if ctx.col.sqpoll() {
        let before = sqpoll_threads()?;
        let mut q = ctx.dev.queue(4).map_err(|e| format!("dev.queue(4): {e}"))?;
        let (c, d) = ctx.r(0, ctx.lba)?;
        q.submit(&c, d, 1).map_err(|e| format!("submit: {}", e.error))?;
        let mut st = Status::OK;
        q.drain(|c| st = c.status).map_err(|e| format!("drain: {e}"))?;
        ensure!(st.is_ok(), "a read on the sqpoll queue failed: {st}");
        let after = sqpoll_threads()?;
        let new: Vec<&u64> = after.difference(&before).collect();
        ensure!(
            !new.is_empty(),
            "creating a queue with sqpoll=1 started no new iou-sqp thread (before: {before:?}, after: {after:?})"
        );
        drop(q);
        notes.push(format!("a new queue has its SQPOLL thread (iou-sqp, tid {})", new[0]));
    }
    if ctx.col.iopoll() {
        let ns = ctx.ns.as_ref().ok_or("iopoll on a device that is not NVMe")?;
        const K: u64 = 32;
        let polled = irqs_for_reads(ctx, &ctx.dev, &ns.ctrl, K)?;
        let plain = ctx.col.opts().replace(",iopoll=1", "");
        let plain = if ctx.row.direct() { format!("{plain},direct=1") } else { plain };
        let opts: Opts = plain.parse().map_err(|e| format!("{plain:?}: {e}"))?;
        let ctl = Device::open(&ctx.uri, &opts).map_err(|e| format!("open {} with {plain:?}: {e}", ctx.uri))?;
        let irq = irqs_for_reads(ctx, &ctl, &ns.ctrl, K)?;
        ensure!(irq > 0, "control: {K} reads without iopoll ({plain}) raised no interrupt on {}: cannot tell", ns.ctrl);
        ensure!(
            polled * 8 <= K,
            "{K} reads with iopoll=1 raised {polled} interrupts on {}'s I/O queues ({irq} without iopoll): \
             they did not complete through the poll queue",
            ns.ctrl
        );
        notes.push(format!("{K} reads at QD1: {polled} interrupts with iopoll=1, {irq} without"));
    }
    Ok(notes.join("; "))
}
