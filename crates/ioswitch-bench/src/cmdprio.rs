//! Per-command I/O priorities, as fio 3.33's libaio and io_uring engines give them
//! (`engines/cmdprio.c`): `cmdprio_percentage`, `cmdprio_class`, `cmdprio` and
//! `cmdprio_bssplit`, the choice made for each I/O, and the priorities whose latencies
//! fio reports apart (its `"prios"`, [`crate::report`]).
//!
//! The rule for one read or write (fio's `fio_cmdprio_set_ioprio`):
//!
//! - with `cmdprio_percentage=P` (per direction, `READ[,WRITE]`), a uniform draw
//!   `r` in 0..=99 gives the I/O the priority `cmdprio_class`/`cmdprio` when `r < P`;
//! - with `cmdprio_bssplit`, the entries of the I/O's direction and block size (in the
//!   order given), each `bs/perc[/class/level]`, cover `r` in turn: the first entry whose
//!   running sum of percentages passes `r` gives its priority (an entry without
//!   class/level: `cmdprio_class`/`cmdprio`); `r` past them all, or a block size with no
//!   entry: none;
//! - `cmdprio_class` not given means the real-time class (1), class 0 best-effort;
//! - an I/O given no priority runs at the job's (`prioclass`/`prio`, or none).
//!
//! The latency statistics are kept per priority of each direction that has a choice, the
//! job's own first (fio's `clat_prio` array, its index 0).

use crate::engine::Rng;

/// The kernel's value of a class and level, as fio's `ioprio_value`: class 0 is the
/// best-effort class.
pub fn ioprio_value(class: u16, level: u16) -> u16 {
    let class = if class == 0 { ioswitch::cmd::ioprio::CLASS_BE } else { class };
    ioswitch::cmd::ioprio::value(class, level)
}

/// One entry of `cmdprio_bssplit`: block size, percentage, and its own priority when it
/// names a class and level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPrio {
    /// Block size, bytes.
    pub bs: u64,
    /// Percentage of that block size's I/Os (capped at 100, as fio).
    pub perc: u32,
    /// `bs/perc/class/level`: that priority; `None`: `cmdprio_class`/`cmdprio`.
    pub prio: Option<u16>,
}

/// The options as read (index 0 reads, 1 writes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdPrioOpts {
    /// `cmdprio_percentage`.
    pub percentage: [u32; 2],
    /// `cmdprio_class` (1 to 3); 0: not given (the real-time class).
    pub class: [u16; 2],
    /// `cmdprio` (0 to 7).
    pub level: [u16; 2],
    /// `cmdprio_bssplit`, per direction: entries with a percentage, by block size.
    pub bssplit: Option<[Vec<SplitPrio>; 2]>,
}

impl CmdPrioOpts {
    /// Whether the job chooses priorities per command at all.
    pub fn is_set(&self) -> bool {
        self.percentage.iter().any(|&p| p > 0) || self.bssplit.is_some()
    }
}

/// `READ[,WRITE]` of a whole-number option from `min` to `max` (fio's two-value
/// integers: one value sets both; `:` also separates them).
pub fn parse_pair(v: &str, min: u32, max: u32) -> Result<[u32; 2], String> {
    let expect = || format!("a whole number from {min} to {max}, or two (for reads and writes) as N,M");
    let (r, w) = match v.split_once([',', ':']) {
        Some((r, w)) => (r.trim(), Some(w.trim())),
        None => (v.trim(), None),
    };
    let one = |s: &str| s.parse::<u32>().ok().filter(|n| (min..=max).contains(n)).ok_or_else(expect);
    let r = one(r)?;
    let w = match w {
        Some(w) if !w.is_empty() => one(w)?,
        _ => r,
    };
    Ok([r, w])
}

/// Most entries per direction (fio's `BSSPLIT_MAX`).
const BSSPLIT_MAX: usize = 64;

