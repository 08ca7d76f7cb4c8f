// conv2d_thin.h — direct, vectorised CPU convolution, built for THIN layers:
// few output channels, such as an autoencoder's last layer (256 → 3
// channels). There im2col + gemm is memory-bound: the gemm has only K rows,
// so the 9× larger column matrix is written and read for a handful of
// multiply-adds per element. This path builds no column matrix. It takes
// any K (in register tiles of up to 4 channels) and turned out faster than
// im2col + gemm for most wide layers too; conv2d_thin_applies says where it
// is chosen.
//
// Layouts: x is NCHW, w is KCRS, b is K, y is NKPQ (see conv_shape.h).
//   forward:       y[k][p][q] = b[k] + Σ_c,r,s w[k][c][r][s] · x[c][p·st-pad+r][q·st-pad+s]
//   backward_data: dx[c][h][v] = Σ_k,r,s w[k][c][r][s] · dy[k][p][q]  over (p, q) that saw (h, v)
//   backward_params: dw[k][c][r][s] += Σ_n,p,q dy[k][p][q] · x[c][p·st-pad+r][q·st-pad+s]
// How each is mapped (all vectorise along the output width, SIMD lanes = q):
//   * forward: per image, a zero-padded copy of a chunk of input channels
//     (stride > 1: each row split into its `stride` column phases, so that
//     x[q·st + s] is contiguous in q). A register tile holds up to 4 outputs
//     × a few rows × a few vectors; it sums over (c, r, s) with the weights
//     broadcast — the image is read once (once per 4 outputs), no column
//     matrix.
//   * backward_data: the transposed convolution as a gather. For each phase
//     (h mod st, v mod st) of dx, the taps that reach it form a stride-1
//     correlation of a zero-padded copy of dy (K channels) with part of the
//     kernel; a register tile holds 4 input channels × rows × vectors.
//   * backward_params: per image, a register tile of up to 4 outputs × a few
//     (c, r, s) taps sums dy · x over the whole output plane in vectors, then
//     across lanes in double. Images are split between threads, each with a
//     private double partial; the partials are summed in thread order, so a
//     fixed thread count gives bit-identical results.
//
// Gradient convention (layer.h): dw/db ACCUMULATE (+=), dx is OVERWRITTEN.
//
// SIMD: the kernels are compiled three times — for AVX-512, for AVX2+FMA and
// portably (16-byte vectors, or scalar where the compiler has none) — and the
// best one this CPU supports is chosen at run time, so the build needs no
// -march flag. The level can be forced (tests run all supported ones).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/precision.h"
#include "layers/conv_shape.h"

