//! Backends: one file per interface, plus the traits they implement and the selection
//! table of (device kind × interface).
//!
//! A command reaches a backend already checked: [`prepare`] decodes it into an [`Io`]
//! (what to do, where, how many bytes) and refuses out-of-range requests, buffers too
//! small for the transfer and misaligned direct I/O before anything is submitted.
//! Backends that are not NVMe work on the `Io`; NVMe passthrough backends on the raw
//! submission entry.

pub(crate) mod admin_emu;
pub(crate) mod emu;
pub(crate) mod libaio;
pub(crate) mod mmap;
pub(crate) mod nil;
pub(crate) mod nvme;
pub(crate) mod pmem;
pub(crate) mod posix_aio;
pub(crate) mod psync;
pub(crate) mod ramdisk;
#[cfg(test)]
pub(crate) mod testutil;
pub(crate) mod thrpool;
pub(crate) mod uring;
pub(crate) mod vfio;
pub(crate) mod zoned;

use crate::buf::{Buffer, Data, DataWords};
use crate::cmd::{opc, Cmd, CmdSet, DsmRange};
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::opts::{AdminIface, AsyncIface, Opts, SyncIface};
use crate::queue::{Completion, CompletionSink};
use crate::spec::Status;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};

/// Most buffers one vectored command may carry.
pub(crate) const MAX_SEGMENTS: usize = 64;

/// What a command asks for, decoded and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Write,
    Flush,
    WriteZeroes,
    /// Deallocate a byte range (file trim).
    Trim,
    /// Dataset Management with `nr` ranges in the first buffer; `deallocate` set or not.
    Dsm {
        nr: u32,
        deallocate: bool,
    },
    /// A command only an NVMe passthrough interface can carry.
    Passthru,
}

/// A checked command: the operation, and for data commands the byte range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Io {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
}

/// A synchronous interface: runs one checked command to completion.
pub(crate) trait SyncIo: Send + Sync {
    /// Runs the command; returns the command-specific result (bytes moved for data
    /// commands) or the NVMe status (with errno) of the failure.
    fn exec(&self, io: &Io, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status>;
    /// Syscalls one command costs (0 for memory backends).
    fn syscalls_per_cmd(&self) -> u64;
    /// The persistent-memory mapping behind the interface (`pmem` only).
    fn pmem(&self) -> Option<&pmem::Pmem> {
        None
    }
}

/// An admin interface: runs one admin command to completion (identify, logs, features).
pub(crate) trait AdminIo: Send + Sync {
    /// Runs the command with `bufs` as its data; returns the completion's result (DW0-1)
    /// or the NVMe status (with errno) of the failure.
    fn admin(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status>;
}

/// An asynchronous interface's queue. The [`Queue`](crate::Queue) in front of it counts
/// outstanding commands, so `submit` is only called when a slot is free.
pub(crate) trait AsyncQueue: Send {
    /// Takes a checked command and its data. Must not block. Returns the data on error.
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)>;
    /// Hands everything submitted since the last commit to the kernel (one syscall where
    /// the interface batches); returns how many commands were pushed.
    fn commit(&mut self) -> Result<u32, Error>;
    /// Reaps at most `max` completions, waiting until at least `min` were reaped
    /// (`min == 0`: never waits). Calls `f` once per completion.
    ///
    /// Contract: once `f` has been called, the reap returns `Ok(n)` with the number of
    /// calls, even if a later step failed (report that failure on the next reap); an
    /// `Err` means `f` was not called at all. The queue's outstanding count relies on it.
    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error>;
    /// Syscalls made so far by this queue (submission, completion and wake-ups).
    fn syscalls(&self) -> u64;

    /// [`commit`](AsyncQueue::commit), then [`reap`](AsyncQueue::reap) with the same
    /// contract. Interfaces whose waiting reap can submit in the same syscall override it
    /// (io_uring: one `io_uring_enter` both submits and waits).
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        self.commit()?;
        self.reap(min, max, f)
    }
}

/// One async interface's queue. An enum rather than a trait object: the calls are
/// dispatched by one `match` the compiler can see through, so a small interface (nil)
/// inlines into [`Queue`](crate::Queue) and the completion callback stays a generic
/// closure down to the interface's reaping loop (no indirect call per completion).
/// `repr(u8)`: a plain tag byte, cheaper to match than a niche in a field.
#[repr(u8)]
pub(crate) enum Backend {
    Nil(nil::Nil),
    Emu(emu::Emu),
    IoUring(Box<uring::file::IoUringQueue>),
    IoUringCmd(Box<uring::cmd::UringCmdQueue>),
    Libaio(Box<libaio::Libaio>),
    Posix(Box<posix_aio::PosixAio>),
    Thrpool(Box<thrpool::Thrpool>),
    Vfio(Box<vfio::VfioQueue>),
}

/// Calls a method on the interface's queue: one `match`, inlined into
/// [`Queue`](crate::Queue).
macro_rules! dispatch {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            Backend::Nil($q) => $e,
            Backend::Emu($q) => $e,
            Backend::IoUring($q) => $e,
            Backend::IoUringCmd($q) => $e,
            Backend::Libaio($q) => $e,
            Backend::Posix($q) => $e,
            Backend::Thrpool($q) => $e,
            Backend::Vfio($q) => $e,
        }
    };
}

/// The calls of the fast path ([`Queue`](crate::Queue)'s submit, commit and reaps) on the
/// interfaces whose commands cost least (nil, io_uring, libaio): their arms are inlined,
/// the rest is one call (`$rest`, out of line). Three arms and a default compile to
/// compares (two instructions to each of them), where the `match` of every interface
/// compiled to a jump table (five, and the box loaded after the jump), once per call:
/// 10 user-space instructions per I/O on the C ABI's io_uring qd1 path (callgrind,
/// docs/BENCHMARKS.md).
macro_rules! dispatch_fast {
    ($self:ident, $q:ident => $e:expr, $other:ident => $rest:expr) => {
        match $self {
            Backend::Nil($q) => $e,
            Backend::IoUring($q) => $e,
            Backend::Libaio($q) => $e,
            $other => $rest,
        }
    };
}

/// Reaping: nil and the kernel interfaces (libaio, io_uring, io_uring_cmd) run the
/// caller's callback inlined (a nil cycle costs what the library costs; on libaio and
/// io_uring the indirect call, the `Completion` written out for it and the callback's
/// own entry and exit were 17–30 user-space instructions per I/O, measured with
/// callgrind on the overhead bench): one instance of their reaping code per callback
/// type (nil, io_uring and libaio inlined through [`dispatch_fast`], io_uring_cmd and
/// VFIO here, out of line). The other interfaces, whose completions cost thread
/// hand-offs or signals, take it as a `dyn FnMut`: one instance of their reaping code for
/// all callbacks, and one indirect call per completion.
macro_rules! dispatch_reap {
    ($self:ident, $f:ident, $q:ident => $e:expr) => {
        match $self {
            Backend::IoUringCmd($q) => $e,
            Backend::Vfio($q) => $e,
            other => {
                let mut h = |c: Completion| $f.put(c);
                let mut g: &mut dyn FnMut(Completion) = &mut h;
                let $f = &mut g;
                dispatch!(other, $q => $e)
            }
        }
    };
}

