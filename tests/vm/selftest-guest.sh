#!/bin/bash
# Runs INSIDE the guest (tests/vm/selftest.sh starts it through run.sh).
# Prints one line per check: "CHECK PASS|FAIL NAME: detail".  Also writes
# a marker to stderr, 200000 numbered lines to stdout, a file into the
# writable share $SELFTEST_RW, and exits 42: the host checks all of that.
set -u

t_last=$EPOCHREALTIME
check() { # name status detail   (the time since the previous check is appended)
    local dt
    dt=$(awk -v a="$t_last" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}')
    t_last=$EPOCHREALTIME
    if [[ $2 == 0 ]]; then
        echo "CHECK PASS $1: $3 [${dt} s]"
    else
        echo "CHECK FAIL $1: $3 [${dt} s]"
    fi
}

# nsid -> block device name (nvme0nX does not follow the nsid on every kernel).
declare -A dev
for b in /sys/block/nvme*n*; do
    [[ -r $b/nsid ]] || continue
    dev[$(cat "$b/nsid")]=${b##*/}
done
attr() { cat "/sys/block/${dev[$1]}/$2" 2>/dev/null || echo "?"; }

ids=$(printf '%s\n' "${!dev[@]}" | sort -n | tr '\n' ' ')
[[ $ids == "1 2 3 " ]]
check namespaces $? "nsids present: ${ids:-none} ($(for n in 1 2 3; do echo -n "$n=${dev[$n]:-?} "; done))"

lbs1=$(attr 1 queue/logical_block_size)
[[ $lbs1 == 512 ]]
check lba-512 $? "nsid 1 logical_block_size=$lbs1"

lbs2=$(attr 2 queue/logical_block_size)
pbs2=$(attr 2 queue/physical_block_size)
[[ $lbs2 == 4096 && $pbs2 == 4096 ]]
check lba-4096 $? "nsid 2 logical/physical_block_size=$lbs2/$pbs2"

zoned=$(attr 3 queue/zoned)
chunk=$(attr 3 queue/chunk_sectors)
nzones=$(attr 3 queue/nr_zones)
[[ $zoned == host-managed && $chunk == 8192 && $nzones == 32 ]]
check zoned $? "nsid 3 zoned=$zoned chunk_sectors=$chunk nr_zones=$nzones (want host-managed 8192 32)"

# Zone 0: capacity 3 MiB (6144 sectors); a write at the write pointer works,
# one past it is refused.
z=/dev/${dev[3]:-none}
rep=$(blkzone report -c 1 "$z" 2>&1)
cap_ok=1
[[ $rep == *"cap 0x001800"* ]] && cap_ok=0
dd if=/dev/zero of="$z" bs=4096 count=1 oflag=direct status=none 2>/dev/null && w1=0 || w1=1
dd if=/dev/zero of="$z" bs=4096 count=1 seek=100 oflag=direct status=none 2>/dev/null && w2=0 || w2=1
wp=$(blkzone report -c 1 "$z" 2>/dev/null | sed -n 's/.*wptr 0x\([0-9a-f]*\).*/\1/p')
[[ $cap_ok == 0 && $w1 == 0 && $w2 == 1 && $wp == 000008 ]]
check zone-semantics $? "zone 0: '${rep//$'\n'/ }'; write at wp ok=$((1 - w1)), write past wp refused=$w2, wptr after=0x${wp:-?}"

if out=$(nvme list -o json 2>&1); then
    n=$(grep -c '"NameSpace"' <<<"$out")
    [[ $n == 3 ]]
    check nvme-list-json $? "nvme list -o json lists $n namespaces"
else
    check nvme-list-json 1 "nvme list -o json failed: ${out:0:200}"
fi

[[ -c /dev/ng0n1 ]]
check ng-chardev $? "/dev/ng0n1: $(ls -l /dev/ng0n1 2>&1)"

polls=$(for n in 1 2 3; do echo -n "$(attr "$n" queue/io_poll)"; done)
[[ $polls == 111 ]]
check io-poll $? "queue/io_poll of nsid 1,2,3 = $polls"

# A real polled (IOPOLL) read and a verified write, through io_uring.
d1=/dev/${dev[1]:-none}
fout=$(fio --name=poll --filename="$d1" --ioengine=io_uring --hipri=1 --direct=1 --rw=randread \
    --bs=4k --size=16M --io_size=2M --iodepth=4 --output-format=terse 2>&1)
rc=$?
ios=$(awk -F';' '/^3;/ {print $6; exit}' <<<"$fout")
[[ $rc == 0 && ${ios:-0} -gt 0 ]]
check polled-io $? "fio io_uring hipri randread: rc=$rc, read ${ios:-?} KiB"

fout=$(fio --name=verify --filename="$d1" --ioengine=io_uring --direct=1 --rw=write --bs=64k \
    --size=8M --verify=crc32c --do_verify=1 --output-format=terse 2>&1)
rc=$?
check verified-write $rc "fio io_uring write+verify crc32c 8 MiB: rc=$rc $([[ $rc != 0 ]] && echo "${fout:0:300}")"

[[ $PWD == "${SELFTEST_CWD:-unset}" ]]
check cwd $? "guest cwd $PWD, host cwd ${SELFTEST_CWD:-unset}"

[[ ${SELFTEST_TOKEN:-} == token-with-\ space-\'quote\'-\$dollar ]]
check environment $? "SELFTEST_TOKEN=${SELFTEST_TOKEN:-unset}"

touch /ioswitch-vm-should-fail 2>/dev/null && ro=1 || ro=0
echo x >/tmp/selftest-tmp && tmp_ok=0 || tmp_ok=1
[[ $ro == 0 && $tmp_ok == 0 ]]
check root-ro-tmp-rw $? "writing / refused: $((1 - ro)), /tmp writable: $((1 - tmp_ok))"

rc=0
for d in "${SELFTEST_RW:-/nonexistent}" "${SELFTEST_RW2:-/nonexistent}"; do
    printf 'written in the guest\n' 2>/dev/null >"$d/from-guest" || rc=1
done
check rw-share-write $rc "wrote from-guest into ${SELFTEST_RW:-unset} and ${SELFTEST_RW2:-unset}"

echo "SELFTEST-STDERR-MARK" >&2
t0=$EPOCHREALTIME
seq 1 200000
echo "seq 1 200000 to stdout took $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}') s" >&2
exit 42
