#include "genesis/distributed/testing/collective_checks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"

namespace genesis::distributed::testing {

using storage::Storage;

double Contribution(ReduceOp op, int rank, int64_t i) {
  switch (op) {
    case ReduceOp::kProd: return 1 + (i + rank) % 2;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return (rank * 7 + i) % 11;
    default: return (rank + 1) * (i % 3 + 1);
  }
}

double Expected(ReduceOp op, DType dtype, int size, int64_t i) {
  if (dtype == DType::kBool) {
    bool acc = Contribution(op, 0, i) != 0;
    for (int rank = 1; rank < size; ++rank) {
      const bool v = Contribution(op, rank, i) != 0;
      acc = (op == ReduceOp::kProd || op == ReduceOp::kMin) ? (acc && v) : (acc || v);
    }
    return acc ? 1 : 0;
  }
  double r = Contribution(op, 0, i);
  for (int rank = 1; rank < size; ++rank) {
    const double v = Contribution(op, rank, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: r += v; break;
      case ReduceOp::kProd: r *= v; break;
      case ReduceOp::kMin: r = std::min(r, v); break;
      case ReduceOp::kMax: r = std::max(r, v); break;
    }
  }
  return op == ReduceOp::kAvg ? r / size : r;
}

absl::StatusOr<Storage> Filled(int64_t n, DType dtype, const std::function<double(int64_t)>& f,
                               Device device) {
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = f(i);
  GENESIS_ASSIGN_OR_RETURN(Storage s, storage::CreateStorage<double>(values, device));
  return s.To(dtype);
}

std::string Check(const Storage& s, const std::function<double(int64_t)>& f,
                  const std::string& what) {
  absl::StatusOr<Storage> wide = s.To(DType::kFloat64);
  if (!wide.ok()) return std::string(wide.status().message());
  absl::StatusOr<std::vector<double>> values = wide->ToVector<double>();
  if (!values.ok()) return std::string(values.status().message());
  for (size_t i = 0; i < values->size(); ++i) {
    const double want = f(static_cast<int64_t>(i));
    if (std::abs((*values)[i] - want) > 1e-6 * std::max(1.0, std::abs(want))) {
      return absl::StrCat(what, ": element ", i, " is ", (*values)[i], ", expected ", want);
    }
  }
  return "";
}

}  // namespace genesis::distributed::testing
