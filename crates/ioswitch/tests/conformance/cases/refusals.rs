//! Requests refused before any I/O: out of range, misaligned (direct=1), malformed.

use crate::ctx::{buf_ids, data_bytes, done, read_range, refused, write_pattern, Ctx, Outcome, Runner};
use crate::runner::seed;
use crate::{Res, DEV_BYTES, KIB, QD};
use ioswitch::cmd::CmdSet;
use ioswitch::{Buffer, Cmd, Data, DevKind, Error, Sqe};
use ioswitch_testkit::pattern;
use ioswitch_testkit::pattern::{compare, fill, SENTINEL};

/// Requests reaching past the end are refused with OutOfRange before any I/O: data past
/// and at the end unchanged, file size unchanged, buffers handed back untouched.
pub(crate) fn case_out_of_range(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let (u, n, end) = (ctx.lba, ctx.nlbas, ctx.end());
    let s = seed();
    if !ctx.nil() {
        write_pattern(&mut r, ctx, end - 2 * u, 2 * u, 2 * u, s)?;
    }
    let size0 = ctx.backing_len();
    let submitted0 = r.submitted();
    let s2 = seed();
    type Probe = (&'static str, Cmd, Data, &'static str, Option<(u64, u64, u64)>);
    let probes: Vec<Probe> = vec![
        (
            "NVM write across the end",
            Cmd::write(ctx.nsid, n - 1, 2),
            ctx.pat(end - u, 2 * u, s2)?.into(),
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
        (
            "NVM write of the first LBA past the end",
            Cmd::write(ctx.nsid, n, 1),
            ctx.pat(end, u, s2)?.into(),
            "LBAs",
            Some((n, n + 1, n)),
        ),
        (
            "NVM read across the end",
            Cmd::read(ctx.nsid, n - 1, 2),
            ctx.sentinel(2 * u)?.into(),
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
        (
            "NVM write whose slba+nlb overflows",
            Cmd::write(ctx.nsid, u64::MAX, 2),
            ctx.pat(0, 2 * u, s2)?.into(),
            "LBAs",
            None,
        ),
        (
            "file write across the end",
            Cmd::fs_write(end - u, 2 * u),
            ctx.pat(end - u, 2 * u, s2)?.into(),
            "bytes",
            Some((end - u, end + u, end)),
        ),
        ("file read past the end", Cmd::fs_read(end, u), ctx.sentinel(u)?.into(), "bytes", Some((end, end + u, end))),
        (
            "file write whose offset+len overflows",
            Cmd::fs_write(u64::MAX / u * u, u),
            ctx.pat(0, u, s2)?.into(),
            "bytes",
            None,
        ),
        (
            "write zeroes across the end",
            Cmd::write_zeroes(ctx.nsid, n - 1, 2),
            Data::None,
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
        ("file trim across the end", Cmd::fs_trim(end - u, 2 * u), Data::None, "bytes", Some((end - u, end + u, end))),
        (
            "DSM deallocate of a range across the end",
            ctx.dsm(&[(end - u, 2 * u)])?.0,
            ctx.dsm(&[(end - u, 2 * u)])?.1,
            "LBAs",
            Some((n - 1, n + 1, n)),
        ),
    ];
    let count = probes.len();
    for (what, cmd, data, unit, range) in probes {
        let before = data_bytes(&data);
        let ids = buf_ids(&data);
        let (e, back) = refused(r.one((cmd, data))?, what)?;
        match &e {
            Error::OutOfRange { unit: got_unit, start, end: e_end, limit, .. } => {
                ensure!(*got_unit == unit, "{what}: OutOfRange in {got_unit}, expected {unit}");
                if let Some((s0, e0, l0)) = range {
                    ensure!(
                        (*start, *e_end, *limit) == (s0, e0, l0),
                        "{what}: OutOfRange [{start}, {e_end}) limit {limit}, expected [{s0}, {e0}) limit {l0}"
                    );
                }
            }
            other => return Err(format!("{what}: expected Error::OutOfRange, got {other:?}")),
        }
        ensure!(e.errno() == Some(libc::ERANGE), "{what}: errno() is {:?}, expected ERANGE", e.errno());
        ensure!(buf_ids(&back) == ids, "{what}: the refusal did not hand back the same buffers");
        ensure!(data_bytes(&back) == before, "{what}: the handed-back buffer was changed (I/O happened?)");
    }
    ensure!(
        r.submitted() == submitted0,
        "refused submissions were counted as submitted ({} -> {})",
        submitted0,
        r.submitted()
    );
    if !ctx.nil() {
        let got = read_range(&mut r, ctx, end - 2 * u, 2 * u, 2 * u)?;
        let want = pattern::at(end - 2 * u, 2 * u, s);
        compare(&got, &want, end - 2 * u, Some(s), "the last two LBAs after the refused requests")?;
        ctx.oracle_check(end - 2 * u, &want, Some(s), "the last two LBAs")?;
    }
    ensure!(ctx.backing_len() == size0, "the file size changed: {size0:?} -> {:?}", ctx.backing_len());
    if ctx.row.dev_kind() == DevKind::File {
        ensure!(size0 == Some(DEV_BYTES), "the file is {size0:?} bytes, expected {DEV_BYTES}");
    }
    r.finish()?;
    Ok(format!("{count} requests refused"))
}

pub(crate) fn want_misaligned(o: Outcome, what: &str, field: &str, before: &[u8]) -> Result<(), String> {
    let (e, back) = refused(o, what)?;
    match &e {
        Error::Misaligned { what: w, .. } if *w == field => {}
        other => return Err(format!("{what}: expected Error::Misaligned {{ what: {field:?} }}, got {other:?}")),
    }
    ensure!(e.errno() == Some(libc::EINVAL), "{what}: errno() {:?}, expected EINVAL", e.errno());
    ensure!(data_bytes(&back) == before, "{what}: the handed-back buffer was changed");
    Ok(())
}

/// A file-set command that is not whole LBAs, on NVMe passthrough: refused before any I/O,
/// or failed with EINVAL; never done.
pub(crate) fn whole_lbas_only(o: Outcome, what: &str) -> Result<String, String> {
    match o {
        Outcome::Done { status, .. } if status.is_ok() => Err(format!("{what} succeeded through NVMe passthrough")),
        Outcome::Done { status, .. } => {
            ensure!(status.errno() == Some(libc::EINVAL), "{what}: failed with {status}, expected errno EINVAL");
            Ok(format!("failed ({status})"))
        }
        Outcome::Rejected(e, _) => {
            ensure!(
                matches!(e, Error::BadCommand { .. } | Error::Misaligned { .. }),
                "{what}: refused with {e:?}, expected BadCommand, Misaligned or a failure with EINVAL"
            );
            Ok("refused".into())
        }
    }
}

/// direct=1: misaligned buffers, offsets and lengths are refused with Misaligned and no
/// I/O. Buffered: misaligned buffers and byte offsets just work.
pub(crate) fn case_alignment(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let u = ctx.lba;
    let a = 256 * KIB;
    let len = 4 * u;
    let s_old = seed();
    write_pattern(&mut r, ctx, a, len, len, s_old)?;
    let old = pattern::at(a, len, s_old);
    let align = ctx.dev.buffer_align();
    let s = seed();
    let misaligned = |off: usize, pos: u64, fill_seed: Option<u64>| -> Result<Buffer, String> {
        let mut b = Buffer::with_alignment(len as usize, align, off).map_err(|e| format!("with_alignment: {e}"))?;
        match fill_seed {
            Some(sd) => fill(&mut b, pos, sd),
            None => b.fill(SENTINEL),
        }
        ensure!(b.as_ptr() as usize % align == off, "with_alignment gave a buffer at the wrong offset");
        Ok(b)
    };
    if ctx.pci() {
        return pci_alignment(ctx, r, a, len, &old, s_old);
    }
    if ctx.row.direct() {
        let off_align = ctx.dev.geometry().dio_offset_align as u64;
        for (cmd, what, seed) in [
            (Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), "write from a misaligned buffer", Some(s)),
            (Cmd::read(ctx.nsid, a / u, ctx.nlb(len)), "read into a misaligned buffer", None),
        ] {
            let b = misaligned(1, a, seed)?;
            let before = b.to_vec();
            want_misaligned(r.one((cmd, b.into()))?, what, "buffer address", &before)?;
        }
        let v = vec![ctx.pat(a, u, s)?, {
            let mut b = Buffer::with_alignment(3 * u as usize, align, 1).map_err(|e| format!("with_alignment: {e}"))?;
            fill(&mut b, a + u, s);
            b
        }];
        let before: Vec<u8> = v.iter().flat_map(|b| b.iter().copied()).collect();
        want_misaligned(
            r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), Data::Vec(v)))?,
            "vectored write, second buffer misaligned",
            "buffer address",
            &before,
        )?;
        let mut checked = 4;
        if off_align >= 16 {
            let half = off_align / 2;
            let b = ctx.pat(a + half, len, s)?;
            let before = b.to_vec();
            want_misaligned(
                r.one((Cmd::fs_write(a + half, len), b.into()))?,
                "file write at a misaligned offset",
                "offset",
                &before,
            )?;
            let b = ctx.pat(a, len, s)?;
            let before = b.to_vec();
            want_misaligned(
                r.one((Cmd::fs_write(a, len - half), b.into()))?,
                "file write of a misaligned length",
                "length",
                &before,
            )?;
            let v = vec![ctx.pat(a, half, s)?, ctx.pat(a + half, len - half, s)?];
            let before: Vec<u8> = v.iter().flat_map(|b| b.iter().copied()).collect();
            want_misaligned(
                r.one((Cmd::fs_write(a, len), Data::Vec(v)))?,
                "vectored write with a misaligned buffer length",
                "buffer length",
                &before,
            )?;
            checked += 3;
        }
        let got = read_range(&mut r, ctx, a, len, len)?;
        compare(&got, &old, a, Some(s_old), "data after the refused misaligned writes")?;
        ctx.oracle_check(a, &old, Some(s_old), "data after the refused misaligned writes")?;
        r.finish()?;
        Ok(format!("{checked} misaligned requests refused"))
    } else {
        let b = misaligned(1, a, Some(s))?;
        done(
            r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), b.into()))?,
            "write from a misaligned buffer",
            Some(len),
        )?;
        let b = misaligned(3, a, None)?;
        let d = done(
            r.one((Cmd::read(ctx.nsid, a / u, ctx.nlb(len)), b.into()))?,
            "read into a misaligned buffer",
            Some(len),
        )?;
        let mut want = pattern::at(a, len, s);
        compare(&data_bytes(&d), &want, a, Some(s), "misaligned write, misaligned read")?;
        let (off, l) = (1000u64, 1000u64);
        if ctx.passthru {
            // NVMe passthrough moves whole LBAs: file-set I/O that is not whole LBAs fails
            // (EINVAL) or is refused, and moves nothing.
            let mut b = Buffer::with_alignment(l as usize, align, 5).map_err(|e| format!("with_alignment: {e}"))?;
            fill(&mut b, a + off, seed());
            let w = whole_lbas_only(r.one((Cmd::fs_write(a + off, l), b.into()))?, "file write of 1000 bytes at 1000")?;
            let mut b = Buffer::with_alignment(l as usize, align, 7).map_err(|e| format!("with_alignment: {e}"))?;
            b.fill(SENTINEL);
            let rd = whole_lbas_only(r.one((Cmd::fs_read(a + off, l), b.into()))?, "file read of 1000 bytes at 1000")?;
            let d =
                done(r.one((Cmd::fs_read(a, len), ctx.sentinel(len)?.into()))?, "file read of whole LBAs", Some(len))?;
            compare(&data_bytes(&d), &want, a, Some(s), "data after a failed unaligned file write")?;
            ctx.oracle_check(a, &want, Some(s), "after misaligned writes")?;
            r.finish()?;
            return Ok(format!(
                "passthrough: misaligned buffers accepted; file-set I/O that is not whole LBAs: write {w}, read {rd}"
            ));
        }
        // Byte-granular file-set I/O at an offset and length that are no LBA multiple.
        let s2 = seed();
        let mut b = Buffer::with_alignment(l as usize, align, 5).map_err(|e| format!("with_alignment: {e}"))?;
        fill(&mut b, a + off, s2);
        done(r.one((Cmd::fs_write(a + off, l), b.into()))?, "file write of 1000 bytes at byte offset 1000", Some(l))?;
        fill(&mut want[off as usize..(off + l) as usize], a + off, s2);
        let d = done(r.one((Cmd::fs_read(a, len), ctx.sentinel(len)?.into()))?, "file read", Some(len))?;
        compare(&data_bytes(&d), &want, a, Some(s2), "bytes around an unaligned write")?;
        let mut b = Buffer::with_alignment(l as usize, align, 7).map_err(|e| format!("with_alignment: {e}"))?;
        b.fill(SENTINEL);
        let d = done(r.one((Cmd::fs_read(a + off, l), b.into()))?, "unaligned file read", Some(l))?;
        compare(&data_bytes(&d), &want[off as usize..(off + l) as usize], a + off, Some(s2), "unaligned file read")?;
        ctx.oracle_check(a, &want, Some(s2), "after misaligned and unaligned writes")?;
        r.finish()?;
        Ok("buffered: misaligned buffers and byte offsets accepted and correct".into())
    }
}

