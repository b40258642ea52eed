#include "genesis/core/device.h"

#include <sstream>
#include <string>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace genesis {
namespace {

// absl::Status::message() is absl::string_view, which gtest prints as a char
// array when it is not std::string_view; a std::string reads better.
std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

// Passes if `status`'s message contains `needle`; on failure shows both.
::testing::AssertionResult MessageContains(const absl::Status& status,
                                           std::string_view needle) {
  const std::string message(status.message());
  if (message.find(needle) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "message \"" << message << "\" does not contain \"" << needle
         << "\"";
}

TEST(DeviceTest, FactoriesAndAccessors) {
  constexpr Device cpu = Device::Cpu();
  static_assert(cpu.is_cpu() && !cpu.is_cuda() && cpu.index() == 0);
  static_assert(cpu == Device());
  constexpr Device cuda3 = Device::Cuda(3);
  static_assert(cuda3.is_cuda() && !cuda3.is_cpu());
  static_assert(cuda3.type() == DeviceType::kCuda && cuda3.index() == 3);
  static_assert(Device::Cuda() == Device(DeviceType::kCuda, 0));
  static_assert(Device::Cuda(0) != Device::Cpu());
  static_assert(Device::Cuda(1) != Device::Cuda(2));
  // Runtime checks too, so a broken accessor shows up as a test failure.
  Device d = Device::Cuda(5);
  EXPECT_EQ(d.index(), 5);
  EXPECT_TRUE(d.is_cuda());
}

TEST(DeviceTest, ToString) {
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
  EXPECT_EQ(Device::Cuda().ToString(), "cuda:0");
  EXPECT_EQ(Device::Cuda(7).ToString(), "cuda:7");
  EXPECT_EQ(Device::Cuda(Device::kMaxIndex).ToString(), "cuda:1000000");
}

TEST(DeviceTest, StreamsLikeToString) {
  std::ostringstream os;
  os << Device::Cpu() << " " << Device::Cuda(12);
  EXPECT_EQ(os.str(), "cpu cuda:12");
}

TEST(DeviceTest, ParseAcceptedForms) {
  struct Case {
    const char* text;
    Device expected;
  };
  const Case cases[] = {
      {"cpu", Device::Cpu()},
      {"cpu:0", Device::Cpu()},
      {"cuda", Device::Cuda(0)},
      {"cuda:0", Device::Cuda(0)},
      {"cuda:7", Device::Cuda(7)},
      {"cuda:10", Device::Cuda(10)},
      {"cuda:1000000", Device::Cuda(1'000'000)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Device> parsed = Device::Parse(c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(*parsed, c.expected) << c.text;
  }
}

TEST(DeviceTest, RoundTrip) {
  for (Device d : {Device::Cpu(), Device::Cuda(0), Device::Cuda(7),
                   Device::Cuda(99), Device::Cuda(Device::kMaxIndex)}) {
    absl::StatusOr<Device> parsed = Device::Parse(d.ToString());
    ASSERT_TRUE(parsed.ok()) << d << ": " << parsed.status();
    EXPECT_EQ(*parsed, d);
  }
  for (const char* text : {"cpu", "cuda:0", "cuda:7"}) {
    absl::StatusOr<Device> parsed = Device::Parse(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(parsed->ToString(), text);
  }
}

TEST(DeviceTest, ParseEmpty) {
  absl::StatusOr<Device> parsed = Device::Parse("");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(parsed.status()), "empty device string");
}

TEST(DeviceTest, ParseRejectsBadInputAndQuotesIt) {
  struct Case {
    std::string text;
    std::string reason;  // Part of the message besides the quoted input.
  };
  const std::string kNotDecimal =
      "device index must be a non-negative decimal integer";
  const std::string kUnknownType = "expected 'cpu', 'cuda' or 'cuda:N'";
  const Case cases[] = {
      {"cuda:-1", kNotDecimal},
      {"cuda:+1", kNotDecimal},
      {"cuda: 1", kNotDecimal},
      {"cuda:1 ", kNotDecimal},
      {"cuda:1x", kNotDecimal},
      {"cuda:0x1", kNotDecimal},
      {"cuda:1.0", kNotDecimal},
      {"cuda:1:2", kNotDecimal},
      {"cuda:", "missing device index"},
      {"cuda:01", "leading zeros"},
      {"cuda:00", "leading zeros"},
      {"cuda:1000001", "exceeds the maximum of 1000000"},
      {"cuda:2147483648", "exceeds the maximum"},
      {"cuda:99999999999999999999999", "exceeds the maximum"},
      {"cpu:1", "only cpu device"},
      {"cpu:", "only cpu device"},
      {"cpu:00", "only cpu device"},
      {"gpu", kUnknownType},
      {"gpu:0", kUnknownType},
      {" cuda", kUnknownType},
      {"cuda0", kUnknownType},
      {":0", kUnknownType},
      {"CUDA:0", "case-sensitive; did you mean 'cuda'"},
      {"Cpu", "case-sensitive; did you mean 'cpu'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Device> parsed = Device::Parse(c.text);
    ASSERT_FALSE(parsed.ok()) << "'" << c.text << "' parsed as " << *parsed;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(MessageContains(parsed.status(), "'" + c.text + "'"));
    EXPECT_TRUE(MessageContains(parsed.status(), c.reason)) << c.text;
  }
}

TEST(DeviceTest, ExactMessages) {
  EXPECT_EQ(Message(Device::Parse("cuda:-1").status()),
            "invalid device string 'cuda:-1': device index must be a "
            "non-negative decimal integer");
  EXPECT_EQ(Message(Device::Parse("gpu").status()),
            "unknown device type 'gpu' in 'gpu': expected 'cpu', 'cuda' or "
            "'cuda:N'");
}

TEST(DeviceTest, ControlCharactersAreEscapedInMessages) {
  absl::StatusOr<Device> parsed = Device::Parse(std::string("cu\nda\0", 6));
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(MessageContains(parsed.status(), "'cu\\nda\\x00'"));
}

TEST(DeviceTest, Hash) {
  absl::Hash<Device> hash;
  EXPECT_EQ(hash(Device::Cuda(3)), hash(*Device::Parse("cuda:3")));
  EXPECT_EQ(hash(Device::Cpu()), hash(*Device::Parse("cpu:0")));
  // Not guaranteed in general, but a hash that ignored the index or the type
  // would make these collide.
  EXPECT_NE(hash(Device::Cuda(3)), hash(Device::Cuda(4)));
  EXPECT_NE(hash(Device::Cpu()), hash(Device::Cuda(0)));
}

}  // namespace
}  // namespace genesis
