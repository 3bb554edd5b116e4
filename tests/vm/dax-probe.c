/* tests/vm/dax-probe.c: proves DAX without ioswitch (tests/vm/pmem-tests.sh builds and runs it).
 *
 *   dax-probe file PATH       PATH (>= 2 MiB, on the file system under test) mapped
 *                             MAP_SHARED_VALIDATE | MAP_SYNC: the kernel grants MAP_SYNC only
 *                             where page faults map persistent memory directly (DAX), so
 *                             success proves DAX; a pattern stored through the mapping must
 *                             read back through pread(2). Also prints statx's DAX attribute.
 *                             Exit 0: MAP_SYNC granted and data checked; 3: MAP_SYNC refused
 *                             (the errno is printed); 1: anything else failed.
 *   dax-probe devdax DEV ALIGN  DEV (a device-dax char device) mapped for ALIGN bytes with
 *                             MAP_SHARED_VALIDATE | MAP_SYNC; a pattern stored through it must
 *                             read back through a second mapping; then a mapping of ALIGN/2
 *                             bytes must be refused with EINVAL (device-dax enforces its
 *                             alignment on every mapping). Exit 0 when all of that holds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

#define FILE_LEN (2u << 20)

static void fill(unsigned char *p, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)((i * 131u + seed) ^ (i >> 12));
}

static int check(const unsigned char *p, size_t len, unsigned seed, const char *what) {
    for (size_t i = 0; i < len; i++) {
        unsigned char want = (unsigned char)((i * 131u + seed) ^ (i >> 12));
        if (p[i] != want) {
            fprintf(stderr, "dax-probe: %s: byte %zu is %#x, stored %#x\n", what, i, p[i], want);
            return 1;
        }
    }
    return 0;
}

static int probe_file(const char *path) {
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        fprintf(stderr, "dax-probe: open %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) != 0) {
        fprintf(stderr, "dax-probe: statx %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("dax-probe: %s: statx: DAX attribute %s\n", path,
           !(stx.stx_attributes_mask & STATX_ATTR_DAX) ? "not reported"
           : (stx.stx_attributes & STATX_ATTR_DAX)     ? "set"
                                                       : "clear");
    if (stx.stx_size < FILE_LEN) {
        fprintf(stderr, "dax-probe: %s: %llu bytes, want at least %u\n", path,
                (unsigned long long)stx.stx_size, FILE_LEN);
        return 1;
    }
    void *m = mmap(NULL, FILE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        printf("dax-probe: %s: MAP_SYNC refused: %s (errno %d)\n", path, strerror(e), e);
        return 3;
    }
    fill(m, FILE_LEN, 7);
    unsigned char *back = malloc(FILE_LEN);
    if (!back || pread(fd, back, FILE_LEN, 0) != (ssize_t)FILE_LEN) {
        fprintf(stderr, "dax-probe: pread %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (check(back, FILE_LEN, 7, "pread after stores through the MAP_SYNC mapping"))
        return 1;
    printf("dax-probe: %s: MAP_SYNC mapping granted; %u bytes stored through it read back with pread\n",
           path, FILE_LEN);
    munmap(m, FILE_LEN);
    free(back);
    close(fd);
    return 0;
}

static int probe_devdax(const char *path, const char *align_s) {
    char *end;
    unsigned long long align = strtoull(align_s, &end, 0);
    if (*align_s == '\0' || *end != '\0' || align < 8192 || (align & (align - 1))) {
        fprintf(stderr, "dax-probe: alignment '%s' is not a power of two >= 8192\n", align_s);
        return 1;
    }
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        fprintf(stderr, "dax-probe: open %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
        fprintf(stderr, "dax-probe: %s is not a character device\n", path);
        return 1;
    }
    int flags = MAP_SHARED_VALIDATE | MAP_SYNC;
    void *a = mmap(NULL, align, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (a == MAP_FAILED) {
        fprintf(stderr, "dax-probe: %s: mmap of %llu bytes with MAP_SYNC: %s\n", path, align,
                strerror(errno));
        return 1;
    }
    fill(a, align, 11);
    void *b = mmap(NULL, align, PROT_READ, MAP_SHARED, fd, 0);
    if (b == MAP_FAILED) {
        fprintf(stderr, "dax-probe: %s: second mmap: %s\n", path, strerror(errno));
        return 1;
    }
    if (check(b, align, 11, "a second mapping after stores through the first"))
        return 1;
    munmap(b, align);
    munmap(a, align);
    void *c = mmap(NULL, align / 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c != MAP_FAILED) {
        fprintf(stderr, "dax-probe: %s: a mapping of %llu bytes (half the alignment) was granted\n",
                path, align / 2);
        return 1;
    }
    if (errno != EINVAL) {
        fprintf(stderr, "dax-probe: %s: a mapping of %llu bytes failed with %s, not EINVAL\n",
                path, align / 2, strerror(errno));
        return 1;
    }
    printf("dax-probe: %s: MAP_SYNC mapping of %llu bytes granted, data seen through a second "
           "mapping; %llu bytes refused (EINVAL): device-dax with %llu-byte alignment\n",
           path, align, align / 2, align);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "file") == 0)
        return probe_file(argv[2]);
    if (argc == 4 && strcmp(argv[1], "devdax") == 0)
        return probe_devdax(argv[2], argv[3]);
    fprintf(stderr, "usage: dax-probe file PATH | dax-probe devdax DEV ALIGN\n");
    return 2;
}
