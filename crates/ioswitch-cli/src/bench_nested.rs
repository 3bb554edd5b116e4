//! `ioswitch bench` with no arguments (the built-in comparison) and the nested
//! benchmarks `compare`, `sweep`, `overhead` and `membw`, and `plot` (charts of fio's logs).

use crate::fail::{Failure, Outcome};
use crate::output;
use clap::Parser;
use ioswitch_bench::compare::{self, Comparison, Iface};
use ioswitch_bench::fiolog;
use ioswitch_bench::jobfile::{JobSet, JobSpec};
use ioswitch_bench::membw::{self, shape, MembwOpts};
use ioswitch_bench::overhead::{self, targets, OverheadOpts};
use ioswitch_bench::scaling;
use ioswitch_bench::sweep::{self, SweepPlan};
use ioswitch_bench::sweep_csv;
use std::path::PathBuf;
use std::time::Duration;

/// The built-in job's runtime in a sweep or a scaling study (each point is one run).
const SHORT_RUN: Duration = Duration::from_millis(300);

fn say(msg: &str) {
    eprintln!("{msg}");
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

fn print_cmp(c: &Comparison, f: Format) -> Outcome {
    match f {
        Format::Text => output::stdout(&c.to_text()),
        Format::Json => output::stdout(&format!("{:#}\n", c.to_json())),
    }
}

/// `ioswitch bench` with no arguments: every available interface on a temporary file.
pub fn default_run() -> Outcome {
    let dir = compare::default_dir();
    let names: Vec<String> = Iface::DEFAULT_SET.iter().map(|i| i.to_string()).collect();
    say(&format!(
        "ioswitch bench: built-in comparison of {}, 4 KiB random reads on a temporary file in {} \
         (about 15 s; `ioswitch bench --help` for fio-style jobs)",
        names.join(", "),
        dir.display()
    ));
    let c = compare::default_run(&dir, &mut say)?;
    print_cmp(&c, Format::Text)
}

/// The one job that fio-style arguments define.
fn base_job(args: &[String]) -> Outcome<JobSpec> {
    let set = JobSet::from_args(args).map_err(|e| Failure::new(e.to_string()))?;
    match set.jobs.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Failure::new("the fio arguments define no job (give --name=NAME or a job file)")),
        more => Err(Failure::new(format!(
            "the fio arguments define {} jobs; compare, sweep and overhead take exactly one (use --section NAME)",
            more.len()
        ))),
    }
}

fn parse_ifaces(list: &str) -> Outcome<(Vec<Iface>, bool)> {
    let sel = compare::parse_interfaces(list)?;
    Ok((sel.ifaces, sel.all))
}

/// A temporary directory for the default job's file, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Outcome<Scratch> {
        let dir = compare::default_dir().join(format!("ioswitch-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Failure::new(format!("creating the scratch directory {}: {e}", dir.display())))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The job a nested benchmark runs: the one its fio arguments define, or without any the
/// built-in job on a file in a new [`Scratch`] (returned: the file lives as long as it),
/// with `runtime` where given.
fn job_or_builtin(fio: &[String], runtime: Option<Duration>) -> Outcome<(JobSpec, Option<Scratch>)> {
    if !fio.is_empty() {
        return Ok((base_job(fio)?, None));
    }
    let scratch = Scratch::new()?;
    let mut j = compare::default_job(&scratch.0.join("data"));
    if runtime.is_some() {
        j.runtime = runtime;
    }
    Ok((j, Some(scratch)))
}

/// `wrote PATH` on stderr for each file written.
fn say_wrote(files: &[PathBuf]) {
    for f in files {
        say(&format!("wrote {}", f.display()));
    }
}

/// `ioswitch bench compare`.
#[derive(Parser, Debug)]
#[command(
    name = "ioswitch bench compare",
    about = "One job over several interfaces, interleaved repetitions, one table",
    after_help = "\
The job is given in fio's spelling after the options (one job). Without one, the built-in job
runs: 4 KiB random reads, iodepth 16, on a temporary 64 MiB file.

Examples:
  ioswitch bench compare --engines io_uring,libaio,psync
  ioswitch bench compare --engines all --reps 5 --name=j --filename=/var/tmp/f --size=256m \\
      --rw=randread --bs=4k --iodepth=32 --runtime=2s --time_based --direct=1"
)]
struct CompareArgs {
    /// Interfaces: a comma list (psync, io_uring, libaio, posix, thrpool, emu, nil, …) or
    /// `all` (every interface that can open the target; others are listed as skipped).
    #[arg(long, default_value = "all")]
    engines: String,
    /// Repetitions of each interface, interleaved.
    #[arg(long, default_value_t = compare::DEFAULT_REPS)]
    reps: u32,
    /// text table or JSON.
    #[arg(long = "output-format", value_enum, default_value = "text")]
    format: Format,
    /// The job, in fio's spelling (--name=j --rw=randread …) or a job file.
    #[arg(value_name = "FIO ARGS", trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    fio: Vec<String>,
}

