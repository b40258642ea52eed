#include "genesis/transfer/batch_plan.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::transfer {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

std::string MessageOf(const absl::Status& status) {
  return std::string(status.message());
}

// Hands out disjoint fake addresses (never dereferenced: planning touches no memory).
class Addresses {
 public:
  void* Next(size_t bytes) {
    const uintptr_t p = next_;
    next_ += (bytes + 4095) / 4096 * 4096 + 4096;
    return reinterpret_cast<void*>(p);
  }

 private:
  uintptr_t next_ = 0x10000000;
};

void* At(uintptr_t address) { return reinterpret_cast<void*>(address); }

Topology Gpus(int n, bool peer = true, bool batch = false) {
  Topology t;
  t.device_count = n;
  if (peer) {
    t.peer_access.assign(n, std::vector<bool>(n, true));
    for (int i = 0; i < n; ++i) t.peer_access[i][i] = false;
  }
  t.batch_memcpy_available = batch;
  return t;
}

struct Batch {
  std::vector<CopyRequest> requests;
  Addresses addresses;

  Batch& Add(Device src, Device dst, size_t bytes, int count = 1, bool src_pinned = false,
             bool dst_pinned = false) {
    for (int i = 0; i < count; ++i) {
      requests.push_back({addresses.Next(bytes), src, src_pinned, addresses.Next(bytes),
                          dst, dst_pinned, bytes});
    }
    return *this;
  }
};

// Options with one size bound for every direction (fused_device_max_bytes =
// fused_max_bytes), which most tests below are written against.
constexpr PlanOptions kOneBound{.fused_device_max_bytes = size_t{256} << 10};

BatchPlan Plan(const Batch& batch, const Topology& topology,
               const PlanOptions& options = kOneBound) {
  return ValueOrThrow(PlanBatch(batch.requests, topology, options));
}

// Invariants every plan keeps: each non-empty request in exactly one group, whose
// devices and direction match it; bytes add up; group order as documented.
void ExpectConsistent(const BatchPlan& plan, const std::vector<CopyRequest>& requests) {
  ASSERT_EQ(plan.group_of_request.size(), requests.size());
  std::vector<int> seen(requests.size(), 0);
  size_t total = 0;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const CopyGroup& group = plan.groups[g];
    EXPECT_FALSE(group.requests.empty());
    EXPECT_TRUE(std::is_sorted(group.requests.begin(), group.requests.end()));
    EXPECT_FALSE(group.reason.empty());
    size_t bytes = 0;
    for (size_t i : group.requests) {
      ++seen[i];
      bytes += requests[i].bytes;
      EXPECT_EQ(plan.group_of_request[i], static_cast<int>(g));
      EXPECT_EQ(requests[i].src_device, group.src_device);
      EXPECT_EQ(requests[i].dst_device, group.dst_device);
    }
    EXPECT_EQ(bytes, group.bytes);
    total += bytes;
    if (group.mechanism == Mechanism::kHostMemcpy) {
      EXPECT_EQ(group.stream, -1);
    } else {
      ASSERT_GE(group.stream, 0);
      ASSERT_LT(group.stream, static_cast<int>(plan.streams.size()));
    }
    EXPECT_EQ(group.second_stream >= 0, group.mechanism == Mechanism::kStagedPeer);
    if (g > 0) {
      const CopyGroup& prev = plan.groups[g - 1];
      const auto key = [](const CopyGroup& x) {
        return std::tuple(x.direction, x.src_device.is_cpu() ? -1 : x.src_device.index(),
                          x.dst_device.is_cpu() ? -1 : x.dst_device.index(), x.mechanism);
      };
      EXPECT_LE(key(prev), key(group));
    }
  }
  EXPECT_EQ(total, plan.total_bytes);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(seen[i], requests[i].bytes > 0 ? 1 : 0) << "request " << i;
    if (requests[i].bytes == 0) {
      EXPECT_EQ(plan.group_of_request[i], -1);
    }
  }
}

const Device kCpu = Device::Cpu();
const Device kGpu0 = Device::Cuda(0);
const Device kGpu1 = Device::Cuda(1);

// --- Mechanisms ---------------------------------------------------------------------

TEST(PlanBatchTest, ManySmallDeviceCopiesAreFused) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 16 * KiB, 1024);
  const BatchPlan plan = Plan(batch, Gpus(1));
  ExpectConsistent(plan, batch.requests);
  ASSERT_EQ(plan.groups.size(), 1u);
  const CopyGroup& g = plan.groups[0];
  EXPECT_EQ(g.direction, Direction::kDeviceToDevice);
  EXPECT_EQ(g.mechanism, Mechanism::kFusedKernel);
  EXPECT_EQ(g.requests.size(), 1024u);
  EXPECT_EQ(g.bytes, 16 * MiB);
  EXPECT_THAT(g.reason, AllOf(HasSubstr("1024 copies <= fused_device_max_bytes (256.0 KiB)"),
                              HasSubstr("fused_min_count (8)")));
  ASSERT_EQ(plan.streams.size(), 1u);
  EXPECT_EQ(plan.streams[0].ToString(), "cuda:0/d2d");
}

TEST(PlanBatchTest, FewLargeDeviceCopiesUseTheCopyEngine) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 256 * MiB, 4);
  const BatchPlan plan = Plan(batch, Gpus(1, false, /*batch=*/true));
  ExpectConsistent(plan, batch.requests);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kCopyEngine);
  EXPECT_EQ(plan.groups[0].bytes, 1024 * MiB);
  EXPECT_THAT(plan.groups[0].reason,
              HasSubstr("each >= copy_engine_min_bytes (4.0 MiB)"));
}

