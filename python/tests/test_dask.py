"""gpusort.dask against pandas and NumPy: sort_values of dask DataFrames with the daemon sorting
each partition, and the sample sort of 1-D dask arrays, on a distributed LocalCluster of worker
processes (the daemon reached from each of them), and the errors that cross back from them."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gpusort  # noqa: E402
import gpusort.dask as gd  # noqa: E402
from conftest import Daemon  # noqa: E402
from _deadline import within  # noqa: E402

# Debian 12's distributed 2022.12 on its tornado: noise from the cluster's start, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:make_current is deprecated:DeprecationWarning")

ROWS = 60_000
TIMEOUT = 60  # seconds; a computation that takes longer is a hang

def compute(x):
    result = within(TIMEOUT, x.compute)
    if isinstance(result, BaseException):
        raise result
    return result


@pytest.fixture(scope="module")
def cluster(daemon):
    """Two worker processes of one thread each, whose default socket is the test daemon's."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env={"GPUSORT_SOCKET": daemon.socket},
                                  silence_logs=40) as c, distributed.Client(c) as client:
        yield client


def frame(rng, n: int = ROWS) -> pd.DataFrame:
    """Keys of many types with many ties (so that stability and the index order show), NaNs and
    NaTs, under a shuffled index."""
    nan = rng.random(n) < 0.1
    times = np.datetime64("2024-01-01") + rng.integers(0, 20, n).astype("timedelta64[D]")
    times[rng.random(n) < 0.05] = np.datetime64("NaT")
    return pd.DataFrame({
        "u64": rng.choice(np.array([0, 1, 2**63, 2**64 - 1, 12345], np.uint64), n),
        "u64wide": rng.choice(rng.integers(0, 2**64 - 1, n // 4, np.uint64, endpoint=True), n),
        "i32": rng.integers(-3, 3, n, dtype=np.int32),
        "f64": np.where(nan, np.nan, rng.choice([-0.0, 0.0, 1.5, -np.inf, np.inf], n)),
        "f32": rng.integers(0, 4, n).astype(np.float32),
        "u8": rng.integers(0, 3, n, dtype=np.uint8),
        "i16": rng.integers(-2, 2, n, dtype=np.int16),
        "flag": rng.random(n) < 0.5,
        "when": times,
        "row": np.arange(n),
    }, index=rng.permutation(n) * 7)


def partitioned(pdf: pd.DataFrame, npartitions: int = 6):
    # sort=False keeps the rows in their order (from_pandas would sort them by the index),
    # so that pandas' stable order of ties is the one the dask frame has too.
    return dd.from_pandas(pdf, npartitions=npartitions, sort=False)


def stable_reference(pdf, by, ascending=True, na_position="last"):
    return pdf.sort_values(by, ascending=ascending, na_position=na_position, kind="stable")


# ---- dask.dataframe on the cluster --------------------------------------------------------


@pytest.mark.parametrize("column", ["u64", "u64wide"])
@pytest.mark.parametrize("ascending", [True, False], ids=["asc", "desc"])
def test_sort_values_one_u64_column(cluster, daemon, rng, column, ascending):
    pdf = frame(rng)
    got = compute(gd.sort_values(partitioned(pdf), column, ascending=ascending,
                                 socket=daemon.socket))
    pd.testing.assert_frame_equal(got, stable_reference(pdf, column, ascending))


@pytest.mark.parametrize("by,ascending", [
    (["i32", "f64"], [True, False]),
    (["f64", "u8", "when"], [False, True, False]),
    (["when", "flag", "i16", "f32"], [True, False, True, False]),
    (["u64", "i32", "f64"], True),
], ids=["i32-f64", "f64-u8-when", "when-flag-i16-f32", "u64-i32-f64"])
@pytest.mark.parametrize("na_position", ["last", "first"])
def test_sort_values_several_columns(cluster, daemon, rng, by, ascending, na_position):
    pdf = frame(rng)
    got = compute(gd.sort_values(partitioned(pdf), by, ascending=ascending,
                                 na_position=na_position, socket=daemon.socket))
    pd.testing.assert_frame_equal(got, stable_reference(pdf, by, ascending, na_position))


@pytest.mark.parametrize("column", ["f64", "when"])
@pytest.mark.parametrize("ascending", [True, False], ids=["asc", "desc"])
@pytest.mark.parametrize("na_position", ["last", "first"])
def test_sort_values_missing_values(cluster, rng, column, ascending, na_position):
    # The workers' $GPUSORT_SOCKET (the cluster's env) reaches the daemon: socket=None.
    pdf = frame(rng)
    got = compute(gd.sort_values(partitioned(pdf), column, ascending=ascending,
                                 na_position=na_position))
    ref = stable_reference(pdf, column, ascending, na_position)
    assert ref[column].isna().any()
    pd.testing.assert_frame_equal(got, ref)


def test_sort_values_empty_partitions(cluster, daemon, rng):
    pdf = frame(rng)
    ddf = partitioned(pdf, 8)
    kept = ddf[(ddf.row < 10_000) | (ddf.row >= 40_000)]  # partitions 2 to 5 become empty
    lengths = kept.map_partitions(len).compute()
    assert list(lengths).count(0) >= 2
    got = compute(gd.sort_values(kept, ["i32", "f64"], ascending=[False, True],
                                 socket=daemon.socket))
    part = pdf[(pdf.row < 10_000) | (pdf.row >= 40_000)]
    pd.testing.assert_frame_equal(got, stable_reference(part, ["i32", "f64"], [False, True]))

    nothing = compute(gd.sort_values(ddf[ddf.row < 0], "u64", socket=daemon.socket))
    pd.testing.assert_frame_equal(nothing, pdf.iloc[:0])


@pytest.mark.filterwarnings("ignore:Running on a single-machine scheduler:UserWarning")
def test_sort_values_without_distributed_keeps_ties_in_order(daemon, rng):
    # Dask's local schedulers shuffle through "disk" by default, which loses the rows' input
    # order: sort_values builds its graph with the task shuffle instead.
    pdf = frame(rng)
    with dask.config.set(shuffle="disk"):
        graph = gd.sort_values(partitioned(pdf, 24), ["u8", "flag"], socket=daemon.socket)
    assert not any(name.startswith("shuffle-collect") for name in graph.dask.layers), \
        "the disk shuffle's layer"
    got = within(TIMEOUT, graph.compute, scheduler="threads", num_workers=8)
    pd.testing.assert_frame_equal(got, stable_reference(pdf, ["u8", "flag"]))


def test_dask_sort_function_by_hand(cluster, daemon, rng):
    pdf = frame(rng)
    ddf = partitioned(pdf)
    got = compute(ddf.sort_values("u64", ascending=False, sort_function=gd.partition_sort,
                                  sort_function_kwargs={"socket": daemon.socket,
                                                        "meta": ddf._meta}))
    pd.testing.assert_frame_equal(got, stable_reference(pdf, "u64", False))


# ---- the partition sort alone -------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "uint32", "int32",
                                   "uint64", "int64", "float16", "float32", "float64", "bool",
                                   "datetime64[ns]", "timedelta64[ns]"])
