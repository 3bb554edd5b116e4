"""Type stubs of the Python module `ioswitch` (the native part is `ioswitch._ioswitch`)."""

import os
import sys
from types import TracebackType
from typing import Any, Literal, final

from typing_extensions import Buffer as _BufferLike

from . import bench as bench

__all__ = [
    "BadCommandError",
    "BadOptionError",
    "BadUriError",
    "BenchError",
    "Buffer",
    "BufferSizeError",
    "BusyError",
    "InUseError",
    "CommandError",
    "Completion",
    "Device",
    "Error",
    "Geometry",
    "Ident",
    "MisalignedError",
    "OutOfRangeError",
    "PmemRange",
    "Queue",
    "QueueError",
    "QueueStats",
    "UnsupportedError",
    "__version__",
    "bench",
    "enumerate",
    "option_keys",
]

__version__: str

_Op = Literal["read", "write", "flush", "trim", "read_lba", "write_lba", "write_zeroes"]
_OptValue = bool | int | str | None

# ---------------------------------------------------------------------------------------
# Exceptions: every one is an OSError with errno and strerror (the full message).
# ---------------------------------------------------------------------------------------

class Error(OSError):
    """Base of every ioswitch error. ``errno`` is the OS error, or the closest one
    (EINVAL bad request, ERANGE out of range, EBUSY queue full, EOPNOTSUPP unsupported
    interface); ``strerror`` the full message naming the device, request and reason."""

    device: str
    what: str

class BadUriError(Error):
    """The device string names nothing ioswitch can open."""

    uri: str
    why: str

class BadOptionError(Error):
    """An unknown option, a bad value, or options that cannot work together."""

    key: str
    why: str

class UnsupportedError(Error):
    """An interface that cannot serve this kind of device."""

    device: str
    kind: str
    interface: str
    why: str

class OutOfRangeError(Error):
    """A request past the end of the device; nothing was done."""

    device: str
    start: int
    end: int
    limit: int
    unit: Literal["LBAs", "bytes"]

class MisalignedError(Error):
    """Direct I/O needs aligned buffers, offsets and lengths; nothing was done."""

    device: str
    what: str
    value: int
    align: int

class BufferSizeError(Error):
    """The data is smaller than the command's transfer; nothing was done."""

    device: str
    need: int
    have: int

class BadCommandError(Error):
    """A command the interface cannot carry, or a malformed request."""

    device: str

class BusyError(Error):
    """The queue is full (``depth`` commands outstanding): reap, then submit again."""

    depth: int

class InUseError(Error):
    """A command that may write, refused (errno EBUSY) because the device, a partition of
    it or its disk is mounted, swapped on or held by another kernel user; nothing was
    done. ``allow_mounted_write=True`` at open lifts the guard."""

    device: str
    what: str
    why: str

class CommandError(Error):
    """The command ran and failed."""

    device: str
    status: int
    """SCT << 8 | SC."""
    sct: int
    sc: int
    dnr: bool
    status_name: str

class QueueError(Error):
    """The queue machinery failed (a syscall on the ring, a dead worker thread)."""

    device: str
    interface: str
    completions: list[Completion]
    """Completions reaped before the failure (also set on errors of wait/drain/poke)."""

class BenchError(Error):
    """A benchmark that could not be prepared, or (check=True) whose jobs failed."""

    report: dict[str, Any] | None

# ---------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------

@final
class Geometry:
    """Where the data is and how it may be addressed."""

    @property
    def lba_size(self) -> int:
        """Logical block size in bytes."""
    @property
    def nlbas(self) -> int:
        """Number of logical blocks."""
    @property
    def bytes(self) -> int:
        """Size in bytes."""
    @property
    def max_transfer(self) -> int:
        """Largest transfer of one command, in bytes."""
    @property
    def dio_mem_align(self) -> int:
        """Alignment of buffer addresses that direct I/O needs."""
    @property
    def dio_offset_align(self) -> int:
        """Alignment of offsets and lengths that direct I/O needs."""
    @property
    def zoned(self) -> Literal["none", "host-managed", "host-aware"]:
        """Zoned model."""
    @property
    def zone_size(self) -> int | None:
        """Zone size in LBAs (None when not zoned)."""
    @property
    def zone_capacity(self) -> int | None:
        """Writable LBAs per zone (None when not zoned)."""
    @property
    def nr_zones(self) -> int | None:
        """Number of zones (None when not zoned)."""

