// The one-shot collectives' kernel on one GPU, without NCCL: N ranks in one process,
// each with its own window, the windows mapped 4 GiB apart in one reserved range as NCCL
// maps a window's ranks (rank r's bytes at lsaFlatBase + r * stride4G * 4 GiB), and each
// rank's kernels on a stream of its own, running at once. Known results for every dtype
// and reduction of all_reduce, and for broadcast, reduce, all_gather, reduce_scatter,
// all_to_all and sends and receives, at sizes around the chunks and the limit, in views
// off 16 bytes; many operations in flight (each slot used again; sends that wait for
// the receive two before); CUDA graphs replayed; a kernel whose peers never send stops
// when told to; what it does not serve is refused. A watchdog thread sets the
// abort flag if a test outlasts its time, so a rank whose peers' lines never come fails
// a test instead of hanging it. Skips without a GPU.
#include "genesis/distributed/nccl/one_shot_kernel.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nccl_device/impl/core__types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/internal/driver.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "genesis/distributed/nccl/one_shot_plan.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

using storage::Storage;
using testing::Check;
using testing::Contribution;
using testing::Expected;
using testing::Filled;

constexpr size_t k4G = size_t{1} << 32;

// N ranks' windows in one process, zeroed, and an abort flag in mapped host memory.
class FakeWindows {
 public:
  static absl::StatusOr<std::unique_ptr<FakeWindows>> Create(int ranks, size_t budget) {
    auto w = std::unique_ptr<FakeWindows>(new FakeWindows());
    GENESIS_ASSIGN_OR_RETURN(OneShotLayout layout, OneShotLayout::Create(budget, ranks));
    w->layout_ = std::make_unique<OneShotLayout>(layout);
    GENESIS_ASSIGN_OR_RETURN(w->api_, cuda::LoadVirtualMemoryApi());
    const cuda::VirtualMemoryApi& api = *w->api_;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t granularity = 0;
    GENESIS_RETURN_IF_ERROR(cuda::DriverStatus(
        api.get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity"));
    w->bytes_ = (layout.bytes() + granularity - 1) / granularity * granularity;
    w->reserved_ = ranks * k4G;
    GENESIS_RETURN_IF_ERROR(cuda::DriverStatus(
        api.address_reserve(&w->base_, w->reserved_, k4G, 0, 0), "cuMemAddressReserve"));
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int r = 0; r < ranks; ++r) {
      CUmemGenericAllocationHandle handle;
      GENESIS_RETURN_IF_ERROR(
          cuda::DriverStatus(api.create(&handle, w->bytes_, &prop, 0), "cuMemCreate"));
      w->handles_.push_back(handle);
      GENESIS_RETURN_IF_ERROR(
          cuda::DriverStatus(api.map(w->base_ + r * k4G, w->bytes_, 0, handle, 0), "cuMemMap"));
      GENESIS_RETURN_IF_ERROR(cuda::DriverStatus(
          api.set_access(w->base_ + r * k4G, w->bytes_, &access, 1), "cuMemSetAccess"));
    }
    std::vector<ncclWindow_vidmem> windows(ranks);
    for (int r = 0; r < ranks; ++r) {
      windows[r] = {};
      windows[r].lsaFlatBase = reinterpret_cast<char*>(w->base_);
      windows[r].lsaRank = r;
      windows[r].worldRank = r;
      windows[r].stride4G = 1;
    }
    if (cudaMalloc(&w->device_windows_, sizeof(ncclWindow_vidmem) * ranks) != cudaSuccess ||
        cudaMemcpy(w->device_windows_, windows.data(), sizeof(ncclWindow_vidmem) * ranks,
                   cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaHostAlloc(&w->flag_, sizeof(int), cudaHostAllocMapped) != cudaSuccess) {
      return absl::InternalError("cudaMalloc / cudaMemcpy / cudaHostAlloc");
    }
    w->abort_ = static_cast<volatile int*>(w->flag_);
    GENESIS_RETURN_IF_ERROR(w->Reset());
    return w;
  }

  ~FakeWindows() {
    cudaDeviceSynchronize();
    if (device_windows_ != nullptr) cudaFree(device_windows_);
    if (flag_ != nullptr) cudaFreeHost(flag_);
    if (api_ == nullptr) return;
    for (size_t r = 0; r < handles_.size(); ++r) {
      api_->unmap(base_ + r * k4G, bytes_);
      api_->release(handles_[r]);
    }
    if (base_ != 0) api_->address_free(base_, reserved_);
  }

  // Zeroes every window and the abort flag (the state a group starts from).
  absl::Status Reset() {
    for (size_t r = 0; r < handles_.size(); ++r) {
      if (cudaMemset(Local(static_cast<int>(r)), 0, bytes_) != cudaSuccess) {
        return absl::InternalError("cudaMemset");
      }
    }
    *abort_ = 0;
    return cudaDeviceSynchronize() == cudaSuccess ? absl::OkStatus()
                                                  : absl::InternalError("cudaDeviceSynchronize");
  }

  char* Local(int rank) const { return reinterpret_cast<char*>(base_ + rank * k4G); }

  // Rank `rank`'s window, as every launch needs it.
  OneShotWindow Window(int rank) const {
    return {static_cast<ncclWindow_vidmem*>(device_windows_) + rank, Local(rank), layout_.get(),
            rank, abort_};
  }

  // Rank `rank`'s arguments for an all_reduce of `s` with `op`.
  OneShotArgs Args(int rank, const Storage& s, ReduceOp op) const {
    OneShotArgs args;
    static_cast<OneShotWindow&>(args) = Window(rank);
    args.in = s.data_ptr();
    args.out = s.data_ptr();
    args.piece = static_cast<size_t>(s.numel()) * ItemSize(s.dtype());
    args.dtype = s.dtype();
    args.op = op;
    return args;
  }

  // Rank `rank`'s arguments for `kind` from `in` into `out`, whose piece is the smaller
  // of the two (either, for the kinds that keep one buffer; a rank's share of either,
  // for all_to_all).
  OneShotArgs Args(int rank, OneShotKind kind, const Storage& in, const Storage& out, ReduceOp op,
                   int root) const {
    OneShotArgs args = Args(rank, in, op);
    args.kind = kind;
    args.out = out.data_ptr();
    args.piece = static_cast<size_t>(std::min(in.numel(), out.numel())) * ItemSize(in.dtype());
    if (kind == OneShotKind::kAllToAll) args.piece /= static_cast<size_t>(layout_->ranks());
    args.root = root;
    return args;
  }

  // Rank `rank`'s arguments for one launch of `messages`.
  OneShotPeerArgs PeerArgs(int rank, absl::Span<const OneShotMessage> messages) const {
    OneShotPeerArgs args;
    static_cast<OneShotWindow&>(args) = Window(rank);
    args.messages = messages;
    return args;
  }

  const OneShotLayout& layout() const { return *layout_; }
  void Abort() { *abort_ = 1; }

 private:
  FakeWindows() = default;

  std::unique_ptr<OneShotLayout> layout_;
  const cuda::VirtualMemoryApi* api_ = nullptr;
  CUdeviceptr base_ = 0;
  size_t reserved_ = 0;
  size_t bytes_ = 0;
  std::vector<CUmemGenericAllocationHandle> handles_;
  void* device_windows_ = nullptr;
  void* flag_ = nullptr;  // The abort flag, as cudaHostAlloc gave it.
  volatile int* abort_ = nullptr;
};

// `limit` times GENESIS_TEST_TIMEOUT_SCALE (run_gpu_tests.sh --sanitize sets it: the
// kernels run slower under compute-sanitizer).
std::chrono::seconds Scaled(std::chrono::seconds limit) {
  const char* text = std::getenv("GENESIS_TEST_TIMEOUT_SCALE");
  const int scale = text != nullptr ? std::atoi(text) : 1;
  return scale > 1 ? limit * scale : limit;
}

// Sets the abort flag if not cancelled within `limit` (scaled), so that a kernel waiting
// for a peer that never arrives ends (and the test fails) instead of hanging; and when
// it goes uncancelled (a test that stopped half-way, leaving some ranks' kernels
// waiting).
class Watchdog {
 public:
  Watchdog(FakeWindows& windows, std::chrono::seconds limit)
      : windows_(windows), thread_([this, limit = Scaled(limit)] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            fired_ = true;
            windows_.Abort();
          }
        }) {}
  ~Watchdog() {
    if (!cancelled_) {
      windows_.Abort();
      Cancel();
      cudaDeviceSynchronize();
      (void)windows_.Reset();
    }
  }
  // Stops it; whether it had fired.
  bool Cancel() {
    cancelled_ = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return fired_;
  }