@pytest.mark.parametrize("ascending", [True, False], ids=["asc", "desc"])
@pytest.mark.parametrize("na_position", ["last", "first"])
def test_partition_sort_dtypes(daemon, rng, dtype, ascending, na_position):
    n = 5000
    values = rng.integers(0, 40, n)
    if dtype.startswith(("datetime", "timedelta")):
        keys = values.astype(dtype.replace("[ns]", "[s]")).astype(dtype)
        keys[rng.random(n) < 0.1] = np.datetime64("NaT") if dtype[0] == "d" else \
            np.timedelta64("NaT")
    elif dtype.startswith("float"):
        keys = values.astype(dtype)
        keys[rng.random(n) < 0.1] = np.nan
        keys[rng.random(n) < 0.05] = -0.0
    else:
        keys = (values % 2 if dtype == "bool" else values - 20 * (dtype[0] == "i")).astype(dtype)
    pdf = pd.DataFrame({"k": keys, "row": np.arange(n)}, index=rng.permutation(n))
    got = gd.partition_sort(pdf, ["k"], ascending, na_position, socket=daemon.socket)
    pd.testing.assert_frame_equal(got, stable_reference(pdf, "k", ascending, na_position))


def test_partition_sort_falls_back_to_pandas_for_other_dtypes(rng):
    n = 2000
    pdf = pd.DataFrame({
        "name": rng.choice(["b", "a", None, "c"], n),
        "cat": pd.Categorical(rng.choice(["x", "y", "z"], n)),
        "nullable": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
        "i": rng.integers(0, 3, n),
    }, index=rng.permutation(n))
    missing = "/nonexistent/gpusort.sock"  # no daemon: pandas must sort these alone
    for by, ascending in [("name", True), (["cat", "i"], [False, True]), ("nullable", False),
                          (["i", "name"], True)]:
        for na_position in ["last", "first"]:
            got = gd.partition_sort(pdf, by, ascending, na_position, socket=missing)
            pd.testing.assert_frame_equal(got, stable_reference(pdf, by, ascending, na_position))
    with pytest.raises(gpusort.Unavailable):  # numbers go to the daemon
        gd.partition_sort(pdf, ["i"], True, "last", socket=missing)


