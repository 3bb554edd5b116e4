//! Queue semantics: several queues at once, a full queue, drain / poke / wait, dropping a
//! queue with I/O in flight, and the statistics.

use crate::ctx::{buf_ids, data_bytes, read_range, split, write_pattern, Ctx, Runner};
use crate::rows::{Col, RowKind};
use crate::runner::{seed, PANICS};
use crate::{Res, KIB, QD};
use ioswitch::{Cmd, Completion, Data, Error};
use ioswitch_testkit::pattern::{compare, describe};
use ioswitch_testkit::{lock, pattern};
use std::time::{Duration, Instant};

/// Several threads on one device, each with its own queue (or its own `pass` calls) and
/// its own region, verified by each thread and again after all joined.
pub(crate) fn case_multi(ctx: &Ctx) -> Res {
    pub(crate) const THREADS: u64 = 4;
    let chunk = 16 * KIB;
    let region = ctx.span / THREADS / chunk * chunk;
    let results: Vec<Result<u64, String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                sc.spawn(move || -> Result<u64, String> {
                    let mut r = Runner::new(ctx, 8)?;
                    let s = seed();
                    let pos = t * region;
                    write_pattern(&mut r, ctx, pos, region, chunk, s)?;
                    if !ctx.nil() {
                        let got = read_range(&mut r, ctx, pos, region, chunk)?;
                        compare(&got, &pattern::at(pos, region, s), pos, Some(s), &format!("thread {t}'s own region"))?;
                    }
                    r.finish()?;
                    Ok(s)
                })
            })
            .collect();
        hs.into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join().unwrap_or_else(|_| Err(format!("thread {t} panicked: {}", lock(&PANICS).join("; "))))
            })
            .collect()
    });
    let seeds = results
        .into_iter()
        .enumerate()
        .map(|(t, r)| r.map_err(|e| format!("thread {t}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if !ctx.nil() {
        let mut r = Runner::new(ctx, QD)?;
        let got = read_range(&mut r, ctx, 0, THREADS * region, chunk)?;
        for (t, s) in seeds.iter().enumerate() {
            let pos = t as u64 * region;
            let slice = &got[pos as usize..(pos + region) as usize];
            compare(
                slice,
                &pattern::at(pos, region, *s),
                pos,
                Some(*s),
                &format!("thread {t}'s region after all joined"),
            )?;
        }
        r.finish()?;
    }
    Ok(format!("{THREADS} threads x {} KiB", region / KIB))
}

/// submit on a full queue is refused with Busy and the data handed back; after reaping,
/// the same data goes in.
pub(crate) fn case_queue_full(ctx: &Ctx) -> Res {
    let u = ctx.lba;
    let mut q = ctx.dev.queue(4).map_err(|e| format!("dev.queue(4): {e}"))?;
    let mut got: Vec<Completion> = Vec::new();
    for i in 0..4u64 {
        let (c, d) = ctx.r(i * u, u)?;
        q.submit(&c, d, i).map_err(|e| format!("submit #{i} of 4 on a depth-4 queue: {e}"))?;
    }
    ensure!(q.outstanding() == 4, "outstanding {} after 4 submits", q.outstanding());
    let w = 384 * KIB;
    let s = seed();
    let e = ctx.vec_unit();
    let data = Data::Vec(vec![ctx.pat(w, e, s)?, ctx.pat(w + e, e, s)?]);
    let ids = buf_ids(&data);
    let before = data_bytes(&data);
    let cmd = Cmd::write(ctx.nsid, w / u, ctx.nlb(2 * e));
    let rej = match q.submit(&cmd, data, 4) {
        Ok(()) => return Err("a 5th submit on a full depth-4 queue was accepted".into()),
        Err(rej) => rej,
    };
    ensure!(
        matches!(rej.error, Error::Busy { depth: 4 }),
        "a full queue said {:?}, expected Busy {{ depth: 4 }}",
        rej.error
    );
    ensure!(rej.error.errno() == Some(libc::EBUSY), "Busy errno() {:?}", rej.error.errno());
    ensure!(
        buf_ids(&rej.data) == ids && data_bytes(&rej.data) == before,
        "Busy did not hand back the same buffers unchanged"
    );
    ensure!(matches!(rej.data, Data::Vec(_)), "Busy handed back Data::Vec as another variant");
    ensure!(q.stats().submitted == 4, "the refused submit was counted: submitted {}", q.stats().submitted);
    ensure!(q.outstanding() == 4, "outstanding {} after the refused submit", q.outstanding());
    let n = q.wait(1, |c| got.push(c)).map_err(|e| format!("wait(1): {e}"))?;
    ensure!((1..=4).contains(&n), "wait(1) on a full queue reaped {n}");
    q.submit(&cmd, rej.data, 4).map_err(|e| format!("submit after reaping: {e}"))?;
    // Full again, with a command that carries no data.
    let mut extra = 0;
    while q.outstanding() < 4 {
        let (c, d) = ctx.r(0, u)?;
        q.submit(&c, d, 5 + extra).map_err(|e| format!("refill: {e}"))?;
        extra += 1;
    }
    match q.submit(&Cmd::flush(ctx.nsid), Data::None, 99) {
        Ok(()) => return Err("a flush on a full queue was accepted".into()),
        Err(rej) => {
            ensure!(
                matches!(rej.error, Error::Busy { .. }) && matches!(rej.data, Data::None),
                "flush on a full queue: {:?}",
                rej.error
            )
        }
    }
    q.drain(|c| got.push(c)).map_err(|e| format!("drain: {e}"))?;
    let total = 5 + extra;
    ensure!(got.len() as u64 == total, "{} completions for {total} accepted submits", got.len());
    let mut tags: Vec<u64> = got.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    ensure!(tags == (0..total).collect::<Vec<_>>(), "completion tags {tags:?}");
    for c in &got {
        ensure!(c.status.is_ok(), "tag {}: {}", c.tag, c.status);
    }
    let st = q.stats();
    ensure!(st.submitted == total && st.completed == total, "stats {st:?}, expected {total} submitted and completed");
    drop(q);
    if !ctx.nil() {
        let mut r = Runner::new(ctx, QD)?;
        let got = read_range(&mut r, ctx, w, 2 * e, 2 * e)?;
        compare(&got, &pattern::at(w, 2 * e, s), w, Some(s), "the write that was first refused with Busy")?;
        r.finish()?;
    }
    Ok(String::new())
}

/// drain, poke and wait: each reaps what it promises, every tag exactly once.
pub(crate) fn case_drain(ctx: &Ctx) -> Res {
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    let mut got: Vec<Completion> = Vec::new();
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    ensure!(q.drain(|c| got.push(c)).map_err(e("drain"))? == 0, "drain on an empty queue reaped something");
    ensure!(q.poke(0, |c| got.push(c)).map_err(e("poke"))? == 0, "poke on an empty queue reaped something");
    ensure!(q.wait(1, |c| got.push(c)).map_err(e("wait"))? == 0, "wait(1) on an empty queue reaped something");
    ensure!(got.is_empty(), "callbacks ran on an empty queue");

    let d = 640 * KIB;
    let blk = 4 * KIB;
    let s = seed();
    for i in 0..QD as u64 {
        let (c, data) = ctx.w(d + i * blk, blk, s)?;
        q.submit(&c, data, i).map_err(|e| format!("submit write #{i}: {e}"))?;
    }
    let n = q.drain(|c| got.push(c)).map_err(e("drain"))?;
    ensure!(n == QD && got.len() == QD as usize, "drain reaped {n} ({} callbacks) of {QD}", got.len());
    ensure!(q.outstanding() == 0, "outstanding {} after drain", q.outstanding());
    let mut tags: Vec<u64> = got.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    ensure!(tags == (0..QD as u64).collect::<Vec<_>>(), "drained tags {tags:?}");
    for c in got.drain(..) {
        ensure!(
            c.status.is_ok() && c.result == ctx.moved(blk),
            "write tag {}: {} result {}",
            c.tag,
            c.status,
            c.result
        );
    }

    // poke(1) reaps at most one and never waits; loop (bounded) until all came back.
    for i in 0..8u64 {
        let (c, data) = ctx.r(d + i * blk, blk)?;
        q.submit(&c, data, i).map_err(|e| format!("submit read #{i}: {e}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pokes = 0;
    while got.len() < 8 {
        ensure!(Instant::now() < deadline, "poke(1) reaped only {} of 8 in 10 s ({pokes} pokes)", got.len());
        let k = q.poke(1, |c| got.push(c)).map_err(e("poke"))?;
        ensure!(k <= 1, "poke(1) reaped {k}");
        pokes += 1;
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    ensure!(q.outstanding() == 0, "outstanding {} after all were poked out", q.outstanding());
    for c in got.drain(..) {
        ensure!(c.status.is_ok() && c.result == ctx.moved(blk), "read tag {}: {} result {}", c.tag, c.status, c.result);
        if !ctx.nil() {
            let pos = d + c.tag * blk;
            compare(
                &data_bytes(&c.data),
                &pattern::at(pos, blk, s),
                pos,
                Some(s),
                &format!("poked read tag {}", c.tag),
            )?;
        }
    }

    // wait(min) with min above what is outstanding waits for all of them, no longer.
    for i in 0..8u64 {
        let (c, data) = ctx.r(d + i * blk, blk)?;
        q.submit(&c, data, 100 + i).map_err(|e| format!("submit read #{i}: {e}"))?;
    }
    let n = q.wait(100, |c| got.push(c)).map_err(e("wait(100)"))?;
    ensure!(n == 8 && got.len() == 8 && q.outstanding() == 0, "wait(100) with 8 outstanding reaped {n}");
    for c in got.drain(..) {
        ensure!(c.status.is_ok() && (100..108).contains(&c.tag), "wait: tag {} status {}", c.tag, c.status);
    }
    let st = q.stats();
    ensure!(st.submitted == st.completed && st.submitted == QD as u64 + 16, "stats {st:?}");
    Ok(format!("{pokes} pokes"))
}

/// Dropping a queue with I/O in flight (committed, and not even committed): no crash, no
/// hang; afterwards every sector holds the old or the new data, and the device works.
pub(crate) fn case_drop(ctx: &Ctx) -> Res {
    let span = 256 * KIB;
    let chunk = 16 * KIB;
    let (a, b, c, d) = (seed(), seed(), seed(), seed());
    let mut r = Runner::new(ctx, QD)?;
    if !ctx.nil() {
        write_pattern(&mut r, ctx, 0, span, chunk, a)?;
        write_pattern(&mut r, ctx, span, span, chunk, c)?;
    }
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    for (i, (p, l)) in split(0, span, chunk).into_iter().enumerate() {
        let (cmd, data) = ctx.w(p, l, b)?;
        q.submit(&cmd, data, i as u64).map_err(|e| format!("submit #{i}: {e}"))?;
    }
    q.commit().map_err(|e| format!("commit: {e}"))?;
    let t = Instant::now();
    drop(q);
    let t1 = t.elapsed();
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    for (i, (p, l)) in split(span, span, chunk).into_iter().enumerate() {
        let (cmd, data) = ctx.w(p, l, d)?;
        q.submit(&cmd, data, i as u64).map_err(|e| format!("submit #{i}: {e}"))?;
    }
    drop(q);
    if ctx.nil() {
        let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue after the drops: {e}"))?;
        let (cmd, data) = ctx.r(0, 4 * KIB)?;
        q.submit(&cmd, data, 1).map_err(|e| format!("submit after the drops: {e}"))?;
        let n = q.drain(|_| {}).map_err(|e| format!("drain after the drops: {e}"))?;
        ensure!(n == 1, "a queue made after the drops reaped {n} of 1");
        return Ok(format!("drop took {} us", t1.as_micros()));
    }
    let got = read_range(&mut r, ctx, 0, 2 * span, chunk)?;
    let mut newer = [0usize; 2];
    for (half, (old, new)) in [(a, b), (c, d)].into_iter().enumerate() {
        for sec in 0..span / 512 {
            let pos = half as u64 * span + sec * 512;
            let g = &got[pos as usize..pos as usize + 512];
            if g == pattern::at(pos, 512, new).as_slice() {
                newer[half] += 1;
            } else if g != pattern::at(pos, 512, old).as_slice() {
                return Err(format!(
                    "sector {} after dropping a queue ({}) holds neither the old nor the new data: {}",
                    pos / 512,
                    if half == 0 { "committed writes" } else { "uncommitted writes" },
                    describe(u64::from_le_bytes(g[..8].try_into().unwrap_or_default()), pos, Some(new))
                ));
            }
        }
    }
    let s = seed();
    write_pattern(&mut r, ctx, 0, 32 * KIB, chunk, s)?;
    let got = read_range(&mut r, ctx, 0, 32 * KIB, chunk)?;
    compare(&got, &pattern::at(0, 32 * KIB, s), 0, Some(s), "a round trip after the drops")?;
    r.finish()?;
    let sectors = span / 512;
    Ok(format!(
        "after drop: {}/{sectors} committed and {}/{sectors} uncommitted sectors written; drop took {} us",
        newer[0],
        newer[1],
        t1.as_micros()
    ))
}

/// stats(): submitted counts what submit accepted, completed what was reaped; syscalls is
/// 0 for interfaces without any and > 0 for those built on syscalls.
pub(crate) fn case_stats(ctx: &Ctx) -> Res {
    let mut q = ctx.dev.queue(QD).map_err(|e| format!("dev.queue: {e}"))?;
    let s0 = q.stats();
    ensure!(s0.submitted == 0 && s0.completed == 0, "a new queue's stats are {s0:?}");
    let p = 900 * KIB;
    let blk = 4 * KIB;
    let s = seed();
    for i in 0..8u64 {
        let (c, d) = ctx.w(p + i * blk, blk, s)?;
        q.submit(&c, d, i).map_err(|e| format!("submit: {e}"))?;
    }
    q.drain(|_| {}).map_err(|e| format!("drain: {e}"))?;
    let mid = q.stats();
    ensure!(mid.submitted == 8 && mid.completed == 8, "after 8 writes: {mid:?}");
    for i in 0..8u64 {
        let (c, d) = ctx.r(p + i * blk, blk)?;
        q.submit(&c, d, 10 + i).map_err(|e| format!("submit: {e}"))?;
    }
    q.submit(&Cmd::flush(ctx.nsid), Data::None, 20).map_err(|e| format!("submit flush: {e}"))?;
    let (c, d) = ctx.r(ctx.end(), ctx.lba)?;
    ensure!(q.submit(&c, d, 21).is_err(), "an out-of-range read was accepted");
    q.drain(|_| {}).map_err(|e| format!("drain: {e}"))?;
    let st = q.stats();
    ensure!(st.submitted == 17 && st.completed == 17, "after 17 accepted and 1 refused: {st:?}");
    ensure!(st.syscalls >= mid.syscalls, "syscalls went down: {} -> {}", mid.syscalls, st.syscalls);
    // emu runs the row's default sync interface inline: ramdisk and pmem (a devdax row's
    // default) move data with memory copies, so neither makes a system call; vfio polls
    // its own queue pairs through mapped doorbells (DESIGN: no syscall per I/O).
    let zero = ctx.nil()
        || ctx.col == Col::Vfio
        || (matches!(ctx.row, RowKind::Ram | RowKind::PmemDevdax) && ctx.col == Col::Emu);
    if zero {
        ensure!(
            st.syscalls == 0,
            "{} on a {} made {} syscalls; it makes none",
            ctx.col.label(),
            ctx.row.tag(),
            st.syscalls
        );
        Ok("syscalls == 0".into())
    } else if ctx.col.sqpoll() || ctx.row == RowKind::Ram {
        Ok(format!("syscalls = {} (not asserted: may legitimately be 0)", st.syscalls))
    } else {
        ensure!(st.syscalls > 0, "{} on a {} counted 0 syscalls for 17 commands", ctx.col.label(), ctx.row.tag());
        Ok(format!("syscalls = {} for 17 commands", st.syscalls))
    }
}
