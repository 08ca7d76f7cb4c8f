// The upsample fold (src/layers/gpu/conv2d_kernels.h, implicit::upconv_*, and
// implicit_conv.h, implicit_detail::upconv_*): a nearest-neighbour ×2 upsample
// followed by a 3×3, stride-1, pad-1 convolution (or, in the thin fold, a 5×5
// pad-2 one), computed without forming the upsampled tensor, against
// double-precision loops written here that DO form it: up = up2(x_low),
// y = conv(up, w) + b, dx_low = up2_backward(conv_T(dy, w)), dw += corr(up,
// dy), db += Σ dy, with the fused ReLU and every other epilogue activation
// (forward; act_testing.h) and the ReLU mask (backward_data). Both folds: the
// GEMM fold (C % 8 == 0, K % 8 == 0, K > 4) and the thin fold (1 ≤ K ≤ 4, any
// C). Shapes: every low-resolution size from 1×1 up, odd and rectangular
// ones, batch 1, C and K at the GEMM rule's multiples of 8 and K = 136 (two
// 128-wide column tiles), K = 1 … 4 with odd C, the autoencoders' decoder
// layers; every tile configuration and split of the GEMM fold's planned
// variants; determinism, NaN / inf-poisoned outputs, accumulation, the
// upconv_applies rule; and the fold's error against that of the direct path
// (im2col on the explicitly upsampled input).
//
// Device arrays sit between guard zones (as in test_gpu_implicit.cpp): inputs'
// guards hold NaN (a read past either end poisons a result), outputs' a
// sentinel that must come back bit for bit (a write past either end is
// caught). Overwritten outputs start as NaN, so an element left unwritten fails.
//
// Error bound, per output element: |gpu − ref| ≤ 1e-5·Σ|terms| + 1e-30, the sum
// of the magnitudes of the products the reference adds for that element
// (computed alongside it; for accumulated outputs plus |initial value|, for
// y plus |b|). The fold reassociates: its weights are sums of up to four 3×3
// weights (rounded once from double, a relative error ≤ 2^-24 each) and its
// chains have a different length and order, so it matches the reference to
// FP32 rounding, not bit for bit. Any FP32 summation of those terms is within
// γ_L·Σ|terms| in the worst case; for random signs the error is about
// u·sqrt(Σ s_i²) with partial sums s_i ≈ sqrt(i)·σ, i.e. ≈ u·L·σ/2.5 against
// Σ|terms| ≈ L·E|term| ≈ L·σ·0.8: ≈ 0.5·u ≈ 3e-8 relative, so 1e-5 is
// hundreds of standard deviations (the weight rounding adds ≤ u·Σ|terms|).
// A wrong tap, a missing or extra term, a dropped bias, a wrong parity or
// border, by contrast, errs by O(|term|) ≈ 0.25 or O(sqrt(C)·0.3) on most
// elements, against a tolerance of 1e-5·L/4 ≤ 0.04 (L ≤ 16384 here). Where the
// ReLU mask zeroes an element the reference is exactly 0 with Σ|terms| = 0:
// that element must come back ±0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "act_testing.h"
#include "dev_array.h"
#include "gpu_testing.h"
#include "layers/conv_shape.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/implicit_conv.h"
#include "layers/gpu/implicit_plan.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace imp = gpu::implicit;
namespace det = gpu::implicit_detail;
using namespace hpmc::testing;  // dev_array.h


// A ReLU mask: U(−1, 1) with about one element in eight +0 and one in sixteen
// −0, so that `> 0` is told apart from `>= 0` and from the sign bit.
std::vector<float> random_mask(size_t n, Rng& rng) {
  std::vector<float> v = random_floats(n, rng);
  for (auto& x : v) {
    const uint64_t r = rng.below(16);
    if (r < 2) x = 0.0f;
    else if (r == 2) x = -0.0f;
  }
  return v;
}

// An overwritten output: payload `poison`, guards kGuard.
std::unique_ptr<DevArray> output(size_t n, float poison = kNaN) {
  auto d = std::make_unique<DevArray>(n);
  d->upload(std::vector<float>(n, poison), kGuard);
  return d;
}

// ---- the cases -----------------------------------------------------------------------------

// Low resolution h×w; the convolution runs on H×W = 2h×2w.
struct UpCase {
  int N, C, h, w, K;
  int R = 3;  // the filter: 3×3 pad 1, or 5×5 pad 2 (the thin fold only)
  Conv2dShape shape() const { return make_conv2d_shape(N, C, 2 * h, 2 * w, K, R, R, 1, R / 2); }
  size_t low_count() const { return size_t(N) * C * h * w; }
};

std::string describe(const UpCase& u) {
  return str("N=", u.N, " C=", u.C, " h×w=", u.h, "×", u.w, " (conv on ", 2 * u.h, "×",
             2 * u.w, ") K=", u.K, " ", u.R, "×", u.R);
}

// ---- double-precision references, with Σ|terms| per element -----------------------------

size_t idx4(int a, int b, int c, int d, int nb, int nc, int nd) {
  return ((size_t(a) * nb + b) * nc + c) * nd + d;
}

struct Ref {
  std::vector<double> v, mag;  // value and Σ|terms| of each element
  explicit Ref(size_t n = 0) : v(n, 0.0), mag(n, 0.0) {}
};

// up2(x): [N][C][h][w] → [N][C][2h][2w], each pixel copied to its 2×2 block.
std::vector<float> upsample(const std::vector<float>& x, int N, int C, int h, int w) {
  std::vector<float> up(size_t(N) * C * 4 * h * w);
  for (int p = 0; p < N * C; ++p)
    for (int i = 0; i < 2 * h; ++i)
      for (int j = 0; j < 2 * w; ++j)
        up[(size_t(p) * 2 * h + i) * 2 * w + j] = x[(size_t(p) * h + i / 2) * w + j / 2];
  return up;
}

// y = conv(up, w), no bias (with_bias adds it).
Ref ref_forward(const Conv2dShape& s, const std::vector<float>& up, const std::vector<float>& w) {
  const size_t PQ = size_t(s.P) * s.Q;
  Ref y(size_t(s.N) * s.K * PQ);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k) {
      double* yv = &y.v[(size_t(n) * s.K + k) * PQ];
      double* ym = &y.mag[(size_t(n) * s.K + k) * PQ];
      for (int c = 0; c < s.C; ++c) {
        const float* xp = &up[(size_t(n) * s.C + c) * s.H * s.W];
        for (int r = 0; r < s.R; ++r)
          for (int t = 0; t < s.S; ++t) {
            const double wv = w[idx4(k, c, r, t, s.C, s.R, s.S)], wa = std::fabs(wv);
            for (int p = 0; p < s.P; ++p) {
              const int ih = p * s.stride - s.pad + r;
              if (ih < 0 || ih >= s.H) continue;
              for (int q = 0; q < s.Q; ++q) {
                const int iw = q * s.stride - s.pad + t;
                if (iw < 0 || iw >= s.W) continue;
                const double xv = xp[size_t(ih) * s.W + iw];
                yv[size_t(p) * s.Q + q] += xv * wv;
                ym[size_t(p) * s.Q + q] += std::fabs(xv) * wa;
              }
            }
          }
      }
    }
  return y;
}

Ref with_bias(const Conv2dShape& s, Ref y, const std::vector<float>& b) {
  const size_t PQ = size_t(s.P) * s.Q;
  for (size_t i = 0; i < y.v.size(); ++i) {
    const int k = int((i / PQ) % size_t(s.K));
    y.v[i] += b[k];
    y.mag[i] += std::fabs(double(b[k]));
  }
  return y;
}

// The ReLU layer's function, v < 0 ? 0 : v (relu(a) − relu(b) ≤ |a − b|: the
// bound carries over).
Ref with_relu(Ref y) {
  for (double& v : y.v) v = v < 0 ? 0.0 : v;
  return y;
}

