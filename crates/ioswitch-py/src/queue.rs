//! `ioswitch.Queue`, `Completion` and `QueueStats`.
//!
//! The library tags each submission with the index of a slot here; the slot keeps what
//! the Python side needs at completion: the caller's tag, the operation, and the
//! `ioswitch.Buffer` whose memory was moved into the queue (to give it back).

use crate::buffer::{self, Buffer, Source};
use crate::cmds::{self, Op};
use crate::device::Device;
use crate::errors;
use ioswitch::cmd::CmdSet;
use ioswitch::{Cmd, Data};
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::IntoPyObjectExt;
use std::sync::{Mutex, MutexGuard, TryLockError};

/// What a slot remembers about an outstanding command.
struct Slot {
    tag: u64,
    op: Op,
    /// Bytes the caller asked for (reads return at most this).
    len: usize,
    /// True for file-set commands, whose result is the bytes moved.
    fs: bool,
    /// The ioswitch.Buffer whose memory is in flight.
    owner: Option<Py<Buffer>>,
}

struct QState {
    q: Option<ioswitch::Queue>,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
}

impl QState {
    /// Takes the slot of a completion and returns a shared buffer's memory to its owner.
    fn finish(&mut self, c: ioswitch::Completion) -> (Option<Slot>, ioswitch::Completion) {
        let idx = c.tag as usize;
        let slot = self.slots.get_mut(idx).and_then(Option::take);
        if slot.is_some() {
            self.free.push(idx as u32);
        }
        let mut c = c;
        if let Some(owner) = slot.as_ref().and_then(|s| s.owner.as_ref()) {
            if let Some(b) = std::mem::take(&mut c.data).into_one() {
                owner.get().give_back(b);
            }
        }
        (slot, c)
    }

    /// Reaps with `f` (poke, wait or drain) and returns the completions with their slots,
    /// and the error, if the reap failed after handing out some.
    #[allow(clippy::type_complexity)]
    fn reap(
        &mut self,
        f: impl FnOnce(&mut ioswitch::Queue, &mut dyn FnMut(ioswitch::Completion)) -> ioswitch::Result<u32>,
    ) -> (Vec<(Option<Slot>, ioswitch::Completion)>, Option<ioswitch::Error>) {
        let Some(mut q) = self.q.take() else { return (Vec::new(), None) };
        let mut raw = Vec::new();
        let r = f(&mut q, &mut |c| raw.push(c));
        self.q = Some(q);
        let done = raw.into_iter().map(|c| self.finish(c)).collect();
        (done, r.err())
    }
}

impl Drop for QState {
    fn drop(&mut self) {
        let Some(mut q) = self.q.take() else { return };
        let mut raw = Vec::new();
        let ok = q.drain(|c| raw.push(c)).is_ok();
        for c in raw {
            self.finish(c);
        }
        if !ok {
            // The drain failed: commands may still be in flight. Leak the queue (and the
            // buffers it holds) rather than let its Drop free memory the kernel may still
            // write into.
            std::mem::forget(q);
        }
    }
}

/// A finished command.
#[pyclass(module = "ioswitch", frozen, get_all)]
pub struct Completion {
    /// The tag given to `submit`.
    tag: u64,
    /// The operation: "read", "write", "flush", "trim", "read_lba", "write_lba" or
    /// "write_zeroes".
    op: &'static str,
    /// True when the command succeeded.
    ok: bool,
    /// NVMe status: SCT << 8 | SC (0 on success).
    status: u16,
    /// The spec's name of the status ("Successful Completion", "LBA Out of Range", …).
    status_name: &'static str,
    /// Status Code Type.
    sct: u8,
    /// Status Code.
    sc: u8,
    /// Do Not Retry.
    dnr: bool,
    /// The errno the OS reported, or None.
    errno: Option<i32>,
    /// Command result: bytes moved for byte-addressed commands, DW0-1 for NVM commands.
    result: u64,
    /// Reads: the data (bytes), or the ioswitch.Buffer given to submit, now back in the
    /// caller's hands. Other operations: None.
    data: Py<PyAny>,
    /// The device's URI, for error messages.
    device: String,
}

