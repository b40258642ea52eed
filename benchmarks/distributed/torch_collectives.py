#!/usr/bin/env python3
"""torch.distributed's collectives in the table collectives_benchmark prints: the
baseline of genesis's process groups, measured on the same machine and sizes.

    torchrun --nproc_per_node=2 benchmarks/distributed/torch_collectives.py --backend=nccl
    torchrun --nproc_per_node=4 benchmarks/distributed/torch_collectives.py --backend=gloo \
        --max_bytes=64MiB

Like nccl-tests: `iters` back-to-back operations after `warmup` and a barrier, timed
on the host around a final synchronisation; size is the whole buffer for all_gather
and reduce_scatter; busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
reduce_scatter, all_to_all), 1 (broadcast, reduce, send_recv). --json writes Google
Benchmark's layout (names "<op>/torch/<bytes>").
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

OPS = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,send_recv"


def parse_size(text):
    units = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
             "g": 1 << 30, "gib": 1 << 30}
    t = text.strip().lower()
    digits = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(float(digits) * units[t[len(digits):]])


def bus_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def issue(op, a, b, count, rank, n):
    x, y = a[:count], b[:count]
    if op == "all_reduce":
        dist.all_reduce(x)
    elif op == "broadcast":
        dist.broadcast(x, 0)
    elif op == "reduce":
        dist.reduce(x, 0)
    elif op == "all_gather":
        dist.all_gather_into_tensor(y, a[: count // n])
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(b[: count // n], x)
    elif op == "all_to_all":
        dist.all_to_all_single(y, x)
    elif op == "send_recv":
        ops = [dist.P2POp(dist.isend, x, (rank + 1) % n),
               dist.P2POp(dist.irecv, y, (rank - 1) % n)]
        for r in dist.batch_isend_irecv(ops):
            r.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="nccl")
    p.add_argument("--ops", default=OPS)
    p.add_argument("--min_bytes", default="8")
    p.add_argument("--max_bytes", default="1GiB")
    p.add_argument("--step_factor", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json", default="")
    args = p.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    dist.init_process_group(args.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) \
        if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    max_bytes = parse_size(args.max_bytes)
    a = torch.ones(max_bytes // 4, dtype=torch.float32, device=device)
    b = torch.zeros(max_bytes // 4, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    if rank == 0:
        print(f"# torch.distributed {torch.__version__} {args.backend}, {n} ranks")
        print(f"{'op':<15} {'size(B)':>12} {'time(us)':>10} {'algbw':>9} {'busbw':>9}")
    for op in args.ops.split(","):
        size = max(parse_size(args.min_bytes), 4)
        while size <= max_bytes:
            unit = 4 * (n if op in ("all_gather", "reduce_scatter", "all_to_all") else 1)
            nbytes = size // unit * unit
            if nbytes:
                count = nbytes // 4
                for _ in range(args.warmup):
                    issue(op, a, b, count, rank, n)
                sync()
                dist.barrier()
                sync()
                start = time.perf_counter()
                for _ in range(args.iters):
                    issue(op, a, b, count, rank, n)
                sync()
                seconds = (time.perf_counter() - start) / args.iters
                algbw = nbytes / seconds / 1e9
                busbw = algbw * bus_factor(op, n)
                rows.append({"name": f"{op}/torch/{nbytes}", "run_name": f"{op}/torch/{nbytes}",
                             "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
                             "threads": 1, "iterations": args.iters,
                             "real_time": seconds * 1e6, "cpu_time": seconds * 1e6,
                             "time_unit": "us", "bytes_per_second": algbw * 1e9,
                             "algbw_GBps": algbw, "busbw_GBps": busbw})
                if rank == 0:
                    print(f"{op:<15} {nbytes:>12} {seconds * 1e6:>10.2f} {algbw:>9.2f} {busbw:>9.2f}",
                          flush=True)
            size *= args.step_factor
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"context": {"executable": "torch_collectives.py", "ranks": n,
                                   "backend": args.backend, "torch": torch.__version__},
                       "benchmarks": rows}, f, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
