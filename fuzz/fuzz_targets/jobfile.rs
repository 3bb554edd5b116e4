//! Fuzz target `jobfile`: fio job files, `JobReader::read_str` then `finish` (what
//! `ioswitch bench FILE` reads).
//!
//! Input: the text of one job file (bytes that are not UTF-8 are skipped: `read_file`
//! refuses them before parsing). Text with `include` is skipped too: an include reads a
//! file of this machine (`include /dev/zero` would never end).
//!
//! Invariants checked:
//! - reading never panics, and every job's reporting group is computed;
//! - an error names the file, and a line of it that exists; an error about an option
//!   (unknown, bad value, missing value) names a line that holds that option; "no job"
//!   names the file;
//! - round trip: every job read, written back as a command line in the canonical
//!   spelling (`--key=value`, see `check_as_command_line`), reads back to the same job.
#![no_main]

use ioswitch_bench::jobfile::{expand_env, strip_comment, Loc};
use ioswitch_bench::{JobError, JobReader};
use ioswitch_fuzz::{check_as_command_line, error_place};
use libfuzzer_sys::fuzz_target;

const NAME: &str = "fuzz.fio";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if text.contains("include") {
        return;
    }
    let mut r = JobReader::new();
    let read = r.read_str(NAME, text);
    let raw = r.raw_jobs().to_vec();
    match read.and_then(|()| r.finish()) {
        Ok(set) => {
            assert_eq!(set.jobs.len(), raw.len());
            assert_eq!(set.group_ids().len(), set.jobs.len());
            for (raw, spec) in raw.iter().zip(&set.jobs) {
                check_as_command_line(raw, spec);
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(NAME), "error without the file name: {msg}");
            if let JobError::NoJobs { read, selected, .. } = &e {
                assert_eq!(read, NAME);
                // No --section was given: the file set only global options.
                assert!(selected.is_empty(), "a --section nobody gave: {e:?}");
                return;
            }
            let (loc, option) = error_place(&e);
            let Some(loc) = loc else { panic!("error without a place: {e:?}") };
            let Loc::File { file, line } = loc else { panic!("a job file error placed on a command line: {e:?}") };
            assert_eq!(&**file, NAME);
            let Some(held) = text.lines().nth(*line as usize - 1) else {
                panic!("error at line {line}, past the file's end: {msg}")
            };
            if let Some(option) = option {
                // The option is named as it reads after `${VAR}` substitution, which the
                // reader makes on the line without its comment (a `#` or `;` and the rest).
                let expanded = expand_env(strip_comment(held), loc).unwrap_or_else(|e| panic!("{msg}, but {e}"));
                assert!(expanded.contains(option), "{msg}: line {line} is {held:?}");
            }
        }
    }
});
