// gpu_rewrite.cpp — the GPU rewrite's matching (plan_gpu_rewrite, on plain
// descriptions of the layers) and its application (gpu_rewrite.h).
#include "model/gpu_rewrite.h"

#include <cstring>

#include "core/error.h"
#include "layers/activation_spec.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/implicit_plan.h"
#include "layers/gpu/linear.h"

namespace hpmc {

RewriteNode rewrite_node(const Layer& layer) {
  RewriteNode n;
  n.name = layer.name();
  n.in = layer.input_shape();
  n.impl = layer.impl();
  switch (layer.kind()) {
    case LayerKind::kConv2d: {
      const auto& conv = dynamic_cast<const Conv2dSpec&>(layer);
      n.role = RewriteNode::Role::kConv;
      n.conv = conv.config();
      n.im2col = layer.device() == Device::kGPU && n.impl == "im2col";
      break;
    }
    case LayerKind::kLinear:
      n.role = RewriteNode::Role::kLinear;
      n.linear = dynamic_cast<const LinearSpec&>(layer).config();
      n.epilogue = layer.device() == Device::kGPU && n.impl == "im2col" &&
                   gpu::LinearProducts::has_epilogue(gpu::Family::kIm2col, layer.precision());
      break;
    case LayerKind::kReLU:
      n.role = RewriteNode::Role::kAct;
      n.act = Activation::relu();
      break;
    case LayerKind::kLeakyReLU:
      n.role = RewriteNode::Role::kAct;
      n.act = Activation::leaky_relu(dynamic_cast<const LeakyReLUSpec&>(layer).negative_slope());
      break;
    case LayerKind::kSigmoid:
      n.role = RewriteNode::Role::kAct;
      n.act = Activation::sigmoid();
      break;
    case LayerKind::kTanh:
      n.role = RewriteNode::Role::kAct;
      n.act = Activation::tanh();
      break;
    case LayerKind::kPReLU:  // the epilogue could apply it, but not train its slopes
      n.role = RewriteNode::Role::kAct;
      n.act = Activation::prelu(nullptr);
      break;
    case LayerKind::kMaxPool2d: {
      const auto& pool = dynamic_cast<const MaxPool2dSpec&>(layer);
      n.role = RewriteNode::Role::kMaxPool;
      n.win = PoolWindow{pool.kernel(), pool.stride()};
      break;
    }
    case LayerKind::kUpSample2d: {
      const auto& up = dynamic_cast<const UpSample2dSpec&>(layer);
      n.role = RewriteNode::Role::kUpsample;
      n.scale = up.scale();
      n.nearest = up.interpolation() == UpsampleMode::kNearest;
      break;
    }
    default: break;
  }
  return n;
}

namespace {

using Role = RewriteNode::Role;

bool is(const std::vector<RewriteNode>& v, int i, Role r) {
  return i >= 0 && i < int(v.size()) && v[size_t(i)].role == r;
}

// The pass's decisions, link by link (between layer i and i + 1 unless said).
class Matcher {
 public:
  Matcher(const std::vector<RewriteNode>& nodes, const RewriteOptions& o)
      : v_(nodes), o_(o), n_(int(nodes.size())) {}

  RewritePlan run() {
    fold_.assign(size_t(n_), false);
    epilogue_.assign(size_t(n_), false);
    mask_.assign(size_t(n_), false);
    // The fold first: a ReLU's mask then goes to the folded conv after the upsample.
    for (int i = 0; i + 1 < n_; ++i) fold_[size_t(i)] = fold(i);
    for (int a = 0; a < n_; ++a) {
      if (!is(v_, a, Role::kAct)) continue;
      epilogue_[size_t(a)] = epilogue(a);
      mask_[size_t(a)] = mask(a);
    }
    RewritePlan plan;
    for (int first = 0; first < n_;) {
      int last = first;
      while (last + 1 < n_ && joined(last)) ++last;
      RewritePlan::Group g;
      g.first = first;
      g.last = last;
      if (last > first) g.steps = steps(first, last);
      plan.groups.push_back(std::move(g));
      first = last + 1;
    }
    plan.declined = std::move(declined_);
    return plan;
  }

