// augment.cpp — the front doors of the training-time input transforms
// (augment.h): checks, then the CPU loop or the GPU kernel.
#include "data/augment.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "layers/gpu/factory.h"

namespace hpmc {

namespace {

// The shortest decimal that reads back as exactly v ("0.1", not "0.10000000000000001").
std::string shortest(double v) {
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void check_batch(const char* what, const Tensor& x, const Tensor& y) {
  if (x.dtype() != DType::kF32 || y.dtype() != DType::kF32 || x.device() != y.device())
    throw RuntimeError(str(what, ": needs float32 tensors on one device, got ",
                           dtype_name(x.dtype()), " ", device_name(x.device()), " and ",
                           dtype_name(y.dtype()), " ", device_name(y.device())));
  if (y.shape().per_sample() != x.shape().per_sample() || y.capacity() < x.numel())
    throw ShapeError(str(what, ": output ", y.shape().str(), " (capacity ", y.capacity(),
                         ") cannot hold input ", x.shape().str()));
}

}  // namespace

const char* input_noise_type_name(InputNoiseConfig::Type t) {
  switch (t) {
    case InputNoiseConfig::Type::kGaussian: return "gaussian";
    case InputNoiseConfig::Type::kMask: return "mask";
    case InputNoiseConfig::Type::kNone: break;
  }
  return "none";
}

std::string AugmentConfig::describe() const {
  if (!active()) return "none";
  std::string s = hflip ? "hflip" : "";
  if (crop_padding > 0) s += str(s.empty() ? "" : " ", "crop_padding=", crop_padding);
  return s;
}

std::string InputNoiseConfig::describe() const {
  switch (type) {
    case Type::kGaussian: return "gaussian std=" + shortest(std);
    case Type::kMask: return "mask p=" + shortest(p);
    case Type::kNone: break;
  }
  return "none";
}

void augment_batch(const Tensor& x, Tensor& y, const Shape& image, const AugmentConfig& cfg,
                   uint64_t seed, int64_t step, int64_t first) {
  check_batch("augment_batch", x, y);
  if (image.per_sample() != x.shape().per_sample())
    throw ShapeError(str("augment_batch: images of ", image.sample_str(), " but batch ",
                         x.shape().str(), " holds ", x.shape().per_sample(), " values a sample"));
  HPMC_CHECK(x.raw() != y.raw() || x.numel() == 0, "augment_batch: x and y are one buffer");
  HPMC_CHECK(step >= 0 && first >= 0, "augment_batch: negative step ", step, " or first ", first);
  const int n = x.shape().n;
  y.set_batch(n);
  if (n == 0) return;
  const uint64_t key = counter_key(seed, kAugmentStream);
  if (x.device() == Device::kCPU)
    augment_cpu(x.data<float>(), y.data<float>(), n, image.c, image.h, image.w, cfg.hflip,
                cfg.crop_padding, key, uint64_t(step), uint64_t(first));
  else
    gpu::augment_batch(x.data<float>(), y.data<float>(), n, image.c, image.h, image.w, cfg.hflip,
                       cfg.crop_padding, key, uint64_t(step), uint64_t(first));
}

void add_input_noise(const Tensor& x, Tensor& y, const InputNoiseConfig& cfg, uint64_t seed,
                     int64_t step, int64_t first) {
  check_batch("add_input_noise", x, y);
  HPMC_CHECK(step >= 0 && first >= 0, "add_input_noise: negative step ", step, " or first ",
             first);
  y.set_batch(x.shape().n);
  const size_t count = x.numel();
  if (count == 0) return;
  const uint64_t key = counter_key(seed, kInputNoiseStream);
  const uint64_t base = uint64_t(first) * x.shape().per_sample();
  if (x.device() == Device::kCPU) {
    input_noise_cpu(x.data<float>(), y.data<float>(), count, cfg, key, uint64_t(step), base);
    return;
  }
  switch (cfg.type) {
    case InputNoiseConfig::Type::kGaussian:
      gpu::gaussian_noise(x.data<float>(), y.data<float>(), count, float(cfg.std), key,
                          uint64_t(step), base);
      break;
    case InputNoiseConfig::Type::kMask:
      gpu::mask_noise(x.data<float>(), y.data<float>(), count, drop_threshold(cfg.p), key,
                      uint64_t(step), base);
      break;
    case InputNoiseConfig::Type::kNone:
      if (x.raw() != y.raw()) y.copy_from(x);
      break;
  }
}

}  // namespace hpmc
