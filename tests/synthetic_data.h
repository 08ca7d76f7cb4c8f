// synthetic_data.h — small datasets a model must be able to learn, made in
// memory: no files, the same on every machine.
#pragma once

#include <cmath>

#include "core/rng.h"
#include "data/dataset.h"

namespace hpmc::testing {

// n images of 1x28x28: noise, plus a bright 6x6 patch whose position encodes
// the label (10 positions) — linearly separable, but only from the pixels.
inline Dataset synthetic_classes(int n, uint64_t seed) {
  Dataset d;
  d.source = "synthetic";
  d.images = Tensor::empty(Shape(n, 1, 28, 28), DType::kU8);
  d.labels = Tensor::empty(Shape(n, 1, 1, 1), DType::kI32);
  d.num_classes = 10;
  Rng rng(seed);
  uint8_t* px = d.images.data<uint8_t>();
  for (int i = 0; i < n; ++i) {
    int label = int(rng.below(10));
    d.labels.data<int32_t>()[i] = label;
    uint8_t* img = px + size_t(i) * 784;
    for (int k = 0; k < 784; ++k) img[k] = uint8_t(rng.below(60));
    int r0 = 2 + (label / 5) * 13, c0 = 1 + (label % 5) * 5;
    for (int r = r0; r < r0 + 6; ++r)
      for (int c = c0; c < c0 + 5; ++c) img[r * 28 + c] = uint8_t(180 + rng.below(76));
  }
  return d;
}

// Smooth images (a blurred blob at a random place) for an autoencoder.
inline Dataset synthetic_blobs(int n, uint64_t seed) {
  Dataset d;
  d.source = "synthetic";
  d.images = Tensor::empty(Shape(n, 1, 28, 28), DType::kU8);
  d.labels = Tensor::zeros(Shape(n, 1, 1, 1), DType::kI32);
  d.num_classes = 10;
  Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    double cy = 6 + 16 * rng.uniform01(), cx = 6 + 16 * rng.uniform01(), s = 3 + 3 * rng.uniform01();
    uint8_t* img = d.images.data<uint8_t>() + size_t(i) * 784;
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c)
        img[r * 28 + c] = uint8_t(255 * std::exp(-((r - cy) * (r - cy) + (c - cx) * (c - cx)) / (2 * s * s)));
  }
  return d;
}

}  // namespace hpmc::testing
