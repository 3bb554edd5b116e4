//! Reads the fio job files in tests/jobs/ the way `ioswitch bench` does.

use std::path::PathBuf;
use std::time::Duration;

use ioswitch_bench::jobfile::{IoEngine, Loc, Rw, RwPair, SizeSpec, Verify};
use ioswitch_bench::{JobError, JobReader, JobSet};

fn job_file(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "jobs", name].iter().collect();
    path.to_string_lossy().into_owned()
}

#[test]
fn queue_depth_sweep_reads_with_globals_include_and_stonewalls() {
    let file = job_file("randread-qd.fio");
    let set = JobSet::from_args([file.as_str(), "--output-format=json"]).unwrap();
    assert!(set.output_format.json && !set.output_format.normal);

    let names: Vec<&str> = set.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["uring-qd1", "uring-qd16", "libaio-qd16"]);
    for j in &set.jobs {
        assert_eq!(j.filename, ["/tmp/ioswitch-bench.img"]);
        assert_eq!(j.size, Some(SizeSpec::Bytes(64 << 20)));
        assert_eq!((j.rw, j.bs, j.direct), (Rw::RandRead, RwPair { read: 4096, write: 4096 }, true));
        assert_eq!(
            (j.time_based, j.runtime, j.ramp_time),
            (true, Some(Duration::from_secs(10)), Some(Duration::from_secs(2)))
        );
        // From the included common.inc.
        assert!(j.thread && j.norandommap && !j.randrepeat && j.group_reporting);
        assert_eq!(j.percentile_list, [50.0, 90.0, 99.0, 99.9, 99.99]);
    }
    let [qd1, qd16, aio] = &set.jobs[..] else { panic!("three jobs expected") };
    assert_eq!((qd1.ioengine, qd1.iodepth, qd1.iodepth_batch_submit), (IoEngine::IoUring, 1, 1));
    assert_eq!((qd16.iodepth, qd16.iodepth_batch_submit, qd16.iodepth_batch_complete_min), (16, 8, 1));
    assert!(qd16.fixedbufs && qd16.registerfiles && qd16.stonewall);
    assert_eq!((aio.ioengine, aio.iodepth), (IoEngine::Libaio, 16));
    assert_eq!(set.group_ids(), [0, 1, 2]);

    // Places: the job's own option, a global one, and one from the included file.
    assert_eq!(qd16.origin("iodepth_batch_submit"), Some(&Loc::File { file: file.as_str().into(), line: 23 }));
    assert_eq!(qd16.origin("ioengine"), Some(&Loc::File { file: file.as_str().into(), line: 5 }));
    let inc = job_file("common.inc");
    assert_eq!(qd16.origin("norandommap"), Some(&Loc::File { file: inc.as_str().into(), line: 3 }));
    // fio's "global options" and "job options".
    assert_eq!(set.global_options.len(), 14);
    assert_eq!(qd16.options.len(), 6);
}

#[test]
fn mixed_workload_with_xnvme_and_ioswitch_engines() {
    let set = JobSet::from_args([job_file("mixed.fio")]).unwrap();
    let [xn, io] = &set.jobs[..] else { panic!("two jobs expected") };
    for j in [xn, io] {
        assert_eq!((j.rw, j.rwmixread, j.bs), (Rw::RandRw, 70, RwPair { read: 4096, write: 16384 }));
        assert_eq!((j.iodepth, j.numjobs, j.number_ios), (32, 2, Some(100_000)));
        assert_eq!(j.cpus_allowed.as_deref(), Some(&[0, 1][..]));
        assert!(j.lat_percentiles && j.clat_percentiles);
    }
    assert_eq!(xn.ioengine, IoEngine::Xnvme);
    assert_eq!(
        (xn.xnvme.r#async.as_deref(), xn.xnvme.sync.as_deref(), xn.xnvme.dev_nsid),
        (Some("io_uring_cmd"), Some("nvme"), Some(1))
    );
    assert_eq!((io.ioengine, io.verify), (IoEngine::Ioswitch, Verify::Crc32c));
    let opts = io.ioswitch_opts.as_ref().unwrap();
    assert_eq!(opts.r#async, Some(ioswitch::AsyncIface::IoUringCmd));
    assert!(opts.sqpoll);
    assert_eq!(set.group_ids(), [0, 1]);
}

#[test]
fn an_unsupported_option_is_reported_at_its_line() {
    let file = job_file("bad-option.fio");
    let err = JobSet::from_args([&file]).unwrap_err();
    assert!(matches!(err, JobError::UnknownOption { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{file}:7: unknown option 'ioscheduler': a fio option ioswitch bench does not run (the device's \
             scheduler is not changed; write /sys/block/DEV/queue/scheduler before the run instead)"
        )
    );
}

#[test]
fn section_selection_and_command_line_globals_combine_with_files() {
    let mut reader = JobReader::new();
    let files = reader.read_args(["--section=libaio-qd16", "--iodepth=2", &job_file("randread-qd.fio")]).unwrap();
    for f in files {
        reader.read_file(f).unwrap();
    }
    let set = reader.finish().unwrap();
    assert_eq!(set.jobs.len(), 1);
    assert_eq!((set.jobs[0].name.as_str(), set.jobs[0].iodepth), ("libaio-qd16", 16));
    assert_eq!(set.global_options[0].loc, Loc::Arg { index: 2 });
}

#[test]
fn two_job_files_are_separated_by_a_stonewall() {
    let set = JobSet::from_args([job_file("mixed.fio"), job_file("randread-qd.fio")]).unwrap();
    assert_eq!(set.jobs.len(), 5);
    assert!(set.jobs[2].stonewall, "first job of the second file");
    assert_eq!(set.group_ids(), [0, 1, 2, 3, 4]);
}

#[test]
fn a_section_that_names_no_job_is_an_error_that_names_it_and_the_jobs_there_are() {
    let file = job_file("randread-qd.fio");
    let err = JobSet::from_args(["--section=libaio-qd61", file.as_str()]).unwrap_err();
    assert!(matches!(&err, JobError::NoJobs { selected, .. } if selected == &["libaio-qd61"]), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "no job defined: --section 'libaio-qd61' names no job of {file} and the command line; its jobs are \
             'uring-qd1', 'uring-qd16', 'libaio-qd16'"
        )
    );
    // Without --section, a file of globals only still says so.
    let err = JobSet::from_args(["--bs=4k"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no job defined: the command line set only global options (a job is a [section] other than [global], or --name)"
    );
}

#[test]
fn more_jobs_than_fio_runs_are_refused_before_any_starts() {
    // fio's limit, REAL_MAX_JOBS: 4096 jobs in one run, every clone counted.
    let set = JobSet::from_args(["--name=a", "--numjobs=4000", "--name=b", "--numjobs=96"]).unwrap();
    assert_eq!(set.jobs.iter().map(|j| j.numjobs).sum::<u32>(), 4096);
    let err = JobSet::from_args(["--name=a", "--numjobs=4000", "--name=b", "--numjobs=97"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "command line argument 4: job 'b': numjobs=97: 4097 jobs in all, clones included, and a run takes at most \
         4096 (as fio)"
    );
    let err = JobSet::from_args(["--name=j", "--numjobs=100000"]).unwrap_err();
    assert!(err.to_string().contains("numjobs=100000: 100000 jobs in all"), "{err}");
}
