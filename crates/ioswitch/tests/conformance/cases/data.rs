//! Data moves: a pattern over the whole device, and vectored I/O.

use crate::ctx::{data_bytes, done, read_range, refused, write_pattern, Ctx, Runner};
use crate::runner::seed;
use crate::{Res, KIB, QD, TAIL_BYTES};
use ioswitch::{Cmd, Data, Error};
use ioswitch_testkit::pattern;
use ioswitch_testkit::pattern::{compare, fill, SENTINEL};

/// Pattern over the whole device, many commands (qd up to 16 for async), read back and
/// compared, the last LBA on its own, and std::fs as an independent witness both ways.
pub(crate) fn case_rw(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let chunk = if ctx.is_async() { 16 * KIB } else { 64 * KIB };
    let end = ctx.end();
    let mut notes = Vec::new();

    let s0 = seed();
    let head = pattern::at(0, 64 * KIB, s0);
    if ctx.oracle_write(0, &head)? {
        let got = read_range(&mut r, ctx, 0, 64 * KIB, chunk)?;
        compare(&got, &head, 0, Some(s0), "library read of data written with std::fs")?;
        notes.push("std::fs witness");
    }

    // The whole device, or (NVMe namespaces) its first `span` bytes and its last
    // TAIL_BYTES, each ending with a short command (their lengths are no chunk multiple).
    let regions = if ctx.span >= end { vec![(0, end)] } else { vec![(0, ctx.span), (end - TAIL_BYTES, TAIL_BYTES)] };
    let s = seed();
    let mut writes = 0;
    let mut wants = Vec::new();
    for &(pos, len) in &regions {
        writes += write_pattern(&mut r, ctx, pos, len, chunk, s)?;
        let got = read_range(&mut r, ctx, pos, len, chunk)?;
        let want = pattern::at(pos, len, s);
        let what =
            if len == end { "whole-device read back".to_string() } else { format!("read back of [{pos}, +{len})") };
        compare(&got, &want, pos, Some(s), &what)?;
        wants.push(want);
    }

    let s2 = seed();
    let last = end - ctx.lba;
    let o = r.one(ctx.w(last, ctx.lba, s2)?)?;
    done(o, "write of the last LBA", Some(ctx.lba))?;
    let got = read_range(&mut r, ctx, last - ctx.lba, 2 * ctx.lba, 2 * ctx.lba)?;
    let (tail_pos, _) = regions[regions.len() - 1];
    let tail_want = wants.last_mut().ok_or("no regions")?;
    fill(&mut tail_want[(last - tail_pos) as usize..], last, s2);
    compare(&got, &tail_want[(last - ctx.lba - tail_pos) as usize..], last - ctx.lba, Some(s2), "the last two LBAs")?;
    for (&(pos, _), want) in regions.iter().zip(&wants) {
        ctx.oracle_check(pos, want, Some(s), if regions.len() == 1 { "whole device" } else { "a patterned region" })?;
    }
    // The largest transfer the device takes, in one command (the whole device when it fits).
    let one = regions[0].1.min(ctx.dev.geometry().max_transfer / ctx.lba * ctx.lba);
    let what = if one == end { "one read of the whole device".to_string() } else { format!("one read of {one} bytes") };
    let d = done(r.one(ctx.r(0, one)?)?, &what, Some(one))?;
    compare(&data_bytes(&d), &wants[0][..one as usize], 0, Some(s), &what)?;
    r.finish()?;
    if regions.len() > 1 {
        notes.push("first and last LBAs of the namespace");
    }
    Ok(format!("{writes} writes of <= {chunk} B; {}", notes.join(", ")))
}