/// `cmdprio_bssplit`: `READ_ENTRIES[,WRITE_ENTRIES[,TRIM_ENTRIES]]` (one list: for both),
/// entries `bs/perc[/class/level]` separated by `:`. `size` reads a block size with
/// fio's units. Entries of 0% are dropped, as fio drops them; a block size's entries
/// may not add up to more than 100%.
pub fn parse_bssplit(v: &str, size: impl Fn(&str) -> Option<u64>) -> Result<[Vec<SplitPrio>; 2], String> {
    let v = v.trim();
    let (read, write) = match v.split_once(',') {
        Some((r, rest)) => (r, rest.split(',').next().unwrap_or_default()),
        None => (v, v),
    };
    let list = |s: &str| -> Result<Vec<SplitPrio>, String> {
        let items: Vec<&str> = s.split(':').take_while(|e| !e.is_empty()).collect();
        if items.len() > BSSPLIT_MAX {
            return Err(format!("{} entries; at most {BSSPLIT_MAX} per direction", items.len()));
        }
        let mut out = Vec::new();
        for e in items {
            let bad = || format!("entry '{e}': expected bs/percentage or bs/percentage/class/level");
            let mut parts = e.split('/');
            let bs = parts.next().and_then(|b| size(b.trim())).ok_or_else(bad)?;
            let num = |p: Option<&str>| -> Result<Option<u32>, String> {
                match p.map(str::trim) {
                    None | Some("") => Ok(None),
                    Some(n) => n.parse::<u32>().map(Some).map_err(|_| bad()),
                }
            };
            let perc = num(parts.next())?.unwrap_or(0).min(100);
            let prio = match (num(parts.next())?, num(parts.next())?) {
                (None, None) => None,
                // fio caps the class at 3 and the level at 7.
                (Some(c), Some(l)) => Some(ioprio_value(c.min(3) as u16, l.min(7) as u16)),
                _ => return Err(bad()),
            };
            if parts.next().is_some() {
                return Err(bad());
            }
            if perc > 0 {
                out.push(SplitPrio { bs, perc, prio });
            }
        }
        // By block size; entries of one size keep their order.
        out.sort_by_key(|e| e.bs);
        let mut i = 0;
        while i < out.len() {
            let bs = out[i].bs;
            let total: u32 = out.iter().filter(|e| e.bs == bs).map(|e| e.perc).sum();
            if total > 100 {
                return Err(format!("the percentages for block size {bs} add up to {total}, more than 100"));
            }
            i += out[i..].iter().take_while(|e| e.bs == bs).count();
        }
        Ok(out)
    };
    Ok([list(read)?, list(write)?])
}

/// One priority a choice may give: its share, value, and index into the direction's
/// statistics ([`Chooser::values`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Prio {
    perc: u32,
    prio: u16,
    index: u16,
}

/// The priorities of one block size under `cmdprio_bssplit`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BsPrio {
    bs: u64,
    total: u32,
    prios: Vec<Prio>,
}

/// A job's per-command priorities: the options, and once the job is read, its choice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdPrio {
    /// The options as read.
    pub opts: CmdPrioOpts,
    /// The choice (fio's `struct cmdprio` after `fio_cmdprio_init`); `None`: none made.
    pub chooser: Option<Chooser>,
    /// `lat_percentiles`: the latencies kept per priority are total latencies (fio's
    /// rule), else completion latencies.
    pub on_lat: bool,
}

/// The choice of a job (fio's `struct cmdprio` after `fio_cmdprio_init`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chooser {
    perc: [Option<Prio>; 2],
    bs: [Vec<BsPrio>; 2],
    bssplit: bool,
    /// Per direction, the priorities whose latencies are kept apart: the job's own
    /// (`prioclass`/`prio`, 0 for none) first, then each the choice may give, once;
    /// empty for a direction the job does not do or that has no choice.
    pub values: [Vec<u16>; 2],
}

