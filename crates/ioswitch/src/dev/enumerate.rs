//! Enumeration: the block, NVMe and devdax devices of this machine, and its PCI NVMe
//! controllers whatever driver holds them, from sysfs.

use super::open::is_nvme_ns_name;
use super::{os, Dax, DevKind, ZonedModel};
use crate::error::Result;
use crate::sys::{pci, sysfs};
use crate::uri::PciAddr;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// One device found by [`enumerate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// Its path under /dev.
    pub path: PathBuf,
    /// Its kind.
    pub kind: DevKind,
    /// Size in bytes (0 for controllers).
    pub bytes: u64,
    /// Logical block size (0 for controllers and char devices).
    pub lba_size: u32,
    /// Zoned model.
    pub zoned: ZonedModel,
    /// The kernel driver.
    pub driver: Option<String>,
    /// Model string, when reported.
    pub model: Option<String>,
    /// Persistent memory: the namespace's mode, alignment and size (a devdax device, or
    /// a pmem block device).
    pub dax: Option<Dax>,
}

/// Lists the block devices, NVMe devices (namespaces, generic char devices, controllers)
/// and devdax devices on this machine, from sysfs. Empty loop and ram devices are left
/// out.
pub fn enumerate() -> Result<Vec<Listing>> {
    let mut out = Vec::new();
    let names = sysfs::sorted_names(&sysfs::class("block"))
        .map_err(|e| os(&sysfs::class("block").display().to_string(), "list block devices", e))?;
    for name in names {
        let dir = fs::canonicalize(sysfs::class("block").join(&name)).unwrap_or_default();
        let sectors: u64 = sysfs::read(&dir.join("size")).and_then(|s| s.parse().ok()).unwrap_or(0);
        if sectors == 0 && (name.starts_with("loop") || name.starts_with("ram")) {
            continue;
        }
        let disk = sysfs::disk_of(&dir);
        let q = |a: &str| sysfs::read(&disk.join("queue").join(a));
        out.push(Listing {
            path: Path::new("/dev").join(&name),
            kind: if is_nvme_ns_name(&name, "nvme") { DevKind::NvmeBlock } else { DevKind::Block },
            bytes: sectors * 512,
            lba_size: q("logical_block_size").and_then(|s| s.parse().ok()).unwrap_or(512),
            zoned: ZonedModel::from_sysfs(q("zoned").as_deref()),
            driver: sysfs::driver_of(&disk),
            model: sysfs::read(&disk.join("device/model")),
            dax: super::pmem::fsdax(&name),
        });
    }
    for (class, kind) in [("nvme-generic", DevKind::NvmeChar), ("nvme", DevKind::NvmeCtrl)] {
        let Ok(names) = sysfs::sorted_names(&sysfs::class(class)) else { continue };
        for name in names {
            let dir = sysfs::class(class).join(&name);
            let mut l = Listing {
                path: Path::new("/dev").join(&name),
                kind,
                bytes: 0,
                lba_size: 0,
                zoned: ZonedModel::None,
                driver: Some("nvme".into()),
                model: sysfs::read(&dir.join("model")).or_else(|| sysfs::read(&dir.join("device/model"))),
                dax: None,
            };
            // A generic char device ngXnY is the same namespace as the block device
            // nvmeXnY when the kernel has one: take size, LBA size and zoning from it.
            if let Some(blk) = name.strip_prefix("ng").map(|rest| format!("nvme{rest}")) {
                if let Some(b) = out.iter().find(|b| b.path == Path::new("/dev").join(&blk)) {
                    (l.bytes, l.lba_size, l.zoned) = (b.bytes, b.lba_size, b.zoned);
                    l.model = l.model.or_else(|| b.model.clone());
                }
            }
            out.push(l);
        }
    }
    // devdax devices: the dax bus (Linux ≥ 5.1), else the dax class.
    for bus in ["bus/dax/devices", "class/dax"] {
        let Ok(names) = sysfs::sorted_names(&sysfs::root().join(bus)) else { continue };
        for name in names.iter().filter(|n| super::open::is_devdax_name(n)) {
            let Ok(dir) = fs::canonicalize(sysfs::root().join(bus).join(name)) else { continue };
            let dax = super::pmem::devdax_in(&dir);
            out.push(Listing {
                path: Path::new("/dev").join(name),
                kind: DevKind::DevDax,
                bytes: dax.as_ref().map_or(0, |d| d.size),
                lba_size: 0,
                zoned: ZonedModel::None,
                driver: Some("device_dax".into()),
                model: None,
                dax,
            });
        }
        break;
    }
    Ok(out)
}

