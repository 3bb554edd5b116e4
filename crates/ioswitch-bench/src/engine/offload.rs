//! `io_submit_mode=offload`, with fio 3.33's structure (rate-submit.c, workqueue.c,
//! backend.c `do_io`):
//!
//! - the job's thread only generates I/Os: it picks the direction, offset and length,
//!   fills the buffer, stamps `start`, and hands the I/O to one of `iodepth` submission
//!   workers (fio's `workqueue_enqueue`: the first idle worker from the one after the last
//!   chosen, round robin). It holds `iodepth` buffers (fio's io_u pool), so at most
//!   `iodepth` I/Os are out; with none free it waits for a completion (fio waits on
//!   `free_cond`). Rate limits and thinktime are applied by the job's thread; a rated job
//!   sleeps with its I/Os still in flight (fio's `rate_ddir` quiesces only inline).
//! - each worker has an engine context of its own at depth 1 (fio's
//!   `io_workqueue_init_worker_fn` sets `iodepth=1`): a sync interface calls
//!   [`Device::pass`], stamping `issue` just before the call; an async one has its own
//!   [`Queue`] of depth 1, submits, commits, stamps `issue` after the commit and waits for
//!   the one completion (fio's `io_workqueue_fn` with `min_evts` 1). The worker stamps
//!   `complete` when the call returns or the completion is reaped.
//! - the times come back with the completion and are accounted to the job, as fio's
//!   workers account to their parent: lat = complete − start (so it includes the handoff),
//!   clat = complete − issue, and for async interfaces slat = issue − start (the handoff
//!   and the submission). Each worker runs at depth 1, so fio's `iodepth_level` is 100 %
//!   at 1 and every submission and reap takes one I/O.
//! - `fsync=N`/`fdatasync=N`: the sync is a piece of work handed to a worker like an I/O
//!   (fio's `DDIR_SYNC` io_u), taking one of the `iodepth` buffers. It is due after the
//!   N-th write is handed on (fio counts `io_issues` at the handoff under offload), waits
//!   for nothing (the writes still with other workers run beside it), and is handed on
//!   before the next I/O only, so a job's last write has none. fio 3.33 itself, after
//!   the N-th write, hands on syncs without end: its job thread tests `last_was_sync`,
//!   which `io_completed` sets only in the worker's copy (see docs/BENCHMARKS.md).
//! - several files: the job's thread picks the file of each I/O and sync (its
//!   `file_service_type`), the worker runs it on that file (a sync interface's call, or
//!   the worker's queue for that file); the completion is accounted with that file's state.
//! - `verify_backlog`: once `verify_backlog` writes have completed, a batch of them
//!   (`verify_backlog_batch`, default all), oldest first, is read back before the next
//!   I/Os: each read handed to a worker like an I/O (fio's `check_get_verify`), checked
//!   when it comes back, with the other writes still in flight (fio's `get_next_verify`
//!   takes only writes no longer in flight). What is left at the end is checked by the
//!   job's verify phase.
//! - at the end the job waits for every worker to go idle (fio's `workqueue_flush`), then
//!   runs its verify phase and `end_fsync` itself, as fio's `do_verify` does.
//!
//! - `zonemode=zbd`: the job's thread keeps the write pointers (zbd.rs) and fio's zone
//!   lock, held from `zbd_adjust_block` until the I/O completes (`zbd_queue_io`,
//!   `zbd_put_io`): one I/O per zone in flight, the job's thread waiting for it, so a
//!   zone's writes reach it in order. Since the offset choice may reset a zone (zbd.rs
//!   resets inside it), a job that writes first waits until nothing is in flight to the
//!   file: its writes go one at a time (fio's too for a sequential writer, whose one
//!   open zone is locked; for random writes over several open zones fio keeps one in
//!   flight per zone).
//!
//! fio refuses offload for its io_uring engines (`FIO_NO_OFFLOAD`); the job file reader
//! refuses them too, and `latency_target`, which fio 3.33 runs without a meaning (see
//! `JobSpec::check_offload`).

