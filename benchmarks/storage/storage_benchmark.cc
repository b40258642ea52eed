// The storage layer's CPU loops beside memcpy of the same bytes, on 4096 x
// 4096 matrices: ConvertContiguous float32 -> bfloat16 / float16 and back ->
// float32, and CopyStridedToContiguous of a transposed float32 matrix, on the
// calling thread and (*AllCores) shared among every core (kAllCores).
// Bytes per second count the bytes read plus the bytes written, so every
// row's rate compares with memcpy's (which reads and writes its size), and
// vs_memcpy is the ratio to memcpy of the same traffic, measured once.
//   bazel run -c opt //benchmarks/storage:storage_benchmark
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"

namespace genesis::storage {
namespace {

constexpr int64_t kEdge = 4096;
constexpr int64_t kNumel = kEdge * kEdge;

// `bytes` bytes, written once so that the pages exist before timing.
std::vector<uint8_t> Buffer(int64_t bytes) {
  std::vector<uint8_t> buffer(static_cast<size_t>(bytes));
  for (size_t i = 0; i < buffer.size(); ++i) {
    buffer[i] = static_cast<uint8_t>(i * 131);
  }
  return buffer;
}

// memcpy's bytes read + written per second for a copy of `bytes` bytes: the
// mean over a few copies after a first one, measured once per size.
double MemcpyRate(int64_t bytes) {
  static auto* rates = new std::map<int64_t, double>;
  if (const auto it = rates->find(bytes); it != rates->end()) return it->second;
  const std::vector<uint8_t> src = Buffer(bytes);
  std::vector<uint8_t> dst = Buffer(bytes);
  constexpr int kCopies = 10;
  std::memcpy(dst.data(), src.data(), src.size());
  const auto start = std::chrono::steady_clock::now();
  for (int copy = 0; copy < kCopies; ++copy) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
  return (*rates)[bytes] = 2.0 * bytes * kCopies / took.count();
}

// Runs the benchmark loop over `body`, which reads + writes `traffic` bytes:
// reports that traffic, and the ratio of its rate to memcpy's for the same
// traffic as vs_memcpy.
template <typename Body>
void RunWithTraffic(benchmark::State& state, int64_t traffic, Body body) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
  state.SetBytesProcessed(state.iterations() * traffic);
  const double rate = state.iterations() * traffic / took.count();
  state.counters["vs_memcpy"] = rate / MemcpyRate(traffic / 2);
}

void Convert(benchmark::State& state, DType from, DType to, int threads) {
  const std::vector<uint8_t> src = Buffer(kNumel * ItemSize(from));
  std::vector<uint8_t> dst = Buffer(kNumel * ItemSize(to));
  RunWithTraffic(state, static_cast<int64_t>(src.size() + dst.size()), [&] {
    const absl::Status status =
        ConvertContiguous(src.data(), from, dst.data(), to, kNumel, threads);
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  });
}

void BM_ConvertFloat32ToBFloat16(benchmark::State& state) {
  Convert(state, DType::kFloat32, DType::kBFloat16, 1);
}

void BM_ConvertBFloat16ToFloat32(benchmark::State& state) {
  Convert(state, DType::kBFloat16, DType::kFloat32, 1);
}

void BM_ConvertFloat32ToFloat16(benchmark::State& state) {
  Convert(state, DType::kFloat32, DType::kFloat16, 1);
}

void BM_ConvertFloat16ToFloat32(benchmark::State& state) {
  Convert(state, DType::kFloat16, DType::kFloat32, 1);
}

void BM_ConvertFloat32ToBFloat16AllCores(benchmark::State& state) {
  Convert(state, DType::kFloat32, DType::kBFloat16, kAllCores);
}

void BM_ConvertBFloat16ToFloat32AllCores(benchmark::State& state) {
  Convert(state, DType::kBFloat16, DType::kFloat32, kAllCores);
}

void BM_ConvertFloat32ToFloat16AllCores(benchmark::State& state) {
  Convert(state, DType::kFloat32, DType::kFloat16, kAllCores);
}

void BM_ConvertFloat16ToFloat32AllCores(benchmark::State& state) {
  Convert(state, DType::kFloat16, DType::kFloat32, kAllCores);
}

void CopyTransposed(benchmark::State& state, int threads) {
  const std::vector<uint8_t> src = Buffer(kNumel * 4);
  std::vector<uint8_t> dst = Buffer(kNumel * 4);
  const Layout transposed =
      Layout::Contiguous({kEdge, kEdge}).value().Transpose(0, 1).value();
  RunWithTraffic(state, 2 * kNumel * 4, [&] {
    CopyStridedToContiguous(src.data(), transposed, 4, dst.data(), threads);
  });
}

void BM_CopyTransposedFloat32(benchmark::State& state) { CopyTransposed(state, 1); }

void BM_CopyTransposedFloat32AllCores(benchmark::State& state) {
  CopyTransposed(state, kAllCores);
}

// The baseline: memcpy of state.range(0) bytes.
void BM_Memcpy(benchmark::State& state) {
  const std::vector<uint8_t> src = Buffer(state.range(0));
  std::vector<uint8_t> dst = Buffer(state.range(0));
  RunWithTraffic(state, 2 * state.range(0),
                 [&] { std::memcpy(dst.data(), src.data(), src.size()); });
}

BENCHMARK(BM_ConvertFloat32ToBFloat16)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertBFloat16ToFloat32)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertFloat32ToFloat16)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertFloat16ToFloat32)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CopyTransposedFloat32)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertFloat32ToBFloat16AllCores)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertBFloat16ToFloat32AllCores)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertFloat32ToFloat16AllCores)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvertFloat16ToFloat32AllCores)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CopyTransposedFloat32AllCores)->UseRealTime()->Unit(benchmark::kMillisecond);
// The traffic of a float32 <-> bfloat16 conversion (48 MiB each way) and of
// the transposed copy (64 MiB each way).
BENCHMARK(BM_Memcpy)
    ->Arg(kNumel * 3)
    ->Arg(kNumel * 4)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace genesis::storage

BENCHMARK_MAIN();
