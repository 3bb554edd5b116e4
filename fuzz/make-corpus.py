#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under fuzz/corpus/TARGET/.

Seeds come from the project's test data: the job files of crates/ioswitch-bench/tests/jobs/,
option strings, URIs, sizes and command lines taken from the unit tests, and NVMe pages
built the way the unit tests in crates/ioswitch/src/spec/ build them. Re-run after adding
seeds here (`python3 fuzz/make-corpus.py`); the output is deterministic.
"""
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(ROOT)
CORPUS = os.path.join(ROOT, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def texts(target, items):
    for i, t in enumerate(items):
        write(target, "seed-%02d" % i, t)


def le16(v):
    return struct.pack("<H", v)


def le32(v):
    return struct.pack("<I", v)


def le64(v):
    return struct.pack("<Q", v)


def put(b, off, data):
    b[off:off + len(data)] = data


# ---- URIs, options, sizes (uri.rs, opts.rs, units.rs tests) --------------------------

texts("uri", [
    "1GiB", "ramdisk:64m", "/dev/nvme0n1", "./1GiB", "", "tcp://10.0.0.1:4420", "ramdisk:100",
    "12parsecs", "/dev/ng0n1", "/dev/nvme0", "/dev/loop0", "512MiB", "ramdisk:1.5k",
    "/tmp/ioswitch-bench.img", "0x1000", "0000:00:05.0", "pci:10000:E1:1f.7", "0000:00:20.0",
    "pci:0000:00:05",
])

texts("opts", [
    "", "async=io_uring,direct=1,sqpoll=1",
    "async=io_uring,direct=1,sqpoll,sqpoll_cpu=1,threads=8,size=1MiB",
    "sync=block,async=libaio,admin=emulated,nsid=2,direct=1,create=1,register_files=1,single_issuer=1,allow_mounted_write=1",
    "async=io_uring_cmd,iopoll=1", "async=thrpool,threads=2", "async=emu,threads=x",
    "async=io_uring,rdonly=1", "rdonly,wronly", "sync=mmap,mem=posix,truncate=yes,size=4k",
    "sqpoll_cpu=3", "direct=on, rdonly=off ,create=true", "async=posix,create=1,size=256KiB",
    "nsid=0", "async=nil,register_buffers=1", "direct=1,direct=0",
    "sync\npsync",
])

texts("units", [
    "4096", "4k", "4KiB", "512MiB", "1g", "1.5k", "2T", "", "  \t", "k", "12q", "0.3b",
    "99999999999p", "99999999999999999999999", "18446744073709551615.999999999p", ".5m",
    "1.000000001g", "16PiB",
] + [le64(v) for v in (0, 4096, 1 << 30, 1000, (1 << 64) - 1, 3 << 50)])

# ---- job files and command lines (crates/ioswitch-bench) -----------------------------

jobs_dir = os.path.join(REPO, "crates", "ioswitch-bench", "tests", "jobs")
inc = open(os.path.join(jobs_dir, "common.inc")).read()
for name in sorted(os.listdir(jobs_dir)):
    if not name.endswith(".fio"):
        continue
    text = open(os.path.join(jobs_dir, name)).read()
    # The target skips includes (they read files of the machine): inline them.
    text = text.replace("include common.inc", inc)
    write("jobfile", name, text)
texts("jobfile", [
    "[global]\nbs=8k\n[a]\n[global]\nbs=16k\niodepth=4\n[b]\nbs=32k\n[c]\n",
    "[global-defaults]\niodepth=8\n[a]\n",
    "[a]\nstonewall\n[b]\n[c]\nnew_group\n[d]\nstonewall\n[e]\n",
    "[j]\nioengine=ioswitch\nioswitch_opts=async=io_uring,sqpoll=1\nrw=randrw\nrwmixwrite=30\n",
    "[j]\nbs=4k,64k\nsize=50%\noffset=10%\nfilename=/dev/nvme0n1:/tmp/a\\:b\nruntime=500ms\ntime_based\n",
    "[x]\nioengine=xnvme\nxnvme_async=io_uring_cmd\nxnvme_dev_nsid=1\nxnvme_iovec=0\nverify=md5\n",
    "[j]\ncpus_allowed=0-1,3\npercentile_list=50:99:99.9\nnumber_ios=0x100\nrandseed=42\n",
    "[j]\nhipri\nioengine=pvsync2\nfsync=8\ndo_verify=0\nrw=write ; comment\n",
    "[j\nbs=4k\n", "bs=4k\n[j]\n", "[j]\nrw=trim\n", "[j]\nbogus=1\n", "[j]\nbs\n",
    "[global]\nrw=read\n",
])

texts("jobargs", [
    "\n".join(["--ioengine=libaio", "--direct", "--output-format=json+", "--name=first",
               "--rw=randread", "--bs", "8k", "--thread", "--name=second", "--iodepth=4",
               "--time_based", "1", "--runtime=2", "extra.fio", "--output", "out.json"]),
    "--section=b\n--name=a\n--iodepth=9\n--name=global\n--bs=8k\n--name=b",
    "--name=j\n--bogus=1", "--name=j\n--bs=4x", "--name", "--output-format=terse\n--name=j",
    "--rw=read", "--name=j\n/nonexistent/x.fio",
    "--name=j\n--ioengine=ioswitch\n--ioswitch_opts=async=io_uring,sqpoll=1\n--sqthread_poll",
    "--name=m\n--rw=randrw\n--rwmixread=70\n--bs=4k,16k\n--iodepth=32\n--numjobs=2",
    "--name=w\n--rw=write\n--verify=crc32c\n--size=1m\n--filename=/tmp/a:/tmp/b",
])

texts("bench_lists", [
    "1,2,4,8", "512,4k,32k,128k", "io_uring,libaio,psync", "all", "json+,normal", "json",
    "1, 4096", "", "nil,mmap,thrpool", "4k,4096", "0", "normal,terse",
])

# ---- NVMe pages (crates/ioswitch/src/spec tests) --------------------------------------

PAGE = 4096


def page():
    return bytearray(PAGE)


# Identify Controller, as controller_fields_come_from_their_offsets builds it.
c = page()
put(c, 0, le16(0x1b36)); put(c, 2, le16(0x1af4))
put(c, 4, b"ioswitch-vm-0       "); put(c, 24, b" " * 40); put(c, 24, b"QEMU NVMe ")
put(c, 64, b"7.2.22  "); put(c, 73, bytes([0x00, 0x54, 0x52])); c[77] = 7
put(c, 80, le32(0x10400)); c[263] = 1; c[280] = 0xff; c[295] = 0x01; c[512] = 0x66; c[513] = 0x44
put(c, 516, le32(256)); put(c, 520, le16(0x15d)); c[525] = 7
put(c, 768, b"nqn.2019-08.org.qemu:x"); put(c, 2048, le16(0x9c4)); put(c, 2052, le32(16)); c[2083] = 0b11
write("idfy", "id-ctrl", bytes(c))
c2 = bytearray(c); c2[263] = 255; c2[77] = 255
write("idfy", "id-ctrl-npss-255", bytes(c2))

# Identify Namespace, as namespace_fields_and_the_lba_format_in_use builds it.
n = page()
put(n, 0, le64(0x40000)); put(n, 8, le64(0x3f000)); n[25] = 1; n[26] = 1
put(n, 128, le32(9 << 16)); put(n, 132, le32(12 << 16 | 8 | 2 << 24)); put(n, 120, bytes(range(1, 9)))
write("idfy", "id-ns", bytes(n))
n2 = bytearray(n); n2[25] = 20; n2[26] = 0x22
write("idfy", "id-ns-20-formats", bytes(n2))
n3 = bytearray(n); n3[25] = 255; n3[26] = 0x7f; put(n3, 128, le32(40 << 16))
write("idfy", "id-ns-255-formats", bytes(n3))

# ZNS Identify Namespace and the descriptor list (zns_pages_and_descriptor_lists).
z = page()
put(z, 4, le32(0xffffffff)); put(z, 8, le32(13)); put(z, 2816, le64(0x2000)); put(z, 2832, le64(0x4000)); z[2840] = 2
write("idfy", "id-ns-zns", bytes(z))
d = page()
put(d, 0, bytes([3, 16, 0, 0])); put(d, 4, b"\xaa" * 16); put(d, 20, bytes([4, 1, 0, 0])); d[24] = 2
put(d, 25, bytes([9, 200, 0, 0]))
write("idfy", "ns-descs", bytes(d))
e = page()
put(e, 4092, bytes([2, 16, 0, 0])); put(e, 0, bytes([5, 255, 0, 0]))
write("idfy", "ns-descs-past-end", bytes(e))
d2 = page()
put(d2, 0, bytes([1, 8, 0, 0])); put(d2, 4, bytes(range(8))); put(d2, 12, bytes([2, 16, 0, 0])); put(d2, 16, bytes(range(16)))
write("idfy", "ns-descs-eui-nguid", bytes(d2))
write("idfy", "short-100", bytes(c[:100]))
write("idfy", "short-4095", bytes(c[:4095]))
write("idfy", "long-4097", bytes(c) + b"\xff")
write("idfy", "all-ff", b"\xff" * PAGE)

# fio's log files (fiolog.rs tests): 3.33's 5- and 6-column lines, older 4-column ones.
texts("fiolog", [
    "0, 9292, 0, 4096, 0\n0, 2276, 1, 4096, 0\n12, 1187, 0, 4096, 0\n",
    "7, 900, 0, 512, 1048576, 0x2004\n8, 901, 1, 512, 2048, 0x0000\n",
    "3,5,0,4096\n4,6,1,4096\n",
    "100, 1500, 0, 4096, 0\n100, 700, 1, 4096, 0\n200, 1, 0, 4096, 0\n",
    "1, 100, 0, 4096, 0\n\n2, 1x0, 0, 4096, 0\n",
    "18446744073709551615, 18446744073709551615, 3, 18446744073709551615, 0\n0, 0, 0, 0, 0\n",
    # histogram lines (hist_coarseness 6: 29 columns)
    "0, 0, 4096, " + ", ".join("3" if i == 5 else "0" for i in range(29)) + "\n"
    + "500, 1, 4096, " + ", ".join(str(i) for i in range(29)) + "\n",
])
# log_store_compressed=1 logs (.log.fz): zlib streams of fio's 32- or 40-byte samples
# (time, value, ddir with the offset/prio bits, prio, 2 bytes padding, bs[, offset]).
import zlib
def sample(t, v, d, prio, bs, off=None):
    b = struct.pack("<QQIHxxQ", t, v, d, prio, bs)
    return b + (struct.pack("<Q", off) if off is not None else b"")
write("fiolog", "fz-two-streams",
      zlib.compress(sample(1, 1500, 0, 1 << 13, 4096) + sample(2, 2500, 1, 4, 8192))
      + zlib.compress(sample(9, 700, (1 << 31) | (1 << 30) | 2, 0x2004, 4096, 12288)))

# Log pages (log.rs tests).
s = bytearray(512)
s[0] = 0b101; put(s, 1, le16(323)); s[3] = 100; s[4] = 10; s[5] = 3
put(s, 32, ((1 << 64) - 1 + 7).to_bytes(16, "little"))
for i, off in enumerate(range(48, 192, 16)):
    s[off] = i + 2
s[192] = 11; s[196] = 12; put(s, 202, le16(300)); s[216] = 13; s[220] = 14; s[224] = 15; s[228] = 16
write("log", "smart", bytes(s))
write("log", "smart-232", bytes(s[:232]))
el = bytearray(128)
el[0] = 5; put(el, 8, le16(1)); put(el, 10, le16(0x1234))
status = 1 << 8 | 0xBC | 1 << 14
put(el, 12, le16((status << 1 | 1) & 0xffff)); put(el, 14, le16(0x0228)); put(el, 16, le64(1 << 32))
put(el, 24, le32(3)); el[29] = 3; el[30] = 2; el[31] = 0x7d; put(el, 32, le64(9))
write("log", "error-log", bytes(el))
write("log", "error-log-63", bytes(el[:63]))
fw = bytearray(512)
fw[0] = 0x21; put(fw, 8, b"1.0     "); put(fw, 24, b"2.5-rc1 "); put(fw, 56, b"\x01\xfe\x7f abc\x00")
write("log", "fw-slot", bytes(fw))
cn = bytearray(16)
cn[0] = 1; cn[4] = 3; cn[12] = 9
write("log", "changed-ns", bytes(cn))
write("log", "changed-ns-overflow", le32(0xffffffff) + bytes(12))
write("log", "changed-ns-short", bytes([1, 2]))
write("log", "changed-ns-full", b"".join(le32(i) for i in range(1, 1025)))
write("log", "empty", b"")

# Zone reports (zns.rs): a header, then descriptors.


def zdesc(ztype, state, attrs, cap, zslba, wp):
    b = bytearray(64)
    b[0] = ztype; b[1] = state << 4; b[2] = attrs
    put(b, 8, le64(cap)); put(b, 16, le64(zslba)); put(b, 24, le64(wp))
    return bytes(b)


zones = [zdesc(2, 1, 0, 0x1000, 0, 0), zdesc(2, 2, 0x80, 0x1000, 0x2000, 0x2100),
         zdesc(2, 0xe, 0x6, 0x1000, 0x4000, 0x5000), zdesc(3, 0xf, 0x1, 0, 0x6000, 0xffffffffffffffff)]
write("zns", "report-4", le64(4) + bytes(56) + b"".join(zones))
write("zns", "report-count-past-bytes", le64(100) + bytes(56) + b"".join(zones[:2]))
write("zns", "report-count-below-bytes", le64(1) + bytes(56) + b"".join(zones))
write("zns", "report-huge-count", le64((1 << 64) - 1) + bytes(56) + zones[1] + bytes(10))
write("zns", "report-header-only", le64(0) + bytes(56))
write("zns", "desc", zones[2])
write("zns", "short-63", bytes(63))
for a in ("close", "finish", "open", "reset", "offline"):
    write("zns", "action-" + a, a)

# Features: fid, then the dword (feat.rs).
for fid, dw in ((1, 0x03020107), (2, 0x45), (4, 0x0010_0165), (4, 0x0035_0155), (6, 1), (7, 0x003f_001f),
                (7, 0xffff_ffff), (0x0e, 0x1234), (0xff, 0xdead_beef)):
    write("feat", "fid-%02x-%08x" % (fid, dw), bytes([fid]) + le32(dw))
write("feat", "fid-only", bytes([7]))