TEST(PlanBatchTest, MixedSizesSplitBySize) {
  // 256 B, 512 B, ..., 4 MiB: 11 small (<= 256 KiB), 3 mid, 1 large.
  Batch batch;
  for (size_t bytes = 256; bytes <= 4 * MiB; bytes *= 2) batch.Add(kGpu0, kGpu0, bytes);
  ASSERT_EQ(batch.requests.size(), 15u);
  for (bool batch_memcpy : {false, true}) {
    SCOPED_TRACE(batch_memcpy ? "batch memcpy" : "no batch memcpy");
    const BatchPlan plan = Plan(batch, Gpus(1, false, batch_memcpy));
    ExpectConsistent(plan, batch.requests);
    // 3 mid-size copies are below batch_min_count (4) either way.
    ASSERT_EQ(plan.groups.size(), 3u);
    EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kFusedKernel);
    EXPECT_EQ(plan.groups[0].requests.size(), 11u);
    EXPECT_EQ(plan.groups[1].mechanism, Mechanism::kCopyEngine);
    EXPECT_THAT(plan.groups[1].requests, ElementsAre(14));  // 4 MiB: large.
    EXPECT_EQ(plan.groups[2].mechanism, Mechanism::kCopyEngine);
    EXPECT_THAT(plan.groups[2].requests, ElementsAre(11, 12, 13));
    EXPECT_THAT(plan.groups[2].reason,
                HasSubstr(batch_memcpy ? "only 3 such copies, below batch_min_count (4)"
                                       : "batch memcpy unavailable"));
    // All on the one local stream.
    ASSERT_EQ(plan.streams.size(), 1u);
    for (const CopyGroup& g : plan.groups) EXPECT_EQ(g.stream, 0);
  }
}

TEST(PlanBatchTest, BatchMemcpyForManyMidSizeCopiesWhenAvailable) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 1 * MiB, 6);
  batch.Add(kGpu0, kGpu0, 64 * KiB, 3);  // Too few to fuse: batched with the others.
  {
    const BatchPlan plan = Plan(batch, Gpus(1, false, /*batch=*/true));
    ExpectConsistent(plan, batch.requests);
    ASSERT_EQ(plan.groups.size(), 1u);
    EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kBatchMemcpy);
    EXPECT_EQ(plan.groups[0].requests.size(), 9u);
    EXPECT_THAT(plan.groups[0].reason,
                AllOf(HasSubstr("9 copies < copy_engine_min_bytes (4.0 MiB)"),
                      HasSubstr("batch_min_count (4)"), HasSubstr("available")));
  }
  {
    const BatchPlan plan = Plan(batch, Gpus(1, false, /*batch=*/false));
    ExpectConsistent(plan, batch.requests);
    ASSERT_EQ(plan.groups.size(), 1u);
    EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kCopyEngine);
    EXPECT_THAT(plan.groups[0].reason, HasSubstr("batch memcpy unavailable"));
  }
  {
    // Thresholds are options.
    const BatchPlan plan = Plan(batch, Gpus(1, false, true),
                                 {.fused_device_max_bytes = 256 * KiB, .batch_min_count = 10});
    EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kCopyEngine);
    EXPECT_THAT(plan.groups[0].reason, HasSubstr("below batch_min_count (10)"));
  }
}

TEST(PlanBatchTest, DeviceCopiesFuseUpToTheirOwnBound) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 1 * MiB, 6).Add(kGpu0, kGpu0, 4 * MiB, 2);
  batch.Add(kGpu0, kGpu0, 5 * MiB, 1);
  const BatchPlan plan = Plan(batch, Gpus(1, false, true), PlanOptions{});
  ExpectConsistent(plan, batch.requests);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kFusedKernel);
  EXPECT_EQ(plan.groups[0].requests.size(), 8u);
  EXPECT_THAT(plan.groups[0].reason, HasSubstr("8 copies <= fused_device_max_bytes (4.0 MiB)"));
  EXPECT_EQ(plan.groups[1].mechanism, Mechanism::kCopyEngine);
}

TEST(PlanBatchTest, FewSmallCopiesAreNotFused) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 4 * KiB, 7);
  const BatchPlan plan = Plan(batch, Gpus(1));
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kCopyEngine);
  const BatchPlan fused = Plan(batch, Gpus(1), {.fused_min_count = 7});
  EXPECT_EQ(fused.groups[0].mechanism, Mechanism::kFusedKernel);
  EXPECT_THAT(fused.groups[0].reason, HasSubstr("fused_min_count (7)"));
}

TEST(PlanBatchTest, SmallPinnedHostToDeviceIsFusedPageableIsNot) {
  Batch pinned;
  pinned.Add(kCpu, kGpu0, 4 * KiB, 16, /*src_pinned=*/true);
  const BatchPlan plan = Plan(pinned, Gpus(1));
  ExpectConsistent(plan, pinned.requests);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].direction, Direction::kHostToDevice);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kFusedKernel);
  EXPECT_THAT(plan.groups[0].reason, HasSubstr("pinned host memory"));
  EXPECT_EQ(plan.streams[plan.groups[0].stream].ToString(), "cuda:0/h2d");

  Batch pageable;
  pageable.Add(kCpu, kGpu0, 4 * KiB, 16, /*src_pinned=*/false);
  const BatchPlan p2 = Plan(pageable, Gpus(1, false, /*batch=*/true));
  ASSERT_EQ(p2.groups.size(), 1u);
  EXPECT_EQ(p2.groups[0].mechanism, Mechanism::kBatchMemcpy);
  const BatchPlan p3 = Plan(pageable, Gpus(1, false, /*batch=*/false));
  EXPECT_EQ(p3.groups[0].mechanism, Mechanism::kCopyEngine);

  // Device to host into pinned memory: the kernel writes it directly.
  Batch d2h;
  d2h.Add(kGpu0, kCpu, 4 * KiB, 16, false, /*dst_pinned=*/true);
  const BatchPlan p4 = Plan(d2h, Gpus(1));
  EXPECT_EQ(p4.groups[0].direction, Direction::kDeviceToHost);
  EXPECT_EQ(p4.groups[0].mechanism, Mechanism::kFusedKernel);
  EXPECT_EQ(p4.streams[p4.groups[0].stream].ToString(), "cuda:0/d2h");
}

