// pool_spec.cpp — the shared checks, shapes and descriptions of maxpool2d,
// upsample2d and flatten (see pool_spec.h).
#include "layers/pool_spec.h"

#include <cstdint>

#include "core/error.h"

namespace hpmc {

MaxPool2dSpec maxpool2d_spec(const std::string& layer_name, const MaxPool2dConfig& cfg) {
  if (cfg.kernel < 1)
    throw ConfigError(str("maxpool2d '", layer_name, "': kernel must be at least 1, got ",
                          cfg.kernel));
  if (cfg.stride < 0)
    throw ConfigError(str("maxpool2d '", layer_name,
                          "': stride must be at least 1 (or 0 for the kernel size), got ",
                          cfg.stride));
  MaxPool2dSpec s;
  s.kernel = cfg.kernel;
  s.stride = cfg.stride == 0 ? cfg.kernel : cfg.stride;
  return s;
}

Shape maxpool2d_output_shape(const MaxPool2dSpec& spec, const Shape& in) {
  const int k = spec.kernel;
  if (in.h < k || in.w < k)
    throw ShapeError(str("maxpool2d: a ", k, "x", k, " window does not fit a ", in.h, "x", in.w,
                         " input ", in.sample_str(),
                         " (no padding); use a smaller kernel or a larger input"));
  return Shape(in.n, in.c, maxpool2d_out_size(in.h, k, spec.stride),
               maxpool2d_out_size(in.w, k, spec.stride));
}

std::string maxpool2d_describe(const MaxPool2dSpec& spec) {
  return str(spec.kernel, "x", spec.kernel, " s", spec.stride);
}

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

std::string upsample2d_describe(int scale) { return str("nearest x", scale); }

Shape flatten_output_shape(const Shape& in) {
  const size_t features = in.per_sample();
  if (features > kMaxTensorElements)
    throw ShapeError(str("flatten: input ", in.sample_str(), " has ", features,
                         " features per sample, more than ", kMaxTensorElements));
  return Shape(in.n, int(features), 1, 1);
}

}  // namespace hpmc
