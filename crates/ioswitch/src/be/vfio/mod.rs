//! `vfio`: a user-space NVMe PCIe driver over VFIO, the sync, async, admin and memory
//! interface of a PCI device (`0000:00:05.0`, `pci:0000:00:05.0`) bound to vfio-pci.
//!
//! - [`ctrl`]: the controller (VFIO setup, reset/enable, admin queue, queue creation,
//!   shutdown); [`qpair`]: one polled queue pair (rings, doorbells, phase tags, the
//!   command table); [`prp`]: PRP entries and lists; [`regs`]: controller registers;
//!   [`mem`]: hugepage DMA memory mapped into the IOMMU.
//! - `dma=uio` (tunable): the same driver on a controller bound to uio_pci_generic, where
//!   there is no IOMMU: BAR0 through sysfs `resource0`, DMA memory at the physical
//!   addresses of pinned hugepages. No isolation (docs/PCI.md); testing only.
//! - Each [`Queue`](crate::Queue) gets its own I/O queue pair, polled (no interrupts,
//!   no syscalls per I/O), deleted when the queue is dropped. The sync interface has one
//!   queue pair of its own, behind a lock (one command at a time); admin commands are
//!   serialised on the admin queue.
//! - Data must be DMA memory of this device ([`Device::alloc`](crate::Device::alloc)
//!   with `mem=vfio`, the default here): any other buffer is refused before anything is
//!   submitted.
//! - Completions carry the controller's own status; the result is DW0-1.

pub(crate) mod ctrl;
pub(crate) mod mem;
pub(crate) mod prp;
pub(crate) mod qpair;
pub(crate) mod regs;

use super::nvme::{wire, Ask, WireData};
use super::{AdminIo, AsyncQueue, Backend, Build, Descriptor, Io, Role, SyncIo, MAX_SEGMENTS};
use crate::buf::{Buffer, Data};
use crate::cmd::Cmd;
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::opts::DmaMode;
use crate::queue::{Completion, CompletionSink};
use crate::spec::{errno_to_status, Sqe, Status};
use ctrl::Ctrl;
use mem::{Chunk, Pool};
use qpair::{CidTable, QueuePair};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why vfio cannot serve a kind of device.
fn refusal(kind: DevKind) -> Option<&'static str> {
    match kind {
        DevKind::NvmePci => None,
        _ => Some("vfio drives an NVMe controller by its PCI address (0000:00:05.0), bound to vfio-pci"),
    }
}

/// The refusal of every other interface for a PCI device.
pub(crate) const PCI_ONLY_VFIO: &str = "a PCI device is driven by the user-space driver: use vfio";

fn ctrl_of(dev: &Inner) -> Result<Arc<Ctrl>, Error> {
    dev.vfio.clone().ok_or_else(|| dev.unsupported("vfio", "the device was not opened through vfio"))
}

/// A row of the interface table: every role of vfio serves PCI devices (the default
/// there) and takes the one tunable `dma=vfio|uio` (how the controller reaches memory).
const fn row(role: Role, summary: &'static str, build: Build) -> Descriptor {
    Descriptor::new("vfio", role, summary, refusal, build).defaults(&[DevKind::NvmePci]).tunables(&[("dma", None)])
}

/// `sync=vfio`.
pub(crate) const SYNC: Descriptor = row(
    Role::Sync,
    "user-space NVMe driver over vfio-pci (polled)",
    Build::Sync(|dev| Ok(Box::new(VfioSync::new(dev)?))),
);

/// `async=vfio`.
pub(crate) const ASYNC: Descriptor = row(
    Role::Async,
    "user-space NVMe driver over vfio-pci: a polled queue pair per queue",
    Build::Async { probe: |dev| ctrl_of(dev).map(drop), queue: new_queue },
);

/// `admin=vfio`.
pub(crate) const ADMIN: Descriptor = row(
    Role::Admin,
    "the admin queue of the user-space NVMe driver",
    Build::Admin(|dev| Ok(Box::new(VfioAdmin { ctrl: ctrl_of(dev)? }))),
);

/// `mem=vfio`.
pub(crate) const MEM: Descriptor = row(
    Role::Mem,
    "2 MiB hugepages mapped into the device's IOMMU (dma=uio: pinned, at physical addresses)",
    Build::Mem,
);

/// What identify says about the namespace, through the admin queue.
struct Asker<'a> {
    ctrl: &'a Ctrl,
    nsid: u32,
}

