// pool_spec.cpp — the shared checks, shapes and descriptions of maxpool2d,
// avgpool2d, upsample2d and flatten (see pool_spec.h).
#include "layers/pool_spec.h"

#include <cstdint>

#include "core/error.h"

namespace hpmc {

namespace {

// The window of a pooling layer of YAML type `type`.
PoolWindow pool_window(const char* type, const std::string& layer_name, int kernel, int stride) {
  if (kernel < 1)
    throw ConfigError(str(type, " '", layer_name, "': kernel must be at least 1, got ", kernel));
  if (stride < 0)
    throw ConfigError(str(type, " '", layer_name,
                          "': stride must be at least 1 (or 0 for the kernel size), got ", stride));
  PoolWindow s;
  s.kernel = kernel;
  s.stride = stride == 0 ? kernel : stride;
  return s;
}

Shape pool_output_shape(const char* type, const PoolWindow& win, const Shape& in) {
  const int k = win.kernel;
  if (in.h < k || in.w < k)
    throw ShapeError(str(type, ": a ", k, "x", k, " window does not fit a ", in.h, "x", in.w,
                         " input ", in.sample_str(),
                         " (no padding); use a smaller kernel or a larger input"));
  return Shape(in.n, in.c, maxpool2d_out_size(in.h, k, win.stride),
               maxpool2d_out_size(in.w, k, win.stride));
}

}  // namespace

PoolWindow maxpool2d_window(const std::string& layer_name, const MaxPool2dConfig& cfg) {
  return pool_window("maxpool2d", layer_name, cfg.kernel, cfg.stride);
}

Shape maxpool2d_output_shape(const PoolWindow& win, const Shape& in) {
  return pool_output_shape("maxpool2d", win, in);
}

std::string maxpool2d_describe(const PoolWindow& win) {
  return str(win.kernel, "x", win.kernel, " s", win.stride);
}

const LayerSchema& MaxPool2dSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kMaxPool2d,
      "maxpool2d",
      "max over k×k windows, no padding (nn.MaxPool2d): C×H×W → C×(⌊(H−k)/s⌋+1)×(⌊(W−k)/s⌋+1)",
      {int_key("kernel", "2", 1, 1024, "window size (k×k)"),
       int_key("stride", "=kernel", 1, 1024, "step between windows")}};
  return s;
}

MaxPool2dSpec::MaxPool2dSpec(std::string name, const MaxPool2dConfig& cfg)
    : Layer(std::move(name)), win_(maxpool2d_window(this->name(), cfg)) {}

MaxPool2dSpec::MaxPool2dSpec(const LayerArgs& a)
    : MaxPool2dSpec(a.name, MaxPool2dConfig{a.i("kernel"), a.i("stride")}) {}

HPMC_REGISTER_SPEC(MaxPool2d)

PoolWindow avgpool2d_window(const std::string& layer_name, const AvgPool2dConfig& cfg) {
  return pool_window("avgpool2d", layer_name, cfg.kernel, cfg.stride);
}

Shape avgpool2d_output_shape(const PoolWindow& win, const Shape& in) {
  return pool_output_shape("avgpool2d", win, in);
}

const LayerSchema& AvgPool2dSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kAvgPool2d,
      "avgpool2d",
      "mean over k×k windows, no padding (nn.AvgPool2d): C×H×W → C×(⌊(H−k)/s⌋+1)×(⌊(W−k)/s⌋+1)",
      {int_key("kernel", "2", 1, 1024, "window size (k×k)"),
       int_key("stride", "=kernel", 1, 1024, "step between windows")}};
  return s;
}

AvgPool2dSpec::AvgPool2dSpec(std::string name, const AvgPool2dConfig& cfg)
    : Layer(std::move(name)), win_(avgpool2d_window(this->name(), cfg)) {}

AvgPool2dSpec::AvgPool2dSpec(const LayerArgs& a)
    : AvgPool2dSpec(a.name, AvgPool2dConfig{a.i("kernel"), a.i("stride")}) {}

HPMC_REGISTER_SPEC(AvgPool2d)

int upsample2d_check_scale(const std::string& layer_name, int scale) {
  if (scale < 1)
    throw ConfigError(str("upsample2d '", layer_name, "': scale must be at least 1, got ", scale));
  return scale;
}

Shape upsample2d_output_shape(int scale, const Shape& in) {
  const size_t h = size_t(in.h) * size_t(scale), w = size_t(in.w) * size_t(scale);
  if (size_t(in.c) * h * w > kMaxTensorElements)
    throw ShapeError(str("upsample2d x", scale, " of input ", in.sample_str(), " would give ",
                         in.c, "x", h, "x", w, " = ", size_t(in.c) * h * w,
                         " values per sample, more than ", kMaxTensorElements,
                         "; use a smaller scale or fewer channels"));
  return Shape(in.n, in.c, int(h), int(w));
}

UpsampleMode upsample2d_mode(const std::string& layer_name, const std::string& word) {
  if (word == "nearest") return UpsampleMode::kNearest;
  if (word == "bilinear") return UpsampleMode::kBilinear;
  throw ConfigError(str("upsample2d '", layer_name, "': mode must be nearest or bilinear, got '",
                        word, "'"));
}

const char* upsample2d_mode_name(UpsampleMode mode) {
  return mode == UpsampleMode::kNearest ? "nearest" : "bilinear";
}

std::string upsample2d_describe(int scale, UpsampleMode mode) {
  return str(upsample2d_mode_name(mode), " x", scale);
}

const LayerSchema& UpSample2dSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kUpSample2d,
      "upsample2d",
      "upsampling by an integer scale (nn.Upsample), nearest or bilinear: C×H×W → C×sH×sW",
      {int_key("scale", "2", 1, 64, "factor on both axes"),
       choice_key("mode", "nearest", {"nearest", "bilinear"},
                  "nearest copies each pixel; bilinear interpolates (align_corners=False)")}};
  return s;
}

UpSample2dSpec::UpSample2dSpec(std::string name, int scale, UpsampleMode mode)
    : Layer(std::move(name)), scale_(upsample2d_check_scale(this->name(), scale)), interp_(mode) {}

UpSample2dSpec::UpSample2dSpec(const LayerArgs& a)
    : UpSample2dSpec(a.name, a.i("scale"), upsample2d_mode(a.name, a.s("mode"))) {}

HPMC_REGISTER_SPEC(UpSample2d)

Shape flatten_output_shape(const Shape& in) {
  const size_t features = in.per_sample();
  if (features > kMaxTensorElements)
    throw ShapeError(str("flatten: input ", in.sample_str(), " has ", features,
                         " features per sample, more than ", kMaxTensorElements));
  return Shape(in.n, int(features), 1, 1);
}

const LayerSchema& FlattenSpec::static_schema() {
  static const LayerSchema s{LayerKind::kFlatten,
                             "flatten",
                             "C×H×W → C·H·W, the bridge from conv to linear layers (nn.Flatten)",
                             {}};
  return s;
}

HPMC_REGISTER_SPEC(Flatten)

}  // namespace hpmc
