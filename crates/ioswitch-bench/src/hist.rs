//! fio's log-linear latency histogram, reproduced from its definition.
//!
//! A latency in nanoseconds falls into one of [`PLAT_NR`] buckets:
//!
//! - values below `2 * PLAT_VAL` (128 ns) have a bucket each, so they are kept exactly;
//! - above that, every power of two `[2^m, 2^(m+1))` is split into [`PLAT_VAL`] (64) equal
//!   buckets of width `2^(m - PLAT_BITS)`; a bucket is reported as its midpoint, so the
//!   reported value is within `1 / (2 * PLAT_VAL)` = 1/128 ≈ 0.78% of every value in it;
//! - there are [`PLAT_GROUP_NR`] (29) such groups of 64 buckets, the first two being the
//!   exact ones, so the last group covers `[2^33, 2^34)` ns (8.6 s to 17.2 s); anything
//!   longer is counted in the last bucket, as fio does.
//!
//! Percentiles follow fio's `calc_clat_percentiles()`: the percentile list is sorted, and
//! percentile `p` of `N` samples is the first bucket (from the lowest) whose cumulative
//! count reaches `p / 100 · N`, reported as that bucket's value ([`bucket_value`]). fio
//! evaluates `p / 100 · N` in `long double` (x87 80-bit on x86-64, where the reference
//! numbers come from); [`Histogram::percentile`] reproduces that arithmetic exactly, so a
//! percentile lands in the same bucket as fio's even when `p / 100 · N` is within a
//! rounding error of a whole number.

use std::fmt;

/// Bits of a value kept below its most significant bit: `2^PLAT_BITS` buckets per power
/// of two (fio's `FIO_IO_U_PLAT_BITS`).
pub const PLAT_BITS: u32 = 6;
/// Buckets per group (per power of two): 64 (fio's `FIO_IO_U_PLAT_VAL`).
pub const PLAT_VAL: usize = 1 << PLAT_BITS;
/// Number of groups (fio's `FIO_IO_U_PLAT_GROUP_NR`).
pub const PLAT_GROUP_NR: usize = 29;
/// Number of buckets: 1856 (fio's `FIO_IO_U_PLAT_NR`).
pub const PLAT_NR: usize = PLAT_GROUP_NR * PLAT_VAL;

/// Values below this many nanoseconds (128) have a bucket of their own.
const EXACT_LIMIT: u64 = 2 * PLAT_VAL as u64;

/// fio's default percentile list (`percentile_list` when not given).
pub const DEFAULT_PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

/// The bucket a value (in ns) is counted in (fio's `plat_val_to_idx()`); values beyond
/// the last bucket are counted in it.
#[inline]
pub const fn bucket_index(ns: u64) -> usize {
    if ns < EXACT_LIMIT {
        return ns as usize;
    }
    // ns >= 128, so msb >= 7 and error_bits >= 1.
    let msb = 63 - ns.leading_zeros();
    let error_bits = msb - PLAT_BITS;
    let base = ((error_bits + 1) as usize) << PLAT_BITS;
    let offset = (ns >> error_bits) as usize & (PLAT_VAL - 1);
    let idx = base + offset;
    if idx < PLAT_NR - 1 {
        idx
    } else {
        PLAT_NR - 1
    }
}

/// Group number and width exponent of bucket `idx` (`idx >= 128`).
#[inline]
const fn group_of(idx: usize) -> (u32, u64) {
    let error_bits = (idx >> PLAT_BITS) as u32 - 1;
    let base = 1u64 << (error_bits + PLAT_BITS);
    (error_bits, base)
}

/// The value fio reports for bucket `idx` (fio's `plat_idx_to_val()`): the value itself in
/// the exact range, otherwise the midpoint of the bucket, `lo + width / 2`. An index past
/// the last bucket is treated as the last bucket.
#[inline]
pub const fn bucket_value(idx: usize) -> u64 {
    let idx = if idx < PLAT_NR { idx } else { PLAT_NR - 1 };
    if (idx as u64) < EXACT_LIMIT {
        return idx as u64;
    }
    let (error_bits, base) = group_of(idx);
    let k = (idx % PLAT_VAL) as u64;
    // fio computes base + (k + 0.5) * 2^error_bits in double and truncates; with
    // error_bits >= 1 that is exactly this integer.
    base + (k << error_bits) + (1u64 << (error_bits - 1))
}