impl Ask for Asker<'_> {
    fn nsid(&self) -> io::Result<u32> {
        Ok(self.nsid)
    }
    fn identify(&self, cns: u8, nsid: u32, csi: u8) -> Result<Buffer, Status> {
        self.ctrl.identify(cns, nsid, csi)
    }
    fn zone_report(&self, nsid: u32, rep: &mut Buffer) -> Result<u64, Status> {
        self.ctrl.zone_report0(nsid, rep)
    }
}

/// The first active namespace above `above` (Identify Active Namespace ID list).
fn first_active(ctrl: &Ctrl, above: u32) -> Result<Option<u32>, Status> {
    let page = ctrl.identify(crate::spec::idfy::cns::NS_ACTIVE_LIST, above, 0)?;
    Ok(page.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).find(|&n| n != 0))
}

/// Opens the controller at `addr` and identifies namespace `nsid` (default: the first
/// active one).
pub(crate) fn open(
    uri: &str,
    addr: &str,
    nsid: Option<u32>,
    dma: DmaMode,
) -> Result<(Arc<Ctrl>, super::nvme::NsInfo), Error> {
    let ctrl = Arc::new(Ctrl::open(addr, dma)?);
    let failed = |what: &str, status: Status| Error::Command { dev: uri.into(), what: what.into(), status };
    let active = |above| first_active(&ctrl, above).map_err(|s| failed("Identify Active Namespace ID list", s));
    let nsid = match nsid {
        Some(n) => n,
        None => active(0)?
            .ok_or_else(|| Error::BadUri { uri: uri.into(), why: "the controller has no active namespace".into() })?,
    };
    // The list from nsid - 1 on starts with nsid when it is active.
    if active(nsid.saturating_sub(1))? != Some(nsid) {
        return Err(Error::BadOpt { key: "nsid".into(), why: format!("namespace {nsid} is not active on {addr}") });
    }
    let mut info = super::nvme::ns_info_from(uri, &Asker { ctrl: &ctrl, nsid }, |_| None)?;
    // The controller's MDTS, capped by the driver's PRP list pages per command.
    if info.max_transfer > ctrl.max_transfer {
        info.max_transfer = (ctrl.max_transfer / info.lba_size as u64).max(1) * info.lba_size as u64;
    }
    Ok((ctrl, info))
}

/// Index of the first buffer of `bufs` that is not DMA memory of this device.
pub(crate) fn not_dma(dev: &Inner, bufs: &[Buffer]) -> Option<usize> {
    let ctrl = dev.vfio.as_ref()?;
    bufs.iter().position(|b| !ctrl.pool.contains(b.as_ptr() as u64, b.len() as u64))
}

/// Why an admin command's data `bufs` (each buffer whole) cannot go to the controller
/// of `dev`: more than its max transfer (MDTS applies to admin commands too), or a shape
/// PRPs cannot describe. The admin queue's PRP list pages hold the largest transfer, so
/// lists chain as on the I/O queues.
pub(crate) fn admin_refusal(dev: &Inner, bufs: &[Buffer]) -> Option<String> {
    let ctrl = dev.vfio.as_ref()?;
    let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
    admin_too_long(total, ctrl.max_transfer, || ctrl.transfer_limit())
        .or_else(|| prp_shape(dev, bufs, total).err().map(prp::PrpError::why))
}

/// The refusal of `total` bytes of admin data over the max transfer `max`.
fn admin_too_long(total: u64, max: u64, why: impl FnOnce() -> String) -> Option<String> {
    (total > max).then(|| {
        format!("{total} bytes of data exceed the device's max transfer of {max} bytes ({}); read less", why())
    })
}

/// Whether the first `len` bytes of `bufs` can be described with PRPs on `dev` (the
/// first buffer dword-aligned, every other starting on a page, every one but the last
/// ending on one, at most as many pages as a command's PRP list pages hold). Host and
/// device addresses agree on the offset in a page (chunks are mapped at 2 MiB-aligned
/// addresses), so the buffers' own addresses decide.
pub(crate) fn prp_shape(dev: &Inner, bufs: &[Buffer], len: u64) -> Result<(), prp::PrpError> {
    let Some(ctrl) = dev.vfio.as_ref() else { return Ok(()) };
    let max = ctrl.max_entries();
    let mut left = len;
    let pieces = bufs.iter().map_while(|b| {
        let take = left.min(b.len() as u64);
        left -= take;
        (take > 0).then_some((b.as_ptr() as u64, take))
    });
    prp::entries(pieces, max, |_, _| {}).map(drop)
}

