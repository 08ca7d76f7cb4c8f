#include "core/shape.h"

#include "core/error.h"

namespace hpmc {

std::string Shape::str() const { return hpmc::str("(", n, ", ", c, ", ", h, ", ", w, ")"); }

std::string Shape::sample_str() const {
  if (h == 1 && w == 1) return hpmc::str(c);
  return hpmc::str(c, "x", h, "x", w);
}

}  // namespace hpmc
