// family.h — which kernel family of conv2d_kernels.h a GPU Conv2D or Linear
// layer runs. Plain C++ (no CUDA types): included by host code and tests.
#pragma once

namespace hpmc::gpu {

enum class Family { kNaive, kTiled, kIm2col };

// The implementation name the layer table shows: "naive", "tiled", "im2col"
// (the same words as --impl; kIm2col runs the `implicit` kernels).
inline const char* family_name(Family f) {
  switch (f) {
    case Family::kNaive: return "naive";
    case Family::kTiled: return "tiled";
    case Family::kIm2col: return "im2col";
  }
  return "?";
}

}  // namespace hpmc::gpu
