//! `ioswitch bench sweep`: one job over a grid of interfaces × queue depths × block
//! sizes, written as CSV, JSON and SVG plots in the style of the xNVMe paper's figures
//! (latency vs queue depth, latency vs block size, IOPS vs queue depth; one line per
//! interface).
//!
//! The grid runs interleaved: at each (block size, queue depth) point every interface
//! runs once, then the next point, …, and the whole grid again for every repetition.
//! Sync interfaces have no queue: they run once per block size, at queue depth 1, and
//! show as one point on the queue-depth plots.

use crate::error::{BenchError, ListKind};
use crate::jobfile::JobSpec;
use crate::measure::{self, Iface, Item, Point, Sample, Skipped, CSV_COLUMNS, TEXT_COLUMNS};
use crate::plot::{LineChart, Scale, Series, TickFormat};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Queue depths of a sweep when none are given.
pub const DEFAULT_QDS: [u32; 6] = [1, 2, 4, 8, 16, 32];
/// Block sizes of a sweep when none are given.
pub const DEFAULT_BSS: [u64; 4] = [512, 4096, 32768, 131072];
/// Deepest queue a sweep accepts (the library's limit).
pub const MAX_QD: u32 = 4096;

/// What to sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPlan {
    /// Interfaces, in legend order.
    pub interfaces: Vec<Iface>,
    /// Queue depths (async interfaces).
    pub qds: Vec<u32>,
    /// Block sizes, bytes.
    pub bss: Vec<u64>,
    /// Repetitions of the whole grid.
    pub reps: u32,
    /// Leave out interfaces that cannot serve the target (`all`) instead of failing.
    pub skip_unavailable: bool,
}

impl Default for SweepPlan {
    fn default() -> Self {
        SweepPlan {
            interfaces: Iface::DEFAULT_SET.to_vec(),
            qds: DEFAULT_QDS.to_vec(),
            bss: DEFAULT_BSS.to_vec(),
            reps: 3,
            skip_unavailable: true,
        }
    }
}

/// Parses `1,2,4,8` (queue depths 1..=4096, no repeats).
pub fn parse_qds(list: &str) -> Result<Vec<u32>, BenchError> {
    measure::parse_unique(
        list,
        |item| {
            let qd: u32 = item.parse().map_err(|source| BenchError::QdNotANumber {
                list: list.to_string(),
                item: item.to_string(),
                source,
            })?;
            if qd == 0 || qd > MAX_QD {
                return Err(BenchError::QdRange { list: Some(list.to_string()), qd, max: MAX_QD });
            }
            Ok(qd)
        },
        |_, qd| BenchError::Twice { kind: ListKind::QueueDepths, list: list.to_string(), item: qd.to_string() },
    )
}

/// Parses `512,4k,32k,128k` (sizes with fio's units, no repeats).
pub fn parse_bss(list: &str) -> Result<Vec<u64>, BenchError> {
    measure::parse_unique(
        list,
        |item| {
            let bs = ioswitch::units::parse_size(item).map_err(|reason| BenchError::BadBlockSize {
                list: list.to_string(),
                item: item.to_string(),
                reason,
            })?;
            if bs == 0 {
                return Err(BenchError::ZeroBlockSize { list: Some(list.to_string()) });
            }
            Ok(bs)
        },
        |item, _| BenchError::Twice { kind: ListKind::BlockSizes, list: list.to_string(), item: item.to_string() },
    )
}

/// The result of [`sweep`].
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResult {
    /// The job, in words.
    pub job: String,
    /// The target (file or device).
    pub target: String,
    /// Repetitions of the grid.
    pub reps: u32,
    /// Interfaces measured, in legend order.
    pub interfaces: Vec<Iface>,
    /// Queue depths of the grid.
    pub qds: Vec<u32>,
    /// Block sizes of the grid.
    pub bss: Vec<u64>,
    /// Points measured, grouped by interface, then block size, then queue depth.
    pub points: Vec<Point>,
    /// Interfaces left out, and why.
    pub skipped: Vec<Skipped>,
}

