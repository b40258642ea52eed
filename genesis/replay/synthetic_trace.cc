#include "genesis/replay/synthetic_trace.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "genesis/replay/trace.h"

namespace genesis::replay {
namespace {

// Emits events for a program on stream 0, handing out unique 512-aligned
// addresses.
class TraceBuilder {
 public:
  uint64_t Alloc(uint64_t size) {
    const uint64_t address = next_;
    next_ += (std::max<uint64_t>(size, 1) + 511) / 512 * 512;
    sizes_[address] = size;
    Emit(TraceAction::kAlloc, address, size);
    return address;
  }
  void Free(uint64_t address) {
    auto it = sizes_.find(address);
    const uint64_t size = it->second;
    sizes_.erase(it);
    Emit(TraceAction::kFreeRequested, address, size);
    Emit(TraceAction::kFreeCompleted, address, size);
  }
  // Frees in reverse order of `addresses`, then clears it.
  void FreeAllReverse(std::vector<uint64_t> &addresses) {
    for (auto it = addresses.rbegin(); it != addresses.rend(); ++it) Free(*it);
    addresses.clear();
  }
  // Events from here on belong to training step `step` (1, 2, ...; setup is 0).
  void BeginStep(int step) { step_ = step; }
  std::vector<TraceEvent> Take() { return std::move(events_); }

 private:
  // Line numbers are those of FormatTrace's text, step markers included.
  void Emit(TraceAction action, uint64_t address, uint64_t size) {
    if (step_ != emitted_step_) {
      ++line_;
      emitted_step_ = step_;
    }
    events_.push_back(TraceEvent{action, address, size, /*stream=*/0, ++line_, step_});
  }

  int step_ = 0;
  int emitted_step_ = 0;
  int line_ = 0;

