#include "genesis/storage/dlpack_convert.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dlpack/dlpack.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/layout_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::storage {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Owns a DLManagedTensor the way a consumer does: ReleaseDLPack when done, so
// a failing assertion cannot leak it.
struct DLPackDeleter {
  void operator()(DLManagedTensor* tensor) const { ReleaseDLPack(tensor); }
};
using DLPackPtr = std::unique_ptr<DLManagedTensor, DLPackDeleter>;

// Expects `status` to be InvalidArgument with every one of `needles` in its
// message.
void ExpectInvalid(const absl::Status& status,
                   const std::vector<std::string>& needles) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  for (const std::string& needle : needles) {
    EXPECT_THAT(message, HasSubstr(needle));
  }
}

Layout Strided(absl::Span<const int64_t> shape,
               absl::Span<const int64_t> strides, int64_t offset = 0) {
  absl::StatusOr<Layout> layout = Layout::Strided(shape, strides, offset);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.value_or(Layout());
}

Layout Contig(absl::Span<const int64_t> shape, int64_t offset = 0) {
  absl::StatusOr<Layout> layout = Layout::Contiguous(shape, offset);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.value_or(Layout());
}

std::vector<int64_t> Vec(const int64_t* p, int n) {
  return p == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(p, p + n);
}
std::vector<int64_t> Vec(absl::Span<const int64_t> s) {
  return {s.begin(), s.end()};
}

// The byte address of every element of `view`, in row-major order.
std::vector<uintptr_t> ViewAddresses(const DLPackView& view) {
  std::vector<uintptr_t> out;
  const auto item = static_cast<int64_t>(ItemSize(view.dtype));
  for (int64_t index : BaseIndices(view.layout)) {
    out.push_back(reinterpret_cast<uintptr_t>(view.data) +
                  static_cast<uintptr_t>(index * item));
  }
  return out;
}

