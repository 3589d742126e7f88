"""gpusort.Client: sort NumPy arrays and files through gpusortd.

How the data travels (proto/README.md): arrays never go through the socket. The client asks the
daemon for a shared buffer (ALLOCATE: a memfd the daemon pinned once), maps it, and submits jobs
that name the buffer; or it passes the descriptor of a file (or of a memfd of its own) with the
SUBMIT frame. So:

- an array made by ``Client.empty`` (or ``Client.array``) lives in such a buffer and is sorted
  where it is, with no copy at all;
- any other array is copied into a buffer (in large pieces, by several threads), sorted there,
  and copied out;
- ``Client.sort_file`` passes the file's descriptor: the daemon reads and writes the file itself.

Why the copies are not overlapped with the sort: a SUBMIT needs the whole array in place before
the job starts (a sort's first output depends on its last input), and the daemon reports
nothing until the job's end is written, so neither direction of copying can run beside the
daemon's work. The copies are instead split over threads (NumPy releases the GIL while it
copies), and the buffer is kept between calls so that its pages are mapped only once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import mmap
import operator
import os
import random
import stat
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple, Union

import numpy as np

from . import _proto as pb
from . import _wire as w
from ._errors import ConnectionLost, Error, Unavailable
from ._progress import Bar, Progress
from .npy import MAGIC as NPY_MAGIC
from .npy import read_header

DEFAULT_SOCKET = "/run/gpusort/gpusort.sock"
PROTOCOL_VERSION = 1

ProgressArg = Union[None, bool, Callable[[Progress], object]]

# (kind, itemsize) -> the protocol's DType. Keys are 4- or 8-byte unsigned, signed or floats.
_DTYPES = {
    ("u", 4): pb.DTYPE_U32,
    ("i", 4): pb.DTYPE_I32,
    ("u", 8): pb.DTYPE_U64,
    ("i", 8): pb.DTYPE_I64,
    ("f", 4): pb.DTYPE_F32,
    ("f", 8): pb.DTYPE_F64,
}
_SUPPORTED = "uint32, int32, uint64, int64, float32 and float64 (either byte order)"
# NumPy's error for a bad axis: np.exceptions.AxisError since 1.25; np.AxisError, its old name,
# is gone from NumPy 2.
_AxisError = getattr(getattr(np, "exceptions", None), "AxisError", None) or np.AxisError


class ServerInfo(NamedTuple):
    """What the daemon said about itself in its HELLO_REPLY."""

    server_version: str
    pid: int
    devices: tuple
    max_body_bytes: int
    max_fds_per_frame: int
    max_buffer_bytes: int
    pinned_pool_bytes: int


class JobReport(NamedTuple):
    """What a finished job did (the daemon's JobReport; the numbers of ``gpusort sort --json``)."""

    elements: int
    bytes: int
    seconds: float
    rate: float
    engine: str
    devices: tuple
    chunks: int
    rounds: int
    compensated_chunks: int
    queue_seconds: float


# ---- helpers ------------------------------------------------------------------------------


def _dtype_hint(dt: np.dtype) -> str:
    """What to do instead, for a dtype gpusort does not sort; "" when there is nothing to say."""
    if dt.kind in "iu" and dt.itemsize < 4:
        wider = "np.int32" if dt.kind == "i" else "np.uint32"
        return f"; widen it with a.astype({wider}), which keeps every value and their order"
    if dt.kind == "f" and dt.itemsize < 4:
        return "; convert float16 with a.astype(np.float32), which is exact"
    if dt.kind == "f":
        return (f"; {dt} (long double) has no exact 4- or 8-byte form: a.astype(np.float64) "
                "sorts the values rounded to float64")
    if dt.kind == "b":
        return "; bool keys: a.view(np.uint8).astype(np.uint32)"
    if dt.kind in "Mm":
        return ("; a.view(np.int64) sorts the times, but NaT (the smallest int64) then comes "
                "first, where NumPy puts it last")
    return ""


def _key_dtype(dt: np.dtype, what: str = "keys") -> int:
    """The protocol DType of NumPy dtype ``dt``; TypeError for any dtype gpusort cannot sort."""
    if dt.fields is not None or dt.subdtype is not None or dt.hasobject:
        raise TypeError(f"gpusort cannot sort {what} of dtype {dt}: it sorts {_SUPPORTED}")
    code = _DTYPES.get((dt.kind, dt.itemsize))
    if code is None:
        raise TypeError(f"gpusort cannot sort {what} of dtype {dt}: it sorts {_SUPPORTED}"
                        + _dtype_hint(dt))
    return code


# NumPy's sort kinds by the first letter, as NumPy reads them, and whether each is stable.
# 'quicksort' and 'heapsort' promise no order of equal keys: the stable order is one of theirs.
_KINDS = {"q": False, "h": False, "m": True, "s": True}


def _stable(kind, stable: bool) -> bool:
    """Whether a sort with NumPy's ``kind`` (and our ``stable``) must keep equal keys in order;
    ValueError for a kind NumPy does not know, with NumPy's own message."""
    if kind is None:
        return bool(stable)
    letter = kind[:1].lower() if isinstance(kind, str) else None
    if letter not in _KINDS:
        raise ValueError(f"sort kind must be one of 'quick', 'heap', or 'stable' (got {kind!r})")
    return bool(stable) or _KINDS[letter]


def _as_keys(a, what: str = "keys", axis=-1) -> tuple[np.ndarray, int]:
    """``a`` as a 1-D array of a supported dtype (a subclass stays one), and its protocol DType.
    ``axis`` as NumPy's: -1 or 0 of a 1-D array, or None for every element flattened;
    sorting along the last axis of more dimensions is refused."""
    if not isinstance(a, np.ndarray):
        a = np.asarray(a)
    code = _key_dtype(a.dtype, what)
    if axis is None:
        a = a.ravel()
    elif a.ndim == 1 and operator.index(axis) not in (-1, 0):
        raise _AxisError(axis, 1)
    if a.ndim == 0:
        raise ValueError(f"gpusort sorts 1-D arrays; the {what} are a 0-d array (a scalar)")
    if a.ndim != 1:
        raise ValueError(f"gpusort sorts 1-D arrays; the {what} have shape {a.shape} (np.sort "
                         "sorts each row; axis=None or a.ravel() sorts all elements together)")
    return a, code


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _remove_stale_temporaries(folder: str, name: str) -> None:
    """Removes the temporaries of output ``name`` in ``folder`` (".NAME.gpusort-PID-N.tmp",
    ours and the CLI's) that a writer killed before it could (kill -9, the OOM killer) left
    behind; issue 43: full-size hidden files that no later run removed. Only this user's
    regular files, only of processes that no longer exist, and only when nobody holds the
    lock every writer takes on its temporary (it lasts as long as a descriptor of the file:
    a process of another PID namespace, or a daemon still writing, keeps it). Each removal is
    a RuntimeWarning."""
    prefix = f".{name}.gpusort-"
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
            continue
        pid, _, rest = entry.name[len(prefix):-len(".tmp")].partition("-")
        if (not pid.isdigit() or not rest or any(c not in "0123456789abcdef" for c in rest)
                or int(pid) == 0 or _process_exists(int(pid))):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            now = os.stat(entry.path, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                continue
            os.unlink(entry.path)
        except OSError:  # locked (in use), or gone meanwhile: not ours to remove
            continue
        finally:
            os.close(fd)
        warnings.warn(f"gpusort: removed {entry.path} ({st.st_size} bytes), a temporary left by "
                      f"process {pid}, which no longer runs", RuntimeWarning, stacklevel=4)


def _plain(a: np.ndarray) -> np.ndarray:
    """``a`` as a base-class ndarray: a subclass's own operations (units, masks) stay out of
    the copies."""
    return a if type(a) is np.ndarray else a.view(np.ndarray)


def _like(a: np.ndarray, result: np.ndarray) -> np.ndarray:
    """``result`` (an ndarray of ``a``'s dtype and length) as np.sort returns a sort of ``a``: of
    ``a``'s subclass with its attributes (a Quantity's unit, ...), not a bare ndarray."""
    if type(a) is np.ndarray:
        return result
    out = result.view(type(a))
    finalize = getattr(out, "__array_finalize__", None)
    if callable(finalize):  # on ndarray itself, None in older NumPy
        finalize(a)
    return out


def _masked(a) -> bool:
    return isinstance(a, np.ma.MaskedArray)


def _refuse_masked(a, what: str, instead: str) -> None:
    """A masked array where its mask would be lost or cannot be followed: TypeError, never a
    silent sort of the values under the mask."""
    if _masked(a):
        raise TypeError(f"gpusort cannot take a masked array as {what}: its mask would be lost "
                        f"({instead})")


def _float_order(dt: np.dtype) -> int:
    # The package promises NumPy's answers, so floats always sort in NumPy's order: NaNs last
    # whatever their sign, -0.0 equal to +0.0 (integer keys ignore the field).
    return pb.FLOAT_ORDER_NUMPY if dt.kind == "f" else pb.FLOAT_ORDER_TOTAL


def _native(dt: np.dtype) -> np.dtype:
    return dt if dt.isnative else dt.newbyteorder("=")


def _align8(n: int) -> int:
    return (n + 7) & ~7


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 16))


