//! `nil`: completes every command at once and moves no data. What it costs is what the
//! library itself costs per command.

use super::{AsyncQueue, Io, SyncIo};
use super::{Build, Descriptor, Role};
use crate::buf::Buffer;
use crate::buf::{Data, DataWords, Fifo};
use crate::cmd::Cmd;
use crate::error::Error;
use crate::queue::{Completion, CompletionSink};
use crate::spec::Status;

/// `sync=nil`: completes every command at once and moves no data.
pub(crate) const SYNC: Descriptor = Descriptor::new(
    "nil",
    Role::Sync,
    "completes every command at once and moves no data (the sync twin of async nil)",
    super::controller_only,
    Build::Sync(|_| Ok(Box::new(NilSync))),
)
.fio(&["null"]);

/// `async=nil`: completes every command at once and moves no data: what the library costs.
pub(crate) const ASYNC: Descriptor = Descriptor::new(
    "nil",
    Role::Async,
    "completes every command at once and moves no data: measures library overhead",
    super::controller_only,
    Build::Async { probe: super::no_probe, queue: |_, depth| Ok(super::Backend::Nil(Nil::new(depth))) },
)
.fio(&["null"]);

/// A finished command waiting to be reaped: its completion without the status (always
/// success), 8 bytes less to move. The data is kept as its four words (see [`DataWords`]).
struct Done {
    tag: u64,
    result: u64,
    data: DataWords,
}

pub(crate) struct Nil {
    /// The completions. The [`Queue`](crate::Queue) never lets more than `depth` be
    /// outstanding; the ring holds at least that many.
    ring: Fifo<Done>,
}

impl Nil {
    pub(crate) fn new(depth: u32) -> Nil {
        Nil { ring: Fifo::new(depth as usize) }
    }
}

impl AsyncQueue for Nil {
    #[inline(always)]
    fn submit(&mut self, io: &Io, _cmd: &Cmd, data: Data, tag: u64) -> Result<(), (Error, Data)> {
        if self.ring.is_full() {
            return Err((Error::Busy { depth: self.ring.len() as u32 }, data));
        }
        // Not full, so the push cannot fail (and the check inside it folds into the one
        // above).
        let pushed = self.ring.push(Done { tag, result: io.len, data: DataWords::new(data) });
        debug_assert!(pushed.is_ok());
        Ok(())
    }

    #[inline(always)]
    fn commit(&mut self) -> Result<u32, Error> {
        Ok(0)
    }

    #[inline(always)]
    fn reap(&mut self, _min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        // A loop rather than `drain_front` with a closure: the sink's `put` is inlined here
        // (a closure instance may land in another codegen unit, out of line).
        let mut n = 0;
        while n < max {
            let Some(d) = self.ring.pop_front() else { break };
            n += 1;
            f.put(Completion { tag: d.tag, status: Status::OK, result: d.result, data: d.data.into_data() });
        }
        Ok(n)
    }

    fn syscalls(&self) -> u64 {
        0
    }

    #[inline(always)]
    fn commit_and_reap(&mut self, min: u32, max: u32, f: &mut impl CompletionSink) -> Result<u32, Error> {
        self.reap(min, max, f)
    }
}

