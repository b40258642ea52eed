// Planning a batch of copies on the CPU: PlanBatch (genesis/transfer/batch_plan.h) for
// batches of 1,024 requests on a fake two-GPU topology (peer access both ways, batch
// memcpy available). No GPU and no CUDA: the addresses are never dereferenced, so this
// builds and runs in the CPU-only build too.
//
//   bazel run -c opt //benchmarks/transfer:batch_plan_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// The time column is one PlanBatch of the whole batch (ns per 1,024 requests);
// ns_per_request divides the CPU time by the batch size. Fake addresses: each device
// has a buffer of sources and one of destinations. The batches:
//
//  * D2D_1024x16KiB: 1,024 x 16 KiB within cuda:0, gathered from one buffer into
//    another in order (one fused group);
//  * D2D_1024x16KiB_Interleaved: the same, with sources and destinations alternating
//    in one buffer (the sources' span overlaps the destinations');
//  * D2D_1024x16KiB_Shuffled: the same requests in a random order (the overlap check
//    sorts the destinations);
//  * Mixed1024: 256 each of pinned cpu -> cuda:0 (16 KiB), cuda:0 -> pinned cpu
//    (16 KiB), cuda:0 -> cuda:1 and cuda:1 -> cuda:0 (64 KiB), interleaved (four fused
//    groups on four streams);
//  * H2D_Mixed1024_Sizes: 1,024 from pinned cpu to cuda:0 of 256 B .. 8 MiB
//    (log-uniform), which split into fused, copy-engine and batch memcpy groups.
//  * D2D_Pack1000 / D2D_Unpack1000: a bucket's packing and unpacking (the gradients of
//    collectives_benchmark's bucketed rows): 1,000 separate storages of 700 B .. 700 KiB
//    (log-uniform) within cuda:0, allocated in a shuffled order around the bucket's
//    buffer, gathered into it at 16-byte offsets, and scattered back.
//
// Each batch's plan is checked once before timing (the expected groups), so that a
// planner that stopped fusing does not look fast.
//
// BM_EncodeFusedGroup_*: what executing the plan of a fused batch costs the host before
// the launch: gathering the group's requests and encoding them into the launch's
// parameters (genesis/transfer/kernels/fused_copy.h); the words counter is the size of
// the encoding in 32-bit words. _ScatteredSources: the sources of D2D_1024x16KiB in a
// random order.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "benchmarks/transfer/shuffled_sources.h"
#include "genesis/core/device.h"
#include "genesis/transfer/batch_plan.h"
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer {
namespace {

constexpr size_t kCount = 1024;
constexpr size_t KiB = size_t{1} << 10;

// Two GPUs, each with access to the other, and cudaMemcpyBatchAsync.
Topology TwoGpus() {
  Topology topology;
  topology.device_count = 2;
  topology.peer_access = {{false, true}, {true, false}};
  topology.batch_memcpy_available = true;
  return topology;
}

// Fake memory of one device: disjoint, 512-byte aligned ranges one after another.
class Region {
 public:
  explicit Region(uintptr_t base) : next_(base) {}
  void* Next(size_t bytes) {
    const uintptr_t p = next_;
    next_ += (bytes + 511) / 512 * 512;
    return reinterpret_cast<void*>(p);
  }

 private:
  uintptr_t next_;
};

// A source and a destination buffer per device (cpu, cuda:0, cuda:1), as a caller
// gathering into or scattering from one flat buffer has; with `interleaved`, sources and
// destinations alternate in one buffer per device instead.
class Memory {
 public:
  explicit Memory(bool interleaved = false) : interleaved_(interleaved) {}

  CopyRequest Request(Device src, Device dst, size_t bytes) {
    return {.src = RegionOf(src, /*is_dst=*/false).Next(bytes),
            .src_device = src,
            .src_pinned = src.is_cpu(),
            .dst = RegionOf(dst, /*is_dst=*/true).Next(bytes),
            .dst_device = dst,
            .dst_pinned = dst.is_cpu(),
            .bytes = bytes};
  }

 private:
  Region& RegionOf(Device device, bool is_dst) {
    const int d = device.is_cpu() ? 0 : 1 + device.index();
    return regions_[d][is_dst && !interleaved_ ? 1 : 0];
  }

  bool interleaved_;
  Region regions_[3][2] = {{Region(uintptr_t{1} << 40), Region(uintptr_t{2} << 40)},
                           {Region(uintptr_t{3} << 40), Region(uintptr_t{4} << 40)},
                           {Region(uintptr_t{5} << 40), Region(uintptr_t{6} << 40)}};
};

std::vector<CopyRequest> DeviceBatch(bool interleaved = false) {
  Memory memory(interleaved);
  std::vector<CopyRequest> requests;
  for (size_t i = 0; i < kCount; ++i) {
    requests.push_back(memory.Request(Device::Cuda(0), Device::Cuda(0), 16 * KiB));
  }
  return requests;
}

std::vector<CopyRequest> Shuffled(std::vector<CopyRequest> requests) {
  std::mt19937 rng(7);
  std::shuffle(requests.begin(), requests.end(), rng);
  return requests;
}

std::vector<CopyRequest> MixedBatch() {
  Memory memory;
  std::vector<CopyRequest> requests;
  const Device cpu = Device::Cpu();
  const Device gpu0 = Device::Cuda(0);
  const Device gpu1 = Device::Cuda(1);
  for (size_t i = 0; i < kCount / 4; ++i) {
    requests.push_back(memory.Request(cpu, gpu0, 16 * KiB));
    requests.push_back(memory.Request(gpu0, cpu, 16 * KiB));
    requests.push_back(memory.Request(gpu0, gpu1, 64 * KiB));
    requests.push_back(memory.Request(gpu1, gpu0, 64 * KiB));
  }
  return requests;
}

std::vector<CopyRequest> MixedSizesBatch() {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> log_size(std::log(256.0),
                                                  std::log(double{8 << 20}));
  Memory memory;
  std::vector<CopyRequest> requests;
  for (size_t i = 0; i < kCount; ++i) {
    const auto bytes = static_cast<size_t>(std::exp(log_size(rng)));
    requests.push_back(memory.Request(Device::Cpu(), Device::Cuda(0), bytes));
  }
  return requests;
}

// A bucket of 1,000 separate storages and its buffer, as a pool lays them out: the
// storages in a shuffled order of 512-byte aligned slots, the buffer between them.
// Gathered into the buffer (`pack`) or scattered back out of it.
std::vector<CopyRequest> BucketBatch(bool pack) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> log_size(std::log(700.0), std::log(700.0 * 1024));
  std::vector<size_t> sizes(1000);
  size_t total = 0;
  for (size_t& bytes : sizes) {
    bytes = static_cast<size_t>(std::exp(log_size(rng))) / 4 * 4;
    total += bytes;
  }
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Region memory(uintptr_t{3} << 40);
  std::vector<uintptr_t> storage(sizes.size());
  uintptr_t buffer = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == order.size() / 2) {
      buffer = reinterpret_cast<uintptr_t>(memory.Next(total + 16 * sizes.size()));
    }
    storage[order[k]] = reinterpret_cast<uintptr_t>(memory.Next(sizes[order[k]]));
  }
  std::vector<CopyRequest> requests;
  size_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    void* s = reinterpret_cast<void*>(storage[i]);
    void* b = reinterpret_cast<void*>(buffer + at);
    const Device gpu = Device::Cuda(0);
    requests.push_back(pack ? CopyRequest{s, gpu, false, b, gpu, false, sizes[i]}
                            : CopyRequest{b, gpu, false, s, gpu, false, sizes[i]});
    at = (at + sizes[i] + 15) / 16 * 16;
  }
  return requests;
}

