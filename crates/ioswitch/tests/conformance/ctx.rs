//! What the cases work with: one cell's context (`Ctx`), commands run the same way through
//! `Device::pass` and through a `Queue` (`Runner`), and the data helpers around them.

use crate::rows::{Col, Dealloc, NvmeNs, RowKind};
use crate::QD;
use ioswitch::cmd::{opc, CmdSet, DsmRange};
use ioswitch::{Buffer, Cmd, Completion, Data, Device, Error, Queue, Status};
use ioswitch_testkit::lock;
use ioswitch_testkit::pattern::{compare, fill, SENTINEL};
use std::fs;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(crate) fn split(pos: u64, len: u64, chunk: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    let mut p = pos;
    while p < pos + len {
        let l = chunk.min(pos + len - p);
        v.push((p, l));
        p += l;
    }
    v
}

pub(crate) fn buf_ids(d: &Data) -> Vec<u64> {
    d.bufs().iter().map(|b| b.id()).collect()
}

pub(crate) fn data_bytes(d: &Data) -> Vec<u8> {
    let mut v = Vec::with_capacity(d.total_len() as usize);
    for b in d.bufs() {
        v.extend_from_slice(b);
    }
    v
}

// ---------------------------------------------------------------------------------------
// Running commands the same way through `Device::pass` and through a `Queue`
// ---------------------------------------------------------------------------------------

/// What happened to one command.
pub(crate) enum Outcome {
    /// Refused before any I/O (by `pass` or by `submit`), with the data handed back.
    Rejected(Error, Data),
    /// It ran; the status says how it went.
    Done { status: Status, result: u64, data: Data },
}

pub(crate) fn pass_one(dev: &Device, cmd: &Cmd, mut data: Data) -> Outcome {
    match dev.pass(cmd, data.bufs_mut()) {
        Ok(result) => Outcome::Done { status: Status::OK, result, data },
        Err(Error::Command { status, .. }) => Outcome::Done { status, result: 0, data },
        Err(e) => Outcome::Rejected(e, data),
    }
}

/// Takes completions into `out` by tag, checking that every tag is known, completes once,
/// and hands back the buffers it was submitted with.
pub(crate) fn absorb(got: &mut Vec<Completion>, out: &mut [Option<Outcome>], ids: &[Vec<u64>]) -> Result<(), String> {
    for c in got.drain(..) {
        let i = usize::try_from(c.tag)
            .ok()
            .filter(|&i| i < ids.len())
            .ok_or_else(|| format!("a completion carries tag {}, which was never submitted", c.tag))?;
        ensure!(out[i].is_none(), "tag {i} completed twice");
        let back = buf_ids(&c.data);
        ensure!(
            back == ids[i],
            "the completion of tag {i} handed back buffers {back:?}; it was submitted with {:?}",
            ids[i]
        );
        out[i] = Some(Outcome::Done { status: c.status, result: c.result, data: c.data });
    }
    Ok(())
}

/// Submits `ops` in order, keeping at most the queue's depth in flight, then drains.
pub(crate) fn run_async(q: &mut Queue, ops: Vec<(Cmd, Data)>) -> Result<Vec<Outcome>, String> {
    let n = ops.len();
    let mut out: Vec<Option<Outcome>> = Vec::new();
    out.resize_with(n, || None);
    let mut ids: Vec<Vec<u64>> = Vec::with_capacity(n);
    let mut got: Vec<Completion> = Vec::new();
    let cap = q.capacity();
    for (i, (cmd, data)) in ops.into_iter().enumerate() {
        ids.push(buf_ids(&data));
        if q.outstanding() >= cap {
            let before = q.outstanding();
            let r = q.wait(1, |c| got.push(c)).map_err(|e| format!("wait(1) with {before} outstanding: {e}"))?;
            ensure!(r >= 1, "wait(1) reaped nothing with {before} commands outstanding");
            ensure!(r as usize == got.len(), "wait returned {r} but called back {} times", got.len());
            absorb(&mut got, &mut out, &ids)?;
        }
        if let Err(rej) = q.submit(&cmd, data, i as u64) {
            ensure!(
                !matches!(rej.error, Error::Busy { .. }),
                "submit #{i} said Busy with {} of {cap} slots in use",
                q.outstanding()
            );
            let back = buf_ids(&rej.data);
            ensure!(back == ids[i], "a refused submit handed back buffers {back:?}, not the {:?} given", ids[i]);
            out[i] = Some(Outcome::Rejected(rej.error, rej.data));
        }
    }
    let before = q.outstanding();
    let r = q.drain(|c| got.push(c)).map_err(|e| format!("drain with {before} outstanding: {e}"))?;
    ensure!(r == before, "drain reaped {r} with {before} outstanding");
    ensure!(got.len() == r as usize, "drain returned {r} but called back {} times", got.len());
    absorb(&mut got, &mut out, &ids)?;
    ensure!(q.outstanding() == 0, "{} commands still outstanding after drain", q.outstanding());
    out.into_iter().enumerate().map(|(i, o)| o.ok_or_else(|| format!("command #{i} never completed"))).collect()
}

