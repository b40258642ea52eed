// The copy engines' all_reduce on one GPU, without NCCL: N ranks in one process, each
// with a window of its own (device memory of the one GPU, so every rank reaches every
// window) and its streams, issuing in turn while the GPU runs them at once. Known sums
// for every dtype it serves at sizes around the pieces, in views off 16 bytes, on 2 to 4
// ranks; many all_reduces in flight (every slot used again); the same bits on every
// rank; Release drains a rank whose peers never come; what it refuses. A watchdog
// releases every rank if a test outlasts its time, so a wait that never passes fails the
// test instead of hanging it. Skips without a GPU.
#include "genesis/distributed/nccl/copy_engine_all_reduce.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/cuda/test_util.h"
#include "genesis/distributed/nccl/copy_engine_plan.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

using storage::Storage;
using testing::Check;
using testing::Contribution;
using testing::Expected;
using testing::Filled;

// Four ranks' streams (four each) on one GPU need more hardware queues than CUDA's eight,
// or a wait in one stream could hold up another stream that shares its queue.
const bool kQueues = [] { return setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0) == 0; }();

// N ranks' windows on GPU 0, each rank's all_reduce and stream.
class Group {
 public:
  static std::unique_ptr<Group> Create(int ranks, size_t piece) {
    auto g = std::unique_ptr<Group>(new Group());
    auto layout = CopyEngineLayout::Create(ranks, piece);
    EXPECT_TRUE(layout.ok()) << layout.status();
    if (!layout.ok()) return nullptr;
    g->layout_ = std::make_unique<CopyEngineLayout>(*layout);
    CopyEngineWindows w;
    w.layout = g->layout_.get();
    for (int r = 0; r < ranks; ++r) {
      void* window = nullptr;
      EXPECT_EQ(cudaMalloc(&window, layout->bytes()), cudaSuccess);
      g->windows_.push_back(window);
      w.windows[r] = static_cast<char*>(window);
      cudaStream_t stream = nullptr;
      EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      g->streams_.push_back(stream);
    }
    for (int r = 0; r < ranks; ++r) {
      w.rank = r;
      auto ce = CopyEngineAllReduce::Create(w);
      EXPECT_TRUE(ce.ok()) << ce.status();
      if (!ce.ok()) return nullptr;
      g->ranks_.push_back(std::move(*ce));
    }
    return g;
  }

  ~Group() {
    cudaDeviceSynchronize();
    ranks_.clear();
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (void* w : windows_) cudaFree(w);
  }

  int size() const { return static_cast<int>(ranks_.size()); }
  const CopyEngineLayout& layout() const { return *layout_; }
  CopyEngineAllReduce& rank(int r) { return *ranks_[r]; }
  cudaStream_t stream(int r) const { return streams_[r]; }

  // Queues the all_reduces of `data[r]` on each rank r in turn and waits for every rank;
  // "" or what went wrong (a refused all_reduce, a rank released after `limit`). The
  // storages are made before: making one could wait for the GPU, which waits for the
  // ranks not issued yet.
  std::string AllReduceOnEveryRank(const std::vector<std::vector<Storage>>& data,
                                   std::chrono::seconds limit = std::chrono::seconds(30)) {
    if (cudaDeviceSynchronize() != cudaSuccess) return "the storages' fill failed";
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, released = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (cv.wait_for(lock, limit, [&] { return done; })) return;
      released = true;
      for (auto& ce : ranks_) ce->Release().IgnoreError();
    });
    std::string failure;
    for (int r = 0; r < size() && failure.empty(); ++r) {
      for (const Storage& s : data[r]) {
        const absl::Status issued =
            ranks_[r]->AllReduce(s.data_ptr(), s.nbytes(), s.dtype(), ReduceOp::kSum, streams_[r]);
        if (!issued.ok()) {
          failure = absl::StrCat("rank ", r, ": ", issued.ToString());
          break;
        }
      }
    }
    const cudaError_t synced = cudaDeviceSynchronize();
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_one();
    watchdog.join();
    if (!failure.empty()) return failure;
    if (released) return absl::StrCat("a rank waited for its peers for ", limit.count(), " s");
    return synced == cudaSuccess ? "" : cudaGetErrorString(synced);
  }

 private:
  Group() = default;

  std::unique_ptr<CopyEngineLayout> layout_;
  std::vector<void*> windows_;
  std::vector<cudaStream_t> streams_;
  std::vector<std::unique_ptr<CopyEngineAllReduce>> ranks_;
};

