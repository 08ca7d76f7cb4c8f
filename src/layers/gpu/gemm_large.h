// gemm_large.h — the FP32 GEMM engine for large products (gemm_large.cu):
// C[m×n] (= or +=) op(A)·op(B), row-major, leading dimensions lda/ldb/ldc,
// either operand transposed, read in place (no copies). FFMA only: no
// tensor cores, no TF32, no cuBLAS. implicit::gemm (the im2col family's
// gemm, which the Linear layer's three products use) hands a product to this
// engine when use_large() says so; smaller products stay on the implicit
// engine (implicit_gemm_core.cuh), bit for bit as before.
//
// The shape rule (applies()): m ≥ 128, n ≥ 128 and m·n·k ≥ 2^27 multiply-adds
// (a 128×128 block tile is then never mostly padding, and the product is
// large enough that its one or two waves of blocks, not launch and fill,
// set its time). The products of the shipped MLPs (batch 64: 64×784→320,
// 320×784 over 64, …) all fall below it.
//
// HPMC_GEMM_LARGE=auto, or no HPMC_GEMM_LARGE at all, applies the rule; 0
// keeps every product on the implicit engine and 1 sends every product here
// (A/B timings, tests). Any other value is a UsageError. The rule and the
// default tile were set from the first measurements (NVIDIA H200,
// 2026-11-27, docs/gemm-large-tuning.md): at 4096² and up the K16 tile ran at
// 68–73% of the FP32 peak against the implicit engine's 58–60%.
//
// Split-K (splits_for()): when the block tiles alone leave SMs idle (fewer
// blocks than two per SM of a 132-SM H100), the k-tiles are cut into that
// many contiguous slices, each written whole to a workspace, and a second
// kernel sums the slices in double, slice 0 first, into C. The slice count
// is a function of the shape only (132 SMs whatever the device), so the bits
// of a result do not depend on the GPU.
#pragma once

#include "layers/epilogue_act.h"

namespace hpmc::gpu::gemm_large {

// Tile configurations: both a 128×128 block tile of 256 threads, 8×8
// outputs a thread, two blocks per SM. kK16: k-tiles of 16, 3 stages (the
// default: half the barriers per FFMA of kK8, and 3–8% faster on every
// measured shape); kK8: k-tiles of 8, 4 stages (a benchmark variant).
enum class Variant { kK8 = 0, kK16 = 1 };
const char* variant_name(Variant v);

// The shape rule above (pure host code).
bool applies(long long m, long long n, long long k);

// Whether implicit::gemm should run this product here: the rule, or the
// override of HPMC_GEMM_LARGE (read on each call; UsageError if malformed).
bool use_large(long long m, long long n, long long k);

// The split-K slice count for the configuration's 128×128 tiles and k-tile
// depth bk: 1 unless the m×n tiles fill fewer than the 264 block slots of two
// blocks per SM on 132 SMs; then as many slices as keep the blocks within
// those slots, each of at least 8 k-tiles, at most 16.
int splits_for(long long m, long long n, long long k, int bk);

// C = op(A)·op(B) (+ C if accumulate). op(A) is m×k: A[i·lda + l], or
// A[l·lda + i] with trans_a; op(B) is k×n: B[l·ldb + j], or B[j·ldb + l]
// with trans_b. Any m, n, k ≥ 0 (each < 2^30) and leading dimensions ≥ the
// row length; 16-byte loads where a row-contiguous operand allows them
// (pointer 16-byte aligned and ld % 4 == 0), 4-byte loads otherwise. k = 0
// writes zeros (or leaves C as it is with accumulate). splits: 0 chooses
// splits_for(), else that many slices (at most one a k-tile; tests,
// benchmarks). Throws RuntimeError for bad sizes (one line with the numbers).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate,
          Variant variant = Variant::kK16, int splits = 0);

// The split-K workspace both 128×128 engines share (this one and gemm_tc.h):
// slices ws[z·slice + i·ldw + j], z < splits, i < m, j < n, with
// ldw = splitk_ldw(n) (n rounded up to 4) and slice = ldw·m; the pointer
// stays valid until the next call of either engine.
long long splitk_ldw(int n);
float* splitk_workspace(int splits, int m, int n);
// C[i][j] = (C[i][j] +) Σ_z ws[z·slice + i·ldw + j], z ascending, in double,
// rounded once (on the default stream, after the slices' kernel); with bias
// (not with accumulate) bias[j] takes C[i][j]'s place. Then, as gemm_tc's
// epilogue: act (relu or leaky_relu; none) on each rounded value, and with a mask
// (m×n, row stride ldm) C[i][j] = mask[i·ldm + j] > 0 ? C[i][j] : 0.
void splitk_sum(const float* ws, int splits, int m, int n, float* c, int ldc, bool accumulate,
                const float* bias = nullptr, const Activation& act = {},
                const float* mask = nullptr, int ldm = 0);

}  // namespace hpmc::gpu::gemm_large
