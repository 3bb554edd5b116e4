//! `ioswitch read` and `ioswitch write`: a request split into commands no larger than the
//! device's max transfer, run through a queue with several in flight (or one at a time on
//! the sync interface with `--sync`).
//!
//! Everything that can be checked is checked before the first command: the LBA multiple,
//! the range against the device's size, the chunk size. A request that cannot finish
//! therefore changes nothing, and `read` creates its output file only once the request is
//! known to be valid. The one exception is `write` from standard input or a pipe longer
//! than [`READ_AHEAD`]: it is streamed, so its length, and whether it fits, is known only
//! at its end (the error then says what was written).

use crate::fail::{Failure, Outcome};
use crate::output::{self, human, human_exact, Format};
use ioswitch::{Buffer, Cmd, Completion, DevKind, Device, Error, Geometry, Opts, Queue, Rejected};
use ioswitch_bench::run::human_bytes;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// Largest command the CLI issues unless `--chunk` says otherwise (the device's max
/// transfer caps it further): big enough to keep any device busy at depth 8, small enough
/// that the buffers of a deep queue stay a few MiB.
const DEFAULT_CHUNK: u64 = 1 << 20;

/// Most logical blocks one NVM read or write carries (NLB is 16 bits, 0-based).
const MAX_NLB: u64 = 65536;

/// How much of standard input (or a pipe) `write` reads before the first command. Data
/// that ends within it is checked whole before any command, as a regular file is; longer
/// data is streamed a command at a time, so memory stays bounded (this plus the queue's
/// buffers) whatever its length.
const READ_AHEAD: u64 = 16 << 20;

/// Where a request starts, which also picks the command set.
#[derive(Clone, Copy, Debug)]
pub enum Start {
    /// A byte offset: file commands (`Cmd::fs_read` / `Cmd::fs_write`).
    Offset(u64),
    /// A logical block: NVM commands (`Cmd::read` / `Cmd::write`).
    Slba(u64),
}

/// How much `read` moves.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    /// Bytes.
    Bytes(u64),
    /// Logical blocks.
    Lbas(u64),
}

/// How the commands are run.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// One command at a time on the sync interface, instead of a queue.
    pub sync: bool,
    /// Commands in flight on the async interface.
    pub depth: u32,
    /// Largest command in bytes; `None`: the smaller of 1 MiB and the max transfer.
    pub chunk: Option<u64>,
    /// Whether a progress line is shown on stderr.
    pub progress: Progress,
}

/// When `read` and `write` show a progress line on stderr (as `ioswitch bench` shows its
/// status line): on a terminal, always (`--progress`), or never (`--no-progress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// When stderr is a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl Progress {
    fn shown(self) -> bool {
        use std::io::IsTerminal;
        match self {
            Progress::Auto => io::stderr().is_terminal(),
            Progress::Always => true,
            Progress::Never => false,
        }
    }
}

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// A [`Side`] that counts the bytes of the completed commands and redraws one progress
/// line on `out` (`\r`, erase line): at the first completion, then at most every
/// `every`; erased when dropped, so the summary or an error starts on a clean line.
struct Meter<'a, W: Write> {
    inner: &'a mut dyn Side,
    out: W,
    op: &'static str,
    /// Bytes of the whole request; `None` where that is known only at the end (streamed
    /// standard input).
    total: Option<u64>,
    moved: u64,
    t0: Instant,
    every: Duration,
    last: Option<Instant>,
}

impl<'a, W: Write> Meter<'a, W> {
    fn new(inner: &'a mut dyn Side, out: W, op: &'static str, total: Option<u64>, every: Duration) -> Self {
        Meter { inner, out, op, total, moved: 0, t0: Instant::now(), every, last: None }
    }

    /// `write: 25.0% done, 1MiB of 4MiB [8.0MiB/s] [eta 00m:01s]`, or without a known
    /// total `write: 1.0MiB done [8.0MiB/s]`.
    fn line(&self, elapsed: Duration) -> String {
        let rate = self.moved as f64 / elapsed.as_secs_f64().max(1e-9);
        let Some(total) = self.total else {
            return format!("{}: {} done [{}/s]", self.op, human_bytes(self.moved as f64), human_bytes(rate));
        };
        let frac = if total == 0 { 1.0 } else { self.moved as f64 / total as f64 };
        let eta = if rate > 0.0 { (total - self.moved.min(total)) as f64 / rate } else { 0.0 };
        format!(
            "{}: {:.1}% done, {} of {} [{}/s] [eta {:02}m:{:02}s]",
            self.op,
            frac * 100.0,
            human_bytes(self.moved as f64),
            human_bytes(total as f64),
            human_bytes(rate),
            (eta as u64) / 60,
            (eta as u64) % 60
        )
    }
}

