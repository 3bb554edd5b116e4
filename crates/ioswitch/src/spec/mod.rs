//! NVMe specification types: the 64-byte submission entry, the 16-byte completion entry
//! and the status field, plus the mapping from Linux errno values to NVMe status.

/// A byte of named flag bits (the SMART log's Critical Warning, a zone's attributes): the
/// struct, with the byte as reported in `raw` and one `bool` a named bit, and its decoder
/// `from_byte`.
macro_rules! flag_byte {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* $field:ident = $bit:expr,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct $name {
            /// The byte as reported.
            pub raw: u8,
            $($(#[$fmeta])* pub $field: bool,)*
        }

        impl $name {
            /// Decodes the byte.
            pub fn from_byte(raw: u8) -> $name {
                $name { raw, $($field: raw & $bit != 0,)* }
            }
        }
    };
}

pub mod feat;
pub mod idfy;
pub mod log;
mod status;
pub mod zns;

use serde::Serialize;
pub use status::{errno_to_status, Sct, Status};

/// A page (or structure within one: an Identify page, a log page, a zone report) shorter
/// than the fields being parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortPage {
    /// What was being parsed (`"Identify Controller"`, `"SMART / Health Information log"`).
    pub what: &'static str,
    /// Bytes needed.
    pub need: usize,
    /// Bytes given.
    pub have: usize,
}

impl std::fmt::Display for ShortPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} bytes given, the fields need {}", self.what, self.have, self.need)
    }
}

impl std::error::Error for ShortPage {}

/// Refuses a page shorter than the `need` bytes the fields of `what` take.
pub(crate) fn need(what: &'static str, b: &[u8], need: usize) -> Result<(), ShortPage> {
    if b.len() < need {
        return Err(ShortPage { what, need, have: b.len() });
    }
    Ok(())
}

/// Little-endian field reader over a page checked to be long enough (bytes past its end
/// read as 0).
pub(crate) struct Page<'a>(&'a [u8]);

impl<'a> Page<'a> {
    /// `b`, when it holds the `len` bytes the fields of `what` take.
    pub(crate) fn new(b: &'a [u8], what: &'static str, len: usize) -> Result<Page<'a>, ShortPage> {
        need(what, b, len)?;
        Ok(Page(b))
    }
    pub(crate) fn bytes<const N: usize>(&self, off: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(s) = self.0.get(off..off + N) {
            out.copy_from_slice(s);
        }
        out
    }
    pub(crate) fn u8(&self, off: usize) -> u8 {
        self.0.get(off).copied().unwrap_or(0)
    }
    pub(crate) fn u16(&self, off: usize) -> u16 {
        u16::from_le_bytes(self.bytes(off))
    }
    pub(crate) fn u32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.bytes(off))
    }
    pub(crate) fn u64(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.bytes(off))
    }
    pub(crate) fn u128(&self, off: usize) -> u128 {
        u128::from_le_bytes(self.bytes(off))
    }
    /// An ASCII field, trailing spaces and NULs removed.
    pub(crate) fn str(&self, off: usize, len: usize) -> String {
        let s = self.0.get(off..off + len).unwrap_or(&[]);
        let end = s.iter().rposition(|&c| c != b' ' && c != 0).map_or(0, |i| i + 1);
        String::from_utf8_lossy(&s[..end]).into_owned()
    }
}

/// An NVMe submission queue entry (NVMe base spec, "Common Command Format"): 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sqe {
    /// Command opcode (CDW0 bits 7:0).
    pub opcode: u8,
    /// Fused operation and PRP/SGL selection (CDW0 bits 15:8).
    pub flags: u8,
    /// Command identifier (CDW0 bits 31:16); set by the interface, not the user.
    pub cid: u16,
    /// Namespace identifier.
    pub nsid: u32,
    /// Command dword 2.
    pub cdw2: u32,
    /// Command dword 3.
    pub cdw3: u32,
    /// Metadata pointer.
    pub mptr: u64,
    /// Data pointer (PRP1/PRP2 or SGL); set by the interface from the buffers.
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

/// An NVMe completion queue entry: 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cqe {
    /// Command specific result (DW0 and DW1).
    pub result: u64,
    /// Submission queue head pointer.
    pub sqhd: u16,
    /// Submission queue identifier.
    pub sqid: u16,
    /// Command identifier.
    pub cid: u16,
    /// Phase tag (bit 0) and status field (bits 15:1).
    pub status: u16,
}

const _: () = assert!(std::mem::size_of::<Sqe>() == 64);
const _: () = assert!(std::mem::size_of::<Cqe>() == 16);

impl Sqe {
    /// The starting LBA of an NVM command (CDW10 and CDW11).
    #[inline]
    pub fn slba(&self) -> u64 {
        self.cdw10 as u64 | (self.cdw11 as u64) << 32
    }

    /// Sets the starting LBA of an NVM command (CDW10 and CDW11), e.g. to reuse one
    /// command for a stream of reads.
    #[inline]
    pub fn set_slba(&mut self, slba: u64) {
        self.cdw10 = slba as u32;
        self.cdw11 = (slba >> 32) as u32;
    }

    /// The number of logical blocks of an NVM read/write/write-zeroes command (CDW12
    /// bits 15:0 hold the 0-based count; this returns the 1-based count).
    #[inline]
    pub fn nlb(&self) -> u32 {
        (self.cdw12 & 0xffff) + 1
    }

    /// Views the entry as its 64 raw bytes (little-endian host assumed, as NVMe).
    pub fn as_bytes(&self) -> &[u8; 64] {
        crate::sys::sqe_bytes(self)
    }

    /// Builds an entry from 64 raw bytes.
    pub fn from_bytes(bytes: &[u8; 64]) -> Sqe {
        crate::sys::sqe_from_bytes(bytes)
    }
}