/// `ioswitch bench sweep`.
#[derive(Parser, Debug)]
#[command(
    name = "ioswitch bench sweep",
    about = "Queue depth × block size grid over interfaces, or the jobs × queue depth × variant scaling study: CSV, JSON and SVG plots",
    after_help = "\
Writes sweep.csv, sweep.json, lat-vs-qd.svg, lat-vs-bs.svg and iops-vs-qd.svg into --out.

With --variants or --jobs: the scaling study of \"Understanding Modern Storage APIs\" instead, at
the job's block size: jobs × queue depth × variants, with the paper's labels
  iou     io_uring (interrupts)        iou+p   io_uring with IOPOLL
  iou+k   io_uring with SQPOLL         libaio  Linux AIO
  vfio    the user-space NVMe driver (a PCI address target; in the default list only then)
Each variant is probed first; one the target cannot run is reported as refused, with the
reason. Writes study.csv, study.json, iops-vs-qd-jN.svg per job count and iops-vs-jobs-qdD.svg
per queue depth into --out.

With --from-csv FILE (repeatable): no run; the plots of rows in sweep.csv's format, from one
or more files merged (rows that one sweep cannot measure together, e.g. one controller under
the kernel's driver and then, rebound, under the user-space one: tests/vm/pci-study.sh).
Writes lat-vs-qd.svg, iops-vs-qd.svg, cpu-per-io-vs-qd.svg and syscalls-per-io-vs-qd.svg
(and lat-vs-bs.svg with several block sizes) into --out. Files in study.csv's format (of
--variants runs) merge into one study instead: the merged study.csv, iops-vs-qd-jN.svg and
iops-vs-jobs-qdD.svg into --out (tests/vm/pci-study.sh --scaling: the kernel variants on a
namespace, then vfio on its controller). The files given together are of one kind.

Examples:
  ioswitch bench sweep --engines io_uring,libaio,psync --qd 1,2,4,8,16,32 --bs 512,4k,32k,128k --out sweep/
  ioswitch bench sweep --variants iou,iou+p,iou+k,libaio --jobs 1,2 --qd 1,4,16,64 --out study/ \\
      --name=j --filename=/var/tmp/f --size=1g --rw=randread --bs=4k --direct=1 --runtime=2s --time_based
  ioswitch bench sweep --from-csv target/pci-study/sweep.csv --out target/pci-study
  ioswitch bench sweep --from-csv kernel/study.csv --from-csv vfio/study.csv --out study/"
)]
struct SweepArgs {
    /// Draw the plots of these CSV files (sweep.csv's or study.csv's columns, merged)
    /// instead of running.
    #[arg(long = "from-csv", value_name = "FILE")]
    from_csv: Vec<PathBuf>,
    /// Interfaces: a comma list or `all` [default: io_uring,libaio,psync].
    #[arg(long)]
    engines: Option<String>,
    /// Queue depths.
    #[arg(long, default_value = "1,2,4,8,16,32")]
    qd: String,
    /// Block sizes (4k, 128k, …) [default: 512,4k,32k,128k; the scaling study runs at
    /// the job's block size].
    #[arg(long)]
    bs: Option<String>,
    /// The scaling study's interface variants: iou, iou+p, iou+k, libaio, vfio [default:
    /// the first four, and vfio on a PCI address].
    #[arg(long)]
    variants: Option<String>,
    /// The scaling study's job counts (numjobs) [default: 1].
    #[arg(long)]
    jobs: Option<String>,
    /// Repetitions of the whole grid, interleaved.
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Directory for the CSV, JSON and plots.
    #[arg(long, default_value = "sweep")]
    out: PathBuf,
    /// The base job, in fio's spelling, or a job file (default: the built-in job).
    #[arg(value_name = "FIO ARGS", trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    fio: Vec<String>,
}

