// The batch copier on GPUs: every direction and mechanism checked byte for byte,
// stream ordering, graph capture of the fused path, peer copies and the staged fallback.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/core/device.h"
#include "genesis/cuda/test_util.h"
#include "genesis/transfer/batch_copy.h"
#include "genesis/transfer/batch_plan.h"
#include "genesis/transfer/copy.h"

namespace genesis::transfer {
namespace {

using ::testing::HasSubstr;

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// Device or pinned memory of `bytes`, zeroed, freed at the end of the test.
class Memory {
 public:
  static Memory Device(int device, size_t bytes) {
    Memory m;
    m.device_ = device;
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    EXPECT_EQ(cudaMalloc(&m.ptr_, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(m.ptr_, 0, bytes), cudaSuccess);
    cudaSetDevice(previous);
    m.bytes_ = bytes;
    return m;
  }
  static Memory Pinned(size_t bytes) {
    Memory m;
    EXPECT_EQ(cudaHostAlloc(&m.ptr_, bytes, cudaHostAllocPortable), cudaSuccess);
    std::memset(m.ptr_, 0, bytes);
    m.bytes_ = bytes;
    return m;
  }
  Memory() = default;
  Memory(Memory&& o) noexcept { *this = std::move(o); }
  Memory& operator=(Memory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(device_, o.device_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Memory() {
    if (ptr_ == nullptr) return;
    if (device_ >= 0) {
      cudaFree(ptr_);
    } else {
      cudaFreeHost(ptr_);
    }
  }
  char* get() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  int device_ = -1;
  size_t bytes_ = 0;
};

// The bytes of `bytes` at `p` on `device` (the CPU for host memory).
std::vector<char> Read(const void* p, Device device, size_t bytes) {
  std::vector<char> out(bytes);
  EXPECT_TRUE(CopyBytes(out.data(), Device::Cpu(), p, device, bytes).ok());
  return out;
}

void Write(void* p, Device device, const std::vector<char>& bytes) {
  EXPECT_TRUE(CopyBytes(p, device, bytes.data(), Device::Cpu(), bytes.size()).ok());
}

std::vector<char> Pattern(size_t bytes, uint32_t seed) {
  std::vector<char> out(bytes);
  std::mt19937 rng(seed);
  for (char& c : out) c = static_cast<char>(rng() % 255 + 1);  // Never 0.
  return out;
}

// A batch laid out in arenas: request i copies sizes[i] bytes to an offset of the
// destination arena, with a gap before each destination that must stay zero.
struct Arena {
  const void* src_base;
  Device src_device;
  bool src_pinned;
  char* dst_base;
  Device dst_device;
  bool dst_pinned;
  size_t capacity;
};

struct Laid {
  std::vector<CopyRequest> requests;
  size_t used = 0;  // Bytes of the destination arena the batch spans.
};

// Lays out copies of `sizes` with source and destination misaligned by `skew` bytes.
Laid Lay(const Arena& a, const std::vector<size_t>& sizes, size_t skew = 0) {
  Laid laid;
  size_t offset = 64;
  for (size_t bytes : sizes) {
    CopyRequest r;
    r.src = static_cast<const char*>(a.src_base) + offset + skew;
    r.src_device = a.src_device;
    r.src_pinned = a.src_pinned;
    r.dst = a.dst_base + offset;
    r.dst_device = a.dst_device;
    r.dst_pinned = a.dst_pinned;
    r.bytes = bytes;
    laid.requests.push_back(r);
    offset += (bytes + 64 + 511) / 512 * 512;  // A gap of at least 64 bytes.
  }
  EXPECT_LE(offset + skew, a.capacity);
  laid.used = offset;
  return laid;
}

// Every destination holds its source's bytes and every gap is still zero.
void ExpectCopied(const Arena& a, const Laid& laid, const std::vector<char>& src_bytes,
                  size_t skew = 0) {
  const std::vector<char> dst = Read(a.dst_base, a.dst_device, laid.used);
  std::vector<bool> covered(laid.used, false);
  for (size_t i = 0; i < laid.requests.size(); ++i) {
    const CopyRequest& r = laid.requests[i];
    const size_t offset = static_cast<char*>(r.dst) - a.dst_base;
    ASSERT_EQ(0, std::memcmp(dst.data() + offset, src_bytes.data() + offset + skew, r.bytes))
        << "request " << i << " of " << r.bytes << " bytes";
    std::fill(covered.begin() + offset, covered.begin() + offset + r.bytes, true);
  }
  for (size_t k = 0; k < laid.used; ++k) {
    if (!covered[k]) {
      ASSERT_EQ(dst[k], 0) << "byte " << k << " outside every destination";
    }
  }
}

std::set<Mechanism> Mechanisms(const BatchPlan& plan) {
  std::set<Mechanism> out;
  for (const CopyGroup& g : plan.groups) out.insert(g.mechanism);
  return out;
}

class BatchCopyCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto copier = BatchCopier::Create();
    ASSERT_TRUE(copier.ok()) << copier.status();
    copier_ = *std::move(copier);
  }
  std::unique_ptr<BatchCopier> copier_;
};

std::vector<size_t> MixedSizes(int n, size_t max, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<size_t> out;
  for (int i = 0; i < n; ++i) out.push_back(1 + rng() % max);
  return out;
}

TEST_F(BatchCopyCudaTest, EveryDirectionAndMechanismByteForByte) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kArena = size_t{64} << 20;
  const Device gpu = Device::Cuda(0);
  Memory dev_src = Memory::Device(0, kArena), dev_dst = Memory::Device(0, kArena);
  Memory pin_src = Memory::Pinned(kArena), pin_dst = Memory::Pinned(kArena);
  std::vector<char> page_src = Pattern(kArena, 3), page_dst(kArena, 0);
  std::memcpy(pin_src.get(), page_src.data(), kArena);
  const std::vector<char> dev_bytes = Pattern(kArena, 4);
  Write(dev_src.get(), gpu, dev_bytes);

