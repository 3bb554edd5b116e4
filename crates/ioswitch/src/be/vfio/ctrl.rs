//! The controller: VFIO setup of a PCI function (or, with `dma=uio`, its sysfs BAR and
//! config files under uio_pci_generic), reset and enable with CAP.TO timeouts,
//! the admin queue (commands serialised by a lock), Identify, Set Features Number of
//! Queues, creation and deletion of I/O queue pairs, and shutdown notification on close.

use super::mem::{Dma, Mapper, Pool, PAGE};
use super::prp;
use super::qpair::QueuePair;
use super::regs::{self, Cap};
use crate::be::os_error as err;
use crate::buf::Buffer;
use crate::error::Error;
use crate::opts::DmaMode;
use crate::spec::idfy::{cns, IdCtrl, IDENTIFY_LEN};
use crate::spec::{errno_to_status, Sqe, Status};
use crate::sys::uio;
use crate::sys::vfio::{self, Bar, Container, Group};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Admin queue entries.
const ADMIN_ENTRIES: u16 = 32;
/// PRP list pages of the admin queue (one command at a time, command id 0's pages):
/// enough for the driver's largest transfer, before MDTS is known (it comes from the
/// first admin command, Identify). Admin data is held to MDTS as I/O is.
pub(crate) const ADMIN_LIST_PAGES: usize = 5;
/// I/O queues asked for with Set Features Number of Queues.
const WANT_QUEUES: u16 = 64;
/// How long an admin command may take (TCG guests are slow; real controllers answer in
/// milliseconds).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Admin opcodes the driver sends itself.
mod aopc {
    pub const DELETE_SQ: u8 = 0x00;
    pub const CREATE_SQ: u8 = 0x01;
    pub const DELETE_CQ: u8 = 0x04;
    pub const CREATE_CQ: u8 = 0x05;
    pub const SET_FEATURES: u8 = 0x09;
}
/// Feature: Number of Queues.
const FID_NUM_QUEUES: u32 = 0x07;

struct Admin {
    qp: QueuePair,
    /// A page for identify data the driver reads itself.
    page: Dma,
    next_cid: u16,
}

/// One NVMe controller driven from user space through VFIO.
pub(crate) struct Ctrl {
    /// Its PCI address.
    pub addr: String,
    bar: Bar,
    pub cap: Cap,
    admin: Mutex<Admin>,
    /// I/O queue ids in use (index = qid - 1), as many as the controller granted.
    qids: Mutex<Vec<bool>>,
    /// Identify Controller.
    pub id: IdCtrl,
    /// The most bytes one I/O command carries: the controller's MDTS, at most
    /// [`prp::DRIVER_MAX`].
    pub max_transfer: u64,
    /// PRP list pages per command id of an I/O queue, enough for `max_transfer`.
    list_pages: usize,
    pub(crate) pool: Pool,
    _backing: Backing,
}

/// What keeps the device's access open besides the BAR mapping.
enum Backing {
    /// The VFIO device, its group and container (the IOMMU domain).
    Vfio { _dev: vfio::Device, _group: Group, _container: Arc<Container> },
    /// uio_pci_generic: the config file, locked (one driver per controller).
    Uio { _cfg: uio::Config },
}

fn other(addr: &str, what: impl Into<String>, why: impl Into<String>) -> Error {
    err(addr, what, io::Error::other(why.into()))
}

/// The failure of an admin command `what` the driver sent, with the controller's status.
fn failed(addr: &str, what: &str, status: Status) -> Error {
    Error::Command { dev: addr.into(), what: what.into(), status }
}