/// A command that could not be put into a submission entry.
enum Fail {
    /// A buffer that is not DMA memory of the device.
    NotDma(usize),
    /// The command cannot be described (PRP rules, file-set command on whole LBAs).
    Bad(String),
}

impl Fail {
    fn status(&self) -> Status {
        match self {
            Fail::NotDma(_) => errno_to_status(libc::EFAULT),
            Fail::Bad(_) => errno_to_status(libc::EINVAL),
        }
    }
    fn error(self, dev: &str, cmd: &Cmd) -> Error {
        let why = match self {
            Fail::NotDma(i) => format!(
                "buffer {i} is not DMA memory of this device; allocate it with Device::alloc on the device (mem=vfio)"
            ),
            Fail::Bad(why) => why,
        };
        Error::BadCommand { dev: dev.into(), iface: "vfio", what: cmd.describe(), why }
    }
}

/// The device pieces of one command's buffers: on the stack up to [`Pieces::SMALL`]
/// (nearly every command: one buffer, or a few), else on the heap (many vectored
/// buffers, or under `dma=uio` buffers spanning many hugepages).
struct Pieces {
    small: [(u64, u64); Pieces::SMALL],
    n: usize,
    big: Vec<(u64, u64)>,
}

impl Pieces {
    const SMALL: usize = 8;

    fn new() -> Pieces {
        Pieces { small: [(0, 0); Pieces::SMALL], n: 0, big: Vec::new() }
    }

    fn push(&mut self, p: (u64, u64)) {
        if self.n < Pieces::SMALL {
            self.small[self.n] = p;
        } else {
            if self.big.is_empty() {
                self.big.extend_from_slice(&self.small);
            }
            self.big.push(p);
        }
        self.n += 1;
    }

    fn as_slice(&self) -> &[(u64, u64)] {
        if self.n <= Pieces::SMALL {
            &self.small[..self.n]
        } else {
            &self.big
        }
    }
}

/// The device pieces of `len` bytes at `addr` (see [`Chunk::pieces`]): from the chunks
/// seen so far, else from the pool (a chunk made since), whose chunks are then
/// remembered. False when the bytes are not DMA memory of the device.
fn dev_pieces(pool: &Pool, chunks: &mut Vec<Arc<Chunk>>, addr: u64, len: u64, mut put: impl FnMut(u64, u64)) -> bool {
    if chunks.iter().any(|c| c.pieces(addr, len, &mut put)) {
        return true;
    }
    *chunks = pool.chunks();
    chunks.iter().any(|c| c.pieces(addr, len, &mut put))
}

/// The submission entry of a checked command with command id `cid` on `qp`: the data
/// pointer from the buffers (PRP list in the command id's page), or the driver-built
/// data of a file-set trim.
#[allow(clippy::too_many_arguments)]
fn build(
    pool: &Pool,
    chunks: &mut Vec<Arc<Chunk>>,
    qp: &QueuePair,
    io: &Io,
    cmd: &Cmd,
    nsid: u32,
    lba: u64,
    bufs: &[Buffer],
    cid: u16,
) -> Result<Sqe, Fail> {
    let w = wire(io, cmd, nsid, lba, bufs).map_err(|why| Fail::Bad(why.into()))?;
    let mut sqe = w.sqe;
    sqe.cid = cid;
    sqe.flags &= !0xc0; // PRPs, not SGLs
    sqe.mptr = 0;
    sqe.dptr = match w.data {
        WireData::None => [0, 0],
        WireData::Range(r) => [qp.write_scratch(cid, &r.to_bytes()), 0],
        WireData::Bufs(len) => {
            let mut pieces = Pieces::new();
            let mut left = len;
            for (i, b) in bufs.iter().enumerate().take(MAX_SEGMENTS) {
                if left == 0 {
                    break;
                }
                let take = left.min(b.len() as u64);
                if !dev_pieces(pool, chunks, b.as_ptr() as u64, take, |at, len| pieces.push((at, len))) {
                    return Err(Fail::NotDma(i));
                }
                left -= take;
            }
            if left != 0 {
                return Err(Fail::Bad("the buffers are shorter than the transfer".into()));
            }
            let (p1, p2) = qp.describe(cid, pieces.as_slice()).map_err(|e| Fail::Bad(e.why()))?;
            [p1, p2]
        }
    };
    Ok(sqe)
}

