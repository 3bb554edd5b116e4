/*
 * raw_rw: ioswitch_pass_raw, the synchronous pass with the caller's own memory (no
 * ioswitch_buf_alloc): writes a pattern from aligned_alloc memory, reads it back into
 * malloc memory (or, for direct I/O, into aligned_alloc memory) and compares, with NVM
 * and file-set commands; runs a flush without data; and checks that mistakes are
 * refused by name: NULL data with a length, memory smaller than the command, a read past
 * the end, and (for direct I/O) misaligned memory.
 *
 *   raw_rw URI [OPTS]     e.g.  raw_rw /tmp/data.img "create=1,size=1MiB,direct=1"
 */
#include <ioswitch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XFER (64 * 1024)

static int failed(const char *what, int err)
{
	fprintf(stderr, "raw_rw: %s: %s (%d)\n", what, ioswitch_last_error(), err);
	return 1;
}

/* A call that must fail with `want` and a message containing `text`. */
static int refused(const char *what, int err, int want, const char *text)
{
	if (err == want && strstr(ioswitch_last_error(), text))
		return 0;
	fprintf(stderr, "raw_rw: %s gave %d (%s); expected %d and a message with \"%s\"\n", what,
		err, ioswitch_last_error(), want, text);
	return 1;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + seed * 5 + (i >> 10));
}

static int run(struct ioswitch_dev *dev, int direct)
{
	struct ioswitch_ident id;
	struct ioswitch_geo geo;
	struct ioswitch_cmd cmd;
	struct ioswitch_cpl cpl;
	uint8_t *wbuf, *rbuf;
	size_t align;
	int err, rc = 1;

	if ((err = ioswitch_dev_ident(dev, &id)) || (err = ioswitch_dev_geo(dev, &geo)))
		return failed("ident/geo", err);
	if (geo.bytes < 2 * XFER) {
		fprintf(stderr, "raw_rw: %s holds %" PRIu64 " bytes; need %d\n", id.uri, geo.bytes,
			2 * XFER);
		return 1;
	}
	/* The caller's memory: aligned for direct I/O where it must be, plain malloc else. */
	align = geo.buffer_align;
	wbuf = aligned_alloc(align, XFER);
	rbuf = direct ? aligned_alloc(align, XFER + align) : malloc(XFER + 1);
	if (!wbuf || !rbuf) {
		fprintf(stderr, "raw_rw: out of memory\n");
		goto out;
	}

	/* NVM write of XFER bytes at LBA 0, read back, compare. */
	fill(wbuf, XFER, 1);
	ioswitch_cmd_write(id.nsid, 0, XFER / geo.lba_size, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, wbuf, XFER, &cpl))) {
		failed("write", err);
		goto out;
	}
	if (cpl.result != XFER || !ioswitch_cpl_ok(&cpl)) {
		fprintf(stderr, "raw_rw: write moved %" PRIu64 " bytes\n", cpl.result);
		goto out;
	}
	memset(rbuf, 0, XFER);
	ioswitch_cmd_read(id.nsid, 0, XFER / geo.lba_size, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, rbuf, XFER, &cpl))) {
		failed("read", err);
		goto out;
	}
	if (cpl.result != XFER || memcmp(wbuf, rbuf, XFER)) {
		fprintf(stderr, "raw_rw: data read back differs from data written\n");
		goto out;
	}

	/* File-set write at byte XFER, a flush without data, read back. */
	fill(wbuf, XFER, 2);
	ioswitch_cmd_fs_write(XFER, XFER, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, wbuf, XFER, NULL))) {
		failed("file-set write", err);
		goto out;
	}
	ioswitch_cmd_fs_flush(&cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, NULL, 0, &cpl)) || !ioswitch_cpl_ok(&cpl)) {
		failed("flush", err);
		goto out;
	}
	ioswitch_cmd_fs_read(XFER, XFER, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, rbuf, XFER, NULL))) {
		failed("file-set read", err);
		goto out;
	}
	if (memcmp(wbuf, rbuf, XFER)) {
		fprintf(stderr, "raw_rw: file-set data read back differs\n");
		goto out;
	}

	/* Mistakes are refused by name. */
	if (refused("NULL data", ioswitch_pass_raw(dev, &cmd, NULL, XFER, NULL), -EINVAL,
		    "data is NULL but len is") ||
	    refused("too little memory", ioswitch_pass_raw(dev, &cmd, rbuf, XFER / 2, NULL), -EINVAL,
		    "moves 65536 bytes"))
		goto out;
	ioswitch_cmd_read(id.nsid, geo.nlbas - 1, 2, &cmd);
	err = ioswitch_pass_raw(dev, &cmd, rbuf, 2 * geo.lba_size, &cpl);
	if (refused("a read past the end", err, -ERANGE, "out of range"))
		goto out;
	if (ioswitch_cpl_ok(&cpl)) {
		fprintf(stderr, "raw_rw: the completion of a failed read says ok\n");
		goto out;
	}
	if (direct) {
		ioswitch_cmd_fs_read(0, XFER, &cmd);
		err = ioswitch_pass_raw(dev, &cmd, rbuf + 1, XFER, NULL);
		if (refused("misaligned memory with direct I/O", err, -EINVAL,
			    "direct I/O needs buffer address aligned"))
			goto out;
	}
	printf("raw_rw: %s: wrote, read and verified 2 x %d bytes of caller memory (%s%s)\n", id.uri,
	       XFER, id.sync_iface ? id.sync_iface : "-", direct ? ", direct" : "");
	rc = 0;
out:
	free(wbuf);
	free(rbuf);
	return rc;
}

int main(int argc, char **argv)
{
	const char *opts = argc > 2 ? argv[2] : NULL;
	struct ioswitch_dev *dev;
	int err, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URI [OPTS]\n", argv[0]);
		return 2;
	}
	err = ioswitch_dev_open(argv[1], opts, &dev);
	if (err)
		return failed("open", err);
	rc = run(dev, opts && strstr(opts, "direct=1") != NULL);
	ioswitch_dev_close(dev);
	return rc;
}
