#include "genesis/distributed/gloo/gloo_reduce.h"

#include <algorithm>
#include <cstdint>

#include "genesis/core/half.h"

namespace genesis::distributed::gloo_backend {
namespace {

// How an element type is computed on: itself, or float for the 16-bit floats.
template <typename T>
struct Arith {
  using Compute = T;
  static Compute Load(T v) { return v; }
  static T Store(Compute v) { return v; }
};
template <>
struct Arith<Half> {
  using Compute = float;
  static float Load(Half v) { return static_cast<float>(v); }
  static Half Store(float v) { return Half(v); }
};
template <>
struct Arith<BFloat16> {
  using Compute = float;
  static float Load(BFloat16 v) { return static_cast<float>(v); }
  static BFloat16 Store(float v) { return BFloat16(v); }
};

struct Sum {
  template <typename C> static C Apply(C a, C b) { return a + b; }
  static bool Apply(bool a, bool b) { return a || b; }
};
struct Prod {
  template <typename C> static C Apply(C a, C b) { return a * b; }
  static bool Apply(bool a, bool b) { return a && b; }
};
struct Min {
  template <typename C> static C Apply(C a, C b) { return std::min(a, b); }
};
struct Max {
  template <typename C> static C Apply(C a, C b) { return std::max(a, b); }
};

template <typename T, typename Op>
void Reduce(void* out, const void* a, const void* b, size_t n) {
  using A = Arith<T>;
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    // Integer sums wrap like NCCL's instead of being undefined: compute unsigned.
    using C = typename A::Compute;
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool> &&
                  std::is_same_v<Op, Sum>) {
      using U = std::make_unsigned_t<C>;
      o[i] = static_cast<T>(static_cast<U>(static_cast<U>(x[i]) + static_cast<U>(y[i])));
    } else if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool> &&
                         std::is_same_v<Op, Prod>) {
      using U = std::make_unsigned_t<C>;
      o[i] = static_cast<T>(static_cast<U>(static_cast<U>(x[i]) * static_cast<U>(y[i])));
    } else {
      o[i] = A::Store(static_cast<C>(Op::Apply(A::Load(x[i]), A::Load(y[i]))));
    }
  }
}

template <typename T>
ReduceFunction ForType(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return &Reduce<T, Sum>;
    case ReduceOp::kProd: return &Reduce<T, Prod>;
    case ReduceOp::kMin: return &Reduce<T, Min>;
    case ReduceOp::kMax: return &Reduce<T, Max>;
  }
  return nullptr;
}

template <typename T>
void Divide(void* data, size_t count, int divisor) {
  using A = Arith<T>;
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) {
    p[i] = A::Store(A::Load(p[i]) / static_cast<typename A::Compute>(divisor));
  }
}

}  // namespace

ReduceFunction ReductionFor(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kBool: return ForType<bool>(op);
    case DType::kUInt8: return ForType<uint8_t>(op);
    case DType::kInt8: return ForType<int8_t>(op);
    case DType::kInt16: return ForType<int16_t>(op);
    case DType::kInt32: return ForType<int32_t>(op);
    case DType::kInt64: return ForType<int64_t>(op);
    case DType::kFloat16: return ForType<Half>(op);
    case DType::kBFloat16: return ForType<BFloat16>(op);
    case DType::kFloat32: return ForType<float>(op);
    case DType::kFloat64: return ForType<double>(op);
  }
  return nullptr;
}

void DivideInPlace(void* data, size_t count, DType dtype, int divisor) {
  switch (dtype) {
    case DType::kFloat16: Divide<Half>(data, count, divisor); break;
    case DType::kBFloat16: Divide<BFloat16>(data, count, divisor); break;
    case DType::kFloat32: Divide<float>(data, count, divisor); break;
    case DType::kFloat64: Divide<double>(data, count, divisor); break;
    default: break;  // CheckReduction refuses avg of other dtypes.
  }
}

}  // namespace genesis::distributed::gloo_backend
