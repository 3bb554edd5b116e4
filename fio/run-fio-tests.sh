#!/usr/bin/env bash
# Tests of the fio external ioengine: builds it (fio/build.sh), runs fio write + verify
# (crc32c) jobs through it on a temporary file over several ioswitch interfaces, and
# checks that fio reports no error and moved every byte. Also checks that verification
# really reads the data back (nil moves none, so verify must fail there) and that
# mistakes are reported by name. Ends with "N passed, N failed"; exits non-zero on failure.
#
#   fio/run-fio-tests.sh [--engine PATH]     (PATH: an engine already built)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
engine=""
if [ "${1:-}" = "--engine" ]; then
    engine=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-fio-tests.XXXXXX")
# ro.img is made immutable by a test; the trap takes that back before removing it.
trap 'chattr -i "$tmp/ro.img" 2>/dev/null; rm -rf "$tmp"' EXIT

TALLY_LOG=$tmp/log
# shellcheck source=scripts/tally.sh
. "$here/../scripts/tally.sh"

if [ -z "$engine" ]; then
    if engine=$("$here/build.sh" 2>"$tmp/log" | tail -1) && [ -f "$engine" ]; then
        result 0 "fio/build.sh"
    else
        result 1 "fio/build.sh"
        echo "$passed passed, $failed failed"
        exit 1
    fi
fi

# fio writes verify state files (*-verify.state) into its working directory.
cd "$tmp" || exit 1

file=$tmp/data.img
where=(--filename="$file")
common=(--ioengine="external:$engine" --thread=1 --size=8m --bs=4k
    --verify=crc32c --do_verify=1 --output-format=json --output="$tmp/out.json")