def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src for 1-D arrays of one length (and dtypes equal up to byte order, which the
    copy converts): a few large np.copyto calls on several threads. NumPy releases the GIL
    while it copies, so the threads run in parallel; pieces of at least 16 MiB keep the
    per-call overhead negligible."""
    global _pool
    n = dst.shape[0]
    pieces = min(_threads(), max(1, dst.nbytes // (16 << 20)))
    if pieces <= 1:
        np.copyto(dst, src, casting="equiv" if dst.dtype != src.dtype else "no")
        return
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_threads(), thread_name_prefix="gpusort-copy")
    casting = "equiv" if dst.dtype != src.dtype else "no"
    bounds = [n * i // pieces for i in range(pieces + 1)]
    futures = [_pool.submit(np.copyto, dst[lo:hi], src[lo:hi], casting=casting)
               for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
    for f in futures:
        f.result()


def _in_pieces(n: int, nbytes: int, work: Callable[[int, int], object]) -> None:
    """work(lo, hi) for pieces [lo, hi) of range(n), on the copy threads as _copy splits its
    copies (``nbytes``: what the whole of it moves); NumPy releases the GIL in them."""
    global _pool
    pieces = min(_threads(), max(1, nbytes // (16 << 20)))
    if pieces <= 1 or n < 2:
        work(0, n)
        return
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_threads(), thread_name_prefix="gpusort-copy")
    bounds = [n * i // pieces for i in range(pieces + 1)]
    futures = [_pool.submit(work, lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
    for f in futures:
        f.result()


# ---- rows: records and lexsort keys -------------------------------------------------------
#
# A records job (JOB_KIND_SORT_RECORDS, JOB_KIND_ARGSORT_RECORDS) compares fixed-width records
# by KeyFields, the first key first, each ascending or descending: the six key types, 128-bit
# integers and byte strings compared as unsigned bytes (memcmp). Two ways in:
# - direct: a structured array whose every field is such a key where it lies (native numbers of
#   the six types, 'S' strings, uint8, bools, big-endian unsigned integers as bytes) is sent as
#   it is, its records sorted or argsorted by the daemon with no client-side work;
# - packed: anything else (np.lexsort's columns, fields that need converting) is packed into
#   records of the client's own layout in shared memory, each key converted to a type the
#   daemon compares in the same order, and argsorted; a sort then takes the records by it.

# The six key types' ColumnType numbers are their DType numbers (gpusort.proto).
_COLUMN_TYPES = dict(_DTYPES)
assert _COLUMN_TYPES[("f", 8)] == pb.COLUMN_TYPE_F64
_MAX_KEY_FIELDS = 64           # proto: key_fields, 1 to 64 of them
_MAX_RECORD_BYTES = 1 << 20    # proto: record_bytes, 1 to 1 MiB
_ROW_TYPES = ("bool, int8 to int64, uint8 to uint64, float16 to float64 (either byte order) "
              "and byte strings ('S')")


class _Part(NamedTuple):
    """One key of packed records: its dtype in the record (native), its ColumnType, and
    ``fill(dst, src)``, which writes the keys of source elements ``src`` into ``dst`` (pieces of
    the column and of the source, of one length)."""

    store: np.dtype
    ctype: int
    fill: Callable[[np.ndarray, np.ndarray], object]


def _cast(dst: np.ndarray, src: np.ndarray) -> None:
    # Every conversion used is exact: widening integers, float16 to float32, byte swaps.
    np.copyto(dst, src, casting="safe")


def _raw_byte(dst: np.ndarray, src: np.ndarray) -> None:
    np.copyto(dst, src.view(np.uint8))


def _truth(dst: np.ndarray, src: np.ndarray) -> None:
    np.not_equal(src.view(np.uint8), 0, out=dst)


def _not_nan(dst: np.ndarray, src: np.ndarray) -> None:
    np.isnan(src, out=dst)
    np.logical_not(dst, out=dst)


@functools.lru_cache(maxsize=None)
def _float_ranks(context: str, dt: np.dtype) -> tuple[bool, bool]:
    """(NaN first, -0.0 before +0.0) in NumPy's comparison of floats of ``dt`` in ``context``:
    "lexsort" (np.lexsort's keys) or "fields" (np.sort(order=...)'s fields), asked of the NumPy
    that runs, once. They differ: NumPy 1.24's structured sorts compare float16 fields with a
    function that ranks NaN lowest, while its float32/float64 fields and every lexsort key put
    NaN last."""
    if context == "lexsort":
        nan_first = np.lexsort((np.array([1.0, np.nan], dt),))[0] == 1
        neg_first = np.lexsort((np.array([0.0, -0.0], dt),))[0] == 1
    else:
        probe = np.zeros(2, [("f", dt), ("i", np.uint8)])
        probe["i"] = [0, 1]  # breaks a tie by position
        probe["f"] = [1.0, np.nan]
        nan_first = np.argsort(probe, kind="stable")[0] == 1
        probe["f"] = [0.0, -0.0]
        neg_first = np.argsort(probe, kind="stable")[0] == 1
    return bool(nan_first), bool(neg_first)


@functools.lru_cache(maxsize=None)
def _bools_by_byte(context: str) -> bool:
    """Whether NumPy orders bools in ``context`` by their byte (a bool made by a view of 2
    after one of 1: np.lexsort does) rather than as truth values (every nonzero byte equal:
    np.sort(order=...)'s fields). Asked of the NumPy that runs, once."""
    if context == "lexsort":
        return bool(np.lexsort((np.array([2, 1], np.uint8).view(np.bool_),))[0] == 1)
    probe = np.zeros(2, [("b", np.bool_), ("i", np.uint8)])
    probe["i"] = [0, 1]
    probe.view(np.uint8)[0::2] = [2, 1]
    return bool(np.argsort(probe, kind="stable")[0] == 1)


def _row_parts(dt: np.dtype, context: str, what: str) -> list[_Part]:
    """The packed keys that order elements of ``dt`` exactly as NumPy does in ``context``
    ("lexsort" or "fields"): none for a type of 0 bytes (all equal), two for floats that NumPy
    ranks NaN first (a byte 0 for NaN, 1 for a number, then the value). TypeError naming
    ``what`` for a type that has no such keys."""
    kind, size = dt.kind, dt.itemsize
    if dt.fields is not None or dt.subdtype is not None or dt.hasobject:
        shape = ("nested fields" if dt.fields is not None else
                 "a subarray (NumPy 1.24 compares its raw bytes, not its numbers)"
                 if dt.subdtype is not None else "Python objects")
        raise TypeError(f"gpusort cannot sort by {what} of dtype {dt}: {shape}; it sorts by "
                        f"{_ROW_TYPES}")
    if kind == "S":
        if size == 0:
            return []
        return [_Part(dt, pb.COLUMN_TYPE_BYTES, _cast)]
    if kind == "b":
        if _bools_by_byte(context):
            return [_Part(np.dtype(np.uint8), pb.COLUMN_TYPE_BYTES, _raw_byte)]
        return [_Part(np.dtype(np.bool_), pb.COLUMN_TYPE_BYTES, _truth)]
    if kind == "u" and size == 1:
        return [_Part(np.dtype(np.uint8), pb.COLUMN_TYPE_BYTES, _cast)]
    if kind in "iu" and size <= 8:
        store = np.dtype(f"{kind}{max(size, 4)}")
        return [_Part(store, _COLUMN_TYPES[(kind, store.itemsize)], _cast)]
    if kind == "f" and size <= 8:
        store = np.dtype(f"f{max(size, 4)}")
        nan_first, neg_first = _float_ranks(context, _native(dt))
        if neg_first:  # pragma: no cover - no NumPy we know does this
            raise TypeError(f"gpusort cannot sort by {what} of dtype {dt}: this NumPy orders "
                            "-0.0 before +0.0 there, gpusort ties them")
        value = _Part(store, _COLUMN_TYPES[("f", store.itemsize)], _cast)
        return [_Part(np.dtype(np.bool_), pb.COLUMN_TYPE_BYTES, _not_nan), value] if nan_first \
            else [value]
    hint = ""
    if kind == "U":
        hint = ("; NumPy compares its UCS-4 code points: k.astype('>U{0}').view('S{1}') are "
                "bytes in that order").format(size // 4, size)
    elif kind in "Mm":
        hint = "; NumPy puts NaT last, where its int64 view is the smallest"
    elif kind == "c":
        hint = "; NumPy orders complex numbers by real then imaginary part: sort by both"
    elif kind == "f":
        hint = f"; {dt} has no exact 4- or 8-byte form"
    raise TypeError(f"gpusort cannot sort by {what} of dtype {dt}: it sorts by {_ROW_TYPES}"
                    + hint)


def _direct_key(a: np.ndarray, name: str, fdt: np.dtype, offset: int):
    """(ColumnType, length) of a field that the daemon compares where it lies in the record
    exactly as NumPy's structured sort does, () for a field of 0 bytes (never compared), None
    for a field that must be converted (packed). Reads the field's bytes only for bools when
    NumPy compares them as truth values (bytes other than 0 and 1 must then be packed)."""
    kind, size = fdt.kind, fdt.itemsize
    if size == 0:
        return ()
    if fdt.isnative and (kind, size) in _COLUMN_TYPES:
        if kind == "f" and any(_float_ranks("fields", fdt)):
            return None
        return _COLUMN_TYPES[(kind, size)], 0
    if kind == "S" or (kind == "u" and size == 1):
        return pb.COLUMN_TYPE_BYTES, size
    if kind == "u" and fdt.str[0] == ">":  # big-endian unsigned: memcmp is numeric order
        return pb.COLUMN_TYPE_BYTES, size
    if kind == "b":
        if _bools_by_byte("fields") or not bool(np.any(a[name].view(np.uint8) > 1)):
            return pb.COLUMN_TYPE_BYTES, 1
    return None


def _merged(fields: list) -> list:
    """KeyFields with each run of BYTES keys that follow one another in the record and in key
    order, in one order, made one key (memcmp of the whole is memcmp of the parts in turn)."""
    out: list = []
    for f in fields:
        last = out[-1] if out else None
        if (last is not None and f.type == pb.COLUMN_TYPE_BYTES == last.type
                and f.order == last.order and f.offset == last.offset + last.length):
            last.length += f.length
        else:
            g = pb.KeyField()
            g.CopyFrom(f)
            out.append(g)
    return out


def _pack_layout(parts: list[_Part], descending: bool) -> tuple[np.dtype, list]:
    """The record of packed keys ``parts`` (primary first): its structured dtype (field "k<i>"
    holds part i) and its KeyFields. 8-byte numbers first, then 4-byte ones, then the bytes
    (each group in key order, so that adjacent bytes keys merge), the record padded to its
    numbers' alignment."""
    def group(p: _Part) -> int:
        return 2 if p.ctype == pb.COLUMN_TYPE_BYTES else (0 if p.store.itemsize == 8 else 1)

    offsets = [0] * len(parts)
    at = 0
    for i in sorted(range(len(parts)), key=lambda i: (group(parts[i]), i)):
        offsets[i] = at
        at += parts[i].store.itemsize
    align = max([p.store.itemsize for p in parts if p.ctype != pb.COLUMN_TYPE_BYTES] + [1])
    size = max(1, (at + align - 1) // align * align)
    dtype = np.dtype({"names": [f"k{i}" for i in range(len(parts))],
                      "formats": [p.store for p in parts], "offsets": offsets,
                      "itemsize": size})
    direction = pb.ORDER_DESCENDING if descending else pb.ORDER_ASCENDING
    fields = [pb.KeyField(type=p.ctype, offset=offsets[i], order=direction,
                          length=p.store.itemsize if p.ctype == pb.COLUMN_TYPE_BYTES else 0)
              for i, p in enumerate(parts)]
    return dtype, _merged(fields)


def _records_float_order(fields) -> int:
    floats = (pb.COLUMN_TYPE_F32, pb.COLUMN_TYPE_F64)
    return (pb.FLOAT_ORDER_NUMPY if any(f.type in floats for f in fields)
            else pb.FLOAT_ORDER_TOTAL)


def _structured(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.names is not None


def _sort_names(dt: np.dtype, order) -> list[str]:
    """The fields in the order NumPy's structured sort compares them: those of ``order`` (a
    name or a list of names) first, then every other field in the dtype's order (they break
    ties). NumPy's errors for unknown, repeated and unreadable names (numpy.core._internal.
    _newnames)."""
    names = list(dt.names)
    if order is None:
        return names
    if isinstance(order, str):
        order = [order]
    if not isinstance(order, (list, tuple)):
        raise ValueError(f"unsupported order value: {order}")
    seen: set = set()
    for name in order:
        try:
            names.remove(name)
        except ValueError:
            if name in seen:
                raise ValueError(f"duplicate field name: {name}") from None
            raise ValueError(f"unknown field name: {name}") from None
        seen.add(name)
    return list(order) + names


class _RecordPlan(NamedTuple):
    """How a structured array sorts: ``fields`` the KeyFields of its own records (None when
    some field must be converted first), ``parts`` the packed keys of every field (primary
    first) with the names of the fields they come from."""

    fields: list | None
    parts: list[tuple[str, _Part]]


def _record_plan(a: np.ndarray, order, descending: bool) -> _RecordPlan:
    """The plan of a sort of structured 1-D array ``a`` by ``order`` (NumPy's meaning), each
    key descending when ``descending``. TypeError for a field gpusort cannot compare as NumPy
    does (every field takes part: NumPy breaks ties by the fields not in ``order``), ValueError
    for names NumPy refuses."""
    dt = a.dtype
    names = _sort_names(dt, order)
    direction = pb.ORDER_DESCENDING if descending else pb.ORDER_ASCENDING
    parts: list[tuple[str, _Part]] = []
    fields: list | None = [] if 0 < dt.itemsize <= _MAX_RECORD_BYTES else None
    for name in names:
        fdt, offset = dt.fields[name][:2]
        tie = "" if order is None or name in ([order] if isinstance(order, str) else order) \
            else " (NumPy breaks ties by every field not in order=)"
        parts += [(name, p) for p in _row_parts(fdt, "fields", f"field {name!r}{tie}")]
        if fields is not None:
            key = _direct_key(a, name, fdt, offset)
            if key is None:
                fields = None
            elif key:
                fields.append(pb.KeyField(type=key[0], offset=offset, length=key[1],
                                          order=direction))
    if fields is not None:
        fields = _merged(fields)
        if len(fields) > _MAX_KEY_FIELDS:
            fields = None
    return _RecordPlan(fields, parts)


def _as_records(a: np.ndarray, axis) -> np.ndarray:
    """Structured array ``a`` as a 1-D array (``axis`` as in _as_keys)."""
    if axis is None:
        a = a.ravel()
    elif a.ndim == 1 and operator.index(axis) not in (-1, 0):
        raise _AxisError(axis, 1)
    if a.ndim != 1:
        raise ValueError(f"gpusort sorts 1-D arrays; the records have shape {a.shape} (np.sort "
                         "sorts each row; axis=None or a.ravel() sorts all of them together)")
    return a


def _lexsort_keys(keys, axis) -> list[np.ndarray]:
    """np.lexsort's ``keys`` as a list of 1-D arrays of one length (the last the primary key),
    with NumPy's errors; a 1-D array (which np.lexsort reads as that many keys of one element
    each) is refused."""
    if isinstance(keys, np.ndarray):
        if keys.ndim == 0:
            raise TypeError("need sequence of keys with len > 0 in lexsort")
        if keys.ndim == 1:
            raise ValueError(f"keys is a 1-D array: np.lexsort reads it as {keys.shape[0]} keys "
                             "of one element each; pass (a,) to sort by the array a, or a 2-D "
                             "array whose rows are the keys")
    _refuse_masked(keys, "lexsort keys", "sort by k.filled(value) and the mask as a key")
    cols = list(keys)
    if not cols:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    out = []
    for i, k in enumerate(cols):
        _refuse_masked(k, f"lexsort key {i}", "sort by k.filled(value) and the mask as a key")
        k = _plain(np.asanyarray(k))
        if k.ndim != 1:
            raise ValueError(f"gpusort's lexsort takes 1-D keys; key {i} has shape {k.shape}")
        out.append(k)
    if any(k.shape != out[0].shape for k in out):
        raise ValueError("all keys need to be the same shape (got lengths "
                         f"{', '.join(str(k.shape[0]) for k in out)})")
    if operator.index(axis) not in (-1, 0):
        raise _AxisError(axis, 1)
    return out


def _index_dtype(index_dtype, n: int, out) -> np.dtype:
    """The checked dtype of indices of ``n`` elements (and ``out``, when given, of it)."""
    ix = np.dtype(index_dtype)
    if ix not in (np.dtype(np.int64), np.dtype(np.uint32)):
        raise TypeError(f"index_dtype must be np.int64 or np.uint32, not {ix}")
    if ix == np.dtype(np.uint32) and n >= 2**32:
        raise ValueError(f"{n} keys need 64-bit indices (index_dtype=np.int64)")
    if out is not None and (not isinstance(out, np.ndarray) or out.dtype != ix
                            or out.shape != (n,)):
        raise ValueError(f"out must be a 1-D array of {n} {ix}")
    return ix


# Linux's MAP_POPULATE (Python 3.10+ names it; 0x8000 on every Linux architecture we run on).
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0x8000)


def _address(mm: mmap.mmap) -> int:
    view = np.frombuffer(mm, dtype=np.uint8, count=1)
    try:
        return view.__array_interface__["data"][0]
    finally:
        del view


def _data_address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


# ---- shared memory ------------------------------------------------------------------------


class _Conn:
    """The connection and what outlives the Client object: shared arrays keep it (through their
    finalizers) so that the daemon does not take their buffers back while they live. A buffer
    whose arrays are all gone is released at the next request (a finalizer may run anywhere,
    even in the middle of reading a frame, so it only notes the id), or by closing the
    connection."""

    def __init__(self, wire: w.Wire):
        self.wire = wire
        self.lock = threading.RLock()
        self.next_id = 1
        self.version = 1
        self.live: dict[int, tuple[int, int]] = {}  # buffer id -> (address, size)
        self.to_release: list[int] = []
        self.closing = False

    def request_id(self) -> int:
        rid = self.next_id
        self.next_id += 1
        return rid

    def buffer_gone(self, buffer_id: int) -> None:
        """A shared buffer's mapping was collected (finalizer: no I/O here)."""
        self.live.pop(buffer_id, None)
        if self.closing:
            if not self.live:
                self.wire.close()  # the last array is gone: now the connection may end
        else:
            self.to_release.append(buffer_id)

    def flush_releases(self) -> None:
        """Sends RELEASE for buffers whose arrays are gone; their replies are stray frames."""
        while self.to_release and not self.wire.closed:
            bid = self.to_release.pop()
            body = pb.ReleaseRequest(buffer_id=bid).SerializeToString()
            try:
                self.wire.send(w.RELEASE, self.request_id(), body, version=self.version)
            except (Error, w._SendFailed):
                return


class _Region:
    """A piece of shared memory the daemon can reach: a buffer of the daemon (``buffer_id``) or
    a memfd of ours passed with the SUBMIT (``fd``), mapped here as ``mm``."""

    def __init__(self, mm: mmap.mmap, size: int, buffer_id: int | None = None,
                 fd: int | None = None):
        self.mm = mm
        self.size = size
        self.buffer_id = buffer_id
        self.fd = fd

    def view(self, dtype: np.dtype, count: int, offset: int = 0) -> np.ndarray:
        return np.frombuffer(self.mm, dtype=dtype, count=count, offset=offset)

    def ref(self, offset: int, fds: list[int]):
        """A DataRef to ``offset`` in this region, adding our memfd to ``fds`` when needed."""
        if self.buffer_id is not None:
            return pb.DataRef(buffer_id=self.buffer_id, offset=offset)
        if self.fd not in fds:
            fds.append(self.fd)
        return pb.DataRef(attached_fd=fds.index(self.fd), offset=offset)

    def close(self) -> None:
        """Drops our reference; a daemon buffer is released once the mapping is collected."""
        if self.fd is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # a view is still alive: the mapping goes with it
            os.close(self.fd)
            self.fd = None
        self.mm = None


# ---- the client ---------------------------------------------------------------------------


class Client:
    """A connection to gpusortd.

    ``socket``: the daemon's Unix socket; default ``$GPUSORT_SOCKET``, else
    ``/run/gpusort/gpusort.sock``. ``client_name`` goes to the daemon's log. ``timeout``:
    seconds to wait for the daemon's answer to a request (None: for ever); a running job is
    waited for without a limit, but a daemon that stops or dies ends the wait at once with
    ConnectionLost. ``keep_buffer``: keep the shared buffer that copied arrays travel through
    between calls (fast repeated sorts; it counts against the daemon's pinned_pool_bytes until
    ``trim()`` or ``close()``).

    Use it as a context manager, or call ``close()``. One thread at a time: calls from several
    threads are serialised. Not usable across ``fork()``.

    Raises Unavailable when no daemon answers at the socket, Error when the daemon refuses the
    connection (UNAUTHORIZED, REJECTED_BUSY) or speaks no common protocol version.
    """

    def __init__(self, socket: str | os.PathLike | None = None, client_name: str | None = None,
                 timeout: float | None = 120.0, keep_buffer: bool = True):
        if socket is None:
            socket = os.environ.get("GPUSORT_SOCKET") or DEFAULT_SOCKET
        self.socket_path = os.fspath(socket)
        if client_name is None:
            from . import __version__
            client_name = f"gpusort-python {__version__} (pid {os.getpid()})"
        self.keep_buffer = keep_buffer
        self.last_report: JobReport | None = None
        self._stage: _Region | None = None
        try:
            wire = w.Wire(self.socket_path, timeout)
        except FileNotFoundError:
            raise Unavailable("UNAVAILABLE", f"no gpusortd socket at {self.socket_path} (start "
                              "the daemon, or pass socket= / set GPUSORT_SOCKET)") from None
        except ConnectionRefusedError:
            raise Unavailable("UNAVAILABLE", f"nothing listens at {self.socket_path} (gpusortd "
                              "is not running)") from None
        except PermissionError:
            raise Unavailable("UNAVAILABLE", f"no permission to connect to {self.socket_path} "
                              "(join the daemon's group, e.g. gpusort)") from None
        except OSError as e:
            raise Unavailable("UNAVAILABLE", f"cannot connect to {self.socket_path}: {e}") from None
        self._conn = _Conn(wire)
        try:
            self._hello(client_name)
        except BaseException:
            wire.close()
            raise

    # -- connection ------------------------------------------------------------------------

    def _hello(self, client_name: str) -> None:
        req = pb.HelloRequest(min_version=PROTOCOL_VERSION, max_version=PROTOCOL_VERSION,
                              client_name=client_name)
        _, reply = self._request(w.HELLO, req, w.HELLO_REPLY, pb.HelloReply)
        self._conn.version = reply.version
        s = reply.server
        self.server = ServerInfo(s.server_version, s.pid, tuple(s.devices), s.max_body_bytes,
                                 s.max_fds_per_frame, s.max_buffer_bytes, s.pinned_pool_bytes)

    @property
    def closed(self) -> bool:
        return self._conn.closing or self._conn.wire.closed

    def close(self) -> None:
        """Ends the session. Buffers are given back, except those of shared arrays still alive:
        the connection stays open (doing nothing) until the last of them is collected, so that
        the daemon never hands their memory to anyone else while they can be read."""
        conn = self._conn
        with conn.lock:
            if conn.closing:
                return
            self._drop_stage()
            conn.closing = True
            conn.to_release.clear()
            if not conn.live:
                conn.wire.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def trim(self) -> None:
        """Gives back the buffer kept for copied arrays (see ``keep_buffer``)."""
        with self._conn.lock:
            self._drop_stage()
            self._conn.flush_releases()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<gpusort.Client {self.socket_path} {state}>"

    # -- frames ----------------------------------------------------------------------------

    def _send(self, type_: int, rid: int, msg, fds=()) -> None:
        conn = self._conn
        version = 1 if type_ == w.HELLO else conn.version
        try:
            conn.wire.send(type_, rid, msg.SerializeToString(), fds, version)
        except w._SendFailed as e:
            # The daemon closed the connection; an ERROR it sent first says why.
            try:
                fr = conn.wire.recv(timeout=1.0)
                if fr.type == w.ERROR:
                    self._raise_error_frame(fr)
            except Error as inner:
                if inner.status not in ("CONNECTION_LOST", "TIMEOUT"):
                    raise
            conn.wire.close()
            raise ConnectionLost("CONNECTION_LOST", f"gpusortd at {self.socket_path} closed "
                                 f"the connection ({e.cause})") from None

    def _raise_error_frame(self, fr: w.Frame):
        msg = pb.ErrorReply()
        msg.ParseFromString(fr.body)
        if fr.request_id == 0:  # the daemon ends the connection (refused peer, bad stream)
            self._conn.wire.close()
        raise Error(pb.status_name(msg.status.code), msg.status.message)

    def _stray(self, fr: w.Frame) -> None:
        """A frame that answers nothing we wait for: replies to RELEASEs sent in passing, events
        of a job given up on. An ERROR with request id 0 ends the connection."""
        fr.close_fds()
        if fr.type == w.ERROR and fr.request_id == 0:
            self._raise_error_frame(fr)

    def _parse(self, fr: w.Frame, cls):
        msg = cls()
        try:
            msg.ParseFromString(fr.body)
        except Exception as e:
            self._conn.wire.close()
            raise Error("PROTOCOL_ERROR", f"gpusortd sent a {cls.__name__} that does not parse "
                        f"({e}); connection closed") from None
        return msg

    def _request(self, type_: int, msg, reply_type: int, reply_cls, fds=()):
        """Sends a request and returns (frame, reply) once its reply came; raises Error when
        the reply's status is not OK (the frame's descriptors are then closed)."""
        conn = self._conn
        with conn.lock:
            if conn.closing:
                raise ConnectionLost("CONNECTION_LOST", "the client is closed")
            if type_ != w.HELLO:
                conn.flush_releases()
            rid = conn.request_id()
            self._send(type_, rid, msg, fds)
            while True:
                fr = conn.wire.recv()
                if fr.request_id != rid:
                    self._stray(fr)
                    continue
                if fr.type == w.ERROR:
                    fr.close_fds()
                    self._raise_error_frame(fr)
                if fr.type != reply_type:
                    fr.close_fds()
                    conn.wire.close()
                    raise Error("PROTOCOL_ERROR", f"gpusortd answered request type {type_:#06x} "
                                f"with type {fr.type:#06x}; connection closed")
                reply = self._parse(fr, reply_cls)
                if reply.status.code != pb.OK:
                    fr.close_fds()
                    raise Error(pb.status_name(reply.status.code), reply.status.message)
                return fr, reply

    def _run(self, req, fds=(), progress: ProgressArg = None, description: str = "gpusort"):
        """Submits a job and waits for its end, feeding PROGRESS events to ``progress``.
        Returns the JobReport; raises Error with the job's status when it failed. When the wait
        is interrupted (Ctrl-C, an exception from the progress callable), the job is cancelled
        and its end awaited, so that no job still writes into memory we hand back."""
        conn = self._conn
        bar = Bar(description) if progress is True else None
        callback = bar if bar is not None else (progress if callable(progress) else None)
        with conn.lock:
            if conn.closing:
                raise ConnectionLost("CONNECTION_LOST", "the client is closed")
            conn.flush_releases()
            rid = conn.request_id()
            job_id = None
            finished = False
            try:
                self._send(w.SUBMIT, rid, req, fds)
                while True:
                    # The reply comes at once; the job's end may take as long as the sort.
                    fr = conn.wire.recv(timeout=-1.0 if job_id is None else None)
                    if fr.request_id != rid:
                        self._stray(fr)
                        continue
                    fr.close_fds()
                    if fr.type == w.ERROR:
                        finished = True
                        self._raise_error_frame(fr)
                    elif fr.type == w.SUBMIT_REPLY:
                        reply = self._parse(fr, pb.SubmitReply)
                        if reply.status.code != pb.OK:
                            finished = True
                            raise Error(pb.status_name(reply.status.code), reply.status.message)
                        job_id = reply.job_id
                    elif fr.type == w.PROGRESS:
                        ev = self._parse(fr, pb.ProgressEvent)
                        if callback is not None:
                            callback(Progress(ev.bytes_done, ev.bytes_total, ev.round,
                                              ev.rounds, ev.rate))
                    elif fr.type == w.JOB_FINISHED:
                        finished = True
                        ev = self._parse(fr, pb.JobFinishedEvent)
                        if ev.status.code != pb.OK:
                            raise Error(pb.status_name(ev.status.code), ev.status.message)
                        r = ev.report
                        self.last_report = JobReport(r.elements, r.bytes, r.seconds, r.rate,
                                                     r.engine, tuple(r.devices), r.chunks,
                                                     r.rounds, r.compensated_chunks,
                                                     r.queue_seconds)
                        return self.last_report
                    else:
                        conn.wire.close()
                        raise Error("PROTOCOL_ERROR", f"unexpected frame type {fr.type:#06x} "
                                    "for a job; connection closed")
            except BaseException:
                if job_id is not None and not finished and not conn.wire.closed:
                    self._cancel_and_drain(rid, job_id)
                raise
            finally:
                if bar is not None:
                    bar.close()

    def _cancel_and_drain(self, rid: int, job_id: int) -> None:
        conn = self._conn
        try:
            self._send(w.CANCEL, conn.request_id(), pb.CancelRequest(job_id=job_id))
            while True:
                fr = conn.wire.recv(timeout=60.0)
                fr.close_fds()
                if fr.request_id == rid and fr.type in (w.JOB_FINISHED, w.ERROR):
                    return
        except BaseException:
            # Could not see the job end: closing the connection cancels it for sure.
            conn.wire.close()

    # -- shared memory ---------------------------------------------------------------------

    def _allocate(self, nbytes: int) -> tuple[int, int, mmap.mmap]:
        fr, reply = self._request(w.ALLOCATE, pb.AllocateRequest(bytes=nbytes), w.ALLOCATE_REPLY,
                                  pb.AllocateReply)
        if len(fr.fds) != 1:
            fr.close_fds()
            self._conn.wire.close()
            raise Error("PROTOCOL_ERROR", f"ALLOCATE_REPLY came with {len(fr.fds)} descriptors, "
                        "not 1; connection closed")
        fd = fr.fds[0]
        try:
            # The daemon made and pinned every page; MAP_POPULATE maps them all in one call.
            # Faulting them in one by one as NumPy first writes the buffer ran at about 2.8 GB/s
            # (H100 host, 8 GiB: filling a fresh empty() took 2.7-3.1 s).
            mm = mmap.mmap(fd, reply.size, mmap.MAP_SHARED | _MAP_POPULATE,
                           mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)  # the mapping keeps the memfd alive
        conn = self._conn
        conn.live[reply.buffer_id] = (_address(mm), reply.size)
        f = weakref.finalize(mm, _Conn.buffer_gone, conn, reply.buffer_id)
        f.atexit = False
        return reply.buffer_id, reply.size, mm

    def empty(self, n: int, dtype=np.float64) -> np.ndarray:
        """A new 1-D array of ``n`` elements of ``dtype`` in a shared buffer of the daemon.

        Sorting it (``sort``, ``sort_pairs`` with both arrays shared, ``argsort`` keys) copies
        nothing: the daemon sorts the buffer itself, and ``sort`` of such an array is always in
        place (it returns the same array). It is an ordinary ndarray otherwise; slices and
        views of it are zero copy too when contiguous. Its buffer goes back to the daemon once
        the array and every view of it are garbage collected (or when the client closes and
        they are gone). The contents start as zeros. Raises Error TOO_LARGE over the daemon's
        ``max_buffer_bytes``, REJECTED_BUSY when its pool is full for now.
        """
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise TypeError("a shared array cannot hold Python objects")
        n = int(n)
        if n < 0:
            raise ValueError(f"negative size {n}")
        if n == 0 or dt.itemsize == 0:
            return np.empty(n, dt)
        with self._conn.lock:
            _, _, mm = self._allocate(n * dt.itemsize)
        return np.frombuffer(mm, dtype=dt, count=n)

    def array(self, a, dtype=None) -> np.ndarray:
        """A shared array (``empty``) holding a copy of ``a``: ``client.array(a)`` then
        ``client.sort(x)`` sorts without any further copy."""
        _refuse_masked(a, "a shared array's contents", "pass a.filled(value) or a.compressed()")
        a = np.asarray(a, dtype=dtype)
        if a.ndim != 1:
            raise ValueError(f"shared arrays are 1-D; got shape {a.shape}")
        x = self.empty(a.shape[0], _native(a.dtype))
        if a.shape[0]:
            _copy(x, a)
        return x

    def is_shared(self, a: np.ndarray) -> bool:
        """True when ``a`` lies in a shared buffer of this client and sorts with no copy."""
        return self._shared_ref(a) is not None

    def _shared_ref(self, a: np.ndarray):
        """(buffer id, byte offset) when ``a`` is contiguous, native, writeable and lies in a
        live buffer of this connection at an offset the daemon accepts; else None."""
        conn = self._conn
        if (not isinstance(a, np.ndarray) or not conn.live or a.size == 0
                or not a.flags.c_contiguous or not a.flags.writeable or not a.dtype.isnative):
            return None
        start = _data_address(a)
        for bid, (base, size) in list(conn.live.items()):
            if base <= start and start + a.nbytes <= base + size:
                off = start - base
                return (bid, off) if off % a.dtype.itemsize == 0 else None
        return None

    def _staging(self, nbytes: int) -> _Region:
        """Memory for copied arrays: the kept buffer when it is large enough, else a new one;
        when the daemon's pool cannot give one (TOO_LARGE, REJECTED_BUSY), a memfd of our own
        that travels with the SUBMIT (the daemon takes shrink-sealed memfds)."""
        st = self._stage
        if st is not None and st.size >= nbytes:
            return st
        self._drop_stage()
        try:
            bid, size, mm = self._allocate(max(nbytes, 1))
            st = _Region(mm, size, buffer_id=bid)
            self._stage = st if self.keep_buffer else None
            return st
        except Error as e:
            if e.status not in ("TOO_LARGE", "REJECTED_BUSY"):
                raise
        return self._memfd(nbytes)

    @staticmethod
    def _memfd(nbytes: int) -> _Region:
        fd = os.memfd_create("gpusort-python", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, max(nbytes, 1))
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            mm = mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        return _Region(mm, max(nbytes, 1), fd=fd)

    @contextlib.contextmanager
    def _staged(self, nbytes: int):
        """_staging(nbytes) for the block's length (None for 0 bytes), given up after it when
        it is not the kept buffer, also when the block fails."""
        st = self._staging(nbytes) if nbytes else None
        try:
            yield st
        finally:
            if st is not None:
                self._done_with(st)

    def _done_with(self, st: _Region) -> None:
        if st is not self._stage:
            st.close()

    def _drop_stage(self) -> None:
        st, self._stage = self._stage, None
        if st is not None:
            st.close()

    # -- sorting ---------------------------------------------------------------------------

    def sort(self, a, descending: bool = False, inplace: bool = False, stable: bool = False,
             progress: ProgressArg = None, *, axis=-1, kind=None, order=None) -> np.ndarray:
        """The sorted copy of 1-D array ``a``, as ``np.sort(a)`` returns it.

        dtypes: uint32, int32, uint64, int64, float32, float64, in either byte order (a
        byte-swapped array is converted while it is copied in and back while it is copied out,
        so the result has ``a``'s dtype, as with np.sort). Floats sort as NumPy sorts them:
        NaNs last whatever their sign and payload, -0.0 equal to +0.0; with ``stable=True``
        equal keys keep their input order, and the result is byte for byte
        ``np.sort(a, kind="stable")``. ``descending``: largest first, NaNs still last.

        NumPy's ``axis`` and ``kind`` mean what they mean there: ``axis`` -1 or 0 of a 1-D
        array, or None to sort every element of any shape flattened; ``kind`` "stable" or
        "mergesort" is ``stable=True``, "quicksort" and "heapsort" leave equal keys in any
        order.

        A structured array (NumPy records, ``a.dtype.names`` not None) sorts as
        ``np.sort(a, order=order, kind="stable")``: by the fields named in ``order`` (a name or
        a list of names; None: every field in the dtype's order), then, to break ties, by every
        other field in the dtype's order, as NumPy does; records equal in every field keep
        their input order whatever ``kind`` and ``stable`` say. Fields may be bool, int8 to
        int64, uint8 to uint64, float16 to float64 in either byte order, and byte strings
        ('S', compared as unsigned bytes); a field of any other type (unicode, object,
        datetime, complex, nested or subarray fields) is a TypeError, also when it is not in
        ``order`` (NumPy compares it to break ties). Floats compare as NumPy's structured
        sort compares them (NaNs last, but NaNs first in float16 fields, as in NumPy 1.24:
        each float type's rank of NaN is asked of the running NumPy). When every field is a
        key the daemon compares where it lies (native uint32/int32/uint64/int64/float32/float64,
        'S', uint8, bool, big-endian unsigned integers) the records themselves are sorted by
        one JOB_KIND_SORT_RECORDS job, in place in a shared array (from ``empty``) or in a
        copy; otherwise (small or byte-swapped signed integers and floats) the keys are
        converted and packed into records of their own, argsorted, and the records taken by
        the indices. Whole records move, the bytes between fields too (NumPy's copy leaves
        those undefined). ``descending``, which NumPy does not have, reverses every field's
        order (NaNs still last, equal records still in input order).

        A subclass of ndarray comes back as its subclass with its attributes, as from np.sort.
        A masked array (np.ma) sorts as np.ma.sort: the unmasked values sorted, then the masked
        ones (in their input order), still masked; also when ``descending``.

        ``inplace=True`` sorts ``a`` itself and returns it (copied in and back). An array
        from ``empty``/``array`` is always sorted in place in its shared buffer with no copy,
        and returned. Any other input (non-contiguous, a list, ...) is copied. ``progress``: a
        callable taking a Progress, or True for a bar.
        """
        stable = _stable(kind, stable)
        if order is not None and not _structured(a):
            raise ValueError("order= names fields of a structured array; this array has none "
                             "(NumPy: cannot specify order when the array has no fields)")
        was_array = isinstance(a, np.ndarray)
        if inplace and not was_array:
            raise TypeError("inplace=True needs a NumPy array to sort")
        if inplace and axis is None:
            raise ValueError("inplace=True sorts a 1-D array along its axis, not axis=None")
        if _structured(a):
            return self._sort_records(a, descending, inplace, progress, axis, order)
        if _masked(a):
            return self._sort_masked(a, descending, inplace, stable, progress, axis)
        a, code = _as_keys(a, axis=axis)
        if inplace and not a.flags.writeable:
            raise ValueError("inplace=True needs a writeable array")
        plain = _plain(a)
        n = a.shape[0]
        req = pb.SubmitRequest(dtype=code, count=n, in_place=True, stable=stable,
                               float_order=_float_order(a.dtype),
                               order=pb.ORDER_DESCENDING if descending else pb.ORDER_ASCENDING)
        ref = self._shared_ref(plain)
        if ref is not None:
            req.keys.CopyFrom(pb.DataRef(buffer_id=ref[0], offset=ref[1]))
            self._run(req, progress=progress, description="gpusort sort")
            return a
        if n == 0:
            return a if inplace else a.copy()
        with self._conn.lock, self._staged(a.nbytes) as st:
            view = st.view(_native(a.dtype), n)
            _copy(view, plain)
            fds: list[int] = []
            req.keys.CopyFrom(st.ref(0, fds))
            self._run(req, fds, progress, "gpusort sort")
            out = plain if inplace else np.empty(n, a.dtype)
            _copy(out, view)
            del view
        return a if inplace else _like(a, out)

    def _sort_masked(self, a, descending, inplace, stable, progress, axis):
        """sort() of a masked array, as np.ma.sort (endwith=True): the unmasked values sorted by
        the daemon, then the masked ones in their input order; the result has the mask of
        that order. Not a sort of the data under the mask (issue 43: [3 1 2 --] came back
        [0 1 2 3])."""
        if axis is None:
            a = a.ravel()
        mask = np.ma.getmaskarray(a)
        data = _plain(np.ma.getdata(a))
        _as_keys(data, axis=axis)  # the dtype and shape checks of any array, before any copy
        if inplace and not data.flags.writeable:
            raise ValueError("inplace=True needs a writeable array")
        hidden = int(np.count_nonzero(mask))
        shown = self.sort(data[~mask] if hidden else data, descending, stable=stable,
                          progress=progress)
        result = a if inplace else a.copy()
        if inplace:
            result.unshare_mask()  # a mask shared with another array is not ours to reorder
        target = np.ma.getdata(result)
        target[:shown.shape[0]] = shown
        if hidden:
            target[shown.shape[0]:] = data[mask]
            hard = result.hardmask
            result.soften_mask()  # a hard mask could not be moved off the unmasked values
            result.mask = np.arange(mask.shape[0]) >= shown.shape[0]
            if hard:
                result.harden_mask()
        return result

    def argsort(self, a, descending: bool = False, index_dtype=np.int64,
                progress: ProgressArg = None, out: np.ndarray | None = None, *, axis=-1,
                kind=None, order=None) -> np.ndarray:
        """The indices that sort 1-D array ``a``, equal to ``np.argsort(a, kind="stable")``:
        stable by definition (equal keys by position), floats in NumPy's order (NaNs last).
        ``descending``: largest first, equal keys still by position, NaNs last.

        ``index_dtype``: np.int64 (default) or np.uint32 (only when len(a) < 2**32; half the
        memory). ``out``: an array from ``empty`` of that dtype and length to receive the
        indices with no copy. The keys are never modified.

        ``axis`` and ``kind`` as NumPy's (see ``sort``; every kind gets the stable order, one
        that each of them allows). A masked array's indices are those of np.ma.argsort: the
        unmasked values' in order, then the masked ones' in input order.

        A structured array's indices are ``np.argsort(a, order=order, kind="stable")``'s:
        ``order`` and the fields as in ``sort`` (the other fields break ties; equal records by
        position), from one JOB_KIND_ARGSORT_RECORDS job on the records themselves (no copy
        when ``a`` is shared), or on packed keys when some field must be converted."""
        _stable(kind, True)  # an unknown kind is an error, as in NumPy
        if order is not None and not _structured(a):
            raise ValueError("order= names fields of a structured array; this array has none "
                             "(NumPy: cannot specify order when the array has no fields)")
        if _structured(a):
            _refuse_masked(a, "a structured array", "argsort a.data")
            a = _as_records(a, axis)
            plan = _record_plan(a, order, descending)
            return self._argsort_records(_plain(a), plan, index_dtype, descending, progress, out)
        if _masked(a):
            return self._argsort_masked(a, descending, index_dtype, progress, out, axis)
        idx, _ = self._argsort(a, descending, index_dtype, progress, out, want_keys=False,
                               axis=axis)
        return idx

    def _argsort_masked(self, a, descending, index_dtype, progress, out, axis):
        """argsort() of a masked array, as np.ma.argsort (endwith=True)."""
        if axis is None:
            a = a.ravel()
        mask = np.ma.getmaskarray(a)
        data = _plain(np.ma.getdata(a))
        _as_keys(data, axis=axis)
        shown = np.flatnonzero(~mask)
        order = self._argsort(data[shown], descending, index_dtype, progress)[0]
        idx = np.concatenate([shown[order], np.flatnonzero(mask)]).astype(index_dtype,
                                                                          copy=False)
        if out is None:
            return idx
        if not isinstance(out, np.ndarray) or out.dtype != idx.dtype or out.shape != idx.shape:
            raise ValueError(f"out must be a 1-D array of {idx.shape[0]} {idx.dtype}")
        out[...] = idx
        return out

    def _argsort(self, a, descending, index_dtype=np.int64, progress=None, out=None,
                 want_keys=False, axis=-1):
        a, code = _as_keys(a, axis=axis)
        a = _plain(a)
        ix = np.dtype(index_dtype)
        if ix not in (np.dtype(np.int64), np.dtype(np.uint32)):
            raise TypeError(f"index_dtype must be np.int64 or np.uint32, not {ix}")
        n = a.shape[0]
        if ix == np.dtype(np.uint32) and n >= 2**32:
            raise ValueError(f"{n} keys need 64-bit indices (index_dtype=np.int64)")
        if out is not None and (not isinstance(out, np.ndarray) or out.dtype != ix
                                or out.shape != (n,)):
            raise ValueError(f"out must be a 1-D array of {n} {ix}")
        if n == 0:
            idx = out if out is not None else np.empty(0, ix)
            return idx, (a.copy() if want_keys else None)
        req = pb.SubmitRequest(dtype=code, count=n, kind=pb.JOB_KIND_ARGSORT,
                               index_bytes=ix.itemsize, float_order=_float_order(a.dtype),
                               order=pb.ORDER_DESCENDING if descending else pb.ORDER_ASCENDING)
        with self._conn.lock:
            key_ref = self._shared_ref(a)
            out_ref = self._shared_ref(out) if out is not None else None
            need = 0
            keys_at = idx_at = sorted_at = None
            if key_ref is None:
                keys_at, need = 0, _align8(a.nbytes)
            if out_ref is None:
                idx_at, need = need, _align8(need + n * ix.itemsize)
            if want_keys:
                sorted_at, need = need, need + a.nbytes
            with self._staged(need) as st:
                fds: list[int] = []
                native = _native(a.dtype)
                if key_ref is None:
                    _copy(st.view(native, n, keys_at), a)
                    req.keys.CopyFrom(st.ref(keys_at, fds))
                else:
                    req.keys.CopyFrom(pb.DataRef(buffer_id=key_ref[0], offset=key_ref[1]))
                if out_ref is None:
                    req.indices_out.CopyFrom(st.ref(idx_at, fds))
                else:
                    req.indices_out.CopyFrom(pb.DataRef(buffer_id=out_ref[0], offset=out_ref[1]))
                if want_keys:
                    req.keys_out.CopyFrom(st.ref(sorted_at, fds))
                self._run(req, fds, progress, "gpusort argsort")
                if out is not None and out_ref is not None:
                    idx = out
                else:
                    idx = out if out is not None else np.empty(n, ix)
                    _copy(idx, st.view(ix, n, idx_at))
                keys = None
                if want_keys:
                    keys = np.empty(n, a.dtype)
                    _copy(keys, st.view(native, n, sorted_at))
        return idx, keys

    def sort_pairs(self, keys, values, descending: bool = False, stable: bool = False,
                   progress: ProgressArg = None, *, kind=None) -> tuple[np.ndarray, np.ndarray]:
        """``(sorted keys, values reordered with them)``.

        ``values``: a 1-D array as long as ``keys`` of any dtype of 4 or 8 bytes (moved as
        raw bits, so any such dtype, byte order or structured type works). With
        ``stable=True`` (or NumPy's ``kind="stable"``) equal keys keep their input order and so
        do their values; otherwise the values of equal keys come in any order. When both
        arrays come from ``empty`` they are sorted in place with no copy, and returned.
        Masked arrays are refused (``argsort`` keeps masked keys last; take the values by it).
        """
        stable = _stable(kind, stable)
        instead = "idx = client.argsort(keys) puts masked keys last; then keys[idx], values[idx]"
        _refuse_masked(keys, "keys", instead)
        _refuse_masked(values, "values", instead)
        keys, code = _as_keys(keys)
        values = np.asanyarray(values)
        typed_keys, typed_values = keys, values
        keys, values = _plain(keys), _plain(values)
        n = keys.shape[0]
        if values.dtype.hasobject:
            raise TypeError("values of dtype object cannot be sorted (they are pointers)")
        if values.ndim != 1 or values.shape[0] != n:
            raise ValueError(f"values must be a 1-D array of {n} elements like the keys; "
                             f"got shape {values.shape}")
        vb = values.dtype.itemsize
        if vb not in (4, 8):
            raise TypeError(f"values must be 4 or 8 bytes each; {values.dtype} is {vb} (use "
                            "sort_by_key for other payloads)")
        req = pb.SubmitRequest(dtype=code, count=n, in_place=True, stable=stable,
                               value_bytes=vb, float_order=_float_order(keys.dtype),
                               order=pb.ORDER_DESCENDING if descending else pb.ORDER_ASCENDING)
        kref, vref = self._shared_ref(keys), self._shared_ref(values)
        if kref is not None and vref is not None:
            req.keys.CopyFrom(pb.DataRef(buffer_id=kref[0], offset=kref[1]))
            req.values.CopyFrom(pb.DataRef(buffer_id=vref[0], offset=vref[1]))
            self._run(req, progress=progress, description="gpusort sort")
            return typed_keys, typed_values
        if n == 0:
            return typed_keys.copy(), typed_values.copy()
        vat = _align8(keys.nbytes)
        with self._conn.lock, self._staged(vat + values.nbytes) as st:
            kview = st.view(_native(keys.dtype), n)
            vview = st.view(values.dtype, n, vat)  # the values' own dtype: bits unchanged
            _copy(kview, keys)
            _copy(vview, values)
            fds: list[int] = []
            req.keys.CopyFrom(st.ref(0, fds))
            req.values.CopyFrom(st.ref(vat, fds))
            self._run(req, fds, progress, "gpusort sort")
            k, v = np.empty(n, keys.dtype), np.empty(n, values.dtype)
            _copy(k, kview)
            _copy(v, vview)
            del kview, vview
        return _like(typed_keys, k), _like(typed_values, v)

    def sort_by_key(self, keys, *columns, descending: bool = False,
                    progress: ProgressArg = None) -> tuple:
        """``(sorted keys, *columns in the keys' order)``, from ONE argsort job: each column
        (any dtype and item size, any number of dimensions, first axis as long as the keys) is
        permuted with ``np.take(column, indices, axis=0)``. Stable, like ``argsort``."""
        masked = _masked(keys)
        n = _as_keys(np.ma.getdata(keys) if masked else keys)[0].shape[0]
        # asanyarray: a masked column keeps its mask through np.take.
        cols = [np.asanyarray(c) for c in columns]
        for i, c in enumerate(cols):
            if c.ndim == 0 or c.shape[0] != n:
                raise ValueError(f"column {i} has shape {c.shape}; its first axis must have the "
                                 f"keys' length {n}")
        if masked:  # masked keys last, as argsort puts them, still masked
            idx = self.argsort(keys, descending, progress=progress)
            return (keys[idx], *[np.take(c, idx, axis=0) for c in cols])
        keys, _ = _as_keys(keys)
        idx, sorted_keys = self._argsort(keys, descending, np.int64, progress, want_keys=True)
        return (_like(keys, sorted_keys), *[np.take(c, idx, axis=0) for c in cols])

    # -- rows ------------------------------------------------------------------------------

    def lexsort(self, keys, axis=-1, index_dtype=np.int64,
                progress: ProgressArg = None) -> np.ndarray:
        """The indices that sort rows by several keys, equal to ``np.lexsort(keys)``: the LAST
        key is the primary one, the one before it breaks its ties, and so on; rows equal in
        every key stay in input order (a stable sort, by definition).

        ``keys``: a sequence of 1-D arrays of one length (lists too), or a 2-D array whose
        rows are the keys. Each key may be bool, int8 to int64, uint8 to uint64, float16 to
        float64 in either byte order, or byte strings ('S', compared as unsigned bytes as NumPy
        does); small integers and float16 are widened, which keeps their order exactly, and
        floats compare in NumPy's order (NaNs after every number and equal among themselves,
        -0.0 equal to +0.0). Any other dtype is a TypeError that names it; a 1-D array as
        ``keys`` (which np.lexsort reads as that many one-element keys) is a ValueError.
        At most 64 keys.

        ``axis``: -1 or 0 (the keys are 1-D). ``index_dtype``: np.int64 (default) or np.uint32
        (fewer than 2**32 rows). The keys are packed side by side into records in a shared
        buffer, the daemon argsorts the records (one JOB_KIND_ARGSORT_RECORDS job), and the
        indices are copied out; the keys are never modified. Masked keys are refused.
        """
        cols = _lexsort_keys(keys, axis)
        n = cols[0].shape[0]
        ix = _index_dtype(index_dtype, n, None)
        sources, parts = [], []
        for i in reversed(range(len(cols))):  # the primary key (the last) first
            for p in _row_parts(cols[i].dtype, "lexsort", f"key {i}"):
                sources.append(cols[i])
                parts.append(p)
        return self._argsort_packed(sources, parts, n, ix, False, progress, None,
                                    "gpusort lexsort")

    def _sort_records(self, a: np.ndarray, descending: bool, inplace: bool,
                      progress: ProgressArg, axis, order) -> np.ndarray:
        """sort() of a structured array (see ``sort``)."""
        _refuse_masked(a, "a structured array", "sort a.data and reorder the mask with "
                       "argsort(a.data, order=...)")
        a = _as_records(a, axis)
        if inplace and not a.flags.writeable:
            raise ValueError("inplace=True needs a writeable array")
        plan = _record_plan(a, order, descending)
        plain = _plain(a)
        n, size = a.shape[0], a.dtype.itemsize
        raw = np.dtype((np.void, size)) if size else None
        if plan.fields is None or not plan.fields:
            # Keys to convert (or none at all): argsort packed keys, then take the records.
            idx = self._argsort_records(plain, plan, np.int64, descending, progress, None)
            if raw is None:
                return a if inplace else a.copy()
            moved = plain.view(raw).take(idx)  # whole records, the bytes between fields too
            if inplace:
                plain.view(raw)[...] = moved
                return a
            return _like(a, moved.view(a.dtype))
        req = pb.SubmitRequest(kind=pb.JOB_KIND_SORT_RECORDS, count=n, record_bytes=size,
                               in_place=True, key_fields=plan.fields,
                               float_order=_records_float_order(plan.fields))
        ref = self._shared_ref(plain)
        if ref is not None:
            req.keys.CopyFrom(pb.DataRef(buffer_id=ref[0], offset=ref[1]))
            self._run(req, progress=progress, description="gpusort sort")
            return a
        if n == 0:
            return a if inplace else a.copy()
        with self._conn.lock, self._staged(n * size) as st:
            view = st.view(raw, n)
            _copy(view, plain.view(raw))
            fds: list[int] = []
            req.keys.CopyFrom(st.ref(0, fds))
            self._run(req, fds, progress, "gpusort sort")
            out = plain if inplace else np.empty(n, a.dtype)
            _copy(out.view(raw), view)
            del view
        return a if inplace else _like(a, out)

    def _argsort_records(self, a: np.ndarray, plan: _RecordPlan, index_dtype, descending: bool,
                         progress: ProgressArg, out) -> np.ndarray:
        """The stable argsort of structured 1-D array ``a`` (a plain ndarray) by ``plan``: of
        its own records (JOB_KIND_ARGSORT_RECORDS on ``a``, shared or copied), or of packed
        keys when some field must be converted first."""
        n = a.shape[0]
        ix = _index_dtype(index_dtype, n, out)
        if plan.fields is None or not plan.fields:
            names = [name for name, _ in plan.parts]
            return self._argsort_packed([a[name] for name in names],
                                        [p for _, p in plan.parts], n, ix, descending, progress,
                                        out, "gpusort argsort")
        size = a.dtype.itemsize
        req = pb.SubmitRequest(kind=pb.JOB_KIND_ARGSORT_RECORDS, count=n, record_bytes=size,
                               index_bytes=ix.itemsize, key_fields=plan.fields,
                               float_order=_records_float_order(plan.fields))
        raw = np.dtype((np.void, size))

        def fill(st: _Region, at: int) -> None:
            view = st.view(raw, n, at)
            _copy(view, a.view(raw))
            del view

        return self._run_argsort_records(req, n, size, ix, self._shared_ref(a), fill, out,
                                         progress, "gpusort argsort")

    def _argsort_packed(self, sources: list, parts: list[_Part], n: int, ix: np.dtype,
                        descending: bool, progress: ProgressArg, out,
                        description: str) -> np.ndarray:
        """The stable argsort of ``n`` rows by packed keys ``parts`` (primary first), part i
        made from 1-D array ``sources[i]``: the keys written side by side into records in a
        shared buffer, argsorted by the daemon."""
        if not parts:  # no key has a byte to compare (dtype S0, ...): all rows equal
            idx = out if out is not None else np.empty(n, ix)
            idx[...] = np.arange(n, dtype=ix)
            return idx
        dtype, fields = _pack_layout(parts, descending)
        if len(fields) > _MAX_KEY_FIELDS:
            raise ValueError(f"{len(fields)} keys, more than the {_MAX_KEY_FIELDS} a records job "
                             "of gpusortd compares")
        if dtype.itemsize > _MAX_RECORD_BYTES:
            raise ValueError(f"the keys take {dtype.itemsize} bytes a row, more than the "
                             f"{_MAX_RECORD_BYTES} of a record of gpusortd")
        req = pb.SubmitRequest(kind=pb.JOB_KIND_ARGSORT_RECORDS, count=n,
                               record_bytes=dtype.itemsize, index_bytes=ix.itemsize,
                               key_fields=fields, float_order=_records_float_order(fields))

        def fill(st: _Region, at: int) -> None:
            records = st.view(dtype, n, at)
            columns = [records[f"k{i}"] for i in range(len(parts))]

            def piece(lo: int, hi: int) -> None:
                for col, src, p in zip(columns, sources, parts):
                    p.fill(col[lo:hi], src[lo:hi])

            try:
                _in_pieces(n, n * dtype.itemsize, piece)
            finally:
                del columns, records

        return self._run_argsort_records(req, n, dtype.itemsize, ix, None, fill, out, progress,
                                         description)

    def _run_argsort_records(self, req, n: int, record_bytes: int, ix: np.dtype, key_ref, fill,
                             out, progress: ProgressArg, description: str) -> np.ndarray:
        """Runs JOB_KIND_ARGSORT_RECORDS ``req`` (all set but its DataRefs) on ``n`` records:
        those at ``key_ref`` (a shared array's (buffer id, offset)), or, when it is None, the
        ones ``fill(region, offset)`` writes into a staging buffer. The indices go to ``out``
        when it is shared, else through the staging buffer into ``out`` or a new array."""
        if n == 0:
            return out if out is not None else np.empty(0, ix)
        with self._conn.lock:
            out_ref = self._shared_ref(out) if out is not None else None
            need = 0
            keys_at = idx_at = None
            if key_ref is None:
                keys_at, need = 0, _align8(n * record_bytes)
            if out_ref is None:
                idx_at, need = need, need + n * ix.itemsize
            with self._staged(need) as st:
                fds: list[int] = []
                if key_ref is None:
                    fill(st, keys_at)
                    req.keys.CopyFrom(st.ref(keys_at, fds))
                else:
                    req.keys.CopyFrom(pb.DataRef(buffer_id=key_ref[0], offset=key_ref[1]))
                if out_ref is None:
                    req.indices_out.CopyFrom(st.ref(idx_at, fds))
                else:
                    req.indices_out.CopyFrom(pb.DataRef(buffer_id=out_ref[0], offset=out_ref[1]))
                self._run(req, fds, progress, description)
                if out_ref is not None:
                    return out
                idx = out if out is not None else np.empty(n, ix)
                _copy(idx, st.view(ix, n, idx_at))
                return idx

    # -- files -----------------------------------------------------------------------------

    def sort_file(self, path, dtype=None, out=None, descending: bool = False,
                  stable: bool = False, progress: ProgressArg = None, *,
                  kind=None) -> JobReport | None:
        """Sorts the array in file ``path``: a .npy file (recognised by its magic
        ``\\x93NUMPY``; the header is kept and gives the dtype) or a raw file of ``dtype``
        elements in the machine's byte order (``dtype`` required).

        ``out=None`` sorts the file in place: the daemon reads and writes it through its
        descriptor, with nothing copied here. A job that fails leaves the same elements in
        the file, possibly in another order (the header untouched). ``out=PATH`` writes a new
        file (for a .npy the same header, then the sorted data) through a temporary in PATH's
        folder that is renamed over PATH only on success; ``path`` is only read.

        Only 1-D .npy arrays of the supported dtypes; a ``dtype`` that disagrees with the
        header is a ValueError. A big-endian .npy (or ``dtype`` with '>' for a raw file) is
        copied through a shared buffer and converted both ways, as the daemon sorts native
        numbers only. ``kind`` as NumPy's (see ``sort``). Returns the JobReport (None for an
        empty array).

        A temporary of the output (``out``, or ``path`` itself) that a killed writer (this client
        or the CLI) left behind is removed first, with a RuntimeWarning: only this user's, only
        of a process that no longer exists.
        """
        stable = _stable(kind, stable)
        path = os.fspath(path)
        with open(path, "rb") as f:
            is_npy = f.read(len(NPY_MAGIC)) == NPY_MAGIC
            f.seek(0)
            header = read_header(f) if is_npy else None
            head_bytes = b""
            if header is not None:
                f.seek(0)
                head_bytes = f.read(header.offset)
            size = os.fstat(f.fileno()).st_size
        if header is not None:
            fdt = header.dtype
            if dtype is not None and np.dtype(dtype) != fdt:
                raise ValueError(f"{path} is a .npy of dtype {fdt}, not {np.dtype(dtype)}")
            if len(header.shape) != 1:
                raise ValueError(f"{path} holds an array of shape {header.shape}; gpusort sorts "
                                 "1-D arrays only")
            offset, n = header.offset, header.count
        else:
            if dtype is None:
                raise ValueError(f"{path} is a raw file (no .npy header): pass dtype=")
            fdt = np.dtype(dtype)
            offset = 0
            if size % fdt.itemsize:
                raise ValueError(f"{path} has {size} bytes, not a whole number of {fdt} "
                                 f"elements of {fdt.itemsize} bytes")
            n = size // fdt.itemsize
        code = _key_dtype(fdt, f"the elements of {path}")
        if offset + n * fdt.itemsize > size:
            raise ValueError(f"{path} is truncated: its header promises {n} elements "
                             f"({n * fdt.itemsize} bytes) after {offset} header bytes, but it "
                             f"has {size} bytes")
        in_place = out is None or (os.path.exists(out) and os.path.samefile(out, path))
        if in_place:  # sorted where it is, but a killed CLI's temporary of it is just as stale
            _remove_stale_temporaries(os.path.dirname(os.path.abspath(path)),
                                      os.path.basename(path))
        if n == 0:
            if not in_place:
                self._write_new(out, head_bytes, offset, lambda fd: None)
            return None
        req = pb.SubmitRequest(dtype=code, count=n, stable=stable,
                               float_order=_float_order(fdt),
                               order=pb.ORDER_DESCENDING if descending else pb.ORDER_ASCENDING)
        if not fdt.isnative:
            return self._sort_file_swapped(path, out, in_place, head_bytes, fdt, offset, n, req,
                                           progress)
        if offset % fdt.itemsize:
            raise ValueError(f"the .npy header of {path} is {offset} bytes, not a multiple of "
                             f"the element size {fdt.itemsize}: the daemon reads arrays only at "
                             "such offsets (numpy.save writes 64-byte aligned headers; rewrite "
                             "the file with it)")
        if in_place:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            try:
                req.in_place = True
                req.keys.CopyFrom(pb.DataRef(attached_fd=0, offset=offset))
                return self._run(req, [fd], progress, "gpusort sort")
            finally:
                os.close(fd)
        fin = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            def job(fout: int):
                req.keys.CopyFrom(pb.DataRef(attached_fd=0, offset=offset))
                req.keys_out.CopyFrom(pb.DataRef(attached_fd=1, offset=offset))
                return self._run(req, [fin, fout], progress, "gpusort sort")
            return self._write_new(out, head_bytes, offset + n * fdt.itemsize, job)
        finally:
            os.close(fin)

    @staticmethod
    def _write_new(out, head_bytes: bytes, total: int, fill):
        """Creates ``out`` atomically: a temporary beside it gets the header and its full size,
        ``fill(fd)`` writes the rest, then it is made durable and renamed over ``out``."""
        out = os.fspath(out)
        folder = os.path.dirname(os.path.abspath(out))
        name = os.path.basename(out)
        _remove_stale_temporaries(folder, name)
        for _ in range(16):
            temp = os.path.join(folder, f".{name}.gpusort-{os.getpid()}-"
                                f"{random.getrandbits(32):08x}.tmp")
            try:
                fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
                break
            except FileExistsError:
                continue
            except OSError as e:
                # The user's path, not our temporary's (issue 43: a missing folder was reported
                # as ".x.npy.gpusort-5833-b030eab1.tmp"), as open(out, "wb") would say it.
                raise type(e)(e.errno, e.strerror, out) from None
        else:  # pragma: no cover
            raise OSError(f"cannot create a temporary file beside {out}")
        # Held for as long as this process or the daemon it hands the descriptor to may write
        # the file: a later run removes it only when no one holds it.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            if os.path.exists(out):
                os.fchmod(fd, os.stat(out).st_mode & 0o7777)
            if head_bytes:
                os.pwrite(fd, head_bytes, 0)
            os.ftruncate(fd, max(total, len(head_bytes)))
            result = fill(fd)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(temp, out)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        return result

    def _sort_file_swapped(self, path, out, in_place, head_bytes, fdt, offset, n, req, progress):
        """A file of byte-swapped numbers: mapped here, converted into a shared buffer, sorted,
        and converted back into the file (or the new file)."""
        def through_buffer(dst_fd: int, src_fd: int):
            size = offset + n * fdt.itemsize
            write = mmap.PROT_WRITE if src_fd == dst_fd else 0
            smm = mmap.mmap(src_fd, size, mmap.MAP_SHARED, mmap.PROT_READ | write)
            dmm = None
            try:
                with self._conn.lock, self._staged(n * fdt.itemsize) as st:
                    _copy(st.view(_native(fdt), n),
                          np.frombuffer(smm, dtype=fdt, count=n, offset=offset))
                    fds: list[int] = []
                    req.in_place = True
                    req.keys.CopyFrom(st.ref(0, fds))
                    report = self._run(req, fds, progress, "gpusort sort")
                    if dst_fd != src_fd:
                        dmm = mmap.mmap(dst_fd, size, mmap.MAP_SHARED,
                                        mmap.PROT_READ | mmap.PROT_WRITE)
                    target = smm if dmm is None else dmm
                    _copy(np.frombuffer(target, dtype=fdt, count=n, offset=offset),
                          st.view(_native(fdt), n))
                    target.flush()
                return report
            finally:
                for m in (smm, dmm):
                    if m is not None:
                        try:
                            m.close()
                        except BufferError:  # a view still referenced by a traceback
                            pass

        if in_place:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            try:
                return through_buffer(fd, fd)
            finally:
                os.close(fd)
        fin = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return self._write_new(out, head_bytes, offset + n * fdt.itemsize,
                                   lambda fout: through_buffer(fout, fin))
        finally:
            os.close(fin)