TEST(PlanBatchTest, LargePageableHostCopiesAreStaged) {
  Batch batch;
  batch.Add(kCpu, kGpu0, 64 * MiB, 2);                       // Pageable: staged.
  batch.Add(kCpu, kGpu0, 64 * MiB, 1, /*src_pinned=*/true);  // Pinned: copy engine.
  batch.Add(kCpu, kGpu0, 512 * KiB, 1);                      // Pageable, small.
  batch.Add(kGpu0, kCpu, 1 * MiB, 1);                        // Pageable at threshold.
  const BatchPlan plan = Plan(batch, Gpus(1));
  ExpectConsistent(plan, batch.requests);
  ASSERT_EQ(plan.groups.size(), 4u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kCopyEngine);  // h2d, large pinned.
  EXPECT_THAT(plan.groups[0].requests, ElementsAre(2));
  EXPECT_EQ(plan.groups[1].mechanism, Mechanism::kCopyEngine);  // h2d, small pageable.
  EXPECT_THAT(plan.groups[1].requests, ElementsAre(3));
  EXPECT_EQ(plan.groups[2].mechanism, Mechanism::kPageableStaging);
  EXPECT_THAT(plan.groups[2].requests, ElementsAre(0, 1));
  EXPECT_THAT(
      plan.groups[2].reason,
      HasSubstr("pageable host memory, each >= pageable_staging_min_bytes (1.0 MiB)"));
  EXPECT_EQ(plan.groups[3].direction, Direction::kDeviceToHost);
  EXPECT_EQ(plan.groups[3].mechanism, Mechanism::kPageableStaging);
  // Host-to-device groups share the device's h2d stream; device to host has its own.
  EXPECT_EQ(plan.groups[0].stream, plan.groups[2].stream);
  EXPECT_NE(plan.groups[3].stream, plan.groups[0].stream);
}

TEST(PlanBatchTest, PeerWithAccess) {
  Batch batch;
  batch.Add(kGpu0, kGpu1, 64 * MiB, 2);
  batch.Add(kGpu0, kGpu1, 4 * KiB, 100);
  const BatchPlan plan = Plan(batch, Gpus(2, /*peer=*/true));
  ExpectConsistent(plan, batch.requests);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].direction, Direction::kPeer);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kPeerCopy);
  EXPECT_EQ(plan.groups[0].requests.size(), 2u);
  EXPECT_THAT(plan.groups[0].reason, HasSubstr("peer access; each > fused_max_bytes"));
  EXPECT_EQ(plan.groups[1].mechanism, Mechanism::kPeerFusedKernel);
  EXPECT_EQ(plan.groups[1].requests.size(), 100u);
  // Copy engines and the fused kernel push from the source, on one stream.
  EXPECT_EQ(plan.streams[plan.groups[0].stream].ToString(), "cuda:0/peer:cuda:1");
  EXPECT_EQ(plan.groups[1].stream, plan.groups[0].stream);

  Batch few;
  few.Add(kGpu0, kGpu1, 4 * KiB, 3);
  const BatchPlan p2 = Plan(few, Gpus(2, true));
  ASSERT_EQ(p2.groups.size(), 1u);
  EXPECT_EQ(p2.groups[0].mechanism, Mechanism::kPeerCopy);
  EXPECT_THAT(p2.groups[0].reason, HasSubstr("only 3 copies <= fused_max_bytes"));
}

TEST(PlanBatchTest, PeerFusedKernelRunsWhereItHasAccess) {
  Batch batch;
  batch.Add(kGpu0, kGpu1, 4 * KiB, 10);
  Topology topology = Gpus(2, false);
  topology.peer_access = {{false, true}, {false, false}};  // Only 0 can reach 1.
  const BatchPlan plan = Plan(batch, topology);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kPeerFusedKernel);
  EXPECT_EQ(plan.streams[plan.groups[0].stream].ToString(), "cuda:0/peer:cuda:1");
  topology.peer_access = {{false, false}, {true, false}};  // Only 1 can reach 0.
  const BatchPlan pull = Plan(batch, topology);
  EXPECT_EQ(pull.streams[pull.groups[0].stream].ToString(), "cuda:1/peer:cuda:0");
}

