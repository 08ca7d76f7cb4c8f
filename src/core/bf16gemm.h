// bf16gemm.h — GEMM with bfloat16 operands and FP32 sums (training.precision:
// bf16 on the CPU).
//
// C[M×N] = alpha · op(Â)[M×K] · op(B̂)[K×N] + beta · C, with the layout and
// arguments of sgemm (sgemm.h: row-major, leading dimensions, op(X) = X or
// X^T, beta == 0 does not read C), where Â and B̂ are A and B rounded to
// bf16 by bf16.h's rule. The product of two bf16 values is exact in FP32;
// the products are summed, and alpha and beta applied, in FP32.
//
// Two paths, chosen once per process:
//   * avx512_bf16: hpmc's packed, cache-blocked kernel (bf16gemm_avx512.cpp),
//     which rounds A and B to bf16 while packing them and multiplies with
//     vdpbf16ps (two products added into each FP32 lane per instruction).
//     Taken when the CPU has AVX512_BF16 (with F, VL, BW, DQ), whatever
//     -march the binary was built with.
//   * fallback: A and B rounded to bf16 into float copies, then sgemm. The
//     same operands, so the same products; only the order and the FP32
//     rounding of the sums differ (and vdpbf16ps treats denormal sums as
//     zero), within FP32's K·u.
// Each call runs on the calling thread only; hpmc threads around it.
//
// Determinism: in the avx512_bf16 path each element of C is summed over k
// in the same order whatever M, N, the leading dimensions or the tile it
// falls in: K is taken in pairs (k, k+1), one vdpbf16ps each, the pairs cut
// into near-equal blocks by K alone, each block summed in registers and then
// added to C. Splitting a product by rows or columns over several calls thus
// gives the same bits as one call. The fallback is as deterministic as sgemm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace hpmc {

enum class Bf16GemmPath { kAvx512Bf16, kFallback };

// The path bf16gemm() takes: avx512_bf16 where bf16gemm_avx512_supported().
Bf16GemmPath bf16gemm_path();
const char* bf16gemm_path_name(Bf16GemmPath p);
// Whether this CPU (and OS) can run the avx512_bf16 path.
bool bf16gemm_avx512_supported();

void bf16gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Each path directly, for tests and benchmarks. bf16gemm_avx512 requires
// bf16gemm_avx512_supported().
void bf16gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, int ldb, float beta, float* c, int ldc);
void bf16gemm_fallback(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc);

// An A operand packed once for several avx512_bf16 products with it: op(A)
// rounded to bf16 and laid out as the kernel's loops read it (the layout:
// bf16gemm_avx512.cpp), so that a product with many B — a convolution's
// weights with each image's column matrix — packs A once instead of once a
// call. bf16gemm_avx512_packed_a gives the bits bf16gemm_avx512 gives for
// the same operands. The words are grown on demand and kept for the next
// pack into the same object; packing is the only writer, products only read
// them (several threads may share one packed A).
struct Bf16PackedA {
  struct Free {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  bool trans = false;  // A was given transposed: op(A) = A^T
  int m = 0, k = 0;    // op(A) is m × k
  std::unique_ptr<uint32_t[], Free> words;  // 64-byte aligned
  size_t capacity = 0;                      // words allocated
};

// Packs op(A) (m × k; A as bf16gemm takes it) into `out`. Both require
// bf16gemm_avx512_supported(): elsewhere, call bf16gemm with A each time.
void bf16gemm_pack_a(bool trans_a, int m, int k, const float* a, int lda, Bf16PackedA& out);
// The words bf16gemm_pack_a keeps for an m × k op(A) (0 where the
// avx512_bf16 path is not built), for memory estimates.
size_t bf16gemm_packed_a_words(int m, int k);
// C[M×N] = alpha · op(Â) · op(B̂) + beta · C for a packed op(A) (M = a.m,
// K = a.k): bf16gemm_avx512 with A already packed.
void bf16gemm_avx512_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                              const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace hpmc
