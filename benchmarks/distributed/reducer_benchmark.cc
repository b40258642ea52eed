// The Reducer (genesis/distributed/reducer.h) against a synthetic backward pass: how much
// of the gradients' all_reduce the backward pass leaves exposed.
//
//   reducer_benchmark --nproc=2                     # forks one rank per GPU
//   torchrun --no-python --nproc_per_node=4 reducer_benchmark
//
// A model of --total (100 MiB) of float32 gradients in --layers layers (one gradient
// each, sizes drawn log-uniformly from 4 KiB to 4 MiB, then scaled to the total). Its
// backward pass is one kernel per layer, last layer first, that keeps every SM (or the
// share --layer_sms of them) busy for --backward_us / layers, on the gradients' stream;
// after each, the layer's gradient is marked ready. Timed, as medians of --iters steps
// that start together on every rank:
//   backward          the kernels alone;
//   flat all_reduce   one all_reduce of all the gradients as one buffer;
//   after backward    backward, then BucketedAllReduce (nothing overlaps);
//   reducer           backward with the Reducer, up to the end of Finish's work.
// Exposed communication is a step's time less the backward's; the goal (PyTorch DDP's)
// is at most 10% of the flat all_reduce. Where it goes: "bw under" is the backward's
// kernels in the reducer's step, from the GPU's events (first kernel's start to last
// kernel's end), beside "bw alone", the same events without the reducer; what the step
// takes beyond "bw under" is the tail of collectives left when the backward ended. Gradients as separate storages (packed
// buckets) and as views of one flat buffer (in place); --bucket (25 MiB) buckets, the
// first --first_bucket (1 MiB). The last bucket cannot start before backward ends, so
// its collective is always exposed: the reducer's tail tapers down to --last_bucket
// (1 MiB, as the Reducer's default; 0 for none), growing by --taper (2) a bucket. Also
// printed: the reducer's buckets, and the host's time to queue its step (backward's
// kernels, marks and Finish).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "benchmarks/distributed/fork_ranks.h"
#include "benchmarks/distributed/synthetic_backward.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/reducer.h"
#include "genesis/storage/storage.h"

ABSL_FLAG(int, nproc, 0, "ranks to fork when no launcher started this (0: one per GPU)");
ABSL_FLAG(std::string, layers, "50,100,200", "models to measure, by number of layers");
ABSL_FLAG(std::string, total, "100MiB", "bytes of gradients in each model");
ABSL_FLAG(int, backward_us, 2000, "the backward pass's compute, split evenly over layers");
ABSL_FLAG(int, iters, 20, "timed steps per row");
ABSL_FLAG(int, warmup, 3, "untimed steps per row first");
ABSL_FLAG(std::string, bucket, "25MiB", "the most bytes of a bucket");
ABSL_FLAG(std::string, first_bucket, "1MiB", "the first bucket's limit");
ABSL_FLAG(std::string, last_bucket, "1MiB",
          "the reducer's last bucket's limit, the tail tapering up to --bucket (0: no taper)");
ABSL_FLAG(int, taper, 2, "how much larger each bucket of the tail may be than the next");
ABSL_FLAG(double, layer_sms, 1.0,
          "the share of the GPU's multiprocessors a backward kernel spins on (1: all)");