/// The PCI (vfio) form of the alignment case: the controller reads and writes only this
/// device's DMA memory, through PRP entries (dword-aligned start). A buffer that is not
/// DMA memory (however aligned) is refused naming it, in both directions; a DMA buffer
/// starting 2 bytes in is refused for PRP alignment; one starting 512 bytes in is fine.
/// None of the refused requests writes anything.
fn pci_alignment(ctx: &Ctx, mut r: Runner<'_>, a: u64, len: u64, old: &[u8], s_old: u64) -> Res {
    let u = ctx.lba;
    let not_dma = |e: &Error, what: &str| -> Result<(), String> {
        ensure!(
            matches!(e, Error::BadCommand { .. }) && e.to_string().contains("not DMA memory"),
            "{what}: {e:?} ({e}); expected BadCommand saying the buffer is not DMA memory"
        );
        Ok(())
    };
    let mut heap = Buffer::alloc(len as usize, 4096).map_err(|e| format!("Buffer::alloc: {e}"))?;
    fill(&mut heap, a, seed());
    let (e, _) = refused(r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), heap.into()))?, "write from heap memory")?;
    not_dma(&e, "write from a page-aligned heap buffer")?;
    let heap = Buffer::alloc(len as usize, 4096).map_err(|e| format!("Buffer::alloc: {e}"))?;
    let (e, _) = refused(r.one((Cmd::read(ctx.nsid, a / u, ctx.nlb(len)), heap.into()))?, "read into heap memory")?;
    not_dma(&e, "read into a page-aligned heap buffer")?;
    let v = vec![ctx.alloc(4096)?, Buffer::alloc(len as usize, 4096).map_err(|e| format!("Buffer::alloc: {e}"))?];
    let (e, _) = refused(
        r.one((Cmd::write(ctx.nsid, a / u, ctx.nlb(4096 + len)), Data::Vec(v)))?,
        "vectored write, second buffer heap memory",
    )?;
    not_dma(&e, "vectored write whose second buffer is heap memory")?;
    // DMA memory at an offset: borrowed views into a buffer of this device.
    let mut dma = ctx.alloc(len + 4096)?;
    let p2 = std::ptr::NonNull::new(dma.as_mut_ptr().wrapping_add(2)).ok_or("null DMA buffer")?;
    // SAFETY: the `len` bytes from p2 lie inside `dma` (len + 4096 bytes), which nothing
    // else touches while the borrowed view is in use; the view stays in its ManuallyDrop.
    let mut off2 = unsafe { Buffer::borrow_raw(p2, len as usize) };
    let e = ctx
        .dev
        .pass(&Cmd::write(ctx.nsid, a / u, ctx.nlb(len)), std::slice::from_mut(&mut *off2))
        .err()
        .ok_or("a write from DMA memory 2 bytes into a page was accepted (PRP1 must be dword-aligned)")?;
    ensure!(e.to_string().contains("not 4-byte aligned"), "write from DMA memory 2 bytes in: {e}");
    let p512 = std::ptr::NonNull::new(dma.as_mut_ptr().wrapping_add(512)).ok_or("null DMA buffer")?;
    // SAFETY: as above: the `len` bytes from 512 lie inside the len + 4096 of `dma`.
    let mut off512 = unsafe { Buffer::borrow_raw(p512, len as usize) };
    ctx.dev
        .pass(&Cmd::read(ctx.nsid, a / u, ctx.nlb(len)), std::slice::from_mut(&mut *off512))
        .map_err(|e| format!("read into DMA memory 512 bytes in: {e}"))?;
    compare(&off512, old, a, Some(s_old), "read into DMA memory 512 bytes into a page")?;
    let got = read_range(&mut r, ctx, a, len, len)?;
    compare(&got, old, a, Some(s_old), "data after the refused writes")?;
    r.finish()?;
    Ok("heap buffers refused (not DMA memory); DMA memory 2 bytes in refused (PRP), 512 bytes in read".into())
}

