//! `ioswitch bench membw`: the memory-bandwidth ceiling, measured the way STREAM measures
//! it.
//!
//! Six kernels run over three arrays of `f64` (`a`, `b`, `c`), in this order, in every
//! repetition:
//!
//! | kernel | does | bytes counted per element |
//! |---|---|---|
//! | copy | `c = a`, element by element (not a `memcpy` call) | 16 (2 arrays) |
//! | scale | `b = s·c` | 16 (2 arrays) |
//! | add | `c = a + b` | 24 (3 arrays) |
//! | triad | `a = b + s·c` | 24 (3 arrays) |
//! | memcpy | `c.copy_from_slice(b)` (the C library's `memcpy`) | 16 (read + written) |
//! | nt_copy | `b = a` with non-temporal (cache-bypassing) stores, then `sfence` | 16 (read + written) |
//!
//! memcpy and nt_copy copy between different arrays, so that each kernel's output differs
//! from what was there before it ran and a kernel that does nothing cannot go unseen.
//!
//! The counting is STREAM's: every array a kernel names is counted once, reads and writes
//! alike, and write-allocate traffic (the read of a line before it is written, which plain
//! stores cause and non-temporal stores avoid) is not counted.
//!
//! N threads each own a slice of every array, allocated and first touched by the thread
//! itself (pinned to its own CPU where there are enough), and run the kernels between
//! barriers; one repetition of a kernel lasts from the first thread's start to the last
//! thread's end. One warm-up repetition is not counted; of the others the report gives
//! the best rate (what STREAM reports), the median and the spread. After the last
//! repetition every element of the three arrays is checked against a scalar replay of
//! the same sequence, so a kernel that computed the wrong thing (or was optimised away)
//! fails the run instead of reporting a number.
//!
//! [`copy_ceiling`] is the single-thread copy rate in one call (about a second), for
//! reporting `mmap`/`pmem` results as a fraction of it.
//!
//! [`shape`] measures ceilings of the same shape as a job instead (`--shape`): a memcpy of
//! `bs`-byte pieces of a mapped region into one buffer, and non-temporal stores over them.

pub mod shape;

use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The scalar of scale and triad (STREAM's).
const SCALAR: f64 = 3.0;

/// Array size used when the caches cannot be read from sysfs.
pub const FALLBACK_ARRAY_BYTES: u64 = 256 << 20;

/// The default number of timed repetitions (STREAM's `NTIMES` is 10).
pub const DEFAULT_REPS: u32 = 10;

/// Most timed repetitions: the values grow 15× per repetition, and the check needs them
/// finite.
pub const MAX_REPS: u32 = 100;

/// Smallest slice of one array one thread may get.
pub const MIN_BYTES_PER_THREAD: u64 = 4096;

/// Why a bandwidth run cannot start or did not validate.
#[derive(Debug, thiserror::Error)]
pub enum MembwError {
    /// A bad `--threads` list.
    #[error("--threads {0}")]
    Threads(String),
    /// A bad `--size`.
    #[error("--size {0}")]
    Size(String),
    /// A bad `--shape`, or one this CPU cannot run.
    #[error("--shape {0}")]
    Shape(String),
    /// A bad `--bs`.
    #[error("--bs {0}")]
    Bs(String),
    /// A `--file` that cannot be mapped.
    #[error("--file {0}")]
    File(String),
    /// A bad `--runtime` (the same-duration mean of `--shape`).
    #[error("--runtime {0}")]
    Runtime(String),
    /// A bad `--ramp` (run before the same-duration mean measures).
    #[error("--ramp {0}")]
    Ramp(String),
    /// A bad `--reps`.
    #[error("--reps {0}: must be 1 to {MAX_REPS}")]
    Reps(u32),
    /// A kernel computed values other than the scalar reference.
    #[error("{0}")]
    Validation(String),
}

/// One of the measured kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    /// `c = a`.
    Copy,
    /// `b = s·c`.
    Scale,
    /// `c = a + b`.
    Add,
    /// `a = b + s·c`.
    Triad,
    /// `c.copy_from_slice(b)`: the C library's `memcpy`.
    Memcpy,
    /// `b = a` through non-temporal stores, then `sfence`.
    NtCopy,
}

impl Kernel {
    /// Every kernel, in the order one repetition runs them.
    pub const ALL: [Kernel; 6] =
        [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad, Kernel::Memcpy, Kernel::NtCopy];

    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "copy",
            Kernel::Scale => "scale",
            Kernel::Add => "add",
            Kernel::Triad => "triad",
            Kernel::Memcpy => "memcpy",
            Kernel::NtCopy => "nt_copy",
        }
    }

    /// What it computes.
    pub fn what(self) -> &'static str {
        match self {
            Kernel::Copy => "c = a",
            Kernel::Scale => "b = s*c",
            Kernel::Add => "c = a + b",
            Kernel::Triad => "a = b + s*c",
            Kernel::Memcpy => "memcpy(c, b)",
            Kernel::NtCopy => "b = a, non-temporal stores",
        }
    }

    /// Arrays counted (STREAM's rule: each array named once, read or written).
    pub fn arrays(self) -> u64 {
        match self {
            Kernel::Copy | Kernel::Scale | Kernel::Memcpy | Kernel::NtCopy => 2,
            Kernel::Add | Kernel::Triad => 3,
        }
    }

    /// Bytes one pass over `elems` elements counts.
    pub fn bytes(self, elems: u64) -> u64 {
        self.arrays() * 8 * elems
    }
}

// ---------------------------------------------------------------------------------------
// Kernels. Never inlined, so each is one loop the compiler vectorises on its own, and
// every call's inputs and outputs pass through black_box at the call site.

