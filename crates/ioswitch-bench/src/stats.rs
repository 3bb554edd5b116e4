//! Running statistics with fio's arithmetic: min, max, mean and standard deviation.
//!
//! [`Stats::add`] is fio's `add_stat_sample()` step for step (Welford's method in
//! `f64`, skipping the update when a value equals the running mean), and
//! [`Stats::merge`] is fio's `sum_stat()` for group reporting (the parallel form of
//! Welford's method, Chan et al.), so the same samples give fio's numbers to the last bit.

use crate::hist::Histogram;

/// Count, sum, min, max, mean and variance of a stream of values (latencies in ns,
/// usually). Adding a value is O(1) and allocation-free.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    samples: u64,
    min: u64,
    max: u64,
    sum: u128,
    mean: f64,
    /// Sum of squared differences from the mean (Welford's `M2`, fio's `S`).
    s: f64,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// No values yet.
    pub const fn new() -> Self {
        Stats { samples: 0, min: u64::MAX, max: 0, sum: 0, mean: 0.0, s: 0.0 }
    }

    /// Adds one value.
    #[inline]
    pub fn add(&mut self, value: u64) {
        self.max = self.max.max(value);
        self.min = self.min.min(value);
        self.sum += u128::from(value);
        let val = value as f64;
        let delta = val - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.samples as f64 + 1.0);
            self.s += delta * (val - self.mean);
        }
        self.samples += 1;
    }

    /// Combines `other` into `self` as if every value of both had been added here.
    pub fn merge(&mut self, other: &Stats) {
        if other.samples == 0 {
            return;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        if self.samples == 0 {
            self.mean = other.mean;
            self.s = other.s;
        } else {
            let (n_a, n_b) = (self.samples as f64, other.samples as f64);
            let n = (self.samples + other.samples) as f64;
            let delta = other.mean - self.mean;
            let mean = (other.mean * n_b + self.mean * n_a) / n;
            let product = (u128::from(self.samples) * u128::from(other.samples)) as f64;
            self.s = other.s + self.s + delta * delta * product / n;
            self.mean = mean;
        }
        self.samples += other.samples;
    }

    /// Number of values added.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Sum of the values added.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Smallest value; 0 when there is none (as fio reports an empty set).
    pub fn min(&self) -> u64 {
        if self.samples == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value; 0 when there is none.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Arithmetic mean (Welford's running mean, as fio keeps it); 0 when there is none.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Sample variance, `S / (N - 1)`; 0 for fewer than two values.
    pub fn variance(&self) -> f64 {
        if self.samples > 1 {
            self.s / (self.samples as f64 - 1.0)
        } else {
            0.0
        }
    }

    /// Sample standard deviation, `sqrt(S / (N - 1))` (Bessel-corrected), 0 for fewer than
    /// two values: what fio prints as `stdev` and writes as `"stddev"` in its JSON output
    /// (its `calc_lat()` divides by `N - 1`).
    pub fn stddev(&self) -> f64 {
        self.variance().sqrt()
    }
}

/// Everything fio reports about one latency (slat, clat or lat of one direction):
/// [`Stats`] for min/max/mean/stddev plus a [`Histogram`] for percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatStats {
    /// Count, min, max, mean, standard deviation.
    pub stats: Stats,
    /// Buckets for percentiles.
    pub hist: Histogram,
}

impl LatStats {
    /// Empty statistics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one latency in ns: O(1), allocation-free.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.stats.add(ns);
        self.hist.record(ns);
    }

    /// Combines `other` into `self` (group reporting).
    pub fn merge(&mut self, other: &LatStats) {
        self.stats.merge(&other.stats);
        self.hist.merge(&other.hist);
    }

    /// Number of latencies recorded.
    pub fn samples(&self) -> u64 {
        self.stats.samples()
    }

    /// Forgets everything recorded (end of a ramp time); keeps the histogram's memory.
    pub fn clear(&mut self) {
        self.stats = Stats::new();
        self.hist.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_of(values: &[u64]) -> Stats {
        let mut s = Stats::new();
        for &v in values {
            s.add(v);
        }
        s
    }

    /// Two-pass textbook formulas, for comparison.
    fn reference(values: &[u64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let ss = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>();
        (mean, if values.len() > 1 { (ss / (n - 1.0)).sqrt() } else { 0.0 })
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn empty_stats_report_zeros() {
        let s = Stats::new();
        assert_eq!((s.samples(), s.min(), s.max(), s.sum()), (0, 0, 0, 0));
        assert_eq!((s.mean(), s.stddev()), (0.0, 0.0));
    }

    #[test]
    fn one_value_has_zero_stddev() {
        let s = stats_of(&[42]);
        assert_eq!((s.samples(), s.min(), s.max(), s.sum()), (1, 42, 42, 42));
        assert_eq!((s.mean(), s.stddev()), (42.0, 0.0));
    }

    #[test]
    fn known_set_gives_sample_stddev() {
        // 2,4,4,4,5,5,7,9: mean 5, squared deviations sum to 32, sample variance 32/7.
        let s = stats_of(&[2, 4, 4, 4, 5, 5, 7, 9]);
        assert_eq!((s.min(), s.max(), s.sum(), s.samples()), (2, 9, 40, 8));
        assert_eq!(s.mean(), 5.0);
        assert!(close(s.variance(), 32.0 / 7.0));
        assert!(close(s.stddev(), (32.0f64 / 7.0).sqrt()));
    }

    #[test]
    fn welford_matches_two_pass_formulas_on_latency_like_data() {
        let values: Vec<u64> = (0..10_000u64).map(|i| 1_000_000 + (i * 7919) % 50_000 + (i % 7) * 3).collect();
        let s = stats_of(&values);
        let (mean, sd) = reference(&values);
        assert!(close(s.mean(), mean), "{} vs {mean}", s.mean());
        assert!(close(s.stddev(), sd), "{} vs {sd}", s.stddev());
        assert_eq!(s.min(), *values.iter().min().unwrap());
        assert_eq!(s.max(), *values.iter().max().unwrap());
    }

    #[test]
    fn merge_equals_adding_sequentially() {
        let a: Vec<u64> = (1..=1000).map(|i| i * 13 % 977 + 100).collect();
        let b: Vec<u64> = (1..=250).map(|i| 5000 + i * i).collect();
        let mut merged = stats_of(&a);
        merged.merge(&stats_of(&b));
        let all: Vec<u64> = a.iter().chain(&b).copied().collect();
        let seq = stats_of(&all);
        assert_eq!(merged.samples(), seq.samples());
        assert_eq!((merged.min(), merged.max(), merged.sum()), (seq.min(), seq.max(), seq.sum()));
        assert!(close(merged.mean(), seq.mean()));
        assert!(close(merged.stddev(), seq.stddev()));
    }

    #[test]
    fn merge_with_empty_sides() {
        let a = stats_of(&[3, 5, 10]);
        let mut e = Stats::new();
        e.merge(&a);
        assert_eq!(e, a);
        let mut a2 = a;
        a2.merge(&Stats::new());
        assert_eq!(a2, a);
    }

    #[test]
    fn lat_stats_feed_both_parts_and_merge() {
        let mut x = LatStats::new();
        let mut y = LatStats::new();
        for v in 100..200 {
            x.record(v);
            y.record(v * 3);
        }
        x.merge(&y);
        assert_eq!(x.samples(), 200);
        assert_eq!(x.hist.samples(), 200);
        assert_eq!(x.stats.max(), 597);
        x.clear();
        assert_eq!((x.samples(), x.hist.samples()), (0, 0));
    }
}
