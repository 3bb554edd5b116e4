#!/usr/bin/env python3
"""Peers as oracles, run inside the guest (tests/vm/oracle-tests.sh starts it there).

Compares, field by field, what nvme-cli and ioswitch report for the same NVMe device:
identify controller, identify namespace (512 B and 4 KiB formats), SMART / health log,
firmware slot log, error log, features, and zone reports (through the NVMe char device
and through the block layer), after changing zone states with ioswitch. Then runs a
verify job through io_uring passthrough (/dev/ngXnY) with fio and with
`ioswitch bench`.

Prints one line per compared field group (PASS/FAIL/SKIP) and ends with
`N passed, N failed`; the exit status is 1 when anything failed.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

IOSWITCH = os.environ.get("IOSWITCH", "target/debug/ioswitch")
RESULTS = {"passed": 0, "failed": 0}


def report(ok, group, detail):
    RESULTS["passed" if ok else "failed"] += 1
    print(f"{'PASS' if ok else 'FAIL'}  {group}: {detail}", flush=True)


def skip(group, why):
    """In the guest (IOSWITCH_VM=1) nothing may go unchecked: a skip is a failure there."""
    if os.environ.get("IOSWITCH_VM") == "1":
        return report(False, group, f"would be skipped in the guest: {why}")
    print(f"SKIP  {group}: {why}", flush=True)


def run(args, want_json=True):
    """Runs a command; returns (parsed JSON or text, None) or (None, error text)."""
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()[:400]}"
    if not want_json:
        return p.stdout, None
    try:
        # fio may print notes ("Laying out IO file") before its JSON.
        return json.loads(p.stdout[p.stdout.find("{"):]), None
    except json.JSONDecodeError as e:
        return None, f"{' '.join(args)}: output is not JSON ({e}): {p.stdout[:200]!r}"


def norm(v):
    """One representation for both tools: nvme-cli prints 128-bit numbers as strings,
    pads ASCII fields with spaces and prints identifiers as hex strings; ioswitch prints
    numbers, trimmed strings and byte arrays."""
    if isinstance(v, str):
        s = v.rstrip(" \x00")
        if re.fullmatch(r"[0-9]+", s):
            return int(s)
        if re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}", s):
            return s.replace("-", "").lower()
        return s
    if isinstance(v, list) and v and all(isinstance(x, int) and 0 <= x <= 255 for x in v) and len(v) >= 8:
        return "".join(f"{x:02x}" for x in v)
    return v


def id_hex(v):
    """EUI-64 / NGUID: nvme-cli gives hex strings, ioswitch byte arrays."""
    if isinstance(v, list):
        return "".join(f"{x:02x}" for x in v)
    return str(v).replace("-", "").lower()


# Fields nvme-cli reports that ioswitch may leave out, by nvme-cli's key, each with the
# reason. Empty: every field nvme-cli prints has an ioswitch counterpart; a field missing
# from ioswitch fails its group unless it is listed here.
MISSING_OK = {}


def compare(group, theirs, ours, mapping=None, skip_keys=()):
    """Compares every field of nvme-cli's dict `theirs` with ioswitch's `ours`.
    `mapping`: nvme-cli key -> ioswitch key, or a function(ours) -> value."""
    mapping = mapping or {}
    equal, diffs, missing = 0, [], []
    for k, tv in theirs.items():
        if k in skip_keys:
            continue
        m = mapping.get(k, k)
        if callable(m):
            try:
                ov = m(ours)
            except (KeyError, IndexError, TypeError) as e:
                missing.append(f"{k} ({e})")
                continue
        elif m in ours:
            ov = ours[m]
        else:
            missing.append(k)
            continue
        if norm(tv) == norm(ov):
            equal += 1
        else:
            diffs.append(f"{k}: nvme-cli={tv!r} ioswitch={ov!r}")
    unexplained = [k for k in missing if k.split(" ")[0] not in MISSING_OK]
    ok = not diffs and not unexplained and equal > 0
    detail = f"{equal} fields equal"
    if diffs:
        detail += f", {len(diffs)} differ: " + "; ".join(diffs[:8])
    if unexplained:
        detail += f"; nvme-cli reports fields ioswitch does not: {', '.join(unexplained)}"
    allowed = [f"{k} ({MISSING_OK[k.split(' ')[0]]})" for k in missing if k.split(" ")[0] in MISSING_OK]
    if allowed:
        detail += f" (left out by the allow-list: {', '.join(allowed)})"
    report(ok, group, detail)


def namespaces():
    """nsid -> (block device, char device), from sysfs (names need not follow nsids)."""
    out = {}
    for d in sorted(glob.glob("/sys/block/nvme*n*")):
        name = os.path.basename(d)
        try:
            nsid = int(open(os.path.join(d, "nsid")).read())
        except OSError:
            continue
        m = re.fullmatch(r"nvme(\d+)n(\d+)", name)
        if m:
            out[nsid] = (f"/dev/{name}", f"/dev/ng{m.group(1)}n{m.group(2)}")
    return out


# nvme-cli's power-state keys -> ioswitch's.
PSD_MAP = {
    "max_power": "mp",
    "flags": lambda p: p["mxps"] | p["nops"] << 1,
    "entry_lat": "enlat",
    "exit_lat": "exlat",
    "read_tput": "rrt",
    "read_lat": "rrl",
    "write_tput": "rwt",
    "write_lat": "rwl",
    "idle_power": "idlp",
    "idle_scale": "ips",
    "active_power": "actp",
    "active_power_work": "apw",
    "active_scale": "aps",
}


def compare_id_ctrl(group, theirs, ours):
    """Identify controller: every field, then the power states one by one."""
    compare(f"{group} (all fields but power states)", theirs, ours, skip_keys=("psds",))
    tp, op = theirs.get("psds", []), ours.get("psds", [])
    if len(tp) != len(op):
        return report(False, f"{group} power states", f"nvme-cli lists {len(tp)}, ioswitch {len(op)}")
    for i, (t, o) in enumerate(zip(tp, op)):
        compare(f"{group} power state {i}", t, o, PSD_MAP)


def id_ns_theirs(theirs):
    """nvme-cli's identify namespace with EUI-64 and NGUID as ioswitch's hex, and the
    mapping that turns ioswitch's into the same."""
    theirs = dict(theirs)
    theirs["eui64"], theirs["nguid"] = id_hex(theirs.get("eui64", "")), id_hex(theirs.get("nguid", ""))
    return theirs, {"eui64": lambda o: id_hex(o["eui64"]), "nguid": lambda o: id_hex(o["nguid"])}


