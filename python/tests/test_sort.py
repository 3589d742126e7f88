"""sort, argsort, sort_pairs and sort_by_key against NumPy, for every key type and both orders,
on the in-core daemon and on the out-of-core one (tiny device budget)."""

from __future__ import annotations

import numpy as np
import pytest

import gpusort
from _data import (DTYPE_IDS, DTYPES, keys, ref_argsort, ref_sort, same_bytes, same_values,
                   uint_of)

N = 300_000  # 2.4 MB of 8-byte keys: many chunks under the tiny daemon's 1 MiB budget

orders = pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
dtypes = pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)


@dtypes
@orders
def test_sort_equals_numpy(any_client, rng, dtype, descending):
    a = keys(dtype, N, rng)
    before = a.copy()
    got = any_client.sort(a, descending=descending)
    assert same_values(got, ref_sort(a, descending))
    assert same_bytes(a, before), "the input must not change"


@dtypes
@orders
def test_stable_sort_byte_for_byte(any_client, rng, dtype, descending):
    a = keys(dtype, N, rng)
    got = any_client.sort(a, descending=descending, stable=True)
    ref = ref_sort(a, descending)
    if not descending:
        assert same_bytes(ref, np.sort(a, kind="stable"))
    assert same_bytes(got.view(uint_of(got.dtype)), ref.view(uint_of(ref.dtype)))


@dtypes
@orders
def test_argsort_equals_numpy_stable(any_client, rng, dtype, descending):
    a = keys(dtype, N, rng)
    got = any_client.argsort(a, descending=descending)
    assert got.dtype == np.int64
    assert np.array_equal(got, ref_argsort(a, descending))


def test_tiny_daemon_sorts_out_of_core(tiny_daemon, rng):
    with tiny_daemon.client() as c:
        a = keys(np.uint64, N, rng)
        assert np.array_equal(c.sort(a), np.sort(a))
        assert c.last_report.rounds == 2 and c.last_report.chunks > 1


def test_argsort_uint32_indices(client, rng):
    a = keys(np.float64, 10_000, rng)
    got = client.argsort(a, index_dtype=np.uint32)
    assert got.dtype == np.uint32
    assert np.array_equal(got, np.argsort(a, kind="stable"))
    with pytest.raises(TypeError, match="index_dtype"):
        client.argsort(a, index_dtype=np.int32)


