#!/usr/bin/env bash
# tests/vm/nvme-tests.sh — the NVMe tests of ioswitch, for real, in one QEMU guest boot:
#
#   1. builds the ioswitch test binaries here (cargo test -p ioswitch --no-run) and finds
#      the executables in cargo's JSON messages (test_bin, driver-lib.sh);
#   2. boots the guest of tests/vm (run.sh) and runs in it:
#      - a zoned null_blk device (/dev/nullb0: 4 MiB zones, 3 MiB capacity), so the
#        block-layer zone code is also tested on a device that is not NVMe;
#      - the NVMe test binary (crates/ioswitch/tests/nvme.rs): nvme ioctl passthrough,
#        io_uring_cmd (plain, vectored, iopoll, sqpoll), identify geometry, NVMe status
#        decoding, zones through passthrough and through the block layer, device-reported
#        errors in a batch (zone errors, bad opcode, LBA out of range) per interface;
#      - the conformance suite (crates/ioswitch/tests/conformance/): its file and loop
#        rows on an ext4 file system made in the guest (a loop device over an image in
#        /tmp), its NVMe rows on the guest's namespaces (block, char and zoned);
#      - the mounted-device write guard (crates/ioswitch/tests/guard.rs, its ignored NVMe
#        test included): loop devices with a mounted ext4, a partition, swap, a
#        device-mapper device on top; namespace 1 mounted through /dev/nvme0n1 and
#        written through /dev/ng0n1 (last: it puts a file system on namespace 1);
#   3. prints a summary; exits non-zero when anything failed.
#
# Usage: tests/vm/nvme-tests.sh [-- EXTRA ARGS FOR THE NVME TEST BINARY]
# Environment: IOSWITCH_VM_TIMEOUT (seconds for the whole guest run, default 600;
# a whole run takes about 75 s, most of it the conformance suite).
set -euo pipefail
# (The argument check first, without dirname: it needs no PATH.)
vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
# shellcheck source=scripts/args.sh
. "$vm/../../scripts/args.sh"
stage_arguments "$0" 1 "$@"

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)

