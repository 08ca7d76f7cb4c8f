// relu_ops.h — ReLU math, templated on the scalar so tests can run it in
// double for finite-difference checks; ReLUCPU calls it with T = float.
//
// Layout: any contiguous array of n elements (the op is elementwise).
// Forward:  y = max(x, 0), NaN passes through (as in PyTorch).
// Backward: dx = dy where x > 0, else 0 — the derivative at 0 is taken as 0,
//           like PyTorch. dx is overwritten.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpmc {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kReluParallelMin = size_t(1) << 15;

template <typename T>
void relu_forward(const T* x, T* y, size_t n) {
  // `x < 0 ? 0 : x` rather than `x > 0 ? x : 0` so that a NaN reaches the
  // loss, where the trainer detects divergence, instead of becoming 0.
#pragma omp parallel for schedule(static) if (n >= kReluParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}

template <typename T>
void relu_backward(const T* x, const T* dy, T* dx, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kReluParallelMin)
  for (int64_t i = 0; i < int64_t(n); ++i) dx[i] = x[i] > T(0) ? dy[i] : T(0);
}

}  // namespace hpmc
