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
# driver, which init binds to the controller again, then through the driver (bound again).
#
# And for pmem, in the --nvdimm guest (the NVDIMMs' backing files in the --disk-dir too):
# boot 1 makes the namespaces fsdax (ext4 -o dax) and devdax (pmem-tests.sh --guest-then)
# and runs `powercut write pmem`; boot 2 only loads the modules, finds the namespaces the
# kernel found again (their info blocks are in the backing files), mounts the ext4 and runs
# `powercut check N pmem`. QEMU maps the backing files shared: every store of the guest is
# in the host's page cache at once, so this cut cannot lose an unflushed store; it checks
# the path and that the flushed data is where the namespaces say after a reboot.
#
# QEMU writes the guest's completed writes into the image files itself (cache=unsafe), so
# the cut loses what the guest had not written to its disk: its page cache and anything an
# interface kept back without flushing. Prints the `crash: power cut:` lines; exits non-zero
# when anything is lost or the control survived.
set -euo pipefail
# (The argument check first, without dirname: it needs no PATH.)
vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
# shellcheck source=scripts/args.sh
. "$vm/../../scripts/args.sh"
stage_arguments "$0" 0 "$@"

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)

if [[ ${1:-} == --guest-pmem ]]; then
    # In the guest of boot 2: the NVDIMMs as boot 1 left them, then COMMAND.
    shift
    mods=${IOSWITCH_VM_MODROOT:-/}
    # (libnvdimm without the host ndctl package's install hook: see pmem-tests.sh.)
    modprobe -d "$mods" --ignore-install libnvdimm || exit 2
    for m in nfit nd_pmem dax_pmem device_dax crc32c_generic ext4; do modprobe -d "$mods" "$m" || exit 2; done
    blk= chr=
    for _ in $(seq 100); do
        ns=$(ndctl list -N 2>/dev/null || true)
        blk=$(sed -n 's/.*"blockdev":"\([^"]*\)".*/\1/p' <<<"$ns" | head -n 1)
        chr=$(sed -n 's/.*"chardev":"\([^"]*\)".*/\1/p' <<<"$ns" | head -n 1)
        [[ -n $blk && -n $chr ]] && break
        sleep 0.1
    done
    echo "guest: namespaces after the cut: $(tr -s ' \n' ' ' <<<"$ns")"
    [[ -n $blk && -n $chr ]] || { echo "power-cut: the fsdax and devdax namespaces of boot 1 are not there after the reboot" >&2; exit 2; }
    mkdir -p /run/pmem
    mount -t ext4 -o dax "/dev/$blk" /run/pmem || exit 2
    export IOSWITCH_PMEM_DIR=/run/pmem/ioswitch IOSWITCH_PMEM_DEVDAX=/dev/$chr
    exec "$@"
fi
cd "$root"
echo "==== building the workload (cargo build -p ioswitch --example powercut)"
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"
exe=$(cargo_exe powercut build -p ioswitch --example powercut) || exit 2
cargo build -p ioswitch-cli
probe=$root/target/pmem-vm/dax-probe
mkdir -p "$(dirname "$probe")"
${CC:-cc} -O2 -Wall -Wextra -Werror -o "$probe" "$here/dax-probe.c"
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
    if "$here/run.sh" "${opts[@]}" --timeout "${IOSWITCH_VM_TIMEOUT:-300}" --disk-dir "$disks" -- "${check_wrap[@]}" "$exe" check "$n" "${check_args[@]}"; then
        echo "PASS  power cut ($name): every flushed byte survived, the unflushed control round did not ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.0f", b - a}') s, two boots)"
    else
        echo "FAIL  power cut ($name): see the lines above"
        failed+=("$name")
    fi
}

# The kernel's interfaces on nvme0's namespace 1.
check_args=()
check_wrap=()
cut kernel -- "$exe" write
# The user-space driver: the --iommu guest's second controller, bound to vfio-pci for the
# workload; at the second boot the kernel's nvme driver has it again (init binds it) and
# the check reads the driver's rounds through its block device, then binds it to vfio-pci
# again and reads them through the driver itself.
check_args=(vfio "$addr")
bind="for m in vfio-pci vfio_iommu_type1; do modprobe -d \"\$IOSWITCH_VM_MODROOT\" \$m || exit 2; done
    '$cli' driver bind vfio $addr || exit 2"
# shellcheck disable=SC2016 # $1 and $3 belong to the guest's bash: EXE check N
check_wrap=(bash -c '"$@" || exit; '"$bind"'
    exec "$1" check "$3" vfio-driver '"$addr" _)
cut vfio --iommu -- bash -c "$bind
    exec '$exe' write vfio $addr"
# pmem: fsdax file and devdax device on the two NVDIMMs, set up by pmem-tests.sh in boot 1,
# found again in boot 2.
check_args=(pmem)
check_wrap=(bash "$here/power-cut.sh" --guest-pmem)
cut pmem --nvdimm -- bash "$here/pmem-tests.sh" --guest-then "$probe" -- "$exe" write pmem

if ((${#failed[@]})); then
    echo "FAIL  power cut: ${failed[*]}"
    exit 1
fi
echo "PASS  power cut: every case"
