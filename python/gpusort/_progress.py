"""Progress of a job: the event the daemon sends, and the bar ``progress=True`` shows."""

from __future__ import annotations

import sys
import time
from typing import NamedTuple


class Progress(NamedTuple):
    """One PROGRESS event of a job, as given to a ``progress`` callable.

    ``bytes_done`` of ``bytes_total`` (keys plus values) of the current ``round`` (0: an in-core
    sort; 1 and 2: the two out-of-core passes); ``rounds``: how many rounds the whole job takes
    (1 or 2); ``rate``: bytes per second over the round so far. ``fraction`` is the whole job's
    share done, from 0 to 1 (round 1 is the first half of a two-round job).
    """

    bytes_done: int
    bytes_total: int
    round: int
    rounds: int
    rate: float = 0.0

    @property
    def fraction(self) -> float:
        part = self.bytes_done / self.bytes_total if self.bytes_total else 1.0
        rounds = max(self.rounds, 1)
        before = max(self.round - 1, 0) if rounds > 1 else 0
        return min(1.0, (before + part) / rounds)


class Bar:
    """What ``progress=True`` shows: tqdm's bar when tqdm is importable, else one line on
    stderr rewritten in place (at most ten times a second)."""

    def __init__(self, description: str):
        self._description = description
        self._tqdm = None
        self._last = 0.0
        self._shown = False
        try:
            from tqdm import tqdm  # optional
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._tqdm = tqdm(total=100, desc=description, unit="%",
                              bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")

    def __call__(self, p: Progress) -> None:
        percent = 100.0 * p.fraction
        rate = f"{p.rate / 1e9:.2f} GB/s" if p.rate else ""
        rounds = f"round {p.round}/{p.rounds}" if p.rounds > 1 else ""
        if self._tqdm is not None:
            self._tqdm.n = round(percent, 1)
            self._tqdm.set_postfix_str(" ".join(x for x in (rounds, rate) if x), refresh=False)
            self._tqdm.refresh()
            return
        now = time.monotonic()
        if now - self._last < 0.1 and percent < 100.0:
            return
        self._last = now
        sys.stderr.write(f"\r{self._description}: {percent:5.1f}% {rounds} {rate}".rstrip()
                         + "   ")
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
