#!/bin/bash
# fio's zonemode=zbd through the ioswitch engine on the guest's zoned namespace (ZNS,
# host-managed, 4 MiB zones of 3 MiB capacity): as the NVMe char device (/dev/ngXnY,
# async=io_uring_cmd) and as the block device (/dev/nvmeXnY, async=io_uring, direct=1).
# For each: a sequential write + crc32c verify job over 6 zones (fio takes the zone
# model, the zone report and the zone limits from the engine's hooks), then the same job
# again, which finds the zones full and must reset their write pointers through the
# engine (fio counts "zone resets") before its writes and verification can pass.
# Then `ioswitch bench` itself with zonemode=zbd on the block device: the write + verify
# job twice (every zone that holds data reset first, as fio's zbd_file_reset, and no
# other; the zones' capacity written and verified), and random
# writes with max_open_zones=2, the same three under io_submit_mode=offload, then reads
# below the write pointers (inline and offload) and, with read_beyond_wp=1, past them;
# several writes in flight (libaio and io_uring at iodepth=8 under mq-deadline; refused
# under the none scheduler on Linux before 6.10, and through the char device);
# zbd over two null_blk devices; numjobs=4 writers sharing one null_blk device's zones
# (fio and ours, psync and libaio at iodepth=8), with the device enforcing max_active=4;
# zone_reset_threshold/zone_reset_frequency against fio's.
# One boot; one line per case, then `N passed, N failed`.
#
#   tests/vm/fio-zbd-tests.sh [--engine PATH]   (default: fio/build.sh builds it into target/ioswitch-fio-zbd)
#
# Exit status: 0 all passed, 1 something failed, 2 could not run; 124/125 from run.sh.
set -uo pipefail
if [ "${IOSWITCH_VM:-}" != 1 ]; then
    # (The argument check first, without dirname: it needs no PATH.)
    vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
    # shellcheck source=scripts/args.sh
    . "$vm/../../scripts/args.sh"
    if [ "${1:-}" = --engine ]; then
        [ $# -eq 2 ] || { echo "$0: --engine takes one PATH (got: $*); $0 --help says what it does" >&2; exit 2; }
    else
        no_arguments "$0" "$@"
    fi
fi
cd "$(dirname "$0")/../.." || exit 2
root=$PWD

if [ "${IOSWITCH_VM:-}" != 1 ]; then
    engine=""
    if [ "${1:-}" = "--engine" ]; then
        engine=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
    else
        # Its own build directory: the host's fio engine stage may build target/ioswitch-fio
        # at the same time (scripts/test runs the two side by side).
        engine=$(fio/build.sh --out target/ioswitch-fio-zbd | tail -1) || exit 2
    fi
    [ -f "$engine" ] || { echo "fio-zbd-tests: no engine at $engine" >&2; exit 2; }
    cargo build -q -p ioswitch-cli || exit 2   # `ioswitch bench` zonemode=zbd below
    exec tests/vm/run.sh --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- "$0" --engine "$engine"
fi

# In the guest.
engine=$2
TALLY_LOG=/tmp/zbd.log
TALLY_TAIL=25
# shellcheck source=scripts/tally.sh
. scripts/tally.sh

zoned=""
for q in /sys/block/nvme*n*/queue/zoned; do
    [ "$(cat "$q")" = host-managed ] && zoned=$(basename "$(dirname "$(dirname "$q")")")
done
if [ -z "$zoned" ]; then
    echo "FAIL  no host-managed zoned namespace in the guest (/sys/block/nvme*n*/queue/zoned)"
    echo "0 passed, 1 failed"
    exit 1
fi
char=/dev/${zoned/nvme/ng}
echo "zoned namespace: /dev/$zoned and $char ($(cat /sys/block/"$zoned"/queue/chunk_sectors) sectors per zone)"
cd /tmp || exit 2

# One write + verify job over 6 zones; checks fio's error, the bytes written and
# verified (6 zones x 3 MiB capacity), and returns the zone resets fio counted.
zbd_job() {
    local name=$1 dev=$2 want_resets=$3
    shift 3
    fio --name=zbd --filename="$dev" --ioengine="external:$engine" --thread=1 --zonemode=zbd \
        --rw=write --bs=64k --offset=0 --size=24m --iodepth=4 --verify=crc32c --do_verify=1 \
        "$@" >/tmp/zbd.log 2>&1
    local rc=$?
    python3 - "$want_resets" >>/tmp/zbd.log 2>&1 <<'PY'
import re, sys
out = open("/tmp/zbd.log").read()
err = re.search(r"err= *(\d+)", out)
resets = [int(n) for n in re.findall(r"(\d+) zone resets", out)]
io = dict(re.findall(r"^ *(READ|WRITE): .*?io=([\d.]+\w+)", out, re.M))
want = sys.argv[1]
print("err", err and err.group(1), "zone resets", resets, "io", io)
ok = (err is not None and err.group(1) == "0" and io.get("WRITE") == "18.0MiB" and io.get("READ") == "18.0MiB"
      and "verify:" not in out
      and ((want == "none" and sum(resets) == 0) or (want == "some" and sum(resets) >= 6)))
sys.exit(0 if ok else 1)
PY
    local checked=$?
    # (Was `[ $rc -eq 0 ] && [ $? -eq 0 ]`: there `$?` is the first test's status, so the
    # check above was never looked at.)
    [ $rc -eq 0 ] && [ $checked -eq 0 ]
    result $? "$name"
}

zbd_job "$char async=io_uring_cmd: zonemode=zbd write + verify on empty zones" "$char" none \
    --ioswitch_async=io_uring_cmd
zbd_job "$char async=io_uring_cmd: again on the now full zones (write pointers reset)" "$char" some \
    --ioswitch_async=io_uring_cmd
zbd_job "/dev/$zoned async=io_uring direct=1: zonemode=zbd write + verify (zones reset first)" "/dev/$zoned" some \
    --ioswitch_async=io_uring --direct=1

# The same with `ioswitch bench` (psync on the block device, direct=1): a sequential write
# + verify over 6 zones resets each zone that holds data before writing (fio resets no
# empty zone) and moves their capacity (6 x 3 MiB); random writes keep max_open_zones=2
# zones open and verify every write (a writer that verifies opens no full zone, as
# fio's zbd_open_zone).
bench_zbd() {
    local name=$1 want=$2
    shift 2
    # The zones holding data before the job: the ones a verifying job resets.
    local held
    held=$(blkzone report --count 6 "/dev/$zoned" | grep -vc 'zcond: *1(')
    "$root/target/debug/ioswitch" bench --no-progress --output-format=json --name=zbd --filename="/dev/$zoned" \
        --zonemode=zbd --bs=64k --offset=0 --size=24m --direct=1 --verify=crc32c "$@" >/tmp/zbd.log 2>&1
    local rc=$?
    python3 - "$want" "$held" >>/tmp/zbd.log 2>&1 <<'PY'
import json, sys
text = open("/tmp/zbd.log").read()
job = json.loads(text[text.index("{"):])["jobs"][0]
io = job["ioswitch"]
got = dict(error=job["error"], written=job["write"]["io_bytes"], verified=io["verified_blocks"], resets=io["zone_resets"])
held = int(sys.argv[2])
print(got, "zones holding data before:", held)
depth8 = job["iodepth_level"].get("8", 0)
print("iodepth_level", job["iodepth_level"])
if sys.argv[1] == "seq":
    ok = got == dict(error=0, written=18 << 20, verified=288, resets=held)
elif sys.argv[1] == "seq-qd8":
    # Several writes in flight: the queue at 8 part of the time.
    ok = got == dict(error=0, written=18 << 20, verified=288, resets=held) and depth8 > 0
elif sys.argv[1] == "rand-qd8":
    ok = got == dict(error=0, written=100 * 65536, verified=100, resets=held) and depth8 > 0
else:
    # With verify, no full zone is opened (fio's zbd_open_zone): only the zones holding
    # data before the job are reset, and every write is verified.
    ok = got == dict(error=0, written=100 * 65536, verified=100, resets=held)
sys.exit(0 if ok else 1)
PY
    local checked=$?
    tail -2 /tmp/zbd.log | sed 's/^/      /'
    [ $rc -eq 0 ] && [ $checked -eq 0 ]
    result $? "$name"
}
bench_zbd "ioswitch bench /dev/$zoned: zonemode=zbd write + verify (each zone reset, capacity written)" seq --rw=write
bench_zbd "ioswitch bench /dev/$zoned: again on the now full zones" seq --rw=write
bench_zbd "ioswitch bench /dev/$zoned: zonemode=zbd randwrite, max_open_zones=2, 100 writes + verify" rand \
    --rw=randwrite --max_open_zones=2 --number_ios=100 --zonesize=4m
# The same under io_submit_mode=offload (4 workers, psync and libaio): the job's thread
# keeps the write pointers and one I/O per zone in flight (fio's zone lock), so every
# zone is reset, written in order and verified as inline.
bench_zbd "ioswitch bench /dev/$zoned: offload psync iodepth=4, zonemode=zbd write + verify" seq --rw=write \
    --io_submit_mode=offload --iodepth=4
bench_zbd "ioswitch bench /dev/$zoned: offload libaio iodepth=4, zonemode=zbd write + verify" seq --rw=write \
    --io_submit_mode=offload --iodepth=4 --ioengine=libaio
bench_zbd "ioswitch bench /dev/$zoned: offload libaio iodepth=4, randwrite, max_open_zones=2, 100 writes + verify" rand \
    --rw=randwrite --max_open_zones=2 --number_ios=100 --zonesize=4m --io_submit_mode=offload --iodepth=4 --ioengine=libaio
# Several writes in flight (an async job at iodepth>1, fio's rule in zbd.c): a job queues
# writes to a zone it holds, each at the write pointer the one before moved, and the
# kernel keeps them in order: on Linux before 6.10 only under mq-deadline (zone write
# locking; fio's t/zbd tests set it), so another scheduler there is refused; NVMe
# passthrough (the char device) keeps no order and is refused at any depth above 1.
modprobe -d "$IOSWITCH_VM_MODROOT" mq-deadline 2>/dev/null
sched=/sys/block/$zoned/queue/scheduler
echo "scheduler of $zoned: $(cat "$sched"), Linux $(uname -r)"
kv=$(uname -r)
kmaj=${kv%%.*}
kmin=${kv#*.}
kmin=${kmin%%[!0-9]*}
if [ "$kmaj" -lt 6 ] || { [ "$kmaj" -eq 6 ] && [ "$kmin" -lt 10 ]; }; then
    echo none >"$sched"
    "$root/target/debug/ioswitch" bench --no-progress --name=zbd --filename="/dev/$zoned" --zonemode=zbd --rw=write \
        --bs=64k --offset=0 --size=24m --direct=1 --ioengine=libaio --iodepth=8 >/tmp/zbd.log 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "only under the mq-deadline scheduler" /tmp/zbd.log
    result $? "ioswitch bench /dev/$zoned: zonemode=zbd libaio iodepth=8 writes refused under the none scheduler (Linux $kv)"
fi
echo mq-deadline >"$sched"
grep -q '\[mq-deadline\]' "$sched"
result $? "/dev/$zoned: the mq-deadline scheduler is set ($(cat "$sched"))"
bench_zbd "ioswitch bench /dev/$zoned: libaio iodepth=8, zonemode=zbd write + verify (8 writes in flight)" seq-qd8 \
    --rw=write --ioengine=libaio --iodepth=8
bench_zbd "ioswitch bench /dev/$zoned: io_uring iodepth=8, zonemode=zbd write + verify (8 writes in flight)" seq-qd8 \
    --rw=write --ioengine=io_uring --iodepth=8
bench_zbd "ioswitch bench /dev/$zoned: libaio iodepth=8, randwrite, max_open_zones=2, 100 writes + verify" rand-qd8 \
    --rw=randwrite --max_open_zones=2 --number_ios=100 --zonesize=4m --ioengine=libaio --iodepth=8
"$root/target/debug/ioswitch" bench --no-progress --name=zbd --filename="$char" --zonemode=zbd --rw=write --bs=64k \
    --offset=0 --size=24m --ioengine=io_uring_cmd --iodepth=8 >/tmp/zbd.log 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "does not keep a zone's writes in order\|not a zoned block device" /tmp/zbd.log
result $? "ioswitch bench $char: zonemode=zbd io_uring_cmd iodepth=8 writes refused (passthrough keeps no order)"

# Reads after those random writes (zones partly written): by default they stop at each
# zone's write pointer (fio's zbd_adjust_block), so a sequential read moves exactly what
# blkzone reports written in the 6 zones; with read_beyond_wp=1 it moves their capacity.
bench_read() {
    local name=$1 beyond=$2
    shift 2
    "$root/target/debug/ioswitch" bench --no-progress --output-format=json --name=zbd --filename="/dev/$zoned" \
        --zonemode=zbd --bs=64k --offset=0 --size=24m --direct=1 --rw=read --read_beyond_wp="$beyond" "$@" \
        >/tmp/zbd.log 2>&1
    local rc=$?
    blkzone report --count 6 "/dev/$zoned" >/tmp/zbd-report.txt 2>>/tmp/zbd.log
    python3 - "$beyond" >>/tmp/zbd.log 2>&1 <<'PY'
import json, re, sys
text = open("/tmp/zbd.log").read()
job = json.loads(text[text.index("{"):])["jobs"][0]
written = 0
for line in open("/tmp/zbd-report.txt"):
    m = re.search(r"cap 0x([0-9a-f]+), wptr 0x([0-9a-f]+).*zcond:\s*(\d+)", line)
    if m:
        cap, wp, cond = int(m[1], 16), int(m[2], 16), int(m[3])
        written += (cap if cond == 14 else min(wp, cap)) * 512
want = 6 * 3 << 20 if sys.argv[1] == "1" else written
print(dict(error=job["error"], read=job["read"]["io_bytes"], want=want, written=written))
sys.exit(0 if job["error"] == 0 and job["read"]["io_bytes"] == want and 0 < written < want + 1 else 1)
PY
    local checked=$?
    [ $rc -eq 0 ] && [ $checked -eq 0 ]
    result $? "$name"
}
bench_read "ioswitch bench /dev/$zoned: zonemode=zbd read stops at the write pointers (blkzone's)" 0
bench_read "ioswitch bench /dev/$zoned: zonemode=zbd read_beyond_wp=1 reads the zones' capacity" 1
bench_read "ioswitch bench /dev/$zoned: offload libaio iodepth=4, zonemode=zbd read stops at the write pointers" 0 \
    --io_submit_mode=offload --iodepth=4 --ioengine=libaio
# A zonesize that is not the device's is refused, as fio refuses it.
"$root/target/debug/ioswitch" bench --no-progress --name=zbd --filename="/dev/$zoned" --zonemode=zbd --zonesize=8m \
    --rw=write --bs=64k --size=24m --direct=1 >/tmp/zbd.log 2>&1
grep -q "zonesize=8388608 is not the device's zone size of 4194304 bytes" /tmp/zbd.log
result $? "ioswitch bench /dev/$zoned: zonesize=8m (not the device's 4 MiB) refused"

# Several files: zonemode=zbd over two zoned null_blk devices (4 MiB zones of 3 MiB
# capacity, memory-backed), a sequential write + verify of 24 MiB of each (size=48m split
# over the two files, files served in turn). fio keeps each device's zones on its own
# (zbd.c zbd_init_files): it writes and verifies the zones' capacity of both, 2 x 18 MiB;
# `ioswitch bench` must move the same, with each file's zones reset before their writes.
if modprobe -d "$IOSWITCH_VM_MODROOT" null_blk nr_devices=2 zoned=1 zone_size=4 zone_capacity=3 gb=1 \
    memory_backed=1 bs=4096 && [ -b /dev/nullb1 ] && [ "$(cat /sys/block/nullb1/queue/zoned)" = host-managed ]; then
    two=/dev/nullb0:/dev/nullb1
    fio --name=zbd2 --filename=$two --ioengine=psync --direct=1 --zonemode=zbd --rw=write --bs=64k \
        --offset=0 --size=48m --verify=crc32c --output-format=json >/tmp/zbd2-fio.json 2>/tmp/zbd2-fio.err
    frc=$?
    for pass in 1 2; do
        "$root/target/debug/ioswitch" bench --no-progress --output-format=json --name=zbd2 --filename=$two \
            --zonemode=zbd --rw=write --bs=64k --offset=0 --size=48m --direct=1 --verify=crc32c \
            >/tmp/zbd.log 2>&1
        orc=$?
        python3 - "$frc" "$orc" >>/tmp/zbd.log 2>&1 <<'PY'
import json, sys
frc, orc = int(sys.argv[1]), int(sys.argv[2])
fio = json.load(open("/tmp/zbd2-fio.json"))["jobs"][0]
text = open("/tmp/zbd.log").read()
ours = json.loads(text[text.index("{"):])["jobs"][0]
f = dict(rc=frc, error=fio["error"], written=fio["write"]["io_bytes"], verified=fio["read"]["io_bytes"])
o = dict(rc=orc, error=ours["error"], written=ours["write"]["io_bytes"],
         verified=ours["ioswitch"]["verified_blocks"] * 65536, resets=ours["ioswitch"]["zone_resets"])
print("fio", f, "ours", o)
want = dict(rc=0, error=0, written=36 << 20, verified=36 << 20)
sys.exit(0 if f == want and {k: o[k] for k in want} == want and o["resets"] == 12 else 1)
PY
        result $? "ioswitch bench $two: zonemode=zbd over two files, write + verify as fio (pass $pass)"
    done
else
    echo "FAIL  null_blk with zoned=1 nr_devices=2 did not give two host-managed devices"
    failed=$((failed + 1))
fi

# Several jobs writing one zoned device (numjobs=4): fio shares one zone state between
# them (zbd.c zbd_init_zone_info), so must `ioswitch bench`. A null_blk device with
# zone_max_active=4 refuses (BLK_STS_ZONE_ACTIVE_RESOURCE) any write that would make a 5th
# zone active (open or closed), so max_open_zones=4 must hold over all the jobs together,
# and a write off a zone's write pointer fails: both show as write errors. From reset
# zones, 20 writes of 64k per job fill no zone: blkzone's write pointers then hold
# exactly the bytes the tool reports written; 150 per job fill zones and reset some.
# TOOL WRITES_PER_JOB JOBS exact|fill: checks /tmp/nj.json against the device's zones
# (exact: no zone filled, the write pointers hold every byte written).
check_numjobs() {
    blkzone report --count 24 /dev/nullb0 >/tmp/nj-report.txt 2>>/tmp/zbd.log
    python3 - "$@" >>/tmp/zbd.log 2>&1 <<'PY'
import json, re, sys
tool, per_job, njobs, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
queued = len(sys.argv) > 5 and sys.argv[5] == "qd8"
text = open("/tmp/nj.json").read()
jobs = json.loads(text[text.index("{"):])["jobs"]
written = sum(j["write"]["io_bytes"] for j in jobs)
errors = [j["error"] for j in jobs]
wps, partial, full = 0, 0, 0
for line in open("/tmp/nj-report.txt"):
    m = re.search(r"cap 0x([0-9a-f]+), wptr 0x([0-9a-f]+).*zcond:\s*(\d+)", line)
    if m:
        cap, wp, cond = int(m[1], 16), int(m[2], 16), int(m[3])
        wps += (cap if cond == 14 else wp) * 512
        full += cond == 14
        partial += cond in (2, 3, 4)
# Time with more than one I/O in flight, % (per job, as the JSON's iodepth_level).
deeper = [round(sum(v for k, v in j["iodepth_level"].items() if k != "1"), 1) for j in jobs]
print(tool, dict(jobs=len(jobs), errors=errors, written=written, wps=wps, partial=partial, full=full, depth_over_1=deeper))
ok = len(jobs) == njobs and errors == [0] * njobs and written == njobs * per_job * 65536 and partial <= 4 and wps % 65536 == 0
if queued:
    # Several writes in flight (iodepth=8): each job had more than one in flight at times.
    ok = ok and all(d > 0 for d in deeper)
if mode == "exact":
    ok = ok and wps == written and full == 0
else:
    ok = ok and full > 0 and wps <= written
sys.exit(0 if ok else 1)
PY
    local rc=$?
    tail -1 /tmp/zbd.log | sed 's/^/      /'
    return $rc
}
rmmod null_blk 2>/dev/null
if modprobe -d "$IOSWITCH_VM_MODROOT" null_blk nr_devices=1 zoned=1 zone_size=4 zone_capacity=3 gb=1 \
    memory_backed=1 bs=4096 zone_max_open=4 zone_max_active=4 && [ "$(cat /sys/block/nullb0/queue/zoned)" = host-managed ]; then
    echo "null_blk: max_open_zones $(cat /sys/block/nullb0/queue/max_open_zones), max_active_zones $(cat /sys/block/nullb0/queue/max_active_zones)"
    # psync, then libaio at iodepth=8 (several writes in flight per job, as fio's t/zbd
    # test 46: the zone state shared by 4 jobs each queueing writes; mq-deadline keeps
    # each zone's writes in order).
    echo mq-deadline >/sys/block/nullb0/queue/scheduler
    for engine in psync libaio; do
    qd=""
    [ $engine = libaio ] && qd="--iodepth=8"
    for run in 20:exact 150:fill; do
        per_job=${run%:*}
        nj="--name=nj --filename=/dev/nullb0 --direct=1 --zonemode=zbd --rw=randwrite --bs=64k --offset=0 --size=96m --numjobs=4 --max_open_zones=4 --number_ios=$per_job --output-format=json --ioengine=$engine $qd"
        blkzone reset /dev/nullb0
        # shellcheck disable=SC2086
        fio $nj >/tmp/nj.json 2>/tmp/zbd.log
        rc=$?
        check_numjobs fio "$per_job" 4 "${run#*:}" "qd${qd#--iodepth=}" && [ $rc -eq 0 ]
        result $? "fio /dev/nullb0: zonemode=zbd $engine $qd randwrite numjobs=4 max_open_zones=4, $per_job writes per job (max_active=4)"
        blkzone reset /dev/nullb0
        # shellcheck disable=SC2086
        "$root/target/debug/ioswitch" bench --no-progress $nj >/tmp/nj.json 2>/tmp/zbd.log
        rc=$?
        check_numjobs ioswitch "$per_job" 4 "${run#*:}" "qd${qd#--iodepth=}" && [ $rc -eq 0 ]
        result $? "ioswitch bench /dev/nullb0: zonemode=zbd $engine $qd randwrite numjobs=4 max_open_zones=4, $per_job writes per job (max_active=4)"
    done
    done
    # Two sections on the same device share its zones as clones do (fio: zbd_info per
    # file name): 2 x 40 writes, at most 4 zones open between them.
    printf '%s\n' '[global]' filename=/dev/nullb0 direct=1 zonemode=zbd rw=randwrite bs=64k offset=0 \
        size=96m max_open_zones=4 number_ios=40 '[a]' '[b]' >/tmp/nj2.fio
    blkzone reset /dev/nullb0
    fio --output-format=json --ioengine=psync /tmp/nj2.fio >/tmp/nj.json 2>/tmp/zbd.log
    rc=$?
    check_numjobs fio 40 2 exact && [ $rc -eq 0 ]
    result $? "fio /dev/nullb0: zonemode=zbd randwrite in two sections on one device, max_open_zones=4"
    blkzone reset /dev/nullb0
    "$root/target/debug/ioswitch" bench --no-progress --output-format=json /tmp/nj2.fio >/tmp/nj.json 2>/tmp/zbd.log
    rc=$?
    check_numjobs ioswitch 40 2 exact && [ $rc -eq 0 ]
    result $? "ioswitch bench /dev/nullb0: zonemode=zbd randwrite in two sections on one device, max_open_zones=4"
    # Sequential clones append at the write pointer of the zone they share: 4 × 48 writes
    # of 64k fill 4 zones exactly (their 3 MiB capacity), with no reset (the zones were
    # empty; fio resets no empty zone).
    blkzone reset /dev/nullb0
    "$root/target/debug/ioswitch" bench --no-progress --output-format=json --name=nj --filename=/dev/nullb0 \
        --direct=1 --zonemode=zbd --rw=write --bs=64k --offset=0 --size=96m --numjobs=4 --number_ios=48 \
        >/tmp/nj.json 2>/tmp/zbd.log
    rc=$?
    blkzone report --count 24 /dev/nullb0 >/tmp/nj-report.txt 2>>/tmp/zbd.log
    python3 - >>/tmp/zbd.log 2>&1 <<'PY'
import json, re, sys
text = open("/tmp/nj.json").read()
jobs = json.loads(text[text.index("{"):])["jobs"]
got = dict(errors=[j["error"] for j in jobs], written=sum(j["write"]["io_bytes"] for j in jobs),
           resets=sum(j["ioswitch"]["zone_resets"] for j in jobs))
conds = [int(m[1]) for m in re.finditer(r"zcond:\s*(\d+)", open("/tmp/nj-report.txt").read())]
got["full"] = conds.count(14)
got["empty"] = conds.count(1)
print(got)
sys.exit(0 if got == dict(errors=[0] * 4, written=12 << 20, resets=0, full=4, empty=20) else 1)
PY
    checked=$?
    tail -1 /tmp/zbd.log | sed 's/^/      /'
    [ $checked -eq 0 ] && [ $rc -eq 0 ]
    result $? "ioswitch bench /dev/nullb0: zonemode=zbd sequential write numjobs=4: 4 zones filled in turn, no reset"
    # fio's garbage-collection simulation: once half the region (4 zones of 16m) is below
    # the write pointers, every 4th write resets its zone first. Neither resets a zone it
    # finds empty: the same count, and the same zones written (the zones blkzone reports
    # not empty afterwards).
    gc_resets() {  # TOOL: "RESETS ZONES-WRITTEN" of the job
        local tool=$1 n
        blkzone reset /dev/nullb0
        local job=(--name=gc --filename=/dev/nullb0 --direct=1 --zonemode=zbd --rw=write --bs=64k --offset=0
            --size=16m --number_ios=200 --ioengine=psync --zone_reset_threshold=0.5 --zone_reset_frequency=0.25)
        if [ "$tool" = fio ]; then
            fio "${job[@]}" >/tmp/gc.txt 2>>/tmp/zbd.log || return 1
            n=$(grep -o '[0-9]* zone resets' /tmp/gc.txt | awk '{ n += $1 } END { print n + 0 }')
        else
            "$root/target/debug/ioswitch" bench --no-progress --output-format=json "${job[@]}" >/tmp/gc.json \
                2>>/tmp/zbd.log || return 1
            n=$(python3 -c 'import json, sys; t = open(sys.argv[1]).read(); print(sum(j["ioswitch"]["zone_resets"] for j in json.loads(t[t.index("{"):])["jobs"]))' /tmp/gc.json)
        fi
        echo "$n $(blkzone report --count 4 /dev/nullb0 | grep -vc 'zcond: *1(')"
    }
    fio_gc=$(gc_resets fio) && ios_gc=$(gc_resets ioswitch)
    rc=$?
    read -r fio_n fio_z <<<"${fio_gc:-x x}"
    read -r ios_n ios_z <<<"${ios_gc:-x x}"
    echo "      zone resets / zones written: fio $fio_n / $fio_z, ioswitch $ios_n / $ios_z"
    [ $rc -eq 0 ] && [ "$fio_n" -gt 0 ] && [ "$fio_z" = "$ios_z" ] && [ "$ios_n" -eq "$fio_n" ]
    result $? "fio and ioswitch bench /dev/nullb0: zone_reset_threshold=0.5 zone_reset_frequency=0.25 reset the same zones as often"
else
    echo "FAIL  null_blk with zoned=1 zone_max_active=4 did not give a host-managed device"
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
