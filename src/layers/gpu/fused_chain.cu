// fused_chain.cu — FusedChainGPU: the steps of a fused layer on the kernels
// of the separate layers (fused_chain.h says which runs where).
#include "layers/gpu/fused_chain.h"

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/activation_kernels.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/simple_kernels.h"

namespace hpmc::gpu {

namespace {

using Kind = ChainStep::Kind;

// The backward of an epilogue's activation from the step's output y (the
// kinds whose backward needs only y: fused_spec.h), by the activation layer's
// own kernel: relu's and leaky_relu's mask y > 0 is x > 0 (the slope is ≥ 0),
// sigmoid's and tanh's backward read y anyway. So the bits and the speed of
// the separate layer's backward.
void activation_backward_from_output(const Activation& a, const float* y, const float* dy,
                                     float* dx, size_t n) {
  if (n == 0) return;
  switch (a.kind) {
    case ActKind::kRelu: relu_backward(y, dy, dx, n); return;
    case ActKind::kLeakyRelu: leaky_relu_backward(y, dy, dx, n, a.slope); return;
    case ActKind::kSigmoid: sigmoid_backward(y, dy, dx, n); return;
    case ActKind::kTanh: tanh_backward(y, dy, dx, n); return;
    case ActKind::kPrelu:
    case ActKind::kNone: break;
  }
  throw RuntimeError(str("fused layer: no backward from the output for ", activation_text(a)));
}

// The convolution's sizes for step input `in` (the low resolution of a fold).
Conv2dShape conv_shape_of(const ChainStep& s, const Shape& in) {
  return conv2d_shape(s.conv, s.fold > 1 ? upsample2d_output_shape(s.fold, in) : in);
}

}  // namespace

bool FusedChainGPU::pools(size_t i) const {
  if (i + 1 >= steps_.size()) return false;
  const ChainStep &s = steps_[i], &p = steps_[i + 1];
  if (s.kind != Kind::kConv || s.fold > 1 || p.kind != Kind::kMaxPool || p.win.kernel != 2 ||
      p.win.stride != 2 || act_backward_here(i))
    return false;
  if (!(s.act.is_none() || (s.act.kind == ActKind::kRelu && p.mask_input))) return false;
  const Conv2dShape cs = conv_shape_of(s, step_input(i, input_shape()));
  return implicit::conv_pool_applies(cs, precision());
}

FusedChainGPU::FusedChainGPU(std::vector<ChainStep> steps) : LayerGPU(std::move(steps)) {
  size_t k = 0;
  for (const ChainStep& s : steps_) {
    param_at_.push_back(k);
    if (s.kind == Kind::kConv) k += s.conv.bias ? 2 : 1;
    if (s.kind == Kind::kLinear) k += s.linear.bias ? 2 : 1;
    linear_.push_back(s.kind == Kind::kLinear
                          ? std::make_unique<LinearProducts>(s.linear, Family::kIm2col)
                          : nullptr);
    input_copy_.push_back(s.kind == Kind::kConv ? std::make_unique<implicit::InputCopy>()
                                                : nullptr);
  }
}

FusedChainGPU::Buffers FusedChainGPU::layout() const {
  Buffers b;
  const size_t n = steps_.size();
  b.acts.resize(n);
  b.grads.resize(n);
  b.pre.resize(n);
  b.codes.resize(n);
  const Shape in = input_shape().with_batch(1);
  for (size_t i = 0; i < n; ++i) {
    const Shape out = chain_step_output(steps_[i], step_input(i, in));
    if (pools(i)) b.codes[i] = chain_step_output(steps_[i + 1], out);  // acts[i]: none
    else if (i + 1 < n) b.acts[i] = out;
    if (absorbed(i)) continue;
    const size_t t = grad_target(i);
    if (t > 0) b.grads[t] = step_input(t, in);
    if (act_backward_here(i)) b.pre[i] = out;
  }
  return b;
}

size_t FusedChainGPU::workspace_bytes(const Shape& in) const {
  size_t floats = 0;
  const Buffers b = layout();
  for (const auto* list : {&b.acts, &b.grads, &b.pre})
    for (const Shape& s : *list) floats += s.count() * size_t(in.n);
  size_t bytes = floats * sizeof(float);
  for (const Shape& s : b.codes) bytes += s.count() * size_t(in.n);  // one byte each
  for (const auto& l : linear_)
    if (l) bytes += l->workspace_bytes(in.n, precision());
  for (size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].kind == Kind::kConv)
      bytes += implicit::input_copy_bytes(conv_shape_of(steps_[i], step_input(i, in)),
                                          steps_[i].fold > 1, precision());
  return bytes;
}

