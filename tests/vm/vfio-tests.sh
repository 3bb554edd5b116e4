#!/usr/bin/env bash
# tests/vm/vfio-tests.sh — PCI controllers and driver binding, for real, in one boot of
# the IOMMU guest (tests/vm/run.sh --iommu: q35 + intel-iommu, hugepages, a second NVMe
# controller at 0000:00:05.0 with a conventional and a zoned namespace):
#
#   1. builds the ioswitch CLI and the ioswitch test binaries here and finds the
#      executables in cargo's JSON messages (cargo_exe, driver-lib.sh);
#   2. in the guest:
#      - `ioswitch enum` lists both PCI NVMe controllers with driver nvme and an IOMMU
#        group each, and the second controller's namespaces;
#      - `ioswitch driver bind` refusals, each leaving the controller on nvme with its
#        namespaces: a module not loaded, not root, no hugepages, a device that is not
#        NVMe, an unknown address, and namespaces in use — mounted, swap, held by a
#        device-mapper linear device, open in a process (block and generic char device);
#      - binding to vfio-pci (its /dev/vfio/GROUP appears, the namespaces go, nvme0 stays),
#        the same bind again (nothing changed), a refusal while a process holds the vfio
#        group, the vfio data-path tests (below), back to nvme: the namespaces come back
#        and data written before reads back unchanged; then to uio_pci_generic (a
#        /dev/uioN appears), a refusal while a process holds it, and back to nvme;
#   3. boots the default guest (no IOMMU, no hugepages) once more: binding its nvme0 to
#      vfio is refused for want of an IOMMU group, to uio for want of hugepages, and
#      nvme0 stays live with its namespaces;
#   4. prints a summary; exits non-zero when any check failed.
#
# The vfio data-path tests run while the controller is bound to vfio-pci, at the place
# marked "VFIO DATA PATH" below: every test executable named in IOSWITCH_VFIO_TESTS
# (space-separated paths; the driver's own suite is tests/vm/vfio-driver-tests.sh). They run
# when this build has an interface named vfio (`ioswitch interfaces`); without one they
# are reported as not run (this build cannot drive the device), never as passed.
#
# Usage: tests/vm/vfio-tests.sh
# Environment: IOSWITCH_VM_TIMEOUT (seconds for the guest run, default 600),
# IOSWITCH_VFIO_TESTS (more test executables for the data-path place).
set -euo pipefail
# (The argument check first, without dirname: it needs no PATH.)
vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
# shellcheck source=scripts/args.sh
. "$vm/../../scripts/args.sh"
stage_arguments "$0" 0 "$@"

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)
PCI=0000:00:05.0