// The byte address of every element of `tensor`, in row-major order, from
// the DLTensor fields alone (written without Layout).
std::vector<uintptr_t> TensorAddresses(const DLTensor& tensor) {
  const int n = tensor.ndim;
  std::vector<int64_t> strides(n);
  if (tensor.strides != nullptr) {
    strides.assign(tensor.strides, tensor.strides + n);
  } else {
    int64_t stride = 1;
    for (int d = n - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= std::max<int64_t>(tensor.shape[d], 1);
    }
  }
  std::vector<uintptr_t> out;
  for (int d = 0; d < n; ++d) {
    if (tensor.shape[d] == 0) return out;
  }
  const int64_t item = tensor.dtype.bits / 8;
  std::vector<int64_t> index(n, 0);
  while (true) {
    int64_t element = 0;
    for (int d = 0; d < n; ++d) element += index[d] * strides[d];
    out.push_back(reinterpret_cast<uintptr_t>(tensor.data) +
                  tensor.byte_offset + static_cast<uintptr_t>(element * item));
    int d = n - 1;
    for (; d >= 0; --d) {
      if (++index[d] < tensor.shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return out;
  }
}

// Exports `view`, checks every DLTensor field, reads it back, checks that the
// result describes the same elements, and checks that the deleter runs the
// release exactly once.
void ExpectRoundTrip(const DLPackView& view) {
  SCOPED_TRACE(testing::Message()
               << DTypeName(view.dtype) << " " << view.layout << " on "
               << view.device << (view.pinned_host ? " (pinned)" : "")
               << (view.data == nullptr ? " with null data" : ""));
  int released = 0;
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack(view, [&released] { ++released; });
  ASSERT_TRUE(exported.ok()) << exported.status();
  DLPackPtr owned(*exported);
  ASSERT_NE(owned, nullptr);
  EXPECT_NE(owned->deleter, nullptr);
  const DLTensor& t = owned->dl_tensor;

  const int64_t item = static_cast<int64_t>(ItemSize(view.dtype));
  void* const first = view.data == nullptr ? nullptr
                                           : static_cast<char*>(view.data) +
                                                 view.layout.offset() * item;
  EXPECT_EQ(t.data, first);
  EXPECT_EQ(t.byte_offset, 0u);
  EXPECT_EQ(t.ndim, view.layout.rank());
  ASSERT_NE(t.shape, nullptr);
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(Vec(t.shape, t.ndim), Vec(view.layout.shape()));
  EXPECT_EQ(Vec(t.strides, t.ndim), Vec(view.layout.strides()));
  const DLDataType dl_dtype = ToDLDataType(view.dtype);
  EXPECT_EQ(t.dtype.code, dl_dtype.code);
  EXPECT_EQ(t.dtype.bits, dl_dtype.bits);
  EXPECT_EQ(t.dtype.lanes, 1);
  if (view.device.is_cuda()) {
    EXPECT_EQ(t.device.device_type, kDLCUDA);
    EXPECT_EQ(t.device.device_id, view.device.index());
  } else {
    EXPECT_EQ(t.device.device_type, view.pinned_host ? kDLCUDAHost : kDLCPU);
    EXPECT_EQ(t.device.device_id, 0);
  }
  EXPECT_EQ(TensorAddresses(t), ViewAddresses(view));

  absl::StatusOr<DLPackView> read = ReadDLPack(*owned);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->data, first);
  EXPECT_EQ(read->layout,
            Strided(view.layout.shape(), view.layout.strides(), 0));
  EXPECT_EQ(read->dtype, view.dtype);
  EXPECT_EQ(read->device, view.device);
  EXPECT_EQ(read->pinned_host, view.pinned_host);
  EXPECT_EQ(ViewAddresses(*read), ViewAddresses(view));

  EXPECT_EQ(released, 0) << "release ran before the deleter";
  owned.reset();
  EXPECT_EQ(released, 1);
}

// ---- DLDataType

TEST(DLPackDTypeTest, ToDLDataType) {
  struct Case {
    DType dtype;
    uint8_t code;
    uint8_t bits;
  };
  const Case cases[] = {
      {DType::kBool, 6, 8},
      {DType::kUInt8, kDLUInt, 8},
      {DType::kInt8, kDLInt, 8},
      {DType::kInt16, kDLInt, 16},
      {DType::kInt32, kDLInt, 32},
      {DType::kInt64, kDLInt, 64},
      {DType::kFloat16, kDLFloat, 16},
      {DType::kBFloat16, kDLBfloat, 16},
      {DType::kFloat32, kDLFloat, 32},
      {DType::kFloat64, kDLFloat, 64},
  };
  static_assert(std::size(cases) == kAllDTypes.size());
  EXPECT_EQ(kDLPackBoolCode, 6);
  for (const Case& c : cases) {
    SCOPED_TRACE(DTypeName(c.dtype));
    const DLDataType type = ToDLDataType(c.dtype);
    EXPECT_EQ(type.code, c.code);
    EXPECT_EQ(type.bits, c.bits);
    EXPECT_EQ(type.lanes, 1);
  }
}

TEST(DLPackDTypeTest, RoundTripsEveryDType) {
  for (DType dtype : kAllDTypes) {
    absl::StatusOr<DType> back = FromDLDataType(ToDLDataType(dtype));
    ASSERT_TRUE(back.ok()) << DTypeName(dtype) << ": " << back.status();
    EXPECT_EQ(*back, dtype);
  }
}

TEST(DLPackDTypeTest, InvalidDTypeMapsToARejectedType) {
  const DLDataType type = ToDLDataType(static_cast<DType>(200));
  EXPECT_EQ(type.code, 0);
  EXPECT_EQ(type.bits, 0);
  EXPECT_EQ(type.lanes, 0);
  ExpectInvalid(FromDLDataType(type).status(), {"code 0 bits 0 lanes 0"});
}

TEST(DLPackDTypeTest, RejectsUnsupportedTypesNamingThem) {
  struct Case {
    DLDataType type;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {{kDLComplex, 64, 1}, {"complex64", "code 5 bits 64 lanes 1"}},
      {{kDLComplex, 128, 1}, {"complex128", "code 5 bits 128 lanes 1"}},
      {{kDLFloat, 8, 1}, {"float8 (code 2 bits 8 lanes 1)"}},
      {{10, 8, 1}, {"float8_e4m3fn", "code 10 bits 8 lanes 1"}},
      {{12, 8, 1}, {"float8_e5m2", "code 12"}},
      {{17, 4, 1}, {"float4_e2m1fn", "code 17 bits 4 lanes 1"}},
      {{kDLUInt, 16, 1}, {"uint16", "code 1 bits 16 lanes 1"}},
      {{kDLUInt, 64, 1}, {"uint64"}},
      {{kDLInt, 4, 1}, {"int4", "code 0 bits 4 lanes 1"}},
      {{kDLFloat, 128, 1}, {"float128"}},
      {{kDLBfloat, 32, 1}, {"bfloat32", "code 4 bits 32 lanes 1"}},
      {{kDLOpaqueHandle, 64, 1}, {"opaque handle", "code 3 bits 64 lanes 1"}},
      {{kDLPackBoolCode, 16, 1}, {"16-bit bool", "code 6 bits 16 lanes 1"}},
      {{kDLPackBoolCode, 1, 1}, {"code 6 bits 1 lanes 1"}},
      {{99, 32, 1}, {"code 99 bits 32 lanes 1"}},
      {{kDLFloat, 32, 4},
       {"float32x4", "code 2 bits 32 lanes 4", "only lanes 1"}},
      {{kDLFloat, 32, 0}, {"code 2 bits 32 lanes 0", "only lanes 1"}},
      {{kDLPackBoolCode, 8, 2}, {"boolx2", "lanes 2"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needles.front());
    absl::StatusOr<DType> dtype = FromDLDataType(c.type);
    std::vector<std::string> needles = c.needles;
    needles.push_back("unsupported DLPack dtype");
    needles.push_back(
        "supported: bool, uint8, int8, int16, int32, int64, float16, "
        "bfloat16, float32, float64");
    ExpectInvalid(dtype.status(), needles);
  }
}

// ---- ExportDLPack / ReadDLPack round trips

// Room for every view below: element indices up to 4096, 8 bytes each.
struct Buffer {
  alignas(256) std::array<std::byte, 4096 * 8> bytes{};
  void* data() { return bytes.data(); }
};

struct DeviceCase {
  Device device;
  bool pinned;
};
constexpr DeviceCase kDevices[] = {
    {Device::Cpu(), false},
    {Device::Cpu(), true},
    {Device::Cuda(0), false},
    {Device::Cuda(5), false},
};

// ExpectRoundTrip for `layout` over `data` with every dtype on every device case.
void ExpectRoundTripEverywhere(void* data, const Layout& layout) {
  for (DType dtype : kAllDTypes) {
    for (const DeviceCase& device : kDevices) {
      ExpectRoundTrip({.data = data,
                       .layout = layout,
                       .dtype = dtype,
                       .device = device.device,
                       .pinned_host = device.pinned});
    }
  }
}

// Sizes of the first `rank` dims; includes a size-1 dim.
std::vector<int64_t> ShapeOfRank(int rank) {
  constexpr int64_t kSizes[kMaxDims] = {2, 1, 3, 2, 1, 2, 2, 1};
  return {kSizes, kSizes + rank};
}

TEST(DLPackRoundTripTest, ContiguousEveryDTypeRankAndDevice) {
  Buffer buffer;
  for (int rank = 0; rank <= kMaxDims; ++rank) {
    const Layout layout = Contig(ShapeOfRank(rank));
    ExpectRoundTripEverywhere(buffer.data(), layout);
  }
}

// Every other element along each dim (strides twice the row-major ones),
// with an offset, dims reversed: non-contiguous strides, a nonzero layout
// offset, every rank.
TEST(DLPackRoundTripTest, StridedViewsWithOffsetEveryDTypeAndRank) {
  Buffer buffer;
  for (int rank = 0; rank <= kMaxDims; ++rank) {
    const std::vector<int64_t> shape = ShapeOfRank(rank);
    std::vector<int64_t> strides = Vec(Contig(shape).strides());
    for (int64_t& stride : strides) stride *= 2;
    std::vector<int> reversed;
    for (int d = rank - 1; d >= 0; --d) reversed.push_back(d);
    absl::StatusOr<Layout> permuted =
        Strided(shape, strides, /*offset=*/3).Permute(reversed);
    ASSERT_TRUE(permuted.ok()) << permuted.status();
    const Layout layout = *permuted;
    ASSERT_LE(layout.offset() + layout.extent(), 4096) << layout;
    if (rank >= 1) {
      ASSERT_FALSE(layout.is_contiguous()) << layout;
    }
    ExpectRoundTripEverywhere(buffer.data(), layout);
  }
}

// Stride-0 (broadcast) dims: a [3] vector expanded to every rank.
TEST(DLPackRoundTripTest, BroadcastViewsEveryDTypeAndRank) {
  Buffer buffer;
  for (int rank = 1; rank <= kMaxDims; ++rank) {
    std::vector<int64_t> shape = ShapeOfRank(rank);
    shape.back() = 3;
    absl::StatusOr<Layout> layout = Contig({3}, /*offset=*/2).Expand(shape);
    ASSERT_TRUE(layout.ok()) << layout.status();
    if (rank >= 2) {
      ASSERT_EQ(layout->stride(0), 0) << *layout;
    }
    for (DType dtype : kAllDTypes) {
      ExpectRoundTrip({.data = buffer.data(),
                       .layout = *layout,
                       .dtype = dtype,
                       .device = Device::Cpu()});
    }
  }
  // Every dim broadcast: one element seen 24 times.
  const Layout all_zero = Strided({2, 3, 4}, {0, 0, 0}, 7);
  ExpectRoundTrip({.data = buffer.data(),
                   .layout = all_zero,
                   .dtype = DType::kInt16,
                   .device = Device::Cuda(1)});
}

TEST(DLPackRoundTripTest, EmptyViews) {
  Buffer buffer;
  const Layout layouts[] = {
      Contig({0}),
      Contig({3, 0, 2}),
      Contig({0, 4}, /*offset=*/5),
      Strided({2, 0}, {0, 1}),
      Strided({0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1}),
  };
  for (const Layout& layout : layouts) {
    ASSERT_EQ(layout.numel(), 0) << layout;
    for (DType dtype : kAllDTypes) {
      for (void* data : {buffer.data(), static_cast<void*>(nullptr)}) {
        ExpectRoundTrip({.data = data,
                         .layout = layout,
                         .dtype = dtype,
                         .device = Device::Cuda(2)});
      }
    }
  }
}

TEST(DLPackExportTest, OffsetGoesIntoTheDataPointer) {
  std::array<double, 16> values{};
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack({.data = values.data(),
                    .layout = Strided({2, 2}, {4, 1}, /*offset=*/5),
                    .dtype = DType::kFloat64,
                    .device = Device::Cpu()},
                   nullptr);
  ASSERT_TRUE(exported.ok()) << exported.status();
  DLPackPtr owned(*exported);
  EXPECT_EQ(owned->dl_tensor.data, &values[5]);
  EXPECT_EQ(owned->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(Vec(owned->dl_tensor.strides, 2), (std::vector<int64_t>{4, 1}));
}

TEST(DLPackExportTest, ScalarHasNonNullShapeAndStrides) {
  float value = 1.5f;
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack({.data = &value,
                    .layout = Layout(),
                    .dtype = DType::kFloat32,
                    .device = Device::Cpu()},
                   nullptr);
  ASSERT_TRUE(exported.ok()) << exported.status();
  DLPackPtr owned(*exported);
  EXPECT_EQ(owned->dl_tensor.ndim, 0);
  EXPECT_NE(owned->dl_tensor.shape, nullptr);
  EXPECT_NE(owned->dl_tensor.strides, nullptr);
  EXPECT_EQ(owned->dl_tensor.data, &value);
}

// The exported object does not point into the DLPackView it came from.
TEST(DLPackExportTest, OwnsItsShapeAndStrides) {
  Buffer buffer;
  auto view =
      std::make_unique<DLPackView>(DLPackView{.data = buffer.data(),
                                              .layout = Strided({4, 5}, {1, 4}),
                                              .dtype = DType::kInt32,
                                              .device = Device::Cpu()});
  absl::StatusOr<DLManagedTensor*> exported = ExportDLPack(*view, nullptr);
  ASSERT_TRUE(exported.ok()) << exported.status();
  DLPackPtr owned(*exported);
  view.reset();
  EXPECT_EQ(Vec(owned->dl_tensor.shape, 2), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Vec(owned->dl_tensor.strides, 2), (std::vector<int64_t>{1, 4}));
}

// ---- The deleter and release

TEST(DLPackReleaseTest, DeleterRunsReleaseExactlyOnce) {
  int32_t value = 7;
  int released = 0;
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack({.data = &value,
                    .layout = Layout(),
                    .dtype = DType::kInt32,
                    .device = Device::Cpu()},
                   [&released] { ++released; });
  ASSERT_TRUE(exported.ok()) << exported.status();
  DLManagedTensor* tensor = *exported;
  // Reading (what an importer does) neither runs it nor frees anything.
  ASSERT_TRUE(ReadDLPack(*tensor).ok());
  ASSERT_TRUE(ReadDLPack(*tensor).ok());
  EXPECT_EQ(released, 0);
  tensor->deleter(tensor);  // What a consumer does.
  EXPECT_EQ(released, 1);
}

// A release owning move-only state: the state is freed by the release (and
// ASan reports a leak if the deleter forgot the release or the context).
TEST(DLPackReleaseTest, ReleaseMayOwnMoveOnlyState) {
  int64_t value = 1;
  auto owned_state = std::make_unique<std::vector<int>>(1000, 3);
  std::weak_ptr<int> watch;
  auto shared = std::make_shared<int>(5);
  watch = shared;
  int released = 0;
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack({.data = &value,
                    .layout = Layout(),
                    .dtype = DType::kInt64,
                    .device = Device::Cpu()},
                   [state = std::move(owned_state), shared = std::move(shared),
                    &released]() mutable {
                     EXPECT_EQ(state->size(), 1000u);
                     state.reset();
                     ++released;
                   });
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_FALSE(watch.expired());
  ReleaseDLPack(*exported);
  EXPECT_EQ(released, 1);
  EXPECT_TRUE(watch.expired()) << "the release was not destroyed";
}

TEST(DLPackReleaseTest, EmptyReleaseIsAllowed) {
  int8_t value = 1;
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack({.data = &value,
                    .layout = Layout(),
                    .dtype = DType::kInt8,
                    .device = Device::Cpu()},
                   absl::AnyInvocable<void() &&>());
  ASSERT_TRUE(exported.ok()) << exported.status();
  ReleaseDLPack(*exported);  // ASan checks that the context is freed.
}

TEST(DLPackReleaseTest, ReleaseDLPackToleratesNulls) {
  ReleaseDLPack(nullptr);
  DLManagedTensor no_deleter{};
  no_deleter.deleter = nullptr;
  ReleaseDLPack(&no_deleter);
}

TEST(DLPackReleaseTest, ReleaseDLPackCallsTheProducersDeleter) {
  int calls = 0;
  DLManagedTensor tensor{};
  tensor.manager_ctx = &calls;
  tensor.deleter = [](DLManagedTensor* self) {
    ++*static_cast<int*>(self->manager_ctx);
  };
  ReleaseDLPack(&tensor);
  EXPECT_EQ(calls, 1);
}

// ---- ExportDLPack errors: release not run, destroyed, nothing leaked.

void ExpectExportFails(const DLPackView& view,
                       const std::vector<std::string>& needles) {
  int released = 0;
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> watch = token;
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack(view, [&released, token = std::move(token)] { ++released; });
  ASSERT_FALSE(exported.ok());
  ExpectInvalid(exported.status(), needles);
  EXPECT_THAT(std::string(exported.status().message()),
              HasSubstr("ExportDLPack: "));
  EXPECT_EQ(released, 0);
  EXPECT_TRUE(watch.expired()) << "release was not destroyed";
}

TEST(DLPackExportTest, RejectsInvalidDType) {
  Buffer buffer;
  ExpectExportFails({.data = buffer.data(),
                     .layout = Contig({2}),
                     .dtype = static_cast<DType>(200),
                     .device = Device::Cpu()},
                    {"dtype 200 is not a DType"});
  ExpectExportFails({.data = buffer.data(),
                     .layout = Contig({2}),
                     .dtype = static_cast<DType>(10),
                     .device = Device::Cpu()},
                    {"dtype 10 is not a DType (expected 0 to 9)"});
}

TEST(DLPackExportTest, RejectsPinnedCudaMemory) {
  Buffer buffer;
  ExpectExportFails({.data = buffer.data(),
                     .layout = Contig({2}),
                     .dtype = DType::kFloat32,
                     .device = Device::Cuda(1),
                     .pinned_host = true},
                    {"pinned_host", "cuda:1"});
}

TEST(DLPackExportTest, RejectsNullDataForNonEmptyView) {
  ExpectExportFails({.data = nullptr,
                     .layout = Contig({2, 3}),
                     .dtype = DType::kFloat32,
                     .device = Device::Cpu()},
                    {"data is null", "6 elements"});
}

TEST(DLPackExportTest, RejectsByteOverflow) {
  Buffer buffer;
  // Fits int64 in elements, not in bytes.
  ExpectExportFails({.data = buffer.data(),
                     .layout = Contig({4}, kInt64Max / 4),
                     .dtype = DType::kFloat64,
                     .device = Device::Cpu()},
                    {"overflows int64_t"});
}

// ---- ReadDLPack of tensors made by hand (other producers).

// A valid 2x3 float32 CPU tensor over `values`, whose deleter counts its
// calls. Tests break one field at a time.
class FakeTensor {
 public:
  FakeTensor() {
    DLTensor& t = managed_.dl_tensor;
    t.data = values_.data();
    t.device = {kDLCPU, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape_.data();
    t.strides = strides_.data();
    t.byte_offset = 0;
    managed_.manager_ctx = &deleter_calls_;
    managed_.deleter = [](DLManagedTensor* self) {
      ++*static_cast<int*>(self->manager_ctx);
    };
  }
  FakeTensor(const FakeTensor&) = delete;
  FakeTensor& operator=(const FakeTensor&) = delete;

  DLManagedTensor& managed() { return managed_; }
  DLTensor& tensor() { return managed_.dl_tensor; }
  std::array<int64_t, kMaxDims + 1>& shape() { return shape_; }
  std::array<int64_t, kMaxDims + 1>& strides() { return strides_; }
  float* values() { return values_.data(); }
  int deleter_calls() const { return deleter_calls_; }

  // Writes a device type number that need not be a DLDeviceType enumerator.
  void SetDeviceType(int32_t type) {
    std::memcpy(&managed_.dl_tensor.device.device_type, &type, sizeof(type));
  }

 private:
  alignas(256) std::array<float, 64> values_{};
  std::array<int64_t, kMaxDims + 1> shape_{2, 3};
  std::array<int64_t, kMaxDims + 1> strides_{3, 1};
  int deleter_calls_ = 0;
  DLManagedTensor managed_{};
};

void ExpectReadFails(FakeTensor& fake,
                     const std::vector<std::string>& needles) {
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_FALSE(view.ok());
  ExpectInvalid(view.status(), needles);
  EXPECT_THAT(std::string(view.status().message()), HasSubstr("ReadDLPack: "));
  EXPECT_EQ(fake.deleter_calls(), 0);
}

TEST(DLPackReadTest, ReadsAValidTensorWithoutCallingTheDeleter) {
  FakeTensor fake;
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data, fake.values());
  EXPECT_EQ(view->layout, Contig({2, 3}));
  EXPECT_EQ(view->dtype, DType::kFloat32);
  EXPECT_EQ(view->device, Device::Cpu());
  EXPECT_FALSE(view->pinned_host);
  EXPECT_EQ(fake.deleter_calls(), 0);
  ReleaseDLPack(&fake.managed());
  EXPECT_EQ(fake.deleter_calls(), 1);
}

TEST(DLPackReadTest, NullStridesMeanRowMajorContiguous) {
  FakeTensor fake;
  fake.tensor().ndim = 3;
  fake.shape() = {2, 3, 4};
  fake.tensor().strides = nullptr;
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(Vec(view->layout.strides()), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(view->layout.offset(), 0);
  EXPECT_TRUE(view->layout.is_contiguous());

  // Size-0 dims count as 1 in the strides, as in Layout::Contiguous.
  fake.shape() = {2, 0, 4};
  view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->layout, Contig({2, 0, 4}));
  EXPECT_EQ(view->layout.numel(), 0);
}

TEST(DLPackReadTest, ScalarWithNullShapeAndStrides) {
  FakeTensor fake;
  fake.tensor().ndim = 0;
  fake.tensor().shape = nullptr;
  fake.tensor().strides = nullptr;
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->layout, Layout());
  EXPECT_EQ(view->data, fake.values());
}

TEST(DLPackReadTest, ByteOffsetIsAddedToTheDataPointer) {
  FakeTensor fake;
  fake.tensor().byte_offset = 8;  // Two float32 elements.
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data, fake.values() + 2);
  EXPECT_EQ(view->layout.offset(), 0);

  // One byte elements: any byte offset is a multiple.
  fake.tensor().dtype = {kDLUInt, 8, 1};
  fake.tensor().byte_offset = 3;
  view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data, reinterpret_cast<char*>(fake.values()) + 3);
  EXPECT_EQ(view->dtype, DType::kUInt8);
}

