//! Distributions of random offsets (fio's `random_distribution`).
//!
//! A distribution draws a block number in `0..n` (blocks of the direction's smallest
//! block size). `zipf`, `pareto` and `normal` first draw a *rank* (0 the most likely)
//! and then scatter the ranks over the region with a bijection `rank·a + base (mod n)`
//! (`a` coprime with `n`), as fio scatters its ranks with a hash: hot blocks are spread
//! over the region, and the most likely block is at `base`, which is `center·n` when a
//! center is given (`zipf:1.2:0.25`) and random otherwise (`normal`: the middle).
//!
//! - `zipf:θ` (θ ≠ 1, default 1.1): Gray et al.'s generator, as fio's `zipf_next`: rank r
//!   (from 1) has probability `r^-θ / ζ(n, θ)`, exactly for the first two ranks and
//!   approximately for the rest. ζ is summed over at most 10 million terms, as fio does.
//! - `pareto:h` (0 < h < 1, default 0.2): rank `(n−1)·u^(ln h / ln(1−h))` for a uniform u,
//!   as fio's `pareto_next`: a fraction h of the draws falls into the fraction 1−h of the
//!   ranks at the top (`pareto:0.8` is the 80/20 rule).
//! - `normal:σ` / `gauss:σ` (0 ≤ σ < 100): fio 3.33's `gauss_next` (lib/gauss.c): the
//!   value is the average of 12 uniform draws in `0..=n` (rounded up), plus, when σ > 0,
//!   a uniform deviation `⌊s·u⌋ − ⌊s/2⌋` with `s = min(⌈n·σ/100⌉, n/2)`, halved
//!   (towards 0) while it would take the value out of `0..n`. So the values lie around
//!   `n/2` with a standard deviation of about `√(n²/144 + s²/12)`: `n/12` (8.3% of the
//!   region) for σ = 0, and σ widens it. fio then scatters the value with its hash; here
//!   the value's distance from `n/2` is the rank, scattered as zipf's are, so the likeliest
//!   block is at `center·n` (default the middle). `DistGen::fio_gauss` is the value
//!   without the hash, as fio's file choice (`file_service_type=normal`) uses it.
//! - `zoned:A/S:…`: A percent of the draws go uniformly into the next S percent of the
//!   region; `zoned_abs:A/SIZE:…` the same with sizes in bytes.
//!
//! Like fio, every distribution but `random` turns the random map off: blocks may repeat.

use crate::engine::Rng;

/// Most terms of ζ(n, θ) summed (fio's `ZIPF_MAX_GEN`).
const ZIPF_MAX_GEN: u64 = 10_000_000;

/// fio's default zipf θ.
pub const DEFAULT_ZIPF: f64 = 1.1;
/// fio's default pareto h.
pub const DEFAULT_PARETO: f64 = 0.2;

/// One zone of a `zoned` or `zoned_abs` distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Zone {
    /// Percent of the draws that land in this zone.
    pub access: u32,
    /// Its size: percent of the region (`zoned`) or bytes (`zoned_abs`).
    pub size: u64,
}

/// A distribution of random offsets (`random_distribution`), for one direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Dist {
    /// Uniform (fio's default), with the random map unless `norandommap`.
    #[default]
    Random,
    /// Zipf with exponent `theta`; `center` in 0..=1 places the most likely block.
    Zipf {
        /// θ.
        theta: f64,
        /// Where the most likely block is, as a fraction of the region.
        center: Option<f64>,
    },
    /// Pareto with parameter `h`.
    Pareto {
        /// h, in (0, 1).
        h: f64,
        /// As for zipf.
        center: Option<f64>,
    },
    /// fio's normal (`gauss_next`, see the module docs): a 12-draw average plus a uniform
    /// deviation over `dev` percent of the region.
    Normal {
        /// σ: the width of the uniform deviation, percent of the region.
        dev: f64,
        /// Where the likeliest block is, as a fraction of the region (default 0.5).
        center: Option<f64>,
    },
    /// Zones of the region in percent.
    Zoned(Vec<Zone>),
    /// Zones of the region in bytes.
    ZonedAbs(Vec<Zone>),
}

impl Dist {
    /// Whether offsets are drawn uniformly (the random map may apply).
    pub fn is_uniform(&self) -> bool {
        matches!(self, Dist::Random)
    }
}

