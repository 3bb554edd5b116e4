//! Ceilings of the same shape as a job: `ioswitch bench membw --shape read,write --size
//! 256m --bs 512k [--file PATH]`.
//!
//! STREAM's kernels copy between arrays in DRAM; a 512 KiB read through a mapping copies
//! from DRAM into one 512 KiB buffer that stays in the cache, and a durable 512 KiB write
//! only stores. So the ceiling a job is judged against here is a plain single-thread loop
//! doing what the job does and nothing else, over a mapped region of the job's size (the
//! job's file itself with `--file`), `bs`-byte pieces at the job's offsets:
//!
//! | shape | one piece | bytes counted |
//! |---|---|---|
//! | `read` / `randread` | `memcpy` of the piece into one reused `bs`-byte buffer (the C library's, as the `pmem` and `mmap` interfaces read) | `bs` (bytes read) |
//! | `write` / `randwrite` | non-temporal stores of a value held in a register over the piece (no source is read), then `sfence` | `bs` (bytes written) |
//!
//! Each byte is counted once, as fio's `bw_bytes` counts it, not as STREAM does (which
//! counts a copy's bytes twice), so a job's bandwidth divides by these figures directly.
//! Sequential shapes take the pieces in order (`0, bs, 2·bs, …`), random ones at offsets
//! drawn uniformly from the region's `bs`-aligned pieces (fio's `norandommap`: repeats
//! allowed). One repetition is as many pieces as the region holds; one warm-up repetition
//! (which also faults every page in) is not counted; the report gives the best, the
//! median and the spread. After every repetition the result is checked: the buffer holds
//! the last piece read, and every piece the last write repetition wrote holds its value.
//!
//! The best of short repetitions is not the statistic a job reports: a time-based job's
//! bandwidth is its bytes over its whole measured run after a ramp (fio's `bw_bytes`:
//! bytes / `job_runtime`), a mean. With [`ShapeOpts::timed`] (`--runtime`, `--ramp`) each
//! shape also runs as such a job does, after its repetitions: the same loop over the same
//! region, pieces taken on (in order, wrapping at the region's end; or random) until the
//! ramp and then the runtime have passed, the clock read after every piece (as the job
//! reads it after every I/O). Counted as the job counts (`engine.rs`): every piece that
//! ended at or after the ramp's end, over the time from the ramp's end to the end of the
//! last piece (the one that crossed the deadline included). The report gives that mean
//! beside the best of the repetitions; both are checked as the repetitions are.

use super::{fmt_bytes, parse_list, parse_nonzero_size, MembwError, NtMethod, Rates, MAX_REPS};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::hint::black_box;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Region size without `--size` and without `--file`: the vPMEM study's file.
pub const DEFAULT_REGION_BYTES: u64 = 256 << 20;

/// The seed of the random offsets (fixed: the same offsets every run).
const SEED: u64 = 0x1f0_5eed;

/// What one piece of a shape does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// memcpy of pieces in order into one buffer.
    Read,
    /// memcpy of pieces at random offsets into one buffer.
    Randread,
    /// Non-temporal stores over pieces in order, no source.
    Write,
    /// Non-temporal stores over pieces at random offsets, no source.
    Randwrite,
}

impl Shape {
    /// Every shape, in the order a run measures them.
    pub const ALL: [Shape; 4] = [Shape::Read, Shape::Randread, Shape::Write, Shape::Randwrite];

    /// The name on the command line, in tables and in JSON (fio's `rw=` words).
    pub fn name(self) -> &'static str {
        match self {
            Shape::Read => "read",
            Shape::Randread => "randread",
            Shape::Write => "write",
            Shape::Randwrite => "randwrite",
        }
    }

    fn random(self) -> bool {
        matches!(self, Shape::Randread | Shape::Randwrite)
    }

    fn writes(self) -> bool {
        matches!(self, Shape::Write | Shape::Randwrite)
    }
}

/// Parses `--shape`: a comma list of read, randread, write, randwrite.
pub fn parse_shapes(s: &str) -> Result<Vec<Shape>, MembwError> {
    parse_list(s, |p| {
        Shape::ALL.into_iter().find(|k| k.name() == p).ok_or_else(|| {
            MembwError::Shape(format!("{s:?}: {p:?} is not a shape (a comma list of read, randread, write, randwrite)"))
        })
    })
}

/// Parses `--bs` (the job's block size: `512k`, `4k`).
pub fn parse_bs(s: &str) -> Result<u64, MembwError> {
    parse_nonzero_size(s, "a block of 0 bytes", MembwError::Bs)
}

/// Longest `--runtime` and longest `--ramp`.
pub const MAX_TIMED: Duration = Duration::from_secs(3600);

/// A time as a job's `runtime`/`ramp_time` is written (a plain number is seconds),
/// at most [`MAX_TIMED`].
fn parse_timed(s: &str, err: fn(String) -> MembwError) -> Result<Duration, MembwError> {
    let d = crate::jobfile::parse_time(s).ok_or_else(|| {
        err(format!("{s:?}: not a time (a whole number with a unit, as a job's runtime: 1s, 500ms, 250000us; a plain number is seconds)"))
    })?;
    if d > MAX_TIMED {
        return Err(err(format!("{s:?}: longer than {} s", MAX_TIMED.as_secs())));
    }
    Ok(d)
}

