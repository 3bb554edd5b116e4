//! `ioswitch bench`'s I/O priority and NUMA options against fio's: `prioclass`/`prio`
//! show in the latency logs' priority column as fio writes it (with and without
//! `log_prio`), and both tools refuse a NUMA node the machine does not have. `sync=1`
//! (`sync`, `dsync`) opens the job's file with O_SYNC (O_DSYNC) on the engines fio opens
//! it so for, and a `sync=dsync` psync job runs as fio's does; on the engines where the
//! flag means nothing it is refused with the engine and the reason.
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
fn sync_is_refused_on_engines_whose_writes_skip_the_opened_file() {
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "fio-prio-sync");
    let file = s.path("data");
    // The refusal names the value as given, the open flag fio would add for it, the
    // engine and why.
    for (engine, value, flag, why) in [
        ("mmap", "1", "O_SYNC", "its writes are stores to a mapping"),
        ("mmap", "sync", "O_SYNC", "its writes are stores to a mapping"),
        ("null", "dsync", "O_DSYNC", "it does no I/O"),
    ] {
        let args = [format!("--ioengine={engine}"), format!("--sync={value}"), format!("--filename={file}")];
        let o = ours(s.dir(), &["--name=s", &args[0], &args[1], &args[2], "--size=64k", "--rw=write"]);
        assert!(!o.status.success(), "{args:?}");
        let want = format!("sync={value} ({flag} writes) is not run with ioengine={engine}: {why}");
        assert!(text(&o.stderr).contains(&want), "{}", text(&o.stderr));
    }
}

/// Linux's O_DSYNC, and the bit O_SYNC adds to it (`__O_SYNC`; O_SYNC is both), as
/// /proc/PID/fdinfo shows them (the values of x86-64 and arm64).
const O_DSYNC: i32 = 0o10000;
const O_SYNC_ONLY: i32 = 0o4000000;

/// The open flags of every descriptor of this user's processes that is open on `path`
/// (`flags:` of /proc/PID/fdinfo, octal).
fn open_flags_of(path: &Path) -> Vec<i32> {
    let mut found = Vec::new();
    for proc_dir in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(fds) = fs::read_dir(proc_dir.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if fs::read_link(fd.path()).is_ok_and(|t| t == path) {
                let Ok(info) = fs::read_to_string(proc_dir.path().join("fdinfo").join(fd.file_name())) else {
                    continue;
                };
                let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap_or_default();
                found.extend(i32::from_str_radix(flags.trim(), 8).ok());
            }
        }
    }
    found
}

#[test]
fn a_sync_job_opens_its_file_with_the_flag() {
    let s = Scratch::new(env!("CARGO_TARGET_TMPDIR"), "fio-prio-sync-flag");
    for (engine, value, want) in [("psync", "dsync", (true, false)), ("io_uring", "1", (true, true))] {
        let file = s.path(&format!("data-{engine}"));
        let args = [format!("--ioengine={engine}"), format!("--sync={value}"), format!("--filename={file}")];
        let argv =
            ["--name=s", &args[0], &args[1], &args[2], "--size=256k", "--rw=write", "--time_based", "--runtime=3"];
        let mut child = ioswitch_testkit::tools::command(env!("CARGO_BIN_EXE_ioswitch"), Some(s.dir()))
            .args(argv)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let path = fs::canonicalize(s.dir()).unwrap().join(format!("data-{engine}"));
        let start = std::time::Instant::now();
        let mut flags = Vec::new();
        // Looks while the job writes (laying the file out may open it without the flag).
        while start.elapsed() < std::time::Duration::from_secs(3) && child.try_wait().unwrap().is_none() {
            flags = open_flags_of(&path);
            if flags.iter().any(|f| f & O_DSYNC != 0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{argv:?}: {}", text(&o.stderr));
        let got: Vec<(bool, bool)> = flags.iter().map(|f| (f & O_DSYNC != 0, f & O_SYNC_ONLY != 0)).collect();
        assert!(
            got.contains(&want),
            "{engine} sync={value}: open flags {:?}, want (O_DSYNC, O_SYNC) {want:?}",
            flags.iter().map(|f| format!("{f:o}")).collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_dsync_psync_job_runs_as_fios_does() {
    // On a disk file system (/var/tmp), where O_DSYNC makes each write wait for the disk.
    let Some(s) = ioswitch_testkit::tools::scratch_if_present(
        "a_dsync_psync_job_runs_as_fios_does",
        &[ioswitch_testkit::tools::FIO_RUNS],
        "/var/tmp",
        "ioswitch-fio-prio-dsync",
    ) else {
        return;
    };
    let mut iops = Vec::new();
    for (who, program) in [("fio", FIO), ("ours", env!("CARGO_BIN_EXE_ioswitch"))] {
        let file = format!("--filename={}", s.path(&format!("data-{who}")));
        let argv = [
            "--name=d",
            "--ioengine=psync",
            "--sync=dsync",
            "--rw=write",
            "--bs=4k",
            "--size=1m",
            &file,
            "--output-format=json",
        ];
        let o = output(program, &argv, Some(s.dir()));
        assert!(o.status.success(), "{who}: {}", text(&o.stderr));
        let j: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: not JSON ({e}): {}", text(&o.stdout)));
        let w = &j["jobs"][0]["write"];
        assert_eq!((w["total_ios"].as_u64(), j["jobs"][0]["error"].as_u64()), (Some(256), Some(0)), "{who}: {w}");
        iops.push((who, w["iops"].as_f64().unwrap_or_default()));
    }
    // Not asserted (timings on a shared machine): printed for the comparison.
    eprintln!("sync=dsync psync 4k writes on /var/tmp, write IOPS: {iops:?}");
}
