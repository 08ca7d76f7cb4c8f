// factory_layers.cu — the GPU factory functions for the parameter-free layers
// and the losses (make_conv2d/make_linear live in factory_conv.cu). Each layer
// has a single GPU implementation, so --impl naive/tiled/im2col all get it.
#include <memory>

#include "layers/gpu/factory.h"
#include "layers/gpu/losses.h"
#include "layers/gpu/simple_layers.h"

namespace hpmc::gpu {

LayerPtr make_relu(const std::string& name) { return std::make_shared<ReLUGPU>(name); }

LayerPtr make_maxpool2d(const std::string& name, const MaxPool2dConfig& cfg) {
  return std::make_shared<MaxPool2dGPU>(name, cfg);
}

LayerPtr make_upsample2d(const std::string& name, int scale) {
  return std::make_shared<UpSample2dGPU>(name, scale);
}

LayerPtr make_flatten(const std::string& name) { return std::make_shared<FlattenGPU>(name); }

LossPtr make_mse_loss() { return std::make_shared<MseLossGPU>(); }

LossPtr make_softmax_ce_loss() { return std::make_shared<SoftmaxCrossEntropyGPU>(); }

}  // namespace hpmc::gpu