def smart_map(theirs, ours):
    """nvme-cli's SMART / health log keys -> ioswitch's (temperature sensors included)."""
    sensors = {f"temperature_sensor_{s['sensor']}": s["kelvin"] for s in ours.get("temperature_sensors", [])}
    mapping = {
        "critical_warning": lambda o: o["critical_warning"]["raw"],
        "temperature": "composite_temperature",
        "avail_spare": "available_spare",
        "spare_thresh": "available_spare_threshold",
        "percent_used": "percentage_used",
        "endurance_grp_critical_warning_summary": "endurance_group_critical_warning",
        "critical_comp_time": "critical_temp_time",
    }
    for k in theirs:
        if k.startswith("temperature_sensor_"):
            mapping[k] = lambda o, k=k: sensors[k]
    return mapping


def check_id_ctrl(ctrl):
    theirs, err = run(["nvme", "id-ctrl", ctrl, "-o", "json"])
    ours, err2 = run([IOSWITCH, "idfy", "ctrl", ctrl, "--output", "json"])
    if err or err2:
        return report(False, f"id-ctrl {ctrl}", err or err2)
    compare_id_ctrl(f"id-ctrl {ctrl}", theirs, ours)


def check_id_ns(blk, nsid, expect_lba):
    theirs, err = run(["nvme", "id-ns", blk, "-o", "json"])
    ours, err2 = run([IOSWITCH, "idfy", "ns", blk, "--output", "json"])
    if err or err2:
        return report(False, f"id-ns {blk}", err or err2)
    theirs, mapping = id_ns_theirs(theirs)
    compare(f"id-ns {blk} nsid {nsid} (all fields but LBA formats)", theirs, ours, mapping, skip_keys=("lbafs",))
    tl, ol = theirs.get("lbafs", []), ours.get("lbafs", [])
    diffs = [f"lbaf {i}: nvme-cli={t} ioswitch={o}" for i, (t, o) in enumerate(zip(tl, ol)) if t != o]
    if len(tl) != len(ol):
        diffs.append(f"nvme-cli lists {len(tl)} formats, ioswitch {len(ol)}")
    in_use = ol[ours["flbas"] & 0xF] if ol and (ours["flbas"] & 0xF) < len(ol) else None
    if in_use is None or (1 << in_use["ds"]) != expect_lba:
        diffs.append(f"format in use {in_use} is not {expect_lba}-byte LBAs")
    report(not diffs, f"id-ns {blk} nsid {nsid} LBA formats ({len(tl)}, in use: {expect_lba} B)",
           "; ".join(diffs) if diffs else "all equal")


