#include "genesis/storage/storage.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <atomic>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/core/half.h"
#include "genesis/cuda/device_query.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/inspect.h"
#include "genesis/storage/kernels/fill.h"
#include "genesis/storage/storage_tracker.h"
#include "genesis/storage/strided_copy.h"

namespace genesis::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Where a storage lives in a parameterised test.
struct Place {
  std::string name;
  Device device;
  bool pinned = false;
  bool needs_gpu = false;
};

class StorageTest : public ::testing::TestWithParam<Place> {
 protected:
  void SetUp() override {
    if (GetParam().needs_gpu && cuda::DeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cuda::NoDeviceReason();
    }
  }
  Device device() const { return GetParam().device; }
  StorageOptions options() const { return {.pinned = GetParam().pinned}; }
};

// The bytes of a storage's view, in row-major order.
std::vector<uint8_t> Bytes(const Storage& s) {
  std::vector<uint8_t> out(s.nbytes());
  const absl::Status status = s.CopyToHost(out.data(), out.size());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The bytes of `values` converted from float64 to dtype, by the CPU rules.
std::vector<uint8_t> Expected(const std::vector<double>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * ItemSize(dtype));
  EXPECT_TRUE(ConvertContiguous(values.data(), DType::kFloat64, out.data(), dtype,
                                static_cast<int64_t>(values.size()))
                  .ok());
  return out;
}

std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST_P(StorageTest, EmptyDescribesItself) {
  auto s = Empty({2, 3}, DType::kFloat32, device(), options());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->defined());
  EXPECT_THAT(s->shape(), ElementsAre(2, 3));
  EXPECT_THAT(s->strides(), ElementsAre(3, 1));
  EXPECT_EQ(s->dtype(), DType::kFloat32);
  EXPECT_EQ(s->device(), device());
  EXPECT_EQ(s->is_pinned(), GetParam().pinned);
  EXPECT_EQ(s->numel(), 6);
  EXPECT_EQ(s->nbytes(), 24u);
  EXPECT_EQ(s->size_bytes(), 24u);
  EXPECT_TRUE(s->is_contiguous());
  EXPECT_EQ(s->use_count(), 1);
  const size_t alignment = device().is_cpu() ? kDefaultCpuAlignment : kDefaultCudaAlignment;
  EXPECT_EQ(s->alignment(), alignment);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data_ptr()) % alignment, 0u);
  EXPECT_NE(s->pool(), nullptr);
  EXPECT_THAT(s->ToString(), HasSubstr("float32[2, 3] " + device().ToString()));
}

TEST_P(StorageTest, HonoursLargeAlignment) {
  for (size_t alignment : {size_t{1}, size_t{64}, size_t{4096}, size_t{1} << 16}) {
    StorageOptions opts = options();
    opts.alignment = alignment;
    auto s = Empty({100}, DType::kUInt8, device(), opts);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data_ptr()) % alignment, 0u) << alignment;
    EXPECT_EQ(s->alignment(), alignment);
  }
}

TEST_P(StorageTest, RejectsBadAlignment) {
  for (size_t alignment : {size_t{3}, size_t{96}, kMaxAlignment * 2}) {
    StorageOptions opts = options();
    opts.alignment = alignment;
    auto s = Empty({4}, DType::kFloat32, device(), opts);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(absl::StrCat("alignment ", alignment)));
  }
}

TEST_P(StorageTest, RejectsBadShapesAndDTypes) {
  auto negative = Empty({2, -3}, DType::kFloat32, device(), options());
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("-3"));
  auto overflow = Empty({int64_t{1} << 40, int64_t{1} << 40}, DType::kFloat32, device(),
                        options());
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  auto too_big = Empty({int64_t{1} << 61}, DType::kFloat64, device(), options());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("2^62"));
  auto bad_dtype = Empty({2}, static_cast<DType>(42), device(), options());
  EXPECT_EQ(bad_dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_dtype.status().message(), HasSubstr("42"));
}

