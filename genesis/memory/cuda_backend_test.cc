// CudaDeviceBackend, PinnedHostBackend and CudaStreamEvents on real GPUs. Without a GPU
// (or driver) the tests that need one skip, saying why, and the rest check that every
// entry point fails cleanly instead.

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/cuda_backend.h"
#include "genesis/memory/cuda_stream_events.h"
#include "genesis/memory/pinned_backend.h"
#include "genesis/memory/pinned_mode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// More memory than any machine has: allocations of it must fail as out of memory.
constexpr size_t kAbsurd = size_t{1} << 50;  // 1 PiB.

bool Aligned(const void* ptr, size_t alignment) {
  return reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

bool Contains(const absl::Status& status, std::string_view needle) {
  return std::string(status.message()).find(needle) != std::string::npos;
}

// ---------------------------------------------------------------------------------------
// Without a usable GPU: everything fails cleanly, nothing crashes.

TEST(CudaBackendTest, CreateRejectsDevicesThatDoNotExist) {
  for (int device : {-1, cuda::DeviceCount(), 1'000}) {
    absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend =
        CudaDeviceBackend::Create(device);
    ASSERT_FALSE(backend.ok()) << device;
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kOutOfRange) << backend.status();
    EXPECT_TRUE(Contains(backend.status(), "cuda:")) << backend.status();

    absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events =
        CudaStreamEvents::Create(device);
    ASSERT_FALSE(events.ok()) << device;
    EXPECT_EQ(events.status().code(), absl::StatusCode::kOutOfRange) << events.status();
  }
}

TEST(PinnedBackendTest, WithoutADeviceEverythingIsUnavailable) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is visible";
  for (PinnedMode mode : {PinnedMode::kAlloc, PinnedMode::kRegister}) {
    absl::StatusOr<std::unique_ptr<PinnedHostBackend>> backend =
        PinnedHostBackend::Create(mode);
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
  }
  std::vector<char> pageable(4096);
  absl::StatusOr<bool> pinned = PinnedHostBackend::IsPinned(pageable.data());
  ASSERT_FALSE(pinned.ok());
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kUnavailable) << pinned.status();
}

TEST(PinnedBackendTest, NullIsNeverPinned) {
  absl::StatusOr<bool> pinned = PinnedHostBackend::IsPinned(nullptr);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_FALSE(*pinned);
}

// ---------------------------------------------------------------------------------------
// CudaDeviceBackend.

TEST(CudaBackendTest, Describes) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int device = 0; device < cuda::DeviceCount(); ++device) {
    absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend =
        CudaDeviceBackend::Create(device);
    ASSERT_TRUE(backend.ok()) << backend.status();
    const Backend& b = **backend;
    EXPECT_EQ(b.device(), Device::Cuda(device));
    EXPECT_EQ(b.kind(), MemoryKind::kDevice);
    EXPECT_EQ(b.alignment(), 512u);
    EXPECT_THAT(std::string(b.name()),
                ::testing::StartsWith("cuda:" + std::to_string(device) + " device (cudaMalloc"));
  }
}

