// inspect.cpp — commands that use a trained checkpoint: `hpmc eval` and
// `hpmc recon` (`hpmc features` is in features.cpp).
#include <cmath>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/outputs.h"
#include "cli/session.h"
#include "core/error.h"
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

void cmd_recon(const ReconOptions& o, std::ostream& out) {
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
