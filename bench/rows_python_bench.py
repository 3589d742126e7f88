#!/usr/bin/env python3
"""The Python client's rows against NumPy (issue "Rows, not only numbers").

For each row count it times, best of --repeat runs (NumPy once each, it is slow):
  lexsort      client.lexsort((k0, k1)) against np.lexsort((k0, k1)): two uint64 columns, the
               primary k1 with 2^20 distinct values (so that k0 breaks many ties), k0 uniform;
               the columns packed into 16-byte records in a shared buffer, one records argsort
  structured   client.sort(a, order="k") of 32-byte rows (k uint64 uniform, v uint64 the row
               number, p 16 random bytes) against np.sort(a, order="k") with NumPy's default kind
               (quicksort) and with kind="stable"; copied in and out of a shared buffer, one
               records sort by k then v then p (NumPy breaks ties by the other fields)
  zero_copy    client.sort(x, order="k"), x = client.empty(n, rows): sorted where it is
  argsort      client.argsort(a, order="k") against np.argsort(a, order="k", kind="stable")
and checks every result against NumPy's (exit status 70 when one differs).

Targets: lexsort at least 20x np.lexsort; the structured sort (copied) at least 20x
np.sort(order=) of either kind. Prints a table and writes
bench/results/<machine>-<yyyymmdd>-<commit>-rows-python.json (the shape of python_bench's, its
targets named "rows.").

  bench/rows_python_bench.py --socket PATH [--rows 4M,32M] [--repeat 3] [--machine NAME]
                             [--commit C] [--out FILE]
Exit status: 0 done, 64 bad arguments, 70 no daemon, a failed job or a result unlike NumPy's
(one line on stderr).
"""

from __future__ import annotations

import argparse
import datetime
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


def fail(code: int, message: str):
    print(f"rows_python_bench: {message}", file=sys.stderr)
    sys.exit(code)


try:
    import numpy as np
except ImportError:
    fail(70, "needs numpy (Debian: apt-get install python3-numpy; run /usr/bin/python3)")
try:
    import gpusort
except ImportError:
    sys.path.insert(0, str(REPO / "python"))
    try:
        import gpusort
    except ImportError as e:
        fail(70, f"cannot import gpusort: {e}")


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        fail(64, f"{message} (see --help)")


UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3,
         "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}

ROW = np.dtype([("k", "<u8"), ("v", "<u8"), ("p", "S16")])  # 32 bytes, nothing between fields


def parse_count(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]i?)?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a row count: {text!r} (e.g. 4M, 32M, 1Gi)")
    value = float(m.group(1)) * UNITS[m.group(2) or ""]
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"row count {text!r} must be a whole number >= 1")
    return int(value)


def count_list(text: str) -> list[int]:
    return [parse_count(t) for t in text.split(",") if t.strip()]