/// A PCI NVMe controller found by [`enumerate_pci`]: where it is, which driver holds it,
/// and what binding it to another driver would take away.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PciController {
    /// Its PCI address.
    pub addr: PciAddr,
    /// PCI vendor id.
    pub vendor: u16,
    /// PCI device id.
    pub device: u16,
    /// The kernel driver bound to it: `nvme`, `vfio-pci`, `uio_pci_generic`, another, or
    /// none.
    pub driver: Option<String>,
    /// Its IOMMU group; none when the kernel has no IOMMU for it (then vfio-pci cannot
    /// take it).
    pub iommu_group: Option<u32>,
    /// The other PCI functions in its IOMMU group (vfio-pci takes a group whole).
    pub group_peers: Vec<PciAddr>,
    /// The controller the kernel's nvme driver made of it (`/dev/nvme1`) while bound to
    /// nvme.
    pub controller: Option<PathBuf>,
    /// The block devices of its namespaces (`/dev/nvme1n1`, …) while bound to nvme.
    pub namespaces: Vec<PathBuf>,
}

/// Lists the PCI functions of class NVM Express (0x010802) on this machine, from
/// `/sys/bus/pci/devices`, with their driver and IOMMU group. A machine without a PCI bus
/// in sysfs has none.
pub fn enumerate_pci() -> Result<Vec<PciController>> {
    let addrs = match pci::addresses() {
        Ok(a) => a,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(os(&sysfs::root().join("bus/pci/devices").display().to_string(), "list PCI devices", e)),
    };
    let dev = |p: &PathBuf| p.file_name().map(|n| Path::new("/dev").join(n));
    Ok(addrs
        .into_iter()
        .filter_map(pci::function)
        .filter(|f| f.class == pci::NVME_CLASS)
        .map(|f| {
            let ctrls = pci::nvme_controllers(&f);
            PciController {
                addr: f.addr,
                vendor: f.vendor,
                device: f.device,
                driver: f.driver.clone(),
                iommu_group: f.iommu_group,
                group_peers: f
                    .iommu_group
                    .map(pci::group_members)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| *a != f.addr)
                    .collect(),
                controller: ctrls.first().and_then(dev),
                namespaces: ctrls.iter().flat_map(|c| pci::namespaces(c)).filter_map(|n| dev(&n)).collect(),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumeration_lists_disks_partitions_and_nvme_devices_from_sysfs() {
        let t = sysfs::Tree::new("enum");
        let c = "devices/pci0000:00/0000:00:05.0/nvme/nvme0";
        t.block("devices/virtual/block/loop0", (7, 0))
            .file("devices/virtual/block/loop0/size", "0")
            .block("devices/virtual/block/loop1", (7, 1))
            .file("devices/virtual/block/loop1/size", "2048")
            .file("devices/virtual/block/loop1/queue/logical_block_size", "4096")
            .block(&format!("{c}/nvme0n3"), (259, 3))
            .file(&format!("{c}/nvme0n3/size"), "262144")
            .file(&format!("{c}/nvme0n3/queue/logical_block_size",), "512")
            .file(&format!("{c}/nvme0n3/queue/zoned"), "host-managed")
            .file(&format!("{c}/model"), "QEMU NVMe Ctrl")
            .link("class/nvme/nvme0", c)
            .dir(&format!("{c}/ng0n3"))
            .link("class/nvme-generic/ng0n3", &format!("{c}/ng0n3"))
            // An fsdax namespace's pmem block device, and a devdax device.
            .block("devices/ndbus0/region0/namespace0.0/block/pmem0", (259, 4))
            .file("devices/ndbus0/region0/namespace0.0/block/pmem0/size", "2048")
            .link("devices/ndbus0/region0/namespace0.0/block/pmem0/device", "devices/ndbus0/region0/namespace0.0")
            .file("devices/ndbus0/region0/namespace0.0/mode", "fsdax")
            .file("devices/ndbus0/region1/dax1.0/dax1.0/size", "4194304")
            .file("devices/ndbus0/region1/dax1.0/namespace", "namespace1.0")
            .file("devices/ndbus0/region1/dax1.0/dax_region/align", "2097152")
            .link("bus/dax/devices/dax1.0", "devices/ndbus0/region1/dax1.0/dax1.0");
        let list = sysfs::with_root(&t.root, enumerate).unwrap();
        let names: Vec<String> = list.iter().map(|l| l.path.display().to_string()).collect();
        assert_eq!(
            names,
            ["/dev/loop1", "/dev/nvme0n3", "/dev/pmem0", "/dev/ng0n3", "/dev/nvme0", "/dev/dax1.0"],
            "empty loop0 is left out"
        );
        let pmem = &list[2];
        let want = Dax { mode: "fsdax".into(), namespace: Some("namespace0.0".into()), align: 4096, size: 2048 * 512 };
        assert_eq!(pmem.dax.as_ref(), Some(&want));
        let dax = &list[5];
        assert_eq!((dax.kind, dax.bytes), (DevKind::DevDax, 4 << 20));
        let want = Dax { mode: "devdax".into(), namespace: Some("namespace1.0".into()), align: 2 << 20, size: 4 << 20 };
        assert_eq!(dax.dax.as_ref(), Some(&want));
        assert_eq!((list[0].kind, list[0].bytes, list[0].lba_size), (DevKind::Block, 2048 * 512, 4096));
        assert_eq!(list[0].driver.as_deref(), Some("loop"));
        assert_eq!((list[1].kind, list[1].zoned), (DevKind::NvmeBlock, ZonedModel::HostManaged));
        // The generic char device takes size, LBA size and zoning from its block device.
        let ng = &list[3];
        assert_eq!(
            (ng.kind, ng.bytes, ng.lba_size, ng.zoned),
            (DevKind::NvmeChar, 128 << 20, 512, ZonedModel::HostManaged)
        );
        assert_eq!((list[4].kind, list[4].model.as_deref()), (DevKind::NvmeCtrl, Some("QEMU NVMe Ctrl")));
    }

    #[test]
    fn pci_enumeration_lists_nvme_controllers_with_driver_group_and_namespaces() {
        let t = sysfs::Tree::new("enum-pci");
        let kernel = pci::canned(&t, "0000:00:04.0", pci::NVME_CLASS, (0x1b36, 0x0010), Some("nvme"), Some(3));
        pci::canned(&t, "0000:00:05.0", pci::NVME_CLASS, (0x1b36, 0x0010), Some("vfio-pci"), Some(4));
        pci::canned(&t, "0000:00:06.0", pci::NVME_CLASS, (0x8086, 0x0953), None, None);
        pci::canned(&t, "0000:00:07.0", 0x01_06_01, (0x8086, 0x2922), Some("ahci"), Some(4));
        let c = format!("{kernel}/nvme/nvme0");
        t.dir(&format!("{c}/nvme0n1/queue")).file(&format!("{c}/nvme0n1/nsid"), "1");
        t.dir(&format!("{c}/nvme0n2/queue")).file(&format!("{c}/nvme0n2/nsid"), "2");
        let list = sysfs::with_root(&t.root, enumerate_pci).unwrap();
        let addrs: Vec<String> = list.iter().map(|c| c.addr.to_string()).collect();
        assert_eq!(addrs, ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"], "the AHCI function is not NVMe");
        assert_eq!((list[0].driver.as_deref(), list[0].iommu_group), (Some("nvme"), Some(3)));
        assert_eq!(list[0].controller.as_deref(), Some(Path::new("/dev/nvme0")));
        assert_eq!(list[0].namespaces, [PathBuf::from("/dev/nvme0n1"), PathBuf::from("/dev/nvme0n2")]);
        assert!(list[0].group_peers.is_empty());
        assert_eq!((list[1].driver.as_deref(), list[1].iommu_group), (Some("vfio-pci"), Some(4)));
        assert_eq!(list[1].group_peers, ["0000:00:07.0".parse::<PciAddr>().unwrap()], "a peer in its group");
        assert_eq!((list[1].controller.as_ref(), list[1].namespaces.len()), (None, 0));
        assert_eq!((list[2].driver.as_ref(), list[2].iommu_group, list[2].vendor), (None, None, 0x8086));
        let none = sysfs::Tree::new("enum-nopci");
        assert_eq!(sysfs::with_root(&none.root, enumerate_pci).unwrap(), [], "no PCI bus, no controllers");
    }
}
