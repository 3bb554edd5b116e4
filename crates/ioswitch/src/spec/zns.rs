//! Zoned Namespace command set (NVMe ZNS spec): the Zone Management Receive report
//! (a 64-byte header and 64-byte zone descriptors) and the Zone Management Send actions.

use super::{Page, ShortPage};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Size of the report header and of one zone descriptor.
pub const ZONE_DESC_LEN: usize = 64;

/// Zone Type (descriptor byte 0, bits 3:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneType {
    /// 2h: Sequential Write Required.
    SeqWriteRequired,
    /// Any other (reserved) value.
    Reserved(u8),
}

/// Zone State (descriptor byte 1, bits 7:4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneState {
    /// 1h: ZSE, Empty.
    Empty,
    /// 2h: ZSIO, Implicitly Opened.
    ImplicitlyOpened,
    /// 3h: ZSEO, Explicitly Opened.
    ExplicitlyOpened,
    /// 4h: ZSC, Closed.
    Closed,
    /// Dh: ZSRO, Read Only.
    ReadOnly,
    /// Eh: ZSF, Full.
    Full,
    /// Fh: ZSO, Offline.
    Offline,
    /// Any other (reserved) value.
    Reserved(u8),
}

impl ZoneState {
    /// Decodes the 4-bit state value.
    pub fn from_bits(v: u8) -> ZoneState {
        match v {
            0x1 => ZoneState::Empty,
            0x2 => ZoneState::ImplicitlyOpened,
            0x3 => ZoneState::ExplicitlyOpened,
            0x4 => ZoneState::Closed,
            0xD => ZoneState::ReadOnly,
            0xE => ZoneState::Full,
            0xF => ZoneState::Offline,
            x => ZoneState::Reserved(x),
        }
    }
    /// The 4-bit state value.
    pub fn bits(self) -> u8 {
        match self {
            ZoneState::Empty => 0x1,
            ZoneState::ImplicitlyOpened => 0x2,
            ZoneState::ExplicitlyOpened => 0x3,
            ZoneState::Closed => 0x4,
            ZoneState::ReadOnly => 0xD,
            ZoneState::Full => 0xE,
            ZoneState::Offline => 0xF,
            ZoneState::Reserved(x) => x & 0xf,
        }
    }
    /// A short name for tables: `empty`, `imp-open`, `exp-open`, `closed`, `read-only`,
    /// `full`, `offline`.
    pub fn short(self) -> String {
        match self {
            ZoneState::Empty => "empty".into(),
            ZoneState::ImplicitlyOpened => "imp-open".into(),
            ZoneState::ExplicitlyOpened => "exp-open".into(),
            ZoneState::Closed => "closed".into(),
            ZoneState::ReadOnly => "read-only".into(),
            ZoneState::Full => "full".into(),
            ZoneState::Offline => "offline".into(),
            ZoneState::Reserved(x) => format!("reserved({x:#x})"),
        }
    }
}

flag_byte! {
    /// Zone Attributes (descriptor byte 2).
    pub struct ZoneAttrs {
        /// Bit 0, ZFC: the controller finished the zone (Zone Active Excursion).
        finished_by_controller = 1,
        /// Bit 1, FZR: the controller recommends finishing the zone.
        finish_recommended = 2,
        /// Bit 2, RZR: the controller recommends resetting the zone.
        reset_recommended = 4,
        /// Bit 3, ZRWAV: a zone random write area is allocated to the zone.
        zrwa_valid = 8,
        /// Bit 7, ZDEV: the zone descriptor extension is valid.
        ext_valid = 0x80,
    }
}

/// One zone descriptor of a report (64 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ZoneDesc {
    /// Byte 0: zone type.
    pub zone_type: ZoneType,
    /// Byte 1: zone state.
    pub state: ZoneState,
    /// Byte 2: zone attributes.
    pub attrs: ZoneAttrs,
    /// Byte 3: zone attributes information.
    pub attrs_info: u8,
    /// Bytes 8-15: writable LBAs in the zone.
    pub capacity: u64,
    /// Bytes 16-23: the zone's first LBA.
    pub zslba: u64,
    /// Bytes 24-31: the write pointer (meaningless when full, read-only or offline).
    pub wp: u64,
}

