"""Queue: submit / poke / wait / drain, tags, Busy, zero-copy buffers, stats."""

import errno

import pytest

import ioswitch
from conftest import SIZE, open_or_skip, pattern

BS = 4096


def test_qd16_round_trip_with_tags(dev, iface):
    blocks = {100 + i: pattern(BS, i) for i in range(16)}
    with dev.queue(16) as q:
        assert q.capacity == 16 and q.outstanding == 0 and q.interface == iface
        for tag, data in blocks.items():
            q.submit("write", (tag - 100) * BS, data, tag=tag)
        assert q.outstanding == 16
        done = q.drain()
        assert sorted(c.tag for c in done) == sorted(blocks)
        assert all(c.ok and c.op == "write" and c.result == BS and c.data is None for c in done)
        assert q.outstanding == 0
        for tag in blocks:
            q.submit("read", (tag - 100) * BS, BS, tag=tag)
        got: dict[int, object] = {}
        while len(got) < 16:
            for c in q.wait(1):
                assert c.ok, c
                assert c.status == 0 and c.status_name == "Successful Completion" and c.errno is None
                got[c.tag] = c.data
        assert got == blocks
        s = q.stats
        assert (s.submitted, s.completed) == (32, 32) and s.syscalls >= 0
    assert q.closed


def test_busy_when_full_and_after_reaping_it_takes_more(dev):
    q = dev.queue(2)
    q.submit("read", 0, BS, tag=1)
    q.submit("read", BS, BS, tag=2)
    with pytest.raises(ioswitch.BusyError) as ei:
        q.submit("read", 2 * BS, BS, tag=3)
    e = ei.value
    assert isinstance(e, ioswitch.Error) and e.errno == errno.EBUSY and e.depth == 2
    assert q.outstanding == 2
    assert sorted(c.tag for c in q.drain()) == [1, 2]
    q.submit("read", 2 * BS, BS, tag=3)
    (c,) = q.wait()
    assert c.tag == 3 and c.ok
    assert q.poke() == [] and q.wait() == [] and q.drain() == []
    q.close()
    with pytest.raises(ioswitch.Error) as ei:
        q.submit("read", 0, BS)
    assert ei.value.errno == errno.EBADF


def test_lba_ops_flush_trim_and_poke(dev):
    data = pattern(2 * 512, 9)
    with dev.queue(8) as q:
        q.submit("write_lba", 4, data, tag=1)
        q.drain()
        q.submit("read_lba", 4, 2, tag=2)
        q.submit("flush", tag=3)
        done = {c.tag: c for c in q.drain()}
        assert done[2].data == data and done[3].ok and done[3].data is None
        q.submit("trim", 4 * 512, 1024, tag=4)
        q.submit("write_zeroes", 100, 1, tag=5)
        done = q.drain()
        assert all(c.ok for c in done), done
        q.submit("read", 4 * 512, 1024, tag=6)
        seen: list[ioswitch.Completion] = []
        while not seen:
            seen = q.poke()
        assert seen[0].data == bytes(1024)


def test_ioswitch_buffer_moves_through_the_queue_without_copies(dev):
    buf = dev.alloc(BS)
    memoryview(buf)[:] = pattern(BS, 5)
    with dev.queue(4) as q:
        q.submit("write", 0, buf, tag=1)
        assert buf.in_flight
        with pytest.raises(BufferError):
            memoryview(buf)
        with pytest.raises(BufferError):
            q.submit("write", BS, buf, tag=2)
        (c,) = q.wait()
        assert c.data is buf and not buf.in_flight
        out = dev.alloc(BS)
        q.submit("read", 0, out, tag=3)
        (c,) = q.wait()
        assert c.data is out and bytes(out) == pattern(BS, 5)
        view = memoryview(out)
        with pytest.raises(BufferError, match="memoryview"):
            q.submit("read", 0, out)
        view.release()
        q.submit("read", 0, out)
        q.drain()


def test_requests_refused_at_submit_queue_nothing(dev):
    with dev.queue(4) as q:
        with pytest.raises(ioswitch.OutOfRangeError) as ei:
            q.submit("read", SIZE, BS, tag=1)
        assert ei.value.errno == errno.ERANGE
        with pytest.raises(ioswitch.BadCommandError, match="unknown operation"):
            q.submit("erase", 0, BS)
        with pytest.raises(TypeError):
            q.submit("read", 0, "many")
        with pytest.raises(TypeError):
            q.submit("write", 0, None)
        buf = dev.alloc(BS)
        with pytest.raises(ioswitch.OutOfRangeError):
            q.submit("write", SIZE, buf)
        assert not buf.in_flight  # handed back
        assert q.outstanding == 0 and q.stats.submitted == 0


