//! POSIX aio as glibc implements it (`aio_read(3)`, `aio_write(3)`, `aio_fsync(3)`,
//! `aio_error(3)`, `aio_return(3)`, `aio_suspend(3)`), with the control blocks and the
//! buffers glibc's helper threads use owned here.
//!
//! [`Cbs`] owns a pool of control blocks (`aiocb`s, boxed so they never move while glibc
//! holds their addresses) and, per command slot, the command's [`Data`] with a count of
//! its segments in flight. A segment is started from a buffer of its slot's data, so no
//! safe call can hand glibc a pointer that outlives what it points to; a slot's data
//! comes out only while none of its segments runs. Dropping a `Cbs` waits for every
//! request in flight, or leaks the control blocks and the data they use if waiting fails.
//!
//! glibc's helper still reads a control block (its notification field) under glibc's
//! request lock right after it stores the final error code. glibc 2.34 and later read that
//! code under the same lock in `aio_error`; older versions do not, so before a finished
//! control block is reused or freed, [`Cbs::collect`] passes through the lock once per
//! batch, with an `aio_suspend` on a finished request (which returns at once).

use crate::buf::Data;
use std::cell::UnsafeCell;
use std::io;

/// Most control blocks one `aio_suspend` call waits on (glibc puts two arrays of that
/// many entries on the caller's stack).
const SUSPEND_MAX: usize = 1024;

/// A zeroed control block with no notification.
fn blank_aiocb() -> libc::aiocb {
    // SAFETY: aiocb is plain C data (integers and pointers); all-zero is a valid value.
    let mut cb: libc::aiocb = unsafe { std::mem::zeroed() };
    cb.aio_sigevent.sigev_notify = libc::SIGEV_NONE;
    cb
}

/// Whether POSIX aio works in this process: one 1-byte `aio_read` of /dev/null (which
/// starts a glibc helper thread); the error says why not.
pub(crate) fn probe() -> Result<(), String> {
    let null =
        std::fs::File::open("/dev/null").map_err(|e| format!("cannot open /dev/null to probe POSIX aio: {e}"))?;
    let mut byte = Box::new([0u8; 1]);
    let mut cb = Box::new(blank_aiocb());
    cb.aio_fildes = std::os::fd::AsRawFd::as_raw_fd(&null);
    cb.aio_buf = byte.as_mut_ptr() as *mut libc::c_void;
    cb.aio_nbytes = 1;
    let p: *mut libc::aiocb = &mut *cb;
    // SAFETY: the control block and the byte it reads into are boxed and live until the
    // request has finished (waited for below).
    if unsafe { libc::aio_read(p) } != 0 {
        let e = io::Error::last_os_error();
        return Err(format!("aio_read failed ({e}): glibc could not start its POSIX aio helper thread"));
    }
    loop {
        // SAFETY: p is the control block of a request this function started.
        let err = unsafe { libc::aio_error(p) };
        let list = [p as *const libc::aiocb];
        // SAFETY: list holds one valid control block. With the request finished this
        // returns at once, and passing glibc's request lock means its helper is done
        // with the control block.
        let rc = unsafe { libc::aio_suspend(list.as_ptr(), 1, std::ptr::null()) };
        if err == libc::EINPROGRESS {
            if rc != 0 && !matches!(super::errno(), libc::EINTR | libc::EAGAIN) {
                // The request may still run: leak what it uses rather than free it.
                std::mem::forget(cb);
                std::mem::forget(byte);
                return Err(format!("aio_suspend failed: {}", io::Error::last_os_error()));
            }
            continue;
        }
        // SAFETY: the request has finished; aio_return is called once.
        let r = unsafe { libc::aio_return(p) };
        if err != 0 || r != 0 {
            let e = io::Error::from_raw_os_error(if err != 0 { err } else { libc::EIO });
            return Err(format!("a test read of /dev/null through POSIX aio failed: {e}"));
        }
        return Ok(());
    }
}

