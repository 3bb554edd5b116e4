"""The mounted-device write guard from Python: a loop device holding a mounted ext4 (smaller
than the device, so its tail is free to write) refuses writes with InUseError, reads work,
and allow_mounted_write=True lets a write to the free tail through. Needs root, losetup,
mkfs.ext4 and mount (asked of the system, not of ioswitch)."""

import errno
import os
import shutil
import subprocess

import pytest

import ioswitch


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


@pytest.fixture
def mounted(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (losetup, mount)")
    for tool in ("losetup", "mkfs.ext4", "mount", "e2fsck"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], check=True, capture_output=True,
                         text=True).stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        sh("mkfs.ext4", "-q", "-F", dev, "32M")
        sh("mount", "-t", "ext4", dev, str(mnt))
        yield dev, str(mnt)
        sh("umount", str(mnt))
        sh("e2fsck", "-f", "-n", dev)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def test_writes_to_a_mounted_device_raise_in_use_and_reads_work(mounted):
    dev, mnt = mounted
    with ioswitch.Device.open(dev) as d:
        assert mnt in d.ident.in_use
        assert len(d.read(0, 4096)) == 4096
        with pytest.raises(ioswitch.InUseError) as e:
            d.write(1 << 20, b"\0" * 4096)
        assert e.value.errno == errno.EBUSY
        assert e.value.device == dev and mnt in e.value.why
        assert "allow_mounted_write=1" in str(e.value)
        with d.queue(4) as q:
            with pytest.raises(ioswitch.InUseError):
                q.submit("write", 1 << 20, b"\0" * 4096, tag=1)


def test_allow_mounted_write_lets_a_write_to_the_free_tail_through(mounted):
    dev, _ = mounted
    with ioswitch.Device.open(dev, allow_mounted_write=True) as d:
        assert d.ident.in_use is None
        d.write(48 << 20, b"\x5a" * 4096)
        assert d.read(48 << 20, 4096) == b"\x5a" * 4096
