// The baseline of the CPU collective benchmarks: Gloo called directly on host buffers,
// in the same processes as genesis's Gloo groups.
#ifndef GENESIS_BENCHMARKS_DISTRIBUTED_RAW_GLOO_H_
#define GENESIS_BENCHMARKS_DISTRIBUTED_RAW_GLOO_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace genesis::benchmarks {

class RawGloo {
 public:
  // Rank `rank` of `size`, meeting the others in a file store on `store_dir`, with
  // buffers for up to `max_bytes`.
  static absl::StatusOr<std::unique_ptr<RawGloo>> Create(int rank, int size,
                                                         const std::string& store_dir,
                                                         size_t max_bytes);
  virtual ~RawGloo() = default;

  // The median of `iters` operations' seconds, each timed alone after `warmup` untimed
  // ones; Unimplemented for an operation Gloo lacks (reduce_scatter of arbitrary sizes).
  virtual absl::StatusOr<double> Time(const std::string& op, size_t bytes, int warmup,
                                      int iters) = 0;
};

}  // namespace genesis::benchmarks

#endif  // GENESIS_BENCHMARKS_DISTRIBUTED_RAW_GLOO_H_
