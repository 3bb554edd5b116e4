#!/usr/bin/env python3
"""The runs of fio/bench-vs-xnvme (which builds xNVMe, a fio with its engine, and the
ioswitch engine, then calls this with --fio and --engine).

  fio/bench_vs_xnvme.py --fio FIO --engine ENGINE [--reps N] [--runtime S]
                        [--callgrind N [--callgrind-only]] [--disk FILE]
                        [--only nil|uring|uring-shm] [--cpus-allowed LIST] [--aa]

4 KiB random reads, thread=1, one job, rows interleaved: each repetition runs every row
of a group once, in an order rotated by one each repetition.

- nil, qd1: fio `null`; xNVMe `nil`; the ioswitch engine on `nil` async (the default
  mode), inline (`ioswitch_inline=1`) and sync (`ioswitch_sync=nil`).
- nil, qd16: fio `null`; xNVMe `nil`; the ioswitch engine on `nil` async.
- io_uring on a /dev/shm file and on an O_DIRECT file on disk, qd1 and qd16: fio
  `io_uring`; xNVMe `io_uring`; the ioswitch engine on `io_uring` (its default rings,
  `SINGLE_ISSUER | DEFER_TASKRUN` as fio's, and with `single_issuer=0`, the library's default ring;
  and the engine's opt-in spinning reap, `reap_spin=20us`, on the library's default ring
  (the engine adds no `single_issuer=1` with a spin), wall clock only).
- With --callgrind N: user-space instructions per I/O of the nil rows (qd1 and qd16) and
  of the io_uring rows on the /dev/shm file (qd1 and qd16) (runs of N and 2N I/Os, the difference
  divided by N), split as fio/bench.py splits them (xNVMe's library counts under "fio +
  libc"). --callgrind 0, or no valgrind on the machine, skips
  them with a printed reason.

Verdict statistic (declared before the runs): the median over repetitions of the
per-repetition figure (latency difference to fio's baseline engine, IOPS ratio to the
baseline and to xNVMe), shown with its [min-max] spread; medians of each row's own IOPS
and latency are shown too. The `verdict:` lines apply the issue's targets to one run
(a target counts as met when it is met in two runs): nil qd1, the async row's added
latency over fio `null` minus xNVMe nil's <= 0; nil qd16, the async row's IOPS / xNVMe
nil's >= 1; io_uring on the /dev/shm file at qd 1 and 16, like with like: the engine's
default row (a blocking reap, as fio's `io_uring` engine) / fio `io_uring` >= 0.98, and
the engine's spinning row (`reap_spin=20us`, as xNVMe's busy-polling io_uring path) /
xNVMe `io_uring` >= 1.

--only nil, uring: those groups alone; uring-shm: the io_uring groups on the /dev/shm
file alone (the rows the io_uring verdict judges, without the O_DIRECT file's), so that
a run of more repetitions takes the time of fewer with every group.

--aa (calibration, not a verdict): instead of the rows above, on the /dev/shm file at
qd 1 and 16, fio `io_uring` twice and the engine's default `io_uring` row twice (identical
rows, interleaved and rotated as the verdict rows); the `aa:` lines give each row's
per-repetition IOPS ratio to its twin, which the harness should put at 1, and the engine
against fio's for each pair. --cpus-allowed LIST adds fio's cpus_allowed=LIST to every
row (with or without --aa); on Linux 6.x the job's io-wq workers inherit it. Neither
changes the verdict rows when not given.

xNVMe's engine is given xnvme_be=linux and xnvme_sync=psync: on a regular file it
otherwise picks the NVMe ioctl configuration (ENOTTY; ../shared/FACTS.md, "xNVMe").
v0.7.5's linux backend has no `file_as_ns` admin (it answers EBUSY), and write +
crc32c-verify jobs with these options on the /dev/shm and the O_DIRECT file pass.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (fio/bench.py: fio(), interleave(), show(), callgrind())


def spread(xs, fmt):
    return f"{fmt(statistics.median(xs))} [{fmt(min(xs))} to {fmt(max(xs))}]"


def report(samples, base, peer=None, lat=True):
    """One table: per row the median IOPS and mean latency; against `base` the
    per-repetition latency difference and IOPS ratio; against `peer` (xNVMe) the
    per-repetition IOPS ratio."""
    cols = ["configuration", "IOPS", "mean lat (ns)"]
    if lat:
        cols.append(f"lat − {base}, per rep.")
    cols.append(f"IOPS / {base}, per rep.")
    if peer:
        cols.append(f"IOPS / {peer}, per rep.")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    per_rep = {}
    for name, s in samples.items():
        row = [name, f"{bench.med(s, 'iops') / 1e3:.0f} k", f"{bench.med(s, 'lat'):.1f}"]
        b = samples[base]
        if name == base:
            row += [""] * (len(cols) - 3)
        else:
            per_rep[name, "lat"] = [x["lat"] - y["lat"] for x, y in zip(s, b)]
            per_rep[name, "base"] = [x["iops"] / y["iops"] for x, y in zip(s, b)]
            if lat:
                row.append(spread(per_rep[name, "lat"], lambda v: f"{v:+.1f} ns"))
            row.append(spread(per_rep[name, "base"], lambda v: f"{v:.3f}"))
            if peer:
                if not name.startswith("ioswitch"):
                    row.append("")
                else:
                    p = samples[peer]
                    per_rep[name, "peer"] = [x["iops"] / y["iops"] for x, y in zip(s, p)]
                    row.append(spread(per_rep[name, "peer"], lambda v: f"{v:.3f}"))
        print("| " + " | ".join(row) + " |")
    print()
    return per_rep


def verdict(what, xs, target, higher=True, unit=lambda v: f"{v:.3f}"):
    """One verdict line: the median of the per-repetition figures against the target."""
    m = statistics.median(xs)
    met = m >= target if higher else m <= target
    rel = ">=" if higher else "<="
    print(f"verdict: {what}: {spread(xs, unit)}, target {rel} {unit(target)}: "
          f"{'met' if met else 'NOT met'} in this run")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fio", required=True, help="a fio with xNVMe's engine")
    ap.add_argument("--engine", required=True, help="the ioswitch engine (.so)")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--runtime", type=int, default=2, help="seconds per fio run")
    ap.add_argument("--callgrind", type=int, metavar="N", help="instructions per I/O of the nil rows (0: skip)")
    ap.add_argument("--disk", default="/var/tmp/ioswitch-fio-bench.img", help="file on a disk file system")
    ap.add_argument("--only", choices=["nil", "uring", "uring-shm"],
                    help="one group: nil, io_uring, or io_uring on the /dev/shm file only")
    ap.add_argument("--cpus-allowed", metavar="LIST",
                    help="fio's cpus_allowed=LIST on every row (the job's thread and, on Linux 6.x, its "
                         "io-wq workers, which inherit it); default: no pinning, as the verdict runs")
    ap.add_argument("--aa", action="store_true",
                    help="calibration instead of the verdict rows: on the /dev/shm file at qd 1 and 16, "
                         "fio io_uring and the ioswitch engine's default io_uring row, each twice "
                         "(identical rows, interleaved as the verdict rows are)")
    ap.add_argument("--callgrind-only", action="store_true",
                    help="with --callgrind: the instruction counts of the nil rows only, no wall-clock runs")
    a = ap.parse_args()
    if a.callgrind is not None and a.callgrind < 0:
        ap.error(f"--callgrind {a.callgrind}: give a number of I/Os (0 skips the instruction counts)")
    if a.callgrind and not shutil.which("valgrind"):
        print(f"--callgrind {a.callgrind}: skipped, valgrind is not installed (apt-get install valgrind)\n")
        a.callgrind = 0
    elif a.callgrind == 0:
        print("--callgrind 0: instruction counts skipped\n")
    if a.cpus_allowed is not None:
        cpus = set()
        for part in a.cpus_allowed.split(","):
            lo, dash, hi = part.partition("-")
            if not lo.isdigit() or (dash and not hi.isdigit()):
                ap.error(f"--cpus-allowed {a.cpus_allowed!r}: {part!r} is not a CPU number or a range N-M")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        usable = os.sched_getaffinity(0)
        if not cpus:
            ap.error(f"--cpus-allowed {a.cpus_allowed}: names no CPU (a range N-M needs N <= M)")
        if not cpus <= usable:
            ap.error(f"--cpus-allowed {a.cpus_allowed}: CPU(s) {sorted(cpus - usable)} not among "
                     f"this process's CPUs {sorted(usable)}")
    if a.reps < 1 or a.runtime < 1:
        ap.error(f"--reps {a.reps} --runtime {a.runtime}: both must be at least 1")
    if a.callgrind_only and not a.callgrind:
        ap.error("--callgrind-only needs --callgrind N (N > 0) and valgrind")
    if a.aa and (a.callgrind_only or a.only):
        ap.error("--aa runs its own rows: no --only or --callgrind-only with it")
    bench.FIO = a.fio
    ext = f"--ioengine=external:{a.engine}"
    xnvme = ["--ioengine=xnvme", "--xnvme_be=linux", "--xnvme_sync=psync"]
    common = ["--thread=1", "--bs=4k", "--rw=randread", "--norandommap", "--time_based", f"--runtime={a.runtime}"]
    if a.cpus_allowed:
        common.append(f"--cpus_allowed={a.cpus_allowed}")
    ver = subprocess.run([a.fio, "--version"], capture_output=True, text=True).stdout.strip()
    runs = (f"callgrind only ({a.callgrind} and {2 * a.callgrind} I/Os per row)" if a.callgrind_only
            else f"{a.reps} interleaved repetitions of {a.runtime} s")
    print(f"{a.fio} ({ver}), {runs}; load average at the start: {os.getloadavg()[0]:.2f}\n")

    if a.aa:
        aa(a, ext, common)
        return

    if a.only in (None, "nil"):
        nil_file = f"/tmp/ioswitch-fio-bench-xnvme-nil.{os.getpid()}.img"
        with open(nil_file, "a") as f:
            f.truncate(1 << 30)
        for qd in (1, 16):
            base = common + [f"--iodepth={qd}", "--size=1g"]
            on = [f"--filename={nil_file}"]
            configs = [
                ("fio null", ["--name=null", "--ioengine=null"] + base),
                ("xNVMe nil", ["--name=xnil"] + xnvme + ["--xnvme_async=nil"] + on + base),
                ("ioswitch nil", ["--name=nil", ext, "--ioswitch_async=nil"] + on + base),
            ]
            if qd == 1:
                configs += [
                    ("ioswitch nil inline", ["--name=nil", ext, "--ioswitch_async=nil", "--ioswitch_inline=1"] + on + base),
                    ("ioswitch nil sync", ["--name=nil", ext, "--ioswitch_sync=nil"] + on + base),
                ]
            print(f"## nil vs null, 4 KiB random read, iodepth={qd}\n")
            bench.show(configs)
            if not a.callgrind_only:
                r = report(bench.interleave(configs, a.reps), "fio null", "xNVMe nil")
                if qd == 1:
                    # The target: the async row's added latency over fio null no more than
                    # xNVMe nil's, per repetition.
                    verdict("qd1 ioswitch nil (async) added latency - xNVMe nil's",
                            [x - y for x, y in zip(r["ioswitch nil", "lat"], r["xNVMe nil", "lat"])], 0.0,
                            higher=False, unit=lambda v: f"{v:+.1f} ns")
                else:
                    verdict("qd16 ioswitch nil (async) IOPS / xNVMe nil's", r["ioswitch nil", "peer"], 1.0)
                print()
            if a.callgrind:
                print(f"Instructions per I/O (callgrind, {a.callgrind} and {2 * a.callgrind} I/Os, "
                      "--number_ios instead of --time_based/--runtime):\n")
                bench.callgrind(configs, a.callgrind)
        os.unlink(nil_file)

    if a.only in (None, "uring", "uring-shm"):
        shm = f"/dev/shm/ioswitch-fio-bench-xnvme.{os.getpid()}.img"
        subprocess.run(["dd", "if=/dev/urandom", f"of={shm}", "bs=1M", "count=256", "status=none"], check=True)
        disk = a.disk
        if (not a.callgrind_only and a.only != "uring-shm"
                and (not os.path.exists(disk) or os.path.getsize(disk) < (1 << 30))):
            subprocess.run(["dd", "if=/dev/urandom", f"of={disk}", "bs=1M", "count=1024", "status=none"], check=True)
        for what, path, size, extra in (("/dev/shm file", shm, "256m", []),
                                        ("O_DIRECT disk file", disk, "1g", ["--direct=1"])):
            for qd in (1, 16):
                if extra and (a.callgrind_only or a.only == "uring-shm"):
                    continue
                base = common + extra + [f"--iodepth={qd}", f"--filename={path}", f"--size={size}"]
                configs = [
                    ("fio io_uring", ["--name=uring", "--ioengine=io_uring"] + base),
                    ("xNVMe io_uring", ["--name=xuring"] + xnvme + ["--xnvme_async=io_uring"] + base),
                    ("ioswitch io_uring", ["--name=uring", ext, "--ioswitch_async=io_uring"] + base),
                    # The engine's io_uring rings are SINGLE_ISSUER | DEFER_TASKRUN by default
                    # (as fio's); this row has the library's default ring instead.
                    ("ioswitch io_uring single_issuer=0",
                     ["--name=uring", ext, "--ioswitch_async=io_uring", "--ioswitch_opts=single_issuer=0"] + base),
                ]
                # The engine's spinning reap, opt-in: the reap looks at the CQ ring for up to
                # 20 us before waiting in the kernel, as xNVMe's io_uring path busy-polls its
                # CQ ring (fio's io_uring engine does not). With reap_spin the engine keeps
                # the library's default ring (no DEFER_TASKRUN, as xNVMe's), where a spin can
                # see a completion. Compared like with like: the ">= xNVMe" target is judged
                # on this row, the ">= 0.98x fio" target on the default row.
                # Wall clock only: the spin's instructions grow with the time a read takes.
                spins = [
                    ("ioswitch io_uring reap_spin=20us",
                     ["--name=uring", ext, "--ioswitch_async=io_uring", "--ioswitch_opts=reap_spin=20us"] + base),
                ]
                print(f"## io_uring, {what}, 4 KiB random read, iodepth={qd}\n")
                bench.show(configs + spins)
                if not a.callgrind_only:
                    r = report(bench.interleave(configs + spins, a.reps), "fio io_uring", "xNVMe io_uring",
                               lat=qd == 1)
                    if not extra:
                        verdict(f"qd{qd} ioswitch io_uring (default, blocking reap as fio's) / fio io_uring",
                                r["ioswitch io_uring", "base"], 0.98)
                        verdict(f"qd{qd} ioswitch io_uring reap_spin=20us (spinning reap, as xNVMe's) / "
                                "xNVMe io_uring", r["ioswitch io_uring reap_spin=20us", "peer"], 1.0)
                        print()
                if a.callgrind and not extra:
                    # io_size: the runs of N and 2N I/Os go round the 256 MiB file as needed.
                    print(f"Instructions per I/O (callgrind, {a.callgrind} and {2 * a.callgrind} I/Os, "
                          "--number_ios and --io_size=1t instead of --time_based/--runtime; "
                          "user space only, the system calls are the kernel's):\n")
                    bench.callgrind([(n, args + ["--io_size=1t"]) for n, args in configs], a.callgrind)
        os.unlink(shm)


def aa(a, ext, common):
    """The A/A calibration: identical rows, interleaved and rotated as the verdict rows, so
    that a ratio of two of them shows what the harness itself makes of no difference."""
    shm = f"/dev/shm/ioswitch-fio-bench-aa.{os.getpid()}.img"
    subprocess.run(["dd", "if=/dev/urandom", f"of={shm}", "bs=1M", "count=256", "status=none"], check=True)
    try:
        for qd in (1, 16):
            base = common + [f"--iodepth={qd}", f"--filename={shm}", "--size=256m"]
            fio_row = ["--name=uring", "--ioengine=io_uring"] + base
            iosw_row = ["--name=uring", ext, "--ioswitch_async=io_uring"] + base
            configs = [("fio io_uring", fio_row), ("fio io_uring (2)", fio_row),
                       ("ioswitch io_uring", iosw_row), ("ioswitch io_uring (2)", iosw_row)]
            print(f"## A/A: io_uring, /dev/shm file, 4 KiB random read, iodepth={qd}\n")
            bench.show(configs)
            s = bench.interleave(configs, a.reps)
            report(s, "fio io_uring", lat=qd == 1)
            # Each repetition's IOPS: a harness that measures one thing gives one cluster.
            for name, _ in configs:
                print(f"per rep.: {name}: " + " ".join(f"{x['iops'] / 1e3:.0f}k" for x in s[name]))

            def ratio(x, y):
                return [p["iops"] / q["iops"] for p, q in zip(s[x], s[y])]
            for what, x, y in (("fio (2) / fio", "fio io_uring (2)", "fio io_uring"),
                               ("ioswitch (2) / ioswitch", "ioswitch io_uring (2)", "ioswitch io_uring"),
                               ("ioswitch / fio", "ioswitch io_uring", "fio io_uring"),
                               ("ioswitch (2) / fio (2)", "ioswitch io_uring (2)", "fio io_uring (2)")):
                print(f"aa: qd{qd} {what}: {spread(ratio(x, y), lambda v: f'{v:.3f}')}")
            print()
    finally:
        os.unlink(shm)


if __name__ == "__main__":
    main()
