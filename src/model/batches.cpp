#include "model/batches.h"

#include <numeric>

#include "core/error.h"
#include "layers/gpu/factory.h"

namespace hpmc {

BatchFeeder::BatchFeeder(const Dataset& data, Device device, int max_batch, const Shape& sample)
    : data_(data), device_(device), max_batch_(max_batch) {
  HPMC_CHECK(sample.per_sample() == data.images.shape().per_sample(), "the model takes ",
             sample.sample_str(), " samples but the dataset holds ", data.sample_shape().sample_str());
  x_ = Tensor::empty(sample.with_batch(max_batch), DType::kF32, device);
  labels_ = Tensor::empty(Shape(max_batch, 1, 1, 1), DType::kI32, device);
  if (device == Device::kGPU && data.size() > 0) {
    // The one upload of the dataset.
    images_dev_ = data.images.to_device(Device::kGPU);
    labels_dev_ = data.labels.to_device(Device::kGPU);
    order_dev_ = Tensor::empty(Shape(data.size(), 1, 1, 1), DType::kI32, Device::kGPU);
  }
  std::vector<int32_t> identity(static_cast<size_t>(data.size()));
  std::iota(identity.begin(), identity.end(), 0);
  set_order(identity);
}

void BatchFeeder::set_order(const std::vector<int32_t>& order) {
  HPMC_CHECK(int(order.size()) == data_.size(), "an order of ", order.size(), " indices for ",
             data_.size(), " samples");
  order_ = order;
  ++order_version_;
  if (device_ == Device::kGPU && !order_.empty()) {
    Tensor host = Tensor::empty(order_dev_.shape(), DType::kI32);
    std::copy(order_.begin(), order_.end(), host.data<int32_t>());
    order_dev_.copy_from(host);  // once per epoch
  }
}

void BatchFeeder::load(int begin, int n) {
  HPMC_CHECK(begin >= 0 && n >= 0 && begin + n <= int(order_.size()), "batch [", begin, ", ",
             begin + n, ") outside ", order_.size(), " samples");
  if (device_ == Device::kCPU) {
    gather_batch(data_, order_.data() + begin, n, x_, &labels_);
    return;
  }
  x_.set_batch(n);
  labels_.set_batch(n);
  if (images_dev_.dtype() == DType::kU8)
    gpu::gather_batch(images_dev_.data<uint8_t>(), labels_dev_.data<int32_t>(),
                      data_.images.shape().per_sample(), order_dev_.data<int32_t>() + begin, n,
                      x_.data<float>(), labels_.data<int32_t>());
  else
    gpu::gather_batch(images_dev_.data<float>(), labels_dev_.data<int32_t>(),
                      data_.images.shape().per_sample(), order_dev_.data<int32_t>() + begin, n,
                      x_.data<float>(), labels_.data<int32_t>());
}

const uint8_t* BatchFeeder::device_images() const {
  HPMC_CHECK(device_ == Device::kGPU && data_.size() > 0, "no dataset on the GPU");
  HPMC_CHECK(images_dev_.dtype() == DType::kU8, "the dataset on the GPU is ",
             dtype_name(images_dev_.dtype()), ", not uint8");
  return images_dev_.data<uint8_t>();
}

const int32_t* BatchFeeder::device_labels() const {
  HPMC_CHECK(device_ == Device::kGPU && data_.size() > 0, "no dataset on the GPU");
  return labels_dev_.data<int32_t>();
}

const int32_t* BatchFeeder::device_order() const {
  HPMC_CHECK(device_ == Device::kGPU && data_.size() > 0, "no dataset on the GPU");
  return order_dev_.data<int32_t>();
}

}  // namespace hpmc
