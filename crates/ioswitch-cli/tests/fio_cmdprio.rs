//! `ioswitch bench`'s per-command I/O priorities (`cmdprio_percentage`, `cmdprio_class`,
//! `cmdprio`, `cmdprio_bssplit`) against fio 3.33's, on libaio and io_uring: the same job
//! run by both tools on a file reports the same priorities in the JSON's `"prios"` (class,
//! level, the latency object's name and keys), each priority's share of the I/Os within a
//! few standard deviations of what the options ask for, and the shares adding up to every
//! I/O. `group_reporting` over jobs of different `prioclass` reports per priority too.
//!
//! The tolerance: each I/O draws its priority independently, so a priority asked for a
//! share `p` of `n` I/Os gets a share with standard deviation `sqrt(p(1-p)/n)`; with
//! n = 4096 and p <= 0.5 that is at most 0.0078, and the tests allow 0.04 (more than 5 of
//! them) for each tool against the share asked for.
//!
//! Needs fio (skips with the reason when it is missing). The classes used (best-effort,
//! idle) need no privilege.

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::{output, success, FIO};
use ioswitch_testkit::{fio_scratch, text};
use serde_json::Value;
use std::path::Path;

const IOS: u64 = 4096;

/// Runs `program` with `args` in `dir`; the JSON it wrote to `out`.
fn run_json(dir: &Path, program: &str, args: &[String], out: &str) -> Value {
    success(program, args, Some(dir));
    let body = std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{out}: {e}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{program}'s JSON {out}: {e}\n{body}"))
}

/// Runs the job with both tools: (fio's JSON, ours).
fn both(s: &Scratch, tag: &str, job: &[String]) -> (Value, Value) {
    let mut out = Vec::new();
    for (who, program) in [("fio", FIO), ("ours", env!("CARGO_BIN_EXE_ioswitch"))] {
        let json = s.path(&format!("{tag}-{who}.json"));
        let mut a: Vec<String> = job.to_vec();
        a.push("--output-format=json".into());
        a.push(format!("--output={json}"));
        out.push(run_json(s.dir(), program, &a, &json));
    }
    let ours = out.pop().unwrap();
    (out.pop().unwrap(), ours)
}

/// One entry of a direction's `"prios"`: ((class, level), N, the latency object's name
/// and keys).
type Prio = ((u64, u64), u64, String, Vec<String>);

/// A direction's priorities.
fn prios(job: &Value, dir: &str) -> Vec<Prio> {
    let Some(list) = job[dir]["prios"].as_array() else { return Vec::new() };
    list.iter()
        .map(|p| {
            let obj = p.as_object().expect("a prios entry is an object");
            let keys: Vec<&String> = obj.keys().collect();
            assert_eq!(keys.len(), 3, "prioclass, prio and one latency object: {p}");
            let (name, lat) = obj.iter().find(|(k, _)| k.ends_with("lat_ns")).expect("a latency object");
            let lat_keys = lat.as_object().expect("latency object").keys().cloned().collect();
            let class = p["prioclass"].as_u64().expect("prioclass");
            let level = p["prio"].as_u64().expect("prio");
            ((class, level), lat["N"].as_u64().expect("N"), name.clone(), lat_keys)
        })
        .collect()
}

/// Checks one direction of both reports: the same priorities, latency objects named and
/// keyed alike, every I/O counted once, and each priority's share within 0.04 of `want`.
fn compare(fio: &Value, ours: &Value, dir: &str, want: &[((u64, u64), f64)], what: &str) {
    let (f, o) = (&fio["jobs"][0], &ours["jobs"][0]);
    let (fp, op) = (prios(f, dir), prios(o, dir));
    let ids = |p: &[Prio]| -> Vec<(u64, u64)> { p.iter().map(|e| e.0).collect() };
    let want_ids: Vec<(u64, u64)> = want.iter().map(|w| w.0).collect();
    assert_eq!(ids(&fp), want_ids, "{what}: fio's priorities");
    assert_eq!(ids(&op), want_ids, "{what}: our priorities (fio's: {:?})", ids(&fp));
    for (a, b) in fp.iter().zip(&op) {
        assert_eq!((&a.2, &a.3), (&b.2, &b.3), "{what}: latency object of priority {:?}", a.0);
    }
    for (who, job, p) in [("fio", f, &fp), ("ours", o, &op)] {
        let total = job[dir]["total_ios"].as_u64().expect("total_ios");
        assert_eq!(total, IOS, "{what}: {who}'s {dir} I/Os");
        let sum: u64 = p.iter().map(|e| e.1).sum();
        assert_eq!(sum, total, "{what}: {who}'s priorities count every I/O once");
        for (e, (id, share)) in p.iter().zip(want) {
            let got = e.1 as f64 / total as f64;
            assert!((got - share).abs() < 0.04, "{what}: {who}'s share of priority {id:?} is {got:.4}, asked {share}");
        }
    }
    // No prios where a direction has a single priority.
    let other = if dir == "read" { "write" } else { "read" };
    assert!(f[other].get("prios").is_none() && o[other].get("prios").is_none(), "{what}: {other} has no prios");
}

fn job(file: &str, engine: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--name=cp".into(),
        format!("--filename={file}"),
        format!("--ioengine={engine}"),
        // Room for IOS I/Os of up to 16 KiB: number_ios stops the job first.
        "--size=64m".into(),
        format!("--number_ios={IOS}"),
        "--rw=randread".into(),
        "--iodepth=8".into(),
        "--norandommap".into(),
    ];
    a.extend(extra.iter().map(|e| e.to_string()));
    a
}