# A job that must succeed, write every byte and read every byte back for verification.
verify_job() {
    local name=$1
    shift
    rm -rf "$file" "$tmp/out.json" "$tmp/files"/*
    if ! fio --name=verify "${where[@]}" "${common[@]}" "$@" >"$tmp/log" 2>&1; then
        result 1 "$name"
        return
    fi
    python3 - "$tmp/out.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
size = 8 << 20
ok = job["error"] == 0 and job["write"]["io_bytes"] == size and job["read"]["io_bytes"] == size
print("error", job["error"], "written", job["write"]["io_bytes"], "verified", job["read"]["io_bytes"])
sys.exit(0 if ok else 1)
PY
    result $? "$name"
}

# A trim job that must succeed and count every byte it trimmed.
trim_job() {
    local name=$1
    shift
    rm -f "$file" "$tmp/out.json"
    if ! fio --name=trim --filename="$file" --ioengine="external:$engine" --thread=1 --size=1m --bs=4k \
        --rw=randtrim --output-format=json --output="$tmp/out.json" "$@" >"$tmp/log" 2>&1; then
        result 1 "$name"
        return
    fi
    python3 - "$tmp/out.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
print("error", job["error"], "trimmed", job["trim"]["io_bytes"], "in", job["trim"]["total_ios"])
sys.exit(0 if job["error"] == 0 and job["trim"]["io_bytes"] == 1 << 20 else 1)
PY
    result $? "$name"
}

# A 4 KiB random read job whose statistics must show how the engine queued: every I/O
# has a clat; with slat=yes every I/O has a slat (async modes: the commit hook records
# it) and with slat=no none has (synchronous modes, as fio's psync); submit_bucket is
# the key of fio's "IO depths: submit" histogram that must hold 100 % of the submissions
# ("4": 1 to 4 commands per submission, "8": 5 to 8), and complete_bucket likewise.
stats_job() {
    local name=$1 slat=$2 submit_bucket=$3 complete_bucket=$4
    shift 4
    rm -f "$file" "$tmp/out.json"
    if ! fio --name=stats --filename="$file" --ioengine="external:$engine" --thread=1 --size=4m --bs=4k \
        --rw=randread --output-format=json --output="$tmp/out.json" "$@" >"$tmp/log" 2>&1; then
        result 1 "$name"
        return
    fi
    python3 - "$tmp/out.json" "$slat" "$submit_bucket" "$complete_bucket" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
slat, submit, complete = sys.argv[2] == "yes", sys.argv[3], sys.argv[4]
r = job["read"]
n = r["total_ios"]
print("error", job["error"], "ios", n, "slat", r["slat_ns"], "clat N", r["clat_ns"]["N"])
print("submit", job["iodepth_submit"], "complete", job["iodepth_complete"])
ok = job["error"] == 0 and n == 1024 and r["clat_ns"]["N"] == n
if slat:
    # Every I/O's slat, and the mean latency is slat + clat (both from one issue time).
    ok = ok and r["slat_ns"]["N"] == n and r["slat_ns"]["min"] > 0
    ok = ok and abs(r["lat_ns"]["mean"] - r["slat_ns"]["mean"] - r["clat_ns"]["mean"]) < 1
else:
    ok = ok and r["slat_ns"]["N"] == 0
ok = ok and job["iodepth_submit"][submit] == 100.0 and job["iodepth_complete"][complete] == 100.0
sys.exit(0 if ok else 1)
PY
    result $? "$name"
}

# Two nil jobs reported as one group: `a` at iodepth=1 with the options given (1024
# commands, each submitted and completed alone: 1024 entries in the "4" bucket of both
# "IO depths" histograms), `b` committing and reaping 8 at a time (128 entries in "8").
# The group's histograms must be 1024 : 128 in both, in the JSON and the text output:
# a completion counted twice (fio's td_io_queue() counts one for every ->queue() of an
# engine without a ->commit() hook, td_io_getevents() another) makes it 2048 : 128 in
# "complete", which the percentages of one job alone would not show. Also every I/O
# issued once, each with its clat; slat_n of them with a slat (2048, or 1024 where `a`
# runs as a synchronous engine).
depth_mix_job() {
    local name=$1 slat_n=$2
    shift 2
    rm -f "$file" "$tmp/out"
    if ! fio --group_reporting --ioengine="external:$engine" --thread=1 --size=4m --bs=4k --rw=randread \
        --filename="$file" --ioswitch_async=nil --output-format=json,normal --output="$tmp/out" \
        --name=a --iodepth=1 "$@" \
        --name=b --iodepth=8 --iodepth_batch_submit=8 --iodepth_batch_complete_min=8 >"$tmp/log" 2>&1; then
        result 1 "$name"
        return
    fi
    python3 - "$tmp/out" "$slat_n" >>"$tmp/log" 2>&1 <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
start = text.index("{")
out, end = json.JSONDecoder().raw_decode(text[start:])
normal = text[:start] + text[start + end:]
job = out["jobs"][0]
r = job["read"]
want = {"4": round(100 * 1024 / 1152, 6), "8": round(100 * 128 / 1152, 6)}
print("submit", job["iodepth_submit"], "complete", job["iodepth_complete"], "want", want)
ok = job["error"] == 0 and r["total_ios"] == 2048
ok = ok and r["slat_ns"]["N"] == int(sys.argv[2]) and r["clat_ns"]["N"] == 2048 and r["lat_ns"]["N"] == 2048
for hist in ("iodepth_submit", "iodepth_complete"):
    ok = ok and all(abs(job[hist][k] - v) < 1e-5 for k, v in want.items())
    ok = ok and sum(job[hist].values()) > 99.99
for line in ("submit", "complete"):
    m = re.search(r"^ +" + line + r" +: 0=0\.0%, 4=88\.9%, 8=11\.1%, 16=0\.0%", normal, re.M)
    print(line, "text", bool(m))
    ok = ok and m is not None
ok = ok and re.search(r"issued rwts: total=2048,0,0,0 ", normal) is not None
sys.exit(0 if ok else 1)
PY
    result $? "$name"
}

# A job that must fail with a message containing the given text.
fails_naming() {
    local name=$1 want=$2
    shift 2
    rm -f "$file"
    # Killed after 60 s with what it started: a job that should be refused may instead spin
    # (fio ignores TERM then).
    if bounded 60 fio --name=bad --ioengine="external:$engine" --filename="$file" --size=1m --bs=4k "$@" \
        >"$tmp/log" 2>&1 && ! grep -q "err=" "$tmp/log"; then
        result 1 "$name (succeeded)"
        return
    fi
    grep -qF -- "$want" "$tmp/log"
    result $? "$name"
}

# The harness's own limit: a fio whose job process (setsid, as fio's job processes call
# it) hangs is killed at the limit with that process, which `timeout -s KILL` leaves
# running. fio's exec_prerun runs in the job process; the sleep stands for the hang.
bounded_kills_fio_jobs() {
    local t0 took left
    rm -f "$file"
    t0=$(date +%s)
    bounded 3 fio --name=hang --filename="$file" --size=1m --exec_prerun="sleep 57" >"$tmp/log" 2>&1
    local rc=$?
    took=$(($(date +%s) - t0))
    sleep 0.5
    left=$(pgrep -fx "sleep 57" | tr '\n' ' ')
    echo "exit $rc after $took s; left running: ${left:-none}" >>"$tmp/log"
    [ "$rc" -eq 137 ] && [ "$took" -lt 10 ] && [ -z "$left" ]
    result $? "bounded: a fio whose job process hangs is killed at the limit, the job process too"
    [ -z "$left" ] || kill -KILL $left 2>/dev/null
}
bounded_kills_fio_jobs

for iface in io_uring libaio emu thrpool posix; do
    verify_job "async=$iface qd16 randwrite + verify" --ioswitch_async="$iface" --rw=randwrite --iodepth=16
done
verify_job "sync=psync (synchronous engine) write + verify" --ioswitch_sync=psync --rw=write
# The synchronous engine passes fio's own buffers (ioswitch_pass_raw), page-aligned by fio
# for direct I/O: with fio's direct=1, and with direct=1 given to ioswitch only.
verify_job "sync=psync direct=1 (synchronous engine, fio's buffers) randwrite + verify" --ioswitch_sync=psync \
    --direct=1 --rw=randwrite
verify_job "sync=psync ioswitch_opts=direct=1 (fio aligns its buffers) write + verify" --ioswitch_sync=psync \
    --ioswitch_opts=direct=1 --rw=write --bs=16k
verify_job "async=io_uring direct=1 qd8 + verify" --ioswitch_async=io_uring --direct=1 --rw=randwrite --iodepth=8
verify_job "async=io_uring qd1 + verify" --ioswitch_async=io_uring --rw=write --iodepth=1
# At qd1 on its default ring the engine's submission looks for the completion only while
# such looks find it (iosw_queue_push1): on a tmpfs file every read and write goes to an
# io-wq worker, so most submissions only commit and ->getevents() finds the completion.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    where=(--filename="/dev/shm/ioswitch-fio-tests.$$.img")
    verify_job "async=io_uring qd1 on a tmpfs file (submissions that do not look) + verify" \
        --ioswitch_async=io_uring --rw=randwrite --iodepth=1
    rm -f "/dev/shm/ioswitch-fio-tests.$$.img"
    where=(--filename="$file")
else
    echo "skip  async=io_uring qd1 on a tmpfs file: no writable /dev/shm"
fi
verify_job "async=io_uring qd1 inline + verify" --ioswitch_async=io_uring --ioswitch_inline=1 --rw=randwrite --iodepth=1
# fio applies fadvise_hint and write_hint to the file's descriptor after ->open_file():
# the engine lends it the library's (before, fio's fcntl went to fd -1 and failed the job).
verify_job "async=io_uring write_hint=short fadvise_hint=random (fio's hints reach the device's descriptor) + verify" \
    --ioswitch_async=io_uring --rw=randwrite --iodepth=4 --write_hint=short --fadvise_hint=random
verify_job "sync=psync write_hint=long (synchronous engine) + verify" --ioswitch_sync=psync --rw=write \
    --write_hint=long
# The engine's default rings for async=io_uring are single_issuer=1 (SINGLE_ISSUER |
# DEFER_TASKRUN); single_issuer=0 keeps the library's default ring, sqpoll=1 excludes it.
verify_job "async=io_uring qd16 single_issuer=0 + verify" --ioswitch_async=io_uring --ioswitch_opts=single_issuer=0 \
    --rw=randwrite --iodepth=16
verify_job "async=io_uring qd16 sqpoll=1 (no single_issuer default) + verify" --ioswitch_async=io_uring \
    --ioswitch_opts=sqpoll=1 --rw=randwrite --iodepth=16
# Which ring flags the job's io_uring_setup asked for (strace), with the default and with
# single_issuer=0: DEFER_TASKRUN where the kernel has it (Linux 6.1), never with
# single_issuer=0 nor with a spinning reap (reap_spin other than 0).
ring_flags_job() {
    local name=$1 want=$2
    shift 2
    rm -f "$file"
    if ! command -v strace >/dev/null; then
        echo "skip: $name: strace is not installed"
        return
    fi
    if ! strace -f -e trace=io_uring_setup -o "$tmp/strace" fio --name=flags "${where[@]}" \
        --ioengine="external:$engine" --thread=1 --size=1m --bs=4k --rw=randread --iodepth=4 \
        --ioswitch_async=io_uring "$@" >"$tmp/log" 2>&1; then
        result 1 "$name (the job failed)"
        return
    fi
    # The library's probes set up rings of 2 entries; the job's queue has 4. strace names
    # the flags it knows and prints the rest in hex (SINGLE_ISSUER 0x1000, DEFER_TASKRUN
    # 0x2000).
    python3 - "$tmp/strace" "$want" >>"$tmp/log" 2>&1 <<'PY'
import re, sys
names = {"IORING_SETUP_SINGLE_ISSUER": 0x1000, "IORING_SETUP_DEFER_TASKRUN": 0x2000}
setups = [l for l in open(sys.argv[1]) if re.search(r"io_uring_setup\(4, ", l)]
if not setups:
    sys.exit("no io_uring_setup of the job's 4-entry ring")
flags = re.search(r"flags=([^,]*)", setups[0]).group(1)
bits = 0
for tok in re.sub(r"/\*.*?\*/", "", flags).split("|"):
    tok = tok.strip()
    bits |= int(tok, 16) if tok.startswith("0x") else names.get(tok, 0)
print("the job's ring:", flags)
sys.exit(0 if (bits & 0x3000 == 0x3000) == (sys.argv[2] == "defer") else 1)
PY
    result $? "$name"
}
if python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2]); sys.exit(0 if v >= (6, 1) else 1)'; then
    ring_flags_job "async=io_uring: the queue's ring is SINGLE_ISSUER | DEFER_TASKRUN by default" defer
    ring_flags_job "async=io_uring reap_spin=0 (no spin): the default ring, DEFER_TASKRUN" defer \
        --ioswitch_opts=reap_spin=0us
