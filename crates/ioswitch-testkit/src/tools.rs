//! Running one job under fio and under `ioswitch bench`, for the tests that compare the
//! two tools: the same arguments, given to `fio` or to the ioswitch binary's `bench`.

use crate::dirs::Scratch;
use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// fio's program name. Any other program given to these helpers is the ioswitch binary
/// (the test's `env!("CARGO_BIN_EXE_ioswitch")`), run as `PROGRAM bench --no-progress ARGS`.
pub const FIO: &str = "fio";

/// The scratch directory `base/NAME-PID` ([`Scratch::new`]) of test `test`, which runs
/// `programs` (each with the argument that probes it, as [`crate::have`] takes them:
/// `("fio", "--version")`); `None` where one of them does not run here: the test skips,
/// saying why (in the guest, a failure).
pub fn scratch_if_present(test: &str, programs: &[(&str, &str)], base: &str, name: &str) -> Option<Scratch> {
    if programs.iter().all(|&(program, probe)| crate::have(program, probe, test)) {
        Some(Scratch::new(base, name))
    } else {
        None
    }
}

/// fio with the argument that shows it runs ([`crate::have`]'s probe).
pub const FIO_RUNS: (&str, &str) = (FIO, "--version");

/// The scratch directory of a test that compares with fio:
/// `fio_scratch!(test, "name")` is [`scratch_if_present`]`(test, &[FIO_RUNS], <the test
/// target's CARGO_TARGET_TMPDIR>, "name")`, and **returns from the test** (it skips,
/// saying why) where fio does not run here. More programs the test needs follow, each
/// with its probe: `fio_scratch!(test, "name", ("strace", "-V"))`.
#[macro_export]
macro_rules! fio_scratch {
    ($test:expr, $name:expr $(, $program:expr)*) => {
        match $crate::tools::scratch_if_present(
            $test,
            &[$crate::tools::FIO_RUNS $(, $program)*],
            env!("CARGO_TARGET_TMPDIR"),
            $name,
        ) {
            Some(s) => s,
            None => return,
        }
    };
}

/// `"fio"` or `"ours"`: which tool `program` is, for file names and messages.
pub fn who(program: &str) -> &'static str {
    if program == FIO {
        "fio"
    } else {
        "ours"
    }
}

/// The command that runs a job with `program`: `fio`, or `PROGRAM bench --no-progress`;
/// no standard input; in `dir` when one is given.
pub fn command(program: &str, dir: Option<&Path>) -> Command {
    let mut cmd = Command::new(program);
    if program != FIO {
        cmd.args(["bench", "--no-progress"]);
    }
    cmd.stdin(Stdio::null());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd
}

/// Runs the job `args` with `program` ([`command`]); its output, whatever its exit status.
/// Panics, naming the program, when it does not start or runs past [`RUN_LIMIT_S`].
pub fn output<S: AsRef<OsStr>>(program: &str, args: &[S], dir: Option<&Path>) -> Output {
    finish(command(program, dir).args(args), program)
}

/// Runs any `program` (a helper such as `fio2gnuplot`, or `id`) with `args` as given, no
/// standard input, in `dir` when one is given; its output, whatever its exit status.
/// Panics, naming the program, when it does not start or runs past [`RUN_LIMIT_S`].
pub fn plain<S: AsRef<OsStr>>(program: &str, args: &[S], dir: Option<&Path>) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    finish(&mut cmd, program)
}

