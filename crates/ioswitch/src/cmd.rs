//! Command builders: NVM I/O commands, and a byte-addressed "file" pseudo command set for
//! files and block devices.
//!
//! Required fields go in the constructor, optional ones are builder methods:
//! `Cmd::write(nsid, slba, nlb).fua()`. The `cid` and data pointer of the submission entry
//! are filled in by the interface that carries the command, never by the user.

use crate::spec::Sqe;
use serde::Serialize;

/// Opcodes of the command sets ioswitch builds.
pub mod opc {
    /// NVM Flush.
    pub const FLUSH: u8 = 0x00;
    /// NVM Write.
    pub const WRITE: u8 = 0x01;
    /// NVM Read.
    pub const READ: u8 = 0x02;
    /// NVM Write Zeroes.
    pub const WRITE_ZEROES: u8 = 0x08;
    /// NVM Dataset Management.
    pub const DSM: u8 = 0x09;
    /// ioswitch file set: flush (fdatasync).
    pub const FS_FLUSH: u8 = 0xF0;
    /// ioswitch file set: write `len` bytes at byte `offset`.
    pub const FS_WRITE: u8 = 0xF1;
    /// ioswitch file set: read `len` bytes at byte `offset`.
    pub const FS_READ: u8 = 0xF2;
    /// ioswitch file set: trim (hole punch / discard) `len` bytes at byte `offset`.
    pub const FS_TRIM: u8 = 0xF9;
    /// Admin Get Log Page.
    pub const ADMIN_GET_LOG_PAGE: u8 = 0x02;
    /// Admin Identify.
    pub const ADMIN_IDENTIFY: u8 = 0x06;
    /// Admin Set Features.
    pub const ADMIN_SET_FEATURES: u8 = 0x09;
    /// Admin Get Features.
    pub const ADMIN_GET_FEATURES: u8 = 0x0A;
    /// ZNS Zone Management Send.
    pub const ZONE_MGMT_SEND: u8 = 0x79;
    /// ZNS Zone Management Receive.
    pub const ZONE_MGMT_RECV: u8 = 0x7A;
    /// ZNS Zone Append.
    pub const ZONE_APPEND: u8 = 0x7D;
}

/// Which command set (and so which queue, I/O or admin) a command belongs to.
/// `repr(u32)` with fixed values, so a [`Cmd`] has the layout of the C API's command.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CmdSet {
    /// NVM (and ZNS) I/O commands, LBA addressed.
    Nvm = 0,
    /// Admin commands.
    Admin = 1,
    /// ioswitch's byte-addressed file commands (offset and length in bytes): CDW10-11
    /// hold the offset, CDW12-13 the length. Served by every non-passthrough interface.
    Fs = 2,
}

/// Per-command I/O priority: the kernel's `ioprio` value, `class << 13 | level`
/// (ioprio_set(2)), which io_uring carries in `sqe->ioprio` and Linux AIO in
/// `aio_reqprio` (with `IOCB_FLAG_IOPRIO`).
pub mod ioprio {
    /// No priority of its own: the command runs with the submitting thread's.
    pub const NONE: u16 = 0;
    /// Real-time class.
    pub const CLASS_RT: u16 = 1;
    /// Best-effort class.
    pub const CLASS_BE: u16 = 2;
    /// Idle class.
    pub const CLASS_IDLE: u16 = 3;
    /// Bits of the class's shift (`IOPRIO_CLASS_SHIFT`).
    pub const CLASS_SHIFT: u16 = 13;
    /// The value of `class` (0 to 7; the kernel takes 1 to 3) and `level` (0 to 7 for
    /// the real-time and best-effort classes): `class << 13 | level`. Values the kernel
    /// does not take are not refused here: the kernel refuses them (EINVAL) at submission.
    pub const fn value(class: u16, level: u16) -> u16 {
        (class & 7) << CLASS_SHIFT | (level & 0x1fff)
    }
    /// The class of a value.
    pub const fn class(value: u16) -> u16 {
        value >> CLASS_SHIFT
    }
    /// The level of a value (the low 3 bits, as fio reports it).
    pub const fn level(value: u16) -> u16 {
        value & 7
    }
}

