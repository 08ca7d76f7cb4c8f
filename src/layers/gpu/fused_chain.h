// fused_chain.h — the GPU passes of a fused layer (layers/fused_spec.h: the
// steps, their shapes and the rules). No CUDA types.
//
// forward   step by step, each writing the next one's input (the last y):
//             conv      implicit::conv2d_forward_act, or implicit::upconv_forward
//                       when the upsample before it is folded in, with the
//                       step's activation in the epilogue
//             linear    LinearProducts::forward with the step's activation
//                       (the tensor-core engine's epilogue: linear.h)
//             maxpool   maxpool2d_forward        upsample  upsample2d_forward
//             a first layer's conv (3×3 of 1–4 channels) and the 2×2 pool
//             after it: one kernel, implicit::conv2d_forward_pool (pools())
//             act       relu_forward (its output is the next step's input)
// backward  the steps in reverse, each reading the gradient of its output and
//           writing that of its input (the layer's dx for the first one):
//             conv      the activation's backward from the step's output when
//                       no later step runs it (the activation layer's backward
//                       kernel on y: relu_backward, leaky_relu_backward,
//                       sigmoid_backward, tanh_backward), then
//                       the data gradient (upconv_backward_data with the mask
//                       of its input when mask_input), then
//                       conv2d_backward_params / upconv_backward_params
//             linear    as conv, the activation's backward first, then
//                       LinearProducts::backward (the ReLU mask of its input
//                       in the input gradient's epilogue when mask_input)
//             maxpool   maxpool2d_backward (with the ReLU mask when mask_input);
//                       after a conv that pooled, with it: the weight gradient
//                       from the pool's gradient and codes (implicit::
//                       conv2d_backward_params_pool), or the pool's input
//                       gradient from the codes, then the conv's passes
//             upsample  upsample2d_backward (likewise)
//             act       nothing: the step after it wrote its input gradient
//           A null dx skips the first step's data gradient (a conv still
//           adds its parameter gradients).
// These are the kernels the separate layers run (simple_kernels.h,
// conv2d_kernels.h), or kernels that give their bits (the pooled conv), so a
// fused layer gives their bits; the fold gives the fold's (conv2d_kernels.h). Conv and linear steps run the im2col family
// only: the epilogues and the fold are its kernels.
//
// The layer owns the tensors between its steps: the output of every step but
// the last (the next step's input, read again by backward) and the gradient
// of every step's input that is not the layer's dx, plus, for a conv step
// whose activation's backward it runs itself, the gradient before that
// activation; and each linear step's packed bf16 operands (linear.h). A
// conv that pools keeps no output, but a byte per pooled value (its codes).
// In bf16 each conv step's channels-last passes run inside an
// implicit::KeepInput on the step's InputCopy (its input in NHWC bf16, from
// the forward to the weight gradient) and its backward inside an
// implicit::SharedDy (dy converted once for both passes). workspace_bytes
// counts them all (the copies at most: implicit::input_copy_bytes);
// reserve() allocates the tensors for the largest batch, and a pass on a
// larger batch grows them (the copies grow as they are first filled).
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "layers/fused_spec.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/linear.h"

namespace hpmc::gpu {

class FusedChainGPU : public LayerGPU<FusedChainSpec> {
 public:
  // Throws RuntimeError for the steps FusedChainSpec refuses.
  explicit FusedChainGPU(std::vector<ChainStep> steps);

  const char* impl() const override { return "im2col"; }
  size_t workspace_bytes(const Shape& in) const override;
  void reserve(int max_batch) override;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // The tensors between steps for a batch of n (per-sample shapes from
  // input_shape()): acts_[i] step i's output (i < last), grads_[b] the
  // gradient of step b's input (b ≥ 1, when a step writes it), pre_[i] the
  // gradient before conv step i's activation (act_backward_here).
  // codes[i]: the pool codes of conv step i when it pools (pools(i); its
  // acts[i] is then empty).
  struct Buffers {
    std::vector<Shape> acts, grads, pre, codes;  // per sample; n = 1, or empty: none
  };
  Buffers layout() const;
  void grow(int n);
  // Whether conv step i and the 2×2 max pool after it run as one kernel
  // (implicit::conv2d_forward_pool: a first layer's 3×3 convolution of 1–4
  // channels, with no activation or a ReLU whose backward the pool takes),
  // the pool's backward then from the codes (implicit::maxpool2x2_backward_codes).
  bool pools(size_t i) const;
  void pooled_conv_backward(size_t i, const Shape& in_shape, const float* in, const float* gp,
                            float* target);

  std::vector<Tensor> acts_, grads_, pre_, codes_;
  int capacity_ = 0;  // the batch the tensors hold
  // Where each conv or linear step's parameters start in param(): weight,
  // then bias.
  std::vector<size_t> param_at_;
  // Each step's products, for the linear steps (null for the others).
  std::vector<std::unique_ptr<LinearProducts>> linear_;
  // Each conv step's input in NHWC bf16 from forward to backward (null for
  // the other steps; used in bf16 only).
  std::vector<std::unique_ptr<implicit::InputCopy>> input_copy_;
};

}  // namespace hpmc::gpu
