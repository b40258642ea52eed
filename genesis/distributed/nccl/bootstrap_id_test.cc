#include "genesis/distributed/nccl/bootstrap_id.h"

#include <cstring>

#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

std::vector<char> FixedId() {
  std::vector<char> id(128, 0);
  std::memcpy(id.data(), &kNcclFixedMagic, sizeof(kNcclFixedMagic));
  for (size_t i = 8; i < 24; ++i) id[i] = static_cast<char>(i);  // The root's address.
  return id;
}

TEST(BootstrapIdTest, ReplacesOnlyTheMagic) {
  const std::vector<char> fixed = FixedId();
  absl::StatusOr<std::vector<char>> id = WithBootstrapMagic(fixed, 0x1234567890abcdefULL);
  ASSERT_TRUE(id.ok()) << id.status();
  uint64_t magic = 0;
  std::memcpy(&magic, id->data(), sizeof(magic));
  EXPECT_EQ(magic, 0x1234567890abcdefULL);
  EXPECT_TRUE(std::equal(id->begin() + 8, id->end(), fixed.begin() + 8));
}

TEST(BootstrapIdTest, RefusesIdsItDoesNotKnow) {
  std::vector<char> random(128, 7);
  EXPECT_EQ(WithBootstrapMagic(random, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(WithBootstrapMagic(std::vector<char>(5), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WithBootstrapMagic(FixedId(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
