//! fio's `zonemode=zbd` on a zoned device, through the library's zone commands.
//!
//! The region (zone-aligned) is cut into the device's zones; only the first `capacity`
//! bytes of a zone are written or read (fio's rule), so a job moves at most
//! zones × capacity bytes per pass.
//! - Every write goes to its zone's write pointer (fio 3.33's `zbd_adjust_block`), where
//!   the zone's data came from (this run, or before it): a zone opened with room for the
//!   block is appended to. A zone is reset (Zone Management Send, Reset; counted as fio's
//!   "zone resets") only when a write goes to it while it is full, or when garbage
//!   collection chose it (below), and only when it holds data: fio's `zbd_reset_zone`
//!   does nothing for a zone whose write pointer is at its start, and counts nothing.
//!   A job that verifies its writes first resets every zone of its region that holds
//!   data, before it writes anything (fio's `zbd_file_reset`).
//! - Sequential writes go zone after zone.
//! - Random writes keep at most `max_open_zones` zones open (default: the device's
//!   limit, else 32), each picked at random; each write goes to the write pointer of a
//!   random open zone; a full zone is replaced by another.
//! - Reads (fio's `zbd_adjust_block` and `zbd_find_zone`): by default they stay in the
//!   written part of each zone, below its write pointer (taken from a zone report when
//!   the first job using the device starts, then moved by the writes and resets of every job
//!   that shares it). Sequential reads go
//!   from a zone's start to its write pointer, then on to the next zone holding at least a
//!   block; random reads draw a zone and an offset in its capacity, take the nearest zone
//!   holding a block when the drawn one holds none (above and below in turn), and fold the
//!   offset into the written part as fio does (`(offset % (written − len))`, block-aligned;
//!   the zone's start when it holds one block or less). When no zone (after the current
//!   one, for sequential reads) holds a block, the job ends there, without an error, as
//!   fio's does. With `read_beyond_wp=1`, reads go over each zone's capacity, written or
//!   not: sequential from each zone's start, or random within a random zone's capacity.
//!
//! Zone state is shared (fio's `zbd_info` per file, zbd.c `zbd_init_zone_info`): every job
//! of a run that uses one device (the clones of `numjobs`, and other sections naming the
//! same file) works on one [`Table`] of its zones, keyed by the device's name. A writer
//! owns a zone from the moment it is given a write position there until that write has
//! completed (fio's zone lock), so writes to a zone go in order at its write pointer; the
//! open zones are counted over all the jobs (`max_open_zones`, taken from the first job
//! as fio takes it) and per job (`job_max_open_zones`). A sequential writer appends at
//! the write pointer of a zone another writer has open. A writer that can neither open a
//! zone nor find an open one free waits until one is released.
//!
//! Several writes in flight (an async job at `iodepth>1`, fio's rule in zbd.c): fio's zone
//! lock is recursive and held from the offset choice until the write completes, so a job
//! may have several writes in flight to a zone it holds, each at the write pointer the
//! one before it moved (the pointer moves when a write is queued), and no other job
//! writes there until they have all completed. A job that would wait for a zone another
//! job holds, or reset a zone, first completes everything it has in flight (fio's
//! `io_u_quiesce` in `zone_lock` and before `zbd_reset_zone`): two jobs each waiting for
//! the other's zone would never get it, and a reset must not pass a write. The writes of
//! a zone reach the device in order only where the kernel keeps them in order, which is
//! what fio relies on (its `t/zbd` tests set mq-deadline; `uring-cmd-zoned.fio` says
//! passthrough writes must stay at QD1): [`queued_writes_refused`] says where that is
//! not so, and the job is refused there.
//!
//! A failed write (`continue_on_error`, or the job ends while others share the zones):
//! run synchronously, or refused by a queue at submission, it gives its place back, so
//! the next write goes where the device's write pointer is; queued (an async engine), it
//! does not, and the zone's next writes fail too until it counts as full and is reset:
//! both as fio 3.33's `zbd_queue_io` ([`Zbd::failed_unqueued_write`]).
//!
//! Garbage collection (`zone_reset_threshold`, `zone_reset_frequency`, fio's
//! `zbd_adjust_block`): once the bytes below the write pointers of a writer's region
//! reach the threshold share of it, every `1 / frequency`-th write (one countdown per
//! device, as fio's `write_cnt`) resets the zone it goes to (when it holds data) and lands
//! at its start ([`Gc`]); a writer with writes in flight completes them first (fio
//! quiesces for such a write even when the zone holds nothing). Refused with verify.

use crate::engine::Rng;
use ioswitch::spec::zns::{ZoneAction, ZoneReport, ZoneState};
use ioswitch::{Cmd, Device};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// The zones of one device as every job of the run that uses it sees them.
pub(crate) struct Table {
    st: Mutex<State>,
    /// Signalled when a zone is released, closed, or a job leaves.
    freed: Condvar,
    /// Bytes a write may fill in each zone (the zone capacity).
    cap: u64,
    /// Most zones open at once over all the jobs.
    max_open: usize,
}

struct State {
    /// Bytes written from each zone's start (its write pointer).
    wp: Vec<u64>,
    /// Whether `wp` has been read from the device (a job's zone report fills in its
    /// region's zones the first time).
    known: Vec<bool>,
    /// The writer that owns each zone (0: none).
    owner: Vec<u32>,
    /// The owner's writes in flight to each zone (the zone is free again at 0).
    inflight: Vec<u32>,
    /// Times each zone was filled in this run (a sequential writer on an earlier lap
    /// skips a zone that another filled on this lap).
    fills: Vec<u64>,
    /// The writer that opened each open zone (0: the zone is not open).
    opener: Vec<u32>,
    /// Zones open, over all the jobs.
    open: usize,
    /// Zones open per writer: (writer, zones).
    job_open: Vec<(u32, usize)>,
    /// Writers attached: (writer, whether it verifies what it writes).
    writers: Vec<(u32, bool)>,
    /// Writes left until the next garbage-collection reset (fio's `write_cnt`, one per
    /// device, counted down only while the written share is above the threshold).
    gc_left: u32,
    /// Zones chosen for such a reset, reset when next written (fio's `reset_zone`).
    gc_reset: Vec<bool>,
}

impl State {
    fn job_open(&mut self, me: u32) -> &mut usize {
        if let Some(i) = self.job_open.iter().position(|j| j.0 == me) {
            return &mut self.job_open[i].1;
        }
        self.job_open.push((me, 0));
        &mut self.job_open.last_mut().expect("just pushed").1
    }

    /// Closes zone `z`; it counts as filled when it cannot take `len` more bytes.
    fn close(&mut self, z: usize, cap: u64, len: u64) {
        if self.wp[z] + len > cap {
            self.fills[z] += 1;
        }
        let by = std::mem::take(&mut self.opener[z]);
        if by != 0 {
            self.open -= 1;
            if let Some(j) = self.job_open.iter_mut().find(|j| j.0 == by) {
                j.1 = j.1.saturating_sub(1);
            }
        }
    }
}

/// Where a writer may write next: `zone` (absolute zone number on the device) from `at`
/// bytes of its start; `reset`: the zone holds data and must be reset first (a write to
/// a full zone, or garbage collection). The zone is owned by the writer until
/// [`Table::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) zone: u64,
    pub(crate) at: u64,
    pub(crate) reset: bool,
}

/// How a writer picks its zone: sequentially from its cursor (a zone number relative to
/// `first`, and the lap it is on), or at random among the open zones of its region.
pub(crate) enum Pick<'a> {
    Seq(&'a mut (u64, u64)),
    Random,
}

/// `zone_reset_threshold` and `zone_reset_frequency`: once the bytes below the write
/// pointers of a writer's region reach `threshold`, every `every`-th write resets the zone
/// it goes to first (fio's simulation of garbage collection, `zbd_adjust_block`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gc {
    pub(crate) threshold: u64,
    pub(crate) every: u32,
}

