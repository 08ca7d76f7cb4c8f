// outputs.h — the files a run directory holds besides the config:
// metrics.csv (rewritten whole, atomically, at every row), loss.png (drawn by
// hpmc itself) and reconstruction grids.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/model.h"

namespace hpmc {

struct MetricsRow {
  int epoch = 0;            // 1-based
  int64_t step = 0;         // global step after which the row was taken
  double train_loss = 0;    // mean over the epoch (so far, for a step row)
  double test_loss = NAN;   // NaN: not measured (a step row)
  double accuracy = NAN;    // test accuracy; NaN when not a classifier or not measured
  double images_per_s = NAN;
  double seconds = NAN;     // the epoch's time so far
  bool epoch_end = false;   // a row per epoch; the others come from --log-every
};

class MetricsLog {
 public:
  static constexpr const char* kHeader =
      "epoch,step,train_loss,test_loss,test_accuracy,images_per_s,seconds";
  explicit MetricsLog(std::string path) : path_(std::move(path)) {}
  // Read an existing file, keeping the rows up to `max_step` (resume).
  void load(int64_t max_step);
  void add(const MetricsRow& r);  // appends and rewrites the file
  const std::vector<MetricsRow>& rows() const { return rows_; }
  void write() const;
  // loss.png beside it: train and test loss per epoch.
  void plot(const std::string& png_path, const std::string& title) const;

 private:
  std::string path_;
  std::vector<MetricsRow> rows_;
};

// The PNG grid of the first `count` images of `test` (the test split, or
// image files) above their reconstructions, any size, 1 or 3 channels.
// Returns the number of images drawn. Only for autoencoders (mse).
// The most images a grid holds (--count, output.recon_count).
constexpr int kMaxReconCount = 1024;
int write_recon_grid(Model& model, const Dataset& test, int count, const std::string& path);

}  // namespace hpmc
