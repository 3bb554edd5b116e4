//! `ioswitch bench`: fio's command line and job files, measured by ioswitch-bench and
//! reported in fio's formats.
//!
//! Everything after `bench` is read the way fio reads its command line
//! ([`ioswitch_bench::JobSet::from_args`]): `--name=j --rw=randread --bs=4k …`, job file
//! names, `--section NAME`, `--output FILE`, `--output-format normal|json|json+`,
//! `--readonly`. Three
//! options are this command's own: `--no-progress` (no status line), fio's
//! `--eta=never|auto|always`, and fio's `--parse-only` (check the jobs, run nothing).
//!
//! The first word may instead name a nested benchmark (`ioswitch bench compare …`); see
//! [`NESTED`]. `ioswitch bench` with no arguments at all is the built-in default run.

use crate::fail::{Failure, Outcome};
use crate::output;
use clap::{CommandFactory, Parser};
use ioswitch_bench::jobfile::JobSet;
use ioswitch_bench::membw;
use ioswitch_bench::report;
use ioswitch_bench::run::{self, Prepared, RunOpts};
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::Path;

const ABOUT: &str = "Measure I/O with fio's job files, options, latency definitions and reports";

const LONG_ABOUT: &str = "\
Measure I/O with fio's job files, options, latency definitions and reports.

With no arguments: the built-in comparison, 4 KiB random reads at iodepth 16 on a temporary
64 MiB file in $TMPDIR or /tmp (/var/tmp where that is tmpfs), over the interfaces
psync, io_uring, libaio, posix, thrpool, emu and nil (those this machine can run): about
15 s, one table. `ioswitch bench compare` runs the interfaces and the job you give it.

Arguments are fio's, spelled as for fio: options (--name=j --rw=randread --bs=4k …; each
--name starts a job, options before the first --name are global), job file names,
--section NAME, --output FILE, --output-format normal|json|json+, --readonly (fio's safety
flag: jobs that write or trim are refused, and no file is created, laid out, extended or
removed; everything is opened read-only). slat, clat and lat mean
what they mean in fio; the JSON has fio 3.33's fields plus an \"ioswitch\" object per job
(interface, syscalls per I/O, CPU of the whole process). An option fio has that ioswitch
does not run is an error, never ignored.

filename is a path, as in fio (filename=128m is a file named 128m). The library's other
targets keep their syntax, each colon escaped as fio escapes one: a ramdisk takes its prefix
(ramdisk\\:64m), a PCI controller is its address (0000\\:00\\:05.0, --ioengine=ioswitch).

Own options:
  --no-progress            no status line (it is shown on a terminal only, anyway)
  --eta=never|auto|always  fio's spelling of the same
  --parse-only             check the job files and options (and the interfaces each job
                           would run on) without opening, creating or running anything;
                           prints one line per job

An I/O error or a verify failure ends the job; it is reported, and the exit status is 1.
With continue_on_error (read, write, io, verify, all; EIO and EILSEQ, as fio) the job goes
on after the errors it covers, counts them (total_err, first_error), reports the first as
the job's error, and exits 0, as fio does; ignore_error=READ,WRITE,VERIFY (':'-separated
errno names or numbers per type) sets which errnos those are, and error_dump=1 writes each
error gone on after to stderr.";

const EXAMPLES: &str = "\
Examples:
  ioswitch bench --name=j --filename=/var/tmp/f --size=64m --rw=randread --bs=4k --ioengine=io_uring --iodepth=16
  ioswitch bench jobs.fio --output-format=json --output result.json
  ioswitch bench jobs.fio --section randread
  ioswitch bench --name=v --filename=f --size=16m --rw=write --verify=crc32c     # write, then check

Nested benchmarks: ioswitch bench compare|sweep|overhead|membw … (see their --help).
Plots of fio's logs (write_lat_log, write_bw_log, write_iops_log): ioswitch bench plot LOG...";

/// Words that name a nested benchmark when they come first (`ioswitch bench compare …`)
/// instead of a job file.
pub const NESTED: [&str; 5] = ["compare", "sweep", "overhead", "membw", "plot"];

