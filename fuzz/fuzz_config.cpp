// fuzz_config.cpp — the config path of every command: YAML text, --set
// overrides, validation (model/config.h), and the model built from it
// (Model::build) up to and including the allocation of its parameters; then
// the resolved config a run directory records, which must build the same
// model again ("hpmc run runs/<name>/config.yaml repeats the run").
//
// Input: the YAML document; each of its lines that starts with "#set " (a
// YAML comment) is also an override KEY=VALUE, applied in order.
//
// Size cap. hpmc itself bounds each key (conv2d out_channels up to 65536,
// kernel up to 1024, linear out_features up to 2^24, upsample scale up to
// 64), not the model they make together: within those bounds a config can ask
// for terabytes of parameters, or shapes whose int sizes overflow. So before
// Model::build this harness walks the layers the same way (registry, keys,
// output shapes) and skips inputs whose shapes or parameters pass the caps
// below; a key that hpmc would reject is left for Model::build to report.
#include <sstream>

#include "data/dataset.h"
#include "fuzz_common.h"
#include "model/config.h"
#include "model/model.h"
#include "model/registry.h"

namespace {

using namespace hpmc;

constexpr int kMaxSide = 4096;                // height, width, channels at any layer
constexpr size_t kMaxPerSample = 1u << 22;    // activation values per sample
constexpr size_t kMaxParams = 1u << 21;       // parameters of the whole model
constexpr long long kMaxKey = 256;            // out_channels, kernel, padding, stride
constexpr long long kMaxScale = 8;            // upsample2d scale
constexpr long long kMaxFeatures = 4096;      // linear out_features

// A layer key's integer value, or 0 when it is absent or not an integer
// (hpmc then reports it).
long long key_value(const YAML::Node& layer, const char* key) {
  if (!layer.IsMap()) return 0;
  YAML::Node v = layer[key];
  if (!v || !v.IsScalar()) return 0;
  try {
    return v.as<long long>();
  } catch (const YAML::Exception&) {
    return 0;
  }
}

// True when the model this config asks for stays within the caps (or fails
// in hpmc before it could exceed them).
bool within_caps(const Config& cfg, const Shape& sample) {
  for (const LayerNode& ln : cfg.model.layers) {
    for (const char* k : {"out_channels", "kernel", "padding", "stride"})
      if (key_value(ln.node, k) > kMaxKey) return false;
    if (key_value(ln.node, "scale") > kMaxScale) return false;
    if (key_value(ln.node, "out_features") > kMaxFeatures) return false;
  }
  const LayerRegistry& reg = LayerRegistry::builtin();
  Shape cur = sample.with_batch(1);
  size_t params = 0;
  try {
    for (const LayerNode& ln : cfg.model.layers) {
      if (cur.c > kMaxSide || cur.h > kMaxSide || cur.w > kMaxSide ||
          cur.per_sample() > kMaxPerSample)
        return false;
      MapReader keys(ln.node, ln.path, cfg.source);
      const LayerType* lt = reg.find(keys.require_string("type"));
      if (!lt) return true;
      LayerArgs args;
      args.name = keys.get_string("name", "layer");
      keys.get_choice("impl", "cpu", impl_names());
      args.in = cur;
      LayerPtr layer = reg.create(*lt, read_layer_args(*lt->schema, keys, args));
      for (const ParamSpec& p : layer->param_specs()) params += p.count();
      if (params > kMaxParams) return false;
      cur = layer->output_shape(cur);
    }
  } catch (const Error&) {
    return true;  // Model::build meets the same error at the same layer
  }
  return true;
}

// The parameter layout and output shape: what must survive a round trip.
std::string signature(const Model& m) {
  std::ostringstream os;
  for (const ParamEntry& e : m.params().entries()) {
    os << e.name << "[";
    for (int d : e.dims) os << d << ",";
    os << "]";
  }
  os << " -> " << m.output_shape().sample_str() << " " << m.loss().type();
  return os.str();
}

// The resolved config as `hpmc run` writes it into the run directory.
std::string resolved_text(const Config& cfg, const Model& m) {
  YAML::Node doc = YAML::Clone(cfg.resolved);
  YAML::Node layers(YAML::NodeType::Sequence);
  for (const auto& l : m.resolved_layers()) layers.push_back(l);
  doc["model"]["layers"] = layers;
  YAML::Emitter em;
  em << doc;
  return em.c_str();
}

// The input a config's model is built for without reading data: the
// standard shape of mnist and cifar10, data.size and data.channels where an
// images config gives them, MNIST's otherwise.
Shape sample_of(const Config& cfg, DataFormat f) {
  if (f == DataFormat::kMnist || f == DataFormat::kCifar10) return sample_shape(f);
  const DataOptions& o = cfg.data.options;
  return Shape(1, o.channels > 0 ? o.channels : 1, o.height > 0 ? o.height : 28,
               o.width > 0 ? o.width : 28);
}

std::unique_ptr<Model> build(const Config& cfg) {
  const DataFormat f = parse_data_format(cfg.data.format);
  const Shape sample = sample_of(cfg, f);
  if (!within_caps(cfg, sample)) return nullptr;
  auto m = Model::build(cfg, Impl::kCpu, sample, 10);
  std::ostringstream table;
  m->print_table(table);
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<Override> overrides;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("#set ", 0) == 0) overrides.push_back({line.substr(5), ""});

  Config cfg;
  std::unique_ptr<Model> model;
  if (!fuzz::expect_clean([&] {
        cfg = parse_config(text, "fuzz.yaml", overrides);
        model = build(cfg);
      }))
    return 0;
  if (!model) return 0;  // over the caps

  std::string resolved = resolved_text(cfg, *model);
  Config again;
  std::unique_ptr<Model> rebuilt;
  if (!fuzz::expect_clean([&] {
        again = parse_config(resolved, "config.yaml");
        rebuilt = build(again);
      }))
    fuzz::finding("the resolved config does not load again:\n" + resolved);
  if (!rebuilt || signature(*rebuilt) != signature(*model) || again.name != cfg.name)
    fuzz::finding("the resolved config builds another model:\n" + resolved);
  return 0;
}
