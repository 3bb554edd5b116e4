//! Per-command I/O priority (`Cmd::ioprio`) reaches the kernel on the interfaces that
//! carry one, and is refused, with the interface named, on those that cannot.
//!
//! The kernel checks a priority when it prepares an io_uring or AIO read or write
//! (`ioprio_check_cap`): a value of an unknown class (4 to 7) fails with EINVAL, a valid
//! one runs (the real-time class needs CAP_SYS_ADMIN or CAP_SYS_NICE). So a command whose
//! priority is dropped on the way would succeed where it must fail: the EINVAL proves the
//! value went into `sqe->ioprio` / `aio_reqprio`.

use ioswitch::cmd::ioprio;
use ioswitch::{Buffer, Cmd, Data, Device, Error, Opts};
use ioswitch_testkit::skip;
use std::path::PathBuf;

const BS: u64 = 4096;

struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        let p = std::env::temp_dir().join(format!("ioswitch-ioprio-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        TempFile(p)
    }
    fn open(&self, opts: &str) -> Device {
        let o: Opts = format!("create=1,size=1MiB,{opts}").parse().unwrap_or_else(|e| panic!("{opts}: {e}"));
        Device::open(self.0.to_str().unwrap(), &o).unwrap_or_else(|e| panic!("{} with {opts}: {e}", self.0.display()))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Submits `cmd` with one buffer on a queue of the device and waits for it: the
/// completion's errno (0 for success), or the submission's refusal.
fn run_one(dev: &Device, cmd: Cmd) -> Result<i32, Error> {
    let mut q = dev.queue(4)?;
    let buf = dev.alloc(BS as usize)?;
    q.submit(&cmd, Data::One(buf), 7).map_err(|r| r.error)?;
    let mut errno = None;
    q.wait(1, |c| {
        assert_eq!(c.tag, 7);
        errno = Some(c.status.errno().unwrap_or(if c.status.is_ok() { 0 } else { libc::EIO }));
    })?;
    Ok(errno.expect("one completion"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn the_kernel_sees_the_priority_on_io_uring_and_libaio() {
    const T: &str = "the_kernel_sees_the_priority_on_io_uring_and_libaio";
    let f = TempFile::new("kernel");
    for iface in ["io_uring", "libaio"] {
        let dev = match std::panic::catch_unwind(|| f.open(&format!("async={iface}"))) {
            Ok(d) => d,
            Err(_) => {
                skip(T, &format!("async={iface} does not open here"));
                continue;
            }
        };
        let mut cases = vec![
            (ioprio::NONE, 0),
            (ioprio::value(ioprio::CLASS_BE, 2), 0),
            (ioprio::value(ioprio::CLASS_IDLE, 0), 0),
            // An unknown class: the kernel refuses it, so it was there to see.
            (ioprio::value(7, 0), libc::EINVAL),
            (ioprio::value(5, 1), libc::EINVAL),
        ];
        if is_root() {
            cases.push((ioprio::value(ioprio::CLASS_RT, 0), 0));
        } else {
            skip(T, "the real-time class needs root (CAP_SYS_ADMIN); its case is left out");
        }
        for (prio, want) in cases {
            for cmd in [Cmd::fs_read(0, BS), Cmd::fs_write(BS, BS), Cmd::read(1, 8, 8), Cmd::write(1, 16, 8)] {
                let cmd = cmd.with_ioprio(prio);
                let got = run_one(&dev, cmd).unwrap_or_else(|e| panic!("async={iface}, {cmd:?}: refused: {e}"));
                assert_eq!(got, want, "async={iface}: {} with ioprio {prio:#06x}", cmd.describe());
            }
        }
        // Vectored (the slow path of both interfaces) carries it too.
        let mut q = dev.queue(2).unwrap();
        let bufs = vec![dev.alloc(BS as usize).unwrap(), dev.alloc(BS as usize).unwrap()];
        q.submit(&Cmd::fs_read(0, 2 * BS).with_ioprio(ioprio::value(7, 0)), Data::Vec(bufs), 1).unwrap();
        let mut st = None;
        q.wait(1, |c| st = Some(c.status)).unwrap();
        assert_eq!(st.unwrap().errno(), Some(libc::EINVAL), "async={iface}: vectored read with class 7");
        // A slot that carried a priority carries none for the next command on it (a
        // queue of one slot: the plain read would fail with the refused class left over).
        let mut q = dev.queue(1).unwrap();
        let mut buf = Some(dev.alloc(BS as usize).unwrap());
        for (prio, want) in [(ioprio::value(7, 0), Some(libc::EINVAL)), (ioprio::NONE, None)] {
            let b = buf.take().unwrap();
            q.submit(&Cmd::fs_read(0, BS).with_ioprio(prio), Data::One(b), 2).unwrap();
            q.wait(1, |c| {
                assert_eq!(c.status.errno(), want, "async={iface}: read with ioprio {prio:#06x} on a reused slot");
                buf = c.data.into_one();
            })
            .unwrap();
        }
    }
}

#[test]
fn interfaces_that_cannot_carry_a_priority_refuse_it_by_name() {
    let f = TempFile::new("refuse");
    let prio = ioprio::value(ioprio::CLASS_BE, 3);
    for iface in ["nil", "emu", "thrpool", "posix"] {
        let dev = f.open(&format!("async={iface}"));
        let e = run_one(&dev, Cmd::fs_read(0, BS).with_ioprio(prio)).expect_err(iface).to_string();
        assert!(e.contains(iface) && e.contains("I/O priority"), "async={iface}: {e}");
        assert!(e.contains(f.0.to_str().unwrap()), "async={iface}: the refusal names the device: {e}");
        // Without one the same command runs.
        assert_eq!(run_one(&dev, Cmd::fs_read(0, BS)).unwrap(), 0, "async={iface}");
    }
    // A sync call carries none.
    let dev = f.open("sync=psync");
    let mut buf = [Buffer::alloc(BS as usize, 4096).unwrap()];
    let e = dev.pass(&Cmd::fs_read(0, BS).with_ioprio(prio), &mut buf).unwrap_err().to_string();
    assert!(e.contains("sync") && e.contains("I/O priority"), "{e}");
    assert_eq!(dev.pass(&Cmd::fs_read(0, BS), &mut buf).unwrap(), BS);
    // On io_uring and libaio, only reads and writes carry one.
    for iface in ["io_uring", "libaio"] {
        let Ok(dev) = std::panic::catch_unwind(|| f.open(&format!("async={iface}"))) else { continue };
        let mut q = dev.queue(2).unwrap();
        let e = q.submit(&Cmd::fs_flush().with_ioprio(prio), Data::None, 1).map(drop).unwrap_err().error.to_string();
        assert!(e.contains(iface) && e.contains("reads and writes only"), "async={iface}: {e}");
    }
}
