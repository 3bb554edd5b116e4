//! Copies that survive a SIGBUS: the kernel's answer to a load or store on a mapped page it
//! cannot provide (a media error under a file or block-device mapping, a page beyond the
//! end of a truncated file, a poisoned page). A storage library must report that in the
//! completion of the command and keep running, so the copies in and out of mappings
//! ([`super::mem::Mapping`]) go through [`copy`] and [`zero`] here.
//!
//! The technique is the kernel's exception table: each copy is one `rep movsb` /
//! `rep stosb` in a routine written in assembly (below), so the address of the one
//! instruction that may fault is known. A process-wide SIGBUS handler ([`install`]) looks
//! at the interrupted instruction pointer of a fault the kernel raised (`si_code > 0`):
//! when it is that instruction, it rewrites the saved RIP to the routine's recovery label,
//! which returns the count of bytes not copied (`rcx`: a `rep` string instruction keeps its
//! registers exact at a fault), and the copy returns an error. Any other SIGBUS goes to the
//! handler that was installed before (Rust's runtime has one, for stack overflows in a
//! guard page), or, where that was the default action, resets the default and re-raises:
//! the process dies as it would have without us. No system call is added to a copy.
//!
//! The handler is installed with `SA_SIGINFO` (it needs the `ucontext`), `SA_ONSTACK` (it
//! then runs, like the handler it chains to, on the thread's alternate signal stack where
//! there is one: a stack overflow keeps being reported by Rust's runtime) and `SA_RESTART`;
//! it blocks no other signal. It is async-signal-safe: atomic loads, a compare, a register
//! store, and for the chained case sigaction(2) and raise(3). A program that later replaces
//! the SIGBUS handler without chaining to ours takes the recovery away (its own handler then
//! sees the fault); a program that installed one before keeps getting every SIGBUS that is
//! not in a copy.
//!
//! Only x86-64 Linux has the routine; elsewhere [`copy`] and [`zero`] are plain copies and
//! a SIGBUS still ends the process (said in docs/RELIABILITY.md).

use std::io;

/// A copy stopped by a SIGBUS: `done` bytes were copied (or zeroed) before the byte at
/// index `done` faulted, in the source or in the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Bytes copied before the fault; the faulting byte is at this index of the copy.
    pub(crate) done: usize,
}

/// Installs the process-wide SIGBUS handler, once; later calls return the first result.
pub(crate) fn install() -> io::Result<()> {
    imp::install()
}

/// Copies `n` bytes from `src` to `dst`; a SIGBUS on either side stops the copy with
/// [`Fault`] (after [`install`]; before it, or on another architecture, the signal ends
/// the process as always).
///
/// # Safety
/// `src .. src + n` must be readable and `dst .. dst + n` writable memory (mapped, though
/// a page may be one the kernel cannot provide), not overlapping, and no reference may
/// alias `dst .. dst + n` during the call.
pub(crate) unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) -> Result<(), Fault> {
    // SAFETY: forwarded from the caller.
    unsafe { imp::copy(dst, src, n) }
}

