// conv2d_thin.h — the thin-convolution kernels of the im2col family (K ≤ 4
// output channels; conv2d_thin.cu says how they map the problem). Internal to
// the family: conv2d_implicit_gemm.cu calls these when choose_thin
// (implicit_plan.h) says so, after its own shape checks and empty-size early
// returns. Same contract as conv2d_kernels.h: y and dx overwritten, dw and db
// accumulated, db may be null; default stream.
#pragma once

#include <cstddef>

#include "layers/conv_shape.h"
#include "layers/gpu/implicit_plan.h"

namespace hpmc::gpu::implicit_detail {

// path is kFast3x3, kFast5x5 or kGeneric (never kNone).
void thin_forward(const Conv2dShape& s, ThinPath path, const float* x, const float* w,
                  const float* b, float* y);
void thin_backward_data(const Conv2dShape& s, ThinPath path, const float* dy, const float* w,
                        float* dx);

// The floats of workspace thin_backward_params needs for this shape and path
// (the per-slice partial sums of dw and db); ws must hold at least that many.
size_t thin_params_workspace(const Conv2dShape& s, ThinPath path);
void thin_backward_params(const Conv2dShape& s, ThinPath path, const float* x, const float* dy,
                          float* dw, float* db, float* ws);

}  // namespace hpmc::gpu::implicit_detail