// dx_low = up2_backward(conv_T(dy, w)): the transposed convolution at full
// resolution, written as a scatter (each dy element to the pixels it came
// from), then each low-resolution pixel the sum over its 2×2 block.
Ref ref_backward_data(const Conv2dShape& s, const std::vector<float>& dy,
                      const std::vector<float>& w) {
  const size_t HW = size_t(s.H) * s.W;
  Ref full(size_t(s.N) * s.C * HW);
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k) {
      const float* g = &dy[(size_t(n) * s.K + k) * size_t(s.P) * s.Q];
      for (int c = 0; c < s.C; ++c) {
        double* dv = &full.v[(size_t(n) * s.C + c) * HW];
        double* dm = &full.mag[(size_t(n) * s.C + c) * HW];
        for (int r = 0; r < s.R; ++r)
          for (int t = 0; t < s.S; ++t) {
            const double wv = w[idx4(k, c, r, t, s.C, s.R, s.S)], wa = std::fabs(wv);
            for (int p = 0; p < s.P; ++p) {
              const int ih = p * s.stride - s.pad + r;
              if (ih < 0 || ih >= s.H) continue;
              for (int q = 0; q < s.Q; ++q) {
                const int iw = q * s.stride - s.pad + t;
                if (iw < 0 || iw >= s.W) continue;
                const double gv = g[size_t(p) * s.Q + q];
                dv[size_t(ih) * s.W + iw] += gv * wv;
                dm[size_t(ih) * s.W + iw] += std::fabs(gv) * wa;
              }
            }
          }
      }
    }
  const int h = s.H / 2, w2 = s.W / 2;
  Ref low(size_t(s.N) * s.C * h * w2);
  for (int p = 0; p < s.N * s.C; ++p)
    for (int i = 0; i < h; ++i)
      for (int j = 0; j < w2; ++j)
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            const size_t from = (size_t(p) * s.H + 2 * i + a) * s.W + 2 * j + b;
            low.v[(size_t(p) * h + i) * w2 + j] += full.v[from];
            low.mag[(size_t(p) * h + i) * w2 + j] += full.mag[from];
          }
  return low;
}

// dx = mask > 0 ? dx : 0; a zeroed element must come back exactly ±0.
Ref with_mask(Ref dx, const std::vector<float>& mask) {
  for (size_t i = 0; i < dx.v.size(); ++i)
    if (!(mask[i] > 0.0f)) dx.v[i] = 0.0, dx.mag[i] = 0.0;
  return dx;
}

// The weight gradient corr(up, dy) alone.
Ref ref_weight_grad(const Conv2dShape& s, const std::vector<float>& up,
                    const std::vector<float>& dy) {
  Ref dw(s.weight_count());
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k) {
      const float* g = &dy[(size_t(n) * s.K + k) * size_t(s.P) * s.Q];
      for (int c = 0; c < s.C; ++c) {
        const float* xp = &up[(size_t(n) * s.C + c) * s.H * s.W];
        for (int r = 0; r < s.R; ++r)
          for (int t = 0; t < s.S; ++t) {
            double acc = 0, mag = 0;
            for (int p = 0; p < s.P; ++p) {
              const int ih = p * s.stride - s.pad + r;
              if (ih < 0 || ih >= s.H) continue;
              for (int q = 0; q < s.Q; ++q) {
                const int iw = q * s.stride - s.pad + t;
                if (iw < 0 || iw >= s.W) continue;
                const double a = double(xp[size_t(ih) * s.W + iw]) * g[size_t(p) * s.Q + q];
                acc += a;
                mag += std::fabs(a);
              }
            }
            dw.v[idx4(k, c, r, t, s.C, s.R, s.S)] += acc;
            dw.mag[idx4(k, c, r, t, s.C, s.R, s.S)] += mag;
          }
      }
    }
  return dw;
}

Ref ref_bias_grad(const Conv2dShape& s, const std::vector<float>& dy) {
  Ref db(size_t(s.K));
  const size_t PQ = size_t(s.P) * s.Q;
  for (int n = 0; n < s.N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (size_t i = 0; i < PQ; ++i) {
        const double g = dy[(size_t(n) * s.K + k) * PQ + i];
        db.v[k] += g;
        db.mag[k] += std::fabs(g);
      }
  return db;
}

// base + times·g, for the accumulating outputs (dw, db).
Ref accumulated(const std::vector<float>& base, const Ref& g, double times = 1.0) {
  Ref r(base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    r.v[i] = double(base[i]) + times * g.v[i];
    r.mag[i] = std::fabs(double(base[i])) + times * g.mag[i];
  }
  return r;
}

// |got − ref| ≤ rel·Σ|terms| + 1e-30 for every element, every element finite.
// dims: the output's 4-d extents, to name the worst element.
::testing::AssertionResult matches(const std::vector<float>& got, const Ref& ref,
                                   const int (&dims)[4], double rel = 1e-5) {
  if (got.size() != ref.v.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.v.size();
  auto where = [&](size_t i) {
    const size_t d3 = i % dims[3], d2 = i / dims[3] % dims[2], d1 = i / dims[3] / dims[2] % dims[1],
                 d0 = i / dims[3] / dims[2] / dims[1];
    return str("element ", i, " [", d0, "][", d1, "][", d2, "][", d3, "]");
  };
  double worst = -1;  // (|got − ref| − tol) / tol's scale: the largest excess
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]))
      return ::testing::AssertionFailure() << where(i) << " is " << got[i] << " (ref " << ref.v[i]
                                           << "): unwritten, or read out of range";
    const double err = std::fabs(double(got[i]) - ref.v[i]);
    const double tol = rel * ref.mag[i] + 1e-30;
    if (err / tol > worst) worst = err / tol, at = i;
  }
  if (worst > 1.0)
    return ::testing::AssertionFailure()
           << "|gpu - ref| = " << std::fabs(double(got[at]) - ref.v[at]) << " at " << where(at)
           << " (gpu " << got[at] << ", ref " << ref.v[at] << ") exceeds " << rel
           << "·Σ|terms| = " << rel * ref.mag[at] << " (" << worst << "× the bound) of "
           << got.size();
  return ::testing::AssertionSuccess();
}

// fused[i] is the ReLU layer's function (v < 0 ? 0 : v) of plain[i], bit for bit,
// and the data has both signs (else the check proves little).
::testing::AssertionResult relu_of(const std::vector<float>& plain,
                                   const std::vector<float>& fused) {
  if (plain.size() != fused.size())
    return ::testing::AssertionFailure() << "size " << fused.size() << " vs " << plain.size();
  size_t positive = 0, zeroed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const float want = plain[i] < 0.0f ? 0.0f : plain[i];
    if (!same_bits(fused[i], want))
      return ::testing::AssertionFailure() << "element " << i << ": " << fused[i]
                                           << ", expected relu(" << plain[i] << ") = " << want;
    (want > 0.0f ? positive : zeroed) += 1;
  }
  if (plain.size() > 8 && (positive == 0 || zeroed == 0))
    return ::testing::AssertionFailure() << "degenerate: " << positive << " positive, " << zeroed
                                         << " zeroed";
  return ::testing::AssertionSuccess();
}

// masked[i] is mask[i] > 0 ? plain[i] : 0, bit for bit (the mask is an
// epilogue on the same sums), and the mask keeps some elements and zeroes some.
::testing::AssertionResult mask_of(const std::vector<float>& plain,
                                   const std::vector<float>& masked,
                                   const std::vector<float>& mask) {
  if (plain.size() != masked.size() || mask.size() != masked.size())
    return ::testing::AssertionFailure() << "sizes " << masked.size() << ", " << plain.size()
                                         << ", " << mask.size();
  size_t kept = 0, zeroed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const bool keep = mask[i] > 0.0f;
    if (keep ? !same_bits(masked[i], plain[i]) : masked[i] != 0.0f)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << masked[i] << " with mask " << mask[i] << ", "
             << plain[i] << " without: expected " << (keep ? plain[i] : 0.0f);
    (keep ? kept : zeroed) += 1;
  }
  if (plain.size() > 8 && (kept == 0 || zeroed == 0))
    return ::testing::AssertionFailure() << "degenerate: " << kept << " kept, " << zeroed
                                         << " zeroed";
  return ::testing::AssertionSuccess();
}

