// step_strategy.cpp — the layer-by-layer strategy and the choice between it
// and the fused step (step_strategy.h).
#include "model/step_strategy.h"

#include "core/profiler.h"
#include "model/batches.h"
#include "model/fused_step.h"

namespace hpmc {

namespace {

class LayerByLayerStep : public StepStrategy {
 public:
  LayerByLayerStep(const Model& model, LayerStepFn step, std::string why)
      : labels_(model.loss().target_dtype() == DType::kI32), step_(std::move(step)),
        why_(std::move(why)) {}

  std::string describe() const override { return "layer by layer: " + why_; }

  void run(BatchFeeder& feed, int begin, int n, Tensor& acc, Profiler* prof) override {
    {
      ProfileScope scope(prof, "gather batch");
      feed.load(begin, n);
    }
    // The target: the labels for a classifier, the input itself for an autoencoder.
    step_(feed.x(), labels_ ? feed.labels() : feed.x(), acc);
  }

 private:
  bool labels_;
  LayerStepFn step_;
  std::string why_;
};

}  // namespace

std::unique_ptr<StepStrategy> choose_step_strategy(Model& model, const TrainingConfig& cfg,
                                                   const BatchFeeder& feed,
                                                   LayerStepFn layer_step) {
  const std::string refusal = fused_step_refusal(model, cfg, feed.data());
  if (refusal.empty()) return std::make_unique<FusedStep>(model, cfg, feed.max_batch());
  return std::make_unique<LayerByLayerStep>(model, std::move(layer_step), refusal);
}

}  // namespace hpmc
