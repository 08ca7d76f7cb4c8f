// dropout_spec.cpp — the schema and checks of dropout (see dropout_spec.h).
#include "layers/dropout_spec.h"

#include "core/error.h"

namespace hpmc {

const LayerSchema& DropoutSpec::static_schema() {
  static const LayerSchema s{
      LayerKind::kDropout,
      "dropout",
      "in training zeroes each element with probability p and scales the rest by 1/(1−p), "
      "seeded and resume-exact; identity in eval (nn.Dropout); shape unchanged",
      {float_key("p", "0.5", 0, 1, "probability of zeroing an element")}};
  return s;
}

DropoutSpec::DropoutSpec(std::string name, double p) : Layer(std::move(name)), p_(p) {
  if (!(p >= 0 && p <= 1))
    throw ConfigError(str("dropout '", this->name(), "': p must be in [0, 1], got ", p));
}

std::string DropoutSpec::describe() const { return str("p ", p_); }

HPMC_REGISTER_SPEC(Dropout)

}  // namespace hpmc
