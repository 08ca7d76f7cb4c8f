// precision.cpp — names of the precisions and the calling thread's current one
// (precision.h).
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

namespace {
thread_local Precision t_current = Precision::kFp32;
}  // namespace

Precision current_precision() { return t_current; }

ScopedPrecision::ScopedPrecision(Precision p) : saved_(t_current) { t_current = p; }
ScopedPrecision::~ScopedPrecision() { t_current = saved_; }

}  // namespace hpmc
