#include "model/checkpoint.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "io/safetensors.h"
#include "optim/schedule.h"

namespace hpmc {

namespace {

const char* kFormat = "hpmc-checkpoint-1";

// The tensor of optimizer state buffer `state` for parameter `param`.
std::string state_tensor(const std::string& state, const std::string& param) {
  return "optimizer." + state + "." + param;
}

int steps_per_epoch(int batch_size, int train_size) {
  const int bs = std::min(batch_size, train_size);
  return int((int64_t(train_size) + bs - 1) / bs);
}

// Samples per optimizer step over `ranks` ranks: what the checkpoint's
// batch_size records (training.batch_size itself for one process without
// accumulation, as it always was), so that its step counts such batches.
int64_t step_batch(const TrainingConfig& tc, int ranks) {
  return int64_t(ranks) * tc.batch_size * tc.grad_accumulation;
}

// The schedule `cfg` gives a run of train_size samples (its identity).
std::string schedule_identity(const TrainingConfig& tc, int train_size, int ranks) {
  const int bs = int(std::min<int64_t>(step_batch(tc, ranks), train_size));
  const int64_t run_steps = int64_t(tc.epochs) * steps_per_epoch(bs, train_size);
  return Schedule(tc.schedule, tc.optimizer.lr, run_steps).identity();
}

// "2 ranks × training.batch_size 32 × training.grad_accumulation 1"
std::string step_batch_parts(int ranks, int64_t batch, int64_t accumulation) {
  return str(ranks, ranks == 1 ? " rank" : " ranks", " x training.batch_size ", batch,
             " x training.grad_accumulation ", accumulation);
}

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

// What a resume needs from the metadata, each field read strictly.
struct ResumeMeta {
  uint64_t seed = 0;
  // batch_size: the samples of a step, over every rank and micro-batch
  int batch_size = 0, train_size = 0, epochs = 0, epoch = 0, step = 0;
  // How the writer made its steps (1, batch_size, 1 before these fields existed).
  int ranks = 1, rank_batch_size = 0, grad_accumulation = 1;
  int64_t global_step = 0;
  bool shuffle = false, momentum = false;
  double loss_sum = 0, correct = 0;
  // The optimizer: its type, state buffers ("momentum", "m,v" or ""), steps
  // taken, and the schedule's identity. A checkpoint written before these
  // fields existed is sgd (momentum as its flag says) at a constant rate.
  std::string optimizer, state, schedule;
  int64_t optimizer_steps = 0;
};

// Reads the metadata fields of a training checkpoint. Every failure names the
// file and the field, and quotes the value cut short and escaped; a bad field
// means a damaged or edited file, so the remedy is another checkpoint or a
// fresh start from the weights.
class MetaReader {
 public:
  MetaReader(const std::string& path, const CheckpointMeta& meta) : path_(path), meta_(meta) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw DataError(str(path_, ": checkpoint metadata '", key, "' ", what,
                        "; the file is damaged or was edited: resume from an intact checkpoint, "
                        "or start a new run from its weights with --init ", path_));
  }

  const std::string& text(const std::string& key) const {
    auto it = meta_.values.find(key);
    if (it == meta_.values.end()) fail(key, "is missing");
    return it->second;
  }

  // A decimal integer in [lo, hi]: an optional '-' and digits, nothing else.
  int64_t integer(const std::string& key, int64_t lo, int64_t hi,
                  const std::string& range_why = "") const {
    const std::string& v = text(key);
    const bool neg = !v.empty() && v[0] == '-';
    const size_t first = neg ? 1 : 0;
    bool ok = v.size() > first;
    int64_t x = 0;
    for (size_t i = first; ok && i < v.size(); ++i) {
      int d = v[i] - '0';
      ok = d >= 0 && d <= 9 && !__builtin_mul_overflow(x, 10, &x) &&
           !__builtin_add_overflow(x, neg ? -d : d, &x);
    }
    if (!ok) {
      bool digits = v.size() > first && v.find_first_not_of("0123456789", first) == v.npos;
      fail(key, str("is '", printable(v), "', ",
                    digits ? "too large for a 64-bit integer" : "not a decimal integer"));
    }
    if (x < lo || x > hi)
      fail(key, str("is ", x, ", outside ", lo, "..", hi, range_why.empty() ? "" : " (",
                    range_why, range_why.empty() ? "" : ")"));
    return x;
  }

