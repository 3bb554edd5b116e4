/*
 * A test double for fio/run-fio-tests.sh, loaded with LD_PRELOAD in front of libioswitch:
 * ioswitch_queue_reap_at fails once, with -EIO and nothing reaped, on the first call for a
 * queue other than the first one the engine reaped from, once that first queue has
 * handed over a completion in the same ->getevents() (the engine reaps its files' queues
 * in order, the first file's first). Every other call goes to libioswitch. What it
 * provokes: a ->getevents() that has completions in hand when a later reap fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <ioswitch.h>

typedef int (*reap_at_fn)(struct ioswitch_queue *, uint32_t, uint32_t, struct ioswitch_event *);

static struct ioswitch_queue *first;
static int first_reaped, failed;

int ioswitch_queue_reap_at(struct ioswitch_queue *q, uint32_t min, uint32_t max, struct ioswitch_event *evs)
{
	static reap_at_fn real;
	int n;

	if (!real) {
		/*
		 * libioswitch came with the engine fio dlopen()ed, outside the global scope
		 * that RTLD_NEXT searches: look it up by its soname, already loaded.
		 */
		void *lib = dlopen("libioswitch.so.0", RTLD_NOLOAD | RTLD_LAZY);

		real = lib ? (reap_at_fn)dlsym(lib, "ioswitch_queue_reap_at") : NULL;
		if (!real) {
			fprintf(stderr, "reap-fault: no ioswitch_queue_reap_at to wrap: %s\n", dlerror());
			abort();
		}
	}
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