TEST(PlanBatchTest, PeerFusedKernelPushesUnlessToldToPull) {
  Batch batch;
  batch.Add(kGpu0, kGpu1, 64 * KiB, 16);
  PlanOptions pull = kOneBound;
  pull.peer_fused_kernel_pushes = false;
  const auto lane = [](const BatchPlan& plan) {
    return plan.streams[plan.groups[0].stream].ToString();
  };
  // Both can reach each other: pushes by default, pulls when told to.
  const BatchPlan pushed = Plan(batch, Gpus(2));
  ASSERT_EQ(pushed.groups.size(), 1u);
  EXPECT_EQ(pushed.groups[0].mechanism, Mechanism::kPeerFusedKernel);
  EXPECT_EQ(lane(pushed), "cuda:0/peer:cuda:1");
  const BatchPlan pulled = Plan(batch, Gpus(2), pull);
  ASSERT_EQ(pulled.groups.size(), 1u);
  EXPECT_EQ(pulled.groups[0].mechanism, Mechanism::kPeerFusedKernel);
  EXPECT_EQ(lane(pulled), "cuda:1/peer:cuda:0");
  // Only the destination can reach the source: it pulls all the same.
  Topology topology = Gpus(2, false);
  topology.peer_access = {{false, false}, {true, false}};
  EXPECT_EQ(lane(Plan(batch, topology)), "cuda:1/peer:cuda:0");
}

TEST(PlanBatchTest, PeerWithoutAccessIsStaged) {
  Batch batch;
  batch.Add(kGpu0, kGpu1, 64 * MiB, 2);
  batch.Add(kGpu0, kGpu1, 4 * KiB, 100);
  batch.Add(kGpu1, kGpu0, 1 * MiB, 1);
  for (const Topology& topology : {Gpus(2, /*peer=*/false), [] {
                                     Topology t = Gpus(2, true);
                                     t.peer_access = {{false, false}, {false, false}};
                                     return t;
                                   }()}) {
    const BatchPlan plan = Plan(batch, topology);
    ExpectConsistent(plan, batch.requests);
    ASSERT_EQ(plan.groups.size(), 2u);
    EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kStagedPeer);
    EXPECT_EQ(plan.groups[0].requests.size(), 102u);
    EXPECT_THAT(plan.groups[0].reason,
                HasSubstr("no peer access between cuda:0 and cuda:1"));
    EXPECT_EQ(plan.streams[plan.groups[0].stream].ToString(), "cuda:0/d2h");
    EXPECT_EQ(plan.streams[plan.groups[0].second_stream].ToString(), "cuda:1/h2d");
    EXPECT_EQ(plan.groups[1].src_device, kGpu1);
    EXPECT_EQ(plan.streams[plan.groups[1].stream].ToString(), "cuda:1/d2h");
    EXPECT_EQ(plan.streams[plan.groups[1].second_stream].ToString(), "cuda:0/h2d");
  }
}

TEST(PlanBatchTest, HostToHostIsMemcpyWithoutStream) {
  Batch batch;
  batch.Add(kCpu, kCpu, 100, 3).Add(kCpu, kCpu, 64 * MiB, 1, true, true);
  const BatchPlan plan = Plan(batch, Gpus(0, false));
  ExpectConsistent(plan, batch.requests);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kHostMemcpy);
  EXPECT_EQ(plan.groups[0].stream, -1);
  EXPECT_TRUE(plan.streams.empty());
}

// --- Streams, grouping, ToString ----------------------------------------------------

TEST(PlanBatchTest, StreamsPerDeviceAndLaneSoTrafficOverlaps) {
  Batch batch;
  batch
      .Add(kCpu, kGpu0, 8 * MiB, 1, true)         // 0: h2d cuda:0
      .Add(kGpu0, kCpu, 8 * MiB, 1, false, true)  // 1: d2h cuda:0
      .Add(kGpu0, kGpu0, 8 * MiB)                 // 2: d2d cuda:0
      .Add(kGpu0, kGpu1, 8 * MiB)                 // 3: peer 0 -> 1
      .Add(kGpu1, kGpu0, 8 * MiB)                 // 4: peer 1 -> 0
      .Add(kCpu, kGpu1, 8 * MiB, 1, true)         // 5: h2d cuda:1
      .Add(kCpu, kCpu, 8 * MiB);                  // 6: h2h
  const BatchPlan plan = Plan(batch, Gpus(2, true));
  ExpectConsistent(plan, batch.requests);
  std::vector<std::string> stream_of(batch.requests.size());
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const CopyGroup& g = plan.groups[plan.group_of_request[i]];
    stream_of[i] = g.stream < 0 ? "-" : plan.streams[g.stream].ToString();
  }
  EXPECT_THAT(stream_of,
              ElementsAre("cuda:0/h2d", "cuda:0/d2h", "cuda:0/d2d", "cuda:0/peer:cuda:1",
                          "cuda:1/peer:cuda:0", "cuda:1/h2d", "-"));
  EXPECT_EQ(plan.streams.size(), 6u);  // All distinct.
  // Groups come in direction order: h2h, h2d (cuda:0, cuda:1), d2h, d2d, peer.
  std::vector<std::string> order;
  for (const CopyGroup& g : plan.groups) {
    order.push_back(std::string(DirectionName(g.direction)) + " " +
                    g.src_device.ToString() + "->" + g.dst_device.ToString());
  }
  EXPECT_THAT(order, ElementsAre("h2h cpu->cpu", "h2d cpu->cuda:0", "h2d cpu->cuda:1",
                                 "d2h cuda:0->cpu", "d2d cuda:0->cuda:0",
                                 "peer cuda:0->cuda:1", "peer cuda:1->cuda:0"));
}

TEST(PlanBatchTest, GroupsDoNotDependOnRequestOrder) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 16 * KiB, 20)
      .Add(kCpu, kGpu1, 32 * MiB, 3)
      .Add(kGpu1, kGpu0, 2 * KiB, 9)
      .Add(kGpu0, kCpu, 3 * MiB, 5, false, true);
  const BatchPlan a = Plan(batch, Gpus(2, true, true));
  std::vector<CopyRequest> shuffled = batch.requests;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(42));
  const BatchPlan b = ValueOrThrow(PlanBatch(shuffled, Gpus(2, true, true), kOneBound));
  ExpectConsistent(b, shuffled);
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    EXPECT_EQ(a.groups[g].mechanism, b.groups[g].mechanism);
    EXPECT_EQ(a.groups[g].bytes, b.groups[g].bytes);
    EXPECT_EQ(a.groups[g].reason, b.groups[g].reason);
    EXPECT_EQ(a.streams[a.groups[g].stream], b.streams[b.groups[g].stream]);
  }
}