  uint64_t next_ = uint64_t{0x7f0000000000};
  absl::flat_hash_map<uint64_t, uint64_t> sizes_;
  std::vector<TraceEvent> events_;
};

// One value of `choices`, drawn from `rng` the same way on every platform.
uint64_t Pick(std::mt19937_64 &rng, std::initializer_list<uint64_t> choices) {
  return choices.begin()[rng() % choices.size()];
}

// AdamW over `params` (sizes in bytes, fp32): state allocated on the first step
// and kept; each step a foreach-style temporary per parameter (denominators),
// freed together; then zero_grad(set_to_none) frees the gradients.
void OptimizerStep(TraceBuilder &b, const std::vector<uint64_t> &param_sizes, bool first,
                   std::vector<uint64_t> &state, std::vector<uint64_t> &grads) {
  if (first) {
    for (uint64_t size : param_sizes) {
      state.push_back(b.Alloc(size));  // exp_avg
      state.push_back(b.Alloc(size));  // exp_avg_sq
    }
  }
  std::vector<uint64_t> denom;
  for (uint64_t size : param_sizes) denom.push_back(b.Alloc(size));
  b.FreeAllReverse(denom);
  for (uint64_t g : grads) b.Free(g);
  grads.clear();
}

}  // namespace

std::vector<TraceEvent> TransformerTrainingTrace(uint64_t seed, int steps) {
  constexpr uint64_t kLayers = 12, kHidden = 768, kHeads = 12, kSeq = 1024,
                     kVocab = 50257, kFfn = 4 * kHidden;
  constexpr uint64_t f32 = 4, bf16 = 2;
  std::mt19937_64 rng(seed);
  TraceBuilder b;

  // Parameters, fp32, in module order. Per layer: ln1 w, b, qkv w, b, proj w,
  // b, ln2 w, b, fc w, b, fc_proj w, b.
  std::vector<uint64_t> param_sizes = {kVocab * kHidden * f32, kSeq * kHidden * f32};
  const std::vector<uint64_t> layer_param_numel = {
      kHidden, kHidden, kHidden * 3 * kHidden, 3 * kHidden, kHidden * kHidden, kHidden,
      kHidden, kHidden, kHidden * kFfn,        kFfn,        kFfn * kHidden,    kHidden};
  for (uint64_t l = 0; l < kLayers; ++l) {
    for (uint64_t n : layer_param_numel) param_sizes.push_back(n * f32);
  }
  param_sizes.push_back(kHidden * f32);  // final ln
  param_sizes.push_back(kHidden * f32);
  std::vector<uint64_t> params;
  for (uint64_t size : param_sizes) params.push_back(b.Alloc(size));

  std::vector<uint64_t> optimizer_state, grads;
  for (int step = 0; step < steps; ++step) {
    b.BeginStep(step + 1);
    const uint64_t batch = Pick(rng, {8, 12, 16});
    const uint64_t tokens = batch * kSeq;
    const uint64_t act = tokens * kHidden * bf16;
    const uint64_t scores = batch * kHeads * kSeq * kSeq * bf16;
    const uint64_t stats = tokens * f32;  // layer-norm mean / rstd

    const uint64_t input_ids = b.Alloc(tokens * 8);
    const uint64_t labels = b.Alloc(tokens * 8);
    std::vector<uint64_t> embed_saved = {b.Alloc(tokens * kHidden * f32)};

    // Forward.
    std::vector<std::vector<uint64_t>> saved(kLayers);
    for (uint64_t l = 0; l < kLayers; ++l) {
      std::vector<uint64_t> &s = saved[l];
      s.push_back(b.Alloc(act));                           // ln1 out
      s.push_back(b.Alloc(stats));                         // ln1 mean
      s.push_back(b.Alloc(stats));                         // ln1 rstd
      s.push_back(b.Alloc(kHidden * 3 * kHidden * bf16));  // qkv weight cast
      s.push_back(b.Alloc(3 * act));                       // qkv
      const uint64_t raw_scores = b.Alloc(scores);
      s.push_back(b.Alloc(scores));  // softmax probabilities
      b.Free(raw_scores);
      s.push_back(b.Alloc(act));                       // attention context
      s.push_back(b.Alloc(kHidden * kHidden * bf16));  // proj weight cast
      const uint64_t attn_out = b.Alloc(act);
      s.push_back(b.Alloc(act));  // residual
      b.Free(attn_out);
      s.push_back(b.Alloc(act));  // ln2 out
      s.push_back(b.Alloc(stats));
      s.push_back(b.Alloc(stats));
      s.push_back(b.Alloc(kHidden * kFfn * bf16));  // fc weight cast
      s.push_back(b.Alloc(4 * act));                // fc out
      s.push_back(b.Alloc(4 * act));                // gelu out
      s.push_back(b.Alloc(kFfn * kHidden * bf16));  // fc_proj weight cast
      const uint64_t mlp_out = b.Alloc(act);
      s.push_back(b.Alloc(act));  // residual
      b.Free(mlp_out);
    }
    std::vector<uint64_t> head_saved;
    head_saved.push_back(b.Alloc(act));  // final ln out
    head_saved.push_back(b.Alloc(stats));
    head_saved.push_back(b.Alloc(stats));
    head_saved.push_back(b.Alloc(kVocab * kHidden * bf16));  // lm head weight cast
    head_saved.push_back(b.Alloc(tokens * kVocab * bf16));   // logits
    const uint64_t logits_f32 = b.Alloc(tokens * kVocab * f32);
    head_saved.push_back(b.Alloc(tokens * kVocab * f32));  // log_softmax
    b.Free(logits_f32);
    const uint64_t loss = b.Alloc(4);

    // Backward.
    size_t param_index = param_sizes.size();
    auto grad_of_param = [&](size_t index) {
      grads.push_back(b.Alloc(param_sizes[index]));
    };
    {
      const uint64_t g_logsoftmax = b.Alloc(tokens * kVocab * f32);
      const uint64_t g_logits = b.Alloc(tokens * kVocab * bf16);
      b.Free(g_logsoftmax);
      const uint64_t g_wte_bf16 = b.Alloc(kVocab * kHidden * bf16);
      grad_of_param(0);  // wte (tied lm head)
      b.Free(g_wte_bf16);
      const uint64_t g_x = b.Alloc(act);
      b.Free(g_logits);
      grad_of_param(--param_index);  // final ln b
      grad_of_param(--param_index);  // final ln w
      b.FreeAllReverse(head_saved);
      b.Free(g_x);
    }
    uint64_t g_residual = b.Alloc(tokens * kHidden * f32);
    for (uint64_t l = kLayers; l-- > 0;) {
      // MLP: fc_proj, gelu, fc, ln2.
      const uint64_t g_gelu = b.Alloc(4 * act);
      const uint64_t g_w = b.Alloc(kFfn * kHidden * bf16);
      grad_of_param(--param_index);  // fc_proj b (small)
      grad_of_param(--param_index);  // fc_proj w
      b.Free(g_w);
      const uint64_t g_fc = b.Alloc(4 * act);
      b.Free(g_gelu);
      const uint64_t g_w2 = b.Alloc(kHidden * kFfn * bf16);
      grad_of_param(--param_index);  // fc b
      grad_of_param(--param_index);  // fc w
      b.Free(g_w2);
      const uint64_t g_ln2 = b.Alloc(act);
      b.Free(g_fc);
      grad_of_param(--param_index);  // ln2 b
      grad_of_param(--param_index);  // ln2 w
      const uint64_t g_res = b.Alloc(tokens * kHidden * f32);
      b.Free(g_ln2);
      b.Free(g_residual);
      g_residual = g_res;
      // Attention: proj, softmax, qkv, ln1.
      const uint64_t g_ctx = b.Alloc(act);
      const uint64_t g_wp = b.Alloc(kHidden * kHidden * bf16);
      grad_of_param(--param_index);  // proj b
      grad_of_param(--param_index);  // proj w
      b.Free(g_wp);
      const uint64_t g_probs = b.Alloc(scores);
      const uint64_t g_scores = b.Alloc(scores);
      b.Free(g_probs);
      const uint64_t g_qkv = b.Alloc(3 * act);
      b.Free(g_scores);
      b.Free(g_ctx);
      const uint64_t g_wqkv = b.Alloc(kHidden * 3 * kHidden * bf16);
      grad_of_param(--param_index);  // qkv b
      grad_of_param(--param_index);  // qkv w
      b.Free(g_wqkv);
      const uint64_t g_ln1 = b.Alloc(act);
      b.Free(g_qkv);
      grad_of_param(--param_index);  // ln1 b
      grad_of_param(--param_index);  // ln1 w
      const uint64_t g_res2 = b.Alloc(tokens * kHidden * f32);
      b.Free(g_ln1);
      b.Free(g_residual);
      g_residual = g_res2;
      b.FreeAllReverse(saved[l]);
    }
    grad_of_param(--param_index);  // wpe
    b.FreeAllReverse(embed_saved);
    b.Free(g_residual);
    b.Free(loss);
    b.Free(labels);
    b.Free(input_ids);

    OptimizerStep(b, param_sizes, step == 0, optimizer_state, grads);
  }
  return b.Take();
}

std::vector<TraceEvent> CnnTrainingTrace(uint64_t seed, int steps) {
  constexpr uint64_t f32 = 4, bf16 = 2;
  std::mt19937_64 rng(seed);
  TraceBuilder b;

  // The network as a list of conv + batch-norm units (torchvision's ResNet-50
  // v1.5: the stride sits on the 3x3 conv). A bottleneck block is [downsample,]
  // 1x1, 3x3, 1x1; its residual is added after the last unit and its gradient
  // joins the main one at the block's first unit.
  struct Unit {
    uint64_t cin, cout, k, in_hw, hw;
    bool block_start, block_end;
  };
  std::vector<Unit> units = {{3, 64, 7, 224, 112, false, false}};
  const uint64_t stage_blocks[4] = {3, 4, 6, 3};
  const uint64_t stage_width[4] = {64, 128, 256, 512};
  const uint64_t stage_hw[4] = {56, 28, 14, 7};
  uint64_t cin = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const uint64_t w = stage_width[stage], hw = stage_hw[stage];
    for (uint64_t blk = 0; blk < stage_blocks[stage]; ++blk) {
      const uint64_t in_hw = blk == 0 && stage > 0 ? 2 * hw : hw;
      if (blk == 0)
        units.push_back({cin, 4 * w, 1, in_hw, hw, true, false});  // downsample
      units.push_back({cin, w, 1, in_hw, in_hw, blk != 0, false});
      units.push_back({w, w, 3, in_hw, hw, false, false});
      units.push_back({w, 4 * w, 1, hw, hw, false, true});
      cin = 4 * w;
    }
  }
  // Parameters: per unit conv weight, bn weight, bn bias (+ running mean / var
  // buffers, not trained); then fc weight and bias.
  std::vector<uint64_t> param_sizes;
  std::vector<uint64_t> buffers;
  for (const Unit &u : units) {
    param_sizes.push_back(u.cout * u.cin * u.k * u.k * f32);
    param_sizes.push_back(u.cout * f32);
    param_sizes.push_back(u.cout * f32);
  }
  param_sizes.push_back(1000 * 2048 * f32);
  param_sizes.push_back(1000 * f32);
  std::vector<uint64_t> params;
  for (size_t i = 0; i < param_sizes.size(); ++i) {
    params.push_back(b.Alloc(param_sizes[i]));
    if (i < 3 * units.size() && i % 3 == 2) {
      buffers.push_back(b.Alloc(param_sizes[i]));  // running_mean
      buffers.push_back(b.Alloc(param_sizes[i]));  // running_var
    }
  }

