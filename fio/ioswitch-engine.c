/*
 * fio external ioengine on ioswitch's C API: every ioswitch interface (io_uring, libaio,
 * POSIX aio, thread pool, emu, nil, psync, ...) under fio's job files, statistics and
 * verification.
 *
 *   fio --ioengine=external:/path/to/ioswitch-engine.so --thread=1 \
 *       --ioswitch_async=io_uring --filename=/tmp/data --size=64m --rw=randread ...
 *
 * Options (engine specific):
 *   ioswitch_async=IFACE   async interface; the engine queues commands (default mode)
 *   ioswitch_sync=IFACE    sync interface; without ioswitch_async the engine is
 *                          synchronous (each command completes inside ->queue())
 *   ioswitch_admin=IFACE   admin interface
 *   ioswitch_opts=K=V,...  further ioswitch device options (sqpoll=1, threads=8, ...);
 *                          fio's direct=1 adds direct=1; ioswitch_async=io_uring adds
 *                          single_issuer=1 unless they name single_issuer, sqpoll,
 *                          sqpoll_cpu or a reap_spin other than 0 (see
 *                          single_issuer_default)
 *   ioswitch_inline=1      at iodepth=1 only (refused at init otherwise): complete
 *                          each command inside ->queue() and run as a synchronous
 *                          engine (no slat), as fio's null engine does at iodepth=1
 * thread=1 is required: the library runs helper threads and keeps per-process state
 * that must not be split across fio's forked job processes.
 *
 * Timestamps follow fio's rules. With fio's default iodepth_batch=1 (fio commits after
 * every ->queue()) the job runs without a ->commit() hook, as xNVMe's engine does:
 * ->queue() pushes each command to the kernel itself (reads and writes with
 * ioswitch_queue_submit_at_reap, one call that also takes back what has completed by
 * then, nil: the command itself, for the next ->getevents() to hand over without a call
 * into ioswitch; at iodepth=1 on the default io_uring ring only while that finds the
 * command: after a look that finds none ->queue() only queues the next commands, and the
 * ->getevents() right after each submits it with its wait, see iosw_queue_push1), and
 * fio takes the issue time after ->queue(), records the slat
 * (io_u_queued()) and the submit depth. fio then also counts a completion of depth 1 for
 * every ->queue(), which td_io_getevents() counts again: ->queue() takes that one back
 * (uncount_complete), so "IO depths: complete" stays whole. With a larger batch the
 * engine keeps the hook, as fio's libaio and io_uring engines do: ->queue() only queues
 * the command (ioswitch_queue_submit_at); ->commit() pushes every queued command
 * (ioswitch_queue_commit: one system call per queue where the interface batches, so
 * iodepth_batch_submit batches for real), then takes the issue time once for the batch
 * and records each command's slat with fio's io_u_queued(), and its submit depth. fio
 * takes the completion time when ->getevents() returns (clat = complete - issue).
 * ->getevents() reaps with ioswitch_queue_reap_at, which writes each completion once, in
 * place, into the engine's array that ->event() reads (no callbacks): what has
 * completed, up to fio's maximum, waiting only for what fio's minimum still lacks; the
 * library keeps what comes beyond the maximum for the next call. In the
 * synchronous modes (ioswitch_sync alone, or ioswitch_inline=1) fio takes the issue
 * time before ->queue() and there is no slat, as for fio's psync; there ->queue()
 * records the submit and complete depths of each command itself (fio does that only
 * for engines without a ->commit() hook), so fio's "IO depths" report stays whole.
 *
 * Buffers: in the queueing modes (ioswitch_async, also with ioswitch_inline=1) fio's I/O
 * buffers are replaced, in ->post_init(), by slots of one buffer from ioswitch_buf_alloc
 * (one page-aligned slot of max_bs per io_u, initial contents copied), made an ioswitch
 * region and attached to each file's queue: the lean path of the C API, where a command
 * names its data by address inside a slot and carries the io_u as its 64-bit user data
 * (ioswitch_queue_submit_at / ioswitch_queue_reap_at: no buffer handle or per-command
 * context looked up per I/O; the library keeps a slot in flight from being submitted
 * again and the region from being freed). A job on a PCI address keeps the classic path
 * (one buffer of the device's DMA memory per io_u, ioswitch_queue_submit /
 * ioswitch_queue_reap), because the user-space driver needs its own buffers, not
 * borrowed ranges of one. The synchronous mode keeps fio's
 * buffers and passes them with ioswitch_pass_raw (caller memory for the length of the
 * call, like pread(2)); it asks fio for page-aligned buffers (FIO_RAWIO), as ioswitch's
 * own would be, so that direct I/O accepts them.
 *
 * A PCI address (0000:00:05.0, the user-space driver) takes only the device's own DMA
 * memory: the engine opens it in ->post_init() and allocates the buffers there from it
 * (queueing mode only), and keeps it open until ->cleanup().
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fio.h"
#include "optgroup.h"
#include "os/linux/io_uring.h"

#include <ioswitch.h>

#ifndef BLKFLSBUF
#define BLKFLSBUF _IO(0x12, 97)
#endif

struct iosw_options {
	void *pad; /* fio stores the thread_data pointer here */
	char *async;
	char *sync;
	char *admin;
	char *opts;
	unsigned int inline_qd1;
};

/* A string option of the engine: fio stores the text; ioswitch checks it at open. */
#define IOSW_STR_OPTION(key, title, field, text) \
	{ \
		.name = key, .lname = title, .type = FIO_OPT_STR_STORE, \
		.off1 = offsetof(struct iosw_options, field), .help = text, \
		.category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID, \
	}

static struct fio_option options[] = {
	IOSW_STR_OPTION("ioswitch_async", "ioswitch async interface", async,
			"ioswitch async interface: nil, emu, thrpool, libaio, io_uring, posix, "
			"io_uring_cmd (default: the device's default)"),
	IOSW_STR_OPTION("ioswitch_sync", "ioswitch sync interface", sync,
			"ioswitch sync interface: psync, block, ramdisk, nvme; without "
			"ioswitch_async the engine runs synchronously on it"),
	IOSW_STR_OPTION("ioswitch_admin", "ioswitch admin interface", admin,
			"ioswitch admin interface: emulated, nvme"),
	IOSW_STR_OPTION("ioswitch_opts", "ioswitch device options", opts,
			"further ioswitch device options, comma separated key=value "
			"(sqpoll=1, threads=8, register_buffers=1, ...)"),
	{
		.name = "ioswitch_inline",
		.lname = "ioswitch inline completion at iodepth=1",
		.type = FIO_OPT_BOOL,
		.off1 = offsetof(struct iosw_options, inline_qd1),
		.def = "0",
		.help = "at iodepth=1, complete each command inside ->queue() (submit, commit, "
			"wait) and run as a synchronous engine, as fio's null engine does at "
			"iodepth=1 (no slat)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = NULL,
	},
};

/*
 * One open file (a fio_file belongs to one job thread): its device and, in async mode,
 * its queue.
 */
struct iosw_file {
	struct ioswitch_dev *dev;
	struct ioswitch_queue *q;
	struct thread_data *td; /* the job that opened it */
	/*
	 * iosw_queue's fast path, by io_u->ddir & 7: the file's prebuilt read and write
	 * commands (rw[]) in the synchronous mode with file-set commands, NULL for every
	 * other direction and mode.
	 */
	struct ioswitch_cmd *fast[8];
	/*
	 * The same for the queueing modes (async, also inline) with file-set commands: the
	 * reads and writes queue_queued hands to ioswitch_queue_submit_at first thing.
	 */
	struct ioswitch_cmd *qfast[8];
	struct ioswitch_geo geo;
	int nvm; /* NVM (LBA) commands: NVMe char devices; others take file-set commands */
	int borrowed; /* dev is the engine's PCI device (iosw_data.pci): not closed here */
	uint32_t nsid;
	unsigned int lba_shift; /* log2(geo.lba_size) */
	/*
	 * The read and write commands, built once at open: per I/O only the dwords that
	 * address the data change (ioswitch copies a command at submission, so one per
	 * direction is enough).
	 */
	struct ioswitch_cmd rw[2];
	/*
	 * queue_push's max, how far into iosw_data.evs ->queue() may take completions
	 * back: evcap on a nil queue, whose every command completes inside its ->queue()
	 * (room for each, so that ioswitch hands it straight over: front()); cap on the
	 * others, where a ->queue() that finds the array full only commits, and the reaps
	 * come in batches (at iodepth=16 on io_uring, letting every ->queue() reap cost
	 * 60 instructions per I/O more: docs/BENCHMARKS.md, "nilqd16").
	 */
	unsigned int room;
};

/* iosw_data.evs holds EVS_SPAN x iodepth events (hand_over, front). */
#define EVS_SPAN 4u

