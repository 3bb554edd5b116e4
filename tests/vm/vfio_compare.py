#!/usr/bin/env python3
"""Compares what the user-space driver (ioswitch on a PCI address) reports with what
nvme-cli reported for the same controller while the kernel's nvme driver owned it, field
by field (tests/vm/vfio-driver-tests.sh runs it in the guest). Reuses the comparisons of
the oracle tests (oracle_check.py).

  vfio_compare.py id-ctrl|id-ns|smart|zones KERNEL.json DRIVER.json
  vfio_compare.py zone-steps APPEND.json OPENED.json FINISHED.json RESET.json

Exit status 1 when anything differs.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_check as oc  # noqa: E402

# SMART fields the two reads may differ in: counters that grow with the commands and the
# time between the kernel's read and the driver's (the driver's own identify, queue
# creation and I/O happened in between). Each must not have gone down.
SMART_COUNTERS = (
    "data_units_read",
    "data_units_written",
    "host_read_commands",
    "host_write_commands",
    "controller_busy_time",
    "power_cycles",
    "power_on_hours",
    "unsafe_shutdowns",
)


def load(p):
    with open(p) as f:
        return json.load(f)


def id_ctrl(k, d):
    oc.compare_id_ctrl("identify controller", k, d)


def id_ns(k, d):
    k, mapping = oc.id_ns_theirs(k)
    oc.compare("identify namespace (all fields but LBA formats)", k, d, mapping, skip_keys=("lbafs",))
    same = k.get("lbafs") == d.get("lbafs")
    oc.report(same, "identify namespace LBA formats", "all equal" if same else f"{k.get('lbafs')} vs {d.get('lbafs')}")


def smart(k, d):
    oc.compare("SMART log (all but the counters)", k, d, oc.smart_map(k, d), skip_keys=SMART_COUNTERS)
    down = [f"{c}: kernel {k[c]} driver {d[c]}" for c in SMART_COUNTERS
            if c in k and oc.norm(d.get(c, -1)) < oc.norm(k[c])]
    oc.report(not down, "SMART counters did not go down", "; ".join(down) or f"{len(SMART_COUNTERS)} counters")


def zones(k, d):
    diffs = []
    if k["nr_zones"] != d["nr_zones"]:
        diffs.append(f"nr_zones: kernel {k['nr_zones']} driver {d['nr_zones']}")
    kz, dz = k.get("zone_list", []), d.get("zones", [])
    if len(kz) != len(dz):
        diffs.append(f"kernel lists {len(kz)} zones, driver {len(dz)}")
    for t, o in zip(kz, dz):
        # The driver's open resets the controller, and a Controller Level Reset closes
        # every open zone (ZNS spec, "Zone Management"): what the kernel saw opened, the
        # driver must see closed, with the same write pointer.
        want = {"IMP_OPENED": "CLOSED", "EXP_OPENED": "CLOSED"}.get(t["state"], t["state"])
        for name, a, b in [("slba", t["slba"], o["zslba"]), ("cap", t["cap"], o["capacity"]),
                           ("state", want, oc.STATES.get(o["state"], o["state"])),
                           ("attrs", t["attrs"], o["attrs"]["raw"]), ("wp", t["wp"], o["wp"])]:
            if a != b:
                diffs.append(f"zone {t['slba']:#x} {name}: kernel {a!r} driver {b!r}")
    states = sorted({z["state"] for z in kz})
    oc.report(not diffs, "zone report", "; ".join(diffs[:8]) or f"{len(kz)} zones equal (states {', '.join(states)})")


def zone_steps(append, opened, finished, reset):
    z = 0x4000
    pick = lambda r: next(x for x in r["zones"] if x["zslba"] == z)  # noqa: E731
    a, o, f, r = append, pick(opened), pick(finished), pick(reset)
    checks = [
        ("append wrote at the zone's start", a["lba"] == z, a),
        # Each CLI command is a new open, which resets the controller: the zone opened by
        # one command is closed (not empty) when the next looks, holding the data.
        ("open, append, reopen: closed, write pointer past the data",
         o["state"] == "closed" and o["wp"] == z + a["nlb"], o),
        ("finish: full", f["state"] == "full", f),
        ("reset: empty, write pointer at the start", r["state"] == "empty" and r["wp"] == z, r),
    ]
    for name, ok, got in checks:
        oc.report(ok, f"zone {z:#x}: {name}", "as expected" if ok else f"got {got}")


def main():
    what, files = sys.argv[1], [load(p) for p in sys.argv[2:]]
    {"id-ctrl": id_ctrl, "id-ns": id_ns, "smart": smart, "zones": zones, "zone-steps": zone_steps}[what](*files)
    print(f"{oc.RESULTS['passed']} passed, {oc.RESULTS['failed']} failed")
    return 0 if oc.RESULTS["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
