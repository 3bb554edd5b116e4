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
# Usage: tests/vm/pci-study.sh [--reps N] [--runtime SECS]
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
addr=0000:00:05.0

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
reps=3 runtime=3
while (($#)); do
    case $1 in
        --reps) reps=$2; shift 2 ;;
        --runtime) runtime=$2; shift 2 ;;
        *) echo "usage: tests/vm/pci-study.sh [--reps N] [--runtime SECS]" >&2; exit 2 ;;
    esac
done
cd "$root"
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