@final
class Ident:
    """Who the device is."""

    @property
    def uri(self) -> str:
        """The URI it was opened with."""
    @property
    def path(self) -> str | None:
        """Its canonical path, when it has one."""
    @property
    def kind(self) -> str:
        """"file", "block device", "NVMe namespace block device", "NVMe generic char
        device", "NVMe controller" or "ramdisk"."""
    @property
    def nsid(self) -> int:
        """Namespace id (1 for devices that are not NVMe)."""
    @property
    def driver(self) -> str | None:
        """Kernel driver, or the file system type for files."""
    @property
    def block_name(self) -> str | None:
        """Block device name (for a file: the block device holding it)."""
    @property
    def model(self) -> str | None:
        """Model string, when reported."""
    @property
    def serial(self) -> str | None:
        """Serial number, when reported."""
    @property
    def in_use(self) -> str | None:
        """Why writes are refused (mounted, swapped on or held), or None."""
    @property
    def dax_mode(self) -> str | None:
        """DAX namespace mode ("devdax" or "fsdax") of a devdax device or a file on a
        DAX file system, else None."""
    @property
    def dax_namespace(self) -> str | None:
        """The DAX namespace ("namespace0.0"), when sysfs names it."""
    @property
    def dax_align(self) -> int | None:
        """The alignment DAX mappings respect, in bytes; None when not DAX."""
    @property
    def dax_size(self) -> int | None:
        """The DAX device's (or pmem block device's) size in bytes; None when not DAX."""

@final
class Buffer:
    """Aligned memory for zero-copy I/O, exported through the buffer protocol
    (``memoryview(buf)`` reads and writes it in place). Reads into and writes from it
    copy nothing. Submitted to a queue, it is moved there until its completion is
    reaped; meanwhile it cannot be viewed, and it cannot be submitted while a memoryview
    of it is alive (``BufferError``)."""

    def __new__(cls, nbytes: int, alignment: int = 4096) -> Buffer:
        """Zeroed memory of `nbytes` aligned to `alignment` (a power of two)."""
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    @property
    def address(self) -> int:
        """Start address of the memory."""
    @property
    def alignment(self) -> int:
        """The alignment the memory was allocated with."""
    @property
    def in_flight(self) -> bool:
        """True while a queue holds the memory."""
    def tobytes(self) -> bytes:
        """A copy of the contents."""
    def fill(self, value: int) -> None:
        """Sets every byte to `value` (0..=255)."""

_Readable = _BufferLike | Buffer
_Writable = bytearray | memoryview | Buffer | _BufferLike

@final
class PmemRange:
    """A range of a sync=pmem device's memory, lent for loads and stores through the
    buffer protocol (``memoryview(r)``). While held, the device's commands on it fail with
    EBUSY and an overlapping range is refused. ``release()`` (refused while memoryviews
    are alive) or leaving its ``with`` block gives it back."""

    def __len__(self) -> int: ...
    if sys.version_info >= (3, 12):
        # The buffer protocol's Python-level method (PEP 688) exists from 3.12 on;
        # memoryview(r) works on 3.11 too, through the C slot.
        def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def offset(self) -> int:
        """The range's offset in the device."""
    @property
    def released(self) -> bool: ...
    def persist(self, offset: int = 0, length: int | None = None) -> None:
        """Makes `length` bytes at `offset` of the range durable (write-backs + fence)."""
    def read_at(self, offset: int, length: int) -> bytes:
        """Copies `length` bytes at `offset` of the range under the SIGBUS guard
        (``ioswitch.Error`` with errno EIO where a page is gone)."""
    def write_at(self, offset: int, data: _Readable) -> None:
        """Copies `data` to `offset` of the range durably (no ``persist`` needed), under
        the SIGBUS guard."""
    def release(self) -> None: ...
    def __enter__(self) -> PmemRange: ...
    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None, /
    ) -> bool: ...

