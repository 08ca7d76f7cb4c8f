#include "layers/epilogue_act.h"

#include "core/error.h"

namespace hpmc {

std::string activation_text(const Activation& a) {
  switch (a.kind) {
    case ActKind::kNone: return "";
    case ActKind::kRelu: return "relu";
    case ActKind::kLeakyRelu: return str("leaky_relu(", a.slope, ")");
    case ActKind::kPrelu: return "prelu";
    case ActKind::kSigmoid: return "sigmoid";
    case ActKind::kTanh: return "tanh";
  }
  return "?";
}

}  // namespace hpmc
