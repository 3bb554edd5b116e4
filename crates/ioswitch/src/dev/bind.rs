//! Moving a PCI NVMe controller between kernel drivers — `nvme`, `vfio-pci`,
//! `uio_pci_generic` — the way SPDK's setup script does it: the function's
//! `driver_override` names the new driver, the old one lets go (`driver/unbind`), the PCI
//! core probes again (`drivers_probe`), and the override is cleared.
//!
//! Unbinding nvme takes every namespace of the controller away from the kernel at once,
//! whatever is on them; unbinding vfio-pci or uio_pci_generic pulls a device out from
//! under the program driving it (vfio-pci even waits, unkillably, for that program to let
//! go). So before anything is written, [`bind_driver`] refuses, naming the reason, when:
//! a namespace (or a partition) is mounted, swapped on, held by device-mapper, md or any
//! sysfs holder, claimed (exclusive open), or open in any process (block device, generic
//! char device, the controller's char device, the vfio group or uio device, the BAR files
//! in sysfs, open or mapped); and for the target driver's preconditions: root, the driver
//! loaded, an IOMMU group of its own (vfio-pci), 2 MiB hugepages reserved (vfio-pci and
//! uio: the user-space driver's DMA memory). The state is read at the call: a mount made
//! in the milliseconds between the check and the unbind is not seen.

use super::guard;
use crate::error::{Error, Result};
use crate::sys::{self, pci, sysfs};
use crate::uri::PciAddr;
use serde::Serialize;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// A kernel driver [`bind_driver`] moves an NVMe controller to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PciDriver {
    /// The kernel's NVMe driver: namespaces as /dev/nvmeXnY.
    Nvme,
    /// vfio-pci: the device for a user-space driver, behind the IOMMU.
    Vfio,
    /// uio_pci_generic: the device for a user-space driver without an IOMMU (no DMA
    /// isolation: the device can write anywhere in memory).
    Uio,
}

impl PciDriver {
    /// The kernel's name of the driver (`nvme`, `vfio-pci`, `uio_pci_generic`).
    pub fn kernel_name(self) -> &'static str {
        match self {
            PciDriver::Nvme => "nvme",
            PciDriver::Vfio => "vfio-pci",
            PciDriver::Uio => "uio_pci_generic",
        }
    }
}

impl fmt::Display for PciDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PciDriver::Nvme => "nvme",
            PciDriver::Vfio => "vfio",
            PciDriver::Uio => "uio",
        })
    }
}

impl FromStr for PciDriver {
    type Err = String;

    /// `nvme`, `vfio` (or `vfio-pci`), `uio` (or `uio_pci_generic`).
    fn from_str(s: &str) -> std::result::Result<PciDriver, String> {
        match s {
            "nvme" => Ok(PciDriver::Nvme),
            "vfio" | "vfio-pci" => Ok(PciDriver::Vfio),
            "uio" | "uio_pci_generic" => Ok(PciDriver::Uio),
            _ => Err(format!("unknown driver {s:?}: expected vfio, uio or nvme")),
        }
    }
}

/// What [`bind_driver`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Binding {
    /// The controller.
    pub addr: PciAddr,
    /// The driver it was bound to before (none: no driver).
    pub from: Option<String>,
    /// The driver it is bound to now.
    pub to: &'static str,
    /// False when it was bound to `to` already and nothing was written.
    pub changed: bool,
    /// Its IOMMU group.
    pub iommu_group: Option<u32>,
}

/// How long the PCI core and the driver get to bind the device after `drivers_probe`
/// (nvme probes asynchronously, and in an emulated guest slowly).
const SETTLE: Duration = Duration::from_secs(30);