/// Element by element, as STREAM writes it. A plain `*c = *a` loop is what LLVM turns
/// into a `memcpy` call (measured on its own below), so each element's bits pass through
/// an XOR with a zero the compiler cannot see: the same value, one vector XOR per load
/// and store, and the loop stays a loop of loads and stores.
#[inline(never)]
fn k_copy(c: &mut [f64], a: &[f64], zero: u64) {
    for (c, a) in c.iter_mut().zip(a) {
        *c = f64::from_bits(a.to_bits() ^ zero);
    }
}

#[inline(never)]
fn k_scale(b: &mut [f64], c: &[f64], s: f64) {
    for (b, c) in b.iter_mut().zip(c) {
        *b = s * *c;
    }
}

#[inline(never)]
fn k_add(c: &mut [f64], a: &[f64], b: &[f64]) {
    for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
        *c = *a + *b;
    }
}

#[inline(never)]
fn k_triad(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = *b + s * *c;
    }
}

#[inline(never)]
fn k_memcpy(dst: &mut [f64], src: &[f64]) {
    dst.copy_from_slice(src);
}

/// The non-temporal store instructions this CPU has, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NtMethod {
    /// AVX `vmovntdq` of 32 bytes (`_mm256_stream_si256`).
    Avx,
    /// SSE2 `movntdq` of 16 bytes (`_mm_stream_si128`).
    Sse2,
}

impl NtMethod {
    /// What the CPU offers, by a runtime CPUID check; `None` where there is nothing.
    pub fn detect() -> Option<NtMethod> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx") {
                return Some(NtMethod::Avx);
            }
            if std::arch::is_x86_feature_detected!("sse2") {
                return Some(NtMethod::Sse2);
            }
        }
        None
    }

    /// Its description for the report.
    pub fn describe(self) -> &'static str {
        match self {
            NtMethod::Avx => "AVX vmovntdq, 32 B per store (_mm256_stream_si256), then sfence",
            NtMethod::Sse2 => "SSE2 movntdq, 16 B per store (_mm_stream_si128), then sfence",
        }
    }

    fn lanes(self) -> usize {
        match self {
            NtMethod::Avx => 4,
            NtMethod::Sse2 => 2,
        }
    }
}

/// What the report says when there is no non-temporal copy.
pub const NT_UNAVAILABLE: &str = "not measured: this CPU offers no non-temporal store (needs x86-64 SSE2 or AVX)";

#[cfg(target_arch = "x86_64")]
mod nt {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_loadu_si256, _mm256_stream_si256, _mm_loadu_si128, _mm_sfence, _mm_stream_si128,
    };

    /// Copies `src` into `dst` with 32-byte non-temporal stores, then fences them.
    ///
    /// # Safety
    /// The CPU must have AVX; `dst` must be 32-byte aligned; both slices the same length,
    /// a multiple of 4.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn copy_avx(dst: &mut [f64], src: &[f64]) {
        debug_assert!(
            dst.len() == src.len() && dst.len() % 4 == 0 && (dst.is_empty() || dst.as_ptr() as usize % 32 == 0)
        );
        for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
            // SAFETY: `s` and `d` are 4 f64 = 32 bytes each, inside their slices; the load
            // is unaligned, the store's 32-byte alignment is the caller's promise (dst is
            // aligned and every chunk is 32 bytes further); AVX is the caller's promise.
            unsafe {
                _mm256_stream_si256(d.as_mut_ptr().cast::<__m256i>(), _mm256_loadu_si256(s.as_ptr().cast::<__m256i>()))
            };
        }
        // sfence orders the streaming stores above before any later store, so the data is
        // in memory when the caller reads it. (No operands; a safe call where SSE is
        // enabled, which this function's target features imply.)
        _mm_sfence();
    }

    /// Copies `src` into `dst` with 16-byte non-temporal stores, then fences them.
    ///
    /// # Safety
    /// The CPU must have SSE2; `dst` must be 16-byte aligned; both slices the same
    /// length, a multiple of 2.
    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn copy_sse2(dst: &mut [f64], src: &[f64]) {
        debug_assert!(
            dst.len() == src.len() && dst.len() % 2 == 0 && (dst.is_empty() || dst.as_ptr() as usize % 16 == 0)
        );
        for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
            // SAFETY: 16 bytes each, inside their slices; unaligned load; the store's
            // alignment and SSE2 are the caller's promise.
            unsafe {
                _mm_stream_si128(d.as_mut_ptr().cast::<__m128i>(), _mm_loadu_si128(s.as_ptr().cast::<__m128i>()))
            };
        }
        // As in copy_avx.
        _mm_sfence();
    }
}

/// `c = a` through non-temporal stores: ordinary copies for the unaligned head and the
/// tail, streaming stores for the aligned middle.
#[inline(never)]
fn k_nt_copy(c: &mut [f64], a: &[f64], method: NtMethod) {
    assert_eq!(c.len(), a.len());
    let lanes = method.lanes();
    let head = c.as_ptr().align_offset(lanes * 8).min(c.len());
    let (c_head, c_rest) = c.split_at_mut(head);
    let (a_head, a_rest) = a.split_at(head);
    c_head.copy_from_slice(a_head);
    let body = c_rest.len() / lanes * lanes;
    let (c_body, c_tail) = c_rest.split_at_mut(body);
    let (a_body, a_tail) = a_rest.split_at(body);
    #[cfg(target_arch = "x86_64")]
    match method {
        // SAFETY: NtMethod values come from detect() (CPUID) or, in tests, are made only
        // after it reported them; c_body starts `lanes * 8`-aligned (align_offset) and
        // is a whole number of lanes long, as long as a_body.
        NtMethod::Avx => unsafe { nt::copy_avx(c_body, a_body) },
        // SAFETY: as above, for SSE2 and 16 bytes.
        NtMethod::Sse2 => unsafe { nt::copy_sse2(c_body, a_body) },
    }
    #[cfg(not(target_arch = "x86_64"))]
    c_body.copy_from_slice(a_body);
    c_tail.copy_from_slice(a_tail);
}