// A plan covers the pass's k-tiles with non-empty slices:
// splits ≥ 1, tps ≥ 1, (splits − 1)·tps < ktiles ≤ splits·tps.
::testing::AssertionResult plan_valid(const det::ConvPlan& p, int ktiles) {
  if (ktiles < 1) return ::testing::AssertionFailure() << "upconv_ktiles = " << ktiles;
  if (p.splits < 1 || p.tps < 1 || (long long)(p.splits - 1) * p.tps >= ktiles ||
      (long long)p.splits * p.tps < ktiles)
    return ::testing::AssertionFailure() << "splits " << p.splits << ", tps " << p.tps
                                         << " for " << ktiles << " k-tiles";
  return ::testing::AssertionSuccess();
}

// ---- one fold, all three passes, against the references --------------------------------------

// The inputs of one case and the references derived from them.
struct Fixture {
  UpCase uc;
  Conv2dShape s;
  std::vector<float> x, up, w, b, dy, dw0, db0, mask;
  Ref y, dx, dw, db;  // y without bias, dx without mask, dw and db the gradients alone
  int ydims[4], xdims[4], wdims[4], bdims[4];

  Fixture(const UpCase& u, uint64_t seed) : uc(u), s(u.shape()) {
    Rng rng(seed);
    x = random_floats(u.low_count(), rng);
    w = random_floats(s.weight_count(), rng);
    b = random_floats(size_t(s.K), rng);
    dy = random_floats(size_t(s.N) * s.out_sample(), rng);
    dw0 = random_floats(s.weight_count(), rng);
    db0 = random_floats(size_t(s.K), rng);
    mask = random_mask(u.low_count(), rng);
    up = upsample(x, u.N, u.C, u.h, u.w);
    y = ref_forward(s, up, w);
    dx = ref_backward_data(s, dy, w);
    dw = ref_weight_grad(s, up, dy);
    db = ref_bias_grad(s, dy);
    const int yd[4] = {s.N, s.K, s.P, s.Q}, xd[4] = {s.N, s.C, u.h, u.w},
              wd[4] = {s.K, s.C, s.R, s.S}, bd[4] = {1, 1, 1, s.K};
    std::copy(yd, yd + 4, ydims);
    std::copy(xd, xd + 4, xdims);
    std::copy(wd, wd + 4, wdims);
    std::copy(bd, bd + 4, bdims);
  }
};

// Every output of the public functions on one case: forward with and without
// bias, with and without the fused ReLU (which must also be the ReLU of the
// plain output, bit for bit); backward_data without and with the mask (the
// masked output the unmasked one, masked, bit for bit); backward_params onto
// random dw0, db0, and with db null. y and dx start as NaN; guards survive.
// For the GEMM fold (K > 4; the thin fold has no plans), plan_upconv's plan
// for each pass is valid.
void check_upconv(const UpCase& uc, uint64_t seed) {
  SCOPED_TRACE(describe(uc) + " seed=" + std::to_string(seed));
  const Fixture f(uc, seed);
  const Conv2dShape& s = f.s;
  ASSERT_TRUE(imp::upconv_applies(s));
  if (s.K > det::kThinMaxK)
    for (det::ConvPass pass :
         {det::ConvPass::kForward, det::ConvPass::kBackwardData, det::ConvPass::kWeightGrad})
      EXPECT_TRUE(plan_valid(det::plan_upconv(s, pass), det::upconv_ktiles(s, pass)))
          << "plan_upconv, pass " << int(pass);

  auto x_in = input(f.x), w_in = input(f.w), b_in = input(f.b), dy_in = input(f.dy),
       m_in = input(f.mask);

  // forward: {bias, no bias} × {plain, fused ReLU, every other epilogue
  // activation (act_testing.h: the activation of the plain output)}
  Rng srng(seed + 1);
  const std::vector<float> slopes = random_floats(size_t(s.K), srng);  // prelu's, per channel
  auto slopes_in = input(slopes);
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "no bias");
    const Ref want = bias ? with_bias(s, f.y, f.b) : f.y;
    auto y = output(f.dy.size()), yr = output(f.dy.size());
    imp::upconv_forward(s, x_in->ptr(), w_in->ptr(), bias ? b_in->ptr() : nullptr, y->ptr(),
                        Activation::none());
    imp::upconv_forward(s, x_in->ptr(), w_in->ptr(), bias ? b_in->ptr() : nullptr, yr->ptr(),
                        Activation::relu());
    finish("upconv_forward");
    const std::vector<float> got = y->payload(), got_r = yr->payload();
    EXPECT_TRUE(matches(got, want, f.ydims)) << "forward";
    EXPECT_TRUE(matches(got_r, with_relu(want), f.ydims)) << "forward with the fused ReLU";
    EXPECT_TRUE(relu_of(got, got_r)) << "forward with the fused ReLU";
    EXPECT_TRUE(y->guards_intact(kGuard)) << "forward";
    EXPECT_TRUE(yr->guards_intact(kGuard)) << "forward with the fused ReLU";
    for (const Activation& act : epilogue_activations(slopes_in->ptr())) {
      SCOPED_TRACE("epilogue " + act_name(act));
      auto ya = output(f.dy.size());
      imp::upconv_forward(s, x_in->ptr(), w_in->ptr(), bias ? b_in->ptr() : nullptr, ya->ptr(),
                          act);
      finish("upconv_forward with an activation");
      EXPECT_TRUE(act_of(got, ya->payload(), act, slopes, size_t(s.P) * s.Q, size_t(s.K)));
      EXPECT_TRUE(ya->guards_intact(kGuard));
    }
  }

  // backward_data: without and with the ReLU mask
  {
    auto dx = output(f.x.size()), dxm = output(f.x.size());
    imp::upconv_backward_data(s, dy_in->ptr(), w_in->ptr(), nullptr, dx->ptr());
    imp::upconv_backward_data(s, dy_in->ptr(), w_in->ptr(), m_in->ptr(), dxm->ptr());
    finish("upconv_backward_data");
    const std::vector<float> got = dx->payload(), got_m = dxm->payload();
    EXPECT_TRUE(matches(got, f.dx, f.xdims)) << "backward_data";
    EXPECT_TRUE(matches(got_m, with_mask(f.dx, f.mask), f.xdims)) << "backward_data, mask";
    EXPECT_TRUE(mask_of(got, got_m, f.mask)) << "backward_data, mask";
    EXPECT_TRUE(dx->guards_intact(kGuard)) << "backward_data";
    EXPECT_TRUE(dxm->guards_intact(kGuard)) << "backward_data, mask";
  }

  // backward_params: dw += …, db += … (and db null)
  {
    DevArray dw(f.w.size()), db(f.b.size()), dw2(f.w.size());
    dw.upload(f.dw0, kGuard);
    db.upload(f.db0, kGuard);
    dw2.upload(f.dw0, kGuard);
    imp::upconv_backward_params(s, x_in->ptr(), dy_in->ptr(), dw.ptr(), db.ptr());
    imp::upconv_backward_params(s, x_in->ptr(), dy_in->ptr(), dw2.ptr(), nullptr);
    finish("upconv_backward_params");
    const Ref want_dw = accumulated(f.dw0, f.dw);
    EXPECT_TRUE(matches(dw.payload(), want_dw, f.wdims)) << "backward_params dw";
    EXPECT_TRUE(matches(db.payload(), accumulated(f.db0, f.db), f.bdims)) << "backward_params db";
    EXPECT_TRUE(matches(dw2.payload(), want_dw, f.wdims)) << "backward_params dw, db null";
    EXPECT_TRUE(dw.guards_intact(kGuard)) << "backward_params dw";
    EXPECT_TRUE(db.guards_intact(kGuard)) << "backward_params db";
    EXPECT_TRUE(dw2.guards_intact(kGuard)) << "backward_params dw, db null";
  }
}

