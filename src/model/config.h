// config.h — the YAML run configuration, read strictly.
//
// Every key is checked: unknown keys (with a did-you-mean), wrong types,
// non-finite or out-of-range numbers, keys given twice, keys without a value,
// a second YAML document and a file that is not a regular file of at most
// 1 MiB each raise a ConfigError of one line that starts with where the value
// came from — "FILE:LINE:COL" for the file, "--set KEY=VALUE" for a
// command-line override. The full key reference
// (every key and its default) is in README.md; keep the two in step.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/precision.h"
#include "data/augment.h"
#include "data/dataset.h"
#include "optim/optim_config.h"

namespace hpmc {

// Where each config value came from, for error messages.
struct ConfigSource {
  std::string file;                              // the config file as given
  std::map<std::string, std::string> overrides;  // dotted path -> "--set path=value"
  std::string where(const YAML::Node& node, const std::string& path) const;
};

// Reads one YAML mapping, remembering which keys were asked for so that
// finish() can reject the rest with a did-you-mean.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, const ConfigSource& src);

  bool has(const std::string& key) const;
  int get_int(const std::string& key, int def, int lo, int hi);
  int require_int(const std::string& key, int lo, int hi);
  uint64_t get_u64(const std::string& key, uint64_t def);
  double get_float(const std::string& key, double def, double lo, double hi);
  bool get_bool(const std::string& key, bool def);
  std::string get_string(const std::string& key, const std::string& def);
  std::string require_string(const std::string& key);
  // A string that must be one of `choices`.
  std::string get_choice(const std::string& key, const std::string& def,
                         const std::vector<std::string>& choices);
  YAML::Node get_node(const std::string& key);  // null node if absent (key is still "known")

  // Throws for the first key that no get_* asked for.
  void finish();
  // Every key read so far with the value used (the default where absent):
  // the resolved form that config.yaml in a run directory records.
  const YAML::Node& resolved() const { return resolved_; }
  void set_resolved(const std::string& key, const YAML::Node& v) { resolved_[key] = v; }

  // "FILE:LINE:COL: PATH.KEY" for a key of this map (or the map itself if key is empty).
  std::string where(const std::string& key = "") const;
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  const std::string& path() const { return path_; }

 private:
  std::string key_path(const std::string& key) const;
  std::string key_where(const std::string& key) const;  // where the key itself is
  YAML::Node value(const std::string& key);
  void check_misspelled(const std::string& key) const;

  YAML::Node node_;
  std::string path_;
  const ConfigSource& src_;
  std::set<std::string> known_;
  YAML::Node resolved_{YAML::NodeType::Map};
};

// One entry of model.layers, kept as YAML until the model is built (each
// layer type reads and checks its own keys then).
struct LayerNode {
  YAML::Node node;
  std::string path;  // "model.layers.3"
  int index = 0;
};

struct DataConfig {
  std::string format;  // "mnist" | "cifar10" | "images" | "npy"
  std::string path;
  int train_limit = 0;  // 0: every sample
  int test_limit = 0;
  bool synthetic = false;  // random data of the data's shape (benchmarks)
  // images and npy: data.size, data.channels, data.layout, data.test_fraction,
  // data.split_seed (data/dataset.h)
  DataOptions options;
};

struct TrainingConfig {
  int epochs = 1;
  int batch_size = 64;  // samples per rank and micro-batch
  // Micro-batches whose gradients are summed before each update: an update
  // takes ranks × batch_size × grad_accumulation samples (model/trainer.h)
  int grad_accumulation = 1;
  // training.optimizer (or the flat lr / momentum / weight_decay: sgd),
  // training.schedule, training.clip_grad_norm (0: off): optim/optim_config.h
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double clip_grad_norm = 0.0;
  uint64_t seed = 1;
  bool shuffle = true;
  int threads = 0;  // CPU threads; 0: OMP_NUM_THREADS or every core
  // GPU: one fused kernel per step where the model fits (model/fused_step.h),
  // and the GPU rewrite's fused layers (model/gpu_rewrite.h: activations in
  // the conv epilogue, ReLU backwards in the layer after them)
  bool fuse = true;
  // GPU, --impl im2col, with fuse: a nearest ×2 upsample runs inside the 3×3
  // conv2d after it (the rewrite's fold); results equal to rounding, not bit for bit
  bool fold_upsample = true;
  // The arithmetic of the matrix products (core/precision.h): fp32 (exact
  // FP32), tf32 or bf16; which impl runs which is model/impl.h's
  // precision_refusal. `--precision` sets it for any command.
  Precision precision = Precision::kFp32;
  // Training-time input transforms (data/augment.h), applied by the trainer to
  // training batches only. input_noise is training.input_noise; augment is
  // read from data.augment (where the YAML keeps what is done to the data)
  // and kept here, with everything else the trainer reads.
  InputNoiseConfig input_noise;
  AugmentConfig augment;
};

struct OutputConfig {
  std::string dir;               // default runs/<name>
  std::string weights_dir = "weights";
  int checkpoint_every = 0;      // steps between extra checkpoints (0: once per epoch only)
  int log_every = 0;             // steps between metrics.csv rows (0: once per epoch only)
  int recon_count = 16;          // test images in the reconstruction grid
  bool recon_every_epoch = false;
};

struct ModelConfig {
  std::string loss;      // a loss of layers/loss_list.h: "mse", "softmax_cross_entropy", ...
  std::string features;  // layer whose output is the encoder's features ("" if none)
  std::vector<LayerNode> layers;
};

struct Config {
  std::string name;
  DataConfig data;
  ModelConfig model;
  TrainingConfig training;
  OutputConfig output;
  ConfigSource source;
  YAML::Node root;      // the document after overrides
  YAML::Node resolved;  // every key with the value used (layers as written)
};

// Apply a "a.b.c=value" override to a parsed document (value parsed as
// YAML). `origin` is how errors name it (default "--set a.b.c=value").
void apply_override(YAML::Node root, const std::string& assignment, ConfigSource& src,
                    const std::string& origin = "");

// A command-line override: "key.path=value" and how errors should name it.
struct Override {
  std::string assignment;
  std::string origin;  // "" means "--set <assignment>"
};

// Parse and validate, after applying the overrides in order.
Config load_config(const std::string& path, const std::vector<Override>& overrides = {});
Config parse_config(const std::string& yaml_text, const std::string& name_for_errors,
                    const std::vector<Override>& overrides = {});

// The closest of `candidates` to `word`, or "" if none is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace hpmc
