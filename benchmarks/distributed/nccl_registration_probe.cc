// NCCL's registered sends and receives between two processes on cuMem memory, with no
// genesis code on the path: for telling NCCL's (or a tool's) behaviour from genesis's,
// under compute-sanitizer above all. Each of two forked ranks (GPUs 0 and 1) maps 8 MiB
// buffers with the driver's virtual memory API, registers them with ncclCommRegister on
// a communicator split from the world (as genesis's `auto` registration does), runs
// `--layout`'s operations and checks every byte it received and every buffer it did
// not mean to change. Exit status 0 when both ranks found what they expected.
//
//   nccl_registration_probe --layout=mixed_pieces
//   compute-sanitizer --tool memcheck --target-processes all --report-api-errors no
//       nccl_registration_probe --layout=mixed_pieces    (one command)
//
// Layouts (the all_to_all of 8 MiB, half to each rank, runs registered in every one):
//   own              each buffer an allocation in a reservation of its own (as ncclMemAlloc)
//   pieces           8 MiB allocations side by side in one reservation, one cuMemSetAccess
//                    over all of them (as genesis's expandable segments map pieces)
//   pieces_access    the same with a cuMemSetAccess per allocation
//   shared           input and output in one 16 MiB allocation
//   mixed_pieces     pieces, after a batch mixing registered 8 MiB messages with plain
//                    (cudaMalloc) 1 MiB ones
//   mixed_own        the same batch on allocations of their own
//   registered_first pieces, after a batch of the registered 8 MiB messages alone
// --reserve=N reserves N times what each reservation maps, leaving the rest unmapped
// after the allocations, as genesis's expandable segments do.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "genesis/cuda/internal/driver.h"

ABSL_FLAG(std::string, layout, "mixed_pieces",
          "own | pieces | pieces_access | shared | mixed_pieces | mixed_own | registered_first");
ABSL_FLAG(int, reserve, 1,
          "each reservation holds this many times what is mapped in it (the rest left "
          "unmapped after it, as in an expandable segment)");

namespace {

constexpr size_t kBig = size_t{8} << 20;
constexpr size_t kSmall = size_t{1} << 20;

// A failed call ends the rank with its name.
[[noreturn]] void Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  std::exit(2);
}

struct Rank {
  int rank;
  const genesis::cuda::VirtualMemoryApi* vm;
  int reserve;  // --reserve.

  void Cu(CUresult r, const char* call) const {
    if (r != CUDA_SUCCESS) Fail(rank, absl::StrCat(call, " failed: ", static_cast<int>(r)));
  }
  void Rt(cudaError_t e, const char* call) const {
    if (e != cudaSuccess) Fail(rank, absl::StrCat(call, " failed: ", cudaGetErrorString(e)));
  }
  void Nccl(ncclResult_t r, const char* call) const {
    if (r != ncclSuccess) Fail(rank, absl::StrCat(call, " failed: ", ncclGetErrorString(r)));
  }

  void Access(CUdeviceptr p, size_t bytes) const {
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = rank;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    Cu(vm->set_access(p, bytes, &access, 1), "cuMemSetAccess");
  }

  // `count` allocations of `bytes` (exportable as file descriptors, as NCCL needs),
  // mapped side by side at the start of one reservation; access set per allocation
  // or once.
  float* Map(int count, size_t bytes, bool access_each) const {
    CUdeviceptr base;
    Cu(vm->address_reserve(&base, bytes * count * reserve, bytes, 0, 0), "cuMemAddressReserve");
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = rank;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    for (int i = 0; i < count; ++i) {
      CUmemGenericAllocationHandle handle;
      Cu(vm->create(&handle, bytes, &prop, 0), "cuMemCreate");
      Cu(vm->map(base + i * bytes, bytes, 0, handle, 0), "cuMemMap");
      Cu(vm->release(handle), "cuMemRelease");
      if (access_each) Access(base + i * bytes, bytes);
    }
    if (!access_each) Access(base, bytes * count);
    return reinterpret_cast<float*>(base);
  }