namespace genesis::benchmarks {
namespace {

using distributed::BucketOptions;
using distributed::ProcessGroup;
using distributed::Reducer;
using distributed::ReduceOp;
using distributed::Work;
using storage::Storage;


struct Model {
  std::vector<Storage> separate;  // Gradients in the order backward produces them.
  Storage flat;
  std::vector<Storage> views;  // Of `flat`, the same sizes.
};

absl::StatusOr<Model> MakeModel(int layers, uint64_t total, Device device, CUstream_st* stream) {
  std::mt19937 random(7);
  std::vector<double> weights(layers);
  double sum = 0;
  for (double& w : weights) {
    sum += (w = std::exp(std::uniform_real_distribution<>(std::log(4096.0),
                                                          std::log(4194304.0))(random)));
  }
  storage::StorageOptions options;
  options.stream = stream;
  Model m;
  std::vector<int64_t> counts;
  int64_t elements = 0;
  for (double w : weights) {
    counts.push_back(std::max<int64_t>(1, static_cast<int64_t>(w / sum * total / 4)));
    elements += counts.back();
    GENESIS_ASSIGN_OR_RETURN(Storage g, storage::Ones({counts.back()}, DType::kFloat32,
                                                      device, options));
    m.separate.push_back(g);
  }
  GENESIS_ASSIGN_OR_RETURN(m.flat, storage::Ones({elements}, DType::kFloat32, device, options));
  int64_t at = 0;
  for (int64_t c : counts) {
    GENESIS_ASSIGN_OR_RETURN(Storage v, m.flat.Slice(0, at, at + c));
    m.views.push_back(v);
    at += c;
  }
  return m;
}

struct Timing {
  double seconds;  // To the end of the work on the stream.
  double host;     // To the return of the call that queues it.
  double marked;   // Between the step's two BackwardEvents, on the GPU (0: not recorded).
};

// Events a step records on its stream before its first backward kernel and after its
// last, read once the step's work has ended.
struct BackwardEvents {
  static absl::StatusOr<BackwardEvents> Create(int device) {
    GENESIS_ASSIGN_OR_RETURN(cuda::Event begin, cuda::Event::Create(device, /*timing=*/true));
    GENESIS_ASSIGN_OR_RETURN(cuda::Event end, cuda::Event::Create(device, /*timing=*/true));
    return BackwardEvents{std::move(begin), std::move(end)};
  }
  cuda::Event begin;
  cuda::Event end;
};

// Times `step` (which queues work and returns) from a common start on every rank to
// the end of the work on `stream`, and to its return: the medians of --iters steps
// after --warmup. With `events`, also the GPU's time between the two that the step
// records.
absl::StatusOr<Timing> Time(ProcessGroup& group, const cuda::Stream& stream,
                            const std::function<absl::Status()>& step,
                            const BackwardEvents* events = nullptr) {
  std::vector<double> times;
  std::vector<double> hosts;
  std::vector<double> marked;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_iters); ++i) {
    GENESIS_RETURN_IF_ERROR(stream.Synchronize());
    GENESIS_ASSIGN_OR_RETURN(Work barrier, group.Barrier());
    GENESIS_RETURN_IF_ERROR(barrier.Wait());
    GENESIS_RETURN_IF_ERROR(cuda::SynchronizeDevice(group.device().index()));
    const auto start = std::chrono::steady_clock::now();
    GENESIS_RETURN_IF_ERROR(step());
    const auto queued = std::chrono::steady_clock::now();
    GENESIS_RETURN_IF_ERROR(stream.Synchronize());
    const auto end = std::chrono::steady_clock::now();
    if (i >= absl::GetFlag(FLAGS_warmup)) {
      times.push_back(std::chrono::duration<double>(end - start).count());
      hosts.push_back(std::chrono::duration<double>(queued - start).count());
      if (events != nullptr) {
        GENESIS_ASSIGN_OR_RETURN(float ms, cuda::Event::ElapsedMs(events->begin, events->end));
        marked.push_back(ms * 1e-3);
      }
    }
  }
  return Timing{Median(times), Median(hosts), marked.empty() ? 0 : Median(marked)};
}

