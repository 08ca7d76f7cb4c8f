// inspect.cpp — commands that use a trained checkpoint: `hpmc eval`,
// `hpmc recon` and `hpmc features`.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/outputs.h"
#include "cli/session.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "data/image_folder.h"
#include "io/npy.h"
#include "model/batches.h"
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
  Session s = open_session(o, out, batch, batch_origin, Splits::kTest);
  load_weights_and_data(s, weights, Splits::kTest, out);
  return s;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

// CSV rows of m samples: the label, then the features in %.9g (so float32
// values survive exactly).
void append_csv_rows(std::string& s, const float* v, const int32_t* labels, int m, size_t dim) {
  char buf[32];
  for (int i = 0; i < m; ++i) {
    s += std::to_string(labels[i]);
    for (size_t j = 0; j < dim; ++j) {
      std::snprintf(buf, sizeof buf, ",%.9g", v[size_t(i) * dim + j]);
      s += buf;
    }
    s += '\n';
  }
}

// One split's features: a CSV (label, then the values) and/or .npy files.
void export_split(Model& model, const Dataset& d, const std::string& split, const FeaturesOptions& o,
                  const std::string& dir, int batch, std::ostream& out) {
  const int n = d.size();
  const int layer = model.features_layer();
  Shape fs = model.input_shape();
  for (int i = 0; i <= layer; ++i) fs = model.layers()[size_t(i)]->output_shape(fs);
  const size_t dim = fs.per_sample();
  const bool csv = o.format != "npy", npy = o.format != "csv";

  batch = std::max(1, std::min(batch, n));
  model.allocate(std::max(batch, model.max_batch()));
  BatchFeeder feed(d, model.device(), batch, model.input_shape());
  // The features of samples [b, b + m) and their labels, on the host (named
  // copies from the GPU). A non-finite feature stops the export.
  Tensor fh, lab;
  auto features_of = [&](int b, int m) {
    feed.load(b, m);
    const Tensor& f = model.forward(feed.x(), layer);
    fh = f.device() == Device::kCPU ? f : f.to_device(Device::kCPU);
    lab = feed.labels().device() == Device::kCPU ? feed.labels()
                                                  : feed.labels().to_device(Device::kCPU);
    const float* v = fh.data<float>();
    for (size_t k = 0; k < size_t(m) * dim; ++k)
      if (!std::isfinite(v[k]))
        throw DivergedError(str("feature ", k % dim, " of ", split, " sample ", b + int(k / dim),
                                " is ", v[k], ": the weights are broken (did training diverge?); "
                                "nothing was written"));
  };

  std::string header = "label";
  for (size_t j = 0; j < dim; ++j) header += ",f" + std::to_string(j);
  header += "\n";
  // Size check before writing anything. A CSV value takes 2 bytes ("0,") to
  // 16 ("-1.23456791e-05,"), so the rows' size is measured on the first
  // batch and scaled to the split.
  double csv_bytes = 0;
  if (csv && n > 0) {
    const int m = std::min(batch, n);
    features_of(0, m);
    std::string rows;
    append_csv_rows(rows, fh.data<float>(), lab.data<int32_t>(), m, dim);
    csv_bytes = double(header.size()) + double(rows.size()) / m * n;
    out << "features_" << split << ".csv will take about " << human_bytes(csv_bytes) << " (" << n
        << " rows of " << dim << " values, measured on the first " << m << ")\n";
  }
  double npy_bytes = npy ? double(n) * double(dim) * 4 + double(n) * 4 + 256 : 0;
  std::error_code ec;
  auto space = std::filesystem::space(dir, ec);
  if (!ec && csv_bytes + npy_bytes > double(space.available))
    throw RuntimeError(str("not enough disk space in ", dir, " for the ", split, " features: about ",
                           human_bytes(csv_bytes + npy_bytes), " needed, ",
                           human_bytes(double(space.available)), " available; use --format npy, "
                           "another --out, or free space"));

  const std::string csv_path = join_path(dir, "features_" + split + ".csv");
  const std::string npy_path = join_path(dir, "features_" + split + ".npy");
  const std::string labels_path = join_path(dir, "labels_" + split + ".npy");
  std::unique_ptr<AtomicFile> csv_file;
  std::unique_ptr<NpyWriter> npy_file;
  std::vector<int32_t> labels(static_cast<size_t>(n));
  if (csv) {
    csv_file = std::make_unique<AtomicFile>(csv_path);
    csv_file->write(header);
  }
  if (npy)
    npy_file = std::make_unique<NpyWriter>(npy_path, NpyDtype::kFloat32,
                                           std::vector<int64_t>{n, int64_t(dim)});

  std::string rows;
  for (int b = 0; b < n; b += batch) {
    int m = std::min(batch, n - b);
    features_of(b, m);
    const float* v = fh.data<float>();
    const int32_t* l = lab.data<int32_t>();
    for (int i = 0; i < m; ++i) labels[size_t(b + i)] = l[i];
    if (npy_file) npy_file->append(v, size_t(m) * dim);
    if (csv_file) {
      rows.clear();
      append_csv_rows(rows, v, l, m, dim);
      csv_file->write(rows);
    }
  }
  if (npy_file) {
    npy_file->commit();
    write_npy(labels_path, labels.data(), {n});
  }
  if (csv_file) csv_file->commit();
  out << split << ": " << n << " samples x " << dim << " features ("
      << model.features_name() << ", " << fs.sample_str() << ") -> ";
  if (csv) out << csv_path << (npy ? ", " : "");
  if (npy) out << npy_path << ", " << labels_path;
  out << "\n";
}