def test_partition_sort_moves_rows_of_any_columns(daemon, rng):
    # Numeric keys, and rows whose other columns NumPy takes (the fast path) or only pandas
    # does (extension dtypes, a repeated column name, a named column index).
    n = 3000
    base = {"k": rng.integers(0, 50, n).astype(np.int64), "f": rng.random(n),
            "t": pd.to_datetime(rng.integers(0, 10**9, n), unit="s")}
    frames = [pd.DataFrame(base, index=rng.permutation(n)),
              pd.DataFrame(dict(base, cat=pd.Categorical(rng.choice(["x", "y"], n)),
                                s=rng.choice(["a", "b", None], n),
                                nullable=pd.array(rng.choice([1, None], n), dtype="Int64"))),
              pd.DataFrame(np.stack([base["k"], base["k"] * 2], axis=1), columns=["k", "k2"])]
    frames[0].columns.name = "columns"
    repeated = pd.DataFrame({"k": base["k"], "v": base["f"]})
    repeated.columns = ["k", "k3"]
    repeated = pd.concat([repeated, repeated["k3"]], axis=1)  # two columns named "k3"
    frames.append(repeated)
    for pdf in frames:
        for ascending in (True, False):
            got = gd.partition_sort(pdf, "k", ascending, socket=daemon.socket)
            pd.testing.assert_frame_equal(got, stable_reference(pdf, "k", ascending, "last"))


def test_partition_sort_arguments(daemon, rng):
    pdf = frame(rng, 100)
    with pytest.raises(ValueError, match="na_position"):
        gd.partition_sort(pdf, "u64", na_position="middle", socket=daemon.socket)
    with pytest.raises(ValueError, match="Length of ascending"):
        gd.partition_sort(pdf, ["u64", "i32"], ascending=[True], socket=daemon.socket)
    one = pdf.iloc[:1]
    pd.testing.assert_frame_equal(gd.partition_sort(one, "u64", socket="/nonexistent"), one)


def test_client_per_process_shared_by_threads(daemon, rng):
    first = gd.client(daemon.socket)
    assert gd.client(daemon.socket) is first
    frames = [frame(np.random.default_rng(i), 20_000) for i in range(6)]
    results: list = [None] * len(frames)

    def work(i):
        results[i] = gd.partition_sort(frames[i], ["i32", "u64"], [False, True], "first",
                                       socket=daemon.socket)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(frames))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    for pdf, got in zip(frames, results):
        pd.testing.assert_frame_equal(got, stable_reference(pdf, ["i32", "u64"], [False, True],
                                                            "first"))
    assert gd.client(daemon.socket) is first


