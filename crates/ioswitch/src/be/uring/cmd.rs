//! `io_uring_cmd`: NVMe passthrough through io_uring (`IORING_OP_URING_CMD`) on an NVMe
//! generic char device, `/dev/ngXnY`.
//!
//! The ring has 128-byte SQEs and 32-byte CQEs (`IORING_SETUP_SQE128 | CQE32`). Each
//! command is one `URING_CMD` SQE with `cmd_op` `NVME_URING_CMD_IO` (one buffer or
//! none) or `NVME_URING_CMD_IO_VEC` (several buffers: `addr` is an iovec array and
//! `data_len` its length), carrying `struct nvme_uring_cmd` (the command's fields, as
//! the caller built them) in the SQE's 80-byte command area. Any I/O command goes:
//! NVM read/write/flush/write zeroes/DSM, ZNS commands, anything else raw; file-set
//! commands go as NVM commands when they are whole LBAs (see [`crate::be::nvme`]).
//!
//! Completion: `cqe.res` is 0, the NVMe status field (positive: SC, SCT, CRD, More,
//! DNR), or a negative errno when the kernel refused the command; the completion's
//! DW0-1 (e.g. the LBA a Zone Append wrote) is in the big CQE's first extra dword pair
//! and becomes the completion's `result`.
//!
//! The queue is a [`Ring`] of the ring core (see [`super`]: setup, slots, commit, reap,
//! drop), as `io_uring`'s: `submit` writes one SQE (a slot's iovec array and DSM range
//! stay in the slot until the command ends) and makes no syscall, `commit` pushes the
//! batch with one `io_uring_enter`, `reap` takes CQEs without a syscall and enters only to
//! wait (or, with IOPOLL, to poll). Tunables: `sqpoll=1` / `sqpoll_cpu=N`, `iopoll=1`
//! (needs poll queues on the controller, the nvme driver's `poll_queues`; checked at
//! open; no `direct=1` needed: passthrough never uses the page cache), `register_files=1`.
//!
//! With `iopoll=1`, commands that move no data (flush, write zeroes, zone management
//! send, …) do not go to the ring: the driver cannot poll a request without a bio and
//! completes it by interrupt, and on Linux 6.1 that completion's task work overwrites
//! the poll cookie it shares a union with, so the next poll dereferences a function
//! pointer as a bio and the kernel oopses (seen in the test guest, Debian 6.1.192).
//! They run at `submit` through the NVMe ioctl on the same descriptor instead (one
//! counted syscall; the submit blocks for the command), and their completions wait in a
//! ring preallocated at queue creation that `reap` hands out first (holding their slots
//! until then).
//!
//! The same kernel bug has a second trigger: with several IOPOLL rings polling the
//! namespace's poll queues, one ring's poll can complete another ring's command between
//! its issue and the moment the submitting task stores the poll cookie, so the driver
//! takes the completion for an interrupt-driven one and clobbers the cookie (seen in the
//! test guest: four threads, one queue each, general protection fault in `bio_poll`
//! called from `nvme_ns_chr_uring_cmd_iopoll`). So every `io_uring_enter` of an IOPOLL
//! queue (submitting, polling, or both) takes a process-wide lock
//! ([`Iface::LOCK_IOPOLL_ENTER`]): no queue polls while another one is submitting.
//! IOPOLL queues of one process therefore submit and poll one at a time; other processes
//! polling the same poll queues are not covered, nor are SQPOLL kernel threads
//! (`sqpoll=1` with `iopoll=1` on several queues).
//!
//! `register_buffers=1` is refused at open (fixed buffers for uring_cmd are not
//! implemented).