TEST(DLPackReadTest, RejectsByteOffsetNotAMultipleOfTheItemSize) {
  FakeTensor fake;
  fake.tensor().byte_offset = 6;
  ExpectReadFails(fake, {"byte_offset 6", "item size 4", "float32"});
  fake.tensor().dtype = {kDLFloat, 64, 1};
  fake.tensor().byte_offset = 12;
  ExpectReadFails(fake, {"byte_offset 12", "item size 8"});
}

TEST(DLPackReadTest, RejectsByteOffsetOverflow) {
  FakeTensor fake;
  fake.tensor().byte_offset = uint64_t{1} << 63;
  ExpectReadFails(fake, {"byte_offset 9223372036854775808", "overflows"});
  fake.tensor().byte_offset = (uint64_t{1} << 63) - 8;
  ExpectReadFails(fake, {"byte_offset 9223372036854775800", "overflows"});
}

TEST(DLPackReadTest, Devices) {
  FakeTensor fake;
  fake.tensor().device = {kDLCUDAHost, 0};
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->device, Device::Cpu());
  EXPECT_TRUE(view->pinned_host);

  fake.tensor().device = {kDLCUDA, 3};
  view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->device, Device::Cuda(3));
  EXPECT_FALSE(view->pinned_host);

  // device_id means nothing for the CPU; it is ignored.
  fake.tensor().device = {kDLCPU, 5};
  view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->device, Device::Cpu());
  EXPECT_FALSE(view->pinned_host);
}

