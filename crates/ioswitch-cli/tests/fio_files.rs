//! `ioswitch bench` against fio on what a job does to its files: which system calls
//! `fsync=N` and `fdatasync=N` make (counted with strace), and, for a job with several
//! files, which file got how many bytes.
//!
//! Needs fio and strace (each test skips with the reason when one is missing;
//! `./scripts/test` installs fio).

use ioswitch_testkit::dirs::Scratch;
use ioswitch_testkit::tools::{plain_success, strace_args};
use ioswitch_testkit::{fio_scratch, have, serial, text};

fn scratch(test: &str) -> Scratch {
    Scratch::new(env!("CARGO_TARGET_TMPDIR"), &format!("files-{test}"))
}

/// The job's arguments as fio takes them, and as `ioswitch bench` takes them.
fn both_args(args: &[&str]) -> [(String, Vec<String>); 2] {
    let own: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut ours = vec!["bench".to_string()];
    ours.extend(own.iter().cloned());
    ours.push("--no-progress".into());
    [("fio".into(), own), (env!("CARGO_BIN_EXE_ioswitch").into(), ours)]
}

/// How many times each of `calls` was made by `program ARGS` (and its threads), from
/// strace's log.
fn count_calls(s: &Scratch, program: &str, args: &[String], calls: &[&str]) -> Vec<usize> {
    let log = s.path("strace.log");
    plain_success("strace", &strace_args(&log, &calls.join(","), &[], program, args), None);
    let body = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{log}: {e}"));
    calls
        .iter()
        .map(|c| {
            body.lines()
                .filter(|l| l.split_whitespace().nth(1).is_some_and(|w| w.starts_with(&format!("{c}("))))
                .count()
        })
        .collect()
}

#[test]
fn fsync_n_calls_fsync_and_fdatasync_n_calls_fdatasync_as_often_as_fio() {
    let t = "fsync_n_calls_fsync_and_fdatasync_n_calls_fdatasync_as_often_as_fio";
    let s = fio_scratch!(t, "files-fsync", ("strace", "-V"));
    let _one = serial();
    let file = s.file("data", 256 << 10);
    // 64 writes; the file is there already (no lay-out), and invalidate=0 (ours would
    // fdatasync before dropping the cache). fio syncs before the next write, so the last
    // write has no sync: 63 / N.
    for (sync, want) in [("--fsync=4", [15, 0]), ("--fdatasync=8", [0, 7]), ("--fsync=16", [3, 0])] {
        for engine in ["psync", "libaio"] {
            let job = [
                "--name=j",
                &format!("--filename={file}"),
                "--size=256k",
                "--bs=4k",
                "--rw=write",
                "--invalidate=0",
                &format!("--ioengine={engine}"),
                sync,
            ];
            let [fio, ours] = both_args(&job);
            let counts: Vec<Vec<usize>> =
                [fio, ours].iter().map(|(p, a)| count_calls(&s, p, a, &["fsync", "fdatasync"])).collect();
            assert_eq!(counts[0], want, "fio {engine} {sync}: fsync, fdatasync calls");
            assert_eq!(counts[1], counts[0], "ioswitch bench {engine} {sync}: fsync, fdatasync calls, against fio's");
        }
    }
}

/// Which 4 KiB blocks of each file hold data (the files start as zeroes; both tools write
/// random bytes), by file name.
fn written_blocks(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<bool>> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let e = e.expect("a directory entry");
        let body = std::fs::read(e.path()).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
        out.insert(
            e.file_name().to_string_lossy().into_owned(),
            body.chunks(4096).map(|b| b.iter().any(|&x| x != 0)).collect(),
        );
    }
    out
}

/// The bytes the job wrote, from a fio-format JSON report.
fn written_bytes(json: &[u8]) -> u64 {
    let v: serde_json::Value =
        serde_json::from_slice(json).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", text(json)));
    v["jobs"].as_array().expect("jobs").iter().map(|j| j["write"]["io_bytes"].as_u64().expect("write io_bytes")).sum()
}

