#!/usr/bin/env bash
# Prints the path of a configured fio source tree that matches the installed fio
# (Debian's source package of the same version), fetching and configuring it once into
# a cache directory. Everything it prints except the last line goes to stderr.
#
#   fio/fetch-fio-source.sh            # cache: ${IOSWITCH_FIO_CACHE:-~/.cache/ioswitch-fio}
#
# Needs root for apt-get (installing fio, adding a deb-src entry, apt-get update).
set -euo pipefail
here=${BASH_SOURCE[0]%/*} && [ "$here" != "${BASH_SOURCE[0]}" ] || here=.
# shellcheck source=scripts/args.sh
. "$here/../scripts/args.sh"
no_arguments "$0" "$@"

cache=${IOSWITCH_FIO_CACHE:-$HOME/.cache/ioswitch-fio}
say() { echo "fetch-fio-source: $*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v fio >/dev/null; then
    say "fio is not installed; installing Debian's fio"
    as_root apt-get update >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y fio >&2
fi
ver=$(dpkg-query -W -f='${Version}' fio)          # e.g. 3.33-3
upstream=${ver#*:}
upstream=${upstream%-*}                            # e.g. 3.33
src=$cache/fio-$upstream
stamp=$src/.ioswitch-configured-$ver-v2

if [ -f "$stamp" ] && [ -f "$src/config-host.h" ]; then
    echo "$src"
    exit 0
fi

has_deb_src() {
    grep -Eqs '^[[:space:]]*(Types:.*deb-src|deb-src[[:space:]])' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}

if ! has_deb_src; then
    # Mirror the machine's own binary sources as source sources, so the source package
    # comes from the same archive (and snapshot) the installed fio came from.
    new=/etc/apt/sources.list.d/ioswitch-deb-src.sources
    tmp=$(mktemp)
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        sed -e 's/^Types:.*/Types: deb-src/' "$f" >>"$tmp"
        echo >>"$tmp"
    done
    if [ -f /etc/apt/sources.list ]; then
        deb_lines=$(grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list || true)
        if [ -n "$deb_lines" ]; then
            new=/etc/apt/sources.list.d/ioswitch-deb-src.list
            printf '%s\n' "$deb_lines" | sed -E 's/^([[:space:]]*)deb([[:space:]])/\1deb-src\2/' >"$tmp"
        fi
    fi
    if ! grep -q deb-src "$tmp"; then
        say "no apt source found to mirror as deb-src (looked in /etc/apt/sources.list{,.d})"
        rm -f "$tmp"
        exit 1
    fi
    say "adding $new (deb-src mirroring the existing apt sources)"
    as_root install -m 0644 "$tmp" "$new"
    rm -f "$tmp"
    as_root apt-get update >&2
elif ! ls /var/lib/apt/lists/*_Sources* >/dev/null 2>&1; then
    as_root apt-get update >&2
fi

if ! command -v dpkg-source >/dev/null; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y dpkg-dev >&2
fi

mkdir -p "$cache"
rm -rf "$src"
say "fetching the source of fio $ver into $cache"
(cd "$cache" && apt-get source --only-source "fio=$ver" >&2)
[ -d "$src" ] || { say "apt-get source did not produce $src"; exit 1; }

# config-host.h is what the engine needs from ./configure. Configure as Debian's build
# does (debian/rules: --disable-native --prefix=/usr), less --enable-gfio and
# --enable-libnbd, which only add a GUI and an engine and would need GTK and libnbd.
# The optional libraries change only engines and the tail of struct io_u, never the
# fields the ioswitch engine reads.
say "configuring $src"
(cd "$src" && ./configure --disable-native --prefix=/usr >"$src/.ioswitch-configure.log" 2>&1) || {
    say "fio's ./configure failed; see $src/.ioswitch-configure.log"
    exit 1
}
touch "$stamp"
echo "$src"
