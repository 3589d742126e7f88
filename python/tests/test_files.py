""".npy and raw files through Client.sort_file (the CLI's .npy tests are elsewhere)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from _data import DTYPE_IDS, DTYPES, keys, ref_sort, same_bytes, same_values


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_npy_in_place_round_trip(client, rng, tmp_path, dtype):
    a = keys(dtype, 100_000, rng)
    path = tmp_path / "a.npy"
    np.save(path, a)
    header = path.read_bytes()[:128]
    report = client.sort_file(path, stable=True)
    assert report.elements == a.size
    got = np.load(path)
    assert got.dtype == a.dtype and got.shape == a.shape
    assert same_bytes(got, np.sort(a, kind="stable"))
    assert path.read_bytes()[:128] == header, "the header is kept as it was"


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_npy_to_new_file(client, rng, tmp_path, dtype):
    a = keys(dtype, 50_000, rng)
    src, dst = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(src, a)
    before = src.read_bytes()
    client.sort_file(src, out=dst, descending=True, stable=True)
    assert src.read_bytes() == before, "the input is only read"
    assert same_bytes(np.load(dst), ref_sort(a, True))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], \
        "no temporary is left"


def test_npy_dtype_from_header_and_mismatch(client, tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.array([3, 1, 2], dtype=np.uint32))
    client.sort_file(path, dtype=np.uint32)  # agreeing is fine
    assert np.array_equal(np.load(path), [1, 2, 3])
    with pytest.raises(ValueError, match="dtype uint32, not int64"):
        client.sort_file(path, dtype=np.int64)


def test_npy_big_endian(client, rng, tmp_path):
    a = keys(np.float64, 20_000, rng).astype(">f8")
    path, out = tmp_path / "be.npy", tmp_path / "be-sorted.npy"
    np.save(path, a)
    client.sort_file(path, out=out, stable=True)
    got = np.load(out)
    assert got.dtype == np.dtype(">f8") and same_bytes(got, np.sort(a, kind="stable"))
    client.sort_file(path)
    assert same_values(np.load(path), np.sort(a))


def test_npy_version_2_and_3_headers(client, tmp_path):
    a = np.array([5, -1, 3, 9, -7], dtype=np.int64)
    for version in [(2, 0), (3, 0)]:
        path = tmp_path / f"v{version[0]}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version)
        client.sort_file(path)
        assert np.array_equal(np.load(path), np.sort(a))


def test_npy_rejected(client, tmp_path):
    p2 = tmp_path / "2d.npy"
    np.save(p2, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="1-D"):
        client.sort_file(p2)
    p0 = tmp_path / "0d.npy"
    np.save(p0, np.float64(1.0))
    with pytest.raises(ValueError, match="1-D"):
        client.sort_file(p0)
    ph = tmp_path / "f16.npy"
    np.save(ph, np.zeros(4, dtype=np.float16))
    with pytest.raises(TypeError, match="cannot sort"):
        client.sort_file(ph)
    pt = tmp_path / "short.npy"
    np.save(pt, np.arange(100, dtype=np.int64))
    with open(pt, "r+b") as f:
        f.truncate(os.path.getsize(pt) - 8)
    with pytest.raises(ValueError, match="truncated"):
        client.sort_file(pt)
    pb = tmp_path / "junk.npy"
    pb.write_bytes(b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(ValueError, match="not a valid .npy"):
        client.sort_file(pb)


def test_npy_header_not_a_multiple_of_the_element_size(client, tmp_path):
    # numpy pads headers to 64 bytes; a writer that pads less gives an offset the daemon cannot
    # take for 8-byte elements: a clear error, the file untouched.
    a = np.array([3, 1, 2], dtype=np.int64)
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
    total = 6 + 2 + 2 + len(header) + 1
    pad = (12 - total % 12) % 12 + 4  # total % 8 == 4
    text = (header + " " * pad + "\n").encode("latin1")
    assert (10 + len(text)) % 8 == 4
    path = tmp_path / "odd.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + a.tobytes())
    assert np.array_equal(np.load(path), a)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="not a multiple of the element size 8"):
        client.sort_file(path)
    assert path.read_bytes() == before


def test_empty_npy(client, tmp_path):
    path, out = tmp_path / "e.npy", tmp_path / "e2.npy"
    np.save(path, np.zeros(0, dtype=np.float32))
    assert client.sort_file(path) is None
    client.sort_file(path, out=out)
    assert np.load(out).dtype == np.float32 and np.load(out).size == 0


def test_raw_files(client, rng, tmp_path):
    a = keys(np.int32, 100_000, rng)
    path = tmp_path / "a.bin"
    a.tofile(path)
    with pytest.raises(ValueError, match="pass dtype"):
        client.sort_file(path)
    client.sort_file(path, dtype=np.int32, out=tmp_path / "s.bin")
    assert np.array_equal(np.fromfile(tmp_path / "s.bin", dtype=np.int32), np.sort(a))
    client.sort_file(path, dtype="int32", descending=True)
    assert np.array_equal(np.fromfile(path, dtype=np.int32), np.sort(a)[::-1])
    (tmp_path / "odd.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ValueError, match="whole number"):
        client.sort_file(tmp_path / "odd.bin", dtype=np.uint64)


def test_sort_file_into_existing_output_keeps_its_mode(client, tmp_path):
    src, dst = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(src, np.array([2.0, 1.0]))
    dst.write_bytes(b"old")
    os.chmod(dst, 0o640)
    client.sort_file(src, out=dst)
    assert np.array_equal(np.load(dst), [1.0, 2.0])
    assert os.stat(dst).st_mode & 0o777 == 0o640


def test_sort_file_into_a_missing_folder_names_it(client, tmp_path):
    # Issue 43: the error named the internal temporary (.x.npy.gpusort-5833-b030eab1.tmp).
    src = tmp_path / "in.npy"
    np.save(src, np.arange(10, dtype=np.int64))
    out = tmp_path / "missing" / "x.npy"
    with pytest.raises(FileNotFoundError) as e:
        client.sort_file(src, out=out)
    assert e.value.filename == str(out)
    assert ".gpusort-" not in str(e.value)


def dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_stale_temporaries_of_dead_writers_are_removed(client, tmp_path):
    # Issue 43: a kill -9 left a full-size hidden temporary that no later run removed.
    import fcntl
    src, out = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(src, np.array([3, 1, 2], dtype=np.int64))
    dead = dead_pid()
    stale = [tmp_path / f".out.npy.gpusort-{dead}-b030eab1.tmp",   # ours (Python)
             tmp_path / f".out.npy.gpusort-{dead}-1234567.tmp"]    # the CLI's
    kept = [tmp_path / f".out.npy.gpusort-{os.getpid()}-00000001.tmp",  # a live writer's
            tmp_path / f".out.npy.gpusort-{dead}-00000002.tmp",        # locked: still written
            tmp_path / f".out.npy.gpusort-{dead}-00000003.old",        # a kept original
            tmp_path / f".other.npy.gpusort-{dead}-00000004.tmp"]      # another output's
    for p in stale + kept:
        p.write_bytes(b"x" * 4096)
    holder = os.open(kept[1], os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        with pytest.warns(RuntimeWarning, match="which no longer runs") as warned:
            client.sort_file(src, out=out)
    finally:
        os.close(holder)
    assert np.array_equal(np.load(out), [1, 2, 3])
    assert [p.exists() for p in stale] == [False, False]
    assert all(p.exists() for p in kept)
    said = " ".join(str(w.message) for w in warned)
    assert all(str(p) in said for p in stale)
    # In place too: a killed CLI's temporary of the file sorted where it is.
    cli_left = tmp_path / f".in.npy.gpusort-{dead}-7.tmp"
    cli_left.write_bytes(b"y")
    with pytest.warns(RuntimeWarning, match=re.escape(str(cli_left))):
        client.sort_file(src)
    assert not cli_left.exists()
