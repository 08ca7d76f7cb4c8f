// features.cpp — `hpmc features`: the encoder's output (the layer that
// model.features names) for every sample of a split, as CSV, LIBSVM text
// and/or .npy files; with --images, for image files instead of a split (rows
// keyed by file name, names_images.txt beside them).
//
// Per split, a batch at a time: a forward pass up to the features layer, a
// named copy of the features to the host (from the GPU), a check that they
// are finite, then each writer. The .npy writer appends the rows as they are;
// the text writers format them in parallel a chunk at a time
// (io/feature_text.h). Nothing holds the whole split but its labels (and
// names), so memory does not grow with the split.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <ostream>

#include "cli/commands.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/threads.h"
#include "data/image_folder.h"
#include "io/feature_text.h"
#include "io/npy.h"
#include "model/batches.h"
#include "model/checkpoint.h"

namespace hpmc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

// Which files an export writes (--format).
struct Formats {
  bool csv = false, npy = false, libsvm = false;
};

Formats parse_formats(const std::string& f) {
  Formats r;
  if (f == "csv") r.csv = true;
  else if (f == "npy") r.npy = true;
  else if (f == "libsvm") r.libsvm = true;
  else if (f == "both") r.csv = r.npy = true;
  else if (f == "all") r.csv = r.npy = r.libsvm = true;
  else
    throw UsageError(str("--format ", f, ": choose csv, npy, libsvm, both (csv and npy) or all "
                         "(csv, npy and libsvm)"));
  return r;
}

// The files of one split's export, in the order the last line names them.
// `named`: rows keyed by file name, whose list goes beside them.
std::vector<std::string> export_files(const Formats& f, const std::string& split, bool named) {
  std::vector<std::string> files;
  if (f.csv) files.push_back(str("features_", split, ".csv"));
  if (f.npy) files.push_back(str("features_", split, ".npy"));
  if (f.npy && !named) files.push_back(str("labels_", split, ".npy"));
  if (f.libsvm) files.push_back(str("features_", split, ".libsvm"));
  if (named) files.push_back(str("names_", split, ".txt"));
  return files;
}

// Rows a text chunk holds: about a million values, so that a chunk's text
// (some 8 MB) is large next to the cost of starting the threads and writing,
// and small next to memory; at least 4 rows per thread.
int default_chunk_rows(size_t dim) {
  const size_t rows = std::max<size_t>(1, (size_t(1) << 20) / std::max<size_t>(1, dim));
  return int(std::min<size_t>(std::max<size_t>(rows, 4 * size_t(num_threads())), 1 << 20));
}

// The rows of a text chunk: FeaturesOptions::chunk_rows, else
// HPMC_FEATURES_CHUNK_ROWS (a test hook: the files do not depend on it), else
// the default.
int chunk_rows_from(const FeaturesOptions& o, size_t dim) {
  if (o.chunk_rows > 0) return o.chunk_rows;
  const char* env = std::getenv("HPMC_FEATURES_CHUNK_ROWS");
  if (!env || !*env) return default_chunk_rows(dim);
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 1 || v > (1 << 20))
    throw UsageError(str("HPMC_FEATURES_CHUNK_ROWS=", env, ": must be a whole number of rows from 1 "
                         "to 1048576; unset it for the default"));
  return int(v);
}

// The first index in v[0, n) that is not finite, or n.
size_t first_non_finite(const float* v, size_t n) {
  size_t first = n;
#pragma omp parallel for reduction(min : first) schedule(static)
  for (size_t k = 0; k < n; ++k)
    if (!std::isfinite(v[k]) && k < first) first = k;
  return first;
}

