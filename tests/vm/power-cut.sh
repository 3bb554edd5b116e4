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
disks=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-powercut.XXXXXX")
trap 'rm -rf -- "$disks"' EXIT
echo "==== boot 1: write, flush, cut the power at 'flushed at'"
out=$("$here/run.sh" --timeout "${IOSWITCH_VM_TIMEOUT:-300}" --disk-dir "$disks" --stop-on "flushed at" -- "$exe" write) || {
    echo "FAIL  power cut: the workload boot failed (exit $?): $out"
    exit 1
}
printf '%s\n' "$out"
n=$(printf '%s\n' "$out" | sed -n 's/^flushed at \([0-9]*\)$/\1/p' | tail -n 1)
[[ -n $n ]] || { echo "FAIL  power cut: the workload never printed 'flushed at N'"; exit 1; }
echo "==== boot 2: check the $n flushed rounds on the same disks"
if "$here/run.sh" --timeout "${IOSWITCH_VM_TIMEOUT:-300}" --disk-dir "$disks" -- "$exe" check "$n"; then
    echo "PASS  power cut: every flushed byte survived, the unflushed control round did not"
else
    echo "FAIL  power cut: see the lines above"
    exit 1
fi
