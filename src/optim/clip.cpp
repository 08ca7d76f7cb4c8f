// Compiled with -ffp-contract=off (CMakeLists.txt): the squares and sums are
// rounded one by one, in clip.h's order, as the GPU kernels round them.
#include "optim/clip.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "optim/gpu/optim_kernels.h"

namespace hpmc {

namespace {

constexpr size_t kPerLane = kClipChunk / kClipLanes;  // 16

// lane[0] += lane[h] pairwise, h = 128, 64, .., 1: the result is lane[0].
double fold(double* lane) {
  for (int h = kClipLanes / 2; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) lane[j] += lane[j + h];
  return lane[0];
}

}  // namespace

double grad_norm_cpu(const float* g, size_t n) {
  const size_t chunks = (n + kClipChunk - 1) / kClipChunk;
  std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static)
  for (long c = 0; c < long(chunks); ++c) {
    double lane[kClipLanes] = {};
    const size_t base = size_t(c) * kClipChunk;
    for (size_t k = 0; k < kPerLane; ++k) {
      const size_t row = base + k * kClipLanes;
      if (row + kClipLanes <= n) {
        for (int j = 0; j < kClipLanes; ++j) {
          const double x = g[row + size_t(j)];
          lane[j] += x * x;
        }
      } else {
        for (int j = 0; row + size_t(j) < n; ++j) {
          const double x = g[row + size_t(j)];
          lane[j] += x * x;
        }
      }
    }
    partial[size_t(c)] = fold(lane);
  }
  double lane[kClipLanes] = {};
  for (size_t c = 0; c < chunks; ++c) lane[c % kClipLanes] += partial[c];
  return std::sqrt(fold(lane));
}

float clip_coef(double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? float(coef) : 1.0f;
}

void GradClipper::clip(ParamStore& store) {
  const size_t n = store.padded();
  float* g = store.grads().data<float>();
  if (store.device() == Device::kGPU) {
    const size_t need = gpu::clip_scratch_doubles(n);
    if (scratch_.numel() != need)
      scratch_ = Tensor::zeros(Shape(int(need), 1, 1, 1), DType::kF64, Device::kGPU);
    gpu::clip_grad_norm(g, n, max_norm_, scratch_.data<double>());
    return;
  }
  norm_ = grad_norm_cpu(g, n);
  coef_ = clip_coef(norm_, max_norm_);
  if (coef_ < 1.0f) {
    const float c = coef_;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < long(n); ++i) g[i] = g[i] * c;
  }
}

double GradClipper::last_norm() const {
  if (scratch_.numel() == 0) return norm_;
  const Tensor h = scratch_.to_device(Device::kCPU);
  return h.data<double>()[h.numel() - 2];
}

float GradClipper::last_coef() const {
  if (scratch_.numel() == 0) return coef_;
  const Tensor h = scratch_.to_device(Device::kCPU);
  return float(h.data<double>()[h.numel() - 1]);
}

}  // namespace hpmc
