// step_strategy.cpp — the layer-by-layer strategy and the choice between it
// and the fused step (step_strategy.h).
#include "model/step_strategy.h"

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

std::unique_ptr<StepStrategy> choose_step_strategy(Model& model, Optimizer& opt,
                                                   const TrainingConfig& cfg,
                                                   const BatchFeeder& feed,
                                                   LayerStepFn layer_step) {
  const std::string refusal = fused_step_refusal(model, cfg, feed.data());
  if (refusal.empty()) return std::make_unique<FusedStep>(model, opt, cfg, feed.max_batch());
  return std::make_unique<LayerByLayerStep>(std::move(layer_step), refusal);
}

}  // namespace hpmc