 private:
  const RewriteNode& at(int i) const { return v_[size_t(i)]; }
  // Whether model.features is one of layers [j, k − 1]: a link from j to k
  // would then hide its output.
  bool hides_features(int j, int k) const { return o_.features >= j && o_.features < k; }
  std::string features_reason(int f) const {
    return str(at(f).name, " is model.features (its output must stay formed)");
  }
  void decline(const std::string& what, const std::string& why) {
    declined_.push_back(what + ": " + why);
  }

  // fold: upsample i into conv i + 1.
  bool fold(int i) {
    if (!is(v_, i, Role::kUpsample) || !is(v_, i + 1, Role::kConv)) return false;
    const RewriteNode &up = at(i), &conv = at(i + 1);
    const std::string what = str(up.name, " not folded into ", conv.name);
    std::string why;
    if (!o_.fold) why = "training.fold_upsample is false";
    else if (hides_features(i, i + 1)) why = features_reason(i);
    else if (!conv.im2col)
      why = str(conv.name, " runs impl ", conv.impl, "; the fold is an im2col kernel");
    else if (!up.nearest)
      why = str(up.name, " is bilinear; the fold takes a nearest x2 upsample");
    else if (up.scale != 2) why = str("the fold takes a nearest x2 upsample, not x", up.scale);
    else if (!gpu::implicit_detail::upconv_fold_applies(conv2d_shape(conv.conv, conv.in)))
      why = str(conv.name, " (", conv.conv.in_channels, "->", conv.conv.out_channels, " ",
                conv2d_describe(conv.conv), " on ", conv.in.h, "x", conv.in.w,
                ") is not a shape the fold takes: 3x3 s1 p1 on an even map, with in and out "
                "channels multiples of 8 (out more than 4), or at most 4 out channels (3x3 s1 "
                "p1 or 5x5 s1 p2)");
    if (why.empty()) return true;
    decline(what, why);
    return false;
  }

  // Whether layer i is a linear layer whose products have an epilogue (a
  // linear layer without one links to nothing, silently: gpu_rewrite.h).
  bool linear_with_epilogue(int i) const { return is(v_, i, Role::kLinear) && at(i).epilogue; }

  // epilogue: activation a into the conv (folded or not) or linear layer before it.
  bool epilogue(int a) {
    if (!is(v_, a - 1, Role::kConv) && !linear_with_epilogue(a - 1)) return false;
    const RewriteNode &act = at(a), &prod = at(a - 1);  // the conv or linear layer
    const std::string what = str(act.name, " not in the epilogue of ", prod.name);
    std::string why;
    if (hides_features(a - 1, a)) why = features_reason(a - 1);
    else if (prod.role == Role::kConv && !prod.im2col)
      why = str(prod.name, " runs impl ", prod.impl, "; the epilogue is an im2col kernel's");
    else if (act.act.is_none()) why = str(act.name, " has no epilogue form");
    else if (act.act.kind == ActKind::kPrelu)
      why = "prelu's slope gradient needs its input, which the epilogue does not keep";
    else if (prod.role == Role::kLinear && !gpu::LinearProducts::epilogue_takes(act.act))
      why = str("the linear products' epilogue takes relu and leaky_relu, not ",
                activation_text(act.act));
    else if (act.act.kind == ActKind::kLeakyRelu && !(act.act.slope >= 0))
      why = "leaky_relu with a negative slope: its backward needs its input";
    if (why.empty()) return true;
    decline(what, why);
    return false;
  }

  // mask: the backward of activation a in the layer after it (the upsample
  // folded into a conv counts as that conv; a linear layer applies it to its
  // input gradient).
  bool mask(int a) {
    const int next = a + 1;
    if (!is(v_, next, Role::kMaxPool) && !is(v_, next, Role::kUpsample) &&
        !linear_with_epilogue(next))
      return false;
    const RewriteNode& act = at(a);
    const int owner = fold_[size_t(next)] ? next + 1 : next;  // the layer whose backward runs it
    const std::string what = str(act.name, "'s backward not in ", at(owner).name);
    std::string why;
    if (hides_features(a, next)) why = features_reason(a);
    else if (act.act.kind != ActKind::kRelu)
      why = str(activation_text(act.act), "'s backward is not a mask (only relu's is)");
    else if (is(v_, next, Role::kUpsample) && !at(next).nearest)
      why = str(at(next).name, " is a bilinear upsample, whose backward takes no mask");
    else if (a <= o_.first_trained)
      why = str("no layer before ", act.name, " has parameters, so its backward never runs");
    if (why.empty()) return true;
    decline(what, why);
    return false;
  }