impl ZoneDesc {
    /// Parses one 64-byte descriptor.
    pub fn parse(b: &[u8]) -> Result<ZoneDesc, ShortPage> {
        let p = Page::new(b, "zone descriptor", ZONE_DESC_LEN)?;
        let zone_type = match b[0] & 0xf {
            2 => ZoneType::SeqWriteRequired,
            x => ZoneType::Reserved(x),
        };
        Ok(ZoneDesc {
            zone_type,
            state: ZoneState::from_bits(b[1] >> 4),
            attrs: ZoneAttrs::from_byte(b[2]),
            attrs_info: b[3],
            capacity: p.u64(8),
            zslba: p.u64(16),
            wp: p.u64(24),
        })
    }

    /// Writes the descriptor's 64 bytes (what a zoned device emulation returns).
    pub fn to_bytes(&self) -> [u8; ZONE_DESC_LEN] {
        let mut b = [0u8; ZONE_DESC_LEN];
        b[0] = match self.zone_type {
            ZoneType::SeqWriteRequired => 2,
            ZoneType::Reserved(x) => x & 0xf,
        };
        b[1] = self.state.bits() << 4;
        b[2] = self.attrs.raw;
        b[3] = self.attrs_info;
        b[8..16].copy_from_slice(&self.capacity.to_le_bytes());
        b[16..24].copy_from_slice(&self.zslba.to_le_bytes());
        b[24..32].copy_from_slice(&self.wp.to_le_bytes());
        b
    }
}

/// A Report Zones reply of Zone Management Receive.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ZoneReport {
    /// Header bytes 0-7: with a partial report, the descriptors in this reply; otherwise
    /// every zone that matches from the starting LBA to the end of the namespace (which
    /// may be more than the reply holds).
    pub nr_zones: u64,
    /// The descriptors the reply holds.
    pub zones: Vec<ZoneDesc>,
}

impl ZoneReport {
    /// Parses a reply: the header and as many whole descriptors as both the header's
    /// count and the bytes allow.
    pub fn parse(b: &[u8]) -> Result<ZoneReport, ShortPage> {
        let nr_zones = Page::new(b, "zone report header", ZONE_DESC_LEN)?.u64(0);
        let zones = b[ZONE_DESC_LEN..]
            .chunks_exact(ZONE_DESC_LEN)
            .take(usize::try_from(nr_zones).unwrap_or(usize::MAX))
            .map(ZoneDesc::parse)
            .collect::<Result<_, _>>()?;
        Ok(ZoneReport { nr_zones, zones })
    }
}

/// Zone Send Action of Zone Management Send (CDW13 bits 7:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneAction {
    /// 1h: Close Zone.
    Close,
    /// 2h: Finish Zone.
    Finish,
    /// 3h: Open Zone.
    Open,
    /// 4h: Reset Zone.
    Reset,
    /// 5h: Offline Zone.
    Offline,
}

impl ZoneAction {
    /// Every action.
    pub const ALL: [ZoneAction; 5] =
        [ZoneAction::Close, ZoneAction::Finish, ZoneAction::Open, ZoneAction::Reset, ZoneAction::Offline];
    /// The Zone Send Action value.
    pub fn bits(self) -> u8 {
        match self {
            ZoneAction::Close => 1,
            ZoneAction::Finish => 2,
            ZoneAction::Open => 3,
            ZoneAction::Reset => 4,
            ZoneAction::Offline => 5,
        }
    }
    /// The action for a Zone Send Action value.
    pub fn from_bits(v: u8) -> Option<ZoneAction> {
        ZoneAction::ALL.into_iter().find(|a| a.bits() == v)
    }
    /// The name in option strings and output.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneAction::Close => "close",
            ZoneAction::Finish => "finish",
            ZoneAction::Open => "open",
            ZoneAction::Reset => "reset",
            ZoneAction::Offline => "offline",
        }
    }
}

