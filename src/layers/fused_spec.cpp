// fused_spec.cpp — the device-neutral rules of a fused layer (fused_spec.h):
// which step lists make one, and their shapes, parameters and FLOPs.
#include "layers/fused_spec.h"

#include "core/error.h"

namespace hpmc {

namespace {

// The share of the unfolded multiply-adds that the upsample fold runs: a 2×2
// instead of a 3×3 kernel per output pixel, a 3×3 instead of a 5×5 one
// (conv2d_kernels.h, upconv_*).
double fold_share(const ChainStep& s) {
  if (s.fold == 1) return 1.0;
  return s.conv.kernel == 5 ? 9.0 / 25.0 : 4.0 / 9.0;
}

std::string joined(const std::vector<ChainStep>& steps, const char* sep) {
  std::string s;
  for (const ChainStep& st : steps)
    for (const std::string& l : st.layers) s += (s.empty() ? "" : sep) + l;
  return s;
}

bool is_relu(const Activation& a) { return a.kind == ActKind::kRelu; }

// Every rule of fused_spec.h, one message each; `who` names the layer.
void check_steps(const std::vector<ChainStep>& steps, const std::string& who) {
  auto fail = [&](size_t i, const std::string& what) {
    throw RuntimeError(str("fused layer '", who, "', step ", i + 1, ": ", what));
  };
  if (steps.empty()) throw RuntimeError("a fused layer needs at least one step");
  size_t layers = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const ChainStep& s = steps[i];
    if (s.layers.empty()) fail(i, "runs no config layer");
    layers += s.layers.size();
    if (s.act.kind == ActKind::kPrelu)
      fail(i, "prelu is not fused: its slope gradient needs its input, which an epilogue "
              "does not keep");
    if (s.act.kind == ActKind::kLeakyRelu && !(s.act.slope >= 0))
      fail(i, str("leaky_relu with slope ", s.act.slope,
                  ": its backward cannot be taken from its output"));
    switch (s.kind) {
      case ChainStep::Kind::kConv:
        if (s.owner.empty()) fail(i, "a conv step without its layer's name");
        if (s.fold != 1 && s.fold != 2) fail(i, str("a fold of x", s.fold, " (only x2 folds)"));
        if (s.fold == 2 && !(s.conv.stride == 1 && ((s.conv.kernel == 3 && s.conv.padding == 1) ||
                                                     (s.conv.kernel == 5 && s.conv.padding == 2))))
          fail(i, str("the upsample fold takes a 3x3 pad-1 or 5x5 pad-2 stride-1 conv2d, not ",
                      conv2d_describe(s.conv)));
        if (s.mask_input && s.fold != 2)
          fail(i, "only a folded conv applies the mask of the ReLU before it");
        break;
      case ChainStep::Kind::kLinear:
        if (s.owner.empty()) fail(i, "a linear step without its layer's name");
        linear_check_config(s.owner, s.linear);
        break;
      case ChainStep::Kind::kMaxPool:
      case ChainStep::Kind::kUpsample:
        if (s.kind == ChainStep::Kind::kUpsample && s.scale < 1)
          fail(i, str("upsample scale ", s.scale));
        break;
      case ChainStep::Kind::kAct:
        if (s.act.is_none()) fail(i, "an activation step without an activation");
        // Its forward is a kernel; its backward is the next step's mask.
        if (i + 1 >= steps.size() || !steps[i + 1].mask_input)
          fail(i, str("activation step (", activation_text(s.act),
                      ") whose backward no step after it runs"));
        break;
    }
    if (s.mask_input) {
      const ChainStep* prev = i > 0 ? &steps[i - 1] : nullptr;
      const bool relu_before =
          prev && is_relu(prev->act) &&
          (prev->kind == ChainStep::Kind::kAct || prev->kind == ChainStep::Kind::kConv ||
           prev->kind == ChainStep::Kind::kLinear);
      if (!relu_before) fail(i, "masks its input, but the step before it ends in no ReLU");
    }
  }
  if (layers < 2) throw RuntimeError(str("fused layer '", who, "' runs one layer only"));
}

}  // namespace

std::string ChainStep::text() const {
  switch (kind) {
    case Kind::kConv: {
      std::string t = fold > 1 ? str("upsample2d x", fold, " + ") : std::string();
      t += "conv2d " + conv2d_describe(conv);
      if (!act.is_none()) t += " + " + activation_text(act);
      return t;
    }
    case Kind::kLinear:
      return "linear " + linear_describe(linear) +
             (act.is_none() ? std::string() : " + " + activation_text(act));
    case Kind::kMaxPool: return "maxpool2d " + maxpool2d_describe(win);
    case Kind::kUpsample: return "upsample2d " + upsample2d_describe(scale);
    case Kind::kAct: return activation_text(act);
  }
  return "?";
}

