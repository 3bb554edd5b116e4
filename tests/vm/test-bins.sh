# tests/vm/test-bins.sh — sourced by the guest stages that run the library's test binaries
# on a PCI controller (vfio-driver-tests.sh, uio-driver-tests.sh).
#
# test_bin NAME: builds the integration test NAME of the ioswitch crate (cargo test
# --no-run) and prints the path of its executable, from cargo's JSON messages; fails
# naming NAME when cargo does not report one.
test_bin() {
    local exe
    exe=$(cargo test -p ioswitch --test "$1" --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$1")
    [[ -n $exe ]] || { echo "${0##*/}: the $1 test binary did not build" >&2; return 1; }
    echo "$exe"
}