// Plans `requests` once and checks the mechanisms of its groups, then times PlanBatch.
void BM_PlanBatch(benchmark::State& state, const std::vector<CopyRequest>& requests,
                  const std::vector<Mechanism>& expected) {
  const Topology topology = TwoGpus();
  const PlanOptions options;
  absl::StatusOr<BatchPlan> plan = PlanBatch(requests, topology, options);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().ToString().c_str());
    return;
  }
  std::vector<Mechanism> mechanisms;
  for (const CopyGroup& group : plan->groups) mechanisms.push_back(group.mechanism);
  if (mechanisms != expected) {
    state.SkipWithError(("unexpected plan:\n" + plan->ToString()).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<BatchPlan> planned = PlanBatch(requests, topology, options);
    benchmark::DoNotOptimize(planned);
    if (!planned.ok()) {
      state.SkipWithError(planned.status().ToString().c_str());
      break;
    }
  }
  const auto count = static_cast<double>(requests.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(requests.size()));
  state.counters["ns_per_request"] = benchmark::Counter(
      count, benchmark::Counter::kIsIterationInvariantRate |
                        benchmark::Counter::kInvert);
}

// The fused kernel's share of executing a plan on the host: the batch copier encodes
// the plan's one fused group from the requests into the launch's parameters
// (kernels/fused_copy.h). Checks that the group is one launch.
void BM_EncodeFusedGroup(benchmark::State& state, const std::vector<CopyRequest>& requests) {
  absl::StatusOr<BatchPlan> plan = PlanBatch(requests, TwoGpus());
  if (!plan.ok() || plan->groups.size() != 1 ||
      plan->groups[0].requests.size() > kernels::kFusedCopiesPerLaunch) {
    state.SkipWithError("expected one fused group of at most one launch");
    return;
  }
  const std::vector<size_t>& indices = plan->groups[0].requests;
  kernels::FusedCopyParams& params = kernels::ThreadFusedCopyParams();
  for (auto _ : state) {
    const absl::Status status = kernels::EncodeFusedCopy(
        indices.size(), [&](size_t k) -> const CopyRequest& { return requests[indices[k]]; },
        params);
    benchmark::DoNotOptimize(&params);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.counters["words"] = params.header.num_words;
}

void RegisterAll() {
  using M = Mechanism;
  static const auto* const device = new std::vector<CopyRequest>(DeviceBatch());
  static const auto* const interleaved = new std::vector<CopyRequest>(DeviceBatch(true));
  static const auto* const shuffled = new std::vector<CopyRequest>(Shuffled(DeviceBatch()));
  static const auto* const mixed = new std::vector<CopyRequest>(MixedBatch());
  static const auto* const sizes = new std::vector<CopyRequest>(MixedSizesBatch());
  const auto add = [](const char* name, const std::vector<CopyRequest>* requests,
                      std::vector<Mechanism> expected) {
    benchmark::RegisterBenchmark(name, [=](benchmark::State& state) {
      BM_PlanBatch(state, *requests, expected);
    })->Unit(benchmark::kNanosecond);
  };
  add("BM_PlanBatch_D2D_1024x16KiB", device, {M::kFusedKernel});
  add("BM_PlanBatch_D2D_1024x16KiB_Interleaved", interleaved, {M::kFusedKernel});
  add("BM_PlanBatch_D2D_1024x16KiB_Shuffled", shuffled, {M::kFusedKernel});
  add("BM_PlanBatch_Mixed1024", mixed,
      {M::kFusedKernel, M::kFusedKernel, M::kPeerFusedKernel, M::kPeerFusedKernel});
  add("BM_PlanBatch_H2D_Mixed1024_Sizes", sizes,
      {M::kFusedKernel, M::kCopyEngine, M::kBatchMemcpy});
  static const auto* const pack = new std::vector<CopyRequest>(BucketBatch(true));
  static const auto* const unpack = new std::vector<CopyRequest>(BucketBatch(false));
  add("BM_PlanBatch_D2D_Pack1000", pack, {M::kFusedKernel});
  add("BM_PlanBatch_D2D_Unpack1000", unpack, {M::kFusedKernel});
  static const auto* const scattered =
      new std::vector<CopyRequest>(benchmarks::ShuffledSources(DeviceBatch()));
  const auto encode = [](const char* name, const std::vector<CopyRequest>* requests) {
    benchmark::RegisterBenchmark(name, [=](benchmark::State& state) {
      BM_EncodeFusedGroup(state, *requests);
    })->Unit(benchmark::kNanosecond);
  };
  encode("BM_EncodeFusedGroup_D2D_1024x16KiB", device);
  encode("BM_EncodeFusedGroup_D2D_1024x16KiB_ScatteredSources", scattered);
}

}  // namespace
}  // namespace genesis::transfer

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  genesis::transfer::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
