//! Building library commands from the Python API's operations.
//!
//! Byte-addressed operations (`read`, `write`, `trim`, `flush`) use the library's file
//! command set, which every interface except NVMe passthrough serves. On passthrough
//! interfaces (`sync=nvme`, `async=io_uring_cmd`, or an NVMe generic char device) they
//! become NVM commands instead, which needs offsets and lengths in whole LBAs.

use crate::errors;
use ioswitch::cmd::DsmRange;
use ioswitch::{AsyncIface, Cmd, DevKind, Device, SyncIface};
use pyo3::prelude::*;

/// Most LBAs one NVM read/write/write-zeroes command carries.
pub const MAX_NLB: u64 = 65536;

/// An operation of the Python API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read bytes at a byte offset.
    Read,
    /// Write bytes at a byte offset.
    Write,
    /// Flush written data to stable storage.
    Flush,
    /// Discard a byte range.
    Trim,
    /// Read LBAs.
    ReadLba,
    /// Write LBAs.
    WriteLba,
    /// Write zeroes to LBAs.
    WriteZeroes,
}

/// Every operation name `Queue.submit` accepts.
pub const OP_NAMES: &str = "read, write, flush, trim, read_lba, write_lba, write_zeroes";

impl Op {
    /// Parses an operation name.
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "read" => Op::Read,
            "write" => Op::Write,
            "flush" => Op::Flush,
            "trim" => Op::Trim,
            "read_lba" => Op::ReadLba,
            "write_lba" => Op::WriteLba,
            "write_zeroes" => Op::WriteZeroes,
            _ => return None,
        })
    }

    /// The name, as `parse` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
            Op::ReadLba => "read_lba",
            Op::WriteLba => "write_lba",
            Op::WriteZeroes => "write_zeroes",
        }
    }

    /// True for operations that read data into a buffer.
    pub fn reads(self) -> bool {
        matches!(self, Op::Read | Op::ReadLba)
    }
}

/// Whether commands on `dev` through the sync (`sync = true`) or async interface must be
/// NVM commands rather than file-set commands.
pub fn passthrough(dev: &Device, sync: bool) -> bool {
    let i = dev.interfaces();
    matches!(dev.ident().kind, DevKind::NvmeChar | DevKind::NvmePci)
        || if sync { i.sync == Some(SyncIface::Nvme) } else { i.r#async == Some(AsyncIface::IoUringCmd) }
}

fn bad(py: Python<'_>, dev: &Device, msg: String) -> PyErr {
    errors::bad_request(py, dev.uri(), msg)
}

/// An NVM command on `nlb` LBAs from `slba`, for the LBA operations.
pub fn lba_cmd(py: Python<'_>, dev: &Device, op: Op, slba: u64, nlb: u64) -> PyResult<Cmd> {
    if nlb == 0 || nlb > MAX_NLB {
        return Err(bad(py, dev, format!("{}: nlb={nlb}: one command carries 1..={MAX_NLB} LBAs", op.name())));
    }
    let nsid = dev.ident().nsid;
    let n = nlb as u32;
    Ok(match op {
        Op::Read | Op::ReadLba => Cmd::read(nsid, slba, n),
        Op::Write | Op::WriteLba => Cmd::write(nsid, slba, n),
        Op::WriteZeroes => Cmd::write_zeroes(nsid, slba, n),
        Op::Flush => Cmd::flush(nsid),
        Op::Trim => return Err(bad(py, dev, "trim is byte addressed; use trim(offset, length)".into())),
    })
}

/// The command for a byte-addressed operation, plus the data a passthrough trim needs
/// (its DSM range list).
pub fn byte_cmd(
    py: Python<'_>,
    dev: &Device,
    passthrough: bool,
    op: Op,
    offset: u64,
    len: u64,
) -> PyResult<(Cmd, Option<ioswitch::Buffer>)> {
    if !passthrough {
        let cmd = match op {
            Op::Read | Op::ReadLba => Cmd::fs_read(offset, len),
            Op::Write | Op::WriteLba => Cmd::fs_write(offset, len),
            Op::Trim => Cmd::fs_trim(offset, len),
            Op::Flush => Cmd::fs_flush(),
            Op::WriteZeroes => return Err(bad(py, dev, "write_zeroes is LBA addressed".into())),
        };
        return Ok((cmd, None));
    }
    let nsid = dev.ident().nsid;
    if op == Op::Flush {
        return Ok((Cmd::flush(nsid), None));
    }
    let lba = u64::from(dev.geometry().lba_size.max(1));
    for (what, value) in [("offset", offset), ("length", len)] {
        if value % lba != 0 {
            return Err(errors::to_py(
                py,
                ioswitch::Error::Misaligned { dev: dev.uri().to_string(), what, value, align: lba },
            ));
        }
    }
    let (slba, nlb) = (offset / lba, len / lba);
    if op != Op::Trim {
        return Ok((lba_cmd(py, dev, op, slba, nlb)?, None));
    }
    let nlb = u32::try_from(nlb)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| bad(py, dev, format!("trim: {len} bytes: one range carries 1..=2^32-1 LBAs")))?;
    let range = DsmRange { cattr: 0, nlb, slba }.to_bytes();
    let mut buf = dev.alloc(range.len()).map_err(|e| errors::to_py(py, e))?;
    buf.copy_from_slice(&range);
    Ok((Cmd::dsm(nsid, 1, true), Some(buf)))
}

/// Refuses, before a buffer is allocated for it, a read longer than one command may
/// carry (the library would refuse it too, but only after the allocation).
pub fn check_len(py: Python<'_>, dev: &Device, op: Op, len: u64) -> PyResult<()> {
    let max = dev.geometry().max_transfer;
    if max > 0 && len > max {
        return Err(bad(
            py,
            dev,
            format!("{}: {len} bytes exceed the device's max transfer of {max} bytes; split the request", op.name()),
        ));
    }
    Ok(())
}
