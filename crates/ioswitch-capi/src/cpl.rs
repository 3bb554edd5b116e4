//! Completions: what a finished command reports to C.

use crate::error::guard;
use crate::static_cstr;
use ioswitch_rs::Status;
use std::ffi::{c_char, c_void};

/// A finished command: the user argument given at submission, the NVMe status (with the
/// errno the OS gave, when the failure came from the OS), and the command's result.
///
/// The command succeeded when `status == 0 && errnum == 0` (`ioswitch_cpl_ok`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ioswitch_cpl {
    /// The `user_arg` given to `ioswitch_queue_submit` (NULL for `ioswitch_pass`).
    pub user_arg: *mut c_void,
    /// Command-specific result: bytes moved for data commands on files and block devices,
    /// completion DW0-1 for NVMe. A read or write that succeeds moved every byte (the
    /// result is its length); one that ends short fails with EIO (its result, where the
    /// interface reports it, the bytes that did move).
    pub result: u64,
    /// The NVMe status field (completion DW3 bits 31:17, shifted down: bits 7:0 SC,
    /// 10:8 SCT, 12:11 CRD, 13 More, 14 DNR); 0 on success.
    pub status: u16,
    /// Status Code Type (0 generic, 1 command specific, 2 media/data integrity, 3 path).
    pub sct: u8,
    /// Status Code.
    pub sc: u8,
    /// Do Not Retry: 1 when retrying the same command cannot succeed.
    pub dnr: u8,
    /// More status information is in the error log page.
    pub more: u8,
    /// The positive errno the OS reported for the failure (EIO, ENOSPC, …), or 0.
    pub errnum: i32,
}

impl ioswitch_cpl {
    pub(crate) fn new(user_arg: *mut c_void, status: Status, result: u64) -> ioswitch_cpl {
        ioswitch_cpl {
            user_arg,
            result,
            status: status.raw,
            sct: ((status.raw >> 8) & 7) as u8,
            sc: status.sc(),
            dnr: status.dnr() as u8,
            more: status.more() as u8,
            errnum: status.errno_raw,
        }
    }
}

/// True when the completion reports success.
///
/// # Safety
/// `cpl` must be NULL (answered false) or point to a valid `struct ioswitch_cpl`.
#[no_mangle]
pub unsafe extern "C" fn ioswitch_cpl_ok(cpl: *const ioswitch_cpl) -> bool {
    guard("ioswitch_cpl_ok", false, || {
        // SAFETY: cpl is null or valid (caller contract).
        unsafe { cpl.as_ref() }.is_some_and(|c| c.status & 0x7ff == 0 && c.errnum == 0)
    })
}

/// The NVMe specification's name of a status field (`"LBA Out of Range"`, `"Zone Is
/// Full"`, `"Successful Completion"`, or `"Unknown Status"`). The string is static.
#[no_mangle]
pub extern "C" fn ioswitch_status_name(status: u16) -> *const c_char {
    guard("ioswitch_status_name", c"Unknown Status".as_ptr(), || {
        let name = Status { raw: status, errno_raw: 0 }.name();
        static_cstr(name).as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioswitch_rs::spec::errno_to_status;
    use std::ffi::CStr;

    #[test]
    fn a_completion_splits_the_status_field() {
        let c = ioswitch_cpl::new(std::ptr::null_mut(), errno_to_status(libc::ENOSPC), 0);
        assert_eq!((c.sct, c.sc, c.dnr, c.errnum), (0, 0x81, 1, libc::ENOSPC));
        // SAFETY: c is a valid completion.
        assert!(!unsafe { ioswitch_cpl_ok(&c) });
        let ok = ioswitch_cpl::new(std::ptr::null_mut(), Status::OK, 4096);
        // SAFETY: as above.
        assert!(unsafe { ioswitch_cpl_ok(&ok) });
    }

    #[test]
    fn every_status_name_has_a_c_string() {
        for raw in 0u16..0x800 {
            let rust = Status { raw, errno_raw: 0 }.name();
            // SAFETY: ioswitch_status_name returns a static NUL-terminated string.
            let c = unsafe { CStr::from_ptr(ioswitch_status_name(raw)) };
            assert_eq!(c.to_str().unwrap(), rust, "status {raw:#x}");
        }
    }
}
