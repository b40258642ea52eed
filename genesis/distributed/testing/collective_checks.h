// Helpers for tests of collectives that run in child processes (multi_process.h): fill
// storages with known values on any device, compare them with what a collective must
// give, and report failures as text (a child has no gtest to report to).
#ifndef GENESIS_DISTRIBUTED_TESTING_COLLECTIVE_CHECKS_H_
#define GENESIS_DISTRIBUTED_TESTING_COLLECTIVE_CHECKS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"
#include "genesis/storage/storage.h"

namespace genesis::distributed::testing {

// What rank `rank` contributes at element i for `op`: small integers, so every dtype
// holds every result exactly on up to 8 ranks.
double Contribution(ReduceOp op, int rank, int64_t i);

// The reduction of every rank's Contribution over `size` ranks, as `dtype` holds it
// (bool: sum and max are "or", prod and min "and").
double Expected(ReduceOp op, DType dtype, int size, int64_t i);

// A 1-D storage of `n` elements of `dtype` on `device` holding f(i).
absl::StatusOr<storage::Storage> Filled(int64_t n, DType dtype,
                                        const std::function<double(int64_t)>& f,
                                        Device device = Device::Cpu());

// "" if `s` holds f(i) at every i; otherwise `what` and the first difference.
std::string Check(const storage::Storage& s, const std::function<double(int64_t)>& f,
                  const std::string& what);

}  // namespace genesis::distributed::testing

// In a function returning std::string: return the text of a non-empty result, of a bad
// status, or of a StatusOr's error.
#define GENESIS_RETURN_IF_TEXT(expr)   \
  do {                                 \
    std::string _text = (expr);        \
    if (!_text.empty()) return _text;  \
  } while (0)

#define GENESIS_RETURN_IF_BAD(expr)                            \
  do {                                                         \
    absl::Status _status = (expr);                             \
    if (!_status.ok()) return std::string(_status.ToString()); \
  } while (0)

#define GENESIS_ASSIGN_OR_TEXT(lhs, expr)                                \
  auto lhs##_or = (expr);                                                \
  if (!lhs##_or.ok()) return std::string(lhs##_or.status().ToString()); \
  auto lhs = std::move(*lhs##_or)

#endif  // GENESIS_DISTRIBUTED_TESTING_COLLECTIVE_CHECKS_H_
