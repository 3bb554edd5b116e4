#!/usr/bin/env bash
# Builds the fio external ioengine on ioswitch:
#
#   fio/build.sh [--prefix DIR] [--out DIR]
#
# 1. fetches and configures the source of the installed fio (fio/fetch-fio-source.sh:
#    installs fio if missing, adds a deb-src entry mirroring the machine's apt sources if
#    there is none, apt-get source into ~/.cache/ioswitch-fio, ./configure);
# 2. installs libioswitch into DIR (default OUT/prefix) with scripts/install, unless
#    --prefix names an existing installation;
# 3. compiles fio/ioswitch-engine.c against fio's headers and links libioswitch.
#
# Prints the engine's path last: use it as  fio --ioengine=external:PATH --thread=1 ...
# OUT defaults to target/ioswitch-fio in the repository.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$root/target/ioswitch-fio
prefix=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: fio/build.sh [--prefix DIR] [--out DIR]" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

src=$("$here/fetch-fio-source.sh" | tail -1)
installed=$(fio --version)
case "$installed" in
    *"${src##*/fio-}"*) ;;
    *) echo "fio/build.sh: the source ($src) does not match the installed $installed" >&2; exit 1 ;;
esac

if [ -z "$prefix" ]; then
    prefix=$out/prefix
    "$root/scripts/install" --prefix "$prefix"
fi
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

# fio's own build flags that matter for its headers (Makefile CPPFLAGS), its
# config-host.h, and its tree as a system include directory so that warnings are
# ours only. -fno-plt: calls into libioswitch (one or more per I/O) jump through the GOT
# directly, without a PLT stub on the way.
# shellcheck disable=SC2046
cc -std=gnu11 -O2 -g -fPIC -fno-plt -shared -Wall -Wextra -Werror \
    -D_GNU_SOURCE -D_LARGEFILE_SOURCE -D_FILE_OFFSET_BITS=64 -DFIO_INTERNAL -DFIO_INC_DEBUG \
    -include "$src/config-host.h" -isystem "$src" \
    $(pkg-config --cflags ioswitch) \
    -o "$out/ioswitch-engine.so" "$here/ioswitch-engine.c" \
    $(pkg-config --libs ioswitch)
echo "fio/build.sh: built against $src ($installed)" >&2
echo "$out/ioswitch-engine.so"