/// A copy of a command's data in a place of its own, for a call that takes it out of
/// line. The fast path inlines the submission into the caller's loop; a call that takes
/// the caller's own `Data` (by address, as Rust passes it) would keep that value in
/// memory on every path, the inlined one too (stores per command); the copy is made only
/// on the path that makes the call.
#[inline(always)]
pub(crate) fn own(data: Data) -> Data {
    DataWords::new(data).into_data()
}

impl AsyncQueue for Backend {
    #[inline(always)]
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        dispatch_fast!(self, q => q.submit(io, cmd, data, tag), other => other.submit_rest(*io, cmd, own(data), tag))
    }
    #[inline(always)]
    fn commit(&mut self) -> Result<u32, Error> {
        dispatch_fast!(self, q => q.commit(), other => other.commit_rest())
    }
    #[inline(always)]
    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        dispatch_fast!(self, q => q.reap(min, max, f), other => other.reap_rest(min, max, f))
    }
    fn syscalls(&self) -> u64 {
        dispatch!(self, q => q.syscalls())
    }
    #[inline(always)]
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        dispatch_fast!(self, q => q.commit_and_reap(min, max, f), other => other.commit_and_reap_rest(min, max, f))
    }
}

/// The arms of [`dispatch_fast`]'s calls for the other interfaces (nil, io_uring and
/// libaio, handled there, are never given to these; they have their arms here anyway).
/// `#[cold]`: the branch to them is laid out of the three inlined arms' way, and LLVM
/// keeps the registers of those arms' loops for them (callgrind, docs/BENCHMARKS.md:
/// the library's overhead bench libaio qd1 322 -> 315 per I/O, the engine's io_uring qd1
/// 501 -> 492; the other rows equal or within their run-to-run spread). The calls made
/// here still cost what they cost before.
impl Backend {
    #[cold]
    #[inline(never)]
    fn submit_rest(&mut self, io: Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        dispatch!(self, q => q.submit(&io, cmd, data, tag))
    }
    #[cold]
    #[inline(never)]
    fn commit_rest(&mut self) -> Result<u32, Error> {
        dispatch!(self, q => q.commit())
    }
    #[cold]
    #[inline(never)]
    fn reap_rest(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        dispatch_reap!(self, f, q => q.reap(min, max, f))
    }
    #[cold]
    #[inline(never)]
    fn commit_and_reap_rest(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        dispatch_reap!(self, f, q => q.commit_and_reap(min, max, f))
    }
}

impl Backend {
    /// Whether the interface completes every command inside its submission, with
    /// success and the command's length as the result, and has nothing to commit
    /// (nil): [`Queue::submit_poke_with`](crate::Queue::submit_poke_with) then hands a
    /// fast-checked command's completion straight to its sink.
    #[inline(always)]
    pub(crate) fn completes_at_once(&self) -> bool {
        matches!(self, Backend::Nil(_))
    }

    /// A command with an I/O priority (`cmd.ioprio`, not 0): a read or write goes to the
    /// interfaces that carry one (io_uring in `sqe->ioprio`, libaio in `aio_reqprio`);
    /// everything else is refused by name ([`prio_refused`]). Never on the fast path,
    /// whose commands have no priority.
    #[cold]
    #[inline(never)]
    pub(crate) fn submit_prio(
        &mut self,
        dev: &Inner,
        iface: AsyncIface,
        io: &Io,
        cmd: &Cmd,
        data: Data,
        tag: u64,
    ) -> Result<(), (Error, Data)> {
        if let Some(e) = prio_refused(dev, Some(iface), io, cmd) {
            return Err((e, data));
        }
        match self {
            Backend::IoUring(q) => q.submit_prio(io, cmd, data, tag),
            Backend::Libaio(q) => q.submit_prio(io, cmd, data, tag),
            // `prio_refused` lets through only io_uring and libaio, whose queues are the
            // arms above; a queue of another kind under their name would land here.
            _ => Err((prio_error(dev, iface.as_str(), cmd, CANNOT_CARRY), data)),
        }
    }
}

/// The role an interface plays for a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Synchronous I/O (`sync=`).
    Sync,
    /// Asynchronous I/O through a [`Queue`](crate::Queue) (`async=`).
    Async,
    /// Admin commands (`admin=`).
    Admin,
    /// Buffer memory (`mem=`).
    Mem,
}

impl Role {
    /// The option key that names an interface of this role.
    pub fn key(self) -> &'static str {
        match self {
            Role::Sync => "sync",
            Role::Async => "async",
            Role::Admin => "admin",
            Role::Mem => "mem",
        }
    }
}

/// How an interface is set up for an opened device.
pub(crate) enum Build {
    /// A sync interface: its backend.
    Sync(fn(&Inner) -> Result<Box<dyn SyncIo>, Error>),
    /// An async interface: the check made at open (kernel support, tunables), and a queue.
    Async { probe: fn(&Inner) -> Result<(), Error>, queue: fn(&Arc<Inner>, u32) -> Result<Backend, Error> },
    /// An admin interface: its backend.
    Admin(fn(&Inner) -> Result<Box<dyn AdminIo>, Error>),
    /// A memory interface: buffers come from [`Buffer::alloc`].
    Mem,
}

/// One interface, as the rest of the library, the CLI and the bench see it: each
/// interface file exports its descriptor, and the interface table (`be::TABLE`) lists them.
pub struct Descriptor {
    /// The name in option strings (`io_uring`).
    pub name: &'static str,
    /// Its role.
    pub role: Role,
    /// What it is, in one line.
    pub summary: &'static str,
    /// Why it cannot serve a kind of device; `None` when it can.
    pub refusal: fn(DevKind) -> Option<&'static str>,
    /// The kinds of device it serves by default. When several interfaces of a role claim
    /// a kind, the first in the interface table whose kernel support is there wins.
    pub default_for: &'static [DevKind],
    /// The options only this interface takes (`sqpoll`, `threads`), with fio's name for
    /// each where fio has one (`sqthread_poll`).
    pub tunables: &'static [(&'static str, Option<&'static str>)],
    /// The fio ioengines that run on it in `ioswitch bench` (`libaio`).
    pub fio_engines: &'static [&'static str],
    /// Whether the kernel supports it (for the choice of defaults; an explicit choice is
    /// checked by the interface itself at open).
    pub(crate) usable: fn() -> bool,
    pub(crate) build: Build,
}

impl std::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptor").field("name", &self.name).field("role", &self.role).finish()
    }
}

