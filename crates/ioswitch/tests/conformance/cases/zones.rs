//! Zones (zoned namespace rows).

use crate::ctx::{buf_ids, data_bytes, done, pass_one, ran, read_range, write_pattern, Ctx, Outcome, Runner};
use crate::runner::seed;
use crate::{Res, QD};
use ioswitch::spec::zns::{ZoneAction, ZoneDesc, ZoneReport, ZoneState};
use ioswitch::{AsyncIface, Cmd, Data, Error, Zoned};
use ioswitch_testkit::pattern;
use ioswitch_testkit::pattern::compare;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) static ZONE_NEXT: AtomicU64 = AtomicU64::new(0);

/// The zone a new cell uses: the next one round the device (zone 0 left alone).
pub(crate) fn next_zone(nr_zones: u64) -> u64 {
    1 + ZONE_NEXT.fetch_add(1, Ordering::Relaxed) % nr_zones.saturating_sub(1).max(1)
}

/// Whether the cell's queue carries zone management: the block-layer queues (libaio,
/// io_uring, POSIX aio) refuse NVMe commands they have no operation for, so their cells
/// manage zones through `Device::pass` (sync=block: the block layer's zone ioctls) and
/// check that refusal once.
pub(crate) fn zone_mgmt_on_queue(ctx: &Ctx) -> bool {
    !(ctx.is_async() && matches!(ctx.col.async_iface(), AsyncIface::Libaio | AsyncIface::IoUring | AsyncIface::Posix))
}

/// Runs a zone management command through the queue, or `Device::pass` (see above).
pub(crate) fn zone_mgmt(r: &mut Runner<'_>, ctx: &Ctx, op: (Cmd, Data)) -> Result<Outcome, String> {
    if zone_mgmt_on_queue(ctx) {
        r.one(op)
    } else {
        Ok(pass_one(&ctx.dev, &op.0, op.1))
    }
}

/// A report of the one zone starting at `zslba`, through the cell's interface.
pub(crate) fn zone_report(r: &mut Runner<'_>, ctx: &Ctx, zslba: u64) -> Result<ZoneDesc, String> {
    let b = ctx.alloc(128)?;
    let o = zone_mgmt(r, ctx, (Cmd::zone_mgmt_recv(ctx.nsid, zslba, 128, true), b.into()))?;
    let d = done(o, &format!("zone management receive (report of the zone at LBA {zslba})"), None)?;
    let rep = ZoneReport::parse(&data_bytes(&d)).map_err(|e| format!("zone report: {e:?}"))?;
    ensure!(rep.nr_zones == 1 && rep.zones.len() == 1, "a partial report of one zone has {} zones", rep.nr_zones);
    let z = rep.zones[0];
    ensure!(z.zslba == zslba, "the report of the zone at LBA {zslba} describes the zone at {}", z.zslba);
    Ok(z)
}

pub(crate) fn zone_action(r: &mut Runner<'_>, ctx: &Ctx, zslba: u64, action: ZoneAction) -> Result<(), String> {
    let o = zone_mgmt(r, ctx, (Cmd::zone_mgmt_send(ctx.nsid, zslba, action, false), Data::None))?;
    done(o, &format!("zone management send: {} the zone at LBA {zslba}", action.as_str()), None)?;
    Ok(())
}

/// Resets the cell's zone; checks the report says empty, write pointer at the start.
pub(crate) fn zone_fresh(r: &mut Runner<'_>, ctx: &Ctx) -> Result<(Zoned, u64), String> {
    let z = ctx.dev.geometry().zones.ok_or("the zoned namespace reports no zones")?;
    let zslba = ctx.zone * z.zone_size;
    zone_action(r, ctx, zslba, ZoneAction::Reset)?;
    let d = zone_report(r, ctx, zslba)?;
    ensure!(
        d.state == ZoneState::Empty && d.wp == zslba && d.capacity == z.zone_capacity,
        "after a reset the report says {:?} write pointer {} capacity {}; expected empty, {zslba}, {}",
        d.state,
        d.wp,
        d.capacity,
        z.zone_capacity
    );
    Ok((z, zslba))
}

/// A write the zone must refuse: through passthrough the device's status (`code`, e.g.
/// SCT 1h / SC BCh Zone Invalid Write); through the block layer, which turns it into an
/// I/O error, EIO.
pub(crate) fn zone_refused(ctx: &Ctx, o: Outcome, what: &str, code: u16) -> Result<String, String> {
    match o {
        Outcome::Rejected(e, _) => Err(format!("{what}: refused by the library, so the device never judged it: {e}")),
        Outcome::Done { status, .. } if status.is_ok() => Err(format!("{what} succeeded")),
        Outcome::Done { status, .. } => {
            if ctx.passthru {
                ensure!(
                    status.code() == code && status.sc() as u16 == code & 0xff,
                    "{what}: {status}, expected SCT {:x}h SC {:02X}h",
                    code >> 8,
                    code & 0xff
                );
            } else {
                ensure!(
                    status.errno() == Some(libc::EIO),
                    "{what}: {status}, expected EIO (the block layer reports a zone error of the device as EIO)"
                );
            }
            Ok(format!("{status}"))
        }
    }
}

