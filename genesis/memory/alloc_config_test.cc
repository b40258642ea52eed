#include "genesis/memory/alloc_config.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pinned_mode.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kGiB = size_t{1} << 30;

// Field-by-field equality (AllocatorOptions has no operator==), with the field named.
void ExpectSameConfig(const AllocConfig& a, const AllocConfig& b) {
  const AllocatorOptions& x = a.options;
  const AllocatorOptions& y = b.options;
  EXPECT_EQ(x.block_rounding, y.block_rounding);
  EXPECT_EQ(x.small_size_limit, y.small_size_limit);
  EXPECT_EQ(x.small_segment_size, y.small_segment_size);
  EXPECT_EQ(x.large_segment_size, y.large_segment_size);
  EXPECT_EQ(x.large_segment_threshold, y.large_segment_threshold);
  EXPECT_EQ(x.large_segment_rounding, y.large_segment_rounding);
  EXPECT_EQ(x.large_segment_max, y.large_segment_max);
  EXPECT_EQ(x.roundup_power2_divisions, y.roundup_power2_divisions);
  EXPECT_EQ(x.max_split_size, y.max_split_size);
  EXPECT_EQ(x.memory_fraction, y.memory_fraction);
  EXPECT_EQ(x.cache_limit, y.cache_limit);
  EXPECT_EQ(x.garbage_collection_threshold, y.garbage_collection_threshold);
  EXPECT_EQ(x.warm_up_sizes, y.warm_up_sizes);
  EXPECT_EQ(x.thread_cache_blocks, y.thread_cache_blocks);
  EXPECT_EQ(x.thread_cache_bytes, y.thread_cache_bytes);
  EXPECT_EQ(x.adaptive_caching, y.adaptive_caching);
  EXPECT_EQ(x.expandable_segments, y.expandable_segments);
  EXPECT_EQ(x.expandable_piece_size, y.expandable_piece_size);
  EXPECT_EQ(x.expandable_piece_layout, y.expandable_piece_layout);
  EXPECT_EQ(x.expandable_min_piece, y.expandable_min_piece);
  EXPECT_EQ(x.expandable_min_map, y.expandable_min_map);
  EXPECT_EQ(a.pinned_mode, b.pinned_mode);
}

AllocConfig Parsed(std::string_view text, AllocConfig base = {}) {
  absl::StatusOr<AllocConfig> config = ParseAllocConfig(text, base);
  EXPECT_TRUE(config.ok()) << "'" << text << "': " << config.status();
  return config.ok() ? *config : AllocConfig{};
}

// The message of the InvalidArgument error that `text` must give.
std::string ErrorOf(std::string_view text) {
  absl::StatusOr<AllocConfig> config = ParseAllocConfig(text);
  EXPECT_FALSE(config.ok()) << "'" << text << "' parsed as " << FormatAllocConfig(*config);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << config.status();
  return std::string(config.status().message());
}

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ParseAllocConfigTest, BlankIsTheBase) {
  ExpectSameConfig(Parsed(""), AllocConfig{});
  ExpectSameConfig(Parsed("  \t "), AllocConfig{});
  AllocConfig base;
  base.options.cache_limit = 123;
  base.pinned_mode = PinnedMode::kRegister;
  ExpectSameConfig(Parsed("", base), base);
}

TEST(ParseAllocConfigTest, TheReadmeExample) {
  const AllocConfig config = Parsed(
      "max_split_size:256MiB,cache_limit:2GB,memory_fraction:0.8,"
      "garbage_collection_threshold:0.6,roundup_power2_divisions:4,warm_up:64MiB+1GiB,"
      "adaptive_caching:false,pinned_mode:register,expandable_segments:false");
  AllocConfig expected;
  expected.options.expandable_segments = ExpandableSegments::kOff;
  expected.options.max_split_size = 256 * kMiB;
  expected.options.cache_limit = 2'000'000'000;
  expected.options.memory_fraction = 0.8;
  expected.options.garbage_collection_threshold = 0.6;
  expected.options.roundup_power2_divisions = 4;
  expected.options.warm_up_sizes = {64 * kMiB, kGiB};
  expected.options.adaptive_caching = false;
  expected.pinned_mode = PinnedMode::kRegister;
  ExpectSameConfig(config, expected);
}