impl Descriptor {
    /// A row with the required facts; the optional ones (defaults, tunables, fio engines,
    /// kernel support) default to none, none, none and always, and are set by the
    /// builder methods below.
    pub(crate) const fn new(
        name: &'static str,
        role: Role,
        summary: &'static str,
        refusal: fn(DevKind) -> Option<&'static str>,
        build: Build,
    ) -> Descriptor {
        Descriptor {
            name,
            role,
            summary,
            refusal,
            default_for: &[],
            tunables: &[],
            fio_engines: &[],
            usable: always,
            build,
        }
    }
    /// The kinds of device it serves by default.
    pub(crate) const fn defaults(mut self, kinds: &'static [DevKind]) -> Descriptor {
        self.default_for = kinds;
        self
    }
    /// The options only it takes, with fio's names.
    pub(crate) const fn tunables(mut self, t: &'static [(&'static str, Option<&'static str>)]) -> Descriptor {
        self.tunables = t;
        self
    }
    /// The fio ioengines that run on it.
    pub(crate) const fn fio(mut self, engines: &'static [&'static str]) -> Descriptor {
        self.fio_engines = engines;
        self
    }
    /// Its kernel support probe.
    pub(crate) const fn usable(mut self, f: fn() -> bool) -> Descriptor {
        self.usable = f;
        self
    }

    /// The option item that selects it (`async=io_uring`).
    pub fn option(&self) -> String {
        format!("{}={}", self.role.key(), self.name)
    }

    /// Whether it can serve a `kind` device opened with `opts`: the kind's refusal, and
    /// the options' own rules ([`Opts::validate`]: `osync=` with an interface that writes
    /// no file) applied as if `opts` named it, as [`Device::open`](crate::Device::open)
    /// would refuse it.
    pub fn serves(&self, kind: DevKind, opts: &Opts) -> bool {
        let mut named = opts.clone();
        (self.refusal)(kind).is_none() && named.set(self.role.key(), self.name).and_then(|()| named.validate()).is_ok()
    }
}

/// Kernel support every interface has.
pub(crate) fn always() -> bool {
    true
}

/// The refusal of an interface that serves every kind of device with I/O: all but a
/// controller (and a PCI device, which only vfio drives).
pub(crate) fn controller_only(kind: DevKind) -> Option<&'static str> {
    match kind {
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
        DevKind::NvmePci => Some(vfio::PCI_ONLY_VFIO),
        _ => None,
    }
}

/// The refusal of an interface that serves every kind of device but a PCI device.
pub(crate) fn not_pci(kind: DevKind) -> Option<&'static str> {
    match kind {
        DevKind::NvmePci => Some(vfio::PCI_ONLY_VFIO),
        _ => None,
    }
}

/// The refusal of an async interface on a file descriptor's reads and writes (libaio,
/// io_uring, POSIX aio): files and block devices only.
pub(crate) fn needs_fd(kind: DevKind) -> Option<&'static str> {
    match kind {
        DevKind::File | DevKind::Block | DevKind::NvmeBlock => None,
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
        DevKind::Ramdisk => Some("a ramdisk has no file descriptor; use async=emu or async=thrpool"),
        DevKind::NvmeChar => Some("needs a file or block device; use io_uring_cmd or nvme on /dev/ngXnY"),
        DevKind::DevDax => Some(DEVDAX_ONLY_PMEM),
        DevKind::NvmePci => Some(vfio::PCI_ONLY_VFIO),
    }
}

/// Why interfaces other than `pmem` refuse a devdax device.
pub(crate) const DEVDAX_ONLY_PMEM: &str =
    "a devdax device takes no read/write system calls, only a memory mapping; use sync=pmem (async=emu or thrpool over it)";

/// Every interface of this build, by role; within a role, in the order of preference for
/// defaults. Adding an interface is adding its file and one row here.
pub(crate) static TABLE: &[&Descriptor] = &[
    &psync::PSYNC,
    &psync::BLOCK,
    &ramdisk::DESCRIPTOR,
    &nvme::SYNC,
    &vfio::SYNC,
    &nil::SYNC,
    &mmap::DESCRIPTOR,
    &pmem::DESCRIPTOR,
    &nil::ASYNC,
    &emu::DESCRIPTOR,
    &uring::file::DESCRIPTOR,
    &uring::cmd::DESCRIPTOR,
    &libaio::DESCRIPTOR,
    &posix_aio::DESCRIPTOR,
    &thrpool::DESCRIPTOR,
    &vfio::ASYNC,
    &admin_emu::DESCRIPTOR,
    &nvme::ADMIN,
    &vfio::ADMIN,
    &MEM_POSIX,
    &vfio::MEM,
];

/// `mem=posix`: aligned heap memory.
pub(crate) const MEM_POSIX: Descriptor =
    Descriptor::new("posix", Role::Mem, "aligned heap memory", not_pci, Build::Mem).defaults(DevKind::KERNEL);

/// The descriptor of an interface.
pub(crate) fn descriptor(role: Role, name: &str) -> &'static Descriptor {
    TABLE
        .iter()
        .find(|d| d.role == role && d.name == name)
        .unwrap_or_else(|| panic!("interface {}={name} has no row in be::TABLE", role.key()))
}

/// The interface of `role` a kind of device gets when the options name none.
pub(crate) fn default_for(role: Role, kind: DevKind) -> Option<&'static Descriptor> {
    TABLE.iter().copied().find(|d| d.role == role && d.default_for.contains(&kind) && (d.usable)())
}

/// True when this kernel lets the process create an io_uring (probed once).
pub(crate) fn io_uring_usable() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| ::io_uring::IoUring::new(2).is_ok())
}

/// Builds the sync backend for an opened device.
pub(crate) fn new_sync(dev: &Inner, iface: SyncIface) -> Result<Box<dyn SyncIo>, Error> {
    match descriptor(Role::Sync, iface.as_str()).build {
        Build::Sync(new) => new(dev),
        _ => unreachable!("a sync row builds a sync backend"),
    }
}

/// Builds the admin backend for an opened device.
pub(crate) fn new_admin(dev: &Inner, iface: AdminIface) -> Result<Box<dyn AdminIo>, Error> {
    match descriptor(Role::Admin, iface.as_str()).build {
        Build::Admin(new) => new(dev),
        _ => unreachable!("an admin row builds an admin backend"),
    }
}

/// Checks, at open, that an async interface will work for this device (kernel support,
/// tunables that need device features), so failures surface before any queue exists.
pub(crate) fn probe_async(dev: &Inner, iface: AsyncIface) -> Result<(), Error> {
    match descriptor(Role::Async, iface.as_str()).build {
        Build::Async { probe, .. } => probe(dev),
        _ => unreachable!("an async row has a probe"),
    }
}

/// Creates a queue of `depth` slots on the device's async interface.
pub(crate) fn new_queue(dev: &Arc<Inner>, iface: AsyncIface, depth: u32) -> Result<Backend, Error> {
    match descriptor(Role::Async, iface.as_str()).build {
        Build::Async { queue, .. } => queue(dev, depth),
        _ => unreachable!("an async row makes queues"),
    }
}

/// An async interface that needs nothing at open.
pub(crate) fn no_probe(_: &Inner) -> Result<(), Error> {
    Ok(())
}