  // Value of element i of a buffer filled with `tag`.
  static float Value(int tag, size_t i) { return static_cast<float>(tag) + i % 97; }

  void Fill(float* d, size_t bytes, int tag) const {
    std::vector<float> host(bytes / 4);
    for (size_t i = 0; i < host.size(); ++i) host[i] = Value(tag, i);
    Rt(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }

  // 0 if the buffer holds `tag`'s values; 1, and a line naming the first wrong element.
  int Check(const float* d, size_t bytes, int tag, const char* what) const {
    std::vector<float> host(bytes / 4);
    Rt(cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (size_t i = 0; i < host.size(); ++i) {
      if (host[i] != Value(tag, i)) {
        std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                     host[i], Value(tag, i));
        return 1;
      }
    }
    return 0;
  }

  int Run(const ncclUniqueId& id, const std::string& layout) const {
    Rt(cudaSetDevice(rank), "cudaSetDevice");
    ncclComm_t world, reg;
    Nccl(ncclCommInitRank(&world, 2, id, rank), "ncclCommInitRank");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    Nccl(ncclCommSplit(world, 0, rank, &reg, &config), "ncclCommSplit");
    cudaStream_t stream;
    Rt(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const int peer = 1 - rank;
    const bool mixed = layout == "mixed_pieces" || layout == "mixed_own";
    const bool batch = mixed || layout == "registered_first";
    float *in, *out, *big_out = nullptr, *big_in = nullptr;
    float *small_out = nullptr, *small_in = nullptr;
    std::vector<std::pair<float*, size_t>> ranges;  // Registered before the all_to_all.
    if (layout == "own") {
      in = Map(1, kBig, false);
      out = Map(1, kBig, false);
      ranges = {{in, kBig}, {out, kBig}};
    } else if (layout == "shared") {
      in = Map(1, 2 * kBig, false);
      out = in + kBig / 4;
      ranges = {{in, 2 * kBig}};
    } else if (layout == "pieces" || layout == "pieces_access" || layout == "mixed_pieces" ||
               layout == "mixed_own" || layout == "registered_first") {
      // The batch's two buffers, then the all_to_all's.
      float* pieces[4];
      if (layout == "mixed_own") {
        for (float*& p : pieces) p = Map(1, kBig, false);
      } else {
        float* const base = Map(4, kBig, layout == "pieces_access");
        for (int i = 0; i < 4; ++i) pieces[i] = base + i * kBig / 4;
      }
      big_out = pieces[0];
      big_in = pieces[1];
      in = pieces[2];
      out = pieces[3];
      ranges = {{in, kBig}, {out, kBig}};
    } else {
      Fail(rank, "unknown --layout " + layout);
    }
    std::vector<void*> handles;
    const auto reg_range = [&](float* p, size_t bytes) {
      void* handle;
      Nccl(ncclCommRegister(reg, p, bytes, &handle), "ncclCommRegister");
      handles.push_back(handle);
    };
    int bad = 0;
    if (batch) {
      reg_range(big_out, kBig);
      reg_range(big_in, kBig);
      Fill(big_out, kBig, 100 * rank + 1);
      if (mixed) {
        Rt(cudaMalloc(&small_out, kSmall), "cudaMalloc");
        Rt(cudaMalloc(&small_in, kSmall), "cudaMalloc");
        Fill(small_out, kSmall, 100 * rank + 2);
      }
      // Rank 1 posts the same messages in the opposite order.
      struct Message {
        bool send;
        float* buffer;
        size_t bytes;
      };
      std::vector<Message> messages = {{true, big_out, kBig}, {false, small_in, kSmall},
                                        {true, small_out, kSmall}, {false, big_in, kBig}};
      if (rank == 1) std::swap(messages[0], messages[3]), std::swap(messages[1], messages[2]);
      Nccl(ncclGroupStart(), "ncclGroupStart");
      for (const Message& m : messages) {
        if (m.buffer == nullptr) continue;  // No plain messages.
        Nccl(m.send ? ncclSend(m.buffer, m.bytes / 4, ncclFloat, peer, reg, stream)
                    : ncclRecv(m.buffer, m.bytes / 4, ncclFloat, peer, reg, stream),
             m.send ? "ncclSend" : "ncclRecv");
      }
      Nccl(ncclGroupEnd(), "ncclGroupEnd");
      Rt(cudaStreamSynchronize(stream), "cudaStreamSynchronize (batch)");
      bad += Check(big_in, kBig, 100 * peer + 1, "batch: 8 MiB received");
      if (mixed) bad += Check(small_in, kSmall, 100 * peer + 2, "batch: 1 MiB received");
    }
    for (const auto& [p, bytes] : ranges) reg_range(p, bytes);
    // all_to_all: half of `in` to each rank, three times.
    const size_t half = kBig / 2;
    Fill(in, half, 100 * rank + 10);
    Fill(in + half / 4, half, 100 * rank + 20);
    for (int round = 0; round < 3; ++round) {
      Nccl(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < 2; ++r) {
        Nccl(ncclSend(in + r * half / 4, half / 4, ncclFloat, r, reg, stream), "ncclSend");
        Nccl(ncclRecv(out + r * half / 4, half / 4, ncclFloat, r, reg, stream), "ncclRecv");
      }
      Nccl(ncclGroupEnd(), "ncclGroupEnd");
    }
    Rt(cudaStreamSynchronize(stream), "cudaStreamSynchronize (all_to_all)");
    for (int r = 0; r < 2; ++r) {
      bad += Check(out + r * half / 4, half, 100 * r + 10 * (1 + rank), "all_to_all: received");
    }
    // Nothing else changed.
    bad += Check(in, half, 100 * rank + 10, "all_to_all: input, after") +
           Check(in + half / 4, half, 100 * rank + 20, "all_to_all: input, after");
    if (batch) {
      bad += Check(big_out, kBig, 100 * rank + 1, "batch: 8 MiB sent, after") +
             Check(big_in, kBig, 100 * peer + 1, "batch: 8 MiB received, after");
    }
    if (mixed) {
      bad += Check(small_out, kSmall, 100 * rank + 2, "batch: 1 MiB sent, after") +
             Check(small_in, kSmall, 100 * peer + 2, "batch: 1 MiB received, after");
    }
    for (void* handle : handles) Nccl(ncclCommDeregister(reg, handle), "ncclCommDeregister");
    Nccl(ncclCommDestroy(reg), "ncclCommDestroy");
    Nccl(ncclCommDestroy(world), "ncclCommDestroy");
    std::printf("rank %d, layout %s: %s\n", rank, layout.c_str(), bad ? "WRONG" : "ok");
    return bad ? 1 : 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string layout = absl::GetFlag(FLAGS_layout);
  int fds[2];
  if (pipe(fds) != 0) return 2;
  pid_t ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = fork();
    if (ranks[r] != 0) continue;
    // Rank 0 makes the id and hands it to rank 1.
    ncclUniqueId id;
    if (r == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess ||
          write(fds[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
        Fail(r, "ncclGetUniqueId");
      }
    } else if (read(fds[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
      Fail(r, "reading the unique id");
    }
    absl::StatusOr<const genesis::cuda::VirtualMemoryApi*> vm =
        genesis::cuda::LoadVirtualMemoryApi();
    if (!vm.ok()) Fail(r, vm.status().ToString());
    _exit(Rank{r, *vm, std::max(1, absl::GetFlag(FLAGS_reserve))}.Run(id, layout));
  }
  int failed = 0;
  for (pid_t pid : ranks) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::printf("layout %s: %s\n", layout.c_str(), failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
