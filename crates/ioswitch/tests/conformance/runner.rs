//! Running the matrix: the watchdog and panic capture every case runs under, one cell
//! (open, refusal check, its cases), and the tally of passed, failed and skipped cases.

use crate::cases::cases_for;
use crate::cases::open::case_open;
use crate::cases::zones::next_zone;
use crate::ctx::Ctx;
use crate::probe::run_probes;
use crate::rows::{Col, Dealloc, Place, Row};
use crate::{CASE_LIMIT, DEV_BYTES, NOT_DONE, RAMDISK_URI};
use ioswitch::{AsyncIface, DevKind, Device, Error, Opts, SyncIface};
use ioswitch_testkit::lock;
use ioswitch_testkit::loopdev::detach_attached;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use std::{fs, panic};

pub(crate) static CURRENT: Mutex<Option<(String, Instant)>> = Mutex::new(None);
pub(crate) static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
pub(crate) static TALLY: Mutex<(u32, u32, u32)> = Mutex::new((0, 0, 0));
/// Every failure so far, one line each, for the final report (or the watchdog's).
pub(crate) static FAILS: Mutex<Vec<String>> = Mutex::new(Vec::new());
pub(crate) static SEED: AtomicU64 = AtomicU64::new(0x5EED);

/// A seed no other write of this run has used, so stale data is told from fresh.
pub(crate) fn seed() -> u64 {
    SEED.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn start_watchdog() {
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_millis(100));
        let hung = lock(&CURRENT).as_ref().filter(|(_, t)| t.elapsed() > CASE_LIMIT).map(|(n, _)| n.clone());
        if let Some(name) = hung {
            println!();
            println!("FAIL {name}: still running after {}s: a hang; stopping the run", CASE_LIMIT.as_secs());
            if let Some(e) = detach_attached() {
                println!("{e}");
            }
            let fails = lock(&FAILS);
            if !fails.is_empty() {
                println!("Failures before the hang:");
                for l in fails.iter() {
                    println!("{l}");
                }
            }
            let (p, f, s) = *lock(&TALLY);
            println!("{p} passed, {} failed, {s} skipped", f + 1);
            std::process::exit(1);
        }
    });
}

/// Runs `f` under the watchdog, turning a panic into an error.
pub(crate) fn guarded<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    lock(&PANICS).clear();
    *lock(&CURRENT) = Some((name.to_string(), Instant::now()));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    *lock(&CURRENT) = None;
    match r {
        Ok(r) => r,
        Err(_) => {
            let msgs = lock(&PANICS).join("; ");
            Err(format!("panicked: {msgs}"))
        }
    }
}

pub(crate) fn install_panic_hook() {
    panic::set_hook(Box::new(|info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "(no message)".to_string()
        };
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        lock(&PANICS).push(format!("{msg}{at}"));
    }));
}

// ---------------------------------------------------------------------------------------
// Cells
// ---------------------------------------------------------------------------------------

pub(crate) enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

#[derive(Clone, PartialEq)]
pub(crate) enum CellState {
    Pass,
    Fail,
    Skip(String),
    Na(String),
}

impl CellState {
    /// The word of the matrix and of the per-cell lines.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            CellState::Pass => "PASS",
            CellState::Fail => "FAIL",
            CellState::Skip(_) => "skip",
            CellState::Na(_) => "n/a",
        }
    }
}

