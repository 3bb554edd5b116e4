#!/usr/bin/env bash
# tests/vm/uio-driver-tests.sh — the user-space NVMe driver's uio mode (`dma=uio`) on the
# --pci guest's second controller (0000:00:05.0: nsid 1 conventional, nsid 2 zoned), a
# guest WITHOUT an IOMMU, in one boot:
#
#   1. builds the CLI, the vfio test binary (crates/ioswitch/tests/vfio.rs) and the
#      conformance binary;
#   2. in the guest, while the kernel's nvme driver owns the controller: a pattern
#      written through /dev/nvme1n1, the namespaces' geometry for the conformance rows;
#   3. checks there is no IOMMU (no /sys/kernel/iommu_groups entry) and that
#      `ioswitch driver bind vfio` is refused for it; binds the controller to
#      uio_pci_generic (`ioswitch driver bind uio`) and runs the test binary with
#      IOSWITCH_VFIO_PCI=0000:00:05.0 IOSWITCH_VFIO_DMA=uio (every open adds dma=uio);
#      then with the CLI: the refusals (no hugepages names vm.nr_hugepages; without
#      CAP_SYS_ADMIN the physical addresses read as 0 and the error says so), the
#      kernel's pattern read back and a pattern written through the driver (64 KiB, and
#      4 MiB in one buffer over two hugepages), an `ioswitch
#      bench` write+verify job with 0 syscalls per I/O; the conformance suite's PCI rows
#      with dma=uio (vfio runs every case on nsid 1 and the zoned nsid 2, every other
#      column refused, 0 skipped);
#   4. binds it back to nvme and reads the driver's pattern through /dev/nvme1n1.
#
# Usage: tests/vm/uio-driver-tests.sh [-- EXTRA ARGS FOR THE TEST BINARY]
set -euo pipefail
# (The argument check first, without dirname: it needs no PATH.)
vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
# shellcheck source=scripts/args.sh
. "$vm/../../scripts/args.sh"
stage_arguments "$0" 1 "$@"

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
addr=0000:00:05.0
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"

if [[ ${1:-} == --guest ]]; then
    # ------------------------------------------------------------ inside the guest
    exe=$2
    conf=$3
    shift 3
    [[ ${1:-} == -- ]] && shift
    guest_start
    dma=uio
    # vfio-pci too: its bind must be refused for the missing IOMMU, not a missing module.
    for m in uio_pci_generic vfio-pci vfio_iommu_type1; do modprobe -d "$IOSWITCH_VM_MODROOT" "$m"; done
    echo "guest: modules loaded at $(date +%T)"
    guest_controller
    kernel_pattern
    # The namespaces as the kernel sees them, for the conformance rows.
    vfio_ns=$(kernel_namespaces "$ns1" "$ns2")
    echo "guest: IOSWITCH_VFIO_NS=$vfio_ns ($(date +%T))"
    # MDTS as nvme-cli reads it while the kernel owns the controller (the chained-PRP test).
    mdts=$(nvme id-ctrl "/dev/$ctrl" | awk '$1 == "mdts" { print $3 }')

    check "no IOMMU: no IOMMU groups, and binding to vfio-pci is refused" bash -c "
        [ -z \"\$(ls /sys/kernel/iommu_groups 2>/dev/null)\" ] || { echo 'this guest has IOMMU groups'; exit 1; }
        '$cli' driver bind vfio $addr 2>'$out/bind-vfio.err'; rc=\$?
        cat '$out/bind-vfio.err'
        [ \$rc != 0 ] && grep -q 'IOMMU' '$out/bind-vfio.err'"
    check "bind to uio_pci_generic" "$cli" driver bind uio "$addr"
    check "test binary with dma=uio (crates/ioswitch/tests/vfio.rs)" \
        env IOSWITCH_VFIO_PCI=$addr IOSWITCH_VFIO_DMA=uio IOSWITCH_VFIO_MDTS="$mdts" "$exe" --test-threads=1 "$@"

    check_no_hugepages
    check "without CAP_SYS_ADMIN the open fails naming it (pagemap frames read 0)" bash -c "
        setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin '$cli' info $addr --opts dma=uio 2>'$out/nocap.err'; rc=\$?
        cat '$out/nocap.err'
        [ \$rc != 0 ] && grep -q 'CAP_SYS_ADMIN' '$out/nocap.err'"
    check_driver_data
    head -c $((4 << 20)) /dev/urandom >"$out/big-pattern"
    check "4 MiB in one buffer over two hugepages: written and read back through the driver" bash -c "
        '$cli' write $addr --opts nsid=1,dma=uio --sync --chunk 4m --offset $((1200 * 65536)) --data '$out/big-pattern' &&
        '$cli' read $addr --opts nsid=1,dma=uio --sync --chunk 4m --offset $((1200 * 65536)) --length $((4 << 20)) --out '$out/big-read' &&
        cmp '$out/big-pattern' '$out/big-read'"
    check_bench
    # The conformance suite's PCI rows, opened with dma=uio: as in vfio-driver-tests.sh.
    check_conformance "$conf" "$vfio_ns"

    check_back_to_nvme
    check "the 4 MiB the driver wrote reads back through the kernel" bash -c "
        dd if=/dev/$ns1 of='$out/big-kernel' bs=64k skip=1200 count=64 iflag=direct status=none &&
        cmp '$out/big-pattern' '$out/big-kernel'"
    finish uio
fi

# ---------------------------------------------------------------- on the host
driver_bins
exec "$here/run.sh" --pci --timing --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- "$here/uio-driver-tests.sh" --guest "$exe" "$conf" "$@"