#[test]
fn several_files_per_job_get_the_same_blocks_as_with_fio() {
    let t = "several_files_per_job_get_the_same_blocks_as_with_fio";
    if !have("fio", "--version", t) {
        return;
    }
    let _one = serial();
    // Each case: the files (made of zeroes first, so that neither tool lays them out),
    // their size, and the job's options; fio writes them in one directory, ours in another.
    let default4 = |job: &str| (0..4).map(|i| format!("{job}.0.{i}")).collect::<Vec<_>>();
    // Most cases: fio's four files of 256 KiB for job j, and these options after those.
    let four = |opts: &[&'static str], same_blocks: bool| {
        let all = ["--nrfiles=4", "--filesize=256k"].iter().chain(opts).copied().collect();
        (default4("j"), 256 << 10, all, same_blocks)
    };
    let cases: Vec<(Vec<String>, u64, Vec<&str>, bool)> = vec![
        // fio's default roundrobin: 512 KiB over four 256 KiB files, 128 KiB each.
        four(&["--size=512k", "--rw=write"], true),
        // sequential: each file until it is done.
        four(&["--size=512k", "--rw=write", "--file_service_type=sequential"], true),
        // roundrobin:3 over 100 writes: 27, 25, 24, 24.
        four(&["--size=400k", "--rw=write", "--file_service_type=roundrobin:3"], true),
        // size split over the files (no filesize), fio's file names.
        (default4("j"), 64 << 10, vec!["--nrfiles=4", "--size=256k", "--rw=write"], true),
        // a filename list with an escaped colon; size split over its three files.
        (
            vec!["a".into(), "b:c".into(), "d".into()],
            96 << 10,
            vec![r"--filename=a:b\:c:d", "--size=192k", "--rw=write"],
            true,
        ),
        // two clones, each with its own two files (jobname.jobnum.filenum).
        (
            ["j.0.0", "j.0.1", "j.1.0", "j.1.1"].map(String::from).to_vec(),
            64 << 10,
            vec!["--nrfiles=2", "--filesize=64k", "--numjobs=2", "--rw=write"],
            true,
        ),
        // openfiles below the file count: 160 writes round robin over the open files, a
        // file opening when another is done (1: one at a time; 2: 64, 64, 16, 16; 3: file
        // 3 never opens).
        four(&["--size=640k", "--rw=write", "--openfiles=1"], true),
        four(&["--size=640k", "--rw=write", "--openfiles=2"], true),
        four(&["--size=640k", "--rw=write", "--openfiles=3"], true),
        // random writes: the blocks differ between the tools, the count per file does not.
        four(&["--size=512k", "--rw=randwrite"], false),
    ];
    let engines: [&[&str]; 2] = [&["--ioengine=psync"], &["--ioengine=libaio", "--iodepth=4"]];
    for ((names, len, opts, same_blocks), engine) in cases.iter().flat_map(|c| engines.iter().map(move |e| (c, e))) {
        let (len, same_blocks) = (*len, *same_blocks);
        let opts: Vec<&str> = opts.iter().chain(engine.iter()).copied().collect();
        let s = scratch("several");
        let mut maps = Vec::new();
        let mut bytes = Vec::new();
        for tool in ["fio", "ours"] {
            let dir = s.path(tool);
            std::fs::create_dir(&dir).expect("a directory per tool");
            for n in names {
                std::fs::File::create(format!("{dir}/{n}")).and_then(|f| f.set_len(len)).expect("a file of zeroes");
            }
            let mut job = vec![
                "--name=j".to_string(),
                format!("--directory={dir}"),
                "--bs=4k".into(),
                "--output-format=json".into(),
            ];
            job.extend(opts.iter().map(|o| o.to_string()));
            let job: Vec<&str> = job.iter().map(String::as_str).collect();
            let [(fio, fio_args), (ours, our_args)] = both_args(&job);
            let o = if tool == "fio" {
                plain_success(&fio, &fio_args, None)
            } else {
                plain_success(&ours, &our_args, None)
            };
            bytes.push(written_bytes(&o.stdout));
            maps.push(written_blocks(std::path::Path::new(&dir)));
        }
        let counts: Vec<Vec<(String, usize)>> = maps
            .iter()
            .map(|m| m.iter().map(|(f, b)| (f.clone(), b.iter().filter(|&&w| w).count())).collect())
            .collect();
        assert_eq!(bytes[1], bytes[0], "{opts:?}: bytes written, ours against fio's");
        assert_eq!(counts[1], counts[0], "{opts:?}: blocks written per file, ours against fio's");
        assert!(counts[0].iter().map(|(_, c)| c).sum::<usize>() > 0, "{opts:?}: fio wrote nothing: {counts:?}");
        if same_blocks {
            assert_eq!(maps[1], maps[0], "{opts:?}: which blocks of each file were written, ours against fio's");
        }
    }
}

