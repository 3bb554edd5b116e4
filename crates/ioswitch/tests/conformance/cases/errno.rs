//! Error mapping: what open modes forbid, and OS failures the library cannot foresee.

use crate::ctx::{data_bytes, done, read_range, write_pattern, Ctx, Outcome, Runner};
use crate::rows::RowKind;
use crate::runner::seed;
use crate::Res;
use ioswitch::{Cmd, Data, DevKind, Device, Error, Opts, SyncIface};
use ioswitch_testkit::pattern;
use ioswitch_testkit::pattern::compare;
use std::fs;
use std::sync::Mutex;

/// Opens the cell's device again with one more option.
pub(crate) fn reopen(ctx: &Ctx, extra: &str) -> Result<(Ctx, String), String> {
    // The row's pmem_force=1 (the /dev/shm row of the pmem column) carries over.
    let force = if ctx.dev.opts().pmem_force { "pmem_force=1" } else { "" };
    let pci = if ctx.row.dev_kind() == DevKind::NvmePci { ctx.row_opts.as_str() } else { "" };
    let opts_s = [ctx.col.opts(), pci, if ctx.row.direct() { "direct=1" } else { "" }, force, extra]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    let opts: Opts = opts_s.parse().map_err(|e| format!("option string {opts_s:?}: {e}"))?;
    let dev = Device::open(&ctx.uri, &opts).map_err(|e| format!("open {} with {opts_s:?}: {e}", ctx.uri))?;
    let c = Ctx {
        dev,
        col: ctx.col,
        row: ctx.row,
        uri: ctx.uri.clone(),
        oracle: None,
        backing: None,
        oracle_direct: false,
        row_opts: ctx.row_opts.clone(),
        lba: ctx.lba,
        nlbas: ctx.nlbas,
        nsid: ctx.nsid,
        bytes: ctx.bytes,
        span: ctx.span,
        dealloc: ctx.dealloc.clone(),
        passthru: ctx.passthru,
        ns: ctx.ns.clone(),
        zone: ctx.zone,
        shared: Mutex::new(None),
    };
    Ok((c, opts_s))
}

/// A command the open mode forbids is refused before any I/O, or fails with the errno
/// the OS gave; either way nothing is written.
pub(crate) fn forbidden(o: Outcome, what: &str, errno: i32) -> Result<String, String> {
    match o {
        Outcome::Done { status, .. } if status.is_ok() => Err(format!("{what} succeeded")),
        Outcome::Done { status, .. } => {
            ensure!(status.errno() == Some(errno), "{what}: failed with {status}, expected errno {errno}");
            ensure!(
                status.sc() == 0x15 && status.dnr(),
                "{what}: errno {errno} should map to 0x15 Operation Denied + DNR, got {status}"
            );
            Ok(format!("failed: {status}"))
        }
        Outcome::Rejected(e, _) => {
            ensure!(
                matches!(e, Error::BadCommand { .. }),
                "{what}: refused with {e:?}, expected BadCommand or errno {errno}"
            );
            Ok("refused before I/O".into())
        }
    }
}

