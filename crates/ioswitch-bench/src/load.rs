//! Load shaping with fio 3.33's semantics: `rate`/`rate_iops` per direction with
//! `rate_process=linear|poisson`, and `thinktime` with `thinktime_spin`,
//! `thinktime_blocks` and `thinktime_blocks_type`.
//!
//! The rate rule is fio's `usec_for_io` (backend.c) and `rate_ddir` (io_u.c): after an
//! I/O of direction d is issued, the next one of d is due at
//! - `linear`: (bytes of d issued so far) / (rate of d) after the job's epoch, so the
//!   issue times follow a straight line and a late I/O is caught up at once;
//! - `poisson`: the previous due time plus an exponential gap of mean
//!   1 / (rate / block size): arrivals of a Poisson process (fio's
//!   `(1000000 / iops) * -log(U)`, in µs).
//!
//! Before an I/O whose due time is ahead, fio (inline submission) first waits for every
//! I/O in flight (`io_u_quiesce`), then sleeps until the due time. In a mixed job whose
//! drawn direction is ahead, the other direction is taken when it is due, and otherwise
//! the one due first.
//!
//! `thinktime` (fio's `handle_thinktime`): once `thinktime_blocks` I/Os have completed
//! (`thinktime_blocks_type=complete`, the default) or been issued (`issue`) since the
//! last stall, or with `thinktime_iotime` once `thinktime_iotime` + `thinktime` has passed
//! since it (then by blocks only where `thinktime_blocks` is given), the job waits for
//! everything in flight, spins `thinktime_spin`, then sleeps the rest of `thinktime`.

use crate::engine::Rng;
use std::time::Duration;

/// How a rated job spaces its I/Os (fio's `rate_process`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateProcess {
    /// Evenly: the n-th byte is due at n / rate.
    #[default]
    Linear,
    /// Exponential gaps between I/Os (a Poisson arrival process) at the same mean rate.
    Poisson,
}

/// Which I/Os `thinktime_blocks` counts (fio's `thinktime_blocks_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThinkCount {
    /// Completed I/Os (fio's default).
    #[default]
    Complete,
    /// Issued I/Os.
    Issue,
}

/// The load-shaping options of a job, as fio reads them (defaults: none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Load {
    /// `rate`: bytes per second of reads and of writes (0: not limited).
    pub rate: [u64; 2],
    /// `rate_iops`: I/Os per second of reads and of writes (0: not limited).
    pub rate_iops: [u64; 2],
    /// `rate_process`.
    pub process: RateProcess,
    /// `thinktime`: the stall (zero: none).
    pub thinktime: Duration,
    /// `thinktime_spin`: the part of the stall spent spinning on the CPU.
    pub thinktime_spin: Duration,
    /// `thinktime_blocks`: I/Os between stalls (default 1).
    pub thinktime_blocks: u32,
    /// `thinktime_blocks_type`.
    pub thinktime_count: ThinkCount,
    /// `thinktime_iotime`: also stall once this much time of I/O has passed since the last
    /// stall (zero: not by time).
    pub thinktime_iotime: Duration,
    /// Whether `thinktime_blocks` was given (with `thinktime_iotime` and without it, fio
    /// stalls by time only).
    pub thinktime_blocks_given: bool,
    /// The option (`rate` or `rate_iops`) that gave a rate for trims (fio's third value),
    /// if one did: refused in a job that trims.
    pub trim_rate: Option<&'static str>,
    /// `rate_ignore_thinktime`: after a stall the rate goes on as if the job had issued
    /// at its rate during it (no catch-up burst); off (fio's default): the limiter makes
    /// up for the stall.
    pub rate_ignore_thinktime: bool,
    /// `latency_target`: search for the highest queue depth whose latencies meet it.
    pub latency_target: Option<Duration>,
    /// `latency_window`: how long each depth is tried.
    pub latency_window: Duration,
    /// `latency_percentile`: the share of I/Os (%) that must meet the target (default 100).
    pub latency_percentile: f64,
    /// `latency_run`: keep searching for the whole run instead of settling.
    pub latency_run: bool,
    /// `max_latency`: per direction (read, write, trim), the total latency (ns) an I/O
    /// may take after the ramp; one that takes longer ends the job with ETIMEDOUT, as
    /// in fio (0: no limit).
    pub max_latency: [u64; 3],
    /// `rate_min`: bytes per second of reads and of writes below which the job fails (0:
    /// none).
    pub rate_min: [u64; 2],
    /// `rate_iops_min`: the same in I/Os per second.
    pub rate_iops_min: [u64; 2],
    /// `rate_cycle`: the interval over which `rate_min` is checked (default 1 s).
    pub rate_cycle: Duration,
}

