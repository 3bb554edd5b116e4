//! `ioswitch bench` against fio on which errors a job goes on after (`ignore_error`,
//! `continue_on_error`, `error_dump`): sequential 4 KiB writes to a sparse 4 MiB file on a
//! 1 MiB tmpfs fail with ENOSPC past the first MiB; a job whose lists name ENOSPC runs to
//! the end and counts the failures, one whose lists do not stops at the first; both
//! tools must report the same. And `max_latency`: an I/O over it ends the job with
//! ETIMEDOUT, in both tools.
//!
//! Needs fio and a tmpfs mount (root); the test skips with the reason where `mount`
//! refuses.

use ioswitch_testkit::dirs::Tmpfs;
use ioswitch_testkit::tools::{output, FIO};
use ioswitch_testkit::{fio_scratch, text};
use std::process::Output;

/// Exit status, (error, total_err, first_error, bytes written), lines on stderr.
type Outcome = (Option<i32>, Option<(i64, i64, i64, u64)>, usize);

/// What a job reported: exit status, and from its JSON (where it wrote one) the error,
/// `total_err`, `first_error` and bytes written; and the lines it wrote to stderr.
fn outcome(o: &Output) -> Outcome {
    let out = text(&o.stdout);
    let json = out.find('{').and_then(|i| serde_json::from_str::<serde_json::Value>(&out[i..]).ok());
    let fields = json.map(|j| {
        let j = &j["jobs"][0];
        let n = |k: &str| j[k].as_i64().unwrap_or(-1);
        (n("error"), n("total_err"), n("first_error"), j["write"]["io_bytes"].as_u64().unwrap_or(0))
    });
    (o.status.code(), fields, text(&o.stderr).lines().filter(|l| l.contains("No space left on device")).count())
}

#[test]
fn ignore_error_goes_on_after_the_listed_errnos_as_fio_does() {
    let t = "ignore_error_goes_on_after_the_listed_errnos_as_fio_does";
    let s = fio_scratch!(t, "errors");
    let mnt = s.path("mnt");
    let Some(_mounted) = Tmpfs::mount_or_skip(t, &mnt, "1m") else { return };
    let file = format!("{mnt}/f");
    // Each case: the options, and whether the job goes on (after 768 failed writes).
    let cases: [(&[&str], bool); 5] = [
        (&["--continue_on_error=write", "--ignore_error=,ENOSPC"], true),
        (&["--ignore_error=,ENOSPC", "--error_dump=1"], true),
        (&["--continue_on_error=write", "--ignore_error=,EIO"], false),
        (&["--ignore_error=ENOSPC"], false),
        (&["--continue_on_error=write"], false),
    ];
    for (opts, goes_on) in cases {
        let mut got = Vec::new();
        for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
            std::fs::File::create(&file).and_then(|f| f.set_len(4 << 20)).expect("the sparse file");
            let filename = format!("--filename={file}");
            let job = ["--name=j", &filename, "--rw=write", "--bs=4k", "--size=4m", "--ioengine=psync"];
            let o = output(program, &[&job[..], &["--output-format=json"], opts].concat(), None);
            got.push(outcome(&o));
        }
        println!("{opts:?}: fio {:?}, ours {:?}", got[0], got[1]);
        let (fio, ours) = (&got[0], &got[1]);
        if goes_on {
            assert_eq!(fio.0, Some(0), "{opts:?}: fio goes on");
            assert_eq!(fio.1, Some((28, 768, 28, 1 << 20)), "{opts:?}: fio's error fields");
            assert_eq!((ours.0, ours.1), (fio.0, fio.1), "{opts:?}: ours against fio's");
            // error_dump=1: each error gone on after is on stderr; fio 3.33's default: none.
            let dumped = if opts.contains(&"--error_dump=1") { 768 } else { 0 };
            assert_eq!((fio.2, ours.2), (dumped, dumped), "{opts:?}: the errors written to stderr");
        } else {
            assert_eq!(fio.0, Some(1), "{opts:?}: fio stops at the first ENOSPC");
            assert_eq!(ours.0, Some(1), "{opts:?}: ours stops at the first ENOSPC too");
            // Where continue_on_error covers writes, fio counts the error that ends the job.
            assert_eq!(ours.1, fio.1, "{opts:?}: the error fields, ours against fio's");
            assert!(ours.2 >= 1, "{opts:?}: ours names the error");
        }
    }
}

/// Exit status, and from the JSON the error and the reads done.
fn read_outcome(o: &Output) -> (Option<i32>, i64, i64) {
    let out = text(&o.stdout);
    let j = out.find('{').and_then(|i| serde_json::from_str::<serde_json::Value>(&out[i..]).ok());
    let j = j.as_ref().map(|j| &j["jobs"][0]);
    let n = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_i64()).unwrap_or(-1);
    (o.status.code(), n(j.map(|j| &j["error"])), n(j.map(|j| &j["read"]["total_ios"])))
}

#[test]
fn max_latency_ends_the_job_at_the_first_late_io_with_etimedout_as_fio_does() {
    let t = "max_latency_ends_the_job_at_the_first_late_io_with_etimedout_as_fio_does";
    let s = fio_scratch!(t, "maxlat");
    let file = s.path("f");
    std::fs::File::create(&file).and_then(|f| f.set_len(4 << 20)).expect("the file");
    let filename = format!("--filename={file}");
    // 1 µs (fio's unit without one): reads of this file take about that, the first ones
    // (cold) far more, so both tools end the job early with ETIMEDOUT; 60 s: no read takes
    // it; 0 for reads, 1 µs for writes: the reads are not held to it.
    for (max, late) in [("1", true), ("60s", false), ("0,1", false)] {
        let opt = format!("--max_latency={max}");
        let job = ["--name=j", &filename, "--rw=randread", "--bs=4k", "--size=4m", "--ioengine=psync", &opt];
        let args = [&job[..], &["--output-format=json"]].concat();
        let (fio, ours) = (
            read_outcome(&output(FIO, &args, None)),
            read_outcome(&output(env!("CARGO_BIN_EXE_ioswitch"), &args, None)),
        );
        println!("max_latency={max}: fio {fio:?}, ours {ours:?}");
        for (who, (status, error, ios)) in [("fio", fio), ("ours", ours)] {
            if late {
                assert_eq!((status, error), (Some(1), 110), "max_latency={max}: {who} (110: ETIMEDOUT)");
                assert!((1..1024).contains(&ios), "max_latency={max}: {who} ended after {ios} reads");
            } else {
                assert_eq!((status, error, ios), (Some(0), 0, 1024), "max_latency={max}: {who}");
            }
        }
    }
}
