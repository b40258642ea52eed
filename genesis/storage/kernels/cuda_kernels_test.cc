// The CUDA kernels against the CPU code, bit for bit: ConvertCuda for every
// dtype pair on contiguous and strided views of data full of special values
// and random bits, CopyStridedCuda on random views of up to 8 dims, odd
// transposes, broadcasts and 64-bit offsets, FillCuda and ArangeCuda for
// every dtype. Also the argument checks (they need no GPU) and, in the
// CPU-only build, that every function says it was built without CUDA.
// Without a GPU the tests that need one skip, saying why.
#include "genesis/storage/kernels/cuda_kernels.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/kernels/fill.h"
#include "genesis/storage/kernels/kernel_test_util.h"
#include "genesis/storage/kernels/test_device_buffer.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"
#include "gtest/gtest.h"

namespace genesis::storage::kernels {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint8_t kSentinel = 0xA5;

bool Contains(const absl::Status& status, std::string_view needle) {
  return std::string(status.message()).find(needle) != std::string::npos;
}

Layout Contiguous(std::initializer_list<int64_t> shape, int64_t offset = 0) {
  return Layout::Contiguous(shape, offset).value();
}

// Fake device addresses for argument checks that fail before any access.
void* const kSomewhere = reinterpret_cast<void*>(uintptr_t{0x10000});

// ---- Argument checks: the same in every build with CUDA, GPU or not.

class CudaKernelsArgumentTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::BuiltWithCuda()) {
      GTEST_SKIP() << "CPU-only build: CudaKernelsNoCudaTest covers it";
    }
  }
};

TEST_F(CudaKernelsArgumentTest, ConvertCudaRejectsBadArguments) {
  const Layout a = Contiguous({2, 3});
  const Layout b = Contiguous({3, 2});
  const Layout broadcast = Contiguous({1, 3}).Expand({2, 3}).value();
  struct Case {
    absl::Status status;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {ConvertCuda(kSomewhere, a, DType::kFloat32, kSomewhere, b, DType::kInt8,
                   nullptr),
       {"ConvertCuda", "[2, 3]", "[3, 2]"}},
      {ConvertCuda(kSomewhere, a, static_cast<DType>(42), kSomewhere, a,
                   DType::kInt8, nullptr),
       {"ConvertCuda: src_type = 42 is not a DType"}},
      {ConvertCuda(kSomewhere, a, DType::kInt8, kSomewhere, a,
                   static_cast<DType>(10), nullptr),
       {"ConvertCuda: dst_type = 10 is not a DType"}},
      {ConvertCuda(kSomewhere, a, DType::kFloat32, kSomewhere, broadcast,
                   DType::kInt8, nullptr),
       {"ConvertCuda: destination dim 0 has stride 0 and size 2"}},
      {ConvertCuda(nullptr, a, DType::kFloat32, kSomewhere, a, DType::kInt8,
                   nullptr),
       {"ConvertCuda: src_base is null but the views have 6 elements"}},
      {ConvertCuda(kSomewhere, a, DType::kFloat32, nullptr, a, DType::kInt8,
                   nullptr),
       {"ConvertCuda: dst_base is null"}},
      {ConvertCuda(static_cast<char*>(kSomewhere) + 2, a, DType::kFloat32,
                   kSomewhere, a, DType::kInt8, nullptr),
       {"ConvertCuda: src_base = 0x10002 is not aligned to 4 bytes",
        "float32"}},
      {ConvertCuda(kSomewhere, a, DType::kInt8,
                   static_cast<char*>(kSomewhere) + 1, a, DType::kBFloat16,
                   nullptr),
       {"ConvertCuda: dst_base = 0x10001 is not aligned to 2 bytes"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.status;
    for (const std::string& text : c.says) {
      EXPECT_TRUE(Contains(c.status, text)) << c.status << "\nlacks: " << text;
    }
  }
  // Empty views need no buffers.
  const Layout empty = Contiguous({0, 3});
  EXPECT_TRUE(ConvertCuda(nullptr, empty, DType::kFloat32, nullptr, empty,
                          DType::kInt8, nullptr)
                  .ok());
}

TEST_F(CudaKernelsArgumentTest, CopyStridedCudaRejectsBadArguments) {
  const Layout a = Contiguous({4, 5});
  absl::Status status = CopyStridedCuda(kSomewhere, a, kSomewhere,
                                        Contiguous({5, 4}), 4, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status,
                       "CopyStridedCuda: source shape [4, 5] differs "
                       "from destination shape [5, 4]"))
      << status;
  status = CopyStridedCuda(kSomewhere, a, kSomewhere, a, 0, nullptr);
  EXPECT_EQ(status,
            absl::InvalidArgumentError("CopyStridedCuda: elem_size = 0"));
  status =
      CopyStridedCuda(kSomewhere, a, kSomewhere,
                      Contiguous({4, 1}).Expand({4, 5}).value(), 4, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "destination dim 1 has stride 0")) << status;
  status = CopyStridedCuda(kSomewhere, a, nullptr, a, 4, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "dst_base is null")) << status;
  const Layout empty = Contiguous({4, 0});
  EXPECT_TRUE(CopyStridedCuda(nullptr, empty, nullptr, empty, 4, nullptr).ok());
}

