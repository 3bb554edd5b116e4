"""Type stubs of the native module; the public names are documented in ioswitch/__init__.pyi."""

from typing import Any

from . import (
    BadCommandError as BadCommandError,
    BadOptionError as BadOptionError,
    BadUriError as BadUriError,
    BenchError as BenchError,
    Buffer as Buffer,
    BufferSizeError as BufferSizeError,
    BusyError as BusyError,
    InUseError as InUseError,
    CommandError as CommandError,
    Completion as Completion,
    Device as Device,
    Error as Error,
    Geometry as Geometry,
    Ident as Ident,
    MisalignedError as MisalignedError,
    OutOfRangeError as OutOfRangeError,
    PmemRange as PmemRange,
    Queue as Queue,
    QueueError as QueueError,
    QueueStats as QueueStats,
    UnsupportedError as UnsupportedError,
    __version__ as __version__,
    enumerate as enumerate,
    option_keys as option_keys,
)

def _bench_run(job: Any, plus: bool = False, check: bool = True) -> dict[str, Any]:
    """Runs fio jobs; see ioswitch.bench.run."""

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
    "enumerate",
    "option_keys",
    "_bench_run",
]
