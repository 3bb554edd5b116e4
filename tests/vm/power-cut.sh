#!/usr/bin/env bash
# tests/vm/power-cut.sh — the power-cut test of issue 17 part 3: two boots of the guest
# on the same NVMe disk images (run.sh --disk-dir):
#
#   1. `powercut write` (crates/ioswitch/examples/powercut.rs) writes and flushes rounds
#      through every interface on namespace 1 (psync buffered and direct, mmap, libaio,
#      io_uring, thrpool, posix, emu on the block device; NVMe ioctl and io_uring_cmd on
#      the char device), writes one unflushed round to the page cache, prints
#      "flushed at N"; run.sh --stop-on kills QEMU at that line (SIGKILL: no shutdown, no
#      writeback);
#   2. a fresh boot runs `powercut check N`: every byte of the N flushed rounds of every
#      interface must be there, and the unflushed round must not (the control).
#
# The same two boots for the user-space driver, in the --iommu guest: boot 1 binds
# 0000:00:05.0 to vfio-pci and runs `powercut write vfio ADDR` (sync=vfio and async=vfio on
# nsid 1); boot 2 runs `powercut check N vfio ADDR`, reading through the kernel's nvme
# driver, which init binds to the controller again.
#
# QEMU writes the guest's completed writes into the image files itself (cache=unsafe), so
# the cut loses what the guest had not written to its disk: its page cache and anything an
# interface kept back without flushing. Prints the `crash: power cut:` lines; exits non-zero
# when anything is lost or the control survived.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
cd "$root"
echo "==== building the workload (cargo build -p ioswitch --example powercut)"
json=$(cargo build -p ioswitch --example powercut --message-format=json)
exe=$(printf '%s\n' "$json" | grep '"reason":"compiler-artifact"' | grep '"name":"powercut"' |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[[ -n $exe ]] || { echo "power-cut: cannot find the powercut executable in cargo's output" >&2; exit 2; }
cargo build -p ioswitch-cli
cli=$root/target/debug/ioswitch
[[ -x $cli ]] || { echo "power-cut: no CLI at $cli after cargo build -p ioswitch-cli" >&2; exit 2; }
top=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-powercut.XXXXXX")
trap 'rm -rf -- "$top"' EXIT
addr=0000:00:05.0
failed=()

# cut NAME RUN.SH-OPTIONS -- WRITE-COMMAND... : boot 1 runs the workload until "flushed at
# N" and is killed there; boot 2, on the same disk images, runs $check_cmd N $check_args.
cut() {
    local name=$1 opts=() disks=$top/$1 out n t0=$EPOCHREALTIME
    shift
    while [[ $1 != -- ]]; do opts+=("$1"); shift; done
    shift
    echo "==== $name: boot 1: write, flush, cut the power at 'flushed at'"
    out=$("$here/run.sh" "${opts[@]}" --timeout "${IOSWITCH_VM_TIMEOUT:-300}" --disk-dir "$disks" --stop-on "flushed at" -- "$@") || {
        echo "FAIL  power cut ($name): the workload boot failed (exit $?): $out"
        failed+=("$name")
        return
    }
    printf '%s\n' "$out"
    n=$(printf '%s\n' "$out" | sed -n 's/^flushed at \([0-9]*\)$/\1/p' | tail -n 1)
    [[ -n $n ]] || { echo "FAIL  power cut ($name): the workload never printed 'flushed at N'"; failed+=("$name"); return; }
    echo "==== $name: boot 2: check the $n flushed rounds on the same disks"
    if "$here/run.sh" "${opts[@]}" --timeout "${IOSWITCH_VM_TIMEOUT:-300}" --disk-dir "$disks" -- "$exe" check "$n" "${check_args[@]}"; then
        echo "PASS  power cut ($name): every flushed byte survived, the unflushed control round did not ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.0f", b - a}') s, two boots)"
    else
        echo "FAIL  power cut ($name): see the lines above"
        failed+=("$name")
    fi
}

# The kernel's interfaces on nvme0's namespace 1.
check_args=()
cut kernel -- "$exe" write
# The user-space driver: the --iommu guest's second controller, bound to vfio-pci for the
# workload; at the second boot the kernel's nvme driver has it again (init binds it) and
# the check reads the driver's rounds through its block device.
check_args=(vfio "$addr")
cut vfio --iommu -- bash -c "for m in vfio-pci vfio_iommu_type1; do modprobe -d \"\$IOSWITCH_VM_MODROOT\" \$m || exit 2; done
    '$cli' driver bind vfio $addr || exit 2
    exec '$exe' write vfio $addr"

if ((${#failed[@]})); then
    echo "FAIL  power cut: ${failed[*]}"
    exit 1
fi
echo "PASS  power cut: every case"