TEST(DLPackReadTest, RejectsUnsupportedDevices) {
  const std::string supported =
      "supported: kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3)";
  FakeTensor fake;
  fake.SetDeviceType(kDLOpenCL);
  ExpectReadFails(fake, {"device type 4 (kDLOpenCL)", supported});
  fake.SetDeviceType(kDLROCM);
  ExpectReadFails(fake, {"device type 10 (kDLROCM)", supported});
  fake.SetDeviceType(kDLCUDAManaged);
  ExpectReadFails(fake, {"device type 13 (kDLCUDAManaged)", supported});
  fake.SetDeviceType(0);
  ExpectReadFails(fake, {"device type 0;", supported});
  fake.SetDeviceType(99);
  ExpectReadFails(fake, {"device type 99;", supported});
  fake.SetDeviceType(-1);
  ExpectReadFails(fake, {"device type -1;", supported});
}

TEST(DLPackReadTest, RejectsBadCudaDeviceId) {
  FakeTensor fake;
  fake.tensor().device = {kDLCUDA, -1};
  ExpectReadFails(fake, {"CUDA device_id -1", "[0, 1000000]"});
  fake.tensor().device = {kDLCUDA, Device::kMaxIndex + 1};
  ExpectReadFails(fake, {"CUDA device_id 1000001"});
}

