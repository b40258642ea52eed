// What issuing a collective costs on the host: back-to-back all_reduces of 8 bytes on a
// group of one rank, where the backend's own work is next to nothing, so that the time
// per operation is the issue path. With a GPU: genesis's NCCL group beside NCCL called
// directly (ncclAllReduce on a cudaMalloc buffer), the CUDA calls the path makes, each
// alone, and a stream memory write (cuStreamWriteValue64), the other way to mark where
// an operation ends. Everywhere: a Gloo group of one (the process group's checks and the
// hand-off to Gloo's worker thread). Median of --repetitions runs of --ops each.
//
//   bazel run -c opt //benchmarks/distributed:issue_path_benchmark
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/distributed/fork_ranks.h"
#include "benchmarks/distributed/raw_nccl.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/stream.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/store.h"
#include "genesis/storage/storage.h"

ABSL_FLAG(int, ops, 20000,
          "operations per repetition (enough for the NCCL group's watchdog to sweep a few "
          "times, every 5 ms, as it does under a stream of operations)");
ABSL_FLAG(int, repetitions, 5, "repetitions; the median is printed");
ABSL_FLAG(double, profile_seconds, 0,
          "with a GPU: after the Gloo rows, only issue genesis's all_reduces for this long "
          "and print how many, instead of the NCCL rows (for a profiler: `perf record "
          "--delay=MS` skips the set-up)");

namespace genesis::benchmarks {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;
using distributed::Work;
using storage::Storage;

// Nanoseconds per call of `op` (run --ops times, then `drain` once), median of
// --repetitions.
absl::StatusOr<double> PerCall(const std::function<absl::Status()>& op,
                               const std::function<absl::Status()>& drain) {
  const int ops = absl::GetFlag(FLAGS_ops);
  std::vector<double> ns;
  for (int rep = 0; rep <= absl::GetFlag(FLAGS_repetitions); ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i) GENESIS_RETURN_IF_ERROR(op());
    GENESIS_RETURN_IF_ERROR(drain());
    const double t = std::chrono::duration<double, std::nano>(
                         std::chrono::steady_clock::now() - start).count() / ops;
    if (rep > 0) ns.push_back(t);  // The first is warm-up.
  }
  return Median(std::move(ns));
}

void Print(const std::string& what, double ns) {
  std::printf("%-58s %9.0f ns\n", what.c_str(), ns);
}

// A fresh directory for a group's file store (under TEST_TMPDIR in a test), removed at
// exit: a store left by an earlier run would be read by this one.
std::string Dir(const char* name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/genesis-issue-path-", name,
                                  "-XXXXXX");
  if (mkdtemp(path.data()) == nullptr) return absl::StrCat(path, "-", getpid());
  static auto* made = new std::vector<std::string>();
  made->push_back(path);
  static const int cleanup = std::atexit([] {
    for (const std::string& d : *made) {
      std::error_code ignored;
      std::filesystem::remove_all(d, ignored);
    }
  });
  (void)cleanup;
  return path;
}

absl::Status Gloo() {
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<distributed::Store> store,
                           distributed::Store::File(Dir("gloo")));
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                           distributed::CreateGlooGroup(0, 1, store));
  GENESIS_ASSIGN_OR_RETURN(Storage s, storage::Ones({2}, DType::kFloat32, Device::Cpu()));
  Work last;
  GENESIS_ASSIGN_OR_RETURN(double ns, PerCall(
      [&]() -> absl::Status {
        GENESIS_ASSIGN_OR_RETURN(last, group->AllReduce(s, ReduceOp::kSum));
        return absl::OkStatus();
      },
      [&] { return last.Wait(); }));
  Print("gloo group of one: all_reduce issued (8 B)", ns);
  GENESIS_ASSIGN_OR_RETURN(double waited, PerCall(
      [&]() -> absl::Status {
        GENESIS_ASSIGN_OR_RETURN(Work w, group->AllReduce(s, ReduceOp::kSum));
        return w.Wait();
      },
      [] { return absl::OkStatus(); }));
  Print("gloo group of one: all_reduce issued and waited for (8 B)", waited);
  return absl::OkStatus();
}

