// reference.cpp — the layer and loss reference from the schemas.
#include "cli/reference.h"

#include <algorithm>
#include <ostream>

#include "model/registry.h"
#include "optim/optim_config.h"

namespace hpmc {

void print_reference_text(std::ostream& out, const char* indent) {
  const LayerRegistry& reg = LayerRegistry::builtin();
  size_t name_w = 0, type_w = 0;
  for (const LayerType& t : reg.types())
    for (const KeySpec& k : t.schema->keys) {
      name_w = std::max(name_w, k.name.size());
      type_w = std::max(type_w, k.type_text().size());
    }
  out << indent << "layer types (model.layers[].type; every layer also takes name and impl):\n";
  for (const LayerType& t : reg.types()) {
    out << indent << "  " << t.schema->type << ": " << t.schema->doc << "\n";
    for (const KeySpec& k : t.schema->keys)
      out << indent << "      " << k.name << std::string(name_w + 2 - k.name.size(), ' ')
          << k.type_text() << std::string(type_w + 2 - k.type_text().size(), ' ')
          << "default " << k.default_text() << "; " << k.doc << "\n";
  }
  out << indent << "losses (model.loss):\n";
  for (const LossType& t : reg.losses())
    out << indent << "  " << t.schema->type << ": " << t.schema->doc
        << (t.schema->classifier ? " [labels]" : " [reconstruction]") << "\n";
  auto keys = [&](const char* type, const std::vector<OptimKey>& ks) {
    out << indent << "  " << type << ":";
    for (size_t i = 0; i < ks.size(); ++i)
      out << (i ? ", " : " ") << ks[i].name << "=" << (ks[i].value.empty() ? "required" : ks[i].value)
          << (ks[i].note.empty() ? "" : " (" + ks[i].note + ")");
    out << "\n";
  };
  out << indent << "optimizers (training.optimizer: {type: ..., key: value, ...}):\n";
  for (const char* const* t = optimizer_types(); *t; ++t) keys(*t, optimizer_keys(*t));
  out << indent << "schedules (training.schedule: {type: ..., key: value, ...}; per optimizer step):\n";
  for (const char* const* t = schedule_types(); *t; ++t) keys(*t, schedule_keys(*t));
  out << indent << "clipping: training.clip_grad_norm (0: off), by the global L2 norm\n";
}

void print_reference_markdown(std::ostream& out) {
  const LayerRegistry& reg = LayerRegistry::builtin();
  out << "Every layer takes `type`, an optional `name` (default: the type and its position, "
         "e.g. `conv2d1`) and an optional `impl` (another implementation on the same device).\n";
  for (const LayerType& t : reg.types()) {
    out << "\n**`" << t.schema->type << "`** — " << t.schema->doc << "\n";
    if (t.schema->keys.empty()) {
      out << "\nNo keys.\n";
      continue;
    }
    out << "\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
    for (const KeySpec& k : t.schema->keys)
      out << "| `" << k.name << "` | " << k.type_text() << " | " << k.default_text() << " | "
          << k.doc << " |\n";
  }
  out << "\n**Losses** (`model.loss`):\n\n| loss | target | meaning |\n| --- | --- | --- |\n";
  for (const LossType& t : reg.losses())
    out << "| `" << t.schema->type << "` | " << (t.schema->classifier ? "labels" : "input image")
        << " | " << t.schema->doc << " |\n";
  auto table = [&](const char* section, const char* const* types,
                   std::vector<OptimKey> (*keys)(const std::string&)) {
    for (const char* const* t = types; *t; ++t) {
      out << "\n**`" << section << ": {type: " << *t << "}`**\n\n";
      out << "| key | default | meaning |\n| --- | --- | --- |\n";
      for (const OptimKey& k : keys(*t))
        out << "| `" << k.name << "` | " << (k.value.empty() ? "required" : k.value) << " | "
            << k.note << " |\n";
    }
  };
  out << "\n**Optimizers** (`training.optimizer`; the flat `training.lr`, `training.momentum` and "
         "`training.weight_decay` mean `sgd`):\n";
  table("optimizer", optimizer_types(), optimizer_keys);
  out << "\n**Learning-rate schedules** (`training.schedule`, evaluated per optimizer step):\n";
  table("schedule", schedule_types(), schedule_keys);
}

}  // namespace hpmc
