// shape.h — NCHW shapes. Every activation in hpmc is a 4-d NCHW float tensor;
// a flat feature vector of F values is (N, F, 1, 1).
#pragma once

#include <cstddef>
#include <string>

namespace hpmc {

// The most elements one tensor may hold: the kernels index a tensor (an
// activation for the whole batch, a weight, a convolution's column matrix)
// with 32-bit integers, so every size is checked against this before
// anything is allocated (Model::build, Model::check_batch, the layers'
// output_shape); a larger one is refused with the layer and the sizes.
constexpr size_t kMaxTensorElements = 2147483647;  // 2^31 - 1

struct Shape {
  int n = 0, c = 0, h = 0, w = 0;

  Shape() = default;
  Shape(int n_, int c_, int h_, int w_) : n(n_), c(c_), h(h_), w(w_) {}

  size_t count() const { return size_t(n) * c * h * w; }
  size_t per_sample() const { return size_t(c) * h * w; }
  // The same per-sample shape with another batch size.
  Shape with_batch(int batch) const { return Shape(batch, c, h, w); }
  bool same_sample(const Shape& o) const { return c == o.c && h == o.h && w == o.w; }
  bool operator==(const Shape& o) const { return n == o.n && same_sample(o); }
  bool operator!=(const Shape& o) const { return !(*this == o); }

  // "(64, 3, 32, 32)"; sample_str() gives "3×32×32" without the batch.
  std::string str() const;
  std::string sample_str() const;
};

}  // namespace hpmc
