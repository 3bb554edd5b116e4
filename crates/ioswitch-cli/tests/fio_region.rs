//! `ioswitch bench` against fio on how many I/Os a job takes from its region: when the
//! region is not a whole number of blocks, when a pattern leaves holes (`rw=read:8k`),
//! and when `size`, `offset` or `io_size` is a percentage; with fio's rules for passes,
//! `loops` and `io_size`, over one file and over several. Before, ours took one I/O more
//! than fio where the blocks did not fit (`size=1m bs=3k`: 342 reads, the last back at
//! offset 0, where fio reads 341 from a 1 MiB file), went on past the region's end with
//! holes (256 reads for `read:8k`, fio 86), took percentages of the device without
//! fio's rounding (`io_size=N%` is of the region), verified a job's writes once at its
//! end where fio verifies each pass (`loops=2`: 256 verify reads, fio 512), and stopped
//! at `number_ios` over all loops where fio stops at `number_ios × loops`.
//!
//! Needs fio (the test skips with the reason without it; `./scripts/test` installs it).
//! fio's runs are bounded and tried again when one hangs: fio 3.33 can hang for ever
//! starting `io_submit_mode=offload`'s workers (see `output_retrying_hangs`).

use ioswitch_testkit::tools::{output_retrying_hangs, plain_success};
use ioswitch_testkit::{fio_scratch, serial, text};

/// (read, write) I/Os and bytes of every job of a fio-format JSON report, summed.
fn totals(json: &[u8]) -> [u64; 4] {
    let v: serde_json::Value =
        serde_json::from_slice(json).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", text(json)));
    let mut t = [0; 4];
    for j in v["jobs"].as_array().expect("jobs") {
        for (i, (dir, key)) in
            [("read", "total_ios"), ("write", "total_ios"), ("read", "io_bytes"), ("write", "io_bytes")]
                .iter()
                .enumerate()
        {
            t[i] += j[dir][key].as_u64().unwrap_or_else(|| panic!("{dir}.{key} in {}", text(json)));
        }
    }
    t
}

