"""The table of tests/vm/pci-study.sh: per configuration and queue depth, the median of
the repetitions (min–max after it) of IOPS, mean and p99 completion latency, syscalls
per I/O and process CPU per I/O, from the `ioswitch bench` JSON files NAME-qdN-repR.json;
and CPU per I/O as a ratio to io_uring's at the same depth and job count in the same
repetition (the runs of a repetition are minutes apart at most, so slow drift of a
loaded host cancels). NAME-2j is NAME with 2 jobs (2 queues, group_reporting).

With --csv FILE it also writes the medians as rows of `ioswitch bench sweep`'s sweep.csv
(one per configuration and depth), which `ioswitch bench sweep --from-csv FILE` plots.

    python3 tests/vm/pci_study_table.py target/pci-study [--csv target/pci-study/sweep.csv]
"""

import json
import pathlib
import re
import statistics
import sys

ORDER = ["psync", "libaio", "io_uring", "io_uring+iopoll", "io_uring+sqpoll", "io_uring_cmd",
         "io_uring_cmd+iopoll", "vfio", "io_uring-2j", "vfio-2j"]

# `ioswitch bench sweep`'s CSV header (crates/ioswitch-bench/src/sweep.rs, CSV_HEADER).
CSV_HEADER = ("interface,mode,qd,bs,reps,iops,iops_min,iops_max,bw_bytes_per_s,lat_mean_ns,lat_p50_ns,"
              "lat_p99_ns,lat_p999_ns,slat_mean_ns,clat_mean_ns,usr_cpu_pct,sys_cpu_pct,process_cpu_pct,"
              "syscalls_per_io")


def run(path):
    job = json.loads(path.read_text())["jobs"][0]
    if job["error"]:
        sys.exit(f"{path}: the job failed: {job['error']}")
    x, r = job["ioswitch"], job["read"]
    cpu_ns = (x["process_usr_cpu"] + x["process_sys_cpu"]) / 100 * x["phase_runtime"] * 1e6
    pct = r["clat_ns"]["percentile"]
    return {
        "bw": r["bw_bytes"],
        "lat": r["lat_ns"]["mean"],
        "p50": pct["50.000000"],
        "p99ns": pct["99.000000"],
        "p999": pct["99.900000"],
        "slat": r["slat_ns"]["mean"],
        "clat": r["clat_ns"]["mean"],
        "usr": job["usr_cpu"],
        "syscpu": job["sys_cpu"],
        "proc": x["process_usr_cpu"] + x["process_sys_cpu"],
        "iops": r["iops"],
        "mean": r["clat_ns"]["mean"] / 1000,
        "p99": r["clat_ns"]["percentile"]["99.000000"] / 1000,
        "sys": x["syscalls_per_io"],
        "cpu": cpu_ns / x["ios"] / 1000,
        "iface": x["interface"],
    }


def main():
    d = pathlib.Path(sys.argv[1])
    runs = {}
    for p in sorted(d.glob("*-qd*-rep*.json")):
        m = re.fullmatch(r"(.+)-qd(\d+)-rep(\d+)\.json", p.name)
        r = run(p)
        r["rep"] = int(m[3])
        runs.setdefault((m[1], int(m[2])), []).append(r)
    for (name, qd), rs in runs.items():
        ref = "io_uring-2j" if name.endswith("-2j") else "io_uring"
        base = {r["rep"]: r["cpu"] for r in runs.get((ref, qd), [])}
        for r in rs:
            r["ratio"] = r["cpu"] / base[r["rep"]] if r["rep"] in base else float("nan")
    cols = [("iops", "IOPS", "{:.0f}"), ("mean", "mean lat µs", "{:.0f}"), ("p99", "p99 lat µs", "{:.0f}"),
            ("sys", "syscalls/I/O", "{:.2f}"), ("cpu", "CPU µs/I/O", "{:.1f}"),
            ("ratio", "CPU/I/O ÷ io_uring's", "{:.2f}")]
    print("| interface | qd | reps | " + " | ".join(c[1] for c in cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for qd in (1, 16):
        for name in ORDER:
            rs = runs.get((name, qd))
            if qd == 16 and name == "psync" or not rs:
                continue
            cells = []
            for key, _, fmt in cols:
                v = [r[key] for r in rs]
                cells.append(f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})")
            print(f"| {name} | {qd} | {len(rs)} | " + " | ".join(cells) + " |")
    if len(sys.argv) == 4 and sys.argv[2] == "--csv":
        write_csv(pathlib.Path(sys.argv[3]), runs)


def write_csv(path, runs):
    """The medians as sweep.csv rows; NAME-2j is legend entry "NAME 2 jobs"."""
    med = statistics.median
    lines = [CSV_HEADER]
    for qd in (1, 16):
        for name in ORDER:
            rs = runs.get((name, qd))
            if not rs:
                continue
            sync = name == "psync"
            v = lambda k: med([r[k] for r in rs])
            iops = [r["iops"] for r in rs]
            label = name[:-3] + " 2 jobs" if name.endswith("-2j") else name
            cells = [label, "sync" if sync else "async", qd, 4096, len(rs), f"{med(iops):.1f}",
                     f"{min(iops):.1f}", f"{max(iops):.1f}", f"{v('bw'):.0f}", f"{v('lat'):.1f}",
                     f"{v('p50'):.1f}", f"{v('p99ns'):.1f}", f"{v('p999'):.1f}",
                     "" if sync else f"{v('slat'):.1f}", f"{v('clat'):.1f}", f"{v('usr'):.1f}",
                     f"{v('syscpu'):.1f}", f"{v('proc'):.1f}", f"{v('sys'):.3f}"]
            lines.append(",".join(str(c) for c in cells))
    path.write_text("\n".join(lines) + "\n")


main()