/// The sysfs directory of PCI function `addr`, bound to the driver `dma` needs.
fn bound_dir(addr: &str, dma: DmaMode) -> Result<std::path::PathBuf, Error> {
    let dir = crate::sys::sysfs::root().join("bus/pci/devices").join(addr);
    if !dir.exists() {
        return Err(other(addr, "find the PCI device", format!("no PCI device {addr} ({} is missing)", dir.display())));
    }
    // Not an NVMe controller: refused as such, before any word on drivers (binding it to
    // vfio-pci would take it from its own driver for nothing). A class sysfs does not give
    // (0) is left to the driver check.
    let f = addr.parse().ok().and_then(crate::sys::pci::function);
    if let Some(why) = f.filter(|f| f.class != 0).and_then(|f| f.not_nvme()) {
        return Err(other(addr, "open", format!("{why}: the user-space driver drives NVMe controllers only")));
    }
    let driver = std::fs::read_link(dir.join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let want = dma.kernel_driver();
    if driver.as_deref() != Some(want) {
        let (bind, other_mode) = match dma {
            DmaMode::Vfio => ("vfio", "; a device bound to uio_pci_generic is opened with dma=uio"),
            DmaMode::Uio => ("uio", "; a device bound to vfio-pci is opened without dma=uio"),
        };
        let hint = match driver.as_deref() {
            Some("uio_pci_generic" | "vfio-pci") => other_mode,
            _ => "",
        };
        return Err(other(
            addr,
            format!("open through {want} (dma={})", dma.as_str()),
            format!(
                "the device is bound to {}, not {want}: bind it first (`ioswitch driver bind {bind} {addr}`, or \
                 driver_override + drivers_probe in sysfs){hint}",
                driver.as_deref().unwrap_or("no driver")
            ),
        ));
    }
    Ok(dir)
}

/// The IOMMU group of a PCI function bound to vfio-pci, from sysfs.
fn group_of(addr: &str) -> Result<u32, Error> {
    let dir = bound_dir(addr, DmaMode::Vfio)?;
    let link = std::fs::read_link(dir.join("iommu_group")).map_err(|_| {
        other(
            addr,
            "find its IOMMU group",
            "the device has no IOMMU group: vfio needs an IOMMU (intel_iommu=on); without one, bind it to \
             uio_pci_generic and open it with dma=uio (no DMA isolation, docs/PCI.md)",
        )
    })?;
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| other(addr, "find its IOMMU group", format!("unexpected iommu_group link {}", link.display())))
}

/// Takes a function bound to vfio-pci: container, group, device, bus mastering, BAR0.
fn attach_vfio(addr: &str) -> Result<(Bar, Pool, Backing), Error> {
    let group_no = group_of(addr)?;
    if !Path::new("/dev/vfio/vfio").exists() {
        return Err(other(addr, "open /dev/vfio/vfio", "no VFIO in this kernel (modprobe vfio-pci)"));
    }
    let container = Arc::new(Container::open().map_err(|e| err(addr, "open the VFIO container", e))?);
    let group = Group::open(group_no).map_err(|e| err(addr, format!("open /dev/vfio/{group_no}"), e))?;
    if !group.viable().map_err(|e| err(addr, "VFIO_GROUP_GET_STATUS", e))? {
        return Err(other(
            addr,
            "use its IOMMU group",
            format!("IOMMU group {group_no} has devices not bound to vfio-pci; bind all of them"),
        ));
    }
    group.set_container(&container).map_err(|e| err(addr, "VFIO_GROUP_SET_CONTAINER", e))?;
    container.set_iommu().map_err(|e| err(addr, "VFIO_SET_IOMMU (type1v2)", e))?;
    let dev = group.device(addr).map_err(|e| err(addr, "VFIO_GROUP_GET_DEVICE_FD", e))?;
    // Memory space and bus mastering on (PCI command register, config offset 4).
    let cfg = dev.region(vfio::CONFIG_REGION).map_err(|e| err(addr, "config space region info", e))?;
    let mut cmd = [0u8; 2];
    dev.read_region(&cfg, 4, &mut cmd).map_err(|e| err(addr, "read the PCI command register", e))?;
    let v = u16::from_le_bytes(cmd) | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    dev.write_region(&cfg, 4, &v.to_le_bytes()).map_err(|e| err(addr, "enable bus mastering", e))?;
    let r = dev.region(vfio::BAR0_REGION).map_err(|e| err(addr, "BAR0 region info", e))?;
    let bar = dev.map(&r).map_err(|e| err(addr, "mmap BAR0", e))?;
    let pool = Pool::new(Mapper::Iommu(container.clone()));
    Ok((bar, pool, Backing::Vfio { _dev: dev, _group: group, _container: container }))
}