/// Runs `base` over the grid of `plan` (its `bs` and `iodepth` replaced at each point),
/// interleaved, `plan.reps` times. `say` receives progress messages.
pub fn sweep(base: &JobSpec, plan: &SweepPlan, say: &mut dyn FnMut(&str)) -> Result<SweepResult, BenchError> {
    if plan.interfaces.is_empty() {
        return Err(BenchError::SweepNoInterfaces);
    }
    if plan.qds.is_empty() || plan.bss.is_empty() {
        return Err(BenchError::SweepEmptyGrid);
    }
    if let Some(&qd) = plan.qds.iter().find(|&&q| q == 0 || q > MAX_QD) {
        return Err(BenchError::QdRange { list: None, qd, max: MAX_QD });
    }
    if plan.bss.contains(&0) {
        return Err(BenchError::ZeroBlockSize { list: None });
    }
    let mut items = Vec::new();
    for &bs in &plan.bss {
        for (k, &qd) in plan.qds.iter().enumerate() {
            for &iface in &plan.interfaces {
                if iface.is_sync() && k > 0 {
                    continue;
                }
                let mut spec = measure::spec_for(base, iface);
                spec.iodepth = qd;
                spec.bs.read = bs;
                spec.bs.write = bs;
                spec.name = format!("{}-{}-qd{qd}-bs{bs}", base.name, iface);
                items.push(Item { iface, spec });
            }
        }
    }
    let (mut points, skipped) = measure::measure(&items, plan.reps, plan.skip_unavailable, say)?;
    if points.is_empty() {
        return Err(BenchError::Sweep(Box::new(measure::none_ran(base, skipped))));
    }
    let order = |i: Iface| plan.interfaces.iter().position(|&x| x == i).unwrap_or(usize::MAX);
    points.sort_by_key(|p| (order(p.iface), p.bs, p.qd));
    let interfaces = plan.interfaces.iter().copied().filter(|&i| points.iter().any(|p| p.iface == i)).collect();
    let mut job = measure::describe(base);
    job = job.split(' ').filter(|w| !w.starts_with("bs=") && !w.starts_with("iodepth=")).collect::<Vec<_>>().join(" ");
    Ok(SweepResult {
        job,
        target: measure::target_of(base),
        reps: plan.reps,
        interfaces,
        qds: plan.qds.clone(),
        bss: plan.bss.clone(),
        points,
        skipped,
    })
}

/// Header of the CSV file.
pub const CSV_HEADER: &str = "interface,mode,qd,bs,reps,iops,iops_min,iops_max,bw_bytes_per_s,lat_mean_ns,\
lat_p50_ns,lat_p99_ns,lat_p999_ns,slat_mean_ns,clat_mean_ns,usr_cpu_pct,sys_cpu_pct,process_cpu_pct,syscalls_per_io";

impl SweepResult {
    /// The block size of the queue-depth plots: 4 KiB when swept, else the smallest.
    pub fn plot_bs(&self) -> u64 {
        if self.bss.contains(&4096) {
            4096
        } else {
            self.bss.iter().copied().min().unwrap_or(4096)
        }
    }

    /// The queue depth of the block-size plot: 1 when swept, else the smallest.
    pub fn plot_qd(&self) -> u32 {
        self.qds.iter().copied().min().unwrap_or(1)
    }

    /// One line per point: medians (and the IOPS spread); latencies in ns, CPU in % of
    /// one CPU; `slat_mean_ns` is empty for sync interfaces.
    pub fn to_csv(&self) -> String {
        let columns = CSV_COLUMNS.map(|c| c.name);
        let rows = self.points.iter().map(|p| {
            let mode = if p.iface.is_sync() { "sync" } else { "async" };
            (vec![p.iface.to_string(), mode.to_string(), p.qd.to_string(), p.bs.to_string()], &p.summary)
        });
        measure::results_table(&CSV_COLUMNS, &["interface", "mode", "qd", "bs"], &columns, rows).to_csv()
    }

