"""Reading the header of a .npy file (NumPy's format, numpy.lib.format) to sort its data in place.

A .npy file is ``b"\\x93NUMPY"``, a format version, a header (a Python dict literal with
``descr``, ``fortran_order`` and ``shape``, padded so that the data is aligned) and then the
array's bytes. gpusort sorts the data region by handing the daemon the file's descriptor with
the data's offset, so only the header is read here, never the data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

MAGIC = b"\x93NUMPY"


@dataclass(frozen=True)
class NpyHeader:
    """A .npy file's header: the array's dtype, shape and order, the format version, and where
    the data starts (``offset``: the header's whole length, magic included)."""

    dtype: np.dtype
    shape: tuple
    fortran_order: bool
    version: tuple
    offset: int

    @property
    def count(self) -> int:
        """Elements in the array."""
        n = 1
        for d in self.shape:
            n *= int(d)
        return n


def is_npy(path_or_file) -> bool:
    """True when the file starts with the .npy magic ``\\x93NUMPY``."""
    if isinstance(path_or_file, (str, bytes, os.PathLike)):
        with open(path_or_file, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    pos = path_or_file.tell()
    try:
        return path_or_file.read(len(MAGIC)) == MAGIC
    finally:
        path_or_file.seek(pos)


def read_header(f) -> NpyHeader:
    """Parses the header of the .npy file open as ``f`` (binary, positioned at its start) with
    numpy.lib.format; leaves ``f`` positioned at the data. Raises ValueError for a file that is
    not a valid .npy."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran_order, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran_order, dtype = fmt.read_array_header_2_0(f)
        else:
            # 3.0 (a UTF-8 header) has no public reader; numpy's own private one knows it.
            reader = getattr(fmt, "_read_array_header", None)
            if reader is None:
                raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
            shape, fortran_order, dtype = reader(f, version)
    except ValueError as e:
        raise ValueError(f"not a valid .npy file: {e}") from e
    return NpyHeader(dtype=np.dtype(dtype), shape=tuple(shape), fortran_order=bool(fortran_order),
                     version=tuple(version), offset=f.tell())


def read_header_path(path) -> NpyHeader:
    """read_header of the file at ``path``."""
    with open(path, "rb") as f:
        return read_header(f)
