//! The native part of the Python package `ioswitch` (imported as `ioswitch._ioswitch`;
//! `python/ioswitch/__init__.py` re-exports it).
//!
//! - [`device`]: `Device` (open, geometry, identity, synchronous I/O, admin commands);
//! - [`queue`]: `Queue`, `Completion`, `QueueStats`;
//! - [`buffer`]: `Buffer` and the copies between Python objects and library buffers;
//! - [`errors`]: the exception hierarchy (`ioswitch.Error`, an `OSError`, and its
//!   subclasses) and the mapping from library errors;
//! - [`bench`]: fio jobs through ioswitch-bench, returning fio's JSON report.
//!
//! Blocking work (open, I/O, wait/drain, benchmarks) runs with the GIL released. Nothing
//! here panics on bad input: every refusal is a Python exception naming the input.
#![deny(missing_docs)]

mod admin;
mod bench;
mod buffer;
mod cmds;
mod device;
mod errors;
mod pmem;
mod queue;

use pyo3::prelude::*;

/// enumerate() -> list[dict]
///
/// The block devices and NVMe devices of this machine (from sysfs): one dict per device
/// with path, kind, bytes, lba_size, zoned, driver and model.
#[pyfunction]
fn enumerate(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let list = py.detach(ioswitch::enumerate).map_err(|e| errors::to_py(py, e))?;
    Ok(pythonize::pythonize(py, &list)?)
}

/// option_keys() -> dict[str, str]
///
/// Every key `Device.open` accepts, with a one-line meaning.
#[pyfunction]
fn option_keys(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    for (k, v) in ioswitch::opts::KEYS {
        d.set_item(*k, *v)?;
    }
    Ok(d)
}

/// The native module.
#[pymodule]
fn _ioswitch(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<device::Device>()?;
    m.add_class::<device::Geometry>()?;
    m.add_class::<device::Ident>()?;
    m.add_class::<buffer::Buffer>()?;
    m.add_class::<pmem::PmemRange>()?;
    m.add_class::<queue::Queue>()?;
    m.add_class::<queue::Completion>()?;
    m.add_class::<queue::QueueStats>()?;
    m.add_function(wrap_pyfunction!(enumerate, m)?)?;
    m.add_function(wrap_pyfunction!(option_keys, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_run, m)?)?;
    Ok(())
}
