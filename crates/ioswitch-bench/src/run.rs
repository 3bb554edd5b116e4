//! Running job sets: resolving fio job specs into engine jobs, one thread per job
//! instance, stonewall phases, and the live status line.

use crate::engine::{self, Job, JobResult, Mode, Progress, Usage};
use crate::error::{At, BenchError};
use crate::jobfile::{IoEngine, JobSpec, SizeSpec};
use ioswitch::{AsyncIface, Device, Opts, PsyncCall, Role};
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex};
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
    /// The files of instances 1.. of a job that names no file (fio's `NAME.N.0` for
    /// clone N), laid out and open; empty when every instance uses `dev`.
    pub clones: Vec<(String, Device)>,
    /// A job with several files per instance ([`crate::files`]): instance i's files after
    /// its first (`dev` or its clone's), open; empty for a job with one file.
    pub more_files: Vec<Vec<(String, Device)>>,
}

impl Prepared {
    /// The device instance `i` runs on (its first file).
    pub fn device(&self, i: u32) -> &Device {
        i.checked_sub(1).and_then(|c| self.clones.get(c as usize)).map_or(&self.dev, |(_, d)| d)
    }

    /// Every file instance `i` runs on, in order.
    pub fn devices(&self, i: u32) -> Vec<&Device> {
        let more = self.more_files.get(i as usize).into_iter().flatten().map(|(_, d)| d);
        std::iter::once(self.device(i)).chain(more).collect()
    }

