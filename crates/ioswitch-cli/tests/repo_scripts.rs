//! The repository's own scripts, as a newcomer types them: `--help` says what the script
//! does and exits 0, and an argument it does not take is refused by name (exit 2) before
//! anything runs. Before, `./scripts/test --help` (the README's second command with the
//! flag a newcomer tries first) ran the whole suite, apt installs and QEMU guests included.
//!
//! The bash scripts run with a PATH that holds nothing: their check is bash builtins
//! only, so one that let an argument through would fail at its first command here instead
//! of starting what the script does.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `bash SCRIPT ARGS` from the repository's root, with an empty environment and a PATH
/// that holds nothing.
fn bare_bash(script: &str, args: &[&str]) -> Output {
    Command::new("/bin/bash")
        .arg(script)
        .args(args)
        .current_dir(root())
        .env_clear()
        .env("PATH", "/nonexistent")
        .output()
        .expect("run /bin/bash")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The bash scripts that take no arguments, each with a phrase of its header.
const NO_ARGUMENTS: &[(&str, &str)] = &[
    ("scripts/test", "Runs every test of the project."),
    ("scripts/check-features", "would build\na second variant of a crate"),
    ("fio/fetch-fio-source.sh", "Prints the path of a configured fio source tree"),
];

#[test]
fn scripts_without_arguments_print_their_header_for_help() {
    for (script, phrase) in NO_ARGUMENTS {
        for flag in ["--help", "-h"] {
            let out = bare_bash(script, &[flag]);
            let stdout = text(&out.stdout);
            assert!(out.status.success(), "{script} {flag}: {:?}\n{}", out.status, text(&out.stderr));
            assert!(stdout.contains(phrase), "{script} {flag} printed:\n{stdout}");
            assert!(
                !stdout.contains("#!") && !stdout.lines().any(|l| l.starts_with('#')),
                "{script} {flag}:\n{stdout}"
            );
        }
    }
}

#[test]
fn scripts_without_arguments_refuse_one_by_name() {
    for (script, _) in NO_ARGUMENTS {
        for args in [&["--all"][..], &["fast"], &["--help", "x"]] {
            let out = bare_bash(script, args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{script} {args:?}: {stderr}");
            let named = format!("{script}: takes no arguments (got: {})", args.join(" "));
            assert!(stderr.contains(&named), "{script} {args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{script} {args:?} printed:\n{}", text(&out.stdout));
        }
    }
}

/// A Python script of the repository, run as its shebang says.
fn python_script(script: &str, args: &[&str]) -> Output {
    Command::new(root().join(script)).args(args).current_dir(root()).output().expect("run the script")
}

#[test]
fn python_scripts_answer_help_and_name_what_they_refuse() {
    let out = python_script("scripts/library-lines", &["--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("split into code and tests"), "{}", text(&out.stdout));
    let out = python_script("scripts/library-lines", &["--bogus"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("unknown option --bogus"), "{}", text(&out.stderr));

    let out = python_script("scripts/check-readme-examples", &["-h"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Runs the README's C, Python and fio examples"), "{}", text(&out.stdout));
    let out = python_script("scripts/check-readme-examples", &["c"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("takes no arguments (got: c)"), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// The guest stages of tests/vm, each with a phrase of its header and whether it takes
/// `-- ARGS FOR ITS TEST BINARY`. Before, each booted its guest (minutes, and the whole
/// stage) whatever it was given, `--help` included.
const STAGES: &[(&str, &str, bool)] = &[
    ("tests/vm/nvme-tests.sh", "the NVMe tests of ioswitch, for real", true),
    ("tests/vm/fault-tests.sh", "fault injection and crash consistency", true),
    ("tests/vm/vfio-driver-tests.sh", "the user-space NVMe driver (interface vfio)", true),
    ("tests/vm/uio-driver-tests.sh", "uio_pci_generic", true),
    ("tests/vm/pmem-tests.sh", "persistent memory for real", false),
    ("tests/vm/vfio-tests.sh", "PCI controllers and driver binding", false),
    ("tests/vm/power-cut.sh", "the power-cut test of issue 17 part 3", false),
    ("tests/vm/selftest.sh", "proves the guest harness", false),
    ("tests/vm/fio-zbd-tests.sh", "fio's zonemode=zbd through the ioswitch engine", false),
];

#[test]
fn guest_stages_print_their_header_for_help_and_boot_nothing() {
    for (script, phrase, _) in STAGES {
        for flag in ["--help", "-h"] {
            let out = bare_bash(script, &[flag]);
            let stdout = text(&out.stdout);
            assert!(out.status.success(), "{script} {flag}: {:?}\n{}", out.status, text(&out.stderr));
            assert!(stdout.contains(phrase), "{script} {flag} printed:\n{stdout}");
            assert!(out.stderr.is_empty(), "{script} {flag}: {}", text(&out.stderr));
        }
    }
    let out = bare_bash("tests/vm/pci-study.sh", &["--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("the SPDK-vs-io_uring study"), "{}", text(&out.stdout));
}

#[test]
fn guest_stages_refuse_what_they_do_not_take_by_name() {
    for (script, _, pass) in STAGES {
        for args in [&["--all"][..], &["fast"], &["--help", "x"]] {
            let out = bare_bash(script, args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{script} {args:?}: {stderr}");
            let named = if *pass {
                format!("{script}: takes only -- ARGS FOR ITS TEST BINARY (got: {})", args.join(" "))
            } else {
                format!("{script}: takes no arguments (got: {})", args.join(" "))
            };
            assert!(stderr.contains(&named), "{script} {args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{script} {args:?} printed:\n{}", text(&out.stdout));
        }
        if !pass {
            // `--`: the stages without a test binary of their own take nothing after it.
            let out = bare_bash(script, &["--", "x"]);
            assert_eq!(out.status.code(), Some(2), "{script} -- x: {}", text(&out.stderr));
        }
    }
    let out = bare_bash("tests/vm/fio-zbd-tests.sh", &["--engine"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--engine takes one PATH"), "{}", text(&out.stderr));
    for args in [&["--reps"][..], &["--bogus"]] {
        let out = Command::new("/bin/bash")
            .arg("tests/vm/pci-study.sh")
            .args(args)
            .current_dir(root())
            .output()
            .expect("run /bin/bash");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        let named = if args[0] == "--reps" { "pci-study: --reps needs a value" } else { "unknown argument --bogus" };
        assert!(text(&out.stderr).contains(named), "{args:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
    }
}