// `count` elements of `dtype` holding rank `r`'s contribution, `offset` elements into a
// storage on GPU 0.
Storage Contributed(int r, int64_t count, int64_t offset, DType dtype) {
  auto whole = Filled(
      count + offset, dtype, [&](int64_t i) { return Contribution(ReduceOp::kSum, r, i - offset); },
      Device::Cuda(0));
  EXPECT_TRUE(whole.ok()) << whole.status();
  if (!whole.ok()) return Storage();
  auto v = whole->Slice(0, offset, offset + count);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : Storage();
}

TEST(CopyEngineAllReduceTest, SumsEveryDtypeAtEverySizeOnTwoToFourRanks) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int ranks = 2; ranks <= 4; ++ranks) {
    auto g = Group::Create(ranks, ranks * 4 * kCopyEngineAlignment);
    ASSERT_NE(g, nullptr);
    for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
      const int64_t per_piece = static_cast<int64_t>(g->layout().piece() / ItemSize(dtype));
      for (int64_t count :
           {int64_t{1}, int64_t{3}, per_piece - 1, per_piece, per_piece + 1, 5 * per_piece + 7}) {
        for (int64_t offset : {0, 1}) {
          std::vector<std::vector<Storage>> data(ranks);
          for (int r = 0; r < ranks; ++r) data[r] = {Contributed(r, count, offset, dtype)};
          const std::string failure = g->AllReduceOnEveryRank(data);
          const std::string what = absl::StrCat(ranks, " ranks, ", count, " ",
                                                ToAbsl(DTypeName(dtype)), " at element ", offset);
          ASSERT_EQ(failure, "") << what;
          for (int r = 0; r < ranks; ++r) {
            ASSERT_EQ(Check(
                          data[r][0],
                          [&](int64_t i) { return Expected(ReduceOp::kSum, dtype, ranks, i); },
                          absl::StrCat(what, ", rank ", r)),
                      "");
          }
        }
      }
    }
  }
}

TEST(CopyEngineAllReduceTest, ManyAllReducesInFlightUseEverySlotAgain) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int ranks : {2, 4}) {
    auto g = Group::Create(ranks, ranks * 16 * kCopyEngineAlignment);
    ASSERT_NE(g, nullptr);
    constexpr int kOps = 40;
    std::vector<std::vector<Storage>> data(ranks);
    auto count = [&](int k) { return int64_t{1} + k * 997 % 9000; };
    for (int r = 0; r < ranks; ++r) {
      for (int k = 0; k < kOps; ++k)
        data[r].push_back(Contributed(r, count(k), k % 3, DType::kFloat32));
    }
    const std::string failure = g->AllReduceOnEveryRank(data);
    ASSERT_EQ(failure, "") << ranks << " ranks";
    EXPECT_GT(g->rank(0).pieces(), uint32_t{kOps});
    for (int r = 0; r < ranks; ++r) {
      for (int k = 0; k < kOps; ++k) {
        ASSERT_EQ(
            Check(
                data[r][k],
                [&](int64_t i) { return Expected(ReduceOp::kSum, DType::kFloat32, ranks, i); },
                absl::StrCat(ranks, " ranks, rank ", r, ", all_reduce ", k)),
            "");
      }
    }
  }
}

TEST(CopyEngineAllReduceTest, EveryRankGetsTheSameBits) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 3;
  auto g = Group::Create(kRanks, size_t{1} << 20);
  ASSERT_NE(g, nullptr);
  constexpr int64_t kCount = (int64_t{5} << 20) / 4 + 3;  // Five pieces and some.
  std::vector<std::vector<Storage>> data(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    auto s = Filled(
        kCount, DType::kFloat32, [&](int64_t i) { return 0.1 * (r + 1) * (i % 1000) + 1e-3 * r; },
        Device::Cuda(0));
    ASSERT_TRUE(s.ok()) << s.status();
    data[r] = {*s};
  }
  ASSERT_EQ(g->AllReduceOnEveryRank(data), "");
  std::vector<std::vector<float>> host(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaMemcpy(host[r].data(), data[r][0].data_ptr(), kCount * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(host[0].data(), host[r].data(), kCount * 4), 0) << "rank " << r;
  }
  // The sum in rank order, as float32 adds it.
  for (int64_t i : {int64_t{0}, int64_t{999}, kCount - 1}) {
    float sum = 0;
    for (int r = 0; r < kRanks; ++r)
      sum += static_cast<float>(0.1 * (r + 1) * (i % 1000) + 1e-3 * r);
    EXPECT_EQ(host[0][i], sum) << i;
  }
}

