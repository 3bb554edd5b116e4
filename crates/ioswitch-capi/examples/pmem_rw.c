/*
 * pmem_rw: load/store access to a sync=pmem device from C. Lends a range of the mapping
 * (ioswitch_pmem_range), stores a pattern into it with memcpy, makes it durable
 * (ioswitch_pmem_persist), and reads it back through the command API
 * (ioswitch_pass_raw) once the range is released; checks that while lent the range is
 * refused to commands (-EBUSY) and to a second, overlapping range, that a persist past
 * the range's end is refused, and that a write through the command API is what a new
 * range then loads. The guarded copies (ioswitch_pmem_write / ioswitch_pmem_read) write
 * durably and read back what the command API sees; on a regular file, shrunk under the
 * range at the end, they return -EIO instead of the process dying of SIGBUS.
 *
 *   pmem_rw URI OPTS     e.g.  pmem_rw /dev/shm/x.img "sync=pmem,pmem_force=1,create=1,size=1MiB"
 */
#include <ioswitch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OFF 8192
#define LEN 65536

static int failed(const char *what, int err)
{
	fprintf(stderr, "pmem_rw: %s: %s (%d)\n", what, ioswitch_last_error(), err);
	return 1;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed * 3 + (i >> 9));
}

int main(int argc, char **argv)
{
	struct ioswitch_dev *dev;
	struct ioswitch_pmem *r, *r2;
	struct ioswitch_ident id;
	struct ioswitch_dax dax;
	struct ioswitch_cmd cmd;
	struct ioswitch_cpl cpl;
	uint8_t *want = malloc(LEN), *got = malloc(LEN);
	int err, rc = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: pmem_rw URI OPTS\n");
		return 2;
	}
	if (!want || !got)
		return failed("malloc", -ENOMEM);
	if ((err = ioswitch_dev_open(argv[1], argv[2], &dev)))
		return failed("open", err);
	if ((err = ioswitch_dev_ident(dev, &id))) {
		failed("ident", err);
		goto out;
	}
	/* The DAX identity: there on a devdax device or a file on a DAX file system, else
	 * -ENODATA (a /dev/shm file with pmem_force=1 is ordinary memory). */
	err = ioswitch_dev_dax(dev, &dax);
	if (err == 0) {
		if (!dax.mode || dax.align == 0 || (dax.align & (dax.align - 1)) || dax.size == 0) {
			fprintf(stderr, "pmem_rw: DAX identity mode %s align %" PRIu64 " size %" PRIu64 "\n",
				dax.mode ? dax.mode : "(null)", dax.align, dax.size);
			goto out;
		}
		printf("pmem_rw: DAX %s%s%s, align %" PRIu64 ", size %" PRIu64 "\n", dax.mode,
		       dax.namespace_name ? " " : "", dax.namespace_name ? dax.namespace_name : "", dax.align,
		       dax.size);
	} else if (err == -ENODATA) {
		printf("pmem_rw: not DAX (%s)\n", ioswitch_last_error());
	} else {
		failed("dev_dax", err);
		goto out;
	}
	if ((err = ioswitch_pmem_range(dev, OFF, LEN, &r))) {
		failed("pmem_range", err);
		goto out;
	}
	if (ioswitch_pmem_len(r) != LEN || !ioswitch_pmem_addr(r)) {
		fprintf(stderr, "pmem_rw: range of %zu bytes at %p\n", ioswitch_pmem_len(r),
			ioswitch_pmem_addr(r));
		goto out_r;
	}
	fill(want, LEN, 1);
	memcpy(ioswitch_pmem_addr(r), want, LEN);
	if ((err = ioswitch_pmem_persist(r, 0, LEN))) {
		failed("persist", err);
		goto out_r;
	}
	if ((err = ioswitch_pmem_persist(r, LEN - 10, 11)) != -EINVAL ||
	    !strstr(ioswitch_last_error(), "past the end")) {
		fprintf(stderr, "pmem_rw: persist past the end gave %d (%s)\n", err, ioswitch_last_error());
		goto out_r;
	}
	/* Lent: commands on it and a second overlapping range are refused. */
	ioswitch_cmd_fs_read(OFF, 4096, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, got, 4096, &cpl)) != -EBUSY) {
		fprintf(stderr, "pmem_rw: a read of a lent range gave %d (%s)\n", err, ioswitch_last_error());
		goto out_r;
	}
	if ((err = ioswitch_pmem_range(dev, OFF + LEN - 1, 2, &r2)) != -EINVAL || r2 ||
	    !strstr(ioswitch_last_error(), "overlap")) {
		fprintf(stderr, "pmem_rw: an overlapping range gave %d (%s)\n", err, ioswitch_last_error());
		goto out_r;
	}
	ioswitch_pmem_release(r);
	r = NULL;

	/* Released: the command API reads what the stores wrote. */
	ioswitch_cmd_fs_read(OFF, LEN, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, got, LEN, &cpl))) {
		failed("read", err);
		goto out;
	}
	if (memcmp(got, want, LEN)) {
		fprintf(stderr, "pmem_rw: the command API read other data than the stores wrote\n");
		goto out;
	}
	/* And the other way: a command's write is what a new range loads. */
	fill(want, 4096, 2);
	ioswitch_cmd_fs_write(OFF, 4096, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, want, 4096, &cpl))) {
		failed("write", err);
		goto out;
	}
	if ((err = ioswitch_pmem_range(dev, OFF, 4096, &r))) {
		failed("pmem_range again", err);
		goto out;
	}
	if (memcmp(ioswitch_pmem_addr(r), want, 4096)) {
		fprintf(stderr, "pmem_rw: the range loads other data than the command wrote\n");
		goto out_r;
	}
	/* Guarded copies: a durable write into the range, read back by the guarded read and,
	 * once released, by a command; a span past the end is refused. */
	fill(want, 4096, 3);
	if ((err = ioswitch_pmem_write(r, 0, want, 4096))) {
		failed("pmem_write", err);
		goto out_r;
	}
	memset(got, 0, 4096);
	if ((err = ioswitch_pmem_read(r, 0, got, 4096)) || memcmp(got, want, 4096)) {
		fprintf(stderr, "pmem_rw: pmem_read after pmem_write: %d (%s)\n", err, ioswitch_last_error());
		goto out_r;
	}
	if ((err = ioswitch_pmem_read(r, 4000, got, 100)) != -EINVAL || !strstr(ioswitch_last_error(), "past the end")) {
		fprintf(stderr, "pmem_rw: pmem_read past the end gave %d (%s)\n", err, ioswitch_last_error());
		goto out_r;
	}
	ioswitch_pmem_release(r);
	r = NULL;
	ioswitch_cmd_fs_read(OFF, 4096, &cmd);
	if ((err = ioswitch_pass_raw(dev, &cmd, got, 4096, &cpl)) || memcmp(got, want, 4096)) {
		fprintf(stderr, "pmem_rw: a command read other data than pmem_write wrote (%d)\n", err);
		goto out;
	}
	/* A regular file shrunk under a range: the guarded copies beyond its end give -EIO
	 * (a plain load there would end the process with SIGBUS). */
	struct stat st;
	if (stat(argv[1], &st) == 0 && S_ISREG(st.st_mode)) {
		if ((err = ioswitch_pmem_range(dev, OFF, LEN, &r))) {
			failed("pmem_range for the shrink", err);
			goto out;
		}
		if (truncate(argv[1], OFF + 4096)) {
			perror("pmem_rw: truncate");
			goto out_r;
		}
		if ((err = ioswitch_pmem_read(r, 8192, got, 4096)) != -EIO ||
		    (err = ioswitch_pmem_write(r, 8192, want, 4096)) != -EIO) {
			fprintf(stderr, "pmem_rw: a guarded copy beyond a shrunk file's end gave %d (%s)\n", err,
				ioswitch_last_error());
			goto out_r;
		}
		if ((err = ioswitch_pmem_read(r, 0, got, 4096)) || memcmp(got, want, 4096)) {
			fprintf(stderr, "pmem_rw: the page still in the file: %d (%s)\n", err, ioswitch_last_error());
			goto out_r;
		}
		printf("pmem_rw: guarded copies beyond a shrunk file's end: -EIO, the process lives on\n");
	}
	printf("pmem_rw: %s: 64 KiB stored + persisted, read back by command; command write loaded back\n",
	       id.uri);
	rc = 0;
out_r:
	ioswitch_pmem_release(r);
out:
	ioswitch_dev_close(dev);
	free(want);
	free(got);
	return rc;
}
