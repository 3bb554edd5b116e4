//! The NVMe admin side of the device CLI: `idfy`, `log`, `feature` and `passthru`.
//!
//! Every command opens the device with the user's options and sends admin commands
//! through `Device::pass_admin` (NVMe devices: the NVMe admin interface; files, block
//! devices and ramdisks: the emulated one), or I/O commands through `Device::pass`.

use crate::fail::{Failure, Outcome};
use crate::output::{self, human, Format};
use crate::spec_out::{hex, hexdump, Lines};
use crate::DevArgs;
use clap::{Args, Subcommand, ValueEnum};
use ioswitch::spec::feat::{self, Capabilities, Feature, Select};
use ioswitch::spec::idfy::{cns, csi, IdCtrl, IdCtrlZns, IdNs, IdNsZns, IDENTIFY_LEN};
use ioswitch::spec::log::{self, lid, ChangedNsList, ErrorLog, FwSlotLog, SmartLog};
use ioswitch::{Buffer, Cmd, Device, Sqe, Status};
use serde::Serialize;
use std::fs;
use std::io::Read;

/// The controller as a whole, for log pages that are not per namespace.
const NSID_ALL: u32 = 0xffff_ffff;

/// Passthrough buffers are whole pages of this size.
const PAGE: u64 = 4096;

/// Largest data transfer the CLI allocates for one command.
const MAX_DATA: u64 = 64 << 20;

pub(crate) fn parse_u8(s: &str) -> Result<u8, String> {
    let n = crate::parse_count(s)?;
    u8::try_from(n).map_err(|_| format!("{s:?} does not fit 8 bits (0..=255)"))
}

pub(crate) fn parse_u32(s: &str) -> Result<u32, String> {
    let n = crate::parse_count(s)?;
    u32::try_from(n).map_err(|_| format!("{s:?} does not fit 32 bits (0..=0xffffffff)"))
}

/// Opens the device of a command.
pub(crate) fn open(d: &DevArgs) -> Outcome<Device> {
    Ok(Device::open(&d.uri, &crate::opts(&d.opts)?)?)
}

/// Opens the device of a command that only reads (identify, a log page, a feature's
/// value, a zone report) read-only, unless its options ask for a write mode: it works
/// where the user may read but not write, as nvme-cli's reads do ([`Opts::for_reading`]).
pub(crate) fn open_reading(d: &DevArgs) -> Outcome<Device> {
    Ok(Device::open(&d.uri, &crate::opts(&d.opts)?.for_reading())?)
}

/// Runs an admin command that reads `len` bytes; returns the data and the result.
fn admin_read(dev: &Device, cmd: &Cmd, len: usize) -> Outcome<(Vec<u8>, u64)> {
    let mut buf = dev.alloc(len)?;
    let result = dev.pass_admin(cmd, std::slice::from_mut(&mut buf))?;
    Ok((buf[..len].to_vec(), result))
}

fn parse_failed(dev: &Device, e: impl std::fmt::Display) -> Failure {
    Failure::new(format!("{}: {e}", dev.uri()))
}

fn print_value<T: Serialize>(format: Format, value: &T) -> Outcome {
    let text = match format {
        Format::Text => {
            let mut l = Lines::default();
            l.value(0, value);
            l.render()
        }
        _ => output::structured(format, value)?,
    };
    output::stdout(&text)
}

/// Writes raw data to `path`; `-` prints a hex dump instead.
fn save_raw(path: &str, data: &[u8]) -> Outcome {
    if path == "-" {
        return output::stdout(&hexdump(data));
    }
    fs::write(path, data).map_err(|e| Failure::io(format!("writing {path}"), e))
}

// ---------------------------------------------------------------------------------------
// idfy

/// Which identify structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IdfyWhat {
    /// Identify Controller (CNS 01h).
    Ctrl,
    /// Identify Namespace (CNS 00h).
    Ns,
    /// I/O command set specific structure: the namespace's (CNS 05h), or with --ctrl the
    /// controller's (CNS 06h); --csi picks the set (ZNS by default).
    Cs,
}

