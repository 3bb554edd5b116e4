//! `ioswitch.Buffer` (aligned memory that Python sees through the buffer protocol) and the
//! copies between Python bytes-like objects and the library's aligned buffers.
//!
//! Where copies happen:
//! - The library moves data only through its own [`ioswitch::Buffer`] (owned, aligned for
//!   the device; direct I/O needs that alignment). Memory owned by a Python object
//!   (`bytes`, `bytearray`, a `memoryview`, an `array`, a numpy array) cannot become one,
//!   so `write(data)` copies `data` once into a fresh aligned buffer, `read()` copies once
//!   out of it into the new `bytes`, and `read_into(buf)` copies once into `buf`. The copy
//!   reads the exporter's memory directly through the buffer protocol: no intermediate
//!   `bytes` is made for a `bytearray` or `memoryview`.
//! - An `ioswitch.Buffer` (from `Device.alloc`) *is* a library buffer: reads and writes on
//!   it, sync or queued, copy nothing. Python fills and reads it in place through
//!   `memoryview(buf)`.

use crate::errors;
use pyo3::buffer::{PyBuffer, PyUntypedBuffer};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

/// The part of a [`Buffer`] that changes: the memory (absent while a queue holds it) and
/// how many buffer-protocol views of it are alive.
pub struct BufState {
    /// The memory; `None` while it is in flight in a queue.
    pub buf: Option<ioswitch::Buffer>,
    /// Live buffer-protocol exports (memoryviews, …).
    pub exports: usize,
}

/// Aligned memory for zero-copy I/O.
///
/// Made by `Device.alloc(nbytes)` (aligned for that device, as direct I/O needs) or
/// `Buffer(nbytes, alignment=4096)`. It supports the buffer protocol: `memoryview(buf)`
/// reads and writes it in place, `bytes(buf)` copies it. Passing it to `Device.read_into`,
/// `Device.write` or `Queue.submit` moves no bytes between Python and the library.
///
/// Submitting it to a queue moves the memory into the queue until its completion is
/// reaped (the completion's `data` is this same object): meanwhile it cannot be viewed,
/// and it cannot be submitted while a memoryview of it is alive (`BufferError`), so no
/// Python code can touch memory the kernel is writing. Synchronous calls do not move it;
/// do not modify it from another thread while such a call runs.
#[pyclass(module = "ioswitch", frozen)]
pub struct Buffer {
    state: Mutex<BufState>,
    /// Start address; stable for the life of the allocation (moving an
    /// `ioswitch::Buffer` moves the handle, not the memory).
    addr: usize,
    len: usize,
    align: usize,
}

impl Buffer {
    /// Wraps a library buffer.
    pub fn new(buf: ioswitch::Buffer, align: usize) -> Buffer {
        let (addr, len) = (buf.as_ptr() as usize, buf.len());
        Buffer { state: Mutex::new(BufState { buf: Some(buf), exports: 0 }), addr, len, align }
    }

    /// Locks the state. A poisoned lock (a panic elsewhere while holding it) still holds
    /// consistent data: every update of the state is a single assignment.
    pub fn lock(&self) -> MutexGuard<'_, BufState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Takes the memory out to move it into a queue; refuses while views are alive or
    /// when it is already in flight.
    pub fn take_for_queue(&self) -> PyResult<ioswitch::Buffer> {
        let mut st = self.lock();
        if st.exports > 0 {
            return Err(PyBufferError::new_err(format!(
                "ioswitch.Buffer at {:#x}: {} memoryview(s) of it are alive; release them \
                 (view.release() or del) before submitting it to a queue",
                self.addr, st.exports
            )));
        }
        st.buf.take().ok_or_else(|| in_flight(self.addr))
    }

    /// Puts the memory back after its queue is done with it.
    pub fn give_back(&self, buf: ioswitch::Buffer) {
        self.lock().buf = Some(buf);
    }
}

fn in_flight(addr: usize) -> PyErr {
    PyBufferError::new_err(format!("ioswitch.Buffer at {addr:#x} is in flight in a queue: reap its completion first"))
}

#[pymethods]
impl Buffer {
    /// Buffer(nbytes, alignment=4096) -> Buffer
    ///
    /// Zeroed memory of `nbytes`, aligned to `alignment` (a power of two). Prefer
    /// `Device.alloc(nbytes)`, which uses the alignment that device needs.
    #[new]
    #[pyo3(signature = (nbytes, alignment = 4096))]
    fn py_new(nbytes: usize, alignment: usize) -> PyResult<Buffer> {
        let buf = ioswitch::Buffer::alloc(nbytes, alignment).map_err(PyValueError::new_err)?;
        Ok(Buffer::new(buf, alignment))
    }