use super::{check_poll_queues, check_reap_spin, check_sqpoll, check_usable, End, Iface, Ring, Slot};
use crate::be::nvme::{self, WireData};
use crate::be::{Backend, Build, Descriptor, Io, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::{DevKind, Inner};
use crate::error::Error;
use crate::queue::Completion;
use crate::spec::{errno_to_status, Status};
use crate::sys::uring::{Payload, Refused};
use ::io_uring::{cqueue, opcode, squeue, IoUring};
use std::sync::Arc;

/// `async=io_uring_cmd`: io_uring NVMe passthrough (IORING_OP_URING_CMD) on /dev/ngXnY.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "io_uring_cmd",
    Role::Async,
    "io_uring NVMe passthrough (IORING_OP_URING_CMD) on /dev/ngXnY",
    |kind| match kind {
        DevKind::NvmeChar => None,
        DevKind::NvmeCtrl => Some("an NVMe controller takes admin commands only"),
        DevKind::NvmeBlock => Some(
            "IORING_OP_URING_CMD NVMe passthrough runs on the namespace's generic char device (/dev/ngXnY), \
             not its block device; use async=io_uring here",
        ),
        DevKind::NvmePci => Some(crate::be::vfio::PCI_ONLY_VFIO),
        _ => Some("IORING_OP_URING_CMD NVMe passthrough needs an NVMe generic char device (/dev/ngXnY)"),
    },
    Build::Async { probe, queue: |dev, depth| Ok(Backend::IoUringCmd(Box::new(UringCmdQueue::new(dev, depth)?))) },
)
.defaults(&[DevKind::NvmeChar])
.tunables(super::TUNABLES)
.fio(&["io_uring_cmd"])
.usable(crate::be::io_uring_usable);

/// Checks at open that the kernel has big-SQE rings and `URING_CMD`, and that the
/// tunables asked for will work here.
pub(crate) fn probe(dev: &Inner) -> Result<(), Error> {
    let iface = "async=io_uring_cmd";
    check_usable(dev, iface)?;
    check_reap_spin::<UringCmd>(dev)?;
    let o = &dev.opts;
    if o.register_buffers {
        return Err(dev.unsupported(
            "async=io_uring_cmd (register_buffers=1)",
            "fixed buffers are not implemented for NVMe passthrough commands; leave register_buffers off",
        ));
    }
    let ring = match IoUring::<squeue::Entry128, cqueue::Entry32>::builder().build(2) {
        Ok(r) => r,
        Err(e) => {
            return Err(dev.unsupported(
                iface,
                &format!("the kernel refused a ring with 128-byte SQEs and 32-byte CQEs (needs Linux 5.19): {e}"),
            ))
        }
    };
    let mut p = ::io_uring::Probe::new();
    if ring.submitter().register_probe(&mut p).is_ok() && !p.is_supported(opcode::UringCmd80::CODE) {
        return Err(dev.unsupported(iface, "this kernel has no IORING_OP_URING_CMD (needs Linux 5.19)"));
    }
    drop(ring);
    if o.iopoll {
        check_iopoll(dev)?;
    }
    if o.sqpoll {
        check_sqpoll::<UringCmd>(dev)?;
    }
    Ok(())
}

/// IOPOLL on a generic char device polls the namespace's poll queues: they must exist.
fn check_iopoll(dev: &Inner) -> Result<(), Error> {
    let iface = "async=io_uring_cmd (iopoll=1)";
    let st = crate::sys::fstat(&dev.raw_fd())
        .map_err(|e| super::queue_error::<UringCmd>(dev, "fstat (to find the namespace for iopoll)", e))?;
    let devno = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
    let Some(dir) = nvme::char_block_dir(devno, dev.ident.nsid) else {
        return Err(dev.unsupported(
            iface,
            &format!(
                "cannot tell whether namespace {} has poll queues: no block device for it in sysfs",
                dev.ident.nsid
            ),
        ));
    };
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    check_poll_queues(dev, iface, &dir, &format!("the namespace ({name})"), "load the nvme driver with poll_queues=N")
}

/// A queue of the `io_uring_cmd` interface.
pub(crate) type UringCmdQueue = Ring<UringCmd>;