TEST(PlanBatchTest, ZeroByteRequestsArePlannedAsNothing) {
  std::vector<CopyRequest> requests = {
      {nullptr, kCpu, false, nullptr, kGpu0, false, 0},
      {At(0x1000), kGpu0, false, At(0x1000), kGpu0, false, 0},  // Same range, no bytes.
      {At(0x1000), kGpu0, false, At(0x9000), kGpu0, false, 16},
  };
  const BatchPlan plan = ValueOrThrow(PlanBatch(requests, Gpus(1)));
  ExpectConsistent(plan, requests);
  EXPECT_THAT(plan.group_of_request, ElementsAre(-1, -1, 0));
  EXPECT_EQ(plan.total_bytes, 16u);
  EXPECT_THAT(plan.ToString(), HasSubstr("3 requests (1 planned, 2 empty)"));
  const BatchPlan empty = ValueOrThrow(PlanBatch({}, Gpus(0, false)));
  EXPECT_TRUE(empty.groups.empty());
  EXPECT_THAT(empty.ToString(), HasSubstr("0 requests"));
}

TEST(PlanBatchTest, ToStringIsATable) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 16 * KiB, 1024).Add(kGpu0, kGpu1, 64 * MiB, 2);
  const std::string text = Plan(batch, Gpus(2, false)).ToString();
  EXPECT_THAT(text,
              HasSubstr("BatchPlan: 1026 requests (1026 planned, 0 empty), 144.0 MiB, "
                        "2 groups, 3 streams"));
  EXPECT_THAT(text, AllOf(HasSubstr("dir"), HasSubstr("mechanism"), HasSubstr("count"),
                          HasSubstr("stream"), HasSubstr("why")));
  std::vector<std::string> lines;
  for (size_t start = 0, end; start < text.size(); start = end + 1) {
    end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
  }
  ASSERT_GE(lines.size(), 4u);
  EXPECT_THAT(lines[2],
              AllOf(HasSubstr("d2d"), HasSubstr("cuda:0"), HasSubstr("fused_kernel"),
                    HasSubstr("1024"), HasSubstr("16.0 MiB"), HasSubstr("#0 cuda:0/d2d"),
                    HasSubstr("<= fused_device_max_bytes (256.0 KiB)")));
  EXPECT_THAT(lines[3],
              AllOf(HasSubstr("peer"), HasSubstr("cuda:1"), HasSubstr("staged_peer"),
                    HasSubstr("128.0 MiB"), HasSubstr("#1 cuda:0/d2h + #2 cuda:1/h2d"),
                    HasSubstr("no peer access")));
  EXPECT_THAT(text, HasSubstr("stream #2: cuda:1/h2d"));
}

TEST(PlanBatchTest, RandomBatchesAreConsistent) {
  std::mt19937 rng(7);
  const Device devices[] = {kCpu, kGpu0, kGpu1, Device::Cuda(2)};
  for (int round = 0; round < 50; ++round) {
    Batch batch;
    const int n = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) {
      const size_t bytes = rng() % 5 == 0 ? 0 : size_t{1} << (rng() % 28);
      batch.Add(devices[rng() % 4], devices[rng() % 4], bytes, 1, rng() % 2, rng() % 2);
    }
    const BatchPlan plan = Plan(batch, Gpus(3, round % 2 == 0, round % 3 == 0));
    SCOPED_TRACE(plan.ToString());
    ExpectConsistent(plan, batch.requests);
  }
}

// --- Errors -------------------------------------------------------------------------

void ExpectInvalid(const std::vector<CopyRequest>& requests, const Topology& topology,
                   const std::vector<std::string>& fragments) {
  absl::StatusOr<BatchPlan> plan = PlanBatch(requests, topology);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  for (const std::string& f : fragments)
    EXPECT_THAT(MessageOf(plan.status()), HasSubstr(f));
}

// The one-pass scan proves the usual batch valid; whatever it cannot prove goes through
// the full checks. Addresses at or above 2^62 always take the full checks, so the same
// batch moved up there is the reference: the outcome, and the whole plan, must match.
std::vector<CopyRequest> MovedUp(std::vector<CopyRequest> requests) {
  constexpr uintptr_t kUp = uintptr_t{1} << 62;
  for (CopyRequest& r : requests) {
    if (r.src != nullptr) r.src = static_cast<const char*>(r.src) + kUp;
    if (r.dst != nullptr) r.dst = static_cast<char*>(r.dst) + kUp;
  }
  return requests;
}

// The request named by an error ("request 3 (cpu -> cuda:0, 16 bytes)"), without the
// addresses that follow.
std::string ErrorHead(const absl::Status& status) {
  const std::string message = MessageOf(status);
  return message.substr(0, message.find(')') + 1);
}