void FusedChainGPU::reserve(int max_batch) {
  grow(max_batch);
  for (const auto& l : linear_)
    if (l) l->reserve(max_batch, precision());
}

void FusedChainGPU::grow(int n) {
  if (n <= capacity_) return;
  const Buffers b = layout();
  const auto alloc = [&](const std::vector<Shape>& shapes, std::vector<Tensor>& out,
                         DType type = DType::kF32) {
    out.assign(shapes.size(), Tensor());
    for (size_t i = 0; i < shapes.size(); ++i)
      if (shapes[i].count() > 0) out[i] = Tensor::empty(shapes[i].with_batch(n), type, Device::kGPU);
  };
  // Free the old tensors first: the device may not hold both. A queued kernel
  // that still reads one is ordered before the free (cudaFree synchronizes).
  acts_.clear();
  grads_.clear();
  pre_.clear();
  codes_.clear();
  alloc(b.acts, acts_);
  alloc(b.grads, grads_);
  alloc(b.pre, pre_);
  alloc(b.codes, codes_, DType::kU8);
  capacity_ = n;
}

void FusedChainGPU::forward_impl(const Tensor& x, Tensor& y) {
  const int n = x.shape().n;
  grow(n);
  const size_t last = steps_.size() - 1;
  const float* in = x.data<float>();
  Shape in_shape = x.shape();
  for (size_t i = 0; i <= last; ++i) {
    const ChainStep& s = steps_[i];
    if (pools(i)) {  // steps i and i + 1 in one kernel: step i's output is never formed
      const ChainStep& pool = steps_[i + 1];
      float* out = i + 1 == last ? y.data<float>() : acts_[i + 1].data<float>();
      const float* b = s.conv.bias ? param(param_at_[i] + 1) : nullptr;
      implicit::conv2d_forward_pool(conv_shape_of(s, in_shape), in, param(param_at_[i]), b,
                                    !s.act.is_none(), out, codes_[i].data<unsigned char>());
      in = out;
      in_shape = chain_step_output(pool, chain_step_output(s, in_shape));
      ++i;
      continue;
    }
    float* out = i == last ? y.data<float>() : acts_[i].data<float>();
    switch (s.kind) {
      case Kind::kConv: {
        const Conv2dShape cs = conv_shape_of(s, in_shape);
        const float* w = param(param_at_[i]);
        const float* b = s.conv.bias ? param(param_at_[i] + 1) : nullptr;
        const implicit::KeepInput keep(*input_copy_[i]);
        if (s.fold > 1) implicit::upconv_forward(cs, in, w, b, out, s.act);
        else implicit::conv2d_forward_act(cs, in, w, b, out, s.act);
        break;
      }
      case Kind::kLinear: {
        const float* b = s.linear.bias ? param(param_at_[i] + 1) : nullptr;
        linear_[i]->forward(precision(), n, in, param(param_at_[i]), b, out, s.act);
        break;
      }
      case Kind::kMaxPool: maxpool2d_forward(in_shape, s.win, in, out); break;
      case Kind::kUpsample: upsample2d_forward(in_shape, s.scale, in, out); break;
      case Kind::kAct: relu_forward(in, out, in_shape.count()); break;
    }
    in = out;
    in_shape = chain_step_output(s, in_shape);
  }
}

