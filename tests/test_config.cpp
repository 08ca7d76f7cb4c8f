// The YAML config reader: defaults, overrides, and one clear located error
// for every kind of mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "fifo_testing.h"
#include "model/config.h"
#include "testing.h"

namespace hpmc {
namespace {

const char* kGood = R"(name: tiny
data:
  format: mnist
  path: /tmp/nowhere
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc, type: linear, out_features: 10}
training:
  epochs: 2
  lr: 0.5
)";

// The message of the ConfigError/UsageError that parsing `text` throws.
std::string error_of(const std::string& text, std::vector<Override> ov = {}) {
  try {
    parse_config(text, "cfg.yaml", ov);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  return s.replace(p, from.size(), to);
}

TEST(Config, ReadsValuesAndDefaults) {
  Config c = parse_config(kGood, "cfg.yaml");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.data.format, "mnist");
  EXPECT_EQ(c.data.path, "/tmp/nowhere");
  EXPECT_EQ(c.model.loss, "softmax_cross_entropy");
  ASSERT_EQ(c.model.layers.size(), 2u);
  EXPECT_EQ(c.model.layers[1].path, "model.layers.1");
  EXPECT_EQ(c.training.epochs, 2);
  EXPECT_DOUBLE_EQ(c.training.optimizer.lr, 0.5);
  // Defaults.
  EXPECT_EQ(c.training.batch_size, 64);
  EXPECT_DOUBLE_EQ(c.training.optimizer.momentum, 0.0);
  EXPECT_EQ(c.training.seed, 1u);
  EXPECT_TRUE(c.training.shuffle);
  EXPECT_EQ(c.output.dir, "runs/tiny");
  EXPECT_EQ(c.data.train_limit, 0);
}

// training.fold_upsample (model/gpu_rewrite.h): on by default, a bool like training.fuse,
// settable by --set, and a wrong value is the usual located error.
TEST(Config, FoldUpsampleDefaultsToTrueAndParses) {
  EXPECT_TRUE(parse_config(kGood, "cfg.yaml").training.fold_upsample);
  EXPECT_FALSE(parse_config(kGood + std::string("  fold_upsample: false\n"), "cfg.yaml")
                   .training.fold_upsample);
  EXPECT_TRUE(parse_config(kGood + std::string("  fold_upsample: true\n"), "cfg.yaml")
                  .training.fold_upsample);
  EXPECT_FALSE(parse_config(kGood, "cfg.yaml", {{"training.fold_upsample=false", ""}})
                   .training.fold_upsample);
  Config c = parse_config(kGood, "cfg.yaml");
  EXPECT_TRUE(c.resolved["training"]["fold_upsample"].as<bool>());  // config.yaml records it
  std::string e = error_of(kGood + std::string("  fold_upsample: maybe\n"));
  EXPECT_NE(e.find("cfg.yaml:13:18"), std::string::npos) << e;
  EXPECT_NE(e.find("training.fold_upsample: expected true or false, got 'maybe'"),
            std::string::npos)
      << e;
  e = error_of(kGood + std::string("  fold_upsamples: false\n"));
  EXPECT_NE(e.find("did you mean 'fold_upsample'?"), std::string::npos) << e;
}

TEST(Config, NameDefaultsToFileStem) {
  std::string text = replace(kGood, "name: tiny\n", "");
  Config c = parse_config(text, "configs/my_model.yaml");
  EXPECT_EQ(c.name, "my_model");
  EXPECT_EQ(c.output.dir, "runs/my_model");
}

TEST(Config, OverridesByDottedPath) {
  Config c = parse_config(kGood, "cfg.yaml",
                          {{"training.epochs=7", ""}, {"training.momentum=0.9", ""},
                           {"model.layers.1.out_features=10", ""}, {"output.dir=/tmp/x", ""}});
  EXPECT_EQ(c.training.epochs, 7);
  EXPECT_DOUBLE_EQ(c.training.optimizer.momentum, 0.9);
  EXPECT_EQ(c.output.dir, "/tmp/x");
  EXPECT_EQ(c.model.layers[1].node["out_features"].as<int>(), 10);
}