 private:
  FakeWindows& windows_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  bool cancelled_ = false;
  std::thread thread_;
};

struct Ranks {
  std::unique_ptr<FakeWindows> windows;
  std::vector<cuda::Stream> streams;
};

// `n` ranks whose windows serve sends and receives of up to `budget` bytes (and
// collectives' pieces of up to budget / (n - 1)).
Ranks MakeRanksWithBudget(int n, size_t budget) {
  Ranks ranks;
  auto windows = FakeWindows::Create(n, budget);
  EXPECT_TRUE(windows.ok()) << windows.status();
  if (!windows.ok()) return ranks;
  ranks.windows = *std::move(windows);
  for (int r = 0; r < n; ++r) {
    auto stream = cuda::Stream::Create(0);
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (stream.ok()) ranks.streams.push_back(*std::move(stream));
  }
  return ranks;
}

// `n` ranks whose windows serve collectives' pieces of up to `piece` bytes.
Ranks MakeRanks(int n, size_t piece = size_t{256} << 10) {
  return MakeRanksWithBudget(n, piece * static_cast<size_t>(n - 1));
}

absl::Status SyncAll(Ranks& ranks) {
  for (cuda::Stream& s : ranks.streams) GENESIS_RETURN_IF_ERROR(s.Synchronize());
  return absl::OkStatus();
}

