#!/usr/bin/env python3
"""Records PyTorch allocation traces of a few training steps, for `genesis replay`.

Runs training steps of a model on a GPU with AdamW and bf16 autocast, with a batch size
that varies between steps (as data loaders with variable-length batches make it), under
torch.cuda.memory._record_memory_history, and writes the allocator's device trace as
text, one event a line: `<action> <address> <size> <stream>` (alloc, free_requested,
free_completed), gzip-compressed, with a `# step <n>` line where training step n
(1, 2, ...) begins; events before the first marker are the model's setup. Weights are
randomly initialised: nothing is downloaded. Also prints PyTorch's own peak reserved / peak allocated for the same steps.

  python3 tools/record_torch_trace.py --model gpt2 --steps 8 --out traces/gpt2_small_train.trace.gz
  python3 tools/record_torch_trace.py --model resnet50 --steps 8 --out traces/resnet50_train.trace.gz
"""
import argparse
import gzip
import sys

import torch

ACTIONS = ("alloc", "free_requested", "free_completed")


def gpt2_step_fn(device):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).to(device)  # GPT-2 small, random weights
    vocab = model.config.vocab_size

    def batch(step):
        batch_size = (4, 6, 8)[step % 3]
        seq = (512, 384, 448)[step % 3]
        ids = torch.randint(0, vocab, (batch_size, seq), device=device)
        return ids, ids

    def loss_fn(inputs, labels):
        return model(input_ids=inputs, labels=labels).loss

    return model, batch, loss_fn


def resnet50_step_fn(device):
    import torchvision

    model = torchvision.models.resnet50(weights=None).to(device)

    def batch(step):
        batch_size = (32, 48, 64)[step % 3]
        x = torch.randn(batch_size, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (batch_size,), device=device)
        return x, y

    def loss_fn(inputs, labels):
        return torch.nn.functional.cross_entropy(model(inputs), labels)

    return model, batch, loss_fn


MODELS = {"gpt2": gpt2_step_fn, "resnet50": resnet50_step_fn}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--out", required=True, help="output path (.gz is compressed)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("record_torch_trace: no CUDA device")
    device = torch.device("cuda:0")
    torch.manual_seed(0)

    torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    model, batch, loss_fn = MODELS[args.model](device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    torch.cuda.reset_peak_memory_stats()
    # Where each step's events begin in the device trace (device 0's list).
    step_starts = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        step_starts.append(len(torch.cuda.memory._snapshot()["device_traces"][0]))
        inputs, labels = batch(step)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(inputs, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)

    if any(snapshot["device_traces"][1:]):
        sys.exit("record_torch_trace: events on devices other than cuda:0")
    # (step, event) for the events replay reads; steps are 1-based, 0 is the setup.
    events = []
    step = 0
    for i, e in enumerate(snapshot["device_traces"][0]):
        while step < len(step_starts) and i >= step_starts[step]:
            step += 1
        if e["action"] in ACTIONS:
            events.append((step, e))
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(args.out, "wt") as f:
        f.write(f"# {args.model}, {args.steps} training steps, AdamW, bf16 autocast, "
                f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}\n")
        f.write(f"# torch peak allocated {torch.cuda.max_memory_allocated()} "
                f"peak reserved {torch.cuda.max_memory_reserved()}\n")
        written_step = 0
        for step, e in events:
            if step != written_step:
                f.write(f"# step {step}\n")
                written_step = step
            f.write(f"{e['action']} {e['addr']:#x} {e['size']} {e['stream']}\n")
    ratio = torch.cuda.max_memory_reserved() / max(1, torch.cuda.max_memory_allocated())
    print(f"{args.model}: {len(events)} events -> {args.out}; torch peak reserved / "
          f"peak allocated = {ratio:.3f}")


if __name__ == "__main__":
    main()
