//! `ioswitch.Device`, its `Geometry` and `Ident`, and synchronous I/O.

use crate::buffer::{self, Buffer, Sink, Source};
use crate::cmds::{self, Op};
use crate::errors;
use crate::queue::Queue;
use ioswitch::cmd::CmdSet;
use ioswitch::{Cmd, Opts};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString};
use std::path::PathBuf;
use std::sync::RwLock;

/// Geometry of a device: where the data is and how it may be addressed.
#[pyclass(module = "ioswitch", frozen, get_all)]
pub struct Geometry {
    /// Logical block size in bytes.
    lba_size: u32,
    /// Number of logical blocks.
    nlbas: u64,
    /// Size in bytes.
    bytes: u64,
    /// Largest transfer of one command, in bytes.
    max_transfer: u64,
    /// Alignment of buffer addresses that direct I/O needs.
    dio_mem_align: u32,
    /// Alignment of offsets and lengths that direct I/O needs.
    dio_offset_align: u32,
    /// Zoned model: "none", "host-managed" or "host-aware".
    zoned: &'static str,
    /// Zone size in LBAs (None when not zoned).
    zone_size: Option<u64>,
    /// Writable LBAs per zone (None when not zoned).
    zone_capacity: Option<u64>,
    /// Number of zones (None when not zoned).
    nr_zones: Option<u64>,
}

#[pymethods]
impl Geometry {
    fn __repr__(&self) -> String {
        format!(
            "Geometry(lba_size={}, nlbas={}, bytes={}, max_transfer={}, zoned={:?})",
            self.lba_size, self.nlbas, self.bytes, self.max_transfer, self.zoned
        )
    }
}

impl Geometry {
    fn of(g: &ioswitch::Geometry) -> Geometry {
        Geometry {
            lba_size: g.lba_size,
            nlbas: g.nlbas,
            bytes: g.bytes,
            max_transfer: g.max_transfer,
            dio_mem_align: g.dio_mem_align,
            dio_offset_align: g.dio_offset_align,
            zoned: match g.zoned {
                ioswitch::ZonedModel::None => "none",
                ioswitch::ZonedModel::HostManaged => "host-managed",
                ioswitch::ZonedModel::HostAware => "host-aware",
            },
            zone_size: g.zones.map(|z| z.zone_size),
            zone_capacity: g.zones.map(|z| z.zone_capacity),
            nr_zones: g.zones.map(|z| z.nr_zones),
        }
    }
}

/// Identity of a device.
#[pyclass(module = "ioswitch", frozen, get_all)]
pub struct Ident {
    /// The URI it was opened with.
    uri: String,
    /// Its canonical path, when it has one.
    path: Option<String>,
    /// Its kind: "file", "block device", "NVMe namespace block device", "NVMe generic
    /// char device", "NVMe controller" or "ramdisk".
    kind: &'static str,
    /// Namespace id (1 for devices that are not NVMe).
    nsid: u32,
    /// Kernel driver, or the file system type for files.
    driver: Option<String>,
    /// Block device name (for a file: the block device holding it).
    block_name: Option<String>,
    /// Model string, when the device reports one.
    model: Option<String>,
    /// Serial number, when the device reports one.
    serial: Option<String>,
    /// Why writes are refused (the device, a partition of it or its disk is mounted,
    /// swapped on or held; `allow_mounted_write=True` lifts it), or None.
    in_use: Option<String>,
    /// DAX namespace mode ("devdax" or "fsdax") of a devdax device or a file on a DAX
    /// file system, else None.
    dax_mode: Option<String>,
    /// The DAX namespace ("namespace0.0"), when sysfs names it.
    dax_namespace: Option<String>,
    /// The alignment DAX mappings respect, in bytes; None when not DAX.
    dax_align: Option<u64>,
    /// The DAX device's (or pmem block device's) size in bytes; None when not DAX.
    dax_size: Option<u64>,
}

#[pymethods]
impl Ident {
    fn __repr__(&self) -> String {
        format!("Ident(uri={:?}, kind={:?}, nsid={}, driver={:?})", self.uri, self.kind, self.nsid, self.driver)
    }
}

