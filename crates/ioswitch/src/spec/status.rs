//! NVMe status (Status Code Type + Status Code) and the errno mapping.
//!
//! Interfaces that are not NVMe report OS errors; ioswitch maps each errno to the NVMe
//! status that means the same thing, and keeps the errno in the [`Status`] so nothing is
//! lost. The table (generic command status, SCT 0, unless noted):
//!
//! | errno | NVMe status | name |
//! |---|---|---|
//! | 0 | 0x00 | Successful Completion |
//! | EOPNOTSUPP, ENOTSUP, ENOTTY, ENOSYS | 0x01 | Invalid Command Opcode |
//! | EINVAL, EFAULT | 0x02 | Invalid Field in Command |
//! | EIO | 0x04 | Data Transfer Error |
//! | ENOMEM | 0x06 | Internal Error |
//! | ECANCELED, EINTR | 0x07 | Command Abort Requested |
//! | ENODEV, ENXIO | 0x0B | Invalid Namespace or Format |
//! | EPERM, EACCES, EBADF | 0x15 | Operation Denied |
//! | EROFS | 0x20 | Namespace is Write Protected |
//! | ERANGE, EOVERFLOW | 0x80 | LBA Out of Range |
//! | ENOSPC, EFBIG, EDQUOT | 0x81 | Capacity Exceeded |
//! | EAGAIN, EBUSY | 0x82 | Namespace Not Ready (DNR clear: retry) |
//! | EILSEQ, EBADMSG, ENODATA (the block layer's medium error) | SCT 2, 0x81 | Unrecovered Read Error |
//! | any other | 0x06 | Internal Error |
//!
//! Every mapped error except EAGAIN/EBUSY/EINTR sets Do Not Retry.

use serde::Serialize;
use std::fmt;

/// NVMe Status Code Type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Sct {
    /// 0: Generic Command Status.
    Generic,
    /// 1: Command Specific Status.
    CommandSpecific,
    /// 2: Media and Data Integrity Errors.
    Media,
    /// 3: Path Related Status.
    Path,
    /// 7: Vendor Specific.
    Vendor,
    /// Any other (reserved) value.
    Reserved(u8),
}

impl Sct {
    fn from_bits(v: u8) -> Sct {
        match v {
            0 => Sct::Generic,
            1 => Sct::CommandSpecific,
            2 => Sct::Media,
            3 => Sct::Path,
            7 => Sct::Vendor,
            x => Sct::Reserved(x),
        }
    }
}

/// The outcome of a command: the NVMe status field, plus the errno when the OS reported
/// the failure (so nothing is lost in the mapping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The NVMe status field (CQE DW3 bits 31:17, shifted down: bit 0 is SC bit 0).
    pub raw: u16,
    /// The positive errno the OS gave, or 0.
    pub errno_raw: i32,
}

impl Status {
    /// Success.
    pub const OK: Status = Status { raw: 0, errno_raw: 0 };

    /// A status from an NVMe completion entry's status word (phase bit included).
    pub fn from_cqe_status(word: u16) -> Status {
        Status { raw: word >> 1, errno_raw: 0 }
    }

    /// A status built from its parts.
    pub fn new(sct: u8, sc: u8, dnr: bool) -> Status {
        Status { raw: sc as u16 | ((sct as u16 & 7) << 8) | ((dnr as u16) << 14), errno_raw: 0 }
    }

    /// True when the command succeeded.
    #[inline]
    pub fn is_ok(&self) -> bool {
        self.raw & 0x7ff == 0 && self.errno_raw == 0
    }
    /// Status Code.
    pub fn sc(&self) -> u8 {
        self.raw as u8
    }
    /// Status Code Type.
    pub fn sct(&self) -> Sct {
        Sct::from_bits(((self.raw >> 8) & 7) as u8)
    }
    /// Command Retry Delay.
    pub fn crd(&self) -> u8 {
        ((self.raw >> 11) & 3) as u8
    }
    /// More: more status is in the error information log.
    pub fn more(&self) -> bool {
        self.raw & (1 << 13) != 0
    }
    /// Do Not Retry.
    pub fn dnr(&self) -> bool {
        self.raw & (1 << 14) != 0
    }
    /// The errno the OS gave, when the failure came from the OS.
    pub fn errno(&self) -> Option<i32> {
        (self.errno_raw != 0).then_some(self.errno_raw)
    }
    /// SCT and SC as one number (`0x0280` = Media / 0x80), as nvme-cli prints them.
    pub fn code(&self) -> u16 {
        self.raw & 0x7ff
    }