#[derive(Args)]
pub struct IdfyArgs {
    /// What to identify.
    #[arg(value_enum)]
    what: IdfyWhat,
    #[command(flatten)]
    dev: DevArgs,
    /// Namespace id for ns and cs [default: the device's namespace].
    #[arg(long, value_name = "ID", value_parser = parse_u32)]
    nsid: Option<u32>,
    /// Command set for cs: 0 NVM, 2 ZNS (decoded), any other number (shown raw).
    #[arg(long, value_name = "CSI", default_value_t = csi::ZNS, value_parser = parse_u8)]
    csi: u8,
    /// With cs: the controller's command set specific structure instead of the namespace's.
    #[arg(long)]
    ctrl: bool,
    /// Write the raw 4096-byte page to FILE instead of decoding it (- shows a hex dump).
    #[arg(long, value_name = "FILE")]
    raw: Option<String>,
}

pub const IDFY_EXAMPLES: &str = "\
Examples:
  ioswitch idfy ctrl /dev/nvme0
  ioswitch idfy ns /dev/nvme0n1 --output json
  ioswitch idfy cs /dev/nvme0n3                 # ZNS: zone size, open/active limits
  ioswitch idfy cs /dev/nvme0n3 --ctrl          # ZNS controller: zone append size limit
  ioswitch idfy ns disk.img                     # emulated: the file as a namespace
  ioswitch idfy ctrl /dev/nvme0 --raw id-ctrl.bin

Files, block devices and ramdisks answer from emulated identify data (--opts admin=emulated,
the default for them); NVMe devices from the controller (--opts admin=nvme).";

/// `ioswitch idfy`.
pub fn idfy(a: &IdfyArgs, format: Format) -> Outcome {
    let dev = open_reading(&a.dev)?;
    let nsid = a.nsid.unwrap_or(dev.ident().nsid);
    let cmd = match (a.what, a.ctrl) {
        (IdfyWhat::Ctrl, _) => Cmd::identify(cns::CTRL, 0, 0, 0),
        (IdfyWhat::Ns, _) => Cmd::identify(cns::NS, nsid, 0, 0),
        (IdfyWhat::Cs, false) => Cmd::identify(cns::CSI_NS, nsid, 0, a.csi),
        (IdfyWhat::Cs, true) => Cmd::identify(cns::CSI_CTRL, 0, 0, a.csi),
    };
    let (page, _) = admin_read(&dev, &cmd, IDENTIFY_LEN)?;
    if let Some(path) = &a.raw {
        return save_raw(path, &page);
    }
    match (a.what, a.ctrl, a.csi) {
        (IdfyWhat::Ctrl, ..) => print_value(format, &IdCtrl::from_bytes(&page).map_err(|e| parse_failed(&dev, e))?),
        (IdfyWhat::Ns, ..) => print_value(format, &IdNs::from_bytes(&page).map_err(|e| parse_failed(&dev, e))?),
        (IdfyWhat::Cs, true, csi::ZNS) => {
            print_value(format, &IdCtrlZns::from_bytes(&page).map_err(|e| parse_failed(&dev, e))?)
        }
        (IdfyWhat::Cs, false, csi::ZNS) => {
            // The LBA format extensions follow the namespace's LBA formats.
            let (ns, _) = admin_read(&dev, &Cmd::identify(cns::NS, nsid, 0, 0), IDENTIFY_LEN)?;
            let nlbaf = IdNs::from_bytes(&ns).map_err(|e| parse_failed(&dev, e))?.nlbaf;
            print_value(format, &IdNsZns::from_bytes(&page, nlbaf).map_err(|e| parse_failed(&dev, e))?)
        }
        _ => print_value(format, &RawPage { cns: cmd.sqe.cdw10 as u8, csi: a.csi, data: hex(&page) }),
    }
}

/// A structure ioswitch does not decode, as hex.
#[derive(Serialize)]
struct RawPage {
    cns: u8,
    csi: u8,
    data: String,
}

// ---------------------------------------------------------------------------------------
// log

/// Which log page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogPage {
    /// SMART / Health Information (LID 02h).
    Health,
    /// Error Information (LID 01h).
    Error,
    /// Firmware Slot Information (LID 03h).
    Fw,
    /// Changed Namespace List (LID 04h).
    ChangedNs,
    /// Any page by --lid, shown as a hex dump.
    Raw,
}

