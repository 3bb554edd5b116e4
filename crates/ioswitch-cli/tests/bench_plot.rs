//! `ioswitch bench plot` on logs fio itself wrote: fio (Debian's 3.33) runs a mixed job
//! on a file in /dev/shm with `write_lat_log`, `write_bw_log` and `write_iops_log`, once
//! with one line per I/O and once averaged (`log_avg_msec`, and `write_hist_log`); every
//! log is plotted, and
//! each SVG must parse as XML (Python's `xml.etree`, independent of ioswitch) and carry
//! the series and axis labels of its kind. Skips, saying why, without fio, /dev/shm or
//! python3.

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::text;
use ioswitch_testkit::tools::{output_retrying_hangs, OutputBounded};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn run(program: &str, args: &[&str]) -> Option<Output> {
    Command::new(program).args(args).stdin(Stdio::null()).output().ok()
}

/// Why the test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if !run("fio", &["--version"]).is_some_and(|o| o.status.success()) {
        return Some("fio is not on PATH (./scripts/test installs it with apt)".into());
    }
    if !Path::new("/dev/shm").is_dir() {
        return Some("/dev/shm does not exist".into());
    }
    if !run("python3", &["-c", "import xml.etree.ElementTree"]).is_some_and(|o| o.status.success()) {
        return Some("python3 with xml.etree is not on PATH (the independent XML check)".into());
    }
    None
}

/// The test's scratch directory `NAME` and one on /dev/shm (`ioswitch-NAME`) for its data
/// file; `None` (the test skips, saying why) where something it needs is [`missing`].
fn scratches(test: &str, name: &str) -> Option<(Scratch, Scratch)> {
    if let Some(why) = missing() {
        eprintln!("skipping {test}: {why}");
        return None;
    }
    Some((Scratch::new(env!("CARGO_TARGET_TMPDIR"), name), Scratch::new("/dev/shm", &format!("ioswitch-{name}"))))
}

fn fio_logs(dir: &Path, data: &str, prefix: &str, extra: &[&str]) -> Vec<PathBuf> {
    let p = dir.join(prefix).display().to_string();
    let (lat, bw, iops) =
        (format!("--write_lat_log={p}"), format!("--write_bw_log={p}"), format!("--write_iops_log={p}"));
    let fname = format!("--filename={data}");
    let mut args = vec![
        "--name=j",
        fname.as_str(),
        "--size=4m",
        "--rw=randrw",
        "--bs=4k",
        "--ioengine=psync",
        "--runtime=600ms",
        "--time_based",
        "--output=/dev/null",
        lat.as_str(),
        bw.as_str(),
        iops.as_str(),
    ];
    args.extend_from_slice(extra);
    let o = run("fio", &args).expect("fio ran a moment ago");
    assert!(o.status.success(), "fio {args:?}: {}", text(&o.stderr));
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{prefix}_")))
        .collect();
    logs.sort();
    logs
}