/* Per job thread. */
struct iosw_data {
	int sync_mode;
	int inline_mode; /* async interface, completed inside ->queue() */
	char devopts[1024];
	/*
	 * The classic path's completions (PCI address): the last ->getevents() reaped
	 * them (ioswitch_queue_reap writes them here in place, iodepth entries at most);
	 * ->event() reads the io_u from each (fio reads every event before it queues or
	 * reaps again).
	 */
	struct ioswitch_cpl *cpls;
	/*
	 * The lean path's completions (ioswitch_queue_reap_at writes them here; ->event()
	 * reads the io_u from each user_data), when `region` is set.
	 */
	struct ioswitch_event *evs;
	/*
	 * evs[rhead, rtail): completions ioswitch_queue_submit_at_reap handed back in
	 * ->queue() (push_now), not yet given to fio: ->getevents() gives them first,
	 * without a call into ioswitch. evbase: where the events of the last ->getevents()
	 * start, which ->event() indexes from. evs holds evcap (EVS_SPAN x cap) events;
	 * ->queue() writes at most up to the file's room (evcap on a nil queue), and
	 * hand_over keeps rtail at most evlast (evcap - cap), so that every completion
	 * ->queue() can take back before the next ->getevents() fits (see front()). A reap
	 * from ioswitch writes from evs[0], at most cap.
	 */
	uint32_t rhead, rtail, evbase, evcap, evlast;
	/*
	 * The lean path (every queueing job but one on a PCI address): all io_u buffers are
	 * slots of one ioswitch buffer (rbuf), registered once as a region and attached to
	 * each file's queue; commands name their data by address (ioswitch_queue_submit_at).
	 */
	struct ioswitch_region *region;
	void *rbuf;
	unsigned int cap;
	/* Queued by ->queue() and not yet committed (async mode), at most iodepth. */
	struct io_u **pending;
	unsigned int npending;
	/*
	 * fio commits after every ->queue() (iodepth_batch=1, its default) and the lean path
	 * is on (cleared for the classic path in ->post_init()): ->queue() pushes every
	 * command at once (reads and writes with ioswitch_queue_submit_at_reap, one call
	 * instead of two, taking back what has completed into evs[rtail..]; at iodepth=1 on
	 * the default io_uring ring not always, see iosw_queue_push1), and the job has no
	 * ->commit() hook.
	 */
	int push_now;
	/*
	 * With push_now the job runs without a ->commit() hook: td->io_ops is `noop`, a copy
	 * of fio's ops for this engine with `commit` NULL (and this mode's own ->queue() and
	 * ->event()), and `hooked` the ops fio loaded (put back in ->cleanup()). fio then takes the issue time, records the slat
	 * (io_u_queued()) and the submit depth itself, as for any engine without the hook;
	 * see uncount_complete() for the one count it gets wrong.
	 */
	struct ioengine_ops *noop, *hooked;
	/* The engine's default io_uring ring (single_issuer_default): DEFER_TASKRUN. */
	int defers;
	/* push_now's ->queue(): iosw_queue_push, or iosw_queue_push1 (see there). */
	enum fio_q_status (*push)(struct thread_data *, struct io_u *);
	/*
	 * iosw_queue_push1: how many more submissions go without a look for completions
	 * (the last look found none).
	 */
	unsigned int unlooked;
	/*
	 * OWED_COMPLETE, OWED_SUBMIT: a count of depth 1 fio adds after the last ->queue()
	 * returned that ->queue() could not take back beforehand (its bucket was 0: taking
	 * it back would have shown fio's other threads a wrapped counter); the next call
	 * into the engine takes it back (owe(), settle()).
	 */
	unsigned int owed;
	/*
	 * A reap that failed after completions had been reaped in the same ->getevents()
	 * (several files, or completions ->queue() took back): those go to fio first (the
	 * call returns their count), and this negative errno at the next ->getevents(),
	 * already logged and recorded. 0 when none is owed.
	 */
	int reap_err;
	/* Open files with a queue, for ->getevents(). */
	struct iosw_file **open;
	unsigned int nopen;
	/* ioswitch buffers that replaced fio's, by io_u index (not in sync_mode). */
	void **bufs;
	unsigned int nbufs;
	int reported;
	/*
	 * The job's PCI address, opened in ->post_init() because the user-space driver
	 * takes only its own DMA memory as buffers, and kept open until ->cleanup(): a
	 * controller opens once per process, and buffers outlive fio's close and reopen of
	 * the file (between a write phase and its verify).
	 */
	struct ioswitch_dev *pci;
	char pci_name[64];
};

static int commit_pending(struct thread_data *td, struct iosw_data *ed);
static void settle(struct thread_data *td, struct iosw_data *ed);
static enum fio_q_status iosw_queue_push(struct thread_data *td, struct io_u *io_u);
static enum fio_q_status iosw_queue_push1(struct thread_data *td, struct io_u *io_u);
static enum fio_q_status iosw_queue_offload(struct thread_data *td, struct io_u *io_u);
static struct io_u *iosw_event_lean(struct thread_data *td, int event);

/* A failed push of n queued commands: logged; returns err. */
static int __attribute__((noinline, cold)) commit_failed(unsigned int n, int err)
{
	log_err("ioswitch: committing %u queued commands (ioswitch_queue_commit): %s\n", n,
		ioswitch_last_error());
	return err;
}

static int is_pci_address(const char *name);

static int iosw_fail(struct thread_data *td, int err, const char *func)
{
	log_err("ioswitch: %s: %s\n", func, ioswitch_last_error());
	td_vmsg(td, err, ioswitch_last_error(), func);
	return 1;
}

static void append(char *dst, size_t size, const char *key, const char *val)
{
	size_t len = strlen(dst);

	if (!val || !*val)
		return;
	snprintf(dst + len, size - len, "%s%s%s", len ? "," : "", key, val);
}

/*
 * Where the comma-separated ioswitch options opts set key (key=..., or key alone): the
 * character after the key ('=' before its value, ',' or the end for a bare key); NULL
 * when they do not.
 */
