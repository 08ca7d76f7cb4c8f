// dropout_kernels.h — inverted dropout on the GPU, as a plain host function
// (no CUDA types) on the default stream; the kernel is in dropout_kernels.cu.
//
// out = keep(i) ? in · scale : 0 over n floats, with the mask and scale of
// layers/dropout_mask.h: forward (in = x, out = y) and backward (in = dy,
// out = dx) alike. The mask is drawn from the same counters, and each element
// is the same single multiply, as the CPU's dropout_apply
// (layers/cpu/dropout_ops.h): the result is bit-identical to the CPU's.
// One thread per four consecutive elements (one Philox call).
#pragma once

#include <cstddef>

#include "layers/dropout_mask.h"

namespace hpmc::gpu {

// Element i is drawn as index base + i (a shard of a larger batch).
void dropout_apply(const float* in, float* out, size_t n, const DropoutMask& mask, float scale,
                   uint64_t base = 0);

}  // namespace hpmc::gpu
