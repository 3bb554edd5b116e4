# tests/vm/driver-lib.sh — what the two PCI driver stages (vfio-driver-tests.sh,
# uio-driver-tests.sh) share; sourced by them on the host and in the guest.
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

# check NAME CMD...: runs CMD (in the guest), prints whether it passed and how long it
# took, and adds NAME to the caller's `fails` array when it failed.
check() {
    local name=$1
    shift
    echo "==== $name"
    local t0=${EPOCHREALTIME/./}
    if "$@"; then echo "---- ok: $name"; else echo "---- FAILED: $name"; fails+=("$name"); fi
    local ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
    printf -- '---- took %d.%03d s\n' $((ms / 1000)) $((ms % 1000))
}