/// `ioswitch bench overhead`.
#[derive(Parser, Debug)]
#[command(
    name = "ioswitch bench overhead",
    about = "What ioswitch costs per I/O: each interface against a raw loop of the same syscalls",
    after_help = "\
nil is measured against a bare in-process loop; psync, libaio and io_uring against raw loops
issuing the same syscalls without ioswitch, on the same file, interleaved. The penalty is in
ns per I/O with its spread, and a check tells whether it stays flat across qd and bs.

Example:
  ioswitch bench overhead --engines nil,io_uring --qd 1,16 --bs 4k,64k --reps 7

The runs behind the targets in docs/BENCHMARKS.md (nil cycle, 4 KiB reads on /dev/shm and on
a disk file against raw loops, callgrind instruction counts; the same tool as
`cargo bench -p ioswitch --bench overhead`):
  ioswitch bench overhead targets [--quick] [--only PATTERN,...] [--reps N] [--cpu N] ...
  ioswitch bench overhead targets --help"
)]
struct OverheadArgs {
    /// Interfaces among nil, psync, libaio, io_uring.
    #[arg(long, default_value = "nil,psync,libaio,io_uring")]
    engines: String,
    /// Queue depths.
    #[arg(long, default_value = "1,16")]
    qd: String,
    /// Block sizes.
    #[arg(long, default_value = "4k,64k")]
    bs: String,
    /// Repetitions of every pair.
    #[arg(long, default_value_t = 7)]
    reps: u32,
    /// Target duration of one side's run, ms.
    #[arg(long = "run-ms", default_value_t = 40)]
    run_ms: u64,
    /// Read this existing file or block device instead of a temporary file.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Open with O_DIRECT on both sides.
    #[arg(long)]
    direct: bool,
    /// text table or JSON.
    #[arg(long = "output-format", value_enum, default_value = "text")]
    format: Format,
}

/// `--output-format` of `ioswitch bench membw` (fio's word for text, `normal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MembwFormat {
    Normal,
    Json,
}

/// `ioswitch bench membw`.
#[derive(Parser, Debug)]
#[command(
    name = "ioswitch bench membw",
    about = "Memory-bandwidth ceiling: STREAM copy/scale/add/triad, memcpy and a non-temporal copy",
    after_help = "\
Kernels, over three arrays of f64 a, b, c, in this order every repetition, with bytes counted as
STREAM counts them (every array a kernel names counted once, whether read or written; the
read-for-ownership of a line before a plain store writes it is not counted):
  copy     c = a, element by element          2 arrays x 8 B per element
  scale    b = 3.0*c                          2 arrays
  add      c = a + b                          3 arrays
  triad    a = b + 3.0*c                      3 arrays
  memcpy   the C library's memcpy(c, b)       bytes read + bytes written (2 arrays)
  nt_copy  b = a with non-temporal stores     bytes read + bytes written (2 arrays)
           (x86-64 AVX _mm256_stream_si256 or SSE2 _mm_stream_si128 after a CPUID check,
           then sfence; said so and left out where the CPU has none)