@dtypes
def test_special_floats_and_edges(client, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = np.array([np.nan, -np.inf, 0.0, -0.0, np.inf, -np.nan, 1.0, -1.0, np.nan, -0.0],
                     dtype=dt)
    else:
        info = np.iinfo(dt)
        a = np.array([info.max, info.min, 0, 1, info.max, info.min, 2], dtype=dt)
    assert same_values(client.sort(a), np.sort(a))
    assert same_bytes(client.sort(a, stable=True), np.sort(a, kind="stable"))
    assert np.array_equal(client.argsort(a), np.argsort(a, kind="stable"))
    assert np.array_equal(client.argsort(a, descending=True), ref_argsort(a, True))
    got = client.sort(a, descending=True, stable=True)
    assert same_bytes(got, ref_sort(a, True))
    if dt.kind == "f":
        assert np.isnan(got[-2:]).all(), "NaNs stay last when descending"


@dtypes
@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_arrays(client, dtype, n):
    a = np.arange(n, 0, -1).astype(dtype)
    got = client.sort(a)
    assert got.dtype == a.dtype and np.array_equal(got, np.sort(a))
    assert np.array_equal(client.argsort(a), np.argsort(a, kind="stable"))
    k, v = client.sort_pairs(a, np.arange(n, dtype=np.uint32))
    assert np.array_equal(k, np.sort(a)) and np.array_equal(a[v], k)
    out = client.sort_by_key(a, np.arange(n) * 1.5)
    assert np.array_equal(out[0], np.sort(a))


def test_non_contiguous_input(client, rng):
    base = keys(np.int64, 2 * N, rng)
    a = base[::2]
    assert not a.flags.c_contiguous
    assert np.array_equal(client.sort(a), np.sort(a))
    assert np.array_equal(client.argsort(a), np.argsort(a, kind="stable"))
    before = base.copy()
    client.sort(a, inplace=True)
    assert np.array_equal(a, np.sort(before[::2]))
    assert np.array_equal(base[1::2], before[1::2]), "only the strided elements change"


@pytest.mark.parametrize("dtype", [">u4", ">i4", ">u8", ">i8", ">f4", ">f8"])
def test_byte_swapped(client, rng, dtype):
    dt = np.dtype(dtype)
    a = keys(dt.newbyteorder("="), 50_000, rng).astype(dt)
    assert a.dtype.byteorder == ">"
    got = client.sort(a)
    assert got.dtype == a.dtype, "the result keeps the input's byte order, as np.sort"
    assert same_values(got, np.sort(a))
    assert same_bytes(client.sort(a, stable=True), np.sort(a, kind="stable"))
    assert np.array_equal(client.argsort(a), np.argsort(a, kind="stable"))
    b = a.copy()
    assert client.sort(b, inplace=True, stable=True) is b
    assert same_bytes(b, np.sort(a, kind="stable"))


def test_inplace(client, rng):
    a = keys(np.float32, N, rng)
    ref = np.sort(a, kind="stable")
    assert client.sort(a, inplace=True, stable=True) is a
    assert same_bytes(a, ref)
    ro = np.arange(5)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        client.sort(ro, inplace=True)
    with pytest.raises(TypeError, match="NumPy array"):
        client.sort([3, 1, 2], inplace=True)
    assert np.array_equal(client.sort([3, 1, 2]), [1, 2, 3])


# Structured arrays sort (by their fields, as np.sort(order=...)); one with a 'U' field is still
# refused, since gpusort has no key that compares UCS-4 code points as NumPy does.
@pytest.mark.parametrize("bad", [
    np.array([1, 2], dtype=object), np.array([1, 2], dtype=np.float16),
    np.array([1, 2], dtype=np.complex128), np.array([True, False]),
    np.array([1, 2], dtype=np.int16), np.array(["b", "a"]),
    np.zeros(2, dtype=[("a", "<u4"), ("b", "U2")]), np.array([1, 2], dtype=np.longdouble),
], ids=["object", "float16", "complex", "bool", "int16", "str", "struct", "longdouble"])
def test_wrong_dtypes(client, bad):
    with pytest.raises(TypeError, match="gpusort cannot sort"):
        client.sort(bad)
    with pytest.raises(TypeError):
        client.argsort(bad)


def test_wrong_shapes(client):
    with pytest.raises(ValueError, match="0-d"):
        client.sort(np.float64(3.0))
    with pytest.raises(ValueError, match="1-D"):
        client.sort(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="1-D"):
        client.argsort(np.zeros((3, 4), dtype=np.int32))


@dtypes
@pytest.mark.parametrize("vdtype", [np.uint32, np.float64, np.dtype(">i4"), "V8"],
                         ids=["u32", "f64", "be-i4", "void8"])
def test_sort_pairs(any_client, rng, dtype, vdtype):
    k = keys(dtype, N, rng)
    vdt = np.dtype(vdtype)
    v = rng.integers(0, 256, N * vdt.itemsize, dtype=np.uint8).view(vdt)
    sk, sv = any_client.sort_pairs(k, v, stable=True)
    order = np.argsort(k, kind="stable")
    assert same_bytes(sk, k[order])
    assert sv.dtype == vdt and same_bytes(sv, v[order]), "values move as raw bits"
    sk, sv = any_client.sort_pairs(k, v, descending=True, stable=True)
    order = ref_argsort(k, True)
    assert same_bytes(sk, k[order]) and same_bytes(sv, v[order])


def test_sort_pairs_unstable_keeps_pairs(client, rng):
    k = keys(np.uint64, N, rng, distinct=N)
    v = np.arange(N, dtype=np.uint64)
    sk, sv = client.sort_pairs(k, v)
    assert np.array_equal(sk, np.sort(k))
    assert np.array_equal(k[sv], sk), "each value stays beside its key"
    assert np.array_equal(np.sort(sv), v)


def test_sort_pairs_wrong_inputs(client):
    k = np.arange(4, dtype=np.uint32)
    with pytest.raises(ValueError, match="1-D array of 4"):
        client.sort_pairs(k, np.arange(3, dtype=np.uint32))
    with pytest.raises(TypeError, match="4 or 8 bytes"):
        client.sort_pairs(k, np.arange(4, dtype=np.int16))
    with pytest.raises(TypeError, match="object"):
        client.sort_pairs(k, np.array([None] * 4))


def test_sort_by_key(any_client, rng):
    k = keys(np.float64, N, rng)
    names = np.array([f"n{i % 977}" for i in range(N)])
    xy = rng.standard_normal((N, 2))
    small = np.arange(N, dtype=np.int8)
    sk, s_names, s_xy, s_small = any_client.sort_by_key(k, names, xy, small)
    order = np.argsort(k, kind="stable")
    assert same_bytes(sk, k[order])
    assert np.array_equal(s_names, names[order])
    assert np.array_equal(s_xy, xy[order])
    assert np.array_equal(s_small, small[order])
    with pytest.raises(ValueError, match="column 0"):
        any_client.sort_by_key(k, np.arange(3))


def test_shared_arrays_zero_copy(client, rng):
    a = keys(np.float64, N, rng)
    x = client.empty(N, np.float64)
    assert isinstance(x, np.ndarray) and client.is_shared(x)
    assert not x.any(), "a new shared array reads as zeros"
    x[:] = a
    assert client.sort(x, stable=True) is x, "a shared array is sorted where it is"
    assert same_bytes(x, np.sort(a, kind="stable"))
    # A contiguous slice is zero copy too, at its offset in the buffer.
    x[:] = a
    part = x[1000:5000]
    assert client.is_shared(part)
    client.sort(part)
    assert same_values(x[1000:5000], np.sort(a[1000:5000]))
    assert same_bytes(x[:1000], a[:1000]) and same_bytes(x[5000:], a[5000:])
    # Strided views are copied (and then not sorted in place unless asked).
    assert not client.is_shared(x[::2])
    # argsort into a shared index array, pairs in two shared arrays.
    idx = client.empty(N, np.int64)
    y = client.array(a)
    assert client.argsort(y, out=idx) is idx
    assert np.array_equal(idx, np.argsort(a, kind="stable"))
    v = client.array(np.arange(N, dtype=np.uint32))
    sk, sv = client.sort_pairs(y, v, stable=True)
    assert sk is y and sv is v
    assert np.array_equal(v, np.argsort(a, kind="stable"))


def test_shared_buffers_are_released():
    """Buffers of collected shared arrays go back to the daemon: a client may allocate far more
    than the pool over its life. An array outlives close(), still readable."""
    import gc
    from conftest import Daemon
    d = Daemon("pinned_pool_bytes: 64MiB")
    try:
        with d.client(keep_buffer=False) as c:
            for _ in range(8):  # 8 x 24 MiB through a 64 MiB pool
                x = c.empty(3 << 20, np.uint64)
                x[::4096] = 7
                del x
                gc.collect()
            y = c.array(np.arange(1000, dtype=np.int64)[::-1])
            c.sort(y)
            with pytest.raises(gpusort.Error) as e:
                c.empty(65 << 20, np.uint8)
            assert e.value.status == "TOO_LARGE"
        assert np.array_equal(y, np.arange(1000))
        del y
    finally:
        d.stop()


def test_shared_array_from_another_client_is_copied(daemon, rng):
    a = keys(np.int32, 1000, rng)
    with daemon.client() as c1, daemon.client() as c2:
        x = c1.array(a)
        assert not c2.is_shared(x)
        got = c2.sort(x)
        assert got is not x and np.array_equal(got, np.sort(a))
        assert np.array_equal(x, a)


def test_client_socket_from_environment(daemon, monkeypatch):
    monkeypatch.setenv("GPUSORT_SOCKET", daemon.socket)
    with gpusort.Client() as c:
        assert c.server.devices == ("cpu",)
        assert c.server.pid == daemon.pid
    assert c.closed
