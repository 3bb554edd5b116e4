//! `ioswitch zone`: report zones, change their state, append to them — the ZNS commands
//! (Zone Management Receive / Send, Zone Append) through `Device::pass`.

use crate::fail::{Failure, Outcome};
use crate::output::{self, human, Format};
use crate::spec_out::Lines;
use crate::DevArgs;
use clap::{Args, Subcommand, ValueEnum};
use ioswitch::spec::idfy::{cns, csi, IdNs, IdNsZns, IDENTIFY_LEN};
use ioswitch::spec::zns::{ZoneAction, ZoneDesc, ZoneFilter, ZoneReport, ZoneState, ZoneType, ZONE_DESC_LEN};
use ioswitch::{Cmd, DevKind, Device, ZonedModel};
use serde::Serialize;
use std::fs;

/// Largest report one command fetches.
const REPORT_CHUNK: u64 = 128 << 10;

#[derive(Subcommand)]
pub enum ZoneCmd {
    /// List zones: start, write pointer, capacity, state.
    Report(ReportArgs),
    /// Explicitly open a zone (or every closed zone with --all).
    Open(ActionArgs),
    /// Close an open zone (or every open zone with --all).
    Close(ActionArgs),
    /// Finish a zone: move its write pointer to the end (state full).
    Finish(ActionArgs),
    /// Reset a zone's write pointer to its start (state empty).
    Reset(ActionArgs),
    /// Take a zone offline (state offline, for good).
    Offline(ActionArgs),
    /// Append data to a zone; prints the LBA it was written at.
    Append(AppendArgs),
}

/// Which zones a report lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    /// Every zone.
    All,
    /// Empty zones.
    Empty,
    /// Implicitly opened zones.
    ImpOpen,
    /// Explicitly opened zones.
    ExpOpen,
    /// Closed zones.
    Closed,
    /// Full zones.
    Full,
    /// Read-only zones.
    ReadOnly,
    /// Offline zones.
    Offline,
}

#[derive(Args)]
pub struct ReportArgs {
    #[command(flatten)]
    dev: DevArgs,
    /// Report from the zone holding this LBA on.
    #[arg(long, value_name = "LBA", default_value_t = 0, value_parser = crate::parse_count)]
    slba: u64,
    /// At most this many zones [default: every zone from --slba on].
    #[arg(long, value_name = "N", value_parser = crate::parse_nonzero_count)]
    nzones: Option<u64>,
    /// Only zones in this state.
    #[arg(long, value_enum, default_value_t = StateArg::All)]
    state: StateArg,
}

/// The zone an action applies to.
#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct ZoneTarget {
    /// The zone's start LBA.
    #[arg(long, value_name = "LBA", value_parser = crate::parse_count)]
    slba: Option<u64>,
    /// Every zone the action applies to (Select All).
    #[arg(long)]
    all: bool,
}

#[derive(Args)]
pub struct ActionArgs {
    #[command(flatten)]
    dev: DevArgs,
    #[command(flatten)]
    target: ZoneTarget,
}

#[derive(Args)]
pub struct AppendArgs {
    #[command(flatten)]
    dev: DevArgs,
    /// The zone's start LBA.
    #[arg(long, value_name = "LBA", value_parser = crate::parse_count)]
    slba: u64,
    /// File with the data, whole LBAs.
    #[arg(long, value_name = "FILE")]
    data: String,
}

pub const ZONE_EXAMPLES: &str = "\
Examples:
  ioswitch zone report /dev/nvme0n3
  ioswitch zone report /dev/ng0n3 --state full --output json
  ioswitch zone append /dev/nvme0n3 --slba 0x2000 --data 4k.bin
  ioswitch zone finish /dev/nvme0n3 --slba 0x2000
  ioswitch zone reset /dev/nvme0n3 --all

The commands are ZNS commands on the device's namespace (--opts nsid=N for another).";

/// Opens the device, refusing one the kernel reports as not zoned (NVMe namespaces opened
/// as char devices are asked: their geometry does not come from the block layer).
fn open(d: &DevArgs) -> Outcome<Device> {
    zoned(crate::admin::open(d)?)
}

/// [`open`] for a command that only reads (the report): read-only unless the options ask
/// for a write mode.
fn open_reading(d: &DevArgs) -> Outcome<Device> {
    zoned(crate::admin::open_reading(d)?)
}

fn zoned(dev: Device) -> Outcome<Device> {
    let kind = dev.ident().kind;
    if dev.geometry().zoned == ZonedModel::None && !matches!(kind, DevKind::NvmeChar | DevKind::NvmeCtrl) {
        return Err(Failure::new(format!("{}: not a zoned device (a {kind}, zoned model: none)", dev.uri())));
    }
    Ok(dev)
}

