"""What the Python client's benchmarks share (python_bench.py, rows_python_bench.py).

Each is a program named by the first argument these take (its one-line errors start with it);
the exit statuses are theirs: 64 bad arguments, 70 no daemon, a failed job or a wrong result,
130 interrupted. Results files have one shape, read by bench/report.py: commit, machine, date,
devices, numpy, cores, repeat, targets (name, value, unit, baseline, ratio, target, met), raw.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import re
import socket as socketlib
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
         "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}


def fail(prog: str, code: int, message: str):
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(code)


def import_gpusort(prog: str):
    """The client of this tree when none is installed; a missing NumPy is named with its package."""
    try:
        importlib.import_module("numpy")
    except ImportError:
        fail(prog, 70, "needs numpy (Debian: apt-get install python3-numpy; run /usr/bin/python3)")
    try:
        import gpusort
    except ImportError:
        sys.path.insert(0, str(REPO / "python"))
        try:
            import gpusort
        except ImportError as e:
            fail(prog, 70, f"cannot import gpusort: {e}")
    return gpusort


def parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """An argument parser whose errors are one line and exit 64, described by doc's first
    paragraph, the rest of doc its --help."""

    class OneLineParser(argparse.ArgumentParser):
        def error(self, message):
            fail(prog, 64, f"{message} (see --help)")

    return OneLineParser(prog=prog, description=doc.split("\n\n")[0],
                         formatter_class=argparse.RawDescriptionHelpFormatter)


def parse_amount(text: str, what: str, example: str, minimum: int) -> int:
    """A whole number with an optional k, M, G, T (powers of 1000) or Ki ... Ti (of 1024) and an
    optional b: 64Mi, 4M, 1.5k."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a {what}: {text!r} (e.g. {example})")
    value = float(m.group(1)) * UNITS[m.group(2) or ""]
    if value < minimum or value != int(value):
        raise argparse.ArgumentTypeError(f"{what} {text!r} must be a whole number >= {minimum}")
    return int(value)


def amount_name(n: int, units=(("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))) -> str:
    for unit, mult in units:
        if n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def add_run_arguments(p: argparse.ArgumentParser, gpusort, results: str):
    """--socket, --repeat, --machine, --commit and --out; results names the default file's
    last part (bench/results/<machine>-<yyyymmdd>-<commit>-RESULTS.json)."""
    p.add_argument("--socket", default=os.environ.get("GPUSORT_SOCKET") or gpusort.DEFAULT_SOCKET,
                   help="the daemon's socket (default $GPUSORT_SOCKET or %(default)s)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each client case (best taken)")
    p.add_argument("--machine", default=socketlib.gethostname().split(".")[0],
                   help="machine name for the results file (default the host name)")
    p.add_argument("--commit", help="commit measured (default: git's HEAD of this tree; a copy "
                                    "without .git, as on a GPU host, says unknown)")
    p.add_argument("--out", help="results file (default bench/results/<machine>-<yyyymmdd>-"
                                 f"<commit>-{results}.json); '-' writes none")
    p.set_defaults(results_name=results)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def connect(prog: str, gpusort, args):
    """The daemon's client and the commit measured, the first line printed."""
    import numpy as np
    try:
        client = gpusort.Client(args.socket, client_name=prog)
    except gpusort.Error as e:
        fail(prog, 70, f"no daemon: {e.message or e}")
    commit = args.commit or git_commit()
    print(f"{prog}: gpusortd {client.server.server_version} on "
          f"{','.join(client.server.devices)}, commit {commit}, numpy {np.__version__}, "
          f"{os.cpu_count()} cores")
    return client, commit


def parallel_fill(n: int, seed: int, fill) -> None:
    """Calls fill(rng, lo, hi) for [0, n) cut among up to 16 threads, each with its own
    generator from seed: NumPy's generators release the GIL, so every core makes keys."""
    import numpy as np
    threads = max(1, min(os.cpu_count() or 1, 16))
    bounds = [n * i // threads for i in range(threads + 1)]
    seeds = np.random.SeedSequence(seed).spawn(threads)
    ts = [threading.Thread(target=lambda i=i: fill(np.random.default_rng(seeds[i]), bounds[i],
                                                   bounds[i + 1]))
          for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def best_of(repeat: int, run, prepare=None) -> list[float]:
    """Each of repeat runs' seconds, prepare (untimed) before each."""
    times = []
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        times.append(timed(run)[0])
    return times


def target(name: str, value: float, baseline: str, ratio: float, goal: float,
           higher: bool = True) -> dict:
    return {"name": name, "value": value, "unit": "s", "baseline": baseline, "ratio": ratio,
            "target": goal, "higher": higher}


def print_targets(targets: list[dict]) -> None:
    """The targets' table; marks each met or not."""
    print("\n| target | value | ratio | goal | met |\n| --- | ---: | ---: | ---: | --- |")
    met = 0
    for t in targets:
        t["met"] = t["ratio"] >= t["target"] if t["higher"] else t["ratio"] <= t["target"]
        met += t["met"]
        print(f"| {t['name']} | {t['value']:.3f} | {t['ratio']:.3f} | "
              f"{'>=' if t['higher'] else '<='} {t['target']:.2f} | "
              f"{'yes' if t['met'] else 'NO'} |")
    print(f"\n{met} of {len(targets)} targets met")


def write_results(prog: str, args, commit: str, devices: list[str], targets: list[dict],
                  **rest) -> None:
    """The results file (none for --out -): the shared fields, then rest's."""
    if args.out == "-":
        return
    import numpy as np
    date = datetime.datetime.now(datetime.timezone.utc)
    out = Path(args.out) if args.out else (
        REPO / "bench" / "results" /
        f"{args.machine}-{date:%Y%m%d}-{commit}-{args.results_name}.json")
    doc = {"commit": commit, "machine": args.machine, "date": f"{date:%Y-%m-%d}",
           "devices": devices, "numpy": np.__version__, "cores": os.cpu_count(),
           "repeat": args.repeat,
           "targets": [{k: t[k] for k in ("name", "value", "unit", "baseline", "ratio", "target",
                                          "met")} for t in targets],
           **rest}
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{prog}: wrote {out}")


def run(prog: str, main) -> None:
    """Exits with main()'s status, 130 on ^C."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        fail(prog, 130, "interrupted")
