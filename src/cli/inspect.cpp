// inspect.cpp — commands that use a trained checkpoint: `hpmc eval` and
// `hpmc recon` (`hpmc features` is in features.cpp).
#include <cmath>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/outputs.h"
#include "cli/session.h"
#include "core/error.h"
#include "data/image_folder.h"
#include "model/checkpoint.h"
#include "model/trainer.h"

namespace hpmc {

namespace {

// The weights and then the data into an open session. Weights that are not
// finite would give a NaN loss, image or feature: they are refused here.
// Only the split the command uses is read (eval and recon: the test set).
void load_weights_and_data(Session& s, const std::string& weights, Splits which,
                           std::ostream& out) {
  load_checkpoint(weights, *s.model);
  check_finite_weights(*s.model, weights);
  out << "weights: " << weights << "\n";
  load_session_data(s, out, which);
}

// eval and recon: the weights and the test set.
Session open_with_weights(const CommonOptions& o, const std::string& weights, std::ostream& out,
                          int batch = 0, const std::string& batch_origin = "") {
  if (weights.empty())
    throw UsageError("--weights FILE is required (a checkpoint written by hpmc run)");
  Session s = open_session(with_chosen_impl(o, out), out, batch, batch_origin, Splits::kTest);
  load_weights_and_data(s, weights, Splits::kTest, out);
  return s;
}

}  // namespace

void cmd_eval(const EvalOptions& o, std::ostream& out) {
  Session s = open_with_weights(o, o.weights, out);
  EvalResult r = evaluate(*s.model, s.data.test, s.cfg.training.batch_size);
  out << "test loss " << std::setprecision(6) << r.loss;
  if (r.mse >= 0) out << "  mse " << r.mse;
  if (r.accuracy >= 0) out << "  accuracy " << std::fixed << std::setprecision(2) << 100 * r.accuracy << "%";
  out << "  (" << r.samples << " samples)\n";
}

namespace {

// recon --images: the grid of the given image files, converted to the
// model's input as the config says (session.h image_target); no split is read.
void recon_images(const ReconOptions& o, std::ostream& out) {
  if (o.weights.empty())
    throw UsageError("--weights FILE is required (a checkpoint written by hpmc run)");
  if (o.count_given)
    throw UsageError("--count picks test images; with --images the grid shows every image "
                     "given: leave out --count, or name fewer images");
  const std::vector<std::string> files = list_image_files(o.images);
  if (files.size() > size_t(kMaxReconCount))
    throw UsageError(str("--images names ", files.size(), " images; a grid holds at most ",
                         kMaxReconCount, ": name fewer"));
  const int n = int(files.size());
  Session s = open_session(with_chosen_impl(o, out), out, n, "--images", Splits::kNone);
  if (s.model->loss().target_dtype() != DType::kF32)
    throw UsageError("reconstructions need an autoencoder (model.loss: mse); this model is a "
                     "classifier");
  load_checkpoint(o.weights, *s.model);
  check_finite_weights(*s.model, o.weights);
  out << "weights: " << o.weights << "\n";
  const Dataset images = load_session_images(s, files, out);
  std::string dir = o.out_dir.empty() ? s.cfg.output.dir : o.out_dir;
  make_dirs(dir);
  std::string path = join_path(dir, "recon.png");
  write_recon_grid(*s.model, images, n, path);
  out << "wrote " << path << ": " << n << " image" << (n == 1 ? "" : "s")
      << " (top) above their reconstructions\n";
}

}  // namespace

void cmd_recon(const ReconOptions& o, std::ostream& out) {
  if (!o.images.empty()) return recon_images(o, out);
  if (o.count < 1 || o.count > kMaxReconCount)
    throw UsageError(str("--count must be between 1 and ", kMaxReconCount, " (the grid's images), got ",
                         o.count));
  Session s = open_with_weights(o, o.weights, out, o.count, "--count");
  std::string dir = o.out_dir.empty() ? s.cfg.output.dir : o.out_dir;
  make_dirs(dir);
  std::string path = join_path(dir, "recon.png");
  int n = write_recon_grid(*s.model, s.data.test, o.count, path);
  out << "wrote " << path << ": " << n << " test images (top) above their reconstructions\n";
}

}  // namespace hpmc
