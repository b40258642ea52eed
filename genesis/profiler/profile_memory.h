// ProfileMemory: a scope that records what the memory pools do, and reports on it.
//
//   profiler::ProfileMemory profile;                 // Every pool of the process.
//   GENESIS_RETURN_IF_ERROR(profile.Start());
//   for (int step = 0; ...) { profile.Mark(absl::StrCat("step ", step)); ... }
//   GENESIS_RETURN_IF_ERROR(profile.Stop());
//   std::cout << profile.Summary()->ToText();
//   std::cout << profile.CheckMemoryLeaks()->ToText();
//   GENESIS_RETURN_IF_ERROR(profile.WriteChromeTrace("memory.json"));   // Perfetto
//   GENESIS_RETURN_IF_ERROR(profile.WriteTorchSnapshot("memory.pickle")); // memory_viz
//   GENESIS_RETURN_IF_ERROR(profile.WritePicture("memory.png"));
//
// Recording is cheap enough to leave on (per-thread rings; see recorder.h and README);
// call stacks (options.stacks) cost more and make leak reports name call sites. Reports
// work while recording too (they read the history so far).
#ifndef GENESIS_PROFILER_PROFILE_MEMORY_H_
#define GENESIS_PROFILER_PROFILE_MEMORY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/profiler/history.h"
#include "genesis/profiler/leak_report.h"
#include "genesis/profiler/picture.h"
#include "genesis/profiler/recorder.h"
#include "genesis/profiler/summary.h"

namespace genesis::profiler {

struct PoolToWatch {
  memory::CachingAllocator* pool = nullptr;
  std::string device = "cpu";
  std::string name = "pool";
};

struct ProfileMemoryOptions {
  RecorderOptions recorder;
  // Empty: the process's pools (pool_registry.h): the host pool, every visible GPU's
  // device pool and, with a GPU, the pinned host pool.
  std::vector<PoolToWatch> pools;
};

class ProfileMemory {
 public:
  explicit ProfileMemory(ProfileMemoryOptions options = ProfileMemoryOptions());
  // Stops recording if it runs.
  ~ProfileMemory();

  // Starts recording. InvalidArgument / FailedPrecondition for bad options (recorder.h);
  // FailedPrecondition if started before (a scope records once); a pool's own error if
  // a default pool cannot be made.
  absl::Status Start();
  // FailedPrecondition if never started or stopped already.
  absl::Status Stop();
  bool running() const;

  // A marker (a training step: "step <n>", a phase) at this time. No-op unless running.
  void Mark(std::string_view name);

  // Reports on the history so far; FailedPrecondition if never started.
  absl::StatusOr<History> Collect() const;
  absl::StatusOr<MemorySummary> Summary() const;
  absl::StatusOr<LeakReport> CheckMemoryLeaks() const;
  absl::StatusOr<std::vector<LiveAllocation>> LargeAllocations(uint64_t min_bytes) const;

  // Exports (chrome_trace.h, torch_snapshot.h, replay_export.h, picture.h).
  absl::Status WriteChromeTrace(const std::string& path) const;
  // A pickle if `path` ends in ".pickle" or ".pkl", else JSON.
  absl::Status WriteTorchSnapshot(const std::string& path) const;
  // The trace of the first watched pool (or of `source`).
  absl::Status WriteReplayTrace(const std::string& path, int source = 0) const;
  absl::Status WritePicture(const std::string& path,
                            const PictureOptions& options = PictureOptions()) const;

 private:
  ProfileMemoryOptions options_;
  std::unique_ptr<Recorder> recorder_;
};

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_PROFILE_MEMORY_H_