void FusedChainGPU::backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy,
                                  Tensor* dx) {
  const int n = x.shape().n;
  grow(n);  // a backward without its forward would read nothing useful, but nothing outside
  const size_t last = steps_.size() - 1;
  const float* g = dy.data<float>();  // the gradient of step i's output
  for (size_t i = last + 1; i-- > 0;) {
    if (absorbed(i)) continue;  // step i + 1 wrote the gradient of its input: g holds it
    // A pool whose conv pooled in its own kernel: the conv step runs both
    // backwards (pooled_conv_backward); g stays the pool output's gradient.
    if (i > 0 && pools(i - 1)) continue;
    const ChainStep& s = steps_[i];
    const Shape in_shape = step_input(i, x.shape());
    // Null where the tensor is never formed: the output of a conv step that
    // pools in its own kernel (pools(i − 1): the pool reads its codes instead).
    const auto formed = [](const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
    const float* in = i == 0 ? x.data<float>() : formed(acts_[i - 1]);
    const float* out = i == last ? y.data<float>() : formed(acts_[i]);
    const size_t t = grad_target(i);
    float* target = t > 0 ? grads_[t].data<float>() : dx ? dx->data<float>() : nullptr;
    if (pools(i)) {
      pooled_conv_backward(i, in_shape, in, g, target);
      if (!target) break;
      g = target;
      continue;
    }
    // The gradient before the step's epilogue activation, where the step
    // runs that activation's backward itself (conv and linear steps).
    const float* gc = g;
    if (act_backward_here(i)) {
      float* pre = pre_[i].data<float>();
      activation_backward_from_output(s.act, out, g, pre,
                                      chain_step_output(s, in_shape).count());
      gc = pre;
    }
    switch (s.kind) {
      case Kind::kConv: {
        const Conv2dShape cs = conv_shape_of(s, in_shape);
        const float* w = param(param_at_[i]);
        float* dw = grad(param_at_[i]);
        float* db = s.conv.bias ? grad(param_at_[i] + 1) : nullptr;
        // bf16: the forward's copy of `in`, and gc converted once (with the
        // weights' layout of the input gradient, which therefore runs first).
        const implicit::KeepInput keep(*input_copy_[i]);
        const implicit::SharedDy shared;
        if (s.fold > 1) {
          if (target)
            implicit::upconv_backward_data(cs, gc, w, s.mask_input ? in : nullptr, target);
          implicit::upconv_backward_params(cs, in, gc, dw, db);
        } else {
          if (target) implicit::conv2d_backward_data(cs, gc, w, target);
          implicit::conv2d_backward_params(cs, in, gc, dw, db);
        }
        break;
      }
      case Kind::kLinear: {
        float* db = s.linear.bias ? grad(param_at_[i] + 1) : nullptr;
        linear_[i]->backward(precision(), n, in, gc, param(param_at_[i]), grad(param_at_[i]), db,
                             target, s.mask_input ? in : nullptr);
        break;
      }
      case Kind::kMaxPool:
        if (target) maxpool2d_backward(in_shape, s.win, in, g, target, s.mask_input);
        break;
      case Kind::kUpsample:
        if (target) upsample2d_backward(in_shape, s.scale, g, target, s.mask_input ? in : nullptr);
        break;
      case Kind::kAct:  // every activation step is absorbed (FusedChainSpec)
        throw RuntimeError(str("fused layer '", name(), "': activation step ", i + 1,
                               " without the mask of the step after it"));
    }
    if (!target) break;  // only the first step writes no gradient (a null dx)
    g = target;
  }
}

// Conv step i that pooled in its forward (pools(i)) and the pool after it,
// backwards from gp, the gradient of the pool's output. Without an input
// gradient to give (target null: the layer's first step, no dx asked) and
// where conv_pool_wgrad_applies, the weight gradient reads gp and the codes
// and the pool's input gradient is never formed; else the pool's backward
// writes it from the codes (into grads_[i + 1], its buffer as a step) and
// the conv's passes read it as usual. The same bits either way.
void FusedChainGPU::pooled_conv_backward(size_t i, const Shape& in_shape, const float* in,
                                         const float* gp, float* target) {
  const ChainStep &s = steps_[i], &pool = steps_[i + 1];
  const Conv2dShape cs = conv_shape_of(s, in_shape);
  const unsigned char* code = codes_[i].data<unsigned char>();
  float* dw = grad(param_at_[i]);
  float* db = s.conv.bias ? grad(param_at_[i] + 1) : nullptr;
  if (!target && implicit::conv_pool_wgrad_applies(cs, precision())) {
    implicit::conv2d_backward_params_pool(cs, in, code, gp, pool.mask_input, dw, db);
    return;
  }
  float* gc = grads_[i + 1].data<float>();
  implicit::maxpool2x2_backward_codes(cs, code, gp, pool.mask_input, gc);
  const implicit::SharedDy shared;  // gc converted once for both passes (bf16)
  if (target) implicit::conv2d_backward_data(cs, gc, param(param_at_[i]), target);
  implicit::conv2d_backward_params(cs, in, gc, dw, db);
}

LayerPtr make_fused_layer(std::vector<ChainStep> steps) {
  return std::make_shared<FusedChainGPU>(std::move(steps));
}

}  // namespace hpmc::gpu
