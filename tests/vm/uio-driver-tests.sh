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

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
addr=0000:00:05.0

if [[ ${1:-} == --guest ]]; then
    # ------------------------------------------------------------ inside the guest
    exe=$2
    conf=$3
    shift 3
    [[ ${1:-} == -- ]] && shift
    cli=$root/target/debug/ioswitch
    out=$(mktemp -d)
    fails=()
    # shellcheck source=tests/vm/driver-lib.sh
    source "$here/driver-lib.sh"
    # vfio-pci too: its bind must be refused for the missing IOMMU, not a missing module.
    for m in uio_pci_generic vfio-pci vfio_iommu_type1; do modprobe -d "$IOSWITCH_VM_MODROOT" "$m"; done
    echo "guest: modules loaded at $(date +%T)"
    ctrl=$(basename "$(ls -d /sys/bus/pci/devices/$addr/nvme/nvme*)")
    ns_name() { # the block device of namespace $1 of $ctrl
        local b
        for b in /sys/block/"$ctrl"n*; do
            if [[ $(cat "$b/nsid") == "$1" ]]; then basename "$b"; fi
        done
    }
    ns1=$(ns_name 1)
    ns2=$(ns_name 2)
    echo "guest: $addr is $ctrl (nsid 1 = $ns1, nsid 2 = $ns2)"
    head -c $((64 << 10)) /dev/urandom >"$out/kernel-pattern"
    dd if="$out/kernel-pattern" of="/dev/$ns1" bs=64k seek=1000 oflag=direct status=none
    # The namespaces as the kernel sees them, for the conformance rows:
    # nsid:lba:bytes:zone_lbas:nr_zones:dlfeat.
    vfio_ns=
    for n in "$ns1" "$ns2"; do
        b=/sys/block/$n
        lba=$(cat "$b/queue/logical_block_size")
        zl=0 nz=0
        if [[ $(cat "$b/queue/zoned") != none ]]; then
            zl=$(($(cat "$b/queue/chunk_sectors") * 512 / lba))
            nz=$(cat "$b/queue/nr_zones")
        fi
        # (awk, not python: python's start-up costs seconds in the TCG guest)
        dlfeat=$(nvme id-ns "/dev/$n" | awk '$1 == "dlfeat" { print $3 }')
        vfio_ns+="$(cat "$b/nsid"):$lba:$(($(cat "$b/size") * 512)):$zl:$nz:$dlfeat "
    done
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

    check "without hugepages the open fails naming vm.nr_hugepages" bash -c "
        n=\$(cat /proc/sys/vm/nr_hugepages)
        echo 0 >/proc/sys/vm/nr_hugepages
        '$cli' info $addr --opts dma=uio 2>'$out/nohuge.err'; rc=\$?
        echo \$n >/proc/sys/vm/nr_hugepages
        cat '$out/nohuge.err'
        [ \$rc != 0 ] && grep -q 'vm.nr_hugepages' '$out/nohuge.err' && [ \$(cat /proc/sys/vm/nr_hugepages) = \$n ]"
    check "without CAP_SYS_ADMIN the open fails naming it (pagemap frames read 0)" bash -c "
        setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin '$cli' info $addr --opts dma=uio 2>'$out/nocap.err'; rc=\$?
        cat '$out/nocap.err'
        [ \$rc != 0 ] && grep -q 'CAP_SYS_ADMIN' '$out/nocap.err'"
    check "data the kernel wrote reads back through the driver" bash -c "
        '$cli' read $addr --opts nsid=1,dma=uio --offset $((1000 * 65536)) --length 65536 --out '$out/drv-read' &&
        cmp '$out/kernel-pattern' '$out/drv-read'"
    head -c $((64 << 10)) /dev/urandom >"$out/drv-pattern"
    check "write through the driver" \
        "$cli" write "$addr" --opts nsid=1,dma=uio --offset $((2000 * 65536)) --data "$out/drv-pattern"
    head -c $((4 << 20)) /dev/urandom >"$out/big-pattern"
    check "4 MiB in one buffer over two hugepages: written and read back through the driver" bash -c "
        '$cli' write $addr --opts nsid=1,dma=uio --sync --chunk 4m --offset $((1200 * 65536)) --data '$out/big-pattern' &&
        '$cli' read $addr --opts nsid=1,dma=uio --sync --chunk 4m --offset $((1200 * 65536)) --length $((4 << 20)) --out '$out/big-read' &&
        cmp '$out/big-pattern' '$out/big-read'"
    check "ioswitch bench write+verify on the PCI address with dma=uio, 0 syscalls per I/O" bash -c "
        '$cli' bench --name=v --filename='${addr//:/\\:}' --offset=64m --size=8m --rw=write --bs=64k \
            --iodepth=4 --verify=crc32c --ioengine=ioswitch --ioswitch_opts=nsid=1,dma=uio >'$out/bench.txt' 2>&1
        rc=\$?; cat '$out/bench.txt' | grep -E 'ioswitch +:|error'
        [ \$rc = 0 ] && grep -q 'interface=vfio, syscalls=0 (0.00 per I/O)' '$out/bench.txt' &&
            grep -q 'verified 128 blocks' '$out/bench.txt'"
    # The conformance suite's PCI rows, opened with dma=uio: as in vfio-driver-tests.sh,
    # 17 columns on nsid 1 and 15 on the zoned nsid 2, vfio runs, the others are refused.
    check "conformance PCI rows with dma=uio: vfio runs, the other columns are refused, 0 skipped" bash -c "
        IOSWITCH_VFIO_PCI=$addr IOSWITCH_VFIO_DMA=uio IOSWITCH_VFIO_NS='$vfio_ns' IOSWITCH_CONFORMANCE_ROWS=pci,pci-zoned \
            IOSWITCH_CONFORMANCE_VERBOSE=1 '$conf' >'$out/conformance.txt' 2>&1; rc=\$?
        cat '$out/conformance.txt'
        cells=\$(grep -cE '^  $addr ns[12]( zoned)? ' '$out/conformance.txt')
        vfio=\$(grep -cE '^  $addr ns[12]( zoned)? +vfio +PASS ' '$out/conformance.txt')
        na=\$(grep -cE '^  $addr ns[12]( zoned)? +[^ ]+ +n/a ' '$out/conformance.txt')
        echo \"PCI cells: \$cells (vfio PASS: \$vfio, n/a: \$na); expected 32 (2 + 30)\"
        [ \$rc = 0 ] && [ \$cells = 32 ] && [ \$vfio = 2 ] && [ \$na = 30 ] &&
            grep -qE '^[0-9]+ passed, 0 failed, 0 skipped' '$out/conformance.txt'"

    check "bind back to nvme" "$cli" driver bind nvme "$addr"
    check "data the driver wrote reads back through the kernel" bash -c "
        for i in \$(seq 100); do [ -b /dev/$ns1 ] && break; sleep 0.1; done
        dd if=/dev/$ns1 of='$out/kernel-read' bs=64k skip=2000 count=1 iflag=direct status=none &&
        cmp '$out/drv-pattern' '$out/kernel-read' &&
        dd if=/dev/$ns1 of='$out/big-kernel' bs=64k skip=1200 count=64 iflag=direct status=none &&
        cmp '$out/big-pattern' '$out/big-kernel'"

    echo "==== summary ($(date +%T))"
    if ((${#fails[@]})); then
        printf 'FAILED: %s\n' "${fails[@]}"
        exit 1
    fi
    echo "all uio driver checks passed"
    exit 0
fi

# ---------------------------------------------------------------- on the host
cd "$root"
cargo build -p ioswitch-cli
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"
exe=$(test_bin vfio)
conf=$(test_bin conformance)
exec "$here/run.sh" --pci --timing --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- "$here/uio-driver-tests.sh" --guest "$exe" "$conf" "$@"
