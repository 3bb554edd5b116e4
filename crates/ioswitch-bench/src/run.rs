//! Running job sets: resolving fio job specs into engine jobs, one thread per job
//! instance, stonewall phases, and the live status line.

use crate::engine::{self, Job, JobResult, Mode, Progress, Usage};
use crate::error::{At, BenchError};
use crate::jobfile::{IoEngine, JobSpec, SizeSpec};
use ioswitch::{AsyncIface, Device, Opts, Role};
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

/// A job spec resolved and opened, ready to run `numjobs` instances.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The spec as read.
    pub spec: JobSpec,
    /// The resolved job.
    pub job: Job,
    /// The open device.
    pub dev: Device,
    /// Reporting group.
    pub groupid: u32,
}

/// What one job spec did: one result per instance.
#[derive(Clone, Debug)]
pub struct JobRun {
    /// The spec as read.
    pub spec: JobSpec,
    /// The resolved job.
    pub job: Job,
    /// Reporting group.
    pub groupid: u32,
    /// Run phase: jobs of one phase run together; a `stonewall` starts the next.
    pub phase: u32,
    /// The async or sync interface that carried the I/O (`io_uring`, `psync`, …).
    pub interface: String,
    /// One result per instance (`numjobs`).
    pub results: Vec<JobResult>,
    /// Whole-process CPU over the phase this job ran in (helper threads, io_uring
    /// workers and SQPOLL threads included).
    pub process: Usage,
    /// Wall time of that phase, ns.
    pub phase_ns: u64,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The jobs, in order.
    pub jobs: Vec<JobRun>,
    /// When the run started.
    pub started: SystemTime,
    /// Whole run, ns.
    pub wall_ns: u64,
    /// The single-thread copy ceiling measured in this run, bytes/s counted read + written
    /// ([`crate::membw::copy_ceiling`]); the caller sets it when a job ran on `mmap` or `pmem`, and
    /// the reports then give each `mmap` job's rate as a fraction of it.
    pub copy_ceiling_bps: Option<f64>,
}

impl Report {
    /// Whether any job ran on a mapping (`mmap`, or `pmem`).
    pub fn uses_mmap(&self) -> bool {
        self.jobs.iter().any(|j| is_mapping(&j.interface))
    }
}

