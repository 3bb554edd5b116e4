//! Conformance suite: one set of checks, run over every (device kind × interface) this
//! machine supports (DESIGN.md, "Testing").
//!
//! A plain `main` (`harness = false`). It prints a matrix (one row per device kind, one
//! column per interface), then every failure with its case and error, every skip and n/a
//! with its reason, and ends with the line `N passed, N failed, N skipped` (counting
//! cases; an n/a cell counts one passed case: its refusal at open was checked). It exits
//! non-zero when anything failed.
//!
//! Every case runs under `catch_unwind` (one failing case does not hide the others) and a
//! watchdog (a hang ends the run with a failure instead of blocking CI).
//!
//! Rows: files (on a disk file system and on /dev/shm), a loop device, a ramdisk; and,
//! where NVMe namespaces exist and may be overwritten (the QEMU guest of tests/vm,
//! `IOSWITCH_VM=1`, or `IOSWITCH_CONFORMANCE_NVME=1`), each namespace found through
//! /sys/block/*/nsid: conventional ones as block device (buffered and direct=1) and
//! generic char device with the NVMe columns (sync=nvme, io_uring with iopoll,
//! io_uring_cmd with sqpoll / iopoll, ...), zoned ones as block device (direct=1) and
//! char device with the zone cases. Elsewhere the NVMe rows are absent and the run says
//! why. Persistent memory: the `pmem` column and `pmem+pop` (`pmem_populate=1`) beside
//! it (with `pmem_force=1` on the /dev/shm row; refused on a file that is not DAX), and the rows `pmem fsdax` (`IOSWITCH_PMEM_DIR`, a
//! directory on ext4 mounted `-o dax`) and `pmem devdax` (`IOSWITCH_PMEM_DEVDAX`, a
//! `/dev/daxX.Y`), skipped with the reason where unset on the host, failed in the guest
//! when `IOSWITCH_PMEM=1` says they must be there, and absent (the run says why) in a
//! guest run without `IOSWITCH_PMEM=1`. `tests/vm/nvme-tests.sh` runs the suite in the guest.
//! The user-space driver: the `vfio` column (refused by every other kind of device) and
//! the rows of the namespaces of the controller `IOSWITCH_VFIO_PCI` names (bound to
//! vfio-pci; their geometry in `IOSWITCH_VFIO_NS`, read from the kernel before the bind),
//! where every other column must be refused; skipped with the reason on the host when
//! unset; `tests/vm/vfio-driver-tests.sh` runs them in the `--iommu` guest.
//! `IOSWITCH_CONFORMANCE_ROWS=tag,...` runs only the rows with those tags.

use crate::probe::{probe_main, PROBE_ENV};
use crate::rows::{find_nvme, nvme_rows, pci_rows, pmem_required, pmem_rows, setup_rows};
use crate::runner::{install_panic_hook, run_matrix, start_watchdog};
use ioswitch_testkit::loopdev::LoopDev;
use std::time::{Duration, Instant};

/// Size of every device: 1 MiB plus three 4 KiB blocks, so a chunked pass over it ends
/// with a short command that reaches the last LBA exactly.
pub(crate) const DEV_BYTES: u64 = (1 << 20) + 12 * 1024;
pub(crate) const RAMDISK_URI: &str = "1036KiB";
/// NVMe namespaces are larger than DEV_BYTES: the whole-range passes cover their first
/// DEV_BYTES and their last TAIL_BYTES (again no multiple of the chunk sizes).
pub(crate) const TAIL_BYTES: u64 = 64 * 1024 + 12 * 1024;
pub(crate) const KIB: u64 = 1024;
/// Queue depth of the data passes.
pub(crate) const QD: u32 = 16;
/// A case that runs longer than this is a hang: the run stops with a failure.
pub(crate) const CASE_LIMIT: Duration = Duration::from_secs(30);
/// What the files this suite makes (loop backing files, probes) are named after.
pub(crate) const PREFIX: &str = "ioswitch-conformance";
pub(crate) const NOT_DONE: &str = "not part of this build";
/// Runs only the rows with these tags (comma-separated, e.g. `pci,pci-zoned`): a stage
/// that tests one kind of device leaves the others to the stages that own them.
pub(crate) const ROWS_ENV: &str = "IOSWITCH_CONFORMANCE_ROWS";

pub(crate) type Res = Result<String, String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

mod cases;
mod ctx;
mod probe;
mod report;
mod rows;
mod runner;

fn main() {
    if let Some(spec) = std::env::var_os(PROBE_ENV) {
        std::process::exit(probe_main(&spec.to_string_lossy()));
    }
    install_panic_hook();
    start_watchdog();
    let t0 = Instant::now();
    let verbose = std::env::var_os("IOSWITCH_CONFORMANCE_VERBOSE").is_some();
    println!("ioswitch conformance: every (device kind x interface), {} KiB devices", DEV_BYTES / KIB);
    let (mut rows, loopdev) = setup_rows();
    // In the guest, a run without the pmem stage (IOSWITCH_PMEM unset: nvme-tests.sh,
    // which allows no skipped case) has no pmem rows, and says so.
    let guest = std::env::var_os("IOSWITCH_VM").is_some_and(|v| v == "1");
    if guest && !pmem_required() {
        println!("pmem rows: none: IOSWITCH_PMEM=1 is not set (the guest's pmem stage sets it with the rows' devices)");
    } else {
        rows.extend(pmem_rows());
    }
    match find_nvme() {
        Ok(found) => {
            for ns in &found {
                println!("{}", ns.describe());
            }
            rows.extend(nvme_rows(&found));
        }
        Err(why) => println!("NVMe rows: none: {why}"),
    }
    // The PCI rows: skipped with the reason on the host when IOSWITCH_VFIO_PCI is unset;
    // absent (the run says why) in a guest run that has no controller bound to vfio-pci.
    if guest && std::env::var_os(crate::rows::VFIO_PCI_ENV).is_none() {
        println!("PCI rows: none: IOSWITCH_VFIO_PCI is not set (tests/vm/vfio-driver-tests.sh binds 0000:00:05.0 and sets it)");
    } else {
        rows.extend(pci_rows());
    }
    if let Some(only) = std::env::var_os(ROWS_ENV) {
        let only = only.to_string_lossy().into_owned();
        let tags: Vec<&str> = only.split(',').filter(|t| !t.is_empty()).collect();
        for t in &tags {
            if !rows.iter().any(|r| r.kind.tag() == *t) {
                let have: Vec<&str> = rows.iter().map(|r| r.kind.tag()).collect();
                println!("{ROWS_ENV}={only}: no row here is tagged {t:?} (the rows here: {})", have.join(", "));
                std::process::exit(2);
            }
        }
        let before = rows.len();
        rows.retain(|r| tags.contains(&r.kind.tag()));
        println!("rows: only those tagged {only} ({ROWS_ENV}): {} of {before} rows run", rows.len());
    }
    let results = run_matrix(&rows, verbose);
    let teardown = loopdev.and_then(LoopDev::teardown);
    let failed = report::print(&rows, &results, teardown, t0);
    std::process::exit(if failed { 1 } else { 0 });
}
