// Deterministic allocation traces shaped like training loops, for replay tests
// and benchmarks where no recorded trace (traces/) is at hand or a variable
// length is wanted.
//
// They imitate what PyTorch's caching allocator sees during bf16-autocast
// training with AdamW and a batch size that changes between steps: parameters
// allocated first and kept, optimizer state allocated in the first step and
// kept, activations saved in the forward pass and freed in reverse by the
// backward pass, gradients allocated in the backward pass and freed at
// zero_grad, and short-lived temporaries. Each free is a free_requested
// immediately followed by a free_completed (one stream, 0). Addresses come from
// a bump counter (512-aligned, never reused), so every trace is valid for
// ParseTrace. Parameters are allocated in step 0; training step k's events
// have step k (1-based). Line numbers are the events' lines in FormatTrace's
// text (step markers included).
#ifndef GENESIS_REPLAY_SYNTHETIC_TRACE_H_
#define GENESIS_REPLAY_SYNTHETIC_TRACE_H_

#include <cstdint>
#include <vector>

#include "genesis/replay/trace.h"

namespace genesis::replay {

// A GPT-2-small-like transformer (12 layers, hidden 768, 12 heads, sequence
// 1024, vocabulary 50257) trained for `steps` steps; the batch size of each
// step is 8, 12 or 16, drawn from `seed`. Per step: activations per layer
// (layer norms, QKV, attention scores and probabilities, MLP intermediates),
// logits and loss, the backward pass (activation gradients, parameter gradients
// including bias and layer-norm gradients below 1 MiB), the optimizer step.
// About 2,300 events a step. Same seed and steps, same trace.
std::vector<TraceEvent> TransformerTrainingTrace(uint64_t seed, int steps);

// A ResNet-50-like CNN (stem, 16 bottleneck blocks in 4 stages, 224x224 input)
// trained for `steps` steps with a batch size of 32, 48 or 64 per step, drawn
// from `seed`. Per convolution: a bf16 weight copy, a cuDNN-style workspace
// that is allocated and freed around the call (its size depends on the layer
// and the batch), the output, batch-norm output and saved mean / inverse std;
// the backward pass in reverse with workspaces, gradients and batch-norm
// parameter gradients. About 2,600 events a step.
std::vector<TraceEvent> CnnTrainingTrace(uint64_t seed, int steps);

}  // namespace genesis::replay

#endif  // GENESIS_REPLAY_SYNTHETIC_TRACE_H_
