// conv2d_thin_bf16.h — the thin convolutions' AVX512_BF16 passes
// (conv2d_thin_bf16.cpp), called by conv2d_thin.cpp's passes in bf16 where
// conv2d_thin_bf16_dot (conv2d_thin.h) holds; the contracts are theirs:
// y and dx overwritten, dw and db accumulated.
#pragma once

#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_thin.h"

namespace hpmc::cpu::thin_bf16 {

void forward(const Conv2dShape& sh, const float* x, const float* w, const float* b, float* y,
             Conv2dThinWorkspace<float>& ws);
void backward_data(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                   Conv2dThinWorkspace<float>& ws);
void backward_params(const Conv2dShape& sh, const float* x, const float* dy, float* dw,
                     float* db, Conv2dThinWorkspace<float>& ws);

}  // namespace hpmc::cpu::thin_bf16
