//! Several files per job, with fio 3.33's rules: `nrfiles` files named
//! `jobname.jobnum.filenum` (in the clone's `directory`), or the names of a
//! `filename=a:b:c` list; each file's region (fio's `io_size` per file, filesetup.c
//! `setup_files`); and `file_service_type`, which file the next I/O goes to (io_u.c
//! `__get_next_file`).
//!
//! The `zipf`, `pareto` and `normal`/`gauss` file choices draw as fio's
//! `__get_next_fileno_rand` does: a value over `nrfiles × 1024` ranges from the
//! distribution ([`crate::dist`]'s generators) without fio's scattering hash, moved by an
//! offset (fio's `rand_off`), modulo the ranges; the file is the value divided by 1024.
//! Zipf's rank 0 and pareto's value 0 are the likeliest (pareto's value is
//! `(ranges − 1)·u^(ln h / ln(1−h))`), and their offset is random, or `center × ranges`
//! when a center is given. The normal is fio's `gauss_next` (`DistGen::fio_gauss`: the
//! average of 12 uniform draws plus a uniform deviation of σ percent of the ranges), whose
//! values lie around the middle, moved by `ranges × (center − 0.5)` when a center is given
//! (wrapped as fio's unsigned 32-bit offset wraps for a center below 0.5). Files are never done under these
//! choices: fio starts a file over when its offsets run out (io_u.c `get_next_rand_block`,
//! `fio_file_reset`), so the job's `size` or run time ends it.

use crate::dist::{Dist, DistGen};
use crate::engine::Rng;

/// fio's ranges per file of a distributed file choice (`FIO_FSERVICE_SHIFT` = 10).
const RANGES_PER_FILE: u64 = 1 << 10;

/// fio's `file_service_type`: how a job moves between its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Service {
    /// `roundrobin[:N]` (fio's default, N = 1): N I/Os to a file, then the next file.
    RoundRobin(u32),
    /// `sequential`: each file until it is done, then the next.
    Sequential,
    /// `random[:N]`: N I/Os to a file drawn at random among those not done.
    Random(u32),
    /// `zipf[:θ[:center]]`, `pareto[:h[:center]]`, `normal[:σ[:center]]` (or `gauss`):
    /// each I/O's file drawn from the distribution (see the module docs); only
    /// [`Dist::Zipf`], [`Dist::Pareto`] and [`Dist::Normal`] ([`Service::parse`] makes no
    /// other).
    Dist(Dist),
}

impl Default for Service {
    fn default() -> Self {
        Service::RoundRobin(1)
    }
}

/// What `file_service_type` accepts, for error messages.
pub const EXPECT_SERVICE: &str = "roundrobin, sequential or random, roundrobin and random with :N (the I/Os per file before the next), or zipf[:θ[:center]], pareto[:h[:center]], normal[:σ[:center]] (gauss: the same)";

impl Service {
    /// Parses fio's `file_service_type` value.
    pub fn parse(v: &str) -> Result<Service, String> {
        let (kind, arg) = v.split_once(':').map_or((v, None), |(k, a)| (k, Some(a.trim())));
        if matches!(kind, "zipf" | "pareto" | "normal" | "gauss") {
            return match crate::dist::parse(v, |_| None)? {
                d @ (Dist::Zipf { .. } | Dist::Pareto { .. } | Dist::Normal { .. }) => Ok(Service::Dist(d)),
                other => Err(format!("'{kind}' parsed as {other:?}")),
            };
        }
        let n = match arg {
            None => 1,
            Some(a) => {
                a.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| format!("':{a}' is not a count above 0"))?
            }
        };
        match kind {
            "roundrobin" => Ok(Service::RoundRobin(n)),
            "random" => Ok(Service::Random(n)),
            "sequential" if arg.is_none() => Ok(Service::Sequential),
            "sequential" => Err("sequential takes no :N (it stays on a file until the file is done)".into()),
            _ => Err(format!("'{kind}' is not a file service type")),
        }
    }
}