/// Malformed requests are refused before any I/O with the error that says why.
pub(crate) fn case_bad_request(ctx: &Ctx) -> Res {
    let mut r = Runner::new(ctx, QD)?;
    let u = ctx.lba;
    let z = 800 * KIB;
    let s = seed();
    if !ctx.nil() {
        write_pattern(&mut r, ctx, z, 4 * u, 4 * u, s)?;
    }
    let s2 = seed();
    let mut bad_fs = Cmd::fs_read(0, u);
    bad_fs.sqe.opcode = 0xF5;
    ensure!(bad_fs.set == CmdSet::Fs, "Cmd::fs_read is not in the file set");
    type BadProbe = (&'static str, Cmd, Data, fn(&Error) -> bool);
    let mut probes: Vec<BadProbe> = vec![
        ("read of 4 LBAs into a 2-LBA buffer", Cmd::read(ctx.nsid, z / u, 4), ctx.sentinel(2 * u)?.into(), |e| {
            matches!(e, Error::BufferSize { .. })
        }),
        ("write of 4 LBAs from a 2-LBA buffer", Cmd::write(ctx.nsid, z / u, 4), ctx.pat(z, 2 * u, s2)?.into(), |e| {
            matches!(e, Error::BufferSize { .. })
        }),
        ("write with no buffer", Cmd::write(ctx.nsid, z / u, 1), Data::None, |e| matches!(e, Error::BufferSize { .. })),
        ("read of a namespace that does not exist", Cmd::read(ctx.nsid + 1, 0, 1), ctx.sentinel(u)?.into(), |e| {
            matches!(e, Error::BadCommand { .. })
        }),
        ("zero-length file read", Cmd::fs_read(0, 0), ctx.sentinel(u)?.into(), |e| {
            matches!(e, Error::BadCommand { .. })
        }),
        (
            "DSM of 2 ranges with a 16-byte buffer",
            Cmd::dsm(ctx.nsid, 2, true),
            Buffer::alloc(16, 16).map_err(|e| e.to_string())?.into(),
            |e| matches!(e, Error::BufferSize { .. }),
        ),
        (
            "admin command on the I/O path",
            Cmd::admin(Sqe { opcode: 0x06, nsid: 0, ..Sqe::default() }),
            ctx.sentinel(4096)?.into(),
            |e| matches!(e, Error::BadCommand { .. }),
        ),
        ("unknown file-set opcode", bad_fs, ctx.sentinel(u)?.into(), |e| matches!(e, Error::BadCommand { .. })),
    ];
    // On a generic char device every command is NVMe passthrough, and the kernel refuses a
    // command for another namespace itself (EINVAL, before the device sees it).
    let mut notes = Vec::new();
    let foreign = ctx.row.dev_kind() == DevKind::NvmeChar;
    if foreign {
        let i = probes.iter().position(|p| p.0 == "read of a namespace that does not exist").ok_or("no nsid probe")?;
        probes.remove(i);
        if ctx.nil() {
            notes
                .push("nil on a char device: the namespace check is the kernel's, which nil never reaches".to_string());
        } else {
            let what = "read of another namespace through a generic char device";
            match r.one((Cmd::read(ctx.nsid + 1, 0, 1), ctx.sentinel(u)?.into()))? {
                Outcome::Done { status, .. } => {
                    ensure!(!status.is_ok(), "{what} succeeded");
                    ensure!(status.errno() == Some(libc::EINVAL), "{what}: {status}, expected the kernel's EINVAL");
                    notes.push(format!("{what}: {status}"));
                }
                Outcome::Rejected(e, _) => {
                    ensure!(matches!(e, Error::BadCommand { .. }), "{what}: refused with {e:?}");
                    notes.push(format!("{what}: refused"));
                }
            }
        }
    }
    let count = probes.len();
    let submitted0 = r.submitted();
    for (what, cmd, data, ok) in probes {
        let before = data_bytes(&data);
        let (e, back) = refused(r.one((cmd, data))?, what)?;
        ensure!(ok(&e), "{what}: wrong error: {e:?}");
        ensure!(e.errno() == Some(libc::EINVAL), "{what}: errno() {:?}, expected EINVAL", e.errno());
        ensure!(data_bytes(&back) == before, "{what}: the handed-back buffer was changed");
    }
    ensure!(r.submitted() == submitted0, "refused submissions were counted as submitted");
    if !ctx.nil() {
        let got = read_range(&mut r, ctx, z, 4 * u, 4 * u)?;
        compare(&got, &pattern::at(z, 4 * u, s), z, Some(s), "data after refused requests")?;
    }
    r.finish()?;
    notes.insert(0, format!("{count} requests refused"));
    Ok(notes.join("; "))
}