else
    echo "skip: the single_issuer default needs Linux 6.1 (this kernel: $(uname -r))"
fi
ring_flags_job "async=io_uring single_issuer=0: the queue's ring without DEFER_TASKRUN" plain \
    --ioswitch_opts=single_issuer=0
# A spinning reap gets a ring it can spin on: no DEFER_TASKRUN (whose completions reach the
# CQ ring only when the task enters the kernel), and the job still verifies.
ring_flags_job "async=io_uring reap_spin=20us: a ring without DEFER_TASKRUN, that a spin can see" plain \
    --ioswitch_opts=reap_spin=20us
# fio's fadvise_hint=random goes to the descriptor the library opened the file on (strace:
# the openat that returned it, then fadvise64 on it), not to fd -1.
hint_fd_job() {
    rm -f "$file"
    if ! strace -f -e trace=openat,fadvise64 -o "$tmp/strace" fio --name=hint "${where[@]}" \
        --ioengine="external:$engine" --thread=1 --size=1m --bs=4k --rw=randread --iodepth=4 \
        --ioswitch_async=io_uring --fadvise_hint=random >"$tmp/log" 2>&1; then
        result 1 "fadvise_hint=random: the job failed"
        return
    fi
    python3 - "$tmp/strace" "$file" >>"$tmp/log" 2>&1 <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
# The library's open: O_CLOEXEC (the engine's own, for invalidation, has none), and
# read-only, as the job only reads.
ours = {m.group(1) for l in lines if '"%s"' % sys.argv[2] in l and "O_RDONLY|O_CLOEXEC" in l
        for m in [re.search(r"= (\d+)$", l)] if m}
hints = [l for l in lines if "POSIX_FADV_RANDOM" in l]
print("library opens:", sorted(ours), "hints:", hints)
sys.exit(0 if hints and all(re.search(r"fadvise64\((\d+),", h) and re.search(r"fadvise64\((\d+),", h).group(1) in ours
                            and h.endswith("= 0") for h in hints) else 1)
PY
    result $? "fadvise_hint=random reaches the descriptor the library opened the file on"
}
if command -v strace >/dev/null; then
    hint_fd_job
