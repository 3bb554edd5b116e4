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

from . import _ioswitch, bench
from ._ioswitch import *  # noqa: F403 (the native module's __all__: every name lib.rs adds)

del _bench_run  # noqa: F821 (the native half of bench.run, not a public name)

# The public names: the native module's, less its private one, and the bench module. The
# stubs (__init__.pyi) list them for type checkers.
__all__ = [name for name in _ioswitch.__all__ if name != "_bench_run"] + ["bench"]