impl Chooser {
    /// The choice of a job with these options, whose own priority is `own` (0: none),
    /// for the directions it does; `None` when it chooses none.
    pub fn new(o: &CmdPrioOpts, own: u16, dirs: [bool; 2]) -> Option<Chooser> {
        if !o.is_set() {
            return None;
        }
        let mut c = Chooser {
            perc: [None; 2],
            bs: Default::default(),
            bssplit: o.bssplit.is_some(),
            values: Default::default(),
        };
        for d in 0..2 {
            // fio: the real-time class when cmdprio_class is not given.
            let class = if o.class[d] == 0 { ioswitch::cmd::ioprio::CLASS_RT } else { o.class[d] };
            let implicit = ioprio_value(class, o.level[d]);
            let values = &mut c.values[d];
            let mut index = |p: u16| -> u16 {
                if values.is_empty() {
                    values.push(own);
                }
                match values.iter().position(|&v| v == p) {
                    Some(i) => i as u16,
                    None => {
                        values.push(p);
                        (values.len() - 1) as u16
                    }
                }
            };
            match &o.bssplit {
                _ if !dirs[d] => {}
                Some(split) => {
                    let mut i = 0;
                    let entries = &split[d];
                    while i < entries.len() {
                        let bs = entries[i].bs;
                        let mut b = BsPrio { bs, total: 0, prios: Vec::new() };
                        while i < entries.len() && entries[i].bs == bs {
                            let e = entries[i];
                            let prio = e.prio.unwrap_or(implicit);
                            b.prios.push(Prio { perc: e.perc, prio, index: index(prio) });
                            b.total += e.perc;
                            i += 1;
                        }
                        c.bs[d].push(b);
                    }
                }
                None if o.percentage[d] > 0 => {
                    c.perc[d] = Some(Prio { perc: o.percentage[d], prio: implicit, index: index(implicit) });
                }
                None => {}
            }
        }
        Some(c)
    }

