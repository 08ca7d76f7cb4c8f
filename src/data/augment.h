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
// the same number of values per sample. x and y must not overlap. `first`
// is the position of x's first sample in the step's whole batch (0 but for a
// data-parallel shard or an accumulated micro-batch, model/trainer.h): each
// sample gets the draw of its position in the whole batch.
void augment_batch(const Tensor& x, Tensor& y, const Shape& image, const AugmentConfig& cfg,
                   uint64_t seed, int64_t step, int64_t first = 0);

// y = x with the input noise of `step` (y's batch is set to x's); x and y may
// be the same tensor. `first` as for augment_batch.
void add_input_noise(const Tensor& x, Tensor& y, const InputNoiseConfig& cfg, uint64_t seed,
                     int64_t step, int64_t first = 0);

// The CPU loops on raw NCHW arrays (templated on the scalar for tests in
// double): n samples of c×h×w; `key` = counter_key(seed, kAugmentStream) or
// counter_key(seed, kInputNoiseStream). Sample i draws as position first + i
// of the whole batch; value t of the noise as index base + t.
template <class T>
void augment_cpu(const T* x, T* y, int n, int c, int h, int w, bool hflip, int pad, uint64_t key,
                 uint64_t step, uint64_t first = 0) {
  const size_t plane = size_t(h) * w;
  // One thread: a copy with offsets, a fraction of a millisecond per CIFAR-10 batch.
  for (int i = 0; i < n; ++i) {
    const AugmentDraw d = augment_draw(key, step, first + uint64_t(i), hflip, pad);
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
                     uint64_t step, uint64_t base = 0) {
  // Each value is independent: any thread count gives the same bits.
  const bool par = count >= 16384;
  (void)par;  // read by the OpenMP pragmas only
  const uint64_t end = base + count;  // the values' indices are [base, end)
  if (cfg.type == InputNoiseConfig::Type::kMask) {
    const uint64_t threshold = drop_threshold(cfg.p);
    // Indices 4b .. 4b + 3 share Philox block b (counter_u32).
    const uint64_t b0 = base / 4;
    const int64_t blocks = int64_t((end + 3) / 4 - b0);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < blocks; ++k) {
      const uint64_t b = b0 + uint64_t(k);
      const Philox4x32 w = counter_block(key, step, b);
      for (uint64_t g = 4 * b; g < 4 * b + 4; ++g)
        if (g >= base && g < end)
          y[g - base] = counter_keep(w.v[g - 4 * b], threshold) ? x[g - base] : T(0);
    }
  } else if (cfg.type == InputNoiseConfig::Type::kGaussian) {
    const T s = T(cfg.std);
    // Indices 2b and 2b + 1 share Philox block b (gaussian_draw).
    const uint64_t b0 = base / 2;
    const int64_t blocks = int64_t((end + 1) / 2 - b0);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < blocks; ++k) {
      const uint64_t b = b0 + uint64_t(k);
      const Philox4x32 w = counter_block(key, step, b);
      if (2 * b >= base)
        y[2 * b - base] = std::fma(s, T(gaussian_from_words(w.v[0], w.v[1])), x[2 * b - base]);
      if (2 * b + 1 < end)
        y[2 * b + 1 - base] =
            std::fma(s, T(gaussian_from_words(w.v[2], w.v[3])), x[2 * b + 1 - base]);
    }
  } else if (x != y) {
    for (size_t t = 0; t < count; ++t) y[t] = x[t];
  }
}

}  // namespace hpmc
