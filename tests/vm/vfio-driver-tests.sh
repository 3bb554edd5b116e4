#!/usr/bin/env bash
# tests/vm/vfio-driver-tests.sh — the user-space NVMe driver (interface vfio) on the
# --iommu guest's second controller (0000:00:05.0: nsid 1 conventional, nsid 2 zoned),
# in one guest boot:
#
#   1. builds the CLI and the vfio test binary (crates/ioswitch/tests/vfio.rs);
#   2. in the guest, while the kernel's nvme driver owns the controller: nvme-cli's
#      Identify Controller, Identify Namespace and SMART log, the zone report of nsid 2,
#      and a pattern written through /dev/nvme1n1;
#   3. binds it to vfio-pci (`ioswitch driver bind vfio`) and runs the test binary with
#      IOSWITCH_VFIO_PCI=0000:00:05.0, then through the driver with the CLI: identify and
#      SMART compared field by field with nvme-cli's, the kernel's pattern read back, a
#      pattern written, zones reported (compared with the kernel's report), opened,
#      appended to, finished and reset; an `ioswitch bench` write+verify job on the
#      PCI address (fio's escaped colons), which must make no syscall per I/O;
#      then the conformance suite's PCI rows (crates/ioswitch/tests/conformance: every
#      case of the vfio column on nsid 1 and on the zoned nsid 2, every other column
#      refused), with the namespaces' geometry and DLFEAT as the kernel saw them before
#      the bind; they must all run: 0 skipped, 0 failed, the expected cell count;
#      then the front ends on the PCI address: the C API (tests/vm/vfio-capi.c),
#      the Python module (tests/vm/vfio_python.py), fio with the ioswitch engine
#      (write + verify), and `ioswitch bench` with fio's psync engine (refused, naming
#      --ioengine=ioswitch);
#   4. binds it back to nvme and reads the driver's pattern through /dev/nvme1n1.
#
# Usage: tests/vm/vfio-driver-tests.sh [-- EXTRA ARGS FOR THE TEST BINARY]
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
    front=$4
    shift 4
    [[ ${1:-} == -- ]] && shift
    guest_start
    dma=
    for m in vfio-pci vfio_iommu_type1; do modprobe -d "$IOSWITCH_VM_MODROOT" "$m"; done
    guest_controller
    nvme id-ctrl "/dev/$ctrl" -o json >"$out/kernel-id-ctrl.json"
    nvme id-ns "/dev/$ns1" -o json >"$out/kernel-id-ns.json"
    nvme smart-log "/dev/$ctrl" -o json >"$out/kernel-smart.json"
    # A zone with data, one finished, the rest empty: a report worth comparing.
    "$cli" zone finish "/dev/$ns2" --slba 0x2000 >/dev/null # zone 1 full, through the kernel
    head -c 4096 /dev/urandom >"$out/zdata"
    nvme zns zone-append "/dev/$ns2" --zslba=0 --data-size=4096 --data="$out/zdata" >/dev/null
    nvme zns report-zones "/dev/$ns2" -o json >"$out/kernel-zones.json"
    kernel_pattern
    # The namespaces as the kernel sees them, for the conformance rows.
    vfio_ns=$(kernel_namespaces "$ns1" "$ns2")
    echo "guest: IOSWITCH_VFIO_NS=$vfio_ns"

    check "bind to vfio-pci" "$cli" driver bind vfio "$addr"
    mdts=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mdts"])' "$out/kernel-id-ctrl.json")
    check "test binary (crates/ioswitch/tests/vfio.rs)" \
        env IOSWITCH_VFIO_PCI=$addr IOSWITCH_VFIO_MDTS="$mdts" "$exe" --test-threads=1 "$@"

    check_no_hugepages
    check "identify controller equals nvme-cli's" bash -c "
        '$cli' idfy ctrl $addr --output json >'$out/drv-id-ctrl.json' &&
        python3 '$here/vfio_compare.py' id-ctrl '$out/kernel-id-ctrl.json' '$out/drv-id-ctrl.json'"
    check "identify namespace equals nvme-cli's" bash -c "
        '$cli' idfy ns $addr --opts nsid=1 --output json >'$out/drv-id-ns.json' &&
        python3 '$here/vfio_compare.py' id-ns '$out/kernel-id-ns.json' '$out/drv-id-ns.json'"
    check "SMART log equals nvme-cli's" bash -c "
        '$cli' log health $addr --output json >'$out/drv-smart.json' &&
        python3 '$here/vfio_compare.py' smart '$out/kernel-smart.json' '$out/drv-smart.json'"
    check_driver_data
    check "zone report equals the kernel's" bash -c "
        '$cli' zone report $addr --opts nsid=2 --output json >'$out/drv-zones.json' &&
        python3 '$here/vfio_compare.py' zones '$out/kernel-zones.json' '$out/drv-zones.json'"
    check "zone open, append, finish, reset" bash -c "
        set -e
        '$cli' zone open $addr --opts nsid=2 --slba 0x4000
        '$cli' zone append $addr --opts nsid=2 --slba 0x4000 --data '$out/zdata' --output json >'$out/append.json'
        '$cli' zone report $addr --opts nsid=2 --output json >'$out/z1.json'
        '$cli' zone finish $addr --opts nsid=2 --slba 0x4000
        '$cli' zone report $addr --opts nsid=2 --output json >'$out/z2.json'
        '$cli' zone reset $addr --opts nsid=2 --slba 0x4000
        '$cli' zone report $addr --opts nsid=2 --output json >'$out/z3.json'
        python3 '$here/vfio_compare.py' zone-steps '$out/append.json' '$out/z1.json' '$out/z2.json' '$out/z3.json'"

    check_bench
    check_conformance "$conf" "$vfio_ns"

    # The front ends on the PCI address: the C API's examples (open, alloc, write, read
    # back, compare; sync and async), the Python module, the fio engine (write + verify),
    # and `ioswitch bench` with one of fio's own engines, refused naming the way.
    check "C API: open, alloc, write, read back, compare, a queue, a non-DMA buffer refused" \
        "$front/vfio-capi" "$addr" nsid=1
    check "Python: write, read back, compare, a queue, a non-DMA buffer refused" \
        env PYTHONPATH="$front/py" /usr/bin/python3 "$here/vfio_python.py" "$addr"
    check "fio ioswitch engine on the PCI address: write + verify, every byte" bash -c "
        cd '$out' && fio --name=pci --ioengine=external:'$front/fio/ioswitch-engine.so' --thread=1 \
            --filename='${addr//:/\\:}' --ioswitch_opts=nsid=1 --offset=96m --size=8m --bs=64k --rw=write \
            --iodepth=4 --verify=crc32c --do_verify=1 --output-format=json --output='$out/fio.json' >'$out/fio.log' 2>&1
        rc=\$?; cat '$out/fio.log'
        [ \$rc = 0 ] && python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))[\"jobs\"][0]
print(\"error\", j[\"error\"], \"written\", j[\"write\"][\"io_bytes\"], \"verified\", j[\"read\"][\"io_bytes\"])
sys.exit(0 if j[\"error\"] == 0 and j[\"write\"][\"io_bytes\"] == 8 << 20 and j[\"read\"][\"io_bytes\"] == 8 << 20 else 1)
' '$out/fio.json'"
    check "ioswitch bench with fio's psync engine on the PCI address is refused naming --ioengine=ioswitch" bash -c "
        '$cli' bench --name=p --filename='${addr//:/\\:}' --size=1m --rw=read >'$out/psync.txt' 2>&1; rc=\$?
        cat '$out/psync.txt'
        [ \$rc != 0 ] && grep -q 'is a PCI address' '$out/psync.txt' && grep -q 'use --ioengine=ioswitch' '$out/psync.txt'"

    check_back_to_nvme
    finish vfio
fi

# ---------------------------------------------------------------- on the host
driver_bins
# The front ends, on the debug library: the C examples, the Python module (the cdylib
# beside the package's Python files, as maturin lays it out) and the fio engine.
front=$root/target/vfio-front
rm -rf "$front/py"
mkdir -p "$front/py/ioswitch"
"$root/scripts/install" --prefix "$front/prefix" --debug
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -O2 -g -o "$front/vfio-capi" "$here/vfio-capi.c" \
    $(PKG_CONFIG_PATH=$front/prefix/lib/pkgconfig pkg-config --cflags --libs ioswitch)
cargo build -p ioswitch-py
cp "$root"/crates/ioswitch-py/python/ioswitch/*.py "$front/py/ioswitch/"
cp "$root/target/debug/lib_ioswitch.so" "$front/py/ioswitch/_ioswitch.abi3.so"
"$root/fio/build.sh" --prefix "$front/prefix" --out "$front/fio" >/dev/null
exec "$here/run.sh" --iommu --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- "$here/vfio-driver-tests.sh" --guest "$exe" "$conf" "$front" "$@"