use super::*;
use std::sync::mpsc;

/// How an I/O went: done, or its errno and what failed.
type Outcome = Result<(), (i32, String)>;

/// What a worker does: an I/O, or a sync of a file (fio's `DDIR_SYNC`/`DDIR_DATASYNC`
/// io_u, handed to a worker like an I/O).
enum Op {
    Io(Cmd),
    Sync(SyncCall),
}

/// One I/O handed to a worker.
struct Work {
    op: Op,
    /// The job's file it goes to (its number, as [`Run::cur`]).
    file: usize,
    /// The buffer; `None` only when a failed submission did not hand it back. A sync
    /// holds one too: it takes one of the job's `iodepth` io_us, as in fio.
    buf: Option<Buffer>,
    dir: usize,
    off: u64,
    len: u64,
    start: u64,
    /// A `verify_backlog` read: its block is checked when it comes back.
    verify: bool,
}

/// A file as the workers see it: its device, and for `fsync=N` a handle of its own for
/// fsync(2) (a duplicate of the job's).
struct FileCtx<'a> {
    dev: &'a Device,
    fsync: Option<std::fs::File>,
}

/// What a worker hands back: the I/O, its times, and how it went.
struct Done {
    worker: usize,
    work: Work,
    issue: u64,
    complete: u64,
    result: Outcome,
    /// The I/O went into a worker's queue (an async engine): a failed write there has
    /// moved the zone's write pointer, as fio's does (zbd.rs). A sync call, or a
    /// submission the queue refused, has not.
    queued: bool,
}

/// A worker's engine context: the sync interface, or a queue of depth 1 of its own for
/// each of the job's files (fio's worker opens the job's files in its own context).
fn worker(files: &[FileCtx], mode: Mode, idx: usize, rx: mpsc::Receiver<Work>, tx: mpsc::Sender<Done>) -> QueueStats {
    let mut stats = QueueStats::default();
    let per_cmd = files[0].dev.sync_syscalls_per_cmd();
    let mut queues = Vec::new();
    if mode == Mode::Async {
        for f in files {
            match f.dev.queue(1) {
                Ok(q) => queues.push(q),
                Err(e) => {
                    // Every I/O handed to this worker fails with the reason.
                    let why =
                        (e.errno().unwrap_or(libc::EINVAL), format!("offload worker {idx}: {}: {e}", f.dev.uri()));
                    for work in rx {
                        let t = now_ns();
                        let d =
                            Done { worker: idx, work, issue: t, complete: t, result: Err(why.clone()), queued: false };
                        if tx.send(d).is_err() {
                            break;
                        }
                    }
                    return stats;
                }
            }
        }
    }
    for mut work in rx {
        let (issue, result, complete);
        let mut queued = false;
        let f = &files[work.file];
        match (&work.op, queues.get_mut(work.file)) {
            (Op::Sync(call), _) => {
                // A sync runs as a call in the worker, whatever the engine (fio's libaio,
                // too, syncs with a call: do_io_u_sync).
                issue = now_ns();
                result = sync_call(f.dev, f.fsync.as_ref(), *call);
                complete = now_ns();
                if mode == Mode::Sync {
                    stats.syscalls += per_cmd;
                }
            }
            (Op::Io(cmd), None) => {
                issue = now_ns();
                let r = match work.buf.as_mut() {
                    Some(b) => f.dev.pass(cmd, std::slice::from_mut(b)),
                    None => f.dev.pass(cmd, &mut []),
                };
                complete = now_ns();
                stats.submitted += 1;
                stats.completed += 1;
                stats.syscalls += per_cmd;
                result = r.map(drop).map_err(|e| (e.errno().unwrap_or(libc::EIO), e.to_string()));
            }
            (Op::Io(cmd), Some(q)) => {
                let buf = work.buf.take().expect("the job hands every I/O a buffer");
                let (i, r, c, b, went) = submit_one(q, cmd, buf);
                work.buf = b;
                (issue, result, complete, queued) = (i, r, c, went);
            }
        }
        if tx.send(Done { worker: idx, work, issue, complete, result, queued }).is_err() {
            break;
        }
    }
    for q in &queues {
        let s = q.stats();
        stats.submitted += s.submitted;
        stats.completed += s.completed;
        stats.syscalls += s.syscalls;
    }
    stats
}

