//! `ioswitch`: devices and I/O from the command line, over any I/O interface.
//!
//! This file parses arguments and shows results; the work is done by the library, called
//! from `info` (info, enum) and `read_write` (read, write).

mod admin;
mod bench;
mod bench_nested;
mod driver;
mod fail;
mod info;
mod interfaces;
mod output;
mod read_write;
mod spec_out;
mod zone;

use clap::{Args, Parser, Subcommand};
use fail::Outcome;
use ioswitch::Opts;
use output::Format;
use read_write::{Length, Start, Transfer};
use std::process::ExitCode;

const URI_HELP: &str = "\
The device: a path, or a size for a ramdisk.
  a regular file       ./disk.img, /var/tmp/data (create it with --opts create=1,size=64MiB)
  a block device       /dev/vda, /dev/loop0
  an NVMe namespace    /dev/nvme0n1 (block device), /dev/ng0n1 (generic char device)
  persistent memory    /dev/dax0.0 (devdax), a file on a DAX file system (--opts sync=pmem)
  a ramdisk            1GiB, 64m, ramdisk:512MiB (memory of this process: it lives only
                       as long as the command, so writes to it are gone when it ends)
A file whose name looks like a size is reached as ./1GiB.";

const SIZE_NOTE: &str = "Sizes take units: 4096, 4k, 512KiB, 1m, 2GiB (k = 1024).";

fn opts_help() -> String {
    let width = ioswitch::opts::KEYS.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut s = String::from(
        "Library options: comma-separated key=value items, e.g. \"async=io_uring,direct=1\".\n\
         A boolean key alone means key=1. Interfaces not named get the device kind's default\n\
         (`ioswitch info URI` shows which); one that cannot serve the device is an error.\n\
         read, idfy, log, feature get and zone report open the device read-only (rdonly=1)\n\
         unless these options ask for a write mode (wronly, create, truncate, size); info\n\
         opens it read-only where the read-write open is refused, saying so.\n\
         Keys:\n",
    );
    for (key, meaning) in ioswitch::opts::KEYS {
        s.push_str(&format!("  {key:<width$}  {meaning}\n"));
    }
    s.truncate(s.trim_end().len());
    s
}

const ABOUT: &str = "One API for NVMe and block/file I/O over every Linux I/O interface";

const TOP_EXAMPLES: &str = "\
Examples:
  ioswitch enum
  ioswitch info /dev/vda
  ioswitch info 1GiB --output json
  ioswitch write disk.img --opts create=1,size=8MiB --slba 0 --data payload.bin
  ioswitch read disk.img --opts async=libaio,direct=1 --slba 0 --nlb 2048 --out back.bin

`ioswitch <command> --help` explains URIs, the --opts keys and each command's options.";

const INFO_EXAMPLES: &str = "\
Examples:
  ioswitch info /dev/nvme0n1
  ioswitch info disk.img --opts direct=1          # LBA size becomes the direct-I/O granularity
  ioswitch info 64MiB --output yaml
  ioswitch info disk.img --opts async=libaio      # which interfaces serve it, or why not

The device is opened read-write, so that info reports what writes would meet (\"writes:
refused: ... is mounted on ...\"); where the read-write open is refused (no write permission,
an immutable file, a read-only file system) and --opts names no open mode, it is opened
read-only instead, and info says so.";

const WRITE_EXAMPLES: &str = "\
Examples:
  ioswitch write disk.img --opts create=1,size=8MiB --slba 0 --data payload.bin
  head -c 4096 /dev/urandom | ioswitch write disk.img --offset 1MiB --data -
  ioswitch write /dev/loop0 --opts async=io_uring,direct=1 --slba 2048 --data blocks.bin
  ioswitch write disk.img --offset 0 --data big.bin --sync --chunk 128k

--slba writes NVM write commands and needs whole LBAs of data; --offset writes the
byte-addressed file commands and takes any length. A regular file does not grow by
writes: --opts size=N extends it at open. Sizes take units: 4096, 4k, 512KiB, 1m, 2GiB.
Data is checked whole before the first command, except standard input or a pipe longer
than 16MiB: it is written as it is read, so data that runs past the device's end, or
ends in part of an LBA with --slba, is found at its end (the error says what was written).";

const READ_EXAMPLES: &str = "\
Examples:
  ioswitch read disk.img --slba 0 --nlb 8 --out - | xxd | head
  ioswitch read /dev/vda --opts async=libaio,direct=1 --offset 0 --length 1MiB --out mbr.bin
  ioswitch read disk.img --opts async=thrpool,threads=8 --slba 0 --length 64MiB --out copy --depth 32