# ---- dask.array ---------------------------------------------------------------------------


def keys(dtype, n: int, rng) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.3
    if dt.kind in "ui":
        info = np.iinfo(dt)
        pool = np.concatenate([np.array([info.min, info.max, 0], dt),
                               rng.integers(info.min, info.max, 200, dtype=dt, endpoint=True)])
        return rng.choice(pool, n)
    a = (rng.standard_normal(n) * 100).astype(dt)
    a[rng.choice(n, n // 10, replace=False)] = np.nan
    a[rng.choice(n, n // 50, replace=False)] = -0.0
    a[rng.choice(n, n // 50, replace=False)] = np.inf
    return a


def reference(a: np.ndarray, descending: bool) -> np.ndarray:
    """np.sort, or largest first with the NaNs still last (the client's descending order)."""
    if not descending:
        return np.sort(a)
    nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    return np.concatenate([np.sort(a[~nan])[::-1], a[nan]])


def same(got: np.ndarray, ref: np.ndarray) -> bool:
    return got.dtype == ref.dtype and np.array_equal(got, ref, equal_nan=ref.dtype.kind == "f")


ARRAY_DTYPES = ["uint32", "int32", "uint64", "int64", "float32", "float64", "uint8", "int16",
                "float16", "bool"]


@pytest.mark.parametrize("dtype", ARRAY_DTYPES)
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_array_sort_dtypes(cluster, daemon, rng, dtype, descending):
    a = keys(dtype, ROWS, rng)
    x = da.from_array(a, chunks=ROWS // 5)
    got = gd.sort(x, descending=descending, socket=daemon.socket)
    assert got.shape == a.shape and got.dtype == a.dtype
    assert same(compute(got), reference(a, descending))


def test_array_sort_balances_buckets(cluster, daemon, rng):
    a = rng.integers(0, 2**64 - 1, 200_000, dtype=np.uint64, endpoint=True)
    got = gd.sort(da.from_array(a, chunks=25_000), socket=daemon.socket)
    sizes = got.chunks[0]
    assert len(sizes) == 8 and max(sizes) < 1.5 * a.shape[0] / 8, sizes
    assert same(compute(got), np.sort(a))


def test_array_sort_all_keys_equal(cluster, daemon):
    a = np.full(100_000, 7, np.int64)
    got = gd.sort(da.from_array(a, chunks=10_000), descending=True, socket=daemon.socket)
    sizes = got.chunks[0]
    assert len(sizes) == 10 and max(sizes) <= 2 * min(sizes), sizes  # the ties spread
    assert same(compute(got), a)


def test_array_sort_heavy_key_among_others(cluster, daemon, rng):
    a = np.where(rng.random(100_000) < 0.7, 0.5, rng.random(100_000))
    got = gd.sort(da.from_array(a, chunks=10_000), socket=daemon.socket)
    assert max(got.chunks[0]) < 0.3 * a.shape[0], got.chunks
    assert same(compute(got), np.sort(a))


def test_array_sort_one_chunk_holds_everything(cluster, daemon, rng):
    a = rng.standard_normal(50_000)
    x = da.from_array(a, chunks=((0, 0, 50_000, 0),))
    got = gd.sort(x, socket=daemon.socket)
    assert len(got.chunks[0]) == 4 and max(got.chunks[0]) < 0.5 * a.shape[0], got.chunks
    assert same(compute(got), np.sort(a))


def test_array_sort_one_chunk_and_tiny(cluster, daemon, rng):
    a = keys("float64", 10_000, rng)
    got = gd.sort(da.from_array(a, chunks=-1), descending=True, socket=daemon.socket)
    assert same(compute(got), reference(a, True))
    for n in (1, 2, 3):
        small = rng.integers(-5, 5, n)
        assert same(compute(gd.sort(da.from_array(small, chunks=1), socket=daemon.socket)),
                    np.sort(small))


def test_array_sort_empty(cluster, daemon):
    for x in (da.from_array(np.empty(0, np.float32)),
              da.arange(10.0, chunks=3)[da.arange(10.0, chunks=3) > 100]):
        got = gd.sort(x, socket=daemon.socket)
        assert got.dtype == np.float32 or got.dtype == np.float64
        assert compute(got).shape == (0,)


def test_array_sort_unknown_chunk_sizes(cluster, daemon, rng):
    a = keys("int64", ROWS, rng)
    x = da.from_array(a, chunks=ROWS // 4)
    x = x[x % 3 != 0]  # chunk sizes unknown (nan) until computed
    assert np.isnan(x.shape[0])
    got = gd.sort(x, socket=daemon.socket)
    assert same(compute(got), np.sort(a[a % 3 != 0]))


def test_array_sort_refuses(daemon):
    with pytest.raises(ValueError, match="1-D"):
        gd.sort(da.zeros((4, 4), chunks=2), socket=daemon.socket)
    for dtype in ("datetime64[ns]", "complex128", "object"):
        with pytest.raises(TypeError, match="cannot sort dtype"):
            gd.sort(da.from_array(np.zeros(4, dtype), chunks=2), socket=daemon.socket)


# ---- errors -------------------------------------------------------------------------------


def test_errors_pickle_as_themselves():
    for e in (gpusort.Error("TOO_LARGE", "too big"),
              gpusort.Unavailable("UNAVAILABLE", "nothing listens"),
              gpusort.ConnectionLost("CONNECTION_LOST", "gone")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and (back.status, back.message) == (e.status, e.message)


def test_no_daemon_is_a_clear_error(cluster, rng, tmp_path):
    missing = str(tmp_path / "none.sock")
    pdf = frame(rng, 10_000)
    err = within(TIMEOUT, lambda: gd.sort_values(partitioned(pdf), "u64", socket=missing)
                 .compute())
    assert isinstance(err, gpusort.Unavailable), repr(err)
    assert missing in str(err)
    err = within(TIMEOUT, lambda: gd.sort(da.from_array(keys("int64", 10_000, rng),
                                                        chunks=2_500), socket=missing).compute())
    assert isinstance(err, gpusort.Unavailable), repr(err)


def test_daemon_gone_after_use_is_a_clear_error(cluster, rng):
    d = Daemon()
    try:
        pdf = frame(rng, 10_000)
        ddf = partitioned(pdf, 4)
        pd.testing.assert_frame_equal(compute(gd.sort_values(ddf, "u64", socket=d.socket)),
                                      stable_reference(pdf, "u64"))
        d.kill()  # the workers keep connections to it
        for _ in range(2):  # their old connections, then new ones: no daemon either way
            err = within(TIMEOUT, lambda: gd.sort_values(ddf, "u64", socket=d.socket).compute())
            assert isinstance(err, gpusort.Unavailable), repr(err)
    finally:
        d.stop()


def test_daemon_restarted_between_computations(cluster, rng, tmp_path):
    # One socket path (a link) for two daemons in turn: the workers' connections to the first
    # are lost when it dies, and the next computation must get through to the second.
    link = tmp_path / "gpusortd.sock"
    first, second = Daemon(), None
    try:
        link.symlink_to(first.socket)
        pdf = frame(rng, 10_000)
        ddf = partitioned(pdf, 4)
        ref = stable_reference(pdf, ["i32", "u64"], [False, True])
        for restart in (False, True):
            if restart:
                first.kill()
                second = Daemon()
                link.unlink()
                link.symlink_to(second.socket)
            got = compute(gd.sort_values(ddf, ["i32", "u64"], [False, True], socket=str(link)))
            pd.testing.assert_frame_equal(got, ref)
        x = da.from_array(pdf.u64.to_numpy(), chunks=2_500)
        assert same(compute(gd.sort(x, socket=str(link))), np.sort(pdf.u64.to_numpy()))
    finally:
        first.stop()
        if second is not None:
            second.stop()
