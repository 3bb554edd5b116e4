//! The scaling study of "Understanding Modern Storage APIs" (Didona et al., SYSTOR '22)
//! as one command, `ioswitch bench sweep --variants …`: one job over jobs × queue depth
//! × interface variants, with the paper's labels:
//!
//! | label    | what runs                                                   |
//! |----------|-------------------------------------------------------------|
//! | `iou`    | io_uring, interrupts (no polling)                           |
//! | `iou+p`  | io_uring with IOPOLL (completions polled; needs poll queues)|
//! | `iou+k`  | io_uring with SQPOLL (a kernel thread submits)              |
//! | `libaio` | Linux AIO                                                   |
//! | `vfio`   | the user-space NVMe driver (a PCI address target only)      |
//!
//! Every variant is first probed with a short run (32 I/Os at the smallest depth, one
//! job); a variant the target cannot run (IOPOLL on a disk without poll queues, vfio on
//! a file, …) is reported as refused with the library's reason, never dropped silently.
//! The grid then runs interleaved as the sweep's: every point once, then every point
//! again, `reps` times; `numjobs` clones share the job's file, as in fio.
//!
//! Plots, as the paper draws them: IOPS vs queue depth, one line per variant (one chart
//! per job count), and IOPS vs number of jobs, one line per variant (one chart per
//! queue depth).

use crate::error::BenchError;
use crate::jobfile::JobSpec;
use crate::measure::{self, Iface, Item, Point, CSV_COLUMNS, TEXT_COLUMNS};
use crate::plot::{LineChart, Scale, Series, TickFormat};
use crate::run::{self, RunOpts};
use ioswitch::AsyncIface;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// An interface variant of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// `iou`: io_uring without polling.
    Iou,
    /// `iou+p`: io_uring with IOPOLL.
    IouPoll,
    /// `iou+k`: io_uring with SQPOLL.
    IouSqpoll,
    /// `libaio`: Linux AIO.
    Libaio,
    /// `vfio`: the user-space NVMe driver.
    Vfio,
}

impl Variant {
    /// Every variant, in legend order.
    pub const ALL: [Variant; 5] = [Variant::Iou, Variant::IouPoll, Variant::IouSqpoll, Variant::Libaio, Variant::Vfio];

