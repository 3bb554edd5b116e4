//! Every job file of fio's own `examples/` directory through `ioswitch bench`: first
//! `--parse-only` on the file as shipped, then, for each one that parses, a real run with
//! every `filename` and `directory` rewritten into a scratch directory (never this
//! machine's disks: several examples name `/dev/sdX` or `/dev/nvme0n1`), sizes capped at
//! 16 MiB (`offset` and `offset_increment` at 1 MiB, `numjobs` at 8) and run times (and start delays) at 2 s (a job with `rate`, `rate_iops`,
//! `rate_min` or `thinktime` gets a run time of 2 s where it has none). None may crash or hang; a file that parses must run, or
//! be refused because its engine needs another kind of device than a file. The tally is
//! printed (docs/BENCHMARKS.md records it):
//!
//! ```sh
//! cargo test -p ioswitch-cli --test fio_examples -- --nocapture
//! ```
//!
//! `loops` is capped at 2. Two examples (`xnvme-compare.fio`, `xnvme-zoned.fio`) take
//! their `rw`, `bs` and `iodepth` from `${FIO_RW}`, `${FIO_BS}` and `${FIO_IODEPTH}`, as
//! their comments say: the test sets them (randread, 4k, 1) where the environment does
//! not. `IOSWITCH_BENCH_BIN` runs another `ioswitch` binary instead (one without
//! `--parse-only`, e.g. of an older commit, is then run for real on every file).
//!
//! The examples come from `IOSWITCH_FIO_EXAMPLES`, else from the fio source the fio stage
//! fetches (`fio/fetch-fio-source.sh`: `~/.cache/ioswitch-fio/fio-*/examples`), else
//! from Debian's fio documentation (`/usr/share/doc/fio/examples`); without any, the test
//! says so and skips.

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::OutputBounded;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Longest a parse or a run may take before it counts as a hang, seconds.
const PARSE_TIMEOUT: u32 = 30;
const RUN_TIMEOUT: u32 = 120;
/// Sizes above this are capped (bytes), run times above this (seconds).
const MAX_SIZE: u64 = 16 << 20;
const MAX_RUNTIME_S: u64 = 2;
/// `offset` and `offset_increment` above this are capped (bytes), `numjobs` above this.
const MAX_OFFSET: u64 = 1 << 20;
const MAX_NUMJOBS: u64 = 8;

fn examples_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("IOSWITCH_FIO_EXAMPLES") {
        return Some(PathBuf::from(d));
    }
    let cache = std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ioswitch-fio"));
    let mut found: Vec<PathBuf> = cache
        .and_then(|c| fs::read_dir(c).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("examples"))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found.pop().or_else(|| Some(PathBuf::from("/usr/share/doc/fio/examples")).filter(|p| p.is_dir()))
}

/// `timeout SECS ioswitch bench ARGS` in `cwd`.
fn bench(cwd: &Path, secs: u32, args: &[&str]) -> Output {
    let bin = std::env::var("IOSWITCH_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ioswitch").to_string());
    let mut cmd = Command::new("timeout");
    for (k, v) in [("FIO_RW", "randread"), ("FIO_BS", "4k"), ("FIO_IODEPTH", "1")] {
        if std::env::var_os(k).is_none() {
            cmd.env(k, v);
        }
    }
    cmd.arg("--kill-after=10")
        .arg(secs.to_string())
        .arg(bin)
        .arg("bench")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output_bounded()
        .expect("run timeout(1) with the ioswitch binary")
}

/// One example's outcome: its first `ioswitch bench` (`--parse-only` on the file as
/// shipped, or the real run of the rewritten one), and the real run after a parse that
/// passed.
struct Trial {
    name: String,
    work: PathBuf,
    shown: PathBuf,
    first: Output,
    run: Option<Output>,
}

/// `each` over `files` on as many threads as there are CPUs (at least 2); the results in
/// `files`' order.
fn run_side_by_side(files: &[PathBuf], each: impl Fn(&PathBuf) -> Trial + Sync) -> Vec<Trial> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Trial)>> = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(f) = files.get(i) else { break };
                let t = each(f);
                done.lock().unwrap_or_else(|e| e.into_inner()).push((i, t));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// A crash or a hang: killed by a signal, a panic (Rust's exit status 101), or stopped by
