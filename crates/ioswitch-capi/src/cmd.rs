//! Commands: the 64-byte NVMe submission entry, the command set, and the builders.

use crate::error::{fail, guard};
use ioswitch_rs::cmd::{opc, CmdSet};
use ioswitch_rs::{Cmd, Sqe};
use std::ffi::c_int;

/// Command set: NVM (and ZNS) I/O commands, LBA addressed.
pub const IOSWITCH_SET_NVM: u32 = 0;
/// Command set: admin commands (identify, log pages, features); run with
/// `ioswitch_pass_admin`.
pub const IOSWITCH_SET_ADMIN: u32 = 1;
/// Command set: ioswitch's byte-addressed file commands (CDW10-11 = byte offset,
/// CDW12-13 = byte length), served by every interface that is not NVMe passthrough.
pub const IOSWITCH_SET_FS: u32 = 2;

/// Opcode: NVM Flush.
pub const IOSWITCH_OPC_FLUSH: u8 = 0x00;
/// Opcode: NVM Write.
pub const IOSWITCH_OPC_WRITE: u8 = 0x01;
/// Opcode: NVM Read.
pub const IOSWITCH_OPC_READ: u8 = 0x02;
/// Opcode: NVM Write Zeroes.
pub const IOSWITCH_OPC_WRITE_ZEROES: u8 = 0x08;
/// Opcode: NVM Dataset Management.
pub const IOSWITCH_OPC_DSM: u8 = 0x09;
/// Opcode: file set flush (fdatasync).
pub const IOSWITCH_OPC_FS_FLUSH: u8 = 0xF0;
/// Opcode: file set write.
pub const IOSWITCH_OPC_FS_WRITE: u8 = 0xF1;
/// Opcode: file set read.
pub const IOSWITCH_OPC_FS_READ: u8 = 0xF2;
/// Opcode: file set trim (hole punch / discard).
pub const IOSWITCH_OPC_FS_TRIM: u8 = 0xF9;

/// An NVMe submission queue entry: exactly 64 bytes, laid out as in the NVMe base
/// specification ("Common Command Format"), so it may be filled field by field or copied
/// from/to 64 raw bytes with memcpy. `cid` and `dptr` are set by the interface that
/// carries the command from the buffers given at submission; leave them 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ioswitch_sqe {
    /// Command opcode (CDW0 bits 7:0).
    pub opcode: u8,
    /// Fused operation and PRP/SGL selection (CDW0 bits 15:8).
    pub flags: u8,
    /// Command identifier (CDW0 bits 31:16); set by the interface.
    pub cid: u16,
    /// Namespace identifier.
    pub nsid: u32,
    /// Command dword 2.
    pub cdw2: u32,
    /// Command dword 3.
    pub cdw3: u32,
    /// Metadata pointer.
    pub mptr: u64,
    /// Data pointer (PRP1/PRP2 or SGL); set by the interface.
    pub dptr: [u64; 2],
    /// Command dword 10.
    pub cdw10: u32,
    /// Command dword 11.
    pub cdw11: u32,
    /// Command dword 12.
    pub cdw12: u32,
    /// Command dword 13.
    pub cdw13: u32,
    /// Command dword 14.
    pub cdw14: u32,
    /// Command dword 15.
    pub cdw15: u32,
}

const _: () = assert!(std::mem::size_of::<ioswitch_sqe>() == 64);

/// A command: the 64-byte submission entry, the command set it belongs to
/// (`IOSWITCH_SET_*`) and its I/O priority. Build one with the `ioswitch_cmd_*`
/// functions, or zero it and fill `sqe` by hand (raw access) and set `set`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ioswitch_cmd {
    /// The submission entry.
    pub sqe: ioswitch_sqe,
    /// The command set: `IOSWITCH_SET_NVM`, `IOSWITCH_SET_ADMIN` or `IOSWITCH_SET_FS`.
    pub set: u32,
    /// The I/O priority, the kernel's `class << 13 | level` (ioprio_set(2)); 0: none, the
    /// submitting thread's. Only `async=io_uring` and `async=libaio` carry one, on reads
    /// and writes; everywhere else a command with one is refused (-EINVAL).
    pub ioprio: u16,
    /// Reserved: 0.
    pub reserved: u16,
}

/// `From` both ways between two structs with the same fields, listed once.
macro_rules! same_fields {
    ($a:ident <-> $b:ident { $($f:ident),* $(,)? }) => {
        impl From<$a> for $b {
            fn from(s: $a) -> $b {
                $b { $($f: s.$f),* }
            }
        }
        impl From<$b> for $a {
            fn from(s: $b) -> $a {
                $a { $($f: s.$f),* }
            }
        }
    };
}

