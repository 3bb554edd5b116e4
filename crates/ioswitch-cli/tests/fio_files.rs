//! `ioswitch bench` against fio on what a job does to its files: which system calls
//! `fsync=N` and `fdatasync=N` make (counted with strace), and, for a job with several
//! files, which file got how many bytes.
//!
//! Needs fio and strace (each test skips with the reason when one is missing;
//! `./scripts/test` installs fio).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::{lock, skip};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    lock(&ONE_AT_A_TIME)
}

fn scratch(test: &str) -> Scratch {
    Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("files-{test}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `program` runs here (`probe` is an argument it answers without work); says why
/// `test` skips when it does not.
fn have(program: &str, probe: &str, test: &str) -> bool {
    match Command::new(program).arg(probe).stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => true,
        _ => {
            skip(test, &format!("{program} does not run here"));
            false
        }
    }
}

fn run(program: &str, args: &[String]) -> Output {
    let o = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(o.status.success(), "{program} {args:?} failed ({}):\n{}{}", o.status, text(&o.stdout), text(&o.stderr));
    o
}

/// The job's arguments as fio takes them, and as `ioswitch bench` takes them.
fn both_args(args: &[&str]) -> [(String, Vec<String>); 2] {
    let own: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut ours = vec!["bench".to_string()];
    ours.extend(own.iter().cloned());
    ours.push("--no-progress".into());
    [("fio".into(), own), (env!("CARGO_BIN_EXE_ioswitch").into(), ours)]
}

/// How many times each of `calls` was made by `program ARGS` (and its threads), from
/// strace's log.
fn count_calls(s: &Scratch, program: &str, args: &[String], calls: &[&str]) -> Vec<usize> {
    let log = s.path("strace.log");
    let mut a = vec!["-f".to_string(), "-qq".into(), "-e".into(), format!("trace={}", calls.join(",")), "-o".into()];
    a.push(log.clone());
    a.push(program.into());
    a.extend(args.iter().cloned());
    run("strace", &a);
    let body = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{log}: {e}"));
    calls
        .iter()
        .map(|c| {
            body.lines()
                .filter(|l| l.split_whitespace().nth(1).is_some_and(|w| w.starts_with(&format!("{c}("))))
                .count()
        })
        .collect()
}

#[test]
fn fsync_n_calls_fsync_and_fdatasync_n_calls_fdatasync_as_often_as_fio() {
    let t = "fsync_n_calls_fsync_and_fdatasync_n_calls_fdatasync_as_often_as_fio";
    if !have("fio", "--version", t) || !have("strace", "-V", t) {
        return;
    }
    let _one = serial();
    let s = scratch("fsync");
    let file = s.file("data", 256 << 10);
    // 64 writes; the file is there already (no lay-out), and invalidate=0 (ours would
    // fdatasync before dropping the cache). fio syncs before the next write, so the last
    // write has no sync: 63 / N.
    for (sync, want) in [("--fsync=4", [15, 0]), ("--fdatasync=8", [0, 7]), ("--fsync=16", [3, 0])] {
        for engine in ["psync", "libaio"] {
            let job = [
                "--name=j",
                &format!("--filename={file}"),
                "--size=256k",
                "--bs=4k",
                "--rw=write",
                "--invalidate=0",
                &format!("--ioengine={engine}"),
                sync,
            ];
            let [fio, ours] = both_args(&job);
            let counts: Vec<Vec<usize>> =
                [fio, ours].iter().map(|(p, a)| count_calls(&s, p, a, &["fsync", "fdatasync"])).collect();
            assert_eq!(counts[0], want, "fio {engine} {sync}: fsync, fdatasync calls");
            assert_eq!(counts[1], counts[0], "ioswitch bench {engine} {sync}: fsync, fdatasync calls, against fio's");
        }
    }
}
