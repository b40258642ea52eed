// The batch copier without a GPU: host-to-host batches, and every check that runs
// before a byte moves. batch_copy_cuda_test covers the device mechanisms.
#include "genesis/transfer/batch_copy.h"

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/core/device.h"
#include "genesis/transfer/batch_plan.h"

namespace genesis::transfer {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<BatchCopier> MakeCopier() {
  auto copier = BatchCopier::Create();
  EXPECT_TRUE(copier.ok()) << copier.status();
  return *std::move(copier);
}

CopyRequest HostCopy(const void* src, void* dst, size_t bytes) {
  return {.src = src, .src_device = Device::Cpu(), .dst = dst,
          .dst_device = Device::Cpu(), .bytes = bytes};
}

TEST(BatchCopierTest, CopiesAHostBatchOfManySizes) {
  std::vector<char> src(1 << 20), dst(1 << 20, 0);
  std::iota(src.begin(), src.end(), 1);
  std::vector<CopyRequest> requests;
  size_t offset = 0;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{100000},
                       size_t{300000}}) {
    requests.push_back(HostCopy(src.data() + offset, dst.data() + offset, bytes));
    offset += bytes;
  }
  auto copier = MakeCopier();
  ASSERT_TRUE(copier->Copy(requests).ok());
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), offset));
  EXPECT_EQ(dst[offset], 0);
  // The same through CopyAsync: host copies finish before it returns.
  std::fill(dst.begin(), dst.end(), 0);
  ASSERT_TRUE(copier->CopyAsync(requests, Device::Cpu(), nullptr).ok());
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), offset));
}

TEST(BatchCopierTest, PlanSaysWhatCopyDoes) {
  char a[8] = "abcdefg", b[8] = {};
  auto copier = MakeCopier();
  const std::vector<CopyRequest> requests = {HostCopy(a, b, 8)};
  auto plan = copier->Plan(requests);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0].mechanism, Mechanism::kHostMemcpy);
  ASSERT_TRUE(copier->Execute(*plan, requests, Device::Cpu(), nullptr, true).ok());
  EXPECT_STREQ(b, "abcdefg");
}

TEST(BatchCopierTest, ABadRequestStopsTheBatchBeforeAnyByteMoves) {
  std::vector<char> src(64, 'x'), dst(64, 0);
  std::vector<CopyRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(HostCopy(&src[8 * i], &dst[8 * i], 8));
  // Request 4 writes over request 1's destination.
  requests.push_back(HostCopy(&src[40], &dst[12], 8));
  auto copier = MakeCopier();
  const absl::Status status = copier->Copy(requests);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("request 4 (cpu -> cpu, 8 bytes)"));
  EXPECT_THAT(status.message(), HasSubstr("request 1"));
  EXPECT_EQ(dst, std::vector<char>(64, 0)) << "a half-done batch";
}

TEST(BatchCopierTest, ANullPointerNamesItsRequest) {
  char a[4] = {};
  auto copier = MakeCopier();
  const std::vector<CopyRequest> requests = {HostCopy(a, a + 2, 2), HostCopy(nullptr, a, 1)};
  const absl::Status status = copier->Copy(requests);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("request 1"));
  EXPECT_THAT(status.message(), HasSubstr("source pointer is null"));
}

TEST(BatchCopierTest, MismatchedListsAreRefusedByMakeRequests) {
  char a[4] = {}, b[4] = {};
  const std::vector<SrcBuffer> srcs = {{a, Device::Cpu()}, {b, Device::Cpu()}};
  const std::vector<DstBuffer> dsts = {{b, Device::Cpu()}};
  const std::vector<size_t> sizes = {4, 4};
  auto requests = MakeRequests(srcs, dsts, sizes);
  EXPECT_EQ(requests.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchCopierTest, APlanForAnotherBatchIsRefused) {
  char a[4] = {}, b[4] = {};
  auto copier = MakeCopier();
  auto plan = copier->Plan(std::vector<CopyRequest>{HostCopy(a, b, 4)});
  ASSERT_TRUE(plan.ok());
  const std::vector<CopyRequest> two = {HostCopy(a, b, 2), HostCopy(a + 2, b + 2, 2)};
  const absl::Status status = copier->Execute(*plan, two, Device::Cpu(), nullptr, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("plan is for 1 requests, the batch has 2"));
}

TEST(BatchCopierTest, AStreamNeedsACudaDevice) {
  char a[4] = {}, b[4] = {};
  auto copier = MakeCopier();
  auto* fake_stream = reinterpret_cast<CUstream_st*>(uintptr_t{0x1000});
  const absl::Status status =
      copier->Copy(std::vector<CopyRequest>{HostCopy(a, b, 4)}, Device::Cpu(), fake_stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("stream"));
}

TEST(BatchCopierTest, DevicesOutOfRangeAreRefused) {
  char a[4] = {};
  auto copier = MakeCopier();
  const int n = copier->topology().device_count;
  CopyRequest r = HostCopy(a, a + 2, 2);
  r.dst_device = Device::Cuda(n);
  const absl::Status status = copier->Copy(std::vector<CopyRequest>{r});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("request 0"));
  EXPECT_THAT(status.message(), HasSubstr("out of range"));
  // A stream device that does not exist.
  EXPECT_FALSE(copier->Copy(std::vector<CopyRequest>{HostCopy(a, a + 2, 2)},
                            Device::Cuda(n), nullptr)
                   .ok());
  EXPECT_FALSE(copier->EnablePeerAccess(n, n + 1).ok());
}

TEST(BatchCopierTest, OptionsAreChecked) {
  BatchCopyOptions options;
  options.staged_peer_chunk_bytes = 100;
  auto copier = BatchCopier::Create(options);
  EXPECT_EQ(copier.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(copier.status().message(), HasSubstr("staged_peer_chunk_bytes is 100"));
}

TEST(BatchCopierTest, TheDefaultCopierIsOne) {
  auto a = BatchCopier::Default();
  auto b = BatchCopier::Default();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
}

}  // namespace
}  // namespace genesis::transfer