Each of N threads owns a slice of every array (allocated and first touched by itself, pinned to
its own CPU when there are enough CPUs; the report says where they ran). One warm-up repetition
is not counted; of the others the table gives the best rate (what STREAM reports), the median
and the spread min..max, in GB/s = 10^9 bytes/s. Every element is checked against a scalar
replay after the run: a kernel that computed the wrong thing fails the run.

Why a ceiling: an mmap or pmem interface moves data with the CPU (a read is a copy out of the
mapping, a write a copy into it), so one thread of mmap/pmem I/O cannot go faster than one
thread's copy rate here; memcpy is the copy such interfaces actually do, nt_copy what a pmem
library's streaming writes do.

The default array size follows STREAM's rule: each array at least 4 times all caches together
(read from /sys/devices/system/cpu/cpu*/cache/index*/size; the report prints them).

Ceilings of a job's shape (--shape, with --bs; instead of the kernels above): one thread, not
pinned, over one mapped region of --size bytes (default 256m), or of the file --file (its
length unless --size says less; MAP_SHARED, as the pmem and mmap interfaces map it), in --bs
pieces at the job's offsets (in order for read/write, uniformly random bs-aligned for
randread/randwrite, repeats allowed as fio's norandommap), as many pieces per repetition as
the region holds:
  read, randread    the C library's memcpy of each piece into ONE reused bs-byte buffer
                    (what a read through a mapping does, and nothing else)
  write, randwrite  non-temporal stores of a value held in a register over each piece, no
                    source read (AVX or SSE2 after a CPUID check), one sfence per piece:
                    the store bandwidth a durable write cannot exceed. They overwrite --file.
Each byte counts once (bytes read, or bytes written: fio's bw_bytes), not as STREAM counts,
so a job's bandwidth divides by these directly. One warm-up repetition (it also faults the
pages in) is not counted; best / median / spread of --reps. After every repetition the buffer
must hold the last piece read, and every piece written the value stored.

The same-duration mean (--runtime, with --shape; --ramp as well, default 0): a job's bandwidth
is a mean over its whole run (bytes / job_runtime, after its ramp_time), not the best of short
repetitions. With --runtime each shape also runs, after its repetitions, as a time-based job
runs: the same loop over the same region (in order, starting the region over at its end; or
random) for --ramp, not counted, then for --runtime; counted are the pieces that ended after
the ramp's end, over the time from then to the end of the last one, as ioswitch bench counts
a job. Reported beside the best (JSON: shapes[].timed.mean_bps beside shapes[].best_bps), and
checked as the repetitions are. Times as a job's runtime and ramp_time: 1s, 500ms, a plain
number is seconds; at most 3600 s each.

Example:
  ioswitch bench membw --threads 1,2 --reps 10
  ioswitch bench membw --size 1g --output-format json
  ioswitch bench membw --shape read,randread,write,randwrite --bs 512k --file /dev/shm/f
  ioswitch bench membw --shape read --bs 512k --file /dev/shm/f --runtime 1s --ramp 500ms"
)]
struct MembwArgs {
    /// Thread counts, one run each (default: 1 and every CPU this process may use).
    #[arg(long)]
    threads: Option<String>,
    /// Bytes of each array, all threads' slices together (1g, 512m, …); default: STREAM's rule.
    /// With --shape: bytes of the region.
    #[arg(long)]
    size: Option<String>,
    /// Ceilings of a job's shape instead of the kernels: a comma list of read, randread,
    /// write, randwrite (needs --bs).
    #[arg(long)]
    shape: Option<String>,
    /// With --shape: the job's block size, one piece (512k, 4k, …).
    #[arg(long)]
    bs: Option<String>,
    /// With --shape: map this file as the region (write shapes overwrite it; nothing else may
    /// write it meanwhile).
    #[arg(long)]
    file: Option<std::path::PathBuf>,
    /// With --shape: also the same-duration mean, each shape run this long after --ramp, as a
    /// time-based job (1s, 500ms; a plain number is seconds).
    #[arg(long)]
    runtime: Option<String>,
    /// With --runtime: run this long first, not counted (a job's ramp_time; default 0).
    #[arg(long)]
    ramp: Option<String>,
    /// Timed repetitions of every kernel (after one warm-up), 1 to 100.
    #[arg(long, default_value_t = membw::DEFAULT_REPS)]
    reps: u32,
    /// normal (text tables) or json.
    #[arg(long = "output-format", value_enum, default_value = "normal")]
    format: MembwFormat,
}

