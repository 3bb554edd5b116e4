# tests/vm/driver-lib.sh — what the guest stages share; sourced on the host and in the guest.
# The PCI driver stages (vfio-driver-tests.sh, uio-driver-tests.sh) use both functions;
# nvme-tests.sh, fault-tests.sh, pmem-tests.sh, power-cut.sh and vfio-tests.sh find their
# executables with cargo_exe/test_bin.
#
# cargo_exe NAME CARGO-ARGS...: runs `cargo CARGO-ARGS --message-format=json` (cargo's own
# messages still go to stderr) and prints the path of the executable cargo built for the
# target NAME; fails naming NAME and the command when cargo fails or reports none.
cargo_exe() {
    local name=$1 exe
    shift
    exe=$(cargo "$@" --message-format=json |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$name") &&
        [[ -n $exe ]] || {
        echo "${0##*/}: \`cargo $*\` built no executable named $name" >&2
        return 1
    }
    echo "$exe"
}

# test_bin NAME: builds the integration test NAME of the ioswitch crate (cargo test
# --no-run) and prints the path of its executable.
test_bin() {
    cargo_exe "$1" test -p ioswitch --test "$1" --no-run
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