TEST(ParseAllocConfigTest, EverySizeKey) {
  const AllocConfig config = Parsed(
      "block_rounding:1KiB,small_size_limit:512k,small_segment_size:4MiB,"
      "large_segment_size:64MiB,large_segment_threshold:32MiB,"
      "large_segment_rounding:1MiB,large_segment_max:1GiB");
  EXPECT_EQ(config.options.block_rounding, kKiB);
  EXPECT_EQ(config.options.small_size_limit, 512 * kKiB);
  EXPECT_EQ(config.options.small_segment_size, 4 * kMiB);
  EXPECT_EQ(config.options.large_segment_size, 64 * kMiB);
  EXPECT_EQ(config.options.large_segment_threshold, 32 * kMiB);
  EXPECT_EQ(config.options.large_segment_rounding, kMiB);
  EXPECT_EQ(config.options.large_segment_max, kGiB);
}

TEST(ParseAllocConfigTest, WhitespaceAroundTokens) {
  const AllocConfig config = Parsed(
      "  max_split_size : 1.5 GiB ,\tcache_limit:none , warm_up: 64MiB + 2 GiB ,"
      " adaptive_caching : 0 ");
  EXPECT_EQ(config.options.max_split_size, 3 * kGiB / 2);
  EXPECT_EQ(config.options.cache_limit, kNoLimit);
  EXPECT_EQ(config.options.warm_up_sizes, (std::vector<size_t>{64 * kMiB, 2 * kGiB}));
  EXPECT_FALSE(config.options.adaptive_caching);
}

TEST(ParseAllocConfigTest, KeysNotGivenKeepTheBase) {
  AllocConfig base;
  base.options.memory_fraction = 0.5;
  base.options.warm_up_sizes = {kMiB};
  base.pinned_mode = PinnedMode::kRegister;
  const AllocConfig config = Parsed("cache_limit:1GiB", base);
  AllocConfig expected = base;
  expected.options.cache_limit = kGiB;
  ExpectSameConfig(config, expected);
  // "none" clears a list and removes a limit.
  base.options.cache_limit = 5;
  const AllocConfig cleared = Parsed("warm_up:none,cache_limit:none,pinned_mode:alloc", base);
  EXPECT_TRUE(cleared.options.warm_up_sizes.empty());
  EXPECT_EQ(cleared.options.cache_limit, kNoLimit);
  EXPECT_EQ(cleared.pinned_mode, PinnedMode::kAlloc);
}

TEST(ParseAllocConfigTest, Booleans) {
  EXPECT_TRUE(Parsed("adaptive_caching:true").options.adaptive_caching);
  EXPECT_TRUE(Parsed("adaptive_caching:1").options.adaptive_caching);
  EXPECT_FALSE(Parsed("adaptive_caching:false").options.adaptive_caching);
  EXPECT_FALSE(Parsed("adaptive_caching:0").options.adaptive_caching);
  EXPECT_TRUE(Contains(ErrorOf("adaptive_caching:yes"), "true, false, 1 or 0"));
  EXPECT_EQ(Parsed("thread_cache_blocks:0").options.thread_cache_blocks, 0);
  EXPECT_EQ(Parsed("thread_cache_blocks:64").options.thread_cache_blocks, 64);
  EXPECT_TRUE(Contains(ErrorOf("thread_cache_blocks:-1"), "[0, 1024]"));
  EXPECT_TRUE(Contains(ErrorOf("thread_cache_blocks:2000"), "thread_cache_blocks"));
  EXPECT_EQ(Parsed("thread_cache_bytes:8MiB").options.thread_cache_bytes, 8u << 20);
}

TEST(ParseAllocConfigTest, RangesThatAreAccepted) {
  EXPECT_EQ(Parsed("memory_fraction:1").options.memory_fraction, 1.0);
  EXPECT_EQ(Parsed("memory_fraction:1e-3").options.memory_fraction, 0.001);
  EXPECT_EQ(Parsed("garbage_collection_threshold:0").options.garbage_collection_threshold,
            0.0);
  EXPECT_EQ(Parsed("garbage_collection_threshold:1").options.garbage_collection_threshold,
            1.0);
  for (int divisions : {0, 1, 2, 4, 8, 16, 32, 64}) {
    EXPECT_EQ(Parsed("roundup_power2_divisions:" + std::to_string(divisions))
                  .options.roundup_power2_divisions,
              divisions);
  }
  EXPECT_EQ(Parsed("block_rounding:512").options.block_rounding, 512u);
  EXPECT_EQ(Parsed("block_rounding:2MiB").options.block_rounding, 2 * kMiB);
  EXPECT_EQ(Parsed("max_split_size:0").options.max_split_size, 0u);
  EXPECT_EQ(Parsed("cache_limit:0").options.cache_limit, 0u);
}

