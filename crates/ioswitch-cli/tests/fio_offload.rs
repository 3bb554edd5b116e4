//! `io_submit_mode=offload` against fio 3.33 on the same jobs: which threads make the I/O
//! system calls (counted with strace: fio's `iodepth` submit workers, each with its own
//! engine context at depth 1), and the JSON fields fio fills for such a job.
//!
//! Needs fio and strace (each test skips with the reason when one is missing;
//! `./scripts/test` installs fio).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::{have, lock, text};
use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    lock(&ONE_AT_A_TIME)
}

/// Runs `program ARGS` under a time limit. fio 3.33's offload can deadlock (the job
/// thread and every worker waiting on a futex, SIGTERM ignored; seen on loaded machines,
/// also in a CI run under strace), so a run of fio (also under strace) that hangs is
/// killed after 10 s (the job takes about a second; fio hung in 2 of 10 runs under strace
/// on a quiet machine here) and run again, up to five times; if
/// fio hangs every time, its side of the check is not run (None, with a printed note):
/// the expected figures below are fio's structure, written out, so ours is still checked.
/// `ioswitch` hanging, or any run failing, fails the test.
fn run(program: &str, args: &[String]) -> Option<Output> {
    use std::os::unix::process::ExitStatusExt;
    let is_fio = program == "fio" || (program == "strace" && args.iter().any(|a| a == "fio"));
    const ATTEMPTS: u32 = 5;
    for attempt in 1..=ATTEMPTS {
        let mut a = vec!["-s".to_string(), "KILL".into(), "10".into(), program.into()];
        a.extend(args.iter().cloned());
        let o = Command::new("timeout")
            .args(&a)
            .current_dir(env!("CARGO_TARGET_TMPDIR"))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        // timeout's KILL reaches its own process group too: killed by 9, or 137.
        let hung = o.status.signal() == Some(9) || o.status.code() == Some(137);
        if hung && is_fio {
            eprintln!("note: fio hung (its offload deadlock), killed after 10 s (attempt {attempt} of {ATTEMPTS})");
            if attempt == ATTEMPTS {
                eprintln!("note: fio hung {ATTEMPTS} times: its side of this check is not run");
                return None;
            }
            continue;
        }
        assert!(
            o.status.success(),
            "{program} {args:?} failed ({}):\n{}{}",
            o.status,
            text(&o.stdout),
            text(&o.stderr)
        );
        return Some(o);
    }
    unreachable!("the last attempt returns")
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
    let log = s.path("strace.log");
    let mut a = vec!["-f".to_string(), "-qq".into(), "-e".into(), format!("trace={call}"), "-o".into(), log.clone()];
    a.push(program.into());
    a.extend(args.iter().cloned());
    run("strace", &a)?;
    let body = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{log}: {e}"));
    let mut per = BTreeMap::new();
    for l in body.lines() {
        let mut w = l.split_whitespace();
        let (Some(pid), Some(what)) = (w.next(), w.next()) else { continue };
        if what.starts_with(&format!("{call}(")) {
            *per.entry(pid.to_string()).or_insert(0) += 1;
        }
    }
    Some(per)
}

#[test]
fn offload_spreads_the_io_calls_over_iodepth_workers_as_fio_does() {
    let t = "offload_spreads_the_io_calls_over_iodepth_workers_as_fio_does";
    if !have("fio", "--version", t) || !have("strace", "-V", t) {
        return;
    }
    let _g = serial();
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("offload-{t}"));
    for (engine, call) in [("psync", "pwrite64"), ("libaio", "io_submit")] {
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
    if !have("fio", "--version", t) {
        return;
    }
    let _g = serial();
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("offload-{t}"));
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