void ExpectSameAsFullChecks(const std::vector<CopyRequest>& requests,
                            const Topology& topology, const PlanOptions& options = {}) {
  const absl::StatusOr<BatchPlan> fast = PlanBatch(requests, topology, options);
  const absl::StatusOr<BatchPlan> full = PlanBatch(MovedUp(requests), topology, options);
  ASSERT_EQ(fast.status().code(), full.status().code())
      << fast.status() << " / " << full.status();
  if (!fast.ok()) {
    EXPECT_EQ(ErrorHead(fast.status()), ErrorHead(full.status()));
    return;
  }
  ExpectConsistent(*fast, requests);
  EXPECT_EQ(fast->group_of_request, full->group_of_request);
  EXPECT_EQ(fast->total_bytes, full->total_bytes);
  EXPECT_EQ(fast->streams, full->streams);
  ASSERT_EQ(fast->groups.size(), full->groups.size());
  for (size_t g = 0; g < fast->groups.size(); ++g) {
    EXPECT_EQ(fast->groups[g].mechanism, full->groups[g].mechanism);
    EXPECT_EQ(fast->groups[g].requests, full->groups[g].requests);
    EXPECT_EQ(fast->groups[g].reason, full->groups[g].reason);
    EXPECT_EQ(fast->groups[g].stream, full->groups[g].stream);
  }
}

TEST(PlanBatchTest, OnePassAgreesWithTheFullChecks) {
  std::mt19937 rng(11);
  const Device devices[] = {kCpu, kGpu0, kGpu1};
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE(round);
    // Copies of one size or of many, gathered from one buffer into another (each in
    // address order), then disturbed in one way or another.
    const int n = 1 + static_cast<int>(rng() % 64);
    const bool one_size = rng() % 2 == 0;
    const bool one_pair = rng() % 2 == 0;
    const Device src_device = devices[rng() % 3];
    const Device dst_device = devices[rng() % 3];
    uintptr_t src = 0x100000, dst = 0x40000000;
    std::vector<CopyRequest> requests;
    for (int i = 0; i < n; ++i) {
      const size_t bytes = one_size ? 4096 : 1 + rng() % 100000;
      const Device s = one_pair ? src_device : devices[rng() % 3];
      const Device d = one_pair ? dst_device : devices[rng() % 3];
      requests.push_back({At(src), s, s.is_cpu(), At(dst), d, d.is_cpu(), bytes});
      src += bytes + (rng() % 2) * 512;
      dst += bytes + (rng() % 2) * 512;
    }
    const auto any = [&] { return static_cast<size_t>(rng() % n); };
    switch (rng() % 10) {
      case 0:  // Two requests swapped: destinations out of order, still disjoint.
        std::swap(requests[any()], requests[any()]);
        break;
      case 1:  // A destination onto another request's source or destination.
        requests[any()].dst = const_cast<void*>(requests[any()].src);
        break;
      case 2:
        requests[any()].dst = static_cast<char*>(requests[any()].dst) + rng() % 64;
        break;
      case 3:  // Empty requests, some with null pointers.
        for (int k = 0; k < 3; ++k) {
          CopyRequest& r = requests[any()];
          r.bytes = 0;
          if (rng() % 2 == 0) r.src = r.dst = nullptr;
        }
        break;
      case 4:  // A null pointer with bytes.
        if (rng() % 2 == 0) {
          requests[any()].dst = nullptr;
        } else {
          requests[any()].src = nullptr;
        }
        break;
      case 5:  // Sources among the destinations.
        requests[any()].src = static_cast<char*>(requests[any()].dst) + 4096 * (rng() % 3);
        break;
      case 7:  // Sources on both sides of the destinations (a gather into a buffer
               // among them): the spans meet, no source is within the destinations.
        for (CopyRequest& r : requests) {
          if (rng() % 2 == 0) r.src = static_cast<char*>(const_cast<void*>(r.src)) + 0x80000000;
        }
        break;
      case 6:  // Sources and destinations swapped in one request.
        if (requests[0].src_device == requests[0].dst_device) {
          const void* old_src = requests[0].src;
          requests[0].src = requests[0].dst;
          requests[0].dst = const_cast<void*>(old_src);
        }
        break;
      default:  // As built.
        break;
    }
    ExpectSameAsFullChecks(requests, Gpus(2, round % 2 == 0, round % 3 == 0));
  }
}

TEST(PlanBatchTest, OnePassEdgeCases) {
  Batch batch;
  batch.Add(kGpu0, kGpu0, 16 * KiB, 32);
  // A run whose first request is empty, with null pointers.
  std::vector<CopyRequest> requests = batch.requests;
  requests[0] = {nullptr, kGpu0, false, nullptr, kGpu0, false, 0};
  ExpectSameAsFullChecks(requests, Gpus(1));
  EXPECT_TRUE(PlanBatch(requests, Gpus(1)).ok());
  // A null destination inside a run, after valid ones.
  requests = batch.requests;
  requests[20].dst = nullptr;
  ExpectInvalid(requests, Gpus(1), {"request 20", "destination pointer is null"});
  ExpectSameAsFullChecks(requests, Gpus(1));
  // A destination range that wraps inside a run, followed by one in order.
  requests = batch.requests;
  requests[10].dst = At(UINTPTR_MAX - 100);
  ExpectInvalid(requests, Gpus(1), {"request 10", "wraps around the address space"});
  // Destinations in order within each run but not across runs on one device: the
  // second half comes from pinned host memory, and goes first.
  requests = batch.requests;
  for (size_t i = 16; i < requests.size(); ++i) {
    requests[i].src_device = kCpu;
    requests[i].src_pinned = true;
  }
  std::rotate(requests.begin(), requests.begin() + 16, requests.end());
  ExpectSameAsFullChecks(requests, Gpus(1));
  EXPECT_TRUE(PlanBatch(requests, Gpus(1)).ok());
  // The pinning of a device side is ignored: one run, one group.
  requests = batch.requests;
  for (size_t i = 0; i < requests.size(); i += 3) requests[i].dst_pinned = true;
  ExpectSameAsFullChecks(requests, Gpus(1));
  const BatchPlan mixed_flags = ValueOrThrow(PlanBatch(requests, Gpus(1)));
  ASSERT_EQ(mixed_flags.groups.size(), 1u);
  EXPECT_EQ(mixed_flags.groups[0].requests.size(), requests.size());
  // Addresses at 2^62 and above are planned like any other.
  requests = MovedUp(batch.requests);
  const BatchPlan plan = ValueOrThrow(PlanBatch(requests, Gpus(1)));
  ExpectConsistent(plan, requests);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].mechanism, Mechanism::kFusedKernel);
}

