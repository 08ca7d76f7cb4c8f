// test_registry.cpp — the layer and loss registry: every type in
// layer_list.h / loss_list.h is registered from its one line, builds from its
// schema alone, checks its keys through the schema, and appears in
// `hpmc info` and in README.md's reference exactly as the schemas say.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/reference.h"
#include "core/device.h"
#include "core/error.h"
#include "layers/layer.h"
#include "model/model.h"
#include "model/registry.h"
#include "testing.h"

namespace hpmc {
namespace {

// The YAML flow mapping giving each required key the smallest value its range allows.
std::string required_keys(const LayerSchema& s) {
  std::string out;
  for (const KeySpec& k : s.keys)
    if (k.required()) {
      const std::string v = k.type == KeyType::kChoice ? k.choices.front()
                            : k.type == KeyType::kBool  ? "true"
                                                        : str(std::max(1.0, k.lo));
      out += (out.empty() ? "" : ", ") + k.name + ": " + v;
    }
  return "{" + out + "}";
}

// A layer of the type on an input it accepts: an image, or a flat vector.
LayerPtr build_on_some_input(const LayerType& t, Impl impl, Shape* in) {
  for (const Shape& s : {Shape(1, 4, 8, 8), Shape(1, 16, 1, 1)}) {
    try {
      *in = s;
      return make_layer(t.schema->type, required_keys(*t.schema), impl, s);
    } catch (const ShapeError&) {
    }
  }
  ADD_FAILURE() << t.schema->type << " takes neither a 4x8x8 image nor 16 flat features";
  return nullptr;
}

TEST(Registry, EveryListedTypeIsRegisteredOnceInListOrder) {
  const LayerRegistry& reg = LayerRegistry::builtin();
  std::vector<LayerKind> kinds;
#define HPMC_LAYER(Name) kinds.push_back(LayerKind::k##Name);
#include "layers/layer_list.h"
#undef HPMC_LAYER
  ASSERT_EQ(reg.types().size(), kinds.size());
  std::set<std::string> names;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const LayerType& t = reg.types()[i];
    EXPECT_EQ(t.schema->kind, kinds[i]) << t.schema->type;
    EXPECT_TRUE(names.insert(t.schema->type).second) << t.schema->type << " twice";
    EXPECT_NE(t.cpu, nullptr) << t.schema->type;
    // Every GPU creator comes from gpu::register_layers(), or none without CUDA.
    EXPECT_EQ(t.gpu != nullptr, gpu::compiled_with_cuda()) << t.schema->type;
    EXPECT_FALSE(t.schema->doc.empty()) << t.schema->type;
    for (const KeySpec& k : t.schema->keys) EXPECT_FALSE(k.doc.empty()) << k.name;
  }
  std::vector<LossKind> losses;
#define HPMC_LOSS(Name) losses.push_back(LossKind::k##Name);
#include "layers/loss_list.h"
#undef HPMC_LOSS
  ASSERT_EQ(reg.losses().size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_EQ(reg.losses()[i].schema->kind, losses[i]);
    EXPECT_NE(reg.losses()[i].schema->fit, nullptr);
    EXPECT_EQ(reg.losses()[i].gpu != nullptr, gpu::compiled_with_cuda());
  }
}

TEST(Registry, EveryTypeBuildsFromItsSchemaWithDefaults) {
  for (const LayerType& t : LayerRegistry::builtin().types()) {
    SCOPED_TRACE(t.schema->type);
    Shape in;
    LayerPtr l = build_on_some_input(t, Impl::kCpu, &in);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->kind(), t.schema->kind);
    EXPECT_EQ(std::string(l->type()), t.schema->type);
    EXPECT_EQ(&l->schema(), t.schema);
    EXPECT_EQ(l->device(), Device::kCPU);
    EXPECT_NO_THROW(l->output_shape(in));
    // The same keys build the GPU class, or say clearly that there is no GPU.
    if (!gpu::compiled_with_cuda()) {
      try {
        make_layer(t.schema->type, required_keys(*t.schema), Impl::kIm2col, in);
        ADD_FAILURE() << "a GPU layer without CUDA";
      } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
      }
    } else if (gpu::device_count() > 0) {
      LayerPtr g = make_layer(t.schema->type, required_keys(*t.schema), Impl::kIm2col, in);
      EXPECT_EQ(g->kind(), t.schema->kind);
      EXPECT_EQ(g->device(), Device::kGPU);
      EXPECT_EQ(g->output_shape(in), l->output_shape(in));
      EXPECT_EQ(g->param_count(), l->param_count());
      EXPECT_EQ(g->describe(), l->describe());
    }
  }
}