    /// Every file of every instance, with its name.
    fn all_files(&self) -> impl Iterator<Item = (&String, &Device)> {
        std::iter::once((&self.job.filename, &self.dev))
            .chain(self.clones.iter().map(|(f, d)| (f, d)))
            .chain(self.more_files.iter().flatten().map(|(f, d)| (f, d)))
    }
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
            // fio's synchronous engines differ only in the calls that move data.
            o.psync_call = match engine {
                IoEngine::Sync => Some(PsyncCall::Read),
                IoEngine::Pvsync => Some(PsyncCall::Preadv),
                IoEngine::Pvsync2 => Some(PsyncCall::Preadv2),
                _ => None,
            };
            // pvsync2's hipri is RWF_HIPRI on each call, not an interface's polling mode.
            o.rwf_hipri = engine == IoEngine::Pvsync2 && spec.hipri;

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
            // An engine with both (fio's null) is synchronous at iodepth 1 and queues above;
            // offload's workers each run the engine at iodepth 1.
            if o.r#async.is_some() && (o.sync.is_none() || (spec.iodepth > 1 && !spec.behaviour.offload)) {
                Mode::Async
            } else {
                Mode::Sync
            }
        }
    };
    if spec.direct {
        o.direct = true;
    }
    if let Some(written) = &spec.behaviour.sync {
        if crate::jobfile::sync_writes(spec.ioengine) == crate::jobfile::SyncWrites::OpenFlag {
            o.osync = Some(crate::jobfile::open_sync(written));
        }
    }
    if spec.allow_mounted_write {
        o.allow_mounted_write = true;
    }
    // fio's spellings of interface tunables (hipri, sqthread_poll, ...): the table says
    // which interface takes each and what the library calls it.
    for (fio_name, value) in [
        ("hipri", (spec.hipri && spec.ioengine != IoEngine::Pvsync2).then(|| "1".to_string())),
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

/// The library's refusal to open the job's `filename`, as the job's error. A refusal of
/// the open flag that the job's `sync=` asked for (the library's `osync`: a ramdisk or an
/// NVMe character device has no file to open with it) points at the `sync=` line, which
/// is what the job file says; the others at `filename`.
fn open_error(spec: &JobSpec, filename: &str, source: ioswitch::Error) -> BenchError {
    use crate::jobfile::{open_sync, sync_writes, SyncWrites};
    if let (ioswitch::Error::BadOpt { key, why }, Some(written)) = (&source, spec.behaviour.sync.as_deref()) {
        if key == "osync" && sync_writes(spec.ioengine) == SyncWrites::OpenFlag {
            let flag = open_sync(written).flag_name();
            return spec
                .error_at("sync", format!("sync={written} ({flag} writes) is not run on {filename}: {why}"))
                .into();
        }
    }
    BenchError::Open { at: At::new(spec, "filename"), filename: filename.to_string(), source }
}

/// `offset=N%`: as fio's `setup_files`, the share of the file or device rounded up to
/// the job's smallest block (`min_bs`). (It was `bytes / 100 * N`, not aligned: on 4 MiB,
/// 10 % started at 419400, where fio starts at 421888 with 4 KiB blocks.)
fn resolve_offset(s: SizeSpec, dev_bytes: u64, min_bs: u64) -> u64 {
    match s {
        SizeSpec::Bytes(b) => b,
        SizeSpec::Percent(p) => (dev_bytes * u64::from(p) / 100).div_ceil(min_bs) * min_bs,
    }
}

/// `size=N%`: as fio's `setup_files`, the share of the file or device, at most what
/// lies past the offset, rounded down to the smallest block. (It was `bytes / 100 * N`:
/// 50 % of 4 MiB was 2097150 bytes, a region of 683 blocks of 3 KiB where fio's has 682.)
fn resolve_size(s: SizeSpec, dev_bytes: u64, offset: u64, min_bs: u64) -> u64 {
    match s {
        SizeSpec::Bytes(b) => b,
        SizeSpec::Percent(p) => {
            let share = (dev_bytes * u64::from(p) / 100).min(dev_bytes.saturating_sub(offset));
            share - share % min_bs
        }
    }
}

/// fio's default file name for a job without `filename`: `NAME.CLONE.0`, or by its
/// `filename_format`.
fn default_filename(spec: &JobSpec, clone: u32) -> String {
    crate::files::format_name(spec.behaviour.filename_format.as_deref(), &spec.name, clone, 0)
}

/// A job's file name as the library opens it. In fio a file name is a path, so a bare
/// size such as `128m` (fio's `backwards-read.fio`) names a file, which the library
/// alone would take for a ramdisk: it is opened as `./128m`; a name the library would
/// refuse as a bad size (`12parsecs`) is a file too. The library's own targets stay
/// reachable: a ramdisk through its prefix (`filename=ramdisk\:64m`: fio's `\:` keeps
/// the colon from splitting the name), a PCI controller through `pci\:…` or its bare
/// address (`0000\:00\:05.0`, when no file of that name exists).
fn fio_file_name(filename: String) -> String {
    use ioswitch::uri::{parse, Target};
    let bare_size = !filename.starts_with("ramdisk:")
        && match parse(&filename) {
            Ok(Target::Ramdisk(_)) => true,
            Err(_) => filename.starts_with(|c: char| c.is_ascii_digit()) && !filename.contains(':'),
            Ok(_) => false,
        };
    if bare_size {
        format!("./{filename}")
    } else {
        filename
    }
}

/// Opens the job's device (creating and laying out a file as fio does) and resolves the
/// spec into an engine job. `say` receives progress messages ("Laying out IO file").
pub fn prepare(spec: &JobSpec, groupid: u32, say: &mut dyn FnMut(&str)) -> Result<Prepared, BenchError> {
    // fio's null engine opens no file (FIO_DISKLESSIO): its several files are names only,
    // so a null job runs as one, over the first name as with one file.
    if spec.file_count() > 1 && spec.ioengine != IoEngine::Null {
        return prepare_files(spec, groupid, say);
    }
    let (opts, mode) = engine_opts(spec)?;
    let filename = match spec.filename.as_slice() {
        // fio's null engine opens, creates and lays out no file (FIO_DISKLESSIO): its file
        // names are names only, and the job runs on no device at all; here, nil on a
        // ramdisk of the job's size (nil moves no data, so the ramdisk holds none).
        _ if spec.ioengine == IoEngine::Null => {
            let size = match spec.size {
                Some(SizeSpec::Bytes(b)) => b,
                _ => return Err(BenchError::NullNeedsSize { at: At::new(spec, "size") }),
            };
            format!("ramdisk:{}", size.max(512).next_multiple_of(512))
        }
        [] => default_filename(spec, 0),
        // One name here: several go to prepare_files.
        [first, ..] => first.clone(),
    };
    // fio's `directory` prefixes every file name (add_file: "DIR/" + name); a job with
    // one file takes the first directory of a list.
    let filename = match spec.behaviour.directory.first() {
        Some(dir) if !filename.starts_with("ramdisk:") => format!("{dir}/{filename}"),
        _ => filename,
    };
    let filename = fio_file_name(filename);
    if spec.logs.compression > 0 && spec.logs.any() {
        say(&format!(
            "log_compression={}: fio compresses its log entries in memory and inflates them into the same text files; here they stay uncompressed in memory, and the files are the same",
            spec.logs.compression
        ));
    }
    if !spec.behaviour.create_serialize {
        say("create_serialize=0: fio lays the jobs' files out in their threads, together; here they are laid out one after another when the jobs are set up (the files are the same)");
    }
    if spec.behaviour.time_based_ignored {
        say("time_based requires a runtime/timeout setting: without one it is ignored and the job runs until its size is done, as in fio 3.33 (which warns the same)");
    }
    if let Some(n) = spec.behaviour.tiobench_threads {
        say(&format!(
            "threads={n} is fio's tiobench-profile option: it changes nothing in a job, in fio as here (numjobs sets the job's threads)"
        ));
    }
    let is_path = !filename.starts_with("ramdisk:")
        && ioswitch::uri::parse(&filename).is_ok_and(|t| matches!(t, ioswitch::uri::Target::Path(_)));
    // A PCI address is a controller for the user-space driver: fio's kernel engines
    // cannot reach it, and running another interface instead would measure the wrong thing.
    if spec.ioengine != IoEngine::Ioswitch
        && ioswitch::uri::parse(&filename).is_ok_and(|t| matches!(t, ioswitch::uri::Target::Pci(_)))
    {
        return Err(BenchError::PciEngine { at: At::new(spec, "ioengine"), engine: spec.ioengine, filename });
    }
    let path = std::path::Path::new(&filename);
    let min_bs = spec.shapes.bs_bounds(0, spec.bs.read).0.min(spec.shapes.bs_bounds(1, spec.bs.write).0);
    let filesize =
        crate::shapes::file_size(spec.filesize, spec.shapes.filesize_high, min_bs, spec.randseed.unwrap_or(0));
    // fio lays a file out for each of the job's clones to fit its region: with
    // offset_increment the last clone's region ends furthest.
    let last_increment = u64::from(spec.numjobs.max(1) - 1).saturating_mul(spec.shapes.offset_increment);
    let want_file = filesize.or(match spec.size {
        Some(SizeSpec::Bytes(b)) => Some(
            b + match spec.offset {
                SizeSpec::Bytes(o) => o,
                SizeSpec::Percent(_) => 0,
            } + last_increment,
        ),
        _ => None,
    });
    let creating = is_path && !path.exists();
    if creating && !spec.behaviour.allow_file_create {
        return Err(BenchError::NoCreate { at: At::new(spec, "allow_file_create"), filename });
    }
    let regular = is_path && (creating || path.metadata().map(|m| m.is_file()).unwrap_or(false));
    // A regular file is never zoned: refused before it is created or laid out (a zoned
    // job's offset can be far out: fio's zbd-seq-read.fio starts at 131 GiB).
    if regular && spec.shapes.zbd {
        return Err(spec
            .error_at(
                "zonemode",
                format!("zonemode=zbd needs a zoned device: {filename} is a regular file, which is not zoned"),
            )
            .into());
    }
    if spec.behaviour.read_only {
        read_only_keeps(spec, &filename, &opts, creating, regular, want_file)?;
    }
    // fio's fill_device on a regular file (on a device it only makes ENOSPC/EDQUOT end the
    // job cleanly: the device's size bounds it as it bounds any job).
    let mut fill_cap = None;
    if regular && spec.behaviour.fill_device {
        fill_cap = Some(prepare_fill(spec, path, &filename, creating, want_file, say)?);
    }
    // fio's create_on_open: the file is not laid out; it is created (sparse, at the size
    // the job needs) when it is opened.
    let mut opts = opts;
    if fill_cap.is_some() {
        // Laid out (or emptied and sized) by prepare_fill.
    } else if regular && spec.behaviour.create_on_open {
        match want_file {
            Some(w) if creating || w > path.metadata().map(|m| m.len()).unwrap_or(0) => {
                opts.create = true;
                opts.size = Some(w);
            }
            None if creating => return Err(BenchError::NoSize { at: At::new(spec, "size"), filename }),
            _ => {}
        }
    } else if regular {
        let cur = path.metadata().map(|m| m.len()).unwrap_or(0);
        match want_file {
            Some(w) if w > cur => {
                if lays_out_data(spec) {
                    // fio lays a file out with its write buffers' contents, a
                    // buffer_pattern started over every largest write block.
                    let bs = spec.shapes.bs_bounds(1, spec.bs.write).1 as usize;
                    let pattern = spec.shapes.buffer_pattern.as_deref().map(|p| (p, bs));
                    lay_out(path, cur, w, pattern, spec.behaviour.fallocate, say)
                } else {
                    // With allow_file_create=0 the too small file is kept and extended:
                    // fio removes it, then fails to create it anew.
                    let unlink = spec.rw.writes() && spec.behaviour.allow_file_create;
                    size_for_writes(path, w, unlink, spec.behaviour.fallocate, say)
                }
            }
            .map_err(|source| BenchError::LayOut {
                at: At::new(spec, "filename"),
                filename: filename.clone(),
                source,
            })?,
            None if creating => return Err(BenchError::NoSize { at: At::new(spec, "size"), filename }),
            _ => {}
        }
    }
    // As fio, a job that only reads opens its file read-only: it runs on a file or device
    // it may read but not write (fio's O_RDONLY for a job that neither writes nor trims).
    if is_path && !spec.rw.writes() && !spec.rw.trims() && fill_cap.is_none() {
        opts = opts.for_reading();
    }
    // Under --readonly every open is read-only (read_only_keeps refused the options that
    // ask for a write mode).
    opts.rdonly |= spec.behaviour.read_only;
    let dev = Device::open(&filename, &opts).map_err(|source| open_error(spec, &filename, source))?;
    // As fio: a job that writes does not start on a device in use (the library would
    // refuse each write; refusing the job says so once, before anything runs).
    if let Some(why) = dev.ident().in_use.as_deref().filter(|_| spec.rw.writes() || spec.rw.trims()) {
        return Err(BenchError::InUse { at: At::new(spec, "filename"), filename, why: why.to_string() });
    }
    if spec.shapes.zbd && dev.geometry().zones.is_none() {
        return Err(spec
            .error_at("zonemode", format!("zonemode=zbd needs a zoned device: {filename} is not zoned"))
            .into());
    }
    // Several zoned writes in flight run where the kernel keeps a zone's writes in order
    // (zbd.rs). (Under offload each worker runs at depth 1 and the job's thread keeps one
    // I/O per zone in flight: engine/offload.rs.)
    if spec.shapes.zbd && spec.rw.writes() && mode == Mode::Async && spec.iodepth > 1 && !spec.behaviour.offload {
        if let Some(why) = crate::zbd::queued_writes_refused(&dev) {
            return Err(spec
                .error_at(
                    "iodepth",
                    format!(
                        "zonemode=zbd writes at iodepth={} are not run on {filename}: {why}; iodepth=1 runs them",
                        spec.iodepth
                    ),
                )
                .into());
        }
    }
    let bytes = dev.geometry().bytes;
    let min_bs = spec.shapes.bs_bounds(0, spec.bs.read).0.min(spec.shapes.bs_bounds(1, spec.bs.write).0).max(1);
    let offset = resolve_offset(spec.offset, bytes, min_bs);
    let mut size = spec.size.map(|s| resolve_size(s, bytes, offset, min_bs));
    if let (Some(cap), true) = (fill_cap, spec.rw.reads()) {
        // fio caps a job's I/O at the file its fill_device layout could write (here in
        // whole read blocks).
        let bs = spec.bs.read.max(1);
        let room = cap.saturating_sub(offset) / bs * bs;
        size = Some(size.map_or(room, |s| s.min(room)));
    }
    let job = Job {
        name: spec.name.clone(),
        filename,
        opts,
        mode,
        rw: spec.rw,
        rwmixread: spec.rwmixread,
        bs: [spec.bs.read, spec.bs.write],
        // offload: iodepth workers, for sync engines too (fio: one per io_u).
        iodepth: if mode == Mode::Sync && !spec.behaviour.offload { 1 } else { spec.iodepth.max(1) },
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
        seed: job_seed(spec),
        cpus: spec.cpus_allowed.as_ref().map(|v| v.iter().map(|&c| c as usize).collect()).unwrap_or_default(),
        fsync: spec.fsync,
        verify: spec.verify,
        do_verify: spec.do_verify,
        behaviour: spec.behaviour.clone(),
        load: spec.load.clone(),
        logs: spec.logs.clone(),
        shapes: spec.shapes.clone(),
        // Set by `run`, which sees every job of the run.
        buffer_threads: Default::default(),
        multi: None,
        group: groupid,
    };
    engine::check_job(&job, &dev).map_err(|source| BenchError::Check { at: At::new(spec, "size"), source })?;
    if spec.invalidate && !job.opts.direct && is_path {
        invalidate(&job.filename, job.offset, size.unwrap_or(bytes - job.offset)).map_err(|source| {
            BenchError::Invalidate { at: At::new(spec, "invalidate"), filename: job.filename.clone(), source }
        })?;
    }
    // As fio: each clone of a job that names no file has its own, NAME.N.0.
    let mut clones = Vec::new();
    if spec.filename.is_empty() && spec.ioengine != IoEngine::Null {
        for n in 1..spec.numjobs.max(1) {
            let mut one = spec.clone();
            one.filename = vec![default_filename(spec, n)];
            one.numjobs = 1;
            // fio's set_name_idx: clone N's file is in the N-th directory of a list
            // (modulo its length).
            one.behaviour.directory = crate::files::directory_of(&spec.behaviour.directory, n)
                .map(|d| vec![d.to_string()])
                .unwrap_or_default();
            let p = prepare(&one, groupid, say)?;
            clones.push((p.job.filename, p.dev));
        }
    }
    Ok(Prepared { spec: spec.clone(), job, dev, groupid, clones, more_files: Vec::new() })
}

/// [`prepare`] for a job with several files per instance (fio's `nrfiles`, or a
/// `filename` list): each file is prepared as a job of its own would be (laid out, open,
/// checked), at fio's per-file size (filesetup.c `setup_files`): `filesize` each, or
/// `size` split over the files; `size` with `filesize` is the I/O over all of them.
fn prepare_files(spec: &JobSpec, groupid: u32, say: &mut dyn FnMut(&str)) -> Result<Prepared, BenchError> {
    if spec.behaviour.fill_device {
        return Err(spec
            .error_at("fill_device", "fill_device=1 with several files per job is not run (one file per job only)")
            .into());
    }
    let n = spec.file_count();
    let min_bs = spec.shapes.bs_bounds(0, spec.bs.read).0.min(spec.shapes.bs_bounds(1, spec.bs.write).0);
    let (sizes, total): (Vec<Option<SizeSpec>>, Option<u64>) = match (spec.filesize, spec.size) {
        (None, Some(SizeSpec::Bytes(b))) => {
            (crate::files::split_size(b, n, min_bs).into_iter().map(|r| Some(SizeSpec::Bytes(r))).collect(), Some(b))
        }
        (Some(_), Some(SizeSpec::Bytes(b))) => (vec![None; n as usize], Some(b)),
        (_, s) => (vec![s; n as usize], None),
    };
    let shared = !spec.filename.is_empty();
    let instances = if shared { 1 } else { spec.numjobs.max(1) };
    let mut per_instance: Vec<Vec<Prepared>> = Vec::new();
    for jobnum in 0..instances {
        let names = if shared {
            spec.filename.clone()
        } else {
            crate::files::formatted_names(spec.behaviour.filename_format.as_deref(), &spec.name, jobnum, n)
        };
        let mut files = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let mut one = spec.clone();
            one.filename = vec![name];
            one.numjobs = 1;
            one.behaviour.nrfiles = 1;
            one.behaviour.openfiles = 0;
            one.size = sizes[i];
            one.behaviour.directory = crate::files::directory_of(&spec.behaviour.directory, jobnum)
                .map(|d| vec![d.to_string()])
                .unwrap_or_default();
            // A filesize range: each file draws its own size, as in fio.
            if spec.shapes.filesize_high.is_some() {
                one.randseed = Some(spec.randseed.unwrap_or(0) ^ (u64::from(jobnum) << 32 | i as u64));
            }
            files.push(prepare(&one, groupid, say)?);
        }
        per_instance.push(files);
    }
    let mut instances_files = per_instance.into_iter();
    let mut first = instances_files.next().expect("one instance at least").into_iter();
    let mut p = first.next().expect("several files");
    let rest: Vec<Prepared> = first.collect();
    p.job.multi = Some(crate::files::MultiFile {
        service: spec.behaviour.file_service.clone(),
        openfiles: spec.behaviour.openfiles,
        regions: std::iter::once(p.job.size).chain(rest.iter().map(|q| q.job.size)).collect(),
        total,
    });
    let rest: Vec<(String, Device)> = rest.into_iter().map(|q| (q.job.filename, q.dev)).collect();
    p.spec = spec.clone();
    p.job.seed = job_seed(spec);
    let mut more_files = vec![rest];
    for files in instances_files {
        let mut files = files.into_iter();
        let q = files.next().expect("several files");
        p.clones.push((q.job.filename, q.dev));
        more_files.push(files.map(|q| (q.job.filename, q.dev)).collect());
    }
    if shared {
        // fio's clones of a job with a filename list share its files.
        for _ in 1..spec.numjobs.max(1) {
            p.clones.push((p.job.filename.clone(), p.dev.clone()));
            more_files.push(more_files[0].clone());
        }
    }
    p.more_files = more_files;
    Ok(p)
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
/// lays files out the same way), in 1 MiB chunks; with `pattern` (`buffer_pattern`, and
/// the block it starts over at), that pattern.
fn lay_out(
    path: &std::path::Path,
    from: u64,
    to: u64,
    pattern: Option<(&[u8], usize)>,
    fallocate: crate::jobfile::Fallocate,
    say: &mut dyn FnMut(&str),
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    say(&format!("Laying out IO file {} ({} bytes)", path.display(), to));
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path)?;
    preallocate(&f, to, fallocate, say)?;
    let chunk = layout_chunk(pattern);
    let mut pos = from;
    while pos < to {
        let n = (to - pos).min(chunk.len() as u64) as usize;
        f.write_all_at(&chunk[..n], pos)?;
        pos += n as u64;
    }
    f.sync_all()
}