TEST(PlanBatchErrorTest, NullPointerWithBytes) {
  std::vector<CopyRequest> requests = {
      {At(0x1000), kGpu0, false, At(0x2000), kGpu0, false, 16},
      {nullptr, kCpu, true, At(0x3000), kGpu0, false, 16},
  };
  ExpectInvalid(requests, Gpus(1),
                {"request 1 (cpu -> cuda:0, 16 bytes)", "source pointer is null"});
  requests[1] = {At(0x3000), kGpu0, false, nullptr, kCpu, false, 8};
  ExpectInvalid(requests, Gpus(1),
                {"request 1 (cuda:0 -> cpu, 8 bytes)", "destination pointer is null"});
}

TEST(PlanBatchErrorTest, DeviceOutOfRange) {
  std::vector<CopyRequest> requests = {
      {At(0x1000), kGpu0, false, At(0x2000), kGpu0, false, 16},
      {At(0x1000), kGpu0, false, At(0x2000), Device::Cuda(5), false, 16},
  };
  ExpectInvalid(
      requests, Gpus(2),
      {"request 1 (cuda:0 -> cuda:5, 16 bytes)",
       "destination device cuda:5 is out of range: the topology has 2 CUDA devices"});
  requests[1] = {At(0x1000), Device::Cuda(2), false, At(0x2000), kCpu, false, 0};
  ExpectInvalid(requests, Gpus(2),
                {"request 1 (cuda:2 -> cpu, 0 bytes)", "source device"});
  // No GPUs at all.
  ExpectInvalid({{At(0x1000), kCpu, false, At(0x2000), kGpu0, false, 1}}, Gpus(0, false),
                {"request 0", "has 0 CUDA devices"});
}

TEST(PlanBatchErrorTest, SourceAndDestinationOverlapInOneRequest) {
  std::vector<CopyRequest> requests = {
      {At(0x1000), kGpu0, false, At(0x1010), kGpu0, false, 32},
  };
  ExpectInvalid(
      requests, Gpus(1),
      {"request 0 (cuda:0 -> cuda:0, 32 bytes)",
       "source [0x1000, 0x1020) and destination [0x1010, 0x1030) overlap on cuda:0"});
  // The same addresses on different devices are different memory.
  requests[0].dst_device = kGpu1;
  EXPECT_TRUE(PlanBatch(requests, Gpus(2)).ok());
  // Touching ranges do not overlap.
  requests[0] = {At(0x1000), kCpu, false, At(0x1020), kCpu, false, 32};
  EXPECT_TRUE(PlanBatch(requests, Gpus(0, false)).ok());
}

TEST(PlanBatchErrorTest, DestinationOverlapsAnotherDestination) {
  std::vector<CopyRequest> requests = {
      {At(0x100000), kGpu0, false, At(0x2000), kGpu1, false, 0x100},
      {At(0x200000), kGpu0, false, At(0x5000), kGpu1, false, 0x100},
      {At(0x300000), kCpu, false, At(0x20f0), kGpu1, false, 0x100},
  };
  ExpectInvalid(
      requests, Gpus(2),
      {"request 2 (cpu -> cuda:1, 256 bytes)", "destination [0x20f0, 0x21f0) on cuda:1",
       "overlaps the destination [0x2000, 0x2100) of request 0 (cuda:0 -> cuda:1, "
       "256 bytes)"});
  // A destination inside a much longer one that is not its neighbour in start order.
  requests = {
      {At(0x100000), kGpu0, false, At(0x1000), kGpu0, false, 0x10000},
      {At(0x200000), kGpu0, false, At(0x2000), kGpu0, false, 0x10},
      {At(0x300000), kGpu0, false, At(0x8000), kGpu0, false, 0x10},
  };
  ExpectInvalid(requests, Gpus(1), {"request 1", "of request 0"});
}

TEST(PlanBatchErrorTest, DestinationOverlapsAnotherSource) {
  std::vector<CopyRequest> requests = {
      {At(0x1000), kCpu, false, At(0x8000), kGpu0, false, 0x100},
      {At(0x9000), kGpu0, false, At(0x1080), kCpu, false, 0x100},
  };
  ExpectInvalid(
      requests, Gpus(1),
      {"request 1 (cuda:0 -> cpu, 256 bytes)", "destination [0x1080, 0x1180) on cpu",
       "overlaps the source [0x1000, 0x1100) of request 0 (cpu -> cuda:0, 256 bytes)"});
  // Sources may overlap each other (both only read).
  requests[1] = {At(0x1080), kCpu, false, At(0x9000), kGpu0, false, 0x100};
  EXPECT_TRUE(PlanBatch(requests, Gpus(1)).ok());
  // A destination ending where another request's source begins, or starting where it
  // ends, does not overlap it.
  requests[1] = {At(0x9000), kGpu0, false, At(0x0f00), kCpu, false, 0x100};
  EXPECT_TRUE(PlanBatch(requests, Gpus(1)).ok());
  requests[1] = {At(0x9000), kGpu0, false, At(0x1100), kCpu, false, 0x100};
  EXPECT_TRUE(PlanBatch(requests, Gpus(1)).ok());
  // The same on another device is other memory.
  requests[1] = {At(0x1080), kGpu0, false, At(0x1080), kGpu1, false, 0x100};
  EXPECT_TRUE(PlanBatch(requests, Gpus(2)).ok());
}