#[test]
fn fios_own_logs_plot_as_valid_svg_with_the_expected_series() {
    let Some((s, shm)) = scratches("fios_own_logs_plot_as_valid_svg_with_the_expected_series", "bench-plot") else {
        return;
    };
    let data = shm.path("data");
    let per_io = fio_logs(s.dir(), &data, "each", &[]);
    let hist = format!("--write_hist_log={}", s.dir().join("avg").display());
    let averaged = fio_logs(s.dir(), &data, "avg", &["--log_avg_msec=100", &hist, "--log_hist_msec=100"]);
    let names: Vec<String> = per_io.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    // psync has no submission latency: fio writes an empty slat log.
    assert_eq!(names, ["each_bw.1.log", "each_clat.1.log", "each_iops.1.log", "each_lat.1.log", "each_slat.1.log"]);
    assert_eq!(averaged.len(), 6, "{averaged:?}");
    assert!(averaged.iter().any(|p| p.ends_with("avg_clat_hist.1.log")), "{averaged:?}");
    let out = s.dir().join("svg");
    let mut args = vec!["bench".to_string(), "plot".into(), "--out".into(), out.display().to_string()];
    args.extend(per_io.iter().chain(&averaged).map(|p| p.display().to_string()));
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch")).args(&args).output_bounded().unwrap();
    assert!(o.status.success(), "ioswitch {args:?}: {}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.matches("wrote ").count(), 11, "{err}");
    assert!(err.contains("each_slat.1.svg (its log holds no sample"), "{err}");
    assert!(!err.contains("avg_clat_hist.1.svg (its log holds no sample"), "{err}");

    for prefix in ["each", "avg"] {
        for (kind, y_label, series) in [
            ("lat", "lat (µs, log scale)", &["read p50", "read p99", "read p99.9", "write p50", "write p99.9"][..]),
            ("clat", "clat (µs, log scale)", &["read p50", "write p99"][..]),
            ("bw", "bandwidth (KiB/s)", &["read", "write"][..]),
            ("iops", "IOPS (I/Os per second)", &["read", "write"][..]),
        ] {
            let svg_path = out.join(format!("{prefix}_{kind}.1.svg"));
            let svg = std::fs::read_to_string(&svg_path).unwrap_or_else(|e| panic!("{}: {e}", svg_path.display()));
            let x = run(
                "python3",
                &[
                    "-c",
                    "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])",
                    &svg_path.display().to_string(),
                ],
            )
            .unwrap();
            assert!(x.status.success(), "{} is not XML: {}", svg_path.display(), text(&x.stderr));
            assert!(
                svg.contains(">time (s)</text>") && svg.contains(&format!(">{y_label}</text>")),
                "{}",
                svg_path.display()
            );
            for name in series {
                assert!(svg.contains(&format!("data-name=\"{name}\"")), "{}: series {name}", svg_path.display());
            }
            assert!(!svg.contains("no data"), "{}", svg_path.display());
            let per_io_title = svg.contains("one line per I/O");
            if kind == "bw" || kind == "iops" {
                assert_eq!(per_io_title, prefix == "each", "{}: read as the wrong kind of log", svg_path.display());
            }
        }
    }
    assert!(std::fs::read_to_string(out.join("each_slat.1.svg")).unwrap().contains("no data"));
    let svg = std::fs::read_to_string(out.join("avg_clat_hist.1.svg")).unwrap();
    for want in ["data-name=\"read p99\"", "data-name=\"write p50\"", ">clat (µs, log scale)</text>", "fio histograms"]
    {
        assert!(svg.contains(want), "histogram log chart: {want}");
    }
    assert!(!svg.contains("no data"));
}

#[test]
fn a_bad_log_is_named_with_its_line_and_nothing_is_written() {
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "bench-plot-bad");
    let good = s.path("j_lat.1.log");
    std::fs::write(&good, "0, 1000, 0, 4096, 0\n").unwrap();
    let bad = s.path("j_bw.1.log");
    std::fs::write(&bad, "0, 10, 0, 4096, 0\n5, ten, 0, 4096, 0\n").unwrap();
    let out = s.dir().join("svg");
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(["bench", "plot", "--out", &out.display().to_string(), &good, &bad])
        .output_bounded()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("{bad}:2: the value column is \"ten\"")), "{err}");
    assert!(!out.exists(), "nothing is written when a log is bad");
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(["bench", "plot", "--window-ms", "0", &good])
        .output_bounded()
        .unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("--window-ms 0"), "{}", text(&o.stderr));
}

#[test]
fn the_scaling_study_runs_refuses_what_the_target_cannot_run_and_names_bad_input() {
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "bench-study");
    let out = s.dir().join("study");
    let file = format!("--filename={}", s.path("data"));
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(["bench", "sweep", "--variants", "iou,libaio,vfio", "--jobs", "1,2", "--qd", "1,4", "--out"])
        .arg(&out)
        .args(["--name=j", &file, "--size=1m", "--rw=randread", "--bs=4k", "--number_ios=100"])
        .output_bounded()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    assert!(table.contains("refused vfio: "), "a file cannot run vfio, and the study says so:\n{table}");
    let csv = std::fs::read_to_string(out.join("study.csv")).unwrap();
    // iou and libaio × 2 job counts × 2 depths.
    assert_eq!(csv.lines().count(), 1 + 8, "{csv}");
    for f in ["study.json", "iops-vs-qd-j1.svg", "iops-vs-qd-j2.svg", "iops-vs-jobs-qd1.svg", "iops-vs-jobs-qd4.svg"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    for (args, want) in [
        (&["--variants", "iou,uring"][..], "\"uring\" is not a variant"),
        (&["--jobs", "0"][..], "\"0\" is not a number of jobs"),
        (&["--variants", "iou", "--bs", "4k"][..], "--bs and --variants/--jobs do not go together"),
        (&["--jobs", "1", "--engines", "psync"][..], "--engines and --variants/--jobs do not go together"),
    ] {
        let o =
            Command::new(env!("CARGO_BIN_EXE_ioswitch")).args(["bench", "sweep"]).args(args).output_bounded().unwrap();
        assert!(!o.status.success() && text(&o.stderr).contains(want), "{args:?}: {}", text(&o.stderr));
    }
}