/// Decodes and checks a command against the device before anything is submitted.
///
/// The checks run on every command, so they are written for the hot path: they produce a
/// small [`Why`] and only a refusal pays for building the full [`Error`] (in a cold
/// function, with the device name and the command in words).
#[inline]
pub(crate) fn prepare(dev: &Inner, cmd: &Cmd, bufs: &[Buffer]) -> Result<Io, Error> {
    match check(dev, cmd, bufs) {
        Ok(io) => Ok(io),
        Err(why) => Err(refuse(dev, cmd, bufs, why)),
    }
}

/// What the checks of a plain one-buffer read or write need, copied out of the device at
/// open into [`Device`](crate::Device) (which every `Queue` holds), so the common command
/// is checked without chasing the device's structures. Anything else (and any refusal)
/// goes through [`prepare`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    nsid: u32,
    /// log2 of the LBA size.
    lba_shift: u32,
    /// LBAs and bytes a fast-checked command may reach; 0 when a geometry value is not a
    /// power of two, so that every range check fails and every command takes [`prepare`].
    nlbas: u64,
    bytes: u64,
    /// Longest fast-checked transfer: the device's maximum, and never more than `bytes`
    /// (so `bytes - len` cannot wrap once `len` has passed it).
    max_transfer: u64,
    read: bool,
    write: bool,
    /// With direct I/O: offset/length and address alignment minus one; 0 otherwise.
    off_mask: u64,
    mem_mask: u64,
}

impl Limits {
    pub(crate) fn new(dev: &Inner) -> Limits {
        let g = &dev.geo;
        let direct = dev.opts.direct;
        let pow2 = |v: u32| v.is_power_of_two();
        let fast = pow2(g.lba_size) && (!direct || (pow2(g.dio_offset_align) && pow2(g.dio_mem_align)));
        let (nlbas, bytes) = if fast { (g.nlbas, g.bytes) } else { (0, 0) };
        Limits {
            nsid: dev.ident.nsid,
            lba_shift: g.lba_size.trailing_zeros(),
            nlbas,
            bytes,
            max_transfer: g.max_transfer.min(bytes),
            // A PCI device's buffers must be its DMA memory: prepare checks that.
            read: !dev.opts.wronly && dev.vfio.is_none(),
            // Writes to a guarded device take prepare, which refuses them.
            write: !dev.opts.rdonly && dev.ident.in_use.is_none() && dev.vfio.is_none(),
            off_mask: if direct { g.dio_offset_align as u64 - 1 } else { 0 },
            mem_mask: if direct { g.dio_mem_align as u64 - 1 } else { 0 },
        }
    }
}

/// The check of a one-buffer read or write that passes every check of [`prepare`], with
/// the same [`Io`]; `None` for everything else (which then takes `prepare`).
#[inline(always)]
pub(crate) fn fast_check(lim: &Limits, cmd: &Cmd, data: &Data) -> Option<Io> {
    match data {
        Data::One(b) => fast_check_buf(lim, cmd, b),
        _ => None,
    }
}

// fast_check_buf tells reads from writes by bit 1 of the opcode.
const _: () = assert!(opc::READ & 2 != 0 && opc::FS_READ & 2 != 0 && opc::WRITE & 2 == 0 && opc::FS_WRITE & 2 == 0);

/// [`fast_check`] of a command with one buffer.
#[inline(always)]
pub(crate) fn fast_check_buf(lim: &Limits, cmd: &Cmd, b: &Buffer) -> Option<Io> {
    let s = &cmd.sqe;
    // The set and the priority in one comparison: a command with a priority takes
    // `prepare`, which refuses it where the interface cannot carry it.
    const NVM: u64 = CmdSet::Nvm as u64;
    const FS: u64 = CmdSet::Fs as u64;
    let (offset, len) = match (cmd.set_and_prio(), s.opcode) {
        (NVM, opc::READ | opc::WRITE) if s.nsid == lim.nsid => {
            // nlb is 1..=65536: slba + nlb cannot wrap once slba has passed nlbas.
            let (slba, nlb) = (s.slba(), s.nlb() as u64);
            let len = nlb << lim.lba_shift;
            if slba >= lim.nlbas || nlb > lim.nlbas - slba || len > lim.max_transfer {
                return None;
            }
            (slba << lim.lba_shift, len)
        }
        (FS, opc::FS_READ | opc::FS_WRITE) => {
            let (offset, len) = (cmd.fs_offset(), cmd.fs_len());
            // 1 <= len <= max_transfer <= bytes (one comparison), then offset + len <= bytes.
            if len.wrapping_sub(1) >= lim.max_transfer || offset > lim.bytes - len {
                return None;
            }
            (offset, len)
        }
        _ => return None,
    };
    // READ (0x02) and FS_READ (0xF2) are the only reads here: bit 1 of the opcode.
    let (op, allowed) = if s.opcode & 2 != 0 { (Op::Read, lim.read) } else { (Op::Write, lim.write) };
    let aligned = (offset | len) & lim.off_mask == 0 && b.as_ptr() as u64 & lim.mem_mask == 0;
    (allowed && b.len() as u64 >= len && aligned).then_some(Io { op, offset, len })
}