else
    echo "skip: fadvise_hint=random's descriptor: strace is not installed"
fi
# A job that only reads opens its file read-only, as fio opens the files of its own
# engines: it runs on a file it may read but not write. An immutable file (chattr +i)
# refuses even root a writable open; before, the engine's read-write open failed there.
readonly_jobs() {
    local ro=$tmp/ro.img mode
    head -c 1M /dev/urandom >"$ro"
    if ! chattr +i "$ro" 2>"$tmp/log"; then
        echo "skip: read jobs on a file the job may not write: chattr +i refused: $(cat "$tmp/log")"
        return
    fi
    # A synchronous mode at iodepth=1: fio's note on a deeper one goes into the JSON file.
    for mode in "--ioswitch_sync=psync --iodepth=1" "--ioswitch_async=io_uring --iodepth=4" \
        "--ioswitch_async=thrpool --iodepth=4"; do
        # shellcheck disable=SC2086 # $mode is two options
        bounded 60 fio --name=ro --filename="$ro" --ioengine="external:$engine" --thread=1 --size=1m \
            --bs=4k --rw=randread $mode --output-format=json --output="$tmp/out.json" \
            >"$tmp/log" 2>&1 &&
            python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; sys.exit(0 if j["error"]==0 and j["read"]["io_bytes"]==1<<20 else 1)' \
                "$tmp/out.json" >>"$tmp/log" 2>&1
        result $? "randread $mode on an immutable file: opened read-only, every byte read"
    done
    # A job that writes still opens read-write, and is refused there by the kernel.
    bounded 60 fio --name=rw --filename="$ro" --ioengine="external:$engine" --thread=1 --size=1m --bs=4k \
        --rw=randwrite --ioswitch_sync=psync >"$tmp/log" 2>&1
    grep -q "Operation not permitted" "$tmp/log"
    result $? "randwrite on an immutable file: refused at open (EPERM)"
    chattr -i "$ro"
}
readonly_jobs
verify_job "async=io_uring qd1 reap_spin=20us + verify" --ioswitch_async=io_uring --ioswitch_opts=reap_spin=20us \
    --rw=randwrite --iodepth=1
