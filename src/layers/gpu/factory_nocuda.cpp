// factory_nocuda.cpp — the GPU side in a build without CUDA: the layer
// registration stub attaches no GPU creator (so the registry says that this
// binary has no GPU support when a GPU layer is asked for), and every kernel
// entry point says so and how to get one.
#ifndef HPMC_WITH_CUDA

#include "core/error.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/mlp_step.h"
#include "model/registry.h"

namespace hpmc::gpu {

namespace {
[[noreturn]] void no_gpu(const std::string& what) {
  throw UsageError(str(what, " needs the GPU layers, and this hpmc was built without CUDA; use "
                       "--impl cpu, or rebuild where the CUDA toolkit is installed "
                       "(cmake -DHPMC_CUDA=ON)"));
}
}  // namespace

void register_layers(LayerRegistry&) {}
LayerPtr make_fused_layer(std::vector<ChainStep>) { no_gpu("a fused layer"); }
void sgd_step(float*, const float*, float*, size_t, float, float, float) { no_gpu("SGD on the GPU"); }
void gather_batch(const uint8_t*, const int32_t*, size_t, const int32_t*, int, float*, int32_t*) {
  no_gpu("batch gathering on the GPU");
}
void gather_batch(const float*, const int32_t*, size_t, const int32_t*, int, float*, int32_t*) {
  no_gpu("batch gathering on the GPU");
}
void augment_batch(const float*, float*, int, int, int, int, bool, int, uint64_t, uint64_t,
                   uint64_t) {
  no_gpu("data.augment on the GPU");
}
void gaussian_noise(const float*, float*, size_t, float, uint64_t, uint64_t, uint64_t) {
  no_gpu("training.input_noise on the GPU");
}
void mask_noise(const float*, float*, size_t, uint64_t, uint64_t, uint64_t, uint64_t) {
  no_gpu("training.input_noise on the GPU");
}
void scale(float*, size_t, float) { no_gpu("scaling a gradient on the GPU"); }

// The fused step is never chosen without a device; these keep the linker happy
// and say why if something asks anyway.
struct MlpStep::State {};
MlpStep::MlpStep(const MlpStepDesc&) { no_gpu("the fused MLP step"); }
MlpStep::~MlpStep() = default;
void MlpStep::run(const uint8_t*, const int32_t*, const int32_t*, int, uint64_t, double*,
                  const int32_t*, int) {
  no_gpu("the fused MLP step");
}
int MlpStep::blocks() const { return 0; }
bool mlp_step_supported(std::string* why, Precision) {
  if (why) *why = "this hpmc was built without CUDA";
  return false;
}

}  // namespace hpmc::gpu

#endif
