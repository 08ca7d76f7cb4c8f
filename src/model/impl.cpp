#include "model/impl.h"

#include "core/error.h"

namespace hpmc {

const std::vector<std::string>& impl_names() {
  static const std::vector<std::string> names = {"cpu", "naive", "tiled", "im2col"};
  return names;
}

Impl parse_impl(const std::string& s) {
  const auto& n = impl_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (s == n[i]) return Impl(i);
  throw UsageError(str("unknown implementation '", s, "'; choose one of: cpu, naive, tiled, im2col"));
}

const char* impl_name(Impl i) { return impl_names().at(size_t(i)).c_str(); }

Device impl_device(Impl i) { return i == Impl::kCpu ? Device::kCPU : Device::kGPU; }

}  // namespace hpmc
