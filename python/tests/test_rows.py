"""Rows: Client.lexsort and structured arrays (sort and argsort with NumPy's ``order=``) against
np.lexsort, np.sort(a, order=..., kind="stable") and np.argsort(a, order=..., kind="stable").

Each correctness test runs twice (fixture ``rows_client``):
- "stand-in": a Client whose _run performs the records jobs itself, in Python, from the
  SubmitRequest and the shared memory it names, as proto/gpusort.proto defines them (and with
  the daemon's checks of such a request): the client's packing, layouts, KeyFields and copies
  are tested with no daemon;
- "gpusortd": the real daemon (conftest's), which must support JOB_KIND_SORT_RECORDS and
  JOB_KIND_ARGSORT_RECORDS: a daemon without them FAILS these tests (fixture records_daemon),
  it does not skip them.
The refusals (bad keys, fields, names) need no daemon.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

import gpusort
from gpusort import _proto as pb
from gpusort import client as gc
from _data import keys, nans

# np.exceptions.AxisError since NumPy 1.25; np.AxisError before (gone from NumPy 2).
AxisError = getattr(getattr(np, "exceptions", None), "AxisError", None) or np.AxisError

# ---- a stand-in for the daemon's records jobs -------------------------------------------------

_WIDTH = {pb.COLUMN_TYPE_U32: "<u4", pb.COLUMN_TYPE_I32: "<i4", pb.COLUMN_TYPE_U64: "<u8",
          pb.COLUMN_TYPE_I64: "<i8", pb.COLUMN_TYPE_F32: "<f4", pb.COLUMN_TYPE_F64: "<f8"}


def _ranks(records: np.ndarray, f, floats_numpy: bool) -> np.ndarray:
    """Ranks (int64, equal keys equal ranks) of key field ``f`` of ``records`` (n x R bytes) as
    the protocol compares it: numbers by value (floats in NumPy's order: NaNs last in both
    orders and tied, -0.0 tied with +0.0), BYTES as unsigned bytes."""
    if f.type == pb.COLUMN_TYPE_BYTES:
        cut = np.ascontiguousarray(records[:, f.offset:f.offset + f.length])
        # Void items compare as memcmp; a trailing NUL keeps them distinct.
        v = np.concatenate([cut, np.ones((cut.shape[0], 1), np.uint8)], axis=1)
        v = np.ascontiguousarray(v).view(f"V{f.length + 1}").ravel()
        _, rank = np.unique(v, return_inverse=True)
        nan = np.zeros(rank.shape, bool)
    else:
        dt = np.dtype(_WIDTH[f.type])
        cut = np.ascontiguousarray(records[:, f.offset:f.offset + dt.itemsize])
        v = cut.view(dt).ravel()
        nan = np.zeros(v.shape, bool)
        if dt.kind == "f":
            assert floats_numpy, "float keys in a job without FLOAT_ORDER_NUMPY"
            nan = np.isnan(v)
            v = np.where(v == 0, np.zeros((), dt), v)
            v = np.where(nan, np.zeros((), dt), v)
        _, rank = np.unique(v, return_inverse=True)
    rank = rank.astype(np.int64).ravel()
    top = int(rank.max(initial=0)) + 1
    if f.order == pb.ORDER_DESCENDING:
        rank = top - 1 - rank
    return np.where(nan, top, rank)


def _check_records_request(req) -> None:
    """The daemon's check_records (proto/messages.cpp): what a records job must look like."""
    assert req.kind in (pb.JOB_KIND_SORT_RECORDS, pb.JOB_KIND_ARGSORT_RECORDS)
    assert 1 <= req.record_bytes <= 1 << 20
    assert 1 <= len(req.key_fields) <= 64
    for f in req.key_fields:
        assert f.type in range(1, 10) and f.order in (0, 1)
        size = f.length if f.type == pb.COLUMN_TYPE_BYTES else {1: 4, 2: 4, 3: 8, 4: 8, 5: 4,
                                                                 6: 8, 7: 16, 8: 16}[f.type]
        assert size >= 1
        assert f.type == pb.COLUMN_TYPE_BYTES or f.length == 0
        assert f.offset + size <= req.record_bytes
    assert req.dtype == 0 and req.order == 0 and not req.stable
    assert req.value_bytes == 0 and not req.HasField("values") and not req.HasField("values_out")
    assert not req.HasField("journal") and req.HasField("keys")
    if req.kind == pb.JOB_KIND_ARGSORT_RECORDS:
        assert req.index_bytes in (4, 8) and req.HasField("indices_out")
        assert not req.in_place and not req.HasField("keys_out")
    else:
        assert req.index_bytes == 0 and not req.HasField("indices_out")
        assert req.in_place != req.HasField("keys_out")


