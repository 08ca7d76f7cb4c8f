// layer.h — the one layer interface behind which CPU and GPU layers live.
//
// Shapes: activations are NCHW float32 tensors; a flat vector of F features
// is (N, F, 1, 1). Parameters use PyTorch's layouts (conv weight KCRS =
// [out, in, kh, kw], linear weight [out, in], bias [out]).
//
// Gradient convention (tested in tests/test_model.cpp):
//   * parameter gradients ACCUMULATE: backward() adds dL/dθ into the bound
//     gradient buffer; the model zeroes that buffer once per step;
//   * input gradients OVERWRITE: backward() writes dL/dx into *dx; a null dx
//     means the caller does not need it (first layer) and it is skipped.
//
// forward()/backward() are the checked front door: they verify device,
// dtype, the input shape the layer was built for and that parameters are
// bound, then call the device implementation (forward_impl/backward_impl).
// There is no silent fallback between devices.
//
// Fusion is not a matter for this interface: a GPU model's layers are
// rewritten after they are built (model/gpu_rewrite.h), runs of them replaced
// by fused layers (fused_spec.h), which are layers like any other.
//
// A layer type is defined once (schema.h, layer_list.h,
// docs/adding-a-layer.md): a device-neutral spec class derived from Layer
// (NameSpec: schema, output shape, parameters, FLOPs, describe) and, derived
// from it through LayerCPU<NameSpec> / LayerGPU<NameSpec>, a CPU and a GPU
// class that add only forward_impl and backward_impl.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/precision.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "layers/schema.h"

namespace hpmc {

// How a parameter tensor is initialised. kKaimingUniform is PyTorch's default
// for Conv2d and Linear weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in));
// kConstant fills `value` (0 for kZeros).
enum class Init { kKaimingUniform, kZeros, kConstant };

// A parameter tensor (trained) or a buffer (state the layer keeps but no
// optimizer touches, such as batch norm's running statistics).
struct ParamSpec {
  std::string name;       // "weight", "bias"; the model prefixes param_prefix()
  std::vector<int> dims;  // PyTorch layout, e.g. {out, in, kh, kw}
  int fan_in = 1;
  Init init = Init::kKaimingUniform;
  float value = 0;  // kConstant
  size_t count() const {
    size_t n = 1;
    for (int d : dims) n *= size_t(d);
    return n;
  }
};

// Whether a forward pass trains (batch statistics, dropout) or evaluates, and
// the counters from which a layer that draws random numbers (dropout) makes
// them: a pure function of (seed, stream, step, element), so runs repeat and
// resume exactly, and CPU and GPU draw the same numbers.
struct LayerMode {
  bool training = false;
  uint64_t seed = 0;  // training.seed
  int64_t step = 0;   // the global step being trained
  int stream = 0;     // the layer's index in the config (model.layers), fused or not
  // The position of this batch's first sample in the step's whole batch: 0,
  // except for a data-parallel rank's shard or an accumulated micro-batch
  // (model/trainer.h), whose samples draw what they would in the whole batch.
  int64_t first = 0;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  // The layer type's schema (schema.h); its spec class provides it.
  virtual const LayerSchema& schema() const = 0;
  const char* type() const { return schema().type.c_str(); }  // the YAML type, e.g. "conv2d"
  LayerKind kind() const { return schema().kind; }
  virtual Device device() const = 0;
  // Implementation name for the layer table ("cpu", "naive", ...).
  virtual const char* impl() const = 0;
  // Short human description of the hyper-parameters, e.g. "3x3 s1 p1".
  virtual std::string describe() const { return ""; }
  // The precision its matrix products run in (core/precision.h): the
  // model's training.precision, which the registry sets from LayerArgs as
  // it builds the layer (and the GPU rewrite gives a fused layer). Layers
  // without products have nothing to round; every other value they keep in
  // FP32. model/impl.h's precision_refusal keeps it to what the impl runs.
  Precision precision() const { return precision_; }
  void set_precision(Precision p) { precision_ = p; }