TEST_P(StorageTest, LastReferenceReturnsMemoryToThePool) {
  auto s = Empty({1 << 20}, DType::kFloat32, device(), options());
  ASSERT_TRUE(s.ok()) << s.status();
  memory::CachingAllocator* pool = s->pool();
  const size_t before = pool->Stats().all.allocated_bytes.current;
  {
    Storage copy = *s;
    auto view = s->Slice(0, 10, 20);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(s->use_count(), 3);
    EXPECT_TRUE(view->SharesMemoryWith(*s));
    *s = Storage();
    EXPECT_EQ(pool->Stats().all.allocated_bytes.current, before);  // Views keep it alive.
  }
  EXPECT_EQ(pool->Stats().all.allocated_bytes.current, before - (4u << 20));
}

TEST_P(StorageTest, FactoriesFillEveryDType) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    auto zeros = Zeros({3, 5}, dtype, device(), options());
    auto ones = Ones({3, 5}, dtype, device(), options());
    auto full = Full({7}, -2.5, dtype, device(), options());
    ASSERT_TRUE(zeros.ok() && ones.ok() && full.ok()) << full.status();
    EXPECT_EQ(Bytes(*zeros), Expected(std::vector<double>(15, 0.0), dtype));
    EXPECT_EQ(Bytes(*ones), Expected(std::vector<double>(15, 1.0), dtype));
    EXPECT_EQ(Bytes(*full), Expected(std::vector<double>(7, -2.5), dtype));
  }
}

TEST_P(StorageTest, ArangeMatchesTheRule) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    auto s = Arange(-3, 300, 0.75, dtype, device(), options());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->numel(), 404);
    std::vector<double> values;
    for (int i = 0; i < 404; ++i) values.push_back(-3 + i * 0.75);
    EXPECT_EQ(Bytes(*s), Expected(values, dtype));
  }
  auto down = Arange(5, 0, -2, DType::kInt32, device(), options());
  ASSERT_TRUE(down.ok());
  EXPECT_THAT(*down->ToVector<int32_t>(), ElementsAre(5, 3, 1));
  auto none = Arange(5, 0, 1, DType::kInt32, device(), options());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->numel(), 0);
}