TEST_F(CudaKernelsArgumentTest, FillAndArangeRejectBadArguments) {
  const uint8_t pattern[8] = {};
  const std::pair<absl::Status, std::string> cases[] = {
      {FillCuda(kSomewhere, -1, pattern, 4, nullptr),
       "FillCuda: numel = -1 is negative"},
      {FillCuda(kSomewhere, 4, pattern, 3, nullptr),
       "FillCuda: elem_size = 3 is not 1, 2, 4 or 8"},
      {FillCuda(nullptr, 4, pattern, 4, nullptr),
       "FillCuda: dst is null but numel = 4"},
      {FillCuda(kSomewhere, 4, nullptr, 4, nullptr),
       "FillCuda: pattern is null but numel = 4"},
      {ArangeCuda(kSomewhere, -5, 0, 1, DType::kInt32, nullptr),
       "ArangeCuda: numel = -5 is negative"},
      {ArangeCuda(kSomewhere, 5, 0, 1, static_cast<DType>(42), nullptr),
       "ArangeCuda: dtype = 42 is not a DType"},
      {ArangeCuda(nullptr, 5, 0, 1, DType::kInt32, nullptr),
       "ArangeCuda: dst is null but numel = 5"},
      {ArangeCuda(static_cast<char*>(kSomewhere) + 2, 5, 0, 1, DType::kFloat64,
                  nullptr),
       "ArangeCuda: dst = 0x10002 is not aligned to 8 bytes"},
  };
  for (const auto& [status, says] : cases) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(Contains(status, says)) << status << "\nlacks: " << says;
  }
  EXPECT_TRUE(FillCuda(nullptr, 0, nullptr, 4, nullptr).ok());
  EXPECT_TRUE(ArangeCuda(nullptr, 0, 0, 1, DType::kInt32, nullptr).ok());
}

// ---- The CPU-only build.

TEST(CudaKernelsNoCudaTest, EveryFunctionSaysItWasBuiltWithoutCuda) {
  if (cuda::BuiltWithCuda()) GTEST_SKIP() << "built with CUDA";
  const Layout a = Contiguous({2, 3});
  const uint8_t pattern[4] = {};
  for (const absl::Status& status :
       {FillCuda(kSomewhere, 6, pattern, 4, nullptr),
        ArangeCuda(kSomewhere, 6, 0, 1, DType::kFloat32, nullptr),
        CopyStridedCuda(kSomewhere, a, kSomewhere, a, 4, nullptr),
        ConvertCuda(kSomewhere, a, DType::kFloat32, kSomewhere, a,
                    DType::kBFloat16, nullptr)}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_TRUE(Contains(status, "built without CUDA")) << status;
  }
}