if [[ ${1:-} == --guest ]]; then
    # ------------------------------------------------------------ inside the guest
    nvme_exe=$2 conf_exe=$3 guard_exe=$4
    shift 4
    [[ ${1:-} == -- ]] && shift
    out=$(mktemp -d)
    if modprobe -d "${IOSWITCH_VM_MODROOT:-/}" null_blk nr_devices=1 zoned=1 zone_size=4 zone_capacity=3 \
        gb=1 memory_backed=1 2>"$out/nullb.err"; then
        echo "guest: zoned null_blk loaded: /dev/nullb0 ($(cat /sys/block/nullb0/queue/zoned), $(cat /sys/block/nullb0/queue/nr_zones) zones)"
    else
        echo "guest: no zoned null_blk (the non-NVMe zone test will fail): $(cat "$out/nullb.err")"
    fi
    echo "==== NVMe tests: $nvme_exe"
    set +e
    "$nvme_exe" --include-ignored --test-threads=2 "$@" 2>&1 | tee "$out/nvme.log"
    nvme_rc=${PIPESTATUS[0]}
    # The conformance suite's file and loop rows need a directory on a disk file system
    # (the guest's root is read-only, /tmp is tmpfs): ext4 on a loop device over a
    # sparse image in /tmp. Without it those rows skip, saying why.
    conf_tmp=/tmp
    disk=/run/ioswitch-disk
    if modprobe -d "${IOSWITCH_VM_MODROOT:-/}" loop 2>"$out/disk.err" &&
        modprobe -d "${IOSWITCH_VM_MODROOT:-/}" ext4 2>>"$out/disk.err" &&
        truncate -s 64M "$out/disk.img" 2>>"$out/disk.err" &&
        mkfs.ext4 -q -F "$out/disk.img" >>"$out/disk.err" 2>&1 &&
        mkdir -p "$disk" && dev=$(losetup --find --show "$out/disk.img" 2>>"$out/disk.err") &&
        mount -t ext4 "$dev" "$disk" 2>>"$out/disk.err" && mkdir -p "$disk/tmp"; then
        conf_tmp=$disk/tmp
        echo "guest: ext4 on $dev mounted on $disk: the conformance suite's file and loop rows use $conf_tmp"
    else
        echo "guest: no disk file system for the file and loop rows (they will skip): $(cat "$out/disk.err")"
    fi
    echo "==== conformance suite: $conf_exe"
    TMPDIR=$conf_tmp "$conf_exe" 2>&1 | tee "$out/conf.log"
    conf_rc=${PIPESTATUS[0]}
    echo "==== write guard: $guard_exe"
    if ! modprobe -d "${IOSWITCH_VM_MODROOT:-/}" dm_mod 2>"$out/dm.err"; then
        echo "guest: cannot load dm_mod (the device-mapper case will fail): $(cat "$out/dm.err")"
    fi
    "$guard_exe" --include-ignored --test-threads=1 2>&1 | tee "$out/guard.log"
    guard_rc=${PIPESTATUS[0]}
    set -e
    echo
    echo "==== summary (guest kernel $(uname -r))"
    # In the guest nothing may go untested: every test of a libtest binary ran and passed
    # (its count from --list, ignored ones included), and the conformance suite has its
    # NVMe rows for all $NS_EXPECT namespaces and no skipped case.
    complete() { # exe log rc -> prints a problem, or nothing
        local listed line
        listed=$("$1" --list --include-ignored 2>/dev/null | grep -c ': test$')
        line=$(grep -E '^test result:' "$2" | tail -n 1)
        if [[ -z $line ]]; then
            echo "no libtest summary (exit $3)"
        elif [[ ! $line =~ ok\.\ ${listed}\ passed\;\ 0\ failed\;\ 0\ ignored ]]; then
            echo "$listed tests listed, but: $line"
        fi
    }
    NS_EXPECT=3
    verdict() { (($1 == 0)) && [[ -z $2 ]] && echo PASS || echo FAIL; }
    nvme_bad=$(complete "$nvme_exe" "$out/nvme.log" "$nvme_rc")
    guard_bad=$(complete "$guard_exe" "$out/guard.log" "$guard_rc")
    conf_line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$out/conf.log" | tail -n 1)
    conf_ns=$(grep -c '^NVMe: nvme[0-9]* nsid ' "$out/conf.log" || true)
    conf_bad=
    if [[ ! $conf_line =~ ,\ 0\ skipped$ ]]; then
        conf_bad="cases were skipped or no summary line: ${conf_line:-none}"
    elif ((conf_ns != NS_EXPECT)); then
        conf_bad="NVMe rows for $conf_ns namespaces, not $NS_EXPECT"
    fi
    printf '%-5s nvme.rs:        %s\n' "$(verdict "$nvme_rc" "$nvme_bad")" \
        "$(grep -E '^test result:' "$out/nvme.log" | tail -n 1)${nvme_bad:+ — $nvme_bad}"
    grep -E '^test .* FAILED$' "$out/nvme.log" | sed 's/^/      /' || true
    printf '%-5s conformance/:   %s\n' "$(verdict "$conf_rc" "$conf_bad")" "${conf_line}${conf_bad:+ — $conf_bad}"
    printf '%-5s guard.rs:       %s\n' "$(verdict "$guard_rc" "$guard_bad")" \
        "$(grep -E '^test result:' "$out/guard.log" | tail -n 1)${guard_bad:+ — $guard_bad}"
    grep -E '^test .* FAILED$' "$out/guard.log" | sed 's/^/      /' || true
    if ((nvme_rc != 0 || conf_rc != 0 || guard_rc != 0)) || [[ -n $nvme_bad$conf_bad$guard_bad ]]; then exit 1; fi
    exit 0
fi

# ---------------------------------------------------------------- on this machine
cd "$root"
echo "==== building the test binaries (cargo test -p ioswitch --no-run)"
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"
nvme_exe=$(test_bin nvme) || exit 2
conf_exe=$(test_bin conformance) || exit 2
guard_exe=$(test_bin guard) || exit 2
echo "nvme:        $nvme_exe"
echo "conformance: $conf_exe"
echo "guard:       $guard_exe"
"$here/setup.sh" --quick >/dev/null
args=()
[[ ${1:-} == -- ]] && { shift; args=(-- "$@"); }
echo "==== running in the guest (tests/vm/run.sh)"
exec "$here/run.sh" --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- \
    bash "$here/nvme-tests.sh" --guest "$nvme_exe" "$conf_exe" "$guard_exe" "${args[@]}"
