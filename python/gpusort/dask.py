"""gpusort in Dask: the sort of each partition of a ``dask.dataframe`` sort_values, and a global
sort of a 1-D ``dask.array``, by the gpusortd daemon of each worker's host.

    import gpusort.dask
    s = gpusort.dask.sort_values(df, "key")                   # == df.sort_values("key"), stable
    s = gpusort.dask.sort_values(df, ["a", "b"], ascending=[True, False], na_position="first")
    df.sort_values("key", sort_function=gpusort.dask.partition_sort,   # the same, by hand
                   sort_function_kwargs={"meta": df._meta})
    y = gpusort.dask.sort(x)                                  # x: a 1-D dask array

What runs where: Dask plans and shuffles as it always does; only the sort of each partition (a
stable argsort of its keys, one daemon job per key column) runs in the daemon, reached from each
worker process through the socket ``socket=`` (default, read on the worker: ``$GPUSORT_SOCKET``,
else gpusort.DEFAULT_SOCKET). Each worker process keeps one gpusort.Client per socket, which its
threads share (the client serialises their calls: one connection and one kept staging buffer
per process, whatever the number of threads). A daemon that cannot be reached, or a job that
fails, raises the client's own exception (gpusort.Unavailable, gpusort.ConnectionLost,
gpusort.Error) from the computation: they pickle whole, so they cross from the worker to the
caller unchanged.

Importing this module needs dask (dask.dataframe for the DataFrame functions, dask.array for
``sort``); ``import gpusort`` alone never imports it.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np

import dask
from dask import delayed

from ._errors import ConnectionLost
from .client import DEFAULT_SOCKET, Client

__all__ = ["sort_values", "partition_sort", "sort", "client"]


# ---- the daemon connection of a worker ----------------------------------------------------

_clients: dict[tuple[int, str], Client] = {}
_clients_lock = threading.Lock()


def client(socket: str | os.PathLike | None = None) -> Client:
    """This process's Client of the daemon at ``socket`` (None: ``$GPUSORT_SOCKET``, else
    gpusort.DEFAULT_SOCKET), made at the first call and reused by every later one, from any
    thread. The key includes the process id: a Client cannot be used across fork(), so a forked
    child makes its own. A Client whose connection ended is replaced by a new one."""
    if socket is None:
        socket = os.environ.get("GPUSORT_SOCKET") or DEFAULT_SOCKET
    key = (os.getpid(), os.fspath(socket))
    with _clients_lock:
        c = _clients.get(key)
        if c is None or c.closed:
            c = Client(key[1], client_name=f"gpusort.dask (pid {key[0]})")
            _clients[key] = c
        return c


def _daemon(socket, method: str, *args, **kwargs):
    """``client(socket).method(*args, **kwargs)``, once more on a new connection when the
    cached one turns out to be lost: a connection kept from before the daemon restarted fails
    at its first use, and a long-lived worker should not fail a task for it. The calls used
    here (argsort, sort of our own copy) leave their inputs as they were when they fail. A
    daemon that is gone for good then raises Unavailable."""
    try:
        return getattr(client(socket), method)(*args, **kwargs)
    except ConnectionLost:
        return getattr(client(socket), method)(*args, **kwargs)


# ---- keys the daemon sorts ----------------------------------------------------------------

def _daemon_keys(values: np.ndarray):
    """(keys, kind of missing value) for the values of a column or an array: the values
    themselves when the daemon sorts their dtype, else an exact conversion to one it sorts
    (bool and 1- or 2-byte integers widened to 32 bits, float16 to float32, datetime64 and
    timedelta64 as their int64 counts); None for a dtype that has no exact conversion (object,
    strings, float128, complex, ...). The kind of missing value: "nan" for floats, "nat" for
    times, None for types that have none."""
    dt = values.dtype
    if dt.kind == "b":
        return values.astype(np.uint32), None
    if dt.kind in "ui" and dt.itemsize in (1, 2):
        return values.astype(np.uint32 if dt.kind == "u" else np.int32), None
    if dt.kind in "ui" and dt.itemsize in (4, 8):
        return values, None
    if dt.kind == "f" and dt.itemsize == 2:
        return values.astype(np.float32), "nan"
    if dt.kind == "f" and dt.itemsize in (4, 8):
        return values, "nan"
    if dt.kind in "mM":
        return values.view(np.int64), "nat"
    return None


_NAT = np.iinfo(np.int64).min


def _missing_block(na: str | None, ascending: bool) -> str | None:
    """Where the daemon's sort puts the missing values of keys from _daemon_keys: NaNs last in
    both orders (NumPy's order, which the client asks for), NaT (the smallest int64) first when
    ascending and last when descending; None when the keys have no missing value."""
    if na == "nan":
        return "last"
    if na == "nat":
        return "first" if ascending else "last"
    return None


def _count_missing(keys: np.ndarray, na: str) -> int:
    if na == "nan":
        return int(np.count_nonzero(np.isnan(keys)))
    return int(np.count_nonzero(keys == _NAT))


# ---- dask.dataframe -----------------------------------------------------------------------


def _as_lists(by, ascending) -> tuple[list, list]:
    by = [by] if isinstance(by, str) or not isinstance(by, (list, tuple)) else list(by)
    if isinstance(ascending, (list, tuple)):
        ascending = list(ascending)
        if len(ascending) != len(by):
            raise ValueError(f"Length of ascending ({len(ascending)}) != length of by "
                             f"({len(by)})")
    else:
        ascending = [ascending] * len(by)
    return by, [bool(a) for a in ascending]


def _take_rows(pdf, order: np.ndarray, known: dict | None = None):
    """``pdf.take(order)``. Where every column is a NumPy array, each is taken by NumPy (by
    position, so repeated names are fine) and the frame built around them: at 12.5M rows of
    two 8-byte columns 0.64-0.69 s against DataFrame.take's 0.91-1.08 s (the other half of a
    partition's sort, beside the daemon's argsort). Extension dtypes go through DataFrame.take.
    ``known``: columns (by position) already in the result's order."""
    if not all(isinstance(t, np.dtype) for t in pdf.dtypes):
        return pdf.take(order)
    known = known or {}
    out = pdf.__class__({i: known[i] if i in known else pdf.iloc[:, i].to_numpy().take(order)
                         for i in range(pdf.shape[1])}, index=pdf.index.take(order), copy=False)
    out.columns = pdf.columns
    return out


