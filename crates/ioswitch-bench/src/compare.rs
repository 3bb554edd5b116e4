//! `ioswitch bench compare`: one job over several interfaces, side by side.
//!
//! Each interface gets its own copy of the job (`ioengine=ioswitch` with the interface
//! named in `ioswitch_opts`); the copies run one after another, interleaved over the
//! repetitions (A B C A B C …) so that slow drift of a noisy machine spreads over every
//! interface alike. Every figure in the table is the median over the repetitions; IOPS
//! also shows the spread (min–max).
//!
//! With no arguments `ioswitch bench` runs [`default_run`]: the interfaces of
//! [`Iface::DEFAULT_SET`] this machine can run (those that serve a regular file, less
//! `mmap` and `pmem`), 4 KiB random reads on a temporary 64 MiB file, about fifteen
//! seconds in all.
//!
//! The measurement is [`crate::measure`]'s: one [`Point`] per interface, as a
//! sweep has one per grid point.

use crate::error::BenchError;
use crate::jobfile::{JobSpec, Rw, SizeSpec};
use crate::measure::{self, describe, spec_for, target_of, Item, Point, Sample};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

// The CLI's bench glue and the overhead benchmark (both being reworked on another branch)
// reach these through this module.
pub(crate) use crate::measure::{fmt_count, Skipped, Spread, Table, TempDir};
pub use crate::measure::{parse_interfaces, Iface};

/// The result of [`compare`].
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The job, in words (`randread bs=4KiB iodepth=16 …`).
    pub job: String,
    /// The target (file or device).
    pub target: String,
    /// Repetitions per interface.
    pub reps: u32,
    /// One point per interface measured, in the order asked.
    pub rows: Vec<Point>,
    /// Interfaces left out (only with `all` or in the default run).
    pub skipped: Vec<Skipped>,
    /// Remarks about the setup that matter for reading the figures.
    pub notes: Vec<String>,
}

/// Runs `base` on every interface in `interfaces`, `reps` times interleaved, and
/// tabulates medians. An interface that cannot open the target (or fails while running)
/// is an error naming it, unless `skip_unavailable` (`all`): then it is left out and the
/// reason kept in [`Comparison::skipped`]. `say` receives progress messages.
pub fn compare(
    base: &JobSpec,
    interfaces: &[Iface],
    reps: u32,
    skip_unavailable: bool,
    say: &mut dyn FnMut(&str),
) -> Result<Comparison, BenchError> {
    let items: Vec<Item> = interfaces.iter().map(|&iface| Item { iface, spec: spec_for(base, iface) }).collect();
    let (rows, skipped) = measure::measure(&items, reps, skip_unavailable, say)?;
    if rows.is_empty() {
        return Err(measure::none_ran(base, skipped));
    }
    let mut notes = Vec::new();
    if base.sqthread_poll || base.hipri || base.fixedbufs || base.registerfiles {
        notes.push("io_uring tunables of the job apply to io_uring only".into());
    }
    if rows.iter().any(|r| r.iface.is_sync()) && rows.iter().any(|r| !r.iface.is_sync()) && base.iodepth > 1 {
        notes.push(format!("sync interfaces run at queue depth 1, async ones at {}", base.iodepth));
    }
    Ok(Comparison { job: describe(base), target: target_of(base), reps, rows, skipped, notes })
}

impl Comparison {
    /// The aligned table, with the job on top and skipped interfaces and notes below.
    pub fn to_text(&self) -> String {
        const COLUMNS: [&str; 12] = [
            "IOPS",
            "IOPS min–max",
            "BW",
            "lat mean",
            "p50",
            "p99",
            "p99.9",
            "slat",
            "clat",
            "thread usr/sys",
            "process usr/sys",
            "syscalls/IO",
        ];
        let rows = self.rows.iter().map(|r| (vec![r.iface.to_string(), r.qd.to_string()], &r.summary));
        let t = measure::results_table(&measure::TEXT_COLUMNS, &["interface", "qd"], &COLUMNS, rows);
        let mut out = measure::heading("compare", &self.job, &self.target, self.reps);
        out += &t.render();
        out += "\nCPU in % of one CPU: thread = the job thread over its run time; process = the whole \
                process (helper and kernel worker threads included) over the run's wall time.\n";
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        for s in &self.skipped {
            out += &format!("skipped {}: {}\n", s.iface, s.reason);
        }
        out
    }