// `count` elements of `dtype` holding f(i), in a view `offset` elements into a storage
// on the GPU; an empty storage (and a failed expectation) where that fails.
Storage ViewOnGpu(int64_t count, int64_t offset, DType dtype,
                  const std::function<double(int64_t)>& f) {
  auto whole = Filled(
      count + offset, dtype, [&](int64_t i) { return f(i - offset); }, Device::Cuda(0));
  EXPECT_TRUE(whole.ok()) << whole.status();
  if (!whole.ok()) return Storage();
  auto v = whole->Slice(0, offset, offset + count);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : Storage();
}

// Queues each rank r's operations (`of(r)`, in order) on its stream and waits for every
// rank; "" or what went wrong (a refused launch, a rank that waited for its peers).
std::string LaunchOnEveryRank(Ranks& ranks,
                              const std::function<std::vector<OneShotArgs>(int)>& of) {
  Watchdog watchdog(*ranks.windows, std::chrono::seconds(20));
  for (int r = 0; r < static_cast<int>(ranks.streams.size()); ++r) {
    for (const OneShotArgs& args : of(r)) {
      const absl::Status launched = LaunchOneShot(args, ranks.streams[r].native());
      if (!launched.ok()) {
        return absl::StrCat(ToAbsl(OneShotKindName(args.kind)), ": ", launched.ToString());
      }
    }
  }
  GENESIS_RETURN_IF_BAD(SyncAll(ranks));
  if (watchdog.Cancel()) return "a rank waited for its peers for 20 s";
  return "";
}

// Every rank's all_reduce of `count` elements of `dtype` with `op`, in views `offset`
// elements into their storages; "" or what went wrong.
std::string RunOnce(Ranks& ranks, DType dtype, ReduceOp op, int64_t count, int64_t offset) {
  const int n = static_cast<int>(ranks.streams.size());
  const Device gpu = Device::Cuda(0);
  std::vector<Storage> views;
  for (int r = 0; r < n; ++r) {
    GENESIS_ASSIGN_OR_TEXT(whole,
                           Filled(
                               count + offset, dtype,
                               [&](int64_t i) { return Contribution(op, r, i - offset); }, gpu));
    GENESIS_ASSIGN_OR_TEXT(view, whole.Slice(0, offset, offset + count));
    views.push_back(view);
  }
  GENESIS_RETURN_IF_TEXT(LaunchOnEveryRank(ranks, [&](int r) {
    return std::vector<OneShotArgs>{ranks.windows->Args(r, views[r], op)};
  }));
  const std::string what = absl::StrCat(n, " ranks, ", ToAbsl(DTypeName(dtype)), " ",
                                        ToAbsl(ReduceOpName(op)), " of ", count, " at +", offset);
  for (int r = 0; r < n; ++r) {
    GENESIS_RETURN_IF_TEXT(Check(
        views[r], [&](int64_t i) { return Expected(op, dtype, n, i); },
        absl::StrCat(what, ", rank ", r)));
  }
  return "";
}

class OneShotKernelTest : public ::testing::TestWithParam<int> {};

TEST_P(OneShotKernelTest, EveryDTypeAndReductionAtSizesAroundItsChunks) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int n = GetParam();
  // Every rank's blocks must fit on the one GPU at once (each waits for the same block
  // of every peer): 8 ranks of 32 blocks of the widest kernels do not, of 12 they do.
  Ranks ranks = MakeRanks(n, n <= 4 ? size_t{256} << 10 : size_t{96} << 10);
  ASSERT_NE(ranks.windows, nullptr);
  for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kInt32, DType::kInt64, DType::kFloat16,
                      DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const int64_t item = static_cast<int64_t>(ItemSize(dtype));
    const int64_t chunk = static_cast<int64_t>(kOneShotChunkBytes) / item;
    // The small pieces' blocks (OneShotLayout::Threads) and where they end.
    const int64_t small = int64_t{kOneShotSmallThreads} * 16 / item;
    const int64_t small_piece = static_cast<int64_t>(kOneShotSmallPiece) / item;
    // Beyond 2 ranks, two steps from past the one-step slots to the limit.
    const OneShotLayout& layout = ranks.windows->layout();
    const int64_t max_piece = static_cast<int64_t>(layout.max_piece()) / item;
    const int64_t limit = static_cast<int64_t>(layout.MaxPiece(OneShotKind::kAllReduce)) / item;
    std::vector<int64_t> counts = {1,         3,           small + 1,       chunk - 1,     chunk,
                                   chunk + 1, small_piece, small_piece + 1, 5 * chunk + 7, limit};
    if (n > 2) counts.push_back(max_piece + 3);
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
      if (!OneShotReduces(dtype, op)) continue;
      for (int64_t count : counts) {
        for (int64_t offset : {int64_t{0}, int64_t{1}}) {
          ASSERT_EQ(RunOnce(ranks, dtype, op, count, offset), "");
        }
      }
    }
  }
}