/// Several files of one job: how I/O moves between them and how much there is in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiFile {
    /// `file_service_type`.
    pub service: Service,
    /// `openfiles`: at most this many files open at once (0: all).
    pub openfiles: u32,
    /// Each file's region in bytes from the job's offset (fio's per-file `io_size`);
    /// `None`: the file or device from the offset on.
    pub regions: Vec<Option<u64>>,
    /// Bytes of I/O per loop over all files (fio's `size`, at most the regions' sum);
    /// `None`: the regions' sum.
    pub total: Option<u64>,
}

/// The files' names of clone `jobnum` of a job without `filename`: fio's
/// `jobname.jobnum.filenum` (init.c `make_filename`).
pub fn default_names(job: &str, jobnum: u32, nrfiles: u32) -> Vec<String> {
    (0..nrfiles.max(1)).map(|i| format!("{job}.{jobnum}.{i}")).collect()
}

/// The name of file `filenum` of clone `jobnum` of job `job` by fio's `filename_format`
/// (init.c `make_filename`): each of `$jobname`, `$jobnum`, `$filenum` and `$clientuid`
/// (matched without regard to case, in that order) is replaced wherever it occurs;
/// `$clientuid` is empty, as in fio run without its client/server mode. No format: fio's
/// default `$jobname.$jobnum.$filenum`.
pub fn format_name(format: Option<&str>, job: &str, jobnum: u32, filenum: u32) -> String {
    let Some(format) = format.filter(|f| !f.is_empty()) else {
        return format!("{job}.{jobnum}.{filenum}");
    };
    let (jobnum, filenum) = (jobnum.to_string(), filenum.to_string());
    let mut name = format.to_string();
    for (key, with) in [("$jobname", job), ("$jobnum", &jobnum), ("$filenum", &filenum), ("$clientuid", "")] {
        name = replace_ignoring_case(&name, key, with);
    }
    name
}

/// `s` with every occurrence of the ASCII `key` (of any case) replaced by `with`.
fn replace_ignoring_case(s: &str, key: &str, with: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find(key) {
        out += &s[at..at + i];
        out += with;
        at += i + key.len();
    }
    out + &s[at..]
}

/// [`default_names`] by a `filename_format` (see [`format_name`]).
pub fn formatted_names(format: Option<&str>, job: &str, jobnum: u32, nrfiles: u32) -> Vec<String> {
    (0..nrfiles.max(1)).map(|i| format_name(format, job, jobnum, i)).collect()
}

/// The directory of clone `jobnum` in a `directory=a:b` list: fio takes the
/// `jobnum % count`-th (options.c `set_name_idx`).
pub fn directory_of(dirs: &[String], jobnum: u32) -> Option<&str> {
    (!dirs.is_empty()).then(|| dirs[jobnum as usize % dirs.len()].as_str())
}

/// Each file's region when `size` is given and `filesize` is not: `size / nrfiles`, the
/// first files one block larger each while the remainder lasts (filesetup.c).
pub fn split_size(size: u64, nrfiles: u32, bs: u64) -> Vec<u64> {
    let n = u64::from(nrfiles.max(1));
    let fs = size / n;
    let mut extra = (size - fs * n) / bs.max(1);
    (0..n)
        .map(|_| {
            if extra > 0 {
                extra -= 1;
                fs + bs
            } else {
                fs
            }
        })
        .collect()
}

/// Chooses the file of each I/O as fio's `__get_next_file` does, and knows which files
/// are done.
#[derive(Clone, Debug)]
pub struct Picker {
    service: Service,
    done: Vec<bool>,
    /// Files open now, and how many may be (fio's `openfiles`): a file opens when it is
    /// first chosen while fewer are open, and closes when it is done.
    open: Vec<bool>,
    open_limit: usize,
    /// The file being served, and how many more I/Os it gets before the next choice.
    current: Option<usize>,
    left: u32,
    /// Round robin's next file.
    next: usize,
    rng: Rng,
    /// A distributed choice's generator, its ranges and offset (see the module docs).
    dist: Option<(DistGen, u64, u64)>,
}

impl Picker {
    /// A picker over `n` files, at most `openfiles` of them open at once (0: all).
    pub fn new(service: Service, n: usize, openfiles: usize, seed: u64) -> Picker {
        Picker {
            service,
            done: vec![false; n],
            open: vec![false; n],
            open_limit: if openfiles == 0 { n } else { openfiles.min(n) },
            current: None,
            left: 0,
            next: 0,
            rng: Rng::new(seed ^ 0xF11E),
            dist: None,
        }
        .with_dist(seed)
    }