impl Ident {
    fn of(i: &ioswitch::Ident) -> Ident {
        Ident {
            uri: i.uri.clone(),
            path: i.path.as_ref().map(|p| p.display().to_string()),
            kind: i.kind.as_str(),
            nsid: i.nsid,
            driver: i.driver.clone(),
            block_name: i.block_name.clone(),
            model: i.model.clone(),
            serial: i.serial.clone(),
            in_use: i.in_use.clone(),
            dax_mode: i.dax.as_ref().map(|d| d.mode.clone()),
            dax_namespace: i.dax.as_ref().and_then(|d| d.namespace.clone()),
            dax_align: i.dax.as_ref().map(|d| d.align),
            dax_size: i.dax.as_ref().map(|d| d.size),
        }
    }
}

/// Builds library options from an option string and keyword arguments.
///
/// Keyword values: `True`/`False` (booleans), ints, and strings (`"1MiB"`,
/// `"io_uring"`); `None` leaves an option unset. A trailing underscore is dropped from a
/// key, so `async_="io_uring"` works where `async=` is a Python syntax error.
pub fn build_opts(py: Python<'_>, opts: Option<&str>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Opts> {
    let to_py = |e| errors::to_py(py, e);
    let mut o: Opts = opts.unwrap_or("").parse().map_err(to_py)?;
    let mut given: Vec<String> = opts
        .unwrap_or("")
        .split(',')
        .map(|i| i.split('=').next().unwrap_or("").trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    if let Some(kw) = kwargs {
        for (k, v) in kw.iter() {
            let key: String = k.extract()?;
            let key = key.strip_suffix('_').unwrap_or(&key).to_string();
            if v.is_none() {
                continue;
            }
            let value = if v.is_instance_of::<PyBool>() {
                if v.is_truthy()? { "1" } else { "0" }.to_string()
            } else if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyString>() || v.is_instance_of::<PyFloat>() {
                v.str()?.to_string()
            } else {
                let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
                return Err(errors::to_py(
                    py,
                    ioswitch::Error::BadOpt { key, why: format!("must be a bool, int or str, not {ty}") },
                ));
            };
            if given.contains(&key) {
                return Err(errors::to_py(
                    py,
                    ioswitch::Error::BadOpt { key, why: "given twice (in opts= and as a keyword)".into() },
                ));
            }
            o.set(&key, &value).map_err(to_py)?;
            given.push(key);
        }
    }
    o.validate().map_err(to_py)?;
    Ok(o)
}

/// The data of a synchronous command.
enum Payload<'a, 'py> {
    /// None (flush, write zeroes, trim on files).
    Nothing,
    /// A library buffer (made here: reads, copies of Python data, DSM ranges).
    Owned(ioswitch::Buffer),
    /// A fresh zeroed buffer of this many bytes, allocated without the GIL.
    Alloc(usize),
    /// The caller's `ioswitch.Buffer`, used in place.
    Shared(&'a Bound<'py, Buffer>),
}

/// An open device.
///
/// `Device.open(uri, opts=None, **options)` (or `Device(uri, …)`) opens a regular file,
/// a block device, an NVMe device, or a ramdisk given by size (`"64MiB"`). Options are
/// the library's option keys, as keywords or as an option string: `sync`, `async`
/// (write `async_=` or `**{"async": …}`: `async` is a Python keyword), `admin`, `mem`,
/// `nsid`, `direct`, `rdonly`, `wronly`, `create`, `truncate`, `size`, `sqpoll`,
/// `sqpoll_cpu`, `iopoll`, `register_files`, `register_buffers`, `threads`.
///
/// The GIL is released while the device opens and during every I/O call, so other Python
/// threads run meanwhile. A device may be shared by threads; each should use its own
/// `Queue`. Use it as a context manager, or call `close()`, to release it early.
#[pyclass(module = "ioswitch", frozen)]
pub struct Device {
    dev: RwLock<Option<ioswitch::Device>>,
    uri: String,
    geometry: Py<Geometry>,
    ident: Py<Ident>,
}

fn uri_string(py: Python<'_>, uri: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = uri.extract::<String>() {
        return Ok(s);
    }
    let p: PathBuf = uri.extract().map_err(|_| PyTypeError::new_err("uri: expected a str or os.PathLike"))?;
    p.to_str().map(str::to_string).ok_or_else(|| {
        errors::to_py(py, ioswitch::Error::BadUri { uri: p.display().to_string(), why: "is not valid UTF-8".into() })
    })
}