/// A command: an NVMe submission entry, the set it belongs to, and its I/O priority.
///
/// `repr(C)`: the 64-byte entry, then the set as a 32-bit value (0 NVM, 1 admin, 2 file
/// set), then the 16-bit I/O priority and 16 reserved bits, 72 bytes in all, the layout of
/// `struct ioswitch_cmd` in the C API, which can then lend a caller's command after
/// checking its set.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cmd {
    /// The 64-byte submission entry.
    pub sqe: Sqe,
    /// The command set.
    pub set: CmdSet,
    /// The command's I/O priority ([`ioprio`]; [`ioprio::NONE`], the default of every
    /// constructor, runs it at the submitting thread's priority). Only the kernel's
    /// asynchronous interfaces carry one (`async=io_uring`, `async=libaio`), and only on
    /// reads and writes; every other interface refuses a command that has one.
    #[serde(skip_serializing_if = "is_none")]
    pub ioprio: u16,
    /// Reserved: 0 from every constructor, ignored.
    #[serde(skip)]
    reserved: u16,
}

fn is_none(p: &u16) -> bool {
    *p == ioprio::NONE
}

const _: () = assert!(std::mem::size_of::<Cmd>() == 72 && std::mem::align_of::<Cmd>() == 8);
const _: () = assert!(std::mem::offset_of!(Cmd, set) == 64 && std::mem::offset_of!(Cmd, ioprio) == 68);

/// One Dataset Management range (NVM spec, 16 bytes), written into a DSM command's buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DsmRange {
    /// Context attributes.
    pub cattr: u32,
    /// Length in logical blocks (1-based).
    pub nlb: u32,
    /// Starting LBA.
    pub slba: u64,
}

const _: () = assert!(std::mem::size_of::<DsmRange>() == 16);

impl DsmRange {
    /// The 16 little-endian bytes of this range.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.cattr.to_le_bytes());
        b[4..8].copy_from_slice(&self.nlb.to_le_bytes());
        b[8..16].copy_from_slice(&self.slba.to_le_bytes());
        b
    }
    /// Reads a range from 16 little-endian bytes.
    pub fn from_bytes(b: &[u8]) -> DsmRange {
        DsmRange {
            cattr: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            nlb: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            slba: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        }
    }
}

#[inline]
fn nvm(opcode: u8, nsid: u32) -> Cmd {
    Cmd::of(Sqe { opcode, nsid, ..Sqe::default() }, CmdSet::Nvm)
}

#[inline]
fn fs(opcode: u8, offset: u64, len: u64) -> Cmd {
    let sqe = Sqe {
        opcode,
        cdw10: offset as u32,
        cdw11: (offset >> 32) as u32,
        cdw12: len as u32,
        cdw13: (len >> 32) as u32,
        ..Sqe::default()
    };
    Cmd::of(sqe, CmdSet::Fs)
}

#[inline]
fn lba_range(mut c: Cmd, slba: u64, nlb: u32) -> Cmd {
    assert!((1..=65536).contains(&nlb), "nlb must be 1..=65536 (NVMe carries it 0-based in 16 bits), got {nlb}");
    c.sqe.cdw10 = slba as u32;
    c.sqe.cdw11 = (slba >> 32) as u32;
    c.sqe.cdw12 = nlb - 1;
    c
}

impl Cmd {
    /// A command of `set` from a submission entry, with no I/O priority.
    #[inline(always)]
    const fn of(sqe: Sqe, set: CmdSet) -> Cmd {
        Cmd { sqe, set, ioprio: ioprio::NONE, reserved: 0 }
    }

    /// Sets the command's I/O priority ([`ioprio::value`]; [`ioprio::NONE`] for none).
    #[inline]
    pub fn with_ioprio(mut self, ioprio: u16) -> Cmd {
        self.ioprio = ioprio;
        self
    }

    /// The command's set and I/O priority in one word (the reserved bits too): the fast
    /// check's test for "a command of this set with no priority" is one comparison.
    #[inline(always)]
    pub(crate) fn set_and_prio(&self) -> u64 {
        self.set as u32 as u64 | (self.ioprio as u64) << 32 | (self.reserved as u64) << 48
    }