  // The output shape for an input shape (n is carried through). Throws
  // ShapeError with both shapes when the layer cannot take the input.
  virtual Shape output_shape(const Shape& in) const = 0;
  // Parameter tensors, in the order bind() receives them.
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  // What prefixes their names (and the buffers') in the model's parameter
  // store and checkpoints: "<name>.", so "conv1.weight". A fused layer's
  // specs carry their own layers' names ("conv1.weight") and its prefix is
  // "" (fused_spec.h), so fusion does not change a checkpoint.
  virtual std::string param_prefix() const { return name_ + "."; }
  // Buffers (state that is saved but not trained), in the order
  // bind_buffers() receives them.
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }

  // Floating-point operations of one forward / backward call on an input of
  // shape `in` (n included), counted as 2 per multiply-add of the matrix
  // products (bias additions and element-wise work are not counted; layers
  // without a matrix product count 0). backward_flops counts the parameter
  // gradients and, when `input_grad` is true, the input gradient (a null dx
  // skips it). `hpmc bench` turns these into achieved FLOP/s.
  virtual double forward_flops(const Shape& in) const { return 0; }
  virtual double backward_flops(const Shape& in, bool input_grad) const { return 0; }
  size_t param_count() const;
  // Bytes of the scratch buffers the layer allocates itself (a CPU
  // convolution's per-thread column matrices, a fused layer's inner
  // activations and gradients) for an input of shape `in` (n included), on
  // the layer's device: counted by the memory plan (model/memory.h). Layers
  // that keep none return 0.
  virtual size_t workspace_bytes(const Shape& in) const { return 0; }
  // Allocate what workspace_bytes counts for batches up to max_batch now
  // rather than at the first pass (Model::allocate calls it). The default
  // allocates nothing; a layer that overrides it still grows on a larger batch.
  virtual void reserve(int max_batch) {}

  // Fix the per-sample input shape (validated by output_shape) before use.
  void set_input_shape(const Shape& in);
  const Shape& input_shape() const { return in_; }
  // Point each parameter tensor at its slot in the model's contiguous
  // parameter and gradient buffers (one pointer per param_specs() entry).
  void bind(std::vector<float*> params, std::vector<float*> grads);
  // Point each buffer at its slot in the model's buffer store.
  void bind_buffers(std::vector<float*> buffers);
  bool bound() const;

  // Training or evaluation, and the step's random-number counters (the model
  // sets them for every layer before each pass; the default is evaluation).
  void set_mode(const LayerMode& m) { mode_ = m; }
  const LayerMode& mode() const { return mode_; }

  void forward(const Tensor& x, Tensor& y);
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);

 protected:
  virtual void forward_impl(const Tensor& x, Tensor& y) = 0;
  virtual void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) = 0;

  float* param(size_t i) const { return params_.at(i); }
  float* grad(size_t i) const { return grads_.at(i); }
  float* buffer(size_t i) const { return buffers_.at(i); }

 private:
  void check_tensor(const Tensor& t, const Shape& expect, const char* what) const;

  std::string name_;
  Shape in_;
  bool has_input_shape_ = false;
  std::vector<float*> params_, grads_, buffers_;
  LayerMode mode_;
  Precision precision_ = Precision::kFp32;
};

// What pins a layer type's spec to a device: a CPU layer derives from
// LayerCPU<NameSpec>, a GPU layer (src/layers/gpu) from LayerGPU<NameSpec>;
// both keep the spec's constructors.
template <class Spec>
class LayerCPU : public Spec {
 public:
  using Spec::Spec;
  Device device() const override { return Device::kCPU; }
  const char* impl() const override { return "cpu"; }
};

template <class Spec>
class LayerGPU : public Spec {
 public:
  using Spec::Spec;
  Device device() const override { return Device::kGPU; }
  // One kernel for every GPU impl; conv2d and linear name their family.
  const char* impl() const override { return "gpu"; }
};

}  // namespace hpmc
