#!/usr/bin/env python3
"""PyTorch's CPU counterparts of genesis bench's CPU rows, as baselines.

Measures, with the PyTorch of the python3 that runs it (Debian's python3-torch on the
build machine, the GPU machines' torch 2.11):

  BM_TorchEmpty/<bytes>                torch.empty of a uint8 tensor and its release
                                       (from Python: the interpreter's call overhead is
                                       part of the time, as it is for any PyTorch user)
  BM_TorchTo/<from>_to_<to>            Tensor.to(dtype) of a 4096 x 4096 tensor between
                                       float32 and bfloat16 / float16
  BM_TorchContiguous                   Tensor.t().contiguous() of a 4096 x 4096 float32

Each with PyTorch's own threads (threads:default, what a user gets) and with one thread
(threads:1, the counterpart of genesis's single-threaded loops). Rates count bytes read
plus bytes written, as storage_benchmark does.

It takes Google Benchmark's flags (--benchmark_out, --benchmark_repetitions,
--benchmark_min_time, --benchmark_filter; others are accepted and ignored) and writes
Google Benchmark's JSON, so that `genesis bench` reads it like its other runs. Without
PyTorch every benchmark is reported as failed with "unavailable: ..." and the script
exits 0: PyTorch is an optional baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from typing import Callable, Optional

EDGE = 4096
EMPTY_SIZES = (8, 512, 64 << 10, 1 << 20, 32 << 20, 64 << 20)
CONVERSIONS = (("float32", "bfloat16"), ("bfloat16", "float32"), ("float32", "float16"),
               ("float16", "float32"))
ITEM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
THREADS = ("default", "1")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Google Benchmark's flags that matter here; the rest are ignored."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--benchmark_out", default="")
    p.add_argument("--benchmark_repetitions", type=int, default=3)
    p.add_argument("--benchmark_min_time", type=str, default="0.2")
    p.add_argument("--benchmark_filter", default="")
    args, _ = p.parse_known_args(argv)
    args.benchmark_min_time = float(args.benchmark_min_time.rstrip("s"))
    return args


class Case:
    """One benchmark: `make()` builds its state once and returns the timed body; `traffic`
    is the bytes one call reads plus writes (0: report time only)."""

    def __init__(self, name: str, make: Callable[[], Callable[[], object]], traffic: int,
                 threads: str) -> None:
        self.name = f"{name}/real_time/threads:{threads}"
        self.make = make
        self.traffic = traffic
        self.threads = threads


def cases(torch) -> list[Case]:
    """Every benchmark; `torch` is used only when a case is made, so that without
    PyTorch (None) the cases still name themselves."""
    out = []
    for threads in THREADS:
        for size in EMPTY_SIZES:
            def make(size=size):
                return lambda: torch.empty(size, dtype=torch.uint8)
            out.append(Case(f"BM_TorchEmpty/{size}", make, 0, threads))
        for src, dst in CONVERSIONS:
            def make(src=src, dst=dst):
                x = torch.rand(EDGE, EDGE).to(getattr(torch, src))
                return lambda: x.to(getattr(torch, dst))
            traffic = EDGE * EDGE * (ITEM_BYTES[src] + ITEM_BYTES[dst])
            out.append(Case(f"BM_TorchTo/{src}_to_{dst}", make, traffic, threads))

        def make_contiguous():
            x = torch.rand(EDGE, EDGE)
            return lambda: x.t().contiguous()
        out.append(Case("BM_TorchContiguous", make_contiguous,
                        2 * EDGE * EDGE * ITEM_BYTES["float32"], threads))
    return out


def timed_runs(body: Callable[[], object], min_time: float, repetitions: int) -> list[tuple[float, int]]:
    """(seconds per call, calls) of each repetition, each running at least `min_time`."""
    body()
    # Calls per repetition: grown until one batch takes a tenth of min_time.
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            body()
        took = time.perf_counter() - start
        if took >= min_time / 10 or calls >= 1 << 24:
            break
        calls *= 10
    per_rep = max(1, int(calls * min_time / max(took, 1e-9)))
    runs = []
    for _ in range(repetitions):
        start = time.perf_counter()
        for _ in range(per_rep):
            body()
        runs.append(((time.perf_counter() - start) / per_rep, per_rep))
    return runs


def entries(case: Case, runs: list[tuple[float, int]]) -> list[dict]:
    """Google Benchmark's iteration and median entries for `case`."""
    base = {"run_name": case.name, "threads": 1, "time_unit": "ns",
            "repetitions": len(runs)}
    out = []
    for i, (seconds, calls) in enumerate(runs):
        e = dict(base, name=case.name, run_type="iteration", repetition_index=i,
                 iterations=calls, real_time=seconds * 1e9, cpu_time=seconds * 1e9)
        if case.traffic:
            e["bytes_per_second"] = case.traffic / seconds
        out.append(e)
    median = statistics.median(s for s, _ in runs)
    m = dict(base, name=case.name + "_median", run_type="aggregate", aggregate_name="median",
             iterations=len(runs), real_time=median * 1e9, cpu_time=median * 1e9)
    if case.traffic:
        m["bytes_per_second"] = case.traffic / median
    out.append(m)
    return out


