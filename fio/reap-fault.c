/*
 * A test double for fio/run-fio-tests.sh, loaded with LD_PRELOAD in front of libioswitch:
 * ioswitch_queue_reap_at fails once, with -EIO and nothing reaped, on the first call for a
 * queue other than the first one the engine reaped from, once that first queue has
 * handed over a completion in the same ->getevents() (the engine reaps its files' queues
 * in order, the first file's first). Every other call goes to libioswitch. What it
 * provokes: a ->getevents() that has completions in hand when a later reap fails.
 *
 * With REAP_FAULT=count in the environment it fails nothing and counts instead, printing
 * at exit "reap-fault: N pushes, M of them took back no completion" for
 * ioswitch_queue_submit_at_reap, the engine's ->queue() of reads and writes without a
 * ->commit() hook: how many of its commands the engine got back in the ->queue() that
 * pushed them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ioswitch.h>

typedef int (*reap_at_fn)(struct ioswitch_queue *, uint32_t, uint32_t, struct ioswitch_event *);
typedef int (*submit_at_reap_fn)(struct ioswitch_queue *, const struct ioswitch_cmd *, void *, uint64_t,
				 uint64_t, struct ioswitch_event *, uint32_t, uint32_t *);

static struct ioswitch_queue *first;
static int first_reaped, failed;
static unsigned long pushes, took_none;

/*
 * libioswitch's own `name`. libioswitch came with the engine fio dlopen()ed, outside the
 * global scope that RTLD_NEXT searches: looked up by its soname, already loaded.
 */
static void *real_fn(const char *name)
{
	void *lib = dlopen("libioswitch.so.0", RTLD_NOLOAD | RTLD_LAZY);
	void *fn = lib ? dlsym(lib, name) : NULL;

	if (!fn) {
		fprintf(stderr, "reap-fault: no %s to wrap: %s\n", name, dlerror());
		abort();
	}
	return fn;
}

static int counting(void)
{
	const char *mode = getenv("REAP_FAULT");

	return mode && !strcmp(mode, "count");
}

static void __attribute__((destructor)) report(void)
{
	if (counting())
		fprintf(stderr, "reap-fault: %lu pushes, %lu of them took back no completion\n", pushes,
			took_none);
}

int ioswitch_queue_submit_at_reap(struct ioswitch_queue *q, const struct ioswitch_cmd *cmd, void *addr,
				  uint64_t len, uint64_t user_data, struct ioswitch_event *evs, uint32_t max,
				  uint32_t *n)
{
	static submit_at_reap_fn real;
	uint32_t before = *n;
	int err;

	if (!real)
		real = (submit_at_reap_fn)real_fn("ioswitch_queue_submit_at_reap");
	err = real(q, cmd, addr, len, user_data, evs, max, n);
	pushes++;
	took_none += err == 0 && *n == before;
	return err;
}

int ioswitch_queue_reap_at(struct ioswitch_queue *q, uint32_t min, uint32_t max, struct ioswitch_event *evs)
{
	static reap_at_fn real;
	int n;

	if (!real)
		real = (reap_at_fn)real_fn("ioswitch_queue_reap_at");
	if (counting())
		return real(q, min, max, evs);
	if (!first)
		first = q;
	if (q != first && first_reaped && !failed) {
		failed = 1;
		fprintf(stderr, "reap-fault: failing a reap of the second queue\n");
		return -EIO;
	}
	n = real(q, min, max, evs);
	if (q == first)
		first_reaped = n > 0;
	return n;
}