/// What is particular to the `io_uring_cmd` interface in a [`Ring`].
pub(crate) struct UringCmd {
    nsid: u32,
    lba: u64,
}

/// The `io_uring_cmd` state of a slot: none (the ring keeps the DSM range of a file-set
/// trim in the slot, and hands out only CQEs of slots it has in the ring).
pub(crate) struct CmdSlot;

impl Iface for UringCmd {
    type Sqe = squeue::Entry128;
    type Cqe = cqueue::Entry32;
    type Slot = CmdSlot;
    const NAME: &'static str = "io_uring_cmd";
    const SINGLE_ISSUER: bool = false;
    const FIXED_BUFFERS: bool = false;
    const LOCK_IOPOLL_ENTER: bool = true;

    fn new_slot() -> CmdSlot {
        CmdSlot
    }

    #[inline(always)]
    fn free(_: &mut CmdSlot) {}

    #[inline]
    fn submit(q: &mut Ring<UringCmd>, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        q.submit_cmd(io, cmd, data, tag)
    }

    /// `res` is 0, the NVMe status field (positive), or a negative errno; the big CQE's
    /// first extra dword pair is the completion's DW0-1.
    #[inline(always)]
    fn end(_: &Slot<CmdSlot>, cqe: &cqueue::Entry32) -> End {
        let res = cqe.result();
        if res < 0 {
            End::Done(errno_to_status(res.wrapping_neg()), 0)
        } else if res > 0 {
            End::Done(Status::from_cqe_status((res as u16) << 1), cqe.big_cqe()[0])
        } else {
            End::Done(Status::OK, cqe.big_cqe()[0])
        }
    }
}

impl Ring<UringCmd> {
    /// A queue of `depth` slots on a new big-SQE ring.
    pub(crate) fn new(dev: &Arc<Inner>, depth: u32) -> Result<UringCmdQueue, Error> {
        Ring::setup(dev, depth, UringCmd { nsid: dev.ident.nsid, lba: dev.geo.lba_size as u64 })
    }

    fn bad_command(&self, cmd: &Cmd, why: String) -> Error {
        crate::be::bad_command(&self.dev, UringCmd::NAME, cmd, why)
    }

    fn submit_cmd(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        let w = match nvme::wire(io, cmd, self.iface.nsid, self.iface.lba, data.bufs()) {
            Ok(w) => w,
            Err(why) => return Err((self.bad_command(cmd, why.into()), data)),
        };
        let Some(id) = self.uring.take_slot() else { return Err((self.busy(), data)) };
        if self.iopoll && w.data == WireData::None {
            // Not through the IOPOLL ring (see the module docs): through the ioctl, now.
            let mut data = data;
            self.syscalls += 1;
            let c = match nvme::io_cmd(self.fd, &w, data.bufs_mut()) {
                Ok(result) => Completion { tag, status: Status::OK, result, data },
                Err(status) => Completion { tag, status, result: 0, data },
            };
            self.hold_ready(id, c);
            return Ok(());
        }
        self.uring.meta_mut(&id).tag = tag;
        self.uring.put(&id, data);
        let payload = match w.data {
            WireData::None => Payload::None,
            WireData::Range(r) => Payload::Range(r.to_bytes()),
            WireData::Bufs(len) => Payload::Bufs(len),
        };
        // The data pointer and length are written by the ring, from the slot's memory.
        let bytes = nvme::uring_cmd(&w.sqe, 0, 0);
        let t = self.target();
        match self.uring.push_uring_cmd(id, t, bytes, payload) {
            Ok(()) => self.launched(Ok(())),
            Err((id, Refused::Full)) => self.launched(Err(id)),
            Err((id, Refused::Short)) => {
                let data = self.release(id);
                let WireData::Bufs(len) = w.data else { unreachable!("only a command with buffers is short") };
                let why = format!("the buffers hold fewer than the {len} bytes the command moves");
                Err((self.bad_command(cmd, why), data))
            }
        }
    }
}