  uint64_t unsigned64(const std::string& key) const {
    const std::string& v = text(key);
    bool ok = !v.empty();
    uint64_t x = 0;
    for (size_t i = 0; ok && i < v.size(); ++i) {
      unsigned d = unsigned(v[i] - '0');
      ok = d <= 9 && !__builtin_mul_overflow(x, 10u, &x) && !__builtin_add_overflow(x, d, &x);
    }
    if (!ok)
      fail(key, str("is '", printable(v), "', not an integer from 0 to 18446744073709551615"));
    return x;
  }

  bool boolean(const std::string& key) const {
    const std::string& v = text(key);
    if (v != "true" && v != "false") fail(key, str("is '", printable(v), "', not true or false"));
    return v == "true";
  }

  // An exact hex float as hpmc writes them (printf's %a), finite.
  double hexfloat(const std::string& key) const {
    const std::string& v = text(key);
    const size_t sign = !v.empty() && v[0] == '-' ? 1 : 0;
    char* end = nullptr;
    double d = v.compare(sign, 2, "0x") == 0 ? std::strtod(v.c_str(), &end) : 0;
    if (!end || *end != '\0' || !std::isfinite(d))
      fail(key, str("is '", printable(v), "', not a finite hex float such as 0x1.8p+3"));
    return d;
  }

