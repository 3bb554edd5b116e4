"""sync=pmem from Python: load/store access through Device.pmem_range (memoryview +
persist), read back through commands and the other way; on a /dev/shm file with
pmem_force (ordinary memory run with pmem's instructions)."""

import errno
import os
import uuid

import pytest

import ioswitch
from conftest import pattern


@pytest.fixture
def shm_path():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("/dev/shm does not exist")
    p = f"/dev/shm/ioswitch-py-pmem-{os.getpid()}-{uuid.uuid4().hex[:8]}.img"
    yield p
    if os.path.exists(p):
        os.unlink(p)


def test_stores_through_a_range_read_back_through_commands(shm_path):
    with ioswitch.Device.open(shm_path, "sync=pmem,pmem_force=1,create=1,size=1MiB") as dev:
        assert dev.pmem["mode"] == "forced" and dev.pmem["forced"] is True
        assert dev.pmem["flush"] in ("clwb", "clflushopt", "clflush")
        # tmpfs is not DAX: no DAX identity, whatever pmem_force runs on it.
        i = dev.ident
        assert (i.dax_mode, i.dax_namespace, i.dax_align, i.dax_size) == (None, None, None, None)
        data = pattern(65536, 3)
        with dev.pmem_range(8192, 65536) as r:
            assert len(r) == 65536 and r.offset == 8192
            with memoryview(r) as m:
                m[:] = data
            r.persist()
            r.persist(100, 28)
            with pytest.raises(ioswitch.Error):
                r.persist(65530, 7)
            # Held: commands on the range and an overlapping range are refused.
            with pytest.raises(ioswitch.Error) as e:
                dev.read(8192, 4096)
            assert e.value.errno == errno.EBUSY
            with pytest.raises(ioswitch.Error):
                dev.pmem_range(8192 + 65535, 2)
        assert r.released
        assert dev.read(8192, 65536) == data
        # And a command's write is what a new range loads.
        dev.write(8192, pattern(4096, 9))
        r = dev.pmem_range(8192, 4096)
        assert bytes(memoryview(r)) == pattern(4096, 9)
        r.release()
    with open(shm_path, "rb") as f:
        f.seek(8192 + 4096)
        assert f.read(65536 - 4096) == data[4096:]


def test_a_populated_mapping_says_so_and_reads_back(shm_path):
    opts = "sync=pmem,pmem_force=1,pmem_populate=1,create=1,size=64KiB"
    with ioswitch.Device.open(shm_path, opts) as dev:
        assert dev.pmem["populate"] is True
        assert dev.pmem["populate_writes"] is True  # writable, on Linux 5.14 or later
        data = pattern(8192, 7)
        with dev.pmem_range(4096, 8192) as r:
            r.write_at(0, data)
        assert dev.read(4096, 8192) == data
    with open(shm_path, "rb") as f:
        f.seek(4096)
        assert f.read(8192) == data
    with ioswitch.Device.open(shm_path, "sync=pmem,pmem_force=1") as dev:
        assert dev.pmem["populate"] is False
    # Another interface refuses it, naming the option.
    with pytest.raises(ioswitch.Error) as e:
        ioswitch.Device.open(shm_path, "sync=psync,pmem_populate=1")
    assert "pmem_populate" in str(e.value)


def test_a_range_is_not_released_while_viewed(shm_path):
    with ioswitch.Device.open(shm_path, "sync=pmem,pmem_force=1,create=1,size=64KiB") as dev:
        r = dev.pmem_range(0, 4096)
        m = memoryview(r)
        with pytest.raises(BufferError):
            r.release()
        m.release()
        r.release()
        with pytest.raises(BufferError):
            memoryview(r)


def test_pmem_range_needs_sync_pmem_and_pmem_needs_dax_or_force(shm_path):
    with ioswitch.Device.open(shm_path, create=True, size="64KiB") as dev:
        assert dev.pmem is None
        with pytest.raises(ioswitch.UnsupportedError):
            dev.pmem_range(0, 4096)
    with pytest.raises(ioswitch.UnsupportedError) as e:
        ioswitch.Device.open(shm_path, "sync=pmem")
    assert "MAP_SYNC" in str(e.value)


def test_guarded_copies_of_a_range_and_eio_beyond_a_shrunk_file(shm_path):
    with ioswitch.Device.open(shm_path, "sync=pmem,pmem_force=1,create=1,size=64KiB") as dev:
        with dev.pmem_range(4096, 32768) as r:
            data = pattern(8192, 5)
            r.write_at(100, data)  # durable as a command's write: no persist
            r.write_at(9000, data[:40])
            assert r.read_at(100, 8192) == data
            with memoryview(r) as m:
                assert bytes(m[100:8292]) == data
                m[0] = 0x5A
            assert r.read_at(0, 1) == b"\x5a"
            with pytest.raises(ioswitch.Error) as e:
                r.read_at(32760, 16)
            assert "past the end" in str(e.value)
            with pytest.raises(ioswitch.Error):
                r.read_at(0, 1 << 60)
            with pytest.raises(ioswitch.Error):
                r.write_at(32767, b"ab")
            # Shrunk to 5 KiB: range offsets from 4096 on are beyond the file's end.
            os.truncate(shm_path, 5120)
            for what, call in [
                ("read across the end", lambda: r.read_at(0, 8192)),
                ("read beyond the end", lambda: r.read_at(20000, 100)),
                ("8 KiB write", lambda: r.write_at(12288, data)),
                ("64 B write", lambda: r.write_at(16384, data[:64])),
            ]:
                with pytest.raises(ioswitch.Error) as e:
                    call()
                assert e.value.errno == errno.EIO, what
            # The process and the range live on.
            assert r.read_at(0, 1) == b"\x5a"
        r = dev.pmem_range(0, 4096)
        r.release()
        with pytest.raises(BufferError):
            r.read_at(0, 1)
    with open(shm_path, "rb") as f:
        f.seek(4096 + 100)
        assert f.read() == data[: 5120 - 4196]
