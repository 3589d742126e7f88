"""The `gpusort` CLI on structured .npy files (issue 42), against NumPy itself: `gpusort sort
x.npy --order ... --out y.npy --local` must be np.sort(a, order=..., kind="stable") and
--argsort-out np.argsort(a, order=..., kind="stable"), byte for byte, header included.

The binary is $GPUSORT_CLI, else the one built beside $GPUSORTD (ctest passes the daemon), else
the release build (build/release/client/gpusort); the tests skip when there is none.
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent.parent
N = 20_000


def cli_binary() -> str | None:
    path = os.environ.get("GPUSORT_CLI")
    if path:
        return path
    daemon = os.environ.get("GPUSORTD")
    candidates = [Path(daemon).parent.parent / "client" / "gpusort"] if daemon else []
    candidates.append(REPO / "build" / "release" / "client" / "gpusort")
    return next((str(c) for c in candidates if c.exists()), None)


@pytest.fixture(scope="module")
def cli():
    binary = cli_binary()
    if binary is None:
        pytest.skip("no gpusort CLI: set GPUSORT_CLI to the binary")
    return binary


@pytest.fixture
def run(cli, tmp_path):
    """Runs `gpusort ARGS --local` with the CPU engine; returns the completed process."""
    config = tmp_path / "cpu.yaml"
    config.write_text("devices: cpu\n")

    def go(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([cli, *args, "--local", "--config", str(config), "--quiet"],
                           capture_output=True, text=True, timeout=120)
        if check:
            assert p.returncode == 0, p.stderr
        return p
    return go


def npy_bytes(a: np.ndarray) -> bytes:
    """The file np.save writes for ``a``."""
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def records(rng) -> np.ndarray:
    """Fields of every type records sort by, each from a few values, so that they tie within a
    field and across all of them; floats with NaNs of both signs and -0.0 beside +0.0, which
    NumPy ties (a stable sort keeps their order, which the bytes show)."""
    dt = np.dtype([("k", "<u8"), ("f", "<f8"), ("s", "S5"), ("i", "<i4"), ("g", "<f4"),
                   ("b", "?"), ("c", "u1")])
    a = np.zeros(N, dt)
    a["k"] = rng.choice(np.array([0, 1, 2**63, 2**64 - 1], np.uint64), N)
    a["f"] = rng.choice([np.nan, -np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf, -2.0], N)
    a["s"] = rng.choice([b"", b"a", b"a\x00b", b"ab", b"\xff", b"zzzzz", b"\x80a"], N)
    a["i"] = rng.integers(-2, 2, N)
    a["g"] = rng.choice(np.array([np.nan, -np.nan, -0.0, 0.0, 0.5, -1e30], np.float32), N)
    a["b"] = rng.random(N) < 0.5
    a["c"] = rng.integers(0, 3, N)
    return a


ORDERS = [None, ["f"], ["s", "k"], ["g", "f"], "i", ["c", "b", "s"]]


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: ",".join(o) if o else "all")
def test_sort_is_numpys_stable_sort(cli, run, tmp_path, order):
    a = records(np.random.default_rng(5))
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, a)
    original = x.read_bytes()
    by = ["--order", order if isinstance(order, str) else ",".join(order)] if order else []
    run("sort", str(x), *by, "--out", str(y))
    assert y.read_bytes() == npy_bytes(np.sort(a, order=order, kind="stable"))
    assert x.read_bytes() == original
    # gpusort verify reads the same header and agrees.
    p = subprocess.run([cli, "verify", str(y), "--original", str(x), *by],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: ",".join(o) if o else "all")
def test_argsort_is_numpys_stable_argsort(run, tmp_path, order):
    a = records(np.random.default_rng(6))
    x, i = tmp_path / "x.npy", tmp_path / "i.npy"
    np.save(x, a)
    by = ["--order", order if isinstance(order, str) else ",".join(order)] if order else []
    run("sort", str(x), *by, "--argsort-out", str(i))
    want = np.argsort(a, order=order, kind="stable")
    assert want.dtype == np.int64
    assert i.read_bytes() == npy_bytes(want)
    # With --out too, the records by that permutation.
    y = tmp_path / "y.npy"
    run("sort", str(x), *by, "--argsort-out", str(i), "--index-type", "u32", "--out", str(y))
    assert i.read_bytes() == npy_bytes(want.astype(np.uint32))
    assert y.read_bytes() == npy_bytes(a[want])


def test_in_place_keeps_the_header(run, tmp_path):
    a = records(np.random.default_rng(7))
    x = tmp_path / "x.npy"
    np.save(x, a)
    run("sort", str(x))
    assert x.read_bytes() == npy_bytes(np.sort(a, kind="stable"))


def test_a_field_no_key_takes_is_refused(run, tmp_path):
    # NumPy compares 'U' fields by code point; records have no such key: exit 65 (data), the
    # file as it was.
    a = np.zeros(3, [("a", "<u4"), ("b", "U2")])
    x = tmp_path / "x.npy"
    np.save(x, a)
    original = x.read_bytes()
    p = run("sort", str(x), check=False)
    assert p.returncode == 65, p.stderr
    assert "field 'b' (<U2)" in p.stderr
    assert x.read_bytes() == original