  // Sizes that select each mechanism: many small (fused), mid-size (batch memcpy or
  // copy engine), large (copy engine), pageable >= 1 MiB (staging), odd sizes.
  std::vector<size_t> small = MixedSizes(40, 20000, 5);
  const std::vector<size_t> mid = {300000, 700001, 1 << 20, 2000000, 999};
  const std::vector<size_t> large = {size_t{5} << 20, (size_t{6} << 20) + 3};
  const std::vector<size_t> pageable = {size_t{3} << 20, (size_t{1} << 20) + 1, 4000};

  struct Case {
    const char* name;
    Arena arena;
    std::vector<size_t> sizes;
    const std::vector<char>* src_bytes;
  };
  std::vector<size_t> all = small;
  all.insert(all.end(), mid.begin(), mid.end());
  all.insert(all.end(), large.begin(), large.end());
  const std::vector<Case> cases = {
      {"d2d", {dev_src.get(), gpu, false, dev_dst.get(), gpu, false, kArena}, all, &dev_bytes},
      {"h2d pinned", {pin_src.get(), Device::Cpu(), true, dev_dst.get(), gpu, false, kArena},
       all, &page_src},
      {"d2h pinned", {dev_src.get(), gpu, false, pin_dst.get(), Device::Cpu(), true, kArena},
       all, &dev_bytes},
      {"h2d pageable",
       {page_src.data(), Device::Cpu(), false, dev_dst.get(), gpu, false, kArena},
       pageable, &page_src},
      {"d2h pageable",
       {dev_src.get(), gpu, false, page_dst.data(), Device::Cpu(), false, kArena},
       pageable, &dev_bytes},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(CopyBytes(c.arena.dst_base, c.arena.dst_device,
                          std::vector<char>(kArena, 0).data(), Device::Cpu(), kArena)
                    .ok());
    const Laid laid = Lay(c.arena, c.sizes);
    auto plan = copier_->Plan(laid.requests);
    ASSERT_TRUE(plan.ok()) << plan.status();
    SCOPED_TRACE(plan->ToString());
    ASSERT_TRUE(copier_->Execute(*plan, laid.requests, Device::Cpu(), nullptr, true).ok());
    ExpectCopied(c.arena, laid, *c.src_bytes);
    const std::set<Mechanism> used = Mechanisms(*plan);
    if (c.sizes == all) {
      EXPECT_TRUE(used.count(Mechanism::kFusedKernel));
      EXPECT_TRUE(used.count(Mechanism::kCopyEngine));
      // Within a device everything up to 4 MiB is fused; across the bus, mid-size
      // copies go to one cudaMemcpyBatchAsync.
      const bool d2d = c.arena.src_device == c.arena.dst_device;
      if (copier_->topology().batch_memcpy_available) {
        EXPECT_EQ(used.count(Mechanism::kBatchMemcpy), d2d ? 0u : 1u);
      }
    } else {
      EXPECT_TRUE(used.count(Mechanism::kPageableStaging));
    }
  }
}

TEST_F(BatchCopyCudaTest, TheFusedKernelHandlesAnyAlignmentAndManyLaunches) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kArena = size_t{8} << 20;
  const Device gpu = Device::Cuda(0);
  Memory src = Memory::Device(0, kArena), dst = Memory::Device(0, kArena);
  const std::vector<char> bytes = Pattern(kArena, 9);
  Write(src.get(), gpu, bytes);
  const Arena arena{src.get(), gpu, false, dst.get(), gpu, false, kArena};
  // 0: 16-byte path; 4: 4-byte words; 3: single bytes. 2,500 copies: three launches.
  for (size_t skew : {size_t{0}, size_t{4}, size_t{3}}) {
    SCOPED_TRACE(absl::StrCat("skew ", skew));
    ASSERT_CUDA(cudaMemset(dst.get(), 0, kArena));
    const Laid laid = Lay(arena, MixedSizes(2500, 2000, 11 + skew), skew);
    auto plan = copier_->Plan(laid.requests);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(Mechanisms(*plan), std::set<Mechanism>{Mechanism::kFusedKernel});
    ASSERT_TRUE(copier_->Copy(laid.requests).ok());
    ExpectCopied(arena, laid, bytes, skew);
  }
}

// Launches whose copies all have as many tiles find them by division.
TEST_F(BatchCopyCudaTest, TheFusedKernelWithEqualSizes) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kArena = size_t{16} << 20;
  const Device gpu = Device::Cuda(0);
  Memory src = Memory::Device(0, kArena), dst = Memory::Device(0, kArena);
  const std::vector<char> bytes = Pattern(kArena, 5);
  Write(src.get(), gpu, bytes);
  const Arena arena{src.get(), gpu, false, dst.get(), gpu, false, kArena};
  // One tile each (2,100 copies: three launches, the last one short), two tiles each,
  // and a size that is not a multiple of 16 with a skew (the byte path).
  for (const auto& [count, size, skew] :
       {std::tuple{2100, size_t{4} << 10, size_t{0}},
        std::tuple{100, (size_t{64} << 10) + 16, size_t{0}},
        std::tuple{1500, size_t{1000}, size_t{3}}}) {
    SCOPED_TRACE(absl::StrCat(count, " x ", size, " bytes, skew ", skew));
    ASSERT_CUDA(cudaMemset(dst.get(), 0, kArena));
    const Laid laid = Lay(arena, std::vector<size_t>(count, size), skew);
    auto plan = copier_->Plan(laid.requests);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(Mechanisms(*plan), std::set<Mechanism>{Mechanism::kFusedKernel});
    ASSERT_TRUE(copier_->Copy(laid.requests).ok());
    ExpectCopied(arena, laid, bytes, skew);
  }
}