// Broadcast, reduce, all_gather, reduce_scatter and all_to_all (also in place): known
// results at sizes around the chunks, in views off 16 bytes (and pieces that are not
// whole 16 bytes), every root.
TEST_P(OneShotKernelTest, EveryOtherKind) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int n = GetParam();
  Ranks ranks = MakeRanks(n, n <= 4 ? size_t{256} << 10 : size_t{96} << 10);
  ASSERT_NE(ranks.windows, nullptr);
  const auto max_piece = static_cast<int64_t>(ranks.windows->layout().max_piece());
  for (DType dtype : {DType::kInt32, DType::kBFloat16, DType::kInt8}) {
    const auto item = static_cast<int64_t>(ItemSize(dtype));
    const int64_t chunk = static_cast<int64_t>(kOneShotChunkBytes) / item;
    // The gather's output, the scatter's input and all_to_all's buffers hold n pieces.
    for (int64_t piece : {int64_t{1}, int64_t{5}, chunk + 3, 2 * chunk, max_piece / item}) {
      for (int64_t offset : {int64_t{0}, int64_t{1}}) {
        const std::string what = absl::StrCat(n, " ranks, ", ToAbsl(DTypeName(dtype)), ", piece ",
                                              piece, " at +", offset);
        const int root = static_cast<int>(piece % n);
        // Rank r's value i: r * 3 + i % 5 (small enough for int8 sums of 8 ranks).
        const auto value = [](int r) { return [r](int64_t i) { return r * 3 + i % 5; }; };
        std::vector<Storage> b, red, gin, gout, sin, sout, ain, aout, aboth;
        for (int r = 0; r < n; ++r) {
          auto view = [&](int64_t count, const std::function<double(int64_t)>& f) {
            return ViewOnGpu(count, offset, dtype, f);
          };
          b.push_back(view(piece, value(r)));
          red.push_back(view(piece, value(r)));
          gin.push_back(view(piece, value(r)));
          gout.push_back(view(n * piece, [](int64_t) { return 0; }));
          sin.push_back(view(n * piece, value(r)));
          sout.push_back(view(piece, [](int64_t) { return 0; }));
          ain.push_back(view(n * piece, value(r)));
          aout.push_back(view(n * piece, [](int64_t) { return 0; }));
          aboth.push_back(view(n * piece, value(r)));
        }
        const auto& w = *ranks.windows;
        ASSERT_EQ(
            LaunchOnEveryRank(
                ranks,
                [&](int r) {
                  return std::vector<OneShotArgs>{
                      w.Args(r, OneShotKind::kBroadcast, b[r], b[r], ReduceOp::kSum, root),
                      w.Args(r, OneShotKind::kReduce, red[r], red[r], ReduceOp::kSum, root),
                      w.Args(r, OneShotKind::kAllGather, gin[r], gout[r], ReduceOp::kSum, 0),
                      w.Args(r, OneShotKind::kReduceScatter, sin[r], sout[r], ReduceOp::kMax, 0),
                      w.Args(r, OneShotKind::kAllToAll, ain[r], aout[r], ReduceOp::kSum, 0),
                      w.Args(r, OneShotKind::kAllToAll, aboth[r], aboth[r], ReduceOp::kSum, 0)};
                }),
            "")
            << what;
        for (int r = 0; r < n; ++r) {
          const std::string rank = absl::StrCat(what, ", rank ", r);
          ASSERT_EQ(Check(b[r], value(root), rank + ", broadcast"), "");
          const auto sum = [&](int64_t i) { return 3.0 * n * (n - 1) / 2 + n * (i % 5); };
          ASSERT_EQ(Check(red[r], r == root ? std::function<double(int64_t)>(sum) : value(r),
                          rank + ", reduce"),
                    "");
          ASSERT_EQ(
              Check(
                  gout[r], [&](int64_t i) { return value(static_cast<int>(i / piece))(i % piece); },
                  rank + ", all_gather"),
              "");
          // Rank r's output: the max over ranks of their part r (the last rank's).
          ASSERT_EQ(Check(
                        sout[r], [&](int64_t i) { return value(n - 1)(r * piece + i); },
                        rank + ", reduce_scatter"),
                    "");
          // Rank r's part q: rank q's part r.
          const auto exchanged = [&](int64_t i) {
            return value(static_cast<int>(i / piece))(r * piece + i % piece);
          };
          ASSERT_EQ(Check(aout[r], exchanged, rank + ", all_to_all"), "");
          ASSERT_EQ(Check(aboth[r], exchanged, rank + ", all_to_all in place"), "");
        }
      }
    }
  }
}

