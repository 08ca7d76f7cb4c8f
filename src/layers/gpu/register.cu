// register.cu — gpu::register_layers(): attaches the GPU creator of every
// layer type and loss in layers/layer_list.h and layers/loss_list.h to the
// registry. Each creator is defined in its layer's own .cu file by
// HPMC_REGISTER_GPU (schema.h); a build without CUDA compiles
// factory_nocuda.cpp's stub instead, which attaches none.
#include "model/registry.h"

namespace hpmc::gpu {

void register_layers(LayerRegistry& r) {
#define HPMC_LAYER(Name) r.set_gpu(LayerKind::k##Name, &make_layer_##Name);
#include "layers/layer_list.h"
#undef HPMC_LAYER
#define HPMC_LOSS(Name) r.set_gpu_loss(LossKind::k##Name, &make_loss_##Name);
#include "layers/loss_list.h"
#undef HPMC_LOSS
}

}  // namespace hpmc::gpu
