#!/usr/bin/env bash
# The C API's tests, as a C user meets it: installs libioswitch into a temporary prefix
# with scripts/install, compiles the examples with pkg-config and
# -Wall -Wextra -Werror (shared and static), runs them on a temporary file over several
# interfaces, then again under valgrind (no errors, no leaks). Ends with "N passed, N failed";
# exits non-zero when anything failed.
#
#   crates/ioswitch-capi/tests/run-c-tests.sh
#
# Interfaces: io_uring, libaio, thrpool, emu and posix run the examples, natively and
# under valgrind (valgrind 3.19 knows the io_uring syscalls and the rings; buffers are
# zeroed at allocation, so data the kernel writes asynchronously is never "uninitialised"
# to it). tests/valgrind.supp suppresses one thing only: the thread-local storage block of
# a thread still running at exit (glibc's POSIX aio helpers, the library's libaio probe
# clean-up thread), which valgrind would report as "possibly lost"; see the file.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
capi=$(cd "$here/.." && pwd)
root=$(cd "$capi/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-c-tests.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
skipped=0
check() {
    local name=$1
    shift
    if "$@" >"$tmp/out" 2>&1; then
        passed=$((passed + 1))
        echo "ok    $name"
    else
        failed=$((failed + 1))
        echo "FAIL  $name"
        sed -e 's/^/      /' "$tmp/out" | tail -25
    fi
}

prefix=$tmp/prefix
check "scripts/install --prefix" "$root/scripts/install" --prefix "$prefix"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
check "pkg-config finds ioswitch" pkg-config --exists ioswitch

cflags="-Wall -Wextra -Werror -O2 -g"
examples="info sync_rw async_rw raw_rw pmem_rw lean_rw"
for e in $examples; do
    # shellcheck disable=SC2046,SC2086
    check "cc $e.c (shared)" cc $cflags -o "$tmp/$e" "$capi/examples/$e.c" $(pkg-config --cflags --libs ioswitch)
done
# Static: the archive plus the system libraries the Rust standard library needs.
# shellcheck disable=SC2046,SC2086
check "cc sync_rw.c (static)" cc $cflags -o "$tmp/sync_rw_static" "$capi/examples/sync_rw.c" \
    $(pkg-config --cflags ioswitch) "$prefix/lib/libioswitch.a" \
    $(pkg-config --static --libs-only-l ioswitch | sed 's/-lioswitch//')
check "the header compiles as C++" sh -c "echo '#include <ioswitch.h>' | c++ -x c++ -fsyntax-only -Wall -Wextra -Werror $(pkg-config --cflags ioswitch) -"

# Runs a command that must fail, and whose output must contain the given text.
fails_naming() {
    local want=$1
    shift
    if "$@" >"$tmp/failing" 2>&1; then
        echo "succeeded; expected a failure naming $want"
        return 1
    fi
    grep -F -- "$want" "$tmp/failing" || { cat "$tmp/failing"; return 1; }
}

file=$tmp/data.img
fresh() { rm -f "$file"; }
run() { fresh; "$@"; }

check "info" run "$tmp/info" "$file" "create=1,size=1MiB"
check "open names a bad option" fails_naming '"bogus"' "$tmp/info" "$file" "create=1,bogus=1"
check "open names a missing file" fails_naming "$tmp/missing.img" "$tmp/info" "$tmp/missing.img" ""
check "open names an interface that cannot serve" fails_naming "async=io_uring_cmd" "$tmp/info" "$file" "async=io_uring_cmd"
check "sync_rw static" run "$tmp/sync_rw_static" "$file" "create=1,size=1MiB"
for iface in io_uring libaio thrpool emu posix; do
    opts="create=1,size=1MiB,sync=psync,async=$iface"
    check "sync_rw  async=$iface" run "$tmp/sync_rw" "$file" "$opts"
    check "async_rw async=$iface" run "$tmp/async_rw" "$file" "$opts"
    check "lean_rw  async=$iface" run "$tmp/lean_rw" "$file" "$opts"
done
check "async_rw async=io_uring direct=1" run "$tmp/async_rw" "$file" "create=1,size=1MiB,async=io_uring,direct=1"
check "async_rw ramdisk" "$tmp/async_rw" 1MiB ""
check "raw_rw sync=psync" run "$tmp/raw_rw" "$file" "create=1,size=1MiB,sync=psync"
check "raw_rw sync=psync direct=1" run "$tmp/raw_rw" "$file" "create=1,size=1MiB,sync=psync,direct=1"
check "raw_rw ramdisk" "$tmp/raw_rw" 1MiB ""
# pmem load/store on ordinary memory (pmem_force=1): /dev/shm where it is tmpfs.
if [ -d /dev/shm ]; then
    shm_file=/dev/shm/ioswitch-c-tests-pmem-$$.img
    check "pmem_rw sync=pmem pmem_force=1 (/dev/shm)" sh -c \
        "rm -f '$shm_file'; '$tmp/pmem_rw' '$shm_file' 'sync=pmem,pmem_force=1,create=1,size=1MiB'; rc=\$?; rm -f '$shm_file'; exit \$rc"
    check "pmem on a file that is not DAX is refused naming MAP_SYNC" fails_naming "MAP_SYNC" "$tmp/pmem_rw" "$file" "sync=pmem,create=1,size=1MiB"
else
    skipped=$((skipped + 1))
    echo "skip  pmem_rw: /dev/shm does not exist"
fi

if command -v valgrind >/dev/null; then
    vg="valgrind -q --leak-check=full --errors-for-leak-kinds=definite,possible --error-exitcode=1"
    vg="$vg --suppressions=$here/valgrind.supp"
    # shellcheck disable=SC2086
    check "valgrind info" run $vg "$tmp/info" "$file" "create=1,size=1MiB"
    # shellcheck disable=SC2086
    check "valgrind raw_rw sync=psync" run $vg "$tmp/raw_rw" "$file" "create=1,size=1MiB,sync=psync"
    # shellcheck disable=SC2086
    check "valgrind raw_rw sync=psync direct=1" run $vg "$tmp/raw_rw" "$file" "create=1,size=1MiB,sync=psync,direct=1"
    # shellcheck disable=SC2086
    check "valgrind raw_rw ramdisk" $vg "$tmp/raw_rw" 1MiB ""
    if [ -d /dev/shm ]; then
        shm_file=/dev/shm/ioswitch-c-tests-pmem-$$.img
        rm -f "$shm_file"
        # shellcheck disable=SC2086
        check "valgrind pmem_rw sync=pmem pmem_force=1" $vg "$tmp/pmem_rw" "$shm_file" "sync=pmem,pmem_force=1,create=1,size=1MiB"
        rm -f "$shm_file"
    fi
    for iface in io_uring libaio thrpool emu posix; do
        opts="create=1,size=1MiB,sync=psync,async=$iface"
        # shellcheck disable=SC2086
        check "valgrind sync_rw  async=$iface" run $vg "$tmp/sync_rw" "$file" "$opts"
        # shellcheck disable=SC2086
        check "valgrind async_rw async=$iface" run $vg "$tmp/async_rw" "$file" "$opts"
        # shellcheck disable=SC2086
        check "valgrind lean_rw  async=$iface" run $vg "$tmp/lean_rw" "$file" "$opts"
    done
else
    skipped=$((skipped + 1))
    echo "skip  valgrind pass: valgrind is not installed (apt-get install valgrind)"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