/// One segment to start.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seg {
    /// `aio_fsync(O_DSYNC)`.
    Fsync,
    /// `aio_read`, or `aio_write` when `write`, of at most `len` bytes of buffer `buf`
    /// of the slot's data, at byte `offset`.
    Rw { write: bool, buf: usize, offset: u64, len: u64 },
}

/// What [`Cbs::start`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Started {
    /// The segment runs, asking for this many bytes.
    Running(u64),
    /// No control block is free: start it when one is.
    NoCb,
    /// glibc refused it (or the buffer does not exist): the errno.
    Failed(i32),
}

/// A finished segment: its slot, the bytes it asked for, `aio_error` and `aio_return`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Finished {
    /// The slot it belongs to.
    pub slot: u32,
    /// The bytes it asked for (0 for fsync).
    pub want: u64,
    /// `aio_error`: 0, or the errno.
    pub error: i32,
    /// `aio_return`: the bytes moved, or -1.
    pub ret: isize,
}

/// The control blocks of one queue and the data of its command slots (see the module).
pub(crate) struct Cbs {
    fd: libc::c_int,
    /// Control blocks; glibc's helpers write into those in flight, so they are only
    /// touched through raw pointers.
    cbs: Box<[UnsafeCell<libc::aiocb>]>,
    /// Per control block: the slot it serves and the bytes it asks for.
    cb_slot: Box<[u32]>,
    cb_len: Box<[u64]>,
    cb_free: Vec<u32>,
    /// Control blocks in flight, oldest first.
    running: Vec<u32>,
    /// The list `aio_suspend` reads.
    suspend: Box<[*const libc::aiocb]>,
    /// Per slot: the command's data, and its segments in flight.
    data: Box<[Data]>,
    segs: Box<[u32]>,
}

// SAFETY: the raw pointers (in `suspend` and inside the control blocks) point into memory
// this struct owns: its control block table and the data of its slots. glibc's helper
// threads use them whichever thread owns the queue.
unsafe impl Send for Cbs {}

impl Cbs {
    /// `slots` command slots and `pool` control blocks on descriptor `fd`.
    pub(crate) fn new(fd: libc::c_int, slots: usize, pool: usize) -> Cbs {
        Cbs {
            fd,
            cbs: (0..pool).map(|_| UnsafeCell::new(blank_aiocb())).collect(),
            cb_slot: vec![0; pool].into_boxed_slice(),
            cb_len: vec![0; pool].into_boxed_slice(),
            cb_free: (0..pool as u32).rev().collect(),
            running: Vec::with_capacity(pool),
            suspend: vec![std::ptr::null(); pool.min(SUSPEND_MAX)].into_boxed_slice(),
            data: (0..slots).map(|_| Data::None).collect(),
            segs: vec![0; slots].into_boxed_slice(),
        }
    }

    /// Control blocks in flight.
    pub(crate) fn running(&self) -> usize {
        self.running.len()
    }

    /// The data of slot `s`.
    pub(crate) fn data(&self, s: u32) -> &Data {
        &self.data[s as usize]
    }

    /// Gives slot `s` the data of a new command; the data comes back if a segment of the
    /// slot still runs.
    pub(crate) fn hold(&mut self, s: u32, data: Data) -> Result<(), Data> {
        if self.segs[s as usize] > 0 {
            return Err(data);
        }
        self.data[s as usize] = data;
        Ok(())
    }

    /// Takes the data of slot `s`; `None` while a segment of it runs.
    pub(crate) fn take(&mut self, s: u32) -> Option<Data> {
        (self.segs[s as usize] == 0).then(|| std::mem::take(&mut self.data[s as usize]))
    }