/// Binds the NVMe controller at `addr` to `to`, unbinding it from its driver first, after
/// the checks of this module's documentation; nothing is changed when a check fails.
/// Bound to `nvme`, it returns once the controller is live (its namespaces appear shortly
/// after, as the kernel scans them).
pub fn bind_driver(addr: PciAddr, to: PciDriver) -> Result<Binding> {
    let mut write = |p: &Path, text: &str| pci::write_attr(p, text);
    bind_with(addr, to, sys::euid(), &in_use, &mut write, SETTLE)
}

/// What a check or a step needs to say: an error for `addr` and `to`.
struct Fail {
    addr: PciAddr,
    to: PciDriver,
}

impl Fail {
    fn error(&self, errno: i32, why: String) -> Error {
        Error::Bind { addr: self.addr.to_string(), driver: self.to.kernel_name(), why, errno }
    }
    fn refused(&self, errno: i32, why: impl fmt::Display) -> Error {
        self.error(errno, format!("refused: {why}; nothing was changed"))
    }
    fn failed(&self, what: &str, path: &Path, e: io::Error) -> Error {
        self.error(e.raw_os_error().unwrap_or(libc::EIO), format!("failed: {what} ({}): {e}", path.display()))
    }
}

/// [`bind_driver`] with its outside world given: the effective user id, the in-use check,
/// the sysfs writer (the kernel's side of a write is the caller's to play in a test) and
/// how long to wait for the new driver.
fn bind_with(
    addr: PciAddr,
    to: PciDriver,
    euid: u32,
    in_use: &dyn Fn(&pci::Function) -> Option<String>,
    write: &mut dyn FnMut(&Path, &str) -> io::Result<()>,
    settle: Duration,
) -> Result<Binding> {
    let fail = Fail { addr, to };
    let f = check(addr, to, euid, in_use)?;
    let drv = to.kernel_name();
    let done = |changed| Binding { addr, from: f.driver.clone(), to: drv, changed, iommu_group: f.iommu_group };
    if f.driver.as_deref() == Some(drv) {
        return Ok(done(false));
    }
    if f.driver.is_some() {
        let p = pci::unbind(addr);
        write(&p, &addr.to_string()).map_err(|e| fail.failed("unbinding it from its driver", &p, e))?;
    }
    let ov = pci::driver_override(addr);
    write(&ov, drv).map_err(|e| fail.failed("setting driver_override", &ov, e))?;
    let probe = pci::drivers_probe();
    let probed = write(&probe, &addr.to_string());
    // The override goes in any case: left set, it would tie the device to `drv` for good.
    let cleared = write(&ov, "\n");
    probed.map_err(|e| fail.failed("probing drivers for it", &probe, e))?;
    cleared.map_err(|e| fail.failed("clearing driver_override", &ov, e))?;
    let start = Instant::now();
    loop {
        let now = pci::function(addr);
        let bound = now.as_ref().and_then(|n| n.driver.clone());
        let ready = bound.as_deref() == Some(drv) && (to != PciDriver::Nvme || now.as_ref().is_some_and(nvme_live));
        if ready {
            return Ok(done(true));
        }
        if start.elapsed() >= settle {
            let state = match bound {
                Some(b) if b == drv => "bound, but its NVMe controller is not live".to_string(),
                Some(b) => format!("bound to {b}"),
                None => "bound to no driver".to_string(),
            };
            let why = format!(
                "failed: {} s after probing, it is {state} (the kernel log, dmesg, says why)",
                settle.as_secs()
            );
            return Err(fail.error(libc::EIO, why));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the nvme driver's controller on `f` is live.
fn nvme_live(f: &pci::Function) -> bool {
    pci::nvme_controllers(f).iter().any(|c| sysfs::read(&c.join("state")).as_deref() == Some("live"))
}

/// The checks, in the order a user meets them; `Ok` with what sysfs says about the
/// function when the move may go ahead (or there is nothing to move).
fn check(
    addr: PciAddr,
    to: PciDriver,
    euid: u32,
    in_use: &dyn Fn(&pci::Function) -> Option<String>,
) -> Result<pci::Function> {
    let fail = Fail { addr, to };
    let Some(f) = pci::function(addr) else {
        return Err(fail.refused(
            libc::ENODEV,
            format!("no PCI device has this address ({} is missing)", pci::dir(addr).display()),
        ));
    };
    if let Some(why) = f.not_nvme() {
        return Err(fail.refused(libc::ENODEV, format!("{why}, and ioswitch moves NVMe controllers only")));
    }
    let drv = to.kernel_name();
    if f.driver.as_deref() == Some(drv) {
        return Ok(f);
    }
    if euid != 0 {
        return Err(fail.refused(libc::EPERM, "not root (only root may move a device between drivers)"));
    }
    if !pci::driver_loaded(drv) {
        let module = match to {
            PciDriver::Vfio => "vfio-pci vfio_iommu_type1",
            _ => drv,
        };
        return Err(fail.refused(
            libc::ENOENT,
            format!("the {drv} driver is not loaded (no /sys/bus/pci/drivers/{drv}): load it with `modprobe {module}`"),
        ));
    }
    if to == PciDriver::Vfio {
        let Some(g) = f.iommu_group else {
            return Err(fail.refused(
                libc::ENODEV,
                "it has no IOMMU group: the kernel has no IOMMU for it (enable VT-d or AMD-Vi in the firmware and \
                 boot with intel_iommu=on or amd_iommu=on), and vfio-pci needs one; without an IOMMU, `uio` \
                 (uio_pci_generic) works, with no DMA isolation (docs/PCI.md)",
            ));
        };
        let peers: Vec<String> = pci::group_members(g)
            .into_iter()
            .filter(|a| *a != addr)
            .map(|a| {
                let d = pci::function(a).and_then(|p| p.driver).unwrap_or_else(|| "no driver".into());
                format!("{a} ({d})")
            })
            .collect();
        if !peers.is_empty() {
            return Err(fail.refused(
                libc::EBUSY,
                format!(
                    "its IOMMU group {g} holds other devices too: {}; vfio-pci takes a group whole, and ioswitch \
                     does not move devices it was not asked to move",
                    peers.join(", ")
                ),
            ));
        }
    }
    if to != PciDriver::Nvme && pci::hugepages_2m().unwrap_or(0) == 0 {
        return Err(fail.refused(
            libc::ENOMEM,
            "no hugepages reserved: a user-space driver takes its DMA memory from 2 MiB hugepages; reserve some \
             with `sysctl vm.nr_hugepages=64` (or hugepages=64 on the kernel command line)",
        ));
    }
    if let Some(why) = in_use(&f) {
        let from = f.driver.as_deref().unwrap_or("no driver");
        return Err(
            fail.refused(libc::EBUSY, format!("it is in use: {why}; unbinding it from {from} would pull it away"))
        );
    }
    Ok(f)
}

/// Who uses function `f` now, in words: the write guard's reasons for any namespace of
/// its NVMe controller (mounted, swap, holders, exclusive claims), then any process with
/// one of its device nodes or BAR files open or mapped.
fn in_use(f: &pci::Function) -> Option<String> {
    for c in pci::nvme_controllers(f) {
        if let Some(why) = guard::controller_in_use(&c, 0) {
            return Some(why);
        }
    }
    let bars = fs::canonicalize(&f.dir).ok();
    open_in_processes(&nodes(f), bars.as_deref(), Path::new("/proc"))
}

/// A device node through which a program reaches the function.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    /// `/dev/NAME`.
    path: PathBuf,
    /// A block device (else a char device).
    block: bool,
    devno: (u32, u32),
}

/// The device nodes of `f`: while bound to nvme its controller (`/dev/nvmeX`), namespaces
/// and their partitions, generic char devices; bound to uio_pci_generic its `/dev/uioN`;
/// bound to vfio-pci its group's `/dev/vfio/N`.
fn nodes(f: &pci::Function) -> Vec<Node> {
    let mut out = Vec::new();
    let mut add = |dir: &Path, block: bool, under: &str| {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let devno = sysfs::read(&dir.join("dev")).and_then(|s| sysfs::parse_devno(&s));
        if let (Some(name), Some(devno)) = (name, devno) {
            out.push(Node { path: Path::new("/dev").join(under).join(name), block, devno });
        }
    };
    for c in pci::nvme_controllers(f) {
        add(&c, false, "");
        for ns in pci::namespaces(&c) {
            add(&ns, true, "");
            for part in fs::read_dir(&ns).into_iter().flatten().flatten().map(|e| e.path()) {
                if part.join("partition").is_file() {
                    add(&part, true, "");
                }
            }
        }
        for ng in pci::generic_namespaces(&c) {
            add(&ng, false, "");
        }
    }
    for u in pci::uio_devices(f) {
        add(&u, false, "");
    }
    if let Some(g) = f.iommu_group {
        add(&sysfs::class("vfio").join(g.to_string()), false, "vfio");
    }
    out
}

/// The first process (under `proc`, `/proc` but for tests) that has one of `nodes` open —
/// matched by device number, or by the path its descriptor names — or a BAR file
/// (`resourceN`) of the function's sysfs directory `bars` open or mapped, in words.
fn open_in_processes(nodes: &[Node], bars: Option<&Path>, proc: &Path) -> Option<String> {
    let Ok(rd) = fs::read_dir(proc) else { return None };
    let mut pids: Vec<u32> = rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    pids.sort_unstable();
    let me = std::process::id();
    let is_bar = |p: &Path| {
        bars.is_some_and(|b| {
            p.parent() == Some(b) && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("resource"))
        })
    };
    for pid in pids.into_iter().filter(|p| *p != me) {
        let dir = proc.join(pid.to_string());
        let who = || {
            let comm = sysfs::read(&dir.join("comm")).unwrap_or_else(|| "?".into());
            format!("process {pid} ({comm})")
        };
        for fd in fs::read_dir(dir.join("fd")).into_iter().flatten().flatten() {
            let target = fs::read_link(fd.path()).ok();
            let meta = fs::metadata(fd.path()).ok();
            let hit = nodes.iter().find(|n| {
                target.as_deref() == Some(n.path.as_path())
                    || meta.as_ref().is_some_and(|m| {
                        let t = m.file_type();
                        (if n.block { t.is_block_device() } else { t.is_char_device() })
                            && (libc::major(m.rdev()), libc::minor(m.rdev())) == n.devno
                    })
            });
            if let Some(n) = hit {
                return Some(format!("{} is open in {}", n.path.display(), who()));
            }
            if let Some(t) = target.as_deref().filter(|t| is_bar(t)) {
                return Some(format!("{} is open in {}", t.display(), who()));
            }
        }
        let maps = fs::read_to_string(dir.join("maps")).unwrap_or_default();
        for line in maps.lines() {
            // The path is the sixth field and may contain spaces: take everything from
            // its leading slash.
            if let Some(p) = line.find('/').map(|i| Path::new(&line[i..])).filter(|p| is_bar(p)) {
                return Some(format!("{} is mapped by {}", p.display(), who()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const ADDR: &str = "0000:00:05.0";

    fn addr() -> PciAddr {
        ADDR.parse().unwrap()
    }

    /// The guest's layout: nvme0 on 0000:00:03.0, the controller to move on 0000:00:05.0
    /// (bound to `driver`) with two namespaces, each function alone in its IOMMU group,
    /// the three drivers loaded, hugepages reserved.
    fn guest(tag: &str, driver: Option<&str>) -> sysfs::Tree {
        let t = sysfs::Tree::new(tag);
        pci::canned(&t, "0000:00:03.0", pci::NVME_CLASS, (0x1b36, 0x0010), Some("nvme"), Some(3));
        let d = pci::canned(&t, ADDR, pci::NVME_CLASS, (0x1b36, 0x0010), driver, Some(4));
        for drv in ["nvme", "vfio-pci", "uio_pci_generic"] {
            t.dir(&format!("bus/pci/drivers/{drv}"));
        }
        t.file("bus/pci/drivers_probe", "").file("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "64");
        if driver.is_some() {
            t.file(&format!("{d}/driver/unbind"), "");
        }
        if driver == Some("nvme") {
            let c = format!("{d}/nvme/nvme1");
            t.file(&format!("{c}/dev"), "241:1").file(&format!("{c}/state"), "live");
            for ns in 1..=2 {
                t.block(&format!("{c}/nvme1n{ns}"), (259, 4000 + ns))
                    .file(&format!("{c}/nvme1n{ns}/nsid"), &ns.to_string())
                    .dir(&format!("{c}/nvme1n{ns}/queue"))
                    .dir(&format!("{c}/nvme1n{ns}/holders"))
                    .file(&format!("{c}/ng1n{ns}/dev"), &format!("240:{}", 10 + ns));
            }
        }
        t
    }

    /// A writer that plays the kernel on a canned tree: unbind removes the driver link,
    /// drivers_probe binds to the driver the override names (and makes nvme's controller
    /// live), every write is recorded.
    struct Kernel<'a> {
        t: &'a sysfs::Tree,
        log: RefCell<Vec<(String, String)>>,
        /// The driver refuses the device (its probe fails).
        refuse: bool,
    }

    impl Kernel<'_> {
        fn write(&self, p: &Path, text: &str) -> io::Result<()> {
            let rel = p.strip_prefix(&self.t.root).unwrap().to_string_lossy().into_owned();
            self.log.borrow_mut().push((rel.clone(), text.to_string()));
            let dev = self.t.root.join(format!("devices/pci0000:00/{ADDR}"));
            pci::write_attr(p, text)?;
            match rel.as_str() {
                r if r.ends_with("/driver/unbind") => {
                    fs::remove_file(dev.join("driver"))?;
                    let _ = fs::remove_dir_all(dev.join("nvme"));
                }
                "bus/pci/drivers_probe" => {
                    let drv = sysfs::read(&dev.join("driver_override")).unwrap();
                    if self.refuse {
                        return Err(io::Error::from_raw_os_error(libc::ENODEV));
                    }
                    self.t.link(&format!("devices/pci0000:00/{ADDR}/driver"), &format!("bus/pci/drivers/{drv}"));
                    self.t.file(&format!("devices/pci0000:00/{ADDR}/driver/unbind"), "");
                    if drv == "nvme" {
                        self.t.file(&format!("devices/pci0000:00/{ADDR}/nvme/nvme1/state"), "live");
                    }
                }
                _ => {}
            }
            Ok(())
        }
    }

    fn run(
        t: &sysfs::Tree,
        to: PciDriver,
        euid: u32,
        busy: Option<&str>,
        refuse: bool,
    ) -> (Result<Binding>, Vec<(String, String)>) {
        let k = Kernel { t, log: RefCell::new(Vec::new()), refuse };
        let in_use = |_: &pci::Function| busy.map(str::to_string);
        let mut write = |p: &Path, text: &str| k.write(p, text);
        let r = sysfs::with_root(&t.root, || bind_with(addr(), to, euid, &in_use, &mut write, Duration::ZERO));
        (r, k.log.into_inner())
    }

    fn refusal(r: Result<Binding>) -> (i32, String) {
        match r {
            Err(e @ Error::Bind { errno, .. }) => (errno, e.to_string()),
            other => panic!("not a Bind refusal: {other:?}"),
        }
    }

    #[test]
    fn nvme_to_vfio_writes_unbind_override_probe_and_clears_the_override() {
        let t = guest("bind-vfio", Some("nvme"));
        let (r, log) = run(&t, PciDriver::Vfio, 0, None, false);
        let b = r.unwrap();
        assert_eq!((b.from.as_deref(), b.to, b.changed, b.iommu_group), (Some("nvme"), "vfio-pci", true, Some(4)));
        let dev = format!("bus/pci/devices/{ADDR}");
        let want = [
            (format!("{dev}/driver/unbind"), ADDR.to_string()),
            (format!("{dev}/driver_override"), "vfio-pci".to_string()),
            ("bus/pci/drivers_probe".to_string(), ADDR.to_string()),
            (format!("{dev}/driver_override"), "\n".to_string()),
        ];
        assert_eq!(log, want);
        // And back: bound to nvme, once its controller is live.
        let (r, log) = run(&t, PciDriver::Nvme, 0, None, false);
        let b = r.unwrap();
        assert_eq!((b.from.as_deref(), b.to, b.changed), (Some("vfio-pci"), "nvme", true));
        assert_eq!(log[1], (format!("{dev}/driver_override"), "nvme".to_string()));
    }

    #[test]
    fn a_device_on_its_driver_already_is_left_alone_even_for_a_user() {
        let t = guest("bind-same", Some("vfio-pci"));
        let (r, log) = run(&t, PciDriver::Vfio, 1000, None, false);
        let b = r.unwrap();
        assert_eq!((b.from.as_deref(), b.changed), (Some("vfio-pci"), false));
        assert!(log.is_empty(), "{log:?}");
    }

    #[test]
    fn an_unbound_device_is_bound_without_an_unbind() {
        let t = guest("bind-none", None);
        let (r, log) = run(&t, PciDriver::Uio, 0, None, false);
        assert_eq!(r.unwrap().from, None);
        assert_eq!(log.len(), 3, "override, probe, clear: {log:?}");
        assert!(!log.iter().any(|(p, _)| p.ends_with("unbind")));
    }

    #[test]
    fn each_precondition_is_refused_by_name_before_anything_is_written() {
        /// A case: its tag, what it changes in the guest's tree, the driver asked for, the
        /// user id, the errno and words the refusal must have.
        type Case = (&'static str, Box<dyn Fn(&sysfs::Tree)>, PciDriver, u32, i32, &'static str);
        let cases: Vec<Case> = vec![
            ("not-root", Box::new(|_| {}), PciDriver::Vfio, 1000, libc::EPERM, "not root"),
            (
                "no-module",
                Box::new(|t| fs::remove_dir_all(t.root.join("bus/pci/drivers/uio_pci_generic")).unwrap()),
                PciDriver::Uio,
                0,
                libc::ENOENT,
                "uio_pci_generic driver is not loaded",
            ),
            (
                "no-group",
                Box::new(|t| fs::remove_file(t.root.join(format!("devices/pci0000:00/{ADDR}/iommu_group"))).unwrap()),
                PciDriver::Vfio,
                0,
                libc::ENODEV,
                "no IOMMU group",
            ),
            (
                "peers",
                Box::new(|t| {
                    pci::canned(t, "0000:00:06.0", 0x0c_03_30, (0x8086, 0x1234), Some("xhci_hcd"), Some(4));
                }),
                PciDriver::Vfio,
                0,
                libc::EBUSY,
                "its IOMMU group 4 holds other devices too: 0000:00:06.0 (xhci_hcd)",
            ),
            (
                "no-hugepages",
                Box::new(|t| {
                    t.file("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0");
                }),
                PciDriver::Uio,
                0,
                libc::ENOMEM,
                "sysctl vm.nr_hugepages",
            ),
        ];
        for (tag, setup, to, euid, errno, want) in cases {
            let t = guest(tag, Some("nvme"));
            setup(&t);
            let (r, log) = run(&t, to, euid, None, false);
            let (got, msg) = refusal(r);
            assert_eq!(got, errno, "{tag}: {msg}");
            assert!(msg.contains(want) && msg.contains(ADDR) && msg.contains("nothing was changed"), "{tag}: {msg}");
            assert!(log.is_empty(), "{tag}: wrote {log:?}");
        }
        // Going back to nvme needs neither an IOMMU group nor hugepages.
        let t = guest("to-nvme", Some("uio_pci_generic"));
        t.file("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0");
        fs::remove_file(t.root.join(format!("devices/pci0000:00/{ADDR}/iommu_group"))).unwrap();
        assert!(run(&t, PciDriver::Nvme, 0, None, false).0.is_ok());
    }

    #[test]
    fn unknown_addresses_and_devices_that_are_not_nvme_are_refused() {
        let t = guest("bind-what", Some("nvme"));
        pci::canned(&t, "0000:00:1f.2", 0x01_06_01, (0x8086, 0x2922), Some("ahci"), Some(5));
        let k = Kernel { t: &t, log: RefCell::new(Vec::new()), refuse: false };
        let mut write = |p: &Path, text: &str| k.write(p, text);
        let free = |_: &pci::Function| None;
        sysfs::with_root(&t.root, || {
            let r = bind_with("0000:00:09.0".parse().unwrap(), PciDriver::Vfio, 0, &free, &mut write, Duration::ZERO);
            let (errno, msg) = refusal(r);
            assert!(errno == libc::ENODEV && msg.contains("no PCI device has this address"), "{msg}");
            let r = bind_with("0000:00:1f.2".parse().unwrap(), PciDriver::Vfio, 0, &free, &mut write, Duration::ZERO);
            let (errno, msg) = refusal(r);
            assert!(errno == libc::ENODEV && msg.contains("not an NVMe controller (class 0x010601"), "{msg}");
        });
        assert!(k.log.borrow().is_empty());
    }

    #[test]
    fn a_device_in_use_is_refused_with_the_reason_and_left_bound() {
        let t = guest("bind-busy", Some("nvme"));
        let why = "/dev/nvme1n1 is mounted on /mnt (ext4)";
        let (r, log) = run(&t, PciDriver::Vfio, 0, Some(why), false);
        let (errno, msg) = refusal(r);
        assert_eq!(errno, libc::EBUSY);
        assert!(msg.contains(why) && msg.contains("unbinding it from nvme"), "{msg}");
        assert!(log.is_empty());
        assert_eq!(sysfs::with_root(&t.root, || pci::function(addr()).unwrap().driver).as_deref(), Some("nvme"));
    }

    #[test]
    fn a_driver_that_does_not_take_the_device_is_reported_and_the_override_cleared() {
        let t = guest("bind-fail", Some("nvme"));
        let (r, log) = run(&t, PciDriver::Vfio, 0, None, true);
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains("failed: probing drivers for it") && msg.contains("drivers_probe"), "{msg}");
        assert_eq!(log.last().unwrap().1, "\n", "the override is cleared after a failed probe: {log:?}");
    }

    /// The real in-use check on a canned tree: a holder of a namespace (device-mapper) is
    /// named by the write guard's logic.
    #[test]
    fn a_held_namespace_is_in_use() {
        let t = guest("bind-held", Some("nvme"));
        let c = format!("devices/pci0000:00/{ADDR}/nvme/nvme1");
        t.block("devices/virtual/block/dm-7", (253, 7))
            .file("devices/virtual/block/dm-7/dm/name", "lin")
            .link(&format!("{c}/nvme1n2/holders/dm-7"), "devices/virtual/block/dm-7");
        sysfs::with_root(&t.root, || {
            let f = pci::function(addr()).unwrap();
            assert_eq!(in_use(&f).as_deref(), Some("/dev/nvme1n2 is held by device-mapper device lin (/dev/dm-7)"));
        });
    }

    #[test]
    fn device_nodes_cover_controller_namespaces_partitions_generic_uio_and_vfio() {
        let t = guest("bind-nodes", Some("nvme"));
        let d = format!("devices/pci0000:00/{ADDR}");
        t.block(&format!("{d}/nvme/nvme1/nvme1n1/nvme1n1p1"), (259, 4100))
            .file(&format!("{d}/nvme/nvme1/nvme1n1/nvme1n1p1/partition"), "1")
            .file(&format!("{d}/uio/uio0/dev"), "238:0")
            .file("class/vfio/4/dev", "237:0");
        let got: Vec<(String, bool, (u32, u32))> = sysfs::with_root(&t.root, || {
            nodes(&pci::function(addr()).unwrap())
                .into_iter()
                .map(|n| (n.path.display().to_string(), n.block, n.devno))
                .collect()
        });
        let want = [
            ("/dev/nvme1", false, (241, 1)),
            ("/dev/nvme1n1", true, (259, 4001)),
            ("/dev/nvme1n1p1", true, (259, 4100)),
            ("/dev/nvme1n2", true, (259, 4002)),
            ("/dev/ng1n1", false, (240, 11)),
            ("/dev/ng1n2", false, (240, 12)),
            ("/dev/uio0", false, (238, 0)),
            ("/dev/vfio/4", false, (237, 0)),
        ];
        let want: Vec<(String, bool, (u32, u32))> = want.iter().map(|(p, b, d)| (p.to_string(), *b, *d)).collect();
        assert_eq!(got, want);
    }

    /// A canned /proc: process 4242 has /dev/ng1n2 open, process 4343 maps the BAR.
    #[test]
    fn open_descriptors_and_mapped_bars_name_the_process() {
        let t = sysfs::Tree::new("proc");
        let node = |p: &str, devno| Node { path: PathBuf::from(p), block: false, devno };
        let nodes = [node("/dev/nvme1", (241, 1)), node("/dev/ng1n2", (240, 12))];
        t.file("4242/comm", "fio").file("4343/comm", "spdk_nvme_perf").file("self/comm", "not a pid");
        t.dir("4242/fd").dir("4343/fd");
        std::os::unix::fs::symlink("/dev/null", t.root.join("4242/fd/0")).unwrap();
        std::os::unix::fs::symlink("/dev/ng1n2", t.root.join("4242/fd/5")).unwrap();
        let bars = Path::new("/sys/devices/pci0000:00/0000:00:05.0");
        t.file("4343/maps", "7f00-7f10 rw-s 00000000 00:15 77 /sys/devices/pci0000:00/0000:00:05.0/resource0\n");
        assert_eq!(
            open_in_processes(&nodes, Some(bars), &t.root).as_deref(),
            Some("/dev/ng1n2 is open in process 4242 (fio)")
        );
        fs::remove_file(t.root.join("4242/fd/5")).unwrap();
        assert_eq!(
            open_in_processes(&nodes, Some(bars), &t.root).as_deref(),
            Some("/sys/devices/pci0000:00/0000:00:05.0/resource0 is mapped by process 4343 (spdk_nvme_perf)")
        );
        let other = Path::new("/sys/devices/pci0000:00/0000:00:03.0");
        assert_eq!(open_in_processes(&nodes, Some(other), &t.root), None, "another function's BAR is not ours");
    }

    #[test]
    fn driver_names_parse_in_short_and_kernel_form() {
        for (s, d) in [("vfio", PciDriver::Vfio), ("vfio-pci", PciDriver::Vfio), ("uio", PciDriver::Uio)] {
            assert_eq!(s.parse::<PciDriver>().unwrap(), d);
        }
        assert_eq!("uio_pci_generic".parse::<PciDriver>().unwrap().kernel_name(), "uio_pci_generic");
        assert_eq!("nvme".parse::<PciDriver>().unwrap().to_string(), "nvme");
        let e = "spdk".parse::<PciDriver>().unwrap_err();
        assert!(e.contains("\"spdk\"") && e.contains("vfio, uio or nvme"), "{e}");
    }
}
