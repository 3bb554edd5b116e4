//! The device commands (idfy, log, feature, zone, passthru) on devices that are not NVMe:
//! they answer from emulated identify data, and refuse what they cannot do with a clear
//! error. The same commands on real NVMe run in the QEMU guest (tests/vm/oracle-tests.sh).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::OutputBounded;
use std::process::{Command, Output};

/// A scratch directory for one test, removed when the test ends.
fn scratch(test: &str) -> Scratch {
    Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("device-{test}"))
}

fn ioswitch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioswitch")).args(args).output_bounded().expect("run ioswitch")
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = ioswitch(args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"))
}

fn fails(args: &[&str]) -> String {
    let o = ioswitch(args);
    assert_eq!(o.status.code(), Some(1), "{args:?} should fail with status 1");
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.starts_with("ioswitch: error: "), "{e}");
    e
}

#[test]
fn identify_namespace_of_a_file_reports_its_size_and_lba_format() {
    let s = scratch("idns");
    let f = s.file("f", 3 << 20);
    let ns = json(&["idfy", "ns", &f, "--output", "json"]);
    assert_eq!(ns["nsze"], 3 * 2048, "{ns}");
    assert_eq!(ns["ncap"], 3 * 2048);
    let lbaf = &ns["lbafs"][0];
    assert_eq!(lbaf["ds"], 9, "512-byte LBAs are 2^9: {ns}");
    let r = json(&["idfy", "ns", "8MiB", "--output", "json"]);
    assert_eq!(r["nsze"], 8 * 2048, "a ramdisk too: {r}");
}

#[test]
fn identify_controller_names_the_emulation() {
    let s = scratch("idctrl");
    let f = s.file("f", 1 << 20);
    let c = json(&["idfy", "ctrl", &f, "--output", "json"]);
    assert!(c["mn"].as_str().unwrap().contains("emulated"), "{c}");
    assert_eq!(c["nn"], 1, "{c}");
    let o = ioswitch(&["idfy", "ctrl", &f]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("mn:"), "text output is key: value");
}

#[test]
fn health_log_and_raw_passthrough_work_on_a_file() {
    let s = scratch("log");
    let f = s.file("f", 1 << 20);
    let h = json(&["log", "health", &f, "--output", "json"]);
    assert_eq!(h["critical_warning"]["raw"], 0, "an emulated device reports no warning: {h}");
    let o = ioswitch(&["passthru", "admin", &f, "--opcode", "0x06", "--cdw10", "1", "--data-len", "4096"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Successful Completion"));
}

#[test]
fn what_a_file_cannot_do_is_refused_with_the_reason() {
    let s = scratch("refuse");
    let f = s.file("f", 1 << 20);
    let e = fails(&["zone", "report", &f]);
    assert!(e.contains("not a zoned device"), "{e}");
    let e = fails(&["feature", "get", "--fid", "7", &f]);
    assert!(e.contains("Invalid Command Opcode"), "the emulated admin answers with an NVMe status: {e}");
    let e = fails(&["idfy", "ns", "/nonexistent/dev"]);
    assert!(e.contains("/nonexistent/dev"), "{e}");
}

/// A file made immutable (`chattr +i`: even root may not open it for writing) for as long
/// as it lives; `None` where chattr cannot (no chattr, a file system without the flag).
struct Immutable(String);

impl Immutable {
    fn set(path: &str) -> Result<Immutable, String> {
        let o = Command::new("chattr").args(["+i", path]).output_bounded().map_err(|e| format!("chattr: {e}"))?;
        if !o.status.success() {
            return Err(format!("chattr +i {path}: {}", String::from_utf8_lossy(&o.stderr).trim()));
        }
        Ok(Immutable(path.to_string()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").args(["-i", &self.0]).output_bounded();
    }
}

/// The commands that only read (read, idfy, log; feature get and zone report too, which a
/// file does not answer: the guest's oracle tests run them) open the device read-only, so
/// they run where the user may read but not write; `info` falls back to read-only there,
/// saying so; `write` is still refused.
#[test]
fn reading_commands_open_read_only_and_run_on_a_file_no_one_may_write() {
    let test = "reading_commands_open_read_only_and_run_on_a_file_no_one_may_write";
    let s = scratch("immutable");
    let f = s.file("f", 1 << 20);
    let data = s.file("data", 4096);
    let _imm = match Immutable::set(&f) {
        Ok(i) => i,
        Err(why) => return ioswitch_testkit::skip(test, &why),
    };
    // A writable open of the file is refused, whoever asks (the probe, independent of ioswitch).
    let w = std::fs::OpenOptions::new().write(true).open(&f);
    assert!(w.is_err(), "{f} is immutable, yet opened for writing");
    let out = s.path("out");
    for args in [
        vec!["read", &f, "--offset", "0", "--length", "64k", "--out", &out],
        vec!["read", &f, "--opts", "async=libaio", "--slba", "8", "--nlb", "8", "--out", &out],
        vec!["idfy", "ns", &f],
        vec!["log", "health", &f],
    ] {
        let o = ioswitch(&args);
        assert!(o.status.success(), "{args:?} on an immutable file: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&f).unwrap()[4096..8192], "what read --slba 8 read");
    // info opens read-write (to report what writes would meet), and read-only where that
    // is refused, saying so.
    let i = json(&["info", &f, "--output", "json"]);
    assert_eq!(i["opts"], "rdonly=1", "{i}");
    let why = i["read_only_because"].as_str().unwrap_or_else(|| panic!("no read_only_because: {i}"));
    assert!(why.contains("Operation not permitted"), "{i}");
    let o = ioswitch(&["info", &f]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("refused: opened read-only"), "{o:?}");
    let e = fails(&["info", &f, "--opts", "wronly=1"]);
    assert!(e.contains(&f), "asking for a write mode, info does not fall back: {e}");
    let e = fails(&["write", &f, "--offset", "0", "--data", &data]);
    assert!(e.contains(&f) && e.contains("Operation not permitted"), "{e}");
    // Asking for a write mode opens read-write: refused here.
    let e = fails(&["read", &f, "--opts", "wronly=1", "--offset", "0", "--length", "4k", "--out", &out]);
    assert!(e.contains(&f), "{e}");
}
