//! `ioswitch bench` with no arguments (the built-in comparison) and the nested
//! benchmarks `compare`, `sweep` and `overhead`.

use crate::fail::{Failure, Outcome};
use crate::output;
use clap::Parser;
use ioswitch_bench::compare::{self, Comparison, Iface};
use ioswitch_bench::jobfile::{JobSet, JobSpec};
use ioswitch_bench::overhead::{self, targets, OverheadOpts};
use ioswitch_bench::sweep::{self, SweepPlan};
use std::path::PathBuf;

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
    say(&format!(
        "ioswitch bench: built-in comparison of every interface, 4 KiB random reads on a temporary file in {} \
         (about 15 s; `ioswitch bench --help` for fio-style jobs)",
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
    about = "Queue depth × block size grid over interfaces: CSV, JSON and SVG plots",
    after_help = "\
Writes sweep.csv, sweep.json, lat-vs-qd.svg, lat-vs-bs.svg and iops-vs-qd.svg into --out.

Example:
  ioswitch bench sweep --engines io_uring,libaio,psync --qd 1,2,4,8,16,32 --bs 512,4k,32k,128k --out sweep/"
)]
struct SweepArgs {
    /// Interfaces: a comma list or `all`.
    #[arg(long, default_value = "io_uring,libaio,psync")]
    engines: String,
    /// Queue depths.
    #[arg(long, default_value = "1,2,4,8,16,32")]
    qd: String,
    /// Block sizes (4k, 128k, …).
    #[arg(long, default_value = "512,4k,32k,128k")]
    bs: String,
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

/// Parses a nested benchmark's options; `--help` prints and exits 0, a usage error
/// prints and exits 2 (clap's convention, as for every other subcommand).
fn parse<T: Parser>(word: &str, args: &[String]) -> T {
    let argv = std::iter::once(format!("ioswitch bench {word}")).chain(args.iter().cloned());
    T::try_parse_from(argv).unwrap_or_else(|e| e.exit())
}

/// Runs `ioswitch bench WORD ARGS…` for WORD in compare, sweep, overhead.
pub fn nested(word: &str, args: &[String]) -> Outcome {
    match word {
        "compare" => {
            let a: CompareArgs = parse(word, args);
            let (ifaces, all) = parse_ifaces(&a.engines)?;
            let scratch;
            let base = if a.fio.is_empty() {
                scratch = Scratch::new()?;
                compare::default_job(&scratch.0.join("data"))
            } else {
                base_job(&a.fio)?
            };
            let c = compare::compare(&base, &ifaces, a.reps, all, &mut say)?;
            print_cmp(&c, a.format)
        }
        "sweep" => {
            let a: SweepArgs = parse(word, args);
            let (interfaces, all) = parse_ifaces(&a.engines)?;
            let plan = SweepPlan {
                interfaces,
                qds: sweep::parse_qds(&a.qd)?,
                bss: sweep::parse_bss(&a.bs)?,
                reps: a.reps,
                skip_unavailable: all,
            };
            let scratch;
            let base = if a.fio.is_empty() {
                scratch = Scratch::new()?;
                let mut j = compare::default_job(&scratch.0.join("data"));
                j.runtime = Some(std::time::Duration::from_millis(300));
                j
            } else {
                base_job(&a.fio)?
            };
            let r = sweep::sweep(&base, &plan, &mut say)?;
            let files = r.write_all(&a.out)?;
            output::stdout(&r.to_text())?;
            for f in files {
                say(&format!("wrote {}", f.display()));
            }
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
            targets::run(&inv, &args[1..]).map_err(Failure::new)
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
        other => Err(Failure::new(format!("ioswitch bench {other}: no such benchmark (compare, sweep, overhead)"))),
    }
}
