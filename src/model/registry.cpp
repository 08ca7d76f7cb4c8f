#include "model/registry.h"

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "model/config.h"

namespace hpmc {

void LayerRegistry::add(const LayerSchema& schema, LayerCreator cpu) {
  HPMC_CHECK(!find(schema.type), "layer type '", schema.type, "' registered twice");
  types_.push_back({&schema, cpu, nullptr});
}

void LayerRegistry::set_gpu(LayerKind kind, LayerCreator gpu) {
  for (LayerType& t : types_)
    if (t.schema->kind == kind) {
      t.gpu = gpu;
      return;
    }
  HPMC_CHECK(false, "set_gpu: layer kind ", int(kind), " is not registered");
}

void LayerRegistry::add_loss(const LossSchema& schema, LossCreator cpu) {
  HPMC_CHECK(!find_loss(schema.type), "loss '", schema.type, "' registered twice");
  losses_.push_back({&schema, cpu, nullptr});
}

void LayerRegistry::set_gpu_loss(LossKind kind, LossCreator gpu) {
  for (LossType& t : losses_)
    if (t.schema->kind == kind) {
      t.gpu = gpu;
      return;
    }
  HPMC_CHECK(false, "set_gpu_loss: loss kind ", int(kind), " is not registered");
}

const LayerType* LayerRegistry::find(const std::string& type) const {
  for (const LayerType& t : types_)
    if (t.schema->type == type) return &t;
  return nullptr;
}

const LossType* LayerRegistry::find_loss(const std::string& type) const {
  for (const LossType& t : losses_)
    if (t.schema->type == type) return &t;
  return nullptr;
}

std::vector<std::string> LayerRegistry::names() const {
  std::vector<std::string> out;
  for (const LayerType& t : types_) out.push_back(t.schema->type);
  return out;
}

std::vector<std::string> LayerRegistry::loss_names() const {
  std::vector<std::string> out;
  for (const LossType& t : losses_) out.push_back(t.schema->type);
  return out;
}

namespace {

[[noreturn]] void no_gpu(const std::string& what) {
  throw UsageError(str(what, " needs the GPU layers, and this hpmc was built without CUDA; use "
                       "--impl cpu, or rebuild where the CUDA toolkit is installed "
                       "(cmake -DHPMC_CUDA=ON)"));
}

}  // namespace

LayerPtr LayerRegistry::create(const LayerType& t, const LayerArgs& args) const {
  if (args.impl != Impl::kCpu && !t.gpu)
    no_gpu(str("layer '", args.name, "' (", t.schema->type, ") with --impl ", impl_name(args.impl)));
  LayerPtr l = args.impl == Impl::kCpu ? t.cpu(args) : t.gpu(args);
  l->set_precision(args.precision);
  return l;
}

LossPtr LayerRegistry::create_loss(const LossType& t, Impl impl) const {
  if (impl == Impl::kCpu) return t.cpu();
  if (!t.gpu) no_gpu(str("the ", t.schema->type, " loss on the GPU"));
  return t.gpu();
}

const LayerRegistry& LayerRegistry::builtin() {
  static const LayerRegistry r = [] {
    LayerRegistry reg;
    register_builtin_layers(reg);
    gpu::register_layers(reg);
    return reg;
  }();
  return r;
}

void register_builtin_layers(LayerRegistry& r) {
#define HPMC_LAYER(Name) r.add(layer_schema_##Name(), &make_cpu_layer_##Name);
#include "layers/layer_list.h"
#undef HPMC_LAYER
#define HPMC_LOSS(Name) r.add_loss(loss_schema_##Name(), &make_cpu_loss_##Name);
#include "layers/loss_list.h"
#undef HPMC_LOSS
}

LayerArgs read_layer_args(const LayerSchema& schema, MapReader& keys, LayerArgs a) {
  for (const KeySpec& k : schema.keys) {
    if (k.required() && !keys.has(k.name)) {
      // These report a misspelled key where it is, or else the absence.
      if (k.type == KeyType::kInt) keys.require_int(k.name, int(k.lo), int(k.hi));
      keys.require_string(k.name);
    }
    // The default: its text, or the value of the (earlier) key it names.
    const bool from_key = !k.required() && k.def[0] == '=';
    const std::string other = from_key ? k.def.substr(1) : "";
    switch (k.type) {
      case KeyType::kInt: {
        const int d = k.required() ? 0 : from_key ? a.i(other) : std::stoi(k.def);
        a.set(k.name, keys.get_int(k.name, d, int(k.lo), int(k.hi)));
        break;
      }
      case KeyType::kFloat: {
        const double d = k.required() ? 0 : from_key ? a.f(other) : std::stod(k.def);
        a.set(k.name, keys.get_float(k.name, d, k.lo, k.hi));
        break;
      }
      case KeyType::kBool:
        a.set(k.name, keys.get_bool(k.name, k.def == "true") ? 1.0 : 0.0);
        break;
      case KeyType::kChoice:
        a.set(k.name, keys.get_choice(k.name, k.def, k.choices));
        break;
    }
  }
  keys.finish();
  return a;
}

LayerPtr make_layer(const std::string& type, const std::string& keys_yaml, Impl impl,
                    const Shape& in, const std::string& name, Precision precision) {
  const LayerRegistry& reg = LayerRegistry::builtin();
  const LayerType* t = reg.find(type);
  if (!t) throw ConfigError(str("unknown layer type '", type, "'"));
  ConfigSource src;
  src.file = "<" + type + " keys>";
  YAML::Node node = keys_yaml.empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load(keys_yaml);
  MapReader keys(node, "", src);
  LayerArgs base(name.empty() ? type : name, impl, in.with_batch(1));
  base.precision = precision;
  LayerArgs a = read_layer_args(*t->schema, keys, base);
  LayerPtr l = reg.create(*t, a);
  if (in.per_sample() > 0) l->set_input_shape(in.with_batch(1));
  return l;
}

LossPtr make_loss(const std::string& type, Impl impl) {
  const LayerRegistry& reg = LayerRegistry::builtin();
  const LossType* t = reg.find_loss(type);
  if (!t) {
    std::string known;
    for (const auto& n : reg.loss_names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError(str("unknown loss '", type, "'; choose one of: ", known));
  }
  return reg.create_loss(*t, impl);
}

}  // namespace hpmc
