//! The asynchronous queue: submit, commit, poke, wait, drain.
//!
//! One queue per thread; a [`Device`] may carry several. `submit` never blocks: when the
//! queue already holds `depth` commands it returns [`Error::Busy`] together with the data,
//! so nothing is lost. Submissions are pushed to the kernel in one batch by
//! [`Queue::commit`], which `poke`, `wait` and `drain` call first.
//!
//! Dropping a queue with commands in flight is safe: the drop waits for them, so no buffer
//! is freed while the kernel may still write into it.
//!
//! A completion callback that panics leaves the queue's outstanding count ahead of the
//! interface's (the completions handed out in that call are not subtracted, nor counted
//! as completed in [`QueueStats`]); the queue stays memory-safe and its drop does not
//! hang, but it should be dropped, not reused.

use crate::be::{self, AsyncQueue};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::Device;
use crate::error::{Error, Result};
use crate::opts::AsyncIface;
use crate::spec::Status;
use serde::Serialize;
use std::fmt;

/// Where a reap puts each completion: any `FnMut(Completion)` closure, or a type of the
/// caller's whose [`put`](CompletionSink::put) the reaping loops inline.
///
/// [`Queue::poke`], [`Queue::wait`] and [`Queue::drain`] take closures. A closure is a
/// function of its own that LLVM may keep out of line, called once per completion with the
/// [`Completion`] written to memory for it; stable Rust has no `#[inline]` for a closure.
/// A sink's `put` marked `#[inline(always)]`, given to [`Queue::poke_with`] or
/// [`Queue::wait_with`], runs inside every interface's reaping loop instead (the C ABI's
/// lean path writes its events into the caller's array this way).
pub trait CompletionSink {
    /// Takes one completion.
    fn put(&mut self, c: Completion);
}