/// Error mapping. Open modes: a write on a rdonly=1 device and a read on a wronly=1 one are
/// refused (or fail with EBADF as Operation Denied) and write nothing. An OS failure the
/// library cannot foresee (the file shrank under an open device, so a read finds EOF)
/// comes back as a failed status with the errno kept, on every interface alike.
pub(crate) fn case_errno(ctx: &Ctx) -> Res {
    if ctx.pci() {
        // A controller is one VFIO group, which one process opens once: a second open
        // while the cell's device is open must fail, saying so (rdonly=1 and wronly=1
        // cannot be opened beside it; the PCI rows do not check them). With dma=uio the
        // driver's lock on the controller's config file stands in for the group.
        let e = match reopen(ctx, "rdonly=1") {
            Ok(_) => return Err("a second open of the PCI device in this process was accepted".into()),
            Err(e) => e,
        };
        let (held, what) = if ctx.row_opts.contains("dma=uio") {
            ("flock on its sysfs config file", "the controller's lock (dma=uio)")
        } else {
            ("/dev/vfio/", "the VFIO group's open")
        };
        ensure!(
            e.contains(held) && e.contains("busy"),
            "a second open of the PCI device: {e}; expected {what} failing as busy"
        );
        return Ok(format!("second open refused: {e} (rdonly/wronly not checked)"));
    }
    let mut r = Runner::new(ctx, 4)?;
    let u = ctx.lba;
    let s = seed();
    write_pattern(&mut r, ctx, 0, 2 * u, 2 * u, s)?;
    let mut notes = Vec::new();
    {
        let (ro, opts_s) = reopen(ctx, "rdonly=1")?;
        let mut rr = Runner::new(&ro, 4)?;
        let d = done(rr.one(ro.r(0, u)?)?, "read on a rdonly=1 device", Some(u))?;
        // Another open of a ramdisk size is another ramdisk: it starts zeroed.
        let want = if ctx.row == RowKind::Ram { vec![0; u as usize] } else { pattern::at(0, u, s) };
        compare(&data_bytes(&d), &want, 0, Some(s), "read on a rdonly=1 device")?;
        let what = format!("write on a device opened with {opts_s:?}");
        notes.push(format!("rdonly write {}", forbidden(rr.one(ro.w(0, u, seed())?)?, &what, libc::EBADF)?));
        let what = format!("file trim on a device opened with {opts_s:?}");
        forbidden(rr.one((Cmd::fs_trim(0, u), Data::None))?, &what, libc::EBADF)?;
        let what = format!("write zeroes on a device opened with {opts_s:?}");
        forbidden(rr.one((Cmd::write_zeroes(ctx.nsid, 0, 1), Data::None))?, &what, libc::EBADF)?;
        rr.finish()?;
    }
    // The sync interface in use (a devdax device's emu/thrpool/nil cells run on pmem).
    let mapped = matches!(ctx.dev.interfaces().sync, Some(SyncIface::Mmap | SyncIface::Pmem));
    if mapped {
        // A mapping needs read access: a write-only open is refused, with the reason.
        let e = reopen(ctx, "wronly=1").err().ok_or_else(|| format!("{} accepted wronly=1", ctx.col.opts()))?;
        ensure!(e.contains("read access"), "wronly=1 with {} refused without the reason: {e}", ctx.col.opts());
        notes.push("wronly refused at open".into());
    } else {
        let (wo, opts_s) = reopen(ctx, "wronly=1")?;
        let mut rw = Runner::new(&wo, 4)?;
        let what = format!("read on a device opened with {opts_s:?}");
        notes.push(format!("wronly read {}", forbidden(rw.one(wo.r(0, u)?)?, &what, libc::EBADF)?));
        rw.finish()?;
    }
    let got = read_range(&mut r, ctx, 0, 2 * u, 2 * u)?;
    compare(&got, &pattern::at(0, 2 * u, s), 0, Some(s), "data after the forbidden commands")?;

    if mapped {
        // Touching a mapping past the end of a file that shrank raises SIGBUS (as for any
        // mmap user); sync=mmap and sync=pmem document it and this case does not provoke it.
        notes.push("shrunk file not exercised: a mapping faults (SIGBUS) past a shrunk file's end".into());
    } else if ctx.row.dev_kind() == DevKind::File {
        let path = ctx.backing.clone().ok_or("a file row without a path")?;
        let f = fs::OpenOptions::new().write(true).open(&path).map_err(|e| format!("std open: {e}"))?;
        let end = ctx.end();
        f.set_len(end - 4 * u).map_err(|e| format!("shrink the file: {e}"))?;
        let o = ctx.r(end - 2 * u, 2 * u).and_then(|op| r.one(op));
        // A read that starts before the new end and runs past it moves only part of its
        // bytes: that is a failure too, never a success with a smaller result (callers
        // such as the fio engine rely on it: success means every byte moved).
        let straddle = ctx.r(end - 5 * u, 2 * u).and_then(|op| r.one(op));
        let restored = f.set_len(end).map_err(|e| format!("restore the file size: {e}"));
        match straddle? {
            Outcome::Done { status, result, .. } if status.is_ok() => {
                return Err(format!(
                    "a read of 2 LBAs across the end of a file that shrank under the device succeeded \
                     (result {result} of {} bytes); a short transfer must fail with EIO",
                    2 * u
                ));
            }
            Outcome::Done { status, .. } => {
                ensure!(
                    status.errno() == Some(libc::EIO),
                    "a short read across a shrunk file's end failed with {status}, not EIO"
                );
            }
            Outcome::Rejected(e, _) => {
                return Err(format!("a read across a shrunk file's end was refused before I/O: {e}"))
            }
        }
        let status = match o? {
            Outcome::Done { status, result, .. } if status.is_ok() => {
                return Err(format!(
                    "a read of 2 LBAs past the end of a file that shrank under the device succeeded (result {result}); \
                     psync reports this as EIO"
                ));
            }
            Outcome::Done { status, .. } => status,
            Outcome::Rejected(e, _) => {
                return Err(format!("a read past a shrunk file's end was refused before I/O: {e}"))
            }
        };
        restored?;
        let errno = status.errno().ok_or_else(|| format!("the failure carries no errno: {status}"))?;
        let mapped = ioswitch::spec::errno_to_status(errno);
        ensure!(
            status.code() == mapped.code() && status.dnr() == mapped.dnr(),
            "errno {errno} came back as {status}, but the mapping table says {mapped}"
        );
        notes.push(format!("read past a shrunk file: {status}"));
    }
    r.finish()?;
    Ok(notes.join("; "))
}