// ---- the tests -------------------------------------------------------------------------------

// The rule: 3×3, stride 1, pad 1, H and W even and positive, and either
// C % 8 == 0, K % 8 == 0, K > 4 (the GEMM fold) or 1 ≤ K ≤ 4 with any C (the
// thin fold). Each false case breaks exactly one condition of an otherwise
// applicable shape (mostly N = 2, C = 16, 8×10 → K = 24).
TEST(GpuUpconv, AppliesRule) {
  HPMC_REQUIRE_GPU();
  auto sh = [](int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
    return make_conv2d_shape(N, C, H, W, K, R, S, stride, pad);
  };
  EXPECT_TRUE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 3, 3, 1, 1)));
  EXPECT_TRUE(imp::upconv_applies(sh(1, 8, 2, 2, 8, 3, 3, 1, 1)));      // h×w = 1×1
  EXPECT_TRUE(imp::upconv_applies(sh(1, 8, 2, 6, 8, 3, 3, 1, 1)));      // 1×3
  EXPECT_TRUE(imp::upconv_applies(sh(4, 128, 16, 16, 256, 3, 3, 1, 1)));  // CIFAR conv4
  EXPECT_TRUE(imp::upconv_applies(sh(64, 16, 14, 14, 32, 3, 3, 1, 1)));   // Fashion conv4
  EXPECT_TRUE(imp::upconv_applies(sh(3, 40, 18, 8, 136, 3, 3, 1, 1)));
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 3, 3, 1, 0)));  // pad 0
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 3, 3, 1, 2)));  // pad 2
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 3, 3, 2, 1)));  // stride 2
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 5, 5, 1, 2)));  // 5×5
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 5, 5, 1, 1)));  // 5×5 pad 1
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 1, 1, 1, 0)));  // 1×1
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 3, 1, 1, 1)));  // 3×1
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 24, 1, 3, 1, 1)));  // 1×3
  EXPECT_FALSE(imp::upconv_applies(sh(2, 12, 8, 10, 24, 3, 3, 1, 1)));  // C % 8 = 4
  EXPECT_FALSE(imp::upconv_applies(sh(2, 3, 8, 10, 24, 3, 3, 1, 1)));   // C = 3
  EXPECT_FALSE(imp::upconv_applies(sh(2, 17, 8, 10, 24, 3, 3, 1, 1)));  // C = 17
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 20, 3, 3, 1, 1)));  // K % 8 = 4
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 12, 3, 3, 1, 1)));  // K = 12
  EXPECT_TRUE(imp::upconv_applies(sh(2, 16, 8, 10, 4, 3, 3, 1, 1)));    // K = 4: the thin fold
  EXPECT_TRUE(imp::upconv_applies(sh(2, 16, 8, 10, 3, 3, 3, 1, 1)));    // K = 3: the thin fold
  EXPECT_TRUE(imp::upconv_applies(sh(2, 3, 8, 10, 1, 3, 3, 1, 1)));     // thin: any C
  EXPECT_FALSE(imp::upconv_applies(sh(2, 3, 8, 10, 3, 3, 3, 2, 1)));    // thin, stride 2
  EXPECT_TRUE(imp::upconv_applies(sh(2, 16, 8, 10, 3, 5, 5, 1, 2)));    // thin 5×5 pad 2
  EXPECT_TRUE(imp::upconv_applies(sh(1, 1, 2, 2, 4, 5, 5, 1, 2)));      // thin 5×5, 1×1 low
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 3, 5, 5, 1, 1)));   // thin 5×5 pad 1
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 3, 5, 5, 2, 2)));   // thin 5×5, stride 2
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 3, 5, 3, 1, 2)));   // thin 5×3
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 3, 7, 7, 1, 3)));   // thin 7×7
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 7, 10, 3, 5, 5, 1, 2)));   // thin 5×5, H odd
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 8, 5, 5, 1, 2)));   // 5×5, K > 4
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 10, 0, 3, 3, 1, 1)));   // K = 0 (≡ 0 mod 8)
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 7, 10, 24, 3, 3, 1, 1)));  // H odd
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 9, 24, 3, 3, 1, 1)));   // W odd
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 1, 1, 24, 3, 3, 1, 1)));   // H, W odd
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 0, 10, 24, 3, 3, 1, 1)));  // H = 0
  EXPECT_FALSE(imp::upconv_applies(sh(2, 16, 8, 0, 24, 3, 3, 1, 1)));   // W = 0
}

// Every low-resolution size (1×1, a single row, odd and rectangular ones, one
// a multiple of 8) with each C ∈ {8, 16, 24, 40}; K runs through {8, 16, 40,
// 136} and N through {1, 2, 3} so that each K meets each C and each size.
// The 1×1 and 1×3 images are all border: every tap of the padded window is
// exercised at the edges.
TEST(GpuUpconv, SmallShapes) {
  HPMC_REQUIRE_GPU();
  const int hw[][2] = {{1, 1}, {1, 3}, {3, 5}, {5, 3}, {7, 7}, {8, 8}, {9, 4}};
  const int Cs[] = {8, 16, 24, 40}, Ks[] = {8, 16, 40, 136}, Ns[] = {1, 2, 3};
  uint64_t seed = 100;
  for (int j = 0; j < 7; ++j)
    for (int c = 0; c < 4; ++c)
      check_upconv({Ns[(j + 2 * c) % 3], Cs[c], hw[j][0], hw[j][1], Ks[(j + c) % 4]}, seed++);
}

// The thin fold (K ≤ 4, any C; its own kernels), with a 3×3 and with a 5×5
// filter: every K from 1 to 4 with odd and small channel counts, batch 1,
// every low-resolution size of SmallShapes (odd widths: a row's last pair
// holds one pixel; 1×1 and 1×3: every tap of a 5×5 parity's window at a
// border); a channel count past one backward-data block (70 > 32) and not a
// multiple of the forward's 8 warps (nor of the 5×5 forward's 8-channel
// staging rounds); weight gradients of several slices (4 for 8×20×16×16; 3
// for 9×9×13×11, whose odd rows leave a last band of one row); and the
// autoencoders' last layer (up2 256×16×16 → 32×32, conv 256 → 3: the CIFAR
// one's 3×3 and the 5×5 sweep model's) at batch 2, whose forward warps stage
// their 32 channels in two (3×3) or four (5×5) rounds.
TEST(GpuUpconv, ThinShapes) {
  HPMC_REQUIRE_GPU();
  const int hw[][2] = {{1, 1}, {1, 3}, {3, 5}, {5, 3}, {7, 7}, {8, 8}, {9, 4}};
  const int Cs[] = {1, 3, 5, 8}, Ks[] = {1, 2, 3, 4}, Ns[] = {1, 2, 3};
  uint64_t seed = 150;
  for (int R : {3, 5}) {
    for (int j = 0; j < 7; ++j)
      for (int c = 0; c < 4; ++c)
        check_upconv({Ns[(j + 2 * c) % 3], Cs[c], hw[j][0], hw[j][1], Ks[(j + c) % 4], R},
                     seed++);
    check_upconv({2, 70, 5, 6, 3, R}, seed++);
    check_upconv({8, 20, 16, 16, 3, R}, seed++);
    check_upconv({9, 9, 13, 11, 2, R}, seed++);
    check_upconv({2, 256, 16, 16, 3, R}, seed++);
    check_upconv({1, 37, 6, 2, 4, R}, seed++);
  }
}