TEST(ParseAllocConfigTest, ValuesOutOfRangeNameKeyValueAndColumn) {
  const std::string fraction = ErrorOf("cache_limit:1GiB, memory_fraction:1.5");
  EXPECT_TRUE(Contains(fraction, "'memory_fraction'")) << fraction;
  EXPECT_TRUE(Contains(fraction, "'1.5'")) << fraction;
  EXPECT_TRUE(Contains(fraction, "column 35")) << fraction;
  EXPECT_TRUE(Contains(fraction, "(0, 1]")) << fraction;
  EXPECT_TRUE(Contains(ErrorOf("memory_fraction:0"), "(0, 1]"));
  EXPECT_TRUE(Contains(ErrorOf("memory_fraction:-0.5"), "(0, 1]"));
  EXPECT_TRUE(Contains(ErrorOf("memory_fraction:nan"), "(0, 1]"));
  EXPECT_TRUE(Contains(ErrorOf("memory_fraction:inf"), "(0, 1]"));
  EXPECT_TRUE(Contains(ErrorOf("garbage_collection_threshold:1.01"), "[0, 1]"));
  EXPECT_TRUE(Contains(ErrorOf("garbage_collection_threshold:-0.1"), "[0, 1]"));
  for (std::string_view bad : {"3", "128", "-2", "6", "100"}) {
    const std::string message =
        ErrorOf(std::string("roundup_power2_divisions:") + std::string(bad));
    EXPECT_TRUE(Contains(message, "power of two <= 64")) << message;
    EXPECT_TRUE(Contains(message, "'roundup_power2_divisions'")) << message;
  }
  EXPECT_TRUE(Contains(ErrorOf("block_rounding:256"), "power of two >= 512"));
  EXPECT_TRUE(Contains(ErrorOf("block_rounding:768"), "power of two >= 512"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_piece_size:1MiB"), "power of two >= 2MiB"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_piece_size:24MiB"), "power of two >= 2MiB"));
  EXPECT_EQ(Parsed("expandable_piece_size:128MiB").options.expandable_piece_size,
            128 * kMiB);
  EXPECT_EQ(Parsed("expandable_piece_layout:whole").options.expandable_piece_layout,
            PieceLayout::kWhole);
  EXPECT_EQ(
      Parsed("expandable_piece_layout:aligned", Parsed("expandable_piece_layout:whole"))
          .options.expandable_piece_layout,
      PieceLayout::kAligned);
  EXPECT_TRUE(Contains(ErrorOf("expandable_piece_layout:Whole"), "expected aligned or whole"));
  EXPECT_EQ(Parsed("expandable_min_piece:16MiB").options.expandable_min_piece, 16 * kMiB);
  EXPECT_TRUE(Contains(ErrorOf("expandable_min_piece:1MiB"), "power of two >= 2MiB"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_min_piece:12MiB"), "power of two >= 2MiB"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_min_piece:lots"), "expandable_min_piece"));
  EXPECT_EQ(Parsed("expandable_min_map:0").options.expandable_min_map, 0u);
  EXPECT_EQ(Parsed("expandable_min_map:20MiB").options.expandable_min_map, 20 * kMiB);
  EXPECT_TRUE(Contains(ErrorOf("expandable_min_map:-2MiB"), "expandable_min_map"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_min_map:none"), "expandable_min_map"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_piece_layout:exact"), "expected aligned or whole"));
  EXPECT_TRUE(Contains(ErrorOf("small_segment_size:0"), "> 0"));
  EXPECT_TRUE(Contains(ErrorOf("warm_up:64MiB+0"), "> 0"));
}