def test_completion_check_and_repr(dev):
    with dev.queue(2) as q:
        q.submit("read", 0, 512, tag=42)
        (c,) = q.drain()
        assert c.check() is c
        assert "tag=42" in repr(c) and "ok=True" in repr(c)
        assert "io" in repr(q)


def test_nil_completes_without_moving_data(data_path):
    dev = open_or_skip(data_path, create=True, size=SIZE, async_="nil")
    with dev, dev.queue(8) as q:
        for i in range(8):
            q.submit("read", i * 512, 512, tag=i)
        done = q.drain()
        assert sorted(c.tag for c in done) == list(range(8)) and all(c.ok for c in done)


@pytest.mark.parametrize("tunable", ["sqpoll", "register_files", "register_buffers"])
def test_io_uring_tunables(data_path, tunable):
    dev = open_or_skip(data_path, create=True, size=SIZE, async_="io_uring", **{tunable: True})
    data = pattern(BS, 11)
    with dev, dev.queue(8) as q:
        assert f"{tunable}=1" in dev.opts
        q.submit("write", BS, data, tag=1)
        assert q.drain()[0].check().tag == 1
        q.submit("read", BS, BS, tag=2)
        (c,) = q.drain()
        assert c.data == data


def test_tunable_for_another_interface_is_a_bad_option(data_path):
    with pytest.raises(ioswitch.BadOptionError) as ei:
        ioswitch.Device.open(str(data_path), create=True, async_="libaio", sqpoll=True)
    assert ei.value.key == "sqpoll" and "libaio" in str(ei.value)


def test_a_collected_queue_hands_buffers_back(dev):
    import gc

    buf = dev.alloc(BS)
    q = dev.queue(2)
    q.submit("read", 0, buf, tag=1)
    assert buf.in_flight
    del q
    gc.collect()
    assert not buf.in_flight and len(bytes(buf)) == BS


def test_huge_reads_are_refused_before_allocating(dev):
    with dev.queue(2) as q:
        with pytest.raises(ioswitch.BadCommandError, match="max transfer"):
            q.submit("read", 0, 1 << 40)


# The kernel's I/O priority value: class << 13 | level (ioprio_set(2)).
def _ioprio(cls, level):
    return cls << 13 | level


def test_per_command_io_priority_reaches_the_kernel_or_is_refused_by_name(dev, iface):
    data = pattern(BS, 21)
    best_effort, unknown_class = _ioprio(2, 4), _ioprio(7, 0)
    with dev.queue(4) as q:
        if iface in ("io_uring", "libaio"):
            q.submit("write", BS, data, tag=1, ioprio=best_effort)
            (c,) = q.wait()
            assert c.ok and c.tag == 1 and c.result == BS, c
            q.submit("read", BS, BS, tag=2, ioprio=_ioprio(3, 0))
            (c,) = q.wait()
            assert c.ok and c.data == data, c
            # A class the kernel does not know: it refuses the command (EINVAL), so the
            # priority was there for it to see. The same read without one succeeds.
            buf = dev.alloc(BS)
            q.submit("read", BS, buf, tag=3, ioprio=unknown_class)
            (c,) = q.wait()
            assert not c.ok and c.errno == errno.EINVAL and c.data is buf, c
            q.submit("read", BS, buf, tag=4)
            (c,) = q.wait()
            assert c.ok and bytes(buf) == data, c
            # Reads and writes only.
            with pytest.raises(ioswitch.BadCommandError, match="reads and writes only"):
                q.submit("flush", ioprio=best_effort)
        else:
            buf = dev.alloc(BS)
            with pytest.raises(ioswitch.BadCommandError) as ei:
                q.submit("read", 0, buf, tag=5, ioprio=best_effort)
            assert ei.value.interface == iface and "priority" in str(ei.value), ei.value
            assert not buf.in_flight  # handed back
        # Not a 16-bit priority value: refused before anything is queued, naming it.
        for bad in (1 << 16, -1):
            with pytest.raises(ioswitch.BadCommandError, match=f"ioprio {bad} is not an I/O priority"):
                q.submit("read", 0, BS, ioprio=bad)
        q.drain()
        assert q.outstanding == 0
