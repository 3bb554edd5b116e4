#!/usr/bin/env bash
# tests/vm/run.sh [OPTIONS] -- COMMAND [ARG...]
#
# Boots a throw-away Linux guest (QEMU, software emulation) with emulated NVMe
# devices and runs COMMAND in it, in a chroot of this machine's root file
# system (shared read-only over virtio-9p), in the current directory, with
# this environment.  COMMAND's stdout and stderr stream back here; its exit
# status becomes this script's.
#
# Options:
#   --timeout SECS   kill the guest after SECS seconds, boot included
#                    (default $IOSWITCH_VM_TIMEOUT or 300); exit status 124
#   --rw DIR         share DIR writable at the same path in the guest (repeatable)
#   --timing         print boot and run times on stderr at the end
#   --disk-dir DIR   keep the NVMe (and --nvdimm) backing images in DIR (created when
#                    missing, reused when there): a later run boots on the same disks
#   --stop-on TEXT   cut the power (SIGKILL to qemu) as soon as COMMAND prints a line
#                    containing TEXT on stdout; exit status 0 when it did
#   --nvdimm         add two emulated NVDIMMs of 256 MiB (-machine nvdimm=on; raw
#                    namespaces /dev/pmem0 and /dev/pmem1, see README.md)
#   --iommu          the guest for user-space NVMe drivers: q35 with an emulated
#                    Intel IOMMU (intel_iommu=on iommu=pt), 64 x 2 MiB hugepages
#                    reserved, and a second NVMe controller at PCI 0000:00:05.0
#                    (see README.md); nvme0 and its namespaces stay as they are
#   --pci            the same second controller and hugepages as --iommu, without
#                    an IOMMU (q35 only): for uio_pci_generic (dma=uio)
#   --verbose, -v    stream the guest's kernel console to stderr
#   --help, -h       this text
#
# Exit status: COMMAND's; 124 when the timeout killed the guest; 125 when the
# guest could not run COMMAND (the reason and the console's last lines are
# printed).
#
# Guest devices (see README.md): one NVMe controller with namespaces
#   nsid 1: 256 MiB, 512 B LBAs     nsid 2: 256 MiB, 4 KiB LBAs
#   nsid 3: 128 MiB zoned (ZNS), 4 MiB zones with 3 MiB capacity, 512 B LBAs
# With --iommu or --pci, a second controller at 0000:00:05.0 (nvme1 once bound to nvme):
#   nsid 1: 128 MiB, 512 B LBAs     nsid 2: 128 MiB zoned, 4 MiB zones, 3 MiB capacity
# Backing images are sparse files created fresh for every run.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cache=${IOSWITCH_VM_CACHE:-$HOME/.cache/ioswitch-vm}

say() { echo "vm: $*" >&2; }
die() { echo "vm: error: $*" >&2; exit 125; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "${BASH_SOURCE[0]}"; }

timeout=${IOSWITCH_VM_TIMEOUT:-300}
timing=0
verbose=0
disk_dir=
stop_on=
nvdimm=0
iommu=0
pci=0
rw_dirs=()
while (($#)); do
    case $1 in
        --timeout)
            (($# >= 2)) || die "--timeout needs a value"
            timeout=$2
            shift 2
            ;;
        --timeout=*) timeout=${1#*=}; shift ;;
        --rw)
            (($# >= 2)) || die "--rw needs a directory"
            rw_dirs+=("$2")
            shift 2
            ;;
        --rw=*) rw_dirs+=("${1#*=}"); shift ;;
        --timing) timing=1; shift ;;
        --disk-dir)
            (($# >= 2)) || die "--disk-dir needs a directory"
            disk_dir=$2
            shift 2
            ;;
        --stop-on)
            (($# >= 2)) || die "--stop-on needs a text"
            stop_on=$2
            shift 2
            ;;
        --nvdimm) nvdimm=1; shift ;;
        --iommu) iommu=1; shift ;;
        --pci) pci=1; shift ;;
        -v | --verbose) verbose=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) break ;;
    esac
