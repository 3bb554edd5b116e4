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
//! Code that is not one `rep` instruction (the `pmem` interface's copies: glibc's `memcpy`,
//! non-temporal stores, cache-line write-backs) runs under [`guarded`] instead: one guard
//! per command, not per copy or per cache line. A routine in assembly saves the
//! callee-saved registers on its stack, records its stack pointer in a thread-local slot,
//! and calls the code; a SIGBUS the kernel raises on that thread while the slot is set
//! resumes in the routine's exit path with the stack pointer it recorded (the frames of
//! the guarded code are abandoned, which is why that code must own nothing with a
//! destructor), and the routine returns the faulting address. Entering and leaving a guard
//! costs a call, eight pushes and pops, and two stores to the slot; no system call.
//! The handler reads the slot, a constant-initialised thread-local without destructor: in
//! an executable a plain `fs:`-relative load; in a shared library (the C API, the Python
//! module) glibc's `__tls_get_addr`, whose fast path the guard's own access has already
//! set up on that thread (a `dlopen` by another thread in between could send it down its
//! slow path, which glibc does not document as async-signal-safe).
//!
//! Only x86-64 Linux has the routines; elsewhere [`copy`] and [`zero`] are plain copies,
//! [`guarded`] just runs the code, and a SIGBUS still ends the process (said in
//! docs/RELIABILITY.md).

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