/// An xNVMe interface name (`xnvme_async`, `xnvme_sync`) as the ioswitch interface of
/// the same name; `allowed` lists those xNVMe has for the role.
fn xnvme_iface<T: std::str::FromStr>(
    spec: &JobSpec,
    option: &str,
    name: &str,
    allowed: &[&'static str],
) -> Result<T, BenchError> {
    match name.parse().ok().filter(|_| allowed.contains(&name)) {
        Some(i) => Ok(i),
        None => Err(BenchError::XnvmeIface {
            at: At::new(spec, option),
            value: name.to_string(),
            allowed: allowed.to_vec(),
        }),
    }
}

/// The library options and mode for a spec's engine.
pub fn engine_opts(spec: &JobSpec) -> Result<(Opts, Mode), BenchError> {
    let mut o = match (&spec.ioengine, &spec.ioswitch_opts) {
        (IoEngine::Ioswitch, Some(o)) => o.clone(),
        _ => Opts::default(),
    };
    let mode = match spec.ioengine {
        IoEngine::Xnvme => {
            let x = &spec.xnvme;
            if let Some(be) = &x.be {
                if be != "linux" {
                    return Err(BenchError::XnvmeBackend { at: At::new(spec, "xnvme_be"), value: be.clone() });
                }
            }
            if let Some(a) = &x.r#async {
                let all: Vec<&str> = AsyncIface::ALL.iter().map(|a| a.as_str()).collect();
                o.r#async = Some(xnvme_iface(spec, "xnvme_async", a, &all)?);
            }
            if let Some(s) = &x.sync {
                o.sync = Some(xnvme_iface(spec, "xnvme_sync", s, &["psync", "nvme", "block"])?);
            }
            if let Some(a) = &x.admin {
                o.admin = Some(match a.as_str() {
                    "nvme" => ioswitch::AdminIface::Nvme,
                    "block" | "file_as_ns" | "emulated" => ioswitch::AdminIface::Emulated,
                    other => {
                        return Err(BenchError::XnvmeAdmin {
                            at: At::new(spec, "xnvme_admin"),
                            value: other.to_string(),
                        })
                    }
                });
            }
            if let Some(n) = x.dev_nsid {
                o.nsid = Some(n);
            }
            Mode::Async
        }
        IoEngine::Ioswitch => {
            if o.r#async.is_none() && o.sync.is_some() {
                Mode::Sync
            } else {
                Mode::Async
            }
        }
        // Every other engine runs on the interfaces the library's table names for it.
        engine => {
            let rows = ioswitch::interfaces().iter().filter(|d| d.fio_engines.contains(&engine.as_str()));
            for d in rows {
                match d.role {
                    Role::Sync => o.sync = d.name.parse().ok(),
                    Role::Async => o.r#async = d.name.parse().ok(),
                    Role::Admin | Role::Mem => {}
                }
            }
            if o.sync.is_none() && o.r#async.is_none() {
                return Err(BenchError::Engine { at: At::new(spec, "ioengine"), engine });
            }
            if matches!(engine, IoEngine::Libpmem | IoEngine::DevDax) {
                // libpmem treats memory as persistent when PMEM_IS_PMEM_FORCE=1 (fio's
                // libpmem and dev-dax engines run on it); pmem_force=1 is the same here.
                o.pmem_force = std::env::var("PMEM_IS_PMEM_FORCE").is_ok_and(|v| v.trim() == "1");
            }
            if engine == IoEngine::IoUring {
                // fio's io_uring engine sets up SINGLE_ISSUER|DEFER_TASKRUN where the kernel
                // has them (not with SQPOLL); every worker creates and uses its own queue.
                o.single_issuer = !spec.sqthread_poll && ioswitch::io_uring_single_issuer_supported();
            }
            // An engine with both (fio's null) is synchronous at iodepth 1 and queues above.
            if o.r#async.is_some() && (o.sync.is_none() || spec.iodepth > 1) {
                Mode::Async
            } else {
                Mode::Sync
            }
        }
    };
    if spec.direct {
        o.direct = true;
    }
    if spec.allow_mounted_write {
        o.allow_mounted_write = true;
    }
    // fio's spellings of interface tunables (hipri, sqthread_poll, ...): the table says
    // which interface takes each and what the library calls it.
    for (fio_name, value) in [
        ("hipri", spec.hipri.then(|| "1".to_string())),
        ("sqthread_poll", spec.sqthread_poll.then(|| "1".to_string())),
        ("sqthread_poll_cpu", spec.sqthread_poll_cpu.map(|c| c.to_string())),
        ("fixedbufs", spec.fixedbufs.then(|| "1".to_string())),
        ("registerfiles", spec.registerfiles.then(|| "1".to_string())),
    ] {
        let Some(value) = value else { continue };
        let chosen = o.r#async.map(|a| a.as_str());
        let owner = ioswitch::interfaces().iter().find_map(|d| {
            let key = d.tunables.iter().find(|(_, f)| *f == Some(fio_name)).map(|(k, _)| *k)?;
            (d.role == Role::Async && Some(d.name) == chosen).then_some(key)
        });
        let Some(key) = owner else {
            return Err(BenchError::IoUringOnly { at: At::new(spec, fio_name), engine: spec.ioengine });
        };
        o.set(key, &value).map_err(|source| BenchError::Tunable { at: At::new(spec, fio_name), source })?;
    }
    Ok((o, mode))
}

fn resolve_size(s: SizeSpec, dev_bytes: u64) -> u64 {
    match s {
        SizeSpec::Bytes(b) => b,
        SizeSpec::Percent(p) => dev_bytes / 100 * p as u64,
    }
}

/// fio's default file name for a job without `filename`.
fn default_filename(spec: &JobSpec) -> String {
    format!("{}.0.0", spec.name)
}

