// CPU strided copies by size, each beside memcpy of the same bytes in the same run: a
// transposed square float32 matrix, and every other row of a float32 matrix (rows of
// 4 KiB), made contiguous with genesis::storage::CopyStridedToContiguous on the calling
// thread alone and allowed every core (*AllCores). The argument is the bytes written;
// bytes_per_second counts them once (as a copy does).
//   bazel run -c opt //benchmarks/transfer:copy_benchmark
// `genesis bench` plots bandwidth against size from these rows (BM_Copy_<path>_<call>).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "benchmark/benchmark.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"

namespace genesis::storage {
namespace {

constexpr int64_t kRowFloats = 1024;

// n floats aligned to a cache line, as the host pool's blocks are (512 bytes): from a
// pointer 16 bytes past a line (malloc's), half the 32-byte loads and stores of the
// transposing squares straddle two lines, and the 64 KiB transposed row ran at 0.28-0.34
// of memcpy where aligned it runs at about 0.5-0.65 (docs/storage.md).
class Filled {
 public:
  explicit Filled(int64_t n)
      : size_(static_cast<size_t>(n)),
        data_(static_cast<float*>(std::aligned_alloc(64, (size_ * sizeof(float) + 63) / 64 * 64)),
              &std::free) {
    for (size_t i = 0; i < size_; ++i) data_.get()[i] = static_cast<float>(i % 1000);
  }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  size_t size_;
  std::unique_ptr<float, decltype(&std::free)> data_;
};

void Finish(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

// A transposed n x n view, n*n*4 == bytes.
Layout Transposed(int64_t bytes) {
  const int64_t n = static_cast<int64_t>(std::llround(std::sqrt(bytes / 4.0)));
  return Layout::Contiguous({n, n}).value().Transpose(0, 1).value();
}

// Every other row of a (2 * rows) x 1024 float matrix, rows * 4 KiB == bytes.
Layout EveryOtherRow(int64_t bytes) {
  const int64_t rows = bytes / (kRowFloats * 4);
  return Layout::Contiguous({2 * rows, kRowFloats}).value().Slice(0, 0, 2 * rows, 2).value();
}

// The copy on up to `threads` threads (1: the benchmark's own alone).
void Strided(benchmark::State& state, const Layout& layout, int64_t base_floats,
             int threads) {
  const Filled src(base_floats);
  Filled dst(layout.numel());
  for (auto _ : state) {
    CopyStridedToContiguous(src.data(), layout, sizeof(float), dst.data(), threads);
    benchmark::ClobberMemory();
  }
  Finish(state);
}

void BM_Copy_Transposed_CopyStridedToContiguous(benchmark::State& state) {
  Strided(state, Transposed(state.range(0)), state.range(0) / 4, 1);
}

void BM_Copy_Rows_CopyStridedToContiguous(benchmark::State& state) {
  Strided(state, EveryOtherRow(state.range(0)), 2 * state.range(0) / 4, 1);
}

// The same copies allowed every core (kAllCores: one thread per MiB at most).
void BM_Copy_Transposed_CopyStridedToContiguousAllCores(benchmark::State& state) {
  Strided(state, Transposed(state.range(0)), state.range(0) / 4, kAllCores);
}

void BM_Copy_Rows_CopyStridedToContiguousAllCores(benchmark::State& state) {
  Strided(state, EveryOtherRow(state.range(0)), 2 * state.range(0) / 4, kAllCores);
}

void Memcpy(benchmark::State& state) {
  const Filled src(state.range(0) / 4);
  Filled dst(state.range(0) / 4);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  Finish(state);
}

void BM_Copy_Transposed_Memcpy(benchmark::State& state) { Memcpy(state); }
void BM_Copy_Rows_Memcpy(benchmark::State& state) { Memcpy(state); }

// 64 KiB .. 64 MiB, powers of 4 (square matrices of 128 .. 4096).
void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes = 64 << 10; bytes <= (64 << 20); bytes *= 4) b->Arg(bytes);
  b->UseRealTime();
}

BENCHMARK(BM_Copy_Transposed_CopyStridedToContiguous)->Apply(Sizes);
BENCHMARK(BM_Copy_Transposed_CopyStridedToContiguousAllCores)->Apply(Sizes);
BENCHMARK(BM_Copy_Transposed_Memcpy)->Apply(Sizes);
BENCHMARK(BM_Copy_Rows_CopyStridedToContiguous)->Apply(Sizes);
BENCHMARK(BM_Copy_Rows_CopyStridedToContiguousAllCores)->Apply(Sizes);
BENCHMARK(BM_Copy_Rows_Memcpy)->Apply(Sizes);

}  // namespace
}  // namespace genesis::storage

BENCHMARK_MAIN();
