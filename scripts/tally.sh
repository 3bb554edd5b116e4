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

# `bounded SECS CMD...`: runs CMD with a time limit, as `timeout -s KILL` would, but at
# the limit stops, then kills, CMD and every process it started, found through their
# parent links: fio's job processes call setsid(), so a hung one outlives a kill of
# CMD's process group and would go on running (and holding CMD's output) after the test.
# Returns CMD's exit status, or 137 when the limit killed it.
bounded() {
    local secs=$1 pid watcher rc
    shift
    "$@" &
    pid=$!
    (
        sleep "$secs" &
        local s=$!
        trap 'kill "$s" 2>/dev/null; exit 0' TERM
        wait "$s" || exit 0
        # From here on the TERM that ends an early watcher must not cut the kills short:
        # CMD's end (its own KILL, the first) makes the caller send it, and a watcher that
        # left then left the rest of CMD's processes stopped for ever (a CI run found fio's
        # exec_prerun `sleep` in state T).
        trap '' TERM
        # Every descendant of $pid, each stopped as it is found, so that none forks one
        # more behind the search: each scan looks for children of all found so far, until
        # one finds none new.
        local all=() new=("$pid") p
        while [ ${#new[@]} -gt 0 ]; do
            kill -STOP "${new[@]}" 2>/dev/null
            all+=("${new[@]}")
            mapfile -t new < <(ps -e -o pid=,ppid= |
                awk -v want=" ${all[*]} " 'index(want, " " $2 " ") && !index(want, " " $1 " ") { print $1 }')
        done
        for p in "${all[@]}"; do kill -KILL "$p" 2>/dev/null; done
    ) &
    watcher=$!
    wait "$pid" 2>/dev/null
    rc=$?
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
    return "$rc"
}
