"""A call with a deadline, for the tests that must fail rather than hang."""

from __future__ import annotations

import threading


def within(seconds: float, fn, *args, **kw):
    """fn(*args, **kw) on a thread; fails the test (instead of hanging it) past ``seconds``.
    Returns what fn returned or the exception it raised."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the call did not return within {seconds} s: a hang"
    return box.get("error", box.get("value"))
