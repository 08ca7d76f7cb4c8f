#include "cli/commands.h"

#include <fstream>
#include <ostream>
#include <sstream>

#include "core/device.h"
#include "core/error.h"
#include "core/threads.h"
#include "data/dataset.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/trainer.h"

extern "C" char* openblas_get_config(void);

namespace hpmc {

namespace {

std::string cpu_model_and_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = " " + line.substr(line.find(':') + 1) + " ";
  }
  std::string feats;
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_tile"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos) feats += std::string(feats.empty() ? "" : " ") + f;
  if (model.empty()) model = "unknown CPU";
  return model + " [" + (feats.empty() ? "no SIMD flags found" : feats) + "]";
}

}  // namespace

Config load_run_config(const RunOptions& o) {
  std::vector<Override> ov = o.overrides;
  if (!o.data_dir.empty()) ov.push_back({"data.path=" + o.data_dir, "--data " + o.data_dir});
  return load_config(o.config, ov);
}

void cmd_run(const RunOptions& o, std::ostream& out) {
  Impl impl = parse_impl(o.impl);
  Config cfg = load_run_config(o);
  int threads = configure_threads(cfg.training.threads);
  DataFormat fmt = parse_data_format(cfg.data.format);

  // Everything about the model is checked before any data is read.
  auto model = Model::build(cfg, impl, sample_shape(fmt), num_classes(fmt));
  out << "hpmc " << HPMC_VERSION << ": " << cfg.name << " (" << o.config << "), impl "
      << impl_name(impl) << ", " << threads << " CPU thread" << (threads == 1 ? "" : "s") << "\n";
  model->print_table(out);

  DataSplits data = load_dataset(fmt, cfg.data.path);
  if (cfg.data.train_limit > 0 && cfg.data.train_limit < data.train.size())
    data.train = data.train.slice(0, cfg.data.train_limit);
  if (cfg.data.test_limit > 0 && cfg.data.test_limit < data.test.size())
    data.test = data.test.slice(0, cfg.data.test_limit);
  out << "data: " << cfg.data.format << " from " << cfg.data.path << ": " << data.train.size()
      << " train, " << data.test.size() << " test samples\n";
  out << "training: " << cfg.training.epochs << " epoch" << (cfg.training.epochs == 1 ? "" : "s")
      << ", batch " << cfg.training.batch_size << ", lr " << cfg.training.lr << ", momentum "
      << cfg.training.momentum << ", weight decay " << cfg.training.weight_decay << ", seed "
      << cfg.training.seed << "\n"
      << std::flush;

  model->params().init(cfg.training.seed);
  Trainer trainer(*model, cfg.training);
  if (o.progress == "bar") trainer.set_progress(Trainer::Progress::kBar);
  else if (o.progress == "lines") trainer.set_progress(Trainer::Progress::kLines);
  else if (o.progress == "quiet") trainer.set_progress(Trainer::Progress::kQuiet);
  trainer.fit(data.train, data.test, out);
}

void cmd_info(std::ostream& out) {
  out << "hpmc " << HPMC_VERSION << " (" << HPMC_BUILD_TYPE << " build, " << __VERSION__ << ")\n";
  out << "  CUDA support : " << (gpu::compiled_with_cuda() ? "compiled in" : "not compiled in")
      << "\n";
  auto devs = gpu::describe_devices();
  out << "  CUDA devices : " << devs.front() << "\n";
  for (size_t i = 1; i < devs.size(); ++i) out << "                 " << devs[i] << "\n";
  out << "  CPU          : " << cpu_model_and_features() << "\n";
  out << "  CPU threads  : " << configure_threads() << " (OpenMP; OpenBLAS pinned to 1)\n";
  out << "  OpenBLAS     : " << openblas_get_config() << "\n";
  out << "  impls        : cpu" << (gpu::compiled_with_cuda() ? "" : " (naive, tiled, im2col need the GPU build)") << "\n";
  out << "  layer types  :\n";
  for (const auto& kv : LayerRegistry::builtin().types())
    out << "    " << kv.first << ": " << kv.second.keys << "\n";
  out << "  losses       : mse, softmax_cross_entropy\n";
}

}  // namespace hpmc