impl<F: FnMut(Completion)> CompletionSink for F {
    #[inline(always)]
    fn put(&mut self, c: Completion) {
        self(c)
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Completion {
    /// The tag given at submission.
    pub tag: u64,
    /// Success, or the NVMe status (and errno) of the failure.
    pub status: Status,
    /// Command-specific result: bytes moved for data commands on files and block devices,
    /// completion DW0-1 for NVMe. A read or write that succeeds moved every byte (the
    /// result is its length); one that ends short fails with EIO (its result, where the
    /// interface reports it, the bytes that did move).
    pub result: u64,
    /// The data given at submission, handed back.
    pub data: Data,
}

/// A submission the queue did not take, with the data handed back.
pub struct Rejected {
    /// Why: [`Error::Busy`] when full, or what was wrong with the command.
    pub error: Error,
    /// The data that was to be submitted.
    pub data: Data,
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.error, f)
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for Rejected {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<Rejected> for Error {
    fn from(r: Rejected) -> Error {
        r.error
    }
}

/// Counters of one queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// Commands taken by `submit`.
    pub submitted: u64,
    /// Completions handed to callbacks.
    pub completed: u64,
    /// Syscalls the interface made for this queue (submission, reaping, wake-ups).
    pub syscalls: u64,
}

/// An asynchronous queue on a device's async interface.
pub struct Queue {
    be: be::Backend,
    dev: Device,
    iface: AsyncIface,
    depth: u32,
    outstanding: u32,
    submitted: u64,
}

/// Largest queue depth.
pub const MAX_DEPTH: u32 = 4096;

impl Queue {
    pub(crate) fn new(dev: Device, depth: u32) -> Result<Queue> {
        let iface = dev
            .inner
            .ifaces
            .r#async
            .ok_or_else(|| dev.inner.unsupported("async", "the device has no async interface"))?;
        if depth == 0 || depth > MAX_DEPTH {
            return Err(Error::BadOpt {
                key: "depth".into(),
                why: format!("queue depth {depth}: use 1..={MAX_DEPTH}"),
            });
        }
        let be = be::new_queue(&dev.inner, iface, depth)?;
        Ok(Queue { be, dev, iface, depth, outstanding: 0, submitted: 0 })
    }

    /// Submits a command with its data (moved in; handed back by the completion) and a
    /// tag of the caller's choice. Never blocks; returns [`Error::Busy`] in
    /// [`Rejected::error`] when `depth` commands are outstanding. The command reaches the
    /// kernel at the next [`commit`](Queue::commit), `poke`, `wait` or `drain`.
    #[inline(always)]
    pub fn submit(&mut self, cmd: &Cmd, data: Data, tag: u64) -> Result<(), Rejected> {
        // The common command (one buffer, a read or write that passes every check) takes
        // the inlined fast check; everything else, refusals included, the full one.
        if self.outstanding < self.depth {
            if let Some(io) = be::fast_check(&self.dev.lim, cmd, &data) {
                return self.submit_checked(&io, cmd, data, tag);
            }
        }
        self.submit_slow(cmd, be::own(data), tag)
    }

    #[inline(never)]
    fn submit_slow(&mut self, cmd: &Cmd, data: Data, tag: u64) -> Result<(), Rejected> {
        if self.outstanding >= self.depth {
            return Err(Rejected { error: Error::Busy { depth: self.depth }, data });
        }
        match be::prepare(&self.dev.inner, cmd, data.bufs()) {
            Ok(io) if cmd.ioprio != 0 => match self.be.submit_prio(&self.dev.inner, self.iface, &io, cmd, data, tag) {
                Ok(()) => {
                    self.outstanding += 1;
                    self.submitted += 1;
                    Ok(())
                }
                Err((error, data)) => Err(Rejected { error, data }),
            },
            Ok(io) => self.submit_checked(&io, cmd, data, tag),
            Err(error) => Err(Rejected { error, data }),
        }
    }

    #[inline(always)]
    fn submit_checked(&mut self, io: &be::Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), Rejected> {
        match self.be.submit(io, cmd, data, tag) {
            Ok(()) => {
                self.outstanding += 1;
                self.submitted += 1;
                Ok(())
            }
            Err((error, data)) => Err(Rejected { error, data }),
        }
    }

    /// Pushes every command submitted since the last commit to the kernel (one syscall for
    /// interfaces that batch). Returns how many were pushed.
    #[inline]
    pub fn commit(&mut self) -> Result<u32> {
        self.be.commit()
    }

    /// Commits, then reaps what has completed without waiting, at most `max` (0: no
    /// limit), calling `f` for each. Returns how many were reaped.
    #[inline(always)]
    pub fn poke(&mut self, max: u32, mut f: impl FnMut(Completion)) -> Result<u32> {
        if self.outstanding == 0 {
            self.be.commit()?;
            return Ok(0);
        }
        let max = if max == 0 { u32::MAX } else { max };
        self.reap(0, max, &mut f)
    }

    /// [`poke`](Queue::poke), putting each completion into `sink`.
    #[inline(always)]
    pub fn poke_with(&mut self, max: u32, sink: &mut impl CompletionSink) -> Result<u32> {
        if self.outstanding == 0 {
            self.be.commit()?;
            return Ok(0);
        }
        let max = if max == 0 { u32::MAX } else { max };
        self.reap(0, max, sink)
    }

    /// [`submit`](Queue::submit), then, when it took the command,
    /// [`poke_with`](Queue::poke_with)`(max, sink)`: one call for a caller that looks for
    /// completions after every command. `Err` is `submit`'s (nothing submitted, the data
    /// handed back); `Ok` holds the poke's result (the command is submitted either way).
    ///
    /// The same as the two calls, in effect and in order. On an interface that completes
    /// every command at once ([`AsyncIface::Nil`]) with nothing outstanding, a command
    /// the queue takes has completed when the call returns: its completion, the only one
    /// the poke can find, is in `sink` (straight from the submission for a read or write
    /// that passes the inlined checks, never queued).
    #[inline(always)]
    pub fn submit_poke_with(
        &mut self,
        cmd: &Cmd,
        data: Data,
        tag: u64,
        max: u32,
        sink: &mut impl CompletionSink,
    ) -> Result<Result<u32>, Rejected> {
        // Nothing outstanding: no completion comes before this one, and the queue is not
        // full (depth >= 1).
        if self.outstanding == 0 && self.be.completes_at_once() {
            if let Some(io) = be::fast_check(&self.dev.lim, cmd, &data) {
                self.submitted += 1;
                sink.put(Completion { tag, status: Status::OK, result: io.len, data });
                return Ok(Ok(1));
            }
        }
        self.submit_then_poke(cmd, be::own(data), tag, max, sink)
    }

    /// [`submit_poke_with`](Queue::submit_poke_with) as the two calls, out of line: on nil
    /// the path of the commands the inlined checks leave to the full one (no data, a
    /// priority, a refusal). Inlined as well, it made the C ABI's
    /// `ioswitch_queue_submit_at_reap` half as large again and its nil path 4 instructions
    /// longer per I/O (docs/BENCHMARKS.md, `nilqd1`).
    #[inline(never)]
    fn submit_then_poke(
        &mut self,
        cmd: &Cmd,
        data: Data,
        tag: u64,
        max: u32,
        sink: &mut impl CompletionSink,
    ) -> Result<Result<u32>, Rejected> {
        self.submit(cmd, data, tag)?;
        Ok(self.poke_with(max, sink))
    }

    /// Commits, then waits until at least `min` commands (at most all outstanding) have
    /// completed, calling `f` for each. Returns how many were reaped.
    #[inline]
    pub fn wait(&mut self, min: u32, mut f: impl FnMut(Completion)) -> Result<u32> {
        self.wait_with(min, &mut f)
    }

    /// [`wait`](Queue::wait), putting each completion into `sink`.
    #[inline]
    pub fn wait_with(&mut self, min: u32, sink: &mut impl CompletionSink) -> Result<u32> {
        if self.outstanding == 0 {
            self.be.commit()?;
            return Ok(0);
        }
        let min = min.min(self.outstanding);
        self.reap(min, u32::MAX, sink)
    }

    /// Commits, then waits for every outstanding command. Returns how many were reaped.
    pub fn drain(&mut self, mut f: impl FnMut(Completion)) -> Result<u32> {
        if self.outstanding == 0 {
            self.be.commit()?;
            return Ok(0);
        }
        let mut n = 0;
        while self.outstanding > 0 {
            n += self.reap(self.outstanding, u32::MAX, &mut f)?;
        }
        Ok(n)
    }

    /// Commits, then reaps (one syscall where the interface can do both at once).
    #[inline(always)]
    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32> {
        let n = self.be.commit_and_reap(min, max, f)?;
        self.outstanding -= n;
        if n == 0 && min > 0 {
            // A waiting reap that returns nothing would make drain spin forever.
            return Err(self.nothing_reaped());
        }
        Ok(n)
    }

    #[cold]
    #[inline(never)]
    fn nothing_reaped(&self) -> Error {
        Error::Queue {
            dev: self.dev.inner.uri.clone(),
            iface: self.iface.as_str(),
            what: "waiting for completions",
            source: std::io::Error::other(format!(
                "the interface returned none while {} commands are outstanding",
                self.outstanding
            )),
        }
    }

    /// Commands submitted and not yet reaped.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }
    /// The queue depth: how many commands may be outstanding.
    pub fn capacity(&self) -> u32 {
        self.depth
    }
    /// The async interface serving this queue.
    pub fn interface(&self) -> AsyncIface {
        self.iface
    }
    /// The device.
    pub fn device(&self) -> &Device {
        &self.dev
    }
    /// Counters: submitted, completed, syscalls.
    pub fn stats(&self) -> QueueStats {
        // Every command submitted and no longer outstanding has been handed to a callback.
        let completed = self.submitted - self.outstanding as u64;
        QueueStats { submitted: self.submitted, completed, syscalls: self.be.syscalls() }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Wait for commands in flight so their buffers outlive the kernel's use of them.
        // If this fails the backend's own Drop still keeps memory safe (it leaks buffers
        // it cannot prove finished rather than freeing them).
        let _ = self.drain(drop);
    }
}
