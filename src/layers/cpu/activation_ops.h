// activation_ops.h — the element-wise activations sigmoid, tanh, leaky_relu
// and prelu, templated on the scalar so tests can run them in double for
// finite-difference checks; the CPU layers call them with T = float.
// (ReLU lives in relu_ops.h.)
//
// Layout: any contiguous array of n elements, except prelu, whose input is
// NCHW (n samples × c channels × a plane of `plane` = H·W elements; a
// (N, K, 1, 1) output of a linear layer is c = K channels of plane 1) with
// one slope per channel, as PyTorch's PReLU(num_parameters = C).
// Every formula is PyTorch's (torch 1.13, aten/src/ATen/native):
//   sigmoid     y = 1 / (1 + e^−x). Evaluated with z = e^−|x| ≤ 1 as
//               x ≥ 0 ? 1 / (1 + z) : z / (1 + z), so no exp overflows and
//               no precision is lost for large |x| (−1000 → 0, 1000 → 1).
//               dx = dy · (1 − y) · y, from the output y.
//   tanh        y = tanh(x);  dx = dy · (1 − y²), from the output y, evaluated
//               as dy · ((1 − y) · (1 + y)): equal in exact arithmetic, no
//               product that a compiler could fuse into an FMA (whether
//               1 − y·y is fused changes the result by up to ~1000 ulp near
//               |y| = 1, and compilers differ), and accurate near |y| = 1.
//   leaky_relu  y = x > 0 ? x : x · slope;  dx = x > 0 ? dy : dy · slope
//               (the derivative at 0 is the slope, as PyTorch's). PyTorch's
//               default slope (negative_slope) is 0.01.
//   prelu       y = x > 0 ? x : a_c · x;  dx = x > 0 ? dy : a_c · dy;
//               da_c += Σ over samples and the plane of (x > 0 ? 0 : x · dy).
//               PyTorch initialises a to 0.25.
// NaN: every activation gives NaN for a NaN input (a NaN compares false, so
// the leaky/prelu forms take x · slope = NaN), and its backward follows the
// formula: leaky_relu's and prelu's dx are dy · slope at a NaN x (PyTorch's
// too), a NaN x makes prelu's da NaN.
//
// Gradient convention (layer.h): dx is OVERWRITTEN; the parameter gradient da
// ACCUMULATES (+=). prelu's da is deterministic whatever the thread count:
// each (sample, channel) plane is summed serially in double (x · dy of two
// floats is exact in double) into its own slot, then each channel's slots are
// added in sample order, also in double, and the total is rounded once and
// added to da.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpmc {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kActivationParallelMin = size_t(1) << 15;

// ---- one element (the GPU forms in layers/gpu/activation.cuh mirror these) --------

template <typename T>
inline T sigmoid_value(T x) {
  const T z = std::exp(-std::fabs(x));  // in (0, 1]; NaN for a NaN x
  return x >= T(0) ? T(1) / (T(1) + z) : z / (T(1) + z);
}
template <typename T>
inline T sigmoid_grad(T y, T dy) {
  return dy * (T(1) - y) * y;
}
template <typename T>
inline T tanh_grad(T y, T dy) {
  return dy * ((T(1) - y) * (T(1) + y));
}
template <typename T>
inline T leaky_relu_value(T x, T slope) {
  return x > T(0) ? x : x * slope;
}
template <typename T>
inline T leaky_relu_grad(T x, T dy, T slope) {
  return x > T(0) ? dy : dy * slope;
}

// ---- sigmoid, tanh ----------------------------------------------------------------

template <typename T>
void sigmoid_forward(const T* x, T* y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kActivationParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) y[i] = sigmoid_value(x[i]);
}

template <typename T>
void sigmoid_backward(const T* y, const T* dy, T* dx, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kActivationParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) dx[i] = sigmoid_grad(y[i], dy[i]);
}

template <typename T>
void tanh_forward(const T* x, T* y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kActivationParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) y[i] = std::tanh(x[i]);
}

template <typename T>
void tanh_backward(const T* y, const T* dy, T* dx, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kActivationParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) dx[i] = tanh_grad(y[i], dy[i]);
}

// ---- leaky_relu --------------------------------------------------------------------

template <typename T>
void leaky_relu_forward(const T* x, T* y, size_t n, T slope) {
#pragma omp parallel for schedule(static) if (n >= kActivationParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) y[i] = leaky_relu_value(x[i], slope);
}

template <typename T>
void leaky_relu_backward(const T* x, const T* dy, T* dx, size_t n, T slope) {
#pragma omp parallel for schedule(static) if (n >= kActivationParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) dx[i] = leaky_relu_grad(x[i], dy[i], slope);
}

// ---- prelu -------------------------------------------------------------------------

// x, y: n × c × plane; slope: c values.
template <typename T>
void prelu_forward(const T* x, const T* slope, T* y, int64_t n, int c, size_t plane) {
  const int64_t planes = n * int64_t(c);
  const bool par = size_t(planes) * plane >= kActivationParallelMin;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t p = 0; p < planes; ++p) {
    const T a = slope[p % c];
    const size_t base = size_t(p) * plane;
    for (size_t e = 0; e < plane; ++e) y[base + e] = leaky_relu_value(x[base + e], a);
  }
}

// dx (if non-null) is overwritten; dslope (c values) accumulates.
template <typename T>
void prelu_backward(const T* x, const T* slope, const T* dy, T* dx, T* dslope, int64_t n, int c,
                    size_t plane) {
  const int64_t planes = n * int64_t(c);
  if (planes <= 0) return;
  std::vector<double> part(static_cast<size_t>(planes));
  const bool par = size_t(planes) * plane >= kActivationParallelMin;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t p = 0; p < planes; ++p) {
    const T a = slope[p % c];
    const size_t base = size_t(p) * plane;
    double sum = 0.0;
    for (size_t e = 0; e < plane; ++e) {
      const T xv = x[base + e], g = dy[base + e];
      if (!(xv > T(0))) sum += double(xv) * double(g);
      if (dx) dx[base + e] = leaky_relu_grad(xv, g, a);
    }
    part[size_t(p)] = sum;
  }
  for (int ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int64_t s = 0; s < n; ++s) sum += part[size_t(s * c + ch)];
    dslope[ch] += T(sum);
  }
}

}  // namespace hpmc