/// fio's `--readonly` for a job that reads (those that write or trim are refused when the
/// job set is read): nothing may create, lay out, extend, fill or remove its file, and
/// its ioswitch options may not ask for a write mode. fio logs "refusing extend of file
/// due to read-only" and goes on; here the job is refused before anything runs.
fn read_only_keeps(
    spec: &JobSpec,
    filename: &str,
    opts: &Opts,
    creating: bool,
    regular: bool,
    want_file: Option<u64>,
) -> Result<(), BenchError> {
    let refuse = |option: &str, what: String| {
        Err(BenchError::ReadOnly { at: At::new(spec, option), filename: filename.to_string(), what })
    };
    if creating {
        return refuse("filename", "it does not exist, and the job would create it".into());
    }
    if regular && spec.behaviour.fill_device {
        return refuse("fill_device", "fill_device=1 would lay the file out until the file system is full".into());
    }
    if regular && spec.behaviour.unlink {
        return refuse("unlink", "unlink=1 would remove it when the job is done".into());
    }
    let cur = std::path::Path::new(filename).metadata().map(|m| m.len()).unwrap_or(0);
    match want_file {
        Some(w) if regular && w > cur => refuse(
            "size",
            format!("it holds {cur} bytes and the job (size, offset) needs {w}: it would be laid out to that size"),
        ),
        _ if opts.asks_write_mode() => {
            refuse("ioswitch_opts", format!("the ioswitch options ({opts}) ask for a write mode"))
        }
        _ => Ok(()),
    }
}

/// Whether a job's new (or too small) regular file is laid out with data, as fio's
/// `extend_file` decides: for a job that reads, and for one that writes with `overwrite`
/// or through an engine that cannot extend a file (fio's `FIO_NOEXTEND`: mmap, libpmem,
/// dev-dax, xnvme). Any other job's file is only created and preallocated
/// ([`size_for_writes`]).
fn lays_out_data(spec: &JobSpec) -> bool {
    let noextend = matches!(spec.ioengine, IoEngine::Mmap | IoEngine::Libpmem | IoEngine::DevDax | IoEngine::Xnvme);
    spec.rw.reads() || (spec.rw.writes() && (spec.behaviour.overwrite || noextend))
}

/// fio's `extend_file` for a job that does not lay its file out with data: a job that
/// writes (without `overwrite`) removes the too small file first, so its writes land in
/// a new one; the file is created and preallocated (`fallocate`), no data written. fio
/// leaves the size to the preallocation (`fallocate=none` or `keep`: empty, the writes
/// extend it); here it is then set to the size the job needs (sparse where nothing was
/// allocated), since the library serves only the bytes a file has.
fn size_for_writes(
    path: &std::path::Path,
    to: u64,
    unlink: bool,
    fallocate: crate::jobfile::Fallocate,
    say: &mut dyn FnMut(&str),
) -> std::io::Result<()> {
    say(&format!("Laying out IO file {} ({} bytes)", path.display(), to));
    fn ctx(what: &str) -> impl FnOnce(std::io::Error) -> std::io::Error + '_ {
        move |e| std::io::Error::new(e.kind(), format!("{what}: {e}"))
    }
    if unlink {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(ctx("removing the file, too small for the job, to write a new one")(e))
            }
            _ => {}
        }
    }
    let f =
        std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path).map_err(ctx("creating it"))?;
    preallocate(&f, to, fallocate, say)?;
    if f.metadata().map_err(ctx("reading its size"))?.len() < to {
        f.set_len(to).map_err(ctx(&format!("setting its size to {to} bytes")))?;
    }
    Ok(())
}

/// The 1 MiB a layout writes over and over: the `buffer_pattern` started over every
/// largest write block, or random-looking bytes.
fn layout_chunk(pattern: Option<(&[u8], usize)>) -> Vec<u8> {
    let mut chunk = vec![0u8; 1 << 20];
    match pattern.filter(|(p, bs)| !p.is_empty() && *bs > 0) {
        Some((p, bs)) => {
            chunk.resize(bs * (chunk.len() / bs).max(1), 0);
            for block in chunk.chunks_mut(bs) {
                for (b, x) in block.iter_mut().zip(p.iter().cycle()) {
                    *b = *x;
                }
            }
        }
        None => {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for c in chunk.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
            }
        }
    }
    chunk
}

/// fio's `fill_device` on the regular file `path` of a job: returns the file's size,
/// ready to run. A job that reads gets its file laid out until the file system is full
/// (or to its size, when it has one; ENOSPC and EDQUOT end the layout, not the job). A
/// job that only writes starts from an empty file (fio unlinks it, freeing its space),
/// not laid out, sized (sparse) to its region, or without `size` to the whole file
/// system's size, which no write can pass: its writes end at ENOSPC or EDQUOT, and the
/// file is cut to what was written when the job ends ([`engine`]'s fill end).
fn prepare_fill(
    spec: &JobSpec,
    path: &std::path::Path,
    filename: &str,
    creating: bool,
    want_file: Option<u64>,
    say: &mut dyn FnMut(&str),
) -> Result<u64, BenchError> {
    let refuse = |why: &str| -> BenchError { spec.error_at("fill_device", format!("fill_device=1 {why}")).into() };
    if spec.numjobs > 1 && !spec.filename.is_empty() {
        return Err(refuse(&format!(
            "with numjobs={} on one file ({filename}) is not run: each instance would write until the file system is full, into the same file",
            spec.numjobs
        )));
    }
    if spec.behaviour.create_on_open {
        return Err(refuse("with create_on_open=1 is not run (fio's fill never lays the file out ahead)"));
    }
    if spec.shapes.zbd {
        return Err(refuse("with zonemode=zbd is not run"));
    }
    if want_file.is_none() && spec.offset != SizeSpec::Bytes(0) {
        // fio 3.33 adds the offset to its unbounded size, which wraps around: it writes
        // nothing to a new file, and only up to an existing file's end.
        return Err(refuse("without size starts at offset 0 only (fio's unbounded size wraps around with an offset)"));
    }
    let lay_err = |source: std::io::Error| BenchError::LayOut {
        at: At::new(spec, "filename"),
        filename: filename.to_string(),
        source,
    };
    if spec.rw.reads() {
        let cur = if creating { 0 } else { path.metadata().map(|m| m.len()).unwrap_or(0) };
        let to = want_file.unwrap_or(u64::MAX);
        let bs = spec.shapes.bs_bounds(1, spec.bs.write).1 as usize;
        let pattern = spec.shapes.buffer_pattern.as_deref().map(|p| (p, bs));
        // fio lays a reading job's file out anew (O_TRUNC) when it is too small.
        if cur < to {
            lay_out_until_full(path, to, pattern, say).map_err(lay_err)?;
        }
        let len = path.metadata().map(|m| m.len()).map_err(lay_err)?;
        if len == 0 {
            return Err(refuse(&format!("could not write anything to {filename}: its file system is full")));
        }
        return Ok(len);
    }
    let end = match want_file {
        Some(w) => w,
        None if spec.rw.is_random() => {
            return Err(refuse(&format!(
                "without size runs sequential writes only (rw={}: random offsets over an unbounded region)",
                spec.rw
            )))
        }
        None => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
            let total = fs_bytes(dir).map_err(lay_err)?;
            let bs = spec.shapes.bs_bounds(1, spec.bs.write).1.max(1);
            (total / bs).max(1) * bs
        }
    };
    say(&format!("fill_device: writing {} until its file system is full (at most {end} bytes)", path.display()));
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(path).map_err(lay_err)?;
    f.set_len(end).map_err(lay_err)?;
    Ok(end)
}

