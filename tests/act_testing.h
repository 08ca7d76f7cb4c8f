// act_testing.h — the epilogue activations (layers/epilogue_act.h) for the
// kernel tests (test_gpu_implicit.cpp, test_gpu_upconv.cpp): every kind, a
// host reference in float with the layers' operations, and a check that a
// kernel's output is the activation of the same kernel's plain output.
//
// Tolerance: relu, leaky_relu and prelu are a compare and at most one
// multiply, so the GPU's result is the host's bit for bit; sigmoid and tanh
// call CUDA's expf / tanhf (≤ 2 ulp from the exact value) where the host calls
// glibc's (≤ 1 ulp), and sigmoid adds a divide after the exp: the two agree to
// 4 ulp (a wrong formula, a wrong channel's slope or a missed element is off
// by far more).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "layers/epilogue_act.h"
#include "testing.h"  // ulp_distance

namespace hpmc::testing {

// Every activation an epilogue takes except none; prelu reads `prelu_slopes`
// (device memory, one slope per output channel).
inline std::vector<Activation> epilogue_activations(const float* prelu_slopes) {
  return {Activation::relu(),    Activation::leaky_relu(0.01f), Activation::leaky_relu(0.25f),
          Activation::prelu(prelu_slopes), Activation::sigmoid(), Activation::tanh()};
}

inline std::string act_name(const Activation& a) {
  return a.is_none() ? std::string("none") : activation_text(a);
}

// The activation of v on the host; prelu_slope is the element's channel's slope.
inline float act_ref(const Activation& a, float v, float prelu_slope) {
  switch (a.kind) {
    case ActKind::kNone: return v;
    case ActKind::kRelu: return v < 0.0f ? 0.0f : v;
    case ActKind::kLeakyRelu: return v > 0.0f ? v : v * a.slope;
    case ActKind::kPrelu: return v > 0.0f ? v : v * prelu_slope;
    case ActKind::kSigmoid: {
      const float z = std::exp(-std::fabs(v));
      return v >= 0.0f ? 1.0f / (1.0f + z) : z / (1.0f + z);
    }
    case ActKind::kTanh: return std::tanh(v);
  }
  return v;
}

// got[i] is act(plain[i]) (NCHW: element i's channel is (i / plane) mod
// channels, host_slopes its prelu slope), bit for bit or, for sigmoid and
// tanh, within 4 ulp; with `mixed`, the data must reach both sides of 0
// (else the check proves little).
inline ::testing::AssertionResult act_of(const std::vector<float>& plain,
                                         const std::vector<float>& got, const Activation& a,
                                         const std::vector<float>& host_slopes, size_t plane,
                                         size_t channels, bool mixed = true) {
  if (plain.size() != got.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << plain.size();
  const bool smooth = a.kind == ActKind::kSigmoid || a.kind == ActKind::kTanh;
  size_t positive = 0, other = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const size_t c = (i / plane) % channels;
    const float want = act_ref(a, plain[i], a.kind == ActKind::kPrelu ? host_slopes.at(c) : 0.f);
    const int64_t d = ulp_distance(got[i], want);
    const bool exact = std::memcmp(&got[i], &want, sizeof(float)) == 0;  // −0 is not +0
    if (!std::isfinite(got[i]) || (smooth ? d > 4 : !exact))
      return ::testing::AssertionFailure()
             << act_name(a) << ", element " << i << " (channel " << c << "): " << got[i]
             << ", expected " << want << " = act(" << plain[i] << "), " << d << " ulp apart";
    (plain[i] > 0.0f ? positive : other) += 1;
  }
  if (mixed && plain.size() > 8 && (positive == 0 || other == 0))
    return ::testing::AssertionFailure() << "degenerate: " << positive << " positive, " << other
                                         << " not";
  return ::testing::AssertionSuccess();
}

}  // namespace hpmc::testing
