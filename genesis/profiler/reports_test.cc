// Reports and exports of recorded histories: leak report, summary, Chrome trace, PyTorch
// snapshot, replay trace, picture, and the ProfileMemory scope's errors.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/test_backend.h"
#include "genesis/profiler/chrome_trace.h"
#include "genesis/profiler/leak_report.h"
#include "genesis/profiler/picture.h"
#include "genesis/profiler/profile_memory.h"
#include "genesis/profiler/replay_export.h"
#include "genesis/profiler/summary.h"
#include "genesis/profiler/torch_snapshot.h"
#include "genesis/replay/replayer.h"
#include "genesis/replay/trace.h"
#include "nlohmann/json.hpp"

// Outside genesis::, so that the leak report takes these for the program's call sites.
namespace leak_test {

[[gnu::noinline]] void* PlantLeak(genesis::memory::CachingAllocator& pool) {
  void* p = *pool.Allocate(12345);
  asm volatile("" ::: "memory");  // Keeps the call from becoming a tail call.
  return p;
}

[[gnu::noinline]] void Churn(genesis::memory::CachingAllocator& pool) {
  for (int i = 0; i < 10; ++i) {
    void* a = *pool.Allocate(1000 * (i + 1));
    void* b = *pool.Allocate(3 << 20);
    (void)pool.Free(a);
    (void)pool.Free(b);
  }
  asm volatile("" ::: "memory");
}

}  // namespace leak_test