class StandIn(gpusort.Client):
    """A Client with no daemon: staging in memfds of its own, records jobs done in _run."""

    def __init__(self):  # no connection
        self._conn = SimpleNamespace(lock=threading.RLock(), live={}, closing=False)
        self._stage = None
        self.keep_buffer = False
        self.last_report = None
        self.regions: dict = {}
        self.requests: list = []

    def close(self):
        pass

    def _staging(self, nbytes):
        st = self._memfd(nbytes)
        self.regions[st.fd] = st
        return st

    def _memory(self, ref, fds):
        assert ref.WhichOneof("source") == "attached_fd", "the stand-in has no daemon buffers"
        return self.regions[fds[ref.attached_fd]].mm, ref.offset

    def _run(self, req, fds=(), progress=None, description="gpusort"):
        _check_records_request(req)
        self.requests.append(req)
        n, size = req.count, req.record_bytes
        mm, at = self._memory(req.keys, fds)
        records = np.frombuffer(mm, np.uint8, n * size, at).reshape(n, size)
        numpy = req.float_order == pb.FLOAT_ORDER_NUMPY
        ranks = [_ranks(records, f, numpy) for f in req.key_fields]
        perm = np.lexsort(ranks[::-1]) if n else np.empty(0, np.int64)
        if req.kind == pb.JOB_KIND_ARGSORT_RECORDS:
            out_mm, out_at = self._memory(req.indices_out, fds)
            ix = np.int64 if req.index_bytes == 8 else np.uint32
            np.frombuffer(out_mm, ix, n, out_at)[...] = perm
        elif req.in_place:
            records[...] = records[perm]
        else:
            out_mm, out_at = self._memory(req.keys_out, fds)
            np.frombuffer(out_mm, np.uint8, n * size, out_at).reshape(n, size)[...] = \
                records[perm]
        del records
        return None


# ---- clients --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def records_daemon(daemon):
    """The shared daemon, once it has run a records job right; a daemon without records
    support fails every test that needs it (it is the feature under test, not an option)."""
    ks = (np.array([2, 1, 2, 0], np.uint64), np.array([1, 1, 0, 1], np.int32))
    try:
        with daemon.client() as c:
            got = c.lexsort(ks)
    except gpusort.Error as e:
        pytest.fail(f"gpusortd ({daemon.socket}) cannot run records jobs "
                    f"(JOB_KIND_ARGSORT_RECORDS): {e}. Build it with the daemon side of "
                    "'Rows, not only numbers'.", pytrace=False)
    if not np.array_equal(got, np.lexsort(ks)):
        pytest.fail(f"gpusortd's records argsort returned {got}, np.lexsort {np.lexsort(ks)}",
                    pytrace=False)
    return daemon


@pytest.fixture(params=["stand-in", "gpusortd"])
def rows_client(request):
    if request.param == "stand-in":
        yield StandIn()
        return
    d = request.getfixturevalue("records_daemon")
    with d.client() as c:
        yield c


@pytest.fixture
def standin():
    return StandIn()


# ---- data -----------------------------------------------------------------------------------