/// Why a command was refused, cheap to return.
#[derive(Clone, Copy, Debug)]
enum Why {
    FsOpcode,
    ZeroLength,
    Range { what: &'static str, start: u64, end: Option<u64>, limit: u64, unit: &'static str },
    Nsid,
    Admin,
    ReadOnly,
    WriteOnly,
    MaxTransfer(u64),
    Segments(usize),
    BufferSize(u64),
    Misaligned { what: &'static str, value: u64, align: u64 },
    PassthruBuffer(usize),
    InUse,
    NotDma(usize),
    Prp(vfio::prp::PrpError),
}

#[inline]
fn check(dev: &Inner, cmd: &Cmd, bufs: &[Buffer]) -> Result<Io, Why> {
    let g = &dev.geo;
    let io = match cmd.set {
        CmdSet::Nvm => {
            let s = &cmd.sqe;
            // A command for another namespace: refused, except on a generic char device,
            // where every interface is NVMe passthrough and the kernel refuses it (EINVAL).
            // On a namespace's block device the block-layer interfaces (psync, io_uring, ...)
            // carry no nsid and would run it on this namespace.
            if s.nsid != dev.ident.nsid && dev.ident.kind != DevKind::NvmeChar {
                return Err(Why::Nsid);
            }
            let lba = g.lba_size as u64;
            match s.opcode {
                opc::READ | opc::WRITE | opc::WRITE_ZEROES => {
                    range("LBA range", s.slba(), s.nlb() as u64, g.nlbas, "LBAs")?;
                    let op = match s.opcode {
                        opc::READ => Op::Read,
                        opc::WRITE => Op::Write,
                        _ => Op::WriteZeroes,
                    };
                    Io { op, offset: s.slba() * lba, len: s.nlb() as u64 * lba }
                }
                opc::FLUSH => Io { op: Op::Flush, offset: 0, len: 0 },
                opc::DSM => {
                    let nr = (s.cdw10 & 0xff) + 1;
                    let need = nr as u64 * 16;
                    buffers(need, bufs)?;
                    for r in dsm_ranges(bufs, nr) {
                        range("DSM range", r.slba, r.nlb as u64, g.nlbas, "LBAs")?;
                    }
                    let deallocate = s.cdw11 & 4 != 0;
                    if let Some(why) = write_refused(dev).filter(|_| deallocate) {
                        return Err(why);
                    }
                    return Ok(Io { op: Op::Dsm { nr, deallocate }, offset: 0, len: need });
                }
                _ => Io { op: Op::Passthru, offset: 0, len: 0 },
            }
        }
        CmdSet::Fs => {
            let (offset, len) = (cmd.fs_offset(), cmd.fs_len());
            let op = match cmd.sqe.opcode {
                opc::FS_READ => Op::Read,
                opc::FS_WRITE => Op::Write,
                opc::FS_FLUSH => Op::Flush,
                opc::FS_TRIM => Op::Trim,
                _ => return Err(Why::FsOpcode),
            };
            if matches!(op, Op::Read | Op::Write | Op::Trim) {
                if len == 0 {
                    return Err(Why::ZeroLength);
                }
                range("byte range", offset, len, g.bytes, "bytes")?;
            }
            Io { op, offset, len }
        }
        CmdSet::Admin => return Err(Why::Admin),
    };
    // Every command that may change the medium, passthrough included: `rdonly=1` is a
    // promise (the kernel would let root's NVMe passthrough write through a read-only
    // descriptor), and the write guard's.
    if let Some(why) = write_refused(dev).filter(|_| may_write(cmd, &io)) {
        return Err(why);
    }
    match io.op {
        Op::Read | Op::Write => {
            if io.op == Op::Read && dev.opts.wronly {
                return Err(Why::WriteOnly);
            }
            if io.len > g.max_transfer {
                return Err(Why::MaxTransfer(io.len));
            }
            buffers(io.len, bufs)?;
            if dev.opts.direct {
                direct(g, &io, bufs)?;
            }
        }
        Op::Passthru if matches!(dev.ident.kind, DevKind::NvmeBlock | DevKind::NvmeChar) => {
            passthru_buffers(bufs)?;
        }
        _ => {}
    }
    if dev.vfio.is_some() {
        if let Some(i) = vfio::not_dma(dev, bufs) {
            return Err(Why::NotDma(i));
        }
        if matches!(io.op, Op::Read | Op::Write | Op::Dsm { .. }) {
            vfio::prp_shape(dev, bufs, io.len).map_err(Why::Prp)?;
        }
    }
    Ok(io)
}

/// Why `dev` refuses a command that may change the medium: opened read-only, else the
/// write guard's finding; `None` when it takes one.
#[inline]
fn write_refused(dev: &Inner) -> Option<Why> {
    if dev.opts.rdonly {
        Some(Why::ReadOnly)
    } else if dev.ident.in_use.is_some() {
        Some(Why::InUse)
    } else {
        None
    }
}

/// Whether a checked command may change the medium (see the write guard in `dev`).
#[cold]
fn may_write(cmd: &Cmd, io: &Io) -> bool {
    match io.op {
        Op::Read | Op::Flush => false,
        Op::Dsm { deallocate, .. } => deallocate,
        Op::Passthru => !crate::dev::guard::nvm_opcode_reads_only(cmd.sqe.opcode),
        Op::Write | Op::WriteZeroes | Op::Trim => true,
    }
}

#[inline]
fn range(what: &'static str, start: u64, count: u64, limit: u64, unit: &'static str) -> Result<(), Why> {
    match start.checked_add(count) {
        Some(end) if end <= limit => Ok(()),
        end => Err(Why::Range { what, start, end, limit, unit }),
    }
}

#[inline]
fn buffers(need: u64, bufs: &[Buffer]) -> Result<(), Why> {
    let have = match bufs {
        [one] => one.len() as u64,
        _ if bufs.len() > MAX_SEGMENTS => return Err(Why::Segments(bufs.len())),
        _ => bufs.iter().map(|b| b.len() as u64).sum(),
    };
    if have < need {
        return Err(Why::BufferSize(have));
    }
    Ok(())
}

fn direct(g: &crate::dev::Geometry, io: &Io, bufs: &[Buffer]) -> Result<(), Why> {
    let (mem, off) = (g.dio_mem_align as u64, g.dio_offset_align as u64);
    if io.offset % off != 0 {
        return Err(Why::Misaligned { what: "offset", value: io.offset, align: off });
    }
    if io.len % off != 0 {
        return Err(Why::Misaligned { what: "length", value: io.len, align: off });
    }
    let mut left = io.len;
    for b in bufs {
        if left == 0 {
            break;
        }
        if b.as_ptr() as u64 % mem != 0 {
            return Err(Why::Misaligned { what: "buffer address", value: b.as_ptr() as u64, align: mem });
        }
        let used = left.min(b.len() as u64);
        if used % off != 0 {
            return Err(Why::Misaligned { what: "buffer length", value: used, align: off });
        }
        left -= used;
    }
    Ok(())
}

/// A command whose transfer size ioswitch does not know reaches the device with PRPs
/// covering the buffer's pages, and the device writes as much as the command says: every
/// buffer must start on a page and own whole pages, so nothing outside it can be hit.
fn passthru_buffers(bufs: &[Buffer]) -> Result<(), Why> {
    let page = crate::sys::page_size();
    match bufs.iter().position(|b| b.as_ptr() as usize % page != 0 || b.capacity() % page != 0) {
        Some(i) => Err(Why::PassthruBuffer(i)),
        None => Ok(()),
    }
}

/// Why a checked command with an I/O priority cannot go to a queue of `iface` (`None`
/// for a sync call): only the kernel's asynchronous interfaces carry a priority (io_uring
/// in `sqe->ioprio`, Linux AIO in `aio_reqprio`), and only on reads and writes; anywhere
/// else it would be dropped without a word, so it is refused. `None` when it can go.
#[cold]
#[inline(never)]
pub(crate) fn prio_refused(dev: &Inner, iface: Option<AsyncIface>, io: &Io, cmd: &Cmd) -> Option<Error> {
    let (name, why) = match iface {
        Some(AsyncIface::IoUring | AsyncIface::Libaio) if matches!(io.op, Op::Read | Op::Write) => return None,
        Some(i @ (AsyncIface::IoUring | AsyncIface::Libaio)) => {
            (i.as_str(), "an I/O priority rides on reads and writes only; submit this command without one")
        }
        Some(i) => (i.as_str(), CANNOT_CARRY),
        None => (
            "sync",
            "a sync call carries no per-command I/O priority; submit it on a queue of async=io_uring or \
             async=libaio, or without one",
        ),
    };
    Some(prio_error(dev, name, cmd, why))
}

/// Why an interface other than io_uring and libaio refuses a command with a priority.
const CANNOT_CARRY: &str = "this interface cannot carry a per-command I/O priority; use async=io_uring or \
                            async=libaio, or submit the command without one";

/// The refusal of a command with an I/O priority, naming the device and the interface.
#[cold]
fn prio_error(dev: &Inner, iface: &'static str, cmd: &Cmd, why: &str) -> Error {
    Error::BadCommand {
        dev: dev.uri.clone(),
        iface,
        what: format!("{} with I/O priority {:#06x}", cmd.describe(), cmd.ioprio),
        why: why.into(),
    }
}

/// The same check for admin commands, which do not go through [`prepare`].
pub(crate) fn check_passthru_bufs(dev: &Inner, cmd: &Cmd, bufs: &[Buffer]) -> Result<(), Error> {
    passthru_buffers(bufs).map_err(|why| refuse(dev, cmd, bufs, why))
}

/// Builds the error for a refused command: off the hot path.
#[cold]
#[inline(never)]
fn refuse(dev: &Inner, cmd: &Cmd, bufs: &[Buffer], why: Why) -> Error {
    let g = &dev.geo;
    let bad = |why: String| bad_command(dev, "any", cmd, why);
    match why {
        Why::FsOpcode => bad("unknown file-set opcode".into()),
        Why::ZeroLength => bad("zero-length transfer".into()),
        Why::Range { what, start, end, limit, unit } => {
            Error::OutOfRange { dev: dev.uri.clone(), what, start, end: end.unwrap_or(u64::MAX), limit, unit }
        }
        Why::Nsid => {
            bad(format!("namespace {} is not this device's: it serves namespace {}", cmd.sqe.nsid, dev.ident.nsid))
        }
        Why::Admin => bad("admin commands go to pass_admin, not the I/O path".into()),
        Why::ReadOnly => bad("the device was opened read-only (rdonly=1)".into()),
        Why::InUse => Error::InUse {
            dev: dev.uri.clone(),
            what: cmd.describe(),
            why: dev.ident.in_use.clone().unwrap_or_default(),
        },
        Why::WriteOnly => bad("the device was opened write-only (wronly=1)".into()),
        Why::MaxTransfer(len) => {
            let limit = dev.vfio.as_ref().map(|c| format!(" ({})", c.transfer_limit())).unwrap_or_default();
            bad(format!(
                "{len} bytes exceed the device's max transfer of {} bytes{limit}; split the request",
                g.max_transfer
            ))
        }
        Why::Segments(n) => bad(format!("{n} buffers; at most {MAX_SEGMENTS} per command")),
        Why::BufferSize(have) => {
            // What a DSM's ranges or a read's or write's transfer need.
            let need = match (cmd.set, cmd.sqe.opcode) {
                (CmdSet::Nvm, opc::DSM) => ((cmd.sqe.cdw10 & 0xff) as u64 + 1) * 16,
                (CmdSet::Fs, _) => cmd.fs_len(),
                _ => cmd.sqe.nlb() as u64 * g.lba_size as u64,
            };
            Error::BufferSize { dev: dev.uri.clone(), what: static_name(cmd), need, have }
        }
        Why::Misaligned { what, value, align } => Error::Misaligned { dev: dev.uri.clone(), what, value, align },
        Why::NotDma(i) => bad(not_dma_why(i, &bufs[i])),
        Why::Prp(e) => bad(format!("the buffers cannot be described with PRPs: {}", e.why())),
        Why::PassthruBuffer(i) => bad(format!(
            "NVMe passthrough needs page-aligned buffers that own whole pages (the device may write whole \
             pages); buffer {i} at {:#x} of {} bytes is not; allocate it with Device::alloc",
            bufs[i].as_ptr() as usize,
            bufs[i].len()
        )),
    }
}

/// Why a buffer is refused on a PCI device.
pub(crate) fn not_dma_why(i: usize, b: &Buffer) -> String {
    format!(
        "buffer {i} at {:#x} ({} bytes) is not DMA memory of this device: the controller could not reach it; \
         allocate it with Device::alloc on this device (mem=vfio)",
        b.as_ptr() as usize,
        b.len()
    )
}

/// The refusal of a command by the interface `iface` of `dev` (`any`: by the checks that
/// every command passes), saying why.
#[cold]
pub(crate) fn bad_command(dev: &Inner, iface: &'static str, cmd: &Cmd, why: impl Into<String>) -> Error {
    Error::BadCommand { dev: dev.uri.clone(), iface, what: cmd.describe(), why: why.into() }
}

fn static_name(cmd: &Cmd) -> &'static str {
    match (cmd.set, cmd.sqe.opcode) {
        (CmdSet::Nvm, opc::READ) | (CmdSet::Fs, opc::FS_READ) => "read",
        (CmdSet::Nvm, opc::WRITE) | (CmdSet::Fs, opc::FS_WRITE) => "write",
        (CmdSet::Nvm, opc::DSM) => "dataset management",
        _ => "command",
    }
}