/// Opens the job's device (creating and laying out a file as fio does) and resolves the
/// spec into an engine job. `say` receives progress messages ("Laying out IO file").
pub fn prepare(spec: &JobSpec, groupid: u32, say: &mut dyn FnMut(&str)) -> Result<Prepared, BenchError> {
    let (opts, mode) = engine_opts(spec)?;
    let filename = match spec.filename.as_slice() {
        [] if spec.ioengine == IoEngine::Null => {
            let size = match spec.size {
                Some(SizeSpec::Bytes(b)) => b,
                _ => return Err(BenchError::NullNeedsSize { at: At::new(spec, "size") }),
            };
            format!("ramdisk:{}", size.max(512).next_multiple_of(512))
        }
        [] => default_filename(spec),
        [one] => one.clone(),
        more => return Err(BenchError::ManyFiles { at: At::new(spec, "filename"), count: more.len() }),
    };
    let is_path = !filename.starts_with("ramdisk:")
        && ioswitch::uri::parse(&filename).is_ok_and(|t| matches!(t, ioswitch::uri::Target::Path(_)));
    let path = std::path::Path::new(&filename);
    let want_file = spec.filesize.or(match spec.size {
        Some(SizeSpec::Bytes(b)) => Some(
            b + match spec.offset {
                SizeSpec::Bytes(o) => o,
                SizeSpec::Percent(_) => 0,
            },
        ),
        _ => None,
    });
    let creating = is_path && !path.exists();
    let regular = is_path && (creating || path.metadata().map(|m| m.is_file()).unwrap_or(false));
    if regular {
        let cur = path.metadata().map(|m| m.len()).unwrap_or(0);
        match want_file {
            Some(w) if w > cur => lay_out(path, cur, w, say).map_err(|source| BenchError::LayOut {
                at: At::new(spec, "filename"),
                filename: filename.clone(),
                source,
            })?,
            None if creating => return Err(BenchError::NoSize { at: At::new(spec, "size"), filename }),
            _ => {}
        }
    }
    let dev = Device::open(&filename, &opts).map_err(|source| BenchError::Open {
        at: At::new(spec, "filename"),
        filename: filename.clone(),
        source,
    })?;
    // As fio: a job that writes does not start on a device in use (the library would
    // refuse each write; refusing the job says so once, before anything runs).
    if let Some(why) = dev.ident().in_use.as_deref().filter(|_| spec.rw.writes()) {
        return Err(BenchError::InUse { at: At::new(spec, "filename"), filename, why: why.to_string() });
    }
    let bytes = dev.geometry().bytes;
    let offset = resolve_size(spec.offset, bytes);
    let size = spec.size.map(|s| resolve_size(s, bytes));
    let job = Job {
        name: spec.name.clone(),
        filename,
        opts,
        mode,
        rw: spec.rw,
        rwmixread: spec.rwmixread,
        bs: [spec.bs.read, spec.bs.write],
        iodepth: if mode == Mode::Sync { 1 } else { spec.iodepth.max(1) },
        batch_submit: spec.iodepth_batch_submit.max(1),
        batch_complete_min: spec.iodepth_batch_complete_min,
        batch_complete_max: spec.iodepth_batch_complete_max,
        iodepth_low: spec.iodepth_low,
        offset,
        size,
        runtime: spec.runtime,
        time_based: spec.time_based,
        ramp: spec.ramp_time.unwrap_or(Duration::ZERO),
        number_ios: spec.number_ios,
        norandommap: spec.norandommap,
        seed: spec.randseed.unwrap_or(if spec.randrepeat { 0x1234_5678 } else { engine::now_ns() }),
        cpus: spec.cpus_allowed.as_ref().map(|v| v.iter().map(|&c| c as usize).collect()).unwrap_or_default(),
        fsync: spec.fsync,
        verify: spec.verify,
        do_verify: spec.do_verify,
    };
    engine::check_job(&job, &dev).map_err(|source| BenchError::Check { at: At::new(spec, "size"), source })?;
    if spec.invalidate && !job.opts.direct && is_path {
        invalidate(&job.filename, job.offset, size.unwrap_or(bytes - job.offset)).map_err(|source| {
            BenchError::Invalidate { at: At::new(spec, "invalidate"), filename: job.filename.clone(), source }
        })?;
    }
    Ok(Prepared { spec: spec.clone(), job, dev, groupid })
}

/// Drops the page cache of a byte range (fio's `invalidate`), so buffered reads start
/// from the device; flushes dirty pages first so they can be dropped.
fn invalidate(path: &str, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    let fd = f.as_raw_fd();
    // SAFETY: fd is open for the duration of both calls; they take plain integers.
    let rc = unsafe {
        libc::fdatasync(fd);
        libc::posix_fadvise(fd, offset as libc::off_t, len as libc::off_t, libc::POSIX_FADV_DONTNEED)
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Writes data into a file from `from` to `to` bytes, so reads measure real data (fio
/// lays files out the same way), in 1 MiB chunks.
fn lay_out(path: &std::path::Path, from: u64, to: u64, say: &mut dyn FnMut(&str)) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    say(&format!("Laying out IO file {} ({} bytes)", path.display(), to));
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path)?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for c in chunk.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
    }
    let mut pos = from;
    while pos < to {
        let n = (to - pos).min(chunk.len() as u64) as usize;
        f.write_all_at(&chunk[..n], pos)?;
        pos += n as u64;
    }
    f.sync_all()
}

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOpts {
    /// Show the live status line (only on a terminal).
    pub progress: bool,
}

/// The interface a prepared job runs on, as the reports name it.
pub(crate) fn interface_name(p: &Prepared) -> String {
    let i = p.dev.interfaces();
    let name = match p.job.mode {
        Mode::Sync => i.sync.map(|s| s.as_str()).unwrap_or("none").to_string(),
        Mode::Async => i.r#async.map(|s| s.as_str()).unwrap_or("none").to_string(),
    };
    // pmem on ordinary memory says so wherever the interface is reported.
    match p.dev.pmem() {
        Some(info) if info.forced && name == "pmem" => "pmem(pmem_force=1)".into(),
        _ => name,
    }
}

/// Whether an interface as reported ([`JobRun::interface`]) copies through a mapping:
/// `mmap`, and `pmem` (also `pmem(pmem_force=1)`).
pub fn is_mapping(interface: &str) -> bool {
    interface == "mmap" || interface == "pmem" || interface.starts_with("pmem(")
}

