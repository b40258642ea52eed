// The baseline of `genesis replay --device=cuda:N`: the same allocation trace replayed
// through PyTorch's own CUDA caching allocator (c10::cuda::CUDACachingAllocator's
// raw_alloc_with_stream / raw_delete, one call per event), timed the same way: only the
// allocator calls, ns per operation (allocs and completed frees), overall and per
// `# step` of the trace, with the allocator's peaks and device calls.
//
// It is built on a machine with PyTorch (there is no PyTorch in the Bazel build):
//   benchmarks/replay/build_torch_replay.sh            # prints the binary's path
//   torch_replay [--expandable] [--device=N] TRACE...  # .gz read through gzip -dc
// `--expandable` sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before the
// allocator starts (an existing PYTORCH_CUDA_ALLOC_CONF is kept otherwise).
//
// Trace format: genesis/replay/trace.h. Stream 0 is the device's default stream; any
// other id gets a stream of its own from PyTorch's pool.
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Event {
  bool alloc = false;
  uint64_t address = 0;
  uint64_t size = 0;
  int64_t stream = 0;
  int step = 0;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "torch_replay: %s\n", message.c_str());
  std::exit(1);
}

// Reads alloc and free_completed events; free_requested changes nothing (as in
// genesis replay). Lines "# step <n>" set the step of the events after them.
std::vector<Event> ReadTrace(const std::string& path) {
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  FILE* f = gz ? popen(("gzip -dc '" + path + "'").c_str(), "r") : std::fopen(path.c_str(), "r");
  if (f == nullptr) Die("cannot open " + path);
  std::vector<Event> events;
  char line[512];
  int step = 0;
  int number = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    ++number;
    int n = 0;
    if (std::sscanf(line, "# step %d", &n) == 1) {
      step = n;
      continue;
    }
    if (line[0] == '#' || line[0] == '\n') continue;
    char action[32];
    char address[64];
    unsigned long long size = 0;
    char stream[64];
    if (std::sscanf(line, "%31s %63s %llu %63s", action, address, &size, stream) != 4) {
      Die(path + ":" + std::to_string(number) + ": not <action> <address> <size> <stream>");
    }
    Event e;
    e.address = std::strtoull(address, nullptr, 0);
    e.size = size;
    e.stream = std::strtoll(stream, nullptr, 0);
    e.step = step;
    if (std::strcmp(action, "alloc") == 0) {
      e.alloc = true;
    } else if (std::strcmp(action, "free_completed") != 0) {
      continue;
    }
    events.push_back(e);
  }
  if (gz ? pclose(f) != 0 : std::fclose(f) != 0) Die("cannot read " + path);
  return events;
}

void Replay(const std::string& path, int device) {
  using c10::cuda::CUDACachingAllocator::getDeviceStats;
  using c10::cuda::CUDACachingAllocator::raw_alloc_with_stream;
  using c10::cuda::CUDACachingAllocator::raw_delete;
  using Clock = std::chrono::steady_clock;
  using Stat = c10::CachingDeviceAllocator::StatType;
  const std::vector<Event> events = ReadTrace(path);
  std::map<int64_t, cudaStream_t> streams;
  for (const Event& e : events) {
    if (streams.contains(e.stream)) continue;
    streams[e.stream] = e.stream == 0
                            ? c10::cuda::getDefaultCUDAStream(device).stream()
                            : c10::cuda::getStreamFromPool(false, device).stream();
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDACachingAllocator::resetPeakStats(device);
  c10::cuda::CUDACachingAllocator::resetAccumulatedStats(device);

  std::unordered_map<uint64_t, void*> live;
  live.reserve(events.size());
  double total_ns = 0;
  std::printf("%s\n  %-6s %8s %10s\n", path.c_str(), "step", "ops", "ns/op");
  size_t begin = 0;
  while (begin < events.size()) {
    size_t end = begin;
    while (end < events.size() && events[end].step == events[begin].step) ++end;
    const Clock::time_point start = Clock::now();
    for (size_t i = begin; i < end; ++i) {
      const Event& e = events[i];
      if (e.alloc) {
        live[e.address] = raw_alloc_with_stream(e.size, streams[e.stream]);
      } else {
        auto it = live.find(e.address);
        if (it == live.end()) Die("free of a block that is not live");
        raw_delete(it->second);
        live.erase(it);
      }
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    total_ns += ns;
    std::printf("  %-6d %8zu %10.0f\n", events[begin].step, end - begin,
                ns / static_cast<double>(end - begin));
    begin = end;
  }
  const auto stats = getDeviceStats(device);
  const auto agg = static_cast<size_t>(Stat::AGGREGATE);
  const double peak_allocated = static_cast<double>(stats.allocated_bytes[agg].peak);
  const double peak_reserved = static_cast<double>(stats.reserved_bytes[agg].peak);
  std::printf(
      "  all    %8zu %10.0f   peak allocated %.0f, peak reserved %.0f, ratio %.4f, "
      "segments %lld, device allocs %lld, device frees %lld, retries %lld\n",
      events.size(), total_ns / static_cast<double>(events.size()), peak_allocated,
      peak_reserved, peak_allocated == 0 ? 0.0 : peak_reserved / peak_allocated,
      static_cast<long long>(stats.segment[agg].allocated),
      static_cast<long long>(stats.num_device_alloc),
      static_cast<long long>(stats.num_device_free),
      static_cast<long long>(stats.num_alloc_retries));
  for (auto& [address, ptr] : live) raw_delete(ptr);
  c10::cuda::CUDACachingAllocator::emptyCache();
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  bool expandable = false;
  std::vector<std::string> traces;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--expandable") {
      expandable = true;
    } else if (arg.rfind("--device=", 0) == 0) {
      device = std::atoi(arg.c_str() + 9);
    } else if (arg.rfind("--", 0) == 0) {
      Die("unknown flag " + arg + " (flags: --expandable, --device=N)");
    } else {
      traces.push_back(arg);
    }
  }
  if (traces.empty()) Die("usage: torch_replay [--expandable] [--device=N] TRACE...");
  if (expandable) setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  std::printf("PyTorch's caching allocator, cuda:%d, PYTORCH_CUDA_ALLOC_CONF=%s\n", device,
              conf == nullptr ? "" : conf);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  // Starts CUDA and the allocator the way any PyTorch program does.
  at::Tensor warm = at::empty({1}, at::device(at::Device(at::kCUDA, device)));
  warm.reset();
  for (const std::string& t : traces) Replay(t, device);
  return 0;
}
