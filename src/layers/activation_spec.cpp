// activation_spec.cpp — the schemas of the activation layer types.
#include "layers/activation_spec.h"

namespace hpmc {

const LayerSchema& ReLUSpec::static_schema() {
  static const LayerSchema s{LayerKind::kReLU, "relu", "max(x, 0) element-wise (nn.ReLU); shape unchanged", {}};
  return s;
}

HPMC_REGISTER_SPEC(ReLU)

}  // namespace hpmc