/// Runs prepared jobs: consecutive jobs run together; a job with `stonewall` waits for
/// everything before it (a new phase).
pub fn run(prepared: Vec<Prepared>, opts: &RunOpts) -> Report {
    let started = SystemTime::now();
    let t0 = engine::now_ns();
    let mut phases: Vec<Vec<Prepared>> = Vec::new();
    for p in prepared {
        if phases.is_empty() || p.spec.stonewall {
            phases.push(Vec::new());
        }
        phases.last_mut().expect("a phase").push(p);
    }
    let mut jobs = Vec::new();
    for (i, phase) in phases.into_iter().enumerate() {
        jobs.extend(run_phase(phase, i as u32, opts));
    }
    Report { jobs, started, wall_ns: engine::now_ns() - t0, copy_ceiling_bps: None }
}

fn run_phase(phase: Vec<Prepared>, phase_no: u32, opts: &RunOpts) -> Vec<JobRun> {
    let progress = Progress::default();
    let before = Usage::now(libc::RUSAGE_SELF);
    let t0 = engine::now_ns();
    let show = opts.progress && std::io::stderr().is_terminal();
    let total_threads: u32 = phase.iter().map(|p| p.spec.numjobs.max(1)).sum();
    let budget: u64 = phase
        .iter()
        .filter(|p| !p.job.time_based)
        .map(|p| p.job.size.unwrap_or(p.dev.geometry().bytes - p.job.offset) * p.spec.numjobs.max(1) as u64)
        .sum();
    let longest = phase.iter().filter_map(|p| p.job.runtime.map(|r| r + p.job.ramp)).max();
    let results: Vec<Vec<JobResult>> = std::thread::scope(|s| {
        let handles: Vec<Vec<_>> = phase
            .iter()
            .map(|p| {
                (0..p.spec.numjobs.max(1))
                    .map(|i| {
                        let progress = &progress;
                        s.spawn(move || engine::run_job(&p.job, i, &p.dev, progress))
                    })
                    .collect()
            })
            .collect();
        if show {
            status_loop(&handles, &progress, total_threads, budget, longest, t0);
        }
        handles
            .into_iter()
            .map(|hs| {
                hs.into_iter()
                    .enumerate()
                    .map(|(i, h)| {
                        h.join().unwrap_or_else(|_| JobResult {
                            instance: i as u32,
                            error: libc::EFAULT,
                            error_msg: Some("the job thread panicked".into()),
                            ..JobResult::default()
                        })
                    })
                    .collect()
            })
            .collect()
    });
    let process = Usage::now(libc::RUSAGE_SELF).since(before);
    let phase_ns = engine::now_ns() - t0;
    phase
        .into_iter()
        .zip(results)
        .map(|(p, results)| JobRun {
            interface: interface_name(&p),
            spec: p.spec,
            job: p.job,
            groupid: p.groupid,
            phase: phase_no,
            results,
            process,
            phase_ns,
        })
        .collect()
}

fn status_loop<T>(
    handles: &[Vec<std::thread::ScopedJoinHandle<'_, T>>],
    progress: &Progress,
    threads: u32,
    budget: u64,
    longest: Option<Duration>,
    t0: u64,
) {
    let mut last = (t0, 0u64, 0u64);
    let mut err = std::io::stderr();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let running = handles.iter().flatten().filter(|h| !h.is_finished()).count();
        if running == 0 {
            let _ = write!(err, "\r\x1b[K");
            return;
        }
        let now = engine::now_ns();
        let (bytes, ios) = (progress.bytes.load(Ordering::Relaxed), progress.ios.load(Ordering::Relaxed));
        let dt = (now - last.0).max(1) as f64 / 1e9;
        let iops = (ios - last.2) as f64 / dt;
        let bw = (bytes - last.1) as f64 / dt;
        last = (now, bytes, ios);
        let elapsed = (now - t0) as f64 / 1e9;
        let frac = match longest {
            Some(l) => (elapsed / l.as_secs_f64()).min(1.0),
            None if budget > 0 => (bytes as f64 / budget as f64).min(1.0),
            None => 0.0,
        };
        let eta = if frac > 0.0 { elapsed / frac - elapsed } else { 0.0 };
        let _ = write!(
            err,
            "\r\x1b[KJobs: {running}/{threads} [{:.1}% done] [{}/s] [{} IOPS] [eta {:02}m:{:02}s]",
            frac * 100.0,
            human_bytes(bw),
            crate::measure::fmt_count(iops),
            (eta as u64) / 60,
            (eta as u64) % 60
        );
        let _ = err.flush();
    }
}

/// `12.3MiB`, `1.0GiB`.
pub fn human_bytes(b: f64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1}{}", U[i])
}