// Broadcast in two steps (beyond 2 ranks; below, in one) from every root, and
// all_reduce between its runs: known results where two steps begin, at a size whose
// last shards are short and at the limit, in views off 16 bytes, broadcast in place.
TEST_P(OneShotKernelTest, TwoStepsFromEveryRoot) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int n = GetParam();
  Ranks ranks = MakeRanks(n, n <= 4 ? size_t{256} << 10 : size_t{96} << 10);
  ASSERT_NE(ranks.windows, nullptr);
  const OneShotLayout& layout = ranks.windows->layout();
  const DType dtype = DType::kInt32;
  const auto limit = static_cast<int64_t>(layout.MaxPiece(OneShotKind::kBroadcast)) / 4;
  const auto first =
      static_cast<int64_t>(std::min(layout.two_step_min_piece(), layout.max_piece())) / 4 + 1;
  // Rank r's value i: r * 3 + i % 5; the sum over ranks of it.
  const auto value = [](int r) { return [r](int64_t i) { return r * 3 + i % 5; }; };
  const auto sum = [n](int64_t i) { return 3.0 * n * (n - 1) / 2 + n * (i % 5); };
  for (int64_t count : {first, limit - 5, limit}) {
    for (OneShotKind kind : {OneShotKind::kBroadcast, OneShotKind::kAllReduce}) {
      ASSERT_EQ(layout.TwoStep(kind, static_cast<size_t>(count) * 4), n > 2) << count;
    }
    for (int64_t offset : {int64_t{0}, int64_t{4}}) {
      for (int root = 0; root < n; ++root) {
        const std::string what =
            absl::StrCat(n, " ranks, ", count, " x int32 at +", offset, ", root ", root);
        std::vector<Storage> b, all, out;
        for (int r = 0; r < n; ++r) {
          auto view = [&](const std::function<double(int64_t)>& f) {
            return ViewOnGpu(count, offset, dtype, f);
          };
          b.push_back(view(value(r)));
          all.push_back(view(value(r)));
          out.push_back(view([](int64_t) { return -1; }));
        }
        const auto& w = *ranks.windows;
        ASSERT_EQ(LaunchOnEveryRank(
                      ranks,
                      [&](int r) {
                        return std::vector<OneShotArgs>{
                            w.Args(r, OneShotKind::kBroadcast, b[r], b[r], ReduceOp::kSum, root),
                            w.Args(r, OneShotKind::kAllReduce, all[r], out[r], ReduceOp::kSum, 0)};
                      }),
                  "")
            << what;
        for (int r = 0; r < n; ++r) {
          const std::string rank = absl::StrCat(what, ", rank ", r);
          ASSERT_EQ(Check(b[r], value(root), rank + ", broadcast"), "");
          ASSERT_EQ(Check(all[r], value(r), rank + ", all_reduce's input"), "");
          ASSERT_EQ(Check(out[r], sum, rank + ", all_reduce"), "");
        }
      }
    }
  }
}

// Rank `from`'s message `k` to rank `to`: bytes that differ by sender, receiver, message
// and place.
std::function<double(int64_t)> Message(int from, int to, int k) {
  return [=](int64_t i) { return (from * 31 + to * 7 + k * 13 + i) % 251; };
}

// Every rank sends to every peer and receives from every peer in one launch, eight
// times over (each slot used again, in lines and in bulk by turns), messages of sizes
// around the chunks, the lines' limit and the limit that differ by pair, in views off
// 1 byte.
TEST_P(OneShotKernelTest, SendsAndReceivesAmongEveryPair) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int n = GetParam();
  Ranks ranks = MakeRanksWithBudget(n, size_t{256} << 10);
  ASSERT_NE(ranks.windows, nullptr);
  const auto limit = static_cast<int64_t>(ranks.windows->layout().max_message());
  const int64_t chunk = static_cast<int64_t>(kOneShotChunkBytes);
  const auto lines = static_cast<int64_t>(kOneShotLineMaxPiece);
  const int64_t sizes[] = {1,     17,        chunk,          chunk + 3, 3 * chunk - 1,
                           lines, lines + 1, 5 * chunk + 33, limit};
  constexpr int kSizes = sizeof(sizes) / sizeof(sizes[0]);
  for (int k = 0; k < 8; ++k) {
    // received[r][q]: what rank r took from q; sent[r][q]: what r sent to q.
    std::vector<std::vector<Storage>> sent(n), received(n);
    std::vector<std::vector<OneShotMessage>> messages(n);
    for (int r = 0; r < n; ++r) {
      sent[r].resize(n);
      received[r].resize(n);
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        // The pair's size: the same at both ends.
        const int64_t out = sizes[(r + 2 * q + k) % kSizes], in = sizes[(q + 2 * r + k) % kSizes];
        const int64_t offset = (r + q + k) % 2;
        auto view = [&](int64_t count, const std::function<double(int64_t)>& f) {
          return ViewOnGpu(count, offset, DType::kUInt8, f);
        };
        sent[r][q] = view(out, Message(r, q, k));
        received[r][q] = view(in, [](int64_t) { return 0; });
        messages[r].push_back({true, q, sent[r][q].data_ptr(), static_cast<size_t>(out)});
        messages[r].push_back({false, q, received[r][q].data_ptr(), static_cast<size_t>(in)});
      }
    }
    Watchdog watchdog(*ranks.windows, std::chrono::seconds(20));
    for (int r = 0; r < n; ++r) {
      absl::Status launched =
          LaunchOneShotPeers(ranks.windows->PeerArgs(r, messages[r]), ranks.streams[r].native());
      ASSERT_TRUE(launched.ok()) << launched;
    }
    ASSERT_TRUE(SyncAll(ranks).ok());
    ASSERT_FALSE(watchdog.Cancel()) << "a rank waited for its peers for 20 s";
    for (int r = 0; r < n; ++r) {
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        ASSERT_EQ(Check(received[r][q], Message(q, r, k),
                        absl::StrCat(n, " ranks, round ", k, ": rank ", r, " from ", q)),
                  "");
      }
    }
  }
}