#[test]
fn a_region_of_no_whole_number_of_blocks_takes_as_many_ios_as_with_fio() {
    let t = "a_region_of_no_whole_number_of_blocks_takes_as_many_ios_as_with_fio";
    let s = fio_scratch!(t, "region-blocks");
    let _one = serial();
    // Each job runs on files of zeroes made anew for each tool (nothing to lay out): of
    // 4 MiB, where a sequential pass's last block may end past the region, and of 1 MiB,
    // the region's own size, where it may not (fio's fill_io_u: the file's end bounds
    // it). The counts beside them are what fio 3.33 issued on this machine.
    const M: u64 = 1 << 20;
    let one: &[(&[&str], u64, u64)] = &[
        (&["--rw=read", "--bs=3k", "--size=1m"], 4 * M, 342),
        (&["--rw=read", "--bs=3k", "--size=1m"], M, 341),
        // The last block (1047552..1050624) ends at the file's end, or 1 byte past it.
        (&["--rw=read", "--bs=3k", "--size=1m"], M + 2048, 342),
        (&["--rw=read", "--bs=3k", "--size=1m"], M + 2047, 341),
        (&["--rw=write", "--bs=3k", "--size=1m"], M, 341),
        (&["--rw=write", "--bs=3k", "--size=1m", "--verify=crc32c"], 4 * M, 342 * 2),
        (&["--rw=randread", "--bs=3k", "--size=1m"], 4 * M, 341),
        (&["--rw=randread", "--bs=3k", "--size=1m", "--norandommap"], M, 342),
        (&["--rw=randread", "--bs=3k", "--size=1m", "--random_generator=lfsr"], 4 * M, 341),
        (&["--rw=read", "--bs=3k", "--size=1m", "--loops=2"], 4 * M, 683),
        (&["--rw=read", "--bs=3k", "--size=1m", "--loops=2"], M, 682),
        (&["--rw=randread", "--bs=3k", "--size=1m", "--loops=3"], M, 1023),
        (&["--rw=read", "--bs=3k", "--size=1m", "--io_size=2m"], M, 682),
        (&["--rw=read", "--bs=3k", "--size=1m", "--io_size=4m", "--loops=2"], M, 1705),
        (&["--rw=read", "--bs=3k", "--size=1m", "--io_size=4m", "--loops=2"], 4 * M, 1368),
        (&["--rw=read", "--bs=3k", "--size=2m", "--io_size=1m"], 2 * M, 342),
        (&["--rw=read", "--bs=3k", "--size=1m", "--number_ios=400"], M, 341),
        (&["--rw=read", "--bs=3k", "--size=1m", "--ioengine=libaio", "--iodepth=8"], M, 341),
        (
            &["--rw=read", "--bs=3k", "--size=1m", "--ioengine=libaio", "--iodepth=4", "--io_submit_mode=offload"],
            M,
            341,
        ),
        (&["--rw=randread", "--bs=4k", "--size=1m", "--io_size=50%", "--loops=2"], 4 * M, 256),
        (&["--rw=read", "--bs=3k", "--size=1m", "--io_size=30%"], M, 103),
        // Offset modifiers: a hole after each read (12 KiB strides: 86 start in 1 MiB) ...
        (&["--rw=read:8k", "--bs=4k", "--size=1m"], 4 * M, 86),
        (&["--rw=read:8k", "--bs=4k", "--size=1m"], M, 86),
        (&["--rw=read:3k", "--bs=4k", "--size=1m"], 4 * M, 147),
        (&["--rw=read:3k", "--bs=4k", "--size=1m"], M, 146),
        // A hole that reaches past the file's end goes back to the region's start, unless
        // the last read ended at the file's end: then, and past the region, the pass ends.
        (&["--rw=read:8k", "--bs=4k", "--size=1m"], 1_049_000, 256),
        (&["--rw=read:8k", "--bs=4k", "--size=1m"], 1_100_000, 86),
        (&["--rw=write:4k", "--bs=4k", "--size=1m", "--loops=2"], 4 * M, 256),
        (&["--rw=read:8k", "--bs=4k", "--size=1m", "--io_size=1m"], 4 * M, 256),
        // ... and backwards, which wraps to the end (bytes end it).
        (&["--rw=read:-8k", "--bs=4k", "--size=1m"], 4 * M, 256),
        // size and offset as percentages of the file: rounded to the smallest block.
        (&["--rw=read", "--bs=3k", "--size=50%"], 4 * M, 682),
        (&["--rw=randread", "--bs=3k", "--size=50%"], 4 * M, 682),
        (&["--rw=randread", "--bs=4k", "--size=30%"], 4 * M, 307),
        (&["--rw=randread", "--bs=4k", "--size=90%", "--offset=20%"], 4 * M, 819),
        (&["--rw=read", "--bs=4k", "--size=10%", "--offset=95%"], 4 * M, 51),
        // Verify: each pass's writes read back when it ends (the counts are writes +
        // verify reads), and the verify reads count toward io_size.
        (&["--rw=write", "--bs=4k", "--size=1m", "--verify=crc32c", "--loops=2"], 4 * M, 1024),
        (&["--rw=randwrite", "--bs=4k", "--size=1m", "--verify=crc32c", "--loops=2"], 4 * M, 1024),
        (&["--rw=write", "--bs=4k", "--size=1m", "--verify=crc32c", "--io_size=3m"], 4 * M, 1024),
        (&["--rw=write", "--bs=3k", "--size=1m", "--verify=crc32c", "--loops=2"], M, 1364),
        (&["--rw=write", "--bs=3k", "--size=1m", "--verify=crc32c", "--loops=2"], 4 * M, 1366),
        (&["--rw=write", "--bs=4k", "--size=263168", "--verify=crc32c"], 4 * M, 130),
        (
            &["--rw=write", "--bs=4k", "--size=1m", "--verify=crc32c", "--loops=3", "--ioengine=libaio", "--iodepth=8"],
            4 * M,
            1536,
        ),
        // ... with holes, each pass's writes where they went.
        (&["--rw=write:8k", "--bs=4k", "--size=1m", "--verify=crc32c", "--loops=2"], 4 * M, 344),
        (&["--rw=write:8k", "--bs=4k", "--size=1m", "--verify=crc32c", "--io_size=2m"], 4 * M, 516),
        // number_ios is per loop.
        (&["--rw=read", "--bs=4k", "--size=1m", "--number_ios=100", "--loops=2"], 4 * M, 200),
        (&["--rw=write", "--bs=4k", "--size=1m", "--verify=crc32c", "--number_ios=100", "--loops=2"], 4 * M, 400),
    ];
    // Two files (size=2m: 1 MiB a file).
    let several: &[(&[&str], u64, u64)] = &[
        (&["--rw=randread", "--bs=3k", "--size=2m"], M, 682),
        (&["--rw=read", "--bs=3k", "--size=2m", "--loops=2"], M, 1364),
        (&["--rw=randread", "--bs=3k", "--size=2m", "--io_size=3m"], M, 1024),
        (&["--rw=randread", "--bs=3k", "--size=2m", "--file_service_type=sequential"], M, 682),
        (&["--rw=randread", "--bs=4k", "--size=2m", "--io_size=50%"], M, 256),
        (&["--rw=read:8k", "--bs=4k", "--size=1m"], M / 2, 256),
        (&["--rw=randwrite", "--bs=4k", "--filesize=100k", "--verify=crc32c", "--loops=2"], 100 << 10, 200),
        (
            &["--rw=write", "--bs=4k", "--size=2m", "--verify=crc32c", "--loops=2", "--ioengine=libaio", "--iodepth=4"],
            M,
            2048,
        ),
    ];
    for (files, cases) in [(1, one), (2, several)] {
        for (opts, len, ios) in cases {
            let mut got = Vec::new();
            for tool in ["fio", "ours"] {
                let dir = s.path(&format!("{tool}-{files}"));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir(&dir).expect("a directory per tool");
                let mut job = vec!["--name=j".to_string(), "--output-format=json".into()];
                if files == 1 {
                    let f = format!("{dir}/f");
                    std::fs::File::create(&f).and_then(|h| h.set_len(*len)).expect("a file of zeroes");
                    job.push(format!("--filename={f}"));
                } else {
                    for n in 0..files {
                        let f = format!("{dir}/j.0.{n}");
                        std::fs::File::create(&f).and_then(|h| h.set_len(*len)).expect("a file of zeroes");
                    }
                    job.extend([format!("--directory={dir}"), format!("--nrfiles={files}")]);
                }
                job.extend(opts.iter().map(|o| o.to_string()));
                let out = if tool == "fio" {
                    // fio 3.33 can hang for ever starting offload's workers: bounded, and
                    // tried again (output_retrying_hangs).
                    let o = output_retrying_hangs("fio", &job, std::path::Path::new(&dir), 60, 5)
                        .unwrap_or_else(|| panic!("fio {job:?} hung in each of 5 runs"));
                    assert!(o.status.success(), "fio {job:?} failed ({}):\n{}", o.status, text(&o.stderr));
                    o
                } else {
                    let mut args = vec!["bench".to_string()];
                    args.extend(job);
                    args.push("--no-progress".into());
                    plain_success(env!("CARGO_BIN_EXE_ioswitch"), &args, None)
                };
                got.push(totals(&out.stdout));
            }
            let what = format!("{files} file(s) of {len} bytes, {opts:?}");
            let fio_ios = got[0][0] + got[0][1];
            assert_eq!(fio_ios, *ios, "{what}: fio's own count has changed: {:?}", got[0]);
            assert_eq!(got[1], got[0], "{what}: ours against fio's (read, write I/Os; read, write bytes)");
        }
    }
}
