// precision.cpp — names of the precisions (precision.h).
#include "core/precision.h"

#include "core/error.h"

namespace hpmc {

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32", "tf32", "bf16"};
  return names;
}

const char* precision_name(Precision p) { return precision_names().at(size_t(p)).c_str(); }

Precision parse_precision(const std::string& s) {
  const auto& n = precision_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (s == n[i]) return Precision(i);
  throw UsageError(str("unknown precision '", s, "'; choose one of: fp32, tf32, bf16"));
}

}  // namespace hpmc