impl<W: Write> Side for Meter<'_, W> {
    fn fill(&mut self, i: u64, buf: &mut [u8]) -> Outcome<usize> {
        self.inner.fill(i, buf)
    }

    fn done(&mut self, i: u64, len: usize, buf: Buffer, free: &mut Vec<Buffer>) -> Outcome {
        self.inner.done(i, len, buf, free)?;
        self.moved += len as u64;
        let now = Instant::now();
        if self.last.is_none_or(|l| now.duration_since(l) >= self.every) {
            self.last = Some(now);
            let line = self.line(now.duration_since(self.t0));
            // A progress line that cannot be written is no reason to stop the transfer.
            let _ = write!(self.out, "\r\x1b[K{line}");
            let _ = self.out.flush();
        }
        Ok(())
    }
}

impl<W: Write> Drop for Meter<'_, W> {
    fn drop(&mut self) {
        if self.last.is_some() {
            let _ = write!(self.out, "\r\x1b[K");
            let _ = self.out.flush();
        }
    }
}

/// What a plan needs to know of the device.
#[derive(Clone, Copy)]
struct Target<'a> {
    uri: &'a str,
    kind: DevKind,
    nsid: u32,
    geo: &'a Geometry,
}

impl<'a> Target<'a> {
    fn of(dev: &'a Device) -> Target<'a> {
        Target { uri: dev.uri(), kind: dev.ident().kind, nsid: dev.ident().nsid, geo: dev.geometry() }
    }
}

/// A request cut into commands.
#[derive(Debug)]
struct Plan {
    uri: String,
    kind: DevKind,
    start: Start,
    total: u64,
    chunk: u64,
    nsid: u32,
    lba: u64,
    write: bool,
    /// The data's length is known only at its end (streamed standard input): `total` is
    /// the room up to the device's end until [`cut`](Plan::cut) sets it.
    open_ended: bool,
    /// Bytes at the end of open-ended data that were not written: the part of an LBA
    /// that `--slba` cannot write.
    unwritten: u64,
}

fn lbas(n: u64) -> &'static str {
    if n == 1 {
        "LBA"
    } else {
        "LBAs"
    }
}

impl Plan {
    /// Checks the request against the device and cuts it into commands.
    fn new(dev: &Target, start: Start, total: u64, chunk: Option<u64>, write: bool) -> Outcome<Plan> {
        let Target { uri, kind, nsid, geo: g } = *dev;
        let lba = g.lba_size as u64;
        if lba == 0 || g.max_transfer < lba {
            return Err(Failure::new(format!(
                "{uri}: this {kind} has no data geometry (LBA size {lba}, max transfer {}): it carries no reads or writes",
                g.max_transfer
            )));
        }
        if total == 0 {
            let what = if write { "the data is empty: nothing to write" } else { "nothing to read: the length is 0" };
            return Err(Failure::new(what));
        }
        let user_chunk = chunk.is_some();
        let mut chunk = match chunk {
            Some(c) if c > g.max_transfer => {
                return Err(Failure::new(format!(
                    "--chunk {} is larger than the max transfer of {uri}, {}",
                    human_exact(c),
                    human_exact(g.max_transfer)
                )))
            }
            Some(c) => c,
            None => g.max_transfer.min(DEFAULT_CHUNK.max(lba)),
        };
        let (first, end, limit, what, unit) = match start {
            Start::Slba(slba) => {
                if total % lba != 0 {
                    let msg = if write {
                        format!(
                            "the data is {total} bytes, not a whole number of {lba}-byte LBAs ({} {} and {} bytes): \
                             --slba writes whole LBAs; pad the data, or write by byte with --offset",
                            total / lba,
                            lbas(total / lba),
                            total % lba
                        )
                    } else {
                        format!(
                            "--length {total} is not a whole number of {lba}-byte LBAs: \
                             give --nlb, or read by byte with --offset"
                        )
                    };
                    return Err(Failure::new(msg));
                }
                if chunk % lba != 0 {
                    if user_chunk {
                        return Err(Failure::new(format!(
                            "--chunk {chunk} is not a whole number of the {lba}-byte LBAs that --slba moves"
                        )));
                    }
                    chunk -= chunk % lba;
                }
                chunk = chunk.min(MAX_NLB * lba);
                (slba, slba.checked_add(total / lba), g.nlbas, "LBA range", "LBAs")
            }
            Start::Offset(offset) => (offset, offset.checked_add(total), g.bytes, "byte range", "bytes"),
        };
        let in_range = matches!(end, Some(e) if e <= limit);
        if !in_range {
            let e =
                Error::OutOfRange { dev: uri.into(), what, start: first, end: end.unwrap_or(u64::MAX), limit, unit };
            let f = Failure::from(e);
            return Err(if write && kind == DevKind::File {
                f.hint("writes do not grow a regular file: --opts size=N extends it at open")
            } else {
                f
            });
        }
        Ok(Plan { uri: uri.into(), kind, start, total, chunk, nsid, lba, write, open_ended: false, unwritten: 0 })
    }