/// Three arrays of one thread, 64-byte aligned (over-allocated and offset, no unsafe).
struct Arrays {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
    off: [usize; 3],
    n: usize,
}

fn aligned(n: usize) -> (Vec<f64>, usize) {
    let v = vec![0.0f64; n + 8];
    let off = v.as_ptr().align_offset(64).min(8);
    (v, off)
}

/// The initial value of `a[j]`: 16 different values, so a kernel that reads or writes
/// the wrong element gives a wrong result.
fn init_a(j: usize) -> f64 {
    1.0 + (j % 16) as f64 / 8.0
}

const INIT_B: f64 = 2.0;
const INIT_C: f64 = 0.0;

impl Arrays {
    /// Allocated and first touched by the calling thread.
    fn new(n: usize) -> Arrays {
        let (mut a, oa) = aligned(n);
        let (mut b, ob) = aligned(n);
        let (mut c, oc) = aligned(n);
        for (j, x) in a[oa..oa + n].iter_mut().enumerate() {
            *x = init_a(j);
        }
        b[ob..ob + n].fill(INIT_B);
        c[oc..oc + n].fill(INIT_C);
        Arrays { a, b, c, off: [oa, ob, oc], n }
    }

    fn parts(&mut self) -> (&mut [f64], &mut [f64], &mut [f64]) {
        let [oa, ob, oc] = self.off;
        let n = self.n;
        (&mut self.a[oa..oa + n], &mut self.b[ob..ob + n], &mut self.c[oc..oc + n])
    }

    /// Runs one kernel; false when it is not available (nt_copy without an NtMethod).
    fn run(&mut self, k: Kernel, nt: Option<NtMethod>) -> bool {
        let s = black_box(SCALAR);
        let (a, b, c) = self.parts();
        match k {
            Kernel::Copy => k_copy(black_box(c), black_box(a), black_box(0)),
            Kernel::Scale => k_scale(black_box(b), black_box(c), s),
            Kernel::Add => k_add(black_box(c), black_box(a), black_box(b)),
            Kernel::Triad => k_triad(black_box(a), black_box(b), black_box(c), s),
            Kernel::Memcpy => k_memcpy(black_box(c), black_box(b)),
            Kernel::NtCopy => match nt {
                Some(m) => k_nt_copy(black_box(b), black_box(a), m),
                // Not measured, but done with ordinary stores so the sequence (and the check)
                // stays the same.
                None => {
                    k_memcpy(b, a);
                    return false;
                }
            },
        }
        let (a, b, c) = self.parts();
        black_box((a, b, c));
        true
    }
}

/// The values `(a, b, c)` that one element starting at `(a0, INIT_B, INIT_C)` holds after
/// `passes` passes of the kernel sequence: the scalar reference.
pub fn reference(a0: f64, passes: u32) -> (f64, f64, f64) {
    let (mut a, mut b, mut c) = (a0, INIT_B, INIT_C);
    for _ in 0..passes {
        c = a;
        b = SCALAR * c;
        c = a + b;
        a = b + SCALAR * c;
        // memcpy: c = b; nt_copy: b = a.
        c = b;
        b = a;
    }
    (a, b, c)
}

/// The sums of the three arrays after a run and whether every element matched the
/// scalar reference.
#[derive(Clone, Debug, Serialize)]
pub struct Checksums {
    /// Sum of `a`.
    pub a: f64,
    /// Sum of `b`.
    pub b: f64,
    /// Sum of `c`.
    pub c: f64,
    /// The same sums from the scalar reference.
    pub expected: [f64; 3],
}

fn close(x: f64, e: f64) -> bool {
    x.is_finite() && (x - e).abs() <= 1e-12 * e.abs().max(1.0)
}

impl Arrays {
    /// Checks every element against the reference after `passes` passes; the sums.
    fn check(&mut self, passes: u32) -> Result<Checksums, String> {
        let refs: Vec<(f64, f64, f64)> = (0..16).map(|j| reference(init_a(j), passes)).collect();
        let (a, b, c) = self.parts();
        let mut sums = Checksums { a: 0.0, b: 0.0, c: 0.0, expected: [0.0; 3] };
        for (j, ((&x, &y), &z)) in a.iter().zip(b.iter()).zip(c.iter()).enumerate() {
            let (ea, eb, ec) = refs[j % 16];
            for (name, got, want) in [("a", x, ea), ("b", y, eb), ("c", z, ec)] {
                if !close(got, want) {
                    return Err(format!(
                        "the kernels computed a wrong value: {name}[{j}] = {got} after {passes} passes, the scalar reference says {want}"
                    ));
                }
            }
            sums.a += x;
            sums.b += y;
            sums.c += z;
            sums.expected[0] += ea;
            sums.expected[1] += eb;
            sums.expected[2] += ec;
        }
        Ok(sums)
    }
}

// ---------------------------------------------------------------------------------------
// Caches and sizes.

/// One cache (deduplicated over the CPUs that share it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// 1, 2, 3, …
    pub level: u32,
    /// `Data`, `Instruction`, `Unified`.
    pub kind: String,
    /// Bytes.
    pub bytes: u64,
    /// How many such caches (distinct `shared_cpu_list`s) the CPUs have.
    pub count: u32,
}