verify_job "async=io_uring qd4 reap_spin=20us + verify" --ioswitch_async=io_uring --ioswitch_opts=reap_spin=20us \
    --rw=randwrite --iodepth=4
verify_job "async=thrpool threads=2 batch 4 + verify" --ioswitch_async=thrpool --ioswitch_opts=threads=2 \
    --rw=randwrite --iodepth=16 --iodepth_batch_complete_min=4 --iodepth_batch_complete_max=8
# fio takes at most 2 completions per ->getevents(): the library keeps the rest of a
# reap (ioswitch_queue_reap_at) and hands them over first at the next call.
verify_job "async=thrpool qd16 iodepth_batch_complete_max=2 (completions kept between reaps) + verify" \
    --ioswitch_async=thrpool --rw=randwrite --iodepth=16 --iodepth_batch_complete_min=1 \
    --iodepth_batch_complete_max=2
mkdir -p "$tmp/files"
where=(--directory="$tmp/files")
verify_job "async=libaio 2 files + verify" --ioswitch_async=libaio --nrfiles=2 --rw=randwrite --iodepth=8
verify_job "sync=psync 2 files fsync=8 (synchronous engine) + verify" --ioswitch_sync=psync --nrfiles=2 \
    --rw=randwrite --fsync=8
where=(--filename="$file")
trim_job "sync=psync randtrim: every trim counted" --ioswitch_sync=psync
trim_job "async=io_uring qd4 randtrim: every trim counted" --ioswitch_async=io_uring --iodepth=4

# The commit hook: iodepth_batch_submit=8 reaches the kernel 8 commands at a time (one
# ioswitch_queue_commit), each with its slat; the default batch of 1 commits each command.
stats_job "async=io_uring qd16 iodepth_batch_submit=8: batches of 8, slat of each" yes 8 8 \
    --ioswitch_async=io_uring --iodepth=16 --iodepth_batch_submit=8 --iodepth_batch_complete_min=8
stats_job "async=libaio qd1: each command committed with its slat" yes 4 4 --ioswitch_async=libaio --iodepth=1
# nil completes each command inside ->queue()'s ioswitch_queue_submit_at_reap: ->getevents()
# hands those completions over without reaping, as many as fio asks for at a time.
stats_job "async=nil qd1: completions taken back in ->queue(), each with its slat" yes 4 4 \
    --ioswitch_async=nil --iodepth=1
stats_job "async=nil qd16 iodepth_batch_complete_min=8: taken-back completions handed over 8+ at a time" \
    yes 4 8 --ioswitch_async=nil --iodepth=16 --iodepth_batch_complete_min=8
# fio/reap-fault.c, the test double preloaded in front of libioswitch by the cases below:
# built once, into $tmp/reap-fault.so; fails (status 1, the compiler's output in the log)
# when it cannot be built.
reap_shim() {
    [ -f "$tmp/reap-fault.so" ] ||
        cc -std=gnu11 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$here/../crates/ioswitch-capi/include" \
            -o "$tmp/reap-fault.so" "$here/reap-fault.c" -ldl >"$tmp/log" 2>&1
}

