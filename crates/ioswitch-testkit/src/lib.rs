//! Helpers shared by the test suites of the ioswitch workspace (a dev-dependency only):
//!
//! - [`dirs`]: scratch directories removed at the end of a test, a directory on a disk
//!   file system (not tmpfs), the file system type of a path, whether O_DIRECT works;
//! - [`logwrites`]: a reader and replayer of device-mapper log-writes logs;
//! - [`loopdev`]: a loop device over a backing file, detached on drop, and the sweep for
//!   loop devices a killed run left behind;
//! - [`pattern`]: test data: seeded byte streams, and position-stamped words that tell
//!   misplaced, stale and missing data apart when a read-back differs;
//! - [`robust`]: the harness of the parser robustness tests (deterministic fuzzing);
//! - [`tools`]: one job run under fio and under `ioswitch bench`, for the tests that
//!   compare them;
//! - [`lock`]: a mutex lock that ignores poisoning, for tests that serialise themselves;
//!   [`serial`]: the one such lock of a test binary's tests that run one at a time;
//! - [`skip`]: a test that cannot run says why (in the guest it fails instead);
//! - [`have`]: whether a program the test needs runs here (else it skips, saying why);
//! - [`text`]: a command's output bytes as text;
//! - [`run`]: a system tool's output, or an error naming the command.
#![deny(missing_docs)]

pub mod dirs;
pub mod logwrites;
pub mod loopdev;
pub mod pattern;
pub mod robust;
pub mod tools;

use std::io::Write;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Locks `m`, also when a test that held it panicked (the state it guards is still usable:
/// tests serialise on it, or record what they saw).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lock of the tests of one test binary that must run one at a time (those that time
/// their runs, or trace every process): each holds it for its whole run ([`lock`]).
pub fn serial() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    lock(&ONE_AT_A_TIME)
}

/// Says why test `test` does not run, past libtest's capture; in the guest
/// (`IOSWITCH_VM` set), where every skip is a failure, panics instead.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("IOSWITCH_VM").is_some() {
        panic!("{test}: would skip in the guest, where every skip is a failure: {why}");
    }
    let _ = writeln!(std::io::stderr(), "skipping {test}: {why}");
}

/// Whether `program` runs here: `program probe` (an argument it answers without work)
/// starts and exits, whatever its status (`fio2gnuplot -h` exits 1). When it does not,
/// says why `test` skips ([`skip`]: in the guest, a failure).
pub fn have(program: &str, probe: &str, test: &str) -> bool {
    let status = Command::new(program)
        .arg(probe)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match status {
        Ok(s) if s.code().is_some() => true,
        Ok(s) => {
            skip(test, &format!("{program} {probe} did not run to its end ({s})"));
            false
        }
        Err(e) => {
            skip(
                test,
                &format!("{program} does not run here ({e}; ./scripts/test installs fio, strace and gnuplot with apt)"),
            );
            false
        }
    }
}

/// A command's output bytes as text (invalid UTF-8 replaced).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `prog` with `args`: its standard output, trimmed, or an error naming the command,
/// its exit status and its standard error.
pub fn run(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(prog).args(args).output().map_err(|e| format!("{prog}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{prog} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn have_takes_any_exit_status_and_text_replaces_bad_utf8() {
        // `sh -c` without its command exits 2: the program runs, so it is there.
        assert!(have("sh", "-c", "have_takes_any_exit_status"));
        if std::env::var_os("IOSWITCH_VM").is_none() {
            assert!(!have("/nonexistent/ioswitch-no-such-program", "--version", "have (expected skip)"));
        }
        assert_eq!(text(b"ok \xff"), "ok \u{fffd}");
    }
}