/// How long a queue waits for a completion before it reports the controller as stuck.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// The sync interface: one queue pair, one command at a time.
struct VfioSync {
    ctrl: Arc<Ctrl>,
    q: Mutex<SyncQ>,
}

struct SyncQ {
    qp: QueuePair,
    chunks: Vec<Arc<Chunk>>,
    nsid: u32,
    lba: u64,
    /// False once a command timed out: the queue's state is unknown.
    usable: bool,
}

impl VfioSync {
    fn new(dev: &Inner) -> Result<VfioSync, Error> {
        let ctrl = ctrl_of(dev)?;
        let qp = ctrl.create_qpair(1)?;
        let q = SyncQ { qp, chunks: Vec::new(), nsid: dev.ident.nsid, lba: dev.geo.lba_size as u64, usable: true };
        Ok(VfioSync { ctrl, q: Mutex::new(q) })
    }
}

impl SyncIo for VfioSync {
    fn exec(&self, io: &Io, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        if !q.usable {
            return Err(errno_to_status(libc::EIO));
        }
        let SyncQ { qp, chunks, nsid, lba, .. } = &mut *q;
        let sqe = build(&self.ctrl.pool, chunks, qp, io, cmd, *nsid, *lba, bufs, 0).map_err(|f| f.status())?;
        let r = self.ctrl.run(qp, &sqe, IO_TIMEOUT);
        if r.is_err_and(|s| s.errno() == Some(libc::ETIMEDOUT)) {
            q.usable = false;
        }
        r
    }

    fn syscalls_per_cmd(&self) -> u64 {
        0
    }
}

impl Drop for VfioSync {
    fn drop(&mut self) {
        let q = self.q.get_mut().unwrap_or_else(|e| e.into_inner());
        if !self.ctrl.delete_qpair(&q.qp) {
            // The controller may still use the rings: never reuse their memory.
            q.qp.leak();
        }
    }
}

/// The admin interface.
struct VfioAdmin {
    ctrl: Arc<Ctrl>,
}

impl AdminIo for VfioAdmin {
    fn admin(&self, cmd: &Cmd, bufs: &mut [Buffer]) -> Result<u64, Status> {
        let mut pieces = Vec::with_capacity(bufs.len());
        let pool = &self.ctrl.pool;
        if !bufs.iter().all(|b| pool.pieces(b.as_ptr() as u64, b.len() as u64, |at, n| pieces.push((at, n)))) {
            return Err(errno_to_status(libc::EFAULT));
        }
        self.ctrl.admin_iova(cmd.sqe, &pieces)
    }
}

/// An async queue: its own polled queue pair.
pub(crate) struct VfioQueue {
    ctrl: Arc<Ctrl>,
    uri: String,
    qp: QueuePair,
    table: CidTable<(u64, Data)>,
    chunks: Vec<Arc<Chunk>>,
    nsid: u32,
    lba: u64,
    pushed: u32,
    /// A failure found by a reap after it handed out completions, for the next reap.
    failed: Option<Error>,
}

fn new_queue(dev: &Arc<Inner>, depth: u32) -> Result<Backend, Error> {
    let ctrl = ctrl_of(dev)?;
    let qp = ctrl.create_qpair(depth)?;
    Ok(Backend::Vfio(Box::new(VfioQueue {
        ctrl,
        uri: dev.uri.clone(),
        qp,
        table: CidTable::new(depth as u16),
        chunks: Vec::new(),
        nsid: dev.ident.nsid,
        lba: dev.geo.lba_size as u64,
        pushed: 0,
        failed: None,
    })))
}