--slba reads with NVM read commands (whole LBAs); --offset with byte-addressed file
commands (any length). Sizes take units: 4096, 4k, 512KiB, 1m, 2GiB.";

/// The `ioswitch` command line.
#[derive(Parser)]
#[command(name = "ioswitch", version, about = ABOUT, after_help = TOP_EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Output format: text for people, json/yaml for scripts.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Subcommand)]
enum Command {
    /// Show a device's kind, interfaces, geometry and identity.
    #[command(after_long_help = INFO_EXAMPLES)]
    Info(DevArgs),
    /// Write data to a device from a file or standard input.
    #[command(after_long_help = WRITE_EXAMPLES)]
    Write(WriteArgs),
    /// Read from a device into a file or standard output.
    #[command(after_long_help = READ_EXAMPLES)]
    Read(ReadArgs),
    /// List the block and NVMe devices of this machine, and its PCI NVMe controllers.
    #[command(name = "enum", after_long_help = "Example:\n  ioswitch enum --output json")]
    Enum,
    /// List the I/O interfaces of this build: which kinds of device each serves (and why
    /// not), the defaults, their tunables and the fio engines that run on them.
    #[command(after_long_help = "Examples:\n  ioswitch interfaces\n  ioswitch interfaces --output json")]
    Interfaces,
    /// Identify a controller, a namespace, or their command set specific data (ZNS).
    #[command(after_long_help = admin::IDFY_EXAMPLES)]
    Idfy(admin::IdfyArgs),
    /// Read a log page: health (SMART), error, firmware slots, changed namespaces, raw.
    #[command(after_long_help = admin::LOG_EXAMPLES)]
    Log(admin::LogArgs),
    /// Get or set a feature (arbitration, power, temperature threshold, write cache, queues).
    #[command(subcommand, after_long_help = admin::FEATURE_EXAMPLES)]
    Feature(admin::FeatureCmd),
    /// Zoned namespaces: report zones, open/close/finish/reset/offline them, append.
    #[command(subcommand, after_long_help = zone::ZONE_EXAMPLES)]
    Zone(zone::ZoneCmd),
    /// Send a raw admin or I/O command built from its dwords; prints the completion.
    #[command(subcommand, after_long_help = admin::PASSTHRU_EXAMPLES)]
    Passthru(admin::PassthruCmd),
    /// Measure I/O with fio's options, job files and reports (`ioswitch bench --help`).
    Bench(bench::BenchArgs),
    /// Move a PCI NVMe controller between kernel drivers (nvme, vfio-pci, uio_pci_generic).
    #[command(subcommand, after_long_help = driver::DRIVER_EXAMPLES)]
    Driver(driver::DriverCmd),
}

/// A device and how to open it.
#[derive(Args)]
struct DevArgs {
    /// Device: a path (file, block device, /dev/nvme0n1, /dev/ng0n1) or a ramdisk size (1GiB).
    #[arg(value_name = "URI", long_help = URI_HELP)]
    uri: String,
    /// Library options, e.g. "async=io_uring,direct=1" (--help lists the keys).
    #[arg(long, value_name = "STRING", default_value = "", hide_default_value = true, long_help = opts_help())]
    opts: String,
}

/// Where a request starts: a byte offset or an LBA.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct StartArgs {
    /// Byte offset; the I/O uses byte-addressed file commands. Takes units (4k, 1MiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, allow_negative_numbers = true)]
    offset: Option<u64>,
    /// Starting LBA; the I/O uses NVM read/write commands on the device's namespace.
    #[arg(long, value_name = "LBA", value_parser = parse_count, allow_negative_numbers = true)]
    slba: Option<u64>,
}

impl StartArgs {
    fn start(&self) -> Start {
        match (self.offset, self.slba) {
            (_, Some(s)) => Start::Slba(s),
            (o, None) => Start::Offset(o.unwrap_or(0)),
        }
    }
}

