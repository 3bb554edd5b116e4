"""The table of tests/vm/pci-study.sh: per configuration and queue depth, the median of
the repetitions (min–max after it) of IOPS, mean and p99 completion latency, syscalls
per I/O and process CPU per I/O, from the `ioswitch bench` JSON files NAME-qdN-repR.json;
and CPU per I/O as a ratio to io_uring's at the same depth in the same repetition (the
runs of a repetition are minutes apart at most, so slow drift of a loaded host cancels).

    python3 tests/vm/pci_study_table.py target/pci-study
"""

import json
import pathlib
import re
import statistics
import sys

ORDER = ["psync", "libaio", "io_uring", "io_uring+iopoll", "io_uring+sqpoll", "io_uring_cmd",
         "io_uring_cmd+iopoll", "vfio"]


def run(path):
    job = json.loads(path.read_text())["jobs"][0]
    if job["error"]:
        sys.exit(f"{path}: the job failed: {job['error']}")
    x, r = job["ioswitch"], job["read"]
    cpu_ns = (x["process_usr_cpu"] + x["process_sys_cpu"]) / 100 * x["phase_runtime"] * 1e6
    return {
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
        base = {r["rep"]: r["cpu"] for r in runs.get(("io_uring", qd), [])}
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


main()
