#include "cli/session.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <ostream>

#include "core/error.h"
#include "core/progress.h"
#include "core/threads.h"
#include "dist/communicator.h"
#include "model/memory.h"
#include "optim/optimizer.h"

namespace hpmc {

Config load_command_config(const CommonOptions& o) {
  std::vector<Override> ov = o.overrides;
  if (!o.data_dir.empty()) ov.push_back({"data.path=" + o.data_dir, "--data " + o.data_dir});
  return load_config(o.config, ov);
}

namespace {

// The probe of the config's data for the splits a command reads. Synthetic
// mnist and cifar10 data has the formats' standard shapes and sizes; other
// synthetic data takes the shape, classes and sizes of the files'.
DataProbe probe_session_data(const Config& cfg, DataFormat f, Splits which) {
  if (cfg.data.synthetic && (f == DataFormat::kMnist || f == DataFormat::kCifar10)) {
    DataProbe p;
    p.sample = sample_shape(f);
    p.num_classes = num_classes(f);
    p.train = wants_train(which) ? size_t(standard_train_size(f)) : 0;
    p.test = wants_test(which) ? size_t(kStandardTestSize) : 0;
    return p;
  }
  DataProbe p = probe_dataset(f, cfg.data.path, cfg.data.options, which);
  if (cfg.data.synthetic) p.pixels = DType::kU8;
  return p;
}

// A load of this many images or more shows its progress.
constexpr size_t kProgressMinImages = 1000;

// Progress of an image load on `out` (core/progress.h): a bar with an ETA
// (`mode` bar, or auto on a terminal), else a line about every 10%; nothing
// for a small load or with `mode` quiet. The loaders call it from one thread.
LoadProgress loading_progress(std::ostream& out, const std::string& mode) {
  const ProgressMode m = resolve_progress_mode(parse_progress_mode(mode), ProgressMode::kLines);
  if (m == ProgressMode::kQuiet) return {};
  // Shared by the copies of the std::function: one meter for the whole load.
  auto meter = std::make_shared<std::unique_ptr<ProgressMeter>>();
  return [&out, m, meter](size_t done, size_t total) {
    if (total < kProgressMinImages) return;
    if (!*meter)
      *meter = std::make_unique<ProgressMeter>(out, "loading images:", int64_t(total), m);
    (*meter)->update(int64_t(done));
    if (done == total) (*meter)->finish();
  };
}

}  // namespace

Session open_session(const CommonOptions& o, std::ostream& out, int batch,
                     const std::string& batch_origin, Splits which) {
  Session s;
  s.impl = parse_impl(o.impl);
  s.cfg = load_command_config(o);
  dist::Communicator& world = dist::world();
  int threads = configure_threads(s.cfg.training.threads, world.local_size());
  // A rank of several takes its own GPU before any GPU work (dist/communicator.h).
  int device = -1;
  if (world.size() > 1 && impl_device(s.impl) == Device::kGPU) device = world.use_gpu();
  s.format = parse_data_format(s.cfg.data.format);
  // Headers and listings only: the model is built, and every shape checked,
  // before any image is decoded.
  s.probe = probe_session_data(s.cfg, s.format, which);
  s.model = Model::build(s.cfg, s.impl, s.probe.sample, s.probe.num_classes);
  out << "hpmc " << HPMC_VERSION << ": " << s.cfg.name << " (" << o.config << "), impl "
      << impl_name(s.impl) << ", precision " << precision_name(s.model->precision()) << ", "
      << threads << " CPU thread" << (threads == 1 ? "" : "s")
      << (world.size() > 1 ? " a rank" : "") << "\n";
  if (world.size() > 1)
    out << "data parallel: " << world.size() << " ranks (" << world.backend() << "), "
        << world.local_size() << " on this host"
        << (device >= 0 ? str(", one GPU each (rank 0: GPU ", device, ")") : std::string())
        << "; rank 0 prints and writes\n";
  s.model->print_table(out);

  // The splits the command loads, at their full size: the limits slice them
  // after loading. Image files of the command's own are `batch` samples.
  const bool own_batch = batch > s.cfg.training.batch_size;
  const int run_batch = own_batch ? batch : s.cfg.training.batch_size;
  s.model->check_batch(run_batch, own_batch ? batch_origin : "training.batch_size");
  const DataFootprint data{s.probe.train,
                           which == Splits::kNone ? size_t(std::max(batch, 0)) : s.probe.test,
                           s.probe.sample.per_sample() * dtype_size(s.probe.pixels)};
  const MemoryPlan plan =
      plan_memory(*s.model, run_batch, data, optimizer_state_buffers(s.cfg.training.optimizer));
  const MemoryBudget budget = available_memory(s.model->device() == Device::kGPU);
  print_memory(out, plan, budget);
  out << std::flush;
  check_memory(plan, budget);
  return s;
}

namespace {

// A split that is not what the model was built for (its files changed since
// the probe) stops here rather than deep inside a batch.
void check_split(const Session& s, const Dataset& d) {
  if (d.size() == 0) return;
  if (!d.sample_shape().same_sample(s.probe.sample) || d.num_classes != s.probe.num_classes)
    throw DataError(str(d.source, ": holds ", d.sample_shape().sample_str(), " samples of ",
                        d.num_classes, " classes, but its headers said ",
                        s.probe.sample.sample_str(), " and ", s.probe.num_classes,
                        " when the model was built; did the data change meanwhile? run again"));
}

std::string describe_classes(int n) {
  return n == 0 ? "no labels" : str(n, n == 1 ? " class" : " classes");
}

}  // namespace

void load_session_data(Session& s, std::ostream& out, Splits which) {
  if (s.cfg.data.synthetic)
    s.data = s.format == DataFormat::kMnist || s.format == DataFormat::kCifar10
                 ? synthetic_dataset(s.format, s.cfg.training.seed)
                 : synthetic_dataset(s.probe, s.cfg.training.seed);
  else
    s.data = load_dataset(s.format, s.cfg.data.path, s.cfg.data.options, which,
                          loading_progress(out, s.progress));
  if (!wants_train(which)) s.data.train = Dataset{};
  if (!wants_test(which)) s.data.test = Dataset{};
  check_split(s, s.data.train);
  check_split(s, s.data.test);
  if (s.cfg.data.train_limit > 0 && s.cfg.data.train_limit < s.data.train.size())
    s.data.train = s.data.train.slice(0, s.cfg.data.train_limit);
  if (s.cfg.data.test_limit > 0 && s.cfg.data.test_limit < s.data.test.size())
    s.data.test = s.data.test.slice(0, s.cfg.data.test_limit);
  out << "data: " << s.cfg.data.format << " from "
      << (s.cfg.data.synthetic ? std::string("synthetic random images") : s.cfg.data.path) << " ("
      << s.probe.sample.sample_str() << ", " << describe_classes(s.probe.num_classes) << "): ";
  if (wants_train(which)) out << s.data.train.size() << " train";
  if (which == Splits::kBoth) out << ", ";
  if (wants_test(which)) out << s.data.test.size() << " test";
  out << " samples\n" << std::flush;
}

ImageTarget image_target(const Session& s) {
  ImageTarget t;
  const Shape& in = s.probe.sample;
  t.channels = in.c, t.height = in.h, t.width = in.w;
  const DataOptions& o = s.cfg.data.options;
  const bool images = s.format == DataFormat::kImages;
  t.convert_channels = images && o.channels > 0;
  t.resize = images && o.height > 0;
  t.origin = "the model's input";
  if (!images)
    t.hint = str("give images of that shape (the model was built for ", s.cfg.data.format,
                 " data of ", in.sample_str(), ")");
  return t;
}

Dataset load_session_images(const Session& s, const std::vector<std::string>& files,
                            std::ostream& out) {
  Dataset d = load_image_files(files, image_target(s), loading_progress(out, s.progress));
  out << "images: " << d.size() << " file" << (d.size() == 1 ? "" : "s") << " (" << d.source
      << ") as " << s.probe.sample.sample_str() << "\n" << std::flush;
  return d;
}

void check_finite_weights(const Model& model, const std::string& path) {
  const ParamStore& ps = model.params();
  // A named copy: the parameters may live on the GPU.
  Tensor host = ps.params().device() == Device::kCPU ? ps.params()
                                                     : ps.params().to_device(Device::kCPU);
  const float* p = host.data<float>();
  for (const ParamEntry& e : ps.entries())
    for (size_t i = 0; i < e.count; ++i)
      if (!std::isfinite(p[e.offset + i]))
        throw DivergedError(str(path, ": tensor '", e.name, "' holds ", p[e.offset + i],
                                " at index ", i, ": the weights are broken (did the training "
                                "diverge?); use a checkpoint from before that, or train again "
                                "with a lower --lr"));
}

std::string join_path(const std::string& dir, const std::string& file) {
  return (std::filesystem::path(dir) / file).string();
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw RuntimeError(str("cannot create the directory ", dir, ": ", ec.message()));
}

std::string checkpoint_path(const Config& cfg) {
  return join_path(cfg.output.weights_dir, cfg.name + ".safetensors");
}

}  // namespace hpmc