namespace hpmc::cpu {

// The instruction sets the thin kernels are compiled for.
enum class SimdLevel { kPortable, kAvx2, kAvx512 };

SimdLevel best_simd_level();  // the widest this CPU (and OS) supports
bool simd_level_supported(SimdLevel level);
const char* simd_level_name(SimdLevel level);

// The selection rule (conv2d_ops.h), by measurement on the 2-vCPU Zen 5 of
// docs/PERFORMANCE.md against im2col + OpenBLAS 0.3.21:
//   * K ≤ 16, kernels larger than 1x1: the thin path was 1.5 – 12× faster
//     per pass (stride 1 and 2, 3x3 and 5x5, 2x2 to 32x32 outputs, 1 to 256
//     input channels): im2col's traffic alone costs more than the whole
//     thin convolution.
//   * Any K, outputs at least 8 wide: 1.3 – 2.5× faster forward and input
//     gradient, weight gradient faster or even (8x8); the CIFAR
//     autoencoder's step went from 350 to 228 ms. Narrower outputs fill too
//     few SIMD lanes: at 4x4 and 6x6 with K ≥ 64 the gemm path wins.
//   * 1x1 kernels have no im2col blow-up to avoid (stride 1 needs no im2col
//     at all), and the thin path was no faster: they keep the gemm path.
constexpr int kThinMaxK = 16;  // thin at any output width up to this K
constexpr int kThinMinQ = 8;   // thin at any K from this output width
inline bool conv2d_thin_applies(const Conv2dShape& sh) {
  return sh.R * sh.S > 1 && (sh.K <= kThinMaxK || sh.Q >= kThinMinQ);
}
// In bf16 the GEMM does two multiply-adds per lane and instruction
// (bf16gemm.h) where the thin kernels still do one, which repays im2col
// wherever the GEMM has rows enough: the thin path keeps only the layers
// with few output channels (K ≤ kThinMaxK), whose GEMM would have 1 to 16
// rows, each packed column of B used for that few multiply-adds.
inline bool conv2d_thin_applies(const Conv2dShape& sh, Precision prec) {
  return prec == Precision::kBf16 ? sh.R * sh.S > 1 && sh.K <= kThinMaxK
                                  : conv2d_thin_applies(sh);
}

// Scratch memory of the thin path, grown on demand and kept between calls
// (a layer owns one inside its Conv2dWorkspace). Not shareable between
// concurrent calls.
template <typename T>
struct Conv2dThinWorkspace {
  std::vector<std::vector<T>> in;          // per thread: padded input copy
  std::vector<std::vector<T>> aux;         // per thread: dy copy (backward_params)
  std::vector<std::vector<double>> dw, db;  // per thread: partial gradients
  std::vector<char> used;                  // which threads hold a partial
  std::vector<T> wpack, bpack;             // weights (and bias) in tile order
  std::vector<ptrdiff_t> offsets;          // input offset of each tap
  // The AVX512_BF16 kernels' (conv2d_thin_bf16_dot): per thread, copies as
  // bf16 pairs (forward, input gradient) or plain bf16 (weight gradient:
  // the input, and dy in halves_aux); the weights as pairs in tile order.
  std::vector<std::vector<uint32_t>> pairs;
  std::vector<std::vector<uint16_t>> halves, halves_aux;
  std::vector<uint32_t> wpairs;
};

// Each pass runs in `prec` (core/precision.h): fp32, or bf16 for float, where
// the operands of its products (x, w, dy) are rounded to bf16 in the copies
// and packed weights the kernels read anyway, and summed in FP32 (the weight
// gradient's partials in double, as in fp32); the bias gradient sums dy as it
// is. The double kernels run fp32 only. In bf16, where
// conv2d_thin_bf16_dot(sh, level) holds, the passes multiply on vdpbf16ps
// (conv2d_thin_bf16.cpp: two products a lane and instruction, paired along
// the input channels, the output channels and the pixels respectively)
// instead of FP32 FMAs on rounded copies: the same products, summed in
// another order.

// Whether the bf16 passes of `sh` at `level` take the AVX512_BF16 kernels:
// stride 1, level kAvx512, a CPU with AVX512_BF16 and a bf16 GEMM path other
// than the fallback (HPMC_BF16_GEMM=fallback keeps every bf16 product on
// FP32 FMAs).
bool conv2d_thin_bf16_dot(const Conv2dShape& sh, SimdLevel level);

// y = conv(x, w) + b; b may be null. Overwrites y.
template <typename T>
void conv2d_thin_forward(const Conv2dShape& sh, const T* x, const T* w, const T* b, T* y,
                         Conv2dThinWorkspace<T>& ws, SimdLevel level = best_simd_level(),
                         Precision prec = Precision::kFp32);

// dx = dL/dx for dy = dL/dy. Overwrites dx.
template <typename T>
void conv2d_thin_backward_data(const Conv2dShape& sh, const T* dy, const T* w, T* dx,
                               Conv2dThinWorkspace<T>& ws, SimdLevel level = best_simd_level(),
                               Precision prec = Precision::kFp32);

// dw += dL/dw and, if db is non-null, db += dL/db.
template <typename T>
void conv2d_thin_backward_params(const Conv2dShape& sh, const T* x, const T* dy, T* dw, T* db,
                                 Conv2dThinWorkspace<T>& ws,
                                 SimdLevel level = best_simd_level(),
                                 Precision prec = Precision::kFp32);

}  // namespace hpmc::cpu
