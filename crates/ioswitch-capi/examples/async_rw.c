/*
 * async_rw: writes NBLK blocks through a queue of depth 16, then reads them back and
 * verifies each in its completion callback. Writes report through the queue's callback,
 * reads through a callback of their own; buffers are reused only after their
 * completion, as the ownership rules require.
 *
 *   async_rw URI [OPTS]    e.g.  async_rw /tmp/data.img "create=1,size=1MiB,async=io_uring"
 */
#include <ioswitch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define QD 16
#define BS 4096
#define NBLK 256

struct slot {
	uint8_t *buf;
	uint64_t block;
	int busy;
};

struct run {
	struct slot slots[QD];
	unsigned completed, errors, mismatches;
};

static void fill(uint8_t *p, uint64_t block)
{
	for (size_t i = 0; i < BS; i++)
		p[i] = (uint8_t)(block * 13 + i * 7 + (i >> 8));
}

static int check(const uint8_t *p, uint64_t block)
{
	for (size_t i = 0; i < BS; i++)
		if (p[i] != (uint8_t)(block * 13 + i * 7 + (i >> 8)))
			return 0;
	return 1;
}

static void count(struct run *r, const struct ioswitch_cpl *cpl)
{
	struct slot *s = cpl->user_arg;

	r->completed++;
	if (!ioswitch_cpl_ok(cpl) || cpl->result != BS) {
		if (r->errors++ < 3)
			fprintf(stderr, "async_rw: block %" PRIu64 ": %s (errno %d), %" PRIu64 " bytes\n",
				s->block, ioswitch_status_name(cpl->status), cpl->errnum, cpl->result);
	}
	s->busy = 0;
}

static void on_write(const struct ioswitch_cpl *cpl, void *arg)
{
	count(arg, cpl);
}

static void on_read(const struct ioswitch_cpl *cpl, void *arg)
{
	struct run *r = arg;
	struct slot *s = cpl->user_arg;

	/* The buffer is the caller's again: it may be read here. */
	if (ioswitch_cpl_ok(cpl) && !check(s->buf, s->block)) {
		if (r->mismatches++ < 3)
			fprintf(stderr, "async_rw: block %" PRIu64 " read back wrong data\n", s->block);
	}
	count(r, cpl);
}

static struct slot *free_slot(struct ioswitch_queue *q, struct run *r)
{
	for (;;) {
		for (int i = 0; i < QD; i++)
			if (!r->slots[i].busy)
				return &r->slots[i];
		if (ioswitch_queue_wait(q, 1) < 0)
			return NULL;
	}
}

static int pass(struct ioswitch_queue *q, struct run *r, int reading)
{
	struct ioswitch_cmd cmd;
	int err, checked_busy = 0;

	for (uint64_t b = 0; b < NBLK; b++) {
		struct slot *s = free_slot(q, r);

		if (!s) {
			fprintf(stderr, "async_rw: wait: %s\n", ioswitch_last_error());
			return 1;
		}
		s->block = b;
		if (reading) {
			memset(s->buf, 0, BS);
			ioswitch_cmd_fs_read(b * BS, BS, &cmd);
			err = ioswitch_queue_submit_cb(q, &cmd, (void **)&s->buf, 1, s, on_read, r);
		} else {
			fill(s->buf, b);
			ioswitch_cmd_fs_write(b * BS, BS, &cmd);
			err = ioswitch_queue_submit(q, &cmd, (void **)&s->buf, 1, s);
		}
		if (err) {
			fprintf(stderr, "async_rw: submit block %" PRIu64 ": %s\n", b,
				ioswitch_last_error());
			return 1;
		}
		s->busy = 1;
		/* A buffer in flight belongs to the queue: freeing it must be refused. */
		if (!checked_busy && ioswitch_buf_free(s->buf) != -EBUSY) {
			fprintf(stderr, "async_rw: freeing a buffer in flight was not refused\n");
			return 1;
		}
		checked_busy = 1;
		if ((err = ioswitch_queue_poke(q, 0)) < 0) {
			fprintf(stderr, "async_rw: poke: %s\n", ioswitch_last_error());
			return 1;
		}
	}
	if ((err = ioswitch_queue_drain(q)) < 0) {
		fprintf(stderr, "async_rw: drain: %s\n", ioswitch_last_error());
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ioswitch_dev *dev = NULL;
	struct ioswitch_queue *q = NULL;
	struct ioswitch_ident id;
	struct ioswitch_queue_stats st;
	struct run r;
	int err, rc = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URI [OPTS]\n", argv[0]);
		return 2;
	}
	memset(&r, 0, sizeof(r));
	if ((err = ioswitch_dev_open(argv[1], argc > 2 ? argv[2] : NULL, &dev))) {
		fprintf(stderr, "async_rw: open: %s (%d)\n", ioswitch_last_error(), err);
		return 1;
	}
	ioswitch_dev_ident(dev, &id);
	for (int i = 0; i < QD; i++) {
		r.slots[i].buf = ioswitch_buf_alloc(dev, BS);
		if (!r.slots[i].buf) {
			fprintf(stderr, "async_rw: alloc: %s\n", ioswitch_last_error());
			goto out;
		}
	}
	if ((err = ioswitch_queue_init(dev, QD, &q))) {
		fprintf(stderr, "async_rw: queue: %s (%d)\n", ioswitch_last_error(), err);
		goto out;
	}
	ioswitch_queue_set_cb(q, on_write, &r);
	if (pass(q, &r, 0) || pass(q, &r, 1))
		goto out;
	ioswitch_queue_stats(q, &st);
	if (r.completed != 2 * NBLK || r.errors || r.mismatches || st.completed != 2 * NBLK ||
	    ioswitch_queue_outstanding(q) != 0) {
		fprintf(stderr, "async_rw: %u completions (want %d), %u errors, %u mismatches\n",
			r.completed, 2 * NBLK, r.errors, r.mismatches);
		goto out;
	}
	printf("async_rw: %s: %s qd%d wrote, read and verified %d blocks of %d bytes, "
	       "%" PRIu64 " syscalls\n",
	       id.uri, id.async_iface ? id.async_iface : "-", QD, NBLK, BS, st.syscalls);
	rc = 0;
out:
	if ((err = ioswitch_queue_term(q))) {
		fprintf(stderr, "async_rw: term: %s\n", ioswitch_last_error());
		rc = 1;
	}
	for (int i = 0; i < QD; i++)
		ioswitch_buf_free(r.slots[i].buf);
	ioswitch_dev_close(dev);
	return rc;
}
