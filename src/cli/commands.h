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

struct RunOptions {
  std::string config;
  std::string impl = "cpu";
  std::string data_dir;            // --data (overrides data.path)
  std::vector<Override> overrides; // --epochs, --batch, --lr, --seed, --out, --set
  std::string progress = "auto";   // auto | bar | lines | quiet
};

// Load the config with the options' overrides applied.
Config load_run_config(const RunOptions& o);

// `hpmc run`: print the model table, load the data, train.
void cmd_run(const RunOptions& o, std::ostream& out);
// `hpmc info`: version, build options, CPU features, CUDA devices.
void cmd_info(std::ostream& out);

}  // namespace hpmc