namespace genesis::profiler {
namespace {

using memory::AllocatorOptions;
using memory::CachingAllocator;
using memory::TestBackend;
using nlohmann::json;

std::string TempFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A pool like ReplayOnHost's, so a replay of its trace behaves the same.
std::unique_ptr<CachingAllocator> MakePool(size_t capacity = replay::kDefaultReplayCapacity) {
  return *CachingAllocator::Create(
      TestBackend::FakeCuda(capacity, /*virtual_memory=*/true), AllocatorOptions());
}

ProfileMemoryOptions Watch(CachingAllocator* pool, bool stacks = false) {
  ProfileMemoryOptions o;
  o.pools.push_back({pool, "cuda:0", "device"});
  o.recorder.stacks = stacks;
  return o;
}

TEST(LeakReportTest, FindsAPlantedLeakWithItsCallSiteAndNothingElse) {
  auto pool = MakePool();
  ProfileMemory profile(Watch(pool.get(), /*stacks=*/true));
  ASSERT_TRUE(profile.Start().ok());
  leak_test::Churn(*pool);
  void* leak = leak_test::PlantLeak(*pool);
  leak_test::Churn(*pool);
  const LeakReport report = *profile.CheckMemoryLeaks();
  ASSERT_EQ(report.count, 1) << report.ToText();
  ASSERT_EQ(report.sites.size(), 1u);
  EXPECT_THAT(report.sites[0].site, ::testing::HasSubstr("leak_test::PlantLeak"));
  ASSERT_EQ(report.sites[0].allocations.size(), 1u);
  const LiveAllocation& a = report.sites[0].allocations[0];
  EXPECT_EQ(a.address, reinterpret_cast<uintptr_t>(leak));
  EXPECT_EQ(a.requested, 12345u);
  EXPECT_EQ(a.size, 12800u);
  EXPECT_GE(a.age_ns, 0);
  EXPECT_THAT(report.ToText(), ::testing::HasSubstr("1 live allocation(s)"));
  EXPECT_EQ(report.ToJson()["sites"][0]["count"], 1);
  ASSERT_TRUE(pool->Free(leak).ok());
  EXPECT_TRUE(profile.CheckMemoryLeaks()->ok());

  // Large allocations: the 3 MiB blocks of Churn, 20 of them, all freed.
  const auto large = *profile.LargeAllocations(1 << 20);
  ASSERT_EQ(large.size(), 20u);
  for (const LiveAllocation& l : large) {
    EXPECT_EQ(l.size, 3u << 20);
    EXPECT_TRUE(l.freed);
    EXPECT_THAT(l.site, ::testing::HasSubstr("leak_test::Churn"));
  }
}

TEST(SummaryTest, PeaksAndCountsMatchTheWorkload) {
  auto pool = MakePool();
  ProfileMemory profile(Watch(pool.get()));
  ASSERT_TRUE(profile.Start().ok());
  // Large pool: expandable_min_map (16 MiB) mapped ahead in an expandable segment.
  void* a = *pool->Allocate(1 << 20);
  void* b = *pool->Allocate(512);      // Small pool, 2 MiB segment.
  ASSERT_TRUE(pool->Free(a).ok());
  void* c = *pool->Allocate(1 << 20);  // Hit.
  ASSERT_TRUE(pool->Free(b).ok());
  ASSERT_TRUE(pool->Free(c).ok());
  ASSERT_TRUE(profile.Stop().ok());
  const MemorySummary s = *profile.Summary();
  ASSERT_EQ(s.pools.size(), 1u);
  const PoolSummary& p = s.pools[0];
  EXPECT_EQ(p.peak_allocated, (1 << 20) + 512);
  EXPECT_EQ(p.peak_reserved,
            static_cast<int64_t>(AllocatorOptions().expandable_min_map) + (2 << 20));
  EXPECT_EQ(p.allocs, 3);
  EXPECT_EQ(p.frees, 3);
  EXPECT_EQ(p.cache_hits, 1);
  EXPECT_EQ(p.segment_allocs, 1);
  EXPECT_EQ(p.maps, 1);
  EXPECT_NEAR(p.hit_rate, 1.0 / 3, 1e-9);
  EXPECT_LE(p.peak_allocated_at_ns, p.peak_reserved_at_ns + s.duration_ns);
  EXPECT_THAT(s.ToText(), ::testing::HasSubstr("cuda:0/device"));
  EXPECT_EQ(s.ToJson()["pools"][0]["peak_allocated"], (1 << 20) + 512);
}

// A small workload with markers, an OOM and a long-lived block.
History RecordedWorkload(CachingAllocator& pool, TestBackend::Options* = nullptr) {
  ProfileMemory profile(Watch(&pool));
  EXPECT_TRUE(profile.Start().ok());
  std::vector<void*> keep;
  for (int step = 0; step < 3; ++step) {
    profile.Mark("step " + std::to_string(step));
    keep.push_back(*pool.Allocate((step + 1) << 20));
    for (int i = 0; i < 20; ++i) {
      void* p = *pool.Allocate(4096 * (i + 1));
      EXPECT_TRUE(pool.Free(p).ok());
    }
  }
  EXPECT_FALSE(pool.Allocate(size_t{1} << 40).ok());  // Out of memory.
  for (void* p : keep) EXPECT_TRUE(pool.Free(p).ok());
  EXPECT_TRUE(pool.EmptyCache().ok());
  EXPECT_TRUE(profile.Stop().ok());
  return *profile.Collect();
}

TEST(ChromeTraceTest, ViewersFindTheFieldsTheyNeed) {
  auto pool = MakePool(size_t{64} << 30);
  const History h = RecordedWorkload(*pool);
  const std::string path = TempFile("trace.json");
  ASSERT_TRUE(WriteChromeTrace(h, path).ok());
  const json trace = json::parse(ReadFile(path));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::map<std::string, int> phases;
  std::map<int, double> last_counter_ts;
  int markers = 0, ooms = 0, segment_begins = 0, segment_ends = 0;
  for (const json& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("ts") && e.contains("pid") && e.contains("tid"))
        << e.dump();
    const std::string ph = e["ph"];
    ++phases[ph];
    if (ph == "C") {
      const int pid = e["pid"];
      const double ts = e["ts"];
      if (last_counter_ts.count(pid)) {
        EXPECT_GE(ts, last_counter_ts[pid]);
      }
      last_counter_ts[pid] = ts;
      EXPECT_TRUE(e["args"].contains("allocated") && e["args"].contains("reserved") &&
                  e["args"].contains("active"));
    }
    if (ph == "i" && e["name"] == "out of memory") ++ooms;
    if (ph == "i" && absl::StartsWith(e["name"].get<std::string>(), "step ")) ++markers;
    if (ph == "b" || ph == "e") {
      EXPECT_TRUE(e.contains("id") && e.contains("cat"));
      if (e["cat"] == "segment") ++(ph == "b" ? segment_begins : segment_ends);
    }
  }
  EXPECT_GT(phases["C"], 10);
  EXPECT_EQ(phases["M"], 1);
  EXPECT_EQ(markers, 3);
  EXPECT_EQ(ooms, 1);
  EXPECT_EQ(phases["b"], phases["e"]);
  EXPECT_GE(segment_begins, 1);
  EXPECT_EQ(segment_begins, segment_ends);
}

TEST(TorchSnapshotTest, HasTheLayoutOfPyTorchsSnapshots) {
  auto pool = MakePool(size_t{64} << 30);
  void* live = *pool->Allocate(777);
  const History h = RecordedWorkload(*pool);
  const json snap = TorchSnapshot(h);
  ASSERT_TRUE(snap["segments"].is_array());
  ASSERT_FALSE(snap["segments"].empty());
  bool found_live = false;
  for (const json& seg : snap["segments"]) {
    for (const char* key : {"device", "address", "total_size", "allocated_size", "active_size",
                            "requested_size", "stream", "segment_type", "is_expandable",
                            "blocks"}) {
      ASSERT_TRUE(seg.contains(key)) << key;
    }
    for (const json& b : seg["blocks"]) {
      ASSERT_TRUE(b.contains("address") && b.contains("size") && b.contains("state"));
      if (b["address"] == reinterpret_cast<uintptr_t>(live)) {
        found_live = true;
        EXPECT_EQ(b["state"], "active_allocated");
        EXPECT_EQ(b["requested_size"], 777);
      }
    }
  }
  EXPECT_TRUE(found_live);
  ASSERT_EQ(snap["device_traces"].size(), 1u);
  std::map<std::string, int> actions;
  for (const json& e : snap["device_traces"][0]) {
    ASSERT_TRUE(e.contains("action") && e.contains("size") && e.contains("stream"));
    ++actions[e["action"]];
    if (e["action"] == "oom") {
      EXPECT_TRUE(e.contains("device_free"));
    } else {
      EXPECT_TRUE(e.contains("addr"));
    }
  }
  EXPECT_EQ(actions["alloc"], 63);
  EXPECT_EQ(actions["free_requested"], 63);
  EXPECT_EQ(actions["free_completed"], 63);
  // The small pool's segment came before recording; the large blocks were mapped.
  EXPECT_GE(actions["segment_map"], 1);
  EXPECT_GE(actions["segment_unmap"], 1);
  EXPECT_EQ(actions["oom"], 1);
  ASSERT_TRUE(pool->Free(live).ok());
}

TEST(TorchSnapshotTest, PicklesWithTheViewersOpcodes) {
  const json v = {{"a", json::array({1, -2, 300, int64_t{1} << 40})}, {"b", true},
                  {"c", nullptr}, {"d", 0.5}};
  const std::string p = ToPickle(v);
  static constexpr char kExpected[] =
      "\x80\x02}(X\x01\x00\x00\x00" "a](K\x01J\xfe\xff\xff\xffJ\x2c\x01\x00\x00"
      "\x8a\x08\x00\x00\x00\x00\x00\x01\x00\x00" "eX\x01\x00\x00\x00" "b\x88"
      "X\x01\x00\x00\x00" "cNX\x01\x00\x00\x00" "dG\x3f\xe0\x00\x00\x00\x00\x00\x00u.";
  const std::string expected(kExpected, sizeof(kExpected) - 1);
  EXPECT_EQ(p, expected);
}

TEST(ReplayExportTest, ReplayOfTheExportedTraceGivesTheSamePeaks) {
  auto pool = MakePool();
  ProfileMemory profile(Watch(pool.get()));
  ASSERT_TRUE(profile.Start().ok());
  std::vector<void*> live;
  for (int step = 0; step < 4; ++step) {
    profile.Mark("step " + std::to_string(step));
    for (int i = 0; i < 30; ++i) {
      live.push_back(*pool->Allocate(((i * 7919) % 97 + 1) * 37 * (i % 3 == 0 ? 4096 : 16)));
      if (live.size() > 6) {
        ASSERT_TRUE(pool->Free(live[(i * 31) % live.size()]).ok());
        live.erase(live.begin() + (i * 31) % live.size());
      }
    }
  }
  for (void* p : live) ASSERT_TRUE(pool->Free(p).ok());
  ASSERT_TRUE(profile.Stop().ok());
  const History h = *profile.Collect();
  const MemorySummary summary = Summarize(h);
  const std::string path = TempFile("profiled.trace");
  ASSERT_TRUE(WriteReplayTrace(h, path).ok());
  const auto events = replay::ReadTrace(path);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->back().step, 3);
  const auto result = replay::ReplayOnHost(*events, AllocatorOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(static_cast<int64_t>(result->peak_allocated), summary.pools[0].peak_allocated);
  EXPECT_EQ(static_cast<int64_t>(result->peak_reserved), summary.pools[0].peak_reserved);
  EXPECT_FALSE(ToReplayTrace(h, 5).ok());
}

// Width and height from a PNG's IHDR chunk.
std::pair<int, int> PngSize(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    return (static_cast<uint8_t>(png[at]) << 24) | (static_cast<uint8_t>(png[at + 1]) << 16) |
           (static_cast<uint8_t>(png[at + 2]) << 8) | static_cast<uint8_t>(png[at + 3]);
  };
  return {static_cast<int>(be32(16)), static_cast<int>(be32(20))};
}

