// hpmc — command-line entry point.
//
//   hpmc run CONFIG [--impl cpu|naive|tiled|im2col] [--data DIR] [--epochs N]
//            [--batch N] [--lr X] [--seed N] [--out DIR] [--set KEY=VALUE]...
//   hpmc info
//
// Every failure prints one line "hpmc: error: ..." on stderr and exits with
// the code documented in README.md (see core/error.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"

namespace {

int run_main(int argc, char** argv) {
  using namespace hpmc;
  CLI::App app{"hpmc — trains convolutional autoencoders and MLPs on the CPU and GPU", "hpmc"};
  app.set_version_flag("--version", HPMC_VERSION);
  app.require_subcommand(1);

  RunOptions ro;
  int epochs = 0, batch = 0;
  double lr = 0;
  std::string seed, out_dir;
  std::vector<std::string> sets;
  CLI::App* run = app.add_subcommand("run", "train a model from a YAML config");
  run->add_option("config", ro.config, "the YAML config, e.g. configs/fashion_ae.yaml")->required();
  run->add_option("--impl", ro.impl, "layer implementation: cpu, naive, tiled or im2col")
      ->capture_default_str();
  run->add_option("--data", ro.data_dir, "dataset directory (overrides data.path)");
  run->add_option("--epochs", epochs, "number of epochs (training.epochs)");
  run->add_option("--batch", batch, "batch size (training.batch_size)");
  run->add_option("--lr", lr, "learning rate (training.lr)");
  run->add_option("--seed", seed, "random seed (training.seed)");
  run->add_option("--out", out_dir, "output directory (output.dir)");
  run->add_option("--set", sets, "override any config key: --set training.epochs=2")
      ->type_name("KEY=VALUE");
  run->add_option("--progress", ro.progress, "progress display: auto, bar, lines or quiet")
      ->check(CLI::IsMember({"auto", "bar", "lines", "quiet"}))
      ->capture_default_str();

  app.add_subcommand("info", "show version, build options, CPU features and CUDA devices");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "hpmc: error: " << e.what() << " (see hpmc --help)\n";
    return int(ExitCode::kUsage);
  }

  if (run->parsed()) {
    // Flags become overrides, named as the user typed them in any error.
    auto flag = [&](const std::string& key, const std::string& value, const std::string& name) {
      ro.overrides.push_back({key + "=" + value, name + " " + value});
    };
    if (run->count("--epochs")) flag("training.epochs", std::to_string(epochs), "--epochs");
    if (run->count("--batch")) flag("training.batch_size", std::to_string(batch), "--batch");
    if (run->count("--lr")) flag("training.lr", run->get_option("--lr")->as<std::string>(), "--lr");
    if (run->count("--seed")) flag("training.seed", seed, "--seed");
    if (run->count("--out")) flag("output.dir", out_dir, "--out");
    for (const auto& s : sets) ro.overrides.push_back({s, ""});
    cmd_run(ro, std::cout);
  } else {
    cmd_info(std::cout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const hpmc::Error& e) {
    std::cout.flush();
    std::cerr << "hpmc: error: " << e.what() << "\n";
    return int(e.code());
  } catch (const std::bad_alloc&) {
    std::cout.flush();
    std::cerr << "hpmc: error: out of memory; try a smaller batch size (--batch)\n";
    return int(hpmc::ExitCode::kRuntime);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "hpmc: error: " << e.what() << "\n";
    return int(hpmc::ExitCode::kRuntime);
  }
}
