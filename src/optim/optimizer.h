// optimizer.h — an optimizer over the ParamStore's flat buffers.
//
// An optimizer owns its state: named buffers (sgd with momentum: momentum;
// adam and adamw: m, v), each ParamStore::padded() floats on the store's
// device, zero at the start, and the count of steps taken. A step is one
// pass over the whole buffer per device: an OpenMP loop on the CPU, one
// kernel on the GPU (gpu/optim_kernels.h). Padding gaps are zero in every
// buffer and stay zero. A checkpoint stores state buffer S of parameter P as
// "optimizer.S.P" (checkpoint.h).
//
// The update rules (update_args.h) are PyTorch's torch.optim.SGD (dampening
// 0, optional Nesterov), Adam and AdamW (not amsgrad).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/params.h"
#include "optim/optim_config.h"

namespace hpmc {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const OptimizerConfig& config() const { return cfg_; }
  const std::string& type() const { return cfg_.type; }

  // The state buffers, in a fixed order, and their names.
  const std::vector<std::string>& state_names() const { return names_; }
  Tensor& state(size_t i) { return state_[i]; }
  const Tensor& state(size_t i) const { return state_[i]; }
  // The buffer named `name`, or null when this optimizer has none.
  Tensor* find_state(const std::string& name);
  const Tensor* find_state(const std::string& name) const;
  // "momentum", "m,v" or "" (sgd without momentum): what a checkpoint
  // records and a resume compares.
  std::string state_list() const;

  int64_t steps() const { return steps_; }  // updates taken
  void set_steps(int64_t steps);            // as a checkpoint restores it

  // One update of every parameter from the store's gradients at learning
  // rate `lr` (the schedule's value for this step).
  void step(double lr);
  // A step whose update ran elsewhere: the fused MLP kernel applies SGD
  // itself (model/fused_step.h), reading and writing this optimizer's state.
  void count_step() { ++steps_; }
  // State to zero, no steps taken.
  void reset();
  // Copies another optimizer's state and step count (same type, same store
  // layout): a second trainer continuing the first's run.
  void copy_state_from(const Optimizer& other);

  // "lr 0.01, momentum 0.9, weight decay 0" (sgd) or "adamw, lr 0.001,
  // betas (0.9, 0.999), eps 1e-08, weight decay 0.01".
  std::string describe() const;

 protected:
  Optimizer(const OptimizerConfig& cfg, ParamStore& store, std::vector<std::string> names);
  virtual void update(double lr) = 0;  // steps_ updates taken before this one
  ParamStore& store_;
  OptimizerConfig cfg_;

 private:
  std::vector<std::string> names_;
  std::vector<Tensor> state_;
  int64_t steps_ = 0;
};

// The optimizer cfg describes, over `store` (built: its buffers allocated).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, ParamStore& store);

// How many state buffers of the parameter buffer's size it keeps (memory plan).
int optimizer_state_buffers(const OptimizerConfig& cfg);

}  // namespace hpmc