pub(crate) const ZONE_INVALID_WRITE: u16 = 0x1BC;
pub(crate) const ZONE_IS_FULL: u16 = 0x1B9;

/// Writes at the write pointer succeed, one after the other, and move it; the data reads
/// back (and through the block device with O_DIRECT).
pub(crate) fn case_zone_write(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let mut note = String::new();
    if !zone_mgmt_on_queue(ctx) {
        let b = ctx.alloc(128)?;
        let ids = vec![b.id()];
        match r.one((Cmd::zone_mgmt_recv(ctx.nsid, 0, 128, true), b.into()))? {
            Outcome::Rejected(Error::BadCommand { .. }, back) if buf_ids(&back) == ids => {
                note =
                    format!("; {} refuses zone management at submit, so it goes through Device::pass", ctx.col.label());
            }
            Outcome::Rejected(e, _) => return Err(format!("zone management on the queue: refused with {e:?}")),
            Outcome::Done { status, .. } => {
                return Err(format!(
                    "zone management on a {} queue ran ({status}); update zone_mgmt_on_queue",
                    ctx.col.label()
                ))
            }
        }
    }
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let pos = zslba * u;
    let s = seed();
    for k in 0..4 {
        let p = pos + k * 8 * u;
        done(
            r.one(ctx.w(p, 8 * u, s)?)?,
            &format!("write of 8 LBAs at the write pointer (LBA {})", p / u),
            Some(8 * u),
        )?;
    }
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(
        d.state == ZoneState::ImplicitlyOpened && d.wp == zslba + 32,
        "after 32 LBAs written: {:?}, write pointer {}; expected implicitly opened, {}",
        d.state,
        d.wp,
        zslba + 32
    );
    let want = pattern::at(pos, 32 * u, s);
    let got = read_range(&mut r, ctx, pos, 32 * u, 32 * u)?;
    compare(&got, &want, pos, Some(s), "data written at the write pointer")?;
    ctx.oracle_check(pos, &want, Some(s), "data written at the write pointer")?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("zone {}: 4 writes at the write pointer; report: implicitly opened, write pointer +32{note}", ctx.zone))
}

/// Writes anywhere but the write pointer fail (passthrough: Zone Invalid Write, SCT 1h
/// SC BCh; block layer: EIO) and change nothing.
pub(crate) fn case_zone_invalid_write(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let pos = zslba * u;
    let s = seed();
    done(r.one(ctx.w(pos, 8 * u, s)?)?, "write of 8 LBAs at the write pointer", Some(8 * u))?;
    let s2 = seed();
    let ahead = zone_refused(
        ctx,
        r.one(ctx.w(pos + 16 * u, 8 * u, s2)?)?,
        "write 8 LBAs past the write pointer",
        ZONE_INVALID_WRITE,
    )?;
    let behind = zone_refused(
        ctx,
        r.one(ctx.w(pos, 8 * u, s2)?)?,
        "rewrite of LBAs behind the write pointer",
        ZONE_INVALID_WRITE,
    )?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.wp == zslba + 8, "the refused writes moved the write pointer: {} (expected {})", d.wp, zslba + 8);
    let got = read_range(&mut r, ctx, pos, 8 * u, 8 * u)?;
    compare(&got, &pattern::at(pos, 8 * u, s), pos, Some(s), "data after the refused writes")?;
    if let Some(b) = ctx.dealloc.byte() {
        let got = read_range(&mut r, ctx, pos + 16 * u, 8 * u, 8 * u)?;
        compare(&got, &vec![b; 8 * u as usize], pos + 16 * u, Some(s2), "LBAs past the write pointer")?;
    }
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("past the write pointer: {ahead}; behind it: {behind}"))
}

