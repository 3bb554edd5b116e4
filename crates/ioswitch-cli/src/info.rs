//! `ioswitch info` and `ioswitch enum`: what a device is, and which devices there are.

use crate::fail::Outcome;
use crate::output::{self, human, human_exact, serde_name, Format, KeyValues};
use ioswitch::dev::{Listing, PciController};
use ioswitch::{Dax, Device, Geometry, Ident, Interfaces, Opts, PmemInfo, ZonedModel};
use serde::Serialize;
use std::collections::BTreeMap;

/// Everything `info` reports, in the shape JSON and YAML show it.
#[derive(Serialize)]
struct InfoReport<'a> {
    ident: &'a Ident,
    interfaces: Interfaces,
    geometry: &'a Geometry,
    /// The option string the device was opened with (defaults left out).
    opts: String,
    /// Every interface that can serve this kind of device under the options it was opened
    /// with, by role (the library's table and the options' rules).
    available: BTreeMap<&'static str, Vec<&'static str>>,
    /// How `sync=pmem` mapped the device (absent for other interfaces).
    #[serde(skip_serializing_if = "Option::is_none")]
    pmem: Option<PmemInfo>,
    /// Why the device was opened read-only although the options did not ask for it: the
    /// read-write open was refused (absent when it was not).
    #[serde(skip_serializing_if = "Option::is_none")]
    read_only_because: Option<String>,
}

/// Opens `uri` with `opts` and prints its kind, interfaces, geometry and identity. Opened
/// read-write as the options say, so that it reports what writes would meet (a mounted
/// device's guard); where this user may not write (EACCES, EPERM, EROFS) and the options
/// name no open mode, read-only instead, saying so.
pub fn info(uri: &str, opts: &Opts, format: Format) -> Outcome {
    let mut opts = opts.clone();
    let mut read_only_because = None;
    let dev = match Device::open(uri, &opts) {
        Err(e)
            if e.errno().is_some_and(|n| {
                use std::io::ErrorKind::{PermissionDenied, ReadOnlyFilesystem};
                matches!(std::io::Error::from_raw_os_error(n).kind(), PermissionDenied | ReadOnlyFilesystem)
            }) && !opts.rdonly
                && !opts.asks_write_mode() =>
        {
            opts = opts.for_reading();
            let dev = Device::open(uri, &opts)?;
            read_only_because = Some(e.to_string());
            dev
        }
        r => r?,
    };
    let report = InfoReport {
        ident: dev.ident(),
        interfaces: dev.interfaces(),
        geometry: dev.geometry(),
        opts: opts.to_string(),
        available: available(dev.ident().kind, &opts),
        pmem: dev.pmem(),
        read_only_because,
    };
    let text = match format {
        Format::Text => info_text(&report),
        _ => output::structured(format, &report)?,
    };
    output::stdout(&text)
}

/// The interfaces that can serve `kind` opened with `opts`, by role.
fn available(kind: ioswitch::DevKind, opts: &Opts) -> BTreeMap<&'static str, Vec<&'static str>> {
    let mut m: BTreeMap<&'static str, Vec<&'static str>> = BTreeMap::new();
    for d in ioswitch::interfaces().iter().filter(|d| d.serves(kind, opts)) {
        m.entry(d.role.key()).or_default().push(d.name);
    }
    m
}

fn or_dash(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".into())
}

fn limit(n: u32) -> String {
    if n == 0 {
        "no limit".into()
    } else {
        n.to_string()
    }
}

