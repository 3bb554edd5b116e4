/*
 * The C API on a PCI address (run by vfio-driver-tests.sh in the --iommu guest, with the
 * controller bound to vfio-pci): open, alloc (the device's DMA memory), write, read back,
 * compare; the same through a queue at depth 8; a buffer that is not the device's DMA
 * memory refused with an error naming it, not handed to the device.
 *
 *   vfio-capi 0000:00:05.0 nsid=1
 *
 * (The examples under crates/ioswitch-capi/examples check that a read or write returns
 * its length, which holds for files and block devices; on an NVMe device the result is
 * completion DW0-1, as the header says.)
 */
#include <ioswitch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XFER (64 * 1024)
#define SLBA 230400 /* byte 1800 x 64 KiB at 512 B: away from the other checks' data */
#define QD 8

static int failed(const char *what, int err)
{
	fprintf(stderr, "vfio-capi: %s: %s (%d)\n", what, ioswitch_last_error(), err);
	return 1;
}

int main(int argc, char **argv)
{
	struct ioswitch_dev *dev;
	struct ioswitch_ident id;
	struct ioswitch_geo geo;
	struct ioswitch_cmd cmd;
	struct ioswitch_cpl cpl, cpls[QD];
	struct ioswitch_queue *q;
	uint8_t *w, *r, *qb[QD];
	uint32_t nlb;
	int err, i, n;

	if (argc < 2)
		return fprintf(stderr, "usage: vfio-capi PCIADDR [OPTS]\n"), 2;
	if ((err = ioswitch_dev_open(argv[1], argc > 2 ? argv[2] : NULL, &dev)))
		return failed("open", err);
	ioswitch_dev_ident(dev, &id);
	ioswitch_dev_geo(dev, &geo);
	if (id.kind != IOSWITCH_KIND_NVME_PCI)
		return fprintf(stderr, "vfio-capi: %s is a %s, not a PCI device\n", argv[1], id.kind_name), 1;
	if (geo.bytes < (uint64_t)SLBA * geo.lba_size + XFER)
		return fprintf(stderr, "vfio-capi: %s holds %" PRIu64 " bytes\n", argv[1], geo.bytes), 1;
	nlb = XFER / geo.lba_size;
	w = ioswitch_buf_alloc(dev, XFER);
	r = ioswitch_buf_alloc(dev, XFER);
	if (!w || !r)
		return failed("ioswitch_buf_alloc", -ENOMEM);
	for (i = 0; i < XFER; i++)
		w[i] = (uint8_t)(i * 13 + (i >> 12) + 5);

	/* Synchronous: write, read back, compare. */
	ioswitch_cmd_write(id.nsid, SLBA, nlb, &cmd);
	if ((err = ioswitch_pass(dev, &cmd, (void **)&w, 1, &cpl)) || !ioswitch_cpl_ok(&cpl))
		return failed("write", err);
	ioswitch_cmd_read(id.nsid, SLBA, nlb, &cmd);
	if ((err = ioswitch_pass(dev, &cmd, (void **)&r, 1, &cpl)) || !ioswitch_cpl_ok(&cpl))
		return failed("read", err);
	if (memcmp(w, r, XFER))
		return fprintf(stderr, "vfio-capi: sync read back differs\n"), 1;

	/* A queue: QD reads of the same blocks, each compared. */
	if ((err = ioswitch_queue_init(dev, QD, &q)))
		return failed("queue", err);
	for (i = 0; i < QD; i++) {
		if (!(qb[i] = ioswitch_buf_alloc(dev, XFER)))
			return failed("ioswitch_buf_alloc", -ENOMEM);
		ioswitch_cmd_read(id.nsid, SLBA, nlb, &cmd);
		if ((err = ioswitch_queue_submit(q, &cmd, (void **)&qb[i], 1, qb[i])))
			return failed("submit", err);
	}
	for (n = 0; n < QD;) {
		int got = ioswitch_queue_reap(q, 1, QD, cpls);

		if (got < 0)
			return failed("reap", got);
		for (i = 0; i < got; i++) {
			if (!ioswitch_cpl_ok(&cpls[i]))
				return fprintf(stderr, "vfio-capi: queued read: %s\n",
					       ioswitch_status_name(cpls[i].status)), 1;
			if (memcmp(cpls[i].user_arg, w, XFER))
				return fprintf(stderr, "vfio-capi: queued read differs\n"), 1;
		}
		n += got;
	}
	if ((err = ioswitch_queue_term(q)))
		return failed("term", err);

	/*
	 * Memory that is not the device's DMA memory is refused, naming the buffer; the
	 * device never sees it: a buffer of ioswitch_buf_alloc without a device, and
	 * caller memory through ioswitch_pass_raw.
	 */
	void *plain = ioswitch_buf_alloc(NULL, XFER);
	void *raw = aligned_alloc(4096, XFER);

	if (!plain || !raw)
		return failed("alloc", -ENOMEM);
	ioswitch_cmd_read(id.nsid, SLBA, nlb, &cmd);
	err = ioswitch_pass(dev, &cmd, &plain, 1, &cpl);
	if (err == 0 || !strstr(ioswitch_last_error(), "not DMA memory"))
		return fprintf(stderr, "vfio-capi: a buffer without a device was not refused (%d: %s)\n", err,
			       ioswitch_last_error()), 1;
	printf("vfio-capi: refused as expected: %s\n", ioswitch_last_error());
	err = ioswitch_pass_raw(dev, &cmd, raw, XFER, &cpl);
	if (err == 0 || !strstr(ioswitch_last_error(), "not DMA memory"))
		return fprintf(stderr, "vfio-capi: caller memory was not refused (%d: %s)\n", err,
			       ioswitch_last_error()), 1;
	printf("vfio-capi: refused as expected: %s\n", ioswitch_last_error());
	ioswitch_buf_free(plain);
	free(raw);
	for (i = 0; i < QD; i++)
		ioswitch_buf_free(qb[i]);
	ioswitch_buf_free(w);
	ioswitch_buf_free(r);
	ioswitch_dev_close(dev);
	printf("vfio-capi: %s nsid %u: sync and queued write/read back ok\n", argv[1], id.nsid);
	return 0;
}