/// One I/O through a worker's queue of depth 1: submit, commit, wait for it. Returns the
/// issue time, the outcome, the completion time, the buffer, and whether the queue took
/// the command (false: refused at submission).
fn submit_one(q: &mut Queue, cmd: &Cmd, buf: Buffer) -> (u64, Outcome, u64, Option<Buffer>, bool) {
    let err = |e: ioswitch::Error| (e.errno().unwrap_or(libc::EIO), e.to_string());
    if let Err(rej) = q.submit(cmd, Data::One(buf), 0) {
        let t = now_ns();
        return (t, Err(err(rej.error)), t, rej.data.into_one(), false);
    }
    if let Err(e) = q.commit() {
        let t = now_ns();
        // The command may still be in the queue: take it back before handing the buffer on.
        let mut back = None;
        let _ = q.drain(|c| back = c.data.into_one());
        // Taken back, it never reached the device.
        let went = back.is_none();
        return (t, Err(err(e)), t, back, went);
    }
    let issue = now_ns();
    let mut got = None;
    let r = q.wait(1, |c| got = Some(c));
    let complete = now_ns();
    match (r, got) {
        (Ok(_), Some(c)) => {
            let status = if c.status.is_ok() {
                Ok(())
            } else {
                Err((c.status.errno().unwrap_or(libc::EIO), c.status.to_string()))
            };
            (issue, status, complete, c.data.into_one(), true)
        }
        (Err(e), _) => (issue, Err(err(e)), complete, None, true),
        (Ok(_), None) => (issue, Err((libc::EIO, "the queue returned no completion".into())), complete, None, true),
    }
}

