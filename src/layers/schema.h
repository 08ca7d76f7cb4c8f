// schema.h — what a layer type or a loss is, independently of any device:
// its YAML name, a one-line description and the schema of its keys, plus the
// kinds (enums) generated from layer_list.h and loss_list.h and the macros
// with which each layer's files register themselves.
//
// A key schema entry says everything a user needs: the key's name, its type
// (int, float, bool or one of a set of words), its default (or that it is
// required), its allowed range and one line of documentation. The model
// builder reads a layer's YAML keys through it (model/registry.cpp: unknown
// keys, wrong types and out-of-range values are one-line config errors), and
// `hpmc info` and the README's layer reference are printed from it, so the
// code, the checks and the docs cannot disagree.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/shape.h"
#include "model/impl.h"

namespace hpmc {

class Layer;
class Loss;
using LayerPtr = std::shared_ptr<Layer>;
using LossPtr = std::shared_ptr<Loss>;

// One per line of layer_list.h: LayerKind::kConv2d, ...; then kFused, the
// layers the GPU rewrite makes of several (layers/fused_spec.h), which no
// config names and the registry does not hold.
enum class LayerKind {
#define HPMC_LAYER(Name) k##Name,
#include "layers/layer_list.h"
#undef HPMC_LAYER
  kFused,
};

// One per line of loss_list.h: LossKind::kMseLoss, ...
enum class LossKind {
#define HPMC_LOSS(Name) k##Name,
#include "layers/loss_list.h"
#undef HPMC_LOSS
};

enum class KeyType { kInt, kFloat, kBool, kChoice };

struct KeySpec {
  std::string name;
  KeyType type = KeyType::kInt;
  // The default as YAML text ("3", "0.01", "true", "nearest"); "" for a
  // required key; "=other" for the value of the key `other` of the same layer
  // (which must come earlier in the schema).
  std::string def;
  double lo = 0, hi = 0;             // kInt, kFloat: the allowed closed range
  std::vector<std::string> choices;  // kChoice: the allowed words
  std::string doc;                   // one line

  bool required() const { return def.empty(); }
  // "int in [1, 1024]", "float in [0, 1)", "bool", "nearest | bilinear".
  std::string type_text() const;
  // "required", "same as kernel", "3".
  std::string default_text() const;
};

KeySpec int_key(std::string name, std::string def, int lo, int hi, std::string doc);
KeySpec float_key(std::string name, std::string def, double lo, double hi, std::string doc);
KeySpec bool_key(std::string name, std::string def, std::string doc);
KeySpec choice_key(std::string name, std::string def, std::vector<std::string> choices,
                   std::string doc);

struct LayerSchema {
  LayerKind kind;
  std::string type;  // the YAML `type:`
  std::string doc;   // one line: what the layer computes, and its PyTorch equivalent
  std::vector<KeySpec> keys;
  const KeySpec* key(const std::string& name) const;  // null if the schema has none
};

// A layer's key values, read and checked against its schema (defaults filled
// in), and where the layer is built: its name, the implementation asked for,
// the precision of its products (the registry passes it on to the layer:
// Layer::precision) and its per-sample input shape. Every layer class is
// constructed from one.
class LayerArgs {
 public:
  LayerArgs() = default;
  LayerArgs(std::string name, Impl impl, const Shape& in) : name(std::move(name)), impl(impl), in(in) {}

  std::string name;
  Impl impl = Impl::kCpu;
  Precision precision = Precision::kFp32;
  Shape in;  // per-sample input shape (n = 1)

  // The value of a key of the schema; asking for a key that was not set is
  // a programming error (HPMC_CHECK).
  int i(const std::string& key) const;
  double f(const std::string& key) const;
  bool b(const std::string& key) const;
  const std::string& s(const std::string& key) const;

  LayerArgs& set(const std::string& key, double v);
  LayerArgs& set(const std::string& key, const std::string& v);
  bool has(const std::string& key) const { return values_.count(key) > 0; }

 private:
  struct Value {
    double num = 0;
    std::string text;
  };
  const Value& get(const std::string& key) const;
  std::map<std::string, Value> values_;
};

struct LossSchema {
  LossKind kind;
  std::string type;  // the YAML model.loss
  std::string doc;   // one line
  bool classifier = false;  // targets are int32 labels (else the float32 input image)
  // Why a model mapping per-sample `in` to `out` cannot train with this loss
  // on data with `num_classes` labels (a sentence without a location), or "".
  std::string (*fit)(const Shape& in, const Shape& out, int num_classes) = nullptr;
};

// ---- registration (see layer_list.h) -----------------------------------------

#define HPMC_LAYER(Name)                                   \
  const LayerSchema& layer_schema_##Name();                \
  LayerPtr make_cpu_layer_##Name(const LayerArgs& args);   \
  namespace gpu {                                          \
  LayerPtr make_layer_##Name(const LayerArgs& args);       \
  }
#include "layers/layer_list.h"
#undef HPMC_LAYER

#define HPMC_LOSS(Name)                     \
  const LossSchema& loss_schema_##Name();   \
  LossPtr make_cpu_loss_##Name();           \
  namespace gpu {                           \
  LossPtr make_loss_##Name();               \
  }
#include "layers/loss_list.h"
#undef HPMC_LOSS

// In namespace hpmc, in the spec's .cpp (NameSpec::static_schema()).
#define HPMC_REGISTER_SPEC(Name) \
  const LayerSchema& layer_schema_##Name() { return Name##Spec::static_schema(); }
// In namespace hpmc, in the CPU layer's .cpp (NameCPU(const LayerArgs&)).
#define HPMC_REGISTER_CPU(Name) \
  LayerPtr make_cpu_layer_##Name(const LayerArgs& args) { return std::make_shared<Name##CPU>(args); }
// In namespace hpmc::gpu, in the GPU layer's .cu (NameGPU(const LayerArgs&)).
#define HPMC_REGISTER_GPU(Name) \
  LayerPtr make_layer_##Name(const LayerArgs& args) { return std::make_shared<Name##GPU>(args); }

#define HPMC_REGISTER_LOSS_SPEC(Name) \
  const LossSchema& loss_schema_##Name() { return Name##Spec::static_schema(); }
#define HPMC_REGISTER_LOSS_CPU(Name) \
  LossPtr make_cpu_loss_##Name() { return std::make_shared<Name##CPU>(); }
#define HPMC_REGISTER_LOSS_GPU(Name) \
  LossPtr make_loss_##Name() { return std::make_shared<Name##GPU>(); }

}  // namespace hpmc