/// Runs commands through the sync interface (`pass`) or a queue of the async one.
/// Depth-`QD` runners of a cell share one queue (a queue must stay usable case after
/// case, and creating queues is slow for some interfaces); a runner whose case failed
/// drops its queue instead of handing it on.
pub(crate) struct Runner<'a> {
    pub(crate) dev: Device,
    pub(crate) q: Option<Queue>,
    pub(crate) home: Option<&'a Mutex<Option<Queue>>>,
    /// NVMe passthrough: a completion's result is DW0-1, not bytes moved (see `run`).
    pub(crate) passthru: bool,
    pub(crate) lba: u64,
}

impl<'a> Runner<'a> {
    pub(crate) fn new(ctx: &'a Ctx, depth: u32) -> Result<Runner<'a>, String> {
        if !ctx.is_async() {
            return Ok(Runner { dev: ctx.dev.clone(), q: None, home: None, passthru: ctx.passthru, lba: ctx.lba });
        }
        let home = (depth == QD).then_some(&ctx.shared);
        let q = match home.and_then(|h| lock(h).take()) {
            Some(q) => q,
            None => ctx.dev.queue(depth).map_err(|e| format!("dev.queue({depth}): {e}"))?,
        };
        Ok(Runner { dev: ctx.dev.clone(), q: Some(q), home, passthru: ctx.passthru, lba: ctx.lba })
    }

    /// Bytes a read or write command moves (`None` for other commands).
    pub(crate) fn moves(&self, c: &Cmd) -> Option<u64> {
        match (c.set, c.sqe.opcode) {
            (CmdSet::Nvm, opc::READ | opc::WRITE) => Some(c.sqe.nlb() as u64 * self.lba),
            (CmdSet::Fs, opc::FS_READ | opc::FS_WRITE) => Some(c.fs_len()),
            _ => None,
        }
    }

    pub(crate) fn run(&mut self, ops: Vec<(Cmd, Data)>) -> Result<Vec<Outcome>, String> {
        let moves: Vec<Option<u64>> = ops.iter().map(|(c, _)| self.moves(c)).collect();
        let mut out = match self.q.as_mut() {
            Some(q) => run_async(q, ops)?,
            None => ops.into_iter().map(|(c, d)| pass_one(&self.dev, &c, d)).collect(),
        };
        // Through NVMe passthrough the result is the completion's DW0-1 (ioswitch's
        // documented semantics), which a read or write leaves 0: checked here, then
        // replaced by the bytes the command moved, so the cases' checks apply alike.
        if self.passthru {
            for (i, (o, m)) in out.iter_mut().zip(&moves).enumerate() {
                if let (Outcome::Done { status, result, .. }, Some(len)) = (o, m) {
                    if status.is_ok() {
                        ensure!(
                            *result == 0,
                            "passthrough read/write #{i} completed with result {result}; NVMe's DW0 of a read or \
                             write is 0"
                        );
                        *result = *len;
                    }
                }
            }
        }
        Ok(out)
    }

    pub(crate) fn one(&mut self, op: (Cmd, Data)) -> Result<Outcome, String> {
        self.run(vec![op])?.pop().ok_or_else(|| "no outcome for a command".to_string())
    }

    pub(crate) fn submitted(&self) -> u64 {
        self.q.as_ref().map(|q| q.stats().submitted).unwrap_or(0)
    }

    /// Ends a pass: nothing outstanding, and every submitted command completed.
    pub(crate) fn finish(mut self) -> Result<(), String> {
        if let Some(q) = &self.q {
            let s = q.stats();
            ensure!(q.outstanding() == 0, "{} commands outstanding at the end", q.outstanding());
            ensure!(s.submitted == s.completed, "stats: submitted {} != completed {}", s.submitted, s.completed);
        }
        if let Some(h) = self.home {
            *lock(h) = self.q.take();
        }
        Ok(())
    }
}

/// The data of a command that must have succeeded, moving `want` bytes when given.
pub(crate) fn done(o: Outcome, what: &str, want: Option<u64>) -> Result<Data, String> {
    match o {
        Outcome::Rejected(e, _) => Err(format!("{what}: refused: {e}")),
        Outcome::Done { status, result, data } => {
            ensure!(status.is_ok(), "{what}: failed: {status}");
            if let Some(w) = want {
                ensure!(result == w, "{what}: result {result}, expected {w} (bytes moved)");
            }
            Ok(data)
        }
    }
}

/// The status and result of a command that must have run (a refusal is the error), its
/// status not looked at.
pub(crate) fn ran(o: Outcome, what: &str) -> Result<(Status, u64), String> {
    match o {
        Outcome::Rejected(e, _) => Err(format!("{what}: refused: {e}")),
        Outcome::Done { status, result, .. } => Ok((status, result)),
    }
}

/// The error and data of a command that must have been refused before any I/O.
pub(crate) fn refused(o: Outcome, what: &str) -> Result<(Error, Data), String> {
    match o {
        Outcome::Rejected(e, d) => Ok((e, d)),
        Outcome::Done { status, .. } => Err(format!("{what}: was accepted and ran ({status}); it must be refused")),
    }
}

// ---------------------------------------------------------------------------------------
// One cell's context
// ---------------------------------------------------------------------------------------

pub(crate) struct Ctx {
    pub(crate) dev: Device,
    pub(crate) col: Col,
    pub(crate) row: RowKind,
    pub(crate) uri: String,
    /// A path std::fs can read and write the same bytes through (file or loop device).
    pub(crate) oracle: Option<PathBuf>,
    /// A file whose size must never change (the file, or the loop device's backing file).
    pub(crate) backing: Option<PathBuf>,
    /// The oracle is a block device read and written with O_DIRECT (NVMe: passthrough
    /// commands bypass the page cache, so a buffered witness could read stale pages).
    pub(crate) oracle_direct: bool,
    /// Options of the row a reopen must repeat (`nsid=` of a PCI namespace).
    pub(crate) row_opts: String,
    pub(crate) lba: u64,
    pub(crate) nlbas: u64,
    pub(crate) nsid: u32,
    /// The size the device must have.
    pub(crate) bytes: u64,
    /// The region the whole-range passes cover: the whole device, or (NVMe namespaces of
    /// 256 MiB) its first DEV_BYTES; the last LBAs are checked on their own.
    pub(crate) span: u64,
    /// What deallocated blocks read back as.
    pub(crate) dealloc: Dealloc,
    /// Every command of this cell reaches the device as an NVMe passthrough command
    /// (sync=nvme, io_uring_cmd, or emu/thrpool over sync=nvme).
    pub(crate) passthru: bool,
    /// The NVMe namespace, for NVMe rows.
    pub(crate) ns: Option<Box<NvmeNs>>,
    /// The zone this cell uses (zoned rows).
    pub(crate) zone: u64,
    /// The queue depth-`QD` runners share.
    pub(crate) shared: Mutex<Option<Queue>>,
}

impl Ctx {
    pub(crate) fn is_async(&self) -> bool {
        self.col.sync().is_none()
    }
    pub(crate) fn nil(&self) -> bool {
        self.col == Col::Nil
    }
    pub(crate) fn end(&self) -> u64 {
        self.nlbas * self.lba
    }
    /// The result a successful read or write of `len` bytes completes with: bytes moved,
    /// or NVMe's DW0 (0) through passthrough.
    pub(crate) fn moved(&self, len: u64) -> u64 {
        if self.passthru {
            0
        } else {
            len
        }
    }
    /// Whether the cell's device is a PCI namespace driven by the user-space driver.
    pub(crate) fn pci(&self) -> bool {
        self.row.dev_kind() == ioswitch::DevKind::NvmePci
    }
    /// The length of each buffer but the last of a vectored command: an LBA, or on a PCI
    /// device a whole 4 KiB page (PRP entries: every buffer but the last ends on a page;
    /// the cases check that refusal on their own).
    pub(crate) fn vec_unit(&self) -> u64 {
        if self.pci() {
            self.lba.max(4096)
        } else {
            self.lba
        }
    }
    pub(crate) fn nlb(&self, len: u64) -> u32 {
        (len / self.lba) as u32
    }
    pub(crate) fn alloc(&self, len: u64) -> Result<Buffer, String> {
        self.dev.alloc(len as usize).map_err(|e| format!("alloc({len}): {e}"))
    }
    pub(crate) fn sentinel(&self, len: u64) -> Result<Buffer, String> {
        let mut b = self.alloc(len)?;
        b.fill(SENTINEL);
        Ok(b)
    }
    pub(crate) fn pat(&self, pos: u64, len: u64, seed: u64) -> Result<Buffer, String> {
        let mut b = self.alloc(len)?;
        fill(&mut b, pos, seed);
        Ok(b)
    }
    /// NVM write of `len` bytes at byte `pos`, carrying the pattern.
    pub(crate) fn w(&self, pos: u64, len: u64, seed: u64) -> Result<(Cmd, Data), String> {
        Ok((Cmd::write(self.nsid, pos / self.lba, self.nlb(len)), self.pat(pos, len, seed)?.into()))
    }
    /// NVM read of `len` bytes at byte `pos` into a sentinel-filled buffer.
    pub(crate) fn r(&self, pos: u64, len: u64) -> Result<(Cmd, Data), String> {
        Ok((Cmd::read(self.nsid, pos / self.lba, self.nlb(len)), self.sentinel(len)?.into()))
    }
    pub(crate) fn dsm(&self, ranges: &[(u64, u64)]) -> Result<(Cmd, Data), String> {
        let mut b = self.alloc(4096)?;
        for (i, &(pos, len)) in ranges.iter().enumerate() {
            let r = DsmRange { cattr: 0, nlb: self.nlb(len), slba: pos / self.lba };
            b[i * 16..i * 16 + 16].copy_from_slice(&r.to_bytes());
        }
        Ok((Cmd::dsm(self.nsid, ranges.len() as u32, true), b.into()))
    }
    pub(crate) fn backing_len(&self) -> Option<u64> {
        self.backing.as_ref().and_then(|p| fs::metadata(p).ok()).map(|m| m.len())
    }
    pub(crate) fn oracle_open(&self, p: &Path, write: bool) -> Result<fs::File, String> {
        let flags = if self.oracle_direct { libc::O_DIRECT } else { 0 };
        fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(flags)
            .open(p)
            .map_err(|e| format!("std open {}: {e}", p.display()))
    }
    pub(crate) fn oracle_read(&self, pos: u64, len: u64) -> Result<Option<Vec<u8>>, String> {
        let Some(p) = &self.oracle else { return Ok(None) };
        let f = self.oracle_open(p, false)?;
        if self.oracle_direct {
            // O_DIRECT wants aligned memory: a page-aligned buffer, copied out.
            let mut b = Buffer::alloc(len as usize, 4096).map_err(|e| format!("oracle buffer: {e}"))?;
            f.read_exact_at(&mut b, pos).map_err(|e| format!("std O_DIRECT read of {}: {e}", p.display()))?;
            return Ok(Some(b.to_vec()));
        }
        let mut v = vec![0u8; len as usize];
        f.read_exact_at(&mut v, pos).map_err(|e| format!("std read of {}: {e}", p.display()))?;
        Ok(Some(v))
    }
    pub(crate) fn oracle_write(&self, pos: u64, bytes: &[u8]) -> Result<bool, String> {
        let Some(p) = &self.oracle else { return Ok(false) };
        let f = self.oracle_open(p, true)?;
        if self.oracle_direct {
            let b = Buffer::from_slice(bytes, 4096).map_err(|e| format!("oracle buffer: {e}"))?;
            f.write_all_at(&b, pos).map_err(|e| format!("std O_DIRECT write of {}: {e}", p.display()))?;
        } else {
            f.write_all_at(bytes, pos).map_err(|e| format!("std write of {}: {e}", p.display()))?;
        }
        f.sync_all().map_err(|e| format!("std fsync of {}: {e}", p.display()))?;
        Ok(true)
    }
    /// Reads back through std::fs and compares, when the device has a path.
    pub(crate) fn oracle_check(&self, pos: u64, want: &[u8], seed: Option<u64>, what: &str) -> Result<(), String> {
        if let Some(got) = self.oracle_read(pos, want.len() as u64)? {
            compare(&got, want, pos, seed, &format!("{what} (read back with std::fs)"))?;
        }
        Ok(())
    }
}

pub(crate) fn write_pattern(
    r: &mut Runner<'_>,
    ctx: &Ctx,
    pos: u64,
    len: u64,
    chunk: u64,
    seed: u64,
) -> Result<usize, String> {
    let parts = split(pos, len, chunk);
    let ops = parts.iter().map(|&(p, l)| ctx.w(p, l, seed)).collect::<Result<Vec<_>, _>>()?;
    for (o, (p, l)) in r.run(ops)?.into_iter().zip(&parts) {
        done(o, &format!("write [{p}, +{l})"), Some(*l))?;
    }
    Ok(parts.len())
}

pub(crate) fn read_range(r: &mut Runner<'_>, ctx: &Ctx, pos: u64, len: u64, chunk: u64) -> Result<Vec<u8>, String> {
    let parts = split(pos, len, chunk);
    let ops = parts.iter().map(|&(p, l)| ctx.r(p, l)).collect::<Result<Vec<_>, _>>()?;
    let mut v = Vec::with_capacity(len as usize);
    for (o, (p, l)) in r.run(ops)?.into_iter().zip(&parts) {
        let d = done(o, &format!("read [{p}, +{l})"), Some(*l))?;
        v.extend(data_bytes(&d));
    }
    Ok(v)
}
