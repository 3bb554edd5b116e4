#!/usr/bin/env bash
# extract-vmlinux.sh VMLINUZ OUT
#
# Writes the uncompressed ELF kernel (vmlinux) that is packed inside a bzImage
# (vmlinuz) to OUT.  QEMU boots that ELF directly through its PVH entry point,
# which skips the in-guest decompression (seconds under TCG).
#
# How: the x86 boot protocol (>= 2.08) records where the compressed payload
# lies (payload_offset / payload_length at 0x248 / 0x24c, relative to the
# protected-mode code that starts after the real-mode setup sectors).  The
# payload's first bytes tell the compression format.  Kernels without those
# fields, or whose payload is not where the header says, fall back to scanning
# the whole file for the magic numbers of the known formats.
set -euo pipefail

die() { echo "extract-vmlinux: $*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: extract-vmlinux.sh VMLINUZ OUT"
in=$1
out=$2
[[ -r $in ]] || die "cannot read $in"

# u8/u16/u32 little-endian readers (offsets in bytes).
rd() { od -An -t "u$2" -j "$1" -N "$2" -- "$in" | tr -d ' \n'; }
# slice OFFSET LENGTH: bytes of the input on stdout.
slice() { dd if="$in" iflag=skip_bytes,count_bytes skip="$1" count="$2" bs=1M status=none; }
hex() { od -An -tx1 | tr -d ' \n'; }

is_elf() { [[ $(dd if="$1" bs=4 count=1 status=none | hex) == 7f454c46 ]]; }

# decompress FORMAT: stdin -> stdout.  Trailing bytes after the stream (the
# kernel's own size trailer, or the rest of the file when scanning) make some
# tools complain; what counts is whether the output is an ELF.
decompress() {
    case $1 in
        gzip) gzip -dc 2>/dev/null ;;
        xz) xz -dc --single-stream 2>/dev/null ;;
        lzma) xz -dc --format=lzma 2>/dev/null ;;
        zstd) zstd -dcq 2>/dev/null ;;
        bzip2) bzip2 -dc 2>/dev/null ;;
        lz4) lz4 -dc 2>/dev/null ;;
        lzo) lzop -dc 2>/dev/null ;;
        *) return 1 ;;
    esac
}

need_tool() {
    local tool
    case $1 in
        gzip) tool=gzip ;; xz | lzma) tool=xz ;; zstd) tool=zstd ;;
        bzip2) tool=bzip2 ;; lz4) tool=lz4 ;; lzo) tool=lzop ;;
    esac
    command -v "$tool" >/dev/null || die "payload is $1-compressed but '$tool' is not installed"
}

# format_of HEX: the compression format whose magic starts HEX (first bytes).
format_of() {
    case $1 in
        1f8b08*) echo gzip ;;
        fd377a585a00*) echo xz ;;
        28b52ffd*) echo zstd ;;
        425a68*) echo bzip2 ;;
        02214c18*) echo lz4 ;;
        894c5a4f*) echo lzo ;;
        5d000000*) echo lzma ;;
        *) return 1 ;;
    esac
}

tmp="$out.tmp.$$"
trap 'rm -f -- "$tmp"' EXIT

# 1. The boot header's payload fields.
if [[ $(slice 514 4) == HdrS ]]; then
    proto=$(rd 0x206 2)
    if ((proto >= 0x208)); then
        setup_sects=$(rd 0x1f1 1)
        if ((setup_sects == 0)); then setup_sects=4; fi
        pm_start=$(((setup_sects + 1) * 512))
        poff=$(rd 0x248 4)
        plen=$(rd 0x24c 4)
        start=$((pm_start + poff))
        magic=$(slice "$start" 6 | hex)
        if fmt=$(format_of "$magic"); then
            need_tool "$fmt"
            slice "$start" "$plen" | decompress "$fmt" >"$tmp" || true
            if is_elf "$tmp"; then
                mv -f -- "$tmp" "$out"
                echo "extract-vmlinux: $fmt payload at offset $start ($plen bytes) -> $out" >&2
                exit 0
            fi
        fi
    fi
fi

# 2. Scan for magic numbers.
declare -A magics=(
    [gzip]='\x1f\x8b\x08'
    [xz]='\xfd\x37\x7a\x58\x5a\x00'
    [zstd]='\x28\xb5\x2f\xfd'
    [bzip2]='BZh'
    [lz4]='\x02\x21\x4c\x18'
    [lzma]='\x5d\x00\x00\x00'
)
for fmt in xz zstd gzip lz4 bzip2 lzma; do
    command -v "$(case $fmt in lzma) echo xz ;; *) echo "$fmt" ;; esac)" >/dev/null || continue
    while IFS=: read -r off _; do
        tail -c "+$((off + 1))" -- "$in" | decompress "$fmt" >"$tmp" || true
        if is_elf "$tmp"; then
            mv -f -- "$tmp" "$out"
            echo "extract-vmlinux: $fmt stream found by scanning at offset $off -> $out" >&2
            exit 0
        fi
    done < <(LC_ALL=C grep -obUaP "${magics[$fmt]}" -- "$in" || true)
done

die "no compressed ELF kernel found in $in"
