// run.cpp — `hpmc run`: train, checkpoint, log, and leave a run directory.
//
// The run directory (--out, default runs/<name>) receives config.yaml (the
// resolved config), metrics.csv, loss.png and recon.png; the checkpoint goes
// to <weights_dir>/<name>.safetensors after every epoch, every
// output.checkpoint_every steps, and when SIGINT/SIGTERM arrives (the
// current step finishes first). --resume continues exactly from it.
//
// Under mpirun every rank reads the config, the data and (--resume, --init)
// the checkpoint, and makes the same checks; rank 0 alone writes the run
// directory and the checkpoint, after every rank has passed its checks.
#include <csignal>
#include <filesystem>
#include <ostream>

#include <yaml-cpp/yaml.h>

#include "cli/commands.h"
#include "cli/outputs.h"
#include "cli/session.h"
#include "core/atomic_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/regular_file.h"
#include "dist/communicator.h"
#include "model/checkpoint.h"
#include "model/trainer.h"

namespace hpmc {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  // A second signal ends the process the ordinary way.
  std::signal(sig, SIG_DFL);
}

// Installs the handlers for the lifetime of a run, then restores them.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    old_int_ = std::signal(SIGINT, on_stop_signal);
    old_term_ = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignals() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  int caught() const { return g_stop_signal; }

 private:
  void (*old_int_)(int);
  void (*old_term_)(int);
};

const char* kRunFiles[] = {"config.yaml", "metrics.csv", "loss.png", "recon.png"};

bool holds_a_run(const std::string& dir) {
  return std::filesystem::exists(join_path(dir, "config.yaml")) ||
         std::filesystem::exists(join_path(dir, "metrics.csv"));
}

// How to start a run beside an earlier one of the same config. With the
// default run directory, a new run name moves both it and the checkpoint:
// "--set name=fashion_ae-2 (a new runs/fashion_ae-2 and
// weights/fashion_ae-2.safetensors)", with the first such name still free.
std::string another_run(const Config& cfg) {
  const std::string generic = "a new --out and --weights-dir";
  if (cfg.output.dir != "runs/" + cfg.name) return generic;
  for (int k = 2; k < 1000; ++k) {
    const std::string name = str(cfg.name, "-", k);
    if (name.size() > 100) break;  // the longest run name (model/config.cpp)
    const std::string dir = "runs/" + name;
    const std::string ckpt = join_path(cfg.output.weights_dir, name + ".safetensors");
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) || std::filesystem::exists(ckpt, ec)) continue;
    return str("--set name=", name, " (a new ", dir, " and ", ckpt, ")");
  }
  return generic;
}

// Remove what an earlier run left in `dir` (only hpmc's own files).
void clear_run_dir(const std::string& dir) {
  std::error_code ec;
  for (const char* f : kRunFiles) std::filesystem::remove(join_path(dir, f), ec);
  if (!std::filesystem::is_directory(dir, ec)) return;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("recon_epoch_", 0) == 0 && e.path().extension() == ".png")
      std::filesystem::remove(e.path(), ec);
  }
}

// A word as a POSIX shell reads it back: bare when that is safe, else quoted.
std::string shell_quote(const std::string& w) {
  const char* safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%";
  if (!w.empty() && w.find_first_not_of(safe) == std::string::npos) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command that continues this run: the one typed, every flag kept
// (--out, --weights-dir, --epochs, --set, --impl, ...), with --resume in
// place of --overwrite and --init, which would start the run again.
std::string resume_command(const RunOptions& o) {
  if (o.argv.empty()) return str("hpmc run ", shell_quote(o.config), " --resume");
  std::vector<std::string> words;
  size_t options_end = std::string::npos;  // where "--" ends the options, if it does
  bool resume = false;
  for (size_t i = 0; i < o.argv.size(); ++i) {
    const std::string& a = o.argv[i];
    if (options_end == std::string::npos) {
      if (a == "--") options_end = words.size();
      if (a == "--overwrite" || a.rfind("--overwrite=", 0) == 0 || a.rfind("--init=", 0) == 0)
        continue;
      if (a == "--init") {
        ++i;  // and its value
        continue;
      }
      resume = resume || a == "--resume";
    }
    words.push_back(a);
  }
  if (!resume)
    words.insert(options_end == std::string::npos ? words.end() : words.begin() + long(options_end),
                 "--resume");
  std::string cmd;
  for (const auto& w : words) cmd += (cmd.empty() ? "" : " ") + shell_quote(w);
  const int ranks = dist::world().size();
  return ranks > 1 ? str("mpirun -np ", ranks, " ", cmd) : cmd;
}

void write_resolved_config(const Session& s, const std::string& path) {
  YAML::Node doc = YAML::Clone(s.cfg.resolved);
  YAML::Node layers(YAML::NodeType::Sequence);
  for (const auto& l : s.model->resolved_layers()) layers.push_back(l);
  doc["model"]["layers"] = layers;
  YAML::Emitter em;
  em << doc;
  write_file_atomic(path, str("# Resolved by hpmc ", HPMC_VERSION, " from ", s.cfg.source.file,
                              " (every key, defaults filled in). Run again with:\n#   hpmc run ",
                              path, "\n", em.c_str(), "\n"));
}

}  // namespace

