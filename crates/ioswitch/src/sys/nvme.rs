//! The NVMe driver's ioctls (include/uapi/linux/nvme_ioctl.h): `NVME_IOCTL_ID`, and
//! passthrough of one command with `NVME_IOCTL_IO64_CMD`, its vectored form, and
//! `NVME_IOCTL_ADMIN64_CMD`; the kernel's [`PassthruCmd64`] and the io_uring command
//! numbers of the same structure.
//!
//! The data of a passthrough command is given as borrowed slices ([`Data`]), and the
//! wrapper sets the pointer and length fields from them, so the kernel maps nothing but
//! those slices, for the duration of the call. (A device that transfers whole pages,
//! PRPs, may touch the rest of the pages the slices lie in: that is why passthrough
//! buffers own whole pages, which `be::prepare` checks before any command gets here.)

use super::{ioc, IOC_NONE, IOC_READ_WRITE};
use std::io::{self, IoSliceMut};
use std::os::fd::RawFd;

/// The kernel's `struct nvme_passthru_cmd64`: the command fields of a submission entry
/// plus user pointers, and the result written back. The data pointer and length are set
/// by [`passthru`] from the slices it is given.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PassthruCmd64 {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    /// Set by [`passthru`].
    pub addr: u64,
    pub metadata_len: u32,
    /// Bytes of data, or the number of iovecs for the vectored ioctl (`vec_cnt`).
    /// Set by [`passthru`].
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    pub rsvd2: u32,
    /// The completion's DW0-1, written by the kernel.
    pub result: u64,
}

/// Size of `struct nvme_uring_cmd`: `nvme_passthru_cmd64` without the result.
const URING_CMD_LEN: usize = 72;

const _: () = assert!(std::mem::size_of::<PassthruCmd64>() == 80);
const _: () = assert!(std::mem::offset_of!(PassthruCmd64, addr) == 24);
const _: () = assert!(std::mem::offset_of!(PassthruCmd64, data_len) == 36);
const _: () = assert!(std::mem::offset_of!(PassthruCmd64, cdw10) == 40);
const _: () = assert!(std::mem::offset_of!(PassthruCmd64, timeout_ms) == 64);
const _: () = assert!(std::mem::offset_of!(PassthruCmd64, result) == 72);

/// `_IO('N', 0x40)`: the namespace id of a namespace device.
const NVME_IOCTL_ID: u64 = ioc(IOC_NONE, b'N', 0x40, 0);
/// `_IOWR('N', 0x47, struct nvme_passthru_cmd64)`.
const NVME_IOCTL_ADMIN64_CMD: u64 = ioc(IOC_READ_WRITE, b'N', 0x47, 80);
/// `_IOWR('N', 0x48, struct nvme_passthru_cmd64)`.
const NVME_IOCTL_IO64_CMD: u64 = ioc(IOC_READ_WRITE, b'N', 0x48, 80);
/// `_IOWR('N', 0x49, struct nvme_passthru_cmd64)`: `addr` is an iovec array.
const NVME_IOCTL_IO64_CMD_VEC: u64 = ioc(IOC_READ_WRITE, b'N', 0x49, 80);
/// `_IOWR('N', 0x80, struct nvme_uring_cmd)`: io_uring command op for an I/O command.
pub(crate) const NVME_URING_CMD_IO: u32 = ioc(IOC_READ_WRITE, b'N', 0x80, URING_CMD_LEN) as u32;
/// `_IOWR('N', 0x81, struct nvme_uring_cmd)`: the vectored form.
pub(crate) const NVME_URING_CMD_IO_VEC: u32 = ioc(IOC_READ_WRITE, b'N', 0x81, URING_CMD_LEN) as u32;

const _: () = assert!(NVME_IOCTL_IO64_CMD == 0xC050_4E48);
const _: () = assert!(NVME_IOCTL_ADMIN64_CMD == 0xC050_4E47);
const _: () = assert!(NVME_URING_CMD_IO == 0xC048_4E80);

/// The namespace id of a namespace device (`NVME_IOCTL_ID`).
pub(crate) fn ioctl_id(fd: RawFd) -> io::Result<u32> {
    // SAFETY: NVME_IOCTL_ID takes no argument.
    super::check(unsafe { libc::ioctl(fd, NVME_IOCTL_ID as _) }).map(|id| id as u32)
}

/// Which queue a passthrough command goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// An I/O command (`NVME_IOCTL_IO64_CMD`, or `_VEC` for [`Data::Vectored`]).
    Io,
    /// An admin command (`NVME_IOCTL_ADMIN64_CMD`; no vectored form: EINVAL).
    Admin,
}

/// The data of a passthrough command.
pub(crate) enum Data<'a, 'b> {
    /// No data.
    None,
    /// One contiguous slice.
    One(&'a mut [u8]),
    /// Several slices (the vectored ioctl, I/O commands only).
    Vectored(&'a mut [IoSliceMut<'b>]),
}

/// Sends `c` with `data` (pointer and length set here) and waits for it. Returns the
/// completion's result, or `Err((rc, errno))`: a positive `rc` is the NVMe status field
/// the driver returned (`errno` 0), a negative one an errno the kernel refused the
/// command with.
pub(crate) fn passthru(fd: RawFd, queue: Queue, c: &mut PassthruCmd64, data: Data<'_, '_>) -> Result<u64, (i32, i32)> {
    let mut req = if queue == Queue::Admin { NVME_IOCTL_ADMIN64_CMD } else { NVME_IOCTL_IO64_CMD };
    let too_big = || (-1, libc::EINVAL);
    (c.addr, c.data_len) = match data {
        Data::None => (0, 0),
        Data::One(b) => (b.as_mut_ptr() as u64, u32::try_from(b.len()).map_err(|_| too_big())?),
        Data::Vectored(v) => {
            if queue == Queue::Admin {
                return Err(too_big());
            }
            req = NVME_IOCTL_IO64_CMD_VEC;
            (v.as_mut_ptr() as u64, u32::try_from(v.len()).map_err(|_| too_big())?)
        }
    };
    // SAFETY: `c` is a valid nvme_passthru_cmd64 (size checked at compile time) that the
    // kernel reads and writes back (result); its data pointer is one slice borrowed
    // mutably for this call, or an array of IoSliceMut (ABI-compatible with struct iovec,
    // each borrowing its memory mutably) with its length.
    let rc = unsafe { libc::ioctl(fd, req as _, c as *mut PassthruCmd64) };
    if rc == 0 {
        return Ok(c.result);
    }
    let errno = if rc < 0 { super::errno() } else { 0 };
    Err((rc, errno))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        assert_eq!(NVME_IOCTL_ID, 0x4E40);
        assert_eq!(NVME_IOCTL_IO64_CMD_VEC, 0xC050_4E49);
        assert_eq!(NVME_URING_CMD_IO_VEC, 0xC048_4E81);
    }

    #[test]
    fn passthrough_on_a_file_is_refused_by_the_kernel() {
        let f = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        let mut c = PassthruCmd64::default();
        let mut b = [0u8; 8];
        let e = passthru(f.as_raw_fd(), Queue::Io, &mut c, Data::One(&mut b)).unwrap_err();
        assert!(e.0 < 0 && e.1 != 0, "{e:?}");
        assert!(ioctl_id(f.as_raw_fd()).is_err());
        let mut v = [IoSliceMut::new(&mut b)];
        assert_eq!(passthru(-1, Queue::Admin, &mut c, Data::Vectored(&mut v)).unwrap_err(), (-1, libc::EINVAL));
    }
}