// The decoders' folded layers at batch 4: the CIFAR autoencoder's conv4 (up1
// 128×8×8 → 16×16, conv 128 → 256; configs/cifar_ae.yaml) and the Fashion
// one's (16×7×7 → 14×14, 16 → 32); a larger one with long reductions (C = 256:
// forward GEMM_K = 1024, backward_data 2048 for K = 128) at 16×16 → 32×32; and
// a large GEMM_M (N·h·w = 4096) at C = 32.
TEST(GpuUpconv, AutoencoderShapes) {
  HPMC_REQUIRE_GPU();
  check_upconv({4, 128, 8, 8, 256}, 200);
  check_upconv({4, 16, 7, 7, 32}, 201);
  check_upconv({2, 256, 16, 16, 128}, 202);
  check_upconv({4, 32, 32, 32, 64}, 203);
}

// The fold is not less accurate than the direct path: im2col (the public
// conv2d_forward / conv2d_backward_data / conv2d_backward_params; the thin
// kernels for K ≤ 4) on the explicitly upsampled input, the upsample's
// backward summed on the host in FP32 as the GPU layer sums it. For forward,
// backward_data and dw: the fold's RMS error against the double reference ≤
// 2 × the direct path's + 2^-40·max Σ|terms| (a floor far below one rounding,
// for exact outputs). The error of an FP32 chain of L terms of size σ is
// ∝ L·σ (summed over s split slices: L·σ/sqrt(s)); the fold's chains are 4/9
// as long with terms of σ·1.5 (summed weights), so the expected ratio is
// ≈ 0.67·sqrt(s_direct / s_fold) for forward, ≈ 1.33·sqrt(…) for
// backward_data (16·K terms in one chain against four chains of 9·K and their
// sum), ≈ 0.5·sqrt(…) for dw; with the shapes' plans (implicit_plan.h) at
// most ≈ 1.33. RMS, not the max: over a few thousand outputs the ratio of the
// max errors scatters widely (in an FP32 emulation of a correct fold, the
// backward_data max ratio exceeded 2 for 17% of shapes × seeds, and reached
// 3.1, while the RMS ratio stayed within 1.1 … 1.5). db (K values) is printed
// only. The figures (max and RMS, fold and direct) are printed and recorded
// as test properties. A 5×5 filter's thin fold: chains of 9/25 the length
// with summed weights of σ·1.67 (forward ≈ 0.6·sqrt(…)); backward_data 36·K
// terms in one chain against four chains of 25·K (≈ 1.2·sqrt(…)).
TEST(GpuUpconv, AccuracyNotWorseThanDirect) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 300;
  for (const UpCase& uc : std::vector<UpCase>{
           {4, 128, 8, 8, 256}, {4, 16, 7, 7, 32}, {2, 40, 9, 4, 40}, {3, 8, 5, 3, 16},
           {2, 256, 16, 16, 3}, {3, 5, 5, 3, 2},  // the thin fold, 3×3 and 5×5
           {2, 256, 16, 16, 3, 5}, {3, 5, 5, 3, 2, 5}, {2, 9, 7, 6, 4, 5}}) {
    SCOPED_TRACE(describe(uc));
    const Fixture f(uc, seed++);
    const Conv2dShape& s = f.s;
    auto x_in = input(f.x), up_in = input(f.up), w_in = input(f.w), b_in = input(f.b),
         dy_in = input(f.dy);

    // fold
    auto y_fold = output(f.dy.size()), dx_fold = output(f.x.size());
    DevArray dw_fold(f.w.size()), db_fold(f.b.size());
    dw_fold.upload(std::vector<float>(f.w.size(), 0.0f), kGuard);
    db_fold.upload(std::vector<float>(f.b.size(), 0.0f), kGuard);
    imp::upconv_forward(s, x_in->ptr(), w_in->ptr(), b_in->ptr(), y_fold->ptr(), Activation::none());
    imp::upconv_backward_data(s, dy_in->ptr(), w_in->ptr(), nullptr, dx_fold->ptr());
    imp::upconv_backward_params(s, x_in->ptr(), dy_in->ptr(), dw_fold.ptr(), db_fold.ptr());
    finish("upconv (accuracy)");

    // direct: im2col on up
    auto y_dir = output(f.dy.size()), dxu_dir = output(f.up.size());
    DevArray dw_dir(f.w.size()), db_dir(f.b.size());
    dw_dir.upload(std::vector<float>(f.w.size(), 0.0f), kGuard);
    db_dir.upload(std::vector<float>(f.b.size(), 0.0f), kGuard);
    imp::conv2d_forward(s, up_in->ptr(), w_in->ptr(), b_in->ptr(), y_dir->ptr());
    imp::conv2d_backward_data(s, dy_in->ptr(), w_in->ptr(), dxu_dir->ptr());
    imp::conv2d_backward_params(s, up_in->ptr(), dy_in->ptr(), dw_dir.ptr(), db_dir.ptr());
    finish("im2col on the upsampled input (accuracy)");
    const std::vector<float> dxu = dxu_dir->payload();
    std::vector<float> dx_dir(f.x.size());
    for (int p = 0; p < s.N * s.C; ++p)
      for (int i = 0; i < uc.h; ++i)
        for (int j = 0; j < uc.w; ++j) {
          float sum = 0.0f;
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) sum += dxu[(size_t(p) * s.H + 2 * i + a) * s.W + 2 * j + b];
          dx_dir[(size_t(p) * uc.h + i) * uc.w + j] = sum;
        }

    struct Out {
      const char* name;
      std::vector<float> fold, direct;
      Ref ref;
    };
    const Out outs[] = {
        {"forward", y_fold->payload(), y_dir->payload(), with_bias(s, f.y, f.b)},
        {"backward_data", dx_fold->payload(), dx_dir, f.dx},
        {"dw", dw_fold.payload(), dw_dir.payload(), f.dw},
        {"db", db_fold.payload(), db_dir.payload(), f.db},
    };
    std::ostringstream line;
    line << std::scientific << std::setprecision(2) << "  upconv accuracy, " << describe(uc)
         << ":";
    for (const Out& o : outs) {
      SCOPED_TRACE(o.name);
      ASSERT_EQ(o.fold.size(), o.ref.v.size());
      ASSERT_EQ(o.direct.size(), o.ref.v.size());
      double max_fold = 0, max_dir = 0, ss_fold = 0, ss_dir = 0, mag = 0;
      for (size_t i = 0; i < o.ref.v.size(); ++i) {
        ASSERT_TRUE(std::isfinite(o.fold[i]) && std::isfinite(o.direct[i])) << "element " << i;
        const double ef = std::fabs(double(o.fold[i]) - o.ref.v[i]);
        const double ed = std::fabs(double(o.direct[i]) - o.ref.v[i]);
        max_fold = std::max(max_fold, ef);
        max_dir = std::max(max_dir, ed);
        ss_fold += ef * ef;
        ss_dir += ed * ed;
        mag = std::max(mag, o.ref.mag[i]);
      }
      const double n = double(std::max<size_t>(o.ref.v.size(), 1));
      const double rms_fold = std::sqrt(ss_fold / n), rms_dir = std::sqrt(ss_dir / n);
      const double floor = std::ldexp(mag, -40);
      if (std::strcmp(o.name, "db") != 0)
        EXPECT_LE(rms_fold, 2 * rms_dir + floor)
            << o.name << ": fold RMS error " << rms_fold << ", direct " << rms_dir << " (max "
            << max_fold << ", " << max_dir << "), floor " << floor;
      std::ostringstream figures;
      figures << std::scientific << std::setprecision(2) << "RMS fold " << rms_fold << " direct "
              << rms_dir << " (×" << std::fixed << (rms_dir > 0 ? rms_fold / rms_dir : 0.0)
              << std::scientific << "), max fold " << max_fold << " direct " << max_dir << " (×"
              << std::fixed << (max_dir > 0 ? max_fold / max_dir : 0.0) << ")";
      line << " " << o.name << " " << figures.str() << ";";
      ::testing::Test::RecordProperty(
          str("N", uc.N, "_C", uc.C, "_", uc.h, "x", uc.w, "_K", uc.K, "_R", uc.R, "_", o.name),
          figures.str());
    }
    std::cout << line.str() << std::endl;
    EXPECT_TRUE(dw_fold.guards_intact(kGuard));
    EXPECT_TRUE(db_fold.guards_intact(kGuard));
  }
}