    /// Everything, with per-repetition samples.
    pub fn to_json(&self) -> Value {
        json!({
            "job": self.job,
            "target": self.target,
            "reps": self.reps,
            "qds": self.qds,
            "bss": self.bss,
            "points": self.points.iter().map(|p| json!({
                "interface": p.iface.as_str(),
                "served_by": p.interface,
                "mode": if p.iface.is_sync() { "sync" } else { "async" },
                "qd": p.qd,
                "bs": p.bs,
                "summary": p.summary.to_json(),
                "samples": p.samples.iter().map(Sample::to_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "skipped": self.skipped.iter().map(|s| json!({"interface": s.iface, "reason": s.reason})).collect::<Vec<_>>(),
        })
    }

    /// A table of every point (medians), for the terminal.
    pub fn to_text(&self) -> String {
        const COLUMNS: [&str; 9] =
            ["IOPS", "IOPS min–max", "BW", "lat mean", "p50", "p99", "slat", "clat", "syscalls/IO"];
        let rows = self
            .points
            .iter()
            .map(|p| (vec![p.iface.to_string(), p.qd.to_string(), ioswitch::units::fmt_size(p.bs)], &p.summary));
        let t = measure::results_table(&TEXT_COLUMNS, &["interface", "qd", "bs"], &COLUMNS, rows);
        let mut out = measure::heading("sweep", &self.job, &self.target, self.reps);
        out += &t.render();
        if self.points.iter().any(|p| p.iface.is_sync()) && self.qds.iter().any(|&q| q > 1) {
            out += "\nnote: sync interfaces run at queue depth 1 only\n";
        }
        for s in &self.skipped {
            out += &format!("skipped {}: {}\n", s.iface, s.reason);
        }
        out
    }

    fn series(&self, keep: impl Fn(&Point) -> bool, xy: impl Fn(&Point) -> (f64, f64)) -> Vec<Series> {
        self.interfaces
            .iter()
            .map(|&i| {
                let mut points: Vec<(f64, f64)> =
                    self.points.iter().filter(|p| p.iface == i && keep(p)).map(&xy).collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name: i.to_string(), points }
            })
            .collect()
    }

    /// The three plots, with their file names: latency vs queue depth (at
    /// [`plot_bs`](Self::plot_bs)), latency vs block size (at [`plot_qd`](Self::plot_qd)),
    /// IOPS vs queue depth.
    pub fn charts(&self) -> Vec<(&'static str, LineChart)> {
        let bs = self.plot_bs();
        let qd = self.plot_qd();
        let bs_name = ioswitch::units::fmt_size(bs);
        let at_bs = |p: &Point| p.bs == bs;
        let rw = self.job.split(' ').next().unwrap_or("");
        vec![
            (
                "lat-vs-qd.svg",
                LineChart {
                    title: format!("Mean latency vs queue depth ({rw}, bs {bs_name})"),
                    x_label: "queue depth (log2 scale)".into(),
                    y_label: "mean latency (µs)".into(),
                    x_scale: Scale::Log2,
                    x_ticks: TickFormat::Number,
                    y_ticks: TickFormat::Number,
                    series: self.series(at_bs, |p| (p.qd as f64, p.summary.lat_mean.median / 1e3)),
                },
            ),
            (
                "lat-vs-bs.svg",
                LineChart {
                    title: format!("Mean latency vs block size ({rw}, qd {qd})"),
                    x_label: "block size (bytes, log2 scale)".into(),
                    y_label: "mean latency (µs)".into(),
                    x_scale: Scale::Log2,
                    x_ticks: TickFormat::Bytes,
                    y_ticks: TickFormat::Number,
                    series: self.series(|p| p.qd == qd, |p| (p.bs as f64, p.summary.lat_mean.median / 1e3)),
                },
            ),
            (
                "iops-vs-qd.svg",
                LineChart {
                    title: format!("IOPS vs queue depth ({rw}, bs {bs_name})"),
                    x_label: "queue depth (log2 scale)".into(),
                    y_label: "IOPS (I/Os per second)".into(),
                    x_scale: Scale::Log2,
                    x_ticks: TickFormat::Number,
                    y_ticks: TickFormat::Si,
                    series: self.series(at_bs, |p| (p.qd as f64, p.summary.iops.median)),
                },
            ),
        ]
    }

    /// Writes `sweep.csv`, `sweep.json` and the three SVG plots into `dir` (created when
    /// missing); returns the paths written.
    pub fn write_all(&self, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
        let charts = self.charts().into_iter().map(|(name, c)| (name.to_string(), c));
        measure::write_result(dir, "sweep", self.to_csv(), &self.to_json(), charts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobfile::{Rw, SizeSpec};
    use crate::measure::{Summary, TempDir};
    use ioswitch::{AsyncIface, SyncIface};

    fn hand_built() -> SweepResult {
        let ifaces =
            [Iface::Async(AsyncIface::IoUring), Iface::Async(AsyncIface::Libaio), Iface::Sync(SyncIface::Psync)];
        let mut points = Vec::new();
        for iface in ifaces {
            for bs in [512u64, 4096] {
                for qd in [1u32, 4, 16] {
                    if iface.is_sync() && qd > 1 {
                        continue;
                    }
                    let s = Sample {
                        ios: 100,
                        runtime_ns: 1_000_000,
                        iops: 1e5 * qd as f64,
                        bw: 1e5 * qd as f64 * bs as f64,
                        lat_mean: 1e4 * qd as f64,
                        lat_p50: 1e4,
                        lat_p99: 2e4,
                        lat_p999: 3e4,
                        slat_mean: (!iface.is_sync()).then_some(1e3),
                        clat_mean: 9e3,
                        ..Sample::default()
                    };
                    points.push(Point {
                        iface,
                        interface: iface.to_string(),
                        qd,
                        bs,
                        summary: Summary::of(std::slice::from_ref(&s)),
                        samples: vec![s],
                    });
                }
            }
        }
        SweepResult {
            job: "randread".into(),
            target: "/tmp/f".into(),
            reps: 1,
            interfaces: ifaces.to_vec(),
            qds: vec![1, 4, 16],
            bss: vec![512, 4096],
            points,
            skipped: vec![],
        }
    }

    #[test]
    fn lists_parse_and_bad_items_are_named() {
        assert_eq!(parse_qds("1, 2,4").unwrap(), [1, 2, 4]);
        assert_eq!(parse_bss("512,4k,32k,128k").unwrap(), [512, 4096, 32768, 131072]);
        assert!(parse_qds("1,x").unwrap_err().to_string().contains("\"x\""));
        assert!(parse_qds("0").unwrap_err().to_string().contains("out of range"));
        assert!(parse_qds("2,2").unwrap_err().to_string().contains("twice"));
        assert!(parse_bss("4q").unwrap_err().to_string().contains("4q"));
        assert!(parse_bss("0").unwrap_err().to_string().contains("0"));
    }

    #[test]
    fn the_csv_has_the_header_and_one_row_per_point() {
        let r = hand_built();
        let csv = r.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        // io_uring and libaio: 2 bs × 3 qd; psync: 2 bs × qd 1.
        assert_eq!(lines.len() - 1, 6 + 6 + 2);
        let cols = CSV_HEADER.split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols));
        let psync = lines.iter().find(|l| l.starts_with("psync,")).unwrap();
        assert_eq!(psync.split(',').nth(13), Some(""), "no slat for sync: {psync}");
        assert_eq!(
            lines[1],
            "io_uring,async,1,512,1,100000.0,100000.0,100000.0,51200000,10000.0,10000.0,20000.0,30000.0,1000.0,\
9000.0,0.0,0.0,0.0,0.000"
        );
    }

    #[test]
    fn the_table_has_a_line_per_point_under_its_columns() {
        let text = hand_built().to_text();
        let lines: Vec<&str> = text.lines().collect();
        let head = lines.iter().position(|l| l.starts_with("interface")).unwrap();
        let columns = "interface qd bs IOPS IOPS min–max BW lat mean p50 p99 slat clat syscalls/IO";
        assert_eq!(lines[head].split_whitespace().collect::<Vec<_>>(), columns.split_whitespace().collect::<Vec<_>>());
        assert_eq!(lines[head + 1].split_whitespace().take(4).collect::<Vec<_>>(), ["io_uring", "1", "512B", "100.0k"]);
        assert_eq!(lines.iter().filter(|l| l.starts_with("psync ")).count(), 2, "{text}");
    }

    #[test]
    fn every_plot_has_one_line_per_interface_and_axis_labels() {
        let charts = hand_built().charts();
        let names: Vec<&str> = charts.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["lat-vs-qd.svg", "lat-vs-bs.svg", "iops-vs-qd.svg"]);
        for (name, c) in &charts {
            let svg = c.to_svg();
            assert_eq!(svg.matches("<polyline fill=\"none\"").count(), 3, "{name}");
            for i in ["io_uring", "libaio", "psync"] {
                assert!(svg.contains(&format!(">{i}</text>")), "{name}: legend {i}");
            }
            assert!(svg.contains("log2 scale)</text>"), "{name}");
        }
        assert!(charts[0].1.to_svg().contains(">mean latency (µs)</text>"));
        assert!(charts[1].1.to_svg().contains(">4k</text>"));
        assert!(charts[2].1.to_svg().contains(">IOPS (I/Os per second)</text>"));
        // Latency vs qd at 4 KiB: io_uring has three points, psync one.
        assert_eq!(charts[0].1.series[0].points.len(), 3);
        assert_eq!(charts[0].1.series[2].points.len(), 1);
    }

    #[test]
    fn write_all_writes_csv_json_and_three_plots() {
        let tmp = TempDir::new(&std::env::temp_dir()).unwrap();
        let out = tmp.path().join("out");
        let files = hand_built().write_all(&out).unwrap();
        assert_eq!(files.len(), 5);
        for f in &files {
            assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
        }
        let json: Value = serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
        assert_eq!(json["points"].as_array().unwrap().len(), 14);
    }

    #[test]
    fn a_tiny_real_sweep_runs_the_grid() {
        let tmp = TempDir::new(&std::env::temp_dir()).unwrap();
        let mut base = JobSpec::new("tiny");
        base.filename = vec![tmp.path().join("f").display().to_string()];
        base.size = Some(SizeSpec::Bytes(1 << 20));
        base.rw = Rw::RandRead;
        base.number_ios = Some(300);
        let plan = SweepPlan {
            interfaces: vec![
                Iface::Async(AsyncIface::Nil),
                Iface::Async(AsyncIface::Emu),
                Iface::Sync(SyncIface::Psync),
            ],
            qds: vec![1, 4],
            bss: vec![4096, 8192],
            reps: 2,
            skip_unavailable: false,
        };
        let r = sweep(&base, &plan, &mut |_| {}).unwrap();
        assert_eq!(r.points.len(), 2 * 2 * 2 + 2);
        assert!(r.points.iter().all(|p| p.samples.len() == 2 && p.summary.iops.median > 0.0));
        assert!(r.points.iter().filter(|p| p.iface.is_sync()).all(|p| p.qd == 1));
        assert_eq!(r.to_csv().lines().count(), 11);
        assert!(r.to_text().contains("emu"));
    }

    #[test]
    fn an_empty_plan_is_an_error() {
        let base = JobSpec::new("j");
        let plan = SweepPlan { qds: vec![], ..SweepPlan::default() };
        assert!(sweep(&base, &plan, &mut |_| {}).unwrap_err().to_string().contains("queue depth"));
        let plan = SweepPlan { interfaces: vec![], ..SweepPlan::default() };
        assert!(sweep(&base, &plan, &mut |_| {}).unwrap_err().to_string().contains("interfaces"));
    }
}