    fn commands(&self) -> u64 {
        self.total.div_ceil(self.chunk)
    }

    /// The data ended `got` bytes into command `i`, the last one filled: the request ends
    /// there, cut to whole LBAs for `--slba` (the rest is kept in `unwritten`).
    fn cut(&mut self, i: u64, got: u64) {
        let end = i * self.chunk + got;
        self.unwritten = if matches!(self.start, Start::Slba(_)) { end % self.lba } else { 0 };
        self.total = end - self.unwritten;
    }

    /// Puts command `i`'s data into `buf` through `side`, then tells whether there is a
    /// command `i`: an open-ended request ends where its data ends ([`cut`](Plan::cut)).
    fn fill(&mut self, i: u64, buf: &mut [u8], side: &mut dyn Side) -> Outcome<bool> {
        let want = self.len(i) as usize;
        let got = side.fill(i, &mut buf[..want])?;
        if got < want {
            self.cut(i, got as u64);
        }
        Ok(i < self.commands())
    }

    /// Bytes of command `i`.
    fn len(&self, i: u64) -> u64 {
        self.chunk.min(self.total - i * self.chunk)
    }

    /// Command `i`. Its block count is 1..=65536 by construction of `chunk`.
    fn cmd(&self, i: u64) -> Cmd {
        let (rel, len) = (i * self.chunk, self.len(i));
        match (self.start, self.write) {
            (Start::Offset(o), false) => Cmd::fs_read(o + rel, len),
            (Start::Offset(o), true) => Cmd::fs_write(o + rel, len),
            (Start::Slba(s), false) => Cmd::read(self.nsid, s + rel / self.lba, (len / self.lba) as u32),
            (Start::Slba(s), true) => Cmd::write(self.nsid, s + rel / self.lba, (len / self.lba) as u32),
        }
    }

    /// Command `i` for messages: `NVM write of LBAs [0, 2048)`.
    fn describe(&self, i: u64) -> String {
        let (rel, len) = (i * self.chunk, self.len(i));
        let name = self.cmd(i).describe();
        match self.start {
            Start::Offset(o) => format!("{name} of bytes [{}, {})", o + rel, o + rel + len),
            Start::Slba(s) => {
                let first = s + rel / self.lba;
                format!("{name} of LBAs [{first}, {})", first + len / self.lba)
            }
        }
    }

    /// Checks a finished command: its status, and for devices whose interfaces report
    /// bytes moved, that all of them moved.
    fn check(&self, i: u64, status: ioswitch::Status, result: u64) -> Outcome {
        if !status.is_ok() {
            return Err(self.failed(i, status));
        }
        let len = self.len(i);
        if matches!(self.kind, DevKind::File | DevKind::Block | DevKind::Ramdisk) && result != len {
            return Err(Failure::new(format!("{}: {} moved {result} of {len} bytes", self.uri, self.describe(i))));
        }
        Ok(())
    }

    /// The error of command `i` that finished with `status`.
    fn failed(&self, i: u64, status: ioswitch::Status) -> Failure {
        Error::Command { dev: self.uri.clone(), what: self.describe(i), status }.into()
    }

    /// The size of the buffers: one command's worth, or the whole request when smaller.
    fn buffer_len(&self) -> Outcome<usize> {
        usize::try_from(self.chunk.min(self.total))
            .map_err(|_| Failure::new(format!("a {}-byte buffer does not fit in memory", self.chunk)))
    }
}

/// What happens to each command's data on either side of the device.
trait Side {
    /// Puts command `i`'s data into `buf` before it is submitted (writes); returns how
    /// many bytes it put there, fewer than `buf.len()` only where open-ended data ends.
    fn fill(&mut self, i: u64, buf: &mut [u8]) -> Outcome<usize>;
    /// Takes command `i`'s buffer, `len` bytes of it valid, once it has completed; hands
    /// buffers it is done with back to `free`.
    fn done(&mut self, i: u64, len: usize, buf: Buffer, free: &mut Vec<Buffer>) -> Outcome;
}