/// How the commands are run.
#[derive(Args)]
struct TransferArgs {
    /// Use the sync interface, one command at a time, instead of the async queue.
    #[arg(long)]
    sync: bool,
    /// Commands in flight on the async interface.
    #[arg(long, value_name = "N", default_value_t = 8, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(ioswitch::queue::MAX_DEPTH)))]
    depth: u32,
    /// Largest command, in bytes [default: the smaller of 1MiB and the device's max transfer].
    #[arg(long, value_name = "BYTES", value_parser = parse_nonzero_size, allow_negative_numbers = true)]
    chunk: Option<u64>,
    /// Show a progress line on stderr even when stderr is no terminal (on a terminal it is
    /// shown anyway).
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,
    /// No progress line.
    #[arg(long, overrides_with = "progress")]
    no_progress: bool,
}

impl TransferArgs {
    fn transfer(&self) -> Transfer {
        let progress = match (self.progress, self.no_progress) {
            (true, _) => read_write::Progress::Always,
            (_, true) => read_write::Progress::Never,
            _ => read_write::Progress::Auto,
        };
        Transfer { sync: self.sync, depth: self.depth, chunk: self.chunk, progress }
    }
}

#[derive(Args)]
#[command(after_help = SIZE_NOTE)]
struct WriteArgs {
    #[command(flatten)]
    dev: DevArgs,
    #[command(flatten)]
    start: StartArgs,
    /// File holding the data to write; - reads standard input.
    #[arg(long, value_name = "FILE")]
    data: String,
    #[command(flatten)]
    transfer: TransferArgs,
}

/// How much to read.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct LengthArgs {
    /// Bytes to read. Takes units (4k, 1MiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_nonzero_size, allow_negative_numbers = true)]
    length: Option<u64>,
    /// Logical blocks to read.
    #[arg(long, value_name = "N", value_parser = parse_nonzero_count, allow_negative_numbers = true)]
    nlb: Option<u64>,
}

#[derive(Args)]
#[command(after_help = SIZE_NOTE)]
struct ReadArgs {
    #[command(flatten)]
    dev: DevArgs,
    #[command(flatten)]
    start: StartArgs,
    #[command(flatten)]
    length: LengthArgs,
    /// File to write what is read to; - writes standard output (and nothing else).
    #[arg(long, value_name = "FILE")]
    out: String,
    #[command(flatten)]
    transfer: TransferArgs,
}

fn parse_size(s: &str) -> Result<u64, String> {
    ioswitch::units::parse_size(s)
}

fn parse_nonzero_size(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("must be more than 0 bytes".into()),
        n => Ok(n),
    }
}

/// A count: decimal, or hexadecimal with 0x.
fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| format!("{s:?} is not a whole number"))
}

fn parse_nonzero_count(s: &str) -> Result<u64, String> {
    match parse_count(s)? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
}

fn opts(s: &str) -> Outcome<Opts> {
    Ok(s.parse::<Opts>()?)
}

fn run(cli: Cli) -> Outcome {
    let format = cli.output;
    match cli.command {
        Command::Info(d) => info::info(&d.uri, &opts(&d.opts)?, format),
        Command::Enum => info::list(format),
        Command::Interfaces => interfaces::interfaces(format),
        Command::Idfy(a) => admin::idfy(&a, format),
        Command::Log(a) => admin::log_page(&a, format),
        Command::Feature(c) => admin::feature(&c, format),
        Command::Zone(c) => zone::zone(&c, format),
        Command::Passthru(c) => admin::passthru(&c, format),
        Command::Bench(b) => bench::run(&b.args),
        Command::Driver(c) => driver::driver(&c, format),
        Command::Write(w) => {
            let o = opts(&w.dev.opts)?;
            read_write::write(&w.dev.uri, &o, w.start.start(), &w.data, &w.transfer.transfer(), format)
        }
        Command::Read(r) => {
            let o = opts(&r.dev.opts)?;
            let length = match (r.length.length, r.length.nlb) {
                (_, Some(n)) => Length::Lbas(n),
                (b, None) => Length::Bytes(b.unwrap_or(0)),
            };
            read_write::read(&r.dev.uri, &o, r.start.start(), length, &r.out, &r.transfer.transfer(), format)
        }
    }
}

fn main() -> ExitCode {
    // `ioswitch bench` reads fio's arguments verbatim (fio's `--output FILE` is not the
    // global `--output FORMAT`), so they are handed over before clap sees them.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let outcome = match args.get(1) {
        Some(word) if word == "bench" => bench::main(&args[2..]),
        _ => run(Cli::parse()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) if f.broken_pipe => ExitCode::FAILURE,
        Err(f) => {
            output::stderr_line(&format!("ioswitch: error: {f}"));
            ExitCode::FAILURE
        }
    }
}
