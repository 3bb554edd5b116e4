"""The GIL is released during blocking calls: another thread keeps running Python.

How it is told: this thread spins in a Python loop while a second thread makes the
calls. The only way this thread can *sleep* meanwhile is waiting for the GIL, and Linux
says how long it slept: wall time minus time on a CPU minus time waiting for a CPU
(/proc/thread-self/schedstat). A call that held the GIL would make this thread sleep for
the whole call. (A gap in the loop alone cannot tell a held GIL from a thread that is
merely preempted on a loaded machine; this measure can.)
"""

import os
import threading
import time
from typing import Any, Callable

import pytest

import ioswitch
from conftest import open_or_skip

SCHEDSTAT = "/proc/thread-self/schedstat"


def sched() -> tuple[int, int]:
    """(ns on a CPU, ns waiting for a CPU) of the calling thread."""
    with open(SCHEDSTAT) as f:
        run, wait, _ = (int(x) for x in f.read().split())
    return run, wait


def slept_during(work: Callable[[], object]) -> tuple[float, float]:
    """Runs `work` in a thread while this thread spins in Python; returns (seconds `work`
    took, seconds this thread slept, i.e. waited for the GIL, meanwhile). An exception in
    `work` is raised here."""
    if not os.path.exists(SCHEDSTAT):
        pytest.skip(f"{SCHEDSTAT} is not available (kernel without CONFIG_SCHED_INFO)")
    done = threading.Event()
    span: dict[str, Any] = {}

    def runner():
        t0 = time.perf_counter()
        try:
            work()
        except BaseException as e:  # re-raised in the test's thread
            span["error"] = e
        finally:
            span["t"] = time.perf_counter() - t0
            done.set()

    th = threading.Thread(target=runner)
    run0, wait0 = sched()
    t0 = time.perf_counter_ns()
    th.start()
    while not done.is_set():
        pass
    run1, wait1 = sched()
    wall = time.perf_counter_ns() - t0
    th.join()
    if "error" in span:
        raise span["error"]
    return span["t"], max(0, wall - (run1 - run0) - (wait1 - wait0)) / 1e9


def assert_released(took: float, slept: float, what: str) -> None:
    # Holding the GIL through the calls would put this thread to sleep for most of `took`
    # (the control test sees 80-95%); the GIL-held parts of the calls (arguments, result
    # objects) are a small share (under 15%).
    assert slept < took / 3, f"this thread slept {slept:.3f}s waiting for the GIL during {took:.3f}s of {what}"


def test_sync_io_releases_the_gil(tmp_path):
    dev = open_or_skip(tmp_path / "big.img", create=True, size=64 << 20)
    with dev:
        chunk = min(dev.geometry.max_transfer, 32 << 20)
        data = bytes(range(256)) * (chunk // 256)
        buf = dev.alloc(chunk)

        def work():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                dev.write(0, data)
                dev.write(chunk, buf)
                dev.flush()
                dev.read(0, chunk)
                dev.read_into(chunk, buf)

        assert_released(*slept_during(work), "reads, writes and flushes")


def test_queue_wait_releases_the_gil(tmp_path):
    dev = open_or_skip(tmp_path / "q.img", create=True, size=64 << 20, async_="thrpool")
    with dev, dev.queue(4) as q:
        # Reads into ioswitch.Buffers, so no Python object of 16 MiB is made and freed
        # (with the GIL held, by Python) per read: what is measured is wait and drain.
        bufs = [dev.alloc(16 << 20) for _ in range(4)]

        def work():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                for i, b in enumerate(bufs):
                    q.submit("read", i * (16 << 20), b, tag=i)
                done = q.wait(2)
                done += q.drain()
                assert sorted(c.tag for c in done) == [0, 1, 2, 3]

        assert_released(*slept_during(work), "queued reads")


def test_bench_releases_the_gil(tmp_path):
    job = {
        "name": "gil",
        "rw": "randread",
        "bs": "4k",
        "size": "4m",
        "ioengine": "psync",
        "filename": str(tmp_path / "bench.img"),
        "time_based": True,
        "runtime": "1s",
    }
    took, slept = slept_during(lambda: ioswitch.bench.run(job))
    assert took >= 0.9
    assert_released(took, slept, "a benchmark")


def test_the_measure_sees_a_held_gil():
    """The control: a C call that holds the GIL (sum over a range) is caught."""

    def work():
        # One call of about 0.3 s that holds the GIL throughout (the int sum runs in C
        # with no eval-breaker check). Shorter calls in a loop let this thread take the
        # GIL between them, and on a loaded machine it then held the GIL, preempted, for
        # much of the time (counted as waiting for a CPU, not as sleep): the control
        # failed at load average 10 on 2 CPUs (2026-12-06).
        sum(range(20_000_000))

    took, slept = slept_during(work)
    with pytest.raises(AssertionError):
        assert_released(took, slept, "sum()")
