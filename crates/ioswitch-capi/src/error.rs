//! Error reporting across the ABI: negative errno return values, a thread-local message,
//! and the guard that keeps panics from unwinding into C.

use ioswitch_rs::Error;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

enum Message {
    Static(&'static CStr),
    Owned(CString),
}

thread_local! {
    static LAST: RefCell<Message> = const { RefCell::new(Message::Static(c"")) };
}

/// Records a message that needs no formatting (the hot paths use these: no allocation).
pub(crate) fn set_static(msg: &'static CStr) {
    store(Message::Static(msg));
}

/// Replaces this thread's message; does nothing (rather than panic) while the thread's
/// storage is being torn down or is somehow in use.
fn store(m: Message) {
    let _ = LAST.try_with(|l| {
        if let Ok(mut slot) = l.try_borrow_mut() {
            *slot = m;
        }
    });
}

/// Records a message for `ioswitch_last_error`.
pub(crate) fn set(msg: impl Into<String>) {
    let mut bytes = msg.into().into_bytes();
    // A NUL inside would cut the message short in C; show it instead.
    for b in bytes.iter_mut().filter(|b| **b == 0) {
        *b = b'?';
    }
    store(Message::Owned(CString::new(bytes).unwrap_or_default()));
}

/// Records `msg` and returns `-errno`.
pub(crate) fn fail(errno: c_int, msg: impl Into<String>) -> c_int {
    set(msg);
    -errno
}

/// Records the library error's message and returns its negative errno (`-EIO` when it
/// has none).
pub(crate) fn from_error(context: &str, e: &Error) -> c_int {
    if context.is_empty() {
        set(e.to_string());
    } else {
        set(format!("{context}: {e}"));
    }
    -e.errno().unwrap_or(libc::EIO)
}

/// 0 for `Ok`, or `from_error`'s negative errno (the message recorded).
pub(crate) fn status(context: &str, r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => from_error(context, &e),
    }
}

/// Runs one entry point's body; a panic becomes `fallback` with `-EIO`'s message recorded
/// instead of unwinding into C (which would be undefined behaviour).
///
/// Always inlined: `catch_unwind` costs nothing while nothing panics (the landing pad is
/// in the unwind tables), and inlined it also costs no copies of the body's captures; the
/// panic path is out of line in [`panicked`].
#[inline(always)]
pub(crate) fn guard<T>(func: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            panicked(func, payload);
            fallback
        }
    }
}

/// Records the message of a panic caught by [`guard`].
#[cold]
#[inline(never)]
fn panicked(func: &str, payload: Box<dyn std::any::Any + Send>) {
    let why = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    set(format!("{func}: internal error (a bug in ioswitch, please report it): {why}"));
}

/// The pointer `ioswitch_last_error` returns.
pub(crate) fn last_ptr() -> *const c_char {
    LAST.try_with(|l| match l.try_borrow().as_deref() {
        Ok(Message::Static(s)) => s.as_ptr(),
        // The CString's heap buffer stays put until the next message replaces it.
        Ok(Message::Owned(s)) => s.as_ptr(),
        Err(_) => c"".as_ptr(),
    })
    .unwrap_or(c"".as_ptr())
}

/// The message text, for the crate's tests.
#[cfg(test)]
pub(crate) fn last_string() -> String {
    // SAFETY: last_ptr points at a NUL-terminated string owned by this thread's slot,
    // which nothing changes while this function runs.
    unsafe { CStr::from_ptr(last_ptr()) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_fallback_and_a_message() {
        let r = guard("ioswitch_test", -libc::EIO, || -> c_int { panic!("boom {}", 7) });
        assert_eq!(r, -libc::EIO);
        let m = last_string();
        assert!(m.contains("ioswitch_test") && m.contains("boom 7"), "{m}");
    }

    #[test]
    fn messages_are_per_thread_and_keep_nul_bytes_visible() {
        set("a\0b");
        assert_eq!(last_string(), "a?b");
        std::thread::spawn(|| assert_eq!(last_string(), "")).join().unwrap();
        set_static(c"static");
        assert_eq!(last_string(), "static");
    }
}
