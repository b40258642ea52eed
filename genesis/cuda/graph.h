// Graph: a CUDA graph captured from a stream (cudaStreamBeginCapture ... EndCapture,
// instantiated once), replayed with Launch. Work issued on the stream between
// BeginCapture and Graph::EndCapture is recorded instead of run, NCCL's collectives
// included; each Launch runs all of it again.
//
//   GENESIS_RETURN_IF_ERROR(cuda::BeginCapture(stream));
//   ... queue work on `stream` ...
//   GENESIS_ASSIGN_OR_RETURN(cuda::Graph graph, cuda::Graph::EndCapture(stream));
//   for (int i = 0; i < steps; ++i) GENESIS_RETURN_IF_ERROR(graph.Launch(stream));
//
// The header needs no CUDA header. In the CPU-only build every call fails with
// FailedPrecondition.
#ifndef GENESIS_CUDA_GRAPH_H_
#define GENESIS_CUDA_GRAPH_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct CUstream_st;
struct CUgraphExec_st;

namespace genesis::cuda {

// Starts capturing `stream` (not the legacy default stream: InvalidArgument), in
// thread-local mode: other threads' CUDA calls are not affected. The CUDA error if the
// stream cannot be captured (it is capturing already, say).
absl::Status BeginCapture(CUstream_st* stream);

// True while `stream` is being captured (false for nullptr, the legacy default stream,
// which cannot be). Errors are answered false.
bool IsCapturing(CUstream_st* stream);

class Graph {
 public:
  // Ends the capture BeginCapture started on `stream` and instantiates the graph. The
  // CUDA error if the capture was invalidated (work of another stream joined it without
  // an event, a synchronising call was made meanwhile, ...).
  static absl::StatusOr<Graph> EndCapture(CUstream_st* stream);

  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;

  bool valid() const { return exec_ != nullptr; }

  // Queues one replay of the graph on `stream` (any stream of the graph's device).
  // FailedPrecondition when empty; the CUDA error otherwise.
  absl::Status Launch(CUstream_st* stream) const;

 private:
  explicit Graph(CUgraphExec_st* exec) : exec_(exec) {}
  CUgraphExec_st* exec_ = nullptr;
};

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_GRAPH_H_