impl Load {
    /// fio's defaults: no rate, no thinktime, `thinktime_blocks=1`.
    pub fn new() -> Load {
        Load { thinktime_blocks: 1, latency_percentile: 100.0, rate_cycle: Duration::from_secs(1), ..Load::default() }
    }

    /// Bytes per second of each direction for block sizes `bs` (fio's `__setup_rate`:
    /// `rate` wins, else `rate_iops` × block size); 0 where not limited.
    pub fn bytes_per_sec(&self, bs: [u64; 2]) -> [u64; 2] {
        [0, 1].map(|d| if self.rate[d] > 0 { self.rate[d] } else { self.rate_iops[d].saturating_mul(bs[d]) })
    }

    /// Whether any direction is rated.
    pub fn rated(&self) -> bool {
        self.rate.iter().chain(&self.rate_iops).any(|&r| r > 0)
    }
}

/// The rate limiter of one job instance (see the module docs). Times are ns of the
/// monotonic clock; due times count from the job's epoch (its start, then the end of its
/// ramp, where fio starts the rate over).
#[derive(Debug)]
pub struct Pacer {
    epoch: u64,
    bps: [u64; 2],
    bs: [u64; 2],
    process: RateProcess,
    issued: [u64; 2],
    /// When the next I/O of each direction is due.
    next: [u64; 2],
    rng: [Rng; 2],
}

impl Pacer {
    /// A limiter for `load` with block sizes `bs`, from `epoch` on; `None` when nothing
    /// is rated.
    pub fn new(load: &Load, bs: [u64; 2], seed: u64, epoch: u64) -> Option<Pacer> {
        if !load.rated() {
            return None;
        }
        Some(Pacer {
            epoch,
            bps: load.bytes_per_sec(bs),
            bs,
            process: load.process,
            issued: [0; 2],
            next: [epoch; 2],
            rng: [Rng::new(seed ^ 0x9015_5011), Rng::new(seed ^ 0x9015_5012)],
        })
    }

    /// The direction to issue (`write`: the one drawn) at `now` and when it is due: fio's
    /// `rate_ddir`. The caller waits until the returned time when it is after `now`.
    pub fn choose(&self, write: bool, now: u64, mixed: bool) -> (bool, u64) {
        let (d, o) = (write as usize, !write as usize);
        if self.bps[d] == 0 || self.next[d] <= now {
            return (write, now);
        }
        if mixed {
            if self.bps[o] == 0 || self.next[o] <= now {
                return (!write, now);
            }
            if self.next[o] < self.next[d] {
                return (!write, self.next[o]);
            }
        }
        (write, self.next[d])
    }

    /// Records that an I/O of `len` bytes in direction `write` was issued (fio's
    /// `usec_for_io` after each submission).
    pub fn issued(&mut self, write: bool, len: u64) {
        let d = write as usize;
        let bps = self.bps[d];
        if bps == 0 {
            return;
        }
        self.issued[d] += len;
        self.next[d] = match self.process {
            RateProcess::Linear => self.linear_due(d),
            RateProcess::Poisson => self.next[d] + exp_gap_ns(&mut self.rng[d], bps, self.bs[d]),
        };
    }