    fn __len__(&self) -> usize {
        self.len
    }

    /// The start address of the memory (for alignment checks).
    #[getter]
    fn address(&self) -> usize {
        self.addr
    }

    /// The alignment the memory was allocated with.
    #[getter]
    fn alignment(&self) -> usize {
        self.align
    }

    /// True while a queue holds the memory (submitted, completion not yet reaped).
    #[getter]
    fn in_flight(&self) -> bool {
        self.lock().buf.is_none()
    }

    /// A copy of the contents as bytes.
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let st = self.lock();
        let b = st.buf.as_ref().ok_or_else(|| in_flight(self.addr))?;
        Ok(PyBytes::new(py, b))
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.tobytes(py)
    }

    /// Sets every byte to `value` (0..=255).
    fn fill(&self, value: u8) -> PyResult<()> {
        let mut st = self.lock();
        st.buf.as_mut().ok_or_else(|| in_flight(self.addr))?.fill(value);
        Ok(())
    }

    fn __repr__(&self) -> String {
        let state = if self.in_flight() { ", in flight" } else { "" };
        format!("<ioswitch.Buffer {} bytes at {:#x}, aligned to {}{state}>", self.len, self.addr, self.align)
    }

    /// Exports the memory, writable, as one contiguous run of unsigned bytes.
    ///
    /// # Safety
    /// Called by Python with a valid `view` to fill (the buffer protocol's contract).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let this = slf.get();
        let mut st = this.lock();
        if st.buf.is_none() {
            return Err(in_flight(this.addr));
        }
        // SAFETY: `view` is valid per the protocol; the memory at addr..addr+len is owned
        // by this object's ioswitch::Buffer, which cannot be freed or moved into a queue
        // while exports > 0 (take_for_queue refuses, and the object outlives the view
        // because FillInfo takes a reference to it).
        unsafe { export_writable(slf.as_any(), view, this.addr, this.len, flags) }?;
        st.exports += 1;
        Ok(())
    }

    /// Ends one export.
    ///
    /// # Safety
    /// Called by Python once per successful `__getbuffer__`.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        let mut st = self.lock();
        st.exports = st.exports.saturating_sub(1);
    }
}

/// Fills `view` with `len` writable bytes at `addr`, exported by `obj` (which the view
/// then holds a reference to): the buffer protocol's `PyBuffer_FillInfo`, its failure as
/// the Python error it set.
///
/// # Safety
/// `view` must be the protocol's valid view, and `addr..addr + len` must stay valid for
/// reads and writes, and not be moved or freed, while the view lives.
pub(crate) unsafe fn export_writable(
    obj: &Bound<'_, PyAny>,
    view: *mut ffi::Py_buffer,
    addr: usize,
    len: usize,
    flags: c_int,
) -> PyResult<()> {
    let len = ffi::Py_ssize_t::try_from(len).map_err(|_| PyBufferError::new_err("too large to export"))?;
    // SAFETY: the caller's contract.
    let rc = unsafe { ffi::PyBuffer_FillInfo(view, obj.as_ptr(), addr as *mut _, len, 0, flags) };
    if rc != 0 {
        return Err(PyErr::take(obj.py()).unwrap_or_else(|| PyBufferError::new_err("PyBuffer_FillInfo failed")));
    }
    Ok(())
}

/// A readable view of a bytes-like argument.
pub struct Source {
    view: PyUntypedBuffer,
}

impl Source {
    /// Gets a view of `obj`; `TypeError` naming the argument for anything else.
    pub fn get(obj: &Bound<'_, PyAny>, arg: &str) -> PyResult<Source> {
        let view = PyUntypedBuffer::get(obj).map_err(|_| {
            let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
            PyTypeError::new_err(format!(
                "{arg}: a bytes-like object (bytes, bytearray, memoryview, ioswitch.Buffer) is required, not '{ty}'"
            ))
        })?;
        Ok(Source { view })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.view.len_bytes()
    }