    /// Everything, with per-repetition samples.
    pub fn to_json(&self) -> Value {
        json!({
            "job": self.job,
            "target": self.target,
            "reps": self.reps,
            "interfaces": self.rows.iter().map(|r| json!({
                "interface": r.iface.as_str(),
                "served_by": r.interface,
                "mode": if r.iface.is_sync() { "sync" } else { "async" },
                "iodepth": r.qd,
                "bs": r.bs,
                "summary": r.summary.to_json(),
                "samples": r.samples.iter().map(Sample::to_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "skipped": self.skipped.iter().map(|s| json!({"interface": s.iface, "reason": s.reason})).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }
}

/// Size of the default run's file.
pub const DEFAULT_FILE_BYTES: u64 = 64 << 20;
/// Measured time of one default run.
pub const DEFAULT_RUNTIME: Duration = Duration::from_millis(600);
/// Ramp time of one default run (queues and caches settle; not measured).
pub const DEFAULT_RAMP: Duration = Duration::from_millis(50);
/// Repetitions of the default run.
pub const DEFAULT_REPS: u32 = 3;

/// Whether `dir` lies on tmpfs (io_uring punts every tmpfs read to a worker thread, so
/// its figures there say little about the library).
pub(crate) fn on_tmpfs(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: statfs is plain data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path and st a valid out pointer for the call.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    r == 0 && st.f_type as i64 == TMPFS_MAGIC
}

/// Where the default run should put its temporary file: the system's temporary
/// directory unless it is on tmpfs, else `/var/tmp` unless that is on tmpfs too, else
/// the current directory.
pub fn default_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    if !on_tmpfs(&tmp) {
        return tmp;
    }
    let var = PathBuf::from("/var/tmp");
    if var.is_dir() && !on_tmpfs(&var) {
        return var;
    }
    PathBuf::from(".")
}

/// The default job of `ioswitch bench`: 4 KiB random reads over `file` at queue depth 16
/// (sync interfaces: 1), time based.
pub fn default_job(file: &Path) -> JobSpec {
    let mut s = JobSpec::new("ioswitch-default");
    s.filename = vec![file.display().to_string()];
    s.size = Some(SizeSpec::Bytes(DEFAULT_FILE_BYTES));
    s.rw = Rw::RandRead;
    s.iodepth = 16;
    s.time_based = true;
    s.runtime = Some(DEFAULT_RUNTIME);
    s.ramp_time = Some(DEFAULT_RAMP);
    // Page-cache hits on purpose: the comparison is of the interfaces' own costs.
    s.invalidate = false;
    s
}

/// `ioswitch bench` with no arguments: the [`default_job`] on a temporary 64 MiB file in
/// a new directory under `dir` (best on a disk file system, not tmpfs), over every
/// interface of [`Iface::DEFAULT_SET`] this machine can run (others are skipped with the
/// reason), [`DEFAULT_REPS`] repetitions interleaved, about fifteen seconds in all. The
/// temporary directory is removed afterwards, also on failure.
pub fn default_run(dir: &Path, say: &mut dyn FnMut(&str)) -> Result<Comparison, BenchError> {
    let tmp = TempDir::new(dir)?;
    let file = tmp.path().join("data");
    let base = default_job(&file);
    let mut c = compare(&base, &Iface::DEFAULT_SET, DEFAULT_REPS, true, say)?;
    c.target = format!("a temporary {} file in {}", ioswitch::units::fmt_size(DEFAULT_FILE_BYTES), dir.display());
    if on_tmpfs(dir) {
        c.notes.push(format!(
            "{} is on tmpfs: io_uring hands every tmpfs read to a kernel worker thread; use a disk file system",
            dir.display()
        ));
    }
    c.notes.push("buffered reads of a file in the page cache: the figures are the interfaces' own costs".into());
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Summary;
    use ioswitch::{AsyncIface, SyncIface};

    fn sample(iops: f64, lat: f64, slat: Option<f64>) -> Sample {
        Sample {
            ios: 1000,
            runtime_ns: 1_000_000,
            iops,
            bw: iops * 4096.0,
            lat_mean: lat,
            lat_p50: lat,
            lat_p99: lat * 2.0,
            lat_p999: lat * 3.0,
            slat_mean: slat,
            clat_mean: lat - slat.unwrap_or(0.0),
            usr: 20.0,
            sys: 70.0,
            proc_usr: 21.0,
            proc_sys: 72.0,
            syscalls_per_io: 1.0,
            ctx_per_io: 0.0,
        }
    }

    fn hand_built() -> Comparison {
        let rows = vec![
            (Iface::Sync(SyncIface::Psync), 1, vec![sample(600e3, 1500.0, None), sample(640e3, 1400.0, None)]),
            (
                Iface::Async(AsyncIface::IoUring),
                16,
                vec![sample(240e3, 65e3, Some(1e3)), sample(250e3, 64e3, Some(1e3)), sample(230e3, 66e3, Some(1e3))],
            ),
        ]
        .into_iter()
        .map(|(iface, iodepth, samples)| Point {
            iface,
            interface: iface.to_string(),
            qd: iodepth,
            bs: 4096,
            summary: Summary::of(&samples),
            samples,
        })
        .collect();
        Comparison {
            job: "randread bs=4KiB iodepth=16".into(),
            target: "/tmp/x".into(),
            reps: 3,
            rows,
            skipped: vec![Skipped { iface: "block".into(), reason: "needs a block device".into() }],
            notes: vec![],
        }
    }

    #[test]
    fn the_table_has_one_aligned_line_per_interface_and_lists_skips() {
        let text = hand_built().to_text();
        let lines: Vec<&str> = text.lines().collect();
        let head = lines.iter().position(|l| l.starts_with("interface")).unwrap();
        assert!(lines[head + 1].starts_with("psync "), "{text}");
        assert!(lines[head + 2].starts_with("io_uring "), "{text}");
        // Right-aligned columns end at the same character position.
        let width = |l: &str| l.chars().count();
        assert_eq!(width(lines[head]), width(lines[head + 1]).max(width(lines[head + 2])));
        assert!(text.contains("240.0k"), "median IOPS of io_uring: {text}");
        assert!(text.contains("230.0k–250.0k"), "IOPS spread: {text}");
        assert!(text.contains("skipped block: needs a block device"), "{text}");
        assert!(lines[head + 1].contains(" - "), "psync has no slat: {text}");
        let columns = "interface  qd  IOPS  IOPS min–max  BW  lat mean  p50  p99  p99.9  slat  clat  thread usr/sys  \
                       process usr/sys  syscalls/IO";
        assert_eq!(lines[head].split_whitespace().collect::<Vec<_>>(), columns.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn json_carries_summaries_samples_and_skips() {
        let v = hand_built().to_json();
        assert_eq!(v["interfaces"].as_array().unwrap().len(), 2);
        assert_eq!(v["interfaces"][1]["summary"]["iops"]["median"], 240e3);
        assert_eq!(v["interfaces"][1]["samples"].as_array().unwrap().len(), 3);
        assert!(v["interfaces"][0]["summary"]["slat_mean_ns"].is_null());
        assert_eq!(v["skipped"][0]["interface"], "block");
    }

    #[test]
    fn a_tiny_real_comparison_of_nil_and_emu_runs_and_cleans_up() {
        let tmp = TempDir::new(&std::env::temp_dir()).unwrap();
        let kept = tmp.path().to_path_buf();
        let mut base = JobSpec::new("tiny");
        base.filename = vec![tmp.path().join("f").display().to_string()];
        base.size = Some(SizeSpec::Bytes(1 << 20));
        base.rw = Rw::RandRead;
        base.iodepth = 4;
        base.time_based = true;
        base.runtime = Some(Duration::from_millis(40));
        let ifaces = [Iface::Async(AsyncIface::Nil), Iface::Async(AsyncIface::Emu), Iface::Sync(SyncIface::Block)];
        let c = compare(&base, &ifaces, 2, true, &mut |_| {}).unwrap();
        assert_eq!(c.rows.len(), 2, "{c:?}");
        assert_eq!(c.skipped.len(), 1, "a regular file has no block interface: {c:?}");
        for r in &c.rows {
            assert_eq!(r.samples.len(), 2);
            assert!(r.summary.iops.median > 0.0);
            assert_eq!(r.qd, 4);
        }
        assert_eq!(c.rows[0].interface, "nil");
        assert!(c.to_text().contains("emu"));
        // Without `all`, an interface that cannot open the target is an error naming it.
        let e = compare(&base, &ifaces, 1, false, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("block"), "{e}");
        drop(tmp);
        assert!(!kept.exists());
    }

    #[test]
    fn zero_repetitions_and_a_missing_directory_are_errors() {
        let base = JobSpec::new("j");
        assert!(compare(&base, &[Iface::Async(AsyncIface::Nil)], 0, false, &mut |_| {})
            .unwrap_err()
            .to_string()
            .contains("0"));
        let e = default_run(Path::new("/nonexistent/ioswitch"), &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/ioswitch"), "{e}");
    }
}