 private:
  const std::string& path_;
  const CheckpointMeta& meta_;
};

// Every field of a training checkpoint's metadata, each in its range, and
// the training position consistent with itself: step within an epoch of
// train_size samples in batches of batch_size, global_step the steps before
// it, and the partial sums of an epoch that has taken `step` steps.
ResumeMeta read_resume_meta(const std::string& path, const CheckpointMeta& meta) {
  MetaReader r(path, meta);
  if (meta.get("format") != kFormat)
    throw DataError(str(path, ": not an hpmc training checkpoint (format '",
                        printable(meta.get("format")),
                        "', expected '", kFormat, "'); use --init to start a new run from its "
                        "weights"));
  ResumeMeta m;
  m.seed = r.unsigned64("seed");
  m.batch_size = int(r.integer("batch_size", 1, std::numeric_limits<int>::max()));
  m.shuffle = r.boolean("shuffle");
  m.momentum = r.boolean("momentum");
  m.train_size = int(r.integer("train_size", 1, std::numeric_limits<int>::max()));
  m.epochs = int(r.integer("epochs", 1, 1000000));
  m.epoch = int(r.integer("epoch", 0, m.epochs,
                          str("the run that wrote it had ", m.epochs, " epochs")));
  // The trainer's steps_per_epoch: the last, partial batch is a step too.
  const int bs = std::min(m.batch_size, m.train_size);
  const int steps = int((int64_t(m.train_size) + bs - 1) / bs);
  const std::string epoch_is = str(m.train_size, " samples in batches of ", bs, " make ", steps,
                                   " steps an epoch");
  m.step = int(r.integer("step", 0, steps, epoch_is));
  if (m.epoch == m.epochs && m.step != 0)
    r.fail("step", str("is ", m.step, " in epoch ", m.epoch + 1, ", after the last of the ",
                       m.epochs, " epochs of the run that wrote it"));
  const int64_t expected = int64_t(m.epoch) * steps + m.step;
  m.global_step = r.integer("global_step", 0, std::numeric_limits<int64_t>::max());
  if (m.global_step != expected)
    r.fail("global_step", str("is ", m.global_step, " but epoch ", m.epoch, " and step ", m.step,
                              " make ", expected, " (", epoch_is, ")"));
  m.loss_sum = r.hexfloat("epoch_loss_sum");
  m.correct = r.hexfloat("epoch_correct");
  const int64_t seen = std::min<int64_t>(int64_t(m.step) * bs, m.train_size);
  if (m.step == 0 && m.loss_sum != 0)
    r.fail("epoch_loss_sum", str("is ", printable(meta.get("epoch_loss_sum")),
                                 " at step 0, where the epoch has summed nothing yet"));
  if (m.correct < 0 || m.correct > double(seen) || m.correct != std::floor(m.correct))
    r.fail("epoch_correct", str("is ", printable(meta.get("epoch_correct")), " (", m.correct,
                                "), not a whole number from 0 to the ", seen,
                                " samples the epoch has seen by step ", m.step));
  if (meta.values.count("optimizer")) {
    m.optimizer = r.text("optimizer");
    const bool sgd = m.optimizer == "sgd";
    if (!sgd && m.optimizer != "adam" && m.optimizer != "adamw")
      r.fail("optimizer", str("is '", printable(m.optimizer), "', not sgd, adam or adamw"));
    m.state = r.text("optimizer_state");
    const std::string want = sgd ? (m.momentum ? "momentum" : "") : "m,v";
    if (m.state != want)
      r.fail("optimizer_state", str("is '", printable(m.state), "' but ", m.optimizer,
                                    sgd ? str(" with momentum ", m.momentum ? "on" : "off") : "",
                                    " keeps '", want, "'"));
    m.optimizer_steps = r.integer("optimizer_steps", 0, std::numeric_limits<int64_t>::max());
    m.schedule = r.text("schedule");
  } else {
    m.optimizer = "sgd";
    m.state = m.momentum ? "momentum" : "";
    m.optimizer_steps = -1;  // the global step, once read
    m.schedule = Schedule::legacy_identity();
  }
  if (m.optimizer_steps < 0) m.optimizer_steps = m.global_step;
  // Data parallelism and accumulation: absent from checkpoints written
  // before them (one process, batch_size a batch).
  if (meta.values.count("ranks")) {
    m.ranks = int(r.integer("ranks", 1, 1 << 20));
    m.rank_batch_size = int(r.integer("rank_batch_size", 1, 1 << 20));
    m.grad_accumulation = int(r.integer("grad_accumulation", 1, 1 << 16));
    const int64_t product = int64_t(m.ranks) * m.rank_batch_size * m.grad_accumulation;
    if (product != m.batch_size)
      r.fail("batch_size", str("is ", m.batch_size, " but ",
                               step_batch_parts(m.ranks, m.rank_batch_size, m.grad_accumulation),
                               " make ", product));
    // The position in samples: the steps' samples, the last step's fewer.
    const int64_t samples = r.integer("epoch_samples", 0, m.train_size);
    if (samples != std::min<int64_t>(int64_t(m.step) * bs, m.train_size))
      r.fail("epoch_samples", str("is ", samples, " but step ", m.step, " makes ",
                                  std::min<int64_t>(int64_t(m.step) * bs, m.train_size), " (",
                                  epoch_is, ")"));
  } else {
    m.rank_batch_size = m.batch_size;
  }
  if (m.optimizer_steps != m.global_step)
    r.fail("optimizer_steps", str("is ", m.optimizer_steps, " but the run has taken ",
                                  m.global_step, " steps (global_step)"));
  return m;
}

}  // namespace

std::string CheckpointMeta::get(const std::string& key) const {
  auto it = values.find(key);
  return it == values.end() ? "" : it->second;
}

