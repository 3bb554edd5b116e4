//! Log pages (NVMe base spec, "Get Log Page"): Error Information (LID 01h), SMART /
//! Health Information (02h), Firmware Slot Information (03h) and Changed Namespace List
//! (04h), parsed from the raw page into named fields.
//!
//! Every parser takes the bytes the controller returned and refuses a page shorter than
//! the fields it reads ([`ShortPage`]) instead of reading past the end.

use serde::Serialize;

use super::Status;

/// Log page identifiers.
pub mod lid {
    /// Error Information.
    pub const ERROR: u8 = 0x01;
    /// SMART / Health Information.
    pub const SMART: u8 = 0x02;
    /// Firmware Slot Information.
    pub const FW_SLOT: u8 = 0x03;
    /// Changed Namespace List.
    pub const CHANGED_NS: u8 = 0x04;
}

/// The spec's name of a log page, when ioswitch knows it.
pub fn name(lid: u8) -> &'static str {
    match lid {
        lid::ERROR => "Error Information",
        lid::SMART => "SMART / Health Information",
        lid::FW_SLOT => "Firmware Slot Information",
        lid::CHANGED_NS => "Changed Namespace List",
        0x05 => "Commands Supported and Effects",
        0x06 => "Device Self-test",
        0x07 => "Telemetry Host-Initiated",
        0x08 => "Telemetry Controller-Initiated",
        0x0C => "Asymmetric Namespace Access",
        0x0D => "Persistent Event Log",
        _ => "Unknown Log Page",
    }
}

pub use super::ShortPage;
use super::{need, Page};

/// Size of one Error Information log entry.
pub const ERROR_ENTRY_LEN: usize = 64;

/// One Error Information log entry (64 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorEntry {
    /// Unique, incrementing error count; 0 marks an invalid (unused) entry.
    pub error_count: u64,
    /// Submission queue of the failed command (FFFFh: not command specific).
    pub sqid: u16,
    /// Command identifier of the failed command (FFFFh: not command specific).
    pub cmdid: u16,
    /// The status field of the completion (bits 15:1 of bytes 12-13, shifted down).
    pub status_field: u16,
    /// The phase tag the completion was posted with (bit 0 of bytes 12-13).
    pub phase_tag: u8,
    /// Parameter error location: byte (bits 7:0) and bit (bits 10:8) of the command
    /// field in error (FFFFh: not applicable).
    pub parm_error_location: u16,
    /// First LBA that had the error.
    pub lba: u64,
    /// Namespace of the error.
    pub nsid: u32,
    /// Log page with vendor specific information (0: none).
    pub vs: u8,
    /// Transport type of the error.
    pub trtype: u8,
    /// Command set identifier of the failed command (NVMe 2.0).
    pub csi: u8,
    /// Opcode of the failed command (NVMe 2.0).
    pub opcode: u8,
    /// Command specific information.
    pub cs: u64,
    /// Transport type specific information.
    pub trtype_spec_info: u16,
}

impl ErrorEntry {
    /// Parses one 64-byte entry.
    pub fn parse(b: &[u8]) -> Result<ErrorEntry, ShortPage> {
        let p = Page::new(b, "Error Information log entry", ERROR_ENTRY_LEN)?;
        let status = p.u16(12);
        Ok(ErrorEntry {
            error_count: p.u64(0),
            sqid: p.u16(8),
            cmdid: p.u16(10),
            status_field: status >> 1,
            phase_tag: (status & 1) as u8,
            parm_error_location: p.u16(14),
            lba: p.u64(16),
            nsid: p.u32(24),
            vs: b[28],
            trtype: b[29],
            csi: b[30],
            opcode: b[31],
            cs: p.u64(32),
            trtype_spec_info: p.u16(40),
        })
    }

    /// The completion status this entry records, decoded.
    pub fn status(&self) -> Status {
        Status { raw: self.status_field, errno_raw: 0 }
    }

    /// True when the entry holds an error (a non-zero error count).
    pub fn is_valid(&self) -> bool {
        self.error_count != 0
    }
}

