// The storage CUDA kernels beside cudaMemcpyAsync (device to device) of the
// same traffic, on 4096 x 4096 matrices on device 0: ConvertCuda float32 ->
// bfloat16 and bfloat16 -> float32, and CopyStridedCuda of a transposed
// float32 matrix into a contiguous one. Times come from CUDA events around a
// batch of operations on a busy stream (manual time, per operation); bytes
// per second count the bytes read plus the bytes written, so every row's
// rate compares with the memcpy rows' (a copy of N bytes moves 2N), and
// vs_memcpy is the ratio to cudaMemcpyAsync's rate for the same traffic.
//   tools/gpu_bundle.sh, then on the GPU machine:
//   gpu_bundle/benchmarks/benchmarks_storage_storage_cuda_benchmark
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "genesis/core/dtype.h"
#include "genesis/cuda/device_query.h"
#include "genesis/storage/kernels/cuda_kernels.h"
#include "genesis/storage/layout.h"

namespace genesis::storage::kernels {
namespace {

constexpr int64_t kEdge = 4096;
constexpr int64_t kNumel = kEdge * kEdge;
// Operations timed between one pair of events.
constexpr int kBatch = 20;

// Two device buffers of a float32 matrix each, on device 0, made once.
struct Buffers {
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

const Buffers& Device() {
  static const Buffers* buffers = [] {
    auto* b = new Buffers;
    cudaSetDevice(0);
    cudaMalloc(&b->src, kNumel * 4);
    cudaMalloc(&b->dst, kNumel * 4);
    cudaMemset(b->src, 0x3F, kNumel * 4);  // Finite floats and bfloat16s.
    cudaMemset(b->dst, 0, kNumel * 4);
    cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
    cudaEventCreate(&b->start);
    cudaEventCreate(&b->stop);
    cudaDeviceSynchronize();
    return b;
  }();
  return *buffers;
}

// The seconds kBatch calls of `op` (which queues one operation on the
// stream and returns its status) take, between two events recorded after
// one untimed call that keeps the stream busy (so no launch latency is
// timed). An error of a launch or of the work as a status.
template <typename Op>
absl::Status TimeBatch(const Buffers& device, Op op, double* seconds) {
  if (absl::Status status = op(); !status.ok()) return status;
  cudaEventRecord(device.start, device.stream);
  for (int i = 0; i < kBatch; ++i) {
    if (absl::Status status = op(); !status.ok()) return status;
  }
  cudaEventRecord(device.stop, device.stream);
  if (cudaError_t err = cudaEventSynchronize(device.stop); err != cudaSuccess) {
    return absl::InternalError(cudaGetErrorString(err));
  }
  float ms = 0;
  cudaEventElapsedTime(&ms, device.start, device.stop);
  *seconds = ms / 1e3;
  return absl::OkStatus();
}

absl::Status Memcpy(const Buffers& device, int64_t bytes) {
  const cudaError_t err = cudaMemcpyAsync(
      device.dst, device.src, bytes, cudaMemcpyDeviceToDevice, device.stream);
  return err == cudaSuccess ? absl::OkStatus()
                            : absl::InternalError(cudaGetErrorString(err));
}

// cudaMemcpyAsync's bytes read + written per second for a copy of `bytes`
// bytes: the mean over a few batches, measured once per size.
double MemcpyRate(const Buffers& device, int64_t bytes) {
  static auto* rates = new std::map<int64_t, double>;
  if (const auto it = rates->find(bytes); it != rates->end()) return it->second;
  double total = 0;
  constexpr int kBatches = 5;
  for (int batch = 0; batch < kBatches; ++batch) {
    double seconds = 0;
    if (!TimeBatch(
             device, [&] { return Memcpy(device, bytes); }, &seconds)
             .ok()) {
      return 0;
    }
    total += seconds;
  }
  return (*rates)[bytes] = 2.0 * bytes * kBatch * kBatches / total;
}

// The benchmark loop over `op`, which reads + writes `traffic` bytes per
// call: kBatch iterations (calls) at a time, timed on the device.
template <typename Op>
void RunOnDevice(benchmark::State& state, int64_t traffic, Op op) {
  if (cuda::DeviceCount() == 0) {
    state.SkipWithError(("no CUDA device: " + cuda::NoDeviceReason()).c_str());
    return;
  }
  const Buffers& device = Device();
  double total = 0;
  while (state.KeepRunningBatch(kBatch)) {
    double seconds = 0;
    if (const absl::Status status = TimeBatch(device, op, &seconds);
        !status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    state.SetIterationTime(seconds);
    total += seconds;
  }
  state.SetBytesProcessed(state.iterations() * traffic);
  const double rate = state.iterations() * traffic / total;
  if (const double memcpy_rate = MemcpyRate(device, traffic / 2);
      memcpy_rate > 0) {
    state.counters["vs_memcpy"] = rate / memcpy_rate;
  }
}

const Layout& Matrix() {
  static const Layout* matrix =
      new Layout(Layout::Contiguous({kEdge, kEdge}).value());
  return *matrix;
}

void Convert(benchmark::State& state, DType from, DType to) {
  RunOnDevice(state, kNumel * (ItemSize(from) + ItemSize(to)), [&] {
    const Buffers& device = Device();
    return ConvertCuda(device.src, Matrix(), from, device.dst, Matrix(), to,
                       device.stream);
  });
}

void BM_ConvertCudaFloat32ToBFloat16(benchmark::State& state) {
  Convert(state, DType::kFloat32, DType::kBFloat16);
}

void BM_ConvertCudaBFloat16ToFloat32(benchmark::State& state) {
  Convert(state, DType::kBFloat16, DType::kFloat32);
}

void BM_CopyStridedCudaTransposedFloat32(benchmark::State& state) {
  const Layout transposed = Matrix().Transpose(0, 1).value();
  RunOnDevice(state, 2 * kNumel * 4, [&] {
    const Buffers& device = Device();
    return CopyStridedCuda(device.src, transposed, device.dst, Matrix(), 4,
                           device.stream);
  });
}

// The baseline: cudaMemcpyAsync of state.range(0) bytes, device to device.
void BM_CudaMemcpyAsync(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  RunOnDevice(state, 2 * bytes, [&] { return Memcpy(Device(), bytes); });
}

BENCHMARK(BM_ConvertCudaFloat32ToBFloat16)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConvertCudaBFloat16ToFloat32)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyStridedCudaTransposedFloat32)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// The traffic of a float32 <-> bfloat16 conversion (48 MiB each way) and of
// the transposed copy (64 MiB each way).
BENCHMARK(BM_CudaMemcpyAsync)
    ->Arg(kNumel * 3)
    ->Arg(kNumel * 4)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace genesis::storage::kernels

BENCHMARK_MAIN();
