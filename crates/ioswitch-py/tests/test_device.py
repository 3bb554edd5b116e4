"""Device: open, geometry, identity, synchronous I/O, errors."""

import errno

import pytest

import ioswitch
from conftest import SIZE, open_or_skip, pattern


def test_open_reports_geometry_ident_and_interfaces(data_path):
    with ioswitch.Device.open(str(data_path), create=True, size="1MiB", async_="emu") as dev:
        g = dev.geometry
        assert (g.lba_size, g.nlbas, g.bytes) == (512, SIZE // 512, SIZE)
        assert g.max_transfer >= 4096
        assert g.zoned == "none" and g.zone_size is None
        i = dev.ident
        assert i.kind == "file" and i.nsid == 1 and i.uri == str(data_path)
        assert i.path.endswith("data.img")
        assert dev.interfaces == {"sync": "psync", "async": "emu", "admin": "emulated", "mem": "posix"}
        assert "async=emu" in dev.opts and "create=1" in dev.opts
        assert "data.img" in repr(dev)
    assert dev.closed


def test_option_string_and_keywords_combine(data_path):
    with ioswitch.Device(data_path, "create=1,size=64k", **{"async": "thrpool"}, threads=2) as dev:
        assert dev.geometry.bytes == 64 * 1024
        assert dev.interfaces["async"] == "thrpool"


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "memoryview-slice", "Buffer"])
def test_write_read_round_trip(dev, kind):
    data = pattern(8192, 1)
    if kind == "bytes":
        arg = data
    elif kind == "bytearray":
        arg = bytearray(data)
    elif kind == "memoryview":
        arg = memoryview(bytearray(data))
    elif kind == "memoryview-slice":
        arg = memoryview(b"\0" * 100 + data + b"\0" * 100)[100:-100]
    else:
        arg = dev.alloc(len(data))
        memoryview(arg)[:] = data
    assert dev.write(4096, arg) == len(data)
    assert dev.read(4096, len(data)) == data
    # read_into: bytearray, writable memoryview slice, a strided view, an ioswitch.Buffer
    ba = bytearray(len(data))
    assert dev.read_into(4096, ba) == len(data) and ba == data
    big = bytearray(len(data) + 10)
    assert dev.read_into(4096, memoryview(big)[5:-5]) == len(data) and big[5:-5] == data
    strided = bytearray(2 * 512)
    assert dev.read_into(4096, memoryview(strided)[::2]) == 512 and strided[::2] == data[:512]
    buf = dev.alloc(len(data))
    assert dev.read_into(4096, buf) == len(data) and bytes(buf) == data
    assert buf.address % dev.buffer_align == 0


def test_lba_variants_flush_and_trim(dev):
    data = pattern(2048, 2)
    assert dev.write_lba(8, data) == 2048
    assert dev.read_lba(8, 4) == data
    assert dev.read(8 * 512, 2048) == data
    out = bytearray(1024)
    assert dev.read_lba_into(9, out) == 1024 and out == data[512:1536]
    dev.flush()
    dev.trim(8 * 512, 2048)
    assert dev.read(8 * 512, 2048) == bytes(2048)
    dev.write(0, b"\xff" * 1024)
    dev.write_zeroes(0, 1)
    assert dev.read(0, 1024) == bytes(512) + b"\xff" * 512


def test_empty_transfers_are_empty(dev):
    assert dev.read(0, 0) == b""
    assert dev.write(0, b"") == 0
    assert dev.read_into(0, bytearray()) == 0


def test_direct_io_round_trip_and_misalignment(data_path):
    dev = open_or_skip(data_path, create=True, size=SIZE, direct=True, async_="io_uring")
    with dev:
        data = pattern(8192, 3)
        dev.write(8192, data)  # bytes are copied into an aligned buffer
        assert dev.read(8192, 8192) == data
        with pytest.raises(ioswitch.MisalignedError) as ei:
            dev.read(1, 4096)
        e = ei.value
        assert e.errno == errno.EINVAL and e.what == "offset" and e.device == str(data_path)
        assert str(data_path) in str(e)