/// The job's thread under `io_submit_mode=offload` (see the module docs).
pub(super) fn run_offload(run: &mut Run) {
    let depth = run.job.iodepth.max(1) as usize;
    let Some(mut free) = alloc_buffers(run, depth as u32) else { return };
    let mode = run.job.mode;
    let has_slat = mode == Mode::Async;
    // Every file of the job, for the workers (fio's dup_files).
    let mut files = Vec::with_capacity(run.file_regions.len());
    for f in 0..run.file_regions.len() {
        let (dev, fsync) = match run.parked[f].as_ref() {
            Some(p) => (p.dev, p.fsync_file.as_ref()),
            None => (run.dev, run.fsync_file.as_ref()),
        };
        match fsync.map(|h| h.try_clone()).transpose() {
            Ok(fsync) => files.push(FileCtx { dev, fsync }),
            Err(e) => {
                let why = format!("offload: cannot duplicate '{}' for fsync=N: {e}", dev.uri());
                return run.fail(e.raw_os_error().unwrap_or(libc::EIO), why);
            }
        }
    }
    let files = &files;
    let stats = std::thread::scope(|s| {
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let mut to = Vec::with_capacity(depth);
        let mut workers = Vec::with_capacity(depth);
        for i in 0..depth {
            let (tx, rx) = mpsc::channel::<Work>();
            let done_tx = done_tx.clone();
            to.push(tx);
            workers.push(s.spawn(move || worker(files, mode, i, rx, done_tx)));
        }
        drop(done_tx);
        // zonemode=zbd: the zone size in bytes (0: not zoned).
        let zone_bytes = match (run.job.shapes.zbd, run.dev.geometry().zones.as_ref()) {
            (true, Some(z)) => z.zone_size * run.dev.geometry().lba_size as u64,
            _ => 0,
        };
        // What each worker holds: the file and zone of its I/O (`None`: idle).
        let mut busy: Vec<Option<(usize, u64)>> = vec![None; depth];
        let mut next_free = 0;
        let mut out = 0usize;
        // A sync due after a write is handed on before the next I/O, and only if there is
        // one (fio's get_rw_ddir decides on it when it gets that I/O).
        let mut pending_sync = None;
        // verify_backlog: the blocks (file, offset) to read back before the next I/O.
        let mut to_verify = std::collections::VecDeque::new();
        loop {
            // Completions that are back, then wait for one while no buffer is free.
            while let Ok(d) = done_rx.try_recv() {
                out -= 1;
                completed(run, d, &mut busy, &mut free, has_slat);
            }
            if run.res.error != 0 {
                break;
            }
            // verify_backlog: a batch of the writes that completed (fio's get_next_verify
            // takes no IP_F_IN_FLIGHT one) is read back, oldest first, by the workers.
            if to_verify.is_empty() && run.backlog_due() {
                let n = match run.job.shapes.verify_backlog_batch {
                    0 => run.backlog.len(),
                    b => (b as usize).min(run.backlog.len()),
                };
                to_verify.extend(run.backlog.drain(..n));
            }
            if free.is_empty() {
                if out == 0 {
                    break;
                }
                match done_rx.recv() {
                    Ok(d) => {
                        out -= 1;
                        completed(run, d, &mut busy, &mut free, has_slat);
                    }
                    Err(_) => break,
                }
                continue;
            }
            let mut start = now_ns();
            if !run.more(start) {
                break;
            }
            // fio's flow check (without its quiesce: the workers' I/Os go on).
            if let Some(sleep) = run.flow_held() {
                super::flow_pause(sleep);
                continue;
            }
            // fio's check_get_verify: the verify reads due go before the next I/O, each
            // to its own file, taking an io_u; they do not count against the size.
            if let Some((f, off)) = to_verify.pop_front() {
                let bs = run.job.bs[1];
                let served = run.cur;
                run.switch_to(f);
                let zone = (off - run.base).checked_div(zone_bytes).unwrap_or(NO_ZONE);
                let ok = zone == NO_ZONE
                    || wait_while(run, &done_rx, &mut out, &mut busy, &mut free, has_slat, |b| {
                        b.contains(&Some((f, zone)))
                    });
                let cmd = make_cmd(run.dev, false, off, bs);
                run.switch_to(served);
                if !ok || free.is_empty() {
                    break;
                }
                let w = pick_worker(&busy, next_free);
                next_free = (w + 1) % depth;
                busy[w] = Some((f, zone));
                let buf = free.pop();
                let work = Work { op: Op::Io(cmd), file: f, buf, dir: 0, off, len: bs, start: now_ns(), verify: true };
                if to[w].send(work).is_err() {
                    run.fail(libc::EIO, format!("offload worker {w} ended early"));
                    break;
                }
                out += 1;
                continue;
            }
            // As fio's get_io_u: the file first (a sync, too, takes its turn of the
            // file_service_type and goes to that file).
            run.next_file();
            if let Some(call) = pending_sync.take() {
                // fio counts writes when it hands them on (io_issues), so the sync follows
                // the N-th write's handoff and waits for nothing: it runs beside the writes
                // still with other workers.
                let w = pick_worker(&busy, next_free);
                next_free = (w + 1) % depth;
                busy[w] = Some((run.cur, NO_ZONE));
                let buf = free.pop();
                let work =
                    Work { op: Op::Sync(call), file: run.cur, buf, dir: 1, off: 0, len: 0, start, verify: false };
                if to[w].send(work).is_err() {
                    run.fail(libc::EIO, format!("offload worker {w} ended early"));
                    break;
                }
                out += 1;
                continue;
            }
            // zonemode=zbd, a job that writes: the offset choice may reset a zone, so it
            // waits until nothing is in flight to the file (see `zone_of`).
            if zone_bytes > 0 && run.job.rw.writes() {
                let f = run.cur;
                if !wait_while(run, &done_rx, &mut out, &mut busy, &mut free, has_slat, |b| {
                    b.iter().flatten().any(|x| x.0 == f)
                }) {
                    break;
                }
                start = now_ns();
            }
            // A rated offload job sleeps with its I/Os still in flight (fio waits for them only
            // in inline mode).
            let Some((dir, off, len)) = run.next_io(&mut start, |_| true) else { break };
            if run.res.error != 0 || run.eof {
                break;
            }
            let zone = (off - run.base).checked_div(zone_bytes).unwrap_or(NO_ZONE);
            if zone_bytes > 0 {
                // fio's zone lock: one I/O in flight per zone; the job's thread waits for it.
                let at = (run.cur, zone);
                if !wait_while(run, &done_rx, &mut out, &mut busy, &mut free, has_slat, |b| b.contains(&Some(at))) {
                    break;
                }
            }
            let write = dir == 1;
            let mut buf = free.pop().expect("a free buffer");
            if write {
                run.fill(&mut buf, off, len, start);
            }
            let cmd = if dir == TRIM { Cmd::fs_trim(off, len) } else { make_cmd(run.dev, write, off, len) };
            run.count_issued(dir, len);
            if let Some(p) = run.pacer.as_mut() {
                p.issued(write, len);
            }
            // fio's get_submit_worker: the first idle worker from `next_free` on, round
            // robin (one is always idle: a free buffer means a worker handed one back).
            let w = pick_worker(&busy, next_free);
            next_free = (w + 1) % depth;
            busy[w] = Some((run.cur, zone));
            // Each worker runs at depth 1 (fio's worker td has iodepth=1).
            run.res.depth_level[0] += 1;
            run.res.depth_sum += 1;
            if mode == Mode::Async {
                run.res.submit_level[batch_bucket(1)] += 1;
            }
            let work = Work { op: Op::Io(cmd), file: run.cur, buf: Some(buf), dir, off, len, start, verify: false };
            if to[w].send(work).is_err() {
                run.fail(libc::EIO, format!("offload worker {w} ended early"));
                break;
            }
            out += 1;
            if write {
                pending_sync = run.sync_due(1).or(pending_sync);
            }
            if let Some(t) = run.thinker.as_mut() {
                if t.due(run.issued_ios, run.completed_ios, now_ns()) {
                    let took = t.stall(now_ns);
                    run.stalled(write, took);
                }
            }
        }
        // fio's workqueue_flush: every worker goes idle; their completions are accounted.
        drop(to);
        while out > 0 {
            match done_rx.recv() {
                Ok(d) => {
                    out -= 1;
                    completed(run, d, &mut busy, &mut free, has_slat);
                }
                Err(_) => break,
            }
        }
        workers.into_iter().map(|h| h.join().unwrap_or_default()).fold(QueueStats::default(), |mut a, s| {
            a.submitted += s.submitted;
            a.completed += s.completed;
            a.syscalls += s.syscalls;
            a
        })
    });
    run.res.queue = stats;
}

