#!/usr/bin/env python3
"""What one tensor's allocation and free cost through PyTorch's allocators: its native
caching allocator, the same with expandable segments, and genesis through the pluggable
allocator path (genesis.torch.use_as_allocator), each in a fresh process.

    PYTHONPATH=<dir holding genesis/> python3 torch_allocation.py [--number=20000]

Prints microseconds per torch.empty + free on cuda:0 (median of 7 runs), for a small
and a large tensor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit


def worker(allocator: str, number: int) -> dict:
    if allocator == "torch_expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    if allocator == "genesis":
        import genesis.torch as gt
        gt.use_as_allocator()
    result = {"allocator": allocator}
    for name, numel in [("256 B", 64), ("4 MiB", 1 << 20)]:
        fn = lambda: torch.empty(numel, device="cuda")  # noqa: E731
        fn()
        times = timeit.repeat(fn, number=number, repeat=7)
        result[name] = statistics.median(times) / number * 1e6
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.number)), flush=True)
        return 0
    print(f"{'allocator':18s} {'256 B us':>9s} {'4 MiB us':>9s}", flush=True)
    for allocator in ["torch", "torch_expandable", "genesis"]:
        done = subprocess.run([sys.executable, __file__, f"--worker={allocator}",
                               f"--number={args.number}"], capture_output=True, text=True)
        lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
        if not lines:
            print(f"{allocator:18s} failed: {done.stderr.strip()[-300:]}", flush=True)
            continue
        r = json.loads(lines[-1])
        print(f"{allocator:18s} {r['256 B']:9.3f} {r['4 MiB']:9.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
