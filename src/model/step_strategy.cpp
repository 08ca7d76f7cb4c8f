// step_strategy.cpp — the layer-by-layer strategy and the choice between it
// and the fused step (step_strategy.h).
#include "model/step_strategy.h"

#include <cstdlib>

#include "core/error.h"
#include "model/batches.h"
#include "model/fused_step.h"

namespace hpmc {

namespace {

class LayerByLayerStep : public StepStrategy {
 public:
  LayerByLayerStep(LayerStepFn step, std::string why)
      : step_(std::move(step)), why_(std::move(why)) {}

  std::string describe() const override { return "layer by layer: " + why_; }

  void run(BatchFeeder& feed, int begin, int n, Tensor& acc, double /*lr*/,
           Profiler* /*prof*/) override {
    step_(feed, begin, n, acc);  // which times its parts itself
  }

 private:
  LayerStepFn step_;
  std::string why_;
};

}  // namespace

StepChoice step_choice_from_env() {
  const char* env = std::getenv("HPMC_STEP");
  const std::string want = env ? env : "";
  if (want.empty() || want == "auto") return StepChoice::kAuto;
  if (want == "fused") return StepChoice::kFused;
  if (want == "layers") return StepChoice::kLayers;
  throw UsageError(str("HPMC_STEP=", want,
                       ": expected auto (the fused step where it fits and is the faster, as when "
                       "unset), fused (wherever it fits) or layers (never)"));
}

std::unique_ptr<StepStrategy> choose_step_strategy(Model& model, Optimizer& opt,
                                                   const TrainingConfig& cfg,
                                                   const BatchFeeder& feed,
                                                   LayerStepFn layer_step, int ranks) {
  const StepChoice choice = step_choice_from_env();
  std::string refusal = choice == StepChoice::kLayers
                            ? "HPMC_STEP=layers"
                            : fused_step_refusal(model, cfg, feed.data());
  if (refusal.empty() && ranks > 1)
    refusal = str("data parallel over ", ranks, " ranks: their gradients are all-reduced between "
                  "the backward pass and the update, and the fused kernel updates each layer as "
                  "soon as its gradient is done");
  if (refusal.empty() && choice == StepChoice::kAuto)
    refusal = fused_step_cost_refusal(model, feed.max_batch());
  if (refusal.empty()) return std::make_unique<FusedStep>(model, opt, cfg, feed.max_batch());
  return std::make_unique<LayerByLayerStep>(std::move(layer_step), refusal);
}

}  // namespace hpmc
