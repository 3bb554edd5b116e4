//! fio's steady state (`ss`, `ss_dur`, `ss_ramp`; fio's steadystate.c): once a second
//! the job's (with `group_reporting`, its reporting group's) IOPS and bandwidth of the
//! last second are recorded in a window of `ss_dur` seconds; once the window is full,
//! the criterion is computed over it after each new sample, and the job ends when it is
//! below the limit:
//!
//! - `iops` / `bw`: the largest deviation of a sample from the window's mean (with `%`:
//!   as a percentage of the mean);
//! - `iops_slope` / `bw_slope`: the slope of the least-squares line through the window
//!   (x: 0, 1, … seconds; with `%`: as a percentage of the mean).
//!
//! Sampling starts one second after `ss_ramp` has passed (fio's rule). The report's
//! `"steadystate"` object ([`Outcome::json`]) has fio's keys and order.

use crate::report::Json;
use std::time::Duration;

/// What `ss=` names: the measure and how its limit is read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Criterion {
    /// IOPS (true) or bandwidth in bytes per second (false).
    pub iops: bool,
    /// The slope of the window (true) or the largest deviation from its mean (false).
    pub slope: bool,
    /// The limit is a percentage of the window's mean.
    pub pct: bool,
    /// The limit.
    pub limit: f64,
}

/// What `ss=` accepts.
pub const EXPECT_SS: &str =
    "iops, iops_slope, bw or bw_slope, ':' and a limit (a number, a percentage N%, or for bw a size per second)";

impl Criterion {
    /// Parses fio's `ss=` value: `iops:10%`, `bw_slope:1%`, `iops:500`, `bw:10m`.
    pub fn parse(s: &str) -> Result<Criterion, String> {
        let (name, limit) = s.split_once(':').ok_or_else(|| format!("'{s}' has no ':' and limit"))?;
        let (iops, slope) = match name.trim() {
            "iops" => (true, false),
            "iops_slope" => (true, true),
            "bw" => (false, false),
            "bw_slope" => (false, true),
            other => return Err(format!("'{other}' is not a criterion")),
        };
        let limit = limit.trim();
        let (pct, value) = match limit.strip_suffix('%') {
            Some(p) => (true, p.trim().parse::<f64>().map_err(|_| format!("'{limit}' is not a percentage"))?),
            None if iops => (false, limit.parse::<f64>().map_err(|_| format!("'{limit}' is not a number"))?),
            None => (
                false,
                crate::jobfile::parse_bytes(limit).ok_or_else(|| format!("'{limit}' is not a size per second"))? as f64,
            ),
        };
        if !value.is_finite() || value < 0.0 {
            return Err(format!("'{limit}' is not a limit of 0 or more"));
        }
        Ok(Criterion { iops, slope, pct, limit: value })
    }
}

/// A job's steady-state rule (`ss_dur` > 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadySpec {
    /// The criterion and its limit.
    pub crit: Criterion,
    /// The window, in whole seconds (fio's `ss_dur`).
    pub dur: u32,
    /// `ss_ramp`: no samples before this much time (and one second more) has passed.
    pub ramp: Duration,
}

impl Default for SteadySpec {
    /// fio's defaults: `ss=iops_slope:0.01%`, no window (off), no ramp.
    fn default() -> SteadySpec {
        SteadySpec { crit: Criterion { iops: true, slope: true, pct: true, limit: 0.01 }, dur: 0, ramp: Duration::ZERO }
    }
}

impl SteadySpec {
    /// Whether the job has a steady-state rule (`ss_dur` of a second or more).
    pub fn on(&self) -> bool {
        self.dur > 0
    }
}

/// The window and the criterion's state (fio's `struct steadystate_data`).
#[derive(Clone, Debug)]
pub struct Steady {
    spec: SteadySpec,
    iops: Vec<u64>,
    bw: Vec<u64>,
    head: usize,
    tail: usize,
    full: bool,
    attained: bool,
    sum_y: u64,
    sum_xy: u64,
    oldest_y: u64,
    slope: f64,
    deviation: f64,
    criterion: f64,
}