    /// NVM Read of `nlb` logical blocks (1..=65536) starting at `slba`.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536: the count does not fit the command.
    #[inline]
    pub fn read(nsid: u32, slba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::READ, nsid), slba, nlb)
    }
    /// NVM Write of `nlb` logical blocks (1..=65536) starting at `slba`.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536.
    #[inline]
    pub fn write(nsid: u32, slba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::WRITE, nsid), slba, nlb)
    }
    /// NVM Write Zeroes of `nlb` logical blocks (1..=65536) starting at `slba`; no data.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536.
    #[inline]
    pub fn write_zeroes(nsid: u32, slba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::WRITE_ZEROES, nsid), slba, nlb)
    }
    /// NVM Flush.
    #[inline]
    pub fn flush(nsid: u32) -> Cmd {
        nvm(opc::FLUSH, nsid)
    }
    /// NVM Dataset Management with `nr` ranges (1..=256) in the data buffer, each a
    /// [`DsmRange`]; `deallocate` sets the AD attribute (trim).
    ///
    /// # Panics
    /// When `nr` is 0 or above 256.
    pub fn dsm(nsid: u32, nr: u32, deallocate: bool) -> Cmd {
        assert!((1..=256).contains(&nr), "DSM carries 1..=256 ranges, got {nr}");
        let mut c = nvm(opc::DSM, nsid);
        c.sqe.cdw10 = nr - 1;
        c.sqe.cdw11 = if deallocate { 1 << 2 } else { 0 };
        c
    }
    /// Sets Force Unit Access on a read or write.
    #[inline]
    pub fn fua(mut self) -> Cmd {
        self.sqe.cdw12 |= 1 << 30;
        self
    }

    /// File set: read `len` bytes at byte `offset`.
    #[inline]
    pub fn fs_read(offset: u64, len: u64) -> Cmd {
        fs(opc::FS_READ, offset, len)
    }
    /// File set: write `len` bytes at byte `offset`.
    #[inline]
    pub fn fs_write(offset: u64, len: u64) -> Cmd {
        fs(opc::FS_WRITE, offset, len)
    }
    /// File set: flush written data to stable storage (fdatasync).
    #[inline]
    pub fn fs_flush() -> Cmd {
        fs(opc::FS_FLUSH, 0, 0)
    }
    /// File set: trim `len` bytes at byte `offset` (hole punch on files, discard on
    /// block devices); reads of the range return zeroes afterwards.
    #[inline]
    pub fn fs_trim(offset: u64, len: u64) -> Cmd {
        fs(opc::FS_TRIM, offset, len)
    }

    /// Any I/O command from a raw submission entry.
    #[inline]
    pub fn io(sqe: Sqe) -> Cmd {
        Cmd::of(sqe, CmdSet::Nvm)
    }
    /// Any admin command from a raw submission entry.
    pub fn admin(sqe: Sqe) -> Cmd {
        Cmd::of(sqe, CmdSet::Admin)
    }

    /// True for an NVM read or write with Force Unit Access set.
    #[inline]
    pub fn is_fua(&self) -> bool {
        self.set == CmdSet::Nvm && matches!(self.sqe.opcode, opc::READ | opc::WRITE) && self.sqe.cdw12 & (1 << 30) != 0
    }

    /// A short name for messages: `"NVM read"`, `"file write"`, `"admin opcode 0x06"`.
    pub fn describe(&self) -> String {
        let name = match (self.set, self.sqe.opcode) {
            (CmdSet::Nvm, opc::READ) => "NVM read",
            (CmdSet::Nvm, opc::WRITE) => "NVM write",
            (CmdSet::Nvm, opc::FLUSH) => "NVM flush",
            (CmdSet::Nvm, opc::WRITE_ZEROES) => "NVM write zeroes",
            (CmdSet::Nvm, opc::DSM) => "NVM dataset management",
            (CmdSet::Fs, opc::FS_READ) => "file read",
            (CmdSet::Fs, opc::FS_WRITE) => "file write",
            (CmdSet::Fs, opc::FS_FLUSH) => "file flush",
            (CmdSet::Fs, opc::FS_TRIM) => "file trim",
            (CmdSet::Admin, opc::ADMIN_GET_LOG_PAGE) => "get log page",
            (CmdSet::Admin, opc::ADMIN_IDENTIFY) => "identify",
            (CmdSet::Admin, opc::ADMIN_SET_FEATURES) => "set features",
            (CmdSet::Admin, opc::ADMIN_GET_FEATURES) => "get features",
            (CmdSet::Nvm, opc::ZONE_MGMT_SEND) => "zone management send",
            (CmdSet::Nvm, opc::ZONE_MGMT_RECV) => "zone management receive",
            (CmdSet::Nvm, opc::ZONE_APPEND) => "zone append",
            (CmdSet::Nvm, o) => return format!("I/O opcode {o:#04x}"),
            (CmdSet::Admin, o) => return format!("admin opcode {o:#04x}"),
            (CmdSet::Fs, o) => return format!("file opcode {o:#04x}"),
        };
        name.to_string()
    }

    /// Byte offset of a file-set command.
    #[inline]
    pub fn fs_offset(&self) -> u64 {
        self.sqe.cdw10 as u64 | (self.sqe.cdw11 as u64) << 32
    }
    /// Byte length of a file-set command.
    #[inline]
    pub fn fs_len(&self) -> u64 {
        self.sqe.cdw12 as u64 | (self.sqe.cdw13 as u64) << 32
    }
}