fn membw_run(a: MembwArgs) -> Outcome {
    let fail = |e: membw::MembwError| Failure::new(e.to_string());
    if let Some(sh) = &a.shape {
        return membw_shape_run(&a, sh);
    }
    if a.bs.is_some() || a.file.is_some() || a.runtime.is_some() || a.ramp.is_some() {
        let which = if a.bs.is_some() {
            "--bs"
        } else if a.file.is_some() {
            "--file"
        } else if a.runtime.is_some() {
            "--runtime"
        } else {
            "--ramp"
        };
        return Err(Failure::new(format!("{which} applies to --shape only (the STREAM kernels use arrays of --size)")));
    }
    let threads = match &a.threads {
        Some(t) => membw::parse_threads(t).map_err(fail)?,
        None => {
            let n = membw::allowed_cpus().len().max(1);
            if n == 1 {
                vec![1]
            } else {
                vec![1, n]
            }
        }
    };
    let array_bytes = a.size.as_deref().map(membw::parse_array_size).transpose().map_err(fail)?;
    let opts = MembwOpts { threads, array_bytes, reps: a.reps };
    let r = membw::measure(&opts, &mut say).map_err(fail)?;
    match a.format {
        MembwFormat::Normal => output::stdout(&r.to_text()),
        MembwFormat::Json => output::stdout(&format!("{:#}\n", r.to_json())),
    }
}

/// `ioswitch bench membw --shape …`: ceilings of a job's shape.
fn membw_shape_run(a: &MembwArgs, shapes: &str) -> Outcome {
    let fail = |e: membw::MembwError| Failure::new(e.to_string());
    if a.threads.is_some() {
        return Err(Failure::new(
            "--threads applies to the STREAM kernels; --shape measures one thread, as one job's thread",
        ));
    }
    let shapes = shape::parse_shapes(shapes).map_err(fail)?;
    let bs = a.bs.as_deref().ok_or_else(|| Failure::new("--shape needs --bs (the job's block size, e.g. 512k)"))?;
    let bs = shape::parse_bs(bs).map_err(fail)?;
    let region_bytes = a.size.as_deref().map(membw::parse_array_size).transpose().map_err(fail)?;
    let timed = match (&a.runtime, &a.ramp) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(Failure::new("--ramp needs --runtime (the same-duration mean it runs before)"));
        }
        (Some(rt), ramp) => Some(shape::Timed {
            runtime: shape::parse_runtime(rt).map_err(fail)?,
            ramp: ramp.as_deref().map(shape::parse_ramp).transpose().map_err(fail)?.unwrap_or_default(),
        }),
    };
    let opts = shape::ShapeOpts { shapes, region_bytes, bs, reps: a.reps, file: a.file.clone(), timed };
    let r = shape::measure(&opts, &mut say).map_err(fail)?;
    match a.format {
        MembwFormat::Normal => output::stdout(&r.to_text()),
        MembwFormat::Json => output::stdout(&format!("{:#}\n", r.to_json())),
    }
}