#[test]
fn distributed_file_choices_spread_ios_over_the_files_as_fio_does() {
    let t = "distributed_file_choices_spread_ios_over_the_files_as_fio_does";
    let s = fio_scratch!(t, "files-fst-dist", ("strace", "-V"));
    let _one = serial();
    let dir = s.dir().display().to_string();
    // 4096 reads of 4 KiB over four 256 KiB files (io_size 16 MiB: each file is gone over
    // many times, fio starts a file over when its offsets run out), 3072 over three. With a
    // center the likeliest file is placed (fio's rand_off), so the shares are the
    // distribution's and not where a random offset put them. normal:0 spreads over two
    // files by fio's 12-draw average; normal:20:0.25 over three files puts the middle in
    // file 1, as fio's wrapped unsigned offset does.
    for (fst, files) in
        [("zipf:1.2:0", 4), ("pareto:0.3:0.5", 4), ("normal:10", 4), ("normal:0", 4), ("normal:20:0.25", 3)]
    {
        let (nrfiles, io_size) = (format!("--nrfiles={files}"), format!("--io_size={}m", 4 * files));
        let job = [
            "--name=j",
            &format!("--directory={dir}"),
            &nrfiles,
            "--filesize=256k",
            &io_size,
            "--bs=4k",
            "--rw=read",
            "--ioengine=psync",
            &format!("--file_service_type={fst}"),
        ];
        let mut shares = Vec::new();
        for (p, a) in both_args(&job) {
            // strace -y names each pread's file (laying the files out writes, no pread).
            let log = s.path("strace.log");
            plain_success("strace", &strace_args(&log, "pread64", &["-y"], &p, &a), None);
            let body = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{log}: {e}"));
            let per: Vec<usize> =
                (0..files).map(|f| body.lines().filter(|l| l.contains(&format!("/j.0.{f}>"))).count()).collect();
            let total: usize = per.iter().sum();
            assert_eq!(total, 1024 * files, "{p} {fst}: reads per file {per:?}");
            shares.push(per.iter().map(|&c| c as f64 / total as f64).collect::<Vec<f64>>());
        }
        // A share of 3072 or more draws has a standard deviation of at most 0.9%; 3%
        // apart is another distribution.
        let (fio, ours) = (&shares[0], &shares[1]);
        assert!(fio.iter().zip(ours).all(|(f, o)| (f - o).abs() < 0.03), "{fst}: fio's shares {fio:?}, ours {ours:?}");
    }
}

#[test]
fn a_file_is_laid_out_for_every_clone_of_an_offset_increment_job_as_fio_does() {
    let t = "a_file_is_laid_out_for_every_clone_of_an_offset_increment_job_as_fio_does";
    let s = fio_scratch!(t, "files-offset-increment");
    let _one = serial();
    // cross-stripe-verify.fio's shape, small: 3 clones, each 1 MiB further on.
    let mut sizes = Vec::new();
    for (who, (program, mut args)) in both_args(&[
        "--name=w",
        "--size=1m",
        "--offset=120k",
        "--offset_increment=1m",
        "--numjobs=3",
        "--bs=16k",
        "--rw=write",
        "--verify=crc32c",
    ])
    .into_iter()
    .enumerate()
    {
        let data = s.path(&format!("d{who}"));
        args.push(format!("--filename={data}"));
        plain_success(&program, &args, None);
        sizes.push(std::fs::metadata(&data).expect("the job's file").len());
    }
    assert_eq!(sizes[0], (120 << 10) + (3 << 20), "fio's file: the last clone's region's end");
    assert_eq!(sizes[1], sizes[0], "ours");
}