    /// Copies the contents into `dst` (exactly `len()` bytes long).
    pub fn copy_to(&self, py: Python<'_>, dst: &mut [u8]) -> PyResult<()> {
        if dst.len() != self.len() {
            return Err(PyValueError::new_err("internal: copy length mismatch"));
        }
        if self.view.is_c_contiguous() {
            // SAFETY: the exporter guarantees len_bytes() readable bytes at buf_ptr() while
            // the view is held (it is, by self), and a contiguous buffer has no gaps; the
            // interpreter is attached (py), so no Python code runs during the copy.
            let src = unsafe { std::slice::from_raw_parts(self.view.buf_ptr() as *const u8, dst.len()) };
            dst.copy_from_slice(src);
            return Ok(());
        }
        // Strided views: CPython gathers them (only byte-format views qualify).
        let typed: &PyBuffer<u8> = self.view.as_typed().map_err(|_| {
            PyTypeError::new_err("a non-contiguous buffer must hold bytes (format 'B'); pass a contiguous copy")
        })?;
        typed.copy_to_slice(py, dst)
    }
}

/// A writable view of a bytes-like argument (`bytearray`, a writable `memoryview`, …).
pub struct Sink {
    view: PyUntypedBuffer,
}

impl Sink {
    /// Gets a writable view of `obj`; `TypeError` naming the argument otherwise.
    pub fn get(obj: &Bound<'_, PyAny>, arg: &str) -> PyResult<Sink> {
        let ty = || obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        let view = PyUntypedBuffer::get(obj).map_err(|_| {
            PyTypeError::new_err(format!(
                "{arg}: a writable bytes-like object (bytearray, memoryview, ioswitch.Buffer) is required, not '{}'",
                ty()
            ))
        })?;
        if view.readonly() {
            return Err(PyTypeError::new_err(format!(
                "{arg}: the buffer of '{}' is read-only; pass a bytearray or a writable memoryview",
                ty()
            )));
        }
        Ok(Sink { view })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.view.len_bytes()
    }

    /// Copies `src` (exactly `len()` bytes) into the object.
    pub fn copy_from(&self, py: Python<'_>, src: &[u8]) -> PyResult<()> {
        if src.len() != self.len() {
            return Err(PyValueError::new_err("internal: copy length mismatch"));
        }
        if self.view.is_c_contiguous() {
            // SAFETY: the exporter guarantees len_bytes() writable bytes (readonly() was
            // false) at buf_ptr() while the view is held, with no gaps; the interpreter is
            // attached, so no Python code runs during the copy.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.view.buf_ptr() as *mut u8, src.len()) };
            dst.copy_from_slice(src);
            return Ok(());
        }
        let typed: &PyBuffer<u8> = self.view.as_typed().map_err(|_| {
            PyTypeError::new_err("a non-contiguous buffer must hold bytes (format 'B'); pass a contiguous one")
        })?;
        typed.copy_from_slice(py, src)
    }
}

/// Copies at or above this size run with the GIL released.
pub const DETACH_COPY: usize = 64 * 1024;

/// Copies a bytes-like object into a new buffer aligned for `dev`.
///
/// The source of a `bytes` object is immutable, so large copies from one run with the GIL
/// released; other objects (a `bytearray` another thread could change meanwhile) are
/// copied with the GIL held.
pub fn copy_in(
    py: Python<'_>,
    dev: &ioswitch::Device,
    src: &Source,
    obj: &Bound<'_, PyAny>,
) -> PyResult<ioswitch::Buffer> {
    let len = src.len();
    if obj.is_exact_instance_of::<PyBytes>() && src.view.is_c_contiguous() && len >= DETACH_COPY {
        let addr = src.view.buf_ptr() as usize;
        return py
            .detach(|| {
                let mut buf = dev.alloc(len)?;
                // SAFETY: `src` (alive across this call) holds a view of a bytes object's
                // len contiguous bytes at addr; bytes objects never change, so reading
                // them without the GIL races with nothing.
                let from = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
                buf.copy_from_slice(from);
                Ok(buf)
            })
            .map_err(|e| errors::to_py(py, e));
    }
    let mut buf = py.detach(|| dev.alloc(len)).map_err(|e| errors::to_py(py, e))?;
    src.copy_to(py, &mut buf)?;
    Ok(buf)
}

/// A new `bytes` holding `data`; large copies run with the GIL released (the new object
/// is not visible to any other code until this returns).
pub fn new_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    if data.len() < DETACH_COPY {
        return Ok(PyBytes::new(py, data));
    }
    PyBytes::new_with(py, data.len(), |dst| {
        py.detach(|| dst.copy_from_slice(data));
        Ok(())
    })
}

/// Frees library buffers, with the GIL released when they are large (unmapping many
/// megabytes of touched pages takes milliseconds other threads can use).
pub fn release<T: Send>(py: Python<'_>, bytes: usize, v: T) {
    if bytes >= DETACH_COPY {
        py.detach(move || drop(v));
    } else {
        drop(v);
    }
}
