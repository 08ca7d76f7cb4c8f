#include "optim/optim_config.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/config.h"

namespace hpmc {

namespace {

const char* const kOptimizers[] = {"sgd", "adam", "adamw", nullptr};
const char* const kSchedules[] = {"constant", "step", "cosine", nullptr};
const char* const kFlatKeys[] = {"lr", "momentum", "weight_decay"};

std::vector<std::string> list(const char* const* names) {
  std::vector<std::string> v;
  for (; *names; ++names) v.push_back(*names);
  return v;
}

constexpr int kMaxInt = std::numeric_limits<int>::max();

// betas: [beta1, beta2], each in [0, 1) as torch.optim.Adam requires.
void read_betas(MapReader& o, OptimizerConfig& opt) {
  YAML::Node v = o.get_node("betas");
  if (v) {
    if (!v.IsSequence() || v.size() != 2)
      o.fail("betas", str("expected a list of two numbers [beta1, beta2], got ",
                          v.IsSequence() ? str("a list of ", v.size()) : v.IsMap() ? "a mapping"
                                                                                   : "'" + v.Scalar() + "'"));
    double b[2];
    for (int i = 0; i < 2; ++i) {
      const YAML::Node e = v[size_t(i)];
      bool ok = e.IsScalar();
      if (ok) {
        try {
          b[i] = e.as<double>();
        } catch (const YAML::Exception&) {
          ok = false;
        }
      }
      if (!ok) o.fail("betas", str("beta", i + 1, " is not a number"));
      if (!std::isfinite(b[i]) || b[i] < 0 || b[i] >= 1)
        o.fail("betas", str("beta", i + 1, " must be at least 0 and less than 1, got ", e.Scalar()));
    }
    opt.beta1 = b[0];
    opt.beta2 = b[1];
  }
  YAML::Node r(YAML::NodeType::Sequence);
  r.SetStyle(YAML::EmitterStyle::Flow);
  r.push_back(opt.beta1);
  r.push_back(opt.beta2);
  o.set_resolved("betas", r);
}

void read_optimizer_map(MapReader& o, OptimizerConfig& opt) {
  opt.type = o.get_choice("type", "", list(kOptimizers));
  opt.flat = false;
  const bool sgd = opt.type == "sgd";
  opt.lr = o.get_float("lr", sgd ? 0.01 : 0.001, 0.0, 1e6);
  if (sgd) {
    opt.momentum = o.get_float("momentum", 0.0, 0.0, 0.999999);
    opt.nesterov = o.get_bool("nesterov", false);
    opt.weight_decay = o.get_float("weight_decay", 0.0, 0.0, 1e6);
    if (opt.nesterov && opt.momentum == 0)
      o.fail("nesterov", "needs momentum greater than 0 (Nesterov momentum is a form of momentum); "
                         "set training.optimizer.momentum, e.g. 0.9");
  } else {
    read_betas(o, opt);
    opt.eps = o.get_float("eps", 1e-8, 0.0, 1.0);
    if (opt.eps <= 0)
      o.fail("eps", "must be greater than 0 (it keeps the update finite where a gradient's "
                    "running square is 0), e.g. 1e-8");
    opt.weight_decay = o.get_float("weight_decay", opt.type == "adamw" ? 0.01 : 0.0, 0.0, 1e6);
  }
  o.finish();
}

void read_schedule_map(MapReader& s, ScheduleConfig& sc) {
  sc.type = s.get_choice("type", "", list(kSchedules));
  sc.warmup_steps = s.get_int("warmup_steps", 0, 0, kMaxInt);
  if (sc.type == "step") {
    sc.step_size = s.require_int("step_size", 1, kMaxInt);
    sc.gamma = s.get_float("gamma", 0.1, 0.0, 1.0);
  } else if (sc.type == "cosine") {
    sc.min_lr = s.get_float("min_lr", 0.0, 0.0, 1e6);
    sc.total_steps = s.get_int("total_steps", 0, 0, kMaxInt);
    if (sc.total_steps > 0 && sc.warmup_steps >= sc.total_steps)
      s.fail("warmup_steps", str("must be less than total_steps (", sc.total_steps,
                                 "): the cosine needs steps after the warm-up"));
  }
  s.finish();
}

}  // namespace

const char* const* optimizer_types() { return kOptimizers; }
const char* const* schedule_types() { return kSchedules; }

std::vector<OptimKey> optimizer_keys(const std::string& type) {
  if (type == "sgd")
    return {{"lr", "0.01", "learning rate"},
            {"momentum", "0", "dampening 0"},
            {"nesterov", "false", "needs momentum > 0"},
            {"weight_decay", "0", "L2, added to the gradient"}};
  return {{"lr", "0.001", "learning rate"},
          {"betas", "[0.9, 0.999]", "each in [0, 1)"},
          {"eps", "1e-08", "> 0"},
          {"weight_decay", type == "adamw" ? "0.01" : "0",
           type == "adamw" ? "decoupled: p = p·(1 − lr·wd)" : "L2, added to the gradient"}};
}

std::vector<OptimKey> schedule_keys(const std::string& type) {
  std::vector<OptimKey> k = {{"warmup_steps", "0", "linear warm-up over the first steps"}};
  if (type == "step") {
    k.push_back({"step_size", "", "steps between decays, required"});
    k.push_back({"gamma", "0.1", "the decay factor"});
  } else if (type == "cosine") {
    k.push_back({"min_lr", "0", "the floor"});
    k.push_back({"total_steps", "0", "0: the run's epochs x steps per epoch"});
  }
  return k;
}

void redirect_lr_override(YAML::Node root, ConfigSource& src) {
  auto it = src.overrides.find("training.lr");
  if (it == src.overrides.end() || !root.IsMap()) return;
  YAML::Node t = root["training"];
  if (!t.IsMap() || !t["optimizer"].IsMap()) return;
  YAML::Node o = t["optimizer"];
  o["lr"] = YAML::Clone(t["lr"]);
  t.remove("lr");
  src.overrides["training.optimizer.lr"] = it->second;
  src.overrides.erase(it);
}

void read_optim_config(MapReader& t, const ConfigSource& src, OptimizerConfig& opt,
                       ScheduleConfig& sched, double& clip_grad_norm) {
  opt = OptimizerConfig{};
  sched = ScheduleConfig{};
  const char* flat = nullptr;
  for (const char* k : kFlatKeys)
    if (!flat && t.has(k)) flat = k;
  if (flat && t.has("optimizer"))
    t.fail(flat, str("cannot be given beside training.optimizer (", t.where("optimizer"),
                     "): the optimizer is set in one place; move it into training.optimizer "
                     "(e.g. optimizer: {type: sgd, lr: 0.1, momentum: 0.9}), or remove "
                     "training.optimizer"));
  if (t.has("optimizer")) {
    MapReader o(t.get_node("optimizer"), "training.optimizer", src);
    read_optimizer_map(o, opt);
    t.set_resolved("optimizer", o.resolved());
  } else {  // the flat keys: sgd, with momentum and weight decay
    t.get_node("optimizer");  // known (for did-you-mean), absent
    opt.lr = t.get_float("lr", opt.lr, 0.0, 1e6);
    opt.momentum = t.get_float("momentum", opt.momentum, 0.0, 0.999999);
    opt.weight_decay = t.get_float("weight_decay", opt.weight_decay, 0.0, 1e6);
    YAML::Node r(YAML::NodeType::Map);
    r["type"] = "sgd";
    r["lr"] = opt.lr;
    r["momentum"] = opt.momentum;
    r["nesterov"] = false;
    r["weight_decay"] = opt.weight_decay;
    t.set_resolved("optimizer", r);
    YAML::Node resolved = t.resolved();  // a handle on the reader's map
    for (const char* k : kFlatKeys) resolved.remove(k);
  }

  if (t.has("schedule")) {
    MapReader s(t.get_node("schedule"), "training.schedule", src);
    read_schedule_map(s, sched);
    if (sched.type == "cosine" && sched.min_lr > opt.lr)
      s.fail("min_lr", str("must be at most the learning rate (", opt.key("lr"), " = ", opt.lr,
                           "), got ", sched.min_lr));
    t.set_resolved("schedule", s.resolved());
  } else {
    t.get_node("schedule");  // known, absent
    YAML::Node r(YAML::NodeType::Map);
    r["type"] = "constant";
    r["warmup_steps"] = 0;
    t.set_resolved("schedule", r);
  }
  clip_grad_norm = t.get_float("clip_grad_norm", 0.0, 0.0, 1e6);
}

}  // namespace hpmc
