// optim_config.h — the optimizer, learning-rate schedule and gradient
// clipping of a run, as config.yaml's training section gives them.
//
//   training:
//     optimizer: {type: adamw, lr: 0.001, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.01}
//     schedule: {type: cosine, warmup_steps: 100, min_lr: 1e-5}
//     clip_grad_norm: 1.0
//
// The flat keys training.lr / momentum / weight_decay of earlier configs
// still work and mean sgd; giving them beside training.optimizer is an
// error, except that a command-line override of training.lr (--lr X, or
// --set training.lr=X) sets training.optimizer.lr when the config has one.
// Every key is read strictly (config.h's MapReader); the defaults are
// PyTorch's (torch.optim.SGD / Adam / AdamW, clip_grad_norm_), except sgd's
// lr, 0.01, which is hpmc's old training.lr default.
//
// Schedules count optimizer steps, warm-up included: the step that has t
// steps before it (t = 0, 1, ...) trains with
//   warm-up, t < W:  lr(t) = base(0) · (t + 1) / W      (reaches base at t = W − 1)
//   then, u = t − W:
//     constant       base
//     step           lr · gamma^⌊u / step_size⌋                        (torch StepLR)
//     cosine         min_lr + (lr − min_lr) · (1 + cos(π · min(u, T) / T)) / 2,
//                    T = total_steps − W                       (torch CosineAnnealingLR)
// where base(0) is the schedule's own value at u = 0 (lr for all three). So
// the warm-up is torch LinearLR(start_factor = 1/W, total_iters = W − 1)
// followed by the schedule (SequentialLR with milestone W). total_steps is
// the run's epochs × steps per epoch unless given. A schedule depends on the
// step count only, so a resumed run continues it exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace hpmc {

class MapReader;
struct ConfigSource;

struct OptimizerConfig {
  std::string type = "sgd";  // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;     // sgd (dampening is 0)
  bool nesterov = false;     // sgd, needs momentum > 0
  double weight_decay = 0.0; // sgd, adam: L2 added to the gradient; adamw: decoupled
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  // Given by the flat keys (training.lr, ...) rather than training.optimizer.
  bool flat = true;
  // Where key `name` is set, for messages: "training.lr" (flat keys) or
  // "training.optimizer.lr".
  std::string key(const std::string& name) const {
    return (flat ? "training." : "training.optimizer.") + name;
  }
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | step | cosine
  int warmup_steps = 0;
  int step_size = 0;           // step
  double gamma = 0.1;          // step
  double min_lr = 0.0;         // cosine
  int64_t total_steps = 0;     // cosine; 0: the run's epochs × steps per epoch
};

// The optimizer types and schedule types, for `hpmc info` and messages.
const char* const* optimizer_types();  // null-terminated
const char* const* schedule_types();
// The keys of one type (besides `type`) with their defaults as YAML ("" for
// a required key) and a note, for `hpmc info`; a test checks them against
// what the reader accepts and fills in.
struct OptimKey {
  std::string name, value, note;
};
std::vector<OptimKey> optimizer_keys(const std::string& type);
std::vector<OptimKey> schedule_keys(const std::string& type);

// A command-line --lr (an override of training.lr) in a config that has
// training.optimizer: moved to training.optimizer.lr before reading, its
// origin kept for messages. `root` is the document after overrides.
void redirect_lr_override(YAML::Node root, ConfigSource& src);

// Reads the optimizer (flat keys or training.optimizer), training.schedule
// and training.clip_grad_norm from the training section `t`. Records the
// resolved forms (every key, defaults filled in) in t's resolved map, with
// the flat keys replaced: config.yaml always has training.optimizer and
// training.schedule.
void read_optim_config(MapReader& t, const ConfigSource& src, OptimizerConfig& opt,
                       ScheduleConfig& sched, double& clip_grad_norm);

}  // namespace hpmc
