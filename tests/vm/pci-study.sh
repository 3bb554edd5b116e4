#!/usr/bin/env bash
# tests/vm/pci-study.sh — the SPDK-vs-io_uring study ("Understanding Modern Storage
# APIs", Didona et al., SYSTOR '22) in the --iommu guest, with `ioswitch bench`: 4 KiB
# random reads at queue depth 1 and 16 on ONE emulated controller (0000:00:05.0, nsid 1),
# first through the kernel's nvme driver (psync, libaio, io_uring, io_uring with IOPOLL,
# io_uring with SQPOLL, io_uring_cmd with and without IOPOLL), then, bound to vfio-pci,
# through the user-space driver (vfio); and with more than one queue, io_uring and vfio
# with 2 jobs at qd 16 (2 rings / 2 I/O queue pairs on the one device). Every
# configuration runs REPS times, the repetitions interleaved (kernel set, vfio, kernel
# set, vfio, …).
#
# Per run: IOPS, mean and p99 completion latency, syscalls per I/O and process CPU per
# I/O (getrusage of the whole process over the job's phase, so an SQPOLL thread counts).
# The table (median of the repetitions, with min–max) goes to stdout and to
# target/pci-study/table.md; its medians to target/pci-study/sweep.csv (sweep.csv's
# columns), drawn by `ioswitch bench sweep --from-csv` as the sweep's plots (*.svg
# there); the raw JSON of every run stays in target/pci-study/.
#
# Under QEMU TCG the device and the CPU are both emulated: absolute numbers are the
# emulator's. What carries over is the shape: the order of CPU and syscalls per I/O.
# Not a stage of ./scripts/test (minutes of guest time).
#
# --scaling: the paper's scaling study instead (`ioswitch bench sweep --variants`, jobs ×
# queue depth × variant, 4 KiB random reads) on the same controller: the kernel variants
# iou, iou+p (IOPOLL, on the namespace's poll queue), iou+k (SQPOLL) and libaio on
# /dev/nvmeXn1 (O_DIRECT), then, bound to vfio-pci, `vfio` on 0000:00:05.0. The two
# sweeps' study.csv files are merged by `ioswitch bench sweep --from-csv` into
# target/scaling-study/study.csv and the paper's plots (iops-vs-qd-jN.svg per job count,
# iops-vs-jobs-qdD.svg per depth); table.md there has IOPS median [min–max] per cell.
# Each sweep interleaves its own repetitions; the rebind sits between the two sweeps.
# Release build.
#
# Usage: tests/vm/pci-study.sh [--reps N] [--runtime SECS]
#        tests/vm/pci-study.sh --scaling [--reps N] [--runtime SECS] [--jobs 1,2] [--qd 1,4,16]
set -euo pipefail
# (--help first, without dirname: it needs no PATH.)
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
    vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
    # shellcheck source=scripts/args.sh
    . "$vm/../../scripts/args.sh"
    script_header "$0"
    exit 0
fi

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
addr=0000:00:05.0

if [[ ${1:-} == --guest-scaling ]]; then
    # ------------------------------------------------- inside the guest: --scaling
    out=$2 reps=$3 runtime=$4 jobs=$5 qds=$6
    cli=$root/target/release/ioswitch
    for m in vfio-pci vfio_iommu_type1; do modprobe -d "$IOSWITCH_VM_MODROOT" "$m"; done
    ctrl=$(basename "$(ls -d /sys/bus/pci/devices/$addr/nvme/nvme*)")
    ns=
    for b in /sys/block/"$ctrl"n*; do [[ $(cat "$b/nsid") == 1 ]] && ns=$(basename "$b"); done
    echo "guest: $addr is $ctrl, nsid 1 = /dev/$ns; io_poll=$(cat /sys/block/$ns/queue/io_poll)"
    [[ $(cat /sys/block/$ns/queue/io_poll) == 1 ]] || { echo "no poll queue (nvme.poll_queues)" >&2; exit 1; }
    job=(--name=s --rw=randread --bs=4k --size=64m --runtime="$runtime" --time_based --norandommap --randrepeat=0)
    sweep() { # VARIANTS OUTDIR FIO-ARGS…
        "$cli" bench sweep --variants "$1" --jobs "$jobs" --qd "$qds" --reps "$reps" --out "$2" "${job[@]}" "${@:3}"
    }
    echo "== kernel driver: iou, iou+p, iou+k, libaio on /dev/$ns"
    sweep iou,iou+p,iou+k,libaio "$out/kernel" --filename="/dev/$ns" --direct=1
    echo "== user-space driver: vfio on $addr"
    "$cli" driver bind vfio "$addr"
    sweep vfio "$out/vfio" --filename="${addr//:/\\:}" --ioengine=ioswitch --ioswitch_opts=nsid=1
    "$cli" driver bind nvme "$addr"
    exit 0
fi

