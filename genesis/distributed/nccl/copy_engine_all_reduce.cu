#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/driver.h"
#include "genesis/distributed/nccl/copy_engine_all_reduce.h"
#include "genesis/distributed/nccl/device_arithmetic.cuh"

namespace genesis::distributed::nccl_backend {
namespace {

constexpr int kThreads = 512;

// The sum of one chunk: `in[q]` is rank q's chunk, the rank's own buffer among them;
// the sum goes to `out[0]` (the buffer) and `out[1]` (the rank's slot, which the peers
// copy).
struct SumArgs {
  const char* in[kCopyEngineMaxRanks];
  char* out[2];
  size_t bytes;
  int ranks;
  bool aligned;  // Every pointer and `bytes` a multiple of 16.
};

// Sums `kN` elements of T at element `i` of every input, in rank order, and stores them.
template <typename T, int kN, typename Load>
__device__ void SumAt(const SumArgs& a, size_t i, Load load) {
  typename Accumulate<T>::type acc[kN];
  T v[kN];
  load(a.in[0], i, v);
#pragma unroll
  for (int e = 0; e < kN; ++e) acc[e] = Widen(v[e]);
  for (int q = 1; q < a.ranks; ++q) {
    load(a.in[q], i, v);
#pragma unroll
    for (int e = 0; e < kN; ++e) acc[e] += Widen(v[e]);
  }
#pragma unroll
  for (int e = 0; e < kN; ++e) v[e] = Narrow<T>(acc[e]);
  for (char* out : a.out) {
    if constexpr (kN * sizeof(T) == 16) {
      *reinterpret_cast<uint4*>(out + i * 16) = *reinterpret_cast<const uint4*>(v);
    } else {
      reinterpret_cast<T*>(out)[i] = v[0];
    }
  }
}

template <typename T>
__global__ void SumChunks(SumArgs a) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (a.aligned) {
    constexpr int kN = 16 / sizeof(T);
    for (size_t i = first; i < a.bytes / 16; i += stride) {
      SumAt<T, kN>(a, i, [](const char* p, size_t at, T* v) {
        *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(p + at * 16);
      });
    }
  } else {
    for (size_t i = first; i < a.bytes / sizeof(T); i += stride) {
      SumAt<T, 1>(a, i,
                  [](const char* p, size_t at, T* v) { *v = reinterpret_cast<const T*>(p)[at]; });
    }
  }
}

bool LaunchSum(DType dtype, const SumArgs& a, unsigned blocks, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat16:
      SumChunks<__half><<<blocks, kThreads, 0, stream>>>(a);
      return true;
    case DType::kBFloat16:
      SumChunks<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(a);
      return true;
    case DType::kFloat32:
      SumChunks<float><<<blocks, kThreads, 0, stream>>>(a);
      return true;
    case DType::kFloat64:
      SumChunks<double><<<blocks, kThreads, 0, stream>>>(a);
      return true;
    default:
      return false;
  }
}

