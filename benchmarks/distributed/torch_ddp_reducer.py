#!/usr/bin/env python3
"""PyTorch DDP against the synthetic backward of reducer_benchmark: the baseline of
genesis's Reducer, on a model of the same gradient sizes.

    torchrun --nproc_per_node=2 benchmarks/distributed/torch_ddp_reducer.py --layers=50

The model has --layers parameters of float32, sized as reducer_benchmark sizes its
gradients (the same draws: log-uniform from 4 KiB to 4 MiB with std::mt19937(7), scaled
to --total). Backward runs one kernel per layer that keeps every SM busy for
--backward_us / layers (the same kernel as reducer_benchmark's, compiled with CuPy),
last layer first, and hands the layer's gradient to autograd, which DDP all_reduces in
25 MiB buckets (the first 1 MiB) while backward goes on. Timed, as medians of --iters
steps after --warmup, each from a barrier to torch.cuda.synchronize():
    backward        the model's backward without DDP;
    flat a_r        one all_reduce of all the gradients as one buffer;
    ddp             backward under DDP, gradients copied into its buckets;
    ddp views       the same with gradient_as_bucket_view=True.
Exposed communication is a step's time less the backward's, as a fraction of the flat
all_reduce (DDP's own goal is 10%). Python's autograd and the kernel's launch cost the
host tens of microseconds a layer: where backward takes much longer than
--backward_us, the host is the limit and the GPU idles between layers (comparisons then
need longer layers: fewer --layers or a larger --backward_us).
"""
import argparse
import math
import os
import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

KERNEL = r"""
extern "C" __global__ void layer(long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < (unsigned long long)nanoseconds);
}
"""


class MT19937:
    """std::mt19937, so that the sizes are reducer_benchmark's."""

    def __init__(self, seed: int) -> None:
        self.state = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            prev = self.state[-1]
            self.state.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
        self.index = 624

    def __call__(self) -> int:
        if self.index >= 624:
            for i in range(624):
                y = (self.state[i] & 0x80000000) | (self.state[(i + 1) % 624] & 0x7FFFFFFF)
                self.state[i] = self.state[(i + 397) % 624] ^ (y >> 1) ^ (
                    0x9908B0DF if y & 1 else 0)
            self.index = 0
        y = self.state[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)


def uniform(gen: MT19937, low: float, high: float) -> float:
    """libstdc++'s uniform_real_distribution<double> (generate_canonical, two draws)."""
    canonical = (gen() + gen() * 4294967296.0) / 18446744073709551616.0
    if canonical >= 1.0:
        canonical = math.nextafter(1.0, 0.0)
    return canonical * (high - low) + low


def gradient_counts(layers: int, total: int) -> list[int]:
    """Elements of each gradient, in the order backward produces them."""
    gen = MT19937(7)
    weights = [math.exp(uniform(gen, math.log(4096.0), math.log(4194304.0)))
               for _ in range(layers)]
    s = sum(weights)
    return [max(1, int(w / s * total / 4)) for w in weights]


def parse_size(text: str) -> int:
    units = {"": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
    t = text.strip().lower()
    digits = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(float(digits) * units[t[len(digits):]])


class Model(torch.nn.Module):
    """Layers whose backward is a timed kernel and whose gradient is preallocated."""

    def __init__(self, counts: list[int], layer_ns: int,
                 launch: Callable[[int], None]) -> None:
        super().__init__()
        # Parameter j is used by layer j; backward reaches the last layer first, so the
        # last parameter holds the first gradient.
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.ones(c, device="cuda")) for c in reversed(counts)])
        self.grads = [torch.ones_like(w) for w in self.weights]
        layer_ns_ = layer_ns

        class Layer(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w, index):
                ctx.index = index
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                launch(layer_ns_)
                return grad, self.grads[ctx.index], None

        self.layer = Layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for j, w in enumerate(self.weights):
            x = self.layer.apply(x, w, j)
        return x.sum()


def median_step(step: Callable[[], None], iters: int, warmup: int) -> float:
    times = []
    for i in range(warmup + iters):
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="50,100,200")
    parser.add_argument("--total", default="100MiB")
    parser.add_argument("--backward_us", type=int, default=2000)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    import cupy  # The layer kernel; CuPy is on the GPU machines.

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    kernel = cupy.RawKernel(KERNEL, "layer")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    total = parse_size(args.total)

    # Backward runs on the current stream of the device (autograd's, for a model whose
    # forward ran there).
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def launch(nanoseconds):
        kernel((sms,), (256,), (cupy.int64(nanoseconds),), stream=stream)

    if rank == 0:
        print(f"# torch DDP with a synthetic backward: {dist.get_world_size()} ranks, "
              f"{args.total} of float32 gradients, {args.backward_us} us of backward "
              f"compute, 25 MiB buckets (first 1 MiB); torch {torch.__version__}; "
              f"times in us")
        print(f"{'layers':<7} {'gradients':<9} {'backward':>10} {'flat a_r':>10} "
              f"{'ddp':>10} {'exposed':>10} {'of flat':>9}")
    for spec in args.layers.split(","):
        layers = int(spec)
        counts = gradient_counts(layers, total)
        layer_ns = args.backward_us * 1000 // layers
        x = torch.ones(1, device="cuda", requires_grad=True)
        model = Model(counts, layer_ns, launch)

        def plain():
            for w in model.weights:
                w.grad = None
            model(x).backward()

        backward = median_step(plain, args.iters, args.warmup)
        flat = torch.ones(sum(counts), device="cuda")
        all_reduce = median_step(lambda: dist.all_reduce(flat), args.iters, args.warmup)
        for name, views in (("separate", False), ("views", True)):
            ddp = torch.nn.parallel.DistributedDataParallel(
                Model(counts, layer_ns, launch), gradient_as_bucket_view=views,
                bucket_cap_mb=25)

            def step():
                for w in ddp.module.weights:
                    w.grad = None
                ddp(x).backward()

            seconds = median_step(step, args.iters, args.warmup)
            if rank == 0:
                print(f"{layers:<7} {name:<9} {backward * 1e6:>10.1f} {all_reduce * 1e6:>10.1f} "
                      f"{seconds * 1e6:>10.1f} {(seconds - backward) * 1e6:>10.1f} "
                      f"{(seconds - backward) / all_reduce:>9.3f}")
            del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