impl Gc {
    /// `None` when `frequency` is 0 (fio's default: no such resets). fio counts down
    /// `1 / frequency` writes, truncated to a whole number.
    pub(crate) fn new(region: u64, threshold: f64, frequency: f64) -> Option<Gc> {
        (frequency > 0.0).then(|| Gc {
            threshold: (region as f64 * threshold) as u64,
            every: ((1.0 / frequency).min(f64::from(u32::MAX)) as u32).max(1),
        })
    }
}

impl Table {
    /// A table of `nr_zones` zones of `cap` writable bytes, at most `max_open` open.
    pub(crate) fn new(nr_zones: u64, cap: u64, max_open: usize) -> Table {
        let n = nr_zones as usize;
        Table {
            st: Mutex::new(State {
                wp: vec![0; n],
                known: vec![false; n],
                owner: vec![0; n],
                inflight: vec![0; n],
                fills: vec![0; n],
                opener: vec![0; n],
                open: 0,
                job_open: Vec::new(),
                writers: Vec::new(),
                gc_left: u32::MAX,
                gc_reset: vec![false; n],
            }),
            freed: Condvar::new(),
            cap,
            max_open: max_open.max(1),
        }
    }

    /// Starts the countdown to the next garbage-collection reset; fio sets it when each
    /// job sets up its file (`zbd_file_reset`).
    pub(crate) fn arm_gc(&self, gc: Option<Gc>) {
        self.lock().gc_left = gc.map_or(u32::MAX, |g| g.every);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A job that panicked holding the lock leaves the table as it was: go on.
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers writer `me` (`verify`: it verifies its writes); `Err` when a verifying
    /// writer would share the zones with another writer (a zone reset by one loses the
    /// other's blocks).
    pub(crate) fn attach_writer(&self, me: u32, verify: bool) -> Result<(), String> {
        let mut st = self.lock();
        if let Some(&(_, v)) = st.writers.iter().find(|w| w.0 != me) {
            if v || verify {
                return Err("zonemode=zbd: a job that verifies its writes shares the device's zones with another writing job (numjobs>1 or another section on the same file); a zone one resets loses the other's blocks, so this is not run".into());
            }
        }
        st.writers.push((me, verify));
        Ok(())
    }

    /// Writer `me` leaves: its zone is released; the zones it opened stay open (as in fio,
    /// they count against `max_open_zones` until they are full, and the other writers
    /// write into them).
    pub(crate) fn detach(&self, me: u32) {
        let mut st = self.lock();
        for z in 0..st.owner.len() {
            if st.owner[z] == me {
                st.owner[z] = 0;
                st.inflight[z] = 0;
            }
        }
        st.writers.retain(|w| w.0 != me);
        st.job_open.retain(|w| w.0 != me);
        drop(st);
        self.freed.notify_all();
    }

    /// One of writer `me`'s writes to `zone` has completed: the zone is free for others
    /// once none of its writes there is in flight.
    pub(crate) fn release(&self, me: u32, zone: u64) {
        let mut st = self.lock();
        let z = zone as usize;
        if st.owner[z] == me {
            st.inflight[z] = st.inflight[z].saturating_sub(1);
            if st.inflight[z] == 0 {
                st.owner[z] = 0;
            }
        }
        drop(st);
        self.freed.notify_all();
    }

    /// Writer `me`'s write of `len` bytes at `at` in `zone` failed without moving the
    /// device's write pointer: the table's goes back to `at`, if the write is still the
    /// last one there and the zone still the writer's (see [`Zbd::failed_unqueued_write`]).
    fn unwrite(&self, me: u32, zone: u64, at: u64, len: u64) {
        let mut st = self.lock();
        let z = zone as usize;
        if st.owner[z] == me && st.wp[z] == at + len {
            st.wp[z] = at;
        }
    }

    /// The zones of the `n` from `first` that hold data (write pointer past the start).
    fn with_data(&self, first: u64, n: u64) -> Vec<u64> {
        let st = self.lock();
        (first..first + n).filter(|&z| st.wp[z as usize] != 0).collect()
    }

    /// The write pointers of `n` zones from `first` (for reads).
    fn written(&self, first: u64, n: u64) -> Vec<u64> {
        self.lock().wp[first as usize..(first + n) as usize].to_vec()
    }

    /// Whether writer `me` verifies its writes and no zone of `region` can take `len`
    /// more bytes: its writes end there (fio: `zbd_convert_to_open_zone` finds no zone,
    /// the write is an EOF), since a reset would lose blocks still to be verified.
    pub(crate) fn verify_ended(&self, me: u32, (first, n): (u64, u64), len: u64) -> bool {
        let st = self.lock();
        st.writers.iter().any(|&(w, v)| w == me && v)
            && (first as usize..(first + n) as usize).all(|z| st.wp[z] + len > self.cap)
    }

    /// Zones open now, over all the jobs.
    #[cfg(test)]
    fn open_zones(&self) -> usize {
        self.lock().open
    }

    /// Zones writer `me` has open now.
    #[cfg(test)]
    fn open_by(&self, me: u32) -> usize {
        *self.lock().job_open(me)
    }

    /// Where writer `me` writes its next `len` bytes in its `region`, `(first, n)`: the
    /// `n` zones from zone `first` (`job_max`: its own limit of open zones, 0 none).
    /// Waits while every zone it could take is owned by another writer and the open-zone
    /// limits keep it from opening one.
    #[cfg(test)]
    pub(crate) fn grant(
        &self,
        me: u32,
        job_max: usize,
        region: (u64, u64),
        len: u64,
        pick: &mut Pick,
        rng: &mut Rng,
    ) -> Grant {
        self.try_grant(me, job_max, region, len, pick, rng, None, true).expect("a grant that may wait comes")
    }

    /// [`Table::grant`]; without `may_wait` (the writer has writes in flight), `None`
    /// where it would wait for a zone another writer owns or reset a zone: the writer
    /// completes what it has in flight first, then asks again (fio's `io_u_quiesce`).
    /// A writer may take a zone it owns already (fio's zone lock is recursive). A writer
    /// that verifies gets `None` also when no zone of the region can take `len` bytes
    /// ([`Table::verify_ended`]): it opens no full zone.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn try_grant(
        &self,
        me: u32,
        job_max: usize,
        region: (u64, u64),
        len: u64,
        pick: &mut Pick,
        rng: &mut Rng,
        gc: Option<Gc>,
        may_wait: bool,
    ) -> Option<Grant> {
        let (first, n) = region;
        let cap = self.cap;
        let mut st = self.lock();
        // fio's zbd_open_zone: a writer that verifies opens no full zone (its reset would
        // lose blocks still to be verified); it writes elsewhere, and ends where no zone
        // of its region can take the block.
        let verifies = st.writers.iter().any(|&(w, v)| w == me && v);
        let full = |st: &State, z: usize| st.wp[z] + len > cap;
        loop {
            let can_open = |st: &mut State| st.open < self.max_open && (job_max == 0 || *st.job_open(me) < job_max);
            // Open zones that cannot take the block are closed (full).
            for z in first as usize..(first + n) as usize {
                if st.opener[z] != 0 && st.owner[z] == 0 && st.wp[z] + len > cap {
                    st.close(z, cap, len);
                }
            }
            let mut skipped = 0;
            let got = match pick {
                Pick::Seq(cursor) => loop {
                    let (rel, lap) = **cursor;
                    let z = (first + rel) as usize;
                    let next = if rel + 1 == n { (0, lap + 1) } else { (rel + 1, lap) };
                    if st.fills[z] > lap {
                        // Filled on this lap by another writer: on to the next zone.
                        **cursor = next;
                        continue;
                    }
                    if st.owner[z] != 0 && st.owner[z] != me {
                        break None;
                    }
                    if st.opener[z] != 0 {
                        if st.wp[z] + len <= cap {
                            break Some((z, st.wp[z], false));
                        }
                        // Full: closed; the writer goes on to the next zone.
                        st.close(z, cap, len);
                        **cursor = next;
                        continue;
                    }
                    if verifies && full(&st, z) {
                        skipped += 1;
                        if skipped >= n {
                            break None;
                        }
                        **cursor = next;
                        continue;
                    }
                    if !can_open(&mut st) {
                        // fio's zbd_convert_to_open_zone: the write goes to an open zone
                        // instead; the writer stays on its own zone for the next one.
                        break free_open(&st, me, first, n, cap, len, rng);
                    }
                    break Some(open_at(&st, z, cap, len));
                },
                Pick::Random => {
                    let start = rng.below(n);
                    let to_open = (0..n)
                        .map(|i| (first + (start + i) % n) as usize)
                        .find(|&z| st.opener[z] == 0 && st.owner[z] == 0 && !(verifies && full(&st, z)));
                    match to_open {
                        Some(z) if can_open(&mut st) => Some(open_at(&st, z, cap, len)),
                        _ => free_open(&st, me, first, n, cap, len, rng),
                    }
                }
            };
            if let Some((z, mut at, mut full)) = got {
                // A zone already chosen waits for its writer to quiesce: not counted again.
                if let Some(gc) = gc.filter(|_| !st.gc_reset[z]) {
                    let written: u64 = st.wp[first as usize..(first + n) as usize].iter().sum();
                    if written >= gc.threshold {
                        st.gc_left = st.gc_left.saturating_sub(1);
                        if st.gc_left == 0 {
                            st.gc_left = gc.every;
                            st.gc_reset[z] = true;
                        }
                    }
                }
                if st.gc_reset[z] {
                    (at, full) = (0, true);
                }
                // fio quiesces before any such write (io_u_quiesce), then resets the zone
                // only when it holds data (zbd_reset_zone: nothing, and no count, for a
                // zone whose write pointer is at its start).
                if full && !may_wait {
                    return None;
                }
                let reset = full && st.wp[z] != 0;
                if st.opener[z] == 0 {
                    st.opener[z] = me;
                    st.open += 1;
                    *st.job_open(me) += 1;
                }
                st.gc_reset[z] = false;
                st.owner[z] = me;
                st.inflight[z] += 1;
                st.wp[z] = at + len;
                st.known[z] = true;
                return Some(Grant { zone: z as u64, at, reset });
            }
            if !may_wait || (verifies && (first as usize..(first + n) as usize).all(|z| full(&st, z))) {
                return None;
            }
            st = self.freed.wait_timeout(st, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// A random open zone of the `n` from `first` that no writer but `me` owns and that can
/// take `len` bytes, with its write pointer; `None` when there is none.
fn free_open(st: &State, me: u32, first: u64, n: u64, cap: u64, len: u64, rng: &mut Rng) -> Option<(usize, u64, bool)> {
    let free: Vec<usize> = (first as usize..(first + n) as usize)
        .filter(|&z| st.opener[z] != 0 && (st.owner[z] == 0 || st.owner[z] == me) && st.wp[z] + len <= cap)
        .collect();
    let z = *free.get(rng.below(free.len().max(1) as u64) as usize)?;
    Some((z, st.wp[z], false))
}

/// Where a zone being opened takes its next block (fio 3.33's `zbd_adjust_block`): at
/// its write pointer while it has room, whoever wrote what is below it (this run, or
/// before it); else (full, `true`) from its start after a reset.
fn open_at(st: &State, z: usize, cap: u64, len: u64) -> (usize, u64, bool) {
    if st.wp[z] + len <= cap {
        (z, st.wp[z], false)
    } else {
        (z, 0, true)
    }
}

/// Why an async job's writes at `iodepth>1` cannot run in zone order on `dev` with
/// `zonemode=zbd` (`None`: they can). fio queues several writes to a zone and relies on
/// the kernel to keep them in order: the block layer does, from one submitting thread
/// through io_uring or libaio, with mq-deadline's zone write locking (Linux before 6.10)
/// or zone write plugging (Linux 6.10 on, any scheduler); NVMe passthrough (the
/// generic char device, io_uring_cmd), the user-space driver and a thread pool do not
/// (fio's `uring-cmd-zoned.fio`: "the device can reorder the requests").
pub(crate) fn queued_writes_refused(dev: &Device) -> Option<String> {
    use ioswitch::{AsyncIface, DevKind};
    let iface = dev.interfaces().r#async;
    if !matches!(iface, Some(AsyncIface::IoUring | AsyncIface::Libaio)) {
        let name = iface.map_or("none", |i| i.as_str());
        return Some(format!(
            "the async interface {name} does not keep a zone's writes in order (only io_uring and libaio on a zoned block device do, through the kernel's block layer)"
        ));
    }
    let kind = dev.ident().kind;
    if !matches!(kind, DevKind::Block | DevKind::NvmeBlock) {
        return Some(format!(
            "it is not a zoned block device ({}); nothing between the queue and the device keeps a zone's writes in order",
            kind.as_str()
        ));
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let release = release.trim();
    if kernel_at_least(release, (6, 10)) {
        return None;
    }
    let name = std::fs::canonicalize(dev.uri())
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let sched_file = format!("/sys/class/block/{name}/queue/scheduler");
    let sched = std::fs::read_to_string(&sched_file).unwrap_or_default();
    let chosen = sched.split_whitespace().find(|w| w.starts_with('[')).map(|w| w.trim_matches(['[', ']']).to_string());
    match chosen.as_deref() {
        Some("mq-deadline") => None,
        other => Some(format!(
            "Linux {release} keeps a zone's writes in order only under the mq-deadline scheduler (zone write locking), and {name}'s is {} ({sched_file}; `echo mq-deadline > {sched_file}`)",
            other.unwrap_or("unknown")
        )),
    }
}

/// Whether kernel release `release` ("6.1.0-18-amd64") is at least `want` (major, minor).
fn kernel_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// The run's tables, by device name; a table lives while a job uses it.
static TABLES: Mutex<Vec<(String, Weak<Table>)>> = Mutex::new(Vec::new());

/// The table of `dev` that the jobs using it share (made by the first, as fio's
/// `zbd_create_zone_info`, with its `max_open`).
fn table_for(dev: &Device, nr_zones: u64, cap: u64, max_open: usize) -> Arc<Table> {
    let mut all = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|(_, t)| t.strong_count() > 0);
    if let Some(t) = all.iter().find(|(n, _)| n == dev.uri()).and_then(|(_, t)| t.upgrade()) {
        return t;
    }
    let t = Arc::new(Table::new(nr_zones, cap, max_open));
    all.push((dev.uri().to_string(), Arc::downgrade(&t)));
    t
}

/// Numbers the writers of a process (0 is no writer).
static NEXT_WRITER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// One job's view of the zones of one file: its region, its positions, its zone.
pub(crate) struct Zbd {
    table: Arc<Table>,
    /// This job's writer number.
    me: u32,
    zone: u64,
    cap: u64,
    /// The region's first zone on the device.
    first: u64,
    zones: u64,
    /// Sequential read position: (zone, offset in it); sequential writer's zone.
    seq_read: (u64, u64),
    seq_write: (u64, u64),
    /// The zones of this job's writes in flight, one entry per write.
    owned: Vec<u64>,
    /// Writes are queued several at a time (an async job at `iodepth>1`): each zone is
    /// released when its own write completes ([`Zbd::done_at`]), not at the next choice.
    pub(crate) queued: bool,
    /// [`Zbd::next`] gave no offset because the job must first complete what it has in
    /// flight (it would wait for another job's zone, or reset one); it asks again after.
    pub(crate) quiesce: bool,
    /// The job has writes in flight to another of its files' zones (it must not wait
    /// for a zone here either before completing them).
    pub(crate) held_elsewhere: bool,
    job_max_open: usize,
    gc: Option<Gc>,
    read_beyond_wp: bool,
    rng: Rng,
    /// Zone resets issued.
    pub(crate) resets: u64,
    /// Zones reset since the caller last looked: (byte offset from the region's start,
    /// bytes); what was written there is gone.
    pub(crate) reset_log: Vec<(u64, u64)>,
}

impl Drop for Zbd {
    fn drop(&mut self) {
        self.table.detach(self.me);
    }
}

impl Zbd {
    /// Zones of `region` bytes from `base` on `dev`; `writes`: the job writes, `verify`:
    /// it verifies them; `Err` says why the job cannot run.
    pub(crate) fn new(
        dev: &Device,
        base: u64,
        region: u64,
        shapes: &crate::shapes::Shapes,
        seed: u64,
        writes: bool,
        verify: bool,
    ) -> Result<Zbd, String> {
        let max_open = shapes.max_open_zones;
        let g = dev.geometry();
        let Some(z) = g.zones.as_ref() else {
            return Err("zonemode=zbd needs a zoned device".into());
        };
        let lba = g.lba_size as u64;
        let (zone, cap) = (z.zone_size * lba, z.zone_capacity * lba);
        if let Some(want) = shapes.zone_size.filter(|&w| w != zone) {
            return Err(format!("zonesize={want} is not the device's zone size of {zone} bytes"));
        }
        if zone == 0 || base % zone != 0 {
            return Err(format!("zonemode=zbd: offset {base} is not on a zone boundary (zones of {zone} bytes)"));
        }
        let zones = region / zone;
        if zones == 0 {
            return Err(format!("zonemode=zbd: the region of {region} bytes holds no whole zone of {zone} bytes"));
        }
        let first = base / zone;
        let nr_zones = z.nr_zones.max(first + zones);
        let dev_max = if z.max_open > 0 { z.max_open } else { 32 };
        let max_open = if max_open == 0 { dev_max } else { max_open.min(dev_max) };
        let table = table_for(dev, nr_zones, cap, max_open as usize);
        if (table.lock().wp.len() as u64) < first + zones {
            return Err(format!(
                "zonemode=zbd: the region of zones {first}..{} is past the device's {nr_zones} zones",
                first + zones
            ));
        }
        let gc = Gc::new(region, shapes.zone_reset_threshold, shapes.zone_reset_frequency).filter(|_| writes);
        if gc.is_some() && verify {
            return Err("zonemode=zbd: zone_reset_frequency resets zones while the job writes them, which loses \
                        blocks it would verify; run it without verify"
                .into());
        }
        let me = NEXT_WRITER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut zbd = Zbd {
            table,
            me,
            zone,
            cap,
            first,
            zones,
            seq_read: (0, 0),
            seq_write: (0, 0),
            owned: Vec::new(),
            queued: false,
            quiesce: false,
            held_elsewhere: false,
            job_max_open: shapes.job_max_open_zones as usize,
            gc,
            read_beyond_wp: shapes.read_beyond_wp,
            rng: Rng::new(seed ^ 0x2B0),
            resets: 0,
            reset_log: Vec::new(),
        };
        if writes {
            zbd.table.attach_writer(me, verify)?;
            zbd.table.arm_gc(gc);
        }
        // Writes go to the write pointers, and reads (unless read_beyond_wp) stay below them.
        if writes || !shapes.read_beyond_wp {
            // The write pointers of the zones no job has seen yet, from the device.
            let unknown = {
                let st = zbd.table.lock();
                (first..first + zones).any(|z| !st.known[z as usize])
            };
            if unknown {
                let report = write_pointers(dev, base, zones, cap)?;
                let mut st = zbd.table.lock();
                for (i, w) in report.into_iter().enumerate() {
                    let z = first as usize + i;
                    if !st.known[z] {
                        st.wp[z] = w;
                        st.known[z] = true;
                    }
                }
            }
        }
        if writes && verify {
            // fio's zbd_file_reset: a job that verifies resets the zones of its region
            // that hold data before it writes, so that no reset comes between a block
            // written and its verification. A verifying writer shares the zones with no
            // other writer (attach_writer).
            for z in zbd.table.with_data(first, zones) {
                zbd.reset(dev, z)?;
                zbd.table.lock().wp[z as usize] = 0;
            }
        }
        Ok(zbd)
    }

    /// Resets zone `z` (absolute) on the device and counts it.
    fn reset(&mut self, dev: &Device, z: u64) -> Result<(), String> {
        let lba = dev.geometry().lba_size as u64;
        let off = z * self.zone;
        dev.pass(&Cmd::zone_mgmt_send(dev.ident().nsid, off / lba, ZoneAction::Reset, false), &mut [])
            .map_err(|e| format!("zone reset at offset {off}: {e}"))?;
        self.resets += 1;
        self.reset_log.push(((z - self.first) * self.zone, self.zone));
        Ok(())
    }

    /// Bytes one pass can move: the zones' capacity.
    pub(crate) fn capacity(&self) -> u64 {
        self.zones * self.cap
    }

    /// This job's writes have completed: the zones it owned are free for others.
    pub(crate) fn done(&mut self) {
        for z in std::mem::take(&mut self.owned) {
            self.table.release(self.me, z);
        }
    }

    /// Whether this job has writes in flight to these zones.
    pub(crate) fn holds_zones(&self) -> bool {
        !self.owned.is_empty()
    }

    /// This job's write of `len` bytes at device offset `off` failed without reaching a
    /// queue: run synchronously (a sync engine, or an offload worker's sync call), or
    /// refused by the queue at submission. fio moves a zone's write pointer when a write is
    /// queued without an error (zbd.c `zbd_queue_io`, `success`): a sync engine's failed
    /// write completes at queueing with its error, and a queue that refuses one returns
    /// its error there, so fio's write pointer stays where the device's is, and the next
    /// write (`continue_on_error`, or another job sharing the zones) goes there. Ours
    /// moved when the offset was chosen: it goes back. A write that fails after it was
    /// queued (an async engine) leaves it moved, as fio's: the zone's next writes land
    /// past the device's write pointer and fail too, until the zone counts as full and
    /// is reset.
    pub(crate) fn failed_unqueued_write(&self, off: u64, len: u64) {
        self.table.unwrite(self.me, off / self.zone, off % self.zone, len);
    }

    /// This job's I/O at device offset `off` has completed (or failed): the zone of a
    /// write there is released (one write's hold of it).
    pub(crate) fn done_at(&mut self, off: u64) {
        let zone = off / self.zone;
        if let Some(i) = self.owned.iter().position(|&z| z == zone) {
            self.owned.swap_remove(i);
            self.table.release(self.me, zone);
        }
    }

    /// The next offset (from the device's start) of an I/O of `len` bytes in direction
    /// `d` (0 read, 1 write); `None`: no zone holds data left to read, the job ends, or
    /// (with [`Zbd::quiesce`] set) the job must complete its I/O in flight and ask again.
    pub(crate) fn next(
        &mut self,
        dev: &Device,
        base: u64,
        d: usize,
        random: bool,
        len: u64,
    ) -> Result<Option<u64>, String> {
        if len > self.cap {
            return Err(format!(
                "zonemode=zbd: a block of {len} bytes exceeds the zone capacity of {} bytes",
                self.cap
            ));
        }
        self.quiesce = false;
        if !self.queued {
            self.done();
        }
        if d == 1 {
            let mut pick = if random { Pick::Random } else { Pick::Seq(&mut self.seq_write) };
            let may_wait = self.owned.is_empty() && !self.held_elsewhere;
            let region = (self.first, self.zones);
            let got = self.table.try_grant(
                self.me,
                self.job_max_open,
                region,
                len,
                &mut pick,
                &mut self.rng,
                self.gc,
                may_wait,
            );
            let Some(g) = got else {
                // Quiesce and ask again, unless the job's verified writes have filled
                // every zone: then they end.
                self.quiesce = !self.table.verify_ended(self.me, region, len);
                return Ok(None);
            };
            self.owned.push(g.zone);
            let rel = g.zone - self.first;
            if g.reset {
                self.reset(dev, g.zone)?;
            }
            return Ok(Some(base + rel * self.zone + g.at));
        }
        if self.read_beyond_wp {
            if random {
                let zone = self.rng.below(self.zones);
                let at = self.rng.below(self.cap / len) * len;
                return Ok(Some(base + zone * self.zone + at));
            }
            let (mut zone, mut at) = self.seq_read;
            if at + len > self.cap {
                (zone, at) = ((zone + 1) % self.zones, 0);
            }
            self.seq_read = (zone, at + len);
            return Ok(Some(base + zone * self.zone + at));
        }
        let written = self.table.written(self.first, self.zones);
        if random {
            let zone = self.rng.below(self.zones);
            let at = self.rng.below(self.cap / len) * len;
            return Ok(random_read_at(&written, zone, at, len).map(|(z, a)| base + z * self.zone + a));
        }
        // fio: past the write pointer, on to the next zone holding a block.
        let (cur, at0) = self.seq_read;
        let Some((zone, at)) = seq_read_at(&written, cur, at0, len) else { return Ok(None) };
        self.seq_read = (zone, at + len);
        Ok(Some(base + zone * self.zone + at))
    }
}

/// Each zone's written bytes from its start, from a zone report of the region's `zones`
/// zones (of capacity `cap`) from `base`: a full zone holds its capacity, an
/// empty or offline one nothing, any other up to its write pointer.
fn write_pointers(dev: &Device, base: u64, zones: u64, cap: u64) -> Result<Vec<u64>, String> {
    let lba = dev.geometry().lba_size as u64;
    let bytes = 64 * (zones + 1);
    let fail = |e: &dyn std::fmt::Display| format!("zonemode=zbd: the zone report of '{}': {e}", dev.uri());
    let len = usize::try_from(bytes).map_err(|e| fail(&e))?;
    let mut buf = dev.alloc(len).map_err(|e| fail(&e))?;
    let cmd = Cmd::zone_mgmt_recv(dev.ident().nsid, base / lba, bytes as u32, true);
    dev.pass(&cmd, std::slice::from_mut(&mut buf)).map_err(|e| fail(&e))?;
    let report = ZoneReport::parse(&buf).map_err(|e| fail(&e))?;
    if (report.zones.len() as u64) < zones {
        return Err(fail(&format!("{} zones reported, the region has {zones}", report.zones.len())));
    }
    Ok(report
        .zones
        .iter()
        .take(zones as usize)
        .map(|z| match z.state {
            ZoneState::Full => cap,
            ZoneState::Empty | ZoneState::Offline => 0,
            _ => (z.wp.saturating_sub(z.zslba) * lba).min(cap),
        })
        .collect())
}

/// fio's sequential read of a zoned device below the write pointers: from `at` in zone
/// `zone`, or, when a block of `len` bytes does not fit below its write pointer, from the
/// start of the next zone holding one (forward only, as `zbd_find_zone` for sequential
/// I/O); `None` when there is none.
fn seq_read_at(written: &[u64], zone: u64, at: u64, len: u64) -> Option<(u64, u64)> {
    if written.get(zone as usize).is_some_and(|&w| at + len <= w) {
        return Some((zone, at));
    }
    (zone + 1..written.len() as u64).find(|&z| written[z as usize] >= len).map(|z| (z, 0))
}

/// fio's random read of a zoned device below the write pointers: the drawn `zone` and
/// offset `at` in it; a zone holding less than a block gives way to the nearest one that
/// holds one (above first, then below, as `zbd_find_zone`); the offset is folded into the
/// written part (`zbd_adjust_block`); `None` when no zone holds a block.
fn random_read_at(written: &[u64], zone: u64, at: u64, len: u64) -> Option<(u64, u64)> {
    let n = written.len() as u64;
    let holds = |z: u64| written[z as usize] >= len;
    let z = if holds(zone) {
        zone
    } else {
        (1..n).find_map(|i| {
            let up = zone + i;
            if up < n && holds(up) {
                return Some(up);
            }
            zone.checked_sub(i).filter(|&down| holds(down))
        })?
    };
    let range = written[z as usize];
    let off = if range <= len { 0 } else { (at % (range - len)) / len * len };
    Some((z, off))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 4096;

    /// A simulated zoned device under a shared zone table: each zone's write pointer as
    /// the device holds it, which writer is writing there (0: none), and the resets. The
    /// writers' threads see it through an `Arc`.
    struct Sim {
        table: Table,
        device: Vec<std::sync::atomic::AtomicU64>,
        writing: Vec<std::sync::atomic::AtomicU32>,
        resets: std::sync::atomic::AtomicU64,
    }

    impl Sim {
        fn new(zones: u64, cap: u64, max_open: usize) -> Arc<Sim> {
            use std::sync::atomic::{AtomicU32, AtomicU64};
            Arc::new(Sim {
                table: Table::new(zones, cap, max_open),
                device: (0..zones).map(|_| AtomicU64::new(0)).collect(),
                writing: (0..zones).map(|_| AtomicU32::new(0)).collect(),
                resets: AtomicU64::new(0),
            })
        }

        /// Runs writers 1..=`jobs`, each `writer(sim, me)` on a thread of its own; their results.
        fn run<T, F>(self: &Arc<Sim>, jobs: u32, writer: F) -> Vec<T>
        where
            T: Send + 'static,
            F: Fn(&Sim, u32) -> T + Clone + Send + 'static,
        {
            let threads: Vec<_> = (1..=jobs)
                .map(|me| {
                    let (sim, writer) = (self.clone(), writer.clone());
                    std::thread::spawn(move || writer(&sim, me))
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        }

        /// The device's write pointers, checked against the table's, and the resets.
        fn end(&self, zones: u64) -> (Vec<u64>, u64) {
            use std::sync::atomic::Ordering;
            let wps: Vec<u64> = self.device.iter().map(|w| w.load(Ordering::SeqCst)).collect();
            assert_eq!(self.table.written(0, zones), wps, "the table's write pointers are the device's");
            (wps, self.resets.load(Ordering::SeqCst))
        }
    }

    /// `jobs` writers (`random` or sequential) share one table of `zones` zones of 16
    /// blocks' capacity (`cap` with [`shared_run_cap`]), each making `writes` writes of a block, at most `max_open` zones
    /// open (and `job_max` per writer); a simulated device checks each write lands at its
    /// zone's write pointer while no other writer writes there. Returns the device's
    /// write pointers and the resets.
    fn shared_run(
        jobs: u32,
        zones: u64,
        max_open: usize,
        job_max: usize,
        writes: u32,
        random: bool,
    ) -> (Vec<u64>, u64) {
        shared_run_cap(jobs, (zones, 16), max_open, job_max, writes, random)
    }

    /// [`shared_run`] with `(zones, cap)`: zones of `cap` blocks.
    fn shared_run_cap(
        jobs: u32,
        (zones, cap): (u64, u64),
        max_open: usize,
        job_max: usize,
        writes: u32,
        random: bool,
    ) -> (Vec<u64>, u64) {
        use std::sync::atomic::Ordering;
        let sim = Sim::new(zones, cap * K, max_open);
        sim.run(jobs, move |sim, me| {
            let Sim { table, device, writing, resets } = sim;
            table.attach_writer(me, false).unwrap();
            let mut rng = Rng::new(u64::from(me) * 77);
            let mut cursor = (0, 0);
            for _ in 0..writes {
                let mut pick = if random { Pick::Random } else { Pick::Seq(&mut cursor) };
                let g = table.grant(me, job_max, (0, zones), K, &mut pick, &mut rng);
                let z = g.zone as usize;
                assert_eq!(writing[z].swap(me, Ordering::SeqCst), 0, "two writers in zone {z}");
                assert!(table.open_zones() <= max_open, "{} zones open, limit {max_open}", table.open_zones());
                if job_max > 0 {
                    assert!(table.open_by(me) <= job_max, "writer {me} holds {} zones", table.open_by(me));
                }
                if g.reset {
                    device[z].store(0, Ordering::SeqCst);
                    resets.fetch_add(1, Ordering::SeqCst);
                }
                // The device takes a write only at the zone's write pointer, within its capacity.
                assert_eq!(device[z].load(Ordering::SeqCst), g.at, "zone {z}: write off the write pointer");
                assert!(g.at + K <= cap * K, "zone {z}: write past the capacity");
                std::thread::yield_now();
                device[z].store(g.at + K, Ordering::SeqCst);
                writing[z].store(0, Ordering::SeqCst);
                table.release(me, g.zone);
            }
            table.detach(me);
        });
        assert!(sim.table.open_zones() <= max_open, "the zones of writers that left stay open, within the limit");
        sim.end(zones)
    }

    #[test]
    fn shared_zones_random_writers_keep_the_open_limit_and_write_in_order() {
        // 4 writers, 3 zones open at most: 4 × 200 writes over 8 zones of 16 blocks fill and
        // reopen zones again and again. Only a full zone is reset (16 blocks each time; an
        // empty one is written without), so the resets and the write pointers account
        // for every block written.
        let (wps, resets) = shared_run(4, 8, 3, 0, 200, true);
        assert!(wps.iter().all(|w| w % K == 0 && *w <= 16 * K), "{wps:?}");
        assert_eq!(wps.iter().sum::<u64>() + resets * 16 * K, 800 * K, "{resets} resets, {wps:?}");
        // Few writes, no zone fills: nothing written is lost, the write pointers hold every
        // byte, and no zone was reset (they were all empty when opened).
        let (wps, resets) = shared_run_cap(4, (8, 64), 4, 0, 10, true);
        assert_eq!(wps.iter().sum::<u64>(), 40 * K, "{wps:?}");
        let written = wps.iter().filter(|&&w| w > 0).count() as u64;
        assert!(resets == 0 && written <= 4, "{resets} resets, at most 4 zones written: {wps:?}");
        // job_max_open_zones: each writer opens at most 1 of the 4.
        shared_run(4, 8, 4, 1, 100, true);
    }

    #[test]
    fn zone_reset_frequency_resets_every_nth_write_once_the_threshold_is_written() {
        // One sequential writer over 4 zones of 16 blocks. Threshold 0.5: no such reset
        // until 32 blocks are below the write pointers; frequency 0.25: then every 4th
        // write resets the zone it goes to and lands at its start (fio's zbd_adjust_block).
        let table = Table::new(4, 16 * K, 4);
        let gc = Gc::new(64 * K, 0.5, 0.25);
        assert_eq!(gc, Some(Gc { threshold: 32 * K, every: 4 }));
        table.arm_gc(gc);
        let (mut rng, mut cursor) = (Rng::new(1), (0, 0));
        let mut resets = Vec::new();
        let mut open_resets = 0;
        for i in 1..=64u64 {
            let g = table.try_grant(1, 0, (0, 4), K, &mut Pick::Seq(&mut cursor), &mut rng, gc, true).unwrap();
            table.release(1, g.zone);
            if g.reset {
                assert_eq!(g.at, 0, "write {i}: a reset zone is written from its start");
                resets.push(i);
            }
            open_resets += u32::from(g.at == 0 && !g.reset);
        }
        // Zones 0, 1 and 2 are empty when opened (writes 1, 17, 33): written without a
        // reset (fio resets no empty zone). The countdown runs from write 33 on: writes
        // 36, 40, ..., 64 reset zone 2, which never fills.
        let want: Vec<u64> = (36..=64).step_by(4).collect();
        assert_eq!(resets, want);
        assert_eq!(open_resets, 3, "zones 0, 1 and 2 written from their start without a reset");
        assert_eq!(table.written(0, 4), vec![16 * K, 16 * K, K, 0], "write 64 reset zone 2, then wrote a block");

        // Threshold 0, frequency 1: every write resets its zone first, except the first,
        // whose zone holds nothing yet.
        let table = Table::new(2, 16 * K, 2);
        let gc = Gc::new(32 * K, 0.0, 1.0);
        table.arm_gc(gc);
        let mut cursor = (0, 0);
        for i in 0..5 {
            let g = table.try_grant(1, 0, (0, 2), K, &mut Pick::Seq(&mut cursor), &mut rng, gc, true).unwrap();
            table.release(1, g.zone);
            assert_eq!((g.zone, g.at, g.reset), (0, 0, i > 0), "write {i}");
        }
        // Frequency 0: none (fio's default).
        assert_eq!(Gc::new(32 * K, 0.0, 0.0), None);
    }

    #[test]
    fn a_garbage_collection_reset_waits_for_the_writes_in_flight() {
        // The writer has writes in flight (may_wait false): the reset is not granted, the
        // writer completes them and asks again, and the chosen zone is reset then,
        // counted once.
        let table = Table::new(2, 16 * K, 2);
        let gc = Gc::new(32 * K, 0.0, 0.5);
        table.arm_gc(gc);
        let (mut rng, mut cursor) = (Rng::new(1), (0, 0));
        let mut ask = |may_wait| table.try_grant(1, 0, (0, 2), K, &mut Pick::Seq(&mut cursor), &mut rng, gc, may_wait);
        assert!(!ask(true).unwrap().reset, "zone 0 is empty: written without a reset; the countdown goes 2 -> 1");
        assert_eq!(ask(false), None, "the countdown reached 0: a reset, with writes in flight");
        assert_eq!(ask(false), None, "still chosen, not counted again");
        let g = ask(true).unwrap();
        assert_eq!((g.zone, g.at, g.reset), (0, 0, true), "reset once the writer has quiesced");
        assert!(!ask(false).unwrap().reset, "the countdown started again: 2 -> 1");
        assert_eq!(ask(false), None, "and reached 0 again");

        // A zone chosen while it holds nothing: the writer still completes what it has in
        // flight first (fio quiesces before it looks), and then it is not reset.
        let table = Table::new(2, 16 * K, 2);
        let gc = Gc::new(32 * K, 0.0, 1.0);
        table.arm_gc(gc);
        let mut cursor = (0, 0);
        let mut ask = |may_wait| table.try_grant(1, 0, (0, 2), K, &mut Pick::Seq(&mut cursor), &mut rng, gc, may_wait);
        assert_eq!(ask(false), None, "chosen (empty), with writes in flight");
        let g = ask(true).unwrap();
        assert_eq!((g.zone, g.at, g.reset), (0, 0, false), "empty: written from its start, no reset");
    }

    #[test]
    fn writes_go_to_the_write_pointer_and_only_a_full_zone_holding_data_is_reset() {
        // fio 3.33's zbd_adjust_block: a write goes to its zone's write pointer, whoever
        // wrote what is below it; the zone is reset only when full (zbd_zone_full), and
        // zbd_reset_zone does nothing for an empty zone. Zones as a report before the run
        // found them: empty, 5 blocks written, full, 15 blocks written.
        let t = Table::new(4, 16 * K, 4);
        {
            let mut st = t.lock();
            st.wp.copy_from_slice(&[0, 5 * K, 16 * K, 15 * K]);
            st.known.fill(true);
        }
        let mut rng = Rng::new(3);
        let mut at = |zone: u64, len: u64| {
            let mut cursor = (zone, 0);
            let g = t.grant(1, 0, (0, 4), len, &mut Pick::Seq(&mut cursor), &mut rng);
            t.release(1, g.zone);
            g
        };
        assert_eq!(at(0, K), Grant { zone: 0, at: 0, reset: false }, "empty: no reset");
        assert_eq!(at(1, K), Grant { zone: 1, at: 5 * K, reset: false }, "data from before the run: appended to");
        assert_eq!(at(2, K), Grant { zone: 2, at: 0, reset: true }, "full: reset");
        assert_eq!(at(2, K), Grant { zone: 2, at: K, reset: false }, "then appended to");
        // 15 blocks: room for a block, not for two.
        assert_eq!(at(3, K), Grant { zone: 3, at: 15 * K, reset: false });
        assert_eq!(t.written(0, 4), vec![K, 6 * K, 2 * K, 16 * K]);
        assert_eq!(t.with_data(0, 4), vec![0, 1, 2, 3]);
        // A random writer over the same kind of zones: never a reset of an empty zone,
        // always a write at the write pointer.
        let t = Table::new(4, 16 * K, 2);
        t.lock().wp.copy_from_slice(&[0, 5 * K, 16 * K, 0]);
        let mut wp = [0, 5 * K, 16 * K, 0];
        for _ in 0..40 {
            let g = t.grant(1, 0, (0, 4), K, &mut Pick::Random, &mut rng);
            t.release(1, g.zone);
            let z = g.zone as usize;
            assert_eq!(g.reset, wp[z] == 16 * K, "{g:?} with the zone at {}", wp[z]);
            if g.reset {
                wp[z] = 0;
            }
            assert_eq!(g.at, wp[z], "{g:?}");
            wp[z] += K;
        }
        assert_eq!(t.written(0, 4), wp.to_vec());
        assert_eq!(t.with_data(0, 4), (0..4).filter(|&z| wp[z as usize] != 0).collect::<Vec<_>>());
    }

    #[test]
    fn shared_zones_sequential_writers_append_at_the_write_pointer() {
        // 4 sequential clones over 4 zones: together they fill zone after zone; 4 × 16 writes
        // fill all 4 zones exactly once, none reset (each was empty when opened).
        let (wps, resets) = shared_run(4, 4, 2, 0, 16, false);
        assert_eq!((wps, resets), (vec![16 * K; 4], 0));
        // More writes than the zones hold: the writers come round and reset the full ones,
        // 16 blocks each time.
        let (wps, resets) = shared_run(3, 4, 1, 0, 40, false);
        assert_eq!(wps.iter().sum::<u64>() + resets * 16 * K, 120 * K, "{resets} resets, {wps:?}");
        assert!(resets >= (120 - 64) / 16, "{resets}");
    }

    /// `jobs` writers, each keeping up to `depth` writes in flight (completed in order,
    /// oldest first, as a queue of the block layer hands a zone's writes to the device),
    /// over `zones` zones of 16 blocks, `max_open` open: a writer that gets no grant
    /// without waiting completes everything it has in flight first. The simulated
    /// device takes each write only at its zone's write pointer, and no zone ever has
    /// writes of two writers in flight. Returns the most writes one writer had in flight
    /// to one zone, and the resets.
    fn queued_run(jobs: u32, zones: u64, max_open: usize, depth: usize, writes: u32, random: bool) -> (u32, u64) {
        use std::collections::{HashMap, VecDeque};
        use std::sync::atomic::Ordering;
        let sim = Sim::new(zones, 16 * K, max_open);
        let most = sim.run(jobs, move |sim, me| {
            let Sim { table, device, writing, resets } = sim;
            table.attach_writer(me, false).unwrap();
            let mut rng = Rng::new(u64::from(me) * 91);
            let mut cursor = (0, 0);
            let mut flight: VecDeque<Grant> = VecDeque::new();
            let mut per_zone: HashMap<u64, u32> = HashMap::new();
            let mut most = 0;
            let complete = |g: Grant, per_zone: &mut HashMap<u64, u32>| {
                let z = g.zone as usize;
                assert_eq!(device[z].load(Ordering::SeqCst), g.at, "zone {z}: write off the write pointer");
                device[z].store(g.at + K, Ordering::SeqCst);
                let n = per_zone.get_mut(&g.zone).expect("a write in flight there");
                *n -= 1;
                if *n == 0 {
                    writing[z].store(0, Ordering::SeqCst);
                }
                table.release(me, g.zone);
            };
            for _ in 0..writes {
                let g = loop {
                    let mut pick = if random { Pick::Random } else { Pick::Seq(&mut cursor) };
                    let may_wait = flight.is_empty();
                    match table.try_grant(me, 0, (0, zones), K, &mut pick, &mut rng, None, may_wait) {
                        Some(g) => break g,
                        None => {
                            assert!(!may_wait, "a grant that may wait comes");
                            while let Some(g) = flight.pop_front() {
                                complete(g, &mut per_zone);
                            }
                        }
                    }
                };
                let z = g.zone as usize;
                let other = writing[z].swap(me, Ordering::SeqCst);
                assert!(other == 0 || other == me, "writers {other} and {me} both in zone {z}");
                assert!(table.open_zones() <= max_open);
                if g.reset {
                    assert!(flight.is_empty(), "a reset with writes in flight");
                    device[z].store(0, Ordering::SeqCst);
                    resets.fetch_add(1, Ordering::SeqCst);
                }
                assert!(g.at + K <= 16 * K, "zone {z}: write past the capacity");
                let n = per_zone.entry(g.zone).or_insert(0);
                *n += 1;
                most = most.max(*n);
                flight.push_back(g);
                if flight.len() == depth {
                    let g = flight.pop_front().unwrap();
                    complete(g, &mut per_zone);
                }
                std::thread::yield_now();
            }
            while let Some(g) = flight.pop_front() {
                complete(g, &mut per_zone);
            }
            table.detach(me);
            most
        });
        let (_, resets) = sim.end(zones);
        (most.into_iter().max().unwrap_or(0), resets)
    }

    #[test]
    fn queued_writers_keep_several_writes_in_flight_to_their_zone_in_order() {
        // One sequential writer at depth 8: 8 writes in flight to its zone, each at the
        // write pointer the one before moved; 64 writes fill 4 empty zones, none reset.
        assert_eq!(queued_run(1, 4, 2, 8, 64, false), (8, 0));
        // 96 writes: the 4 zones fill, and 2 of them are reset (full) and filled again.
        assert_eq!(queued_run(1, 4, 2, 8, 96, false), (8, 2));
        // 4 sequential clones sharing the zones, and 4 random writers over 3 open zones,
        // at depth 4, with zones filling and reopening: no zone ever has two writers'
        // writes in flight, every write lands at the write pointer, no reset passes a
        // write, and nobody waits forever for a zone another holds.
        let (most, resets) = queued_run(4, 8, 3, 4, 300, false);
        assert!(most >= 2 && resets >= (1200 - 128) / 16, "{most} in flight at most, {resets} resets");
        let (most, resets) = queued_run(4, 8, 3, 4, 300, true);
        assert!(most >= 2 && resets >= (1200 - 128) / 16, "{most} in flight at most, {resets} resets");
    }

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(!kernel_at_least("6.1.0-18-amd64", (6, 10)));
        assert!(kernel_at_least("6.10.3", (6, 10)) && kernel_at_least("6.18.44-fc-v1300", (6, 10)));
        assert!(kernel_at_least("7.0", (6, 10)) && !kernel_at_least("5.19.1", (6, 10)));
        assert!(!kernel_at_least("", (6, 10)) && !kernel_at_least("x", (6, 10)));
    }

    #[test]
    fn a_sequential_writer_at_the_open_limit_writes_into_an_open_zone() {
        // Writer 1 opens both zones the limit allows and pauses (its writes done); writer 2's
        // own zone (0) is not among them: it writes into one of the open ones, at its write
        // pointer, instead of waiting (fio's zbd_convert_to_open_zone).
        let t = Table::new(8, 16 * K, 2);
        let mut rng = Rng::new(5);
        let mut opened = Vec::new();
        for _ in 0..2 {
            let g = t.grant(1, 0, (0, 8), K, &mut Pick::Random, &mut rng);
            assert!(!g.reset && g.at == 0, "{g:?}: empty, written without a reset");
            t.release(1, g.zone);
            opened.push(g.zone);
        }
        let mut cursor = (0, 0);
        let skip = (0..8).find(|z| !opened.contains(z)).unwrap();
        cursor.0 = skip;
        let g = t.grant(2, 0, (0, 8), K, &mut Pick::Seq(&mut cursor), &mut rng);
        assert!(opened.contains(&g.zone) && g.at == K && !g.reset, "{g:?} (open: {opened:?})");
        assert_eq!((t.open_zones(), cursor), (2, (skip, 0)));
        // Writer 1 leaves: its zones stay open (fio's rule) and writer 2 keeps writing
        // into them until they are full; then it opens its own.
        t.release(2, g.zone);
        t.detach(1);
        let mut full = false;
        loop {
            let g = t.grant(2, 0, (0, 8), K, &mut Pick::Seq(&mut cursor), &mut rng);
            t.release(2, g.zone);
            if g.zone == skip {
                assert!(g.at == 0 && !g.reset && full, "{g:?}: its own (empty) zone only once an open one is full");
                break;
            }
            assert!(opened.contains(&g.zone) && !g.reset, "{g:?}");
            full |= g.at + K == 16 * K;
        }
    }

    #[test]
    fn a_failed_synchronous_write_gives_its_place_back_to_the_next_write() {
        // fio's sync engines: a write that fails leaves the write pointer where it was, and
        // the next write (continue_on_error) goes there, where the device takes it.
        let t = Table::new(2, 16 * K, 2);
        let mut rng = Rng::new(9);
        let mut cursor = (0, 0);
        let mut next = |me| {
            let g = t.grant(me, 0, (0, 2), K, &mut Pick::Seq(&mut cursor), &mut rng);
            (g.zone, g.at)
        };
        assert_eq!(next(1), (0, 0));
        t.release(1, 0);
        assert_eq!(next(1), (0, K));
        t.unwrite(1, 0, K, K);
        t.release(1, 0);
        assert_eq!(t.written(0, 1), vec![K], "the failed write's block is not counted as written");
        assert_eq!(next(1), (0, K), "the next write goes where the failed one was to go");
        // Only the writer that owns the zone, and only for the last write there.
        t.unwrite(2, 0, K, K);
        t.unwrite(1, 0, 0, K);
        assert_eq!(t.written(0, 1), vec![2 * K]);
        t.release(1, 0);
        t.unwrite(1, 0, K, K);
        assert_eq!(t.written(0, 1), vec![2 * K], "a released zone is no longer the writer's to change");
    }

    #[test]
    fn a_queued_write_the_queue_refused_gives_its_place_back_and_its_hold_of_the_zone() {
        // An async writer with three writes to zone 0 granted (two in flight, the third
        // refused at submission, so it never reached the device): fio does not move the
        // write pointer for a queue that fails, so the table's goes back to the refused
        // write's offset and the writer's next write goes there; the zone stays the
        // writer's while its two writes are in flight, then is free for another writer.
        let t = Table::new(2, 16 * K, 1);
        let mut rng = Rng::new(9);
        let mut cursor = (0, 0);
        let mut other = (0, 0);
        for want in [0, K, 2 * K] {
            let g = t.try_grant(1, 0, (0, 2), K, &mut Pick::Seq(&mut cursor), &mut rng, None, want == 0);
            assert_eq!(g.map(|g| (g.zone, g.at)), Some((0, want)));
        }
        // The engine's refusal path: unwrite, then let the zone go (one hold of three).
        t.unwrite(1, 0, 2 * K, K);
        t.release(1, 0);
        assert_eq!(t.written(0, 1), vec![2 * K], "the refused write's block is not counted as written");
        let g = t.try_grant(1, 0, (0, 2), K, &mut Pick::Seq(&mut cursor), &mut rng, None, false);
        assert_eq!(g.map(|g| (g.zone, g.at)), Some((0, 2 * K)), "the next write goes where the refused one was to go");
        t.unwrite(1, 0, 2 * K, K);
        t.release(1, 0);
        // Writer 2 may not take the zone (one open zone at most, writer 1's) while
        // writer 1's two writes are in flight; once both complete, it may.
        let g = t.try_grant(2, 0, (0, 2), K, &mut Pick::Seq(&mut other), &mut rng, None, false);
        assert!(g.is_none(), "{g:?}: the zone is still writer 1's");
        t.release(1, 0);
        t.release(1, 0);
        let g = t.try_grant(2, 0, (0, 2), K, &mut Pick::Seq(&mut other), &mut rng, None, false);
        assert_eq!(g.map(|g| (g.zone, g.at)), Some((0, 2 * K)), "writer 2 writes at the write pointer the device has");
    }

    #[test]
    fn a_verifying_writer_opens_no_full_zone_and_ends_when_every_zone_is_full() {
        // fio 3.33's zbd_open_zone: with verify a full zone is not opened (its reset would
        // lose blocks to verify); the write goes to another zone, and when no zone can
        // take it the job's writes end (zbd_convert_to_open_zone: no zone, an EOF).
        // Zones: empty, full, 10 blocks written, full; 2 open at most.
        for random in [true, false] {
            let t = Table::new(4, 16 * K, 2);
            t.lock().wp.copy_from_slice(&[0, 16 * K, 10 * K, 16 * K]);
            t.lock().known.fill(true);
            t.attach_writer(1, true).unwrap();
            let mut rng = Rng::new(11);
            let mut cursor = (0, 0);
            let mut wp = [0, 16 * K, 10 * K, 16 * K];
            // Room for 16 + 6 blocks, in zones 0 and 2.
            for i in 0..22 {
                let mut pick = if random { Pick::Random } else { Pick::Seq(&mut cursor) };
                let g = t
                    .try_grant(1, 0, (0, 4), K, &mut pick, &mut rng, None, true)
                    .unwrap_or_else(|| panic!("write {i} (random {random}) got no zone with {wp:?}"));
                t.release(1, g.zone);
                let z = g.zone as usize;
                assert!(!g.reset, "write {i} (random {random}): {g:?} resets a zone of a verifying writer");
                assert!(z == 0 || z == 2, "write {i} (random {random}): {g:?} in a full zone");
                assert_eq!(g.at, wp[z], "{g:?}");
                wp[z] += K;
                assert!(!t.verify_ended(1, (0, 4), K) || i == 21, "ended after write {i} of 22");
            }
            assert_eq!(wp, [16 * K; 4]);
            let mut pick = if random { Pick::Random } else { Pick::Seq(&mut cursor) };
            let g = t.try_grant(1, 0, (0, 4), K, &mut pick, &mut rng, None, true);
            assert_eq!(g, None, "random {random}: every zone full, no grant (and no wait)");
            assert!(t.verify_ended(1, (0, 4), K), "random {random}: the verifying writer's writes end");
            // A writer that does not verify resets a full zone instead.
            t.detach(1);
            t.attach_writer(2, false).unwrap();
            assert!(!t.verify_ended(2, (0, 4), K));
            let g = t.grant(2, 0, (0, 4), K, &mut Pick::Random, &mut rng);
            assert!(g.reset && g.at == 0, "{g:?}");
        }
    }

    #[test]
    fn a_verifying_writer_does_not_share_zones_with_another_writer() {
        let t = Table::new(4, 16 * K, 2);
        t.attach_writer(1, true).unwrap();
        let e = t.attach_writer(2, false).unwrap_err();
        assert!(e.contains("verifies its writes"), "{e}");
        t.detach(1);
        t.attach_writer(2, false).unwrap();
        assert!(t.attach_writer(3, true).is_err());
        t.attach_writer(3, false).unwrap();
    }

    #[test]
    fn sequential_reads_stop_at_each_write_pointer_and_skip_zones_without_a_block() {
        // Zones holding 2 blocks, nothing, half a block, 1 block.
        let w = [2 * K, 0, K / 2, K];
        assert_eq!(seq_read_at(&w, 0, 0, K), Some((0, 0)));
        assert_eq!(seq_read_at(&w, 0, K, K), Some((0, K)));
        // Past zone 0's write pointer: zones 1 and 2 hold no whole block, zone 3 does.
        assert_eq!(seq_read_at(&w, 0, 2 * K, K), Some((3, 0)));
        // After the last zone holding data, fio's sequential zbd_find_zone finds none.
        assert_eq!(seq_read_at(&w, 3, K, K), None);
        assert_eq!(seq_read_at(&[0, 0], 0, 0, K), None, "nothing written: nothing to read");
    }

    #[test]
    fn random_reads_fold_into_the_written_part_and_take_the_nearest_zone_with_a_block() {
        let w = [0, 0, 8 * K, 0, K];
        // Zone 2 holds 8 blocks: the offset folds into (at % (8K − K)), block-aligned.
        assert_eq!(random_read_at(&w, 2, 3 * K, K), Some((2, 3 * K)));
        assert_eq!(random_read_at(&w, 2, 7 * K, K), Some((2, 0)));
        assert_eq!(random_read_at(&w, 2, 10 * K + 5, K), Some((2, 3 * K)));
        // Zone 3 holds nothing: the nearest above (4) comes before the one below (2).
        assert_eq!(random_read_at(&w, 3, 5 * K, K), Some((4, 0)), "one block: the zone's start");
        // Zone 0: nothing above until 2 (nothing below).
        assert_eq!(random_read_at(&w, 0, 2 * K, K), Some((2, 2 * K)));
        assert_eq!(random_read_at(&[0, K - 1], 1, 0, K), None, "no zone holds a whole block");
        // Every read stays below the write pointer.
        for at in (0..64 * K).step_by(512) {
            let (z, off) = random_read_at(&w, 2, at, K).unwrap();
            assert!(off + K <= w[z as usize] && off % K == 0, "{at}: {off}");
        }
    }
}
