// Batches of copy requests as a gather from tensors anywhere in memory, for the batch
// copy benchmarks (planning alone, and planning and copying on a GPU).
#ifndef GENESIS_BENCHMARKS_TRANSFER_SHUFFLED_SOURCES_H_
#define GENESIS_BENCHMARKS_TRANSFER_SHUFFLED_SOURCES_H_

#include <algorithm>
#include <random>
#include <vector>

#include "genesis/transfer/batch_plan.h"

namespace genesis::benchmarks {

// `requests` with their sources permuted (a fixed seed, so every run sees the same
// batch); destinations and sizes stay where they were.
inline std::vector<transfer::CopyRequest> ShuffledSources(
    std::vector<transfer::CopyRequest> requests) {
  std::vector<const void*> sources;
  sources.reserve(requests.size());
  for (const transfer::CopyRequest& r : requests) sources.push_back(r.src);
  std::mt19937 rng(3);
  std::shuffle(sources.begin(), sources.end(), rng);
  for (size_t i = 0; i < requests.size(); ++i) requests[i].src = sources[i];
  return requests;
}

}  // namespace genesis::benchmarks

#endif  // GENESIS_BENCHMARKS_TRANSFER_SHUFFLED_SOURCES_H_