// ---- On a GPU.

// Bytes in device memory, `misalign` bytes past the start of an allocation
// (which cudaMalloc aligns to 256 bytes).
struct DeviceBytes {
  DeviceBuffer buffer;
  size_t misalign = 0;
  size_t size = 0;

  char* data() const { return buffer.data() + misalign; }

  // The bytes, after all queued device work has finished.
  Bytes Download() const {
    const Bytes all = ValueOrThrow(buffer.Download());
    return Bytes(all.begin() + misalign, all.begin() + misalign + size);
  }
};

DeviceBytes ToDevice(const Bytes& bytes, size_t misalign = 0) {
  DeviceBytes device{
      ValueOrThrow(DeviceBuffer::Create(bytes.size() + misalign + 1)), misalign,
      bytes.size()};
  ThrowIfError(device.buffer.Upload(bytes, misalign));
  return device;
}

class CudaKernelsTest : public testing::Test {
 protected:
  void SetUp() override { GENESIS_SKIP_WITHOUT_GPU(); }
};

// ConvertCuda and ConvertStrided over the same source bytes, into
// destination bases of dst_base_numel elements prefilled with kSentinel:
// expects equal destination bases.
void ExpectConvertMatchesCpu(const Bytes& src_base, const Layout& src,
                             DType from, const Layout& dst,
                             int64_t dst_base_numel, DType to,
                             std::string_view what,
                             CUstream_st* stream = nullptr) {
  const Bytes initial(dst_base_numel * ItemSize(to), kSentinel);
  Bytes want = initial;
  ASSERT_TRUE(
      ConvertStrided(src_base.data(), src, from, want.data(), dst, to).ok());
  const DeviceBytes device_src = ToDevice(src_base);
  const DeviceBytes device_dst = ToDevice(initial);
  const absl::Status status = ConvertCuda(device_src.data(), src, from,
                                          device_dst.data(), dst, to, stream);
  ASSERT_TRUE(status.ok()) << status;
  ExpectSameBytes(
      device_dst.Download(), want, ItemSize(to),
      absl::StrCat(ToAbsl(DTypeName(from)), " -> ", ToAbsl(DTypeName(to)), ", ",
                   ToAbsl(what), ": ", src.ToString(), " -> ", dst.ToString()));
}

std::string PairName(DType from, DType to) {
  return absl::StrCat(ToAbsl(DTypeName(from)), " -> ", ToAbsl(DTypeName(to)));
}

TEST_F(CudaKernelsTest, ConvertsEveryPairContiguously) {
  // (numel, source offset, destination offset): aligned and unaligned
  // starts, vector tails, and sizes below one vector.
  const int64_t cases[][3] = {{4173, 0, 0}, {4173, 3, 5}, {4173, 1, 0},
                              {1, 0, 0},    {7, 2, 1},    {33, 0, 3}};
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      for (const auto& [n, src_offset, dst_offset] : cases) {
        const Bytes src = SampleElements(from, n + src_offset, 11);
        ExpectConvertMatchesCpu(src, Contiguous({n}, src_offset), from,
                                Contiguous({n}, dst_offset), n + dst_offset + 2,
                                to, "contiguous");
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(CudaKernelsTest, ConvertsEveryPairThroughStridedViews) {
  const Layout transposed = Contiguous({37, 61}).Transpose(0, 1).value();
  const Layout batch = Contiguous({3, 40, 33}).Permute({0, 2, 1}).value();
  std::mt19937 rng(5);
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(PairName(from, to));
      // Transposes (tiled), into contiguous and into transposed views.
      ExpectConvertMatchesCpu(SampleElements(from, 37 * 61, 1), transposed,
                              from, Contiguous({61, 37}), 61 * 37, to,
                              "transpose");
      ExpectConvertMatchesCpu(SampleElements(from, 3 * 40 * 33, 2), batch, from,
                              Contiguous({3, 33, 40}), 3 * 33 * 40, to,
                              "batch of transposes");
      ExpectConvertMatchesCpu(SampleElements(from, 61 * 37, 3),
                              Contiguous({61, 37}), from, transposed, 37 * 61,
                              to, "into a transpose");
      // Broadcast source dims, slices, permutations.
      const Layout expanded =
          Contiguous({5, 1, 7}, 2).Expand({4, 5, 6, 7}).value();
      ExpectConvertMatchesCpu(SampleElements(from, 2 + 35, 4), expanded, from,
                              Contiguous({4, 5, 6, 7}), 4 * 5 * 6 * 7, to,
                              "broadcast");
      for (int round = 0; round < 4; ++round) {
        const std::vector<int64_t> shape = RandomShape(rng);
        const ViewCase src = RandomView(rng, shape);
        const ViewCase dst = RandomWritableView(rng, shape);
        ExpectConvertMatchesCpu(SampleElements(from, src.base_numel, round),
                                src.layout, from, dst.layout, dst.base_numel,
                                to, absl::StrCat("random view ", round));
      }
      if (HasFailure()) return;
    }
  }
}

