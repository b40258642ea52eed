#include "genesis/distributed/work.h"

#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "genesis/distributed/internal/work_state.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using internal::WorkState;

TEST(WorkTest, DefaultWorkHasFinished) {
  Work work;
  EXPECT_TRUE(work.Done());
  EXPECT_TRUE(work.Wait().ok());
  EXPECT_TRUE(work.status().ok());
}

TEST(WorkTest, WaitReturnsWhatAnotherThreadFinishedWith) {
  auto state = std::make_shared<WorkState>("op in group", WorkState::Kind::kCompleted);
  Work work(state);
  EXPECT_FALSE(work.Done());
  EXPECT_EQ(work.status().code(), absl::StatusCode::kUnavailable);
  std::thread finisher([state] {
    absl::SleepFor(absl::Milliseconds(20));
    state->Finish(absl::UnavailableError("peer died"));
  });
  absl::Status status = work.Wait();
  finisher.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(work.Done());
  // The first Finish wins.
  state->Finish(absl::OkStatus());
  EXPECT_EQ(work.status().code(), absl::StatusCode::kUnavailable);
}

TEST(WorkTest, WaitWithATimeoutSaysWhatIsStillRunning) {
  auto state = std::make_shared<WorkState>("all_reduce of 4 x float32", WorkState::Kind::kCompleted);
  Work work(state);
  absl::Status status = work.Wait(absl::Milliseconds(10));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(status.message(), "all_reduce of 4 x float32")) << status;
  state->Finish(absl::OkStatus());
  EXPECT_TRUE(work.Wait(absl::Milliseconds(10)).ok());
}

// A polled state finishes the third time it is asked.
class CountingState : public WorkState {
 public:
  CountingState() : WorkState("polled", Kind::kPolled) {}
  int polls = 0;

 protected:
  void Progress() override {
    if (++polls == 3) Finish(absl::OkStatus());
  }
};

TEST(WorkTest, PolledWorkProgressesWhenAsked) {
  auto state = std::make_shared<CountingState>();
  Work work(state);
  EXPECT_FALSE(work.Done());
  EXPECT_TRUE(work.Wait().ok());
  EXPECT_EQ(state->polls, 3);
}

TEST(WorkTest, RetainedObjectsLiveUntilTheOperationFinishes) {
  auto state = std::make_shared<WorkState>("op", WorkState::Kind::kCompleted);
  Work work(state);
  auto buffer = std::make_shared<int>(5);
  std::weak_ptr<int> watch = buffer;
  work.Retain(std::move(buffer));
  EXPECT_FALSE(watch.expired());
  state->Finish(absl::OkStatus());
  EXPECT_TRUE(watch.expired());
  // Retaining after the end keeps nothing.
  auto late = std::make_shared<int>(6);
  std::weak_ptr<int> watch_late = late;
  work.Retain(std::move(late));
  EXPECT_TRUE(watch_late.expired());
}

TEST(WorkTest, AllFinishesWhenEveryPartHas) {
  auto a = std::make_shared<WorkState>("a", WorkState::Kind::kCompleted);
  auto b = std::make_shared<WorkState>("b", WorkState::Kind::kCompleted);
  Work all = Work::All({Work(a), Work(b)});
  EXPECT_FALSE(all.Done());
  a->Finish(absl::OkStatus());
  EXPECT_FALSE(all.Done());
  b->Finish(absl::DataLossError("b lost"));
  EXPECT_TRUE(all.Done());
  EXPECT_EQ(all.Wait().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Work::All({}).Wait().ok());
}

TEST(WorkTest, WaitAllReturnsTheFirstError) {
  auto a = std::make_shared<WorkState>("a", WorkState::Kind::kCompleted);
  auto b = std::make_shared<WorkState>("b", WorkState::Kind::kCompleted);
  a->Finish(absl::OkStatus());
  b->Finish(absl::InternalError("b broke"));
  std::vector<Work> works = {Work(a), Work(b), Work()};
  absl::Status status = WaitAll(works);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace genesis::distributed
