// The GPU rewrite's matching (model/gpu_rewrite.h) and the fused layer's
// device-neutral rules (layers/fused_spec.h), on the CPU: no GPU is needed.
// The layers are described as an im2col GPU model would see them (the conv
// nodes marked im2col); which groups form, with which steps, and why the pass
// declines the rest. The shipped autoencoders must fuse exactly as the model
// fused them before the rewrite existed (the kernels they ran):
//   [conv1 relu1 pool1]  conv with the ReLU epilogue; the pool's backward with its mask
//   [conv2 relu2 pool2]  the same (pool2 is model.features: the group ends there)
//   [conv3 relu3 up1 conv4 relu4 up2 conv5]  each ReLU's forward in the conv before
//                        it, its backward in the folded conv after it
// and the MLPs not at all (their step is the fused MLP kernel or the layers).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/fused_spec.h"
#include "model/config.h"
#include "model/gpu_rewrite.h"
#include "model/model.h"
#include "model/params.h"
#include "model/registry.h"
#include "testing.h"

namespace hpmc {
namespace {

// The spec on its own, for its rules (the passes are the GPU class's).
class SpecOnly : public FusedChainSpec {
 public:
  using FusedChainSpec::FusedChainSpec;
  Device device() const override { return Device::kCPU; }
  const char* impl() const override { return "spec"; }