/// Parses one direction's `random_distribution` value (fio's spelling, without the
/// per-direction commas); `Err` says what was expected.
pub fn parse(s: &str, parse_size: impl Fn(&str) -> Option<u64>) -> Result<Dist, String> {
    let s = s.trim();
    let (name, rest) = s.split_once(':').map_or((s, None), |(a, b)| (a, Some(b)));
    let floats = |rest: Option<&str>, default: f64| -> Result<(f64, Option<f64>), String> {
        let Some(rest) = rest else { return Ok((default, None)) };
        let mut it = rest.split(':');
        let v = it.next().unwrap_or_default().trim();
        let v = if v.is_empty() { default } else { v.parse::<f64>().map_err(|_| format!("a number, not '{v}'"))? };
        let c = match it.next() {
            None => None,
            Some(c) => Some(
                c.trim().parse::<f64>().ok().filter(|c| (0.0..=1.0).contains(c)).ok_or("a center between 0 and 1")?,
            ),
        };
        if it.next().is_some() {
            return Err("at most a value and a center".into());
        }
        Ok((v, c))
    };
    match name {
        "random" if rest.is_none() => Ok(Dist::Random),
        "zipf" => {
            let (theta, center) = floats(rest, DEFAULT_ZIPF)?;
            if !(theta > 0.0 && theta.is_finite()) || theta == 1.0 {
                return Err("a zipf theta above 0 other than 1".into());
            }
            Ok(Dist::Zipf { theta, center })
        }
        "pareto" => {
            let (h, center) = floats(rest, DEFAULT_PARETO)?;
            if !(h > 0.0 && h < 1.0) {
                return Err("a pareto h between 0 and 1 (exclusive)".into());
            }
            Ok(Dist::Pareto { h, center })
        }
        "normal" | "gauss" => {
            let (dev, center) = floats(rest, 0.0)?;
            if !(0.0..100.0).contains(&dev) {
                return Err("a normal deviation from 0 to below 100 (percent of the region)".into());
            }
            Ok(Dist::Normal { dev, center })
        }
        "zoned" | "zoned_abs" => {
            let abs = name == "zoned_abs";
            let zones = parse_zones(rest.ok_or("zones such as zoned:60/10:30/20:10/70")?, abs, parse_size)?;
            Ok(if abs { Dist::ZonedAbs(zones) } else { Dist::Zoned(zones) })
        }
        _ => Err(
            "random, zipf[:θ[:center]], pareto[:h[:center]], normal[:σ[:center]], zoned:A/S:… or zoned_abs:A/SIZE:…"
                .into(),
        ),
    }
}

/// `A/S:A/S…` with fio's rules: access percentages must add up to 100; a zone without
/// a size (`zoned`) shares what the others leave.
fn parse_zones(s: &str, abs: bool, parse_size: impl Fn(&str) -> Option<u64>) -> Result<Vec<Zone>, String> {
    let mut zones = Vec::new();
    let mut missing = 0;
    for item in s.split(':').map(str::trim) {
        if item.is_empty() {
            break;
        }
        let (a, sz) = item.split_once('/').ok_or_else(|| format!("ACCESS/SIZE, not '{item}'"))?;
        let access = a
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&a| a <= 100)
            .ok_or_else(|| format!("a percentage of accesses, not '{a}'"))?;
        let size = if abs {
            parse_size(sz.trim()).filter(|&b| b > 0).ok_or_else(|| format!("a zone size in bytes, not '{sz}'"))?
        } else if sz.trim().is_empty() {
            missing += 1;
            u64::MAX
        } else {
            sz.trim()
                .parse::<u64>()
                .ok()
                .filter(|&p| p <= 100)
                .ok_or_else(|| format!("a percentage of the region, not '{sz}'"))?
        };
        zones.push(Zone { access, size });
        if zones.len() > 256 {
            return Err("at most 256 zones".into());
        }
    }
    if zones.is_empty() {
        return Err("at least one zone".into());
    }
    let access: u32 = zones.iter().map(|z| z.access).sum();
    if access != 100 {
        return Err(format!("access percentages adding up to 100 (they add up to {access})"));
    }
    if !abs {
        let sized: u64 = zones.iter().filter(|z| z.size != u64::MAX).map(|z| z.size).sum();
        if sized > 100 {
            return Err(format!("zone sizes adding up to at most 100% (they add up to {sized}%)"));
        }
        for z in zones.iter_mut().filter(|z| z.size == u64::MAX) {
            z.size = (100 - sized) / missing;
        }
    }
    Ok(zones)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

// The parameters are finite numbers (the parser takes no NaN), so equality is total.
impl Eq for Dist {}