/// The names of the files in `dir`, sorted.
fn names_in(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn filename_format_names_the_files_as_fio_does() {
    let t = "filename_format_names_the_files_as_fio_does";
    let s = fio_scratch!(t, "files-filename_format");
    let _one = serial();
    // Each case: the format, and the names fio made for it (checked here, so that a fio
    // that named them otherwise shows up as such, not as our bug).
    let cases: [(&str, &[&str]); 4] = [
        ("fmt.$jobnum.$filenum", &["fmt.0.0", "fmt.0.1", "fmt.1.0", "fmt.1.1"]),
        ("$JOBNAME-$filenum$clientuid", &["j-0", "j-1"]),
        ("$jobname.$jobnum.$filenum", &["j.0.0", "j.0.1", "j.1.0", "j.1.1"]),
        ("one", &["one"]),
    ];
    for (i, (format, want)) in cases.iter().enumerate() {
        let job = ["--name=j", "--nrfiles=2", "--numjobs=2", "--size=64k", "--bs=4k", "--rw=write", "--ioengine=psync"];
        let mut made = Vec::new();
        for (n, (program, mut args)) in both_args(&job).into_iter().enumerate() {
            let dir = s.path(&format!("{i}-{n}"));
            std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
            args.push(format!("--directory={dir}"));
            args.push(format!("--filename_format={format}"));
            plain_success(&program, &args, None);
            made.push(names_in(&dir));
        }
        assert_eq!(made[0], *want, "fio's names for filename_format={format}");
        assert_eq!(made[1], made[0], "ours against fio's for filename_format={format}");
    }
}

#[test]
fn fallocate_preallocates_a_laid_out_file_as_fio_does() {
    let t = "fallocate_preallocates_a_laid_out_file_as_fio_does";
    let s = fio_scratch!(t, "files-fallocate", ("strace", "-V"));
    let _one = serial();
    // A read job on a new file: both lay it out, preallocating it first by the mode.
    // Each case: the mode and the fallocate(2) calls fio made (posix_fallocate is one).
    for (mode, calls) in [("none", 0), ("0", 0), ("native", 1), ("posix", 1), ("1", 1), ("keep", 1), ("truncate", 0)] {
        for (n, (program, args)) in
            both_args(&["--name=j", "--size=64k", "--bs=4k", "--rw=read"]).into_iter().enumerate()
        {
            let file = s.path(&format!("{mode}-{n}"));
            let mut args = args;
            args.push(format!("--filename={file}"));
            args.push(format!("--fallocate={mode}"));
            let got = count_calls(&s, &program, &args, &["fallocate"]);
            assert_eq!(got, [calls], "{program} fallocate={mode}");
            let len = std::fs::metadata(&file).unwrap_or_else(|e| panic!("{file}: {e}")).len();
            assert_eq!(len, 64 << 10, "{program} fallocate={mode}: the file laid out");
        }
    }
}

#[test]
fn a_write_jobs_new_file_is_laid_out_with_data_only_where_fio_lays_it_out() {
    let t = "a_write_jobs_new_file_is_laid_out_with_data_only_where_fio_lays_it_out";
    if !have("fio", "--version", t) {
        return;
    }
    let s = scratch("layout");
    // fio's extend_file: a job that writes lays out its new file with data only with
    // overwrite=1 or through an engine that cannot extend a file (mmap); otherwise the
    // file is only preallocated, and an existing file too small for the job is removed
    // first. One 4 KiB write at the start of a 1 MiB region: the rest of the file is
    // zeroes exactly where the file was not laid out.
    let cases: [(&[&str], &str, bool); 4] = [
        (&["--ioengine=psync"], "write", false),
        (&["--ioengine=psync", "--overwrite=1"], "write", true),
        (&["--ioengine=mmap"], "write", true),
        (&["--ioengine=psync"], "randrw", true),
    ];
    for (opts, rw, laid_out) in cases {
        // mmap's case once, on a new file: ours measures the copy ceiling after an mmap
        // job (about 5 s in a debug build).
        let existing_too = !opts.contains(&"--ioengine=mmap");
        for existing in [false, true].into_iter().filter(|&e| !e || existing_too) {
            for (program, args) in both_args(&[]) {
                let file = s.path(&format!("f-{}", ioswitch_testkit::tools::who(&program)));
                let _ = std::fs::remove_file(&file);
                let old_inode = existing.then(|| {
                    // A file too small for the job, of ones.
                    std::fs::write(&file, vec![0xffu8; 64 << 10]).expect("the small file");
                    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap())
                });
                let filename = format!("--filename={file}");
                let rw = format!("--rw={rw}");
                let mut job: Vec<String> = args.clone();
                let own = ["--name=j", &filename, &rw, "--bs=4k", "--size=1m", "--number_ios=1", "--thread=1"];
                job.extend(own.iter().chain(opts).map(|a| a.to_string()));
                plain_success(&program, &job, None);
                let data = std::fs::read(&file).expect("the job's file");
                let meta = std::fs::metadata(&file).unwrap();
                let what = format!(
                    "{} {opts:?} {rw} (existing small file: {existing})",
                    ioswitch_testkit::tools::who(&program)
                );
                assert_eq!(data.len(), 1 << 20, "{what}: the file's size");
                let zero_tail = data[64 << 10..].iter().all(|&b| b == 0);
                assert_eq!(!zero_tail, laid_out, "{what}: the file past the old one's end was laid out with data");
                if let Some(old) = old_inode {
                    // Without a layout with data the old file is removed, so its ones are gone.
                    let replaced = std::os::unix::fs::MetadataExt::ino(&meta) != old
                        || data[8 << 10..64 << 10].iter().all(|&b| b != 0xff);
                    if !laid_out {
                        assert!(replaced, "{what}: the old, too small file was replaced");
                    }
                }
            }
        }
    }
}