def check_smart(ctrl):
    theirs, err = run(["nvme", "smart-log", ctrl, "-o", "json"])
    ours, err2 = run([IOSWITCH, "log", "health", ctrl, "--output", "json"])
    if err or err2:
        return report(False, f"smart-log {ctrl}", err or err2)
    compare(f"smart-log {ctrl}", theirs, ours, smart_map(theirs, ours))


def check_fw(ctrl):
    theirs, err = run(["nvme", "fw-log", ctrl, "-o", "json"])
    ours, err2 = run([IOSWITCH, "log", "fw", ctrl, "--output", "json"])
    if err or err2:
        return report(False, f"fw-log {ctrl}", err or err2)
    inner = next(iter(theirs.values()), {})
    flat, mapping = {}, {}
    for k, v in inner.items():
        if k.startswith("Active Firmware Slot"):
            flat["afi"] = v
        m = re.fullmatch(r"Firmware Rev Slot (\d)", k)
        if m:
            slot = int(m.group(1))
            flat[f"slot {slot}"] = int(str(v).split()[0])
            mapping[f"slot {slot}"] = lambda o, s=slot: next(x["revision_raw"] for x in o["slots"] if x["slot"] == s)
    compare(f"fw-log {ctrl}", flat, ours, mapping)


def check_error_log(ctrl):
    theirs, err = run(["nvme", "error-log", ctrl, "-o", "json"])
    ours, err2 = run([IOSWITCH, "log", "error", ctrl, "--output", "json"])
    if err or err2:
        return report(False, f"error-log {ctrl}", err or err2)
    te, oe = theirs.get("errors", []), ours.get("entries", [])
    if len(te) != len(oe):
        return report(False, f"error-log {ctrl}", f"nvme-cli lists {len(te)} entries, ioswitch {len(oe)}")
    for i, (t, o) in enumerate(zip(te, oe)):
        compare(f"error-log {ctrl} entry {i}", t, o)


def check_features(ctrl):
    for fid in (1, 2, 4, 6, 7):
        text, err = run(["nvme", "get-feature", ctrl, "-f", str(fid)], want_json=False)
        ours, err2 = run([IOSWITCH, "feature", "get", ctrl, "--fid", str(fid), "--output", "json"])
        group = f"get-feature {ctrl} fid {fid}"
        if err or err2:
            report(False, group, err or err2)
            continue
        m = re.search(r"Current value:\s*(?:0x)?([0-9a-fA-F]+)", text)
        if not m:
            report(False, group, f"cannot read nvme-cli's value from {text.strip()!r}")
            continue
        theirs = int(m.group(1), 16)
        ok = theirs == ours["value"]
        report(ok, f"{group} ({ours['name']})",
               f"value {theirs:#010x} equal, decoded {json.dumps(ours['decoded'])}" if ok
               else f"nvme-cli={theirs:#010x} ioswitch={ours['value']:#010x}")


STATES = {
    "empty": "EMPTY",
    "implicitly_opened": "IMP_OPENED",
    "explicitly_opened": "EXP_OPENED",
    "closed": "CLOSED",
    "read_only": "READONLY",
    "full": "FULL",
    "offline": "OFFLINE",
}


def check_zones(blk, chr_):
    # Put zones in every state a host can reach, with ioswitch's own commands.
    data = tempfile.NamedTemporaryFile(delete=False)
    data.write(os.urandom(16384))
    data.close()
    steps = [
        ["zone", "reset", chr_, "--all"],
        ["zone", "append", chr_, "--slba", "0x2000", "--data", data.name],
        ["zone", "open", chr_, "--slba", "0x4000"],
        ["zone", "finish", chr_, "--slba", "0x6000"],
        ["zone", "append", chr_, "--slba", "0x8000", "--data", data.name],
        ["zone", "close", chr_, "--slba", "0x8000"],
        ["zone", "open", blk, "--slba", "0xa000"],
        ["zone", "finish", blk, "--slba", "0xc000"],
    ]
    for s in steps:
        _, err = run([IOSWITCH] + s, want_json=False)
        if err:
            return report(False, f"zone state changes on {chr_}", err)
    theirs, err = run(["nvme", "zns", "report-zones", blk, "-o", "json"])
    if err:
        return report(False, f"report-zones {blk}", err)
    seen = sorted({z["state"] for z in theirs.get("zone_list", [])})
    for dev, via in ((chr_, "NVMe passthrough"), (blk, "block layer")):
        ours, err = run([IOSWITCH, "zone", "report", dev, "--output", "json"])
        group = f"report-zones {blk} vs ioswitch zone report {dev} ({via})"
        if err:
            report(False, group, err)
            continue
        diffs = []
        if theirs["nr_zones"] != ours["nr_zones"]:
            diffs.append(f"nr_zones: nvme-cli={theirs['nr_zones']} ioswitch={ours['nr_zones']}")
        tz, oz = theirs.get("zone_list", []), ours.get("zones", [])
        if len(tz) != len(oz):
            diffs.append(f"nvme-cli lists {len(tz)} zones, ioswitch {len(oz)}")
        fields = 0
        for t, o in zip(tz, oz):
            pairs = [
                ("slba", t["slba"], o["zslba"]),
                ("cap", t["cap"], o["capacity"]),
                ("state", t["state"], STATES.get(o["state"], o["state"])),
                ("type", t["type"], "SEQWRITE_REQ" if o["zone_type"] == "seq_write_required" else o["zone_type"]),
                ("attrs", t["attrs"], o["attrs"]["raw"]),
            ]
            # The block layer reports a full zone's write pointer at the zone's end; the
            # NVMe device reports it as not valid (all ones), which nvme-cli passes on.
            if not (via == "block layer" and t["state"] == "FULL"):
                pairs.append(("wp", t["wp"], o["wp"]))
            for name, a, b in pairs:
                fields += 1
                if a != b:
                    diffs.append(f"zone {t['slba']:#x} {name}: nvme-cli={a!r} ioswitch={b!r}")
        report(not diffs, group,
               "; ".join(diffs[:8]) if diffs else f"{len(tz)} zones, {fields} fields equal (states: {', '.join(seen)})")
    os.unlink(data.name)
    run([IOSWITCH, "zone", "reset", chr_, "--all"], want_json=False)