def test_out_of_range_names_the_device_and_range(dev, data_path):
    with pytest.raises(ioswitch.OutOfRangeError) as ei:
        dev.read(SIZE - 512, 1024)
    e = ei.value
    assert issubclass(type(e), ioswitch.Error) and issubclass(ioswitch.Error, OSError)
    assert e.errno == errno.ERANGE
    assert e.device == str(data_path) and e.limit == SIZE and e.unit == "bytes"
    assert str(data_path) in str(e) and "out of range" in str(e)
    with pytest.raises(ioswitch.OutOfRangeError):
        dev.read_lba(SIZE // 512, 1)


def test_bad_option_names_the_key(data_path):
    with pytest.raises(ioswitch.BadOptionError) as ei:
        ioswitch.Device.open(str(data_path), create=True, asynk="io_uring")
    assert ei.value.key == "asynk" and "asynk" in str(ei.value) and ei.value.errno == errno.EINVAL
    with pytest.raises(ioswitch.BadOptionError) as ei:
        ioswitch.Device.open(str(data_path), opts="create=1,direct=maybe")
    assert ei.value.key == "direct" and "boolean" in str(ei.value)
    with pytest.raises(ioswitch.BadOptionError) as ei:
        ioswitch.Device.open(str(data_path), create=True, async_="iouring")
    assert ei.value.key == "async" and "iouring" in str(ei.value)
    with pytest.raises(ioswitch.BadOptionError) as ei:
        ioswitch.Device.open(str(data_path), opts="create=1", create=True)
    assert ei.value.key == "create" and "twice" in str(ei.value)
    with pytest.raises(ioswitch.BadOptionError) as ei:
        ioswitch.Device.open(str(data_path), create=True, size=[1])
    assert ei.value.key == "size"
    assert "sqpoll" in ioswitch.option_keys()


def test_open_docstring_names_every_option_key():
    # The stub's Device.open docstring lists the keys; the library's table is the truth.
    import ast
    import pathlib

    stub = pathlib.Path(ioswitch.__file__).with_name("__init__.pyi")
    tree = ast.parse(stub.read_text())
    device = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Device")
    doc = ast.get_docstring(next(n for n in device.body if isinstance(n, ast.FunctionDef) and n.name == "open"))
    words = set(doc.replace(",", " ").replace(".", " ").split())
    missing = [k for k in ioswitch.option_keys() if k not in words]
    assert not missing, f"Device.open's docstring in {stub} does not name {missing}"


def test_fileno_lends_the_files_descriptor_and_a_ramdisk_has_none(data_path):
    import os

    with ioswitch.Device.open(str(data_path), create=True, size="64KiB") as dev:
        fd = dev.fileno()
        st, want = os.fstat(fd), os.stat(data_path)
        assert (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    with pytest.raises(ioswitch.Error) as ei:
        dev.fileno()
    assert ei.value.errno == errno.EBADF
    with ioswitch.Device.open("1MiB") as ram:
        with pytest.raises(ioswitch.Error) as ei:
            ram.fileno()
        assert ei.value.errno == errno.ENODATA and "no file descriptor" in str(ei.value)


def test_unsupported_interface_names_device_kind_and_interface(data_path):
    data_path.write_bytes(bytes(4096))
    with pytest.raises(ioswitch.UnsupportedError) as ei:
        ioswitch.Device.open(str(data_path), async_="io_uring_cmd")
    e = ei.value
    assert e.errno == errno.EOPNOTSUPP
    assert e.device == str(data_path) and e.kind == "file" and e.interface == "async=io_uring_cmd"
    assert str(data_path) in str(e) and "io_uring_cmd" in str(e) and "file" in str(e)
    with pytest.raises(ioswitch.UnsupportedError) as ei:
        ioswitch.Device.open("4MiB", sync="psync")
    assert ei.value.kind == "ramdisk"


def test_missing_file_is_an_oserror_with_errno(tmp_path):
    missing = tmp_path / "missing.img"
    with pytest.raises(ioswitch.Error) as ei:
        ioswitch.Device.open(str(missing))
    assert ei.value.errno == errno.ENOENT and str(missing) in str(ei.value)


def test_wrong_types_and_closed_device(dev):
    with pytest.raises(TypeError, match="bytes-like"):
        dev.write(0, "text")
    with pytest.raises(TypeError, match="read-only"):
        dev.read_into(0, b"immutable")
    with pytest.raises(ioswitch.BadCommandError, match="nlb=0"):
        dev.read_lba(0, 0)
    with pytest.raises(OverflowError):
        dev.read(-1, 10)
    dev.close()
    with pytest.raises(ioswitch.Error) as ei:
        dev.read(0, 512)
    assert ei.value.errno == errno.EBADF


def test_ramdisk_round_trip():
    with ioswitch.Device.open("4MiB") as dev:
        assert dev.ident.kind == "ramdisk" and dev.geometry.bytes == 4 << 20
        dev.write(512, b"ram" * 100)
        assert dev.read(512, 300) == b"ram" * 100


def test_buffer_protocol_and_copy_free_paths(dev):
    buf = dev.alloc(4096)
    assert len(buf) == 4096 and bytes(buf) == bytes(4096)
    buf.fill(0xAB)
    mv = memoryview(buf)
    assert mv.nbytes == 4096 and not mv.readonly and mv[0] == 0xAB
    mv[:4] = b"abcd"
    mv.release()
    dev.write(0, buf)
    assert dev.read(0, 4) == b"abcd"
    standalone = ioswitch.Buffer(1000, alignment=512)
    assert standalone.address % 512 == 0 and len(standalone) == 1000
    with pytest.raises(ValueError):
        ioswitch.Buffer(10, alignment=3)


def test_identify_and_smart_log_are_dicts(dev):
    ctrl = dev.identify_ctrl()
    assert isinstance(ctrl, dict) and "mn" in ctrl and "sn" in ctrl
    ns = dev.identify_ns()
    assert ns["nsze"] == dev.geometry.nlbas
    smart = dev.smart_log()
    assert isinstance(smart, dict) and "critical_warning" in smart
    assert len(dev.identify(1)) == 4096


def test_enumerate_lists_devices():
    devs = ioswitch.enumerate()
    assert isinstance(devs, list)
    for d in devs:
        assert {"path", "kind", "bytes", "lba_size"} <= set(d)


def test_huge_reads_are_refused_before_allocating(dev):
    with pytest.raises(ioswitch.BadCommandError, match="max transfer") as ei:
        dev.read(0, 1 << 40)
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(ioswitch.BadCommandError, match="nlb=65537"):
        dev.read_lba(0, 65537)