// Copies `requests` (all within cuda:0, sources in `src` of `src_bytes`) and checks that
// each destination holds its source's bytes.
void CopyAndCheck(BatchCopier& copier, const std::vector<CopyRequest>& requests,
                  const char* src_base, const std::vector<char>& src_bytes) {
  auto plan = copier.Plan(requests);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(Mechanisms(*plan), std::set<Mechanism>{Mechanism::kFusedKernel});
  ASSERT_TRUE(copier.Copy(requests).ok());
  for (size_t i = 0; i < requests.size(); ++i) {
    const CopyRequest& r = requests[i];
    const size_t offset = static_cast<const char*>(r.src) - src_base;
    const std::vector<char> want(src_bytes.begin() + offset,
                                 src_bytes.begin() + offset + r.bytes);
    ASSERT_EQ(Read(r.dst, Device::Cuda(0), r.bytes), want) << "request " << i;
  }
}

// Each way a launch stores its copies (kernels/fused_copy.h): sources scattered (32-bit
// words above their alignment), in reverse (negative steps), all from one source (a step
// of 0), and over more than 4 GiB at odd addresses (64-bit words).
TEST_F(BatchCopyCudaTest, TheFusedKernelWithEveryEncoding) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kArena = size_t{16} << 20;
  const Device gpu = Device::Cuda(0);
  Memory src = Memory::Device(0, kArena), dst = Memory::Device(0, kArena);
  const std::vector<char> bytes = Pattern(kArena, 13);
  Write(src.get(), gpu, bytes);
  const Arena arena{src.get(), gpu, false, dst.get(), gpu, false, kArena};
  std::mt19937 rng(17);
  const Laid laid = Lay(arena, std::vector<size_t>(1500, 4096));

  std::vector<CopyRequest> scattered = laid.requests;
  std::vector<const void*> sources;
  for (const CopyRequest& r : scattered) sources.push_back(r.src);
  std::shuffle(sources.begin(), sources.end(), rng);
  for (size_t i = 0; i < scattered.size(); ++i) scattered[i].src = sources[i];
  {
    SCOPED_TRACE("scattered sources");
    ASSERT_CUDA(cudaMemset(dst.get(), 0, kArena));
    CopyAndCheck(*copier_, scattered, src.get(), bytes);
  }
  {
    SCOPED_TRACE("reversed, mixed sizes");
    const Laid mixed = Lay(arena, MixedSizes(300, 70000, 19));
    std::vector<CopyRequest> reversed(mixed.requests.rbegin(), mixed.requests.rend());
    ASSERT_CUDA(cudaMemset(dst.get(), 0, kArena));
    CopyAndCheck(*copier_, reversed, src.get(), bytes);
  }
  {
    SCOPED_TRACE("one source");
    std::vector<CopyRequest> one_source = laid.requests;
    for (CopyRequest& r : one_source) r.src = laid.requests[7].src;
    ASSERT_CUDA(cudaMemset(dst.get(), 0, kArena));
    CopyAndCheck(*copier_, one_source, src.get(), bytes);
  }

  // Sources at odd addresses more than 4 GiB apart: 64-bit words.
  constexpr size_t kWide = (size_t{5} << 30) + 4096;
  void* wide = nullptr;
  if (cudaMalloc(&wide, kWide) != cudaSuccess) {
    cudaGetLastError();
    GTEST_SKIP() << "no 5 GiB for sources more than 4 GiB apart";
  }
  std::vector<CopyRequest> far = scattered;
  std::vector<char> far_bytes(kArena, 0);  // What each source holds, by its request.
  for (size_t i = 0; i < far.size(); ++i) {
    const size_t offset = (i % 2 == 0 ? 1 : (size_t{5} << 30) - 3 * 4096) + 8 * i;
    far[i].src = static_cast<char*>(wide) + offset;
    const std::vector<char> piece = Pattern(far[i].bytes, 100 + static_cast<uint32_t>(i));
    ASSERT_CUDA(cudaMemcpy(static_cast<char*>(wide) + offset, piece.data(), piece.size(),
                           cudaMemcpyHostToDevice));
    std::copy(piece.begin(), piece.end(),
              far_bytes.begin() + (static_cast<char*>(far[i].dst) - dst.get()));
  }
  // Later pieces overlap earlier ones' sources (8 bytes apart): check what each source
  // holds once all are written.
  for (size_t i = 0; i < far.size(); ++i) {
    const std::vector<char> piece = Read(far[i].src, gpu, far[i].bytes);
    std::copy(piece.begin(), piece.end(),
              far_bytes.begin() + (static_cast<char*>(far[i].dst) - dst.get()));
  }
  ASSERT_CUDA(cudaMemset(dst.get(), 0, kArena));
  auto plan = copier_->Plan(far);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(Mechanisms(*plan), std::set<Mechanism>{Mechanism::kFusedKernel});
  ASSERT_TRUE(copier_->Copy(far).ok());
  const std::vector<char> got = Read(dst.get(), gpu, laid.used);
  for (size_t i = 0; i < far.size(); ++i) {
    const size_t offset = static_cast<char*>(far[i].dst) - dst.get();
    ASSERT_EQ(0, std::memcmp(got.data() + offset, far_bytes.data() + offset, far[i].bytes))
        << "request " << i;
  }
  ASSERT_CUDA(cudaFree(wide));
}