absl::Status Nccl() {
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<distributed::Store> store,
                           distributed::Store::File(Dir("nccl")));
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                           distributed::CreateNcclGroup(0, 1, Device::Cuda(0), *store));
  GENESIS_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(0));
  storage::StorageOptions options;
  options.stream = stream.native();
  GENESIS_ASSIGN_OR_RETURN(Storage s,
                           storage::Ones({2}, DType::kFloat32, Device::Cuda(0), options));
  auto drain = [&] { return stream.Synchronize(); };
  if (const double seconds = absl::GetFlag(FLAGS_profile_seconds); seconds > 0) {
    std::printf("issuing for %.1f s\n", seconds);
    std::fflush(stdout);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int64_t issued = 0;
    while (std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < 1000; ++i) {
        GENESIS_RETURN_IF_ERROR(group->AllReduce(s, ReduceOp::kSum).status());
      }
      GENESIS_RETURN_IF_ERROR(drain());
      issued += 1000;
    }
    std::printf("%lld all_reduces issued\n", static_cast<long long>(issued));
    return absl::OkStatus();
  }
  GENESIS_ASSIGN_OR_RETURN(double ours, PerCall(
      [&]() -> absl::Status { return group->AllReduce(s, ReduceOp::kSum).status(); }, drain));
  Print("genesis nccl group of one: all_reduce issued (8 B)", ours);

  GENESIS_ASSIGN_OR_RETURN(std::vector<char> id, distributed::NewNcclUniqueId());
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<RawNccl> raw, RawNccl::Create(0, 1, 0, id, 8));
  // Nanoseconds per ncclAllReduce of the raw communicator, median of --repetitions.
  auto raw_median = [&]() -> absl::StatusOr<double> {
    std::vector<double> ns;
    for (int rep = 0; rep <= absl::GetFlag(FLAGS_repetitions); ++rep) {
      GENESIS_ASSIGN_OR_RETURN(double seconds,
                               raw->Time("all_reduce", 8, 0, absl::GetFlag(FLAGS_ops)));
      if (rep > 0) ns.push_back(seconds * 1e9);  // The first is warm-up.
    }
    return Median(std::move(ns));
  };
  GENESIS_ASSIGN_OR_RETURN(const double plain, raw_median());
  Print("nccl called directly: ncclAllReduce (8 B)", plain);
  Print("  genesis above nccl", ours - plain);
  GENESIS_RETURN_IF_ERROR(raw->RecordEvents(true));
  GENESIS_ASSIGN_OR_RETURN(const double evented, raw_median());
  Print("nccl called directly, then cudaEventRecord (8 B)", evented);
  Print("  genesis above that", ours - evented);
  GENESIS_RETURN_IF_ERROR(raw->RecordEvents(false));
  // NCCL called directly on a communicator made as genesis makes the one its operations
  // run on: does the split cost NCCL's own call anything?
  GENESIS_ASSIGN_OR_RETURN(std::vector<char> split_id, distributed::NewNcclUniqueId());
  GENESIS_ASSIGN_OR_RETURN(raw, RawNccl::Create(0, 1, 0, split_id, 8, RawNccl::Memory::kCudaMalloc,
                                                RawNccl::Comm::kSplit));
  GENESIS_ASSIGN_OR_RETURN(const double split, raw_median());
  Print("nccl called directly on a split communicator (8 B)", split);
  Print("  genesis above that", ours - split);

  // The CUDA runtime calls of the path, each alone.
  GENESIS_ASSIGN_OR_RETURN(cuda::Event event, cuda::Event::Create(0));
  GENESIS_ASSIGN_OR_RETURN(double record, PerCall(
      [&]() -> absl::Status { return event.Record(stream.native()); }, drain));
  Print("  cudaEventRecord (cuda::Event::Record)", record);
  // The driver's own call, without the runtime's layer.
  if (absl::StatusOr<double> driver = raw->TimeDriverEventRecord(absl::GetFlag(FLAGS_ops));
      driver.ok()) {
    Print("  cuEventRecord (the driver's entry point)", *driver * 1e9);
  } else {
    std::printf("  cuEventRecord: %s\n", driver.status().ToString().c_str());
  }
  // A stream memory operation would mark the operation's end without an event.
  if (absl::StatusOr<double> write = raw->TimeDriverStreamWrite(absl::GetFlag(FLAGS_ops));
      write.ok()) {
    Print("  cuStreamWriteValue64 into mapped host memory", *write * 1e9);
  } else {
    std::printf("  cuStreamWriteValue64: %s\n", write.status().ToString().c_str());
  }
  GENESIS_ASSIGN_OR_RETURN(double query, PerCall(
      [&]() -> absl::Status { return event.Query().status(); }, drain));
  Print("  cudaEventQuery", query);
  GENESIS_ASSIGN_OR_RETURN(double capturing, PerCall(
      [&]() -> absl::Status { (void)cuda::IsCapturing(stream.native()); return absl::OkStatus(); },
      drain));
  Print("  cuda::IsCapturing (cudaStreamIsCapturing)", capturing);
  GENESIS_ASSIGN_OR_RETURN(double guard, PerCall(
      [&]() -> absl::Status { return cuda::DeviceGuard::Create(0).status(); }, drain));
  Print("  cuda::DeviceGuard on the current device", guard);
  return absl::OkStatus();
}

}  // namespace
}  // namespace genesis::benchmarks

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status status = genesis::benchmarks::Gloo();
  if (status.ok()) {
    if (genesis::cuda::DeviceCount() == 0) {
      std::printf("nccl rows skipped: %s\n", genesis::cuda::NoDeviceReason().c_str());
    } else {
      status = genesis::benchmarks::Nccl();
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