def count_name(n: int) -> str:
    for unit, mult in (("G", 1000**3), ("M", 1000**2), ("k", 1000), ("Gi", 1 << 30),
                       ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def random_words(n: int, seed: int) -> np.ndarray:
    """``n`` uniform uint64 made on every core (NumPy's generators release the GIL)."""
    a = np.empty(n, np.uint64)
    threads = max(1, min(os.cpu_count() or 1, 16))
    bounds = [n * i // threads for i in range(threads + 1)]
    seeds = np.random.SeedSequence(seed).spawn(threads)

    def fill(i):
        lo, hi = bounds[i], bounds[i + 1]
        a[lo:hi] = np.random.default_rng(seeds[i]).integers(0, 2**64, hi - lo, dtype=np.uint64,
                                                             endpoint=False)

    ts = [threading.Thread(target=fill, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return a


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def best_of(repeat: int, run, prepare=None) -> list[float]:
    times = []
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return times


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def target(name, value, baseline, ratio, goal):
    return {"name": name, "value": value, "unit": "s", "baseline": baseline, "ratio": ratio,
            "target": goal, "higher": True}


def main() -> int:
    p = OneLineParser(description=__doc__.split("\n\n")[0],
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default=os.environ.get("GPUSORT_SOCKET") or gpusort.DEFAULT_SOCKET,
                   help="the daemon's socket (default $GPUSORT_SOCKET or %(default)s)")
    p.add_argument("--rows", type=count_list, default=[4_000_000],
                   help="rows per case, comma-separated (default 4M; k, M, G: powers of 1000, "
                        "Ki, Mi, Gi: of 1024)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each client case (best taken)")
    p.add_argument("--machine", default=socketlib.gethostname().split(".")[0],
                   help="machine name for the results file (default the host name)")
    p.add_argument("--commit", help="commit measured (default: git's HEAD of this tree; a copy "
                                    "without .git, as on a GPU host, says unknown)")
    p.add_argument("--out", help="results file (default bench/results/<machine>-<yyyymmdd>-"
                                 "<commit>-rows-python.json); '-' writes none")
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if not args.rows:
        p.error("--rows is empty")

    try:
        client = gpusort.Client(args.socket, client_name="rows_python_bench")
    except gpusort.Error as e:
        fail(70, f"no daemon: {e.message or e}")
    commit = args.commit or git_commit()
    devices = list(client.server.devices)
    print(f"rows_python_bench: gpusortd {client.server.server_version} on {','.join(devices)}, "
          f"commit {commit}, numpy {np.__version__}, {os.cpu_count()} cores")
    raw, targets, table, wrong = [], [], [], []
    try:
        for n in args.rows:
            label = count_name(n)
            # -- lexsort of two uint64 columns
            k0 = random_words(n, seed=19)
            k1 = random_words(n, seed=20) >> np.uint64(44)  # 2^20 distinct primary keys
            t_np_lex, ref = timed(lambda: np.lexsort((k0, k1)))
            got = client.lexsort((k0, k1))
            if not np.array_equal(got, ref):
                wrong.append(f"lexsort of {label} rows")
            del got, ref
            lex_times, lex_jobs = [], []
            for _ in range(args.repeat):
                t, _ = timed(lambda: client.lexsort((k0, k1)))
                lex_times.append(t)
                r = client.last_report
                lex_jobs.append(r.seconds + r.queue_seconds)
            engine = client.last_report.engine
            del k0, k1

            # -- structured 32-byte rows by one uint64 field
            a = random_words(n * 4, seed=21).view(ROW)
            a["v"] = np.arange(n, dtype=np.uint64)
            t_np_default, _ = timed(lambda: np.sort(a, order="k"))
            t_np_stable, ref = timed(lambda: np.sort(a, order="k", kind="stable"))
            t_np_arg, ref_idx = timed(lambda: np.argsort(a, order="k", kind="stable"))
            got = client.sort(a, order="k")
            if got.tobytes() != ref.tobytes():
                wrong.append(f"structured sort of {label} rows")
            if not np.array_equal(client.argsort(a, order="k"), ref_idx):
                wrong.append(f"structured argsort of {label} rows")
            del got, ref, ref_idx
            copy_times = best_of(args.repeat, lambda: client.sort(a, order="k"))
            arg_times = best_of(args.repeat, lambda: client.argsort(a, order="k"))
            x = client.empty(n, ROW)

            def refill():
                x[:] = a

            zero_times, zero_jobs = [], []
            for _ in range(args.repeat):
                refill()
                t, _ = timed(lambda: client.sort(x, order="k"))
                zero_times.append(t)
                r = client.last_report
                zero_jobs.append(r.seconds + r.queue_seconds)
            del x, a

            case = {"rows": n, "record_bytes": ROW.itemsize, "engine": engine,
                    "numpy_lexsort_seconds": t_np_lex, "lexsort_seconds": lex_times,
                    "lexsort_job_seconds": lex_jobs,
                    "numpy_sort_seconds": t_np_default, "numpy_stable_sort_seconds": t_np_stable,
                    "numpy_argsort_seconds": t_np_arg, "sort_seconds": copy_times,
                    "zero_copy_seconds": zero_times, "zero_copy_job_seconds": zero_jobs,
                    "argsort_seconds": arg_times}
            raw.append(case)
            lx, c, z, g = min(lex_times), min(copy_times), min(zero_times), min(arg_times)
            table.append((label, t_np_lex, lx, t_np_default, t_np_stable, c, z, t_np_arg, g,
                          engine))
            targets += [
                target(f"rows.lexsort_vs_numpy.u64x2.{label}", lx, "np.lexsort seconds",
                       t_np_lex / lx, 20.0),
                target(f"rows.structured_vs_numpy.u64.{label}", c,
                       "np.sort(a, order='k') seconds (default kind)", t_np_default / c, 20.0),
                target(f"rows.structured_vs_numpy_stable.u64.{label}", c,
                       "np.sort(a, order='k', kind='stable') seconds", t_np_stable / c, 20.0),
            ]
    except gpusort.Error as e:
        fail(70, f"{e}")
    finally:
        client.close()

    print("\n| rows | np.lexsort s | lexsort s | np.sort s | np.sort stable s | sort s "
          "| zero copy s | np.argsort s | argsort s | engine |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, tl, lx, td, ts, c, z, ta, g, engine in table:
        print(f"| {label} | {tl:.3f} | {lx:.3f} | {td:.3f} | {ts:.3f} | {c:.3f} | {z:.3f} | "
              f"{ta:.3f} | {g:.3f} | {engine} |")
    print("\n| target | value | ratio | goal | met |\n| --- | ---: | ---: | ---: | --- |")
    met = 0
    for t in targets:
        t["met"] = t["ratio"] >= t["target"]
        met += t["met"]
        print(f"| {t['name']} | {t['value']:.3f} | {t['ratio']:.2f} | >= {t['target']:.2f} | "
              f"{'yes' if t['met'] else 'NO'} |")
    print(f"\n{met} of {len(targets)} targets met")
    if args.out != "-":
        date = datetime.datetime.now(datetime.timezone.utc)
        out = Path(args.out) if args.out else (
            REPO / "bench" / "results" / f"{args.machine}-{date:%Y%m%d}-{commit}-rows-python.json")
        doc = {"commit": commit, "machine": args.machine, "date": f"{date:%Y-%m-%d}",
               "devices": devices, "numpy": np.__version__, "cores": os.cpu_count(),
               "repeat": args.repeat,
               "targets": [{k: t[k] for k in ("name", "value", "unit", "baseline", "ratio",
                                              "target", "met")} for t in targets],
               "raw": raw, "wrong": wrong}
        out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"rows_python_bench: wrote {out}")
    if wrong:
        fail(70, "results unlike NumPy's: " + "; ".join(wrong))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        fail(130, "interrupted")