/// Not an I/O to a zone (a sync, or a job without zones).
const NO_ZONE: u64 = u64::MAX;

/// Accounts completions (waiting for each) while `held` says the workers still hold what
/// the job's thread waits for; false when no worker is left to wait for.
fn wait_while(
    run: &mut Run,
    done_rx: &mpsc::Receiver<Done>,
    out: &mut usize,
    busy: &mut [Option<(usize, u64)>],
    free: &mut Vec<Buffer>,
    has_slat: bool,
    held: impl Fn(&[Option<(usize, u64)>]) -> bool,
) -> bool {
    while held(busy) {
        match done_rx.recv() {
            Ok(d) => {
                *out -= 1;
                completed(run, d, busy, free, has_slat);
            }
            Err(_) => return false,
        }
    }
    true
}

/// fio's `get_submit_worker`: the first idle worker from `next_free` on, round robin
/// (one is always idle: a free buffer means a worker handed one back).
fn pick_worker(busy: &[Option<(usize, u64)>], next_free: usize) -> usize {
    let n = busy.len();
    (0..n).map(|k| (next_free + k) % n).find(|&w| busy[w].is_none()).unwrap_or(next_free)
}

/// Accounts one I/O a worker handed back, as fio's worker accounts it to its parent.
fn completed(run: &mut Run, d: Done, busy: &mut [Option<(usize, u64)>], free: &mut Vec<Buffer>, has_slat: bool) {
    let Done { worker, work, issue, complete, result, queued } = d;
    let Work { op, file, buf, dir, off, len, start, verify } = work;
    busy[worker] = None;
    // A verify read is checked before its buffer goes back; the I/Os' results below.
    let result = if verify {
        let served = run.cur;
        run.switch_to(file);
        checked(run, buf.as_ref(), off, len, [start, issue, complete], result);
        run.switch_to(served);
        None
    } else {
        Some(result)
    };
    // A buffer a failed submission kept is replaced, so the job keeps `iodepth` of them.
    match buf.map(Ok).unwrap_or_else(|| alloc_buffers(run, 1).and_then(|mut v| v.pop()).ok_or(())) {
        Ok(b) => free.push(b),
        Err(()) => return,
    }
    let Some(result) = result else { return };
    if let Op::Sync(_) = op {
        // Timed as one, like the job's own syncs.
        match result {
            Ok(()) => run.res.sync.record(complete - issue),
            Err((errno, msg)) => run.fail(errno, msg),
        }
        return;
    }
    // Several files: the I/O is accounted with its own file's state.
    let served = run.cur;
    run.switch_to(file);
    account_io(run, dir, off, len, [start, issue, complete], (result, queued), has_slat);
    run.switch_to(served);
}

