#!/usr/bin/env python3
"""Benchmarks of the fio external engine, as recorded in docs/BENCHMARKS.md.

  fio/bench.py [--engine PATH] [--reps N] [--runtime S] [--disk FILE] [--only nil|uring]
               [--callgrind N [--callgrind-only] [--keep-profiles DIR]]

1. Library overhead: fio + the engine on ioswitch's `nil` interface against fio's own
   `null` engine, 4 KiB random reads at iodepth=1, thread=1. The engine runs in its
   default asynchronous mode, with ioswitch_inline=1 (the async interface, completed
   inside ->queue(): a synchronous engine, which is what fio's null engine is at
   iodepth=1), and on the sync interface (ioswitch_sync=nil: ioswitch_pass_raw inside
   ->queue(), the closest analogue of fio's null engine).
2. io_uring: fio's io_uring engine against the engine on ioswitch's io_uring, 4 KiB
   random reads from a file on disk opened with O_DIRECT, iodepth 1 and 16.
3. With --callgrind: user-space instructions per I/O of the configurations of 1
   (valgrind --tool=callgrind, runs of N and 2N I/Os, the difference divided by N, so
   setup cancels), split by where the instructions run: fio (with libc), the engine,
   the C ABI (crates/ioswitch-capi) and the library (crates/ioswitch, with the crates it
   builds on, such as io-uring, whose code is inlined into the engine). Stable where
   wall-clock time on a shared 2-core VM is not. --callgrind-only skips the wall-clock
   runs of 1; --keep-profiles DIR keeps the profiles (for callgrind_annotate) in DIR.

Configurations are interleaved: each repetition runs every configuration once, in an
order rotated by one each repetition; reported figures are medians over repetitions, and
against the baseline also the median of the per-repetition differences.
Every fio command line is printed.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The fio binary every run uses (fio/bench_vs_xnvme.py points it at a fio built with
# xNVMe's engine).
FIO = "fio"


def fio(args):
    cmd = [FIO, "--output-format=json"] + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    if job["error"]:
        sys.exit(f"fio failed: {' '.join(cmd)}: error {job['error']}")
    r = job["read"]
    return {
        "iops": r["iops"],
        "lat": r["lat_ns"]["mean"],
        "slat": r["slat_ns"]["mean"],
        "clat": r["clat_ns"]["mean"],
        "p99": r["clat_ns"].get("percentile", {}).get("99.000000", 0),
    }


def interleave(configs, reps):
    """Runs each (name, args) once per repetition, rotating the order; returns samples."""
    samples = {name: [] for name, _ in configs}
    for rep in range(reps):
        k = rep % len(configs)
        for name, args in configs[k:] + configs[:k]:
            samples[name].append(fio(args))
    return samples


def med(samples, key):
    return statistics.median(s[key] for s in samples)


def table(samples, base=None):
    """Medians per configuration; against `base`, the difference of the medians and the
    median [min-max] of the per-repetition differences (each repetition runs both within
    seconds of each other, so a difference there is less exposed to the machine's drift)."""
    print(f"| configuration | IOPS | mean lat (ns) | mean slat (ns) | mean clat (ns) | lat vs {base or '-'} "
          f"| per repetition, median [min-max] |")
    print("|---|---|---|---|---|---|---|")
    for name, s in samples.items():
        lat = med(s, "lat")
        diff = pair = ""
        if base and name != base:
            diff = f"{lat - med(samples[base], 'lat'):+.1f} ns"
            d = [x["lat"] - b["lat"] for x, b in zip(s, samples[base])]
            pair = f"{statistics.median(d):+.1f} [{min(d):+.1f} to {max(d):+.1f}] ns"
        print(
            f"| {name} | {med(s, 'iops') / 1000:.0f} k | {lat:.1f} | {med(s, 'slat'):.1f} | "
            f"{med(s, 'clat'):.1f} | {diff} | {pair} |"
        )
    print()


def show(configs):
    for name, args in configs:
        print(f"    {name}:  fio " + " ".join(args))
    print()


def callgrind_split(path):
    """Instructions of a callgrind profile by part: fio, engine, C ABI, library."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True).stdout
    parts = {"fio + libc": 0, "engine": 0, "C ABI": 0, "library": 0}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+?):(.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        ir, src, func = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        if "crates/ioswitch-capi/" in src:
            part = "C ABI"
        elif "crates/ioswitch/" in src:
            part = "library"
        elif src.endswith("ioswitch-engine.c"):
            part = "engine"
        elif "cargo/registry/src/" in src or "cargo/git/checkouts/" in src:
            part = "library"  # the library's crates (io-uring, libc, ...), inlined into the engine
        elif src.startswith("/rustc/") and any(
                f in func for f in ("ioswitch::be::", "ioswitch::queue::Queue", "ioswitch::dev::Device::")):
            part = "library"  # standard library code inlined into the library's functions
        elif src.startswith("/rustc/") or "libioswitch" in func:
            part = "C ABI"
        else:
            part = "fio + libc"
        parts[part] += ir
    return parts


def callgrind(configs, n, keep=None):
    print(f"| configuration | fio + libc | engine | C ABI | library | total | vs {configs[0][0]} |")
    print("|---|---|---|---|---|---|---|")
    base = None
    for name, args in configs:
        runs = []
        for ios in (n, 2 * n):
            tag = re.sub(r"\W+", "-", name)
            prof = (os.path.join(keep, f"{tag}.{ios}.callgrind") if keep
                    else f"/tmp/ioswitch-fio-bench.{os.getpid()}.{ios}.callgrind")
            args_n = [a for a in args if not a.startswith(("--time_based", "--runtime"))]
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={prof}", FIO,
                            "--output-format=terse", f"--number_ios={ios}"] + args_n,
                           check=True, capture_output=True)
            runs.append(callgrind_split(prof))
            if not keep:
                os.unlink(prof)
        per = {k: (runs[1][k] - runs[0][k]) / n for k in runs[0]}
        total = sum(per.values())
        base = total if base is None else base
        print(f"| {name} | {per['fio + libc']:.0f} | {per['engine']:.0f} | {per['C ABI']:.0f} | "
              f"{per['library']:.0f} | {total:.0f} | {total - base:+.0f} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", help="the engine (default: build it with fio/build.sh)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--runtime", type=int, default=4, help="seconds per fio run")
    ap.add_argument("--disk", default="/var/tmp/ioswitch-fio-bench.img", help="file on a disk file system")
    ap.add_argument("--only", choices=["nil", "uring"])
    ap.add_argument("--callgrind", type=int, metavar="N", help="also count instructions per I/O (runs of N and 2N I/Os)")
    ap.add_argument("--callgrind-only", action="store_true", help="with --callgrind: no wall-clock runs (nil only)")
    ap.add_argument("--keep-profiles", metavar="DIR", help="with --callgrind: keep the profiles in DIR")
    a = ap.parse_args()
    engine = a.engine or subprocess.run(
        [os.path.join(HERE, "build.sh")], check=True, capture_output=True, text=True
    ).stdout.strip().splitlines()[-1]
    ext = f"--ioengine=external:{engine}"
    common = ["--thread=1", "--bs=4k", "--rw=randread", "--norandommap", "--time_based", f"--runtime={a.runtime}"]
    print(f"fio {subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}, "
          f"{a.reps} interleaved repetitions of {a.runtime} s, medians\n")

    if a.only in (None, "nil"):
        nil_file = f"/tmp/ioswitch-fio-bench-nil.{os.getpid()}.img"  # one per run: runs may overlap
        with open(nil_file, "a") as f:
            f.truncate(1 << 30)
        qd1 = common + ["--iodepth=1", "--size=1g"]
        configs = [
            ("fio null", ["--name=null", "--ioengine=null"] + qd1),
            ("ioswitch nil", ["--name=nil", ext, "--ioswitch_async=nil", f"--filename={nil_file}"] + qd1),
            ("ioswitch nil inline", ["--name=nil", ext, "--ioswitch_async=nil", "--ioswitch_inline=1",
                                     f"--filename={nil_file}"] + qd1),
            ("ioswitch nil sync", ["--name=nil", ext, "--ioswitch_sync=nil", f"--filename={nil_file}"] + qd1),
        ]
        print("## nil vs null, 4 KiB random read, iodepth=1\n")
        show(configs)
        if not (a.callgrind and a.callgrind_only):
            table(interleave(configs, a.reps), base="fio null")
        if a.callgrind:
            print(f"Instructions per I/O (callgrind, {a.callgrind} and {2 * a.callgrind} I/Os, "
                  "--number_ios instead of --time_based/--runtime):\n")
            if a.keep_profiles:
                os.makedirs(a.keep_profiles, exist_ok=True)
            callgrind(configs, a.callgrind, a.keep_profiles)
        os.unlink(nil_file)  # a sparse file: nil moves no data

    if a.only in (None, "uring") and not (a.callgrind and a.callgrind_only):
        disk = a.disk
        if not os.path.exists(disk) or os.path.getsize(disk) < (1 << 30):
            subprocess.run(["dd", "if=/dev/urandom", f"of={disk}", "bs=1M", "count=1024", "status=none"], check=True)
        for qd in (1, 16):
            base = common + ["--direct=1", f"--iodepth={qd}", f"--filename={disk}", "--size=1g"]
            configs = [
                ("fio io_uring", ["--name=uring", "--ioengine=io_uring"] + base),
                ("ioswitch io_uring", ["--name=uring", ext, "--ioswitch_async=io_uring"] + base),
            ]
            print(f"## io_uring, O_DIRECT disk file, 4 KiB random read, iodepth={qd}\n")
            show(configs)
            table(interleave(configs, a.reps), base="fio io_uring")


if __name__ == "__main__":
    main()