impl Device {
    /// The library device; `ioswitch.Error` (EBADF) once closed.
    pub fn dev(&self, py: Python<'_>) -> PyResult<ioswitch::Device> {
        let g = self.dev.read().unwrap_or_else(|p| p.into_inner());
        g.clone().ok_or_else(|| {
            errors::make::<errors::Error>(py, libc::EBADF, format!("{}: the device is closed", self.uri), &[])
        })
    }

    /// Runs `cmd` on the sync interface with the GIL released. Returns the command's
    /// result and the buffer it used (for `Owned`/`Alloc` payloads).
    fn pass(&self, py: Python<'_>, cmd: Cmd, payload: Payload<'_, '_>) -> PyResult<(u64, Option<ioswitch::Buffer>)> {
        let dev = self.dev(py)?;
        let r = match payload {
            Payload::Nothing => py.detach(|| dev.pass(&cmd, &mut []).map(|n| (n, None))),
            Payload::Owned(mut b) => py.detach(|| dev.pass(&cmd, std::slice::from_mut(&mut b)).map(|n| (n, Some(b)))),
            Payload::Alloc(len) => py.detach(|| {
                let mut b = dev.alloc(len)?;
                dev.pass(&cmd, std::slice::from_mut(&mut b)).map(|n| (n, Some(b)))
            }),
            Payload::Shared(obj) => {
                let shared = obj.get();
                // None: the buffer is in flight in a queue.
                let r = py.detach(|| {
                    let mut st = shared.lock();
                    st.buf.as_mut().map(|b| dev.pass(&cmd, std::slice::from_mut(b)).map(|n| (n, None)))
                });
                r.ok_or_else(|| {
                    PyBufferError::new_err("the ioswitch.Buffer is in flight in a queue: reap its completion first")
                })?
            }
        };
        r.map_err(|e| errors::to_py(py, e))
    }

    /// Bytes a data command moved: the result for file-set commands (bytes transferred),
    /// the requested length for NVM commands (whose result is DW0, not a count).
    fn moved(cmd: &Cmd, result: u64, len: usize) -> usize {
        if cmd.set == CmdSet::Fs {
            usize::try_from(result).unwrap_or(len).min(len)
        } else {
            len
        }
    }

    /// The in-place half of `read_into` and `write`: `op` over the whole of the caller's
    /// `Buffer` (not empty) at byte `offset`; returns the bytes moved.
    fn pass_bytes_shared(
        &self,
        py: Python<'_>,
        dev: &ioswitch::Device,
        op: Op,
        offset: u64,
        shared: &Bound<'_, Buffer>,
    ) -> PyResult<usize> {
        let len = shared.get().len();
        let (cmd, _) = cmds::byte_cmd(py, dev, cmds::passthrough(dev, true), op, offset, len as u64)?;
        let (n, _) = self.pass(py, cmd, Payload::Shared(shared))?;
        Ok(Self::moved(&cmd, n, len))
    }

    /// The in-place half of `read_lba_into` and `write_lba`: `op` over the whole of the
    /// caller's `Buffer` (a whole number of LBAs) from LBA `slba`; returns its length.
    fn pass_lba_shared(
        &self,
        py: Python<'_>,
        dev: &ioswitch::Device,
        op: Op,
        slba: u64,
        shared: &Bound<'_, Buffer>,
    ) -> PyResult<usize> {
        let len = shared.get().len();
        let nlb = self.lba_len(py, dev, op, len)?;
        let cmd = cmds::lba_cmd(py, dev, op, slba, nlb)?;
        self.pass(py, cmd, Payload::Shared(shared))?;
        Ok(len)
    }

    /// The copying half of `read_into` and `read_lba_into`: `cmd` into an aligned buffer
    /// of the sink's length, then copied into the sink; returns the command's result.
    fn pass_into(&self, py: Python<'_>, cmd: Cmd, sink: &Sink) -> PyResult<u64> {
        let len = sink.len();
        let (n, b) = self.pass(py, cmd, Payload::Alloc(len))?;
        if let Some(b) = &b {
            sink.copy_from(py, b)?;
        }
        buffer::release(py, len, b);
        Ok(n)
    }

    /// The copying half of `write` and `write_lba`: `data` (whose view is `src`) copied
    /// into an aligned buffer, then `cmd` from it; returns the command's result.
    fn pass_from(
        &self,
        py: Python<'_>,
        dev: &ioswitch::Device,
        cmd: Cmd,
        src: &Source,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let len = src.len();
        let b = buffer::copy_in(py, dev, src, data)?;
        let (n, b) = self.pass(py, cmd, Payload::Owned(b))?;
        buffer::release(py, len, b);
        Ok(n)
    }

