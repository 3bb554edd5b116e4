//! The harness of the parser robustness tests (deterministic fuzzing) of
//! `crates/ioswitch/tests/parsers.rs` and `crates/ioswitch-bench/tests/jobfile_robustness.rs`:
//! a seeded xorshift generator, a checker that fails on panics, slow calls and one-sided
//! Ok/Err counts (with a watchdog for real hangs), and generators of random strings,
//! extreme values and mutations of valid inputs.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Harness: PRNG, panic and time checks, a watchdog for real hangs, Ok/Err counts.

/// xorshift64*: small, fast, and the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    /// The generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next number. (An endless generator, not an `Iterator`.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    /// One element of `xs` (not empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    /// Mostly small numbers, sometimes anything.
    pub fn number(&mut self) -> u64 {
        match self.below(4) {
            0 => self.next() % 10,
            1 => self.next() % 10_000,
            2 => self.next() % (1 << 32),
            _ => self.next(),
        }
    }
}

/// CPU time the calling thread has used (user + system), from `CLOCK_THREAD_CPUTIME_ID`.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; the clock id is
    // a constant the kernel supports since 2.6.12, and the result is checked.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID): {}", std::io::Error::last_os_error());
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The most CPU time a parser may take on one input.
pub const SLOW: Duration = Duration::from_millis(100);
/// After this long without an answer a call counts as hung and the process exits.
pub const WATCHDOG: Duration = Duration::from_secs(120);

/// Runs the cases of one parser: catches panics, times every call, counts results, and
/// aborts the process with the input shown if a call never returns.
pub struct Fuzz {
    what: &'static str,
    current: Arc<Mutex<String>>,
    done: Arc<AtomicBool>,
    ok: usize,
    err: usize,
}

