#include "model/params.h"

#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace hpmc {

void ParamStore::build(const std::vector<LayerPtr>& layers, Device device) {
  entries_.clear();
  total_ = 0;
  size_t offset = 0;
  for (const auto& layer : layers) {
    for (const auto& spec : layer->param_specs()) {
      ParamEntry e;
      e.name = layer->name() + "." + spec.name;
      e.dims = spec.dims;
      e.offset = offset;
      e.count = spec.count();
      e.fan_in = spec.fan_in;
      e.init = spec.init;
      entries_.push_back(e);
      total_ += e.count;
      offset += (e.count + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    }
  }
  padded_ = offset;
  device_ = device;
  // (blocks of 64, 64): a multiple of kAlignFloats, so no count passes a shape's int.
  HPMC_CHECK(padded_ / kAlignFloats <= kMaxTensorElements, "a parameter buffer of ", padded_,
             " floats");
  Shape s = padded_ > 0 ? Shape(int(padded_ / kAlignFloats), int(kAlignFloats), 1, 1)
                        : Shape(1, 1, 1, 1);
  params_ = Tensor::zeros(s, DType::kF32, device);
  grads_ = Tensor::zeros(s, DType::kF32, device);

  // Bind: entries_ follow the layers' own order, so walk them in step.
  size_t k = 0;
  float* p = params_.data<float>();
  float* g = grads_.data<float>();
  for (const auto& layer : layers) {
    std::vector<float*> ps, gs;
    for (size_t i = 0; i < layer->param_specs().size(); ++i, ++k) {
      ps.push_back(p + entries_[k].offset);
      gs.push_back(g + entries_[k].offset);
    }
    layer->bind(std::move(ps), std::move(gs));
  }
}

size_t ParamStore::layout_floats(const std::vector<LayerPtr>& layers) {
  size_t offset = 0;
  for (const auto& layer : layers)
    for (const auto& spec : layer->param_specs())
      offset += (spec.count() + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  return offset;
}

void ParamStore::init(uint64_t seed) {
  Tensor host = Tensor::zeros(params_.shape(), DType::kF32, Device::kCPU);
  float* h = host.data<float>();
  // One stream per tensor, keyed by its position, so that a layer's values
  // do not depend on how many values the layers before it drew.
  for (size_t k = 0; k < entries_.size(); ++k) {
    const ParamEntry& e = entries_[k];
    if (e.init == Init::kZeros) continue;
    Rng rng(seed, k);
    float bound = 1.0f / std::sqrt(float(e.fan_in > 0 ? e.fan_in : 1));
    for (size_t i = 0; i < e.count; ++i) h[e.offset + i] = rng.uniform(-bound, bound);
  }
  params_.copy_from(host);
  grads_.fill_zero();
}

}  // namespace hpmc