    fn lba_len(&self, py: Python<'_>, dev: &ioswitch::Device, op: Op, len: usize) -> PyResult<u64> {
        let lba = dev.geometry().lba_size.max(1) as usize;
        if len == 0 || len % lba != 0 {
            return Err(errors::bad_request(
                py,
                &self.uri,
                format!("{}: {len} bytes is not a whole, non-zero number of {lba}-byte LBAs", op.name()),
            ));
        }
        Ok((len / lba) as u64)
    }
}

#[pymethods]
impl Device {
    /// Device(uri, opts=None, **options): same as `Device.open`.
    #[new]
    #[pyo3(signature = (uri, opts = None, **kwargs))]
    fn py_new(
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        opts: Option<&str>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Device> {
        let uri = uri_string(py, uri)?;
        let o = build_opts(py, opts, kwargs)?;
        let dev = py.detach(|| ioswitch::Device::open(&uri, &o)).map_err(|e| errors::to_py(py, e))?;
        Ok(Device {
            geometry: Py::new(py, Geometry::of(dev.geometry()))?,
            ident: Py::new(py, Ident::of(dev.ident()))?,
            uri,
            dev: RwLock::new(Some(dev)),
        })
    }

    /// Device.open(uri, opts=None, **options) -> Device
    ///
    /// Opens `uri` (a path, or a ramdisk size such as "64MiB"). `opts` is an option string
    /// ("async=io_uring,direct=1"); keyword options are the same keys
    /// (`direct=True, size="1MiB", async_="io_uring"`). Interfaces not named get the
    /// default for the kind of device; a named interface that cannot serve it raises
    /// `UnsupportedError`, which names the device, its kind and the interface.
    #[staticmethod]
    #[pyo3(signature = (uri, opts = None, **kwargs))]
    fn open(
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        opts: Option<&str>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Device> {
        Device::py_new(py, uri, opts, kwargs)
    }

    /// The URI the device was opened with.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// Geometry: lba_size, nlbas, bytes, max_transfer, zoned, …
    #[getter]
    fn geometry(&self, py: Python<'_>) -> Py<Geometry> {
        self.geometry.clone_ref(py)
    }

    /// Identity: kind, nsid, driver, path, …
    #[getter]
    fn ident(&self, py: Python<'_>) -> Py<Ident> {
        self.ident.clone_ref(py)
    }

    /// The interfaces serving the device: {"sync": …, "async": …, "admin": …, "mem": …};
    /// None for a role the device has no interface for.
    #[getter]
    fn interfaces<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = self.dev(py)?.interfaces();
        let d = PyDict::new(py);
        d.set_item("sync", i.sync.map(|s| s.as_str()))?;
        d.set_item("async", i.r#async.map(|s| s.as_str()))?;
        d.set_item("admin", i.admin.as_str())?;
        d.set_item("mem", i.mem.as_str())?;
        Ok(d)
    }

    /// The options the device was opened with, as an option string.
    #[getter]
    fn opts(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.dev(py)?.opts().to_string())
    }

    /// The alignment `alloc` gives buffers (LBA size, direct-I/O alignment, page size).
    #[getter]
    fn buffer_align(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.dev(py)?.buffer_align())
    }

    /// The open file descriptor the device's interfaces use, for the calls ioswitch does
    /// not make itself (`os.posix_fadvise`, `fcntl`); valid while the device is open, and
    /// not to be closed. Raises `ioswitch.Error` (ENODATA) for a device without one (a
    /// ramdisk, a PCI address), (EBADF) once closed.
    fn fileno(&self, py: Python<'_>) -> PyResult<i32> {
        use std::os::fd::AsRawFd;
        let dev = self.dev(py)?;
        let fd = dev.fd().map(|f| f.as_raw_fd());
        fd.ok_or_else(|| {
            let why = format!("{} ({}) has no file descriptor", self.uri, dev.ident().kind);
            errors::make::<errors::Error>(py, libc::ENODATA, why, &[])
        })
    }