Shape chain_step_output(const ChainStep& s, const Shape& in) {
  switch (s.kind) {
    case ChainStep::Kind::kConv:
      return conv2d_output_shape(s.conv, s.fold > 1 ? upsample2d_output_shape(s.fold, in) : in);
    case ChainStep::Kind::kLinear: return linear_output_shape(s.linear, in);
    case ChainStep::Kind::kMaxPool: return maxpool2d_output_shape(s.win, in);
    case ChainStep::Kind::kUpsample: return upsample2d_output_shape(s.scale, in);
    case ChainStep::Kind::kAct: return in;
  }
  return in;
}

const LayerSchema& FusedChainSpec::static_schema() {
  static const LayerSchema s{LayerKind::kFused, "fused",
                             "consecutive layers run as one by the GPU rewrite "
                             "(model/gpu_rewrite.h); not a config type",
                             {}};
  return s;
}

FusedChainSpec::FusedChainSpec(std::vector<ChainStep> steps)
    : Layer(joined(steps, "+")), steps_(std::move(steps)) {
  check_steps(steps_, name());
}

std::string FusedChainSpec::describe() const {
  std::string d;
  for (const ChainStep& s : steps_) d += (d.empty() ? "" : " > ") + s.text();
  return d;
}

std::vector<std::string> FusedChainSpec::layer_names() const {
  std::vector<std::string> names;
  for (const ChainStep& s : steps_) names.insert(names.end(), s.layers.begin(), s.layers.end());
  return names;
}

Shape FusedChainSpec::step_input(size_t i, const Shape& in) const {
  Shape cur = in;
  for (size_t k = 0; k < i && k < steps_.size(); ++k) cur = chain_step_output(steps_[k], cur);
  return cur;
}

Shape FusedChainSpec::output_shape(const Shape& in) const {
  return step_input(steps_.size(), in);
}

std::vector<ParamSpec> FusedChainSpec::param_specs() const {
  std::vector<ParamSpec> specs;
  for (const ChainStep& s : steps_) {
    if (s.kind != ChainStep::Kind::kConv && s.kind != ChainStep::Kind::kLinear) continue;
    const bool conv = s.kind == ChainStep::Kind::kConv;
    for (ParamSpec p : conv ? conv2d_param_specs(s.conv) : linear_param_specs(s.linear)) {
      p.name = s.owner + "." + p.name;
      specs.push_back(std::move(p));
    }
  }
  return specs;
}

bool FusedChainSpec::absorbed(size_t i) const {
  return steps_.at(i).kind == ChainStep::Kind::kAct && i + 1 < steps_.size() &&
         steps_[i + 1].mask_input;
}

bool FusedChainSpec::act_backward_here(size_t i) const {
  const ChainStep& s = steps_.at(i);
  return (s.kind == ChainStep::Kind::kConv || s.kind == ChainStep::Kind::kLinear) &&
         !s.act.is_none() &&
         !(i + 1 < steps_.size() && steps_[i + 1].mask_input);
}

size_t FusedChainSpec::grad_target(size_t i) const {
  return i > 0 && absorbed(i - 1) ? i - 1 : i;
}

double FusedChainSpec::forward_flops(const Shape& in) const {
  double f = 0;
  Shape cur = in;
  for (const ChainStep& s : steps_) {
    if (s.kind == ChainStep::Kind::kConv) {
      const Shape up = s.fold > 1 ? upsample2d_output_shape(s.fold, cur) : cur;
      f += conv2d_forward_flops(s.conv, up) * fold_share(s);
    }
    if (s.kind == ChainStep::Kind::kLinear) f += linear_forward_flops(s.linear, cur);
    cur = chain_step_output(s, cur);
  }
  return f;
}

double FusedChainSpec::backward_flops(const Shape& in, bool input_grad) const {
  double f = 0;
  Shape cur = in;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const ChainStep& s = steps_[i];
    if (s.kind == ChainStep::Kind::kConv) {
      const Shape up = s.fold > 1 ? upsample2d_output_shape(s.fold, cur) : cur;
      const bool dx = grad_target(i) > 0 || input_grad;
      f += conv2d_backward_flops(s.conv, up, dx) * fold_share(s);
    }
    if (s.kind == ChainStep::Kind::kLinear)
      f += linear_backward_flops(s.linear, cur, grad_target(i) > 0 || input_grad);
    cur = chain_step_output(s, cur);
  }
  return f;
}

}  // namespace hpmc
