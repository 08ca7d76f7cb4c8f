// family.h — which kernel family of conv2d_kernels.h a GPU Conv2D or Linear
// layer runs. Plain C++ (no CUDA types): included by host code and tests.
#pragma once

#include <string>

#include "core/error.h"
#include "model/impl.h"

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

// The family that --impl (or a layer's impl key) names: naive, tiled or im2col.
inline Family family_of(Impl impl, const std::string& layer) {
  switch (impl) {
    case Impl::kNaive: return Family::kNaive;
    case Impl::kTiled: return Family::kTiled;
    case Impl::kIm2col: return Family::kIm2col;
    case Impl::kCpu: break;
  }
  throw UsageError(str("layer '", layer, "': the GPU layers have no implementation '",
                       impl_name(impl), "'; choose naive, tiled or im2col"));
}

}  // namespace hpmc::gpu