    /// The spec's name for this status, when ioswitch knows it.
    pub fn name(&self) -> &'static str {
        match (self.sct(), self.sc()) {
            (Sct::Generic, 0x00) => "Successful Completion",
            (Sct::Generic, 0x01) => "Invalid Command Opcode",
            (Sct::Generic, 0x02) => "Invalid Field in Command",
            (Sct::Generic, 0x03) => "Command ID Conflict",
            (Sct::Generic, 0x04) => "Data Transfer Error",
            (Sct::Generic, 0x05) => "Commands Aborted due to Power Loss Notification",
            (Sct::Generic, 0x06) => "Internal Error",
            (Sct::Generic, 0x07) => "Command Abort Requested",
            (Sct::Generic, 0x08) => "Command Aborted due to SQ Deletion",
            (Sct::Generic, 0x0B) => "Invalid Namespace or Format",
            (Sct::Generic, 0x0D) => "Invalid SGL Segment Descriptor",
            (Sct::Generic, 0x15) => "Operation Denied",
            (Sct::Generic, 0x20) => "Namespace is Write Protected",
            (Sct::Generic, 0x80) => "LBA Out of Range",
            (Sct::Generic, 0x81) => "Capacity Exceeded",
            (Sct::Generic, 0x82) => "Namespace Not Ready",
            (Sct::CommandSpecific, 0x01) => "Invalid Queue Identifier",
            (Sct::CommandSpecific, 0x02) => "Invalid Queue Size",
            (Sct::CommandSpecific, 0x0B) => "Invalid Format",
            (Sct::CommandSpecific, 0x0D) => "Feature Identifier Not Saveable",
            (Sct::CommandSpecific, 0x0E) => "Feature Not Changeable",
            (Sct::CommandSpecific, 0x0F) => "Feature Not Namespace Specific",
            (Sct::CommandSpecific, 0x80) => "Conflicting Attributes",
            (Sct::CommandSpecific, 0x82) => "Attempted Write to Read Only Range",
            (Sct::CommandSpecific, 0xB8) => "Zone Boundary Error",
            (Sct::CommandSpecific, 0xB9) => "Zone Is Full",
            (Sct::CommandSpecific, 0xBA) => "Zone Is Read Only",
            (Sct::CommandSpecific, 0xBB) => "Zone Is Offline",
            (Sct::CommandSpecific, 0xBC) => "Zone Invalid Write",
            (Sct::CommandSpecific, 0xBD) => "Too Many Active Zones",
            (Sct::CommandSpecific, 0xBE) => "Too Many Open Zones",
            (Sct::CommandSpecific, 0xBF) => "Invalid Zone State Transition",
            (Sct::Media, 0x80) => "Write Fault",
            (Sct::Media, 0x81) => "Unrecovered Read Error",
            (Sct::Media, 0x82) => "End-to-end Guard Check Error",
            (Sct::Media, 0x83) => "End-to-end Application Tag Check Error",
            (Sct::Media, 0x84) => "End-to-end Reference Tag Check Error",
            (Sct::Media, 0x85) => "Compare Failure",
            (Sct::Media, 0x86) => "Access Denied",
            (Sct::Media, 0x87) => "Deallocated or Unwritten Logical Block",
            _ => "Unknown Status",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (sct={:#x}, sc={:#04x}", self.name(), (self.raw >> 8) & 7, self.sc())?;
        if self.dnr() {
            f.write_str(", dnr")?;
        }
        if self.more() {
            f.write_str(", more")?;
        }
        if let Some(e) = self.errno() {
            write!(f, ", errno {e}: {}", std::io::Error::from_raw_os_error(e))?;
        }
        f.write_str(")")
    }
}

/// Maps a positive errno to the NVMe status with the same meaning (see the module table);
/// the errno stays in the result.
pub fn errno_to_status(errno: i32) -> Status {
    use libc::*;
    if errno == 0 {
        return Status::OK;
    }
    let (sct, sc, dnr) = match errno {
        EOPNOTSUPP | ENOTTY | ENOSYS => (0, 0x01, true),
        EINVAL | EFAULT => (0, 0x02, true),
        EIO => (0, 0x04, true),
        ENOMEM => (0, 0x06, true),
        ECANCELED => (0, 0x07, true),
        EINTR => (0, 0x07, false),
        ENODEV | ENXIO => (0, 0x0B, true),
        EPERM | EACCES | EBADF => (0, 0x15, true),
        EROFS => (0, 0x20, true),
        ERANGE | EOVERFLOW => (0, 0x80, true),
        ENOSPC | EFBIG | EDQUOT => (0, 0x81, true),
        EAGAIN | EBUSY => (0, 0x82, false),
        EILSEQ | EBADMSG | ENODATA => (2, 0x81, true),
        _ => (0, 0x06, true),
    };
    Status { errno_raw: errno, ..Status::new(sct, sc, dnr) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_decode_from_a_completion_word() {
        // SCT 1, SC 0xBC (Zone Invalid Write), DNR, phase bit set.
        let word: u16 = ((1 << 8 | 0xBC | 1 << 14) << 1) | 1;
        let s = Status::from_cqe_status(word);
        assert_eq!(s.sct(), Sct::CommandSpecific);
        assert_eq!(s.sc(), 0xBC);
        assert!(s.dnr());
        assert!(!s.is_ok());
        assert_eq!(s.code(), 0x1BC);
        assert_eq!(s.name(), "Zone Invalid Write");
        assert!(s.to_string().contains("Zone Invalid Write"));
    }

    #[test]
    fn errno_maps_to_nvme_status_and_stays_reachable() {
        let s = errno_to_status(libc::EINVAL);
        assert_eq!((s.sct(), s.sc()), (Sct::Generic, 0x02));
        assert_eq!(s.errno(), Some(libc::EINVAL));
        assert!(s.dnr());
        let s = errno_to_status(libc::EAGAIN);
        assert_eq!(s.sc(), 0x82);
        assert!(!s.dnr());
        assert_eq!(errno_to_status(libc::ENOSPC).sc(), 0x81);
        assert_eq!(errno_to_status(libc::EILSEQ).sct(), Sct::Media);
        // A medium error of a block device (BLK_STS_MEDIUM) reaches user space as ENODATA.
        assert_eq!(errno_to_status(libc::ENODATA).code(), 0x281);
        assert!(errno_to_status(0).is_ok());
        assert!(!errno_to_status(libc::ENOENT).is_ok());
    }
}
