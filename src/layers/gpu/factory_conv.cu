// factory_conv.cu — gpu::make_conv2d and gpu::make_linear of factory.h:
// --impl naive → the naive kernels, tiled → the tiled kernels, im2col → the
// implicit-GEMM kernels.
#include <memory>

#include "core/error.h"
#include "layers/gpu/conv2d.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/linear.h"

namespace hpmc::gpu {

namespace {

Family family_for(Impl impl, const std::string& layer) {
  switch (impl) {
    case Impl::kNaive: return Family::kNaive;
    case Impl::kTiled: return Family::kTiled;
    case Impl::kIm2col: return Family::kIm2col;
    case Impl::kCpu: break;
  }
  throw UsageError(str("layer '", layer, "': the GPU factory has no implementation '",
                       impl_name(impl), "'; choose naive, tiled or im2col"));
}

}  // namespace

LayerPtr make_conv2d(const std::string& name, const Conv2dConfig& cfg, Impl impl) {
  return std::make_shared<Conv2dGPU>(name, cfg, family_for(impl, name));
}

LayerPtr make_linear(const std::string& name, const LinearConfig& cfg, Impl impl) {
  return std::make_shared<LinearGPU>(name, cfg, family_for(impl, name));
}

}  // namespace hpmc::gpu