impl Cmd {
    /// Admin Identify: `cns` selects the structure (see [`crate::spec::idfy::cns`]),
    /// `nsid` the namespace it is about (0 when none), `cntid` the controller (CDW10
    /// bits 31:16) and `csi` the I/O command set (CDW11 bits 31:24) for the command-set
    /// specific structures. The data is one 4096-byte page
    /// ([`IDENTIFY_LEN`](crate::spec::idfy::IDENTIFY_LEN)).
    pub fn identify(cns: u8, nsid: u32, cntid: u16, csi: u8) -> Cmd {
        let sqe = Sqe {
            opcode: opc::ADMIN_IDENTIFY,
            nsid,
            cdw10: cns as u32 | (cntid as u32) << 16,
            cdw11: (csi as u32) << 24,
            ..Sqe::default()
        };
        Cmd::of(sqe, CmdSet::Admin)
    }
}

fn dwords_0based(what: &str, bytes: u32) -> u32 {
    assert!(
        bytes >= 4 && bytes % 4 == 0,
        "{what} transfers whole dwords: bytes must be a multiple of 4 and at least 4, got {bytes}"
    );
    bytes / 4 - 1
}

impl Cmd {
    /// Admin Get Log Page: `bytes` of log page `lid` (see [`crate::spec::log::lid`])
    /// starting at byte `offset` of the page, for namespace `nsid` (`0xFFFFFFFF`: the
    /// controller as a whole). `lsp` is the 7-bit Log Specific Parameter.
    ///
    /// # Panics
    /// When `bytes` is 0 or not a multiple of 4, or `offset` is not a multiple of 4: the
    /// command counts whole dwords.
    pub fn get_log(nsid: u32, lid: u8, lsp: u8, bytes: u32, offset: u64) -> Cmd {
        let numd = dwords_0based("get log page", bytes);
        assert!(offset % 4 == 0, "get log page offsets are whole dwords, got {offset}");
        let sqe = Sqe {
            opcode: opc::ADMIN_GET_LOG_PAGE,
            nsid,
            cdw10: lid as u32 | ((lsp & 0x7f) as u32) << 8 | (numd & 0xffff) << 16,
            cdw11: numd >> 16,
            cdw12: offset as u32,
            cdw13: (offset >> 32) as u32,
            ..Sqe::default()
        };
        Cmd::of(sqe, CmdSet::Admin)
    }
    /// Sets Retain Asynchronous Event on a Get Log Page (reading the page does not clear
    /// the event that announced it).
    pub fn rae(mut self) -> Cmd {
        self.sqe.cdw10 |= 1 << 15;
        self
    }

