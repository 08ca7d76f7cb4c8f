#include "layers/layer.h"

#include "core/device.h"
#include "core/error.h"

namespace hpmc {

size_t Layer::param_count() const {
  size_t n = 0;
  for (const auto& p : param_specs()) n += p.count();
  return n;
}

void Layer::set_input_shape(const Shape& in) {
  output_shape(in);  // throws ShapeError if the layer cannot take it
  in_ = in;
  has_input_shape_ = true;
}

void Layer::bind(std::vector<float*> params, std::vector<float*> grads) {
  size_t n = param_specs().size();
  HPMC_CHECK(params.size() == n && grads.size() == n, "layer '", name_, "' has ", n,
             " parameter tensors, bind() got ", params.size(), " and ", grads.size());
  params_ = std::move(params);
  grads_ = std::move(grads);
}

void Layer::bind_buffers(std::vector<float*> buffers) {
  size_t n = buffer_specs().size();
  HPMC_CHECK(buffers.size() == n, "layer '", name_, "' has ", n, " buffers, bind_buffers() got ",
             buffers.size());
  buffers_ = std::move(buffers);
}

bool Layer::bound() const {
  return params_.size() == param_specs().size() && buffers_.size() == buffer_specs().size();
}

void Layer::check_tensor(const Tensor& t, const Shape& expect, const char* what) const {
  HPMC_CHECK(t.defined(), "layer '", name_, "': ", what, " is not allocated");
  HPMC_CHECK(t.device() == device(), "layer '", name_, "' runs on ", device_name(device()),
             " but its ", what, " is on ", device_name(t.device()));
  HPMC_CHECK(t.dtype() == DType::kF32, "layer '", name_, "': ", what, " is ",
             dtype_name(t.dtype()), ", expected float32");
  HPMC_CHECK(t.shape() == expect, "layer '", name_, "': ", what, " has shape ", t.shape().str(),
             ", expected ", expect.str());
}

void Layer::forward(const Tensor& x, Tensor& y) {
  HPMC_CHECK(has_input_shape_, "layer '", name_, "' used before set_input_shape()");
  HPMC_CHECK(bound(), "layer '", name_, "' used before its parameters (or buffers) were bound");
  const int n = x.shape().n;
  check_tensor(x, in_.with_batch(n), "input");
  check_tensor(y, output_shape(in_.with_batch(n)), "output");
  const ScopedPrecision products(precision_);
  forward_impl(x, y);
  if (device() == Device::kGPU) gpu::check_after(str("layer '", name_, "' (", type(), ") forward"));
}

void Layer::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  HPMC_CHECK(has_input_shape_, "layer '", name_, "' used before set_input_shape()");
  HPMC_CHECK(bound(), "layer '", name_, "' used before its parameters (or buffers) were bound");
  const int n = x.shape().n;
  const Shape in = in_.with_batch(n);
  const Shape out = output_shape(in);
  check_tensor(x, in, "input");
  check_tensor(y, out, "output");
  check_tensor(dy, out, "output gradient");
  if (dx) check_tensor(*dx, in, "input gradient");
  const ScopedPrecision products(precision_);
  backward_impl(x, y, dy, dx);
  if (device() == Device::kGPU) gpu::check_after(str("layer '", name_, "' (", type(), ") backward"));
}

}  // namespace hpmc