TEST(CudaBackendTest, AllocatesAlignedDeviceMemoryOnItsDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int device = 0; device < cuda::DeviceCount(); ++device) {
    absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend =
        CudaDeviceBackend::Create(device);
    ASSERT_TRUE(backend.ok()) << backend.status();
    for (size_t bytes : {size_t{1}, size_t{512}, kMiB + 1, 2 * kMiB, 64 * kMiB}) {
      SCOPED_TRACE(testing::Message() << "cuda:" << device << ", " << bytes << " bytes");
      absl::StatusOr<void*> segment = (*backend)->AllocateSegment(bytes);
      ASSERT_TRUE(segment.ok()) << segment.status();
      ASSERT_NE(*segment, nullptr);
      EXPECT_TRUE(Aligned(*segment, (*backend)->alignment())) << *segment;

      cudaPointerAttributes attributes;
      std::memset(&attributes, 0, sizeof(attributes));
      ASSERT_EQ(cudaPointerGetAttributes(&attributes, *segment), cudaSuccess);
      EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
      EXPECT_EQ(attributes.device, device);
      // The memory is usable: write it, read the end back.
      {
        absl::StatusOr<cuda::DeviceGuard> guard = cuda::DeviceGuard::Create(device);
        ASSERT_TRUE(guard.ok()) << guard.status();
        ASSERT_EQ(cudaMemset(*segment, 0x5a, bytes), cudaSuccess);
        unsigned char last = 0;
        ASSERT_EQ(cudaMemcpy(&last, static_cast<unsigned char*>(*segment) + bytes - 1, 1,
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(last, 0x5a);
      }
      absl::StatusOr<bool> pinned = PinnedHostBackend::IsPinned(*segment);
      ASSERT_TRUE(pinned.ok()) << pinned.status();
      EXPECT_FALSE(*pinned) << "device memory is not pinned host memory";
      (*backend)->FreeSegment(*segment, bytes);
    }
  }
}

TEST(CudaBackendTest, LeavesTheCurrentDeviceAlone) {
  GENESIS_SKIP_WITHOUT_GPU();
  const absl::StatusOr<int> before = cuda::CurrentDevice();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend =
      CudaDeviceBackend::Create(cuda::DeviceCount() - 1);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<void*> segment = (*backend)->AllocateSegment(kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ(cuda::CurrentDevice().value(), *before);
  (*backend)->FreeSegment(*segment, kMiB);
  EXPECT_EQ(cuda::CurrentDevice().value(), *before);
  ASSERT_TRUE((*backend)->MemoryInfo().ok());
  EXPECT_EQ(cuda::CurrentDevice().value(), *before);
}

TEST(CudaBackendTest, OutOfMemoryIsResourceExhaustedAndRecoverable) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend = CudaDeviceBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<void*> huge = (*backend)->AllocateSegment(kAbsurd);
  ASSERT_FALSE(huge.ok()) << "allocated 1 PiB of device memory?";
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_TRUE(Contains(huge.status(), "cudaMalloc")) << huge.status();
  EXPECT_TRUE(Contains(huge.status(), "cuda:0")) << huge.status();
  // The error was cleared, and the backend (and CUDA) still work.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  absl::StatusOr<void*> small = (*backend)->AllocateSegment(kMiB);
  ASSERT_TRUE(small.ok()) << small.status();
  (*backend)->FreeSegment(*small, kMiB);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaBackendTest, ZeroBytesIsInvalid) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend = CudaDeviceBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->AllocateSegment(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, MemoryInfoIsSane) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int device = 0; device < cuda::DeviceCount(); ++device) {
    absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> backend =
        CudaDeviceBackend::Create(device);
    ASSERT_TRUE(backend.ok()) << backend.status();
    absl::StatusOr<BackendMemoryInfo> info = (*backend)->MemoryInfo();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_GT(info->total_bytes, 0u);
    EXPECT_GT(info->free_bytes, 0u);
    EXPECT_LE(info->free_bytes, info->total_bytes);
  }
}

// ---------------------------------------------------------------------------------------
// PinnedHostBackend, in both modes.

class PinnedBackendModeTest : public testing::TestWithParam<PinnedMode> {};

INSTANTIATE_TEST_SUITE_P(Modes, PinnedBackendModeTest,
                         testing::Values(PinnedMode::kAlloc, PinnedMode::kRegister),
                         [](const testing::TestParamInfo<PinnedMode>& info) {
                           return std::string(PinnedModeName(info.param));
                         });

TEST_P(PinnedBackendModeTest, Describes) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<PinnedHostBackend>> backend =
      PinnedHostBackend::Create(GetParam());
  ASSERT_TRUE(backend.ok()) << backend.status();
  const Backend& b = **backend;
  EXPECT_EQ(b.device(), Device::Cpu());
  EXPECT_EQ(b.kind(), MemoryKind::kPinnedHost);
  EXPECT_GE(b.alignment(), 512u);
  EXPECT_EQ((*backend)->mode(), GetParam());
  EXPECT_EQ(b.name(), GetParam() == PinnedMode::kAlloc ? "pinned host (cudaHostAlloc)"
                                                       : "pinned host (cudaHostRegister)");
}