    /// Linear: when the bytes issued so far in direction `d` are due at its rate.
    fn linear_due(&self, d: usize) -> u64 {
        let (b, bps) = (self.issued[d], self.bps[d]);
        let since = (b / bps) as u128 * 1_000_000_000 + (b % bps) as u128 * 1_000_000_000 / bps as u128;
        self.epoch + since as u64
    }

    /// `rate_ignore_thinktime` after a stall of `stall_ns` that followed an I/O of
    /// direction `write` (fio's `handle_thinktime`): the bytes the rate would have issued
    /// during the stall count as issued, less one block (fio's `over`: the next I/O goes
    /// at once) when the stall was at least one I/O's time; with `rate_process=poisson`
    /// the next arrival moves on by the stall. fio works in µs; so does this.
    pub fn skip_stall(&mut self, write: bool, stall_ns: u64) {
        let d = write as usize;
        let (bps, bs) = (self.bps[d], self.bs[d]);
        let total_us = stall_ns / 1000;
        if bps == 0 || total_us == 0 {
            return;
        }
        let missed = (u128::from(bps) * u128::from(total_us) / 1_000_000) as u64;
        let us_per_op = (u128::from(bs) * 1_000_000 / u128::from(bps)) as u64;
        let over = if us_per_op <= total_us { bs } else { 0 };
        // fio's unsigned sum would wrap where `missed` < `over`; here it adds nothing.
        self.issued[d] += missed.saturating_sub(over);
        self.next[d] = match self.process {
            RateProcess::Linear => self.linear_due(d),
            RateProcess::Poisson => self.next[d] + total_us * 1000,
        };
    }

    /// Starts the rate over from `epoch` (fio's `reset_io_counters` when the ramp ends).
    pub fn restart(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.issued = [0; 2];
        self.next = [epoch; 2];
    }

    /// When the next I/O of direction `write` is due.
    pub fn due(&self, write: bool) -> u64 {
        self.next[write as usize]
    }
}