#[pymethods]
impl Completion {
    /// check() -> Completion
    ///
    /// Returns self when the command succeeded; raises CommandError otherwise.
    fn check(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let c = slf.get();
        if c.ok {
            return Ok(slf);
        }
        let py = slf.py();
        let status =
            ioswitch::Status { raw: c.status | if c.dnr { 1 << 14 } else { 0 }, errno_raw: c.errno.unwrap_or(0) };
        Err(errors::to_py(
            py,
            ioswitch::Error::Command { dev: c.device.clone(), what: format!("{} (tag {})", c.op, c.tag), status },
        ))
    }

    fn __repr__(&self) -> String {
        if self.ok {
            format!("Completion(tag={}, op={:?}, ok=True, result={})", self.tag, self.op, self.result)
        } else {
            format!(
                "Completion(tag={}, op={:?}, ok=False, status={:#x} {:?}, errno={:?})",
                self.tag, self.op, self.status, self.status_name, self.errno
            )
        }
    }
}

/// Counters of a queue.
#[pyclass(module = "ioswitch", frozen, get_all)]
pub struct QueueStats {
    /// Commands taken by submit.
    submitted: u64,
    /// Completions reaped.
    completed: u64,
    /// Syscalls the interface made for this queue.
    syscalls: u64,
}

#[pymethods]
impl QueueStats {
    fn __repr__(&self) -> String {
        format!("QueueStats(submitted={}, completed={}, syscalls={})", self.submitted, self.completed, self.syscalls)
    }
}

/// An asynchronous queue on a device's async interface (`Device.queue(depth)`).
///
/// `submit` never blocks: it raises `BusyError` when `depth` commands are outstanding.
/// Submissions reach the kernel in one batch at the next `poke`, `wait` or `drain`, which
/// release the GIL while they run. Use one queue per thread. Closing (or leaving a `with`
/// block) waits for outstanding commands; so does garbage collection, but with the GIL
/// held, so close queues explicitly.
#[pyclass(module = "ioswitch", frozen)]
pub struct Queue {
    state: Mutex<QState>,
    device: Py<Device>,
    uri: String,
    depth: u32,
    iface: &'static str,
}

/// What `submit` moves into the queue.
struct Prepared {
    cmd: Cmd,
    data: Data,
    slot: Slot,
}

impl Queue {
    pub(crate) fn new(q: ioswitch::Queue, device: Py<Device>) -> Queue {
        let depth = q.capacity();
        let iface = q.interface().as_str();
        let uri = q.device().uri().to_string();
        let slots = (0..depth).map(|_| None).collect();
        let free = (0..depth).rev().collect();
        Queue { state: Mutex::new(QState { q: Some(q), slots, free }), device, uri, depth, iface }
    }