TEST_P(StorageTest, ArangeRejectsBadArguments) {
  EXPECT_THAT(Arange(0, 10, 0, DType::kFloat32, device(), options()).status().message(),
              HasSubstr("step 0"));
  EXPECT_EQ(Arange(0, NAN, 1, DType::kFloat32, device(), options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Arange(0, 1e300, 1, DType::kFloat32, device(), options()).status().message(),
              HasSubstr("2^48"));
}

TEST_P(StorageTest, CreateStorageCopiesHostData) {
  const std::vector<float> values = Iota(12);
  auto s = CreateStorage<float>(values, device(), {3, 4}, options());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->shape(), ElementsAre(3, 4));
  EXPECT_EQ(*s->ToVector<float>(), values);
  auto flat = CreateStorage<float>(values, device(), {}, options());
  ASSERT_TRUE(flat.ok());
  EXPECT_THAT(flat->shape(), ElementsAre(12));
  auto wrong = CreateStorage<float>(values, device(), {5, 2}, options());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("12 values"));
  EXPECT_EQ(s->ToVector<int32_t>().status().code(), absl::StatusCode::kInvalidArgument);
  auto null_data = CreateStorage(nullptr, {4}, DType::kFloat32, device(), options());
  EXPECT_EQ(null_data.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StorageTest, ViewsShareMemoryAndContiguousMaterialises) {
  auto base = CreateStorage<float>(Iota(24), device(), {4, 6}, options());
  ASSERT_TRUE(base.ok()) << base.status();
  auto sliced = base->Slice(1, 1, 6, 2);  // x[:, 1:6:2]
  ASSERT_TRUE(sliced.ok());
  EXPECT_FALSE(sliced->is_contiguous());
  EXPECT_EQ(sliced->data_ptr(), static_cast<char*>(base->data_ptr()) + 4);
  EXPECT_THAT(*sliced->ToVector<float>(),
              ElementsAre(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23));
  auto t = sliced->Transpose(0, 1);
  ASSERT_TRUE(t.ok());
  auto c = t->Contiguous();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_contiguous());
  EXPECT_FALSE(c->SharesMemoryWith(*base));
  EXPECT_EQ(c->device(), device());
  EXPECT_THAT(*c->ToVector<float>(),
              ElementsAre(1, 7, 13, 19, 3, 9, 15, 21, 5, 11, 17, 23));
  auto same = base->Contiguous();
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->SharesMemoryWith(*base));
  auto row = base->Select(0, 2);
  ASSERT_TRUE(row.ok());
  EXPECT_THAT(*row->ToVector<float>(), ElementsAre(12, 13, 14, 15, 16, 17));
  auto reshaped = base->Reshape({2, 12});
  ASSERT_TRUE(reshaped.ok());
  EXPECT_TRUE(reshaped->SharesMemoryWith(*base));
  EXPECT_THAT(t->Reshape({12}).status().message(), HasSubstr("without a copy"));
  // Eight dims, permuted: contiguous() on the device matches the CPU.
  auto big = Arange(0, 256, 1, DType::kInt16, device(), options());
  ASSERT_TRUE(big.ok());
  auto cube = big->Reshape({2, 2, 2, 2, 2, 2, 2, 2});
  ASSERT_TRUE(cube.ok());
  auto permuted = cube->Permute({7, 0, 6, 1, 5, 2, 4, 3});
  ASSERT_TRUE(permuted.ok());
  auto on_cpu = permuted->To(Device::Cpu());
  ASSERT_TRUE(on_cpu.ok());
  auto cpu_base = big->To(Device::Cpu());
  ASSERT_TRUE(cpu_base.ok());
  std::vector<int16_t> expected(256);
  auto cpu_cube = cpu_base->Reshape({2, 2, 2, 2, 2, 2, 2, 2});
  auto cpu_permuted = cpu_cube->Permute({7, 0, 6, 1, 5, 2, 4, 3});
  CopyStridedToContiguous(cpu_permuted->base_ptr(), cpu_permuted->layout(), 2,
                          expected.data());
  EXPECT_EQ(*permuted->Contiguous()->ToVector<int16_t>(), expected);
}

TEST_P(StorageTest, ViewsAreBoundsChecked) {
  auto s = Empty({10}, DType::kFloat32, device(), options());
  ASSERT_TRUE(s.ok());
  auto layout = Layout::Strided({5}, {3});
  ASSERT_TRUE(layout.ok());
  auto outside = s->View(*layout);  // Reaches element 12.
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kOutOfRange);
  auto offset = Layout::Contiguous({2}, 9);
  EXPECT_EQ(s->View(*offset).status().code(), absl::StatusCode::kOutOfRange);
  auto fits = Layout::Strided({4}, {3});
  EXPECT_TRUE(s->View(*fits).ok());
  EXPECT_EQ(s->Select(0, 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s->Transpose(0, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StorageTest, ToDeviceAndBack) {
  auto s = CreateStorage<float>(Iota(1000), device(), {}, options());
  ASSERT_TRUE(s.ok());
  auto cpu = s->To(Device::Cpu());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->device(), Device::Cpu());
  auto back = cpu->To(device(), options());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back->ToVector<float>(), Iota(1000));
  auto clone = s->Clone();
  ASSERT_TRUE(clone.ok());
  EXPECT_FALSE(clone->SharesMemoryWith(*s));
  EXPECT_EQ(clone->is_pinned(), s->is_pinned());
  EXPECT_EQ(*clone->ToVector<float>(), Iota(1000));
}