  // cuDNN-style workspace: depends on the layer shape and the batch, sometimes
  // none.
  auto workspace = [](const Unit &u, uint64_t batch, uint64_t salt) -> uint64_t {
    const uint64_t h = (u.cin * 131 + u.cout * 31 + u.k * 7 + u.hw + salt * 17) % 5;
    if (h == 0) return 0;
    return batch * u.hw * u.hw * std::min<uint64_t>(u.cout, 256) * h / 2;
  };

  std::vector<uint64_t> optimizer_state, grads;
  for (int step = 0; step < steps; ++step) {
    b.BeginStep(step + 1);
    const uint64_t batch = Pick(rng, {32, 48, 64});
    const uint64_t input = b.Alloc(batch * 3 * 224 * 224 * f32);
    const uint64_t target = b.Alloc(batch * 8);

    // Forward.
    std::vector<std::vector<uint64_t>> saved(units.size());
    std::vector<uint64_t> stem_saved;
    for (size_t i = 0; i < units.size(); ++i) {
      const Unit &u = units[i];
      const uint64_t out = batch * u.cout * u.hw * u.hw * bf16;
      std::vector<uint64_t> &s = saved[i];
      s.push_back(b.Alloc(u.cout * u.cin * u.k * u.k * bf16));  // weight cast
      const uint64_t ws_size = workspace(u, batch, 0);
      const uint64_t ws = ws_size ? b.Alloc(ws_size) : 0;
      s.push_back(b.Alloc(out));  // conv out
      if (ws) b.Free(ws);
      s.push_back(b.Alloc(out));           // bn out (relu in place)
      s.push_back(b.Alloc(u.cout * f32));  // save_mean
      s.push_back(b.Alloc(u.cout * f32));  // save_invstd
      if (i == 0) {
        stem_saved.push_back(b.Alloc(batch * 64 * 56 * 56 * bf16));  // maxpool out
        stem_saved.push_back(b.Alloc(batch * 64 * 56 * 56 * 8));     // indices
      }
    }
    std::vector<uint64_t> head_saved;
    head_saved.push_back(b.Alloc(batch * 2048 * bf16));  // avgpool
    head_saved.push_back(b.Alloc(1000 * 2048 * bf16));   // fc weight cast
    head_saved.push_back(b.Alloc(batch * 1000 * bf16));  // logits
    head_saved.push_back(b.Alloc(batch * 1000 * f32));   // log_softmax
    const uint64_t loss = b.Alloc(4);

    // Backward.
    size_t param_index = param_sizes.size();
    auto grad_of_param = [&]() { grads.push_back(b.Alloc(param_sizes[--param_index])); };
    const uint64_t g_logits = b.Alloc(batch * 1000 * bf16);
    grad_of_param();  // fc b
    grad_of_param();  // fc w
    uint64_t g = b.Alloc(batch * 2048 * 7 * 7 * bf16);
    b.Free(g_logits);
    b.FreeAllReverse(head_saved);
    uint64_t g_block = 0;  // gradient at the current block's output (residual branch)
    for (size_t i = units.size(); i-- > 0;) {
      const Unit &u = units[i];
      const uint64_t out = batch * u.cout * u.hw * u.hw * bf16;
      const uint64_t in = batch * u.cin * u.in_hw * u.in_hw * bf16;
      if (u.block_end) g_block = b.Alloc(out);  // copy kept for the shortcut
      const uint64_t g_bn = b.Alloc(out);
      grad_of_param();  // bn bias
      grad_of_param();  // bn weight
      b.Free(g);
      const uint64_t ws_size = workspace(u, batch, 1);
      const uint64_t ws = ws_size ? b.Alloc(ws_size) : 0;
      const uint64_t g_in = b.Alloc(in);
      const uint64_t g_w = b.Alloc(u.cout * u.cin * u.k * u.k * bf16);
      grad_of_param();  // conv weight
      b.Free(g_w);
      if (ws) b.Free(ws);
      b.Free(g_bn);
      b.FreeAllReverse(saved[i]);
      g = g_in;
      if (u.block_start && g_block != 0) {  // the shortcut gradient joins
        const uint64_t sum = b.Alloc(in);
        b.Free(g);
        b.Free(g_block);
        g_block = 0;
        g = sum;
      }
      if (i == 1) b.FreeAllReverse(stem_saved);
    }
    if (g_block != 0) b.Free(g_block);
    b.Free(g);
    b.Free(loss);
    b.Free(target);
    b.Free(input);

    OptimizerStep(b, param_sizes, step == 0, optimizer_state, grads);
  }
  return b.Take();
}

}  // namespace genesis::replay
