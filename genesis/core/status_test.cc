#include "genesis/core/status.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace genesis {
namespace {

absl::StatusOr<int> Halve(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status CheckEven(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return absl::OkStatus();
}

absl::Status TwoChecks(int x, int y, int* calls) {
  GENESIS_RETURN_IF_ERROR(CheckEven(x));
  ++*calls;
  GENESIS_RETURN_IF_ERROR(CheckEven(y));
  ++*calls;
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, PropagatesFirstErrorAndStops) {
  int calls = 0;
  EXPECT_TRUE(TwoChecks(2, 4, &calls).ok());
  EXPECT_EQ(calls, 2);

  calls = 0;
  absl::Status s = TwoChecks(1, 4, &calls);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd");
  EXPECT_EQ(calls, 0);

  calls = 0;
  EXPECT_FALSE(TwoChecks(2, 3, &calls).ok());
  EXPECT_EQ(calls, 1);
}

absl::StatusOr<std::string> ReturnIfErrorInStatusOr(int x) {
  GENESIS_RETURN_IF_ERROR(CheckEven(x));
  return std::string("ok");
}

TEST(ReturnIfErrorTest, WorksInFunctionReturningStatusOr) {
  EXPECT_EQ(*ReturnIfErrorInStatusOr(2), "ok");
  EXPECT_EQ(ReturnIfErrorInStatusOr(3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Two uses in one function, a declaration with an explicit type, and an
// assignment to an existing variable.
absl::StatusOr<int> Quarter(int x) {
  GENESIS_ASSIGN_OR_RETURN(int half, Halve(x));
  int quarter = -1;
  GENESIS_ASSIGN_OR_RETURN(quarter, Halve(half));
  return quarter;
}

TEST(AssignOrReturnTest, AssignsOrPropagates) {
  EXPECT_EQ(*Quarter(12), 3);
  absl::StatusOr<int> odd_first = Quarter(3);
  EXPECT_EQ(odd_first.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<int> odd_second = Quarter(6);
  EXPECT_EQ(odd_second.status().code(), absl::StatusCode::kInvalidArgument);
}

absl::StatusOr<std::unique_ptr<int>> MakeBox(bool ok) {
  if (!ok) return absl::NotFoundError("no box");
  return std::make_unique<int>(7);
}

absl::Status UnboxMoveOnly(bool ok, int* out) {
  GENESIS_ASSIGN_OR_RETURN(auto box, MakeBox(ok));
  *out = *box;
  return absl::OkStatus();
}

TEST(AssignOrReturnTest, MovesMoveOnlyValuesAndReturnsPlainStatus) {
  int out = 0;
  EXPECT_TRUE(UnboxMoveOnly(true, &out).ok());
  EXPECT_EQ(out, 7);
  absl::Status s = UnboxMoveOnly(false, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no box");
}

template <typename A, typename B>
absl::StatusOr<std::pair<A, B>> MakePair(A a, B b) {
  return std::pair<A, B>(a, b);
}

absl::StatusOr<int> SumPair() {
  // The comma inside the template argument list must not split the macro.
  GENESIS_ASSIGN_OR_RETURN(auto p, MakePair<int, int>(1, 2));
  return p.first + p.second;
}

TEST(AssignOrReturnTest, ExpressionMayContainCommas) {
  EXPECT_EQ(*SumPair(), 3);
}

TEST(AnnotateTest, PrependsContextAndKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("file missing"), "loading x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading x: file missing");
}

TEST(AnnotateTest, NestsOutermostFirst) {
  absl::Status s = Annotate(
      Annotate(absl::DataLossError("bad crc"), "reading block 3"), "open");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "open: reading block 3: bad crc");
}

TEST(AnnotateTest, OkStaysOk) {
  EXPECT_TRUE(Annotate(absl::OkStatus(), "context").ok());
}

TEST(AnnotateTest, EmptyContextOrMessage) {
  EXPECT_EQ(Annotate(absl::InternalError("boom"), ""),
            absl::InternalError("boom"));
  EXPECT_EQ(Annotate(absl::InternalError(""), "ctx"),
            absl::InternalError("ctx"));
}

TEST(AnnotateTest, KeepsPayloads) {
  absl::Status original = absl::UnavailableError("busy");
  original.SetPayload("type.example/retry", absl::Cord("after=5s"));
  absl::Status s = Annotate(original, "rpc");
  ASSERT_TRUE(s.GetPayload("type.example/retry").has_value());
  EXPECT_EQ(*s.GetPayload("type.example/retry"), "after=5s");
}

TEST(StatusErrorTest, ThrowIfErrorThrowsCarryingStatus) {
  const absl::Status error = absl::OutOfRangeError("index 9 >= 4");
  try {
    ThrowIfError(error);
    FAIL() << "ThrowIfError did not throw";
  } catch (const StatusError& e) {
    EXPECT_EQ(e.status(), error);
    EXPECT_EQ(std::string(e.what()), error.ToString());
  }
}

TEST(StatusErrorTest, ThrowIfErrorOnOkDoesNothing) {
  EXPECT_NO_THROW(ThrowIfError(absl::OkStatus()));
}

TEST(StatusErrorTest, IsARuntimeError) {
  EXPECT_THROW(ThrowIfError(absl::UnknownError("x")), std::runtime_error);
}

TEST(StatusErrorTest, OkStatusBecomesInternal) {
  StatusError e{absl::OkStatus()};
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInternal);
}

TEST(StatusErrorTest, ValueOrThrow) {
  EXPECT_EQ(ValueOrThrow(Halve(8)), 4);
  std::unique_ptr<int> box = ValueOrThrow(MakeBox(true));
  EXPECT_EQ(*box, 7);
  try {
    ValueOrThrow(MakeBox(false));
    FAIL() << "ValueOrThrow did not throw";
  } catch (const StatusError& e) {
    EXPECT_EQ(e.status(), absl::NotFoundError("no box"));
  }
}

}  // namespace
}  // namespace genesis
