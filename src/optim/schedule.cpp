#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace hpmc {

namespace {

// The shortest decimal that reads back as the same double.
std::string shortest(double v) {
  char buf[32];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

Schedule::Schedule(const ScheduleConfig& cfg, double lr, int64_t run_steps)
    : cfg_(cfg), base_(lr) {
  if (cfg_.type == "cosine") {
    total_ = cfg_.total_steps > 0 ? cfg_.total_steps : run_steps;
    if (total_ <= 0)
      throw ConfigError("training.schedule: a cosine schedule needs total_steps here (the run's "
                        "length is not known); set training.schedule.total_steps");
    if (cfg_.warmup_steps >= total_)
      throw ConfigError(str("training.schedule.warmup_steps (", cfg_.warmup_steps,
                            ") must be less than the cosine's ", total_, " steps (",
                            cfg_.total_steps > 0 ? "training.schedule.total_steps"
                                                 : "the run's epochs x steps per epoch",
                            "): lower warmup_steps, or train longer"));
  } else if (cfg_.type == "step") {
    HPMC_CHECK(cfg_.step_size >= 1, "step schedule with step_size ", cfg_.step_size);
  } else {
    HPMC_CHECK(cfg_.type == "constant", "unknown schedule type '", cfg_.type, "'");
  }
}

double Schedule::lr(int64_t step) const {
  HPMC_CHECK(step >= 0, "learning rate of step ", step);
  const int64_t w = cfg_.warmup_steps;
  // Each schedule starts at the base rate (u = 0), so the warm-up ramps to it.
  if (step < w) return base_ * double(step + 1) / double(w);
  const int64_t u = step - w;
  if (cfg_.type == "step") return base_ * std::pow(cfg_.gamma, double(u / cfg_.step_size));
  if (cfg_.type == "cosine") {
    const int64_t t_max = total_ - w;
    const double x = double(std::min(u, t_max)) / double(t_max);
    return cfg_.min_lr + (base_ - cfg_.min_lr) * (1 + std::cos(M_PI * x)) / 2;
  }
  return base_;
}

std::string Schedule::identity() const {
  std::string s = str(cfg_.type, "(warmup_steps=", cfg_.warmup_steps);
  if (cfg_.type == "step")
    s += str(", step_size=", cfg_.step_size, ", gamma=", shortest(cfg_.gamma));
  if (cfg_.type == "cosine") s += str(", min_lr=", shortest(cfg_.min_lr), ", total_steps=", total_);
  return s + ")";
}

std::string Schedule::legacy_identity() { return "constant(warmup_steps=0)"; }

}  // namespace hpmc