/// Runs `f` so that a SIGBUS the kernel raises on this thread while it runs (a page of a
/// mapping the kernel cannot provide, anywhere in `f`, also inside library code it calls)
/// stops it: the result is then `Err` with the faulting address (`si_addr`; at least 1).
/// Guards nest: an inner one restores the outer one when it ends.
///
/// # Safety
/// At a fault, the frames of `f` and of everything it called are abandoned without
/// running any code of theirs, so `f` must not create or hold anything with a destructor
/// (a lock guard, an allocation, a `Vec`) and must leave nothing half-updated that later
/// code relies on besides the bytes it copies; and it must not panic (a panic cannot
/// unwind out of the guard: the process aborts). On other architectures `f` runs unguarded.
pub(crate) unsafe fn guarded<F: FnMut()>(f: F) -> Result<(), usize> {
    // SAFETY: forwarded from the caller.
    unsafe { imp::guarded(f) }
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
        // guard(rdi = f, rsi = arg, rdx = slot): calls f(arg) with *slot set to the stack
        // pointer from which `_out` unwinds; returns 0, or from `_out` (entered by the
        // handler with rsp = *slot, rax = the faulting address) that address. The slot's
        // previous value is kept on the stack and put back on both paths (nesting).
        ".p2align 4",
        ".globl ioswitch_sigbus_guard",
        ".hidden ioswitch_sigbus_guard",
        ".type ioswitch_sigbus_guard,@function",
        "ioswitch_sigbus_guard:",
        "    push rbx",
        "    push rbp",
        "    push r12",
        "    push r13",
        "    push r14",
        "    push r15",
        "    push rdx",
        "    push qword ptr [rdx]",
        // The return address and 8 pushes: 8 more bytes make rsp 16-byte aligned, as the
        // call needs.
        "    sub rsp, 8",
        "    mov [rdx], rsp",
        "    mov rax, rdi",
        "    mov rdi, rsi",
        "    call rax",
        "    xor eax, eax",
        ".globl ioswitch_sigbus_guard_out",
        ".hidden ioswitch_sigbus_guard_out",
        "ioswitch_sigbus_guard_out:",
        "    add rsp, 8",
        "    pop rcx",
        "    pop rdx",
        "    mov [rdx], rcx",
        "    pop r15",
        "    pop r14",
        "    pop r13",
        "    pop r12",
        "    pop rbp",
        "    pop rbx",
        "    ret",
        ".size ioswitch_sigbus_guard, .-ioswitch_sigbus_guard",
        ".popsection",
    );

    extern "C" {
        fn ioswitch_sigbus_copy(dst: *mut u8, src: *const u8, n: usize) -> usize;
        fn ioswitch_sigbus_zero(dst: *mut u8, n: usize) -> usize;
        fn ioswitch_sigbus_guard(
            f: extern "C" fn(*mut std::ffi::c_void),
            arg: *mut std::ffi::c_void,
            slot: *mut usize,
        ) -> usize;
        // Labels, declared as functions only to take their addresses; never called.
        fn ioswitch_sigbus_copy_insn();
        fn ioswitch_sigbus_copy_fixup();
        fn ioswitch_sigbus_zero_insn();
        fn ioswitch_sigbus_zero_fixup();
        fn ioswitch_sigbus_guard_out();
    }

    std::thread_local! {
        /// The stack pointer a fault on this thread resumes `ioswitch_sigbus_guard_out`
        /// with; 0 outside every guard. A constant-initialised `Cell` of an integer: no
        /// lazy initialisation and no destructor, so the handler may read it.
        static ARMED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    pub(super) unsafe fn guarded<F: FnMut()>(mut f: F) -> Result<(), usize> {
        extern "C" fn call<F: FnMut()>(arg: *mut std::ffi::c_void) {
            // SAFETY: `arg` is the `&mut F` passed below, live for the whole call.
            let f = unsafe { &mut *(arg as *mut F) };
            f()
        }
        let slot = ARMED.with(|a| a.as_ptr());
        // SAFETY: the routine calls `call::<F>` with the pointer to `f`, saves and
        // restores every callee-saved register, and writes only the slot (this thread's,
        // through `Cell::as_ptr`) and its own stack. At a fault it returns from its own
        // frame; what that abandons is the caller's contract (see `super::guarded`).
        let at = unsafe { ioswitch_sigbus_guard(call::<F>, &mut f as *mut F as *mut std::ffi::c_void, slot) };
        if at == 0 {
            Ok(())
        } else {
            Err(at)
        }
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
            // Inside a guard on this thread: unwind to the guard's exit with the faulting
            // address in rax (the thread-local is a plain constant-initialised cell).
            let armed = ARMED.with(|a| a.get());
            if armed != 0 {
                // SAFETY: as above; the saved registers of this thread's interrupted
                // context, and the kernel's siginfo.
                unsafe {
                    let g = &mut (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs;
                    let addr = ((*info).si_addr() as usize).max(1);
                    g[libc::REG_RSP as usize] = armed as libc::greg_t;
                    g[libc::REG_RAX as usize] = addr as libc::greg_t;
                    g[libc::REG_RIP as usize] = ioswitch_sigbus_guard_out as *const () as libc::greg_t;
                }
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

    pub(super) unsafe fn guarded<F: FnMut()>(mut f: F) -> Result<(), usize> {
        f();
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

    /// A fault anywhere inside a guard (here in glibc's memcpy, and in plain loads and
    /// stores) ends the guarded code with the faulting address; the registers the
    /// caller keeps across the call survive; guards nest; the process lives on, and once
    /// the guards are left a fault ends it as before.
    #[test]
    fn a_sigbus_anywhere_in_a_guard_returns_its_address_and_guards_nest() {
        install().unwrap();
        let f = tempfile_of(3 * 4096);
        // SAFETY: a fresh shared mapping of the 3 pages of `f`.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), 3 * 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        let base = p as usize;
        // SAFETY: shrinks our own temporary file: pages 1 and 2 are now beyond its end.
        assert_eq!(unsafe { libc::ftruncate(f, 100) }, 0);
        // Values live across the guard (in callee-saved registers or on the stack).
        let keep: Vec<u64> = (0..64).map(|i| i * 3 + 1).collect();
        let sum_before: u64 = keep.iter().sum();

        let mut b = vec![1u8; 8192];
        let n = std::hint::black_box(8192usize);
        let dst = b.as_mut_ptr();
        // SAFETY: the closure copies between the mapping and `b` and owns nothing.
        let r = unsafe { guarded(|| std::ptr::copy_nonoverlapping(base as *const u8, dst, n)) };
        let at = r.expect_err("a copy across the end of the file faults");
        assert!((base + 4096..base + 8192).contains(&at), "faulting address {at:#x}, mapping at {base:#x}");
        assert_eq!(keep.iter().sum::<u64>(), sum_before);

        // Stores fault too; a guard without a fault returns Ok and runs its code.
        // SAFETY: a volatile store into page 2 of the mapping (beyond the file's end).
        let r = unsafe { guarded(|| std::ptr::write_volatile((base + 2 * 4096 + 8) as *mut u8, 5)) };
        assert_eq!(r, Err(base + 2 * 4096 + 8));
        let mut ran = 0u32;
        // SAFETY: a load from page 0 (inside the file) and a store to a local.
        let r = unsafe { guarded(|| ran = std::ptr::read_volatile(base as *const u8) as u32 + 1) };
        assert_eq!((r, ran), (Ok(()), 1));

        // Nested: the inner fault is the inner guard's; then the outer guard is armed again.
        let mut inner = None;
        let mut after_inner = false;
        // SAFETY: loads from the mapping; the closures own nothing with a destructor.
        let outer = unsafe {
            guarded(|| {
                inner = Some(guarded(|| {
                    let _ = std::ptr::read_volatile((base + 4096 + 1) as *const u8);
                }));
                after_inner = true;
                let _ = std::ptr::read_volatile((base + 2 * 4096 + 2) as *const u8);
            })
        };
        assert_eq!(inner, Some(Err(base + 4096 + 1)));
        assert!(after_inner);
        assert_eq!(outer, Err(base + 2 * 4096 + 2));

        // Outside every guard a fault still ends the process (in a child).
        GUARDED_MAP.store(base, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            child_signal(|| {
                let p = GUARDED_MAP.load(std::sync::atomic::Ordering::SeqCst);
                // SAFETY: a load from page 1 of the mapping, inside a guard.
                let r = unsafe {
                    guarded(|| {
                        let _ = std::ptr::read_volatile((p + 4096) as *const u8);
                    })
                };
                if r != Err(p + 4096) {
                    // SAFETY: ends the child with a status the parent does not expect.
                    unsafe { libc::_exit(3) };
                }
                // SAFETY: the same load outside the guard: the page is beyond the file.
                std::hint::black_box(unsafe { std::ptr::read_volatile((p + 4096) as *const u8) });
            }),
            Some(libc::SIGBUS)
        );
        // SAFETY: the mapping made above, no longer used; f is our descriptor.
        unsafe {
            libc::munmap(p, 3 * 4096);
            libc::close(f);
        }
    }

    static MAPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static GUARDED_MAP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn tempfile_of(len: i64) -> i32 {
        let p = std::env::temp_dir().join(format!("ioswitch-sys-sigbus-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f.set_len(len as u64).unwrap();
        std::os::fd::IntoRawFd::into_raw_fd(f)
    }
}
