#include "genesis/distributed/nccl/one_shot_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace genesis::distributed::nccl_backend {

absl::StatusOr<OneShotLayout> OneShotLayout::Create(size_t budget, int ranks) {
  if (ranks < 2 || ranks > kOneShotMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one-shot collectives among ", ranks, " ranks (it serves 2 to ", kOneShotMaxRanks, ")"));
  }
  if (budget == 0 || budget > kOneShotMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot operations of up to ", budget,
                                                   " bytes a rank sends (1 to ", kOneShotMaxBytes,
                                                   " serve)"));
  }
  return OneShotLayout(budget, ranks);
}

std::string_view OneShotKindName(OneShotKind kind) {
  switch (kind) {
    case OneShotKind::kAllReduce:
      return "all_reduce";
    case OneShotKind::kReduce:
      return "reduce";
    case OneShotKind::kBroadcast:
      return "broadcast";
    case OneShotKind::kAllGather:
      return "all_gather";
    case OneShotKind::kReduceScatter:
      return "reduce_scatter";
    case OneShotKind::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

size_t OneShotLayout::bytes() const {
  constexpr size_t kAlignment = 4096;
  const size_t end = counter(4, 0, 0);
  return (end + kAlignment - 1) / kAlignment * kAlignment;
}

std::string OneShotStats::ToString() const {
  if (!enabled) return absl::StrCat("off: ", unavailable);
  return absl::StrCat("on, up to ", budget, " bytes a rank sends (collectives' pieces up to ",
                      max_piece, "): ", operations, " operations");
}

int OneShotPeerRounds(absl::Span<const OneShotPeerKey> batch, absl::Span<int> round) {
  // Batches are a few messages: no map, nothing allocated.
  int rounds = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    round[i] = 0;
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].send == batch[i].send && batch[j].peer == batch[i].peer) ++round[i];
    }
    rounds = std::max(rounds, round[i] + 1);
  }
  return rounds;
}

bool OneShotReduces(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt32:
    case DType::kInt64:
      return op != ReduceOp::kAvg;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    default:
      return false;
  }
}

}  // namespace genesis::distributed::nccl_backend
