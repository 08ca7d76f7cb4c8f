// resample_index.h — the index arithmetic of average pooling and bilinear
// up-sampling, shared by the CPU ops (layers/cpu/avgpool2d_ops.h,
// upsample2d_ops.h) and the GPU kernels (layers/gpu/resample_kernels.cu), so
// both visit the same input elements with the same weights in the same order.
// Plain data and HPMC_HOST_DEVICE functions, no OpenMP or CUDA dependency.
#pragma once

#include "core/fp_exact.h"
#include "layers/conv_shape.h"  // HPMC_HOST_DEVICE, conv_out_size

namespace hpmc {

// ---- pooling windows (no padding) ------------------------------------------------

// Output extent of a k-wide window at stride s over `in` positions:
// floor((in − k) / s) + 1, 0 when the window does not fit (PyTorch's
// default, ceil_mode off).
HPMC_HOST_DEVICE inline int pool_out_size(int in, int k, int s) { return conv_out_size(in, k, s, 0); }

// The windows along one axis that contain input position r: window i covers
// i·s .. i·s + k − 1, so it contains r iff ceil((r − k + 1) / s) ≤ i ≤
// floor(r / s); clipped to [0, o − 1]. Empty (lo > hi) for a position no
// window covers (the floored remainder, or a gap when s > k).
HPMC_HOST_DEVICE inline void pool_windows_containing(int r, int k, int s, int o, int& lo,
                                                     int& hi) {
  const int d = r - k + 1;
  lo = d <= 0 ? 0 : (d + s - 1) / s;
  hi = r / s;
  if (hi > o - 1) hi = o - 1;
}

// ---- bilinear up-sampling, align_corners = false ------------------------------------

// The two source positions of one output position and their weights:
// out = l0 · in[i0] + l1 · in[i1].
template <typename T>
struct BilinearTap {
  int i0, i1;
  T l0, l1;
};

// PyTorch's rule (aten/src/ATen/native/UpSample.h, area_pixel_compute_source_index
// and compute_source_index_and_lambda) for an integer scale s, output position
// `dst` of an axis with `in` input positions:
//   src = max((dst + 0.5) / s − 0.5, 0), computed as ratio · (dst + 0.5) − 0.5
//         with ratio = 1/s rounded to T (PyTorch's 1.0 / scale_factor);
//   i0 = floor(src), i1 = i0 + 1 unless i0 is the last position (then i0);
//   l1 = min(src − i0, 1), l0 = 1 − l1.
// With s = 1 the output size equals the input size and PyTorch takes the
// identity (i0 = i1 = dst, l0 = 1, l1 = 0); so do we.
template <typename T>
HPMC_HOST_DEVICE inline BilinearTap<T> bilinear_tap(T ratio, int dst, int in, int scale) {
  if (scale == 1) return BilinearTap<T>{dst, dst, T(1), T(0)};
  T src = add_rn(mul_rn(ratio, add_rn(T(dst), T(0.5))), T(-0.5));
  if (src < T(0)) src = T(0);
  const int i0 = int(src);  // src ≥ 0: truncation is floor
  const int i1 = i0 < in - 1 ? i0 + 1 : i0;
  T l1 = add_rn(src, -T(i0));
  if (l1 > T(1)) l1 = T(1);
  return BilinearTap<T>{i0, i1, add_rn(T(1), -l1), l1};
}

// The weight with which output position `dst` reads input position r (0 when
// it does not): l0 if i0 = r, plus l1 if i1 = r (both at the clamped last
// position, where i0 = i1).
template <typename T>
HPMC_HOST_DEVICE inline T bilinear_weight(const BilinearTap<T>& t, int r) {
  if (t.i0 == r) return t.i1 == r ? add_rn(t.l0, t.l1) : t.l0;
  return t.i1 == r ? t.l1 : T(0);
}

// Output positions whose taps may include input position r: a superset,
// [max(0, (r − 1)·s), min(o − 1, (r + 2)·s)] (src(i) ∈ [r − 1, r + 1) needs
// i ∈ [(r − 0.5)·s − 0.5, (r + 1.5)·s − 0.5)); callers test each with
// bilinear_weight's index comparisons.
HPMC_HOST_DEVICE inline void bilinear_outputs_reading(int r, int s, int o, int& lo, int& hi) {
  lo = (r - 1) * s;
  if (lo < 0) lo = 0;
  hi = (r + 2) * s;
  if (hi > o - 1) hi = o - 1;
}

}  // namespace hpmc