 protected:
  void forward_impl(const Tensor&, Tensor&) override { ADD_FAILURE() << "no passes here"; }
  void backward_impl(const Tensor&, const Tensor&, const Tensor&, Tensor*) override {
    ADD_FAILURE() << "no passes here";
  }
};

struct Plain {
  std::unique_ptr<Model> model;  // the CPU model: the plain layer list
  std::vector<RewriteNode> nodes;
  RewriteOptions opts;
};

// The nodes of a config's layers as an im2col GPU model has them (im2col =
// false: as a naive or tiled one; tensor_cores: in tf32 or bf16, where the
// linear layers' products have an epilogue), with the model's features and
// first trained layer.
Plain plain_of(const Config& cfg, const Shape& sample, bool im2col = true,
               bool tensor_cores = false) {
  Plain p;
  p.model = Model::build(cfg, Impl::kCpu, sample, 10);
  for (const LayerPtr& l : p.model->layers()) {
    RewriteNode n = rewrite_node(*l);
    if (n.role == RewriteNode::Role::kConv) {
      n.im2col = im2col;
      n.impl = im2col ? "im2col" : "tiled";
    }
    if (n.role == RewriteNode::Role::kLinear) n.epilogue = im2col && tensor_cores;
    p.nodes.push_back(n);
  }
  p.opts.fold = cfg.training.fold_upsample;
  p.opts.features = p.model->features_layer();
  p.opts.first_trained = 0;
  while (p.opts.first_trained < int(p.model->layers().size()) &&
         p.model->layers()[size_t(p.opts.first_trained)]->param_count() == 0)
    ++p.opts.first_trained;
  return p;
}

Plain shipped(const std::string& path, const Shape& sample, std::vector<Override> ov = {},
              bool im2col = true, bool tensor_cores = false) {
  return plain_of(load_config(testing::source_dir() + "/" + path, ov), sample, im2col,
                  tensor_cores);
}

// "[conv1 relu1 pool1] [conv2] ...": the groups, by config layer names.
std::string groups(const RewritePlan& plan, const std::vector<RewriteNode>& nodes) {
  std::string s;
  for (const auto& g : plan.groups) {
    s += s.empty() ? "[" : " [";
    for (int i = g.first; i <= g.last; ++i) s += (i > g.first ? " " : "") + nodes[size_t(i)].name;
    s += "]";
  }
  return s;
}

// The steps of every fused group: "conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2 (mask)", one a line.
std::string steps(const RewritePlan& plan) {
  std::string s;
  for (const auto& g : plan.groups) {
    if (g.steps.empty()) continue;
    std::string line;
    for (const ChainStep& st : g.steps)
      line += (line.empty() ? "" : " > ") + st.text() + (st.mask_input ? " (mask)" : "");
    s += line + "\n";
  }
  return s;
}

std::string declined(const RewritePlan& plan) {
  std::string s;
  for (const auto& d : plan.declined) s += d + "\n";
  return s;
}

const Shape kCifar(1, 3, 32, 32), kMnist(1, 1, 28, 28);

// The decoder's steps with both upsamples folded.
const char* kDecoderSteps =
    "conv2d 3x3 s1 p1 + relu > upsample2d x2 + conv2d 3x3 s1 p1 + relu (mask) > "
    "upsample2d x2 + conv2d 3x3 s1 p1 (mask)\n";

TEST(GpuRewrite, ShippedAutoencodersFuseAsTheirKernelsRan) {
  for (const auto& [path, sample] : {std::pair<std::string, Shape>{"configs/cifar_ae.yaml", kCifar},
                                     {"configs/fashion_ae.yaml", kMnist}}) {
    SCOPED_TRACE(path);
    Plain p = shipped(path, sample);
    ASSERT_EQ(p.nodes.size(), 13u);
    const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
    EXPECT_EQ(groups(plan, p.nodes),
              "[conv1 relu1 pool1] [conv2 relu2 pool2] [conv3 relu3 up1 conv4 relu4 up2 conv5]");
    EXPECT_EQ(steps(plan), std::string("conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2 (mask)\n"
                                       "conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2 (mask)\n") +
                               kDecoderSteps);
    EXPECT_EQ(declined(plan), "");
    // Each conv step names its layer, the owner of its parameters.
    const auto& dec = plan.groups[2].steps;
    ASSERT_EQ(dec.size(), 3u);
    EXPECT_EQ(dec[1].owner, "conv4");
    EXPECT_EQ(dec[1].layers, (std::vector<std::string>{"up1", "conv4", "relu4"}));
    EXPECT_EQ(dec[2].layers, (std::vector<std::string>{"up2", "conv5"}));
    EXPECT_EQ(dec[2].fold, 2);
  }
}

// training.fold_upsample: false — each ReLU's backward goes to the upsample
// after it, as before the fold existed; conv5 stands alone.
TEST(GpuRewrite, WithoutTheFoldEachReluMasksTheUpsample) {
  Plain p = shipped("configs/cifar_ae.yaml", kCifar, {{"training.fold_upsample=false", ""}});
  const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
  EXPECT_EQ(groups(plan, p.nodes),
            "[conv1 relu1 pool1] [conv2 relu2 pool2] [conv3 relu3 up1] [conv4 relu4 up2] [conv5]");
  EXPECT_EQ(steps(plan),
            "conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2 (mask)\n"
            "conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2 (mask)\n"
            "conv2d 3x3 s1 p1 + relu > upsample2d nearest x2 (mask)\n"
            "conv2d 3x3 s1 p1 + relu > upsample2d nearest x2 (mask)\n");
  EXPECT_EQ(declined(plan),
            "up1 not folded into conv4: training.fold_upsample is false\n"
            "up2 not folded into conv5: training.fold_upsample is false\n");
  EXPECT_TRUE(plan.groups[4].steps.empty());  // conv5: the plain layer
}

// naive and tiled convolutions have no epilogue and no fold: each ReLU runs
// its forward kernel and its backward in the layer after it.
TEST(GpuRewrite, ConvsOfOtherImplsLeaveTheForwardAlone) {
  Plain p = shipped("configs/cifar_ae.yaml", kCifar, {}, /*im2col=*/false);
  const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
  EXPECT_EQ(groups(plan, p.nodes),
            "[conv1] [relu1 pool1] [conv2] [relu2 pool2] [conv3] [relu3 up1] [conv4] [relu4 up2] "
            "[conv5]");
  EXPECT_EQ(steps(plan),
            "relu > maxpool2d 2x2 s2 (mask)\nrelu > maxpool2d 2x2 s2 (mask)\n"
            "relu > upsample2d nearest x2 (mask)\nrelu > upsample2d nearest x2 (mask)\n");
  const std::string d = declined(plan);
  EXPECT_NE(d.find("relu1 not in the epilogue of conv1: conv1 runs impl tiled; the epilogue is an "
                   "im2col kernel's"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("up2 not folded into conv5: conv5 runs impl tiled; the fold is an im2col kernel"),
            std::string::npos)
      << d;
}

// model.features' output stays formed: no group runs past it.
TEST(GpuRewrite, NoGroupHidesTheFeaturesLayer) {
  struct Case {
    const char* features;
    const char* groups;
    const char* reason;
  };
  const Case cases[] = {
      {"conv1",
       "[conv1] [relu1 pool1] [conv2 relu2 pool2] [conv3 relu3 up1 conv4 relu4 up2 conv5]",
       "relu1 not in the epilogue of conv1: conv1 is model.features (its output must stay formed)"},
      {"relu1",
       "[conv1 relu1] [pool1] [conv2 relu2 pool2] [conv3 relu3 up1 conv4 relu4 up2 conv5]",
       "relu1's backward not in pool1: relu1 is model.features (its output must stay formed)"},
      {"up1", "[conv1 relu1 pool1] [conv2 relu2 pool2] [conv3 relu3 up1] [conv4 relu4 up2 conv5]",
       "up1 not folded into conv4: up1 is model.features (its output must stay formed)"},
      {"conv4",
       "[conv1 relu1 pool1] [conv2 relu2 pool2] [conv3 relu3 up1 conv4] [relu4 up2 conv5]",
       "relu4 not in the epilogue of conv4: conv4 is model.features (its output must stay formed)"},
      {"conv5",
       "[conv1 relu1 pool1] [conv2 relu2 pool2] [conv3 relu3 up1 conv4 relu4 up2 conv5]", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.features);
    Plain p = shipped("configs/cifar_ae.yaml", kCifar, {{str("model.features=", c.features), ""}});
    const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
    EXPECT_EQ(groups(plan, p.nodes), c.groups);
    EXPECT_EQ(declined(plan), *c.reason ? std::string(c.reason) + "\n" : "");
    bool ends = false;  // some group ends with the features layer
    for (const auto& g : plan.groups) ends |= g.last == p.opts.features;
    EXPECT_TRUE(ends);
  }
  // relu1 as features: [conv1 relu1] keeps the epilogue and runs the ReLU's
  // backward itself (its output is the layer's output).
  Plain p = shipped("configs/cifar_ae.yaml", kCifar, {{"model.features=relu1", ""}});
  const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
  SpecOnly f(plan.groups[0].steps);
  f.set_input_shape(kCifar);
  EXPECT_TRUE(f.act_backward_here(0));
  EXPECT_EQ(f.name(), "conv1+relu1");
}

TEST(GpuRewrite, MlpsAreLeftAsTheyAre) {
  for (const char* path : {"configs/mnist_mlp.yaml", "configs/fashion_mlp.yaml"}) {
    SCOPED_TRACE(path);
    Plain p = shipped(path, kMnist);
    const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
    EXPECT_EQ(groups(plan, p.nodes), "[flatten] [fc1] [relu1] [fc2] [relu2] [fc3]");
    EXPECT_EQ(declined(plan), "");
  }
}

// In tf32 and bf16 (the linear layers' products on the tensor-core engine,
// with an epilogue) an MLP is one fused layer up to model.features: each
// ReLU in the epilogue of the linear layer before it, its backward the mask
// of the next one's input gradient. mnist_mlp's features are relu2, whose
// output must stay formed: fc3 stays a layer of its own, and relu2's
// backward runs in the fused layer, from its output.
TEST(GpuRewrite, MlpsOnTensorCoresAreOneFusedLayer) {
  for (const char* path : {"configs/mnist_mlp.yaml", "configs/fashion_mlp.yaml"}) {
    SCOPED_TRACE(path);
    Plain p = shipped(path, kMnist, {}, true, /*tensor_cores=*/true);
    const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
    EXPECT_EQ(groups(plan, p.nodes), "[flatten] [fc1 relu1 fc2 relu2] [fc3]");
    EXPECT_EQ(steps(plan), "linear 784->320 + relu > linear 320->160 + relu (mask)\n");
    EXPECT_EQ(declined(plan), "relu2's backward not in fc3: relu2 is model.features (its output "
                              "must stay formed)\n");
    SpecOnly f(plan.groups[1].steps);
    f.set_input_shape(Shape(1, 784, 1, 1));
    EXPECT_FALSE(f.act_backward_here(0));  // relu1's backward: fc2's mask
    EXPECT_TRUE(f.act_backward_here(1));   // relu2's: from its output
    std::vector<std::string> names;
    for (const ParamSpec& s : f.param_specs()) names.push_back(s.name);
    EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
    const Shape b(64, 784, 1, 1);
    const double fc1 = 2.0 * 64 * 784 * 320, fc2 = 2.0 * 64 * 320 * 160;
    EXPECT_DOUBLE_EQ(f.forward_flops(b), fc1 + fc2);
    EXPECT_DOUBLE_EQ(f.backward_flops(b, true), 2 * fc1 + 2 * fc2);
    EXPECT_DOUBLE_EQ(f.backward_flops(b, false), fc1 + 2 * fc2);
    EXPECT_EQ(f.output_shape(b), Shape(64, 160, 1, 1));
  }
  // Without model.features: the whole MLP.
  Plain all = shipped("configs/mnist_mlp.yaml", kMnist, {}, true, true);
  all.opts.features = -1;
  const RewritePlan plan = plan_gpu_rewrite(all.nodes, all.opts);
  EXPECT_EQ(groups(plan, all.nodes), "[flatten] [fc1 relu1 fc2 relu2 fc3]");
  EXPECT_EQ(steps(plan), "linear 784->320 + relu > linear 320->160 + relu (mask) > "
                         "linear 160->10 (mask)\n");
  EXPECT_EQ(declined(plan), "");
}

// Hand-made node lists for the cases the configs do not reach.
RewriteNode conv(const std::string& name, int c, int k, int h, int w, bool im2col = true,
                 int kernel = 3, int pad = 1) {
  RewriteNode n;
  n.role = RewriteNode::Role::kConv;
  n.name = name;
  n.in = Shape(1, c, h, w);
  n.conv = Conv2dConfig{c, k, kernel, 1, pad, true};
  n.im2col = im2col;
  n.impl = im2col ? "im2col" : "naive";
  return n;
}
RewriteNode act(const std::string& name, Activation a = Activation::relu()) {
  RewriteNode n;
  n.role = RewriteNode::Role::kAct;
  n.name = name;
  n.act = a;
  return n;
}
RewriteNode pool(const std::string& name) {
  RewriteNode n;
  n.role = RewriteNode::Role::kMaxPool;
  n.name = name;
  n.win = PoolWindow{2, 2};
  return n;
}
RewriteNode up(const std::string& name, int scale = 2) {
  RewriteNode n;
  n.role = RewriteNode::Role::kUpsample;
  n.name = name;
  n.scale = scale;
  return n;
}
RewriteNode other(const std::string& name) {
  RewriteNode n;
  n.name = name;
  return n;
}

RewriteNode linear(const std::string& name, int in, int out, bool epilogue = true) {
  RewriteNode n;
  n.role = RewriteNode::Role::kLinear;
  n.name = name;
  n.in = Shape(1, in, 1, 1);
  n.linear = LinearConfig{in, out, true};
  n.epilogue = epilogue;
  n.impl = "im2col";
  return n;
}

RewritePlan plan_of(const std::vector<RewriteNode>& nodes, int first_trained = 0,
                    int features = -1, bool fold = true) {
  RewriteOptions o;
  o.fold = fold;
  o.features = features;
  o.first_trained = first_trained;
  return plan_gpu_rewrite(nodes, o);
}

// A ReLU's backward runs only where its input gradient is needed: not before
// the first layer with parameters (Model::backward never runs it there).
TEST(GpuRewrite, NoMaskBeforeTheFirstTrainedLayer) {
  const std::vector<RewriteNode> nodes = {act("r0"), pool("p0"), conv("c1", 1, 8, 14, 14),
                                          act("r1"), pool("p1")};
  const RewritePlan plan = plan_of(nodes, /*first_trained=*/2);
  EXPECT_EQ(groups(plan, nodes), "[r0] [p0] [c1 r1 p1]");
  EXPECT_EQ(declined(plan), "r0's backward not in p0: no layer before r0 has parameters, so its "
                            "backward never runs\n");
}

// Linear layers: the epilogue takes relu and leaky_relu (sigmoid and tanh
// stay layers of their own); only a ReLU's backward is a mask; no mask before the first trained layer; a
// linear layer without an epilogue (fp32) links to nothing and says nothing;
// a conv's ReLU before a linear layer masks it too.
TEST(GpuRewrite, LinearLayersLinkWhereTheirProductsHaveAnEpilogue) {
  {
    const std::vector<RewriteNode> nodes = {
        act("r0"), linear("fc1", 8, 9), act("l1", Activation::leaky_relu(0.1f)),
        linear("fc2", 9, 4), act("t2", Activation::tanh()), linear("fc3", 4, 4),
        act("p3", Activation::prelu(nullptr))};
    const RewritePlan plan = plan_of(nodes, /*first_trained=*/1);
    EXPECT_EQ(groups(plan, nodes), "[r0] [fc1 l1] [fc2] [t2] [fc3] [p3]");
    EXPECT_EQ(steps(plan), "linear 8->9 + leaky_relu(0.1)\n");
    EXPECT_EQ(declined(plan),
              "r0's backward not in fc1: no layer before r0 has parameters, so its backward never "
              "runs\n"
              "l1's backward not in fc2: leaky_relu(0.1)'s backward is not a mask (only relu's "
              "is)\n"
              "t2 not in the epilogue of fc2: the linear products' epilogue takes relu and "
              "leaky_relu, not tanh\n"
              "t2's backward not in fc3: tanh's backward is not a mask (only relu's is)\n"
              "p3 not in the epilogue of fc3: prelu's slope gradient needs its input, which the "
              "epilogue does not keep\n");
  }
  {
    const std::vector<RewriteNode> nodes = {linear("fc1", 8, 9, false), act("r1"),
                                            linear("fc2", 9, 4, false)};
    const RewritePlan plan = plan_of(nodes);
    EXPECT_EQ(groups(plan, nodes), "[fc1] [r1] [fc2]");
    EXPECT_EQ(declined(plan), "");
  }
  {
    const std::vector<RewriteNode> nodes = {conv("c1", 3, 8, 4, 4), act("r1"), other("flat"),
                                            linear("fc1", 128, 10), act("r2"), linear("fc2", 10, 3)};
    const RewritePlan plan = plan_of(nodes);
    EXPECT_EQ(groups(plan, nodes), "[c1 r1] [flat] [fc1 r2 fc2]");
    EXPECT_EQ(steps(plan), "conv2d 3x3 s1 p1 + relu\nlinear 128->10 + relu > linear 10->3 (mask)\n");
  }
}

// The epilogue takes relu, leaky_relu (slope ≥ 0), sigmoid and tanh, and a
// [conv2d, act] that nothing after it masks runs the activation's backward
// itself; prelu stays a layer of its own. Only a ReLU's backward is a mask.
TEST(GpuRewrite, EpilogueActivationsAndWhoTakesTheirBackward) {
  const Activation kinds[] = {Activation::relu(), Activation::leaky_relu(0.1f),
                              Activation::sigmoid(), Activation::tanh()};
  for (const Activation& a : kinds) {
    SCOPED_TRACE(activation_text(a));
    const std::vector<RewriteNode> nodes = {conv("c1", 3, 8, 8, 8), act("a1", a), pool("p1"),
                                            conv("c2", 8, 8, 4, 4), act("a2", a), other("flat")};
    const RewritePlan plan = plan_of(nodes);
    const bool relu = a.kind == ActKind::kRelu;
    EXPECT_EQ(groups(plan, nodes), relu ? "[c1 a1 p1] [c2 a2] [flat]" : "[c1 a1] [p1] [c2 a2] [flat]");
    const std::string t = activation_text(a);
    EXPECT_EQ(steps(plan), relu ? "conv2d 3x3 s1 p1 + relu > maxpool2d 2x2 s2 (mask)\n"
                                  "conv2d 3x3 s1 p1 + relu\n"
                                : "conv2d 3x3 s1 p1 + " + t + "\nconv2d 3x3 s1 p1 + " + t + "\n");
    EXPECT_EQ(declined(plan), relu ? "" : "a1's backward not in p1: " + t +
                                              "'s backward is not a mask (only relu's is)\n");
    const auto& last = relu ? plan.groups[1] : plan.groups[2];
    SpecOnly f(last.steps);
    EXPECT_TRUE(f.act_backward_here(0)) << "the [conv2d, act] at the end runs the act's backward";
  }
  const std::vector<RewriteNode> nodes = {conv("c1", 3, 8, 8, 8), act("p", Activation::prelu(nullptr)),
                                          pool("p1")};
  const RewritePlan plan = plan_of(nodes);
  EXPECT_EQ(groups(plan, nodes), "[c1] [p] [p1]");
  EXPECT_EQ(declined(plan),
            "p not in the epilogue of c1: prelu's slope gradient needs its input, which the "
            "epilogue does not keep\n"
            "p's backward not in p1: prelu's backward is not a mask (only relu's is)\n");
}

// The fold takes a nearest ×2 upsample into an im2col 3×3 pad-1 conv (or a
// 5×5 pad-2 one of at most 4 outputs) of the shapes implicit::upconv_applies
// takes, and says why not otherwise.
TEST(GpuRewrite, TheFoldTakesWhatItsKernelsTake) {
  struct Case {
    RewriteNode upsample, conv;
    const char* reason;  // "" when it folds
  };
  const Case cases[] = {
      {up("u"), conv("c", 8, 8, 12, 12), ""},
      {up("u"), conv("c", 16, 32, 12, 12), ""},
      {up("u"), conv("c", 8, 1, 12, 12), ""},  // the thin fold: K ≤ 4, any C
      {up("u"), conv("c", 5, 3, 12, 12), ""},
      {up("u"), conv("c", 256, 3, 12, 12, true, 5, 2), ""},  // the thin fold of a 5×5
      {up("u"), conv("c", 8, 8, 12, 12, true, 5, 2), "is not a shape the fold takes"},  // 5×5, K > 4
      {up("u"), conv("c", 8, 3, 12, 12, true, 5, 1), "is not a shape the fold takes"},  // 5×5 p1
      {up("u"), conv("c", 8, 8, 12, 12, /*im2col=*/false), "c runs impl naive; the fold is an im2col kernel"},
      {up("u"), conv("c", 4, 8, 12, 12), "is not a shape the fold takes"},  // C % 8
      {up("u"), conv("c", 8, 8, 12, 12, true, 3, 0), "is not a shape the fold takes"},  // pad 0
      {up("u"), conv("c", 8, 8, 12, 12, true, 1, 0), "is not a shape the fold takes"},  // 1×1
      {up("u", 3), conv("c", 8, 8, 12, 12), "the fold takes a nearest x2 upsample, not x3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str(c.conv.conv.in_channels, "->", c.conv.conv.out_channels, " ",
                     conv2d_describe(c.conv.conv), " x", c.upsample.scale, " ", c.conv.impl));
    const std::vector<RewriteNode> nodes = {c.upsample, c.conv};
    const RewritePlan plan = plan_of(nodes);
    if (!*c.reason) {
      EXPECT_EQ(groups(plan, nodes), "[u c]");
      ASSERT_EQ(plan.groups[0].steps.size(), 1u);
      EXPECT_EQ(plan.groups[0].steps[0].fold, 2);
      EXPECT_EQ(declined(plan), "");
    } else {
      EXPECT_EQ(groups(plan, nodes), "[u] [c]");
      EXPECT_NE(declined(plan).find(c.reason), std::string::npos) << declined(plan);
    }
  }
}

// A bilinear upsample neither folds nor takes a ReLU's mask (its backward is
// a gather of its own, resample_kernels.h).
TEST(GpuRewrite, BilinearUpsamplesStayApart) {
  RewriteNode bi = up("u");
  bi.nearest = false;
  const std::vector<RewriteNode> nodes = {conv("c1", 8, 8, 6, 6), act("r1"), bi,
                                          conv("c2", 8, 8, 12, 12)};
  const RewritePlan plan = plan_of(nodes);
  EXPECT_EQ(groups(plan, nodes), "[c1 r1] [u] [c2]");
  EXPECT_EQ(declined(plan),
            "u not folded into c2: u is bilinear; the fold takes a nearest x2 upsample\n"
            "r1's backward not in u: u is a bilinear upsample, whose backward takes no mask\n");
}

// What the pass reads off the layers themselves: kinds, configs, slopes.
TEST(GpuRewrite, NodesOfBuiltLayers) {
  const Shape in(1, 4, 6, 6);
  const RewriteNode c = rewrite_node(*make_layer("conv2d", "{out_channels: 8, kernel: 3, padding: 1}",
                                                 Impl::kCpu, in, "c"));
  EXPECT_EQ(c.role, RewriteNode::Role::kConv);
  EXPECT_EQ(c.conv.out_channels, 8);
  EXPECT_EQ(c.conv.in_channels, 4);
  EXPECT_FALSE(c.im2col);  // a CPU layer
  EXPECT_EQ(c.in, in);
  const RewriteNode l =
      rewrite_node(*make_layer("leaky_relu", "{negative_slope: 0.2}", Impl::kCpu, in, "l"));
  EXPECT_EQ(l.role, RewriteNode::Role::kAct);
  EXPECT_EQ(l.act.kind, ActKind::kLeakyRelu);
  EXPECT_FLOAT_EQ(l.act.slope, 0.2f);
  EXPECT_EQ(rewrite_node(*make_layer("sigmoid", "", Impl::kCpu, in, "s")).act.kind,
            ActKind::kSigmoid);
  EXPECT_EQ(rewrite_node(*make_layer("tanh", "", Impl::kCpu, in, "t")).act.kind, ActKind::kTanh);
  EXPECT_EQ(rewrite_node(*make_layer("prelu", "", Impl::kCpu, in, "p")).act.kind, ActKind::kPrelu);
  const RewriteNode m =
      rewrite_node(*make_layer("maxpool2d", "{kernel: 3, stride: 2}", Impl::kCpu, in, "m"));
  EXPECT_EQ(m.role, RewriteNode::Role::kMaxPool);
  EXPECT_EQ(m.win.kernel, 3);
  EXPECT_EQ(m.win.stride, 2);
  const RewriteNode fc = rewrite_node(
      *make_layer("linear", "{out_features: 7}", Impl::kCpu, Shape(1, 144, 1, 1), "fc"));
  EXPECT_EQ(fc.role, RewriteNode::Role::kLinear);
  EXPECT_EQ(fc.linear.in_features, 144);
  EXPECT_EQ(fc.linear.out_features, 7);
  EXPECT_FALSE(fc.epilogue);  // a CPU layer
  for (const char* other : {"avgpool2d", "batchnorm2d", "dropout", "flatten"})
    EXPECT_EQ(rewrite_node(*make_layer(other, "", Impl::kCpu, in, "o")).role,
              RewriteNode::Role::kOther)
        << other;
}

// The models with batch norm: the norm sits between each conv and its
// activation, so no activation joins a conv but the output's sigmoid; the two
// upsamples fold, the second with the sigmoid in its epilogue (its backward
// run from y). prelu and leaky_relu before an upsample: no mask (not a ReLU).
TEST(GpuRewrite, ShippedBatchNormModels) {
  for (const auto& [path, sample] :
       {std::pair<std::string, Shape>{"configs/cifar_ae_bn.yaml", kCifar},
        {"configs/fashion_ae_bn.yaml", kMnist}}) {
    SCOPED_TRACE(path);
    Plain p = shipped(path, sample);
    const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
    std::string fused;
    for (const auto& g : plan.groups)
      if (!g.steps.empty()) fused += groups(RewritePlan{{g}, {}}, p.nodes) + " ";
    EXPECT_EQ(fused, "[up1 conv4] [up2 conv5 out] ") << groups(plan, p.nodes);
    EXPECT_EQ(steps(plan), "upsample2d x2 + conv2d 3x3 s1 p1 no-bias\n"
                           "upsample2d x2 + conv2d 3x3 s1 p1 + sigmoid\n");
  }
}

// ---- the fused layer's own rules (fused_spec.h) ---------------------------------------

ChainStep conv_step(const std::string& name, int c, int k, Activation a = Activation::none(),
                    int fold = 1) {
  ChainStep s;
  s.kind = ChainStep::Kind::kConv;
  s.conv = Conv2dConfig{c, k, 3, 1, 1, true};
  s.owner = name;
  s.layers = {name};
  s.act = a;
  s.fold = fold;
  return s;
}

std::string spec_error(std::vector<ChainStep> steps) {
  try {
    SpecOnly f(std::move(steps));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FusedSpec, RefusesStepsThatDoNotMakeAFusedLayer) {
  ChainStep p;
  p.kind = ChainStep::Kind::kMaxPool;
  p.win = PoolWindow{2, 2};
  p.layers = {"pool"};
  ChainStep masked = p;
  masked.mask_input = true;
  ChainStep r;
  r.kind = ChainStep::Kind::kAct;
  r.act = Activation::relu();
  r.layers = {"relu"};
  EXPECT_NE(spec_error({conv_step("c", 3, 8), masked}).find("no ReLU"), std::string::npos);
  EXPECT_NE(spec_error({conv_step("c", 3, 8, Activation::sigmoid()), masked}).find("no ReLU"),
            std::string::npos);
  EXPECT_NE(spec_error({r, p}).find("whose backward no step after it runs"), std::string::npos);
  EXPECT_NE(spec_error({conv_step("c", 3, 8, Activation::prelu(nullptr)), p}).find("prelu"),
            std::string::npos);
  EXPECT_NE(spec_error({conv_step("c", 3, 8, Activation::leaky_relu(-0.5f)), p}).find("slope"),
            std::string::npos);
  ChainStep five = conv_step("c", 3, 8, Activation::none(), 2);
  five.conv.kernel = 5;
  five.conv.padding = 2;
  EXPECT_EQ(spec_error({five, p}), "(no error)");  // the thin fold's 5×5 pad 2
  five.conv.padding = 1;
  EXPECT_NE(spec_error({five, p}).find("3x3 pad-1 or 5x5 pad-2 stride-1"), std::string::npos);
  five.conv.kernel = 7;
  five.conv.padding = 3;
  EXPECT_NE(spec_error({five, p}).find("3x3 pad-1 or 5x5 pad-2 stride-1"), std::string::npos);
  ChainStep unfolded_mask = conv_step("d", 8, 8);
  unfolded_mask.mask_input = true;
  EXPECT_NE(spec_error({conv_step("c", 3, 8, Activation::relu()), unfolded_mask})
                .find("only a folded conv applies the mask"),
            std::string::npos);
  EXPECT_NE(spec_error({p}).find("runs one layer only"), std::string::npos);
  EXPECT_NE(spec_error({}).find("at least one step"), std::string::npos);
  EXPECT_EQ(spec_error({r, masked}), "(no error)");
  EXPECT_EQ(spec_error({conv_step("c", 3, 8, Activation::relu()), masked}), "(no error)");
  ChainStep fc;
  fc.kind = ChainStep::Kind::kLinear;
  fc.linear = LinearConfig{8, 4, true};
  fc.layers = {"fc"};
  ChainStep fc_masked = fc;
  fc_masked.mask_input = true;
  EXPECT_NE(spec_error({r, fc_masked}).find("a linear step without its layer's name"),
            std::string::npos);
  fc.owner = fc_masked.owner = "fc";
  EXPECT_EQ(spec_error({r, fc_masked}), "(no error)");
  fc.act = Activation::relu();
  EXPECT_EQ(spec_error({fc, masked}), "(no error)");  // a linear's ReLU masks a pool
  fc.act = Activation::sigmoid();
  EXPECT_NE(spec_error({fc, fc_masked}).find("no ReLU"), std::string::npos);
}

// Shapes, names, parameters and FLOPs of the decoder's fused layer (cifar_ae's
// conv3 … conv5 on 128×8×8).
TEST(FusedSpec, TheDecoderLayer) {
  Plain p = shipped("configs/cifar_ae.yaml", kCifar);
  const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
  SpecOnly f(plan.groups[2].steps);
  const Shape in(1, 128, 8, 8);
  f.set_input_shape(in);
  EXPECT_EQ(f.name(), "conv3+relu3+up1+conv4+relu4+up2+conv5");
  EXPECT_EQ(f.kind(), LayerKind::kFused);
  EXPECT_EQ(std::string(f.type()), "fused");
  EXPECT_EQ(f.describe(), "conv2d 3x3 s1 p1 + relu > upsample2d x2 + conv2d 3x3 s1 p1 + relu > "
                          "upsample2d x2 + conv2d 3x3 s1 p1");
  EXPECT_EQ(f.layer_names(), (std::vector<std::string>{"conv3", "relu3", "up1", "conv4", "relu4",
                                                       "up2", "conv5"}));
  EXPECT_EQ(f.output_shape(in.with_batch(64)), Shape(64, 3, 32, 32));
  EXPECT_EQ(f.step_input(1, in), Shape(1, 128, 8, 8));   // the fold's low resolution
  EXPECT_EQ(f.step_input(2, in), Shape(1, 256, 16, 16));
  EXPECT_EQ(f.param_prefix(), "");
  std::vector<std::string> names;
  for (const ParamSpec& s : f.param_specs()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv3.weight", "conv3.bias", "conv4.weight",
                                             "conv4.bias", "conv5.weight", "conv5.bias"}));
  EXPECT_FALSE(f.act_backward_here(0));  // relu3's backward: conv4's mask
  EXPECT_FALSE(f.act_backward_here(1));
  EXPECT_EQ(f.grad_target(2), 2u);
  // FLOPs: the plain layers' sum, the folded convs at 4/9.
  const Shape b = in.with_batch(64);
  const Model& m = *p.model;
  double fwd = 0, bwd = 0;
  Shape cur = Shape(64, 3, 32, 32);
  std::vector<double> lf, lb;
  for (const LayerPtr& l : m.layers()) {
    lf.push_back(l->forward_flops(cur));
    lb.push_back(l->backward_flops(cur, true));
    cur = l->output_shape(cur);
  }
  const double share = 4.0 / 9.0;  // the fold's multiply-adds (conv2d_kernels.h)
  fwd = lf[6] + lf[9] * share + lf[12] * share;
  bwd = lb[6] + lb[9] * share + lb[12] * share;
  EXPECT_DOUBLE_EQ(f.forward_flops(b), fwd);
  EXPECT_DOUBLE_EQ(f.backward_flops(b, true), bwd);
  EXPECT_LT(f.backward_flops(b, false), bwd);  // conv3's data gradient skipped
}

// A model's parameter store (and so its checkpoints and initial weights) is
// the same with fused layers as with the config's: the same names, shapes,
// offsets, fan-ins and initialisation, in the same order.
TEST(FusedSpec, ParameterStoreUnchangedByFusion) {
  for (const char* path : {"configs/cifar_ae.yaml", "configs/fashion_ae.yaml"}) {
    SCOPED_TRACE(path);
    Plain p = shipped(path, std::string(path).find("cifar") != std::string::npos ? kCifar : kMnist);
    const RewritePlan plan = plan_gpu_rewrite(p.nodes, p.opts);
    std::vector<LayerPtr> run;
    for (const auto& g : plan.groups) {
      if (g.steps.empty()) {
        run.push_back(p.model->layers()[size_t(g.first)]);
        continue;
      }
      auto f = std::make_shared<SpecOnly>(g.steps);
      f->set_input_shape(p.model->layers()[size_t(g.first)]->input_shape());
      run.push_back(f);
    }
    ASSERT_EQ(run.size(), 3u);
    ParamStore fused;
    fused.build(run, Device::kCPU);
    fused.init(7);
    ParamStore& plain = p.model->params();
    plain.init(7);
    ASSERT_EQ(fused.entries().size(), plain.entries().size());
    for (size_t i = 0; i < plain.entries().size(); ++i) {
      const ParamEntry &a = fused.entries()[i], &b = plain.entries()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.dims, b.dims) << b.name;
      EXPECT_EQ(a.offset, b.offset) << b.name;
      EXPECT_EQ(a.fan_in, b.fan_in) << b.name;
    }
    ASSERT_EQ(fused.padded(), plain.padded());
    EXPECT_EQ(std::memcmp(fused.params().raw(), plain.params().raw(), plain.params().bytes()), 0);
  }
}

}  // namespace
}  // namespace hpmc
