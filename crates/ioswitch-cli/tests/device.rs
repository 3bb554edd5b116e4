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