def check_verify(chr_):
    common = ["--name=verify", f"--filename={chr_}", "--rw=randwrite", "--bs=4k", "--size=16m",
              "--iodepth=16", "--verify=crc32c", "--do_verify=1", "--randrepeat=0"]
    fio, err = run(["fio", "--ioengine=io_uring_cmd", "--cmd_type=nvme"] + common + ["--output-format=json"])
    if err:
        report(False, f"fio io_uring_cmd verify on {chr_}", err)
    else:
        job = fio["jobs"][0]
        ok = job["error"] == 0 and job["write"]["total_ios"] > 0 and job["read"]["total_ios"] > 0
        report(ok, f"fio io_uring_cmd verify on {chr_}",
               f"error={job['error']}, {job['write']['total_ios']} writes, {job['read']['total_ios']} verify reads")
    help_text, herr = run([IOSWITCH, "bench", "--help"], want_json=False)
    if herr:
        return skip(f"ioswitch bench io_uring_cmd verify on {chr_}", "this build has no `ioswitch bench`")
    ours, err = run([IOSWITCH, "bench", "--ioengine=io_uring_cmd"] + common + ["--output-format=json", "--no-progress"])
    if err:
        return report(False, f"ioswitch bench --ioengine=io_uring_cmd verify on {chr_}", err)
    job = ours["jobs"][0]
    extra = job.get("ioswitch", {})
    writes = job["write"]["total_ios"]
    # fio counts the verify reads as reads; ioswitch bench reports them as verified blocks.
    verified = max(job["read"]["total_ios"], extra.get("verified_blocks", 0))
    ok = job["error"] == 0 and writes > 0 and verified == writes and extra.get("interface") == "io_uring_cmd"
    report(ok, f"ioswitch bench --ioengine=io_uring_cmd verify on {chr_}",
           f"error={job['error']}, {writes} writes, {verified} blocks verified "
           f"(read total_ios {job['read']['total_ios']}, verified_blocks {extra.get('verified_blocks')}), "
           f"interface {extra.get('interface')}")


def main():
    if not os.path.exists(IOSWITCH):
        print(f"oracle: {IOSWITCH} not found (build it first: cargo build -p ioswitch-cli)", file=sys.stderr)
        return 2
    ctrls = sorted(glob.glob("/dev/nvme[0-9]"))
    nss = namespaces()
    if not ctrls or not nss:
        print("oracle: no NVMe controller or namespace here (run inside tests/vm/run.sh)", file=sys.stderr)
        return 2
    ctrl = ctrls[0]
    check_id_ctrl(ctrl)
    for nsid, lba in ((1, 512), (2, 4096), (3, 512)):
        if nsid in nss:
            check_id_ns(nss[nsid][0], nsid, lba)
        else:
            skip(f"id-ns nsid {nsid}", "no such namespace")
    check_smart(ctrl)
    check_fw(ctrl)
    check_error_log(ctrl)
    check_features(ctrl)
    if 3 in nss:
        check_zones(*nss[3])
    else:
        skip("report-zones", "no zoned namespace (nsid 3)")
    if 1 in nss:
        check_verify(nss[1][1])
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 0 if RESULTS["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
