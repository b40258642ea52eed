#include "genesis/distributed/gloo/gloo_communicator.h"

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/distributed/gloo/gloo_reduce.h"
#include "genesis/distributed/internal/group_health.h"
#include "genesis/distributed/internal/terminate_message.h"
#include "genesis/distributed/internal/work_state.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/config.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace genesis::distributed::gloo_backend {
namespace {

using internal::WorkState;

// Point-to-point slots live apart from the collectives' (which use prefixes 1..n in
// the top byte; gloo/types.h).
constexpr uint64_t kPeerSlotPrefix = uint64_t{0x7f} << 56;

// Gloo wants a typed pointer only for the element size.
template <typename F>
void WithElementSize(size_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

std::string DescribeBuffer(const Buffer& b) {
  return absl::StrCat(b.count, " x ", ToAbsl(DTypeName(b.dtype)));
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(GroupInfo info, std::shared_ptr<Store> store, std::string hostname,
                   std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::Context> context)
      : info_(std::move(info)),
        store_(std::move(store)),
        hostname_(std::move(hostname)),
        device_(std::move(device)),
        context_(std::move(context)),
        health_(info_.Describe()),
        described_(std::make_shared<const std::string>(info_.Describe())),
        collectives_(std::make_shared<JobQueue>(this)),
        peer_waits_(std::make_shared<JobQueue>(this)),
        worker_([this] { RunJobs(*collectives_); }),
        waiter_([this] { RunJobs(*peer_waits_); }) {}

  // Runs what is queued first (a job still queued keeps the communicator alive).
  ~GlooCommunicator() override {
    collectives_->Stop();
    peer_waits_->Stop();
    worker_.join();
    waiter_.join();
  }

  const GroupInfo& info() const override { return info_; }
  absl::Status health() const override { return health_.cause(); }

  absl::Status SupportsReduction(DType dtype, ReduceOp op) const override {
    return CheckReduction(op, dtype);  // Every dtype has a Gloo reduction.
  }

  absl::StatusOr<Work> AllReduce(const Buffer& buffer, ReduceOp op) override {
    return Collective([buffer, op] {
                        return absl::StrCat("all_reduce of ", DescribeBuffer(buffer), " (",
                                            ToAbsl(ReduceOpName(op)), ")");
                      },
                      [this, buffer, op](uint32_t tag) { RunAllReduce(buffer, op, tag); });
  }

  absl::StatusOr<Work> Broadcast(const Buffer& buffer, int root) override {
    return Collective(
        [buffer, root] {
          return absl::StrCat("broadcast of ", DescribeBuffer(buffer), " from rank ", root);
        },
        [this, buffer, root](uint32_t tag) {
          gloo::BroadcastOptions opts(context_);
          opts.setOutput(static_cast<uint8_t*>(buffer.data), buffer.bytes());
          opts.setRoot(root);
          opts.setTag(tag);
          opts.setTimeout(Timeout());
          gloo::broadcast(opts);
        });
  }

  absl::StatusOr<Work> Reduce(const Buffer& buffer, int root, ReduceOp op) override {
    return Collective([buffer, root, op] {
                        return absl::StrCat("reduce of ", DescribeBuffer(buffer), " (",
                                            ToAbsl(ReduceOpName(op)), ") to rank ", root);
                      },
                      [this, buffer, root, op](uint32_t tag) {
                        // Gloo reduces into its output on every rank; the others keep
                        // their buffers, so the output is a scratch copy.
                        std::vector<char> scratch(buffer.bytes());
                        gloo::ReduceOptions opts(context_);
                        WithElementSize(ItemSize(buffer.dtype), [&](auto t) {
                          using T = decltype(t);
                          opts.setInput(static_cast<T*>(buffer.data), buffer.count);
                          opts.setOutput(reinterpret_cast<T*>(scratch.data()), buffer.count);
                        });
                        opts.setRoot(root);
                        opts.setReduceFunction(ReductionFor(buffer.dtype, op));
                        opts.setTag(tag);
                        opts.setTimeout(Timeout());
                        gloo::reduce(opts);
                        if (info_.rank == root) {
                          std::memcpy(buffer.data, scratch.data(), scratch.size());
                          if (op == ReduceOp::kAvg) {
                            DivideInPlace(buffer.data, buffer.count, buffer.dtype, info_.size);
                          }
                        }
                      });
  }

  absl::StatusOr<Work> AllGather(const Buffer& input, const Buffer& output) override {
    return Collective([input] { return absl::StrCat("all_gather of ", DescribeBuffer(input)); },
                      [this, input, output](uint32_t tag) {
                        gloo::AllgatherOptions opts(context_);
                        opts.setInput(static_cast<uint8_t*>(input.data), input.bytes());
                        opts.setOutput(static_cast<uint8_t*>(output.data), output.bytes());
                        opts.setTag(tag);
                        opts.setTimeout(Timeout());
                        gloo::allgather(opts);
                      });
  }

  absl::StatusOr<Work> ReduceScatter(const Buffer& input, const Buffer& output,
                                     ReduceOp op) override {
    return Collective([input, op] {
                        return absl::StrCat("reduce_scatter of ", DescribeBuffer(input), " (",
                                            ToAbsl(ReduceOpName(op)), ")");
                      },
                      [this, input, output, op](uint32_t tag) {
                        // Debian's Gloo has no reduce_scatter for arbitrary sizes: reduce
                        // a copy of the whole input and keep this rank's chunk.
                        std::vector<char> whole(input.bytes());
                        std::memcpy(whole.data(), input.data, whole.size());
                        Buffer copy = input;
                        copy.data = whole.data();
                        RunAllReduce(copy, op, tag);
                        std::memcpy(output.data, whole.data() + info_.rank * output.bytes(),
                                    output.bytes());
                      });
  }

  absl::StatusOr<Work> AllToAll(const Buffer& input, const Buffer& output) override {
    return Collective([input] { return absl::StrCat("all_to_all of ", DescribeBuffer(input)); },
                      [this, input, output](uint32_t tag) {
                        gloo::AlltoallOptions opts(context_);
                        opts.setInput(static_cast<uint8_t*>(input.data), input.bytes());
                        opts.setOutput(static_cast<uint8_t*>(output.data), output.bytes());
                        opts.setTag(tag);
                        opts.setTimeout(Timeout());
                        gloo::alltoall(opts);
                      });
  }

  absl::StatusOr<Work> Barrier() override {
    return Collective([] { return std::string("barrier"); }, [this](uint32_t tag) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(Timeout());
      gloo::barrier(opts);
    });
  }

  absl::StatusOr<Work> SendRecv(absl::Span<const PeerOp> ops) override {
    GENESIS_RETURN_IF_ERROR(health_.Check());
    std::string what = ops.size() == 1 ? "" : absl::StrCat("batch of ", ops.size(), ": ");
    for (size_t i = 0; i < ops.size(); ++i) {
      const PeerOp& op = ops[i];
      absl::StrAppend(&what, i == 0 ? "" : ", ",
                      op.kind == PeerOp::Kind::kSend ? "send of " : "recv of ",
                      DescribeBuffer(op.buffer),
                      op.kind == PeerOp::Kind::kSend ? " to rank " : " from rank ", op.peer,
                      " (tag ", op.tag, ")");
    }
    const std::string description = absl::StrCat(what, " in ", info_.Describe());
    // Post every transfer now, so that no rank waits for a transfer it has not posted.
    auto posted = std::make_shared<std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>>>();
    try {
      for (const PeerOp& op : ops) {
        auto buffer = context_->createUnboundBuffer(op.buffer.data, op.buffer.bytes());
        const uint64_t slot = kPeerSlotPrefix | static_cast<uint32_t>(op.tag);
        if (op.kind == PeerOp::Kind::kSend) {
          buffer->send(op.peer, slot);
        } else {
          buffer->recv(op.peer, slot);
        }
        posted->push_back(std::move(buffer));
      }
    } catch (const std::exception& e) {
      absl::Status error = Failure(description, e);
      return error;
    }
    std::vector<PeerOp> kinds(ops.begin(), ops.end());
    return Enqueue(peer_waits_, [what] { return what; }, [this, posted, kinds](uint32_t) {
      for (size_t i = 0; i < posted->size(); ++i) {
        const bool completed = kinds[i].kind == PeerOp::Kind::kSend
                                   ? (*posted)[i]->waitSend(Timeout())
                                   : (*posted)[i]->waitRecv(Timeout());
        if (!completed) throw gloo::IoException("aborted while waiting for a peer");
      }
    });
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int> ranks,
                                                      const std::string& name) override {
    GENESIS_RETURN_IF_ERROR(health_.Check());
    int new_rank = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == info_.rank) new_rank = static_cast<int>(i);
    }
    if (new_rank < 0) return std::unique_ptr<Communicator>();
    GroupInfo info = info_;
    info.name = absl::StrCat(info_.name, "/", name);
    info.rank = new_rank;
    info.size = static_cast<int>(ranks.size());
    return ConnectGloo(std::move(info), store_, hostname_);
  }

  void Abort(const absl::Status& why) override {
    if (health_.Fail(why)) context_->closeConnections();
  }

 private:
  struct Job {
    std::shared_ptr<WorkState> state;
    std::function<void(uint32_t tag)> run;
    uint32_t tag = 0;
  };

  // A first-in, first-out queue of jobs, run one at a time in order: by the thread that
  // serves it, or by a thread that waits for the job at its head (JobState::RunHere),
  // which then needs no hand-off to the serving thread and back.
  struct JobQueue {
    explicit JobQueue(GlooCommunicator* owner) : owner(owner) {}

    // Runs the jobs; outlives every job still queued (its destructor runs them first).
    GlooCommunicator* const owner;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> jobs;
    bool stopping = false;
    // A job taken from `jobs` has not finished: the next one waits for it.
    bool running = false;
    uint32_t next_tag = 1;

    void Stop() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stopping = true;
      }
      cv.notify_all();
    }

    // Takes the job at the head if it is `state`'s and no job is running, and runs it on
    // this thread; false (nothing done) otherwise.
    bool RunIfFirst(const WorkState* state) {
      Job job;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (running || jobs.empty() || jobs.front().state.get() != state) return false;
        job = std::move(jobs.front());
        jobs.pop_front();
        running = true;
      }
      owner->Execute(job);
      bool wake;
      {
        std::lock_guard<std::mutex> lock(mu);
        running = false;
        // The serving thread waits for a job or the stop, not for this one's end.
        wake = stopping || !jobs.empty();
      }
      if (wake) cv.notify_all();
      return true;
    }
  };

  // A queued operation: described only when asked (an error, a caller), and run by a
  // waiter that finds it at the head of its queue.
  class JobState final : public WorkState {
   public:
    JobState(std::function<std::string()> what, std::shared_ptr<const std::string> group,
             std::shared_ptr<JobQueue> queue, absl::Duration timeout)
        : WorkState(std::string(), Kind::kCompleted),
          what_(std::move(what)),
          group_(std::move(group)),
          queue_(std::move(queue)),
          timeout_(timeout) {}

    std::string description() const override { return absl::StrCat(what_(), " in ", *group_); }

   protected:
    bool RunHere(absl::Time deadline) override {
      // The operation may run until the group's timeout: only a waiter that would wait
      // as long runs it (Wait(timeout) with less keeps its deadline).
      if (deadline < absl::Now() + timeout_) return false;
      return queue_->RunIfFirst(this);
    }

   private:
    const std::function<std::string()> what_;
    const std::shared_ptr<const std::string> group_;
    const std::shared_ptr<JobQueue> queue_;
    const absl::Duration timeout_;
  };

  std::chrono::milliseconds Timeout() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        absl::ToChronoMilliseconds(info_.timeout));
  }

  absl::StatusOr<Work> Collective(std::function<std::string()> what,
                                  std::function<void(uint32_t)> run) {
    GENESIS_RETURN_IF_ERROR(health_.Check());
    return Enqueue(collectives_, std::move(what), std::move(run));
  }

  Work Enqueue(const std::shared_ptr<JobQueue>& to, std::function<std::string()> what,
               std::function<void(uint32_t)> run) {
    auto state = std::make_shared<JobState>(std::move(what), described_, to, info_.timeout);
    JobQueue& queue = *to;
    {
      std::lock_guard<std::mutex> lock(queue.mu);
      // Tags are given in call order, which every rank shares.
      queue.jobs.push_back(Job{state, std::move(run), queue.next_tag++});
    }
    queue.cv.notify_one();
    return Work(state);
  }

  // Serves `queue` until it stops and is empty. It does not look for jobs before it
  // sleeps: a caller that waits for its operation at once runs it itself (RunIfFirst),
  // and the jobs of a burst follow one another without a sleep.
  void RunJobs(JobQueue& queue) {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(queue.mu);
        queue.cv.wait(lock, [&] {
          return !queue.running && (queue.stopping || !queue.jobs.empty());
        });
        if (queue.jobs.empty()) return;
        job = std::move(queue.jobs.front());
        queue.jobs.pop_front();
        queue.running = true;
      }
      Execute(job);
      {
        std::lock_guard<std::mutex> lock(queue.mu);
        queue.running = false;
      }
    }
  }

  // Runs `job` and finishes its state with how it ended.
  void Execute(Job& job) {
    absl::Status status = health_.Check();
    if (status.ok()) {
      try {
        job.run(job.tag);
      } catch (const std::exception& e) {
        status = Failure(job.state->description(), e);
      }
    }
    job.state->Finish(std::move(status));
  }

  // The error of `description` failing with `e`; the communicator is unusable after.
  absl::Status Failure(const std::string& description, const std::exception& e) {
    const std::string message = e.what();
    const bool timed_out = absl::StrContains(message, "imed out");
    absl::Status error =
        timed_out ? absl::DeadlineExceededError(absl::StrCat(
                        description, " did not finish within ",
                        absl::FormatDuration(info_.timeout), ": ", message))
                  : absl::UnavailableError(absl::StrCat(description, " failed: ", message));
    if (health_.Fail(error)) context_->closeConnections();
    return error;
  }

  void RunAllReduce(const Buffer& buffer, ReduceOp op, uint32_t tag) {
    gloo::AllreduceOptions opts(context_);
    WithElementSize(ItemSize(buffer.dtype), [&](auto t) {
      using T = decltype(t);
      opts.setOutput(static_cast<T*>(buffer.data), buffer.count);
    });
    opts.setReduceFunction(ReductionFor(buffer.dtype, op));
    opts.setTag(tag);
    opts.setTimeout(Timeout());
    gloo::allreduce(opts);
    if (op == ReduceOp::kAvg) DivideInPlace(buffer.data, buffer.count, buffer.dtype, info_.size);
  }

  const GroupInfo info_;
  const std::shared_ptr<Store> store_;
  const std::string hostname_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  internal::GroupHealth health_;
  // info_.Describe(), for the operations' descriptions.
  const std::shared_ptr<const std::string> described_;
  const std::shared_ptr<JobQueue> collectives_;
  const std::shared_ptr<JobQueue> peer_waits_;
  std::thread worker_;
  std::thread waiter_;
};

