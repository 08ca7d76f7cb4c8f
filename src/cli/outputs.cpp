#include "cli/outputs.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "io/grid.h"
#include "io/image.h"
#include "io/plot.h"
#include "model/batches.h"

namespace hpmc {

namespace {

std::string num(double v, const char* fmt = "%.17g") {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

double parse_field(const std::string& s) { return s.empty() ? NAN : std::strtod(s.c_str(), nullptr); }

}  // namespace

void MetricsLog::load(int64_t max_step) {
  rows_.clear();
  RegularFile f(path_);
  if (f.missing()) return;
  if (!f.ok())
    throw DataError(
        str(path_, ": ", f.why(), "; move it away, or replace the run with --overwrite"));
  std::string text;
  if (!f.read_up_to(text, std::string::npos))
    throw RuntimeError(str("cannot read ", path_, ": ", std::strerror(errno)));
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  if (line != kHeader)
    throw DataError(str(path_, ": not an hpmc metrics file (its first line is not '", kHeader,
                        "'); move it away or use --overwrite"));
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    while (f.size() < 7) f.push_back("");
    MetricsRow r;
    r.epoch = std::atoi(f[0].c_str());
    r.step = std::atoll(f[1].c_str());
    r.train_loss = parse_field(f[2]);
    r.test_loss = parse_field(f[3]);
    r.accuracy = parse_field(f[4]);
    r.images_per_s = parse_field(f[5]);
    r.seconds = parse_field(f[6]);
    r.epoch_end = !f[3].empty();
    if (r.step <= max_step) rows_.push_back(r);
  }
}

void MetricsLog::add(const MetricsRow& r) {
  rows_.push_back(r);
  write();
}

void MetricsLog::write() const {
  std::string s = std::string(kHeader) + "\n";
  for (const auto& r : rows_)
    s += str(r.epoch, ",", r.step, ",", num(r.train_loss), ",", num(r.test_loss), ",",
             num(r.accuracy), ",", num(r.images_per_s, "%.1f"), ",", num(r.seconds, "%.3f"), "\n");
  write_file_atomic(path_, s);
}

void MetricsLog::plot(const std::string& png_path, const std::string& title) const {
  PlotSeries train{"train loss", {}, {}, 31, 119, 180};
  PlotSeries test{"test loss", {}, {}, 214, 39, 40};
  for (const auto& r : rows_) {
    if (!r.epoch_end) continue;
    train.x.push_back(r.epoch);
    train.y.push_back(r.train_loss);
    test.x.push_back(r.epoch);
    test.y.push_back(r.test_loss);
  }
  write_png(png_path, plot_lines({train, test}, title, "epoch", "loss", 800, 500, false,
                                 /*integer_x=*/true));
}

int write_recon_grid(Model& model, const Dataset& test, int count, const std::string& path) {
  if (model.loss().target_dtype() != DType::kF32)
    throw UsageError("reconstructions need an autoencoder (model.loss: mse); this model is a "
                     "classifier");
  count = std::min(count, test.size());
  if (count <= 0) throw DataError("the test set is empty: no images to reconstruct");
  model.allocate(std::max(count, model.max_batch()));
  BatchFeeder feed(test, model.device(), count, model.input_shape());
  feed.load(0, count);
  const Tensor& y = model.forward(feed.x());
  // The named device -> host copies for the PNG (plain copies on the CPU).
  Tensor x = feed.x().to_device(Device::kCPU);
  Tensor yh = y.to_device(Device::kCPU);
  const Shape& s = model.input_shape();
  // Upscaled so a small image is visible: 4x up to 32 pixels a side, less
  // for larger images, none from 128 pixels on.
  int scale = std::clamp(128 / std::max(s.h, s.w), 1, 4);
  int cols = std::min(count, 8);
  Image img = image_grid(x.data<float>(), yh.data<float>(), count, s.c, s.h, s.w, scale, cols);
  write_png(path, img);
  return count;
}

}  // namespace hpmc