#[test]
fn cmdprio_percentage_is_reported_per_priority_as_fio_reports_it() {
    let s = fio_scratch!("cmdprio_percentage_is_reported_per_priority_as_fio_reports_it", "fio-cmdprio-perc");
    let file = s.path("data");
    for engine in ["libaio", "io_uring"] {
        let j = job(&file, engine, &["--bs=4k", "--cmdprio_percentage=30", "--cmdprio_class=2", "--cmdprio=1"]);
        let (fio, ours) = both(&s, &format!("perc-{engine}"), &j);
        compare(&fio, &ours, "read", &[((0, 0), 0.70), ((2, 1), 0.30)], &format!("{engine} cmdprio_percentage"));
        // With clat_percentiles off the per-priority objects have no percentiles, in both;
        // with lat_percentiles they are total latencies ("lat_ns").
        let mut j2 = j.clone();
        j2.push("--lat_percentiles=1".into());
        let (fio, ours) = both(&s, &format!("perc-lat-{engine}"), &j2);
        compare(&fio, &ours, "read", &[((0, 0), 0.70), ((2, 1), 0.30)], &format!("{engine} lat_percentiles"));
        assert_eq!(prios(&ours["jobs"][0], "read")[0].2, "lat_ns");
    }
}

#[test]
fn cmdprio_bssplit_is_reported_per_priority_as_fio_reports_it() {
    let s = fio_scratch!("cmdprio_bssplit_is_reported_per_priority_as_fio_reports_it", "fio-cmdprio-bssplit");
    let file = s.path("data");
    for engine in ["libaio", "io_uring"] {
        // Half the I/Os 4k (20% of them idle class, level 0), half 16k (60% of them the
        // implicit priority: cmdprio_class=2, cmdprio=3).
        let j = job(
            &file,
            engine,
            &["--bssplit=4k/50:16k/50", "--cmdprio_bssplit=4k/20/3/0:16k/60", "--cmdprio_class=2", "--cmdprio=3"],
        );
        let (fio, ours) = both(&s, &format!("bssplit-{engine}"), &j);
        let want = [((0, 0), 0.60), ((3, 0), 0.10), ((2, 3), 0.30)];
        compare(&fio, &ours, "read", &want, &format!("{engine} cmdprio_bssplit"));
    }
}

#[test]
fn group_reporting_over_different_priorities_reports_each() {
    let s = fio_scratch!("group_reporting_over_different_priorities_reports_each", "fio-cmdprio-group");
    let file = s.path("data");
    let mut j = vec!["--group_reporting".to_string()];
    for (name, class) in [("a", "2"), ("b", "3")] {
        j.extend([
            format!("--name={name}"),
            format!("--filename={file}"),
            "--size=16m".into(),
            format!("--number_ios={}", IOS / 2),
            "--rw=randread".into(),
            "--bs=4k".into(),
            format!("--prioclass={class}"),
        ]);
    }
    let (fio, ours) = both(&s, "group", &j);
    for (who, v) in [("fio", &fio), ("ours", &ours)] {
        let p = prios(&v["jobs"][0], "read");
        let ids: Vec<((u64, u64), u64)> = p.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(ids, vec![((2, 0), IOS / 2), ((3, 0), IOS / 2)], "{who}: each job's I/Os under its priority");
    }
    let (f, o) = (prios(&fio["jobs"][0], "read"), prios(&ours["jobs"][0], "read"));
    assert_eq!((&f[0].2, &f[0].3), (&o[0].2, &o[0].3), "the latency objects");
}

#[test]
fn the_lat_logs_priority_column_holds_each_ios_priority_as_fios() {
    let s = fio_scratch!("the_lat_logs_priority_column_holds_each_ios_priority_as_fios", "fio-cmdprio-log");
    let file = s.path("data");
    let mut columns = Vec::new();
    for (who, program) in [("fio", FIO), ("ours", env!("CARGO_BIN_EXE_ioswitch"))] {
        let prefix = s.path(&format!("log-{who}"));
        let mut a = job(&file, "libaio", &["--bs=4k", "--cmdprio_percentage=30", "--cmdprio_class=2", "--cmdprio=1"]);
        a.extend([format!("--write_lat_log={prefix}"), "--log_prio=1".into(), "--prioclass=3".into()]);
        let o = output(program, &a, Some(s.dir()));
        assert!(o.status.success(), "{who}: {}", text(&o.stderr));
        let body = std::fs::read_to_string(format!("{prefix}_lat.1.log")).unwrap();
        let col: Vec<String> = body.lines().map(|l| l.rsplit(", ").next().unwrap_or_default().to_string()).collect();
        assert_eq!(col.len() as u64, IOS, "{who}: one entry per I/O");
        let high = col.iter().filter(|c| *c == "0x4001").count() as f64 / IOS as f64;
        let own = col.iter().filter(|c| *c == "0x6000").count() as f64 / IOS as f64;
        assert!((high - 0.30).abs() < 0.04 && (own + high - 1.0).abs() < 1e-9, "{who}: shares {high} / {own}");
        let mut kinds = col.clone();
        kinds.sort();
        kinds.dedup();
        columns.push(kinds);
    }
    assert_eq!(columns[0], columns[1], "the same priority values in both logs");
}