TEST_F(CudaKernelsTest, ConvertsMatricesOfBenchmarkSize) {
  const int64_t n = 4096;
  const Layout matrix = Contiguous({n, n});
  for (const auto& [from, to] : {std::pair{DType::kFloat32, DType::kBFloat16},
                                 std::pair{DType::kBFloat16, DType::kFloat32},
                                 std::pair{DType::kFloat32, DType::kFloat16}}) {
    ExpectConvertMatchesCpu(SampleElements(from, n * n, 8), matrix, from,
                            matrix, n * n, to, "4096 x 4096");
    ExpectConvertMatchesCpu(SampleElements(from, n * n, 9),
                            matrix.Transpose(0, 1).value(), from, matrix, n * n,
                            to, "4096 x 4096 transposed");
  }
}

TEST_F(CudaKernelsTest, ConvertsOnTheGivenStream) {
  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int64_t n = 1 << 20;
  ExpectConvertMatchesCpu(SampleElements(DType::kFloat64, n, 4),
                          Contiguous({n}), DType::kFloat64, Contiguous({n}), n,
                          DType::kFloat16, "non-blocking stream",
                          stream->native());
}

// CopyStridedCuda and CopyStrided over the same source bytes, into
// destination bases prefilled with kSentinel, with the device pointers
// misaligned as given: expects equal destination bases.
void ExpectCopyMatchesCpu(const Layout& src, int64_t src_base_numel,
                          const Layout& dst, int64_t dst_base_numel,
                          size_t item, size_t src_misalign, size_t dst_misalign,
                          std::string_view what) {
  const Bytes src_base =
      SampleElements(DType::kUInt8, src_base_numel * item, 77);
  const Bytes initial(dst_base_numel * item, kSentinel);
  Bytes want = initial;
  ASSERT_TRUE(CopyStrided(src_base.data(), src, want.data(), dst, item).ok());
  const DeviceBytes device_src = ToDevice(src_base, src_misalign);
  const DeviceBytes device_dst = ToDevice(initial, dst_misalign);
  const absl::Status status = CopyStridedCuda(
      device_src.data(), src, device_dst.data(), dst, item, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  ExpectSameBytes(
      device_dst.Download(), want, item,
      absl::StrCat(ToAbsl(what), ": ", src.ToString(), " -> ", dst.ToString(),
                   ", ", item, "-byte items, pointers misaligned by ",
                   src_misalign, " and ", dst_misalign));
}

TEST_F(CudaKernelsTest, CopiesRandomViews) {
  std::mt19937 rng(2024);
  const size_t items[] = {1, 2, 3, 4, 6, 8, 12, 16};
  for (int round = 0; round < 600; ++round) {
    const std::vector<int64_t> shape = RandomShape(rng);
    const ViewCase src = RandomView(rng, shape);
    const ViewCase dst = RandomWritableView(rng, shape);
    const size_t item = items[Uniform(rng, 0, 7)];
    // Mostly aligned to the item (as tensors are), sometimes not at all.
    const bool odd = Uniform(rng, 0, 3) == 0;
    const size_t src_misalign = odd ? Uniform(rng, 0, 15) : 0;
    const size_t dst_misalign = odd ? Uniform(rng, 0, 15) : 0;
    ExpectCopyMatchesCpu(src.layout, src.base_numel, dst.layout, dst.base_numel,
                         item, src_misalign, dst_misalign,
                         absl::StrCat("round ", round));
    if (HasFailure()) return;
  }
}

TEST_F(CudaKernelsTest, CopiesTransposesOfOddSizes) {
  std::vector<std::pair<int64_t, int64_t>> shapes = OddTransposeShapes();
  shapes.emplace_back(4096, 4096);
  for (const auto& [rows, cols] : shapes) {
    for (size_t item : {1, 2, 4, 8, 16, 3, 12}) {
      if (rows * cols > 1 << 20 && item != 4) continue;
      for (size_t misalign : {0, 1}) {
        const Layout src = Contiguous({rows, cols}).Transpose(0, 1).value();
        ExpectCopyMatchesCpu(src, rows * cols, Contiguous({cols, rows}),
                             rows * cols, item, misalign, misalign,
                             "transpose");
        // And a batch of them, read at an offset.
        const Layout batch =
            Contiguous({2, rows, cols}, 5).Permute({0, 2, 1}).value();
        ExpectCopyMatchesCpu(batch, 5 + 2 * rows * cols,
                             Contiguous({2, cols, rows}), 2 * rows * cols, item,
                             misalign, 0, "batch of transposes");
      }
    }
  }
}

TEST_F(CudaKernelsTest, CopiesBroadcastsSlicesAndContiguousRuns) {
  // A scalar to a vector, a row to a matrix, a column to a matrix.
  ExpectCopyMatchesCpu(Layout().Unsqueeze(0).value().Expand({1000}).value(), 1,
                       Contiguous({1000}), 1000, 4, 0, 0, "scalar broadcast");
  ExpectCopyMatchesCpu(Contiguous({1, 77}, 3).Expand({50, 77}).value(), 80,
                       Contiguous({50, 77}), 50 * 77, 2, 0, 0, "row broadcast");
  ExpectCopyMatchesCpu(Contiguous({50, 1}).Expand({50, 77}).value(), 50,
                       Contiguous({50, 77}, 1), 1 + 50 * 77, 8, 0, 0,
                       "column broadcast");
  // Row slices (wide words), strided rows, a single element.
  ExpectCopyMatchesCpu(Contiguous({64, 64}).Slice(1, 4, 12).value(), 64 * 64,
                       Contiguous({64, 8}), 64 * 8, 4, 0, 0, "row slices");
  ExpectCopyMatchesCpu(Contiguous({64, 64}).Slice(1, 0, 64, 3).value(), 64 * 64,
                       Contiguous({64, 22}), 64 * 22, 2, 0, 0, "strided rows");
  ExpectCopyMatchesCpu(Contiguous({}, 9), 10, Contiguous({}, 2), 3, 8, 0, 0,
                       "one element");
  // Contiguous (cudaMemcpyAsync), misaligned and of odd length.
  const int64_t n = (int64_t{1} << 22) + 3;
  ExpectCopyMatchesCpu(Contiguous({n}, 1), n + 1, Contiguous({n}, 2), n + 3, 1,
                       3, 7, "contiguous");
}

TEST_F(CudaKernelsTest, UsesSixtyFourBitOffsetsWhereNeeded) {
  // Rows 2^31 bytes apart: offsets past 32 bits.
  const int64_t far = int64_t{1} << 31;
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Create(far + 64);
  if (!buffer.ok()) {
    GTEST_SKIP() << "cannot allocate 2 GiB: " << buffer.status();
  }
  const Bytes row0 = SampleElements(DType::kUInt8, 16, 1);
  const Bytes row1 = SampleElements(DType::kUInt8, 16, 2);
  ASSERT_TRUE(buffer->Upload(row0, 0).ok());
  ASSERT_TRUE(buffer->Upload(row1, far).ok());
  const int64_t shape[2] = {2, 8};
  const int64_t strides[2] = {far, 2};  // Every other byte of each row.
  const Layout src = Layout::Strided(shape, strides).value();
  const Layout dst = Layout::Contiguous(shape).value();
  Bytes want;
  for (const Bytes* row : {&row0, &row1}) {
    for (int i = 0; i < 8; ++i) want.push_back((*row)[2 * i]);
  }

  const DeviceBytes copied = ToDevice(Bytes(16, kSentinel));
  ASSERT_TRUE(
      CopyStridedCuda(buffer->data(), src, copied.data(), dst, 1, nullptr)
          .ok());
  ExpectSameBytes(copied.Download(), want, 1, "copy");

  const DeviceBytes converted = ToDevice(Bytes(16 * 4, kSentinel));
  ASSERT_TRUE(ConvertCuda(buffer->data(), src, DType::kUInt8, converted.data(),
                          dst, DType::kFloat32, nullptr)
                  .ok());
  Bytes want_floats(16 * 4);
  ASSERT_TRUE(ConvertContiguous(want.data(), DType::kUInt8, want_floats.data(),
                                DType::kFloat32, 16)
                  .ok());
  ExpectSameBytes(converted.Download(), want_floats, 4, "uint8 -> float32");
}

TEST_F(CudaKernelsTest, FillsEveryDType) {
  for (DType dtype : kAllDTypes) {
    const size_t item = ItemSize(dtype);
    for (double value : {0.0, 1.0, -1.5, -0.0, 65520.0, 1e10, kNaN}) {
      const ElementBytes pattern = ScalarPattern(value, dtype).value();
      for (int64_t numel : {1, 5, 17, 1000, 100003}) {
        for (size_t misalign : {0, 1, 2, 4, 8, 15}) {
          const Bytes initial(numel * item + 40, kSentinel);
          Bytes want = initial;
          ASSERT_TRUE(
              FillHost(want.data() + 16, numel, pattern.data(), item).ok());
          const DeviceBytes device = ToDevice(initial, misalign);
          const absl::Status status = FillCuda(device.data() + 16, numel,
                                               pattern.data(), item, nullptr);
          ASSERT_TRUE(status.ok()) << status;
          ExpectSameBytes(device.Download(), want, 1,
                          absl::StrCat("full(", value, ") of ", numel, " ",
                                       ToAbsl(DTypeName(dtype)),
                                       ", misaligned by ", misalign));
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, Aranges) {
  const double cases[][2] = {
      {0, 1},   {-3.5, 0.25}, {1e9, 12345.678}, {0, 1e-3},     {100, -0.7},
      {250, 1}, {kNaN, 1},    {0, kInf},        {-1, 1.0 / 3}, {1e300, 1e300}};
  for (DType dtype : kAllDTypes) {
    const size_t item = ItemSize(dtype);
    for (const auto& [start, step] : cases) {
      for (int64_t numel : {1, 1000, 70001}) {
        const Bytes initial(numel * item + 2 * item, kSentinel);
        Bytes want = initial;
        ASSERT_TRUE(
            ArangeHost(want.data() + item, numel, start, step, dtype).ok());
        const DeviceBytes device = ToDevice(initial);
        const absl::Status status = ArangeCuda(device.data() + item, numel,
                                               start, step, dtype, nullptr);
        ASSERT_TRUE(status.ok()) << status;
        ExpectSameBytes(device.Download(), want, item,
                        absl::StrCat("arange(", start, ", step ", step, ") of ",
                                     numel, " ", ToAbsl(DTypeName(dtype))));
        if (HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace genesis::storage::kernels