/// `ioswitch zone`.
pub fn zone(c: &ZoneCmd, format: Format) -> Outcome {
    match c {
        ZoneCmd::Report(a) => report(a, format),
        ZoneCmd::Open(a) => action(a, ZoneAction::Open, format),
        ZoneCmd::Close(a) => action(a, ZoneAction::Close, format),
        ZoneCmd::Finish(a) => action(a, ZoneAction::Finish, format),
        ZoneCmd::Reset(a) => action(a, ZoneAction::Reset, format),
        ZoneCmd::Offline(a) => action(a, ZoneAction::Offline, format),
        ZoneCmd::Append(a) => append(a, format),
    }
}

fn recv(dev: &Device, slba: u64, bytes: u64, partial: bool, filter: ZoneFilter) -> Outcome<ZoneReport> {
    let mut buf = dev.alloc(bytes as usize)?;
    let cmd = Cmd::zone_mgmt_recv(dev.ident().nsid, slba, bytes as u32, partial).zone_filter(filter);
    dev.pass(&cmd, std::slice::from_mut(&mut buf))?;
    ZoneReport::parse(&buf).map_err(|e| Failure::new(format!("{}: {e}", dev.uri())))
}

/// The zone size, to page through a report: from the geometry, or the ZNS identify data.
fn zone_size(dev: &Device) -> Option<u64> {
    if let Some(z) = dev.geometry().zones.filter(|z| z.zone_size > 0) {
        return Some(z.zone_size);
    }
    let nsid = dev.ident().nsid;
    let page = |cmd: Cmd| {
        let mut b = dev.alloc(IDENTIFY_LEN).ok()?;
        dev.pass_admin(&cmd, std::slice::from_mut(&mut b)).ok()?;
        Some(b)
    };
    let ns = IdNs::from_bytes(&page(Cmd::identify(cns::NS, nsid, 0, 0))?).ok()?;
    let zns = IdNsZns::from_bytes(&page(Cmd::identify(cns::CSI_NS, nsid, 0, csi::ZNS))?, ns.nlbaf).ok()?;
    zns.lbafe.get(ns.lbaf_index()).map(|l| l.zsze).filter(|&z| z > 0)
}

#[derive(Serialize)]
struct ReportOut {
    /// Zones that match from the starting LBA to the end of the namespace.
    nr_zones: u64,
    /// The zones listed (all of them, or the first --nzones).
    zones: Vec<ZoneDesc>,
}

fn report(a: &ReportArgs, format: Format) -> Outcome {
    let dev = open_reading(&a.dev)?;
    let filter = match a.state {
        StateArg::All => ZoneFilter::All,
        StateArg::Empty => ZoneFilter::Empty,
        StateArg::ImpOpen => ZoneFilter::ImplicitlyOpened,
        StateArg::ExpOpen => ZoneFilter::ExplicitlyOpened,
        StateArg::Closed => ZoneFilter::Closed,
        StateArg::Full => ZoneFilter::Full,
        StateArg::ReadOnly => ZoneFilter::ReadOnly,
        StateArg::Offline => ZoneFilter::Offline,
    };
    let max_bytes = match dev.geometry().max_transfer {
        0 => REPORT_CHUNK,
        m => m.min(REPORT_CHUNK),
    }
    .max(2 * ZONE_DESC_LEN as u64);
    let per_chunk = max_bytes / ZONE_DESC_LEN as u64 - 1;
    // The header of a full (not partial) report counts every matching zone.
    let total = recv(&dev, a.slba, 2 * ZONE_DESC_LEN as u64, false, filter)?.nr_zones;
    let want = a.nzones.map_or(total, |n| n.min(total));
    let mut zones: Vec<ZoneDesc> = Vec::new();
    let mut next = a.slba;
    let mut stride = None;
    while (zones.len() as u64) < want {
        let left = want - zones.len() as u64;
        let n = left.min(per_chunk);
        let got = recv(&dev, next, (n + 1) * ZONE_DESC_LEN as u64, true, filter)?.zones;
        let Some(last) = got.last().copied() else { break };
        zones.extend(got.into_iter().take(n as usize));
        if (zones.len() as u64) >= want {
            break;
        }
        let size = match stride {
            Some(s) => s,
            None => {
                let s = zone_size(&dev).ok_or_else(|| {
                    Failure::new(format!(
                        "{}: {total} zones do not fit one report, and the zone size to continue from is \
                         unknown; give --nzones {per_chunk} or less",
                        dev.uri()
                    ))
                })?;
                stride = Some(s);
                s
            }
        };
        next = last.zslba.saturating_add(size);
    }
    let out = ReportOut { nr_zones: total, zones };
    match format {
        Format::Text => output::stdout(&report_text(&dev, &out)),
        _ => output::stdout(&output::structured(format, &out)?),
    }
}