/// The caches of every CPU under `root` (normally `/sys/devices/system/cpu`), each cache
/// counted once however many CPUs share it; empty when sysfs has none.
pub fn read_caches(root: &Path) -> Vec<Cache> {
    let mut seen: Vec<(u32, String, u64, String)> = Vec::new();
    let Ok(cpus) = std::fs::read_dir(root) else { return Vec::new() };
    let mut cpu_dirs: Vec<_> = cpus
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.strip_prefix("cpu").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect();
    cpu_dirs.sort();
    for cpu in cpu_dirs {
        let Ok(idx) = std::fs::read_dir(cpu.join("cache")) else { continue };
        for e in idx.flatten() {
            if !e.file_name().to_string_lossy().starts_with("index") {
                continue;
            }
            let read = |f: &str| std::fs::read_to_string(e.path().join(f)).map(|s| s.trim().to_string()).ok();
            let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else { continue };
            let (Ok(level), Some(bytes)) = (level.parse::<u32>(), parse_sysfs_size(&size)) else { continue };
            // Without shared_cpu_list, a cache is taken as this CPU's own.
            let shared = read("shared_cpu_list").unwrap_or_else(|| cpu.display().to_string());
            let key = (level, kind, bytes, shared);
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
    }
    let mut out: Vec<Cache> = Vec::new();
    for (level, kind, bytes, _) in seen {
        match out.iter_mut().find(|c| c.level == level && c.kind == kind && c.bytes == bytes) {
            Some(c) => c.count += 1,
            None => out.push(Cache { level, kind, bytes, count: 1 }),
        }
    }
    out.sort_by(|x, y| (x.level, &x.kind).cmp(&(y.level, &y.kind)));
    out
}

/// sysfs cache sizes: `32K`, `1024K`, `32M`, `512`.
fn parse_sysfs_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Bytes of all caches together.
pub fn cache_total(caches: &[Cache]) -> u64 {
    caches.iter().map(|c| c.bytes * c.count as u64).sum()
}

/// STREAM's rule: each array at least 4 × all caches together, rounded up to a MiB;
/// [`FALLBACK_ARRAY_BYTES`] without cache sizes.
pub fn default_array_bytes(caches: &[Cache]) -> u64 {
    match cache_total(caches) {
        0 => FALLBACK_ARRAY_BYTES,
        t => (4 * t).div_ceil(1 << 20) << 20,
    }
}

/// `32KiB`, `136MiB` when exact, else `34.1MiB`.
fn fmt_bytes(b: u64) -> String {
    let exact = ioswitch::units::fmt_size(b);
    if b >= 1 << 20 && b % (1 << 20) != 0 {
        format!("{:.1}MiB", b as f64 / (1u64 << 20) as f64)
    } else {
        exact
    }
}

fn describe_caches(caches: &[Cache]) -> String {
    if caches.is_empty() {
        return "none found in /sys/devices/system/cpu/cpu*/cache".into();
    }
    let short = |k: &str| match k {
        "Data" => "d",
        "Instruction" => "i",
        _ => "",
    };
    let list: Vec<String> =
        caches.iter().map(|c| format!("L{}{} {} x{}", c.level, short(&c.kind), fmt_bytes(c.bytes), c.count)).collect();
    format!("{} = {} in all", list.join(", "), fmt_bytes(cache_total(caches)))
}

/// Parses a comma list: each part, trimmed, by `one`; a value that repeats is kept once,
/// in the order first given.
pub(crate) fn parse_list<T: PartialEq>(
    s: &str,
    mut one: impl FnMut(&str) -> Result<T, MembwError>,
) -> Result<Vec<T>, MembwError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let v = one(part.trim())?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

/// Parses a size of one byte or more (`1g`, `512k`): `err` makes the option's error, and
/// `zero` says what a size of 0 would be.
pub(crate) fn parse_nonzero_size(s: &str, zero: &str, err: fn(String) -> MembwError) -> Result<u64, MembwError> {
    let b = ioswitch::units::parse_size(s).map_err(|e| err(format!("{s:?}: {e}")))?;
    if b == 0 {
        return Err(err(format!("{s:?}: {zero}")));
    }
    Ok(b)
}

/// Parses `--threads`: a comma list of thread counts, each at least 1.
pub fn parse_threads(s: &str) -> Result<Vec<usize>, MembwError> {
    parse_list(s, |p| {
        let n: usize = p.parse().map_err(|_| {
            MembwError::Threads(format!("{s:?}: {p:?} is not a number of threads (a comma list such as 1,2,4)"))
        })?;
        if n == 0 {
            return Err(MembwError::Threads(format!("{s:?}: 0 threads; each count must be 1 or more")));
        }
        if n > 1024 {
            return Err(MembwError::Threads(format!("{s:?}: {n} threads is more than 1024")));
        }
        Ok(n)
    })
}

/// Parses `--size` (bytes of each array, all threads' slices together: `1g`, `512m`).
pub fn parse_array_size(s: &str) -> Result<u64, MembwError> {
    parse_nonzero_size(s, "an array of 0 bytes", MembwError::Size)
}

/// CPUs this process may run on (sched_getaffinity), in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed, which the call fills.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set; i < CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|&i| unsafe { libc::CPU_ISSET(i, &set) }).collect()
}