/// Runs `program args` (as given, no standard input, in `dir`) for at most `secs` seconds
/// ([`output_within`]), and again while a run is killed there, up to `tries` runs; `None`
/// when every run was killed (a note says so on standard error at each). For fio 3.33,
/// which can hang for ever starting a workqueue (`io_submit_mode=offload`'s submit
/// workers, `log_store_compressed`'s compression worker): `start_worker()` (workqueue.c)
/// stores `sw->flags = SW_F_IDLE` after `pthread_create()`, wiping the `SW_F_RUNNING` of
/// a worker that started first, and `workqueue_init()` then waits for it for ever. A run
/// that ends is the caller's to check.
pub fn output_retrying_hangs<S: AsRef<OsStr> + Debug>(
    program: &str,
    args: &[S],
    dir: &Path,
    secs: u32,
    tries: u32,
) -> Option<Output> {
    for attempt in 1..=tries {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(dir);
        if let Some(o) = output_within(&mut cmd, secs) {
            return Some(o);
        }
        eprintln!("note: {program} {args:?} hung, killed after {secs} s (try {attempt} of {tries})");
    }
    None
}

/// Runs `cmd` (no standard input; its standard output and error go to unnamed files, so
/// no process it leaves behind can hold a pipe open) for at most `secs` seconds; its
/// output, whatever its exit status, or `None` when the deadline passed. Then the command
/// is killed with every process it started, found by parent links in /proc, also those that
/// left its process group and session: fio's job processes call `setsid()`, so killing the
/// group (as `timeout` does) leaves a hung job running, holding the output pipe open for
/// ever (a CI run hung on one until its 5400 s limit). Panics, naming the program, when it
/// does not start.
pub fn output_within(cmd: &mut Command, secs: u32) -> Option<Output> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    try_output_within(cmd, secs).unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

/// [`output_within`], with the error of a program that does not start returned, not a
/// panic.
pub fn try_output_within(cmd: &mut Command, secs: u32) -> std::io::Result<Option<Output>> {
    use std::io::{Read, Seek};
    use std::os::unix::process::CommandExt;
    let program = cmd.get_program().to_string_lossy().into_owned();
    let (mut out, mut err) = (unnamed_file(), unnamed_file());
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("a second descriptor of an unnamed file"))
        .stderr(err.try_clone().expect("a second descriptor of an unnamed file"))
        .process_group(0);
    let mut child = cmd.spawn()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs.into());
    let mut pause = std::time::Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("waiting for {program}: {e}")) {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            kill_tree(child.id() as i32);
            child.wait().unwrap_or_else(|e| panic!("waiting for killed {program}: {e}"));
            break None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    };
    let read = |f: &mut std::fs::File| {
        let mut v = Vec::new();
        f.rewind().and_then(|_| f.read_to_end(&mut v)).unwrap_or_else(|e| panic!("reading {program}'s output: {e}"));
        v
    };
    let (stdout, stderr) = (read(&mut out), read(&mut err));
    Ok(status.map(|status| Output { status, stdout, stderr }))
}

/// `Command::output`, bounded: for tests that build their own [`Command`].
pub trait OutputBounded {
    /// As `Command::output` (no standard input, the output captured; the error of a
    /// program that does not start), but a run past [`RUN_LIMIT_S`] is killed with every
    /// process it started ([`output_within`]) and is an error of kind `TimedOut` that
    /// names the command.
    fn output_bounded(&mut self) -> std::io::Result<Output>;
}

impl OutputBounded for Command {
    fn output_bounded(&mut self) -> std::io::Result<Output> {
        try_output_within(self, RUN_LIMIT_S)?.ok_or_else(|| {
            let args: Vec<_> = self.get_args().collect();
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "{} {args:?} did not end within {RUN_LIMIT_S} s: killed, with every process it started",
                    self.get_program().to_string_lossy()
                ),
            )
        })
    }
}

/// A file with no name in the temporary directory, for a child's output.
fn unnamed_file() -> std::fs::File {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "ioswitch-testkit-out-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
    std::fs::remove_file(&path).unwrap_or_else(|e| panic!("cannot unlink {}: {e}", path.display()));
    f
}

