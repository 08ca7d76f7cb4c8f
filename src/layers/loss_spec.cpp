// loss_spec.cpp — the losses' schemas and fit rules.
#include "layers/loss_spec.h"

#include "core/error.h"

namespace hpmc {

std::string fit_reconstruction(const char* loss, const Shape& in, const Shape& out) {
  if (out.same_sample(in)) return "";
  return str("loss ", loss, " compares the output with the input, but the model maps ",
             in.sample_str(), " to ", out.sample_str(), "; the last layer must give ",
             in.sample_str());
}

const LossSchema& MseLossSpec::static_schema() {
  static const LossSchema s{
      LossKind::kMseLoss, "mse",
      "mean squared error between the output and the input image (nn.MSELoss)", false,
      [](const Shape& in, const Shape& out, int) { return fit_reconstruction("mse", in, out); }};
  return s;
}

HPMC_REGISTER_LOSS_SPEC(MseLoss)

const LossSchema& SoftmaxCrossEntropySpec::static_schema() {
  static const LossSchema s{
      LossKind::kSoftmaxCrossEntropy, "softmax_cross_entropy",
      "softmax over the logits, then the mean negative log-likelihood of the labels "
      "(nn.CrossEntropyLoss)",
      true, [](const Shape&, const Shape& out, int classes) -> std::string {
        if (classes == 0)
          return "loss softmax_cross_entropy needs labels, but the data has none (a flat image "
                 "folder, or npy without labels.npy); give it labels (one sub-directory per "
                 "class, labels.npy), or train an autoencoder (model.loss: mse)";
        if (out.h == 1 && out.w == 1 && out.c == classes) return "";
        return str("loss softmax_cross_entropy needs ", classes, " logits per sample (the "
                   "dataset has ", classes, " classes), but the model gives ", out.sample_str(),
                   "; end with a linear layer of out_features: ", classes);
      }};
  return s;
}

HPMC_REGISTER_LOSS_SPEC(SoftmaxCrossEntropy)

const LossSchema& BceWithLogitsLossSpec::static_schema() {
  static const LossSchema s{
      LossKind::kBceWithLogitsLoss, "bce_with_logits",
      "binary cross-entropy of sigmoid(output) against the input image, computed from the "
      "logits without overflow (nn.BCEWithLogitsLoss)",
      false, [](const Shape& in, const Shape& out, int) {
        return fit_reconstruction("bce_with_logits", in, out);
      }};
  return s;
}

HPMC_REGISTER_LOSS_SPEC(BceWithLogitsLoss)

const LossSchema& BceLossSpec::static_schema() {
  static const LossSchema s{
      LossKind::kBceLoss, "bce",
      "binary cross-entropy of the output, probabilities in [0, 1] (end with a sigmoid), "
      "against the input image, each log clamped at −100 (nn.BCELoss)",
      false,
      [](const Shape& in, const Shape& out, int) { return fit_reconstruction("bce", in, out); }};
  return s;
}

HPMC_REGISTER_LOSS_SPEC(BceLoss)

const LossSchema& L1LossSpec::static_schema() {
  static const LossSchema s{
      LossKind::kL1Loss, "l1", "mean absolute error between the output and the input image (nn.L1Loss)",
      false,
      [](const Shape& in, const Shape& out, int) { return fit_reconstruction("l1", in, out); }};
  return s;
}

HPMC_REGISTER_LOSS_SPEC(L1Loss)

}  // namespace hpmc
