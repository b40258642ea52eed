#include "genesis/memory/pool/thread_cache_registry.h"

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/pool/thread_cache.h"

namespace genesis::memory::pool_internal {
namespace {

// A pool's side of the registry: it takes back exiting threads' caches while it lives.
class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() {
    registry_->adopt = [this](const std::shared_ptr<ThreadCache>& cache) {
      adopted_.push_back(cache.get());
      std::erase(registry_->caches, cache);
    };
  }
  // The pool goes: threads (this one included, at its exit) leave the registry alone.
  ~RegistryTest() override { Close(); }
  void Close() {
    std::lock_guard<std::mutex> lock(registry_->mu);
    registry_->adopt = nullptr;
    registry_->caches.clear();
  }

  const uint64_t id_ = NewPoolId();
  std::shared_ptr<ThreadCacheRegistry> registry_ = std::make_shared<ThreadCacheRegistry>();
  std::vector<ThreadCache*> adopted_;  // Under registry_->mu.
};

TEST_F(RegistryTest, AThreadHasOneCachePerPool) {
  ThreadCache* cache = CacheOfThisThread(id_, registry_);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(CacheOfThisThread(id_, registry_), cache);
  EXPECT_EQ(tls_pool_id, id_);
  EXPECT_EQ(tls_pool_cache, cache);

  const uint64_t other_id = NewPoolId();
  auto other = std::make_shared<ThreadCacheRegistry>();
  other->adopt = [](const std::shared_ptr<ThreadCache>&) {};
  ThreadCache* other_cache = CacheOfThisThread(other_id, other);
  EXPECT_NE(other_cache, cache);
  EXPECT_EQ(CacheOfThisThread(id_, registry_), cache);  // Found again in the list.
  EXPECT_EQ(CacheOfThisThread(other_id, other), other_cache);
  {
    std::lock_guard<std::mutex> lock(registry_->mu);
    EXPECT_EQ(registry_->caches.size(), 1u);
  }
  std::lock_guard<std::mutex> lock(other->mu);
  other->adopt = nullptr;
  other->caches.clear();
}

TEST_F(RegistryTest, ExitingThreadsGiveTheirCachesBack) {
  ThreadCache* mine = CacheOfThisThread(id_, registry_);
  ThreadCache* theirs = nullptr;
  std::thread t([&] { theirs = CacheOfThisThread(id_, registry_); });
  t.join();
  EXPECT_NE(theirs, mine);
  std::lock_guard<std::mutex> lock(registry_->mu);
  ASSERT_EQ(adopted_.size(), 1u);
  EXPECT_EQ(adopted_[0], theirs);
  ASSERT_EQ(registry_->caches.size(), 1u);
  EXPECT_EQ(registry_->caches[0].get(), mine);
}

TEST_F(RegistryTest, ThreadsOutliveTheirPools) {
  std::thread t([&] {
    CacheOfThisThread(id_, registry_);
    Close();  // The pool goes while the thread still runs.
  });
  t.join();
  EXPECT_TRUE(adopted_.empty());
}

}  // namespace
}  // namespace genesis::memory::pool_internal
