//! `nil`: completes every command at once and moves no data. What it costs is what the
//! library itself costs per command.

use super::{AsyncQueue, Io, SyncIo};
use crate::buf::Buffer;
use crate::buf::Data;
use crate::cmd::Cmd;
use crate::error::Error;
use crate::queue::Completion;
use crate::spec::Status;
use std::collections::VecDeque;

pub(crate) struct Nil {
    done: VecDeque<Completion>,
}

impl Nil {
    pub(crate) fn new(depth: u32) -> Nil {
        Nil { done: VecDeque::with_capacity(depth as usize) }
    }
}

impl AsyncQueue for Nil {
    #[inline]
    fn submit(&mut self, io: &Io, _cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        self.done.push_back(Completion { tag, status: Status::OK, result: io.len, data });
        Ok(())
    }

    #[inline]
    fn commit(&mut self) -> Result<u32, Error> {
        Ok(0)
    }

    #[inline]
    fn reap(&mut self, _min: u32, max: u32, f: &mut dyn FnMut(Completion)) -> Result<u32, Error> {
        let mut n = 0;
        while n < max {
            let Some(c) = self.done.pop_front() else { break };
            f(c);
            n += 1;
        }
        Ok(n)
    }

    fn syscalls(&self) -> u64 {
        0
    }
}

/// The sync `nil`: every command succeeds at once, moving no data; result = bytes it
/// would have moved. What fio's null engine is at iodepth 1.
pub(crate) struct NilSync;

impl SyncIo for NilSync {
    #[inline]
    fn exec(&self, io: &Io, _cmd: &Cmd, _bufs: &mut [Buffer]) -> Result<u64, Status> {
        Ok(io.len)
    }

    fn syscalls_per_cmd(&self) -> u64 {
        0
    }
}
