//! The exception hierarchy and the mapping from the library's errors to it.
//!
//! Every exception is an `ioswitch.Error`, itself an `OSError`: `errno` and `strerror`
//! are set (`strerror` holds the library's whole message, which names the device, the
//! request and the reason), and the variant's fields are attributes (`device`, `key`,
//! `status`, …) so callers never parse messages.

use ioswitch::spec::Sct;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{create_exception, IntoPyObjectExt, PyTypeInfo};

create_exception!(
    ioswitch,
    Error,
    PyOSError,
    "Base of every ioswitch error: an OSError whose errno is the OS error (or the closest \
     one: EINVAL for bad requests, ERANGE for out of range, EBUSY for a full queue, \
     EOPNOTSUPP for an unsupported interface) and whose strerror is the full message."
);
create_exception!(ioswitch, BadUriError, Error, "The device string names nothing ioswitch can open (attribute: uri).");
create_exception!(
    ioswitch,
    BadOptionError,
    Error,
    "A bad option: unknown key, bad value, or a combination that cannot work (attribute: \
     key, the option's name)."
);
create_exception!(
    ioswitch,
    UnsupportedError,
    Error,
    "An interface that cannot serve this kind of device (attributes: device, kind, \
     interface, why)."
);
create_exception!(
    ioswitch,
    OutOfRangeError,
    Error,
    "A request past the end of the device; nothing was done (attributes: device, start, \
     end, limit, unit)."
);
create_exception!(
    ioswitch,
    MisalignedError,
    Error,
    "Direct I/O needs aligned buffers, offsets and lengths; nothing was done (attributes: \
     device, what, value, align)."
);
create_exception!(
    ioswitch,
    BufferSizeError,
    Error,
    "The data is smaller than the command's transfer; nothing was done (attributes: device, \
     need, have)."
);
create_exception!(
    ioswitch,
    BadCommandError,
    Error,
    "A command the interface cannot carry, or a malformed request (attribute: device)."
);
create_exception!(
    ioswitch,
    BusyError,
    Error,
    "The queue holds as many commands as its depth: reap some (poke/wait) and submit again \
     (attribute: depth)."
);
create_exception!(
    ioswitch,
    InUseError,
    Error,
    "A command that may write, refused because the device (a partition of it, or its disk) \
     is mounted, swapped on or held by another kernel user; nothing was done, and \
     allow_mounted_write=True lifts the guard (errno EBUSY; attributes: device, what, why)."
);
create_exception!(
    ioswitch,
    CommandError,
    Error,
    "The command ran and failed (attributes: device, status = SCT<<8|SC, sct, sc, dnr, \
     status_name; errno when the OS reported the failure)."
);
create_exception!(
    ioswitch,
    QueueError,
    Error,
    "The queue machinery failed (a syscall on the ring, a dead worker thread) (attributes: \
     device, interface)."
);
create_exception!(
    ioswitch,
    BenchError,
    Error,
    "A benchmark that could not be prepared, or whose jobs failed (attribute: report, the \
     report dict when the run got that far, else None)."
);

/// Adds the exception classes to the module, each under its Rust name, in this order
/// (the module's `__all__` order).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    macro_rules! add {
        ($($class:ident),* $(,)?) => {
            $(m.add(stringify!($class), m.py().get_type::<$class>())?;)*
        };
    }
    add!(
        Error,
        BadUriError,
        BadOptionError,
        UnsupportedError,
        OutOfRangeError,
        MisalignedError,
        BufferSizeError,
        BadCommandError,
        BusyError,
        InUseError,
        CommandError,
        QueueError,
        BenchError,
    );
    Ok(())
}

/// Numeric value of a status code type, as the spec encodes it.
pub fn sct_value(sct: Sct) -> u8 {
    match sct {
        Sct::Generic => 0,
        Sct::CommandSpecific => 1,
        Sct::Media => 2,
        Sct::Path => 3,
        Sct::Vendor => 7,
        Sct::Reserved(x) => x,
    }
}

/// Builds an exception of type `T` with `(errno, message)` as OSError arguments, then sets
/// the attributes. Setting an attribute on a fresh exception instance cannot fail in
/// practice; if it did, the exception is still raised, without that attribute.
pub fn make<T: PyTypeInfo>(py: Python<'_>, errno: i32, msg: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let err = PyErr::from_type(py.get_type::<T>(), (errno, msg));
    let value = err.value(py);
    for (k, v) in attrs {
        let _ = value.setattr(*k, v.bind(py));
    }
    err
}

