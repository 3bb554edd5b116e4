//! `io_submit_mode=offload` against fio 3.33 on the same jobs: which threads make the I/O
//! system calls (counted with strace: fio's `iodepth` submit workers, each with its own
//! engine context at depth 1), and the JSON fields fio fills for such a job.
//!
//! Needs fio and strace (each test skips with the reason when one is missing;
//! `./scripts/test` installs fio).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::{output_retrying_hangs, strace_args};
use ioswitch_testkit::{fio_scratch, serial, text};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

/// The engines the tests run, each with the system call that makes its writes.
const ENGINES: [(&str, &str); 2] = [("psync", "pwrite64"), ("libaio", "io_submit")];

/// Runs `program ARGS` under a time limit. fio 3.33's offload can deadlock (the job
/// thread and every worker waiting on a futex, SIGTERM ignored; seen on loaded machines,
/// also in a CI run under strace), so a run of fio (also under strace) that hangs is
/// killed after 4 s and run again, up to five times (the job takes 1.1-1.2 s under strace
/// with load average 5; fio hung in 2 of 10 runs under strace on a quiet machine here,
/// and in 1 of 6 on 2026-12-06; each hang cost 10 s until then, 89 s for this file in one
/// suite run); if
/// fio hangs every time, its side of the check is not run (None, with a printed note):
/// the expected figures below are fio's structure, written out, so ours is still checked.
/// `ioswitch` hanging, or any run failing, fails the test.
fn run(program: &str, args: &[String]) -> Option<Output> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let is_fio = program == "fio" || (program == "strace" && args.iter().any(|a| a == "fio"));
    // `ioswitch` is not expected to hang: it has the longer limit, and no retry.
    let (limit, tries) = if is_fio { (4, 5) } else { (10, 1) };
    let Some(o) = output_retrying_hangs(program, args, dir, limit, tries) else {
        assert!(is_fio, "{program} {args:?} hung, killed after {limit} s");
        eprintln!("note: fio hung {tries} times: its side of this check is not run");
        return None;
    };
    assert!(o.status.success(), "{program} {args:?} failed ({}):\n{}{}", o.status, text(&o.stdout), text(&o.stderr));
    Some(o)
}

/// The job as fio takes it and as `ioswitch bench` takes it: 256 random 4 KiB writes over
/// a 1 MiB file of zeroes (made here, so neither tool lays it out).
fn both(s: &Scratch, engine: &str, extra: &[&str]) -> [(String, Vec<String>); 2] {
    let file = s.path("data");
    std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
    let mut own: Vec<String> = [
        "--name=o",
        &format!("--filename={file}"),
        "--size=1m",
        "--rw=randwrite",
        "--bs=4k",
        &format!("--ioengine={engine}"),
        "--iodepth=4",
        "--output-format=json",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    own.extend(extra.iter().map(|a| a.to_string()));
    let mut ours = vec!["bench".to_string()];
    ours.extend(own.iter().cloned());
    ours.push("--no-progress".into());
    // fio's job as a thread of its one process, so that killing a hung fio kills it all
    // (its offload workers are threads either way).
    own.push("--thread".into());
    [("fio".into(), own), (env!("CARGO_BIN_EXE_ioswitch").into(), ours)]
}

/// How many times each thread (by id) made `call`, from strace's log of `program ARGS`.
/// None when fio hung every time (see `run`).
fn calls_per_thread(s: &Scratch, program: &str, args: &[String], call: &str) -> Option<BTreeMap<String, usize>> {
    let mut per = BTreeMap::new();
    for (pid, _, _) in call_lines(s, program, args, call)? {
        *per.entry(pid).or_insert(0) += 1;
    }
    Some(per)
}

#[test]
fn offload_spreads_the_io_calls_over_iodepth_workers_as_fio_does() {
    let t = "offload_spreads_the_io_calls_over_iodepth_workers_as_fio_does";
    let s = fio_scratch!(t, &format!("offload-{t}"), ("strace", "-V"));
    let _g = serial();
    for (engine, call) in ENGINES {
        for (mode, threads) in [("inline", 1..=1), ("offload", 2..=4)] {
            for (tool, args) in both(&s, engine, &[&format!("--io_submit_mode={mode}")]) {
                let Some(per) = calls_per_thread(&s, &tool, &args, call) else { continue };
                let total: usize = per.values().sum();
                assert_eq!(total, 256, "{tool} {engine} {mode}: one {call} per write: {per:?}");
                assert!(
                    threads.contains(&per.len()),
                    "{tool} {engine} {mode}: {call} from {} threads, expected {threads:?}: {per:?}",
                    per.len()
                );
            }
        }
    }
    // libaio: each worker waits for its own one completion (fio's min_evts 1 at depth 1).
    for (tool, args) in both(&s, "libaio", &["--io_submit_mode=offload"]) {
        let Some(per) = calls_per_thread(&s, &tool, &args, "io_getevents") else { continue };
        assert_eq!(per.values().sum::<usize>(), 256, "{tool}: {per:?}");
        assert!(per.len() >= 2, "{tool}: completions reaped by the workers: {per:?}");
    }
}

/// The JSON of `tool ARGS`: fio may print notes before it. None when fio hung every time.
fn json_of(tool: &str, args: &[String]) -> Option<serde_json::Value> {
    let out = text(&run(tool, args)?.stdout);
    let at = out.find('{').unwrap_or_else(|| panic!("{tool}: no JSON in:\n{out}"));
    Some(serde_json::from_str(&out[at..]).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}):\n{out}")))
}