// Rank 0 queues twelve sends to rank 1 before rank 1 receives any, in lines and in
// bulk by turns: the third waits until rank 1 took the first (its slot), so rank 0's
// stream cannot finish until rank 1 receives; then every message arrives, in order.
TEST(OneShotKernelTest, SendsWaitForTheReceiveTwoBefore) {
  GENESIS_SKIP_WITHOUT_GPU();
  Ranks ranks = MakeRanksWithBudget(2, size_t{256} << 10);
  ASSERT_NE(ranks.windows, nullptr);
  constexpr int kMessages = 12;
  std::vector<Storage> out, in;
  for (int k = 0; k < kMessages; ++k) {
    const int64_t count = k % 2 == 0 ? 1 + (k * 7919) % 20000
                                     : static_cast<int64_t>(kOneShotLineMaxPiece) + 1 + k * 7919;
    auto o = Filled(count, DType::kUInt8, Message(0, 1, k), Device::Cuda(0));
    auto i = Filled(
        count, DType::kUInt8, [](int64_t) { return 0; }, Device::Cuda(0));
    ASSERT_TRUE(o.ok() && i.ok());
    out.push_back(*o);
    in.push_back(*i);
  }
  Watchdog watchdog(*ranks.windows, std::chrono::seconds(20));
  for (int k = 0; k < kMessages; ++k) {
    const OneShotMessage send{true, 1, out[k].data_ptr(), static_cast<size_t>(out[k].numel())};
    ASSERT_TRUE(
        LaunchOneShotPeers(ranks.windows->PeerArgs(0, {&send, 1}), ranks.streams[0].native()).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cudaStreamQuery(ranks.streams[0].native()), cudaErrorNotReady);  // At the third.
  for (int k = 0; k < kMessages; ++k) {
    const OneShotMessage receive{false, 0, in[k].data_ptr(), static_cast<size_t>(in[k].numel())};
    ASSERT_TRUE(
        LaunchOneShotPeers(ranks.windows->PeerArgs(1, {&receive, 1}), ranks.streams[1].native())
            .ok());
  }
  ASSERT_TRUE(SyncAll(ranks).ok());
  ASSERT_FALSE(watchdog.Cancel()) << "a rank waited for its peer for 20 s";
  for (int k = 0; k < kMessages; ++k) {
    ASSERT_EQ(Check(in[k], Message(0, 1, k), absl::StrCat("message ", k)), "");
  }
}

// Sends and receives captured into one graph per rank and replayed: the counts live on
// the device, so each replay carries the next messages; the inputs change between
// replays.
TEST(OneShotKernelTest, SendsAndReceivesInGraphsReplay) {
  GENESIS_SKIP_WITHOUT_GPU();
  Ranks ranks = MakeRanksWithBudget(2, size_t{256} << 10);
  ASSERT_NE(ranks.windows, nullptr);
  // Exchanges of this many bytes: lines, bulk, lines.
  constexpr int64_t kBytes[] = {20000, 100000, 20000};
  std::vector<Storage> out, in;
  std::vector<cuda::Graph> graphs;
  for (int r = 0; r < 2; ++r) {
    auto o = Filled(kBytes[1], DType::kUInt8, Message(r, 1 - r, 0), Device::Cuda(0));
    auto i = Filled(
        kBytes[1], DType::kUInt8, [](int64_t) { return 0; }, Device::Cuda(0));
    ASSERT_TRUE(o.ok() && i.ok());
    out.push_back(*o);
    in.push_back(*i);
    ASSERT_TRUE(cuda::BeginCapture(ranks.streams[r].native()).ok());
    // Three exchanges a replay: the slots wrap within one.
    for (const int64_t bytes : kBytes) {
      const OneShotMessage exchange[] = {
          {true, 1 - r, out[r].data_ptr(), static_cast<size_t>(bytes)},
          {false, 1 - r, in[r].data_ptr(), static_cast<size_t>(bytes)}};
      ASSERT_TRUE(
          LaunchOneShotPeers(ranks.windows->PeerArgs(r, exchange), ranks.streams[r].native()).ok());
    }
    auto graph = cuda::Graph::EndCapture(ranks.streams[r].native());
    ASSERT_TRUE(graph.ok()) << graph.status();
    graphs.push_back(*std::move(graph));
  }
  for (int replay = 0; replay < 3; ++replay) {
    for (int r = 0; r < 2; ++r) {
      auto next = Filled(kBytes[1], DType::kUInt8, Message(r, 1 - r, replay), Device::Cuda(0));
      ASSERT_TRUE(next.ok());
      ASSERT_TRUE(out[r].CopyFrom(*next).ok());
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Watchdog watchdog(*ranks.windows, std::chrono::seconds(20));
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(graphs[r].Launch(ranks.streams[r].native()).ok());
    ASSERT_TRUE(SyncAll(ranks).ok());
    ASSERT_FALSE(watchdog.Cancel()) << "replay " << replay << ": a rank waited for 20 s";
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(Check(in[r], Message(1 - r, r, replay), absl::StrCat("replay ", replay)), "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, OneShotKernelTest, ::testing::Values(2, 3, 4, 8));

// Twenty operations per rank queued before any finishes, each on its own storage with
// values of its own: every slot is written again while peers may still be behind, so a
// slot reused too early (or read too late) shows in the sums.
TEST(OneShotKernelTest, ManyOperationsInFlight) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 4;
  constexpr int kOperations = 20;
  Ranks ranks = MakeRanks(kRanks);
  ASSERT_NE(ranks.windows, nullptr);
  std::vector<std::vector<Storage>> storages(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int k = 0; k < kOperations; ++k) {
      const int64_t count = 1 + (k * 7919) % 60000;  // 1 to 30 blocks of float32.
      auto s = Filled(
          count, DType::kFloat32, [&](int64_t i) { return k + r + i % 17; }, Device::Cuda(0));
      ASSERT_TRUE(s.ok()) << s.status();
      storages[r].push_back(*s);
    }
  }
  Watchdog watchdog(*ranks.windows, std::chrono::seconds(20));
  for (int k = 0; k < kOperations; ++k) {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(LaunchOneShot(ranks.windows->Args(r, storages[r][k], ReduceOp::kSum),
                                ranks.streams[r].native())
                      .ok());
    }
  }
  ASSERT_TRUE(SyncAll(ranks).ok());
  ASSERT_FALSE(watchdog.Cancel()) << "a rank waited for its peers for 20 s";
  for (int r = 0; r < kRanks; ++r) {
    for (int k = 0; k < kOperations; ++k) {
      ASSERT_EQ(Check(
                    storages[r][k], [&](int64_t i) { return kRanks * (k + i % 17) + 6; },
                    absl::StrCat("rank ", r, ", operation ", k)),
                "");
    }
  }
}

// Captured into one graph per rank and replayed: the epochs live on the device, so each
// replay finds the slots where the last operation left them.
TEST(OneShotKernelTest, GraphsReplay) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 2;
  Ranks ranks = MakeRanks(kRanks);
  ASSERT_NE(ranks.windows, nullptr);
  std::vector<Storage> storages;
  std::vector<cuda::Graph> graphs;
  for (int r = 0; r < kRanks; ++r) {
    auto s = Filled(
        5000, DType::kFloat32, [](int64_t i) { return i % 3; }, Device::Cuda(0));
    ASSERT_TRUE(s.ok()) << s.status();
    storages.push_back(*s);
    ASSERT_TRUE(cuda::BeginCapture(ranks.streams[r].native()).ok());
    for (int k = 0; k < 4; ++k) {
      ASSERT_TRUE(LaunchOneShot(ranks.windows->Args(r, storages[r], ReduceOp::kSum),
                                ranks.streams[r].native())
                      .ok());
    }
    auto graph = cuda::Graph::EndCapture(ranks.streams[r].native());
    ASSERT_TRUE(graph.ok()) << graph.status();
    graphs.push_back(*std::move(graph));
  }
  Watchdog watchdog(*ranks.windows, std::chrono::seconds(20));
  for (int replay = 0; replay < 3; ++replay) {
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(graphs[r].Launch(ranks.streams[r].native()).ok());
  }
  ASSERT_TRUE(SyncAll(ranks).ok());
  ASSERT_FALSE(watchdog.Cancel()) << "a rank waited for its peers for 20 s";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(Check(
                  storages[r], [](int64_t i) { return (i % 3) * 4096; }, "after 12 sums"),
              "");
  }
  // An eager operation after the replays still meets its peers.
  EXPECT_EQ(RunOnce(ranks, DType::kFloat32, ReduceOp::kMax, 100, 0), "");
}

