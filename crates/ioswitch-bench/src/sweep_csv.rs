//! `ioswitch bench sweep --from-csv FILE…`: the sweep's plots drawn from CSV files in
//! `sweep.csv`'s format ([`CSV_HEADER`]) instead of from a run, for points that one
//! sweep cannot measure together. The PCI study (tests/vm/pci-study.sh) is the case: the
//! same controller is `/dev/nvme1n1` and `/dev/ng1n1` under the kernel's driver and
//! `0000:00:05.0` under the user-space one, with a rebind between them, so its runs are
//! separate `ioswitch bench` jobs; its table script writes their medians as rows of this
//! format, and this draws them as a sweep would. Several files are merged (rows of the
//! same interface, queue depth and block size twice are refused, naming both files).
//! Interface names are taken as written (`io_uring+iopoll`, `vfio 2 jobs`): a row is a
//! legend entry, not an interface the library must know.
//!
//! The scaling study's `study.csv` files (`ioswitch bench sweep --variants …`) are taken
//! too: the same study run on two targets (the kernel variants on a namespace, then
//! `vfio` on the controller's PCI address after a rebind; tests/vm/pci-study.sh
//! --scaling) merges into one `study.csv` and the study's charts ([`crate::scaling`]):
//! IOPS vs queue depth per job count, IOPS vs jobs per queue depth. All files given
//! together are of one kind; a variant at the same job count and depth twice is refused.
//!
//! Plots, at the sweep's plot block size (4 KiB when present, else the smallest), one
//! line per interface over queue depth: mean latency, IOPS, process CPU per I/O
//! (`process_cpu_pct / 100 / iops`) and syscalls per I/O; with more than one block size,
//! mean latency vs block size at the smallest queue depth too.

use crate::plot::{LineChart, Scale, Series, TickFormat};
use crate::scaling::{self, ChartPoint};
use crate::sweep::CSV_HEADER;
use std::path::{Path, PathBuf};

/// What is wrong with a CSV file given to `--from-csv`.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    /// The file cannot be read.
    #[error("--from-csv {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The first line is not the sweep's header, nor the study's.
    #[error("--from-csv {}: the first line is neither sweep.csv's header ({CSV_HEADER}) nor study.csv's ({})", path.display(), scaling::CSV_HEADER)]
    Header {
        /// The file.
        path: PathBuf,
    },
    /// sweep.csv and study.csv files given together.
    #[error("--from-csv: {} is a sweep.csv and {} a study.csv; give files of one kind", sweep.display(), study.display())]
    Mixed {
        /// A sweep.csv file.
        sweep: PathBuf,
        /// A study.csv file.
        study: PathBuf,
    },
    /// The same study point in two rows.
    #[error("--from-csv: {variant} with {jobs} job(s) at qd {qd} is in {} and again in {} line {line}", first.display(), path.display())]
    StudyTwice {
        /// The variant.
        variant: String,
        /// Jobs.
        jobs: u32,
        /// Queue depth.
        qd: u32,
        /// Where it was first.
        first: PathBuf,
        /// Where it is again.
        path: PathBuf,
        /// The line there.
        line: usize,
    },
    /// A row is malformed.
    #[error("--from-csv {} line {line}: {why}", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// Its line number (1-based).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The same point in two rows.
    #[error("--from-csv: {interface} at qd {qd}, bs {bs} is in {} and again in {} line {line}", first.display(), path.display())]
    Twice {
        /// The interface.
        interface: String,
        /// Queue depth.
        qd: u32,
        /// Block size.
        bs: u64,
        /// Where it was first.
        first: PathBuf,
        /// Where it is again.
        path: PathBuf,
        /// The line there.
        line: usize,
    },
    /// No rows at all.
    #[error("--from-csv: the files hold no rows")]
    Empty,
    /// A chart cannot be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One row: the columns the plots use.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Legend name.
    pub interface: String,
    /// Queue depth.
    pub qd: u32,
    /// Block size, bytes.
    pub bs: u64,
    /// I/Os per second.
    pub iops: f64,
    /// Mean latency, ns.
    pub lat_mean_ns: f64,
    /// Process CPU, % of one CPU.
    pub process_cpu_pct: f64,
    /// Syscalls per I/O.
    pub syscalls_per_io: f64,
    /// The file it came from.
    pub file: PathBuf,
}

