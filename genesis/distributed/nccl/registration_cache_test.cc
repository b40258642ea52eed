// The registration cache's bookkeeping over fake pieces and a fake register function.
#include "genesis/distributed/nccl/registration_cache.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

using memory::Piece;

constexpr size_t kMiB = size_t{1} << 20;
constexpr uintptr_t kBase = uintptr_t{1} << 40;

// Pieces by start address, a register function that hands out handles 1, 2, ... (and
// refuses pieces listed in `refuse`), and the handles deregistered.
class Fake {
 public:
  void Map(uintptr_t start, size_t size) { pieces[start] = Piece{start, size, 0}; }
  void Unmap(RegistrationCache& cache, uintptr_t start) {
    cache.OnUnmapping(pieces.at(start));
    pieces.erase(start);
  }
  RegistrationCache MakeCache() {
    return RegistrationCache(
        [this](const void* p) -> std::optional<Piece> {
          const auto a = reinterpret_cast<uintptr_t>(p);
          auto it = pieces.upper_bound(a);
          if (it == pieces.begin()) return std::nullopt;
          --it;
          if (a >= it->second.end()) return std::nullopt;
          return it->second;
        },
        [this](const Piece& piece) -> absl::StatusOr<void*> {
          registered.push_back(piece.start);
          if (refuse.count(piece.start) != 0) return absl::InternalError("refused");
          return reinterpret_cast<void*>(++next_handle);
        },
        [this](void* handle) { deregistered.push_back(reinterpret_cast<uintptr_t>(handle)); });
  }
  static const void* At(uintptr_t a) { return reinterpret_cast<const void*>(a); }

  std::map<uintptr_t, Piece> pieces;
  std::map<uintptr_t, bool> refuse;
  std::vector<uintptr_t> registered;    // Piece starts, in order.
  std::vector<uintptr_t> deregistered;  // Handles, in order.
  uintptr_t next_handle = 0;
};

TEST(RegistrationCacheTest, RegistersAPieceOnceAndHitsAfterwards) {
  Fake fake;
  fake.Map(kBase, 32 * kMiB);
  RegistrationCache cache = fake.MakeCache();
  EXPECT_TRUE(cache.Prepare(Fake::At(kBase + kMiB), 8 * kMiB));
  EXPECT_TRUE(cache.Prepare(Fake::At(kBase + kMiB), 8 * kMiB));
  // Another buffer in the same piece, up to its last byte.
  EXPECT_TRUE(cache.Prepare(Fake::At(kBase + 16 * kMiB), 16 * kMiB));
  EXPECT_EQ(fake.registered, std::vector<uintptr_t>{kBase});
  const RegistrationStats stats = cache.stats();
  EXPECT_TRUE(stats.enabled);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.unregistered, 0);
  EXPECT_EQ(stats.pieces, 1);
  EXPECT_EQ(stats.bytes, int64_t{32} << 20);
  EXPECT_EQ(stats.ToString(),
            "on: 2 hits, 1 miss, 0 unregistered, 0 failures, 0 deregistrations; 1 piece "
            "(32.0 MiB); 0 staged (0 B staging)");
}

TEST(RegistrationCacheTest, BuffersAcrossPiecesOrOutsideThemStayUnregistered) {
  Fake fake;
  fake.Map(kBase, 32 * kMiB);
  fake.Map(kBase + 32 * kMiB, 32 * kMiB);
  RegistrationCache cache = fake.MakeCache();
  EXPECT_FALSE(cache.Prepare(Fake::At(kBase + 16 * kMiB), 32 * kMiB));  // Across two.
  EXPECT_FALSE(cache.Prepare(Fake::At(kBase), 64 * kMiB));              // Across two.
  EXPECT_FALSE(cache.Prepare(Fake::At(kBase + 64 * kMiB), kMiB));       // In none.
  EXPECT_FALSE(cache.Prepare(Fake::At(42), 4));                         // In none.
  EXPECT_TRUE(fake.registered.empty());
  EXPECT_EQ(cache.stats().unregistered, 4);
  EXPECT_EQ(cache.stats().pieces, 0);
}

