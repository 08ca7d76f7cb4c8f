// hpmc — command-line entry point.
//
//   hpmc run CONFIG [--impl IMPL] [--precision P] [--data DIR] [--epochs N] [--batch N]
//            [--lr X] [--seed N] [--out DIR] [--weights-dir DIR] [--log-every N]
//            [--resume | --overwrite] [--init FILE] [--set KEY=VALUE]...
//   hpmc eval CONFIG --weights FILE [--data DIR] [--impl IMPL] [--precision P]
//   hpmc recon CONFIG --weights FILE [--count N | --images PATH...] [--out DIR]
//   hpmc features CONFIG --weights FILE [--split train|test|all]
//            [--format csv|npy|libsvm|both|all] [--batch N] [--out DIR] [--overwrite]
//            [--progress auto|bar|lines|quiet]
//   (IMPL: auto, cpu, naive, tiled or im2col; eval, recon and features
//   default to auto, run and bench to cpu. P: fp32, tf32 or bf16, for every
//   command that has --impl: training.precision)
//   hpmc bench CONFIG [--impl IMPL] [--precision P] [--batch N] [--steps N] [--warmup N]
//            [--repeats N] [--set KEY=VALUE]... [--data DIR] [--real-data]
//   hpmc info
//
// Every failure prints one line "hpmc: error: ..." on stderr and exits with
// the code documented in README.md (see core/error.h).
//
// Under mpirun (`mpirun -np N hpmc run|bench ...`) each process is a rank of
// a data-parallel run (dist/communicator.h): rank 0 alone prints and writes;
// a failing rank prints "hpmc: error: rank R of N: ..." and ends the job.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/reference.h"
#include "core/error.h"
#include "core/threads.h"
#include "dist/communicator.h"

namespace {

using namespace hpmc;

// Options every config-driven command takes; flags become config overrides
// named as the user typed them, so errors point at the flag.
struct Common {
  std::string epochs, batch, lr, seed, out, weights_dir, log_every, precision;
  std::vector<std::string> sets;
  bool training = false;  // the flags above exist (bench adds only --batch, to `batch`)

  void add(CLI::App* c, CommonOptions& o, bool training_flags) {
    training = training_flags;
    c->add_option("config", o.config, "the YAML config, e.g. configs/fashion_ae.yaml")->required();
    c->add_option("--impl", o.impl,
                  "layer implementation: cpu, naive, tiled or im2col; auto: im2col where a GPU "
                  "is usable, else cpu")
        ->capture_default_str();
    c->add_option("--data", o.data_dir, "dataset directory (overrides data.path)");
    c->add_option("--precision", precision,
                  "arithmetic of the matrix products: fp32, tf32 (GPU) or bf16 "
                  "(training.precision)");
    if (training_flags) {
      c->add_option("--epochs", epochs, "number of epochs (training.epochs)");
      c->add_option("--batch", batch, "batch size (training.batch_size)");
      c->add_option("--lr", lr, "learning rate (training.lr)");
      c->add_option("--seed", seed, "random seed (training.seed)");
      c->add_option("--out", out, "run directory (output.dir)");
      c->add_option("--weights-dir", weights_dir, "checkpoint directory (output.weights_dir)");
      c->add_option("--log-every", log_every, "also log a metrics row every N steps (output.log_every)");
    }
    c->add_option("--set", sets, "override any config key: --set training.epochs=2")
        ->type_name("KEY=VALUE");
  }