/// Takes a function bound to uio_pci_generic (no IOMMU): bus mastering through the
/// sysfs config file, BAR0 through `resource0`, DMA memory at physical addresses.
fn attach_uio(addr: &str) -> Result<(Bar, Pool, Backing), Error> {
    let dir = bound_dir(addr, DmaMode::Uio)?;
    let cfg = uio::Config::open(&dir.join("config")).map_err(|e| err(addr, "open the PCI config space (sysfs)", e))?;
    // Nothing else stops a second driver from resetting the controller under this one.
    cfg.lock()
        .map_err(|e| err(addr, "lock the controller (flock on its sysfs config file): is it open already?", e))?;
    let cmd = cfg.read16(4).map_err(|e| err(addr, "read the PCI command register", e))?;
    cfg.write16(4, cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER)
        .map_err(|e| err(addr, "enable bus mastering (PCI command register)", e))?;
    let bar = uio::map_resource(&dir.join("resource0")).map_err(|e| err(addr, "mmap BAR0 (resource0)", e))?;
    Ok((bar, Pool::new(Mapper::Physical), Backing::Uio { _cfg: cfg }))
}

/// PCI command register: memory space enable.
const PCI_COMMAND_MEMORY: u16 = 0x2;
/// PCI command register: bus master enable.
const PCI_COMMAND_MASTER: u16 = 0x4;