TEST(Config, UnknownTopLevelKeySuggestsTheRightOne) {
  std::string e = error_of(replace(kGood, "training:", "trainig:"));
  EXPECT_NE(e.find("cfg.yaml:10:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'trainig'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'training'?"), std::string::npos) << e;
}

TEST(Config, UnknownNestedKeySuggestsTheRightOne) {
  std::string e = error_of(replace(kGood, "epochs: 2", "epoch: 2"));
  EXPECT_NE(e.find("cfg.yaml:11:3"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'training.epoch' (did you mean 'epochs'?)"), std::string::npos) << e;
}

TEST(Config, WrongTypeNamesKeyAndValue) {
  std::string e = error_of(replace(kGood, "epochs: 2", "epochs: three"));
  EXPECT_NE(e.find("cfg.yaml:11:11"), std::string::npos) << e;
  EXPECT_NE(e.find("training.epochs: expected an integer, got 'three'"), std::string::npos) << e;
  e = error_of(replace(kGood, "epochs: 2", "epochs: 2.5"));
  EXPECT_NE(e.find("expected an integer, got '2.5'"), std::string::npos) << e;
  e = error_of(replace(kGood, "lr: 0.5", "lr: fast"));
  EXPECT_NE(e.find("training.lr: expected a number, got 'fast'"), std::string::npos) << e;
  e = error_of(replace(kGood, "lr: 0.5", "lr: [1, 2]"));
  EXPECT_NE(e.find("expected a number, got 'a list'"), std::string::npos) << e;
  e = error_of(kGood + std::string("  shuffle: maybe\n"));
  EXPECT_NE(e.find("training.shuffle: expected true or false, got 'maybe'"), std::string::npos) << e;
}

TEST(Config, NonFiniteNumbersAreRejected) {
  for (const char* bad : {".nan", ".inf", "-.inf"}) {
    std::string e = error_of(replace(kGood, "lr: 0.5", std::string("lr: ") + bad));
    EXPECT_NE(e.find("training.lr: must be a finite number"), std::string::npos) << e;
  }
}

TEST(Config, OutOfRangeValuesAreRejected) {
  std::string e = error_of(replace(kGood, "epochs: 2", "epochs: 0"));
  EXPECT_NE(e.find("training.epochs: must be between 1 and"), std::string::npos) << e;
  e = error_of(kGood + std::string("  batch_size: -3\n"));
  EXPECT_NE(e.find("training.batch_size: must be between 1 and"), std::string::npos) << e;
  e = error_of(kGood + std::string("  momentum: 1.5\n"));
  EXPECT_NE(e.find("training.momentum: must be between 0 and"), std::string::npos) << e;
  e = error_of(replace(kGood, "lr: 0.5", "lr: -0.1"));
  EXPECT_NE(e.find("training.lr: must be between 0 and"), std::string::npos) << e;
  e = error_of(kGood + std::string("  seed: -1\n"));
  EXPECT_NE(e.find("training.seed: expected a non-negative integer"), std::string::npos) << e;
}

TEST(Config, ChoicesSuggestTheClosest) {
  std::string e = error_of(replace(kGood, "format: mnist", "format: mnsit"));
  EXPECT_NE(e.find("cfg.yaml:3:11"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown value 'mnsit' (did you mean 'mnist'?)"), std::string::npos) << e;
  EXPECT_NE(e.find("mnist, cifar10"), std::string::npos) << e;
  e = error_of(replace(kGood, "loss: softmax_cross_entropy", "loss: mes"));
  EXPECT_NE(e.find("(did you mean 'mse'?)"), std::string::npos) << e;
}

TEST(Config, RequiredKeysAreNamed) {
  std::string e = error_of(replace(kGood, "  format: mnist\n", ""));
  EXPECT_NE(e.find("data.format: is required (one of: mnist, cifar10, images, npy)"), std::string::npos) << e;
  e = error_of("data: {format: mnist}\n");
  EXPECT_NE(e.find("model: is required"), std::string::npos) << e;
  e = error_of("data: {format: mnist}\nmodel: {loss: mse, layers: []}\n");
  EXPECT_NE(e.find("model.layers: must be a non-empty list"), std::string::npos) << e;
}

TEST(Config, SectionsMustBeMappings) {
  std::string e = error_of(replace(kGood, "training:\n  epochs: 2\n  lr: 0.5\n", "training: 5\n"));
  EXPECT_NE(e.find("training must be a mapping"), std::string::npos) << e;
}

TEST(Config, InvalidYamlGivesLine) {
  std::string e = error_of("data:\n  format: [mnist\nmodel: x\n");
  EXPECT_NE(e.find("cfg.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
  EXPECT_NE(error_of("").find("the config is empty"), std::string::npos);
  EXPECT_NE(error_of("- a\n- b\n").find("must be a mapping"), std::string::npos);
}

// yaml-cpp quotes the offending byte in some messages; like every error's
// control characters it is escaped (found by fuzz_config: 0xff 0x00 '\n').
TEST(Config, InvalidYamlErrorsStayOneLine) {
  std::string e = error_of(std::string("\xff\x00\n", 3));
  EXPECT_NE(e.find("not valid YAML: unknown escape character: \\x0a"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// A list or mapping as a key is a config error at its place, not yaml-cpp's
// "bad conversion" with exit code 1 (found by fuzz_config: "data:\n ? -").
TEST(Config, KeysMustBePlainNames) {
  for (const char* text : {"data:\n ? -\n", "data:\n  format: mnist\n  [a, b]: 1\n"}) {
    try {
      parse_config(text, "cfg.yaml");
      ADD_FAILURE() << "no error for " << text;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cfg.yaml:", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("data has a key that is a list; keys must be plain "
                                           "names"), std::string::npos) << e.what();
    }
  }
  std::string e = error_of(replace(kGood, "epochs: 2", "epochs: 2\n  {a: 1}: 2"));
  EXPECT_NE(e.find("training has a key that is a mapping"), std::string::npos) << e;
}

// A key or value with a line break is quoted escaped (found by fuzz_config).
TEST(Config, QuotedLineBreaksStayEscaped) {
  std::string e = error_of(replace(kGood, "epochs: 2", "\"epo\\nchs\": 2"));
  EXPECT_NE(e.find("unknown key 'training.epo\\x0achs'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  e = error_of(replace(kGood, "epochs: 2", "epochs: \"2\\n3\""));
  EXPECT_NE(e.find("expected an integer, got '2\\x0a3'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// The run's name goes into file names and checkpoints: printable UTF-8 only
// (found by fuzz_config, like the layer names of test_model.cpp).
TEST(Config, NameIsPrintableUtf8) {
  std::string e = error_of(replace(kGood, "name: tiny", "name: \"ti\\x01ny\""));
  EXPECT_NE(e.find("name: must not contain control characters, got 'ti\\x01ny'"),
            std::string::npos)
      << e;
  e = error_of(replace(kGood, "name: tiny", "name: ti\xc3ny"));
  EXPECT_NE(e.find("name: must be valid UTF-8, got 'ti\\xC3ny'"), std::string::npos) << e;
  EXPECT_EQ(parse_config(replace(kGood, "name: tiny", "name: t\xc3\xafny"), "c.yaml").name,
            "t\xc3\xafny");
}

TEST(Config, OverrideErrorsNameTheOverride) {
  std::string e = error_of(kGood, {{"training.epochs=abc", ""}});
  EXPECT_EQ(e.rfind("--set training.epochs=abc: training.epochs: expected an integer", 0), 0u) << e;
  e = error_of(kGood, {{"training.epochs=0", "--epochs 0"}});
  EXPECT_EQ(e.rfind("--epochs 0: training.epochs: must be between 1", 0), 0u) << e;
  e = error_of(kGood, {{"training.epocs=3", ""}});
  EXPECT_NE(e.find("--set training.epocs=3: unknown key 'training.epocs' (did you mean 'epochs'?)"),
            std::string::npos) << e;
  e = error_of(kGood, {{"noequals", ""}});
  EXPECT_NE(e.find("expected KEY=VALUE"), std::string::npos) << e;
  e = error_of(kGood, {{"model.layers.9.out_features=3", ""}});
  EXPECT_NE(e.find("is a list of 2 entries"), std::string::npos) << e;
  e = error_of(kGood, {{"training.epochs.x=3", ""}});
  EXPECT_NE(e.find("is a value, not a section"), std::string::npos) << e;
}

TEST(Config, ErrorsCarryTheConfigExitCode) {
  try {
    parse_config(replace(kGood, "epochs: 2", "epochs: 0"), "cfg.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
}

TEST(Config, MissingFileIsAConfigError) {
  try {
    load_config("/nonexistent/dir/x.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.yaml: no such config file"),
              std::string::npos);
  }
}

// yaml-cpp's node tree keeps the first of two equal keys; the config names both.
TEST(Config, DuplicateKeysAreRejectedWithBothLocations) {
  std::string e = error_of(kGood + std::string("  epochs: 3\n"));
  EXPECT_EQ(e, "cfg.yaml:13:3: duplicate key 'training.epochs', first given at cfg.yaml:11:3; a "
               "key may appear once in a mapping: remove one of them") << e;
  e = error_of(kGood + std::string("name: again\n"));
  EXPECT_NE(e.find("cfg.yaml:13:1: duplicate key 'name', first given at cfg.yaml:1:1"),
            std::string::npos) << e;
  // In a flow mapping inside a list, at any depth.
  e = error_of(replace(kGood, "{name: fc, type: linear, out_features: 10}",
                       "{name: fc, type: linear, out_features: 10, out_features: 5}"));
  EXPECT_NE(e.find("cfg.yaml:9:50: duplicate key 'model.layers.1.out_features', first given at "
                   "cfg.yaml:9:32"), std::string::npos) << e;
  // Quoting does not make a key another key.
  e = error_of(replace(kGood, "  lr: 0.5\n", "  lr: 0.5\n  \"lr\": 0.1\n"));
  EXPECT_NE(e.find("duplicate key 'training.lr'"), std::string::npos) << e;
  // Equal keys in different mappings are fine.
  EXPECT_NO_THROW(parse_config(replace(kGood, "{name: flat, type: flatten}",
                                       "{name: flat, type: flatten, impl: cpu}") ,
                               "cfg.yaml"));
}

TEST(Config, SecondDocumentIsRejected) {
  std::string e = error_of(kGood + std::string("---\ntraining:\n  epochs: 9\n"));
  EXPECT_EQ(e.rfind("cfg.yaml:13:1: a second YAML document starts here", 0), 0u) << e;
  e = error_of(kGood + std::string("...\n---\n"));
  EXPECT_NE(e.find("a second YAML document"), std::string::npos) << e;
  // A document marker before the only document is fine.
  EXPECT_EQ(parse_config("---\n" + std::string(kGood), "cfg.yaml").training.epochs, 2);
}

// "epochs: ~", "epochs:" and "--set training.epochs=" used to mean the default.
TEST(Config, NullValuesNeedAValue) {
  for (const char* bad : {"epochs: ~", "epochs:", "epochs: null"}) {
    std::string e = error_of(replace(kGood, "epochs: 2", bad));
    EXPECT_NE(e.find("training.epochs: needs a value; to use the default, leave the key out"),
              std::string::npos) << bad << ": " << e;
    EXPECT_EQ(e.rfind("cfg.yaml:11:", 0), 0u) << bad << ": " << e;
  }
  std::string e = error_of(kGood, {{"training.epochs=", ""}});
  EXPECT_EQ(e, "--set training.epochs=: training.epochs: needs a value; to use the default, "
               "leave the key out") << e;
  e = error_of(kGood, {{"training.seed=", "--seed "}});
  EXPECT_EQ(e.rfind("--seed : training.seed: needs a value", 0), 0u) << e;
  e = error_of(replace(kGood, "name: tiny", "name:"));
  EXPECT_NE(e.find("name: needs a value"), std::string::npos) << e;
  e = error_of(replace(kGood, "  path: /tmp/nowhere\n", "  path: ~\n"));
  EXPECT_NE(e.find("data.path: needs a value"), std::string::npos) << e;
  e = error_of(kGood + std::string("output:\n"));
  EXPECT_NE(e.find("output: needs a value"), std::string::npos) << e;
  e = error_of(replace(kGood, "  format: mnist\n", "  format:\n"));
  EXPECT_NE(e.find("data.format: needs a value"), std::string::npos) << e;
  e = error_of(kGood + std::string("  shuffle: ~\n"));
  EXPECT_NE(e.find("training.shuffle: needs a value"), std::string::npos) << e;
  e = error_of(kGood + std::string("  momentum: ~\n"));
  EXPECT_NE(e.find("training.momentum: needs a value"), std::string::npos) << e;
  e = error_of(replace(kGood, "  layers:\n", "  features: ~\n  layers:\n"));
  EXPECT_NE(e.find("model.features: needs a value"), std::string::npos) << e;
}

TEST(Config, TooLargeNumbersAreOutOfRangeNotTheWrongType) {
  std::string e = error_of(replace(kGood, "epochs: 2", "epochs: 99999999999999999999"));
  EXPECT_EQ(e, "cfg.yaml:11:11: training.epochs: out of range, must be between 1 and 1000000, "
               "got 99999999999999999999") << e;
  e = error_of(kGood + std::string("  batch_size: -99999999999999999999\n"));
  EXPECT_NE(e.find("training.batch_size: out of range, must be between 1 and 1048576, got "
                   "-99999999999999999999"), std::string::npos) << e;
  e = error_of(kGood + std::string("  seed: 18446744073709551616\n"));
  EXPECT_NE(e.find("training.seed: out of range, must be between 0 and 18446744073709551615, got "
                   "18446744073709551616"), std::string::npos) << e;
  EXPECT_EQ(parse_config(kGood + std::string("  seed: 18446744073709551615\n"), "cfg.yaml")
                .training.seed, 18446744073709551615u);
  e = error_of(replace(kGood, "lr: 0.5", "lr: 1e999"));
  EXPECT_NE(e.find("training.lr: out of range, must be between 0 and 1e+06, got 1e999"),
            std::string::npos) << e;
  e = error_of(kGood, {{"training.epochs=99999999999999999999", "--epochs 99999999999999999999"}});
  EXPECT_EQ(e.rfind("--epochs 99999999999999999999: training.epochs: out of range", 0), 0u) << e;
  // Not numbers at all are still the wrong type.
  e = error_of(replace(kGood, "epochs: 2", "epochs: 9x"));
  EXPECT_NE(e.find("expected an integer, got '9x'"), std::string::npos) << e;
}

TEST(Config, OverrideListIndexOutOfRangeOrNotANumber) {
  std::string e = error_of(kGood, {{"model.layers.99999999999999999999.x=4", ""}});
  EXPECT_EQ(e, "--set model.layers.99999999999999999999.x=4: index 99999999999999999999 is out "
               "of range: 'model.layers' is a list of 2 entries; use an index 0..1 after it") << e;
  e = error_of(kGood, {{"model.layers.2.out_features=4", ""}});
  EXPECT_NE(e.find("index 2 is out of range"), std::string::npos) << e;
  e = error_of(kGood, {{"model.layers.fc.out_features=4", ""}});
  EXPECT_EQ(e, "--set model.layers.fc.out_features=4: 'fc' is not a list index: 'model.layers' is "
               "a list of 2 entries; use an index 0..1 after it") << e;
  e = error_of(kGood, {{"model.layers.-1.out_features=4", ""}});
  EXPECT_NE(e.find("'-1' is not a list index"), std::string::npos) << e;
  e = error_of("data: {format: mnist, path: x}\nmodel: {loss: mse, layers: []}\n",
               {{"model.layers.0.type=relu", ""}});
  EXPECT_NE(e.find("index 0 is out of range: 'model.layers' is a list of 0 entries; it has no "
                   "entry to set"), std::string::npos) << e;
  EXPECT_EQ(parse_config(kGood, "cfg.yaml", {{"model.layers.01.out_features=7", ""}})
                .model.layers[1].node["out_features"].as<int>(), 7);
}

// A bad run name used to pass the config and fail an internal check in the
// checkpoint writer after the first epoch.
TEST(Config, RunNameIsCheckedUpFront) {
  auto named = [](const std::string& n) {
    return error_of(replace(kGood, "name: tiny", "name: \"" + n + "\""));
  };
  std::string e = error_of(replace(kGood, "name: tiny", "name: bad\xffname"));
  EXPECT_EQ(e, "cfg.yaml:1:7: name: must be valid UTF-8, got 'bad\\xFFname'") << e;
  e = error_of(kGood, {{"name=a\xff", ""}});
  EXPECT_EQ(e, "--set name=a\xff: name: must be valid UTF-8, got 'a\\xFF'") << e;
  e = named(std::string(101, 'x'));
  EXPECT_NE(e.find("name: must be at most 100 bytes long, got 101 bytes"), std::string::npos) << e;
  EXPECT_EQ(parse_config(replace(kGood, "name: tiny", "name: " + std::string(100, 'x')),
                         "cfg.yaml").name.size(), 100u);
  e = named("a/b");
  EXPECT_NE(e.find("name: must not contain '/'"), std::string::npos) << e;
  e = named("..");
  EXPECT_NE(e.find("name: must not be '.' or '..'"), std::string::npos) << e;
  e = named(".");
  EXPECT_NE(e.find("name: must not be '.' or '..'"), std::string::npos) << e;
  e = named("tab\\there");
  EXPECT_NE(e.find("name: must not contain control characters, got 'tab\\x09here'"),
            std::string::npos) << e;
  e = named("");
  EXPECT_NE(e.find("name: must not be empty"), std::string::npos) << e;
  // Any valid UTF-8 is a name.
  EXPECT_EQ(parse_config(replace(kGood, "name: tiny", "name: модель-1.v2"), "cfg.yaml").name,
            "модель-1.v2");
  // The default, the file's stem, is checked too, and the message says where it came from.
  e = [&] {
    try {
      parse_config(replace(kGood, "name: tiny\n", ""), "configs/m\xfe.yaml");
    } catch (const ConfigError& err) {
      return std::string(err.what());
    }
    return std::string("(no error)");
  }();
  EXPECT_EQ(e, "configs/m\xfe.yaml: the run name (name; by default the config's file name without "
               ".yaml) must be valid UTF-8, got 'm\\xFE'; set name: in the config, or --set "
               "name=NAME") << e;
}

// A config path that is not a regular file is named for what it is; a FIFO
// or /dev/zero used to block or read forever.
TEST(Config, FileThatIsNotARegularFileIsNamed) {
  testing::TempDir dir;
  auto load_error = [](const std::string& path) {
    try {
      load_config(path);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(load_error(dir.path().string()),
            dir.path().string() + ": is a directory, not a regular file; give a YAML config "
                                  "file, e.g. configs/fashion_ae.yaml");
  EXPECT_NE(load_error("/dev/null").find("/dev/null: is a character device, not a regular file"),
            std::string::npos);
  const std::string fifo = dir.file("cfg.yaml");
  testing::make_fifo(fifo);
  std::string e = testing::returns_without_blocking(fifo, [&] { return load_error(fifo); });
  EXPECT_EQ(e.rfind(fifo + ": is a FIFO, not a regular file", 0), 0u) << e;
}

TEST(Config, FileOverOneMiBIsRefused) {
  testing::TempDir dir;
  const std::string big = dir.file("big.yaml");
  {
    std::ofstream out(big);
    out << kGood;
    out << "# " << std::string((1 << 20) - std::string(kGood).size(), 'x') << "\n";
  }
  try {
    load_config(big);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              big + ": the config file is 1048579 bytes, more than the 1048576 bytes (1 MiB) a "
                    "config may have; is this the right file?");
  }
  std::filesystem::resize_file(big, 1 << 20);  // exactly 1 MiB is a config
  EXPECT_EQ(load_config(big).name, "tiny");
}

TEST(Config, DidYouMean) {
  EXPECT_EQ(did_you_mean("epoch", {"epochs", "lr", "seed"}), "epochs");
  EXPECT_EQ(did_you_mean("conv", {"conv2d", "linear", "relu"}), "conv2d");
  EXPECT_EQ(did_you_mean("zzzzzz", {"epochs", "lr"}), "");
  EXPECT_EQ(did_you_mean("batch", {"batch_size", "lr"}), "batch_size");
}

}  // namespace
}  // namespace hpmc
