"""Benchmarks with fio's options, job files and JSON report, on ioswitch's engine."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence, Union

from ._ioswitch import _bench_run

Job = Union[Mapping[str, Any], Sequence[Mapping[str, Any]], Sequence[str], str, "os.PathLike[str]"]


def run(job: Job, *, plus: bool = False, check: bool = True) -> dict[str, Any]:
    """Runs fio jobs and returns fio's JSON report (``--output-format=json``) as a dict.

    ``job`` is one of:

    - a dict of fio options: ``{"name": "j", "rw": "randread", "bs": "4k",
      "size": "16m", "ioengine": "io_uring", "iodepth": 16, "filename": "/tmp/f"}``.
      ``True`` is a bare flag (``direct: True``), ``False`` is ``=0``, a list is joined
      with ``:`` (fio's list separator), ``None`` leaves the option out; ``name``
      defaults to ``"job"``;
    - a list of such dicts (jobs run together, as in one job file; ``stonewall``
      separates phases);
    - a list of fio command-line arguments (``["--name=j", "--rw=read", ...]``);
    - the path of a fio job file.

    ``plus=True`` gives ``json+`` (latency histogram bins). The report has fio's keys and
    layout, plus an ``"ioswitch"`` object per job (interface, syscalls per I/O, whole
    process CPU). The GIL is released while the jobs run.

    Raises ``BadOptionError`` (with ``key``) for an unknown option or a bad value, and
    ``BenchError`` when a job cannot be prepared (e.g. its file cannot be opened) or, with
    ``check=True``, when a job fails; then ``err.report`` holds the report.
    """
    return _bench_run(job, plus, check)


__all__ = ["run"]
