//! Deallocation (trim, DSM, write zeroes) and flush.

use crate::ctx::{done, read_range, write_pattern, Ctx, Runner};
use crate::rows::Dealloc;
use crate::runner::seed;
use crate::{Res, KIB, QD};
use ioswitch::{Cmd, Data};
use ioswitch_testkit::pattern;
use ioswitch_testkit::pattern::compare;

/// Deallocation reads back as zeroes: file-set trim, NVM DSM deallocate (2 ranges) and
/// write zeroes, each on part of a patterned region; the rest stays intact.
pub(crate) fn case_trim(ctx: &Ctx) -> Res {
    if let Dealloc::Unreadable(why) = &ctx.dealloc {
        return Err(format!("DLFEAT could not be read, so trimmed blocks cannot be checked: {why}"));
    }
    let mut r = Runner::new(ctx, QD)?;
    let t = 512 * KIB;
    let len = 64 * KIB;
    let s = seed();
    write_pattern(&mut r, ctx, t, len, 16 * KIB, s)?;
    let size0 = ctx.backing_len();
    let o = r.one((Cmd::fs_trim(t + 4 * KIB, 16 * KIB), Data::None))?;
    done(o, "file trim of 16 KiB", None)?;
    let o = r.one(ctx.dsm(&[(t + 24 * KIB, 8 * KIB), (t + 40 * KIB, 4 * KIB)])?)?;
    done(o, "DSM deallocate of 2 ranges", None)?;
    let o = r.one((Cmd::write_zeroes(ctx.nsid, (t + 52 * KIB) / ctx.lba, ctx.nlb(8 * KIB)), Data::None))?;
    done(o, "write zeroes of 8 KiB", None)?;
    let got = read_range(&mut r, ctx, t, len, 16 * KIB)?;
    let mut want = pattern::at(t, len, s);
    // Deallocated ranges read back as the device's deallocated value (files: holes, so
    // zeroes; NVMe: what DLFEAT says); write zeroes always reads back zeroes.
    for (p, l, zeroes) in [(4, 16, false), (24, 8, false), (40, 4, false), (52, 8, true)] {
        let range = (p * KIB) as usize..((p + l) * KIB) as usize;
        match (zeroes, ctx.dealloc.byte()) {
            (true, _) => want[range].fill(0),
            (false, Some(b)) => want[range].fill(b),
            // Not reported: whatever is there (the rest must still be intact).
            (false, None) => want[range.clone()].copy_from_slice(&got[range]),
        }
    }
    compare(&got, &want, t, Some(s), "read after trim / DSM / write zeroes")?;
    ctx.oracle_check(t, &want, Some(s), "after trim")?;
    ensure!(ctx.backing_len() == size0, "trim changed the file size: {size0:?} -> {:?}", ctx.backing_len());
    r.finish()?;
    Ok(match &ctx.dealloc {
        Dealloc::Zeroes => "deallocated blocks read back as zeroes".into(),
        Dealloc::Ones => "deallocated blocks read back as 0xFF".into(),
        Dealloc::Unknown(why) => format!("deallocated blocks not compared ({why})"),
        Dealloc::Unreadable(_) => unreachable!("refused above"),
    })
}

pub(crate) fn case_flush(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let s = seed();
    let p = 768 * KIB;
    write_pattern(&mut r, ctx, p, 4 * KIB, 4 * KIB, s)?;
    done(r.one((Cmd::flush(ctx.nsid), Data::None))?, "NVM flush", None)?;
    done(r.one((Cmd::fs_flush(), Data::None))?, "file flush", None)?;
    let got = read_range(&mut r, ctx, p, 4 * KIB, 4 * KIB)?;
    compare(&got, &pattern::at(p, 4 * KIB, s), p, Some(s), "data after flush")?;
    r.finish()?;
    Ok(String::new())
}
