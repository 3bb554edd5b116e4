//! `ioswitch bench` driven as a fio user drives it: fio's arguments and job files in,
//! fio's JSON and text out, exit status 1 when a job fails. fio itself is the oracle for
//! the JSON layout and (loosely) for the numbers; tests that need it say so and pass
//! without it when it is not installed (`./scripts/test` installs it).
//!
//! The tests take one lock each so that they run one at a time: two of them compare
//! throughput, which other tests running beside them on a 2-CPU machine would distort.

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::{plain, success, OutputBounded, FIO};
use ioswitch_testkit::{fio_scratch, pattern, serial, text};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A scratch directory for one test, removed when the test ends.
fn scratch(test: &str) -> Scratch {
    Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("bench-{test}"))
}

/// A file of `len` bytes that are not all the same in `s`; its path.
fn data_file(s: &Scratch, name: &str, len: usize) -> String {
    let p = s.path(name);
    fs::write(&p, pattern::bytes(1, len)).expect("write data file");
    p
}

/// A file holding `text` in `s`; its path.
fn text_file(s: &Scratch, name: &str, text: &str) -> String {
    let p = s.path(name);
    fs::write(&p, text).expect("write job file");
    p
}

fn bench(args: &[&str]) -> Output {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    plain(env!("CARGO_BIN_EXE_ioswitch"), &all, None)
}

/// Runs `ioswitch bench ARGS` that must end with exit status `code` (1: input refused,
/// 2: a usage error) and a message holding each of `said`.
fn refused(args: &[&str], code: i32, said: &[&str]) {
    let o = bench(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "ioswitch bench {args:?}:\n{err}");
    for s in said {
        assert!(err.contains(s), "ioswitch bench {args:?}: no {s:?} in:\n{err}");
    }
}

/// The JSON report of the job `args` run by `program` (fio, or `ioswitch bench`: see
/// testkit's `command`), which must succeed.
fn json_of(program: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--output-format=json");
    let o = success(program, &all, None);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{program}: not JSON ({e}):\n{}", text(&o.stdout)))
}

/// Runs `ioswitch bench ARGS` that must succeed, and parses its JSON.
fn bench_json(args: &[&str]) -> Value {
    json_of(env!("CARGO_BIN_EXE_ioswitch"), args)
}

