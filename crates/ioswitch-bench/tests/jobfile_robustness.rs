//! Robustness tests (deterministic fuzzing) for the fio job file and command-line reader:
//! `JobReader::read_str` + `finish`, and `JobSet::from_args`.
//!
//! Inputs come from a small xorshift generator with fixed seeds, so every failure replays:
//! the failure message shows the seed, the case number and the input. Three kinds of input:
//! job files valid by construction (sections, globals, comments, includes, every option
//! with good values, each job's expected settings tracked on the side), mutations of those
//! and of the job files in tests/jobs/, and random text over an alphabet weighted toward
//! the grammar's characters. The same generated jobs are also written as a command line
//! (`--name=… --bs=…`), which must give the same jobs as the job file.
//!
//! Every call must return (no panic, under 100 ms); every error must name the file (the
//! name given to `read_str`) and the line, or the command-line argument, and the line or
//! argument it names must hold the option it complains about.

use std::fmt::Write as _;
use std::path::PathBuf;

use ioswitch_bench::jobfile::Rw;
use ioswitch_bench::{JobError, JobReader, JobSet, JobSpec};
use ioswitch_testkit::robust::*;

// ---------------------------------------------------------------------------------------
// Job generator: valid by construction, as a job file and as a command line.

fn job_file(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "jobs", name].iter().collect();
    path.to_string_lossy().into_owned()
}

