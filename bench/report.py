#!/usr/bin/env python3
"""The benchmark report (issue 24): one Markdown file and PNG plots from the results of
scripts/gpusort-bench.sh, on any machine (the GPU host may lack matplotlib: the lead renders from
the fetched report.json).

  bench/report.py IN [--out DIR] [--no-plots]

IN is the folder gpusort-bench.sh wrote (machine.txt, steps.tsv, gpu.json, sample.json, mem.json,
cpu.json, e2e-<size>.json, python.json, mpi-<ranks>.json from bench/mpi_bench; any of them may be
missing) or a report.json made from one. DIR (default: IN's folder) receives:
  report.json       every result gathered in one file (the input of a later rendering)
  report.md         the report: physics, baselines, the engine in and out of core, every user
                    path, each with its ratio against its baseline and the PCIe floor; every
                    target of every benchmark
  rate_vs_size.png  sort rate against size per engine and path, the PCIe floors drawn in
  timeline.png      the copy-engine timeline of one out-of-core job (copy in, sort, copy out
                    lanes per GPU, from the CUDA events of a profiled gpu_bench run)
  memory.png        peak host memory per user path
  incore.png        the in-core sorters per key type and distribution
PCIe floors: out of core the data crosses the links four times (in and out in each round) with
both directions busy at once: the floor time is 4N over the simultaneous H2D + D2H rate, both
directions summed (gpu_bench's definition), of one GPU or of all. A job that fits cannot send
its first key back before its last has arrived: its floor is N / H2D + N / D2H, each GPU taking
its share at GPU 0's rates. A ratio "x floor" is the time over the floor time (1.00: at the
floor). Rates are bytes of keys (and values) per second.
Exit status: 0 done, 65 an input that is not such results, 69 plots asked for without
matplotlib (the Markdown and report.json are written first).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

FORMAT = "gpusort-report/1"
PLOTS = ("rate_vs_size.png", "timeline.png", "memory.png", "incore.png")
GIB = 1 << 30


class InputError(Exception):
    pass


# ---------------------------------------------------------------- gathering the results


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not readable JSON ({e})") from e


def collect(folder: Path) -> dict:
    """The results of one gpusort-bench.sh run, as one report object."""
    results: dict = {}
    for name in ("gpu", "sample", "mem", "cpu", "python"):
        p = folder / f"{name}.json"
        if p.exists():
            results[name] = read_json(p)
    e2e = [read_json(p) for p in sorted(folder.glob("e2e-*.json"))]
    if e2e:
        results["e2e"] = sorted(e2e, key=lambda r: r.get("bytes", 0))
    mpi = [read_json(p) for p in sorted(folder.glob("mpi-*.json"))]
    if mpi:
        results["mpi"] = sorted(mpi, key=lambda r: r.get("ranks", 0))
    if not results:
        raise InputError(f"{folder}: no benchmark results (gpu.json, e2e-*.json, ...)")
    machine_txt = (folder / "machine.txt").read_text() if (folder / "machine.txt").exists() else ""
    steps = []
    if (folder / "steps.tsv").exists():
        for line in (folder / "steps.tsv").read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                steps.append({"step": parts[0], "status": int(parts[1]), "seconds": int(parts[2])})
    first = next(iter(results.values()))
    first = first[0] if isinstance(first, list) else first
    fields = dict(re.findall(r"^(commit|date|mode): (.*)$", machine_txt, re.M))
    return {
        "format": FORMAT,
        "machine": first.get("machine", "unknown"),
        "commit": fields.get("commit", first.get("commit", "unknown")),
        "date": fields.get("date", first.get("date", "unknown"))[:10],
        "mode": fields.get("mode", "unknown"),
        "machine_txt": machine_txt,
        "steps": steps,
        "results": results,
    }


def load(path: Path) -> dict:
    if path.is_dir():
        return collect(path)
    report = read_json(path)
    if not isinstance(report, dict) or report.get("format") != FORMAT:
        raise InputError(f"{path}: not a report.json of bench/report.py (format {FORMAT})")
    return report


# ---------------------------------------------------------------- the numbers


def size_of(tag) -> int:
    """Bytes of a size as the benchmarks name them: 8589934592, "8.00 GiB", "1Gi", "512 MiB"."""
    if isinstance(tag, (int, float)):
        return int(tag)
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)i?B?\s*", str(tag))
    if not m:
        raise InputError(f"bad size {tag!r}")
    return int(float(m.group(1)) * (1 << (10 * " KMGT".index(m.group(2) or " "))))


def human(b: float) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            v = b / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.2f} {unit}"
    return f"{b:.0f} B"


def gbs(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds and seconds > 0 else float("nan")


def fmt(v, digits=2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"


class Model:
    """What the report shows, taken out of the benchmarks' own formats."""

    def __init__(self, report: dict):
        r = report.get("results", {})
        self.report = report
        self.gpu = r.get("gpu") or {}
        self.sample = r.get("sample") or {}
        self.mem = r.get("mem") or {}
        self.cpu = r.get("cpu") or {}
        self.e2e = r.get("e2e") or []
        self.python = r.get("python") or {}
        self.mpi = r.get("mpi") or []
        raw = self.gpu.get("raw", [])
        links = [x for x in raw if "gpu" in x and "h2d" in x]
        self.links = [x for x in links if not x.get("registered")]
        self.registered = next((x for x in links if x.get("registered")), None)
        self.gpus = max(1, len(self.links))
        # gpu_bench's floor: the best both-ways rate of GPU 0 in either kind of pinned memory.
        both = [2 * x["both_each"] for x in links if x["gpu"] == 0]
        self.floor_one = max(both) if both else None
        agg = next((x["all_gpus_both_directions_summed"] for x in raw
                    if "all_gpus_both_directions_summed" in x), None)
        self.floor_all = agg if agg else self.floor_one
        self.h2d = max((x["h2d"] for x in links if x["gpu"] == 0), default=None)
        self.d2h = max((x["d2h"] for x in links if x["gpu"] == 0), default=None)
        self.rows = {x["name"]: x for x in self.mem.get("rows", [])}
        cpu_raw = next((x for x in raw if "cpu_parallel_sort_bytes" in x), None)
        if cpu_raw:
            self.cpu_rate = gbs(cpu_raw["cpu_parallel_sort_bytes"], cpu_raw["seconds"])
        else:  # older gpu_bench files: the rate behind the vs_parallel_cpu_sort targets
            t = next((t for t in self.gpu.get("targets", [])
                      if t["name"].startswith("executor.vs_parallel_cpu_sort")), None)
            self.cpu_rate = t["value"] / t["ratio"] if t and t["ratio"] else None
        self.baselines = {}  # bytes -> the sizes' baseline and summary fields of gpu_bench
        for x in raw:
            if "size" in x and "run" not in x:
                self.baselines.setdefault(size_of(x["size"]), {}).update(
                    {k: v for k, v in x.items() if k != "size"})
        self.runs = [x for x in raw if "run" in x]
        if not self.runs:  # older gpu_bench files: the two 1-GPU runs of each size
            for b, x in sorted(self.baselines.items()):
                for key, label in (("forced_s", "out of core (budget 1/8), 1 GPU"),
                                   ("free_s", "not forced, 1 GPU")):
                    if key in x:
                        self.runs.append({"bytes": b, "run": label, "gpus": 1, "seconds": x[key],
                                          "rounds": 2 if key == "forced_s" else 1})

    def floor_seconds(self, nbytes: float, out_of_core: bool, gpus: int = 1):
        """The PCIe floor of sorting `nbytes` on `gpus` GPUs (see the module's comment)."""
        if out_of_core:
            # some of the GPUs: their own links, as far as the host's measured aggregate allows
            rate = self.floor_one if gpus <= 1 or not self.floor_one else min(
                self.floor_all, gpus * self.floor_one)
            return 4 * nbytes / 1e9 / rate if rate else None
        if not self.h2d or not self.d2h:
            return None
        return nbytes / 1e9 / gpus * (1 / self.h2d + 1 / self.d2h)

    def floor_rate(self, out_of_core: bool, gpus: int = 1):
        """GB/s at the PCIe floor."""
        t = self.floor_seconds(1e9, out_of_core, gpus)
        return 1 / t if t else None

    @staticmethod
    def out_of_core(run: dict) -> bool:
        return run.get("rounds") == 2 or "out of core" in run.get("run", "")

    def targets(self):
        """Every target of every benchmark, with the file it came from."""
        out = []
        for name, res in (("gpu", self.gpu), ("sample", self.sample), ("cpu", self.cpu),
                          ("python", self.python)):
            out += [(name, t) for t in res.get("targets", [])]
        for e in self.e2e:
            out += [(f"e2e {human(e.get('bytes', 0))}", t) for t in e.get("targets", [])]
        return out