def failed(name: str, message: str) -> dict:
    return {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
            "repetition_index": 0, "threads": 1, "iterations": 0, "real_time": 0,
            "cpu_time": 0, "time_unit": "ns", "error_occurred": True,
            "error_message": message}


def run(args: argparse.Namespace) -> dict:
    pattern = re.compile(args.benchmark_filter) if args.benchmark_filter else None
    context = {"executable": sys.executable, "library_build_type": "python",
               "num_cpus": os.cpu_count()}
    try:
        import torch  # noqa: PLC0415 (optional: reported as unavailable)
    except ImportError as e:
        # PATH's python3 (a virtual environment, pyenv) may lack the PyTorch that the
        # system's has (Debian's python3-torch): try that one once.
        system = "/usr/bin/python3"
        if (os.path.realpath(sys.executable) != os.path.realpath(system) and
                os.access(system, os.X_OK) and not os.environ.get("GENESIS_TORCH_CPU_RETRY")):
            os.environ["GENESIS_TORCH_CPU_RETRY"] = "1"
            os.execv(system, [system, os.path.abspath(__file__)] + sys.argv[1:])
        why = f"unavailable: no PyTorch for {sys.executable} ({e})"
        names = [c.name for c in cases(None)]
        return {"context": context,
                "benchmarks": [failed(n, why) for n in names if not pattern or pattern.search(n)]}
    context["torch_version"] = torch.__version__
    default_threads = torch.get_num_threads()
    context["torch_threads"] = default_threads
    benchmarks = []
    for case in cases(torch):
        if pattern and not pattern.search(case.name):
            continue
        torch.set_num_threads(default_threads if case.threads == "default" else 1)
        try:
            body = case.make()
            benchmarks.extend(entries(case, timed_runs(body, args.benchmark_min_time,
                                                       args.benchmark_repetitions)))
        except (RuntimeError, MemoryError) as e:
            benchmarks.append(failed(case.name, f"torch: {e}"))
    torch.set_num_threads(default_threads)
    return {"context": context, "benchmarks": benchmarks}


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    result = run(args)
    text = json.dumps(result, indent=1) + "\n"
    if args.benchmark_out:
        with open(args.benchmark_out, "w", encoding="utf-8") as f:
            f.write(text)
    for b in result["benchmarks"]:
        if b.get("error_occurred"):
            print(f"{b['name']}: {b['error_message']}")
        elif b.get("aggregate_name") == "median":
            rate = b.get("bytes_per_second")
            extra = f"  {rate / 1e9:.2f} GB/s" if rate else ""
            print(f"{b['name']}  {b['real_time']:.1f} ns{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
