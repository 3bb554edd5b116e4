//! Steady state (`ss`, `ss_dur`) against fio 3.33: a time-based job with
//! `ss=iops:50% ss_dur=2s` over a file in a page cache ends long before its runtime, and
//! its `"steadystate"` object has the keys of fio's (their order is the unit test's, in
//! ioswitch-bench's steady.rs: serde_json here sorts keys).
//!
//! fio's side needs fio (skipped with the reason when missing; `./scripts/test` installs it).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::output_within;
use ioswitch_testkit::{have, text};
use std::process::Command;

/// The job: 2 clones reading 4 KiB blocks of a 16 MiB file for at most 60 s.
fn job(s: &Scratch) -> String {
    let file = s.path("data");
    std::fs::write(&file, vec![0u8; 16 << 20]).unwrap();
    let path = s.path("ss.fio");
    std::fs::write(
        &path,
        format!(
            "[global]\ngroup_reporting\ntime_based\nsize=16m\n[ss]\nfilename={file}\nrw=read\nbs=4k\nnumjobs=2\n\
             runtime=60s\nss=iops:50%\nss_dur=2s\n"
        ),
    )
    .unwrap();
    path
}

fn run(program: &str, args: &[&str]) -> serde_json::Value {
    let o = output_within(Command::new(program).args(args), 120)
        .unwrap_or_else(|| panic!("{program} {args:?} hung, killed after 120 s"));
    assert!(o.status.success(), "{program} {args:?} failed ({}):\n{}", o.status, text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{program}: not JSON ({e}):\n{}", text(&o.stdout)))
}

/// The keys of an object and of the objects in it, as `a.b` paths.
fn keys(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    if let Some(m) = v.as_object() {
        for (k, x) in m {
            let p = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            out.push(p.clone());
            keys(x, &p, out);
        }
    }
}

fn steady_of(v: &serde_json::Value) -> (&serde_json::Value, Vec<String>, u64) {
    let j = &v["jobs"][0];
    let ss = &j["steadystate"];
    let mut k = Vec::new();
    keys(ss, "", &mut k);
    assert!(!k.is_empty(), "no steadystate object: {j}");
    (ss, k, j["job_runtime"].as_u64().unwrap())
}

#[test]
fn a_steady_job_ends_early_and_reports_fios_steadystate_object() {
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "fio-steady");
    let path = job(&s);
    let ours = run(env!("CARGO_BIN_EXE_ioswitch"), &["bench", &path, "--output-format=json", "--no-progress"]);
    let (ss, our_keys, runtime_ms) = steady_of(&ours);
    assert_eq!(ss["attained"], 1, "{ss}");
    assert_eq!(ss["ss"], "iops:50.000000%");
    assert_eq!(ss["duration"], 2);
    assert_eq!(ss["data"]["iops"].as_array().map(Vec::len), Some(2), "{ss}");
    let crit: f64 = ss["criterion"].as_str().and_then(|c| c.strip_suffix('%')).unwrap().parse().unwrap();
    assert!(crit < 50.0, "{ss}");
    // Each of the 2 clones ran about the 2 s of the window (plus a check), not 60 s.
    assert!(runtime_ms < 2 * 20_000, "job_runtime {runtime_ms} ms: the job did not end at its steady state");
    if !have("fio", "--version", "fio_steady") {
        return;
    }
    let theirs = run("fio", &[&path, "--output-format=json"]);
    let (_, fio_keys, _) = steady_of(&theirs);
    assert_eq!(our_keys, fio_keys);
}