/// A `verify_backlog` read of the served file came back: counted as a read (as the
/// inline backlog's reads) and its block checked; verified, it is not read again at the end.
fn checked(run: &mut Run, buf: Option<&Buffer>, off: u64, len: u64, t: [u64; 3], result: Outcome) {
    let [start, issue, complete] = t;
    if let Err((errno, msg)) = result {
        if !run.goes_on_after(false, false, errno) {
            run.fail(errno, format!("verify read at offset {off}: {msg}"));
        }
        return;
    }
    run.res.read.ios += 1;
    run.res.read.bytes += len;
    run.res.read.clat.record(complete - issue);
    run.res.read.lat.record(complete - start);
    let Some(buf) = buf else { return };
    if let Err(why) = verify::check_with(run.job.verify, run.job.shapes.verify_pattern.as_deref(), buf, off) {
        if !run.goes_on_after(false, true, libc::EILSEQ) {
            run.fail(libc::EILSEQ, format!("verify: bad block at offset {off}: {why}"));
        }
        return;
    }
    run.res.verified += 1;
    set_block(&mut run.written, (off - run.base) / run.job.bs[1], false);
}

/// Accounts a finished I/O of the served file (`queued`: see [`Done::queued`]).
fn account_io(run: &mut Run, dir: usize, off: u64, len: u64, t: [u64; 3], result: (Outcome, bool), has_slat: bool) {
    let (result, queued) = result;
    let [start, issue, complete] = t;
    run.res.reaps += 1;
    if has_slat {
        run.res.complete_level[batch_bucket(1)] += 1;
    }
    let write = dir == 1;
    match result {
        Ok(()) => {
            run.note_written(write, off);
            run.account(dir, len, start, issue, complete, has_slat, 0);
            run.completed_io(dir, len, off, [start, issue, complete], has_slat, 0);
            run.progress.ios.fetch_add(1, Ordering::Relaxed);
            run.progress.bytes.fetch_add(len, Ordering::Relaxed);
        }
        Err((errno, msg)) => {
            // A worker's sync call (fio: a sync engine in the worker), or a submission its
            // queue refused, leaves the zone's write pointer where the device's is; a
            // write that failed after its queue took it does not (zbd.rs).
            if let Some(z) = run.zbd.as_ref().filter(|_| write && !queued) {
                z.failed_unqueued_write(off, len);
            }
            if !run.goes_on_after(dir != 0, false, errno) {
                if run.filled && write {
                    run.forget_write(off);
                }
                run.fail(errno, format!("{} at offset {off}: {msg}", DIR_NAMES[dir]));
            } else if write {
                run.forget_write(off);
            }
        }
    }
    run.sample(complete);
}
