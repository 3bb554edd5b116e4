//! `ioswitch bench` against fio on flow control between jobs (`flow`, `flow_sleep`; fio's
//! flow.c): two time-based jobs of weights 1 and 8 (fio's examples/flow.fio, small and
//! short) and 1 and 3, on one file, and 1 and 8 with the writer starting late; the ratio
//! of their I/O counts (counts, not times)
//! must be within 10% of fio's on the same job.
//!
//! Needs fio (the test skips with the reason when it is missing; `./scripts/test`
//! installs fio).

use ioswitch_testkit::tools::{success, FIO};
use ioswitch_testkit::{fio_scratch, text};

/// The I/Os (reads plus writes) of each job of `program`'s JSON output for `job`.
fn ios(program: &str, job: &str) -> Vec<(String, u64)> {
    let o = success(program, &["--output-format=json", job], None);
    let out = text(&o.stdout);
    let json: serde_json::Value = serde_json::from_str(&out[out.find('{').expect("JSON")..])
        .unwrap_or_else(|e| panic!("{program}'s JSON: {e}\n{out}"));
    json["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            let n = |d: &str| j[d]["total_ios"].as_u64().expect("total_ios");
            (j["jobname"].as_str().expect("jobname").to_string(), n("read") + n("write"))
        })
        .collect()
}

#[test]
fn flow_weights_share_the_ios_between_jobs_as_fio_does() {
    let t = "flow_weights_share_the_ios_between_jobs_as_fio_does";
    let s = fio_scratch!(t, "flow");
    let file = s.file("data", 4 << 20);
    // The third job starts its writer 300 ms late, ending with the reader: the reader is
    // held until the writer starts (fio counts every weight from the start), so the ratio
    // stays the weights'; a reader let go alone would do 300 ms of reads first.
    let late = "startdelay=300ms\nruntime=700ms\n";
    for (engine, weights, writer) in
        [("psync", [1, 8], late), ("psync", [1, 8], ""), ("libaio\niodepth=16", [1, 3], "")]
    {
        let job = s.path("flow.fio");
        std::fs::write(
            &job,
            format!(
                "[global]\nnorandommap\nthread\ntime_based\nruntime=1\nioengine={engine}\nsize=4m\nbs=4k\n\
                 filename={file}\nflow_sleep=100\n\n[writer]\nrw=write\nflow={}\n{writer}\n[reader]\nrw=randread\nflow={}\n",
                weights[0], weights[1]
            ),
        )
        .expect("write the job file");
        let theirs = ios(FIO, &job);
        let ours = ios(env!("CARGO_BIN_EXE_ioswitch"), &job);
        let ratio = |r: &[(String, u64)]| {
            assert_eq!(r.iter().map(|j| j.0.as_str()).collect::<Vec<_>>(), ["writer", "reader"]);
            assert!(r[0].1 > 100, "too few I/Os to compare: {r:?}");
            r[1].1 as f64 / r[0].1 as f64
        };
        let (theirs_r, ours_r) = (ratio(&theirs), ratio(&ours));
        println!("{engine:?} flow {weights:?} {writer:?}: fio {theirs:?} ({theirs_r:.3}), ours {ours:?} ({ours_r:.3})");
        assert!(
            (ours_r / theirs_r - 1.0).abs() < 0.10,
            "flow {weights:?} with {engine:?} (writer: {writer:?}): reader/writer I/Os {ours_r:.3} against fio's {theirs_r:.3}"
        );
        if !writer.is_empty() {
            // The ratio alone does not show the hold: a reader let go alone for 300 ms is
            // caught up by the writer later (the shared count). Its I/O count does: fio's
            // reader waits, and one let go does several times as many reads (5x here).
            assert!(
                ours[1].1 < 3 * theirs[1].1,
                "the late writer's reader was not held until the writer started: {} reads against fio's {}",
                ours[1].1,
                theirs[1].1
            );
        }
    }
}