pub(crate) struct Cell {
    pub(crate) state: CellState,
    pub(crate) cases: Vec<(&'static str, Verdict)>,
    pub(crate) ms: u128,
    /// Milliseconds per case, for the verbose listing.
    pub(crate) case_ms: Vec<u128>,
}

pub(crate) fn check_refusal(e: &Error, kind: DevKind, key: &str) -> Result<String, String> {
    match e {
        Error::Unsupported { kind: k, iface, why, .. } => {
            ensure!(*k == kind, "refused naming the device kind {k:?}, but it is {kind:?}: {e}");
            ensure!(*iface == key, "refused naming the interface {iface:?}, expected {key:?}: {e}");
            ensure!(!why.trim().is_empty(), "refused without a reason: {e}");
            ensure!(!why.contains(NOT_DONE), "refused as unfinished, not as impossible: {e}");
            Ok(why.clone())
        }
        other => Err(format!("expected Error::Unsupported at open, got {other:?} ({other})")),
    }
}

pub(crate) fn run_cell(row: &Row, col: Col, probe: Option<Result<String, String>>) -> Cell {
    let t0 = Instant::now();
    let name = format!("{} / {}", row.label, col.label());
    let mut cell = Cell { state: CellState::Pass, cases: Vec::new(), ms: 0, case_ms: Vec::new() };
    let place = match &row.place {
        Ok(p) => p.clone(),
        Err(why) if row.kind.pmem() && crate::rows::pmem_required() => {
            let why = format!("IOSWITCH_PMEM=1 in the guest, but the row is missing: {why}");
            cell.state = CellState::Fail;
            cell.cases.push(("all", Verdict::Fail(why)));
            return cell;
        }
        Err(why) if row.kind.dev_kind() == DevKind::NvmePci && crate::rows::guest() => {
            let why = format!("{} is set in the guest, but the row is missing: {why}", crate::rows::VFIO_PCI_ENV);
            cell.state = CellState::Fail;
            cell.cases.push(("all", Verdict::Fail(why)));
            return cell;
        }
        Err(why) => {
            cell.state = CellState::Skip(why.clone());
            cell.cases.push(("all", Verdict::Skip(why.clone())));
            return cell;
        }
    };
    let kind = row.kind.dev_kind();
    let mut ns = None;
    let (uri, extra, oracle, backing, cleanup) = match &place {
        Place::Dir(dir) => {
            let p =
                dir.join(format!("ioswitch-conformance-{}-{}-{}.img", std::process::id(), row.kind.tag(), col.label()));
            let _ = fs::remove_file(&p);
            (
                p.display().to_string(),
                format!("create=1,truncate=1,size={DEV_BYTES}"),
                Some(p.clone()),
                Some(p.clone()),
                Some(p),
            )
        }
        Place::Loop { dev, backing } => {
            (dev.display().to_string(), String::new(), Some(dev.clone()), Some(backing.clone()), None)
        }
        Place::Ram => (RAMDISK_URI.to_string(), String::new(), None, None, None),
        Place::DevDax(dev) => (dev.display().to_string(), String::new(), None, None, None),
        Place::Pci { addr, ns: n } => {
            ns = Some(n.clone());
            (addr.clone(), format!("nsid={}{}", n.nsid, crate::rows::pci_dma_opt()), None, None, None)
        }
        Place::Nvme { dev, ns: n } => {
            ns = Some(n.clone());
            // The namespace's block device, with O_DIRECT, witnesses both its rows.
            (dev.display().to_string(), String::new(), Some(n.block.clone()), None, None)
        }
    };
    let (col_extra, row_refusal) = col.row_specifics(row.kind, &place);
    let opts_s = [col.opts(), extra.as_str(), if row.kind.direct() { "direct=1" } else { "" }, col_extra]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    let expected = col.expected_refusal(kind, row.kind.direct()).or(row_refusal);
    let expect_refusal = expected.is_some();
    let opened = guarded(&format!("{name}: open"), || {
        let opts: Opts = opts_s.parse().map_err(|e| format!("option string {opts_s:?} does not parse: {e}"))?;
        Ok(Device::open(&uri, &opts))
    });
    let fail = |cell: &mut Cell, case: &'static str, msg: String| {
        cell.state = CellState::Fail;
        cell.cases.push((case, Verdict::Fail(msg)));
    };
    match opened {
        Err(msg) => fail(&mut cell, "open", msg),
        Ok(Ok(_)) if expect_refusal => fail(
            &mut cell,
            "open",
            format!("opening a {kind} with {opts_s:?} was accepted; the selection table must refuse it"),
        ),
        Ok(Err(e)) if expect_refusal => match check_refusal(&e, kind, expected.as_deref().unwrap_or_default()) {
            Ok(why) => {
                cell.state = CellState::Na(why.clone());
                cell.cases.push(("refused-at-open", Verdict::Pass(why)));
            }
            Err(msg) => fail(&mut cell, "refused-at-open", msg),
        },
        Ok(Err(e)) => fail(&mut cell, "open", format!("open {uri} with {opts_s:?}: {e}")),
        Ok(Ok(dev)) => {
            let g = dev.geometry().clone();
            let ifs = dev.interfaces();
            let passthru = match col.sync() {
                Some(s) => s == SyncIface::Nvme,
                None => match col.async_iface() {
                    AsyncIface::IoUringCmd | AsyncIface::Vfio => true,
                    AsyncIface::Emu | AsyncIface::Thrpool => ifs.sync == Some(SyncIface::Nvme),
                    _ => false,
                },
            };
            // A devdax device is as large as sysfs says (read here, not by the library).
            let bytes = match (&place, ns.as_ref()) {
                (Place::DevDax(d), _) => crate::rows::devdax_size(d),
                (_, Some(n)) => n.bytes,
                _ => DEV_BYTES,
            };
            let dealloc = match ns.as_ref().map(|n| &n.dealloc) {
                None => Dealloc::Zeroes,
                Some(Ok(d)) => d.clone(),
                Some(Err(e)) => Dealloc::Unreadable(e.clone()),
            };
            let zone = ns.as_ref().filter(|n| n.nr_zones > 0).map_or(0, |n| next_zone(n.nr_zones));
            let ctx = Ctx {
                nsid: dev.ident().nsid,
                dev,
                col,
                row: row.kind,
                uri: uri.clone(),
                oracle,
                backing,
                oracle_direct: ns.is_some(),
                row_opts: extra.clone(),
                lba: g.lba_size as u64,
                nlbas: g.nlbas,
                bytes,
                span: bytes.min(DEV_BYTES),
                dealloc,
                passthru,
                ns,
                zone,
                shared: Mutex::new(None),
            };
            match guarded(&format!("{name}: open"), || case_open(&ctx)) {
                Ok(note) => cell.cases.push(("open", Verdict::Pass(note))),
                Err(msg) => fail(&mut cell, "open", msg),
            }
            let cases = cases_for(row.kind, col);
            if cell.state == CellState::Fail {
                let n = cases.len();
                if let Some((_, Verdict::Fail(m))) = cell.cases.last_mut() {
                    let _ = write!(m, " [the other {n} cases did not run]");
                }
            } else {
                for (cname, f) in cases {
                    let tc = Instant::now();
                    match guarded(&format!("{name}: {cname}"), || f(&ctx)) {
                        Ok(note) => cell.cases.push((cname, Verdict::Pass(note))),
                        Err(msg) => fail(&mut cell, cname, msg),
                    }
                    cell.case_ms.push(tc.elapsed().as_millis());
                }
                match probe {
                    Some(Ok(note)) => cell.cases.push(("callback-panic", Verdict::Pass(note))),
                    Some(Err(msg)) => fail(&mut cell, "callback-panic", msg),
                    None => {}
                }
                if cell.case_ms.len() < cell.cases.len() - 1 {
                    cell.case_ms.push(0);
                }
            }
        }
    }
    if let Some(p) = cleanup {
        let _ = fs::remove_file(p);
    }
    cell.ms = t0.elapsed().as_millis();
    cell
}