TEST(PlanBatchErrorTest, OfSeveralOverlappedSourcesTheFirstInTheBatchIsNamed) {
  // Sources and destinations out of address order, as in a shuffled batch: requests
  // 1 and 2 have their sources overlapped (by the destinations of 3 and 0); request 1's
  // source has the higher address, and it is the one named.
  std::vector<CopyRequest> requests = {
      {At(0x50000), kGpu0, false, At(0x30000), kGpu0, false, 0x100},
      {At(0x70000), kGpu0, false, At(0x10000), kGpu0, false, 0x100},
      {At(0x30080), kGpu0, false, At(0x90000), kGpu0, false, 0x100},
      {At(0x60000), kGpu0, false, At(0x70010), kGpu0, false, 0x10},
  };
  ExpectInvalid(requests, Gpus(1),
                {"request 3 (cuda:0 -> cuda:0, 16 bytes)",
                 "destination [0x70010, 0x70020) on cuda:0",
                 "overlaps the source [0x70000, 0x70100) of request 1"});
  // Without that one, request 2's.
  requests[3].dst = At(0xa0000);
  ExpectInvalid(requests, Gpus(1),
                {"request 0", "overlaps the source [0x30080, 0x30180) of request 2"});
  // Many disjoint pieces, sources between the destinations, in a scrambled order: none.
  requests.clear();
  for (uintptr_t i = 0; i < 64; ++i) {
    const uintptr_t k = (i * 37) % 64;
    requests.push_back({At(0x100000 + k * 0x200), kGpu0, false,
                        At(0x100000 + k * 0x200 + 0x100), kGpu0, false, 0x100});
  }
  EXPECT_TRUE(PlanBatch(requests, Gpus(1)).ok());
}

TEST(PlanBatchErrorTest, RangeWrapsAround) {
  std::vector<CopyRequest> requests = {
      {At(UINTPTR_MAX - 15), kCpu, false, At(0x1000), kGpu0, false, 32},
  };
  ExpectInvalid(requests, Gpus(1), {"request 0", "wraps around the address space"});
}

TEST(PlanBatchErrorTest, TotalSizeOverflows) {
  // Each destination fits its device; together they exceed size_t. The sources are
  // the same host range, which is allowed (only read).
  const size_t half = (SIZE_MAX >> 1) + 1;
  std::vector<CopyRequest> requests = {
      {At(0x1000), kCpu, false, At(0x1000), kGpu0, false, half},
      {At(0x1000), kCpu, false, At(0x1000), kGpu1, false, half},
  };
  ExpectInvalid(requests, Gpus(2), {"request 1 (cpu -> cuda:1", "total size overflows"});
}

TEST(PlanBatchErrorTest, MalformedTopology) {
  Topology t = Gpus(2);
  t.device_count = -1;
  t.peer_access.clear();
  ExpectInvalid({}, t, {"device_count is -1"});
  t = Gpus(2);
  t.peer_access.pop_back();
  ExpectInvalid({}, t, {"peer_access has 1 rows for 2 devices"});
  t = Gpus(2);
  t.peer_access[1].push_back(true);
  ExpectInvalid({}, t, {"peer_access row 1 has 3 entries for 2 devices"});
}

TEST(MakeRequestsTest, ZipsListsOfEqualLength) {
  int a = 0, b = 0;
  const std::vector<SrcBuffer> srcs = {{&a, kCpu, true}, {&b, kGpu0, false}};
  const std::vector<DstBuffer> dsts = {{&b, kGpu1, false}, {&a, kCpu, true}};
  const std::vector<size_t> sizes = {4, 8};
  const std::vector<CopyRequest> r = ValueOrThrow(MakeRequests(srcs, dsts, sizes));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].src, &a);
  EXPECT_EQ(r[0].src_device, kCpu);
  EXPECT_TRUE(r[0].src_pinned);
  EXPECT_EQ(r[0].dst, &b);
  EXPECT_EQ(r[0].dst_device, kGpu1);
  EXPECT_FALSE(r[0].dst_pinned);
  EXPECT_EQ(r[0].bytes, 4u);
  EXPECT_EQ(r[1].src_device, kGpu0);
  EXPECT_TRUE(r[1].dst_pinned);
  EXPECT_EQ(r[1].bytes, 8u);
}

TEST(MakeRequestsTest, DifferentLengthsNameAllThree) {
  int a = 0;
  const std::vector<SrcBuffer> srcs = {{&a, kCpu}, {&a, kCpu}, {&a, kCpu}};
  const std::vector<DstBuffer> dsts = {{&a, kCpu}, {&a, kCpu}};
  const std::vector<size_t> sizes = {1, 2, 3};
  absl::StatusOr<std::vector<CopyRequest>> r = MakeRequests(srcs, dsts, sizes);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(r.status()), HasSubstr("3 sources, 2 destinations and 3 sizes"));
  r = MakeRequests(srcs, {}, {1});
  EXPECT_THAT(MessageOf(r.status()), HasSubstr("3 sources, 0 destinations and 1 sizes"));
  EXPECT_TRUE(MakeRequests({}, {}, {}).ok());
}

}  // namespace
}  // namespace genesis::transfer