impl Steady {
    /// An empty window for `spec`.
    pub fn new(spec: SteadySpec) -> Steady {
        let n = spec.dur.max(1) as usize;
        Steady {
            spec,
            iops: vec![0; n],
            bw: vec![0; n],
            head: 0,
            tail: 0,
            full: false,
            attained: false,
            sum_y: 0,
            sum_xy: 0,
            oldest_y: 0,
            slope: 0.0,
            deviation: 0.0,
            criterion: 0.0,
        }
    }

    /// Whether the criterion held at a sample.
    pub fn attained(&self) -> bool {
        self.attained
    }

    /// Records one second's IOPS and bandwidth (bytes/s); returns whether the
    /// criterion now holds (the job ends).
    pub fn push(&mut self, iops: u64, bw: u64) -> bool {
        if self.attained {
            return true;
        }
        let dur = self.iops.len();
        self.iops[self.tail] = iops;
        self.bw[self.tail] = bw;
        let y = |s: &Steady, i: usize| if s.spec.crit.iops { s.iops[i] } else { s.bw[i] };
        if self.full || self.tail + 1 == self.head + dur {
            let new_val = y(self, self.tail);
            if !self.full {
                self.sum_y = (0..dur).map(|i| y(self, i)).sum();
                self.sum_xy = (0..dur).map(|i| i as u64 * y(self, (self.head + i) % dur)).sum();
                self.full = true;
            } else {
                self.sum_y = self.sum_y - self.oldest_y + new_val;
                // Every sample moves one x back; the new one is at x = dur - 1.
                self.sum_xy = self.sum_xy + dur as u64 * new_val - self.sum_y;
            }
            self.oldest_y = y(self, self.head);
            let n = dur as f64;
            let mean = self.sum_y as f64 / n;
            let holds = if self.spec.crit.slope {
                let sum_x = (dur * (dur - 1) / 2) as f64;
                let sum_x_sq = ((dur - 1) * dur * (2 * dur - 1) / 6) as f64;
                self.slope = (self.sum_xy as f64 - sum_x * self.sum_y as f64 / n) / (sum_x_sq - sum_x * sum_x / n);
                self.criterion = if self.spec.crit.pct { 100.0 * self.slope / mean } else { self.slope };
                self.criterion.abs() < self.spec.crit.limit
            } else {
                self.deviation = (0..dur).map(|i| (y(self, i) as f64 - mean).abs()).fold(0.0, f64::max);
                self.criterion = if self.spec.crit.pct { 100.0 * self.deviation / mean } else { self.deviation };
                self.criterion < self.spec.crit.limit
            };
            if holds {
                self.attained = true;
                return true;
            }
        }
        self.tail = (self.tail + 1) % dur;
        if self.tail <= self.head {
            self.head = (self.head + 1) % dur;
        }
        false
    }

    /// What the report shows of it.
    pub fn outcome(&self) -> Outcome {
        let dur = self.iops.len();
        // fio's stat.c: head is the oldest sample when attained or not yet full,
        // otherwise the one after it.
        let first = if self.attained || !self.full { self.head } else { (self.head + dur - 1) % dur };
        let order: Vec<usize> = (0..dur).map(|l| (first + l) % dur).collect();
        Outcome {
            spec: self.spec,
            attained: self.attained,
            criterion: self.criterion,
            deviation: self.deviation,
            slope: self.slope,
            iops: order.iter().map(|&k| self.iops[k]).collect(),
            bw: order.iter().map(|&k| self.bw[k]).collect(),
        }
    }
}

/// The steady state of a job as reported (fio's `ss_*` fields of a thread_stat).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The rule.
    pub spec: SteadySpec,
    /// Whether the criterion held.
    pub attained: bool,
    /// The criterion's last value.
    pub criterion: f64,
    /// The last largest deviation (deviation criteria).
    pub deviation: f64,
    /// The last slope (slope criteria).
    pub slope: f64,
    /// The window's IOPS, oldest first.
    pub iops: Vec<u64>,
    /// The window's bandwidth (bytes/s), oldest first.
    pub bw: Vec<u64>,
}

