//! `ioswitch driver bind`: move a PCI NVMe controller between the kernel's nvme driver and
//! the drivers a user-space driver needs (vfio-pci, uio_pci_generic), through the library's
//! `bind_driver`, which refuses when that would put data at risk.

use crate::fail::{Failure, Outcome};
use crate::output::{self, Format};
use clap::{Args, Subcommand};
use ioswitch::dev::{bind_driver, PciDriver};
use ioswitch::uri::PciAddr;

pub const DRIVER_EXAMPLES: &str = "\
Examples:
  ioswitch enum                                  # PCI NVMe controllers, their driver and IOMMU group
  sudo ioswitch driver bind vfio 0000:00:05.0    # for the user-space driver, behind the IOMMU
  sudo ioswitch driver bind nvme 0000:00:05.0    # back to the kernel: /dev/nvmeXnY again
  sudo ioswitch driver bind uio 0000:00:05.0     # no IOMMU: uio_pci_generic (no DMA isolation)";

const BIND_HELP: &str = "\
Moves the controller as SPDK's setup script does: its driver_override names the new
driver, the old driver lets go of it (driver/unbind), the PCI core probes it again
(/sys/bus/pci/drivers_probe), and the override is cleared. Bound to nvme, the command
returns once the controller is live; its namespaces appear a moment later.

Refused, with the reason, before anything is changed:
  - any namespace (or partition) of the controller is mounted, swapped on, held
    (device-mapper, md, any holder in sysfs) or claimed by an exclusive open;
  - any process has one of its device nodes open (/dev/nvmeXnY, /dev/ngXnY, /dev/nvmeX,
    /dev/vfio/GROUP, /dev/uioN) or its BAR files in sysfs open or mapped;
  - not root; the target driver's module not loaded (modprobe vfio-pci vfio_iommu_type1,
    modprobe uio_pci_generic);
  - vfio: the device has no IOMMU group (no IOMMU: boot with intel_iommu=on), or shares
    its group with other devices;
  - vfio and uio: no 2 MiB hugepages reserved (sysctl vm.nr_hugepages=64): the user-space
    driver's DMA memory comes from them;
  - the address names no PCI device, or one that is not an NVMe controller.

uio_pci_generic gives a user-space driver the device without an IOMMU: the device can
then write anywhere in memory (docs/PCI.md). Use it only where vfio cannot work.";

#[derive(Subcommand)]
pub enum DriverCmd {
    /// Bind a PCI NVMe controller to vfio (vfio-pci), uio (uio_pci_generic) or nvme.
    #[command(after_long_help = BIND_HELP)]
    Bind(BindArgs),
}

#[derive(Args)]
pub struct BindArgs {
    /// The driver: vfio, uio or nvme.
    #[arg(value_parser = parse_driver)]
    driver: PciDriver,
    /// The controller's PCI address, as `ioswitch enum` shows it: 0000:00:05.0.
    #[arg(value_parser = parse_addr)]
    addr: PciAddr,
}

fn parse_driver(s: &str) -> Result<PciDriver, String> {
    s.parse()
}

fn parse_addr(s: &str) -> Result<PciAddr, String> {
    s.strip_prefix("pci:").unwrap_or(s).parse()
}

/// Runs `ioswitch driver …`.
pub fn driver(cmd: &DriverCmd, format: Format) -> Outcome {
    let DriverCmd::Bind(a) = cmd;
    let b = bind_driver(a.addr, a.driver).map_err(Failure::from)?;
    let text = match format {
        Format::Text => {
            let from = b.from.as_deref().unwrap_or("no driver");
            let group = b.iommu_group.map_or("none".to_string(), |g| g.to_string());
            if b.changed {
                format!("{}: {from} -> {} (IOMMU group {group})\n", b.addr, b.to)
            } else {
                format!("{}: bound to {} already; nothing changed\n", b.addr, b.to)
            }
        }
        _ => output::structured(format, &b)?,
    };
    output::stdout(&text)
}