fn obj<'py, T: IntoPyObjectExt<'py>>(py: Python<'py>, v: T) -> Py<PyAny> {
    v.into_py_any(py).unwrap_or_else(|_| py.None())
}

/// The Python exception for a library error.
pub fn to_py(py: Python<'_>, e: ioswitch::Error) -> PyErr {
    use ioswitch::Error as E;
    let errno = e.errno().unwrap_or(libc::EIO);
    let msg = e.to_string();
    match e {
        E::BadUri { uri, why } => make::<BadUriError>(py, errno, msg, &[("uri", obj(py, uri)), ("why", obj(py, why))]),
        E::BadOpt { key, why } => {
            make::<BadOptionError>(py, errno, msg, &[("key", obj(py, key)), ("why", obj(py, why))])
        }
        E::Os { dev, what, .. } => make::<Error>(py, errno, msg, &[("device", obj(py, dev)), ("what", obj(py, what))]),
        E::Unsupported { dev, kind, iface, why } => make::<UnsupportedError>(
            py,
            errno,
            msg,
            &[
                ("device", obj(py, dev)),
                ("kind", obj(py, kind.as_str())),
                ("interface", obj(py, iface)),
                ("why", obj(py, why)),
            ],
        ),
        E::OutOfRange { dev, what, start, end, limit, unit } => make::<OutOfRangeError>(
            py,
            errno,
            msg,
            &[
                ("device", obj(py, dev)),
                ("what", obj(py, what)),
                ("start", obj(py, start)),
                ("end", obj(py, end)),
                ("limit", obj(py, limit)),
                ("unit", obj(py, unit)),
            ],
        ),
        E::Misaligned { dev, what, value, align } => make::<MisalignedError>(
            py,
            errno,
            msg,
            &[("device", obj(py, dev)), ("what", obj(py, what)), ("value", obj(py, value)), ("align", obj(py, align))],
        ),
        E::BufferSize { dev, what, need, have } => make::<BufferSizeError>(
            py,
            errno,
            msg,
            &[("device", obj(py, dev)), ("what", obj(py, what)), ("need", obj(py, need)), ("have", obj(py, have))],
        ),
        E::BadCommand { dev, iface, what, why } => make::<BadCommandError>(
            py,
            errno,
            msg,
            &[("device", obj(py, dev)), ("interface", obj(py, iface)), ("what", obj(py, what)), ("why", obj(py, why))],
        ),
        E::Busy { depth } => make::<BusyError>(py, errno, msg, &[("depth", obj(py, depth))]),
        E::InUse { dev, what, why } => make::<InUseError>(
            py,
            errno,
            msg,
            &[("device", obj(py, dev)), ("what", obj(py, what)), ("why", obj(py, why))],
        ),
        E::Command { dev, what, status } => make::<CommandError>(
            py,
            errno,
            msg,
            &[
                ("device", obj(py, dev)),
                ("what", obj(py, what)),
                ("status", obj(py, status.code())),
                ("sct", obj(py, sct_value(status.sct()))),
                ("sc", obj(py, status.sc())),
                ("dnr", obj(py, status.dnr())),
                ("status_name", obj(py, status.name())),
            ],
        ),
        E::Queue { dev, iface, what, .. } => make::<QueueError>(
            py,
            errno,
            msg,
            &[("device", obj(py, dev)), ("interface", obj(py, iface)), ("what", obj(py, what))],
        ),
        // A variant added to the library later still becomes an ioswitch.Error.
        _ => make::<Error>(py, errno, msg, &[]),
    }
}

/// `to_py` with completions reaped before the failure attached as `completions`, so a
/// failing `wait` or `drain` loses none of them.
pub fn with_completions(py: Python<'_>, e: ioswitch::Error, done: Bound<'_, PyList>) -> PyErr {
    let err = to_py(py, e);
    let _ = err.value(py).setattr("completions", done);
    err
}

/// An `ioswitch.BadCommandError` (EINVAL) for a request refused before it reached the
/// library, e.g. an unknown operation name.
pub fn bad_request(py: Python<'_>, dev: &str, msg: String) -> PyErr {
    make::<BadCommandError>(py, libc::EINVAL, msg, &[("device", obj(py, dev))])
}