/// The Error Information log: its entries, newest first, as the controller returned them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorLog {
    /// Every entry read (unused ones have an error count of 0).
    pub entries: Vec<ErrorEntry>,
}

impl ErrorLog {
    /// Parses as many whole 64-byte entries as `b` holds (at least one).
    pub fn parse(b: &[u8]) -> Result<ErrorLog, ShortPage> {
        need("Error Information log", b, ERROR_ENTRY_LEN)?;
        let entries = b.chunks_exact(ERROR_ENTRY_LEN).map(ErrorEntry::parse).collect::<Result<_, _>>()?;
        Ok(ErrorLog { entries })
    }
}

/// Size of the SMART / Health Information log page.
pub const SMART_LEN: usize = 512;

flag_byte! {
    /// Critical Warning bits of the SMART / Health log (byte 0).
    pub struct CriticalWarning {
        /// Bit 0: available spare is below its threshold.
        spare_below_threshold = 1,
        /// Bit 1: a temperature is outside its threshold.
        temperature = 2,
        /// Bit 2: reliability is degraded by media or internal errors.
        reliability_degraded = 4,
        /// Bit 3: all media is read-only.
        read_only = 8,
        /// Bit 4: the volatile memory backup device failed.
        volatile_backup_failed = 16,
        /// Bit 5: the persistent memory region became read-only.
        pmr_read_only = 32,
    }
}

/// One implemented temperature sensor of the SMART / Health log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TempSensor {
    /// Sensor number, 1..=8.
    pub sensor: u8,
    /// Temperature in kelvin.
    pub kelvin: u16,
}

/// The SMART / Health Information log page (LID 02h, 512 bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SmartLog {
    /// Byte 0: critical warnings.
    pub critical_warning: CriticalWarning,
    /// Bytes 1-2: composite temperature in kelvin (0: not reported).
    pub composite_temperature: u16,
    /// Byte 3: remaining spare capacity, percent.
    pub available_spare: u8,
    /// Byte 4: spare threshold, percent, below which a warning is raised.
    pub available_spare_threshold: u8,
    /// Byte 5: vendor's estimate of life used, percent (may exceed 100).
    pub percentage_used: u8,
    /// Byte 6: endurance group critical warning summary.
    pub endurance_group_critical_warning: u8,
    /// Bytes 32-47: data read, in units of 1000 512-byte blocks, rounded up.
    pub data_units_read: u128,
    /// Bytes 48-63: data written, in units of 1000 512-byte blocks, rounded up.
    pub data_units_written: u128,
    /// Bytes 64-79: read commands completed.
    pub host_read_commands: u128,
    /// Bytes 80-95: write commands completed.
    pub host_write_commands: u128,
    /// Bytes 96-111: minutes the controller was busy with I/O.
    pub controller_busy_time: u128,
    /// Bytes 112-127: power cycles.
    pub power_cycles: u128,
    /// Bytes 128-143: power-on hours.
    pub power_on_hours: u128,
    /// Bytes 144-159: unsafe shutdowns.
    pub unsafe_shutdowns: u128,
    /// Bytes 160-175: unrecovered data integrity errors.
    pub media_errors: u128,
    /// Bytes 176-191: error information log entries over the controller's life.
    pub num_err_log_entries: u128,
    /// Bytes 192-195: minutes above the warning composite temperature.
    pub warning_temp_time: u32,
    /// Bytes 196-199: minutes above the critical composite temperature.
    pub critical_temp_time: u32,
    /// Bytes 200-215: the implemented temperature sensors (a sensor reading 0 is absent).
    pub temperature_sensors: Vec<TempSensor>,
    /// Bytes 216-219: transitions into thermal management temperature 1.
    pub thm_temp1_trans_count: u32,
    /// Bytes 220-223: transitions into thermal management temperature 2.
    pub thm_temp2_trans_count: u32,
    /// Bytes 224-227: seconds spent in thermal management temperature 1.
    pub thm_temp1_total_time: u32,
    /// Bytes 228-231: seconds spent in thermal management temperature 2.
    pub thm_temp2_total_time: u32,
}