/// Several buffers per command (Data::Vec), both directions, NVM and file sets, and no
/// byte written past the transfer when the buffers are larger than it.
pub(crate) fn case_vectored(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    // Buffer lengths are multiples of `e` (an LBA; a page on a PCI device, see vec_unit).
    let e = ctx.vec_unit();

    // A: vectored NVM write, vectored file-set read with another split, plain read.
    let a = 128 * KIB;
    let s = seed();
    let mut bufs = Vec::new();
    let mut p = a;
    for k in [1, 2, 1, 3, 1] {
        bufs.push(ctx.pat(p, k * e, s)?);
        p += k * e;
    }
    let total = p - a;
    let o = r.one((Cmd::write(ctx.nsid, a / ctx.lba, ctx.nlb(total)), Data::Vec(bufs)))?;
    done(o, "vectored NVM write of 5 buffers", Some(total))?;
    let rb = [3, 1, 2, 2].iter().map(|&k| ctx.sentinel(k * e)).collect::<Result<Vec<_>, _>>()?;
    let o = r.one((Cmd::fs_read(a, total), Data::Vec(rb)))?;
    let d = done(o, "vectored file read of 4 buffers", Some(total))?;
    ensure!(d.bufs().len() == 4, "the vectored read handed back {} buffers, not 4", d.bufs().len());
    let want = pattern::at(a, total, s);
    compare(&data_bytes(&d), &want, a, Some(s), "vectored write, vectored read")?;
    let got = read_range(&mut r, ctx, a, total, total)?;
    compare(&got, &want, a, Some(s), "vectored write, single-buffer read")?;
    ctx.oracle_check(a, &want, Some(s), "vectored write")?;

    // B: vectored file-set write, vectored NVM read of one-LBA buffers.
    let b = a + total + 4 * KIB;
    let s2 = seed();
    let mut bufs = Vec::new();
    let mut p = b;
    for k in [2, 2, 4] {
        bufs.push(ctx.pat(p, k * e, s2)?);
        p += k * e;
    }
    let total = p - b;
    let o = r.one((Cmd::fs_write(b, total), Data::Vec(bufs)))?;
    done(o, "vectored file write of 3 buffers", Some(total))?;
    let rb = (0..8).map(|_| ctx.sentinel(e)).collect::<Result<Vec<_>, _>>()?;
    let o = r.one((Cmd::read(ctx.nsid, b / ctx.lba, ctx.nlb(8 * e)), Data::Vec(rb)))?;
    let d = done(o, "vectored NVM read of 8 buffers", Some(total))?;
    let want = pattern::at(b, total, s2);
    compare(&data_bytes(&d), &want, b, Some(s2), "vectored file write, vectored NVM read")?;

    // Many buffers in one command, both directions.
    let m = b + total + 4 * KIB;
    let s3 = seed();
    let bufs = (0..32).map(|k| ctx.pat(m + k * e, e, s3)).collect::<Result<Vec<_>, _>>()?;
    let (m_lba, n32) = (m / ctx.lba, ctx.nlb(32 * e));
    done(r.one((Cmd::write(ctx.nsid, m_lba, n32), Data::Vec(bufs)))?, "write of 32 buffers", Some(32 * e))?;
    let rb = (0..32).map(|_| ctx.sentinel(e)).collect::<Result<Vec<_>, _>>()?;
    let d = done(r.one((Cmd::read(ctx.nsid, m_lba, n32), Data::Vec(rb)))?, "read into 32 buffers", Some(32 * e))?;
    compare(&data_bytes(&d), &pattern::at(m, 32 * e, s3), m, Some(s3), "32-buffer write, 32-buffer read")?;

    // C: buffers larger than the transfer: the bytes past it stay untouched.
    let rb = vec![ctx.sentinel(4 * e)?, ctx.sentinel(4 * e)?];
    let o = r.one((Cmd::read(ctx.nsid, b / ctx.lba, ctx.nlb(6 * e)), Data::Vec(rb)))?;
    let d = done(o, "read of 6 units into 2 buffers of 4", Some(6 * e))?;
    let bytes = data_bytes(&d);
    compare(&bytes[..(6 * e) as usize], &want[..(6 * e) as usize], b, Some(s2), "read into larger buffers")?;
    ensure!(
        bytes[(6 * e) as usize..].iter().all(|&x| x == SENTINEL),
        "a 6-unit read wrote past its transfer into the rest of the second buffer"
    );

    // PCI: buffers that PRP entries cannot describe (one that is not the last ends inside
    // a page) are refused before the device sees them, naming the buffer; nothing written.
    let mut note = String::new();
    if ctx.pci() && ctx.lba < 4096 {
        let u = ctx.lba;
        let a_want = pattern::at(a, 2 * u, s);
        let v = vec![ctx.pat(a, u, seed())?, ctx.pat(a + u, u, seed())?];
        let (err, _) = refused(r.one((Cmd::write(ctx.nsid, a / u, 2), Data::Vec(v)))?, "write of two 1-LBA buffers")?;
        ensure!(
            matches!(err, Error::BadCommand { .. }) && err.to_string().contains("buffer 0 does not end on a 4 KiB page"),
            "a vectored write whose first buffer ends inside a page: {err:?} ({err}); expected BadCommand naming buffer 0"
        );
        let got = read_range(&mut r, ctx, a, 2 * u, 2 * u)?;
        compare(&got, &a_want, a, Some(s), "data after the refused vectored write")?;
        note = format!("buffers of {e} B; two {u} B buffers refused (PRP): {err}");
    }
    r.finish()?;
    Ok(note)
}
