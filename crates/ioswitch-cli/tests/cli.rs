//! The `ioswitch` binary, driven as a user drives it: arguments in, text/JSON/YAML and
//! data out, exit status 0 (done), 1 (the request failed) or 2 (bad usage).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::pattern;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A scratch directory for one test, removed when the test ends.
fn scratch(test: &str) -> Scratch {
    Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("cli-{test}"))
}

fn ioswitch(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ioswitch"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().expect("run the ioswitch binary");
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        let data = data.to_vec();
        // Written from a thread: the child may fill its stdout pipe before reading stdin.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    child.wait_with_output().expect("wait for ioswitch")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a command that must succeed.
fn ok(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let o = ioswitch(args, stdin);
    assert!(o.status.success(), "ioswitch {args:?} failed ({}): {}", o.status, stderr(&o));
    o
}

/// Runs a command that must fail with `code`, and returns its stderr.
fn fails(code: i32, args: &[&str]) -> String {
    let o = ioswitch(args, None);
    assert_eq!(o.status.code(), Some(code), "ioswitch {args:?}: stdout {} stderr {}", stdout(&o), stderr(&o));
    assert!(o.stdout.is_empty(), "a failure printed on stdout: {}", stdout(&o));
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "ioswitch {args:?} panicked: {e}");
    e
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

/// True (after saying why) when an interface is still missing from this build.
fn not_built(iface: &str, o: &Output) -> bool {
    let e = stderr(o);
    if !o.status.success() && e.contains("not part of this build yet") {
        eprintln!("skipping async={iface}: {}", e.trim());
        return true;
    }
    false
}

#[test]
fn info_shows_a_file_as_aligned_key_value_lines() {
    let s = scratch("info-text");
    let f = s.file("disk.img", 1 << 20);
    let text = stdout(&ok(&["info", &f], None));
    let line = |key: &str| -> String {
        let l = text.lines().find(|l| l.trim_start().starts_with(&format!("{key}:")));
        l.unwrap_or_else(|| panic!("no {key:?} line in:\n{text}")).to_string()
    };
    assert!(line("kind").ends_with(" file"), "{text}");
    assert!(line("lba size").ends_with(" 512 bytes"), "{text}");
    assert!(line("lba count").ends_with(" 2048"), "{text}");
    assert!(line("size").ends_with(" 1MiB (1048576 bytes)"), "{text}");
    assert!(line("sync").ends_with(" psync"), "{text}");
    for key in ["async", "admin", "mem", "max transfer", "dio offset align", "zoned", "nsid", "driver"] {
        line(key);
    }
    // Every value starts in the same column.
    let columns: Vec<usize> = text
        .lines()
        .filter_map(|l| l.find(": ").map(|i| i + 2 + l[i + 2..].len() - l[i + 2..].trim_start().len()))
        .collect();
    assert!(columns.windows(2).all(|w| w[0] == w[1]), "values not aligned:\n{text}");
}

#[test]
fn info_lists_only_the_interfaces_that_open_would_accept_under_the_options() {
    let s = scratch("info-osync");
    let f = s.file("disk.img", 1 << 20);
    let names = |j: &serde_json::Value, role: &str| -> Vec<String> {
        j["available"][role]
            .as_array()
            .unwrap_or_else(|| panic!("no available.{role} in {j}"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let plain = json(&ok(&["info", &f, "--output", "json"], None));
    let osync = json(&ok(&["info", &f, "--opts", "osync=dsync", "--output", "json"], None));
    for name in ["nil", "mmap", "pmem"] {
        assert!(names(&plain, "sync").iter().any(|n| n == name), "sync={name} serves a file: {plain}");
        assert!(!names(&osync, "sync").iter().any(|n| n == name), "sync={name} listed with osync: {osync}");
    }
    assert!(names(&osync, "sync").iter().any(|n| n == "psync"), "{osync}");
    assert!(!names(&osync, "async").iter().any(|n| n == "nil"), "{osync}");
    // What is listed opens; what is left out is refused.
    for name in names(&osync, "sync") {
        ok(&["info", &f, "--opts", &format!("osync=dsync,sync={name}")], None);
    }
    let e = fails(1, &["info", &f, "--opts", "osync=dsync,sync=mmap"]);
    assert!(e.contains("osync=dsync (O_DSYNC) means nothing with sync=mmap"), "{e}");
    // The text form lists the same.
    let text = stdout(&ok(&["info", &f, "--opts", "osync=dsync"], None));
    let line = text.lines().find(|l| l.trim_start().starts_with("sync can be:")).expect("a sync can be line");
    assert!(line.contains("psync") && !line.contains("mmap") && !line.contains("nil"), "{text}");
}

#[test]
fn info_json_and_yaml_give_the_library_structures() {
    let s = scratch("info-json");
    let f = s.file("disk.img", 3 << 20);
    let j = json(&ok(&["info", &f, "--output", "json"], None));
    assert_eq!(j["ident"]["kind"], "file");
    assert_eq!(j["ident"]["nsid"], 1);
    assert_eq!(j["geometry"]["lba_size"], 512);
    assert_eq!(j["geometry"]["bytes"], 3 << 20);
    assert_eq!(j["geometry"]["nlbas"], (3 << 20) / 512);
    assert_eq!(j["geometry"]["zoned"], "none");
    assert_eq!(j["interfaces"]["sync"], "psync");
    assert!(j["interfaces"]["async"].is_string(), "{j}");
    assert_eq!(j["opts"], "");

    let y = ok(&["info", &f, "--output", "yaml"], None);
    let y: serde_json::Value = serde_yaml::from_slice(&y.stdout).expect("stdout is YAML");
    assert_eq!(y, j, "YAML and JSON carry the same structure");

    let j = json(&ok(&["info", "8MiB", "--opts", "async=emu", "--output", "json"], None));
    assert_eq!(j["ident"]["kind"], "ramdisk");
    assert_eq!(j["geometry"]["bytes"], 8 << 20);
    assert_eq!(j["interfaces"]["async"], "emu");
    assert_eq!(j["opts"], "async=emu");
}

#[test]
fn write_then_read_back_through_files_by_offset_and_by_lba() {
    let s = scratch("files");
    let dev = s.file("disk.img", 1 << 20);
    let data = pattern::bytes(1, 40960);
    let src = s.path("data");
    fs::write(&src, &data).unwrap();

    ok(&["write", &dev, "--opts", "async=emu", "--slba", "16", "--data", &src], None);
    let back = s.path("back-lba");
    ok(&["read", &dev, "--opts", "async=emu", "--slba", "16", "--nlb", "80", "--out", &back], None);
    assert_eq!(fs::read(&back).unwrap(), data);
    assert_eq!(&fs::read(&dev).unwrap()[16 * 512..16 * 512 + data.len()], &data[..]);

    // Any byte offset and length through the file commands.
    let odd = &data[..12345];
    fs::write(&src, odd).unwrap();
    ok(&["write", &dev, "--opts", "async=emu", "--offset", "100001", "--data", &src], None);
    let back = s.path("back-bytes");
    ok(&["read", &dev, "--opts", "async=emu", "--offset", "100001", "--length", "12345", "--out", &back], None);
    assert_eq!(fs::read(&back).unwrap(), odd);
}

#[test]
fn read_and_write_show_progress_with_the_flag_only() {
    let s = scratch("progress");
    let dev = s.file("disk.img", 1 << 20);
    let src = s.path("data");
    fs::write(&src, pattern::bytes(3, 256 << 10)).unwrap();
    let w = |extra: &[&str]| {
        let mut args = vec!["write", dev.as_str(), "--opts", "async=emu", "--offset", "0", "--data", src.as_str()];
        args.extend_from_slice(extra);
        stderr(&ok(&args, None))
    };
    // stderr is a pipe here: no line unless asked for; the last flag wins.
    for extra in [&[][..], &["--no-progress"], &["--progress", "--no-progress"]] {
        let e = w(extra);
        assert!(!e.contains("\x1b[K") && !e.contains("% done"), "{extra:?}: {e:?}");
    }
    for extra in [&["--progress"][..], &["--no-progress", "--progress"]] {
        let e = w(extra);
        assert!(e.contains("\r\x1b[Kwrite: ") && e.contains("% done, "), "{extra:?}: {e:?}");
        // Erased before the summary, which stays on its own line.
        assert!(e.contains("\r\x1b[Kioswitch: wrote 256KiB"), "{extra:?}: {e:?}");
    }
    let back = s.path("back");
    let args = ["read", &dev, "--opts", "async=emu", "--offset", "0", "--length", "256k", "--out", &back, "--progress"];
    let e = stderr(&ok(&args, None));
    assert!(e.contains("\r\x1b[Kread: ") && e.contains("of 256.0KiB ["), "{e:?}");
    assert_eq!(fs::read(&back).unwrap(), fs::read(&src).unwrap());
}

#[test]
fn stdin_and_stdout_carry_the_data_and_nothing_else() {
    let s = scratch("pipes");
    let dev = s.file("disk.img", 1 << 20);
    let data = pattern::bytes(2, 8192);
    let w = ok(&["write", &dev, "--opts", "async=emu", "--offset", "4k", "--data", "-"], Some(&data));
    assert!(w.stdout.is_empty(), "write printed on stdout: {}", stdout(&w));
    assert!(stderr(&w).contains("8KiB (8192 bytes)"), "{}", stderr(&w));

    let r = ok(&["read", &dev, "--opts", "async=emu", "--offset", "4k", "--length", "8k", "--out", "-"], None);
    assert_eq!(r.stdout, data, "stdout holds exactly the data read");
    assert!(stderr(&r).contains("read 8KiB"), "the summary goes to stderr: {}", stderr(&r));

    // JSON summaries stay off stdout while it carries data.
    let args = ["read", &dev, "--opts", "async=emu", "--slba", "8", "--nlb", "16", "--out", "-", "--output", "json"];
    let r = ok(&args, None);
    assert_eq!(r.stdout, data);
    let summary: serde_json::Value = serde_json::from_str(&stderr(&r)).expect("JSON summary on stderr");
    assert_eq!(summary["bytes"], 8192);
}

/// Past this much, `write --data -` streams standard input (the CLI's `READ_AHEAD`).
const READ_AHEAD: usize = 16 << 20;

#[test]
fn long_standard_input_is_written_while_it_is_still_being_read() {
    use std::io::Read;
    use std::sync::mpsc;
    use std::time::Duration;
    let s = scratch("stream");
    let dev = s.file("disk.img", 64 << 20);
    let data = pattern::bytes(21, READ_AHEAD + (4 << 20) + 100);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioswitch"))
        .args(["write", &dev, "--opts", "async=emu", "--offset", "1000", "--data", "-", "--progress"])
        .args(["--output", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the ioswitch binary");
    let mut err = child.stderr.take().expect("stderr pipe");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut all, mut piece) = (Vec::new(), [0u8; 4096]);
        while let Ok(n) = err.read(&mut piece) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&piece[..n]);
            let _ = tx.send(String::from_utf8_lossy(&all).into_owned());
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    let mut pipe = child.stdin.take().expect("stdin pipe");
    let (head, tail) = data.split_at(READ_AHEAD + (1 << 20));
    pipe.write_all(head).unwrap();
    // Standard input stays open: a progress line now means commands ran before its end.
    let mut seen = String::new();
    while !seen.contains("\r\x1b[Kwrite: ") {
        seen = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
            panic!("no progress line while standard input is open (is it read whole first?): {seen:?}")
        });
    }
    assert!(!seen.contains("% done"), "the length of open data is not known: {seen:?}");
    pipe.write_all(tail).unwrap();
    drop(pipe);
    let o = child.wait_with_output().unwrap();
    let e = reader.join().unwrap();
    assert!(o.status.success(), "{e}");
    let j = json(&o);
    assert_eq!(j["bytes"], data.len(), "{j}");
    assert_eq!(j["commands"], data.len().div_ceil(1 << 20), "{j}");
    let disk = fs::read(&dev).unwrap();
    assert!(disk[1000..1000 + data.len()] == data[..], "the data read back differs");
    assert!(disk[..1000].iter().chain(&disk[1000 + data.len()..]).all(|&b| b == 0), "written outside the range");
}

#[test]
fn streamed_standard_input_that_does_not_fit_says_what_was_written() {
    let s = scratch("stream-errors");
    let long = pattern::bytes(22, READ_AHEAD + (1 << 20) + 100);
    // --slba writes whole LBAs: the 100 bytes past the last one are left, and named.
    let dev = s.file("disk.img", 32 << 20);
    let args = ["write", &dev, "--opts", "async=emu", "--slba", "2", "--data", "-"];
    let o = ioswitch(&args, Some(&long));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let whole = long.len() - 100;
    assert!(
        e.contains(&format!("standard input ended after {} bytes, not a whole number of 512-byte LBAs", long.len())),
        "{e}"
    );
    assert!(e.contains(&format!("({whole} bytes) were written from LBA 2 and its last 100 bytes were not")), "{e}");
    let disk = fs::read(&dev).unwrap();
    assert!(disk[1024..1024 + whole] == long[..whole] && disk[1024 + whole..].iter().all(|&b| b == 0));

    // Longer than the room from the start to the device's end: refused before any command
    // where the room is within the read-ahead...
    let small = s.file("small.img", 8 << 20);
    let o = ioswitch(&["write", &small, "--opts", "async=emu", "--offset", "0", "--data", "-"], Some(&long));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("standard input holds more than the 8MiB (8388608 bytes) from byte 0 to the end of"), "{e}");
    assert!(e.contains("nothing was written") && e.contains("size="), "{e}");
    assert!(fs::read(&small).unwrap().iter().all(|&b| b == 0), "nothing was written");
    // ...and past it, found at the end of the room, which was written.
    let mid = s.file("mid.img", (READ_AHEAD + (512 << 10)) as u64);
    let o = ioswitch(&["write", &mid, "--opts", "async=emu", "--offset", "4096", "--data", "-"], Some(&long));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let room = READ_AHEAD + (512 << 10) - 4096;
    assert!(e.contains(&format!("({room} bytes) from byte 4096 to the end of")), "{e}");
    assert!(e.contains("those were written, the rest was not read"), "{e}");
    assert!(fs::read(&mid).unwrap()[4096..] == long[..room]);
}

#[test]
fn every_async_interface_moves_the_data() {
    let s = scratch("ifaces");
    let dev = s.file("disk.img", 4 << 20);
    for (n, iface) in ["emu", "thrpool", "libaio", "io_uring", "posix"].into_iter().enumerate() {
        let data = pattern::bytes(10 + n as u64, 3 << 20);
        let src = s.path("data");
        fs::write(&src, &data).unwrap();
        let opts = format!("async={iface}");
        let w = ioswitch(&["write", &dev, "--opts", &opts, "--slba", "8", "--data", &src, "--chunk", "256k"], None);
        if not_built(iface, &w) {
            continue;
        }
        assert!(w.status.success(), "async={iface} write: {}", stderr(&w));
        assert!(stderr(&w).contains(&format!("12 commands of up to 256KiB via {iface}")), "{}", stderr(&w));
        let back = s.path("back");
        let args = ["read", &dev, "--opts", &opts, "--slba", "8", "--length", "3MiB", "--out", &back, "--depth", "4"];
        ok(&args, None);
        assert!(fs::read(&back).unwrap() == data, "async={iface}: the data read back differs");
        let r = ok(&["read", &dev, "--opts", &opts, "--offset", "4096", "--length", "3MiB", "--out", "-"], None);
        assert!(r.stdout == data, "async={iface}: the data read by byte offset differs");
    }
}

#[test]
fn the_default_and_the_sync_interfaces_move_the_data() {
    let s = scratch("sync");
    let dev = s.file("disk.img", 1 << 20);
    let data = pattern::bytes(3, 5000);
    ok(&["write", &dev, "--sync", "--offset", "777", "--data", "-", "--chunk", "1000"], Some(&data));
    let r = ok(&["read", &dev, "--sync", "--offset", "777", "--length", "5000", "--out", "-"], None);
    assert_eq!(r.stdout, data);
    assert!(stderr(&r).contains("via psync (sync)"), "{}", stderr(&r));

    let w = ioswitch(&["write", &dev, "--offset", "0", "--data", "-"], Some(&data));
    if !not_built("(the default for a file)", &w) {
        assert!(w.status.success(), "{}", stderr(&w));
        let r = ok(&["read", &dev, "--offset", "0", "--length", "5000", "--out", "-"], None);
        assert_eq!(r.stdout, data);
    }
}

#[test]
fn requests_larger_than_one_command_are_split() {
    let s = scratch("split");
    let dev = s.file("disk.img", 8 << 20);
    let data = pattern::bytes(4, (5 << 20) + 512);
    let src = s.path("data");
    fs::write(&src, &data).unwrap();
    // The default command size is 1 MiB (or less when the device's max transfer is less).
    let w = ok(&["write", &dev, "--opts", "async=emu", "--slba", "0", "--data", &src, "--output", "json"], None);
    let j = json(&w);
    assert_eq!(j["commands"], 6, "{j}");
    assert_eq!(j["bytes"], data.len());
    assert_eq!(j["depth"], 6);
    let back = s.path("back");
    ok(&["read", &dev, "--opts", "async=emu", "--slba", "0", "--nlb", "10241", "--out", &back, "--chunk", "96k"], None);
    assert!(fs::read(&back).unwrap() == data);

    // The device's max transfer caps a command.
    let max = json(&ok(&["info", &dev, "--output", "json"], None))["geometry"]["max_transfer"].as_u64().unwrap();
    let too_big = (max * 2).to_string();
    let e = fails(
        1,
        &["read", &dev, "--opts", "async=emu", "--offset", "0", "--length", "4k", "--out", "-", "--chunk", &too_big],
    );
    assert!(e.contains("larger than the max transfer"), "{e}");
    // A ramdisk request beyond its max transfer: split into max-transfer commands.
    let len = (max + (1 << 20)).to_string();
    let chunk = max.to_string();
    let r = ok(&["read", "64MiB", "--offset", "0", "--length", &len, "--chunk", &chunk, "--out", "-"], None);
    assert_eq!(r.stdout.len() as u64, max + (1 << 20));
    assert!(r.stdout.iter().all(|&b| b == 0), "a new ramdisk reads as zeroes");
    assert!(stderr(&r).contains(" 2 commands"), "{}", stderr(&r));
}

#[test]
fn slba_writes_of_partial_lbas_are_refused_without_padding() {
    let s = scratch("partial");
    let dev = s.file("disk.img", 1 << 20);
    let src = s.path("data");
    fs::write(&src, pattern::bytes(5, 1000)).unwrap();
    let e = fails(1, &["write", &dev, "--opts", "async=emu", "--slba", "0", "--data", &src]);
    assert!(e.starts_with("ioswitch: error: ") && e.contains("1000 bytes") && e.contains("512-byte LBA"), "{e}");
    assert!(fs::read(&dev).unwrap().iter().all(|&b| b == 0), "nothing was written");
    let e = fails(1, &["read", &dev, "--slba", "0", "--length", "1000", "--out", "-"]);
    assert!(e.contains("--length 1000") && e.contains("512-byte LBA"), "{e}");
}

#[test]
fn out_of_range_requests_name_the_range_and_change_nothing() {
    let s = scratch("range");
    let dev = s.file("disk.img", 1 << 20);
    let out = s.path("out");
    let e = fails(1, &["read", &dev, "--opts", "async=emu", "--slba", "2040", "--nlb", "16", "--out", &out]);
    assert!(e.contains("[2040, 2056)") && e.contains("out of range") && e.contains("2048"), "{e}");
    assert!(!Path::new(&out).exists(), "no output file for a request that cannot run");
    let e = fails(1, &["read", &dev, "--offset", "1MiB", "--length", "1", "--out", &out]);
    assert!(e.contains("[1048576, 1048577)"), "{e}");
    // A range past 2^64 is not shown as the empty range [max, max).
    for (at, len) in [("--offset", "--length"), ("--slba", "--nlb")] {
        let e = fails(1, &["read", &dev, at, "18446744073709551615", len, "1", "--out", &out]);
        assert!(e.contains("from 18446744073709551615 on, past 2^64") && e.contains("out of range"), "{e}");
    }

    let src = s.path("data");
    fs::write(&src, pattern::bytes(6, 3 << 20)).unwrap();
    let e = fails(1, &["write", &dev, "--opts", "async=emu", "--offset", "0", "--data", &src]);
    assert!(e.contains("[0, 3145728)") && e.contains("size="), "{e}");
    assert!(fs::read(&dev).unwrap().iter().all(|&b| b == 0), "nothing was written");
}

#[test]
fn library_errors_are_one_line_with_status_1() {
    let s = scratch("errors");
    let dev = s.file("disk.img", 1 << 20);
    let e = fails(1, &["info", &dev, "--opts", "asynk=emu"]);
    assert!(e.starts_with("ioswitch: error: ") && e.contains("\"asynk\""), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let e = fails(1, &["read", &dev, "--opts", "async=iouring", "--slba", "0", "--nlb", "1", "--out", "-"]);
    assert!(e.contains("\"iouring\"") && e.contains("io_uring"), "{e}");

    let missing = s.path("no-such-file");
    let e = fails(1, &["info", &missing]);
    assert!(e.contains(&missing) && e.contains("No such file"), "{e}");
    let e = fails(1, &["write", &dev, "--offset", "0", "--data", &missing]);
    assert!(e.contains("--data") && e.contains("No such file"), "{e}");

    let e = fails(1, &["info", &dev, "--opts", "async=io_uring_cmd"]);
    assert!(e.contains("async=io_uring_cmd") && e.contains("file"), "{e}");
    let e = fails(1, &["info", "64MiB", "--opts", "async=libaio"]);
    assert!(e.contains("ramdisk") && e.contains("libaio"), "{e}");
    // A refusal no interface would lift names the command and why, not an interface "any".
    let e = fails(1, &["write", &dev, "--opts", "rdonly=1", "--offset", "0", "--data", &dev]);
    assert!(e.contains("file write refused: the device was opened read-only (rdonly=1)"), "{e}");
    assert!(!e.contains("any cannot"), "{e}");
}

#[test]
fn misaligned_direct_io_is_refused() {
    let s = scratch("direct");
    let dev = s.file("disk.img", 1 << 20);
    let o = ioswitch(
        &["read", &dev, "--opts", "async=emu,direct=1", "--offset", "100", "--length", "4k", "--out", "-"],
        None,
    );
    let e = stderr(&o);
    if e.contains("O_DIRECT") {
        eprintln!("skipping: this file system has no O_DIRECT: {e}");
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("direct I/O needs") && e.contains("0x64"), "{e}");
}

#[test]
fn usage_errors_exit_2() {
    let e = fails(2, &["read", "1MiB", "--out", "-", "--nlb", "1"]);
    assert!(e.contains("--offset") && e.contains("--slba"), "{e}");
    fails(2, &["read", "1MiB", "--offset", "0", "--slba", "0", "--nlb", "1", "--out", "-"]);
    let e = fails(2, &["write", "1MiB", "--offset", "12q", "--data", "-"]);
    assert!(e.contains("unknown unit"), "{e}");
    fails(2, &["read", "1MiB", "--offset", "0", "--length", "0", "--out", "-"]);
    fails(2, &["read", "1MiB", "--offset", "0", "--length", "1", "--out", "-", "--depth", "0"]);
    fails(2, &["info", "1MiB", "--output", "xml"]);
    fails(2, &["frobnicate"]);
    // A negative number is a bad value of its option, not an unknown argument '-1' with a
    // tip to write `-- -1`; a missing value still says it is missing.
    for (opt, v) in [("--offset", "-1"), ("--slba", "-5"), ("--length", "-1"), ("--nlb", "-1"), ("--depth", "-3")] {
        let mut args = vec!["read", "1MiB", "--out", "-"];
        if !["--offset", "--slba"].contains(&opt) {
            args.extend(["--offset", "0"]);
        }
        if !["--length", "--nlb"].contains(&opt) {
            args.extend(["--length", "4k"]);
        }
        args.extend([opt, v]);
        let e = fails(2, &args);
        assert!(e.contains(&format!("invalid value '{v}' for '{opt} ")), "{opt} {v}: {e}");
        assert!(!e.contains("unexpected argument"), "{opt} {v}: {e}");
    }
    let e = fails(2, &["read", "1MiB", "--offset", "--length", "4k", "--out", "-"]);
    assert!(e.contains("a value is required for '--offset"), "{e}");
}

#[test]
fn ramdisks_work_for_the_life_of_the_command() {
    let data = pattern::bytes(7, 4096);
    let w = ok(&["write", "1MiB", "--slba", "8", "--data", "-", "--output", "json"], Some(&data));
    let j = json(&w);
    assert_eq!((j["interface"].as_str(), j["commands"].as_u64()), (Some("emu"), Some(1)), "{j}");
    let r = ok(&["read", "1MiB", "--slba", "8", "--nlb", "8", "--out", "-"], None);
    assert_eq!(r.stdout, vec![0; 4096], "a fresh process has a fresh ramdisk");
}

#[test]
fn enum_lists_devices_as_a_table_and_as_json() {
    let text = stdout(&ok(&["enum"], None));
    assert!(text.starts_with("PATH") || text.starts_with("no block"), "{text}");
    let j = json(&ok(&["enum", "--output", "json"], None));
    let devices = j["devices"].as_array().expect("a devices array");
    for d in devices {
        assert!(d["path"].as_str().is_some_and(|p| p.starts_with("/dev/")), "{d}");
        assert!(d["kind"].is_string() && d["bytes"].is_u64() && d["lba_size"].is_u64(), "{d}");
    }
    // PCI NVMe controllers follow, after a blank line, as a table of their own.
    let pci = j["pci"].as_array().expect("a pci array");
    for c in pci {
        let addr = c["addr"].as_str().expect("an address");
        assert!(addr.parse::<ioswitch::uri::PciAddr>().is_ok(), "{c}");
        assert!(c["driver"].is_string() || c["driver"].is_null(), "{c}");
        assert!(text.lines().any(|l| l.starts_with(addr)), "{addr} is not in the table:\n{text}");
    }
    let pci_lines = if pci.is_empty() { 0 } else { 2 + pci.len() };
    assert_eq!(text.lines().count(), devices.len().max(1) + usize::from(!devices.is_empty()) + pci_lines);
}

#[test]
fn help_explains_uris_and_every_option_key() {
    for cmd in ["info", "read", "write"] {
        let h = stdout(&ok(&[cmd, "--help"], None));
        for (key, meaning) in ioswitch::opts::KEYS {
            assert!(h.contains(key) && h.contains(meaning), "`{cmd} --help` lacks {key}:\n{h}");
        }
        assert!(h.contains("ramdisk") && h.contains("Examples:"), "{h}");
    }
    let h = stdout(&ok(&["--help"], None));
    for cmd in ["info", "read", "write", "enum"] {
        assert!(h.contains(cmd), "{h}");
    }
    // The README: every subcommand that opens a device takes --opts; every one but bench
    // takes --output.
    let device = [
        "info",
        "read",
        "write",
        "idfy",
        "log",
        "feature get",
        "feature set",
        "zone report",
        "zone open",
        "zone close",
        "zone finish",
        "zone reset",
        "zone offline",
        "zone append",
        "passthru admin",
        "passthru io",
    ];
    for cmd in device.iter().chain(&["enum", "interfaces", "driver bind"]) {
        let mut args: Vec<&str> = cmd.split(' ').collect();
        args.push("--help");
        let h = stdout(&ok(&args, None));
        assert!(h.contains("--output <OUTPUT>"), "`{cmd} --help` has no --output:\n{h}");
        assert_eq!(h.contains("--opts <STRING>"), device.contains(cmd), "`{cmd} --help` and --opts:\n{h}");
    }
}

#[test]
fn driver_bind_names_what_is_wrong_and_changes_nothing() {
    // No machine has domain ffff: the address names no device.
    let e = fails(1, &["driver", "bind", "vfio", "ffff:ff:1f.7"]);
    assert!(e.contains("ffff:ff:1f.7") && e.contains("no PCI device has this address"), "{e}");
    assert!(e.contains("nothing was changed"), "{e}");
    let e = fails(1, &["driver", "bind", "nvme", "pci:ffff:ff:1f.7"]);
    assert!(e.contains("binding to nvme refused"), "{e}");
    let e = fails(2, &["driver", "bind", "spdk", "0000:00:05.0"]);
    assert!(e.contains("unknown driver \"spdk\"") && e.contains("vfio, uio or nvme"), "{e}");
    let e = fails(2, &["driver", "bind", "vfio", "0000:00:20.0"]);
    assert!(e.contains("device \"20\" is out of range"), "{e}");
    let h = stdout(&ok(&["driver", "bind", "--help"], None));
    for what in ["driver_override", "drivers_probe", "mounted", "vm.nr_hugepages", "IOMMU group", "not root"] {
        assert!(h.contains(what), "`driver bind --help` does not explain {what}:\n{h}");
    }
}