same_fields!(Sqe <-> ioswitch_sqe {
    opcode, flags, cid, nsid, cdw2, cdw3, mptr, dptr, cdw10, cdw11, cdw12, cdw13, cdw14, cdw15,
});

impl From<Cmd> for ioswitch_cmd {
    fn from(c: Cmd) -> ioswitch_cmd {
        let set = match c.set {
            CmdSet::Nvm => IOSWITCH_SET_NVM,
            CmdSet::Admin => IOSWITCH_SET_ADMIN,
            CmdSet::Fs => IOSWITCH_SET_FS,
        };
        ioswitch_cmd { sqe: c.sqe.into(), set, ioprio: c.ioprio, reserved: 0 }
    }
}

// `ioswitch_cmd` and the library's `Cmd` have one layout (both `repr(C)`: the 64-byte
// entry, then the set as a 32-bit value whose valid values are `CmdSet`'s discriminants),
// which lets `to_cmd` lend a caller's command to the library without copying it.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<ioswitch_sqe>() == size_of::<Sqe>() && align_of::<ioswitch_sqe>() == align_of::<Sqe>());
    assert!(offset_of!(ioswitch_sqe, opcode) == offset_of!(Sqe, opcode));
    assert!(offset_of!(ioswitch_sqe, flags) == offset_of!(Sqe, flags));
    assert!(offset_of!(ioswitch_sqe, cid) == offset_of!(Sqe, cid));
    assert!(offset_of!(ioswitch_sqe, nsid) == offset_of!(Sqe, nsid));
    assert!(offset_of!(ioswitch_sqe, cdw2) == offset_of!(Sqe, cdw2));
    assert!(offset_of!(ioswitch_sqe, cdw3) == offset_of!(Sqe, cdw3));
    assert!(offset_of!(ioswitch_sqe, mptr) == offset_of!(Sqe, mptr));
    assert!(offset_of!(ioswitch_sqe, dptr) == offset_of!(Sqe, dptr));
    assert!(offset_of!(ioswitch_sqe, cdw10) == offset_of!(Sqe, cdw10));
    assert!(offset_of!(ioswitch_sqe, cdw11) == offset_of!(Sqe, cdw11));
    assert!(offset_of!(ioswitch_sqe, cdw12) == offset_of!(Sqe, cdw12));
    assert!(offset_of!(ioswitch_sqe, cdw13) == offset_of!(Sqe, cdw13));
    assert!(offset_of!(ioswitch_sqe, cdw14) == offset_of!(Sqe, cdw14));
    assert!(offset_of!(ioswitch_sqe, cdw15) == offset_of!(Sqe, cdw15));
    assert!(size_of::<ioswitch_cmd>() == size_of::<Cmd>() && align_of::<ioswitch_cmd>() == align_of::<Cmd>());
    assert!(offset_of!(ioswitch_cmd, sqe) == offset_of!(Cmd, sqe));
    assert!(offset_of!(ioswitch_cmd, set) == offset_of!(Cmd, set));
    assert!(offset_of!(ioswitch_cmd, ioprio) == offset_of!(Cmd, ioprio));
    assert!(size_of::<CmdSet>() == size_of::<u32>());
    assert!(CmdSet::Nvm as u32 == IOSWITCH_SET_NVM);
    assert!(CmdSet::Admin as u32 == IOSWITCH_SET_ADMIN);
    assert!(CmdSet::Fs as u32 == IOSWITCH_SET_FS);
};

/// The library command of a C command, lent without a copy; `Err` (with the message
/// recorded) for an unknown command set. Callers that need an owned `Cmd` copy it.
#[inline(always)]
pub(crate) fn to_cmd<'a>(c: &'a ioswitch_cmd, func: &str) -> Result<&'a Cmd, c_int> {
    if c.set > IOSWITCH_SET_FS {
        return Err(bad_set(func, c.set));
    }
    // SAFETY: the two types have the same size, alignment and field offsets (checked at
    // compile time above), every bit pattern is a valid `Sqe` (integers only) and a valid
    // `ioprio` and reserved `u16` (the C struct's last four bytes are those two fields,
    // no padding, in both), and `set` is 0, 1 or 2 (checked just now), a valid `CmdSet`
    // (`repr(u32)` with those values).
    // The borrow keeps `c`'s lifetime, and neither type has interior mutability.
    Ok(unsafe { &*(c as *const ioswitch_cmd).cast::<Cmd>() })
}

#[cold]
#[inline(never)]
fn bad_set(func: &str, set: u32) -> c_int {
    fail(
        libc::EINVAL,
        format!("{func}: cmd->set is {set}; use IOSWITCH_SET_NVM (0), IOSWITCH_SET_ADMIN (1) or IOSWITCH_SET_FS (2)"),
    )
}

