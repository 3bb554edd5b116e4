//! `zonemode=strided` (`zonesize`, `zonerange`, `zoneskip`) against fio 3.33: the offsets
//! of every I/O, read from the offset column of each tool's bandwidth log
//! (`write_bw_log` with `log_offset=1`), and the bytes done.
//!
//! Needs fio (skipped with the reason when missing; `./scripts/test` installs it).

use ioswitch_testkit::tools::output_within;
use ioswitch_testkit::{fio_scratch, text};
use std::process::Command;

/// Runs one tool on the job in `dir`; returns the offsets of its I/Os (in 4 KiB blocks,
/// in log order) and the bytes it read.
fn offsets(dir: &str, program: &str, args: &[String]) -> (Vec<u64>, u64) {
    let log = format!("{dir}/{}", if program == "fio" { "theirs" } else { "ours" });
    let mut cmd = Command::new(program);
    cmd.args(args)
        .arg(format!("--write_bw_log={log}"))
        .args(["--log_offset=1", "--output-format=json"])
        .current_dir(dir);
    let o = output_within(&mut cmd, 60).unwrap_or_else(|| panic!("{program} {args:?} hung, killed after 60 s"));
    assert!(o.status.success(), "{program} {args:?} failed ({}):\n{}", o.status, text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{program}: {e}"));
    let bytes = v["jobs"][0]["read"]["io_bytes"].as_u64().unwrap();
    let body = std::fs::read_to_string(format!("{log}_bw.1.log")).expect("the bandwidth log");
    let offs = body
        .lines()
        .map(|l| l.split(',').nth(4).expect("an offset column").trim().parse::<u64>().unwrap() / 4096)
        .collect();
    (offs, bytes)
}

#[test]
fn strided_offsets_and_bytes_are_fios() {
    let s = fio_scratch!("fio_strided", "fio-strided");
    let file = s.path("data");
    std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
    // The strided read job with `opts` added, run by fio and by us: (ours, theirs).
    let both = |opts: &str| {
        let mut args: Vec<String> =
            ["--name=z", &format!("--filename={file}"), "--bs=4k", "--rw=read", "--zonemode=strided"]
                .iter()
                .map(|a| a.to_string())
                .collect();
        args.extend(opts.split(' ').map(String::from));
        let theirs = offsets(&s.path(""), "fio", &args);
        let mut ours_args = vec!["bench".to_string()];
        ours_args.extend(args.iter().cloned());
        ours_args.push("--no-progress".into());
        (offsets(&s.path(""), env!("CARGO_BIN_EXE_ioswitch"), &ours_args), theirs)
    };
    for (opts, random) in [
        ("--size=256k --zonesize=16k --zoneskip=32k", false),
        ("--size=256k --zonesize=16k --zonerange=64k", false),
        ("--size=256k --zonesize=32k --zonerange=16k --zoneskip=16k", false),
        ("--size=256k --zonesize=16k --zoneskip=300k --offset=8k", false),
        // The fourth zone passes the file's end: the job ends there, short of its size.
        ("--size=1m --zonesize=128k --zoneskip=200k", false),
        ("--size=256k --zonesize=16k --zoneskip=32k --rw=randread", true),
    ] {
        let ((ours, our_bytes), (theirs, their_bytes)) = both(opts);
        assert_eq!(our_bytes, their_bytes, "{opts}");
        compare(opts, random, &ours, &theirs);
    }
    // Time based: fio's rewind past the region's end (size=64k) repeats the first block
    // of each later zone; the runs differ in length, so their first 96 I/Os are compared.
    let opts = "--size=64k --zonesize=16k --zoneskip=32k --time_based --runtime=300ms";
    let ((ours, _), (theirs, _)) = both(opts);
    assert!(ours.len() >= 96 && theirs.len() >= 96, "{} and {} I/Os", ours.len(), theirs.len());
    assert_eq!(&ours[..96], &theirs[..96], "{opts}");
    assert_eq!(&ours[8..12], &[24, 24, 24, 24], "the rewind");
}

/// Sequential offsets equal, in order; random ones (which differ with the generator) hit
/// the same blocks in each zone of 4 blocks.
fn compare(opts: &str, random: bool, ours: &[u64], theirs: &[u64]) {
    if random {
        let zones = |v: &[u64]| -> Vec<Vec<u64>> {
            v.chunks(4)
                .map(|c| {
                    let mut c = c.to_vec();
                    c.sort_unstable();
                    c
                })
                .collect()
        };
        assert_eq!(zones(ours), zones(theirs), "{opts}");
    } else {
        assert_eq!(ours, theirs, "{opts}");
    }
}
