#!/usr/bin/env python3
"""Training memory and speed under three CUDA allocators: PyTorch's default, PyTorch's
expandable segments, and genesis (genesis.torch.use_as_allocator).

    PYTHONPATH=<dir holding genesis/> python3 torch_training.py [--steps=50] [--json=F]

Models are built from their configurations (no downloads), with random data, AdamW and
bf16 autocast: GPT-2 small (transformers) at batch 8 x 1024 tokens, the same with a
sequence length drawn from 64-1024 at every step (the same draws for every allocator),
and ResNet-50 (torchvision) at batch 64 x 224 x 224. Each (model, allocator) pair runs in
a fresh process, since the allocator is chosen before CUDA starts. Under torchrun, a
worker (--worker MODEL ALLOCATOR) trains data-parallel with DDP, one GPU per rank:
    torchrun --nproc_per_node=2 torch_training.py --worker gpt2 genesis
Printed per run: peak
reserved and peak allocated (each allocator's own count), their ratio, the most memory
the driver reported in use (cudaMemGetInfo, sampled after every step: the common
yardstick), and the median step time after --warmup steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = ["gpt2", "gpt2_random_length", "resnet50"]
ALLOCATORS = ["torch", "torch_expandable", "genesis"]


def worker(model: str, allocator: str, steps: int, warmup: int, genesis_conf: str) -> dict:
    if allocator == "torch_expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import random
    import torch
    if allocator == "genesis":
        import genesis.torch as gt
        gt.use_as_allocator(conf=genesis_conf or None)
    # Under torchrun: data-parallel (DDP over NCCL), one GPU per rank.
    distributed = "LOCAL_RANK" in os.environ
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{rank}")
    torch.cuda.set_device(device)
    if distributed:
        torch.distributed.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    draws = random.Random(0)
    if model.startswith("gpt2"):
        import transformers
        net = transformers.GPT2LMHeadModel(transformers.GPT2Config()).to(device)

        def batch():
            length = draws.randint(64, 1024) if model == "gpt2_random_length" else 1024
            ids = torch.randint(0, 50257, (8, length), device=device)
            return lambda: net(input_ids=ids, labels=ids).loss
    else:
        import torchvision
        net = torchvision.models.resnet50().to(device)
        loss_fn = torch.nn.CrossEntropyLoss()

        def batch():
            x = torch.randn(64, 3, 224, 224, device=device)
            y = torch.randint(0, 1000, (64,), device=device)
            return lambda: loss_fn(net(x), y)
    if distributed:
        net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank])
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    times, used = [], 0
    for step in range(warmup + steps):
        forward = batch()
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - start)
        free, total = torch.cuda.mem_get_info()
        used = max(used, total - free)
        del loss, forward
    if allocator == "genesis":
        reserved, allocated = gt.max_memory_reserved(rank), gt.max_memory_allocated(rank)
    else:
        reserved, allocated = torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()
    if distributed:
        torch.distributed.destroy_process_group()
    return {"model": model, "allocator": allocator, "steps": steps,
            "ranks": int(os.environ.get("WORLD_SIZE", "1")), "rank": rank,
            "genesis_conf": genesis_conf if allocator == "genesis" else "",
            "peak_reserved": reserved, "peak_allocated": allocated,
            "ratio": reserved / allocated, "max_used": used,
            "median_step_ms": statistics.median(times) * 1e3,
            "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--allocators", default=",".join(ALLOCATORS))
    parser.add_argument("--genesis_conf", default="",
                        help="GENESIS_ALLOC_CONF-style settings of genesis's pools")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "ALLOCATOR"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.steps, args.warmup, args.genesis_conf)),
              flush=True)
        return 0
    rows = []
    gib = float(1 << 30)
    print(f"{'model':20s} {'allocator':17s} {'reserved GiB':>12s} {'allocated GiB':>13s} "
          f"{'ratio':>6s} {'used GiB':>9s} {'step ms':>8s}", flush=True)
    for model in args.models.split(","):
        for allocator in args.allocators.split(","):
            done = subprocess.run(
                [sys.executable, __file__, "--worker", model, allocator,
                 f"--steps={args.steps}", f"--warmup={args.warmup}",
                 f"--genesis_conf={args.genesis_conf}"],
                capture_output=True, text=True)
            lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
            if done.returncode != 0 or not lines:
                print(f"{model:20s} {allocator:17s} failed: "
                      f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(lines[-1])
            rows.append(r)
            print(f"{model:20s} {allocator:17s} {r['peak_reserved'] / gib:12.2f} "
                  f"{r['peak_allocated'] / gib:13.2f} {r['ratio']:6.3f} "
                  f"{r['max_used'] / gib:9.2f} {r['median_step_ms']:8.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
