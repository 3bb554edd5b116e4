//! The library's error type: every variant says what was being done, to what, and why.

use crate::dev::DevKind;
use crate::spec::Status;
use std::io;

/// Result with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ioswitch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A device URI that does not name anything ioswitch can open.
    #[error("bad device URI {uri:?}: {why}")]
    BadUri {
        /// The URI as given.
        uri: String,
        /// What is wrong with it.
        why: String,
    },
    /// A bad option in an option string or struct.
    #[error("bad option {key:?}: {why}")]
    BadOpt {
        /// The option's name (or the whole item when it has no name).
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// Opening, probing or setting up a device failed in the OS.
    #[error("{dev}: {what}: {source}")]
    Os {
        /// The device (path or URI).
        dev: String,
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An interface was asked for that cannot serve this kind of device.
    #[error("{dev} is a {kind}: interface {iface} cannot serve it: {why}")]
    Unsupported {
        /// The device.
        dev: String,
        /// Its kind.
        kind: DevKind,
        /// The interface, as `role=name` (`async=io_uring`).
        iface: String,
        /// Why not.
        why: String,
    },
    /// A request that reaches past the end of the device; nothing was done.
    #[error(
        "{dev}: {what} {} is out of range: the device ends at {limit} ({unit})",
        if *end == u64::MAX { format!("from {start} on, past 2^64 {unit},") } else { format!("[{start}, {end})") }
    )]
    OutOfRange {
        /// The device.
        dev: String,
        /// The request.
        what: &'static str,
        /// First unit touched.
        start: u64,
        /// One past the last unit touched; `u64::MAX` where that is beyond 64 bits.
        end: u64,
        /// Size of the device in the same unit.
        limit: u64,
        /// `"LBAs"` or `"bytes"`.
        unit: &'static str,
    },
    /// Direct I/O needs aligned memory, offsets and lengths; nothing was done.
    #[error("{dev}: direct I/O needs {what} aligned to {align} bytes, got {value:#x}")]
    Misaligned {
        /// The device.
        dev: String,
        /// `"buffer address"`, `"buffer length"`, `"offset"` or `"length"`.
        what: &'static str,
        /// The value that is not aligned.
        value: u64,
        /// The alignment required.
        align: u64,
    },
    /// The data buffers are smaller than the command's transfer; nothing was done.
    #[error("{dev}: {what} moves {need} bytes but its data (buffers or caller memory) holds only {have}")]
    BufferSize {
        /// The device.
        dev: String,
        /// The command.
        what: &'static str,
        /// Bytes the command transfers.
        need: u64,
        /// Bytes in the buffers given.
        have: u64,
    },
    /// A command the chosen interface cannot carry, or one no interface runs on this
    /// device as it was opened (`iface` is then `"any"`); nothing was done.
    #[error(
        "{dev}: {}: {why}",
        if *iface == "any" { format!("{what} refused") } else { format!("{iface} cannot run {what}") }
    )]
    BadCommand {
        /// The device.
        dev: String,
        /// The interface; `"any"` for a refusal every interface makes (a read-only
        /// device, a zero-length transfer, …).
        iface: &'static str,
        /// The command (opcode and set).
        what: String,
        /// Why not.
        why: String,
    },
    /// A command that may write, refused because the device holds data another user
    /// relies on: it (a partition of it, or its disk) is mounted, swapped on or held by
    /// another kernel user. Nothing was done; `allow_mounted_write=1` lifts the guard.
    #[error(
        "{dev}: {what} refused: {why}; writing there could destroy that data (allow_mounted_write=1 overrides this)"
    )]
    InUse {
        /// The device.
        dev: String,
        /// The command.
        what: String,
        /// Who uses the device: the mount point, swap area or holder.
        why: String,
    },
    /// The queue already holds as many commands as its depth; retry after a poke.
    #[error("queue full: {depth} commands outstanding")]
    Busy {
        /// The queue depth.
        depth: u32,
    },
    /// The command ran and the device (or the OS) said it failed.
    #[error("{dev}: {what} failed: {status}")]
    Command {
        /// The device.
        dev: String,
        /// The command.
        what: String,
        /// NVMe status, with the errno when the OS gave one.
        status: Status,
    },
    /// Moving a PCI function to another kernel driver (`ioswitch driver bind`) was refused
    /// before anything was changed, or failed; the reason says which, and what to do.
    #[error("PCI {addr}: binding to {driver} {why}")]
    Bind {
        /// The PCI address.
        addr: String,
        /// The driver asked for (`vfio-pci`, `uio_pci_generic`, `nvme`).
        driver: &'static str,
        /// `refused: …` or `failed: …`, with the reason.
        why: String,
        /// The errno that says the same (EPERM, ENODEV, EBUSY, ENOMEM, ENOENT, …).
        errno: i32,
    },
    /// A failure inside the queue machinery (a syscall on the ring, a dead worker thread).
    #[error("{dev}: {iface} queue: {what}: {source}")]
    Queue {
        /// The device.
        dev: String,
        /// The interface.
        iface: &'static str,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// The errno behind this error, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Os { source, .. } | Error::Queue { source, .. } => source.raw_os_error(),
            Error::Command { status, .. } => status.errno(),
            Error::Busy { .. } | Error::InUse { .. } => Some(libc::EBUSY),
            Error::Bind { errno, .. } => Some(*errno),
            Error::OutOfRange { .. } => Some(libc::ERANGE),
            Error::Unsupported { .. } => Some(libc::EOPNOTSUPP),
            Error::BadUri { .. }
            | Error::BadOpt { .. }
            | Error::Misaligned { .. }
            | Error::BufferSize { .. }
            | Error::BadCommand { .. } => Some(libc::EINVAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_of_range_request_shows_its_range_or_that_it_runs_past_64_bits() {
        let e = |start, end| {
            Error::OutOfRange { dev: "f.img".into(), what: "byte range", start, end, limit: 4096, unit: "bytes" }
                .to_string()
        };
        assert_eq!(e(4096, 4097), "f.img: byte range [4096, 4097) is out of range: the device ends at 4096 (bytes)");
        // A range whose end does not fit 64 bits is not shown as the empty [MAX, MAX).
        assert_eq!(
            e(u64::MAX, u64::MAX),
            "f.img: byte range from 18446744073709551615 on, past 2^64 bytes, is out of range: the device ends at \
             4096 (bytes)"
        );
    }

    #[test]
    fn a_refusal_of_every_interface_names_the_command_not_an_interface_called_any() {
        let e = |iface| {
            Error::BadCommand { dev: "f.img".into(), iface, what: "file write".into(), why: "read-only".into() }
                .to_string()
        };
        assert_eq!(e("any"), "f.img: file write refused: read-only");
        assert_eq!(e("io_uring"), "f.img: io_uring cannot run file write: read-only");
    }
}