#[test]
fn offload_fills_the_json_fields_fio_fills_and_verifies() {
    let t = "offload_fills_the_json_fields_fio_fills_and_verifies";
    let s = fio_scratch!(t, &format!("offload-{t}"));
    let _g = serial();
    for engine in ["psync", "libaio"] {
        let mut seen = Vec::new();
        for (tool, args) in both(&s, engine, &["--io_submit_mode=offload"]) {
            let Some(v) = json_of(&tool, &args) else { continue };
            let j = &v["jobs"][0];
            let w = &j["write"];
            let fields = (
                j["error"].as_i64(),
                w["total_ios"].as_u64(),
                w["io_bytes"].as_u64(),
                w["slat_ns"]["N"].as_u64(),
                w["clat_ns"]["N"].as_u64(),
                w["lat_ns"]["N"].as_u64(),
                j["iodepth_level"]["1"].as_f64(),
            );
            seen.push((tool, fields));
        }
        let slat = if engine == "libaio" { 256 } else { 0 };
        let want = (Some(0), Some(256), Some(1 << 20), Some(slat), Some(256), Some(256), Some(100.0));
        for (tool, got) in &seen {
            assert_eq!(got, &want, "{tool} {engine}: error, ios, bytes, slat/clat/lat N, iodepth_level 1");
        }
        // The data: every block written by the workers reads back right.
        for (tool, args) in both(&s, engine, &["--io_submit_mode=offload", "--verify=crc32c"]) {
            let Some(v) = json_of(&tool, &args) else { continue };
            let j = &v["jobs"][0];
            assert_eq!(j["error"].as_i64(), Some(0), "{tool} {engine}");
            assert_eq!(j["read"]["total_ios"].as_u64(), Some(256), "{tool} {engine}: the verify reads");
        }
    }
}

/// The job with several files, as fio and `ioswitch bench` take it: 96 random 4 KiB
/// writes over three files of 128 KiB (`o.0.0` … `o.0.2`, fio's names, made here so
/// neither tool lays them out), `file_service_type` round robin, under offload.
fn both_files(s: &Scratch, engine: &str) -> [(String, Vec<String>); 2] {
    let dir = s.path("files");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..3 {
        std::fs::write(format!("{dir}/o.0.{i}"), vec![0u8; 128 << 10]).unwrap();
    }
    both(s, engine, &["--io_submit_mode=offload"]).map(|(tool, args)| {
        let mut args: Vec<String> = args.into_iter().filter(|a| !a.starts_with("--filename=")).collect();
        for a in ["--size=384k".to_string(), "--nrfiles=3".into(), format!("--directory={dir}")] {
            match args.iter_mut().find(|x| x.starts_with(&a[..a.find('=').unwrap() + 1])) {
                Some(x) => *x = a,
                None => args.push(a),
            }
        }
        (tool, args)
    })
}

/// Each strace line of `calls` in `program ARGS` as (thread id, call, first argument).
/// None when fio hung every time (see `run`).
fn call_lines(s: &Scratch, program: &str, args: &[String], calls: &str) -> Option<Vec<(String, String, String)>> {
    let log = s.path("strace.log");
    run("strace", &strace_args(&log, calls, &[], program, args))?;
    let body = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{log}: {e}"));
    let mut out = Vec::new();
    for l in body.lines() {
        // strace pads the thread id to a width: "647   pwrite64(…".
        let mut w = l.splitn(2, char::is_whitespace);
        let (Some(pid), Some(rest)) = (w.next(), w.next().map(str::trim_start)) else { continue };
        let Some(open) = rest.find('(') else { continue };
        let call = &rest[..open];
        if !calls.split(',').any(|c| c == call) {
            continue; // "<... resumed>" and signal lines
        }
        // pwrite64(FD, …) and fsync(FD); io_submit's file is the iocb's aio_fildes.
        let args = &rest[open + 1..];
        let first = match args.find("aio_fildes=") {
            Some(at) => args[at + 11..].split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""),
            None => args.split([',', ')']).next().unwrap_or(""),
        };
        out.push((pid.to_string(), call.to_string(), first.to_string()));
    }
    Some(out)
}

