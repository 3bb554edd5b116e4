//! `ioswitch bench`'s time-series logs against fio's: the same small job run by both
//! tools must leave logs with the same files, columns, units and sampling rule, and fio's
//! own plotting tools (`fio2gnuplot`, `fio_generate_plots`) must accept ours.
//!
//! Needs fio (skips with the reason when it is missing); `fio_generate_plots` also needs
//! gnuplot (`./scripts/test` installs both).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::{output, output_retrying_hangs, plain, FIO};
use ioswitch_testkit::{fio_scratch, have, text};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// One parsed log: its lines' fields.
fn parse(path: &Path) -> Vec<Vec<u64>> {
    let body = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    body.lines()
        .map(|l| {
            l.split(", ")
                .map(|f| f.parse::<u64>().unwrap_or_else(|_| panic!("{}: field '{f}' of '{l}'", path.display())))
                .collect()
        })
        .collect()
}

/// The job both tools run: 4 KiB random reads at 1000 IOPS for a second, through libaio
/// at depth 4, logging every kind into `dir/PREFIX_*`.
fn job_args(file: &str, prefix: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "--name=logjob",
        &format!("--filename={file}"),
        "--size=8m",
        "--rw=randread",
        "--ioengine=libaio",
        "--iodepth=4",
        "--rate_iops=1000",
        "--runtime=1",
        "--time_based",
        &format!("--write_lat_log={prefix}"),
        &format!("--write_bw_log={prefix}"),
        &format!("--write_iops_log={prefix}"),
        "--output-format=json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// The owned form of a list of options.
fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// fio with `args` in `dir`, killed after 60 s and run again, up to 5 times: fio 3.33 can
/// hang for ever starting `log_store_compressed`'s compression worker (see
/// [`output_retrying_hangs`]; gdb on a hung job of this file: `workqueue_init` called
/// from `iolog_compress_init`). 5 hung runs fail the test.
fn fio_bounded(args: &[String], dir: &Path) -> std::process::Output {
    output_retrying_hangs(FIO, args, dir, 60, 5)
        .unwrap_or_else(|| panic!("fio {args:?}: 5 runs hung (fio's workqueue start), each killed after 60 s"))
}

/// Runs one job with fio, then with `ioswitch bench` (the same options; `args` gets the
/// log prefix of each run, `TAG-fio` and `TAG-ours`) and asserts that both succeed; returns
/// the two prefixes, fio's first.
fn run_both(s: &Scratch, tag: &str, args: impl Fn(&str) -> Vec<String>) -> [String; 2] {
    let mut prefixes = [String::new(), String::new()];
    for (i, (program, pre)) in [(FIO, "fio"), (env!("CARGO_BIN_EXE_ioswitch"), "ours")].into_iter().enumerate() {
        let prefix = s.path(&format!("{tag}-{pre}"));
        let a = args(&prefix);
        let o = if program == FIO { fio_bounded(&a, s.dir()) } else { output(program, &a, Some(s.dir())) };
        assert!(o.status.success(), "{program} {a:?}: {}\n{}", o.status, text(&o.stderr));
        prefixes[i] = prefix;
    }
    prefixes
}

const KINDS: [&str; 5] = ["lat", "clat", "slat", "bw", "iops"];

/// Runs the job with fio and with ioswitch bench; the logs of each, by kind.
fn both(s: &Scratch, tag: &str, extra: &[&str]) -> [BTreeMap<&'static str, Vec<Vec<u64>>>; 2] {
    let file = s.file("data", 8 << 20);
    let prefixes = run_both(s, tag, |prefix| job_args(&file, prefix, extra));
    prefixes.map(|prefix| {
        let mut logs = BTreeMap::new();
        for kind in KINDS {
            let path = format!("{prefix}_{kind}.1.log");
            assert!(Path::new(&path).exists(), "{prefix}: no {path} written");
            logs.insert(kind, parse(Path::new(&path)));
        }
        logs
    })
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn averaged_logs_have_fios_columns_units_and_windows() {
    let test = "averaged_logs_have_fios_columns_units_and_windows";
    let s = fio_scratch!(test, "fio-logs-avg");
    let [fio, ours] = both(&s, "avg", &["--log_avg_msec=100"]);
    for kind in KINDS {
        let (f, o) = (&fio[kind], &ours[kind]);
        assert!(!f.is_empty() && !o.is_empty(), "{kind}: fio {} lines, ours {}", f.len(), o.len());
        // Same columns: time, value, direction, block size (0 when averaged), priority.
        assert!(f.iter().chain(o).all(|l| l.len() == 5), "{kind}: a line without 5 fields");
        for (who, log) in [("fio", f), ("ours", o)] {
            assert!(log.iter().all(|l| l[2] == 0 && l[3] == 0 && l[4] == 0), "{who} {kind}: {log:?}");
            // fio's windows (the machine may stall either tool, so no upper bound): a
            // latency window closes at the first sample 100 ms or more after its start,
            // rounded down to a multiple of 100 ms, so no two entries share a multiple; a
            // bw or iops entry is a rate over at least 100 ms less fio's 1 ms of slack.
            // The last entry is what is left when the job ends.
            let inner = &log[..log.len() - 1];
            if matches!(kind, "lat" | "clat" | "slat") {
                let slots: Vec<u64> = inner.iter().map(|l| l[0] / 100).collect();
                assert!(slots[0] >= 1 && slots.windows(2).all(|w| w[0] < w[1]), "{who} {kind}: times {log:?}");
            } else {
                let steps: Vec<u64> = inner.windows(2).map(|w| w[1][0] - w[0][0]).collect();
                assert!(inner[0][0] >= 99 && steps.iter().all(|&d| d >= 99), "{who} {kind}: times {log:?}");
            }
            // At most one entry per 100 ms of a 1 s run, and some.
            assert!((4..=12).contains(&log.len()), "{who} {kind}: {} entries", log.len());
        }
    }
    // The same units: rates near 1000 IOPS and 4000 KiB/s; latencies in ns (µs-scale
    // reads of a file, not ms or µs numbers).
    for (who, logs) in [("fio", &fio), ("ours", &ours)] {
        let iops = median(logs["iops"].iter().map(|l| l[1]).collect());
        let bw = median(logs["bw"].iter().map(|l| l[1]).collect());
        assert!((800..=1200).contains(&iops), "{who}: median iops entry {iops}");
        assert!((3200..=4800).contains(&bw), "{who}: median bw entry {bw} KiB/s");
        let lat = median(logs["lat"].iter().map(|l| l[1]).collect());
        assert!((500..50_000_000).contains(&lat), "{who}: median lat entry {lat} (ns?)");
    }
    let (fl, ol) =
        (median(fio["clat"].iter().map(|l| l[1]).collect()), median(ours["clat"].iter().map(|l| l[1]).collect()));
    assert!(fl / 20 <= ol && ol <= fl * 20, "clat medians: fio {fl} ns, ours {ol} ns: not the same unit");
}

#[test]
fn per_io_logs_have_fios_columns_and_one_entry_per_io() {
    let test = "per_io_logs_have_fios_columns_and_one_entry_per_io";
    let s = fio_scratch!(test, "fio-logs-each");
    let [fio, ours] = both(&s, "each", &["--log_offset=1"]);
    for kind in KINDS {
        let (f, o) = (&fio[kind], &ours[kind]);
        // time, value, direction, block size, offset, priority.
        assert!(f.iter().chain(o).all(|l| l.len() == 6), "{kind}: a line without 6 fields");
        for (who, log) in [("fio", f), ("ours", o)] {
            // About 1000 I/Os in the second.
            assert!((800..=1200).contains(&log.len()), "{who} {kind}: {} entries", log.len());
            assert!(log.windows(2).all(|w| w[0][0] <= w[1][0]), "{who} {kind}: time goes back");
            assert!(log.iter().all(|l| l[2] == 0 && l[3] == 4096 && l[5] == 0), "{who} {kind}: ddir/bs/prio");
            assert!(log.iter().all(|l| l[4] % 4096 == 0 && l[4] < 8 << 20), "{who} {kind}: offsets");
            if kind == "iops" {
                assert!(log.iter().all(|l| l[1] == 1), "{who}: a per-I/O iops entry is 1");
            }
        }
    }
}

#[test]
fn fios_plot_tools_accept_our_logs() {
    let test = "fios_plot_tools_accept_our_logs";
    let s = fio_scratch!(test, "fio-logs-plot", ("fio2gnuplot", "-h"));
    let file = s.file("data", 8 << 20);
    let args = job_args(&file, "ours", &["--log_avg_msec=100"]);
    let o = output(env!("CARGO_BIN_EXE_ioswitch"), &args, Some(s.dir()));
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (flag, kind) in [("-b", "bw"), ("-i", "iops")] {
        let o = plain("fio2gnuplot", &[flag, "-o", kind], Some(s.dir()));
        assert!(o.status.success(), "fio2gnuplot {flag}: {}\n{}", text(&o.stdout), text(&o.stderr));
        assert!(text(&o.stdout).contains(&format!("ours_{kind}.1.log")), "fio2gnuplot did not read our log");
        // Its statistics of the trace ("0 MEAN" after comment lines): the job's rate,
        // 1000 IOPS or 4000 KiB/s, within 20%.
        let avg = fs::read_to_string(s.dir().join(format!("{kind}.average"))).expect("fio2gnuplot's .average");
        let mean = avg.lines().last().and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok());
        let want = if kind == "bw" { 4000.0 } else { 1000.0 };
        assert!(mean.is_some_and(|v| (v / want - 1.0).abs() < 0.2), "{kind}.average: {avg:?}");
    }
    if !have("gnuplot", "--version", test) {
        return;
    }
    let o = plain("fio_generate_plots", &["ioswitch"], Some(s.dir()));
    assert!(o.status.success(), "fio_generate_plots: {}\n{}", text(&o.stdout), text(&o.stderr));
    for kind in KINDS {
        let svg = s.dir().join(format!("ioswitch-{kind}.svg"));
        let body = fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{}: {e}", svg.display()));
        // The trace of our log is in the plot (fio_generate_plots fails when it finds no
        // log; it names each trace after its file: "Queue depth ours.1").
        assert!(body.contains("ours.1") && body.contains("<path"), "{kind}: {} bytes", body.len());
    }
}

#[test]
fn hist_logs_have_fios_columns_and_intervals() {
    let test = "hist_logs_have_fios_columns_and_intervals";
    let s = fio_scratch!(test, "fio-logs-hist");
    let file = s.file("data", 8 << 20);
    let mut logs = Vec::new();
    for (program, pre) in [(FIO, "fio"), (env!("CARGO_BIN_EXE_ioswitch"), "ours")] {
        let prefix = s.path(&format!("hist-{pre}"));
        let mut args = job_args(&file, &prefix, &["--log_hist_msec=100", "--log_hist_coarseness=1"]);
        args.retain(|a| !a.starts_with("--write_"));
        args.push(format!("--write_hist_log={prefix}"));
        let o = output(program, &args, Some(s.dir()));
        assert!(o.status.success(), "{program} {args:?}: {}", text(&o.stderr));
        logs.push((pre, parse(Path::new(&format!("{prefix}_clat_hist.1.log")))));
    }
    for (who, log) in &logs {
        // time, direction, block size, then fio's 1856 buckets two to a column.
        assert!(log.iter().all(|l| l.len() == 3 + 1856 / 2), "{who}: a line without 931 fields");
        assert!(log.iter().all(|l| l[1] == 0 && l[2] == 4096), "{who}: direction or block size");
        assert!((5..=12).contains(&log.len()), "{who}: {} lines in 1 s at 100 ms", log.len());
        // Each line counts the I/Os of its interval (the first from the first completion):
        // about 100 at 1000 IOPS (a stalled machine makes bursts), and they add up to about
        // the run's 1000.
        let sums: Vec<u64> = log.iter().map(|l| l[3..].iter().sum()).collect();
        assert!(sums[..sums.len() - 1].iter().all(|&n| (20..=400).contains(&n)), "{who}: per line {sums:?}");
        let total: u64 = sums.iter().sum();
        assert!((500..=1100).contains(&total), "{who}: {total} I/Os in all lines");
    }
}

/// The columns of a CSV that `fio_jsonplus_clat2csv` wrote, and which of them hold a value
/// in some row; the largest value of each `…_cumulative` column.
fn clat_csv(path: &Path) -> (Vec<String>, Vec<String>, BTreeMap<String, u64>) {
    let body = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = body.lines();
    let head: Vec<String> = lines.next().expect("a header").split(',').map(|c| c.trim().to_string()).collect();
    let mut filled = BTreeMap::new();
    for l in lines {
        for (col, v) in head.iter().zip(l.split(',')) {
            let v = v.trim();
            if !v.is_empty() && !col.is_empty() {
                let n = v.parse::<f64>().unwrap_or_else(|_| panic!("{}: '{v}' in column {col}", path.display()));
                let e = filled.entry(col.clone()).or_insert(0);
                *e = (*e).max(n as u64);
            }
        }
    }
    let cols = filled.keys().cloned().collect();
    (head, cols, filled)
}

#[test]
fn fio_jsonplus_clat2csv_reads_our_json_plus_as_it_reads_fios() {
    let test = "fio_jsonplus_clat2csv_reads_our_json_plus_as_it_reads_fios";
    let s = fio_scratch!(test, "fio-jsonplus", ("fio_jsonplus_clat2csv", "--help"));
    let file = s.file("data", 4 << 20);
    let mut got = Vec::new();
    for (program, who) in [(FIO, "fio"), (env!("CARGO_BIN_EXE_ioswitch"), "ours")] {
        let args = [
            "--name=jp".to_string(),
            format!("--filename={file}"),
            "--size=4m".into(),
            "--rw=randrw".into(),
            "--ioengine=libaio".into(),
            "--iodepth=4".into(),
            "--number_ios=300".into(),
            "--output-format=json+".into(),
            format!("--output={who}.json"),
        ];
        let o = output(program, &args, Some(s.dir()));
        assert!(o.status.success(), "{program} {args:?}: {}\n{}", o.status, text(&o.stderr));
        let (json, csv) = (format!("{who}.json"), format!("{who}.csv"));
        for extra in [None, Some("--validate")] {
            let mut a = vec![json.as_str(), csv.as_str()];
            a.extend(extra);
            let o = plain("fio_jsonplus_clat2csv", &a, Some(s.dir()));
            let out = text(&o.stdout);
            assert!(
                o.status.success(),
                "fio_jsonplus_clat2csv {a:?} on {who}'s: {}\n{out}{}",
                o.status,
                text(&o.stderr)
            );
            let word = if extra.is_some() { "validated" } else { "generated" };
            assert!(out.contains(&format!("{who}_job0.csv {word}")), "{a:?}: {out}");
        }
        got.push(clat_csv(&s.dir().join(format!("{who}_job0.csv"))));
    }
    let [(fio_head, fio_cols, _), (our_head, our_cols, ours)] = [got.remove(0), got.remove(0)];
    assert_eq!(our_head, fio_head, "the same columns");
    assert_eq!(our_cols, fio_cols, "the same columns hold values (slat, clat, lat of reads and writes)");
    // Every I/O is in the clat histograms: the reads' and writes' cumulative counts add up.
    let n = ours["read_clat_ns_cumulative"] + ours["write_clat_ns_cumulative"];
    assert_eq!(n, 300, "{ours:?}");
}

#[test]
fn trim_jobs_log_their_trims_in_direction_2_as_fio() {
    let test = "trim_jobs_log_their_trims_in_direction_2_as_fio";
    let s = fio_scratch!(test, "fio-logs-trim");
    // fio 3.33 trims block devices only (a file's trim is ENOTTY there): a loop device.
    let lo = match ioswitch_testkit::loopdev::LoopDev::setup(s.dir(), "fio-logs-trim", 4 << 20) {
        Ok(lo) => lo,
        Err(why) => return ioswitch_testkit::skip(test, &why),
    };
    let dev = lo.dev.display().to_string();
    let prefixes = run_both(&s, "trim", |prefix| {
        owned(&[
            "--name=trimjob",
            &format!("--filename={dev}"),
            "--size=1m",
            "--bs=64k",
            "--rw=randtrim",
            "--ioengine=psync",
            "--log_offset=1",
            &format!("--write_lat_log={prefix}"),
            &format!("--write_bw_log={prefix}"),
            &format!("--write_iops_log={prefix}"),
            "--output-format=json",
        ])
    });
    let logs = prefixes.map(|prefix| {
        let mut by_kind = BTreeMap::new();
        for kind in ["lat", "clat", "bw", "iops"] {
            by_kind.insert(kind, parse(Path::new(&format!("{prefix}_{kind}.1.log"))));
        }
        by_kind
    });
    let (fio, ours) = (&logs[0], &logs[1]);
    for kind in ["lat", "clat", "bw", "iops"] {
        for (who, log) in [("fio", &fio[kind]), ("ours", &ours[kind])] {
            // One entry per trim: time, value, direction 2, block size, offset, priority.
            assert_eq!(log.len(), 16, "{who} {kind}: {log:?}");
            assert!(
                log.iter().all(|l| l.len() == 6 && l[2] == 2 && l[3] == 65536 && l[5] == 0),
                "{who} {kind}: {log:?}"
            );
        }
        let offsets = |log: &Vec<Vec<u64>>| {
            let mut v: Vec<u64> = log.iter().map(|l| l[4]).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(offsets(&ours[kind]), offsets(&fio[kind]), "{kind}: every 64 KiB block of the 1 MiB trimmed once");
        if kind == "iops" {
            assert!(ours[kind].iter().all(|l| l[1] == 1), "ours iops: 1 per I/O, as fio's");
        }
    }
}

#[test]
fn compressed_logs_are_fz_files_that_fio_inflates_as_it_inflates_its_own() {
    let test = "compressed_logs_are_fz_files_that_fio_inflates_as_it_inflates_its_own";
    let s = fio_scratch!(test, "fio-logs-fz");
    let file = s.file("data", 1 << 20);
    // Per I/O entries of a sequential read of 1 MiB in 4 KiB blocks: 256 each, in order.
    let prefixes = run_both(&s, "fz", |prefix| {
        owned(&[
            "--name=fzjob",
            &format!("--filename={file}"),
            "--size=1m",
            "--rw=read",
            "--ioengine=psync",
            "--log_offset=1",
            "--log_store_compressed=1",
            &format!("--write_lat_log={prefix}"),
            &format!("--write_iops_log={prefix}"),
            "--output-format=json",
        ])
    });
    let inflated = prefixes.map(|prefix| {
        let mut by_kind = BTreeMap::new();
        for kind in ["lat", "clat", "iops"] {
            let fz = format!("{prefix}_{kind}.1.log.fz");
            assert!(Path::new(&fz).exists(), "{prefix}: no {fz} written");
            assert!(!Path::new(&format!("{prefix}_{kind}.1.log")).exists(), "{prefix}: a text log too");
            let o = output(FIO, &[&format!("--inflate-log={fz}")], Some(s.dir()));
            assert!(o.status.success(), "fio --inflate-log={fz}: {}", text(&o.stderr));
            let txt = format!("{prefix}-{kind}.txt");
            fs::write(&txt, &o.stdout).unwrap();
            by_kind.insert(kind, parse(Path::new(&txt)));
        }
        by_kind
    });
    for kind in ["lat", "clat", "iops"] {
        let (f, o) = (&inflated[0][kind], &inflated[1][kind]);
        // time, value, direction, block size, offset, priority: the same but for time and
        // latency.
        let rest = |log: &Vec<Vec<u64>>| log.iter().map(|l| l[2..].to_vec()).collect::<Vec<_>>();
        assert!(f.iter().chain(o).all(|l| l.len() == 6), "{kind}: a line without 6 fields");
        assert_eq!(rest(o), rest(f), "{kind}: direction, block size, offset and priority");
        assert_eq!(o.len(), 256, "{kind}");
        assert!(o.windows(2).all(|w| w[0][0] <= w[1][0]), "ours {kind}: time goes back");
        if kind == "iops" {
            assert!(o.iter().chain(f).all(|l| l[1] == 1), "{kind}: 1 per I/O");
        }
    }
}

/// A job's read bandwidth and IOPS sample counts, and its reads, from its JSON.
fn sample_counts(out: &[u8]) -> [i64; 3] {
    let out = text(out);
    let j: serde_json::Value = serde_json::from_str(&out[out.find('{').expect("a JSON report")..]).expect("JSON");
    let r = &j["jobs"][0]["read"];
    ["bw_samples", "iops_samples", "total_ios"].map(|k| r[k].as_i64().unwrap_or(-1))
}

#[test]
fn bw_and_iops_statistics_sample_as_fio_does_with_and_without_logs() {
    let t = "bw_and_iops_statistics_sample_as_fio_does_with_and_without_logs";
    let s = fio_scratch!(t, "logsamples");
    let file = s.path("f");
    // 300 reads: with a log of one entry per I/O, each read is a sample of that kind (fio's
    // per_unit_log); with log_avg_msec, or without the log, samples are per window, and
    // windows of a minute (longer than the job, however slow the machine) close none.
    // The same from both tools.
    let cases: [(&[&str], [i64; 3]); 4] = [
        (&["--bwavgtime=60000", "--iopsavgtime=60000"], [0, 0, 300]),
        (&["--write_bw_log=b", "--iopsavgtime=60000"], [300, 0, 300]),
        (&["--write_iops_log=i", "--bwavgtime=60000"], [0, 300, 300]),
        (&["--write_bw_log=b", "--write_iops_log=i", "--log_avg_msec=60000"], [0, 0, 300]),
    ];
    for (extra, want) in cases {
        let filename = format!("--filename={file}");
        let mut args = vec!["--name=j", &filename, "--size=16m", "--rw=randread", "--bs=4k", "--number_ios=300"];
        args.extend(["--output-format=json"].iter().chain(extra));
        let got = [FIO, env!("CARGO_BIN_EXE_ioswitch")].map(|p| sample_counts(&output(p, &args, Some(s.dir())).stdout));
        println!("{extra:?}: fio {:?}, ours {:?}", got[0], got[1]);
        assert_eq!(got[0], want, "{extra:?}: fio");
        assert_eq!(got[1], got[0], "{extra:?}: ours against fio's");
    }
}
