/*
 * lean_rw: the lean asynchronous path. One buffer of QD slots is made a region and
 * attached to a queue; NBLK blocks are written from the slots and read back into them
 * with ioswitch_queue_submit_at (data by address, the block number as user data) and
 * reaped with ioswitch_queue_reap_at (events in the caller's array). Also checks the
 * refusals: a slot in flight, memory outside the region, an array too small for what
 * must be waited for, and freeing the buffer or the region while the queue holds them.
 *
 *   lean_rw URI [OPTS]    e.g.  lean_rw /tmp/data.img "create=1,size=1MiB,async=io_uring"
 */
#include <ioswitch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define QD 8
#define BS 4096
#define NBLK 128

static uint8_t pattern(uint64_t block, size_t i)
{
	return (uint8_t)(block * 29 + i * 3 + (i >> 9));
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "lean_rw: %s: %d (%s)\n", what, err, ioswitch_last_error());
	return 1;
}

/*
 * Runs NBLK commands (writes or reads) with at most QD in flight, each on a free slot
 * (completions may come in any order: a slot is reused only once its command has been
 * reaped). The user data carries the block number and the slot.
 */
static int pass(struct ioswitch_queue *q, uint8_t *mem, int write, unsigned *mismatches)
{
	struct ioswitch_event evs[QD];
	unsigned free_slots[QD], nfree = QD;
	uint64_t next = 0, done = 0;

	for (unsigned i = 0; i < QD; i++)
		free_slots[i] = i;
	while (done < NBLK) {
		while (next < NBLK && nfree > 0) {
			unsigned s = free_slots[--nfree];
			uint8_t *slot = mem + (size_t)s * BS;
			struct ioswitch_cmd cmd;
			int err;

			if (write) {
				for (size_t i = 0; i < BS; i++)
					slot[i] = pattern(next, i);
				ioswitch_cmd_fs_write(next * BS, BS, &cmd);
			} else {
				memset(slot, 0, BS);
				ioswitch_cmd_fs_read(next * BS, BS, &cmd);
			}
			err = ioswitch_queue_submit_at(q, &cmd, slot, BS, next << 8 | s);
			if (err)
				return fail("ioswitch_queue_submit_at", err);
			next++;
		}
		int n = ioswitch_queue_reap_at(q, 1, QD, evs);
		if (n < 1)
			return fail("ioswitch_queue_reap_at", n);
		for (int i = 0; i < n; i++) {
			uint64_t block = evs[i].user_data >> 8;
			unsigned s = (unsigned)(evs[i].user_data & 0xff);
			const uint8_t *slot = mem + (size_t)s * BS;

			if (evs[i].status || evs[i].errnum || evs[i].result != BS || block >= NBLK || s >= QD) {
				fprintf(stderr, "lean_rw: block %" PRIu64 ": status %u errno %d result %" PRIu64 "\n",
					block, evs[i].status, evs[i].errnum, evs[i].result);
				return 1;
			}
			if (!write)
				for (size_t j = 0; j < BS; j++)
					if (slot[j] != pattern(block, j)) {
						(*mismatches)++;
						break;
					}
			free_slots[nfree++] = s;
		}
		done += n;
	}
	return 0;
}

/* The calls that must be refused, with the errno each must give. */
static int refusals(struct ioswitch_dev *dev, struct ioswitch_queue *q, struct ioswitch_region *r,
		    uint8_t *mem)
{
	struct ioswitch_event ev[1];
	struct ioswitch_cmd cmd;
	void *other = ioswitch_buf_alloc(dev, BS);
	int err, bad = 0;

	if (!other)
		return fail("ioswitch_buf_alloc", -ENOMEM);
	ioswitch_cmd_fs_read(0, BS, &cmd);
	if ((err = ioswitch_queue_submit_at(q, &cmd, other, BS, 1)) != -EINVAL)
		bad += fail("a buffer outside the region was not refused with -EINVAL", err);
	if ((err = ioswitch_queue_submit_at(q, &cmd, mem + BS / 2, BS, 1)) != -EINVAL)
		bad += fail("a range across two slots was not refused with -EINVAL", err);
	if ((err = ioswitch_queue_submit_at(q, &cmd, mem, BS, 1)))
		return fail("ioswitch_queue_submit_at", err);
	if ((err = ioswitch_queue_submit_at(q, &cmd, mem, BS, 2)) != -EBUSY)
		bad += fail("a slot in flight was not refused with -EBUSY", err);
	if ((err = ioswitch_queue_reap_at(q, 2, 1, ev)) != -EINVAL)
		bad += fail("min above the array's length was not refused with -EINVAL", err);
	if ((err = ioswitch_buf_free(mem)) != -EBUSY)
		bad += fail("the region's buffer was not kept from ioswitch_buf_free", err);
	if ((err = ioswitch_region_free(r)) != -EBUSY)
		bad += fail("an attached region was not kept from ioswitch_region_free", err);
	if ((err = ioswitch_queue_reap_at(q, 1, 1, ev)) != 1 || ev[0].user_data != 1)
		bad += fail("reaping the one command", err);
	if ((err = ioswitch_buf_free(other)))
		bad += fail("ioswitch_buf_free", err);
	return bad;
}

int main(int argc, char **argv)
{
	struct ioswitch_dev *dev = NULL;
	struct ioswitch_queue *q = NULL;
	struct ioswitch_region *r = NULL;
	unsigned mismatches = 0;
	uint8_t *mem;
	int err, bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URI [OPTS]\n", argv[0]);
		return 2;
	}
	if ((err = ioswitch_dev_open(argv[1], argc > 2 ? argv[2] : "", &dev)))
		return fail("ioswitch_dev_open", err);
	mem = ioswitch_buf_alloc(dev, QD * BS);
	if (!mem)
		return fail("ioswitch_buf_alloc", -ENOMEM);
	if ((err = ioswitch_region_new(mem, BS, &r)))
		return fail("ioswitch_region_new", err);
	if ((err = ioswitch_queue_init(dev, QD, &q)))
		return fail("ioswitch_queue_init", err);
	if ((err = ioswitch_queue_attach(q, r)))
		return fail("ioswitch_queue_attach", err);
	bad += pass(q, mem, 1, &mismatches);
	bad += pass(q, mem, 0, &mismatches);
	bad += refusals(dev, q, r, mem);
	if ((err = ioswitch_queue_term(q)))
		bad += fail("ioswitch_queue_term", err);
	if ((err = ioswitch_region_free(r)))
		bad += fail("ioswitch_region_free", err);
	if ((err = ioswitch_buf_free(mem)))
		bad += fail("ioswitch_buf_free", err);
	ioswitch_dev_close(dev);
	if (mismatches)
		fprintf(stderr, "lean_rw: %u blocks read back differ\n", mismatches);
	if (bad || mismatches)
		return 1;
	printf("lean_rw: %d blocks written and read back through a region of %d slots\n", NBLK, QD);
	return 0;
}