    /// Admin Get Features of feature `fid` (see [`crate::spec::feat::fid`]): the value
    /// `sel` selects, for namespace `nsid` (0 for controller-wide features); `cdw11` is
    /// the feature specific dword some features take. The value comes back in the
    /// completion's result, decoded by [`crate::spec::feat::Feature::decode`].
    pub fn get_features(fid: u8, sel: crate::spec::feat::Select, nsid: u32, cdw11: u32) -> Cmd {
        let sqe =
            Sqe { opcode: opc::ADMIN_GET_FEATURES, nsid, cdw10: fid as u32 | sel.bits() << 8, cdw11, ..Sqe::default() };
        Cmd::of(sqe, CmdSet::Admin)
    }
    /// Admin Set Features: feature `fid` to the value `cdw11` (see
    /// [`crate::spec::feat::Feature::to_dword`]); `save` keeps it across resets.
    /// Namespace-specific features take [`Cmd::with_nsid`]; further dwords
    /// [`Cmd::with_cdw12`].
    pub fn set_features(fid: u8, save: bool, cdw11: u32) -> Cmd {
        let sqe =
            Sqe { opcode: opc::ADMIN_SET_FEATURES, cdw10: fid as u32 | (save as u32) << 31, cdw11, ..Sqe::default() };
        Cmd::of(sqe, CmdSet::Admin)
    }
    /// Sets the namespace id of any command.
    pub fn with_nsid(mut self, nsid: u32) -> Cmd {
        self.sqe.nsid = nsid;
        self
    }
    /// Sets command dword 12 of any command.
    pub fn with_cdw12(mut self, cdw12: u32) -> Cmd {
        self.sqe.cdw12 = cdw12;
        self
    }

    /// ZNS Zone Management Receive, Report Zones: `bytes` of report (a 64-byte header,
    /// then 64-byte zone descriptors, see [`crate::spec::zns::ZoneReport`]) for the zones
    /// from the one holding `slba` on. With `partial`, the header counts the descriptors
    /// returned rather than every matching zone.
    ///
    /// # Panics
    /// When `bytes` is 0 or not a multiple of 4.
    pub fn zone_mgmt_recv(nsid: u32, slba: u64, bytes: u32, partial: bool) -> Cmd {
        let numd = dwords_0based("zone management receive", bytes);
        let mut c = nvm(opc::ZONE_MGMT_RECV, nsid);
        c.sqe.set_slba(slba);
        c.sqe.cdw12 = numd;
        c.sqe.cdw13 = (partial as u32) << 16;
        c
    }
    /// Reports only the zones `filter` selects (the Reporting Options of Zone Management
    /// Receive).
    pub fn zone_filter(mut self, filter: crate::spec::zns::ZoneFilter) -> Cmd {
        self.sqe.cdw13 = (self.sqe.cdw13 & !0xff00) | (filter.bits() as u32) << 8;
        self
    }
    /// ZNS Zone Management Send: `action` on the zone starting at `slba`, or on every zone
    /// (`select_all`, `slba` ignored) in a state the action applies to.
    pub fn zone_mgmt_send(nsid: u32, slba: u64, action: crate::spec::zns::ZoneAction, select_all: bool) -> Cmd {
        let mut c = nvm(opc::ZONE_MGMT_SEND, nsid);
        c.sqe.set_slba(slba);
        c.sqe.cdw13 = action.bits() as u32 | (select_all as u32) << 8;
        c
    }
    /// ZNS Zone Append of `nlb` logical blocks (1..=65536) to the zone starting at
    /// `zslba`; the completion's result is the LBA the data was written at.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536.
    pub fn zone_append(nsid: u32, zslba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::ZONE_APPEND, nsid), zslba, nlb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_command_takes_a_new_slba_and_keeps_the_rest() {
        let mut c = Cmd::read(1, 5, 8);
        c.sqe.set_slba(0x1_2345_6789);
        assert_eq!(c.sqe, Cmd::read(1, 0x1_2345_6789, 8).sqe);
        c.sqe.set_slba(7);
        assert_eq!((c.sqe.slba(), c.sqe.cdw11, c.sqe.nlb()), (7, 0, 8));
    }

    #[test]
    fn nvm_read_encodes_slba_and_zero_based_nlb() {
        let c = Cmd::read(1, 0x1_0000_0002, 8);
        assert_eq!(c.sqe.opcode, 0x02);
        assert_eq!(c.sqe.nsid, 1);
        assert_eq!(c.sqe.cdw10, 2);
        assert_eq!(c.sqe.cdw11, 1);
        assert_eq!(c.sqe.cdw12, 7);
        assert_eq!(c.sqe.slba(), 0x1_0000_0002);
        assert_eq!(c.sqe.nlb(), 8);
        assert_eq!(Cmd::write(1, 0, 65536).sqe.nlb(), 65536);
        assert_eq!(Cmd::write(1, 0, 1).fua().sqe.cdw12, 1 << 30);
    }