/// `ioswitch bench plot`.
#[derive(Parser, Debug)]
#[command(
    name = "ioswitch bench plot",
    about = "SVG time-series charts from fio's logs: latency percentiles, IOPS and bandwidth over time",
    after_help = "\
Reads the logs fio (or ioswitch bench) writes with write_lat_log, write_bw_log and write_iops_log
(NAME_lat.N.log, NAME_clat.N.log, NAME_slat.N.log, NAME_bw.N.log, NAME_iops.N.log; fio 3.33's
columns: time ms, value, direction, bs, [offset,] priority; compressed NAME_KIND.N.log.fz logs of
log_store_compressed=1 are inflated as fio --inflate-log does) and writes one SVG per log into --out,
named after the log (j_clat.1.log -> j_clat.1.svg). Time is cut into windows; a latency log is
drawn as p50, p99 and p99.9 (nearest rank) per window and direction, in µs on a log axis; a bandwidth
(KiB/s) or IOPS log as the rate per window and direction (fio's default log of one line per I/O
counted, a log_avg_msec log averaged). A histogram log (write_hist_log, NAME_clat_hist.N.log,
any hist_coarseness) is drawn as the same clat percentiles, from the window's histograms
added up, by fio's percentile rule.

Example:
  fio --name=j --filename=/dev/shm/f --size=64m --rw=randread --runtime=5s --time_based \\
      --write_lat_log=j --write_bw_log=j --write_iops_log=j --log_avg_msec=100
  ioswitch bench plot j_*.log --out plots/"
)]
struct PlotArgs {
    /// Width of a time window in ms (default: the log's span / 100, rounded to 1, 2 or 5
    /// times a power of ten).
    #[arg(long = "window-ms")]
    window_ms: Option<u64>,
    /// Directory for the SVG files.
    #[arg(long, default_value = "plots")]
    out: PathBuf,
    /// fio log files.
    #[arg(value_name = "LOG", required = true)]
    logs: Vec<PathBuf>,
}

/// Whether `arg` is the option `flag` (`--flag` or `--flag=…`).
fn is_flag(arg: &str, flag: &str) -> bool {
    arg == flag || arg.strip_prefix(flag).is_some_and(|r| r.starts_with('='))
}

/// `ioswitch bench sweep --variants …`: the scaling study.
fn study_run(a: SweepArgs) -> Outcome {
    let fail = |e: scaling::StudyError| Failure::new(e.to_string());
    if a.engines.is_some() {
        return Err(Failure::new(
            "--engines and --variants/--jobs do not go together: the study's interfaces are its variants",
        ));
    }
    if a.bs.is_some() {
        return Err(Failure::new("--bs and --variants/--jobs do not go together: the study runs at the job's block size (--bs=SIZE among the fio arguments)"));
    }
    let (base, _scratch) = job_or_builtin(&a.fio, Some(SHORT_RUN))?;
    let plan = scaling::StudyPlan {
        variants: match &a.variants {
            Some(v) => scaling::parse_variants(v).map_err(fail)?,
            None => scaling::default_variants(&base),
        },
        jobs: scaling::parse_jobs(a.jobs.as_deref().unwrap_or("1")).map_err(fail)?,
        qds: sweep::parse_qds(&a.qd)?,
        reps: a.reps,
    };
    let r = scaling::study(&base, &plan, &mut say).map_err(fail)?;
    let files = r.write_all(&a.out)?;
    output::stdout(&r.to_text())?;
    say_wrote(&files);
    Ok(())
}

/// `ioswitch bench sweep --from-csv FILE…`: the plots of CSV rows, no run.
fn from_csv(a: SweepArgs) -> Outcome {
    if a.engines.is_some() || a.bs.is_some() || !a.fio.is_empty() {
        return Err(Failure::new(
            "--from-csv draws the rows of its files and runs nothing: --engines, --bs and fio arguments do not go with it",
        ));
    }
    let files = sweep_csv::plot_files(&a.from_csv, &a.out).map_err(|e| Failure::new(e.to_string()))?;
    say_wrote(&files);
    Ok(())
}

/// Parses a nested benchmark's options; `--help` prints and exits 0, a usage error
/// prints and exits 2 (clap's convention, as for every other subcommand).
fn parse<T: Parser>(word: &str, args: &[String]) -> T {
    let argv = std::iter::once(format!("ioswitch bench {word}")).chain(args.iter().cloned());
    T::try_parse_from(argv).unwrap_or_else(|e| e.exit())
}