def partition_sort(pdf, by, ascending=True, na_position: str = "last", socket=None):
    """``pdf.sort_values(by, ascending=ascending, na_position=na_position, kind="stable")`` of a
    pandas DataFrame, with the daemon ordering the rows: equal to pandas' result, the index
    included. Dask's ``sort_values(..., sort_function=partition_sort)`` calls it on each
    partition with ``by``, ``ascending`` and ``na_position``; ``socket`` comes through
    ``sort_function_kwargs`` (see ``sort_values``, which passes everything for you).

    One key column: the stable argsort of its keys, then the rows taken by it (an integer key
    column itself comes back sorted from the daemon). Several: stable argsorts
    from the last column to the first (least significant digit first), each of the column
    permuted by the order so far; stability makes the later, more significant columns keep the
    order of the earlier ones among their ties, and the rows' input order among full ties.
    ``ascending``: one bool, or one per column. Missing values (NaN, NaT) go first or last in
    every column by ``na_position``, in their input order, as in pandas: the daemon puts NaNs
    last (and NaT, as the smallest int64, first when ascending), and the order is rotated
    when that is not where ``na_position`` wants them.

    Dtypes: the daemon's (uint32, int32, uint64, int64, float32, float64), also bool, 1- and
    2-byte integers, float16, datetime64 and timedelta64 (converted exactly, see above). When a
    key column has any other dtype (object and strings, categoricals, pandas' nullable and
    extension dtypes, tz-aware datetimes, float128, complex), pandas sorts the partition itself,
    with the same result. A partition of fewer than 2 rows needs no daemon.
    """
    if na_position not in ("first", "last"):
        raise ValueError(f"na_position must be 'first' or 'last', not {na_position!r}")
    by, ascending = _as_lists(by, ascending)
    columns = []
    for name in by:
        dt = pdf[name].dtype
        keys = _daemon_keys(pdf[name].to_numpy()) if isinstance(dt, np.dtype) else None
        if keys is None:
            return pdf.sort_values(by, ascending=ascending, na_position=na_position,
                                   kind="stable")
        columns.append(keys)
    n = len(pdf)
    if n < 2:
        return pdf.copy()
    # 4-byte positions where they reach: less for the daemon to write and to send back, and
    # for the take to read (about 15% of an argsort of 12.5M keys).
    index_dtype = np.uint32 if n < 2**32 else np.int64
    order = None
    primary_sorted = None
    for step, ((keys, na), asc) in enumerate(reversed(list(zip(columns, ascending)))):
        if order is not None:
            keys = keys[order]
        # The primary column's last pass: where the daemon sorts the column's own integers, its
        # sorted keys are that column of the result, read in order instead of taken by it
        # (floats may come back canonical, -0.0 as +0.0, and converted keys are not the column).
        if step == len(columns) - 1 and keys.dtype == pdf[by[0]].dtype and \
                keys.dtype.kind in "ui":
            idx, primary_sorted = _daemon(socket, "_argsort", keys, not asc, index_dtype,
                                          want_keys=True)
        else:
            idx = _daemon(socket, "argsort", keys, descending=not asc, index_dtype=index_dtype)
        at = _missing_block(na, asc)
        if at is not None and at != na_position:
            missing = _count_missing(keys, na)
            if missing:  # the missing values' block (in input order), moved to the other end
                idx = np.roll(idx, missing if at == "last" else -missing)
        order = idx if order is None else order[idx]
    known = {} if primary_sorted is None else {pdf.columns.get_loc(by[0]): primary_sorted}
    return _take_rows(pdf, order, known)


