#include "model/params.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace hpmc {

namespace {

size_t padded_count(size_t n) {
  return (n + ParamStore::kAlignFloats - 1) / ParamStore::kAlignFloats * ParamStore::kAlignFloats;
}

// Lays the specs of every layer out one after another; returns the length.
size_t lay_out(const std::vector<LayerPtr>& layers, bool buffers, std::vector<ParamEntry>& out) {
  out.clear();
  size_t offset = 0;
  for (const auto& layer : layers)
    for (const auto& spec : buffers ? layer->buffer_specs() : layer->param_specs()) {
      ParamEntry e;
      e.name = layer->param_prefix() + spec.name;
      e.dims = spec.dims;
      e.offset = offset;
      e.count = spec.count();
      e.fan_in = spec.fan_in;
      e.init = spec.init;
      e.value = spec.value;
      out.push_back(e);
      offset += padded_count(e.count);
    }
  return offset;
}

// Constant-initialised entries (kZeros, kConstant) into host memory `h`.
void fill_constants(const std::vector<ParamEntry>& entries, float* h) {
  for (const ParamEntry& e : entries)
    if (e.init == Init::kConstant)
      for (size_t i = 0; i < e.count; ++i) h[e.offset + i] = e.value;
}

}  // namespace

void ParamStore::build(const std::vector<LayerPtr>& layers, Device device) {
  padded_ = lay_out(layers, false, entries_);
  total_ = 0;
  for (const ParamEntry& e : entries_) total_ += e.count;
  device_ = device;
  // (blocks of 64, 64): a multiple of kAlignFloats, so no count passes a shape's int.
  HPMC_CHECK(padded_ / kAlignFloats <= kMaxTensorElements, "a parameter buffer of ", padded_,
             " floats");
  Shape s = padded_ > 0 ? Shape(int(padded_ / kAlignFloats), int(kAlignFloats), 1, 1)
                        : Shape(1, 1, 1, 1);
  params_ = Tensor::zeros(s, DType::kF32, device);
  grads_ = Tensor::zeros(s, DType::kF32, device);
  const size_t buffer_floats = lay_out(layers, true, buffer_entries_);
  buffers_ = Tensor::zeros(
      Shape(int(std::max<size_t>(buffer_floats, kAlignFloats) / kAlignFloats), int(kAlignFloats), 1, 1),
      DType::kF32, device);

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
  size_t b = 0;
  float* buf = buffers_.data<float>();
  for (const auto& layer : layers) {
    std::vector<float*> bs;
    for (size_t i = 0; i < layer->buffer_specs().size(); ++i, ++b)
      bs.push_back(buf + buffer_entries_[b].offset);
    layer->bind_buffers(std::move(bs));
  }
  reset_buffers();
}

size_t ParamStore::layout_floats(const std::vector<LayerPtr>& layers) {
  std::vector<ParamEntry> entries;
  return lay_out(layers, false, entries);
}

void ParamStore::init(uint64_t seed) {
  Tensor host = Tensor::zeros(params_.shape(), DType::kF32, Device::kCPU);
  float* h = host.data<float>();
  // One stream per tensor, keyed by its position, so that a layer's values
  // do not depend on how many values the layers before it drew.
  for (size_t k = 0; k < entries_.size(); ++k) {
    const ParamEntry& e = entries_[k];
    if (e.init != Init::kKaimingUniform) continue;
    Rng rng(seed, k);
    float bound = 1.0f / std::sqrt(float(e.fan_in > 0 ? e.fan_in : 1));
    for (size_t i = 0; i < e.count; ++i) h[e.offset + i] = rng.uniform(-bound, bound);
  }
  fill_constants(entries_, h);
  params_.copy_from(host);
  grads_.fill_zero();
  reset_buffers();
}

void ParamStore::reset_buffers() {
  Tensor host = Tensor::zeros(buffers_.shape(), DType::kF32, Device::kCPU);
  fill_constants(buffer_entries_, host.data<float>());
  buffers_.copy_from(host);
}

}  // namespace hpmc