# ---------------------------------------------------------------- the Markdown


def table(head, rows) -> list[str]:
    lines = ["| " + " | ".join(head) + " |",
             "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(head))) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines + [""]


def physics_section(m: Model) -> list[str]:
    out = ["## Physics", ""]
    rows = []
    for x in m.links:
        rows.append((f"GPU {x['gpu']} pinned H2D / D2H", f"{fmt(x['h2d'], 1)} / {fmt(x['d2h'], 1)}",
                     "GB/s", "cudaHostAlloc memory, best of 5"))
        rows.append((f"GPU {x['gpu']} H2D and D2H at once", fmt(2 * x["both_each"], 1), "GB/s",
                     f"{fmt(x['both_each'], 1)} each way, summed"))
    if m.registered:
        r = m.registered
        rows.append(("GPU 0 registered memory H2D / D2H / both summed",
                     f"{fmt(r['h2d'], 1)} / {fmt(r['d2h'], 1)} / {fmt(2 * r['both_each'], 1)}",
                     "GB/s", "mmap + cudaHostRegister, as the engine pins"))
    if m.gpus > 1 and m.floor_all:
        rows.append((f"all {m.gpus} GPUs, H2D and D2H at once", fmt(m.floor_all, 1), "GB/s",
                     "every direction of every GPU summed"))
    notes = {"h2d_pinned": "H2D from pinned memory (mem_bench)",
             "h2d_pageable": "H2D from pageable memory (staged by the driver)",
             "memcpy_1": "host memcpy, 1 thread", "memcpy_T": "host memcpy, all threads",
             "anon_retouch_T": "host memset of touched pages, all threads"}
    for name, what in notes.items():
        x = m.rows.get(name)
        if x and x.get("gbps") is not None:
            rows.append((what, fmt(x["gbps"], 1), "GB/s", x.get("note", "")))
    nbytes = m.mem.get("bytes", 0)
    for name, what in (("register_touched", "cudaHostRegister, touched pages"),
                       ("register_untouched", "cudaHostRegister, untouched pages"),
                       ("cuda_host_alloc", "cudaHostAlloc")):
        x = m.rows.get(name)
        if x and x.get("seconds") is not None:
            per_gib = f"{fmt(x['seconds'] / (nbytes / GIB) * 1e3, 1)} ms per GiB" if nbytes else ""
            rows.append((f"{what}, {human(nbytes)}", fmt(x["seconds"], 3), "s", per_gib))
    if not rows:
        return out + ["Not measured (no gpu.json or mem.json).", ""]
    out += table(("quantity", "value", "unit", "how"), rows)
    if m.floor_one:
        out += [f"PCIe floor rates (bytes of keys per second): out of core "
                f"{fmt(m.floor_rate(True), 1)} GB/s, fitting {fmt(m.floor_rate(False), 1)} GB/s "
                f"on one GPU" + (f"; {fmt(m.floor_rate(True, m.gpus), 1)} and "
                                 f"{fmt(m.floor_rate(False, m.gpus), 1)} GB/s on all {m.gpus}"
                                 if m.gpus > 1 else "") + ".", ""]
    return out


def engine_section(m: Model) -> list[str]:
    out = ["## The engine out of core and fitting, against its baselines", ""]
    if not m.runs:
        return out + ["Not measured (no gpu.json).", ""]
    out += ["On memory the engine pinned, u64 uniform keys; the median of the timed runs after a "
            "warm-up (gpu_bench). x floor: time over the PCIe floor time (out of core 4N over "
            "the GPUs' simultaneous rate, fitting N / H2D + N / D2H); x CUB: the copy-in / CUB "
            "radix sort / copy-out time (pinned, 1 GPU) over the time; x CPU: rate over the "
            "parallel CPU sort's rate" + (f" ({fmt(m.cpu_rate, 2)} GB/s)." if m.cpu_rate else "."), ""]
    rows = []
    for run in sorted(m.runs, key=lambda r: (r["bytes"], r.get("gpus", 1), r["run"])):
        b, t, g = run["bytes"], run["seconds"], run.get("gpus", 1)
        floor = m.floor_seconds(b, m.out_of_core(run), g)
        cub = m.baselines.get(b, {}).get("cub_pinned_s")
        rows.append((human(b), run["run"], run.get("chunks", "-"), fmt(t, 3), fmt(gbs(b, t)),
                     fmt(t / floor) if floor else "-", fmt(cub / t) if cub else "-",
                     fmt(gbs(b, t) / m.cpu_rate) if m.cpu_rate else "-"))
    out += table(("size", "run", "chunks", "seconds", "GB/s", "x floor", "x CUB", "x CPU"), rows)
    rows = []
    for b, x in sorted(m.baselines.items()):
        for key, what in (("cub_pinned_s", "copy in, CUB radix sort, copy out (pinned)"),
                          ("cub_pageable_s", "copy in, CUB radix sort, copy out (pageable)"),
                          ("pageable_out_of_core_s", "gpusort out of core from pageable memory")):
            if x.get(key):
                floor = m.floor_seconds(b, "out_of_core" in key)
                rows.append((human(b), what, fmt(x[key], 3), fmt(gbs(b, x[key])),
                             fmt(x[key] / floor) if floor else "-"))
    if rows:
        out += ["Baselines (1 GPU):", ""]
        out += table(("size", "baseline", "seconds", "GB/s", "x floor"), rows)
    return out


def incore_section(m: Model) -> list[str]:
    out = ["## In-core sorters per key type and distribution", ""]
    raw = m.sample.get("raw", [])
    if not raw:
        return out + ["Not measured (no sample.json).", ""]
    out += [f"Keys in GPU 0's memory (sample_bench, {m.sample.get('device', '')}); Gkeys/s, "
            "median of the runs after a warm-up; the ratios are the sample sort's speed over "
            "CUB's radix sort and merge sort on the same data.", ""]
    rows = [(x["keys"], x["distribution"], f"2^{int(math.log2(x['n']))}", fmt(x["sample_gkeys"]),
             fmt(x["radix_gkeys"]), fmt(x["merge_gkeys"]),
             fmt(x["sample_gkeys"] / x["radix_gkeys"]), fmt(x["sample_gkeys"] / x["merge_gkeys"]))
            for x in raw]
    return out + table(("keys", "distribution", "n", "sample sort", "CUB radix", "CUB merge",
                        "x radix", "x merge"), rows)


def key_bytes(name: str) -> int:
    return 16 if "pairs" in name else 4 if re.search(r"\b(u32|i32|f32)\b", name) else 8


def cpu_section(m: Model) -> list[str]:
    out = ["## CPU sorts", ""]
    raw = m.cpu.get("raw", [])
    if not raw:
        return out + ["Not measured (no cpu.json).", ""]
    out += [f"cpu_bench, {m.cpu.get('threads', '?')} threads: std::sort on one thread, "
            "__gnu_parallel::sort on all cores and the engine's CPU paths.", ""]
    rows = [(x["name"], x["n"], fmt(x["seconds"], 3), fmt(x["n"] / x["seconds"] / 1e6, 1),
             fmt(gbs(x["n"] * key_bytes(x["name"]), x["seconds"]), 2)) for x in raw]
    return out + table(("sort", "elements", "seconds", "Melements/s", "GB/s"), rows)


def e2e_paths(e: dict):
    """(path, seconds, peak RSS GiB) of one e2e_bench file, timed rows only."""
    for x in e.get("raw", []):
        if "seconds" in x and "report" not in x and "bytes" not in x:
            yield x["path"], x["seconds"], x.get("peak_rss_gib", 0)


def e2e_section(m: Model) -> list[str]:
    out = ["## Every user path", ""]
    if not m.e2e:
        return out + ["Not measured (no e2e-*.json).", ""]
    out += ["u64 uniform keys in /dev/shm (e2e_bench): the CLI and the daemon are timed from "
            "process start to exit, the shared buffer from submit to end. x reference: time over "
            "the engine's on memory it pinned (same mode); x floor: time over the PCIe floor "
            "(every GPU: the paths take them all); x CPU: the CPU engine's time over the path's; "
            "peak RSS as each process reports it.", ""]
    rows = []
    for e in m.e2e:
        b = e.get("bytes", 0)
        paths = list(e2e_paths(e))
        ref = {p.split()[-1]: s for p, s, _ in paths if p.startswith("reference ")}
        cpu = next((s for p, s, _ in paths if p.startswith("cpu engine")), None)
        for path, s, rss in paths:
            mode = path.split()[-1]
            if mode not in ("ooc", "fit"):
                rows.append((human(b), path, fmt(s, 3), fmt(gbs(b, s)), "-", "-", "-", "-"))
                continue
            floor = m.floor_seconds(b, mode == "ooc", m.gpus)
            rows.append((human(b), path, fmt(s, 3), fmt(gbs(b, s)),
                         fmt(s / ref[mode]) if mode in ref else "-",
                         fmt(s / floor) if floor else "-", fmt(cpu / s) if cpu else "-",
                         fmt(rss) if rss else "-"))
        for x in e.get("raw", []):
            if x.get("path", "").startswith("gpusortd"):
                rows.append((human(b), x["path"] + " (daemon process)", "-", "-", "-", "-", "-",
                             fmt(x["peak_rss_gib"])))
    return out + table(("size", "path", "seconds", "GB/s", "x reference", "x floor", "x CPU",
                        "peak RSS GiB"), rows)


def python_section(m: Model) -> list[str]:
    out = ["## Python", ""]
    raw = m.python.get("raw", [])
    if not raw:
        return out + ["Not measured (no python.json: no python3 with numpy, or skipped).", ""]
    out += [f"The Python client against np.sort (python_bench, numpy {m.python.get('numpy', '?')}, "
            "best of the runs): copy = into a shared buffer and back, zero copy = sorted where it "
            "is. x numpy: np.sort's time over the path's; x floor: time over the PCIe floor "
            "of a job that fits (every GPU, as the daemon takes them).", ""]
    rows = []
    for x in raw:
        b = x["bytes"]
        rows.append((human(b), x["dtype"], "np.sort", fmt(x["numpy_seconds"], 3),
                     fmt(gbs(b, x["numpy_seconds"])), "1.00", "-"))
        for key, what in (("copy_seconds", "copy"), ("zero_copy_seconds", "zero copy"),
                          ("stable_seconds", "stable, zero copy"),
                          ("argsort_seconds", "argsort, zero copy"),
                          ("job_seconds", "the daemon's job")):
            if x.get(key):
                s = min(x[key])
                floor = m.floor_seconds(b, False, m.gpus)
                rows.append((human(b), x["dtype"], what, fmt(s, 3), fmt(gbs(b, s)),
                             fmt(x["numpy_seconds"] / s), fmt(s / floor) if floor else "-"))
    return out + table(("size", "dtype", "path", "seconds", "GB/s", "x numpy", "x floor"), rows)


# The distributed sort's model: phases that add up, each at a rate of the host.
NETWORKS = (("100 Gb/s", 12.5e9), ("400 Gb/s", 50e9))
HOSTS = (1, 2, 4, 8, 16)
SHARD_PER_HOST = 32 * 2**30  # bytes of keys per host in the predictions


def mpi_rates(runs: list[dict]):
    """The host's rates from the runs of two ranks or more (the first two of them): L, the
    local sorts' bytes/s (every rank of the host together), and the merge's seconds per byte
    m(R) = m0 + m1 log2(R) for R runs (a heap of R heads; m1 = 0 from one run alone)."""
    several = sorted((x for x in runs if x.get("ranks", 0) >= 2 and x.get("local_seconds")
                      and x.get("merge_seconds")), key=lambda x: x["ranks"])
    if not several:
        return None
    ref = several[:2]
    total = [x["ranks"] * x["count_per_rank"] * 8 for x in ref]
    local = total[0] / ref[0]["local_seconds"]
    per_byte = [x["merge_seconds"] / t for x, t in zip(ref, total)]
    logs = [math.log2(x["ranks"]) for x in ref]
    if len(ref) == 2 and logs[1] != logs[0]:
        m1 = (per_byte[1] - per_byte[0]) / (logs[1] - logs[0])
    else:
        m1 = 0.0
    m0 = per_byte[0] - m1 * logs[0]
    return local, m0, m1, [x["ranks"] for x in ref]


def mpi_predicted(total: float, ranks: int, local: float, m0: float, m1: float,
                  transport: float, select: float) -> float:
    """Seconds for `total` bytes on `ranks` ranks of one host: the local sorts and the merges
    share the host (its rates), the exchange moves (ranks - 1) / ranks of the bytes at the
    transport's measured all-to-all rate."""
    return (total / local + select + total * (ranks - 1) / ranks / transport
            + total * (m0 + m1 * math.log2(ranks)))


def distributed_section(m: Model) -> list[str]:
    out = ["## Across hosts: the distributed sort (MPI)", ""]
    if not m.mpi:
        return out + ["Not measured (no mpi-*.json from bench/mpi_bench).", ""]
    out += ["`mpi_bench` on one host, u64 keys, best of its runs: the transport's own "
            "MPI_Alltoall of the same bytes between ranks, and the sort's phases (the slowest "
            "rank's). exchange / all-to-all: the exchange's rate over the plain all-to-all's "
            "(the issue's target: at least 0.70).", ""]
    rows = []
    for x in m.mpi:
        total = x["ranks"] * x["count_per_rank"] * 8
        rows.append((x["ranks"], human(total), fmt(x["sort_seconds"], 3),
                     fmt(x["local_seconds"], 3), fmt(x["select_seconds"], 4),
                     fmt(x["exchange_seconds"], 3), fmt(x["merge_seconds"], 3),
                     fmt(gbs(total, x["sort_seconds"])),
                     fmt(x["alltoall_rate"] / 1e9) if x["ranks"] > 1 else "-",
                     fmt(x["exchange_vs_alltoall"]) if x["ranks"] > 1 else "-",
                     human(x.get("extra_bytes", 0))))
    out += table(("ranks", "data", "seconds", "local sort", "select", "exchange", "merge",
                  "GB/s", "all-to-all GB/s", "exchange / all-to-all", "beside a shard"), rows)
    rates = mpi_rates(m.mpi)
    if rates is None:
        return out
    local, m0, m1, ref = rates
    out += ["**The model.** T = D / L + S + D (R - 1) / R / A + D (m0 + m1 log2 R) for D bytes on "
            f"R ranks of one host: L = {fmt(local / 1e9)} GB/s the host's local sorts, m0 = "
            f"{fmt(m0 * 1e9, 3)} and m1 = {fmt(m1 * 1e9, 3)} s/GB its merge of R runs (from the "
            f"runs of {' and '.join(str(r) for r in ref)} ranks), A the all-to-all rate and S the "
            "selection measured in each run. Checked against each run (those not used for the "
            "rates are the check):", ""]
    rows = []
    for x in m.mpi:
        if x["ranks"] < 2:
            continue
        total = x["ranks"] * x["count_per_rank"] * 8
        t = mpi_predicted(total, x["ranks"], local, m0, m1, x["alltoall_rate"],
                          x["select_seconds"])
        rows.append((x["ranks"], human(total), fmt(x["sort_seconds"], 3), fmt(t, 3),
                     fmt(t / x["sort_seconds"]), "yes" if x["ranks"] in ref else "no"))
    out += table(("ranks", "data", "measured s", "model s", "model / measured",
                  "fitted on it"), rows)
    out += [f"On H hosts like this one, {human(SHARD_PER_HOST)} of keys each, one rank per host "
            "exchanging at the network's rate B per host: T = D / L + D (H - 1) / H / B + "
            "D (m0 + m1 log2 H) (D the bytes per host; one host only sorts; the selection's "
            "milliseconds left out).",
            ""]
    rows = []
    for h in HOSTS:
        d = SHARD_PER_HOST
        merge = d * (m0 + m1 * math.log2(h)) if h > 1 else 0.0  # one host: its sort is all
        rows.append((h, human(h * d)) + tuple(
            fmt(d / local + d * (h - 1) / h / b + merge, 2) for _, b in NETWORKS))
    out += table(("hosts", "data") + tuple(f"seconds at {n}" for n, _ in NETWORKS), rows)
    return out


def targets_section(m: Model) -> list[str]:
    rows = [(src, t["name"], fmt(t["value"], 3), t.get("unit", ""), t.get("baseline", ""),
             fmt(t["ratio"], 3), fmt(t["target"], 2), "yes" if t["met"] else "**no**")
            for src, t in m.targets()]
    met = sum(1 for _, t in m.targets() if t["met"])
    out = ["## Targets", "", f"{met} of {len(rows)} targets met.", ""]
    head = ("from", "target", "value", "unit", "baseline", "ratio", "goal", "met")
    return out + table(head, rows)


def markdown(report: dict, plots: list[str]) -> str:
    m = Model(report)
    out = [f"# gpusort benchmark report: {report.get('machine')}, {report.get('date')}, "
           f"commit {report.get('commit')}", "",
           f"Rendered by `bench/report.py` from `report.json` (mode: "
           f"{report.get('mode', 'unknown')}).", ""]
    if report.get("note"):
        out += [report["note"], ""]
    if report.get("machine_txt"):
        out += ["## Machine", "", "```", report["machine_txt"].rstrip(), "```", ""]
    if report.get("steps"):
        failed = [s["step"] for s in report["steps"] if s["status"] != 0]
        out += ["## Steps", "", "All ran." if not failed else
                f"**Failed: {', '.join(failed)}** (their logs are beside report.json).", ""]
        out += table(("step", "exit status", "seconds"),
                     [(s["step"], s["status"], s["seconds"]) for s in report["steps"]])
    if plots:
        out += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    for section in (physics_section, engine_section, incore_section, cpu_section, e2e_section,
                    python_section, distributed_section, targets_section):
        out += section(m)
    return "\n".join(out)


# ---------------------------------------------------------------- the plots


def plot_all(report: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = Model(report)
    commit = str(report.get("commit"))
    commit = commit if len(commit) <= 40 else commit[:37] + "..."
    title = f"{report.get('machine')}, {report.get('date')}, commit {commit}"
    made = []

    def save(fig, name):
        fig.savefig(out / name, dpi=110, bbox_inches="tight")
        plt.close(fig)
        made.append(name)

    # Sort rate against size: the engine and its baselines, then the user paths.
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 7), sharey=True)
    for ax in (left, right):  # more series than the default cycle's ten colours
        ax.set_prop_cycle(color=[plt.get_cmap("tab20")(i) for i in range(20)])
    series: dict[str, list] = {}
    for run in m.runs:
        series.setdefault(f"gpusort {run['run']}", []).append(
            (run["bytes"], gbs(run["bytes"], run["seconds"])))
    for b, x in m.baselines.items():
        for key, label in (("cub_pinned_s", "copy in + CUB radix + copy out, pinned"),
                           ("cub_pageable_s", "copy in + CUB radix + copy out, pageable"),
                           ("pageable_out_of_core_s", "gpusort out of core, pageable (staged)")):
            if x.get(key):
                series.setdefault(label, []).append((b, gbs(b, x[key])))
    for label, pts in sorted(series.items()):
        pts.sort()
        left.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                  linestyle="--" if "CUB" in label or "pageable" in label else "-")
    if m.cpu_rate:
        left.axhline(m.cpu_rate, color="grey", linestyle=":", label="parallel CPU sort")
    paths: dict[str, list] = {}
    for e in m.e2e:
        b = e.get("bytes", 0)
        for path, s, _ in e2e_paths(e):
            if path.split()[-1] in ("ooc", "fit") and not path.startswith("cpu"):
                paths.setdefault(path, []).append((b, gbs(b, s)))
    for x in m.python.get("raw", []):
        for key, what in (("zero_copy_seconds", "zero copy"), ("copy_seconds", "copy")):
            if x.get(key):
                paths.setdefault(f"python {what} {x['dtype']}", []).append(
                    (x["bytes"], gbs(x["bytes"], min(x[key]))))
        paths.setdefault(f"np.sort {x['dtype']}", []).append(
            (x["bytes"], gbs(x["bytes"], x["numpy_seconds"])))
    for label, pts in sorted(paths.items()):
        pts.sort()
        right.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                   linestyle="--" if label.endswith("fit") else "-")
    for ax, what in ((left, "the engine and its baselines (gpu_bench)"),
                     (right, "user paths (e2e_bench, python_bench)")):
        floors = [(True, 1, "red", "-"), (False, 1, "darkred", "-.")]
        if m.gpus > 1:
            floors += [(True, m.gpus, "orange", "-"), (False, m.gpus, "saddlebrown", "-.")]
        for ooc, g, colour, style in floors:
            if m.floor_rate(ooc, g):
                ax.axhline(m.floor_rate(ooc, g), color=colour, linewidth=1.5, linestyle=style,
                           label=f"PCIe floor, {'out of core' if ooc else 'fitting'}, "
                                 f"{g} GPU{'s' if g > 1 else ''}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes of keys)")
        ax.set_title(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.14), ncol=2)
        ticks = sorted({p[0] for pts in list(series.values()) + list(paths.values()) for p in pts})
        if ticks:
            ax.set_xticks(ticks, [human(t) for t in ticks], rotation=30, fontsize=8)
    left.set_ylabel("sort rate (GB/s)")
    fig.suptitle(f"Sort rate against size: {title}")
    save(fig, "rate_vs_size.png")

    # The copy-engine timeline of one out-of-core job: the most GPUs, then the largest size.
    profiled = [r for r in m.runs if r.get("profile") and m.out_of_core(r)]
    fig, ax = plt.subplots(figsize=(14, 5))
    if profiled:
        run = max(profiled, key=lambda r: (r.get("gpus", 1), r["bytes"]))
        lanes = []
        colours = {"copy in": "tab:blue", "sort": "tab:green", "copy out": "tab:orange"}
        for p in run["profile"]:
            if p["device"] in ("all", "host") or not p.get("steps"):
                if p["stage"] == "round":
                    ax.axvspan(p["round_start"], p["round_start"] + p["last_end"],
                               color="grey" if p["round"] == 1 else "silver", alpha=0.15,
                               zorder=0)
                    ax.text(p["round_start"], -0.9, f"round {p['round']}", fontsize=8)
                continue
            lane = f"{p['device'].split(' ')[0]} {p['stage']}"
            if lane not in lanes:
                lanes.append(lane)
            y = lanes.index(lane)
            ax.broken_barh([(p["round_start"] + a, b - a) for a, b in p["steps"]], (y - 0.4, 0.8),
                           facecolors=colours.get(p["stage"], "tab:grey"), edgecolor="black",
                           linewidth=0.3, zorder=2)
        ax.set_yticks(range(len(lanes)), lanes)
        ax.set_ylim(-1, max(len(lanes), 1))
        ax.invert_yaxis()
        ax.set_xlabel("seconds from the job's start (CUDA events)")
        ax.set_title(f"Copy-engine timeline: {run['run']}, {human(run['bytes'])}, "
                     f"{run.get('chunks', '?')} chunks, profiled run "
                     f"{fmt(run.get('profiled_s'), 3)} s: {title}")
        ax.grid(True, axis="x", alpha=0.3)
    else:
        ax.text(0.5, 0.5, "no profiled out-of-core run in gpu.json", ha="center", va="center")
        ax.set_axis_off()
    save(fig, "timeline.png")

    # Memory footprint per path, at the largest size measured end to end.
    fig, ax = plt.subplots(figsize=(11, 5))
    if m.e2e:
        e = m.e2e[-1]
        b = e.get("bytes", 0)
        bars = [(p, rss) for p, _, rss in e2e_paths(e) if rss]
        bars += [(x["path"] + " (daemon)", x["peak_rss_gib"]) for x in e.get("raw", [])
                 if x.get("path", "").startswith("gpusortd")]
        ax.bar([p for p, _ in bars], [v for _, v in bars], color="tab:purple")
        ax.axhline(b / GIB, color="black", linestyle="--", label=f"the data ({human(b)})")
        ax.set_ylabel("peak RSS (GiB)")
        ax.set_title(f"Peak host memory per path, {human(b)} of keys: {title}")
        ax.legend()
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no e2e results", ha="center", va="center")
        ax.set_axis_off()
    save(fig, "memory.png")

    # The in-core sorters at the largest size, per key type and distribution.
    fig, ax = plt.subplots(figsize=(15, 5))
    raw = m.sample.get("raw", [])
    if raw:
        n = max(x["n"] for x in raw)
        cases = [x for x in raw if x["n"] == n]
        xs = range(len(cases))
        for i, (key, label) in enumerate((("sample_gkeys", "gpusort sample sort"),
                                          ("radix_gkeys", "CUB radix sort"),
                                          ("merge_gkeys", "CUB merge sort"))):
            ax.bar([x + (i - 1) * 0.27 for x in xs], [c[key] for c in cases], width=0.27,
                   label=label)
        ax.set_xticks(list(xs), [f"{c['keys']} {c['distribution']}" for c in cases],
                      rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("Gkeys/s")
        ax.set_title(f"In-core sorters, 2^{int(math.log2(n))} keys in GPU memory: {title}")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no sample_bench results", ha="center", va="center")
        ax.set_axis_off()
    save(fig, "incore.png")
    return made


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input", type=Path, help="a gpusort-bench.sh folder or a report.json")
    p.add_argument("--out", type=Path, help="where to write (default: the input's folder)")
    p.add_argument("--no-plots", action="store_true", help="the Markdown and report.json only")
    args = p.parse_args(argv)
    try:
        report = load(args.input)
    except InputError as e:
        print(f"report: {e}", file=sys.stderr)
        return 65
    out = args.out or (args.input if args.input.is_dir() else args.input.parent)
    out.mkdir(parents=True, exist_ok=True)
    if args.input.resolve() != (out / "report.json").resolve():
        (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    plots, status = [], 0
    if not args.no_plots:
        try:
            plots = plot_all(report, out)
        except ImportError:
            print("report: no matplotlib here (Debian: python3-matplotlib): Markdown only; "
                  f"render the plots elsewhere with bench/report.py {out / 'report.json'}",
                  file=sys.stderr)
            status = 69
    (out / "report.md").write_text(markdown(report, plots) + "\n")
    print(f"report: {out / 'report.md'}" + (f" and {', '.join(plots)}" if plots else ""))
    return status


if __name__ == "__main__":
    sys.exit(main())