impl fmt::Display for ZoneAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ZoneAction {
    type Err = String;
    fn from_str(s: &str) -> Result<ZoneAction, String> {
        ZoneAction::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown zone action {s:?}; known: close, finish, open, reset, offline"))
    }
}

/// Which zones a report lists (Zone Receive Action Specific field, CDW13 bits 15:8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneFilter {
    /// 0h: every zone.
    #[default]
    All,
    /// 1h: empty zones.
    Empty,
    /// 2h: implicitly opened zones.
    ImplicitlyOpened,
    /// 3h: explicitly opened zones.
    ExplicitlyOpened,
    /// 4h: closed zones.
    Closed,
    /// 5h: full zones.
    Full,
    /// 6h: read-only zones.
    ReadOnly,
    /// 7h: offline zones.
    Offline,
}

impl ZoneFilter {
    /// The reporting option value.
    pub fn bits(self) -> u8 {
        match self {
            ZoneFilter::All => 0,
            ZoneFilter::Empty => 1,
            ZoneFilter::ImplicitlyOpened => 2,
            ZoneFilter::ExplicitlyOpened => 3,
            ZoneFilter::Closed => 4,
            ZoneFilter::Full => 5,
            ZoneFilter::ReadOnly => 6,
            ZoneFilter::Offline => 7,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(state: u8, zslba: u64) -> [u8; 64] {
        let mut d = [0u8; 64];
        d[0] = 2;
        d[1] = state << 4;
        d[2] = 0x86;
        d[3] = 9;
        d[8..16].copy_from_slice(&6144u64.to_le_bytes());
        d[16..24].copy_from_slice(&zslba.to_le_bytes());
        d[24..32].copy_from_slice(&(zslba + 8).to_le_bytes());
        d
    }

    #[test]
    fn report_header_and_descriptors_parse_at_spec_offsets() {
        let mut b = vec![0u8; 64];
        b[0..8].copy_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(&desc(0x2, 0));
        b.extend_from_slice(&desc(0xE, 8192));
        b.extend_from_slice(&[0u8; 64]); // room beyond the count is ignored
        let r = ZoneReport::parse(&b).unwrap();
        assert_eq!(r.nr_zones, 2);
        assert_eq!(r.zones.len(), 2);
        let z = r.zones[0];
        assert_eq!(z.zone_type, ZoneType::SeqWriteRequired);
        assert_eq!(z.state, ZoneState::ImplicitlyOpened);
        assert!(z.attrs.finish_recommended && z.attrs.reset_recommended && z.attrs.ext_valid);
        assert!(!z.attrs.finished_by_controller && !z.attrs.zrwa_valid);
        assert_eq!((z.attrs_info, z.capacity, z.zslba, z.wp), (9, 6144, 0, 8));
        assert_eq!(r.zones[1].state, ZoneState::Full);
        assert_eq!(r.zones[1].to_bytes(), desc(0xE, 8192));
    }

    #[test]
    fn a_count_larger_than_the_reply_reads_only_what_is_there() {
        let mut b = vec![0u8; 64];
        b[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
        b.extend_from_slice(&desc(0x1, 0));
        b.extend_from_slice(&[0u8; 10]);
        let r = ZoneReport::parse(&b).unwrap();
        assert_eq!((r.nr_zones, r.zones.len()), (u64::MAX, 1));
        assert!(ZoneReport::parse(&[0u8; 63]).is_err());
        assert!(ZoneDesc::parse(&[0u8; 10]).is_err());
    }

    #[test]
    fn every_state_round_trips_and_actions_parse_by_name() {
        for v in 0..16u8 {
            assert_eq!(ZoneState::from_bits(v).bits(), v);
        }
        assert_eq!(ZoneState::from_bits(0xD), ZoneState::ReadOnly);
        assert_eq!(ZoneState::from_bits(0xF), ZoneState::Offline);
        for a in ZoneAction::ALL {
            assert_eq!(a.as_str().parse::<ZoneAction>(), Ok(a));
            assert_eq!(ZoneAction::from_bits(a.bits()), Some(a));
        }
        assert!("explode".parse::<ZoneAction>().is_err());
        assert_eq!(ZoneFilter::Offline.bits(), 7);
    }
}