    fn lock(&self) -> MutexGuard<'_, QState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the state: at once when the lock is free, else with the GIL released
    /// while waiting for it (another thread is using the queue).
    fn with_state<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut QState) -> R + Send) -> R {
        match self.state.try_lock() {
            Ok(mut g) => f(&mut g),
            Err(TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
            Err(TryLockError::WouldBlock) => py.detach(|| f(&mut self.lock())),
        }
    }

    fn closed_err(&self, py: Python<'_>) -> PyErr {
        errors::make::<errors::Error>(py, libc::EBADF, format!("{}: the queue is closed", self.uri), &[])
    }

    fn completions<'py>(
        &self,
        py: Python<'py>,
        done: Vec<(Option<Slot>, ioswitch::Completion)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let mut spent = Vec::with_capacity(done.len());
        let mut spent_bytes = 0;
        for (slot, mut c) in done {
            let (tag, op, len, fs, owner) = match slot {
                Some(s) => (s.tag, s.op, s.len, s.fs, s.owner),
                None => (c.tag, Op::Read, 0, false, None),
            };
            let data = match owner {
                Some(o) => o.into_any(),
                None if op.reads() && c.status.is_ok() => {
                    let n = if fs { usize::try_from(c.result).unwrap_or(len).min(len) } else { len };
                    let bytes = c.data.bufs().first().map(|b| &b[..n.min(b.len())]).unwrap_or(b"");
                    buffer::new_bytes(py, bytes)?.into_any().unbind()
                }
                None => py.None(),
            };
            let s = c.status;
            let comp = Completion {
                tag,
                op: op.name(),
                ok: s.is_ok(),
                status: s.code(),
                status_name: s.name(),
                sct: errors::sct_value(s.sct()),
                sc: s.sc(),
                dnr: s.dnr(),
                errno: s.errno(),
                result: c.result,
                data,
                device: self.uri.clone(),
            };
            list.append(comp.into_py_any(py)?)?;
            spent_bytes += c.data.total_len() as usize;
            spent.push(std::mem::take(&mut c.data));
        }
        buffer::release(py, spent_bytes, spent);
        Ok(list)
    }

    fn prepare(
        &self,
        py: Python<'_>,
        dev: &ioswitch::Device,
        op: Op,
        offset: u64,
        data: Option<&Bound<'_, PyAny>>,
        tag: u64,
    ) -> PyResult<Prepared> {
        let pt = cmds::passthrough(dev, false);
        let lba = u64::from(dev.geometry().lba_size.max(1));
        let shared = data.and_then(|d| d.cast::<Buffer>().ok());
        let need_int = |what: &str| -> PyResult<u64> {
            match data {
                Some(d) => d.extract::<u64>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(format!("submit({:?}): data must be {what}", op.name()))
                }),
                None => {
                    Err(pyo3::exceptions::PyTypeError::new_err(format!("submit({:?}): data must be {what}", op.name())))
                }
            }
        };
        let whole_lbas = |len: usize| -> PyResult<u64> {
            if len == 0 || len as u64 % lba != 0 {
                return Err(errors::bad_request(
                    py,
                    &self.uri,
                    format!("submit({:?}): {len} bytes is not a whole, non-zero number of {lba}-byte LBAs", op.name()),
                ));
            }
            Ok(len as u64 / lba)
        };
        let mut owner = None;
        let (cmd, data, len) = match op {
            Op::Read | Op::ReadLba | Op::Write | Op::WriteLba => {
                let (buf, len) = if let Some(s) = shared {
                    let b = s.get().take_for_queue()?;
                    owner = Some(s.clone().unbind());
                    let len = b.len();
                    (b, len)
                } else if op.reads() {
                    let n = need_int("a length (int) or an ioswitch.Buffer")?;
                    let len = if op == Op::ReadLba { n.saturating_mul(lba) } else { n };
                    cmds::check_len(py, dev, op, len)?;
                    let len = usize::try_from(len).map_err(|_| {
                        errors::bad_request(py, &self.uri, format!("submit({:?}): {n} is too large", op.name()))
                    })?;
                    (dev.alloc(len).map_err(|e| errors::to_py(py, e))?, len)
                } else {
                    let d = data.ok_or_else(|| {
                        pyo3::exceptions::PyTypeError::new_err(format!(
                            "submit({:?}): data must be a bytes-like object",
                            op.name()
                        ))
                    })?;
                    let src = Source::get(d, "data")?;
                    let len = src.len();
                    (buffer::copy_in(py, dev, &src, d)?, len)
                };
                let built = match op {
                    Op::ReadLba | Op::WriteLba => {
                        whole_lbas(len).and_then(|nlb| cmds::lba_cmd(py, dev, op, offset, nlb))
                    }
                    _ => cmds::byte_cmd(py, dev, pt, op, offset, len as u64).map(|(c, _)| c),
                };
                match built {
                    Ok(cmd) => (cmd, Data::One(buf), len),
                    Err(e) => {
                        if let Some(o) = &owner {
                            o.get().give_back(buf);
                        }
                        return Err(e);
                    }
                }
            }
            Op::Flush => {
                let (cmd, _) = cmds::byte_cmd(py, dev, pt, op, 0, 0)?;
                (cmd, Data::None, 0)
            }
            Op::Trim => {
                let len = need_int("a length in bytes (int)")?;
                let (cmd, dsm) = cmds::byte_cmd(py, dev, pt, op, offset, len)?;
                (cmd, dsm.map(Data::One).unwrap_or_default(), 0)
            }
            Op::WriteZeroes => {
                let nlb = need_int("a number of LBAs (int)")?;
                (cmds::lba_cmd(py, dev, op, offset, nlb)?, Data::None, 0)
            }
        };
        let fs = cmd.set == CmdSet::Fs;
        Ok(Prepared { cmd, data, slot: Slot { tag, op, len, fs, owner } })
    }
}

