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
}

/// Which command set (and so which queue, I/O or admin) a command belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CmdSet {
    /// NVM (and ZNS) I/O commands, LBA addressed.
    Nvm,
    /// Admin commands.
    Admin,
    /// ioswitch's byte-addressed file commands (offset and length in bytes): CDW10-11
    /// hold the offset, CDW12-13 the length. Served by every non-passthrough interface.
    Fs,
}

/// A command: an NVMe submission entry plus the set it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cmd {
    /// The 64-byte submission entry.
    pub sqe: Sqe,
    /// The command set.
    pub set: CmdSet,
}

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

fn nvm(opcode: u8, nsid: u32) -> Cmd {
    Cmd { sqe: Sqe { opcode, nsid, ..Sqe::default() }, set: CmdSet::Nvm }
}

fn fs(opcode: u8, offset: u64, len: u64) -> Cmd {
    let sqe = Sqe {
        opcode,
        cdw10: offset as u32,
        cdw11: (offset >> 32) as u32,
        cdw12: len as u32,
        cdw13: (len >> 32) as u32,
        ..Sqe::default()
    };
    Cmd { sqe, set: CmdSet::Fs }
}

fn lba_range(mut c: Cmd, slba: u64, nlb: u32) -> Cmd {
    assert!((1..=65536).contains(&nlb), "nlb must be 1..=65536 (NVMe carries it 0-based in 16 bits), got {nlb}");
    c.sqe.cdw10 = slba as u32;
    c.sqe.cdw11 = (slba >> 32) as u32;
    c.sqe.cdw12 = nlb - 1;
    c
}

impl Cmd {
    /// NVM Read of `nlb` logical blocks (1..=65536) starting at `slba`.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536: the count does not fit the command.
    pub fn read(nsid: u32, slba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::READ, nsid), slba, nlb)
    }
    /// NVM Write of `nlb` logical blocks (1..=65536) starting at `slba`.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536.
    pub fn write(nsid: u32, slba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::WRITE, nsid), slba, nlb)
    }
    /// NVM Write Zeroes of `nlb` logical blocks (1..=65536) starting at `slba`; no data.
    ///
    /// # Panics
    /// When `nlb` is 0 or above 65536.
    pub fn write_zeroes(nsid: u32, slba: u64, nlb: u32) -> Cmd {
        lba_range(nvm(opc::WRITE_ZEROES, nsid), slba, nlb)
    }
    /// NVM Flush.
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
    pub fn fua(mut self) -> Cmd {
        self.sqe.cdw12 |= 1 << 30;
        self
    }

    /// File set: read `len` bytes at byte `offset`.
    pub fn fs_read(offset: u64, len: u64) -> Cmd {
        fs(opc::FS_READ, offset, len)
    }
    /// File set: write `len` bytes at byte `offset`.
    pub fn fs_write(offset: u64, len: u64) -> Cmd {
        fs(opc::FS_WRITE, offset, len)
    }
    /// File set: flush written data to stable storage (fdatasync).
    pub fn fs_flush() -> Cmd {
        fs(opc::FS_FLUSH, 0, 0)
    }
    /// File set: trim `len` bytes at byte `offset` (hole punch on files, discard on
    /// block devices); reads of the range return zeroes afterwards.
    pub fn fs_trim(offset: u64, len: u64) -> Cmd {
        fs(opc::FS_TRIM, offset, len)
    }

    /// Any I/O command from a raw submission entry.
    pub fn io(sqe: Sqe) -> Cmd {
        Cmd { sqe, set: CmdSet::Nvm }
    }
    /// Any admin command from a raw submission entry.
    pub fn admin(sqe: Sqe) -> Cmd {
        Cmd { sqe, set: CmdSet::Admin }
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
            (CmdSet::Nvm, o) => return format!("I/O opcode {o:#04x}"),
            (CmdSet::Admin, o) => return format!("admin opcode {o:#04x}"),
            (CmdSet::Fs, o) => return format!("file opcode {o:#04x}"),
        };
        name.to_string()
    }

    /// Byte offset of a file-set command.
    pub fn fs_offset(&self) -> u64 {
        self.sqe.cdw10 as u64 | (self.sqe.cdw11 as u64) << 32
    }
    /// Byte length of a file-set command.
    pub fn fs_len(&self) -> u64 {
        self.sqe.cdw12 as u64 | (self.sqe.cdw13 as u64) << 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
