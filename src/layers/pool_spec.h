// pool_spec.h — what the CPU and GPU versions of the parameter-free shape
// layers (maxpool2d, upsample2d, flatten) must agree on, as device-neutral
// free functions: configuration checks (ConfigError), output shapes
// (ShapeError naming both shapes) and the describe() text. The CPU classes in
// layers/cpu and the GPU classes in layers/gpu both call these, so the two can
// never drift apart in what they accept or how they report it.
#pragma once

#include <string>

#include "core/shape.h"

namespace hpmc {

// ---- maxpool2d ---------------------------------------------------------------

struct MaxPool2dConfig {
  int kernel = 2;
  int stride = 0;  // 0 means = kernel (non-overlapping windows)
};

// A validated configuration: kernel ≥ 1 and the effective stride (≥ 1).
struct MaxPool2dSpec {
  int kernel = 2;
  int stride = 2;
};

// Throws ConfigError naming the layer for kernel < 1 or stride < 0; resolves
// stride 0 to the kernel size.
MaxPool2dSpec maxpool2d_spec(const std::string& layer_name, const MaxPool2dConfig& cfg);

// Output extent along one axis: floor((in − k) / s) + 1 (PyTorch's default,
// ceil_mode off, no padding); 0 when the window does not fit.
inline int maxpool2d_out_size(int in, int kernel, int stride) {
  return in < kernel ? 0 : (in - kernel) / stride + 1;
}

// (N, C, OH, OW); throws ShapeError naming the k×k window and the H×W input
// when the window does not fit.
Shape maxpool2d_output_shape(const MaxPool2dSpec& spec, const Shape& in);

// "3x3 s2".
std::string maxpool2d_describe(const MaxPool2dSpec& spec);

// ---- upsample2d --------------------------------------------------------------

// Returns scale; throws ConfigError naming the layer for scale < 1.
int upsample2d_check_scale(const std::string& layer_name, int scale);
// (N, C, H·s, W·s).
Shape upsample2d_output_shape(int scale, const Shape& in);
// "nearest x2".
std::string upsample2d_describe(int scale);

// ---- flatten -----------------------------------------------------------------

// (N, C·H·W, 1, 1); throws ShapeError when C·H·W does not fit in an int.
Shape flatten_output_shape(const Shape& in);

}  // namespace hpmc