/// The DSM ranges in the first bytes of a command's buffers.
pub(crate) fn dsm_ranges(bufs: &[Buffer], nr: u32) -> impl Iterator<Item = DsmRange> + '_ {
    let first = bufs.first().map(|b| &b[..]).unwrap_or(&[]);
    first.chunks_exact(16).take(nr as usize).map(DsmRange::from_bytes)
}

/// A DSM command's deallocation: `dealloc(offset, len)` for the byte range of each of its
/// `nr` ranges (`lba`: the LBA size), if `deallocate` is set; a DSM without it does
/// nothing. The command's result (0).
pub(crate) fn dsm_dealloc(
    bufs: &[Buffer],
    nr: u32,
    deallocate: bool,
    lba: u64,
    mut dealloc: impl FnMut(u64, u64) -> Result<(), Status>,
) -> Result<u64, Status> {
    if deallocate {
        for r in dsm_ranges(bufs, nr) {
            dealloc(r.slba * lba, r.nlb as u64 * lba)?;
        }
    }
    Ok(0)
}

/// The first `len` bytes of `bufs`, as at most [`MAX_SEGMENTS`] slices.
pub(crate) fn segments(bufs: &mut [Buffer], len: u64) -> impl Iterator<Item = &mut [u8]> {
    let mut left = len as usize;
    bufs.iter_mut().take(MAX_SEGMENTS).map_while(move |b| {
        let take = left.min(b.len());
        left -= take;
        (take > 0).then(|| &mut b[..take])
    })
}

/// The device's file descriptor, for an interface that needs one; refused, naming
/// `iface`, where the device has none.
pub(crate) fn need_fd(dev: &Inner, iface: &str) -> Result<RawFd, Error> {
    match dev.raw_fd() {
        fd if fd < 0 => Err(dev.unsupported(iface, "the device has no file descriptor")),
        fd => Ok(fd),
    }
}

/// A check made at open that succeeds once per process: `probe` runs until it has
/// succeeded (`works` then remembers it).
pub(crate) fn probe_once(works: &OnceLock<()>, probe: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    if works.get().is_none() {
        probe()?;
        let _ = works.set(());
    }
    Ok(())
}

/// The error of an OS call `what` made for device `dev` (opening, mapping, setting up).
#[cold]
pub(crate) fn os_error(dev: &str, what: impl Into<String>, source: std::io::Error) -> Error {
    Error::Os { dev: dev.into(), what: what.into(), source }
}

