#!/bin/bash
# Peers as oracles for the device CLI: boots the NVMe guest once and runs
# tests/vm/oracle_check.py in it, which compares nvme-cli's JSON with ioswitch's field by
# field on the same devices (identify controller / namespace, SMART, firmware and error
# logs, features, zone reports) and runs a verify job over io_uring passthrough with fio
# and with `ioswitch bench`. One line per compared field group, then `N passed, N failed`.
#
#   tests/vm/oracle-tests.sh              # builds the CLI (debug), then runs the checks
#   tests/vm/oracle-tests.sh --no-build   # uses target/debug/ioswitch as it is
#   IOSWITCH=target/release/ioswitch tests/vm/oracle-tests.sh --no-build
#
# Exit status: 0 all passed, 1 something failed, 2 could not run; 124/125 from run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=1
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "oracle-tests: unknown argument $a" >&2; exit 2 ;;
    esac
done
if [ "$build" = 1 ]; then
    cargo build -p ioswitch-cli
fi
export IOSWITCH="${IOSWITCH:-target/debug/ioswitch}"
exec tests/vm/run.sh --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- python3 tests/vm/oracle_check.py