void save_checkpoint(const std::string& path, const Model& model, const Optimizer& opt,
                     const Config& cfg, const TrainState& state, int train_size, int ranks) {
  HPMC_CHECK(opt.steps() == state.global_step, "saving an optimizer that has taken ", opt.steps(),
             " steps at global step ", state.global_step);
  // The one place a checkpoint copies parameters and optimizer state off the device.
  const ParamStore& ps = model.params();
  Tensor params = ps.params().to_device(Device::kCPU);
  std::vector<Tensor> states;
  for (size_t i = 0; i < opt.state_names().size(); ++i)
    states.push_back(opt.state(i).to_device(Device::kCPU));

  Tensor buffers = ps.buffers().to_device(Device::kCPU);

  std::vector<SafetensorsEntry> entries;
  std::vector<std::string> names;  // keeps the state tensors' names alive
  names.reserve(ps.entries().size() * states.size());
  for (const auto& e : ps.entries())
    entries.push_back({e.name, "F32", dims64(e.dims), params.data<float>() + e.offset, e.count * 4});
  for (const auto& e : ps.buffer_entries())
    entries.push_back({e.name, "F32", dims64(e.dims), buffers.data<float>() + e.offset, e.count * 4});
  for (size_t i = 0; i < states.size(); ++i)
    for (const auto& e : ps.entries()) {
      names.push_back(state_tensor(opt.state_names()[i], e.name));
      entries.push_back({names.back(), "F32", dims64(e.dims), states[i].data<float>() + e.offset,
                         e.count * 4});
    }

  const bool momentum = opt.find_state("momentum") != nullptr;
  std::map<std::string, std::string> meta = {
      {"format", kFormat},
      {"hpmc_version", HPMC_VERSION},
      {"config_name", cfg.name},
      {"impl", impl_name(model.impl())},
      {"precision", precision_name(model.precision())},
      {"loss", cfg.model.loss},
      {"seed", std::to_string(cfg.training.seed)},
      {"batch_size", std::to_string(step_batch(cfg.training, ranks))},
      {"ranks", std::to_string(ranks)},
      {"rank_batch_size", std::to_string(cfg.training.batch_size)},
      {"grad_accumulation", std::to_string(cfg.training.grad_accumulation)},
      {"epoch_samples",
       std::to_string(std::min<int64_t>(
           int64_t(state.step) * std::min<int64_t>(step_batch(cfg.training, ranks), train_size),
           train_size))},
      {"shuffle", cfg.training.shuffle ? "true" : "false"},
      {"train_size", std::to_string(train_size)},
      {"epochs", std::to_string(cfg.training.epochs)},
      {"epoch", std::to_string(state.epoch)},
      {"step", std::to_string(state.step)},
      {"global_step", std::to_string(state.global_step)},
      {"epoch_loss_sum", hexfloat(state.loss_sum)},
      {"epoch_correct", hexfloat(state.correct)},
      {"momentum", momentum ? "true" : "false"},
      {"optimizer", opt.type()},
      {"optimizer_state", opt.state_list()},
      {"optimizer_steps", std::to_string(opt.steps())},
      {"optimizer_settings", opt.describe()},
      {"schedule", schedule_identity(cfg.training, train_size, ranks)},
      {"clip_grad_norm", str(cfg.training.clip_grad_norm)},
      {"data_order", "permutation of the training set drawn from (seed, epoch) by xoshiro256**"},
      {"input_noise", cfg.training.input_noise.describe()},
      {"augment", cfg.training.augment.describe()},
  };
  write_safetensors(path, entries, meta);
}

