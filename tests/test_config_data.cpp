// The data section's keys of the images and npy formats (data.size,
// data.channels, data.layout, data.test_fraction, data.split_seed): values,
// the resolved config, and one located error for each mistake.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "model/config.h"

namespace hpmc {
namespace {

std::string config(const std::string& data) {
  return "name: t\ndata: " + data +
         "\nmodel:\n  loss: mse\n  layers:\n    - {type: conv2d, out_channels: 1, padding: 1}\n";
}

std::string error_of(const std::string& data, std::vector<Override> ov = {}) {
  try {
    parse_config(config(data), "cfg.yaml", ov);
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const Error& e) {
    return std::string("(not a ConfigError) ") + e.what();
  }
  return "(no error)";
}

TEST(ConfigData, ImagesKeysAndTheirResolvedForm) {
  Config c = parse_config(config("{format: images, path: d, size: [20, 24], channels: 3, "
                                 "test_fraction: 0.2, split_seed: 7}"),
                          "cfg.yaml");
  EXPECT_EQ(c.data.format, "images");
  EXPECT_EQ(c.data.options.height, 20);
  EXPECT_EQ(c.data.options.width, 24);
  EXPECT_EQ(c.data.options.channels, 3);
  EXPECT_DOUBLE_EQ(c.data.options.test_fraction, 0.2);
  EXPECT_EQ(c.data.options.split_seed, 7u);
  YAML::Node d = c.resolved["data"];
  EXPECT_EQ(d["size"][0].as<int>(), 20);
  EXPECT_EQ(d["size"][1].as<int>(), 24);
  EXPECT_EQ(d["channels"].as<int>(), 3);
  // Re-reading the resolved config gives the same options.
  YAML::Emitter em;
  em << c.resolved;
  Config again = parse_config(em.c_str(), "again.yaml");
  EXPECT_EQ(again.data.options.height, 20);
  EXPECT_EQ(again.data.options.split_seed, 7u);

  // Defaults: as stored, no split, layout auto for npy.
  Config plain = parse_config(config("{format: images}"), "cfg.yaml");
  EXPECT_EQ(plain.data.path, "data/images");
  EXPECT_EQ(plain.data.options.height, 0);
  EXPECT_EQ(plain.data.options.channels, 0);
  EXPECT_EQ(plain.data.options.test_fraction, 0.0);
  EXPECT_FALSE(plain.resolved["data"]["size"]);
  Config npy = parse_config(config("{format: npy, layout: nhwc}"), "cfg.yaml");
  EXPECT_EQ(npy.data.options.layout, "nhwc");
  EXPECT_EQ(parse_config(config("{format: npy}"), "cfg.yaml").data.options.layout, "auto");
  // --set reaches them.
  Config set = parse_config(config("{format: images}"), "cfg.yaml",
                            {{"data.size=[64, 48]", ""}, {"data.channels=1", ""}});
  EXPECT_EQ(set.data.options.height, 64);
  EXPECT_EQ(set.data.options.width, 48);
  EXPECT_EQ(set.data.options.channels, 1);
}

TEST(ConfigData, MistakesAreLocatedOneLineErrors) {
  struct Case {
    std::string data;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"{format: mnist, size: [20, 20]}",
       {"cfg.yaml:2:", "data.size: applies to format images only"}},
      {"{format: npy, channels: 1}", {"data.channels: applies to format images only"}},
      {"{format: images, layout: nhwc}", {"data.layout: applies to format npy only"}},
      {"{format: cifar10, test_fraction: 0.1}",
       {"data.test_fraction: applies to formats images and npy only"}},
      {"{format: images, size: 20}", {"data.size: must be [height, width]"}},
      {"{format: images, size: [20]}", {"data.size: must be [height, width]"}},
      {"{format: images, size: [0, 20]}", {"data.size:", "1 to 65536", "'0'"}},
      {"{format: images, size: [20, big]}", {"data.size:", "'big'"}},
      {"{format: images, size: [20, 70000]}", {"'70000'"}},
      {"{format: images, channels: 2}", {"data.channels: must be 1 (grey) or 3 (RGB), got 2"}},
      {"{format: images, channels: 4}", {"data.channels: must be between 1 and 3, got 4"}},
      {"{format: npy, layout: hwc}", {"data.layout: unknown value 'hwc'", "nhwc"}},
      {"{format: images, test_fraction: 1}", {"data.test_fraction: must be below 1"}},
      {"{format: npy, test_fraction: -0.5}", {"data.test_fraction: must be between 0 and 1"}},
      {"{format: images, split_seed: 3}",
       {"data.split_seed: seeds data.test_fraction's split, which is not set"}},
      {"{format: tiff}", {"data.format: unknown value 'tiff'", "images, npy"}},
      {"{format: images, sise: [2, 2]}", {"unknown key 'data.sise'", "did you mean 'size'"}},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.data);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    for (const auto& n : c.needles) EXPECT_NE(e.find(n), std::string::npos) << c.data << ": " << e;
  }
  const std::string e = error_of("{format: images}", {{"data.size=[5, 0]", ""}});
  EXPECT_NE(e.find("--set data.size=[5, 0]: data.size:"), std::string::npos) << e;
}

}  // namespace
}  // namespace hpmc