impl SmartLog {
    /// Parses the page; it must hold the 232 bytes that carry fields (512 are returned).
    pub fn parse(b: &[u8]) -> Result<SmartLog, ShortPage> {
        let p = Page::new(b, "SMART / Health Information log", 232)?;
        let temperature_sensors = (0..8u8)
            .filter_map(|i| {
                let k = p.u16(200 + 2 * i as usize);
                (k != 0).then_some(TempSensor { sensor: i + 1, kelvin: k })
            })
            .collect();
        Ok(SmartLog {
            critical_warning: CriticalWarning::from_byte(b[0]),
            composite_temperature: p.u16(1),
            available_spare: b[3],
            available_spare_threshold: b[4],
            percentage_used: b[5],
            endurance_group_critical_warning: b[6],
            data_units_read: p.u128(32),
            data_units_written: p.u128(48),
            host_read_commands: p.u128(64),
            host_write_commands: p.u128(80),
            controller_busy_time: p.u128(96),
            power_cycles: p.u128(112),
            power_on_hours: p.u128(128),
            unsafe_shutdowns: p.u128(144),
            media_errors: p.u128(160),
            num_err_log_entries: p.u128(176),
            warning_temp_time: p.u32(192),
            critical_temp_time: p.u32(196),
            temperature_sensors,
            thm_temp1_trans_count: p.u32(216),
            thm_temp2_trans_count: p.u32(220),
            thm_temp1_total_time: p.u32(224),
            thm_temp2_total_time: p.u32(228),
        })
    }

    /// Writes the page's fields at their spec offsets into `b` (at least 512 bytes):
    /// what an emulated controller returns. Bytes without a field are left alone.
    pub fn write_to(&self, b: &mut [u8]) -> Result<(), ShortPage> {
        need("SMART / Health Information log", b, SMART_LEN)?;
        b[0] = self.critical_warning.raw;
        b[1..3].copy_from_slice(&self.composite_temperature.to_le_bytes());
        b[3] = self.available_spare;
        b[4] = self.available_spare_threshold;
        b[5] = self.percentage_used;
        b[6] = self.endurance_group_critical_warning;
        let wide = [
            self.data_units_read,
            self.data_units_written,
            self.host_read_commands,
            self.host_write_commands,
            self.controller_busy_time,
            self.power_cycles,
            self.power_on_hours,
            self.unsafe_shutdowns,
            self.media_errors,
            self.num_err_log_entries,
        ];
        for (i, v) in wide.iter().enumerate() {
            let o = 32 + 16 * i;
            b[o..o + 16].copy_from_slice(&v.to_le_bytes());
        }
        b[192..196].copy_from_slice(&self.warning_temp_time.to_le_bytes());
        b[196..200].copy_from_slice(&self.critical_temp_time.to_le_bytes());
        for s in &self.temperature_sensors {
            if (1..=8).contains(&s.sensor) {
                let o = 200 + 2 * (s.sensor as usize - 1);
                b[o..o + 2].copy_from_slice(&s.kelvin.to_le_bytes());
            }
        }
        b[216..220].copy_from_slice(&self.thm_temp1_trans_count.to_le_bytes());
        b[220..224].copy_from_slice(&self.thm_temp2_trans_count.to_le_bytes());
        b[224..228].copy_from_slice(&self.thm_temp1_total_time.to_le_bytes());
        b[228..232].copy_from_slice(&self.thm_temp2_total_time.to_le_bytes());
        Ok(())
    }
}

/// Size of the Firmware Slot Information log page.
pub const FW_SLOT_LEN: usize = 512;

/// One firmware slot that holds an image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FwSlot {
    /// Slot number, 1..=7.
    pub slot: u8,
    /// Firmware revision (8 ASCII characters, trailing spaces removed).
    pub revision: String,
    /// The revision's 8 bytes as one little-endian number (how nvme-cli reports it).
    pub revision_raw: u64,
}