namespace {

// Loads the weights and, with `state`, the optimizer's state and the
// training position; every check passes before the model or `opt` changes.
CheckpointMeta load(const std::string& path, Model& model, Optimizer* opt, const Config* cfg,
                    TrainState* state, int train_size, int ranks) {
  SafetensorsFile f = SafetensorsFile::read(path);
  CheckpointMeta meta{f.metadata()};
  ParamStore& ps = model.params();

  // Validate every tensor before touching the model.
  std::vector<ParamEntry> all = ps.entries();
  all.insert(all.end(), ps.buffer_entries().begin(), ps.buffer_entries().end());
  for (const auto& e : all) {
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
  ResumeMeta rm;
  if (want_state) {
    rm = read_resume_meta(path, meta);
    auto must_match = [&](bool same, const std::string& cfg_key, const std::string& then,
                          const std::string& now) {
      if (!same)
        throw ConfigError(str("cannot resume from ", path, ": it was written with ", cfg_key, " ",
                              then, " but this run has ", now,
                              "; restore the setting, or start a new run from its weights with "
                              "--init ", path));
    };
    const TrainingConfig& tc = cfg->training;
    must_match(rm.seed == tc.seed, "training.seed", meta.get("seed"), std::to_string(tc.seed));
    // The samples of a step must stay: the position is in such steps, and
    // the schedule counts them. The ranks, the batch and the micro-batches
    // may change as long as their product does not.
    if (rm.batch_size != step_batch(tc, ranks))
      throw ConfigError(str(
          "cannot resume from ", path, ": its steps took ", rm.batch_size, " samples (",
          step_batch_parts(rm.ranks, rm.rank_batch_size, rm.grad_accumulation),
          ") but this run's take ", step_batch(tc, ranks), " (",
          step_batch_parts(ranks, tc.batch_size, tc.grad_accumulation),
          "); keep the product, e.g. with --batch or --set training.grad_accumulation=K, or start "
          "a new run from its weights with --init ", path));
    must_match(rm.shuffle == tc.shuffle, "training.shuffle", meta.get("shuffle"),
               tc.shuffle ? "true" : "false");
    must_match(rm.train_size == train_size, "a training set of size", meta.get("train_size"),
               std::to_string(train_size));
    // Absent from checkpoints written before the settings existed: those had none.
    auto or_none = [](const std::string& v) { return v.empty() ? std::string("none") : v; };
    must_match(or_none(meta.get("input_noise")) == tc.input_noise.describe(),
               "training.input_noise", or_none(meta.get("input_noise")),
               tc.input_noise.describe());
    must_match(or_none(meta.get("augment")) == tc.augment.describe(), "data.augment",
               or_none(meta.get("augment")), tc.augment.describe());
    const OptimizerConfig& oc = tc.optimizer;
    must_match(rm.optimizer == oc.type, "the optimizer", rm.optimizer,
               oc.flat ? "sgd (the default, without training.optimizer)"
                       : str(oc.type, " (training.optimizer.type)"));
    if (rm.state != opt->state_list()) {  // sgd: momentum on or off
      HPMC_CHECK(oc.type == "sgd", "optimizer ", oc.type, " with state '", opt->state_list(), "'");
      throw ConfigError(str("cannot resume from ", path, ": it was written with momentum ",
                            rm.momentum ? "on" : "off", " but this run has ", oc.key("momentum"),
                            " ", oc.momentum, "; use --init ", path, " instead"));
    }
    must_match(rm.schedule == schedule_identity(tc, train_size, ranks), "the schedule",
               printable(rm.schedule),
               str(schedule_identity(tc, train_size, ranks),
                   " (training.schedule; a cosine spans the run's epochs unless total_steps is "
                   "given)"));
  }

  // Every tensor is read (and so checked) before the model changes.
  Tensor host = Tensor::zeros(ps.params().shape());
  for (const auto& e : ps.entries())
    f.copy_to(e.name, "F32", dims64(e.dims), host.data<float>() + e.offset);
  Tensor buffers = Tensor::zeros(ps.buffers().shape());
  for (const auto& e : ps.buffer_entries())
    f.copy_to(e.name, "F32", dims64(e.dims), buffers.data<float>() + e.offset);
  std::vector<Tensor> states;
  if (want_state)
    for (const std::string& name : opt->state_names()) {
      states.push_back(Tensor::zeros(ps.params().shape()));
      for (const auto& e : ps.entries())
        f.copy_to(state_tensor(name, e.name), "F32", dims64(e.dims),
                  states.back().data<float>() + e.offset);
    }

  ps.params().copy_from(host);
  ps.buffers().copy_from(buffers);
  ps.grads().fill_zero();
  if (want_state) {
    opt->reset();
    for (size_t i = 0; i < states.size(); ++i) opt->state(i).copy_from(states[i]);
    opt->set_steps(rm.optimizer_steps);
    state->epoch = rm.epoch;
    state->step = rm.step;
    state->global_step = rm.global_step;
    state->loss_sum = rm.loss_sum;
    state->correct = rm.correct;
    state->epoch_seconds = 0;
  }
  return meta;
}

}  // namespace

CheckpointMeta load_checkpoint(const std::string& path, Model& model) {
  return load(path, model, nullptr, nullptr, nullptr, -1, 1);
}

CheckpointMeta load_checkpoint(const std::string& path, Model& model, Optimizer& opt,
                               const Config& cfg, TrainState& state, int train_size, int ranks) {
  return load(path, model, &opt, &cfg, &state, train_size, ranks);
}

}  // namespace hpmc
