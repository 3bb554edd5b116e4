//! PCI functions from sysfs (`/sys/bus/pci/devices/*`): class, vendor and device ids, the
//! bound driver, the IOMMU group and its members, the NVMe controllers (and their
//! namespaces) a function carries, its uio devices; and the attribute writes that move a
//! function between drivers (`driver_override`, `driver/unbind`, `drivers_probe`). Every
//! path goes through [`sysfs::root`], so a test runs all of it on a canned tree.

use super::sysfs;
use crate::uri::PciAddr;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The class code (class, subclass, programming interface) of an NVMe controller:
/// mass storage, non-volatile memory, NVM Express.
pub(crate) const NVME_CLASS: u32 = 0x01_08_02;

/// What sysfs says about one PCI function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Function {
    /// Its address.
    pub addr: PciAddr,
    /// Its directory, `/sys/bus/pci/devices/ADDR` (a link into `/sys/devices`).
    pub dir: PathBuf,
    /// Class code, 24 bits.
    pub class: u32,
    /// PCI vendor id.
    pub vendor: u16,
    /// PCI device id.
    pub device: u16,
    /// The driver bound to it (`nvme`, `vfio-pci`, `uio_pci_generic`), if any.
    pub driver: Option<String>,
    /// Its IOMMU group, when the kernel has an IOMMU for it.
    pub iommu_group: Option<u32>,
}

impl Function {
    /// Why this function is not an NVMe controller, naming its class and ids; `None` when
    /// it is one.
    pub(crate) fn not_nvme(&self) -> Option<String> {
        (self.class != NVME_CLASS).then(|| {
            format!(
                "it is not an NVMe controller (class {:#08x}, id {:04x}:{:04x}; NVMe is class 0x010802)",
                self.class, self.vendor, self.device
            )
        })
    }
}

/// `/sys/bus/pci`.
fn bus() -> PathBuf {
    sysfs::root().join("bus/pci")
}

/// The directory of function `addr`: `/sys/bus/pci/devices/ADDR`.
pub(crate) fn dir(addr: PciAddr) -> PathBuf {
    bus().join("devices").join(addr.to_string())
}

/// The addresses of every PCI function, sorted; names that are not addresses are skipped.
pub(crate) fn addresses() -> io::Result<Vec<PciAddr>> {
    addresses_in(&bus().join("devices"))
}

/// The PCI addresses among the entry names of directory `d`, sorted.
fn addresses_in(d: &Path) -> io::Result<Vec<PciAddr>> {
    let mut out: Vec<PciAddr> = sysfs::sorted_names(d)?.iter().filter_map(|n| n.parse().ok()).collect();
    out.sort();
    Ok(out)
}

/// Function `addr` as sysfs describes it; `None` when there is no such function.
pub(crate) fn function(addr: PciAddr) -> Option<Function> {
    let dir = dir(addr);
    if !dir.is_dir() {
        return None;
    }
    let hex = |attr: &str| {
        sysfs::read(&dir.join(attr)).and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok())
    };
    Some(Function {
        addr,
        class: hex("class").unwrap_or(0),
        vendor: hex("vendor").unwrap_or(0) as u16,
        device: hex("device").unwrap_or(0) as u16,
        driver: link_name(&dir.join("driver")),
        iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
        dir,
    })
}

/// The last part of a symbolic link's target (`driver -> …/drivers/nvme` gives `nvme`).
fn link_name(link: &Path) -> Option<String> {
    fs::read_link(link).ok()?.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// The functions in IOMMU group `group` (`/sys/kernel/iommu_groups/N/devices`), sorted.
pub(crate) fn group_members(group: u32) -> Vec<PciAddr> {
    let d = sysfs::root().join("kernel/iommu_groups").join(group.to_string()).join("devices");
    addresses_in(&d).unwrap_or_default()
}

/// The sysfs directories of the NVMe controllers the kernel's nvme driver made of this
/// function (`ADDR/nvme/nvmeX`; one while it is bound to nvme, none otherwise).
pub(crate) fn nvme_controllers(f: &Function) -> Vec<PathBuf> {
    sysfs::sorted_entries(&f.dir.join("nvme"), |_| true)
}

/// The block devices (`nvmeXnY`) of the namespaces under a controller's directory.
pub(crate) fn namespaces(ctrl: &Path) -> Vec<PathBuf> {
    sysfs::sorted_entries(ctrl, |p| p.join("nsid").is_file() && p.join("queue").is_dir())
}

/// The generic char devices (`ngXnY`) of the namespaces under a controller's directory.
pub(crate) fn generic_namespaces(ctrl: &Path) -> Vec<PathBuf> {
    sysfs::sorted_entries(ctrl, |p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ng")) && p.join("dev").is_file()
    })
}

/// The uio devices (`uioN`) uio_pci_generic made of this function.
pub(crate) fn uio_devices(f: &Function) -> Vec<PathBuf> {
    sysfs::sorted_entries(&f.dir.join("uio"), |_| true)
}

/// Whether PCI driver `name` is registered (its module is loaded or built in).
pub(crate) fn driver_loaded(name: &str) -> bool {
    bus().join("drivers").join(name).is_dir()
}

/// The number of 2 MiB hugepages reserved (what sysctl vm.nr_hugepages sets on x86-64);
/// `None` when the kernel has no 2 MiB hugepages.
pub(crate) fn hugepages_2m() -> Option<u64> {
    sysfs::read_num(&sysfs::root().join("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"))
}

/// The path of a function's `driver_override` attribute.
pub(crate) fn driver_override(addr: PciAddr) -> PathBuf {
    dir(addr).join("driver_override")
}

