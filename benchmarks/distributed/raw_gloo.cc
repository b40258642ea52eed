#include "benchmarks/distributed/raw_gloo.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/distributed/fork_ranks.h"
#include "genesis/distributed/gloo/gloo_reduce.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/broadcast.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace genesis::benchmarks {
namespace {

class RawGlooImpl final : public RawGloo {
 public:
  RawGlooImpl(std::shared_ptr<gloo::Context> context, size_t max_bytes)
      : context_(std::move(context)), a_(max_bytes / 4, 1.0f), b_(max_bytes / 4, 0.0f) {}

  absl::StatusOr<double> Time(const std::string& op, size_t bytes, int warmup,
                              int iters) override {
    if (op == "reduce_scatter") {
      return absl::UnimplementedError("Gloo has no reduce_scatter of arbitrary sizes");
    }
    try {
      for (int i = 0; i < warmup; ++i) Issue(op, bytes / 4);
      std::vector<double> seconds;
      seconds.reserve(iters);
      for (int i = 0; i < iters; ++i) {
        const auto start = std::chrono::steady_clock::now();
        Issue(op, bytes / 4);
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return Median(std::move(seconds));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("gloo ", op, ": ", e.what()));
    }
  }

 private:
  void Issue(const std::string& op, size_t count) {
    const int n = context_->size;
    const uint32_t tag = next_tag_++;
    if (op == "all_reduce") {
      gloo::AllreduceOptions o(context_);
      o.setOutput(a_.data(), count);
      o.setReduceFunction(sum_);
      o.setTag(tag);
      gloo::allreduce(o);
    } else if (op == "all_gather") {
      gloo::AllgatherOptions o(context_);
      o.setInput(a_.data(), count / n);
      o.setOutput(b_.data(), count / n * n);
      o.setTag(tag);
      gloo::allgather(o);
    } else if (op == "broadcast") {
      gloo::BroadcastOptions o(context_);
      o.setOutput(a_.data(), count);
      o.setRoot(0);
      o.setTag(tag);
      gloo::broadcast(o);
    } else if (op == "reduce") {
      gloo::ReduceOptions o(context_);
      o.setInput(a_.data(), count);
      o.setOutput(b_.data(), count);
      o.setRoot(0);
      o.setReduceFunction(sum_);
      o.setTag(tag);
      gloo::reduce(o);
    } else if (op == "all_to_all") {
      gloo::AlltoallOptions o(context_);
      o.setInput(a_.data(), count);
      o.setOutput(b_.data(), count);
      o.setTag(tag);
      gloo::alltoall(o);
    } else if (op == "send_recv") {
      const int r = context_->rank;
      auto out = context_->createUnboundBuffer(a_.data(), count * 4);
      auto in = context_->createUnboundBuffer(b_.data(), count * 4);
      out->send((r + 1) % n, tag);
      in->recv((r + n - 1) % n, tag);
      out->waitSend();
      in->waitRecv();
    } else {
      throw std::runtime_error("unknown operation " + op);
    }
  }

  std::shared_ptr<gloo::Context> context_;
  const distributed::gloo_backend::ReduceFunction sum_ =
      distributed::gloo_backend::ReductionFor(DType::kFloat32, distributed::ReduceOp::kSum);
  std::vector<float> a_;
  std::vector<float> b_;
  uint32_t next_tag_ = 1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RawGloo>> RawGloo::Create(int rank, int size,
                                                         const std::string& store_dir,
                                                         size_t max_bytes) {
  try {
    gloo::rendezvous::FileStore store(store_dir);
    gloo::rendezvous::PrefixStore prefixed("raw_gloo", store);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<RawGloo>(new RawGlooImpl(std::move(context), max_bytes));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("raw gloo context: ", e.what()));
  }
}

}  // namespace genesis::benchmarks
