// copy_storage.h on the CPU and, where there is one, on a GPU.
#include "genesis/storage/copy_storage.h"

#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/core/device.h"
#include "genesis/cuda/test_util.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {
namespace {

using ::testing::HasSubstr;

Storage Iota(int64_t rows, int64_t cols, Device device, float start = 0,
             const StorageOptions& options = {}) {
  auto s = Arange(start, start + static_cast<double>(rows * cols), 1, DType::kFloat32,
                  device, options);
  EXPECT_TRUE(s.ok()) << s.status();
  auto r = s->Reshape({rows, cols});
  EXPECT_TRUE(r.ok());
  return *r;
}

std::vector<float> Values(const Storage& s) {
  auto v = s.ToVector<float>();
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

Storage Zeros2(int64_t rows, int64_t cols, Device device, const StorageOptions& options = {}) {
  auto s = Zeros({rows, cols}, DType::kFloat32, device, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(CopyStorageTest, CopiesContiguousAndStridedViews) {
  const Storage src = Iota(3, 4, Device::Cpu());
  Storage dst = Zeros2(3, 4, Device::Cpu());
  ASSERT_TRUE(CopyStorage(src, dst).ok());
  EXPECT_EQ(Values(dst), Values(src));
  const Storage transposed = *src.Transpose(0, 1);
  Storage dst_t = Zeros2(4, 3, Device::Cpu());
  ASSERT_TRUE(CopyStorage(transposed, dst_t).ok());
  EXPECT_EQ(Values(dst_t), Values(transposed));
}

TEST(CopyStorageTest, RefusesWhatCopyFromRefuses) {
  const Storage src = Iota(3, 4, Device::Cpu());
  Storage other_shape = Zeros2(4, 3, Device::Cpu());
  EXPECT_EQ(CopyStorage(src, other_shape).code(), absl::StatusCode::kInvalidArgument);
  Storage other_dtype = *Zeros({3, 4}, DType::kInt32, Device::Cpu());
  const absl::Status dtype = CopyStorage(src, other_dtype);
  EXPECT_EQ(dtype.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.message(), HasSubstr("dtype"));
  Storage overlapping = *src.View(src.layout());
  EXPECT_EQ(CopyStorage(src, overlapping).code(), absl::StatusCode::kInvalidArgument);
  float memory[12] = {};
  Storage read_only = *Storage::FromExternal(memory, sizeof(memory), *Layout::Contiguous({3, 4}),
                                             DType::kFloat32, Device::Cpu(), nullptr,
                                             {.read_only = true});
  EXPECT_EQ(CopyStorage(src, read_only).code(), absl::StatusCode::kFailedPrecondition);
  auto pending = CopyStorageAsync(src, read_only, nullptr);
  EXPECT_EQ(pending.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CopyStorageTest, AHostCopyIsFinishedWhenAsyncReturns) {
  const Storage src = Iota(8, 8, Device::Cpu());
  Storage dst = Zeros2(8, 8, Device::Cpu());
  auto pending = CopyStorageAsync(src, dst, nullptr);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->Done().value_or(false), true);
  EXPECT_TRUE(pending->Wait().ok());
  EXPECT_EQ(Values(dst), Values(src));
}

TEST(BatchCopyTest, CopiesContiguousAndStridedPairsOnTheHost) {
  std::vector<Storage> srcs, dsts;
  for (int i = 0; i < 20; ++i) {
    srcs.push_back(Iota(5, 7, Device::Cpu(), 100.0f * i));
    dsts.push_back(Zeros2(5, 7, Device::Cpu()));
  }
  srcs.push_back(*Iota(7, 5, Device::Cpu(), 5000).Transpose(0, 1));  // Strided.
  dsts.push_back(Zeros2(5, 7, Device::Cpu()));
  ASSERT_TRUE(BatchCopy(srcs, absl::MakeSpan(dsts)).ok());
  for (size_t i = 0; i < srcs.size(); ++i) EXPECT_EQ(Values(dsts[i]), Values(srcs[i])) << i;
  auto plan = PlanBatchCopy(srcs, dsts);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->ToString(), HasSubstr("memcpy"));
  EXPECT_EQ(plan->group_of_request.back(), -1) << "the strided pair is not in the batch";
}

TEST(BatchCopyTest, BadBatchesNameThePairAndCopyNothing) {
  std::vector<Storage> srcs = {Iota(2, 2, Device::Cpu()), Iota(2, 2, Device::Cpu(), 10)};
  std::vector<Storage> dsts = {Zeros2(2, 2, Device::Cpu())};
  const absl::Status lengths = BatchCopy(srcs, absl::MakeSpan(dsts));
  EXPECT_EQ(lengths.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lengths.message(), HasSubstr("2 sources and 1 destinations"));

  dsts.push_back(Zeros2(3, 2, Device::Cpu()));  // Pair 1: wrong shape.
  const absl::Status shape = BatchCopy(srcs, absl::MakeSpan(dsts));
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.message(), HasSubstr("pair 1: "));
  EXPECT_EQ(Values(dsts[0]), std::vector<float>(4, 0)) << "pair 0 copied anyway";

  dsts[1] = dsts[0];  // Both pairs write the same memory.
  const absl::Status overlap = BatchCopy(srcs, absl::MakeSpan(dsts));
  EXPECT_EQ(overlap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overlap.message(), HasSubstr("request 1"));
  EXPECT_EQ(Values(dsts[0]), std::vector<float>(4, 0));
}

TEST(BatchStorageTest, ToAndCopyFrom) {
  BatchStorage batch;
  for (int i = 0; i < 5; ++i) batch.Add(Iota(3, i + 1, Device::Cpu(), 10.0f * i));
  auto copy = batch.To(Device::Cpu());
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_EQ(copy->size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_FALSE((*copy)[i].SharesMemoryWith(batch[i]));
    EXPECT_EQ(Values((*copy)[i]), Values(batch[i]));
  }
  BatchStorage zeros;
  for (int i = 0; i < 5; ++i) zeros.Add(Zeros2(3, i + 1, Device::Cpu()));
  ASSERT_TRUE(zeros.CopyFrom(batch).ok());
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(Values(zeros[i]), Values(batch[i]));
}

// ---- On a GPU.

TEST(CopyStorageCudaTest, AsyncCopiesEveryDirectionAndKeepsStoragesAlive) {
  GENESIS_SKIP_WITHOUT_GPU();
  const Device gpu = Device::Cuda(0);
  for (const bool pinned : {false, true}) {
    SCOPED_TRACE(pinned ? "pinned" : "pageable");
    // 512 x 1024 floats: 2 MiB, staged when pageable.
    const Storage host = Iota(512, 1024, Device::Cpu(), 1, {.pinned = pinned});
    Storage device = Zeros2(512, 1024, gpu);
    auto up = CopyStorageAsync(host, device, nullptr);
    ASSERT_TRUE(up.ok()) << up.status();
    ASSERT_TRUE(up->Wait().ok());
    Storage back = Zeros2(512, 1024, Device::Cpu(), {.pinned = pinned});
    const long uses = back.use_count();
    auto down = CopyStorageAsync(device, back, nullptr);
    ASSERT_TRUE(down.ok()) << down.status();
    if (pinned) {
      EXPECT_EQ(back.use_count(), uses + 1) << "the pending copy holds it";
    }
    ASSERT_TRUE(down->Wait().ok());
    EXPECT_EQ(back.use_count(), uses);
    EXPECT_EQ(Values(back), Values(host));
  }
  // Device to device, strided (finished on return).
  const Storage src = Iota(64, 32, gpu);
  Storage dst = Zeros2(32, 64, gpu);
  auto pending = CopyStorageAsync(*src.Transpose(0, 1), dst, nullptr);
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(pending->Wait().ok());
  EXPECT_EQ(Values(dst), Values(*src.Transpose(0, 1)));
}

TEST(BatchCopyCudaTest, ManyPairsToAndFromAGpu) {
  GENESIS_SKIP_WITHOUT_GPU();
  const Device gpu = Device::Cuda(0);
  BatchStorage host;
  for (int i = 0; i < 64; ++i) {
    host.Add(Iota(16, 16 + i, Device::Cpu(), 1000.0f * i, {.pinned = i % 2 == 0}));
  }
  host.Add(*Iota(40, 30, Device::Cpu()).Transpose(0, 1));
  auto on_gpu = host.To(gpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  auto back = on_gpu->To(Device::Cpu(), {.pinned = true});
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ((*on_gpu)[i].device(), gpu);
    EXPECT_EQ(Values((*back)[i]), Values(host[i])) << "pair " << i;
  }
}

}  // namespace
}  // namespace genesis::storage