    /// The paper's label.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Iou => "iou",
            Variant::IouPoll => "iou+p",
            Variant::IouSqpoll => "iou+k",
            Variant::Libaio => "libaio",
            Variant::Vfio => "vfio",
        }
    }

    /// The library interface it runs on.
    pub fn iface(self) -> Iface {
        Iface::Async(match self {
            Variant::Iou | Variant::IouPoll | Variant::IouSqpoll => AsyncIface::IoUring,
            Variant::Libaio => AsyncIface::Libaio,
            Variant::Vfio => AsyncIface::Vfio,
        })
    }

    /// The job `base` on this variant (at the base's depth and job count).
    pub fn spec(self, base: &JobSpec) -> JobSpec {
        let mut s = measure::spec_for(base, self.iface());
        // The variant alone says whether io_uring polls.
        s.hipri = false;
        s.sqthread_poll = false;
        let o = s.ioswitch_opts.as_mut().expect("spec_for sets the ioswitch options");
        o.iopoll = self == Variant::IouPoll;
        o.sqpoll = self == Variant::IouSqpoll;
        if self != Variant::IouSqpoll {
            o.sqpoll_cpu = None;
        }
        s
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Why a study could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// An item of `--variants` is not a variant.
    #[error("--variants {list:?}: {item:?} is not a variant (iou, iou+p, iou+k, libaio, vfio)")]
    UnknownVariant {
        /// The list.
        list: String,
        /// The item.
        item: String,
    },
    /// An item of a list is given twice.
    #[error("--{what} {list:?}: {item:?} is given twice")]
    Twice {
        /// Which option.
        what: &'static str,
        /// The list.
        list: String,
        /// The item.
        item: String,
    },
    /// An item of `--jobs` is not a job count.
    #[error("--jobs {list:?}: {item:?} is not a number of jobs from 1 to {max}")]
    BadJobs {
        /// The list.
        list: String,
        /// The item.
        item: String,
        /// The most jobs accepted.
        max: u32,
    },
    /// A list, or the grid, is empty.
    #[error("the study has no {0} to run")]
    Empty(&'static str),
    /// Every variant was refused.
    #[error("no variant can run on {target}: {}", refused.iter().map(|(v, r)| format!("{v}: {r}")).collect::<Vec<_>>().join("; "))]
    NoneRan {
        /// The target.
        target: String,
        /// Each variant and its reason.
        refused: Vec<(Variant, String)>,
    },
    /// The measurement failed.
    #[error(transparent)]
    Bench(#[from] BenchError),
}

/// Most jobs a study accepts.
pub const MAX_JOBS: u32 = 256;

/// Parses `iou,iou+p,iou+k,libaio`.
pub fn parse_variants(list: &str) -> Result<Vec<Variant>, StudyError> {
    measure::parse_unique(
        list,
        |item| {
            Variant::ALL
                .into_iter()
                .find(|v| v.label() == item)
                .ok_or_else(|| StudyError::UnknownVariant { list: list.into(), item: item.into() })
        },
        |item, _| StudyError::Twice { what: "variants", list: list.into(), item: item.into() },
    )
}

/// Parses `1,2,4` (job counts 1..=[`MAX_JOBS`], no repeats).
pub fn parse_jobs(list: &str) -> Result<Vec<u32>, StudyError> {
    measure::parse_unique(
        list,
        |item| {
            item.parse::<u32>().ok().filter(|n| (1..=MAX_JOBS).contains(n)).ok_or_else(|| StudyError::BadJobs {
                list: list.into(),
                item: item.into(),
                max: MAX_JOBS,
            })
        },
        |item, _| StudyError::Twice { what: "jobs", list: list.into(), item: item.into() },
    )
}

/// The variants of the study when none are given: the four of the paper, and `vfio`
/// when the target is a PCI address.
pub fn default_variants(base: &JobSpec) -> Vec<Variant> {
    let mut v = vec![Variant::Iou, Variant::IouPoll, Variant::IouSqpoll, Variant::Libaio];
    let pci =
        base.filename.first().is_some_and(|f| matches!(ioswitch::uri::parse(f), Ok(ioswitch::uri::Target::Pci(_))));
    if pci {
        v.push(Variant::Vfio);
    }
    v
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StudyPlan {
    /// Variants, in legend order.
    pub variants: Vec<Variant>,
    /// Job counts (`numjobs`).
    pub jobs: Vec<u32>,
    /// Queue depths.
    pub qds: Vec<u32>,
    /// Repetitions of the whole grid.
    pub reps: u32,
}

/// One point of the study.
#[derive(Clone, Debug, PartialEq)]
pub struct StudyPoint {
    /// The variant.
    pub variant: Variant,
    /// Jobs (`numjobs`).
    pub jobs: u32,
    /// The measurement (its `qd` the queue depth of each job).
    pub point: Point,
}

/// The result of [`study`].
#[derive(Clone, Debug, PartialEq)]
pub struct StudyResult {
    /// The job, in words (without iodepth and numjobs).
    pub job: String,
    /// The target.
    pub target: String,
    /// Repetitions.
    pub reps: u32,
    /// Variants measured, in legend order.
    pub variants: Vec<Variant>,
    /// Job counts.
    pub jobs: Vec<u32>,
    /// Queue depths.
    pub qds: Vec<u32>,
    /// Points: by variant, then jobs, then queue depth.
    pub points: Vec<StudyPoint>,
    /// Variants refused by the probe, with the reason.
    pub refused: Vec<(Variant, String)>,
}

/// The spec of one grid point.
fn point_spec(base: &JobSpec, v: Variant, jobs: u32, qd: u32) -> JobSpec {
    let mut s = v.spec(base);
    s.iodepth = qd;
    s.numjobs = jobs;
    s.name = format!("{}-{}-j{jobs}-qd{qd}", base.name, v.label());
    s
}

/// Runs `v` on `base` for 32 I/Os (one job, depth `qd`): `Err` with the reason when the
/// target cannot run it.
pub fn probe(base: &JobSpec, v: Variant, qd: u32) -> Result<(), String> {
    let mut s = point_spec(base, v, 1, qd);
    s.name = format!("{}-{}-probe", base.name, v.label());
    s.number_ios = Some(32);
    s.time_based = false;
    s.runtime = None;
    s.ramp_time = None;
    let p = run::prepare(&s, 0, &mut |_| {}).map_err(|e| match e {
        // The library's reason alone: where the probe job was defined says nothing here.
        BenchError::Open { source, .. } => source.to_string(),
        e => e.to_string(),
    })?;
    let report = run::run(vec![p], &RunOpts::default());
    let job = report.jobs.first().ok_or("the probe ran no job")?;
    match job.results.iter().find(|r| r.error != 0) {
        Some(r) => Err(r.error_msg.clone().unwrap_or_else(|| format!("error {}", r.error))),
        None => Ok(()),
    }
}

/// Probes every variant, then runs the grid of `plan` on `base`, interleaved, `reps`
/// times. `say` receives progress messages.
pub fn study(base: &JobSpec, plan: &StudyPlan, say: &mut dyn FnMut(&str)) -> Result<StudyResult, StudyError> {
    for (what, empty) in [
        ("variants", plan.variants.is_empty()),
        ("job counts", plan.jobs.is_empty()),
        ("queue depths", plan.qds.is_empty()),
    ] {
        if empty {
            return Err(StudyError::Empty(what));
        }
    }
    if let Some(&qd) = plan.qds.iter().find(|&&q| q == 0 || q > crate::sweep::MAX_QD) {
        return Err(BenchError::QdRange { list: None, qd, max: crate::sweep::MAX_QD }.into());
    }
    let target = measure::target_of(base);
    let qd0 = plan.qds.iter().copied().min().unwrap_or(1);
    let mut runnable = Vec::new();
    let mut refused = Vec::new();
    for &v in &plan.variants {
        match probe(base, v, qd0) {
            Ok(()) => runnable.push(v),
            Err(reason) => {
                say(&format!("refused {v}: {reason}"));
                refused.push((v, reason));
            }
        }
    }
    if runnable.is_empty() {
        return Err(StudyError::NoneRan { target, refused });
    }
    let mut items = Vec::new();
    let mut keys = Vec::new();
    for &jobs in &plan.jobs {
        for &qd in &plan.qds {
            for &v in &runnable {
                items.push(Item { iface: v.iface(), spec: point_spec(base, v, jobs, qd) });
                keys.push((v, jobs));
            }
        }
    }
    let (points, _) = measure::measure(&items, plan.reps, false, say)?;
    let mut points: Vec<StudyPoint> =
        keys.into_iter().zip(points).map(|((variant, jobs), point)| StudyPoint { variant, jobs, point }).collect();
    let order = |v: Variant| runnable.iter().position(|&x| x == v).unwrap_or(usize::MAX);
    points.sort_by_key(|p| (order(p.variant), p.jobs, p.point.qd));
    let job = measure::describe(base)
        .split(' ')
        .filter(|w| !w.starts_with("iodepth=") && !w.starts_with("numjobs="))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(StudyResult {
        job,
        target,
        reps: plan.reps,
        variants: runnable,
        jobs: plan.jobs.clone(),
        qds: plan.qds.clone(),
        points,
        refused,
    })
}

/// Header of the study's CSV.
pub const CSV_HEADER: &str = "variant,interface,jobs,qd,reps,iops,iops_min,iops_max,bw_bytes_per_s,lat_mean_ns,\
lat_p50_ns,lat_p99_ns,process_cpu_pct,syscalls_per_io";

impl StudyResult {
    /// One line per point (medians; latencies in ns; CPU of the whole process in % of
    /// one CPU).
    pub fn to_csv(&self) -> String {
        const COLUMNS: [&str; 10] = [
            "reps",
            "iops",
            "iops_min",
            "iops_max",
            "bw_bytes_per_s",
            "lat_mean_ns",
            "lat_p50_ns",
            "lat_p99_ns",
            "process_cpu_pct",
            "syscalls_per_io",
        ];
        let rows = self.points.iter().map(|p| {
            let key =
                vec![p.variant.to_string(), p.point.interface.clone(), p.jobs.to_string(), p.point.qd.to_string()];
            (key, &p.point.summary)
        });
        measure::results_table(&CSV_COLUMNS, &["variant", "interface", "jobs", "qd"], &COLUMNS, rows).to_csv()
    }

    /// Everything, with per-repetition samples and the refused variants.
    pub fn to_json(&self) -> Value {
        json!({
            "job": self.job,
            "target": self.target,
            "reps": self.reps,
            "jobs": self.jobs,
            "qds": self.qds,
            "variants": self.variants.iter().map(|v| v.label()).collect::<Vec<_>>(),
            "points": self.points.iter().map(|p| json!({
                "variant": p.variant.label(),
                "interface": p.point.interface,
                "jobs": p.jobs,
                "qd": p.point.qd,
                "summary": p.point.summary.to_json(),
                "samples": p.point.samples.iter().map(measure::Sample::to_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "refused": self.refused.iter().map(|(v, r)| json!({"variant": v.label(), "reason": r})).collect::<Vec<_>>(),
        })
    }

    /// The table for the terminal (medians), and the refused variants.
    pub fn to_text(&self) -> String {
        let rows = self
            .points
            .iter()
            .map(|p| (vec![p.variant.to_string(), p.jobs.to_string(), p.point.qd.to_string()], &p.point.summary));
        let columns = ["IOPS", "IOPS min–max", "lat mean", "p99", "CPU"];
        let t = measure::results_table(&TEXT_COLUMNS, &["variant", "jobs", "qd"], &columns, rows);
        let mut out = measure::heading("sweep (scaling study)", &self.job, &self.target, self.reps);
        out += &t.render();
        for (v, r) in &self.refused {
            out += &format!("refused {v}: {r}\n");
        }
        out
    }

    /// The charts with their file names: `iops-vs-qd-jN.svg` for each job count N,
    /// `iops-vs-jobs-qdD.svg` for each queue depth D (only when more than one job count
    /// was run).
    pub fn charts(&self) -> Vec<(String, LineChart)> {
        let rw = self.job.split(' ').next().unwrap_or("");
        let labels: Vec<String> = self.variants.iter().map(|v| v.to_string()).collect();
        let points: Vec<ChartPoint> = self
            .points
            .iter()
            .map(|p| ChartPoint {
                variant: p.variant.to_string(),
                jobs: p.jobs,
                qd: p.point.qd,
                iops: p.point.summary.iops.median,
            })
            .collect();
        charts_of(Some(rw), &labels, &self.jobs, &self.qds, &points)
    }

    /// Writes `study.csv`, `study.json` and the charts into `dir` (created when
    /// missing); returns the paths written.
    pub fn write_all(&self, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
        measure::write_result(dir, "study", self.to_csv(), &self.to_json(), self.charts())
    }
}

/// One point of a study chart: a variant's median IOPS at a job count and queue depth.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartPoint {
    /// The legend label (a variant's, or as written in a CSV file).
    pub variant: String,
    /// Jobs.
    pub jobs: u32,
    /// Queue depth per job.
    pub qd: u32,
    /// Median IOPS.
    pub iops: f64,
}

/// The study's charts, as the paper draws them, of `points`: `iops-vs-qd-jN.svg` for
/// each job count of `jobs`, one line per label of `labels`; and, with more than one job
/// count, `iops-vs-jobs-qdD.svg` for each queue depth of `qds`. `rw`, when known, goes
/// into the titles. A label without points at a chart's job count (or depth) has no line
/// there.
pub fn charts_of(
    rw: Option<&str>,
    labels: &[String],
    jobs: &[u32],
    qds: &[u32],
    points: &[ChartPoint],
) -> Vec<(String, LineChart)> {
    let rw = rw.filter(|r| !r.is_empty()).map(|r| format!(" ({r})")).unwrap_or_default();
    let series = |keep: &dyn Fn(&ChartPoint) -> bool, x: &dyn Fn(&ChartPoint) -> f64| -> Vec<Series> {
        labels
            .iter()
            .map(|l| {
                let mut pts: Vec<(f64, f64)> =
                    points.iter().filter(|p| &p.variant == l && keep(p)).map(|p| (x(p), p.iops)).collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name: l.clone(), points: pts }
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let mut out = Vec::new();
    for &j in jobs {
        out.push((
            format!("iops-vs-qd-j{j}.svg"),
            LineChart {
                title: format!("IOPS vs queue depth, {j} job{}{rw}", if j == 1 { "" } else { "s" }),
                x_label: "queue depth per job (log2 scale)".into(),
                y_label: "IOPS (I/Os per second)".into(),
                x_scale: Scale::Log2,
                x_ticks: TickFormat::Number,
                y_ticks: TickFormat::Si,
                series: series(&|p| p.jobs == j, &|p| p.qd as f64),
            },
        ));
    }
    if jobs.len() > 1 {
        for &qd in qds {
            out.push((
                format!("iops-vs-jobs-qd{qd}.svg"),
                LineChart {
                    title: format!("IOPS vs number of jobs, queue depth {qd}{rw}"),
                    x_label: "jobs (log2 scale)".into(),
                    y_label: "IOPS (I/Os per second)".into(),
                    x_scale: Scale::Log2,
                    x_ticks: TickFormat::Number,
                    y_ticks: TickFormat::Si,
                    series: series(&|p| p.qd == qd, &|p| p.jobs as f64),
                },
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobfile::{Rw, SizeSpec};
    use crate::measure::TempDir;

    fn base(dir: &Path) -> JobSpec {
        let mut b = JobSpec::new("s");
        b.filename = vec![dir.join("f").display().to_string()];
        b.size = Some(SizeSpec::Bytes(1 << 20));
        b.rw = Rw::RandRead;
        b.number_ios = Some(200);
        b
    }

    #[test]
    fn lists_parse_and_bad_items_are_named() {
        assert_eq!(
            parse_variants("iou,iou+p, iou+k,libaio,vfio").unwrap(),
            [Variant::Iou, Variant::IouPoll, Variant::IouSqpoll, Variant::Libaio, Variant::Vfio]
        );
        let e = parse_variants("iou,uring").unwrap_err().to_string();
        assert!(e.contains("\"uring\" is not a variant"), "{e}");
        assert!(parse_variants("iou,iou").unwrap_err().to_string().contains("twice"));
        assert_eq!(parse_jobs("1,2, 4").unwrap(), [1, 2, 4]);
        for bad in ["0", "x", "257", ""] {
            let e = parse_jobs(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?} is not a number of jobs")), "{e}");
        }
    }

    #[test]
    fn each_variant_sets_its_interface_and_polling() {
        let mut b = JobSpec::new("j");
        b.hipri = true; // the variant, not the base job, decides
        for (v, want) in [
            (Variant::Iou, (AsyncIface::IoUring, false, false)),
            (Variant::IouPoll, (AsyncIface::IoUring, true, false)),
            (Variant::IouSqpoll, (AsyncIface::IoUring, false, true)),
            (Variant::Libaio, (AsyncIface::Libaio, false, false)),
            (Variant::Vfio, (AsyncIface::Vfio, false, false)),
        ] {
            let s = v.spec(&b);
            let o = s.ioswitch_opts.unwrap();
            assert_eq!((o.r#async.unwrap(), o.iopoll, o.sqpoll), want, "{v}");
            assert!(!s.hipri && !s.sqthread_poll, "{v}");
        }
        assert!(!default_variants(&b).contains(&Variant::Vfio));
        b.filename = vec!["pci:0000:00:05.0".into()];
        assert_eq!(default_variants(&b).last(), Some(&Variant::Vfio));
    }

    #[test]
    fn a_variant_the_target_cannot_run_is_refused_with_the_reason() {
        let tmp = TempDir::new(&std::env::temp_dir()).unwrap();
        let b = base(tmp.path());
        // vfio needs a PCI address: a file is refused, and the study says why.
        let plan =
            StudyPlan { variants: vec![Variant::Iou, Variant::Vfio], jobs: vec![1, 2], qds: vec![1, 4], reps: 1 };
        let r = study(&b, &plan, &mut |_| {}).unwrap();
        assert_eq!(r.variants, [Variant::Iou]);
        assert_eq!(r.refused.len(), 1);
        assert_eq!(r.refused[0].0, Variant::Vfio);
        assert!(!r.refused[0].1.is_empty());
        assert!(r.to_text().contains("refused vfio: "), "{}", r.to_text());
        let text = r.to_text();
        let head = text.lines().find(|l| l.starts_with("variant")).unwrap_or_default();
        assert_eq!(
            head.split_whitespace().collect::<Vec<_>>(),
            "variant jobs qd IOPS IOPS min–max lat mean p99 CPU".split(' ').collect::<Vec<_>>()
        );
        assert_eq!(r.to_json()["refused"][0]["variant"], "vfio");
        // iou: 2 job counts × 2 depths.
        assert_eq!(r.points.len(), 4);
        for p in &r.points {
            assert_eq!(p.point.summary.reps, 1);
            assert!(p.point.summary.iops.median > 0.0);
            // numjobs clones each do number_ios.
            assert_eq!(p.point.samples[0].ios, 200 * p.jobs as u64, "{} jobs", p.jobs);
        }
        let names: Vec<String> = r.charts().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["iops-vs-qd-j1.svg", "iops-vs-qd-j2.svg", "iops-vs-jobs-qd1.svg", "iops-vs-jobs-qd4.svg"]);
        let csv = r.to_csv();
        assert_eq!(csv.lines().count(), 5);
        assert_eq!(csv.lines().next(), Some(CSV_HEADER));
        let cols = CSV_HEADER.split(',').count();
        assert!(csv.lines().all(|l| l.split(',').count() == cols), "{csv}");
        assert!(csv.lines().nth(1).unwrap().starts_with("iou,io_uring,1,1,1,"), "{csv}");
        let only_vfio = StudyPlan { variants: vec![Variant::Vfio], ..plan };
        let e = study(&b, &only_vfio, &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("no variant can run on ") && e.contains("vfio: "), "{e}");
    }

    #[test]
    fn the_charts_have_one_line_per_variant() {
        let tmp = TempDir::new(&std::env::temp_dir()).unwrap();
        let b = base(tmp.path());
        let plan = StudyPlan { variants: vec![Variant::Iou, Variant::Libaio], jobs: vec![1], qds: vec![1, 2], reps: 1 };
        let r = study(&b, &plan, &mut |_| {}).unwrap();
        let charts = r.charts();
        assert_eq!(charts.len(), 1, "one job count: no IOPS-vs-jobs chart");
        let svg = charts[0].1.to_svg();
        assert!(svg.contains(">iou</text>") && svg.contains(">libaio</text>"));
        assert!(
            svg.contains(">IOPS (I/Os per second)</text>") && svg.contains(">queue depth per job (log2 scale)</text>")
        );
        assert_eq!(charts[0].1.series[0].points.len(), 2);
        let out = tmp.path().join("out");
        let files = r.write_all(&out).unwrap();
        assert_eq!(files.len(), 3);
    }

    #[test]
    fn an_empty_plan_is_an_error() {
        let b = JobSpec::new("j");
        let plan = StudyPlan { variants: vec![], jobs: vec![1], qds: vec![1], reps: 1 };
        assert!(study(&b, &plan, &mut |_| {}).unwrap_err().to_string().contains("no variants"));
        let plan = StudyPlan { variants: vec![Variant::Iou], jobs: vec![], qds: vec![1], reps: 1 };
        assert!(study(&b, &plan, &mut |_| {}).unwrap_err().to_string().contains("no job counts"));
    }
}