TEST_P(StorageTest, ConvertsLikeTheCpuRules) {
  const std::vector<double> values = {0.0, -0.0, 1.5, -2.5, 65519.0, 65520.0, 1e-8, 300.7,
                                      -129.0, INFINITY, -INFINITY, NAN, 1.0 + 1.0 / 2048};
  auto src = CreateStorage<double>(values, device(), {}, options());
  ASSERT_TRUE(src.ok());
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    auto converted = src->To(dtype);
    ASSERT_TRUE(converted.ok()) << converted.status();
    EXPECT_EQ(converted->device(), device());
    EXPECT_EQ(Bytes(*converted), Expected(values, dtype));
    // And back through a strided view.
    auto strided = converted->Slice(0, 0, 13, 3);
    ASSERT_TRUE(strided.ok());
    auto back = strided->To(DType::kFloat64);
    ASSERT_TRUE(back.ok());
    std::vector<double> expected(5);
    std::vector<uint8_t> narrowed = Expected(values, dtype);
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(ConvertContiguous(narrowed.data() + i * 3 * ItemSize(dtype), dtype,
                                    &expected[i], DType::kFloat64, 1)
                      .ok());
    }
    std::vector<double> got = *back->ToVector<double>();
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), 5 * sizeof(double)), 0);
  }
  EXPECT_EQ(src->To(static_cast<DType>(99)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StorageTest, CopyFromChecksItsArguments) {
  auto a = Zeros({4, 4}, DType::kFloat32, device(), options());
  auto b = Ones({4, 4}, DType::kFloat32, device(), options());
  auto wrong_shape = Ones({16}, DType::kFloat32, device(), options());
  auto wrong_dtype = Ones({4, 4}, DType::kFloat64, device(), options());
  ASSERT_TRUE(a.ok() && b.ok() && wrong_shape.ok() && wrong_dtype.ok());
  EXPECT_THAT(a->CopyFrom(*wrong_shape).message(), HasSubstr("[16]"));
  EXPECT_THAT(a->CopyFrom(*wrong_dtype).message(), HasSubstr("float64"));
  EXPECT_TRUE(a->ConvertFrom(*wrong_dtype).ok());
  EXPECT_EQ(*a->ToVector<float>(), std::vector<float>(16, 1.0f));
  // Overlapping views of one memory are refused; disjoint ones are fine.
  auto top = a->Slice(0, 0, 2);
  auto middle = a->Slice(0, 1, 3);
  auto bottom = a->Slice(0, 2, 4);
  ASSERT_TRUE(top.ok() && middle.ok() && bottom.ok());
  EXPECT_THAT(top->CopyFrom(*middle).message(), HasSubstr("overlap"));
  ASSERT_TRUE(b->Slice(0, 0, 2)->Fill(7).ok());
  ASSERT_TRUE(bottom->CopyFrom(*b->Slice(0, 0, 2)).ok());
  ASSERT_TRUE(top->CopyFrom(*bottom).ok());
  EXPECT_EQ(*a->Select(0, 0)->ToVector<float>(), std::vector<float>(4, 7.0f));
  // A broadcast destination would write one element twice.
  auto scalar = Zeros({}, DType::kFloat32, device(), options());
  auto broadcast = scalar->Expand({4, 4});
  ASSERT_TRUE(broadcast.ok());
  EXPECT_EQ(broadcast->CopyFrom(*b).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broadcast->Fill(1).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StorageTest, FillTouchesOnlyTheView) {
  auto s = Zeros({4, 6}, DType::kInt32, device(), options());
  ASSERT_TRUE(s.ok());
  auto column = s->Slice(1, 2, 3);
  ASSERT_TRUE(column.ok());
  ASSERT_TRUE(column->Fill(9).ok());
  std::vector<int32_t> expected(24, 0);
  for (int r = 0; r < 4; ++r) expected[r * 6 + 2] = 9;
  EXPECT_EQ(*s->ToVector<int32_t>(), expected);
}

TEST_P(StorageTest, CopyToHostChecksTheSize) {
  auto s = Zeros({4}, DType::kFloat32, device(), options());
  ASSERT_TRUE(s.ok());
  float out[3];
  EXPECT_THAT(s->CopyToHost(out, sizeof(out)).message(), HasSubstr("16 bytes"));
}

TEST_P(StorageTest, TrackerFindsSurvivors) {
  StorageTracker tracker;
  auto kept = Zeros({256}, DType::kFloat32, device(), options());
  ASSERT_TRUE(kept.ok());
  {
    auto gone = Ones({8}, DType::kInt8, device(), options());
    ASSERT_TRUE(gone.ok());
    EXPECT_EQ(tracker.live_count(), 2u);
  }
  ASSERT_EQ(tracker.live_count(), 1u);
  EXPECT_EQ(tracker.live_bytes(), 1024u);
  const std::vector<TrackedStorage> live = tracker.Live();
  EXPECT_EQ(live[0].description, "float32[256]");
  EXPECT_EQ(live[0].device, device());
  EXPECT_THAT(live[0].where.file_name(), HasSubstr("storage_test.cc"));
  const absl::Status leaks = tracker.CheckNoLeaks();
  EXPECT_EQ(leaks.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(leaks.message(), HasSubstr("1 storages (1024 bytes)"));
  EXPECT_THAT(leaks.message(), HasSubstr("storage_test.cc:"));
  EXPECT_THAT(tracker.Report(), HasSubstr("1 live storages, 1024 bytes"));
  {
    StorageTracker inner;  // Sees only what is made in its own life.
    EXPECT_EQ(inner.live_count(), 0u);
  }
  *kept = Storage();
  EXPECT_TRUE(tracker.CheckNoLeaks().ok());
}

TEST_P(StorageTest, InspectDescribesViewMemoryAndPool) {
  auto s = Zeros({8, 16}, DType::kBFloat16, device(), options());
  ASSERT_TRUE(s.ok());
  auto t = s->Transpose(0, 1);
  const StorageInfo info = InspectStorage(*t);
  EXPECT_TRUE(info.defined);
  EXPECT_THAT(info.shape, ElementsAre(16, 8));
  EXPECT_THAT(info.strides, ElementsAre(1, 16));
  EXPECT_FALSE(info.contiguous);
  EXPECT_EQ(info.dtype, DType::kBFloat16);
  EXPECT_EQ(info.nbytes, 256u);
  EXPECT_EQ(info.size_bytes, 256u);
  EXPECT_EQ(info.device, device());
  EXPECT_EQ(info.pinned, GetParam().pinned);
  EXPECT_EQ(info.data_ptr, s->data_ptr());
  EXPECT_EQ(info.use_count, 2);
  EXPECT_THAT(info.where, HasSubstr("storage_test.cc:"));
  EXPECT_TRUE(info.from_pool);
  EXPECT_GE(info.block_bytes, 256u);
  EXPECT_FALSE(info.pool_backend.empty());
  EXPECT_GE(info.pool_allocated_bytes, static_cast<int64_t>(info.block_bytes));
  const std::string text = info.ToString();
  EXPECT_THAT(text, HasSubstr("shape: [16, 8]"));
  EXPECT_THAT(text, HasSubstr("dtype: bfloat16"));
  EXPECT_THAT(text, HasSubstr("contiguous: false"));
  EXPECT_EQ(InspectStorage(Storage()).ToString(), "storage: undefined\n");
}

std::vector<Place> Places() {
  return {{"cpu", Device::Cpu()},
          {"pinned", Device::Cpu(), true, true},
          {"cuda0", Device::Cuda(0), false, true}};
}

INSTANTIATE_TEST_SUITE_P(Devices, StorageTest, ::testing::ValuesIn(Places()),
                         [](const auto& info) { return info.param.name; });

// ---- Not parameterised.

TEST(StorageExternalTest, DeleterRunsOnceAtTheLastReference) {
  int calls = 0;
  std::vector<float> memory(8, 1.0f);
  auto layout = Layout::Contiguous({2, 4});
  {
    auto s = Storage::FromExternal(memory.data(), 32, *layout, DType::kFloat32,
                                   Device::Cpu(), [&](void* base) {
                                     EXPECT_EQ(base, memory.data());
                                     ++calls;
                                   });
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->pool(), nullptr);
    auto view = s->Transpose(0, 1);
    *s = Storage();
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(*view->Contiguous()->ToVector<float>(), std::vector<float>(8, 1.0f));
  }
  EXPECT_EQ(calls, 1);
}

TEST(StorageExternalTest, DeleterRunsWhenRefused) {
  int calls = 0;
  float memory[4];
  auto layout = Layout::Contiguous({8});
  auto s = Storage::FromExternal(memory, sizeof(memory), *layout, DType::kFloat32,
                                 Device::Cpu(), [&](void*) { ++calls; });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(calls, 1);
  auto null_base = Storage::FromExternal(nullptr, 16, *Layout::Contiguous({4}),
                                         DType::kFloat32, Device::Cpu(), nullptr);
  EXPECT_THAT(null_base.status().message(), HasSubstr("nullptr"));
  auto pinned_gpu = Storage::FromExternal(memory, sizeof(memory), *Layout::Contiguous({4}),
                                          DType::kFloat32, Device::Cuda(0), nullptr,
                                          {.pinned = true});
  EXPECT_EQ(pinned_gpu.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StorageExternalTest, ReadOnlyMemoryRefusesWrites) {
  const std::vector<float> memory(4, 2.0f);
  auto s = Storage::FromExternal(const_cast<float*>(memory.data()), 16,
                                 *Layout::Contiguous({4}), DType::kFloat32, Device::Cpu(),
                                 nullptr, {.read_only = true});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->is_read_only());
  auto other = Zeros({4}, DType::kFloat32, Device::Cpu());
  EXPECT_THAT(s->CopyFrom(*other).message(), HasSubstr("read-only"));
  EXPECT_EQ(s->Fill(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(other->CopyFrom(*s).ok());  // Reading is fine.
  EXPECT_EQ(*other->ToVector<float>(), memory);
  auto clone = s->Clone();  // A copy is writable again.
  ASSERT_TRUE(clone.ok());
  EXPECT_FALSE(clone->is_read_only());
}

// Storages shared between threads: copies, views and the last release race, and the
// tracker registers and forgets from every thread.
TEST(StorageThreadTest, SharedAcrossThreads) {
  StorageTracker tracker;
  auto shared = Arange(0, 4096, 1, DType::kInt32, Device::Cpu());
  ASSERT_TRUE(shared.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        Storage copy = *shared;
        auto view = copy.Slice(0, t, 4096, 4);
        auto mine = Full({64}, t, DType::kInt32, Device::Cpu());
        if (!view.ok() || !mine.ok() || view->ToVector<int32_t>()->at(1) != t + 4) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(shared->use_count(), 1);
  EXPECT_EQ(tracker.live_count(), 1u);
}

// Host copies shared among threads: a 1100 x 1100 float matrix (4.6 MiB) transposed
// and made contiguous, copied into a transposed view and read back whole, with up to 4
// threads and with one per core; a negative count is refused and changes nothing.
TEST(StorageThreadTest, HostCopiesSharedAmongThreads) {
  ASSERT_EQ(HostCopyThreads(), 1);
  EXPECT_THAT(SetHostCopyThreads(-1).message(), HasSubstr("-1 threads"));
  EXPECT_EQ(HostCopyThreads(), 1);
  constexpr int64_t n = 1100;
  auto m = Arange(0, n * n, 1, DType::kFloat32, Device::Cpu());
  ASSERT_TRUE(m.ok()) << m.status();
  auto square = m->Reshape({n, n});
  ASSERT_TRUE(square.ok()) << square.status();
  // The bytes of `s`'s conversion to `dtype`, converted on as many threads as set.
  auto converted = [](const Storage& s, DType dtype) {
    std::vector<uint8_t> bytes(s.numel() * ItemSize(dtype));
    absl::StatusOr<Storage> c = s.To(dtype);
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) {
      EXPECT_TRUE(c->CopyToHost(bytes.data(), bytes.size()).ok());
    }
    return bytes;
  };
  // Conversions on one thread: a transposed view (strided) and the contiguous matrix.
  const std::vector<uint8_t> bf16_one = converted(*square->Transpose(0, 1), DType::kBFloat16);
  const std::vector<uint8_t> f16_one = converted(*square, DType::kFloat16);
  const std::vector<uint8_t> i64_one = converted(*square->Transpose(0, 1), DType::kInt64);
  for (const int threads : {4, kAllCores}) {
    ASSERT_TRUE(SetHostCopyThreads(threads).ok());
    EXPECT_EQ(HostCopyThreads(), threads);
    auto t = square->Transpose(0, 1);
    ASSERT_TRUE(t.ok()) << t.status();
    auto c = t->Contiguous();
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<float> host(n * n);
    ASSERT_TRUE(t->CopyToHost(host.data(), host.size() * sizeof(float)).ok());
    const std::vector<float> contiguous = *c->ToVector<float>();
    int wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const float expected = static_cast<float>(j * n + i);
        wrong += contiguous[i * n + j] != expected || host[i * n + j] != expected;
      }
    }
    EXPECT_EQ(wrong, 0) << threads << " threads";
    // And back through CopyFrom into a transposed view: the original again.
    auto back = Zeros({n, n}, DType::kFloat32, Device::Cpu());
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_TRUE(back->Transpose(0, 1)->CopyFrom(*c).ok());
    EXPECT_EQ(*back->ToVector<float>(), *square->ToVector<float>()) << threads << " threads";
    // Conversions shared among the threads give the same bytes as on one.
    EXPECT_EQ(converted(*t, DType::kBFloat16), bf16_one) << threads << " threads";
    EXPECT_EQ(converted(*square, DType::kFloat16), f16_one) << threads << " threads";
    EXPECT_EQ(converted(*t, DType::kInt64), i64_one) << threads << " threads";
  }
  ASSERT_TRUE(SetHostCopyThreads(1).ok());
}

TEST(StorageUndefinedTest, OperationsFail) {
  Storage s;
  EXPECT_FALSE(s.defined());
  EXPECT_EQ(s.data_ptr(), nullptr);
  EXPECT_EQ(s.size_bytes(), 0u);
  EXPECT_EQ(s.ToString(), "undefined storage");
  EXPECT_EQ(s.Clone().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.Slice(0, 0, 1).status().message(), HasSubstr("undefined"));
  auto other = Zeros({}, DType::kFloat32, Device::Cpu());
  EXPECT_EQ(s.CopyFrom(*other).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other->CopyFrom(s).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StorageDeviceTest, MissingCudaDevice) {
  const int missing = cuda::DeviceCount() + 2;
  auto s = Empty({4}, DType::kFloat32, Device::Cuda(missing));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr(absl::StrCat("cuda:", missing)));
  auto cpu = Zeros({4}, DType::kFloat32, Device::Cpu());
  EXPECT_THAT(cpu->To(Device::Cuda(missing)).status().message(),
              HasSubstr(absl::StrCat("cuda:", missing)));
  // Options that make no sense for the device.
  EXPECT_EQ(Empty({4}, DType::kFloat32, Device::Cuda(0), {.pinned = true}).status().code(),
            absl::StatusCode::kInvalidArgument);
  int fake_stream;
  EXPECT_EQ(Empty({4}, DType::kFloat32, Device::Cpu(),
                  {.stream = reinterpret_cast<CUstream_st*>(&fake_stream)})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace genesis::storage
