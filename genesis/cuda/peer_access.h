// Peer access between the GPUs of this process, and the memory that needs more than
// cudaDeviceEnablePeerAccess to be reached from another GPU.
//
// cudaDeviceEnablePeerAccess lets one device's kernels and copies use memory that
// another device allocated with cudaMalloc. Memory mapped through the driver's virtual
// memory management (the pools' expandable segments) is reachable only from where
// cuMemSetAccess allowed it, and allowing a peer at every map costs a map 2-20 times its
// time on a two-GPU machine. So such memory is opened to a peer only once something
// asks for peer access between the two devices, through EnablePeerAccess here, which
// tells the owners of that memory (PeerAccessListener) to open what they hold and what
// they map later.
//
//   GENESIS_RETURN_IF_ERROR(cuda::EnablePeerAccess(/*from=*/1, /*to=*/0));
//   // Kernels and copies on cuda:1 may now use any memory of cuda:0.
#ifndef GENESIS_CUDA_PEER_ACCESS_H_
#define GENESIS_CUDA_PEER_ACCESS_H_

#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace genesis::cuda {

// An owner of memory that must be opened to a peer on its own.
class PeerAccessListener {
 public:
  virtual ~PeerAccessListener() = default;
  // Device `from` is to reach memory of device `to` from now on. Called once per pair
  // and listener, under the registry's lock: it must not call back into this file.
  virtual absl::Status GrantPeerAccess(int from, int to) = 0;
};

// Lets kernels and copies on device `from` use memory of device `to`:
// cudaDeviceEnablePeerAccess on `from`, then every listener's GrantPeerAccess. Done once
// per pair in the process; later calls return the first call's result. OutOfRange for
// a device that does not exist, FailedPrecondition where `from` cannot reach `to` as a
// peer (or is `to`), or in a build without CUDA.
absl::Status EnablePeerAccess(int from, int to);

// Adds `listener` and returns the pairs (from, to) enabled so far, in one step: every
// pair enabled later reaches it through GrantPeerAccess.
std::vector<std::pair<int, int>> AddPeerAccessListener(PeerAccessListener* listener);
// Removes `listener`; once this returns, no call into it is running or left.
void RemovePeerAccessListener(PeerAccessListener* listener);

namespace internal {

// The registry behind the functions above, with the enabling step passed in.
class PeerAccessRegistry {
 public:
  // Runs `enable` and then every listener's grant for (from, to) the first time; returns
  // the first time's result.
  absl::Status Enable(int from, int to, const std::function<absl::Status()>& enable);
  std::vector<std::pair<int, int>> Add(PeerAccessListener* listener);
  void Remove(PeerAccessListener* listener);

 private:
  std::mutex mu_;
  std::map<std::pair<int, int>, absl::Status> enabled_;
  std::vector<PeerAccessListener*> listeners_;
};

// The process's registry.
PeerAccessRegistry& ProcessPeerAccess();

}  // namespace internal
}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_PEER_ACCESS_H_
