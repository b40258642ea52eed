// HostVirtualMemory: reservations, mapping, unmapping, slot reuse and misuse.
#include "genesis/memory/host_virtual_memory.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

constexpr size_t kChunk = size_t{2} << 20;

std::unique_ptr<HostVirtualMemory> MakeVm() {
  auto vm = HostVirtualMemory::Create(kChunk);
  EXPECT_TRUE(vm.ok()) << vm.status();
  return vm.ok() ? *std::move(vm) : nullptr;
}

TEST(HostVirtualMemoryTest, MapsChunksThatHoldData) {
  auto vm = MakeVm();
  ASSERT_NE(vm, nullptr);
  auto base = vm->Reserve(64 * kChunk);
  ASSERT_TRUE(base.ok()) << base.status();
  char* p = static_cast<char*>(*base);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kChunk, 0u);
  ASSERT_TRUE(vm->Map(p, 3 * kChunk).ok());
  EXPECT_EQ(vm->mapped_bytes(), 3 * kChunk);
  std::memset(p, 0x5a, 3 * kChunk);
  EXPECT_EQ(p[3 * kChunk - 1], 0x5a);
  // Unmapping the middle chunk returns its memory; mapped again, it reads as zero.
  ASSERT_TRUE(vm->Unmap(p + kChunk, kChunk).ok());
  EXPECT_EQ(vm->mapped_bytes(), 2 * kChunk);
  ASSERT_TRUE(vm->Map(p + kChunk, kChunk).ok());
  EXPECT_EQ(p[kChunk], 0);
  EXPECT_EQ(p[0], 0x5a);
  EXPECT_EQ(p[2 * kChunk], 0x5a);
  ASSERT_TRUE(vm->Unmap(p, 3 * kChunk).ok());
  EXPECT_EQ(vm->mapped_bytes(), 0u);
  vm->Unreserve(p, 64 * kChunk);
}

TEST(HostVirtualMemoryTest, MemoryMovesBetweenAddresses) {
  auto vm = MakeVm();
  ASSERT_NE(vm, nullptr);
  auto a = vm->Reserve(4 * kChunk);
  auto b = vm->Reserve(4 * kChunk);
  ASSERT_TRUE(a.ok() && b.ok());
  char* pa = static_cast<char*>(*a);
  char* pb = static_cast<char*>(*b);
  ASSERT_TRUE(vm->Map(pa, 4 * kChunk).ok());
  ASSERT_TRUE(vm->Unmap(pa + kChunk, 2 * kChunk).ok());
  // The freed slots are reused for the next mapping elsewhere.
  ASSERT_TRUE(vm->Map(pb, 2 * kChunk).ok());
  EXPECT_EQ(vm->mapped_bytes(), 4 * kChunk);
  pb[0] = 1;
  pa[0] = 2;
  EXPECT_EQ(pb[0], 1);
  // The destructor unmaps and unreserves what is left.
}

TEST(HostVirtualMemoryTest, RejectsMisuse) {
  EXPECT_FALSE(HostVirtualMemory::Create(3 << 20).ok());
  EXPECT_FALSE(HostVirtualMemory::Create(512).ok());
  auto vm = MakeVm();
  ASSERT_NE(vm, nullptr);
  EXPECT_FALSE(vm->Reserve(0).ok());
  EXPECT_FALSE(vm->Reserve(kChunk + 4096).ok());
  auto base = vm->Reserve(8 * kChunk);
  ASSERT_TRUE(base.ok());
  char* p = static_cast<char*>(*base);
  EXPECT_FALSE(vm->Map(p + 4096, kChunk).ok());         // Unaligned.
  EXPECT_FALSE(vm->Map(p, 9 * kChunk).ok());            // Past the reservation.
  EXPECT_FALSE(vm->Map(p - kChunk, kChunk).ok());       // Before it.
  ASSERT_TRUE(vm->Map(p, 2 * kChunk).ok());
  EXPECT_FALSE(vm->Map(p + kChunk, 2 * kChunk).ok());   // Partly mapped already.
  EXPECT_EQ(vm->mapped_bytes(), 2 * kChunk);
  EXPECT_FALSE(vm->Unmap(p, 3 * kChunk).ok());          // Partly unmapped.
  EXPECT_FALSE(vm->Unmap(p + 1, kChunk).ok());
  EXPECT_EQ(vm->mapped_bytes(), 2 * kChunk);
  EXPECT_TRUE(vm->Unmap(p, 2 * kChunk).ok());
}

TEST(HostVirtualMemoryTest, PiecesGoBackWhole) {
  auto vm = MakeVm();
  ASSERT_NE(vm, nullptr);
  // Pieces are aligned from the reservation's base: 7 chunks there are 4 + 2 + 1.
  auto base = vm->Reserve(16 * kChunk);
  ASSERT_TRUE(base.ok());
  const auto aligned = reinterpret_cast<uintptr_t>(*base);
  char* p = reinterpret_cast<char*>(aligned);
  ASSERT_TRUE(vm->MapPieces(p, 7 * kChunk, PieceCut{.max_piece = 4 * kChunk}).ok());
  EXPECT_EQ(vm->PieceAt(aligned + kChunk), std::make_pair(aligned, aligned + 4 * kChunk));
  EXPECT_EQ(vm->PieceAt(aligned + 6 * kChunk + 7),
            std::make_pair(aligned + 6 * kChunk, aligned + 7 * kChunk));
  // Outside any piece: the chunk.
  EXPECT_EQ(vm->PieceAt(aligned + 9 * kChunk + 1),
            std::make_pair(aligned + 9 * kChunk, aligned + 10 * kChunk));
  std::memset(p, 1, 7 * kChunk);
  // Part of a piece cannot go back; nothing is unmapped then.
  const absl::Status part = vm->Unmap(p + kChunk, kChunk);
  EXPECT_EQ(part.code(), absl::StatusCode::kInvalidArgument) << part;
  EXPECT_EQ(vm->Unmap(p + 4 * kChunk, kChunk).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(vm->mapped_bytes(), 7 * kChunk);
  EXPECT_EQ(p[kChunk], 1);
  ASSERT_TRUE(vm->Unmap(p + 4 * kChunk, 3 * kChunk).ok());
  EXPECT_EQ(vm->mapped_bytes(), 4 * kChunk);
  EXPECT_EQ(p[3 * kChunk], 1);
  // Not a power of 2; below a chunk.
  EXPECT_FALSE(vm->MapPieces(p + 4 * kChunk, kChunk, PieceCut{.max_piece = 3 * kChunk}).ok());
  EXPECT_FALSE(vm->MapPieces(p + 4 * kChunk, kChunk, PieceCut{.max_piece = kChunk / 2}).ok());
  ASSERT_TRUE(vm->MapPieces(p + 4 * kChunk, 3 * kChunk, PieceCut{.max_piece = 4 * kChunk}).ok());
  EXPECT_EQ(vm->mapped_bytes(), 7 * kChunk);
  vm->Unreserve(*base, 16 * kChunk);
  EXPECT_EQ(vm->mapped_bytes(), 0u);
}

}  // namespace
}  // namespace genesis::memory
