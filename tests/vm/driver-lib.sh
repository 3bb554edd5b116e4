# tests/vm/driver-lib.sh — what the guest stages share; sourced on the host and in the guest.
# nvme-tests.sh, fault-tests.sh, pmem-tests.sh, power-cut.sh, vfio-tests.sh and the PCI
# driver stages (vfio-driver-tests.sh, uio-driver-tests.sh) find their executables with
# cargo_exe/test_bin; the driver stages share the guest checks below.
#
# cargo_exe NAME CARGO-ARGS...: runs `cargo CARGO-ARGS --message-format=json` (cargo's own
# messages still go to stderr) and prints the path of the executable cargo built for the
# target NAME; fails naming NAME and the command when cargo fails or reports none.
cargo_exe() {
    local name=$1 exe
    shift
    exe=$(cargo "$@" --message-format=json |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$name") &&
        [[ -n $exe ]] || {
        echo "${0##*/}: \`cargo $*\` built no executable named $name" >&2
        return 1
    }
    echo "$exe"
}

# test_bin NAME: builds the integration test NAME of the ioswitch crate (cargo test
# --no-run) and prints the path of its executable.
test_bin() {
    cargo_exe "$1" test -p ioswitch --test "$1" --no-run
}

# check NAME CMD...: runs CMD (in the guest), prints whether it passed and how long it
# took, and adds NAME to the caller's `fails` array when it failed.
check() {
    local name=$1
    shift
    echo "==== $name"
    local t0=${EPOCHREALTIME/./}
    if "$@"; then echo "---- ok: $name"; else echo "---- FAILED: $name"; fails+=("$name"); fi
    local ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
    printf -- '---- took %d.%03d s\n' $((ms / 1000)) $((ms % 1000))
}

# ---- The two driver stages (vfio-driver-tests.sh, uio-driver-tests.sh).

# driver_bins: on the host, in $root: builds the CLI and sets exe and conf to the vfio and
# conformance test binaries (test_bin), which the guest side is given.
driver_bins() {
    cd "$root"
    cargo build -p ioswitch-cli
    exe=$(test_bin vfio)
    conf=$(test_bin conformance)
}

# guest_start: in the guest, sets what the checks below use besides $addr, $dma and the
# namespaces (guest_controller): cli (the CLI built in $root), out (a new scratch
# directory) and fails (no failed check yet).
guest_start() {
    cli=$root/target/debug/ioswitch
    out=$(mktemp -d)
    fails=()
}

# The guest checks of the two driver stages. They use the caller's $cli (the CLI),
# $addr (the controller's PCI address), $out (a scratch directory), $ns1 (nsid 1's block
# device while the kernel owns the controller), `fails` (see check) and $dma (the
# driver's DMA mode as its --opts name it: uio, or empty for vfio's default).

# ns_name CTRL NSID: the block device of namespace NSID of controller CTRL (nvme1).
ns_name() {
    local b
    for b in /sys/block/"$1"n*; do
        if [[ $(cat "$b/nsid") == "$2" ]]; then basename "$b"; fi
    done
}

# guest_controller: sets ctrl (the controller at $addr), ns1 and ns2 (the block devices of
# its namespaces 1 and 2 while the kernel owns it) and says which they are.
guest_controller() {
    ctrl=$(basename "$(ls -d /sys/bus/pci/devices/$addr/nvme/nvme*)")
    ns1=$(ns_name "$ctrl" 1)
    ns2=$(ns_name "$ctrl" 2)
    echo "guest: $addr is $ctrl (nsid 1 = $ns1, nsid 2 = $ns2)"
}

# kernel_namespaces NS...: the block devices NS as the kernel sees them, for the
# conformance rows (which must not take them from the library they test): a word
# nsid:lba:bytes:zone_lbas:nr_zones:dlfeat each.
kernel_namespaces() {
    local n b lba zl nz dlfeat
    for n in "$@"; do
        b=/sys/block/$n
        lba=$(cat "$b/queue/logical_block_size")
        zl=0 nz=0
        if [[ $(cat "$b/queue/zoned") != none ]]; then
            zl=$(($(cat "$b/queue/chunk_sectors") * 512 / lba))
            nz=$(cat "$b/queue/nr_zones")
        fi
        # (awk, not python: python's start-up costs seconds in the TCG guest)
        dlfeat=$(nvme id-ns "/dev/$n" | awk '$1 == "dlfeat" { print $3 }')
        printf '%s ' "$(cat "$b/nsid"):$lba:$(($(cat "$b/size") * 512)):$zl:$nz:$dlfeat"
    done
}

# kernel_pattern: 64 KiB of random data ($out/kernel-pattern), written through the kernel
# at 64 KiB block 1000 of nsid 1.
kernel_pattern() {
    head -c $((64 << 10)) /dev/urandom >"$out/kernel-pattern"
    dd if="$out/kernel-pattern" of="/dev/$ns1" bs=64k seek=1000 oflag=direct status=none
}

# check_no_hugepages: with vm.nr_hugepages at 0 the open fails naming it (and the count
# is restored).
check_no_hugepages() {
    check "without hugepages the open fails naming vm.nr_hugepages" bash -c "
        n=\$(cat /proc/sys/vm/nr_hugepages)
        echo 0 >/proc/sys/vm/nr_hugepages
        '$cli' info $addr ${dma:+--opts dma=$dma} 2>'$out/nohuge.err'; rc=\$?
        echo \$n >/proc/sys/vm/nr_hugepages
        cat '$out/nohuge.err'
        [ \$rc != 0 ] && grep -q 'vm.nr_hugepages' '$out/nohuge.err' && [ \$(cat /proc/sys/vm/nr_hugepages) = \$n ]"
}

# check_driver_data: the kernel's pattern (kernel_pattern) reads back through the driver;
# a new one ($out/drv-pattern) is written through the driver at 64 KiB block 2000.
check_driver_data() {
    check "data the kernel wrote reads back through the driver" bash -c "
        '$cli' read $addr --opts nsid=1${dma:+,dma=$dma} --offset $((1000 * 65536)) --length 65536 --out '$out/drv-read' &&
        cmp '$out/kernel-pattern' '$out/drv-read'"
    head -c $((64 << 10)) /dev/urandom >"$out/drv-pattern"
    check "write through the driver" \
        "$cli" write "$addr" --opts "nsid=1${dma:+,dma=$dma}" --offset $((2000 * 65536)) --data "$out/drv-pattern"
}

# check_bench: an `ioswitch bench` write+verify job on the PCI address (fio's escaped
# colons): it reads back what it wrote, and the driver polls: no syscall per I/O.
check_bench() {
    check "ioswitch bench write+verify on the PCI address${dma:+ with dma=$dma}, 0 syscalls per I/O" bash -c "
        '$cli' bench --name=v --filename='${addr//:/\\:}' --offset=64m --size=8m --rw=write --bs=64k \
            --iodepth=4 --verify=crc32c --ioengine=ioswitch --ioswitch_opts=nsid=1${dma:+,dma=$dma} >'$out/bench.txt' 2>&1
        rc=\$?; cat '$out/bench.txt' | grep -E 'ioswitch +:|error'
        [ \$rc = 0 ] && grep -q 'interface=vfio, syscalls=0 (0.00 per I/O)' '$out/bench.txt' &&
            grep -q 'verified 128 blocks' '$out/bench.txt'"
}

# check_conformance CONF NAMESPACES: the conformance suite's PCI rows (binary CONF; the
# namespaces as kernel_namespaces gave them): nsid 1 has 17 columns, the zoned nsid 2 has
# 15; vfio runs every case on both, every other column is refused as expected, 0 skipped.
check_conformance() {
    check "conformance PCI rows${dma:+ with dma=$dma}: vfio runs, the other columns are refused, 0 skipped" bash -c "
        IOSWITCH_VFIO_PCI=$addr ${dma:+IOSWITCH_VFIO_DMA=$dma} IOSWITCH_VFIO_NS='$2' IOSWITCH_CONFORMANCE_ROWS=pci,pci-zoned \
            IOSWITCH_CONFORMANCE_VERBOSE=1 '$1' >'$out/conformance.txt' 2>&1; rc=\$?
        cat '$out/conformance.txt'
        cells=\$(grep -cE '^  $addr ns[12]( zoned)? ' '$out/conformance.txt')
        vfio=\$(grep -cE '^  $addr ns[12]( zoned)? +vfio +PASS ' '$out/conformance.txt')
        na=\$(grep -cE '^  $addr ns[12]( zoned)? +[^ ]+ +n/a ' '$out/conformance.txt')
        echo \"PCI cells: \$cells (vfio PASS: \$vfio, n/a: \$na); expected 32 (2 + 30)\"
        [ \$rc = 0 ] && [ \$cells = 32 ] && [ \$vfio = 2 ] && [ \$na = 30 ] &&
            grep -qE '^[0-9]+ passed, 0 failed, 0 skipped' '$out/conformance.txt'"
}

# check_back_to_nvme: binds the controller back to nvme; the driver's pattern
# (check_driver_data) reads back through the kernel.
check_back_to_nvme() {
    check "bind back to nvme" "$cli" driver bind nvme "$addr"
    check "data the driver wrote reads back through the kernel" bash -c "
        for i in \$(seq 100); do [ -b /dev/$ns1 ] && break; sleep 0.1; done
        dd if=/dev/$ns1 of='$out/kernel-read' bs=64k skip=2000 count=1 iflag=direct status=none &&
        cmp '$out/drv-pattern' '$out/kernel-read'"
}

# finish WHAT: prints the summary and exits, 1 when a check failed.
finish() {
    echo "==== summary ($(date +%T))"
    if ((${#fails[@]})); then
        printf 'FAILED: %s\n' "${fails[@]}"
        exit 1
    fi
    echo "all $1 driver checks passed"
    exit 0
}