/// Runs `ioswitch bench WORD ARGS…` for WORD in compare, sweep, overhead, membw, plot.
pub fn nested(word: &str, args: &[String]) -> Outcome {
    match word {
        "compare" => {
            let a: CompareArgs = parse(word, args);
            let (ifaces, all) = parse_ifaces(&a.engines)?;
            let (base, _scratch) = job_or_builtin(&a.fio, None)?;
            let c = compare::compare(&base, &ifaces, a.reps, all, &mut say)?;
            print_cmp(&c, a.format)
        }
        "sweep" if args.iter().any(|a| is_flag(a, "--variants") || is_flag(a, "--jobs")) => {
            study_run(parse(word, args))
        }
        "sweep" => {
            let a: SweepArgs = parse(word, args);
            if !a.from_csv.is_empty() {
                return from_csv(a);
            }
            let (interfaces, all) = parse_ifaces(a.engines.as_deref().unwrap_or("io_uring,libaio,psync"))?;
            let plan = SweepPlan {
                interfaces,
                qds: sweep::parse_qds(&a.qd)?,
                bss: sweep::parse_bss(a.bs.as_deref().unwrap_or("512,4k,32k,128k"))?,
                reps: a.reps,
                skip_unavailable: all,
            };
            let (base, _scratch) = job_or_builtin(&a.fio, Some(SHORT_RUN))?;
            let r = sweep::sweep(&base, &plan, &mut say)?;
            let files = r.write_all(&a.out)?;
            output::stdout(&r.to_text())?;
            say_wrote(&files);
            Ok(())
        }
        "overhead" if args.first().is_some_and(|a| a == "targets") => {
            let exe = std::env::current_exe().map_err(|e| Failure::io("the path of the ioswitch executable", e))?;
            let mut reenter = vec![exe.into_os_string()];
            reenter.extend(["bench", "overhead", "targets"].map(Into::into));
            let inv = targets::Invocation {
                reenter,
                profiles: std::env::temp_dir().join("ioswitch-overhead-callgrind"),
                name: "ioswitch bench overhead targets".into(),
            };
            targets::run(&inv, &args[1..]).map_err(|e| Failure::new(e.to_string()))
        }
        "overhead" => {
            let a: OverheadArgs = parse(word, args);
            let (interfaces, _) = parse_ifaces(&a.engines)?;
            let opts = OverheadOpts {
                dir: compare::default_dir(),
                file: a.file,
                interfaces,
                qds: sweep::parse_qds(&a.qd)?,
                bss: sweep::parse_bss(&a.bs)?,
                reps: a.reps,
                run_ms: a.run_ms,
                direct: a.direct,
                ..OverheadOpts::default()
            };
            let r = overhead::overhead(&opts, &mut say)?;
            match a.format {
                Format::Text => output::stdout(&r.to_text()),
                Format::Json => output::stdout(&format!("{:#}\n", r.to_json())),
            }
        }
        "membw" => membw_run(parse(word, args)),
        "plot" => {
            let a: PlotArgs = parse(word, args);
            if a.window_ms == Some(0) {
                return Err(Failure::new("--window-ms 0: a time window is at least 1 ms"));
            }
            let opts = fiolog::PlotOpts { window_ms: a.window_ms };
            let files = fiolog::plot_files(&a.logs, &a.out, &opts).map_err(|e| Failure::new(e.to_string()))?;
            for (f, n) in files {
                match n {
                    0 => say(&format!("wrote {} (its log holds no sample: the chart says \"no data\")", f.display())),
                    n => say(&format!("wrote {} ({n} samples)", f.display())),
                }
            }
            Ok(())
        }
        other => Err(Failure::new(format!(
            "ioswitch bench {other}: no such benchmark (compare, sweep, overhead, membw, plot)"
        ))),
    }
}