/// The error of a queue's call `what` that failed with `errno`.
#[cold]
pub(crate) fn queue_errno(dev: &Inner, iface: &'static str, what: &'static str, errno: i32) -> Error {
    Error::Queue { dev: dev.uri.clone(), iface, what, source: std::io::Error::from_raw_os_error(errno) }
}

/// Hands out the completions waiting in `ready`, at most `max`; returns how many.
#[inline]
pub(crate) fn hand_out(ready: &mut VecDeque<Completion>, max: u32, f: &mut impl CompletionSink) -> u32 {
    let mut n = 0;
    while n < max {
        let Some(c) = ready.pop_front() else { break };
        f.put(c);
        n += 1;
    }
    n
}

/// Runs a command that `iface` has no operation for through the device's sync interface,
/// now: its completion and the syscalls that cost. Refused, saying `why_none`, where the
/// device has no sync interface.
pub(crate) fn run_inline(
    dev: &Inner,
    iface: &'static str,
    why_none: &str,
    io: &Io,
    cmd: &Cmd,
    data: Data,
    tag: u64,
) -> Result<(Completion, u64), (Error, Data)> {
    let Some(sync) = dev.sync() else { return Err((bad_command(dev, iface, cmd, why_none), data)) };
    Ok((exec_to_completion(sync, io, cmd, data, tag), sync.syscalls_per_cmd()))
}

/// A submitted command waiting to run through the sync interface (`emu`, `thrpool`).
pub(crate) struct Job {
    pub io: Io,
    pub cmd: Cmd,
    pub data: Data,
    pub tag: u64,
}

impl Job {
    /// Runs it through `sync`: its completion.
    pub(crate) fn run(self, sync: &dyn SyncIo) -> Completion {
        exec_to_completion(sync, &self.io, &self.cmd, self.data, self.tag)
    }
}

