//! fio's flow control between jobs (`flow`, `flow_id`, `flow_sleep`; fio's flow.c).
//!
//! The jobs of one `flow_id` share a counter, which starts at 1, and the sum of their
//! `flow` weights. Before each I/O a job compares its own count of I/Os with the shared
//! one: while its share of the count is above its share of the weights it is held (the
//! engine waits for its I/Os in flight, then sleeps `flow_sleep` µs, or tries again at
//! once with `flow_sleep=0`); otherwise both counts go up by one and the I/O goes. A job
//! leaving takes its count and weight back out. Jobs with `flow=0` take no part.
//!
//! One difference from fio: fio adds every job's weight when it reads the job file, so a
//! job of a later `stonewall` group weighs on the jobs before it (a job alone in its group
//! can then be held forever); here a job's weight counts from the start of its phase (its
//! `stonewall` group), or, for a job that waits for another (`wait_for`), from its own start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The flows of a run, by `flow_id`.
#[derive(Debug, Default)]
pub struct Flows {
    by_id: Mutex<HashMap<i32, Arc<Shared>>>,
}

/// What the jobs of one `flow_id` share.
#[derive(Debug)]
struct Shared {
    /// I/Os let go, plus fio's initial 1.
    counter: AtomicU64,
    /// The sum of the weights of the jobs taking part.
    weight: AtomicU64,
}

impl Flows {
    /// A job of weight `weight` (its `flow`) joins flow `id`; `None` for weight 0 (fio:
    /// the job takes no part).
    pub fn join(&self, id: i32, weight: u32, sleep: Duration) -> Option<JobFlow> {
        if weight == 0 {
            return None;
        }
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        let shared = map
            .entry(id)
            .or_insert_with(|| Arc::new(Shared { counter: AtomicU64::new(1), weight: AtomicU64::new(0) }))
            .clone();
        shared.weight.fetch_add(u64::from(weight), Ordering::Relaxed);
        Some(JobFlow { shared, weight: u64::from(weight), counter: 0, sleep })
    }
}

/// One job's part in its flow; leaving (drop) takes its count and weight back out.
#[derive(Debug)]
pub struct JobFlow {
    shared: Arc<Shared>,
    weight: u64,
    counter: u64,
    /// `flow_sleep`.
    pub sleep: Duration,
}

impl JobFlow {
    /// fio's `flow_threshold_exceeded`: whether the job is held before its next I/O; if
    /// not, the I/O is counted (the job's count and the shared one).
    pub fn held(&mut self) -> bool {
        let shared = self.shared.counter.load(Ordering::Relaxed).max(1);
        let total = self.shared.weight.load(Ordering::Relaxed).max(1);
        if self.counter as f64 / shared as f64 > self.weight as f64 / total as f64 {
            return true;
        }
        self.shared.counter.fetch_add(1, Ordering::Relaxed);
        self.counter += 1;
        false
    }

    /// I/Os this job was let go.
    pub fn count(&self) -> u64 {
        self.counter
    }
}

impl Drop for JobFlow {
    fn drop(&mut self) {
        self.shared.counter.fetch_sub(self.counter, Ordering::Relaxed);
        self.shared.weight.fetch_sub(self.weight, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jobs of the given weights try one I/O each per turn, `turns` times; the I/Os
    /// each was let go.
    fn turns(flows: &Flows, weights: &[(i32, u32)], turns: usize) -> Vec<u64> {
        let mut jobs: Vec<JobFlow> =
            weights.iter().map(|&(id, w)| flows.join(id, w, Duration::ZERO).expect("a weight")).collect();
        for _ in 0..turns {
            for j in jobs.iter_mut() {
                j.held();
            }
        }
        jobs.iter().map(JobFlow::count).collect()
    }

    #[test]
    fn jobs_of_a_flow_get_io_in_proportion_to_their_weights() {
        let flows = Flows::default();
        // flow.fio's 1 and 8: 8 I/Os of the heavier job to each of the other's.
        let n = turns(&flows, &[(0, 1), (0, 8)], 9000);
        assert!(n[0] > 900 && (n[1] as f64 / n[0] as f64 - 8.0).abs() < 0.02, "{n:?}");
        // butterfly.fio's 2 and 2: one I/O each in turn.
        let n = turns(&flows, &[(0, 2), (0, 2)], 1000);
        assert!(n[0].abs_diff(n[1]) <= 1 && n[0] + n[1] >= 1998, "{n:?}");
        // Three jobs 1:2:3.
        let n = turns(&flows, &[(0, 1), (0, 2), (0, 3)], 6000);
        let (a, b) = (n[1] as f64 / n[0] as f64, n[2] as f64 / n[0] as f64);
        assert!((a - 2.0).abs() < 0.02 && (b - 3.0).abs() < 0.02, "{n:?}");
    }

    #[test]
    fn flow_ids_are_separate_and_leaving_takes_the_counts_out() {
        let flows = Flows::default();
        // Different ids: each job is alone in its flow and never held.
        assert_eq!(turns(&flows, &[(1, 1), (2, 8)], 100), [100, 100]);
        // Everything the jobs above counted was taken out when they left: fio's start.
        let shared = flows.by_id.lock().unwrap().get(&1).cloned().unwrap();
        assert_eq!((shared.counter.load(Ordering::Relaxed), shared.weight.load(Ordering::Relaxed)), (1, 0));
        assert!(flows.join(0, 0, Duration::ZERO).is_none(), "flow=0 takes no part");
        // A job alone in its flow goes every time.
        let mut alone = flows.join(3, 5, Duration::ZERO).unwrap();
        assert!((0..50).all(|_| !alone.held()));
    }
}