/// Pins the calling thread to `cpu`; false when the kernel refused.
fn pin_thread(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: CPU_SET writes inside the set; cpu < CPU_SETSIZE. sched_setaffinity(0, …)
    // reads `set` and changes only the calling thread.
    unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

// ---------------------------------------------------------------------------------------
// The run.

/// What to measure.
#[derive(Clone, Debug)]
pub struct MembwOpts {
    /// Thread counts, one run each.
    pub threads: Vec<usize>,
    /// Bytes of each array (all threads together); `None`: STREAM's rule from the caches.
    pub array_bytes: Option<u64>,
    /// Timed repetitions (after one warm-up).
    pub reps: u32,
}

/// One kernel's figures in one run, rates in bytes per second (STREAM-counted).
#[derive(Clone, Debug, Serialize)]
pub struct KernelStats {
    /// The kernel.
    pub kernel: Kernel,
    /// What it computes.
    pub computes: &'static str,
    /// Arrays counted per element (× 8 bytes).
    pub arrays_counted: u64,
    /// Bytes counted per repetition, all threads together.
    pub bytes_per_rep: u64,
    /// The rates (best: what STREAM reports).
    #[serde(flatten)]
    pub rates: Rates,
}

/// The rates of one measurement, bytes per second, from its timed repetitions.
#[derive(Clone, Debug, Serialize)]
pub struct Rates {
    /// Best rate (the shortest repetition).
    pub best_bps: f64,
    /// Median rate.
    pub median_bps: f64,
    /// Slowest repetition's rate.
    pub min_bps: f64,
    /// Fastest repetition's rate (= best).
    pub max_bps: f64,
    /// The shortest repetition, seconds.
    pub best_s: f64,
}

impl Rates {
    /// The rates of `bytes` moved in each of the repetitions that took `sorted` seconds
    /// (sorted, shortest first; one at least).
    pub(crate) fn of(sorted: &[f64], bytes: u64) -> Rates {
        let rate = |t: f64| bytes as f64 / t;
        Rates {
            best_bps: rate(sorted[0]),
            median_bps: rate(median(sorted)),
            min_bps: rate(sorted[sorted.len() - 1]),
            max_bps: rate(sorted[0]),
            best_s: sorted[0],
        }
    }

    /// The text tables' columns: best and median in GB/s (10^9 B/s), the spread
    /// (min..max) and the best time.
    pub(crate) fn columns(&self) -> (f64, f64, String, String) {
        let gb = |x: f64| x / 1e9;
        (
            gb(self.best_bps),
            gb(self.median_bps),
            format!("{:.2}..{:.2}", gb(self.min_bps), gb(self.max_bps)),
            format!("{:.2} ms", self.best_s * 1e3),
        )
    }
}

/// One thread count's run.
#[derive(Clone, Debug, Serialize)]
pub struct MembwRun {
    /// Threads.
    pub threads: usize,
    /// The CPU each thread was pinned to; empty when not pinned.
    pub pinned_cpus: Vec<usize>,
    /// How the threads were placed, in words.
    pub placement: String,
    /// Elements of each array per thread.
    pub elems_per_thread: u64,
    /// Bytes of each array, all threads together.
    pub array_bytes: u64,
    /// Per kernel (nt_copy absent when unavailable).
    pub kernels: Vec<KernelStats>,
    /// Sums of the arrays after the run; every element matched the reference.
    pub checksums: Checksums,
}

/// The whole measurement.
#[derive(Clone, Debug, Serialize)]
pub struct MembwReport {
    /// Caches read from sysfs.
    pub caches: Vec<Cache>,
    /// Their total, bytes.
    pub cache_total_bytes: u64,
    /// Where the array size came from, in words.
    pub size_rule: String,
    /// Timed repetitions per kernel (one warm-up before them is not counted).
    pub reps: u32,
    /// How nt_copy stores, or why it is not measured.
    pub nt_copy: String,
    /// One per thread count.
    pub runs: Vec<MembwRun>,
}

impl MembwReport {
    /// The report as JSON (rates in bytes per second).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The report as text tables, rates in GB/s (10^9 bytes per second, as STREAM's MB/s
    /// are 10^6).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "caches: {}", describe_caches(&self.caches));
        let _ = writeln!(s, "array size: {}", self.size_rule);
        let _ = writeln!(s, "nt_copy: {}", self.nt_copy);
        let _ = writeln!(
            s,
            "rates: GB/s (10^9 B/s) counted as STREAM counts them; best / median / spread (min..max) of {} repetitions after 1 warm-up",
            self.reps
        );
        for r in &self.runs {
            let _ = writeln!(
                s,
                "\n{} thread{}, {}; each array {} ({} per thread)",
                r.threads,
                if r.threads == 1 { "" } else { "s" },
                r.placement,
                fmt_bytes(r.array_bytes),
                fmt_bytes(r.elems_per_thread * 8)
            );
            let _ = writeln!(
                s,
                "{:<8} {:<27} {:>6} {:>9} {:>9} {:>15} {:>10}",
                "kernel", "computes", "counts", "best", "median", "spread", "best time"
            );
            for k in &r.kernels {
                let (best, median, spread, time) = k.rates.columns();
                let _ = writeln!(
                    s,
                    "{:<8} {:<27} {:>6} {:>9.2} {:>9.2} {:>15} {:>10}",
                    k.kernel.name(),
                    k.computes,
                    format!("{}x8B", k.arrays_counted),
                    best,
                    median,
                    spread,
                    time
                );
            }
            let c = &r.checksums;
            let _ = writeln!(
                s,
                "checked: every element matches the scalar reference; sums a={:.6e} b={:.6e} c={:.6e}",
                c.a, c.b, c.c
            );
        }
        s
    }
}

/// Each thread's start and end of every (repetition, kernel), warm-up first.
type Times = Vec<[(Instant, Instant); 6]>;

/// What [`run_threads`] brings back.
struct Threads {
    /// Per thread.
    times: Vec<Times>,
    /// The CPU each thread was pinned to, if it was.
    pins: Vec<Option<usize>>,
    /// All threads' sums, checked.
    sums: Checksums,
}

