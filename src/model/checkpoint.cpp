#include "model/checkpoint.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "io/safetensors.h"

namespace hpmc {

namespace {

const char* kFormat = "hpmc-checkpoint-1";
const char* kMomentumPrefix = "optimizer.momentum.";

std::string hexfloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::vector<int64_t> dims64(const std::vector<int>& d) { return {d.begin(), d.end()}; }

double parse_double(const std::string& path, const std::string& key, const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0')
    throw DataError(str(path, ": checkpoint metadata '", key, "' is '", v, "', not a number"));
  return d;
}

long long parse_int(const std::string& path, const std::string& key, const std::string& v) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0')
    throw DataError(str(path, ": checkpoint metadata '", key, "' is '", v, "', not an integer"));
  return x;
}

}  // namespace

std::string CheckpointMeta::get(const std::string& key) const {
  auto it = values.find(key);
  return it == values.end() ? "" : it->second;
}

void save_checkpoint(const std::string& path, const Model& model, const Config& cfg,
                     const TrainState& state, int train_size) {
  // The one place a checkpoint copies parameters off the device.
  const ParamStore& ps = model.params();
  Tensor params = ps.params().to_device(Device::kCPU);
  const bool momentum = cfg.training.momentum > 0;
  Tensor mom = momentum ? ps.momentum().to_device(Device::kCPU) : Tensor();

  std::vector<SafetensorsEntry> entries;
  std::vector<std::string> names;  // keeps the momentum names alive
  names.reserve(ps.entries().size());
  for (const auto& e : ps.entries())
    entries.push_back({e.name, "F32", dims64(e.dims), params.data<float>() + e.offset, e.count * 4});
  if (momentum)
    for (const auto& e : ps.entries()) {
      names.push_back(kMomentumPrefix + e.name);
      entries.push_back({names.back(), "F32", dims64(e.dims), mom.data<float>() + e.offset, e.count * 4});
    }

  std::map<std::string, std::string> meta = {
      {"format", kFormat},
      {"hpmc_version", HPMC_VERSION},
      {"config_name", cfg.name},
      {"impl", impl_name(model.impl())},
      {"loss", cfg.model.loss},
      {"seed", std::to_string(cfg.training.seed)},
      {"batch_size", std::to_string(cfg.training.batch_size)},
      {"shuffle", cfg.training.shuffle ? "true" : "false"},
      {"train_size", std::to_string(train_size)},
      {"epochs", std::to_string(cfg.training.epochs)},
      {"epoch", std::to_string(state.epoch)},
      {"step", std::to_string(state.step)},
      {"global_step", std::to_string(state.global_step)},
      {"epoch_loss_sum", hexfloat(state.loss_sum)},
      {"epoch_correct", hexfloat(state.correct)},
      {"momentum", momentum ? "true" : "false"},
      {"data_order", "permutation of the training set drawn from (seed, epoch) by xoshiro256**"},
  };
  write_safetensors(path, entries, meta);
}

CheckpointMeta load_checkpoint(const std::string& path, Model& model, const Config* cfg,
                               TrainState* state, int train_size) {
  SafetensorsFile f = SafetensorsFile::read(path);
  CheckpointMeta meta{f.metadata()};
  ParamStore& ps = model.params();

  // Validate every tensor before touching the model.
  for (const auto& e : ps.entries()) {
    const SafetensorsTensor* t = f.find(e.name);
    if (!t)
      throw DataError(str(path, ": no tensor '", e.name, "' in this checkpoint; it was written for "
                          "another architecture (its first tensor is '",
                          f.tensors().empty() ? std::string("(none)") : f.tensors().front().name,
                          "')"));
    if (t->dtype != "F32" || t->shape != dims64(e.dims))
      throw DataError(str(path, ": tensor '", e.name, "' is ", t->dtype, " ", dims_str(t->shape),
                          " in the checkpoint but the model has F32 ", dims_str(dims64(e.dims)),
                          "; the checkpoint was written for another architecture"));
  }
  const bool want_state = state != nullptr;
  const bool has_momentum = meta.get("momentum") == "true";
  if (want_state) {
    HPMC_CHECK(cfg != nullptr, "resuming needs the config");
    if (meta.get("format") != kFormat)
      throw DataError(str(path, ": not an hpmc training checkpoint (format '", meta.get("format"),
                          "'); use --init to start a new run from its weights"));
    auto must_match = [&](const char* key, const std::string& now, const char* cfg_key) {
      if (meta.get(key) != now)
        throw ConfigError(str("cannot resume from ", path, ": it was written with ", cfg_key, " ",
                              meta.get(key), " but this run has ", now,
                              "; restore the setting, or start a new run from its weights with "
                              "--init ", path));
    };
    must_match("seed", std::to_string(cfg->training.seed), "training.seed");
    must_match("batch_size", std::to_string(cfg->training.batch_size), "training.batch_size");
    must_match("shuffle", cfg->training.shuffle ? "true" : "false", "training.shuffle");
    must_match("train_size", std::to_string(train_size), "a training set of size");
    if ((cfg->training.momentum > 0) != has_momentum)
      throw ConfigError(str("cannot resume from ", path, ": it was written with momentum ",
                            has_momentum ? "on" : "off", " but this run has training.momentum ",
                            cfg->training.momentum, "; use --init ", path, " instead"));
  }

  Tensor host = Tensor::zeros(ps.params().shape());
  for (const auto& e : ps.entries())
    f.copy_to(e.name, "F32", dims64(e.dims), host.data<float>() + e.offset);
  ps.params().copy_from(host);
  ps.grads().fill_zero();
  ps.momentum().fill_zero();

  if (want_state) {
    if (has_momentum) {
      Tensor m = Tensor::zeros(ps.momentum().shape());
      for (const auto& e : ps.entries())
        f.copy_to(kMomentumPrefix + e.name, "F32", dims64(e.dims), m.data<float>() + e.offset);
      ps.momentum().copy_from(m);
    }
    state->epoch = int(parse_int(path, "epoch", meta.get("epoch")));
    state->step = int(parse_int(path, "step", meta.get("step")));
    state->global_step = parse_int(path, "global_step", meta.get("global_step"));
    state->loss_sum = parse_double(path, "epoch_loss_sum", meta.get("epoch_loss_sum"));
    state->correct = parse_double(path, "epoch_correct", meta.get("epoch_correct"));
    state->epoch_seconds = 0;
  }
  return meta;
}

}  // namespace hpmc
