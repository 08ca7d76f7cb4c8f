// fused_step.cpp — the fused MLP step strategy and the reasons it declines (fused_step.h).
#include "model/fused_step.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/profiler.h"
#include "layers/fused_spec.h"
#include "layers/gpu/mlp_step.h"
#include "model/batches.h"

namespace hpmc {

namespace {

// A linear layer of an MLP of the fused kind: its name and feature counts.
struct MlpLinear {
  std::string name;
  int in = 0, out = 0;
};

// The linear layers of an MLP of the fused kind, or empty with *why set. A
// fused layer of the GPU rewrite (model/gpu_rewrite.h: in tf32 and bf16 an
// MLP is one) counts as the config layers it runs.
std::vector<MlpLinear> mlp_linears(const Model& model, std::string* why) {
  struct Item {
    enum { kLinear, kRelu, kFlatten, kOther } kind;
    std::string name, type;
    int in = 0, out = 0;
  };
  std::vector<Item> items;
  for (const LayerPtr& l : model.layers()) {
    const auto* chain = dynamic_cast<const FusedChainSpec*>(l.get());
    if (!chain) {
      const LayerKind kind = l->kind();
      if (kind == LayerKind::kLinear)
        items.push_back({Item::kLinear, l->name(), l->type(), int(l->input_shape().per_sample()),
                         int(l->output_shape(l->input_shape()).per_sample())});
      else
        items.push_back({kind == LayerKind::kReLU      ? Item::kRelu
                         : kind == LayerKind::kFlatten ? Item::kFlatten
                                                       : Item::kOther,
                         l->name(), l->type()});
      continue;
    }
    for (const ChainStep& s : chain->steps()) {
      if (s.kind == ChainStep::Kind::kLinear)
        items.push_back({Item::kLinear, s.owner, "linear", s.linear.in_features,
                         s.linear.out_features});
      else if (s.kind != ChainStep::Kind::kAct)
        items.push_back({Item::kOther, s.layers.front(), s.text()});
      if (s.kind == ChainStep::Kind::kLinear || s.kind == ChainStep::Kind::kAct) {
        if (s.act.kind == ActKind::kRelu)
          items.push_back({Item::kRelu, s.layers.back(), "relu"});
        else if (!s.act.is_none())
          items.push_back({Item::kOther, s.layers.back(), activation_text(s.act)});
      }
    }
  }
  std::vector<MlpLinear> linears;
  size_t i = 0;
  while (i < items.size() && items[i].kind == Item::kFlatten) ++i;
  bool want_linear = true;
  for (; i < items.size(); ++i) {
    const Item& it = items[i];
    if (want_linear && it.kind == Item::kLinear) {
      linears.push_back({it.name, it.in, it.out});
    } else if (!want_linear && it.kind == Item::kRelu) {
    } else {
      *why = str("layer '", it.name, "' (", it.type, ") is not part of a linear/relu chain");
      return {};
    }
    want_linear = !want_linear;
  }
  if (want_linear) {  // ended on a relu (or no layer at all)
    *why = "the model does not end with a linear layer";
    return {};
  }
  return linears;
}

const ParamEntry* find_entry(const ParamStore& store, const std::string& name) {
  for (const auto& e : store.entries())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

std::string fused_optimizer_refusal(const TrainingConfig& cfg) {
  const OptimizerConfig& o = cfg.optimizer;
  if (o.type != "sgd")
    return str("the fused kernel applies SGD, and training.optimizer.type is ", o.type);
  if (o.nesterov) return "the fused kernel applies SGD without Nesterov momentum";
  if (cfg.clip_grad_norm > 0)
    return "gradient clipping (training.clip_grad_norm) needs the whole gradient before any "
           "update, and the fused kernel updates each layer as soon as its gradient is done";
  return "";
}

std::string fused_step_refusal(const Model& model, const TrainingConfig& cfg,
                               const Dataset& train) {
  if (!cfg.fuse) return "training.fuse is false";
  if (cfg.grad_accumulation > 1)
    return str("training.grad_accumulation is ", cfg.grad_accumulation,
               ": the gradients of several micro-batches are summed before the update, and the "
               "fused kernel updates each layer as soon as its gradient is done");
  if (cfg.input_noise.active())
    return str("training.input_noise is ", cfg.input_noise.describe(),
               " (the fused step trains on the clean batch)");
  if (cfg.augment.active())
    return str("data.augment is ", cfg.augment.describe(),
               " (the fused step trains on the batch as gathered)");
  if (model.impl() != Impl::kIm2col) return str("the fused step is part of --impl im2col, not ",
                                                impl_name(model.impl()));
  if (train.images.dtype() != DType::kU8)
    return str("the training images are ", dtype_name(train.images.dtype()),
               " (the fused step gathers uint8 pixels)");
  for (const auto& l : model.layers()) {
    const bool ok = l->device() == Device::kGPU &&
                    (l->kind() != LayerKind::kLinear ||
                     std::strcmp(l->impl(), impl_name(Impl::kIm2col)) == 0);
    if (!ok) return str("layer '", l->name(), "' runs with impl ", l->impl());
  }
  if (model.loss().kind() != LossKind::kSoftmaxCrossEntropy)
    return str("the loss is ", model.loss().type(), ", not softmax_cross_entropy");
  std::string why;
  const auto linears = mlp_linears(model, &why);
  if (linears.empty()) return why;
  const int L = int(linears.size());
  if (L < 2 || L > gpu::kMlpStepMaxLayers)
    return str(L, " linear layers (the fused step takes 2 to ", gpu::kMlpStepMaxLayers, ")");
  for (const MlpLinear& l : linears)
    if (!find_entry(model.params(), l.name + ".bias"))
      return str("layer '", l.name, "' has no bias");
  const int classes = model.output_shape().per_sample();
  if (classes > gpu::kMlpStepMaxClasses)
    return str(classes, " classes (the fused step takes at most ", gpu::kMlpStepMaxClasses, ")");
  const int32_t* lab = train.labels.data<int32_t>();
  for (int i = 0; i < train.size(); ++i)
    if (lab[i] < 0 || lab[i] >= classes)  // the layer-by-layer loss reports it
      return str("training label ", lab[i], " of sample ", i, " is outside [0, ", classes, ")");
  if (std::string o = fused_optimizer_refusal(cfg); !o.empty()) return o;
  if (!gpu::mlp_step_supported(&why, model.precision())) return why;
  return "";
}

double fused_step_flops(const Model& model, int batch, int* linear_layers) {
  std::string why;
  const auto linears = mlp_linears(model, &why);
  double flops = 0;
  for (size_t i = 0; i < linears.size(); ++i) {
    const double macs = double(batch) * linears[i].in * linears[i].out;
    flops += 2 * macs * (i == 0 ? 2 : 3);  // the first layer has no input gradient
  }
  if (linear_layers) *linear_layers = int(linears.size());
  return flops;
}

std::string fused_step_cost_refusal(const Model& model, int batch) {
  int layers = 0;
  const double flops = fused_step_flops(model, batch, &layers);
  if (flops <= kFusedStepMaxFlopsPerLayer * layers) return "";
  const auto gflop = [](double f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", f / 1e9);
    return std::string(buf);
  };
  return str("at batch ", batch, " a step is ", gflop(flops), " GFLOP over ", layers,
             " linear layers, above the ", gflop(kFusedStepMaxFlopsPerLayer),
             " GFLOP a layer where layer by layer is the faster (docs/PERFORMANCE.md#step-choice; "
             "HPMC_STEP=fused overrides)");
}

FusedStep::FusedStep(Model& model, Optimizer& opt, const TrainingConfig& cfg, int max_batch)
    : opt_(opt) {
  std::string why;
  const auto linears = mlp_linears(model, &why);
  HPMC_CHECK(!linears.empty(), "fused step: ", why);
  const std::string refusal = fused_optimizer_refusal(cfg);
  HPMC_CHECK(refusal.empty() && opt.type() == "sgd", "fused step: ", refusal);
  const OptimizerConfig& oc = cfg.optimizer;
  ParamStore& ps = model.params();
  float* p = ps.params().data<float>();
  float* g = ps.grads().data<float>();
  Tensor* momentum = opt.find_state("momentum");
  HPMC_CHECK((oc.momentum != 0) == (momentum != nullptr), "fused step: momentum ", oc.momentum,
             " but the optimizer keeps state '", opt.state_list(), "'");
  float* v = momentum ? momentum->data<float>() : nullptr;
  gpu::MlpStepDesc d;
  d.dims.push_back(model.input_shape().per_sample());
  for (const MlpLinear& l : linears) {
    const ParamEntry* w = find_entry(ps, l.name + ".weight");
    const ParamEntry* b = find_entry(ps, l.name + ".bias");
    HPMC_CHECK(w && b && w->dims.size() == 2 && w->dims[1] == d.dims.back(),
               "fused step: unexpected parameters of layer '", l.name, "'");
    d.dims.push_back(w->dims[0]);
    d.w.push_back(p + w->offset);
    d.b.push_back(p + b->offset);
    d.gw.push_back(g + w->offset);
    d.gb.push_back(g + b->offset);
    d.vw.push_back(v ? v + w->offset : nullptr);
    d.vb.push_back(v ? v + b->offset : nullptr);
  }
  d.lr = float(oc.lr);
  d.momentum = float(oc.momentum);
  d.weight_decay = float(oc.weight_decay);
  d.max_batch = max_batch;
  d.precision = model.precision();
  step_ = std::make_unique<gpu::MlpStep>(d);
}

FusedStep::~FusedStep() = default;

std::string FusedStep::describe() const {
  return "fused: the whole step is one GPU kernel (training.fuse)";
}

void FusedStep::run(BatchFeeder& feed, int begin, int n, Tensor& acc, double lr, Profiler* prof) {
  ProfileScope scope(prof, "fused step");
  HPMC_CHECK(begin >= 0 && n >= 0 && begin + n <= feed.size(), "batch [", begin, ", ",
             begin + n, ") outside ", feed.size(), " samples");
  HPMC_CHECK(double(feed.size()) * double(feed.data().images.shape().per_sample()) < 2147483647.0,
             "fused step: the dataset is too large for 32-bit pixel offsets");
  step_->set_lr(float(lr));  // as the layer-by-layer Sgd rounds it
  const int next = begin + n, next_n = std::min(n, feed.size() - next);
  step_->run(feed.device_images(), feed.device_labels(), feed.device_order() + begin, n,
             feed.order_version(), acc.data<double>(), feed.device_order() + next, next_n);
  opt_.count_step();
}

}  // namespace hpmc
