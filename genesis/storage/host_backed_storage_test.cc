#include "genesis/storage/host_backed_storage.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/core/absl_compat.h"
#include "genesis/cuda/test_util.h"

namespace genesis::storage {
namespace {

using ::testing::HasSubstr;

std::string TempPath(std::string_view stem) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", ToAbsl(stem), "_", getpid());
}

void WriteFloats(const std::string& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

std::vector<float> ReadFloats(const std::string& path, size_t count) {
  std::vector<float> values(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(values.data()), count * sizeof(float));
  return values;
}

std::vector<float> Iota(int n, float first = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

TEST(MappedStorageTest, ReadModeViewsTheFileReadOnly) {
  const std::string path = TempPath("mapped_read");
  WriteFloats(path, Iota(16));
  auto mapped = MappedStorage::Open(path, MapMode::kRead, {2, 4}, DType::kFloat32,
                                    /*offset=*/8 * sizeof(float));
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  const Storage& s = mapped->storage();
  EXPECT_TRUE(s.is_read_only());
  EXPECT_EQ(*s.ToVector<float>(), Iota(8, 8));
  EXPECT_THAT(s.Select(0, 0)->ToVector<float>().value(), testing::ElementsAre(8, 9, 10, 11));
  Storage target = s;
  EXPECT_EQ(target.Fill(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(mapped->Flush().ok());
  EXPECT_TRUE(mapped->Close().code() == absl::StatusCode::kFailedPrecondition);
  target = Storage();
  EXPECT_TRUE(mapped->Close().ok());
  EXPECT_FALSE(mapped->storage().defined());
  EXPECT_TRUE(mapped->Close().ok());
  EXPECT_EQ(mapped->Flush().code(), absl::StatusCode::kFailedPrecondition);
  std::remove(path.c_str());
}

TEST(MappedStorageTest, CreateWritesReachTheFile) {
  const std::string path = TempPath("mapped_create");
  {
    auto mapped = MappedStorage::Open(path, MapMode::kCreate, {3, 3}, DType::kFloat32);
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    EXPECT_EQ(*mapped->storage().ToVector<float>(), std::vector<float>(9, 0.0f));
    Storage s = mapped->storage();
    ASSERT_TRUE(s.Fill(2.5).ok());
    ASSERT_TRUE(mapped->Flush().ok());
    EXPECT_EQ(ReadFloats(path, 9), std::vector<float>(9, 2.5f));
  }
  // Copy-on-write: writable, but the file keeps its bytes.
  auto cow = MappedStorage::Open(path, MapMode::kCopyOnWrite, {9}, DType::kFloat32);
  ASSERT_TRUE(cow.ok());
  Storage s = cow->storage();
  ASSERT_TRUE(s.Fill(-1).ok());
  EXPECT_EQ(*s.ToVector<float>(), std::vector<float>(9, -1.0f));
  EXPECT_EQ(ReadFloats(path, 9), std::vector<float>(9, 2.5f));
  std::remove(path.c_str());
}

TEST(MappedStorageTest, BadFilesAreReported) {
  const std::string path = TempPath("mapped_short");
  WriteFloats(path, Iota(4));
  auto short_file = MappedStorage::Open(path, MapMode::kRead, {8}, DType::kFloat32);
  EXPECT_EQ(short_file.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(short_file.status().message(), HasSubstr(path));
  auto missing = MappedStorage::Open(path + ".missing", MapMode::kReadWrite, {1},
                                     DType::kFloat32);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto empty = MappedStorage::Open(path, MapMode::kRead, {0}, DType::kFloat32);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_shape = MappedStorage::Open(path, MapMode::kRead, {-1}, DType::kFloat32);
  EXPECT_EQ(bad_shape.status().code(), absl::StatusCode::kInvalidArgument);
  if (geteuid() != 0) {  // root may write anything
    ASSERT_EQ(chmod(path.c_str(), 0444), 0);
    auto read_only = MappedStorage::Open(path, MapMode::kReadWrite, {4}, DType::kFloat32);
    EXPECT_EQ(read_only.status().code(), absl::StatusCode::kPermissionDenied);
  }
  std::remove(path.c_str());
}

TEST(MappedStorageTest, MovesToTheGpuFromTheMapping) {
  GENESIS_SKIP_WITHOUT_GPU();
  const std::string path = TempPath("mapped_gpu");
  const std::vector<float> values = Iota(1 << 20);
  WriteFloats(path, values);
  auto mapped = MappedStorage::Open(path, MapMode::kRead, {1 << 20}, DType::kFloat32);
  ASSERT_TRUE(mapped.ok());
  auto on_gpu = mapped->storage().To(Device::Cuda(0));
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(on_gpu->device(), Device::Cuda(0));
  EXPECT_FALSE(on_gpu->is_read_only());
  EXPECT_EQ(*on_gpu->ToVector<float>(), values);
  std::remove(path.c_str());
}

std::string ShmName() {
  static int counter = 0;
  return absl::StrCat("/genesis_shared_storage_test_", getpid(), "_", counter++);
}

// The child attaches, checks the parent's values and adds 100 to each; it reports
// through its exit status only.
TEST(SharedStorageTest, TwoProcessesShareOneStorage) {
  const std::string name = ShmName();
  auto owner = SharedStorage::Create(name, {4, 8}, DType::kFloat32);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_TRUE(owner->is_owner());
  EXPECT_EQ(*owner->storage().ToVector<float>(), std::vector<float>(32, 0.0f));
  auto values = CreateStorage<float>(Iota(32), Device::Cpu(), {4, 8});
  Storage shared = owner->storage();
  ASSERT_TRUE(shared.CopyFrom(*values).ok());

  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    auto attached = SharedStorage::Attach(name, {4, 8}, DType::kFloat32);
    if (!attached.ok()) _exit(10);
    if (attached->is_owner()) _exit(11);
    float* data = static_cast<float*>(attached->storage().data_ptr());
    for (int i = 0; i < 32; ++i) {
      if (data[i] != static_cast<float>(i)) _exit(12);
      data[i] += 100;
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "10: attach, 11: owner, 12: values";
  EXPECT_EQ(*owner->storage().ToVector<float>(), Iota(32, 100));
}

TEST(SharedStorageTest, BadNamesAndSizes) {
  const std::string name = ShmName();
  auto owner = SharedStorage::Create(name, {16}, DType::kInt32);
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(SharedStorage::Create(name, {16}, DType::kInt32).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto too_big = SharedStorage::Attach(name, {17}, DType::kInt32);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(too_big.status().message(), HasSubstr("64 bytes"));
  auto smaller = SharedStorage::Attach(name, {2, 2}, DType::kInt32);
  ASSERT_TRUE(smaller.ok());
  EXPECT_EQ(smaller->Unlink().code(), absl::StatusCode::kFailedPrecondition);
  auto read_only =
      SharedStorage::Attach(name, {16}, DType::kInt32, SharedMemory::Access::kReadOnly);
  ASSERT_TRUE(read_only.ok());
  Storage ro = read_only->storage();
  EXPECT_EQ(ro.Fill(3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SharedStorage::Attach(name + "_missing", {1}, DType::kInt32).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SharedStorage::Create("bad/name", {1}, DType::kInt32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedStorage::Create(ShmName(), {0}, DType::kInt32).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The owner unlinks on Close, once no view is left.
  EXPECT_EQ(owner->Close().code(), absl::StatusCode::kOk);
  EXPECT_EQ(SharedStorage::Attach(name, {1}, DType::kInt32).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*ro.ToVector<int32_t>(), std::vector<int32_t>(16, 0));  // Still mapped.
}

}  // namespace
}  // namespace genesis::storage