TEST(DLPackReadTest, RejectsUnsupportedDTypes) {
  FakeTensor fake;
  fake.tensor().dtype = {kDLComplex, 64, 1};
  ExpectReadFails(
      fake, {"unsupported DLPack dtype complex64", "code 5 bits 64 lanes 1"});
  fake.tensor().dtype = {kDLFloat, 8, 1};
  ExpectReadFails(fake, {"float8", "code 2 bits 8 lanes 1"});
  fake.tensor().dtype = {kDLFloat, 32, 2};
  ExpectReadFails(fake, {"float32x2", "lanes 2"});
}

TEST(DLPackReadTest, ReadsBool) {
  FakeTensor fake;
  fake.tensor().dtype = {kDLPackBoolCode, 8, 1};
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->dtype, DType::kBool);
}

TEST(DLPackReadTest, RejectsBadNdim) {
  FakeTensor fake;
  fake.tensor().ndim = -1;
  ExpectReadFails(fake, {"ndim -1", "[0, 8]"});
  fake.tensor().ndim = 9;
  ExpectReadFails(fake, {"ndim 9", "[0, 8]"});
  fake.tensor().ndim = std::numeric_limits<int>::min();
  ExpectReadFails(fake, {"ndim -2147483648"});
}

TEST(DLPackReadTest, AcceptsRank8) {
  FakeTensor fake;
  fake.tensor().ndim = 8;
  fake.shape() = {1, 2, 1, 2, 1, 2, 1, 2};
  fake.tensor().strides = nullptr;
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->layout.rank(), 8);
  EXPECT_EQ(view->layout.numel(), 16);
}