/// Writes `cmd` to `out` after the null check every builder does.
///
/// # Safety
/// `out` is null or valid for writing one `ioswitch_cmd`.
unsafe fn emit(func: &str, out: *mut ioswitch_cmd, cmd: impl FnOnce() -> Result<Cmd, String>) -> c_int {
    guard(func, -libc::EIO, || {
        if out.is_null() {
            return fail(libc::EINVAL, format!("{func}: out is NULL"));
        }
        match cmd() {
            Ok(c) => {
                // SAFETY: out is non-null and, by the caller's contract, valid for writes.
                unsafe { out.write(c.into()) };
                0
            }
            Err(why) => fail(libc::EINVAL, format!("{func}: {why}")),
        }
    })
}

fn check_nlb(nlb: u32) -> Result<(), String> {
    if (1..=65536).contains(&nlb) {
        Ok(())
    } else {
        Err(format!("nlb {nlb}: an NVM command carries 1..=65536 logical blocks"))
    }
}

/// Builds an NVM Read of `nlb` logical blocks (1..=65536) at `slba`.
/// Returns 0, or -EINVAL when `nlb` is out of range or `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_read(nsid: u32, slba: u64, nlb: u32, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_read", out, || check_nlb(nlb).map(|_| Cmd::read(nsid, slba, nlb))) }
}

/// Builds an NVM Write of `nlb` logical blocks (1..=65536) at `slba`.
/// Returns 0, or -EINVAL when `nlb` is out of range or `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_write(nsid: u32, slba: u64, nlb: u32, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_write", out, || check_nlb(nlb).map(|_| Cmd::write(nsid, slba, nlb))) }
}

/// Builds an NVM Write Zeroes of `nlb` logical blocks (1..=65536) at `slba` (no data).
/// Returns 0, or -EINVAL when `nlb` is out of range or `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_write_zeroes(nsid: u32, slba: u64, nlb: u32, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_write_zeroes", out, || check_nlb(nlb).map(|_| Cmd::write_zeroes(nsid, slba, nlb))) }
}

/// Builds an NVM Flush. Returns 0, or -EINVAL when `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_flush(nsid: u32, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_flush", out, || Ok(Cmd::flush(nsid))) }
}

/// Builds an NVM Dataset Management command with `nr` ranges (1..=256); its data buffer
/// holds the ranges, 16 bytes each (context attributes u32, length in LBAs u32, starting
/// LBA u64, little-endian). `deallocate` non-zero sets AD (trim).
/// Returns 0, or -EINVAL when `nr` is out of range or `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_dsm(nsid: u32, nr: u32, deallocate: bool, out: *mut ioswitch_cmd) -> c_int {
    let build = || {
        if (1..=256).contains(&nr) {
            Ok(Cmd::dsm(nsid, nr, deallocate))
        } else {
            Err(format!("nr {nr}: Dataset Management carries 1..=256 ranges"))
        }
    };
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_dsm", out, build) }
}

/// Sets Force Unit Access on an NVM read or write built before.
/// Returns 0, or -EINVAL for a NULL `cmd` or a command that is not an NVM read or write.
///
/// # Safety
/// `cmd` must be NULL or point to a valid, writable `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_fua(cmd: *mut ioswitch_cmd) -> c_int {
    guard("ioswitch_cmd_fua", -libc::EIO, || {
        // SAFETY: cmd is null or valid and writable (caller contract).
        let Some(c) = (unsafe { cmd.as_mut() }) else {
            return fail(libc::EINVAL, "ioswitch_cmd_fua: cmd is NULL");
        };
        if c.set != IOSWITCH_SET_NVM || !matches!(c.sqe.opcode, opc::READ | opc::WRITE) {
            return fail(
                libc::EINVAL,
                format!(
                    "ioswitch_cmd_fua: FUA applies to NVM read and write, not set {} opcode {:#04x}",
                    c.set, c.sqe.opcode
                ),
            );
        }
        c.sqe.cdw12 |= 1 << 30;
        0
    })
}

/// Builds a file-set read of `len` bytes at byte `offset`.
/// Returns 0, or -EINVAL when `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_fs_read(offset: u64, len: u64, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_fs_read", out, || Ok(Cmd::fs_read(offset, len))) }
}

/// Builds a file-set write of `len` bytes at byte `offset`.
/// Returns 0, or -EINVAL when `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_fs_write(offset: u64, len: u64, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_fs_write", out, || Ok(Cmd::fs_write(offset, len))) }
}

/// Builds a file-set flush (fdatasync). Returns 0, or -EINVAL when `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_fs_flush(out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_fs_flush", out, || Ok(Cmd::fs_flush())) }
}