SIZES = [0, 1, 2, 3, 17, 1009, 100_003]
SIZE_IDS = [str(n) for n in SIZES]

_BYTES_POOL = np.array([b"", b"a", b"a\x00b", b"ab", b"\xff", b"\x00\x01", b"b", b"abcde",
                        b"\x80", b"a\x00"], "S5")


def column(kind: str, n: int, rng) -> np.ndarray:
    """A key column of ``kind`` with many ties, the type's extremes, and for floats NaNs of
    both signs and payloads, -0.0 and +0.0 and infinities (_data.keys)."""
    if kind in ("u32", "i32", "u64", "i64", "f32", "f64"):
        dt = {"u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
              "f32": np.float32, "f64": np.float64}[kind]
        return keys(dt, n, rng, distinct=6)
    if kind == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if kind in ("i8", "i16", "u8", "u16"):
        dt = np.dtype({"i8": np.int8, "i16": np.int16, "u8": np.uint8, "u16": np.uint16}[kind])
        info = np.iinfo(dt)
        pool = np.array([info.min, info.max, 0, 1, 2, info.max // 2], dt)
        return rng.choice(pool, n)
    if kind == "f16":
        pool = np.array([-np.inf, np.inf, -0.0, 0.0, 1.0, -1.0, 65504, 6e-8, 0.5, np.nan],
                        np.float16)
        a = rng.choice(pool, n)
        if n >= 4:  # NaNs of both signs and many payloads
            k = n // 4
            bits = (rng.integers(0, 2, k) << 15) | 0x7C00 | rng.integers(1, 1024, k)
            a[rng.choice(n, k, replace=False)] = bits.astype(np.uint16).view(np.float16)
        return a
    if kind == "S5":
        return rng.choice(_BYTES_POOL, n)
    if kind in (">i8", ">f4", ">u4"):
        base = {">i8": np.int64, ">f4": np.float32, ">u4": np.uint32}[kind]
        return keys(base, n, rng, distinct=6).astype(kind)
    raise AssertionError(kind)


LEXSORT_CASES = {
    "u64,i32": ["u64", "i32"],
    "f64,i64,f32": ["f64", "i64", "f32"],
    "bool,i8,u16,f16": ["bool", "i8", "u16", "f16"],
    "S5,u32,f64": ["S5", "u32", "f64"],
    "be-i8,be-f4,u8,i16": [">i8", ">f4", "u8", "i16"],
}


def same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


# 32-byte rows with no bytes between fields: np.sort's copies leave those undefined, so only
# such rows compare byte for byte with NumPy.
ROW = np.dtype([("k", "<u8"), ("a", "<i4"), ("b", "<f4"), ("s", "S8"), ("x", "<u8")])
# Fields the client must convert (packed keys), 32 bytes too.
ROW_CONVERTED = np.dtype([("h", "<f2"), ("c", "i1"), ("t", "?"), ("w", "<u2"), ("be", ">i4"),
                          ("bf", ">f8"), ("k", "<u8"), ("s", "S6")])
# Fields the daemon compares where they lie, without conversion (big-endian unsigned as bytes).
ROW_BYTES = np.dtype([("bu", ">u4"), ("u", "u1"), ("t", "?"), ("s", "S2"), ("k", "<u8"),
                      ("d", "<f8"), ("y", ">u8")])


def rows(dt: np.dtype, n: int, rng, distinct: int = 5) -> np.ndarray:
    """Records of ``dt`` with few distinct values per field (so that ties reach the last
    field, and records equal in every field happen)."""
    a = np.zeros(n, dt)
    for name in dt.names:
        f = dt.fields[name][0]
        if f.kind == "S":
            a[name] = rng.choice(_BYTES_POOL[:distinct + 1], n)
        elif f.kind == "b":
            a[name] = rng.integers(0, 2, n).astype(bool)
        elif f.kind == "f":
            pool = np.array([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf, -2.0][:distinct + 2], f)
            a[name] = rng.choice(pool, n)
        else:
            info = np.iinfo(f)
            pool = np.array([info.min, info.max, 0, 1, info.max // 3][:distinct], f)
            a[name] = rng.choice(pool, n)
    return a


# ---- lexsort --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("case", list(LEXSORT_CASES), ids=list(LEXSORT_CASES))
def test_lexsort_equals_numpy(rows_client, rng, case, n):
    ks = [column(kind, n, rng) for kind in LEXSORT_CASES[case]]
    before = [k.copy() for k in ks]
    got = rows_client.lexsort(ks)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.lexsort(ks))
    assert all(same_bytes(k, b) for k, b in zip(ks, before)), "the keys must not change"


def test_lexsort_one_key_is_a_stable_argsort(rows_client, rng):
    k = column("f64", 100_003, rng)
    assert np.array_equal(rows_client.lexsort((k,)), np.argsort(k, kind="stable"))


def test_lexsort_last_key_is_primary(rows_client):
    first = np.array([1, 0, 1, 0], np.uint32)
    last = np.array([0, 0, 1, 1], np.uint32)
    assert rows_client.lexsort((first, last)).tolist() == [1, 0, 3, 2]
    assert rows_client.lexsort((last, first)).tolist() == [1, 3, 0, 2]


def test_lexsort_nans_and_signed_zeros(rows_client, rng):
    n = 10_007
    a = rng.choice(np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -np.inf], np.float64), n)
    a[::7] = nans(np.float64, len(a[::7]), rng)
    b = rng.choice(np.array([-0.0, 0.0, np.nan], np.float32), n)
    assert np.array_equal(rows_client.lexsort((b, a)), np.lexsort((b, a)))
    assert np.array_equal(rows_client.lexsort((a, b)), np.lexsort((a, b)))


def test_lexsort_uint32_indices(rows_client, rng):
    ks = [column("u64", 100_003, rng), column("i32", 100_003, rng)]
    got = rows_client.lexsort(ks, index_dtype=np.uint32)
    assert got.dtype == np.uint32
    assert np.array_equal(got, np.lexsort(ks))


def test_lexsort_of_a_2d_array_and_lists(rows_client, rng):
    grid = np.stack([column("i64", 50_000, rng) for _ in range(3)])
    assert np.array_equal(rows_client.lexsort(grid), np.lexsort(grid))
    lists = ([3, 1, 2, 1], [0.5, 0.5, -1.0, 0.5])
    assert np.array_equal(rows_client.lexsort(lists), np.lexsort(lists))
    assert np.array_equal(rows_client.lexsort(grid, axis=0), np.lexsort(grid, axis=0))


def test_lexsort_non_contiguous_keys(rows_client, rng):
    a = column("u64", 200_000, rng)[::2]
    b = column("f32", 300_000, rng)[::3]
    assert np.array_equal(rows_client.lexsort((a, b)), np.lexsort((a, b)))


def test_lexsort_bools_by_their_bytes_as_numpy(rows_client):
    # A bool made by a view can hold a byte other than 0 and 1; np.lexsort orders by the byte.
    b = np.array([0, 2, 1, 0, 2, 1], np.uint8).view(bool)
    assert np.array_equal(rows_client.lexsort((b,)), np.lexsort((b,)))


# ---- structured arrays ----------------------------------------------------------------------

ORDERS = [("k", "one u64 field"), (["a", "k"], "two fields"), ("s", "a bytes field"),
          (None, "every field"), (["b", "x"], "a float field"), (("x", "s", "k"), "three")]


@pytest.mark.parametrize("n", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("order", [o for o, _ in ORDERS], ids=[i for _, i in ORDERS])
def test_structured_sort_and_argsort_equal_numpy(rows_client, rng, order, n):
    a = rows(ROW, n, rng)
    before = a.copy()
    ref = np.sort(a, order=order, kind="stable")
    ref_idx = np.argsort(a, order=order, kind="stable")
    got = rows_client.sort(a, order=order)
    assert same_bytes(got, ref)
    assert same_bytes(rows_client.sort(a, order=order, kind="stable"), ref)
    idx = rows_client.argsort(a, order=order)
    assert idx.dtype == np.int64 and np.array_equal(idx, ref_idx)
    assert same_bytes(a, before), "the input must not change"
    if n:
        assert rows_client.argsort(a, order=order, index_dtype=np.uint32).dtype == np.uint32


@pytest.mark.parametrize("dt", [ROW_CONVERTED, ROW_BYTES], ids=["converted", "bytes-keys"])
@pytest.mark.parametrize("order", [None, "k", ["s", "t"]], ids=["all", "k", "s,t"])
def test_structured_fields_of_other_types(rows_client, rng, dt, order):
    n = 20_011
    a = rows(dt, n, rng)
    ref = np.sort(a, order=order, kind="stable")
    assert same_bytes(rows_client.sort(a, order=order), ref)
    assert np.array_equal(rows_client.argsort(a, order=order),
                          np.argsort(a, order=order, kind="stable"))


def test_structured_float16_nans_where_numpy_puts_them(rows_client, rng):
    # NumPy 1.24's structured sort ranks float16 NaNs FIRST (its half-float compare function),
    # unlike float16 arrays and float32/float64 fields. The client asks NumPy and follows it.
    a = np.zeros(1000, [("h", "<f2"), ("i", "<u4")])
    a["h"] = rng.choice(np.array([np.nan, -0.0, 0.0, 1.0, -np.inf], np.float16), 1000)
    a["i"] = rng.integers(0, 3, 1000)
    assert np.array_equal(rows_client.argsort(a, order="h"),
                          np.argsort(a, order="h", kind="stable"))


def test_structured_non_canonical_bools(rows_client):
    # np.sort(order=) compares bool fields as truth values: bytes 1 and 2 are equal there.
    a = np.zeros(6, [("t", "?"), ("i", "<i4")])
    a["i"] = [5, 4, 3, 2, 1, 0]
    a.view(np.uint8).reshape(6, -1)[:, 0] = [0, 2, 1, 0, 2, 1]
    assert np.array_equal(rows_client.argsort(a, order="t"),
                          np.argsort(a, order="t", kind="stable"))
    assert same_bytes(rows_client.sort(a, order="t"), np.sort(a, order="t", kind="stable"))


def test_structured_bytes_between_fields_travel_with_records(rows_client, rng):
    dt = np.dtype({"names": ["k", "v"], "formats": ["<u8", "<u4"], "offsets": [0, 16],
                   "itemsize": 32})
    a = rng.integers(0, 256, 32 * 5000, dtype=np.uint8).view(dt)
    a["k"] %= 50
    idx = np.argsort(a, order="k", kind="stable")
    got = rows_client.sort(a, order="k")
    for name in dt.names:
        assert np.array_equal(got[name], np.sort(a, order="k", kind="stable")[name])
    # NumPy's copy leaves the padding undefined; the client moves whole records.
    assert got.tobytes() == a.view("V32")[idx].tobytes()


def test_structured_in_place_and_non_contiguous(rows_client, rng):
    a = rows(ROW, 30_011, rng)
    ref = np.sort(a, order="k", kind="stable")
    assert rows_client.sort(a, order="k", inplace=True) is a
    assert same_bytes(a, ref)
    b = rows(ROW_CONVERTED, 30_011, rng)
    ref = np.sort(b, order="k", kind="stable")
    assert rows_client.sort(b, order="k", inplace=True) is b
    assert same_bytes(b, ref)
    c = rows(ROW, 60_000, rng)[::2]
    assert same_bytes(rows_client.sort(c, order=["s", "k"]),
                      np.sort(c, order=["s", "k"], kind="stable"))
    assert np.array_equal(rows_client.argsort(c, order="x"),
                          np.argsort(c, order="x", kind="stable"))


def test_structured_axis_none_and_subclass(rows_client, rng):
    grid = rows(ROW, 600, rng).reshape(20, 30)
    assert same_bytes(rows_client.sort(grid, axis=None, order="k"),
                      np.sort(grid, axis=None, order="k", kind="stable"))
    rec = rows(ROW, 500, rng).view(np.recarray)
    got = rows_client.sort(rec, order="a")
    assert type(got) is np.recarray
    assert same_bytes(got.view(np.ndarray), np.sort(rec.view(np.ndarray), order="a",
                                                    kind="stable"))


def test_structured_descending(rows_client, rng):
    # No NumPy reference: every field's order reversed, records equal in every field in input
    # order (Python's sort keeps that with reverse=True), NaNs last.
    dt = np.dtype([("k", "<u8"), ("a", "<i4"), ("s", "S4"), ("d", "<f8")])
    a = rows(dt, 3001, rng)
    a["d"][np.isnan(a["d"])] = 7.0
    keyed = [(int(r["a"]), int(r["k"]), bytes(r["s"]).ljust(4, b"\0"), float(r["d"]))
             for r in a]
    ref = sorted(range(len(a)), key=lambda i: keyed[i], reverse=True)
    assert rows_client.argsort(a, order=["a", "k"], descending=True).tolist() == ref
    assert same_bytes(rows_client.sort(a, order=["a", "k"], descending=True), a[ref])
    f = np.array([1.0, np.nan, 3.0, np.nan, 2.0])
    b = np.zeros(5, [("f", "<f8")])
    b["f"] = f
    assert rows_client.argsort(b, descending=True).tolist() == [2, 4, 0, 1, 3]


def test_structured_with_no_key_bytes(rows_client):
    a = np.zeros(4, [("e", "S0"), ("k", "S0")]) if np.dtype("S0").itemsize == 0 else None
    if a is None:  # pragma: no cover
        pytest.skip("this NumPy has no S0")
    assert rows_client.argsort(a).tolist() == [0, 1, 2, 3]


# ---- the daemon's shared buffers ------------------------------------------------------------


def test_shared_records_sort_where_they_are(records_daemon, rng):
    with records_daemon.client() as c:
        a = rows(ROW, 100_003, rng)
        ref = np.sort(a, order="k", kind="stable")
        x = c.empty(a.shape[0], ROW)
        x[:] = a
        assert c.is_shared(x)
        idx = c.empty(a.shape[0], np.int64)
        assert c.argsort(x, order="k", out=idx) is idx
        assert np.array_equal(idx, np.argsort(a, order="k", kind="stable"))
        assert c.sort(x, order="k") is x, "a shared array sorts in place"
        assert same_bytes(x, ref)


def test_tiny_daemon_records(tiny_daemon, rng):
    # Out of core on the daemon's side (1 MiB device budget).
    with tiny_daemon.client() as c:
        try:
            ks = [column("u64", 300_000, rng), column("f64", 300_000, rng)]
            got = c.lexsort(ks)
        except gpusort.Error as e:
            pytest.fail(f"records job on the tiny daemon: {e}", pytrace=False)
        assert np.array_equal(got, np.lexsort(ks))
        a = rows(ROW, 100_003, rng)
        assert same_bytes(c.sort(a, order=["a", "k"]), np.sort(a, order=["a", "k"],
                                                               kind="stable"))


# ---- what is sent ---------------------------------------------------------------------------


def test_requests_name_the_fields_where_they_lie(standin, rng):
    a = rows(ROW, 10, rng)
    standin.sort(a, order=["a", "k"])
    req = standin.requests[-1]
    assert req.kind == pb.JOB_KIND_SORT_RECORDS and req.record_bytes == 32 and req.in_place
    got = [(f.type, f.offset, f.length, f.order) for f in req.key_fields]
    assert got == [(pb.COLUMN_TYPE_I32, 8, 0, 0), (pb.COLUMN_TYPE_U64, 0, 0, 0),
                   (pb.COLUMN_TYPE_F32, 12, 0, 0), (pb.COLUMN_TYPE_BYTES, 16, 8, 0),
                   (pb.COLUMN_TYPE_U64, 24, 0, 0)]
    assert req.float_order == pb.FLOAT_ORDER_NUMPY
    standin.argsort(a, order="s", descending=True, index_dtype=np.uint32)
    req = standin.requests[-1]
    assert req.kind == pb.JOB_KIND_ARGSORT_RECORDS and req.index_bytes == 4
    assert all(f.order == pb.ORDER_DESCENDING for f in req.key_fields)


def test_adjacent_bytes_keys_are_one_key(standin, rng):
    a = rows(ROW_BYTES, 10, rng)
    standin.argsort(a)  # bu (>u4), u (u1), t (bool), s (S2): 8 adjacent bytes, in key order
    fields = [(f.type, f.offset, f.length) for f in standin.requests[-1].key_fields]
    assert fields[0] == (pb.COLUMN_TYPE_BYTES, 0, 8)
    assert fields[1:] == [(pb.COLUMN_TYPE_U64, 8, 0), (pb.COLUMN_TYPE_F64, 16, 0),
                          (pb.COLUMN_TYPE_BYTES, 24, 8)]


def test_lexsort_packs_the_primary_key_first(standin, rng):
    ks = (column("i8", 10, rng), column("u64", 10, rng), column("f32", 10, rng))
    standin.lexsort(ks)
    req = standin.requests[-1]
    assert req.kind == pb.JOB_KIND_ARGSORT_RECORDS and req.index_bytes == 8
    assert [f.type for f in req.key_fields] == [pb.COLUMN_TYPE_F32, pb.COLUMN_TYPE_U64,
                                                pb.COLUMN_TYPE_I32]
    assert req.record_bytes == 16  # u64 at 0, f32 at 8, i32 (the int8 widened) at 12
    assert [f.offset for f in req.key_fields] == [8, 0, 12]
    assert req.float_order == pb.FLOAT_ORDER_NUMPY
    standin.lexsort((column("u32", 10, rng),))
    assert standin.requests[-1].float_order == pb.FLOAT_ORDER_TOTAL


# ---- refusals: clear errors, nothing changed ------------------------------------------------


def test_lexsort_refusals(standin):
    a = np.arange(5, dtype=np.int64)
    kept = a.copy()
    with pytest.raises(ValueError, match="same shape"):
        standin.lexsort((a, np.arange(4)))
    with pytest.raises(TypeError, match="len > 0"):
        standin.lexsort(())
    with pytest.raises(ValueError, match="1-D array"):
        standin.lexsort(a)
    with pytest.raises(ValueError, match="1-D keys"):
        standin.lexsort((np.zeros((2, 3)),))
    with pytest.raises(AxisError):
        standin.lexsort((a,), axis=1)
    for bad, name in [(np.zeros(5, np.complex128), "complex128"),
                      (np.array(list("abcde")), "<U1"), (np.zeros(5, object), "object"),
                      (np.zeros(5, "M8[s]"), "datetime64"), (np.zeros(5, np.longdouble),
                                                             np.dtype(np.longdouble).name)]:
        if np.dtype(np.longdouble).itemsize <= 8 and bad.dtype == np.longdouble:
            continue  # a platform whose long double is a double
        with pytest.raises(TypeError, match="gpusort cannot sort by key 1") as e:
            standin.lexsort((a, bad))
        assert name in str(e.value)
    with pytest.raises(TypeError, match="masked"):
        standin.lexsort((np.ma.array(a, mask=[0, 1, 0, 0, 0]),))
    with pytest.raises(TypeError, match="index_dtype"):
        standin.lexsort((a,), index_dtype=np.int32)
    with pytest.raises(ValueError, match="more than the 64"):
        standin.lexsort([a] * 65)
    assert same_bytes(a, kept) and not standin.requests, "nothing sent, nothing changed"


def test_structured_refusals(standin, rng):
    a = rows(ROW, 100, rng)
    kept = a.copy()
    with pytest.raises(ValueError, match="unknown field name: nope"):
        standin.sort(a, order="nope")
    with pytest.raises(ValueError, match="unknown field name: nope"):
        standin.argsort(a, order=["k", "nope"])
    with pytest.raises(ValueError, match="duplicate field name: k"):
        standin.sort(a, order=["k", "k"])
    with pytest.raises(ValueError, match="unsupported order value"):
        standin.sort(a, order=3)
    with pytest.raises(AxisError):
        standin.sort(a, axis=1, order="k")
    with pytest.raises(ValueError, match="1-D"):
        standin.sort(a.reshape(10, 10), order="k")
    with pytest.raises(TypeError, match="masked"):
        standin.sort(np.ma.array(a), order="k")
    with pytest.raises(ValueError, match="sort kind"):
        standin.sort(a, order="k", kind="bogo")
    # NumPy breaks ties by every other field: one gpusort cannot compare is refused even when
    # it is not in order=, and the message says why.
    for dt, field, what in [([("k", "<u8"), ("name", "U4")], "name", "<U4"),
                            ([("k", "<u8"), ("o", "O")], "o", "object"),
                            ([("k", "<u8"), ("v", "<u2", (3,))], "v", "subarray"),
                            ([("k", "<u8"), ("n", [("p", "<u4")])], "n", "nested"),
                            ([("k", "<u8"), ("t", "M8[s]")], "t", "datetime64"),
                            ([("k", "<u8"), ("z", "<c8")], "z", "complex64")]:
        b = np.zeros(4, dt)
        with pytest.raises(TypeError, match=f"field '{field}'") as e:
            standin.sort(b, order="k")
        assert what in str(e.value) and "ties" in str(e.value)
        with pytest.raises(TypeError, match=f"field '{field}'"):
            standin.argsort(b, order=field)
    with pytest.raises(ValueError, match="structured"):
        standin.sort(np.arange(3), order="k")
    assert same_bytes(a, kept) and not standin.requests, "nothing sent, nothing changed"


def test_refusals_leave_the_daemon_client_usable(client, rng):
    # With the real daemon (records support not needed: nothing reaches it).
    a = rows(ROW, 100, rng)
    with pytest.raises(ValueError, match="unknown field name"):
        client.sort(a, order="nope")
    with pytest.raises(TypeError, match="complex128"):
        client.lexsort((np.zeros(100, np.complex128),))
    with pytest.raises(ValueError, match="same shape"):
        client.lexsort((np.arange(3), np.arange(4)))
    x = np.array([3, 1, 2], np.int64)
    assert np.array_equal(client.sort(x), [1, 2, 3])


# ---- the client's NumPy probes --------------------------------------------------------------


def test_numpy_habits_the_client_relies_on():
    # What the probes found on this NumPy; a change here is a NumPy change to look at.
    assert gc._bools_by_byte("lexsort") == bool(
        np.lexsort((np.array([2, 1], np.uint8).view(bool),))[0] == 1)
    assert not gc._bools_by_byte("fields")
    for dt in (np.float32, np.float64):
        assert gc._float_ranks("fields", np.dtype(dt)) == (False, False)
        assert gc._float_ranks("lexsort", np.dtype(dt)) == (False, False)
    assert gc._float_ranks("lexsort", np.dtype(np.float16)) == (False, False)
    # 'S' compares as unsigned bytes, trailing NULs as bytes 0 (memcmp of the padded items).
    s = np.array([b"a\x00b", b"a", b"\xff", b"", b"\x00\x01"], "S3")
    memcmp = sorted(range(len(s)), key=lambda i: s.view("V3")[i].tobytes())
    assert np.argsort(s, kind="stable").tolist() == memcmp
