// model.h — a chain of layers built from the config, with its parameters,
// loss and activation buffers.
//
// Layers are held by shared_ptr in order; shapes are inferred layer by layer
// from the data's sample shape before any data is read, and every shape
// error names the layer, its config location and both shapes. Activations are
// allocated once for the largest batch (allocate()) and reused; gradients of
// activations ping-pong between two buffers sized for the largest of them.
//
// A GPU model with training.fuse runs a rewritten list (model/gpu_rewrite.h):
// build() makes the layers the config lists, then the GPU rewrite replaces
// runs of them by fused layers (a conv with its ReLU in the epilogue and the
// pool after it, a decoder's convolutions with the upsamples folded in, ...),
// which are layers like the others. layers() is the list that runs; model.features
// names a config layer, and a fused layer never hides it (it is the last layer
// of its group). CPU models, and GPU models with fusion off, run the config's
// layers one by one.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/loss.h"
#include "model/config.h"
#include "model/gpu_rewrite.h"
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
  // classifier's output). The layers run in training.precision; an impl
  // that cannot (model/impl.h precision_refusal) is a UsageError naming where
  // the precision was set, before any layer is made.
  // The GPU rewrite needs a GPU impl, `fuse` and training.fuse; either false
  // runs the config's layers one by one (tests compare the two). Its fold
  // needs training.fold_upsample too.
  static std::unique_ptr<Model> build(const Config& cfg, Impl impl, const Shape& sample,
                                      int num_classes, bool fuse = true);

  // The layers that run, in order: the config's, or after the GPU rewrite
  // its groups (a fused layer is one entry).
  const std::vector<LayerPtr>& layers() const { return layers_; }
  // The GPU rewrite's plan (its groups over the config's layers and what it
  // declined); empty when it did not run.
  const RewritePlan& rewrite() const { return rewrite_; }
  // The config layers, in config order (what model.layers lists).
  const std::vector<std::string>& config_names() const { return config_names_; }
  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }
  Loss& loss() { return *loss_; }
  const Loss& loss() const { return *loss_; }
  Impl impl() const { return impl_; }
  // training.precision: every layer's Layer::precision (core/precision.h).
  Precision precision() const { return precision_; }
  Device device() const { return impl_device(impl_); }
  const Shape& input_shape() const { return in_; }    // per sample
  const Shape& output_shape() const { return out_; }  // per sample
  // Index in layers() of the layer whose output is model.features' (a
  // fused layer ends with it), or -1 when the config names none.
  int features_layer() const { return features_; }
  // model.features, the config layer's name ("" when none).
  const std::string& features_name() const { return features_name_; }

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

  // Run layers 0..last of layers() (default: all) on x; returns the last one's output.
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
  // `step` is the global step, from which dropout draws its masks, and
  // `first` the position of the batch's first sample in the step's whole
  // batch (LayerMode::first). Built models evaluate until told otherwise.
  void set_mode(bool training, int64_t step, int64_t first = 0);
  bool training() const { return training_; }

  // Time every layer's forward and backward into `p` (null: off).
  void set_profiler(Profiler* p) { profiler_ = p; }
  Profiler* profiler() const { return profiler_; }

 private:
  Impl impl_ = Impl::kCpu;
  Precision precision_ = Precision::kFp32;
  Shape in_, out_;
  std::vector<LayerPtr> layers_;
  std::vector<std::string> where_;  // config location of each layer
  std::vector<YAML::Node> resolved_layers_;
  LossPtr loss_;
  ParamStore params_;
  int features_ = -1;
  std::string features_name_;
  std::vector<std::string> config_names_;
  std::vector<int> config_index_;  // per layer: the config index of its (first) config layer
  std::vector<Shape> config_out_;  // per config layer: its output (n = 1)
  RewritePlan rewrite_;
  int first_trained_ = 0;  // index of the first layer with parameters (or size())
  int max_batch_ = 0;
  uint64_t seed_ = 0;  // training.seed, for LayerMode
  bool training_ = false;
  // first_trained_ for layers_.
  void find_first_trained();
  // The input tensor layer i reads: the previous output or the model input x.
  const Tensor& layer_input(int i, const Tensor& x) const;

  std::vector<Tensor> acts_;  // output of each layer
  Tensor grad_a_, grad_b_;    // ping-pong activation gradients
  Tensor dout_;
  Profiler* profiler_ = nullptr;
};

}  // namespace hpmc
