// gpu_rewrite.h — the GPU optimisation pass: Model::build makes the plain
// layer list the config describes, then, for a GPU model with training.fuse,
// this pass replaces runs of layers by fused layers (layers/fused_spec.h)
// whose kernels do the work between neighbours.
//
// Three patterns link neighbouring layers:
//   epilogue  [conv2d | linear, act]: the activation's forward runs in the
//             epilogue of the convolution or linear layer before it (an
//             im2col conv2d, folded or not; an im2col linear in tf32 or
//             bf16, whose products run on the tensor-core engine; act: relu,
//             leaky_relu with slope ≥ 0, and after a conv also sigmoid and
//             tanh — not prelu, whose slope gradient needs the input the
//             epilogue does not keep)
//   mask      [relu, maxpool2d | upsample2d nearest | upsample2d+conv2d folded |
//             linear (tf32, bf16)]: the ReLU's backward runs in the backward
//             of the layer after it, as the mask x > 0 of that layer's input
//             (the ReLU's output); only where the ReLU's input gradient is
//             needed (a layer with parameters comes before it), as
//             Model::backward would run it
//   fold      [upsample2d nearest x2, conv2d]: the upsample runs inside the
//             convolution after it (training.fold_upsample; im2col, and the
//             shapes implicit::upconv_applies takes). Unlike the other two,
//             it changes results by rounding (conv2d_kernels.h, upconv_*).
// Linked layers form one fused layer; a layer linked to nothing stays as it
// is. So [conv2d, relu, maxpool2d] becomes one layer (the conv with the ReLU
// epilogue, the pool; backward: the pool's with the ReLU mask, then the conv's),
// and a decoder [conv2d, relu, upsample2d, conv2d, relu, upsample2d, conv2d]
// another: each ReLU's forward is in the conv before it and its backward in
// the folded conv after it, so the two cannot be cut apart without a kernel
// of their own. A [conv2d, relu] that nothing after it links to keeps the
// epilogue and runs the ReLU's backward kernel itself.
//
// model.features names a layer whose output must stay formed (Model::forward
// stops there): no link crosses the boundary after it, so a fused layer ends
// there or does not contain it. Every pattern but the fold keeps the bits of
// the layers it replaces, and the checkpoint names of their parameters.
//
// The matching runs on RewriteNodes, plain descriptions of the layers, so
// that it is tested without a GPU (tests/test_rewrite.cpp); only
// apply_gpu_rewrite creates GPU layers.
#pragma once

#include <string>
#include <vector>

#include "layers/conv2d_spec.h"
#include "layers/epilogue_act.h"
#include "layers/fused_spec.h"
#include "layers/layer.h"
#include "layers/linear_spec.h"
#include "layers/pool_spec.h"

namespace hpmc {

// What the pass needs to know of one layer of the plain list.
struct RewriteNode {
  enum class Role { kOther, kConv, kLinear, kAct, kMaxPool, kUpsample };
  Role role = Role::kOther;
  std::string name;
  Shape in;  // per-sample input shape
  // kConv
  Conv2dConfig conv;
  bool im2col = false;  // runs the implicit-GEMM kernels (the epilogue and the fold are theirs)
  std::string impl;     // the implementation, for the reasons
  // kLinear
  LinearConfig linear;
  bool epilogue = false;  // its products run on the tensor-core engine (im2col; tf32, bf16)
  // kAct: its epilogue form (relu, leaky_relu(slope), sigmoid, tanh, prelu)
  Activation act;
  // kMaxPool
  PoolWindow win;
  // kUpsample
  int scale = 0;
  bool nearest = true;
};

// The node of a built layer (its kind, config and input shape).
RewriteNode rewrite_node(const Layer& layer);

struct RewriteOptions {
  bool fold = true;       // training.fold_upsample
  int features = -1;      // model.features' index: no link crosses the boundary after it
  int first_trained = 0;  // the first layer with parameters: no gradient is needed below it
};

struct RewritePlan {
  // The layers that run, in order: each config layers [first, last]; a group
  // of more than one is a fused layer with these steps.
  struct Group {
    int first = 0, last = 0;
    std::vector<ChainStep> steps;  // empty for a single layer
  };
  std::vector<Group> groups;
  // Each pattern that nearly applied and was not formed, and why: one line,
  // e.g. "relu1 not in the epilogue of conv1: conv1 is model.features (its
  // output must stay formed)".
  std::vector<std::string> declined;
};

RewritePlan plan_gpu_rewrite(const std::vector<RewriteNode>& nodes, const RewriteOptions& o);

// The layers that run: `layers` (the plain list the nodes describe) with each
// group of the plan replaced by its fused layer (gpu::make_fused_layer, set to
// the group's input shape).
std::vector<LayerPtr> apply_gpu_rewrite(const RewritePlan& plan,
                                        const std::vector<LayerPtr>& layers);

}  // namespace hpmc