/// One exponential inter-arrival gap in ns for `bps` bytes/s in blocks of `bs`: fio's
/// `(1000000 / iops) * -log(U)` (µs), U uniform in (0, 1].
pub(crate) fn exp_gap_ns(rng: &mut Rng, bps: u64, bs: u64) -> u64 {
    let iops = (bps / bs.max(1)).max(1);
    // U in (0, 1]: never 0, so -ln(U) is finite.
    let u = ((rng.next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    (1e9 / iops as f64 * -u.ln()) as u64
}

/// The thinktime rule of one job instance (see the module docs).
#[derive(Debug)]
pub struct Thinker {
    think: Duration,
    spin: Duration,
    blocks: u64,
    count: ThinkCount,
    last: u64,
    iotime_ns: u64,
    by_blocks: bool,
    /// When the last stall ended (the job's start before the first), ns.
    last_ns: u64,
}

impl Thinker {
    /// The rule for `load` of a job that started at `epoch` (ns); `None` without
    /// `thinktime`.
    pub fn new(load: &Load, epoch: u64) -> Option<Thinker> {
        let iotime_ns = load.thinktime_iotime.as_nanos() as u64;
        (!load.thinktime.is_zero()).then_some(Thinker {
            think: load.thinktime,
            spin: load.thinktime_spin.min(load.thinktime),
            blocks: u64::from(load.thinktime_blocks.max(1)),
            count: load.thinktime_count,
            last: 0,
            iotime_ns,
            by_blocks: iotime_ns == 0 || load.thinktime_blocks_given,
            last_ns: epoch,
        })
    }

    /// Whether the job stalls at `now` (ns), after `issued` I/Os were issued and
    /// `completed` completed; if so, the counts start again from here.
    pub fn due(&mut self, issued: u64, completed: u64, now: u64) -> bool {
        let b = match self.count {
            ThinkCount::Complete => completed,
            ThinkCount::Issue => issued,
        };
        let by_time =
            self.iotime_ns > 0 && now.saturating_sub(self.last_ns) >= self.iotime_ns + self.think.as_nanos() as u64;
        if !(by_time || (self.by_blocks && b >= self.last + self.blocks)) {
            return false;
        }
        self.last = b;
        if self.iotime_ns > 0 {
            self.last_ns = now;
        }
        true
    }

    /// The stall (the caller has waited for everything in flight): spins `thinktime_spin`,
    /// sleeps the rest of `thinktime`. Returns the time it took, ns.
    pub fn stall(&self, now: fn() -> u64) -> u64 {
        let t0 = now();
        let spin_end = t0 + self.spin.as_nanos() as u64;
        while now() < spin_end {
            std::hint::spin_loop();
        }
        let end = t0 + self.think.as_nanos() as u64;
        sleep_until(end, now);
        now() - t0
    }
}

/// Sleeps until the monotonic time `until` (ns of `now`).
pub fn sleep_until(until: u64, now: fn() -> u64) {
    loop {
        let t = now();
        if t >= until {
            return;
        }
        std::thread::sleep(Duration::from_nanos(until - t));
    }
}

/// What the queue-depth search asks of the job after an event (fio's `lat_target_*`,
/// io_u.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatStep {
    /// Go on.
    Go,
    /// The depth went down: wait for everything in flight before going on.
    Quiesce,
    /// An I/O missed the target at depth 1 (with `latency_percentile=100`): the job fails.
    Fatal,
    /// The depth settled: wait for everything in flight, start the statistics over and
    /// run one more window at this depth.
    FinalRun,
    /// The final window met the target: the job ends.
    Done,
}

/// fio's search for the highest queue depth at which `latency_percentile` % of the I/Os
/// of a `latency_window` complete within `latency_target` (io_u.c, `lat_target_check`):
/// start at depth 1; after a window that meets the target, double the depth (or bisect
/// towards the lowest depth that failed); after one that does not, bisect down (with
/// `latency_percentile=100` at the first I/O over the target). When a success leaves the
/// depth where it was, the statistics start over for a final window at that depth, after
/// which the job ends (unless `latency_run`).
#[derive(Clone, Debug)]
pub struct LatencyTarget {
    target_ns: u64,
    window_ns: u64,
    percentile: f64,
    keep_running: bool,
    iodepth: u32,
    qd: u32,
    high: u32,
    low: u32,
    stable: u32,
    cycle_start: u64,
    cycle_ios: u64,
    failed: u64,
    end_run: bool,
}

impl LatencyTarget {
    /// The search for `load` at most `iodepth` deep, from `now` (ns); `None` without
    /// `latency_target`.
    pub fn new(load: &Load, iodepth: u32, now: u64) -> Option<LatencyTarget> {
        let target = load.latency_target?;
        Some(LatencyTarget {
            target_ns: target.as_nanos() as u64,
            window_ns: load.latency_window.as_nanos() as u64,
            percentile: load.latency_percentile,
            keep_running: load.latency_run,
            iodepth: iodepth.max(1),
            qd: 1,
            high: iodepth.max(1),
            low: 1,
            stable: 0,
            cycle_start: now,
            cycle_ios: 0,
            failed: 0,
            end_run: false,
        })
    }

    /// The depth the job may fill its queue to now.
    pub fn depth(&self) -> u32 {
        self.qd
    }

    fn new_cycle(&mut self, now: u64, ios: u64) {
        self.cycle_start = now;
        self.cycle_ios = ios;
        self.failed = 0;
    }

    /// fio's `__lat_target_failed`: bisect down, or fail at depth 1.
    fn ramp_down(&mut self, now: u64, ios: u64) -> LatStep {
        if self.qd == 1 {
            return LatStep::Fatal;
        }
        self.high = self.qd;
        if self.qd == self.low {
            self.low -= 1;
        }
        self.qd = (self.qd + self.low) / 2;
        self.stable = 0;
        self.new_cycle(now, ios);
        LatStep::Quiesce
    }

    /// One I/O completed with total latency `lat_ns`; `ios`: I/Os completed so far.
    pub fn completed(&mut self, lat_ns: u64, now: u64, ios: u64) -> LatStep {
        if lat_ns <= self.target_ns {
            return LatStep::Go;
        }
        if self.percentile >= 100.0 {
            return self.ramp_down(now, ios);
        }
        self.failed += 1;
        LatStep::Go
    }

    /// fio's `lat_target_check`, after every I/O: at the end of a window, up or down.
    pub fn check(&mut self, now: u64, ios: u64) -> LatStep {
        if now.saturating_sub(self.cycle_start) < self.window_ns {
            return LatStep::Go;
        }
        let done = ios - self.cycle_ios;
        if done == 0 {
            // fio divides by zero here; nothing completed, nothing to judge yet.
            return LatStep::Go;
        }
        let success = (done - self.failed.min(done)) as f64 / done as f64 * 100.0;
        if success < self.percentile {
            return self.ramp_down(now, ios);
        }
        // fio's lat_target_success.
        let qd = self.qd;
        self.low = self.qd;
        if self.qd + 1 == self.high {
            self.stable += 1;
            if self.stable >= 3 {
                self.high += 1;
                self.stable = 0;
            }
        }
        self.qd = if self.high != self.iodepth { (self.qd + self.high) / 2 } else { self.qd * 2 };
        self.qd = self.qd.min(self.iodepth);
        let step = if !self.keep_running && self.qd == qd {
            if self.end_run {
                LatStep::Done
            } else {
                self.end_run = true;
                LatStep::FinalRun
            }
        } else {
            LatStep::Go
        };
        self.new_cycle(now, ios);
        step
    }
}

/// fio's `rate_min`/`rate_iops_min` check (`__check_min_rate`, backend.c): after a 2 s
/// settling time from the job's start (or the end of its ramp), every `rate_cycle` the
/// rate of each direction that has done I/O over the cycle must be at least the minimum,
/// or the job fails.
#[derive(Clone, Debug)]
pub struct MinRate {
    bytes_min: [u64; 2],
    iops_min: [u64; 2],
    cycle_ms: u64,
    /// Per direction: bytes and I/Os at the last check and its time (ms); `None` before the first.
    last: [Option<(u64, u64, u64)>; 2],
}

impl MinRate {
    /// The check for `load`; `None` without a minimum.
    pub fn new(load: &Load) -> Option<MinRate> {
        let any = load.rate_min.iter().chain(&load.rate_iops_min).any(|&r| r > 0);
        any.then_some(MinRate {
            bytes_min: load.rate_min,
            iops_min: load.rate_iops_min,
            cycle_ms: load.rate_cycle.as_millis() as u64,
            last: [None; 2],
        })
    }

    /// The check at `ms` since the job's start, with `done[d]` = (bytes, I/Os) done so far
    /// per direction; the failure in fio's words when a minimum was not met.
    pub fn check(&mut self, ms: u64, done: [(u64, u64); 2]) -> Option<String> {
        if ms < 2000 {
            return None;
        }
        for (d, (bytes, ios)) in done.into_iter().enumerate() {
            if bytes == 0 || (self.bytes_min[d] == 0 && self.iops_min[d] == 0) {
                continue;
            }
            if let Some((b0, i0, t0)) = self.last[d] {
                let spent = ms - t0;
                if spent < self.cycle_ms || spent == 0 {
                    continue;
                }
                if self.bytes_min[d] > 0 {
                    let got = (bytes - b0) * 1000 / spent;
                    if got < self.bytes_min[d] {
                        return Some(format!("rate_min={}B/s not met, got {got}B/s", self.bytes_min[d]));
                    }
                } else {
                    let got = (ios - i0) * 1000 / spent;
                    if got < self.iops_min[d] {
                        return Some(format!("rate_iops_min={} not met, got {got} IOPS", self.iops_min[d]));
                    }
                }
            }
            self.last[d] = Some((bytes, ios, ms));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rated(rate: [u64; 2], iops: [u64; 2], process: RateProcess) -> Load {
        Load { rate, rate_iops: iops, process, ..Load::new() }
    }

    #[test]
    fn linear_due_times_are_bytes_over_rate() {
        let mut p = Pacer::new(&rated([1 << 20, 0], [0; 2], RateProcess::Linear), [4096; 2], 1, 0).unwrap();
        assert_eq!(p.choose(false, 0, false), (false, 0), "the first I/O is due at once");
        p.issued(false, 4096);
        // 4096 B at 1 MiB/s: 1/256 s.
        assert_eq!(p.due(false), 1_000_000_000 / 256);
        for _ in 0..255 {
            p.issued(false, 4096);
        }
        assert_eq!(p.due(false), 1_000_000_000, "1 MiB issued at 1 MiB/s is due at 1 s");
        // A late job catches up: an I/O is due as soon as asked.
        assert_eq!(p.choose(false, 2_000_000_000, false), (false, 2_000_000_000));
    }

    #[test]
    fn rate_ignore_thinktime_counts_the_stalls_bytes_as_issued_less_a_block() {
        let mut p = Pacer::new(&rated([1 << 20, 0], [0; 2], RateProcess::Linear), [4096; 2], 1, 0).unwrap();
        p.issued(false, 4096);
        // A 10 ms stall at 1 MiB/s: 10485 bytes missed, less a block (one I/O's 3906 µs is
        // within the stall): 4096 + 6389 bytes issued, due at their time at 1 MiB/s.
        p.skip_stall(false, 10_000_000);
        assert_eq!(p.due(false), (4096 + 6389) * 1_000_000_000 / (1 << 20));
        // A stall shorter than one I/O's time adds what it missed, no block less.
        p.skip_stall(false, 1_000_000);
        assert_eq!(p.due(false), (4096 + 6389 + 1048) * 1_000_000_000 / (1 << 20));
        // Another direction, or one that is not rated, is left alone.
        p.skip_stall(true, 10_000_000);
        assert_eq!(p.due(true), 0);
        // Poisson: the next arrival moves on by the stall.
        let mut q = Pacer::new(&rated([1 << 20, 0], [0; 2], RateProcess::Poisson), [4096; 2], 1, 0).unwrap();
        q.issued(false, 4096);
        let before = q.due(false);
        q.skip_stall(false, 10_000_000);
        assert_eq!(q.due(false), before + 10_000_000);
    }

    #[test]
    fn rate_iops_is_iops_times_block_size_and_rate_wins() {
        let l = rated([0, 0], [100, 50], RateProcess::Linear);
        assert_eq!(l.bytes_per_sec([4096, 8192]), [409_600, 409_600]);
        let both = rated([1000, 0], [100, 0], RateProcess::Linear);
        assert_eq!(both.bytes_per_sec([4096, 4096])[0], 1000);
        assert!(Pacer::new(&Load::new(), [4096; 2], 1, 0).is_none(), "no rate, no limiter");
    }

    #[test]
    fn a_mixed_job_takes_the_direction_that_is_due() {
        let mut p = Pacer::new(&rated([4096, 4096], [0; 2], RateProcess::Linear), [4096; 2], 1, 0).unwrap();
        p.issued(false, 4096); // reads: next at 1 s
        assert_eq!(p.choose(false, 0, true), (true, 0), "writes are due, reads are not");
        p.issued(true, 8192); // writes: next at 2 s
        assert_eq!(p.choose(true, 0, true), (false, 1_000_000_000), "both ahead: the one due first");
        assert_eq!(p.choose(true, 0, false), (true, 2_000_000_000), "an unmixed job keeps its direction");
        // An unrated direction is always due.
        let mut w = Pacer::new(&rated([4096, 0], [0; 2], RateProcess::Linear), [4096; 2], 1, 0).unwrap();
        w.issued(false, 4096);
        assert_eq!(w.choose(true, 0, true), (true, 0));
        assert_eq!(w.choose(false, 0, true), (true, 0));
    }

    #[test]
    fn poisson_gaps_have_the_mean_and_variance_of_an_exponential() {
        // 1000 IOPS: exponential gaps of mean 1 ms; an exponential's variance is mean².
        let mut p = Pacer::new(&rated([0; 2], [1000, 0], RateProcess::Poisson), [4096; 2], 7, 0).unwrap();
        let n = 200_000;
        let (mut prev, mut sum, mut sum2) = (0u64, 0f64, 0f64);
        for _ in 0..n {
            p.issued(false, 4096);
            let gap = (p.due(false) - prev) as f64 / 1e6;
            prev = p.due(false);
            sum += gap;
            sum2 += gap * gap;
        }
        let mean = sum / n as f64;
        let var = sum2 / n as f64 - mean * mean;
        assert!((mean - 1.0).abs() < 0.01, "mean gap {mean} ms, want 1 ms ± 1%");
        assert!((var - 1.0).abs() < 0.03, "gap variance {var} ms², want 1 ms² ± 3%");
        // Over a long run the Poisson process keeps the rate: n gaps take n ms.
        assert!((prev as f64 / 1e6 / n as f64 - 1.0).abs() < 0.01);
    }

    #[test]
    fn thinktime_stalls_every_n_blocks_of_the_chosen_kind() {
        let load = Load { thinktime: Duration::from_micros(10), thinktime_blocks: 4, ..Load::new() };
        let mut t = Thinker::new(&load, 0).unwrap();
        let stalls: Vec<u64> = (1..=12).filter(|&c| t.due(c + 100, c, 0)).collect();
        assert_eq!(stalls, [4, 8, 12], "counts completions by default");
        let mut t = Thinker::new(&Load { thinktime_count: ThinkCount::Issue, ..load.clone() }, 0).unwrap();
        let stalls: Vec<u64> = (1..=8).filter(|&i| t.due(i, 0, 0)).collect();
        assert_eq!(stalls, [4, 8], "thinktime_blocks_type=issue counts issues");
        assert!(Thinker::new(&Load::new(), 0).is_none());
    }

    #[test]
    fn thinktime_iotime_stalls_by_time_and_by_blocks_only_where_given() {
        let ms = 1_000_000u64;
        // 9 ms of I/O, then 1 ms of thinktime: a stall once 10 ms have passed since the last.
        let load = Load {
            thinktime: Duration::from_millis(1),
            thinktime_iotime: Duration::from_millis(9),
            thinktime_blocks: 4,
            ..Load::new()
        };
        let mut t = Thinker::new(&load, 0).unwrap();
        let stalls: Vec<u64> = (1..=25).filter(|&i| t.due(i, i, i * ms)).collect();
        assert_eq!(stalls, [10, 20], "by time only: thinktime_blocks was not given");
        let mut t = Thinker::new(&Load { thinktime_blocks_given: true, ..load }, 0).unwrap();
        let stalls: Vec<u64> = (1..=12).filter(|&i| t.due(i, i, i * ms)).collect();
        assert_eq!(stalls, [4, 8, 12], "blocks too where given (they come first here)");
    }

    #[test]
    fn a_stall_lasts_thinktime_and_spins_part_of_it() {
        let load =
            Load { thinktime: Duration::from_millis(20), thinktime_spin: Duration::from_millis(5), ..Load::new() };
        let t = Thinker::new(&load, 0).unwrap();
        let took = t.stall(crate::engine::now_ns);
        assert!(took >= 20_000_000, "stalled {took} ns, less than thinktime");
    }

    fn target(iodepth: u32, pct: f64) -> LatencyTarget {
        let load = Load {
            latency_target: Some(Duration::from_micros(100)),
            latency_window: Duration::from_millis(10),
            latency_percentile: pct,
            ..Load::new()
        };
        LatencyTarget::new(&load, iodepth, 0).unwrap()
    }

    /// Runs the search against a device whose latency is `lat_at(depth)` µs, one window
    /// after another; the depths tried, and how it ended.
    fn search(t: &mut LatencyTarget, lat_at: impl Fn(u32) -> u64) -> (Vec<u32>, LatStep) {
        let (mut now, mut ios, mut tried) = (0u64, 0u64, vec![]);
        for _ in 0..200 {
            tried.push(t.depth());
            let mut step = LatStep::Go;
            for _ in 0..10 {
                ios += 1;
                now += 1_000_000;
                step = t.completed(lat_at(t.depth()) * 1000, now, ios);
                if step != LatStep::Go {
                    break;
                }
            }
            if step == LatStep::Fatal {
                return (tried, step);
            }
            let s = t.check(now, ios);
            if s == LatStep::Done {
                return (tried, s);
            }
        }
        (tried, LatStep::Go)
    }

    #[test]
    fn the_depth_search_settles_on_the_highest_depth_that_meets_the_target() {
        // 10 µs per queued I/O: depths up to 10 meet 100 µs.
        let (tried, end) = search(&mut target(64, 100.0), |qd| 10 * qd as u64);
        assert_eq!(end, LatStep::Done);
        assert_eq!(*tried.last().unwrap(), 10, "depths tried: {tried:?}");
        assert_eq!(&tried[..7], [1, 2, 4, 8, 16, 12, 10], "doubling, then bisecting");
        // A device that meets the target at any depth: the search ends at iodepth.
        let (tried, end) = search(&mut target(16, 100.0), |_| 1);
        assert_eq!((end, *tried.last().unwrap()), (LatStep::Done, 16), "{tried:?}");
    }

    #[test]
    fn missing_the_target_at_depth_one_fails_the_job() {
        let (tried, end) = search(&mut target(8, 100.0), |_| 500);
        assert_eq!((end, tried), (LatStep::Fatal, vec![1]));
    }

    #[test]
    fn a_percentile_below_100_judges_each_window_by_its_share_of_misses() {
        let mut t = target(8, 90.0);
        // 1 miss in 10 I/Os: 90% met, a success (depth 1 → 2).
        for i in 1..=10u64 {
            let lat = if i == 5 { 500_000 } else { 10_000 };
            assert_eq!(t.completed(lat, i * 1_000_000, i), LatStep::Go, "no single I/O ramps down");
        }
        assert_eq!(t.check(10_000_000, 10), LatStep::Go);
        assert_eq!(t.depth(), 2);
        // 2 misses in 10: 80%, the depth goes back down.
        for i in 11..=20u64 {
            t.completed(if i % 5 == 0 { 500_000 } else { 10_000 }, i * 1_000_000, i);
        }
        assert_eq!(t.check(20_000_000, 20), LatStep::Quiesce);
        assert_eq!(t.depth(), 1);
        // A window still open decides nothing.
        assert_eq!(t.check(21_000_000, 21), LatStep::Go);
    }

    #[test]
    fn rate_min_fails_a_cycle_below_the_minimum_after_two_seconds() {
        let load = Load { rate_min: [1000, 0], rate_cycle: Duration::from_millis(500), ..Load::new() };
        let mut m = MinRate::new(&load).unwrap();
        assert_eq!(m.check(100, [(10, 1), (0, 0)]), None, "the first 2 s settle");
        assert_eq!(m.check(2000, [(4000, 4), (0, 0)]), None, "the first check only starts a cycle");
        assert_eq!(m.check(2400, [(4100, 5), (0, 0)]), None, "a cycle not over decides nothing");
        // 600 bytes in 600 ms: 1000 B/s, met.
        assert_eq!(m.check(2600, [(4600, 6), (0, 0)]), None);
        // 400 bytes in 1000 ms: 400 B/s.
        let e = m.check(3600, [(5000, 7), (0, 0)]).expect("below the minimum");
        assert_eq!(e, "rate_min=1000B/s not met, got 400B/s");
        let mut iops = MinRate::new(&Load { rate_iops_min: [0, 10], ..Load::new() }).unwrap();
        assert_eq!(iops.check(2000, [(0, 0), (4096, 1)]), None);
        assert_eq!(iops.check(3000, [(0, 0), (8192, 5)]).unwrap(), "rate_iops_min=10 not met, got 4 IOPS");
        assert!(MinRate::new(&Load::new()).is_none());
    }
}
