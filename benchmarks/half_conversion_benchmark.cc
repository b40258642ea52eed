// float <-> float16 / bfloat16 on the host: genesis's conversions of buffers
// (storage::ConvertContiguous: vectorised, dispatched to the CPU's best instruction set),
// its scalar per-element functions (genesis/core/half.h, the reference they match bit for
// bit), the compiler's own `_Float16` conversions (GCC's libgcc routines, or F16C
// instructions where the target has them) and a plain copy of the same bytes, in one run.
//   bazel run -c opt //benchmarks:half_conversion_benchmark
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/storage/convert.h"

namespace {

std::vector<float> RandomFloats(size_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void SetBytes(benchmark::State& state, size_t bytes_per_item) {
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * state.range(0) * bytes_per_item);
}

void BM_FloatToHalf_Scalar(benchmark::State& state) {
  const std::vector<float> in = RandomFloats(state.range(0));
  std::vector<uint16_t> out(in.size());
  for (auto _ : state) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = genesis::FloatToHalfBits(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, sizeof(float));
}

void BM_FloatToHalf_CompilerFloat16(benchmark::State& state) {
  const std::vector<float> in = RandomFloats(state.range(0));
  std::vector<_Float16> out(in.size());
  for (auto _ : state) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = static_cast<_Float16>(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, sizeof(float));
}

void BM_HalfToFloat_Scalar(benchmark::State& state) {
  const std::vector<float> floats = RandomFloats(state.range(0));
  std::vector<uint16_t> in(floats.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = genesis::FloatToHalfBits(floats[i]);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = genesis::HalfBitsToFloat(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, sizeof(uint16_t));
}

void BM_HalfToFloat_CompilerFloat16(benchmark::State& state) {
  const std::vector<float> floats = RandomFloats(state.range(0));
  std::vector<_Float16> in(floats.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<_Float16>(floats[i]);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = static_cast<float>(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, sizeof(uint16_t));
}

void BM_FloatToBFloat16_Scalar(benchmark::State& state) {
  const std::vector<float> in = RandomFloats(state.range(0));
  std::vector<uint16_t> out(in.size());
  for (auto _ : state) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = genesis::FloatToBFloat16Bits(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, sizeof(float));
}

// Genesis's buffer conversion from `from` to `to` of state.range(0) elements.
void ConvertBuffer(benchmark::State& state, genesis::DType from, genesis::DType to,
                   size_t bytes_per_item) {
  const std::vector<float> floats = RandomFloats(state.range(0));
  std::vector<uint16_t> halves(floats.size());
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = genesis::FloatToHalfBits(floats[i]);
  std::vector<float> out_floats(floats.size());
  std::vector<uint16_t> out_halves(floats.size());
  const bool widen = from != genesis::DType::kFloat32;
  const void* src = widen ? static_cast<const void*>(halves.data()) : floats.data();
  void* dst = widen ? static_cast<void*>(out_floats.data()) : out_halves.data();
  for (auto _ : state) {
    const absl::Status status =
        genesis::storage::ConvertContiguous(src, from, dst, to, state.range(0));
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  SetBytes(state, bytes_per_item);
}

void BM_FloatToHalf_Genesis(benchmark::State& state) {
  ConvertBuffer(state, genesis::DType::kFloat32, genesis::DType::kFloat16, sizeof(float));
}

void BM_HalfToFloat_Genesis(benchmark::State& state) {
  ConvertBuffer(state, genesis::DType::kFloat16, genesis::DType::kFloat32, sizeof(uint16_t));
}

void BM_FloatToBFloat16_Genesis(benchmark::State& state) {
  ConvertBuffer(state, genesis::DType::kFloat32, genesis::DType::kBFloat16, sizeof(float));
}

// memcpy with the traffic of a float -> 16-bit conversion: reading n floats and writing
// n 16-bit values moves 6n bytes, as a memcpy of 3n bytes does (3n read, 3n written).
void BM_FloatRead_HalfWrite_Memcpy(benchmark::State& state) {
  const std::vector<float> in = RandomFloats(state.range(0));
  const size_t bytes = in.size() * (sizeof(float) + sizeof(uint16_t)) / 2;
  std::vector<char> out(bytes);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), bytes);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, sizeof(float));
}

constexpr int64_t kElements = 1 << 20;
BENCHMARK(BM_FloatToHalf_Genesis)->Arg(kElements);
BENCHMARK(BM_FloatToHalf_Scalar)->Arg(kElements);
BENCHMARK(BM_FloatToHalf_CompilerFloat16)->Arg(kElements);
BENCHMARK(BM_HalfToFloat_Genesis)->Arg(kElements);
BENCHMARK(BM_HalfToFloat_Scalar)->Arg(kElements);
BENCHMARK(BM_HalfToFloat_CompilerFloat16)->Arg(kElements);
BENCHMARK(BM_FloatToBFloat16_Genesis)->Arg(kElements);
BENCHMARK(BM_FloatToBFloat16_Scalar)->Arg(kElements);
BENCHMARK(BM_FloatRead_HalfWrite_Memcpy)->Arg(kElements);

}  // namespace

BENCHMARK_MAIN();
