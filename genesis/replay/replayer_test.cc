#include "genesis/replay/replayer.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/test_backend.h"
#include "genesis/replay/synthetic_trace.h"
#include "genesis/replay/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::replay {
namespace {

using memory::AllocatorOptions;
using memory::CachingAllocator;
using memory::kMiB;
using memory::TestBackend;
using ::testing::HasSubstr;

std::vector<TraceEvent> Parse(const std::string &text) {
  auto events = ParseTrace(text, "test");
  EXPECT_TRUE(events.ok()) << events.status();
  return events.ok() ? *events : std::vector<TraceEvent>();
}

std::unique_ptr<CachingAllocator> FakeCudaPool(size_t capacity = memory::kNoLimit) {
  auto pool =
      CachingAllocator::Create(TestBackend::FakeCuda(capacity), AllocatorOptions());
  EXPECT_TRUE(pool.ok()) << pool.status();
  return std::move(pool).value();
}

TEST(ReplayTest, HandWrittenTrace) {
  // Default options: 1000 B rounds to 1 KiB in a 2 MiB small segment; 3 MiB
  // shares a 20 MiB large segment; 18 MiB does not fit the 17 MiB left there
  // and gets a segment of its own (above the 10 MiB threshold).
  const std::vector<TraceEvent> events = Parse(
      "alloc 0x1000 1000 0\n"     // line 1: small segment (backend call 1)
      "alloc 0x2000 3145728 0\n"  // line 2: large segment (2)
      "free_requested 0x1000 1000 0\n"
      "free_completed 0x1000 1000 0\n"
      "alloc 0x3000 1000 0\n"      // reuses the freed block
      "alloc 0x4000 18874368 0\n"  // own segment (3); the peak
      "free_completed 0x2000 3145728 0\n"
      "free_completed 0x4000 0 0\n");  // 0x3000 stays live
  auto pool = FakeCudaPool();
  auto r = Replay(events, *pool, ReplayOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_ops, 7u);
  EXPECT_EQ(r->peak_allocated, 1024u + 3 * kMiB + 18 * kMiB);
  EXPECT_EQ(r->peak_reserved, 2 * kMiB + 20 * kMiB + 18 * kMiB);
  EXPECT_DOUBLE_EQ(r->reserved_over_allocated,
                   static_cast<double>(40 * kMiB) / (1024 + 21 * kMiB));
  EXPECT_EQ(r->segment_allocs, 3);
  EXPECT_EQ(r->segment_frees, 0);
  EXPECT_EQ(r->backend_calls, 3);
  EXPECT_EQ(r->trace_peak_live, 1000u + 3 * kMiB + 18 * kMiB);
  EXPECT_EQ(r->live_at_end, 1);
  EXPECT_GT(r->ns_per_op, 0.0);
  EXPECT_EQ(r->final_stats.all.allocated_bytes.current, 0);
  EXPECT_EQ(r->final_stats.num_allocations, 4);
  EXPECT_EQ(pool->Stats().all.allocated_bytes.current, 0);
}

TEST(ReplayTest, PassesTheTraceStreamToThePool) {
  const std::vector<TraceEvent> events =
      Parse("alloc 0x1000 4096 0x7\nfree_completed 0x1000 4096 7\n");
  auto pool = FakeCudaPool();
  ASSERT_TRUE(Replay(events, *pool).ok());
  auto segments = pool->Snapshot();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].stream, 7u);
}

TEST(ReplayTest, KeepsBlocksThePoolHeldBefore) {
  auto pool = FakeCudaPool();
  auto mine = pool->Allocate(5000);
  ASSERT_TRUE(mine.ok());
  auto r = Replay(Parse("alloc 0x1000 100 0\nalloc 0x2000 200 0\n"), *pool);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->live_at_end, 2);
  EXPECT_EQ(r->peak_allocated, 5120u + 512 + 512);
  EXPECT_TRUE(pool->Owns(*mine));
  EXPECT_TRUE(pool->Free(*mine).ok());
}

