/*
 * info: opens a device and prints its identity and geometry, then lists the machine's
 * block and NVMe devices.
 *
 *   info URI [OPTS]        e.g.  info /tmp/data.img "create=1,size=1MiB"
 */
#include <ioswitch.h>
#include <inttypes.h>
#include <stdio.h>

static const char *or_none(const char *s)
{
	return s ? s : "-";
}

static int print_listing(const struct ioswitch_listing *l, void *arg)
{
	(void)arg;
	printf("  %-16s %-28s %12" PRIu64 " bytes  lba %u  driver %s\n", l->path, l->kind_name,
	       l->bytes, l->lba_size, or_none(l->driver));
	return 0;
}

int main(int argc, char **argv)
{
	struct ioswitch_dev *dev;
	struct ioswitch_ident id;
	struct ioswitch_geo geo;
	int n, err;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URI [OPTS]\n", argv[0]);
		return 2;
	}
	err = ioswitch_dev_open(argv[1], argc > 2 ? argv[2] : NULL, &dev);
	if (err) {
		fprintf(stderr, "info: %s (%d)\n", ioswitch_last_error(), err);
		return 1;
	}
	if (ioswitch_dev_ident(dev, &id) || ioswitch_dev_geo(dev, &geo)) {
		fprintf(stderr, "info: %s\n", ioswitch_last_error());
		ioswitch_dev_close(dev);
		return 1;
	}
	printf("ioswitch %s\n", ioswitch_version());
	printf("uri:          %s\n", id.uri);
	printf("path:         %s\n", or_none(id.path));
	printf("kind:         %s\n", id.kind_name);
	printf("nsid:         %u\n", id.nsid);
	printf("driver:       %s\n", or_none(id.driver));
	printf("interfaces:   sync=%s async=%s admin=%s mem=%s\n", or_none(id.sync_iface),
	       or_none(id.async_iface), or_none(id.admin_iface), or_none(id.mem_iface));
	printf("lba_size:     %u\n", geo.lba_size);
	printf("nlbas:        %" PRIu64 "\n", geo.nlbas);
	printf("bytes:        %" PRIu64 "\n", geo.bytes);
	printf("max_transfer: %" PRIu64 "\n", geo.max_transfer);
	printf("buffer_align: %u\n", geo.buffer_align);
	printf("dio_align:    mem %u, offset %u\n", geo.dio_mem_align, geo.dio_offset_align);
	printf("zoned:        %u\n", geo.zoned);
	ioswitch_dev_close(dev);

	printf("devices:\n");
	n = ioswitch_enumerate(print_listing, NULL);
	if (n < 0) {
		fprintf(stderr, "info: enumerate: %s\n", ioswitch_last_error());
		return 1;
	}
	printf("%d devices\n", n);
	return 0;
}
