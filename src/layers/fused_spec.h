// fused_spec.h — a fused layer: a run of consecutive config layers executed
// as one layer, with the work between neighbours merged into their kernels.
// The GPU rewrite (model/gpu_rewrite.h) makes them; FusedChainSpec is the
// device-neutral part (steps, shapes, parameters, FLOPs, describe()) and
// gpu::FusedChainGPU (layers/gpu/fused_chain.h) the passes.
//
// A fused layer is an ordinary layer: forward(x, y) computes what its config
// layers compute one after another, and backward(x, y, dy, dx) takes the
// gradient of ITS output y and gives every parameter gradient of those layers
// (accumulated) and dx (overwritten; skipped when dx is null), as the layers
// would. It is a list of steps, each one kernel group:
//
//   conv      a conv2d, optionally with the nearest ×2 upsample before it
//             folded in (`fold` = 2: the step's input is the upsample's
//             input; 3×3 pad 1 or 5×5 pad 2, stride 1) and optionally the
//             activation after it applied in its epilogue (`act`)
//   linear    a linear layer, optionally with the activation after it in
//             its epilogue (`act`); tf32 and bf16 only (the tensor-core
//             engine's epilogue: layers/gpu/linear.h)
//   maxpool   a maxpool2d
//   upsample  a nearest upsample2d
//   act       an activation layer on its own (the forward kernel)
//
// and `mask_input` on a maxpool, upsample, folded conv or linear step: its backward
// also applies the mask x > 0 of its input x to the gradient it writes, which
// is the backward of the ReLU before it (that ReLU's output is x, and
// relu(u) > 0 ⇔ u > 0). So a ReLU between two steps costs no kernel of its
// own: its forward runs in the epilogue of the conv before it, its backward in
// the step after it. An activation whose backward no step after it takes (a
// conv's epilogue at the end of the layer, or a sigmoid) runs its backward
// kernel from its output y (relu, leaky_relu with a slope ≥ 0, sigmoid and
// tanh have backwards that need only y; prelu needs its input and is not
// fused). The results are the bits of the layers run one by one, except for
// the fold, which changes them by rounding (conv2d_kernels.h, upconv_*).
//
// Parameters are the conv and linear steps' weight and bias under their own
// layer's names ("conv1.weight", with an empty param_prefix()), in step
// order, so a model's checkpoint does not depend on fusion.
#pragma once

#include <string>
#include <vector>

#include "layers/conv2d_spec.h"
#include "layers/epilogue_act.h"
#include "layers/layer.h"
#include "layers/linear_spec.h"
#include "layers/pool_spec.h"

namespace hpmc {

struct ChainStep {
  enum class Kind { kConv, kLinear, kMaxPool, kUpsample, kAct };
  Kind kind = Kind::kConv;
  // The config layers the step runs, in order ({"up1", "conv4", "relu4"}).
  std::vector<std::string> layers;
  Conv2dConfig conv;     // kConv
  LinearConfig linear;   // kLinear
  int fold = 1;          // kConv: 2 when a nearest ×2 upsample is folded in
  std::string owner;     // kConv, kLinear: the layer that owns the parameters
  Activation act;        // kConv, kLinear: the epilogue's; kAct: the activation
  PoolWindow win;        // kMaxPool
  int scale = 2;         // kUpsample
  bool mask_input = false;

  // "conv2d 3x3 s1 p1 + relu", "upsample2d x2 + conv2d 3x3 s1 p1",
  // "linear 784->128 + relu", "maxpool2d 2x2 s2".
  std::string text() const;
};

class FusedChainSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws RuntimeError for steps that do not make a fused layer (see
  // check_steps in fused_spec.cpp: a mask on a step that cannot apply it or
  // without a ReLU before it, a fold other than a 3×3 pad-1 or 5×5 pad-2
  // stride-1 conv's, a prelu, an activation step whose backward no step
  // takes ...). The name is the config layers' names joined by '+'.
  explicit FusedChainSpec(std::vector<ChainStep> steps);

  const LayerSchema& schema() const override { return static_schema(); }
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  // "conv1.weight", "conv1.bias", ...: the names carry the layers'.
  std::vector<ParamSpec> param_specs() const override;
  std::string param_prefix() const override { return ""; }
  // The conv and linear steps' multiply-adds, a folded conv's 4/9 (5×5: 9/25)
  // of the unfolded convolution's (what runs, conv2d_kernels.h); the first
  // step that writes an input gradient counts one only when input_grad.
  double forward_flops(const Shape& in) const override;
  double backward_flops(const Shape& in, bool input_grad) const override;

  const std::vector<ChainStep>& steps() const { return steps_; }
  // The config layers, in order.
  std::vector<std::string> layer_names() const;
  // Step i's input shape for the layer's input `in` (n carried through; a
  // folded conv's input is the low resolution).
  Shape step_input(size_t i, const Shape& in) const;
  // Whether conv or linear step i's activation has its backward run in step
  // i's own backward (from its output), rather than as the mask of step i + 1.
  bool act_backward_here(size_t i) const;
  // Whether step i is an activation step whose backward step i + 1 runs.
  bool absorbed(size_t i) const;
  // The boundary whose gradient step i's backward writes: step b's input
  // gradient, b = i, or i − 1 after an absorbed activation step; 0 is the
  // layer's dx.
  size_t grad_target(size_t i) const;

 protected:
  std::vector<ChainStep> steps_;
};

// The output of one step for its input (n carried through).
Shape chain_step_output(const ChainStep& s, const Shape& in);

}  // namespace hpmc