/// Runs the plan through a queue, up to its capacity in flight.
fn run_async(dev: &Device, q: &mut Queue, plan: &mut Plan, side: &mut dyn Side) -> Outcome {
    let slots = u64::from(q.capacity()).min(plan.commands());
    let buf_len = plan.buffer_len()?;
    let mut free = Vec::new();
    for _ in 0..slots {
        free.push(dev.alloc(buf_len)?);
    }
    let uri = plan.uri.clone();
    let lost = || Failure::new(format!("{uri}: the queue did not hand a buffer back"));
    // A command the queue refused as Busy, kept (data filled) until a slot frees.
    let mut staged: Option<(u64, Buffer)> = None;
    let mut reaped: Vec<Completion> = Vec::with_capacity(slots as usize);
    let (mut next, mut finished) = (0u64, 0u64);
    while finished < plan.commands() {
        loop {
            let (i, buf) = match staged.take() {
                Some(s) => s,
                None if next < plan.commands() => {
                    let Some(mut buf) = free.pop() else { break };
                    if !plan.fill(next, &mut buf, side)? {
                        free.push(buf);
                        break;
                    }
                    next += 1;
                    (next - 1, buf)
                }
                None => break,
            };
            match q.submit(&plan.cmd(i), buf.into(), i) {
                Ok(()) => {}
                Err(Rejected { error: Error::Busy { .. }, data }) => {
                    staged = Some((i, data.into_one().ok_or_else(lost)?));
                    break;
                }
                Err(r) => return Err(r.into()),
            }
        }
        // Open-ended data may have ended at a command's start with every command done.
        if finished == plan.commands() {
            break;
        }
        if q.outstanding() == 0 {
            return Err(Failure::new(format!(
                "{}: the {} queue took no command and has none in flight",
                plan.uri,
                q.interface()
            )));
        }
        q.wait(1, |c| reaped.push(c))?;
        for c in reaped.drain(..) {
            let i = c.tag;
            if i >= next {
                return Err(Failure::new(format!("{}: a completion came back with unknown tag {i}", plan.uri)));
            }
            plan.check(i, c.status, c.result)?;
            let buf = c.data.into_one().ok_or_else(lost)?;
            side.done(i, plan.len(i) as usize, buf, &mut free)?;
            finished += 1;
        }
    }
    Ok(())
}

/// Runs the plan one command at a time on the sync interface.
fn run_sync(dev: &Device, plan: &mut Plan, side: &mut dyn Side) -> Outcome {
    let mut free = vec![dev.alloc(plan.buffer_len()?)?];
    let mut i = 0;
    while i < plan.commands() {
        let mut buf = free.pop().ok_or_else(|| Failure::new("the output kept every buffer"))?;
        if !plan.fill(i, &mut buf, side)? {
            break;
        }
        let len = plan.len(i) as usize;
        let result = match dev.pass(&plan.cmd(i), std::slice::from_mut(&mut buf)) {
            Ok(r) => r,
            Err(Error::Command { status, .. }) => return Err(plan.failed(i, status)),
            Err(e) => return Err(e.into()),
        };
        plan.check(i, ioswitch::Status::OK, result)?;
        side.done(i, len, buf, &mut free)?;
        i += 1;
    }
    Ok(())
}

/// What a finished `read` or `write` reports.
#[derive(Serialize)]
struct Summary {
    op: &'static str,
    uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slba: Option<u64>,
    bytes: u64,
    commands: u64,
    chunk: u64,
    interface: String,
    mode: &'static str,
    depth: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    syscalls: Option<u64>,
}

impl Summary {
    fn text(&self) -> String {
        let (verb, prep) = if self.op == "write" { ("wrote", "to") } else { ("read", "from") };
        let at = match (self.offset, self.slba) {
            (_, Some(s)) => format!("LBA {s}"),
            (o, None) => format!("byte offset {}", o.unwrap_or(0)),
        };
        let how = match self.syscalls {
            Some(s) => format!("async, depth {}, {s} syscalls", self.depth),
            None => "sync".into(),
        };
        format!(
            "ioswitch: {verb} {} {prep} {} at {at}: {} {} of up to {} via {} ({how})",
            human_exact(self.bytes),
            self.uri,
            self.commands,
            if self.commands == 1 { "command" } else { "commands" },
            human(self.chunk),
            self.interface
        )
    }
}