/// `ioswitch bench plot` on compressed logs (`log_store_compressed=1`, `.log.fz`), one
/// written by fio and one by `ioswitch bench`: each draws the same chart as the text log
/// that fio's own inflater (`fio --inflate-log`) makes of it. Skips, saying why, as the
/// test above.
#[test]
fn compressed_logs_of_fio_and_of_ioswitch_plot_as_their_inflated_text() {
    let Some((s, shm)) =
        scratches("compressed_logs_of_fio_and_of_ioswitch_plot_as_their_inflated_text", "bench-plot-fz")
    else {
        return;
    };
    let data = shm.path("data");
    let logs = s.subdir("logs");
    for (program, prefix) in [("fio", "f"), (env!("CARGO_BIN_EXE_ioswitch"), "o")] {
        let p = logs.join(prefix).display().to_string();
        let job: Vec<String> = [
            "--name=j",
            &format!("--filename={data}"),
            "--size=4m",
            "--rw=randrw",
            "--bs=4k",
            "--ioengine=psync",
            "--runtime=400ms",
            "--time_based",
            "--log_store_compressed=1",
            &format!("--write_lat_log={p}"),
            &format!("--write_bw_log={p}"),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let mut args = job.clone();
        if prefix == "o" {
            args.insert(0, "bench".into());
            args.push("--no-progress".into());
        } else {
            args.push("--output=/dev/null".into());
        }
        // fio 3.33 can hang for ever starting log_store_compressed's worker: its runs are
        // bounded and tried again (output_retrying_hangs); 5 hung runs fail the test.
        let o = if prefix == "f" {
            output_retrying_hangs(program, &args, s.dir(), 60, 5)
                .unwrap_or_else(|| panic!("fio {args:?}: 5 runs hung (fio's workqueue start), each killed after 60 s"))
        } else {
            Command::new(program).args(&args).stdin(Stdio::null()).output_bounded().unwrap()
        };
        assert!(o.status.success(), "{program} {args:?}: {}", text(&o.stderr));
    }
    let text_dir = s.subdir("inflated");
    for prefix in ["f", "o"] {
        for kind in ["lat", "clat", "bw"] {
            let fz = logs.join(format!("{prefix}_{kind}.1.log.fz"));
            assert!(fz.is_file(), "{} was not written", fz.display());
            let o = run("fio", &[&format!("--inflate-log={}", fz.display())]).unwrap();
            assert!(o.status.success(), "fio --inflate-log {}: {}", fz.display(), text(&o.stderr));
            assert!(o.stdout.len() > 100, "{}: {}", fz.display(), text(&o.stdout));
            std::fs::write(text_dir.join(format!("{prefix}_{kind}.1.log")), &o.stdout).unwrap();
            let mut svgs = Vec::new();
            for (log, out) in [(fz.clone(), "svg-fz"), (text_dir.join(format!("{prefix}_{kind}.1.log")), "svg-text")] {
                let out = s.dir().join(out);
                let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
                    .args(["bench", "plot", "--out", &out.display().to_string(), &log.display().to_string()])
                    .output_bounded()
                    .unwrap();
                assert!(o.status.success(), "plot {}: {}", log.display(), text(&o.stderr));
                let svg = std::fs::read_to_string(out.join(format!("{prefix}_{kind}.1.svg"))).unwrap();
                assert!(!svg.contains("no data"), "{}", log.display());
                svgs.push(svg.replace(".log.fz", ".log"));
            }
            assert!(svgs[0] == svgs[1], "{prefix}_{kind}: the .fz's chart is not the inflated text's");
        }
    }
}