impl Outcome {
    /// fio's line of it in the normal output: `  steadystate  : attained=yes,
    /// bw=1300MiB/s (1331MB/s), iops=333k, iops mean dev=4.145%`.
    pub fn text(&self) -> String {
        use crate::report::num2str;
        let c = &self.spec.crit;
        let mean = |v: &[u64]| if v.is_empty() { 0 } else { v.iter().sum::<u64>() / v.len() as u64 };
        let (bw, iops) = (mean(&self.bw), mean(&self.iops));
        format!(
            "  steadystate  : attained={}, bw={}B/s ({}B/s), iops={}, {}{}={:.3}{}",
            if self.attained { "yes" } else { "no" },
            num2str(bw, 4, true),
            num2str(bw, 4, false),
            num2str(iops, 4, false),
            if c.iops { "iops" } else { "bw" },
            if c.slope { " slope" } else { " mean dev" },
            self.criterion,
            if c.pct { "%" } else { "" }
        )
    }

    /// fio's `"steadystate"` object of a job in its JSON output.
    pub fn json(&self) -> Json {
        let c = &self.spec.crit;
        let pct = if c.pct { "%" } else { "" };
        let ss = format!(
            "{}{}:{:.6}{pct}",
            if c.iops { "iops" } else { "bw" },
            if c.slope { "_slope" } else { "" },
            c.limit as f32
        );
        let mean = |v: &[u64]| if v.is_empty() { 0 } else { v.iter().sum::<u64>() / v.len() as u64 };
        let arr = |v: &[u64]| Json::Arr(v.iter().map(|&x| x.into()).collect());
        let pairs: Vec<(&str, Json)> = vec![
            ("ss", ss.into()),
            ("duration", self.spec.dur.into()),
            ("attained", u32::from(self.attained).into()),
            ("criterion", format!("{:.6}{pct}", self.criterion as f32).into()),
            ("max_deviation", self.deviation.into()),
            ("slope", self.slope.into()),
            (
                "data",
                Json::Obj(vec![
                    ("bw_mean".into(), mean(&self.bw).into()),
                    ("iops_mean".into(), mean(&self.iops).into()),
                    ("iops".into(), arr(&self.iops)),
                    ("bw".into(), arr(&self.bw)),
                ]),
            ),
        ];
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
}

/// One steady-state check unit: a job instance, or with `group_reporting` every
/// instance of the reporting group (fio sums the group's jobs), with their slots in
/// [`crate::engine::Progress::slots`].
#[derive(Debug)]
pub struct Unit {
    /// The slots (job instances) it sums.
    pub slots: Vec<usize>,
    /// When each instance's data collection starts (its start + `ss_ramp` + 1 s, fio's rule), ns.
    pub from: Vec<u64>,
    /// The window and criterion.
    pub steady: Steady,
    prev: Vec<(u64, u64, u64)>,
}

impl Unit {
    /// A unit over `slots`, whose instances started at `start` (ns, [`crate::engine::now_ns`]).
    pub fn new(spec: SteadySpec, slots: Vec<usize>, start: &[u64]) -> Unit {
        let ramp = spec.ramp.as_nanos() as u64;
        // fio: with no ss_ramp, collection starts at once; with one, a second after it.
        let from = start.iter().map(|&s| if ramp == 0 { s } else { s + ramp + 1_000_000_000 }).collect();
        Unit { prev: start.iter().map(|&s| (s, 0, 0)).collect(), slots, from, steady: Steady::new(spec) }
    }

    /// Adds an instance (slot) that started at `start` (ns).
    pub fn add(&mut self, slot: usize, start: u64) {
        let ramp = self.steady.spec.ramp.as_nanos() as u64;
        self.slots.push(slot);
        self.from.push(if ramp == 0 { start } else { start + ramp + 1_000_000_000 });
        self.prev.push((start, 0, 0));
    }

