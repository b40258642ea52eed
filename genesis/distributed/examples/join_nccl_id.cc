// One genesis rank of an NCCL communicator that another NCCL client made: the client
// (PyTorch, CuPy: tools/nccl_interop_peer.py) writes the unique id's 128 bytes as hex
// to a file; this rank reads it, joins with GroupOptions::nccl_interop, and runs the
// same all_reduce and broadcast as the client, checking every value.
//
//   nccl_interop_peer.py --rank=0 --size=2 --device=0 --id_file=/tmp/id &
//   join_nccl_id --rank=1 --size=2 --device=1 --id_file=/tmp/id
//
// Both sides must load the same NCCL version (LD_LIBRARY_PATH picks genesis's; `genesis
// info` shows which). Prints one line and exits non-zero if anything was wrong.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "genesis/core/status.h"
#include "genesis/distributed/nccl/nccl_communicator.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/storage/storage.h"

ABSL_FLAG(int, rank, 1, "this rank");
ABSL_FLAG(int, size, 2, "ranks in the communicator");
ABSL_FLAG(int, device, 1, "the GPU");
ABSL_FLAG(std::string, id_file, "", "file holding the unique id as 256 hex digits");
ABSL_FLAG(int64_t, count, 1 << 20, "float32 elements per operation");
ABSL_FLAG(double, timeout_s, 60, "seconds to wait for the id and the other ranks");

namespace {

using genesis::DType;
using genesis::storage::Storage;
namespace dist = genesis::distributed;

absl::StatusOr<std::vector<char>> ReadId(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    std::ifstream file(path);
    std::string hex;
    if (file >> hex && hex.size() == 2 * dist::nccl_backend::kUniqueIdBytes) {
      const std::string bytes = absl::HexStringToBytes(hex);
      return std::vector<char>(bytes.begin(), bytes.end());
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no unique id of 256 hex digits in ", path, " within ",
                       absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::Status Run() {
  const int rank = absl::GetFlag(FLAGS_rank);
  const int size = absl::GetFlag(FLAGS_size);
  const int64_t count = absl::GetFlag(FLAGS_count);
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  GENESIS_ASSIGN_OR_RETURN(std::vector<char> id, ReadId(absl::GetFlag(FLAGS_id_file), timeout));
  dist::GroupOptions options;
  options.nccl_interop = true;
  options.timeout = timeout;
  const genesis::Device gpu = genesis::Device::Cuda(absl::GetFlag(FLAGS_device));
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<dist::ProcessGroup> group,
                           dist::CreateNcclGroup(rank, size, gpu, id, options));
  // all_reduce (sum) of rank + 1 everywhere: size (size + 1) / 2.
  GENESIS_ASSIGN_OR_RETURN(Storage x, genesis::storage::Full({count}, rank + 1,
                                                              DType::kFloat32, gpu));
  GENESIS_ASSIGN_OR_RETURN(dist::Work reduce, group->AllReduce(x, dist::ReduceOp::kSum));
  GENESIS_RETURN_IF_ERROR(reduce.Wait());
  GENESIS_ASSIGN_OR_RETURN(std::vector<float> sums, x.ToVector<float>());
  const float want = size * (size + 1) / 2.0f;
  for (float v : sums) {
    if (v != want) return absl::InternalError(absl::StrCat("all_reduce gave ", v, ", not ", want));
  }
  // broadcast of 7 from rank 0.
  GENESIS_ASSIGN_OR_RETURN(Storage y, genesis::storage::Full({count}, rank == 0 ? 7 : 0,
                                                              DType::kFloat32, gpu));
  GENESIS_ASSIGN_OR_RETURN(dist::Work bcast, group->Broadcast(y, 0));
  GENESIS_RETURN_IF_ERROR(bcast.Wait());
  GENESIS_ASSIGN_OR_RETURN(std::vector<float> got, y.ToVector<float>());
  for (float v : got) {
    if (v != 7) return absl::InternalError(absl::StrCat("broadcast gave ", v, ", not 7"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = Run();
  std::printf("genesis rank %d (NCCL %s from %s): %s\n", absl::GetFlag(FLAGS_rank),
              dist::nccl_backend::NcclVersion().value_or("none").c_str(),
              dist::nccl_backend::NcclLibrary().c_str(),
              status.ok() ? "all_reduce and broadcast ok" : status.ToString().c_str());
  return status.ok() ? 0 : 1;
}