    /// Sets up a distributed choice's generator over the files' ranges.
    fn with_dist(mut self, seed: u64) -> Picker {
        let Service::Dist(dist) = &self.service else { return self };
        let ranges = self.done.len().max(1) as u64 * RANGES_PER_FILE;
        let center = match dist {
            Dist::Zipf { center, .. } | Dist::Pareto { center, .. } | Dist::Normal { center, .. } => *center,
            _ => None,
        };
        let gen = DistGen::new(dist, ranges, 1, seed ^ 0xF11E_D157).expect("no zones to place");
        let off = match center {
            Some(c) => ((ranges as f64 * c) as u64) % ranges,
            None => self.rng.below(ranges),
        };
        self.dist = Some((gen, ranges, off));
        self
    }

    /// A distributed choice's next file (see the module docs).
    fn draw(&mut self) -> usize {
        let Some((gen, ranges, off)) = self.dist.as_mut() else { return 0 };
        let (n, off) = (*ranges, *off);
        let v = match self.service {
            // fio's gauss_next without the hash: its own offset (the center) included.
            Service::Dist(Dist::Normal { .. }) => gen.fio_gauss(),
            Service::Dist(Dist::Pareto { .. }) => ((n - 1) - gen.rank() + off) % n,
            _ => (gen.rank() + off) % n,
        };
        (v / RANGES_PER_FILE) as usize
    }

    /// Whether file `f` is open or may open now (fio: a file that may not is passed over,
    /// `-EBUSY`, and the choice goes on from the next one).
    fn opens(&mut self, f: usize) -> bool {
        if !self.open[f] && self.open.iter().filter(|&&o| o).count() < self.open_limit {
            self.open[f] = true;
        }
        self.open[f]
    }

    /// The file of the next I/O; `None` when every file is done.
    pub fn pick(&mut self) -> Option<usize> {
        if self.done.iter().all(|&d| d) {
            return None;
        }
        if let Some(c) = self.current.filter(|&c| !self.done[c]) {
            match self.service {
                Service::Sequential => return Some(c),
                _ if self.left > 0 => {
                    self.left -= 1;
                    return Some(c);
                }
                _ => {}
            }
        }
        let n = self.done.len();
        let f = match self.service {
            Service::RoundRobin(_) | Service::Sequential => loop {
                let f = self.next;
                self.next = (self.next + 1) % n;
                if !self.done[f] && self.opens(f) {
                    break f;
                }
            },
            Service::Random(_) => loop {
                let f = self.rng.below(n as u64) as usize;
                if !self.done[f] && self.opens(f) {
                    break f;
                }
            },
            Service::Dist(_) => loop {
                let f = self.draw();
                if !self.done[f] && self.opens(f) {
                    break f;
                }
            },
        };
        self.current = Some(f);
        self.left = match self.service {
            Service::RoundRobin(k) | Service::Random(k) => k - 1,
            Service::Sequential | Service::Dist(_) => 0,
        };
        Some(f)
    }

    /// File `f` has no I/O left in this pass (fio closes it and marks it done; under a
    /// distributed choice fio starts the file over instead, and it stays a choice).
    pub fn set_done(&mut self, f: usize) {
        if matches!(self.service, Service::Dist(_)) {
            return;
        }
        self.done[f] = true;
        self.open[f] = false;
    }

    /// Whether every file is done.
    pub fn all_done(&self) -> bool {
        self.done.iter().all(|&d| d)
    }

