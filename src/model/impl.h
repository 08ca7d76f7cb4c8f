// impl.h — which implementation runs the layers (`--impl`).
//   cpu     CPU layers (im2col + OpenBLAS convolutions)
//   naive   GPU, one thread per output element (the GPU oracle)
//   tiled   GPU, shared-memory tiles
//   im2col  GPU, implicit-im2col GEMM
// On the command line `--impl auto` picks one of these (choose_impl).
// Which precisions (training.precision) each runs: precision_refusal.
#pragma once

#include <string>
#include <vector>

#include "core/precision.h"
#include "core/tensor.h"

namespace hpmc {

enum class Impl { kCpu, kNaive, kTiled, kIm2col };

Impl parse_impl(const std::string& s);  // UsageError listing the choices
const char* impl_name(Impl i);
const std::vector<std::string>& impl_names();
Device impl_device(Impl i);

// `--impl` as typed: an impl name, or "auto", which picks im2col when a GPU
// is usable (this build has CUDA and a device is visible) and cpu otherwise.
// `why` says what auto saw, for the line the commands print ("GPU 0: NVIDIA
// H100 …", "this hpmc was built without CUDA"); empty for a named impl. A
// config's per-layer `impl` key takes names only (parse_impl).
struct ImplChoice {
  Impl impl = Impl::kCpu;
  bool automatic = false;
  std::string why;
};
ImplChoice choose_impl(const std::string& s);  // UsageError listing the choices, auto too

// Why `impl` cannot run the products of a model in `p` (a sentence that says
// what to do, without a location), or "" when it can:
//   cpu     fp32, bf16 (tf32 is a tensor-core format)
//   naive   fp32 (the FP32 reference kernels)
//   tiled   fp32 (likewise)
//   im2col  fp32, tf32, bf16 (tensor cores of compute capability 8.0 and up;
//           an older GPU is refused when the first product runs)
// Checked after `--impl auto` has resolved, before a model is built
// (Model::build), for the run's impl and for each layer's own `impl`.
std::string precision_refusal(Impl impl, Precision p);

}  // namespace hpmc
