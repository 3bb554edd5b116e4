"""The Python module on a PCI address (run by vfio-driver-tests.sh in the --iommu guest,
with the controller bound to vfio-pci): open, alloc, write, read back, compare, through
the synchronous calls and a queue; and a buffer that is not DMA memory refused by name.

    python3 tests/vm/vfio_python.py 0000:00:05.0
"""

import os
import sys

import ioswitch

addr = sys.argv[1]
OFF = 1700 * 65536  # away from the other checks' data
N = 64 * 1024

with ioswitch.Device.open(addr, nsid=1) as dev:
    assert dev.ident.kind == "NVMe PCI device", dev.ident.kind
    assert dev.interfaces["sync"] == "vfio" and dev.interfaces["async"] == "vfio", dev.interfaces
    data = os.urandom(N)
    buf = dev.alloc(N)
    memoryview(buf)[:] = data
    assert dev.write(OFF, buf) == N
    back = dev.alloc(N)
    assert dev.read_into(OFF, back) == N
    assert bytes(back) == data, "sync read back differs"
    # bytes in and out: the module's own copies must be DMA memory too
    assert dev.read(OFF, N) == data, "read() differs"
    data2 = os.urandom(N)
    assert dev.write(OFF + N, data2) == N
    assert dev.read(OFF + N, N) == data2, "write(bytes) then read() differs"
    with dev.queue(8) as q:
        assert q.interface == "vfio"
        for i in range(4):
            q.submit("read", OFF + (i % 2) * N, dev.alloc(N), tag=i)
        got = []
        while len(got) < 4:
            got += q.wait(1)
        for c in got:
            assert c.ok, c.status_name
            want = data if c.tag % 2 == 0 else data2
            assert bytes(c.data) == want, f"queue read {c.tag} differs"
        assert q.stats.syscalls == 0, q.stats.syscalls
    # A buffer that is not DMA memory of the device is refused, not handed to it.
    try:
        dev.read_into(OFF, ioswitch.Buffer(N))
    except ioswitch.Error as e:
        assert "not DMA memory" in str(e), e
        print("refused as expected:", e)
    else:
        raise AssertionError("a non-DMA buffer was accepted")
print("python on", addr, "ok")