/// The Firmware Slot Information log page (LID 03h, 512 bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FwSlotLog {
    /// Byte 0, Active Firmware Info, as reported.
    pub afi: u8,
    /// The slot the running firmware came from (AFI bits 2:0).
    pub active_slot: u8,
    /// The slot activated at the next reset (AFI bits 6:4); `None` when not set.
    pub next_slot: Option<u8>,
    /// Slots holding an image (an all-zero revision is an empty slot).
    pub slots: Vec<FwSlot>,
}

impl FwSlotLog {
    /// Parses the page; it must hold the 64 bytes that carry fields (512 are returned).
    pub fn parse(b: &[u8]) -> Result<FwSlotLog, ShortPage> {
        let p = Page::new(b, "Firmware Slot Information log", 64)?;
        let afi = b[0];
        let next = (afi >> 4) & 7;
        let slots = (1..=7u8)
            .filter_map(|slot| {
                let o = 8 * slot as usize;
                let bytes = &b[o..o + 8];
                if bytes.iter().all(|&c| c == 0) {
                    return None;
                }
                Some(FwSlot { slot, revision: ascii_field(bytes), revision_raw: p.u64(o) })
            })
            .collect();
        Ok(FwSlotLog { afi, active_slot: afi & 7, next_slot: (next != 0).then_some(next), slots })
    }
}

/// An ASCII field of a page as text: trailing spaces and NULs removed, bytes that are not
/// printable ASCII shown as `.`.
pub fn ascii_field(b: &[u8]) -> String {
    let s: String = b.iter().map(|&c| if (0x20..0x7f).contains(&c) { c as char } else { '.' }).collect();
    s.trim_end_matches([' ', '.']).to_string()
}

/// Size of the Changed Namespace List log page.
pub const CHANGED_NS_LEN: usize = 4096;

/// The Changed Namespace List log page (LID 04h: up to 1024 namespace ids).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChangedNsList {
    /// Namespaces whose identify data changed since the page was last read.
    pub nsids: Vec<u32>,
    /// More than 1024 namespaces changed (the page's first entry is FFFFFFFFh): the list
    /// is not complete.
    pub overflow: bool,
}

impl ChangedNsList {
    /// Parses the whole dwords of `b`, up to the first zero entry.
    pub fn parse(b: &[u8]) -> Result<ChangedNsList, ShortPage> {
        if Page::new(b, "Changed Namespace List log", 4)?.u32(0) == u32::MAX {
            return Ok(ChangedNsList { nsids: Vec::new(), overflow: true });
        }
        let nsids =
            b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).take_while(|&n| n != 0).collect();
        Ok(ChangedNsList { nsids, overflow: false })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_log_fields_come_from_their_spec_offsets() {
        let mut b = [0u8; 512];
        b[0] = 0b0000_0101;
        b[1..3].copy_from_slice(&323u16.to_le_bytes());
        b[3] = 100;
        b[4] = 10;
        b[5] = 3;
        b[32..48].copy_from_slice(&(u64::MAX as u128 + 7).to_le_bytes());
        b[48] = 2;
        b[64] = 3;
        b[80] = 4;
        b[96] = 5;
        b[112] = 6;
        b[128] = 7;
        b[144] = 8;
        b[160] = 9;
        b[176] = 10;
        b[192] = 11;
        b[196] = 12;
        b[202..204].copy_from_slice(&300u16.to_le_bytes());
        b[216] = 13;
        b[220] = 14;
        b[224] = 15;
        b[228] = 16;
        let s = SmartLog::parse(&b).unwrap();
        assert!(s.critical_warning.spare_below_threshold && s.critical_warning.reliability_degraded);
        assert!(!s.critical_warning.temperature);
        assert_eq!(s.composite_temperature, 323);
        assert_eq!((s.available_spare, s.available_spare_threshold, s.percentage_used), (100, 10, 3));
        assert_eq!(s.data_units_read, u64::MAX as u128 + 7);
        assert_eq!(
            [
                s.data_units_written,
                s.host_read_commands,
                s.host_write_commands,
                s.controller_busy_time,
                s.power_cycles,
                s.power_on_hours,
                s.unsafe_shutdowns,
                s.media_errors,
                s.num_err_log_entries
            ],
            [2, 3, 4, 5, 6, 7, 8, 9, 10]
        );
        assert_eq!((s.warning_temp_time, s.critical_temp_time), (11, 12));
        assert_eq!(s.temperature_sensors, vec![TempSensor { sensor: 2, kelvin: 300 }]);
        assert_eq!(
            [s.thm_temp1_trans_count, s.thm_temp2_trans_count, s.thm_temp1_total_time, s.thm_temp2_total_time],
            [13, 14, 15, 16]
        );
        let mut again = [0u8; 512];
        s.write_to(&mut again).unwrap();
        assert_eq!(again[..], b[..]);
    }