    /// The priority of one I/O of direction `dir` (0 read, 1 write) and `len` bytes:
    /// `Some((value, index))` when the draw gives it one, `None` when it runs at the
    /// job's own (index 0).
    #[inline]
    pub(crate) fn choose(&self, dir: usize, len: u64, rng: &mut Rng) -> Option<(u16, u16)> {
        if dir > 1 {
            return None;
        }
        let (p, bs) = if self.bssplit {
            match self.bs[dir].iter().find(|b| b.bs == len) {
                Some(b) => (b.total, Some(b)),
                None => return None,
            }
        } else {
            (self.perc[dir].map_or(0, |p| p.perc), None)
        };
        if p == 0 {
            return None;
        }
        let r = rng.below(100) as u32;
        if r >= p {
            return None;
        }
        match bs {
            None => self.perc[dir].map(|p| (p.prio, p.index)),
            Some(b) => {
                let mut sum = 0;
                b.prios.iter().find(|e| {
                    sum += e.perc;
                    r < sum
                })
            }
            .map(|e| (e.prio, e.index)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(s: &str) -> Option<u64> {
        crate::jobfile::parse_bytes(s)
    }

    #[test]
    fn percentage_pairs_read_like_fios_two_value_integers() {
        assert_eq!(parse_pair("30", 0, 100).unwrap(), [30, 30]);
        assert_eq!(parse_pair("30,70", 0, 100).unwrap(), [30, 70]);
        assert_eq!(parse_pair("30:70", 0, 100).unwrap(), [30, 70]);
        assert_eq!(parse_pair("30,", 0, 100).unwrap(), [30, 30]);
        assert!(parse_pair("101", 0, 100).is_err());
        assert!(parse_pair("0", 1, 3).is_err());
        assert!(parse_pair("x", 0, 100).is_err());
    }

    #[test]
    fn bssplit_entries_take_fios_forms_and_limits() {
        let [r, w] = parse_bssplit("4k/50:64k/10/3/5,8k/100", size).unwrap();
        assert_eq!(
            r,
            vec![
                SplitPrio { bs: 4096, perc: 50, prio: None },
                SplitPrio { bs: 65536, perc: 10, prio: Some(3 << 13 | 5) }
            ]
        );
        assert_eq!(w, vec![SplitPrio { bs: 8192, perc: 100, prio: None }]);
        // One list: both directions; 0% entries dropped; class/level capped; class 0 BE.
        let [r, w] = parse_bssplit("4k/0:8k/20/9/9:16k/5/0/1", size).unwrap();
        assert_eq!(r, w);
        assert_eq!(
            r,
            vec![
                SplitPrio { bs: 8192, perc: 20, prio: Some(3 << 13 | 7) },
                SplitPrio { bs: 16384, perc: 5, prio: Some(2 << 13 | 1) }
            ]
        );
        assert!(parse_bssplit("4k/60:4k/50", size).unwrap_err().contains("more than 100"));
        assert!(parse_bssplit("4k/10/1", size).is_err(), "class without level");
        assert!(parse_bssplit("4k/x", size).is_err());
        assert!(parse_bssplit("zz/10", size).is_err());
        assert!(parse_bssplit("4k/10/1/1/1", size).is_err());
    }

    /// Share of `n` draws that got each index, for direction `dir` and size `len`.
    fn shares(c: &Chooser, dir: usize, len: u64, n: u32) -> Vec<f64> {
        let mut rng = Rng::new(42);
        let mut count = vec![0u32; c.values[dir].len().max(1)];
        for _ in 0..n {
            let i = c.choose(dir, len, &mut rng).map_or(0, |(_, i)| i as usize);
            count[i] += 1;
        }
        count.iter().map(|&k| k as f64 / n as f64).collect()
    }

    #[test]
    fn a_percentage_gives_that_share_of_ios_the_priority() {
        let o = CmdPrioOpts { percentage: [30, 70], level: [0, 4], ..Default::default() };
        let c = Chooser::new(&o, 0, [true, true]).unwrap();
        // The job's own priority first, then the chosen one: real-time by default.
        assert_eq!(c.values, [vec![0, 1 << 13], vec![0, 1 << 13 | 4]]);
        // 200000 draws: the binomial standard deviation of a share is under 0.0011, so
        // 0.005 is more than 4 of them.
        let n = 200_000;
        let r = shares(&c, 0, 4096, n);
        assert!((r[1] - 0.30).abs() < 0.005, "reads: {r:?}");
        let w = shares(&c, 1, 4096, n);
        assert!((w[1] - 0.70).abs() < 0.005, "writes: {w:?}");
        let mut rng = Rng::new(1);
        assert!((0..100).filter_map(|_| c.choose(1, 512, &mut rng)).all(|pi| pi == (1 << 13 | 4, 1)));
        // A class of its own; the job's priority equal to it shares its index.
        let o = CmdPrioOpts { percentage: [50, 50], class: [3, 3], ..Default::default() };
        let c = Chooser::new(&o, 3 << 13, [true, false]).unwrap();
        assert_eq!(c.values, [vec![3 << 13], vec![]]);
        // 100% always, 0% never.
        let o = CmdPrioOpts { percentage: [100, 0], ..Default::default() };
        let c = Chooser::new(&o, 0, [true, true]).unwrap();
        assert_eq!(shares(&c, 0, 4096, 1000), vec![0.0, 1.0]);
        assert_eq!(shares(&c, 1, 4096, 1000), vec![1.0]);
        assert!(Chooser::new(&CmdPrioOpts::default(), 0, [true, true]).is_none());
    }

    #[test]
    fn bssplit_chooses_by_block_size_and_running_percentages() {
        let split = parse_bssplit("4k/20/3/0:4k/30/2/7:64k/40:16k/0", size).unwrap();
        let o = CmdPrioOpts { bssplit: Some(split), class: [2, 2], level: [1, 1], ..Default::default() };
        let c = Chooser::new(&o, 0, [true, true]).unwrap();
        // Own, then each distinct priority in the order met (by block size).
        assert_eq!(c.values[0], vec![0, 3 << 13, 2 << 13 | 7, 2 << 13 | 1]);
        let n = 200_000;
        let s = shares(&c, 0, 4096, n);
        for (got, want) in s.iter().zip([0.50, 0.20, 0.30, 0.0]) {
            assert!((got - want).abs() < 0.005, "4k: {s:?}");
        }
        let s = shares(&c, 0, 65536, n);
        for (got, want) in s.iter().zip([0.60, 0.0, 0.0, 0.40]) {
            assert!((got - want).abs() < 0.005, "64k: {s:?}");
        }
        // A block size with no entry (or only 0% ones) gets none.
        assert_eq!(shares(&c, 0, 16384, 1000)[0], 1.0);
        assert_eq!(shares(&c, 0, 8192, 1000)[0], 1.0);
        // Trims never.
        assert_eq!(c.choose(2, 4096, &mut Rng::new(3)), None);
    }
}