def sort_values(df, by, ascending=True, na_position: str = "last", socket=None,
                npartitions=None, shuffle: str | None = "tasks", **kwargs):
    """``df.sort_values(by, ...)`` of a dask DataFrame with the daemon sorting each partition
    (``partition_sort``): the result equals pandas' ``sort_values(by, kind="stable")`` of the
    whole frame. ``by``: a column or a list of them; ``ascending``: a bool or one per column;
    ``socket``: the daemon's socket on the workers (None: their ``$GPUSORT_SOCKET``, else
    gpusort.DEFAULT_SOCKET). ``npartitions`` and ``kwargs`` go to Dask's sort_values.

    ``shuffle``: the method of Dask's shuffle in the graph. "tasks" (the default) keeps the
    rows' input order, so that ties come in pandas' order; None takes Dask's configured method,
    which without a distributed Client is "disk", whose order of ties depends on which
    partitions were computed first (the keys are sorted all the same).

    Dask shuffles by the first column (its sort_values takes one column and one direction when
    there are several partitions): rows with equal first keys all land in one partition, which
    ``partition_sort`` then orders by every column. The output's metadata is the input's, so
    that Dask does not run the partition sort on a made-up frame to infer it (which would reach
    for a daemon on the caller's machine)."""
    by, ascending = _as_lists(by, ascending)
    # Dask 2022.12 reads the shuffle method from its configuration while it builds the graph.
    with dask.config.set(shuffle=shuffle) if shuffle else contextlib.nullcontext():
        return df.sort_values(
            by[0], npartitions=npartitions, ascending=ascending[0], na_position=na_position,
            sort_function=partition_sort,
            sort_function_kwargs={"by": by, "ascending": ascending, "socket": socket,
                                  "meta": df._meta},
            **kwargs)


# ---- dask.array ---------------------------------------------------------------------------

# Samples per output chunk: with the splitters chosen among this many samples per bucket, a
# bucket's size strays from its share by about 1/sqrt(128), some 9%, whatever the keys'
# distribution (heavy keys aside: _split spreads those).
_SAMPLES_PER_BUCKET = 128


