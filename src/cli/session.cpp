#include "cli/session.h"

#include <cmath>
#include <filesystem>
#include <ostream>

#include "core/error.h"
#include "core/threads.h"
#include "model/memory.h"
#include "optim/optimizer.h"

namespace hpmc {

Config load_command_config(const CommonOptions& o) {
  std::vector<Override> ov = o.overrides;
  if (!o.data_dir.empty()) ov.push_back({"data.path=" + o.data_dir, "--data " + o.data_dir});
  return load_config(o.config, ov);
}

Session open_session(const CommonOptions& o, std::ostream& out, int batch,
                     const std::string& batch_origin, Splits which) {
  Session s;
  s.impl = parse_impl(o.impl);
  s.cfg = load_command_config(o);
  int threads = configure_threads(s.cfg.training.threads);
  s.format = parse_data_format(s.cfg.data.format);
  s.model = Model::build(s.cfg, s.impl, sample_shape(s.format), num_classes(s.format));
  out << "hpmc " << HPMC_VERSION << ": " << s.cfg.name << " (" << o.config << "), impl "
      << impl_name(s.impl) << ", " << threads << " CPU thread" << (threads == 1 ? "" : "s") << "\n";
  s.model->print_table(out);

  // The splits the command loads, at their full size: the limits slice them
  // after loading.
  const bool own_batch = batch > s.cfg.training.batch_size;
  const int run_batch = own_batch ? batch : s.cfg.training.batch_size;
  s.model->check_batch(run_batch, own_batch ? batch_origin : "training.batch_size");
  const Shape sample = sample_shape(s.format);
  const DataFootprint data{which != Splits::kTest ? size_t(standard_train_size(s.format)) : 0,
                           which != Splits::kTrain ? size_t(kStandardTestSize) : 0,
                           sample.per_sample()};
  const MemoryPlan plan =
      plan_memory(*s.model, run_batch, data, optimizer_state_buffers(s.cfg.training.optimizer));
  const MemoryBudget budget = available_memory(s.model->device() == Device::kGPU);
  print_memory(out, plan, budget);
  out << std::flush;
  check_memory(plan, budget);
  return s;
}

void load_session_data(Session& s, std::ostream& out, Splits which) {
  s.data = s.cfg.data.synthetic ? synthetic_dataset(s.format, s.cfg.training.seed)
                                : load_dataset(s.format, s.cfg.data.path, which);
  if (which == Splits::kTest) s.data.train = Dataset{};
  if (which == Splits::kTrain) s.data.test = Dataset{};
  if (s.cfg.data.train_limit > 0 && s.cfg.data.train_limit < s.data.train.size())
    s.data.train = s.data.train.slice(0, s.cfg.data.train_limit);
  if (s.cfg.data.test_limit > 0 && s.cfg.data.test_limit < s.data.test.size())
    s.data.test = s.data.test.slice(0, s.cfg.data.test_limit);
  out << "data: " << s.cfg.data.format << " from "
      << (s.cfg.data.synthetic ? std::string("synthetic random images") : s.cfg.data.path) << ": ";
  if (which != Splits::kTest) out << s.data.train.size() << " train";
  if (which == Splits::kBoth) out << ", ";
  if (which != Splits::kTrain) out << s.data.test.size() << " test";
  out << " samples\n" << std::flush;
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
