//! Several files per job, with fio 3.33's rules: `nrfiles` files named
//! `jobname.jobnum.filenum` (in the clone's `directory`), or the names of a
//! `filename=a:b:c` list; each file's region (fio's `io_size` per file, filesetup.c
//! `setup_files`); and `file_service_type`, which file the next I/O goes to (io_u.c
//! `__get_next_file`).

use crate::engine::Rng;

/// fio's `file_service_type`: how a job moves between its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// `roundrobin[:N]` (fio's default, N = 1): N I/Os to a file, then the next file.
    RoundRobin(u32),
    /// `sequential`: each file until it is done, then the next.
    Sequential,
    /// `random[:N]`: N I/Os to a file drawn at random among those not done.
    Random(u32),
}

impl Default for Service {
    fn default() -> Self {
        Service::RoundRobin(1)
    }
}

/// What `file_service_type` accepts, for error messages.
pub const EXPECT_SERVICE: &str =
    "roundrobin, sequential or random, roundrobin and random with :N (the I/Os per file before the next)";

impl Service {
    /// Parses fio's `file_service_type` value. fio's `zipf`, `pareto`, `normal` and
    /// `gauss` file choices are refused (not run here).
    pub fn parse(v: &str) -> Result<Service, String> {
        let (kind, arg) = v.split_once(':').map_or((v, None), |(k, a)| (k, Some(a.trim())));
        if matches!(kind, "zipf" | "pareto" | "normal" | "gauss") {
            return Err(format!("the {kind} file choice is not run here"));
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
        }
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
        };
        self.current = Some(f);
        self.left = match self.service {
            Service::RoundRobin(k) | Service::Random(k) => k - 1,
            Service::Sequential => 0,
        };
        Some(f)
    }

    /// File `f` has no I/O left in this pass (fio closes it and marks it done).
    pub fn set_done(&mut self, f: usize) {
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
        assert!(Service::parse("zipf:1.2").unwrap_err().contains("zipf file choice is not run"));
        assert!(Service::parse("rr").unwrap_err().contains("'rr'"));
    }

    #[test]
    fn fios_names_and_directories() {
        assert_eq!(default_names("j", 2, 3), ["j.2.0", "j.2.1", "j.2.2"]);
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
}
