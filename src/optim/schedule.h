// schedule.h — the learning rate of each optimizer step (optim_config.h
// states the formulas: linear warm-up, then constant, step or cosine).
//
// The rate depends on the step count alone, in double; the optimizer rounds
// it to float when it applies it. A checkpoint records the schedule's
// identity() and a resume must have the same one.
#pragma once

#include <cstdint>
#include <string>

#include "optim/optim_config.h"

namespace hpmc {

class Schedule {
 public:
  // `lr` is the optimizer's learning rate; `run_steps` the run's epochs ×
  // steps per epoch, which a cosine without total_steps runs over (0: not
  // known, and then such a cosine is a ConfigError). Also a ConfigError: a
  // cosine whose warm-up leaves it no steps.
  Schedule(const ScheduleConfig& cfg, double lr, int64_t run_steps);

  // The learning rate of the step that has `step` (≥ 0) steps before it.
  double lr(int64_t step) const;

  // The type and every key, the cosine's total steps resolved, e.g.
  // "cosine(warmup_steps=100, min_lr=1e-05, total_steps=4690)". The base
  // learning rate is not part of it: a resume may change it, as --lr
  // always could.
  std::string identity() const;

  // The identity of the schedule of checkpoints written before schedules
  // existed: a constant rate without warm-up.
  static std::string legacy_identity();

 private:
  ScheduleConfig cfg_;
  double base_;
  int64_t total_ = 0;  // cosine: resolved total steps
};

}  // namespace hpmc