/// `ioswitch bench`: clap only collects the arguments, untouched, for fio's reader.
#[derive(Parser, Debug)]
#[command(
    name = "ioswitch bench",
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = EXAMPLES,
    disable_help_flag = true
)]
pub struct BenchArgs {
    /// fio options (--name=j --rw=randread --bs=4k …) and job files, as given to fio.
    #[arg(value_name = "FIO ARGS", trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// `ioswitch bench ARGS…` straight from the process arguments (`main` hands them over
/// before clap, because fio's `--output FILE` is not the global `--output FORMAT`).
pub fn main(args: &[OsString]) -> Outcome {
    let args = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            a.to_str().map(str::to_string).ok_or_else(|| {
                Failure::new(format!("bench argument {} ({}) is not valid UTF-8", i + 1, a.to_string_lossy()))
            })
        })
        .collect::<Outcome<Vec<String>>>()?;
    run(&args)
}

/// Runs `ioswitch bench` with its arguments (everything after `bench`).
pub fn run(args: &[String]) -> Outcome {
    match args.first().map(String::as_str) {
        None => crate::bench_nested::default_run(),
        Some(word) if NESTED.contains(&word) => crate::bench_nested::nested(word, &args[1..]),
        Some(_) if args.iter().any(|a| a == "--help" || a == "-h") => help(),
        // A plain word that is no file: a misspelled nested benchmark as likely as a
        // missing job file, and the error says both.
        Some(word) if !word.starts_with('-') && !word.contains(['/', '.']) && !Path::new(word).exists() => {
            Err(Failure::new(format!(
                "'{word}' is neither a job file (there is no file of that name) nor a nested benchmark ({})",
                NESTED.join(", ")
            )))
        }
        Some(_) => fio(args),
    }
}

fn help() -> Outcome {
    let text = BenchArgs::command().render_long_help().to_string();
    output::stdout(&format!("{}\n", text.trim_end()))
}

/// This command's own options, taken out of fio's arguments.
struct Own {
    progress: bool,
    /// fio's `--parse-only`.
    parse_only: bool,
    /// The fio arguments left.
    fio_args: Vec<String>,
    /// Position (from 1) in the original arguments of each one left.
    positions: Vec<usize>,
}

fn own_options(args: &[String]) -> Outcome<Own> {
    let mut own = Own { progress: true, parse_only: false, fio_args: Vec::new(), positions: Vec::new() };
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--no-progress" {
            own.progress = false;
            continue;
        }
        if a == "--parse-only" {
            own.parse_only = true;
            continue;
        }
        if a == "--eta" || a.starts_with("--eta=") {
            let value = match a.strip_prefix("--eta=") {
                Some(v) => v.to_string(),
                None => {
                    i += 1;
                    args.get(i - 1).cloned().unwrap_or_default()
                }
            };
            own.progress = match value.as_str() {
                "never" => false,
                "auto" | "always" => true,
                other => {
                    return Err(Failure::new(format!(
                        "bench argument {}: bad value '{other}' for option 'eta': expected never, auto or always",
                        i - usize::from(!a.contains('='))
                    )))
                }
            };
            continue;
        }
        own.fio_args.push(a.clone());
        own.positions.push(i);
    }
    Ok(own)
}