TEST(Registry, KeysAreCheckedThroughTheSchema) {
  for (const LayerType& t : LayerRegistry::builtin().types()) {
    SCOPED_TRACE(t.schema->type);
    Shape in;
    ASSERT_NE(build_on_some_input(t, Impl::kCpu, &in), nullptr);
    std::string base = required_keys(*t.schema);
    base.pop_back();
    const std::string sep = base.size() > 1 ? ", " : "";
    // An unknown key names the keys the schema has.
    try {
      make_layer(t.schema->type, base + sep + "bogus_key: 1}", Impl::kCpu, in);
      ADD_FAILURE() << "bogus_key accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("unknown key 'bogus_key'"), std::string::npos) << msg;
      for (const KeySpec& k : t.schema->keys) EXPECT_NE(msg.find(k.name), std::string::npos) << msg;
    }
    // Each numeric key refuses a value just past its range, naming the range.
    for (const KeySpec& k : t.schema->keys) {
      if (k.type != KeyType::kInt && k.type != KeyType::kFloat) continue;
      if (k.required()) continue;
      const double past = k.hi + (k.type == KeyType::kInt ? 1 : k.hi * 0.5 + 1);
      try {
        make_layer(t.schema->type, base + sep + k.name + ": " + str(past) + "}", Impl::kCpu, in);
        ADD_FAILURE() << k.name << " = " << past << " accepted";
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("must be between"), std::string::npos) << e.what();
      }
    }
    // A required key left out is named.
    for (const KeySpec& k : t.schema->keys) {
      if (!k.required()) continue;
      try {
        make_layer(t.schema->type, "{}", Impl::kCpu, in);
        ADD_FAILURE() << k.name << " not required";
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find(k.name + ": is required"), std::string::npos)
            << e.what();
      }
    }
  }
}

TEST(Registry, InfoListsEveryLayerKeyAndLoss) {
  std::ostringstream os;
  print_reference_text(os, "");
  const std::string text = os.str();
  const LayerRegistry& reg = LayerRegistry::builtin();
  for (const LayerType& t : reg.types()) {
    EXPECT_NE(text.find("  " + t.schema->type + ": "), std::string::npos) << t.schema->type;
    for (const KeySpec& k : t.schema->keys) {
      EXPECT_NE(text.find(k.name), std::string::npos) << k.name;
      EXPECT_NE(text.find("default " + k.default_text()), std::string::npos) << k.name;
    }
  }
  for (const LossType& t : reg.losses())
    EXPECT_NE(text.find("  " + t.schema->type + ": "), std::string::npos) << t.schema->type;
}

TEST(Registry, ReadmeReferenceIsTheSchemasReference) {
  std::ifstream f(testing::source_dir() + "/README.md");
  ASSERT_TRUE(f) << "README.md not found in " << testing::source_dir();
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string readme = ss.str();
  const size_t begin = readme.find("<!-- BEGIN layer-reference");
  const size_t end = readme.find("<!-- END layer-reference");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const size_t body = readme.find('\n', begin) + 1;
  std::ostringstream gen;
  print_reference_markdown(gen);
  EXPECT_EQ(readme.substr(body, end - body), gen.str())
      << "README.md's layer reference differs from the schemas: run scripts/update-reference";
}

TEST(Registry, LossChoicesComeFromTheRegistry) {
  for (const LossType& t : LayerRegistry::builtin().losses()) {
    LossPtr l = make_loss(t.schema->type, Impl::kCpu);
    EXPECT_EQ(l->kind(), t.schema->kind);
    EXPECT_EQ(l->is_classifier(), t.schema->classifier);
  }
  try {
    make_loss("msee", Impl::kCpu);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    for (const std::string& n : LayerRegistry::builtin().loss_names())
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpmc

namespace hpmc {
namespace {

// Every config shipped in configs/ loads and builds its model on the CPU
// (the sample shape from its data format), so a layer, key or optimizer
// change that breaks one fails here.
TEST(ShippedConfigs, EveryConfigBuildsItsModel) {
  std::set<std::string> seen;
  for (const auto& e : std::filesystem::directory_iterator(testing::source_dir() + "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    Config c = load_config(e.path().string());
    const Shape sample = c.data.format == "cifar10" ? Shape(1, 3, 32, 32) : Shape(1, 1, 28, 28);
    auto m = Model::build(c, Impl::kCpu, sample, 10);
    EXPECT_GT(m->params().total(), 0u);
    seen.insert(e.path().stem().string());
  }
  for (const char* name : {"cifar_ae", "fashion_ae", "fashion_mlp", "mnist_mlp", "fashion_ae_bn",
                           "cifar_ae_bn"})
    EXPECT_EQ(seen.count(name), 1u) << name;
}

}  // namespace
}  // namespace hpmc
