//! `emu`: the async API over the device's sync interface. Submissions wait in the queue
//! and run, one after another, when the queue is poked or waited on. No concurrency, no
//! threads: the simplest way to use any sync interface through the async API.

use super::{AsyncQueue, Io, Job};
use super::{Build, Descriptor, Role};
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::dev::DevKind;
use crate::dev::Inner;
use crate::error::Error;
use crate::queue::CompletionSink;
use std::collections::VecDeque;
use std::sync::Arc;

/// `async=emu`: the async API over the sync interface, run when the queue is poked.
pub(crate) const DESCRIPTOR: Descriptor = Descriptor::new(
    "emu",
    Role::Async,
    "async API over the sync interface, executed when the queue is poked",
    super::controller_only,
    Build::Async { probe: super::no_probe, queue: |dev, depth| Ok(super::Backend::Emu(Emu::new(dev.clone(), depth))) },
)
.defaults(&[DevKind::Ramdisk, DevKind::DevDax]);

pub(crate) struct Emu {
    dev: Arc<Inner>,
    pending: VecDeque<Job>,
    syscalls: u64,
}

impl Emu {
    pub(crate) fn new(dev: Arc<Inner>, depth: u32) -> Emu {
        Emu { dev, pending: VecDeque::with_capacity(depth as usize), syscalls: 0 }
    }
}

impl AsyncQueue for Emu {
    fn submit(&mut self, io: &Io, cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        self.pending.push_back(Job { io: *io, cmd: *cmd, data, tag });
        Ok(())
    }

    fn commit(&mut self) -> Result<u32, Error> {
        Ok(0)
    }

    fn reap(&mut self, _min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        let Some(sync) = self.dev.sync() else {
            // Device::open refuses emu without a sync interface; keep the queue safe anyway.
            let source = std::io::Error::other("the device has no sync interface");
            return Err(Error::Queue { dev: self.dev.uri.clone(), iface: "emu", what: "running a command", source });
        };
        let mut n = 0;
        while n < max {
            let Some(p) = self.pending.pop_front() else { break };
            self.syscalls += sync.syscalls_per_cmd();
            f.put(p.run(sync));
            n += 1;
        }
        Ok(n)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }
}