TEST_P(PinnedBackendModeTest, AllocatesPinnedMemory) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<PinnedHostBackend>> backend =
      PinnedHostBackend::Create(GetParam());
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (size_t bytes : {size_t{1}, size_t{4097}, 8 * kMiB}) {
    SCOPED_TRACE(testing::Message() << bytes << " bytes");
    absl::StatusOr<void*> segment = (*backend)->AllocateSegment(bytes);
    ASSERT_TRUE(segment.ok()) << segment.status();
    ASSERT_NE(*segment, nullptr);
    EXPECT_TRUE(Aligned(*segment, (*backend)->alignment())) << *segment;
    std::memset(*segment, 0x3c, bytes);  // Host-writable, every byte.

    absl::StatusOr<bool> pinned = PinnedHostBackend::IsPinned(*segment);
    ASSERT_TRUE(pinned.ok()) << pinned.status();
    EXPECT_TRUE(*pinned);
    pinned = PinnedHostBackend::IsPinned(static_cast<char*>(*segment) + bytes - 1);
    ASSERT_TRUE(pinned.ok()) << pinned.status();
    EXPECT_TRUE(*pinned) << "the last byte of the segment";
    (*backend)->FreeSegment(*segment, bytes);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_P(PinnedBackendModeTest, CopiesToAndFromTheDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<PinnedHostBackend>> backend =
      PinnedHostBackend::Create(GetParam());
  ASSERT_TRUE(backend.ok()) << backend.status();
  constexpr size_t kBytes = 4 * kMiB;
  absl::StatusOr<void*> source = (*backend)->AllocateSegment(kBytes);
  absl::StatusOr<void*> target = (*backend)->AllocateSegment(kBytes);
  ASSERT_TRUE(source.ok() && target.ok());
  auto* in = static_cast<unsigned char*>(*source);
  auto* out = static_cast<unsigned char*>(*target);
  for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
  std::memset(out, 0, kBytes);

  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<cuda::DeviceGuard> guard = cuda::DeviceGuard::Create(0);
  ASSERT_TRUE(guard.ok()) << guard.status();
  void* device_buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&device_buffer, kBytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(device_buffer, in, kBytes, cudaMemcpyHostToDevice,
                            stream->native()),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(out, device_buffer, kBytes, cudaMemcpyDeviceToHost,
                            stream->native()),
            cudaSuccess);
  EXPECT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(std::memcmp(in, out, kBytes), 0);
  EXPECT_EQ(cudaFree(device_buffer), cudaSuccess);
  (*backend)->FreeSegment(*source, kBytes);
  (*backend)->FreeSegment(*target, kBytes);
}

TEST_P(PinnedBackendModeTest, OutOfMemoryIsResourceExhaustedAndRecoverable) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<PinnedHostBackend>> backend =
      PinnedHostBackend::Create(GetParam());
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<void*> huge = (*backend)->AllocateSegment(kAbsurd);
  ASSERT_FALSE(huge.ok()) << "pinned 1 PiB of host memory?";
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  absl::StatusOr<void*> small = (*backend)->AllocateSegment(kMiB);
  ASSERT_TRUE(small.ok()) << small.status();
  (*backend)->FreeSegment(*small, kMiB);
  EXPECT_EQ((*backend)->AllocateSegment(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(PinnedBackendModeTest, MemoryInfoIsTheHosts) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<PinnedHostBackend>> backend =
      PinnedHostBackend::Create(GetParam());
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<BackendMemoryInfo> info = (*backend)->MemoryInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 64 * kMiB);
  EXPECT_GT(info->free_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

TEST(PinnedBackendTest, PageableMemoryIsNotPinned) {
  GENESIS_SKIP_WITHOUT_GPU();
  void* heap = std::malloc(kMiB);
  ASSERT_NE(heap, nullptr);
  absl::StatusOr<bool> pinned = PinnedHostBackend::IsPinned(heap);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_FALSE(*pinned);
  std::free(heap);
  int on_stack = 0;
  pinned = PinnedHostBackend::IsPinned(&on_stack);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_FALSE(*pinned);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---------------------------------------------------------------------------------------
// CudaStreamEvents.

// Blocks a stream from the host: work queued after Block() waits until Unblock() (or
// until a deadline, so that a failing test cannot hang the process).
class StreamBlocker {
 public:
  // Call at most once.
  absl::Status Block(cudaStream_t stream) {
    const cudaError_t err = cudaLaunchHostFunc(stream, &StreamBlocker::Wait, this);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::InternalError(std::string("cudaLaunchHostFunc: ") + cudaGetErrorName(err));
    }
    stream_ = stream;
    return absl::OkStatus();
  }
  void Unblock() { released_.store(true); }
  // Unblocks and waits for the stream, so that the host function never outlives `this`.
  ~StreamBlocker() {
    Unblock();
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    (void)cudaGetLastError();
  }

 private:
  static void CUDART_CB Wait(void* self) {
    auto* blocker = static_cast<StreamBlocker*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!blocker->released_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::atomic<bool> released_{false};
  cudaStream_t stream_ = nullptr;
};

TEST(CudaStreamEventsTest, RecordQuerySynchronizeRelease) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int device = 0; device < cuda::DeviceCount(); ++device) {
    absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events =
        CudaStreamEvents::Create(device);
    ASSERT_TRUE(events.ok()) << events.status();
    EXPECT_EQ((*events)->device(), device);
    absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(device);
    ASSERT_TRUE(stream.ok()) << stream.status();
    const StreamId id = reinterpret_cast<StreamId>(stream->native());

    absl::StatusOr<EventId> event = (*events)->Record(id);
    ASSERT_TRUE(event.ok()) << event.status();
    EXPECT_TRUE((*events)->Synchronize(*event).ok());
    absl::StatusOr<bool> done = (*events)->Query(*event);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(*done);
    (*events)->Release(*event);
    EXPECT_EQ((*events)->event_count(), 1u);
    EXPECT_EQ((*events)->free_event_count(), 1u);
  }
}

TEST(CudaStreamEventsTest, QueryIsFalseWhileTheStreamIsBusy) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events = CudaStreamEvents::Create(0);
  ASSERT_TRUE(events.ok()) << events.status();
  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  StreamBlocker blocker;
  ASSERT_TRUE(blocker.Block(stream->native()).ok());

  absl::StatusOr<EventId> event =
      (*events)->Record(reinterpret_cast<StreamId>(stream->native()));
  ASSERT_TRUE(event.ok()) << event.status();
  absl::StatusOr<bool> done = (*events)->Query(*event);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(*done);
  // cudaErrorNotReady was not left behind as the thread's last error.
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);

  blocker.Unblock();
  EXPECT_TRUE((*events)->Synchronize(*event).ok());
  done = (*events)->Query(*event);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  (*events)->Release(*event);
}

