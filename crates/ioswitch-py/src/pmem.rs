//! `PmemRange`: load/store access to a `sync=pmem` device's mapping from Python
//! (`Device.pmem_range(offset, length)`): a writable memoryview of the memory and
//! `persist`.

use crate::errors;
use ioswitch::PmemSlice;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

/// The lent slice with the device it borrows (boxed: its address, which the slice
/// borrows, never moves). The slice is dropped first.
struct Held {
    slice: Option<PmemSlice<'static>>,
    dev: Option<Box<ioswitch::Device>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // The slice borrows *dev: it goes first.
        self.slice = None;
        self.dev = None;
    }
}

struct State {
    held: Held,
    /// Live buffer-protocol exports (memoryviews).
    exports: usize,
}

/// A range of a `sync=pmem` device's memory, lent for loads and stores.
///
/// Made by `Device.pmem_range(offset, length)`. `memoryview(r)` reads and writes the
/// persistent memory in place; `r.persist(offset=0, length=None)` makes stores durable
/// (cache-line write-backs and a fence). While the range is held, reads and writes of it
/// through the device's commands fail with EBUSY, and an overlapping second range is
/// refused. `release()` (or leaving its `with` block) gives it back; it refuses while
/// memoryviews of it are alive.
#[pyclass(module = "ioswitch", frozen)]
pub struct PmemRange {
    state: Mutex<State>,
    addr: usize,
    len: usize,
    offset: u64,
}

impl PmemRange {
    /// Lends `offset .. offset + len` of `dev`.
    pub fn new(py: Python<'_>, dev: ioswitch::Device, offset: u64, len: usize) -> PyResult<PmemRange> {
        let owner = Box::new(dev);
        // SAFETY: the slice borrows the boxed device, whose heap address is stable; both
        // live in `Held`, which drops the slice before the device, so the borrow, extended
        // to 'static here, never outlives what it borrows.
        let dev_ref: &'static ioswitch::Device = unsafe { &*(&*owner as *const ioswitch::Device) };
        let mut slice = dev_ref.pmem_range(offset, len).map_err(|e| errors::to_py(py, e))?;
        let addr = slice.as_mut_ptr() as usize;
        Ok(PmemRange {
            state: Mutex::new(State { held: Held { slice: Some(slice), dev: Some(owner) }, exports: 0 }),
            addr,
            len,
            offset,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn released(offset: u64) -> PyErr {
    PyBufferError::new_err(format!("ioswitch.PmemRange at offset {offset} was released"))
}

#[pymethods]
impl PmemRange {
    fn __len__(&self) -> usize {
        self.len
    }

    /// The range's offset in the device, in bytes.
    #[getter]
    fn offset(&self) -> u64 {
        self.offset
    }

    /// Makes `length` bytes at `offset` of the range (relative to its start; default: all
    /// of it) durable: cache-line write-backs (CLWB, CLFLUSHOPT or CLFLUSH) and a fence.
    #[pyo3(signature = (offset = 0, length = None))]
    fn persist(&self, py: Python<'_>, offset: usize, length: Option<usize>) -> PyResult<()> {
        let st = self.lock();
        let slice = st.held.slice.as_ref().ok_or_else(|| released(self.offset))?;
        let length = length.unwrap_or(self.len.saturating_sub(offset));
        slice.persist(offset, length).map_err(|e| errors::to_py(py, e))
    }

    /// read_at(offset, length) -> bytes
    ///
    /// Copies `length` bytes at `offset` of the range (relative to its start) under the
    /// SIGBUS guard of the device's commands: where the kernel cannot provide a page
    /// (poisoned persistent memory, a file another user shrank) it raises
    /// `ioswitch.Error` with errno EIO instead of ending the process. Loads through a
    /// memoryview are not guarded.
    fn read_at<'py>(&self, py: Python<'py>, offset: usize, length: usize) -> PyResult<Bound<'py, PyBytes>> {
        let st = self.lock();
        let slice = st.held.slice.as_ref().ok_or_else(|| released(self.offset))?;
        if length > self.len {
            // Refused before allocating `length` bytes.
            let why = format!("{length} bytes at {offset} reach past the end of a {}-byte pmem range", self.len);
            return Err(errors::to_py(py, ioswitch::Error::BadOpt { key: "read_at".into(), why }));
        }
        let mut buf = vec![0u8; length];
        slice.read_at(offset, &mut buf).map_err(|e| errors::to_py(py, e))?;
        Ok(PyBytes::new(py, &buf))
    }

    /// write_at(offset, data)
    ///
    /// Copies `data` (any bytes-like object) to `offset` of the range durably, as a write
    /// command does (non-temporal stores or stores + cache-line write-backs, then one
    /// fence: no `persist` needed), under the SIGBUS guard: `ioswitch.Error` with errno
    /// EIO instead of the end of the process where the kernel cannot provide a page (the
    /// bytes may then be partly written). Stores through a memoryview are not guarded.
    fn write_at(&self, py: Python<'_>, offset: usize, data: &[u8]) -> PyResult<()> {
        let mut st = self.lock();
        let slice = st.held.slice.as_mut().ok_or_else(|| released(self.offset))?;
        slice.write_at(offset, data).map_err(|e| errors::to_py(py, e))
    }

    /// Gives the range back: the device's commands reach it again. Refused while
    /// memoryviews of it are alive.
    fn release(&self) -> PyResult<()> {
        let mut st = self.lock();
        if st.exports > 0 {
            return Err(PyBufferError::new_err(format!(
                "ioswitch.PmemRange at offset {}: {} memoryview(s) of it are alive; release them first",
                self.offset, st.exports
            )));
        }
        st.held.slice = None;
        st.held.dev = None;
        Ok(())
    }

    /// True once released.
    #[getter]
    fn released(&self) -> bool {
        self.lock().held.slice.is_none()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.released() { ", released" } else { "" };
        format!("<ioswitch.PmemRange {} bytes at offset {}{state}>", self.len, self.offset)
    }

    /// Exports the persistent memory, writable, as one contiguous run of unsigned bytes.
    ///
    /// # Safety
    /// Called by Python with a valid `view` to fill (the buffer protocol's contract).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let this = slf.get();
        let mut st = this.lock();
        if st.held.slice.is_none() {
            return Err(released(this.offset));
        }
        // SAFETY: `view` is valid per the protocol; addr..addr+len is the lent range of
        // the mapping, which stays lent (release refuses while exports > 0) and mapped
        // (the object holds the device) while the view lives, since FillInfo takes a
        // reference to this object.
        unsafe { crate::buffer::export_writable(slf.as_any(), view, this.addr, this.len, flags) }?;
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