impl Drop for Nil {
    fn drop(&mut self) {
        // Completions never reaped (the queue was dropped, or a callback panicked).
        self.ring.drain_front(usize::MAX, |d| drop(d.data.into_data()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::be::Op;

    fn io() -> Io {
        Io { op: Op::Read, offset: 0, len: 512 }
    }

    #[test]
    fn partial_reaps_keep_order_and_never_grow_the_ring() {
        let mut nil = Nil::new(2);
        let size = nil.ring.capacity();
        let cmd = Cmd::fs_read(0, 512);
        let mut seen = vec![];
        nil.submit(&io(), &cmd, Data::None, 0).unwrap();
        for tag in 1..1000u64 {
            nil.submit(&io(), &cmd, Data::None, tag).unwrap();
            assert_eq!(nil.reap(0, 1, &mut |c: Completion| seen.push(c.tag)).unwrap(), 1);
            assert_eq!((nil.ring.capacity(), nil.ring.len()), (size, 1), "the ring keeps its size");
        }
        assert_eq!(nil.reap(0, u32::MAX, &mut |c: Completion| seen.push(c.tag)).unwrap(), 1);
        assert_eq!(seen, (0..1000).collect::<Vec<_>>(), "completions come in submission order");
        assert_eq!(nil.reap(0, u32::MAX, &mut |_| panic!("nothing left")).unwrap(), 0);
    }

    #[test]
    fn completions_left_in_the_ring_stay_in_order_and_drop_with_the_queue() {
        let buf = |n| Data::One(crate::Buffer::alloc(n, 512).unwrap());
        let mut nil = Nil::new(4);
        nil.submit(&io(), &Cmd::fs_read(0, 512), buf(512), 1).unwrap();
        nil.submit(&io(), &Cmd::fs_read(0, 512), Data::None, 2).unwrap();
        assert_eq!(nil.reap(0, 1, &mut |c: Completion| assert_eq!(c.tag, 1)).unwrap(), 1);
        nil.submit(&io(), &Cmd::fs_read(0, 512), buf(1024), 3).unwrap();
        let mut left = vec![];
        assert_eq!(nil.reap(0, 1, &mut |c: Completion| left.push((c.tag, c.data.total_len()))).unwrap(), 1);
        assert_eq!(left, [(2, 0)], "the oldest completion comes first");
        assert_eq!(nil.ring.len(), 1, "tag 3 and its buffer are still in the ring");
        // Dropping the queue now drops tag 3's buffer through `Drop for Nil` (a double
        // free there would abort the test; a leak shows only under valgrind or miri).
        drop(nil);
    }
    /// A sink of the caller's own type (what the C ABI's lean path uses) gets every
    /// completion once, in order, through `Queue::poke_with` (at most `max`, never
    /// waiting) and `Queue::wait_with`, and the queue counts them as reaped.
    #[test]
    fn a_completion_sink_takes_completions_through_poke_with_and_wait_with() {
        use crate::be::testutil::{open, temp_in};
        use crate::queue::CompletionSink;
        struct Tags(Vec<(u64, u64)>);
        impl CompletionSink for Tags {
            #[inline(always)]
            fn put(&mut self, c: Completion) {
                assert!(c.status.is_ok(), "{}", c.status);
                self.0.push((c.tag, c.result));
            }
        }
        let t = temp_in(&std::env::temp_dir(), "nilsink");
        let dev = open(&t, "create=1,size=1MiB,async=nil");
        let mut q = dev.queue(4).unwrap();
        for tag in 0..4u64 {
            q.submit(&Cmd::fs_read(tag * 4096, 4096), dev.alloc(4096).unwrap().into(), tag).unwrap();
        }
        let mut sink = Tags(vec![]);
        assert_eq!(q.poke_with(3, &mut sink).unwrap(), 3);
        assert_eq!(sink.0, [(0, 4096), (1, 4096), (2, 4096)], "the first 3, oldest first");
        assert_eq!(q.outstanding(), 1);
        q.submit(&Cmd::fs_read(0, 512), dev.alloc(512).unwrap().into(), 9).unwrap();
        assert_eq!(q.wait_with(2, &mut sink).unwrap(), 2);
        assert_eq!(sink.0[3..], [(3, 4096), (9, 512)]);
        assert_eq!((q.outstanding(), q.stats().completed), (0, 5));
        assert_eq!(q.poke_with(0, &mut sink).unwrap(), 0, "nothing outstanding: a commit only");
        assert_eq!(sink.0.len(), 5);
    }
    /// `Queue::submit_poke_with` is `submit` then `poke_with`: on nil with nothing
    /// outstanding the command's completion reaches the sink in the call (a read or
    /// write straight from the submission, a flush through the ring), with what has
    /// completed before it first when something is outstanding; a refused command hands
    /// its data back and counts nothing.
    #[test]
    fn submit_poke_with_hands_completions_over_as_submit_then_poke_with() {
        use crate::be::testutil::{open, temp_in};
        struct Tags(Vec<(u64, u64)>);
        impl CompletionSink for Tags {
            fn put(&mut self, c: Completion) {
                assert!(c.status.is_ok(), "{}", c.status);
                self.0.push((c.tag, c.result));
            }
        }
        let t = temp_in(&std::env::temp_dir(), "nilsubpoke");
        let dev = open(&t, "create=1,size=1MiB,async=nil");
        let mut q = dev.queue(4).unwrap();
        let mut sink = Tags(vec![]);
        let buf = |n| Data::One(dev.alloc(n).unwrap());
        let n = q.submit_poke_with(&Cmd::fs_read(0, 4096), buf(4096), 1, 4, &mut sink).unwrap().unwrap();
        assert_eq!((n, &sink.0[..], q.outstanding()), (1, &[(1, 4096)][..], 0));
        let n = q.submit_poke_with(&Cmd::fs_write(4096, 512), buf(512), 2, 1, &mut sink).unwrap().unwrap();
        assert_eq!((n, sink.0[1], q.outstanding()), (1, (2, 512), 0));
        let n = q.submit_poke_with(&Cmd::fs_flush(), Data::None, 3, 1, &mut sink).unwrap().unwrap();
        assert_eq!((n, sink.0[2], q.outstanding()), (1, (3, 0), 0));
        // Outstanding ones first, at most max.
        q.submit(&Cmd::fs_read(0, 512), buf(512), 4).unwrap();
        q.submit(&Cmd::fs_read(0, 512), buf(512), 5).unwrap();
        let n = q.submit_poke_with(&Cmd::fs_read(0, 1024), buf(1024), 6, 2, &mut sink).unwrap().unwrap();
        assert_eq!((n, &sink.0[3..], q.outstanding()), (2, &[(4, 512), (5, 512)][..], 1));
        let n = q.submit_poke_with(&Cmd::fs_read(0, 2048), buf(2048), 7, 0, &mut sink).unwrap().unwrap();
        assert_eq!((n, &sink.0[5..], q.outstanding()), (2, &[(6, 1024), (7, 2048)][..], 0));
        // Refused: past the end, or a buffer too short; the data comes back, nothing counted.
        let r = q.submit_poke_with(&Cmd::fs_read(1 << 20, 4096), buf(4096), 8, 4, &mut sink).unwrap_err();
        assert!(matches!(r.error, Error::OutOfRange { .. }), "{}", r.error);
        assert_eq!(r.data.total_len(), 4096);
        let r = q.submit_poke_with(&Cmd::fs_read(0, 4096), buf(512), 9, 4, &mut sink).unwrap_err();
        assert_eq!(r.data.total_len(), 512);
        assert_eq!(sink.0.len(), 7);
        let st = q.stats();
        assert_eq!((st.submitted, st.completed, q.outstanding()), (7, 7, 0));
    }
    /// On an interface that completes later (a thread pool), `submit_poke_with` submits
    /// and pokes: whatever the poke finds is in the sink, the rest comes with a wait, each
    /// completion once.
    #[test]
    fn submit_poke_with_on_a_thread_pool_submits_then_pokes() {
        use crate::be::testutil::{open, temp_in};
        let t = temp_in(&std::env::temp_dir(), "thrsubpoke");
        let dev = open(&t, "create=1,size=1MiB,async=thrpool");
        let mut q = dev.queue(4).unwrap();
        let mut seen: Vec<(u64, u64)> = vec![];
        let mut sink = |c: Completion| {
            assert!(c.status.is_ok(), "{}", c.status);
            seen.push((c.tag, c.result));
        };
        let mut poked = 0;
        for tag in 0..3u64 {
            let data = Data::One(dev.alloc(4096).unwrap());
            poked += q.submit_poke_with(&Cmd::fs_read(tag * 4096, 4096), data, tag, 0, &mut sink).unwrap().unwrap();
        }
        let r = q.submit_poke_with(&Cmd::fs_read(1 << 20, 4096), Data::One(dev.alloc(4096).unwrap()), 9, 0, &mut sink);
        assert_eq!(r.unwrap_err().data.total_len(), 4096, "refused, the data handed back");
        let waited = q.wait_with(3 - poked, &mut sink).unwrap();
        assert_eq!((poked + waited, q.outstanding()), (3, 0));
        seen.sort_unstable();
        assert_eq!(seen, [(0, 4096), (1, 4096), (2, 4096)]);
    }
}