/// `timeout` (124, or 137 after --kill-after).
fn crashed_or_hung(o: &Output) -> Option<String> {
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        None => Some(format!("killed by a signal: {}", o.status)),
        Some(124) | Some(137) => Some("hung (timed out)".into()),
        Some(0) | Some(1) if !err.contains("panicked") => None,
        Some(c) => Some(format!("exit status {c}: {}", err.trim())),
    }
}

/// The first line of the error, less the program's prefix and the file's place.
fn reason(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err.lines().find(|l| l.contains("error")).unwrap_or_default();
    line.trim_start_matches("ioswitch: error: ").to_string()
}

/// fio's size syntax, enough to cap it: a number with an optional k/m/g/t/p unit.
fn size_of(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..split].parse().ok()?;
    let pow = match v[split..].trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return None,
    };
    n.checked_mul(1024u64.checked_pow(pow)?)
}

/// fio's time syntax, enough to cap it: seconds unless a unit says otherwise.
fn seconds_of(v: &str) -> Option<f64> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: f64 = v[..split].parse().ok()?;
    let per = match &v[split..] {
        "" | "s" => 1.0,
        "ms" | "msec" => 1e-3,
        "us" | "usec" => 1e-6,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    Some(n * per)
}

/// The job file with every file and directory moved into `dir` (file names become plain
/// names, relative to `directory`, which is `dir`, or to the working directory, which the
/// run sets to `dir`), sizes and run times capped, and a default size for jobs that give
/// none (their device becomes a new file; see [`precreate`] for jobs that may not create
/// one).
fn rewrite(text: &str, dir: &Path) -> String {
    let mut out = format!("[global]\nsize={}m\n", MAX_SIZE >> 20);
    if text.lines().any(|l| {
        let key = l.split('=').next().unwrap_or_default().trim();
        ["rate", "rate_iops", "ratemin", "rate_min", "thinktime"].contains(&key)
    }) {
        // A shaped job goes as slowly as it asks (1mbs_clients.fio: 4 KiB at 1250 B/s, hours
        // for its size, in fio as here): its run time is capped like the others'.
        out.push_str(&format!("runtime={MAX_RUNTIME_S}s\n"));
    }
    if text.lines().any(|l| l.trim().replace(' ', "") == "allow_file_create=0") {
        // Its device comes from the command line in fio's usage; see precreate.
        out.push_str("filename=device\n");
    }
    for line in text.lines() {
        let body = line.split(['#', ';']).next().unwrap_or_default().trim();
        let Some((key, value)) = body.split_once('=').map(|(k, v)| (k.trim(), v.trim())) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let new = match key {
            "filename" => {
                let names: Vec<String> = value
                    .split(':')
                    .filter(|n| !n.is_empty())
                    .map(|n| n.replace(['/', '\\', '$', '{', '}'], "_"))
                    .collect();
                Some(names.join(":"))
            }
            "directory" => Some(dir.display().to_string()),
            "size" | "filesize" | "io_size" => {
                size_of(value).filter(|&s| s > MAX_SIZE).map(|_| format!("{}m", MAX_SIZE >> 20))
            }
            // Offsets beyond the capped size would need files of that size
            // (cross-stripe-verify.fio: offset_increment=124g for 30 jobs): capped too.
            "offset" | "offset_increment" => {
                size_of(value).filter(|&s| s > MAX_OFFSET).map(|_| format!("{}m", MAX_OFFSET >> 20))
            }
            "numjobs" => value.parse::<u64>().ok().filter(|&n| n > MAX_NUMJOBS).map(|_| MAX_NUMJOBS.to_string()),
            "loops" => value.parse::<u64>().ok().filter(|&n| n > 2).map(|_| "2".to_string()),
            "runtime" | "timeout" | "ramp_time" | "startdelay" => {
                seconds_of(value).filter(|&s| s > MAX_RUNTIME_S as f64).map(|_| format!("{MAX_RUNTIME_S}s"))
            }
            _ => None,
        };
        match new {
            Some(v) => out.push_str(&format!("{key}={v}\n")),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A job file that forbids creating files (`allow_file_create=0`) runs on devices that
/// exist: its files (and `device`, the name the rewrite gives a job that names none) are
/// made beforehand, at the capped size.
fn precreate(text: &str, dir: &Path) {
    if !text.lines().any(|l| l.trim().replace(' ', "") == "allow_file_create=0") {
        return;
    }
    let mut names = vec!["device".to_string()];
    for line in text.lines() {
        if let Some(v) = line.trim().strip_prefix("filename=") {
            names.extend(v.split(':').filter(|n| !n.is_empty()).map(str::to_string));
        }
    }
    for n in names {
        fs::File::create(dir.join(&n)).and_then(|f| f.set_len(MAX_SIZE)).expect("create a device file");
    }
}

/// No file or directory of the rewritten job may lie outside `dir` (run from `dir`):
/// directories are `dir`, file names plain names.
fn assert_confined(text: &str, dir: &Path, name: &str) {
    for line in text.lines() {
        let body = line.split(['#', ';']).next().unwrap_or_default().trim();
        if let Some((key, value)) = body.split_once('=') {
            for v in value.split(':').map(str::trim).filter(|v| !v.is_empty()) {
                match key.trim() {
                    "directory" => assert_eq!(Path::new(v), dir, "{name}: directory {v} is not the scratch directory"),
                    "filename" => assert!(!v.contains('/') && v != "..", "{name}: filename {v} is not a plain name"),
                    _ => {}
                }
            }
        }
    }
}

/// The option a parse-time refusal is about: the one its message names (`bad value 'V'
/// for option 'O'`, `unknown option 'O'`, `option 'O' needs a value`), else the option set
/// on the line it points at (`FILE:LINE: job 'J': …`, a refusal of the job's options
/// together, such as zonemode=zbd verify with numjobs=16), else the environment variable it
/// names, else the whole reason.
fn refused_option(reason: &str, at: &str, text: &str) -> String {
    if let Some((_, rest)) = reason.split_once("option '") {
        return rest.split('\'').next().unwrap_or(rest).to_string();
    }
    let line_no = reason.strip_prefix(at).and_then(|r| r.split(':').next()).and_then(|n| n.parse::<usize>().ok());
    let key = line_no.and_then(|n| text.lines().nth(n.checked_sub(1)?)).and_then(|l| {
        let body = l.split(['#', ';']).next().unwrap_or_default().trim();
        let key = body.split('=').next().unwrap_or_default().trim();
        (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
    });
    key.or_else(|| reason.contains("environment").then(|| "environment".to_string()))
        .unwrap_or_else(|| reason.to_string())
}

/// Whether a run's refusal says its interface cannot serve a file (an engine for
/// another kind of device, such as io_uring_cmd for NVMe generic devices).
fn needs_another_device(reason: &str) -> bool {
    reason.contains("cannot serve") || reason.contains("needs a") || reason.contains("NVMe")
}

#[test]
fn every_fio_example_parses_runs_or_is_refused_and_none_crashes_or_hangs() {
    let Some(dir) = examples_dir() else {
        eprintln!(
            "skipped: no fio examples (set IOSWITCH_FIO_EXAMPLES, or run fio/fetch-fio-source.sh, or install Debian's fio docs)"
        );
        return;
    };
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "fio"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .fio files in {}", dir.display());
    let scratch = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "fio-examples");
    let mut problems = Vec::new();
    let (mut parsed, mut ran) = (Vec::new(), Vec::new());
    let mut engine_refused: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut option_refused: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut device_refused = Vec::new();
    let probe = bench(scratch.dir(), PARSE_TIMEOUT, &["--parse-only", "--name=probe", "--size=4k"]);
    let parse_only = !reason(&probe).contains("parse-only");
    // The files' runs, a few at a time (each is capped at 2 s and most wait on their own
    // clocks or rates), then tallied in file order.
    let trials = run_side_by_side(&files, |f| {
        let name = f.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let work = scratch.dir().join(name.trim_end_matches(".fio"));
        fs::create_dir_all(&work).expect("a directory per example");
        let text = rewrite(&fs::read_to_string(f).expect("read example"), &work);
        assert_confined(&text, &work, &name);
        let job = work.join(&name);
        fs::write(&job, &text).expect("write rewritten example");
        precreate(&text, &work);
        if std::env::var_os("IOSWITCH_FIO_EXAMPLES_SHOW").is_some() {
            eprintln!("--- {name} rewritten:\n{text}");
        }
        let run_args = ["--no-progress", "--output-format=json", &job.display().to_string()];
        let (o, shown) = if parse_only {
            (bench(scratch.dir(), PARSE_TIMEOUT, &["--parse-only", &f.display().to_string()]), f.clone())
        } else {
            (bench(&work, RUN_TIMEOUT, &run_args), job.clone())
        };
        let refused = !o.status.success() && reason(&o).contains(&format!("{}:", shown.display()));
        let run = (parse_only && o.status.success() && !refused && crashed_or_hung(&o).is_none())
            .then(|| bench(&work, RUN_TIMEOUT, &run_args));
        Trial { name, work, shown, first: o, run }
    });
    for Trial { name, work, shown, first: o, run } in trials {
        let shown = shown.as_path();
        if let Some(why) = crashed_or_hung(&o) {
            problems.push(format!("{name}: --parse-only {why}"));
            continue;
        }
        let parse_refused = !o.status.success() && reason(&o).contains(&format!("{}:", shown.display()));
        if parse_refused || (parse_only && !o.status.success()) {
            let r = reason(&o);
            let at = format!("{}:", shown.display());
            assert!(r.contains(&at), "{name}: a refusal must name the file and line: {r}");
            let what = match r.split_once("for option 'ioengine'") {
                Some((head, _)) => {
                    let engine = head.rsplit("bad value '").next().unwrap_or_default().trim_end_matches("' ");
                    engine_refused.entry(engine.to_string()).or_default().push(name);
                    let _ = fs::remove_dir_all(&work);
                    continue;
                }
                None => r,
            };
            let shown_text = fs::read_to_string(shown).expect("read the refused job file");
            option_refused.entry(refused_option(&what, &at, &shown_text)).or_default().push(name);
            let _ = fs::remove_dir_all(&work);
            continue;
        }
        parsed.push(name.clone());
        let o = run.unwrap_or(o);
        if let Some(why) = crashed_or_hung(&o) {
            problems.push(format!("{name}: run {why}"));
        } else if o.status.success() {
            ran.push(name);
        } else if needs_another_device(&reason(&o)) {
            device_refused.push(format!("{name} ({})", reason(&o)));
        } else {
            problems.push(format!("{name}: parses but does not run: {}", reason(&o)));
        }
        let _ = fs::remove_dir_all(&work);
    }
    let engines: usize = engine_refused.values().map(Vec::len).sum();
    let options: usize = option_refused.values().map(Vec::len).sum();
    println!("fio examples in {}: {}", dir.display(), files.len());
    let how = if parse_only { "--parse-only accepts" } else { "no --parse-only in this binary; read without refusal" };
    println!("  {how} {} ({})", parsed.len(), parsed.join(", "));
    println!("  run for real: {} ran ({})", ran.len(), ran.join(", "));
    println!("  refused at run time, engine for another kind of device: {} {device_refused:?}", device_refused.len());
    println!("  refused at parse time, an engine ioswitch does not run: {engines}");
    for (e, fs) in &engine_refused {
        println!("    ioengine={e}: {}", fs.join(", "));
    }
    println!("  refused at parse time, an option (the first one refused in the file): {options}");
    for (o, fs) in &option_refused {
        println!("    {o}: {}", fs.join(", "));
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn a_refusal_is_tallied_under_its_option() {
    let text = "[global]\nzonemode=zbd\nnumjobs=16\n[dev1]\nnrfiles=31250\n";
    let at = "/x/e.fio:";
    for (reason, option) in [
        ("/x/e.fio:5: bad value '31250' for option 'nrfiles': expected 1", "nrfiles"),
        ("/x/e.fio:5: unknown option 'sync'", "sync"),
        ("/x/e.fio:3: job 'zbd-rand-write': zonemode=zbd writes with verify and numjobs>1 are not run", "numjobs"),
        ("/x/e.fio:4: job 'dev1': refused", "/x/e.fio:4: job 'dev1': refused"),
    ] {
        assert_eq!(refused_option(reason, at, text), option, "{reason}");
    }
}

#[test]
fn rewriting_confines_files_and_caps_sizes_and_times() {
    let dir = Path::new("/scratch/x");
    let text =
        "[global]\nfilename=/dev/sda:/dev/sdb\nsize=10g\nruntime=5m\n[j]\ndirectory=/mnt/data\nsize=1m # small\n\
                filesize=50%\nramp_time=500ms\nloops=500000\n";
    let out = rewrite(text, dir);
    assert!(out.starts_with("[global]\nsize=16m\n"), "{out}");
    assert!(out.contains("filename=_dev_sda:_dev_sdb\n"), "{out}");
    assert!(out.contains("directory=/scratch/x\n") && out.contains("\nsize=16m\nruntime=2s\n"), "{out}");
    assert!(
        out.contains("size=1m # small") && out.contains("filesize=50%") && out.contains("ramp_time=500ms"),
        "{out}"
    );
    assert!(out.ends_with("loops=2\n"), "{out}");
    assert_confined(&out, dir, "t");
    assert!(out.starts_with("[global]\nsize=16m\n[global]\n"), "no run time added to an unshaped job: {out}");
    let shaped = rewrite("[global]\nrate=1250\n[j]\n", dir);
    assert!(shaped.starts_with("[global]\nsize=16m\nruntime=2s\n"), "{shaped}");
    assert_eq!((size_of("4k"), size_of("1GiB"), size_of("x")), (Some(4096), Some(1 << 30), None));
    assert_eq!((seconds_of("90"), seconds_of("2m"), seconds_of("250ms")), (Some(90.0), Some(120.0), Some(0.25)));
}

/// The option names fio 3.33 defines (`.name = "..."` in its options.c).
fn fio_option_names(options_c: &str) -> Vec<String> {
    let mut names: Vec<String> = options_c
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".name"))
        .filter_map(|rest| rest.trim_start().strip_prefix('=')?.trim().strip_prefix('"')?.split('"').next())
        .map(String::from)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_option_fio_defines_runs_or_is_refused_saying_why() {
    let t = "every_option_fio_defines_runs_or_is_refused_saying_why";
    let Some(src) =
        examples_dir().and_then(|d| d.parent().map(Path::to_path_buf)).filter(|s| s.join("options.c").is_file())
    else {
        ioswitch_testkit::skip(
            t,
            "no fio source with options.c (run fio/fetch-fio-source.sh, or set IOSWITCH_FIO_EXAMPLES to its examples/)",
        );
        return;
    };
    let names = fio_option_names(&fs::read_to_string(src.join("options.c")).expect("read options.c"));
    assert!(names.len() > 200, "{} option names in {}: the scan is off", names.len(), src.display());
    let dir = std::env::temp_dir();
    let (mut runs, mut bare) = (0, Vec::new());
    for name in &names {
        let opt = format!("--{name}=1");
        let o = bench(&dir, 20, &["--parse-only", "--name=j", "--filename=/nonexistent/j", "--size=16m", &opt]);
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.success() {
            runs += 1;
        } else if err.contains(&format!("unknown option '{name}'")) && !err.contains("does not run (") {
            bare.push(name.clone());
        }
    }
    println!(
        "{} options of fio's options.c: {runs} parse with the value 1, the rest are refused with the reason",
        names.len()
    );
    assert!(bare.is_empty(), "refused as a bare unknown option, without saying why: {bare:?}");
}