if [[ ${1:-} == --guest ]]; then
    # ------------------------------------------------------------ inside the guest
    out=$2 reps=$3 runtime=$4
    cli=$root/target/debug/ioswitch
    for m in vfio-pci vfio_iommu_type1; do modprobe -d "$IOSWITCH_VM_MODROOT" "$m"; done
    ctrl=$(basename "$(ls -d /sys/bus/pci/devices/$addr/nvme/nvme*)")
    ns=
    for b in /sys/block/"$ctrl"n*; do [[ $(cat "$b/nsid") == 1 ]] && ns=$(basename "$b"); done
    ng=/dev/ng${ns#nvme}
    echo "guest: $addr is $ctrl, nsid 1 = /dev/$ns and $ng; io_poll=$(cat /sys/block/$ns/queue/io_poll)"
    [[ $(cat /sys/block/$ns/queue/io_poll) == 1 ]] || { echo "no poll queue (nvme.poll_queues)" >&2; exit 1; }
    job=(--name=s --rw=randread --bs=4k --size=64m --runtime="$runtime" --time_based --norandommap
        --randrepeat=0 --output-format=json --ioengine=ioswitch)
    one() { # NAME QD FILENAME OPTS [MORE BENCH ARGS]
        local f="$out/$1-qd$2-rep$rep.json"
        "$cli" bench "${job[@]}" --iodepth="$2" --filename="$3" --ioswitch_opts="$4" "${@:5}" --output="$f" >/dev/null ||
            { echo "FAILED: $1 qd$2" >&2; exit 1; }
        echo "  $1 qd$2 done"
    }
    for rep in $(seq "$reps"); do
        echo "== repetition $rep: kernel driver"
        one psync 1 "/dev/$ns" "sync=psync,direct=1"
        for qd in 1 16; do
            one libaio "$qd" "/dev/$ns" "async=libaio,direct=1"
            one io_uring "$qd" "/dev/$ns" "async=io_uring,direct=1"
            one io_uring+iopoll "$qd" "/dev/$ns" "async=io_uring,iopoll=1,direct=1"
            one io_uring+sqpoll "$qd" "/dev/$ns" "async=io_uring,sqpoll=1,direct=1"
            one io_uring_cmd "$qd" "$ng" "async=io_uring_cmd"
            one io_uring_cmd+iopoll "$qd" "$ng" "async=io_uring_cmd,iopoll=1"
        done
        # More than one queue: 2 jobs sharing the device, each its own queue (io_uring: its
        # own ring; vfio: its own I/O queue pair), reported as one (group_reporting).
        one io_uring-2j 16 "/dev/$ns" "async=io_uring,direct=1" --numjobs=2 --group_reporting
        echo "== repetition $rep: user-space driver"
        "$cli" driver bind vfio "$addr"
        for qd in 1 16; do one vfio "$qd" "${addr//:/\\:}" "nsid=1"; done
        one vfio-2j 16 "${addr//:/\\:}" "nsid=1" --numjobs=2 --group_reporting
        "$cli" driver bind nvme "$addr"
        for _ in $(seq 100); do [[ -b /dev/$ns && -c $ng ]] && break; sleep 0.1; done
    done
    exit 0
fi

# ---------------------------------------------------------------- on the host
reps=3 runtime=3 scaling=0 jobs=1,2 qds=1,4,16
usage="usage: tests/vm/pci-study.sh [--reps N] [--runtime SECS] | --scaling [--reps N] [--runtime SECS] [--jobs LIST] [--qd LIST]"
while (($#)); do
    case $1 in
        --reps | --runtime | --jobs | --qd)
            (($# >= 2)) || { echo "pci-study: $1 needs a value; $usage" >&2; exit 2; }
            case $1 in
                --reps) reps=$2 ;;
                --runtime) runtime=$2 ;;
                --jobs) jobs=$2 ;;
                --qd) qds=$2 ;;
            esac
            shift 2
            ;;
        --scaling) scaling=1; shift ;;
        *) echo "pci-study: unknown argument $1; $usage" >&2; exit 2 ;;
    esac
done
cd "$root"
if ((scaling)); then
    cargo build --release -p ioswitch-cli
    out=$root/target/scaling-study
    rm -rf "$out"
    mkdir -p "$out"
    "$here/run.sh" --iommu --rw "$out" --timeout "${IOSWITCH_VM_TIMEOUT:-1500}" -- \
        "$here/pci-study.sh" --guest-scaling "$out" "$reps" "$runtime" "$jobs" "$qds"
    # One study of both sweeps: the merged study.csv and the paper's plots.
    "$root/target/release/ioswitch" bench sweep --from-csv "$out/kernel/study.csv" --from-csv "$out/vfio/study.csv" --out "$out"
    python3 - "$out/study.csv" "$out/kernel/study.json" "$out/vfio/study.json" <<'PY' | tee "$out/table.md"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
qds = sorted({int(r["qd"]) for r in rows})
def k(v):
    return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"
print("| variant | jobs | " + " | ".join(f"qd {q}" for q in qds) + " |")
print("|---|---|" + "---|" * len(qds))
seen = []
for r in rows:
    if (r["variant"], r["jobs"]) not in seen:
        seen.append((r["variant"], r["jobs"]))
for v, j in seen:
    cells = {int(r["qd"]): r for r in rows if (r["variant"], r["jobs"]) == (v, j)}
    line = [f"{k(float(c['iops']))} [{k(float(c['iops_min']))}–{k(float(c['iops_max']))}]" if (c := cells.get(q)) else "—" for q in qds]
    print(f"| {v} | {j} | " + " | ".join(line) + " |")
for f in sys.argv[2:]:
    for r in json.load(open(f))["refused"]:
        print(f"\nrefused {r['variant']}: {r['reason']}")
PY
    exit 0
fi
cargo build -p ioswitch-cli
out=$root/target/pci-study
rm -rf "$out"
mkdir -p "$out"
"$here/run.sh" --iommu --rw "$out" --timeout "${IOSWITCH_VM_TIMEOUT:-1500}" -- \
    "$here/pci-study.sh" --guest "$out" "$reps" "$runtime"
python3 "$here/pci_study_table.py" "$out" --csv "$out/sweep.csv" | tee "$out/table.md"
# The sweep's plots of the study's rows (one controller under two drivers cannot be one
# sweep run): lat-vs-qd, iops-vs-qd, cpu-per-io-vs-qd and syscalls-per-io-vs-qd.svg.
"$root/target/debug/ioswitch" bench sweep --from-csv "$out/sweep.csv" --out "$out"