/// The size of the file system holding `dir`, bytes (statfs(2): blocks × block size).
fn fs_bytes(dir: &std::path::Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: statfs is plain data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path and st a valid out pointer for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.f_blocks as u64).saturating_mul(st.f_bsize as u64))
}

/// fio's layout under `fill_device`: the file written anew from its start up to `to`
/// bytes, stopping without an error at ENOSPC or EDQUOT.
fn lay_out_until_full(
    path: &std::path::Path,
    to: u64,
    pattern: Option<(&[u8], usize)>,
    say: &mut dyn FnMut(&str),
) -> std::io::Result<()> {
    use std::io::Write;
    say(&format!("Laying out IO file {} until its file system is full", path.display()));
    let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(path)?;
    let chunk = layout_chunk(pattern);
    let mut pos = 0u64;
    while pos < to {
        let n = (to - pos).min(chunk.len() as u64) as usize;
        match f.write(&chunk[..n]) {
            Ok(0) => break,
            Ok(w) => pos += w as u64,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    f.sync_all()
}

/// fio's `fallocate_file` on a file being laid out to `size` bytes (see
/// [`crate::jobfile::Fallocate`] for which failures count).
fn preallocate(
    f: &std::fs::File,
    size: u64,
    mode: crate::jobfile::Fallocate,
    say: &mut dyn FnMut(&str),
) -> std::io::Result<()> {
    use crate::jobfile::Fallocate;
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    let len = size as libc::off_t;
    match mode {
        Fallocate::None => {}
        Fallocate::Native => {
            // As fio's native_fallocate: a failure (e.g. a file system without it) is
            // not an error; the layout writes the data anyway.
            // SAFETY: fd is open for the call, which takes plain integers.
            let _ = unsafe { libc::fallocate(fd, 0, 0, len) };
        }
        Fallocate::Posix => {
            // SAFETY: fd is open for the call, which takes plain integers; it returns the
            // error number.
            let rc = unsafe { libc::posix_fallocate(fd, 0, len) };
            if rc > 0 {
                say(&format!("fallocate=posix: posix_fallocate fails: {}", std::io::Error::from_raw_os_error(rc)));
            }
        }
        Fallocate::Keep => {
            // SAFETY: fd is open for the call, which takes plain integers.
            if unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 0, len) } != 0 {
                let e = std::io::Error::last_os_error();
                return Err(std::io::Error::new(e.kind(), format!("fallocate=keep: fallocate: {e}")));
            }
        }
        Fallocate::Truncate => {
            f.set_len(size).map_err(|e| std::io::Error::new(e.kind(), format!("fallocate=truncate: ftruncate: {e}")))?
        }
    }
    Ok(())
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
    // pmem on ordinary memory, or pre-faulted at open, says so wherever the interface is
    // reported.
    match p.dev.pmem() {
        Some(info) if name == "pmem" => pmem_name(info.forced, info.populate),
        _ => name,
    }
}

/// `pmem`, with the options that change what its figures mean in parentheses:
/// `pmem(pmem_force=1)`, `pmem(pmem_populate=1)`, `pmem(pmem_force=1,pmem_populate=1)`.
fn pmem_name(forced: bool, populate: bool) -> String {
    let opts: Vec<&str> = [(forced, "pmem_force=1"), (populate, "pmem_populate=1")]
        .into_iter()
        .filter_map(|(on, o)| on.then_some(o))
        .collect();
    if opts.is_empty() {
        "pmem".into()
    } else {
        format!("pmem({})", opts.join(","))
    }
}

/// Whether an interface as reported ([`JobRun::interface`]) copies through a mapping:
/// `mmap`, and `pmem` (also `pmem(pmem_force=1)`, `pmem(pmem_populate=1)`, …).
pub fn is_mapping(interface: &str) -> bool {
    interface == "mmap" || interface == "pmem" || interface.starts_with("pmem(")
}

/// Runs prepared jobs: consecutive jobs run together; a job with `stonewall` waits for
/// everything before it (a new phase).
pub fn run(prepared: Vec<Prepared>, opts: &RunOpts) -> Report {
    let started = SystemTime::now();
    let t0 = engine::now_ns();
    let mut prepared = prepared;
    // fio numbers every thread of the run (jobs as written, each job's instances in
    // turn); dedupe_global's working sets are made of those threads' first pages.
    let seeds: std::sync::Arc<[u64]> =
        prepared.iter().flat_map(|p| (0..p.spec.numjobs.max(1)).map(|i| engine::buffer_seed(&p.job, i))).collect();
    let mut first = 0;
    for p in &mut prepared {
        p.job.buffer_threads = engine::BufferThreads { seeds: seeds.clone(), first };
        first += p.spec.numjobs.max(1) as usize;
    }
    let mut phases: Vec<Vec<Prepared>> = Vec::new();
    for p in prepared {
        if phases.is_empty() || p.spec.stonewall {
            phases.push(Vec::new());
        }
        phases.last_mut().expect("a phase").push(p);
    }
    let mut jobs = Vec::new();
    let mut ended = false;
    // Files a fill_device job of an earlier phase wrote until full: every job is set up
    // before the first runs, so a later job on such a file saw it as sized ahead for the
    // fill; it is set up again on the file as the fill left it (fio sets each job up when
    // it starts).
    let mut filled: Vec<String> = Vec::new();
    for (i, phase) in phases.into_iter().enumerate() {
        let phase: Vec<Prepared> = phase
            .into_iter()
            .map(|p| {
                if !filled.contains(&p.job.filename) {
                    return p;
                }
                match prepare(&p.spec, p.groupid, &mut |_| {}) {
                    Ok(again) => again,
                    Err(e) => {
                        eprintln!("ioswitch: job '{}': set up again after a fill_device job: {e}", p.spec.name);
                        p
                    }
                }
            })
            .collect();
        filled.extend(
            phase
                .iter()
                .filter(|p| p.spec.behaviour.fill_device && p.spec.rw.writes() && !p.spec.rw.reads())
                .filter(|p| p.dev.ident().kind == ioswitch::DevKind::File)
                .map(|p| p.job.filename.clone()),
        );
        let (runs, end_run) = run_phase(phase, i as u32, opts, ended);
        jobs.extend(runs);
        ended |= end_run;
    }
    Report { jobs, started, wall_ns: engine::now_ns() - t0, copy_ceiling_bps: None }
}