/// Runs a command synchronously through the device's sync interface and turns the outcome
/// into a completion: what `emu` and `thrpool` do, and what other async interfaces do for
/// commands they have no native operation for.
pub(crate) fn exec_to_completion(sync: &dyn SyncIo, io: &Io, cmd: &Cmd, mut data: Data, tag: u64) -> Completion {
    match sync.exec(io, cmd, data.bufs_mut()) {
        Ok(result) => Completion { tag, status: Status::OK, result, data },
        Err(status) => Completion { tag, status, result: 0, data },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::testutil::{open, open_uri, temp_in};

    /// xorshift: deterministic, so a failure can be replayed.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// The fast check must accept exactly a subset of what `prepare` accepts, with the same
    /// decoded command: random commands near the edges, over devices with every option
    /// that changes the checks.
    #[test]
    fn the_fast_check_agrees_with_prepare() {
        let t = temp_in(&std::env::temp_dir(), "fastcheck");
        let devs = [
            open(&t, "create=1,size=1MiB,async=nil"),
            open(&t, "direct=1,async=nil"),
            open(&t, "rdonly=1,async=nil"),
            open(&t, "wronly=1,async=nil"),
            open_uri("64KiB", "async=nil"),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let (mut fast, mut total) = (0, 0);
        for dev in &devs {
            let inner = &dev.inner;
            let lim = Limits::new(inner);
            let g = &inner.geo;
            let lba = g.lba_size as u64;
            for _ in 0..20_000 {
                let r = next(&mut seed);
                let near = |v: u64, x: u64| v.saturating_sub(x % 3).saturating_add((x >> 2) % 3);
                let cmd = match r % 6 {
                    0 | 1 => {
                        let nlb = 1 + (r >> 8) % 16;
                        let slba = near(g.nlbas.saturating_sub(nlb), r >> 16) % (g.nlbas + 4);
                        let nsid = if r & (1 << 40) != 0 { inner.ident.nsid + 1 } else { inner.ident.nsid };
                        if r % 6 == 0 {
                            Cmd::read(nsid, slba, nlb as u32)
                        } else {
                            Cmd::write(nsid, slba, nlb as u32)
                        }
                    }
                    2 | 3 => {
                        let len = [0, 1, 511, 512, 4096, 4097, 8192][((r >> 8) % 7) as usize];
                        let off = near(g.bytes.saturating_sub(len), r >> 16) & !((r >> 30) % 2 * 511);
                        if r % 6 == 2 {
                            Cmd::fs_read(off, len)
                        } else {
                            Cmd::fs_write(off, len)
                        }
                    }
                    4 => Cmd::flush(inner.ident.nsid),
                    _ => Cmd::fs_trim((r >> 8) % g.bytes, lba),
                };
                let len = [0usize, 511, 512, 4096, 8192, 16384, 65536][((r >> 44) % 7) as usize];
                let align = [1usize, 512, 4096][((r >> 50) % 3) as usize];
                let buf = Buffer::with_alignment(len, align.max(1), (r >> 52) as usize % 2 * 3).unwrap();
                let data = match (r >> 56) % 4 {
                    0 => Data::None,
                    1 => Data::Vec(vec![buf]),
                    _ => Data::One(buf),
                };
                total += 1;
                if let Some(io) = fast_check(&lim, &cmd, &data) {
                    fast += 1;
                    let full = prepare(inner, &cmd, data.bufs())
                        .unwrap_or_else(|e| panic!("fast check took {cmd:?} that prepare refuses: {e}"));
                    assert_eq!((io.op, io.offset, io.len), (full.op, full.offset, full.len), "{cmd:?}");
                }
            }
        }
        // The test means something only if both paths were taken often.
        assert!(fast > total / 20 && fast < total * 9 / 10, "fast path took {fast} of {total}");
    }

    #[test]
    fn every_interface_of_the_option_enums_has_one_row_and_every_row_an_enum_value() {
        let names = |role: Role| -> Vec<&str> { TABLE.iter().filter(|d| d.role == role).map(|d| d.name).collect() };
        let sync: Vec<&str> = SyncIface::ALL.iter().map(|i| i.as_str()).collect();
        let asyn: Vec<&str> = AsyncIface::ALL.iter().map(|i| i.as_str()).collect();
        let admin: Vec<&str> = AdminIface::ALL.iter().map(|i| i.as_str()).collect();
        let mem: Vec<&str> = crate::opts::MemIface::ALL.iter().map(|i| i.as_str()).collect();
        for (role, want) in [(Role::Sync, sync), (Role::Async, asyn), (Role::Admin, admin), (Role::Mem, mem)] {
            let mut have = names(role);
            let mut want = want;
            have.sort_unstable();
            want.sort_unstable();
            assert_eq!(have, want, "{role:?} rows");
        }
    }

    #[test]
    fn every_kind_gets_an_admin_and_memory_interface_by_default_and_defaults_can_serve_it() {
        use DevKind::*;
        for kind in [File, Block, NvmeBlock, NvmeChar, NvmeCtrl, Ramdisk, NvmePci] {
            assert!(default_for(Role::Admin, kind).is_some(), "{kind:?} has no default admin interface");
            assert!(default_for(Role::Mem, kind).is_some(), "{kind:?} has no default memory interface");
            for d in TABLE.iter().filter(|d| d.default_for.contains(&kind)) {
                assert_eq!((d.refusal)(kind), None, "{} is a default for {kind:?} that refuses it", d.option());
            }
        }
        // Only a controller has no I/O interface.
        assert!(default_for(Role::Sync, NvmeCtrl).is_none() && default_for(Role::Async, NvmeCtrl).is_none());
        for kind in [File, Block, NvmeBlock, NvmeChar, Ramdisk, NvmePci] {
            assert!(default_for(Role::Sync, kind).is_some() && default_for(Role::Async, kind).is_some(), "{kind:?}");
        }
        // A PCI device is the user-space driver's alone, and the driver serves nothing else.
        for d in TABLE {
            assert_eq!((d.refusal)(NvmePci).is_none(), d.name == "vfio", "{} on a PCI device", d.option());
            if d.name == "vfio" {
                for kind in [File, Block, NvmeBlock, NvmeChar, NvmeCtrl, Ramdisk] {
                    assert!((d.refusal)(kind).is_some(), "{} serves {kind:?}", d.option());
                }
            }
        }
    }

    #[test]
    fn what_serves_a_device_leaves_out_what_its_options_refuse_at_open() {
        let serving = |role: Role, opts: &str| -> Vec<&str> {
            let opts: crate::Opts = opts.parse().unwrap();
            TABLE.iter().filter(|d| d.role == role && d.serves(DevKind::File, &opts)).map(|d| d.name).collect()
        };
        // Without osync a file may be served by interfaces that write no file; with it,
        // not: open refuses them (Opts::validate), so the listing must too.
        for name in ["nil", "mmap", "pmem"] {
            assert!(serving(Role::Sync, "").contains(&name), "sync={name} serves a file");
            assert!(!serving(Role::Sync, "osync=dsync").contains(&name), "sync={name} listed with osync");
            assert!(!serving(Role::Sync, "osync=sync,async=io_uring").contains(&name), "sync={name} with osync");
        }
        assert!(serving(Role::Async, "").contains(&"nil") && !serving(Role::Async, "osync=dsync").contains(&"nil"));
        assert!(serving(Role::Sync, "osync=dsync").contains(&"psync"));
        for d in
            TABLE.iter().filter(|d| d.role == Role::Sync && d.serves(DevKind::File, &"osync=dsync".parse().unwrap()))
        {
            let named: Result<crate::Opts, _> = format!("osync=dsync,{}", d.option()).parse();
            assert!(named.is_ok(), "{} is listed with osync but refused: {named:?}", d.option());
        }
        // The kind's refusal still counts.
        assert!(!serving(Role::Async, "").contains(&"io_uring_cmd"));
    }

    #[test]
    fn tunables_are_option_keys_and_fio_engines_belong_to_one_interface_per_role() {
        let keys: Vec<&str> = crate::opts::KEYS.iter().map(|(k, _)| *k).collect();
        let mut seen: Vec<(Role, &str)> = Vec::new();
        for d in TABLE {
            for (k, _) in d.tunables {
                assert!(keys.contains(k), "{} names tunable {k}, which is no option key", d.option());
            }
            for e in d.fio_engines {
                assert!(!seen.contains(&(d.role, *e)), "fio engine {e} runs on two {:?} interfaces", d.role);
                seen.push((d.role, *e));
            }
        }
        // Every tunable Opts knows is some interface's.
        let o: crate::Opts =
            "sqpoll,sqpoll_cpu=0,iopoll,register_files,register_buffers,single_issuer,threads=2,psync_call=preadv2,rwf_hipri,\
             pmem_force,pmem_populate"
                .parse()
                .unwrap();
        for t in o.tunables_set() {
            assert!(
                TABLE.iter().any(|d| d.tunables.iter().any(|(k, _)| *k == t)),
                "tunable {t} belongs to no interface"
            );
        }
    }

    /// The longest transfer: the random commands above never reach it (a file's is 65536
    /// LBAs), so both sides of the limit are tried here on a sparse file larger than it.
    #[test]
    fn the_fast_check_stops_at_the_longest_transfer() {
        let t = temp_in(&std::env::temp_dir(), "fastmax");
        let dev = open(&t, "create=1,size=64MiB,async=nil");
        let lim = Limits::new(&dev.inner);
        let max = dev.geometry().max_transfer;
        assert!(max < dev.geometry().bytes, "the file must be larger than the longest transfer");
        let buf = Buffer::alloc(max as usize + 4096, 4096).unwrap();
        for (len, ok) in [(max, true), (max + 512, false)] {
            let cmd = Cmd::fs_read(0, len);
            let full = prepare(&dev.inner, &cmd, std::slice::from_ref(&buf));
            assert_eq!(full.is_ok(), ok, "prepare of {len} bytes (longest transfer {max})");
            assert_eq!(fast_check_buf(&lim, &cmd, &buf).is_some(), ok, "fast check of {len} bytes");
        }
    }

    /// `rdonly=1` refuses every command that may change the medium before any interface
    /// sees it, NVMe passthrough included (the kernel lets root's passthrough write
    /// through a read-only descriptor); commands that only read pass this check.
    #[test]
    fn read_only_refuses_every_command_that_may_write_passthrough_included() {
        let t = temp_in(&std::env::temp_dir(), "rdonlycmds");
        drop(open(&t, "create=1,size=1MiB"));
        let dev = open(&t, "rdonly=1");
        let raw = |opcode: u8| Cmd::io(crate::Sqe { opcode, nsid: dev.inner.ident.nsid, ..crate::Sqe::default() });
        let dsm_range = Buffer::alloc(4096, 4096).unwrap();
        let writes = [
            ("write", Cmd::write(1, 0, 1)),
            ("fs write", Cmd::fs_write(0, 4096)),
            ("write zeroes", Cmd::write_zeroes(1, 0, 8)),
            ("trim", Cmd::fs_trim(0, 4096)),
            ("deallocate", Cmd::dsm(1, 1, true)),
            ("zone reset", Cmd::zone_mgmt_send(1, 0, crate::spec::zns::ZoneAction::Reset, true)),
            ("zone append", Cmd::zone_append(1, 0, 1)),
            ("write uncorrectable", raw(0x04)),
            ("vendor command", raw(0x81)),
        ];
        for (what, cmd) in writes {
            let e = prepare(&dev.inner, &cmd, std::slice::from_ref(&dsm_range)).expect_err(what).to_string();
            assert!(e.contains("read-only (rdonly=1)"), "{what}: {e}");
        }
        // Reads, flush, verify, compare and a non-deallocating DSM are not refused as
        // writes (a file may refuse some of them later, for another reason).
        for (what, cmd) in [
            ("read", Cmd::read(1, 0, 1)),
            ("flush", Cmd::flush(1)),
            ("verify", raw(0x0C)),
            ("compare", raw(0x05)),
            ("dsm hint", Cmd::dsm(1, 1, false)),
        ] {
            if let Err(e) = prepare(&dev.inner, &cmd, std::slice::from_ref(&dsm_range)) {
                assert!(!e.to_string().contains("rdonly"), "{what}: {e}");
            }
        }
    }
}
