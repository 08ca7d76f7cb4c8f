// session.h — what every command does before its own work: read the config,
// set the threads, probe the data (its sample shape, classes and split sizes
// from headers and listings, data/dataset.h), build the model for that shape
// (checking every shape before any data is read), print the layer table, and
// load the data.
#pragma once

#include <iosfwd>
#include <memory>

#include "cli/commands.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "model/model.h"

namespace hpmc {

struct Session {
  Config cfg;
  Impl impl = Impl::kCpu;
  DataFormat format = DataFormat::kMnist;
  DataProbe probe;  // what the model was built for
  std::unique_ptr<Model> model;
  DataSplits data;
  // How a large image load shows its progress: auto (a bar on a terminal,
  // else lines), bar, lines or quiet (hpmc run's --progress).
  std::string progress = "auto";
};

// Config, threads, model and its table (printed to `out`), then the memory
// the command needs (model/memory.h), printed under the table and checked
// against what the machine has before anything large is allocated. The
// command runs batches of training.batch_size, or of `batch` when that is
// larger (`batch_origin` names its flag in errors, e.g. "--count"). `which`
// says which splits the command will load (load_session_data), for the plan;
// Splits::kNone: none, the command brings `batch` image files of its own.
Session open_session(const CommonOptions& o, std::ostream& out, int batch = 0,
                     const std::string& batch_origin = "", Splits which = Splits::kBoth);
// Load the dataset the config names, with its limits applied: both splits,
// or only the one a command uses (the other is left empty). A large image
// folder shows its progress on `out`.
void load_session_data(Session& s, std::ostream& out, Splits which = Splits::kBoth);

// How image files given on the command line become the model's input: its
// input shape, converted (channels, size) where the config's data.channels
// and data.size ask for it (format images), else required as they are.
ImageTarget image_target(const Session& s);
// The image files `files` (data/image_folder.h list_image_files) as the
// model's input (image_target), decoded with progress on `out`: an
// unlabelled dataset whose `files` name each sample.
Dataset load_session_images(const Session& s, const std::vector<std::string>& files,
                            std::ostream& out);

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