/// Parses `--runtime` (the job's `runtime`: `1s`, `1`); 0 is refused.
pub fn parse_runtime(s: &str) -> Result<Duration, MembwError> {
    let d = parse_timed(s, MembwError::Runtime)?;
    if d.is_zero() {
        return Err(MembwError::Runtime(format!("{s:?}: a runtime of 0 measures nothing")));
    }
    Ok(d)
}

/// Parses `--ramp` (the job's `ramp_time`: `500ms`; `0`: none).
pub fn parse_ramp(s: &str) -> Result<Duration, MembwError> {
    parse_timed(s, MembwError::Ramp)
}

/// The same-duration mean: each shape's loop run as a time-based job runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timed {
    /// Run this long first, not counted (the job's `ramp_time`).
    pub ramp: Duration,
    /// Then count this long (the job's `runtime`); not zero.
    pub runtime: Duration,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct ShapeOpts {
    /// The shapes, each measured over the same region.
    pub shapes: Vec<Shape>,
    /// Bytes of the region; `None`: the file's length with `file`, else
    /// [`DEFAULT_REGION_BYTES`].
    pub region_bytes: Option<u64>,
    /// Bytes per piece (the job's `bs`).
    pub bs: u64,
    /// Timed repetitions (after one warm-up).
    pub reps: u32,
    /// Map this file (`MAP_SHARED`) instead of anonymous memory. Write shapes overwrite it;
    /// no other process may write it meanwhile.
    pub file: Option<PathBuf>,
    /// Also the same-duration mean of every shape (after its repetitions).
    pub timed: Option<Timed>,
}

/// A shape's same-duration mean: bytes over a run as long as a job's, as the job counts.
#[derive(Clone, Debug, Serialize)]
pub struct TimedRate {
    /// Run first, not counted, seconds (the job's `ramp_time`).
    pub ramp_s: f64,
    /// Asked for, seconds (the job's `runtime`).
    pub runtime_s: f64,
    /// Measured: from the ramp's end to the end of the last piece, seconds (the job's
    /// `job_runtime`; a little over `runtime_s`, by the piece that crossed the deadline).
    pub measured_s: f64,
    /// Pieces that ended at or after the ramp's end.
    pub pieces: u64,
    /// Their bytes, each counted once.
    pub bytes: u64,
    /// `bytes / measured_s`: a mean over the run, as a job's bandwidth is.
    pub mean_bps: f64,
    /// The mean as a fraction of the best repetition's rate.
    pub of_best: f64,
}

/// One shape's figures, rates in bytes per second, each byte counted once.
#[derive(Clone, Debug, Serialize)]
pub struct ShapeStats {
    /// The shape.
    pub shape: Shape,
    /// What one piece does, in words.
    pub computes: String,
    /// What is counted.
    pub counts: &'static str,
    /// Bytes counted per repetition (pieces × bs).
    pub bytes_per_rep: u64,
    /// The rates.
    #[serde(flatten)]
    pub rates: Rates,
    /// What was checked after every repetition.
    pub checked: String,
    /// The same-duration mean, with [`ShapeOpts::timed`]; `null` without.
    pub timed: Option<TimedRate>,
}

/// The whole measurement.
#[derive(Clone, Debug, Serialize)]
pub struct ShapeReport {
    /// The region, in words (file or anonymous memory, how mapped).
    pub region: String,
    /// Its bytes.
    pub region_bytes: u64,
    /// Bytes per piece.
    pub bs: u64,
    /// Pieces per repetition (region / bs, rounded down).
    pub pieces_per_rep: u64,
    /// Timed repetitions per shape (one warm-up before them is not counted).
    pub reps: u32,
    /// The thread: one, not pinned (as a job's thread is not).
    pub threads: u32,
    /// The same-duration mean's ramp and runtime, seconds, `[ramp, runtime]`; `null`
    /// without one.
    pub timed_ramp_runtime_s: Option<[f64; 2]>,
    /// The non-temporal store instruction of the write shapes, or why there is none.
    pub nt_store: String,
    /// One per shape, in the order asked.
    pub shapes: Vec<ShapeStats>,
}