TEST_F(BatchCopyCudaTest, CopyAsyncIsOrderedOnTheCallersStream) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kBytes = size_t{4} << 20;
  const Device gpu = Device::Cuda(0);
  Memory src = Memory::Device(0, kBytes), dst = Memory::Device(0, kBytes);
  Memory pinned = Memory::Pinned(kBytes);
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Fused and copy-engine copies, device to device and device to pinned host.
  const Arena d2d{src.get(), gpu, false, dst.get(), gpu, false, kBytes};
  const Arena d2h{src.get(), gpu, false, pinned.get(), Device::Cpu(), true, kBytes};
  // Two lanes joined to the stream by events; then one lane, run on the stream itself.
  Laid both = Lay(d2d, std::vector<size_t>(16, 8192));
  const Laid more = Lay(d2h, {size_t{2} << 20, 8192});
  both.requests.insert(both.requests.end(), more.requests.begin(), more.requests.end());
  const Laid one = Lay(d2d, std::vector<size_t>(16, 8192));
  for (int round = 1; round <= 4; ++round) {
    const Laid& laid = round % 2 == 1 ? both : one;
    // The source is written on the stream just before, and overwritten just after.
    ASSERT_CUDA(cudaMemsetAsync(src.get(), 0x10 + round, kBytes, stream));
    ASSERT_TRUE(copier_->CopyAsync(laid.requests, gpu, stream).ok());
    ASSERT_CUDA(cudaMemsetAsync(src.get(), 0x7f, kBytes, stream));
    ASSERT_CUDA(cudaStreamSynchronize(stream));
    for (const CopyRequest& r : laid.requests) {
      const std::vector<char> got = Read(r.dst, r.dst_device, r.bytes);
      ASSERT_EQ(got, std::vector<char>(r.bytes, static_cast<char>(0x10 + round)))
          << "round " << round << ", " << r.bytes << " bytes to " << r.dst_device.ToString();
    }
  }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