/// fio's `GAUSS_ITERS`: uniform draws averaged by its normal generator.
const GAUSS_ITERS: u64 = 12;

/// Draws block numbers in `0..n` from a [`Dist`].
#[derive(Clone, Debug)]
pub(crate) struct DistGen {
    dist: Dist,
    n: u64,
    rng: Rng,
    zetan: f64,
    zeta2: f64,
    /// Multiplier and base of the scatter bijection.
    a: u64,
    base: u64,
    /// Zones resolved to block ranges: (cumulative access percent, first block, blocks).
    zones: Vec<(u32, u64, u64)>,
    /// The normal's spread of its uniform deviation and its offset (fio's `stddev` and
    /// `rand_off` of `struct gauss_state`).
    gauss_spread: u64,
    gauss_off: u64,
}

impl DistGen {
    /// A generator over `n` blocks of `block` bytes; `Err` when `zoned_abs` zones do not
    /// fit.
    pub(crate) fn new(dist: &Dist, n: u64, block: u64, seed: u64) -> Result<DistGen, String> {
        let n = n.max(1);
        let mut rng = Rng::new(seed ^ 0xD157);
        let mut a = ((n as f64 * 0.618_033_988_749_895) as u64) | 1;
        while gcd(a, n) != 1 {
            a += 2;
        }
        let center = match dist {
            Dist::Zipf { center, .. } | Dist::Pareto { center, .. } => *center,
            Dist::Normal { center, .. } => Some(center.unwrap_or(0.5)),
            _ => None,
        };
        let base = match center {
            Some(c) => ((n as f64 * c) as u64).min(n - 1),
            None => rng.below(n),
        };
        let (mut zetan, mut zeta2) = (0.0, 0.0);
        if let Dist::Zipf { theta, .. } = dist {
            zetan = (1..=n.min(ZIPF_MAX_GEN)).map(|i| (i as f64).powf(-theta)).sum();
            zeta2 = 1.0 + 0.5f64.powf(*theta);
        }
        let mut zones = Vec::new();
        let (mut cum, mut first) = (0, 0);
        match dist {
            Dist::Zoned(z) => {
                for zone in z {
                    let end = n * zone.size.min(100) / 100 + first;
                    cum += zone.access;
                    zones.push((cum, first.min(n - 1), (end.min(n) - first.min(n)).max(1)));
                    first = end;
                }
            }
            Dist::ZonedAbs(z) => {
                for zone in z {
                    let blocks = zone.size / block.max(1);
                    if first + blocks > n {
                        return Err(format!(
                            "zoned_abs zones of {} bytes in all do not fit the region of {} bytes",
                            z.iter().map(|z| z.size).sum::<u64>(),
                            n * block
                        ));
                    }
                    cum += zone.access;
                    zones.push((cum, first, blocks.max(1)));
                    first += blocks;
                }
            }
            _ => {}
        }
        let (mut gauss_spread, mut gauss_off) = (0, 0);
        if let Dist::Normal { dev, center } = dist {
            // gauss_init: `stddev = ceil(nranges·dev/100)`, at most half the ranges.
            if *dev != 0.0 {
                gauss_spread = ((n as f64 * dev / 100.0).ceil() as u64).min(n / 2);
            }
            // `rand_off = nranges·(center − 0.5)` stored in an unsigned 32-bit field: a
            // center below 0.5 makes it negative, which x86-64 wraps modulo 2^32 (fio's
            // conversion; `fio_files.rs` shows the effect on fio with 3 files).
            gauss_off = center.map_or(0, |c| (n as f64 * (c - 0.5)) as i64 as u32 as u64);
        }
        Ok(DistGen { dist: dist.clone(), n, rng, zetan, zeta2, a, base, zones, gauss_spread, gauss_off })
    }

    /// fio's normal value before its hash and offset (`gauss_next`): the average of 12
    /// uniform draws in `0..=n`, rounded up, plus the uniform deviation (module docs).
    /// In `0..=n`.
    fn gauss_value(&mut self) -> u64 {
        let n = self.n;
        let sum: u64 = (0..GAUSS_ITERS).map(|_| self.rng.below(n + 1)).sum();
        let mut v = sum.div_ceil(GAUSS_ITERS);
        if self.gauss_spread > 0 {
            let s = self.gauss_spread;
            let mut dev = self.rng.below(s) as i64 - (s / 2) as i64;
            // fio halves until the value fits; at 0 it would loop for ever (v = n), so
            // the halving stops there.
            while dev != 0 && !(0..n as i64).contains(&(v as i64 + dev)) {
                dev /= 2;
            }
            v = (v as i64 + dev) as u64;
        }
        v
    }