/// The smallest and largest value (in ns) counted in bucket `idx`; the last bucket also
/// takes every larger value, so its upper bound is `u64::MAX`. An index past the last
/// bucket is treated as the last bucket.
pub const fn bucket_bounds(idx: usize) -> (u64, u64) {
    let idx = if idx < PLAT_NR { idx } else { PLAT_NR - 1 };
    if (idx as u64) < EXACT_LIMIT {
        return (idx as u64, idx as u64);
    }
    let (error_bits, base) = group_of(idx);
    let lo = base + (((idx % PLAT_VAL) as u64) << error_bits);
    if idx == PLAT_NR - 1 {
        (lo, u64::MAX)
    } else {
        (lo, lo + (1u64 << error_bits) - 1)
    }
}

/// The JSON key fio prints for a percentile: C's `%f` (six decimals), e.g. `"99.000000"`.
pub fn percentile_key(p: f64) -> String {
    // Rust's fixed-precision formatting rounds exactly like glibc's %f (ties to even on
    // the exact binary value).
    format!("{p:.6}")
}

/// A latency histogram with fio's buckets. Recording is O(1) and allocation-free; one
/// histogram belongs to one thread, and per-thread histograms are combined with
/// [`Histogram::merge`].
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64; PLAT_NR]>,
    samples: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("samples", &self.samples)
            .field("nonzero_buckets", &self.counts.iter().filter(|&&c| c != 0).count())
            .finish()
    }
}

impl Histogram {
    /// An empty histogram (allocates its 1856 counters once).
    pub fn new() -> Self {
        Histogram { counts: Box::new([0; PLAT_NR]), samples: 0 }
    }

    /// Counts one value, in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket_index(ns)] += 1;
        self.samples += 1;
    }

    /// Counts `n` occurrences of one value, in nanoseconds.
    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        self.counts[bucket_index(ns)] += n;
        self.samples += n;
    }

    /// Number of values counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// The bucket counters, indexed like [`bucket_index`].
    pub fn counts(&self) -> &[u64; PLAT_NR] {
        &self.counts
    }

    /// `(bucket value, count)` of every non-empty bucket, lowest first (the "bins" of
    /// fio's json+ output).
    pub fn nonzero_buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, &c)| c != 0).map(|(i, &c)| (bucket_value(i), c))
    }

    /// Adds every count of `other` to this histogram (fio's group reporting).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.samples += other.samples;
    }

    /// Forgets every value counted (e.g. at the end of a ramp time).
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.samples = 0;
    }

    /// Percentile `p` (`0 < p <= 100`) as fio reports it, in ns; `None` when the
    /// histogram is empty or `p` is out of range.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        self.percentiles(&[p]).first().map(|&(_, v)| v)
    }

    /// Several percentiles at once, as fio computes them: the list is sorted (ascending),
    /// entries outside `0 < p <= 100` (and NaN) are left out, and each result is paired
    /// with its percentile. Empty when the histogram is empty.
    pub fn percentiles(&self, list: &[f64]) -> Vec<(f64, u64)> {
        let mut ps: Vec<f64> = list.iter().copied().filter(|&p| p > 0.0 && p <= 100.0).collect();
        if self.samples == 0 || ps.is_empty() {
            return Vec::new();
        }
        ps.sort_by(f64::total_cmp);
        let needs: Vec<u128> = ps.iter().map(|&p| fio_threshold(p, self.samples)).collect();
        let mut out = Vec::with_capacity(ps.len());
        let mut sum: u128 = 0;
        for (idx, &count) in self.counts.iter().enumerate() {
            sum += u128::from(count);
            while out.len() < ps.len() && sum >= needs[out.len()] {
                out.push((ps[out.len()], bucket_value(idx)));
            }
            if out.len() == ps.len() {
                break;
            }
        }
        out
    }
}