absl::Status RunRank() {
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                           distributed::ProcessGroupFromEnvironment(distributed::Backend::kNccl));
  const Device device = group->device();
  const bool root = group->rank() == 0;
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceProperties props,
                           cuda::GetDeviceProperties(device.index()));
  GENESIS_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(device.index()));
  GENESIS_ASSIGN_OR_RETURN(uint64_t total, ParseByteSize(absl::GetFlag(FLAGS_total)));
  BucketOptions buckets;
  GENESIS_ASSIGN_OR_RETURN(buckets.bucket_bytes, ParseByteSize(absl::GetFlag(FLAGS_bucket)));
  GENESIS_ASSIGN_OR_RETURN(buckets.first_bucket_bytes,
                           ParseByteSize(absl::GetFlag(FLAGS_first_bucket)));
  BucketOptions tapered = buckets;
  GENESIS_ASSIGN_OR_RETURN(tapered.last_bucket_bytes,
                           ParseByteSize(absl::GetFlag(FLAGS_last_bucket)));
  tapered.taper = static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_taper)));
  if (root) {
    std::printf("# reducer with a synthetic backward: %d ranks, %s of float32 gradients, "
                "%d us of backward compute, %s buckets (first %s; the reducer's last %s, "
                "taper %zu); times in us; host: the reducer's step until Finish returned\n",
                group->size(), FormatByteSize(total).c_str(), absl::GetFlag(FLAGS_backward_us),
                FormatByteSize(buckets.bucket_bytes).c_str(),
                FormatByteSize(buckets.first_bucket_bytes).c_str(),
                tapered.last_bucket_bytes == 0
                    ? "not tapered"
                    : FormatByteSize(tapered.last_bucket_bytes).c_str(),
                tapered.taper);
    // Which all_reduces move through the copy engines (GENESIS_NCCL_COPY_ENGINE_BYTES).
    GENESIS_ASSIGN_OR_RETURN(distributed::nccl_backend::CopyEngineStats copy_engine,
                             distributed::NcclCopyEngine(*group));
    std::printf("# copy engines' all_reduce %s\n", copy_engine.ToString().c_str());
    std::printf("%-7s %-9s %10s %10s %10s %10s %9s %10s %10s %9s %8s %10s %10s %10s\n",
                "layers", "gradients", "backward", "flat a_r", "after bw", "exposed", "of flat",
                "reducer", "exposed", "of flat", "buckets", "host", "bw alone", "bw under");
  }
  for (absl::string_view spec : absl::StrSplit(absl::GetFlag(FLAGS_layers), ',')) {
    int layers = 0;
    if (!absl::SimpleAtoi(spec, &layers) || layers <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--layers: bad count '", spec, "'"));
    }
    GENESIS_ASSIGN_OR_RETURN(Model model, MakeModel(layers, total, device, stream.native()));
    const long long layer_ns = absl::GetFlag(FLAGS_backward_us) * 1000LL / layers;
    const int layer_blocks = std::clamp(
        static_cast<int>(props.multiprocessors * absl::GetFlag(FLAGS_layer_sms) + 0.5), 1,
        props.multiprocessors);
    auto layer = [&](int l) -> absl::Status {
      const cudaError_t e = LaunchLayer(layer_blocks, layer_ns, stream.native());
      if (e != cudaSuccess) {
        return absl::InternalError(absl::StrCat("layer kernel: ", cudaGetErrorString(e)));
      }
      return absl::OkStatus();
    };
    auto backward = [&]() -> absl::Status {
      for (int l = 0; l < layers; ++l) GENESIS_RETURN_IF_ERROR(layer(l));
      return absl::OkStatus();
    };
    GENESIS_ASSIGN_OR_RETURN(BackwardEvents events, BackwardEvents::Create(device.index()));
    GENESIS_ASSIGN_OR_RETURN(const Timing compute,
                             Time(
                                 *group, stream,
                                 [&]() -> absl::Status {
                                   GENESIS_RETURN_IF_ERROR(events.begin.Record(stream));
                                   GENESIS_RETURN_IF_ERROR(backward());
                                   return events.end.Record(stream);
                                 },
                                 &events));
    GENESIS_ASSIGN_OR_RETURN(const Timing flat, Time(*group, stream, [&]() -> absl::Status {
      return group->AllReduce(model.flat, ReduceOp::kSum).status();
    }));
    for (const auto& [name, grads] :
         {std::pair<const char*, const std::vector<Storage>*>{"separate", &model.separate},
          {"views", &model.views}}) {
      GENESIS_ASSIGN_OR_RETURN(const Timing serial, Time(*group, stream, [&]() -> absl::Status {
        GENESIS_RETURN_IF_ERROR(backward());
        return distributed::BucketedAllReduce(*group, *grads, ReduceOp::kSum, buckets).status();
      }));
      GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<Reducer> reducer,
                               Reducer::Create(*group, *grads, ReduceOp::kSum, tapered));
      GENESIS_ASSIGN_OR_RETURN(const Timing overlapped,
                               Time(
                                   *group, stream,
                                   [&]() -> absl::Status {
                                     GENESIS_RETURN_IF_ERROR(events.begin.Record(stream));
                                     for (int l = 0; l < layers; ++l) {
                                       GENESIS_RETURN_IF_ERROR(layer(l));
                                       if (l + 1 == layers) {
                                         GENESIS_RETURN_IF_ERROR(events.end.Record(stream));
                                       }
                                       GENESIS_RETURN_IF_ERROR(reducer->MarkReady(l));
                                     }
                                     return reducer->Finish().status();
                                   },
                                   &events));
      if (root) {
        const double c = compute.seconds;
        const double f = flat.seconds;
        std::printf(
            "%-7d %-9s %10.1f %10.1f %10.1f %10.1f %9.3f %10.1f %10.1f %9.3f %8zu %10.1f %10.1f "
            "%10.1f\n",
            layers, name, c * 1e6, f * 1e6, serial.seconds * 1e6, (serial.seconds - c) * 1e6,
            (serial.seconds - c) / f, overlapped.seconds * 1e6, (overlapped.seconds - c) * 1e6,
            (overlapped.seconds - c) / f, reducer->buckets().size(), overlapped.host * 1e6,
            compute.marked * 1e6, overlapped.marked * 1e6);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace genesis::benchmarks

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return genesis::benchmarks::RankMain(absl::GetFlag(FLAGS_nproc), /*gloo=*/false,
                                       &genesis::benchmarks::RunRank);
}
