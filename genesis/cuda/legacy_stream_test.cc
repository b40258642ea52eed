// The legacy default stream (nullptr) of a device other than the current one: waits
// queued through WaitEvent must land on that device's stream. A data-parallel rank on
// cuda:1 (cuda:0 current) read its gradient buckets before the all-reduce had written
// them when the wait went to cuda:0's stream instead.
#include <atomic>
#include <chrono>
#include <thread>

#include <cuda_runtime_api.h>

#include "absl/cleanup/cleanup.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "gtest/gtest.h"

namespace genesis::cuda {
namespace {

// A host function that holds its stream until `released` is set.
void CUDART_CB HoldUntilReleased(void* released) {
  auto* flag = static_cast<std::atomic<bool>*>(released);
  while (!flag->load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

TEST(LegacyStreamTest, WaitEventOrdersTheLegacyStreamOfTheEventsDevice) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);  // cuda:0 current, as on a rank's main thread.
  absl::StatusOr<Stream> side = Stream::Create(1);
  absl::StatusOr<Event> done = Event::Create(1);
  absl::StatusOr<Event> after = Event::Create(1);
  ASSERT_TRUE(side.ok() && done.ok() && after.ok());
  std::atomic<bool> released{false};
  // Released on every way out, or the held stream would keep the process from ending.
  absl::Cleanup release = [&] {
    released = true;
    (void)side->Synchronize();
  };
  ASSERT_EQ(cudaLaunchHostFunc(side->native(), HoldUntilReleased, &released), cudaSuccess);
  ASSERT_TRUE(done->Record(*side).ok());

  // cuda:1's legacy stream waits for `done`, then records `after`.
  ASSERT_TRUE(WaitEvent(nullptr, *done).ok());
  ASSERT_TRUE(after->Record(static_cast<CUstream_st*>(nullptr)).ok());
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "WaitEvent left another device current";

  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  absl::StatusOr<bool> early = after->Query();
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(*early) << "cuda:1's legacy stream ran past an event it was told to wait for";
  released = true;
  EXPECT_TRUE(after->Synchronize().ok());
}

}  // namespace
}  // namespace genesis::cuda