// One split's features into `dir`. `names`, when set, keys the CSV rows by
// file name (one per sample) and is written to names_<split>.txt, which
// takes the place of labels_<split>.npy (image files have no labels); the
// LIBSVM rows keep the dataset's labels (-1: none).
void export_split(Model& model, const Dataset& d, const std::string& split, const Formats& fmt,
                  const FeaturesOptions& o, const std::string& dir, int batch,
                  const std::vector<std::string>* names, std::ostream& out) {
  const auto t_start = Clock::now();
  const int n = d.size();
  const int layer = model.features_layer();
  Shape fs = model.input_shape();
  for (int i = 0; i <= layer; ++i) fs = model.layers()[size_t(i)]->output_shape(fs);
  const size_t dim = fs.per_sample();
  const bool named = names != nullptr;
  HPMC_CHECK(!named || names->size() == size_t(n), names->size(), " names for ", n, " samples");

  batch = std::max(1, std::min(batch, n));
  model.allocate(std::max(batch, model.max_batch()));
  BatchFeeder feed(d, model.device(), batch, model.input_shape());
  // The features of samples [b, b + m) and their labels, on the host (named
  // copies from the GPU). A non-finite feature stops the export.
  Tensor fh, lab;
  double encoder_s = 0;
  auto features_of = [&](int b, int m) {
    const auto t0 = Clock::now();
    feed.load(b, m);
    const Tensor& f = model.forward(feed.x(), layer);
    fh = f.device() == Device::kCPU ? f : f.to_device(Device::kCPU);
    lab = feed.labels().device() == Device::kCPU ? feed.labels()
                                                  : feed.labels().to_device(Device::kCPU);
    const float* v = fh.data<float>();
    const size_t k = first_non_finite(v, size_t(m) * dim);
    if (k < size_t(m) * dim)
      throw DivergedError(str("feature ", k % dim, " of ", split, " sample ", b + int(k / dim),
                              " is ", v[k], ": the weights are broken (did training diverge?); "
                              "nothing was written"));
    encoder_s += seconds_since(t0);
  };
  auto keys = [&](int b) {
    return RowKeys{lab.data<int32_t>(), named ? names->data() + b : nullptr};
  };

  // Size check before writing anything. A text value takes 2 bytes ("0,") to
  // 16 ("-1.2345678e-05,"), so the text's size is measured on the first
  // batch and scaled to the split.
  double text_bytes[2] = {0, 0};
  const FeatureText texts[2] = {FeatureText::kCsv, FeatureText::kLibsvm};
  const bool text_on[2] = {fmt.csv, fmt.libsvm};
  if ((fmt.csv || fmt.libsvm) && n > 0) {
    const int m = std::min(batch, n);
    features_of(0, m);
    for (int t = 0; t < 2; ++t) {
      if (!text_on[t]) continue;
      std::string rows;
      append_feature_rows(rows, texts[t], fh.data<float>(), dim, m, keys(0));
      text_bytes[t] = double(feature_header(texts[t], dim, named).size()) +
                      double(rows.size()) / m * n;
      out << "features_" << split << "." << feature_text_extension(texts[t])
          << " will take about " << human_bytes(text_bytes[t]) << " (" << n << " rows of " << dim
          << " values, measured on the first " << m << ")\n";
    }
  }
  const double npy_bytes = fmt.npy ? double(n) * double(dim) * 4 + double(n) * 4 + 256 : 0;
  const double need = text_bytes[0] + text_bytes[1] + npy_bytes;
  std::error_code ec;
  auto space = std::filesystem::space(dir, ec);
  if (!ec && need > double(space.available))
    throw RuntimeError(str("not enough disk space in ", dir, " for the ", split, " features: about ",
                           human_bytes(need), " needed, ", human_bytes(double(space.available)),
                           " available; use --format npy, another --out, or free space"));

  const std::vector<std::string> files = export_files(fmt, split, named);
  auto path_of = [&](const std::string& prefix, const std::string& ext) {
    return join_path(dir, prefix + split + "." + ext);
  };
  const int chunk = chunk_rows_from(o, dim);
  std::unique_ptr<FeatureTextWriter> text[2];
  for (int t = 0; t < 2; ++t)
    if (text_on[t])
      text[t] = std::make_unique<FeatureTextWriter>(
          path_of("features_", feature_text_extension(texts[t])), texts[t], dim, named, chunk);
  std::unique_ptr<NpyWriter> npy_file;
  if (fmt.npy)
    npy_file = std::make_unique<NpyWriter>(path_of("features_", "npy"), NpyDtype::kFloat32,
                                           std::vector<int64_t>{n, int64_t(dim)});
  std::vector<int32_t> labels(static_cast<size_t>(n));

  double text_s[2] = {0, 0}, npy_s = 0;
  ProgressMeter progress(out, "features " + split, n, parse_progress_mode(o.progress));
  for (int b = 0; b < n; b += batch) {
    const int m = std::min(batch, n - b);
    features_of(b, m);
    const float* v = fh.data<float>();
    const int32_t* l = lab.data<int32_t>();
    for (int i = 0; i < m; ++i) labels[size_t(b + i)] = l[i];
    if (npy_file) {
      const auto t0 = Clock::now();
      npy_file->append(v, size_t(m) * dim);
      npy_s += seconds_since(t0);
    }
    for (int t = 0; t < 2; ++t) {
      if (!text[t]) continue;
      const auto t0 = Clock::now();
      text[t]->append(v, keys(b), m);
      text_s[t] += seconds_since(t0);
    }
    progress.update(b + m);
  }
  progress.finish();
  for (int t = 0; t < 2; ++t) {
    if (!text[t]) continue;
    const auto t0 = Clock::now();
    text[t]->commit();
    text_s[t] += seconds_since(t0);
  }
  if (npy_file) {
    const auto t0 = Clock::now();
    npy_file->commit();
    if (!named) write_npy(path_of("labels_", "npy"), labels.data(), {n});
    npy_s += seconds_since(t0);
  }
  if (named) write_name_list(path_of("names_", "txt"), *names);

  const double total_s = seconds_since(t_start);
  const double values = double(n) * double(dim);
  out << split << ": " << n << " x " << dim << " values in " << std::fixed << std::setprecision(2)
      << total_s << " s (encoder " << encoder_s << " s";
  if (fmt.csv) out << ", csv " << text_s[0] << " s";
  if (fmt.npy) out << ", npy " << npy_s << " s";
  if (fmt.libsvm) out << ", libsvm " << text_s[1] << " s";
  out << "): " << std::setprecision(1) << values / std::max(total_s, 1e-9) / 1e6
      << " M values/s\n" << std::defaultfloat << std::setprecision(6);
  out << split << ": " << n << " samples x " << dim << " features (" << model.features_name()
      << ", " << fs.sample_str() << ") -> ";
  for (size_t i = 0; i < files.size(); ++i) out << (i ? ", " : "") << join_path(dir, files[i]);
  out << "\n";
}

