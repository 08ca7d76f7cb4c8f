// clip.h — gradient clipping by the global L2 norm, as PyTorch's
// torch.nn.utils.clip_grad_norm_(parameters, max_norm) (norm_type 2):
//   norm = sqrt(Σ g²) over every gradient;  coef = max_norm / (norm + 1e-6);
//   where coef < 1, every gradient is multiplied by coef.
// Here the sum runs in double over the whole gradient buffer (padding adds
// zeros) in one fixed order, the same on the CPU and the GPU, so the norm is
// deterministic and the two devices get the same bits:
//   the buffer is cut into chunks of kClipChunk = 4096 floats; in chunk c,
//   lane j (0..255) sums g[4096c + j + 256k]², k = 0..15, in order; the 256
//   lane sums are added pairwise (lane j += lane j + h, h = 128, 64, .., 1);
//   the chunk sums are then reduced the same way (lane j sums chunks
//   j + 256k in order, then pairwise). Every product and sum is a rounded
//   double operation (clip.cpp is compiled without contraction). coef is
//   computed in double and applied as float(coef), one float multiply each.
#pragma once

#include <cstddef>

#include "core/tensor.h"
#include "model/params.h"

namespace hpmc {

constexpr size_t kClipChunk = 4096;
constexpr int kClipLanes = 256;

// The norm of g[0, n) in the order above (host memory).
double grad_norm_cpu(const float* g, size_t n);
// The scale clip_grad_norm applies at this norm: coef < 1, or 1.
float clip_coef(double norm, double max_norm);

// Clips a store's gradients on its device; keeps its scratch between steps.
class GradClipper {
 public:
  explicit GradClipper(double max_norm) : max_norm_(max_norm) {}
  void clip(ParamStore& store);
  // The norm before clipping and the scale applied, at the last clip()
  // (a device-to-host copy on the GPU).
  double last_norm() const;
  float last_coef() const;

 private:
  double max_norm_;
  double norm_ = 0;
  float coef_ = 1;
  Tensor scratch_;  // GPU: partial sums, then the norm and the scale
};

}  // namespace hpmc