/// A mapped region, unmapped on drop.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    /// `len` bytes of `file` (`MAP_SHARED`, writable when `write`), or of anonymous
    /// memory filled with a position-dependent pattern.
    fn map(file: Option<&Path>, len: usize, write: bool) -> Result<(Region, String), MembwError> {
        let prot = if write { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        let (ptr, what) = match file {
            Some(path) => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(write)
                    .open(path)
                    .map_err(|e| MembwError::File(format!("{}: {e}", path.display())))?;
                let have = f.metadata().map_err(|e| MembwError::File(format!("{}: {e}", path.display())))?.len();
                if have < len as u64 {
                    return Err(MembwError::File(format!(
                        "{}: {} long, shorter than the region of {} (--size)",
                        path.display(),
                        fmt_bytes(have),
                        fmt_bytes(len as u64)
                    )));
                }
                // SAFETY: a fresh shared mapping of `len` bytes of an open file, at an
                // address the kernel chooses; the file is at least `len` long (checked
                // above), and the mapping outlives `f` by design (mmap keeps its own
                // reference to the file).
                let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, f.as_raw_fd(), 0) };
                if p == libc::MAP_FAILED {
                    let e = std::io::Error::last_os_error();
                    return Err(MembwError::File(format!(
                        "{}: mmap of {}: {e}",
                        path.display(),
                        fmt_bytes(len as u64)
                    )));
                }
                let how = if write { "read-write" } else { "read-only" };
                (p, format!("file {}, {} mapped MAP_SHARED ({how})", path.display(), fmt_bytes(len as u64)))
            }
            None => {
                // SAFETY: a fresh private anonymous mapping at an address the kernel chooses.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    let e = std::io::Error::last_os_error();
                    return Err(MembwError::Size(format!("{}: anonymous mmap: {e}", fmt_bytes(len as u64))));
                }
                (p, format!("anonymous memory, {} (MAP_PRIVATE)", fmt_bytes(len as u64)))
            }
        };
        let r = Region { ptr: ptr.cast(), len };
        if file.is_none() {
            // SAFETY: the anonymous mapping above is readable and writable, `len` bytes.
            let s = unsafe { std::slice::from_raw_parts_mut(r.ptr, r.len) };
            for (i, b) in s.iter_mut().enumerate() {
                *b = pattern(i);
            }
        }
        Ok((r, what))
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is readable, `len` bytes, alive while `self` is; nothing in
        // this process writes it while this shared borrow lives (writes go through
        // `bytes_mut`, which needs `&mut self`). A file region assumes, as `--file` says
        // and the pmem study does, that no other process writes the file meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`; only write shapes call this, and they map it writable.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no borrow of it outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The anonymous region's content: differs between neighbouring pieces, so that a copy
/// from the wrong offset does not pass the check.
fn pattern(i: usize) -> u8 {
    (i ^ (i >> 9) ^ (i >> 17)) as u8
}

/// splitmix64: the random offsets, reproducible from [`SEED`].
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One repetition's piece offsets.
fn offsets(shape: Shape, pieces: usize, bs: usize, rng: &mut u64, out: &mut Vec<usize>) {
    out.clear();
    if shape.random() {
        out.extend((0..pieces).map(|_| (next(rng) % pieces as u64) as usize * bs));
    } else {
        out.extend((0..pieces).map(|i| i * bs));
    }
}

/// The read check: `buf` holds the piece at `off`.
fn check_read(buf: &[u8], region: &[u8], off: usize) -> Result<(), String> {
    if buf != &region[off..off + buf.len()] {
        let at = buf.iter().zip(&region[off..]).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!("read: the buffer differs from the piece at offset {off} (first at byte {at})"));
    }
    Ok(())
}

/// The write check: every piece at `offs` holds `value` in every 8-byte lane.
fn check_written(region: &[u8], offs: &[usize], bs: usize, value: u64) -> Result<(), String> {
    let want = value.to_ne_bytes();
    for &o in offs {
        if let Some(at) = region[o..o + bs].chunks_exact(8).position(|c| c != want) {
            return Err(format!(
                "write: the piece at offset {o} does not hold the value written (lane {at} of {})",
                bs / 8
            ));
        }
    }
    Ok(())
}

/// The value the write shapes store in repetition `rep` (never the one before it).
fn write_value(rep: u32) -> u64 {
    0x0101_0101_0101_0101u64.wrapping_mul(u64::from(rep % 255 + 1)) ^ 0x5a00_0000_0000_00a5
}

#[cfg(target_arch = "x86_64")]
mod nt {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_set1_epi64x, _mm256_stream_si256, _mm_set1_epi64x, _mm_sfence, _mm_stream_si128,
    };

    /// Stores `v` over `dst` with 32-byte non-temporal stores, two per cache line, then
    /// fences them.
    ///
    /// # Safety
    /// The CPU has AVX; `dst` is 64-byte aligned and a multiple of 64 bytes long.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn fill_avx(dst: &mut [u8], v: u64) {
        let x = _mm256_set1_epi64x(v as i64);
        for line in dst.chunks_exact_mut(64) {
            let p = line.as_mut_ptr();
            // SAFETY: `line` is 64 bytes of `dst`, 64-byte aligned (the caller's promise:
            // dst is, and every line is 64 bytes further), so both 32-byte stores are
            // aligned and inside it; AVX is the caller's promise.
            unsafe {
                _mm256_stream_si256(p.cast::<__m256i>(), x);
                _mm256_stream_si256(p.add(32).cast::<__m256i>(), x);
            }
        }
        // Orders the streaming stores before any later store: one fence per piece, as a
        // durable write has.
        _mm_sfence();
    }

    /// As [`fill_avx`] with 16-byte SSE2 stores, four per cache line.
    ///
    /// # Safety
    /// The CPU has SSE2; `dst` is 64-byte aligned and a multiple of 64 bytes long.
    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn fill_sse2(dst: &mut [u8], v: u64) {
        let x = _mm_set1_epi64x(v as i64);
        for line in dst.chunks_exact_mut(64) {
            let p = line.as_mut_ptr();
            // SAFETY: as in fill_avx, 16-byte stores at 16-byte aligned addresses.
            unsafe {
                _mm_stream_si128(p.cast::<__m128i>(), x);
                _mm_stream_si128(p.add(16).cast::<__m128i>(), x);
                _mm_stream_si128(p.add(32).cast::<__m128i>(), x);
                _mm_stream_si128(p.add(48).cast::<__m128i>(), x);
            }
        }
        // As in fill_avx.
        _mm_sfence();
    }
}