TEST(RegistrationCacheTest, UnmappingDeregistersThePieceAndOnlyIt) {
  Fake fake;
  fake.Map(kBase, 32 * kMiB);
  fake.Map(kBase + 32 * kMiB, 4 * kMiB);
  fake.Map(kBase + 36 * kMiB, 2 * kMiB);
  RegistrationCache cache = fake.MakeCache();
  ASSERT_TRUE(cache.Prepare(Fake::At(kBase), kMiB));                  // Handle 1.
  ASSERT_TRUE(cache.Prepare(Fake::At(kBase + 32 * kMiB), 4 * kMiB));  // Handle 2.
  fake.Unmap(cache, kBase + 36 * kMiB);  // Never registered: nothing to do.
  EXPECT_TRUE(fake.deregistered.empty());
  fake.Unmap(cache, kBase);
  EXPECT_EQ(fake.deregistered, std::vector<uintptr_t>{1});
  RegistrationStats stats = cache.stats();
  EXPECT_EQ(stats.deregistrations, 1);
  EXPECT_EQ(stats.pieces, 1);
  EXPECT_EQ(stats.bytes, int64_t{4} << 20);
  // Mapped again (at another size): registered again, a miss.
  fake.Map(kBase, 16 * kMiB);
  EXPECT_TRUE(cache.Prepare(Fake::At(kBase), 16 * kMiB));
  EXPECT_EQ(fake.registered, (std::vector<uintptr_t>{kBase, kBase + 32 * kMiB, kBase}));
  stats = cache.stats();
  EXPECT_EQ(stats.misses, 3);
  EXPECT_EQ(stats.bytes, int64_t{20} << 20);
  cache.DeregisterAll();
  std::sort(fake.deregistered.begin(), fake.deregistered.end());  // Any order.
  EXPECT_EQ(fake.deregistered, (std::vector<uintptr_t>{1, 2, 3}));
  stats = cache.stats();
  EXPECT_EQ(stats.deregistrations, 3);
  EXPECT_EQ(stats.pieces, 0);
  EXPECT_EQ(stats.bytes, 0);
  cache.DeregisterAll();  // Nothing left: nothing happens.
  EXPECT_EQ(fake.deregistered.size(), 3u);
}

TEST(RegistrationCacheTest, APieceOfAnotherSizeAtTheSameStartIsRegisteredAfresh) {
  // Should an unmapping go unheard, a new piece at a cached start is not taken for the
  // old one.
  Fake fake;
  fake.Map(kBase, 8 * kMiB);
  RegistrationCache cache = fake.MakeCache();
  ASSERT_TRUE(cache.Prepare(Fake::At(kBase), kMiB));
  fake.pieces.erase(kBase);
  fake.Map(kBase, 32 * kMiB);
  EXPECT_TRUE(cache.Prepare(Fake::At(kBase), 32 * kMiB));
  EXPECT_EQ(fake.deregistered, std::vector<uintptr_t>{1});
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_EQ(cache.stats().bytes, int64_t{32} << 20);
}

TEST(RegistrationCacheTest, ARefusedPieceIsNotTriedAgainUntilUnmapped) {
  Fake fake;
  fake.Map(kBase, 32 * kMiB);
  fake.refuse[kBase] = true;
  RegistrationCache cache = fake.MakeCache();
  EXPECT_FALSE(cache.Prepare(Fake::At(kBase), kMiB));
  EXPECT_FALSE(cache.Prepare(Fake::At(kBase + kMiB), kMiB));
  EXPECT_EQ(fake.registered.size(), 1u);
  RegistrationStats stats = cache.stats();
  EXPECT_EQ(stats.failures, 1);
  EXPECT_EQ(stats.unregistered, 2);
  EXPECT_EQ(stats.pieces, 0);
  // Unmapped and mapped again: tried again.
  fake.Unmap(cache, kBase);
  EXPECT_TRUE(fake.deregistered.empty());
  fake.refuse.clear();
  fake.Map(kBase, 32 * kMiB);
  EXPECT_TRUE(cache.Prepare(Fake::At(kBase), kMiB));
  EXPECT_EQ(fake.registered.size(), 2u);
}

TEST(RegistrationCacheTest, ThreadsShareOneRegistrationPerPiece) {
  Fake fake;
  for (int i = 0; i < 8; ++i) fake.Map(kBase + i * 32 * kMiB, 32 * kMiB);
  RegistrationCache cache = fake.MakeCache();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 100; ++round) {
        for (int i = 0; i < 8; ++i) {
          EXPECT_TRUE(cache.Prepare(Fake::At(kBase + i * 32 * kMiB + kMiB), kMiB));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const RegistrationStats stats = cache.stats();
  EXPECT_EQ(fake.registered.size(), 8u);
  EXPECT_EQ(stats.misses, 8);
  EXPECT_EQ(stats.hits, 4 * 100 * 8 - 8);
}

TEST(RegistrationStatsTest, OffByDefault) {
  EXPECT_TRUE(absl::StartsWith(RegistrationStats().ToString(), "off: 0 hits, 0 misses"));
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