// Two runs of every pass on the same inputs give the same bits (whatever split
// plan_upconv chose; the forward with and without the fused ReLU, backward_data
// with the mask, dw and db).
TEST(GpuUpconv, Deterministic) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 400;
  for (const UpCase& uc : std::vector<UpCase>{
           {4, 128, 8, 8, 256}, {2, 256, 16, 16, 128}, {3, 24, 9, 4, 40}, {1, 8, 1, 1, 8},
           {2, 256, 16, 16, 3}, {1, 5, 3, 5, 1}, {2, 256, 16, 16, 3, 5}, {1, 5, 3, 5, 4, 5}}) {
    const Conv2dShape s = uc.shape();
    SCOPED_TRACE(describe(uc));
    Rng rng(seed++);
    const std::vector<float> x = random_floats(uc.low_count(), rng);
    const std::vector<float> w = random_floats(s.weight_count(), rng);
    const std::vector<float> b = random_floats(size_t(s.K), rng);
    const std::vector<float> dy = random_floats(size_t(s.N) * s.out_sample(), rng);
    const std::vector<float> dw0 = random_floats(s.weight_count(), rng);
    const std::vector<float> mask = random_mask(x.size(), rng);
    auto x_in = input(x), w_in = input(w), b_in = input(b), dy_in = input(dy), m_in = input(mask);
    std::vector<float> runs[2][5];
    for (int run = 0; run < 2; ++run) {
      auto y = output(dy.size()), yr = output(dy.size()), dx = output(x.size());
      DevArray dw(w.size()), db(b.size());
      dw.upload(dw0, kGuard);
      db.upload(b, kGuard);
      imp::upconv_forward(s, x_in->ptr(), w_in->ptr(), b_in->ptr(), y->ptr(), Activation::none());
      imp::upconv_forward(s, x_in->ptr(), w_in->ptr(), b_in->ptr(), yr->ptr(), Activation::relu());
      imp::upconv_backward_data(s, dy_in->ptr(), w_in->ptr(), m_in->ptr(), dx->ptr());
      imp::upconv_backward_params(s, x_in->ptr(), dy_in->ptr(), dw.ptr(), db.ptr());
      finish("upconv (determinism)");
      runs[run][0] = y->payload();
      runs[run][1] = yr->payload();
      runs[run][2] = dx->payload();
      runs[run][3] = dw.payload();
      runs[run][4] = db.payload();
    }
    const char* names[5] = {"forward", "forward with the fused ReLU", "backward_data", "dw", "db"};
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(runs[0][i].size(), runs[1][i].size());
      EXPECT_EQ(0, std::memcmp(runs[0][i].data(), runs[1][i].data(), runs[0][i].size() * 4))
          << names[i] << " differs between two runs";
    }
  }
}

// y and dx_low start as NaN and as +inf and come back finite and right (an
// output a slice or a parity fails to write keeps the poison); guards survive.
TEST(GpuUpconv, PoisonedOutputsFullyOverwritten) {
  HPMC_REQUIRE_GPU();
  for (float poison : {kNaN, std::numeric_limits<float>::infinity()}) {
    uint64_t seed = 500;
    for (const UpCase& uc :
         std::vector<UpCase>{{2, 16, 5, 3, 24}, {1, 8, 1, 3, 136}, {2, 70, 5, 3, 3},
                             {2, 70, 5, 3, 3, 5}}) {
      SCOPED_TRACE(describe(uc) + " poison=" + std::to_string(poison));
      const Fixture f(uc, seed++);
      auto x_in = input(f.x), w_in = input(f.w), b_in = input(f.b), dy_in = input(f.dy),
           m_in = input(f.mask);
      auto y = output(f.dy.size(), poison), dx = output(f.x.size(), poison),
           dxm = output(f.x.size(), poison);
      imp::upconv_forward(f.s, x_in->ptr(), w_in->ptr(), b_in->ptr(), y->ptr(), Activation::relu());
      imp::upconv_backward_data(f.s, dy_in->ptr(), w_in->ptr(), nullptr, dx->ptr());
      imp::upconv_backward_data(f.s, dy_in->ptr(), w_in->ptr(), m_in->ptr(), dxm->ptr());
      finish("upconv (poison)");
      EXPECT_TRUE(matches(y->payload(), with_relu(with_bias(f.s, f.y, f.b)), f.ydims));
      EXPECT_TRUE(matches(dx->payload(), f.dx, f.xdims));
      EXPECT_TRUE(matches(dxm->payload(), with_mask(f.dx, f.mask), f.xdims));
      EXPECT_TRUE(y->guards_intact(kGuard));
      EXPECT_TRUE(dx->guards_intact(kGuard));
      EXPECT_TRUE(dxm->guards_intact(kGuard));
    }
  }
}

// backward_params adds: two calls on the same dw, db give dw0 + 2·Δ, db0 + 2·Δb
// (a split or not); with db null, dw alone.
TEST(GpuUpconv, BackwardParamsAccumulates) {
  HPMC_REQUIRE_GPU();
  uint64_t seed = 600;
  for (const UpCase& uc : std::vector<UpCase>{{1, 8, 1, 1, 8}, {2, 16, 5, 3, 24},
                                              {4, 128, 8, 8, 256}, {3, 7, 4, 5, 4},
                                              {3, 7, 4, 5, 4, 5}}) {
    SCOPED_TRACE(describe(uc));
    const Fixture f(uc, seed++);
    auto x_in = input(f.x), dy_in = input(f.dy);
    DevArray dw(f.w.size()), db(f.b.size()), dw2(f.w.size());
    dw.upload(f.dw0, kGuard);
    db.upload(f.db0, kGuard);
    dw2.upload(f.dw0, kGuard);
    for (int rep = 0; rep < 2; ++rep) {
      imp::upconv_backward_params(f.s, x_in->ptr(), dy_in->ptr(), dw.ptr(), db.ptr());
      imp::upconv_backward_params(f.s, x_in->ptr(), dy_in->ptr(), dw2.ptr(), nullptr);
    }
    finish("upconv_backward_params (accumulate)");
    const Ref want_dw = accumulated(f.dw0, f.dw, 2.0);
    EXPECT_TRUE(matches(dw.payload(), want_dw, f.wdims));
    EXPECT_TRUE(matches(db.payload(), accumulated(f.db0, f.db, 2.0), f.bdims));
    EXPECT_TRUE(matches(dw2.payload(), want_dw, f.wdims)) << "db null";
    EXPECT_TRUE(dw.guards_intact(kGuard));
    EXPECT_TRUE(db.guards_intact(kGuard));
    EXPECT_TRUE(dw2.guards_intact(kGuard));
  }
}

// ---- the planned variants (implicit_conv.h) --------------------------------------------------
//
// Each pass of each shape under every tile configuration of both engines and
// splits {1, 2, 3, 7} (rounded by make_upconv_plan so that no slice is empty:
// the forced plan must be valid, keep its tile and not split more than asked).
// Forward with bias, plain and with the fused ReLU; backward_data without and
// with the mask; the weight gradient onto random dw0. Shapes: one image of 1×1
// (GEMM_M = 1 per parity, one weight-gradient k-tile); 2×16×5×3 → K = 24
// (M = 30, 8 / 48 / 4 k-tiles); 3×40×9×10 → K = 136 (M = 270: a partial
// 256-row tile; K = 136: two 128-wide column tiles; 20 / 272 / 34 k-tiles).

