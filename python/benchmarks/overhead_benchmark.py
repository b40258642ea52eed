#!/usr/bin/env python3
"""What genesis costs per call from Python, beside PyTorch, CuPy and NumPy in one run.

    PYTHONPATH=<dir holding genesis/> python3 overhead_benchmark.py [--device=cuda] [--json=F]

Rows (microseconds per call, median of --repeat runs of --number calls each):
  alloc+free 256 B / 1 MiB: a cached allocation and its free (genesis.empty; torch.empty;
      cupy.empty from its memory pool; numpy.empty on the CPU);
  memory_stats(): genesis's Device.memory_stats() and torch.cuda.memory_stats();
  dlpack round trip: genesis -> torch -> genesis (torch.from_dlpack, genesis.from_dlpack),
      checked to keep the data pointer (no copy), each half alone, and the same exchange
      between libraries that are not genesis (torch -> torch, cupy -> torch -> cupy).
Libraries that are not installed are left out of the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from typing import Callable, Dict, List, Optional

import genesis


def median_us(fn: Callable[[], object], number: int, repeat: int) -> float:
    fn()  # Warm the caches and pools.
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if genesis.cuda.is_available() else "cpu")
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    dev, n, r = args.device, args.number, args.repeat
    cuda = dev.startswith("cuda")
    torch, cupy, numpy = optional("torch"), optional("cupy"), optional("numpy")
    rows: List[Dict[str, object]] = []

    def row(what: str, library: str, fn: Callable[[], object]) -> None:
        us = median_us(fn, n, r)
        rows.append({"row": what, "library": library, "device": dev, "us": round(us, 3)})
        print(f"{what:28s} {library:10s} {us:9.3f} us", flush=True)

    print(f"# genesis {genesis.__version__}, Python {sys.version.split()[0]}, device {dev}")
    for label, numel in [("alloc+free 256 B", 64), ("alloc+free 1 MiB", 1 << 18)]:
        row(label, "genesis", lambda: genesis.empty(numel, device=dev))
        if torch is not None:
            row(label, "torch", lambda: torch.empty(numel, device=dev))
        if cuda and cupy is not None:
            row(label, "cupy", lambda: cupy.empty(numel, dtype=cupy.float32))
        if not cuda and numpy is not None:
            row(label, "numpy", lambda: numpy.empty(numel, dtype=numpy.float32))
    device = genesis.device(dev)
    row("memory_stats()", "genesis", device.memory_stats)
    if cuda and torch is not None:
        row("memory_stats()", "torch", torch.cuda.memory_stats)
    if torch is not None:
        s = genesis.empty(1024, device=dev)
        back = genesis.from_dlpack(torch.from_dlpack(s))
        if back.data_ptr != s.data_ptr:
            raise SystemExit("dlpack round trip copied the data")
        row("dlpack genesis>torch>genesis", "genesis",
            lambda: genesis.from_dlpack(torch.from_dlpack(s)))
        t = torch.from_dlpack(s)
        row("dlpack genesis>torch", "genesis", lambda: torch.from_dlpack(s))
        row("dlpack torch>genesis", "genesis", lambda: genesis.from_dlpack(t))
        u = torch.empty(256, device=dev)
        row("dlpack torch>torch", "torch", lambda: torch.from_dlpack(u))
        if cuda and cupy is not None:
            c = cupy.empty(256, dtype=cupy.float32)
            row("dlpack cupy>torch>cupy", "cupy",
                lambda: cupy.from_dlpack(torch.from_dlpack(c)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
