#!/usr/bin/env bash
# tests/vm/selftest.sh — proves the guest harness: setup, then two guest boots:
#   1. run.sh -- bash tests/vm/selftest-guest.sh: the device layout (nsids,
#      LBA sizes, zoned namespace, /dev/ng0n1, io_poll, polled and verified
#      I/O, nvme list -o json), cwd/environment/read-only root/writable /tmp
#      and --rw share, stdout/stderr streaming, exit status 42 propagating;
#   2. run.sh --timeout SECS -- sleep 600: the hang is killed, exit 124.
# One line per check, then "N passed, N failed"; exit status 1 on failure.
#
# Environment: IOSWITCH_SELFTEST_HANG_TIMEOUT (default 20) for boot 2.
set -euo pipefail
# (The argument check first, without dirname: it needs no PATH.)
vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
# shellcheck source=scripts/args.sh
. "$vm/../../scripts/args.sh"
stage_arguments "$0" 0 "$@"

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
passed=0
failed=0
result() { # status name detail
    if [[ $1 == 0 ]]; then
        echo "PASS  $2${3:+: $3}"
        passed=$((passed + 1))
    else
        echo "FAIL  $2${3:+: $3}"
        failed=$((failed + 1))
    fi
}
finish() {
    echo "total time: $(awk -v a="$t_begin" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s"
    echo "$passed passed, $failed failed"
    if ((failed)); then exit 1; fi
    exit 0
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }

t_begin=$EPOCHREALTIME
work=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-vm-selftest.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# ---------------------------------------------------------------- setup
t0=$EPOCHREALTIME
if "$here/setup.sh" >"$work/setup.out" 2>"$work/setup.err"; then
    result 0 setup "tests/vm/setup.sh ($(secs "$t0" "$EPOCHREALTIME") s)"
else
    result 1 setup "tests/vm/setup.sh failed:"
    sed 's/^/    /' "$work/setup.err"
    finish
fi

# ---------------------------------------------------------------- boot 1
# From here on every condition is a check that reports itself.
set +e
rwdir=$work/rw
mkdir -p "$rwdir"
# A second writable share outside /tmp (the guest mounts over the read-only
# host directory there, instead of creating it in its tmpfs).
cache=${IOSWITCH_VM_CACHE:-$HOME/.cache/ioswitch-vm}
rwdir2=$(mktemp -d "$cache/selftest-rw.XXXXXX")
trap 'rm -rf -- "$work" "$rwdir2"' EXIT
t0=$EPOCHREALTIME
SELFTEST_CWD=$PWD SELFTEST_RW=$rwdir SELFTEST_RW2=$rwdir2 SELFTEST_TOKEN="token-with- space-'quote'-\$dollar" \
    "$here/run.sh" --timing --timeout 300 --rw "$rwdir" --rw "$rwdir2" -- bash "$here/selftest-guest.sh" \
    >"$work/out" 2>"$work/err"
rc=$?
t1=$EPOCHREALTIME

# Checks made inside the guest.
for name in namespaces lba-512 lba-4096 zoned zone-semantics nvme-list-json ng-chardev io-poll \
    polled-io verified-write cwd environment root-ro-tmp-rw rw-share-write; do
    line=$(grep -m1 "^CHECK [A-Z]* $name:" "$work/out" || true)
    if [[ -z $line ]]; then
        result 1 "$name" "no result from the guest"
    elif [[ $line == "CHECK PASS "* ]]; then
        result 0 "$name" "${line#*: }"
    else
        result 1 "$name" "${line#*: }"
    fi
done

# Checks made here.
[[ $rc == 42 ]]
result $? exit-status "command exited 42 in the guest, run.sh exited $rc"

grep -qx SELFTEST-STDERR-MARK "$work/err" && ! grep -q SELFTEST-STDERR-MARK "$work/out"
result $? stderr-stream "the guest's stderr arrives on stderr, not stdout"

read -r nlines sum < <(grep -E '^[0-9]+$' "$work/out" | awk '{n++; s+=$1} END {printf "%d %.0f\n", n, s}')
[[ $nlines == 200000 && $sum == 20000100000 ]]
result $? stdout-stream "200000 numbered lines through the stdout port: got $nlines lines, sum $sum"

[[ $(cat "$rwdir/from-guest" 2>/dev/null) == "written in the guest" &&
    $(cat "$rwdir2/from-guest" 2>/dev/null) == "written in the guest" ]]
result $? rw-share-host "the files the guest wrote into --rw $rwdir and $rwdir2 are here"

timing=$(grep -m1 '^vm: timing:' "$work/err" || true)
if [[ $rc != 42 || -z $timing ]]; then
    echo "---- guest stderr (last 40 lines):"
    tail -n 40 "$work/err" | sed 's/^/    /'
fi
boot=$(sed -n 's/.*boot-to-command \([0-9.]*\) s.*/\1/p' <<<"$timing")
echo "boot 1: boot-to-command ${boot:-?} s, whole run.sh $(secs "$t0" "$t1") s (${timing#vm: timing: })"
if [[ -n $boot ]] && awk -v b="$boot" 'BEGIN {exit !(b > 15)}'; then
    echo "note: boot-to-command above the 15 s target (is the machine busy?)"
fi

# ---------------------------------------------------------------- boot 2
# Shorter than a slow boot is fine too: the guest is then killed before the
# command starts, which still must end in exit 124.
hang_timeout=${IOSWITCH_SELFTEST_HANG_TIMEOUT:-20}
t0=$EPOCHREALTIME
"$here/run.sh" --timeout "$hang_timeout" -- sleep 600 >"$work/out2" 2>"$work/err2"
rc=$?
t1=$EPOCHREALTIME
el=$(secs "$t0" "$t1")
msg=$(grep -m1 'TIMEOUT' "$work/err2" || true)
[[ $rc == 124 && -n $msg ]] && awk -v e="$el" -v t="$hang_timeout" 'BEGIN {exit !(e < t + 15)}'
result $? timeout "sleep 600 with --timeout $hang_timeout: exit $rc after $el s; '${msg:-no TIMEOUT message}'"

finish
