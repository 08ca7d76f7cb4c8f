// impl.h — which implementation runs the layers (`--impl`).
//   cpu     CPU layers (im2col + OpenBLAS convolutions)
//   naive   GPU, one thread per output element (the GPU oracle)
//   tiled   GPU, shared-memory tiles
//   im2col  GPU, implicit-im2col GEMM
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

}  // namespace hpmc
