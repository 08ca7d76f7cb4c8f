// commands.h — the `hpmc` subcommands, callable from main() and from tests.
//
// Each command returns normally on success and throws hpmc::Error (which
// carries the exit code) on failure; main() prints the one-line message.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "model/config.h"

namespace hpmc {

// What every command that loads a config shares.
struct CommonOptions {
  std::string config;
  std::string impl = "cpu";         // an impl name or "auto" (model/impl.h choose_impl)
  std::string data_dir;             // --data (overrides data.path)
  std::vector<Override> overrides;  // --epochs, --batch, --set, ...
};

struct RunOptions : CommonOptions {
  std::string progress = "auto";  // auto | bar | lines | quiet
  bool resume = false;            // continue from <weights_dir>/<name>.safetensors
  bool overwrite = false;         // replace the outputs of an earlier run
  std::string init;               // start from this checkpoint's weights
  bool profile = false;           // per-region timing table at the end
  bool sync_debug = false;        // synchronize and check after every GPU kernel
  // The command line as typed (argv), so that an interrupted run can print the
  // exact command that continues it; empty: "hpmc run CONFIG --resume".
  std::vector<std::string> argv;
};

// eval, recon and features run on the GPU when one is usable: `--impl auto`.
struct EvalOptions : CommonOptions {
  EvalOptions() { impl = "auto"; }
  std::string weights;  // checkpoint to evaluate
};

struct ReconOptions : CommonOptions {
  ReconOptions() { impl = "auto"; }
  std::string weights;
  int count = 16;
  bool count_given = false;  // --count was on the command line
  std::string out_dir;  // default: the config's output.dir
  // Image files or directories to reconstruct instead of test images.
  std::vector<std::string> images;
};

struct FeaturesOptions : CommonOptions {
  FeaturesOptions() { impl = "auto"; }
  std::string weights;
  std::string split = "all";   // train | test | all
  std::string format = "both"; // csv | npy | libsvm | both (csv, npy) | all (the three)
  std::string out_dir;         // default: the config's output.dir
  bool overwrite = false;      // replace feature files that already exist
  std::string progress = "auto";  // auto (a bar on a terminal, else nothing) | bar | lines | quiet
  // Rows a CSV or LIBSVM chunk holds (io/feature_text.h); 0: the default, or
  // HPMC_FEATURES_CHUNK_ROWS when set (for tests: the files are the same
  // bytes for any chunk).
  int chunk_rows = 0;
  bool split_given = false;  // --split was on the command line
  // Image files or directories whose features to export instead of a split's:
  // the files are features_images.* with names_images.txt, rows keyed by
  // file name.
  std::vector<std::string> images;
};

// `hpmc bench`: time whole training steps (see src/cli/bench.cpp).
struct BenchOptions : CommonOptions {
  int steps = 50;          // steps per timed run
  int warmup = 10;         // untimed steps first
  int repeats = 5;         // timed runs; the report gives their median
  bool real_data = false;  // the config's dataset instead of synthetic images
};

// Load the config with the options' overrides applied.
Config load_command_config(const CommonOptions& o);

// The options with `--impl auto` replaced by the impl it picks, which is
// printed to `out` with the reason ("impl auto: im2col (GPU 0: …)"). Other
// impls pass through as they are; an unknown one is a UsageError.
CommonOptions with_chosen_impl(const CommonOptions& o, std::ostream& out);

void cmd_run(const RunOptions& o, std::ostream& out);
void cmd_eval(const EvalOptions& o, std::ostream& out);
void cmd_recon(const ReconOptions& o, std::ostream& out);
void cmd_features(const FeaturesOptions& o, std::ostream& out);
void cmd_bench(const BenchOptions& o, std::ostream& out);
// `hpmc info`: version, build options, CPU features, CUDA devices.
void cmd_info(std::ostream& out);

}  // namespace hpmc
