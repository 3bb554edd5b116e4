//! `ioswitch bench` against fio on how a job's verify phase is accounted: fio's
//! `do_verify` queues the verify reads with `td_io_queue`, which marks their depth in
//! `iodepth_level` (and an async job verifies at its `iodepth`). The same
//! `verify=crc32c` write jobs run under both, and the JSON fields agree.
//!
//! Needs fio (skips with the reason when it is missing; `./scripts/test` installs it).

use ioswitch_testkit::tools::{output, success, who, FIO};
use ioswitch_testkit::{fio_scratch, text};
use serde_json::Value;

fn json(program: &str, args: &[String]) -> Value {
    let o = success(program, args, None);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{program}: not JSON ({e}):\n{}", text(&o.stdout)))
}

/// The seven percentages of `key` (`iodepth_level`, `iodepth_submit`, …), in the order
/// of their keys' names (the same for fio's JSON and ours).
fn levels(job: &Value, key: &str) -> Vec<f64> {
    job[key].as_object().unwrap_or_else(|| panic!("no {key}")).values().map(|v| v.as_f64().unwrap()).collect()
}

#[test]
fn the_verify_phase_shows_in_iodepth_level_as_fios_does() {
    let t = "the_verify_phase_shows_in_iodepth_level_as_fios_does";
    let s = fio_scratch!(t, "fio-verify");
    let data = s.path("data");
    // 256 random writes of 4 KiB at iodepth 8, then their 256 verify reads. With a
    // thinktime after every write the writes all go at depth 1 (the queue is drained
    // before each think), while the verify reads fill the queue: half of iodepth_level is
    // at 1 and half at 8, which a verify phase left out (100% at 1) or run one read at a
    // time (also 100%) does not give. psync: every I/O at depth 1 (and in the sums).
    for (engine, qd, extra) in
        [("libaio", 8, "--thinktime=50"), ("libaio", 8, "--iodepth_batch_complete_max=8"), ("psync", 1, "")]
    {
        let mut args: Vec<String> = [
            "--name=v",
            &format!("--filename={data}"),
            "--size=1m",
            "--bs=4k",
            "--rw=randwrite",
            "--verify=crc32c",
            &format!("--ioengine={engine}"),
            &format!("--iodepth={qd}"),
            "--output-format=json",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        if !extra.is_empty() {
            args.push(extra.into());
        }
        let fio = json(FIO, &args);
        let ours = json(env!("CARGO_BIN_EXE_ioswitch"), &args);
        let (f, o) = (&fio["jobs"][0], &ours["jobs"][0]);
        let what = format!("{engine} {extra}");
        for key in ["iodepth_level", "iodepth_submit"] {
            let (a, b) = (levels(f, key), levels(o, key));
            // The depths are the same I/O by I/O; 0.5 points leaves room for fio's
            // rounding of a few counts.
            assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 0.5), "{what} {key}: fio {a:?}, ours {b:?}");
        }
        for dir in ["read", "write"] {
            assert_eq!(f[dir]["total_ios"], o[dir]["total_ios"], "{what}: {dir} total_ios");
        }
        assert_eq!((&f["error"], &o["error"]), (&Value::from(0), &Value::from(0)), "{what}");
        if extra == "--thinktime=50" {
            let at = |k: &str| o["iodepth_level"][k].as_f64().unwrap();
            assert!((at("1") - 50.0).abs() < 3.0 && (at("8") - 50.0).abs() < 3.0, "{what}: {}", o["iodepth_level"]);
        }
    }
}

/// Runs `program` (fio, or `ioswitch bench`) with `args` in `dir`; returns its stderr
/// and stdout together.
fn run_in(dir: &std::path::Path, program: &str, args: &[&str]) -> String {
    let o = output(program, args, Some(dir));
    format!("{}{}", text(&o.stderr), text(&o.stdout))
}