/// Runs the jobs of one phase together; `ended`: an earlier job's `exit_what=all` ended
/// the run, so these end at once. Returns the jobs' runs and whether one of them ended
/// the run.
fn run_phase(phase: Vec<Prepared>, phase_no: u32, opts: &RunOpts, ended: bool) -> (Vec<JobRun>, bool) {
    let mut progress = Progress::with_groups(phase.iter().map(|p| p.groupid).max().unwrap_or(0), ended);
    // Steady state ([`crate::steady`]): a slot per instance of a job with ss_dur.
    let (first_slot, units) = steady_units(&phase);
    progress.slots = (0..first_slot.last().copied().unwrap_or(0)).map(|_| engine::SsSlot::default()).collect();
    let units = Mutex::new(units);
    let checks_done = std::sync::atomic::AtomicBool::new(false);
    let before = Usage::now(libc::RUSAGE_SELF);
    let t0 = engine::now_ns();
    let show = opts.progress && std::io::stderr().is_terminal();
    let total_threads: u32 = phase.iter().map(|p| p.spec.numjobs.max(1)).sum();
    let budget: u64 = phase
        .iter()
        .filter(|p| !p.job.time_based)
        .map(|p| {
            p.job.size.unwrap_or(p.dev.geometry().bytes - p.job.offset)
                * p.spec.numjobs.max(1) as u64
                * p.spec.behaviour.loops.max(1) as u64
        })
        .sum();
    let longest = phase.iter().filter_map(|p| p.job.runtime.map(|r| r + p.job.ramp)).max();
    // fio's wait_for: a job starts once every instance of its waitee (an earlier job of
    // this phase; one of an earlier phase is done already) has ended.
    let waitee: Vec<Option<usize>> = phase
        .iter()
        .map(|p| p.spec.behaviour.wait_for.as_ref().and_then(|w| phase.iter().position(|q| &q.spec.name == w)))
        .collect();
    let running =
        Running { left: Mutex::new(phase.iter().map(|p| p.spec.numjobs.max(1)).collect()), done: Condvar::new() };
    let results: Vec<Vec<JobResult>> = std::thread::scope(|s| {
        let handles: Vec<Vec<_>> = phase
            .iter()
            .enumerate()
            .map(|(j, p)| {
                (0..p.spec.numjobs.max(1))
                    .map(|i| {
                        let (progress, running, waitee) = (&progress, &running, waitee[j]);
                        let slot = p.spec.steady.on().then(|| first_slot[j] + i as usize);
                        // Every instance joins its flow before any thread starts (as fio,
                        // which counts the weights when it reads the job file), so a job
                        // whose thread starts first is held for the others; one that waits
                        // for another job (wait_for) joins when it starts.
                        let flow = waitee.is_none().then(|| engine::join_flow(&p.job, progress)).flatten();
                        let started = std::thread::Builder::new().spawn_scoped(s, move || {
                            let _ends = running.instance(j, waitee);
                            let flow = if waitee.is_some() { engine::join_flow(&p.job, progress) } else { flow };
                            engine::run_job_slot(&p.job, i, &p.devices(i), progress, slot, flow)
                        });
                        // No thread for this instance (the process's thread or memory
                        // limit): the run stops, the instance is reported failed, and it
                        // counts as ended for a job that waits for it.
                        started.inspect_err(|_| {
                            progress.stop.store(true, Ordering::Relaxed);
                            drop(InstanceEnd { running, job: j });
                        })
                    })
                    .collect()
            })
            .collect();
        if units.lock().is_ok_and(|u| !u.is_empty()) {
            let (units, progress, checks_done) = (&units, &progress, &checks_done);
            s.spawn(move || steady_loop(units, progress, checks_done));
        }
        if show {
            status_loop(&handles, &progress, total_threads, budget, longest, t0);
        }
        let results = handles
            .into_iter()
            .map(|hs| {
                hs.into_iter()
                    .enumerate()
                    .map(|(i, h)| match h {
                        Ok(h) => h.join().unwrap_or_else(|_| JobResult {
                            instance: i as u32,
                            error: libc::EFAULT,
                            error_msg: Some("the job thread panicked".into()),
                            ..JobResult::default()
                        }),
                        Err(e) => JobResult {
                            instance: i as u32,
                            error: e.raw_os_error().unwrap_or(libc::EAGAIN),
                            // The errno follows the message on its line: not "(os error N)" too.
                            error_msg: Some(format!(
                                "starting the job's thread: {}",
                                e.to_string()
                                    .trim_end_matches(&format!(" (os error {})", e.raw_os_error().unwrap_or(0)))
                            )),
                            ..JobResult::default()
                        },
                    })
                    .collect()
            })
            .collect();
        checks_done.store(true, Ordering::Relaxed);
        results
    });
    let mut results = results;
    for u in units.into_inner().unwrap_or_else(|e| e.into_inner()) {
        let outcome = u.steady.outcome();
        for slot in u.slots {
            // The slot's job and instance.
            let j = first_slot.iter().rposition(|&f| f <= slot).unwrap_or(0);
            if let Some(r) = results.get_mut(j).and_then(|rs| rs.get_mut(slot - first_slot[j])) {
                r.steady = Some(outcome.clone());
            }
        }
    }
    let process = Usage::now(libc::RUSAGE_SELF).since(before);
    let phase_ns = engine::now_ns() - t0;
    for p in phase.iter().filter(|p| p.spec.behaviour.unlink) {
        // fio's unlink: the job's (regular) files go when the job is done; never a device.
        for (f, _) in p.all_files().filter(|(_, d)| d.ident().kind == ioswitch::DevKind::File) {
            let _ = std::fs::remove_file(f);
        }
    }
    let runs = phase
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
        .collect();
    (runs, progress.end_run.load(Ordering::Relaxed))
}

/// The steady-state slots and check units of a phase: each job's first slot (a slot per
/// instance of a job with `ss_dur`; the last entry is the slot count), and the units: an
/// instance each, or with `group_reporting` one per reporting group (fio's rule).
fn steady_units(phase: &[Prepared]) -> (Vec<usize>, Vec<crate::steady::Unit>) {
    let mut first = Vec::with_capacity(phase.len() + 1);
    let mut n = 0usize;
    for p in phase {
        first.push(n);
        if p.spec.steady.on() {
            n += p.spec.numjobs.max(1) as usize;
        }
    }
    first.push(n);
    let now = engine::now_ns();
    let start = |p: &Prepared| now + p.spec.behaviour.startdelay.map_or(0, |d| d.as_nanos() as u64);
    let mut units: Vec<crate::steady::Unit> = Vec::new();
    let mut group_unit: Vec<(u32, usize)> = Vec::new();
    for (j, p) in phase.iter().enumerate().filter(|(_, p)| p.spec.steady.on()) {
        for i in 0..p.spec.numjobs.max(1) as usize {
            let slot = first[j] + i;
            match group_unit.iter().find(|(g, _)| *g == p.groupid).filter(|_| p.spec.group_reporting) {
                Some(&(_, u)) => units[u].add(slot, start(p)),
                None => {
                    if p.spec.group_reporting {
                        group_unit.push((p.groupid, units.len()));
                    }
                    units.push(crate::steady::Unit::new(p.spec.steady, vec![slot], &[start(p)]));
                }
            }
        }
    }
    (first, units)
}

/// Runs the steady-state checks once a second until the phase's jobs are done.
fn steady_loop(units: &Mutex<Vec<crate::steady::Unit>>, progress: &Progress, done: &std::sync::atomic::AtomicBool) {
    let mut next = engine::now_ns() + 1_000_000_000;
    while !done.load(Ordering::Relaxed) {
        let now = engine::now_ns();
        if now < next {
            std::thread::sleep(Duration::from_nanos((next - now).min(50_000_000)));
            continue;
        }
        next += 1_000_000_000;
        if let Ok(mut us) = units.lock() {
            for u in us.iter_mut() {
                u.check(progress, now);
            }
        }
    }
}

/// Writes the time-series logs of a run's jobs in fio's files ([`crate::iolog`]), in the
/// current directory as fio does (a prefix may name another); returns the files written.
/// Jobs are numbered as fio numbers them: every instance of every job, in order, from 1.
pub fn write_logs(report: &Report) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut all = Vec::new();
    for j in &report.jobs {
        for r in &j.results {
            all.push((&j.job.logs, r.logs.as_ref()));
        }
    }
    crate::iolog::write_all(&all)
}

/// How many instances of each job of a phase have not ended yet (for `wait_for`).
struct Running {
    left: Mutex<Vec<u32>>,
    done: Condvar,
}

impl Running {
    /// Waits until every instance of job `waitee` has ended, then returns the guard that
    /// counts one instance of job `job` as ended when dropped (a panic included).
    fn instance(&self, job: usize, waitee: Option<usize>) -> InstanceEnd<'_> {
        if let Some(w) = waitee {
            let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
            while left[w] > 0 {
                left = self.done.wait(left).unwrap_or_else(|e| e.into_inner());
            }
        }
        InstanceEnd { running: self, job }
    }
}

/// One running job instance; see [`Running::instance`].
struct InstanceEnd<'a> {
    running: &'a Running,
    job: usize,
}

impl Drop for InstanceEnd<'_> {
    fn drop(&mut self) {
        let mut left = self.running.left.lock().unwrap_or_else(|e| e.into_inner());
        left[self.job] -= 1;
        self.running.done.notify_all();
    }
}