TEST(DLPackReadTest, RejectsNullShape) {
  FakeTensor fake;
  fake.tensor().shape = nullptr;
  ExpectReadFails(fake, {"shape is null with ndim 2"});
}

TEST(DLPackReadTest, RejectsNegativeShapeEntries) {
  FakeTensor fake;
  fake.shape()[1] = -3;
  ExpectReadFails(fake, {"shape[1] = -3 is negative", "[2, -3]"});
  fake.tensor().strides = nullptr;
  ExpectReadFails(fake, {"shape[1] = -3 is negative"});
}

TEST(DLPackReadTest, RejectsNegativeStridesNamingTheDim) {
  FakeTensor fake;
  fake.strides()[0] = -3;
  ExpectReadFails(fake, {"strides[0] = -3", "dim 0", "negative strides"});
  fake.strides() = {3, -1};
  ExpectReadFails(fake, {"strides[1] = -1", "dim 1"});
}

TEST(DLPackReadTest, RejectsNullDataUnlessEmpty) {
  FakeTensor fake;
  fake.tensor().data = nullptr;
  ExpectReadFails(fake, {"data is null", "6 elements"});

  fake.shape()[1] = 0;
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data, nullptr);
  EXPECT_EQ(view->layout.numel(), 0);
}

TEST(DLPackReadTest, RejectsSizesThatOverflow) {
  FakeTensor fake;
  // numel overflows.
  fake.shape() = {int64_t{1} << 40, int64_t{1} << 40};
  fake.strides() = {1, 1};
  ExpectReadFails(fake, {"overflows int64"});
  fake.tensor().strides = nullptr;
  ExpectReadFails(fake, {"overflows int64"});
  // Fits in elements, not in bytes.
  fake.tensor().ndim = 1;
  fake.tensor().dtype = {kDLFloat, 64, 1};
  fake.shape()[0] = int64_t{1} << 61;
  ExpectReadFails(fake, {"extent of the tensor", "overflows int64_t"});
  // The extent fits in bytes, the byte offset on top of it does not.
  fake.shape()[0] = int64_t{1} << 59;
  fake.tensor().byte_offset = uint64_t{1} << 62;
  ExpectReadFails(
      fake, {"byte_offset 4611686018427387904 + extent", "overflows int64_t"});
  // A large stride reaching beyond int64.
  fake.tensor().byte_offset = 0;
  fake.tensor().strides = fake.strides().data();
  fake.shape()[0] = 3;
  fake.strides()[0] = int64_t{1} << 62;
  ExpectReadFails(fake, {"beyond the largest int64 index"});
}

