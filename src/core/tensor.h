// tensor.h — a typed NCHW buffer on one device.
//
// A Tensor owns (shares) a storage block of `capacity` elements and looks at
// the first shape().count() of them. set_batch() changes N within the
// capacity, so a model allocates its activations once for the largest batch
// and reuses them for the last, partial one. Copying a Tensor copies the
// handle, not the data; to_device() makes an explicit copy, and is the only
// way data crosses between host and device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "core/error.h"
#include "core/shape.h"

namespace hpmc {

enum class Device { kCPU, kGPU };
enum class DType { kF32, kF64, kI32, kU8 };

const char* device_name(Device d);
const char* dtype_name(DType t);
size_t dtype_size(DType t);

template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<double>() { return DType::kF64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kU8; }

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised storage for `shape` (capacity = shape.count()).
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = Device::kCPU);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = Device::kCPU);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t numel() const { return shape_.count(); }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return numel() * dtype_size(dtype_); }

  // Typed access; throws if T does not match dtype(). On a GPU tensor the
  // pointer is a device pointer.
  template <typename T>
  T* data() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(storage_.get());
  }
  template <typename T>
  const T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(storage_.get());
  }
  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  // Change the batch size within the capacity (per-sample shape unchanged).
  void set_batch(int n);
  // Reinterpret with another shape of at most capacity() elements (shares storage).
  Tensor view(const Shape& shape) const;

  void fill_zero();
  // An explicit, synchronous copy of the visible elements to another device.
  Tensor to_device(Device device) const;
  // Copy the visible elements of `src` (same dtype and count) into this tensor.
  void copy_from(const Tensor& src);

 private:
  void check_dtype(DType t) const;

  std::shared_ptr<void> storage_;
  size_t capacity_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCPU;
};

}  // namespace hpmc