    /// Starts a segment of slot `s`.
    pub(crate) fn start(&mut self, s: u32, seg: Seg) -> Started {
        let mut a = blank_aiocb();
        a.aio_fildes = self.fd;
        let mut len = 0;
        if let Seg::Rw { buf, offset, len: want, .. } = seg {
            let Some(b) = self.data[s as usize].bufs().get(buf) else { return Started::Failed(libc::EINVAL) };
            len = want.min(b.len() as u64);
            a.aio_buf = b.as_ptr() as *mut libc::c_void;
            a.aio_nbytes = len as usize;
            a.aio_offset = offset as libc::off_t;
        }
        let Some(cb) = self.cb_free.pop() else { return Started::NoCb };
        let p = self.cbs[cb as usize].get();
        // SAFETY: this control block is free (not in flight), so nothing else reads or
        // writes it; p points into the boxed table.
        unsafe { p.write(a) };
        // SAFETY: p is a filled control block at a stable address; the buffer it names
        // belongs to slot `s`, whose data stays until its segments have finished.
        let rc = unsafe {
            match seg {
                Seg::Fsync => libc::aio_fsync(libc::O_DSYNC, p),
                Seg::Rw { write: false, .. } => libc::aio_read(p),
                Seg::Rw { write: true, .. } => libc::aio_write(p),
            }
        };
        if rc != 0 {
            self.cb_free.push(cb);
            return Started::Failed(super::errno());
        }
        (self.cb_slot[cb as usize], self.cb_len[cb as usize]) = (s, len);
        self.segs[s as usize] += 1;
        self.running.push(cb);
        Started::Running(len)
    }

    /// Scans the control blocks in flight and appends those that finished to `out`; their
    /// control blocks are free again.
    pub(crate) fn collect(&mut self, out: &mut Vec<Finished>) {
        let mut keep = 0;
        let first = out.len();
        for r in 0..self.running.len() {
            let cb = self.running[r];
            // SAFETY: cb is a control block of a request this queue started.
            let e = unsafe { libc::aio_error(self.cbs[cb as usize].get()) };
            if e == libc::EINPROGRESS {
                self.running[keep] = cb;
                keep += 1;
            } else {
                out.push(Finished { slot: cb, want: 0, error: 0, ret: 0 });
            }
        }
        self.running.truncate(keep);
        let Some(f) = out.get(first) else { return };
        let list = [self.cbs[f.slot as usize].get() as *const libc::aiocb];
        // SAFETY: list holds one finished control block, so this returns at once; it takes
        // glibc's request lock, after which no helper touches the finished blocks.
        unsafe { libc::aio_suspend(list.as_ptr(), 1, std::ptr::null()) };
        for f in &mut out[first..] {
            let cb = f.slot;
            let p = self.cbs[cb as usize].get();
            // SAFETY: the request has finished and glibc is done with the block; each
            // finished request is asked for its error and return value once.
            let (e, r) = unsafe { (libc::aio_error(p), libc::aio_return(p)) };
            *f = Finished { slot: self.cb_slot[cb as usize], want: self.cb_len[cb as usize], error: e, ret: r };
            self.segs[f.slot as usize] -= 1;
            self.cb_free.push(cb);
        }
    }

    /// Blocks in `aio_suspend` until one of the oldest requests in flight finishes.
    pub(crate) fn suspend(&mut self) -> Result<(), i32> {
        let k = self.running.len().min(self.suspend.len());
        for (dst, &cb) in self.suspend.iter_mut().zip(&self.running[..k]) {
            *dst = self.cbs[cb as usize].get();
        }
        // SAFETY: suspend[..k] point to control blocks of requests in flight, which stay
        // put until they are collected.
        let rc = unsafe { libc::aio_suspend(self.suspend.as_ptr(), k as libc::c_int, std::ptr::null()) };
        if rc != 0 {
            return Err(super::errno());
        }
        Ok(())
    }
}

impl Drop for Cbs {
    fn drop(&mut self) {
        // Wait for what glibc's helpers hold before freeing it.
        let mut done = Vec::with_capacity(self.running.len());
        loop {
            self.collect(&mut done);
            done.clear();
            if self.running.is_empty() {
                return;
            }
            match self.suspend() {
                Ok(()) | Err(libc::EINTR | libc::EAGAIN) => {}
                Err(_) => break,
            }
        }
        // Helpers may still write into these control blocks and buffers: leak them.
        for (data, &segs) in self.data.iter_mut().zip(self.segs.iter()) {
            if segs > 0 {
                std::mem::forget(std::mem::take(data));
            }
        }
        std::mem::forget(std::mem::take(&mut self.cbs));
    }
}
