//! `ioswitch bench` against fio on what write buffers hold: the same write jobs run under
//! both, and the files they leave must be the same byte for byte (`buffer_pattern`, in
//! the written blocks and in the file's layout).
//!
//! Needs fio (skips with the reason when it is missing; `./scripts/test` installs it).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::{have, text};
use std::process::{Command, Stdio};

fn run(program: &str, args: &[String]) {
    let o = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(o.status.success(), "{program} {args:?} failed ({}):\n{}", o.status, text(&o.stderr));
}

#[test]
fn buffer_pattern_leaves_the_same_file_as_fio() {
    let t = "buffer_pattern_leaves_the_same_file_as_fio";
    if !have("fio", "--version", t) {
        return;
    }
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "fio-buffers");
    // A 7-byte pattern (hex, string and decimal together) that does not divide the
    // block: fio starts it over at every buffer's start, so every 4 KiB block is the same.
    for (pattern, rw) in [("0xdead\"xyz\"258", "write"), ("0x01", "randwrite"), ("\"ab\"0x0a", "readwrite")] {
        let mut files = Vec::new();
        for program in ["fio", env!("CARGO_BIN_EXE_ioswitch")] {
            let data = s.path(&format!("{}-{rw}", if program == "fio" { "fio" } else { "ours" }));
            let mut args: Vec<String> = [
                "--name=p",
                &format!("--filename={data}"),
                "--size=64k",
                "--bs=4k",
                &format!("--rw={rw}"),
                &format!("--buffer_pattern={pattern}"),
                "--output-format=json",
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            if program != "fio" {
                args.insert(0, "bench".into());
                args.push("--no-progress".into());
            }
            run(program, &args);
            files.push(std::fs::read(&data).expect("the job's file"));
        }
        let (fio, ours) = (&files[0], &files[1]);
        assert_eq!(fio.len(), ours.len(), "{pattern} {rw}: file sizes");
        // A job that reads has its file laid out first: fio writes it with the
        // write buffers' contents, the pattern too.
        assert!(
            fio == ours,
            "{pattern} {rw}: the files differ (first at byte {:?})",
            fio.iter().zip(ours).position(|(a, b)| a != b)
        );
    }
}