/// Runs the plan on the interface `t` asks for and returns the summary.
fn execute(dev: &Device, plan: &mut Plan, t: &Transfer, side: &mut dyn Side) -> Outcome<Summary> {
    let op = if plan.write { "write" } else { "read" };
    let mut meter;
    let side: &mut dyn Side = if t.progress.shown() {
        let total = (!plan.open_ended).then_some(plan.total);
        meter = Meter::new(side, io::stderr(), op, total, PROGRESS_EVERY);
        &mut meter
    } else {
        side
    };
    let ifaces = dev.interfaces();
    let no_iface =
        |role: &str| Failure::new(format!("{} is a {}: it has no {role} interface", dev.uri(), dev.ident().kind));
    let (interface, mode, depth, syscalls) = if t.sync {
        let name = ifaces.sync.ok_or_else(|| no_iface("sync"))?.to_string();
        run_sync(dev, plan, side)?;
        (name, "sync", 1, None)
    } else {
        ifaces.r#async.ok_or_else(|| no_iface("async"))?;
        let depth = u64::from(t.depth).min(plan.commands()) as u32;
        let mut q = dev.queue(depth)?;
        run_async(dev, &mut q, plan, side)?;
        (q.interface().to_string(), "async", depth, Some(q.stats().syscalls))
    };
    let (offset, slba) = match plan.start {
        Start::Offset(o) => (Some(o), None),
        Start::Slba(s) => (None, Some(s)),
    };
    Ok(Summary {
        op: if plan.write { "write" } else { "read" },
        uri: plan.uri.clone(),
        offset,
        slba,
        bytes: plan.total,
        commands: plan.commands(),
        chunk: plan.chunk.min(plan.total),
        interface,
        mode,
        depth,
        syscalls,
    })
}

/// Prints the summary: on stderr as text, on stdout as JSON/YAML unless stdout carries
/// the data.
fn report(summary: &Summary, format: Format, stdout_has_data: bool) -> Outcome {
    match format {
        Format::Text => {
            output::stderr_line(&summary.text());
            Ok(())
        }
        _ => {
            let text = output::structured(format, summary)?;
            if stdout_has_data {
                output::stderr_line(text.trim_end());
                Ok(())
            } else {
                output::stdout(&text)
            }
        }
    }
}

/// The data of a write: a regular file is streamed (its size is known up front);
/// standard input and pipes are read ahead up to [`READ_AHEAD`]: what ends within it is
/// known whole before any command, what does not is streamed too (open-ended).
struct Input {
    name: String,
    reader: Box<dyn Read>,
    /// Its length; `None` for open-ended data, known only at its end.
    len: Option<u64>,
    /// Open-ended data has ended: a fill came back short.
    ended: bool,
}

fn open_input(path: &str) -> Outcome<Input> {
    if path == "-" {
        return read_ahead("standard input".into(), Box::new(io::stdin()));
    }
    let name = format!("--data {path}");
    let file = File::open(path).map_err(|e| Failure::io(&name, e))?;
    let md = file.metadata().map_err(|e| Failure::io(&name, e))?;
    if md.is_file() {
        return Ok(Input { name, reader: Box::new(file), len: Some(md.len()), ended: false });
    }
    if md.is_dir() {
        return Err(Failure::new(format!("{name}: is a directory")));
    }
    read_ahead(name, Box::new(file))
}

/// Reads `reader` up to [`READ_AHEAD`]: data that ends there has a length; longer data
/// goes on from where the read-ahead stopped, open-ended.
fn read_ahead(name: String, mut reader: Box<dyn Read>) -> Outcome<Input> {
    let mut head = Vec::new();
    (&mut reader).take(READ_AHEAD).read_to_end(&mut head).map_err(|e| Failure::io(&name, e))?;
    let len = head.len() as u64;
    if len < READ_AHEAD {
        return Ok(Input { name, reader: Box::new(io::Cursor::new(head)), len: Some(len), ended: false });
    }
    Ok(Input { name, reader: Box::new(io::Cursor::new(head).chain(reader)), len: None, ended: false })
}

impl Input {
    /// Fills `buf` from the data; fewer bytes only where open-ended data ends.
    fn fill(&mut self, buf: &mut [u8]) -> Outcome<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.reader.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::io(&self.name, e)),
            }
        }
        match self.len {
            Some(len) if got < buf.len() => Err(Failure::new(format!(
                "{} ended before its {len} bytes (did it shrink while being read?)",
                self.name
            ))),
            _ => {
                self.ended |= got < buf.len();
                Ok(got)
            }
        }
    }

    /// Whether open-ended data that filled the request has more after it.
    fn has_more(&mut self) -> Outcome<bool> {
        let mut byte = [0u8; 1];
        Ok(!self.ended && self.fill(&mut byte)? == 1)
    }
}

struct WriteSide {
    input: Input,
}

impl Side for WriteSide {
    fn fill(&mut self, _i: u64, buf: &mut [u8]) -> Outcome<usize> {
        self.input.fill(buf)
    }

