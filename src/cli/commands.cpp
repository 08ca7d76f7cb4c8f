#include "cli/commands.h"

#include <fstream>
#include <ostream>

#include "core/device.h"
#include "core/bf16gemm.h"
#include "core/error.h"
#include "core/sgemm.h"
#include "core/threads.h"
#include "cli/reference.h"
#include "dist/communicator.h"
#include "model/impl.h"

extern "C" char* openblas_get_config(void);

namespace hpmc {

namespace {

std::string cpu_model_and_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = " " + line.substr(line.find(':') + 1) + " ";
  }
  std::string feats;
  for (const char* f :
       {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos) feats += std::string(feats.empty() ? "" : " ") + f;
  if (model.empty()) model = "unknown CPU";
  return model + " [" + (feats.empty() ? "no SIMD flags found" : feats) + "]";
}

}  // namespace

CommonOptions with_chosen_impl(const CommonOptions& o, std::ostream& out) {
  const ImplChoice c = choose_impl(o.impl);
  CommonOptions r = o;
  r.impl = impl_name(c.impl);
  if (c.automatic) out << "impl auto: " << r.impl << " (" << c.why << ")\n";
  return r;
}

void cmd_info(std::ostream& out) {
  out << "hpmc " << HPMC_VERSION << " (" << HPMC_BUILD_TYPE << " build, " << __VERSION__ << ")\n";
  out << "  CUDA support : " << (gpu::compiled_with_cuda() ? "compiled in" : "not compiled in")
      << "\n";
  auto devs = gpu::describe_devices();
  out << "  CUDA devices : " << devs.front() << "\n";
  for (size_t i = 1; i < devs.size(); ++i) out << "                 " << devs[i] << "\n";
  out << "  MPI          : " << dist::mpi_description()
      << (dist::built_with_mpi() ? " (mpirun -np N hpmc run|bench: data parallel)" : "") << "\n";
  out << "  NCCL         : " << dist::nccl_description()
      << (dist::built_with_nccl() ? " (GPU ranks)" : "") << "\n";
  out << "  CPU          : " << cpu_model_and_features() << "\n";
  out << "  CPU threads  : " << configure_threads() << " (OpenMP; OpenBLAS pinned to 1)\n";
  out << "  thread waits : " << wait_policy_description() << "\n";
  out << "  OpenBLAS     : " << openblas_get_config() << "\n";
  out << "  float GEMM   : " << sgemm_path_name(sgemm_path())
      << (sgemm_avx512_supported() ? "" : " (no AVX-512 on this CPU)")
      << "; HPMC_GEMM=openblas|avx512|auto\n";
  out << "  bf16 GEMM    : " << bf16gemm_path_name(bf16gemm_path())
      << (bf16gemm_avx512_supported() ? "" : " (no AVX512_BF16 on this CPU)")
      << (bf16gemm_amx_supported() ? "" : std::string(" (no AMX: ") + bf16gemm_amx_missing() + ")")
      << "; HPMC_BF16_GEMM=amx|avx512_bf16|fallback|auto; training.precision: bf16 (--impl cpu)\n";
  out << "  impls        : auto (" << impl_name(choose_impl("auto").impl) << " here), cpu"
      << (gpu::compiled_with_cuda() ? (gpu::device_count() > 0 ? ", naive, tiled, im2col"
                                                                : " (naive, tiled, im2col: no usable GPU)")
                                    : " (naive, tiled, im2col need a CUDA build)")
      << "\n";
  print_reference_text(out, "  ");
}

}  // namespace hpmc
