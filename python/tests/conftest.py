"""Fixtures: a real gpusortd on a temporary socket, with the CPU engine.

The daemon binary is $GPUSORTD (ctest passes the one it built); without it the tests look for
the release build (build/release/service/gpusortd) and skip when there is none. Each daemon is
configured like the C++ daemon tests (tests/service/daemon_test_support.hpp): ``devices: cpu``, a
socket in a temporary folder, a pinned pool of its own; the "tiny" one has a 1 MiB device budget
so that its jobs take the two-round out-of-core path with many chunks.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package from this checkout, whatever PYTHONPATH says

import gpusort  # noqa: E402

REPO = HERE.parent.parent


def daemon_binary() -> str | None:
    path = os.environ.get("GPUSORTD")
    if path:
        return path
    candidate = REPO / "build" / "release" / "service" / "gpusortd"
    return str(candidate) if candidate.exists() else None


class Daemon:
    """A gpusortd process on a socket in its own temporary folder."""

    def __init__(self, extra: str = ""):
        binary = daemon_binary()
        if binary is None:
            pytest.skip("no gpusortd: set GPUSORTD to the daemon's binary")
        # Short folder names: a socket path has at most 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="gpusort-py-"))
        self.socket = str(self.dir / "gpusortd.sock")
        config = self.dir / "gpusortd.yaml"
        lines = {"devices": "cpu", "socket": self.socket, "pinned_pool_bytes": "1GiB",
                 "log_level": "info"}
        for line in extra.strip().splitlines():
            key, _, value = line.partition(":")
            lines[key.strip()] = value.strip()
        config.write_text("".join(f"{k}: {v}\n" for k, v in lines.items()))
        self.log_path = self.dir / "gpusortd.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--config", str(config)], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:  # until it listens: a plain connect (a refused peer still connects)
            if self.proc.poll() is not None:
                raise RuntimeError(f"gpusortd exited with {self.proc.returncode}:\n{self.log()}")
            if os.path.exists(self.socket):
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    probe.connect(self.socket)
                    break
                except OSError:
                    pass
                finally:
                    probe.close()
            if time.monotonic() > deadline:
                log = self.log()
                self.stop()
                raise RuntimeError(f"gpusortd did not listen within 30 s:\n{log}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, **kw) -> gpusort.Client:
        return gpusort.Client(self.socket, **kw)


@pytest.fixture(scope="session")
def daemon():
    """The daemon most tests share: default budget (in-core CPU sort), a 3 GiB pool."""
    d = Daemon("pinned_pool_bytes: 3GiB")
    yield d
    d.stop()


@pytest.fixture(scope="session")
def tiny_daemon():
    """A daemon whose 1 MiB device budget sends every job but the smallest out of core, in
    two rounds of many chunks: equal keys then straddle chunk boundaries."""
    d = Daemon("device_memory_budget: 1MiB")
    yield d
    d.stop()


@pytest.fixture(params=["default", "tiny"])
def any_daemon(request):
    """Each daemon in turn: the in-core path and the out-of-core path."""
    return request.getfixturevalue("daemon" if request.param == "default" else "tiny_daemon")


@pytest.fixture
def client(daemon):
    with daemon.client() as c:
        yield c


@pytest.fixture
def any_client(any_daemon):
    with any_daemon.client() as c:
        yield c


@pytest.fixture
def rng():
    return np.random.default_rng(19)