TEST(PictureTest, DrawsAPngOfTheAskedSize) {
  auto pool = MakePool(size_t{64} << 30);
  const History h = RecordedWorkload(*pool);
  const json data = PictureData(h, PictureOptions());
  ASSERT_EQ(data["sources"].size(), 1u);
  EXPECT_EQ(data["markers"].size(), 3u);
  EXPECT_FALSE(data["peak_sites"].empty());
  const std::string path = TempFile("memory.png");
  PictureOptions options;
  options.width = 640;
  options.height = 480;
  const absl::Status s = WritePicture(h, path, options);
  if (absl::IsFailedPrecondition(s)) {
    EXPECT_THAT(s.message(), ::testing::HasSubstr("matplotlib"));
    GTEST_SKIP() << s;
  }
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(PngSize(ReadFile(path)), std::make_pair(640, 480));
}

TEST(ProfileMemoryTest, MisuseIsAnErrorNeverACrash) {
  auto pool = MakePool();
  ProfileMemory never(Watch(pool.get()));
  EXPECT_EQ(never.Stop().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(never.Summary().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(never.WriteChromeTrace(TempFile("x.json")).code(),
            absl::StatusCode::kFailedPrecondition);

  ProfileMemory twice(Watch(pool.get()));
  ASSERT_TRUE(twice.Start().ok());
  EXPECT_EQ(twice.Start().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(twice.Stop().ok());
  EXPECT_EQ(twice.Stop().code(), absl::StatusCode::kFailedPrecondition);
  const absl::Status unwritable = twice.WriteChromeTrace("/nonexistent/dir/trace.json");
  EXPECT_EQ(unwritable.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unwritable.message(), ::testing::HasSubstr("/nonexistent/dir/trace.json"));
  EXPECT_FALSE(twice.WritePicture("/nonexistent/dir/p.png").ok());
  EXPECT_FALSE(twice.WriteTorchSnapshot("/nonexistent/dir/s.pickle").ok());

  ProfileMemoryOptions zero = Watch(pool.get());
  zero.recorder.ring_events = 0;
  ProfileMemory bad(zero);
  const absl::Status s = bad.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("ring_events"));
  EXPECT_FALSE(bad.running());
}

}  // namespace
}  // namespace genesis::profiler
