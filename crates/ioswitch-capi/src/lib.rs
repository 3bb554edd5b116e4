//! The C ABI of ioswitch: `libioswitch.so` / `libioswitch.a` with `include/ioswitch.h`
//! (generated from this crate by cbindgen; `tests/header.rs` keeps it fresh).
//!
//! The C API mirrors the Rust one: open a device with a URI and an option string, allocate
//! buffers for it, build commands, run them synchronously (`ioswitch_pass`) or through a
//! queue with completion callbacks (`ioswitch_queue_*`). Errors are negative errno values
//! with a thread-local message (`ioswitch_last_error`); no panic crosses the boundary:
//! every entry point catches unwinding and answers -EIO with the panic's message.
//!
//! Buffers are owned by ioswitch and handed to C as plain pointers; the handle table in
//! the `table` module lets the Rust side move a buffer into a queue on submission and back on
//! completion exactly as the Rust API does, so C can never free memory the kernel may
//! still write. `ioswitch_pass_raw` is the one exception: a synchronous call on the
//! caller's own memory for the length of the call (`Buffer::borrow_raw`, like
//! `pread(2)`), with no table lookup.
#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

mod cmd;
mod cpl;
mod dev;
mod error;
mod pmem;
mod queue;
mod region;
mod table;

pub use cmd::*;
pub use cpl::*;
pub use dev::*;
pub use pmem::*;
pub use queue::*;
pub use region::*;

use std::ffi::{c_char, CStr, CString};
use std::sync::Mutex;

/// The message of the last failed call on this thread (`""` when none failed yet).
///
/// The string belongs to ioswitch and stays valid until the next failing ioswitch call
/// on the same thread; copy it to keep it. Successful calls leave it unchanged.
#[no_mangle]
pub extern "C" fn ioswitch_last_error() -> *const c_char {
    error::guard("ioswitch_last_error", c"".as_ptr(), error::last_ptr)
}

/// The library version ("0.1.0"); static.
#[no_mangle]
pub extern "C" fn ioswitch_version() -> *const c_char {
    const V: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };
    V.as_ptr()
}

/// A NUL-terminated copy of a static name, made once and kept for the process.
pub(crate) fn static_cstr(name: &'static str) -> &'static CStr {
    static CACHE: Mutex<Vec<(&'static str, &'static CStr)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = cache.iter().find(|(n, _)| *n == name) {
        return c;
    }
    let c: &'static CStr = Box::leak(CString::new(name).unwrap_or_default().into_boxed_c_str());
    cache.push((name, c));
    c
}
