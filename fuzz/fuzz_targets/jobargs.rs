//! Fuzz target `jobargs`: fio-style command lines, `JobReader::read_args` then `finish`
//! (what `ioswitch bench --name=j --rw=randread …` reads).
//!
//! Input: the arguments, one per line (bytes that are not UTF-8 are skipped: arguments
//! reach the reader as `String`s). The job files an argument list names are not read
//! (that is the `jobfile` target).
//!
//! Invariants checked:
//! - reading never panics;
//! - every job file returned is one of the arguments, and not an option (`--x`);
//! - an error names an argument that exists, by its position from 1 (or, for "no job",
//!   says that the command line was read); an error about an option names an argument
//!   that holds it (after `${VAR}` substitution);
//! - round trip: every job read, written back in the canonical spelling (`--key=value`,
//!   see `check_as_command_line`), reads back to the same job.
#![no_main]

use ioswitch_bench::jobfile::{expand_env, Loc};
use ioswitch_bench::{JobError, JobReader};
use ioswitch_fuzz::{check_as_command_line, error_place};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let args: Vec<&str> = if text.is_empty() { Vec::new() } else { text.split('\n').collect() };
    let mut r = JobReader::new();
    let read = r.read_args(&args);
    let raw = r.raw_jobs().to_vec();
    let result = match read {
        Ok(files) => {
            for f in &files {
                let f = f.to_str().expect("a file name from a &str");
                let expanded = |a: &&str| expand_env(a, &Loc::Arg { index: 0 }).ok().is_some_and(|a| a == f);
                assert!(args.iter().any(|a| expanded(&a)), "{f:?} is not an argument of {args:?}");
                assert!(!f.starts_with("--") || f == "--", "option {f:?} taken for a job file");
            }
            r.finish()
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(set) => {
            assert_eq!(set.jobs.len(), raw.len());
            assert_eq!(set.group_ids().len(), set.jobs.len());
            for (raw, spec) in raw.iter().zip(&set.jobs) {
                check_as_command_line(raw, spec);
            }
        }
        Err(JobError::NoJobs { read, .. }) => assert_eq!(read, "the command line"),
        Err(e) => {
            let msg = e.to_string();
            let (loc, option) = error_place(&e);
            let Some(loc) = loc else { panic!("error without a place: {e:?}") };
            let Loc::Arg { index } = loc else { panic!("a command-line error placed in a file: {e:?}") };
            let Some(held) = index.checked_sub(1).and_then(|i| args.get(i)) else {
                panic!("error at argument {index} of {}: {msg}", args.len())
            };
            if let Some(option) = option {
                // The option is named as it reads after `${VAR}` substitution.
                let expanded = expand_env(held, loc).unwrap_or_else(|e| panic!("{msg}, but {e}"));
                assert!(expanded.contains(option), "{msg}: argument {index} is {held:?}");
            }
        }
    }
});
