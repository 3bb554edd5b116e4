#!/usr/bin/env bash
# tests/vm/setup.sh — prepares everything tests/vm/run.sh needs:
#   * Debian packages (installed only when missing),
#   * Debian's generic kernel, unpacked, with the ELF vmlinux extracted from
#     the vmlinuz (QEMU boots it through PVH: no in-guest decompression),
#   * a small initramfs: busybox-static, the NVMe / virtio / 9p modules (with
#     their dependencies from modules.dep) and tests/vm/init.
# Everything lands in a cache dir keyed by kernel package and version; a
# second run only checks and returns.  Prints the kernel dir on stdout.
#
# Environment:
#   IOSWITCH_VM_CACHE   cache dir (default $HOME/.cache/ioswitch-vm)
#   IOSWITCH_VM_KERNEL  kernel package to use (default: the one that
#                       linux-image-amd64 depends on)
set -euo pipefail

quick=0
case ${1:-} in
    --quick) quick=1 ;;
    "") ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "vm-setup: unknown argument $1 (usage: setup.sh [--quick])" >&2; exit 2 ;;
esac

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cache=${IOSWITCH_VM_CACHE:-$HOME/.cache/ioswitch-vm}

say() { echo "vm-setup: $*" >&2; }
die() { echo "vm-setup: error: $*" >&2; exit 1; }

# Modules the guest needs, in two groups that init loads in parallel, each in
# the order given here, every module preceded by its dependencies (from
# modules.dep).  virtio_pci must come before 9pnet_virtio and virtio_console.
# crct10dif_generic and crc64_rocksoft_generic are softdeps of crc-t10dif and
# crc64-rocksoft (needed by nvme-core through t10-pi): without them the
# kernel would try to modprobe them on demand.
MODULES_FS=(virtio_pci virtio_console 9pnet_virtio 9p)
MODULES_NVME=(crct10dif_generic crc64_rocksoft_generic nvme)

# ---------------------------------------------------------------- packages
# package:file-that-proves-it-is-installed
PKGS=(
    qemu-system-x86:/usr/bin/qemu-system-x86_64
    busybox-static:/bin/busybox
    cpio:/usr/bin/cpio
    nvme-cli:/usr/sbin/nvme
    fio:/usr/bin/fio
    util-linux:/usr/bin/blkzone
    kmod:/usr/bin/kmod
    xz-utils:/usr/bin/xz
    zstd:/usr/bin/zstd
    ndctl:/usr/bin/ndctl
    e2fsprogs:/usr/sbin/mkfs.ext4
)
apt_updated=0
apt_update() {
    if ((apt_updated == 0)); then
        say "apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        apt_updated=1
    fi
}
missing=()
for p in "${PKGS[@]}"; do
    name=${p%%:*}
    if [[ $(dpkg-query -W -f='${Status}' "$name" 2>/dev/null) != "install ok installed" ]]; then
        missing+=("$name")
    fi