TEST(ReplayTest, EmptyTrace) {
  auto r = ReplayOnHost({}, AllocatorOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_ops, 0u);
  EXPECT_EQ(r->peak_allocated, 0u);
  EXPECT_EQ(r->reserved_over_allocated, 0.0);
  EXPECT_EQ(r->ns_per_op, 0.0);
}

TEST(ReplayTest, InconsistentEventsNameTheLine) {
  // Events made in code are not checked by ParseTrace; Replay checks them
  // itself.
  std::vector<TraceEvent> events = {
      {TraceAction::kAlloc, 0x100, 10, 0, 1},
      {TraceAction::kAlloc, 0x100, 10, 0, 2},
  };
  ReplayOptions options;
  options.name = "mine.trace";
  auto r = ReplayOnHost(events, AllocatorOptions(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("mine.trace:2: alloc of 0x100, which is still live"));

  events = {{TraceAction::kAlloc, 0x100, 10, 0, 1},
            {TraceAction::kFreeCompleted, 0x200, 10, 0, 9}};
  r = ReplayOnHost(events, AllocatorOptions(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("mine.trace:9: free_completed of 0x200, which is not live"));
}

TEST(ReplayTest, OutOfMemoryNamesTheLineAndFreesWhatItHeld) {
  const std::vector<TraceEvent> events = Parse(
      "alloc 0x1000 1000 0\n"
      "alloc 0x2000 33554432 0\n"
      "# the next one does not fit in 64 MiB\n"
      "alloc 0x3000 41943040 0\n");
  auto pool = FakeCudaPool(64 * kMiB);
  ReplayOptions options;
  options.name = "big.trace";
  auto r = Replay(events, *pool, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("big.trace:4: alloc of 41943040 bytes"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("CUDA OOM"));
  EXPECT_EQ(pool->Stats().all.allocated_bytes.current, 0);
}

TEST(ReplayTest, BadPoolOptionsAreAnError) {
  AllocatorOptions bad;
  bad.block_rounding = 1000;
  auto r = ReplayOnHost(Parse("alloc 0x1000 1 0\n"), bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OverlapCheckerTest, FindsOverlapsAndAcceptsNeighbours) {
  OverlapChecker c;
  ASSERT_TRUE(c.Insert(0x1000, 0x100, 1).ok());
  ASSERT_TRUE(c.Insert(0x1100, 0x100, 2).ok());  // touches the end of the first
  ASSERT_TRUE(c.Insert(0x0f00, 0x100, 3).ok());  // touches the start
  ASSERT_TRUE(c.Insert(0x3000, 0, 4).ok());      // a 0-byte block takes one byte

  // Overlaps with the previous range, the next one, one inside, one around.
  for (auto [begin, size] : {std::pair<uintptr_t, uint64_t>{0x10ff, 1},
                             {0x0e00, 0x101},
                             {0x1010, 0x10},
                             {0x0e00, 0x1000},
                             {0x3000, 1},
                             {0x2fff, 2}}) {
    absl::Status s = c.Insert(begin, size, 9);
    ASSERT_FALSE(s.ok()) << std::hex << begin << " " << size;
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(std::string(s.message()), HasSubstr("overlaps live block"));
  }
  absl::Status s = c.Insert(0x1080, 8, 9);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("[0x1080, 0x1088) overlaps live block [0x1000, 0x1100) allocated "
                        "at line 1"));
  EXPECT_EQ(c.size(), 4u);

  EXPECT_TRUE(c.Erase(0x1000).ok());
  EXPECT_TRUE(c.Insert(0x1080, 8, 10).ok());  // free now
  absl::Status e = c.Erase(0x1000);
  EXPECT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.message()),
              HasSubstr("free of 0x1000, which is not a live block"));
}

// A trace whose replay through a correct pool would overlap: the checker, fed
// what a broken pool would return (the same pointer twice while both are live),
// says so.
TEST(OverlapCheckerTest, CatchesABlockHandedOutTwice) {
  OverlapChecker c;
  ASSERT_TRUE(c.Insert(0x7f0000000000, 1 << 20, 1).ok());
  absl::Status s = c.Insert(0x7f0000000000 + (1 << 19), 4096, 2);
  EXPECT_FALSE(s.ok());
}

struct SyntheticCase {
  const char *name;
  std::vector<TraceEvent> (*make)(uint64_t, int);
  memory::ExpandableSegments segments;
  // Bound on peak_reserved / peak_allocated with otherwise default options for
  // seed 1, 8 steps: the measured ratio rounded up to 0.01.
  double max_ratio;
};

class SyntheticReplayTest : public ::testing::TestWithParam<SyntheticCase> {};

TEST_P(SyntheticReplayTest, ReplaysWithoutOverlapOrLeak) {
  const SyntheticCase &c = GetParam();
  const std::vector<TraceEvent> events = c.make(1, 8);
  EXPECT_GE(events.size(), 5000u);
  EXPECT_LE(events.size(), 100000u);

  const TraceSummary summary = SummarizeTrace(events);
  ReplayOptions options;
  options.name = c.name;
  AllocatorOptions pool_options;
  pool_options.expandable_segments = c.segments;
  auto r = ReplayOnHost(events, pool_options, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_ops, static_cast<uint64_t>(summary.num_allocs + summary.num_frees));
  EXPECT_EQ(r->live_at_end, summary.live_blocks_at_end);
  EXPECT_GT(r->live_at_end, 0);
  EXPECT_EQ(r->trace_peak_live, summary.peak_live_bytes);
  EXPECT_GE(r->peak_allocated, r->trace_peak_live);
  EXPECT_GE(r->peak_reserved, r->peak_allocated);
  EXPECT_EQ(r->final_stats.all.allocated_bytes.current, 0);
  EXPECT_EQ(r->final_stats.num_allocations, summary.num_allocs);
  EXPECT_GT(r->backend_calls, 0);
  EXPECT_EQ(r->maps > 0, c.segments == memory::ExpandableSegments::kOn);
  EXPECT_LE(r->reserved_over_allocated, c.max_ratio)
      << c.name << ": peak reserved " << r->peak_reserved << ", peak allocated "
      << r->peak_allocated;
  std::cout << c.name << ": " << events.size() << " events, peak allocated "
            << r->peak_allocated << ", peak reserved " << r->peak_reserved << ", ratio "
            << r->reserved_over_allocated << ", backend calls " << r->backend_calls
            << " (" << r->maps << " maps, " << r->unmaps << " unmaps), " << r->ns_per_op
            << " ns/op\n";
}

constexpr auto kClassic = memory::ExpandableSegments::kOff;
constexpr auto kExpandable = memory::ExpandableSegments::kOn;

INSTANTIATE_TEST_SUITE_P(
    Traces, SyntheticReplayTest,
    // The recorded traces' targets (below) are for training recorded in PyTorch; these
    // bounds only hold the synthetic figures where they are (transformer 1.0188 and CNN
    // 1.0357 with classic segments, 1.0103 and 1.0194 with expandable ones; CNN 1.0151
    // with expandable_min_map:0).
    ::testing::Values(SyntheticCase{"transformer", &TransformerTrainingTrace, kClassic, 1.03},
                      SyntheticCase{"cnn", &CnnTrainingTrace, kClassic, 1.045},
                      SyntheticCase{"transformer_expandable", &TransformerTrainingTrace,
                                    kExpandable, 1.015},
                      SyntheticCase{"cnn_expandable", &CnnTrainingTrace, kExpandable, 1.02}),
    [](const ::testing::TestParamInfo<SyntheticCase> &info) {
      return std::string(info.param.name);
    });

// The replay's peak allocated bytes are the pool's statistics; check them against the
// largest sum of live block sizes, counted here block by block, on traces where most
// allocations are thread-cache hits.
TEST(ReplayTest, PeakAllocatedIsTheLargestSumOfLiveBlocks) {
  for (const auto &events : {TransformerTrainingTrace(3, 3), CnnTrainingTrace(3, 3)}) {
    for (auto segments : {kClassic, kExpandable}) {
      AllocatorOptions pool_options;
      pool_options.expandable_segments = segments;
      auto replayed = ReplayOnHost(events, pool_options);
      ASSERT_TRUE(replayed.ok()) << replayed.status();

      auto pool = CachingAllocator::Create(
          TestBackend::FakeCuda(kDefaultReplayCapacity, segments != kClassic), pool_options);
      ASSERT_TRUE(pool.ok()) << pool.status();
      std::map<uint64_t, void *> live;
      int64_t sum = 0;
      int64_t peak = 0;
      for (const TraceEvent &e : events) {
        if (e.action == TraceAction::kAlloc) {
          void *p = *(*pool)->Allocate(e.size);
          live[e.address] = p;
          sum += static_cast<int64_t>((*pool)->AllocationSize(p));
          peak = std::max(peak, sum);
        } else if (e.action == TraceAction::kFreeCompleted) {
          void *p = live.at(e.address);
          sum -= static_cast<int64_t>((*pool)->AllocationSize(p));
          ASSERT_TRUE((*pool)->Free(p).ok());
          live.erase(e.address);
        }
      }
      EXPECT_EQ((*pool)->Stats().all.allocated_bytes.peak, peak);
      EXPECT_EQ(static_cast<int64_t>(replayed->peak_allocated), peak);
      for (const auto &[address, p] : live) ASSERT_TRUE((*pool)->Free(p).ok());
    }
  }
}

TEST(ReplayTest, ReportsEachStep) {
  const std::vector<TraceEvent> events = TransformerTrainingTrace(2, 3);
  AllocatorOptions pool_options;
  pool_options.expandable_segments = kExpandable;
  auto r = ReplayOnHost(events, pool_options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->steps.size(), 4u);  // Setup (parameters) and three training steps.
  uint64_t ops = 0;
  int64_t maps = 0, unmaps = 0, reservations = 0;
  for (size_t i = 0; i < r->steps.size(); ++i) {
    const StepResult &s = r->steps[i];
    EXPECT_EQ(s.step, static_cast<int>(i));
    EXPECT_GT(s.num_ops, 0u);
    EXPECT_GT(s.ns_per_op, 0.0);
    ops += s.num_ops;
    maps += s.maps;
    unmaps += s.unmaps;
    reservations += s.segment_allocs;
  }
  EXPECT_EQ(ops, r->num_ops);
  EXPECT_EQ(maps, r->maps);
  EXPECT_EQ(unmaps, r->unmaps);
  EXPECT_EQ(reservations, r->segment_allocs);
  EXPECT_GT(r->steps[0].maps, 0);  // The parameters need memory.

  // Without markers, one step: no per-step figures.
  std::vector<TraceEvent> unmarked = events;
  for (TraceEvent &e : unmarked) e.step = 0;
  auto plain = ReplayOnHost(unmarked, pool_options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->steps.empty());
  EXPECT_EQ(plain->maps, r->maps);
}

TEST(SyntheticTraceTest, DeterministicPerSeed) {
  auto a = TransformerTrainingTrace(5, 3);
  auto b = TransformerTrainingTrace(5, 3);
  EXPECT_EQ(FormatTrace(a), FormatTrace(b));
  EXPECT_EQ(FormatTrace(CnnTrainingTrace(5, 3)), FormatTrace(CnnTrainingTrace(5, 3)));
  // Over 8 steps, different seeds draw different batch sizes.
  EXPECT_NE(FormatTrace(CnnTrainingTrace(1, 8)), FormatTrace(CnnTrainingTrace(2, 8)));
  EXPECT_TRUE(TransformerTrainingTrace(1, 0).size() > 0);  // parameters only
}

// The traces recorded with PyTorch (traces/); skipped when the files are not
// there (run from the repository root, or with //traces as data under Bazel).
// Peak reserved / peak allocated: PyTorch's own allocator reached 1.114 (GPT-2) and
// 1.299 (ResNet-50) on the same steps, and 1.070 / 1.021 with its expandable
// segments. Classic segments stay under 1.10 (they release fully free segments before
// growing past their high-water mark). Expandable segments (the default where virtual
// memory exists) mapping just what each request needs stay under PyTorch's expandable
// segments (1.03, 1.02); mapping ahead (expandable_min_map, 16 MiB by default) trades
// a little of that for fewer driver calls (1.04, 1.025) and must map fewer times.
TEST(RecordedTraceTest, KeepsLessIdleMemoryThanPyTorch) {
  struct Recorded {
    const char *path;
    memory::ExpandableSegments segments;
    size_t min_map;
    double max_ratio;
    // Steps in the trace (tools/record_torch_trace.py's --steps), for the
    // virtual-memory calls per step.
    int steps;
  };
  constexpr size_t kMinMap = AllocatorOptions{}.expandable_min_map;
  std::map<std::string, int64_t> exact_maps;
  std::map<std::string, int64_t> ahead_maps;
  for (const Recorded &t :
       {Recorded{"traces/gpt2_small_train.trace.gz", kExpandable, 0, 1.03, 8},
        Recorded{"traces/resnet50_train.trace.gz", kExpandable, 0, 1.02, 8},
        Recorded{"traces/gpt2_small_train.trace.gz", kExpandable, kMinMap, 1.04, 8},
        Recorded{"traces/resnet50_train.trace.gz", kExpandable, kMinMap, 1.025, 8},
        Recorded{"traces/gpt2_small_train.trace.gz", kClassic, kMinMap, 1.10, 8},
        Recorded{"traces/resnet50_train.trace.gz", kClassic, kMinMap, 1.10, 8}}) {
    if (!std::ifstream(t.path).good()) {
      GTEST_SKIP() << t.path << " not found from "
                   << "the working directory";
    }
    auto events = ReadTrace(t.path);
    ASSERT_TRUE(events.ok()) << events.status();
    ReplayOptions options;
    options.name = t.path;
    AllocatorOptions pool_options;
    pool_options.expandable_segments = t.segments;
    pool_options.expandable_min_map = t.min_map;
    auto r = ReplayOnHost(*events, pool_options, options);
    ASSERT_TRUE(r.ok()) << r.status();
    if (t.segments == kExpandable) {
      (t.min_map == 0 ? exact_maps : ahead_maps)[t.path] = r->maps;
    }
    EXPECT_LE(r->reserved_over_allocated, t.max_ratio) << t.path;
    EXPECT_EQ(r->final_stats.all.allocated_bytes.current, 0);
    // The recorded traces mark their steps (setup and 8 training steps). Once every
    // batch shape has been seen (steps 1-3), a step costs few backend calls, and most
    // cost none: the layout has settled.
    ASSERT_EQ(r->steps.size(), static_cast<size_t>(t.steps + 1)) << t.path;
    int quiet_steps = 0;
    for (const StepResult &s : r->steps) {
      const int64_t calls = s.maps + s.unmaps + s.segment_allocs + s.segment_frees;
      if (s.step > 3) {
        EXPECT_LE(calls, 25) << t.path << " step " << s.step;
        quiet_steps += calls == 0 ? 1 : 0;
      }
      std::cout << "  step " << s.step << ": " << s.num_ops << " ops, " << s.maps
                << " maps, " << s.unmaps << " unmaps, " << s.segment_allocs << "+"
                << s.segment_frees << " segment calls\n";
    }
    EXPECT_GE(quiet_steps, 3) << t.path;
    std::cout << t.path
              << (t.segments != kExpandable ? " (classic)"
                  : t.min_map == 0          ? " (expandable, exact maps)"
                                            : " (expandable)")
              << ": ratio " << r->reserved_over_allocated << ", reserved/live "
              << r->reserved_over_live << ", backend calls " << r->backend_calls << " ("
              << r->maps << " maps, " << r->unmaps << " unmaps, "
              << static_cast<double>(r->maps + r->unmaps) / t.steps << " per step), "
              << r->ns_per_op << " ns/op\n";
  }
  // Mapping ahead maps at least a fifth fewer times (GPT-2 and ResNet-50: 35% and 34%).
  for (const auto &[path, maps] : exact_maps) {
    EXPECT_LT(ahead_maps[path], maps * 4 / 5) << path;
  }
}

}  // namespace
}  // namespace genesis::replay