TEST(DLPackReadTest, RejectsTensorsThatWrapAroundTheAddressSpace) {
  FakeTensor fake;
  // Never dereferenced: 8 bytes below the top, for 24 bytes of float32.
  fake.tensor().data = reinterpret_cast<void*>(~uintptr_t{0} - 7);
  ExpectReadFails(fake, {"+ 24 bytes wraps around the address space"});
  // One past the last byte must be representable too.
  fake.tensor().data = reinterpret_cast<void*>(~uintptr_t{0} - 23);
  ExpectReadFails(fake, {"+ 24 bytes wraps around the address space"});
  fake.tensor().data = reinterpret_cast<void*>(~uintptr_t{0} - 24);
  absl::StatusOr<DLPackView> view = ReadDLPack(fake.managed());
  EXPECT_TRUE(view.ok()) << view.status();
}

// ---- Import of an export with a byte offset added by hand, the way a
// producer that keeps data at the buffer base would write it.

TEST(DLPackReadTest, ByteOffsetOfAProducerWithBasePointers) {
  std::array<int16_t, 32> values{};
  absl::StatusOr<DLManagedTensor*> exported =
      ExportDLPack({.data = values.data(),
                    .layout = Strided({3, 2}, {1, 3}),
                    .dtype = DType::kInt16,
                    .device = Device::Cpu()},
                   nullptr);
  ASSERT_TRUE(exported.ok()) << exported.status();
  DLPackPtr owned(*exported);
  owned->dl_tensor.byte_offset = 10;  // Five elements.
  absl::StatusOr<DLPackView> view = ReadDLPack(*owned);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data, &values[5]);
  EXPECT_EQ(view->layout, Strided({3, 2}, {1, 3}));
  EXPECT_EQ(TensorAddresses(owned->dl_tensor), ViewAddresses(*view));
}

}  // namespace
}  // namespace genesis::storage