    #[test]
    fn short_pages_are_refused_with_the_sizes() {
        let e = SmartLog::parse(&[0u8; 100]).unwrap_err();
        assert_eq!((e.need, e.have), (232, 100));
        assert!(e.to_string().contains("SMART"));
        assert!(ErrorLog::parse(&[0u8; 63]).is_err());
        assert!(FwSlotLog::parse(&[]).is_err());
        assert!(ChangedNsList::parse(&[1, 2]).is_err());
        assert!(SmartLog::default().write_to(&mut [0u8; 511]).is_err());
    }

    #[test]
    fn error_entries_split_status_and_phase() {
        let mut b = [0u8; 128];
        b[0] = 5;
        b[8..10].copy_from_slice(&1u16.to_le_bytes());
        b[10..12].copy_from_slice(&0x1234u16.to_le_bytes());
        // Status field SCT 1 / SC 0xBC with DNR, phase 1.
        let status: u16 = 1 << 8 | 0xBC | 1 << 14;
        b[12..14].copy_from_slice(&(status << 1 | 1).to_le_bytes());
        b[14..16].copy_from_slice(&0x0228u16.to_le_bytes());
        b[16..24].copy_from_slice(&0x1_0000_0000u64.to_le_bytes());
        b[24..28].copy_from_slice(&3u32.to_le_bytes());
        b[29] = 3;
        b[30] = 2;
        b[31] = 0x7d;
        b[32..40].copy_from_slice(&9u64.to_le_bytes());
        let log = ErrorLog::parse(&b).unwrap();
        assert_eq!(log.entries.len(), 2);
        let e = log.entries[0];
        assert!(e.is_valid() && !log.entries[1].is_valid());
        assert_eq!((e.error_count, e.sqid, e.cmdid), (5, 1, 0x1234));
        assert_eq!((e.status_field, e.phase_tag), (status, 1));
        assert_eq!(e.status().name(), "Zone Invalid Write");
        assert_eq!(e.parm_error_location, 0x0228);
        assert_eq!((e.lba, e.nsid, e.trtype, e.csi, e.opcode, e.cs), (1 << 32, 3, 3, 2, 0x7d, 9));
    }

    #[test]
    fn firmware_slots_list_the_filled_ones() {
        let mut b = [0u8; 512];
        b[0] = 0x21;
        b[8..16].copy_from_slice(b"1.0     ");
        b[24..32].copy_from_slice(b"2.5-rc1 ");
        let f = FwSlotLog::parse(&b).unwrap();
        assert_eq!((f.active_slot, f.next_slot), (1, Some(2)));
        assert_eq!(f.slots.len(), 2);
        assert_eq!((f.slots[0].slot, f.slots[0].revision.as_str()), (1, "1.0"));
        assert_eq!(f.slots[0].revision_raw, 0x2020_2020_2030_2E31);
        assert_eq!((f.slots[1].slot, f.slots[1].revision.as_str()), (3, "2.5-rc1"));
        b[0] = 1;
        assert_eq!(FwSlotLog::parse(&b).unwrap().next_slot, None);
    }

    #[test]
    fn changed_namespaces_stop_at_the_first_zero_and_flag_overflow() {
        let mut b = [0u8; 16];
        b[0] = 1;
        b[4] = 3;
        b[12] = 9;
        assert_eq!(ChangedNsList::parse(&b).unwrap(), ChangedNsList { nsids: vec![1, 3], overflow: false });
        b[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(ChangedNsList::parse(&b).unwrap().overflow);
    }
}