fn fio_json(args: &[&str]) -> Value {
    json_of(FIO, args)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every key path under `v` with its JSON type; the keys of percentile lists and
/// histogram bins are values (they depend on the data) and are left out.
fn key_types(v: &Value, path: &str, out: &mut BTreeMap<String, &'static str>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let p = format!("{path}/{k}");
                out.insert(p.clone(), kind(child));
                if k != "percentile" && k != "bins" {
                    key_types(child, &p, out);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                key_types(child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

const TWO_JOBS: &str = "\
[global]
filename={file}
size=16m
bs=4k
rw=randread

[uring]
ioengine=io_uring
iodepth=4

[sync]
stonewall
ioengine=psync
rw=randrw
";

#[test]
fn json_has_every_key_fio_emits_with_fios_types() {
    let _one = serial();
    let s = fio_scratch!("json_has_every_key_fio_emits_with_fios_types", "bench-keys");
    let file = data_file(&s, "data", 16 << 20);
    let job = text_file(&s, "two.fio", &TWO_JOBS.replace("{file}", &file));
    let fio = fio_json(&[&job]);
    let ours = bench_json(&[&job]);
    let (mut theirs, mut mine) = (BTreeMap::new(), BTreeMap::new());
    key_types(&fio, "", &mut theirs);
    key_types(&ours, "", &mut mine);
    // fio's disk_util holds the block device's own counters (/sys/block/*/stat), which
    // ioswitch does not collect; fio leaves it out too where it finds no disk.
    theirs.retain(|k, _| !k.starts_with("/disk_util"));
    let mut wrong = Vec::new();
    for (k, t) in &theirs {
        match mine.get(k) {
            None => wrong.push(format!("missing {k} ({t})")),
            Some(m) if m != t => wrong.push(format!("{k}: fio has {t}, ioswitch has {m}")),
            Some(_) => {}
        }
    }
    // The layout is fio 3.33's (Debian's fio). A newer fio may add keys: those alone are
    // let pass (and listed); a key of another type, or one ioswitch emits that fio does
    // not have, is wrong with any fio.
    if fio["fio version"] != "fio-3.33" {
        let added: Vec<String> = wrong.iter().filter(|w| w.starts_with("missing ")).cloned().collect();
        wrong.retain(|w| !w.starts_with("missing "));
        let _ = writeln!(
            std::io::stderr(),
            "note: {} is not fio-3.33; keys it has that 3.33 lacks: {}",
            fio["fio version"],
            added.join(", ")
        );
    }
    for (k, m) in &mine {
        let ours_only = k.contains("/ioswitch");
        if !ours_only && !theirs.contains_key(k) && !k.starts_with("/disk_util") {
            wrong.push(format!("ioswitch has {k} ({m}), fio does not"));
        }
    }
    assert!(wrong.is_empty(), "{} differences:\n{}", wrong.len(), wrong.join("\n"));
    // The per-direction objects were compared; make sure there was something in them.
    assert!(theirs.contains_key("/jobs[1]/write/clat_ns/percentile"));
    assert!(mine.contains_key("/jobs[0]/read/slat_ns/N") && mine.contains_key("/jobs[0]/ioswitch/syscalls_per_io"));
    assert_eq!(ours["jobs"][0]["jobname"], "uring");
    assert_eq!(ours["jobs"][1]["groupid"], 1, "a stonewall starts a new group, as in fio");
    assert_eq!(ours["jobs"][0]["job options"], fio["jobs"][0]["job options"]);
    assert_eq!(ours["global options"], fio["global options"]);
    assert_eq!(ours["jobs"][0]["ioswitch"]["interface"], "io_uring");
    assert_eq!(ours["jobs"][1]["ioswitch"]["interface"], "psync");
    assert_eq!(ours["jobs"][0]["read"]["total_ios"], 4096);
}

/// The same fixed-count job through fio and through `ioswitch bench` moves the same I/Os
/// and bytes, and each tool's IOPS and bandwidth are its I/O count over its runtime: what
/// the two report agrees in meaning (how fast each ran is a benchmark, BENCHMARKS.md).
#[test]
fn the_same_job_moves_the_same_ios_and_reports_rates_as_fio_does() {
    let _one = serial();
    let s = fio_scratch!("the_same_job_moves_the_same_ios_and_reports_rates_as_fio_does", "bench-iops");
    let file = data_file(&s, "data", 16 << 20);
    let filename = format!("--filename={file}");
    let common = [
        "--name=cmp",
        filename.as_str(),
        "--size=16m",
        "--bs=64k",
        "--rw=randread",
        "--ioengine=psync",
        "--number_ios=200",
        "--invalidate=0",
    ];
    let (fio, ours) = (fio_json(&common), bench_json(&common));
    let get = |v: &Value, k: &str| v["jobs"][0]["read"][k].as_f64().unwrap_or_else(|| panic!("read.{k} in {v}"));
    for k in ["total_ios", "io_bytes"] {
        assert_eq!(get(&ours, k), get(&fio, k), "{k}: ioswitch and fio ran the same job");
    }
    assert_eq!(get(&ours, "total_ios"), 200.0);
    assert_eq!(get(&ours, "io_bytes"), 200.0 * 65536.0);
    for (tool, v) in [("fio", &fio), ("ioswitch", &ours)] {
        let (ios, ms, iops) = (get(v, "total_ios"), get(v, "runtime"), get(v, "iops"));
        assert!(ms > 0.0, "{tool}: runtime {ms} ms");
        // fio's runtime is whole milliseconds, its iops from the exact time: within the
        // rounding of one millisecond.
        let (lo, hi) = (ios * 1000.0 / (ms + 1.0), ios * 1000.0 / (ms - 1.0).max(0.5));
        assert!((lo..=hi).contains(&iops), "{tool}: {iops} IOPS for {ios} I/Os in {ms} ms");
        let bw = get(v, "bw_bytes");
        assert!((bw / (iops * 65536.0) - 1.0).abs() < 0.01, "{tool}: bw_bytes {bw} is not IOPS x 64 KiB");
    }
}

fn flip_byte(path: &str, offset: u64) {
    let f = fs::OpenOptions::new().read(true).write(true).open(path).expect("open data file");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).expect("read a byte");
    b[0] ^= 0x5A;
    f.write_all_at(&b, offset).expect("write a byte");
    f.sync_all().expect("sync");
}

#[test]
fn verify_passes_on_good_data_and_names_the_offset_of_a_bad_block() {
    let _one = serial();
    let s = scratch("verify");
    let file = s.path("v.dat");
    let filename = format!("--filename={file}");
    let f = filename.as_str();
    for (rw, kind) in [("write", "crc32c"), ("randwrite", "md5")] {
        let (rw, verify) = (format!("--rw={rw}"), format!("--verify={kind}"));
        let v = bench_json(&["--name=wv", f, "--size=1m", "--bs=4k", &rw, &verify]);
        let job = &v["jobs"][0];
        assert_eq!(job["error"], 0, "{job}");
        assert_eq!(job["write"]["total_ios"], 256);
        assert_eq!(job["ioswitch"]["verified_blocks"], 256, "{kind}: every written block read back");
    }
    // Write with checksums but no verify pass; check with a separate read job.
    let v = bench_json(&["--name=w", f, "--size=1m", "--bs=4k", "--rw=write", "--verify=crc32c", "--do_verify=0"]);
    assert_eq!(v["jobs"][0]["ioswitch"]["verified_blocks"], 0);
    let read_job = ["--name=r", f, "--size=1m", "--bs=4k", "--rw=read", "--verify=crc32c", "--no-progress"];
    let v = bench_json(&read_job);
    assert_eq!(v["jobs"][0]["ioswitch"]["verified_blocks"], 256, "a read job with verify= checks the region");
    flip_byte(&file, 3 * 4096 + 100);
    let o = bench(&read_job);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "a bad block fails the run:\n{err}");
    assert!(err.contains("offset 12288") && err.contains("crc32c"), "{err}");
    assert!(text(&o.stdout).contains("r: (groupid=0, jobs=1): err="), "the report is still printed");
}

#[test]
fn a_file_named_like_a_size_is_a_file_as_in_fio_and_ramdisks_take_their_prefix() {
    let _one = serial();
    let s = scratch("size-named");
    let in_scratch = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
            .arg("bench")
            .arg("--no-progress")
            .args(args)
            .current_dir(s.dir())
            .stdin(Stdio::null())
            .output_bounded()
            .expect("run ioswitch bench");
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    };
    // fio's backwards-read.fio names its file `128m`: a file in the working directory.
    let job = text_file(&s, "j.fio", "[j]\nfilename=128m\nsize=64k\nrw=write\nbs=4k\n");
    let line = ["--name=j", "--filename=128m", "--size=64k", "--rw=write", "--bs=4k"];
    for args in [&[job.as_str()][..], &line[..]] {
        let _ = fs::remove_file(s.path("128m"));
        in_scratch(args);
        let len = fs::metadata(s.path("128m")).map(|m| m.len());
        assert_eq!(len.ok(), Some(64 << 10), "{args:?}: the file 128m holds the job's 64 KiB");
    }
    // The library's ramdisk stays reachable through its prefix, its colon escaped as fio
    // escapes one: the job runs and no file is created.
    fs::remove_file(s.path("128m")).expect("remove 128m");
    in_scratch(&["--name=r", "--filename=ramdisk\\:1m", "--size=64k", "--rw=write", "--ioengine=ioswitch"]);
    let names: Vec<String> = fs::read_dir(s.dir())
        .expect("list scratch")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into())
        .collect();
    assert_eq!(names, ["j.fio"], "a ramdisk job creates no file");
}

