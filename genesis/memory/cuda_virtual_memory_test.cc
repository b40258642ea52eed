// CudaVirtualMemory on a GPU, and device pools over it: memory that kernels, copies and
// peers can use, chunks that come and go, and the expandable pool's behaviour on real
// device memory. Skips (saying why) without a GPU.
#include "genesis/memory/cuda_virtual_memory.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/peer_access.h"
#include "genesis/cuda/test_util.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/cuda_backend.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::memory {
namespace {

std::unique_ptr<CudaVirtualMemory> MakeVm(int device) {
  auto vm = CudaVirtualMemory::Create(device);
  EXPECT_TRUE(vm.ok()) << vm.status();
  return vm.ok() ? *std::move(vm) : nullptr;
}

// Writes `bytes` of `value` at `p` with cudaMemset and reads them back.
void ExpectWritable(void* p, size_t bytes, int value) {
  ASSERT_EQ(cudaMemset(p, value, bytes), cudaSuccess);
  std::vector<unsigned char> back(bytes);
  ASSERT_EQ(cudaMemcpy(back.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < bytes; i += 4099) ASSERT_EQ(back[i], value) << i;
  ASSERT_EQ(back[bytes - 1], value);
}

TEST(CudaVirtualMemoryTest, MapsUsableMemoryAndReturnsIt) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto vm = MakeVm(0);
  ASSERT_NE(vm, nullptr);
  const size_t chunk = vm->granularity();
  EXPECT_GE(chunk, size_t{4096});
  EXPECT_EQ(chunk & (chunk - 1), 0u);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  auto base = vm->Reserve(64 * chunk);
  ASSERT_TRUE(base.ok()) << base.status();
  char* p = static_cast<char*>(*base);
  ASSERT_TRUE(vm->Map(p, 16 * chunk).ok());
  ExpectWritable(p, 16 * chunk, 0x3c);
  // Unmapping the middle returns its memory; the ends stay intact.
  ASSERT_TRUE(vm->Unmap(p + 4 * chunk, 8 * chunk).ok());
  std::vector<unsigned char> head(chunk);
  ASSERT_EQ(cudaMemcpy(head.data(), p, chunk, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(head[chunk - 1], 0x3c);
  ASSERT_TRUE(vm->Map(p + 4 * chunk, 8 * chunk).ok());
  ExpectWritable(p + 4 * chunk, 8 * chunk, 0x11);
  ASSERT_TRUE(vm->Unmap(p, 16 * chunk).ok());
  vm->Unreserve(p, 64 * chunk);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_GE(free_after + 4 * chunk, free_before);
}

// Holds a stream inside a host function until the test opens it (or 20 s pass).
struct StreamLatch {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool opened_by_test = false;  // False if the host function gave up waiting.
  bool finished = false;

  static void CUDART_CB Hold(void* self) {
    auto* latch = static_cast<StreamLatch*>(self);
    std::unique_lock<std::mutex> lock(latch->mu);
    latch->opened_by_test =
        latch->cv.wait_for(lock, std::chrono::seconds(20), [&] { return latch->open; });
    latch->finished = true;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  bool Finished() {
    std::lock_guard<std::mutex> lock(mu);
    return finished;
  }
};

// Notes whether the queued work had finished when a piece was about to go.
class OrderListener : public PieceListener {
 public:
  explicit OrderListener(StreamLatch& latch) : latch_(latch) {}
  void OnMapped(const Piece&) override {}
  void OnUnmapping(const Piece&) override {
    ++unmapping;
    after_work = after_work && latch_.Finished();
  }
  std::atomic<int> unmapping{0};
  std::atomic<bool> after_work{true};

 private:
  StreamLatch& latch_;
};

TEST(CudaVirtualMemoryTest, UnmapReturnsWithoutWaitingForQueuedWork) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto vm = MakeVm(0);
  ASSERT_NE(vm, nullptr);
  const size_t chunk = vm->granularity();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto base = vm->Reserve(8 * chunk);
  ASSERT_TRUE(base.ok()) << base.status();
  char* p = static_cast<char*>(*base);
  ASSERT_TRUE(vm->Map(p, 4 * chunk).ok());
  StreamLatch latch;
  OrderListener listener(latch);
  vm->AddPieceListener(&listener);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(p, 0x7e, 2 * chunk, stream), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(stream, &StreamLatch::Hold, &latch), cudaSuccess);
  // The work on `stream` cannot finish before the latch opens: an Unmap that waited for
  // the device would return only when the host function gave up.
  ASSERT_TRUE(vm->Unmap(p + 2 * chunk, 2 * chunk).ok());
  EXPECT_EQ(listener.unmapping.load(), 0);
  // Mapping elsewhere goes on meanwhile; mapping over the pending pieces waits for them.
  ASSERT_TRUE(vm->Map(p + 4 * chunk, 2 * chunk).ok());
  latch.Open();
  ASSERT_TRUE(vm->Map(p + 2 * chunk, 2 * chunk).ok());
  EXPECT_EQ(listener.unmapping.load(), 2);  // Two pieces of one chunk.
  EXPECT_TRUE(listener.after_work.load());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(latch.opened_by_test);
  ExpectWritable(p, 6 * chunk, 0x21);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  vm->RemovePieceListener(&listener);
  ASSERT_TRUE(vm->FinishUnmaps().ok());
}

TEST(CudaVirtualMemoryTest, RejectsMisuse) {
  GENESIS_SKIP_WITHOUT_GPU();
  EXPECT_EQ(CudaVirtualMemory::Create(cuda::DeviceCount()).status().code(),
            absl::StatusCode::kOutOfRange);
  auto vm = MakeVm(0);
  ASSERT_NE(vm, nullptr);
  const size_t chunk = vm->granularity();
  EXPECT_FALSE(vm->Reserve(chunk + 1).ok());
  auto base = vm->Reserve(4 * chunk);
  ASSERT_TRUE(base.ok());
  char* p = static_cast<char*>(*base);
  EXPECT_EQ(vm->Map(p + 512, chunk).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(vm->Unmap(p, chunk).code(), absl::StatusCode::kInvalidArgument);  // Not mapped.
  // The destructor frees the reservation.
}

TEST(CudaVirtualMemoryTest, OutOfMemoryIsResourceExhaustedAndNothingStaysMapped) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto vm = MakeVm(0);
  ASSERT_NE(vm, nullptr);
  const size_t chunk = vm->granularity();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  const size_t bytes = (total / chunk + 16) * chunk;  // More than the device has.
  auto base = vm->Reserve(bytes);
  ASSERT_TRUE(base.ok()) << base.status();
  const absl::Status status = vm->Map(*base, bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_GE(free_after + 64 * chunk, free_bytes);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaVirtualMemoryTest, ExpandablePoolMovesMemoryOnTheDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto backend = CudaDeviceBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  AllocatorOptions options;
  options.thread_cache_blocks = 0;
  options.expandable_segments = ExpandableSegments::kOn;
  options.expandable_min_map = 0;  // Maps just what each request needs: 28 MiB below.
  auto pool = CachingAllocator::Create(*std::move(backend), options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  CachingAllocator& p = **pool;
  constexpr size_t kMiB8 = size_t{8} << 20;
  void* a = *p.Allocate(kMiB8);
  void* b = *p.Allocate(kMiB8);
  void* c = *p.Allocate(kMiB8);
  ASSERT_TRUE(p.Free(b).ok());
  void* d = *p.Allocate(12 << 20);  // Takes b's memory, mapped after c.
  EXPECT_EQ(static_cast<char*>(d), static_cast<char*>(a) + 3 * kMiB8);
  EXPECT_EQ(p.Stats().all.reserved_bytes.current, int64_t{28} << 20);
  ExpectWritable(d, 12 << 20, 0x7e);
  ExpectWritable(a, kMiB8, 0x01);
  for (void* x : {a, c, d}) ASSERT_TRUE(p.Free(x).ok());
  EXPECT_EQ(CheckPoolInvariants(p), "");
  ASSERT_TRUE(p.EmptyCache().ok());
  EXPECT_EQ(p.Stats().all.reserved_bytes.current, 0);
}

// Copies issued on cuda:1 write `bytes` of cuda:0's memory at `p` and read them back.
void ExpectPeerCopiesWork(void* p, size_t bytes, unsigned char value) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* remote = nullptr;
  ASSERT_EQ(cudaMalloc(&remote, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(remote, value, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeer(p, 0, remote, 1, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(remote, 0, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(remote, p, bytes, cudaMemcpyDefault), cudaSuccess);
  std::vector<unsigned char> back(bytes);
  ASSERT_EQ(cudaMemcpy(back.data(), remote, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[0], value);
  EXPECT_EQ(back[bytes - 1], value);
  ASSERT_EQ(cudaFree(remote), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// Mapped memory is opened to a peer once peer access from it is enabled: what was mapped
// before, and what is mapped after.
TEST(CudaVirtualMemoryTest, PeersReachMappedMemoryOnceTheirAccessIsEnabled) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  int can = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 1, 0), cudaSuccess);
  if (can == 0) GTEST_SKIP() << "cuda:1 cannot access cuda:0 as a peer";
  auto vm = MakeVm(0);
  ASSERT_NE(vm, nullptr);
  // No test before this one in the binary enables peer access.
  EXPECT_EQ(vm->accessors(), std::vector<int>{0});
  const size_t chunk = vm->granularity();
  auto base = vm->Reserve(8 * chunk);
  ASSERT_TRUE(base.ok());
  char* const p = static_cast<char*>(*base);
  ASSERT_TRUE(vm->Map(p, 2 * chunk).ok());
  ASSERT_TRUE(vm->Map(p + 2 * chunk, chunk).ok());  // Adjacent: one run to open.
  ASSERT_TRUE(vm->Map(p + 5 * chunk, chunk).ok());  // Apart: a second run.
  ASSERT_TRUE(cuda::EnablePeerAccess(1, 0).ok());
  EXPECT_EQ(vm->accessors(), (std::vector<int>{0, 1}));
  ASSERT_TRUE(vm->Map(p + 6 * chunk, 2 * chunk).ok());
  ExpectPeerCopiesWork(p, 3 * chunk, 0x5d);
  ExpectPeerCopiesWork(p + 5 * chunk, 3 * chunk, 0x6e);
  // A virtual memory created afterwards opens its maps to the peer from the start.
  auto later = MakeVm(0);
  ASSERT_NE(later, nullptr);
  EXPECT_EQ(later->accessors(), (std::vector<int>{0, 1}));
  auto later_base = later->Reserve(chunk);
  ASSERT_TRUE(later_base.ok());
  ASSERT_TRUE(later->Map(*later_base, chunk).ok());
  ExpectPeerCopiesWork(*later_base, chunk, 0x7f);
  ASSERT_TRUE(later->Unmap(*later_base, chunk).ok());
  ASSERT_TRUE(vm->Unmap(p, 3 * chunk).ok());
  ASSERT_TRUE(vm->Unmap(p + 5 * chunk, 3 * chunk).ok());
}

// Records what it hears, and checks that an unmapping piece is still mapped and usable.
class RecordingListener : public PieceListener {
 public:
  void OnMapped(const Piece& piece) override {
    // The byte OnUnmapping reads back, written here so that it is defined whoever
    // mapped the piece (compute-sanitizer's initcheck).
    const bool written =
        cudaMemset(reinterpret_cast<void*>(piece.start), 0, 1) == cudaSuccess;
    std::lock_guard<std::mutex> lock(mu);
    mapped.push_back(piece);
    all_written = all_written && written;
  }
  void OnUnmapping(const Piece& piece) override {
    // Still mapped: a copy from the piece works (the device is idle, so it is quick).
    unsigned char byte = 0;
    const bool readable =
        cudaMemcpy(&byte, reinterpret_cast<void*>(piece.start), 1, cudaMemcpyDeviceToHost) ==
        cudaSuccess;
    std::lock_guard<std::mutex> lock(mu);
    unmapping.push_back(piece);
    all_readable = all_readable && readable;
  }
  std::mutex mu;
  std::vector<Piece> mapped;
  std::vector<Piece> unmapping;
  bool all_readable = true;
  bool all_written = true;
};

TEST(CudaVirtualMemoryTest, ListenersFollowPiecesAndLookupsFindThem) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto vm = MakeVm(0);
  ASSERT_NE(vm, nullptr);
  const size_t chunk = vm->granularity();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  RecordingListener listener;
  vm->AddPieceListener(&listener);
  auto base = vm->Reserve(16 * chunk);
  ASSERT_TRUE(base.ok()) << base.status();
  char* p = static_cast<char*>(*base);
  // 6 chunks in pieces of at most 4: 4 + 2.
  ASSERT_TRUE(vm->MapPieces(p, 6 * chunk, PieceCut{.max_piece = 4 * chunk}).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(listener.mapped.size(), 2u);
  EXPECT_TRUE(listener.all_written);
  EXPECT_EQ(listener.mapped[0].start, reinterpret_cast<uintptr_t>(p));
  EXPECT_EQ(listener.mapped[0].size, 4 * chunk);
  EXPECT_EQ(listener.mapped[1].start, reinterpret_cast<uintptr_t>(p + 4 * chunk));
  EXPECT_EQ(listener.mapped[1].size, 2 * chunk);
  EXPECT_NE(listener.mapped[0].handle, 0u);
  // Lookups: any address inside a piece finds it, handle included; others find none.
  std::optional<Piece> found = vm->PieceContaining(p + 4 * chunk - 1);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, listener.mapped[0]);
  found = vm->PieceContaining(p + 5 * chunk);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, listener.mapped[1]);
  EXPECT_FALSE(vm->PieceContaining(p + 6 * chunk).has_value());
  EXPECT_FALSE(vm->PieceContaining(nullptr).has_value());
  // A failed map tells nobody.
  EXPECT_FALSE(vm->MapPieces(p + 4 * chunk, 4 * chunk, PieceCut{.max_piece = 4 * chunk}).ok());
  EXPECT_EQ(listener.mapped.size(), 2u);
  // Unmapping tells the listener before the memory goes, piece by piece (on the
  // unmapping thread: FinishUnmaps waits for it). The piece is gone from lookups at once.
  ASSERT_TRUE(vm->Unmap(p + 4 * chunk, 2 * chunk).ok());
  EXPECT_FALSE(vm->PieceContaining(p + 5 * chunk).has_value());
  ASSERT_TRUE(vm->FinishUnmaps().ok());
  ASSERT_EQ(listener.unmapping.size(), 1u);
  EXPECT_EQ(listener.unmapping[0], listener.mapped[1]);
  EXPECT_TRUE(listener.all_readable);
  EXPECT_FALSE(vm->PieceContaining(p + 5 * chunk).has_value());
  // A removed listener hears nothing more.
  vm->RemovePieceListener(&listener);
  ASSERT_TRUE(vm->Unmap(p, 4 * chunk).ok());
  ASSERT_TRUE(vm->FinishUnmaps().ok());
  EXPECT_EQ(listener.unmapping.size(), 1u);
  // The destructor unmaps what is left, telling its listeners first.
  RecordingListener last;
  vm->AddPieceListener(&last);
  ASSERT_TRUE(vm->Map(p, 2 * chunk).ok());
  EXPECT_EQ(last.mapped.size(), 2u);  // Map: pieces of one chunk.
  vm.reset();
  EXPECT_EQ(last.unmapping.size(), 2u);
  EXPECT_TRUE(last.all_readable);
}

TEST(CudaVirtualMemoryTest, TheRegistryReachesTheDevicePoolsVirtualMemory) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<CachingAllocator*> pool = PoolFor(Device::Cuda(0));
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<CudaVirtualMemory*> vm = DeviceVirtualMemory(0);
  ASSERT_TRUE(vm.ok()) << vm.status();
  if (!(*pool)->expandable_segments()) {
    EXPECT_EQ(*vm, nullptr);
    GTEST_SKIP() << "cuda:0's pool has no expandable segments";
  }
  ASSERT_NE(*vm, nullptr);
  EXPECT_EQ((*vm)->device(), 0);
  RecordingListener listener;
  (*vm)->AddPieceListener(&listener);
  (void)ReleaseCachedMemory();
  // A large block lives in a piece of the pool's virtual memory; freed and given back,
  // its pieces are unmapped, the listener told first.
  absl::StatusOr<void*> p = (*pool)->Allocate(size_t{8} << 20, kNoStream);
  ASSERT_TRUE(p.ok()) << p.status();
  std::optional<Piece> piece = (*vm)->PieceContaining(*p);
  ASSERT_TRUE(piece.has_value());
  EXPECT_FALSE(listener.mapped.empty());
  ASSERT_TRUE((*pool)->Free(*p).ok());
  (void)ReleaseCachedMemory();
  (*vm)->RemovePieceListener(&listener);
  bool heard = false;
  for (const Piece& unmapped : listener.unmapping) heard = heard || unmapped == *piece;
  EXPECT_TRUE(heard);
  EXPECT_TRUE(listener.all_readable);
  EXPECT_FALSE((*vm)->PieceContaining(*p).has_value());
}

}  // namespace
}  // namespace genesis::memory
