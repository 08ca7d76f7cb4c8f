// gemm_tc.h — the tensor-core GEMM engine for training.precision tf32 and
// bf16 (gemm_tc.cu): C[m×n] (= or +=) op(A)·op(B), row-major, leading
// dimensions lda/ldb/ldc, either operand transposed, read in place.
//
// implicit::gemm (the Linear layer's products) runs every product here in
// tf32 and bf16, whatever its size.
//
// The operands are FP32 in memory (master weights, FP32 activations); each
// element is rounded once to the precision's operand format:
//   kTf32  cvt.rna.tf32.f32: 10 stored mantissa bits, round to nearest with
//          ties away from zero (unit roundoff 2^-11); products on
//          mma.sync m16n8k8 tf32;
//   kBf16  cvt.rn.bf16x2.f32: 7 stored mantissa bits, round to nearest even
//          (2^-8), as core/bf16.h rounds on the CPU except for FP32
//          denormals, which the GPU keeps (as bf16 denormals) and the CPU's
//          AVX512_BF16 flushes; products on mma.sync m16n8k16 bf16.
// The products of rounded operands are exact and are summed in FP32 by the
// tensor cores, k ascending in steps of 16 (bf16) or 8 (tf32) within each
// thread's fragment; the bits depend on the shape only. No cuBLAS.
//
// Block tile 128×128 with k-tiles of 32 (bf16) or 16 (tf32), 256 threads
// as 2 × 4 warps of 64×32, two blocks a multiprocessor. Two main loops:
//   staged   (tf32; bf16 below the packing rule, packs()): the next k-tile
//            is loaded into registers and rounded there while the tensor
//            cores work on the current one from shared memory (two
//            buffers), each operand in its own layout (k-contiguous or
//            row-contiguous) so that stores and fragment loads are free of
//            bank conflicts; ldmatrix for the k-contiguous fragments;
//   packed   (bf16 from the rule on): both operands packed first (rounded
//            to bf16 once, half the bytes; pack_bf16 below), then copied
//            to shared memory by cp.async three k-tiles deep, swizzled, and
//            read by ldmatrix (.trans for row-contiguous tiles). The same
//            rounded values through the same mma sequence: the same bits
//            as the staged loop.
// The epilogue writes a lane's two consecutive columns as one 8-byte access
// where C allows it, and issues a group's loads of C (accumulate) before
// its stores.
//
// Split-K as gemm_large.h's (splits_for(): when the m×n tiles fill fewer
// than two blocks on each of 132 SMs, contiguous slices of at least 8
// k-tiles, at most 16, each written whole to the shared workspace and summed
// in double, slice 0 first): a function of the shape only, so the bits do
// not depend on the device. Not yet: TMA, wgmma, wider warp tiles;
// docs/gemm-large-tuning.md keeps the measurements.
#pragma once

#include <cstddef>

#include "layers/epilogue_act.h"

namespace hpmc::gpu::gemm_tc {

enum class Operands { kTf32, kBf16 };
const char* operands_name(Operands p);  // "tf32", "bf16"

// What the epilogue does to each value it writes, in this order (the float
// operations of the separate kernels it replaces, so the same bits):
//   v = acc + (bias ? bias[j] : accumulate ? C[i][j] : 0)
//       (the bias broadcast first and the product accumulated onto it)
//   v = act(v)                                   (relu or leaky_relu:
//       the activation layer's forward; the kinds with exp or tanh stay
//       out of the GEMM's stores)
//   v = mask[i·ldm + j] > 0 ? v : 0              (the ReLU's backward, whose
//       output `mask` is: relu_backward(mask, v))
// With split-K the sum of the slices does the same after rounding to FP32.
// A bias does not go with accumulate. The Linear layers run their bias and
// the activation after them here (forward) and the ReLU before them
// (input gradient): layers/gpu/linear.h.
struct Epilogue {
  const float* bias = nullptr;  // n values
  Activation act;               // none, relu or leaky_relu
  const float* mask = nullptr;  // m×n, row stride ldm (≥ n)
  int ldm = 0;
  bool is_plain() const { return !bias && act.is_none() && !mask; }
};

// op(A) is m×k: A[i·lda + l], or A[l·lda + i] with trans_a; op(B) is k×n:
// B[l·ldb + j], or B[j·ldb + l] with trans_b. Any m, n, k ≥ 0 (each < 2^30)
// and leading dimensions ≥ the row length; 16-byte loads where an operand's
// pointer is 16-byte aligned and its ld % 4 == 0, 4-byte loads otherwise.
// k = 0 writes zeros (or leaves C as it is with accumulate). splits: 0
// chooses splits_for(), else that many slices (at most one a k-tile; tests,
// benchmarks). `ep`: the epilogue (above; k = 0 writes ep applied to the
// bias or zeros). Throws RuntimeError for bad sizes, a bias with accumulate
// or another activation (one line with the numbers).
void gemm(Operands p, bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate, int splits = 0,
          const Epilogue& ep = {});

// The split-K slice count gemm() chooses for the shape (pure host code).
int splits_for(Operands p, long long m, long long n, long long k);

// ---- bf16 from packed operands ---------------------------------------------------------
// An operand packed for the bf16 kernel: its rows×cols values rounded to bf16
// (to nearest even) once, in the same layout, each row padded with zeros to
// packed_ld(cols) = cols rounded up to a multiple of 8 values (16 bytes).
// gemm() in bf16 packs both operands into scratch buffers of its own on each
// call; a caller that multiplies one operand several times (LinearGPU: x in
// forward and in the weight gradient, W in forward and in the input
// gradient) packs it once and calls gemm_bf16. Both give the same bits: the
// same rounded operands through the same k-steps.
// Whether gemm() packs a bf16 product's operands (else its loads round the
// FP32 operands as they stage them): gemm_large.h's shape rule, m, n ≥ 128
// and m·n·k ≥ 2^27, where the packing's extra pass over the operands is
// small against the product.
bool packs(long long m, long long n, long long k);
int packed_ld(int cols);
size_t packed_bytes(int rows, int cols);  // rows · packed_ld(cols) · 2
// dst (packed_bytes(rows, cols), 16-byte aligned device memory) = src packed;
// src[r·ld + c] for r < rows, c < cols. Queued on the default stream.
void pack_bf16(const float* src, int rows, int cols, int ld, void* dst);
// C (= or +=) op(A)·op(B) as gemm(kBf16, …) with A and B packed (op(A)'s
// storage is trans_a ? k×m : m×k, op(B)'s trans_b ? n×k : k×n; their
// leading dimensions packed_ld of their column counts), with the epilogue
// `ep` (above: a bias, an activation, a mask).
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const void* a, const void* b,
               float* c, int ldc, bool accumulate, int splits = 0, const Epilogue& ep = {});

}  // namespace hpmc::gpu::gemm_tc