// Gloo's rendezvous reads the store with Gloo's default timeout (30 s) whatever the
// group's: this store waits for the group's timeout instead, and says which ranks did
// not join (connectFullMesh's keys are the ranks' numbers).
class TimedStore final : public gloo::rendezvous::Store {
 public:
  TimedStore(gloo::rendezvous::Store& inner, std::chrono::milliseconds timeout,
             std::string description)
      : inner_(inner), timeout_(timeout), description_(std::move(description)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    inner_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    try {
      inner_.wait(keys, timeout);
    } catch (const gloo::IoException& e) {
      std::vector<std::string> ranks;
      for (const std::string& key : keys) {
        ranks.push_back(absl::StartsWith(key, "rank_") ? key.substr(5) : key);
      }
      throw gloo::IoException(absl::StrCat("timed out after ", timeout.count(),
                                           " ms waiting for rank(s) ", absl::StrJoin(ranks, ", "),
                                           " of ", description_, " to join (", e.what(), ")"));
    }
  }

 private:
  gloo::rendezvous::Store& inner_;
  const std::chrono::milliseconds timeout_;
  const std::string description_;
};

// Gloo's TCP pairs write with writev(2), which raises SIGPIPE when a peer has died; its
// default action would kill this process instead of letting the write fail with EPIPE
// and the operation turn into an error. A handler the program installed is kept.
void IgnoreSigpipeUnlessHandled() {
  static const bool once = [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      std::signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)once;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(GroupInfo info,
                                                          std::shared_ptr<Store> store,
                                                          const std::string& hostname) {
  if (!info.device.is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a gloo group works on CPU memory, not ", info.device.ToString()));
  }
  IgnoreSigpipeUnlessHandled();
  internal::SayWhyWhenTerminating();
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(info.rank, info.size);
    context->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(
        absl::ToChronoMilliseconds(info.timeout)));
    gloo::rendezvous::PrefixStore prefixed(info.name, store->gloo_store());
    TimedStore timed(prefixed, context->getTimeout(), info.Describe());
    context->connectFullMesh(timed, device);
    return std::unique_ptr<Communicator>(new GlooCommunicator(
        std::move(info), std::move(store), hostname, std::move(device), std::move(context)));
  } catch (const std::exception& e) {
    const std::string message = absl::StrCat("cannot connect ", info.Describe(), " through the ",
                                             store->description(), " (listening on ", hostname,
                                             "): ", e.what());
    return absl::StrContains(e.what(), "imed out") ? absl::DeadlineExceededError(message)
                                                   : absl::UnavailableError(message);
  }
}

std::string GlooVersion() {
  return absl::StrCat(GLOO_VERSION_MAJOR, ".", GLOO_VERSION_MINOR, ".", GLOO_VERSION_PATCH);
}

}  // namespace genesis::distributed::gloo_backend
