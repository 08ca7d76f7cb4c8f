// impl.h — which implementation runs the layers (`--impl`).
//   cpu     CPU layers (im2col + OpenBLAS convolutions)
//   naive   GPU, one thread per output element (the GPU oracle)
//   tiled   GPU, shared-memory tiles
//   im2col  GPU, implicit-im2col GEMM
// On the command line `--impl auto` picks one of these (choose_impl).
#pragma once

#include <string>
#include <vector>

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

}  // namespace hpmc