impl AsyncQueue for VfioQueue {
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if self.qp.sq.is_full() {
            return Err((Error::Busy { depth: self.qp.sq.size as u32 - 1 }, data));
        }
        // The Queue in front keeps at most depth commands in flight, one command id each.
        let cid = match self.table.insert((tag, data)) {
            Ok(cid) => cid,
            Err((_, data)) => return Err((Error::Busy { depth: self.qp.sq.size as u32 - 1 }, data)),
        };
        let bufs = self.table.get(cid).map(|(_, d)| d.bufs()).unwrap_or(&[]);
        match build(&self.ctrl.pool, &mut self.chunks, &self.qp, io, cmd, self.nsid, self.lba, bufs, cid) {
            Ok(sqe) => {
                self.qp.push(&sqe);
                self.pushed += 1;
                Ok(())
            }
            Err(f) => {
                let (_, data) = self.table.take(cid).expect("inserted above");
                Err((f.error(&self.uri, cmd), data))
            }
        }
    }

    fn commit(&mut self) -> Result<u32, Error> {
        self.qp.ring(self.ctrl.bar());
        Ok(std::mem::take(&mut self.pushed))
    }

    fn reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut n = 0;
        let start = Instant::now();
        loop {
            let table = &mut self.table;
            self.qp.poll(self.ctrl.bar(), max - n, |c| {
                if let Some((tag, data)) = table.take(c.cid) {
                    n += 1;
                    f.put(Completion { tag, status: Status::from_cqe_status(c.status), result: c.result, data });
                }
            });
            if n >= min || n >= max {
                return Ok(n);
            }
            if start.elapsed() > IO_TIMEOUT {
                let e = Error::Os {
                    dev: self.uri.clone(),
                    what: format!("waiting for completions on I/O queue {}", self.qp.qid),
                    source: io::Error::from_raw_os_error(libc::ETIMEDOUT),
                };
                if n > 0 {
                    self.failed = Some(e);
                    return Ok(n);
                }
                return Err(e);
            }
            std::hint::spin_loop();
        }
    }

    fn syscalls(&self) -> u64 {
        0
    }
}

impl Drop for VfioQueue {
    fn drop(&mut self) {
        // Deleting the submission queue ends every command still in it: then their
        // buffers are the host's again. If the controller refused, nothing the commands
        // carried (nor the rings) may be freed.
        if self.ctrl.delete_qpair(&self.qp) {
            drop(self.table.drain());
        } else {
            self.table.drain().into_iter().for_each(std::mem::forget);
            self.qp.leak();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{admin_too_long, ctrl, prp};
    use crate::be::testutil::temp_in;
    use crate::{Device, Error, Opts};

    #[test]
    fn pieces_stay_on_the_stack_up_to_eight_then_move_to_the_heap_in_order() {
        let mut p = super::Pieces::new();
        for i in 0..8u64 {
            p.push((i, 1));
        }
        assert!(p.big.is_empty() && p.as_slice().len() == 8);
        for i in 8..20u64 {
            p.push((i, 1));
        }
        assert_eq!(p.as_slice(), (0..20u64).map(|i| (i, 1)).collect::<Vec<_>>());
    }

    #[test]
    fn admin_data_chains_list_pages_up_to_mdts_and_longer_data_is_refused_naming_it() {
        // The admin queue's list pages hold the driver's largest transfer, at an offset.
        let most = prp::entries_for(prp::DRIVER_MAX);
        assert_eq!(prp::list_pages(most), ctrl::ADMIN_LIST_PAGES);
        assert!(prp::max_entries(ctrl::ADMIN_LIST_PAGES) >= most);
        let mdts = || "the controller's MDTS is 10 (2^10 x 4096 = 4194304 bytes)".to_string();
        assert_eq!(admin_too_long(4 << 20, 4 << 20, mdts), None, "MDTS itself is allowed");
        let e = admin_too_long((4 << 20) + 4096, 4 << 20, mdts).expect("refused");
        assert!(
            e.contains("4198400 bytes") && e.contains("max transfer of 4194304 bytes") && e.contains("MDTS is 10"),
            "{e}"
        );
    }

    #[test]
    fn vfio_on_a_path_or_a_ramdisk_is_refused_at_open_with_the_reason() {
        let t = temp_in(&std::env::temp_dir(), "vfio-path");
        let file = format!("{}", t.0.display());
        for (uri, opts) in [
            (file.as_str(), "create=1,size=64KiB,sync=vfio"),
            (file.as_str(), "create=1,size=64KiB,async=vfio"),
            (file.as_str(), "create=1,size=64KiB,admin=vfio"),
            (file.as_str(), "create=1,size=64KiB,mem=vfio"),
            ("1MiB", "async=vfio"),
        ] {
            let o: Opts = opts.parse().unwrap();
            match Device::open(uri, &o) {
                Err(e @ Error::Unsupported { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains("vfio") && msg.contains("PCI address"), "{opts}: {msg}");
                }
                Err(e) => panic!("{opts}: {e:?}"),
                Ok(_) => panic!("{uri} {opts}: opened"),
            }
        }
    }
}
