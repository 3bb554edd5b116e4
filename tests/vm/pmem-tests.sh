#!/usr/bin/env bash
# tests/vm/pmem-tests.sh — persistent memory for real, in one QEMU guest boot with two
# emulated NVDIMMs (tests/vm/run.sh --nvdimm):
#
#   1. builds here: the ioswitch test binaries (cargo test -p ioswitch --no-run; the
#      executables from cargo's JSON messages, test_bin of driver-lib.sh) and tests/vm/dax-probe.c (cc), a probe of
#      DAX that does not use ioswitch;
#   2. in the guest:
#      - loads nfit, nd_pmem, dax_pmem, device_dax, crc32c_generic (ext4 needs crc32c and
#        the guest's on-demand module loader cannot find it), ext4 and loop;
#      - with ndctl: the first NVDIMM's raw namespace becomes fsdax (/dev/pmemN, ext4
#        made with -b 4096 — a 1 KiB block size disables DAX — mounted -o dax), the
#        second's devdax (/dev/daxN.M, 2 MiB alignment);
#      - proves DAX with dax-probe: a file on the mount maps with MAP_SHARED_VALIDATE |
#        MAP_SYNC (the kernel grants MAP_SYNC only on DAX) and stores through it read back
#        with pread; the same probe on a /dev/shm file must be refused (the probe can
#        fail); the devdax device maps with MAP_SYNC at its alignment and refuses a
#        mapping of half of it;
#      - exports IOSWITCH_PMEM=1, IOSWITCH_PMEM_DIR (a directory on the DAX mount) and
#        IOSWITCH_PMEM_DEVDAX (the devdax device), and runs the conformance suite with its
#        file and loop rows on the DAX file system (TMPDIR there): nothing may be skipped,
#        and its rows "pmem fsdax" and "pmem devdax" must be there with the pmem cell and
#        the pmem+pop cell (pmem_populate=1) passed;
#      - runs the pmem integration tests (crates/ioswitch/tests/pmem.rs), ignored ones
#        included: every test listed must pass, none may skip a part;
#   3. prints a summary; exits non-zero when anything failed.
#
# Usage: tests/vm/pmem-tests.sh
# (In the guest, `pmem-tests.sh --guest-then PROBE -- COMMAND...` does the set-up and the
# probes, then runs COMMAND with IOSWITCH_PMEM_DIR / IOSWITCH_PMEM_DEVDAX set: what
# `scripts/pmem-study --guest` boots.)
# Environment: IOSWITCH_VM_TIMEOUT (seconds for the whole guest run, default 600).
set -euo pipefail
# (The argument check first, without dirname: it needs no PATH.)
vm=${BASH_SOURCE[0]%/*} && [ "$vm" != "${BASH_SOURCE[0]}" ] || vm=.
# shellcheck source=scripts/args.sh
. "$vm/../../scripts/args.sh"
stage_arguments "$0" 0 "$@"

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)

if [[ ${1:-} == --guest || ${1:-} == --guest-then ]]; then
    # ------------------------------------------------------------ inside the guest
    # --guest PROBE CONFORMANCE: the stage. --guest-then PROBE -- COMMAND...: the same
    # set-up and probes, then COMMAND with the environment below (scripts/pmem-study --guest).
    mode=$1 probe=$2 conf_exe=${3:-} pmem_exe=${4:-}
    if [[ $mode == --guest-then ]]; then
        shift 2
        [[ ${1:-} == -- ]] && shift
        then_cmd=("$@")
    fi
    out=$(mktemp -d)
    mods=${IOSWITCH_VM_MODROOT:-/}
    results=()
    failed=0
    result() { # PASS|FAIL what
        results+=("$(printf '%-5s %s' "$1" "$2")")
        [[ $1 == PASS ]] || failed=1
    }
    # Where a step cannot go on, the rest cannot run: report and stop.
    fatal() {
        result FAIL "$1"
        printf '\n==== summary (guest kernel %s)\n' "$(uname -r)"
        printf '%s\n' "${results[@]}"
        exit 1
    }
    json_field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^\",]*\)\"\{0,1\}.*/\1/p" | head -n 1; }

    echo "==== modules"
    # The host's ndctl package has an install hook for libnvdimm (ndctl load-keys, then a
    # modprobe that looks in the host's /lib/modules): load libnvdimm without it.
    modprobe -d "$mods" --ignore-install libnvdimm 2>"$out/mod.err" ||
        fatal "modprobe libnvdimm: $(cat "$out/mod.err")"
    for m in nfit nd_pmem dax_pmem device_dax crc32c_generic ext4 loop; do
        modprobe -d "$mods" "$m" 2>"$out/mod.err" || fatal "modprobe $m: $(cat "$out/mod.err")"
    done
    echo "guest: loaded libnvdimm nfit nd_pmem dax_pmem device_dax crc32c_generic ext4 loop"
    regions=()
    for _ in $(seq 100); do
        mapfile -t regions < <(ndctl list -R 2>/dev/null | sed -n 's/.*"dev":"\(region[0-9]*\)".*/\1/p' | sort -V)
        ((${#regions[@]} >= 2)) && break
        sleep 0.1
    done
    ((${#regions[@]} == 2)) ||
        fatal "NVDIMM regions: want 2 (run.sh --nvdimm), ndctl lists ${#regions[@]}: $(ndctl list -R 2>&1 | tr -s ' \n' ' ')"
    result PASS "NVDIMM regions: ${regions[*]} (nfit)"

    echo "==== namespaces (ndctl)"
    ndctl create-namespace -f -e "namespace${regions[0]#region}.0" -m fsdax >"$out/fsdax.json" 2>"$out/ns.err" ||
        fatal "ndctl create-namespace -m fsdax on ${regions[0]}: $(cat "$out/ns.err")"
    ndctl create-namespace -f -e "namespace${regions[1]#region}.0" -m devdax >"$out/devdax.json" 2>"$out/ns.err" ||
        fatal "ndctl create-namespace -m devdax on ${regions[1]}: $(cat "$out/ns.err")"
    cat "$out/fsdax.json" "$out/devdax.json"
    blockdev=$(json_field blockdev <"$out/fsdax.json")
    chardev=$(json_field chardev <"$out/devdax.json")
    align=$(json_field align <"$out/devdax.json")
    [[ -n $blockdev && -b /dev/$blockdev ]] || fatal "fsdax namespace: no block device (ndctl said: $(tr -s ' \n' ' ' <"$out/fsdax.json"))"
    [[ -n $chardev && -c /dev/$chardev ]] || fatal "devdax namespace: no char device (ndctl said: $(tr -s ' \n' ' ' <"$out/devdax.json"))"
    [[ $align =~ ^[0-9]+$ ]] || fatal "devdax namespace: no alignment in ndctl's output"
    result PASS "namespaces: fsdax /dev/$blockdev on ${regions[0]}, devdax /dev/$chardev on ${regions[1]} (align $align)"

    echo "==== ext4 -o dax on /dev/$blockdev"
    mnt=/run/pmem
    mkdir -p "$mnt"
    mkfs.ext4 -q -F -b 4096 "/dev/$blockdev" >"$out/mkfs.log" 2>&1 || fatal "mkfs.ext4 -b 4096 /dev/$blockdev: $(cat "$out/mkfs.log")"
    mount -t ext4 -o dax "/dev/$blockdev" "$mnt" 2>"$out/mount.err" || fatal "mount -o dax /dev/$blockdev: $(cat "$out/mount.err")"
    opts=$(awk -v d="/dev/$blockdev" '$1 == d {print $4}' /proc/mounts)
    if [[ ,$opts, == *,dax=always,* || ,$opts, == *,dax,* ]]; then
        result PASS "ext4 on /dev/$blockdev mounted on $mnt ($opts)"
    else
        result FAIL "ext4 on /dev/$blockdev mounted on $mnt without dax in its options: '$opts'"
    fi

    echo "==== DAX probes ($probe, no ioswitch code)"
    truncate -s 4M "$mnt/dax-probe" /dev/shm/dax-probe
    set +e
    "$probe" file "$mnt/dax-probe"
    rc=$?
    if ((rc == 0)); then
        result PASS "MAP_SYNC mapping of a file on $mnt granted, data read back"
    else
        result FAIL "MAP_SYNC mapping of a file on $mnt (dax-probe exit $rc)"
    fi
    "$probe" file /dev/shm/dax-probe
    rc=$?
    if ((rc == 3)); then
        result PASS "MAP_SYNC refused on /dev/shm (tmpfs): the probe tells DAX apart"
    else
        result FAIL "MAP_SYNC on /dev/shm: dax-probe exit $rc, want 3 (refused)"
    fi
    "$probe" devdax "/dev/$chardev" "$align"
    rc=$?
    if ((rc == 0)); then
        result PASS "devdax /dev/$chardev: MAP_SYNC at $align bytes, half of it refused"
    else
        result FAIL "devdax /dev/$chardev probe (dax-probe exit $rc)"
    fi
    set -e
    rm -f "$mnt/dax-probe" /dev/shm/dax-probe

    mkdir -p "$mnt/ioswitch" "$mnt/tmp"
    export IOSWITCH_PMEM=1 IOSWITCH_PMEM_DIR=$mnt/ioswitch IOSWITCH_PMEM_DEVDAX=/dev/$chardev
    echo "guest: IOSWITCH_PMEM=1 IOSWITCH_PMEM_DIR=$IOSWITCH_PMEM_DIR IOSWITCH_PMEM_DEVDAX=$IOSWITCH_PMEM_DEVDAX"
    if [[ $mode == --guest-then ]]; then
        ((failed == 0)) || fatal "the set-up above failed: not running ${then_cmd[*]}"
        echo "==== ${then_cmd[*]}"
        exec "${then_cmd[@]}"
    fi

    echo "==== conformance suite: $conf_exe (TMPDIR=$mnt/tmp)"
    set +e
    TMPDIR=$mnt/tmp "$conf_exe" 2>&1 | tee "$out/conf.log"
    conf_rc=${PIPESTATUS[0]}
    set -e
    conf_line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/conf.log" | tail -n 1 || true)
    if ((conf_rc != 0)); then
        result FAIL "conformance/ (exit $conf_rc): ${conf_line:-no summary line}"
    elif [[ ! $conf_line =~ ,\ 0\ skipped$ ]]; then
        result FAIL "conformance/: cases were skipped or no summary line: ${conf_line:-none}"
    else
        result PASS "conformance/ (file and loop rows on the DAX ext4): $conf_line"
    fi
    # The rows this stage exists for: both ran, no cell failed or was skipped, and their
    # pmem and pmem+pop (pmem_populate=1) cells passed (the other columns: passed, or n/a
    # where the table refuses them).
    checked=0
    while IFS= read -r line; do
        checked=$((checked + 1))
        case $line in
            PASS*) result PASS "${line#PASS }" ;;
            *) result FAIL "${line#FAIL }" ;;
        esac
    done < <(python3 - "$out/conf.log" <<'PY'
import re, sys
header, rows = None, {}
for line in open(sys.argv[1]):
    if line.startswith("device \\ interface"):
        header = line.split()[3:]
    m = re.match(r"^pmem (fsdax|devdax)(?: \([^)]*\))? +(.*)$", line.rstrip("\n"))
    if m and header:
        rows[m.group(1)] = dict(zip(header, m.group(2).split()))
for name in ("fsdax", "devdax"):
    cells = rows.get(name)
    if cells is None:
        print(f"FAIL conformance/: no 'pmem {name}' row in the matrix")
    elif cells.get("pmem") != "PASS" or cells.get("pmem+pop") != "PASS" or any(v not in ("PASS", "n/a") for v in cells.values()):
        print(f"FAIL conformance/ row 'pmem {name}': " + " ".join(f"{k}={v}" for k, v in cells.items()))
    else:
        print(f"PASS conformance/ row 'pmem {name}': pmem and pmem+pop PASS; " + " ".join(f"{k}={v}" for k, v in cells.items()))
PY
    )
    ((checked == 2)) || result FAIL "conformance/: the pmem rows were not checked (python3 gave $checked verdicts, not 2)"

    echo "==== pmem integration tests: $pmem_exe"
    set +e
    "$pmem_exe" --include-ignored --test-threads=1 2>&1 | tee "$out/pmem.log"
    pmem_rc=${PIPESTATUS[0]}
    set -e
    # Every test listed ran and passed, and none skipped a part (they print "skipped").
    listed=$("$pmem_exe" --list --include-ignored 2>/dev/null | grep -c ': test$' || true)
    line=$(grep -E '^test result:' "$out/pmem.log" | tail -n 1 || true)
    skipped=$(grep -i 'skipped' "$out/pmem.log" | head -n 3 | tr -s '\n' ' ' || true)
    if ((pmem_rc != 0)) || [[ ! $line =~ ok\.\ ${listed}\ passed\;\ 0\ failed\;\ 0\ ignored ]]; then
        result FAIL "tests/pmem.rs (exit $pmem_rc, $listed listed): ${line:-no libtest summary}"
    elif [[ -n $skipped ]]; then
        result FAIL "tests/pmem.rs: a test skipped a part: $skipped"
    else
        result PASS "tests/pmem.rs: $line"
    fi

    printf '\n==== summary (guest kernel %s)\n' "$(uname -r)"
    printf '%s\n' "${results[@]}"
    exit "$failed"
fi

# ---------------------------------------------------------------- on this machine
cd "$root"
echo "==== building the test binaries (cargo test -p ioswitch --no-run) and dax-probe"
# shellcheck source=tests/vm/driver-lib.sh
source "$here/driver-lib.sh"
conf_exe=$(test_bin conformance) || exit 2
pmem_exe=$(test_bin pmem) || exit 2
mkdir -p target/pmem-vm
probe=$root/target/pmem-vm/dax-probe
${CC:-cc} -O2 -Wall -Wextra -Werror -o "$probe" "$here/dax-probe.c"
echo "conformance: $conf_exe"
echo "pmem:        $pmem_exe"
echo "dax-probe:   $probe"
"$here/setup.sh" --quick >/dev/null
echo "==== running in the guest (tests/vm/run.sh --nvdimm)"
exec "$here/run.sh" --nvdimm --timeout "${IOSWITCH_VM_TIMEOUT:-600}" -- \
    bash "$here/pmem-tests.sh" --guest "$probe" "$conf_exe" "$pmem_exe"