fn info_text(r: &InfoReport) -> String {
    let (id, g, i) = (r.ident, r.geometry, &r.interfaces);
    let mut kv = KeyValues::default();
    kv.top("uri", &id.uri);
    kv.top("kind", id.kind.as_str());
    if let Some(p) = &id.path {
        kv.top("path", p.display().to_string());
    }
    kv.top("options", if r.opts.is_empty() { "(defaults)" } else { &r.opts });

    kv.heading("interfaces");
    kv.item("sync", i.sync.map_or("none".to_string(), |s| s.to_string()));
    kv.item("async", i.r#async.map_or("none".to_string(), |a| a.to_string()));
    kv.item("admin", i.admin.to_string());
    kv.item("mem", i.mem.to_string());
    for role in ["sync", "async", "admin"] {
        let names = r.available.get(role).map(|v| v.join(", ")).unwrap_or_else(|| "none".into());
        kv.item(&format!("{role} can be"), names);
    }

    let lba = g.lba_size as u64;
    kv.heading("geometry");
    kv.item("lba size", format!("{} bytes", g.lba_size));
    kv.item("lba count", g.nlbas.to_string());
    kv.item("size", human_exact(g.bytes));
    kv.item("max transfer", human_exact(g.max_transfer));
    kv.item("dio memory align", format!("{} bytes", g.dio_mem_align));
    kv.item("dio offset align", format!("{} bytes", g.dio_offset_align));
    kv.item("zoned", serde_name(&g.zoned));
    if let Some(z) = &g.zones {
        kv.item("zone size", format!("{} LBAs ({})", z.zone_size, human(z.zone_size.saturating_mul(lba))));
        kv.item("zone capacity", format!("{} LBAs ({})", z.zone_capacity, human(z.zone_capacity.saturating_mul(lba))));
        kv.item("zones", z.nr_zones.to_string());
        kv.item("max open zones", limit(z.max_open));
        kv.item("max active zones", limit(z.max_active));
    }

    kv.heading("identity");
    kv.item("nsid", id.nsid.to_string());
    kv.item("driver", or_dash(&id.driver));
    kv.item("block device", or_dash(&id.block_name));
    kv.item("model", or_dash(&id.model));
    kv.item("serial", or_dash(&id.serial));
    if let Some(why) = &id.in_use {
        kv.item("writes", format!("refused: {why} (allow_mounted_write=1 overrides)"));
    }
    if let Some(why) = &r.read_only_because {
        kv.item("writes", format!("refused: opened read-only, as the read-write open failed ({why})"));
    }
    if id.dax.is_some() || r.pmem.is_some() {
        kv.heading("persistent memory");
    }
    if let Some(d) = &id.dax {
        kv.item("namespace mode", &d.mode);
        kv.item("namespace", or_dash(&d.namespace));
        kv.item("alignment", human_exact(d.align));
        kv.item("dax size", human_exact(d.size));
    }
    if let Some(p) = &r.pmem {
        let how = match p.mode {
            "forced" => {
                "pmem_force=1: ordinary memory, run with pmem's instructions (nothing made durable)".to_string()
            }
            m => format!("{m}: stores made durable in place"),
        };
        kv.item("mapping", how);
        kv.item("write-back", format!("{}, non-temporal stores from {} bytes, then sfence", p.flush, p.nt_threshold));
        kv.item("mapping alignment", human_exact(p.align));
        if p.populate {
            kv.item(
                "populated",
                if p.populate_writes {
                    "pmem_populate=1: MAP_POPULATE and MADV_POPULATE_WRITE, page faults taken at open"
                } else {
                    "pmem_populate=1: MAP_POPULATE (for reading only: read-only, or a kernel before 5.14), \
                     read faults taken at open"
                },
            );
        }
    }
    kv.render()
}

/// What `enum` prints as JSON or YAML.
#[derive(Serialize)]
struct EnumReport {
    devices: Vec<Listing>,
    pci: Vec<PciController>,
}

/// Lists the block and NVMe devices of this machine, then its PCI NVMe controllers (with
/// the driver that holds each: nvme, vfio-pci, uio_pci_generic or none).
pub fn list(format: Format) -> Outcome {
    let devices = ioswitch::enumerate()?;
    let pci = ioswitch::enumerate_pci()?;
    let text = match format {
        Format::Text => {
            let mut t =
                if devices.is_empty() { "no block or NVMe devices found\n".to_string() } else { list_text(&devices) };
            if !pci.is_empty() {
                t.push('\n');
                t.push_str(&pci_text(&pci));
            }
            t
        }
        _ => output::structured(format, &EnumReport { devices, pci })?,
    };
    output::stdout(&text)
}

fn pci_text(ctrls: &[PciController]) -> String {
    let rows: Vec<Vec<String>> = ctrls
        .iter()
        .map(|c| {
            let group = match (c.iommu_group, c.group_peers.as_slice()) {
                (None, _) => "none".to_string(),
                (Some(g), []) => g.to_string(),
                (Some(g), peers) => {
                    format!("{g} (with {})", peers.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))
                }
            };
            let namespaces: Vec<String> = c.namespaces.iter().map(|n| n.display().to_string()).collect();
            vec![
                c.addr.to_string(),
                format!("{:04x}:{:04x}", c.vendor, c.device),
                c.driver.clone().unwrap_or_else(|| "none".into()),
                group,
                c.controller.as_ref().map_or("-".into(), |p| p.display().to_string()),
                if namespaces.is_empty() { "-".into() } else { namespaces.join(",") },
            ]
        })
        .collect();
    output::table(&["PCI ADDRESS", "ID", "DRIVER", "IOMMU GROUP", "CONTROLLER", "NAMESPACES"], &rows)
}

fn list_text(devices: &[Listing]) -> String {
    let rows: Vec<Vec<String>> = devices
        .iter()
        .map(|d| {
            vec![
                d.path.display().to_string(),
                serde_name(&d.kind),
                if d.bytes == 0 { "-".into() } else { human(d.bytes) },
                if d.lba_size == 0 { "-".into() } else { d.lba_size.to_string() },
                if d.zoned == ZonedModel::None { "-".into() } else { serde_name(&d.zoned) },
                or_dash(&d.driver),
                or_dash(&d.model),
                dax_cell(d.dax.as_ref()),
            ]
        })
        .collect();
    output::table(&["PATH", "KIND", "SIZE", "LBA", "ZONED", "DRIVER", "MODEL", "DAX"], &rows)
}

/// `fsdax/2 MiB` for persistent memory, `-` otherwise.
fn dax_cell(d: Option<&Dax>) -> String {
    d.map_or("-".into(), |d| format!("{}/{}", d.mode, human(d.align)))
}