TEST(ParseAllocConfigTest, BadNumbersAndSizes) {
  const std::string size = ErrorOf("cache_limit:2GBx");
  EXPECT_TRUE(Contains(size, "'cache_limit'")) << size;
  EXPECT_TRUE(Contains(size, "'2GBx'")) << size;
  EXPECT_TRUE(Contains(size, "unknown unit")) << size;
  EXPECT_TRUE(Contains(size, "column 13")) << size;
  EXPECT_TRUE(Contains(ErrorOf("max_split_size:-1"), "negative"));
  EXPECT_TRUE(Contains(ErrorOf("memory_fraction:0.8x"), "not a number"));
  EXPECT_TRUE(Contains(ErrorOf("memory_fraction:80%"), "not a number"));
  EXPECT_TRUE(Contains(ErrorOf("roundup_power2_divisions:4.0"), "not an integer"));
  EXPECT_TRUE(Contains(ErrorOf("roundup_power2_divisions:99999999999"), "not an integer"));
  const std::string warm_up = ErrorOf("warm_up:64MiB+lots");
  EXPECT_TRUE(Contains(warm_up, "size 2 'lots'")) << warm_up;
  EXPECT_TRUE(Contains(ErrorOf("warm_up:64MiB+"), "size 2"));
  EXPECT_TRUE(Contains(ErrorOf("pinned_mode:mmap"), "alloc or register"));
  EXPECT_TRUE(Contains(ErrorOf("pinned_mode:Alloc"), "alloc or register"));
  ErrorOf("cache_limit:None");
  ErrorOf("cache_limit:1GiB 2GiB");
}

TEST(ParseAllocConfigTest, UnknownKeyListsTheValidOnes) {
  const std::string message = ErrorOf("max_split_size:1GiB,max_split_size_mb:256");
  EXPECT_TRUE(Contains(message, "unknown key 'max_split_size_mb'")) << message;
  EXPECT_TRUE(Contains(message, "column 21")) << message;
  for (std::string_view key :
       {"block_rounding", "small_size_limit", "small_segment_size", "large_segment_size",
        "large_segment_threshold", "large_segment_rounding", "large_segment_max",
        "roundup_power2_divisions",
        "max_split_size", "memory_fraction", "cache_limit", "garbage_collection_threshold",
        "warm_up", "adaptive_caching", "pinned_mode"}) {
    EXPECT_TRUE(Contains(message, key)) << key;
  }
  // Keys are case-sensitive.
  EXPECT_TRUE(Contains(ErrorOf("Cache_Limit:1GiB"), "unknown key"));
  EXPECT_TRUE(Contains(ErrorOf("expandable_segments:yes"), "expected auto, true or false"));
  EXPECT_EQ(Parsed("expandable_segments:true").options.expandable_segments,
            ExpandableSegments::kOn);
  EXPECT_EQ(Parsed("expandable_segments:auto", Parsed("expandable_segments:0"))
                .options.expandable_segments,
            ExpandableSegments::kAuto);
}

TEST(ParseAllocConfigTest, DuplicateKeys) {
  const std::string message = ErrorOf("cache_limit:1GiB, memory_fraction:0.5,cache_limit:2GiB");
  EXPECT_TRUE(Contains(message, "'cache_limit'")) << message;
  EXPECT_TRUE(Contains(message, "'2GiB'")) << message;
  EXPECT_TRUE(Contains(message, "already set at column 1")) << message;
  EXPECT_TRUE(Contains(message, "column 39")) << message;
}

TEST(ParseAllocConfigTest, MalformedEntries) {
  EXPECT_TRUE(Contains(ErrorOf("cache_limit"), "no ':'"));
  EXPECT_TRUE(Contains(ErrorOf("cache_limit=1GiB"), "no ':'"));
  EXPECT_TRUE(Contains(ErrorOf("cache_limit:"), "no value"));
  EXPECT_TRUE(Contains(ErrorOf("cache_limit:  ,memory_fraction:1"), "no value"));
  EXPECT_TRUE(Contains(ErrorOf(":1GiB"), "no key"));
  EXPECT_TRUE(Contains(ErrorOf("cache_limit:1GiB,"), "empty entry"));
  EXPECT_TRUE(Contains(ErrorOf(",cache_limit:1GiB"), "empty entry"));
  const std::string twice = ErrorOf("cache_limit:1GiB,,memory_fraction:1");
  EXPECT_TRUE(Contains(twice, "empty entry")) << twice;
  EXPECT_TRUE(Contains(twice, "column 18")) << twice;
  EXPECT_TRUE(Contains(ErrorOf("cache_limit:1:2"), "'cache_limit'"));
}

