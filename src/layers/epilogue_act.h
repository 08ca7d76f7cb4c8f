// epilogue_act.h — an element-wise activation as a descriptor (kind and
// parameter), for a kernel that applies it to each value it writes: the
// epilogue of the im2col convolution and of the upsample fold
// (layers/gpu/conv2d_kernels.h), run by a fused layer (layers/fused_spec.h)
// in place of the activation layer after the convolution. Plain C++: the
// rewrite pass (model/gpu_rewrite.h) builds descriptors on any machine.
//
// The functions, with v the value before the activation and c its channel
// (the formulas of the activation layers, the same float operations in the
// same order, so that an epilogue gives the layer's bits where the layer runs
// the same operations):
//   none        v
//   relu        v < 0 ? 0 : v                  (NaN passes)
//   leaky_relu  v > 0 ? v : v · slope
//   prelu       v > 0 ? v : v · slopes[c]      (one slope per output channel)
//   sigmoid     z = exp(−|v|), v ≥ 0 ? 1 / (1 + z) : z / (1 + z)
//   tanh        tanh(v)
#pragma once

#include <string>

namespace hpmc {

enum class ActKind { kNone, kRelu, kLeakyRelu, kPrelu, kSigmoid, kTanh };

struct Activation {
  ActKind kind = ActKind::kNone;
  float slope = 0;                // leaky_relu
  const float* slopes = nullptr;  // prelu: one per output channel, in the kernel's memory

  static Activation none() { return {}; }
  static Activation relu() { return {ActKind::kRelu, 0, nullptr}; }
  static Activation leaky_relu(float slope) { return {ActKind::kLeakyRelu, slope, nullptr}; }
  static Activation prelu(const float* slopes) { return {ActKind::kPrelu, 0, slopes}; }
  static Activation sigmoid() { return {ActKind::kSigmoid, 0, nullptr}; }
  static Activation tanh() { return {ActKind::kTanh, 0, nullptr}; }

  bool is_none() const { return kind == ActKind::kNone; }
  // The two kinds the convolution kernels had before any other (none, relu):
  // they run the kernels' original epilogue; the others an instantiation of
  // their own (conv2d_implicit_gemm.cu), so the common path's code is as it was.
  bool is_plain() const { return kind == ActKind::kNone || kind == ActKind::kRelu; }
};

// "relu", "leaky_relu(0.01)", "prelu", "sigmoid", "tanh", "" for none: the
// activation layer's type, as the layer table shows it inside a fused layer.
std::string activation_text(const Activation& a);

}  // namespace hpmc