TEST_F(BatchCopyCudaTest, TheFusedPathIsCapturedInAGraph) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kBytes = size_t{1} << 20;
  const Device gpu = Device::Cuda(0);
  Memory src = Memory::Device(0, kBytes), dst = Memory::Device(0, kBytes);
  Memory pinned = Memory::Pinned(kBytes);
  const Arena d2d{src.get(), gpu, false, dst.get(), gpu, false, kBytes};
  const Arena h2d{pinned.get(), Device::Cpu(), true, dst.get(), gpu, false, kBytes};
  Laid laid = Lay(d2d, std::vector<size_t>(32, 4096));
  const Laid from_host = Lay(h2d, std::vector<size_t>(16, 1000));
  // The host-to-device copies land after the device-to-device ones in the arena.
  for (CopyRequest r : from_host.requests) {
    r.dst = static_cast<char*>(r.dst) + laid.used;
    laid.requests.push_back(r);
  }
  auto plan = copier_->Plan(laid.requests);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(Mechanisms(*plan), std::set<Mechanism>{Mechanism::kFusedKernel}) << plan->ToString();

  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status captured = copier_->CopyAsync(laid.requests, gpu, stream);
  cudaStreamCaptureStatus after = cudaStreamCaptureStatusNone;
  ASSERT_CUDA(cudaStreamIsCapturing(stream, &after));
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  ASSERT_TRUE(captured.ok()) << captured;
  ASSERT_EQ(after, cudaStreamCaptureStatusActive) << "the batch invalidated the capture";
  ASSERT_CUDA(ended);

  // Waiting is impossible inside a capture, and host work cannot be captured: both are
  // refused before anything is queued.
  ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status sync = copier_->Copy(laid.requests, gpu, stream);
  std::vector<char> pageable(2 << 20, 1);
  const std::vector<CopyRequest> staged = {
      {pageable.data(), Device::Cpu(), false, dst.get(), gpu, false, pageable.size() / 2}};
  const absl::Status host = copier_->CopyAsync(staged, gpu, stream);
  cudaGraph_t refused = nullptr;
  ASSERT_CUDA(cudaStreamEndCapture(stream, &refused));
  cudaGraphDestroy(refused);
  EXPECT_EQ(sync.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(host.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(host.message(), HasSubstr("capturing"));

  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 1; round <= 2; ++round) {
    ASSERT_CUDA(cudaMemset(src.get(), 0x20 + round, kBytes));
    std::memset(pinned.get(), 0x40 + round, kBytes);
    ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    ASSERT_CUDA(cudaStreamSynchronize(stream));
    for (const CopyRequest& r : laid.requests) {
      const char want = static_cast<char>((r.src_device.is_cpu() ? 0x40 : 0x20) + round);
      ASSERT_EQ(Read(r.dst, gpu, r.bytes), std::vector<char>(r.bytes, want));
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(BatchCopyCudaTest, BadStreamsAreRefused) {
  GENESIS_SKIP_WITHOUT_GPU();
  char a[8] = {}, b[8] = {};
  const std::vector<CopyRequest> requests = {
      {a, Device::Cpu(), false, b, Device::Cpu(), false, 8}};
  const int n = copier_->topology().device_count;
  EXPECT_EQ(copier_->Copy(requests, Device::Cuda(n), nullptr).code(),
            absl::StatusCode::kOutOfRange);
  if (n >= 2) {
    cudaStream_t stream = nullptr;
    cudaSetDevice(1);
    ASSERT_CUDA(cudaStreamCreate(&stream));
    cudaSetDevice(0);
    const absl::Status status = copier_->CopyAsync(requests, Device::Cuda(0), stream);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("belongs to cuda:1"));
    cudaStreamDestroy(stream);
  }
}

// Copies from cuda:0 to cuda:1: large and many small, with the copier's peer access
// and with the staged fallback forced.
void CheckPeerBatch(BatchCopier& copier, Mechanism want_large, Mechanism want_small) {
  constexpr size_t kArena = size_t{48} << 20;
  Memory src = Memory::Device(0, kArena), dst = Memory::Device(1, kArena);
  const std::vector<char> bytes = Pattern(kArena, 21);
  Write(src.get(), Device::Cuda(0), bytes);
  const Arena arena{src.get(), Device::Cuda(0), false, dst.get(), Device::Cuda(1), false,
                    kArena};
  std::vector<size_t> sizes = MixedSizes(64, 65536, 22);
  sizes.push_back(size_t{20} << 20);
  sizes.push_back((size_t{9} << 20) + 7);
  const Laid laid = Lay(arena, sizes);
  auto plan = copier.Plan(laid.requests);
  ASSERT_TRUE(plan.ok()) << plan.status();
  SCOPED_TRACE(plan->ToString());
  const std::set<Mechanism> used = Mechanisms(*plan);
  EXPECT_TRUE(used.count(want_large));
  EXPECT_TRUE(used.count(want_small));
  for (int round = 0; round < 2; ++round) {  // Twice: the staging buffers are reused.
    ASSERT_TRUE(copier.Copy(laid.requests).ok());
    ExpectCopied(arena, laid, bytes);
  }
}

TEST(BatchCopyPeerTest, PeerCopiesAndFusedPeerKernels) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  auto copier = BatchCopier::Create();
  ASSERT_TRUE(copier.ok());
  const Topology& t = (*copier)->topology();
  if (!t.peer_access[0][1] && !t.peer_access[1][0]) {
    GTEST_SKIP() << "cuda:0 and cuda:1 have no peer access";
  }
  CheckPeerBatch(**copier, Mechanism::kPeerCopy, Mechanism::kPeerFusedKernel);
  EXPECT_TRUE((*copier)->EnablePeerAccess(t.peer_access[1][0] ? 1 : 0,
                                          t.peer_access[1][0] ? 0 : 1)
                  .ok());
}

TEST(BatchCopyPeerTest, FusedPeerKernelsThatPull) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  BatchCopyOptions options;
  options.plan.peer_fused_kernel_pushes = false;
  auto copier = BatchCopier::Create(options);
  ASSERT_TRUE(copier.ok());
  const Topology& t = (*copier)->topology();
  if (!t.peer_access[0][1] && !t.peer_access[1][0]) {
    GTEST_SKIP() << "cuda:0 and cuda:1 have no peer access";
  }
  CheckPeerBatch(**copier, Mechanism::kPeerCopy, Mechanism::kPeerFusedKernel);
}

