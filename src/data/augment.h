// augment.h — training-time input transforms: image augmentation
// (data.augment: a random horizontal flip and a random crop of the image
// zero-padded on each side) and input noise (training.input_noise: gaussian,
// or masking, for denoising autoencoders). The trainer applies them to
// training batches only (model/trainer.h): evaluation, features and
// reconstructions see the clean images. The draws and their exact semantics
// are in data/augment_ops.h.
//
// Tensors are float32 NCHW batches. The front doors check devices, dtypes and
// shapes, then run the CPU loop or the GPU kernel (layers/gpu/factory.h) of
// the tensors' device; both make the same decisions from the same counters.
#pragma once

#include <cstdint>
#include <string>

#include "core/shape.h"
#include "core/tensor.h"
#include "data/augment_ops.h"

namespace hpmc {

// data.augment
struct AugmentConfig {
  bool hflip = false;    // flip each sample left-right with probability 1/2
  int crop_padding = 0;  // pad by this many zeros on each side, crop back at random
  bool active() const { return hflip || crop_padding > 0; }
  // "none", "hflip", "crop_padding=4", "hflip crop_padding=4": how checkpoints
  // record it (a resume must match).
  std::string describe() const;
};

// training.input_noise
struct InputNoiseConfig {
  enum class Type { kNone, kGaussian, kMask };
  Type type = Type::kNone;
  double std = 0.1;  // gaussian: the noise's standard deviation
  double p = 0.25;   // mask: the probability that a value is set to 0
  bool active() const { return type != Type::kNone; }
  // "none", "gaussian std=0.1", "mask p=0.3" (shortest exact decimals).
  std::string describe() const;
};

const char* input_noise_type_name(InputNoiseConfig::Type t);  // "none", "gaussian", "mask"

// y = the augmentation of batch x at `step` (y's batch is set to x's).
// `image` is the per-sample image (1, C, H, W); x may be laid out flat, with
// the same number of values per sample. x and y must not overlap.
void augment_batch(const Tensor& x, Tensor& y, const Shape& image, const AugmentConfig& cfg,
                   uint64_t seed, int64_t step);

// y = x with the input noise of `step` (y's batch is set to x's); x and y may
// be the same tensor.
void add_input_noise(const Tensor& x, Tensor& y, const InputNoiseConfig& cfg, uint64_t seed,
                     int64_t step);

// The CPU loops on raw NCHW arrays (templated on the scalar for tests in
// double): n samples of c×h×w; `key` = counter_key(seed, kAugmentStream) or
// counter_key(seed, kInputNoiseStream).
template <class T>
void augment_cpu(const T* x, T* y, int n, int c, int h, int w, bool hflip, int pad, uint64_t key,
                 uint64_t step) {
  const size_t plane = size_t(h) * w;
  // One thread: a copy with offsets, a fraction of a millisecond per CIFAR-10 batch.
  for (int i = 0; i < n; ++i) {
    const AugmentDraw d = augment_draw(key, step, uint64_t(i), hflip, pad);
    for (int ch = 0; ch < c; ++ch) {
      const T* src = x + (size_t(i) * c + ch) * plane;
      T* dst = y + (size_t(i) * c + ch) * plane;
      for (int r = 0; r < h; ++r)
        for (int col = 0; col < w; ++col) {
          const long s = augment_source(d, r, col, h, w);
          dst[size_t(r) * w + col] = s < 0 ? T(0) : src[s];
        }
    }
  }
}

template <class T>
void input_noise_cpu(const T* x, T* y, size_t count, const InputNoiseConfig& cfg, uint64_t key,
                     uint64_t step) {
  // Each value is independent: any thread count gives the same bits.
  const bool par = count >= 16384;
  if (cfg.type == InputNoiseConfig::Type::kMask) {
    const uint64_t threshold = drop_threshold(cfg.p);
    // Elements 4b .. 4b + 3 share Philox block b (counter_u32).
#pragma omp parallel for schedule(static) if (par)
    for (size_t b = 0; b < (count + 3) / 4; ++b) {
      const Philox4x32 w = counter_block(key, step, b);
      for (size_t t = 4 * b, k = 0; k < 4 && t < count; ++k, ++t)
        y[t] = counter_keep(w.v[k], threshold) ? x[t] : T(0);
    }
  } else if (cfg.type == InputNoiseConfig::Type::kGaussian) {
    const T s = T(cfg.std);
    // Elements 2b and 2b + 1 share Philox block b (gaussian_draw).
#pragma omp parallel for schedule(static) if (par)
    for (size_t b = 0; b < (count + 1) / 2; ++b) {
      const Philox4x32 w = counter_block(key, step, b);
      const size_t t = 2 * b;
      y[t] = std::fma(s, T(gaussian_from_words(w.v[0], w.v[1])), x[t]);
      if (t + 1 < count) y[t + 1] = std::fma(s, T(gaussian_from_words(w.v[2], w.v[3])), x[t + 1]);
    }
  } else if (x != y) {
    for (size_t t = 0; t < count; ++t) y[t] = x[t];
  }
}

}  // namespace hpmc
