// model.h — a chain of layers built from the config, with its parameters,
// loss and activation buffers.
//
// Layers are held by shared_ptr in order; shapes are inferred layer by layer
// from the data's sample shape before any data is read, and every shape
// error names the layer, its config location and both shapes. Activations are
// allocated once for the largest batch (allocate()) and reused; gradients of
// activations ping-pong between two buffers sized for the largest of them.
//
// ReLU fusion (GPU models; layer.h's fusion hooks): build() offers each ReLU's
// forward to the layer before it (an im2col conv2d applies it in its
// epilogue; never when that layer is model.features, whose output must stay
// the layer's own) and its backward to the layer after it (a maxpool2d or
// upsample2d applies the mask to the gradient it writes). A fused ReLU's forward is
// skipped, its output aliasing its input; a fused backward is skipped, the
// next layer's input gradient serving as the ReLU's. Every result keeps its
// bits; CPU layers decline, so CPU models are unchanged.
//
// Upsample folding (GPU models; layer.h's fold_upsample): with
// training.fold_upsample too, build() offers each upsample2d (never
// model.features, whose output must exist) to the layer after it (an im2col
// 3×3 conv2d that implicit::upconv_applies to takes a ×2 upsample). A folded
// upsample runs neither forward nor backward and its output is never
// allocated: the next layer reads the upsample's input and writes its input
// gradient. This is decided before the ReLU fusion, whose backward offer for
// a ReLU followed by a folded upsample goes to the layer after the upsample.
// Unlike the ReLU fusion, results change by rounding (the fold sums weights),
// which is why it has its own switch.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/loss.h"
#include "model/config.h"
#include "model/impl.h"
#include "model/params.h"

namespace hpmc {
class Profiler;
}

namespace hpmc {

class Model {
 public:
  // Build from config; `sample` is the per-sample input shape (n = 1) and
  // `num_classes` the label count the data has (checked against a
  // classifier's output).
  // ReLU fusion needs `fuse` and training.fuse; either false leaves every
  // ReLU on its own (tests compare the two). Upsample folding needs both and
  // training.fold_upsample.
  static std::unique_ptr<Model> build(const Config& cfg, Impl impl, const Shape& sample,
                                      int num_classes, bool fuse = true);

  const std::vector<LayerPtr>& layers() const { return layers_; }
  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }
  Loss& loss() { return *loss_; }
  const Loss& loss() const { return *loss_; }
  Impl impl() const { return impl_; }
  Device device() const { return impl_device(impl_); }
  const Shape& input_shape() const { return in_; }    // per sample
  const Shape& output_shape() const { return out_; }  // per sample
  // Index of the features layer, or -1 when the config names none.
  int features_layer() const { return features_; }
  // Whether layer i (a ReLU) runs inside its neighbour in forward / backward.
  bool forward_fused(int i) const { return fwd_fused_.at(size_t(i)); }
  bool backward_fused(int i) const { return bwd_fused_.at(size_t(i)); }
  // Whether layer i (an upsample2d) is folded into layer i + 1.
  bool upsample_folded(int i) const { return folded_.at(size_t(i)); }

  // Each layer's keys with the values used (defaults filled in), in order;
  // what a run directory's config.yaml records under model.layers.
  const std::vector<YAML::Node>& resolved_layers() const { return resolved_layers_; }

  // Table of layers (name, type, impl, in -> out, params) and the total.
  void print_table(std::ostream& os) const;

  // Allocate activation and gradient buffers for batches up to max_batch
  // (check_batch(max_batch) must hold).
  void allocate(int max_batch);
  // Throws a ConfigError when a batch of n would give some tensor more than
  // kMaxTensorElements values (shape.h), naming the layer and the largest
  // batch that fits; `origin` says where n came from ("training.batch_size").
  void check_batch(int n, const std::string& origin) const;
  // Bytes allocate(n) takes (activations, the two gradient buffers, the
  // output gradient) and the layers' own scratch at batch n (memory.h).
  size_t activation_bytes(int n) const;
  size_t workspace_bytes(int n) const;
  int max_batch() const { return max_batch_; }

  // Run layers 0..last (default: all) on x; returns the last one's output.
  // `last` may not be a layer whose following ReLU is fused into it (its output
  // would be the ReLU's) nor a folded upsample (it has no output); build()
  // does neither to model.features.
  const Tensor& forward(const Tensor& x, int last = -1);
  // Backpropagate d loss/d output (shape of the model output for x's batch)
  // through the layers; parameter gradients accumulate into params().grads().
  // No gradient is needed below the first layer with parameters, so that
  // layer gets no input gradient to compute (a null dx) and the
  // parameter-free layers before it (a leading flatten) are not run at all,
  // as in PyTorch's autograd.
  void backward(const Tensor& x, const Tensor& dout);
  // Whether backward() runs layer i, and whether it asks it for dx.
  bool runs_backward(int i) const { return i >= first_trained_; }
  bool needs_input_grad(int i) const { return i > first_trained_; }

  // FLOPs of each layer's forward and backward (as backward() runs it) for a
  // batch of n; see Layer::forward_flops. train_flops(n) is their sum: one
  // training step's matrix-product work.
  struct LayerFlops {
    double forward = 0, backward = 0;
  };
  std::vector<LayerFlops> layer_flops(int n) const;
  double train_flops(int n) const;
  // Buffer for the loss gradient w.r.t. the model output (sized by allocate()).
  Tensor& output_grad() { return dout_; }

  // Train or evaluate (LayerMode): batch statistics and dropout in training;
  // `step` is the global step, from which dropout draws its masks. Built
  // models evaluate until told otherwise.
  void set_mode(bool training, int64_t step);
  bool training() const { return training_; }

  // Time every layer's forward and backward into `p` (null: off).
  void set_profiler(Profiler* p) { profiler_ = p; }
  Profiler* profiler() const { return profiler_; }

 private:
  Impl impl_ = Impl::kCpu;
  Shape in_, out_;
  std::vector<LayerPtr> layers_;
  std::vector<std::string> where_;  // config location of each layer
  std::vector<YAML::Node> resolved_layers_;
  LossPtr loss_;
  ParamStore params_;
  int features_ = -1;
  int first_trained_ = 0;  // index of the first layer with parameters (or size())
  std::vector<bool> fwd_fused_, bwd_fused_;  // per layer: a ReLU run by its neighbour
  std::vector<bool> folded_;                 // per layer: an upsample folded into the next
  int max_batch_ = 0;
  uint64_t seed_ = 0;  // training.seed, for LayerMode
  bool training_ = false;
  // The input tensor layer i reads: the previous output, the model input x,
  // or, after a folded upsample, the upsample's input.
  const Tensor& layer_input(int i, const Tensor& x) const;
  // The layer whose backward writes layer i's output gradient as its input
  // gradient: i + 1, or i + 2 past a folded upsample (size() past the end).
  size_t grad_writer(size_t i) const;

  std::vector<Tensor> acts_;  // output of each layer (undefined for a folded upsample)
  Tensor grad_a_, grad_b_;    // ping-pong activation gradients
  Tensor dout_;
  Profiler* profiler_ = nullptr;
};

}  // namespace hpmc