// Features of an earlier export are not replaced without --overwrite: names
// every file of this export that is already there.
void refuse_to_replace_features(const FeaturesOptions& o, const std::string& dir) {
  std::vector<std::string> there;
  for (const char* split : {"train", "test"}) {
    if (o.split != "all" && o.split != split) continue;
    std::vector<std::string> files;
    if (o.format != "npy") files.push_back(str("features_", split, ".csv"));
    if (o.format != "csv") files.push_back(str("features_", split, ".npy"));
    if (o.format != "csv") files.push_back(str("labels_", split, ".npy"));
    for (const auto& f : files) {
      std::error_code ec;
      if (std::filesystem::symlink_status(join_path(dir, f), ec).type() !=
          std::filesystem::file_type::not_found)
        there.push_back(join_path(dir, f));
    }
  }
  if (there.empty()) return;
  std::string list;
  for (const auto& f : there) list += (list.empty() ? "" : ", ") + f;
  throw UsageError(str(list, there.size() == 1 ? " already exists" : " already exist", "; replace ",
                       there.size() == 1 ? "it" : "them",
                       " with --overwrite, or write elsewhere with --out"));
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
  Session s = open_session(o, out, n, "--images", Splits::kNone);
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

void cmd_features(const FeaturesOptions& o, std::ostream& out) {
  if (o.weights.empty())
    throw UsageError("--weights FILE is required (a checkpoint written by hpmc run)");
  const Splits which = o.split == "train"  ? Splits::kTrain
                       : o.split == "test" ? Splits::kTest
                                           : Splits::kBoth;
  Session s = open_session(o, out, 0, "", which);
  if (s.model->features_layer() < 0)
    throw ConfigError(str(o.config, ": model.features is not set, so hpmc does not know where the "
                          "encoder ends; name a layer there (e.g. features: pool2)"));
  std::string dir = o.out_dir.empty() ? s.cfg.output.dir : o.out_dir;
  // Before any weights or data are read.
  if (!o.overwrite) refuse_to_replace_features(o, dir);
  load_weights_and_data(s, o.weights, which, out);
  make_dirs(dir);
  int batch = s.cfg.training.batch_size;
  if (o.split == "train" || o.split == "all")
    export_split(*s.model, s.data.train, "train", o, dir, batch, out);
  if (o.split == "test" || o.split == "all")
    export_split(*s.model, s.data.test, "test", o, dir, batch, out);
}

}  // namespace hpmc