  // Whether layers k and k + 1 are in one fused layer.
  bool joined(int k) const {
    return fold_[size_t(k)] || (k + 1 < n_ && epilogue_[size_t(k + 1)]) || mask_[size_t(k)];
  }

  // The steps of group [first, last] (gpu_rewrite.h; fused_spec.h's rules
  // hold by construction: a masked step follows a ReLU, an activation step
  // stands first and is masked).
  std::vector<ChainStep> steps(int first, int last) const {
    std::vector<ChainStep> out;
    for (int k = first; k <= last; ++k) {
      const RewriteNode& node = at(k);
      ChainStep s;
      // The ReLU before layer k (or before its folded upsample) with its
      // backward here.
      const int before = k - 1;
      s.mask_input = before >= first && mask_[size_t(before)];
      switch (node.role) {
        case Role::kUpsample:
          if (fold_[size_t(k)]) {  // the upsample and the conv after it: one step
            const RewriteNode& conv = at(k + 1);
            s.kind = ChainStep::Kind::kConv;
            s.layers = {node.name, conv.name};
            s.conv = conv.conv;
            s.owner = conv.name;
            s.fold = 2;
            ++k;
            break;
          }
          s.kind = ChainStep::Kind::kUpsample;
          s.layers = {node.name};
          s.scale = node.scale;
          break;
        case Role::kConv:
          s.kind = ChainStep::Kind::kConv;
          s.layers = {node.name};
          s.conv = node.conv;
          s.owner = node.name;
          break;
        case Role::kLinear:
          s.kind = ChainStep::Kind::kLinear;
          s.layers = {node.name};
          s.linear = node.linear;
          s.owner = node.name;
          break;
        case Role::kMaxPool:
          s.kind = ChainStep::Kind::kMaxPool;
          s.layers = {node.name};
          s.win = node.win;
          break;
        case Role::kAct:  // not in an epilogue: the group starts with it
          s.kind = ChainStep::Kind::kAct;
          s.layers = {node.name};
          s.act = node.act;
          break;
        case Role::kOther:
          throw RuntimeError(str("GPU rewrite: layer '", node.name, "' linked into a fused layer"));
      }
      // The activation after a conv or linear step, in its epilogue.
      if ((s.kind == ChainStep::Kind::kConv || s.kind == ChainStep::Kind::kLinear) &&
          k + 1 <= last && epilogue_[size_t(k + 1)]) {
        s.act = at(k + 1).act;
        s.layers.push_back(at(k + 1).name);
        ++k;
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  const std::vector<RewriteNode>& v_;
  RewriteOptions o_;
  int n_;
  std::vector<bool> fold_;      // per upsample: folded into the conv after it
  std::vector<bool> epilogue_;  // per activation: in the epilogue of the conv before it
  std::vector<bool> mask_;      // per activation: its backward in the layer after it
  std::vector<std::string> declined_;
};

}  // namespace

RewritePlan plan_gpu_rewrite(const std::vector<RewriteNode>& nodes, const RewriteOptions& o) {
  return Matcher(nodes, o).run();
}

std::vector<LayerPtr> apply_gpu_rewrite(const RewritePlan& plan,
                                        const std::vector<LayerPtr>& layers) {
  std::vector<LayerPtr> out;
  for (const RewritePlan::Group& g : plan.groups) {
    HPMC_CHECK(g.first >= 0 && g.last < int(layers.size()) && g.first <= g.last,
               "GPU rewrite: group [", g.first, ", ", g.last, "] of ", layers.size(), " layers");
    if (g.steps.empty()) {
      out.push_back(layers[size_t(g.first)]);
      continue;
    }
    LayerPtr fused = gpu::make_fused_layer(g.steps);
    fused->set_input_shape(layers[size_t(g.first)]->input_shape());
    fused->set_precision(layers[size_t(g.first)]->precision());  // one per model
    out.push_back(std::move(fused));
  }
  return out;
}

}  // namespace hpmc
