// optim_nocuda.cpp — the optimizers' GPU kernels in a build without CUDA:
// every call says that this binary has no GPU support. (A model is on the
// GPU only in a CUDA build, so these are never reached in practice.)
#ifndef HPMC_WITH_CUDA

#include "core/error.h"
#include "optim/gpu/optim_kernels.h"

namespace hpmc::gpu {

namespace {
[[noreturn]] void no_gpu(const char* what) {
  throw UsageError(str(what, " needs the GPU kernels, and this hpmc was built without CUDA; use "
                       "--impl cpu, or rebuild where the CUDA toolkit is installed "
                       "(cmake -DHPMC_CUDA=ON)"));
}
}  // namespace

void sgd_pass(float*, const float*, float*, size_t, const SgdArgs&) { no_gpu("SGD on the GPU"); }
void adam_pass(float*, const float*, float*, float*, size_t, const AdamArgs&) {
  no_gpu("Adam on the GPU");
}
size_t clip_scratch_doubles(size_t n) { return (n + 4095) / 4096 + 2; }
void clip_grad_norm(float*, size_t, double, double*) { no_gpu("gradient clipping on the GPU"); }

}  // namespace hpmc::gpu

#endif
