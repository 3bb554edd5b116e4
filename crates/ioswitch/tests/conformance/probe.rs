//! A completion callback that panics, checked in a child process (it may hang).

use crate::rows::Col;
use crate::runner::install_panic_hook;
use crate::DEV_BYTES;
use ioswitch::{Cmd, Device, Opts};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use std::{fs, panic};

pub(crate) const PROBE_ENV: &str = "IOSWITCH_CONFORMANCE_PROBE";
/// How long all the children together may take before they count as hung.
pub(crate) const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// The child's side: a drain whose callback panics must propagate the panic, the queue
/// must drop (during the unwinding) without hanging, and the device must work after.
/// Exit status 0: all well; 2: setup failed; 3: the panic was swallowed; 4: the device
/// failed afterwards. A hang is the parent's to see.
pub(crate) fn probe_main(spec: &str) -> i32 {
    install_panic_hook();
    let Some((uri, opts)) = spec.split_once('\t') else { return 2 };
    let run = || -> Result<i32, String> {
        let opts: Opts = opts.parse().map_err(|e| format!("{e}"))?;
        let dev = Device::open(uri, &opts).map_err(|e| format!("open: {e}"))?;
        let lba = dev.geometry().lba_size as u64;
        let nsid = dev.ident().nsid;
        let mut q = dev.queue(4).map_err(|e| format!("queue: {e}"))?;
        for t in 0..3u64 {
            let b = dev.alloc(lba as usize).map_err(|e| format!("alloc: {e}"))?;
            q.submit(&Cmd::read(nsid, t, 1), b.into(), t).map_err(|e| format!("submit: {e}"))?;
        }
        let r = panic::catch_unwind(AssertUnwindSafe(move || {
            let _ = q.drain(|_| panic!("a completion callback panics"));
        }));
        if r.is_ok() {
            eprintln!("the callback's panic did not reach the caller of drain");
            return Ok(3);
        }
        let mut q = dev.queue(4).map_err(|e| format!("queue after the panic: {e}"))?;
        let b = dev.alloc(lba as usize).map_err(|e| format!("alloc: {e}"))?;
        q.submit(&Cmd::read(nsid, 0, 1), b.into(), 9).map_err(|e| format!("submit after the panic: {e}"))?;
        let mut ok = false;
        q.drain(|c| ok = c.status.is_ok() && c.tag == 9).map_err(|e| format!("drain after the panic: {e}"))?;
        if !ok {
            eprintln!("a read after the panic failed");
            return Ok(4);
        }
        Ok(0)
    };
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            2
        }
    }
}

/// Starts one child per async interface on a file in `dir`, waits for all of them (at
/// most PROBE_LIMIT together), and says how each went.
pub(crate) fn run_probes(dir: &Path, direct: bool) -> Vec<(Col, Result<String, String>)> {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return vec![(Col::Emu, Err(format!("cannot find the test binary to re-run: {e}")))],
    };
    let mut kids = Vec::new();
    // vfio drives no file (its probe would be its refusal, which the cells check).
    for col in Col::ALL.into_iter().filter(|c| c.sync().is_none() && *c != Col::Vfio) {
        let file = dir.join(format!("ioswitch-conformance-{}-probe-{}.img", std::process::id(), col.label()));
        let made = fs::File::create(&file).and_then(|f| f.set_len(DEV_BYTES));
        let opts = if direct { format!("{},direct=1", col.opts()) } else { col.opts().to_string() };
        let child = made.map_err(|e| format!("create {}: {e}", file.display())).and_then(|_| {
            Command::new(&exe)
                .env(PROBE_ENV, format!("{}\t{opts}", file.display()))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("spawn {}: {e}", exe.display()))
        });
        kids.push((col, file, child));
    }
    let deadline = Instant::now() + PROBE_LIMIT;
    let mut out = Vec::new();
    for (col, file, child) in kids {
        let verdict = child.and_then(|mut ch| {
            let status = loop {
                match ch.try_wait() {
                    Ok(Some(st)) => break Some(st),
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                    Ok(None) | Err(_) => break None,
                }
            };
            let Some(st) = status else {
                let _ = ch.kill();
                let _ = ch.wait();
                return Err(format!(
                    "hang: a completion callback that panics inside drain leaves the queue unable to drop \
                     (the child was still running after {} s and was killed)",
                    PROBE_LIMIT.as_secs()
                ));
            };
            let mut err = String::new();
            if let Some(mut e) = ch.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let err = err.trim().to_string();
            match st.code() {
                Some(0) => Ok("the panic propagated, the queue dropped, the device works".into()),
                Some(3) => Err(format!("the panic was swallowed: {err}")),
                Some(4) => Err(format!("the device failed after the panic: {err}")),
                Some(c) => Err(format!("child exited with {c}: {err}")),
                None => Err(format!("child killed by a signal ({st}): {err}")),
            }
        });
        let _ = fs::remove_file(&file);
        out.push((col, verdict));
    }
    out
}