impl Fuzz {
    /// A checker for the parser named `what`, with its watchdog thread.
    pub fn new(what: &'static str) -> Fuzz {
        let current = Arc::new(Mutex::new(String::new()));
        let done = Arc::new(AtomicBool::new(false));
        let (c, d) = (current.clone(), done.clone());
        std::thread::spawn(move || {
            let start = Instant::now();
            while !d.load(Ordering::Relaxed) {
                if start.elapsed() > WATCHDOG {
                    let input = c.lock().map(|s| s.clone()).unwrap_or_default();
                    eprintln!("{what}: no answer after {WATCHDOG:?}; hanging on {input}");
                    std::process::exit(101);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Fuzz { what, current, done, ok: 0, err: 0 }
    }

    /// Calls `f` on `input`; a panic or a call using more CPU time than [`SLOW`] (twice)
    /// fails the test with the seed, the case and the input.
    pub fn call<T>(&mut self, seed: u64, case: usize, input: &str, f: impl Fn() -> T) -> T {
        let place = format!("{} seed {seed:#x} case {case} input {input:?}", self.what);
        if let Ok(mut c) = self.current.lock() {
            c.clone_from(&place);
        }
        // The thread's CPU time, not the wall clock: on a loaded 2-core machine a thread
        // can wait longer than SLOW for a core between two instructions, which is not the
        // parser's time (a hang is the watchdog's, on the wall clock).
        let timed = || {
            let t = thread_cpu_time();
            let r = catch_unwind(AssertUnwindSafe(&f));
            (r, thread_cpu_time().saturating_sub(t))
        };
        let (mut r, mut took) = timed();
        if took > SLOW {
            // Once more, so that a cold cache or a page-fault storm is not taken for a slow
            // parser.
            (r, took) = timed();
        }
        match r {
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("{place}: the parser panicked: {msg}")
            }
            Ok(v) => {
                assert!(took <= SLOW, "{place}: took {took:?} (limit {SLOW:?})");
                v
            }
        }
    }

    /// Counts `r` as an Ok or an Err, for [`Fuzz::assert_balanced`].
    pub fn count<T, E>(&mut self, r: &Result<T, E>) {
        if r.is_ok() {
            self.ok += 1
        } else {
            self.err += 1
        }
    }

    /// Both outcomes must be common, or the generator has stopped meaning anything.
    pub fn assert_balanced(&self) {
        let total = self.ok + self.err;
        eprintln!("{}: {total} cases, {} Ok, {} Err", self.what, self.ok, self.err);
        assert!(self.ok * 10 >= total, "{}: only {} of {total} cases parsed", self.what, self.ok);
        assert!(self.err * 10 >= total, "{}: only {} of {total} cases failed", self.what, self.err);
    }
}

impl Drop for Fuzz {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// Generators shared by the parsers.

/// Pieces random strings are made of, weighted toward the grammars' own characters.
pub const ALPHABET: &[&str] = &[
    "=",
    "=",
    "=",
    ",",
    ",",
    ",",
    "[",
    "]",
    ";",
    "#",
    "\n",
    "\r\n",
    " ",
    " ",
    "\t",
    "0",
    "1",
    "1",
    "2",
    "4",
    "5",
    "7",
    "9",
    "00",
    "512",
    "4096",
    ".",
    ".",
    "k",
    "K",
    "m",
    "M",
    "g",
    "G",
    "t",
    "p",
    "b",
    "kb",
    "KiB",
    "MiB",
    "GiB",
    "%",
    "-",
    "+",
    "_",
    ":",
    "/",
    "./",
    "://",
    "x",
    "e",
    "0x",
    "ramdisk:",
    "é",
    "日本",
    "\u{0}",
    "\u{7f}",
    "\u{1b}",
    "\u{feff}",
    "\u{202e}",
    "\u{10ffff}",
    "18446744073709551616",
    "99999999999999999999999999999999999999999",
    "1e309",
    "NaN",
    "inf",
    "async",
    "sync",
    "direct",
    "size",
    "nsid",
    "threads",
    "io_uring",
    "psync",
    "true",
    "off",
];

/// Values that break naive parsers.
pub fn extreme(rng: &mut Rng) -> String {
    const FIXED: &[&str] = &[
        "",
        "0",
        "-0",
        "-1",
        "+1",
        "1",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "340282366920938463463374607431768211456",
        "1e309",
        "0.000000001",
        "0.0000000001",
        ".5",
        "5.",
        "1..5",
        "NaN",
        "inf",
        "0x10",
        " ",
        "\u{0}",
        "é",
        "9999999999999999999.999999999p",
        "18446744073709551615.999999999P",
    ];
    match rng.below(4) {
        0 => "9".repeat(1 + rng.below(5000)),
        1 => "x".repeat(1 + rng.below(10_000)),
        _ => rng.pick(FIXED).to_string(),
    }
}

/// Up to `max_parts` pieces of `alphabet`, with an extreme value now and then.
pub fn random_string(rng: &mut Rng, alphabet: &[&str], max_parts: usize) -> String {
    let n = rng.below(max_parts + 1);
    let mut s = String::new();
    for _ in 0..n {
        if rng.chance(3) {
            s.push_str(&extreme(rng));
        } else {
            s.push_str(rng_pick_str(rng, alphabet));
        }
    }
    s
}

/// Splits into tokens at the separators, keeping the separators as tokens of their own.
pub fn tokens(s: &str, seps: &[char]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        if seps.contains(&c) {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One to three edits of a valid input: delete, duplicate, swap or replace tokens, insert
/// pieces of the alphabet, flip characters.
pub fn mutate(rng: &mut Rng, valid: &str, seps: &[char], alphabet: &[&str]) -> String {
    let mut t = tokens(valid, seps);
    for _ in 0..1 + rng.below(3) {
        if t.is_empty() {
            t.push(rng.pick(alphabet).to_string());
            continue;
        }
        let i = rng.below(t.len());
        match rng.below(7) {
            0 => {
                t.remove(i);
            }
            1 => {
                let dup = t[i].clone();
                t.insert(i, dup);
            }
            2 => {
                let j = rng.below(t.len());
                t.swap(i, j);
            }
            3 => t[i] = extreme(rng),
            4 => t.insert(i, rng.pick(alphabet).to_string()),
            5 => {
                // Flip one character of the token into another from the alphabet.
                let chars: Vec<char> = t[i].chars().collect();
                let k = rng.below(chars.len().max(1));
                let mut s: String = chars.iter().take(k).collect();
                s.push_str(rng_pick_str(rng, alphabet));
                s.extend(chars.iter().skip(k + 1));
                t[i] = s;
            }
            _ => t[i] = t[i].to_uppercase(),
        }
    }
    t.concat()
}

/// One of `xs` (not empty).
pub fn rng_pick_str<'a>(rng: &mut Rng, xs: &[&'a str]) -> &'a str {
    xs[rng.below(xs.len())]
}