// Loads the additions' kernels now: CUDA loads a kernel when it is first launched
// (lazy loading), and loading waits for the device, which could wait on a flag that
// only work this process has still to queue would set: the host would never return.
cudaError_t LoadSumKernels() {
  cudaFuncAttributes attributes;
  for (cudaError_t e : {cudaFuncGetAttributes(&attributes, SumChunks<__half>),
                        cudaFuncGetAttributes(&attributes, SumChunks<__nv_bfloat16>),
                        cudaFuncGetAttributes(&attributes, SumChunks<float>),
                        cudaFuncGetAttributes(&attributes, SumChunks<double>)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

using WaitValueFn = decltype(&::cuStreamWaitValue32);
using WriteValueFn = decltype(&::cuStreamWriteValue32);

}  // namespace

// The rank's streams: one for the copies into its peers, one for its additions, one for
// the copies of the peers' sums, one for Release; events that join them to the caller's.
struct CopyEngineAllReduce::Streams {
  cudaStream_t push = nullptr;
  cudaStream_t sum = nullptr;
  cudaStream_t pull = nullptr;
  cudaStream_t release = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t summed = nullptr;
  cudaEvent_t pulled = nullptr;
  uint32_t* release_value = nullptr;  // Pinned host memory, kCopyEngineAlignment bytes.
  WaitValueFn wait = nullptr;
  WriteValueFn write = nullptr;
  unsigned blocks = 0;
  int device = 0;
  std::atomic<bool> released{false};
};

CopyEngineAllReduce::CopyEngineAllReduce(const CopyEngineWindows& windows)
    : windows_(windows), streams_(std::make_unique<Streams>()) {}

absl::StatusOr<std::unique_ptr<CopyEngineAllReduce>> CopyEngineAllReduce::Create(
    const CopyEngineWindows& windows) {
  const CopyEngineLayout* layout = windows.layout;
  if (layout == nullptr || windows.rank < 0 || windows.rank >= layout->ranks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the copy engines' all_reduce needs a layout and a rank among its ranks, not ",
                     windows.rank));
  }
  for (int q = 0; q < layout->ranks(); ++q) {
    if (windows.windows[q] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the copy engines' all_reduce has no window of rank ", q));
    }
  }
  auto ce = std::unique_ptr<CopyEngineAllReduce>(new CopyEngineAllReduce(windows));
  Streams& s = *ce->streams_;
  GENESIS_RETURN_IF_ERROR(cuda::ResolveDriverFunction("cuStreamWaitValue32", &s.wait));
  GENESIS_RETURN_IF_ERROR(cuda::ResolveDriverFunction("cuStreamWriteValue32", &s.write));
  GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(cudaGetDevice(&s.device), "cudaGetDevice"));
  GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(LoadSumKernels(), "cudaFuncGetAttributes", s.device));
  int sms = 0, least = 0, greatest = 0;
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s.device),
                       "cudaDeviceGetAttribute", s.device));
  s.blocks = static_cast<unsigned>(std::max(1, 2 * sms));
  GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                                           "cudaDeviceGetStreamPriorityRange", s.device));
  for (cudaStream_t* stream : {&s.push, &s.sum, &s.pull, &s.release}) {
    GENESIS_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaStreamCreateWithPriority(stream, cudaStreamNonBlocking, greatest),
                         "cudaStreamCreateWithPriority", s.device));
  }
  for (cudaEvent_t* event : {&s.start, &s.summed, &s.pulled}) {
    GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaEventCreateWithFlags(event, cudaEventDisableTiming), "cudaEventCreate", s.device));
  }
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaHostAlloc(reinterpret_cast<void**>(&s.release_value),
                                     kCopyEngineAlignment, cudaHostAllocDefault),
                       "cudaHostAlloc", s.device));
  char* flags = windows.windows[windows.rank] + layout->FlagsOffset();
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaMemset(flags, 0, kCopyEngineAlignment), "cudaMemset", s.device));
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize", s.device));
  return ce;
}