# fio's default at any depth reaps one completion per ->getevents(): the engine's array of
# taken-back completions then never empties, and moves to its front every 2 x iodepth
# commands (front()). On a nil queue every ->queue() must still take its own command's
# completion back (reap-fault.c's count: 1024 pushes, none without a completion; with
# an array of iodepth events most took none, docs/BENCHMARKS.md "nilqd16"), and each
# completion must reach fio once, as the io_u it belongs to (fio asserts on an io_u
# completed twice), with its slat and clat. (No check of the "IO depths" here: fio's last
# reap of a job takes all that are in flight at once.)
handed_once_job() {
    local name=$1
    shift
    rm -f "$file" "$tmp/out.json"
    if ! reap_shim; then
        result 1 "$name (cc fio/reap-fault.c)"
        return
    fi
    if ! REAP_FAULT=count LD_PRELOAD=$tmp/reap-fault.so fio --name=once --filename="$file" \
        --ioengine="external:$engine" --thread=1 --size=4m --bs=4k --rw=randread --ioswitch_async=nil \
        --output-format=json --output="$tmp/out.json" "$@" >"$tmp/log" 2>&1; then
        result 1 "$name"
        return
    fi
    if ! grep -qx "reap-fault: 1024 pushes, 0 of them took back no completion" "$tmp/log"; then
        result 1 "$name (not every ->queue() took its completion back)"
        return
    fi
    python3 - "$tmp/out.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
r = job["read"]
print("error", job["error"], "ios", r["total_ios"], "slat N", r["slat_ns"]["N"], "clat N", r["clat_ns"]["N"])
ok = job["error"] == 0 and r["total_ios"] == 1024 == r["clat_ns"]["N"] == r["slat_ns"]["N"]
ok = ok and abs(r["lat_ns"]["mean"] - r["slat_ns"]["mean"] - r["clat_ns"]["mean"]) < 1
sys.exit(0 if ok else 1)
PY
    result $? "$name"
}
handed_once_job "async=nil qd16, reaped one at a time: each taken back in its ->queue(), handed over once across the array's moves" \
    --iodepth=16
handed_once_job "async=nil qd7 iodepth_batch_complete_max=3: each taken back in its ->queue(), handed over up to 3 at a time" \
    --iodepth=7 --iodepth_batch_complete_max=3
# Without a ->commit() hook (async at iodepth_batch=1) each completion counted once.
depth_mix_job "async=nil qd1 beside a batching job: IO depths counted once each, in JSON and text" 2048
depth_mix_job "async=nil qd1 inline beside a batching job: IO depths counted once each" 1024 --ioswitch_inline=1
# Synchronous modes: no slat; the engine records fio's submit/complete depths itself.
stats_job "sync=psync: no slat, IO depths recorded as by fio's psync" no 4 4 --ioswitch_sync=psync
stats_job "async=nil qd1 inline: no slat, IO depths recorded" no 4 4 --ioswitch_async=nil --ioswitch_inline=1