#[derive(Args)]
pub struct LogArgs {
    /// Which page.
    #[arg(value_enum)]
    page: LogPage,
    #[command(flatten)]
    dev: DevArgs,
    /// Log page identifier (for raw).
    #[arg(long, value_name = "LID", value_parser = parse_u8, required_if_eq("page", "raw"))]
    lid: Option<u8>,
    /// Bytes to read, a multiple of 4 [default: the page's size; 4096 for raw].
    #[arg(long, value_name = "BYTES", value_parser = crate::parse_nonzero_size)]
    len: Option<u64>,
    /// Byte offset into the page (a multiple of 4).
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = crate::parse_size)]
    offset: u64,
    /// Namespace id [default: 0xffffffff, the controller as a whole].
    #[arg(long, value_name = "ID", value_parser = parse_u32)]
    nsid: Option<u32>,
    /// Log Specific Parameter (0..=127).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_u8)]
    lsp: u8,
    /// Retain the asynchronous event (reading does not clear it).
    #[arg(long)]
    rae: bool,
    /// Error log entries to read [default: all the controller keeps, ELPE + 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    entries: Option<u32>,
    /// Write the raw page to FILE instead of decoding it (- shows a hex dump).
    #[arg(long, value_name = "FILE")]
    raw: Option<String>,
}

pub const LOG_EXAMPLES: &str = "\
Examples:
  ioswitch log health /dev/nvme0
  ioswitch log error /dev/nvme0 --output json
  ioswitch log fw /dev/nvme0
  ioswitch log raw /dev/nvme0 --lid 5 --len 4096
  ioswitch log health disk.img                  # emulated: zeros, or a block device's counters";

fn log_len(a: &LogArgs, dev: &Device) -> Outcome<u64> {
    if let Some(n) = a.len {
        return Ok(n);
    }
    Ok(match a.page {
        LogPage::Health => log::SMART_LEN as u64,
        LogPage::Fw => log::FW_SLOT_LEN as u64,
        LogPage::ChangedNs => log::CHANGED_NS_LEN as u64,
        LogPage::Raw => 4096,
        LogPage::Error => {
            let entries = match a.entries {
                Some(n) => n as u64,
                None => {
                    let (page, _) = admin_read(dev, &Cmd::identify(cns::CTRL, 0, 0, 0), IDENTIFY_LEN)?;
                    IdCtrl::from_bytes(&page).map_err(|e| parse_failed(dev, e))?.elpe as u64 + 1
                }
            };
            entries * log::ERROR_ENTRY_LEN as u64
        }
    })
}

/// `ioswitch log`.
pub fn log_page(a: &LogArgs, format: Format) -> Outcome {
    let dev = open_reading(&a.dev)?;
    let lid = match a.page {
        LogPage::Health => lid::SMART,
        LogPage::Error => lid::ERROR,
        LogPage::Fw => lid::FW_SLOT,
        LogPage::ChangedNs => lid::CHANGED_NS,
        LogPage::Raw => a.lid.unwrap_or(0),
    };
    let len = log_len(a, &dev)?;
    if len % 4 != 0 || len > MAX_DATA {
        return Err(Failure::new(format!(
            "--len {len}: a log page is read in whole dwords: give a multiple of 4 up to {}",
            human(MAX_DATA)
        )));
    }
    if a.offset % 4 != 0 {
        return Err(Failure::new(format!("--offset {}: must be a multiple of 4", a.offset)));
    }
    if a.lsp > 0x7f {
        return Err(Failure::new(format!("--lsp {}: the Log Specific Parameter has 7 bits (0..=127)", a.lsp)));
    }
    let nsid = a.nsid.unwrap_or(NSID_ALL);
    let mut cmd = Cmd::get_log(nsid, lid, a.lsp, len as u32, a.offset);
    if a.rae {
        cmd = cmd.rae();
    }
    let (page, _) = admin_read(&dev, &cmd, len as usize)?;
    if let Some(path) = &a.raw {
        return save_raw(path, &page);
    }
    let bad = |e: log::ShortPage| parse_failed(&dev, e);
    match a.page {
        LogPage::Health => {
            let s = SmartLog::parse(&page).map_err(bad)?;
            match format {
                Format::Text => output::stdout(&health_text(&s)),
                _ => output::stdout(&output::structured(format, &s)?),
            }
        }
        LogPage::Error => {
            let log = ErrorLog::parse(&page).map_err(bad)?;
            match format {
                Format::Text => output::stdout(&error_text(&log)),
                _ => output::stdout(&output::structured(format, &log)?),
            }
        }
        LogPage::Fw => print_value(format, &FwSlotLog::parse(&page).map_err(bad)?),
        LogPage::ChangedNs => {
            let l = ChangedNsList::parse(&page).map_err(bad)?;
            match format {
                Format::Text if l.overflow => output::stdout("more than 1024 namespaces changed\n"),
                Format::Text if l.nsids.is_empty() => output::stdout("no namespace changed\n"),
                _ => print_value(format, &l),
            }
        }
        LogPage::Raw => match format {
            Format::Text => output::stdout(&hexdump(&page)),
            _ => output::stdout(&output::structured(
                format,
                &RawLog { lid, name: log::name(lid), nsid, offset: a.offset, len, data: hex(&page) },
            )?),
        },
    }
}