/// Builds a file-set trim of `len` bytes at byte `offset` (hole punch on files, discard
/// on block devices). Returns 0, or -EINVAL when `out` is NULL.
///
/// # Safety
/// `out` must be NULL or point to writable memory for one `struct ioswitch_cmd`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cmd_fs_trim(offset: u64, len: u64, out: *mut ioswitch_cmd) -> c_int {
    // SAFETY: forwarded caller contract on `out`.
    unsafe { emit("ioswitch_cmd_fs_trim", out, || Ok(Cmd::fs_trim(offset, len))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_match_the_rust_api() {
        let mut c = ioswitch_cmd::default();
        // SAFETY: c is a valid out location.
        assert_eq!(unsafe { ioswitch_cmd_write(1, 77, 8, &mut c) }, 0);
        assert_eq!(*to_cmd(&c, "t").unwrap(), Cmd::write(1, 77, 8));
        // SAFETY: as above.
        assert_eq!(unsafe { ioswitch_cmd_fua(&mut c) }, 0);
        assert!(to_cmd(&c, "t").unwrap().is_fua());
        // SAFETY: as above.
        assert_eq!(unsafe { ioswitch_cmd_fs_read(1 << 40, 4096, &mut c) }, 0);
        assert_eq!(c.set, IOSWITCH_SET_FS);
        assert_eq!(*to_cmd(&c, "t").unwrap(), Cmd::fs_read(1 << 40, 4096));
    }

    #[test]
    fn a_command_is_lent_to_the_library_in_place() {
        let mut c: ioswitch_cmd = Cmd::write(7, 1 << 33, 16).into();
        c.sqe.cdw15 = 0xdead_beef;
        for (set, lib) in
            [(IOSWITCH_SET_NVM, CmdSet::Nvm), (IOSWITCH_SET_ADMIN, CmdSet::Admin), (IOSWITCH_SET_FS, CmdSet::Fs)]
        {
            c.set = set;
            let lent = to_cmd(&c, "t").unwrap();
            assert!(std::ptr::eq((lent as *const Cmd).cast::<u8>(), (&c as *const ioswitch_cmd).cast::<u8>()));
            assert_eq!(lent.set, lib);
            assert_eq!(ioswitch_sqe::from(lent.sqe), c.sqe);
        }
        for set in [3, 0x100, u32::MAX] {
            c.set = set;
            assert!(to_cmd(&c, "t").is_err(), "set {set}");
            assert!(crate::error::last_string().contains(&format!("cmd->set is {set}")));
        }
    }

    #[test]
    fn out_of_range_counts_are_errors_that_name_the_value() {
        let mut c = ioswitch_cmd::default();
        // SAFETY: c is a valid out location.
        assert_eq!(unsafe { ioswitch_cmd_read(1, 0, 0, &mut c) }, -libc::EINVAL);
        assert!(crate::error::last_string().contains("nlb 0"));
        // SAFETY: as above.
        assert_eq!(unsafe { ioswitch_cmd_dsm(1, 257, true, &mut c) }, -libc::EINVAL);
        assert!(crate::error::last_string().contains("nr 257"));
        // SAFETY: a null out pointer is allowed and refused.
        assert_eq!(unsafe { ioswitch_cmd_flush(1, std::ptr::null_mut()) }, -libc::EINVAL);
        c.set = 9;
        assert!(to_cmd(&c, "f").is_err());
        assert!(crate::error::last_string().contains("cmd->set is 9"));
    }

    #[test]
    fn opcodes_match_the_library() {
        assert_eq!(
            [IOSWITCH_OPC_FLUSH, IOSWITCH_OPC_WRITE, IOSWITCH_OPC_READ, IOSWITCH_OPC_WRITE_ZEROES, IOSWITCH_OPC_DSM],
            [opc::FLUSH, opc::WRITE, opc::READ, opc::WRITE_ZEROES, opc::DSM]
        );
        assert_eq!(
            [IOSWITCH_OPC_FS_FLUSH, IOSWITCH_OPC_FS_WRITE, IOSWITCH_OPC_FS_READ, IOSWITCH_OPC_FS_TRIM],
            [opc::FS_FLUSH, opc::FS_WRITE, opc::FS_READ, opc::FS_TRIM]
        );
    }

    #[test]
    fn the_entry_is_64_bytes_like_the_spec() {
        let c: ioswitch_cmd = Cmd::read(3, 5, 2).into();
        assert_eq!(std::mem::size_of_val(&c.sqe), 64);
        assert_eq!(Sqe::from(c.sqe).as_bytes()[0], opc::READ);
    }
}