/// Zone append: through passthrough each append lands at its own LBA from the write
/// pointer on and the completion's result is that LBA (several in flight at once on a
/// queue); the block layer has no zone append for user space (Invalid Command Opcode).
pub(crate) fn case_zone_append(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let s = seed();
    if !ctx.passthru {
        let o = r.one((Cmd::zone_append(ctx.nsid, zslba, 2), ctx.pat(zslba * u, 2 * u, s)?.into()))?;
        let how = match o {
            Outcome::Done { status, .. } if !status.is_ok() => {
                ensure!(
                    status.code() == 0x001,
                    "zone append through the block layer: {status}, expected Invalid Command Opcode"
                );
                format!("{status}")
            }
            Outcome::Done { result, .. } => {
                return Err(format!("zone append through the block layer succeeded ({result})"))
            }
            // The block-layer queues refuse what they have no operation for.
            Outcome::Rejected(Error::BadCommand { .. }, _) if !zone_mgmt_on_queue(ctx) => "refused at submit".into(),
            Outcome::Rejected(e, _) => return Err(format!("zone append through the block layer was refused: {e}")),
        };
        let d = zone_report(&mut r, ctx, zslba)?;
        ensure!(d.state == ZoneState::Empty && d.wp == zslba, "after a failed append: {:?} wp {}", d.state, d.wp);
        r.finish()?;
        return Ok(format!("block layer: no zone append ({how})"));
    }
    // Four appends of 2 LBAs, all submitted before any is reaped (async), each with its
    // own pattern (as if written at LBA zslba + 2k).
    let ops = (0..4u64)
        .map(|k| Ok((Cmd::zone_append(ctx.nsid, zslba, 2), ctx.pat((zslba + 2 * k) * u, 2 * u, s)?.into())))
        .collect::<Result<Vec<(Cmd, Data)>, String>>()?;
    let mut at = BTreeMap::new();
    for (k, o) in r.run(ops)?.into_iter().enumerate() {
        let (status, result) = ran(o, &format!("zone append #{k}"))?;
        ensure!(status.is_ok(), "zone append #{k}: {status}");
        ensure!(
            (zslba..zslba + 8).contains(&result) && (result - zslba) % 2 == 0,
            "zone append #{k} says it wrote at LBA {result}; expected one of {zslba}, +2, +4, +6"
        );
        ensure!(at.insert(result, k as u64).is_none(), "two appends both say they wrote at LBA {result}");
    }
    for (&lba, &k) in &at {
        let got = read_range(&mut r, ctx, lba * u, 2 * u, 2 * u)?;
        let from = (zslba + 2 * k) * u;
        compare(
            &got,
            &pattern::at(from, 2 * u, s),
            from,
            Some(s),
            &format!("append #{k}, read at the LBA it returned"),
        )?;
    }
    let o = r.one((Cmd::zone_append(ctx.nsid, zslba, 2), ctx.pat(0, 2 * u, s)?.into()))?;
    let (status, result) = ran(o, "zone append")?;
    ensure!(status.is_ok() && result == zslba + 8, "a fifth append: {status}, LBA {result}; expected {}", zslba + 8);
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.wp == zslba + 10, "after 5 appends of 2 LBAs the write pointer is {}, expected {}", d.wp, zslba + 10);
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    let order: Vec<u64> = at.values().copied().collect();
    Ok(format!("5 appends returned their LBAs (first four landed in order {order:?})"))
}

/// Finish makes the zone full; a write to it fails (passthrough: Zone Is Full, SCT 1h
/// SC B9h; block layer: EIO).
pub(crate) fn case_zone_finish(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    done(r.one(ctx.w(zslba * u, 8 * u, seed())?)?, "write of 8 LBAs at the write pointer", Some(8 * u))?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Finish)?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.state == ZoneState::Full, "after finish the zone is {:?}, expected full", d.state);
    let st = zone_refused(ctx, r.one(ctx.w((zslba + 8) * u, u, seed())?)?, "write to a full zone", ZONE_IS_FULL)?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("write to the full zone: {st}"))
}

/// Reset empties the zone: the report shows it empty with the write pointer at its start,
/// the data reads back as deallocated blocks, and a write at the start works again.
pub(crate) fn case_zone_reset(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (_, zslba) = zone_fresh(&mut r, ctx)?;
    let u = ctx.lba;
    let pos = zslba * u;
    let s = seed();
    write_pattern(&mut r, ctx, pos, 16 * u, 16 * u, s)?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(d.wp == zslba + 16, "after 16 LBAs the write pointer is {}", d.wp);
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    let d = zone_report(&mut r, ctx, zslba)?;
    ensure!(
        d.state == ZoneState::Empty && d.wp == zslba,
        "after reset: {:?}, write pointer {}; expected empty, {zslba}",
        d.state,
        d.wp
    );
    let got = read_range(&mut r, ctx, pos, 16 * u, 16 * u)?;
    let note = match ctx.dealloc.byte() {
        Some(b) => {
            compare(&got, &vec![b; 16 * u as usize], pos, Some(s), "a reset zone")?;
            format!("reads back as {b:#04x} bytes")
        }
        None => {
            ensure!(got != pattern::at(pos, 16 * u, s), "a reset zone still reads back its old data");
            "old data gone".into()
        }
    };
    let s2 = seed();
    done(r.one(ctx.w(pos, 4 * u, s2)?)?, "write at the start of the reset zone", Some(4 * u))?;
    let got = read_range(&mut r, ctx, pos, 4 * u, 4 * u)?;
    compare(&got, &pattern::at(pos, 4 * u, s2), pos, Some(s2), "a write after the reset")?;
    zone_action(&mut r, ctx, zslba, ZoneAction::Reset)?;
    r.finish()?;
    Ok(format!("reset: empty, write pointer at the zone start, {note}"))
}