void cmd_run(const RunOptions& o, std::ostream& out) {
  if (o.resume && o.overwrite)
    throw UsageError("--resume continues the earlier run and --overwrite replaces it: pick one");
  if (o.resume && !o.init.empty())
    throw UsageError("--resume continues from the run's own checkpoint; --init starts a new run "
                     "from another one's weights: pick one");
  gpu::set_sync_debug(o.sync_debug);
  Session s = open_session(with_chosen_impl(o, out), out);
  const Config& cfg = s.cfg;
  const std::string dir = cfg.output.dir;
  const std::string ckpt = checkpoint_path(cfg);

  // Decide what happens to earlier outputs before anything is read or written.
  FileCheck at_ckpt = check_regular_file(ckpt);
  if (at_ckpt.problem == FileProblem::kNotRegular)
    throw UsageError(str(ckpt, " ", at_ckpt.why, ", but this run's checkpoint goes there; move it "
                         "away, or write the checkpoint elsewhere with --weights-dir"));
  if (o.resume) {
    if (!std::filesystem::exists(ckpt))
      throw UsageError(str("--resume: there is no checkpoint at ", ckpt,
                           " to continue from; start a new run without --resume"));
  } else if (!o.overwrite) {
    const bool ckpt_there = std::filesystem::exists(ckpt);
    if (holds_a_run(dir))
      throw UsageError(str(dir, " already holds a run",
                           ckpt_there ? str(" (and ", ckpt, " its checkpoint)") : "",
                           "; continue it with --resume, replace it with --overwrite, or keep it "
                           "and start another with ", another_run(cfg)));
    if (ckpt_there)
      throw UsageError(str(ckpt, " holds the checkpoint of an earlier run; continue it with "
                                 "--resume, replace it with --overwrite, or keep it and start "
                                 "another with ", another_run(cfg)));
  }

  s.progress = o.progress;
  load_session_data(s, out);
  Model& model = *s.model;
  const int n_train = s.data.train.size();
  dist::Communicator& world = dist::world();
  const bool writer = world.rank() == 0;  // rank 0 alone writes files
  const int ranks = world.size();
  Trainer trainer(model, cfg.training, world);  // a fresh optimizer; a resume restores its state
  TrainState state;
  if (o.resume) {
    load_checkpoint(ckpt, model, trainer.optimizer(), cfg, state, n_train, ranks);
    check_finite_weights(model, ckpt);
    // Nothing to train: say so and leave the run directory as it is.
    const int epochs = cfg.training.epochs;
    if (state.epoch > epochs || (state.epoch == epochs && state.step > 0)) {
      out << "run is complete: the checkpoint " << ckpt << " has trained " << state.epoch
          << " epochs" << (state.step > 0 ? str(" and ", state.step, " steps") : "")
          << ", more than the " << epochs << " asked for; raise --epochs to train further\n";
      return;
    }
    if (state.epoch == epochs) {
      out << "run is complete: " << epochs << " of " << epochs << " epoch"
          << (epochs == 1 ? "" : "s") << " in " << ckpt << "; raise --epochs to train further\n";
      return;
    }
    out << "resuming from " << ckpt << " at epoch " << state.epoch + 1 << ", step " << state.step
        << " (global step " << state.global_step << ")\n";
  } else if (!o.init.empty()) {
    load_checkpoint(o.init, model);
    check_finite_weights(model, o.init);
    out << "weights from " << o.init << " (optimizer state fresh)\n";
  } else {
    model.params().init(cfg.training.seed);
  }

  // Every rank has read what it needs and passed its checks before rank 0
  // writes anything (a rank that reads the run directory after rank 0 wrote
  // config.yaml would take it for an earlier run).
  world.barrier("the start of training (every rank has loaded its data)");
  MetricsLog metrics(join_path(dir, "metrics.csv"));
  if (writer) {
    make_dirs(dir);
    make_dirs(cfg.output.weights_dir);
    // A kill during a checkpoint write leaves its temporary file behind.
    std::vector<std::string> stale = leftover_temp_files(ckpt);
    std::error_code ec;
    for (const auto& f : stale) std::filesystem::remove(f, ec);
    if (!stale.empty())
      out << "removed " << stale.size() << " temporary checkpoint file"
          << (stale.size() == 1 ? "" : "s") << " left by an interrupted write: " << stale.front()
          << (stale.size() > 1 ? ", ..." : "") << "\n";
    if (o.overwrite) clear_run_dir(dir);
    write_resolved_config(s, join_path(dir, "config.yaml"));
    if (o.resume) metrics.load(state.global_step);
    metrics.write();
  }

  const TrainingConfig& tc = cfg.training;
  out << "training: " << tc.epochs << " epoch" << (tc.epochs == 1 ? "" : "s") << ", batch "
      << tc.batch_size;
  if (ranks > 1 || tc.grad_accumulation > 1)
    out << (ranks > 1 ? str(" x ", ranks, " ranks") : "")
        << (tc.grad_accumulation > 1 ? str(" x ", tc.grad_accumulation, " micro-batches") : "")
        << " = " << int64_t(ranks) * tc.batch_size * tc.grad_accumulation << " samples a step";
  out << ", " << trainer.optimizer().describe();
  if (tc.schedule.type != "constant" || tc.schedule.warmup_steps > 0)
    out << ", schedule " << Schedule(tc.schedule, tc.optimizer.lr,
                                     int64_t(tc.epochs) * trainer.steps_per_epoch(n_train))
                                .identity();
  if (tc.clip_grad_norm > 0) out << ", clip_grad_norm " << tc.clip_grad_norm;
  out << ", seed " << tc.seed << "\n" << std::flush;
  if (tc.input_noise.active() || tc.augment.active())
    out << "training batches only: input noise " << tc.input_noise.describe() << ", augment "
        << tc.augment.describe() << "\n";

  if (o.progress == "bar") trainer.set_progress(Trainer::Progress::kBar);
  else if (o.progress == "lines") trainer.set_progress(Trainer::Progress::kLines);
  else if (o.progress == "quiet") trainer.set_progress(Trainer::Progress::kQuiet);

  StopSignals signals;
  const bool autoencoder = model.loss().target_dtype() == DType::kF32;
  std::unique_ptr<Profiler> profiler;
  if (o.profile) {
    profiler = std::make_unique<Profiler>(model.device());
    trainer.set_profiler(profiler.get());
  }
  trainer.on_step([&](TrainState& st) {
    const bool log_row = cfg.output.log_every > 0 && st.global_step % cfg.output.log_every == 0;
    const bool ckpt_now = cfg.output.checkpoint_every > 0 &&
                          st.global_step % cfg.output.checkpoint_every == 0;
    if (log_row || ckpt_now) trainer.sync_loss(st);
    if (log_row && writer) {
      MetricsRow r;
      r.epoch = st.epoch + 1;
      r.step = st.global_step;
      const int64_t seen =
          std::min<int64_t>(n_train, int64_t(st.step) * trainer.step_samples(n_train));
      r.train_loss = st.loss_sum / double(std::max<int64_t>(1, seen));
      r.seconds = st.epoch_seconds;
      metrics.add(r);
    }
    if (ckpt_now && writer)
      save_checkpoint(ckpt, model, trainer.optimizer(), cfg, st, n_train, ranks);
    return signals.caught() != 0;
  });
  trainer.on_epoch([&](const EpochResult& r, const TrainState& st) {
    if (!writer) return;
    save_checkpoint(ckpt, model, trainer.optimizer(), cfg, st, n_train, ranks);
    MetricsRow row;
    row.epoch = r.epoch;
    row.step = st.global_step;
    row.train_loss = r.train_loss;
    row.test_loss = r.test.samples > 0 ? r.test.loss : NAN;
    row.accuracy = r.test.accuracy >= 0 ? r.test.accuracy : NAN;
    row.images_per_s = r.images_per_s;
    row.seconds = r.seconds;
    row.epoch_end = true;
    metrics.add(row);
    metrics.plot(join_path(dir, "loss.png"), cfg.name + " loss");
    if (autoencoder && cfg.output.recon_every_epoch && s.data.test.size() > 0)
      write_recon_grid(model, s.data.test, cfg.output.recon_count,
                       join_path(dir, str("recon_epoch_", r.epoch, ".png")));
  });

  trainer.fit(s.data.train, s.data.test, out, state);
  if (profiler) profiler->print(out);

  if (state.epoch < cfg.training.epochs) {  // stopped by a signal
    if (writer) save_checkpoint(ckpt, model, trainer.optimizer(), cfg, state, n_train, ranks);
    throw Error(ExitCode::kInterrupted,
                str("interrupted by ",
                    signals.caught() ? str("signal ", int(signals.caught()))
                                     : std::string("a signal to another rank"),
                    " at epoch ", state.epoch + 1,
                    ", step ", state.step, "; checkpoint written to ", ckpt,
                    "; continue with: ", resume_command(o)));
  }
  if (!writer) return;
  if (autoencoder && s.data.test.size() > 0)
    write_recon_grid(model, s.data.test, cfg.output.recon_count, join_path(dir, "recon.png"));
  if (metrics.rows().empty() || !metrics.rows().back().epoch_end)
    metrics.plot(join_path(dir, "loss.png"), cfg.name + " loss");
  out << "outputs: " << join_path(dir, "config.yaml") << ", metrics.csv, loss.png"
      << (autoencoder && s.data.test.size() > 0 ? ", recon.png" : "") << "; checkpoint: " << ckpt
      << "\n";
}

}  // namespace hpmc
