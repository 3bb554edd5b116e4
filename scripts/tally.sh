# shellcheck shell=bash
# Sourced by the test scripts that print one line per case and end with
# "N passed, N failed" (fio/run-fio-tests.sh, tests/vm/fio-zbd-tests.sh): the counters
# `passed` and `failed`, and `result STATUS WHAT` (STATUS 0: ok), which after a failure
# shows the last TALLY_TAIL (default 20) lines of the log file TALLY_LOG.
passed=0
failed=0
result() {
    if [ "$1" -eq 0 ]; then
        passed=$((passed + 1))
        echo "ok    $2"
    else
        failed=$((failed + 1))
        echo "FAIL  $2"
        sed -e 's/^/      /' "$TALLY_LOG" | tail -"${TALLY_TAIL:-20}"
    fi
}