/// Good values of the options that any engine takes (`time_based`, `name`, `ioengine`,
/// `rw`, `iodepth`, `direct`, `buffered` and the engine options are generated apart).
/// An option with good values.
type Values = (&'static str, &'static [&'static str]);

const VALUES: &[Values] = &[
    ("bs", &["4k", "8k", "512", "64k", "1m", "4KiB", "0x1000", "4k,16k", "8k,", ",8k", "4k,8k,4k", "1g"]),
    ("blocksize", &["4k", "16K"]),
    ("size", &["64m", "1g", "50%", "100%", "0", "1", "16p"]),
    ("filesize", &["1g", "4k", "1"]),
    ("offset", &["0", "4k", "10%", "0%"]),
    ("fileoffset", &["1m"]),
    ("filename", &["/tmp/ioswitch-fuzz.img", "/dev/nvme0n1:/dev/nvme1n1", r"/tmp/a\:b", "é"]),
    ("rwmixread", &["0", "70", "100"]),
    ("rwmixwrite", &["30", "0"]),
    ("iodepth_batch_submit", &["0", "1", "8", "64"]),
    ("iodepth_batch", &["4"]),
    ("iodepth_batch_complete_min", &["0", "1", "4"]),
    ("iodepth_batch_complete", &["2"]),
    ("numjobs", &["1", "4", "64"]),
    ("runtime", &["10s", "500ms", "2m", "30", "1h", "100us", "3d", "1usec", "7msec"]),
    ("timeout", &["5"]),
    ("ramp_time", &["2s", "0", "500ms"]),
    ("number_ios", &["0", "1000", "18446744073709551615"]),
    ("randseed", &["42", "0", "18446744073709551615"]),
    ("cpus_allowed", &["0-1,3", "5", "0-1023", "3,1-2,2"]),
    ("fsync", &["0", "8", "4294967295"]),
    ("verify", &["none", "0", "crc32c", "crc32c-intel", "md5"]),
    ("percentile_list", &["50:99:99.9", "99.99", "1:2:3:4:5:6:7:8:9:10:11:12:13:14:15:16:17:18:19:20", "100"]),
    ("description", &["anything at all = really", "é日本"]),
];

/// Booleans whose value the oracle does not track (`thread` and `direct` are tracked).
const BOOLS: &[&str] = &[
    "norandommap",
    "invalidate",
    "randrepeat",
    "allrandrepeat",
    "overwrite",
    "group_reporting",
    "stonewall",
    "wait_for_previous",
    "new_group",
    "do_verify",
    "clat_percentiles",
    "lat_percentiles",
    "slat_percentiles",
];

/// Every engine, with every option that belongs to it only (and good values).
const ENGINES: &[(&str, &[Values])] = &[
    ("psync", &[]),
    ("pvsync", &[]),
    ("sync", &[]),
    ("libaio", &[]),
    ("posixaio", &[]),
    ("null", &[]),
    ("mmap", &[]),
    ("pvsync2", &[("hipri", &["1", "0", ""])]),
    (
        "io_uring",
        &[
            ("hipri", &["1", ""]),
            ("sqthread_poll", &["1", "0", ""]),
            ("sqthread_poll_cpu", &["0", "3"]),
            ("fixedbufs", &["1", ""]),
            ("registerfiles", &["1", "0"]),
        ],
    ),
    (
        "io_uring_cmd",
        &[
            ("fixedbufs", &["", "1"]),
            ("sqthread_poll", &["1"]),
            ("hipri", &["0"]),
            ("sqthread_poll_cpu", &["1"]),
            ("registerfiles", &[""]),
        ],
    ),
    (
        "xnvme",
        &[
            ("xnvme_be", &["linux"]),
            ("xnvme_async", &["io_uring_cmd", "libaio"]),
            ("xnvme_sync", &["nvme"]),
            ("xnvme_admin", &["nvme"]),
            ("xnvme_dev_nsid", &["1", "4294967295"]),
            ("xnvme_iovec", &["0"]),
        ],
    ),
    ("ioswitch", &[("ioswitch_opts", &["async=io_uring_cmd,sqpoll=1", "sync=nil", "async=thrpool,threads=8"])]),
];

const RW: &[(&str, Rw)] = &[
    ("read", Rw::Read),
    ("write", Rw::Write),
    ("randread", Rw::RandRead),
    ("randwrite", Rw::RandWrite),
    ("rw", Rw::ReadWrite),
    ("readwrite", Rw::ReadWrite),
    ("randrw", Rw::RandRw),
];

/// One section as generated: its options in order (value `None`: a bare boolean).
struct Section {
    /// `None` for a global section.
    name: Option<String>,
    /// [`INCLUDE`] stands for `include` of tests/jobs/common.inc (in a command line: the
    /// options of that file).
    options: Vec<(String, Option<String>)>,
}

const INCLUDE: &str = "\u{0}include";

/// The settings a job must end up with, tracked while generating.
#[derive(Clone, Debug, PartialEq)]
struct Expect {
    name: String,
    iodepth: u32,
    rw: Rw,
    direct: bool,
    thread: bool,
}

const COMMON_INC: &[(&str, &str)] =
    &[("thread", "1"), ("norandommap", "1"), ("randrepeat", "0"), ("percentile_list", "50:90:99:99.9:99.99")];

fn gen_jobs(rng: &mut Rng, case: usize) -> (Vec<Section>, Vec<Expect>) {
    let mut sections = Vec::new();
    let mut expects = Vec::new();
    let mut global = Expect { name: String::new(), iodepth: 1, rw: Rw::Read, direct: false, thread: false };
    let n = 1 + rng.below(5);
    for s in 0..n + rng.below(3) {
        let is_global = s >= n || (s == 0 && rng.chance(50)) || rng.chance(15);
        let name = (!is_global).then(|| {
            let base = rng_pick_str(rng, &["job", "uring-qd", "x y", "é", "a.b", "global-ish"]);
            // "global…" starts a global section, as in fio; keep job names clear of it.
            format!("{}{case}-{s}", base.replace("global", "glob"))
        });
        let mut e = Expect { name: name.clone().unwrap_or_default(), ..global.clone() };
        let mut options: Vec<(String, Option<String>)> = Vec::new();
        let mut include = false;
        let mut engine = false;
        for _ in 0..rng.below(8) {
            match rng.below(10) {
                0 => {
                    let (v, rw) = *rng.pick(RW);
                    let key = if rng.chance(20) { "readwrite" } else { "rw" };
                    options.push((key.into(), Some(v.into())));
                    e.rw = rw;
                }
                1 => {
                    let d = *rng.pick(&[1u32, 2, 16, 32, 128, 1024, 65536, u32::MAX]);
                    let v = if rng.chance(20) { format!("{d:#x}") } else { d.to_string() };
                    options.push(("iodepth".into(), Some(v)));
                    e.iodepth = d;
                }
                2 => {
                    let on = rng.chance(50);
                    let key = if rng.chance(30) { "buffered" } else { "direct" };
                    let v = if key == "buffered" { !on } else { on };
                    let bare = v && rng.chance(50);
                    options.push((key.into(), (!bare).then(|| u8::from(v).to_string())));
                    e.direct = on;
                }
                3 => {
                    let on = rng.chance(50);
                    options.push((
                        "thread".into(),
                        if on && rng.chance(50) { None } else { Some(u8::from(on).to_string()) },
                    ));
                    e.thread = on;
                }
                4 if !include && rng.chance(30) => {
                    include = true;
                    options.push((INCLUDE.into(), None));
                    e.thread = true;
                }
                5 => {
                    let key = rng_pick_str(rng, BOOLS);
                    let v = rng_pick_str(rng, &["1", "0", ""]);
                    options.push((key.into(), (!v.is_empty()).then(|| v.into())));
                }
                6 if name.is_some() && !engine => {
                    engine = true;
                    // A job's own engine, with some of its own options; time_based with
                    // its runtime.
                    let (engine, opts) = *rng.pick(ENGINES);
                    options.push(("ioengine".into(), Some(engine.into())));
                    for _ in 0..rng.below(opts.len() + 1) {
                        let (k, vs) = *rng.pick(opts);
                        let v = rng_pick_str(rng, vs);
                        options.push((k.into(), (!v.is_empty()).then(|| v.into())));
                    }
                    if rng.chance(30) {
                        options.push(("runtime".into(), Some("10s".into())));
                        options.push(("time_based".into(), rng.chance(50).then(|| "1".into())));
                    }
                }
                _ => {
                    let (k, vs) = *rng.pick(VALUES);
                    options.push((k.into(), Some(rng_pick_str(rng, vs).into())));
                }
            }
        }
        if is_global {
            global = Expect { name: String::new(), ..e };
        } else {
            expects.push(e);
        }
        sections.push(Section { name, options });
    }
    if expects.is_empty() {
        let name = format!("job{case}");
        expects.push(Expect { name: name.clone(), ..global });
        sections.push(Section { name: Some(name), options: Vec::new() });
    }
    (sections, expects)
}

/// The sections as a job file: comments, blank lines, blanks around `=`, CRLF.
fn render_file(rng: &mut Rng, sections: &[Section]) -> String {
    let eol = if rng.chance(20) { "\r\n" } else { "\n" };
    let mut s = String::new();
    if rng.chance(30) {
        let _ = write!(s, "; generated{eol}# by jobfile_robustness{eol}{eol}");
    }
    for sec in sections {
        let header = sec.name.as_deref().unwrap_or(if rng.chance(80) { "global" } else { "global-defaults" });
        let pad = if rng.chance(10) { "  " } else { "" };
        let _ = write!(s, "{pad}[{header}]{pad}");
        if rng.chance(10) {
            s.push_str(" ; a section");
        }
        s.push_str(eol);
        for (k, v) in &sec.options {
            match v {
                None if k == INCLUDE => {
                    let _ = write!(s, "include {}", job_file("common.inc"));
                }
                None => s.push_str(k),
                Some(v) if rng.chance(15) => {
                    let _ = write!(s, " {k} \t= {v} ");
                }
                Some(v) => {
                    let _ = write!(s, "{k}={v}");
                }
            }
            if rng.chance(10) {
                s.push_str(rng_pick_str(rng, &["  # note", ";note", "\t; = ["]));
            }
            s.push_str(eol);
            if rng.chance(5) {
                s.push_str(eol);
            }
        }
    }
    s
}

/// The same sections as a command line in fio's spelling.
fn render_args(rng: &mut Rng, sections: &[Section]) -> Vec<String> {
    let mut args = Vec::new();
    for (i, sec) in sections.iter().enumerate() {
        match &sec.name {
            Some(name) => args.push(format!("--name={name}")),
            // Options before the first --name are global already.
            None if i == 0 && rng.chance(50) => {}
            None => args.push("--name=global".into()),
        }
        let expanded = sec.options.iter().flat_map(|(k, v)| {
            let inc = COMMON_INC.iter().map(|(k, v)| (k.to_string(), Some(v.to_string())));
            if k == INCLUDE {
                inc.collect::<Vec<_>>()
            } else {
                vec![(k.clone(), v.clone())]
            }
        });
        for (k, v) in expanded {
            match v {
                None => args.push(format!("--{k}")),
                Some(v) if rng.chance(25) && !v.starts_with("--") => {
                    args.push(format!("--{k}"));
                    args.push(v);
                }
                Some(v) => args.push(format!("--{k}={v}")),
            }
        }
    }
    args
}

/// A job's settings, without where they were given (which differs between a file and a
/// command line by design).
fn summary(j: &JobSpec) -> String {
    format!(
        "{:?}",
        (
            (&j.name, &j.description, j.ioengine, &j.filename, j.size, j.filesize, j.offset, j.rw, j.rwmixread, j.bs),
            (j.iodepth, j.iodepth_batch_submit, j.iodepth_batch_complete_min, j.numjobs, j.thread, j.direct),
            (j.runtime, j.time_based, j.ramp_time, j.number_ios, j.norandommap, j.invalidate, j.randrepeat),
            (j.randseed, &j.cpus_allowed, j.group_reporting, j.stonewall, j.new_group, j.hipri, j.sqthread_poll),
            (j.sqthread_poll_cpu, j.fixedbufs, j.registerfiles, j.fsync, j.verify, j.do_verify, &j.percentile_list),
            (j.clat_percentiles, j.lat_percentiles, j.slat_percentiles, &j.xnvme, &j.ioswitch_opts),
        )
    )
}

/// What every job that was read must satisfy: fio's fix-ups and ranges.
fn check_job(place: &str, j: &JobSpec) {
    assert!(j.iodepth >= 1 && j.numjobs >= 1, "{place}: {j:?}");
    assert!((1..=j.iodepth).contains(&j.iodepth_batch_submit), "{place}: batch submit {j:?}");
    assert!(j.iodepth_batch_complete_min <= j.iodepth, "{place}: batch complete {j:?}");
    assert!(!j.time_based || j.runtime.is_some(), "{place}: time_based without runtime");
    assert!(j.bs.read > 0 && j.bs.write > 0 && j.rwmixread <= 100, "{place}: {j:?}");
    assert!(j.percentile_list.len() <= 20, "{place}: {j:?}");
    assert!(j.percentile_list.iter().all(|p| *p > 0.0 && *p <= 100.0), "{place}: {j:?}");
    assert!(j.cpus_allowed.as_ref().is_none_or(|c| c.iter().all(|&c| c < 1024)), "{place}: {j:?}");
}

// ---------------------------------------------------------------------------------------
// Error checks.

/// The option a line sets (the text before `=`, comments cut, trimmed).
fn line_key(line: &str) -> &str {
    let line = line.split(['#', ';']).next().unwrap_or_default().trim();
    line.split_once('=').map_or(line, |(k, _)| k.trim())
}

/// Checks an error from reading `text` as `name`: it names the file and a line of it, and
/// that line holds what the error is about.
fn check_file_error(place: &str, name: &str, text: &str, e: &JobError) {
    let msg = e.to_string();
    assert!(!msg.trim().is_empty(), "{place}: empty error");
    if let JobError::NoJobs { read, .. } = e {
        assert!(read.contains(name), "{place}: NoJobs must name {name}: {msg}");
        return;
    }
    let Some(rest) = msg.strip_prefix(&format!("{name}:")) else {
        // Only an included file's own errors may name another file; it is named in full.
        let included = msg.split(':').next().unwrap_or_default();
        assert!(
            text.contains("include") && std::path::Path::new(included).is_file(),
            "{place}: the error does not name the file {name:?}: {msg}"
        );
        return;
    };
    let line_no: usize = rest
        .split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{place}: the error names no line: {msg}"));
    let lines: Vec<&str> = text.lines().collect();
    assert!((1..=lines.len()).contains(&line_no), "{place}: line {line_no} of {}: {msg}", lines.len());
    let line = lines[line_no - 1];
    let holds = |what: &str, word: &str| {
        assert!(line.contains(word), "{place}: {what} {word:?} is not on line {line_no} ({line:?}): {msg}")
    };
    match e {
        JobError::UnknownOption { name, .. } | JobError::MissingValue { name, .. } => holds("the option", name),
        JobError::BadValue { name, value, .. } => {
            holds("the option", name);
            holds("the value", value);
            assert!(msg.contains(&format!("'{value}'")), "{place}: the value is not shown: {msg}");
        }
        JobError::Syntax { .. } => {
            let stripped = line.split(['#', ';']).next().unwrap_or_default().trim();
            assert!(!stripped.is_empty(), "{place}: a syntax error on an empty line {line_no}: {msg}");
            assert!(
                msg.contains(stripped) || msg.contains(line_key(line)) || msg.contains("include"),
                "{place}: {msg}"
            );
        }
        JobError::Include { .. } => holds("the include", "include"),
        JobError::Invalid { job, .. } => {
            assert!(msg.contains(&format!("job '{job}'")), "{place}: {msg}");
            let on_header = line.trim_start().starts_with('[');
            assert!(on_header || msg.contains(line_key(line)), "{place}: line {line_no} ({line:?}) is not it: {msg}");
        }
        _ => panic!("{place}: unexpected error for a job file's text: {e:?}"),
    }
}

/// Reads `text` as job file `name`, as `ioswitch bench` does; checks the answer.
fn read_text(fz: &mut Fuzz, seed: u64, case: usize, name: &str, text: &str) -> Result<JobSet, JobError> {
    let place = format!("job file seed {seed:#x} case {case} name {name:?} text {text:?}");
    let r = fz.call(seed, case, text, || {
        let mut reader = JobReader::new();
        reader.read_str(name, text)?;
        let raw = reader.raw_jobs().len();
        let set = reader.finish();
        if let Ok(set) = &set {
            assert_eq!(set.jobs.len(), raw, "one JobSpec per job read");
        }
        if let Err(JobError::NoJobs { .. }) = &set {
            assert_eq!(raw, 0, "NoJobs with jobs read");
        }
        set
    });
    fz.count(&r);
    match &r {
        Ok(set) => set.jobs.iter().for_each(|j| check_job(&place, j)),
        Err(e) => check_file_error(&place, name, text, e),
    }
    r
}

const JOB_ALPHABET: &[&str] = &[
    "[",
    "]",
    "[global]",
    "[job]",
    "[j2]",
    "\n",
    "\n",
    "\n",
    "\r\n",
    "=",
    "=",
    ";",
    "#",
    " ",
    "\t",
    ",",
    ":",
    "-",
    "%",
    "include ",
    "bs",
    "iodepth",
    "rw",
    "randread",
    "ioengine",
    "io_uring",
    "libaio",
    "direct",
    "size",
    "runtime",
    "time_based",
    "fixedbufs",
    "cpus_allowed",
    "percentile_list",
    "ioswitch_opts",
    "async=nil",
    "thread",
    "stonewall",
    "0",
    "1",
    "4",
    "16",
    "4k",
    "64m",
    "50%",
    "10s",
    "500ms",
    "0x",
    "k",
    "KiB",
    "MiB",
    "é",
    "\u{0}",
    "\u{feff}",
    "99999999999999999999",
    "1e309",
    "-1",
    "name",
    "verify",
    "crc32c",
];

/// A random line-shaped job file: headers, `key=value` with known keys and random values,
/// junk.
fn random_job_text(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..rng.below(8) {
        match rng.below(5) {
            0 => {
                let _ = write!(s, "[{}]", random_string(rng, &["job", "global", "x", " ", "]", "["], 2));
            }
            1 | 2 => {
                let (k, _) = *rng.pick(VALUES);
                let k = if rng.chance(30) { rng_pick_str(rng, BOOLS) } else { k };
                let _ = write!(s, "{k}={}", random_string(rng, JOB_ALPHABET, 3));
            }
            _ => s.push_str(&random_string(rng, JOB_ALPHABET, 6)),
        }
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn job_files_parse_or_name_the_file_and_line() {
    let mut fz = Fuzz::new("job file");
    let seed = 0x10b_u64;
    let mut rng = Rng::new(seed);
    let mut seeds: Vec<(String, String)> = ["randread-qd.fio", "mixed.fio", "bad-option.fio"]
        .iter()
        .map(|f| (job_file(f), std::fs::read_to_string(job_file(f)).unwrap()))
        .collect();
    for case in 0..15_000 {
        match case % 3 {
            0 => {
                let (sections, expects) = gen_jobs(&mut rng, case);
                let text = render_file(&mut rng, &sections);
                let name = format!("gen-{case}.fio");
                let place = format!("seed {seed:#x} case {case} text {text:?}");
                let set = read_text(&mut fz, seed, case, &name, &text)
                    .unwrap_or_else(|e| panic!("{place}: valid by construction, but: {e}"));
                let got: Vec<Expect> = set
                    .jobs
                    .iter()
                    .map(|j| Expect {
                        name: j.name.clone(),
                        iodepth: j.iodepth,
                        rw: j.rw,
                        direct: j.direct,
                        thread: j.thread,
                    })
                    .collect();
                assert_eq!(got, expects, "{place}");
                // The same file with one more job that uses an option of another engine:
                // an error at that option's line.
                let (engine, _) = *rng.pick(ENGINES);
                let foreign: Vec<(&str, &str)> = ENGINES
                    .iter()
                    .flat_map(|(_, opts)| opts.iter().map(|(k, vs)| (*k, vs[0])))
                    .filter(|(k, _)| !ENGINES.iter().any(|(e, opts)| *e == engine && opts.iter().any(|(o, _)| o == k)))
                    .collect();
                let (option, value) = *rng.pick(&foreign);
                let item = if value.is_empty() { option.to_string() } else { format!("{option}={value}") };
                let bad = format!("{text}[bad-job]\nioengine={engine}\n{item}\n");
                let line = bad.lines().count();
                match read_text(&mut fz, seed, case, &name, &bad) {
                    Err(e @ JobError::Invalid { .. }) => {
                        let want = format!("{name}:{line}: job 'bad-job': option '{option}' belongs to ioengine ");
                        assert!(e.to_string().starts_with(&want), "{place}: {e}");
                    }
                    other => panic!("{place} + {option} with ioengine={engine}: {other:?}"),
                }
                if seeds.len() < 300 {
                    seeds.push((name, text));
                }
            }
            1 => {
                let (name, valid) = rng.pick(&seeds).clone();
                let text = mutate(&mut rng, &valid, &['\n', '=', ',', '[', ']', ' ', ':'], JOB_ALPHABET);
                let _ = read_text(&mut fz, seed, case, &name, &text);
            }
            _ => {
                let text = random_job_text(&mut rng);
                let _ = read_text(&mut fz, seed, case, "random.fio", &text);
            }
        }
    }
    fz.assert_balanced();
}

#[test]
fn the_shipped_job_files_survive_every_single_line_deletion_and_duplication() {
    // Exhaustive, small: each line of each shipped job file removed, and doubled.
    let mut fz = Fuzz::new("job file lines");
    for (i, f) in ["randread-qd.fio", "mixed.fio", "common.inc"].iter().enumerate() {
        let name = job_file(f);
        let text = std::fs::read_to_string(&name).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for n in 0..lines.len() {
            for dup in [false, true] {
                let mut l = lines.clone();
                if dup {
                    l.insert(n, lines[n]);
                } else {
                    l.remove(n);
                }
                let _ = read_text(&mut fz, i as u64, n, &name, &l.join("\n"));
            }
        }
    }
}

/// Checks an error from `JobSet::from_args(args)`.
fn check_args_error(place: &str, args: &[String], e: &JobError) {
    let msg = e.to_string();
    assert!(!msg.trim().is_empty(), "{place}: empty error");
    match e {
        JobError::NoJobs { read, .. } => {
            assert!(read.contains("the command line"), "{place}: NoJobs must name the command line: {msg}");
            return;
        }
        JobError::Read { path, .. } => {
            assert!(
                args.iter().any(|a| std::path::Path::new(a) == path),
                "{place}: {path:?} is not an argument: {msg}"
            );
            assert!(msg.contains(&path.display().to_string()), "{place}: the path is not named: {msg}");
            return;
        }
        _ => {}
    }
    if let Some(rest) = msg.strip_prefix("command line argument ") {
        let n: usize = rest.split(':').next().and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!((1..=args.len()).contains(&n), "{place}: argument {n} of {}: {msg}", args.len());
        let arg = &args[n - 1];
        let next = args.get(n).map(String::as_str).unwrap_or_default();
        match e {
            JobError::UnknownOption { name, .. } | JobError::MissingValue { name, .. } => {
                assert!(arg.starts_with(&format!("--{name}")), "{place}: argument {n} is {arg:?}: {msg}")
            }
            JobError::BadValue { name, value, .. } => {
                assert!(arg.starts_with(&format!("--{name}")), "{place}: argument {n} is {arg:?}: {msg}");
                assert!(arg.contains(value.as_str()) || next == value, "{place}: {value:?} not given there: {msg}");
            }
            JobError::Invalid { job, .. } => {
                assert!(msg.contains(&format!("job '{job}'")), "{place}: {msg}");
                assert!(arg.starts_with("--"), "{place}: argument {n} is {arg:?}: {msg}");
            }
            _ => panic!("{place}: unexpected error for a command line: {e:?}"),
        }
    } else {
        // An error in a job file the command line names.
        let file = msg.split(':').next().unwrap_or_default();
        assert!(args.iter().any(|a| a == file), "{place}: the error names neither argument nor file: {msg}");
    }
}

#[test]
fn command_lines_parse_like_job_files_or_name_the_argument() {
    let mut fz = Fuzz::new("JobSet::from_args");
    let seed = 0xa265_u64;
    let mut rng = Rng::new(seed);
    let files = [job_file("randread-qd.fio"), job_file("mixed.fio"), "/nonexistent/ioswitch-fuzz.fio".to_string()];
    let mut valid: Vec<Vec<String>> = Vec::new();
    let arg_alphabet: Vec<String> = JOB_ALPHABET
        .iter()
        .map(|s| s.to_string())
        .chain(VALUES.iter().map(|(k, vs)| format!("--{k}={}", vs[0])))
        .chain(BOOLS.iter().map(|k| format!("--{k}")))
        .chain(
            ["--name=j", "--name=global", "--section=j", "--output-format=json", "--output=/dev/null", "--", "-"]
                .map(String::from),
        )
        .chain(
            ["--output-format", "json+,normal", "--bs", "--iodepth", "--iodepth=0", "--rw=trim", "--foo"]
                .map(String::from),
        )
        .collect();
    let alphabet: Vec<&str> = arg_alphabet.iter().map(String::as_str).collect();
    for case in 0..12_000 {
        let args: Vec<String> = match case % 3 {
            0 => {
                let (sections, _) = gen_jobs(&mut rng, case);
                let args = render_args(&mut rng, &sections);
                let text = render_file(&mut rng, &sections);
                let place = format!("seed {seed:#x} case {case} args {args:?}");
                let from_args = fz.call(seed, case, &format!("{args:?}"), || JobSet::from_args(&args));
                fz.count(&from_args);
                let from_args = from_args.unwrap_or_else(|e| panic!("{place}: valid by construction, but: {e}"));
                let from_file = read_text(&mut fz, seed, case, "same.fio", &text)
                    .unwrap_or_else(|e| panic!("{place}: the job file {text:?}: {e}"));
                let a: Vec<String> = from_args.jobs.iter().map(summary).collect();
                let f: Vec<String> = from_file.jobs.iter().map(summary).collect();
                assert_eq!(a, f, "{place}: the command line and the job file {text:?} differ");
                assert_eq!(from_args.group_ids(), from_file.group_ids(), "{place}");
                if valid.len() < 300 {
                    valid.push(args);
                }
                continue;
            }
            1 if !valid.is_empty() => {
                // Mutate a valid command line: its arguments joined by a separator that no
                // generated argument holds, then split again.
                let v = rng.pick(&valid).join("\u{1}");
                let mut args: Vec<String> =
                    mutate(&mut rng, &v, &['\u{1}', '=', ','], &alphabet).split('\u{1}').map(String::from).collect();
                if rng.chance(10) {
                    args.insert(rng.below(args.len() + 1), rng.pick(&files).clone());
                }
                args
            }
            _ => {
                let mut args: Vec<String> = (0..rng.below(8))
                    .map(|_| match rng.below(4) {
                        0 => format!("--{}", random_string(&mut rng, &alphabet, 3)),
                        _ => rng_pick_str(&mut rng, &alphabet).to_string(),
                    })
                    .collect();
                if rng.chance(10) {
                    args.push(rng.pick(&files).clone());
                }
                args
            }
        };
        // Arguments not starting with "--" are job files: keep them to the known ones, so
        // that no file of the working directory is read by chance.
        let args: Vec<String> = args
            .into_iter()
            .map(|a| if a.starts_with("--") || files.contains(&a) { a } else { format!("--{a}") })
            .collect();
        let place = format!("seed {seed:#x} case {case} args {args:?}");
        let r = fz.call(seed, case, &format!("{args:?}"), || JobSet::from_args(&args));
        fz.count(&r);
        match &r {
            Ok(set) => set.jobs.iter().for_each(|j| check_job(&place, j)),
            Err(e) => check_args_error(&place, &args, e),
        }
    }
    fz.assert_balanced();
}
