//! `ioswitch bench` against fio on `fill_device=1` (fio's alias `fill_fs`): on a 16 MiB
//! tmpfs made for the test, a job without `size` writes until the file system is full
//! (ENOSPC ends it, and is no error), a job that reads has its file laid out until full
//! first, and a later job reads back what the fill wrote. Both tools must exit 0 with no
//! error and report within one block of the space that was free (tmpfs has no metadata
//! blocks, so the whole 16 MiB is writable); the file the fill leaves is as long as what
//! was written.
//!
//! Needs fio and a tmpfs mount (root); the test skips with the reason where `mount`
//! refuses.

use ioswitch_testkit::dirs::Tmpfs;
use ioswitch_testkit::tools::output;
use ioswitch_testkit::{fio_scratch, text};
use std::process::Command;

/// Bytes free on the file system holding `dir` (stat -f: free blocks × block size).
fn free_bytes(dir: &str) -> u64 {
    let o = Command::new("stat").args(["-f", "-c", "%f %S", dir]).output().expect("run stat -f");
    let out = text(&o.stdout);
    let v: Vec<u64> = out.split_whitespace().map(|x| x.parse().expect("a number from stat -f")).collect();
    v[0] * v[1]
}

/// Runs fio or ours with `args`; returns the exit status, the JSON's jobs (empty without
/// one) and stderr.
fn run(program: &str, args: &[String]) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let o = output(program, &[args, &["--output-format=json".to_string()]].concat(), None);
    let out = text(&o.stdout);
    let json = out.find('{').and_then(|i| serde_json::from_str::<serde_json::Value>(&out[i..]).ok());
    let jobs = json.and_then(|j| j["jobs"].as_array().cloned()).unwrap_or_default();
    (o.status.code(), jobs, text(&o.stderr))
}

fn bytes(job: &serde_json::Value, dir: &str) -> u64 {
    job[dir]["io_bytes"].as_u64().unwrap_or(u64::MAX)
}

#[test]
fn fill_device_writes_until_the_file_system_is_full_as_fio_does() {
    let t = "fill_device_writes_until_the_file_system_is_full_as_fio_does";
    let s = fio_scratch!(t, "fill");
    let mnt = s.path("mnt");
    let Some(_mounted) = Tmpfs::mount_or_skip(t, &mnt, "16m") else { return };
    let file = format!("{mnt}/f");
    let bs = 64u64 << 10;
    let common = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> =
            ["--name=fill", &format!("--filename={file}"), "--bs=64k"].iter().map(|s| s.to_string()).collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    // Each case: options, the direction whose bytes must match the free space, and
    // whether a 4 MiB file is there before (fio unlinks it, ours empties it: its space
    // counts as free).
    let cases: [(&[&str], &str, bool); 4] = [
        (&["--rw=write", "--ioengine=psync", "--fill_device=1"], "write", true),
        (&["--rw=write", "--ioengine=libaio", "--iodepth=8", "--fill_fs=1"], "write", true),
        (&["--rw=write", "--ioengine=psync", "--fill_device=1"], "write", false),
        (&["--rw=read", "--ioengine=psync", "--fill_device=1"], "read", true),
    ];
    for (opts, dir, old) in cases {
        for program in ["fio", env!("CARGO_BIN_EXE_ioswitch")] {
            let _ = std::fs::remove_file(&file);
            let free = free_bytes(&mnt);
            if old {
                std::fs::write(&file, vec![7u8; 4 << 20]).expect("the old file");
            }
            let (code, jobs, err) = run(program, &common(opts));
            println!("{opts:?} {program}: exit {code:?}, {dir} {} bytes, free {free}", bytes(&jobs[0], dir));
            assert_eq!(code, Some(0), "{opts:?} {program}: exit status; stderr: {err}");
            assert_eq!(jobs.len(), 1, "{opts:?} {program}: one job in the JSON");
            assert_eq!(jobs[0]["error"].as_i64(), Some(0), "{opts:?} {program}: the job's error");
            let got = bytes(&jobs[0], dir);
            // Within one block of the free space.
            assert!(got <= free && free - got <= bs, "{opts:?} {program}: {got} bytes of {free} free");
            let len = std::fs::metadata(&file).expect("the filled file").len();
            if dir == "write" {
                assert_eq!(len, got, "{opts:?} {program}: the file is as long as what was written");
            } else {
                assert_eq!(len, got, "{opts:?} {program}: the layout is what was read");
            }
        }
    }
    // A fill, then (stonewall) a job without size that reads the file back and verifies
    // it: the later job reads what the fill wrote, no more. Ours only: fio 3.33 sets every
    // job's files up before the first runs, so it refuses the reader ("you need to
    // specify size=") when the file does not exist before the fill, and reads the old
    // file's length when it does; ours sets such a job up again after the fill.
    {
        let program = env!("CARGO_BIN_EXE_ioswitch");
        let _ = std::fs::remove_file(&file);
        let free = free_bytes(&mnt);
        let args: Vec<String> = [
            "--bs=64k",
            "--verify=crc32c",
            "--ioengine=psync",
            &format!("--filename={file}"),
            "--name=w",
            "--rw=write",
            "--fill_device=1",
            "--do_verify=0",
            "--name=r",
            "--stonewall",
            "--rw=read",
            "--do_verify=1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (code, jobs, err) = run(program, &args);
        assert_eq!(code, Some(0), "fill then verify, {program}: exit status; stderr: {err}");
        assert_eq!(jobs.len(), 2, "fill then verify, {program}: two jobs");
        let (w, r) = (bytes(&jobs[0], "write"), bytes(&jobs[1], "read"));
        println!("fill then verify, {program}: wrote {w}, read {r}, free {free}");
        assert!(w <= free && free - w <= bs, "fill then verify, {program}: {w} written of {free} free");
        assert_eq!(r, w, "fill then verify, {program}: the verify job reads what was written");
        assert_eq!(jobs[1]["error"].as_i64(), Some(0), "fill then verify, {program}: the verify job's error");
    }
    // What is not run with fill_device is refused, naming the option.
    let _ = std::fs::remove_file(&file);
    for (opts, says) in [
        (&["--rw=randwrite", "--fill_device=1"][..], "sequential writes only"),
        (&["--rw=write", "--fill_device=1", "--numjobs=2"][..], "numjobs=2"),
        // fio 3.33 writes nothing there: its unbounded size wraps around with the offset.
        (&["--rw=write", "--fill_device=1", "--offset=1m"][..], "offset 0 only"),
    ] {
        let (code, _, err) = run(env!("CARGO_BIN_EXE_ioswitch"), &common(opts));
        assert_eq!(code, Some(1), "{opts:?}: refused; stderr: {err}");
        assert!(err.contains("fill_device") && err.contains(says), "{opts:?}: {err}");
        assert!(!std::path::Path::new(&file).exists() || free_bytes(&mnt) > (8 << 20), "{opts:?}: nothing filled");
    }
}