pub(crate) fn tally(cell: &Cell, t: &mut (u32, u32, u32)) {
    for (_, v) in &cell.cases {
        match v {
            Verdict::Pass(_) => t.0 += 1,
            Verdict::Fail(_) => t.1 += 1,
            Verdict::Skip(_) => t.2 += 1,
        }
    }
}

/// The results of a run: every cell, by (row index, column index in the row's columns).
pub(crate) type Results = BTreeMap<(usize, usize), Cell>;

/// Runs every cell of `rows`, printing a line per cell as it ends (with every case when
/// `verbose`), counting the cases and keeping the failures for the report.
pub(crate) fn run_matrix(rows: &[Row], verbose: bool) -> Results {
    // The callback-panic check runs once per async interface, on the first file row
    // that can hold its files; its verdict is a case of that row's cells.
    let probe_row = rows.iter().position(|r| matches!(r.place, Ok(Place::Dir(_))));
    let probes: Vec<(Col, Result<String, String>)> = match probe_row.map(|i| &rows[i]) {
        Some(Row { place: Ok(Place::Dir(dir)), kind, .. }) => run_probes(dir, kind.direct()),
        _ => Vec::new(),
    };
    let mut results: BTreeMap<(usize, usize), Cell> = BTreeMap::new();
    for (ri, row) in rows.iter().enumerate() {
        for (ci, &col) in row.kind.cols().iter().enumerate() {
            let probe = if Some(ri) == probe_row { probes.iter().find(|(c, _)| *c == col) } else { None };
            let cell = run_cell(row, col, probe.map(|(_, v)| v.clone()));
            {
                let mut t = lock(&TALLY);
                tally(&cell, &mut t);
            }
            let state = cell.state.label();
            println!("  {:<30} {:<10} {state:<5} {} cases, {} ms", row.label, col.label(), cell.cases.len(), cell.ms);
            if verbose {
                let skip = cell.cases.len() - cell.case_ms.len();
                for (i, (name, v)) in cell.cases.iter().enumerate() {
                    let ms = i.checked_sub(skip).and_then(|k| cell.case_ms.get(k)).map(|m| format!(" ({m} ms)"));
                    let ms = ms.unwrap_or_default();
                    match v {
                        Verdict::Pass(n) => println!("      ok   {name}{ms} {n}"),
                        Verdict::Fail(m) => println!("      FAIL {name}: {m}"),
                        Verdict::Skip(m) => println!("      skip {name}: {m}"),
                    }
                }
            }
            let at = format!("{} / {}", row.label, col.label());
            for (name, v) in &cell.cases {
                if let Verdict::Fail(m) = v {
                    let tag = if m.contains(NOT_DONE) { " [not done]" } else { "" };
                    lock(&FAILS).push(format!("  FAIL {at}: {name}{tag}: {m}"));
                }
            }
            results.insert((ri, ci), cell);
        }
    }
    results
}