/// Places in fio's reader's messages say "command line argument N", counted over the fio
/// arguments only; renumber them to the position the user typed.
fn renumber(msg: &str, positions: &[usize]) -> String {
    const PLACE: &str = "command line argument ";
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find(PLACE) {
        let (head, tail) = rest.split_at(at + PLACE.len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let n = tail[..digits].parse::<usize>().ok().and_then(|n| positions.get(n.wrapping_sub(1)).copied());
        match n {
            Some(n) => out.push_str(&n.to_string()),
            None => out.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// Where the report goes: standard output, or fio's `--output FILE`.
enum Sink {
    Stdout,
    File(File, String),
}

impl Sink {
    fn put(&mut self, text: &str) -> Outcome {
        match self {
            Sink::Stdout => output::stdout(text),
            Sink::File(f, name) => {
                f.write_all(text.as_bytes()).map_err(|e| Failure::io(format!("writing to {name}"), e))
            }
        }
    }
}

/// A run from fio arguments and job files.
fn fio(args: &[String]) -> Outcome {
    let own = own_options(args)?;
    let set = JobSet::from_args(&own.fio_args).map_err(|e| Failure::new(renumber(&e.to_string(), &own.positions)))?;
    if own.parse_only {
        return parse_only(&set, &own.positions);
    }
    let format = set.output_format;
    let mut sink = match &set.output {
        None => Sink::Stdout,
        Some(path) => {
            let name = path.display().to_string();
            let f = File::create(path).map_err(|e| Failure::io(format!("creating output file {name}"), e))?;
            Sink::File(f, name)
        }
    };
    let groups = set.group_ids();
    let mut prepared: Vec<Prepared> = Vec::with_capacity(set.jobs.len());
    let mut notes = String::new();
    for (spec, &groupid) in set.jobs.iter().zip(&groups) {
        let mut say = |msg: &str| {
            let line = format!("{}: {msg}", spec.name);
            if format.normal {
                notes.push_str(&line);
                notes.push('\n');
            } else {
                output::stderr_line(&line);
            }
        };
        let p = run::prepare(spec, groupid, &mut say)
            .map_err(|e| Failure::new(renumber(&e.to_string(), &own.positions)))?;
        prepared.push(p);
    }
    if format.normal {
        sink.put(&format!("{}{notes}", report::preamble(&prepared)))?;
    }
    let mut report = run::run(prepared, &RunOpts { progress: own.progress });
    // fio writes its logs when the jobs are done, before the report.
    run::write_logs(&report).map_err(|e| Failure::io("writing the jobs' logs", e))?;
    if report.uses_mmap() {
        // After the jobs, so that it does not disturb them: the ceiling their rate is
        // reported against.
        let caches = membw::read_caches(std::path::Path::new("/sys/devices/system/cpu"));
        let bytes = membw::default_array_bytes(&caches);
        output::stderr_line(&format!(
            "measuring the single-thread copy ceiling for the mmap/pmem job(s): memcpy of {} MiB, about 1 s",
            bytes >> 20
        ));
        report.copy_ceiling_bps = Some(membw::copy_ceiling(bytes));
    }
    if format.normal {
        sink.put(&format!("\n{}", report::text(&report)))?;
    }
    if format.json {
        sink.put(&report::json(&report, &set.global_options, format.json_plus).render())?;
    }
    let mut errors = report::errors(&report);
    match errors.pop() {
        None => Ok(()),
        Some(last) => {
            for e in errors {
                output::stderr_line(&format!("ioswitch: error: {e}"));
            }
            Err(Failure::new(last))
        }
    }
}

/// fio's `--parse-only`: every check that needs no device (the job files, each job's
/// options together, the interfaces and tunables its engine maps to), then one line per
/// job; nothing is opened, created or run.
fn parse_only(set: &JobSet, positions: &[usize]) -> Outcome {
    let mut out = String::new();
    for spec in &set.jobs {
        let (opts, mode) = run::engine_opts(spec).map_err(|e| Failure::new(renumber(&e.to_string(), positions)))?;
        opts.validate().map_err(|e| Failure::new(format!("job '{}': {e}", spec.name)))?;
        let at = spec.section.as_ref().map(|l| format!(" ({l})")).unwrap_or_default();
        out.push_str(&format!(
            "{}{at}: rw={}, ioengine={}, {} interface, options '{}'\n",
            spec.name,
            spec.rw,
            spec.ioengine,
            match mode {
                ioswitch_bench::engine::Mode::Sync => "sync",
                ioswitch_bench::engine::Mode::Async => "async",
            },
            opts
        ));
    }
    out.push_str(&format!("{} job(s) parsed, none run (--parse-only)\n", set.jobs.len()));
    output::stdout(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn own_options_are_taken_out_and_positions_kept() {
        let own = own_options(&strings(&["--no-progress", "--name=j", "--eta", "never", "--bs=4k"])).unwrap();
        assert!(!own.progress);
        assert_eq!(own.fio_args, ["--name=j", "--bs=4k"]);
        assert_eq!(own.positions, [2, 5]);
        let own = own_options(&strings(&["--eta=always", "job.fio"])).unwrap();
        assert!(own.progress);
        assert_eq!(own.positions, [2]);
        let e = own_options(&strings(&["--name=j", "--eta=sometimes"])).err().unwrap().to_string();
        assert!(e.contains("argument 2") && e.contains("sometimes"), "{e}");
    }

    #[test]
    fn argument_numbers_in_messages_follow_what_was_typed() {
        assert_eq!(
            renumber("command line argument 2: unknown option 'x'", &[2, 4]),
            "command line argument 4: unknown option 'x'"
        );
        assert_eq!(renumber("job.fio:3: unknown option 'x'", &[2]), "job.fio:3: unknown option 'x'");
        assert_eq!(renumber("command line argument 9: y", &[1]), "command line argument 9: y");
    }
}
