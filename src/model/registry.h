// registry.h — from a YAML layer `type:` or `model.loss:` to an object.
//
// The registry holds every layer type of layers/layer_list.h and every loss
// of layers/loss_list.h, in list order, each with its schema (schema.h), its
// CPU creator and its GPU creator. It is filled explicitly (no static
// self-registration, which a static library can silently drop): the CPU side
// from the lists here, the GPU side by gpu::register_layers() (a build without
// CUDA has a stub that registers nothing, so a GPU layer then says the binary
// has no GPU support). An implementation that cannot run a layer is an error,
// never a fallback.
#pragma once

#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/schema.h"
#include "model/impl.h"

namespace hpmc {

class MapReader;

using LayerCreator = LayerPtr (*)(const LayerArgs&);
using LossCreator = LossPtr (*)();

struct LayerType {
  const LayerSchema* schema = nullptr;
  LayerCreator cpu = nullptr, gpu = nullptr;
};

struct LossType {
  const LossSchema* schema = nullptr;
  LossCreator cpu = nullptr, gpu = nullptr;
};

class LayerRegistry {
 public:
  void add(const LayerSchema& schema, LayerCreator cpu);
  void set_gpu(LayerKind kind, LayerCreator gpu);
  void add_loss(const LossSchema& schema, LossCreator cpu);
  void set_gpu_loss(LossKind kind, LossCreator gpu);

  const LayerType* find(const std::string& type) const;  // null if unknown
  const LossType* find_loss(const std::string& type) const;
  const std::vector<LayerType>& types() const { return types_; }  // list order
  const std::vector<LossType>& losses() const { return losses_; }
  std::vector<std::string> names() const;  // layer types, list order
  std::vector<std::string> loss_names() const;

  // The layer for args.impl: the CPU class for kCpu, else the GPU class.
  LayerPtr create(const LayerType& t, const LayerArgs& args) const;
  LossPtr create_loss(const LossType& t, Impl impl) const;

  // The registry with every built-in layer type and loss.
  static const LayerRegistry& builtin();

 private:
  std::vector<LayerType> types_;
  std::vector<LossType> losses_;
};

// Every layer_list.h / loss_list.h entry with its CPU creator.
void register_builtin_layers(LayerRegistry& r);

namespace gpu {
// Attach the GPU creators (layers/gpu/register.cu; the no-CUDA stub in
// layers/gpu/factory_nocuda.cpp attaches none).
void register_layers(LayerRegistry& r);
}  // namespace gpu

// A layer's keys read through its schema: each key's type and range checked,
// defaults filled in (`keys` records them as resolved), unknown keys refused
// (keys.finish()). `base` carries the name, impl and input shape.
LayerArgs read_layer_args(const LayerSchema& schema, MapReader& keys, LayerArgs base);

// A layer of a registered type with its keys given as YAML flow text, e.g.
// make_layer("maxpool2d", "{kernel: 3, stride: 2}", Impl::kIm2col); the keys
// are checked exactly as in a config. With a non-empty `in` (per-sample
// input shape) the layer is also set to that input; `precision` is its
// Layer::precision (unchecked: precision_refusal is the model's). For tests
// and tools.
LayerPtr make_layer(const std::string& type, const std::string& keys_yaml, Impl impl,
                    const Shape& in = Shape(), const std::string& name = "",
                    Precision precision = Precision::kFp32);

// The loss named `type` for the given implementation (ConfigError listing the
// losses if there is none of that name).
LossPtr make_loss(const std::string& type, Impl impl);

}  // namespace hpmc