    #[test]
    #[should_panic(expected = "nlb must be")]
    fn zero_blocks_is_refused() {
        Cmd::read(1, 0, 0);
    }

    #[test]
    fn file_commands_carry_64_bit_offset_and_length() {
        let c = Cmd::fs_write(5 << 32 | 7, 3 << 32 | 9);
        assert_eq!(c.set, CmdSet::Fs);
        assert_eq!(c.fs_offset(), 5 << 32 | 7);
        assert_eq!(c.fs_len(), 3 << 32 | 9);
    }

    #[test]
    fn dsm_range_round_trips_through_bytes() {
        let r = DsmRange { cattr: 0, nlb: 16, slba: 1 << 40 };
        assert_eq!(DsmRange::from_bytes(&r.to_bytes()), r);
        let c = Cmd::dsm(1, 2, true);
        assert_eq!(c.sqe.cdw10, 1);
        assert_eq!(c.sqe.cdw11, 4);
    }

    #[test]
    fn raw_entry_round_trips_through_bytes() {
        let c = Cmd::write(3, 77, 4);
        let b = *c.sqe.as_bytes();
        assert_eq!(b[0], 0x01);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 3);
        assert_eq!(Sqe::from_bytes(&b), c.sqe);
    }

    #[test]
    fn get_log_page_splits_the_dword_count_and_offset() {
        let c = Cmd::get_log(0xffff_ffff, 2, 0x7f, 512, 0x1_0000_0004).rae();
        assert_eq!((c.set, c.sqe.opcode, c.sqe.nsid), (CmdSet::Admin, 0x02, 0xffff_ffff));
        assert_eq!(c.sqe.cdw10, 2 | 0x7f << 8 | 1 << 15 | 127 << 16);
        assert_eq!(c.sqe.cdw11, 0);
        assert_eq!((c.sqe.cdw12, c.sqe.cdw13), (4, 1));
        let big = Cmd::get_log(1, 1, 0, 1 << 20, 0);
        assert_eq!((big.sqe.cdw10 >> 16, big.sqe.cdw11), (0xffff, 3));
        assert_eq!(c.describe(), "get log page");
    }

    #[test]
    #[should_panic(expected = "whole dwords")]
    fn get_log_page_of_a_partial_dword_is_refused() {
        Cmd::get_log(1, 2, 0, 6, 0);
    }

    #[test]
    fn features_carry_fid_select_and_save() {
        use crate::spec::feat::Select;
        let g = Cmd::get_features(7, Select::Supported, 0, 9);
        assert_eq!((g.sqe.opcode, g.sqe.cdw10, g.sqe.cdw11), (0x0A, 7 | 3 << 8, 9));
        let s = Cmd::set_features(6, true, 1).with_nsid(2).with_cdw12(5);
        assert_eq!((s.sqe.opcode, s.sqe.cdw10, s.sqe.cdw11, s.sqe.nsid, s.sqe.cdw12), (0x09, 6 | 1 << 31, 1, 2, 5));
        assert_eq!(Cmd::set_features(6, false, 0).sqe.cdw10, 6);
    }

    #[test]
    fn zone_commands_encode_action_select_all_and_report_options() {
        use crate::spec::zns::{ZoneAction, ZoneFilter};
        let r = Cmd::zone_mgmt_recv(3, 0x2000, 4096, true).zone_filter(ZoneFilter::Full);
        assert_eq!((r.set, r.sqe.opcode, r.sqe.nsid), (CmdSet::Nvm, 0x7A, 3));
        assert_eq!((r.sqe.slba(), r.sqe.cdw12, r.sqe.cdw13), (0x2000, 1023, 1 << 16 | 5 << 8));
        let s = Cmd::zone_mgmt_send(3, 0x4000, ZoneAction::Reset, true);
        assert_eq!((s.sqe.opcode, s.sqe.slba(), s.sqe.cdw13), (0x79, 0x4000, 4 | 1 << 8));
        assert_eq!(Cmd::zone_mgmt_send(3, 0, ZoneAction::Open, false).sqe.cdw13, 3);
        let a = Cmd::zone_append(3, 0x2000, 8);
        assert_eq!((a.sqe.opcode, a.sqe.slba(), a.sqe.nlb()), (0x7D, 0x2000, 8));
        assert_eq!(a.describe(), "zone append");
    }
}
