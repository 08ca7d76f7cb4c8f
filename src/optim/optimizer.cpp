#include "optim/optimizer.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace hpmc {

Optimizer::Optimizer(const OptimizerConfig& cfg, ParamStore& store, std::vector<std::string> names)
    : store_(store), cfg_(cfg), names_(std::move(names)) {
  for (size_t i = 0; i < names_.size(); ++i)
    state_.push_back(Tensor::zeros(store_.params().shape(), DType::kF32, store_.device()));
}

Tensor* Optimizer::find_state(const std::string& name) {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return &state_[i];
  return nullptr;
}

const Tensor* Optimizer::find_state(const std::string& name) const {
  return const_cast<Optimizer*>(this)->find_state(name);
}

std::string Optimizer::state_list() const {
  std::string s;
  for (const auto& n : names_) s += (s.empty() ? "" : ",") + n;
  return s;
}

void Optimizer::set_steps(int64_t steps) {
  HPMC_CHECK(steps >= 0, "optimizer step count ", steps);
  steps_ = steps;
}

void Optimizer::step(double lr) {
  HPMC_CHECK(std::isfinite(lr) && lr >= 0, "learning rate ", lr);
  HPMC_CHECK(store_.params().numel() == store_.grads().numel() &&
                 (state_.empty() || state_[0].numel() == store_.params().numel()),
             "optimizer state of ", state_.empty() ? 0 : state_[0].numel(), " floats for ",
             store_.params().numel(), " parameters: the store was rebuilt after the optimizer");
  if (store_.padded() > 0) update(lr);
  ++steps_;
}

void Optimizer::reset() {
  for (auto& t : state_) t.fill_zero();
  steps_ = 0;
}

void Optimizer::copy_state_from(const Optimizer& other) {
  HPMC_CHECK(other.type() == type() && other.names_ == names_, "copying ", other.type(), " state (",
             other.state_list(), ") into ", type(), " (", state_list(), ")");
  for (size_t i = 0; i < state_.size(); ++i) state_[i].copy_from(other.state_[i]);
  steps_ = other.steps_;
}

std::string Optimizer::describe() const {
  std::ostringstream os;
  if (cfg_.type == "sgd") {
    os << "lr " << cfg_.lr << ", momentum " << cfg_.momentum << (cfg_.nesterov ? " (nesterov)" : "")
       << ", weight decay " << cfg_.weight_decay;
  } else {
    os << cfg_.type << ", lr " << cfg_.lr << ", betas (" << cfg_.beta1 << ", " << cfg_.beta2
       << "), eps " << cfg_.eps << ", weight decay " << cfg_.weight_decay;
  }
  return os.str();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, ParamStore& store) {
  if (cfg.type == "sgd") return std::make_unique<Sgd>(cfg, store);
  if (cfg.type == "adam" || cfg.type == "adamw") return std::make_unique<Adam>(cfg, store);
  throw ConfigError(str("training.optimizer.type: unknown optimizer '", cfg.type,
                        "'; choose one of: sgd, adam, adamw"));
}

int optimizer_state_buffers(const OptimizerConfig& cfg) {
  if (cfg.type == "sgd") return cfg.momentum != 0 ? 1 : 0;
  return 2;
}

AdamArgs adam_args(double lr, double beta1, double beta2, double eps, double weight_decay,
                   bool decoupled, int64_t t) {
  HPMC_CHECK(t >= 1, "adam step number ", t);
  AdamArgs a;
  a.beta1 = float(beta1);
  a.c1 = float(1.0 - beta1);
  a.beta2 = float(beta2);
  a.c2 = float(1.0 - beta2);
  a.eps = float(eps);
  a.decoupled = decoupled;
  a.l2 = decoupled ? 0.0f : float(weight_decay);
  a.decay = decoupled ? float(1.0 - lr * weight_decay) : 1.0f;
  a.step_size = float(lr / (1.0 - std::pow(beta1, double(t))));
  a.bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2, double(t))));
  return a;
}

}  // namespace hpmc
