//! ioswitch: one API for NVMe and block/file I/O over every Linux I/O interface.
//!
//! Open a device with [`Device::open`], naming the interfaces in [`Opts`]; allocate
//! buffers with [`Device::alloc`]; build commands with [`Cmd`]; run them synchronously
//! with [`Device::pass`] or asynchronously through a [`Queue`]. Switching the interface
//! (psync, io_uring, libaio, POSIX aio, a thread pool, …) is an option, never a code
//! change.
//!
//! ```no_run
//! use ioswitch::{Cmd, Device, Opts};
//! let dev = Device::open("/tmp/data.img", &"async=io_uring,create=1,size=1MiB".parse()?)?;
//! let mut buf = dev.alloc(4096)?;
//! buf.fill(0xab);
//! let nsid = dev.ident().nsid;
//! dev.pass(&Cmd::write(nsid, 0, 8), std::slice::from_mut(&mut buf))?;
//! let mut q = dev.queue(16)?;
//! q.submit(&Cmd::read(nsid, 0, 8), buf.into(), 7).map_err(|r| r.error)?;
//! q.drain(|c| assert!(c.status.is_ok() && c.tag == 7))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// Raw calls live in `sys/` and the buffer internals in `buf.rs`, the only modules that
// opt in (docs/ARCHITECTURE.md, "Ownership and safety").
#![deny(unsafe_code)]

mod be;
pub mod buf;
pub mod cmd;
pub mod dev;
pub mod error;
pub mod opts;
pub mod queue;
pub mod spec;
mod sys;
pub mod units;
pub mod uri;

pub use be::pmem::PmemInfo;
pub use be::{Descriptor, Role};
pub use buf::{Buffer, Data};
pub use cmd::Cmd;
pub use dev::{
    enumerate, enumerate_pci, Dax, DevKind, Device, Geometry, Ident, Interfaces, PmemSlice, Zoned, ZonedModel,
};
pub use error::{Error, Result};
pub use opts::{AdminIface, AsyncIface, DmaMode, MemIface, OpenSync, Opts, PsyncCall, SyncIface};
pub use queue::{Completion, CompletionSink, Queue, QueueStats, Rejected};
pub use spec::{Cqe, Sqe, Status};

/// True when this kernel supports the io_uring option `single_issuer=1`
/// (IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN, Linux 6.1). Probed once per process.
pub fn io_uring_single_issuer_supported() -> bool {
    be::uring::single_issuer_supported()
}

/// The README's Rust examples, compiled and run as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// Every interface of this build, with what it serves and the options it takes: the
/// table [`Device::open`] chooses from (by role, in the order of preference for
/// defaults).
pub fn interfaces() -> &'static [&'static Descriptor] {
    be::TABLE
}