    /// True after `close()`.
    #[getter]
    fn closed(&self) -> bool {
        self.dev.read().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Releases this handle. Queues made from the device keep it open until they are
    /// closed too. Further calls on this object raise `ioswitch.Error` (EBADF).
    fn close(&self) {
        let dev = self.dev.write().unwrap_or_else(|p| p.into_inner()).take();
        drop(dev);
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let g = self.geometry.get();
        let i = self.ident.get();
        let ifaces = match self.dev(py) {
            Ok(d) => {
                let f = d.interfaces();
                format!(
                    "sync={}, async={}",
                    f.sync.map(|s| s.as_str()).unwrap_or("none"),
                    f.r#async.map(|s| s.as_str()).unwrap_or("none")
                )
            }
            Err(_) => "closed".into(),
        };
        format!("<ioswitch.Device {:?} ({}, {} bytes, lba {}, {ifaces})>", self.uri, i.kind, g.bytes, g.lba_size)
    }

    /// alloc(nbytes) -> Buffer
    ///
    /// Zeroed memory aligned for this device (as direct I/O needs). Reads and writes on
    /// it copy nothing between Python and the library.
    fn alloc(&self, py: Python<'_>, nbytes: usize) -> PyResult<Buffer> {
        let dev = self.dev(py)?;
        let align = dev.buffer_align();
        let b = py.detach(|| dev.alloc(nbytes)).map_err(|e| errors::to_py(py, e))?;
        Ok(Buffer::new(b, align))
    }

    /// pmem_range(offset, length) -> PmemRange
    ///
    /// Lends `length` bytes at byte `offset` of a `sync=pmem` device's memory:
    /// `memoryview(range)` loads and stores in place, `range.persist()` makes stores
    /// durable. `ioswitch.UnsupportedError` when the sync interface is not pmem.
    fn pmem_range(&self, py: Python<'_>, offset: u64, length: usize) -> PyResult<crate::pmem::PmemRange> {
        let dev = self.dev(py)?;
        crate::pmem::PmemRange::new(py, dev, offset, length)
    }

    /// How `sync=pmem` mapped the device, as a dict (`mode`: fsdax, devdax or forced;
    /// `forced`; `populate`: pmem_populate=1; `populate_writes`: populated for writing
    /// too (Linux 5.14 and later, a writable device); `flush`: the write-back instruction;
    /// `nt_threshold`; `align`); None for
    /// other sync interfaces.
    #[getter]
    fn pmem<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(p) = self.dev(py)?.pmem() else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("mode", p.mode)?;
        d.set_item("forced", p.forced)?;
        d.set_item("populate", p.populate)?;
        d.set_item("populate_writes", p.populate_writes)?;
        d.set_item("flush", p.flush)?;
        d.set_item("nt_threshold", p.nt_threshold)?;
        d.set_item("align", p.align)?;
        Ok(Some(d))
    }