/// The smallest cumulative count `sum` that passes fio's test
/// `sum >= (long double) p / 100.0 * n`, with x87 extended precision (64-bit significand,
/// round to nearest even) for the division and the multiplication. `p` is positive and
/// finite.
fn fio_threshold(p: f64, n: u64) -> u128 {
    // p = mp * 2^ep exactly.
    let bits = p.to_bits();
    let exp_field = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (mp, ep) = if exp_field == 0 { (frac, -1074) } else { (frac | 1 << 52, exp_field - 1075) };
    if mp == 0 || n == 0 {
        return 0;
    }
    // q = round64(p / 100): scale the dividend so that the quotient has more than 64
    // significant bits, and keep "something was left over" as the sticky bit.
    let num = u128::from(mp) << 74;
    let (qm, qe) = round_to_64(num / 100, ep - 74, num % 100 != 0);
    // t = round64(q * n); both factors have at most 64 bits, so the product is exact.
    let (tm, te) = round_to_64(u128::from(qm) * u128::from(n), qe, false);
    // Smallest integer >= tm * 2^te.
    if te >= 0 {
        u128::from(tm).checked_shl(te as u32).filter(|v| v >> te == u128::from(tm)).unwrap_or(u128::MAX)
    } else {
        let k = te.unsigned_abs();
        if k >= 128 {
            u128::from(tm != 0)
        } else {
            (u128::from(tm) + (1u128 << k) - 1) >> k
        }
    }
}