// Only rank 0 of two runs: its kernel waits until the abort flag is set, then ends.
TEST(OneShotKernelTest, AWaitingKernelStopsWhenTheGroupFails) {
  GENESIS_SKIP_WITHOUT_GPU();
  Ranks ranks = MakeRanks(2);
  ASSERT_NE(ranks.windows, nullptr);
  auto s = Filled(
      1000, DType::kFloat32, [](int64_t i) { return i; }, Device::Cuda(0));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(
      LaunchOneShot(ranks.windows->Args(0, *s, ReduceOp::kSum), ranks.streams[0].native()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cudaStreamQuery(ranks.streams[0].native()), cudaErrorNotReady);  // Still waiting.
  ranks.windows->Abort();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(ranks.streams[0].Synchronize().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(OneShotKernelTest, RefusesWhatItDoesNotServe) {
  GENESIS_SKIP_WITHOUT_GPU();
  Ranks ranks = MakeRanksWithBudget(2, 16384);
  ASSERT_NE(ranks.windows, nullptr);
  auto ints = Filled(
      10, DType::kInt32, [](int64_t i) { return i; }, Device::Cuda(0));
  auto big = Filled(
      4097, DType::kFloat32, [](int64_t i) { return i; }, Device::Cuda(0));
  ASSERT_TRUE(ints.ok() && big.ok());
  absl::Status avg = LaunchOneShot(ranks.windows->Args(0, *ints, ReduceOp::kAvg), nullptr);
  EXPECT_EQ(avg.code(), absl::StatusCode::kInvalidArgument) << avg;
  EXPECT_NE(avg.message().find("all_reduce does not reduce int32 with avg"), std::string::npos)
      << avg;
  absl::Status too_big = LaunchOneShot(ranks.windows->Args(0, *big, ReduceOp::kSum), nullptr);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument) << too_big;
  EXPECT_NE(too_big.message().find("all_reduce whose piece has 16388 bytes (1 to 16384)"),
            std::string::npos)
      << too_big;
  // A gather whose piece exceeds the limit, and a root out of range.
  OneShotArgs gather =
      ranks.windows->Args(0, OneShotKind::kAllGather, *big, *big, ReduceOp::kSum, 0);
  gather.piece = 8200 * 4 / 2 + 4;
  EXPECT_EQ(LaunchOneShot(gather, nullptr).code(), absl::StatusCode::kInvalidArgument);
  OneShotArgs rooted =
      ranks.windows->Args(0, OneShotKind::kBroadcast, *ints, *ints, ReduceOp::kSum, 2);
  absl::Status root = LaunchOneShot(rooted, nullptr);
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument) << root;
  EXPECT_NE(root.message().find("from root 2 of 2 ranks"), std::string::npos) << root;
  OneShotArgs empty = ranks.windows->Args(0, *ints, ReduceOp::kSum);
  empty.piece = 0;
  EXPECT_EQ(LaunchOneShot(empty, nullptr).code(), absl::StatusCode::kInvalidArgument);
  // Sends and receives: none, to this rank or out of range, of 0 bytes or too many,
  // two sends to one peer.
  const auto refused = [&](std::vector<OneShotMessage> messages, const std::string& says) {
    absl::Status status = LaunchOneShotPeers(ranks.windows->PeerArgs(0, messages), nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(says), std::string::npos) << status;
  };
  void* data = big->data_ptr();
  refused({}, "launch of 0 sends and receives");
  refused({{true, 0, data, 4}}, "send to rank 0 from rank 0 of 2");
  refused({{false, 2, data, 4}}, "receive from rank 2 from rank 0 of 2");
  refused({{true, 1, data, 0}}, "send to rank 1 of 0 bytes (1 to 16384)");
  refused({{false, 1, data, 16385}}, "receive from rank 1 of 16385 bytes (1 to 16384)");
  refused({{true, 1, data, 4}, {false, 1, data, 4}, {true, 1, data, 4}},
          "two one-shot messages send to rank 1 in one launch");
  refused(std::vector<OneShotMessage>(kOneShotMaxMessages + 1, {true, 1, data, 4}),
          "launch of 15 sends and receives (1 to 14)");
}

// A receive whose sender never comes waits until the abort flag is set, then ends.
TEST(OneShotKernelTest, AWaitingReceiveStopsWhenTheGroupFails) {
  GENESIS_SKIP_WITHOUT_GPU();
  Ranks ranks = MakeRanks(2);
  ASSERT_NE(ranks.windows, nullptr);
  auto s = Filled(
      1000, DType::kUInt8, [](int64_t) { return 0; }, Device::Cuda(0));
  ASSERT_TRUE(s.ok()) << s.status();
  const OneShotMessage receive{false, 0, s->data_ptr(), 1000};
  ASSERT_TRUE(
      LaunchOneShotPeers(ranks.windows->PeerArgs(1, {&receive, 1}), ranks.streams[1].native())
          .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cudaStreamQuery(ranks.streams[1].native()), cudaErrorNotReady);  // Still waiting.
  ranks.windows->Abort();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(ranks.streams[1].Synchronize().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