    /// A new pass over the files (the next loop, or a time-based job going on): none is
    /// done, and the choice starts over from the first file.
    pub fn restart(&mut self) {
        self.done.iter_mut().for_each(|d| *d = false);
        self.open.iter_mut().for_each(|o| *o = false);
        self.current = None;
        self.left = 0;
        self.next = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(p: &mut Picker, n: usize) -> Vec<usize> {
        (0..n).map(|_| p.pick().unwrap()).collect()
    }

    #[test]
    fn service_types_parse_as_fio_and_name_what_is_wrong() {
        assert_eq!(Service::parse("roundrobin"), Ok(Service::RoundRobin(1)));
        assert_eq!(Service::parse("roundrobin:3"), Ok(Service::RoundRobin(3)));
        assert_eq!(Service::parse("random:8"), Ok(Service::Random(8)));
        assert_eq!(Service::parse("sequential"), Ok(Service::Sequential));
        assert!(Service::parse("random:0").unwrap_err().contains("':0'"));
        assert!(Service::parse("sequential:2").unwrap_err().contains("no :N"));
        assert_eq!(Service::parse("zipf:1.2"), Ok(Service::Dist(Dist::Zipf { theta: 1.2, center: None })));
        assert_eq!(Service::parse("zipf"), Ok(Service::Dist(Dist::Zipf { theta: 1.1, center: None })));
        assert_eq!(Service::parse("pareto:0.3:0.5"), Ok(Service::Dist(Dist::Pareto { h: 0.3, center: Some(0.5) })));
        assert_eq!(Service::parse("gauss:5"), Ok(Service::Dist(Dist::Normal { dev: 5.0, center: None })));
        assert_eq!(Service::parse("normal"), Ok(Service::Dist(Dist::Normal { dev: 0.0, center: None })));
        assert!(Service::parse("zipf:1").unwrap_err().contains("other than 1"));
        assert!(Service::parse("pareto:1.5").unwrap_err().contains("between 0 and 1"));
        assert!(Service::parse("normal:5:2").unwrap_err().contains("center"));
        assert!(Service::parse("rr").unwrap_err().contains("'rr'"));
    }

    #[test]
    fn filename_format_replaces_fios_keywords() {
        assert_eq!(format_name(Some("fio-test-ime.$jobnum.$filenum"), "w", 3, 1), "fio-test-ime.3.1");
        assert_eq!(format_name(Some("$JobName-$jobname/$FILENUM"), "a.b", 0, 7), "a.b-a.b/7");
        assert_eq!(format_name(Some("x$clientuid.y"), "j", 0, 0), "x.y");
        assert_eq!(format_name(Some("plain"), "j", 4, 2), "plain", "no keyword: one name for every file");
        assert_eq!(format_name(Some(""), "j", 1, 2), "j.1.2", "empty: fio's default");
        assert_eq!(format_name(Some("$jobnumber"), "j", 5, 0), "5ber");
        assert_eq!(formatted_names(Some("f.$filenum"), "j", 9, 3), ["f.0", "f.1", "f.2"]);
    }

    #[test]
    fn fios_names_and_directories() {
        assert_eq!(default_names("j", 2, 3), ["j.2.0", "j.2.1", "j.2.2"]);
        assert_eq!(formatted_names(None, "j", 2, 2), default_names("j", 2, 2));
        let dirs = vec!["/a".to_string(), "/b".to_string()];
        assert_eq!(
            (directory_of(&dirs, 0), directory_of(&dirs, 3), directory_of(&[], 1)),
            (Some("/a"), Some("/b"), None)
        );
    }

    #[test]
    fn size_split_gives_the_first_files_a_block_more() {
        assert_eq!(split_size(1 << 20, 4, 4096), vec![1 << 18; 4]);
        // 10 blocks over 4 files: 2 each, and the 2 left over go to the first two.
        assert_eq!(split_size(10, 4, 1), vec![3, 3, 2, 2]);
        // A remainder below one block is dropped, as fio drops it.
        assert_eq!(split_size((1 << 20) + 100, 4, 4096), vec![(1 << 18) + 25; 4]);
    }

    #[test]
    fn round_robin_moves_after_n_ios_and_skips_done_files() {
        let mut p = Picker::new(Service::RoundRobin(1), 3, 0, 1);
        assert_eq!(take(&mut p, 7), [0, 1, 2, 0, 1, 2, 0]);
        let mut p = Picker::new(Service::RoundRobin(2), 3, 0, 1);
        assert_eq!(take(&mut p, 7), [0, 0, 1, 1, 2, 2, 0]);
        p.set_done(1);
        assert_eq!(take(&mut p, 5), [0, 2, 2, 0, 0]);
        p.set_done(0);
        p.set_done(2);
        assert_eq!((p.pick(), p.all_done()), (None, true));
        p.restart();
        assert_eq!(take(&mut p, 2), [0, 0]);
    }

    #[test]
    fn openfiles_keeps_the_choice_among_the_open_files_until_one_is_done() {
        let mut p = Picker::new(Service::RoundRobin(1), 4, 2, 1);
        assert_eq!(take(&mut p, 5), [0, 1, 0, 1, 0], "files 2 and 3 wait");
        p.set_done(0);
        // 0 closes: the turn goes on from 1, and 2 opens in 0's place; 3 still waits.
        assert_eq!(take(&mut p, 4), [1, 2, 1, 2]);
        p.set_done(1);
        assert_eq!(take(&mut p, 3), [3, 2, 3]);
    }

    #[test]
    fn sequential_stays_on_a_file_until_it_is_done() {
        let mut p = Picker::new(Service::Sequential, 3, 0, 1);
        assert_eq!(take(&mut p, 4), [0; 4]);
        p.set_done(0);
        assert_eq!(take(&mut p, 3), [1; 3]);
        p.set_done(1);
        assert_eq!(take(&mut p, 2), [2; 2]);
    }

    #[test]
    fn random_spreads_evenly_and_keeps_a_file_for_n_ios() {
        let mut p = Picker::new(Service::Random(1), 4, 0, 7);
        let mut count = [0u32; 4];
        for f in take(&mut p, 40_000) {
            count[f] += 1;
        }
        // Each file's share of a uniform draw: 10 000 ± 5 standard deviations (≈ 87).
        assert!(count.iter().all(|&c| (9_550..=10_450).contains(&c)), "{count:?}");
        let mut p = Picker::new(Service::Random(4), 4, 0, 7);
        let v = take(&mut p, 40);
        assert!(v.chunks(4).all(|c| c.iter().all(|&f| f == c[0])), "{v:?}");
        p.set_done(0);
        p.set_done(1);
        p.set_done(2);
        assert!(take(&mut p, 12).iter().all(|&f| f == 3));
    }

    /// Each file's share of `draws` picks.
    fn shares(service: Service, files: usize, draws: usize) -> Vec<f64> {
        let mut p = Picker::new(service, files, 0, 11);
        let mut count = vec![0usize; files];
        for f in take(&mut p, draws) {
            count[f] += 1;
        }
        count.iter().map(|&c| c as f64 / draws as f64).collect()
    }

    /// The standard normal's distribution function (Abramowitz and Stegun 7.1.26,
    /// |error| < 1.5e-7).
    fn phi(x: f64) -> f64 {
        let z = x.abs() / std::f64::consts::SQRT_2;
        let t = 1.0 / (1.0 + 0.327_591_1 * z);
        let poly =
            t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        let erf = 1.0 - poly * (-z * z).exp();
        0.5 * (1.0 + if x < 0.0 { -erf } else { erf })
    }

    /// Observed shares against the definition's: within 5 standard deviations of a
    /// binomial share, plus `slack` for a generator that is approximate by design.
    fn close(got: &[f64], want: &[f64], draws: usize, slack: f64, what: &str) {
        for (g, w) in got.iter().zip(want) {
            let sd = (w * (1.0 - w) / draws as f64).sqrt();
            assert!((g - w).abs() <= 5.0 * sd + slack, "{what}: shares {got:?}, want {want:?}");
        }
    }

    #[test]
    fn distributed_file_choices_follow_their_definitions_over_fios_ranges() {
        let draws = 200_000;
        let n = 4 * RANGES_PER_FILE;
        // zipf:1.2 with center 0: file k holds ranks 1024k.. 1024k+1023 (from 0); rank r
        // has probability (r+1)^-θ / ζ(n, θ). Gray's generator is exact for the first two
        // ranks and close for the rest: 1% of slack.
        let theta = 1.2f64;
        let zeta: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
        let want: Vec<f64> = (0..4)
            .map(|k| {
                (k * RANGES_PER_FILE + 1..=(k + 1) * RANGES_PER_FILE).map(|i| (i as f64).powf(-theta)).sum::<f64>()
                    / zeta
            })
            .collect();
        let got = shares(Service::Dist(Dist::Zipf { theta, center: Some(0.0) }), 4, draws);
        close(&got, &want, draws, 0.01, "zipf:1.2:0");
        assert!(want[0] > 0.8, "{want:?}");
        // The center moves the likeliest file: 0.5 of 4 files is file 2.
        let got = shares(Service::Dist(Dist::Zipf { theta, center: Some(0.5) }), 4, draws);
        close(&got, &[want[2], want[3], want[0], want[1]], draws, 0.01, "zipf:1.2:0.5");
        // pareto:0.3 with center 0: the value (n−1)·u^p, p = ln h / ln(1−h), is below x
        // with probability (x/(n−1))^(1/p).
        let h = 0.3f64;
        let p = h.ln() / (1.0 - h).ln();
        let cdf = |x: u64| ((x as f64) / (n - 1) as f64).min(1.0).powf(1.0 / p);
        let want: Vec<f64> = (0..4).map(|k| cdf((k + 1) * RANGES_PER_FILE) - cdf(k * RANGES_PER_FILE)).collect();
        let got = shares(Service::Dist(Dist::Pareto { h, center: Some(0.0) }), 4, draws);
        close(&got, &want, draws, 0.0, "pareto:0.3:0");
        // normal (fio's gauss_next): values modulo the ranges around the middle (+½ from rounding up the
        // average), standard deviation √(((n+1)²−1)/144 + (s²−1)/12), s = ⌈n·σ/100⌉; the
        // 12-draw average is close to normal (0.2% of slack for its shape). σ = 0 still
        // spreads over files 1 and 2 (fio's rule; σ percent of the ranges would not).
        let normal = |files: u64, dev: f64, mean: f64| -> Vec<f64> {
            let n = files * RANGES_PER_FILE;
            let s = ((n as f64 * dev / 100.0).ceil()).min((n / 2) as f64);
            let nf = (n + 1) as f64;
            let sd = ((nf * nf - 1.0) / 144.0 + (s * s - 1.0).max(0.0) / 12.0).sqrt();
            // The offset value is taken modulo n: a file also gets the tails that wrap.
            let below = |x: f64| (-1..=1).map(|w| phi((x + (w * n as i64) as f64 - mean) / sd)).sum::<f64>();
            (0..files)
                .map(|k| below(((k + 1) * RANGES_PER_FILE) as f64 - 0.5) - below((k * RANGES_PER_FILE) as f64 - 0.5))
                .collect()
        };
        for dev in [0.0, 10.0] {
            let want = normal(4, dev, 2048.5);
            let got = shares(Service::Dist(Dist::Normal { dev, center: None }), 4, draws);
            close(&got, &want, draws, 0.002, &format!("normal:{dev}"));
        }
        assert!(normal(4, 0.0, 2048.5)[1] > 0.45);
        // A center moves the middle by ranges·(center − 0.5): 0.75 of 3 files is +768, in
        // file 2. Below 0.5 the offset is negative, and fio's unsigned 32-bit field wraps
        // it: 2^32 − 768 ≡ +256 modulo 3072, so 0.25 of 3 files puts the middle (1536) at
        // 1792, in file 1 (fio does so; fio_files.rs checks it against fio).
        let got = shares(Service::Dist(Dist::Normal { dev: 20.0, center: Some(0.75) }), 3, draws);
        close(&got, &normal(3, 20.0, 1536.5 + 768.0), draws, 0.002, "normal:20:0.75");
        let got = shares(Service::Dist(Dist::Normal { dev: 20.0, center: Some(0.25) }), 3, draws);
        close(&got, &normal(3, 20.0, 1536.5 + 256.0), draws, 0.002, "normal:20:0.25");
    }

    #[test]
    fn distributed_file_choices_never_finish_a_file_and_move_after_each_io() {
        let mut p = Picker::new(Service::Dist(Dist::Pareto { h: 0.2, center: None }), 3, 0, 5);
        for f in 0..3 {
            p.set_done(f);
        }
        assert!(!p.all_done(), "fio starts the file over: it is still a choice");
        let v = take(&mut p, 3000);
        let mut count = [0; 3];
        v.iter().for_each(|&f| count[f] += 1);
        assert!(count.iter().all(|&c| c > 0) && v.windows(2).any(|w| w[0] != w[1]), "{count:?}");
    }
}