TEST(CopyEngineAllReduceTest, ReleaseDrainsARankWhosePeersNeverCome) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto g = Group::Create(2, 2 * kCopyEngineAlignment);
  ASSERT_NE(g, nullptr);
  Storage alone = Contributed(0, 1000, 0, DType::kFloat32);  // Four pieces; rank 1 issues none.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(g->rank(0)
                  .AllReduce(alone.data_ptr(), alone.nbytes(), DType::kFloat32, ReduceOp::kSum,
                             g->stream(0))
                  .ok());
  EXPECT_EQ(cudaStreamQuery(g->stream(0)), cudaErrorNotReady);
  ASSERT_TRUE(g->rank(0).Release().ok());
  std::mutex mu;
  std::condition_variable cv;
  bool drained = false;
  std::thread guard([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (cv.wait_for(lock, std::chrono::seconds(60), [&] { return drained; })) return;
    std::fprintf(stderr, "Release did not drain the rank in 60 s\n");
    std::abort();
  });
  EXPECT_EQ(cudaStreamSynchronize(g->stream(0)), cudaSuccess);
  {
    std::lock_guard<std::mutex> lock(mu);
    drained = true;
  }
  cv.notify_one();
  guard.join();
  const absl::Status after = g->rank(0).AllReduce(alone.data_ptr(), alone.nbytes(), DType::kFloat32,
                                                  ReduceOp::kSum, g->stream(0));
  EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition) << after;
}

TEST(CopyEngineAllReduceTest, RefusesWhatItDoesNotServe) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto layout = CopyEngineLayout::Create(2, 2 * kCopyEngineAlignment);
  ASSERT_TRUE(layout.ok());
  CopyEngineWindows w;
  EXPECT_EQ(CopyEngineAllReduce::Create(w).status().code(), absl::StatusCode::kInvalidArgument);
  w.layout = &*layout;
  w.rank = 2;
  EXPECT_EQ(CopyEngineAllReduce::Create(w).status().code(), absl::StatusCode::kInvalidArgument);
  w.rank = 0;
  const auto no_window = CopyEngineAllReduce::Create(w);
  EXPECT_EQ(no_window.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_window.status().message().find("no window of rank 0"), std::string::npos)
      << no_window.status();

  auto g = Group::Create(2, 2 * kCopyEngineAlignment);
  ASSERT_NE(g, nullptr);
  Storage ints = Contributed(0, 64, 0, DType::kInt32);
  Storage floats = Contributed(0, 64, 0, DType::kFloat32);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  CopyEngineAllReduce& ce = g->rank(0);
  const absl::Status int_sum =
      ce.AllReduce(ints.data_ptr(), ints.nbytes(), DType::kInt32, ReduceOp::kSum, g->stream(0));
  EXPECT_EQ(int_sum.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(int_sum.message().find("not 256 bytes of int32 with sum"), std::string::npos)
      << int_sum;
  EXPECT_EQ(
      ce.AllReduce(floats.data_ptr(), 256, DType::kFloat32, ReduceOp::kMax, g->stream(0)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ce.AllReduce(floats.data_ptr(), 6, DType::kFloat32, ReduceOp::kSum, g->stream(0)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      ce.AllReduce(floats.data_ptr(), 0, DType::kFloat32, ReduceOp::kSum, g->stream(0)).ok());

  cudaStream_t captured = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&captured, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(captured, cudaStreamCaptureModeRelaxed), cudaSuccess);
  const absl::Status in_capture =
      ce.AllReduce(floats.data_ptr(), 256, DType::kFloat32, ReduceOp::kSum, captured);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(captured, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(captured);
  EXPECT_EQ(in_capture.code(), absl::StatusCode::kFailedPrecondition) << in_capture;
  EXPECT_NE(in_capture.message().find("cannot be captured"), std::string::npos) << in_capture;
  EXPECT_EQ(ce.pieces(), 0u);
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