/// Zeroes `n` bytes at `dst`; a SIGBUS stops it with [`Fault`] (as [`copy`]).
///
/// # Safety
/// `dst .. dst + n` must be writable memory that no reference aliases during the call.
pub(crate) unsafe fn zero(dst: *mut u8, n: usize) -> Result<(), Fault> {
    // SAFETY: forwarded from the caller.
    unsafe { imp::zero(dst, n) }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use super::Fault;
    use std::io;
    use std::sync::OnceLock;

    // The two routines, System V calling convention (the direction flag is clear on entry).
    // copy(rdi = dst, rsi = src, rdx = n) and zero(rdi = dst, rsi = n) return in rax the
    // bytes not done: 0 when complete. The `_insn` labels are the only instructions that
    // touch the caller's memory; `_fixup` is where the handler resumes a faulted one, with
    // rcx = the bytes left (at least 1, the faulting one).
    std::arch::global_asm!(
        ".pushsection .text.ioswitch_sigbus,\"ax\",@progbits",
        ".p2align 4",
        ".globl ioswitch_sigbus_copy",
        ".hidden ioswitch_sigbus_copy",
        ".type ioswitch_sigbus_copy,@function",
        "ioswitch_sigbus_copy:",
        "    mov rcx, rdx",
        ".globl ioswitch_sigbus_copy_insn",
        ".hidden ioswitch_sigbus_copy_insn",
        "ioswitch_sigbus_copy_insn:",
        "    rep movsb",
        "    xor eax, eax",
        "    ret",
        ".globl ioswitch_sigbus_copy_fixup",
        ".hidden ioswitch_sigbus_copy_fixup",
        "ioswitch_sigbus_copy_fixup:",
        "    mov rax, rcx",
        "    ret",
        ".size ioswitch_sigbus_copy, .-ioswitch_sigbus_copy",
        ".p2align 4",
        ".globl ioswitch_sigbus_zero",
        ".hidden ioswitch_sigbus_zero",
        ".type ioswitch_sigbus_zero,@function",
        "ioswitch_sigbus_zero:",
        "    mov rcx, rsi",
        "    xor eax, eax",
        ".globl ioswitch_sigbus_zero_insn",
        ".hidden ioswitch_sigbus_zero_insn",
        "ioswitch_sigbus_zero_insn:",
        "    rep stosb",
        "    ret",
        ".globl ioswitch_sigbus_zero_fixup",
        ".hidden ioswitch_sigbus_zero_fixup",
        "ioswitch_sigbus_zero_fixup:",
        "    mov rax, rcx",
        "    ret",
        ".size ioswitch_sigbus_zero, .-ioswitch_sigbus_zero",
        ".popsection",
    );

    extern "C" {
        fn ioswitch_sigbus_copy(dst: *mut u8, src: *const u8, n: usize) -> usize;
        fn ioswitch_sigbus_zero(dst: *mut u8, n: usize) -> usize;
        // Labels, declared as functions only to take their addresses; never called.
        fn ioswitch_sigbus_copy_insn();
        fn ioswitch_sigbus_copy_fixup();
        fn ioswitch_sigbus_zero_insn();
        fn ioswitch_sigbus_zero_fixup();
    }

    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) -> Result<(), Fault> {
        // SAFETY: the caller guarantees both ranges (see `super::copy`); the routine
        // follows the C calling convention and touches nothing else.
        let left = unsafe { ioswitch_sigbus_copy(dst, src, n) };
        if left == 0 {
            Ok(())
        } else {
            Err(Fault { done: n - left })
        }
    }

    pub(super) unsafe fn zero(dst: *mut u8, n: usize) -> Result<(), Fault> {
        // SAFETY: as in `copy`, for one range.
        let left = unsafe { ioswitch_sigbus_zero(dst, n) };
        if left == 0 {
            Ok(())
        } else {
            Err(Fault { done: n - left })
        }
    }

    /// The SIGBUS action before ours, read once before ours is installed.
    static PREV: OnceLock<libc::sigaction> = OnceLock::new();
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();

    pub(super) fn install() -> io::Result<()> {
        let r = *INSTALLED.get_or_init(|| {
            // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask, no flags).
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: reads the current action into `old`, changes nothing.
            if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) } != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
            }
            let _ = PREV.set(old);
            // SAFETY: as above.
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
            // SAFETY: `sa_mask` is a sigset_t owned by `sa`.
            unsafe { libc::sigemptyset(&mut sa.sa_mask) };
            // SAFETY: installs `on_sigbus`, an async-signal-safe SA_SIGINFO handler that
            // lives as long as the program; the previous action is kept in PREV.
            if unsafe { libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
            }
            Ok(())
        });
        r.map_err(|e| {
            io::Error::new(
                io::Error::from_raw_os_error(e).kind(),
                format!("sigaction(SIGBUS): {}", io::Error::from_raw_os_error(e)),
            )
        })
    }

    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel calls an SA_SIGINFO handler with a valid siginfo_t and the
        // ucontext_t of the interrupted thread, both live until the handler returns.
        let kernel = unsafe { !info.is_null() && (*info).si_code > 0 };
        if kernel && !ctx.is_null() {
            // SAFETY: as above; only this thread's saved RIP is read and written.
            let rip = unsafe { &mut (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] };
            let at = *rip as usize;
            let fixup = if at == ioswitch_sigbus_copy_insn as *const () as usize {
                Some(ioswitch_sigbus_copy_fixup as *const () as usize)
            } else if at == ioswitch_sigbus_zero_insn as *const () as usize {
                Some(ioswitch_sigbus_zero_fixup as *const () as usize)
            } else {
                None
            };
            if let Some(f) = fixup {
                // Resume at the recovery label: the routine returns rcx, the bytes left.
                *rip = f as libc::greg_t;
                return;
            }
        }
        chain(sig, info, ctx, kernel)
    }

    /// A SIGBUS that is not ours: what the previous action would have done.
    fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void, kernel: bool) {
        let prev = PREV.get().copied();
        match prev.map(|p| (p.sa_sigaction, p.sa_flags)) {
            Some((h, _)) if h == libc::SIG_IGN && !kernel => {}
            Some((h, flags)) if h != libc::SIG_DFL && h != libc::SIG_IGN => {
                if flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: an SA_SIGINFO action's handler has this signature; it gets
                    // the arguments the kernel gave us.
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        unsafe { std::mem::transmute(h) };
                    f(sig, info, ctx)
                } else {
                    // SAFETY: a plain handler's signature.
                    let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                    f(sig)
                }
            }
            _ => {
                // The default action (or an ignored fault the kernel would not ignore):
                // restore it and re-raise; the signal is blocked until this handler
                // returns, and then ends the process as it would have without us.
                // SAFETY: all-zero is SIG_DFL with an empty mask; sigaction and raise are
                // async-signal-safe.
                unsafe {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
                    libc::raise(libc::SIGBUS);
                }
            }
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use super::Fault;
    use std::io;

    pub(super) fn install() -> io::Result<()> {
        Ok(())
    }

    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) -> Result<(), Fault> {
        // SAFETY: the caller guarantees both ranges (see `super::copy`).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
        Ok(())
    }

    pub(super) unsafe fn zero(dst: *mut u8, n: usize) -> Result<(), Fault> {
        // SAFETY: the caller guarantees the range.
        unsafe { std::ptr::write_bytes(dst, 0, n) };
        Ok(())
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    /// Runs `f` in a forked child and returns the signal that ended it (None: it exited).
    fn child_signal(f: fn()) -> Option<i32> {
        // SAFETY: the child only runs `f` (no allocation, no locks) and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            f();
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(0) };
        }
        let mut st = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        libc::WIFSIGNALED(st).then(|| libc::WTERMSIG(st))
    }

    #[test]
    fn a_sigbus_outside_the_copies_still_ends_the_process() {
        install().unwrap();
        // A real fault outside the copy routine (a load beyond the end of a mapped file).
        let f = tempfile_of(8192);
        // SAFETY: a fresh mapping of 2 pages of `f`.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), 8192, libc::PROT_READ, libc::MAP_SHARED, f, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: shrinks our own temporary file.
        assert_eq!(unsafe { libc::ftruncate(f, 100) }, 0);
        MAPPED.store(p as usize, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            child_signal(|| {
                let p = MAPPED.load(std::sync::atomic::Ordering::SeqCst) as *const u8;
                // SAFETY: inside the mapping; the page is beyond the file, so it faults.
                let x = unsafe { std::ptr::read_volatile(p.add(4096)) };
                std::hint::black_box(x);
            }),
            Some(libc::SIGBUS)
        );
        // And in this process a copy from there is an error, not a death.
        let mut b = [0u8; 8];
        // SAFETY: both ranges are mapped; b is ours.
        assert_eq!(unsafe { copy(b.as_mut_ptr(), (p as *const u8).add(4096), 8) }, Err(Fault { done: 0 }));
        // SAFETY: the mapping made above, no longer used; f is our descriptor.
        unsafe {
            libc::munmap(p, 8192);
            libc::close(f);
        }
    }

    static MAPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn tempfile_of(len: i64) -> i32 {
        let p = std::env::temp_dir().join(format!("ioswitch-sys-sigbus-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f.set_len(len as u64).unwrap();
        std::os::fd::IntoRawFd::into_raw_fd(f)
    }
}
