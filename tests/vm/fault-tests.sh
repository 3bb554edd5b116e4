#!/usr/bin/env bash
# tests/vm/fault-tests.sh — fault injection and crash consistency of every interface that
# runs on a block device, with the guest kernel's own injectors (issue 17, parts 2 and 3;
# the dm-log-writes replay on the raw device and under ext4):
#
#   1. builds the test binary crates/ioswitch/tests/faults.rs here;
#   2. boots the guest of tests/vm (run.sh), loads loop, ext4, dm-flakey, dm-delay, dm-log-writes
#      and scsi_debug (a 16 MiB disk with medium errors on sectors 4100..4107, opts=2; the
#      timeout test sets its opts, every_nth and the disk's timeout at run time) +
#      sd_mod, and runs the binary with IOSWITCH_VM=1 (a skip fails) and IOSWITCH_CLI (the
#      CLI, whose `bench` is compared with fio on a failing device);
#   3. fails unless every listed test ran and passed; prints the `fault:` and `crash:`
#      lines, the rows of docs/RELIABILITY.md.
#
# Usage: tests/vm/fault-tests.sh [-- EXTRA ARGS FOR THE TEST BINARY]
# Environment: IOSWITCH_VM_TIMEOUT (seconds for the whole guest run, default 600).
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
    exe=$2
    shift 2
    [[ ${1:-} == -- ]] && shift
    out=$(mktemp -d)
    load() {
        if ! modprobe -d "${IOSWITCH_VM_MODROOT:-/}" "$@" 2>"$out/mod.err"; then
            echo "guest: cannot load $1 (its tests will fail): $(cat "$out/mod.err")"
        fi
    }
    for m in loop ext4 dm_mod dm_flakey dm_delay dm_log_writes sd_mod; do load "$m"; done
    load scsi_debug dev_size_mb=16 opts=2 medium_error_start=4100 medium_error_count=8
    echo "guest: dm targets: $(dmsetup targets | awk '{print $1}' | tr '\n' ' ')"
    echo "==== fault injection and crash consistency: $exe"
    set +e
    "$exe" --include-ignored --test-threads=1 "$@" 2>&1 | tee "$out/faults.log"
    rc=${PIPESTATUS[0]}
    set -e
    listed=$("$exe" --list --include-ignored 2>/dev/null | grep -c ': test$')
    line=$(grep -E '^test result:' "$out/faults.log" | tail -n 1)
    echo
    echo "==== summary (guest kernel $(uname -r))"
    grep -oE '(fault|crash): .*' "$out/faults.log" || true
    if ((rc != 0)) || [[ ! $line =~ ok\.\ ${listed}\ passed\;\ 0\ failed\;\ 0\ ignored ]]; then
        echo "FAIL  faults.rs: ${line:-no libtest summary (exit $rc)} ($listed tests listed)"
        grep -E '^test .* FAILED$' "$out/faults.log" | sed 's/^/      /' || true
        exit 1
    fi
    echo "PASS  faults.rs: $line"
    exit 0
fi

# ---------------------------------------------------------------- on this machine
cd "$root"
echo "==== building the test binary (cargo test -p ioswitch --test faults --no-run) and the CLI"
cargo build -p ioswitch-cli
export IOSWITCH_CLI=$root/target/debug/ioswitch
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"
exe=$(test_bin faults) || exit 2
echo "faults: $exe"
"$here/setup.sh" --quick >/dev/null
args=()
[[ ${1:-} == -- ]] && { shift; args=(-- "$@"); }
echo "==== running in the guest (tests/vm/run.sh)"
exec "$here/run.sh" --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- \
    bash "$here/fault-tests.sh" --guest "$exe" "${args[@]}"