    /// fio's `gauss_next` with the hash disabled, as its normal file choice draws: the
    /// value moved by fio's offset (`center`), modulo `n`. Only for [`Dist::Normal`].
    pub(crate) fn fio_gauss(&mut self) -> u64 {
        (self.gauss_value() + self.gauss_off) % self.n
    }

    fn uniform01(&mut self) -> f64 {
        (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A rank in `0..n`, 0 the most likely (zipf, pareto), or the normal value's distance
    /// from the middle, modulo `n`.
    pub(crate) fn rank(&mut self) -> u64 {
        let n = self.n;
        match self.dist {
            Dist::Zipf { theta, .. } => {
                let u = self.uniform01();
                let z = u * self.zetan;
                if z < 1.0 {
                    0
                } else if z < 1.0 + 0.5f64.powf(theta) {
                    1.min(n - 1)
                } else {
                    let alpha = 1.0 / (1.0 - theta);
                    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - self.zeta2 / self.zetan);
                    let v = (n as f64 * (eta * u - eta + 1.0).powf(alpha)) as u64;
                    v.min(n - 1)
                }
            }
            Dist::Pareto { h, .. } => {
                let u = self.uniform01();
                // The hot end is rank 0: a fraction h of the draws fall in the first 1−h.
                let top = ((n - 1) as f64 * u.powf(h.ln() / (1.0 - h).ln())) as u64;
                (n - 1) - top.min(n - 1)
            }
            Dist::Normal { .. } => {
                // The value's distance from the middle, modulo n: the middle is rank 0
                // (the scatter puts it at the center).
                let v = self.gauss_value();
                (v + n - n / 2) % n
            }
            Dist::Random | Dist::Zoned(_) | Dist::ZonedAbs(_) => self.rng.below(n),
        }
    }

    /// The next block number, in `0..n`.
    pub(crate) fn next(&mut self) -> u64 {
        match self.dist {
            Dist::Random => self.rng.below(self.n),
            Dist::Zoned(_) | Dist::ZonedAbs(_) => {
                let v = self.rng.below(100) as u32 + 1;
                let &(_, first, blocks) =
                    self.zones.iter().find(|z| v <= z.0).unwrap_or_else(|| self.zones.last().expect("a zone"));
                first + self.rng.below(blocks)
            }
            _ => {
                let r = self.rank();
                ((r as u128 * self.a as u128 + self.base as u128) % self.n as u128) as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(s: &str) -> Option<u64> {
        let (n, m) = match s.to_ascii_lowercase() {
            t if t.ends_with('g') => (t[..t.len() - 1].parse::<u64>().ok()?, 1 << 30),
            t if t.ends_with('m') => (t[..t.len() - 1].parse::<u64>().ok()?, 1 << 20),
            t if t.ends_with('k') => (t[..t.len() - 1].parse::<u64>().ok()?, 1 << 10),
            t => (t.parse::<u64>().ok()?, 1),
        };
        Some(n * m)
    }

    fn counts(dist: &Dist, n: u64, draws: u32) -> Vec<u32> {
        let mut g = DistGen::new(dist, n, 4096, 42).unwrap();
        let mut c = vec![0u32; n as usize];
        for _ in 0..draws {
            c[g.next() as usize] += 1;
        }
        c
    }

    #[test]
    fn parses_fio_spellings_and_refuses_bad_values() {
        assert_eq!(parse("random", size), Ok(Dist::Random));
        assert_eq!(parse("zipf", size), Ok(Dist::Zipf { theta: 1.1, center: None }));
        assert_eq!(parse("zipf:1.2:0.25", size), Ok(Dist::Zipf { theta: 1.2, center: Some(0.25) }));
        assert_eq!(parse("pareto:0.9", size), Ok(Dist::Pareto { h: 0.9, center: None }));
        assert_eq!(parse("gauss:5", size), Ok(Dist::Normal { dev: 5.0, center: None }));
        assert_eq!(
            parse("zoned:60/10:30/20:10/70", size),
            Ok(Dist::Zoned(vec![
                Zone { access: 60, size: 10 },
                Zone { access: 30, size: 20 },
                Zone { access: 10, size: 70 }
            ]))
        );
        assert_eq!(
            parse("zoned_abs:60/20m:40/100m", size),
            Ok(Dist::ZonedAbs(vec![Zone { access: 60, size: 20 << 20 }, Zone { access: 40, size: 100 << 20 }]))
        );
        // A zone without a size shares what is left.
        assert_eq!(
            parse("zoned:50/10:50/", size),
            Ok(Dist::Zoned(vec![Zone { access: 50, size: 10 }, Zone { access: 50, size: 90 }]))
        );
        assert!(parse("zipf:1", size).unwrap_err().contains("other than 1"));
        assert!(parse("pareto:1.5", size).unwrap_err().contains("between 0 and 1"));
        assert!(parse("normal:100", size).unwrap_err().contains("below 100"));
        assert!(parse("zipf:1.2:2", size).unwrap_err().contains("center"));
        assert!(parse("zoned:60/10:30/20", size).unwrap_err().contains("add up to 90"));
        assert!(parse("zoned:60/50:40/60", size).unwrap_err().contains("110%"));
        assert!(parse("cauchy", size).unwrap_err().contains("zipf"));
    }

    #[test]
    fn zipf_gives_the_most_popular_block_one_over_zeta() {
        // P(rank 1) = 1 / ζ(n, θ) and P(rank 2) = 2^-θ / ζ(n, θ), by Zipf's definition.
        for theta in [1.2, 0.8] {
            let n = 1000u64;
            let zeta: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
            let draws = 400_000;
            let mut c = counts(&Dist::Zipf { theta, center: None }, n, draws);
            c.sort_unstable_by(|a, b| b.cmp(a));
            let (p1, p2) = (c[0] as f64 / draws as f64, c[1] as f64 / draws as f64);
            let (want1, want2) = (1.0 / zeta, 0.5f64.powf(theta) / zeta);
            assert!((p1 - want1).abs() < 0.02 * want1 + 0.002, "θ={theta}: top block {p1}, want {want1}");
            assert!((p2 - want2).abs() < 0.03 * want2 + 0.002, "θ={theta}: second block {p2}, want {want2}");
            // And it is skewed: the top 10% of blocks take far more than 10% of draws.
            let top: u32 = c[..100].iter().sum();
            assert!(top as f64 / draws as f64 > 0.5, "θ={theta}: top 10% took {top}");
        }
    }

    #[test]
    fn zipf_center_puts_the_most_popular_block_there() {
        let c = counts(&Dist::Zipf { theta: 1.2, center: Some(0.25) }, 1000, 100_000);
        let top = c.iter().enumerate().max_by_key(|(_, &n)| n).unwrap().0;
        assert_eq!(top, 250);
    }

    #[test]
    fn pareto_sends_h_of_the_draws_to_one_minus_h_of_the_blocks() {
        for h in [0.8, 0.3, 0.9] {
            let n = 10_000u64;
            let draws = 200_000;
            let mut c = counts(&Dist::Pareto { h, center: None }, n, draws);
            c.sort_unstable_by(|a, b| b.cmp(a));
            // A fraction h of the draws go to the 1−h of the ranks at one end, so the
            // hottest min(h, 1−h) of the blocks take max(h, 1−h) of the draws.
            let (hot, want) = (h.min(1.0 - h), h.max(1.0 - h));
            let hot = (hot * n as f64) as usize;
            let share = c[..hot].iter().map(|&x| x as f64).sum::<f64>() / draws as f64;
            assert!((share - want).abs() < 0.02, "h={h}: the hottest {hot} blocks took {share}, want {want}");
        }
    }

    /// Mean and standard deviation of `draws` values of `f`.
    fn moments(draws: u32, mut f: impl FnMut() -> u64) -> (f64, f64) {
        let xs: Vec<f64> = (0..draws).map(|_| f() as f64).collect();
        let mean = xs.iter().sum::<f64>() / draws as f64;
        (mean, (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws as f64).sqrt())
    }

    #[test]
    fn normal_values_follow_fios_twelve_draw_average_and_uniform_deviation() {
        // fio's gauss_next: the mean of 12 uniform draws in 0..=n (variance
        // ((n+1)²−1)/12 each, /12 for the mean) plus a uniform deviation over s values
        // (variance (s²−1)/12), s = ceil(n·σ/100) at most n/2.
        let n = 12_000u64;
        let draws = 200_000;
        for (dev, s) in [(0.0, 0u64), (10.0, 1200), (30.0, 3600), (70.0, 6000)] {
            let mut g = DistGen::new(&Dist::Normal { dev, center: None }, n, 4096, 5).unwrap();
            assert_eq!(g.gauss_spread, s, "σ={dev}");
            let (mean, sd) = moments(draws, || g.fio_gauss());
            let nf = (n + 1) as f64;
            let want_sd = ((nf * nf - 1.0) / 144.0 + (s * s).saturating_sub(1) as f64 / 12.0).sqrt();
            // The mean is n/2 (+ about ½ from rounding up, − ½ from the deviation's floor);
            // its standard error is below 3 here. The halving at the edges narrows wide
            // deviations a little: 2% for σ = 70.
            assert!((mean - n as f64 / 2.0).abs() < 15.0, "σ={dev}: mean {mean}");
            let tol = if dev > 50.0 { 0.03 } else { 0.01 };
            assert!((sd - want_sd).abs() < tol * want_sd, "σ={dev}: sd {sd}, want {want_sd}");
            if dev == 0.0 {
                // 8.3% of the region even with no deviation asked: fio's rule, not σ.
                assert!((sd / n as f64 - 1.0 / 12.0).abs() < 0.001, "{sd}");
            }
        }
        // A center moves the values by n·(center − 0.5), modulo n.
        let mut g = DistGen::new(&Dist::Normal { dev: 0.0, center: Some(0.75) }, n, 4096, 5).unwrap();
        let (mean, _) = moments(draws, || g.fio_gauss());
        assert!((mean - 9000.0).abs() < 15.0, "center 0.75: mean {mean}");
    }

    #[test]
    fn normal_offsets_scatter_fios_values_with_the_likeliest_block_at_the_center() {
        // Two generators with one seed draw the same values: the offsets are a bijection
        // of them, so the sorted counts agree, and the middle value lands at center·n.
        let n = 1000u64;
        let d = Dist::Normal { dev: 5.0, center: Some(0.3) };
        let (mut v, mut b) = (DistGen::new(&d, n, 4096, 9).unwrap(), DistGen::new(&d, n, 4096, 9).unwrap());
        let (mut by_value, mut by_block) = (vec![0u32; n as usize + 1], vec![0u32; n as usize]);
        for _ in 0..100_000 {
            by_value[v.gauss_value() as usize] += 1;
            by_block[b.next() as usize] += 1;
        }
        assert_eq!(by_block[300], by_value[500], "the middle value is block 300");
        // Value n (all draws at the top) is value 0's block (modulo n).
        by_value[0] += by_value[n as usize];
        by_value.truncate(n as usize);
        let (mut sv, mut sb) = (by_value.clone(), by_block.clone());
        sv.sort_unstable();
        sb.sort_unstable();
        assert_eq!(sv, sb);
        // Scattered, as fio's hash scatters: the value after the middle is a·1 blocks
        // away, not the next block.
        assert!(b.a > 1);
        assert_eq!(by_block[((300 + b.a) % n) as usize], by_value[501]);
    }

    #[test]
    fn zoned_puts_each_share_of_the_draws_into_its_zone() {
        let n = 1000;
        let draws = 200_000;
        let c = counts(&parse("zoned:60/10:30/20:10/70", size).unwrap(), n, draws);
        let share = |r: std::ops::Range<usize>| c[r].iter().sum::<u32>() as f64 / draws as f64;
        assert!((share(0..100) - 0.6).abs() < 0.01);
        assert!((share(100..300) - 0.3).abs() < 0.01);
        assert!((share(300..1000) - 0.1).abs() < 0.01);
        // zoned_abs: sizes in bytes, blocks of 4 KiB; the rest of the region is never hit.
        let c = counts(&parse("zoned_abs:75/400k:25/800k", size).unwrap(), n, draws);
        let share = |r: std::ops::Range<usize>| c[r].iter().sum::<u32>() as f64 / draws as f64;
        assert!((share(0..100) - 0.75).abs() < 0.01);
        assert!((share(100..300) - 0.25).abs() < 0.01);
        assert_eq!(share(300..1000), 0.0);
        // Zones that do not fit are an error naming the sizes.
        let e = DistGen::new(&parse("zoned_abs:100/8m", size).unwrap(), n, 4096, 1).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
    }

    #[test]
    fn every_draw_is_inside_the_region() {
        for d in ["zipf:1.2", "zipf:0.5", "pareto:0.5", "normal:40", "zoned:50/50:50/50"] {
            for n in [1u64, 2, 3, 17, 1000] {
                let mut g = DistGen::new(&parse(d, size).unwrap(), n, 4096, 3).unwrap();
                for _ in 0..2000 {
                    assert!(g.next() < n, "{d} over {n}");
                }
            }
        }
    }
}
