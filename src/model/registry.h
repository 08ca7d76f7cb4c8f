// registry.h — from a YAML layer `type:` to a layer object.
//
// Layer types are registered explicitly by register_builtin_layers() (no
// static self-registration, which a static library can silently drop). Each
// entry reads and validates its own keys from the layer's YAML mapping and
// picks the implementation for the requested Impl in one creator; an
// implementation that cannot run the layer is an error, never a fallback.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/loss.h"
#include "model/config.h"
#include "model/impl.h"

namespace hpmc {

struct LayerContext {
  std::string name;
  Impl impl = Impl::kCpu;
  Shape in;  // per-sample input shape (n = 1)
};

using LayerFactory = std::function<LayerPtr(MapReader& keys, const LayerContext& ctx)>;

struct LayerType {
  std::string type;
  std::string keys;  // documentation of the type's keys, for `hpmc info` and errors
  LayerFactory create;
};

class LayerRegistry {
 public:
  void add(LayerType t);
  const LayerType* find(const std::string& type) const;
  std::vector<std::string> names() const;
  const std::map<std::string, LayerType>& types() const { return types_; }

  // The registry with every built-in layer type.
  static const LayerRegistry& builtin();

 private:
  std::map<std::string, LayerType> types_;
};

void register_builtin_layers(LayerRegistry& r);

// The loss named in the config, for the given implementation.
LossPtr make_loss(const std::string& type, Impl impl);

}  // namespace hpmc