if [[ ${1:-} == --guest-no-iommu ]]; then
    # ------------------------------------------------------------ the default guest
    ios=$2
    out=$(mktemp -d)
    failed=0
    modprobe -d "${IOSWITCH_VM_MODROOT:-/}" vfio-pci || { echo "FAIL  modprobe vfio-pci"; exit 1; }
    modprobe -d "${IOSWITCH_VM_MODROOT:-/}" uio_pci_generic || { echo "FAIL  modprobe uio_pci_generic"; exit 1; }
    l=$(readlink /sys/class/nvme/nvme0/device)
    addr=${l##*/}
    # check NAME DRIVER WORDS: binding nvme0 to DRIVER is refused with WORDS, nvme0 stays.
    check() {
        local name=$1 drv=$2 words=$3 rc=0
        "$ios" driver bind "$drv" "$addr" >"$out/out" 2>"$out/err" || rc=$?
        if ((rc == 1)) && grep -qF -- "$words" "$out/err" && [[ $(cat /sys/class/nvme/nvme0/state) == live ]] &&
            [[ -b /dev/nvme0n1 && -b /dev/nvme0n3 ]]; then
            echo "PASS  $name: $(cat "$out/err")"
        else
            echo "FAIL  $name: exit status $rc, nvme0 $(cat /sys/class/nvme/nvme0/state 2>&1): $(cat "$out/out" "$out/err")"
            failed=1
        fi
    }
    check "no IOMMU group (nvme0 at $addr)" vfio "it has no IOMMU group"
    check "no hugepages (nvme0 at $addr)" uio "no hugepages reserved"
    exit $failed
fi

if [[ ${1:-} == --guest ]]; then
    # ------------------------------------------------------------ inside the guest
    ios=$2
    modroot=${IOSWITCH_VM_MODROOT:-/}
    out=$(mktemp -d)
    pass=0
    fails=()
    ok() { echo "PASS  $1"; pass=$((pass + 1)); }
    bad() { echo "FAIL  $1"; fails+=("$1"); }
    driver_of() {
        local l
        if l=$(readlink "/sys/bus/pci/devices/$PCI/driver"); then echo "${l##*/}"; else echo none; fi
    }
    nvme1_namespaces() {
        local n=0 d
        for d in /sys/bus/pci/devices/$PCI/nvme/nvme*/nvme*n*; do
            [[ -e $d ]] && n=$((n + 1))
        done
        echo "$n"
    }
    # wait_namespaces N: the kernel scans namespaces after the controller is live.
    wait_namespaces() {
        local i
        for i in $(seq 300); do
            (($(nvme1_namespaces) >= $1)) && [[ -b $(ns_dev 1) && -b $(ns_dev 2) ]] && return 0
            sleep 0.1
        done
        return 1
    }
    # ns_dev NSID: the block device of namespace NSID of the second controller.
    ns_dev() {
        local d
        for d in /sys/bus/pci/devices/$PCI/nvme/nvme*/nvme*n*; do
            [[ $(cat "$d/nsid" 2>/dev/null) == "$1" ]] && { echo "/dev/${d##*/}"; return; }
        done
        echo /dev/missing-nsid-$1
    }
    # bind DRIVER: runs `ioswitch driver bind`, output in $out/bind.{out,err}, returns its status.
    bind() {
        "$ios" driver bind "$1" "$PCI" >"$out/bind.out" 2>"$out/bind.err"
    }
    # back_to_nvme FROM: binds the controller from driver FROM back to nvme; both
    # namespaces must come back.
    back_to_nvme() {
        local rc=0
        bind nvme || rc=$?
        if ((rc == 0)) && grep -q "$1 -> nvme" "$out/bind.out" && wait_namespaces 2; then
            ok "bind nvme from $1: $(cat "$out/bind.out") — $(nvme1_namespaces) namespaces back"
        else
            bad "bind nvme from $1: status $rc, driver $(driver_of), $(nvme1_namespaces) namespaces: $(cat "$out/bind.out" "$out/bind.err")"
        fi
    }
    # refused_while_open DRIVER DEV WHAT: with DEV (WHAT, in words) held open by a
    # process, `bind DRIVER` is refused naming that process, and the controller stays on
    # $stay (see refused).
    refused_while_open() {
        local holder rc=0
        sleep 600 <"$2" &
        holder=$!
        sleep 0.2
        bind "$1" || rc=$?
        refused "$3 open in a process" $rc "$2 is open in process $holder (sleep)"
        kill "$holder"
        wait "$holder" 2>/dev/null || true
    }
    # refused NAME RC WORDS...: the last bind failed with status 1, its message has every
    # WORDS, and the controller is still on $stay (nvme: with both namespaces).
    stay=nvme
    refused() {
        local name=$1 rc=$2 w
        shift 2
        if ((rc != 1)); then
            bad "$name: exit status $rc, not 1 ($(cat "$out/bind.out" "$out/bind.err"))"
            return
        fi
        for w in "$@"; do
            if ! grep -qF -- "$w" "$out/bind.err"; then
                bad "$name: the refusal lacks '$w': $(cat "$out/bind.err")"
                return
            fi
        done
        if [[ $(driver_of) != "$stay" ]] || { [[ $stay == nvme ]] && (($(nvme1_namespaces) != 2)); }; then
            bad "$name: refused, but the controller is on $(driver_of) with $(nvme1_namespaces) namespaces"
            return
        fi
        ok "$name: $(cat "$out/bind.err")"
    }

    echo "==== enum"
    "$ios" enum >"$out/enum.txt" 2>&1 || true
    cat "$out/enum.txt"
    "$ios" enum --output json >"$out/enum.json"
    group=$(jq -r ".pci[] | select(.addr == \"$PCI\") | .iommu_group" "$out/enum.json")
    if [[ $(jq -r ".pci[] | select(.addr == \"$PCI\") | .driver" "$out/enum.json") == nvme && $group =~ ^[0-9]+$ &&
        $(jq ".pci[] | select(.addr == \"$PCI\") | .namespaces | length" "$out/enum.json") == 2 ]]; then
        ok "enum: $PCI is on nvme, IOMMU group $group, 2 namespaces"
    else
        bad "enum: $PCI is not listed on nvme with an IOMMU group and 2 namespaces"
    fi
    if [[ $(jq -r '.pci[] | select(.controller == "/dev/nvme0") | .driver' "$out/enum.json") == nvme ]] &&
        grep -qE "^$PCI +1b36:0010 +nvme +$group " "$out/enum.txt"; then
        ok "enum: nvme0 is listed on nvme, and the text table shows $PCI"
    else
        bad "enum: nvme0's controller or $PCI's table row is missing"
    fi

    echo "==== refusals (the controller stays on nvme)"
    # The module is loaded further down: first its absence.
    set +e
    bind uio
    refused "uio_pci_generic not loaded" $? "uio_pci_generic driver is not loaded" "modprobe uio_pci_generic"
    set -e
    for m in vfio-pci vfio_iommu_type1 uio_pci_generic dm_mod ext4; do
        modprobe -d "$modroot" "$m" || bad "modprobe $m failed"
    done
    set +e
    setpriv --reuid=65534 --regid=65534 --clear-groups "$ios" driver bind vfio "$PCI" >"$out/bind.out" 2>"$out/bind.err"
    refused "not root" $? "not root"
    nr=$(cat /proc/sys/vm/nr_hugepages)
    echo 0 >/proc/sys/vm/nr_hugepages
    bind vfio
    refused "no hugepages" $? "no hugepages reserved" "vm.nr_hugepages"
    echo "$nr" >/proc/sys/vm/nr_hugepages
    [[ $(cat /proc/sys/vm/nr_hugepages) == "$nr" ]] || bad "hugepages: only $(cat /proc/sys/vm/nr_hugepages) of $nr back"
    "$ios" driver bind vfio 0000:00:1f.2 >"$out/bind.out" 2>"$out/bind.err"
    refused "not NVMe (the q35 AHCI controller)" $? "0000:00:1f.2" "not an NVMe controller"
    "$ios" driver bind vfio 0000:00:1e.7 >"$out/bind.out" 2>"$out/bind.err"
    refused "unknown address" $? "0000:00:1e.7" "no PCI device has this address"
    ns1=$(ns_dev 1) ns2=$(ns_dev 2)
    mkdir -p "$out/mnt"
    if mkfs.ext4 -q -F "$ns1" >"$out/mkfs.log" 2>&1 && mount -t ext4 "$ns1" "$out/mnt"; then
        bind vfio
        refused "mounted namespace" $? "$ns1 is mounted on $out/mnt" "nothing was changed"
        umount "$out/mnt"
    else
        bad "mounted namespace: cannot make and mount ext4 on $ns1: $(cat "$out/mkfs.log")"
    fi
    if mkswap "$ns1" >"$out/swap.log" 2>&1 && swapon "$ns1" 2>>"$out/swap.log"; then
        bind vfio
        refused "namespace in use as swap" $? "$ns1 is in use as swap"
        swapoff "$ns1"
    else
        bad "swap: cannot mkswap/swapon $ns1: $(cat "$out/swap.log")"
    fi
    sectors=$(blockdev --getsz "$ns2")
    if dmsetup create ioswitch-lin --table "0 $sectors linear $ns2 0" 2>"$out/dm.log" && dmsetup mknodes; then
        bind vfio
        refused "namespace held by device-mapper" $? "is held by device-mapper device ioswitch-lin"
        dmsetup remove ioswitch-lin
    else
        bad "held: cannot create a dm linear device on $ns2: $(cat "$out/dm.log")"
    fi
    refused_while_open vfio "$ns2" namespace
    ng=/dev/ng${ns2#/dev/nvme}
    refused_while_open uio "$ng" "generic char device"
    set -e

    echo "==== nvme -> vfio-pci -> nvme"
    # Data written through the kernel before the move reads back after it.
    head -c 1048576 /dev/urandom >"$out/pattern"
    dd if="$out/pattern" of="$ns2" bs=1M count=1 oflag=direct status=none
    set +e
    bind vfio
    rc=$?
    set -e
    if ((rc == 0)) && grep -q "nvme -> vfio-pci" "$out/bind.out" && [[ $(driver_of) == vfio-pci ]] &&
        [[ -c /dev/vfio/$group ]] && (($(nvme1_namespaces) == 0)) && [[ -b /dev/nvme0n1 ]]; then
        ok "bind vfio: $(cat "$out/bind.out") — /dev/vfio/$group, namespaces gone, nvme0 stays"
    else
        bad "bind vfio: status $rc, driver $(driver_of), $(nvme1_namespaces) namespaces: $(cat "$out/bind.out" "$out/bind.err")"
    fi
    if bind vfio && grep -q "already" "$out/bind.out"; then
        ok "bind vfio again: $(cat "$out/bind.out")"
    else
        bad "bind vfio again: $(cat "$out/bind.out" "$out/bind.err")"
    fi
    "$ios" enum --output json >"$out/enum.json"
    if [[ $(jq -r ".pci[] | select(.addr == \"$PCI\") | .driver" "$out/enum.json") == vfio-pci ]]; then
        ok "enum: $PCI is on vfio-pci"
    else
        bad "enum: $PCI is not shown on vfio-pci"
    fi
    # A program holding the vfio group: vfio-pci's unbind would wait for it, unkillably.
    stay=vfio-pci
    refused_while_open nvme "/dev/vfio/$group" "vfio group"
    stay=nvme

    # ==================================================================== VFIO DATA PATH
    # Extra user-space driver tests run here, while the controller is on vfio-pci: every
    # executable in IOSWITCH_VFIO_TESTS. The driver's own suite (crates/ioswitch/tests/vfio.rs,
    # nvme-cli comparisons, data across rebinds) is the stage tests/vm/vfio-driver-tests.sh;
    # the conformance matrix has no vfio rows yet, so it is not run here. Only a build with
    # an interface named vfio can drive the device: without one nothing runs, and the
    # summary says so.
    if "$ios" interfaces --output json | jq -e 'any(.[]; .name == "vfio")' >/dev/null; then
        for t in ${IOSWITCH_VFIO_TESTS:-}; do
            echo "==== vfio data path: $t"
            set +e
            IOSWITCH_VFIO_PCI=$PCI "$t"
            rc=$?
            set -e
            if ((rc == 0)); then ok "vfio test $t"; else bad "vfio test $t: exit status $rc"; fi
        done
        vfio_note="ran"
    else
        vfio_note="NOT RUN: this build has no interface named vfio (ioswitch interfaces)"
        echo "==== vfio data path: $vfio_note"
    fi
    # ================================================================ END VFIO DATA PATH

    back_to_nvme vfio-pci
    ns2=$(ns_dev 2)
    if cmp -s "$out/pattern" <(dd if="$ns2" bs=1M count=1 iflag=direct status=none); then
        ok "data written before the move reads back through $ns2"
    else
        bad "data written before the move differs on $ns2"
    fi

    echo "==== nvme -> uio_pci_generic -> nvme"
    set +e
    bind uio
    rc=$?
    set -e
    uio=$(ls "/sys/bus/pci/devices/$PCI/uio" 2>/dev/null | head -n 1)
    if ((rc == 0)) && [[ $(driver_of) == uio_pci_generic && -n $uio && -c /dev/$uio ]] && (($(nvme1_namespaces) == 0)); then
        ok "bind uio: $(cat "$out/bind.out") — /dev/$uio"
    else
        bad "bind uio: status $rc, driver $(driver_of), uio '$uio': $(cat "$out/bind.out" "$out/bind.err")"
    fi
    stay=uio_pci_generic
    refused_while_open nvme "/dev/$uio" "uio device"
    stay=nvme
    back_to_nvme uio_pci_generic

    echo
    echo "==== summary (guest kernel $(uname -r))"
    echo "vfio data path: $vfio_note"
    echo "${pass} passed, ${#fails[@]} failed"
    for f in "${fails[@]}"; do echo "  FAILED: $f"; done
    ((${#fails[@]} == 0))
    exit
fi

# ---------------------------------------------------------------- on this machine
cd "$root"
echo "==== building the CLI and the test binaries"
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"
ios=$(cargo_exe ioswitch build -p ioswitch-cli) || exit 2
echo "ioswitch:    $ios"
"$here/setup.sh" --quick >/dev/null
echo "==== running in the IOMMU guest (tests/vm/run.sh --iommu)"
rc=0
"$here/run.sh" --iommu --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- bash "$here/vfio-tests.sh" --guest "$ios" || rc=$?
echo "==== running in the default guest (no IOMMU, no hugepages)"
rc2=0
"$here/run.sh" --timeout 300 -- bash "$here/vfio-tests.sh" --guest-no-iommu "$ios" || rc2=$?
echo "==== vfio-tests: IOMMU guest exit status $rc, default guest exit status $rc2"
((rc == 0 && rc2 == 0))
