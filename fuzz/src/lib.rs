//! Helpers shared by the fuzz targets in `fuzz_targets/` (see `fuzz/run.sh`).

use ioswitch::spec::ShortPage;
use ioswitch_bench::jobfile::{Loc, RawJob, RawOption};
use ioswitch_bench::{JobError, JobReader, JobSpec};

/// Every public field of a job that does not depend on where it was read from (the
/// section's place and the options as written are left out), as `Debug` text, so that a
/// job read from a file compares with the same job read from a command line.
pub fn job_fields(j: &JobSpec) -> Vec<String> {
    macro_rules! fields {
        ($($f:ident),* $(,)?) => { vec![$(format!("{}: {:?}", stringify!($f), j.$f)),*] };
    }
    fields!(
        name,
        description,
        ioengine,
        filename,
        size,
        filesize,
        offset,
        rw,
        rwmixread,
        bs,
        iodepth,
        iodepth_batch_submit,
        iodepth_batch_complete_min,
        iodepth_batch_complete_max,
        iodepth_low,
        numjobs,
        thread,
        direct,
        allow_mounted_write,
        runtime,
        time_based,
        ramp_time,
        number_ios,
        norandommap,
        invalidate,
        randrepeat,
        randseed,
        cpus_allowed,
        group_reporting,
        stonewall,
        new_group,
        hipri,
        sqthread_poll,
        sqthread_poll_cpu,
        fixedbufs,
        registerfiles,
        fsync,
        verify,
        do_verify,
        percentile_list,
        clat_percentiles,
        lat_percentiles,
        slat_percentiles,
        xnvme,
        ioswitch_opts,
        behaviour,
    )
}

/// One option in fio's command-line spelling: `--key=value`, or `--key` for a bare key.
fn arg(o: &RawOption) -> String {
    match &o.value {
        Some(v) => format!("--{}={v}", o.key),
        None => format!("--{}", o.key),
    }
}

/// Reads `raw` (as read from a job file or a command line, and interpreted as `spec`)
/// again as a command line in the canonical spelling: its global options, `--name=NAME`
/// with the job's final name, then its own options (`name` options left out: on a
/// command line `--name` starts a job). Checks that it gives the same job.
///
/// Jobs that no command line can name are skipped: a final name starting with `global`
/// (`--name=global…` starts a global section) or with blanks around it (a value is
/// trimmed; a section header is not).
pub fn check_as_command_line(raw: &RawJob, spec: &JobSpec) {
    if spec.name.starts_with("global") || spec.name.trim() != spec.name {
        return;
    }
    let keep = |o: &&RawOption| o.key != "name";
    let mut args: Vec<String> = raw.globals.iter().filter(keep).map(arg).collect();
    args.push(format!("--name={}", spec.name));
    args.extend(raw.options.iter().filter(keep).map(arg));
    let mut r = JobReader::new();
    let files = r.read_args(&args).unwrap_or_else(|e| panic!("{args:?} does not read back: {e}"));
    assert!(files.is_empty(), "{args:?} named job files {files:?}");
    let set = r.finish().unwrap_or_else(|e| panic!("{args:?} does not read back: {e}"));
    assert_eq!(set.jobs.len(), 1, "{args:?}");
    assert_eq!(job_fields(&set.jobs[0]), job_fields(spec), "job {:?} read back from {args:?}", raw.name);
}

/// The place an error names, and the option it names (when it names one).
pub fn error_place(e: &JobError) -> (Option<&Loc>, Option<&str>) {
    match e {
        JobError::UnknownOption { name, loc, .. }
        | JobError::BadValue { name, loc, .. }
        | JobError::MissingValue { name, loc, .. } => (Some(loc), Some(name)),
        JobError::Syntax { loc, .. } | JobError::Include { loc, .. } => (Some(loc), None),
        JobError::Invalid { loc, .. } => (loc.as_ref(), None),
        _ => (None, None),
    }
}

/// `f` (a page decoder) over `b`, checked against the short-page rule every decoder
/// keeps: a buffer shorter than `need` bytes is refused with `ShortPage { need, have }`
/// (`have` its length) and a message, any other is decoded. The value, or `None` where
/// it was refused.
pub fn decoded<T>(b: &[u8], need: usize, f: impl Fn(&[u8]) -> Result<T, ShortPage>) -> Option<T> {
    match f(b) {
        Err(e) => {
            assert!(b.len() < need, "a {}-byte page refused: {e}", b.len());
            assert_eq!((e.need, e.have), (need, b.len()), "{e}");
            assert!(!e.to_string().is_empty());
            None
        }
        Ok(v) => {
            assert!(b.len() >= need, "a {}-byte page decoded, {need} needed", b.len());
            Some(v)
        }
    }
}