/// Kills `root` and its descendants: each found is stopped (so it cannot start more)
/// until a look at /proc finds no new one, then all are killed.
fn kill_tree(root: i32) {
    let mut found = std::collections::BTreeSet::from([root]);
    loop {
        for &p in &found {
            signal(p, libc::SIGSTOP);
        }
        let before = found.len();
        // Parent links, repeated until closed: a grandchild may be listed before its parent.
        let links = parent_links();
        loop {
            let n = found.len();
            found
                .extend(links.iter().filter(|(_, ppid)| found.contains(ppid)).map(|&(pid, _)| pid).collect::<Vec<_>>());
            if found.len() == n {
                break;
            }
        }
        if found.len() == before {
            break;
        }
    }
    for &p in &found {
        signal(p, libc::SIGKILL);
    }
}

fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; a process that
    // is gone already answers ESRCH, which is what we want.
    unsafe { libc::kill(pid, sig) };
}

/// (pid, parent pid) of every process in /proc.
fn parent_links() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let ppid = stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()?;
        Some((pid, ppid))
    })
    .collect()
}

/// How long [`output`] and [`plain`] let a program run: far beyond any job of the suites
/// (the longest take seconds), so that a hang fails its test, naming the command, instead
/// of holding the suite until CI's limit.
pub const RUN_LIMIT_S: u32 = 600;

fn finish(cmd: &mut Command, program: &str) -> Output {
    cmd.output_bounded().unwrap_or_else(|e| panic!("cannot run {program} to its end: {e}"))
}

/// As [`output`], and asserts that the job succeeded (else the message names the program,
/// its arguments and exit status, and holds its standard output and error).
pub fn success<S: AsRef<OsStr> + Debug>(program: &str, args: &[S], dir: Option<&Path>) -> Output {
    succeeded(output(program, args, dir), program, args)
}

/// As [`plain`], and asserts that the program succeeded (the message as [`success`]'s).
pub fn plain_success<S: AsRef<OsStr> + Debug>(program: &str, args: &[S], dir: Option<&Path>) -> Output {
    succeeded(plain(program, args, dir), program, args)
}

fn succeeded<S: Debug>(o: Output, program: &str, args: &[S]) -> Output {
    assert!(
        o.status.success(),
        "{program} {args:?} failed ({}):\n{}{}",
        o.status,
        crate::text(&o.stdout),
        crate::text(&o.stderr)
    );
    o
}