void check_planned_upconv(const UpCase& uc, uint64_t seed) {
  using det::ConvPass;
  using det::Tile;
  SCOPED_TRACE(describe(uc) + " seed=" + std::to_string(seed));
  const Fixture f(uc, seed);
  const Conv2dShape& s = f.s;
  ASSERT_TRUE(imp::upconv_applies(s));
  auto x_in = input(f.x), w_in = input(f.w), b_in = input(f.b), dy_in = input(f.dy),
       m_in = input(f.mask);
  const Ref want_y = with_bias(s, f.y, f.b), want_yr = with_relu(want_y);
  const Ref want_dxm = with_mask(f.dx, f.mask);
  Rng srng(seed + 1);
  const std::vector<float> slopes = random_floats(size_t(s.K), srng);  // prelu's, per channel
  auto slopes_in = input(slopes);
  const Ref want_dw = accumulated(f.dw0, f.dw);

  const Tile all_tiles[] = {Tile::kL,  Tile::kM,  Tile::kS,  Tile::kThinN, Tile::kThinM,
                            Tile::kWL, Tile::kWQ, Tile::kWN, Tile::kWM};
  const char* tile_names[] = {"L", "M", "S", "ThinN", "ThinM", "WL", "WQ", "WN", "WM"};
  int skipped = 0;
  for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kWeightGrad}) {
    const int kt = det::upconv_ktiles(s, pass);
    ASSERT_GE(kt, 1) << "pass " << int(pass);
    EXPECT_TRUE(plan_valid(det::plan_upconv(s, pass), kt)) << "plan_upconv, pass " << int(pass);
    for (int t = 0; t < 9; ++t)
      for (int splits : {1, 2, 3, 7}) {
        det::ConvPlan p;
        try {
          p = det::make_upconv_plan(s, pass, all_tiles[t], splits);
        } catch (const std::exception& e) {
          ++skipped;
          std::cout << "  make_upconv_plan(" << describe(uc) << ", pass " << int(pass) << ", tile "
                    << tile_names[t] << ", splits " << splits << ") threw: " << e.what()
                    << std::endl;
          continue;
        }
        SCOPED_TRACE(str("pass ", int(pass), " tile ", tile_names[t], " splits ", splits, " -> ",
                         p.splits, " tps ", p.tps));
        EXPECT_TRUE(plan_valid(p, kt));
        EXPECT_EQ(int(p.tile), int(all_tiles[t]));
        EXPECT_LE(p.splits, splits);
        if (pass == ConvPass::kForward) {
          auto y = output(f.dy.size()), yr = output(f.dy.size());
          det::upconv_forward_planned(s, p, x_in->ptr(), w_in->ptr(), b_in->ptr(), y->ptr(),
                                      Activation::none());
          det::upconv_forward_planned(s, p, x_in->ptr(), w_in->ptr(), b_in->ptr(), yr->ptr(),
                                      Activation::relu());
          finish("upconv_forward_planned");
          const std::vector<float> got = y->payload(), got_r = yr->payload();
          EXPECT_TRUE(matches(got, want_y, f.ydims));
          EXPECT_TRUE(matches(got_r, want_yr, f.ydims)) << "fused ReLU";
          EXPECT_TRUE(relu_of(got, got_r)) << "fused ReLU";
          EXPECT_TRUE(y->guards_intact(kGuard));
          EXPECT_TRUE(yr->guards_intact(kGuard)) << "fused ReLU";
          // every other epilogue activation (the epilogue, or the split sum's)
          for (const Activation& act : epilogue_activations(slopes_in->ptr())) {
            SCOPED_TRACE("epilogue " + act_name(act));
            auto ya = output(f.dy.size());
            det::upconv_forward_planned(s, p, x_in->ptr(), w_in->ptr(), b_in->ptr(), ya->ptr(),
                                        act);
            finish("upconv_forward_planned with an activation");
            EXPECT_TRUE(act_of(got, ya->payload(), act, slopes, size_t(s.P) * s.Q, size_t(s.K)));
            EXPECT_TRUE(ya->guards_intact(kGuard));
          }
        } else if (pass == ConvPass::kBackwardData) {
          auto dx = output(f.x.size()), dxm = output(f.x.size());
          det::upconv_backward_data_planned(s, p, dy_in->ptr(), w_in->ptr(), nullptr, dx->ptr());
          det::upconv_backward_data_planned(s, p, dy_in->ptr(), w_in->ptr(), m_in->ptr(),
                                            dxm->ptr());
          finish("upconv_backward_data_planned");
          const std::vector<float> got = dx->payload(), got_m = dxm->payload();
          EXPECT_TRUE(matches(got, f.dx, f.xdims));
          EXPECT_TRUE(matches(got_m, want_dxm, f.xdims)) << "mask";
          EXPECT_TRUE(mask_of(got, got_m, f.mask)) << "mask";
          EXPECT_TRUE(dx->guards_intact(kGuard));
          EXPECT_TRUE(dxm->guards_intact(kGuard)) << "mask";
        } else {
          DevArray dw(f.w.size());
          dw.upload(f.dw0, kGuard);
          det::upconv_weight_grad_planned(s, p, x_in->ptr(), dy_in->ptr(), dw.ptr());
          finish("upconv_weight_grad_planned");
          EXPECT_TRUE(matches(dw.payload(), want_dw, f.wdims));
          EXPECT_TRUE(dw.guards_intact(kGuard));
        }
      }
  }
  if (skipped > 0) {
    std::cout << "  " << describe(uc) << ": " << skipped << " forced plans refused" << std::endl;
    ::testing::Test::RecordProperty(str("refused_plans_", uc.N, "_", uc.C, "_", uc.h, "x", uc.w,
                                        "_", uc.K),
                                    skipped);
  }
}

TEST(GpuUpconvPlanned, EveryTileAndSplit) {
  HPMC_REQUIRE_GPU();
  check_planned_upconv({1, 8, 1, 1, 8}, 700);
  check_planned_upconv({2, 16, 5, 3, 24}, 701);
  check_planned_upconv({3, 40, 9, 10, 136}, 702);
}

// plan_upconv's choice is a valid cover of the k-tiles for every pass, at the
// batch sizes training runs (the tests above run plans only at small batches):
// the autoencoders' folded layers at batch 1 … 256 and odd shapes.
TEST(GpuUpconvPlanned, DefaultPlansAreValid) {
  HPMC_REQUIRE_GPU();
  using det::ConvPass;
  for (int N : {1, 2, 4, 64, 128, 256})
    for (const UpCase& base : std::vector<UpCase>{
             {1, 128, 8, 8, 256}, {1, 16, 7, 7, 32}, {1, 256, 16, 16, 128}, {1, 8, 1, 1, 8},
             {1, 40, 9, 4, 136}, {1, 512, 4, 4, 512}, {1, 8, 64, 64, 16}}) {
      UpCase uc = base;
      uc.N = N;
      const Conv2dShape s = uc.shape();
      SCOPED_TRACE(describe(uc));
      ASSERT_TRUE(imp::upconv_applies(s));
      for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kWeightGrad})
        EXPECT_TRUE(plan_valid(det::plan_upconv(s, pass), det::upconv_ktiles(s, pass)))
            << "pass " << int(pass);
    }
}