#[test]
fn verify_dump_writes_the_files_fio_writes() {
    let t = "verify_dump_writes_the_files_fio_writes";
    let s = fio_scratch!(t, "fio-verify-dump");
    for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
        let who = who(program);
        let dir = s.subdir(who);
        let write =
            ["--name=w", "--filename=d.dat", "--size=16k", "--bs=4k", "--rw=write", "--verify=crc32c", "--do_verify=0"];
        run_in(&dir, program, &write);
        let data = dir.join("d.dat");
        let good = std::fs::read(&data).expect("the written file");
        // One byte of block 1's payload changed (its checksum fails), block 2's header
        // zeroed (its header fails); blocks 0 and 3 are sound.
        let mut bad = good.clone();
        bad[4096 + 100] ^= 0xff;
        bad[8192..8196].fill(0);
        std::fs::write(&data, &bad).unwrap();
        let read = [
            "--name=r",
            "--filename=d.dat",
            "--size=16k",
            "--bs=4k",
            "--rw=read",
            "--verify=crc32c",
            "--verify_dump=1",
            "--continue_on_error=verify",
        ];
        let out = run_in(&dir, program, &read);
        let mut names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.retain(|n| n.starts_with("d.dat."));
        names.sort();
        assert_eq!(names, ["d.dat.4096.expected", "d.dat.4096.received", "d.dat.8192.hdr_fail"], "{who}:\n{out}");
        let file = |n: &str| std::fs::read(dir.join(n)).unwrap();
        assert!(file("d.dat.4096.received") == bad[4096..8192], "{who}: the block read");
        assert!(file("d.dat.8192.hdr_fail") == bad[8192..12288], "{who}: the block with the bad header");
        // fio regenerates the expected block from its header's seed, but its header
        // fields (fio's own time stamps) differ from the block written: ours must be the
        // block as written, fio's a block of the same length.
        let expected = file("d.dat.4096.expected");
        assert_eq!(expected.len(), 4096, "{who}: the expected block's length");
        assert!(program == "fio" || expected == good[4096..8192], "{who}: the block as written");
        for (what, name) in [("received", "d.dat.4096.received"), ("hdr_fail", "d.dat.8192.hdr_fail")] {
            assert!(
                out.contains(&format!("{what} data dumped as {name}")),
                "{who} does not say it dumped {name}:\n{out}"
            );
        }
    }
}

/// Flips every bit of the bytes at `offsets` in the file `data`, in place; returns the
/// file's bytes as damaged.
fn damage(data: &std::path::Path, offsets: &[usize]) -> Vec<u8> {
    let mut bytes = std::fs::read(data).expect("the written file");
    for &at in offsets {
        bytes[at] ^= 0xff;
    }
    std::fs::write(data, &bytes).unwrap();
    bytes
}

#[test]
fn verify_interval_finds_a_damaged_header_inside_a_block_as_fio_does() {
    let t = "verify_interval_finds_a_damaged_header_inside_a_block_as_fio_does";
    let s = fio_scratch!(t, "fio-verify-interval");
    for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
        let who = who(program);
        for interval in ["512", "none"] {
            let dir = s.subdir(&format!("{who}-{interval}"));
            let mut common = vec!["--filename=d.dat", "--size=16k", "--bs=4k", "--verify=meta", "--verify_dump=1"];
            let vi = format!("--verify_interval={interval}");
            if interval != "none" {
                common.push(&vi);
            }
            let mut write = vec!["--name=w", "--rw=write", "--do_verify=0"];
            write.extend(&common);
            run_in(&dir, program, &write);
            // Byte 4 of the block's second 512-byte piece: the header's length field
            // with an interval of 512 (fio's and ours), payload without one (which
            // verify=meta does not check).
            let bytes = damage(&dir.join("d.dat"), &[4096 + 512 + 4]);
            let mut read = vec!["--name=r", "--rw=read"];
            read.extend(&common);
            let out = run_in(&dir, program, &read);
            let dumped = dir.join("d.dat.4608.hdr_fail");
            if interval == "512" {
                assert!(
                    std::fs::read(&dumped).is_ok_and(|d| d == bytes[4608..5120]),
                    "{who}: no 512-byte piece at 4608 dumped:\n{out}"
                );
            } else {
                assert!(
                    !dumped.exists() && !out.contains("dumped"),
                    "{who}: meta with one header per block checks no payload:\n{out}"
                );
            }
        }
    }
}

#[test]
fn verify_async_checkers_find_and_dump_the_bad_blocks_fio_finds() {
    let t = "verify_async_checkers_find_and_dump_the_bad_blocks_fio_finds";
    let s = fio_scratch!(t, "fio-verify-async");
    for program in [FIO, env!("CARGO_BIN_EXE_ioswitch")] {
        let who = who(program);
        for engine in ["psync", "libaio"] {
            let dir = s.subdir(&format!("{who}-{engine}"));
            let write = [
                "--name=w",
                "--filename=d.dat",
                "--size=64k",
                "--bs=4k",
                "--rw=write",
                "--verify=crc32c",
                "--do_verify=0",
            ];
            run_in(&dir, program, &write);
            // Blocks 3 and 9 damaged, the others sound: 4 checker threads must find both.
            let bytes = damage(&dir.join("d.dat"), &[3 * 4096 + 100, 9 * 4096 + 200]);
            let ioengine = format!("--ioengine={engine}");
            let read = [
                "--name=r",
                "--filename=d.dat",
                "--size=64k",
                "--bs=4k",
                "--rw=read",
                "--iodepth=4",
                &ioengine,
                "--verify=crc32c",
                "--verify_dump=1",
                "--continue_on_error=verify",
                "--verify_async=4",
            ];
            let out = run_in(&dir, program, &read);
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("d.dat."))
                .collect();
            names.sort();
            assert_eq!(
                names,
                ["d.dat.12288.expected", "d.dat.12288.received", "d.dat.36864.expected", "d.dat.36864.received"],
                "{who} {engine}:\n{out}"
            );
            assert!(std::fs::read(dir.join("d.dat.36864.received")).unwrap() == bytes[36864..40960], "{who} {engine}");
        }
    }
}
