/*
 * sync_rw: writes a pattern with ioswitch_pass, reads it back and compares; also a
 * vectored write, a read past the end (must fail with -ERANGE) and freeing a pointer
 * that is not a buffer (must fail with -EINVAL).
 *
 *   sync_rw URI [OPTS]     e.g.  sync_rw /tmp/data.img "create=1,size=1MiB,sync=psync"
 */
#include <ioswitch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define XFER (64 * 1024)

static int failed(const char *what, int err)
{
	fprintf(stderr, "sync_rw: %s: %s (%d)\n", what, ioswitch_last_error(), err);
	return 1;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 9));
}

static int run(struct ioswitch_dev *dev)
{
	struct ioswitch_ident id;
	struct ioswitch_geo geo;
	struct ioswitch_cmd cmd;
	struct ioswitch_cpl cpl;
	uint8_t *wbuf, *rbuf, *half[2];
	uint32_t nlb;
	int err, rc = 1;

	if ((err = ioswitch_dev_ident(dev, &id)) || (err = ioswitch_dev_geo(dev, &geo)))
		return failed("ident/geo", err);
	if (geo.bytes < 2 * XFER) {
		fprintf(stderr, "sync_rw: %s holds %" PRIu64 " bytes; need %d\n", id.uri, geo.bytes,
			2 * XFER);
		return 1;
	}
	nlb = XFER / geo.lba_size;
	wbuf = ioswitch_buf_alloc(dev, XFER);
	rbuf = ioswitch_buf_alloc(dev, XFER);
	half[0] = ioswitch_buf_alloc(dev, XFER / 2);
	half[1] = ioswitch_buf_alloc(dev, XFER / 2);
	if (!wbuf || !rbuf || !half[0] || !half[1]) {
		failed("ioswitch_buf_alloc", -ENOMEM);
		goto out;
	}
	if ((uintptr_t)wbuf % geo.buffer_align) {
		fprintf(stderr, "sync_rw: buffer %p is not %u-aligned\n", (void *)wbuf, geo.buffer_align);
		goto out;
	}

	/* One buffer: NVM write of nlb blocks at LBA 0, read back, compare. */
	fill(wbuf, XFER, 1);
	ioswitch_cmd_write(id.nsid, 0, nlb, &cmd);
	if ((err = ioswitch_pass(dev, &cmd, (void **)&wbuf, 1, &cpl))) {
		failed("write", err);
		goto out;
	}
	if (cpl.result != XFER || !ioswitch_cpl_ok(&cpl)) {
		fprintf(stderr, "sync_rw: write moved %" PRIu64 " bytes\n", cpl.result);
		goto out;
	}
	ioswitch_cmd_read(id.nsid, 0, nlb, &cmd);
	if ((err = ioswitch_pass(dev, &cmd, (void **)&rbuf, 1, &cpl))) {
		failed("read", err);
		goto out;
	}
	if (memcmp(wbuf, rbuf, XFER)) {
		fprintf(stderr, "sync_rw: data read back differs from data written\n");
		goto out;
	}

	/* Two buffers: a vectored file-set write at byte XFER, read back into one buffer. */
	fill(half[0], XFER / 2, 2);
	fill(half[1], XFER / 2, 3);
	ioswitch_cmd_fs_write(XFER, XFER, &cmd);
	if ((err = ioswitch_pass(dev, &cmd, (void **)half, 2, NULL))) {
		failed("vectored write", err);
		goto out;
	}
	ioswitch_cmd_fs_read(XFER, XFER, &cmd);
	if ((err = ioswitch_pass(dev, &cmd, (void **)&rbuf, 1, NULL))) {
		failed("read after vectored write", err);
		goto out;
	}
	if (memcmp(rbuf, half[0], XFER / 2) || memcmp(rbuf + XFER / 2, half[1], XFER / 2)) {
		fprintf(stderr, "sync_rw: vectored data read back differs\n");
		goto out;
	}

	/* Errors name what was wrong and leave the buffers usable. */
	ioswitch_cmd_read(id.nsid, geo.nlbas - 1, 2, &cmd);
	err = ioswitch_pass(dev, &cmd, (void **)&rbuf, 1, &cpl);
	if (err != -ERANGE || ioswitch_cpl_ok(&cpl) || !strstr(ioswitch_last_error(), "out of range")) {
		fprintf(stderr, "sync_rw: a read past the end gave %d (%s)\n", err, ioswitch_last_error());
		goto out;
	}
	err = ioswitch_buf_free(rbuf + 4096);
	if (err != -EINVAL) {
		fprintf(stderr, "sync_rw: freeing an inner pointer gave %d\n", err);
		goto out;
	}
	printf("sync_rw: %s: wrote, read and verified %d + %d bytes (%s)\n", id.uri, XFER, XFER,
	       id.sync_iface ? id.sync_iface : "-");
	rc = 0;
out:
	ioswitch_buf_free(wbuf);
	ioswitch_buf_free(rbuf);
	ioswitch_buf_free(half[0]);
	ioswitch_buf_free(half[1]);
	return rc;
}

int main(int argc, char **argv)
{
	struct ioswitch_dev *dev;
	int err, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URI [OPTS]\n", argv[0]);
		return 2;
	}
	err = ioswitch_dev_open(argv[1], argc > 2 ? argv[2] : NULL, &dev);
	if (err)
		return failed("open", err);
	rc = run(dev);
	ioswitch_dev_close(dev);
	return rc;
}