@final
class Device:
    """An open device: a regular file, a block device, an NVMe device, a devdax device,
    an NVMe controller by PCI address ("0000:00:05.0", through the user-space driver), or
    a ramdisk given by size ("64MiB"). The GIL is released while it opens and during every
    I/O.
    Use it as a context manager, or call close()."""

    def __new__(cls, uri: str | os.PathLike[str], opts: str | None = None, **kwargs: _OptValue) -> Device:
        """Same as Device.open."""
    @staticmethod
    def open(uri: str | os.PathLike[str], opts: str | None = None, **kwargs: _OptValue) -> Device:
        """Opens `uri`. `opts` is an option string ("async=io_uring,direct=1"); keyword
        options use the same keys: sync, async (spell it ``async_=``), admin, mem, nsid,
        direct, osync, rdonly, wronly, create, truncate, size, sqpoll, sqpoll_cpu, iopoll,
        register_files, register_buffers, single_issuer, reap_spin, threads, psync_call, rwf_hipri,
        allow_mounted_write, pmem_force, pmem_populate, dma (ioswitch.option_keys() says what
        each does). Raises BadOptionError (naming the key), UnsupportedError (naming device,
        kind and interface), or Error (errno)."""
    @property
    def uri(self) -> str: ...
    @property
    def geometry(self) -> Geometry: ...
    @property
    def ident(self) -> Ident: ...
    @property
    def interfaces(self) -> dict[str, str | None]:
        """{"sync": …, "async": …, "admin": …, "mem": …}."""
    @property
    def opts(self) -> str:
        """The options, as an option string."""
    @property
    def buffer_align(self) -> int:
        """The alignment alloc() gives buffers."""
    @property
    def closed(self) -> bool: ...
    def fileno(self) -> int:
        """The device's open file descriptor, for calls ioswitch does not make itself
        (os.posix_fadvise, fcntl); not to be closed. Error (ENODATA) for a ramdisk or a
        PCI address, which have none; Error (EBADF) once closed."""
    def close(self) -> None:
        """Releases this handle (queues keep the device open until closed)."""
    def __enter__(self) -> Device: ...
    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None, /
    ) -> bool: ...
    def alloc(self, nbytes: int) -> Buffer:
        """Zeroed memory aligned for this device: reads and writes on it copy nothing."""
    def pmem_range(self, offset: int, length: int) -> PmemRange:
        """Lends `length` bytes at `offset` of a sync=pmem device's memory for loads and
        stores (``memoryview(range)``); ``range.persist()`` makes them durable."""
    @property
    def pmem(self) -> dict[str, Any] | None:
        """How sync=pmem mapped the device (mode, forced, flush, nt_threshold, align); None
        for other sync interfaces."""
    def read(self, offset: int, length: int) -> bytes:
        """Reads `length` bytes at byte `offset` (one copy into the returned bytes)."""
    def read_into(self, offset: int, buffer: _Writable) -> int:
        """Reads len(buffer) bytes at `offset` into `buffer`; returns bytes read. No copy
        for an ioswitch.Buffer, one copy for other objects."""
    def write(self, offset: int, data: _Readable) -> int:
        """Writes `data` at byte `offset`; returns bytes written. No copy for an
        ioswitch.Buffer; other objects are copied once into aligned memory."""
    def read_lba(self, slba: int, nlb: int) -> bytes:
        """Reads `nlb` logical blocks (1..=65536) from LBA `slba`."""
    def read_lba_into(self, slba: int, buffer: _Writable) -> int:
        """Reads len(buffer) bytes (whole LBAs) from LBA `slba` into `buffer`."""
    def write_lba(self, slba: int, data: _Readable) -> int:
        """Writes `data` (whole LBAs) from LBA `slba`."""
    def write_zeroes(self, slba: int, nlb: int) -> None:
        """Zeroes `nlb` logical blocks from LBA `slba`."""
    def flush(self) -> None:
        """Makes written data durable."""
    def trim(self, offset: int, length: int) -> None:
        """Discards `length` bytes at byte `offset`."""
    def queue(self, depth: int = 64) -> Queue:
        """An asynchronous queue of `depth` slots (1..=4096) on the async interface."""
    def identify(self, cns: int, nsid: int = 0, cntid: int = 0, csi: int = 0) -> bytes:
        """The raw 4096-byte page of an Admin Identify."""
    def get_log(self, lid: int, nbytes: int, nsid: int = 0xFFFFFFFF, offset: int = 0) -> bytes:
        """The raw bytes of log page `lid` (whole dwords)."""
    def identify_ctrl(self) -> dict[str, Any]:
        """Identify Controller, one key per spec field (vid, sn, mn, fr, mdts, …)."""
    def identify_ns(self, nsid: int | None = None) -> dict[str, Any]:
        """Identify Namespace (nsze, ncap, nuse, flbas, lbaf, …)."""
    def smart_log(self) -> dict[str, Any]:
        """The SMART / Health Information log page."""