#[derive(Serialize)]
struct RawLog {
    lid: u8,
    name: &'static str,
    nsid: u32,
    offset: u64,
    len: u64,
    data: String,
}

fn kelvin(k: u16) -> String {
    if k == 0 {
        "not reported".into()
    } else {
        format!("{} °C ({k} K)", k as i32 - 273)
    }
}

/// Data units are 1000 512-byte blocks.
fn data_units(n: u128) -> String {
    let bytes = n.saturating_mul(512_000);
    match u64::try_from(bytes) {
        Ok(b) if n > 0 => format!("{n} ({})", human(b)),
        _ => n.to_string(),
    }
}

fn health_text(s: &SmartLog) -> String {
    let mut l = Lines::default();
    let w = &s.critical_warning;
    let mut warnings = Vec::new();
    for (on, name) in [
        (w.spare_below_threshold, "spare below threshold"),
        (w.temperature, "temperature"),
        (w.reliability_degraded, "reliability degraded"),
        (w.read_only, "read-only"),
        (w.volatile_backup_failed, "volatile memory backup failed"),
        (w.pmr_read_only, "persistent memory region read-only"),
    ] {
        if on {
            warnings.push(name);
        }
    }
    let warning = if w.raw == 0 { "0 (none)".to_string() } else { format!("{:#04x} ({})", w.raw, warnings.join(", ")) };
    l.kv(0, "critical warning", warning);
    l.kv(0, "composite temperature", kelvin(s.composite_temperature));
    l.kv(0, "available spare", format!("{}%", s.available_spare));
    l.kv(0, "available spare threshold", format!("{}%", s.available_spare_threshold));
    l.kv(0, "percentage used", format!("{}%", s.percentage_used));
    l.kv(0, "endurance group warning", s.endurance_group_critical_warning.to_string());
    l.kv(0, "data units read", data_units(s.data_units_read));
    l.kv(0, "data units written", data_units(s.data_units_written));
    l.kv(0, "host read commands", s.host_read_commands.to_string());
    l.kv(0, "host write commands", s.host_write_commands.to_string());
    l.kv(0, "controller busy time", format!("{} min", s.controller_busy_time));
    l.kv(0, "power cycles", s.power_cycles.to_string());
    l.kv(0, "power on hours", s.power_on_hours.to_string());
    l.kv(0, "unsafe shutdowns", s.unsafe_shutdowns.to_string());
    l.kv(0, "media errors", s.media_errors.to_string());
    l.kv(0, "error log entries", s.num_err_log_entries.to_string());
    l.kv(0, "warning temperature time", format!("{} min", s.warning_temp_time));
    l.kv(0, "critical temperature time", format!("{} min", s.critical_temp_time));
    for t in &s.temperature_sensors {
        l.kv(0, &format!("temperature sensor {}", t.sensor), kelvin(t.kelvin));
    }
    l.kv(0, "thermal mgmt 1 transitions", s.thm_temp1_trans_count.to_string());
    l.kv(0, "thermal mgmt 2 transitions", s.thm_temp2_trans_count.to_string());
    l.kv(0, "thermal mgmt 1 total time", format!("{} s", s.thm_temp1_total_time));
    l.kv(0, "thermal mgmt 2 total time", format!("{} s", s.thm_temp2_total_time));
    l.render()
}