done
if ((${#missing[@]})); then
    (($(id -u) == 0)) || die "missing packages (${missing[*]}) and not root: install them with apt-get"
    apt_update
    say "apt-get install ${missing[*]}"
    aptlog=$(mktemp)
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >"$aptlog" 2>&1; then
        tail -n 30 "$aptlog" >&2
        rm -f -- "$aptlog"
        die "apt-get install ${missing[*]} failed (last lines above)"
    fi
    rm -f -- "$aptlog"
fi
# qemu's 9p support lives in the main binary on Debian; make sure the
# firmware the pc machine needs is there (qemu-system-data, a dependency).
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found after install"

# One setup at a time per cache dir (run.sh calls this on every run).
mkdir -p -- "$cache"
exec 9>"$cache/.lock"
flock 9 || die "cannot lock $cache/.lock"

# ---------------------------------------------------------------- kernel
# Bump when the layout of a kernel dir changes: older dirs are rebuilt.
KDIR_FORMAT=2
kpkg=${IOSWITCH_VM_KERNEL:-}
kver_pkg=
kver_pkg_raw=
# --quick (what run.sh uses): keep the kernel of the last setup when it is
# complete, without asking apt (apt-cache takes ~1.5 s here).
if [[ $quick == 1 && -z $kpkg && -r $cache/current ]]; then
    prev_kdir=$(sed -n 's/^kdir=//p' "$cache/current")
    if [[ -n $prev_kdir && $(cat "$prev_kdir/kernel.done" 2>/dev/null) == "$KDIR_FORMAT" ]]; then
        kdir=$prev_kdir
        base=${kdir##*/}
        kpkg=${base%%_*}
        kver_pkg=${base#*_}
        kver_pkg_raw=$kver_pkg
    fi
fi
if [[ -z $kpkg ]]; then
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}') || true
    if [[ -z $kpkg ]]; then
        apt_update
        kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}') || true
    fi
    [[ -n $kpkg ]] || die "cannot tell which kernel package linux-image-amd64 depends on (apt-cache depends)"
fi
if [[ -z $kver_pkg ]]; then
    kver_pkg=$(apt-cache policy "$kpkg" 2>/dev/null | awk '/Candidate:/ {print $2; exit}') || true
    if [[ -z $kver_pkg || $kver_pkg == "(none)" ]]; then
        apt_update
        kver_pkg=$(apt-cache policy "$kpkg" 2>/dev/null | awk '/Candidate:/ {print $2; exit}') || true
        [[ -n $kver_pkg && $kver_pkg != "(none)" ]] || die "no installable version of $kpkg"
    fi
    kver_pkg_raw=$kver_pkg
    kver_pkg=${kver_pkg//[:\/]/_}
fi
kdir="$cache/${kpkg}_${kver_pkg}"
mkdir -p -- "$cache"

if [[ $(cat "$kdir/kernel.done" 2>/dev/null) != "$KDIR_FORMAT" ]]; then
    say "fetching $kpkg $kver_pkg into $kdir"
    rm -rf -- "$kdir"
    work=$(mktemp -d "$cache/.dl.XXXXXX")
    trap 'rm -rf -- "$work"' EXIT
    # (apt warns that it downloads unsandboxed when $cache is not readable by
    # its _apt user, e.g. under /root: harmless, so that line is dropped.)
    (cd "$work" && apt-get download -qq "$kpkg=$kver_pkg_raw" 2>&1 | { grep -v "unsandboxed as root" || true; } >&2
        exit "${PIPESTATUS[0]}") || die "apt-get download $kpkg=$kver_pkg_raw failed"
    deb=$(ls "$work"/*.deb)
    mkdir -p "$work/root"
    dpkg-deb -x "$deb" "$work/root" || die "dpkg-deb -x $deb failed"
    vmlinuz=$(find "$work/root/boot" -maxdepth 1 -name 'vmlinuz-*' 2>/dev/null | head -n1)
    [[ -n $vmlinuz ]] || die "no /boot/vmlinuz-* in $deb"
    kver=${vmlinuz##*/vmlinuz-}
    [[ -d $work/root/lib/modules/$kver ]] || die "no /lib/modules/$kver in $deb"
    # The package ships no modules.dep (its postinst runs depmod): make one.
    depmod -b "$work/root" "$kver" || die "depmod -b $work/root $kver failed"
    mkdir -p "$work/k"
    mv "$vmlinuz" "$work/k/vmlinuz"
    cp "$work/root/boot/config-$kver" "$work/k/config" 2>/dev/null || true
    mv "$work/root/lib/modules/$kver" "$work/k/modules"
    "$here/extract-vmlinux.sh" "$work/k/vmlinuz" "$work/k/vmlinux" || die "extracting vmlinux from $vmlinuz failed"
    echo "$kver" >"$work/k/kver"
    echo "$KDIR_FORMAT" >"$work/k/kernel.done"
    mv "$work/k" "$kdir"
    rm -rf -- "$work"
    trap - EXIT
fi
kver=$(cat "$kdir/kver")

# ---------------------------------------------------------------- initramfs
# Keyed by what goes in: init script, module list, busybox build, this script.
busybox=/bin/busybox
ikey=$( {
    cat "$here/init" "$here/setup.sh"
    echo "${MODULES_FS[*]} / ${MODULES_NVME[*]}"
    sha256sum "$busybox"
} | sha256sum | cut -c1-16)
initrd="$kdir/initramfs-$ikey.cpio"

if [[ ! -f $initrd ]]; then
    say "building initramfs for $kver"
    mdir="$kdir/modules"
    dep="$mdir/modules.dep"
    [[ -r $dep ]] || die "missing $dep"

    # name -> path (relative to mdir) and path -> deps, from modules.dep.
    declare -A mod_path mod_deps
    while IFS= read -r line; do
        p=${line%%:*}
        n=${p##*/}
        n=${n%%.ko*}
        n=${n//-/_}
        mod_path[$n]=$p
        mod_deps[$p]=${line#*:}
    done <"$dep"
    declare -A builtin=()
    if [[ -r $mdir/modules.builtin ]]; then
        while IFS= read -r p; do
            n=${p##*/}
            n=${n%%.ko*}
            builtin[${n//-/_}]=1
        done <"$mdir/modules.builtin"
    fi

    declare -A seen=() group_of=()
    order=()
    add_path() { # path group: its deps first (modules.dep lists them, nearest last)
        local p=$1 g=$2 deps=() i
        if [[ -n ${seen[$p]:-} ]]; then
            [[ ${group_of[$p]} == "$g" ]] ||
                die "module $p is needed by both module groups; put it in one (setup.sh MODULES_*)"
            return 0
        fi
        seen[$p]=1
        group_of[$p]=$g
        read -r -a deps <<<"${mod_deps[$p]:-}"
        for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
            add_path "${deps[i]}" "$g"
        done
        order+=("$p")
    }
    want() { # group module...
        local g=$1 m n
        shift
        for m in "$@"; do
            n=${m//-/_}
            if [[ -n ${mod_path[$n]:-} ]]; then
                add_path "${mod_path[$n]}" "$g"
            elif [[ -n ${builtin[$n]:-} ]]; then
                say "  $m is built into the kernel"
            else
                die "kernel $kver has no module $m (not in modules.dep nor modules.builtin)"
            fi
        done
    }
    want fs "${MODULES_FS[@]}"
    want nvme "${MODULES_NVME[@]}"

    # Drop a module's appended signature: checking it costs ~50 ms per module
    # under software emulation, and Debian's kernel loads unsigned modules
    # (it only taints itself) unless booted with module.sig_enforce=1.
    # Layout at the end of a signed .ko: signature, struct module_signature
    # (12 bytes, big-endian sig_len last), "~Module signature appended~\n".
    strip_signature() {
        local f=$1 size magic siglen
        magic='~Module signature appended~'
        size=$(stat -c %s -- "$f")
        ((size > 40)) || return 0
        [[ $(tail -c 28 -- "$f" | head -c 27) == "$magic" ]] || return 0
        siglen=$(tail -c 32 -- "$f" | head -c 4 | od -An -tu1 | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
        ((siglen > 0 && siglen < size - 40)) || die "odd module signature in $f"
        truncate -s $((size - 40 - siglen)) -- "$f"
    }

    root=$(mktemp -d "$cache/.initramfs.XXXXXX")
    trap 'rm -rf -- "$root"' EXIT
    mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,newroot,lib/modules/"$kver"}
    cp "$busybox" "$root/bin/busybox"
    for applet in $("$busybox" --list); do
        [[ $applet == busybox ]] && continue
        ln -sf busybox "$root/bin/$applet"
    done
    : >"$root/etc/modules.fs"
    : >"$root/etc/modules.nvme"
    for p in "${order[@]}"; do
        src="$mdir/$p"
        base=${p##*/}
        dst="$root/lib/modules/$kver/${base%%.ko*}.ko"
        case $base in
            *.ko) cp "$src" "$dst" ;;
            *.ko.xz) xz -dc "$src" >"$dst" ;;
            *.ko.zst) zstd -dcq "$src" >"$dst" ;;
            *.ko.gz) gzip -dc "$src" >"$dst" ;;
            *) die "unknown module format: $p" ;;
        esac
        strip_signature "$dst"
        echo "/lib/modules/$kver/${base%%.ko*}.ko" >>"$root/etc/modules.${group_of[$p]}"
    done
    for g in fs nvme; do
        say "  modules ($g): $(sed 's#.*/##; s#\.ko$##' "$root/etc/modules.$g" | tr '\n' ' ')"
    done
    # A modules.dep for the initramfs, so that an on-demand request_module()
    # (busybox modprobe) finds what is there.
    cp "$mdir"/modules.{order,builtin} "$root/lib/modules/$kver/" 2>/dev/null || true
    depmod -b "$root" "$kver" 2>/dev/null || say "  warning: depmod for the initramfs failed"
    install -m 755 "$here/init" "$root/init"
    # The kernel opens /dev/console for init's stdio before init can mount
    # devtmpfs; without the node init starts with no stdin/stdout.
    mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null ||
        say "  warning: cannot mknod dev/console (not root?): early init output is lost"
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$initrd.tmp" ||
        die "cpio failed"
    mv "$initrd.tmp" "$initrd"
    rm -rf -- "$root"
    trap - EXIT
    # Older initramfs images of this kernel are stale now.
    find "$kdir" -maxdepth 1 -name 'initramfs-*.cpio' ! -name "${initrd##*/}" -delete
fi

# QEMU boots an ELF kernel only through its PVH entry (a Xen ELF note of
# type 0x12, XEN_ELFNOTE_PHYS32_ENTRY); without one, boot the bzImage.
kernel=$kdir/vmlinux
if command -v readelf >/dev/null; then
    if ! readelf -n "$kdir/vmlinux" 2>/dev/null | grep -q 'Xen.*(0x00000012)'; then
        say "vmlinux has no PVH entry note: booting vmlinuz (slower)"
        kernel=$kdir/vmlinuz
    fi
fi

# What run.sh reads.
{
    echo "kdir=$kdir"
    echo "kver=$kver"
    echo "kernel=$kernel"
    echo "initrd=$initrd"
} >"$cache/current.tmp"
mv "$cache/current.tmp" "$cache/current"
echo "$kdir"