/// Gives a rejected submission's shared buffer back to its owner.
fn give_back(slot: &Slot, data: Data) {
    if let (Some(o), Some(b)) = (&slot.owner, data.into_one()) {
        o.get().give_back(b);
    }
}

#[pymethods]
impl Queue {
    /// submit(op, offset=0, data=None, tag=0, ioprio=0) -> None
    ///
    /// Queues one command; never blocks. `op` and `data`:
    ///
    /// - "read": read at byte `offset`; `data` = length (int), or an ioswitch.Buffer to
    ///   read into (no copy). The completion's `data` is the bytes (or that Buffer).
    /// - "write": write `data` (bytes-like: copied once into an aligned buffer; or an
    ///   ioswitch.Buffer: moved, no copy) at byte `offset`.
    /// - "read_lba" / "write_lba": the same with `offset` = starting LBA and, for reads,
    ///   `data` = number of LBAs (or a Buffer of whole LBAs).
    /// - "flush": no offset or data. "trim": `data` = length in bytes.
    /// - "write_zeroes": `offset` = starting LBA, `data` = number of LBAs.
    ///
    /// `tag` comes back in the completion. `ioprio`: the command's I/O priority, the
    /// kernel's `class << 13 | level` (ioprio_set(2); 0: none, the submitting thread's);
    /// only async=io_uring and async=libaio carry one, on reads and writes: elsewhere a
    /// command with one is refused (BadCommandError). Raises BusyError when the queue is
    /// full, OutOfRangeError/MisalignedError/… when the request is refused (nothing
    /// queued).
    #[pyo3(signature = (op, offset = 0, data = None, tag = 0, ioprio = 0))]
    fn submit(
        &self,
        py: Python<'_>,
        op: &str,
        offset: u64,
        data: Option<&Bound<'_, PyAny>>,
        tag: u64,
        ioprio: i64,
    ) -> PyResult<()> {
        let Some(op) = Op::parse(op) else {
            return Err(errors::bad_request(
                py,
                &self.uri,
                format!("submit: unknown operation {op:?}; known: {}", cmds::OP_NAMES),
            ));
        };
        let Ok(ioprio) = u16::try_from(ioprio) else {
            return Err(errors::bad_request(
                py,
                &self.uri,
                format!(
                    "submit({:?}): ioprio {ioprio} is not an I/O priority: the kernel's class << 13 | level, 0 to 65535",
                    op.name()
                ),
            ));
        };
        let dev = self.with_state(py, |st| st.q.as_ref().map(|q| q.device().clone()));
        let dev = dev.ok_or_else(|| self.closed_err(py))?;
        let mut p = self.prepare(py, &dev, op, offset, data, tag)?;
        p.cmd = p.cmd.with_ioprio(ioprio);
        let depth = self.depth;
        let r = self.with_state(py, move |st| {
            let Prepared { cmd, data, slot } = p;
            let Some(q) = st.q.as_mut() else {
                give_back(&slot, data);
                return Err(None);
            };
            let Some(idx) = st.free.pop() else {
                give_back(&slot, data);
                return Err(Some(ioswitch::Error::Busy { depth }));
            };
            match q.submit(&cmd, data, u64::from(idx)) {
                Ok(()) => {
                    st.slots[idx as usize] = Some(slot);
                    Ok(())
                }
                Err(rej) => {
                    st.free.push(idx);
                    give_back(&slot, rej.data);
                    Err(Some(rej.error))
                }
            }
        });
        match r {
            Ok(()) => Ok(()),
            Err(None) => Err(self.closed_err(py)),
            Err(Some(e)) => Err(errors::to_py(py, e)),
        }
    }

