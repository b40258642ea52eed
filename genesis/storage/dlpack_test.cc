#include "genesis/storage/dlpack.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/cuda/device_query.h"
#include "genesis/storage/dlpack_convert.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<Device> Devices() {
  std::vector<Device> devices = {Device::Cpu()};
  if (cuda::DeviceCount() > 0) devices.push_back(Device::Cuda(0));
  return devices;
}

TEST(DLPackTest, ExportedViewComesBackZeroCopy) {
  for (const Device device : Devices()) {
    SCOPED_TRACE(device.ToString());
    auto base = Arange(0, 24, 1, DType::kInt32, device);
    ASSERT_TRUE(base.ok()) << base.status();
    auto view = base->Reshape({4, 6})->Slice(1, 1, 6, 2)->Transpose(0, 1);
    ASSERT_TRUE(view.ok());
    auto managed = ToDLPack(*view);
    ASSERT_TRUE(managed.ok()) << managed.status();
    EXPECT_EQ((*managed)->dl_tensor.data, view->data_ptr());
    EXPECT_EQ((*managed)->dl_tensor.byte_offset, 0u);
    EXPECT_EQ((*managed)->dl_tensor.device.device_type, device.is_cpu() ? kDLCPU : kDLCUDA);
    EXPECT_EQ(base->use_count(), 3);  // base, view, and the exported tensor
    auto back = FromDLPack(*managed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->data_ptr(), view->data_ptr());
    EXPECT_EQ(back->device(), device);
    EXPECT_EQ(back->dtype(), DType::kInt32);
    EXPECT_THAT(back->shape(), ElementsAre(3, 4));
    EXPECT_THAT(back->strides(), ElementsAre(2, 6));
    EXPECT_THAT(*back->ToVector<int32_t>(),
                ElementsAre(1, 7, 13, 19, 3, 9, 15, 21, 5, 11, 17, 23));
    ASSERT_TRUE(back->Fill(-1).ok());  // Writes reach the original memory.
    EXPECT_EQ(base->Reshape({4, 6})->Select(1, 1)->ToVector<int32_t>().value(),
              std::vector<int32_t>(4, -1));
    *back = Storage();  // The import's deleter drops the export's reference.
    EXPECT_EQ(base->use_count(), 2);
  }
}

// A producer's tensor whose deleter counts its calls.
struct Produced {
  std::vector<float> data = std::vector<float>(6, 3.0f);
  int64_t shape[2] = {2, 3};
  DLManagedTensor managed{};
  int deleted = 0;

  Produced() {
    managed.dl_tensor.data = data.data();
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = 2;
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<Produced*>(self->manager_ctx)->deleted;
    };
  }
};

TEST(DLPackTest, ImportHonoursTheDeleter) {
  Produced produced;
  {
    auto s = FromDLPack(&produced.managed);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->data_ptr(), produced.data.data());
    EXPECT_TRUE(s->is_contiguous());  // strides == NULL
    EXPECT_EQ(*s->ToVector<float>(), produced.data);
    auto view = s->Select(0, 1);
    *s = Storage();
    EXPECT_EQ(produced.deleted, 0);
  }
  EXPECT_EQ(produced.deleted, 1);
}

TEST(DLPackTest, UnsupportedTensorsAreRefusedAndReleased) {
  Produced rocm;
  rocm.managed.dl_tensor.device = {kDLROCM, 0};
  auto s = FromDLPack(&rocm.managed);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rocm.deleted, 1);

  Produced complex;
  complex.managed.dl_tensor.dtype = {kDLComplex, 64, 1};
  auto c = FromDLPack(&complex.managed);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(complex.deleted, 1);

  Produced missing_gpu;
  missing_gpu.managed.dl_tensor.device = {kDLCUDA, cuda::DeviceCount() + 1};
  EXPECT_FALSE(FromDLPack(&missing_gpu.managed).ok());
  EXPECT_EQ(missing_gpu.deleted, 1);

  EXPECT_EQ(FromDLPack(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ToDLPack(Storage()).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DLPackTest, UnconsumedExportReleasesItsReference) {
  auto s = Zeros({8}, DType::kBool, Device::Cpu());
  ASSERT_TRUE(s.ok());
  auto managed = ToDLPack(*s);
  ASSERT_TRUE(managed.ok());
  EXPECT_EQ((*managed)->dl_tensor.dtype.code, kDLPackBoolCode);
  EXPECT_EQ(s->use_count(), 2);
  (*managed)->deleter(*managed);
  EXPECT_EQ(s->use_count(), 1);
}

}  // namespace
}  // namespace genesis::storage