#[test]
fn offload_workers_serve_the_file_the_job_picked_as_fio_does() {
    let t = "offload_workers_serve_the_file_the_job_picked_as_fio_does";
    let s = fio_scratch!(t, &format!("offload-{t}"), ("strace", "-V"));
    let _g = serial();
    for (engine, call) in ENGINES {
        for (tool, args) in both_files(&s, engine) {
            let Some(lines) = call_lines(&s, &tool, &args, call) else { continue };
            let threads: std::collections::BTreeSet<&str> = lines.iter().map(|l| l.0.as_str()).collect();
            let mut per_file: BTreeMap<&str, usize> = BTreeMap::new();
            for l in &lines {
                *per_file.entry(l.2.as_str()).or_insert(0) += 1;
            }
            assert_eq!(lines.len(), 96, "{tool} {engine}: one {call} per write");
            assert!((2..=4).contains(&threads.len()), "{tool} {engine}: {call} from {threads:?}");
            // Round robin over three files: 32 writes to each file's descriptor.
            assert_eq!(per_file.values().copied().collect::<Vec<_>>(), [32, 32, 32], "{tool} {engine}: {per_file:?}");
        }
        for (tool, args) in both_files(&s, engine) {
            let mut args = args;
            args.push("--verify=crc32c".into());
            let Some(v) = json_of(&tool, &args) else { continue };
            let j = &v["jobs"][0];
            assert_eq!(j["error"].as_i64(), Some(0), "{tool} {engine}");
            assert_eq!(j["write"]["total_ios"].as_u64(), Some(96), "{tool} {engine}");
            assert_eq!(j["read"]["total_ios"].as_u64(), Some(96), "{tool} {engine}: every block read back");
        }
    }
}

#[test]
fn offload_hands_fsync_to_the_workers_every_n_writes() {
    let t = "offload_hands_fsync_to_the_workers_every_n_writes";
    let s = fio_scratch!(t, &format!("offload-{t}"), ("strace", "-V"));
    let _g = serial();
    for (engine, call) in ENGINES {
        let [(fio, fio_args), (ours, our_args)] = both(&s, engine, &["--io_submit_mode=offload", "--fsync=4"]);
        // Ours: 256 writes and a sync after every 4th but the last (63), each made by a
        // worker (a thread that also writes), none by the job's thread.
        let lines = call_lines(&s, &ours, &our_args, &format!("{call},fsync")).expect("ours does not hang");
        let count = |c: &str| lines.iter().filter(|l| l.1 == c).count();
        assert_eq!((count(call), count("fsync")), (256, 63), "ours {engine}");
        let writers: std::collections::BTreeSet<&str> =
            lines.iter().filter(|l| l.1 == call).map(|l| l.0.as_str()).collect();
        let syncers: std::collections::BTreeSet<&str> =
            lines.iter().filter(|l| l.1 == "fsync").map(|l| l.0.as_str()).collect();
        assert!(syncers.is_subset(&writers) && syncers.len() >= 2, "ours {engine}: {syncers:?} / {writers:?}");
        let v = json_of(&ours, &our_args).expect("ours does not hang");
        let j = &v["jobs"][0];
        assert_eq!(j["error"].as_i64(), Some(0), "ours {engine}");
        assert_eq!((j["write"]["total_ios"].as_u64(), j["sync"]["total_ios"].as_u64()), (Some(256), Some(63)));
        // fio 3.33 hands on its first sync after the 4th write too, and then nothing but
        // syncs: its job thread tests last_was_sync, which io_completed sets only in the
        // worker's copy of the job (io_u.c), so the size-based job never ends. Run for
        // 1 s, it shows 4 writes and the syncs that followed.
        let mut fio_args = fio_args;
        fio_args.extend(["--time_based".to_string(), "--runtime=1".into()]);
        let Some(v) = json_of(&fio, &fio_args) else { continue };
        let j = &v["jobs"][0];
        assert_eq!(j["write"]["total_ios"].as_u64(), Some(4), "fio {engine}: {}", j["write"]);
        assert!(j["sync"]["total_ios"].as_u64().unwrap_or(0) > 63, "fio {engine}: {}", j["sync"]);
    }
}