// bf16's channels-last fold (implicit_upconv_nhwc_kernels.cuh), on ldmatrix
// and mma.sync and (where it runs) on wgmma, against the
// FP32-stage engine's bf16 fold on the same plan: the same bits where the
// slices agree (one slice, or tps % 4 == 0; in the weight gradient, with the
// low-resolution pixels in whole 16s), and against the double reference on
// bf16-rounded x and dy: the weight gradient within 1e-5·Σ|terms| (its
// products are exact in FP32), the forward and backward_data within
// 2^-8·Σ|terms| (their summed filters are rounded to bf16, by at most 2^-9
// of Σ|w| each; a wrong tap or parity errs by O(1) of it). Forward with bias,
// plain, fused ReLU (the ReLU of the plain output, bit for bit) and tanh, the
// split sums; backward_data without and with the mask; dw onto dw0. Shapes:
// batch 1 on a 1×1 map, odd and rectangular maps, partial 128-row and
// -column tiles (K = 96, 160), C = 32 and K = 40 (passes that do not apply
// are refused), the CIFAR autoencoder's conv4. plan_upconv takes the kernel
// in bf16 exactly where it applies; the planned functions refuse an nhwc
// plan outside bf16.
TEST(GpuUpconvPlanned, ChannelsLastFoldMatchesTheEngine) {
  HPMC_REQUIRE_GPU();
  using det::ConvPass;
  using det::Tile;
  const ScopedPrecision bf16(Precision::kBf16);
  const auto rounded = [](std::vector<float> v) {
    for (float& e : v) e = round_operand(Precision::kBf16, e);
    return v;
  };
  const UpCase cases[] = {{1, 32, 1, 1, 32},  {2, 128, 5, 3, 96}, {3, 32, 7, 9, 160},
                          {1, 256, 3, 5, 40}, {2, 128, 8, 8, 256}};
  uint64_t seed = 7600;
  int same_bits_runs = 0;
  for (const int wg : {0, 1}) {  // ldmatrix and mma.sync, then wgmma where it runs
    const det::ScopedNhwcWgmma loop(wg);
    if (wg && !det::nhwc_wgmma()) {
      std::printf("  wgmma main loop: not run here (needs sm_90a code on a 9.0 device)\n");
      continue;
    }
    SCOPED_TRACE(wg ? "wgmma" : "mma.sync");
    for (const UpCase& uc : cases) {
      SCOPED_TRACE(describe(uc));
      const Fixture f(uc, seed++);
      const Conv2dShape& s = f.s;
      const std::vector<float> xr = rounded(f.x), dyr = rounded(f.dy);
      const std::vector<float> upr = upsample(xr, uc.N, uc.C, uc.h, uc.w);
      const Ref want_y = with_bias(s, ref_forward(s, upr, f.w), f.b);
      const Ref want_dx = ref_backward_data(s, dyr, f.w);
      const Ref want_dw = accumulated(f.dw0, ref_weight_grad(s, upr, dyr));
      auto x_in = input(f.x), w_in = input(f.w), b_in = input(f.b), dy_in = input(f.dy),
           m_in = input(f.mask);
      constexpr double kFolded = 1.0 / 256;  // 2^-8
      for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kWeightGrad}) {
        SCOPED_TRACE(str("pass ", int(pass)));
        const bool applies = pass == ConvPass::kForward       ? det::upconv_nhwc_forward(s)
                             : pass == ConvPass::kBackwardData ? det::upconv_nhwc_backward_data(s)
                                                               : det::upconv_nhwc_weight_grad(s);
        EXPECT_EQ(det::plan_upconv(s, pass).nhwc, applies);
        {
          const ScopedPrecision fp32(Precision::kFp32);
          EXPECT_FALSE(det::plan_upconv(s, pass).nhwc);
        }
        if (!applies) {
          EXPECT_THROW(det::make_upconv_plan(s, pass, Tile::kL, 1, true), RuntimeError);
          continue;
        }
        for (int splits : {1, 2, 3, 7}) {
          const det::ConvPlan p0 = det::make_upconv_plan(s, pass, Tile::kL, splits);
          const det::ConvPlan p1 = det::make_upconv_plan(s, pass, Tile::kL, splits, true);
          SCOPED_TRACE(str("splits ", p1.splits, " tps ", p1.tps));
          const bool same_slices = p1.splits == 1 || p1.tps % 4 == 0;
          if (pass == ConvPass::kForward) {
            for (const Activation& act :
                 {Activation::none(), Activation::relu(), Activation::tanh()}) {
              SCOPED_TRACE(act_name(act));
              auto y0 = output(f.dy.size()), y1 = output(f.dy.size());
              det::upconv_forward_planned(s, p0, x_in->ptr(), w_in->ptr(), b_in->ptr(), y0->ptr(),
                                          act);
              det::upconv_forward_planned(s, p1, x_in->ptr(), w_in->ptr(), b_in->ptr(), y1->ptr(),
                                          act);
              finish("channels-last fold forward");
              const std::vector<float> got = y1->payload(), eng = y0->payload();
              EXPECT_TRUE(y1->guards_intact(kGuard));
              if (act.is_none()) EXPECT_TRUE(matches(got, want_y, f.ydims, kFolded));
              if (act.kind == ActKind::kRelu) {
                auto plain = output(f.dy.size());
                det::upconv_forward_planned(s, p1, x_in->ptr(), w_in->ptr(), b_in->ptr(),
                                            plain->ptr(), Activation::none());
                finish("channels-last fold forward, no activation");
                EXPECT_TRUE(relu_of(plain->payload(), got));
              }
              if (same_slices) {
                EXPECT_EQ(0, std::memcmp(got.data(), eng.data(), got.size() * 4))
                    << "not the engine's bits";
                ++same_bits_runs;
              }
            }
          } else if (pass == ConvPass::kBackwardData) {
            for (bool masked : {false, true}) {
              SCOPED_TRACE(masked ? "mask" : "no mask");
              const float* mask = masked ? m_in->ptr() : nullptr;
              auto d0 = output(f.x.size()), d1 = output(f.x.size());
              det::upconv_backward_data_planned(s, p0, dy_in->ptr(), w_in->ptr(), mask, d0->ptr());
              det::upconv_backward_data_planned(s, p1, dy_in->ptr(), w_in->ptr(), mask, d1->ptr());
              finish("channels-last fold backward_data");
              const std::vector<float> got = d1->payload(), eng = d0->payload();
              EXPECT_TRUE(d1->guards_intact(kGuard));
              EXPECT_TRUE(matches(got, masked ? with_mask(want_dx, f.mask) : want_dx, f.xdims,
                                  kFolded));
              if (same_slices) {
                EXPECT_EQ(0, std::memcmp(got.data(), eng.data(), got.size() * 4))
                    << "not the engine's bits";
                ++same_bits_runs;
              }
            }
          } else {
            DevArray d0(f.w.size()), d1(f.w.size());
            d0.upload(f.dw0, kGuard);
            d1.upload(f.dw0, kGuard);
            det::upconv_weight_grad_planned(s, p0, x_in->ptr(), dy_in->ptr(), d0.ptr());
            det::upconv_weight_grad_planned(s, p1, x_in->ptr(), dy_in->ptr(), d1.ptr());
            finish("channels-last fold weight gradient");
            const std::vector<float> got = d1.payload(), eng = d0.payload();
            EXPECT_TRUE(d1.guards_intact(kGuard));
            EXPECT_TRUE(matches(got, want_dw, f.wdims));
            if (same_slices && (long long)uc.N * uc.h * uc.w % 16 == 0) {
              EXPECT_EQ(0, std::memcmp(got.data(), eng.data(), got.size() * 4))
                  << "not the engine's bits";
              ++same_bits_runs;
            }
          }
        }
        // Refused outside bf16, with one line.
        const det::ConvPlan p1 = det::make_upconv_plan(s, pass, Tile::kL, 1, true);
        const ScopedPrecision fp32(Precision::kFp32);
        auto o = output(std::max(f.dy.size(), f.x.size()));
        DevArray dw(f.w.size());
        try {
          if (pass == ConvPass::kForward)
            det::upconv_forward_planned(s, p1, x_in->ptr(), w_in->ptr(), b_in->ptr(), o->ptr(),
                                        Activation::none());
          else if (pass == ConvPass::kBackwardData)
            det::upconv_backward_data_planned(s, p1, dy_in->ptr(), w_in->ptr(), nullptr, o->ptr());
          else
            det::upconv_weight_grad_planned(s, p1, x_in->ptr(), dy_in->ptr(), dw.ptr());
          ADD_FAILURE() << "an nhwc plan ran in fp32";
        } catch (const RuntimeError& e) {
          EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
        }
      }
    }
  }
  EXPECT_GE(same_bits_runs, 20);
}

}  // namespace
}  // namespace hpmc