fn status_loop<T>(
    handles: &[Vec<std::io::Result<std::thread::ScopedJoinHandle<'_, T>>>],
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
        let running = handles.iter().flatten().flatten().filter(|h| !h.is_finished()).count();
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

/// The seed a job draws all its random numbers from: fio's fixed one with `allrandrepeat`
/// (which sets aside `randseed`, as fio's `td_fill_rand_seeds` does), else `randseed`,
/// else the fixed one with `randrepeat` (the default) and the clock without it.
fn job_seed(spec: &JobSpec) -> u64 {
    const FIXED: u64 = 0x1234_5678;
    match (spec.allrandrepeat, spec.randseed) {
        (true, _) => FIXED,
        (false, Some(seed)) => seed,
        (false, None) if spec.randrepeat => FIXED,
        (false, None) => engine::now_ns(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobfile::JobSet;

    fn opts_of(args: &str) -> Result<(Opts, Mode), BenchError> {
        let set = JobSet::from_args(format!("--name=j {args}").split_whitespace()).unwrap();
        engine_opts(&set.jobs[0])
    }

    #[test]
    fn only_jobs_that_read_or_overwrite_or_cannot_extend_lay_their_files_out_with_data() {
        let lays = |args: &str| {
            let set = JobSet::from_args(format!("--name=j {args}").split_whitespace()).unwrap();
            lays_out_data(&set.jobs[0])
        };
        for args in ["--rw=read", "--rw=randrw", "--rw=write --overwrite=1", "--rw=write --ioengine=mmap"] {
            assert!(lays(args), "{args}");
        }
        for e in ["libpmem", "dev-dax"] {
            assert!(lays(&format!("--rw=randwrite --ioengine={e}")), "{e}");
        }
        for args in ["--rw=write", "--rw=randwrite --ioengine=io_uring", "--rw=trim", "--rw=trimwrite"] {
            assert!(!lays(args), "{args}");
        }
    }

    #[test]
    fn allrandrepeat_seeds_every_run_the_same_way_whatever_randrepeat_and_randseed_say() {
        let seed = |args: &str| {
            let set = JobSet::from_args(format!("--name=j {args}").split_whitespace()).unwrap();
            job_seed(&set.jobs[0])
        };
        // Without it: randseed, else the fixed seed, else (randrepeat=0) the clock.
        assert_eq!(seed("--randseed=42"), 42);
        assert_eq!(seed(""), seed("--randrepeat=1"));
        let clock = seed("--randrepeat=0");
        std::thread::sleep(Duration::from_millis(2));
        assert_ne!(seed("--randrepeat=0"), clock, "randrepeat=0: a new seed each run");
        // With it: the fixed seed, also with randrepeat=0, and randseed set aside (fio's
        // td_fill_rand_seeds).
        assert_eq!(seed("--randrepeat=0 --allrandrepeat=1"), seed(""));
        assert_eq!(seed("--randseed=42 --allrandrepeat=1"), seed(""));
        assert_ne!(seed("--randrepeat=0 --allrandrepeat=0"), seed(""), "allrandrepeat=0: as without it");
    }

    #[test]
    fn pmem_names_the_options_that_change_its_figures() {
        assert_eq!(pmem_name(false, false), "pmem");
        assert_eq!(pmem_name(true, false), "pmem(pmem_force=1)");
        assert_eq!(pmem_name(false, true), "pmem(pmem_populate=1)");
        assert_eq!(pmem_name(true, true), "pmem(pmem_force=1,pmem_populate=1)");
        for n in ["pmem", "pmem(pmem_force=1)", "pmem(pmem_populate=1)", "pmem(pmem_force=1,pmem_populate=1)", "mmap"] {
            assert!(is_mapping(n), "{n}");
        }
        assert!(!is_mapping("psync"));
    }

    #[test]
    fn fio_sync_engines_run_their_own_calls() {
        for (engine, call) in [
            ("psync", None),
            ("sync", Some(PsyncCall::Read)),
            ("pvsync", Some(PsyncCall::Preadv)),
            ("pvsync2", Some(PsyncCall::Preadv2)),
        ] {
            let (o, mode) = opts_of(&format!("--ioengine={engine}")).unwrap();
            assert_eq!(
                (o.sync, o.psync_call, o.rwf_hipri, mode),
                (Some(ioswitch::SyncIface::Psync), call, false, Mode::Sync),
                "{engine}"
            );
        }
    }

    #[test]
    fn fio_sync_opens_the_file_with_its_flag() {
        use ioswitch::OpenSync;
        for (args, want) in [
            ("--ioengine=psync --sync=dsync", Some(OpenSync::Dsync)),
            ("--ioengine=pvsync2 --sync=1", Some(OpenSync::Sync)),
            ("--ioengine=libaio --sync=sync", Some(OpenSync::Sync)),
            ("--ioengine=io_uring --sync=dsync", Some(OpenSync::Dsync)),
            ("--ioengine=posixaio --sync=1", Some(OpenSync::Sync)),
            ("--ioengine=psync --sync=0", None),
            ("--ioengine=psync", None),
            // libpmem's writes are durable when they return; its mapping takes no flag.
            ("--ioengine=libpmem --sync=1", None),
        ] {
            assert_eq!(opts_of(args).unwrap().0.osync, want, "{args}");
        }
    }

    #[test]
    fn fio_sync_on_a_target_without_a_file_is_refused_at_the_jobs_sync_line() {
        for (engine, written, flag) in [("psync", "dsync", "O_DSYNC"), ("io_uring", "1", "O_SYNC")] {
            let text = format!("[j]\nfilename=ramdisk\\:1m\nsize=64k\nioengine={engine}\nrw=write\nsync={written}\n");
            let Err(e) = prepare(&spec(&text), 0, &mut |_| {}) else {
                panic!("{engine}: sync={written} on a ramdisk ran")
            };
            let e = e.to_string();
            let want = format!("t.fio:6: job 'j': sync={written} ({flag} writes) is not run on ramdisk:1m: ");
            assert!(e.starts_with(&want) && e.contains("ramdisk (no file is opened)"), "{engine}: {e}");
        }
        // The same job on a file runs with the flag.
        let s = scratch("sync-file");
        let f = s.path("f");
        let p =
            prepare(&spec(&format!("[j]\nfilename={f}\nsize=64k\nrw=write\nsync=dsync\n")), 0, &mut |_| {}).unwrap();
        assert_eq!(p.dev.opts().osync, Some(ioswitch::OpenSync::Dsync));
        // osync given by the user in ioswitch_opts is the user's own: its refusal stays the
        // library's, at filename.
        let text = "[j]\nfilename=ramdisk\\:1m\nsize=64k\nioengine=ioswitch\nioswitch_opts=osync=dsync\n";
        let Err(e) = prepare(&spec(text), 0, &mut |_| {}) else { panic!("osync on a ramdisk opened") };
        let e = e.to_string();
        assert!(e.starts_with("t.fio:2: job j: ") && e.contains("osync=dsync (O_DSYNC) applies to files"), "{e}");
    }

    #[test]
    fn pvsync2_hipri_is_accepted_by_the_runner_too_as_rwf_hipri() {
        let (o, _) = opts_of("--ioengine=pvsync2 --hipri").unwrap();
        assert_eq!((o.psync_call, o.rwf_hipri, o.iopoll), (Some(PsyncCall::Preadv2), true, false));
        let (o, _) = opts_of("--ioengine=io_uring --hipri").unwrap();
        assert!(o.iopoll && !o.rwf_hipri, "io_uring's hipri stays IOPOLL");
    }

    fn spec(text: &str) -> JobSpec {
        let mut r = crate::jobfile::JobReader::new();
        r.read_str("t.fio", text).unwrap();
        r.finish().unwrap().jobs.remove(0)
    }

    #[test]
    fn fio_engines_on_a_pci_address_are_refused_pointing_to_ioengine_ioswitch() {
        for engine in ["psync", "libaio", "io_uring"] {
            let text = format!("[j]\nfilename=0000\\:00\\:1f.7\nsize=64k\nioengine={engine}\n");
            let Err(e) = prepare(&spec(&text), 0, &mut |_| {}) else { panic!("ioengine={engine} was not refused") };
            let e = e.to_string();
            assert!(
                e.contains(&format!("ioengine={engine}"))
                    && e.contains("0000:00:1f.7 is a PCI address")
                    && e.contains("use --ioengine=ioswitch"),
                "{e}"
            );
        }
        // With the ioswitch engine the device is opened (and here there is no such device).
        let Err(e) = prepare(&spec("[j]\nfilename=0000\\:00\\:1f.7\nsize=64k\nioengine=ioswitch\n"), 0, &mut |_| {})
        else {
            panic!("opened a PCI device that does not exist")
        };
        let e = e.to_string();
        assert!(!e.contains("is a PCI address") && e.contains("0000:00:1f.7"), "{e}");
    }

    #[test]
    fn a_bare_size_names_a_file_as_in_fio_and_the_prefixes_keep_the_librarys_targets() {
        for (given, opened) in [
            ("128m", "./128m"),
            ("1GiB", "./1GiB"),
            ("12parsecs", "./12parsecs"),
            ("f", "f"),
            ("/var/tmp/128m", "/var/tmp/128m"),
            ("ramdisk:128m", "ramdisk:128m"),
            ("pci:0000:00:1f.7", "pci:0000:00:1f.7"),
            ("0000:00:1f.7", "0000:00:1f.7"),
        ] {
            assert_eq!(fio_file_name(given.to_string()), opened, "{given}");
        }
        // fio's spelling of the prefix: `\:` keeps the colon in the one file name.
        let p = prepare(&spec("[j]\nfilename=ramdisk\\:128k\nsize=64k\nioengine=ioswitch\n"), 0, &mut |_| {}).unwrap();
        assert_eq!(p.job.filename, "ramdisk:128k");
        assert_eq!(p.dev.geometry().bytes, 128 << 10, "a 128 KiB ramdisk");
    }

    fn scratch(test: &str) -> ioswitch_testkit::dirs::Scratch {
        ioswitch_testkit::dirs::Scratch::new(std::env::temp_dir(), &format!("ioswitch-run-{test}"))
    }

    #[test]
    fn directory_prefixes_the_file_name_and_the_default_name() {
        let s = scratch("dir");
        let d = s.dir().display();
        let p = prepare(&spec(&format!("[j]\ndirectory={d}\nsize=64k\nfilename=data\n")), 0, &mut |_| {}).unwrap();
        assert_eq!(p.job.filename, format!("{d}/data"));
        assert_eq!(std::fs::metadata(s.path("data")).unwrap().len(), 65536);
        let p = prepare(&spec(&format!("[jj]\ndirectory={d}:/elsewhere\nsize=64k\n")), 0, &mut |_| {}).unwrap();
        assert_eq!(p.job.filename, format!("{d}/jj.0.0"), "fio's name, in the first directory");
        assert!(s.dir().join("jj.0.0").exists());
        // Clones go round the list as in fio: 3 clones over two directories put c.0.0 and
        // c.2.0 in the first, c.1.0 in the second (fio 3.33 does the same).
        let other = scratch("dir-other");
        let o = other.dir().display();
        let p = prepare(&spec(&format!("[c]\ndirectory={d}:{o}\nsize=64k\nnumjobs=3\n")), 0, &mut |_| {}).unwrap();
        let names: Vec<&str> = p.clones.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, [format!("{o}/c.1.0"), format!("{d}/c.2.0")]);
    }

    #[test]
    fn a_null_job_opens_creates_and_lays_out_no_file() {
        // fio's null engine (FIO_DISKLESSIO): its file name is a name only.
        let s = scratch("nullfile");
        let f = s.path("never");
        let mut said = Vec::new();
        let p = prepare(&spec(&format!("[j]\nioengine=null\nfilename={f}\nsize=1m\n")), 0, &mut |m| {
            said.push(m.to_string())
        })
        .unwrap();
        assert!(!std::path::Path::new(&f).exists(), "{f} was created; {said:?}");
        assert!(!said.iter().any(|m| m.contains("Laying out")), "{said:?}");
        assert_eq!(p.dev.geometry().bytes, 1 << 20, "the job's region is its size");
        // No file gives it a size: size= is needed, with a file name or without.
        for text in [format!("[j]\nioengine=null\nfilename={f}\n"), "[j]\nioengine=null\n".to_string()] {
            let e = prepare(&spec(&text), 0, &mut |_| {}).map(drop).expect_err("refused").to_string();
            assert!(e.contains("ioengine=null needs size=BYTES"), "{e}");
        }
    }

    #[test]
    fn allow_file_create_0_refuses_a_missing_file_and_takes_an_existing_one() {
        let s = scratch("nocreate");
        let missing = s.path("missing");
        let e = prepare(&spec(&format!("[j]\nfilename={missing}\nsize=64k\nallow_file_create=0\n")), 0, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.fio:4") && e.contains("allow_file_create=0") && e.contains(&missing), "{e}");
        assert!(!std::path::Path::new(&missing).exists());
        let there = s.file("there", 65536);
        prepare(&spec(&format!("[j]\nfilename={there}\nsize=64k\nallow_file_create=0\n")), 0, &mut |_| {}).unwrap();
        // A write job's too small file is not removed (it could not be made anew): it is
        // extended, its data kept.
        let small = s.path("small");
        std::fs::write(&small, [7u8; 4096]).unwrap();
        let text = format!("[j]\nfilename={small}\nrw=write\nsize=64k\nallow_file_create=0\n");
        prepare(&spec(&text), 0, &mut |_| {}).unwrap();
        let data = std::fs::read(&small).unwrap();
        assert_eq!((data.len(), &data[..4096]), (65536, &[7u8; 4096][..]));
    }

    /// fio's `--readonly`: write and trim jobs are refused before anything runs; a job
    /// that reads runs on its file as it is, opened read-only, and is refused where it
    /// would create, lay out, extend, fill or remove the file, or open it for writing.
    #[test]
    fn readonly_refuses_writes_and_trims_and_keeps_every_file_as_it_is() {
        let s = scratch("readonly");
        let set = |args: String| JobSet::from_args(format!("--readonly --name=j {args}").split_whitespace());
        for rw in ["write", "randwrite", "rw", "randrw", "trim", "randtrim", "trimwrite"] {
            let e = set(format!("--rw={rw} --size=64k --filename=x")).unwrap_err().to_string();
            assert!(e.contains("j") && e.contains(&format!("rw={rw}")) && e.contains("--readonly"), "{rw}: {e}");
        }
        let e = JobSet::from_args(["--readonly=1", "--name=j"]).unwrap_err().to_string();
        assert!(e.contains("readonly") && e.contains("flag"), "{e}");
        let f = s.file("f", 65536);
        let before = std::fs::read(&f).unwrap();
        let prepared = |args: String| {
            let spec = set(args).unwrap().jobs.remove(0);
            assert!(spec.behaviour.read_only);
            prepare(&spec, 0, &mut |_| {})
        };
        let p = prepared(format!("--rw=randread --size=64k --filename={f}")).unwrap();
        assert!(p.dev.opts().rdonly, "--readonly opens read-only");
        drop(p);
        let missing = s.path("missing");
        for (args, file, what) in [
            (format!("--size=64k --filename={missing}"), &missing, "does not exist"),
            (format!("--size=128k --filename={f}"), &f, "holds 65536 bytes and the job (size, offset) needs 131072"),
            (format!("--size=64k --filename={f} --unlink=1"), &f, "unlink=1 would remove it"),
            (format!("--size=64k --filename={f} --fill_device=1"), &f, "fill_device=1"),
            (format!("--size=64k --filename={f} --ioswitch_opts=wronly=1"), &f, "ioswitch options (wronly=1"),
        ] {
            let Err(e) = prepared(format!("--ioengine=ioswitch {args}")) else { panic!("{args}: ran") };
            let e = e.to_string();
            assert!(e.contains(file.as_str()) && e.contains(what) && e.contains("--readonly"), "{args}: {e}");
        }
        assert!(!std::path::Path::new(&missing).exists(), "--readonly created {missing}");
        assert_eq!(std::fs::read(&f).unwrap(), before, "--readonly changed {f}");
        // Without --readonly the same command line is a job file option nobody knows.
        let e = JobSet::from_args(["--name=j", "--size=4k"]).and_then(|_| {
            let mut r = crate::jobfile::JobReader::new();
            r.read_str("t.fio", "[j]\nreadonly\n")?;
            r.finish()
        });
        let e = e.unwrap_err().to_string();
        assert!(e.contains("readonly") && e.contains("command-line option"), "{e}");
    }

    #[test]
    fn create_on_open_creates_the_file_without_laying_it_out() {
        let s = scratch("coo");
        for coo in [false, true] {
            let f = s.path(&format!("f{coo}"));
            let mut said = Vec::new();
            let text = format!("[j]\nfilename={f}\nsize=1m\ncreate_on_open={}\n", coo as u8);
            let p = prepare(&spec(&text), 0, &mut |m| said.push(m.to_string())).unwrap();
            let meta = std::fs::metadata(&f).unwrap();
            assert_eq!(meta.len(), 1 << 20, "create_on_open={coo}");
            use std::os::unix::fs::MetadataExt;
            let allocated = meta.blocks() * 512;
            assert_eq!(allocated < 1 << 20, coo, "create_on_open={coo}: {allocated} bytes allocated; {said:?}");
            assert_eq!(said.iter().any(|m| m.contains("Laying out")), !coo);
            assert_eq!(p.dev.geometry().bytes, 1 << 20);
        }
    }

    #[test]
    fn threads_is_accepted_as_fio_does_and_said_to_change_nothing() {
        let s = scratch("threads");
        let mut said = Vec::new();
        let f = s.path("f");
        let p =
            prepare(&spec(&format!("[j]\nfilename={f}\nsize=64k\nthreads=4\n")), 0, &mut |m| said.push(m.to_string()))
                .unwrap();
        assert_eq!(p.spec.numjobs, 1, "threads is not numjobs, in fio either");
        assert!(said.iter().any(|m| m.contains("tiobench") && m.contains("threads=4")), "{said:?}");
    }

    #[test]
    fn log_compression_is_said_to_keep_the_files_and_not_to_compress_memory() {
        let s = scratch("logz");
        let f = s.path("f");
        let mut said = Vec::new();
        let text = format!("[j]\nfilename={f}\nsize=64k\nwrite_lat_log=x\nlog_compression=1m\n");
        prepare(&spec(&text), 0, &mut |m| said.push(m.to_string())).unwrap();
        assert!(
            said.iter().any(|m| m.starts_with("log_compression=1048576") && m.contains("the files are the same")),
            "{said:?}"
        );
    }

    #[test]
    fn wait_for_starts_a_job_after_every_instance_of_its_waitee_ended() {
        let s = scratch("waitfor");
        let d = s.dir().display();
        let text = format!(
            "[global]\ndirectory={d}\nsize=1m\n[first]\nnumjobs=2\nrw=read\nruntime=300ms\ntime_based\n\
             [free]\nrw=read\nruntime=300ms\ntime_based\n[second]\nwait_for=first\nrw=read\nruntime=200ms\ntime_based\n"
        );
        let mut r = crate::jobfile::JobReader::new();
        r.read_str("t.fio", &text).unwrap();
        let set = r.finish().unwrap();
        let prepared: Vec<Prepared> = set.jobs.iter().map(|j| prepare(j, 0, &mut |_| {}).unwrap()).collect();
        let t0 = engine::now_ns();
        let report = run(prepared, &RunOpts::default());
        let took = Duration::from_nanos(engine::now_ns() - t0);
        assert!(report.jobs.iter().all(|j| j.results.iter().all(|r| r.error == 0)));
        assert_eq!(report.jobs.iter().map(|j| j.phase).collect::<Vec<_>>(), [0, 0, 0], "one phase: no stonewall");
        let second = &report.jobs[2].results[0];
        // second's 200 ms came after first's 300 ms: its clock started at least 250 ms
        // into the run (without the wait, the run would take ~300 ms and second's 200 ms
        // would start at once).
        assert!(took >= Duration::from_millis(500), "{took:?}");
        let late = took.as_nanos() as u64 - second.elapsed_ns;
        assert!(late >= 250_000_000, "second started {late} ns into a run of {took:?}");
    }

    /// Pages of `path` in the page cache (mincore over a mapping of the whole file).
    fn resident_pages(path: &str) -> usize {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        let page = 4096;
        // SAFETY: a read-only shared mapping of an open file, unmapped below; mincore
        // writes one byte per page into `vec`, which has that many.
        unsafe {
            let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
            assert_ne!(p, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(page)];
            assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
            libc::munmap(p, len);
            vec.iter().filter(|&&b| b & 1 != 0).count()
        }
    }

    #[test]
    fn invalidate_drops_the_files_pages_from_the_cache_and_0_keeps_them() {
        let candidates = [std::env::temp_dir(), "/var/tmp".into()];
        let (dir, _) = match ioswitch_testkit::dirs::disk_dir(&candidates, "invalidate") {
            Ok(d) => d,
            Err(why) => return eprintln!("skipped: the page cache of a memory file system cannot be dropped: {why}"),
        };
        let f = dir.join(format!("ioswitch-run-invalidate-{}", std::process::id())).display().to_string();
        for inv in [0, 1] {
            let _ = std::fs::remove_file(&f);
            // Laid out here (the writes leave its 256 pages cached), then invalidated or not.
            let p = prepare(&spec(&format!("[j]\nfilename={f}\nsize=1m\ninvalidate={inv}\n")), 0, &mut |_| {}).unwrap();
            let resident = resident_pages(&f);
            if inv == 0 {
                assert!(resident > 128, "invalidate=0 keeps the laid-out pages: {resident} of 256 resident");
            } else {
                assert_eq!(resident, 0, "invalidate=1 drops them");
            }
            drop(p);
        }
        let _ = std::fs::remove_file(&f);
    }

    #[test]
    fn unlink_removes_the_jobs_file_when_done() {
        let s = scratch("unlink");
        for unlink in [0, 1] {
            let f = s.path(&format!("f{unlink}"));
            let p = prepare(&spec(&format!("[j]\nfilename={f}\nsize=64k\nunlink={unlink}\n")), 0, &mut |_| {}).unwrap();
            let report = run(vec![p], &RunOpts::default());
            assert_eq!(report.jobs[0].results[0].read.ios, 16);
            assert_eq!(std::path::Path::new(&f).exists(), unlink == 0, "unlink={unlink}");
        }
    }

    #[test]
    fn exit_what_stops_the_group_the_running_jobs_or_the_whole_run() {
        let s = scratch("exitwhat");
        let d = s.dir().display();
        for what in ["group", "stonewall", "all"] {
            let text = format!(
                "[global]\ndirectory={d}\nsize=1m\nrw=read\n[short]\nnumber_ios=50\nexitall\nexit_what={what}\n\
                 [same]\nruntime=20s\ntime_based\n[other]\nnew_group\nruntime=1s\ntime_based\n\
                 [later]\nstonewall\nruntime=100ms\ntime_based\n"
            );
            let mut r = crate::jobfile::JobReader::new();
            r.read_str("t.fio", &text).unwrap();
            let set = r.finish().unwrap();
            let groups = set.group_ids();
            assert_eq!(groups, [0, 0, 1, 2], "short and same share a group; other and later have their own");
            let prepared: Vec<Prepared> =
                set.jobs.iter().zip(groups).map(|(j, g)| prepare(j, g, &mut |_| {}).unwrap()).collect();
            let report = run(prepared, &RunOpts::default());
            let res: Vec<&JobResult> = report.jobs.iter().map(|j| &j.results[0]).collect();
            assert!(res.iter().all(|r| r.error == 0), "{what}");
            let ms = |r: &JobResult| r.elapsed_ns / 1_000_000;
            // The job of short's group ends with it, whatever exit_what says.
            assert!(ms(res[1]) < 10_000, "{what}: 'same' ran {} ms", ms(res[1]));
            // Another group runs on with group; stonewall and all stop it.
            match what {
                "group" => assert!(ms(res[2]) >= 900, "group: 'other' ran {} ms", ms(res[2])),
                _ => assert!(ms(res[2]) < 900, "{what}: 'other' ran {} ms", ms(res[2])),
            }
            // The next stonewalled group runs unless exit_what=all ended the run.
            assert_eq!(res[3].read.ios == 0, what == "all", "{what}: 'later' did {} reads", res[3].read.ios);
        }
    }

    #[test]
    fn several_files_write_verify_loop_and_unlink_as_one_job() {
        let s = scratch("several");
        let d = s.dir().display();
        // Three files of 64 KiB written round robin, then every block of each verified.
        let text =
            format!("[j]\ndirectory={d}\nnrfiles=3\nfilesize=64k\nrw=randwrite\nverify=crc32c\nloops=2\nunlink=1\n");
        let p = prepare(&spec(&text), 0, &mut |_| {}).unwrap();
        assert_eq!(p.devices(0).len(), 3);
        let names: Vec<String> = (0..3).map(|i| format!("{d}/j.0.{i}")).collect();
        assert!(names.iter().all(|n| std::path::Path::new(n).exists()));
        let report = run(vec![p], &RunOpts::default());
        let r = &report.jobs[0].results[0];
        assert_eq!(r.error, 0, "{:?}", r.error_msg);
        // Two loops over 3 × 16 blocks, each loop's blocks verified when it ends: 96 and
        // 96, as fio 3.33 runs this job file. (This asked 96 and 48, one verify at the
        // end, until each pass was verified as fio's do_verify does.)
        assert_eq!((r.write.ios, r.verified), (96, 96));
        assert!(names.iter().all(|n| !std::path::Path::new(n).exists()), "unlink removes every file");
    }

    #[test]
    fn a_time_based_job_goes_over_its_files_again_until_the_time_is_up() {
        let s = scratch("several-tb");
        let d = s.dir().display();
        let text = format!(
            "[j]\ndirectory={d}\nnrfiles=2\nfilesize=16k\nrw=read\nfile_service_type=sequential\nruntime=100ms\ntime_based\n"
        );
        let report = run(vec![prepare(&spec(&text), 0, &mut |_| {}).unwrap()], &RunOpts::default());
        let r = &report.jobs[0].results[0];
        // 8 blocks per pass: a time-based job does many passes.
        assert!(r.error == 0 && r.read.ios > 16, "{:?} {}", r.error_msg, r.read.ios);
    }

    #[test]
    fn several_files_run_on_an_async_engine_a_queue_each_and_verify() {
        let s = scratch("several-async");
        let d = s.dir().display();
        for engine in ["libaio", "io_uring"] {
            let text = format!(
                "[j]\ndirectory={d}\nnrfiles=3\nfilesize=64k\nrw=randwrite\nverify=crc32c\nioengine={engine}\niodepth=4\n"
            );
            let report = run(vec![prepare(&spec(&text), 0, &mut |_| {}).unwrap()], &RunOpts::default());
            let r = &report.jobs[0].results[0];
            assert_eq!(r.error, 0, "{engine}: {:?}", r.error_msg);
            // Every block of the three files written once, then read back and checked.
            assert_eq!((r.write.ios, r.verified, r.queue.submitted), (48, 48, 48), "{engine}");
            // verify_backlog over the files: each block checked once, as it goes (the
            // verify phase finds nothing left) and the reads counted.
            let text = format!("{text}verify_backlog=5\n");
            let report = run(vec![prepare(&spec(&text), 0, &mut |_| {}).unwrap()], &RunOpts::default());
            let r = &report.jobs[0].results[0];
            assert_eq!((r.error, r.write.ios, r.verified, r.read.ios), (0, 48, 48, 48), "{engine}: {:?}", r.error_msg);
        }
    }

    #[test]
    fn offloaded_workers_serve_the_file_the_job_picked_and_sync_it() {
        let s = scratch("several-offload");
        let d = s.dir().display();
        for engine in ["psync", "libaio"] {
            for service in ["roundrobin", "sequential", "random"] {
                let text = format!(
                    "[j]\ndirectory={d}\nnrfiles=3\nfilesize=64k\nrw=randwrite\nverify=crc32c\nioengine={engine}\niodepth=4\nio_submit_mode=offload\nfile_service_type={service}\nfsync=5\n"
                );
                let report = run(vec![prepare(&spec(&text), 0, &mut |_| {}).unwrap()], &RunOpts::default());
                let r = &report.jobs[0].results[0];
                let what = format!("{engine} {service}");
                assert_eq!(r.error, 0, "{what}: {:?}", r.error_msg);
                // Every block of the three files written once by the workers, then read
                // back and checked file by file: each write went to the file it was
                // generated for (a block written to the wrong file fails its check).
                assert_eq!((r.write.ios, r.verified, r.queue.submitted), (48, 48, 48), "{what}");
                // fsync=5 over 48 writes: after the 5th, 10th … 45th, none after the last.
                assert_eq!(r.sync.samples(), 9, "{what}");
                // verify_backlog over the files under offload: each block checked once.
                let text = format!("{text}verify_backlog=5\n");
                let report = run(vec![prepare(&spec(&text), 0, &mut |_| {}).unwrap()], &RunOpts::default());
                let r = &report.jobs[0].results[0];
                assert_eq!(
                    (r.error, r.write.ios, r.verified, r.read.ios),
                    (0, 48, 48, 48),
                    "{what}: {:?}",
                    r.error_msg
                );
            }
        }
    }

    #[test]
    fn clones_of_a_job_without_a_file_each_have_their_own_as_fio() {
        let s = scratch("clones");
        let d = s.dir().display();
        for coo in [0, 1] {
            let text = format!("[j{coo}]\ndirectory={d}\nsize=64k\nnumjobs=3\nrw=write\ncreate_on_open={coo}\n");
            let p = prepare(&spec(&text), 0, &mut |_| {}).unwrap();
            let names: Vec<String> = (0..3).map(|n| format!("{d}/j{coo}.{n}.0")).collect();
            assert_eq!(p.job.filename, names[0]);
            assert_eq!(p.clones.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>(), names[1..]);
            let report = run(vec![p], &RunOpts::default());
            assert!(report.jobs[0].results.iter().all(|r| r.error == 0 && r.write.ios == 16));
            for n in &names {
                // Each instance wrote its own file (create_on_open: sparse until written).
                use std::os::unix::fs::MetadataExt;
                let m = std::fs::metadata(n).unwrap();
                assert!(
                    m.len() == 65536 && m.blocks() * 512 >= 65536,
                    "{n}: {} bytes, {} allocated",
                    m.len(),
                    m.blocks() * 512
                );
            }
        }
        // A job that names its file shares it, as in fio.
        let f = s.path("shared");
        let p = prepare(&spec(&format!("[k]\nfilename={f}\nsize=64k\nnumjobs=2\n")), 0, &mut |_| {}).unwrap();
        assert!(p.clones.is_empty());
    }

    #[test]
    fn a_filesize_range_lays_out_a_file_of_a_size_drawn_from_it() {
        let s = scratch("filesize");
        let d = s.dir().display();
        let mut sizes = std::collections::BTreeSet::new();
        for seed in 1..=4 {
            let name = format!("f{seed}");
            let text = format!("[j]\ndirectory={d}\nfilename={name}\nfilesize=64k-1m\nrandseed={seed}\n");
            let p = prepare(&spec(&text), 0, &mut |_| {}).unwrap();
            let len = std::fs::metadata(s.path(&name)).unwrap().len();
            assert!((65536..1 << 20).contains(&len) && len % 4096 == 0, "{len}");
            assert_eq!(p.dev.geometry().bytes, len, "the job's region is its file");
            sizes.insert(len);
        }
        assert!(sizes.len() > 1, "seeds draw different sizes: {sizes:?}");
    }

    #[test]
    fn zonemode_zbd_on_a_device_that_is_not_zoned_is_refused_at_its_line() {
        let s = scratch("zbd");
        let d = s.dir().display();
        let text = format!("[j]\ndirectory={d}\nfilename=f\nsize=1m\nrw=write\nzonemode=zbd\n");
        let e = prepare(&spec(&text), 0, &mut |_| {}).unwrap_err().to_string();
        assert!(
            e.starts_with("t.fio:6: job 'j': zonemode=zbd needs a zoned device:") && e.ends_with("is not zoned"),
            "{e}"
        );
        assert!(!std::path::Path::new(&s.path("f")).exists(), "refused before the file is created and laid out");
    }
}