fn error_text(log: &ErrorLog) -> String {
    let valid: Vec<_> = log.entries.iter().filter(|e| e.is_valid()).collect();
    if valid.is_empty() {
        let n = log.entries.len();
        return format!("no errors logged ({n} {} read)\n", if n == 1 { "entry" } else { "entries" });
    }
    let rows: Vec<Vec<String>> = valid
        .iter()
        .map(|e| {
            let s = e.status();
            vec![
                e.error_count.to_string(),
                format!("{:#x}", e.sqid),
                format!("{:#x}", e.cmdid),
                format!("{:#06x} {}", s.code(), s.name()),
                format!("{:#x}", e.parm_error_location),
                e.lba.to_string(),
                e.nsid.to_string(),
            ]
        })
        .collect();
    output::table(&["COUNT", "SQID", "CMDID", "STATUS", "PARAM", "LBA", "NSID"], &rows)
}

// ---------------------------------------------------------------------------------------
// feature

/// Which value to get.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SelArg {
    /// The value in use.
    Current,
    /// The default value.
    Default,
    /// The value saved across resets.
    Saved,
    /// The feature's capabilities (saveable, per namespace, changeable).
    Supported,
}

#[derive(Subcommand)]
pub enum FeatureCmd {
    /// Read a feature's value (Get Features).
    Get(FeatureGetArgs),
    /// Change a feature's value (Set Features).
    Set(FeatureSetArgs),
}

#[derive(Args)]
pub struct FeatureGetArgs {
    #[command(flatten)]
    dev: DevArgs,
    /// Feature identifier: 1 arbitration, 2 power management, 4 temperature threshold,
    /// 6 volatile write cache, 7 number of queues (decoded), or any other.
    #[arg(long, value_name = "FID", value_parser = parse_u8)]
    fid: u8,
    /// Which value.
    #[arg(long, value_enum, default_value_t = SelArg::Current)]
    sel: SelArg,
    /// Feature specific CDW11, for features that take one (e.g. the sensor of a
    /// temperature threshold).
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    value: u32,
    /// Namespace id, for namespace-specific features.
    #[arg(long, value_name = "ID", default_value_t = 0, value_parser = parse_u32)]
    nsid: u32,
}

#[derive(Args)]
pub struct FeatureSetArgs {
    #[command(flatten)]
    dev: DevArgs,
    /// Feature identifier.
    #[arg(long, value_name = "FID", value_parser = parse_u8)]
    fid: u8,
    /// The new value (CDW11), decimal or 0x-hex.
    #[arg(long, value_name = "DWORD", value_parser = parse_u32)]
    value: u32,
    /// Keep the value across resets.
    #[arg(long)]
    save: bool,
    /// Namespace id, for namespace-specific features.
    #[arg(long, value_name = "ID", default_value_t = 0, value_parser = parse_u32)]
    nsid: u32,
}

pub const FEATURE_EXAMPLES: &str = "\
Examples:
  ioswitch feature get /dev/nvme0 --fid 6                   # volatile write cache
  ioswitch feature get /dev/nvme0 --fid 4 --sel default     # temperature threshold
  ioswitch feature get /dev/nvme0 --fid 6 --sel supported   # saveable? changeable?
  ioswitch feature set /dev/nvme0 --fid 4 --value 0x150 --output json";

#[derive(Serialize)]
struct FeatureReport {
    fid: u8,
    name: &'static str,
    /// Which value was read (get) or `set`.
    select: &'static str,
    /// The feature dword: read (get) or written (set).
    value: Option<u32>,
    /// The value decoded.
    decoded: Option<Feature>,
    /// The capabilities (get with --sel supported).
    capabilities: Option<Capabilities>,
    /// Set only: whether the value was saved across resets.
    saved: Option<bool>,
    /// The completion's result dword (for set, e.g. the queues allocated).
    result: u32,
}

/// `ioswitch feature`.
pub fn feature(c: &FeatureCmd, format: Format) -> Outcome {
    let report = match c {
        FeatureCmd::Get(a) => {
            let dev = open_reading(&a.dev)?;
            let sel = match a.sel {
                SelArg::Current => Select::Current,
                SelArg::Default => Select::Default,
                SelArg::Saved => Select::Saved,
                SelArg::Supported => Select::Supported,
            };
            let cmd = Cmd::get_features(a.fid, sel, a.nsid, a.value);
            let dw = dev.pass_admin(&cmd, &mut [])? as u32;
            let supported = sel == Select::Supported;
            FeatureReport {
                fid: a.fid,
                name: feat::name(a.fid),
                select: match a.sel {
                    SelArg::Current => "current",
                    SelArg::Default => "default",
                    SelArg::Saved => "saved",
                    SelArg::Supported => "supported",
                },
                value: (!supported).then_some(dw),
                decoded: (!supported).then(|| Feature::decode(a.fid, dw)),
                capabilities: supported.then(|| Capabilities::from_dword(dw)),
                saved: None,
                result: dw,
            }
        }
        FeatureCmd::Set(a) => {
            let dev = open(&a.dev)?;
            let cmd = Cmd::set_features(a.fid, a.save, a.value).with_nsid(a.nsid);
            let dw = dev.pass_admin(&cmd, &mut [])? as u32;
            FeatureReport {
                fid: a.fid,
                name: feat::name(a.fid),
                select: "set",
                value: Some(a.value),
                decoded: Some(Feature::decode(a.fid, a.value)),
                capabilities: None,
                saved: Some(a.save),
                result: dw,
            }
        }
    };
    match format {
        Format::Text => output::stdout(&feature_text(&report)),
        _ => output::stdout(&output::structured(format, &report)?),
    }
}

