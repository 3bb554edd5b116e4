//! `ioswitch bench`'s I/O priority and NUMA options against fio's: `prioclass`/`prio`
//! show in the latency logs' priority column as fio writes it (with and without
//! `log_prio`), and both tools refuse a NUMA node the machine does not have. `sync=1`
//! (`sync`, `dsync`) outside ioengine=libpmem is refused with the reason.
//!
//! Needs fio (skips with the reason when it is missing).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::{output, plain, FIO};
use ioswitch_testkit::{fio_scratch, text};
use std::fs;
use std::path::Path;
use std::process::Output;

fn ours(dir: &Path, args: &[&str]) -> Output {
    output(env!("CARGO_BIN_EXE_ioswitch"), args, Some(dir))
}

/// The lat log's priority column (its last field) of each line.
fn prio_column(path: &Path) -> Vec<String> {
    let body = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    body.lines().map(|l| l.rsplit(", ").next().unwrap_or_default().to_string()).collect()
}

#[test]
fn io_priority_shows_in_the_logs_as_in_fios() {
    let s = fio_scratch!("io_priority_shows_in_the_logs_as_in_fios", "fio-prio-logs");
    // (options, the column fio 3.33 writes): prioclass=1 is real-time, which needs
    // CAP_SYS_ADMIN (or CAP_SYS_NICE); the others any user may set.
    let mut cases =
        vec![(vec!["--prioclass=3", "--log_prio=1"], "0x6000"), (vec!["--prio=5", "--log_prio=1"], "0x4005")];
    cases.push((vec!["--prioclass=3"], "0"));
    let root = text(&plain("id", &["-u"], Some(s.dir())).stdout).trim() == "0";
    if root {
        cases.push((vec!["--prioclass=1", "--prio=2", "--log_prio=1"], "0x2002"));
        cases.push((vec!["--prioclass=1", "--prio=2"], "1"));
    } else {
        eprintln!("not root: the real-time class's cases are not run");
    }
    for (k, (opts, want)) in cases.iter().enumerate() {
        for (who, program) in [("fio", FIO), ("ours", env!("CARGO_BIN_EXE_ioswitch"))] {
            let prefix = s.path(&format!("c{k}-{who}"));
            let file = s.path("data");
            let mut a: Vec<String> = vec![
                "--name=prio".into(),
                format!("--filename={file}"),
                "--size=64k".into(),
                "--bs=4k".into(),
                "--rw=write".into(),
                format!("--write_lat_log={prefix}"),
            ];
            a.extend(opts.iter().map(|o| o.to_string()));
            let o = output(program, &a, Some(s.dir()));
            assert!(o.status.success(), "{who} {a:?}: {}", text(&o.stderr));
            let col = prio_column(Path::new(&format!("{prefix}_lat.1.log")));
            assert_eq!(col.len(), 16, "{who} {opts:?}: one entry per 4k write");
            assert!(col.iter().all(|c| c == want), "{who} {opts:?}: priority column {col:?}, want {want}");
        }
    }
}

#[test]
fn a_numa_node_the_machine_lacks_is_refused_as_fio_refuses_it() {
    let s = fio_scratch!("a_numa_node_the_machine_lacks_is_refused_as_fio_refuses_it", "fio-prio-numa");
    let file = s.path("data");
    let job = |opt: &str| vec!["--name=n".to_string(), format!("--filename={file}"), "--size=64k".into(), opt.into()];
    for opt in ["--numa_cpu_nodes=4000", "--numa_mem_policy=bind:4000"] {
        let a = job(opt);
        let argv: Vec<&str> = a.iter().map(String::as_str).collect();
        let f = output(FIO, &argv, Some(s.dir()));
        let err = text(&f.stderr) + &text(&f.stdout);
        if !err.contains("numa") {
            eprintln!("fio here has no NUMA support (libnuma): {opt}'s comparison is not run");
        } else {
            assert!(!f.status.success(), "fio accepted {opt}: {err}");
        }
        let o = ours(s.dir(), &argv);
        let e = text(&o.stderr);
        assert!(!o.status.success(), "ours accepted {opt}");
        assert!(e.contains("node 4000 does not exist"), "{opt}: {e}");
    }
    // The machine's first node runs, in both.
    let node = fs::read_to_string("/sys/devices/system/node/online").ok();
    let Some(first) = node.as_deref().and_then(|n| n.trim().split([',', '-']).next()).map(str::to_string) else {
        eprintln!("no /sys/devices/system/node/online: the run on a node is not done");
        return;
    };
    let mut a = job(&format!("--numa_cpu_nodes={first}"));
    a.push(format!("--numa_mem_policy=bind:{first}"));
    let argv: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = ours(s.dir(), &argv);
    assert!(o.status.success(), "ours on node {first}: {}", text(&o.stderr));
}

#[test]
fn sync_is_refused_outside_libpmem() {
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "fio-prio-sync");
    let file = s.path("data");
    // The refusal names the value as given, and the open flag fio would add for it.
    for (value, flag) in [("1", "O_SYNC"), ("sync", "O_SYNC"), ("dsync", "O_DSYNC")] {
        let sync = format!("--sync={value}");
        let o = ours(s.dir(), &["--name=s", &format!("--filename={file}"), "--size=64k", "--rw=write", &sync]);
        assert!(!o.status.success());
        let want = format!("sync={value} ({flag} writes) is run only with ioengine=libpmem");
        assert!(text(&o.stderr).contains(&want), "{}", text(&o.stderr));
    }
}
