// pool_spec.h — the parameter-free shape layers (maxpool2d, avgpool2d,
// upsample2d, flatten), each defined once for every device: the schema,
// configuration checks (ConfigError), output shapes (ShapeError naming both
// shapes) and the describe() text, as spec classes (MaxPool2dSpec,
// AvgPool2dSpec, UpSample2dSpec, FlattenSpec) from which the CPU classes in
// layers/cpu and the GPU classes in layers/gpu derive, adding only the
// passes; and as free functions, for the kernels' tests.
#pragma once

#include <string>

#include "core/shape.h"
#include "layers/layer.h"

namespace hpmc {

// ---- maxpool2d ---------------------------------------------------------------

struct MaxPool2dConfig {
  int kernel = 2;
  int stride = 0;  // 0 means = kernel (non-overlapping windows)
};

// A validated configuration: kernel ≥ 1 and the effective stride (≥ 1).
struct PoolWindow {
  int kernel = 2;
  int stride = 2;
};

// Throws ConfigError naming the layer for kernel < 1 or stride < 0; resolves
// stride 0 to the kernel size.
PoolWindow maxpool2d_window(const std::string& layer_name, const MaxPool2dConfig& cfg);

// Output extent along one axis: floor((in − k) / s) + 1 (PyTorch's default,
// ceil_mode off, no padding); 0 when the window does not fit.
inline int maxpool2d_out_size(int in, int kernel, int stride) {
  return in < kernel ? 0 : (in - kernel) / stride + 1;
}

// (N, C, OH, OW); throws ShapeError naming the k×k window and the H×W input
// when the window does not fit.
Shape maxpool2d_output_shape(const PoolWindow& win, const Shape& in);

// "3x3 s2".
std::string maxpool2d_describe(const PoolWindow& win);

class MaxPool2dSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws ConfigError for kernel < 1 or stride < 0.
  MaxPool2dSpec(std::string name, const MaxPool2dConfig& cfg);
  explicit MaxPool2dSpec(const LayerArgs& a);

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override { return maxpool2d_describe(win_); }
  // Throws ShapeError when the k×k window does not fit the H×W input.
  Shape output_shape(const Shape& in) const override { return maxpool2d_output_shape(win_, in); }
  int kernel() const { return win_.kernel; }
  int stride() const { return win_.stride; }  // the effective stride (never 0)

 protected:
  PoolWindow win_;
};

// ---- avgpool2d ---------------------------------------------------------------

struct AvgPool2dConfig {
  int kernel = 2;
  int stride = 0;  // 0 means = kernel (non-overlapping windows)
};

// As maxpool2d_window, for avgpool2d.
PoolWindow avgpool2d_window(const std::string& layer_name, const AvgPool2dConfig& cfg);
// (N, C, OH, OW) with maxpool2d's sizes (no padding, ceil_mode off); throws
// ShapeError naming the k×k window and the H×W input when it does not fit.
Shape avgpool2d_output_shape(const PoolWindow& win, const Shape& in);

// avgpool2d: the mean of each k×k window (nn.AvgPool2d with padding 0, where
// count_include_pad does not arise); layers/cpu/avgpool2d_ops.h.
class AvgPool2dSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws ConfigError for kernel < 1 or stride < 0.
  AvgPool2dSpec(std::string name, const AvgPool2dConfig& cfg);
  explicit AvgPool2dSpec(const LayerArgs& a);

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override { return maxpool2d_describe(win_); }
  Shape output_shape(const Shape& in) const override { return avgpool2d_output_shape(win_, in); }
  int kernel() const { return win_.kernel; }
  int stride() const { return win_.stride; }  // the effective stride (never 0)

 protected:
  PoolWindow win_;
};

// ---- upsample2d --------------------------------------------------------------

// How upsample2d fills the new pixels (the YAML key `mode`).
enum class UpsampleMode {
  kNearest,   // copies (nn.Upsample(mode="nearest"))
  kBilinear,  // interpolates (nn.Upsample(mode="bilinear", align_corners=False))
};
// "nearest" → kNearest, "bilinear" → kBilinear; throws ConfigError naming the
// layer for any other word.
UpsampleMode upsample2d_mode(const std::string& layer_name, const std::string& word);
const char* upsample2d_mode_name(UpsampleMode mode);

// Returns scale; throws ConfigError naming the layer for scale < 1.
int upsample2d_check_scale(const std::string& layer_name, int scale);
// (N, C, H·s, W·s).
Shape upsample2d_output_shape(int scale, const Shape& in);
// "nearest x2", "bilinear x2".
std::string upsample2d_describe(int scale, UpsampleMode mode = UpsampleMode::kNearest);

class UpSample2dSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws ConfigError for scale < 1.
  explicit UpSample2dSpec(std::string name, int scale = 2,
                          UpsampleMode mode = UpsampleMode::kNearest);
  explicit UpSample2dSpec(const LayerArgs& a);

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override { return upsample2d_describe(scale_, interp_); }
  Shape output_shape(const Shape& in) const override { return upsample2d_output_shape(scale_, in); }
  int scale() const { return scale_; }
  UpsampleMode interpolation() const { return interp_; }

 protected:
  int scale_;
  UpsampleMode interp_;
};

// ---- flatten -----------------------------------------------------------------

// (N, C·H·W, 1, 1); throws ShapeError when C·H·W does not fit in an int.
Shape flatten_output_shape(const Shape& in);

class FlattenSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  explicit FlattenSpec(std::string name) : Layer(std::move(name)) {}
  explicit FlattenSpec(const LayerArgs& a) : FlattenSpec(a.name) {}

  const LayerSchema& schema() const override { return static_schema(); }
  Shape output_shape(const Shape& in) const override { return flatten_output_shape(in); }
};

}  // namespace hpmc