// Small peer copies that continue one another on both sides: a run of 8 MiB (above
// copy_engine_min_bytes) goes to the copy engine as one copy, a run of 32 KiB and
// scattered copies to the fused kernel, in one group; pulling and pushing.
TEST(BatchCopyPeerTest, AdjacentPeerCopiesMoveAsOneRun) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  for (bool push : {false, true}) {
    SCOPED_TRACE(push ? "pushing" : "pulling");
    BatchCopyOptions options;
    options.plan.peer_fused_kernel_pushes = push;
    auto copier = BatchCopier::Create(options);
    ASSERT_TRUE(copier.ok());
    const Topology& t = (*copier)->topology();
    if (!t.peer_access[0][1] && !t.peer_access[1][0]) {
      GTEST_SKIP() << "cuda:0 and cuda:1 have no peer access";
    }
    constexpr size_t kArena = size_t{12} << 20;
    Memory src = Memory::Device(0, kArena), dst = Memory::Device(1, kArena);
    const std::vector<char> bytes = Pattern(kArena, 23);
    Write(src.get(), Device::Cuda(0), bytes);
    const Arena arena{src.get(), Device::Cuda(0), false, dst.get(), Device::Cuda(1), false,
                      kArena};
    Laid laid;
    size_t offset = 64;
    const auto add = [&](size_t n, size_t size, size_t gap) {
      for (size_t i = 0; i < n; ++i) {
        laid.requests.push_back(CopyRequest{static_cast<const char*>(arena.src_base) + offset,
                                            arena.src_device, false, arena.dst_base + offset,
                                            arena.dst_device, false, size});
        offset += size + gap;
      }
      offset += 512;  // The next part does not continue this one.
    };
    add(20, 1000, 24);              // Scattered.
    add(128, size_t{64} << 10, 0);  // 8 MiB in one run.
    add(8, size_t{4} << 10, 0);     // 32 KiB in one run.
    add(20, 777, 100);              // Scattered.
    laid.used = offset;
    auto plan = (*copier)->Plan(laid.requests);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(Mechanisms(*plan), std::set<Mechanism>{Mechanism::kPeerFusedKernel})
        << plan->ToString();
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE((*copier)->Copy(laid.requests).ok());
      ExpectCopied(arena, laid, bytes);
    }
  }
}

TEST(BatchCopyPeerTest, TheStagedFallbackWhenPeerAccessIsOff) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  BatchCopyOptions options;
  options.disable_peer_access = true;
  options.staged_peer_chunk_bytes = size_t{1} << 20;  // Many chunks per copy.
  auto copier = BatchCopier::Create(options);
  ASSERT_TRUE(copier.ok());
  CheckPeerBatch(**copier, Mechanism::kStagedPeer, Mechanism::kStagedPeer);
  EXPECT_EQ((*copier)->EnablePeerAccess(0, 1).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace genesis::transfer
