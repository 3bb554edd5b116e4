"""Shared fixtures: temporary data files and the async interfaces this machine has."""

import os

import pytest

import ioswitch

# Async interfaces that move data on a regular file (nil completes at once, moving none).
DATA_INTERFACES = ["io_uring", "libaio", "posix", "thrpool", "emu"]
SIZE = 1 << 20


def open_or_skip(path, **opts):
    """Opens `path`; skips the test when this kernel or file system refuses the interface
    (a sandbox without io_uring, a file system without O_DIRECT), failing on anything else."""
    try:
        return ioswitch.Device.open(str(path), **opts)
    except ioswitch.UnsupportedError as e:
        pytest.skip(f"not available here: {e}")
    except ioswitch.Error as e:
        if e.errno in (22, 95, 38, 1):  # EINVAL, EOPNOTSUPP, ENOSYS, EPERM: kernel refuses
            pytest.skip(f"not available here: {e}")
        raise


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
