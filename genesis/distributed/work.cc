#include "genesis/distributed/work.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/distributed/internal/work_state.h"

namespace genesis::distributed {

namespace {
std::shared_ptr<internal::WorkState> FinishedState() {
  auto state = std::make_shared<internal::WorkState>(
      "an operation with nothing to do", internal::WorkState::Kind::kCompleted);
  state->Finish(absl::OkStatus());
  return state;
}
// Finished when all of its parts are.
class AllState final : public internal::WorkState {
 public:
  explicit AllState(std::vector<Work> parts)
      : WorkState(Describe(parts), Kind::kPolled), parts_(std::move(parts)) {}

 protected:
  void Progress() override {
    for (const Work& part : parts_) {
      if (!part.Done()) return;
    }
    absl::Status first;
    for (const Work& part : parts_) first.Update(part.status());
    Finish(first);
  }

 private:
  static std::string Describe(const std::vector<Work>& parts) {
    if (parts.empty()) return "nothing";
    return absl::StrCat(parts.size(), " operations, the first ", parts.front().description());
  }
  const std::vector<Work> parts_;
};

}  // namespace

Work Work::All(std::vector<Work> works) {
  return Work(std::make_shared<AllState>(std::move(works)));
}

Work::Work() : state_(FinishedState()) {}

Work::Work(std::shared_ptr<internal::WorkState> state) : state_(std::move(state)) {}

bool Work::Done() const { return state_->Done(); }

absl::Status Work::Wait() const {
  state_->WaitUntil(absl::InfiniteFuture());
  return state_->result();
}

absl::Status Work::Wait(absl::Duration timeout) const {
  if (!state_->WaitUntil(absl::Now() + timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        state_->description(), ": still running after ", absl::FormatDuration(timeout)));
  }
  return state_->result();
}

absl::Status Work::status() const {
  if (!state_->Done()) {
    return absl::UnavailableError(absl::StrCat(state_->description(), ": still running"));
  }
  return state_->result();
}

std::string Work::description() const { return state_->description(); }

void Work::Retain(std::shared_ptr<const void> object) const {
  state_->Retain(std::move(object));
}

absl::Status WaitAll(absl::Span<const Work> works) {
  absl::Status first;
  for (const Work& work : works) first.Update(work.Wait());
  return first;
}

}  // namespace genesis::distributed