fn report_text(dev: &Device, r: &ReportOut) -> String {
    let lba = dev.geometry().lba_size as u64;
    let rows: Vec<Vec<String>> = r
        .zones
        .iter()
        .map(|z| {
            let mut attrs = Vec::new();
            for (on, name) in [
                (z.attrs.finished_by_controller, "zfc"),
                (z.attrs.finish_recommended, "fzr"),
                (z.attrs.reset_recommended, "rzr"),
                (z.attrs.zrwa_valid, "zrwav"),
                (z.attrs.ext_valid, "zdev"),
            ] {
                if on {
                    attrs.push(name);
                }
            }
            // A full zone's write pointer is not valid (QEMU reports all ones).
            let used = match z.state {
                ZoneState::Full => Some(z.capacity),
                ZoneState::ReadOnly | ZoneState::Offline => None,
                _ => z.wp.checked_sub(z.zslba).filter(|&u| u <= z.capacity),
            };
            vec![
                format!("{:#x}", z.zslba),
                format!("{:#x}", z.wp),
                format!("{:#x}", z.capacity),
                used.map_or("-".to_string(), |u| human(u.saturating_mul(lba))),
                z.state.short(),
                match z.zone_type {
                    ZoneType::SeqWriteRequired => "seq-write-req".to_string(),
                    ZoneType::Reserved(x) => format!("reserved({x:#x})"),
                },
                if attrs.is_empty() { "-".to_string() } else { attrs.join(",") },
            ]
        })
        .collect();
    let mut s = format!("zones: {} (listed: {})\n", r.nr_zones, r.zones.len());
    if !rows.is_empty() {
        s.push_str(&output::table(&["ZSLBA", "WP", "CAP", "WRITTEN", "STATE", "TYPE", "ATTRS"], &rows));
    }
    s
}

#[derive(Serialize)]
struct ActionOut {
    action: ZoneAction,
    /// The zone's start LBA; `None` with --all.
    slba: Option<u64>,
    all: bool,
}

fn action(a: &ActionArgs, act: ZoneAction, format: Format) -> Outcome {
    let dev = open(&a.dev)?;
    let slba = a.target.slba.unwrap_or(0);
    dev.pass(&Cmd::zone_mgmt_send(dev.ident().nsid, slba, act, a.target.all), &mut [])?;
    let out = ActionOut { action: act, slba: (!a.target.all).then_some(slba), all: a.target.all };
    match format {
        Format::Text => {
            let past = match act {
                ZoneAction::Close => "closed",
                ZoneAction::Finish => "finished",
                ZoneAction::Open => "opened",
                ZoneAction::Reset => "reset",
                ZoneAction::Offline => "took offline",
            };
            let what = if a.target.all { "every zone it applies to".to_string() } else { format!("zone {slba:#x}") };
            output::stdout(&format!("{past} {what}\n"))
        }
        _ => output::stdout(&output::structured(format, &out)?),
    }
}

#[derive(Serialize)]
struct AppendOut {
    zslba: u64,
    nlb: u32,
    bytes: u64,
    /// The LBA the data was written at (the completion's result).
    lba: u64,
}

fn append(a: &AppendArgs, format: Format) -> Outcome {
    let name = format!("--data {}", a.data);
    let data = fs::read(&a.data).map_err(|e| Failure::io(&name, e))?;
    let dev = open(&a.dev)?;
    let g = dev.geometry();
    let lba = g.lba_size as u64;
    let len = data.len() as u64;
    if len == 0 || len % lba != 0 {
        return Err(Failure::new(format!(
            "{name}: {len} bytes; a zone append writes whole LBAs of {lba} bytes on {}",
            dev.uri()
        )));
    }
    let nlb = len / lba;
    if nlb > 65536 || (g.max_transfer > 0 && len > g.max_transfer) {
        return Err(Failure::new(format!(
            "{name}: {len} bytes is more than one zone append carries on {} (at most {})",
            dev.uri(),
            human(if g.max_transfer > 0 { g.max_transfer.min(65536 * lba) } else { 65536 * lba })
        )));
    }
    let mut buf = dev.alloc(len as usize)?;
    buf.copy_from_slice(&data);
    let cmd = Cmd::zone_append(dev.ident().nsid, a.slba, nlb as u32);
    let at = dev.pass(&cmd, std::slice::from_mut(&mut buf)).map_err(|e| {
        let block = dev.interfaces().sync != Some(ioswitch::SyncIface::Nvme) && dev.ident().kind == DevKind::NvmeBlock;
        let f = Failure::from(e);
        if block {
            f.hint("the block layer has no zone append for applications: use --opts sync=nvme or the /dev/ngXnY device")
        } else {
            f
        }
    })?;
    let out = AppendOut { zslba: a.slba, nlb: nlb as u32, bytes: len, lba: at };
    match format {
        Format::Text => {
            let mut l = Lines::default();
            l.kv(0, "zone", format!("{:#x}", out.zslba));
            l.kv(0, "appended", format!("{nlb} LBAs ({})", output::human_exact(len)));
            l.kv(0, "written at", format!("LBA {at:#x} ({at})"));
            output::stdout(&l.render())
        }
        _ => output::stdout(&output::structured(format, &out)?),
    }
}