TEST(FormatAllocConfigTest, Defaults) {
  EXPECT_EQ(FormatAllocConfig(AllocConfig{}),
            "block_rounding:512,small_size_limit:1MiB,small_segment_size:2MiB,"
            "large_segment_size:20MiB,large_segment_threshold:10MiB,"
            "large_segment_rounding:2MiB,large_segment_max:256MiB,roundup_power2_divisions:0,"
            "max_split_size:none,"
            "memory_fraction:1,cache_limit:none,garbage_collection_threshold:0,"
            "warm_up:none,thread_cache_blocks:8,thread_cache_bytes:64MiB,adaptive_caching:true,"
            "expandable_segments:auto,expandable_piece_size:64MiB,"
            "expandable_min_piece:16MiB,expandable_piece_layout:aligned,"
            "expandable_min_map:16MiB,pinned_mode:alloc");
}

TEST(FormatAllocConfigTest, RoundTripsWhateverTheBase) {
  AllocConfig custom;
  custom.options.block_rounding = 4096;
  custom.options.small_size_limit = 1000;
  custom.options.small_segment_size = 3 * kMiB + 1;
  custom.options.large_segment_size = 7 * kGiB;
  custom.options.large_segment_threshold = 123456789;
  custom.options.large_segment_rounding = kKiB;
  custom.options.large_segment_max = 3 * kGiB + 512;
  custom.options.roundup_power2_divisions = 16;
  custom.options.max_split_size = 0;
  custom.options.memory_fraction = 0.1 + 0.2;  // Not a short decimal.
  custom.options.cache_limit = kNoLimit - 1;
  custom.options.garbage_collection_threshold = 1.0 / 3;
  custom.options.warm_up_sizes = {1, 64 * kMiB, kGiB + 1};
  custom.options.adaptive_caching = false;
  custom.options.expandable_piece_layout = PieceLayout::kWhole;
  custom.options.expandable_min_piece = 8 * kMiB;
  custom.options.expandable_min_map = 3 * kMiB + 512;
  custom.pinned_mode = PinnedMode::kRegister;

  AllocConfig other_base;
  other_base.options.warm_up_sizes = {5};
  other_base.options.cache_limit = 7;
  for (const AllocConfig& config : {AllocConfig{}, custom}) {
    const std::string text = FormatAllocConfig(config);
    SCOPED_TRACE(text);
    ExpectSameConfig(Parsed(text), config);
    ExpectSameConfig(Parsed(text, other_base), config);
    EXPECT_EQ(FormatAllocConfig(Parsed(text)), text);
  }
}

// Sets GENESIS_ALLOC_CONF for one test and restores it afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (const char* old = std::getenv(kName)) old_ = old;
    if (value == nullptr) {
      unsetenv(kName);
    } else {
      setenv(kName, value, /*overwrite=*/1);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(kName, old_->c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }

 private:
  static constexpr const char* kName = "GENESIS_ALLOC_CONF";
  std::optional<std::string> old_;
};

TEST(AllocConfigFromEnvironmentTest, UnsetOrBlankGivesDefaults) {
  {
    ScopedEnv env(nullptr);
    absl::StatusOr<AllocConfig> config = AllocConfigFromEnvironment();
    ASSERT_TRUE(config.ok()) << config.status();
    ExpectSameConfig(*config, AllocConfig{});
  }
  {
    ScopedEnv env(" ");
    absl::StatusOr<AllocConfig> config = AllocConfigFromEnvironment();
    ASSERT_TRUE(config.ok()) << config.status();
    ExpectSameConfig(*config, AllocConfig{});
  }
}

TEST(AllocConfigFromEnvironmentTest, ParsesTheVariable) {
  ScopedEnv env("cache_limit:1GiB,pinned_mode:register");
  absl::StatusOr<AllocConfig> config = AllocConfigFromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->options.cache_limit, kGiB);
  EXPECT_EQ(config->pinned_mode, PinnedMode::kRegister);
}

TEST(AllocConfigFromEnvironmentTest, ErrorsNameTheVariable) {
  ScopedEnv env("cache_limit:lots");
  absl::StatusOr<AllocConfig> config = AllocConfigFromEnvironment();
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  EXPECT_EQ(message.rfind("GENESIS_ALLOC_CONF='cache_limit:lots': ", 0), 0u) << message;
  EXPECT_TRUE(Contains(message, "'lots'")) << message;
}

}  // namespace
}  // namespace genesis::memory
