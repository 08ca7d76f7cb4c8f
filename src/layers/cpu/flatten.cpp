// flatten.cpp — FlattenCPU: copies, since only the shape changes.
#include "layers/cpu/flatten.h"

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace hpmc {

FlattenCPU::FlattenCPU(std::string name) : LayerCPU(std::move(name)) {}

Shape FlattenCPU::output_shape(const Shape& in) const {
  const size_t features = in.per_sample();
  if (features > size_t(INT32_MAX))
    throw ShapeError(str("flatten: input ", in.sample_str(), " has ", features,
                         " features per sample, more than a shape can hold"));
  return Shape(in.n, int(features), 1, 1);
}

// Copies rather than shared views: the model owns each activation buffer and
// the layer contract writes y and dx, so aliasing x would break that.
void FlattenCPU::forward_impl(const Tensor& x, Tensor& y) {
  std::memcpy(y.data<float>(), x.data<float>(), x.numel() * sizeof(float));
}

void FlattenCPU::backward_impl(const Tensor& /*x*/, const Tensor& /*y*/,
                               const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  std::memcpy(dx->data<float>(), dy.data<float>(), dy.numel() * sizeof(float));
}

}  // namespace hpmc