    /// poke(max=0) -> list[Completion]
    ///
    /// Pushes queued submissions to the kernel, then reaps what has completed without
    /// waiting: at most `max` (0: no limit).
    #[pyo3(signature = (max = 0))]
    fn poke<'py>(&self, py: Python<'py>, max: u32) -> PyResult<Bound<'py, PyList>> {
        let (done, err) = py.detach(|| self.lock().reap(|q, f| q.poke(max, f)));
        self.finish(py, done, err)
    }

    /// wait(min=1) -> list[Completion]
    ///
    /// Pushes queued submissions, then waits (GIL released) until at least `min` commands
    /// (at most all outstanding) have completed, and returns every completion reaped.
    #[pyo3(signature = (min = 1))]
    fn wait<'py>(&self, py: Python<'py>, min: u32) -> PyResult<Bound<'py, PyList>> {
        let (done, err) = py.detach(|| self.lock().reap(|q, f| q.wait(min, f)));
        self.finish(py, done, err)
    }

    /// drain() -> list[Completion]
    ///
    /// Waits (GIL released) for every outstanding command and returns their completions.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let (done, err) = py.detach(|| self.lock().reap(|q, f| q.drain(f)));
        self.finish(py, done, err)
    }

    /// Commands submitted and not yet reaped.
    #[getter]
    fn outstanding(&self, py: Python<'_>) -> u32 {
        self.with_state(py, |st| st.q.as_ref().map(|q| q.outstanding()).unwrap_or(0))
    }

    /// The depth: how many commands may be outstanding.
    #[getter]
    fn capacity(&self) -> u32 {
        self.depth
    }

    /// The async interface serving the queue ("io_uring", "libaio", …).
    #[getter]
    fn interface(&self) -> &'static str {
        self.iface
    }

    /// The device the queue was made from.
    #[getter]
    fn device(&self, py: Python<'_>) -> Py<Device> {
        self.device.clone_ref(py)
    }

    /// Counters: submitted, completed, syscalls.
    #[getter]
    fn stats(&self, py: Python<'_>) -> QueueStats {
        let s = self.with_state(py, |st| st.q.as_ref().map(|q| q.stats()).unwrap_or_default());
        QueueStats { submitted: s.submitted, completed: s.completed, syscalls: s.syscalls }
    }

    /// True after close().
    #[getter(closed)]
    fn is_closed(&self, py: Python<'_>) -> bool {
        self.with_state(py, |st| st.q.is_none())
    }

    /// close() -> list[Completion]
    ///
    /// Waits for outstanding commands (GIL released), returns their completions, and
    /// closes the queue. Closing a closed queue returns [].
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let (done, err) = py.detach(|| {
            let mut st = self.lock();
            let r = st.reap(|q, f| q.drain(f));
            if r.1.is_none() {
                st.q = None;
            }
            r
        });
        self.finish(py, done, err)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.outstanding(py) as usize
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<ioswitch.Queue {} depth={} outstanding={} on {:?}>",
            self.iface,
            self.depth,
            self.outstanding(py),
            self.uri
        )
    }
}

impl Queue {
    fn finish<'py>(
        &self,
        py: Python<'py>,
        done: Vec<(Option<Slot>, ioswitch::Completion)>,
        err: Option<ioswitch::Error>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = self.completions(py, done)?;
        match err {
            None => Ok(list),
            Some(e) => Err(errors::with_completions(py, e, list)),
        }
    }
}