CopyEngineAllReduce::~CopyEngineAllReduce() {
  Streams& s = *streams_;
  for (cudaStream_t stream : {s.push, s.sum, s.pull, s.release}) {
    if (stream == nullptr) continue;
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  for (cudaEvent_t event : {s.start, s.summed, s.pulled}) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (s.release_value != nullptr) cudaFreeHost(s.release_value);
}

absl::Status CopyEngineAllReduce::AllReduce(void* data, size_t bytes, DType dtype, ReduceOp op,
                                            CUstream_st* stream) {
  Streams& s = *streams_;
  const CopyEngineLayout& layout = *windows_.layout;
  const size_t element = ItemSize(dtype);
  if (!CopyEngineReduces(dtype, op) || bytes % element != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the copy engines' all_reduce sums float16, bfloat16, float32 and float64 "
        "(whole elements), not ",
        bytes, " bytes of ", ToAbsl(DTypeName(dtype)), " with ", ToAbsl(ReduceOpName(op))));
  }
  if (s.released.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        "the copy engines' all_reduce was released (the group failed)");
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing", s.device));
  if (capture != cudaStreamCaptureStatusNone) {
    return absl::FailedPreconditionError(
        "the copy engines' all_reduce cannot be captured: its pieces' numbers change with every "
        "all_reduce");
  }
  if (bytes == 0) return absl::OkStatus();
  const int rank = windows_.rank;
  const int ranks = layout.ranks();
  char* const buffer = static_cast<char*>(data);
  char* const* const w = windows_.windows.data();
  auto flag = [&](int owner, CopyEngineFlag kind, int from) {
    return reinterpret_cast<CUdeviceptr>(w[owner] + layout.FlagOffset(kind, from));
  };
  // Waits on `on` until this rank's flag `kind` of `from` reaches `n`.
  auto wait = [&](cudaStream_t on, CopyEngineFlag kind, int from, uint32_t n) {
    return cuda::DriverStatus(s.wait(on, flag(rank, kind, from), n, CU_STREAM_WAIT_VALUE_GEQ),
                              "cuStreamWaitValue32", s.device);
  };
  // Sets `to`'s flag `kind` of this rank to `n`, on `on`, after what `on` queued before.
  auto tell = [&](cudaStream_t on, int to, CopyEngineFlag kind, uint32_t n) {
    return cuda::DriverStatus(s.write(on, flag(to, kind, rank), n, CU_STREAM_WRITE_VALUE_DEFAULT),
                              "cuStreamWriteValue32", s.device);
  };
  auto copy = [&](char* to, const char* from, size_t n, cudaStream_t on) {
    return n == 0 ? absl::OkStatus()
                  : cuda::CudaStatus(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, on),
                                     "cudaMemcpyAsync", s.device);
  };
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaEventRecord(s.start, stream), "cudaEventRecord", s.device));
  for (cudaStream_t on : {s.push, s.sum, s.pull}) {
    GENESIS_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaStreamWaitEvent(on, s.start, 0), "cudaStreamWaitEvent", s.device));
  }
  const size_t pieces = layout.Pieces(bytes);
  for (size_t k = 0; k < pieces; ++k) {
    const uint32_t n = number_.fetch_add(1, std::memory_order_acq_rel) + 1;
    // 1. This rank's chunks into its peers' slots.
    for (int q = 0; q < ranks; ++q) {
      if (q == rank) continue;
      if (n > 2) GENESIS_RETURN_IF_ERROR(wait(s.push, CopyEngineFlag::kReduced, q, n - 2));
      const CopyEngineChunk c = layout.ChunkOf(bytes, k, q);
      GENESIS_RETURN_IF_ERROR(
          copy(w[q] + layout.SlotOffset(n, rank), buffer + c.offset, c.bytes, s.push));
      GENESIS_RETURN_IF_ERROR(tell(s.push, q, CopyEngineFlag::kArrived, n));
    }
    // 2. The sum of this rank's chunk, once every peer's arrived and every peer copied
    // the sum that was in the slot before.
    for (int p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      GENESIS_RETURN_IF_ERROR(wait(s.sum, CopyEngineFlag::kArrived, p, n));
      if (n > 2) GENESIS_RETURN_IF_ERROR(wait(s.sum, CopyEngineFlag::kPulled, p, n - 2));
    }
    const CopyEngineChunk mine = layout.ChunkOf(bytes, k, rank);
    if (mine.bytes > 0) {
      SumArgs a = {};
      uintptr_t bits = mine.bytes;
      for (int q = 0; q < ranks; ++q) {
        a.in[q] = q == rank ? buffer + mine.offset : w[rank] + layout.SlotOffset(n, q);
        bits |= reinterpret_cast<uintptr_t>(a.in[q]);
      }
      a.out[0] = buffer + mine.offset;
      a.out[1] = w[rank] + layout.SlotOffset(n, rank);
      a.bytes = mine.bytes;
      a.ranks = ranks;
      a.aligned = (bits | reinterpret_cast<uintptr_t>(a.out[1])) % 16 == 0;
      const size_t units = a.aligned ? mine.bytes / 16 : mine.bytes / element;
      const auto blocks =
          static_cast<unsigned>(std::min<size_t>(s.blocks, (units + kThreads - 1) / kThreads));
      LaunchSum(dtype, a, blocks, s.sum);
      GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(cudaGetLastError(), "the sum's launch", s.device));
    }
    for (int p = 0; p < ranks; ++p) {
      if (p != rank) GENESIS_RETURN_IF_ERROR(tell(s.sum, p, CopyEngineFlag::kReduced, n));
    }
    // 3. The peers' sums into this rank's buffer.
    for (int p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      GENESIS_RETURN_IF_ERROR(wait(s.pull, CopyEngineFlag::kReduced, p, n));
      const CopyEngineChunk c = layout.ChunkOf(bytes, k, p);
      GENESIS_RETURN_IF_ERROR(
          copy(buffer + c.offset, w[p] + layout.SlotOffset(n, p), c.bytes, s.pull));
      GENESIS_RETURN_IF_ERROR(tell(s.pull, p, CopyEngineFlag::kPulled, n));
    }
  }
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaEventRecord(s.summed, s.sum), "cudaEventRecord", s.device));
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaEventRecord(s.pulled, s.pull), "cudaEventRecord", s.device));
  for (cudaEvent_t event : {s.summed, s.pulled}) {
    GENESIS_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent", s.device));
  }
  return absl::OkStatus();
}

absl::Status CopyEngineAllReduce::Release() {
  Streams& s = *streams_;
  s.released.store(true, std::memory_order_release);
  // The waits compare cyclically ((int32_t)(flag - n) >= 0): a flag 2^30 past the last
  // piece passes every wait queued so far and the next 2^30 pieces'.
  const uint32_t past = number_.load(std::memory_order_acquire) + (uint32_t{1} << 30);
  std::fill_n(s.release_value, kCopyEngineAlignment / 4, past);
  char* flags = windows_.windows[windows_.rank] + windows_.layout->FlagsOffset();
  return cuda::CudaStatus(cudaMemcpyAsync(flags, s.release_value, kCopyEngineAlignment,
                                          cudaMemcpyHostToDevice, s.release),
                          "cudaMemcpyAsync", s.device);
}

}  // namespace genesis::distributed::nccl_backend