/// The path that unbinds function `addr` from its driver (`ADDR/driver/unbind`).
pub(crate) fn unbind(addr: PciAddr) -> PathBuf {
    dir(addr).join("driver/unbind")
}

/// The path that asks the PCI core to bind a function to a driver (`drivers_probe`).
pub(crate) fn drivers_probe() -> PathBuf {
    bus().join("drivers_probe")
}

/// Writes `text` to an existing sysfs attribute in one write(2), as the kernel expects,
/// opened as a shell's `echo TEXT > ATTR` opens it; an attribute that is not there is
/// not created.
pub(crate) fn write_attr(path: &Path, text: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).truncate(true).open(path)?;
    f.write_all(text.as_bytes())
}

/// A PCI function in a canned sysfs tree, for tests: its directory under `devices/`, the link
/// `bus/pci/devices/ADDR`, its ids, `driver_override`, and (when given) the links to its
/// driver and IOMMU group, with the group's `devices/` link back. Returns its directory
/// relative to the root.
#[cfg(test)]
pub(crate) fn canned(
    t: &sysfs::Tree,
    addr: &str,
    class: u32,
    ids: (u16, u16),
    driver: Option<&str>,
    group: Option<u32>,
) -> String {
    let d = format!("devices/pci0000:00/{addr}");
    t.file(&format!("{d}/class"), &format!("{class:#08x}"))
        .file(&format!("{d}/vendor"), &format!("{:#06x}", ids.0))
        .file(&format!("{d}/device"), &format!("{:#06x}", ids.1))
        .file(&format!("{d}/driver_override"), "(null)")
        .link(&format!("bus/pci/devices/{addr}"), &d);
    if let Some(drv) = driver {
        t.dir(&format!("bus/pci/drivers/{drv}")).link(&format!("{d}/driver"), &format!("bus/pci/drivers/{drv}"));
    }
    if let Some(g) = group {
        t.link(&format!("{d}/iommu_group"), &format!("kernel/iommu_groups/{g}"))
            .link(&format!("kernel/iommu_groups/{g}/devices/{addr}"), &d);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_give_ids_driver_group_controllers_and_namespaces_from_a_canned_tree() {
        let t = sysfs::Tree::new("pci");
        let nvme = canned(&t, "0000:00:04.0", NVME_CLASS, (0x1b36, 0x0010), Some("nvme"), Some(3));
        canned(&t, "0000:00:05.0", NVME_CLASS, (0x1b36, 0x0010), Some("vfio-pci"), Some(4));
        canned(&t, "0000:00:01.0", 0x03_00_00, (0x1234, 0x1111), None, Some(4));
        canned(&t, "0000:00:1f.2", 0x01_06_01, (0x8086, 0x2922), Some("ahci"), None);
        let c = format!("{nvme}/nvme/nvme0");
        t.dir(&format!("{c}/nvme0n1/queue"))
            .file(&format!("{c}/nvme0n1/nsid"), "1")
            .dir(&format!("{c}/nvme0n2/queue"))
            .file(&format!("{c}/nvme0n2/nsid"), "2")
            .file(&format!("{c}/ng0n1/dev"), "242:0")
            .file(&format!("{c}/ng0n2/dev"), "242:1")
            .file(&format!("{c}/model"), "QEMU NVMe Ctrl")
            .file("bus/pci/devices/not-an-address/class", "0x0")
            .file("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "64");
        sysfs::with_root(&t.root, || {
            let addrs: Vec<String> = addresses().unwrap().iter().map(|a| a.to_string()).collect();
            assert_eq!(addrs, ["0000:00:01.0", "0000:00:04.0", "0000:00:05.0", "0000:00:1f.2"]);
            let f = function("0000:00:04.0".parse().unwrap()).unwrap();
            assert_eq!((f.class, f.vendor, f.device), (NVME_CLASS, 0x1b36, 0x0010));
            assert_eq!((f.driver.as_deref(), f.iommu_group), (Some("nvme"), Some(3)));
            let ctrls = nvme_controllers(&f);
            assert_eq!(ctrls, [t.root.join("bus/pci/devices/0000:00:04.0/nvme/nvme0")]);
            let names = |v: Vec<PathBuf>| -> Vec<String> {
                v.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
            };
            assert_eq!(names(namespaces(&ctrls[0])), ["nvme0n1", "nvme0n2"]);
            assert_eq!(names(generic_namespaces(&ctrls[0])), ["ng0n1", "ng0n2"]);
            let v = function("0000:00:05.0".parse().unwrap()).unwrap();
            assert_eq!((v.driver.as_deref(), v.iommu_group), (Some("vfio-pci"), Some(4)));
            assert!(nvme_controllers(&v).is_empty() && uio_devices(&v).is_empty());
            let members: Vec<String> = group_members(4).iter().map(|a| a.to_string()).collect();
            assert_eq!(members, ["0000:00:01.0", "0000:00:05.0"]);
            let ahci = function("0000:00:1f.2".parse().unwrap()).unwrap();
            assert_eq!((ahci.class, ahci.iommu_group), (0x01_06_01, None));
            assert_eq!(function("0000:00:09.0".parse().unwrap()), None);
            assert!(driver_loaded("vfio-pci") && !driver_loaded("uio_pci_generic"));
            assert_eq!(hugepages_2m(), Some(64));
            let o = driver_override("0000:00:05.0".parse().unwrap());
            write_attr(&o, "nvme").unwrap();
            assert_eq!(sysfs::read(&o).as_deref(), Some("nvme"));
            assert!(write_attr(&drivers_probe(), "x").is_err(), "an attribute that is not there is not created");
        });
    }
}