impl Row {
    /// Process CPU per I/O, µs.
    pub fn cpu_us_per_io(&self) -> f64 {
        self.process_cpu_pct / 100.0 / self.iops * 1e6
    }
}

/// One line of a CSV being read: its fields, and errors that name its file and line.
struct Line<'a> {
    cols: &'a [&'a str],
    fields: Vec<&'a str>,
    path: &'a PathBuf,
    line: usize,
    text: &'a str,
}

impl Line<'_> {
    fn bad(&self, why: String) -> CsvError {
        CsvError::Row { path: self.path.clone(), line: self.line, why }
    }

    fn field(&self, name: &str) -> (usize, &str) {
        let c = self.cols.iter().position(|c| *c == name).expect("a column of the header");
        (c, self.fields[c].trim())
    }

    /// A text field that must not be empty.
    fn name(&self, name: &str) -> Result<String, CsvError> {
        let (_, v) = self.field(name);
        if v.is_empty() {
            return Err(self.bad(format!("the {name} is empty")));
        }
        Ok(v.to_string())
    }

    /// A finite number ≥ 0.
    fn num(&self, name: &str) -> Result<f64, CsvError> {
        let (c, v) = self.field(name);
        v.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| self.bad(format!("{name} is {:?}, not a number ≥ 0", self.fields[c])))
    }

    /// A whole number ≥ 1, named `what` in the error.
    fn count<T: std::str::FromStr + PartialOrd + From<u8>>(&self, name: &str, what: &str) -> Result<T, CsvError> {
        let (c, v) = self.field(name);
        v.parse::<T>()
            .ok()
            .filter(|n| *n >= T::from(1))
            .ok_or_else(|| self.bad(format!("{name} is {:?}, not {what} ≥ 1", self.fields[c])))
    }
}

