// The C ABI PyTorch calls (torch_allocator.h), over pools of a TestBackend that looks
// like CUDA, with stream events the test completes by hand.
#include "python/src/torch_allocator.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/fake_stream_events.h"
#include "genesis/memory/pool_registry.h"
#include "genesis/memory/test_backend.h"

namespace genesis::python {
namespace {

using ::testing::HasSubstr;
using memory::CachingAllocator;

constexpr size_t kMiB = size_t{1} << 20;
void* const kStreamA = reinterpret_cast<void*>(0x10);
void* const kStreamB = reinterpret_cast<void*>(0x20);

class TorchAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto events = std::make_unique<memory::FakeStreamEvents>();
    events_ = events.get();
    auto backend = memory::TestBackend::FakeCuda(/*capacity=*/64 * kMiB);
    backend_ = backend.get();
    pool_ = *CachingAllocator::Create(std::move(backend), memory::AllocatorOptions(),
                                      std::move(events));
    SetTorchPoolProvider([this](int device) -> absl::StatusOr<CachingAllocator*> {
      if (device != 0) return absl::OutOfRangeError("only cuda:0 here");
      return pool_.get();
    });
  }
  void TearDown() override { SetTorchPoolProvider(nullptr); }

  memory::FakeStreamEvents* events_ = nullptr;
  memory::TestBackend* backend_ = nullptr;
  std::unique_ptr<CachingAllocator> pool_;
};

TEST_F(TorchAllocatorTest, AllocatesAndFreesThroughThePool) {
  void* p = genesis_torch_malloc(3 * kMiB, 0, kStreamA);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(pool_->Owns(p));
  EXPECT_GE(pool_->Stats().all.allocated_bytes.current, int64_t{3} * kMiB);
  genesis_torch_free(p, 3 * kMiB, 0, kStreamA);
  EXPECT_EQ(pool_->Stats().all.allocated_bytes.current, 0);
  // Cached: the same request on the same stream gets the same block back.
  EXPECT_EQ(genesis_torch_malloc(3 * kMiB, 0, kStreamA), p);
  genesis_torch_free(p, 3 * kMiB, 0, kStreamA);
  EXPECT_EQ(genesis_torch_malloc(0, 0, kStreamA), nullptr);
  genesis_torch_free(nullptr, 0, 0, kStreamA);
  EXPECT_EQ(genesis_torch_error_count(), 0);
}

TEST_F(TorchAllocatorTest, RecordStreamDelaysReuseOnTheAllocatingStream) {
  void* p = genesis_torch_malloc(3 * kMiB, 0, kStreamA);
  genesis_torch_record_stream(p, kStreamB);
  genesis_torch_free(p, 3 * kMiB, 0, kStreamA);
  // Stream B's work may still read the block: it is not handed out again yet.
  void* q = genesis_torch_malloc(3 * kMiB, 0, kStreamA);
  EXPECT_NE(q, p);
  genesis_torch_free(q, 3 * kMiB, 0, kStreamA);
  events_->Complete(reinterpret_cast<memory::StreamId>(kStreamB));
  void* r = genesis_torch_malloc(3 * kMiB, 0, kStreamA);
  void* s = genesis_torch_malloc(3 * kMiB, 0, kStreamA);
  EXPECT_TRUE(r == p || s == p);
  genesis_torch_free(r, 3 * kMiB, 0, kStreamA);
  genesis_torch_free(s, 3 * kMiB, 0, kStreamA);
  EXPECT_EQ(genesis_torch_error_count(), 0);
}

TEST_F(TorchAllocatorTest, OutOfMemoryThrowsThePoolsReportAndThePoolRecovers) {
  void* held = genesis_torch_malloc(40 * kMiB, 0, kStreamA);
  try {
    genesis_torch_malloc(40 * kMiB, 0, kStreamA);
    FAIL() << "expected out of memory";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("could not allocate"));
  }
  genesis_torch_free(held, 40 * kMiB, 0, kStreamA);
  genesis_torch_empty_cache();
  EXPECT_EQ(pool_->Stats().all.reserved_bytes.current, 0);
  void* again = genesis_torch_malloc(40 * kMiB, 0, kStreamA);
  EXPECT_NE(again, nullptr);
  genesis_torch_free(again, 40 * kMiB, 0, kStreamA);
}

TEST_F(TorchAllocatorTest, BadPointersAndDevicesAreReportedNotThrown) {
  int local = 0;
  genesis_torch_free(&local, 4, 0, kStreamA);
  EXPECT_EQ(genesis_torch_error_count(), 1);
  EXPECT_THAT(genesis_torch_last_error(), HasSubstr("free of 4 bytes at 0x"));
  genesis_torch_record_stream(&local, kStreamB);
  EXPECT_EQ(genesis_torch_error_count(), 2);
  EXPECT_THAT(genesis_torch_last_error(), HasSubstr("which no genesis pool handed out"));
  genesis_torch_free(&local, 4, 7, kStreamA);
  EXPECT_THAT(genesis_torch_last_error(), HasSubstr("only cuda:0 here"));
  EXPECT_THROW(genesis_torch_malloc(1, 99, kStreamA), std::runtime_error);
  EXPECT_THROW(genesis_torch_malloc(1, -1, kStreamA), std::runtime_error);
}

TEST_F(TorchAllocatorTest, MemoryFractionGoesToPoolsNotYetMade) {
  // No pool of the registry exists in this process: the fraction is taken.
  genesis_torch_set_memory_fraction(0.5, 0);
  EXPECT_EQ(memory::DefaultAllocConfig()->options.memory_fraction, 0.5);
  try {
    genesis_torch_set_memory_fraction(1.5, 0);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("memory_fraction"));
  }
  ASSERT_TRUE(memory::PoolFor(Device::Cpu()).ok());  // Now a pool exists.
  EXPECT_THROW(genesis_torch_set_memory_fraction(0.4, 0), std::runtime_error);
}

}  // namespace
}  // namespace genesis::python