done
(($#)) || die "no command given (usage: run.sh [--timeout SECS] -- COMMAND...)"
if ! [[ $timeout =~ ^[0-9]+$ ]] || ((timeout == 0)); then
    die "--timeout wants a positive number of seconds, not '$timeout'"
fi

# ------------------------------------------------------------ kernel, initramfs
# setup.sh is quick when everything is cached; it also rebuilds the
# initramfs when tests/vm/init changed.
"$here/setup.sh" --quick >/dev/null || die "tests/vm/setup.sh failed"
# shellcheck disable=SC1091 # sets kdir, kver, kernel, initrd
. "$cache/current"
[[ -n ${kdir:-} && -r ${kernel:-} && -r ${initrd:-} ]] || die "setup left no kernel/initramfs (see $cache/current)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed"

# ------------------------------------------------------------ run directory
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-vm.XXXXXX") || die "mktemp failed"
[[ $tmp =~ ^[A-Za-z0-9_./-]+$ ]] || die "temp dir path '$tmp' has characters the kernel command line cannot carry"
qpid=
readers=()
# shellcheck disable=SC2317 # called from the trap
cleanup() {
    local p
    if [[ -n $qpid ]] && kill -0 "$qpid" 2>/dev/null; then
        kill -TERM "$qpid" 2>/dev/null || true
        sleep 0.2
        kill -KILL "$qpid" 2>/dev/null || true
    fi
    for p in "${readers[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    rm -rf -- "$tmp"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# NVMe backing images (sparse): fresh in the run's temp dir, or kept in --disk-dir.
imgdir=$tmp
if [[ -n $disk_dir ]]; then
    mkdir -p -- "$disk_dir" || die "--disk-dir $disk_dir: cannot create it"
    imgdir=$(cd -- "$disk_dir" && pwd -P)
    [[ $imgdir =~ ^[A-Za-z0-9_./+-]+$ ]] || die "--disk-dir $imgdir: only plain path characters are supported"
fi
for img in ns1:256M ns2:256M ns3:128M; do
    [[ -e $imgdir/${img%%:*}.img ]] || truncate -s "${img#*:}" "$imgdir/${img%%:*}.img"
done
if ((iommu || pci)); then
    truncate -s 128M "$imgdir/pci1.img"
    truncate -s 128M "$imgdir/pci2.img"
fi

# The command: a bash script run by the host's bash inside the chroot.
{
    echo '# generated by tests/vm/run.sh'
    while IFS= read -r name; do
        [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
        case $name in
            BASH_* | SHLVL | PWD | OLDPWD | _ | TMPDIR) continue ;;
        esac
        printf 'export %s=%q\n' "$name" "${!name}"
    done < <(compgen -e)
    echo 'export TMPDIR=/tmp IOSWITCH_VM=1 IOSWITCH_VM_MODROOT=/run/ioswitch-vm/modroot'
    # The interpreter `python3` resolves to goes first on the guest's PATH. Where PATH
    # finds a version manager's shim (pyenv: bash scripts that start several dozen
    # processes), every `python3` in the guest cost 8-10 s under TCG instead of about
    # one; the guest's tests start it some 40 times.
    if py_dir=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null) &&
        [[ -n $py_dir && $py_dir != "$(dirname "$(command -v python3)")" ]]; then
        printf 'export PATH=%q:"$PATH"\n' "$py_dir"
    fi
    printf 'cd -- %q || { echo %q >&2; exit 125; }\n' "$PWD" \
        "vm: cannot cd to $PWD in the guest"
    printf 'exec'
    printf ' %q' "$@"
    echo
} >"$tmp/cmd.sh"

rw_conf=
rw_args=()
i=0
for d in "${rw_dirs[@]}"; do
    [[ -d $d ]] || die "--rw $d: not a directory"
    d=$(cd -- "$d" && pwd -P)
    [[ $d =~ ^[A-Za-z0-9_./+-]+$ ]] || die "--rw $d: only plain path characters are supported"
    rw_conf+=" rw$i=$d"
    rw_args+=(-virtfs "local,path=$d,mount_tag=rw$i,security_model=none,multidevs=remap")
    i=$((i + 1))
done
# The working directory stays visible in the guest even under /tmp (which the guest
# replaces with a fresh tmpfs): its top directory below /tmp is bound back in.
keep_tmp=
case $PWD in
    /tmp/*)
        top=${PWD#/tmp/}
        keep_tmp="/tmp/${top%%/*}"
        [[ $keep_tmp =~ ^[A-Za-z0-9_./+-]+$ ]] || die "working directory $PWD: only plain path characters are supported under /tmp"
        ;;
esac
{
    echo "NS_EXPECT=3"
    echo "KEEP_TMP='$keep_tmp'"
    echo "RW_SHARES='${rw_conf# }'"
    echo "KMODDIR='$kdir/modules'"
} >"$tmp/guest.conf"

# ------------------------------------------------------------ output channels
# virtio serial ports -> fifos -> readers here.  ctl carries "start UPTIME",
# "exit RC UPTIME" or "fail MESSAGE"; each line is stamped on arrival.
mkfifo "$tmp/out.fifo" "$tmp/err.fifo" "$tmp/ctl.fifo"
if [[ -n $stop_on ]]; then
    (
        while IFS= read -r line; do
            printf '%s\n' "$line"
            if [[ $line == *"$stop_on"* && ! -e $tmp/stopped ]]; then
                : >"$tmp/stopped"
                kill -KILL "$(cat "$tmp/qemu.pid" 2>/dev/null)" 2>/dev/null || true
            fi
        done <"$tmp/out.fifo"
    ) &
else
    cat "$tmp/out.fifo" &
fi
readers+=($!)
cat "$tmp/err.fifo" >&2 &
readers+=($!)
(
    while IFS= read -r line; do
        printf '%s %s\n' "$EPOCHREALTIME" "$line"
    done <"$tmp/ctl.fifo" >"$tmp/ctl.log"
) &
readers+=($!)
if ((verbose)); then
    mkfifo "$tmp/console.fifo"
    tee "$tmp/console.log" <"$tmp/console.fifo" | sed -u 's/^/vm-console: /' >&2 &
    readers+=($!)
    console_path=$tmp/console.fifo
    loglevel=7
else
    console_path=$tmp/console.log
    loglevel=4
fi

# tsc=reliable: TCG's TSC is consistent across vCPUs, but the kernel would
#   mark it unstable and fall back to the HPET (an MMIO exit per clock read,
#   no vDSO): timestamps in tests and benchmarks would cost microseconds.
# pci=noacpi: PCI IRQ routing without the ACPI interpreter (~0.3 s per device
#   under TCG; the devices use MSI-X anyway).
# cryptomgr.notests: no crypto self-tests at boot (~0.5 s).
# mitigations=off: no speculation workarounds; guest code runs faster.
append="console=ttyS0 loglevel=$loglevel panic=-1 tsc=reliable pci=noacpi cryptomgr.notests mitigations=off"
append+=" nvme.poll_queues=1 ioswitch.xfer=$tmp ${IOSWITCH_VM_APPEND:-}"
# Extra qemu arguments (word-split): more devices, other firmware, ...
read -r -a extra_qemu <<<"${IOSWITCH_VM_QEMU_ARGS:-}"
# --nvdimm: two NVDIMMs backed by sparse files, hot-pluggable memory beside the
# 2 GiB of RAM (slots = one per NVDIMM; maxmem covers RAM + both). No label
# area: each is one raw namespace that ndctl reconfigures in place (fsdax,
# devdax); align=2M lets a devdax namespace keep its 2 MiB alignment.
mem=2G
nvdimm_args=()
if ((nvdimm)); then
    # Without ACPI's PCI routing the kernel cannot claim the firmware's BARs and
    # reassigns them to the first free addresses above 4 GiB: the NVDIMMs' range
    # (virtio and NVMe then fail to probe). ACPI routing costs ~1 s of boot.
    append=${append/ pci=noacpi/}
    mem=2G,slots=2,maxmem=3G
    nvdimm_args=(-machine nvdimm=on)
    for n in 0 1; do
        # In the --disk-dir too (kept, as the NVMe images are): a later run boots on them.
        [[ -e $imgdir/pmem$n.img ]] || truncate -s 256M "$imgdir/pmem$n.img"
        nvdimm_args+=(-object "memory-backend-file,id=pmem$n,share=on,mem-path=$imgdir/pmem$n.img,size=256M,align=2M"
            -device "nvdimm,id=nvdimm$n,memdev=pmem$n")
    done
fi
drive() { echo "file=$imgdir/$1.img,if=none,id=$1,format=raw,cache=unsafe,discard=unmap"; }
# --iommu: q35 and an emulated Intel IOMMU, so that vfio-pci can take a controller
# (Debian's kernel has no vfio no-IOMMU mode); iommu=pt keeps the kernel's own devices
# on identity mappings (no translation cost for nvme0 and virtio). The second
# controller sits at a fixed address (its -device comes before every device that takes
# a free slot); init holds it back from the nvme driver until nvme0 is live, then
# binds it, so it is nvme1 whatever order the probes run in.
iommu_pci=0000:00:05.0
machine=()
if ((iommu)); then
    # no_timer_check: on a loaded host the TCG guest's early check of the timer through the
    # interrupt-remapped IO-APIC can miss its ticks and panic the boot ("timer doesn't work
    # through Interrupt-remapped IO-APIC"); the timer works, the check is what fails.
    append+=" intel_iommu=on iommu=pt no_timer_check"
fi
# --pci: the same machine, controller and hugepages without the IOMMU (uio_pci_generic).
if ((iommu || pci)); then
    append+=" hugepages=64 ioswitch.pci_hold=$iommu_pci ioswitch.pci_hold_ns=2"
    machine=(-machine q35)
    if ((iommu)); then machine+=(-device intel-iommu); fi
    # mdts=10: 4 MiB per command (QEMU's default is 7, 512 KiB), more than one PRP list
    # page describes, so the user-space driver's chained PRP lists are exercised.
    # shellcheck disable=SC2054 # the commas belong to qemu's option syntax
    machine+=(
        -drive "$(drive pci1)" -drive "$(drive pci2)"
        -device "nvme,serial=ioswitch-vm-1,id=nvme1,addr=${iommu_pci#0000:00:},mdts=10"
        -device nvme-ns,bus=nvme1,drive=pci1,nsid=1,logical_block_size=512,physical_block_size=512
        -device nvme-ns,bus=nvme1,drive=pci2,nsid=2,logical_block_size=512,physical_block_size=512,zoned=true,zoned.zone_size=4M,zoned.zone_capacity=3M
    )
fi
# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
qemu=(
    qemu-system-x86_64
    -accel tcg -cpu max -smp 2 -m "$mem"
    "${machine[@]}"
    -nodefaults -nographic -no-reboot -pidfile "$tmp/qemu.pid"
    -kernel "$kernel" -initrd "$initrd" -append "$append"
    -chardev "file,id=con,path=$console_path" -serial chardev:con
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
    "${rw_args[@]}"
    -device virtio-serial-pci,id=vser,max_ports=4
    -chardev "file,id=ctl,path=$tmp/ctl.fifo" -device virtserialport,bus=vser.0,chardev=ctl,name=ctl
    -chardev "file,id=out,path=$tmp/out.fifo" -device virtserialport,bus=vser.0,chardev=out,name=stdout
    -chardev "file,id=err,path=$tmp/err.fifo" -device virtserialport,bus=vser.0,chardev=err,name=stderr
    -drive "$(drive ns1)" -drive "$(drive ns2)" -drive "$(drive ns3)"
    -device nvme,serial=ioswitch-vm-0,id=nvme0
    -device nvme-ns,bus=nvme0,drive=ns1,nsid=1,logical_block_size=512,physical_block_size=512
    -device nvme-ns,bus=nvme0,drive=ns2,nsid=2,logical_block_size=4096,physical_block_size=4096
    -device nvme-ns,bus=nvme0,drive=ns3,nsid=3,logical_block_size=512,physical_block_size=512,zoned=true,zoned.zone_size=4M,zoned.zone_capacity=3M
    "${nvdimm_args[@]}"
    "${extra_qemu[@]}"
)

# ------------------------------------------------------------ boot
t0=$EPOCHREALTIME
timeout --kill-after=5 "$timeout" "${qemu[@]}" </dev/null >"$tmp/qemu.log" 2>&1 &
qpid=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=
t_end=$EPOCHREALTIME

# Make sure every reader sees end-of-file (a fifo qemu never opened would
# leave its reader blocked in open): open each read-write once, then wait.
for f in out err ctl console; do
    [[ -p $tmp/$f.fifo ]] || continue
    exec {nudge}<>"$tmp/$f.fifo"
    exec {nudge}>&-
done
for _ in $(seq 50); do
    alive=0
    for p in "${readers[@]}"; do
        kill -0 "$p" 2>/dev/null && alive=1
    done
    ((alive)) || break
    sleep 0.1
done

show_console() {
    if [[ -s $tmp/console.log ]] && ((verbose == 0)); then
        say "last lines of the guest console:"
        tail -n "${1:-25}" "$tmp/console.log" | sed 's/^/vm-console: /' >&2
    fi
    if [[ -s $tmp/qemu.log ]]; then
        say "qemu said:"
        sed 's/^/vm-qemu: /' "$tmp/qemu.log" >&2
    fi
}

ctl_field() { awk -v k="$1" '$2 == k {print $0; exit}' "$tmp/ctl.log" 2>/dev/null; }
start_line=$(ctl_field start)
exit_line=$(ctl_field exit)
fail_line=$(ctl_field fail)

elapsed=$(awk -v a="$t0" -v b="$t_end" 'BEGIN {printf "%d", b - a}')
if ((qrc == 124 || qrc == 137)) && ((elapsed >= timeout)); then
    if [[ -n $start_line ]]; then
        say "TIMEOUT: the command did not finish within ${timeout} s (boot included); guest killed"
    else
        say "TIMEOUT: the guest did not reach the command within ${timeout} s; guest killed"
        show_console
    fi
    exit 124
fi
if [[ -n $stop_on && -e $tmp/stopped ]]; then
    say "power cut: qemu killed when the command printed '$stop_on'"
    exit 0
fi
if [[ -n $fail_line ]]; then
    say "guest setup failed: ${fail_line#* fail }"
    show_console
    exit 125
fi
if [[ -z $exit_line ]]; then
    say "the guest stopped without reporting an exit status (qemu exit status $qrc)"
    show_console 40
    exit 125
fi

read -r _ _ rc _ <<<"$exit_line"
if ((timing)); then
    read -r t_start _ up_start <<<"$start_line"
    read -r t_exit _ _ up_exit <<<"$exit_line"
    awk -v t0="$t0" -v ts="$t_start" -v te="$t_exit" -v tend="$t_end" -v us="$up_start" -v ue="$up_exit" 'BEGIN {
        printf "vm: timing: boot-to-command %.2f s (guest uptime at start %.2f s), command %.2f s, shutdown %.2f s, total %.2f s\n",
            ts - t0, us, ue - us, tend - te, tend - t0 }' >&2
fi
exit "$rc"
