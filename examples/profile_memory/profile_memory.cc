// Profiles a small training-like workload of storages (activations that grow through a
// forward pass and shrink through a backward pass, a leak planted on purpose) on the
// first GPU, or on the CPU without one, and writes the profiler's exports:
//   OUT/memory_timeline.json   Chrome trace (ui.perfetto.dev, chrome://tracing)
//   OUT/memory_snapshot.pickle PyTorch memory snapshot (pytorch.org/memory_viz)
//   OUT/memory_snapshot.json   the same as JSON
//   OUT/memory.trace           allocation trace for `genesis replay`
//   OUT/memory.png             picture (needs python3 with matplotlib)
// and prints the summary, the leak report and the large allocations.
//   bazel run //examples/profile_memory -- --out=/tmp/profile [--steps=6] [--stacks=false]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_query.h"
#include "genesis/profiler/profile_memory.h"
#include "genesis/storage/storage.h"

ABSL_FLAG(std::string, out, "/tmp/genesis_profile", "folder for the exports (must exist)");
ABSL_FLAG(int, steps, 6, "training steps to run");
ABSL_FLAG(bool, stacks, true, "record call stacks (leak sites)");

namespace {

using genesis::Device;
using genesis::DType;
using genesis::storage::Storage;

// Kept alive on purpose: the leak report names this function.
std::vector<Storage>& Forgotten() {
  static auto* forgotten = new std::vector<Storage>();
  return *forgotten;
}

[[gnu::noinline]] absl::Status CacheSomethingForever(Device device) {
  absl::StatusOr<Storage> s = genesis::storage::Zeros({1024, 1024}, DType::kFloat32, device);
  if (!s.ok()) return s.status();
  Forgotten().push_back(*std::move(s));
  return absl::OkStatus();
}

[[gnu::noinline]] absl::Status TrainStep(Device device, int layers, int64_t width) {
  std::vector<Storage> activations;
  for (int l = 0; l < layers; ++l) {  // Forward: activations pile up.
    absl::StatusOr<Storage> a =
        genesis::storage::Empty({64, width * (1 + l % 3)}, DType::kFloat32, device);
    if (!a.ok()) return a.status();
    absl::StatusOr<Storage> tmp = a->Clone();  // A short-lived temporary.
    if (!tmp.ok()) return tmp.status();
    activations.push_back(*std::move(a));
  }
  while (!activations.empty()) {  // Backward: gradients come and go, activations freed.
    absl::StatusOr<Storage> grad = activations.back().Clone();
    if (!grad.ok()) return grad.status();
    activations.pop_back();
  }
  return absl::OkStatus();
}

absl::Status Run() {
  const Device device = genesis::cuda::DeviceCount() > 0 ? Device::Cuda(0) : Device::Cpu();
  const std::string out = absl::GetFlag(FLAGS_out);
  genesis::profiler::ProfileMemoryOptions options;
  options.recorder.stacks = absl::GetFlag(FLAGS_stacks);
  genesis::profiler::ProfileMemory profile(options);
  if (absl::Status s = profile.Start(); !s.ok()) return s;
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    profile.Mark(absl::StrCat("step ", step));
    if (absl::Status s = TrainStep(device, 24, 4096); !s.ok()) return s;
    if (step == 2) {
      if (absl::Status s = CacheSomethingForever(device); !s.ok()) return s;
    }
  }
  if (absl::Status s = profile.Stop(); !s.ok()) return s;

  std::printf("workload on %s\n\n%s\n", device.ToString().c_str(),
              profile.Summary()->ToText().c_str());
  std::printf("%s\n", profile.CheckMemoryLeaks()->ToText().c_str());
  std::printf("%s\n", genesis::profiler::LargeAllocationsText(
                          *profile.LargeAllocations(std::size_t{4} << 20)).c_str());
  const int watched = device.is_cuda() ? 1 : 0;  // Device pool (after the host pool).
  struct Export {
    std::string name;
    absl::Status status;
  };
  std::vector<Export> exports = {
      {"memory_timeline.json", profile.WriteChromeTrace(out + "/memory_timeline.json")},
      {"memory_snapshot.pickle", profile.WriteTorchSnapshot(out + "/memory_snapshot.pickle")},
      {"memory_snapshot.json", profile.WriteTorchSnapshot(out + "/memory_snapshot.json")},
      {"memory.trace", profile.WriteReplayTrace(out + "/memory.trace", watched)},
  };
  genesis::profiler::PictureOptions picture;
  picture.title = absl::StrCat("examples/profile_memory on ", device.ToString());
  exports.push_back({"memory.png", profile.WritePicture(out + "/memory.png", picture)});
  absl::Status first;
  for (const Export& e : exports) {
    std::printf("%-24s %s\n", e.name.c_str(),
                e.status.ok() ? (out + "/" + e.name).c_str() : e.status.ToString().c_str());
    if (first.ok() && !e.status.ok()) first = e.status;
  }
  Forgotten().clear();
  return first;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = Run();
  if (!s.ok()) {
    std::fprintf(stderr, "profile_memory: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