fn wait_for(bar: &Bar, timeout: Duration, done: impl Fn(u32) -> bool) -> Option<u32> {
    let start = Instant::now();
    loop {
        let csts = bar.read32(regs::CSTS);
        if done(csts) {
            return Some(csts);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Ctrl {
    /// Takes the controller at `addr` (bound to vfio-pci, or to uio_pci_generic with
    /// `dma=uio`): bus mastering, BAR0, reset, admin queue, enable, Identify
    /// Controller, and the number of I/O queues.
    pub(crate) fn open(addr: &str, dma: DmaMode) -> Result<Ctrl, Error> {
        let (bar, pool, backing) = match dma {
            DmaMode::Vfio => attach_vfio(addr)?,
            DmaMode::Uio => attach_uio(addr)?,
        };
        // The registers and the admin queue's doorbells must lie inside BAR0.
        if bar.len() < regs::cq_head_doorbell(0, 0) + 4 {
            return Err(other(
                addr,
                "map BAR0",
                format!("BAR0 has {} bytes, too few for an NVMe controller's registers", bar.len()),
            ));
        }
        let cap = Cap::decode(bar.read64(regs::CAP));
        if cap.mps_min > PAGE as u64 {
            return Err(other(addr, "configure", format!("the controller's minimum page is {} bytes", cap.mps_min)));
        }
        let timeout = Duration::from_millis(cap.timeout_ms.max(500));
        // Reset: disable and wait for RDY to clear.
        if bar.read32(regs::CC) & 1 != 0 {
            bar.write32(regs::CC, 0);
        }
        if wait_for(&bar, timeout, |s| s & regs::CSTS_RDY == 0).is_none() {
            return Err(other(addr, "reset", format!("CSTS.RDY stayed set for {} ms (CAP.TO)", cap.timeout_ms)));
        }
        let qp = QueuePair::new(&pool, 0, ADMIN_ENTRIES, 1, ADMIN_LIST_PAGES, cap.dstrd)
            .map_err(|e| err(addr, "admin queue memory", e))?;
        let page = pool.dma(IDENTIFY_LEN).map_err(|e| err(addr, "identify page memory", e))?;
        bar.write32(regs::AQA, regs::aqa(ADMIN_ENTRIES));
        bar.write64(regs::ASQ, qp.sq_iova());
        bar.write64(regs::ACQ, qp.cq_iova());
        bar.write32(regs::CC, regs::cc_enable(cap.all_iocs));
        match wait_for(&bar, timeout, |s| s & (regs::CSTS_RDY | regs::CSTS_CFS) != 0) {
            Some(s) if s & regs::CSTS_CFS != 0 => {
                return Err(other(addr, "enable", "the controller reports a fatal status (CSTS.CFS)"))
            }
            Some(_) => {}
            None => {
                return Err(other(addr, "enable", format!("CSTS.RDY not set within {} ms (CAP.TO)", cap.timeout_ms)))
            }
        }
        let mut ctrl = Ctrl {
            addr: addr.into(),
            bar,
            cap,
            admin: Mutex::new(Admin { qp, page, next_cid: 0 }),
            qids: Mutex::new(Vec::new()),
            id: IdCtrl::default(),
            max_transfer: 0,
            list_pages: 1,
            pool,
            _backing: backing,
        };
        let failed = |what: &str, s: Status| failed(addr, what, s);
        let page = ctrl.identify(cns::CTRL, 0, 0).map_err(|s| failed("Identify Controller", s))?;
        ctrl.id = IdCtrl::from_bytes(&page).map_err(|_| failed("Identify Controller", errno_to_status(libc::EIO)))?;
        ctrl.max_transfer = ctrl.id.max_transfer(ctrl.cap.mps_min).unwrap_or(u64::MAX).min(prp::DRIVER_MAX);
        ctrl.list_pages = prp::list_pages(prp::entries_for(ctrl.max_transfer)).max(1);
        let want = (WANT_QUEUES as u32 - 1) | (WANT_QUEUES as u32 - 1) << 16;
        let sqe = Sqe { opcode: aopc::SET_FEATURES, cdw10: FID_NUM_QUEUES, cdw11: want, ..Sqe::default() };
        let got = ctrl.admin_iova(sqe, &[]).map_err(|s| failed("Set Features (Number of Queues)", s))?;
        let n = ((got & 0xffff) as u16).min((got >> 16) as u16).saturating_add(1).min(WANT_QUEUES);
        // Only queues whose doorbells lie inside BAR0.
        let n = (1..=n).take_while(|&q| regs::cq_head_doorbell(q, cap.dstrd) + 4 <= ctrl.bar.len()).count() as u16;
        ctrl.qids = Mutex::new(vec![false; n as usize]);
        Ok(ctrl)
    }

    /// Where the max transfer comes from, in words (for the refusal of a longer command).
    pub(crate) fn transfer_limit(&self) -> String {
        limit_why(self.id.mdts, self.cap.mps_min, self.max_transfer)
    }

    /// The most PRP entries (pages) one I/O command may have.
    pub(crate) fn max_entries(&self) -> usize {
        prp::max_entries(self.list_pages)
    }

    /// The controller's registers.
    pub(crate) fn bar(&self) -> &Bar {
        &self.bar
    }

    /// Runs one admin command with its data at the given device addresses and waits
    /// for its completion; the result (DW0-1) or the controller's status.
    pub(crate) fn admin_iova(&self, sqe: Sqe, pieces: &[(u64, u64)]) -> Result<u64, Status> {
        let mut a = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        self.admin_locked(&mut a, sqe, pieces)
    }

    fn admin_locked(&self, a: &mut Admin, mut sqe: Sqe, pieces: &[(u64, u64)]) -> Result<u64, Status> {
        let cid = a.next_cid;
        a.next_cid = a.next_cid.wrapping_add(1);
        let (p1, p2) = a.qp.describe(0, pieces).map_err(|_| errno_to_status(libc::EINVAL))?;
        sqe.cid = cid;
        sqe.flags &= !0xc0; // PRPs, not SGLs
        sqe.mptr = 0;
        sqe.dptr = [p1, p2];
        if a.qp.sq.is_full() {
            return Err(errno_to_status(libc::EBUSY));
        }
        self.run(&mut a.qp, &sqe, ADMIN_TIMEOUT)
    }

    /// Pushes `sqe` on `qp`, rings, and polls until the completion of its command id
    /// comes (completions of other ids are dropped): its result (DW0-1) or the
    /// controller's status; ETIMEDOUT once `timeout` has passed without it.
    pub(crate) fn run(&self, qp: &mut QueuePair, sqe: &Sqe, timeout: Duration) -> Result<u64, Status> {
        qp.push(sqe);
        qp.ring(&self.bar);
        let start = Instant::now();
        let mut out = None;
        loop {
            qp.poll(&self.bar, u32::MAX, |c| {
                if c.cid == sqe.cid {
                    out = Some(c);
                }
            });
            if let Some(c) = out {
                let st = Status::from_cqe_status(c.status);
                return if st.raw == 0 { Ok(c.result) } else { Err(st) };
            }
            if start.elapsed() > timeout {
                return Err(errno_to_status(libc::ETIMEDOUT));
            }
        }
    }

    /// An Identify page, read into the driver's page and copied out.
    pub(crate) fn identify(&self, cns: u8, nsid: u32, csi: u8) -> Result<Buffer, Status> {
        let sqe = crate::cmd::Cmd::identify(cns, nsid, 0, csi).sqe;
        let mut out = Buffer::alloc(IDENTIFY_LEN, PAGE).map_err(|_| errno_to_status(libc::ENOMEM))?;
        // The page is only used under the admin lock.
        let mut a = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let iova = a.page.iova(0);
        a.page.mem().zero(a.page.base(), IDENTIFY_LEN);
        self.admin_locked(&mut a, sqe, &[(iova, IDENTIFY_LEN as u64)])?;
        a.page.mem().read(a.page.base(), &mut out);
        Ok(out)
    }

    /// A Zone Management Receive of one zone descriptor (partial report) into `rep`,
    /// through the identify page.
    pub(crate) fn zone_report0(&self, nsid: u32, rep: &mut Buffer) -> Result<u64, Status> {
        let page = self.pool.dma(IDENTIFY_LEN).map_err(|_| errno_to_status(libc::ENOMEM))?;
        let iova = page.iova(0);
        let len = rep.len().min(IDENTIFY_LEN) as u32;
        let sqe = crate::be::nvme::zone_report0(nsid, len);
        // A zone report is an I/O command: on a short-lived queue pair of its own.
        let mut qp = self.create_qpair(2).map_err(|_| errno_to_status(libc::EIO))?;
        let r = match qp.describe(0, &[(iova, len as u64)]) {
            Ok((p1, p2)) => self.run(&mut qp, &Sqe { dptr: [p1, p2], ..sqe }, ADMIN_TIMEOUT),
            Err(_) => Err(errno_to_status(libc::EINVAL)),
        };
        self.delete_qpair(&qp);
        page.mem().read(page.base(), &mut rep[..len as usize]);
        r
    }

    /// Creates an I/O queue pair for up to `depth` commands in flight: a free queue id,
    /// Create I/O Completion Queue, Create I/O Submission Queue (physically contiguous,
    /// polled: no interrupts).
    pub(crate) fn create_qpair(&self, depth: u32) -> Result<QueuePair, Error> {
        let entries = depth + 1;
        if entries > self.cap.mqes || entries > u16::MAX as u32 {
            return Err(other(
                &self.addr,
                "create an I/O queue",
                format!(
                    "queue depth {depth} needs {entries} entries; the controller allows {} (CAP.MQES)",
                    self.cap.mqes
                ),
            ));
        }
        if entries as usize * 64 > vfio::HUGEPAGE {
            return Err(other(&self.addr, "create an I/O queue", format!("queue depth {depth} is too large")));
        }
        let qid = {
            let mut q = self.qids.lock().unwrap_or_else(|e| e.into_inner());
            let Some(i) = q.iter().position(|u| !u) else {
                return Err(other(
                    &self.addr,
                    "create an I/O queue",
                    format!("all {} I/O queues the controller granted are in use", q.len()),
                ));
            };
            q[i] = true;
            i as u16 + 1
        };
        let create = || {
            let qp = QueuePair::new(&self.pool, qid, entries as u16, depth as u16, self.list_pages, self.cap.dstrd)
                .map_err(|e| err(&self.addr, "I/O queue memory", e))?;
            let size = (entries - 1) << 16 | qid as u32;
            let cq = Sqe { opcode: aopc::CREATE_CQ, cdw10: size, cdw11: 1, ..Sqe::default() };
            self.admin_iova(cq, &[(qp.cq_iova(), PAGE as u64)])
                .map_err(|s| failed(&self.addr, "Create I/O Completion Queue", s))?;
            let sq = Sqe { opcode: aopc::CREATE_SQ, cdw10: size, cdw11: (qid as u32) << 16 | 1, ..Sqe::default() };
            if let Err(s) = self.admin_iova(sq, &[(qp.sq_iova(), PAGE as u64)]) {
                let _ = self.admin_iova(Sqe { opcode: aopc::DELETE_CQ, cdw10: qid as u32, ..Sqe::default() }, &[]);
                return Err(failed(&self.addr, "Create I/O Submission Queue", s));
            }
            Ok(qp)
        };
        // A queue id is in use only while its queues exist.
        let made = create();
        if made.is_err() {
            self.qids.lock().unwrap_or_else(|e| e.into_inner())[qid as usize - 1] = false;
        }
        made
    }

    /// Deletes an I/O queue pair: the controller aborts or completes every command of
    /// its submission queue before the Delete I/O Submission Queue completes, so its
    /// buffers are the host's again. False when the controller refused (then nothing
    /// the queue's commands carried may be reused).
    pub(crate) fn delete_qpair(&self, qp: &QueuePair) -> bool {
        let qid = qp.qid as u32;
        let sq = self.admin_iova(Sqe { opcode: aopc::DELETE_SQ, cdw10: qid, ..Sqe::default() }, &[]);
        let cq = self.admin_iova(Sqe { opcode: aopc::DELETE_CQ, cdw10: qid, ..Sqe::default() }, &[]);
        let ok = sq.is_ok() && cq.is_ok();
        if ok {
            self.qids.lock().unwrap_or_else(|e| e.into_inner())[qp.qid as usize - 1] = false;
        }
        ok
    }
}

impl Drop for Ctrl {
    fn drop(&mut self) {
        // Normal shutdown notification, then disable: no DMA after this.
        let cc = self.bar.read32(regs::CC);
        self.bar.write32(regs::CC, (cc & !(3 << 14)) | regs::CC_SHN_NORMAL);
        let timeout = Duration::from_millis(self.cap.timeout_ms.max(500));
        let _ = wait_for(&self.bar, timeout, regs::shutdown_complete);
        self.bar.write32(regs::CC, 0);
        let _ = wait_for(&self.bar, timeout, |s| s & regs::CSTS_RDY == 0);
    }
}

/// Why a controller with MDTS `mdts` (in units of `mps_min`) gets a max transfer of
/// `max` bytes through this driver.
fn limit_why(mdts: u8, mps_min: u64, max: u64) -> String {
    match mps_min.checked_shl(mdts as u32) {
        _ if mdts == 0 => format!(
            "the controller sets no MDTS; the user-space driver's limit is {max} bytes (its PRP list pages per command)"
        ),
        Some(m) if m <= max => format!("the controller's MDTS is {mdts} (2^{mdts} x {mps_min} = {m} bytes)"),
        _ => format!(
            "the controller's MDTS is {mdts} (2^{mdts} x {mps_min} bytes); the user-space driver's limit is {max} bytes (its PRP list pages per command)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transfer_limit_names_mdts_and_the_driver_cap() {
        assert_eq!(limit_why(10, 4096, 4 << 20), "the controller's MDTS is 10 (2^10 x 4096 = 4194304 bytes)");
        let e = limit_why(12, 4096, prp::DRIVER_MAX);
        assert!(e.contains("MDTS is 12") && e.contains("driver's limit is 8388608 bytes"), "{e}");
        let e = limit_why(0, 4096, prp::DRIVER_MAX);
        assert!(e.contains("sets no MDTS") && e.contains("8388608"), "{e}");
    }
    use crate::sys::sysfs::{with_root, Tree};

    #[test]
    fn a_controller_not_ready_for_vfio_is_refused_saying_why() {
        let t = Tree::new("vfio-open");
        let dev = "bus/pci/devices/0000:00:05.0";
        t.dir("bus/pci/drivers/nvme").dir("bus/pci/drivers/vfio-pci").dir("kernel/iommu_groups/4");
        t.link(&format!("{dev}/driver"), "bus/pci/drivers/nvme");
        t.dir("bus/pci/devices/0000:00:06.0");
        t.link("bus/pci/devices/0000:00:07.0/driver", "bus/pci/drivers/vfio-pci");
        let why =
            |addr: &str| with_root(&t.root, || Ctrl::open(addr, DmaMode::Vfio).err().expect("refused").to_string());
        let e = why("0000:00:04.0");
        assert!(e.contains("no PCI device 0000:00:04.0"), "{e}");
        let e = why("0000:00:05.0");
        assert!(e.contains("bound to nvme, not vfio-pci") && e.contains("driver bind vfio 0000:00:05.0"), "{e}");
        let e = why("0000:00:06.0");
        assert!(e.contains("bound to no driver, not vfio-pci"), "{e}");
        let e = why("0000:00:07.0");
        assert!(e.contains("no IOMMU group") && e.contains("intel_iommu=on") && e.contains("dma=uio"), "{e}");
        // A device that is not NVMe (here virtio's entropy source, bound to its driver) is
        // refused as such, with no advice to bind it to vfio-pci.
        let rng = "bus/pci/devices/0000:00:09.0";
        t.dir("bus/pci/drivers/virtio-pci").link(&format!("{rng}/driver"), "bus/pci/drivers/virtio-pci");
        t.file(&format!("{rng}/class"), "0xffff00\n").file(&format!("{rng}/vendor"), "0x1af4\n");
        t.file(&format!("{rng}/device"), "0x1044\n");
        let e = why("0000:00:09.0");
        assert!(e.contains("not an NVMe controller (class 0xffff00, id 1af4:1044") && !e.contains("bind"), "{e}");
    }

    #[test]
    fn dma_uio_wants_uio_pci_generic_and_enables_bus_mastering_through_sysfs() {
        let t = Tree::new("uio-open");
        t.dir("bus/pci/drivers/nvme").dir("bus/pci/drivers/vfio-pci").dir("bus/pci/drivers/uio_pci_generic");
        t.link("bus/pci/devices/0000:00:05.0/driver", "bus/pci/drivers/nvme");
        t.link("bus/pci/devices/0000:00:07.0/driver", "bus/pci/drivers/vfio-pci");
        let uio = "bus/pci/devices/0000:00:08.0";
        t.link(&format!("{uio}/driver"), "bus/pci/drivers/uio_pci_generic");
        // Config space with the command register at 0 (memory space and bus mastering
        // off), and a resource0 of one byte: too small for the registers.
        t.file(&format!("{uio}/config"), &"\0".repeat(64)).file(&format!("{uio}/resource0"), "");
        let why = |addr: &str, dma| with_root(&t.root, || Ctrl::open(addr, dma).err().expect("refused").to_string());
        let e = why("0000:00:05.0", DmaMode::Uio);
        assert!(
            e.contains("bound to nvme, not uio_pci_generic") && e.contains("ioswitch driver bind uio 0000:00:05.0"),
            "{e}"
        );
        let e = why("0000:00:07.0", DmaMode::Uio);
        assert!(e.contains("bound to vfio-pci, not uio_pci_generic") && e.contains("without dma=uio"), "{e}");
        let e = why("0000:00:08.0", DmaMode::Vfio);
        assert!(e.contains("bound to uio_pci_generic, not vfio-pci") && e.contains("opened with dma=uio"), "{e}");
        let e = why("0000:00:08.0", DmaMode::Uio);
        assert!(e.contains("BAR0 has 1 bytes, too few"), "{e}");
        let cfg = std::fs::read(t.root.join(uio).join("config")).unwrap();
        assert_eq!(&cfg[4..6], &[0x06, 0x00], "memory space and bus mastering enabled before BAR0 is mapped");
    }
}