fn feature_text(r: &FeatureReport) -> String {
    let mut l = Lines::default();
    l.kv(0, "feature", format!("{:#04x} ({})", r.fid, r.name));
    l.kv(0, "select", r.select);
    if let Some(v) = r.value {
        l.kv(0, "value", format!("{v:#010x}"));
    }
    if let Some(s) = r.saved {
        l.kv(0, "saved", if s { "yes" } else { "no" });
    }
    match r.decoded {
        Some(Feature::Other { .. }) | None => {}
        Some(d) => l.value(0, &d),
    }
    if let Some(c) = &r.capabilities {
        l.value(0, c);
    }
    if r.select == "set" {
        l.kv(0, "result", format!("{:#010x}", r.result));
    }
    l.render()
}

// ---------------------------------------------------------------------------------------
// passthru

#[derive(Subcommand)]
pub enum PassthruCmd {
    /// An admin command.
    Admin(PassthruArgs),
    /// An I/O command.
    Io(PassthruArgs),
}

#[derive(Args)]
pub struct PassthruArgs {
    #[command(flatten)]
    dev: DevArgs,
    /// Opcode, decimal or 0x-hex.
    #[arg(long, value_name = "OPC", value_parser = parse_u8)]
    opcode: u8,
    /// Namespace id [default: 0 for admin, the device's namespace for I/O].
    #[arg(long, value_name = "ID", value_parser = parse_u32)]
    nsid: Option<u32>,
    /// Command dword 2.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw2: u32,
    /// Command dword 3.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw3: u32,
    /// Command dword 10.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw10: u32,
    /// Command dword 11.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw11: u32,
    /// Command dword 12.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw12: u32,
    /// Command dword 13.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw13: u32,
    /// Command dword 14.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw14: u32,
    /// Command dword 15.
    #[arg(long, value_name = "DWORD", default_value_t = 0, value_parser = parse_u32)]
    cdw15: u32,
    /// Bytes of data the command moves [default: the --write file's size, else 0]; the
    /// buffer sent is rounded up to whole 4 KiB pages (zero-filled).
    #[arg(long, value_name = "BYTES", value_parser = crate::parse_size)]
    data_len: Option<u64>,
    /// The command reads data from the device: save it to FILE (- shows a hex dump).
    #[arg(long, value_name = "FILE", conflicts_with = "write")]
    read: Option<String>,
    /// The command writes data to the device: send FILE (zero-padded to --data-len).
    #[arg(long, value_name = "FILE")]
    write: Option<String>,
}

pub const PASSTHRU_EXAMPLES: &str = "\
Examples:
  ioswitch passthru admin /dev/nvme0 --opcode 0x06 --cdw10 1 --data-len 4096 --read id-ctrl.bin
  ioswitch passthru admin /dev/nvme0 --opcode 0x0a --cdw10 7          # get features: queues
  ioswitch passthru io /dev/ng0n1 --opcode 0x02 --cdw12 7 --data-len 4096 --read -
  ioswitch passthru io /dev/ng0n1 --opcode 0x01 --cdw12 0 --write block.bin

The command goes to the device as given: dwords not named are 0. The completion's status
and result (DW0-1) are printed; a failed command is an error (exit status 1) that names
the NVMe status.";

#[derive(Serialize)]
struct PassthruReport {
    /// `admin` or `io`.
    queue: &'static str,
    opcode: u8,
    command: String,
    nsid: u32,
    status: String,
    status_code: u16,
    result: u64,
    data_len: u64,
    /// The data read, as hex, when it is shown rather than saved.
    data: Option<String>,
}