/// One piece of a write shape.
#[inline(never)]
fn nt_fill(dst: &mut [u8], v: u64, method: NtMethod) {
    assert!(dst.as_ptr() as usize % 64 == 0 && dst.len() % 64 == 0, "nt_fill: piece not whole aligned lines");
    #[cfg(target_arch = "x86_64")]
    match method {
        // SAFETY: NtMethod values come from detect() (CPUID) or, in tests, only after it
        // reported them; the piece is 64-byte aligned and whole lines (asserted above).
        NtMethod::Avx => unsafe { nt::fill_avx(dst, v) },
        // SAFETY: as above, for SSE2.
        NtMethod::Sse2 => unsafe { nt::fill_sse2(dst, v) },
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (dst, v, method);
}

/// One piece of a read shape: the C library's memcpy, as the interfaces read.
#[inline(never)]
fn read_piece(buf: &mut [u8], src: &[u8]) {
    buf.copy_from_slice(src);
}

/// The next piece of a time-based run: in order from `*at`, wrapping at the region's end
/// (as a time-based job starts its region over), or uniformly random.
fn next_piece(random: bool, pieces: usize, at: &mut usize, rng: &mut u64) -> usize {
    if random {
        return (next(rng) % pieces as u64) as usize;
    }
    let p = *at;
    *at = if p + 1 == pieces { 0 } else { p + 1 };
    p
}

/// One shape's same-duration mean: pieces until `t.ramp + t.runtime` has passed, the clock
/// read after each; counted are the pieces that ended at or after the ramp's end, over the
/// time from then to the last one's end (as `engine.rs` counts a job's I/Os and its
/// `job_runtime`). Write shapes store `value`; the check follows the run.
#[allow(clippy::too_many_arguments)]
fn run_timed(
    shape: Shape,
    t: Timed,
    region: &mut Region,
    buf: &mut [u8],
    bs: usize,
    rng: &mut u64,
    nt: Option<NtMethod>,
    value: u64,
) -> Result<TimedRate, MembwError> {
    let pieces = region.len / bs;
    let random = shape.random();
    let mut at = 0usize;
    let mut touched = vec![false; if shape.writes() { pieces } else { 0 }];
    let (mut counted, mut last_off) = (0u64, 0usize);
    let t0 = Instant::now();
    let ramp_end = t0 + t.ramp;
    let deadline = ramp_end + t.runtime;
    let mut now = t0;
    let mut last = ramp_end;
    if shape.writes() {
        let m = nt.expect("checked before the repetitions");
        let r = region.bytes_mut();
        while now < deadline {
            let p = next_piece(random, pieces, &mut at, rng);
            let o = p * bs;
            nt_fill(black_box(&mut r[o..o + bs]), value, m);
            touched[p] = true;
            now = Instant::now();
            if now >= ramp_end {
                counted += 1;
                last = now;
            }
        }
        let offs: Vec<usize> = touched.iter().enumerate().filter(|(_, &w)| w).map(|(p, _)| p * bs).collect();
        check_written(region.bytes(), &offs, bs, value).map_err(MembwError::Validation)?;
    } else {
        let r = region.bytes();
        while now < deadline {
            let o = next_piece(random, pieces, &mut at, rng) * bs;
            read_piece(black_box(&mut *buf), black_box(&r[o..o + bs]));
            last_off = o;
            now = Instant::now();
            if now >= ramp_end {
                counted += 1;
                last = now;
            }
        }
        check_read(buf, r, last_off).map_err(MembwError::Validation)?;
    }
    let measured = last.duration_since(ramp_end).as_secs_f64().max(1e-9);
    let bytes = counted * bs as u64;
    Ok(TimedRate {
        ramp_s: t.ramp.as_secs_f64(),
        runtime_s: t.runtime.as_secs_f64(),
        measured_s: measured,
        pieces: counted,
        bytes,
        mean_bps: bytes as f64 / measured,
        of_best: 0.0,
    })
}

/// Measures every shape in `opts` over one region; `say` hears progress.
pub fn measure(opts: &ShapeOpts, say: &mut dyn FnMut(&str)) -> Result<ShapeReport, MembwError> {
    measure_with(opts, NtMethod::detect(), say)
}

fn measure_with(opts: &ShapeOpts, nt: Option<NtMethod>, say: &mut dyn FnMut(&str)) -> Result<ShapeReport, MembwError> {
    if opts.reps == 0 || opts.reps > MAX_REPS {
        return Err(MembwError::Reps(opts.reps));
    }
    if opts.shapes.is_empty() {
        return Err(MembwError::Shape("\"\": no shape".into()));
    }
    if let Some(t) = opts.timed {
        if t.runtime.is_zero() || t.runtime > MAX_TIMED {
            return Err(MembwError::Runtime(format!(
                "{:?}: must be more than 0 and at most {} s",
                t.runtime,
                MAX_TIMED.as_secs()
            )));
        }
        if t.ramp > MAX_TIMED {
            return Err(MembwError::Ramp(format!("{:?}: longer than {} s", t.ramp, MAX_TIMED.as_secs())));
        }
    }
    let writes = opts.shapes.iter().any(|s| s.writes());
    if writes && nt.is_none() {
        return Err(MembwError::Shape(format!(
            "{}: {}",
            opts.shapes.iter().find(|s| s.writes()).expect("a write shape").name(),
            super::NT_UNAVAILABLE
        )));
    }
    if writes && opts.bs % 64 != 0 {
        return Err(MembwError::Bs(format!(
            "{}: the write shapes store whole 64-byte cache lines; give a multiple of 64",
            opts.bs
        )));
    }
    let region_bytes = match (opts.region_bytes, &opts.file) {
        (Some(b), _) => b,
        (None, Some(f)) => std::fs::metadata(f).map_err(|e| MembwError::File(format!("{}: {e}", f.display())))?.len(),
        (None, None) => DEFAULT_REGION_BYTES,
    };
    if region_bytes < opts.bs {
        if let (None, Some(f)) = (opts.region_bytes, &opts.file) {
            return Err(MembwError::File(format!(
                "{}: {} long, smaller than one piece of {} (--bs)",
                f.display(),
                fmt_bytes(region_bytes),
                fmt_bytes(opts.bs)
            )));
        }
        return Err(MembwError::Size(format!(
            "{}: smaller than one piece of {} (--bs)",
            fmt_bytes(region_bytes),
            fmt_bytes(opts.bs)
        )));
    }
    let (Ok(len), Ok(bs)) = (usize::try_from(region_bytes), usize::try_from(opts.bs)) else {
        return Err(MembwError::Size(format!("{region_bytes}: larger than this machine's address space")));
    };
    if let Some(avail) = super::mem_available() {
        if opts.file.is_none() && region_bytes > avail / 10 * 9 {
            return Err(MembwError::Size(format!(
                "{}: more than the {} of memory available",
                fmt_bytes(region_bytes),
                fmt_bytes(avail)
            )));
        }
    }
    let pieces = len / bs;
    let (mut region, what) = Region::map(opts.file.as_deref(), len, writes)?;
    // One reused buffer, 64-byte aligned (over-allocated and offset).
    let mut raw = vec![0u8; bs + 64];
    let boff = raw.as_ptr().align_offset(64).min(64);
    let buf = &mut raw[boff..boff + bs];
    let mut rng = SEED;
    let mut offs = Vec::with_capacity(pieces);
    let mut stats = Vec::new();
    let nt_desc = nt
        .map_or(super::NT_UNAVAILABLE.to_string(), |m| m.describe().replace(", then sfence", ", one sfence per piece"));
    for &shape in &opts.shapes {
        say(&format!(
            "membw --shape {}: {pieces} pieces of {} per repetition over {}, {} repetitions + 1 warm-up",
            shape.name(),
            fmt_bytes(opts.bs),
            what,
            opts.reps
        ));
        let mut secs = Vec::with_capacity(opts.reps as usize);
        for rep in 0..=opts.reps {
            offsets(shape, pieces, bs, &mut rng, &mut offs);
            let t0;
            if shape.writes() {
                let v = write_value(rep);
                let m = nt.expect("checked above");
                let r = region.bytes_mut();
                t0 = Instant::now();
                for &o in &offs {
                    nt_fill(black_box(&mut r[o..o + bs]), v, m);
                }
                let dt = t0.elapsed();
                check_written(region.bytes(), &offs, bs, v).map_err(MembwError::Validation)?;
                secs.push(dt.as_secs_f64().max(1e-9));
            } else {
                let r = region.bytes();
                t0 = Instant::now();
                for &o in &offs {
                    read_piece(black_box(&mut *buf), black_box(&r[o..o + bs]));
                }
                let dt = t0.elapsed();
                check_read(buf, r, *offs.last().expect("one piece at least")).map_err(MembwError::Validation)?;
                secs.push(dt.as_secs_f64().max(1e-9));
            }
        }
        // The warm-up (repetition 0) is not counted.
        let mut timed: Vec<f64> = secs[1..].to_vec();
        timed.sort_by(f64::total_cmp);
        let bytes = (pieces * bs) as u64;
        let order = if shape.random() { "random" } else { "sequential" };
        let (computes, counts, checked) = if shape.writes() {
            (
                format!("non-temporal stores of a register over {} pieces, {order}, no source", fmt_bytes(opts.bs)),
                "bytes written",
                "after every repetition, every piece it wrote holds the value it stored".to_string(),
            )
        } else {
            (
                format!("memcpy of {} pieces, {order}, into one {} buffer", fmt_bytes(opts.bs), fmt_bytes(opts.bs)),
                "bytes read",
                "after every repetition, the buffer holds the last piece read".to_string(),
            )
        };
        let rates = Rates::of(&timed, bytes);
        let mean = match opts.timed {
            Some(t) => {
                say(&format!(
                    "membw --shape {}: the same-duration mean, {} ms ramp then {} ms, as a time-based job",
                    shape.name(),
                    t.ramp.as_millis(),
                    t.runtime.as_millis()
                ));
                let v = write_value(opts.reps + 1);
                let mut m = run_timed(shape, t, &mut region, buf, bs, &mut rng, nt, v)?;
                m.of_best = m.mean_bps / rates.best_bps;
                Some(m)
            }
            None => None,
        };
        let checked =
            if mean.is_some() { format!("{checked}, and after the same-duration run likewise") } else { checked };
        stats.push(ShapeStats { shape, computes, counts, bytes_per_rep: bytes, rates, checked, timed: mean });
    }
    Ok(ShapeReport {
        region: what,
        region_bytes,
        bs: opts.bs,
        pieces_per_rep: pieces as u64,
        reps: opts.reps,
        threads: 1,
        timed_ramp_runtime_s: opts.timed.map(|t| [t.ramp.as_secs_f64(), t.runtime.as_secs_f64()]),
        nt_store: nt_desc,
        shapes: stats,
    })
}

impl ShapeReport {
    /// The report as JSON (rates in bytes per second).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The report as a text table, rates in GB/s (10^9 bytes per second).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "region: {}", self.region);
        let _ = writeln!(
            s,
            "pieces: {} of {} per repetition; 1 thread, not pinned (as a job's thread)",
            self.pieces_per_rep,
            fmt_bytes(self.bs)
        );
        if self.shapes.iter().any(|x| x.shape.writes()) {
            let _ = writeln!(s, "non-temporal stores: {}", self.nt_store);
        }
        let _ = writeln!(
            s,
            "rates: GB/s (10^9 B/s), each byte counted once (as fio's bw_bytes); best / median / spread (min..max) of {} repetitions after 1 warm-up",
            self.reps
        );
        let _ =
            writeln!(s, "{:<10} {:>9} {:>9} {:>15} {:>10}  computes", "shape", "best", "median", "spread", "best time");
        for k in &self.shapes {
            let (best, median, spread, time) = k.rates.columns();
            let _ = writeln!(
                s,
                "{:<10} {:>9.2} {:>9.2} {:>15} {:>10}  {} ({})",
                k.shape.name(),
                best,
                median,
                spread,
                time,
                k.computes,
                k.counts
            );
        }
        if let Some([ramp, runtime]) = self.timed_ramp_runtime_s {
            let _ = writeln!(
                s,
                "same-duration mean (as a time-based job: {} ms ramp, then {} ms; bytes of the pieces that ended after the ramp / time from its end to the last one's end):",
                (ramp * 1e3).round(),
                (runtime * 1e3).round()
            );
            let _ = writeln!(s, "{:<10} {:>9} {:>10} {:>9} {:>9}", "shape", "mean", "measured", "pieces", "of best");
            for k in &self.shapes {
                if let Some(m) = &k.timed {
                    let _ = writeln!(
                        s,
                        "{:<10} {:>9.2} {:>8.3} s {:>9} {:>7.1} %",
                        k.shape.name(),
                        m.mean_bps / 1e9,
                        m.measured_s,
                        m.pieces,
                        m.of_best * 100.0
                    );
                }
            }
        }
        for k in &self.shapes {
            let _ = writeln!(s, "checked ({}): {}", k.shape.name(), k.checked);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(shapes: &[Shape], region: u64, bs: u64) -> ShapeOpts {
        ShapeOpts { shapes: shapes.to_vec(), region_bytes: Some(region), bs, reps: 2, file: None, timed: None }
    }

    #[test]
    fn every_shape_counts_each_byte_once_and_reports_a_positive_rate() {
        let shapes: &[Shape] = if NtMethod::detect().is_some() { &Shape::ALL } else { &[Shape::Read, Shape::Randread] };
        let r = measure(&opts(shapes, 1 << 20, 64 << 10), &mut |_| {}).unwrap();
        assert_eq!(r.pieces_per_rep, 16);
        assert_eq!(r.shapes.len(), shapes.len());
        for k in &r.shapes {
            assert_eq!(k.bytes_per_rep, 16 * (64 << 10), "{k:?}");
            assert!(
                k.rates.best_bps > 0.0
                    && k.rates.min_bps <= k.rates.median_bps
                    && k.rates.median_bps <= k.rates.best_bps,
                "{k:?}"
            );
            assert!(
                (k.rates.best_bps * k.rates.best_s - k.bytes_per_rep as f64).abs() < 1.0,
                "rate = bytes / time: {k:?}"
            );
        }
        let j = r.to_json();
        assert_eq!(j["shapes"][0]["shape"], "read");
        assert_eq!(j["bs"], 64 << 10);
        let t = r.to_text();
        assert!(t.lines().any(|l| l.starts_with("randread ")), "{t}");
    }

    #[test]
    fn the_same_duration_mean_counts_as_a_time_based_job_after_its_ramp() {
        let shapes: &[Shape] = if NtMethod::detect().is_some() { &Shape::ALL } else { &[Shape::Read, Shape::Randread] };
        let mut o = opts(shapes, 1 << 20, 64 << 10);
        let t = Timed { ramp: Duration::from_millis(300), runtime: Duration::from_millis(50) };
        o.timed = Some(t);
        let r = measure(&o, &mut |_| {}).unwrap();
        assert_eq!(r.timed_ramp_runtime_s, Some([0.3, 0.05]));
        for k in &r.shapes {
            let m = k.timed.as_ref().unwrap_or_else(|| panic!("no same-duration mean: {k:?}"));
            assert_eq!(m.bytes, m.pieces * (64 << 10), "{m:?}");
            assert!((m.mean_bps * m.measured_s - m.bytes as f64).abs() < 1.0, "mean = bytes / measured time: {m:?}");
            // The last piece ends at or after the deadline: at least the runtime is measured,
            // and the ramp is not (300 ms of it would put the measured time over 350 ms).
            assert!(m.measured_s >= 0.05 && m.measured_s < 0.35, "{m:?}");
            // 50 ms of 64 KiB pieces go round a 16-piece region many times.
            assert!(m.pieces > r.pieces_per_rep, "{m:?}");
            assert!((m.of_best - m.mean_bps / k.rates.best_bps).abs() < 1e-12, "{m:?}");
            assert!(k.checked.contains("after the same-duration run"), "{k:?}");
        }
        let j = r.to_json();
        assert!(j["shapes"][0]["best_bps"].as_f64().unwrap() > 0.0, "{j:#}");
        assert!(j["shapes"][0]["timed"]["mean_bps"].as_f64().unwrap() > 0.0, "{j:#}");
        assert_eq!(j["timed_ramp_runtime_s"], serde_json::json!([0.3, 0.05]));
        let text = r.to_text();
        assert!(text.contains("same-duration mean (as a time-based job: 300 ms ramp, then 50 ms"), "{text}");
        assert_eq!(text.lines().filter(|l| l.ends_with(" %") && l.starts_with(shapes[0].name())).count(), 1, "{text}");

        // Without it: the best-of figures only, and JSON says so with nulls.
        o.timed = None;
        let r = measure(&o, &mut |_| {}).unwrap();
        assert!(r.shapes.iter().all(|k| k.timed.is_none()));
        let j = r.to_json();
        assert!(j["timed_ramp_runtime_s"].is_null() && j["shapes"][0]["timed"].is_null(), "{j:#}");
        assert!(!r.to_text().contains("same-duration"));

        // A zero runtime and an overlong ramp are refused by name, before anything runs.
        o.timed = Some(Timed { ramp: Duration::ZERO, runtime: Duration::ZERO });
        assert!(measure(&o, &mut |_| {}).unwrap_err().to_string().starts_with("--runtime"));
        o.timed = Some(Timed { ramp: MAX_TIMED + Duration::from_secs(1), runtime: Duration::from_secs(1) });
        assert!(measure(&o, &mut |_| {}).unwrap_err().to_string().starts_with("--ramp"));
    }

    #[test]
    fn a_time_based_run_takes_the_pieces_in_order_and_wraps() {
        let (mut at, mut rng) = (0, SEED);
        let v: Vec<usize> = (0..7).map(|_| next_piece(false, 3, &mut at, &mut rng)).collect();
        assert_eq!(v, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(rng, SEED, "the sequential order draws no random numbers");
        let v: Vec<usize> = (0..1000).map(|_| next_piece(true, 3, &mut at, &mut rng)).collect();
        assert!(v.iter().all(|&p| p < 3) && (0..3).all(|p| v.contains(&p)), "{v:?}");
    }

    #[test]
    fn runtime_and_ramp_parse_as_a_jobs_times_and_bad_ones_are_refused_by_name() {
        assert_eq!(parse_runtime("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_runtime("2").unwrap(), Duration::from_secs(2), "a plain number is seconds");
        assert_eq!(parse_runtime("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_ramp("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_ramp("0").unwrap(), Duration::ZERO, "no ramp");
        for (bad, want) in [
            ("0", "a runtime of 0 measures nothing"),
            ("1.5s", "not a time"),
            ("", "not a time"),
            ("-1", "not a time"),
            ("5 parsecs", "not a time"),
            ("2h", "longer than 3600 s"),
        ] {
            let e = parse_runtime(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--runtime {bad:?}")) && e.contains(want), "{bad:?}: {e}");
        }
        let e = parse_ramp("soon").unwrap_err().to_string();
        assert!(e.starts_with("--ramp \"soon\"") && e.contains("not a time"), "{e}");
        assert!(parse_ramp("61m").unwrap_err().to_string().contains("longer than"));
    }

    #[test]
    fn a_region_that_is_not_whole_pieces_uses_the_whole_pieces() {
        let r = measure(&opts(&[Shape::Read], (1 << 20) + 4096, 256 << 10), &mut |_| {}).unwrap();
        assert_eq!(r.pieces_per_rep, 4);
        assert_eq!(r.shapes[0].bytes_per_rep, 1 << 20);
    }

    #[test]
    fn sequential_offsets_cover_the_region_and_random_ones_stay_inside_it() {
        let mut rng = SEED;
        let mut v = Vec::new();
        offsets(Shape::Read, 8, 4096, &mut rng, &mut v);
        assert_eq!(v, (0..8).map(|i| i * 4096).collect::<Vec<_>>());
        offsets(Shape::Randwrite, 1000, 512, &mut rng, &mut v);
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&o| o % 512 == 0 && o < 1000 * 512), "{v:?}");
        let mut distinct = v.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 500, "random offsets spread: {} distinct of 1000", distinct.len());
    }

    #[test]
    fn the_checks_catch_a_copy_or_store_that_did_not_happen() {
        let region: Vec<u8> = (0..8192).map(pattern).collect();
        let mut buf = region[4096..6144].to_vec();
        check_read(&buf, &region, 4096).unwrap();
        assert!(check_read(&buf, &region, 2048).is_err(), "a piece from the wrong offset");
        buf[100] ^= 1;
        assert!(check_read(&buf, &region, 4096).unwrap_err().contains("byte 100"));

        let v = write_value(3);
        let mut region = vec![0u8; 4096];
        for c in region[1024..2048].chunks_exact_mut(8) {
            c.copy_from_slice(&v.to_ne_bytes());
        }
        check_written(&region, &[1024], 1024, v).unwrap();
        assert!(check_written(&region, &[1024, 0], 1024, v).is_err(), "a piece never written");
        assert!(check_written(&region, &[1024], 1024, write_value(2)).is_err(), "last repetition's value");
        region[2000] ^= 1;
        assert!(check_written(&region, &[1024], 1024, v).unwrap_err().contains("offset 1024"));
    }

    #[test]
    fn each_repetition_writes_a_new_value() {
        for r in 0..600 {
            assert_ne!(write_value(r), write_value(r + 1), "{r}");
        }
    }

    #[test]
    fn every_nt_method_the_cpu_has_fills_exactly_its_piece() {
        let methods: Vec<NtMethod> = match NtMethod::detect() {
            Some(NtMethod::Avx) => vec![NtMethod::Avx, NtMethod::Sse2],
            Some(NtMethod::Sse2) => vec![NtMethod::Sse2],
            None => vec![],
        };
        for m in methods {
            let mut raw = vec![0u8; 4096 + 64];
            let o = raw.as_ptr().align_offset(64);
            nt_fill(&mut raw[o + 64..o + 64 + 1024], 0x1122_3344_5566_7788, m);
            check_written(&raw[o..], &[64], 1024, 0x1122_3344_5566_7788).unwrap();
            assert!(raw[..o + 64].iter().chain(&raw[o + 64 + 1024..]).all(|&b| b == 0), "{m:?} wrote outside");
        }
    }

    #[test]
    fn a_file_region_is_the_file_and_bad_input_is_refused_by_name() {
        let scratch = ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), "ioswitch-membw-shape");
        let dir = scratch.dir();
        let f = dir.join("region");
        std::fs::write(&f, (0..(256usize << 10)).map(pattern).collect::<Vec<u8>>()).unwrap();
        let mut o = opts(&[Shape::Randread, Shape::Write], 256 << 10, 64 << 10);
        o.file = Some(f.clone());
        if NtMethod::detect().is_some() {
            let r = measure(&o, &mut |_| {}).unwrap();
            assert!(r.region.starts_with(&format!("file {}", f.display())) && r.region.contains("read-write"), "{r:?}");
            // The write shape wrote the file itself: every piece holds the last value.
            let after = std::fs::read(&f).unwrap();
            check_written(&after, &[0, 64 << 10, 128 << 10, 192 << 10], 64 << 10, write_value(2)).unwrap();
        }
        o.region_bytes = None;
        o.shapes = vec![Shape::Read];
        assert_eq!(measure(&o, &mut |_| {}).unwrap().region_bytes, 256 << 10, "default: the file's length");
        o.region_bytes = Some(1 << 20);
        let e = measure(&o, &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--file") && e.contains("shorter than the region"), "{e}");
        o.file = Some(dir.join("missing"));
        let e = measure(&o, &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--file") && e.contains("missing"), "{e}");

        let e = measure(&opts(&[Shape::Read], 4096, 8192), &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--size") && e.contains("smaller than one piece"), "{e}");
        let e = measure(&opts(&[Shape::Write], 1 << 20, 1000), &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--bs") && e.contains("multiple of 64"), "{e}");
        let e = measure_with(&opts(&[Shape::Write], 1 << 20, 4096), None, &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--shape write") && e.contains("non-temporal"), "{e}");
        let mut z = opts(&[Shape::Read], 1 << 20, 4096);
        z.reps = 0;
        assert!(measure(&z, &mut |_| {}).unwrap_err().to_string().starts_with("--reps"));
        assert!(parse_shapes("read,nope").unwrap_err().to_string().contains("\"nope\" is not a shape"));
        assert_eq!(parse_shapes("write, read,write").unwrap(), vec![Shape::Write, Shape::Read]);
        assert!(parse_bs("0").unwrap_err().to_string().starts_with("--bs"));
        assert!(parse_bs("12q").unwrap_err().to_string().starts_with("--bs"));
        assert_eq!(parse_bs("512k").unwrap(), 512 << 10);
    }
}
