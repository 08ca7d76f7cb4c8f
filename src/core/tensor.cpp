#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/device.h"

namespace hpmc {

const char* device_name(Device d) { return d == Device::kCPU ? "cpu" : "gpu"; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
  }
  return 0;
}

namespace {

// 64-byte alignment: a cache line on the CPU, and enough for vector loads.
constexpr size_t kAlign = 64;

std::shared_ptr<void> allocate(size_t bytes, Device device) {
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0) rounded = kAlign;
  if (device == Device::kCPU) {
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p)
      throw RuntimeError(str("out of host memory: could not allocate ", rounded,
                             " bytes; try a smaller batch size (--batch)"));
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  return gpu::allocate_shared(rounded);
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  HPMC_CHECK(shape.n >= 0 && shape.c >= 0 && shape.h >= 0 && shape.w >= 0, "negative shape ",
             shape.str());
  Tensor t;
  t.capacity_ = shape.count();
  t.storage_ = allocate(t.capacity_ * dtype_size(dtype), device);
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_zero();
  return t;
}

void Tensor::set_batch(int n) {
  HPMC_CHECK(n >= 0 && size_t(n) * shape_.per_sample() <= capacity_, "batch ", n,
             " exceeds the capacity of a tensor allocated for ", capacity_, " elements");
  shape_.n = n;
}

Tensor Tensor::view(const Shape& shape) const {
  HPMC_CHECK(shape.count() <= capacity_, "view ", shape.str(), " exceeds capacity ", capacity_);
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

void Tensor::fill_zero() {
  if (!defined()) return;
  if (device_ == Device::kCPU)
    std::memset(storage_.get(), 0, capacity_ * dtype_size(dtype_));
  else
    gpu::memset_zero(storage_.get(), capacity_ * dtype_size(dtype_));
}

Tensor Tensor::to_device(Device device) const {
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  HPMC_CHECK(src.dtype_ == dtype_ && src.numel() == numel(), "copy_from: ", src.shape_.str(), " ",
             dtype_name(src.dtype_), " into ", shape_.str(), " ", dtype_name(dtype_));
  size_t n = bytes();
  if (n == 0) return;
  if (device_ == Device::kCPU && src.device_ == Device::kCPU)
    std::memcpy(storage_.get(), src.storage_.get(), n);
  else
    gpu::copy(storage_.get(), device_, src.storage_.get(), src.device_, n);
}

void Tensor::check_dtype(DType t) const {
  HPMC_CHECK(t == dtype_, "tensor of ", dtype_name(dtype_), " accessed as ", dtype_name(t));
}

}  // namespace hpmc