fn read_file(path: &str) -> Outcome<Vec<u8>> {
    let name = format!("--write {path}");
    if path == "-" {
        let mut v = Vec::new();
        std::io::stdin().lock().read_to_end(&mut v).map_err(|e| Failure::io("reading standard input", e))?;
        return Ok(v);
    }
    let md = fs::metadata(path).map_err(|e| Failure::io(&name, e))?;
    if md.len() > MAX_DATA {
        return Err(Failure::new(format!("{name}: {} bytes; a command moves at most {}", md.len(), human(MAX_DATA))));
    }
    fs::read(path).map_err(|e| Failure::io(&name, e))
}

/// `ioswitch passthru`.
pub fn passthru(c: &PassthruCmd, format: Format) -> Outcome {
    let (a, admin) = match c {
        PassthruCmd::Admin(a) => (a, true),
        PassthruCmd::Io(a) => (a, false),
    };
    let data = a.write.as_deref().map(read_file).transpose()?;
    let len = match (a.data_len, &data) {
        (Some(n), Some(d)) if (d.len() as u64) > n => {
            return Err(Failure::new(format!(
                "--write holds {} bytes, more than --data-len {n}; the command would not send them all",
                d.len()
            )))
        }
        (Some(n), _) => n,
        (None, Some(d)) => d.len() as u64,
        (None, None) => 0,
    };
    if len > MAX_DATA {
        return Err(Failure::new(format!("--data-len {len}: a command moves at most {}", human(MAX_DATA))));
    }
    if a.read.is_some() && len == 0 {
        return Err(Failure::new("--read needs --data-len: how many bytes the command reads"));
    }
    let dev = open(&a.dev)?;
    let nsid = a.nsid.unwrap_or(if admin { 0 } else { dev.ident().nsid });
    let sqe = Sqe {
        opcode: a.opcode,
        nsid,
        cdw2: a.cdw2,
        cdw3: a.cdw3,
        cdw10: a.cdw10,
        cdw11: a.cdw11,
        cdw12: a.cdw12,
        cdw13: a.cdw13,
        cdw14: a.cdw14,
        cdw15: a.cdw15,
        ..Sqe::default()
    };
    let cmd = if admin { Cmd::admin(sqe) } else { Cmd::io(sqe) };
    let mut bufs: Vec<Buffer> = Vec::new();
    if len > 0 {
        // Whole pages: a controller may transfer more than --data-len asks for (Identify
        // always moves 4096 bytes), and on NVMe the data goes straight into this memory.
        let mut b = dev.alloc(len.next_multiple_of(PAGE) as usize)?;
        if let Some(d) = &data {
            b[..d.len()].copy_from_slice(d);
        }
        bufs.push(b);
    }
    let result = if admin { dev.pass_admin(&cmd, &mut bufs)? } else { dev.pass(&cmd, &mut bufs)? };
    let read_back = bufs.first().filter(|_| data.is_none()).map(|b| b[..len as usize].to_vec());
    let shown = match (&read_back, a.read.as_deref()) {
        (Some(d), Some(path)) if path != "-" => {
            fs::write(path, d).map_err(|e| Failure::io(format!("writing {path}"), e))?;
            None
        }
        (Some(d), _) => Some(d.clone()),
        (None, _) => None,
    };
    let report = PassthruReport {
        queue: if admin { "admin" } else { "io" },
        opcode: a.opcode,
        command: cmd.describe(),
        nsid,
        status: Status::OK.name().into(),
        status_code: Status::OK.code(),
        result,
        data_len: len,
        data: shown.as_deref().map(hex),
    };
    match format {
        Format::Text => {
            let mut l = Lines::default();
            l.kv(0, "command", format!("{} ({} queue)", report.command, report.queue));
            l.kv(0, "nsid", nsid.to_string());
            l.kv(0, "status", format!("{} ({:#06x})", report.status, report.status_code));
            l.kv(0, "result", format!("{result:#x}"));
            l.kv(0, "data", if len == 0 { "none".to_string() } else { output::human_exact(len) });
            let mut text = l.render();
            if let Some(d) = &shown {
                text.push_str(&hexdump(d));
            }
            output::stdout(&text)
        }
        _ => output::stdout(&output::structured(format, &report)?),
    }
}