/// Runs `threads` threads over slices of `elems` elements: the times, the pinning
/// actually done and the checked sums.
fn run_threads(
    threads: usize,
    elems: usize,
    reps: u32,
    nt: Option<NtMethod>,
    cpus: &[usize],
) -> Result<Threads, MembwError> {
    let barrier = Barrier::new(threads);
    let pin = cpus.len() >= threads;
    let passes = reps + 1;
    let results: Vec<(Times, Option<usize>, Result<Checksums, String>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                let cpu = if pin { Some(cpus[t]) } else { None };
                sc.spawn(move || {
                    let pinned = cpu.filter(|&c| pin_thread(c));
                    let mut arr = Arrays::new(elems);
                    let mut times: Times = Vec::with_capacity(passes as usize);
                    for _ in 0..passes {
                        let mut row = [(Instant::now(), Instant::now()); 6];
                        for (i, &k) in Kernel::ALL.iter().enumerate() {
                            barrier.wait();
                            let t0 = Instant::now();
                            arr.run(k, nt);
                            row[i] = (t0, Instant::now());
                        }
                        times.push(row);
                    }
                    let sums = arr.check(passes);
                    (times, pinned, sums)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a membw thread panicked")).collect()
    });
    let mut total = Checksums { a: 0.0, b: 0.0, c: 0.0, expected: [0.0; 3] };
    let mut all_times = Vec::new();
    let mut pins = Vec::new();
    for (t, (times, pinned, sums)) in results.into_iter().enumerate() {
        let s = sums.map_err(|e| MembwError::Validation(format!("thread {t}: {e}")))?;
        total.a += s.a;
        total.b += s.b;
        total.c += s.c;
        for i in 0..3 {
            total.expected[i] += s.expected[i];
        }
        all_times.push(times);
        pins.push(pinned);
    }
    for (name, got, want) in
        [("a", total.a, total.expected[0]), ("b", total.b, total.expected[1]), ("c", total.c, total.expected[2])]
    {
        if !close(got, want) {
            return Err(MembwError::Validation(format!("checksum of {name}: {got}, the scalar reference says {want}")));
        }
    }
    Ok(Threads { times: all_times, pins, sums: total })
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Rates of one kernel over the timed repetitions: the spread of every thread's
/// (first start, last end) window.
fn kernel_stats(k: Kernel, i: usize, times: &[Times], bytes: u64) -> KernelStats {
    let reps = times[0].len();
    let mut secs: Vec<f64> = (1..reps)
        .map(|r| {
            let start = times.iter().map(|t| t[r][i].0).min().expect("one thread at least");
            let end = times.iter().map(|t| t[r][i].1).max().expect("one thread at least");
            end.duration_since(start).as_secs_f64().max(1e-9)
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    KernelStats {
        kernel: k,
        computes: k.what(),
        arrays_counted: k.arrays(),
        bytes_per_rep: bytes,
        rates: Rates::of(&secs, bytes),
    }
}

/// Measures every kernel at every thread count; `say` hears progress.
pub fn measure(opts: &MembwOpts, say: &mut dyn FnMut(&str)) -> Result<MembwReport, MembwError> {
    measure_with(opts, NtMethod::detect(), say)
}

fn measure_with(opts: &MembwOpts, nt: Option<NtMethod>, say: &mut dyn FnMut(&str)) -> Result<MembwReport, MembwError> {
    if opts.reps == 0 || opts.reps > MAX_REPS {
        return Err(MembwError::Reps(opts.reps));
    }
    if opts.threads.is_empty() {
        return Err(MembwError::Threads("\"\": no thread count".into()));
    }
    if let Some(&0) = opts.threads.iter().find(|&&t| t == 0) {
        return Err(MembwError::Threads("0: each count must be 1 or more".into()));
    }
    let caches = read_caches(Path::new("/sys/devices/system/cpu"));
    let total = cache_total(&caches);
    let (array_bytes, size_rule) = match opts.array_bytes {
        Some(b) => (b, format!("{} per array (--size)", fmt_bytes(b))),
        None if total == 0 => (
            FALLBACK_ARRAY_BYTES,
            format!(
                "{} per array (no cache sizes in sysfs; STREAM's rule cannot be applied)",
                fmt_bytes(FALLBACK_ARRAY_BYTES)
            ),
        ),
        None => {
            let b = default_array_bytes(&caches);
            (
                b,
                format!(
                    "{} per array = 4 x {} of caches, rounded up to a MiB (STREAM's rule)",
                    fmt_bytes(b),
                    fmt_bytes(total)
                ),
            )
        }
    };
    let max_threads = *opts.threads.iter().max().expect("not empty");
    if array_bytes < MIN_BYTES_PER_THREAD * max_threads as u64 {
        return Err(MembwError::Size(format!(
            "{}: too small for {max_threads} thread{} (at least {} per thread)",
            fmt_bytes(array_bytes),
            if max_threads == 1 { "" } else { "s" },
            fmt_bytes(MIN_BYTES_PER_THREAD)
        )));
    }
    if let Some(avail) = mem_available() {
        if array_bytes.saturating_mul(3) > avail / 10 * 9 {
            return Err(MembwError::Size(format!(
                "{}: three arrays need {}, but only {} of memory is available",
                fmt_bytes(array_bytes),
                fmt_bytes(array_bytes.saturating_mul(3)),
                fmt_bytes(avail)
            )));
        }
    }
    let cpus = allowed_cpus();
    let mut runs = Vec::new();
    for &threads in &opts.threads {
        let elems = (array_bytes / 8 / threads as u64) as usize;
        say(&format!(
            "membw: {threads} thread(s), 3 arrays of {} each, {} repetitions + 1 warm-up",
            fmt_bytes(elems as u64 * 8 * threads as u64),
            opts.reps
        ));
        let Threads { times, pins, sums: checksums } = run_threads(threads, elems, opts.reps, nt, &cpus)?;
        let pinned: Vec<usize> = pins.iter().flatten().copied().collect();
        let placement = if pinned.len() == threads {
            let list: Vec<String> = pinned.iter().map(|c| c.to_string()).collect();
            format!("pinned to CPU{} {}", if threads == 1 { "" } else { "s" }, list.join(","))
        } else if cpus.len() < threads {
            format!("not pinned: {threads} threads but {} CPUs allowed (sched_getaffinity)", cpus.len())
        } else {
            format!("not pinned: sched_setaffinity refused for {} of {threads} threads", threads - pinned.len())
        };
        let kernels = Kernel::ALL
            .iter()
            .enumerate()
            .filter(|(_, &k)| k != Kernel::NtCopy || nt.is_some())
            .map(|(i, &k)| kernel_stats(k, i, &times, k.bytes(elems as u64 * threads as u64)))
            .collect();
        runs.push(MembwRun {
            threads,
            pinned_cpus: if pinned.len() == threads { pinned } else { Vec::new() },
            placement,
            elems_per_thread: elems as u64,
            array_bytes: elems as u64 * 8 * threads as u64,
            kernels,
            checksums,
        });
    }
    Ok(MembwReport {
        cache_total_bytes: total,
        caches,
        size_rule,
        reps: opts.reps,
        nt_copy: nt.map_or(NT_UNAVAILABLE.to_string(), |m| m.describe().to_string()),
        runs,
    })
}

/// The single-thread copy ceiling in bytes per second (STREAM-counted: read + written):
/// the best of `memcpy` over two arrays of `bytes` each, repeated for about a second (at
/// least 3 times), on the calling thread. Panics if the copy came out wrong.
pub fn copy_ceiling(bytes: u64) -> f64 {
    let n = (bytes / 8).max(1) as usize;
    let (mut a, oa) = aligned(n);
    let (mut c, oc) = aligned(n);
    for (j, x) in a[oa..oa + n].iter_mut().enumerate() {
        *x = init_a(j);
    }
    let (a, c) = (&a[oa..oa + n], &mut c[oc..oc + n]);
    k_memcpy(black_box(&mut *c), black_box(a));
    let t_end = Instant::now() + Duration::from_secs(1);
    let mut best = f64::INFINITY;
    let mut reps = 0;
    while reps < 3 || (Instant::now() < t_end && reps < 1000) {
        let t0 = Instant::now();
        k_memcpy(black_box(&mut *c), black_box(a));
        best = best.min(t0.elapsed().as_secs_f64().max(1e-9));
        reps += 1;
    }
    let c = black_box(c);
    assert!(c.iter().enumerate().all(|(j, &x)| x == init_a(j)), "copy_ceiling: memcpy produced a wrong copy");
    Kernel::Memcpy.bytes(n as u64) as f64 / best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(n: usize) -> Arrays {
        Arrays::new(n)
    }

    #[test]
    fn each_kernel_computes_what_the_scalar_reference_says() {
        // Odd lengths, so the nt_copy head and tail paths run too.
        for n in [1, 7, 33, 1001] {
            let mut arr = small(n);
            let mut a0: Vec<f64> = (0..n).map(init_a).collect();
            let mut b0 = vec![INIT_B; n];
            let mut c0 = vec![INIT_C; n];
            for k in Kernel::ALL {
                assert!(arr.run(k, NtMethod::detect()) || k == Kernel::NtCopy);
                for j in 0..n {
                    match k {
                        Kernel::Copy => c0[j] = a0[j],
                        Kernel::Memcpy => c0[j] = b0[j],
                        Kernel::NtCopy => b0[j] = a0[j],
                        Kernel::Scale => b0[j] = SCALAR * c0[j],
                        Kernel::Add => c0[j] = a0[j] + b0[j],
                        Kernel::Triad => a0[j] = b0[j] + SCALAR * c0[j],
                    }
                }
                let (a, b, c) = arr.parts();
                assert_eq!((&a[..], &b[..], &c[..]), (&a0[..], &b0[..], &c0[..]), "{} on {n} elements", k.name());
            }
            let s = arr.check(1).expect("one pass matches the reference");
            assert!(close(s.a, s.expected[0]) && close(s.b, s.expected[1]) && close(s.c, s.expected[2]), "{s:?}");
        }
    }

    #[test]
    fn every_nt_method_the_cpu_has_copies_exactly() {
        let methods: Vec<NtMethod> = match NtMethod::detect() {
            Some(NtMethod::Avx) => vec![NtMethod::Avx, NtMethod::Sse2],
            Some(NtMethod::Sse2) => vec![NtMethod::Sse2],
            None => vec![],
        };
        let src: Vec<f64> = (0..1000).map(|j| j as f64 * 0.5 - 7.0).collect();
        for m in methods {
            // Every alignment of the destination start and several lengths.
            for start in 0..4 {
                for len in [0, 1, 2, 3, 4, 5, 63, 64, 65, 997] {
                    let mut dst = vec![0.0; 1004];
                    k_nt_copy(&mut dst[start..start + len], &src[..len], m);
                    assert_eq!(&dst[start..start + len], &src[..len], "{m:?} start {start} len {len}");
                    assert!(dst[..start].iter().chain(&dst[start + len..]).all(|&x| x == 0.0), "{m:?} wrote outside");
                }
            }
        }
    }

    #[test]
    fn a_wrong_kernel_fails_the_check_loudly() {
        let mut arr = small(64);
        for k in Kernel::ALL {
            arr.run(k, NtMethod::detect());
        }
        arr.check(1).expect("right before the damage");
        arr.parts().1[17] += 1.0;
        let e = arr.check(1).expect_err("a damaged b fails");
        assert!(e.contains("b[17]"), "{e}");
        // Too few passes is wrong too.
        let mut arr = small(64);
        for k in Kernel::ALL {
            arr.run(k, NtMethod::detect());
        }
        assert!(arr.check(2).is_err());
    }

    #[test]
    fn a_kernel_that_does_nothing_is_caught() {
        for skip in Kernel::ALL {
            for passes in [1, 3] {
                let mut arr = small(40);
                for _ in 0..passes {
                    for k in Kernel::ALL.into_iter().filter(|&k| k != skip) {
                        arr.run(k, NtMethod::detect());
                    }
                }
                assert!(arr.check(passes).is_err(), "{} skipped in {passes} passes went unseen", skip.name());
            }
        }
    }

    #[test]
    fn bytes_are_counted_as_stream_counts_them() {
        let n = 1000;
        assert_eq!(Kernel::Copy.bytes(n), 2 * 8 * n);
        assert_eq!(Kernel::Scale.bytes(n), 2 * 8 * n);
        assert_eq!(Kernel::Add.bytes(n), 3 * 8 * n);
        assert_eq!(Kernel::Triad.bytes(n), 3 * 8 * n);
        assert_eq!(Kernel::Memcpy.bytes(n), 2 * 8 * n, "memcpy: bytes read + bytes written");
        assert_eq!(Kernel::NtCopy.bytes(n), 2 * 8 * n, "nt copy: bytes read + bytes written");
        // A run's bytes per repetition cover all threads' slices.
        let opts = MembwOpts { threads: vec![2], array_bytes: Some(64 << 10), reps: 2 };
        let r = measure_with(&opts, None, &mut |_| {}).unwrap();
        let run = &r.runs[0];
        assert_eq!(run.elems_per_thread, 4096);
        for k in &run.kernels {
            assert_eq!(k.bytes_per_rep, k.kernel.arrays() * 8 * 8192, "{:?}", k.kernel);
            assert!(
                k.rates.best_bps > 0.0
                    && k.rates.min_bps <= k.rates.median_bps
                    && k.rates.median_bps <= k.rates.best_bps,
                "{k:?}"
            );
        }
        assert!(!run.kernels.iter().any(|k| k.kernel == Kernel::NtCopy), "nt_copy is left out when unavailable");
        assert_eq!(r.nt_copy, NT_UNAVAILABLE);
    }

    #[test]
    fn a_small_run_reports_every_kernel_and_serialises() {
        let opts = MembwOpts { threads: vec![1, 2], array_bytes: Some(256 << 10), reps: 3 };
        let r = measure(&opts, &mut |_| {}).unwrap();
        assert_eq!(r.runs.len(), 2);
        let want = if NtMethod::detect().is_some() { 6 } else { 5 };
        for run in &r.runs {
            assert_eq!(run.kernels.len(), want);
        }
        let j = r.to_json();
        assert_eq!(j["runs"][1]["threads"], 2);
        assert_eq!(j["runs"][0]["kernels"][3]["kernel"], "triad");
        let t = r.to_text();
        for k in ["copy", "scale", "add", "triad", "memcpy"] {
            assert!(t.lines().any(|l| l.starts_with(k)), "{k}: {t}");
        }
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        assert!(parse_threads("0").unwrap_err().to_string().contains("--threads"));
        assert!(parse_threads("1,x").unwrap_err().to_string().contains("\"x\""));
        assert_eq!(parse_threads("1, 2,2,4").unwrap(), vec![1, 2, 4]);
        assert!(parse_array_size("12q").unwrap_err().to_string().starts_with("--size"));
        assert!(parse_array_size("0").unwrap_err().to_string().starts_with("--size"));
        assert_eq!(parse_array_size("1m").unwrap(), 1 << 20);
        let opts = MembwOpts { threads: vec![1], array_bytes: Some(1 << 20), reps: 0 };
        assert!(measure(&opts, &mut |_| {}).unwrap_err().to_string().starts_with("--reps"));
        let opts = MembwOpts { threads: vec![4], array_bytes: Some(8192), reps: 1 };
        let e = measure(&opts, &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--size") && e.contains("too small for 4 threads ("), "{e}");
        let opts = MembwOpts { threads: vec![1], array_bytes: Some(1), reps: 1 };
        let e = measure(&opts, &mut |_| {}).unwrap_err().to_string();
        assert!(e.starts_with("--size") && e.contains("too small for 1 thread ("), "{e}");
    }

    #[test]
    fn caches_are_read_from_sysfs_each_shared_one_once() {
        let dir = std::env::temp_dir().join(format!("ioswitch-membw-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for cpu in 0..2 {
            for (i, level, kind, size, shared) in [
                (0, "1", "Data", "32K", format!("{cpu}")),
                (1, "1", "Instruction", "32K", format!("{cpu}")),
                (2, "2", "Unified", "1024K", format!("{cpu}")),
                (3, "3", "Unified", "32768K", "0-1".to_string()),
            ] {
                let d = dir.join(format!("cpu{cpu}/cache/index{i}"));
                std::fs::create_dir_all(&d).unwrap();
                for (f, v) in [("level", level), ("type", kind), ("size", size), ("shared_cpu_list", &shared)] {
                    std::fs::write(d.join(f), format!("{v}\n")).unwrap();
                }
            }
        }
        std::fs::create_dir_all(dir.join("cpufreq")).unwrap();
        let c = read_caches(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(c.len(), 4, "{c:?}");
        assert_eq!(c[3], Cache { level: 3, kind: "Unified".into(), bytes: 32 << 20, count: 1 });
        assert_eq!(c[0].count, 2);
        let total = (2 * (32 + 32 + 1024) + 32768) << 10;
        assert_eq!(cache_total(&c), total);
        assert_eq!(default_array_bytes(&c), (4 * total).div_ceil(1 << 20) << 20);
        assert_eq!(default_array_bytes(&[]), FALLBACK_ARRAY_BYTES);
        assert!(
            describe_caches(&c).contains("L3 32MiB x1") && describe_caches(&c).ends_with("34.1MiB in all"),
            "{}",
            describe_caches(&c)
        );
        assert_eq!(parse_sysfs_size("1024K"), Some(1 << 20));
        assert_eq!(parse_sysfs_size("x"), None);
    }

    #[test]
    fn the_reference_follows_the_kernel_sequence() {
        // a0 = 1: c=1, b=3, c=4, a=3+12=15, c=b=3, b=a=15.
        assert_eq!(reference(1.0, 1), (15.0, 15.0, 3.0));
        // c=15, b=45, c=60, a=45+180=225, c=45, b=225.
        assert_eq!(reference(1.0, 2), (225.0, 225.0, 45.0));
    }

    #[test]
    fn copy_ceiling_is_a_positive_rate() {
        assert!(copy_ceiling(64 << 10) > 0.0);
    }
}
