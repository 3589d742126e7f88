#!/usr/bin/env python3
"""bench/report.py on the recorded results in tests/bench/data (issue 24): every plot and the
Markdown are made, the PNGs are valid and drawn on, and the ratios in the Markdown are the ones
this test computes itself from the recorded numbers (never through report.py's own code).
Run by ctest as bench.report; needs matplotlib (Debian: python3-matplotlib)."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPORT = HERE.parent.parent / "bench" / "report.py"
PLOTS = ("rate_vs_size.png", "timeline.png", "memory.png", "incore.png")
SECTIONS = ("## Machine", "## Steps", "## Plots", "## Physics",
            "## The engine out of core and fitting, against its baselines",
            "## In-core sorters per key type and distribution", "## CPU sorts",
            "## Every user path", "## Python", "## Across hosts: the distributed sort (MPI)",
            "## Targets")


def render(src: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPORT), str(src), "--out", str(out), *extra],
                          capture_output=True, text=True, check=False)


def tables(markdown: str) -> list[list[dict]]:
    """Every Markdown table as a list of rows, each a dict by column heading."""
    found, lines = [], markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            head = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            for body in lines[i + 2:]:
                if not body.startswith("| "):
                    break
                rows.append(dict(zip(head, (c.strip() for c in body.strip("|").split("|")))))
            found.append(rows)
    return found


def table_with(markdown: str, column: str) -> list[dict]:
    matches = [t for t in tables(markdown) if t and column in t[0]]
    assert len(matches) == 1, f"one table with a column {column!r}, found {len(matches)}"
    return matches[0]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name}: not a PNG"
    assert data[12:16] == b"IHDR", f"{path.name}: no IHDR first"
    return struct.unpack(">II", data[16:24])


def load(name: str):
    return json.loads((DATA / name).read_text())


class RenderedFromTheRecordedResults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = Path(cls.tmp.name)
        cls.rendered = render(DATA, cls.out)
        cls.md = (cls.out / "report.md").read_text() if cls.rendered.returncode == 0 else ""
        gpu = load("gpu.json")["raw"]
        gpu0 = [x for x in gpu if x.get("gpu") == 0]
        cls.floor_one = max(2 * x["both_each"] for x in gpu0)
        cls.floor_all = next(x["all_gpus_both_directions_summed"] for x in gpu
                             if "all_gpus_both_directions_summed" in x)
        cls.h2d = max(x["h2d"] for x in gpu0)
        cls.d2h = max(x["d2h"] for x in gpu0)
        cls.gpus = len([x for x in gpu if "gpu" in x and not x.get("registered")])
        cpu = next(x for x in gpu if "cpu_parallel_sort_bytes" in x)
        cls.cpu_rate = cpu["cpu_parallel_sort_bytes"] / cpu["seconds"]
        cls.gpu_raw = gpu

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def floor(self, nbytes: int, out_of_core: bool, gpus: int) -> float:
        if out_of_core:
            return 4 * nbytes / 1e9 / (self.floor_one if gpus == 1 else self.floor_all)
        return nbytes / 1e9 / gpus / self.h2d + nbytes / 1e9 / gpus / self.d2h

    def test_the_renderer_succeeds_and_writes_every_file(self):
        self.assertEqual(self.rendered.returncode, 0, self.rendered.stderr)
        for name in ("report.json", "report.md") + PLOTS:
            self.assertTrue((self.out / name).is_file(), name)

    def test_every_plot_is_a_png_with_something_drawn(self):
        import matplotlib.image

        for name in PLOTS:
            width, height = png_size(self.out / name)
            self.assertGreater(width, 600, name)
            self.assertGreater(height, 300, name)
            pixels = matplotlib.image.imread(self.out / name)[:, :, :3]
            inked = (pixels.sum(axis=2) < 2.7).mean()  # not white
            self.assertGreater(inked, 0.02, f"{name} is nearly blank")

    def test_the_timeline_draws_the_copy_in_lanes(self):
        import matplotlib.image

        pixels = matplotlib.image.imread(self.out / "timeline.png")[:, :, :3] * 255
        # tab:blue (31, 119, 180), the copy-in bars
        blue = ((abs(pixels[:, :, 0] - 31) < 8) & (abs(pixels[:, :, 1] - 119) < 8) &
                (abs(pixels[:, :, 2] - 180) < 8)).mean()
        self.assertGreater(blue, 0.01)

    def test_the_markdown_has_every_section_and_links_every_plot(self):
        for s in SECTIONS:
            self.assertIn(f"\n{s}\n", self.md)
        for name in PLOTS:
            self.assertIn(f"]({name})", self.md)
        self.assertIn("**Failed: python**", self.md)  # steps.tsv records it

    def test_engine_ratios_against_floor_cub_and_cpu(self):
        rows = table_with(self.md, "x CUB")
        cub = {x["size"]: x["cub_pinned_s"] for x in self.gpu_raw if "cub_pinned_s" in x}
        runs = [x for x in self.gpu_raw if "run" in x]
        self.assertEqual(len(rows), len(runs))
        for run in runs:
            b, s, g = run["bytes"], run["seconds"], run["gpus"]
            row = next(r for r in rows if r["size"] == f"{b >> 30} GiB" and r["run"] == run["run"])
            self.assertEqual(row["x floor"], f"{s / self.floor(b, run['rounds'] == 2, g):.2f}")
            self.assertEqual(row["x CUB"], f"{cub[run['size']] / s:.2f}")
            self.assertEqual(row["x CPU"], f"{b / s / self.cpu_rate:.2f}")
            self.assertEqual(row["GB/s"], f"{b / s / 1e9:.2f}")

    def test_one_gpu_out_of_core_floor_ratio_is_gpu_bench_own(self):
        rows = table_with(self.md, "x CUB")
        for t in load("gpu.json")["targets"]:
            if t["name"].startswith("executor.out_of_core_vs_pcie_floor."):
                size = t["name"].rsplit(".", 2)[-2].split()[0] + " GiB"
                row = next(r for r in rows if r["size"] == size and
                           r["run"] == "out of core (budget 1/8), 1 GPU")
                self.assertEqual(row["x floor"], f"{t['ratio']:.2f}")

    def test_user_path_ratios_against_reference_floor_and_cpu(self):
        rows = table_with(self.md, "x reference")
        checked = 0
        for name in ("e2e-8Gi.json", "e2e-16Gi.json"):
            e = load(name)
            b = e["bytes"]
            timed = [x for x in e["raw"]
                     if "seconds" in x and "report" not in x and "bytes" not in x]
            ref = {x["path"].split()[-1]: x["seconds"] for x in timed
                   if x["path"].startswith("reference ")}
            cpu = next(x["seconds"] for x in timed if x["path"].startswith("cpu engine"))
            for x in timed:
                mode = x["path"].split()[-1]
                if mode not in ("ooc", "fit"):
                    continue
                row = next(r for r in rows if r["size"] == f"{b >> 30} GiB" and
                           r["path"] == x["path"])
                s = x["seconds"]
                self.assertEqual(row["x reference"], f"{s / ref[mode]:.2f}")
                floor = self.floor(b, mode == "ooc", self.gpus)
                self.assertEqual(row["x floor"], f"{s / floor:.2f}")
                self.assertEqual(row["x CPU"], f"{cpu / s:.2f}")
                checked += 1
        self.assertGreater(checked, 10)

    def test_python_ratios_against_numpy(self):
        rows = table_with(self.md, "x numpy")
        for x in load("python.json")["raw"]:
            row = next(r for r in rows if r["size"] == f"{x['bytes'] >> 30} GiB" and
                       r["dtype"] == x["dtype"] and r["path"] == "zero copy")
            best = min(x["zero_copy_seconds"])
            self.assertEqual(row["x numpy"], f"{x['numpy_seconds'] / best:.2f}")

    def test_the_distributed_model_is_fitted_on_two_runs_and_checked_on_the_others(self):
        runs = sorted((load(p.name) for p in DATA.glob("mpi-*.json")), key=lambda x: x["ranks"])
        self.assertGreaterEqual(len(runs), 3, "the recorded data has runs of 1, 2, 4, 8 ranks")
        several = [x for x in runs if x["ranks"] >= 2]
        a, b = several[0], several[1]
        da = a["ranks"] * a["count_per_rank"] * 8
        db = b["ranks"] * b["count_per_rank"] * 8
        local = da / a["local_seconds"]
        pa, pb = a["merge_seconds"] / da, b["merge_seconds"] / db
        la, lb = math.log2(a["ranks"]), math.log2(b["ranks"])
        m1 = (pb - pa) / (lb - la)
        m0 = pa - m1 * la
        rows = {int(r["ranks"]): r for r in table_with(self.md, "model / measured")}
        self.assertEqual(sorted(rows), [x["ranks"] for x in several])
        for x in several:
            d = x["ranks"] * x["count_per_rank"] * 8
            r = x["ranks"]
            t = (d / local + x["select_seconds"] + d * (r - 1) / r / x["alltoall_rate"]
                 + d * (m0 + m1 * math.log2(r)))
            self.assertAlmostEqual(float(rows[r]["model s"]), t, delta=0.0006)
            self.assertAlmostEqual(float(rows[r]["model / measured"]), t / x["sort_seconds"],
                                   delta=0.006)
        hosts = {int(r["hosts"]): r for r in table_with(self.md, "seconds at 100 Gb/s")}
        d = 32 * 2**30
        for h, row in hosts.items():
            merge = d * (m0 + m1 * math.log2(h)) if h > 1 else 0.0
            want = d / local + d * (h - 1) / h / 12.5e9 + merge
            self.assertAlmostEqual(float(row["seconds at 100 Gb/s"]), want, delta=0.006)
        exchange = {int(r["ranks"]): r for r in table_with(self.md, "exchange / all-to-all")}
        for x in several:
            self.assertAlmostEqual(float(exchange[x["ranks"]]["exchange / all-to-all"]),
                                   x["exchange_vs_alltoall"], delta=0.006)

    def test_every_target_is_listed_and_counted(self):
        targets = []
        for name in ("gpu.json", "sample.json", "cpu.json", "python.json", "e2e-8Gi.json",
                     "e2e-16Gi.json"):
            targets += load(name)["targets"]
        met = sum(1 for t in targets if t["met"])
        self.assertIn(f"{met} of {len(targets)} targets met.", self.md)
        self.assertEqual(len(table_with(self.md, "goal")), len(targets))

    def test_report_json_renders_the_same_markdown(self):
        with tempfile.TemporaryDirectory() as again:
            run = render(self.out / "report.json", Path(again))
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual((Path(again) / "report.md").read_text(), self.md)


class AnOlderGpuBenchFile(unittest.TestCase):
    """gpu_bench's results before it wrote each run (bench/results/h100-20261122-8f9eedc.json):
    the two 1-GPU runs of each size come from its summary fields."""

    def test_its_runs_and_floor_ratios_are_shown(self):
        old = HERE.parent.parent / "bench" / "results" / "h100-20261122-8f9eedc.json"
        recorded = json.loads(old.read_text())
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "in"
            folder.mkdir()
            (folder / "gpu.json").write_text(old.read_text())
            run = render(folder, Path(tmp), "--no-plots")
            self.assertEqual(run.returncode, 0, run.stderr)
            rows = table_with((Path(tmp) / "report.md").read_text(), "x CUB")
        self.assertEqual(len(rows), 4)
        for t in recorded["targets"]:
            size = t["name"].rsplit(".", 2)[-2].split()[0] + " GiB"
            if t["name"].startswith("executor.out_of_core_vs_pcie_floor."):
                row = next(r for r in rows if r["size"] == size and r["run"].startswith("out"))
                self.assertEqual(row["x floor"], f"{t['ratio']:.2f}")
            if t["name"].startswith("executor.not_forced_vs_cub_pinned."):
                row = next(r for r in rows if r["size"] == size and r["run"].startswith("not"))
                self.assertEqual(row["x CUB"], f"{t['ratio']:.2f}")


class BadInput(unittest.TestCase):
    def test_a_folder_without_results_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as empty:
            run = render(Path(empty), Path(empty))
            self.assertEqual(run.returncode, 65)
            self.assertIn("no benchmark results", run.stderr)

    def test_a_json_that_is_not_a_report_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = render(DATA / "gpu.json", Path(tmp))
            self.assertEqual(run.returncode, 65)
            self.assertIn("not a report.json", run.stderr)

    def test_no_plots_writes_the_markdown_alone(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = render(DATA, Path(tmp), "--no-plots")
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertFalse(any((Path(tmp) / p).exists() for p in PLOTS))
            self.assertNotIn("## Plots", (Path(tmp) / "report.md").read_text())


if __name__ == "__main__":
    unittest.main()
