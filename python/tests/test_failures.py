"""Progress, errors, and a daemon that dies under a job."""

from __future__ import annotations

import os
import signal
import socket
import threading

import numpy as np
import pytest

import gpusort
from conftest import Daemon
from _data import keys
from _deadline import within

def test_progress_callback(tiny_daemon, rng):
    events: list[gpusort.Progress] = []
    with tiny_daemon.client() as c:
        a = keys(np.uint64, 1_000_000, rng)
        got = c.sort(a, progress=events.append)
    assert np.array_equal(got, np.sort(a))
    assert events, "the callback was called"
    assert all(isinstance(p, gpusort.Progress) for p in events)
    assert {p.rounds for p in events} == {2}
    assert {p.round for p in events} <= {1, 2} and 2 in {p.round for p in events}
    last = events[-1]
    assert last.round == 2 and last.bytes_done == last.bytes_total == a.nbytes
    assert last.fraction == 1.0
    fractions = [p.fraction for p in events]
    assert fractions == sorted(fractions), "the job's share done only grows"
    bytes_done, bytes_total, round_, rounds, _ = last  # also a plain tuple
    assert (bytes_done, round_, rounds) == (a.nbytes, 2, 2)


def test_progress_bar_without_tqdm(tiny_daemon, rng, capsys, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_tqdm(name, *args, **kw):
        if name == "tqdm":
            raise ImportError("no tqdm here")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    with tiny_daemon.client() as c:
        c.sort(keys(np.int64, 500_000, rng), progress=True)
    err = capsys.readouterr().err
    assert "gpusort sort:" in err and "100.0%" in err and err.endswith("\n")


def test_progress_callback_raising_cancels_the_job(tiny_daemon, rng):
    class Stop(Exception):
        pass

    def stop(p):
        raise Stop

    with tiny_daemon.client() as c:
        a = keys(np.uint64, 1_000_000, rng)
        with pytest.raises(Stop):
            c.sort(a, progress=stop)
        # The job was cancelled and its end awaited: the connection is still good.
        assert np.array_equal(c.sort(a[:1000]), np.sort(a[:1000]))


def test_daemon_killed_mid_job_raises(rng):
    d = Daemon("device_memory_budget: 1MiB")
    try:
        c = d.client()
        x = c.array(keys(np.uint64, 2_000_000, rng))
        killed = []

        def kill_on_first_event(p):
            if not killed:
                killed.append(p)
                os.kill(d.pid, signal.SIGKILL)

        err = within(30, c.sort, x, progress=kill_on_first_event)
        assert killed, "the job had started"
        assert isinstance(err, gpusort.ConnectionLost), err
        assert err.status == "CONNECTION_LOST"
        # Later calls fail at once too, and the shared array stays readable.
        assert isinstance(within(10, c.sort, np.arange(3)), gpusort.ConnectionLost)
        assert x.size == 2_000_000 and int(x[:10].sum()) >= 0
        c.close()
    finally:
        d.kill()
        d.stop()


def test_daemon_killed_while_waiting_for_a_large_job(rng):
    """The same without events: an in-core job on the default budget, killed by a timer."""
    d = Daemon()
    try:
        with d.client() as c:
            a = keys(np.float64, 4_000_000, rng)
            c.sort(a[:100])  # the connection and buffer are up
            timer = threading.Timer(0.05, os.kill, (d.pid, signal.SIGKILL))
            timer.start()
            err = within(30, c.sort, a)
            timer.join()
            assert isinstance(err, (gpusort.ConnectionLost, np.ndarray))
            if isinstance(err, np.ndarray):  # the sort beat the timer: the next call fails
                assert isinstance(within(10, c.sort, a), gpusort.ConnectionLost)
    finally:
        d.kill()
        d.stop()


def test_no_daemon(tmp_path):
    with pytest.raises(gpusort.Unavailable, match="no gpusortd socket"):
        gpusort.Client(str(tmp_path / "none.sock"))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(tmp_path / "dead.sock"))
    s.close()  # a socket file nobody listens on
    with pytest.raises(gpusort.Unavailable, match="nothing listens"):
        gpusort.Client(str(tmp_path / "dead.sock"))
    assert issubclass(gpusort.Unavailable, gpusort.Error)


def test_daemon_errors_are_exceptions_with_status(client):
    too_big = client.server.max_buffer_bytes + 1
    with pytest.raises(gpusort.Error) as e:
        client.empty(too_big, np.uint8)
    assert e.value.status == "TOO_LARGE" and e.value.message
    assert str(e.value).startswith("TOO_LARGE: ")
    assert np.array_equal(client.sort(np.array([2, 1])), [1, 2]), "the connection stays good"


def test_refused_peer(tmp_path):
    """A daemon that serves another uid only: the refusal is an Error, not a hang."""
    me = os.getuid()
    d = Daemon(f"allowed_uids: [{me + 12345}]")
    try:
        err = within(20, gpusort.Client, d.socket)
        assert isinstance(err, gpusort.Error) and err.status == "UNAUTHORIZED", err
    finally:
        d.stop()


def test_shared_array_survives_close(daemon):
    c = daemon.client()
    x = c.array(np.array([3, 2, 1], dtype=np.uint32))
    c.close()
    assert c.closed
    assert np.array_equal(x, [3, 2, 1])
    with pytest.raises(gpusort.ConnectionLost):
        c.sort(x)


def test_progress_bar_with_tqdm(tiny_daemon, rng, capsys):
    pytest.importorskip("tqdm")
    with tiny_daemon.client() as c:
        c.sort(keys(np.int64, 500_000, rng), progress=True)
    assert "gpusort sort" in capsys.readouterr().err