/// Rounds `m * 2^e` (plus less than one unit of `m`'s last place when `sticky`) to a
/// 64-bit significand, nearest even. `m` must have more than 64 bits when `sticky` is set.
fn round_to_64(m: u128, e: i32, sticky: bool) -> (u64, i32) {
    let width = 128 - m.leading_zeros();
    if width <= 64 {
        return (m as u64, e);
    }
    let shift = width - 64;
    let kept = m >> shift;
    let rest = m & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    let up = rest > half || (rest == half && (sticky || kept & 1 == 1));
    let mut kept = kept + u128::from(up);
    let mut e = e + shift as i32;
    if kept >> 64 != 0 {
        kept >>= 1;
        e += 1;
    }
    (kept as u64, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_1856_buckets_in_29_groups() {
        assert_eq!(PLAT_VAL, 64);
        assert_eq!(PLAT_NR, 1856);
        assert_eq!(bucket_index(u64::MAX), PLAT_NR - 1);
    }

    #[test]
    fn values_below_128_ns_are_exact() {
        for v in 0..128 {
            assert_eq!(bucket_index(v), v as usize);
            assert_eq!(bucket_value(v as usize), v);
            assert_eq!(bucket_bounds(v as usize), (v, v));
        }
    }

    #[test]
    fn bucket_index_and_value_at_group_boundaries() {
        // 128..=255: buckets of 2 ns, reported at lo + 1.
        assert_eq!(bucket_index(127), 127);
        assert_eq!(bucket_index(128), 128);
        assert_eq!(bucket_index(129), 128);
        assert_eq!(bucket_value(128), 129);
        assert_eq!(bucket_index(130), 129);
        assert_eq!(bucket_index(255), 191);
        assert_eq!(bucket_value(191), 255);
        assert_eq!(bucket_bounds(191), (254, 255));
        // 256..=511: buckets of 4 ns, reported at lo + 2.
        assert_eq!(bucket_index(256), 192);
        assert_eq!(bucket_value(192), 258);
        assert_eq!(bucket_bounds(192), (256, 259));
        // 1000 = 512 + 61 * 8 + 0: group of 8 ns buckets (error bits 3), index 4*64 + 61.
        assert_eq!(bucket_index(1000), 317);
        assert_eq!(bucket_bounds(317), (1000, 1007));
        assert_eq!(bucket_value(317), 1004);
        // 1e6 = 2^19 + 58 * 2^13 + 1824: error bits 13, index 14*64 + 58.
        assert_eq!(bucket_index(1_000_000), 954);
        assert_eq!(bucket_bounds(954), (999_424, 1_007_615));
        assert_eq!(bucket_value(954), 1_003_520);
        // 1e9 = 2^29 + 55 * 2^23 + ...: error bits 23, index 24*64 + 55.
        assert_eq!(bucket_index(1_000_000_000), 1591);
        assert_eq!(bucket_bounds(1591), (998_244_352, 1_006_632_959));
        assert_eq!(bucket_value(1591), 1_002_438_656);
    }

    #[test]
    fn the_last_bucket_takes_everything_beyond_it() {
        let last_lo = (1u64 << 33) + (63u64 << 27);
        assert_eq!(bucket_index(last_lo - 1), PLAT_NR - 2);
        assert_eq!(bucket_index(last_lo), PLAT_NR - 1);
        assert_eq!(bucket_index(1 << 34), PLAT_NR - 1);
        assert_eq!(bucket_index(u64::MAX), PLAT_NR - 1);
        assert_eq!(bucket_value(PLAT_NR - 1), last_lo + (1 << 26));
        assert_eq!(bucket_value(PLAT_NR + 5), bucket_value(PLAT_NR - 1));
        assert_eq!(bucket_bounds(PLAT_NR - 1), (last_lo, u64::MAX));
    }

    #[test]
    fn buckets_tile_the_value_range_in_order() {
        let mut next = 0u64;
        for idx in 0..PLAT_NR {
            let (lo, hi) = bucket_bounds(idx);
            assert_eq!(lo, next, "bucket {idx}");
            assert!(lo <= bucket_value(idx) && bucket_value(idx) <= hi);
            assert_eq!(bucket_index(lo), idx);
            assert_eq!(bucket_index(hi), idx);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn reported_value_is_within_1_128th_of_the_recorded_value() {
        // A geometric sweep plus neighbours of every power of two up to the last group.
        let mut values: Vec<u64> = Vec::new();
        let mut v = 1.0f64;
        while v < (1u64 << 34) as f64 {
            values.push(v as u64);
            v *= 1.0037;
        }
        for s in 1..34 {
            values.extend([(1u64 << s) - 1, 1 << s, (1 << s) + 1]);
        }
        for ns in values {
            let reported = bucket_value(bucket_index(ns));
            let err = (reported as f64 - ns as f64).abs() / ns.max(1) as f64;
            assert!(err <= 1.0 / 128.0, "{ns} ns reported as {reported} ({err})");
        }
    }

    fn hist_of(values: impl IntoIterator<Item = u64>) -> Histogram {
        let mut h = Histogram::new();
        for v in values {
            h.record(v);
        }
        h
    }

    #[test]
    fn percentiles_of_1_to_100_pick_the_first_bucket_reaching_p_percent() {
        let h = hist_of(1..=100);
        assert_eq!(h.samples(), 100);
        assert_eq!(h.percentile(1.0), Some(1));
        assert_eq!(h.percentile(50.0), Some(50));
        assert_eq!(h.percentile(99.0), Some(99));
        assert_eq!(h.percentile(99.5), Some(100));
        assert_eq!(h.percentile(99.99), Some(100));
        assert_eq!(h.percentile(100.0), Some(100));
        // 0.5% of 100 is 0.5: the first bucket already reaches it.
        assert_eq!(h.percentile(0.5), Some(1));
        assert_eq!(h.percentile(1.5), Some(2));
    }

    #[test]
    fn percentiles_of_equal_values_are_that_bucket() {
        let h = hist_of(std::iter::repeat_n(1000, 1000));
        for (p, v) in h.percentiles(&DEFAULT_PERCENTILES) {
            assert_eq!(v, 1004, "p{p}");
        }
        let single = hist_of([5_000_000]);
        let expect = bucket_value(bucket_index(5_000_000));
        assert_eq!(single.percentiles(&DEFAULT_PERCENTILES).len(), 17);
        assert!(single.percentiles(&DEFAULT_PERCENTILES).iter().all(|&(_, v)| v == expect));
    }

    #[test]
    fn percentiles_come_back_sorted_and_invalid_ones_are_left_out() {
        let h = hist_of(1..=10);
        assert_eq!(
            h.percentiles(&[90.0, 10.0, 0.0, -1.0, 100.5, f64::NAN, 50.0]),
            vec![(10.0, 1), (50.0, 5), (90.0, 9)]
        );
        assert_eq!(h.percentile(0.0), None);
        assert_eq!(Histogram::new().percentile(50.0), None);
        assert!(Histogram::new().percentiles(&DEFAULT_PERCENTILES).is_empty());
    }

    #[test]
    fn a_threshold_just_above_a_whole_count_needs_the_next_sample() {
        // 99.9 as a double is slightly above 99.9, so 99.9% of 1000 is slightly above 999
        // in long double: the 1000th sample is needed.
        let mut h = hist_of(std::iter::repeat_n(10, 999));
        h.record(20);
        assert_eq!(h.percentile(99.9), Some(20));
        // 50% of 1000 is exactly 500.
        assert_eq!(fio_threshold(50.0, 1000), 500);
        assert_eq!(fio_threshold(99.9, 1000), 1000);
        assert_eq!(fio_threshold(100.0, u64::MAX), u128::from(u64::MAX));
        assert_eq!(fio_threshold(1e-300, 10), 1);
    }

    #[test]
    fn thresholds_agree_with_double_arithmetic_away_from_ties() {
        for n in [1u64, 2, 3, 7, 100, 999, 1000, 12345, 1 << 20, 987_654_321] {
            for &p in DEFAULT_PERCENTILES.iter().chain(&[0.1, 33.3, 66.6, 100.0]) {
                let t = p / 100.0 * n as f64;
                let need = fio_threshold(p, n);
                if (t - t.round()).abs() > 1e-6 * t.max(1.0) {
                    assert_eq!(need, t.ceil() as u128, "p{p} n{n}");
                } else {
                    assert!(need.abs_diff(t.round() as u128) <= 1, "p{p} n{n}");
                }
            }
        }
    }

    #[test]
    fn merge_equals_recording_both() {
        let a_vals: Vec<u64> = (0..5000).map(|i| (i * 7919) % 3_000_000).collect();
        let b_vals: Vec<u64> = (0..3000).map(|i| 100 + i * i).collect();
        let mut a = hist_of(a_vals.iter().copied());
        let b = hist_of(b_vals.iter().copied());
        let both = hist_of(a_vals.iter().chain(&b_vals).copied());
        a.merge(&b);
        assert_eq!(a, both);
        assert_eq!(a.percentiles(&DEFAULT_PERCENTILES), both.percentiles(&DEFAULT_PERCENTILES));
    }

    #[test]
    fn record_n_clear_and_nonzero_buckets() {
        let mut h = Histogram::new();
        h.record_n(300, 3);
        h.record(5);
        assert_eq!(h.nonzero_buckets().collect::<Vec<_>>(), vec![(5, 1), (bucket_value(bucket_index(300)), 3)]);
        h.clear();
        assert!(h.is_empty());
        assert_eq!(h.nonzero_buckets().count(), 0);
    }

    #[test]
    fn percentile_keys_are_printed_like_c_percent_f() {
        assert_eq!(percentile_key(99.0), "99.000000");
        assert_eq!(percentile_key(99.95), "99.950000");
        assert_eq!(percentile_key(1.0), "1.000000");
        assert_eq!(percentile_key(0.0078125), "0.007812");
        let keys: Vec<String> = DEFAULT_PERCENTILES.iter().map(|&p| percentile_key(p)).collect();
        assert_eq!(keys[13..], ["99.500000", "99.900000", "99.950000", "99.990000"]);
    }
}