# ---------------------------------------------------------------------------------------
# Queues
# ---------------------------------------------------------------------------------------

@final
class Completion:
    """A finished command."""

    @property
    def tag(self) -> int:
        """The tag given to submit."""
    @property
    def op(self) -> _Op: ...
    @property
    def ok(self) -> bool: ...
    @property
    def status(self) -> int:
        """NVMe status: SCT << 8 | SC (0 on success)."""
    @property
    def status_name(self) -> str: ...
    @property
    def sct(self) -> int: ...
    @property
    def sc(self) -> int: ...
    @property
    def dnr(self) -> bool: ...
    @property
    def errno(self) -> int | None:
        """The errno the OS reported, or None."""
    @property
    def result(self) -> int:
        """Bytes moved (byte-addressed commands) or DW0-1 (NVM commands)."""
    @property
    def data(self) -> bytes | Buffer | None:
        """Reads: the data, or the ioswitch.Buffer given to submit; else None."""
    @property
    def device(self) -> str: ...
    def check(self) -> Completion:
        """Returns self on success; raises CommandError otherwise."""

@final
class QueueStats:
    """Counters of a queue."""

    @property
    def submitted(self) -> int: ...
    @property
    def completed(self) -> int: ...
    @property
    def syscalls(self) -> int: ...

@final
class Queue:
    """An asynchronous queue (Device.queue). submit never blocks (BusyError when full);
    poke/wait/drain push submissions and reap completions with the GIL released. One
    queue per thread. Close it (or use ``with``) to wait for outstanding commands."""

    def submit(
        self, op: _Op, offset: int = 0, data: int | _Readable | None = None, tag: int = 0, ioprio: int = 0
    ) -> None:
        """Queues one command. read: data = length or a Buffer to read into; write: data
        = bytes-like or Buffer; read_lba/write_lba: offset = LBA, data = nlb or data;
        flush: nothing; trim: data = length; write_zeroes: offset = LBA, data = nlb.
        ioprio: the I/O priority, the kernel's class << 13 | level (0: none); only
        async=io_uring and async=libaio carry one, on reads and writes (else
        BadCommandError)."""
    def poke(self, max: int = 0) -> list[Completion]:
        """Reaps what has completed without waiting (at most `max`, 0: all)."""
    def wait(self, min: int = 1) -> list[Completion]:
        """Waits for at least `min` completions (at most all outstanding)."""
    def drain(self) -> list[Completion]:
        """Waits for every outstanding command."""
    def close(self) -> list[Completion]:
        """Drains, then closes the queue."""
    @property
    def outstanding(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def interface(self) -> str: ...
    @property
    def device(self) -> Device: ...
    @property
    def stats(self) -> QueueStats: ...
    @property
    def closed(self) -> bool: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> Queue: ...
    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None, /
    ) -> bool: ...

def enumerate() -> list[dict[str, Any]]:
    """Block and NVMe devices of this machine: path, kind, bytes, lba_size, zoned,
    driver, model."""

def option_keys() -> dict[str, str]:
    """Every key Device.open accepts, with its meaning."""