#[test]
fn an_unknown_option_names_itself_and_its_line() {
    let _one = serial();
    let s = scratch("unknown");
    let job = text_file(&s, "bad.fio", "[global]\nsize=1m\n[j]\nrw=read\nbogus_option=1\n");
    refused(&[&job], 1, &["bogus_option", &format!("{job}:5")]);
    // On the command line the place is the argument as typed (our own options counted).
    refused(&["--no-progress", "--name=j", "--size=1m", "--bogus_option=1"], 1, &["bogus_option", "argument 4"]);
    // A --section naming no job of the file says which jobs there are, not "only global
    // options"; more jobs than fio runs in one go are refused before a thread starts
    // (100000 threads ran until the machine gave out).
    let two = text_file(&s, "two.fio", "[global]\nsize=1m\n[reader]\nrw=read\n[writer]\nrw=write\n");
    refused(&[&two, "--section=raeder"], 1, &["--section 'raeder' names no job", "'reader', 'writer'"]);
    let started = std::time::Instant::now();
    refused(&["--name=j", "--size=1m", "--numjobs=100000"], 1, &["argument 3", "numjobs=100000", "at most 4096"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "refused at once, not after starting threads");
    // An async job deeper than a queue holds names the job's option, not the library's
    // (posixaio: an engine every Linux has).
    let f = s.path("deep");
    let filename = format!("--filename={f}");
    refused(
        &["--name=j", &filename, "--size=64k", "--ioengine=posixaio", "--iodepth=5000"],
        1,
        &["job j: iodepth=5000: an ioswitch queue holds at most 4096 commands"],
    );
    // A job that does not fit its file names the job once.
    let small = format!("--filename={}", s.path("small"));
    let o = bench(&["--name=j", &small, "--size=1k", "--bs=4k"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("argument 3: job j: read block size 4096 must be 1..=1024"), "{err}");
    assert!(!err.contains("job j: job j"), "{err}");
    // A CPU the machine does not have is refused, as fio refuses it; the job does not run
    // unpinned without a word.
    let possible = fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    if possible.trim().rsplit(['-', ',']).next().and_then(|c| c.parse::<u32>().ok()).is_some_and(|top| top < 1023) {
        refused(
            &["--name=j", &small, "--size=64k", "--cpus_allowed=1023"],
            1,
            &["job j: cpus_allowed: CPU 1023 does not exist: this machine has CPUs 0..="],
        );
    } else {
        eprintln!("skipping the cpus_allowed check: /sys/devices/system/cpu/possible is {possible:?}");
    }
    // Nothing runs and nothing is created.
    assert!(!Path::new("j.0.0").exists());
}

#[test]
fn async_latencies_add_up_and_text_is_fio_like() {
    let _one = serial();
    let s = scratch("async");
    let file = data_file(&s, "data", 4 << 20);
    let filename = format!("--filename={file}");
    let args =
        ["--name=a", filename.as_str(), "--size=4m", "--bs=4k", "--rw=randread", "--ioengine=io_uring", "--iodepth=8"];
    let v = bench_json(&args);
    let read = &v["jobs"][0]["read"];
    let stat = |lat: &str, k: &str| read[lat][k].as_f64().unwrap_or_else(|| panic!("{lat}.{k} in {read}"));
    let n = stat("lat_ns", "N");
    assert_eq!(n, 1024.0);
    assert_eq!((stat("slat_ns", "N"), stat("clat_ns", "N")), (n, n));
    let (slat, clat, lat) = (stat("slat_ns", "mean"), stat("clat_ns", "mean"), stat("lat_ns", "mean"));
    // Every lat sample is its slat plus its clat; the means differ only by rounding.
    assert!((lat - slat - clat).abs() <= 1e-6 * lat, "slat {slat} + clat {clat} != lat {lat}");
    assert!(stat("lat_ns", "min") >= stat("clat_ns", "min") && stat("lat_ns", "max") >= stat("clat_ns", "max"));
    // The same job in the default (text) format.
    let mut targs = args.to_vec();
    targs.push("--no-progress");
    let o = bench(&targs);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for want in [
        "a: (g=0): rw=randread, bs=(R) 4096B-4096B",
        "a: (groupid=0, jobs=1): err= 0: pid=",
        "  read: IOPS=",
        "    slat (",
        "    clat (",
        "     lat (",
        "    clat percentiles (",
        "  cpu          : usr=",
        "  IO depths    : 1=",
        "     issued rwts: total=1024,0,0,0",
        "  ioswitch     : interface=io_uring, syscalls=",
        "Run status group 0 (all jobs):\n   READ: bw=",
    ] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
}

#[test]
fn the_default_run_compares_every_interface_in_one_table() {
    let _one = serial();
    let o = bench(&[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for iface in ["psync", "io_uring", "libaio", "posix", "thrpool", "emu", "nil"] {
        assert!(out.lines().any(|l| l.starts_with(iface)), "no row for {iface}:\n{out}");
    }
    assert!(out.contains("syscalls/IO") && out.contains("p99"), "{out}");
}

#[test]
fn compare_sweep_and_overhead_run_and_name_bad_input() {
    let _one = serial();
    let s = scratch("nested");
    let f = data_file(&s, "f", 4 << 20);
    let job = [
        "--name=j",
        &format!("--filename={f}"),
        "--size=4m",
        "--rw=randread",
        "--bs=4k",
        "--runtime=100ms",
        "--time_based",
    ];
    let mut args = vec!["compare", "--engines", "emu,nil", "--reps", "1", "--output-format", "json"];
    args.extend(job);
    let o = bench(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("compare JSON parses");
    assert!(v.to_string().contains("\"emu\"") && v.to_string().contains("\"nil\""), "{v}");

    let out = s.path("sweep");
    let mut args = vec!["sweep", "--engines", "emu,nil", "--qd", "1,4", "--bs", "4k,8k", "--out", &out];
    args.extend(job);
    let o = bench(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for name in ["sweep.csv", "sweep.json", "lat-vs-qd.svg", "lat-vs-bs.svg", "iops-vs-qd.svg"] {
        assert!(Path::new(&out).join(name).exists(), "{name} missing");
    }
    let csv = fs::read_to_string(Path::new(&out).join("sweep.csv")).unwrap();
    assert!(csv.lines().count() > 4, "{csv}");
    // The sweep's own CSV plots again without a run; the same file twice repeats every
    // point and is refused; --from-csv runs nothing, so engines do not go with it.
    let csv_path = format!("{out}/sweep.csv");
    let replot = s.path("replot");
    let o = bench(&["sweep", "--from-csv", &csv_path, "--out", &replot]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for name in
        ["lat-vs-qd.svg", "iops-vs-qd.svg", "cpu-per-io-vs-qd.svg", "syscalls-per-io-vs-qd.svg", "lat-vs-bs.svg"]
    {
        let svg = fs::read_to_string(Path::new(&replot).join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(svg.contains(">emu</text>") && svg.contains(">nil</text>"), "{name}: one line per interface");
    }
    refused(&["sweep", "--from-csv", &csv_path, "--from-csv", &csv_path, "--out", &replot], 1, &["and again in"]);
    refused(&["sweep", "--from-csv", &csv_path, "--engines", "emu", "--out", &replot], 1, &["runs nothing"]);
    // Two scaling studies of one job, run apart (as the kernel variants and vfio are,
    // around a rebind), merge into one study: its CSV and the paper's plots with the
    // variants of both; a sweep.csv does not go with study.csv files.
    let mut studies = Vec::new();
    for v in ["libaio", "iou"] {
        let dir = s.path(&format!("study-{v}"));
        let mut args = vec!["sweep", "--variants", v, "--jobs", "1,2", "--qd", "1", "--reps", "1", "--out", &dir];
        args.extend(job);
        let o = bench(&args);
        assert!(o.status.success(), "{v}: {}", text(&o.stderr));
        studies.push(format!("{dir}/study.csv"));
    }
    let merged = s.path("merged");
    let o = bench(&["sweep", "--from-csv", &studies[0], "--from-csv", &studies[1], "--out", &merged]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let csv = fs::read_to_string(Path::new(&merged).join("study.csv")).unwrap();
    let variants: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(variants, ["libaio", "libaio", "iou", "iou"], "{csv}");
    let svg = fs::read_to_string(Path::new(&merged).join("iops-vs-jobs-qd1.svg")).unwrap();
    assert!(svg.contains(">libaio</text>") && svg.contains(">iou</text>"), "{svg}");
    assert!(Path::new(&merged).join("iops-vs-qd-j2.svg").exists());
    refused(
        &["sweep", "--from-csv", &studies[0], "--from-csv", &csv_path, "--out", &merged],
        1,
        &["give files of one kind"],
    );

    let o = bench(&["overhead", "--engines", "nil", "--qd", "1", "--bs", "4k", "--reps", "2", "--run-ms", "5"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // One table row for the one point asked for: nil, qd 1, 4 KiB, with numbers in every
    // column and no syscalls on either side.
    let out = text(&o.stdout);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("nil ") && l.contains("4KiB")).collect();
    assert_eq!(rows.len(), 1, "one nil point: {out}");
    let cols: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(&cols[..3], ["nil", "1", "4KiB"], "{}", rows[0]);
    assert!(cols[4].parse::<f64>().is_ok_and(|v| v > 0.0), "raw ns/IO: {}", rows[0]);
    assert!(cols[5].parse::<f64>().is_ok_and(|v| v > 0.0), "ioswitch ns/IO: {}", rows[0]);
    assert_eq!(cols.last(), Some(&"0.00|0.00"), "nil makes no syscalls: {}", rows[0]);

    refused(&["compare", "--engines", "io_uring,warp_drive"], 1, &["warp_drive"]);
    refused(
        &["compre", "--engines", "psync"],
        1,
        &["'compre' is neither a job file", "nested benchmark (compare, sweep, overhead, membw, plot)"],
    );
    refused(&["missing.fio"], 1, &["cannot read job file 'missing.fio'"]);
    refused(&["sweep", "--qd", "0"], 1, &["queue depth"]);
    let o = bench(&["overhead", "--help"]);
    assert!(o.status.success() && text(&o.stdout).contains("raw loop"), "{}", text(&o.stdout));
    let o = bench(&["--help"]);
    assert!(o.status.success() && text(&o.stdout).contains("--output-format"), "{}", text(&o.stdout));
    // What the README's first command runs is in the help, interfaces named.
    assert!(
        text(&o.stdout).contains("With no arguments: the built-in comparison")
            && text(&o.stdout).contains("psync, io_uring, libaio, posix, thrpool, emu and nil"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn overhead_targets_runs_the_recorded_benchmark_and_names_bad_input() {
    let _one = serial();
    let o = bench(&["overhead", "targets", "--once", "ioswitch", "--only", "nil-qd1", "--ios", "1000"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("nil-qd1: 1000 cycles"), "{}", text(&o.stdout));
    let o = bench(&["overhead", "targets", "--only", "nil-qd16", "--reps", "1", "--ios", "1600", "--no-callgrind"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("| qd16 |"), "{}", text(&o.stdout));
    refused(
        &["overhead", "targets", "--reps"],
        1,
        &["--reps needs a number", "usage: ioswitch bench overhead targets"],
    );
    let o = bench(&["overhead", "--help"]);
    assert!(o.status.success() && text(&o.stdout).contains("overhead targets"), "{}", text(&o.stdout));
    // `overhead --help` points at `overhead targets --help`: help on stdout, exit status
    // 0, every argument explained, nothing run.
    for help in ["--help", "-h"] {
        let o = bench(&["overhead", "targets", help]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "targets {help}: {}", text(&o.stderr));
        assert!(!out.contains("ioswitch library overhead"), "targets {help} ran the benchmark:\n{out}");
        for arg in [
            "--quick",
            "--only PATTERN",
            "--nil-only",
            "--reps N",
            "--ios N",
            "--shm FILE",
            "--disk FILE",
            "--keep-files",
            "--no-callgrind",
            "--cpu N",
            "--once ioswitch|raw",
        ] {
            assert!(out.contains(&format!("\n  {arg}")), "targets {help}: {arg} not explained:\n{out}");
        }
        assert!(out.contains("default 21; 5 with --quick"), "the default repetitions: {out}");
    }
}

#[test]
fn the_mmap_engine_writes_and_verifies_through_a_mapping() {
    let _one = serial();
    let s = scratch("mmap");
    let f = s.path("m");
    let v = bench_json(&[
        "--name=m",
        &format!("--filename={f}"),
        "--size=4m",
        "--ioengine=mmap",
        "--rw=randwrite",
        "--bs=4k",
        "--verify=crc32c",
    ]);
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["write"]["total_ios"], 1024, "{job}");
    assert_eq!(job["read"]["total_ios"], 1024, "verify reads every block back: {job}");
    assert_eq!(job["ioswitch"]["interface"], "mmap", "{job}");
    // An mmap job's rate as a fraction of the copy ceiling measured in the same run.
    assert!(job["ioswitch"]["copy_ceiling_bps"].as_f64().is_some_and(|c| c > 0.0), "{job}");
    assert!(job["ioswitch"]["copy_ceiling_fraction"].as_f64().is_some_and(|f| f > 0.0), "{job}");
    let o = bench(&["--name=m", &format!("--filename={f}"), "--size=4m", "--ioengine=mmap", "--rw=read", "--bs=64k"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("ioswitch mem :") && out.contains("of the single-thread copy ceiling measured in this run"),
        "{out}"
    );
    // Other interfaces get neither.
    let o = bench(&["--name=p", &format!("--filename={f}"), "--size=4m", "--ioengine=psync", "--rw=read", "--bs=64k"]);
    assert!(o.status.success() && !text(&o.stdout).contains("ioswitch mem"), "{}", text(&o.stdout));
}

/// `/dev/shm/ioswitch-bench-NAME-PID.img`, removed if it is there; `None` (the test
/// skips, saying why) where there is no /dev/shm.
fn shm_image(name: &str) -> Option<String> {
    if !std::path::Path::new("/dev/shm").is_dir() {
        eprintln!("skipped: /dev/shm does not exist");
        return None;
    }
    let f = format!("/dev/shm/ioswitch-bench-{name}-{}.img", std::process::id());
    let _ = fs::remove_file(&f);
    Some(f)
}

#[test]
fn the_libpmem_engine_runs_pmem_synchronously_and_says_when_pmem_force_is_on() {
    let _one = serial();
    let Some(f) = shm_image("libpmem") else { return };
    let args = [
        "bench",
        "--name=p",
        &format!("--filename={f}"),
        "--size=4m",
        "--ioengine=libpmem",
        "--rw=randwrite",
        "--bs=4k",
        "--verify=crc32c",
        "--output-format=json",
        "--no-progress",
    ];
    // Without PMEM_IS_PMEM_FORCE a /dev/shm file is refused: MAP_SYNC.
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(args)
        .env_remove("PMEM_IS_PMEM_FORCE")
        .output_bounded()
        .unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("MAP_SYNC"), "{}", text(&o.stderr));
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(args)
        .env("PMEM_IS_PMEM_FORCE", "1")
        .output_bounded()
        .unwrap();
    let _ = fs::remove_file(&f);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["write"]["total_ios"], 1024, "{job}");
    assert_eq!(job["read"]["total_ios"], 1024, "verify reads every block back: {job}");
    assert_eq!(job["ioswitch"]["interface"], "pmem(pmem_force=1)", "{job}");
    // Synchronous, as fio's libpmem: no submission latency.
    assert_eq!(job["write"]["slat_ns"]["max"], 0, "{job}");
    assert!(job["ioswitch"]["copy_ceiling_fraction"].as_f64().is_some_and(|f| f > 0.0), "{job}");
}

/// `pmem_populate=1` through `ioswitch_opts`: the job says so in its interface, and its
/// write pass over a fresh mapping takes far fewer minor faults than the same job without
/// it (the faults are taken at open, before the job's thread counts them).
#[test]
fn pmem_populate_is_reported_and_moves_the_jobs_faults_to_open() {
    let _one = serial();
    let Some(f) = shm_image("populate") else { return };
    fs::write(&f, vec![0u8; 32 << 20]).unwrap();
    let job = |o: &str| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
            .args([
                "bench",
                "--no-progress",
                "--output-format=json",
                "--name=w",
                &format!("--filename={f}"),
                "--size=32m",
                "--bs=512k",
                "--rw=write",
                "--ioengine=ioswitch",
                &format!("--ioswitch_opts={o}"),
            ])
            .output_bounded()
            .unwrap();
        assert!(out.status.success(), "{o}: {}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["jobs"][0].clone()
    };
    let plain = job("sync=pmem,pmem_force=1");
    let populated = job("sync=pmem,pmem_force=1,pmem_populate=1");
    // Refused on another interface, naming the key.
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(["bench", "--no-progress", "--name=w", &format!("--filename={f}"), "--size=32m", "--rw=read"])
        .args(["--ioengine=ioswitch", "--ioswitch_opts=sync=mmap,pmem_populate=1"])
        .output_bounded()
        .unwrap();
    let _ = fs::remove_file(&f);
    assert!(!o.status.success() && text(&o.stderr).contains("pmem_populate"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("sync=pmem"), "{}", text(&o.stderr));
    assert_eq!(plain["ioswitch"]["interface"], "pmem(pmem_force=1)", "{plain}");
    assert_eq!(populated["ioswitch"]["interface"], "pmem(pmem_force=1,pmem_populate=1)", "{populated}");
    for j in [&plain, &populated] {
        assert_eq!((j["error"].as_u64(), j["write"]["total_ios"].as_u64()), (Some(0), Some(64)), "{j}");
    }
    let (m0, m1) = (plain["minf"].as_u64().unwrap(), populated["minf"].as_u64().unwrap());
    eprintln!("32 MiB of 512 KiB writes on /dev/shm: minf {m0} without pmem_populate, {m1} with");
    if m0 >= 4096 {
        assert!(m1 * 16 <= m0, "minf {m1} with pmem_populate=1, {m0} without");
    } else {
        eprintln!("not compared: {m0} faults without pmem_populate for 8192 pages (large pages on /dev/shm?)");
    }
}

#[test]
fn the_copy_ceiling_is_measured_once_per_run_for_all_its_pmem_jobs() {
    let _one = serial();
    let Some(f) = shm_image("ceiling") else { return };
    // Three pmem jobs in one run (one of them two threads), one ceiling for all.
    let o = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args([
            "bench",
            "--no-progress",
            "--output-format=json",
            &format!("--filename={f}"),
            "--size=4m",
            "--bs=64k",
            "--ioengine=ioswitch",
            "--ioswitch_opts=sync=pmem,pmem_force=1",
            "--name=a",
            "--rw=write",
            "--name=b",
            "--rw=read",
            "--name=c",
            "--rw=randread",
            "--numjobs=2",
            "--thread",
        ])
        .output_bounded()
        .unwrap();
    let _ = fs::remove_file(&f);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.matches("measuring the single-thread copy ceiling").count(), 1, "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4, "{v}");
    let ceilings: Vec<f64> = jobs.iter().map(|j| j["ioswitch"]["copy_ceiling_bps"].as_f64().unwrap()).collect();
    assert!(ceilings[0] > 0.0 && ceilings.iter().all(|&c| c == ceilings[0]), "{ceilings:?}");
}

/// `ioswitch bench membw` with the two read shapes over `file` (`--shape read,randread
/// --bs 64k --file FILE --reps 2`), `more` and `--output-format json`, which must succeed:
/// its JSON report.
fn membw_read_shapes(file: &str, more: &[&str]) -> Value {
    let mut args = vec!["membw", "--shape", "read,randread", "--bs", "64k", "--file", file, "--reps", "2"];
    args.extend_from_slice(more);
    args.extend(["--output-format", "json"]);
    let o = bench(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("membw {args:?}: not JSON ({e}):\n{}", text(&o.stdout)))
}

/// Each of `cases` (the arguments after `membw`, and what the refusal says) is refused
/// with exit status 1 ([`refused`]).
fn membw_refuses(cases: &[(Vec<&str>, &str)]) {
    for (args, want) in cases {
        let mut all = vec!["membw"];
        all.extend(args.iter().copied());
        refused(&all, 1, &[want]);
    }
}

#[test]
fn membw_prints_every_kernel_and_names_bad_input() {
    let _one = serial();
    let kernels = ["copy", "scale", "add", "triad", "memcpy", "nt_copy"];
    let o = bench(&["membw", "--size", "1m", "--reps", "2", "--threads", "1,2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let nt = !out.contains("nt_copy: not measured");
    for k in kernels.iter().filter(|&&k| nt || k != "nt_copy") {
        let rows: Vec<&str> = out.lines().filter(|l| l.split_whitespace().next() == Some(*k)).collect();
        assert_eq!(rows.len(), 2, "one {k} row per thread count:\n{out}");
        for row in rows {
            // kernel, what it computes (several words), counts, best, median, spread, best time.
            let cols: Vec<&str> = row.split_whitespace().collect();
            let n = cols.len();
            let (best, median) = (cols[n - 5], cols[n - 4]);
            for v in [best, median] {
                assert!(v.parse::<f64>().is_ok_and(|x| x > 0.0), "{k}: {row}");
            }
        }
    }
    assert!(out.contains("pinned to CPU") || out.contains("not pinned"), "{out}");

    let o = bench(&["membw", "--size", "1m", "--reps", "2", "--threads", "1", "--output-format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("membw JSON parses");
    let ks = v["runs"][0]["kernels"].as_array().expect("kernels");
    assert_eq!(ks.len(), if nt { 6 } else { 5 }, "{v:#}");
    for k in ks {
        assert!(k["best_bps"].as_f64().is_some_and(|x| x > 0.0), "{k}");
        assert!(k["bytes_per_rep"].as_u64().is_some_and(|x| x > 0), "{k}");
    }
    assert_eq!(v["runs"][0]["array_bytes"], 1 << 20);

    refused(&["membw", "--threads", "0"], 1, &["--threads"]);
    refused(&["membw", "--size", "12q"], 1, &["--size"]);
    refused(&["membw", "--output-format", "xml"], 2, &["--output-format", "xml"]);
    let o = bench(&["membw", "--help"]);
    assert!(o.status.success() && text(&o.stdout).contains("ceiling"), "{}", text(&o.stdout));
}

#[test]
fn membw_shape_measures_the_jobs_shape_over_its_file_and_names_bad_input() {
    let _one = serial();
    let s = scratch("membw-shape");
    let f = data_file(&s, "region", 1 << 20);
    let before = fs::read(&f).unwrap();
    // Read shapes map the file read-only and leave it as it was.
    let v = membw_read_shapes(&f, &[]);
    assert_eq!(v["region_bytes"], 1 << 20, "the file's length by default: {v:#}");
    assert_eq!(v["pieces_per_rep"], 16);
    assert!(v["region"].as_str().unwrap().contains("read-only"), "{v:#}");
    let shapes = v["shapes"].as_array().unwrap();
    assert_eq!(shapes.iter().map(|k| k["shape"].as_str().unwrap()).collect::<Vec<_>>(), ["read", "randread"]);
    for k in shapes {
        assert_eq!(k["bytes_per_rep"], 1 << 20, "each byte read counted once: {k}");
        assert_eq!(k["counts"], "bytes read");
        let (best, t) = (k["best_bps"].as_f64().unwrap(), k["best_s"].as_f64().unwrap());
        assert!(best > 0.0 && (best * t - (1u64 << 20) as f64).abs() < 1.0, "{k}");
    }
    assert_eq!(fs::read(&f).unwrap(), before, "a read shape changed the file");

    // Write shapes store into the file itself, and count bytes written.
    let o = bench(&["membw", "--shape", "write", "--bs", "64k", "--file", &f, "--size", "512k", "--reps", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("write ")).unwrap_or_else(|| panic!("no write row:\n{out}"));
    assert!(row.contains("(bytes written)") && row.contains("no source"), "{row}");
    let best: f64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(best > 0.0, "{row}");
    assert!(out.contains("one sfence per piece"), "{out}");
    let after = fs::read(&f).unwrap();
    let lane = &after[..8];
    assert!(after[..512 << 10].chunks_exact(8).all(|c| c == lane), "every piece holds the one value stored last");
    assert_ne!(after[..512 << 10], before[..512 << 10], "the write shape did not store into the file");
    assert_eq!(after[512 << 10..], before[512 << 10..], "the write shape stored beyond --size");

    membw_refuses(&[
        (vec!["--shape", "read"], "--shape needs --bs"),
        (vec!["--shape", "copy", "--bs", "4k"], "\"copy\" is not a shape"),
        (vec!["--bs", "4k"], "--bs applies to --shape only"),
        (vec!["--file", &f], "--file applies to --shape only"),
        (vec!["--shape", "read", "--bs", "4k", "--threads", "2"], "--threads applies to the STREAM kernels"),
        (vec!["--shape", "read", "--bs", "0"], "--bs \"0\""),
        (vec!["--shape", "write", "--bs", "100", "--size", "1m"], "multiple of 64"),
        (vec!["--shape", "read", "--bs", "2m", "--file", &f], "smaller than one piece"),
        (vec!["--shape", "read", "--bs", "4k", "--file", &f, "--size", "2m"], "shorter than the region"),
    ]);
    let o = bench(&["membw", "--help"]);
    assert!(text(&o.stdout).contains("--shape") && text(&o.stdout).contains("ONE reused"), "{}", text(&o.stdout));
}

#[test]
fn membw_shape_runtime_gives_a_same_duration_mean_beside_the_best_and_names_bad_input() {
    let _one = serial();
    let s = scratch("membw-shape-timed");
    let f = data_file(&s, "region", 1 << 20);
    let v = membw_read_shapes(&f, &["--runtime", "100ms", "--ramp", "50ms"]);
    assert_eq!(v["timed_ramp_runtime_s"], serde_json::json!([0.05, 0.1]), "{v:#}");
    for k in v["shapes"].as_array().unwrap() {
        let best = k["best_bps"].as_f64().unwrap();
        let m = &k["timed"];
        let (mean, secs, bytes) =
            (m["mean_bps"].as_f64().unwrap(), m["measured_s"].as_f64().unwrap(), m["bytes"].as_u64().unwrap());
        assert!(best > 0.0 && mean > 0.0, "both figures: {k}");
        assert!(secs >= 0.1 && (mean * secs - bytes as f64).abs() < 1.0, "a mean over the runtime: {k}");
        assert_eq!(bytes, m["pieces"].as_u64().unwrap() * (64 << 10), "{k}");
        assert_eq!(m["ramp_s"], 0.05);
    }
    // Text: the best table and the mean table, one row per shape in each.
    let o = bench(&["membw", "--shape", "read", "--bs", "64k", "--file", &f, "--reps", "2", "--runtime", "50ms"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("same-duration mean (as a time-based job: 0 ms ramp, then 50 ms"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("read ")).count(), 2, "{out}");

    membw_refuses(&[
        (vec!["--runtime", "1s"], "--runtime applies to --shape only"),
        (vec!["--ramp", "1s"], "--ramp applies to --shape only"),
        (vec!["--shape", "read", "--bs", "4k", "--ramp", "500ms"], "--ramp needs --runtime"),
        (vec!["--shape", "read", "--bs", "4k", "--runtime", "0"], "--runtime \"0\": a runtime of 0 measures nothing"),
        (vec!["--shape", "read", "--bs", "4k", "--runtime", "1.5s"], "--runtime \"1.5s\": not a time"),
        (vec!["--shape", "read", "--bs", "4k", "--runtime", "2h"], "longer than 3600 s"),
        (vec!["--shape", "read", "--bs", "4k", "--runtime", "1s", "--ramp", "later"], "--ramp \"later\": not a time"),
    ]);
    let o = bench(&["membw", "--help"]);
    assert!(
        text(&o.stdout).contains("--runtime") && text(&o.stdout).contains("same-duration mean"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn parse_only_checks_the_jobs_and_runs_nothing() {
    let _one = serial();
    let s = scratch("parse-only");
    let target = s.path("never-created");
    let job = text_file(
        &s,
        "ok.fio",
        &format!("[global]\nfilename={target}\nsize=1m\n[a]\nrw=randwrite\nioengine=sync\n[b]\nrw=read\nioengine=libaio\niodepth=4\n"),
    );
    let o = bench(&["--parse-only", &job]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains(&format!("a ({job}:4): rw=randwrite, ioengine=sync, sync interface")), "{out}");
    assert!(out.contains("psync_call=read"), "{out}");
    assert!(out.contains(&format!("b ({job}:7): rw=read, ioengine=libaio, async interface")), "{out}");
    assert!(out.contains("2 job(s) parsed, none run"), "{out}");
    assert!(!Path::new(&target).exists(), "--parse-only created the job's file");
    // What a run would refuse before opening anything is refused here too, with its place.
    let bad = text_file(&s, "bad.fio", &format!("[j]\nfilename={target}\nioengine=libaio\nsqthread_poll=1\n"));
    refused(&["--parse-only", &bad], 1, &["sqthread_poll", &format!("{bad}:4")]);
    refused(&["--parse-only", "--name=j", "--rw=sideways"], 1, &["sideways", "argument 3"]);
    assert!(!Path::new(&target).exists());
}

/// Why `nobody` (uid 65534, as the tests below run ioswitch through setpriv) cannot run
/// the ioswitch binary or read `file`, asked of `test`, not of ioswitch: a checkout in a
/// directory only its owner may enter (/root, mode 700) keeps nobody out, and the run
/// would fail on that instead of on what the test is about. `None` when nobody can.
fn nobody_cannot_reach(file: &str) -> Option<String> {
    let bin = env!("CARGO_BIN_EXE_ioswitch");
    let probe = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "test", "-x", bin, "-a", "-r", file])
        .output_bounded();
    match probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let err = text(&o.stderr).trim().to_string();
            let err = if err.is_empty() { err } else { format!(": {err}") };
            Some(format!(
                "nobody (uid 65534) may not run {bin} or read {file} (`test -x BINARY -a -r FILE` as nobody: {}{err})",
                o.status
            ))
        }
        Err(e) => Some(format!("running `test` as nobody through setpriv: {e}")),
    }
}

#[test]
fn a_job_thread_that_cannot_start_fails_its_instance_and_the_run_without_a_panic() {
    let _one = serial();
    // The process limit (RLIMIT_NPROC) holds for a user without privileges: the run goes
    // to nobody with room for 16 threads, and its job asks for 64.
    let id = Command::new("id").arg("-u").output().map(|o| text(&o.stdout).trim().to_string()).unwrap_or_default();
    let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if id != "0" || !have("setpriv") || !have("prlimit") {
        eprintln!("skipping: needs root (uid {id:?}) with setpriv and prlimit to run as nobody under a thread limit");
        return;
    }
    let s = scratch("nothread");
    let f = s.file("data", 1 << 20);
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&f, fs::Permissions::from_mode(0o666)).unwrap();
    if let Some(why) = nobody_cannot_reach(&f) {
        eprintln!("skipping: {why}");
        return;
    }
    let filename = format!("--filename={f}");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "prlimit", "--nproc=16"])
        .args([env!("CARGO_BIN_EXE_ioswitch"), "bench", "--no-progress", "--name=j", &filename])
        .args(["--size=1m", "--rw=read", "--numjobs=64"])
        .output_bounded()
        .expect("run setpriv");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("starting the job's thread: Resource temporarily unavailable"), "{err}");
    // The instances that could not start share one line, which counts them.
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("starting the job's thread")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("ioswitch: error: job j (instances ") && lines[0].contains(" of 64): "), "{err}");
    assert!(lines[0].ends_with("Resource temporarily unavailable (errno 11)"), "{err}");
}

#[test]
fn a_job_that_only_reads_runs_on_a_file_it_may_not_write_as_in_fio() {
    let _one = serial();
    let s = scratch("readonly");
    let f = s.file("data", 1 << 20);
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&f, fs::Permissions::from_mode(0o444)).unwrap();
    // Root writes any file: the job runs as nobody then (setpriv), else as this user.
    let id = Command::new("id").arg("-u").output().map(|o| text(&o.stdout).trim().to_string()).unwrap_or_default();
    let mut cmd = if id == "0" {
        if !Command::new("setpriv").arg("--version").output().is_ok_and(|o| o.status.success()) {
            eprintln!("skipping: root without setpriv cannot run the job as a user the file refuses writes");
            return;
        }
        if let Some(why) = nobody_cannot_reach(&f) {
            eprintln!("skipping: {why}");
            return;
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_ioswitch")]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_ioswitch"))
    };
    let filename = format!("--filename={f}");
    let run = |cmd: &mut Command, rw: &str| {
        let args = ["bench", "--no-progress", "--name=j", &filename, "--size=1m", rw, "--output-format=json"];
        cmd.args(args).output_bounded().expect("run ioswitch bench")
    };
    let o = run(&mut cmd, "--rw=randread");
    assert!(o.status.success(), "a read job on a read-only file: {}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["jobs"][0]["read"]["io_bytes"], 1 << 20, "{v}");
    // A job that writes still needs to write it, and says so.
    let mut cmd2 = Command::new(cmd.get_program());
    cmd2.args(cmd.get_args().take_while(|a| *a != "bench"));
    let o = run(&mut cmd2, "--rw=write");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("Permission denied"), "{}", text(&o.stderr));
}

#[test]
fn time_based_without_a_runtime_runs_size_based_as_fio_does() {
    let _one = serial();
    let s = fio_scratch!("time_based_without_a_runtime_runs_size_based_as_fio_does", "bench-time-based");
    // fio 3.33 warns that time_based needs a runtime, drops it and writes the size once.
    for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
        let file = s.path(&format!("{}.data", ioswitch_testkit::tools::who(program)));
        let args = [
            "--name=tb",
            &format!("--filename={file}"),
            "--size=256k",
            "--bs=4k",
            "--rw=write",
            "--time_based",
            "--output-format=json",
        ];
        let o = success(program, &args, None);
        let err = text(&o.stderr);
        assert!(err.contains("time_based requires a runtime/timeout setting"), "{program}: {err}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{program}: not JSON ({e})"));
        assert_eq!(v["jobs"][0]["write"]["io_bytes"], 256 << 10, "{program}: {v}");
        assert_eq!(v["jobs"][0]["write"]["total_ios"], 64, "{program}: {v}");
    }
}