    /// One check (fio's steadystate_check, once a second): adds the instances' IOPS and
    /// bandwidth since the last check, records them, and when the criterion holds sets
    /// every instance's stop flag.
    pub fn check(&mut self, progress: &crate::engine::Progress, now: u64) {
        use std::sync::atomic::Ordering;
        if self.steady.attained() {
            return;
        }
        let (mut iops, mut bw, mut over) = (0u64, 0u64, false);
        for (k, &i) in self.slots.iter().enumerate() {
            let Some(s) = progress.slots.get(i) else { continue };
            let (ios, bytes) = (s.ios.load(Ordering::Relaxed), s.bytes.load(Ordering::Relaxed));
            let (t, pios, pbytes) = self.prev[k];
            let ms = (now.saturating_sub(t) / 1_000_000).max(1);
            if now >= self.from[k] {
                iops += 1000 * (ios - pios) / ms;
                bw += 1000 * (bytes - pbytes) / ms;
                over = true;
            }
            self.prev[k] = (now, ios, bytes);
        }
        if over && self.steady.push(iops, bw) {
            for &i in &self.slots {
                if let Some(s) = progress.slots.get(i) {
                    s.stop.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ss: &str, dur: u32) -> SteadySpec {
        SteadySpec { crit: Criterion::parse(ss).unwrap(), dur, ramp: Duration::ZERO }
    }

    /// The criterion by its definition over a window (oldest first), computed afresh.
    fn by_definition(c: &Criterion, w: &[u64]) -> f64 {
        let n = w.len() as f64;
        let mean = w.iter().sum::<u64>() as f64 / n;
        let v = if c.slope {
            let mx = (n - 1.0) / 2.0;
            let num: f64 = w.iter().enumerate().map(|(i, &y)| (i as f64 - mx) * (y as f64 - mean)).sum();
            let den: f64 = (0..w.len()).map(|i| (i as f64 - mx).powi(2)).sum();
            num / den
        } else {
            w.iter().map(|&y| (y as f64 - mean).abs()).fold(0.0, f64::max)
        };
        if c.pct {
            100.0 * v / mean
        } else {
            v
        }
    }

    #[test]
    fn the_criterion_is_fios_over_the_last_dur_samples_and_ends_when_below_the_limit() {
        let series: Vec<u64> = vec![100, 300, 150, 900, 500, 520, 480, 510, 505, 500, 499, 501];
        for ss in ["iops:2%", "iops_slope:0.5%", "iops:30", "iops_slope:3"] {
            let s = spec(ss, 4);
            let mut st = Steady::new(s);
            let mut ended_at = None;
            for (i, &y) in series.iter().enumerate() {
                if st.push(y, y * 4096) {
                    ended_at = Some(i);
                    break;
                }
                if i >= 3 {
                    let w = &series[i - 3..=i];
                    let want = by_definition(&s.crit, w);
                    assert!(
                        (st.criterion - want).abs() < 1e-6 * want.abs().max(1.0),
                        "{ss} at {i}: {} vs {want}",
                        st.criterion
                    );
                    assert!(want.abs() >= s.crit.limit, "{ss} at {i}: {want} is below the limit but the job went on");
                    let o = st.outcome();
                    assert_eq!(o.iops, w, "{ss} at {i}: the window, oldest first");
                } else {
                    assert_eq!(st.criterion, 0.0, "{ss}: no criterion before the window is full");
                }
            }
            let i = ended_at.unwrap_or_else(|| panic!("{ss} never attained"));
            let w = &series[i - 3..=i];
            assert!(by_definition(&s.crit, w).abs() < s.crit.limit, "{ss} ended at {i}");
            let o = st.outcome();
            assert!(o.attained);
            assert_eq!(o.iops, w, "{ss}: the window it ended on, oldest first");
            assert_eq!(o.bw, w.iter().map(|y| y * 4096).collect::<Vec<_>>());
        }
    }

    #[test]
    fn bw_criteria_judge_the_bandwidth_and_parse_sizes() {
        let c = Criterion::parse("bw:1m").unwrap();
        assert_eq!((c.iops, c.slope, c.pct, c.limit), (false, false, false, 1048576.0));
        let mut st = Steady::new(SteadySpec { crit: c, dur: 2, ramp: Duration::ZERO });
        // IOPS vary wildly, bandwidth by less than 1 MiB/s: attained on the bandwidth.
        assert!(!st.push(1, 10 << 20));
        assert!(st.push(1000, (10 << 20) + 1000));
        let c = Criterion::parse("bw_slope:1%").unwrap();
        assert_eq!((c.iops, c.slope, c.pct, c.limit), (false, true, true, 1.0));
    }

    #[test]
    fn bad_values_are_refused_naming_what_is_wrong() {
        for (v, why) in [
            ("iops", "no ':'"),
            ("lat:5%", "'lat' is not a criterion"),
            ("iops:x%", "not a percentage"),
            ("iops:ten", "not a number"),
            ("bw:fast", "not a size"),
            ("iops:-1", "0 or more"),
        ] {
            let e = Criterion::parse(v).unwrap_err();
            assert!(e.contains(why), "{v}: {e}");
        }
    }

    #[test]
    fn the_json_object_has_fios_keys_in_fios_order() {
        let mut st = Steady::new(spec("iops:10%", 3));
        for y in [100, 101, 99] {
            st.push(y, y * 131072);
        }
        let j = st.outcome().json();
        let keys: Vec<&str> = match &j {
            Json::Obj(p) => p.iter().map(|(k, _)| k.as_str()).collect(),
            _ => panic!("an object"),
        };
        assert_eq!(keys, ["ss", "duration", "attained", "criterion", "max_deviation", "slope", "data"]);
        assert_eq!(j.get("ss"), Some(&Json::Str("iops:10.000000%".into())));
        assert_eq!(j.get("attained"), Some(&Json::Int(1)));
        assert_eq!(j.get("criterion"), Some(&Json::Str("1.000000%".into())));
        let d = j.get("data").unwrap();
        assert_eq!(d.get("iops_mean"), Some(&Json::Int(100)));
        assert_eq!(d.get("iops"), Some(&Json::Arr(vec![Json::Int(100), Json::Int(101), Json::Int(99)])));
        assert_eq!(
            st.outcome().text(),
            "  steadystate  : attained=yes, bw=12.5MiB/s (13.1MB/s), iops=100, iops mean dev=1.000%"
        );
    }

    #[test]
    fn a_unit_sums_its_instances_rates_after_the_ramp_and_stops_them_when_steady() {
        use crate::engine::{Progress, SsSlot};
        use std::sync::atomic::Ordering;
        const S: u64 = 1_000_000_000;
        let progress = Progress { slots: (0..3).map(|_| SsSlot::default()).collect(), ..Progress::default() };
        let spec = SteadySpec { crit: Criterion::parse("iops:5%").unwrap(), dur: 2, ramp: Duration::from_secs(1) };
        // Instances 0 and 1 as one group; instance 2 is not in it.
        let mut u = Unit::new(spec, vec![0], &[0]);
        u.add(1, 0);
        let step = |u: &mut Unit, t: u64, ios: [u64; 2]| {
            for (i, n) in ios.into_iter().enumerate() {
                progress.slots[i].ios.store(n, Ordering::Relaxed);
                progress.slots[i].bytes.store(n * 4096, Ordering::Relaxed);
            }
            progress.slots[2].ios.store(t, Ordering::Relaxed);
            u.check(&progress, t * S);
        };
        // Second 1 is in the ramp (samples start at ss_ramp + 1 s, fio's rule): not recorded.
        step(&mut u, 1, [100, 100]);
        assert_eq!(u.steady.outcome().iops, [0, 0]);
        // From second 2 on: the group's IOPS over the last second.
        step(&mut u, 2, [1100, 600]);
        assert_eq!(u.steady.outcome().iops, [1500, 0]);
        assert!(!u.steady.attained());
        assert!(!progress.slots[0].stop.load(Ordering::Relaxed));
        step(&mut u, 3, [2100, 1100]);
        let o = u.steady.outcome();
        assert_eq!(o.iops, [1500, 1500]);
        assert_eq!(o.bw, [1500 * 4096, 1500 * 4096]);
        assert!(o.attained);
        assert!(progress.slots[0].stop.load(Ordering::Relaxed) && progress.slots[1].stop.load(Ordering::Relaxed));
        assert!(!progress.slots[2].stop.load(Ordering::Relaxed), "not in the unit");
    }
}
