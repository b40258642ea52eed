// Recorded allocation traces replayed through genesis's host pool beside malloc/free,
// in one run: every alloc and free_completed event of the trace, in order, with the
// blocks a trace leaves live freed at the end of each pass (outside neither timing:
// both sides pay it). The trace's addresses are resolved to slots before timing, so
// the loop does nothing but allocate and free. Time per pass; items = operations.
//   bazel run -c opt //benchmarks/replay:replay_benchmark -- $PWD/traces/*.trace.gz
// Benchmarks are named after the traces: BM_Replay_HostPool/<trace>.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "benchmark/benchmark.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/host_backend.h"
#include "genesis/replay/trace.h"

namespace genesis::replay {
namespace {

// One pool call: allocate `size` into slot `slot`, or free slot `slot`.
struct Op {
  bool alloc;
  uint32_t slot;
  uint64_t size;
};

struct Program {
  std::vector<Op> ops;
  uint32_t slots = 0;
};

Program Compile(const std::vector<TraceEvent>& events) {
  Program p;
  std::unordered_map<uint64_t, uint32_t> live;
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::kAlloc) {
      const uint32_t slot = p.slots++;
      live[e.address] = slot;
      p.ops.push_back({true, slot, e.size});
    } else if (e.action == TraceAction::kFreeCompleted) {
      const auto it = live.find(e.address);
      if (it == live.end()) continue;
      p.ops.push_back({false, it->second, 0});
      live.erase(it);
    }
  }
  return p;
}

template <typename Alloc, typename Free>
void Run(benchmark::State& state, const Program& p, Alloc alloc, Free release) {
  std::vector<void*> ptrs(p.slots, nullptr);
  for (auto _ : state) {
    for (const Op& op : p.ops) {
      if (op.alloc) {
        ptrs[op.slot] = alloc(op.size);
      } else {
        release(ptrs[op.slot]);
        ptrs[op.slot] = nullptr;
      }
    }
    for (void*& ptr : ptrs) {
      if (ptr != nullptr) release(ptr);
      ptr = nullptr;
    }
  }
  state.SetItemsProcessed(state.iterations() * p.ops.size());
}

void RegisterTrace(const std::string& path) {
  absl::StatusOr<std::vector<TraceEvent>> events = ReadTrace(path);
  if (!events.ok()) {
    std::fprintf(stderr, "%s\n", events.status().ToString().c_str());
    std::exit(1);
  }
  std::string name = path.substr(path.find_last_of('/') + 1);
  name = name.substr(0, name.find('.'));
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's malloc takes milliseconds for each large block (a pass over a
  // recorded trace then takes half a minute); its timings mean nothing anyway, so under
  // it the benchmark replays the first events only, to check the code, not to measure.
  constexpr size_t kSanitizedEvents = 1000;
  if (events->size() > kSanitizedEvents) events->resize(kSanitizedEvents);
#endif
  // Programs live as long as the process (the registered benchmarks point at them).
  static auto* programs = new std::deque<Program>;
  const Program* program = &programs->emplace_back(Compile(*events));
  benchmark::RegisterBenchmark(("BM_Replay_HostPool/" + name).c_str(),
                               [program](benchmark::State& state) {
                                 auto pool = memory::CachingAllocator::Create(
                                                 std::make_unique<memory::HostBackend>(),
                                                 memory::AllocatorOptions{})
                                                 .value();
                                 Run(state, *program,
                                     [&](uint64_t size) { return pool->Allocate(size).value(); },
                                     [&](void* p) { (void)pool->Free(p); });
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("BM_Replay_Malloc/" + name).c_str(),
                               [program](benchmark::State& state) {
                                 Run(state, *program, [](uint64_t size) { return std::malloc(size); },
                                     [](void* p) { std::free(p); });
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace genesis::replay

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: replay_benchmark [benchmark flags] TRACE...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) genesis::replay::RegisterTrace(argv[i]);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