    /// read(offset, length) -> bytes
    ///
    /// Reads `length` bytes at byte `offset` on the sync interface, GIL released. The data
    /// lands in an aligned library buffer and is copied once into the returned bytes.
    fn read<'py>(&self, py: Python<'py>, offset: u64, length: usize) -> PyResult<Bound<'py, PyBytes>> {
        if length == 0 {
            return Ok(PyBytes::new(py, b""));
        }
        let dev = self.dev(py)?;
        let (cmd, _) = cmds::byte_cmd(py, &dev, cmds::passthrough(&dev, true), Op::Read, offset, length as u64)?;
        cmds::check_len(py, &dev, Op::Read, length as u64)?;
        let (n, b) = self.pass(py, cmd, Payload::Alloc(length))?;
        let n = Self::moved(&cmd, n, length);
        let out = buffer::new_bytes(py, b.as_deref().map(|b| &b[..n]).unwrap_or(b""));
        buffer::release(py, length, b);
        out
    }

    /// read_into(offset, buffer) -> int
    ///
    /// Reads len(buffer) bytes at byte `offset` into `buffer` (bytearray, writable
    /// memoryview, array, ioswitch.Buffer …); returns the bytes read. An ioswitch.Buffer is
    /// read into in place; any other object gets one copy from an aligned buffer.
    fn read_into(&self, py: Python<'_>, offset: u64, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        if let Ok(shared) = buffer.cast::<Buffer>() {
            if shared.get().len() == 0 {
                return Ok(0);
            }
            return self.pass_bytes_shared(py, &self.dev(py)?, Op::Read, offset, shared);
        }
        let sink = Sink::get(buffer, "buffer")?;
        let len = sink.len();
        if len == 0 {
            return Ok(0);
        }
        let dev = self.dev(py)?;
        cmds::check_len(py, &dev, Op::Read, len as u64)?;
        let (cmd, _) = cmds::byte_cmd(py, &dev, cmds::passthrough(&dev, true), Op::Read, offset, len as u64)?;
        let n = self.pass_into(py, cmd, &sink)?;
        Ok(Self::moved(&cmd, n, len))
    }

    /// write(offset, data) -> int
    ///
    /// Writes `data` (bytes, bytearray, memoryview, array, ioswitch.Buffer …) at byte
    /// `offset`; returns the bytes written. An ioswitch.Buffer is written from in place;
    /// any other object is copied once into an aligned buffer first.
    fn write(&self, py: Python<'_>, offset: u64, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let dev = self.dev(py)?;
        if let Ok(shared) = data.cast::<Buffer>() {
            if shared.get().len() == 0 {
                return Ok(0);
            }
            return self.pass_bytes_shared(py, &dev, Op::Write, offset, shared);
        }
        let src = Source::get(data, "data")?;
        let len = src.len();
        if len == 0 {
            return Ok(0);
        }
        let (cmd, _) = cmds::byte_cmd(py, &dev, cmds::passthrough(&dev, true), Op::Write, offset, len as u64)?;
        let n = self.pass_from(py, &dev, cmd, &src, data)?;
        Ok(Self::moved(&cmd, n, len))
    }

    /// read_lba(slba, nlb) -> bytes
    ///
    /// Reads `nlb` logical blocks (1..=65536) from LBA `slba` with an NVM Read.
    fn read_lba<'py>(&self, py: Python<'py>, slba: u64, nlb: u64) -> PyResult<Bound<'py, PyBytes>> {
        let dev = self.dev(py)?;
        let cmd = cmds::lba_cmd(py, &dev, Op::ReadLba, slba, nlb)?;
        let len = usize::try_from(nlb * u64::from(dev.geometry().lba_size))
            .map_err(|_| errors::bad_request(py, &self.uri, format!("read_lba: nlb={nlb} is too large")))?;
        cmds::check_len(py, &dev, Op::ReadLba, len as u64)?;
        let (_, b) = self.pass(py, cmd, Payload::Alloc(len))?;
        let out = buffer::new_bytes(py, b.as_deref().unwrap_or(b""));
        buffer::release(py, len, b);
        out
    }

    /// read_lba_into(slba, buffer) -> int
    ///
    /// Reads len(buffer) bytes (a whole number of LBAs) from LBA `slba` into `buffer`;
    /// returns the bytes read.
    fn read_lba_into(&self, py: Python<'_>, slba: u64, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let dev = self.dev(py)?;
        if let Ok(shared) = buffer.cast::<Buffer>() {
            return self.pass_lba_shared(py, &dev, Op::ReadLba, slba, shared);
        }
        let sink = Sink::get(buffer, "buffer")?;
        let len = sink.len();
        let nlb = self.lba_len(py, &dev, Op::ReadLba, len)?;
        cmds::check_len(py, &dev, Op::ReadLba, len as u64)?;
        let cmd = cmds::lba_cmd(py, &dev, Op::ReadLba, slba, nlb)?;
        self.pass_into(py, cmd, &sink)?;
        Ok(len)
    }

    /// write_lba(slba, data) -> int
    ///
    /// Writes `data` (a whole number of LBAs) from LBA `slba` with an NVM Write; returns
    /// the bytes written.
    fn write_lba(&self, py: Python<'_>, slba: u64, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let dev = self.dev(py)?;
        if let Ok(shared) = data.cast::<Buffer>() {
            return self.pass_lba_shared(py, &dev, Op::WriteLba, slba, shared);
        }
        let src = Source::get(data, "data")?;
        let len = src.len();
        let nlb = self.lba_len(py, &dev, Op::WriteLba, len)?;
        let cmd = cmds::lba_cmd(py, &dev, Op::WriteLba, slba, nlb)?;
        self.pass_from(py, &dev, cmd, &src, data)?;
        Ok(len)
    }

    /// write_zeroes(slba, nlb) -> None
    ///
    /// Zeroes `nlb` logical blocks from LBA `slba` (NVM Write Zeroes).
    fn write_zeroes(&self, py: Python<'_>, slba: u64, nlb: u64) -> PyResult<()> {
        let dev = self.dev(py)?;
        let cmd = cmds::lba_cmd(py, &dev, Op::WriteZeroes, slba, nlb)?;
        self.pass(py, cmd, Payload::Nothing)?;
        Ok(())
    }

    /// flush() -> None
    ///
    /// Makes written data durable (fdatasync on files and block devices, NVM Flush on
    /// passthrough interfaces).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let dev = self.dev(py)?;
        let (cmd, _) = cmds::byte_cmd(py, &dev, cmds::passthrough(&dev, true), Op::Flush, 0, 0)?;
        self.pass(py, cmd, Payload::Nothing)?;
        Ok(())
    }

    /// trim(offset, length) -> None
    ///
    /// Discards `length` bytes at byte `offset` (hole punch on files, discard on block
    /// devices, Dataset Management deallocate on NVMe passthrough); reads of the range
    /// return zeroes afterwards on files.
    fn trim(&self, py: Python<'_>, offset: u64, length: u64) -> PyResult<()> {
        let dev = self.dev(py)?;
        let (cmd, dsm) = cmds::byte_cmd(py, &dev, cmds::passthrough(&dev, true), Op::Trim, offset, length)?;
        let payload = match dsm {
            Some(b) => Payload::Owned(b),
            None => Payload::Nothing,
        };
        self.pass(py, cmd, payload)?;
        Ok(())
    }

    /// queue(depth=64) -> Queue
    ///
    /// An asynchronous queue of `depth` slots (1..=4096) on the device's async interface.
    #[pyo3(signature = (depth = 64))]
    fn queue(slf: Bound<'_, Self>, depth: u32) -> PyResult<Queue> {
        let py = slf.py();
        let dev = slf.get().dev(py)?;
        let q = py.detach(|| dev.queue(depth)).map_err(|e| errors::to_py(py, e))?;
        Ok(Queue::new(q, slf.unbind()))
    }

    /// identify(cns, nsid=0, cntid=0, csi=0) -> bytes
    ///
    /// The raw 4096-byte page of an Admin Identify on the admin interface (emulated for
    /// devices that are not NVMe).
    #[pyo3(signature = (cns, nsid = 0, cntid = 0, csi = 0))]
    fn identify<'py>(&self, py: Python<'py>, cns: u8, nsid: u32, cntid: u16, csi: u8) -> PyResult<Bound<'py, PyBytes>> {
        let b = crate::admin::identify(py, &self.dev(py)?, cns, nsid, cntid, csi)?;
        Ok(PyBytes::new(py, &b))
    }

    /// get_log(lid, nbytes, nsid=0xFFFFFFFF, offset=0) -> bytes
    ///
    /// The raw bytes of log page `lid` (Admin Get Log Page); `nbytes` and `offset` are
    /// whole dwords.
    #[pyo3(signature = (lid, nbytes, nsid = 0xFFFF_FFFF, offset = 0))]
    fn get_log<'py>(
        &self,
        py: Python<'py>,
        lid: u8,
        nbytes: u32,
        nsid: u32,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let b = crate::admin::get_log(py, &self.dev(py)?, lid, nbytes, nsid, offset)?;
        Ok(PyBytes::new(py, &b))
    }

    /// identify_ctrl() -> dict
    ///
    /// Identify Controller, parsed: one key per spec field (vid, sn, mn, fr, mdts, nn, …).
    fn identify_ctrl<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::admin::identify_ctrl(py, &self.dev(py)?)
    }

    /// identify_ns(nsid=None) -> dict
    ///
    /// Identify Namespace of `nsid` (default: this device's), parsed (nsze, ncap, nuse,
    /// flbas, lbaf, …).
    #[pyo3(signature = (nsid = None))]
    fn identify_ns<'py>(&self, py: Python<'py>, nsid: Option<u32>) -> PyResult<Bound<'py, PyAny>> {
        let dev = self.dev(py)?;
        let nsid = nsid.unwrap_or(dev.ident().nsid);
        crate::admin::identify_ns(py, &dev, nsid)
    }

    /// smart_log() -> dict
    ///
    /// The SMART / Health Information log page, parsed (critical_warning, temperature,
    /// data_units_read, …).
    fn smart_log<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::admin::smart_log(py, &self.dev(py)?)
    }
}
