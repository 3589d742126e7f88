"""Test data and the NumPy references the client is held to."""

from __future__ import annotations

import numpy as np

DTYPES = [np.uint32, np.int32, np.uint64, np.int64, np.float32, np.float64]
DTYPE_IDS = [np.dtype(d).name for d in DTYPES]


def uint_of(dt) -> np.dtype:
    """The unsigned integer dtype of the same size and byte order (to compare bits)."""
    dt = np.dtype(dt)
    return np.dtype(f"u{dt.itemsize}").newbyteorder(dt.byteorder)


def nans(dt, n: int, rng) -> np.ndarray:
    """``n`` NaNs of both signs and many payloads (quiet and signalling)."""
    dt = np.dtype(dt)
    bits = dt.itemsize * 8
    mant = 23 if bits == 32 else 52
    u = np.dtype(f"u{dt.itemsize}")
    payload = rng.integers(1, 2**mant, n, dtype=np.uint64).astype(u)
    exp = u.type(((1 << (bits - 1 - mant)) - 1) << mant)
    sign = (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(bits - 1)).astype(u)
    return (sign | exp | payload).view(dt)


def keys(dtype, n: int, rng, distinct: int = 64) -> np.ndarray:
    """``n`` keys of ``dtype`` with many repeats (so that stability shows), the type's extremes,
    and for floats NaNs of both signs and many payloads, -0.0 and +0.0, -inf and +inf."""
    dt = np.dtype(dtype)
    if dt.kind in "ui":
        info = np.iinfo(dt)
        pool = np.concatenate([np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dt),
                               rng.integers(info.min, info.max, distinct, dtype=dt,
                                            endpoint=True)])
        return rng.choice(pool, n)
    finfo = np.finfo(dt)
    pool = np.concatenate([
        np.array([-np.inf, np.inf, -0.0, 0.0, finfo.max, -finfo.max, finfo.tiny, -finfo.tiny,
                  finfo.smallest_subnormal, -finfo.smallest_subnormal, 1.0, -1.0], dtype=dt),
        (rng.standard_normal(distinct) * 1e3).astype(dt),
    ])
    a = rng.choice(pool, n)
    k = max(1, n // 8) if n >= 8 else 0
    if k:
        where = rng.choice(n, k, replace=False)
        a[where] = nans(dt, k, rng)
    return a


def ref_argsort(a: np.ndarray, descending: bool = False) -> np.ndarray:
    """What the client's argsort must return.

    Ascending: ``np.argsort(a, kind="stable")`` itself. Descending (NumPy has no such order, so
    it is built here): numbers from largest to smallest, equal numbers in input order (so -0.0
    and +0.0 by position), then every NaN in input order (NaNs stay last, as in NumPy). The
    numbers' part is the stable ascending argsort of the reversed numbers, reversed again:
    reversing twice turns "equal keys in reversed input order" back into input order.
    """
    if not descending:
        return np.argsort(a, kind="stable")
    nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    num_idx = np.flatnonzero(~nan)
    vals = a[num_idx]
    back = np.argsort(vals[::-1], kind="stable")[::-1]
    order = len(vals) - 1 - back
    return np.concatenate([num_idx[order], np.flatnonzero(nan)]).astype(np.int64)


def ref_sort(a: np.ndarray, descending: bool = False) -> np.ndarray:
    """The stable sort the client's stable sort must equal byte for byte:
    ``np.sort(a, kind="stable")`` ascending, ``a[ref_argsort(a, True)]`` descending."""
    if not descending:
        return np.sort(a, kind="stable")
    return a[ref_argsort(a, True)]


def same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    """Byte-for-byte equality (NaN payloads and the sign of zero included)."""
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def same_values(x: np.ndarray, y: np.ndarray) -> bool:
    """np.array_equal with equal_nan: what a non-stable sort must match."""
    return x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)
