#!/usr/bin/env python3
"""Tests of headline.py on a small repository made in a temporary directory.

Each test writes a rows file, one or two results folders (summary.json, machine.json and
report.md, as `genesis bench` writes them) and a README holding the markers, then
writes, checks, or breaks one input and checks what the generator says. Whether the
checked-in README.md agrees with the checked-in reports is headline_check_test's job.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headline  # noqa: E402  (found beside this file, in and out of Bazel)

MINIMAL_README = "# Title\n\nBefore.\n\n" + headline.BEGIN + "\n" + headline.END + "\nAfter.\n"

GPU_REPORT = """# genesis bench

## alloc: memory pools against the system and CUDA allocators, 1 to 16 threads

## copy: copies by path and size against memcpy / cudaMemcpy(Async)

## collectives: collectives against the same library called directly
"""


def row(label: str, figure: str, baseline: str, baseline_figure: str, ratio: float,
        suite: str, run: str, target: float = 0.0, met: str = "") -> dict:
    """A row of summary.json as `genesis bench` writes it."""
    return {"label": label, "figure_text": figure, "baseline_label": baseline,
            "baseline_text": baseline_figure, "ratio": ratio, "target": target, "met": met,
            "suite": suite, "run": run, "figure": "BM_" + run, "baseline": "BM_base"}


GPU_ROWS = [
    row("device pool, 1 MiB, 1 thread", "49.8 ns", "cudaMallocAsync + cudaFreeAsync",
        "801 ns", 16.094, "alloc", "alloc_cuda", 12.0, "yes"),
    row("device pool, 1 MiB, 1 thread", "49.8 ns", "cudaMalloc + cudaFree", "69.4 us",
        1395.18, "alloc", "alloc_cuda"),
    row("D2H pageable 256 MiB, CopyBytes", "52.7 GB/s", "cudaMemcpy", "14.7 GB/s", 3.5875,
        "copy", "copy_cuda_single", 4.0, "no"),
    row("all_reduce, 64 MiB", "2.00 GB/s", "gloo called directly", "1.96 GB/s", 1.0215,
        "collectives", "collectives_cpu"),
    row("all_reduce, 64 MiB", "11.1 TB/s", "nccl called directly", "110 TB/s", 0.1014,
        "collectives", "collectives_cuda", 0.95, "no"),
]

ROWS_FILE_TEXT = """# rows of the table
gpu | device pool, 1 MiB, 1 thread | cudaMallocAsync + cudaFreeAsync