static const char *opt_at(const char *opts, const char *key)
{
	size_t len = strlen(key);
	const char *p = opts;

	while (p && *p) {
		if (!strncmp(p, key, len) && (p[len] == '=' || p[len] == ',' || !p[len]))
			return p + len;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return NULL;
}

/* Whether the comma-separated ioswitch options opts set key (key=..., or key alone). */
static int opt_named(const char *opts, const char *key)
{
	return opt_at(opts, key) != NULL;
}

/*
 * Whether the job's ioswitch_opts ask the library to spin in its reap: reap_spin with a
 * duration other than zero (reap_spin=0 waits in the kernel at once, the default). A value
 * the library does not take is not judged here: the device's open refuses it by name.
 */
static int reap_spins(const char *opts)
{
	const char *p = opt_at(opts, "reap_spin");
	char *end;

	if (!p || *p != '=')
		return 0;
	p++;
	return !(strtoull(p, &end, 10) == 0 && end != p);
}

/*
 * Whether this kernel sets up an io_uring with SINGLE_ISSUER | DEFER_TASKRUN (Linux 6.1),
 * asked of the kernel once with a ring of 2 entries (what the library's single_issuer=1
 * needs, and refuses at open without).
 */
static int kernel_defers_task_work(void)
{
	static int known = -1; /* fio's job threads may ask at once: each gets the same answer */
	struct io_uring_params p;
	int fd, ok = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (ok >= 0)
		return ok;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	fd = syscall(__NR_io_uring_setup, 2, &p);
	if (fd >= 0)
		close(fd);
	ok = fd >= 0;
	__atomic_store_n(&known, ok, __ATOMIC_RELAXED);
	return ok;
}

/*
 * The engine's default for async=io_uring: rings with SINGLE_ISSUER | DEFER_TASKRUN (the
 * library's single_issuer=1), as fio's own io_uring engine sets up its rings: each fio
 * thread creates its queues (->open_file) and is the only one to use them. Not where the
 * job's ioswitch_opts names single_issuer (single_issuer=0 keeps the library's default
 * ring) or an SQPOLL thread (which excludes deferred task work), not where they ask for a
 * spinning reap (reap_spin other than 0: on a DEFER_TASKRUN ring no completion reaches the
 * CQ ring until the task enters the kernel, so a spin would only wait for the kernel's
 * taskrun flag and then enter; the library's default ring posts completions from the
 * kernel's own context, where the spin sees them: xNVMe's io_uring backend, which
 * busy-polls, also sets up its rings without DEFER_TASKRUN), not with
 * io_submit_mode=offload (fio's worker threads then submit to a queue the job's thread
 * created), and not on a kernel without it (before Linux 6.1), where fio's engine falls
 * back the same way.
 */
static int single_issuer_default(struct thread_data *td, const struct iosw_options *o)
{
	return o->async && !strcmp(o->async, "io_uring") && !opt_named(o->opts, "single_issuer") &&
	       !opt_named(o->opts, "sqpoll") && !opt_named(o->opts, "sqpoll_cpu") &&
	       !reap_spins(o->opts) && td->o.io_submit_mode != IO_MODE_OFFLOAD && kernel_defers_task_work();
}

/* A failed ->init() (its message logged): the job's error, and what init allocated freed. */
static int __attribute__((cold)) init_failed(struct thread_data *td, struct iosw_data *ed, int err,
					     const char *why)
{
	td_vmsg(td, err, why, "init");
	td->io_ops_data = NULL;
	free(ed->cpls);
	free(ed->evs);
	free(ed->pending);
	free(ed->open);
	free(ed);
	return 1;
}

static int iosw_init(struct thread_data *td)
{
	struct iosw_options *o = td->eo;
	struct iosw_data *ed;
	unsigned int depth = td->o.iodepth ? td->o.iodepth : 1;

	if (!td->o.use_thread) {
		log_err("ioswitch: the ioswitch engine needs thread=1 (add --thread=1 or "
			"thread=1 to the job): the library keeps per-process state and helper "
			"threads that fio's forked job processes must not split\n");
		td_vmsg(td, EINVAL, "the ioswitch engine needs thread=1", "init");
		return 1;
	}
	ed = calloc(1, sizeof(*ed));
	if (!ed) {
		log_err("ioswitch: init: no memory for the engine's job data\n");
		td_vmsg(td, ENOMEM, "no memory for the engine's job data", "init");
		return 1;
	}
	ed->cap = depth;
	ed->cpls = calloc(depth, sizeof(*ed->cpls));
	ed->evcap = EVS_SPAN * depth;
	ed->evlast = ed->evcap - depth;
	ed->evs = calloc(ed->evcap, sizeof(*ed->evs));
	ed->pending = calloc(depth, sizeof(*ed->pending));
	ed->open = calloc(td->o.nr_files ? td->o.nr_files : 1, sizeof(*ed->open));
	if (!ed->cpls || !ed->evs || !ed->pending || !ed->open) {
		log_err("ioswitch: init: no memory for the job's completion arrays (iodepth %u)\n", depth);
		return init_failed(td, ed, ENOMEM, "no memory for the job's completion arrays");
	}
	ed->sync_mode = o->sync && *o->sync && !(o->async && *o->async);
	append(ed->devopts, sizeof(ed->devopts), "sync=", o->sync);
	append(ed->devopts, sizeof(ed->devopts), "async=", o->async);
	append(ed->devopts, sizeof(ed->devopts), "admin=", o->admin);
	append(ed->devopts, sizeof(ed->devopts), "", o->opts);
	ed->defers = single_issuer_default(td, o);
	if (ed->defers)
		append(ed->devopts, sizeof(ed->devopts), "single_issuer=", "1");
	if (td->o.odirect && (!o->opts || !strstr(o->opts, "direct")))
		append(ed->devopts, sizeof(ed->devopts), "direct=", "1");
	/* fio's own guard covers block devices only; the library's covers /dev/ngXnY too. */
	if (td->o.allow_mounted_write && (!o->opts || !strstr(o->opts, "allow_mounted_write")))
		append(ed->devopts, sizeof(ed->devopts), "allow_mounted_write=", "1");
	/*
	 * As fio opens the files of its own engines (filesetup.c, generic_open_file): a job
	 * that neither writes nor trims, and every job under --readonly, opens its files
	 * read-only, unless ioswitch_opts name an open mode themselves. Then the library also
	 * refuses any command that could write, passthrough included.
	 */
	if ((read_only || (!td_write(td) && !td_trim(td))) && !opt_named(o->opts, "rdonly") &&
	    !opt_named(o->opts, "wronly") && !opt_named(o->opts, "create") &&
	    !opt_named(o->opts, "truncate") && !opt_named(o->opts, "size"))
		append(ed->devopts, sizeof(ed->devopts), "rdonly=", "1");
	td->io_ops_data = ed;

	if (o->inline_qd1 && !ed->sync_mode && depth > 1) {
		log_err("ioswitch: ioswitch_inline=1 needs iodepth=1 (this job has iodepth=%u): "
			"inline completion runs one command at a time inside ->queue(); drop "
			"ioswitch_inline or set iodepth=1\n", depth);
		return init_failed(td, ed, EINVAL, "ioswitch_inline=1 needs iodepth=1");
	}
	if (!ed->sync_mode && td->o.io_submit_mode == IO_MODE_OFFLOAD) {
		/*
		 * fio's own io_uring engine is refused the same way (FIO_NO_OFFLOAD,
		 * ioengines.c); through this engine an async queue under fio's offload workers
		 * spun (io_uring, libaio) or overran its depth (emu) instead of completing.
		 */
		log_err("ioswitch: ioswitch_async=%s can't be used with io_submit_mode=offload: "
			"fio's offloaded submit wants a sync engine; use ioswitch_sync=... (e.g. "
			"ioswitch_sync=psync) or io_submit_mode=inline\n", o->async);
		return init_failed(td, ed, EINVAL, "ioswitch_async can't be used with io_submit_mode=offload");
	}
	ed->inline_mode = !ed->sync_mode && o->inline_qd1;
	/* fio's init.c has set iodepth_batch (1 by default; 0 became iodepth) by now. */
	ed->push_now = !ed->sync_mode && !ed->inline_mode && td->o.iodepth_batch == 1;
	if (ed->sync_mode || ed->inline_mode) {
		/* Like fio's own synchronous engines: this job's ->queue() completes. */
		td->flags |= (unsigned long long)FIO_SYNCIO << TD_ENG_FLAG_SHIFT;
		if (ed->sync_mode && td->o.io_submit_mode == IO_MODE_OFFLOAD) {
			/* fio's submit workers call ->queue() at once: iosw_queue_offload. */
			ed->noop = malloc(sizeof(*ed->noop));
			if (!ed->noop) {
				log_err("ioswitch: init: no memory for the job's copy of the engine's ops\n");
				return init_failed(td, ed, ENOMEM, "no memory for the job's copy of the engine's ops");
			}
			*ed->noop = *td->io_ops;
			ed->noop->queue = iosw_queue_offload;
			ed->hooked = td->io_ops;
			td->io_ops = ed->noop;
		}
	} else if (ed->push_now) {
		/* Every command reaches the kernel in ->queue(): no ->commit() hook. */
		ed->noop = malloc(sizeof(*ed->noop));
		if (!ed->noop) {
			log_err("ioswitch: init: no memory for the job's copy of the engine's ops\n");
			return init_failed(td, ed, ENOMEM, "no memory for the job's copy of the engine's ops");
		}
		*ed->noop = *td->io_ops;
		ed->noop->commit = NULL;
		/*
		 * This mode's own ->queue() and ->event(), without the other modes' tests;
		 * at iodepth=1 on the engine's default io_uring ring, the one that looks for
		 * completions while looks find them.
		 */
		ed->push = depth == 1 && ed->defers ? iosw_queue_push1 : iosw_queue_push;
		ed->noop->queue = ed->push;
		ed->noop->event = iosw_event_lean;
		ed->hooked = td->io_ops;
		td->io_ops = ed->noop;
	} else {
		/* ->commit() takes the issue time when the commands reach the kernel. */
		td->flags |= (unsigned long long)FIO_ASYNCIO_SETS_ISSUE_TIME << TD_ENG_FLAG_SHIFT;
	}
	if (ed->sync_mode) {
		/*
		 * fio's own buffers carry the data (ioswitch_pass_raw): have fio align them
		 * to the page (init_io_u, after ->init()), as it does for direct=1, also when
		 * direct I/O comes from ioswitch_opts only.
		 */
		td->flags |= (unsigned long long)FIO_RAWIO << TD_ENG_FLAG_SHIFT;
	}
	return 0;
}

static void iosw_cleanup(struct thread_data *td)
{
	struct iosw_data *ed = td->io_ops_data;

	if (!ed)
		return;
	/* Every file is closed (its queue terminated, the region detached) by now. */
	if (ed->region && ioswitch_region_free(ed->region))
		log_err("ioswitch: %s\n", ioswitch_last_error());
	else if (ed->rbuf && ioswitch_buf_free(ed->rbuf))
		log_err("ioswitch: %s\n", ioswitch_last_error());
	free(ed->cpls);
	free(ed->evs);
	free(ed->pending);
	free(ed->open);
	free(ed->bufs);
	if (ed->pci)
		ioswitch_dev_close(ed->pci);
	/* fio reads td->io_ops after this (free_ioengine): its own ops again. */
	if (ed->noop) {
		td->io_ops = ed->hooked;
		free(ed->noop);
	}
	free(ed);
	td->io_ops_data = NULL;
}

/* The job's commit hook back (the classic path commits in ->commit()). */
static void use_commit_hook(struct thread_data *td, struct iosw_data *ed)
{
	ed->push_now = 0;
	if (ed->noop) {
		td->io_ops = ed->hooked;
		free(ed->noop);
		ed->noop = NULL;
	}
	td->flags |= (unsigned long long)FIO_ASYNCIO_SETS_ISSUE_TIME << TD_ENG_FLAG_SHIFT;
}

/*
 * The lean path's buffers: one ioswitch buffer cut into page-aligned slots of max_bs
 * (rounded up to the page), one per io_u, made a region (ioswitch_region_new) that each
 * file's queue attaches at open. fio's contents are copied.
 */
static int lean_buffers(struct thread_data *td, struct iosw_data *ed, unsigned long long max_bs,
			unsigned int n)
{
	unsigned long long slot = (max_bs + page_size - 1) / page_size * page_size;
	unsigned int i;
	int err;

	if (!slot)
		slot = page_size;
	ed->rbuf = ioswitch_buf_alloc(NULL, slot * (n ? n : 1));
	if (!ed->rbuf)
		return iosw_fail(td, ENOMEM, "ioswitch_buf_alloc");
	err = ioswitch_region_new(ed->rbuf, slot, &ed->region);
	if (err)
		return iosw_fail(td, -err, "ioswitch_region_new");
	for (i = 0; i < n; i++) {
		struct io_u *io_u = td->io_u_all.io_us[i];
		char *buf = (char *)ed->rbuf + (unsigned long long)i * slot;

		if (!io_u->buf)
			continue;
		memcpy(buf, io_u->buf, max_bs);
		io_u->buf = buf;
	}
	return 0;
}

/*
 * Queueing modes: swaps fio's I/O buffers for ioswitch buffers, keeping their contents.
 * The synchronous mode passes fio's own buffers (ioswitch_pass_raw).
 */
static int iosw_post_init(struct thread_data *td)
{
	struct iosw_data *ed = td->io_ops_data;
	unsigned long long max_bs = td_max_bs(td);
	unsigned int i, n = td->io_u_all.nr;
	struct fio_file *f;
	int err;

	for_each_file(td, f, i) {
		if (!is_pci_address(f->file_name))
			continue;
		if (ed->pci || td->o.nr_files > 1) {
			log_err("ioswitch: %s: a job on a PCI address has that one file only\n", f->file_name);
			td_vmsg(td, EINVAL, "one file per job on a PCI address", "post_init");
			return 1;
		}
		if (ed->sync_mode) {
			log_err("ioswitch: %s: a PCI address takes the device's DMA buffers, which the "
				"engine uses in its queueing mode only: drop ioswitch_sync, or add "
				"ioswitch_async=vfio\n", f->file_name);
			td_vmsg(td, EINVAL, "PCI address in the synchronous mode", "post_init");
			return 1;
		}
		if (strlen(f->file_name) >= sizeof(ed->pci_name))
			return iosw_fail(td, ENAMETOOLONG, "PCI address");
		err = ioswitch_dev_open(f->file_name, ed->devopts, &ed->pci);
		if (err)
			return iosw_fail(td, -err, "ioswitch_dev_open");
		strcpy(ed->pci_name, f->file_name);
	}
	if (ed->sync_mode)
		return 0;
	if (!ed->pci)
		return lean_buffers(td, ed, max_bs, n);
	use_commit_hook(td, ed); /* the classic path: no ioswitch_queue_submit_at_reap */
	ed->bufs = calloc(n ? n : 1, sizeof(*ed->bufs));
	if (!ed->bufs)
		return 1;
	ed->nbufs = n;
	for (i = 0; i < n; i++) {
		struct io_u *io_u = td->io_u_all.io_us[i];
		void *buf;

		if (!io_u->buf)
			continue;
		buf = ioswitch_buf_alloc(ed->pci, max_bs);
		if (!buf)
			return iosw_fail(td, ENOMEM, "ioswitch_buf_alloc");
		memcpy(buf, io_u->buf, max_bs);
		io_u->buf = buf;
		ed->bufs[io_u->index] = buf;
	}
	return 0;
}

static void iosw_io_u_free(struct thread_data *td, struct io_u *io_u)
{
	struct iosw_data *ed = td->io_ops_data;

	if (ed && ed->rbuf) {
		/* A slot of the region, freed with it in ->cleanup(). */
		io_u->buf = NULL;
		return;
	}
	if (!ed || !ed->bufs || io_u->index >= ed->nbufs || !ed->bufs[io_u->index])
		return;
	if (io_u->buf == ed->bufs[io_u->index])
		io_u->buf = NULL;
	if (ioswitch_buf_free(ed->bufs[io_u->index]))
		log_err("ioswitch: %s\n", ioswitch_last_error());
	ed->bufs[io_u->index] = NULL;
}

/*
 * ioswitch_cpl_ok(), without a call. A read or write that succeeds moved every byte (a
 * short one fails with EIO: ioswitch.h, struct ioswitch_cpl), so there is never a
 * residual to report.
 */
static inline struct io_u *cpl_io_u(const struct ioswitch_cpl *cpl)
{
	struct io_u *io_u = cpl->user_arg;

	if (__builtin_expect((cpl->status & 0x7ff) || cpl->errnum, 0))
		io_u->error = cpl->errnum ? cpl->errnum : EIO;
	return io_u;
}

/* cpl_io_u for the lean path's events. */
static inline struct io_u *ev_io_u(const struct ioswitch_event *ev)
{
	struct io_u *io_u = (struct io_u *)(uintptr_t)ev->user_data;

	if (__builtin_expect((ev->status & 0x7ff) || ev->errnum, 0))
		io_u->error = ev->errnum ? ev->errnum : EIO;
	return io_u;
}

/* Reaps from q into ed's completion array at `at` (the lean path's or the classic one). */
static inline int reap(struct iosw_data *ed, struct ioswitch_queue *q, unsigned int min,
		       unsigned int max, unsigned int at)
{
	if (__builtin_expect(ed->region != NULL, 1))
		return ioswitch_queue_reap_at(q, min, max, ed->evs + at);
	return ioswitch_queue_reap(q, min, max, ed->cpls + at);
}

/* Submits an io_u's command (data: nbufs 0 or 1, at io_u->xfer_buf) on either path. */
static inline int submit(struct iosw_data *ed, struct iosw_file *fd, struct ioswitch_cmd *cmd,
			 struct io_u *io_u, int nbufs)
{
	void *buf = io_u->xfer_buf;

	if (__builtin_expect(ed->region != NULL, 1))
		return ioswitch_queue_submit_at(fd->q, cmd, nbufs ? buf : NULL,
						nbufs ? io_u->xfer_buflen : 0, (uintptr_t)io_u);
	return ioswitch_queue_submit(fd->q, cmd, &buf, nbufs, io_u);
}

static int iosw_open_file(struct thread_data *td, struct fio_file *f)
{
	struct iosw_data *ed = td->io_ops_data;
	struct iosw_file *fd;
	struct ioswitch_ident id;
	int err;

	if (!ed)
		return iosw_fail(td, EINVAL, "open_file before the engine's init");
	fd = calloc(1, sizeof(*fd));
	if (!fd)
		return 1;
	if (ed->pci && !strcmp(f->file_name, ed->pci_name)) {
		fd->dev = ed->pci;
		fd->borrowed = 1;
	} else if ((err = ioswitch_dev_open(f->file_name, ed->devopts, &fd->dev))) {
		free(fd);
		return iosw_fail(td, -err, "ioswitch_dev_open");
	}
	ioswitch_dev_geo(fd->dev, &fd->geo);
	ioswitch_dev_ident(fd->dev, &id);
	fd->nvm = id.kind == IOSWITCH_KIND_NVME_CHAR;
	fd->nsid = id.nsid;
	fd->lba_shift = __builtin_ctz(fd->geo.lba_size ? fd->geo.lba_size : 512);
	if (fd->nvm)
		err = ioswitch_cmd_read(fd->nsid, 0, 1, &fd->rw[DDIR_READ]) ||
		      ioswitch_cmd_write(fd->nsid, 0, 1, &fd->rw[DDIR_WRITE]);
	else
		err = ioswitch_cmd_fs_read(0, 0, &fd->rw[DDIR_READ]) ||
		      ioswitch_cmd_fs_write(0, 0, &fd->rw[DDIR_WRITE]);
	if (err) {
		iosw_fail(td, EINVAL, "ioswitch_cmd_read");
		if (!fd->borrowed)
			ioswitch_dev_close(fd->dev);
		free(fd);
		return 1;
	}
	if (fd->geo.buffer_align > (uint32_t)page_size) {
		log_err("ioswitch: %s needs buffers aligned to %u bytes; the engine aligns to the "
			"page size (%ld)\n", f->file_name, fd->geo.buffer_align, page_size);
		td_vmsg(td, EINVAL, "buffer alignment", "open_file");
		if (!fd->borrowed)
			ioswitch_dev_close(fd->dev);
		free(fd);
		return 1;
	}
	fd->td = td;
	if (ed->sync_mode && !fd->nvm) {
		fd->fast[DDIR_READ] = &fd->rw[DDIR_READ];
		fd->fast[DDIR_WRITE] = &fd->rw[DDIR_WRITE];
	}
	if (!ed->sync_mode && !fd->nvm) {
		fd->qfast[DDIR_READ] = &fd->rw[DDIR_READ];
		fd->qfast[DDIR_WRITE] = &fd->rw[DDIR_WRITE];
	}
	if (!ed->sync_mode) {
		err = ioswitch_queue_init(fd->dev, ed->cap, &fd->q);
		if (err) {
			iosw_fail(td, -err, "ioswitch_queue_init");
			if (!fd->borrowed)
				ioswitch_dev_close(fd->dev);
			free(fd);
			return 1;
		}
		if (ed->region && (err = ioswitch_queue_attach(fd->q, ed->region))) {
			iosw_fail(td, -err, "ioswitch_queue_attach");
			ioswitch_queue_term(fd->q);
			if (!fd->borrowed)
				ioswitch_dev_close(fd->dev);
			free(fd);
			return 1;
		}
		fd->room = id.async_iface && !strcmp(id.async_iface, "nil") ? ed->evcap : ed->cap;
		ed->open[ed->nopen++] = fd;
	}
	/*
	 * fio's core applies fadvise_hint and write_hint to f->fd once ->open_file() returns:
	 * lend it the device's own descriptor, the one the library's reads and writes go
	 * through (a readahead hint is per open file). -1 where the device has none (a
	 * ramdisk, a PCI address); ->close_file() gives it back (f->fd = -1) before the
	 * device closes it.
	 */
	if (ioswitch_dev_fd(fd->dev, &f->fd))
		f->fd = -1;
	FILE_SET_ENG_DATA(f, fd);
	return 0;
}

static int iosw_close_file(struct thread_data *td, struct fio_file *f)
{
	struct iosw_data *ed = td->io_ops_data;
	struct iosw_file *fd = FILE_ENG_DATA(f);
	int ret = 0;

	if (!fd)
		return 0;
	if (ed && ed->owed)
		settle(td, ed);
	if (fd->q) {
		/* fio quiesces before it closes; should a command still wait, push it now. */
		if (ed->npending && commit_pending(td, ed) < 0)
			ret = 1;
		for (unsigned int i = 0; i < ed->nopen; i++) {
			if (ed->open[i] == fd) {
				ed->open[i] = ed->open[--ed->nopen];
				break;
			}
		}
		if (ioswitch_queue_term(fd->q)) {
			log_err("ioswitch: %s\n", ioswitch_last_error());
			ret = 1;
		}
	}
	if (!fd->borrowed)
		ioswitch_dev_close(fd->dev);
	free(fd);
	FILE_SET_ENG_DATA(f, NULL);
	f->fd = -1;
	return ret;
}

/*
 * Whether `name` is a PCI address as ioswitch reads one ([pci:]DDDD:BB:DD.F, hex, a
 * domain of 4 to 8 digits) and no file of that name exists: the library then drives the
 * controller itself (interface vfio), and fio must not create or lay out a file.
 */
static int is_pci_address(const char *name)
{
	static const char tail[] = ":xx:xx.x";
	const char *p = strncmp(name, "pci:", 4) ? name : name + 4;
	size_t dom = 0, i;

	while (dom < 8 && isxdigit((unsigned char)p[dom]))
		dom++;
	if (dom < 4)
		return 0;
	p += dom;
	for (i = 0; tail[i]; i++)
		if (tail[i] == 'x' ? !isxdigit((unsigned char)p[i]) : p[i] != tail[i])
			return 0;
	return p[i] == '\0' && access(name, F_OK) != 0 && errno == ENOENT;
}

/*
 * A char device (/dev/ngXnY) has no size fio can stat; ask ioswitch. So for a block
 * device: fio's generic way opens it through ->open_file(), which setup_files() calls
 * before ->init() has made the engine's data. A PCI address (no file at all) is asked
 * the same way and then handled as a char device: nothing to lay out or invalidate.
 */
static int iosw_get_file_size(struct thread_data *td, struct fio_file *f)
{
	struct iosw_data *ed = td->io_ops_data;
	struct ioswitch_dev *dev;
	struct ioswitch_geo geo;
	int err, pci = 0;

	if (fio_file_size_known(f))
		return 0;
	if (f->filetype == FIO_TYPE_FILE && is_pci_address(f->file_name))
		pci = 1;
	else if (f->filetype != FIO_TYPE_CHAR && f->filetype != FIO_TYPE_BLOCK)
		return generic_get_file_size(td, f);
	err = ioswitch_dev_open(f->file_name, ed ? ed->devopts : NULL, &dev);
	if (err)
		return iosw_fail(td, -err, "ioswitch_dev_open");
	ioswitch_dev_geo(dev, &geo);
	ioswitch_dev_close(dev);
	if (pci)
		f->filetype = FIO_TYPE_CHAR;
	f->real_file_size = geo.bytes;
	fio_file_set_size_known(f);
	return 0;
}

/* fio's cache invalidation, done on a descriptor of our own (fio has none for us). */
static int iosw_invalidate(struct thread_data *td, struct fio_file *f)
{
	int fd, ret = 0;

	(void)td;
	if (f->filetype != FIO_TYPE_FILE && f->filetype != FIO_TYPE_BLOCK)
		return 0;
	fd = open(f->file_name, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (f->filetype == FIO_TYPE_FILE)
		ret = -posix_fadvise(fd, f->file_offset, f->io_size, POSIX_FADV_DONTNEED);
	else if (ioctl(fd, BLKFLSBUF) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

_Static_assert(offsetof(struct ioswitch_sqe, cdw11) == offsetof(struct ioswitch_sqe, cdw10) + 4 &&
		       offsetof(struct ioswitch_sqe, cdw13) == offsetof(struct ioswitch_sqe, cdw12) + 4 &&
		       offsetof(struct ioswitch_sqe, cdw10) % 8 == 0 &&
		       offsetof(struct ioswitch_sqe, cdw12) % 8 == 0,
	       "CDW10-11 and CDW12-13 hold 64-bit values, low dword first, 8-byte aligned");

/* A 64-bit value in two consecutive command dwords (low dword first, as the header says). */
static inline void set_dwords(uint32_t *lo, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(lo, &v, sizeof(v)); /* one store */
#else
	lo[0] = (uint32_t)v;
	lo[1] = (uint32_t)(v >> 32);
#endif
}

/*
 * Reads and writes use the file's prebuilt commands (iosw_open_file) with only the
 * addressing dwords filled in here, rather than the ioswitch_cmd_* builders (one call
 * less per I/O): the header documents the encoding (file set: CDW10-11 byte offset,
 * CDW12-13 byte length; NVM: CDW10-11 starting LBA, CDW12 bits 15:0 blocks - 1).
 */
static inline int fill_rw(const struct iosw_file *fd, struct ioswitch_cmd *c, const struct io_u *io_u)
{
	uint64_t off = io_u->offset, len = io_u->xfer_buflen;

	if (!fd->nvm) {
		set_dwords(&c->sqe.cdw10, off);
		set_dwords(&c->sqe.cdw12, len);
	} else {
		uint64_t mask = ((uint64_t)1 << fd->lba_shift) - 1;
		uint64_t slba = off >> fd->lba_shift, nlb = len >> fd->lba_shift;

		if ((off & mask) || (len & mask) || nlb < 1 || nlb > 65536)
			return -EINVAL;
		c->sqe.cdw10 = (uint32_t)slba;
		c->sqe.cdw11 = (uint32_t)(slba >> 32);
		c->sqe.cdw12 = (uint32_t)(nlb - 1);
	}
	return 0;
}

static inline int rw_cmd(struct iosw_file *fd, struct io_u *io_u, struct ioswitch_cmd **cmd)
{
	struct ioswitch_cmd *c = &fd->rw[io_u->ddir];
	int err = fill_rw(fd, c, io_u);

	if (err)
		return err;
	*cmd = c;
	return 1;
}

/*
 * The command for an io_u in *cmd (the file's prebuilt read or write, or `other` for
 * the rest); 1 when it carries the io_u's buffer, 0 when none, -errno when impossible.
 */
static inline int build(struct iosw_file *fd, struct io_u *io_u, struct ioswitch_cmd *other,
			struct ioswitch_cmd **cmd)
{
	switch (io_u->ddir) {
	case DDIR_READ:
	case DDIR_WRITE:
		return rw_cmd(fd, io_u, cmd);
	case DDIR_SYNC:
	case DDIR_DATASYNC:
		if (fd->nvm)
			ioswitch_cmd_flush(fd->nsid, other);
		else
			ioswitch_cmd_fs_flush(other);
		*cmd = other;
		return 0;
	case DDIR_TRIM:
		if (fd->nvm)
			return -EOPNOTSUPP;
		ioswitch_cmd_fs_trim(io_u->offset, io_u->xfer_buflen, other);
		*cmd = other;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/*
 * What fio records in td_io_queue() for an engine without a ->commit() hook, for a
 * command that completes inside ->queue(): one submission and one completion of depth 1
 * (bucket 1 holds depths 1 to 4 in fio's __io_u_mark_map()). Inline stores rather than
 * calls of io_u_mark_submit()/io_u_mark_complete().
 */
static inline void mark_completed_in_queue(struct thread_data *td)
{
	td->ts.io_u_submit[1]++;
	td->ts.total_submit++;
	td->ts.io_u_complete[1]++;
	td->ts.total_complete++;
}

#define OWED_COMPLETE 1u
#define OWED_SUBMIT 2u

static enum fio_q_status iosw_queue_owed(struct thread_data *td, struct io_u *io_u);
static int iosw_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			  const struct timespec *t);
static int iosw_getevents_owed(struct thread_data *td, unsigned int min, unsigned int max,
			       const struct timespec *t);

/*
 * Records counts owed to fio (ed->owed) and points the job's ->queue() and ->getevents()
 * at the variants that settle them first: the next call into the engine (no test of
 * ed->owed on the common path).
 */
static void __attribute__((noinline, cold)) owe(struct iosw_data *ed, unsigned int what)
{
	ed->owed |= what;
	ed->noop->queue = iosw_queue_owed;
	ed->noop->getevents = iosw_getevents_owed;
}

/*
 * Without a ->commit() hook (push_now) fio's td_io_queue() records one submission and one
 * completion of depth 1 after every ->queue(), whatever it returns, and td_io_getevents()
 * records the completions it reaps once more: a queued command's completion would count
 * twice in "IO depths: complete". ->queue() takes the first back before fio adds it
 * (nothing between the two resets fio's statistics, so the pair cancels exactly; a
 * command ->queue() does not queue has it given back, see refused_unhooked). Only while
 * the bucket holds something: fio's status output (another thread) must never see it
 * wrap below 0; otherwise the next call into the engine takes it back (settle()).
 */
static inline void uncount_complete(struct thread_data *td, struct iosw_data *ed)
{
	if (__builtin_expect(td->ts.io_u_complete[1] != 0, 1)) {
		td->ts.io_u_complete[1]--;
		td->ts.total_complete--;
	} else {
		owe(ed, OWED_COMPLETE);
	}
}

/*
 * Takes back the counts ed->owed names, which fio added after the last ->queue()
 * returned. Called first thing by the engine's next ->queue(), ->getevents() or
 * ->close_file(): nothing but a reset of fio's statistics (which empties the buckets) can
 * have come in between, so a bucket that holds something still holds that count.
 */
static void __attribute__((noinline, cold)) settle(struct thread_data *td, struct iosw_data *ed)
{
	if ((ed->owed & OWED_COMPLETE) && td->ts.io_u_complete[1]) {
		td->ts.io_u_complete[1]--;
		td->ts.total_complete--;
	}
	if ((ed->owed & OWED_SUBMIT) && td->ts.io_u_submit[1]) {
		td->ts.io_u_submit[1]--;
		td->ts.total_submit--;
	}
	ed->owed = 0;
	ed->noop->queue = ed->push;
	ed->noop->getevents = iosw_getevents;
}

/* Records a failed synchronous command in the io_u (the first failure is logged). */
static void __attribute__((noinline, cold)) sync_failed(struct thread_data *td, struct io_u *io_u,
							int err)
{
	struct iosw_data *ed = td->io_ops_data;

	io_u->error = -err;
	if (!ed->reported++)
		log_err("ioswitch: %s\n", ioswitch_last_error());
}

/* sync_failed for iosw_queue's fast path, which keeps only the io_u across the call. */
static void __attribute__((noinline, cold)) fast_failed(struct io_u *io_u, int err)
{
	struct iosw_file *fd = FILE_ENG_DATA(io_u->file);

	sync_failed(fd->td, io_u, err);
}

/* Inline mode: the command just submitted completes here, its outcome in the io_u. */
static inline enum fio_q_status complete_inline(struct thread_data *td, struct io_u *io_u,
						struct iosw_file *fd)
{
	struct iosw_data *ed = td->io_ops_data;
	int err;

	mark_completed_in_queue(td);
	err = reap(ed, fd->q, 1, 1, 0);
	if (__builtin_expect(err == 1, 1)) {
		if (ed->region)
			ev_io_u(ed->evs);
		else
			cpl_io_u(ed->cpls);
	} else {
		io_u->error = err < 0 ? -err : EIO;
		log_err("ioswitch: reaping the inline command: %s\n",
			err < 0 ? ioswitch_last_error() : "no completion");
	}
	return FIO_Q_COMPLETED;
}

/* A refused submission of the queueing fast path (queue_rw): as in queue_other. */
static enum fio_q_status __attribute__((noinline, cold)) submit_failed(struct thread_data *td,
								       struct io_u *io_u,
								       struct iosw_file *fd, int err)
{
	struct iosw_data *ed = td->io_ops_data;

	if (err == -EBUSY && ioswitch_queue_outstanding(fd->q) >= (int)ed->cap)
		return FIO_Q_BUSY;
	mark_completed_in_queue(td);
	io_u->error = -err;
	if (!ed->reported++)
		log_err("ioswitch: %s\n", ioswitch_last_error());
	return FIO_Q_COMPLETED;
}

/*
 * A command ->queue() does not queue without a ->commit() hook (push_now), after
 * uncount_complete: fio records a submission and a completion for it after ->queue()
 * returns; a refusal for a full queue (FIO_Q_BUSY) must count neither, one completed
 * with an error both, as fio's count of it.
 */
static enum fio_q_status __attribute__((noinline, cold)) refused_unhooked(struct thread_data *td,
									  struct io_u *io_u,
									  struct iosw_file *fd, int err)
{
	struct iosw_data *ed = td->io_ops_data;

	if (err == -EBUSY && ioswitch_queue_outstanding(fd->q) >= (int)ed->cap) {
		/* As uncount_complete, for the submission. */
		if (td->ts.io_u_submit[1]) {
			td->ts.io_u_submit[1]--;
			td->ts.total_submit--;
		} else {
			owe(ed, OWED_SUBMIT);
		}
		return FIO_Q_BUSY;
	}
	if (ed->owed & OWED_COMPLETE) {
		/* uncount_complete owed it: fio's count is the one this command keeps. */
		ed->owed &= ~OWED_COMPLETE;
	} else {
		td->ts.io_u_complete[1]++;
		td->ts.total_complete++;
	}
	io_u->error = -err;
	if (!ed->reported++)
		log_err("ioswitch: %s\n", ioswitch_last_error());
	return FIO_Q_COMPLETED;
}

/*
 * queue_push's ioswitch_queue_submit_at_reap did not push its command (err > 0:
 * submitted, logged; the next reap pushes it or completes it with an error) or refused it
 * (err < 0, refused_unhooked; queue_defer's ioswitch_queue_submit_at only refuses). Only the io_u lives across that call: the file and the
 * job are found from it.
 */
static enum fio_q_status __attribute__((noinline, cold)) push_failed(struct io_u *io_u, int err)
{
	struct iosw_file *fd = FILE_ENG_DATA(io_u->file);

	if (err < 0)
		return refused_unhooked(fd->td, io_u, fd, err);
	commit_failed(1, err);
	return FIO_Q_QUEUED;
}

/*
 * The async mode's reads and writes when fio commits after each (push_now, no ->commit()
 * hook), in iosw_queue_push: the file's prebuilt command, submitted and pushed in one
 * call; what has completed by then comes back in the same call, into evs from rtail on
 * up to evs[max - 1] (max == rtail: none, a commit only), for ->getevents(). Only the
 * io_u lives across the call (for push_failed).
 */
static inline enum fio_q_status __attribute__((always_inline))
queue_push(struct iosw_data *ed, struct io_u *io_u, struct iosw_file *fd, struct ioswitch_cmd *cmd,
	   unsigned int max)
{
	int err;

	set_dwords(&cmd->sqe.cdw10, io_u->offset);
	set_dwords(&cmd->sqe.cdw12, io_u->xfer_buflen);
	err = ioswitch_queue_submit_at_reap(fd->q, cmd, io_u->xfer_buf, io_u->xfer_buflen,
					    (uintptr_t)io_u, ed->evs, max, &ed->rtail);
	if (__builtin_expect(err != 0, 0))
		return push_failed(io_u, err);
	return FIO_Q_QUEUED;
}

/*
 * The queueing modes' reads and writes (iosw_file.qfast), from iosw_queue: the file's
 * prebuilt command, queued in ioswitch, not yet in the kernel: ->commit() pushes it (the
 * inline mode completes it here).
 */
static enum fio_q_status __attribute__((noinline))
queue_rw(struct thread_data *td, struct io_u *io_u, struct iosw_file *fd, struct ioswitch_cmd *cmd)
{
	struct iosw_data *ed = td->io_ops_data;
	int err;

	set_dwords(&cmd->sqe.cdw10, io_u->offset);
	set_dwords(&cmd->sqe.cdw12, io_u->xfer_buflen);
	if (ed->inline_mode) {
		err = submit(ed, fd, cmd, io_u, 1);
		if (__builtin_expect(err != 0, 0))
			return submit_failed(td, io_u, fd, err);
		return complete_inline(td, io_u, fd);
	}
	err = submit(ed, fd, cmd, io_u, 1);
	if (__builtin_expect(err != 0, 0))
		return submit_failed(td, io_u, fd, err);
	/* The queue holds at most iodepth (ed->cap) commands: `pending` cannot overflow. */
	ed->pending[ed->npending++] = io_u;
	return FIO_Q_QUEUED;
}

/* Everything but the reads and writes of iosw_queue's two fast paths. */
static enum fio_q_status __attribute__((noinline)) queue_other(struct thread_data *td,
							      struct io_u *io_u,
							      struct iosw_file *fd)
{
	struct iosw_data *ed = td->io_ops_data;
	struct ioswitch_cmd other, *cmd;
	void *buf = io_u->xfer_buf;
	int nbufs, err;

	nbufs = build(fd, io_u, &other, &cmd);
	if (nbufs < 0) {
		if (!ed->push_now) /* else fio counts it (no ->commit() hook) */
			mark_completed_in_queue(td);
		io_u->error = -nbufs;
		return FIO_Q_COMPLETED;
	}
	if (ed->sync_mode) {
		mark_completed_in_queue(td);
		/*
		 * fio's buffer as caller memory; a command without data passes none. No
		 * completion is needed, as in iosw_queue: success means every byte moved.
		 */
		err = ioswitch_pass_raw(fd->dev, cmd, nbufs ? buf : NULL,
					nbufs ? io_u->xfer_buflen : 0, NULL);
		if (err)
			sync_failed(td, io_u, err);
		return FIO_Q_COMPLETED;
	}
	err = submit(ed, fd, cmd, io_u, nbufs);
	if (ed->push_now) {
		/* No ->commit() hook: pushed now, counted as uncount_complete says. */
		uncount_complete(td, ed);
		if (err)
			return refused_unhooked(td, io_u, fd, err);
		err = ioswitch_queue_commit(fd->q);
		if (err < 0)
			commit_failed(1, err); /* the next reap pushes it or completes it */
		return FIO_Q_QUEUED;
	}
	if (err == -EBUSY && ioswitch_queue_outstanding(fd->q) >= (int)ed->cap)
		return FIO_Q_BUSY;
	if (err) {
		/* e.g. fio advanced xfer_buf after a short transfer: not a buffer start */
		mark_completed_in_queue(td);
		io_u->error = -err;
		if (!ed->reported++)
			log_err("ioswitch: %s\n", ioswitch_last_error());
		return FIO_Q_COMPLETED;
	}
	if (ed->inline_mode)
		return complete_inline(td, io_u, fd);
	/*
	 * Queued in ioswitch, not yet in the kernel: ->commit() pushes it. The queue holds
	 * at most iodepth (ed->cap) commands, so `pending` cannot overflow.
	 */
	ed->pending[ed->npending++] = io_u;
	return FIO_Q_QUEUED;
}

/*
 * iosw_queue's other half, out of line so that the synchronous fast path keeps its small
 * frame: the queueing modes' reads and writes (iosw_file.qfast), else queue_other.
 */
static enum fio_q_status __attribute__((noinline)) queue_queued(struct thread_data *td,
								struct io_u *io_u,
								struct iosw_file *fd)
{
	struct ioswitch_cmd *c = fd->qfast[io_u->ddir & 7];

	/* Tail calls only: no frame here. push_now has its own ->queue(), iosw_queue_push. */
	if (c != NULL)
		return queue_rw(td, io_u, fd, c);
	return queue_other(td, io_u, fd);
}

/*
 * ->commit(): pushes every queued command to the kernel, then records what fio's libaio
 * and io_uring engines record when their commands reach the kernel: the issue time
 * (one clock read for the batch), the slat of each command (io_u_queued()) and the
 * batch's submit depth. A failed push is reported; the library completes a command it
 * could not push with an error, or pushes it at the next commit or reap, so each
 * command still comes back through ->getevents().
 */
static int __attribute__((noinline)) commit_pending(struct thread_data *td, struct iosw_data *ed)
{
	unsigned int i, n = ed->npending;
	int err, ret = 0;

	if (__builtin_expect(ed->nopen == 1, 1)) {
		err = ioswitch_queue_commit(ed->open[0]->q);
		if (__builtin_expect(err < 0, 0))
			ret = commit_failed(n, err);
	} else {
		for (i = 0; i < ed->nopen; i++) {
			err = ioswitch_queue_commit(ed->open[i]->q);
			if (err < 0 && !ret)
				ret = commit_failed(n, err);
		}
	}
	ed->npending = 0;
	if (fio_fill_issue_time(td)) {
		struct timespec now;

		fio_gettime(&now, NULL);
		for (i = 0; i < n; i++) {
			ed->pending[i]->issue_time = now;
			io_u_queued(td, ed->pending[i]);
		}
		if (td->o.read_iolog_file)
			td->last_issue = now; /* fio uses it for iolog replay only */
	}
	io_u_mark_submit(td, n);
	return ret;
}

/*
 * fio calls ->commit() also when nothing is queued (td_io_getevents commits before it
 * waits): that call returns before commit_pending's frame is set up.
 */
static int iosw_commit(struct thread_data *td)
{
	struct iosw_data *ed = td->io_ops_data;

	if (!ed->npending)
		return 0;
	return commit_pending(td, ed);
}

/*
 * The fast path, decided at open time (iosw_file.fast): a synchronous read or write with
 * a file-set command, the file's prebuilt command with its byte offset and length filled
 * in, passed with fio's buffer as caller memory (ioswitch_pass_raw: no buffer lookup, no
 * builder call). The rest (async and inline modes, NVM commands, syncs, trims) is
 * queue_other's. Only io_u lives across the call (a failure finds td through the file).
 */
static enum fio_q_status iosw_queue(struct thread_data *td, struct io_u *io_u)
{
	struct iosw_file *fd = FILE_ENG_DATA(io_u->file);
	/* One load answers both the mode and the direction (DDIR_INVAL & 7 is DDIR_LAST). */
	struct ioswitch_cmd *c = fd->fast[io_u->ddir & 7];

	fio_ro_check(td, io_u);
	if (__builtin_expect(c != NULL, 1)) {
		unsigned long long len = io_u->xfer_buflen;
		int err;

		mark_completed_in_queue(td); /* before the call: td need not outlive it */
		set_dwords(&c->sqe.cdw10, io_u->offset);
		set_dwords(&c->sqe.cdw12, len);
		/*
		 * No completion needed: a read or write that succeeds moved every byte (a
		 * short one fails with EIO, ioswitch.h, struct ioswitch_cpl), so there is no
		 * residual to report.
		 */
		err = ioswitch_pass_raw(fd->dev, c, io_u->xfer_buf, len, NULL);
		if (__builtin_expect(err != 0, 0))
			fast_failed(io_u, err);
		return FIO_Q_COMPLETED;
	}
	return queue_queued(td, io_u, fd);
}

/*
 * ->queue() of the synchronous mode under io_submit_mode=offload. fio's submit workers
 * (each a copy of the job's thread_data, rate-submit.c) call it at once for the same
 * files, so a read or write fills in its own copy of the file's prebuilt command:
 * iosw_queue fills in the shared one, and two workers overwrote each other's offsets
 * (a write landed at the other's offset, its own block stayed unwritten).
 */
static enum fio_q_status iosw_queue_offload(struct thread_data *td, struct io_u *io_u)
{
	struct iosw_file *fd = FILE_ENG_DATA(io_u->file);
	struct ioswitch_cmd own;
	int err;

	fio_ro_check(td, io_u);
	if (io_u->ddir != DDIR_READ && io_u->ddir != DDIR_WRITE)
		return queue_other(td, io_u, fd); /* flush and trim build on the stack */
	own = fd->rw[io_u->ddir];
	mark_completed_in_queue(td);
	err = fill_rw(fd, &own, io_u);
	if (err) {
		io_u->error = -err;
		return FIO_Q_COMPLETED;
	}
	err = ioswitch_pass_raw(fd->dev, &own, io_u->xfer_buf, io_u->xfer_buflen, NULL);
	if (err)
		sync_failed(td, io_u, err);
	return FIO_Q_COMPLETED;
}

/*
 * ->queue() of push_now (no ->commit() hook, the lean path): reads and writes with
 * file-set commands straight to queue_push, the rest to queue_other. Without
 * fio_ro_check(): td_io_queue() has just made the same check before calling ->queue().
 */
static enum fio_q_status iosw_queue_push(struct thread_data *td, struct io_u *io_u)
{
	struct iosw_file *fd = FILE_ENG_DATA(io_u->file);
	struct ioswitch_cmd *c = fd->qfast[io_u->ddir & 7];

	if (__builtin_expect(c != NULL, 1)) {
		struct iosw_data *ed = td->io_ops_data;

		uncount_complete(td, ed);
		return queue_push(ed, io_u, fd, c, fd->room);
	}
	return queue_other(td, io_u, fd);
}

/*
 * iosw_queue_push1's submission that looks for completions: when it finds none (nothing
 * taken back waits in evs), the next 15 do not look. Out of line: only this one keeps
 * the job's data across the call.
 */
static enum fio_q_status __attribute__((noinline))
push1_look(struct iosw_data *ed, struct io_u *io_u, struct iosw_file *fd, struct ioswitch_cmd *c)
{
	enum fio_q_status r = queue_push(ed, io_u, fd, c, fd->room);

	ed->unlooked = ed->rtail != ed->rhead ? 0 : 15;
	return r;
}

/*
 * iosw_queue_push1's submissions that do not look: the command is queued in ioswitch
 * only (ioswitch_queue_submit_at) and reaches the kernel with the ->getevents() that fio
 * calls next (iodepth=1: the job's one command is in flight, so fio reaps before it does
 * anything else), whose ioswitch_queue_reap_at submits it and waits for it in one
 * io_uring_enter. fio's issue time (taken when ->queue() returns) is then before the
 * enter: the enter counts in the clat rather than in the slat; the latency is the same.
 */
static inline enum fio_q_status __attribute__((always_inline))
queue_defer(struct io_u *io_u, struct iosw_file *fd, struct ioswitch_cmd *cmd)
{
	int err;

	set_dwords(&cmd->sqe.cdw10, io_u->offset);
	set_dwords(&cmd->sqe.cdw12, io_u->xfer_buflen);
	err = ioswitch_queue_submit_at(fd->q, cmd, io_u->xfer_buf, io_u->xfer_buflen,
				       (uintptr_t)io_u);
	if (__builtin_expect(err != 0, 0))
		return push_failed(io_u, err);
	return FIO_Q_QUEUED;
}

/*
 * push_now's ->queue() at iodepth=1 on the engine's default io_uring ring (ed->defers:
 * DEFER_TASKRUN, where a completion reaches the CQ ring only when this thread enters the
 * kernel). fio calls ->getevents() after every ->queue() here, and that looks for the
 * completion before it waits. The submission's own look (after its enter) saves that
 * call only when the kernel completed the read inside the submission (from the page
 * cache, say), and is spent when it did not (a read handed to an io-wq worker, as every
 * read from a tmpfs file is). So the submission looks while its looks find the
 * completion; after one that finds none, the next 15 submissions do not enter the kernel
 * at all (queue_defer: the ->getevents() after them submits and waits in one enter) and
 * the 16th looks again (push1_look). fio's own io_uring engine does not look at
 * submission.
 */
static enum fio_q_status iosw_queue_push1(struct thread_data *td, struct io_u *io_u)
{
	struct iosw_file *fd = FILE_ENG_DATA(io_u->file);
	struct ioswitch_cmd *c = fd->qfast[io_u->ddir & 7];

	if (__builtin_expect(c != NULL, 1)) {
		struct iosw_data *ed = td->io_ops_data;

		uncount_complete(td, ed);
		if (!ed->unlooked)
			return push1_look(ed, io_u, fd, c);
		ed->unlooked--;
		return queue_defer(io_u, fd, c);
	}
	return queue_other(td, io_u, fd);
}

/* iosw_queue_push while counts are owed to fio (owe()): settles them first. */
static enum fio_q_status iosw_queue_owed(struct thread_data *td, struct io_u *io_u)
{
	struct iosw_data *ed = td->io_ops_data;

	settle(td, ed);
	return ed->push(td, io_u);
}

/* A failed reap (ioswitch_queue_reap_at or _reap): logged and recorded; returns err. */
static int __attribute__((noinline, cold)) reap_failed(struct thread_data *td, int err)
{
	iosw_fail(td, -err, "reaping completions");
	return err;
}

/*
 * A reap failed after n completions were reaped into the array (evs or cpls from 0, which
 * ->event() reads): fio gets them now, as it must (td_io_getevents() accounts for and
 * hands over nothing when the call fails), and the failure at the next ->getevents().
 * Nothing reaped: the failure now.
 */
static int __attribute__((noinline, cold)) reaped_then_failed(struct thread_data *td,
							      struct iosw_data *ed, unsigned int n,
							      int err)
{
	reap_failed(td, err);
	if (!n)
		return err;
	ed->reap_err = err;
	return n;
}

/* The failure reaped_then_failed() left for this ->getevents(). */
static int __attribute__((noinline, cold)) reap_failed_before(struct iosw_data *ed)
{
	int err = ed->reap_err;

	ed->reap_err = 0;
	return err;
}

static int getevents_many(struct thread_data *td, struct iosw_data *ed, unsigned int min,
			  unsigned int max, unsigned int n);
static int getevents_ready(struct thread_data *td, struct iosw_data *ed, unsigned int min,
			   unsigned int max);

static int getevents_reap(struct thread_data *td, unsigned int min, unsigned int max);
static int getevents_lean(struct thread_data *td, struct iosw_data *ed, unsigned int min,
			  unsigned int max);

/*
 * hand_over's rare case: rtail beyond evlast. The events it hands over (from evbase) and
 * those it keeps move to the front of evs; returns n. They are at most cap: all are of
 * commands in flight, and fio keeps at most iodepth (cap) in flight. From then until
 * the next ->getevents(), ->queue() takes back at most cap completions (each of a
 * command in flight), so rtail stays within evcap, and ->queue() is never short of room.
 * Were it short, every ->queue() would be a commit only, its completion reaped by a later
 * call: so it was at iodepth=16 with an array of cap events, where fio reaps one
 * completion per ->getevents() (iodepth_batch_complete_max defaults to 1) and the
 * array's front never emptied (on nil, the completion was queued and polled instead of
 * handed over in the submission: docs/BENCHMARKS.md, "nilqd16"). With EVS_SPAN 4 this
 * runs at most once per 2 x cap commands and moves at most cap events. A tail call out
 * of line: the leaf ->getevents() keeps no frame.
 */
static int __attribute__((noinline, cold)) front(struct iosw_data *ed, int n)
{
	uint32_t m = ed->rtail - ed->evbase;

	memmove(ed->evs, ed->evs + ed->evbase, m * sizeof(*ed->evs));
	ed->rhead -= ed->evbase;
	ed->rtail = m;
	ed->evbase = 0;
	return n;
}

/*
 * Hands ->event() up to max of the n completions ->queue() took back (ed->evs from rhead),
 * and empties the list when all are handed over. Inlined into both callers (the leaf
 * ->getevents() keeps no frame).
 */
static inline __attribute__((always_inline)) int hand_over(struct iosw_data *ed, uint32_t n,
							   unsigned int max)
{
	if (n > max)
		n = max;
	ed->evbase = ed->rhead;
	ed->rhead += n;
	if (ed->rhead == ed->rtail)
		ed->rhead = ed->rtail = 0;
	else if (__builtin_expect(ed->rtail > ed->evlast, 0))
		return front(ed, n);
	return n;
}

/*
 * ->getevents(): the completions ->queue() took back (push_now; fio reads them with
 * ->event() before it queues again), when they are enough for fio's minimum, without a
 * call into ioswitch and without a frame; otherwise getevents_reap.
 */
static int iosw_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			  const struct timespec *t)
{
	struct iosw_data *ed = td->io_ops_data;
	uint32_t n = ed->rtail - ed->rhead;

	(void)t;
	/*
	 * fio passes 0 < min <= max <= its depth (<= cap) here, or min 0 to poll. Only
	 * push_now takes completions back, and it queues nothing for a ->commit().
	 */
	if (__builtin_expect(n != 0 && n >= min, 1))
		return hand_over(ed, n, max);
	if (__builtin_expect(n == 0 && ed->push_now, 1))
		return getevents_lean(td, ed, min, max);
	return getevents_reap(td, min, max);
}

/*
 * getevents_reap's usual case with push_now (the lean path; ->queue() leaves nothing
 * for a commit), nothing taken back: one file's ioswitch_queue_reap_at, with a smaller
 * frame than getevents_reap's; several files or a failure owed go there.
 */
static int __attribute__((noinline)) getevents_lean(struct thread_data *td, struct iosw_data *ed,
						    unsigned int min, unsigned int max)
{
	int err;

	if (__builtin_expect(ed->nopen != 1 || ed->reap_err != 0, 0))
		return getevents_reap(td, min, max);
	if (max > ed->cap)
		max = ed->cap;
	if (min > max)
		min = max;
	ed->evbase = 0;
	err = ioswitch_queue_reap_at(ed->open[0]->q, min, max, ed->evs);
	if (__builtin_expect(err < 0, 0))
		return reap_failed(td, err);
	return err;
}

/* iosw_getevents while counts are owed to fio (owe()): settles them first. */
static int iosw_getevents_owed(struct thread_data *td, unsigned int min, unsigned int max,
			       const struct timespec *t)
{
	settle(td, td->io_ops_data);
	return iosw_getevents(td, min, max, t);
}

/*
 * Reaps straight into ed->evs (ioswitch_queue_reap_at; ed->cpls with ioswitch_queue_reap
 * on the classic path: no callbacks, no copies), which ->event() reads: commits what
 * ->queue() left, then hands over what ->queue() took back and what has completed, up to
 * max, waiting only for what fio's minimum still lacks.
 */
static int __attribute__((noinline)) getevents_reap(struct thread_data *td, unsigned int min,
						    unsigned int max)
{
	struct iosw_data *ed = td->io_ops_data;
	int err;

	if (__builtin_expect(ed->reap_err != 0, 0))
		return reap_failed_before(ed);
	if (max > ed->cap)
		max = ed->cap;
	if (min > max)
		min = max;
	/* fio commits before it waits (min > 0); a reap without waiting may come first. */
	if (ed->npending) {
		err = commit_pending(td, ed);
		if (err < 0)
			return err; /* logged; fio records it (td_io_getevents) */
	}
	if (ed->rtail != ed->rhead) {
		unsigned int n = ed->rtail - ed->rhead;

		if (n < min)
			return getevents_ready(td, ed, min, max);
		return hand_over(ed, n, max);
	}
	ed->evbase = 0;
	if (__builtin_expect(ed->nopen == 1, 1)) {
		err = reap(ed, ed->open[0]->q, min, max, 0);
		if (__builtin_expect(err < 0, 0))
			return reap_failed(td, err);
		return err;
	}
	return getevents_many(td, ed, min, max, 0);
}

/*
 * ->getevents() with fewer completions taken back by ->queue() than fio's minimum: they
 * move to the front of the array, and the rest is reaped after them.
 */
static int __attribute__((noinline)) getevents_ready(struct thread_data *td, struct iosw_data *ed,
						     unsigned int min, unsigned int max)
{
	unsigned int n = ed->rtail - ed->rhead;
	int err;

	memmove(ed->evs, ed->evs + ed->rhead, n * sizeof(*ed->evs));
	ed->rhead = ed->rtail = ed->evbase = 0;
	if (ed->nopen != 1)
		return getevents_many(td, ed, min, max, n);
	err = reap(ed, ed->open[0]->q, min - n, max - n, n);
	if (err < 0)
		return reaped_then_failed(td, ed, n, err);
	return n + err;
}

/*
 * ->getevents() with several files: from every queue without waiting, then block on a
 * busy one; evs[0, n) already holds completions to hand over.
 */
static int __attribute__((noinline)) getevents_many(struct thread_data *td, struct iosw_data *ed,
						    unsigned int min, unsigned int max, unsigned int n)
{
	unsigned int i;
	int err;

	for (;;) {
		int busy = -1;

		for (i = 0; i < ed->nopen && n < max; i++) {
			struct ioswitch_queue *q = ed->open[i]->q;

			err = reap(ed, q, 0, max - n, n);
			if (err < 0)
				goto failed;
			n += err;
			if (busy < 0 && ioswitch_queue_outstanding(q) > 0)
				busy = i;
		}
		if (n >= min || busy < 0)
			return n;
		err = reap(ed, ed->open[busy]->q, 1, max - n, n);
		if (err < 0)
			goto failed;
		n += err;
		if (n >= min)
			return n;
	}
failed:
	return reaped_then_failed(td, ed, n, err);
}

static struct io_u *iosw_event(struct thread_data *td, int event)
{
	struct iosw_data *ed = td->io_ops_data;

	if (__builtin_expect(ed->region != NULL, 1))
		return ev_io_u(&ed->evs[ed->evbase + event]);
	return cpl_io_u(&ed->cpls[event]);
}

/* ->event() of push_now (no ->commit() hook), which takes the lean path only. */
static struct io_u *iosw_event_lean(struct thread_data *td, int event)
{
	struct iosw_data *ed = td->io_ops_data;

	return ev_io_u(&ed->evs[ed->evbase + event]);
}

/*
 * Zoned devices (fio's zonemode=zbd): the zoned model and limits come from the device's
 * geometry; zone reports and write-pointer resets are NVMe Zone Management Receive and
 * Send commands run with ioswitch_pass. ioswitch serves them on NVMe char devices
 * (passthrough) and on zoned block devices (the block layer's zone ioctls) alike.
 * fio asks for the model and the first report while it sets the files up, before it
 * opens them: a file not open yet gets a device of its own for the call.
 */
#define ZNS_ZMS 0x79 /* Zone Management Send */
#define ZNS_ZMR 0x7a /* Zone Management Receive */
#define ZNS_ZSA_RESET 0x04
#define ZNS_ZRA_REPORT 0x00
#define ZNS_PARTIAL (1u << 16) /* report: the header counts the descriptors returned */

struct zdev {
	struct ioswitch_dev *dev;
	struct ioswitch_geo geo;
	uint32_t nsid;
	unsigned int shift; /* log2(lba_size) */
	int temporary;
};

static int zdev_get(struct thread_data *td, struct fio_file *f, struct zdev *z)
{
	struct iosw_data *ed = td->io_ops_data;
	struct iosw_file *fd = FILE_ENG_DATA(f);
	struct ioswitch_ident id;
	int err;

	memset(z, 0, sizeof(*z));
	if (fd) {
		z->dev = fd->dev;
	} else {
		err = ioswitch_dev_open(f->file_name, ed ? ed->devopts : NULL, &z->dev);
		if (err) {
			iosw_fail(td, -err, "ioswitch_dev_open");
			return err;
		}
		z->temporary = 1;
	}
	ioswitch_dev_geo(z->dev, &z->geo);
	ioswitch_dev_ident(z->dev, &id);
	z->nsid = id.nsid;
	z->shift = __builtin_ctz(z->geo.lba_size ? z->geo.lba_size : 512);
	return 0;
}

static void zdev_put(struct zdev *z)
{
	if (z->temporary)
		ioswitch_dev_close(z->dev);
}

static int iosw_get_zoned_model(struct thread_data *td, struct fio_file *f,
				enum zbd_zoned_model *model)
{
	struct zdev z;
	int err;

	/* Regular files: fio's own emulation (zonemode=strided and the like). */
	if (f->filetype != FIO_TYPE_CHAR && f->filetype != FIO_TYPE_BLOCK) {
		*model = ZBD_NONE;
		return 0;
	}
	err = zdev_get(td, f, &z);
	if (err)
		return err;
	switch (z.geo.zoned) {
	case IOSWITCH_ZONED_HOST_MANAGED:
		*model = ZBD_HOST_MANAGED;
		break;
	case IOSWITCH_ZONED_HOST_AWARE:
		*model = ZBD_HOST_AWARE;
		break;
	default:
		*model = ZBD_NONE;
		break;
	}
	zdev_put(&z);
	return 0;
}

static inline uint64_t le64_at(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64_to_cpu(v);
}

static int iosw_report_zones(struct thread_data *td, struct fio_file *f, uint64_t offset,
			     struct zbd_zone *zones, unsigned int nr_zones)
{
	struct ioswitch_cmd cmd;
	struct zdev z;
	unsigned char *rep = NULL;
	uint64_t zone_bytes, n, i, room = nr_zones;
	size_t bytes;
	int err;

	err = zdev_get(td, f, &z);
	if (err)
		return err;
	if (!z.geo.zoned || !z.geo.zone_size) {
		log_err("ioswitch: %s is not a zoned device: no zones to report\n", f->file_name);
		zdev_put(&z);
		return -EINVAL;
	}
	zone_bytes = z.geo.zone_size << z.shift;
	/* One report of at most max_transfer bytes; fio asks again from the next zone. */
	if (z.geo.max_transfer && room > (z.geo.max_transfer - 64) / 64)
		room = (z.geo.max_transfer - 64) / 64;
	if (room > 4096)
		room = 4096;
	bytes = (room + 1) * 64;
	/* An ioswitch buffer: passthrough wants whole pages the device may write. */
	rep = ioswitch_buf_alloc(z.dev, bytes);
	if (!rep) {
		log_err("ioswitch: zone report of %s: %s\n", f->file_name, ioswitch_last_error());
		zdev_put(&z);
		return -ENOMEM;
	}
	memset(&cmd, 0, sizeof(cmd));
	cmd.set = IOSWITCH_SET_NVM;
	cmd.sqe.opcode = ZNS_ZMR;
	cmd.sqe.nsid = z.nsid;
	set_dwords(&cmd.sqe.cdw10, offset >> z.shift);
	cmd.sqe.cdw12 = (uint32_t)(bytes / 4 - 1);
	cmd.sqe.cdw13 = ZNS_ZRA_REPORT | ZNS_PARTIAL;
	err = ioswitch_pass(z.dev, &cmd, (void *const *)&rep, 1, NULL);
	if (err) {
		log_err("ioswitch: zone report of %s from offset %llu: %s\n", f->file_name,
			(unsigned long long)offset, ioswitch_last_error());
		goto out;
	}
	n = le64_at(rep);
	if (n > room)
		n = room;
	for (i = 0; i < n; i++) {
		const unsigned char *d = rep + 64 * (i + 1);
		struct zbd_zone *zz = &zones[i];
		uint64_t start = le64_at(d + 16) << z.shift;
		uint64_t wp = le64_at(d + 24) << z.shift;

		zz->start = start;
		zz->len = zone_bytes;
		zz->capacity = le64_at(d + 8) << z.shift;
		zz->type = (d[0] & 0xf) == 2 ? ZBD_ZONE_TYPE_SWR : ZBD_ZONE_TYPE_CNV;
		zz->cond = (enum zbd_zone_cond)(d[1] >> 4);
		/* The spec leaves the write pointer of full, read-only and offline zones open. */
		if (wp < start || wp > start + zone_bytes)
			wp = start + zz->capacity;
		zz->wp = wp;
	}
	err = (int)n;
out:
	if (ioswitch_buf_free(rep))
		log_err("ioswitch: %s\n", ioswitch_last_error());
	zdev_put(&z);
	return err;
}

static int iosw_reset_wp(struct thread_data *td, struct fio_file *f, uint64_t offset,
			 uint64_t length)
{
	struct ioswitch_cmd cmd;
	struct zdev z;
	uint64_t zone_bytes, at;
	int err;

	err = zdev_get(td, f, &z);
	if (err)
		return err;
	zone_bytes = z.geo.zone_size << z.shift;
	if (!z.geo.zoned || !zone_bytes || offset % zone_bytes) {
		log_err("ioswitch: write pointer reset of %s at offset %llu: %s\n", f->file_name,
			(unsigned long long)offset,
			zone_bytes ? "not the start of a zone" : "not a zoned device");
		zdev_put(&z);
		return -EINVAL;
	}
	for (at = offset; at < offset + length; at += zone_bytes) {
		memset(&cmd, 0, sizeof(cmd));
		cmd.set = IOSWITCH_SET_NVM;
		cmd.sqe.opcode = ZNS_ZMS;
		cmd.sqe.nsid = z.nsid;
		set_dwords(&cmd.sqe.cdw10, at >> z.shift);
		cmd.sqe.cdw13 = ZNS_ZSA_RESET;
		err = ioswitch_pass_raw(z.dev, &cmd, NULL, 0, NULL);
		if (err) {
			log_err("ioswitch: write pointer reset of %s, zone at offset %llu: %s\n",
				f->file_name, (unsigned long long)at, ioswitch_last_error());
			break;
		}
	}
	zdev_put(&z);
	return err;
}

static int iosw_get_max_open_zones(struct thread_data *td, struct fio_file *f,
				   unsigned int *max_open_zones)
{
	struct zdev z;
	int err;

	err = zdev_get(td, f, &z);
	if (err)
		return err;
	*max_open_zones = z.geo.max_open; /* 0: no limit */
	zdev_put(&z);
	return 0;
}

struct ioengine_ops ioengine = {
	.name = "ioswitch",
	.version = FIO_IOOPS_VERSION,
	.init = iosw_init,
	.post_init = iosw_post_init,
	.cleanup = iosw_cleanup,
	.queue = iosw_queue,
	.commit = iosw_commit,
	.getevents = iosw_getevents,
	.event = iosw_event,
	.open_file = iosw_open_file,
	.close_file = iosw_close_file,
	.get_file_size = iosw_get_file_size,
	.invalidate = iosw_invalidate,
	.io_u_free = iosw_io_u_free,
	.get_zoned_model = iosw_get_zoned_model,
	.report_zones = iosw_report_zones,
	.reset_wp = iosw_reset_wp,
	.get_max_open_zones = iosw_get_max_open_zones,
	.option_struct_size = sizeof(struct iosw_options),
	.options = options,
};