TEST(CudaStreamEventsTest, ReusesReleasedEvents) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events = CudaStreamEvents::Create(0);
  ASSERT_TRUE(events.ok()) << events.status();
  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const StreamId id = reinterpret_cast<StreamId>(stream->native());

  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<EventId> event = (*events)->Record(id);
    ASSERT_TRUE(event.ok()) << event.status();
    ASSERT_TRUE((*events)->Synchronize(*event).ok());
    (*events)->Release(*event);
  }
  EXPECT_EQ((*events)->event_count(), 1u) << "one event, recorded 100 times";

  // Outstanding markers need events of their own; releasing returns them all.
  std::vector<EventId> held;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<EventId> event = (*events)->Record(id);
    ASSERT_TRUE(event.ok()) << event.status();
    held.push_back(*event);
  }
  EXPECT_EQ((*events)->event_count(), 3u);
  EXPECT_EQ((*events)->free_event_count(), 0u);
  for (EventId event : held) (*events)->Release(event);
  EXPECT_EQ((*events)->free_event_count(), 3u);
}

TEST(CudaStreamEventsTest, DefaultStreamAndCurrentDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int last = cuda::DeviceCount() - 1;
  const absl::StatusOr<int> before = cuda::CurrentDevice();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events =
      CudaStreamEvents::Create(last);
  ASSERT_TRUE(events.ok()) << events.status();
  // kNoStream (0): the legacy default stream of the events' device.
  absl::StatusOr<EventId> event = (*events)->Record(kNoStream);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE((*events)->Synchronize(*event).ok());
  (*events)->Release(*event);
  EXPECT_EQ(cuda::CurrentDevice().value(), *before);
}

TEST(CudaStreamEventsTest, BadIds) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events = CudaStreamEvents::Create(0);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ((*events)->Query(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*events)->Query(12345).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*events)->Synchronize(7).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<EventId> event = (*events)->Record(kNoStream);
  ASSERT_TRUE(event.ok()) << event.status();
  (*events)->Release(*event);
  EXPECT_EQ((*events)->Query(*event).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*events)->Synchronize(*event).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CudaStreamEventsTest, ManyThreads) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaStreamEvents>> events = CudaStreamEvents::Create(0);
  ASSERT_TRUE(events.ok()) << events.status();
  constexpr int kThreads = 4;
  std::vector<cuda::Stream> streams;
  for (int t = 0; t < kThreads; ++t) {
    absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const StreamId id = reinterpret_cast<StreamId>(streams[t].native());
      for (int i = 0; i < 200; ++i) {
        absl::StatusOr<EventId> event = (*events)->Record(id);
        if (!event.ok()) {
          ++failures;
          continue;
        }
        absl::StatusOr<bool> done = (*events)->Query(*event);
        if (!done.ok() || !(*events)->Synchronize(*event).ok()) ++failures;
        (*events)->Release(*event);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE((*events)->event_count(), static_cast<size_t>(kThreads));
  EXPECT_EQ((*events)->free_event_count(), (*events)->event_count());
}

}  // namespace
}  // namespace genesis::memory
