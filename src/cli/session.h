// session.h — what every command does before its own work: read the config,
// set the threads, build the model (checking every shape before any data is
// read), print the layer table, and load the data.
#pragma once

#include <iosfwd>
#include <memory>

#include "cli/commands.h"
#include "data/dataset.h"
#include "model/model.h"

namespace hpmc {

struct Session {
  Config cfg;
  Impl impl = Impl::kCpu;
  DataFormat format = DataFormat::kMnist;
  std::unique_ptr<Model> model;
  DataSplits data;
};

// Config, threads, model and its table (printed to `out`), then the memory
// the command needs (model/memory.h), printed under the table and checked
// against what the machine has before anything large is allocated. The
// command runs batches of training.batch_size, or of `batch` when that is
// larger (`batch_origin` names its flag in errors, e.g. "--count"). `which`
// says which splits the command will load (load_session_data), for the plan.
Session open_session(const CommonOptions& o, std::ostream& out, int batch = 0,
                     const std::string& batch_origin = "", Splits which = Splits::kBoth);
// Load the dataset the config names, with its limits applied: both splits,
// or only the one a command uses (the other is left empty).
void load_session_data(Session& s, std::ostream& out, Splits which = Splits::kBoth);

// Refuses weights loaded from `path` that hold a NaN or an infinity (a run
// that diverged), naming the first such tensor: DivergedError.
void check_finite_weights(const Model& model, const std::string& path);

// "runs/x/recon.png" style joins.
std::string join_path(const std::string& dir, const std::string& file);
// mkdir -p, with a clear error.
void make_dirs(const std::string& dir);
// The checkpoint a run of this config writes: <weights_dir>/<name>.safetensors.
std::string checkpoint_path(const Config& cfg);

}  // namespace hpmc