    fn done(&mut self, _i: u64, _len: usize, buf: Buffer, free: &mut Vec<Buffer>) -> Outcome {
        free.push(buf);
        Ok(())
    }
}

/// The bytes from `start` to the end of the device.
fn room(g: &Geometry, start: Start) -> u64 {
    match start {
        Start::Offset(o) => g.bytes.saturating_sub(o),
        Start::Slba(s) => g.nlbas.saturating_sub(s).saturating_mul(g.lba_size as u64),
    }
}

/// Where a request starts, for messages: `byte 4096`, `LBA 8`.
fn at(start: Start) -> String {
    match start {
        Start::Offset(o) => format!("byte {o}"),
        Start::Slba(s) => format!("LBA {s}"),
    }
}

/// `ioswitch write`: writes `data` (a file, or `-` for standard input) at `start`.
pub fn write(uri: &str, opts: &Opts, start: Start, data: &str, t: &Transfer, format: Format) -> Outcome {
    let dev = Device::open(uri, opts)?;
    let input = open_input(data)?;
    let target = Target::of(&dev);
    let room = room(target.geo, start);
    let too_long = |name: &str, written: &str| {
        let f = Failure::new(format!(
            "{name} holds more than the {} from {} to the end of {uri}: {written}",
            human_exact(room),
            at(start)
        ));
        if dev.ident().kind == DevKind::File {
            f.hint("writes do not grow a regular file: --opts size=N extends it at open")
        } else {
            f
        }
    };
    let mut plan = match input.len {
        Some(len) => Plan::new(&target, start, len, t.chunk, true)?,
        // Open-ended: the plan covers the room left, and the data's end cuts it.
        None if room < READ_AHEAD => return Err(too_long(&input.name, "nothing was written")),
        None => Plan { open_ended: true, ..Plan::new(&target, start, room, t.chunk, true)? },
    };
    let mut side = WriteSide { input };
    let summary = execute(&dev, &mut plan, t, &mut side)?;
    let input = &mut side.input;
    if plan.unwritten > 0 {
        return Err(Failure::new(format!(
            "{} ended after {} bytes, not a whole number of {}-byte LBAs: --slba writes whole LBAs, so its first {} \
             were written from {} and its last {} bytes were not (pad the data, or write by byte with --offset)",
            input.name,
            plan.total + plan.unwritten,
            plan.lba,
            human_exact(plan.total),
            at(start),
            plan.unwritten
        )));
    }
    if plan.open_ended && input.has_more()? {
        return Err(too_long(&input.name, "those were written, the rest was not read"));
    }
    report(&summary, format, false)
}

/// Writes completed reads out in request order, whatever order they complete in.
struct ReadSide<W: Write> {
    name: String,
    out: W,
    next: u64,
    parked: BTreeMap<u64, (usize, Buffer)>,
}

impl<W: Write> Side for ReadSide<W> {
    fn fill(&mut self, _i: u64, buf: &mut [u8]) -> Outcome<usize> {
        Ok(buf.len())
    }

    fn done(&mut self, i: u64, len: usize, buf: Buffer, free: &mut Vec<Buffer>) -> Outcome {
        self.parked.insert(i, (len, buf));
        while let Some((len, buf)) = self.parked.remove(&self.next) {
            self.out.write_all(&buf[..len]).map_err(|e| Failure::io(&self.name, e))?;
            free.push(buf);
            self.next += 1;
        }
        Ok(())
    }
}

