"""ioswitch.bench.run: fio jobs in, fio's JSON report out."""

import errno

import pytest

import ioswitch

bench = pytest.importorskip("ioswitch.bench", reason="bench bindings not built")


def smoke_job(path, **extra):
    job = {"name": "smoke", "rw": "randread", "bs": "4k", "size": "1m", "ioengine": "psync", "filename": str(path)}
    job.update(extra)
    return job


def test_a_tiny_job_returns_fios_json_layout(tmp_path):
    rep = bench.run(smoke_job(tmp_path / "f.img"))
    assert "fio version" in rep and isinstance(rep["jobs"], list)
    (j,) = rep["jobs"]
    assert j["jobname"] == "smoke" and j["error"] == 0
    assert j["read"]["io_bytes"] == 1 << 20 and j["read"]["total_ios"] == 256
    assert j["read"]["iops"] > 0 and "percentile" in j["read"]["clat_ns"]
    assert j["write"]["total_ios"] == 0
    assert "ioswitch" in j


def test_async_job_and_ramdisk(tmp_path):
    rep = bench.run(smoke_job(tmp_path / "f.img", rw="randwrite", ioengine="io_uring", iodepth=8, direct=False))
    (j,) = rep["jobs"]
    assert j["write"]["total_ios"] == 256
    rep = bench.run({"name": "null", "rw": "read", "bs": "4k", "size": "1m", "ioengine": "null"})
    assert rep["jobs"][0]["read"]["total_ios"] == 256


def test_several_jobs_args_and_job_files(tmp_path):
    f = tmp_path / "f.img"
    rep = bench.run([smoke_job(f, name="a"), smoke_job(f, name="b", rw="read", stonewall=True)])
    assert [j["jobname"] for j in rep["jobs"]] == ["a", "b"]
    rep = bench.run(["--name=cli", "--rw=read", "--bs=4k", "--size=64k", "--ioengine=psync", f"--filename={f}"])
    assert rep["jobs"][0]["read"]["total_ios"] == 16
    jobfile = tmp_path / "job.fio"
    jobfile.write_text(f"[global]\nbs=4k\nioengine=psync\nfilename={f}\n[fromfile]\nrw=read\nsize=32k\n")
    rep = bench.run(jobfile)
    assert rep["jobs"][0]["jobname"] == "fromfile" and rep["jobs"][0]["read"]["total_ios"] == 8
    assert "global options" in rep


def test_bad_options_name_the_key(tmp_path):
    with pytest.raises(ioswitch.BadOptionError) as ei:
        bench.run(smoke_job(tmp_path / "f.img", blocksizee="4k"))
    assert ei.value.key == "blocksizee" and "blocksizee" in str(ei.value)
    assert "command line argument" not in str(ei.value)
    with pytest.raises(ioswitch.BadOptionError) as ei:
        bench.run(smoke_job(tmp_path / "f.img", rw="sideways"))
    assert ei.value.key == "rw" and ei.value.errno == errno.EINVAL


def test_a_job_that_cannot_open_is_a_bench_error(tmp_path):
    with pytest.raises(ioswitch.BenchError) as ei:
        bench.run(smoke_job(tmp_path / "f.img", ioengine="io_uring_cmd"))
    assert "f.img" in str(ei.value)
    with pytest.raises(TypeError):
        bench.run(42)
