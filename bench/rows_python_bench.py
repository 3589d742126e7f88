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

import pybench as pb

PROG = "rows_python_bench"
gpusort = pb.import_gpusort(PROG)
import numpy as np  # noqa: E402 (after import_gpusort, which names NumPy's package if missing)

ROW = np.dtype([("k", "<u8"), ("v", "<u8"), ("p", "S16")])  # 32 bytes, nothing between fields
COUNT_UNITS = (("G", 1000**3), ("M", 1000**2), ("k", 1000), ("Gi", 1 << 30), ("Mi", 1 << 20),
               ("Ki", 1 << 10))


def count_list(text: str) -> list[int]:
    return [pb.parse_amount(t, "row count", "4M, 32M, 1Gi", 1) for t in text.split(",")
            if t.strip()]


def random_words(n: int, seed: int) -> np.ndarray:
    """``n`` uniform uint64."""
    a = np.empty(n, np.uint64)

    def fill(g, lo, hi):
        a[lo:hi] = g.integers(0, 2**64, hi - lo, dtype=np.uint64, endpoint=False)

    pb.parallel_fill(n, seed, fill)
    return a


def main() -> int:
    p = pb.parser(PROG, __doc__)
    p.add_argument("--rows", type=count_list, default=[4_000_000],
                   help="rows per case, comma-separated (default 4M; k, M, G: powers of 1000, "
                        "Ki, Mi, Gi: of 1024)")
    pb.add_run_arguments(p, gpusort, "rows-python")
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if not args.rows:
        p.error("--rows is empty")

    client, commit = pb.connect(PROG, gpusort, args)
    devices = list(client.server.devices)
    raw, targets, table, wrong = [], [], [], []
    try:
        for n in args.rows:
            label = pb.amount_name(n, COUNT_UNITS)
            # -- lexsort of two uint64 columns
            k0 = random_words(n, seed=19)
            k1 = random_words(n, seed=20) >> np.uint64(44)  # 2^20 distinct primary keys
            t_np_lex, ref = pb.timed(lambda: np.lexsort((k0, k1)))
            got = client.lexsort((k0, k1))
            if not np.array_equal(got, ref):
                wrong.append(f"lexsort of {label} rows")
            del got, ref
            lex_times, lex_jobs = [], []
            for _ in range(args.repeat):
                t, _ = pb.timed(lambda: client.lexsort((k0, k1)))
                lex_times.append(t)
                r = client.last_report
                lex_jobs.append(r.seconds + r.queue_seconds)
            engine = client.last_report.engine
            del k0, k1

            # -- structured 32-byte rows by one uint64 field
            a = random_words(n * 4, seed=21).view(ROW)
            a["v"] = np.arange(n, dtype=np.uint64)
            t_np_default, _ = pb.timed(lambda: np.sort(a, order="k"))
            t_np_stable, ref = pb.timed(lambda: np.sort(a, order="k", kind="stable"))
            t_np_arg, ref_idx = pb.timed(lambda: np.argsort(a, order="k", kind="stable"))
            got = client.sort(a, order="k")
            if got.tobytes() != ref.tobytes():
                wrong.append(f"structured sort of {label} rows")
            if not np.array_equal(client.argsort(a, order="k"), ref_idx):
                wrong.append(f"structured argsort of {label} rows")
            del got, ref, ref_idx
            copy_times = pb.best_of(args.repeat, lambda: client.sort(a, order="k"))
            arg_times = pb.best_of(args.repeat, lambda: client.argsort(a, order="k"))
            x = client.empty(n, ROW)

            def refill():
                x[:] = a

            zero_times, zero_jobs = [], []
            for _ in range(args.repeat):
                refill()
                t, _ = pb.timed(lambda: client.sort(x, order="k"))
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
                pb.target(f"rows.lexsort_vs_numpy.u64x2.{label}", lx, "np.lexsort seconds",
                          t_np_lex / lx, 20.0),
                pb.target(f"rows.structured_vs_numpy.u64.{label}", c,
                          "np.sort(a, order='k') seconds (default kind)", t_np_default / c, 20.0),
                pb.target(f"rows.structured_vs_numpy_stable.u64.{label}", c,
                          "np.sort(a, order='k', kind='stable') seconds", t_np_stable / c, 20.0),
            ]
    except gpusort.Error as e:
        pb.fail(PROG, 70, f"{e}")
    finally:
        client.close()

    print("\n| rows | np.lexsort s | lexsort s | np.sort s | np.sort stable s | sort s "
          "| zero copy s | np.argsort s | argsort s | engine |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, tl, lx, td, ts, c, z, ta, g, engine in table:
        print(f"| {label} | {tl:.3f} | {lx:.3f} | {td:.3f} | {ts:.3f} | {c:.3f} | {z:.3f} | "
              f"{ta:.3f} | {g:.3f} | {engine} |")
    pb.print_targets(targets)
    pb.write_results(PROG, args, commit, devices, targets, raw=raw, wrong=wrong)
    if wrong:
        pb.fail(PROG, 70, "results unlike NumPy's: " + "; ".join(wrong))
    return 0


if __name__ == "__main__":
    pb.run(PROG, main)