/// `ioswitch read`: reads `length` at `start` into `out` (a file, or `-` for standard
/// output).
pub fn read(uri: &str, opts: &Opts, start: Start, length: Length, out: &str, t: &Transfer, format: Format) -> Outcome {
    // Read-only unless the options ask for a write mode: a read works on what the user
    // may read but not write, and cannot write by mistake.
    let dev = Device::open(uri, &opts.clone().for_reading())?;
    let total = match length {
        Length::Bytes(b) => b,
        Length::Lbas(n) => n.checked_mul(dev.geometry().lba_size as u64).ok_or_else(|| {
            Failure::new(format!("--nlb {n} LBAs of {} bytes is more bytes than exist", dev.geometry().lba_size))
        })?,
    };
    let mut plan = Plan::new(&Target::of(&dev), start, total, t.chunk, false)?;
    let to_stdout = out == "-";
    let (name, sink): (String, Box<dyn Write>) = if to_stdout {
        ("writing to standard output".into(), Box::new(io::stdout().lock()))
    } else {
        let name = format!("--out {out}");
        let file = File::create(out).map_err(|e| Failure::io(&name, e))?;
        (name, Box::new(file))
    };
    let mut side = ReadSide { name, out: sink, next: 0, parked: BTreeMap::new() };
    let summary = execute(&dev, &mut plan, t, &mut side)?;
    side.out.flush().map_err(|e| Failure::io(&side.name, e))?;
    report(&summary, format, to_stdout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioswitch::ZonedModel;

    fn geometry(lba_size: u32, nlbas: u64, max_transfer: u64) -> Geometry {
        Geometry {
            lba_size,
            nlbas,
            bytes: nlbas * lba_size as u64,
            max_transfer,
            dio_mem_align: 512,
            dio_offset_align: 512,
            zoned: ZonedModel::None,
            zones: None,
        }
    }

    fn plan(g: &Geometry, start: Start, total: u64, chunk: Option<u64>) -> Outcome<Plan> {
        Plan::new(&Target { uri: "dev", kind: DevKind::Block, nsid: 1, geo: g }, start, total, chunk, true)
    }

    #[test]
    fn nvm_commands_cover_the_request_in_order_with_at_most_65536_blocks() {
        let g = geometry(512, 1 << 30, 1 << 30);
        let p = plan(&g, Start::Slba(10), 100 << 20, Some(64 << 20)).unwrap();
        assert_eq!(p.chunk, 65536 * 512, "NLB caps a command below the max transfer");
        assert_eq!(p.commands(), 4);
        let mut next = 10;
        for i in 0..p.commands() {
            let c = p.cmd(i);
            assert!(c.sqe.nlb() <= 65536);
            assert_eq!(c.sqe.slba(), next);
            next += c.sqe.nlb() as u64;
        }
        assert_eq!(next, 10 + (100 << 20) / 512);
    }

    #[test]
    fn file_commands_split_at_the_max_transfer_and_keep_the_tail() {
        let g = geometry(512, 1 << 20, 128 << 10);
        let p = plan(&g, Start::Offset(7), 300_000, None).unwrap();
        assert_eq!((p.chunk, p.commands()), (128 << 10, 3));
        assert_eq!(p.cmd(2).fs_offset(), 7 + 2 * (128 << 10));
        assert_eq!(p.cmd(2).fs_len(), 300_000 - 2 * (128 << 10));
        assert_eq!(p.describe(0), "file write of bytes [7, 131079)");
    }

    #[test]
    fn open_ended_data_cuts_the_request_where_it_ends_in_whole_lbas_for_nvm_commands() {
        let g = geometry(512, 1 << 20, 1 << 20);
        let mut p = plan(&g, Start::Offset(5), 8 << 20, None).unwrap();
        p.cut(2, 777);
        assert_eq!((p.total, p.commands(), p.len(2), p.unwritten), ((2 << 20) + 777, 3, 777, 0));
        let mut p = plan(&g, Start::Slba(3), 8 << 20, None).unwrap();
        p.cut(2, 1100);
        assert_eq!((p.total, p.commands(), p.len(2), p.unwritten), ((2 << 20) + 1024, 3, 1024, 76));
        assert_eq!(p.cmd(2).sqe.nlb(), 2);
        // Data that ends at a command's start, or within its first LBA, leaves no command there.
        p.cut(2, 100);
        assert_eq!((p.commands(), p.unwritten), (2, 100));
        p.cut(1, 0);
        assert_eq!((p.total, p.commands(), p.unwritten), (1 << 20, 1, 0));
    }

    #[test]
    fn the_progress_line_of_open_ended_data_gives_no_total() {
        let mut out = Vec::new();
        let mut inner = Sink { left: 0 };
        let mut free = Vec::new();
        {
            let mut m = Meter::new(&mut inner, &mut out, "write", None, Duration::ZERO);
            m.done(0, 1 << 20, Buffer::from_slice(&[0; 8], 8).unwrap(), &mut free).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("\r\x1b[Kwrite: 1.0MiB done ["), "{text:?}");
        assert!(!text.contains('%') && !text.contains("eta"), "{text:?}");
    }

    #[test]
    fn a_plan_fill_tells_whether_the_command_has_data() {
        let g = geometry(512, 1 << 20, 1 << 20);
        let mut buf = Buffer::from_slice(&[0; 4096], 4096).unwrap();
        let mut p = Plan { open_ended: true, ..plan(&g, Start::Slba(0), 8192, Some(4096)).unwrap() };
        let mut side = Sink { left: 4096 + 600 };
        assert!(p.fill(0, &mut buf, &mut side).unwrap());
        assert!(p.fill(1, &mut buf, &mut side).unwrap(), "600 bytes: one whole LBA");
        assert_eq!((p.total, p.len(1), p.unwritten), (4096 + 512, 512, 88));
        let mut p = Plan { open_ended: true, ..plan(&g, Start::Offset(0), 8192, Some(4096)).unwrap() };
        let mut side = Sink { left: 4096 };
        assert!(p.fill(0, &mut buf, &mut side).unwrap());
        assert!(!p.fill(1, &mut buf, &mut side).unwrap(), "the data ended at command 1's start");
        assert_eq!(p.commands(), 1);
    }

    #[test]
    fn requests_that_cannot_run_are_refused_before_any_command() {
        let g = geometry(4096, 256, 1 << 20);
        let e = plan(&g, Start::Slba(0), 6000, None).unwrap_err().to_string();
        assert!(e.contains("6000 bytes") && e.contains("4096-byte LBAs") && e.contains("1 LBA and"), "{e}");
        let e = plan(&g, Start::Slba(250), 8 * 4096, None).unwrap_err().to_string();
        assert!(e.contains("[250, 258)") && e.contains("256"), "{e}");
        let e = plan(&g, Start::Offset(u64::MAX - 1), 4096, None).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let e = plan(&g, Start::Slba(0), 8192, Some(6000)).unwrap_err().to_string();
        assert!(e.contains("--chunk 6000"), "{e}");
        let e = plan(&g, Start::Offset(0), 8192, Some(2 << 20)).unwrap_err().to_string();
        assert!(e.contains("max transfer"), "{e}");
        assert!(plan(&g, Start::Offset(0), 0, None).is_err());
        let none = geometry(512, 0, 0);
        let e = plan(&none, Start::Offset(0), 512, None).unwrap_err().to_string();
        assert!(e.contains("no data geometry"), "{e}");
    }

    /// A side whose data ends after `left` bytes, and that only hands buffers back.
    struct Sink {
        left: usize,
    }
    impl Side for Sink {
        fn fill(&mut self, _i: u64, buf: &mut [u8]) -> Outcome<usize> {
            let n = buf.len().min(self.left);
            self.left -= n;
            Ok(n)
        }
        fn done(&mut self, _i: u64, _len: usize, buf: Buffer, free: &mut Vec<Buffer>) -> Outcome {
            free.push(buf);
            Ok(())
        }
    }

    #[test]
    fn the_progress_line_counts_completed_bytes_and_is_erased_at_the_end() {
        let mut out = Vec::new();
        let mut inner = Sink { left: usize::MAX };
        let mut free = Vec::new();
        {
            // Redrawn at every completion (no interval): 1 MiB of 4 MiB, then 4 of 4.
            let mut m = Meter::new(&mut inner, &mut out, "write", Some(4 << 20), Duration::ZERO);
            m.done(0, 1 << 20, Buffer::from_slice(&[0; 8], 8).unwrap(), &mut free).unwrap();
            m.done(1, 3 << 20, Buffer::from_slice(&[0; 8], 8).unwrap(), &mut free).unwrap();
            assert_eq!(m.moved, 4 << 20);
        }
        assert_eq!(free.len(), 2, "the inner side got the buffers");
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.split("\r\x1b[K").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert!(lines[0].starts_with("write: 25.0% done, 1.0MiB of 4.0MiB ["), "{text:?}");
        assert!(lines[1].starts_with("write: 100.0% done, 4.0MiB of 4.0MiB [") && lines[1].ends_with("[eta 00m:00s]"));
        assert!(text.ends_with("\r\x1b[K"), "erased when done: {text:?}");

        // With a long interval only the first completion draws; nothing drawn, nothing erased.
        let mut out = Vec::new();
        {
            let mut m = Meter::new(&mut inner, &mut out, "read", Some(8192), Duration::from_secs(3600));
            for i in 0..2 {
                m.done(i, 4096, Buffer::from_slice(&[0; 8], 8).unwrap(), &mut free).unwrap();
            }
        }
        assert_eq!(String::from_utf8(out).unwrap().matches("read: ").count(), 1);
        let mut out = Vec::new();
        drop(Meter::new(&mut inner, &mut out, "read", Some(8192), Duration::ZERO));
        assert!(out.is_empty(), "no completion, no line");
    }

    #[test]
    fn reads_are_written_out_in_request_order_whatever_order_they_finish_in() {
        let mut side = ReadSide { name: "test".into(), out: Vec::new(), next: 0, parked: BTreeMap::new() };
        let mut free = Vec::new();
        for i in [2u8, 0, 3, 1] {
            let b = Buffer::from_slice(&[i; 4], 8).unwrap();
            side.done(i as u64, if i == 3 { 2 } else { 4 }, b, &mut free).unwrap();
        }
        assert_eq!(side.out, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3]);
        assert_eq!(free.len(), 4, "every buffer is free again");
        assert!(side.parked.is_empty());
    }
}
