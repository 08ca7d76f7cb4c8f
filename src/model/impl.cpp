#include "model/impl.h"

#include "core/device.h"
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

std::string precision_refusal(Impl impl, Precision p) {
  if (p == Precision::kFp32) return "";
  switch (impl) {
    case Impl::kCpu:
      return p == Precision::kTf32 ? "TF32 is a tensor-core format; the CPU runs fp32 or bf16" : "";
    case Impl::kNaive:
    case Impl::kTiled:
      return "naive and tiled are FP32 reference kernels; use --impl im2col or "
             "training.precision: fp32";
    case Impl::kIm2col:
      return "";  // tensor-core kernels (layers/gpu/implicit_gemm_tc.cuh, gemm_tc.h)
  }
  return "";
}

ImplChoice choose_impl(const std::string& s) {
  ImplChoice c;
  if (s != "auto") {
    for (const auto& n : impl_names())
      if (s == n) {
        c.impl = parse_impl(s);
        return c;
      }
    throw UsageError(str("unknown implementation '", s,
                         "'; choose one of: auto, cpu, naive, tiled, im2col"));
  }
  c.automatic = true;
  if (!gpu::compiled_with_cuda()) {
    c.why = "this hpmc was built without CUDA";
  } else if (gpu::device_count() == 0) {
    c.why = str("no usable GPU: ", gpu::describe_devices().front());
  } else {
    // im2col: the fastest of the GPU impls on every shipped config
    // (docs/PERFORMANCE.md); the CUDA runtime's current device is device 0.
    c.impl = Impl::kIm2col;
    c.why = str("GPU ", gpu::describe_devices().front());
  }
  return c;
}

}  // namespace hpmc
