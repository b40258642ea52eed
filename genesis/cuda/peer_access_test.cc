#include "genesis/cuda/peer_access.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"

namespace genesis::cuda {
namespace {

using internal::PeerAccessRegistry;
using Pairs = std::vector<std::pair<int, int>>;

class Recorder : public PeerAccessListener {
 public:
  explicit Recorder(absl::Status answer = absl::OkStatus()) : answer_(std::move(answer)) {}
  absl::Status GrantPeerAccess(int from, int to) override {
    granted.emplace_back(from, to);
    return answer_;
  }
  Pairs granted;

 private:
  absl::Status answer_;
};

TEST(PeerAccessRegistryTest, EnablesEachPairOnceAndTellsEveryListener) {
  PeerAccessRegistry registry;
  Recorder a;
  Recorder b;
  EXPECT_TRUE(registry.Add(&a).empty());
  EXPECT_TRUE(registry.Add(&b).empty());
  int enables = 0;
  auto enable = [&] {
    ++enables;
    return absl::OkStatus();
  };
  EXPECT_TRUE(registry.Enable(1, 0, enable).ok());
  EXPECT_TRUE(registry.Enable(1, 0, enable).ok());
  EXPECT_TRUE(registry.Enable(0, 1, enable).ok());
  EXPECT_EQ(enables, 2);
  EXPECT_EQ(a.granted, (Pairs{{1, 0}, {0, 1}}));
  EXPECT_EQ(b.granted, a.granted);
}

TEST(PeerAccessRegistryTest, ALateListenerLearnsThePairsEnabledBefore) {
  PeerAccessRegistry registry;
  auto ok = [] { return absl::OkStatus(); };
  ASSERT_TRUE(registry.Enable(2, 0, ok).ok());
  ASSERT_FALSE(registry.Enable(3, 0, [] { return absl::InternalError("no"); }).ok());
  Recorder late;
  EXPECT_EQ(registry.Add(&late), (Pairs{{2, 0}}));  // Not the pair that failed.
  EXPECT_TRUE(late.granted.empty());
  ASSERT_TRUE(registry.Enable(1, 0, ok).ok());
  EXPECT_EQ(late.granted, (Pairs{{1, 0}}));
}

TEST(PeerAccessRegistryTest, FailuresAreKeptAndARemovedListenerHearsNothing) {
  PeerAccessRegistry registry;
  Recorder refusing(absl::ResourceExhaustedError("out of memory"));
  Recorder gone;
  registry.Add(&refusing);
  registry.Add(&gone);
  registry.Remove(&gone);
  int enables = 0;
  auto enable = [&] {
    ++enables;
    return absl::OkStatus();
  };
  EXPECT_EQ(registry.Enable(1, 0, enable).code(), absl::StatusCode::kResourceExhausted);
  // The first result stands: no second attempt.
  EXPECT_EQ(registry.Enable(1, 0, enable).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(enables, 1);
  EXPECT_EQ(refusing.granted, (Pairs{{1, 0}}));
  EXPECT_TRUE(gone.granted.empty());
  // A failed enable tells no listener.
  Recorder other;
  registry.Add(&other);
  EXPECT_FALSE(registry.Enable(0, 1, [] { return absl::InternalError("no"); }).ok());
  EXPECT_TRUE(other.granted.empty());
}

TEST(PeerAccessTest, BadDevicesAreErrors) {
  EXPECT_FALSE(EnablePeerAccess(0, DeviceCount() + 3).ok());
  EXPECT_FALSE(EnablePeerAccess(-1, 0).ok());
  if (DeviceCount() == 0) return;
  EXPECT_EQ(EnablePeerAccess(0, DeviceCount()).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(EnablePeerAccess(0, 0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PeerAccessTest, TwoGpusEnableOnceAndTellAListener) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  Recorder recorder;
  AddPeerAccessListener(&recorder);
  const absl::Status status = EnablePeerAccess(1, 0);
  RemovePeerAccessListener(&recorder);
  if (status.code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "cuda:1 cannot access cuda:0 as a peer";
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(recorder.granted, (Pairs{{1, 0}}));
  EXPECT_TRUE(EnablePeerAccess(1, 0).ok());
  EXPECT_EQ(recorder.granted.size(), 1u);
}

}  // namespace
}  // namespace genesis::cuda