gpu | device pool, 1 MiB, 1 thread | cudaMalloc + cudaFree
gpu | D2H pageable 256 MiB, CopyBytes | cudaMemcpy
gpu | all_reduce, 64 MiB | gloo called directly
"""

EXPECTED_ROW = ("| device pool, 1 MiB, 1 thread | 49.8 ns | cudaMallocAsync + cudaFreeAsync: "
                "801 ns | 16.1x | >= 12x: met | [gpu](benchmarks/results/gpu/report.md"
                "#alloc-memory-pools-against-the-system-and-cuda-allocators-1-to-16-threads) |")


class Repository:
    """A temporary repository: rows file, results folders and README."""

    def __init__(self, readme_text: str) -> None:
        """Writes the rows file, the results folder `gpu` and a README of `readme_text`."""
        self.root = tempfile.mkdtemp(prefix="headline_test_")
        self.write_file(headline.ROWS_FILE, ROWS_FILE_TEXT)
        self.add_results("gpu", GPU_ROWS, GPU_REPORT,
                         {"devices": [{"name": "NVIDIA H200"}], "host": {"cpus": 16}},
                         date="2026-11-24T18:59:37Z", quick=False, repetitions=5)
        self.write_file(headline.README, readme_text)

    def add_results(self, folder: str, rows: list[dict], report: str, machine: dict,
                    date: str, quick: bool, repetitions: int) -> None:
        """Writes benchmarks/results/<folder>/ as `genesis bench` would."""
        base = f"{headline.RESULTS_DIR}/{folder}"
        self.write_file(f"{base}/summary.json", json.dumps(
            {"date": date, "quick": quick, "repetitions": repetitions, "rows": rows}))
        self.write_file(f"{base}/machine.json", json.dumps(machine))
        self.write_file(f"{base}/report.md", report)

    def path(self, relative: str) -> str:
        """The absolute path of `relative` in the repository."""
        return os.path.join(self.root, relative)

    def read_file(self, relative: str) -> str:
        """The text of `relative`."""
        with open(self.path(relative), encoding="utf-8") as f:
            return f.read()

    def write_file(self, relative: str, text: str) -> None:
        """Replaces `relative` with `text`, making its folder if needed."""
        os.makedirs(os.path.dirname(self.path(relative)), exist_ok=True)
        with open(self.path(relative), "w", encoding="utf-8") as f:
            f.write(text)

    def edit_summary(self, folder: str, edit: Callable[[dict], None]) -> None:
        """Applies `edit` to the parsed summary.json of `folder` and writes it back."""
        relative = f"{headline.RESULTS_DIR}/{folder}/summary.json"
        summary = json.loads(self.read_file(relative))
        edit(summary)
        self.write_file(relative, json.dumps(summary))

    def run(self, *args: str) -> tuple[int, str]:
        """Runs headline.main with --root set; returns the status and stdout + stderr."""
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(out):
            status = headline.main(["--root", self.root, *args])
        return status, out.getvalue()

    def close(self) -> None:
        """Removes the repository."""
        shutil.rmtree(self.root, ignore_errors=True)


class HeadlineTest(unittest.TestCase):

    def repo(self, readme_text: str = MINIMAL_README, written: bool = False) -> Repository:
        """A fresh repository, removed when the test ends; `written`: table written."""
        repository = Repository(readme_text)
        self.addCleanup(repository.close)
        if written:
            status, out = repository.run("--write")
            self.assertEqual(status, 0, out)
        return repository

    def test_write_fills_the_markers_and_keeps_the_rest(self) -> None:
        repo = self.repo()
        status, out = repo.run("--write")
        self.assertEqual(status, 0, out)
        self.assertIn("rewritten", out)
        text = repo.read_file("README.md")
        self.assertTrue(text.startswith("# Title\n\nBefore.\n\n" + headline.BEGIN + "\n"))
        self.assertTrue(text.endswith(headline.END + "\nAfter.\n"))
        self.assertIn(EXPECTED_ROW, text)
        self.assertIn("| 1395x |  | [gpu]", text)
        self.assertIn("| 3.59x | >= 4x: **missed** | [gpu]", text)
        self.assertIn("- [gpu](benchmarks/results/gpu/report.md): 1 x NVIDIA H200, 16 CPUs; "
                      "`genesis bench` of 2026-11-24, medians of 5 repetitions.", text)
        self.assertEqual(repo.run("--check")[0], 0)
        status, out = repo.run("--write")
        self.assertIn("unchanged", out)
        self.assertEqual(repo.read_file("README.md"), text)

    def test_rows_keep_the_order_of_the_rows_file(self) -> None:
        repo = self.repo(written=True)
        rows = [l for l in repo.read_file("README.md").splitlines()
                if l.startswith("| ") and "](benchmarks/results/" in l]
        self.assertEqual([r.split(" | ")[0] + " | " + r.split(" | ")[2].split(":")[0]
                          for r in rows],
                         ["| device pool, 1 MiB, 1 thread | cudaMallocAsync + cudaFreeAsync",
                          "| device pool, 1 MiB, 1 thread | cudaMalloc + cudaFree",
                          "| D2H pageable 256 MiB, CopyBytes | cudaMemcpy",
                          "| all_reduce, 64 MiB | gloo called directly"])

    def test_printing_writes_nothing(self) -> None:
        repo = self.repo()
        status, out = repo.run()
        self.assertEqual(status, 0, out)
        self.assertIn(EXPECTED_ROW, out)
        self.assertEqual(repo.read_file("README.md"), MINIMAL_README)

    def test_a_changed_figure_in_the_readme_is_named(self) -> None:
        repo = self.repo(written=True)
        text = repo.read_file("README.md")
        repo.write_file("README.md", text.replace("| 49.8 ns | cudaMallocAsync",
                                                  "| 12.0 ns | cudaMallocAsync", 1))
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("row 'device pool, 1 MiB, 1 thread' against "
                      "'cudaMallocAsync + cudaFreeAsync' (gpu) differs", out)
        self.assertIn("README:  | device pool, 1 MiB, 1 thread | 12.0 ns", out)
        self.assertIn("reports: | device pool, 1 MiB, 1 thread | 49.8 ns", out)
        self.assertIn("1 difference(s)", out)
        self.assertIn(headline.WRITE_COMMAND, out)

    def test_a_changed_report_is_named(self) -> None:
        repo = self.repo(written=True)

        def faster(summary: dict) -> None:
            for r in summary["rows"]:
                if r["label"] == "all_reduce, 64 MiB" and r["run"] == "collectives_cpu":
                    r["figure_text"] = "9.99 GB/s"
                    r["ratio"] = 5.0
        repo.edit_summary("gpu", faster)
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("row 'all_reduce, 64 MiB' against 'gloo called directly' (gpu) "
                      "differs", out)
        self.assertIn("9.99 GB/s | gloo called directly: 1.96 GB/s | 5.00x", out)
        self.assertIn("1 difference(s)", out)

    def test_a_row_deleted_from_the_readme_is_named(self) -> None:
        repo = self.repo(written=True)
        lines = repo.read_file("README.md").split("\n")
        lines = [l for l in lines if not l.startswith("| D2H pageable 256 MiB, CopyBytes |")]
        repo.write_file("README.md", "\n".join(lines))
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("row 'D2H pageable 256 MiB, CopyBytes' against 'cudaMemcpy' (gpu) is "
                      "missing from the README", out)

    def test_a_row_added_by_hand_is_named(self) -> None:
        repo = self.repo(written=True)
        text = repo.read_file("README.md")
        extra = ("| made up | 1 ns | nothing: 2 ns | 2.00x |  | "
                 "[gpu](benchmarks/results/gpu/report.md) |\n")
        repo.write_file("README.md", text.replace(headline.END, extra + headline.END))
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("row 'made up' against 'nothing' (gpu) is in the README but not", out)

    def test_rows_in_another_order_are_reported(self) -> None:
        repo = self.repo(written=True)
        lines = ROWS_FILE_TEXT.splitlines()
        lines[1], lines[3] = lines[3], lines[1]
        repo.write_file(headline.ROWS_FILE, "\n".join(lines) + "\n")
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("the rows are in another order", out)

    def test_an_edited_line_around_the_table_is_reported(self) -> None:
        repo = self.repo(written=True)
        text = repo.read_file("README.md")
        repo.write_file("README.md", text.replace("medians of 5 repetitions",
                                                  "medians of 9 repetitions"))
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("line missing from the README: '- [gpu]", out)
        self.assertIn("line in the README that the reports do not give: '- [gpu]", out)

    def test_missing_markers_are_an_error(self) -> None:
        repo = self.repo("# No table here\n")
        for mode in ("--check", "--write"):
            status, out = repo.run(mode)
            self.assertEqual(status, 1)
            self.assertIn("must hold one line '<!-- headline:begin -->'", out)
        self.assertEqual(repo.read_file("README.md"), "# No table here\n")

    def test_a_row_not_in_the_report_is_an_error_naming_it(self) -> None:
        repo = self.repo()
        repo.write_file(headline.ROWS_FILE,
                        "# rows\ngpu | device pool, 1 MiB, 1 thread | malloc + free\n")
        status, out = repo.run("--write")
        self.assertEqual(status, 1)
        self.assertIn("tools/readme/headline_rows.txt:2: gpu: 'device pool, 1 MiB, "
                      "1 thread' against 'malloc + free' is not in "
                      "benchmarks/results/gpu/summary.json", out)
        self.assertIn("that label's baselines there: cudaMalloc + cudaFree, "
                      "cudaMallocAsync + cudaFreeAsync", out)
        self.assertEqual(repo.read_file("README.md"), MINIMAL_README)

    def test_an_ambiguous_row_asks_for_its_run(self) -> None:
        repo = self.repo()

        def duplicate(summary: dict) -> None:
            copy = dict(summary["rows"][0])
            copy["run"] = "alloc_other"
            copy["figure_text"] = "77.0 ns"
            summary["rows"].append(copy)
        repo.edit_summary("gpu", duplicate)
        spec = "gpu | device pool, 1 MiB, 1 thread | cudaMallocAsync + cudaFreeAsync"
        repo.write_file(headline.ROWS_FILE, spec + "\n")
        status, out = repo.run("--write")
        self.assertEqual(status, 1)
        self.assertIn("matches 2 rows", out)
        self.assertIn("runs alloc_cuda, alloc_other", out)
        self.assertIn("add the run as a fourth field", out)
        repo.write_file(headline.ROWS_FILE, spec + " | alloc_other\n")
        self.assertEqual(repo.run("--write")[0], 0)
        self.assertIn("| 77.0 ns |", repo.read_file("README.md"))

    def test_a_missing_results_folder_is_an_error(self) -> None:
        repo = self.repo()
        repo.write_file(headline.ROWS_FILE, "nowhere | a | b\n")
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("cannot read", out)
        self.assertIn("benchmarks/results/nowhere/summary.json", out)

    def test_a_malformed_rows_line_is_an_error(self) -> None:
        repo = self.repo()
        repo.write_file(headline.ROWS_FILE, "gpu | only a label\n")
        status, out = repo.run("--check")
        self.assertEqual(status, 1)
        self.assertIn("headline_rows.txt:1: expected 'folder | label | baseline [| run]'", out)

    def test_an_empty_rows_file_is_an_error(self) -> None:
        repo = self.repo()
        repo.write_file(headline.ROWS_FILE, "# nothing yet\n")
        status, out = repo.run("--write")
        self.assertEqual(status, 1)
        self.assertIn("lists no rows", out)

    def test_several_results_folders(self) -> None:
        repo = self.repo()
        repo.add_results(
            "cpu_build",
            [row("host pool, 512 B, 1 thread", "27.0 ns", "malloc + free", "12.0 ns", 0.444,
                 "alloc", "alloc_cpu")],
            "# genesis bench\n\n## alloc: pools\n", {"devices": [], "host": {"cpus": 2}},
            date="2027-01-02T03:04:05Z", quick=True, repetitions=3)
        repo.write_file(headline.ROWS_FILE, ROWS_FILE_TEXT.replace(
            "gpu | D2H", "cpu_build | host pool, 512 B, 1 thread | malloc + free\ngpu | D2H"))
        status, out = repo.run("--write")
        self.assertEqual(status, 0, out)
        text = repo.read_file("README.md")
        self.assertIn("| host pool, 512 B, 1 thread | 27.0 ns | malloc + free: 12.0 ns | "
                      "0.44x |  | [cpu_build](benchmarks/results/cpu_build/report.md"
                      "#alloc-pools) |", text)
        reports = [l for l in text.splitlines() if l.startswith("- [")]
        self.assertEqual(reports, [
            "- [gpu](benchmarks/results/gpu/report.md): 1 x NVIDIA H200, 16 CPUs; "
            "`genesis bench` of 2026-11-24, medians of 5 repetitions.",
            "- [cpu_build](benchmarks/results/cpu_build/report.md): no GPU, 2 CPUs; "
            "`genesis bench --quick` of 2027-01-02, medians of 3 repetitions.",
        ])
        self.assertEqual(repo.run("--check")[0], 0)

    def test_formatting_follows_the_report(self) -> None:
        self.assertEqual(headline.format_ratio(1395.179), "1395x")
        self.assertEqual(headline.format_ratio(16.094), "16.1x")
        self.assertEqual(headline.format_ratio(0.9488), "0.95x")
        self.assertEqual(headline.format_ratio(0.0), "-")
        self.assertEqual(headline.format_target(0.85, "yes"), ">= 0.85x: met")
        self.assertEqual(headline.format_target(12.0, "no"), ">= 12x: **missed**")
        self.assertEqual(headline.format_target(0.0, ""), "")
        self.assertEqual(headline.format_target(0.0, "no", "<= +1.00 us"),
                         "<= +1.00 us: **missed**")
        self.assertEqual(headline.cell("a | b"), "a \\| b")
        self.assertEqual(headline.slug("copy: memcpy / cudaMemcpy(Async)"),
                         "copy-memcpy--cudamemcpyasync")


if __name__ == "__main__":
    unittest.main()