/// strace's arguments for a run of `program ARGS` with its threads (`-f`), tracing the
/// system calls `calls` (`pwrite64,fsync`) into the file `log`, with `extra` options
/// (`-y`: each descriptor's file named) and no attach/exit notes (`-qq`).
pub fn strace_args(log: &str, calls: &str, extra: &[&str], program: &str, args: &[String]) -> Vec<String> {
    let mut a: Vec<String> = ["-f", "-qq"].iter().chain(extra).map(|s| s.to_string()).collect();
    a.extend(["-e".to_string(), format!("trace={calls}"), "-o".into(), log.into(), program.into()]);
    a.extend(args.iter().cloned());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_runs_as_itself_and_any_other_program_as_bench() {
        assert_eq!((who(FIO), who("/x/ioswitch")), ("fio", "ours"));
        let c = command("/x/ioswitch", Some(Path::new("/tmp")));
        assert_eq!(c.get_args().collect::<Vec<_>>(), ["bench", "--no-progress"]);
        assert_eq!(c.get_current_dir(), Some(Path::new("/tmp")));
        let c = command(FIO, None);
        assert_eq!((c.get_args().count(), c.get_current_dir()), (0, None));
        // `echo` stands for the ioswitch binary: it shows the arguments it was given.
        let o = success("echo", &["--name=j"], None);
        assert_eq!(crate::text(&o.stdout), "bench --no-progress --name=j\n");
        let o = plain("echo", &["--name=j"], Some(Path::new("/")));
        assert_eq!(crate::text(&o.stdout), "--name=j\n");
        let o = plain_success("echo", &["--name=j"], None);
        assert_eq!(crate::text(&o.stdout), "--name=j\n");
    }

    #[test]
    fn strace_args_trace_the_calls_of_the_program_and_its_threads_into_the_log() {
        let a = strace_args("/t/s.log", "pread64,fsync", &["-y"], "fio", &["--name=j".to_string()]);
        assert_eq!(a, ["-f", "-qq", "-y", "-e", "trace=pread64,fsync", "-o", "/t/s.log", "fio", "--name=j"]);
        assert_eq!(strace_args("l", "fsync", &[], "p", &[]), ["-f", "-qq", "-e", "trace=fsync", "-o", "l", "p"]);
    }

    #[test]
    fn a_scratch_directory_only_where_every_program_runs() {
        let base = std::env::temp_dir();
        let s =
            scratch_if_present("scratch_if_present", &[("sh", "-c"), ("true", "")], base.to_str().unwrap(), "tk-sip");
        assert!(s.is_some_and(|s| s.dir().is_dir()));
        if std::env::var_os("IOSWITCH_VM").is_none() {
            let missing = [("sh", "-c"), ("/nonexistent/ioswitch-no-such-program", "--version")];
            assert!(scratch_if_present("(expected skip)", &missing, base.to_str().unwrap(), "tk-sip2").is_none());
            assert!(!base.join(format!("tk-sip2-{}", std::process::id())).exists());
        }
    }

    #[test]
    #[should_panic(expected = "false [\"--name=j\"] failed (exit status: 1)")]
    fn a_failed_job_fails_success() {
        success("false", &["--name=j"], None);
    }

    #[test]
    #[should_panic(expected = "cannot run /nonexistent/ioswitch-no-such-program")]
    fn a_program_that_does_not_start_panics_naming_it() {
        output("/nonexistent/ioswitch-no-such-program", &["--name=j"], None);
    }

    #[test]
    fn a_run_that_hangs_is_killed_and_tried_again_and_one_that_ends_is_returned() {
        let dir = std::env::temp_dir();
        let t = std::time::Instant::now();
        assert!(output_retrying_hangs("sleep", &["30"], &dir, 1, 2).is_none(), "every run killed");
        assert!(t.elapsed() >= std::time::Duration::from_secs(2), "two runs of 1 s each");
        let o = output_retrying_hangs("sh", &["-c", "exit 3"], &dir, 5, 3).expect("a run that ends");
        assert_eq!(o.status.code(), Some(3), "its status is the caller's to check");
    }

    #[test]
    fn a_hung_run_is_killed_with_what_it_started_in_another_session_holding_its_output() {
        // As fio's job processes: a child in a session of its own (setsid) that hangs with
        // the output open; the shell that started it hangs too, waiting for it.
        let dir = std::env::temp_dir().join(format!("tk-within-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = "setsid sh -c 'echo $$ > child.pid; echo started; exec sleep 60' & wait";
        let t = std::time::Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]).current_dir(&dir);
        assert!(output_within(&mut cmd, 3).is_none(), "the run passed its deadline");
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "returned {:?} after the 3 s deadline", t.elapsed());
        let pid = std::fs::read_to_string(dir.join("child.pid")).unwrap();
        let pid = pid.trim();
        // Killed: gone, or a zombie until its new parent reaps it.
        let t = std::time::Instant::now();
        loop {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => break,
                Ok(stat) if stat[stat.rfind(')').unwrap() + 1..].trim_start().starts_with('Z') => break,
                Ok(stat) => assert!(t.elapsed() < std::time::Duration::from_secs(10), "{pid} still runs: {stat}"),
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // A run that ends gives its output and status, both streams apart.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 4"]);
        let o = output_within(&mut cmd, 10).expect("a run that ends");
        assert_eq!(
            (crate::text(&o.stdout), crate::text(&o.stderr), o.status.code()),
            ("out\n".into(), "err\n".into(), Some(4))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
