"""ioswitch: one API for NVMe and block/file I/O over every Linux I/O interface.

Open a device, naming the interfaces as options; read and write synchronously, or
asynchronously through a queue. Switching the interface (psync, io_uring, libaio, POSIX
aio, a thread pool, emu, nil, NVMe passthrough) is an option, never a code change::

    import ioswitch

    with ioswitch.Device.open("/tmp/data.img", create=True, size="1MiB",
                              async_="io_uring") as dev:
        dev.write(0, b"x" * 4096)
        assert dev.read(0, 4096) == b"x" * 4096
        with dev.queue(16) as q:
            q.submit("read", 0, 4096, tag=7)
            (c,) = q.wait(1)
            assert c.ok and c.tag == 7 and c.data == b"x" * 4096

Errors are ``ioswitch.Error`` (an ``OSError`` with ``errno``) or one of its subclasses.
``ioswitch.bench.run(job)`` runs fio jobs and returns fio's JSON report as a dict.
"""

from ._ioswitch import (
    BadCommandError,
    BadOptionError,
    BadUriError,
    BenchError,
    Buffer,
    BufferSizeError,
    BusyError,
    InUseError,
    CommandError,
    Completion,
    Device,
    Error,
    Geometry,
    Ident,
    MisalignedError,
    OutOfRangeError,
    PmemRange,
    Queue,
    QueueError,
    QueueStats,
    UnsupportedError,
    __version__,
    enumerate,
    option_keys,
)
from . import bench

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
