#include "model/registry.h"

#include "core/error.h"
#include "layers/cpu/conv2d.h"
#include "layers/cpu/flatten.h"
#include "layers/cpu/linear.h"
#include "layers/cpu/maxpool2d.h"
#include "layers/cpu/mse_loss.h"
#include "layers/cpu/relu.h"
#include "layers/cpu/softmax_ce_loss.h"
#include "layers/cpu/upsample2d.h"
#include "layers/gpu/factory.h"

namespace hpmc {

void LayerRegistry::add(LayerType t) {
  HPMC_CHECK(!types_.count(t.type), "layer type '", t.type, "' registered twice");
  std::string key = t.type;
  types_.emplace(key, std::move(t));
}

const LayerType* LayerRegistry::find(const std::string& type) const {
  auto it = types_.find(type);
  return it == types_.end() ? nullptr : &it->second;
}

std::vector<std::string> LayerRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& kv : types_) out.push_back(kv.first);
  return out;
}

const LayerRegistry& LayerRegistry::builtin() {
  static const LayerRegistry r = [] {
    LayerRegistry reg;
    register_builtin_layers(reg);
    return reg;
  }();
  return r;
}

namespace {

LayerPtr make_conv2d(MapReader& k, const LayerContext& ctx) {
  Conv2dConfig c;
  c.in_channels = ctx.in.c;
  c.out_channels = k.require_int("out_channels", 1, 1 << 16);
  c.kernel = k.get_int("kernel", 3, 1, 1024);
  c.stride = k.get_int("stride", 1, 1, 1024);
  c.padding = k.get_int("padding", 0, 0, 1024);
  c.bias = k.get_bool("bias", true);
  k.finish();
  if (ctx.impl == Impl::kCpu) return std::make_shared<Conv2dCPU>(ctx.name, c);
  return gpu::make_conv2d(ctx.name, c, ctx.impl);
}

LayerPtr make_linear(MapReader& k, const LayerContext& ctx) {
  LinearConfig c;
  c.in_features = ctx.in.c;
  c.out_features = k.require_int("out_features", 1, 1 << 24);
  c.bias = k.get_bool("bias", true);
  k.finish();
  if (ctx.impl == Impl::kCpu) return std::make_shared<LinearCPU>(ctx.name, c);
  return gpu::make_linear(ctx.name, c, ctx.impl);
}

LayerPtr make_maxpool2d(MapReader& k, const LayerContext& ctx) {
  MaxPool2dConfig c;
  c.kernel = k.get_int("kernel", 2, 1, 1024);
  c.stride = k.get_int("stride", c.kernel, 1, 1024);
  k.finish();
  if (ctx.impl == Impl::kCpu) return std::make_shared<MaxPool2dCPU>(ctx.name, c);
  return gpu::make_maxpool2d(ctx.name, c);
}

LayerPtr make_upsample2d(MapReader& k, const LayerContext& ctx) {
  int scale = k.get_int("scale", 2, 1, 64);
  k.finish();
  if (ctx.impl == Impl::kCpu) return std::make_shared<UpSample2dCPU>(ctx.name, scale);
  return gpu::make_upsample2d(ctx.name, scale);
}

LayerPtr make_relu(MapReader& k, const LayerContext& ctx) {
  k.finish();
  if (ctx.impl == Impl::kCpu) return std::make_shared<ReLUCPU>(ctx.name);
  return gpu::make_relu(ctx.name);
}

LayerPtr make_flatten(MapReader& k, const LayerContext& ctx) {
  k.finish();
  if (ctx.impl == Impl::kCpu) return std::make_shared<FlattenCPU>(ctx.name);
  return gpu::make_flatten(ctx.name);
}

}  // namespace

void register_builtin_layers(LayerRegistry& r) {
  r.add({"conv2d", "out_channels (required), kernel=3, stride=1, padding=0, bias=true", make_conv2d});
  r.add({"linear", "out_features (required), bias=true", make_linear});
  r.add({"maxpool2d", "kernel=2, stride=kernel", make_maxpool2d});
  r.add({"upsample2d", "scale=2 (nearest neighbour)", make_upsample2d});
  r.add({"relu", "(no keys)", make_relu});
  r.add({"flatten", "(no keys)", make_flatten});
}

LossPtr make_loss(const std::string& type, Impl impl) {
  const bool gpu = impl != Impl::kCpu;
  if (type == "mse") return gpu ? gpu::make_mse_loss() : std::make_shared<MseLossCPU>();
  if (type == "softmax_cross_entropy")
    return gpu ? gpu::make_softmax_ce_loss() : std::make_shared<SoftmaxCrossEntropyCPU>();
  throw ConfigError(str("unknown loss '", type, "'; choose mse or softmax_cross_entropy"));
}

}  // namespace hpmc
