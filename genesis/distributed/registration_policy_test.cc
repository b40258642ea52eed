// The registration policy: which operations run registered in each mode, and how the
// environment's words parse.
#include "genesis/distributed/registration_policy.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

constexpr NcclOperation kEveryOperation[] = {
    NcclOperation::kAllReduce,     NcclOperation::kBroadcast, NcclOperation::kReduce,
    NcclOperation::kAllGather,     NcclOperation::kReduceScatter,
    NcclOperation::kAllToAll,      NcclOperation::kSendRecv,
};

TEST(RegistrationPolicyTest, OffRegistersNothingAndOnEverything) {
  for (NcclOperation op : kEveryOperation) {
    for (size_t bytes : {size_t{0}, size_t{8}, kAutoRegistrationMinBytes, size_t{1} << 30}) {
      EXPECT_FALSE(RunsRegistered(NcclRegistration::kOff, op, bytes));
      EXPECT_TRUE(RunsRegistered(NcclRegistration::kOn, op, bytes));
    }
  }
}

TEST(RegistrationPolicyTest, AutoRegistersLargeAllGathersAllToAllsAndMessages) {
  constexpr NcclRegistration kAuto = NcclRegistration::kAuto;
  EXPECT_TRUE(RunsRegistered(kAuto, NcclOperation::kAllGather, kAutoRegistrationMinBytes));
  EXPECT_TRUE(RunsRegistered(kAuto, NcclOperation::kAllGather, kAutoRegistrationMaxBytes));
  EXPECT_FALSE(RunsRegistered(kAuto, NcclOperation::kAllGather, kAutoRegistrationMaxBytes + 1));
  EXPECT_FALSE(RunsRegistered(kAuto, NcclOperation::kAllGather, kAutoRegistrationMinBytes - 1));
  EXPECT_FALSE(
      RunsRegistered(kAuto, NcclOperation::kAllGather, kAutoAllToAllRegistrationMinBytes));
  EXPECT_FALSE(RunsRegistered(kAuto, NcclOperation::kAllGather, 8));
  for (auto [op, min_bytes] :
       {std::pair{NcclOperation::kAllToAll, kAutoAllToAllRegistrationMinBytes},
        std::pair{NcclOperation::kSendRecv, kAutoMessageRegistrationMinBytes}}) {
    EXPECT_TRUE(RunsRegistered(kAuto, op, min_bytes));
    EXPECT_TRUE(RunsRegistered(kAuto, op, kAutoRegistrationMinBytes));
    EXPECT_TRUE(RunsRegistered(kAuto, op, kAutoRegistrationMaxBytes));
    EXPECT_FALSE(RunsRegistered(kAuto, op, kAutoRegistrationMaxBytes + 1));
    EXPECT_FALSE(RunsRegistered(kAuto, op, min_bytes - 1));
    EXPECT_FALSE(RunsRegistered(kAuto, op, 0));
  }
  // A 2 MiB message runs registered, a 2 MiB all_to_all does not.
  EXPECT_TRUE(RunsRegistered(kAuto, NcclOperation::kSendRecv, size_t{2} << 20));
  EXPECT_FALSE(RunsRegistered(kAuto, NcclOperation::kAllToAll, size_t{2} << 20));
  // Reductions and broadcast gained nothing registered (broadcast lost): never.
  for (NcclOperation op : {NcclOperation::kAllReduce, NcclOperation::kBroadcast,
                           NcclOperation::kReduce, NcclOperation::kReduceScatter}) {
    for (size_t bytes : {kAutoMessageRegistrationMinBytes, kAutoAllToAllRegistrationMinBytes,
                         kAutoRegistrationMinBytes, kAutoRegistrationMaxBytes}) {
      EXPECT_FALSE(RunsRegistered(kAuto, op, bytes));
    }
  }
  EXPECT_EQ(kAutoMessageRegistrationMinBytes, size_t{2} << 20);
  EXPECT_EQ(kAutoAllToAllRegistrationMinBytes, size_t{4} << 20);
  EXPECT_EQ(kAutoRegistrationMinBytes, size_t{16} << 20);
  EXPECT_EQ(kAutoRegistrationMaxBytes, size_t{64} << 20);
}

TEST(RegistrationPolicyTest, NamesParseBack) {
  for (NcclRegistration mode :
       {NcclRegistration::kOff, NcclRegistration::kAuto, NcclRegistration::kOn}) {
    absl::StatusOr<NcclRegistration> parsed = ParseNcclRegistration(NcclRegistrationName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_EQ(*ParseNcclRegistration("0"), NcclRegistration::kOff);
  EXPECT_EQ(*ParseNcclRegistration("1"), NcclRegistration::kOn);
}

TEST(RegistrationPolicyTest, OtherWordsAreRefusedByName) {
  for (const char* bad : {"", "2", "yes", "AUTO", " on"}) {
    absl::StatusOr<NcclRegistration> parsed = ParseNcclRegistration(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("NCCL buffer registration '", bad,
                           "' is not 0, 1, off, on or auto"));
  }
}

}  // namespace
}  // namespace genesis::distributed