/// The lines of the CSV texts `files` (path, text), in order, after each file's `header`
/// (blank lines skipped), each read by `per_line` into a row; `same` finds an earlier row
/// with the same key and `twice` names the clash.
fn read_rows<T>(
    files: &[(PathBuf, String)],
    header: &str,
    mut per_line: impl FnMut(&Line<'_>) -> Result<T, CsvError>,
    same: impl Fn(&T, &T) -> bool,
    twice: impl Fn(&T, &T, &Line<'_>) -> CsvError,
) -> Result<Vec<T>, CsvError> {
    let cols: Vec<&str> = header.split(',').collect();
    let mut rows: Vec<T> = Vec::new();
    for (path, text) in files {
        let mut lines = text.lines();
        if lines.next().map(str::trim_end) != Some(header) {
            return Err(CsvError::Header { path: path.clone() });
        }
        for (i, l) in lines.enumerate() {
            if l.trim().is_empty() {
                continue;
            }
            let line = Line { cols: &cols, fields: l.split(',').collect(), path, line: i + 2, text: l };
            if line.fields.len() != cols.len() {
                return Err(line.bad(format!("{} fields, the header has {}", line.fields.len(), cols.len())));
            }
            let row = per_line(&line)?;
            if let Some(r) = rows.iter().find(|r| same(r, &row)) {
                return Err(twice(r, &row, &line));
            }
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return Err(CsvError::Empty);
    }
    Ok(rows)
}

/// The rows of the CSV texts `files` (path, text), in order, merged.
pub fn parse(files: &[(PathBuf, String)]) -> Result<Vec<Row>, CsvError> {
    read_rows(
        files,
        CSV_HEADER,
        |l| {
            Ok(Row {
                interface: l.name("interface")?,
                qd: l.count("qd", "a queue depth")?,
                bs: l.count::<u64>("bs", "a block size")?,
                iops: l.num("iops")?,
                lat_mean_ns: l.num("lat_mean_ns")?,
                process_cpu_pct: l.num("process_cpu_pct")?,
                syscalls_per_io: l.num("syscalls_per_io")?,
                file: l.path.clone(),
            })
        },
        |a, b| (&a.interface, a.qd, a.bs) == (&b.interface, b.qd, b.bs),
        |first, row, l| CsvError::Twice {
            interface: row.interface.clone(),
            qd: row.qd,
            bs: row.bs,
            first: first.file.clone(),
            path: l.path.clone(),
            line: l.line,
        },
    )
}

/// The plots of `rows`, with their file names (see the module's documentation) and
/// whether the y axis is logarithmic (CPU per I/O: polling modes can spend orders of
/// magnitude more than the rest).
pub fn charts(rows: &[Row]) -> Vec<(&'static str, LineChart, bool)> {
    let mut names: Vec<&str> = Vec::new();
    let mut bss: Vec<u64> = Vec::new();
    for r in rows {
        if !names.contains(&r.interface.as_str()) {
            names.push(&r.interface);
        }
        if !bss.contains(&r.bs) {
            bss.push(r.bs);
        }
    }
    let bs = if bss.contains(&4096) { 4096 } else { bss.iter().copied().min().unwrap_or(4096) };
    let qd = rows.iter().map(|r| r.qd).min().unwrap_or(1);
    let series = |keep: &dyn Fn(&Row) -> bool, xy: &dyn Fn(&Row) -> (f64, f64)| -> Vec<Series> {
        names
            .iter()
            .map(|&n| {
                let mut points: Vec<(f64, f64)> = rows.iter().filter(|r| r.interface == n && keep(r)).map(xy).collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name: n.to_string(), points }
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let bs_name = ioswitch::units::fmt_size(bs);
    let over_qd = |title: &str, y_label: &str, y_ticks: TickFormat, y: &dyn Fn(&Row) -> f64| LineChart {
        title: format!("{title} vs queue depth (bs {bs_name})"),
        x_label: "queue depth (log2 scale)".into(),
        y_label: y_label.into(),
        x_scale: Scale::Log2,
        x_ticks: TickFormat::Number,
        y_ticks,
        series: series(&|r| r.bs == bs, &|r| (r.qd as f64, y(r))),
    };
    let mut out = vec![
        (
            "lat-vs-qd.svg",
            over_qd("Mean latency", "mean latency (µs)", TickFormat::Number, &|r| r.lat_mean_ns / 1e3),
            false,
        ),
        ("iops-vs-qd.svg", over_qd("IOPS", "IOPS (I/Os per second)", TickFormat::Si, &|r| r.iops), false),
        (
            "cpu-per-io-vs-qd.svg",
            over_qd("Process CPU per I/O", "process CPU per I/O (µs, log scale)", TickFormat::Number, &|r| {
                r.cpu_us_per_io()
            }),
            true,
        ),
        (
            "syscalls-per-io-vs-qd.svg",
            over_qd("Syscalls per I/O", "syscalls per I/O", TickFormat::Number, &|r| r.syscalls_per_io),
            false,
        ),
    ];
    if bss.len() > 1 {
        out.push((
            "lat-vs-bs.svg",
            LineChart {
                title: format!("Mean latency vs block size (qd {qd})"),
                x_label: "block size (bytes, log2 scale)".into(),
                y_label: "mean latency (µs)".into(),
                x_scale: Scale::Log2,
                x_ticks: TickFormat::Bytes,
                y_ticks: TickFormat::Number,
                series: series(&|r| r.qd == qd, &|r| (r.bs as f64, r.lat_mean_ns / 1e3)),
            },
            false,
        ));
    }
    out
}

/// One row of a study.csv: the columns its charts use, and the line as written.
#[derive(Clone, Debug, PartialEq)]
pub struct StudyRow {
    /// The point.
    pub point: ChartPoint,
    /// The line, as written (the merged study.csv repeats it).
    pub text: String,
    /// The file it came from.
    pub file: PathBuf,
}

/// The rows of the study.csv texts `files` (path, text), in order, merged.
pub fn parse_study(files: &[(PathBuf, String)]) -> Result<Vec<StudyRow>, CsvError> {
    read_rows(
        files,
        scaling::CSV_HEADER,
        |l| {
            let point = ChartPoint {
                variant: l.name("variant")?,
                jobs: l.count("jobs", "a number of jobs")?,
                qd: l.count("qd", "a queue depth")?,
                iops: l.num("iops")?,
            };
            Ok(StudyRow { point, text: l.text.trim_end().to_string(), file: l.path.clone() })
        },
        |a, b| (&a.point.variant, a.point.jobs, a.point.qd) == (&b.point.variant, b.point.jobs, b.point.qd),
        |first, row, l| CsvError::StudyTwice {
            variant: row.point.variant.clone(),
            jobs: row.point.jobs,
            qd: row.point.qd,
            first: first.file.clone(),
            path: l.path.clone(),
            line: l.line,
        },
    )
}

/// The study's charts of `rows` ([`scaling::charts_of`]): legend in the order the
/// variants first appear, every job count and depth present.
pub fn study_charts(rows: &[StudyRow]) -> Vec<(String, LineChart)> {
    let mut labels: Vec<String> = Vec::new();
    let mut jobs: Vec<u32> = Vec::new();
    let mut qds: Vec<u32> = Vec::new();
    for r in rows {
        if !labels.contains(&r.point.variant) {
            labels.push(r.point.variant.clone());
        }
        jobs.push(r.point.jobs);
        qds.push(r.point.qd);
    }
    for v in [&mut jobs, &mut qds] {
        v.sort_unstable();
        v.dedup();
    }
    let points: Vec<ChartPoint> = rows.iter().map(|r| r.point.clone()).collect();
    scaling::charts_of(None, &labels, &jobs, &qds, &points)
}

/// Reads `files`, merges them and writes the plots into `dir` (created when missing);
/// returns the paths written. Files of the scaling study (study.csv's header) give the
/// study's charts and the merged `study.csv` in `dir`; files of the sweep, the sweep's.
pub fn plot_files(files: &[PathBuf], dir: &Path) -> Result<Vec<PathBuf>, CsvError> {
    let mut texts = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|source| CsvError::Read { path: f.clone(), source })?;
        texts.push((f.clone(), text));
    }
    let is_study = |t: &str| t.lines().next().map(str::trim_end) == Some(scaling::CSV_HEADER);
    let study = texts.iter().find(|(_, t)| is_study(t)).map(|(p, _)| p.clone());
    let write = |name: &str, text: String, written: &mut Vec<PathBuf>| -> Result<(), CsvError> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| CsvError::Write { path: path.clone(), source })?;
        written.push(path);
        Ok(())
    };
    let mut written = Vec::new();
    if let Some(study) = study {
        if let Some((sweep, _)) = texts.iter().find(|(_, t)| t.lines().next().map(str::trim_end) == Some(CSV_HEADER)) {
            return Err(CsvError::Mixed { sweep: sweep.clone(), study });
        }
        let rows = parse_study(&texts)?;
        std::fs::create_dir_all(dir).map_err(|source| CsvError::Write { path: dir.to_path_buf(), source })?;
        let mut csv = format!("{}\n", scaling::CSV_HEADER);
        for r in &rows {
            csv += &r.text;
            csv.push('\n');
        }
        write("study.csv", csv, &mut written)?;
        for (name, chart) in study_charts(&rows) {
            write(&name, chart.to_svg(), &mut written)?;
        }
        return Ok(written);
    }
    let rows = parse(&texts)?;
    std::fs::create_dir_all(dir).map_err(|source| CsvError::Write { path: dir.to_path_buf(), source })?;
    for (name, chart, log_y) in charts(&rows) {
        let svg = if log_y { chart.to_svg_log_y() } else { chart.to_svg() };
        write(name, svg, &mut written)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(iface: &str, qd: u32, iops: f64, cpu_pct: f64, sys: f64) -> String {
        format!(
            "{iface},async,{qd},4096,3,{iops},{iops},{iops},{},{},1,2,3,,4,5,6,{cpu_pct},{sys}",
            iops * 4096.0,
            1e9 / iops * qd as f64
        )
    }

    fn csv(rows: &[String]) -> String {
        format!("{CSV_HEADER}\n{}\n", rows.join("\n"))
    }

    #[test]
    fn rows_of_two_files_merge_and_draw_one_line_per_interface() {
        let kernel = csv(&[row("io_uring", 1, 1000.0, 50.0, 2.0), row("io_uring", 16, 4000.0, 80.0, 0.25)]);
        let user = csv(&[row("vfio", 1, 2000.0, 100.0, 0.0), row("vfio 2 jobs", 16, 8000.0, 200.0, 0.0)]);
        let rows = parse(&[("k.csv".into(), kernel), ("u.csv".into(), user)]).unwrap();
        assert_eq!(rows.len(), 4);
        // CPU per I/O: 50 % of a CPU at 1000 IOPS is 500 µs per I/O.
        assert_eq!(rows[0].cpu_us_per_io(), 500.0);
        assert_eq!(rows[3].cpu_us_per_io(), 250.0);
        let charts = charts(&rows);
        let names: Vec<&str> = charts.iter().map(|c| c.0).collect();
        assert_eq!(names, ["lat-vs-qd.svg", "iops-vs-qd.svg", "cpu-per-io-vs-qd.svg", "syscalls-per-io-vs-qd.svg"]);
        assert_eq!(charts.iter().map(|c| c.2).collect::<Vec<_>>(), [false, false, true, false], "CPU on log y");
        let cpu = &charts[2].1;
        assert_eq!(cpu.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["io_uring", "vfio", "vfio 2 jobs"]);
        assert_eq!(cpu.series[0].points, [(1.0, 500.0), (16.0, 200.0)]);
        assert_eq!(charts[3].1.series[0].points, [(1.0, 2.0), (16.0, 0.25)]);
        let svg = cpu.to_svg_log_y();
        assert!(
            svg.contains(">vfio 2 jobs</text>") && svg.contains(">process CPU per I/O (µs, log scale)</text>"),
            "{svg}"
        );
    }

    #[test]
    fn a_wrong_header_a_bad_field_and_a_point_twice_are_refused_naming_the_file_and_line() {
        let e = parse(&[("a.csv".into(), "interface,qd\nx,1\n".into())]).unwrap_err().to_string();
        assert!(e.contains("a.csv") && e.contains("header"), "{e}");
        let bad = csv(&[row("io_uring", 1, 1000.0, 50.0, 2.0).replace(",50,", ",lots,")]);
        let e = parse(&[("b.csv".into(), bad)]).unwrap_err().to_string();
        assert!(e.contains("b.csv line 2") && e.contains("process_cpu_pct is \"lots\""), "{e}");
        let short = csv(&["io_uring,async,1".into()]);
        let e = parse(&[("c.csv".into(), short)]).unwrap_err().to_string();
        assert!(e.contains("c.csv line 2") && e.contains("3 fields"), "{e}");
        let one = csv(&[row("vfio", 1, 1000.0, 50.0, 0.0)]);
        let e = parse(&[("d.csv".into(), one.clone()), ("e.csv".into(), one)]).unwrap_err().to_string();
        assert!(e.contains("vfio at qd 1, bs 4096 is in d.csv and again in e.csv line 2"), "{e}");
        let e = parse(&[("f.csv".into(), format!("{CSV_HEADER}\n"))]).unwrap_err().to_string();
        assert!(e.contains("no rows"), "{e}");
    }

    #[test]
    fn plot_files_writes_the_svgs() {
        let scratch = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-sweep-csv");
        let dir = scratch.dir();
        let f = dir.join("s.csv");
        std::fs::write(&f, csv(&[row("psync", 1, 900.0, 40.0, 1.0), row("libaio", 16, 3000.0, 70.0, 0.6)])).unwrap();
        let out = plot_files(&[f], &dir.join("out")).unwrap();
        assert_eq!(out.len(), 4);
        for p in &out {
            assert!(std::fs::read_to_string(p).unwrap().starts_with("<svg"), "{}", p.display());
        }
    }

    fn study_csv(rows: &[(&str, u32, u32, f64)]) -> String {
        let mut s = format!("{}\n", scaling::CSV_HEADER);
        for &(v, jobs, qd, iops) in rows {
            let iface = if v == "vfio" { "vfio" } else { "io_uring" };
            s += &format!("{v},{iface},{jobs},{qd},3,{iops},{iops},{iops},{},1000,900,5000,50,1.0\n", iops * 4096.0);
        }
        s
    }

    #[test]
    fn study_files_of_two_targets_merge_into_one_study() {
        let scratch = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-study-csv");
        let dir = scratch.dir();
        let kernel = dir.join("kernel.csv");
        let user = dir.join("vfio.csv");
        std::fs::write(
            &kernel,
            study_csv(&[
                ("iou", 1, 1, 1000.0),
                ("iou", 1, 16, 4000.0),
                ("iou", 2, 1, 1800.0),
                ("iou", 2, 16, 5000.0),
                ("iou+p", 1, 1, 1100.0),
                ("iou+p", 1, 16, 4100.0),
                ("iou+p", 2, 1, 2000.0),
                ("iou+p", 2, 16, 5100.0),
            ]),
        )
        .unwrap();
        std::fs::write(
            &user,
            study_csv(&[
                ("vfio", 1, 1, 3000.0),
                ("vfio", 1, 16, 9000.0),
                ("vfio", 2, 1, 5000.0),
                ("vfio", 2, 16, 9500.0),
            ]),
        )
        .unwrap();
        let out = dir.join("out");
        let files = plot_files(&[kernel.clone(), user.clone()], &out).unwrap();
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(
            names,
            ["study.csv", "iops-vs-qd-j1.svg", "iops-vs-qd-j2.svg", "iops-vs-jobs-qd1.svg", "iops-vs-jobs-qd16.svg"]
        );
        // The merged CSV: one header, the rows of both files in order.
        let merged = std::fs::read_to_string(&files[0]).unwrap();
        assert_eq!(merged.lines().filter(|l| l.starts_with("variant,")).count(), 1);
        assert_eq!(merged.lines().count(), 1 + 8 + 4);
        assert!(merged.lines().last().unwrap().starts_with("vfio,vfio,2,16,3,9500,"), "{merged}");
        // The rows read back, and the charts: one line per variant, of both files.
        let texts: Vec<(PathBuf, String)> =
            [kernel, user].into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap())).collect();
        let charts = study_charts(&parse_study(&texts).unwrap());
        let by_jobs = &charts[3].1;
        assert_eq!(by_jobs.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["iou", "iou+p", "vfio"]);
        assert_eq!(by_jobs.series[2].points, [(1.0, 9000.0), (2.0, 9500.0)]);
        assert_eq!(charts[0].1.series[0].points, [(1.0, 1000.0), (16.0, 4000.0)]);
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains(">vfio</text>") && svg.contains(">iou+p</text>"), "{svg}");
    }

    #[test]
    fn study_files_refuse_a_point_twice_a_bad_field_and_a_sweep_file_beside_them() {
        let one = study_csv(&[("vfio", 2, 4, 1000.0)]);
        let e = parse_study(&[("a.csv".into(), one.clone()), ("b.csv".into(), one.clone())]).unwrap_err().to_string();
        assert!(e.contains("vfio with 2 job(s) at qd 4 is in a.csv and again in b.csv line 2"), "{e}");
        let bad = one.replace("vfio,vfio,2,", "vfio,vfio,0,");
        let e = parse_study(&[("c.csv".into(), bad)]).unwrap_err().to_string();
        assert!(e.contains("c.csv line 2") && e.contains("jobs is \"0\""), "{e}");
        let e = parse_study(&[("d.csv".into(), csv(&[row("vfio", 1, 1000.0, 50.0, 0.0)]))]).unwrap_err().to_string();
        assert!(e.contains("d.csv") && e.contains("study.csv's"), "{e}");
        let scratch = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-study-mixed");
        let dir = scratch.dir();
        let (s, t) = (dir.join("sweep.csv"), dir.join("study.csv"));
        std::fs::write(&s, csv(&[row("psync", 1, 900.0, 40.0, 1.0)])).unwrap();
        std::fs::write(&t, one).unwrap();
        let e = plot_files(&[s, t], &dir.join("out")).unwrap_err().to_string();
        assert!(e.contains("is a sweep.csv and") && e.contains("give files of one kind"), "{e}");
        assert!(!dir.join("out").exists(), "nothing written");
    }
}