  void apply(CLI::App* c, CommonOptions& o) const {
    auto flag = [&](const char* name, const char* key, const std::string& v) {
      if (c->get_option_no_throw(name) && c->count(name))
        o.overrides.push_back({std::string(key) + "=" + v, std::string(name) + " " + v});
    };
    flag("--batch", "training.batch_size", batch);
    flag("--precision", "training.precision", precision);
    if (training) {  // recon's and features' own --out is where they write, not output.dir
      flag("--epochs", "training.epochs", epochs);
      flag("--lr", "training.lr", lr);
      flag("--seed", "training.seed", seed);
      flag("--out", "output.dir", out);
      flag("--weights-dir", "output.weights_dir", weights_dir);
      flag("--log-every", "output.log_every", log_every);
    }
    for (const auto& s : sets) o.overrides.push_back({s, ""});
  }
};

int run_main(int argc, char** argv) {
  CLI::App app{"hpmc — trains convolutional autoencoders and MLPs on the CPU and GPU", "hpmc"};
  // A flag given twice takes its last value, as in most Unix tools.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", HPMC_VERSION);
  app.require_subcommand(1);

  RunOptions ro;
  Common rc;
  CLI::App* run = app.add_subcommand("run", "train a model from a YAML config");
  rc.add(run, ro, true);
  run->add_flag("--resume", ro.resume, "continue from the run's last checkpoint");
  run->add_flag("--overwrite", ro.overwrite, "replace the outputs of an earlier run");
  run->add_option("--init", ro.init, "start from the weights of this checkpoint (fresh optimizer)");
  run->add_flag("--profile", ro.profile, "print a per-layer/per-kernel timing table at the end");
  run->add_flag("--sync-debug", ro.sync_debug,
                "synchronize and check after every GPU kernel, so a fault names its layer");
  run->add_option("--progress", ro.progress, "progress display: auto, bar, lines or quiet")
      ->check(CLI::IsMember({"auto", "bar", "lines", "quiet"}))
      ->capture_default_str();

  EvalOptions eo;
  Common ec;
  CLI::App* eval = app.add_subcommand("eval", "test loss (and accuracy) of a checkpoint");
  ec.add(eval, eo, false);
  eval->add_option("--weights", eo.weights, "checkpoint (.safetensors) to evaluate")->required();

  ReconOptions reo;
  Common rec;
  CLI::App* recon = app.add_subcommand("recon", "PNG grid of test images above their reconstructions");
  rec.add(recon, reo, false);
  recon->add_option("--weights", reo.weights, "checkpoint (.safetensors)")->required();
  recon->add_option("--count", reo.count, "number of test images")->capture_default_str();
  recon->add_option("--out", reo.out_dir, "directory for recon.png (default: output.dir)");
  recon->add_option("--images", reo.images,
                    "image files or directories (PNG, JPEG, BMP) to reconstruct instead of test "
                    "images")
      ->type_name("PATH...")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  FeaturesOptions fo;
  Common fc;
  CLI::App* feats = app.add_subcommand("features", "export the encoder's features for an SVM");
  fc.add(feats, fo, false);
  feats->add_option("--weights", fo.weights, "checkpoint (.safetensors)")->required();
  feats->add_option("--split", fo.split, "train, test or all")
      ->check(CLI::IsMember({"train", "test", "all"}))
      ->capture_default_str();
  feats->add_option("--format", fo.format,
                    "csv, npy, libsvm, both (csv and npy) or all (csv, npy and libsvm)")
      ->check(CLI::IsMember({"csv", "npy", "libsvm", "both", "all"}))
      ->capture_default_str();
  feats->add_option("--batch", fc.batch, "samples per forward pass (training.batch_size)");
  feats->add_option("--progress", fo.progress,
                    "progress display: auto (a bar on a terminal, else none), bar, lines or quiet")
      ->check(CLI::IsMember({"auto", "bar", "lines", "quiet"}))
      ->capture_default_str();
  feats->add_option("--images", fo.images,
                    "image files or directories (PNG, JPEG, BMP) whose features to export instead "
                    "of a split's (rows keyed by file name)")
      ->type_name("PATH...")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  feats->add_option("--out", fo.out_dir, "output directory (default: output.dir)");
  feats->add_flag("--overwrite", fo.overwrite, "replace feature files that already exist");

  BenchOptions bo;
  Common bc;
  CLI::App* bench = app.add_subcommand("bench", "time training steps: ms/step, images/s, FLOP/s");
  bc.add(bench, bo, false);
  bench->add_option("--batch", bc.batch, "batch size (training.batch_size)");
  bench->add_option("--steps", bo.steps, "training steps per timed run")->capture_default_str();
  bench->add_option("--warmup", bo.warmup, "untimed steps before the runs")->capture_default_str();
  bench->add_option("--repeats", bo.repeats, "timed runs (the median is reported)")
      ->capture_default_str();
  bench->add_flag("--real-data", bo.real_data,
                  "train on the config's dataset instead of synthetic images");

  CLI::App* info = app.add_subcommand(
      "info", "show version, build options, CPU features, CUDA devices, layers and losses");
  bool reference = false;
  info->add_flag("--reference", reference,
                 "print only the layer and loss reference, as the Markdown of README.md's "
                 "\"Layer reference\" section");

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

  dist::Communicator& world = dist::world();
  if (world.size() > 1 && !run->parsed() && !bench->parsed()) {
    const CLI::App* cmd = app.get_subcommands().front();
    throw UsageError(str("hpmc ", cmd->get_name(), " runs in one process, and this is rank ",
                         world.rank(), " of ", world.size(), "; start it without mpirun (only "
                         "hpmc run and hpmc bench train over several ranks)"));
  }
  // Rank 0 speaks for the run; the others print nothing but their errors.
  std::ostream silent(nullptr);
  std::ostream& out = world.rank() == 0 ? std::cout : silent;
  if (run->parsed()) {
    rc.apply(run, ro);
    ro.argv.assign(argv, argv + argc);
    cmd_run(ro, out);
  } else if (eval->parsed()) {
    ec.apply(eval, eo);
    cmd_eval(eo, std::cout);
  } else if (recon->parsed()) {
    rec.apply(recon, reo);
    reo.count_given = recon->count("--count") > 0;
    cmd_recon(reo, std::cout);
  } else if (feats->parsed()) {
    fc.apply(feats, fo);
    fo.split_given = feats->count("--split") > 0;
    cmd_features(fo, std::cout);
  } else if (bench->parsed()) {
    bc.apply(bench, bo);
    cmd_bench(bo, out);
  } else if (reference) {
    print_reference_markdown(std::cout);
  } else {
    cmd_info(std::cout);
  }
  return 0;
}

// Prints the one error line and returns the exit code; one rank of several
// ends the whole job instead (MPI_Abort). An error that every rank meets (a
// bad config) is printed once: the ranks other than 0 wait 3 s first,
// and rank 0's abort (or exit, without MPI) ends them before they print. An
// interrupted run, which every rank stops at the same step, ends normally.
int fail(const std::string& message, hpmc::ExitCode code) {
  std::cout.flush();
  hpmc::dist::Launch launch;
  try {
    launch = hpmc::dist::launch_from_environment();
  } catch (const hpmc::Error&) {  // malformed: the message already says so
  }
  hpmc::dist::Communicator& world = hpmc::dist::world();
  if (world.size() > 1 && code == hpmc::ExitCode::kInterrupted) {
    // Every rank stopped after the same step and rank 0 wrote the
    // checkpoint: it alone says so, and the ranks leave MPI together.
    if (world.rank() == 0)
      std::cerr << "hpmc: error: rank 0 of " << world.size() << ": " << message << "\n";
    return int(code);
  }
  if (launch.size > 1 && launch.rank != 0) std::this_thread::sleep_for(std::chrono::seconds(3));
  if (world.size() > 1) world.abort(message, int(code));
  std::cerr << "hpmc: error: " << message << "\n";
  return int(code);
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything else: may re-execute hpmc with short OpenMP waits.
  hpmc::prefer_short_waits(argv);
  int code = 0;
  try {
    hpmc::dist::init_world();
    code = run_main(argc, argv);
  } catch (const hpmc::Error& e) {
    code = fail(e.what(), e.code());
  } catch (const std::bad_alloc&) {
    code = fail("out of memory; try a smaller batch size (--batch)", hpmc::ExitCode::kRuntime);
  } catch (const std::exception& e) {
    code = fail(e.what(), hpmc::ExitCode::kRuntime);
  }
  hpmc::dist::finalize_world();
  return code;
}
