"""Shared fixtures: temporary data files and the async interfaces this machine has."""

import ctypes
import os

import pytest

import ioswitch

# Async interfaces that move data on a regular file (nil completes at once, moving none).
DATA_INTERFACES = ["io_uring", "libaio", "posix", "thrpool", "emu"]
SIZE = 1 << 20


# Probes of what this kernel and file system have, asked of the kernel directly (not of
# ioswitch), so that a test skips only when the feature is really missing: an ioswitch
# error on a machine that has the feature fails the test.
_libc = ctypes.CDLL(None, use_errno=True)
_SYS_IO_URING_SETUP = 425
_SYS_IO_SETUP, _SYS_IO_DESTROY = 206, 207
_IORING_SETUP_SQPOLL = 1 << 1


def _io_uring_missing(flags=0):
    """Why io_uring_setup(2) with `flags` fails here, or None when it works."""
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    ctypes.c_uint32.from_buffer(params, 8).value = flags
    fd = _libc.syscall(_SYS_IO_URING_SETUP, 2, params)
    if fd < 0:
        err = ctypes.get_errno()
        return f"io_uring_setup(flags={flags:#x}) fails here: {os.strerror(err)}"
    os.close(fd)
    return None


def _libaio_missing():
    ctx = ctypes.c_ulong(0)
    if _libc.syscall(_SYS_IO_SETUP, 1, ctypes.byref(ctx)) < 0:
        return f"io_setup(2) fails here: {os.strerror(ctypes.get_errno())}"
    _libc.syscall(_SYS_IO_DESTROY, ctx)
    return None


def _direct_missing(path):
    probe = os.path.join(os.path.dirname(str(path)), ".odirect-probe")
    try:
        os.close(os.open(probe, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600))
    except OSError as e:
        return f"O_DIRECT open on {os.path.dirname(str(path))} fails: {e.strerror}"
    finally:
        if os.path.exists(probe):
            os.unlink(probe)
    return None


def missing_feature(path, opts):
    """Why the options need something this machine lacks, by the probes above; or None."""
    iface = opts.get("async_") or opts.get("async")
    checks = []
    if iface == "io_uring":
        checks.append(lambda: _io_uring_missing())
    if opts.get("sqpoll"):
        checks.append(lambda: _io_uring_missing(_IORING_SETUP_SQPOLL))
    if iface == "libaio":
        checks.append(_libaio_missing)
    if opts.get("direct"):
        checks.append(lambda: _direct_missing(path))
    for check in checks:
        why = check()
        if why:
            return why
    return None


def open_or_skip(path, **opts):
    """Opens `path`; skips the test only when a probe independent of ioswitch says this
    kernel or file system lacks what the options need (io_uring, SQPOLL, libaio, O_DIRECT).
    Any ioswitch error where the feature is there fails the test."""
    why = missing_feature(path, opts)
    if why:
        pytest.skip(f"not available here: {why}")
    return ioswitch.Device.open(str(path), **opts)


# Skips are counted and bounded: more than this many means features went missing that
# the suite should test (a broken probe, a machine without io_uring), and the run fails.
MAX_SKIPS = int(os.environ.get("IOSWITCH_PY_MAX_SKIPS", "2"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    terminalreporter.write_line(f"ioswitch: {len(skipped)} skipped (at most {MAX_SKIPS} allowed)")
    for r in skipped:
        terminalreporter.write_line(f"  skipped {r.nodeid}: {r.longrepr[2] if isinstance(r.longrepr, tuple) else r.longrepr}")


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped > MAX_SKIPS and session.exitstatus == 0:
        session.exitstatus = 1


@pytest.fixture
def data_path(tmp_path):
    """A path in a temporary directory (the file does not exist yet)."""
    return tmp_path / "data.img"


@pytest.fixture(params=DATA_INTERFACES)
def iface(request):
    """Each async interface that moves data."""
    return request.param


@pytest.fixture
def dev(data_path, iface):
    """A 1 MiB temp file opened with each async interface."""
    d = open_or_skip(data_path, create=True, size=SIZE, async_=iface)
    yield d
    d.close()


def pattern(n, seed):
    """`n` bytes of a pattern that differs for every seed."""
    return bytes((i * 7 + seed * 13 + (i >> 9)) & 0xFF for i in range(n))


@pytest.fixture(autouse=True)
def _no_leaked_cwd_files():
    before = set(os.listdir("."))
    yield
    # bench jobs without filename would lay out files in the cwd; the tests give one.
    assert set(os.listdir(".")) - before == set()