// Features of an earlier export are not replaced without --overwrite: names
// every file of this export that is already there.
void refuse_to_replace_features(const std::vector<std::string>& splits, const Formats& fmt,
                                const std::string& dir, bool named) {
  std::vector<std::string> there;
  for (const std::string& split : splits) {
    for (const auto& f : export_files(fmt, split, named)) {
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

// features --images: the features of the given image files, converted to the
// model's input as the config says (session.h image_target); no split is
// read. The files are features_images.* and names_images.txt.
void features_of_images(const FeaturesOptions& o, const Formats& fmt, std::ostream& out) {
  if (o.split_given)
    throw UsageError("--split picks a split of the config's data; with --images the export is of "
                     "the files given: leave out --split");
  const std::vector<std::string> files = list_image_files(o.images);
  Session s = open_session(with_chosen_impl(o, out), out, 0, "", Splits::kNone);
  if (s.model->features_layer() < 0)
    throw ConfigError(str(o.config, ": model.features is not set, so hpmc does not know where the "
                          "encoder ends; name a layer there (e.g. features: pool2)"));
  const std::string dir = o.out_dir.empty() ? s.cfg.output.dir : o.out_dir;
  if (!o.overwrite) refuse_to_replace_features({"images"}, fmt, dir, true);
  load_checkpoint(o.weights, *s.model);
  check_finite_weights(*s.model, o.weights);
  out << "weights: " << o.weights << "\n";
  const Dataset images = load_session_images(s, files, out);
  make_dirs(dir);
  export_split(*s.model, images, "images", fmt, o, dir, s.cfg.training.batch_size, &files, out);
}

}  // namespace

void cmd_features(const FeaturesOptions& o, std::ostream& out) {
  if (o.weights.empty())
    throw UsageError("--weights FILE is required (a checkpoint written by hpmc run)");
  const Formats fmt = parse_formats(o.format);
  parse_progress_mode(o.progress);  // a bad value stops the command before any work
  if (!o.images.empty()) return features_of_images(o, fmt, out);
  const Splits which = o.split == "train"  ? Splits::kTrain
                       : o.split == "test" ? Splits::kTest
                       : o.split == "all"  ? Splits::kBoth
                                           : throw UsageError(str("--split ", o.split,
                                                                  ": choose train, test or all"));
  Session s = open_session(with_chosen_impl(o, out), out, 0, "", which);
  if (s.model->features_layer() < 0)
    throw ConfigError(str(o.config, ": model.features is not set, so hpmc does not know where the "
                          "encoder ends; name a layer there (e.g. features: pool2)"));
  std::string dir = o.out_dir.empty() ? s.cfg.output.dir : o.out_dir;
  // Before any weights or data are read.
  if (!o.overwrite) {
    std::vector<std::string> splits;
    if (which != Splits::kTest) splits.push_back("train");
    if (which != Splits::kTrain) splits.push_back("test");
    refuse_to_replace_features(splits, fmt, dir, false);
  }
  load_checkpoint(o.weights, *s.model);
  check_finite_weights(*s.model, o.weights);
  out << "weights: " << o.weights << "\n";
  load_session_data(s, out, which);
  make_dirs(dir);
  // training.batch_size, which --batch sets: open_session checked it
  // against the model's limits and the memory.
  const int batch = s.cfg.training.batch_size;
  if (o.split == "train" || o.split == "all")
    export_split(*s.model, s.data.train, "train", fmt, o, dir, batch, nullptr, out);
  if (o.split == "test" || o.split == "all")
    export_split(*s.model, s.data.test, "test", fmt, o, dir, batch, nullptr, out);
}

}  // namespace hpmc