def _sample(chunk: np.ndarray, k: int):
    """(k regularly spaced values of ``chunk`` without its NaNs, the number of elements each
    stands for)."""
    n = chunk.shape[0]
    k = min(k, n)
    if k == 0:
        return chunk[:0], 0.0
    picked = chunk[(np.arange(k) * 2 + 1) * n // (2 * k)]
    if picked.dtype.kind == "f":
        picked = picked[~np.isnan(picked)]
    return picked, n / k


def _splitters(samples: list, buckets: int, dtype) -> np.ndarray:
    """``buckets - 1`` splitters: the weighted quantiles of every chunk's samples (a chunk's
    samples weigh as many elements as each stands for, so that a large chunk counts as such)."""
    values = np.concatenate([np.asarray(s, dtype=dtype) for s, _ in samples])
    weights = np.concatenate([np.full(len(s), w) for s, w in samples])
    if values.shape[0] == 0 or buckets < 2:
        return values[:0]
    order = np.argsort(values, kind="stable")
    values, cumulative = values[order], np.cumsum(weights[order])
    targets = cumulative[-1] * np.arange(1, buckets) / buckets
    at = np.minimum(np.searchsorted(cumulative, targets), values.shape[0] - 1)
    return values[at]


def _split(chunk: np.ndarray, splitters: np.ndarray):
    """(bucket 0, ..., bucket B-1, the NaNs, counts of each): the values of ``chunk`` that each
    bucket gets. Bucket j takes the values between splitter j-1 and splitter j. A value equal
    to splitters low..high-1 (a heavy key: all keys equal, say) may go to any bucket from low to
    high, as those strictly between hold nothing else: such values are dealt round-robin over
    them, so that one key does not fill one bucket. NaNs go apart: they come after every
    bucket in both orders (NumPy's order, kept by the client's descending sort)."""
    nans = chunk[:0]
    if chunk.dtype.kind == "f":
        nan = np.isnan(chunk)
        if nan.any():
            nans, chunk = chunk[nan], chunk[~nan]
    low = np.searchsorted(splitters, chunk, side="left")
    bucket = np.searchsorted(splitters, chunk, side="right")
    tied = np.flatnonzero(bucket != low)
    if tied.shape[0]:
        span = bucket[tied] - low[tied] + 1
        bucket[tied] = low[tied] + np.arange(tied.shape[0]) % span
    buckets = splitters.shape[0] + 1
    counts = np.bincount(bucket, minlength=buckets)
    # A stable argsort of small integers is a radix sort in NumPy: linear in the chunk.
    grouped = chunk[np.argsort(bucket.astype(np.uint16 if buckets <= 1 << 16 else np.int64),
                               kind="stable")]
    pieces = np.split(grouped, np.cumsum(counts)[:-1])
    return (*pieces, nans, np.append(counts, nans.shape[0]))


def _sort_bucket(pieces: list, descending: bool, socket) -> np.ndarray:
    """One output chunk: the pieces every input chunk sent to this bucket, sorted by the
    daemon."""
    values = np.concatenate(pieces)
    if values.shape[0] < 2:
        return values
    keys, _ = _daemon_keys(values)
    ordered = _daemon(socket, "sort", keys, descending=descending, inplace=True)
    return ordered if ordered.dtype == values.dtype else ordered.astype(values.dtype)


def sort(x, descending: bool = False, socket=None, npartitions: int | None = None):
    """A 1-D dask array of ``x``'s elements sorted: ``np.sort`` of them (NaNs last), or with
    ``descending=True`` largest first and NaNs still last (as ``Client.sort``). Dtypes: the
    daemon's, also bool, 1- and 2-byte integers and float16 (widened exactly on the workers);
    others are a TypeError. ``npartitions``: the number of buckets (default: ``x``'s number of
    chunks); ``socket`` as for ``sort_values``.

    A sample sort: regularly spaced samples of every chunk give the splitters (weighted
    quantiles, chosen here), every chunk is split into one piece per bucket by np.searchsorted
    on the workers, bucket j gathers piece j of every chunk and is sorted by the daemon on its
    worker, and the result's chunks are the buckets in order (then the NaNs). Heavy keys are
    spread over buckets (see _split); the NaNs are one chunk of their own, left unsorted as
    NaNs need no order.

    Eager up to the split, so that the result has known chunk sizes (those of the buckets,
    empty ones dropped): the call computes ``x``'s chunks once, held in the cluster's memory
    until they are split, the samples, and the split, whose pieces stay in the cluster's memory
    as long as the result (or a computation of it) needs them. Computing the result sorts the
    buckets."""
    import dask.array as da

    if x.ndim != 1:
        raise ValueError(f"gpusort.dask.sort sorts 1-D arrays; this one has shape {x.shape}")
    if _daemon_keys(np.empty(0, x.dtype)) is None or x.dtype.kind in "mM":
        raise TypeError(f"gpusort.dask.sort cannot sort dtype {x.dtype}: it sorts numbers of "
                        "at most 8 bytes and bool (not datetimes, whose NaT NumPy puts last)")
    if x.shape[0] == 0:
        return da.from_array(np.empty(0, x.dtype), chunks=1)
    blocks = dask.persist(*x.to_delayed().ravel())  # sampled, then split: computed once
    buckets = int(npartitions) if npartitions is not None else len(blocks)
    if buckets < 1:
        raise ValueError(f"npartitions must be at least 1, not {npartitions}")
    sizes = x.chunks[0]
    total_samples = _SAMPLES_PER_BUCKET * buckets
    if all(not math.isnan(s) for s in sizes):
        wanted = [math.ceil(total_samples * s / max(1, x.shape[0])) for s in sizes]
    else:  # chunks of unknown sizes: as many from each
        wanted = [math.ceil(total_samples / len(blocks))] * len(blocks)
    samples = dask.compute(*[delayed(_sample)(b, k) for b, k in zip(blocks, wanted)])
    splitters = _splitters(list(samples), buckets, x.dtype)
    buckets = splitters.shape[0] + 1
    split = delayed(_split, nout=buckets + 2)
    pieces = dask.persist(*[split(b, splitters) for b in blocks])
    counts = np.sum(dask.compute(*[p[buckets + 1] for p in pieces]), axis=0)
    order = range(buckets - 1, -1, -1) if descending else range(buckets)
    chunks = [da.from_delayed(delayed(_sort_bucket)([p[j] for p in pieces], descending, socket),
                              shape=(int(counts[j]),), dtype=x.dtype)
              for j in order if counts[j]]
    if counts[buckets]:
        chunks.append(da.from_delayed(delayed(np.concatenate)([p[buckets] for p in pieces]),
                                      shape=(int(counts[buckets]),), dtype=x.dtype))
    if not chunks:  # unknown chunk sizes that were all 0
        return da.from_array(np.empty(0, x.dtype), chunks=1)
    return da.concatenate(chunks)