# A reap that fails in a ->getevents() that already holds completions (two files, the
# first file's queue reaped, then the second's reap fails: fio/reap-fault.c, preloaded in
# front of libioswitch): fio must get those completions (every command issued completes,
# with its clat sample) and the failure (EIO) as the job's error.
reap_fault_job() {
    local name=$1
    if ! reap_shim; then
        result 1 "$name (cc fio/reap-fault.c)"
        return
    fi
    mkdir -p "$tmp/files"
    rm -rf "$tmp/files"/* "$tmp/out.json"
    LD_PRELOAD=$tmp/reap-fault.so fio --name=reapfault --directory="$tmp/files" --nrfiles=2 \
        --ioengine="external:$engine" --thread=1 --ioswitch_async=nil --rw=randread --size=1m --bs=4k \
        --iodepth=4 --iodepth_batch=4 --iodepth_batch_complete_min=4 --output-format=json \
        --output="$tmp/out.json" >"$tmp/log" 2>&1
    if ! grep -q "reap-fault: failing" "$tmp/log"; then
        result 1 "$name (no reap was made to fail)"
        return
    fi
    python3 - "$tmp/out.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
text = open(sys.argv[1]).read()
print(text[:text.find("{")])  # fio writes the job's error messages first
job = json.loads(text[text.index("{"):])["jobs"][0]
issued, done = job["read"]["total_ios"], job["read"]["clat_ns"]["N"]
print("error", job["error"], "issued", issued, "completed", done)
sys.exit(0 if job["error"] == 5 and issued > 0 and done == issued else 1)
PY
    result $? "$name"
}
reap_fault_job "a reap failing after another file's completions were reaped: those reach fio, then EIO"

fails_naming "nil moves no data: verify fails" "verify: bad" --thread=1 --ioswitch_async=nil --rw=write --verify=crc32c
fails_naming "sync=nil (synchronous engine) moves no data: verify fails" "verify: bad" --thread=1 \
    --ioswitch_sync=nil --rw=write --verify=crc32c
fails_naming "sync=psync direct=1: misaligned fio buffers are refused by name" \
    "direct I/O needs buffer address aligned" --thread=1 --ioswitch_sync=psync --direct=1 --mem_align=1 --rw=write
fails_naming "thread=1 is required" "needs thread=1" --ioswitch_async=io_uring --rw=write
fails_naming "ioswitch_inline=1 at iodepth=4 is refused by name" "ioswitch_inline=1 needs iodepth=1 (this job has iodepth=4)" \
    --thread=1 --ioswitch_async=io_uring --ioswitch_inline=1 --iodepth=4 --rw=write
fails_naming "an unknown interface is named" 'unknown async interface "bogus"' --thread=1 --ioswitch_async=bogus --rw=write
fails_naming "a bad option is named" '"bogus_key"' --thread=1 --ioswitch_opts=bogus_key=1 --rw=write
fails_naming "reap_spin on libaio is refused by name" 'reap_spin' --thread=1 --ioswitch_async=libaio \
    --ioswitch_opts=reap_spin=20us --rw=write
# fio refuses its own io_uring engine under io_submit_mode=offload; through this engine an
# async queue under fio's offload workers spun (io_uring, libaio) or overran its depth (emu).
for iface in io_uring libaio emu; do
    fails_naming "async=$iface with io_submit_mode=offload is refused by name" \
        "ioswitch_async=$iface can't be used with io_submit_mode=offload" --thread=1 --ioswitch_async="$iface" \
        --io_submit_mode=offload --iodepth=4 --rw=write
done
# The synchronous mode under io_submit_mode=offload: fio's 4 submit workers call ->queue()
# at once (before the fix they overwrote each other's offsets: verify found unwritten
# blocks). fio 3.33 itself sometimes hangs starting its workers: start_worker()
# (workqueue.c) stores `sw->flags = SW_F_IDLE` after pthread_create(), which wipes the
# SW_F_RUNNING of a worker that finished its init first, and workqueue_init() then waits
# for it forever (gdb on a hung job: the job thread in workqueue_init, all 4 workers idle
# in worker_thread). Its own psync engine hangs too (5 of 40 such jobs under load here).
# Through this engine at load 2-4 (2026-12-07): with fio's default fadvise_hint going to
# the engine's descriptor, 13 of 38 runs hung, against 0 of 22 while it went to fd -1;
# with fadvise_hint=0, 8 of 12 and 6 of 12. Why the fadvise, which comes after the
# workers start, moves the rate was not found. So a try killed after 20 s is tried
# again, up to 5 times; a try that ends must verify every byte, and 5 hung tries fail. The old engine failed this verify in 3 of 5 runs
# here (the race needs two workers at once), so one run does not always catch it.
offload_verify() {
    local name="sync=psync under io_submit_mode=offload (fio's workers submit) randwrite + verify" try rc
    for try in 1 2 3 4 5; do
        rm -rf "$file" "$tmp/out.json"
        bounded 20 fio --name=verify "${where[@]}" "${common[@]}" --ioswitch_sync=psync \
            --io_submit_mode=offload --iodepth=4 --rw=randwrite >"$tmp/log" 2>&1
        rc=$?
        [ "$rc" -eq 137 ] || break
        echo "note  $name: try $try hung (fio's workqueue_init), killed after 20 s" >&2
    done
    if [ "$rc" -ne 0 ]; then
        result 1 "$name (fio exit $rc)"
        return
    fi
    python3 - "$tmp/out.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
text = open(sys.argv[1]).read()  # fio's "queue depth will be capped at 1" note comes first
job = json.loads(text[text.index("{"):])["jobs"][0]
size = 8 << 20
print("error", job["error"], "written", job["write"]["io_bytes"], "verified", job["read"]["io_bytes"])
sys.exit(0 if job["error"] == 0 and job["write"]["io_bytes"] == size and job["read"]["io_bytes"] == size else 1)
PY
    result $? "$name"
}
offload_verify

# Several hosts: fio's client/server mode, on localhost. A server on a free
# non-default port runs the job a client sends it; the engine loads on the server side.
client_server_cases() {
    local port spid
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$tmp/server"
    (cd "$tmp/server" && exec fio --server="ip:127.0.0.1,$port") >"$tmp/server.log" 2>&1 &
    spid=$!
    if ! python3 - "$port" <<'PY'
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
    then
        cp "$tmp/server.log" "$tmp/log"
        result 1 "fio --server on 127.0.0.1,$port: not listening after 10 s"
        kill "$spid" 2>/dev/null
        return
    fi
    cat >"$tmp/cs.fio" <<JOB
[verify]
ioengine=external:$engine
thread=1
ioswitch_async=io_uring
filename=$file
size=8m
bs=4k
rw=randwrite
iodepth=8
verify=crc32c
do_verify=1
JOB
    rm -f "$file" "$tmp/out.json"
    bounded 120 fio --client="ip:127.0.0.1,$port" "$tmp/cs.fio" --output-format=json --output="$tmp/out.json" \
        >"$tmp/log" 2>&1 &&
        python3 - "$tmp/out.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["client_stats"][0]
size = 8 << 20
print("error", job["error"], "written", job["write"]["io_bytes"], "verified", job["read"]["io_bytes"])
sys.exit(0 if job["error"] == 0 and job["write"]["io_bytes"] == size and job["read"]["io_bytes"] == size else 1)
PY
    result $? "fio --client to fio --server (127.0.0.1,$port): async=io_uring qd8 randwrite + verify on the server"
    # A job the engine refuses: the refusal reaches the client, by name.
    sed -i 's/^iodepth=8$/iodepth=4\nioswitch_inline=1/' "$tmp/cs.fio"
    bounded 120 fio --client="ip:127.0.0.1,$port" "$tmp/cs.fio" >"$tmp/log" 2>&1
    grep -qF "ioswitch_inline=1 needs iodepth=1" "$tmp/log" && grep -Eq "err= *22" "$tmp/log"
    result $? "fio --client: the engine's refusal on the server reaches the client by name"
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
}
client_server_cases

# The mounted-device write guard: fio refuses a mounted block device by itself; with
# fio's allow_mounted_write=1 the engine must hand the override to the library, which
# would otherwise refuse every write. The 32 MiB ext4 leaves the device's tail free.
guard_cases() {
    local img=$tmp/guard.img dev mnt=$tmp/guard-mnt rc
    truncate -s 64M "$img" && dev=$(losetup --find --show "$img") || return 1
    mkdir -p "$mnt"
    if mkfs.ext4 -q -F "$dev" 32M && mount -t ext4 "$dev" "$mnt"; then
        fio --name=guard --filename="$dev" --ioengine="external:$engine" --thread=1 --rw=write --bs=64k \
            --offset=40m --size=8m --ioswitch_async=libaio --iodepth=4 --allow_mounted_write=1 >"$tmp/log" 2>&1 &&
            ! grep -Eq "err= *[1-9]" "$tmp/log"
        result $? "allow_mounted_write=1 reaches the library: a write to a mounted disk's free tail runs"
        fio --name=guard --filename="$dev" --ioengine="external:$engine" --thread=1 --rw=write --bs=64k \
            --offset=40m --size=8m --ioswitch_async=libaio >"$tmp/log" 2>&1
        # fio 3.33 exits 0 after "Aborting": the message, and no write, say it refused.
        grep -q "allow_mounted_write" "$tmp/log" && ! grep -q "WRITE: bw=" "$tmp/log"
        result $? "a write job on a mounted disk is refused, naming allow_mounted_write"
        fio --name=blk --filename="$dev" --ioengine="external:$engine" --thread=1 --rw=read --bs=64k \
            --size=8m --ioswitch_async=io_uring --iodepth=4 >"$tmp/log" 2>&1 && ! grep -Eq "err= *[1-9]" "$tmp/log" &&
            grep -q "READ: bw=" "$tmp/log"
        result $? "a read job on a mounted block device runs through the engine"
        umount "$mnt"
        e2fsck -f -n "$dev" >"$tmp/log" 2>&1
        result $? "the file system checks clean afterwards"
    else
        result 1 "guard setup: mkfs.ext4 or mount of $dev"
    fi
    losetup -d "$dev"
}
if [ "$(id -u)" != 0 ]; then
    echo "skip  write-guard cases: they need root (losetup, mount)"
elif ! command -v losetup >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
    echo "skip  write-guard cases: losetup or mkfs.ext4 is missing"
else
    guard_cases
fi

# fio/bench-vs-xnvme, the benchmark beside xNVMe (not run here): its --help, and a source
# tree that is not xNVMe's named as such.
"$here/bench-vs-xnvme" --help >"$tmp/log" 2>&1 && grep -q "^XNVME_SRC: an xNVMe source tree" "$tmp/log" &&
    grep -q -- "--cpus-allowed LIST" "$tmp/log"
result $? "fio/bench-vs-xnvme --help prints what it builds and runs, and the benchmark's options"
"$here/bench-vs-xnvme" "$tmp" >"$tmp/log" 2>&1
[ $? -eq 2 ] && grep -qF "$tmp is not an xNVMe source tree" "$tmp/log"
result $? "fio/bench-vs-xnvme on a directory that is not xNVMe's source: refused by name (exit 2)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
